/* Unit tests of the verbs cache's C side: the snapshot reader against the
 * golden file the Go writer produces (testdata/snapshot-v2.bin, see
 * verbs/snapshot_test.go), corruption and truncation, the fingerprint check
 * against fake sysfs trees, the port static-field check, and the preload's
 * load-time decisions in real processes (LD_PRELOAD into a probe).
 * No RDMA device needed. Prints "N passed, N failed".
 *
 *   preload-unit TESTDATA_DIR OUT_DIR   (OUT_DIR holds libswiftverbs.so, preload-probe)
 *   preload-unit --plain                (internal: a process without libibverbs)
 *   preload-unit --late                 (internal: one that dlopens libibverbs later) */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "elfsym.h"
#include "snapshot.h"
#include "swiftverbs.h"

static int passed, failed;

static void check(int ok, const char *fmt, ...)
{
	va_list ap;

	if (ok) {
		passed++;
		return;
	}
	failed++;
	printf("FAIL: ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static unsigned char *read_all(const char *path, size_t *len)
{
	unsigned char *b = malloc(SWV_MAX_SIZE + 16);
	ssize_t r;
	int fd = open(path, O_RDONLY);

	*len = 0;
	if (!b || fd < 0) {
		free(b);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	while ((r = read(fd, b + *len, SWV_MAX_SIZE + 16 - *len)) > 0)
		*len += (size_t)r;
	close(fd);
	return b;
}

static void put32(unsigned char *b, uint32_t v)
{
	b[0] = v;
	b[1] = v >> 8;
	b[2] = v >> 16;
	b[3] = v >> 24;
}

static void reseal(unsigned char *b, size_t len)
{
	uint64_t h = swv_fnv1a64(b + 24, len - 24);

	put32(b + 16, (uint32_t)h);
	put32(b + 20, (uint32_t)(h >> 32));
}

static void test_fnv(void)
{
	check(swv_fnv1a64("", 0) == 0xcbf29ce484222325ull, "fnv1a64(\"\")");
	check(swv_fnv1a64("a", 1) == 0xaf63dc4c8601ec8cull, "fnv1a64(\"a\")");
	check(swv_fnv1a64("foobar", 6) == 0x85944171f73967e8ull, "fnv1a64(\"foobar\")");
}

static void test_golden(const unsigned char *b, size_t len)
{
	static struct swv_snapshot s;
	char why[256] = "";
	uint32_t i, ok0 = 1, ok1 = 1;

	check(len == SWV_HDR_SIZE + 2 * SWV_DEV_SIZE, "golden size %zu", len);
	check(swv_parse(b, len, &s, why, sizeof(why)) == 0, "parse golden: %s", why);
	check(s.ndev == 2, "ndev %u", s.ndev);
	check(s.flags == SWV_F_COPY_ON_FORK, "flags %u", s.flags);
	check(!strcmp(s.kernel, "6.1.0-swift-test"), "kernel %s", s.kernel);
	check(!strcmp(s.rdma_core, "44.0"), "rdma_core %s", s.rdma_core);
	check(!strcmp(s.drivers, "mlx5:rxe:siw"), "drivers %s", s.drivers);
	check(!strcmp(s.devs[0].name, "rxe0") && !strcmp(s.devs[0].uverbs, "uverbs0"), "dev0 names");
	check(s.devs[0].major == 231 && s.devs[0].minor == 192, "dev0 number");
	check(!strcmp(s.devs[0].node_guid, "0200:00ff:fe00:0001") && !strcmp(s.devs[0].fw_ver, "1.0.0"),
	      "dev0 guid/fw");
	check(s.devs[0].flags == SWV_D_ATTR_STABLE && s.devs[0].attr_len == 400, "dev0 flags/attr_len");
	for (i = 0; i < 400; i++)
		ok0 &= s.devs[0].attr[i] == (uint8_t)(i * 7 + 1);
	check(ok0, "dev0 attr bytes");
	check(s.devs[0].nports == 1, "dev0 nports");
	{
		const struct swv_port *p = &s.devs[0].ports[0];

		check(p->flags == SWV_P_STABLE && p->max_mtu == 5 && p->gid_tbl_len == 32 &&
			      p->port_cap_flags == 0x890000 && p->max_msg_sz == 0x800000 && p->pkey_tbl_len == 1 &&
			      p->max_vl_num == 1 && p->link_layer == 2 && p->port_cap_flags2 == 0x20,
		      "dev0 port fields");
	}
	check(!strcmp(s.devs[1].name, "rxe1") && s.devs[1].minor == 193 && s.devs[1].fw_ver[0] == 0, "dev1");
	check(s.devs[1].flags == 0 && s.devs[1].attr_len == 232 && s.devs[1].nports == 0, "dev1 flags");
	for (i = 0; i < 232; i++)
		ok1 &= s.devs[1].attr[i] == (uint8_t)(255 - i);
	check(ok1, "dev1 attr bytes");
	check(s.devs[0].inode == 0x100004131ull && s.devs[1].inode == 0, "inodes %llx %llx",
	      (unsigned long long)s.devs[0].inode, (unsigned long long)s.devs[1].inode);
	check(swv_find_dev(&s, "rxe1") == 1 && swv_find_dev(&s, "rxe2") == -1, "find_dev");
}

static void test_corrupt(const unsigned char *good, size_t len)
{
	static struct swv_snapshot s;
	unsigned char *b = malloc(len + 8);
	char why[256];
	size_t n, i;
	int all = 1;
	struct {
		const char *name;
		size_t off;
		const char *bytes;
		size_t nbytes;
		int u32;
		uint32_t val;
		const char *want;
	} cases[] = {
		{"version", 8, NULL, 0, 1, 1, "snapshot version 1, want 2"},
		{"device count", 24, NULL, 0, 1, 3, "device count"},
		{"device count huge", 24, NULL, 0, 1, 0x80000000u, "device count"},
		{"attr_len", SWV_HDR_SIZE + 188, NULL, 0, 1, SWV_ATTR_MAX + 1, "attr_len"},
		{"nports", SWV_HDR_SIZE + 704, NULL, 0, 1, SWV_MAX_PORTS + 1, "ports"},
		{"name slash", SWV_HDR_SIZE, "a/b", 4, 0, 0, "bad name"},
		{"name empty", SWV_HDR_SIZE, "", 1, 0, 0, "bad name"},
		{"name dotdot", SWV_HDR_SIZE, "..", 3, 0, 0, "bad name"},
		{"uverbs slash", SWV_HDR_SIZE + 64, "../x", 5, 0, 0, "bad name"},
		{"duplicate", SWV_HDR_SIZE + SWV_DEV_SIZE, "rxe0", 5, 0, 0, "twice"},
	};

	/* every truncation and every flipped byte is refused */
	for (n = 0; n < len; n++)
		all &= swv_parse(good, n, &s, why, sizeof(why)) < 0;
	check(all, "every truncation refused");
	all = 1;
	for (i = 0; i < len; i++) {
		memcpy(b, good, len);
		b[i] ^= 0x5a;
		if (swv_parse(b, len, &s, why, sizeof(why)) == 0) {
			all = 0;
			printf("  flipped byte %zu accepted\n", i);
		}
	}
	check(all, "every flipped byte refused");
	memcpy(b, good, len);
	b[len] = 0;
	check(swv_parse(b, len + 1, &s, why, sizeof(why)) < 0 && strstr(why, "truncated"), "appended byte: %s", why);
	memcpy(b, good, len);
	memcpy(b, "SWIFTVB2", 8);
	check(swv_parse(b, len, &s, why, sizeof(why)) < 0 && strstr(why, "magic"), "magic: %s", why);
	memcpy(b, good, len);
	b[100] = 'x';
	check(swv_parse(b, len, &s, why, sizeof(why)) < 0 && strstr(why, "checksum"), "checksum: %s", why);
	memcpy(b, good, len);
	memset(b + 32, 'k', 64);
	reseal(b, len);
	check(swv_parse(b, len, &s, why, sizeof(why)) < 0 && strstr(why, "unterminated"), "kernel unterminated: %s",
	      why);
	memcpy(b, good, len);
	memset(b + SWV_HDR_SIZE, 'n', 64);
	reseal(b, len);
	check(swv_parse(b, len, &s, why, sizeof(why)) < 0 && strstr(why, "bad name"), "name unterminated: %s", why);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memcpy(b, good, len);
		if (cases[i].u32)
			put32(b + cases[i].off, cases[i].val);
		else
			memcpy(b + cases[i].off, cases[i].bytes, cases[i].nbytes);
		reseal(b, len);
		why[0] = 0;
		check(swv_parse(b, len, &s, why, sizeof(why)) < 0 && strstr(why, cases[i].want),
		      "%s: got \"%s\", want \"%s\"", cases[i].name, why, cases[i].want);
	}
	free(b);
}

/* A fake sysfs tree with rxe0 (uverbs0) and rxe1 (uverbs1) as in the golden file. */
static void put(const char *root, const char *rel, const char *val)
{
	char path[512], dir[512];
	char *slash;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(dir, sizeof(dir), "%s", path);
	for (slash = dir + strlen(root) + 1; (slash = strchr(slash, '/')) != NULL; slash++) {
		*slash = 0;
		mkdir(dir, 0755);
		*slash = '/';
	}
	f = fopen(path, "w");
	if (f) {
		fputs(val, f);
		fclose(f);
	}
}

static void rm(const char *root, const char *rel)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s/%s'", root, rel);
	if (system(cmd) != 0)
		printf("warning: %s failed\n", cmd);
}

static void make_tree(const char *root)
{
	rm(root, "class");
	put(root, "class/infiniband_verbs/abi_version", "6\n");
	put(root, "class/infiniband_verbs/uverbs0/ibdev", "rxe0\n");
	put(root, "class/infiniband_verbs/uverbs0/dev", "231:192\n");
	put(root, "class/infiniband_verbs/uverbs1/ibdev", "rxe1\n");
	put(root, "class/infiniband_verbs/uverbs1/dev", "231:193\n");
	put(root, "class/infiniband/rxe0/node_guid", "0200:00ff:fe00:0001\n");
	put(root, "class/infiniband/rxe0/fw_ver", "1.0.0\n");
	put(root, "class/infiniband/rxe1/node_guid", "0200:00ff:fe00:0002\n");
}

/* tree_inode is the inode number of the fake tree's class entry for
 * uverbs (0 if it cannot be read). */
static uint64_t tree_inode(const char *root, const char *uverbs)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s/class/infiniband_verbs/%s", root, uverbs);
	return lstat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* reregister_uverbs0 recreates the fake tree's uverbs0 entry with the same
 * files, as a device registered again has: a new inode number (a padding
 * entry made in between keeps the old number from being reused at once). */
static void reregister_uverbs0(const char *root)
{
	rm(root, "class/infiniband_verbs/uverbs0");
	put(root, "class/infiniband_verbs/zz/pad", "x\n");
	put(root, "class/infiniband_verbs/uverbs0/ibdev", "rxe0\n");
	put(root, "class/infiniband_verbs/uverbs0/dev", "231:192\n");
	rm(root, "class/infiniband_verbs/zz");
}

/* set_inode writes dev's inode into a snapshot file image and reseals it. */
static void set_inode(unsigned char *b, size_t len, int dev, uint64_t ino)
{
	put32(b + SWV_HDR_SIZE + dev * SWV_DEV_SIZE + 840, (uint32_t)ino);
	put32(b + SWV_HDR_SIZE + dev * SWV_DEV_SIZE + 844, (uint32_t)(ino >> 32));
	reseal(b, len);
}

static void test_fingerprint(const unsigned char *b, size_t len, const char *root)
{
	static struct swv_snapshot s;
	char why[400];
	const char *k = "6.1.0-swift-test";

	if (swv_parse(b, len, &s, why, sizeof(why)) < 0) {
		check(0, "parse golden for fingerprint: %s", why);
		return;
	}
	make_tree(root);
	s.devs[0].inode = tree_inode(root, "uverbs0");
	why[0] = 0;
	check(swv_check_fingerprint(&s, root, k, why, sizeof(why)) == 0, "matching tree: %s", why);
	check(swv_check_fingerprint(&s, root, "6.1.0-other", why, sizeof(why)) == 1 &&
		      strstr(why, "kernel release is 6.1.0-other"),
	      "kernel: %s", why);

	put(root, "class/infiniband_verbs/uverbs2/ibdev", "rxe2\n");
	put(root, "class/infiniband_verbs/uverbs2/dev", "231:194\n");
	check(swv_check_fingerprint(&s, root, k, why, sizeof(why)) == 1 &&
		      !strcmp(why, "device rxe2 (uverbs2) is not in the cache"),
	      "added device: %s", why);
	make_tree(root);
	s.devs[0].inode = tree_inode(root, "uverbs0");
	rm(root, "class/infiniband_verbs/uverbs1");
	check(swv_check_fingerprint(&s, root, k, why, sizeof(why)) == 1 &&
		      !strcmp(why, "device rxe1 (uverbs1) is gone"),
	      "removed device: %s", why);
	make_tree(root);
	s.devs[0].inode = tree_inode(root, "uverbs0");
	/* rxe0's registration is known (its inode): one listing checks it,
	 * and its name, uverbs node and node GUID are left to the check at
	 * open (swv_check_open, against what libibverbs listed) */
	put(root, "class/infiniband_verbs/uverbs0/ibdev", "rxe9\n");
	put(root, "class/infiniband_verbs/uverbs0/dev", "231:200\n");
	put(root, "class/infiniband/rxe0/node_guid", "0200:00ff:fe00:00ff\n");
	why[0] = 0;
	check(swv_check_fingerprint(&s, root, k, why, sizeof(why)) == 0, "known registration, files not read: %s", why);
	/* rxe1's is not (inode 0): read in full */
	make_tree(root);
	s.devs[0].inode = tree_inode(root, "uverbs0");
	put(root, "class/infiniband_verbs/uverbs1/ibdev", "rxe9\n");
	check(swv_check_fingerprint(&s, root, k, why, sizeof(why)) == 1 && strstr(why, "uverbs1 is now device rxe9"),
	      "renamed: %s", why);
	make_tree(root);
	s.devs[0].inode = tree_inode(root, "uverbs0");
	put(root, "class/infiniband_verbs/uverbs1/dev", "231:200\n");
	check(swv_check_fingerprint(&s, root, k, why, sizeof(why)) == 1 && strstr(why, "device number 231:200"),
	      "dev number: %s", why);
	make_tree(root);
	s.devs[0].inode = tree_inode(root, "uverbs0");
	put(root, "class/infiniband/rxe1/node_guid", "0200:00ff:fe00:00ff\n");
	check(swv_check_fingerprint(&s, root, k, why, sizeof(why)) == 1 && strstr(why, "node GUID"), "guid: %s", why);
	/* a known device missing from the listing */
	make_tree(root);
	s.devs[0].inode = tree_inode(root, "uverbs0");
	rm(root, "class/infiniband_verbs/uverbs0");
	check(swv_check_fingerprint(&s, root, k, why, sizeof(why)) == 1 &&
		      !strcmp(why, "device rxe0 (uverbs0) is gone"),
	      "known device removed: %s", why);
	/* at open: the uverbs node and node GUID libibverbs found */
	check(swv_check_open(&s.devs[0], "uverbs0", 0x020000fffe000001ull, why, sizeof(why)) == 0, "open: same device");
	check(swv_check_open(&s.devs[0], "uverbs0", 0, why, sizeof(why)) == 0, "open: GUID unknown to libibverbs");
	check(swv_check_open(&s.devs[0], "uverbs1", 0x020000fffe000001ull, why, sizeof(why)) == 1 &&
		      !strcmp(why, "device rxe0 is uverbs1, the cache has uverbs0"),
	      "open: another uverbs node: %s", why);
	check(swv_check_open(&s.devs[0], "uverbs0", 0x020000fffe0000ffull, why, sizeof(why)) == 1 &&
		      !strcmp(why, "device rxe0: node GUID 0200:00ff:fe00:00ff, the cache has 0200:00ff:fe00:0001"),
	      "open: another GUID: %s", why);
	make_tree(root);
	s.devs[0].inode = tree_inode(root, "uverbs0");
	put(root, "class/infiniband/rxe1/fw_ver", "2.0\n");
	check(swv_check_fingerprint(&s, root, k, why, sizeof(why)) == 1 && strstr(why, "firmware 2.0"), "fw: %s", why);
	make_tree(root);
	s.devs[0].inode = tree_inode(root, "uverbs0");
	check(s.devs[0].inode != 0 && swv_check_fingerprint(&s, root, k, why, sizeof(why)) == 0, "inode recorded: %s",
	      why);
	/* rxe0 registered again: the same files in a new class entry */
	reregister_uverbs0(root);
	check(tree_inode(root, "uverbs0") != s.devs[0].inode, "fake tree: a new inode for uverbs0");
	check(swv_check_fingerprint(&s, root, k, why, sizeof(why)) == 1 &&
		      !strcmp(why, "device rxe0 (uverbs0) was registered again since the cache was built"),
	      "registered again: %s", why);
	make_tree(root);
	s.devs[0].inode = tree_inode(root, "uverbs0");
	rm(root, "class");
	check(swv_check_fingerprint(&s, root, k, why, sizeof(why)) == 1 && strstr(why, "cannot read"), "no sysfs: %s",
	      why);
	make_tree(root);
	s.devs[0].inode = tree_inode(root, "uverbs0");
}

static void test_port_diff(void)
{
	struct swv_port w = {.flags = SWV_P_STABLE,
			     .max_mtu = 5,
			     .gid_tbl_len = 32,
			     .port_cap_flags = 0x890000,
			     .max_msg_sz = 0x800000,
			     .pkey_tbl_len = 1,
			     .max_vl_num = 1,
			     .link_layer = 2,
			     .port_cap_flags2 = 0x20};
	struct ibv_port_attr g = {.state = IBV_PORT_ACTIVE,
				  .max_mtu = 5,
				  .active_mtu = 3,
				  .gid_tbl_len = 32,
				  .port_cap_flags = 0x890000,
				  .max_msg_sz = 0x800000,
				  .pkey_tbl_len = 1,
				  .max_vl_num = 1,
				  .link_layer = 2,
				  .port_cap_flags2 = 0x20,
				  .lid = 7};
	char why[200] = "";

	check(swv_port_static_diff(&w, &g, why, sizeof(why)) == 0, "same port: %s", why);
	g.state = IBV_PORT_DOWN;
	g.active_mtu = 1;
	g.lid = 9;
	check(swv_port_static_diff(&w, &g, why, sizeof(why)) == 0, "dynamic fields ignored: %s", why);
	g.max_mtu = 4;
	check(swv_port_static_diff(&w, &g, why, sizeof(why)) == 1 && !strcmp(why, "max_mtu is 4, the cache has 5"),
	      "max_mtu: %s", why);
	g.max_mtu = 5;
	g.gid_tbl_len = 16;
	check(swv_port_static_diff(&w, &g, why, sizeof(why)) == 1 && strstr(why, "gid_tbl_len"), "gid_tbl_len: %s",
	      why);
	g.gid_tbl_len = 32;
	g.link_layer = 1;
	check(swv_port_static_diff(&w, &g, why, sizeof(why)) == 1 && strstr(why, "link_layer"), "link_layer: %s", why);
}

static void test_fix(void)
{
	struct ibv_device_attr c = {.max_qp_wr = 32768,
				    .max_sge = 32,
				    .max_cqe = 1 << 20,
				    .max_qp_rd_atom = 128,
				    .max_qp_init_rd_atom = 128};
	struct ibv_device_attr r = {.max_qp_wr = 16384,
				    .max_sge = 32,
				    .max_cqe = 1 << 18,
				    .max_qp_rd_atom = 64,
				    .max_qp_init_rd_atom = 128};
	struct ibv_qp_cap cap = {.max_send_wr = 32768, .max_recv_wr = 100, .max_send_sge = 32, .max_recv_sge = 1};
	struct ibv_qp_attr a = {.max_rd_atomic = 128, .max_dest_rd_atomic = 128};
	int cqe = 1 << 20, n;

	n = swv_fix_qp_cap(&cap, &c, &r);
	check(n == 1 && cap.max_send_wr == 16384 && cap.max_recv_wr == 100 && cap.max_send_sge == 32,
	      "fix_qp_cap: only the field equal to a changed cached limit (n %d, wr %u)", n, cap.max_send_wr);
	check(swv_fix_qp_cap(&cap, &c, &r) == 0, "fix_qp_cap is idempotent");
	check(swv_fix_cqe(&cqe, &c, &r) == 1 && cqe == 1 << 18, "fix_cqe");
	cqe = 64;
	check(swv_fix_cqe(&cqe, &c, &r) == 0 && cqe == 64, "fix_cqe leaves other sizes");
	n = swv_fix_qp_attr(&a, IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MAX_QP_RD_ATOMIC, &c, &r);
	check(n == 1 && a.max_dest_rd_atomic == 64 && a.max_rd_atomic == 128, "fix_qp_attr: responder depth (n %d)", n);
	a.max_dest_rd_atomic = 128;
	check(swv_fix_qp_attr(&a, IBV_QP_STATE, &c, &r) == 0 && a.max_dest_rd_atomic == 128,
	      "fix_qp_attr honours the mask");
	check(swv_fix_qp_cap(&cap, &c, &c) == 0, "nothing to fix when nothing changed");
}

/* run runs argv with extra environment entries, capturing stdout and stderr. */
static int run(char *const argv[], const char *const env[], char *out, size_t on, char *err, size_t en)
{
	int po[2], pe[2], st;
	ssize_t r;
	size_t o = 0, e = 0;
	pid_t pid;

	if (pipe(po) < 0 || pipe(pe) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		int i;

		for (i = 0; env[i]; i++)
			putenv((char *)env[i]);
		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]);
		close(pe[0]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	while (o < on - 1 && (r = read(po[0], out + o, on - 1 - o)) > 0)
		o += (size_t)r;
	while (e < en - 1 && (r = read(pe[0], err + e, en - 1 - e)) > 0)
		e += (size_t)r;
	out[o] = 0;
	err[e] = 0;
	close(po[0]);
	close(pe[0]);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int write_file(const char *path, const void *b, size_t n)
{
	FILE *f = fopen(path, "w");
	int ok;

	if (!f)
		return -1;
	ok = fwrite(b, 1, n, f) == n;
	return fclose(f) == 0 && ok ? 0 : -1;
}

static void test_preload(const unsigned char *golden, size_t len, const char *out, const char *root, const char *self)
{
	char cache[400], snap[450], probe[400], lib[400], e_cache[450], e_sysfs[450], e_pre[450];
	char o[4096], e[4096];
	unsigned char *b = malloc(len);
	struct utsname u;
	char *argv[3] = {probe, NULL, NULL};
	char *pargv[3] = {(char *)self, "--plain", NULL};
	int rc;

	snprintf(cache, sizeof(cache), "%s/cache", root);
	snprintf(snap, sizeof(snap), "%s/snapshot.bin", cache);
	snprintf(probe, sizeof(probe), "%s/preload-probe", out);
	snprintf(lib, sizeof(lib), "%s/libswiftverbs.so", out);
	if (lib[0] != '/' || access(lib, R_OK) || access(probe, X_OK)) {
		check(0, "need absolute %s and %s (make test)", lib, probe);
		free(b);
		return;
	}
	mkdir(cache, 0755);
	uname(&u);
	memcpy(b, golden, len);
	memset(b + 32, 0, 64);
	memcpy(b + 32, u.release, strnlen(u.release, 63));
	set_inode(b, len, 0, 0); /* not recorded until the registration case below */
	write_file(snap, b, len);
	snprintf(e_cache, sizeof(e_cache), "SWIFT_VERBS_CACHE=%s", cache);
	snprintf(e_sysfs, sizeof(e_sysfs), "SWIFT_VERBS_SYSFS=%s", root);
	snprintf(e_pre, sizeof(e_pre), "LD_PRELOAD=%s", lib);
	make_tree(root);

	{
		const char *env[] = {e_pre, e_cache, e_sysfs, NULL};

		rc = run(argv, env, o, sizeof(o), e, sizeof(e));
		check(rc == 0 && !strcmp(o, "state=valid drivers=- resolver=elf\n") && e[0] == 0,
		      "valid: rc %d out \"%s\" err \"%s\"", rc, o, e);
	}
	{
		const char *env[] = {e_pre, e_cache, e_sysfs, "SWIFT_VERBS_RESOLVER=dlsym", NULL};

		rc = run(argv, env, o, sizeof(o), e, sizeof(e));
		check(rc == 0 && !strcmp(o, "state=valid drivers=- resolver=dlsym\n") && e[0] == 0,
		      "valid, calls found with dlsym: rc %d out \"%s\" err \"%s\"", rc, o, e);
	}
	{
		const char *env[] = {e_pre, e_cache, e_sysfs, "SWIFT_VERBS_DEBUG=1", NULL};

		rc = run(argv, env, o, sizeof(o), e, sizeof(e));
		check(rc == 0 && strstr(e, "swiftverbs: verbs cache valid: serving device attributes of 2 device(s)"),
		      "valid, debug: err \"%s\"", e);
	}
	put(root, "class/infiniband_verbs/uverbs2/ibdev", "rxe2\n");
	put(root, "class/infiniband_verbs/uverbs2/dev", "231:194\n");
	{
		const char *env[] = {e_pre, e_cache, e_sysfs, NULL};
		const char *want = "swiftverbs: verbs cache is stale (device rxe2 (uverbs2) is not in the cache): "
				   "using the real verbs calls and every provider\n";

		rc = run(argv, env, o, sizeof(o), e, sizeof(e));
		check(rc == 0 && !strcmp(o, "state=stale drivers=mlx5:rxe:siw resolver=elf\n"),
		      "added device: out \"%s\"", o);
		check(!strcmp(e, want), "added device: exactly one log line, got \"%s\"", e);
	}
	{
		const char *env[] = {e_pre, e_cache, e_sysfs, "RDMAV_DRIVERS=/opt/x/libfoo", NULL};

		rc = run(argv, env, o, sizeof(o), e, sizeof(e));
		check(rc == 0 && !strcmp(o, "state=stale drivers=/opt/x/libfoo:mlx5:rxe:siw resolver=elf\n"),
		      "keeps RDMAV_DRIVERS: \"%s\"", o);
	}
	make_tree(root);
	rm(root, "class/infiniband_verbs/uverbs1");
	{
		const char *env[] = {e_pre, e_cache, e_sysfs, NULL};

		rc = run(argv, env, o, sizeof(o), e, sizeof(e));
		check(rc == 0 && !strcmp(o, "state=stale drivers=mlx5:rxe:siw resolver=elf\n") &&
			      strstr(e, "(device rxe1 (uverbs1) is gone)"),
		      "removed device: out \"%s\" err \"%s\"", o, e);
	}
	make_tree(root);
	write_file(snap, b, len - 1);
	{
		const char *env[] = {e_pre, e_cache, e_sysfs, NULL};

		rc = run(argv, env, o, sizeof(o), e, sizeof(e));
		check(rc == 0 && !strncmp(o, "state=unusable drivers=bnxt_re:", 31) && strstr(o, ":rxe:") &&
			      strstr(e, "verbs cache unusable (snapshot says"),
		      "truncated snapshot: out \"%s\" err \"%s\"", o, e);
	}
	unlink(snap);
	{
		const char *env[] = {e_pre, e_cache, e_sysfs, NULL};

		rc = run(argv, env, o, sizeof(o), e, sizeof(e));
		check(rc == 0 && !strncmp(o, "state=unusable", 14) && strstr(e, "cannot open"),
		      "missing snapshot: out \"%s\" err \"%s\"", o, e);
	}
	write_file(snap, b, len);
	{
		const char *env[] = {e_pre, e_cache, e_sysfs, "SWIFT_VERBS=off", NULL};

		rc = run(argv, env, o, sizeof(o), e, sizeof(e));
		check(rc == 0 && !strcmp(o, "state=off drivers=- resolver=elf\n") && e[0] == 0,
		      "off: out \"%s\" err \"%s\"", o, e);
	}
	{
		const char *env[] = {e_pre, e_cache, e_sysfs, NULL};

		rc = run(pargv, env, o, sizeof(o), e, sizeof(e));
		check(rc == 0 && !strcmp(o, "preloaded=1 state=none init_ns=0\n") && e[0] == 0,
		      "process without libibverbs: out \"%s\" err \"%s\"", o, e);
	}
	make_tree(root);
	set_inode(b, len, 0, tree_inode(root, "uverbs0"));
	write_file(snap, b, len);
	{
		const char *env[] = {e_pre, e_cache, e_sysfs, NULL};
		const char *want =
			"swiftverbs: verbs cache is stale (device rxe0 (uverbs0) was registered again since the "
			"cache was built): using the real verbs calls and every provider\n";

		rc = run(argv, env, o, sizeof(o), e, sizeof(e));
		check(rc == 0 && !strcmp(o, "state=valid drivers=- resolver=elf\n") && e[0] == 0,
		      "inode recorded: out \"%s\" err \"%s\"", o, e);
		reregister_uverbs0(root);
		rc = run(argv, env, o, sizeof(o), e, sizeof(e));
		check(rc == 0 && !strcmp(o, "state=stale drivers=mlx5:rxe:siw resolver=elf\n") && !strcmp(e, want),
		      "registered again: out \"%s\" err \"%s\"", o, e);
	}
	make_tree(root);
	set_inode(b, len, 0, 0);
	write_file(snap, b, len);
	{
		const char *env[] = {e_pre, e_cache, e_sysfs, NULL};
		char *largv[3] = {(char *)self, "--late", NULL};

		rc = run(largv, env, o, sizeof(o), e, sizeof(e));
		check(rc == 0 && !strcmp(o, "before=none state=valid resolver=elf\n") && e[0] == 0,
		      "libibverbs loaded late: out \"%s\" err \"%s\"", o, e);
	}
	free(b);
}

/* The preload's own symbol lookup must agree with dlsym, including which
 * version of a versioned symbol it picks. */
static void test_elfsym(void)
{
	struct swv_elf e;
	void *h = dlopen("libibverbs.so.1", RTLD_NOW);
	void *v10;

	check(swv_elf_find("libswift-not-loaded.so", &e) == -1, "elfsym: an object that is not loaded is -1");
	check(swv_elf_find("libc.so", &e) == 0, "elfsym: libc found");
	/* realpath@@GLIBC_2.3 is the default, realpath@GLIBC_2.2.5 the old one */
	check(swv_elf_sym(&e, "realpath") == dlsym(RTLD_DEFAULT, "realpath") && swv_elf_sym(&e, "realpath") != NULL,
	      "elfsym: libc realpath is dlsym's (the default version)");
	check(swv_elf_sym(&e, "swift_no_such_symbol") == NULL, "elfsym: a missing name is NULL");
	if (!h) {
		check(0, "elfsym: dlopen libibverbs.so.1: %s", dlerror());
		return;
	}
	check(swv_elf_find("libibverbs.so", &e) == 0, "elfsym: libibverbs found");
	v10 = dlvsym(h, "ibv_get_device_list", "IBVERBS_1.0");
	check(swv_elf_sym(&e, "ibv_get_device_list") == dlsym(h, "ibv_get_device_list") && v10 &&
		      swv_elf_sym(&e, "ibv_get_device_list") != v10,
	      "elfsym: ibv_get_device_list@@IBVERBS_1.1, not @IBVERBS_1.0");
	check(swv_elf_sym(&e, "ibv_reg_mr") == dlsym(h, "ibv_reg_mr") &&
		      swv_elf_sym(&e, "ibv_modify_qp") == dlsym(h, "ibv_modify_qp"),
	      "elfsym: ibv_reg_mr and ibv_modify_qp are dlsym's");
	check(swv_elf_sym(&e, "ibv_no_such_call") == NULL, "elfsym: a missing libibverbs name is NULL");
}

int main(int argc, char **argv)
{
	char path[512], root[] = "/tmp/swiftverbs-unit-XXXXXX";
	unsigned char *golden;
	size_t len;

	if (argc == 2 && !strcmp(argv[1], "--plain")) {
		struct swiftverbs_stats *st = dlsym(RTLD_DEFAULT, "swiftverbs_stats");

		printf("preloaded=%d state=%s init_ns=%llu\n", st != NULL, swv_state_name(st ? st->state : 0),
		       st ? (unsigned long long)st->init_ns : 0ull);
		return 0;
	}
	if (argc == 2 && !strcmp(argv[1], "--late")) {
		/* libibverbs loaded after start, as a plugin would: the
		 * preload's wrapper (first in the global scope) runs its
		 * deferred validation at the first call. */
		struct swiftverbs_stats *st = dlsym(RTLD_DEFAULT, "swiftverbs_stats");
		void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_GLOBAL);
		struct ibv_device **(*gdl)(int *) =
			(struct ibv_device * *(*)(int *)) dlsym(RTLD_DEFAULT, "ibv_get_device_list");
		uint32_t before = st ? st->state : 0;
		struct ibv_device **l = h && gdl ? gdl(NULL) : NULL;

		(void)l; /* no device here: NULL or an empty list */
		printf("before=%s state=%s resolver=%s\n", swv_state_name(before), swv_state_name(st ? st->state : 0),
		       swv_resolver_name(st ? st->resolver : 0));
		return 0;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: %s TESTDATA_DIR OUT_DIR\n", argv[0]);
		return 2;
	}
	snprintf(path, sizeof(path), "%s/snapshot-v2.bin", argv[1]);
	golden = read_all(path, &len);
	if (!golden || !mkdtemp(root)) {
		printf("cannot read %s or make a temporary directory: %s\n0 passed, 1 failed\n", path, strerror(errno));
		return 1;
	}
	test_fnv();
	test_golden(golden, len);
	test_corrupt(golden, len);
	test_fingerprint(golden, len, root);
	test_port_diff();
	test_fix();
	test_elfsym();
	{
		char *out = realpath(argv[2], NULL), *self = realpath("/proc/self/exe", NULL);

		if (out && self)
			test_preload(golden, len, out, root, self);
		else
			check(0, "realpath %s", argv[2]);
		free(out);
		free(self);
	}
	rm(root, "");
	free(golden);
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
