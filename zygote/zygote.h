/* The zygote's state (not for handlers: they use swift.h).
 *
 * All of the zygote's state lives in one struct zygote, in memory only the
 * zygote writes: the pool table, the assignment table, the connections and
 * every pointer it follows. A forked function gets a copy-on-write copy of
 * it, scrubs what is not its own, and writes nothing the zygote reads back
 * except what it sends over its relay socket (checked like any input).
 *
 * The files form a stack; each calls only those below it, and includes
 * only their headers:
 *
 *   swift-init.c  main: setup and teardown, one ladder
 *   loop.c        the event loop: accept, dispatch ready fds, deadlines
 *   init.c        init duties: signals, reaping, the entrypoint, sessions
 *   serve.c       acting on requests: forking functions, connect requests,
 *                 the status text, ringing doorbells (serve.h)
 *   peers.c       dialing peers, the exchange's progress and end (which
 *                 resumes its waiter through z->done), listening
 *   conn.c        the connection table
 *   rowops.c      the row operations the exchange calls (peers.h)
 *   child.c       the function's side after fork: isolation, then the
 *                 handler (child.h)
 *   log.c         the log (log.h)
 * and the pure core, each with a header of its own that includes only
 * what it uses:
 *   config.c      the pool description the shim writes (cfg.h)
 *   pool.c        the device and the pool rows: create, connect, reclaim,
 *                 the doorbell; which device mappings belong to which row
 *   shm.c         parent-domain allocators (pool.h)
 *   ctl.c         the control protocol: receive, decode and validate a
 *                 request, then a pure scheduling step (ctl.h)
 *   relay.c       the doorbell relay's messages: decoded, and checked
 *                 against the rows the zygote assigned (relay.h)
 *   exchange.c    the QP exchange between zygotes: wire format, parsing
 *                 and a non-blocking state machine for both ends
 *   util.c        time, paths, escaping peer-supplied text, GIDs (util.h)
 *   landlock.c    confining a same-uid function (landlock.h)
 *   handlers.c    the built-in handlers (handlers.h)
 */
#ifndef SWIFT_ZYGOTE_H
#define SWIFT_ZYGOTE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "bounds.h"
#include "cfg.h"
#include "ctl.h"
#include "exchange.h"
#include "handlers.h"
#include "landlock.h"
#include "pool.h"
#include "proto.h"
#include "qpinfo.h"
#include "relay.h"
#include "swift.h"
#include "util.h"

enum child_state {
	CH_FREE = 0,
	CH_RUNNING,   /* the function process is alive */
	CH_LEFTOVERS, /* reaped; processes of its session may remain */
};

struct child {
	enum child_state state;
	uint32_t gen;
	pid_t pid;     /* also its session and process group */
	int client_fd; /* the caller (swift-run); -1 once gone */
	int relay_fd;
	int nrows;
	int rows[SWIFT_MAX_QPS];
	int own, own_peer, own_asked;
	int own_conn; /* the held exchange for its own QPs, or -1 */
	uint32_t own_conn_gen;
	uint64_t caller_gone_us; /* caller went away: SIGTERM sent then */
	uint64_t kill_at_us;     /* SIGKILL its session then (0: not set) */
	int refusals;            /* relay messages refused (logged up to 8) */
};

enum conn_kind {
	C_FREE = 0,
	C_CTL,     /* a control connection before (or while) its request is served */
	C_XCHG,    /* an exchange, either end */
	C_RESOLVE, /* the pipe of a resolver child */
};

enum conn_purpose { /* what a client exchange is for */
		    P_NONE = 0,
		    P_POOL,    /* build our pool to a peer */
		    P_REBUILD, /* replace broken rows */
		    P_NEWDEST, /* rows a waiting fork request needs */
		    P_OWN,     /* a function's own QPs (held) */
};

struct conn {
	enum conn_kind kind;
	uint32_t gen;
	int fd;
	uint64_t opened_us;
	uint64_t deadline_us; /* 0: none */
	uint32_t source;      /* IPv4 (network order), or the unix peer's pid */
	char addr[64];
	/* C_CTL */
	int waiting;     /* a fork request waits for on-demand rows */
	int wait_conn;   /* ... from this exchange */
	int attach;      /* a connect request's QPs: counted while it is open */
	int attach_conn; /* ... connected by this exchange (held), or -1 */
	uint32_t attach_gen;
	struct swift_request req;
	struct swift_plan plan;
	uint64_t t0;
	/* C_XCHG */
	enum conn_purpose purpose;
	int for_conn; /* P_NEWDEST: the waiting control connection */
	uint32_t for_gen;
	int for_child; /* P_OWN: the function's slot */
	uint32_t for_child_gen;
	int nreplacing; /* P_REBUILD: the broken rows it replaces */
	int replacing[SWIFT_X_MAX];
	struct xconn x;
	/* C_RESOLVE */
	pid_t resolver;
	int peer;
};

/* Who waits on an exchange, resumed by peers.c when it ends: a fork
 * request waiting for on-demand rows (fork), a connect request (connect:
 * status 0 with the peer's QPs, or an errno and why), a function's own
 * QPs (own). serve.c's (swift_serve_init), so the exchange's end calls
 * nothing above it. */
struct zygote;
struct swift_waiters {
	void (*fork)(struct zygote *z, int ci);
	void (*connect)(struct zygote *z, int ci, int status, const char *why, int n, const struct swift_qpinfo *q);
	void (*own)(struct zygote *z, int slot, int status, int n, const struct swift_qpinfo *q);
};

struct zygote {
	struct swift_cfg cfg;
	struct swift_dev dev;
	int have_dev;
	struct swift_key keys[SWIFT_KEYS_MAX];
	int nkeys;
	struct swift_rowops rowops;
	struct swift_waiters done;
	struct swift_xenv xenv;
	struct swift_xeph xeph; /* the exchange server's ephemeral key pair */
	sigset_t sigs;
	int sig_fd, ctl_fd, tcp_fd, log_fd, log_sock;
	pid_t entry_pid;
	int entry_status;
	int has_entry;
	int stop;
	int uids_ok;             /* function_uids can be applied (CAP_SETUID) */
	uint64_t next_listen_us; /* the exchange port was taken: try again then (0: listening or not wanted) */
	char listen_err[128];    /* why it could not listen, for the status */
	const char *status_path;
	/* what Landlock keeps a same-uid function out of: the control
	 * socket's and the status file's directories (set once at start) */
	char socket_dir[256], status_dir[256];
	uint64_t next_maint_us;
	int status_dirty;
	struct child children[SWIFT_MAX_CHILDREN];
	struct conn conns[SWIFT_MAX_CONNS];
	/* every child slot and connection from here on is free: the loop's
	 * scans stop there (a conn is 20 KiB: scanning all of them each pass
	 * touched a page each) */
	int child_hwm, conn_hwm;
};

#endif
