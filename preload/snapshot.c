/* snapshot.c — parse and validate the verbs cache snapshot, and compare its
 * fingerprint with the running node. Shared by libswiftverbs.so and the unit
 * tests. It makes its system calls directly (sys.h), calls snprintf only
 * to word a rejection, and allocates nothing, so that the preload loads and
 * runs in any image and its validation binds no libc symbol. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "snapshot.h"
#include "sys.h"

uint64_t swv_fnv1a64(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 14695981039346656037ull;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ull;
	}
	return h;
}

static uint32_t le32(const unsigned char *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint16_t le16(const unsigned char *b)
{
	return (uint16_t)(b[0] | b[1] << 8);
}

static uint64_t le64(const unsigned char *b)
{
	return (uint64_t)le32(b) | (uint64_t)le32(b + 4) << 32;
}

/* str copies a NUL-terminated string field of n bytes; 0 if it has no NUL. */
static int str(char *dst, const unsigned char *src, size_t n)
{
	if (!memchr(src, 0, n))
		return 0;
	memcpy(dst, src, n);
	return 1;
}

static int parse(const void *buf, size_t len, struct swv_snapshot *out, char *why, size_t whylen)
{
	const unsigned char *b = buf;
	uint32_t version, size, i, j;

	/* Only the header and the devices present are written: out is large
	 * (every possible device) and untouched pages cost nothing. */
	out->ndev = 0;
	if (len < SWV_HDR_SIZE) {
		snprintf(why, whylen, "snapshot truncated (%u bytes)", (unsigned)len);
		return -1;
	}
	if (memcmp(b, SWV_MAGIC, 8) != 0) {
		snprintf(why, whylen, "not a snapshot (bad magic)");
		return -1;
	}
	version = le32(b + 8);
	if (version != SWV_VERSION) {
		snprintf(why, whylen, "snapshot version %u, want %u", version, SWV_VERSION);
		return -1;
	}
	size = le32(b + 12);
	if (size != len) {
		snprintf(why, whylen, "snapshot says %u bytes, file has %u (truncated?)", size, (unsigned)len);
		return -1;
	}
	i = le32(b + 24);
	if (i > SWV_MAX_DEVS || size != SWV_HDR_SIZE + i * SWV_DEV_SIZE) {
		snprintf(why, whylen, "snapshot has a bad device count (%u) for its size (%u)", i, size);
		return -1;
	}
	if (le64(b + 16) != swv_fnv1a64(b + 24, size - 24)) {
		snprintf(why, whylen, "snapshot checksum mismatch (corrupt)");
		return -1;
	}
	out->ndev = i;
	out->flags = le32(b + 28);
	if (!str(out->kernel, b + 32, 64) || !str(out->rdma_core, b + 96, 32) || !str(out->drivers, b + 128, 256)) {
		snprintf(why, whylen, "snapshot header has an unterminated string");
		return -1;
	}
	for (i = 0; i < out->ndev; i++) {
		const unsigned char *d = b + SWV_HDR_SIZE + i * SWV_DEV_SIZE;
		struct swv_dev *dv = &out->devs[i];

		if (!str(dv->name, d, 64) || !str(dv->uverbs, d + 64, 16) || !str(dv->node_guid, d + 88, 32) ||
		    !str(dv->fw_ver, d + 120, 64) || !dv->name[0] || !dv->uverbs[0] || strchr(dv->name, '/') ||
		    strchr(dv->uverbs, '/') || dv->name[0] == '.' || dv->uverbs[0] == '.') {
			snprintf(why, whylen, "snapshot device %u has a bad name field", i);
			return -1;
		}
		dv->major = le32(d + 80);
		dv->minor = le32(d + 84);
		dv->flags = le32(d + 184);
		dv->attr_len = le32(d + 188);
		if (dv->attr_len > SWV_ATTR_MAX) {
			snprintf(why, whylen, "snapshot device %s: attr_len %u > %u", dv->name, dv->attr_len,
				 SWV_ATTR_MAX);
			return -1;
		}
		memcpy(dv->attr, d + 192, SWV_ATTR_MAX);
		dv->nports = le32(d + 704);
		memset(dv->ports, 0, sizeof(dv->ports));
		if (dv->nports > SWV_MAX_PORTS) {
			snprintf(why, whylen, "snapshot device %s: %u ports > %u", dv->name, dv->nports, SWV_MAX_PORTS);
			return -1;
		}
		for (j = 0; j < dv->nports; j++) {
			const unsigned char *p = d + 712 + j * SWV_PORT_SIZE;
			struct swv_port *pt = &dv->ports[j];

			pt->flags = le32(p);
			pt->max_mtu = le32(p + 4);
			pt->gid_tbl_len = (int32_t)le32(p + 8);
			pt->port_cap_flags = le32(p + 12);
			pt->max_msg_sz = le32(p + 16);
			pt->pkey_tbl_len = le16(p + 20);
			pt->max_vl_num = p[22];
			pt->link_layer = p[23];
			pt->port_cap_flags2 = le16(p + 24);
		}
		dv->inode = le64(d + 840);
		for (j = 0; j < i; j++) {
			if (!strcmp(out->devs[j].name, dv->name) || !strcmp(out->devs[j].uverbs, dv->uverbs)) {
				snprintf(why, whylen, "snapshot lists device %s twice", dv->name);
				return -1;
			}
		}
	}
	return 0;
}

