/* elfsym.c — function lookup in a loaded library's GNU hash table; see
 * elfsym.h. Reads only what the dynamic loader keeps (_r_debug's link
 * maps and each object's dynamic section); calls nothing. */
#include <elf.h>
#include <link.h>
#include <string.h>

#include "elfsym.h"

/* _r_debug is the dynamic loader's; weak so that a loader without it
 * leaves it NULL and the caller falls back to dlsym. */
#pragma weak _r_debug

/* ptr turns a dynamic-section address into a pointer. glibc rewrites the
 * dynamic section of a loaded object with absolute addresses on most
 * architectures and leaves them relative on a few: an address below the
 * load bias is still relative. */
static const void *ptr(uintptr_t base, ElfW(Addr) a)
{
	return (const void *)(a < base ? a + base : a);
}

static const char *basename_of(const char *path)
{
	const char *b = path;

	for (; *path; path++)
		if (*path == '/')
			b = path + 1;
	return b;
}

void swv_elf_dynamic(uintptr_t base, const void *dyn, struct swv_dyn *out)
{
	const ElfW(Dyn) * d;

	memset(out, 0, sizeof(*out));
	out->plt_rela = 1;
	for (d = dyn; d->d_tag != DT_NULL; d++) {
		switch (d->d_tag) {
		case DT_SYMTAB:
			out->symtab = ptr(base, d->d_un.d_ptr);
			break;
		case DT_STRTAB:
			out->strtab = ptr(base, d->d_un.d_ptr);
			break;
		case DT_GNU_HASH:
			out->gnuhash = ptr(base, d->d_un.d_ptr);
			break;
		case DT_VERSYM:
			out->versym = ptr(base, d->d_un.d_ptr);
			break;
		case DT_VERNEED:
			out->verneed = ptr(base, d->d_un.d_ptr);
			break;
		case DT_VERNEEDNUM:
			out->nverneed = d->d_un.d_val;
			break;
		case DT_JMPREL:
			out->jmprel = ptr(base, d->d_un.d_ptr);
			break;
		case DT_PLTRELSZ:
			out->pltrelsz = d->d_un.d_val;
			break;
		case DT_PLTREL:
			out->plt_rela = d->d_un.d_val == DT_RELA;
			break;
		case DT_RELA:
			out->rela = ptr(base, d->d_un.d_ptr);
			break;
		case DT_RELASZ:
			out->relasz = d->d_un.d_val;
			break;
		}
	}
}

int swv_elf_find(const char *prefix, struct swv_elf *e)
{
	struct link_map *m;
	size_t n = strlen(prefix);

	if (!&_r_debug || !_r_debug.r_map)
		return -2;
	for (m = _r_debug.r_map; m; m = m->l_next) {
		struct swv_dyn d;

		if (!m->l_name || strncmp(basename_of(m->l_name), prefix, n) != 0 || !m->l_ld)
			continue;
		swv_elf_dynamic(m->l_addr, m->l_ld, &d);
		*e = (struct swv_elf){.base = m->l_addr,
				      .symtab = d.symtab,
				      .strtab = d.strtab,
				      .gnuhash = d.gnuhash,
				      .versym = d.versym,
				      .dyn = m->l_ld,
				      .path = m->l_name};
		return e->symtab && e->strtab && e->gnuhash ? 0 : -2;
	}
	return -1;
}

const char *swv_elf_name(const void *dyn)
{
	struct link_map *m;

	if (!&_r_debug)
		return NULL;
	for (m = _r_debug.r_map; m; m = m->l_next)
		if ((const void *)m->l_ld == dyn)
			return m->l_name ? m->l_name : "";
	return NULL;
}

static uint32_t gnu_hash(const char *s)
{
	uint32_t h = 5381;

	for (; *s; s++)
		h = h * 33 + (unsigned char)*s;
	return h;
}

void *swv_elf_sym(const struct swv_elf *e, const char *name)
{
	const uint32_t nbuckets = e->gnuhash[0], symoffset = e->gnuhash[1], bloom_size = e->gnuhash[2];
	const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(e->gnuhash + 4) + bloom_size);
	const uint32_t *chain = buckets + nbuckets;
	const ElfW(Sym) *symtab = e->symtab;
	uint32_t h = gnu_hash(name), i;

	if (nbuckets == 0)
		return NULL;
	i = buckets[h % nbuckets];
	if (i < symoffset)
		return NULL;
	for (;; i++) {
		uint32_t h2 = chain[i - symoffset];
		const ElfW(Sym) *s = &symtab[i];

		if ((h | 1) == (h2 | 1) && !strcmp(e->strtab + s->st_name, name) && s->st_shndx != SHN_UNDEF &&
		    (!e->versym || !(e->versym[i] & 0x8000))) {
			int type = s->st_info & 0xf; /* ELF32_ST_TYPE and ELF64_ST_TYPE alike */

			if (type != STT_FUNC && type != STT_OBJECT)
				return NULL;
			return (void *)(e->base + s->st_value);
		}
		if (h2 & 1)
			return NULL;
	}
}
