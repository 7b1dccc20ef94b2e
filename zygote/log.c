/* The zygote's log: one line per write to stderr (or the socket it is),
 * never blocking the loop. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include "log.h"
#include "zygote.h"

void zlog(struct zygote *z, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int n;

	n = snprintf(buf, sizeof(buf), "swift-init[%s]: ", z->cfg.name[0] ? z->cfg.name : "-");
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	/* one write per line; a log reader that stalls loses lines, it does
	 * not stall the zygote */
	if (z->log_sock)
		send(z->log_fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
	else if (write(z->log_fd, buf, (size_t)n) < 0)
		return;
}

/* swift_log_fd: stderr through an open file description of its own, made
 * non-blocking (the entrypoint keeps the blocking one it inherits); a
 * socket cannot be opened again, but can be sent to without blocking. */
int swift_log_fd(int *sock)
{
	int fd = open("/proc/self/fd/2", O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC);
	struct stat st;

	*sock = fd < 0 && !fstat(2, &st) && S_ISSOCK(st.st_mode);
	return fd >= 0 ? fd : 2;
}
