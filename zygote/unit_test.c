/* Unit tests of everything in the zygote that needs no device, built with
 * AddressSanitizer and UndefinedBehaviorSanitizer: SHA-256/HMAC (FIPS and
 * RFC 4231 vectors), X25519 (RFC 7748 vectors), the pool description parser, the parent-domain
 * allocator, control request decoding (through real sockets, with the fds
 * counted), the scheduling step, relay authorization, and the exchange:
 * both ends against each other over a fake pool, the refusals, and a
 * mutation loop over hostile transcripts. Prints "N passed, N failed". */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "sha256.h"
#include "x25519.h"
#include "zygote.h"

static int passed, failed;

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
		check(!strcmp(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
		      "sha256 million a");
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

/* swift_seal against vectors computed with another HMAC-SHA-256 (Python's
 * hmac module): key 00..1f, role 'Q', blocks 0 and 1. */
static void test_seal(void)
{
	uint8_t key[32], buf[44], m[43];
	const char *msg = "attack at dawn, QPN 0x000123 PSN 0x00abcdef";
	char h[2 * sizeof(buf) + 1];
	size_t i;

	for (i = 0; i < sizeof(key); i++)
		key[i] = (uint8_t)i;
	memset(buf, 0, sizeof(buf));
	swift_seal(key, 'Q', buf, sizeof(buf));
	hex(buf, sizeof(buf), h);
	check(!strcmp(h, "fccf27a3904b6e1fa081f7aacbf5a6bbccc2f1ffd63c0d8dd56a3517ae9c91ac909cf0cc50aaf0260572c259"),
	      "seal: the keystream of two blocks");
	memcpy(m, msg, sizeof(m));
	swift_seal(key, 'Q', m, sizeof(m));
	hex(m, sizeof(m), h);
	check(!strcmp(h, "9dbb53c2f3204e7ed4a193cbbc9b8a9b9d92bfdfe6443dbde55b07248eccc2e2b0ac88fc60cb92456117a4"),
	      "seal: a message of 43 bytes");
	swift_seal(key, 'Q', m, sizeof(m));
	check(!memcmp(m, msg, sizeof(m)), "seal: applied again, it restores the message");
	memset(buf, 0, sizeof(buf));
	swift_seal(key, 'R', buf, 8);
	hex(buf, 8, h);
	check(strncmp(h, "fccf27a3904b6e1f", 16) != 0, "seal: another role, another keystream");
}

static void unhex(const char *s, uint8_t *out, size_t n)
{
	size_t i;
	unsigned v;

	for (i = 0; i < n && sscanf(s + 2 * i, "%2x", &v) == 1; i++)
		out[i] = (uint8_t)v;
}

/* X25519 against RFC 7748: section 5.2's two vectors (the second has the
 * top bit of u set, which is ignored), the iterated one (1 and 1000
 * times), and section 6.1's Diffie-Hellman between Alice and Bob */
static void test_x25519(void)
{
	static const struct {
		const char *scalar, *u, *out;
	} v[] = {
		{"a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
		 "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
		 "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"},
		{"4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d",
		 "e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493",
		 "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957"},
	};
	uint8_t k[32], u[32], out[32], a[32], b[32], apub[32], bpub[32], s1[32], s2[32];
	char h[65], what[200];
	size_t i;
	int n;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		unhex(v[i].scalar, k, 32);
		unhex(v[i].u, u, 32);
		swift_x25519(out, k, u);
		hex(out, 32, h);
		snprintf(what, sizeof(what), "x25519: RFC 7748 vector %zu (%s)", i + 1, h);
		check(!strcmp(h, v[i].out), what);
	}
	memset(k, 0, 32);
	k[0] = 9;
	memcpy(u, k, 32);
	for (n = 1; n <= 1000; n++) {
		swift_x25519(out, k, u);
		memcpy(u, k, 32);
		memcpy(k, out, 32);
		if (n == 1) {
			hex(k, 32, h);
			check(!strcmp(h, "422c8e7a6227d7bca1350b3e2bb7279f7897b87bb6854b783c60e80311ae3079"),
			      "x25519: RFC 7748, iterated once");
		}
	}
	hex(k, 32, h);
	check(!strcmp(h, "684cf59ba83309552800ef566f2f4d3c1c3887c49360e3875f2eb94d99532c51"),
	      "x25519: RFC 7748, iterated 1000 times");
	unhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a", a, 32);
	unhex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb", b, 32);
	swift_x25519_base(apub, a);
	swift_x25519_base(bpub, b);
	hex(apub, 32, h);
	check(!strcmp(h, "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"),
	      "x25519: Alice's public key");
	hex(bpub, 32, h);
	check(!strcmp(h, "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"),
	      "x25519: Bob's public key");
	swift_x25519(s1, a, bpub);
	swift_x25519(s2, b, apub);
	hex(s1, 32, h);
	check(!strcmp(h, "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742") && !memcmp(s1, s2, 32),
	      "x25519: Alice and Bob share the RFC's secret");
	/* a point of small order (u = 0, u = 1) gives all zeros: refused */
	memset(u, 0, 32);
	swift_x25519(out, a, u);
	check(swift_x25519_zero(out), "x25519: u = 0 gives the zero secret, which is detected");
	u[0] = 1;
	swift_x25519(out, a, u);
	check(swift_x25519_zero(out) && !swift_x25519_zero(s1), "x25519: so does u = 1; a real secret is not zero");
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
		"pool 9999\n",
		"port 0\n",
		"listen nowhere\n",
		"listen 1.2.3.4:0\n",
		"peer b\n",
		"peer b 10.0.0.1\n",
		"peer b 10.0.0.1:70000\n",
		"gid_index -2\n",
		"msg_size 12\n",
		"colour blue\n",
		"new_dest 2\n",
		"remote_access 2\n",
		"name a\x1b[2J\n",
		"tenant \n",
		"function_uids 0\n",
		"function_uids 4294967200\n",
		"function_uids -5\n",
		"qp_limit 0\n",
		"qp_limit -1\n",
		"qp_limit 16777217\n",
		"device rxe0rxe0rxe0rxe0rxe0rxe0rxe0rxe0rxe0rxe0rxe0rxe0rxe0rxe0rxe0rxe0rxe0\n",
		"socket "
		"/run/swift/a-socket-path-that-goes-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-"
		"and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-"
		"on-and-"
		"on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-and-on-"
		"and-on-"
		"and-on\n",
	};
	size_t i;

	check(load("# comment\nname a\ntenant t1\ndevice rxe0\npool 3\nlisten 10.0.2.15:18516\n"
		   "peer b 10.0.2.15:18517\npeer c host-c:1\nsocket /tmp/s\nkey_file /k\nmsg_size 8192\n",
		   &c, err, sizeof(err)) == 0,
	      "good config loads");
	check(!strcmp(c.name, "a") && !strcmp(c.tenant, "t1") && !strcmp(c.device, "rxe0"), "names");
	check(c.pool == 3 && c.listen_port == 18516 && !strcmp(c.listen_host, "10.0.2.15"), "pool and listen");
	check(c.npeers == 2 && !strcmp(c.peers[1].name, "c") && !strcmp(c.peers[1].host, "host-c") &&
		      c.peers[1].port == 1,
	      "peers");
	check(c.msg_size == 8192 && !strcmp(c.socket_path, "/tmp/s") && !strcmp(c.key_file, "/k"), "paths");
	check(load("", &c, err, sizeof(err)) == 0 && c.pool == 1 && c.listen_port == 18515 && c.gid_index == -1 &&
		      c.allow_new_dest == 1 && c.remote_access == 0,
	      "defaults");
	check(load("remote_access 1\n", &c, err, sizeof(err)) == 0 && c.remote_access == 1, "remote access");
	check(load("function_uids 2000000000\n", &c, err, sizeof(err)) == 0 && c.function_uid_base == 2000000000u,
	      "function uids");
	check(load("peer b 10.0.0.1:1\npeer b 10.0.0.2:2\n", &c, err, sizeof(err)) != 0 && strstr(err, ":2:"),
	      "refuses a peer named twice");
	check(load("pool 4\npeer b 10.0.0.1:1\npeer c 10.0.0.2:1\nqp_limit 8\n", &c, err, sizeof(err)) == 0 &&
		      c.qp_limit == 8,
	      "qp_limit: a pool that fits");
	check(load("pool 4\npeer b 10.0.0.1:1\npeer c 10.0.0.2:1\nqp_limit 7\n", &c, err, sizeof(err)) != 0 &&
		      strstr(err, "pool 4 x 2 peers exceeds the container's QP limit 7"),
	      "qp_limit: a pool that does not fit is refused");
	check(load("", &c, err, sizeof(err)) == 0 && c.qp_limit == 0, "qp_limit: none by default");
	{
		/* a pod's names: 63 + "." + 63 characters fit, one more does not */
		char conf[512], l63[64];

		memset(l63, 'n', 63);
		l63[63] = 0;
		snprintf(conf, sizeof(conf), "name %s.%s\npeer %s.%s 10.0.0.1:1\n", l63, l63, l63, l63);
		check(load(conf, &c, err, sizeof(err)) == 0 && strlen(c.name) == 127 &&
			      strlen(c.peers[0].name) == 127 && swift_find_peer_named(&c, l63) == 0,
		      "qualified names of 127 characters load, and a bare one names the peer");
		snprintf(conf, sizeof(conf), "name %s.%sn\n", l63, l63);
		check(load(conf, &c, err, sizeof(err)) != 0 && strstr(err, ":1:"),
		      "a name of 128 characters is refused");
		/* a name as configured wins over a bare one in our namespace */
		check(load("name a.team-a\npeer b.team-a 10.0.0.1:1\npeer b 10.0.0.2:1\n", &c, err, sizeof(err)) == 0 &&
			      swift_find_peer_named(&c, "b") == 1 && swift_find_peer_named(&c, "b.team-a") == 0,
		      "a peer's name as configured is matched before a bare name's qualified form");
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = load(bad[i], &c, err, sizeof(err));
		char what[1024];

		/* the one unknown key says so; every other line names its bad value */
		const char *want = strncmp(bad[i], "colour", 6) ? "bad value for " : "unknown key colour";

		snprintf(what, sizeof(what), "refuses %.*s (%s)", (int)strcspn(bad[i], "\n"), bad[i], err);
		check(rc != 0 && strstr(err, ":1:") != NULL && strstr(err, want) != NULL, what);
	}
	check(swift_cfg_load(&c, "/nonexistent/pool.conf", err, sizeof(err)) != 0 && strstr(err, "nonexistent"),
	      "missing file named");
	check(load("accept 10.0.2.0/24\naccept 192.168.7.9/32\n", &c, err, sizeof(err)) == 0 && c.naccept == 2,
	      "accept lines load");
	check(swift_cfg_accepts(&c, htonl(0x0a00020f)) && swift_cfg_accepts(&c, htonl(0xc0a80709)),
	      "accepts its networks");
	check(!swift_cfg_accepts(&c, htonl(0x7f000001)) && !swift_cfg_accepts(&c, htonl(0x0a000301)) &&
		      !swift_cfg_accepts(&c, htonl(0xc0a80708)),
	      "refuses other addresses");
	check(load("", &c, err, sizeof(err)) == 0 && swift_cfg_accepts(&c, htonl(0x7f000001)), "no accept line: any");
	check(load("accept none\n", &c, err, sizeof(err)) == 0 && !swift_cfg_accepts(&c, htonl(0x0a00020f)),
	      "accept none: nobody");
	check(load("accept fd00::/8\n", &c, err, sizeof(err)) == 0 && !swift_cfg_accepts(&c, htonl(0x0a00020f)),
	      "an IPv6 network admits no IPv4 peer");
	check(load("accept 0.0.0.0/0\n", &c, err, sizeof(err)) == 0 && swift_cfg_accepts(&c, htonl(0x01020304)),
	      "accept 0.0.0.0/0: any");
	check(load("dial 10.0.0.0/8 18515-18600\ndial 192.168.7.9/32 1-65535\n", &c, err, sizeof(err)) == 0 &&
		      c.ndial == 2,
	      "dial lines load");
	check(swift_cfg_dials(&c, htonl(0x0a00020f), 18515) && swift_cfg_dials(&c, htonl(0x0a00020f), 18600) &&
		      swift_cfg_dials(&c, htonl(0xc0a80709), 22),
	      "dials its networks at their ports");
	check(!swift_cfg_dials(&c, htonl(0x0a00020f), 18514) && !swift_cfg_dials(&c, htonl(0x0a00020f), 18601) &&
		      !swift_cfg_dials(&c, htonl(0x7f000001), 18515) && !swift_cfg_dials(&c, htonl(0xc0a80708), 22),
	      "refuses other addresses and ports");
	check(load("", &c, err, sizeof(err)) == 0 && swift_cfg_dials(&c, htonl(0x7f000001), 1), "no dial line: any");
	check(load("dial none\n", &c, err, sizeof(err)) == 0 && !swift_cfg_dials(&c, htonl(0x0a00020f), 18515),
	      "dial none: nobody");
	{
		static const char *bad_dial[] = {"dial 10.0.0.0/8\n",
						 "dial 10.0.0.0/8 0-10\n",
						 "dial 10.0.0.0/8 10-70000\n",
						 "dial 10.0.0.0/8 20-10\n",
						 "dial 10.0.0.0/33 1-2\n",
						 "dial fd00::/8 1-2\n",
						 "dial 10.0.0.0/8 1-2x\n",
						 "dial\n",
						 "dial 4294967306.0.0.0/8 1-2\n",
						 "dial 10.0.0.0/8 -4294967295-10\n",
						 "dial +10.+0.0.0/8 +1-+2\n",
						 "dial 10.0.0.0/ 8 1-2\n",
						 "dial 10.0.0.0/8 1- 2\n",
						 "dial 10.0.0.0/8 01-000002x\n",
						 "dial 10.0.0.0/8 1-100000\n",
						 "dial 10.0.0.0/8  1-2\n"};
		size_t k;

		for (k = 0; k < sizeof(bad_dial) / sizeof(bad_dial[0]); k++)
			check(load(bad_dial[k], &c, err, sizeof(err)) != 0 && strstr(err, ":1:"), bad_dial[k]);
	}
	{
		static const char *bad_accept[] = {"accept 10.0.0.0\n",    "accept 10.0.0.0/33\n",
						   "accept 300.0.0.0/8\n", "accept 10.0.0.0/8x\n",
						   "accept fd00::1\n",     "accept\n",
						   "accept 10.0.0.0/ 8\n", "accept 10.0.0.0/+8\n",
						   "accept 10.0.0.0/-0\n", "accept 10.0.0.0/08x\n",
						   "accept 10.0.0.0/8 \n"};
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
 * the device, sees. Each block is recorded as the row's being created. */
static void test_shm(void)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct swift_shm *shm = calloc(1, sizeof(*shm));
	void *many[SWIFT_SHM_BLOCKS];
	uint8_t *a, *b;
	int status = -1, n, i, found = 0;
	pid_t pid;

	shm->current_row = 7;
	a = swift_shm_alloc(NULL, shm, 100, 64, 0);
	check(a != NULL && ((uintptr_t)a % page) == 0, "shm: page-aligned block");
	if (!a)
		return;
	for (i = 0; i < SWIFT_SHM_BLOCKS; i++)
		found |= shm->blocks[i].p == a && shm->blocks[i].row == 7;
	check(found, "shm: the block is recorded as row 7's");
	check(swift_shm_alloc(NULL, NULL, 100, 64, 0) == NULL, "shm: no context, no memory");
	check(a[99] == 0, "shm: zeroed");
	pid = fork();
	if (pid == 0) {
		memset(a, 0x5a, 100);
		_exit(0);
	}
	waitpid(pid, &status, 0);
	check(status == 0 && a[0] == 0x5a && a[99] == 0x5a, "shm: a forked child's writes are seen by the parent");
	check(swift_shm_alloc(NULL, shm, 100, page * 2, 0) == NULL, "shm: refuses alignment above a page");
	b = swift_shm_alloc(NULL, shm, 3 * page + 1, 8, 0);
	check(b != NULL && b != a, "shm: a multi-page block");
	if (b) {
		b[3 * page] = 1; /* the last byte asked for is mapped */
		swift_shm_free(NULL, shm, b, 0);
	}
	swift_shm_free(NULL, shm, a, 0);
	for (n = 0; n < SWIFT_SHM_BLOCKS; n++)
		if (!(many[n] = swift_shm_alloc(NULL, shm, 8, 8, 0)))
			break;
	check(n == SWIFT_SHM_BLOCKS, "shm: fills its block table");
	check(swift_shm_alloc(NULL, shm, 8, 8, 0) == NULL,
	      "shm: a full table fails the allocation, no private fallback");
	while (n-- > 0)
		swift_shm_free(NULL, shm, many[n], 0);
	a = swift_shm_alloc(NULL, shm, 8, 8, 0);
	check(a != NULL, "shm: blocks are reusable after free");
	swift_shm_free(NULL, shm, a, 0);
	free(shm);
}