int swv_parse(const void *buf, size_t len, struct swv_snapshot *out, char *why, size_t whylen)
{
	if (parse(buf, len, out, why, whylen) == 0)
		return 0;
	out->ndev = 0; /* a rejected snapshot describes no device */
	out->drivers[0] = 0;
	return -1;
}

int swv_find_dev(const struct swv_snapshot *s, const char *name)
{
	uint32_t i;

	for (i = 0; i < s->ndev; i++)
		if (!strcmp(s->devs[i].name, name))
			return (int)i;
	return -1;
}

/* read_value reads a small sysfs file, rel under the directory dirfd, into
 * buf, trimming whitespace at both ends. A sysfs attribute comes whole in
 * one read; a read that fills buf is followed by more. Returns 0, or -1 if
 * it cannot be read. */
static int read_value(int dirfd, const char *rel, char *buf, size_t n)
{
	long r;
	size_t len = 0, start = 0;
	int fd;

	fd = swv_openat(dirfd, rel, 0);
	if (fd < 0)
		return -1;
	while (len < n - 1) {
		r = swv_read(fd, buf + len, n - 1 - len);
		if (r < 0) {
			swv_close(fd);
			return -1;
		}
		len += (size_t)r;
		if (r == 0 || len < n - 1)
			break;
	}
	swv_close(fd);
	buf[len] = 0;
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' ' || buf[len - 1] == '\t'))
		buf[--len] = 0;
	while (buf[start] == ' ' || buf[start] == '\t' || buf[start] == '\n')
		start++;
	if (start)
		memmove(buf, buf + start, len - start + 1);
	return 0;
}

/* join writes a "/" b into dst (n bytes); 0, or -1 if it does not fit. */
static int join(char *dst, size_t n, const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);

	if (la + 1 + lb + 1 > n)
		return -1;
	memcpy(dst, a, la);
	dst[la] = '/';
	memcpy(dst + la + 1, b, lb + 1);
	return 0;
}

