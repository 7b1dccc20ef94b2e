/* libswiftverbs.so — the Swift verbs cache, in a container's verbs processes.
 *
 * The shim mounts a node's verbs cache at /.swift/verbs and, in cached
 * mode, its libibverbs-cached.d over /etc/libibverbs.d: the providers the
 * node's devices need, and an entry "driver /.swift/verbs/libswiftverbs"
 * that makes libibverbs load this library as if it were a provider
 * (libswiftverbs-rdmavNN.so, a link to it). libibverbs loads providers
 * only in a process that lists devices, inside its first
 * ibv_get_device_list, so a process that never uses RDMA loads nothing of
 * the cache. Loaded that way (the provider entry), this library registers
 * no provider: its constructor validates the cache and then either points
 * the program's and its libraries' slots for the wrapped calls at its
 * wrappers (got.h), or, if the cache cannot be used, loads every provider
 * itself and says why. The same library can also be preloaded
 * (LD_PRELOAD; the preload entry, which wraps by symbol interposition):
 * swift-profile --preload and swift-spawn --preload measure that. In a
 * process that uses libibverbs this library:
 *
 *  - at load (or, preloaded, at the first verbs call if libibverbs is
 *    loaded later) reads snapshot.bin and checks its fingerprint against
 *    the node: kernel release, and uverbs devices added, removed or
 *    registered again (the inode numbers of their class entries), in one
 *    directory listing (snapshot.h); at open, the device's uverbs node and
 *    node GUID as libibverbs read them. Valid: device attributes are
 *    served from the snapshot. Stale or unreadable: every call goes to libibverbs
 *    unchanged, every provider the node's rdma-core ships is added through
 *    RDMAV_DRIVERS (the mounted libibverbs.d lists only the providers the
 *    cached devices needed, so a new device would otherwise stay invisible;
 *    as a provider entry it loads them itself), and one line says why on
 *    stderr at the first verbs call;
 *  - serves ibv_query_device and ibv_query_device_ex from the snapshot;
 *  - checks the static fields of every ibv_query_port answer (the kernel
 *    returns static and dynamic port fields in one command, and port state,
 *    LID and active MTU are never cached) against the snapshot, and stops
 *    serving at the first difference;
 *  - when ibv_create_cq / ibv_create_qp / ibv_modify_qp / ibv_reg_mr fails
 *    in a context that was served cached attributes, queries the device for
 *    real: if the cache was wrong it stops serving, says so once, and
 *    retries the call once, with every argument that equals a cached limit
 *    (an application sizing its queues from ibv_query_device) replaced by
 *    the real limit.
 *
 * It must be safe in any process of any image: no libc or libibverbs
 * link-time dependency (all symbols are resolved at run time; dlsym is weak),
 * no allocation, no threads, nothing printed when the cache is valid; and
 * preloaded, a process that never touches libibverbs pays a walk of the
 * loader's list of objects (as a provider entry, nothing). The validation binds no libc symbol: its system calls
 * are made directly (sys.h), its string functions are this library's own
 * (libc.c), and the wrapped calls are found in libibverbs' symbol table
 * (elfsym.h); a first call through libc costs a symbol search of every
 * object in the process, more than the system call it makes.
 *
 * Environment: SWIFT_VERBS_CACHE (cache directory; default: the directory
 * a provider entry was loaded from, /.swift/verbs for a preload),
 * SWIFT_VERBS=off (disable), SWIFT_VERBS_DEBUG=1 (say what happens),
 * SWIFT_VERBS_SYSFS (sysfs root, for tests), SWIFT_VERBS_RESOLVER=dlsym
 * (find the wrapped calls with dlsym, for tests).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <link.h>
#include <sys/auxv.h>

#include "elfsym.h"
#include "got.h"
#include "snapshot.h"
#include "swiftverbs.h"
#include "sys.h"

/* Resolved at run time so that the library loads even where libdl is not. */
#pragma weak dlsym
#pragma weak dlopen
#pragma weak getauxval
extern ElfW(Dyn) _DYNAMIC[];
extern char **environ;
#pragma weak environ

