/* sys.h — the few system calls the verbs cache's fast path makes, issued
 * directly rather than through libc.
 *
 * libswiftverbs.so has no link-time dependency, so every libc function it
 * calls is bound lazily at its first call: a symbol search over every object
 * in the process, which costs more than the system call itself. The
 * validation at load makes a dozen calls, once per process, so each would
 * pay that search. These wrappers make the
 * system call inline on x86-64 and return -errno on failure, like the
 * kernel; elsewhere (and with -DSWV_LIBC_SYSCALL, which the unit tests
 * build too) they call libc's syscall(). */
#ifndef SWIFT_SYS_H
#define SWIFT_SYS_H

#include <fcntl.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <unistd.h>

#if defined(__x86_64__) && !defined(SWV_LIBC_SYSCALL)
static inline long swv_sys3(long n, long a, long b, long c)
{
	long r;

	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return r;
}
static inline long swv_sys4(long n, long a, long b, long c, long d)
{
	register long r10 __asm__("r10") = d;
	long r;

	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10) : "rcx", "r11", "memory");
	return r;
}
#else
#include <errno.h>
static inline long swv_sys4(long n, long a, long b, long c, long d)
{
	long r = syscall(n, a, b, c, d);

	return r < 0 ? -errno : r;
}
static inline long swv_sys3(long n, long a, long b, long c)
{
	return swv_sys4(n, a, b, c, 0);
}
#endif

/* swv_openat opens path relative to dirfd (AT_FDCWD for the working
 * directory) read-only and close-on-exec; flags adds O_DIRECTORY. */
static inline int swv_openat(int dirfd, const char *path, int flags)
{
	return (int)swv_sys4(SYS_openat, dirfd, (long)path, O_RDONLY | O_CLOEXEC | flags, 0);
}

static inline long swv_read(int fd, void *buf, size_t n)
{
	return swv_sys3(SYS_read, fd, (long)buf, (long)n);
}

static inline void swv_close(int fd)
{
	swv_sys3(SYS_close, fd, 0, 0);
}

static inline long swv_getdents64(int fd, void *buf, size_t n)
{
	return swv_sys3(SYS_getdents64, fd, (long)buf, (long)n);
}

static inline int swv_uname(struct utsname *u)
{
	return (int)swv_sys3(SYS_uname, (long)u, 0, 0);
}

#endif
