/* The zygote's log (log.c). */
#ifndef SWIFT_LOG_H
#define SWIFT_LOG_H

struct zygote;

void zlog(struct zygote *z, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* stderr through an open file description of its own, non-blocking */
int swift_log_fd(int *sock);

#endif
