/* got.c — rewrite other objects' GOT slots; see got.h. Reads what the
 * dynamic loader keeps (program headers and dynamic sections); its calls
 * are dl_iterate_phdr, getauxval and dlvsym (weak: no DT_NEEDED) and
 * mprotect. */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>

#include "elfsym.h"
#include "got.h"
#include "sys.h"

#pragma weak dl_iterate_phdr
#pragma weak getauxval
#pragma weak dlvsym

#if defined(__x86_64__)
#define SWV_R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define SWV_R_GLOB_DAT R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define SWV_R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define SWV_R_GLOB_DAT R_AARCH64_GLOB_DAT
#endif

struct got_walk {
	const struct swv_patch *p;
	int n;
	const void *const *skip;
	int nskip;
	int patched;
	uintptr_t page;                     /* the page size; 0: unknown, RELRO slots are left */
	unsigned char lazy_ok[SWV_GOT_MAX]; /* a lazy slot for p[i] would bind to p[i].real */
};

/* An object, as far as rewriting its slots needs. */
struct got_obj {
	uintptr_t base;
	struct swv_dyn d;
	const ElfW(Rela) * rela[2]; /* the PLT's and the others */
	size_t nrela[2];
	uintptr_t lo, hi;             /* the extent of its PT_LOAD segments */
	uintptr_t relro_lo, relro_hi; /* PT_GNU_RELRO, as the loader protected it */
	uintptr_t page;
};

static int skipped(const struct got_walk *w, const void *dyn)
{
	int i;

	for (i = 0; i < w->nskip; i++)
		if (w->skip[i] == dyn)
			return 1;
	return 0;
}

static void read_dynamic(struct got_obj *o, const void *dyn)
{
	swv_elf_dynamic(o->base, dyn, &o->d);
	if (o->d.jmprel && o->d.plt_rela) {
		o->rela[0] = o->d.jmprel;
		o->nrela[0] = o->d.pltrelsz / sizeof(ElfW(Rela));
	}
	if (o->d.rela) {
		o->rela[1] = o->d.rela;
		o->nrela[1] = o->d.relasz / sizeof(ElfW(Rela));
	}
}

/* version_is says whether symbol index sym of o asks for version v (an
 * unversioned reference asks for the default, which is v). */
static int version_is(const struct got_obj *o, size_t sym, const char *v)
{
	const ElfW(Verneed) * vn;
	size_t i;
	uint16_t want;

	if (!o->d.versym)
		return 1;
	want = o->d.versym[sym] & 0x7fff;
	if (want <= 1)
		return 1; /* local or global: unversioned */
	for (vn = o->d.verneed, i = 0; vn && i < o->d.nverneed; i++) {
		const ElfW(Vernaux) *a = (const void *)((const char *)vn + vn->vn_aux);
		size_t j;

		for (j = 0; j < vn->vn_cnt; j++) {
			if (a->vna_other == want)
				return !strcmp(o->d.strtab + a->vna_name, v);
			a = (const void *)((const char *)a + a->vna_next);
		}
		if (!vn->vn_next)
			break;
		vn = (const void *)((const char *)vn + vn->vn_next);
	}
	return 0;
}

/* write_slot stores v at slot, lifting RELRO's read-only protection around
 * the store. Returns 0, or -1 if the page cannot be made writable. */
static int write_slot(const struct got_obj *o, void **slot, void *v)
{
	uintptr_t a = (uintptr_t)slot, page;

	if (a < o->relro_lo || a >= o->relro_hi) {
		__atomic_store_n(slot, v, __ATOMIC_RELEASE);
		return 0;
	}
	/* the loader protected whole pages of the real size, all inside
	 * [relro_lo, relro_hi): the one holding the slot goes back as it was */
	if (!o->page)
		return -1;
	page = a & ~(o->page - 1);
	if (swv_sys3(SYS_mprotect, (long)page, (long)o->page, PROT_READ | PROT_WRITE) < 0)
		return -1;
	__atomic_store_n(slot, v, __ATOMIC_RELEASE);
	swv_sys3(SYS_mprotect, (long)page, (long)o->page, PROT_READ);
	return 0;
}

