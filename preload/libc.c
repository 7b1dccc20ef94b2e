/* libc.c — the string functions libswiftverbs.so uses, linked into it with
 * hidden visibility so that its calls bind at link time.
 *
 * Calls to libc's own copies would go through lazily bound PLT slots, and
 * the first call of each searches every object in the process for the
 * symbol: in the cache's validation, which every verbs process runs once,
 * those searches cost more than the work (see sys.h). Byte loops are enough
 * for the few hundred bytes the preload copies and compares. Built with
 * -fno-tree-loop-distribute-patterns so that the compiler does not turn the
 * loops back into calls to memcpy and memset. */
#include <stddef.h>
#include <string.h>

#define HIDDEN __attribute__((visibility("hidden")))

HIDDEN void *memcpy(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;

	while (n--)
		*d++ = *s++;
	return dst;
}

HIDDEN void *memmove(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;

	if (d < s) {
		while (n--)
			*d++ = *s++;
	} else {
		while (n--)
			d[n] = s[n];
	}
	return dst;
}

HIDDEN void *memset(void *dst, int c, size_t n)
{
	unsigned char *d = dst;

	while (n--)
		*d++ = (unsigned char)c;
	return dst;
}

HIDDEN int memcmp(const void *a, const void *b, size_t n)
{
	const unsigned char *x = a, *y = b;

	for (; n; n--, x++, y++)
		if (*x != *y)
			return *x - *y;
	return 0;
}

HIDDEN void *memchr(const void *p, int c, size_t n)
{
	const unsigned char *s = p;

	for (; n; n--, s++)
		if (*s == (unsigned char)c)
			return (void *)s;
	return NULL;
}

HIDDEN size_t strlen(const char *s)
{
	const char *e = s;

	while (*e)
		e++;
	return (size_t)(e - s);
}

HIDDEN int strncmp(const char *a, const char *b, size_t n)
{
	for (; n; n--, a++, b++) {
		if (*a != *b)
			return (unsigned char)*a - (unsigned char)*b;
		if (!*a)
			return 0;
	}
	return 0;
}

HIDDEN int strcmp(const char *a, const char *b)
{
	for (; *a && *a == *b; a++, b++)
		;
	return (unsigned char)*a - (unsigned char)*b;
}

HIDDEN char *strchr(const char *s, int c)
{
	for (;; s++) {
		if (*s == (char)c)
			return (char *)s;
		if (!*s)
			return NULL;
	}
}

HIDDEN char *strstr(const char *h, const char *n)
{
	size_t l = strlen(n);

	for (; *h; h++)
		if (!strncmp(h, n, l))
			return (char *)h;
	return l ? NULL : (char *)h;
}
