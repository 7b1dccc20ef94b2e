/* Init duties of swift-init as PID 1: signals (through a signalfd), reaping,
 * the entrypoint, and the end of each function: its exit status to its
 * caller, then whatever it left behind in its session killed, then its rows
 * reclaimed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "init.h"
#include "log.h"
#include "peers.h"
#include "serve.h"

/* where the container's IPC namespace shows its POSIX message queues */
#define SWIFT_MQUEUE_DIR "/dev/mqueue"

int swift_signals_init(struct zygote *z)
{
	int i;

	sigemptyset(&z->sigs);
	for (i = 1; i < NSIG; i++)
		if (i != SIGKILL && i != SIGSTOP && i != SIGSEGV && i != SIGBUS && i != SIGILL && i != SIGFPE &&
		    i != SIGTTIN && i != SIGTTOU && i != SIGTSTP && i < SIGRTMIN)
			sigaddset(&z->sigs, i);
	if (sigprocmask(SIG_BLOCK, &z->sigs, NULL))
		return -1;
	z->sig_fd = signalfd(-1, &z->sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	return z->sig_fd < 0 ? -1 : 0;
}

/* session_of reads the session of process pid; -1 when unknown. */
static pid_t session_of(pid_t pid, char *state)
{
	char path[64], buf[512], *p;
	int fd, n, field;
	long sid = -1;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = (int)read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	/* "pid (comm) state ppid pgrp session ...": comm may hold anything */
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return -1;
	p += 2;
	if (state)
		*state = *p;
	for (field = 0; field < 3 && p; field++)
		p = strchr(p + 1, ' ');
	if (!p)
		return -1;
	sid = strtol(p + 1, NULL, 10);
	return (pid_t)sid;
}

/* has_uid tells whether any of process pid's uids (real, effective, saved,
 * filesystem) is uid. */
static int has_uid(pid_t pid, uid_t uid)
{
	char path[64], buf[2048], *p;
	unsigned long u[4];
	int fd, n;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = (int)read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strstr(buf, "\nUid:");
	if (!p || sscanf(p + 5, "%lu %lu %lu %lu", &u[0], &u[1], &u[2], &u[3]) != 4)
		return 0;
	return u[0] == uid || u[1] == uid || u[2] == uid || u[3] == uid;
}

/* swift_leftovers counts the live (not zombie) processes of the function
 * in slot: those of its session, and, when it runs under a uid of its own
 * (which it cannot change), those of its uid. It kills them when asked. */
int swift_leftovers(struct zygote *z, int slot, int kill_them)
{
	struct child *c = &z->children[slot];
	uid_t uid = (uid_t)(z->cfg.function_uid_base + (uint32_t)slot);
	int by_uid = z->cfg.function_uid_base && z->uids_ok;
	struct dirent *de;
	DIR *d = opendir("/proc");
	int n = 0;

	if (!d)
		return 1; /* cannot tell: assume the worst */
	while ((de = readdir(d))) {
		char st = 0;
		pid_t pid = (pid_t)strtol(de->d_name, NULL, 10);

		if (pid <= 1)
			continue;
		if (session_of(pid, &st) != c->pid && !(by_uid && has_uid(pid, uid)))
			continue;
		if (st == 'Z' || st == 'X')
			continue;
		n++;
		if (kill_them)
			kill(pid, SIGKILL);
	}
	closedir(d);
	return n;
}

/* from_function tells whether a signal's sender is one of our functions or
 * runs in the session of one. */
static int from_function(struct zygote *z, pid_t sender)
{
	pid_t sid = session_of(sender, NULL);
	int i;

	if (sid < 0)
		return 1; /* gone already: it cannot be told apart, so not trusted */
	for (i = 0; i < z->child_hwm; i++)
		if (z->children[i].state != CH_FREE && z->children[i].pid == sid)
			return 1;
	return 0;
}

void swift_signal_readable(struct zygote *z)
{
	struct signalfd_siginfo si;
	int reap = 0;

	while (read(z->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGCHLD) {
			reap = 1;
			continue;
		}
		/* kill() and its kin show who sent: a sender in our PID namespace
		 * has a pid, one outside it (the runtime, containerd) shows as 0.
		 * A function may not stop the container by signalling its init,
		 * nor through the kernel on its behalf (F_SETSIG, timers, message
		 * queues: codes a runtime never uses). */
		if (si.ssi_code > 0 || si.ssi_code == SI_SIGIO || si.ssi_code == SI_TIMER || si.ssi_code == SI_MESGQ ||
		    si.ssi_code == SI_ASYNCIO) {
			zlog(z, "ignored signal %u (code %d): not a runtime's", si.ssi_signo, si.ssi_code);
			continue;
		}
		if (si.ssi_pid != 0 && (si.ssi_code == SI_USER || si.ssi_code == SI_TKILL || si.ssi_code == SI_QUEUE) &&
		    from_function(z, (pid_t)si.ssi_pid)) {
			zlog(z, "ignored signal %u from pid %u: a function's", si.ssi_signo, si.ssi_pid);
			continue;
		}
		if (z->entry_pid > 0)
			kill(z->entry_pid, (int)si.ssi_signo);
		else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
			z->stop = 1;
	}
	if (reap)
		swift_reap(z);
}

static void child_exited(struct zygote *z, int slot, int wstatus)
{
	struct child *c = &z->children[slot];
	struct swift_exit e = {.wstatus = wstatus};

	/* the caller learns the status first: taking the QPs back is the
	 * zygote's business, off the caller's critical path */
	if (c->client_fd >= 0) {
		send(c->client_fd, &e, sizeof(e), MSG_NOSIGNAL | MSG_DONTWAIT);
		close(c->client_fd);
		c->client_fd = -1;
	}
	if (WIFSIGNALED(wstatus))
		zlog(z, "function pid %d killed by signal %d", (int)c->pid, WTERMSIG(wstatus));
	c->state = CH_LEFTOVERS;
	c->kill_at_us = 0;
	swift_child_tick(z, slot, swift_now_us());
}

void swift_reap(struct zygote *z)
{
	int wstatus, i;
	pid_t pid;

	while ((pid = waitpid(-1, &wstatus, WNOHANG)) > 0) {
		if (pid == z->entry_pid) {
			z->entry_status = wstatus;
			z->entry_pid = -1;
			continue;
		}
		for (i = 0; i < z->child_hwm; i++)
			if (z->children[i].state == CH_RUNNING && z->children[i].pid == pid) {
				child_exited(z, i, wstatus);
				break;
			}
	}
}

/* ipc_of lists the System V IPC objects (kind 0 shared memory, 1 message
 * queues, 2 semaphores) owned or created by uid, up to max. */
static int ipc_of(uid_t uid, int *kind, int *id, int max)
{
	static const char *kinds[] = {"shm", "msg", "sem"};
	int k, found = 0;

	for (k = 0; k < 3; k++) {
		char path[64], line[512];
		int col_uid = -1, col_cuid = -1, i;
		FILE *f;

		snprintf(path, sizeof(path), "/proc/sysvipc/%s", kinds[k]);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fgets(line, sizeof(line), f)) {
			char *tok, *save = NULL;

			for (i = 0, tok = strtok_r(line, " \t\n", &save); tok;
			     tok = strtok_r(NULL, " \t\n", &save), i++) {
				if (!strcmp(tok, "uid"))
					col_uid = i;
				else if (!strcmp(tok, "cuid"))
					col_cuid = i;
			}
		}
		while (col_uid > 1 && col_cuid > 1 && found < max && fgets(line, sizeof(line), f)) {
			unsigned long v[24] = {0};
			char *tok, *save = NULL;
			int n;

			for (n = 0, tok = strtok_r(line, " \t\n", &save); tok && n < 24;
			     tok = strtok_r(NULL, " \t\n", &save))
				v[n++] = strtoul(tok, NULL, 10);
			if (n <= col_uid || n <= col_cuid || (v[col_uid] != uid && v[col_cuid] != uid))
				continue;
			kind[found] = k;
			id[found++] = (int)v[1];
		}
		fclose(f);
	}
	return found;
}