#ifdef SWV_R_JUMP_SLOT
static int patch_object(struct got_walk *w, const struct got_obj *o)
{
	const ElfW(Sym) *symtab = o->d.symtab;
	int k, i, done = 0;
	size_t r;

	for (k = 0; k < 2; k++) {
		for (r = 0; o->rela[k] && r < o->nrela[k]; r++) {
			const ElfW(Rela) *rl = &o->rela[k][r];
			size_t type = ELF64_R_TYPE(rl->r_info), sym = ELF64_R_SYM(rl->r_info);
			uintptr_t at = o->base + rl->r_offset;
			const char *name;
			void **slot;

			if ((type != SWV_R_JUMP_SLOT && type != SWV_R_GLOB_DAT) || sym == 0)
				continue;
			if (at < o->lo || at + sizeof(void *) > o->hi || (at & (sizeof(void *) - 1)))
				continue; /* not a slot of this object */
			if (symtab[sym].st_shndx != SHN_UNDEF)
				continue; /* the object's own definition, not a reference to another */
			name = o->d.strtab + symtab[sym].st_name;
			for (i = 0; i < w->n; i++) {
				if (strcmp(name, w->p[i].name) != 0)
					continue;
				slot = (void **)at;
				if (*slot == w->p[i].wrapper)
					break;
				/* bound to the real function; or a lazy slot, still
				 * pointing into its own object, that asks for it in
				 * the version the global scope resolves to it (no
				 * other library interposes it) */
				if (*slot == w->p[i].real ||
				    (w->lazy_ok[i] && (uintptr_t)*slot >= o->lo && (uintptr_t)*slot < o->hi &&
				     version_is(o, sym, w->p[i].version)))
					if (write_slot(o, slot, w->p[i].wrapper) == 0)
						done++;
				break;
			}
		}
	}
	return done;
}
#endif

static int visit(struct dl_phdr_info *info, size_t size, void *data)
{
	struct got_walk *w = data;
	struct got_obj o;
	const ElfW(Dyn) *dyn = NULL;
	int i;

	(void)size;
	memset(&o, 0, sizeof(o));
	o.base = info->dlpi_addr;
	o.lo = UINTPTR_MAX;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t s = o.base + ph->p_vaddr, e = s + ph->p_memsz;

		switch (ph->p_type) {
		case PT_DYNAMIC:
			dyn = (const void *)s;
			break;
		case PT_LOAD:
			if (s < o.lo)
				o.lo = s;
			if (e > o.hi)
				o.hi = e;
			break;
		case PT_GNU_RELRO:
			/* as glibc's _dl_protect_relro: both ends rounded down */
			o.relro_lo = w->page ? s & ~(w->page - 1) : s;
			o.relro_hi = w->page ? e & ~(w->page - 1) : e;
			break;
		}
	}
	o.page = w->page;
	/* objects of the program's own namespace only (not dlmopen's) */
	if (!dyn || o.lo >= o.hi || skipped(w, dyn) || !swv_elf_name(dyn))
		return 0;
	read_dynamic(&o, dyn);
	if (!o.d.symtab || !o.d.strtab)
		return 0;
#ifdef SWV_R_JUMP_SLOT
	w->patched += patch_object(w, &o);
#endif
	return 0;
}

int swv_got_patch(const struct swv_patch *p, int n, const void *const *skip, int nskip)
{
	struct got_walk w = {.p = p, .n = n, .skip = skip, .nskip = nskip};
	int i;

#ifndef SWV_R_JUMP_SLOT
	return -1;
#endif
	if (!dl_iterate_phdr || n > SWV_GOT_MAX)
		return -1;
	w.page = getauxval ? (uintptr_t)getauxval(AT_PAGESZ) : 0;
	if (w.page & (w.page - 1))
		w.page = 0;
	for (i = 0; i < n; i++)
		w.lazy_ok[i] = dlvsym && dlvsym(RTLD_DEFAULT, p[i].name, p[i].version) == p[i].real;
	dl_iterate_phdr(visit, &w);
	return w.patched;
}