#define EXPORT __attribute__((visibility("default")))

EXPORT struct swiftverbs_stats swiftverbs_stats;

static struct ibv_device **(*real_get_device_list)(int *);
static struct ibv_context *(*real_open_device)(struct ibv_device *);
static int (*real_close_device)(struct ibv_context *);
static int (*real_query_device)(struct ibv_context *, struct ibv_device_attr *);
static struct ibv_cq *(*real_create_cq)(struct ibv_context *, int, void *, struct ibv_comp_channel *, int);
static struct ibv_qp *(*real_create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
static int (*real_modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int);
static struct ibv_mr *(*real_reg_mr)(struct ibv_pd *, void *, size_t, int);
static __be64 (*real_get_device_guid)(struct ibv_device *);

typedef int (*query_port_fn)(struct ibv_context *, uint8_t, struct ibv_port_attr *, size_t);
typedef int (*query_device_ex_fn)(struct ibv_context *, const struct ibv_query_device_ex_input *,
				  struct ibv_device_attr_ex *, size_t);

static struct swv_snapshot snap;
/* Per snapshot device, once a revalidation found the cache wrong: the
 * device's real attributes, to correct later calls made with the stale
 * values the application still holds. */
static struct ibv_device_attr real_attrs[SWV_MAX_DEVS];
static int have_real[SWV_MAX_DEVS];
static unsigned char snapbuf[SWV_MAX_SIZE + 1];
static char reason[400];
static int init_lock, init_done, noted, invalid_noted, debug;
/* libibverbs as the loader has it (resolve), and this library's own file
 * name when libibverbs loaded it as a provider entry (entry). */
static const void *ibv_dyn;
static const char *ibv_path, *self_path;

/* A context opened while the cache was valid. */
struct swv_ctx {
	struct ibv_context *ctx;
	int dev;  /* index in snap.devs */
	int used; /* cached data was served on it */
	query_port_fn query_port;
	query_device_ex_fn query_device_ex;
};

#define SWV_MAX_CTX 64
static struct swv_ctx ctxs[SWV_MAX_CTX];
static int ctx_lock;

static void lock(int *l)
{
	while (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
		;
}

static void unlock(int *l)
{
	__atomic_store_n(l, 0, __ATOMIC_RELEASE);
}

static uint32_t state(void)
{
	return __atomic_load_n(&swiftverbs_stats.state, __ATOMIC_ACQUIRE);
}

static void say(const char *msg)
{
	size_t n = strlen(msg);

	while (n > 0) {
		ssize_t w = write(2, msg, n);

		if (w <= 0)
			return;
		msg += w;
		n -= (size_t)w;
	}
}

static void sayf2(const char *a, const char *b, const char *c)
{
	char line[512];

	snprintf(line, sizeof(line), "swiftverbs: %s%s%s\n", a, b, c);
	say(line);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The providers of rdma-core 44, for a cache whose snapshot cannot be read. */
#define SWV_ALL_PROVIDERS \
	"bnxt_re:cxgb4:efa:erdma:hfi1verbs:hns:ipathverbs:irdma:mana:mlx4:mlx5:mthca:ocrdma:qedr:rxe:" \
	"siw:vmw_pvrdma"

/* add_providers makes libibverbs load every provider, not only those of the
 * mounted libibverbs.d: RDMAV_DRIVERS adds to the config directory. */
static void add_providers(const char *list)
{
	static char buf[1024];
	const char *old = getenv("RDMAV_DRIVERS");

	if (!list || !*list)
		list = SWV_ALL_PROVIDERS;
	if (old && strstr(old, list))
		return; /* a parent process with this library added them already */
	if (old && *old)
		snprintf(buf, sizeof(buf), "%s:%s", old, list);
	else
		snprintf(buf, sizeof(buf), "%s", list);
	setenv("RDMAV_DRIVERS", buf, 1);
}

/* dir_len is the length of path's directory part ("/a/b" for "/a/b/c"). */
static size_t dir_len(const char *path)
{
	size_t i, d = 0;

	for (i = 0; path[i]; i++)
		if (path[i] == '/')
			d = i;
	return d;
}

/* provider_suffix is "-rdmavNN.so" when path names this library as
 * libibverbs loads a provider entry (.../libswiftverbs-rdmavNN.so), else
 * NULL (preloaded under its own name). */
static const char *provider_suffix(const char *path)
{
	static const char stem[] = "libswiftverbs-rdmav";
	size_t d = dir_len(path);
	const char *base = path + d + (path[d] == '/');

	if (strncmp(base, stem, sizeof(stem) - 1) != 0)
		return NULL;
	return base + sizeof(stem) - 1 - (sizeof("-rdmav") - 1);
}

/* load_providers: the provider entry of a cache that cannot be used. The
 * trimmed libibverbs.d this library was listed in names only the
 * providers the cached devices needed, and libibverbs has read it
 * already, so every provider in list (":"-separated; all of rdma-core's
 * when empty) is loaded here, from the directory libibverbs loads its
 * own from, before libibverbs matches devices to providers. A missing
 * one is skipped: libibverbs would only have warned. */
static void load_providers(const char *list, const char *suffix)
{
	char path[512];
	size_t dl;
	const char *p, *e;

	if (!dlopen || !ibv_path || !suffix)
		return;
	if (!list || !*list)
		list = SWV_ALL_PROVIDERS;
	dl = dir_len(ibv_path);
	if (dl == 0)
		return; /* loaded by a relative name: no directory to look in */
	for (p = list; *p; p = *e ? e + 1 : e) {
		for (e = p; *e && *e != ':'; e++)
			;
		if (e == p || dl + (size_t)(e - p) + 32 > sizeof(path) || memchr(p, '/', (size_t)(e - p)) ||
		    memchr(p, '.', (size_t)(e - p)))
			continue; /* a provider is a plain name */
		snprintf(path, sizeof(path), "%.*s/libibverbs/lib%.*s%s", (int)dl, ibv_path, (int)(e - p), p, suffix);
		if (!dlopen(path, RTLD_NOW) && debug)
			sayf2("cannot load provider ", path, "");
	}
}

/* env is getenv without a call into libc (see sys.h). In a process that
 * runs with more privilege than its caller (setuid, file capabilities:
 * AT_SECURE), nothing: the caller's environment must not point it at a
 * snapshot or a sysfs tree of its own making. */
static const char *env(const char *name)
{
	size_t n = strlen(name);
	char **e;

	if (!&environ || (getauxval && getauxval(AT_SECURE)))
		return NULL;
	for (e = environ; e && *e; e++)
		if (!strncmp(*e, name, n) && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

/* resolve finds the libibverbs functions this library wraps: in
 * libibverbs' own symbol table when it is loaded (elfsym.h); with
 * dlsym(RTLD_NEXT) when the loader's list of objects cannot be read or a
 * call is missing from that table. Nothing when libibverbs is not loaded. */
static void resolve(void)
{
	const char *by = env("SWIFT_VERBS_RESOLVER");
	struct swv_elf e;
	int found = -2, all = 1;

/* The wrapped calls: X(pointer, name). */
/* clang-format off */
#define SWV_WRAPPED(X) \
	X(real_get_device_list, "ibv_get_device_list") X(real_open_device, "ibv_open_device") \
	X(real_close_device, "ibv_close_device") X(real_query_device, "ibv_query_device") \
	X(real_create_cq, "ibv_create_cq") X(real_create_qp, "ibv_create_qp") \
	X(real_modify_qp, "ibv_modify_qp") X(real_reg_mr, "ibv_reg_mr") \
	X(real_get_device_guid, "ibv_get_device_guid")
	/* clang-format on */
	if (!(by && !strcmp(by, "dlsym")))
		found = swv_elf_find("libibverbs.so", &e);
	if (found == -1)
		return; /* libibverbs is not loaded (yet) */
	if (found == 0) {
		ibv_dyn = e.dyn;
		ibv_path = e.path;
#define E(var, name) all &= (var = (__typeof__(var))swv_elf_sym(&e, name)) != NULL;
		SWV_WRAPPED(E)
#undef E
		if (all) {
			swiftverbs_stats.resolver = SWV_BY_ELF;
			return;
		}
	}
	if (!dlsym)
		return;
#define R(var, name) var = (__typeof__(var))dlsym(RTLD_NEXT, name);
	SWV_WRAPPED(R)
#undef R
#undef SWV_WRAPPED
	if (real_get_device_list)
		swiftverbs_stats.resolver = SWV_BY_DLSYM;
}

/* load reads and checks the snapshot; returns the new state. */
static uint32_t load(void)
{
	const char *dir = env("SWIFT_VERBS_CACHE");
	const char *sysfs = env("SWIFT_VERBS_SYSFS");
	static const char file[] = "/snapshot.bin";
	char path[256];
	struct utsname u;
	size_t len = 0, dl;
	long r;
	int fd;

	if (!sysfs || !*sysfs)
		sysfs = "/sys";
	if (dir && *dir) {
		dl = strlen(dir);
	} else if (self_path) { /* a provider entry: the cache is where it lies */
		dir = self_path;
		dl = dir_len(self_path);
	} else {
		dir = "/.swift/verbs";
		dl = strlen(dir);
	}
	if (dl + sizeof(file) > sizeof(path)) {
		snprintf(reason, sizeof(reason), "cache directory name too long: %.*s", (int)dl, dir);
		return SWV_UNUSABLE;
	}
	memcpy(path, dir, dl);
	memcpy(path + dl, file, sizeof(file));
	fd = swv_openat(AT_FDCWD, path, 0);
	if (fd < 0) {
		snprintf(reason, sizeof(reason), "cannot open %s: %s", path, strerror(-fd));
		return SWV_UNUSABLE;
	}
	while (len < sizeof(snapbuf)) {
		r = swv_read(fd, snapbuf + len, sizeof(snapbuf) - len);
		if (r == -EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
		if (len < sizeof(snapbuf) && r < 4096)
			break; /* a short read of a regular file: its end */
	}
	swv_close(fd);
	if (len > SWV_MAX_SIZE) {
		snprintf(reason, sizeof(reason), "%s is larger than any snapshot", path);
		return SWV_UNUSABLE;
	}
	if (swv_parse(snapbuf, len, &snap, reason, sizeof(reason)) < 0)
		return SWV_UNUSABLE;
	r = swv_uname(&u);
	if (r < 0) {
		snprintf(reason, sizeof(reason), "uname: %s", strerror((int)-r));
		return SWV_STALE;
	}
	if (swv_check_fingerprint(&snap, sysfs, u.release, reason, sizeof(reason)))
		return SWV_STALE;
	return SWV_VALID;
}

static void patch_slots(void);
static void note(void);

/* init validates the cache once per process. From the constructor it does
 * nothing (and retries at the first call) if libibverbs is not loaded. */
static void init(int from_ctor)
{
	const char *e;
	uint64_t t0;
	uint32_t st;

	if (__atomic_load_n(&init_done, __ATOMIC_ACQUIRE))
		return;
	lock(&init_lock);
	if (init_done) {
		unlock(&init_lock);
		return;
	}
	t0 = now_ns();
	e = env("SWIFT_VERBS_DEBUG");
	debug = e && *e && strcmp(e, "0") != 0;
	resolve();
	if (!real_get_device_list && from_ctor) {
		unlock(&init_lock); /* no libibverbs (yet): nothing to do */
		return;
	}
	e = env("SWIFT_VERBS");
	if (e && !strcmp(e, "off")) {
		st = SWV_OFF;
	} else if (!real_get_device_list) {
		st = SWV_NONE;
	} else {
		st = load();
		if ((st == SWV_STALE || st == SWV_UNUSABLE) && self_path)
			load_providers(st == SWV_STALE ? snap.drivers : NULL, provider_suffix(self_path));
		else if (st == SWV_STALE || st == SWV_UNUSABLE)
			add_providers(st == SWV_STALE ? snap.drivers : NULL);
		else if (st == SWV_VALID && self_path)
			patch_slots();
	}
	swiftverbs_stats.init_ns = now_ns() - t0;
	__atomic_store_n(&swiftverbs_stats.state, st, __ATOMIC_RELEASE);
	__atomic_store_n(&init_done, 1, __ATOMIC_RELEASE);
	unlock(&init_lock);
}

/* The constructor tells the two entries apart by the name this library was
 * loaded under. As a provider entry it runs inside the process's first
 * ibv_get_device_list, after libibverbs read its libibverbs.d and before it
 * matches devices to providers: the one moment to validate, to load every
 * provider if the cache cannot be used, and to say so. */
__attribute__((constructor)) static void swv_ctor(void)
{
	const char *self = swv_elf_name(_DYNAMIC);

	if (self && provider_suffix(self)) {
		self_path = self;
		swiftverbs_stats.entry = SWV_ENTRY_PROVIDER;
		init(1);
		note();
		return;
	}
	swiftverbs_stats.entry = SWV_ENTRY_PRELOAD;
	init(1);
}

/* note says once, at the first verbs call, what the cache is doing. */
static void note(void)
{
	char n[16];

	if (__atomic_exchange_n(&noted, 1, __ATOMIC_ACQ_REL))
		return;
	switch (state()) {
	case SWV_STALE:
		sayf2("verbs cache is stale (", reason, "): using the real verbs calls and every provider");
		break;
	case SWV_UNUSABLE:
		sayf2("verbs cache unusable (", reason, "): using the real verbs calls and every provider");
		break;
	case SWV_VALID:
		if (debug) {
			snprintf(n, sizeof(n), "%u", snap.ndev);
			sayf2("verbs cache valid: serving device attributes of ", n, " device(s) from the snapshot");
		}
		break;
	case SWV_OFF:
		if (debug)
			sayf2("disabled by SWIFT_VERBS=off", "", "");
		break;
	}
}

/* invalidate stops serving cached data for the rest of the process. */
static void invalidate(const char *why)
{
	uint32_t want = SWV_VALID;

	if (!__atomic_compare_exchange_n(&swiftverbs_stats.state, &want, SWV_STALE, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return;
	if (!__atomic_exchange_n(&invalid_noted, 1, __ATOMIC_ACQ_REL))
		sayf2("cached attributes no longer match the device (", why, "): using the real verbs calls");
}

/* lookup copies the entry of ctx; returns 0 if ctx is not tracked, or if
 * the entry is of another device (a context closed where this library
 * could not see it, and its memory reused for a new one). */
static int lookup(struct ibv_context *ctx, struct swv_ctx *out)
{
	int i, found = 0;

	if (!ctx)
		return 0;
	lock(&ctx_lock);
	for (i = 0; i < SWV_MAX_CTX; i++) {
		if (ctxs[i].ctx == ctx) {
			*out = ctxs[i];
			found = 1;
			break;
		}
	}
	unlock(&ctx_lock);
	return found && ctx->device && !strcmp(ctx->device->name, snap.devs[out->dev].name);
}

static int swv_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr, size_t len)
{
	struct swv_ctx e;
	char why[200], what[280];
	int rc;

	if (!lookup(ctx, &e) || !e.query_port)
		return ENOSYS; /* not reachable: only tracked contexts are hooked */
	rc = e.query_port(ctx, port, attr, len);
	if (rc == 0 && state() == SWV_VALID && len >= sizeof(*attr) && port >= 1 && port <= snap.devs[e.dev].nports &&
	    (snap.devs[e.dev].ports[port - 1].flags & SWV_P_STABLE)) {
		__atomic_add_fetch(&swiftverbs_stats.port_checks, 1, __ATOMIC_RELAXED);
		if (swv_port_static_diff(&snap.devs[e.dev].ports[port - 1], attr, why, sizeof(why))) {
			snprintf(what, sizeof(what), "%s port %u: %s", snap.devs[e.dev].name, port, why);
			invalidate(what);
		}
	}
	return rc;
}

/* serve copies n bytes of the context's cached device attributes if
 * allowed, and marks the context as having used cached data. */
static int serve(struct ibv_context *ctx, const struct swv_ctx *e, void *attr, size_t n)
{
	const struct swv_dev *d = &snap.devs[e->dev];
	int i;

	if (state() != SWV_VALID || !(d->flags & SWV_D_ATTR_STABLE) || n > d->attr_len ||
	    n < sizeof(struct ibv_device_attr))
		return 0;
	memcpy(attr, d->attr, n);
	lock(&ctx_lock);
	for (i = 0; i < SWV_MAX_CTX; i++)
		if (ctxs[i].ctx == ctx)
			ctxs[i].used = 1;
	unlock(&ctx_lock);
	__atomic_add_fetch(&swiftverbs_stats.served, 1, __ATOMIC_RELAXED);
	return 1;
}

static int swv_query_device_ex(struct ibv_context *ctx, const struct ibv_query_device_ex_input *input,
			       struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct swv_ctx e;

	if (!lookup(ctx, &e) || !e.query_device_ex)
		return ENOSYS;
	if ((!input || !input->comp_mask) && serve(ctx, &e, attr, attr_size))
		return 0;
	return e.query_device_ex(ctx, input, attr, attr_size);
}

/* track hooks a context opened while the cache was valid, once the device
 * is the one the snapshot describes under its name (swv_check_open: what
 * libibverbs found while it listed devices, no system call). */
static void track(struct ibv_context *ctx, struct ibv_device *device)
{
	struct verbs_context *v = verbs_get_ctx(ctx);
	int i, dev = swv_find_dev(&snap, device->name);
	char why[200];

	if (dev < 0 || !v)
		return;
	if (swv_check_open(&snap.devs[dev], device->dev_name,
			   real_get_device_guid ? be64toh(real_get_device_guid(device)) : 0, why, sizeof(why))) {
		invalidate(why);
		return;
	}
	lock(&ctx_lock);
	for (i = 0; i < SWV_MAX_CTX; i++) /* a context closed unseen, whose memory came back */
		if (ctxs[i].ctx == ctx)
			ctxs[i] = (struct swv_ctx){0};
	for (i = 0; i < SWV_MAX_CTX; i++) {
		if (ctxs[i].ctx)
			continue;
		ctxs[i] = (struct swv_ctx){.ctx = ctx, .dev = dev};
		if (verbs_get_ctx_op(ctx, query_port)) {
			ctxs[i].query_port = v->query_port;
			v->query_port = swv_query_port;
		}
		if (verbs_get_ctx_op(ctx, query_device_ex)) {
			ctxs[i].query_device_ex = v->query_device_ex;
			v->query_device_ex = swv_query_device_ex;
		}
		__atomic_add_fetch(&swiftverbs_stats.contexts, 1, __ATOMIC_RELAXED);
		break;
	}
	unlock(&ctx_lock);
}

static void untrack(struct ibv_context *ctx)
{
	int i;

	lock(&ctx_lock);
	for (i = 0; i < SWV_MAX_CTX; i++)
		if (ctxs[i].ctx == ctx)
			ctxs[i] = (struct swv_ctx){0};
	unlock(&ctx_lock);
}

/* revalidate: a call on ctx failed after cached attributes were served
 * on it. Query the device for real; if the cache was wrong, stop serving
 * (saying so once), fill cached and real, and return 1 so that the caller
 * retries once, with the arguments that came from the cache corrected.
 * Later failing calls on such a context are corrected the same way (the
 * application keeps the stale values it was given). */
static int revalidate(struct ibv_context *ctx, struct ibv_device_attr *cached, struct ibv_device_attr *real)
{
	struct ibv_device_attr_ex rx;
	const struct swv_dev *d;
	struct swv_ctx e;
	size_t n;
	int rc;

	if (!lookup(ctx, &e) || !e.used)
		return 0;
	d = &snap.devs[e.dev];
	if (__atomic_load_n(&have_real[e.dev], __ATOMIC_ACQUIRE)) {
		memcpy(cached, d->attr, sizeof(*cached));
		*real = real_attrs[e.dev];
		__atomic_add_fetch(&swiftverbs_stats.retries, 1, __ATOMIC_RELAXED);
		return 1;
	}
	if (state() != SWV_VALID)
		return 0;
	__atomic_add_fetch(&swiftverbs_stats.revalidations, 1, __ATOMIC_RELAXED);
	memset(&rx, 0, sizeof(rx));
	n = d->attr_len < sizeof(rx) ? d->attr_len : sizeof(rx);
	if (e.query_device_ex) {
		rc = e.query_device_ex(ctx, NULL, &rx, n);
	} else {
		n = sizeof(rx.orig_attr);
		rc = real_query_device ? real_query_device(ctx, &rx.orig_attr) : ENOSYS;
	}
	if (rc != 0 || memcmp(&rx, d->attr, n) == 0)
		return 0;
	memcpy(cached, d->attr, sizeof(*cached));
	*real = rx.orig_attr;
	lock(&ctx_lock);
	if (!have_real[e.dev]) {
		real_attrs[e.dev] = rx.orig_attr;
		__atomic_store_n(&have_real[e.dev], 1, __ATOMIC_RELEASE);
	}
	unlock(&ctx_lock);
	invalidate(d->name);
	__atomic_add_fetch(&swiftverbs_stats.retries, 1, __ATOMIC_RELAXED);
	return 1;
}

EXPORT struct ibv_device **ibv_get_device_list(int *num_devices)
{
	init(0);
	note();
	if (!real_get_device_list) {
		errno = ENOSYS;
		return NULL;
	}
	return real_get_device_list(num_devices);
}

static struct ibv_context *swv_open_device(struct ibv_device *device)
{
	struct ibv_context *ctx;

	init(0);
	note();
	if (!real_open_device) {
		errno = ENOSYS;
		return NULL;
	}
	ctx = real_open_device(device);
	if (ctx && device && state() == SWV_VALID)
		track(ctx, device);
	return ctx;
}

static int swv_close_device(struct ibv_context *ctx)
{
	init(0);
	if (!real_close_device)
		return -1;
	untrack(ctx);
	return real_close_device(ctx);
}

static int swv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	struct swv_ctx e;

	init(0);
	if (lookup(ctx, &e) && serve(ctx, &e, attr, sizeof(*attr)))
		return 0;
	return real_query_device ? real_query_device(ctx, attr) : ENOSYS;
}

static struct ibv_cq *swv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
				    struct ibv_comp_channel *channel, int comp_vector)
{
	struct ibv_device_attr c, r;
	struct ibv_cq *cq;
	int err;

	init(0);
	if (!real_create_cq) {
		errno = ENOSYS;
		return NULL;
	}
	cq = real_create_cq(ctx, cqe, cq_context, channel, comp_vector);
	if (!cq) {
		err = errno;
		if (revalidate(ctx, &c, &r)) {
			swv_fix_cqe(&cqe, &c, &r);
			return real_create_cq(ctx, cqe, cq_context, channel, comp_vector);
		}
		errno = err;
	}
	return cq;
}

static struct ibv_qp *swv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init_attr)
{
	struct ibv_device_attr c, r;
	struct ibv_qp *qp;
	int err;

	init(0);
	if (!real_create_qp) {
		errno = ENOSYS;
		return NULL;
	}
	qp = real_create_qp(pd, init_attr);
	if (!qp && pd && init_attr) {
		err = errno;
		if (revalidate(pd->context, &c, &r)) {
			struct ibv_qp_init_attr fixed = *init_attr;

			swv_fix_qp_cap(&fixed.cap, &c, &r);
			qp = real_create_qp(pd, &fixed);
			if (qp)
				init_attr->cap = fixed.cap; /* the provider reports the sizes it gave */
			return qp;
		}
		errno = err;
	}
	return qp;
}

static int swv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
{
	struct ibv_device_attr c, r;
	int rc;

	init(0);
	if (!real_modify_qp)
		return ENOSYS;
	rc = real_modify_qp(qp, attr, attr_mask);
	if (rc && qp && attr && revalidate(qp->context, &c, &r)) {
		struct ibv_qp_attr fixed = *attr;

		swv_fix_qp_attr(&fixed, attr_mask, &c, &r);
		rc = real_modify_qp(qp, &fixed, attr_mask);
	}
	return rc;
}

#undef ibv_reg_mr
static struct ibv_mr *swv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	struct ibv_device_attr c, r;
	struct ibv_mr *mr;
	int err;

	init(0);
	if (!real_reg_mr) {
		errno = ENOSYS;
		return NULL;
	}
	mr = real_reg_mr(pd, addr, length, access);
	if (!mr && pd) {
		err = errno;
		if (revalidate(pd->context, &c, &r))
			return real_reg_mr(pd, addr, length, access);
		errno = err;
	}
	return mr;
}

/* The wrappers under libibverbs' names, for the preload entry (symbol
 * interposition). The provider entry points slots at the swv_ functions
 * themselves: inside this library, a reference to an exported name may
 * bind to libibverbs' definition, which comes first in the global scope. */
#define SWV_ALIAS(name) __attribute__((alias(name), visibility("default")))
/* clang-format off */
struct ibv_context *ibv_open_device(struct ibv_device *device) SWV_ALIAS("swv_open_device");
int ibv_close_device(struct ibv_context *ctx) SWV_ALIAS("swv_close_device");
int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr) SWV_ALIAS("swv_query_device");
struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context, struct ibv_comp_channel *channel,
			     int comp_vector) SWV_ALIAS("swv_create_cq");
struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init_attr) SWV_ALIAS("swv_create_qp");
int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask) SWV_ALIAS("swv_modify_qp");
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access) SWV_ALIAS("swv_reg_mr");
/* clang-format on */

