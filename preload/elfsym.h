/* elfsym.h — find a function in a loaded library by reading the library's
 * own ELF symbol table, without dlsym.
 *
 * libswiftverbs.so needs the address of every libibverbs call it wraps.
 * dlsym(RTLD_NEXT, ...) costs a lazy binding of dlsym itself plus a search
 * per name (about 1.5 ms for eight names in the rxe VM); the GNU hash table
 * of one library answers the same question in a few hundred instructions.
 * The preload falls back to dlsym whenever this finds nothing. */
#ifndef SWIFT_ELFSYM_H
#define SWIFT_ELFSYM_H

#include <stddef.h>
#include <stdint.h>

struct swv_elf {
	uintptr_t base;          /* load bias */
	const void *symtab;      /* ElfW(Sym)[] */
	const char *strtab;
	const uint32_t *gnuhash; /* DT_GNU_HASH */
	const uint16_t *versym;  /* DT_VERSYM, or NULL */
};

/* swv_elf_find fills e for the first loaded object whose file name starts
 * with prefix (e.g. "libibverbs.so"). Returns 0; -1 if no such object is
 * loaded; -2 if it cannot tell (no _r_debug) or the object has no GNU hash
 * table. */
int swv_elf_find(const char *prefix, struct swv_elf *e);

/* swv_elf_sym returns the address of the function or object called name
 * defined in e, in its default version (name@@VERSION, what dlsym returns),
 * or NULL. Indirect functions are not resolved: NULL. */
void *swv_elf_sym(const struct swv_elf *e, const char *name);

#endif