/* mqueues_of: the POSIX message queues in the container's mqueue file
 * system (/dev/mqueue) that uid owns; unlinked when unlink is set. */
static int mqueues_of(uid_t uid, int unlink_them)
{
	struct dirent *e;
	struct stat st;
	int n = 0;
	DIR *d = opendir(SWIFT_MQUEUE_DIR);

	if (!d)
		return 0; /* no mqueue file system: its queues cannot be listed */
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) || st.st_uid != uid)
			continue;
		n += !unlink_them || !unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
	return n;
}

/* remove_ipc removes the System V IPC objects a function's uid owns or
 * created, and the POSIX message queues it owns: they outlive processes,
 * and the next function under that uid must not find them. Only their
 * owner (or CAP_SYS_ADMIN, which a container's root lacks) may remove
 * them: a helper does it as that uid. */
static int remove_ipc(uid_t uid)
{
	int kind[64], id[64], n = ipc_of(uid, kind, id, 64), status = 0;
	pid_t pid;

	if (n == 0 && mqueues_of(uid, 0) == 0)
		return 0;
	pid = fork();
	if (pid == 0) {
		int i, removed = 0;

		if (setgroups(0, NULL) || setresgid(uid, uid, uid) || setresuid(uid, uid, uid))
			_exit(0);
		for (i = 0; i < n; i++)
			removed += (kind[i] == 0   ? shmctl(id[i], IPC_RMID, NULL)
				    : kind[i] == 1 ? msgctl(id[i], IPC_RMID, NULL)
						   : semctl(id[i], 0, IPC_RMID)) == 0;
		removed += mqueues_of(uid, 1);
		_exit(removed > 255 ? 255 : removed);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return 0;
	return WEXITSTATUS(status);
}

/* release gives the rows back once nothing of the function is left. */
static void release(struct zygote *z, int slot)
{
	struct child *c = &z->children[slot];
	int i;

	/* doorbells it rang just before it ended (a bounded batch: a relay
	 * socket passed on to a process outside the session never ends) */
	if (c->relay_fd >= 0)
		swift_relay_readable(z, slot);
	if (c->relay_fd >= 0) {
		close(c->relay_fd);
		c->relay_fd = -1;
	}
	if (c->refusals > 8)
		zlog(z, "function pid %d: %d more relay messages refused", (int)c->pid, c->refusals - 8);
	if (c->own_conn >= 0) {
		/* the peer destroys its side of the function's own QPs */
		if (z->conns[c->own_conn].kind == C_XCHG && z->conns[c->own_conn].gen == c->own_conn_gen)
			swift_conn_close(z, c->own_conn);
		c->own_conn = -1;
	}
	for (i = 0; i < c->nrows; i++) {
		struct pool_row *r = &z->dev.rows[c->rows[i]];

		if (r->state != ROW_ASSIGNED || r->owner != slot)
			continue;
		r->owner = -1;
		r->gen++;
		if (r->retire) {
			swift_row_destroy(&z->dev, c->rows[i]);
		} else {
			r->state = ROW_RECLAIM;
			r->step = 0;
			r->deadline_us = 0;
		}
	}
	if (z->cfg.function_uid_base && z->uids_ok) {
		int n = remove_ipc((uid_t)(z->cfg.function_uid_base + (uint32_t)slot));

		if (n)
			zlog(z, "function pid %d left %d IPC object(s) (System V, POSIX queues); removed", (int)c->pid,
			     n);
	}
	c->nrows = 0;
	z->dev.own_qps -= c->own;
	if (z->dev.own_qps < 0)
		z->dev.own_qps = 0;
	c->own = 0;
	c->state = CH_FREE;
	c->pid = 0;
	while (z->child_hwm > 0 && z->children[z->child_hwm - 1].state == CH_FREE)
		z->child_hwm--;
	z->status_dirty = 1;
}

void swift_child_tick(struct zygote *z, int slot, uint64_t now)
{
	struct child *c = &z->children[slot];
	int i;

	if (c->state == CH_RUNNING) {
		if (c->kill_at_us && now >= c->kill_at_us) {
			zlog(z, "function pid %d: still running %llu ms after its caller went away; killed",
			     (int)c->pid, (unsigned long long)((now - c->caller_gone_us) / 1000));
			swift_leftovers(z, slot, 1);
			c->kill_at_us = 0;
		}
		return;
	}
	if (c->state != CH_LEFTOVERS)
		return;
	/* a live function with the same pid means the old session ended
	 * and its number was given out again */
	for (i = 0; i < z->child_hwm; i++)
		if (i != slot && z->children[i].state == CH_RUNNING && z->children[i].pid == c->pid) {
			release(z, slot);
			return;
		}
	if (swift_leftovers(z, slot, 1) == 0)
		release(z, slot);
}

int swift_start_entrypoint(struct zygote *z, char **argv)
{
	z->entry_pid = fork();
	if (z->entry_pid < 0)
		return -1;
	if (z->entry_pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		syscall(SYS_close_range, 3U, ~0U, 0);
		execvp(argv[0], argv);
		fprintf(stderr, "swift-init: exec %s: %s\n", argv[0], strerror(errno));
		_exit(errno == ENOENT ? 127 : 126);
	}
	z->has_entry = 1;
	return 0;
}

void swift_kill_all(struct zygote *z)
{
	int i;

	for (i = 0; i < z->child_hwm; i++)
		if (z->children[i].state != CH_FREE)
			swift_leftovers(z, i, 1);
}