/* ---- control requests ---------------------------------------------------- */

/* mkreq builds a request's bytes: header, then the strings of args
 * (NUL-separated, argc of them) exactly. */
static size_t mkreq(uint8_t *b, uint32_t flags, const char *peer, uint32_t nqp, uint32_t argc, const char *args,
		    size_t argslen)
{
	memset(b, 0, SWIFT_REQ_HDR);
	memcpy(b, SWIFT_REQ_MAGIC, 4);
	memcpy(b + 4, &flags, 4);
	if (peer)
		memcpy(b + 8, peer, strlen(peer));
	memcpy(b + offsetof(struct swift_req, nqp), &nqp, 4);
	memcpy(b + offsetof(struct swift_req, argc), &argc, 4);
	memcpy(b + SWIFT_REQ_HDR, args, argslen);
	return SWIFT_REQ_HDR + argslen;
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

static int send_fds(int s, const void *buf, size_t len, int nfds)
{
	union {
		char b[CMSG_SPACE(16 * sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr mh;
	int fds[16], i, rc;

	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	for (i = 0; i < nfds; i++)
		fds[i] = dup(2);
	if (nfds) {
		struct cmsghdr *h;

		mh.msg_control = cm.b;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		h = CMSG_FIRSTHDR(&mh);
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(h), fds, sizeof(int) * (size_t)nfds);
	}
	rc = (int)sendmsg(s, &mh, 0);
	for (i = 0; i < nfds; i++)
		close(fds[i]);
	return rc;
}

/* through: send buf with nfds fds over a SOCK_SEQPACKET pair, receive and
 * decode it as the zygote does, close what the zygote would close. Returns
 * the decode status; *leaked is the change in this process's open fds. */
static int through(const void *buf, size_t len, int nfds, struct swift_request *req, char *err, size_t errlen,
		   int *leaked)
{
	union {
		struct swift_req r;
		uint8_t b[sizeof(struct swift_req) + 1];
	} u;
	int sp[2], fds[3], got, flags, before, status, i;
	ssize_t n;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp))
		return -1;
	before = open_fds();
	send_fds(sp[1], buf, len, nfds);
	n = swift_ctl_recv(sp[0], u.b, sizeof(u.b), fds, 3, &got, &flags);
	status = n < 0 ? -1 : swift_req_decode(u.b, (size_t)n, flags, fds, got, req, err, errlen);
	if (status)
		for (i = 0; i < got; i++)
			close(fds[i]);
	else
		for (i = 0; i < 3; i++)
			if (req->fds[i] >= 0)
				close(req->fds[i]);
	*leaked = open_fds() - before;
	close(sp[0]);
	close(sp[1]);
	return status;
}

static void test_requests(void)
{
	static uint8_t big[sizeof(struct swift_req) + 64];
	uint8_t b[sizeof(struct swift_req)];
	struct swift_request req;
	char err[256], what[400];
	size_t n;
	int leaked, st;

	/* a good request, and what it decodes to */
	n = mkreq(b, SWIFT_REQ_NEW, "b", 2, 3, "echo\0-n\0hi", 11);
	st = through(b, n, 3, &req, err, sizeof(err), &leaked);
	check(st == 0 && req.argc == 3 && req.nqp == 2 && !strcmp(req.peer, "b") && req.flags == SWIFT_REQ_NEW &&
		      !memcmp(req.args, "echo\0-n\0hi", 11) && req.argslen == 11,
	      "request: a good one decodes");
	check(leaked == 0, "request: a good one's fds are all accounted for");
	/* the stale-buffer case: a shorter request after a longer one must not
	 * see the longer one's arguments */
	n = mkreq(b, 0, "", 0, 1, "noop", 5);
	st = through(b, n, 3, &req, err, sizeof(err), &leaked);
	check(st == 0 && req.argc == 1 && req.argslen == 5 && req.args[5] == 0 && req.args[8] == 0,
	      "request: decoded within its own bytes only");
	/* fd counts: 0, 1, 2 and 4 are refused, and nothing is kept */
	{
		static const int counts[] = {0, 1, 2, 4, 7};
		size_t k;

		for (k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
			n = mkreq(b, 0, "", 0, 1, "noop", 5);
			st = through(b, n, counts[k], &req, err, sizeof(err), &leaked);
			snprintf(what, sizeof(what), "request with %d fds refused (%s) and none leaked (%d)", counts[k],
				 err, leaked);
			check(st == EINVAL && leaked == 0, what);
		}
	}
	/* a status request takes no fds, no arguments */
	n = mkreq(b, SWIFT_REQ_STATUS, "", 0, 0, "", 0);
	check(through(b, n, 0, &req, err, sizeof(err), &leaked) == 0 && req.flags == SWIFT_REQ_STATUS && leaked == 0,
	      "request: status");
	check(through(b, n, 3, &req, err, sizeof(err), &leaked) == EINVAL && leaked == 0, "request: status with fds");
	n = mkreq(b, SWIFT_REQ_STATUS, "", 0, 1, "x", 2);
	check(through(b, n, 0, &req, err, sizeof(err), &leaked) == EINVAL, "request: status with an argument");
	/* a connect request: the peer, nqp QP records (44 bytes each), no
	 * arguments, no fds */
	{
		uint8_t recs[3 * SWIFT_QPINFO_WIRE];
		struct swift_qpinfo q = {.qpn = 0x11, .psn = 0x222, .lid = 3}, back[3];
		static const struct {
			const char *name;
			uint32_t flags, nqp, argc;
			const char *peer;
			size_t len;
			int nfds, zero_qpn, want;
		} cc[] = {
			{"connect: two QPs", SWIFT_REQ_CONNECT, 2, 0, "b", 2 * SWIFT_QPINFO_WIRE, 0, 0, 0},
			{"connect: with fds", SWIFT_REQ_CONNECT, 2, 0, "b", 2 * SWIFT_QPINFO_WIRE, 3, 0, EINVAL},
			{"connect: with another flag", SWIFT_REQ_CONNECT | SWIFT_REQ_OWN, 2, 0, "b",
			 2 * SWIFT_QPINFO_WIRE, 0, 0, EINVAL},
			{"connect: no peer", SWIFT_REQ_CONNECT, 2, 0, "", 2 * SWIFT_QPINFO_WIRE, 0, 0, EINVAL},
			{"connect: no QPs", SWIFT_REQ_CONNECT, 0, 0, "b", 0, 0, 0, EINVAL},
			{"connect: 65 QPs", SWIFT_REQ_CONNECT, 65, 0, "b", 2 * SWIFT_QPINFO_WIRE, 0, 0, EINVAL},
			{"connect: records short of nqp", SWIFT_REQ_CONNECT, 3, 0, "b", 2 * SWIFT_QPINFO_WIRE, 0, 0,
			 EINVAL},
			{"connect: records beyond nqp", SWIFT_REQ_CONNECT, 1, 0, "b", 2 * SWIFT_QPINFO_WIRE, 0, 0,
			 EINVAL},
			{"connect: with an argument count", SWIFT_REQ_CONNECT, 2, 1, "b", 2 * SWIFT_QPINFO_WIRE, 0, 0,
			 EINVAL},
			{"connect: QP number 0", SWIFT_REQ_CONNECT, 2, 0, "b", 2 * SWIFT_QPINFO_WIRE, 0, 1, EINVAL},
		};
		size_t k;

		memset(recs, 0, sizeof(recs));
		for (k = 0; k < 3; k++) {
			q.qpn = 0x11 + (uint32_t)k;
			swift_qpinfo_put(recs + SWIFT_QPINFO_WIRE * k, &q);
		}
		for (k = 0; k < sizeof(cc) / sizeof(cc[0]); k++) {
			uint8_t r2[sizeof(recs)];

			memcpy(r2, recs, sizeof(r2));
			if (cc[k].zero_qpn)
				memset(r2 + SWIFT_QPINFO_WIRE, 0, 4);
			n = mkreq(b, cc[k].flags, cc[k].peer, cc[k].nqp, cc[k].argc, (const char *)r2, cc[k].len);
			st = through(b, n, cc[k].nfds, &req, err, sizeof(err), &leaked);
			snprintf(what, sizeof(what), "request: %s -> %d (%s), fds leaked %d", cc[k].name, st,
				 st ? err : "ok", leaked);
			check(st == cc[k].want && leaked == 0, what);
		}
		n = mkreq(b, SWIFT_REQ_CONNECT, "b", 2, 0, (const char *)recs, 2 * SWIFT_QPINFO_WIRE);
		st = through(b, n, 0, &req, err, sizeof(err), &leaked);
		check(st == 0 && req.flags == SWIFT_REQ_CONNECT && req.nqp == 2 && !strcmp(req.peer, "b") &&
			      req.argslen == 2 * SWIFT_QPINFO_WIRE &&
			      swift_qpinfos_get((const uint8_t *)req.args, 2, back, err, sizeof(err)) == 0 &&
			      back[0].qpn == 0x11 && back[1].qpn == 0x12 && back[1].psn == 0x222 && back[1].lid == 3,
		      "request: a connect request decodes to its QP records");
	}
	/* larger than any request: truncated by the kernel, refused */
	memcpy(big, b, SWIFT_REQ_HDR);
	check(through(big, sizeof(big), 3, &req, err, sizeof(err), &leaked) == EMSGSIZE && leaked == 0,
	      "request: oversized");
	{
		static const struct {
			const char *name;
			uint32_t flags, nqp, argc;
			const char *peer;
			const char *args;
			size_t len;
			int want;
		} tc[] = {
			{"argc 0", 0, 0, 0, "", "", 0, EINVAL},
			{"argc 256", 0, 0, 256, "", "a", 2, EINVAL},
			{"argc beyond the strings", 0, 0, 3, "", "a\0b", 4, EINVAL},
			{"last string unterminated", 0, 0, 2, "", "a\0b", 3, EINVAL},
			{"bytes after the strings", 0, 0, 1, "", "a\0junk", 6, EINVAL},
			{"empty handler", 0, 0, 1, "", "", 1, EINVAL},
			{"unknown flag", 64, 0, 1, "", "a", 2, EINVAL},
			{"no-qp with all", SWIFT_REQ_NOQP | SWIFT_REQ_ALL, 0, 1, "", "a", 2, EINVAL},
			{"new with own", SWIFT_REQ_NEW | SWIFT_REQ_OWN, 0, 1, "", "a", 2, EINVAL},
			{"all with qps", SWIFT_REQ_ALL, 2, 1, "", "a", 2, EINVAL},
			{"too many QPs", 0, 257, 1, "", "a", 2, EINVAL},
			{"peer with a newline", 0, 0, 1, "b\nfake log line", "a", 2, EINVAL},
			{"255 arguments fit", 0, 0, 255, "", NULL, 0, 0},
		};
		size_t k;

		for (k = 0; k < sizeof(tc) / sizeof(tc[0]); k++) {
			char args[600];
			size_t len = tc[k].len;

			if (!tc[k].args) {
				for (len = 0; len < 510; len += 2)
					args[len] = 'x', args[len + 1] = 0;
			} else {
				memcpy(args, tc[k].args, len);
			}
			n = mkreq(b, tc[k].flags, tc[k].peer, tc[k].nqp, tc[k].argc, args, len);
			st = through(b, n, 3, &req, err, sizeof(err), &leaked);
			snprintf(what, sizeof(what), "request: %s -> %d (%s), fds leaked %d", tc[k].name, st,
				 st ? err : "ok", leaked);
			check(st == tc[k].want && leaked == 0, what);
		}
	}
	/* truncated headers and a wrong magic, decoded directly */
	{
		int fds[3] = {10, 11, 12};
		size_t cut;

		n = mkreq(b, 0, "", 0, 1, "noop", 5);
		for (cut = 0; cut < SWIFT_REQ_HDR; cut++)
			if (swift_req_decode(b, cut, 0, fds, 3, &req, err, sizeof(err)) != EPROTO)
				break;
		check(cut == SWIFT_REQ_HDR, "request: every truncated header refused");
		b[0] = 'X';
		check(swift_req_decode(b, n, 0, fds, 3, &req, err, sizeof(err)) == EPROTO, "request: bad magic");
		memset(b + 8, 'p', SWIFT_NAME_MAX);
		memcpy(b, SWIFT_REQ_MAGIC, 4);
		check(swift_req_decode(b, n, 0, fds, 3, &req, err, sizeof(err)) == EINVAL && strstr(err, "terminated"),
		      "request: unterminated peer");
	}
}

/* ---- the scheduling step -------------------------------------------------- */

/* view_of: a view of a zygote named self with a device and the peers
 * n0 (and n1, when not NULL), no free rows, no QP limit; the caller sets
 * the rest. */
static void view_of(struct swift_view *v, const char *self, const char *n0, const char *n1)
{
	memset(v, 0, sizeof(*v));
	v->have_dev = 1;
	v->qp_room = -1;
	v->self = self;
	v->names[v->npeers++] = n0;
	if (n1)
		v->names[v->npeers++] = n1;
}

/* schedule: the plan for a request of flags and nqp QPs naming peer */
static void schedule(const struct swift_view *v, uint32_t flags, const char *peer, int nqp, struct swift_plan *p)
{
	struct swift_request r;

	memset(&r, 0, sizeof(r));
	r.flags = flags;
	snprintf(r.peer, sizeof(r.peer), "%s", peer);
	r.nqp = nqp;
	swift_schedule(&r, v, p);
}

static void test_schedule(void)
{
	static const struct {
		const char *name;
		uint32_t flags;
		const char *peer;
		int nqp;
		int have_dev, share, allow, free_a, free_b;
		int status, peer_idx, take, newdest, own;
	} tc[] = {
		{"plain fork", SWIFT_REQ_NOQP, "", 0, 1, SHARE_RELAY, 1, 4, 4, 0, -1, 0, 0, 0},
		{"plain fork without a device", SWIFT_REQ_NOQP, "", 0, 0, SHARE_RELAY, 1, 0, 0, 0, -1, 0, 0, 0},
		{"one pooled QP to b", 0, "b", 0, 1, SHARE_RELAY, 1, 4, 4, 0, 1, 1, 0, 0},
		{"three pooled QPs to a", 0, "a", 3, 1, SHARE_RELAY, 1, 4, 0, 0, 0, 3, 0, 0},
		{"first peer with a free QP", 0, "", 0, 1, SHARE_RELAY, 1, 0, 2, 0, 1, 1, 0, 0},
		{"no free QP anywhere: peer 0 on demand", 0, "", 0, 1, SHARE_RELAY, 1, 0, 0, 0, 0, 0, 1, 0},
		{"all free QPs", SWIFT_REQ_ALL, "b", 0, 1, SHARE_RELAY, 1, 4, 3, 0, 1, 3, 0, 0},
		{"all, none free: one on demand", SWIFT_REQ_ALL, "b", 0, 1, SHARE_RELAY, 1, 4, 0, 0, 1, 0, 1, 0},
		{"exhausted: the rest on demand", 0, "a", 6, 1, SHARE_RELAY, 1, 4, 0, 0, 0, 4, 2, 0},
		{"exhausted, on demand not allowed", 0, "a", 6, 1, SHARE_RELAY, 0, 4, 0, EBUSY, 0, 0, 0, 0},
		{"new destination", SWIFT_REQ_NEW, "a", 2, 1, SHARE_RELAY, 1, 4, 0, 0, 0, 0, 2, 0},
		{"new destination not allowed", SWIFT_REQ_NEW, "a", 1, 1, SHARE_RELAY, 0, 4, 0, EBUSY, 0, 0, 0, 0},
		{"on demand beyond an exchange", 0, "a", 100, 1, SHARE_RELAY, 1, 4, 0, EINVAL, 0, 0, 0, 0},
		{"own QPs", SWIFT_REQ_OWN, "b", 2, 1, SHARE_RELAY, 1, 4, 4, 0, 1, 0, 0, 2},
		{"own QPs not allowed", SWIFT_REQ_OWN, "b", 2, 1, SHARE_RELAY, 0, 4, 4, EBUSY, 1, 0, 0, 0},
		{"too many own QPs", SWIFT_REQ_OWN, "b", 65, 1, SHARE_RELAY, 1, 4, 4, EINVAL, 1, 0, 0, 0},
		{"no fork sharing: own QPs", 0, "b", 1, 1, SHARE_NONE, 1, 4, 4, 0, 1, 0, 0, 1},
		{"connect a process's QPs", SWIFT_REQ_CONNECT, "b", 2, 1, SHARE_RELAY, 1, 4, 4, 0, 1, 0, 0, 2},
		{"connect not allowed", SWIFT_REQ_CONNECT, "b", 1, 1, SHARE_RELAY, 0, 4, 4, EBUSY, 1, 0, 0, 0},
		{"connect to an unknown peer", SWIFT_REQ_CONNECT, "zz", 1, 1, SHARE_RELAY, 1, 4, 4, ENOENT, -1, 0, 0,
		 0},
		{"connect without a device", SWIFT_REQ_CONNECT, "b", 1, 0, SHARE_RELAY, 1, 0, 0, ENODEV, -1, 0, 0, 0},
		{"unknown peer", 0, "zz", 0, 1, SHARE_RELAY, 1, 4, 4, ENOENT, -1, 0, 0, 0},
		{"no device", 0, "b", 0, 0, SHARE_RELAY, 1, 0, 0, ENODEV, -1, 0, 0, 0},
	};
	size_t k;

	for (k = 0; k < sizeof(tc) / sizeof(tc[0]); k++) {
		struct swift_view v;
		struct swift_plan p;
		char what[400];

		view_of(&v, "z", "a", "b");
		v.have_dev = tc[k].have_dev;
		v.share = (enum swift_share)tc[k].share;
		v.allow_new_dest = tc[k].allow;
		v.free[0] = tc[k].free_a;
		v.free[1] = tc[k].free_b;
		schedule(&v, tc[k].flags, tc[k].peer, tc[k].nqp, &p);
		snprintf(what, sizeof(what), "schedule: %s: status %d peer %d take %d newdest %d own %d (%s)",
			 tc[k].name, p.status, p.peer, p.take, p.newdest, p.own, p.msg);
		check(p.status == tc[k].status && (p.status || (p.peer == tc[k].peer_idx && p.take == tc[k].take &&
								p.newdest == tc[k].newdest && p.own == tc[k].own)),
		      what);
	}
	{
		struct swift_request r;
		struct swift_view v;
		struct swift_plan p;

		memset(&r, 0, sizeof(r));
		memset(&v, 0, sizeof(v));
		v.have_dev = 1;
		swift_schedule(&r, &v, &p);
		check(p.status == ENOENT && strstr(p.msg, "no peers"), "schedule: a zygote without peers");
	}
	{
		/* a pod's zygote a.team-a: a function names b.team-a as "b" or
		 * in full, and c.team-c only in full; a name of the form of
		 * another namespace, or a prefix, names nothing */
		static const struct {
			const char *self, *want;
			int status, peer;
		} nc[] = {
			{"a.team-a", "b", 0, 0},
			{"a.team-a", "b.team-a", 0, 0},
			{"a.team-a", "c.team-c", 0, 1},
			{"a.team-a", "c", ENOENT, -1},
			{"a.team-a", "b.team-c", ENOENT, -1},
			{"a.team-a", "b.team", ENOENT, -1},
			{"a.team-a", "b.", ENOENT, -1},
			{"a.team-a", "b.team-a.team-a", ENOENT, -1},
			{"a.team-a", "", 0, 0},
			{"a", "b", ENOENT, -1},
			{"a", "b.team-a", 0, 0},
		};
		size_t k;

		for (k = 0; k < sizeof(nc) / sizeof(nc[0]); k++) {
			struct swift_view v;
			struct swift_plan p;
			char what[400];

			view_of(&v, nc[k].self, "b.team-a", "c.team-c");
			v.share = SHARE_RELAY;
			v.free[0] = v.free[1] = 1;
			schedule(&v, 0, nc[k].want, 1, &p);
			snprintf(what, sizeof(what), "schedule: zygote %s, peer named %s: status %d peer %d (%s)",
				 nc[k].self, nc[k].want, p.status, p.peer, p.msg);
			check(p.status == nc[k].status && (p.status || p.peer == nc[k].peer), what);
		}
	}
	{
		/* the container's QP limit: new QPs (on demand, own) only within
		 * the room left; free pool rows are already counted */
		static const struct {
			const char *name;
			uint32_t flags;
			int nqp, free_a, room, status, take, newdest, own;
		} lc[] = {
			{"own within the room", SWIFT_REQ_OWN, 2, 0, 2, 0, 0, 0, 2},
			{"own beyond the room", SWIFT_REQ_OWN, 3, 0, 2, EDQUOT, 0, 0, 0},
			{"connect beyond the room", SWIFT_REQ_CONNECT, 1, 4, 0, EDQUOT, 0, 0, 0},
			{"on demand within", SWIFT_REQ_NEW, 1, 4, 1, 0, 0, 1, 0},
			{"on demand beyond", SWIFT_REQ_NEW, 2, 4, 1, EDQUOT, 0, 0, 0},
			{"the rest on demand beyond", 0, 3, 1, 1, EDQUOT, 0, 0, 0},
			{"free rows with no room", 0, 2, 2, 0, 0, 2, 0, 0},
		};
		size_t i;

		for (i = 0; i < sizeof(lc) / sizeof(lc[0]); i++) {
			struct swift_view v;
			struct swift_plan p;
			char what[400];

			view_of(&v, "z", "a", NULL);
			v.allow_new_dest = 1;
			v.qp_room = lc[i].room;
			v.free[0] = lc[i].free_a;
			schedule(&v, lc[i].flags, "a", lc[i].nqp, &p);
			snprintf(what, sizeof(what), "schedule, QP limit: %s: status %d take %d newdest %d own %d (%s)",
				 lc[i].name, p.status, p.take, p.newdest, p.own, p.msg);
			check(p.status == lc[i].status &&
				      (p.status ? strstr(p.msg, "under the container's QP limit") != NULL
						: p.take == lc[i].take && p.newdest == lc[i].newdest &&
							  p.own == lc[i].own),
			      what);
		}
	}
}

/* ---- the relay ------------------------------------------------------------ */

static void test_relay(void)
{
	struct swift_dev *d = calloc(1, sizeof(*d));
	struct swift_relay_msg m;
	uint32_t ops[2 + 8] = {SWIFT_RELAY_OPS, 2, SWIFT_OP_SEND, 5, 3, 4096, SWIFT_OP_RECV, 5, 15, 0};
	uint8_t own[8 + 44], big[8 + 44 * 65];
	char err[200];
	uint32_t v;
	static const struct {
		const char *name;
		uint32_t op, slot, len;
	} bad[] = {
		{"a send slot beyond the send slots", SWIFT_OP_SEND, SWIFT_SEND_SLOTS, 8},
		{"a send longer than a slot", SWIFT_OP_SEND, 0, 4097},
		{"a receive slot beyond the receive slots", SWIFT_OP_RECV, SWIFT_RECV_SLOTS, 0},
		{"a receive with a length", SWIFT_OP_RECV, 0, 8},
		{"an unknown operation", 7, 0, 0},
		{"operation 0", 0, 0, 0},
	};
	size_t k;

	check(swift_relay_decode(ops, sizeof(ops), 4096, &m, err, sizeof(err)) == 0 && m.n == 2 &&
		      m.ops[0].op == SWIFT_OP_SEND && m.ops[0].len == 4096 && m.ops[1].slot == 15,
	      "relay: a send and a receive");
	for (k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		uint32_t one[6] = {SWIFT_RELAY_OPS, 1, bad[k].op, 5, bad[k].slot, bad[k].len};
		char what[300];

		snprintf(what, sizeof(what), "relay: %s refused", bad[k].name);
		check(swift_relay_decode(one, sizeof(one), 4096, &m, err, sizeof(err)) < 0, what);
	}
	check(swift_relay_decode(ops, 7, 4096, &m, err, sizeof(err)) < 0, "relay: a truncated message");
	check(swift_relay_decode(ops, 3, 4096, &m, err, sizeof(err)) < 0, "relay: shorter than a header");
	check(swift_relay_decode(ops, sizeof(ops) - 16, 4096, &m, err, sizeof(err)) < 0,
	      "relay: fewer operations than it says");
	{
		uint32_t zero[2] = {SWIFT_RELAY_OPS, 0}, many[2] = {SWIFT_RELAY_OPS, SWIFT_RELAY_BATCH + 1};
		uint32_t unknown[6] = {77, 1, SWIFT_OP_SEND, 0, 0, 0};

		check(swift_relay_decode(zero, sizeof(zero), 4096, &m, err, sizeof(err)) < 0, "relay: zero operations");
		check(swift_relay_decode(many, sizeof(many), 4096, &m, err, sizeof(err)) < 0,
		      "relay: too many operations");
		check(swift_relay_decode(unknown, sizeof(unknown), 4096, &m, err, sizeof(err)) < 0 &&
			      strstr(err, "unknown"),
		      "relay: an unknown type");
	}
	memset(own, 0, sizeof(own));
	v = SWIFT_RELAY_OWN;
	memcpy(own, &v, 4);
	v = 1;
	memcpy(own + 4, &v, 4);
	v = 0x1234;
	memcpy(own + 8, &v, 4);
	check(swift_relay_decode(own, sizeof(own), 4096, &m, err, sizeof(err)) == 0 && m.qp[0].qpn == 0x1234,
	      "relay: an own-QP message");
	v = 0x1000000;
	memcpy(own + 8, &v, 4);
	check(swift_relay_decode(own, sizeof(own), 4096, &m, err, sizeof(err)) < 0,
	      "relay: a QP number beyond 24 bits");
	memset(big, 0, sizeof(big));
	v = SWIFT_RELAY_OWN;
	memcpy(big, &v, 4);
	v = 65;
	memcpy(big + 4, &v, 4);
	check(swift_relay_decode(big, sizeof(big), 4096, &m, err, sizeof(err)) < 0, "relay: 65 own QPs");
	/* authorization by the zygote's own records */
	d->rows[5].state = ROW_ASSIGNED;
	d->rows[5].owner = 3;
	d->rows[6].state = ROW_ASSIGNED;
	d->rows[6].owner = 4;
	d->rows[7].state = ROW_FREE;
	d->rows[7].owner = 3; /* stale owner on a free row */
	d->rows[8].state = ROW_RECLAIM;
	d->rows[8].owner = 3;
	d->rows[9].state = ROW_HELD;
	d->rows[9].owner = 3;
	check(swift_relay_may_post(d, 3, 5), "relay: a function posts on its own row");
	check(!swift_relay_may_post(d, 3, 6), "relay: not on another function's row");
	check(!swift_relay_may_post(d, 3, 7), "relay: not on a free row");
	check(!swift_relay_may_post(d, 3, 8), "relay: not on a row being reclaimed");
	check(!swift_relay_may_post(d, 3, 9), "relay: not on a row a peer's function holds");
	check(!swift_relay_may_post(d, 3, SWIFT_MAX_QPS) && !swift_relay_may_post(d, 3, 0xffffffffu),
	      "relay: not on a row beyond the table");
	free(d);
}

/* ---- the exchange ------------------------------------------------------- */

/* A fake pool: rows are numbers; it counts what lives. */
struct fake {
	int live[SWIFT_MAX_QPS];
	int nlive, created, fail_create_at, fail_connect, refuse_admit;
	uint32_t replaced[8];
	int nreplaced;
	/* the pair's link, as the loop keeps it: run_pair makes one (by a
	 * first exchange) before a later exchange unless no_link */
	struct xconn link;
	int have_link, no_link;
};

static const struct xconn *f_link(void *ctx, int peer)
{
	struct fake *f = ctx;

	(void)peer;
	return f->have_link ? &f->link : NULL;
}

static int f_admit(void *ctx, int peer, unsigned flags, int count, char *err, size_t errlen)
{
	struct fake *f = ctx;

	(void)peer;
	if (f->refuse_admit && (flags & SWIFT_X_HELD)) {
		snprintf(err, errlen, "fake: %d held QPs refused", count);
		return EAGAIN;
	}
	return 0;
}

static int f_create(void *ctx, int peer, struct swift_qpinfo *local, char *err, size_t errlen)
{
	struct fake *f = ctx;
	int i;

	(void)peer;
	if (f->fail_create_at && f->created + 1 == f->fail_create_at) {
		snprintf(err, errlen, "fake: create fails");
		errno = ENOMEM;
		return -1;
	}
	for (i = 0; i < SWIFT_MAX_QPS && f->live[i]; i++)
		;
	if (i == SWIFT_MAX_QPS) {
		errno = ENOSPC;
		return -1;
	}
	f->live[i] = 1;
	f->nlive++;
	f->created++;
	memset(local, 0, sizeof(*local));
	local->qpn = 0x100 + (uint32_t)i;
	local->psn = 0x42;
	return i;
}

static int f_connect(void *ctx, int row, const struct swift_qpinfo *remote)
{
	struct fake *f = ctx;

	(void)remote;
	if (row < 0 || row >= SWIFT_MAX_QPS || !f->live[row])
		abort(); /* the exchange connected a row it does not own */
	if (f->fail_connect) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

static void f_destroy(void *ctx, int row)
{
	struct fake *f = ctx;

	if (row < 0 || row >= SWIFT_MAX_QPS || !f->live[row])
		abort(); /* destroyed twice, or never created */
	f->live[row] = 0;
	f->nlive--;
}

static void f_replaced(void *ctx, int peer, uint32_t qpn)
{
	struct fake *f = ctx;

	(void)peer;
	if (f->nreplaced < 8)
		f->replaced[f->nreplaced++] = qpn;
}

struct side {
	struct swift_cfg cfg;
	struct fake fake;
	struct swift_key keys[SWIFT_KEYS_MAX];
	struct swift_rowops ops;
	struct swift_xenv env;
	struct xconn x;
	uint32_t source; /* as server: the dialer's address, as the loop sets it */
};

/* side_init: a zygote `name` of `tenant`, peer `peer`, with a ring of keys
 * given as "id:secret,id:secret" (newest first). */
static void side_init(struct side *s, const char *name, const char *tenant, const char *ring, const char *peer)
{
	char buf[256], *save = NULL, *tok;

	memset(s, 0, sizeof(*s));
	snprintf(s->cfg.name, sizeof(s->cfg.name), "%s", name);
	snprintf(s->cfg.tenant, sizeof(s->cfg.tenant), "%s", tenant);
	s->cfg.npeers = 1;
	snprintf(s->cfg.peers[0].name, sizeof(s->cfg.peers[0].name), "%s", peer);
	snprintf(buf, sizeof(buf), "%s", ring);
	for (tok = strtok_r(buf, ",", &save); tok && s->env.nkeys < SWIFT_KEYS_MAX; tok = strtok_r(NULL, ",", &save)) {
		struct swift_key *k = &s->keys[s->env.nkeys++];
		char *colon = strchr(tok, ':');

		*colon = 0;
		snprintf(k->id, sizeof(k->id), "%s", tok);
		k->len = strlen(colon + 1);
		memcpy(k->key, colon + 1, k->len);
	}
	s->ops.ctx = &s->fake;
	s->ops.create = f_create;
	s->ops.connect = f_connect;
	s->ops.destroy = f_destroy;
	s->ops.replaced = f_replaced;
	s->ops.admit = f_admit;
	s->ops.link = f_link;
	s->env.cfg = &s->cfg;
	s->env.keys = s->keys;
	s->env.ops = &s->ops;
}

/* feed delivers n bytes to x in pieces of at most chunk, advancing it as the
 * loop does. Returns the last result; stops at a result other than MORE. */
static int feed(struct xconn *x, const struct swift_xenv *e, const uint8_t *p, size_t n, size_t chunk)
{
	int rc = XC_MORE;

	while (n > 0 && rc == XC_MORE) {
		size_t room = x->want - x->inlen, k = n < chunk ? n : chunk;

		if (!room)
			break; /* it wants nothing now (flushing, held): the rest is not read */
		if (k > room)
			k = room;
		memcpy(x->in + x->inlen, p, k);
		x->inlen += k;
		p += k;
		n -= k;
		rc = swift_xconn_advance(x, e, "test");
	}
	return rc;
}

/* take moves what x queued into buf. */
static size_t take(struct xconn *x, uint8_t *buf, size_t max)
{
	size_t n = x->outlen < max ? x->outlen : max;

	memcpy(buf, x->out, n);
	x->outlen = x->outoff = 0;
	return n;
}

/* settle: the result once a side's output is out, as the loop decides it. */
static int settle(struct xconn *x, int rc)
{
	if (rc != XC_MORE || x->step != X_FLUSH || x->outlen)
		return rc;
	return x->after_flush == X_HELDOPEN ? XC_HELD : x->status ? XC_FAIL : XC_DONE;
}

/* run_pair runs client a against server b in memory; `tamper` (may be
 * NULL) changes bytes in flight: it is given the direction (0 a to b) and
 * the message number in that direction. Each side that fails closes; the
 * other sees the close (a deadline or EOF in the loop) and aborts. */
typedef void (*tamper_fn)(int dir, int msg, uint8_t *buf, size_t n);
static void run_pair(struct side *a, struct side *b, int count, unsigned flags, const uint32_t *replaces,
		     tamper_fn tamper, int *rc_a, int *rc_b);

/* link_pair makes a and b's link as the loop would (a first exchange, kept
 * by both), then forgets the rows it made, so that a test counts its own. */
static void link_pair(struct side *a, struct side *b)
{
	struct fake fa = a->fake, fb = b->fake;
	int ra, rb;

	memset(&a->fake, 0, sizeof(a->fake));
	memset(&b->fake, 0, sizeof(b->fake));
	a->fake.no_link = b->fake.no_link = 1;
	run_pair(a, b, 1, SWIFT_X_INITIAL | SWIFT_X_LINK, NULL, NULL, &ra, &rb);
	a->fake = fa;
	b->fake = fb;
	if (ra != XC_HELD || rb != XC_HELD)
		return; /* a pair that cannot link: the later exchange fails first for that */
	a->fake.link = a->x;
	b->fake.link = b->x;
	a->fake.have_link = b->fake.have_link = 1;
}

static void run_pair(struct side *a, struct side *b, int count, unsigned flags, const uint32_t *replaces,
		     tamper_fn tamper, int *rc_a, int *rc_b)
{
	uint8_t buf[SWIFT_XBUF];
	size_t n;
	int ra = XC_MORE, rb = XC_MORE, rounds, ma = 0, mb = 0;

	if (!(flags & SWIFT_X_INITIAL) && !a->fake.have_link && !a->fake.no_link && !b->fake.have_link &&
	    !b->fake.no_link)
		link_pair(a, b);
	swift_xconn_client(&a->x, &a->env, 0, count, flags, NULL, replaces);
	swift_xconn_server(&b->x);
	b->x.source = b->source;
	for (rounds = 0; rounds < 12 && (ra == XC_MORE || rb == XC_MORE); rounds++) {
		n = take(&a->x, buf, sizeof(buf));
		if (n && tamper)
			tamper(0, ma, buf, n);
		ma += n > 0;
		if (rb == XC_MORE && n)
			rb = feed(&b->x, &b->env, buf, n, 7);
		n = take(&b->x, buf, sizeof(buf));
		rb = settle(&b->x, rb);
		if (n && tamper)
			tamper(1, mb, buf, n);
		mb += n > 0;
		if (ra == XC_MORE && n)
			ra = feed(&a->x, &a->env, buf, n, 5);
		ra = settle(&a->x, ra);
		if (ra == XC_FAIL && rb == XC_MORE)
			rb = XC_FAIL; /* the client closed */
		if (rb == XC_FAIL && ra == XC_MORE && !b->x.outlen && b->x.step != X_FLUSH)
			ra = XC_FAIL;
	}
	if (ra == XC_MORE)
		ra = XC_FAIL;
	if (rb == XC_MORE)
		rb = XC_FAIL;
	if (rb == XC_FAIL)
		swift_xconn_abort(&b->x, &b->env);
	if (ra == XC_FAIL)
		swift_xconn_abort(&a->x, &a->env);
	*rc_a = ra;
	*rc_b = rb;
}

/* sniff records every byte in flight, as a capture on the path would,
 * and keeps the sealed QPs of the AUTH (direction 0, message 1) and the
 * REPLY (direction 1, message 1) apart. */
static uint8_t sniffed[4 * SWIFT_XBUF], sealed_auth[SWIFT_XBUF], sealed_reply[SWIFT_XBUF];
static size_t nsniffed;
static void sniff(int dir, int msg, uint8_t *buf, size_t n)
{
	if (nsniffed + n <= sizeof(sniffed)) {
		memcpy(sniffed + nsniffed, buf, n);
		nsniffed += n;
	}
	if (msg == 1 && dir == 0 && n >= 64 + 44)
		memcpy(sealed_auth, buf + 64, 44); /* after the client's proof and the link proof */
	if (msg == 1 && dir == 1 && n >= 8 + 44)
		memcpy(sealed_reply, buf + 8, 44); /* after status and count */
}

/* seen: whether the QP's number and PSN, as put on the wire in the
 * clear, occur in what was sniffed. */
static int seen(const struct swift_qpinfo *q)
{
	uint8_t p[8];
	size_t i;

	p[0] = (uint8_t)q->qpn, p[1] = (uint8_t)(q->qpn >> 8), p[2] = (uint8_t)(q->qpn >> 16), p[3] = 0;
	p[4] = (uint8_t)q->psn, p[5] = (uint8_t)(q->psn >> 8), p[6] = (uint8_t)(q->psn >> 16), p[7] = 0;
	for (i = 0; i + sizeof(p) <= nsniffed; i++)
		if (!memcmp(sniffed + i, p, sizeof(p)))
			return 1;
	return 0;
}

static int tamper_dir, tamper_msg, tamper_at;
static void flip(int dir, int msg, uint8_t *buf, size_t n)
{
	if (dir == tamper_dir && msg == tamper_msg)
		buf[(size_t)tamper_at < n ? (size_t)tamper_at : n - 1] ^= 0x01;
}

#define K1 "k1:0123456789abcdef-key-one"
#define K2 "k2:0123456789abcdef-key-two"
#define K3 "k3:0123456789abcdef-key-three"

static void proto_mac(const char *secret, char role, const uint8_t h[32], const uint8_t *s, uint8_t out[32]);

/* capture keeps each message of one run_pair: [dir][msg] */
static uint8_t captured[2][4][SWIFT_XBUF];
static size_t ncaptured[2][4];
static void capture(int dir, int msg, uint8_t *buf, size_t n)
{
	if (msg < 4 && n <= SWIFT_XBUF) {
		memcpy(captured[dir][msg], buf, n);
		ncaptured[dir][msg] = n;
	}
}

/* test_key_holder_sniffs: someone who holds the tenant key and saw every
 * byte of a pair's link exchange and of a later one derives the later
 * one's seal key from what it saw, for every value the wire shows in the
 * place of the secret S, and reads no QP number; with the link's real L
 * the same decoding reads it (so the test can fail). */
static void test_key_holder_sniffs(void)
{
	static const char *key = "0123456789abcdef-key-one"; /* K1's */
	struct side *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
	uint8_t h1[32], h2[32], zero[32] = {0}, lk[32], e[32], qp[44], m[65], pub_i[32], pub_s[32];
	const uint8_t *cand[5];
	const char *names[5] = {"no S (version 4)", "zeros", "the dialer's ephemeral key", "the server's ephemeral key",
				"the link's L"};
	sha256_ctx c;
	int ra, rb, i, read = 0;
	char what[200];

	side_init(a, "a", "t1", K1, "b");
	side_init(b, "b", "t1", K1, "a");
	a->fake.no_link = b->fake.no_link = 1;
	run_pair(a, b, 1, SWIFT_X_INITIAL | SWIFT_X_LINK, NULL, capture, &ra, &rb);
	check(ra == XC_HELD && rb == XC_HELD, "exchange, a key holder sniffs: the link is made");
	a->fake.link = a->x;
	b->fake.link = b->x;
	a->fake.have_link = b->fake.have_link = 1;
	a->fake.no_link = b->fake.no_link = 0;
	sha256_init(&c);
	sha256_update(&c, captured[0][0], ncaptured[0][0]);
	sha256_update(&c, captured[1][0], 48);
	sha256_final(&c, h1);
	memcpy(pub_i, captured[0][0] + ncaptured[0][0] - 32, 32);
	memcpy(pub_s, captured[1][0] + 16, 32);
	memset(ncaptured, 0, sizeof(ncaptured));
	run_pair(a, b, 1, 0, NULL, capture, &ra, &rb);
	check(ra == XC_DONE && rb == XC_DONE && ncaptured[0][1] >= 64 + 44,
	      "exchange, a key holder sniffs: a later exchange is done");
	sha256_init(&c);
	sha256_update(&c, captured[0][0], ncaptured[0][0]);
	sha256_update(&c, captured[1][0], 48);
	sha256_final(&c, h2);
	cand[0] = NULL;
	cand[1] = zero;
	cand[2] = pub_i;
	cand[3] = pub_s;
	cand[4] = NULL;
	for (i = 0; i < 5; i++) {
		const uint8_t *s = cand[i];

		if (i == 4) {
			memcpy(lk, a->fake.link.link, 32);
		} else {
			/* L as the wire allows: HMAC(k, "L" | H1 [| S]) */
			m[0] = 'L';
			memcpy(m + 1, h1, 32);
			if (s)
				memcpy(m + 33, s, 32);
			hmac_sha256((const uint8_t *)key, strlen(key), m, s ? 65 : 33, lk);
		}
		/* E = HMAC(k, "E" | H2 | L), and version 4's HMAC(k, "E" | H2) */
		m[0] = 'E';
		memcpy(m + 1, h2, 32);
		memcpy(m + 33, lk, 32);
		hmac_sha256((const uint8_t *)key, strlen(key), m, i == 0 ? 33 : 65, e);
		memcpy(qp, captured[0][1] + 64, 44);
		swift_seal(e, 'Q', qp, 44);
		if (qp[0] == (uint8_t)a->x.local[0].qpn && qp[1] == (uint8_t)(a->x.local[0].qpn >> 8) &&
		    qp[4] == (uint8_t)a->x.local[0].psn) {
			read |= 1 << i;
		}
		snprintf(what, sizeof(what), "exchange, a key holder sniffs: with %s in the place of S, the QP %s",
			 names[i], i == 4 ? "is read (the decoding is right)" : "is not read");
		check(i == 4 ? (read >> i) & 1 : !((read >> i) & 1), what);
	}
	free(a);
	free(b);
}

static void test_exchange(void)
{
	struct side *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
	uint32_t repl[3] = {0, 0x777, 0};
	int ra, rb;
	char what[800];

	side_init(a, "a", "t1", K1, "b");
	side_init(b, "b", "t1", K1, "a");
	run_pair(a, b, 3, SWIFT_X_INITIAL | SWIFT_X_LINK, repl, NULL, &ra, &rb);
	check(ra == XC_HELD && rb == XC_HELD, "exchange: a link is held open on both ends");
	check(a->fake.nlive == 3 && b->fake.nlive == 3 && a->x.nrows == 3 && b->x.nrows == 3 && a->x.committed &&
		      b->x.committed,
	      "exchange: three rows on each side, committed");
	check(a->x.remote[2].qpn == 0x100 + (uint32_t)b->x.rows[2] &&
		      b->x.remote[0].qpn == 0x100 + (uint32_t)a->x.rows[0],
	      "exchange: each side learns the other's QP numbers");
	check(b->fake.nreplaced == 1 && b->fake.replaced[0] == 0x777,
	      "exchange: the server hears which QP is replaced");

	side_init(a, "a", "t1", K1, "b");
	side_init(b, "b", "t1", K1, "a");
	nsniffed = 0;
	run_pair(a, b, 2, 0, NULL, sniff, &ra, &rb);
	check(ra == XC_DONE && rb == XC_DONE && a->fake.nlive == 2 && b->fake.nlive == 2,
	      "exchange: a plain exchange is done");
	check(nsniffed > 0 && !seen(&a->x.local[0]) && !seen(&a->x.local[1]) && !seen(&b->x.local[0]) &&
		      !seen(&b->x.local[1]),
	      "exchange: no QP number or PSN of either side is readable on the wire");
	/* the fake gives both sides the same first QP (0x100, PSN 0x42): the
	 * same plaintext under one keystream would give the same bytes */
	check(!memcmp(&a->x.local[0], &b->x.local[0], sizeof(a->x.local[0])) && memcmp(sealed_auth, sealed_reply, 44),
	      "exchange: the two directions are sealed under keystreams of their own");
	{
		uint8_t first[44];

		memcpy(first, sealed_auth, sizeof(first));
		side_init(a, "a", "t1", K1, "b");
		side_init(b, "b", "t1", K1, "a");
		run_pair(a, b, 2, 0, NULL, sniff, &ra, &rb);
		check(ra == XC_DONE && rb == XC_DONE && memcmp(first, sealed_auth, sizeof(first)),
		      "exchange: the same QPs in another session are sealed under another keystream");
	}

	/* a later exchange stands on the pair's live link: the link holder's
	 * is served, replaces included */
	{
		uint32_t rep[2] = {0x100, 0};
		struct side *imp = calloc(1, sizeof(*imp));

		side_init(a, "a", "t1", K1, "b");
		side_init(b, "b", "t1", K1, "a");
		link_pair(a, b);
		run_pair(a, b, 1, 0, rep, NULL, &ra, &rb);
		check(ra == XC_DONE && rb == XC_DONE && b->fake.nreplaced == 1 && b->fake.created == 1,
		      "exchange: a later exchange from the link's other end is served, its replaces heard");

		/* a key holder under a's name (a zygote of the tenant elsewhere,
		 * with a link of its own) is not the link's other end */
		side_init(imp, "a", "t1", K1, "b");
		imp->fake.link = a->fake.link;
		imp->fake.link.link[0] ^= 1;
		imp->fake.have_link = 1;
		b->fake.created = b->fake.nreplaced = 0;
		run_pair(imp, b, 2, 0, rep, NULL, &ra, &rb);
		check(ra == XC_FAIL && rb == XC_FAIL && b->fake.created == 0 && b->fake.nreplaced == 0 &&
			      imp->x.refused &&
			      strstr(b->x.err,
				     "a later exchange under the name a, not from the zygote that holds its link"),
		      "exchange: a later exchange under a linked name from another zygote: refused, nothing made or "
		      "replaced");
		run_pair(imp, b, 1, SWIFT_X_HELD, NULL, NULL, &ra, &rb);
		check(ra == XC_FAIL && rb == XC_FAIL && b->fake.created == 0,
		      "exchange: nor its held exchanges (a function's own QPs)");

		/* no live link on the server's side (it closed): refused first */
		b->fake.have_link = 0;
		b->fake.no_link = 1;
		run_pair(a, b, 1, 0, rep, NULL, &ra, &rb);
		check(ra == XC_FAIL && rb == XC_FAIL && b->fake.created == 0 && a->x.status == ENOLINK &&
			      strstr(b->x.err, "no live link with a"),
		      "exchange: a later exchange without the server's link is refused (ENOLINK) before any row");
		/* and a client without a link does not prove anything */
		side_init(a, "a", "t1", K1, "b");
		side_init(b, "b", "t1", K1, "a");
		a->fake.no_link = 1;
		b->fake.no_link = 1;
		run_pair(a, b, 1, 0, NULL, NULL, &ra, &rb);
		check(ra == XC_FAIL && a->x.status == ENOLINK && a->fake.created == 0 && b->fake.created == 0,
		      "exchange: a client without a link does not start a later exchange");
		free(imp);
	}

	/* pair keys: a zygote holds the keys of its own pairs only. x.team-b,
	 * which holds its pair key with a.team-a, claims the name b.team-a
	 * towards a.team-a: refused, nothing made; the real b.team-a links */
	{
		struct side *imp = calloc(1, sizeof(*imp));

		side_init(b, "a.team-a", "t1", "k1:pair-a-b-0123456789abcdef", "b.team-a");
		strcpy(b->keys[0].peer, "b.team-a");
		side_init(imp, "b.team-a", "t1", "k1:pair-a-x-0123456789abcdef", "a.team-a");
		strcpy(imp->keys[0].peer, "a.team-a");
		imp->fake.no_link = b->fake.no_link = 1;
		run_pair(imp, b, 1, SWIFT_X_INITIAL | SWIFT_X_LINK, NULL, NULL, &ra, &rb);
		check(ra == XC_FAIL && rb == XC_FAIL && b->fake.created == 0 && imp->fake.created == 0 &&
			      imp->x.refused,
		      "exchange: a holder of another pair's key under a name of that pair: refused, nothing made");
		side_init(b, "a.team-a", "t1", "k1:pair-a-b-0123456789abcdef", "b.team-a");
		strcpy(b->keys[0].peer, "b.team-a");
		side_init(a, "b.team-a", "t1", "k1:pair-a-b-0123456789abcdef", "a.team-a");
		strcpy(a->keys[0].peer, "a.team-a");
		a->fake.no_link = b->fake.no_link = 1;
		run_pair(a, b, 1, SWIFT_X_INITIAL | SWIFT_X_LINK, NULL, NULL, &ra, &rb);
		check(ra == XC_HELD && rb == XC_HELD, "exchange: the pair's own key links");
		/* a key for another peer is no key for this one */
		side_init(a, "b.team-a", "t1", "k1:pair-a-b-0123456789abcdef", "a.team-a");
		strcpy(a->keys[0].peer, "c.team-c");
		swift_xconn_client(&a->x, &a->env, 0, 1, SWIFT_X_INITIAL | SWIFT_X_LINK, NULL, NULL);
		check(a->x.status == ENOKEY && a->x.step == X_FLUSH && strstr(a->x.err, "no key for peer a.team-a"),
		      "exchange: without a key for the peer, nothing is dialed");
		free(imp);
	}

	/* a key id of 15 characters, the longest, goes whole into the hello */
	side_init(a, "a", "t1", "abcdefghijklmno:0123456789abcdef-key-one", "b");
	side_init(b, "b", "t1", "abcdefghijklmno:0123456789abcdef-key-one", "a");
	run_pair(a, b, 1, 0, NULL, NULL, &ra, &rb);
	check(ra == XC_DONE && rb == XC_DONE, "exchange: a key id of 15 characters authenticates");

	/* rotation: a ring accepts every key it holds, dials with its first */
	side_init(a, "a", "t1", K1, "b");
	side_init(b, "b", "t1", K2 "," K1, "a");
	run_pair(a, b, 1, 0, NULL, NULL, &ra, &rb);
	check(ra == XC_DONE && rb == XC_DONE, "exchange: an old key still in the ring is accepted");
	side_init(a, "a", "t1", K2 "," K1, "b");
	side_init(b, "b", "t1", K1, "a");
	run_pair(a, b, 1, 0, NULL, NULL, &ra, &rb);
	check(ra == XC_FAIL && rb == XC_FAIL && a->x.refused && b->fake.created == 0 && a->fake.created == 0 &&
		      strstr(b->x.err, "key k2 is not in this node's keyring"),
	      "exchange: a key the server does not hold yet is refused, nothing created");
	/* after a refusal the loop dials with the next key (key_next): a
	 * node that lacks the newest key is reached with the older one */
	side_init(a, "a", "t1", K2 "," K1, "b");
	side_init(b, "b", "t1", K1, "a");
	a->cfg.peers[0].key_next = 1;
	run_pair(a, b, 1, 0, NULL, NULL, &ra, &rb);
	check(ra == XC_DONE && rb == XC_DONE,
	      "exchange: during a rotation, the next key reaches a node without the newest");
	a->cfg.peers[0].key_next = 2;
	swift_xconn_client(&a->x, &a->env, 0, 1, 0, NULL, NULL);
	check(a->x.key == 0, "exchange: the key to dial with wraps around to the newest");
	side_init(a, "a", "t1", K1, "b");
	side_init(b, "b", "t1", K3 "," K2, "a");
	run_pair(a, b, 1, 0, NULL, NULL, &ra, &rb);
	check(ra == XC_FAIL && rb == XC_FAIL && b->fake.created == 0 && a->fake.created == 0,
	      "exchange: a rotated-out key is refused, nothing created");

	/* same id, another secret: the server's proof fails; the client proves nothing */
	side_init(a, "a", "t1", K1, "b");
	side_init(b, "b", "t1", "k1:0123456789abcdef-KEY-ONE", "a");
	run_pair(a, b, 2, 0, NULL, NULL, &ra, &rb);
	check(ra == XC_FAIL && rb == XC_FAIL && a->x.refused && a->fake.created == 0 && b->fake.created == 0 &&
		      a->x.step == X_CHAL,
	      "exchange: another key under the same id: refused before the client proves anything");

	side_init(a, "a", "t2", K1, "b");
	side_init(b, "b", "t1", K1, "a");
	run_pair(a, b, 2, 0, NULL, NULL, &ra, &rb);
	check(ra == XC_FAIL && rb == XC_FAIL && b->fake.created == 0 && strstr(b->x.err, "claims tenant t2"),
	      "exchange: another tenant with the same key is refused");

	side_init(a, "intruder", "t1", K1, "b");
	side_init(b, "b", "t1", K1, "a");
	run_pair(a, b, 1, 0, NULL, NULL, &ra, &rb);
	check(ra == XC_FAIL && rb == XC_FAIL && b->fake.created == 0 && a->fake.nlive == 0 &&
		      strstr(b->x.err, "not in this zygote's peer list"),
	      "exchange: a name not in the peer list is refused, nothing left on either side");

	/* a peer configured by its address speaks only from it: a key
	 * holder elsewhere under its name is refused before any proof */
	side_init(a, "a", "t1", K1, "b");
	side_init(b, "b", "t1", K1, "a");
	snprintf(b->cfg.peers[0].host, sizeof(b->cfg.peers[0].host), "10.0.0.1");
	b->source = htonl(0x0a000002); /* 10.0.0.2 */
	run_pair(a, b, 1, SWIFT_X_INITIAL | SWIFT_X_LINK, NULL, NULL, &ra, &rb);
	check(ra == XC_FAIL && rb == XC_FAIL && b->fake.created == 0 && a->fake.created == 0 && a->x.refused &&
		      !strcmp(b->x.err,
			      "tenant t1: peer a is configured at 10.0.0.1, this connection comes from 10.0.0.2"),
	      "exchange: a configured peer's name from another address is refused, nothing created");
	side_init(a, "a", "t1", K1, "b");
	side_init(b, "b", "t1", K1, "a");
	snprintf(b->cfg.peers[0].host, sizeof(b->cfg.peers[0].host), "10.0.0.1");
	b->source = htonl(0x0a000001);
	run_pair(a, b, 1, SWIFT_X_INITIAL | SWIFT_X_LINK, NULL, NULL, &ra, &rb);
	check(ra == XC_HELD && rb == XC_HELD, "exchange: a configured peer from its address is served");
	/* loopback speaks for an address of this host only */
	side_init(a, "a", "t1", K1, "b");
	side_init(b, "b", "t1", K1, "a");
	snprintf(b->cfg.peers[0].host, sizeof(b->cfg.peers[0].host), "192.0.2.1"); /* TEST-NET-1: not ours */
	b->source = htonl(0x7f000001);
	run_pair(a, b, 1, SWIFT_X_INITIAL | SWIFT_X_LINK, NULL, NULL, &ra, &rb);
	check(ra == XC_FAIL && rb == XC_FAIL && b->fake.created == 0 &&
		      !strcmp(b->x.err,
			      "tenant t1: peer a is configured at 192.0.2.1, this connection comes from 127.0.0.1"),
	      "exchange: loopback does not speak for a peer configured at another host's address");
	side_init(a, "a", "t1", K1, "b");
	side_init(b, "b", "t1", K1, "a");
	snprintf(b->cfg.peers[0].host, sizeof(b->cfg.peers[0].host), "127.0.0.1"); /* lo's address */
	b->source = htonl(0x7f000002);
	run_pair(a, b, 1, SWIFT_X_INITIAL | SWIFT_X_LINK, NULL, NULL, &ra, &rb);
	check(ra == XC_HELD && rb == XC_HELD,
	      "exchange: loopback speaks for a peer configured at an address of this host");
	/* a peer configured by host name is pinned to the address its name
	 * resolved to: none before it has, then only that one (a holder of
	 * the tenant key elsewhere cannot speak under the name) */
	side_init(a, "a", "t1", K1, "b");
	side_init(b, "b", "t1", K1, "a");
	snprintf(b->cfg.peers[0].host, sizeof(b->cfg.peers[0].host), "zyg-a.team-a.svc");
	b->source = htonl(0x0a000002);
	run_pair(a, b, 1, 0, NULL, NULL, &ra, &rb);
	check(ra == XC_FAIL && rb == XC_FAIL && b->fake.created == 0 &&
		      !strcmp(b->x.err, "tenant t1: peer a is configured at zyg-a.team-a.svc (not resolved yet), this "
					"connection comes from 10.0.0.2"),
	      "exchange: a peer configured by host name is refused before its name resolves");
	side_init(a, "a", "t1", K1, "b");
	side_init(b, "b", "t1", K1, "a");
	snprintf(b->cfg.peers[0].host, sizeof(b->cfg.peers[0].host), "zyg-a.team-a.svc");
	b->cfg.peers[0].addr = htonl(0x0a000001);
	b->source = htonl(0x0a000002);
	run_pair(a, b, 1, 0, NULL, NULL, &ra, &rb);
	check(ra == XC_FAIL && rb == XC_FAIL && b->fake.created == 0 &&
		      !strcmp(b->x.err, "tenant t1: peer a is configured at zyg-a.team-a.svc (10.0.0.1), this "
					"connection comes from 10.0.0.2"),
	      "exchange: a peer configured by host name speaks only from the address it resolved to");
	side_init(a, "a", "t1", K1, "b");
	side_init(b, "b", "t1", K1, "a");
	snprintf(b->cfg.peers[0].host, sizeof(b->cfg.peers[0].host), "zyg-a.team-a.svc");
	b->cfg.peers[0].addr = htonl(0x0a000002);
	b->source = htonl(0x0a000002);
	run_pair(a, b, 1, 0, NULL, NULL, &ra, &rb);
	check(ra == XC_DONE && rb == XC_DONE,
	      "exchange: a peer configured by host name is served from its resolved address");

	/* the client dialed b, but reached c (another zygote of the tenant) */
	side_init(a, "a", "t1", K1, "b");
	side_init(b, "c", "t1", K1, "a");
	run_pair(a, b, 1, 0, NULL, NULL, &ra, &rb);
	check(ra == XC_FAIL && rb == XC_FAIL && b->fake.created == 0 && a->fake.created == 0 &&
		      strstr(b->x.err, "dialed zygote b, this is c"),
	      "exchange: a server answers only for its own name");

	side_init(a, "a", "t1", K1, "b");
	side_init(b, "b", "t1", K1, "a");
	run_pair(a, b, 2, SWIFT_X_HELD, NULL, NULL, &ra, &rb);
	check(ra == XC_HELD && rb == XC_HELD, "exchange: a held exchange stays open on both ends");

	/* a held exchange the server cannot hold more of is refused after
	 * the proofs, before either side makes a row: nothing is left */
	side_init(a, "a", "t1", K1, "b");
	side_init(b, "b", "t1", K1, "a");
	b->fake.refuse_admit = 1;
	run_pair(a, b, 2, SWIFT_X_HELD, NULL, NULL, &ra, &rb);
	check(ra == XC_FAIL && rb == XC_FAIL && b->fake.created == 0 && b->fake.nlive == 0 && a->fake.nlive == 0 &&
		      a->x.status == EAGAIN && strstr(b->x.err, "held QPs refused"),
	      "exchange: a held exchange beyond the server's room is refused before any row, on both sides");
	side_init(a, "a", "t1", K1, "b");
	side_init(b, "b", "t1", K1, "a");
	b->fake.refuse_admit = 1;
	run_pair(a, b, 2, 0, NULL, NULL, &ra, &rb);
	check(ra == XC_DONE && rb == XC_DONE && b->fake.nlive == 2,
	      "exchange: the room for held QPs limits held ones only");

	side_init(a, "a", "t1", K1, "b");
	side_init(b, "b", "t1", K1, "a");
	b->fake.fail_create_at = 2;
	run_pair(a, b, 3, 0, NULL, NULL, &ra, &rb);
	check(ra == XC_FAIL && rb == XC_FAIL && a->fake.nlive == 0 && b->fake.nlive == 0,
	      "exchange: a server that cannot create its rows leaves none, nor does the client");

	side_init(a, "a", "t1", K1, "b");
	side_init(b, "b", "t1", K1, "a");
	a->fake.fail_connect = 1;
	run_pair(a, b, 2, 0, NULL, NULL, &ra, &rb);
	check(ra == XC_FAIL && rb == XC_FAIL && a->fake.nlive == 0 && b->fake.nlive == 0,
	      "exchange: a client that cannot connect its rows leaves none, nor does the server");

	/* a byte changed in transit after the proofs: nothing connected on
	 * either side. Client messages: 0 hello, 1 proof and QPs, 2 confirm;
	 * server messages: 0 challenge, 1 reply, 2 ack. */
	{
		static const struct {
			const char *what;
			int dir, msg, at, server_rows;
		} tc[] = {
			{"the client's QPs", 0, 1, 64 + 8, 0},
			{"the QPs' tag", 0, 1, 64 + 2 * 44 + 5, 0},
			{"the link proof", 0, 1, 40, 0},
			{"the reply's QPs", 1, 1, 8 + 3, 0},
			{"the reply's status", 1, 1, 0, 0},
			{"the confirmation", 0, 2, 3, 0},
			{"the hello's count", 0, 0, 8 + 3 * 64 + 16 + 16 + 4, 0},
			{"the hello's flags", 0, 0, 8 + 3 * 64 + 16 + 16, 0},
			{"the challenge's nonce", 1, 0, 2, 0},
		};
		size_t k;

		for (k = 0; k < sizeof(tc) / sizeof(tc[0]); k++) {
			side_init(a, "a", "t1", K1, "b");
			side_init(b, "b", "t1", K1, "a");
			tamper_dir = tc[k].dir;
			tamper_msg = tc[k].msg;
			tamper_at = tc[k].at;
			run_pair(a, b, 2, 0, NULL, flip, &ra, &rb);
			snprintf(what, sizeof(what),
				 "exchange: %s changed in transit: both fail (%d %d), rows %d and %d", tc[k].what, ra,
				 rb, a->fake.nlive, b->fake.nlive);
			check(ra == XC_FAIL && rb == XC_FAIL && a->fake.nlive == 0 &&
				      b->fake.nlive == tc[k].server_rows,
			      what);
		}
		/* a first exchange's link proof field is zeros: a byte changed
		 * there is refused too */
		side_init(a, "a", "t1", K1, "b");
		side_init(b, "b", "t1", K1, "a");
		tamper_dir = 0, tamper_msg = 1, tamper_at = 40;
		run_pair(a, b, 2, SWIFT_X_INITIAL | SWIFT_X_LINK, NULL, flip, &ra, &rb);
		check(ra == XC_FAIL && rb == XC_FAIL && a->fake.nlive == 0 && b->fake.nlive == 0 &&
			      b->fake.created == 0 && strstr(b->x.err, "a link proof in a first exchange"),
		      "exchange: a first exchange's link proof field changed in transit: refused, nothing kept");
		/* the last message: the server has committed; the client gives up
		 * its rows (the zygote then tells the server to drop them) */
		side_init(a, "a", "t1", K1, "b");
		side_init(b, "b", "t1", K1, "a");
		tamper_dir = 1, tamper_msg = 2, tamper_at = 0;
		run_pair(a, b, 2, 0, NULL, flip, &ra, &rb);
		check(ra == XC_FAIL && rb == XC_DONE && a->fake.nlive == 0 && b->fake.nlive == 2 && a->x.step == X_ACK,
		      "exchange: a changed acknowledgement: the client keeps nothing and knows it confirmed");
	}

	/* hellos a server refuses before anything */
	{
		static const struct {
			const char *name;
			int off;
			uint32_t val;
			int bytes;
		} tc[] = {
			{"count 0", 8 + 3 * SWIFT_NAME_MAX + 16 + 16 + 4, 0, 4},
			{"count 65", 8 + 3 * SWIFT_NAME_MAX + 16 + 16 + 4, 65, 4},
			{"unknown flag", 8 + 3 * SWIFT_NAME_MAX + 16 + 16, 64, 4},
			{"held and initial", 8 + 3 * SWIFT_NAME_MAX + 16 + 16, SWIFT_X_HELD | SWIFT_X_INITIAL, 4},
			{"ephemeral and link", 8 + 3 * SWIFT_NAME_MAX + 16 + 16, SWIFT_X_EPHEMERAL | SWIFT_X_LINK, 4},
			{"bad magic", 0, 'Z', 1},
			{"tenant unterminated", 8, 'x', SWIFT_NAME_MAX},
			{"name with a control byte", 8 + SWIFT_NAME_MAX, '\n', 1},
			{"empty name", 8 + SWIFT_NAME_MAX, 0, 1},
			{"empty name dialed", 8 + 2 * SWIFT_NAME_MAX, 0, 1},
			{"key id unterminated", 8 + 3 * SWIFT_NAME_MAX, 'k', 16},
			{"an ephemeral key in a later exchange", 8 + 3 * SWIFT_NAME_MAX + 16 + 16 + 8, 1, 1},
		};
		size_t k;

		for (k = 0; k < sizeof(tc) / sizeof(tc[0]); k++) {
			uint8_t h[SWIFT_XBUF];
			size_t n;
			int rc;

			side_init(a, "a", "t1", K1, "b");
			side_init(b, "b", "t1", K1, "a");
			swift_xconn_client(&a->x, &a->env, 0, 2, 0, NULL, NULL);
			n = take(&a->x, h, sizeof(h));
			if (tc[k].bytes == 4)
				memcpy(h + tc[k].off, &tc[k].val, 4);
			else
				memset(h + tc[k].off, (int)tc[k].val, (size_t)tc[k].bytes);
			swift_xconn_server(&b->x);
			rc = feed(&b->x, &b->env, h, n, n);
			snprintf(what, sizeof(what), "exchange: hello with %s refused (%s)", tc[k].name, b->x.err);
			check(rc == XC_FAIL && b->x.outlen == 0 && b->fake.created == 0, what);
		}
	}
	/* a first exchange whose ephemeral key is a point of small order
	 * (u = 0 or 1: the shared secret would be zero, known to all): a
	 * server refuses a dialer's once the dialer proved the key (it does
	 * no X25519 before), a dialer refuses a server's */
	{
		static const uint8_t small[2] = {0, 1};
		static const char *secret = "0123456789abcdef-key-one"; /* K1's */
		size_t k;

		for (k = 0; k < sizeof(small); k++) {
			uint8_t h[SWIFT_XBUF], ch[80], t[32];
			size_t n;
			int rc;
			sha256_ctx c;

			side_init(a, "a", "t1", K1, "b");
			side_init(b, "b", "t1", K1, "a");
			swift_xconn_client(&a->x, &a->env, 0, 1, SWIFT_X_INITIAL | SWIFT_X_LINK, NULL, NULL);
			n = take(&a->x, h, sizeof(h));
			memset(h + n - 32, 0, 32);
			h[n - 32] = small[k];
			memcpy(a->x.hello, h, n); /* the dialer proves this hello */
			swift_xconn_server(&b->x);
			rc = feed(&b->x, &b->env, h, n, n);
			check(rc == XC_MORE && b->x.step == X_AUTH,
			      "exchange: a hello costs no X25519 before the proof");
			n = take(&b->x, h, sizeof(h));
			rc = feed(&a->x, &a->env, h, n, n);
			n = take(&a->x, h, sizeof(h));
			rc = feed(&b->x, &b->env, h, n, n);
			snprintf(what, sizeof(what),
				 "exchange: a first exchange with the dialer's ephemeral key u = %u refused (%s)",
				 small[k], b->x.err);
			check(rc == XC_FAIL && b->fake.created == 0 && strstr(b->x.err, "small order"), what);

			/* a key holder's server that sends u = 0 or 1, proved */
			side_init(a, "a", "t1", K1, "b");
			swift_xconn_client(&a->x, &a->env, 0, 1, SWIFT_X_INITIAL | SWIFT_X_LINK, NULL, NULL);
			n = take(&a->x, h, sizeof(h));
			memset(ch, 0x33, 16);
			memset(ch + 16, 0, 32);
			ch[16] = small[k];
			sha256_init(&c);
			sha256_update(&c, h, n);
			sha256_update(&c, ch, 48);
			sha256_final(&c, t);
			proto_mac(secret, 'S', t, NULL, ch + 48);
			rc = feed(&a->x, &a->env, ch, sizeof(ch), sizeof(ch));
			snprintf(what, sizeof(what),
				 "exchange: a server's ephemeral key u = %u refused by the dialer (%s)", small[k],
				 a->x.err);
			check(rc == XC_FAIL && a->fake.created == 0 && strstr(a->x.err, "small order"), what);
		}
	}
	/* a link comes from a first exchange only */
	{
		uint8_t h[SWIFT_XBUF];
		size_t n;
		int rc;

		side_init(a, "a", "t1", K1, "b");
		side_init(b, "b", "t1", K1, "a");
		swift_xconn_client(&a->x, &a->env, 0, 1, SWIFT_X_LINK, NULL, NULL);
		n = take(&a->x, h, sizeof(h));
		swift_xconn_server(&b->x);
		rc = feed(&b->x, &b->env, h, n, n);
		check(rc == XC_FAIL && b->x.outlen == 0 && strstr(b->x.err, "a link from a later exchange"),
		      "exchange: a hello that makes a link without being a first exchange is refused");
	}
	/* the server's key pair is kept for a minute: two first exchanges
	 * get one pub_s, and their secrets still differ */
	{
		struct swift_xeph keep;
		uint8_t s1[80], s2[80], l1[32];
		int i;

		memset(&keep, 0, sizeof(keep));
		for (i = 0; i < 2; i++) {
			side_init(a, "a", "t1", K1, "b");
			side_init(b, "b", "t1", K1, "a");
			b->env.eph = &keep;
			a->fake.no_link = b->fake.no_link = 1;
			memset(ncaptured, 0, sizeof(ncaptured));
			run_pair(a, b, 1, SWIFT_X_INITIAL | SWIFT_X_LINK, NULL, capture, &ra, &rb);
			memcpy(i ? s2 : s1, captured[1][0], 80);
			if (!i)
				memcpy(l1, b->x.link, 32);
		}
		check(ra == XC_HELD && rb == XC_HELD && keep.born_us && !memcmp(s1 + 16, s2 + 16, 32) &&
			      !memcmp(s1 + 16, keep.pub, 32) && memcmp(l1, b->x.link, 32) &&
			      !memcmp(a->x.link, b->x.link, 32),
		      "exchange: a kept server key serves two links, each with a secret of its own");
		keep.born_us -= SWIFT_XEPH_US;
		side_init(a, "a", "t1", K1, "b");
		side_init(b, "b", "t1", K1, "a");
		b->env.eph = &keep;
		a->fake.no_link = b->fake.no_link = 1;
		memset(ncaptured, 0, sizeof(ncaptured));
		run_pair(a, b, 1, SWIFT_X_INITIAL | SWIFT_X_LINK, NULL, capture, &ra, &rb);
		check(ra == XC_HELD && memcmp(s1 + 16, captured[1][0] + 16, 32),
		      "exchange: after a minute the server's key pair is new");
	}
	test_key_holder_sniffs();
	free(a);
	free(b);
}

static void test_keys(void)
{
	struct swift_key k[SWIFT_KEYS_MAX];
	char err[200];
	const char *ring = "# ring\n\nk2 "
			   "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n"
			   "  k1\t"
			   "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff  \n";
	uint8_t raw[32];
	static const struct {
		const char *name, *in, *want;
	} bad[] = {
		{"empty", "", "no key"},
		{"comments only", "# x\n", "no key"},
		{"short hex", "k1 00\n", "line 1: key k1: want 64 hex digits"},
		{"id of 16", "abcdefghijklmnop 0000000000000000000000000000000000000000000000000000000000000000\n",
		 "line 1: a key id of 1 to 15 characters"},
		{"no hex", "k1\n", "line 1: key k1: want 64 hex digits"},
		{"upper-case id", "K1 0000000000000000000000000000000000000000000000000000000000000000\n",
		 "line 1: key id"},
		{"long id", "abcdefghijklmnopq 0000000000000000000000000000000000000000000000000000000000000000\n",
		 "line 1: a key id"},
		{"trailing junk", "k1 0000000000000000000000000000000000000000000000000000000000000000 b.team-a x\n",
		 "want \"<id> <64 hex digits> [peer]\""},
		{"a peer of 128 characters",
		 "k1 0000000000000000000000000000000000000000000000000000000000000000 "
		 "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"
		 "nnnnnnnnnnnnnnnnnnnnnnnnnnn\n",
		 "a peer name of at most 127 characters"},
		{"id twice for one peer",
		 "k1 0000000000000000000000000000000000000000000000000000000000000000 b\n"
		 "k1 1111111111111111111111111111111111111111111111111111111111111111 b\n",
		 "line 2: key id k1 given twice"},
		{"id twice",
		 "k1 0000000000000000000000000000000000000000000000000000000000000000\n"
		 "k1 1111111111111111111111111111111111111111111111111111111111111111\n",
		 "line 2: key id k1 given twice"},
	};
	size_t i;

	check(swift_keys_parse((const uint8_t *)ring, strlen(ring), k, SWIFT_KEYS_MAX, err, sizeof(err)) == 2 &&
		      !strcmp(k[0].id, "k2") && k[0].key[31] == 0x1f && !strcmp(k[1].id, "k1") && k[1].key[0] == 0xff &&
		      k[1].len == 32,
	      "keys: a ring of two, newest first");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char what[300];
		int n = swift_keys_parse((const uint8_t *)bad[i].in, strlen(bad[i].in), k, SWIFT_KEYS_MAX, err,
					 sizeof(err));

		snprintf(what, sizeof(what), "keys: %s refused (%s)", bad[i].name, err);
		check(n < 0 && strstr(err, bad[i].want), what);
	}
	{
		/* pair keys: one id for each peer */
		const char *pairs =
			"# pair keys\nk1 0101010101010101010101010101010101010101010101010101010101010101 b.team-a\n"
			"k1 0202020202020202020202020202020202020202020202020202020202020202 c.team-c \n";

		check(swift_keys_parse((const uint8_t *)pairs, strlen(pairs), k, SWIFT_KEYS_MAX, err, sizeof(err)) ==
				      2 &&
			      !strcmp(k[0].peer, "b.team-a") && k[0].key[0] == 1 && !strcmp(k[1].peer, "c.team-c") &&
			      k[1].key[31] == 2,
		      "keys: pair keys, one id for each of two peers");
		check(swift_keys_parse((const uint8_t *)ring, strlen(ring), k, SWIFT_KEYS_MAX, err, sizeof(err)) == 2 &&
			      !k[0].peer[0] && !k[1].peer[0],
		      "keys: a ring's keys are for every peer");
	}
	memset(raw, 0x80, sizeof(raw));
	check(swift_keys_parse(raw, sizeof(raw), k, SWIFT_KEYS_MAX, err, sizeof(err)) == 1 &&
		      !strcmp(k[0].id, "local") && k[0].len == 32,
	      "keys: a raw key (a node-local one from before rings) is one key, local");
	check(swift_keys_parse(raw, 8, k, SWIFT_KEYS_MAX, err, sizeof(err)) < 0, "keys: a raw key of 8 bytes refused");
	{
		/* swift_keys_load: a key file read as swift-init and swift-warm
		 * read it without a shim; anything but a regular file of 1 to
		 * 4096 bytes is refused at once, never waited on */
		struct swift_cfg c;
		char dir[] = "/tmp/swift-keys-XXXXXX", path[64], link[64], fifo[64], big[4097];
		int fd;

		memset(&c, 0, sizeof(c));
		strcpy(c.tenant, "t1");
		check(swift_keys_load(&c, k, SWIFT_KEYS_MAX, err, sizeof(err)) == 1 && !strcmp(k[0].id, "name") &&
			      k[0].len == 2 && !memcmp(k[0].key, "t1", 2),
		      "keys load: without a key file, the tenant's name");
		if (!mkdtemp(dir)) {
			check(0, "keys load: mkdtemp");
			return;
		}
		snprintf(path, sizeof(path), "%s/ring", dir);
		snprintf(link, sizeof(link), "%s/link", dir);
		snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		check(fd >= 0 && write(fd, ring, strlen(ring)) == (ssize_t)strlen(ring), "keys load: write a ring");
		close(fd);
		snprintf(c.key_file, sizeof(c.key_file), "%s", path);
		check(swift_keys_load(&c, k, SWIFT_KEYS_MAX, err, sizeof(err)) == 2 && !strcmp(k[0].id, "k2"),
		      "keys load: a ring file of two keys");
		check(symlink(path, link) == 0, "keys load: symlink");
		snprintf(c.key_file, sizeof(c.key_file), "%s", link);
		check(swift_keys_load(&c, k, SWIFT_KEYS_MAX, err, sizeof(err)) < 0 && strstr(err, link),
		      "keys load: a symbolic link is refused");
		check(mkfifo(fifo, 0600) == 0, "keys load: mkfifo");
		snprintf(c.key_file, sizeof(c.key_file), "%s", fifo);
		check(swift_keys_load(&c, k, SWIFT_KEYS_MAX, err, sizeof(err)) < 0 && strstr(err, "not a regular file"),
		      "keys load: a FIFO is refused without waiting for a writer");
		memset(big, 'k', sizeof(big));
		fd = open(path, O_WRONLY | O_TRUNC);
		check(fd >= 0 && write(fd, big, sizeof(big)) == (ssize_t)sizeof(big), "keys load: write 4097 bytes");
		close(fd);
		snprintf(c.key_file, sizeof(c.key_file), "%s", path);
		check(swift_keys_load(&c, k, SWIFT_KEYS_MAX, err, sizeof(err)) < 0 && strstr(err, "1 to 4096 bytes"),
		      "keys load: a file of 4097 bytes is refused");
		fd = open(path, O_WRONLY | O_TRUNC);
		check(fd >= 0 && write(fd, "k1 00\n", 6) == 6, "keys load: write a bad ring");
		close(fd);
		check(swift_keys_load(&c, k, SWIFT_KEYS_MAX, err, sizeof(err)) < 0 && strstr(err, path) &&
			      strstr(err, "want 64 hex digits"),
		      "keys load: a bad ring is refused, naming the file and the line");
		unlink(path);
		unlink(link);
		unlink(fifo);
		rmdir(dir);
	}
}

/* A small deterministic generator (xorshift), so a failure reproduces. */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void mutate(uint8_t *p, size_t *n, size_t max, uint64_t *s)
{
	int k, times = 1 + (int)(rnd(s) % 4);

	for (k = 0; k < times; k++) {
		size_t at = *n ? rnd(s) % *n : 0;

		switch (rnd(s) % 6) {
		case 0: /* flip a bit */
			if (*n)
				p[at] ^= (uint8_t)(1u << (rnd(s) % 8));
			break;
		case 1: /* set a byte to an edge value */
			if (*n) {
				static const uint8_t edge[] = {0, 1, 0x7f, 0x80, 0xff, '\n', '\\', ' '};
				p[at] = edge[rnd(s) % sizeof(edge)];
			}
			break;
		case 2: /* truncate */
			*n = at;
			break;
		case 3: /* insert a random byte */
			if (*n < max) {
				memmove(p + at + 1, p + at, *n - at);
				p[at] = (uint8_t)rnd(s);
				(*n)++;
			}
			break;
		case 4: /* a 32-bit field to an edge value */
			if (*n >= 4) {
				static const uint32_t edge[] = {0,        1,         64,         65,
								0xffffff, 0x1000000, 0x7fffffff, 0xffffffff};
				uint32_t v = edge[rnd(s) % 8];

				at = (at / 4) * 4;
				if (at + 4 <= *n)
					memcpy(p + at, &v, 4);
			}
			break;
		default: /* duplicate a stretch */
			if (*n && *n < max) {
				size_t len = 1 + rnd(s) % 16;

				if (at + len > *n)
					len = *n - at;
				if (*n + len <= max) {
					memmove(p + at + len, p + at, *n - at);
					(*n) += len;
				}
			}
		}
	}
}

/* The protocol's MACs, computed here from its description, to send a
 * server valid proofs around mutated QPs (and so reach the QP parsing). */
/* proto_mac: HMAC(secret, role | h | s), s (the exchange's secret S) or
 * nothing when NULL */
static void proto_mac(const char *secret, char role, const uint8_t h[32], const uint8_t *s, uint8_t out[32])
{
	uint8_t m[65];

	m[0] = (uint8_t)role;
	memcpy(m + 1, h, 32);
	if (s)
		memcpy(m + 33, s, 32);
	hmac_sha256((const uint8_t *)secret, strlen(secret), m, s ? 65 : 33, out);
}

static void proto_tag(const uint8_t k[32], char role, const uint8_t *msg, size_t n, uint8_t out[32])
{
	uint8_t m[1 + SWIFT_XBUF];

	m[0] = (uint8_t)role;
	memcpy(m + 1, msg, n);
	hmac_sha256(k, 32, m, 1 + n, out);
}

/* test_mutations feeds mutated transcripts to both ends: later exchanges
 * over a link both ends hold (L known to the harness), and one in 64 a
 * first exchange, where the harness plays the other end's ephemeral key
 * (X25519 is slow under the sanitizers). A server gets
 * a hello (mutated, or valid and then valid proofs around mutated QPs,
 * tagged anew half of the time), a client gets a mutated challenge, reply
 * and ack (the challenge's proof computed anew, so that the reply is
 * parsed).
 * Whatever arrives, an end returns, and one that fails or is cut off
 * leaves no row behind. */
static void test_mutations(long iterations)
{
	static const char *secret = "0123456789abcdef-key-one";
	struct side *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
	uint8_t buf[SWIFT_XBUF * 2], h[32], sess[32], m[SWIFT_XBUF], dh[32], priv[32], pub[32], lk[32], lp[33];
	uint64_t seed = 0x9e3779b97f4a7c15ULL;
	long i, done = 0, failed_ends = 0, leaks = 0, deep = 0, parsed = 0;
	int rc;

	memset(priv, 0x5a, sizeof(priv));
	swift_x25519_base(pub, priv);
	memset(lk, 0x4c, sizeof(lk));

	for (i = 0; i < iterations; i++) {
		int server = (int)(rnd(&seed) & 1);
		size_t chunk = 1 + rnd(&seed) % 64, n, hn;
		sha256_ctx c;

		int initial = rnd(&seed) % 64 == 0;

		side_init(a, "a", "t1", K1, "b");
		side_init(b, "b", "t1", K1, "a");
		memcpy(a->fake.link.link, lk, 32);
		memcpy(b->fake.link.link, lk, 32);
		a->fake.have_link = b->fake.have_link = !initial;
		swift_xconn_client(&a->x, &a->env, 0, 1 + (int)(rnd(&seed) % 4),
				   (initial ? SWIFT_X_INITIAL : 0) | (unsigned)(rnd(&seed) % 2) * SWIFT_X_LINK, NULL,
				   NULL);
		hn = take(&a->x, buf, sizeof(buf));
		if (server) {
			swift_xconn_server(&b->x);
			if (rnd(&seed) % 4 == 0) {
				n = hn;
				mutate(buf, &n, sizeof(buf), &seed);
				rc = feed(&b->x, &b->env, buf, n, chunk);
			} else {
				rc = feed(&b->x, &b->env, buf, hn, chunk);
				take(&b->x, m, sizeof(m)); /* the challenge: nonce_s, pub_s, proof */
				if (rc == XC_MORE && b->x.step == X_AUTH) {
					int count = b->x.count, q;

					sha256_init(&c);
					sha256_update(&c, buf, hn);
					sha256_update(&c, m, 48);
					sha256_final(&c, h);
					if (initial)
						swift_x25519(dh, a->x.eph, m + 16);
					else
						memcpy(dh, lk, 32);
					proto_mac(secret, 'I', h, NULL, m);
					memset(m + 32, 0, 32); /* no link proof in a first exchange */
					if (!initial) {
						lp[0] = 'P';
						memcpy(lp + 1, h, 32);
						hmac_sha256(lk, 32, lp, sizeof(lp), m + 32);
					}
					proto_mac(secret, 'K', h, dh, sess);
					for (q = 0; q < count; q++) {
						uint32_t v[11] = {0x100 + (uint32_t)q, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0};

						memcpy(m + 64 + 44 * q, v, 44);
					}
					n = 44 * (size_t)count;
					mutate(m + 64, &n, sizeof(m) - 128, &seed);
					n += 64;
					if (rnd(&seed) % 2) {
						/* tagged anew: the mutated QPs are parsed */
						proto_tag(sess, 'Q', m + 64, n - 64, m + n);
						n += 32;
						deep++;
					}
					rc = feed(&b->x, &b->env, m, n, chunk);
					if (b->x.step != X_AUTH && strstr(b->x.err, "changed in transit") == NULL)
						parsed++; /* past the QPs' tag */
					if (rc == XC_MORE && b->x.step == X_CONFIRM) {
						proto_tag(sess, 'C', m, 0, m);
						rc = feed(&b->x, &b->env, m, 32, chunk);
					}
				}
			}
			take(&b->x, m, sizeof(m)); /* what it answered went out */
			rc = settle(&b->x, rc);
			if (rc == XC_FAIL)
				failed_ends++;
			if (rc == XC_DONE || rc == XC_HELD)
				done++;
			if (rc == XC_MORE || rc == XC_FAIL) {
				/* cut off, or failed: the loop aborts it */
				swift_xconn_abort(&b->x, &b->env);
				if (b->fake.nlive)
					leaks++;
			} else if (b->fake.nlive != b->x.count) {
				leaks++;
			}
		} else {
			/* a valid challenge for this hello, then a mutated reply */
			uint8_t ch[80], r[8 + 64 * 44 + 32];
			int count = a->x.count, q;

			memset(ch, 0x33, 16);
			memset(ch + 16, 0, 32);
			if (initial)
				memcpy(ch + 16, pub, 32);
			sha256_init(&c);
			sha256_update(&c, buf, hn);
			sha256_update(&c, ch, 48);
			sha256_final(&c, h);
			if (initial)
				swift_x25519(dh, priv, buf + hn - 32);
			else
				memcpy(dh, lk, 32);
			proto_mac(secret, 'S', h, NULL, ch + 48);
			proto_mac(secret, 'K', h, dh, sess);
			n = 80;
			if (rnd(&seed) % 8 == 0)
				mutate(ch, &n, sizeof(ch), &seed);
			rc = feed(&a->x, &a->env, ch, n, chunk);
			take(&a->x, m, sizeof(m));
			if (rc == XC_MORE && a->x.step == X_REPLY) {
				memset(r, 0, sizeof(r));
				r[4] = (uint8_t)count;
				for (q = 0; q < count; q++) {
					uint32_t v[11] = {0x200 + (uint32_t)q, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0};

					memcpy(r + 8 + 44 * q, v, 44);
				}
				n = 8 + 44 * (size_t)count;
				mutate(r, &n, sizeof(r) - 32, &seed);
				if (rnd(&seed) % 2) {
					proto_tag(sess, 'R', r, n, r + n);
					deep++;
				} else {
					memset(r + n, 0, 32);
				}
				n += 32;
				rc = feed(&a->x, &a->env, r, n, chunk);
				take(&a->x, m, sizeof(m));
				if (a->x.step == X_ACK || strstr(a->x.err, "out of range") ||
				    strstr(a->x.err, "connect QP"))
					parsed++; /* past the reply's tag */
				if (rc == XC_MORE && a->x.step == X_ACK) {
					proto_tag(sess, 'A', m, 0, m);
					n = 32;
					if (rnd(&seed) % 4 == 0)
						mutate(m, &n, 64, &seed);
					rc = feed(&a->x, &a->env, m, n, chunk);
				}
			}
			if (rc == XC_FAIL)
				failed_ends++;
			if (rc == XC_DONE || rc == XC_HELD)
				done++;
			if (rc == XC_MORE || rc == XC_FAIL) {
				swift_xconn_abort(&a->x, &a->env);
				if (a->fake.nlive)
					leaks++;
			} else if (a->fake.nlive != a->x.count) {
				leaks++;
			}
		}
	}
	printf("mutations: %ld inputs (%ld with valid tags around mutated QPs, %ld parsed), %ld ends refused, %ld "
	       "completed\n",
	       iterations, deep, parsed, failed_ends, done);
	check(leaks == 0, "mutations: no end that failed or was cut off kept a row");
	check(failed_ends > iterations / 4, "mutations: most mutated transcripts are refused");
	check(deep > iterations / 8, "mutations: many are tagged anew around mutated QPs");
	check(parsed > iterations / 16, "mutations: many reach the parsing of QPs behind valid tags");
	free(a);
	free(b);
}

/* a GID table entry: IPv4-mapped a.b.c.d, or the link-local fe80::1 */
static struct swift_gid_ent gent(const char *v4, int v2)
{
	struct swift_gid_ent e;

	memset(&e, 0, sizeof(e));
	e.valid = 1;
	e.v2 = v2;
	if (v4) {
		e.raw[10] = e.raw[11] = 0xff;
		inet_pton(AF_INET, v4, e.raw + 12);
	} else {
		e.raw[0] = 0xfe;
		e.raw[1] = 0x80;
		e.raw[15] = 1;
	}
	return e;
}

static void test_pick_gid(void)
{
	/* rxe0 after a pod's macvlan joined: the node's entries first */
	struct swift_gid_ent t[6];
	struct swift_gid_ent ib[2];
	uint32_t node, pod, other;

	inet_pton(AF_INET, "10.0.2.15", &node);
	inet_pton(AF_INET, "10.0.2.101", &pod);
	inet_pton(AF_INET, "192.168.9.9", &other);
	t[0] = gent(NULL, 1);
	t[1] = gent("10.0.2.15", 1);
	t[2] = gent(NULL, 1);
	t[3] = gent("10.0.2.101", 0);
	t[4] = gent("10.0.2.101", 1);
	t[5] = gent(NULL, 1);
	check(swift_pick_gid(t, 6, &node, 1) == 1, "pick_gid: the node's own address on the host network");
	check(swift_pick_gid(t, 6, &pod, 1) == 4, "pick_gid: a pod's address, RoCE v2 before v1, never the node's");
	t[4].v2 = 0;
	t[3].v2 = 0;
	check(swift_pick_gid(t, 6, &pod, 1) == 3, "pick_gid: v1 when the address has no v2 entry");
	check(swift_pick_gid(t, 6, &other, 1) == -2, "pick_gid: no entry of this namespace: refused, not the node's");
	check(swift_pick_gid(t, 6, NULL, 0) == -2, "pick_gid: no address at all: refused");
	t[4].valid = 0;
	t[3].valid = 0;
	check(swift_pick_gid(t, 6, &pod, 1) == -2, "pick_gid: an entry that did not answer is not used");
	/* InfiniBand: no IPv4-mapped entry, the first valid one (GID 0) */
	ib[0] = gent(NULL, 0);
	ib[0].valid = 0;
	ib[1] = gent(NULL, 0);
	check(swift_pick_gid(ib, 2, &pod, 1) == 1, "pick_gid: InfiniBand, the first valid entry");
	ib[1].valid = 0;
	check(swift_pick_gid(ib, 2, &pod, 1) == -1, "pick_gid: nothing valid");
	check(swift_pick_gid(ib, 0, &pod, 1) == -1, "pick_gid: an empty table");
}

static void test_esc(void)
{
	char out[64];

	swift_esc("ok-name_1.2", 64, out, sizeof(out));
	check(!strcmp(out, "ok-name_1.2"), "esc: a plain name is unchanged");
	swift_esc("a\nb\x1b[31m\\", 64, out, sizeof(out));
	check(!strcmp(out, "a\\x0ab\\x1b[31m\\x5c"), "esc: control bytes and the backslash are escaped");
	swift_esc("\xff\xfe", 64, out, 6);
	check(strlen(out) < 6, "esc: output fits its buffer");
}

/* put: a file at base/rel (its directories made) */
static void put(const char *base, const char *rel)
{
	char p[512], *s;
	int fd;

	snprintf(p, sizeof(p), "%s/%s", base, rel);
	for (s = p + strlen(base) + 1; (s = strchr(s, '/')); s++) {
		*s = 0;
		mkdir(p, 0755);
		*s = '/';
	}
	fd = open(p, O_WRONLY | O_CREAT, 0644);
	if (fd >= 0)
		close(fd);
}

/* test_landlock: a function confined as one under the zygote's own uid
 * (child.c) in a small tree: root B, the socket directory B/run/swift, a
 * proc B/proc where it is process 4242. Each attack it plays is refused;
 * what it may do still works. */
static void test_in_sorted_xnext(void)
{
	static const uintptr_t a[] = {0x1000, 0x3000, 0x7000, 0x7fff0000};
	static const struct {
		int asked, late, want;
	} x[] = {
		{64, 1, 32}, {32, 1, 16}, {1, 1, 1},  {3, 1, 1},   {64, 0, 64}, {16, 0, 32},
		{40, 0, 64}, {1, 0, 2},   {0, 1, 32}, {65, 0, 64}, {-5, 1, 32},
	};
	size_t i;
	char what[96];

	check(swift_in_sorted(a, 4, 0x1000) && swift_in_sorted(a, 4, 0x7000) && swift_in_sorted(a, 4, 0x7fff0000),
	      "in_sorted: first, middle and last are found");
	check(!swift_in_sorted(a, 4, 0x2000) && !swift_in_sorted(a, 4, 0) && !swift_in_sorted(a, 4, 0x80000000) &&
		      !swift_in_sorted(a, 0, 0x1000) && !swift_in_sorted(a, 3, 0x7fff0000),
	      "in_sorted: absent values, an empty array and the element past n are not");
	for (i = 0; i < sizeof(x) / sizeof(x[0]); i++) {
		snprintf(what, sizeof(what), "xnext(%d, late %d, 64) = %d", x[i].asked, x[i].late, x[i].want);
		check(swift_xnext(x[i].asked, x[i].late, 64) == x[i].want, what);
	}
}

static void test_dir_of(void)
{
	static const struct {
		const char *path;
		size_t len;
		const char *want;
	} cases[] = {
		{"/run/swift/zygote.sock", 64, "/run/swift"},
		{"/zygote.sock", 64, "/"},
		{"zygote.sock", 64, "."},
		{"run/swift/s", 64, "run/swift"},
		{"/a/b/c/d/e", 5, "/a/b"}, /* cut to the buffer */
	};
	char buf[64], what[160];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *got = swift_dir_of(cases[i].path, buf, cases[i].len);

		snprintf(what, sizeof(what), "dir_of(%s) = %s, want %s", cases[i].path, got, cases[i].want);
		check(!strcmp(got, cases[i].want) && got == buf, what);
	}
}

