/* Unit tests of the zygote's pure parts: SHA-256/HMAC (FIPS and RFC 4231
 * vectors) and the pool description parser. Prints "N passed, N failed". */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "sha256.h"
#include "zygote.h"

static int passed, failed;

void swift_log(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void check(int ok, const char *what)
{
	if (ok) {
		passed++;
	} else {
		failed++;
		printf("FAIL: %s\n", what);
	}
}

static void hex(const uint8_t *b, size_t n, char *out)
{
	size_t i;

	for (i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

static void test_sha256(void)
{
	static const struct {
		const char *in, *want;
	} v[] = {
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		 "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
	};
	uint8_t d[32];
	char h[65];
	size_t i;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		sha256_ctx c;

		sha256_init(&c);
		sha256_update(&c, v[i].in, strlen(v[i].in));
		sha256_final(&c, d);
		hex(d, 32, h);
		check(!strcmp(h, v[i].want), "sha256 vector");
	}
	{
		/* one million 'a', fed in uneven pieces */
		sha256_ctx c;
		char a[997];
		size_t left = 1000000;

		memset(a, 'a', sizeof(a));
		sha256_init(&c);
		while (left) {
			size_t n = left < sizeof(a) ? left : sizeof(a);
			sha256_update(&c, a, n);
			left -= n;
		}
		sha256_final(&c, d);
		hex(d, 32, h);
		check(!strcmp(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"), "sha256 million a");
	}
}

static void test_hmac(void)
{
	uint8_t key[131], out[32], other[32];
	char h[65];

	/* RFC 4231 test case 2 */
	hmac_sha256((const uint8_t *)"Jefe", 4, "what do ya want for nothing?", 28, out);
	hex(out, 32, h);
	check(!strcmp(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"), "hmac rfc4231 #2");
	/* RFC 4231 test case 6: a key longer than the block */
	memset(key, 0xaa, sizeof(key));
	hmac_sha256(key, sizeof(key), "Test Using Larger Than Block-Size Key - Hash Key First", 54, out);
	hex(out, 32, h);
	check(!strcmp(h, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"), "hmac rfc4231 #6");
	memcpy(other, out, 32);
	check(swift_mac_equal(out, other), "mac equal");
	other[31] ^= 1;
	check(!swift_mac_equal(out, other), "mac differs");
}

static int load(const char *text, struct swift_cfg *c, char *err, size_t n)
{
	char path[] = "/tmp/swift-unit-XXXXXX";
	int fd = mkstemp(path), rc;

	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		return -2;
	close(fd);
	rc = swift_cfg_load(c, path, err, n);
	unlink(path);
	return rc;
}

static void test_config(void)
{
	struct swift_cfg c;
	char err[512];
	static const char *bad[] = {
		"pool 9999\n", "port 0\n", "listen nowhere\n", "listen 1.2.3.4:0\n", "peer b\n",
		"peer b 10.0.0.1\n", "peer b 10.0.0.1:70000\n", "gid_index -2\n", "msg_size 12\n",
		"colour blue\n", "new_dest 2\n",
	};
	size_t i;

	check(load("# comment\nname a\ntenant t1\ndevice rxe0\npool 3\nlisten 10.0.2.15:18516\n"
		   "peer b 10.0.2.15:18517\npeer c host-c:1\nsocket /tmp/s\nkey_file /k\nmsg_size 8192\n",
		   &c, err, sizeof(err)) == 0, "good config loads");
	check(!strcmp(c.name, "a") && !strcmp(c.tenant, "t1") && !strcmp(c.device, "rxe0"), "names");
	check(c.pool == 3 && c.listen_port == 18516 && !strcmp(c.listen_host, "10.0.2.15"), "pool and listen");
	check(c.npeers == 2 && !strcmp(c.peers[1].name, "c") && !strcmp(c.peers[1].host, "host-c") &&
	      c.peers[1].port == 1, "peers");
	check(c.msg_size == 8192 && !strcmp(c.socket_path, "/tmp/s") && !strcmp(c.key_file, "/k"), "paths");
	check(load("", &c, err, sizeof(err)) == 0 && c.pool == 1 && c.listen_port == 18515 &&
	      c.gid_index == -1 && c.allow_new_dest == 1, "defaults");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = load(bad[i], &c, err, sizeof(err));
		char what[1024];

		snprintf(what, sizeof(what), "refuses %.*s (%s)", (int)strcspn(bad[i], "\n"), bad[i], err);
		check(rc != 0 && strstr(err, ":1:") != NULL, what);
	}
	check(swift_cfg_load(&c, "/nonexistent/pool.conf", err, sizeof(err)) != 0 && strstr(err, "nonexistent"),
	      "missing file named");
	check(load("accept 10.0.2.0/24\naccept 192.168.7.9/32\n", &c, err, sizeof(err)) == 0 && c.naccept == 2,
	      "accept lines load");
	check(swift_cfg_accepts(&c, htonl(0x0a00020f)) && swift_cfg_accepts(&c, htonl(0xc0a80709)), "accepts its networks");
	check(!swift_cfg_accepts(&c, htonl(0x7f000001)) && !swift_cfg_accepts(&c, htonl(0x0a000301)) &&
	      !swift_cfg_accepts(&c, htonl(0xc0a80708)), "refuses other addresses");
	check(load("", &c, err, sizeof(err)) == 0 && swift_cfg_accepts(&c, htonl(0x7f000001)), "no accept line: any");
	check(load("accept none\n", &c, err, sizeof(err)) == 0 && !swift_cfg_accepts(&c, htonl(0x0a00020f)),
	      "accept none: nobody");
	check(load("accept fd00::/8\n", &c, err, sizeof(err)) == 0 && !swift_cfg_accepts(&c, htonl(0x0a00020f)),
	      "an IPv6 network admits no IPv4 peer");
	check(load("accept 0.0.0.0/0\n", &c, err, sizeof(err)) == 0 && swift_cfg_accepts(&c, htonl(0x01020304)),
	      "accept 0.0.0.0/0: any");
	{
		static const char *bad_accept[] = {"accept 10.0.0.0\n", "accept 10.0.0.0/33\n", "accept 300.0.0.0/8\n",
						   "accept 10.0.0.0/8x\n", "accept fd00::1\n", "accept\n"};
		size_t k;

		for (k = 0; k < sizeof(bad_accept) / sizeof(bad_accept[0]); k++)
			check(load(bad_accept[k], &c, err, sizeof(err)) != 0 && strstr(err, ":1:"), bad_accept[k]);
	}
}

static void test_share(void)
{
	static const struct {
		const char *dev;
		uint32_t vendor, part;
		const char *provider;
		enum swift_share want;
	} tc[] = {
		{"rxe0", 0xffffff, 0, "rxe", SHARE_RELAY},
		{"rxe_eth1", 0xffffff, 0, "rxe_eth", SHARE_RELAY}, /* a soft device by vendor id */
		{"siw0", 0x626d74, 0, "siw", SHARE_RELAY},
		{"mlx5_0", 0x02c9, 4125, "mlx5", SHARE_BUFFERS},
		{"mlx5_12", 0, 0, "mlx5", SHARE_BUFFERS}, /* vendor unknown: by name */
		{"mlx4_0", 0x02c9, 4099, "mlx4", SHARE_NONE},
		{"ibp1s0", 0x02c9, 4099, "ibp1s", SHARE_NONE},
		{"efa_0", 0x1d0f, 0xefa1, "efa", SHARE_NONE},
		{"irdma0", 0x8086, 0x1592, "irdma", SHARE_NONE},
		{"rxe", 0, 0, "rxe", SHARE_RELAY},
		{"0", 0, 0, "", SHARE_NONE},
	};
	size_t i;

	for (i = 0; i < sizeof(tc) / sizeof(tc[0]); i++) {
		char prov[32], what[160];

		swift_provider_name(tc[i].dev, prov, sizeof(prov));
		snprintf(what, sizeof(what), "provider of %s is %s (got %s)", tc[i].dev, tc[i].provider, prov);
		check(!strcmp(prov, tc[i].provider), what);
		snprintf(what, sizeof(what), "%s shares by %s (got %s)", tc[i].dev, swift_share_name(tc[i].want),
			 swift_share_name(swift_share_of(prov, tc[i].vendor, tc[i].part)));
		check(swift_share_of(prov, tc[i].vendor, tc[i].part) == tc[i].want, what);
	}
}

/* The parent-domain allocator hands out page-aligned MAP_SHARED memory: what
 * a forked child writes there (a WQE, a doorbell record) the zygote, and so
 * the device, sees. */
static void test_shm(void)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *a = swift_shm_alloc(NULL, NULL, 100, 64, 0), *b;
	void *many[4 * SWIFT_MAX_QPS + 16];
	int status = -1, n;
	pid_t pid;

	check(a != NULL && ((uintptr_t)a % page) == 0, "shm: page-aligned block");
	if (!a)
		return;
	check(a[99] == 0, "shm: zeroed");
	pid = fork();
	if (pid == 0) {
		memset(a, 0x5a, 100);
		_exit(0);
	}
	waitpid(pid, &status, 0);
	check(status == 0 && a[0] == 0x5a && a[99] == 0x5a, "shm: a forked child's writes are seen by the parent");
	check(swift_shm_alloc(NULL, NULL, 100, page * 2, 0) == NULL, "shm: refuses alignment above a page");
	b = swift_shm_alloc(NULL, NULL, 3 * page + 1, 8, 0);
	check(b != NULL && b != a, "shm: a multi-page block");
	if (b) {
		b[3 * page] = 1; /* the last byte asked for is mapped */
		swift_shm_free(NULL, NULL, b, 0);
	}
	swift_shm_free(NULL, NULL, a, 0);
	for (n = 0; n < (int)(sizeof(many) / sizeof(many[0])); n++)
		if (!(many[n] = swift_shm_alloc(NULL, NULL, 8, 8, 0)))
			break;
	check(n == (int)(sizeof(many) / sizeof(many[0])), "shm: fills its block table");
	check(swift_shm_alloc(NULL, NULL, 8, 8, 0) == NULL, "shm: a full table fails the allocation, no private fallback");
	while (n-- > 0)
		swift_shm_free(NULL, NULL, many[n], 0);
	a = swift_shm_alloc(NULL, NULL, 8, 8, 0);
	check(a != NULL, "shm: blocks are reusable after free");
	swift_shm_free(NULL, NULL, a, 0);
}

int main(void)
{
	test_sha256();
	test_hmac();
	test_config();
	test_share();
	test_shm();
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
