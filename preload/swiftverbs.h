/* swiftverbs.h — what libswiftverbs.so exports besides the verbs calls it
 * wraps: counters a profiler or test can read with
 * dlsym(RTLD_DEFAULT, "swiftverbs_stats") when it is preloaded, or with
 * dlsym on a dlopen(RTLD_NOLOAD) handle of the loaded object whose name
 * starts with "libswiftverbs" when libibverbs loaded it as a provider
 * entry (see swv_find_stats in swift-profile.c). */
#ifndef SWIFT_SWIFTVERBS_H
#define SWIFT_SWIFTVERBS_H

#include <stdint.h>

/* swiftverbs_stats.state */
enum {
	SWV_NONE = 0,     /* not initialised, or libibverbs not in the process */
	SWV_VALID = 1,    /* snapshot matches the node: cached attributes served */
	SWV_STALE = 2,    /* the node changed since the cache was built */
	SWV_UNUSABLE = 3, /* no snapshot, or a corrupt one */
	SWV_OFF = 4,      /* SWIFT_VERBS=off */
};

struct swiftverbs_stats {
	uint64_t init_ns;       /* time spent loading and validating the cache */
	uint32_t state;         /* SWV_* */
	uint32_t served;        /* device queries answered from the snapshot */
	uint32_t port_checks;   /* port answers whose static fields were checked */
	uint32_t contexts;      /* device contexts opened while the cache was valid */
	uint32_t revalidations; /* failed calls after which the device was re-queried */
	uint32_t retries;       /* calls retried because the cache was wrong */
	uint32_t resolver;      /* SWV_BY_*: how the wrapped libibverbs calls were found */
	uint32_t entry;         /* SWV_ENTRY_*: how the library came into the process */
	uint32_t patched;       /* provider entry: GOT slots pointed at the wrappers */
};

/* swiftverbs_stats.entry */
enum {
	SWV_ENTRY_NONE = 0,
	SWV_ENTRY_PRELOAD = 1,  /* LD_PRELOAD: wraps by symbol interposition */
	SWV_ENTRY_PROVIDER = 2, /* a libibverbs.d entry, loaded by libibverbs while it lists devices */
};

static inline const char *swv_entry_name(uint32_t e)
{
	return e == SWV_ENTRY_PRELOAD ? "preload" : e == SWV_ENTRY_PROVIDER ? "provider" : "none";
}

/* swiftverbs_stats.resolver */
enum {
	SWV_BY_NONE = 0,  /* not found (libibverbs not loaded) */
	SWV_BY_ELF = 1,   /* in libibverbs' own symbol table (elfsym.h) */
	SWV_BY_DLSYM = 2, /* dlsym(RTLD_NEXT) */
};

static inline const char *swv_resolver_name(uint32_t r)
{
	return r == SWV_BY_ELF ? "elf" : r == SWV_BY_DLSYM ? "dlsym" : "none";
}

static inline const char *swv_state_name(uint32_t state)
{
	switch (state) {
	case SWV_VALID:
		return "valid";
	case SWV_STALE:
		return "stale";
	case SWV_UNUSABLE:
		return "unusable";
	case SWV_OFF:
		return "off";
	}
	return "none";
}

#endif