static void test_landlock(void)
{
	char base[] = "/tmp/swift-landlock-XXXXXX", p[512];
	static const struct {
		const char *what, *path;
		int op; /* 0 open read, 1 open write, 2 create, 3 unlink, 4 mkfifo, 5 rename into B/run/swift,
			 * 6 a signal to its parent (the zygote, or the gateway beside it), 7 a signal to
			 * its own child */
		int ok;
	} cases[] = {
		{"its own files", "a/f", 1, 1},
		{"a new file of its own", "a/new", 2, 1},
		{"a file in another directory of /run", "run/other/f", 1, 1},
		{"a new file there", "run/other/new", 2, 1},
		{"its own /proc/<pid>/mem", "proc/4242/mem", 1, 1},
		{"a /proc entry of no process", "proc/meminfo", 0, 1},
		{"reading the control socket's directory", "run/swift/zygote.sock", 0, 0},
		{"replacing the control socket (unlink)", "run/swift/zygote.sock", 3, 0},
		{"a FIFO where the status is written", "run/swift/pool.status.tmp", 4, 0},
		{"a file into the socket directory by rename", "a/f", 5, 0},
		{"the socket directory through a link to /run", "varrun/swift/zygote.sock", 3, 0},
		{"the entrypoint's /proc/<pid>/mem", "proc/2/mem", 1, 0},
		{"the zygote's /proc/1/mem, read", "proc/1/mem", 0, 0},
		{"a signal to a process outside (its parent)", "", 6, 0},
		{"a signal to its own child", "", 7, 1},
	};
	struct swift_confine c;
	char why[512];
	size_t i;
	pid_t pid;
	int st;

	if (swift_landlock_abi() < 1) {
		check(0, "landlock: the kernel has no Landlock (5.13 or later, landlock in lsm=): the confinement of "
			 "same-uid functions cannot be tested");
		return;
	}
	if (swift_landlock_abi() < 6)
		check(0, "landlock: the kernel's Landlock is older than ABI 6 (Linux 6.12): a same-uid function "
			 "may signal the zygote and its workload, and the test of its signal scope cannot run");
	if (!mkdtemp(base)) {
		check(0, "landlock: mkdtemp");
		return;
	}
	put(base, "a/f");
	put(base, "run/swift/zygote.sock");
	put(base, "run/other/f");
	put(base, "proc/1/mem");
	put(base, "proc/2/mem");
	put(base, "proc/4242/mem");
	put(base, "proc/meminfo");
	snprintf(p, sizeof(p), "%s/varrun", base);
	if (symlink("run", p))
		check(0, "landlock: symlink");
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pid = fork();
		if (pid == 0) {
			char full[512], to[512];
			int r = 0, fd;

			memset(&c, 0, sizeof(c));
			snprintf(full, sizeof(full), "%s/run/swift", base);
			c.root = base;
			c.protect[c.nprotect++] = full;
			snprintf(to, sizeof(to), "%s/proc", base);
			c.proc = to;
			c.self = 4242;
			if (swift_landlock_confine(&c, why, sizeof(why))) {
				fprintf(stderr, "confine: %s\n", why);
				_exit(3);
			}
			snprintf(full, sizeof(full), "%s/%s", base, cases[i].path);
			switch (cases[i].op) {
			case 0:
			case 1:
				fd = open(full, cases[i].op ? O_RDWR : O_RDONLY);
				r = fd >= 0 ? 0 : -1;
				break;
			case 2:
				fd = open(full, O_WRONLY | O_CREAT | O_EXCL, 0644);
				r = fd >= 0 ? 0 : -1;
				break;
			case 3:
				r = unlink(full);
				break;
			case 4:
				r = mkfifo(full, 0644);
				break;
			case 5:
				snprintf(to, sizeof(to), "%s/run/swift/planted", base);
				r = rename(full, to);
				break;
			case 6:
				r = kill(getppid(), 0);
				break;
			default: {
				pid_t kid = fork();

				if (kid == 0) {
					pause();
					_exit(0);
				}
				r = kid > 0 ? kill(kid, SIGKILL) : -1;
				if (kid > 0)
					waitpid(kid, NULL, 0);
				break;
			}
			}
			/* _exit: no sanitizer report reads what it may not */
			_exit(r == 0 ? 0 : errno == EACCES || errno == EXDEV || errno == EPERM ? 1 : 2);
		}
		st = -1;
		waitpid(pid, &st, 0);
		snprintf(why, sizeof(why), "landlock: %s %s (exit %d)", cases[i].what,
			 cases[i].ok ? "works" : "is refused with EACCES", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		check(WIFEXITED(st) && WEXITSTATUS(st) == (cases[i].ok ? 0 : 1), why);
	}
	snprintf(p, sizeof(p), "rm -rf '%s'", base);
	if (system(p))
		check(0, "landlock: clean up");
}

int main(void)
{
	const char *m = getenv("SWIFT_MUTATIONS");

	test_sha256();
	test_hmac();
	test_config();
	test_share();
	test_shm();
	test_requests();
	test_schedule();
	test_relay();
	test_seal();
	test_x25519();
	test_exchange();
	test_keys();
	test_esc();
	test_pick_gid();
	test_dir_of();
	test_in_sorted_xnext();
	test_landlock();
	test_mutations(m ? atol(m) : 100000);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