/* utoa writes v in decimal at p; returns the end. */
static char *utoa(char *p, uint32_t v)
{
	char t[10];
	int n = 0;

	do
		t[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	while (n)
		*p++ = t[--n];
	return p;
}

/* devnum writes "major:minor" into p (at least 22 bytes), as sysfs does. */
static void devnum(char *p, uint32_t major, uint32_t minor)
{
	p = utoa(p, major);
	*p++ = ':';
	*utoa(p, minor) = 0;
}

/* The kernel's directory entry (getdents64). */
struct swv_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/* scan_uverbs lists the directory dirfd (class/infiniband_verbs) once.
 * Returns 1 with its name in name for a uverbs entry the snapshot does not
 * know; 2 with its snapshot index in *dev for a known one whose inode
 * differs from the recorded one (the device was registered again); 0 if
 * neither; -1 if the directory cannot be read. getdents64 on a stack
 * buffer instead of opendir: no allocation. */
static int scan_uverbs(const struct swv_snapshot *s, int dirfd, char *name, size_t n, uint32_t *dev, uint8_t *seen)
{
	union {
		char b[4096];
		uint64_t align;
	} buf;
	long r, off;
	uint32_t i;

	while ((r = swv_getdents64(dirfd, buf.b, sizeof(buf.b))) > 0) {
		for (off = 0; off < r;) {
			struct swv_dirent64 *de = (struct swv_dirent64 *)(buf.b + off);

			off += de->d_reclen;
			if (de->d_reclen == 0)
				break;
			if (strncmp(de->d_name, "uverbs", 6) != 0)
				continue;
			for (i = 0; i < s->ndev; i++)
				if (!strcmp(s->devs[i].uverbs, de->d_name))
					break;
			if (i < s->ndev) {
				if (s->devs[i].inode && s->devs[i].inode != de->d_ino) {
					*dev = i;
					return 2;
				}
				seen[i] = 1;
				continue;
			}
			for (i = 0; de->d_name[i] && i < n - 1; i++)
				name[i] = de->d_name[i];
			name[i] = 0;
			return 1;
		}
	}
	return r < 0 ? -1 : 0;
}

/* check_devices compares every snapshot device whose registration it
 * does not know with the node: verbs is the open class/infiniband_verbs
 * directory, ib the open class/infiniband one (-1 if it cannot be opened). */
static int check_devices(const struct swv_snapshot *s, int verbs, int ib, char *why, size_t whylen)
{
	char rel[128], val[128], want[32];
	uint32_t i;

	for (i = 0; i < s->ndev; i++) {
		const struct swv_dev *d = &s->devs[i];

		if (d->inode)
			continue; /* its registration is checked: see swv_check_fingerprint */
		if (join(rel, sizeof(rel), d->uverbs, "ibdev") < 0 || read_value(verbs, rel, val, sizeof(val)) < 0) {
			snprintf(why, whylen, "device %s (%s) is gone", d->name, d->uverbs);
			return 1;
		}
		if (strcmp(val, d->name) != 0) {
			snprintf(why, whylen, "%s is now device %s, the cache has %s", d->uverbs, val, d->name);
			return 1;
		}
		devnum(want, d->major, d->minor);
		if (join(rel, sizeof(rel), d->uverbs, "dev") < 0 || read_value(verbs, rel, val, sizeof(val)) < 0 ||
		    strcmp(val, want) != 0) {
			snprintf(why, whylen, "device %s: device number %s, the cache has %s", d->name, val, want);
			return 1;
		}
		if (join(rel, sizeof(rel), d->name, "node_guid") < 0 || read_value(ib, rel, val, sizeof(val)) < 0)
			val[0] = 0;
		if (strcmp(val, d->node_guid) != 0) {
			snprintf(why, whylen, "device %s: node GUID %s, the cache has %s", d->name, val, d->node_guid);
			return 1;
		}
		if (join(rel, sizeof(rel), d->name, "fw_ver") < 0 || read_value(ib, rel, val, sizeof(val)) < 0)
			val[0] = 0;
		if (strcmp(val, d->fw_ver) != 0) {
			snprintf(why, whylen, "device %s: firmware %s, the cache has %s", d->name, val, d->fw_ver);
			return 1;
		}
	}
	return 0;
}

int swv_check_fingerprint(const struct swv_snapshot *s, const char *sysfs, const char *release, char *why,
			  size_t whylen)
{
	char path[512], uv[256], val[128];
	uint8_t seen[SWV_MAX_DEVS] = {0};
	uint32_t dev = 0, i, unknown = 0;
	int verbs, ib, r;

	if (strcmp(release, s->kernel) != 0) {
		snprintf(why, whylen, "kernel release is %s, the cache was built on %s", release, s->kernel);
		return 1;
	}
	if (join(path, sizeof(path), sysfs, "class/infiniband_verbs") < 0 ||
	    (verbs = swv_openat(AT_FDCWD, path, O_DIRECTORY)) < 0) {
		if (s->ndev == 0)
			return 0;
		snprintf(why, whylen, "cannot read %s/class/infiniband_verbs: no devices visible, the cache knows %u",
			 sysfs, s->ndev);
		return 1;
	}
	r = scan_uverbs(s, verbs, uv, sizeof(uv), &dev, seen);
	if (r == 2) {
		swv_close(verbs);
		snprintf(why, whylen, "device %s (%s) was registered again since the cache was built",
			 s->devs[dev].name, s->devs[dev].uverbs);
		return 1;
	}
	if (r < 0) {
		swv_close(verbs);
		if (s->ndev == 0)
			return 0;
		snprintf(why, whylen, "cannot read %s: no devices visible, the cache knows %u", path, s->ndev);
		return 1;
	}
	if (r > 0) {
		if (join(path, sizeof(path), uv, "ibdev") < 0 || read_value(verbs, path, val, sizeof(val)) < 0)
			val[0] = 0;
		swv_close(verbs);
		snprintf(why, whylen, "device %s (%s) is not in the cache", val[0] ? val : "?", uv);
		return 1;
	}
	for (i = 0; i < s->ndev; i++) {
		if (!s->devs[i].inode) {
			unknown++;
		} else if (!seen[i]) {
			swv_close(verbs);
			snprintf(why, whylen, "device %s (%s) is gone", s->devs[i].name, s->devs[i].uverbs);
			return 1;
		}
	}
	if (!unknown) {
		swv_close(verbs);
		return 0;
	}
	ib = -1;
	if (join(path, sizeof(path), sysfs, "class/infiniband") == 0)
		ib = swv_openat(AT_FDCWD, path, O_DIRECTORY);
	r = check_devices(s, verbs, ib, why, whylen);
	swv_close(verbs);
	if (ib >= 0)
		swv_close(ib);
	return r;
}

/* parse_guid reads a node GUID as sysfs writes it ("0200:00ff:fe00:0001")
 * into a number; 0 if it is not one. */
static uint64_t parse_guid(const char *g)
{
	uint64_t v = 0;
	int digits = 0;

	for (; *g; g++) {
		int x;

		if (*g == ':')
			continue;
		if (*g >= '0' && *g <= '9')
			x = *g - '0';
		else if (*g >= 'a' && *g <= 'f')
			x = *g - 'a' + 10;
		else if (*g >= 'A' && *g <= 'F')
			x = *g - 'A' + 10;
		else
			return 0;
		if (++digits > 16)
			return 0;
		v = v << 4 | (uint64_t)x;
	}
	return v;
}

int swv_check_open(const struct swv_dev *d, const char *dev_name, uint64_t guid, char *why, size_t whylen)
{
	uint64_t want = parse_guid(d->node_guid);

	if (dev_name && strcmp(dev_name, d->uverbs) != 0) {
		snprintf(why, whylen, "device %s is %s, the cache has %s", d->name, dev_name, d->uverbs);
		return 1;
	}
	if (guid && want && guid != want) {
		snprintf(why, whylen, "device %s: node GUID %04x:%04x:%04x:%04x, the cache has %s", d->name,
			 (unsigned)(guid >> 48), (unsigned)(guid >> 32) & 0xffff, (unsigned)(guid >> 16) & 0xffff,
			 (unsigned)guid & 0xffff, d->node_guid);
		return 1;
	}
	return 0;
}

int swv_port_static_diff(const struct swv_port *w, const struct ibv_port_attr *g, char *why, size_t whylen)
{
#define SWV_CMP(field, fmtv) \
	do { \
		if ((uint64_t)w->field != (uint64_t)g->field) { \
			snprintf(why, whylen, #field " is %" fmtv ", the cache has %" fmtv, \
				 (unsigned long long)g->field, (unsigned long long)w->field); \
			return 1; \
		} \
	} while (0)
	SWV_CMP(max_mtu, "llu");
	SWV_CMP(gid_tbl_len, "llu");
	SWV_CMP(port_cap_flags, "llx");
	SWV_CMP(max_msg_sz, "llu");
	SWV_CMP(pkey_tbl_len, "llu");
	SWV_CMP(max_vl_num, "llu");
	SWV_CMP(link_layer, "llu");
	SWV_CMP(port_cap_flags2, "llx");
#undef SWV_CMP
	return 0;
}

/* fix sets *v to real if it equals the cached limit that differs from it. */
#define SWV_FIX(v, c, r, n) \
	do { \
		if ((c) != (r) && (int64_t)(v) == (int64_t)(c)) { \
			(v) = (r); \
			(n)++; \
		} \
	} while (0)

int swv_fix_qp_cap(struct ibv_qp_cap *cap, const struct ibv_device_attr *c, const struct ibv_device_attr *r)
{
	int n = 0;

	SWV_FIX(cap->max_send_wr, (uint32_t)c->max_qp_wr, (uint32_t)r->max_qp_wr, n);
	SWV_FIX(cap->max_recv_wr, (uint32_t)c->max_qp_wr, (uint32_t)r->max_qp_wr, n);
	SWV_FIX(cap->max_send_sge, (uint32_t)c->max_sge, (uint32_t)r->max_sge, n);
	SWV_FIX(cap->max_recv_sge, (uint32_t)c->max_sge, (uint32_t)r->max_sge, n);
	return n;
}

int swv_fix_cqe(int *cqe, const struct ibv_device_attr *c, const struct ibv_device_attr *r)
{
	int n = 0;

	SWV_FIX(*cqe, c->max_cqe, r->max_cqe, n);
	return n;
}

int swv_fix_qp_attr(struct ibv_qp_attr *a, int mask, const struct ibv_device_attr *c, const struct ibv_device_attr *r)
{
	int n = 0;

	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		SWV_FIX(a->max_rd_atomic, (uint8_t)c->max_qp_init_rd_atom, (uint8_t)r->max_qp_init_rd_atom, n);
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		SWV_FIX(a->max_dest_rd_atomic, (uint8_t)c->max_qp_rd_atom, (uint8_t)r->max_qp_rd_atom, n);
	if (mask & IBV_QP_CAP)
		n += swv_fix_qp_cap(&a->cap, c, r);
	return n;
}
