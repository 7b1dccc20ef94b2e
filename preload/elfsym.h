/* elfsym.h — find a function in a loaded library by reading the library's
 * own ELF symbol table, without dlsym.
 *
 * libswiftverbs.so needs the address of every libibverbs call it wraps,
 * and every process it is preloaded into, RDMA or not, asks. dlsym costs a
 * lazy binding of dlsym itself plus a search of every object per name; the
 * loader's list of objects says whether libibverbs is there at all, and its
 * GNU hash table answers for the names. On this project's build host eight
 * names took 2-6 us this way and 5-9 us with dlsym; in the rxe VM both take
 * about 1 ms, spent translating the code. The preload falls back to dlsym
 * whenever this finds nothing. */
#ifndef SWIFT_ELFSYM_H
#define SWIFT_ELFSYM_H

#include <stddef.h>
#include <stdint.h>

struct swv_elf {
	uintptr_t base;     /* load bias */
	const void *symtab; /* ElfW(Sym)[] */
	const char *strtab;
	const uint32_t *gnuhash; /* DT_GNU_HASH */
	const uint16_t *versym;  /* DT_VERSYM, or NULL */
	const void *dyn;         /* its dynamic section (the loader's l_ld) */
	const char *path;        /* the file it was loaded from */
};

/* What a loaded object's dynamic section says, as far as this library
 * reads it (pointers already turned into addresses; NULL or 0 when the
 * tag is absent). */
struct swv_dyn {
	const void *symtab; /* ElfW(Sym)[] */
	const char *strtab;
	const uint32_t *gnuhash; /* DT_GNU_HASH */
	const uint16_t *versym;  /* DT_VERSYM */
	const void *verneed;     /* ElfW(Verneed) chain, DT_VERNEEDNUM long */
	size_t nverneed;
	const void *jmprel; /* the PLT's relocations, pltrelsz bytes of Rela when plt_rela */
	size_t pltrelsz;
	int plt_rela;
	const void *rela; /* the other relocations, relasz bytes */
	size_t relasz;
};

/* swv_elf_dynamic reads the dynamic section dyn of the object loaded at
 * base into out. */
void swv_elf_dynamic(uintptr_t base, const void *dyn, struct swv_dyn *out);

/* swv_elf_find fills e for the first loaded object whose file name starts
 * with prefix (e.g. "libibverbs.so"). Returns 0; -1 if no such object is
 * loaded; -2 if it cannot tell (no _r_debug) or the object has no GNU hash
 * table. */
int swv_elf_find(const char *prefix, struct swv_elf *e);

/* swv_elf_name returns the file name the loaded object whose dynamic
 * section is dyn was loaded from ("" for the program), or NULL if no
 * loaded object has it or the loader's list cannot be read. */
const char *swv_elf_name(const void *dyn);

/* swv_elf_sym returns the address of the function or object called name
 * defined in e, in its default version (name@@VERSION, what dlsym returns),
 * or NULL. Indirect functions are not resolved: NULL. */
void *swv_elf_sym(const struct swv_elf *e, const char *name);

#endif