/* patch_slots: the provider entry of a valid cache points the program's
 * and its libraries' slots for the wrapped calls at the wrappers (got.h);
 * libibverbs' own and this library's are left alone. */
static void patch_slots(void)
{
	const struct swv_patch p[] = {
		{"ibv_open_device", "IBVERBS_1.1", (void *)real_open_device, (void *)swv_open_device},
		{"ibv_close_device", "IBVERBS_1.1", (void *)real_close_device, (void *)swv_close_device},
		{"ibv_query_device", "IBVERBS_1.1", (void *)real_query_device, (void *)swv_query_device},
		{"ibv_create_cq", "IBVERBS_1.1", (void *)real_create_cq, (void *)swv_create_cq},
		{"ibv_create_qp", "IBVERBS_1.1", (void *)real_create_qp, (void *)swv_create_qp},
		{"ibv_modify_qp", "IBVERBS_1.1", (void *)real_modify_qp, (void *)swv_modify_qp},
		{"ibv_reg_mr", "IBVERBS_1.1", (void *)real_reg_mr, (void *)swv_reg_mr},
	};
	const void *skip[] = {_DYNAMIC, ibv_dyn};
	int n;

	if (!ibv_dyn || swiftverbs_stats.resolver != SWV_BY_ELF)
		return; /* the real calls' addresses are not libibverbs' own */
	n = swv_got_patch(p, (int)(sizeof(p) / sizeof(p[0])), skip, 2);
	swiftverbs_stats.patched = n > 0 ? (uint32_t)n : 0;
}
