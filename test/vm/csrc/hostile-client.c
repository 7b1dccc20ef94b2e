/*
 * hostile-client: clients that try to hold a zygote's event loop, for the
 * VM suite's hostile scenario (built static: it runs in the container).
 *
 *   hostile-client silent-ctl SOCKET N SECONDS
 *       N control connections that never send a request
 *   hostile-client slow-tcp IP PORT N SECONDS INTERVAL_MS
 *       N exchange connections that send a hello one byte per INTERVAL_MS
 *   hostile-client flipproxy LISTEN_IP PORT TARGET_IP PORT DIR OFFSET SECONDS
 *       a relay that forwards TCP both ways and flips one bit of byte
 *       OFFSET of each connection's stream in direction DIR (0: from the
 *       dialer, 1: to it); prints how many bytes it flipped
 *
 * Holds them for SECONDS, then prints how many the zygote closed first.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAXC 256

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* closed_by_peer: the other end closed fd (EOF or reset). */
static int closed_by_peer(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char b;

	if (poll(&p, 1, 0) != 1)
		return 0;
	return recv(fd, &b, 1, MSG_DONTWAIT) <= 0;
}

/* flipproxy relays connections one at a time (the zygote dials again
 * after each failure), flipping one bit in each. */
static int flipproxy(char **argv)
{
	struct sockaddr_in la, ta;
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1, dir = atoi(argv[6]), flipped = 0, conns = 0;
	long long end = now_ms() + atoll(argv[8]) * 1000, offset = atoll(argv[7]);

	memset(&la, 0, sizeof(la));
	la.sin_family = AF_INET;
	la.sin_port = htons((uint16_t)atoi(argv[3]));
	inet_pton(AF_INET, argv[2], &la.sin_addr);
	memset(&ta, 0, sizeof(ta));
	ta.sin_family = AF_INET;
	ta.sin_port = htons((uint16_t)atoi(argv[5]));
	inet_pton(AF_INET, argv[4], &ta.sin_addr);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (l < 0 || bind(l, (struct sockaddr *)&la, sizeof(la)) || listen(l, 4)) {
		perror("flipproxy: listen");
		return 1;
	}
	printf("flipproxy listening on %s:%s, relaying to %s:%s, flipping byte %lld %s the dialer\n", argv[2], argv[3],
	       argv[4], argv[5], offset, dir ? "to" : "from");
	fflush(stdout);
	while (now_ms() < end) {
		struct pollfd pl = {.fd = l, .events = POLLIN};
		long long seen[2] = {0, 0};
		int c, t;

		if (poll(&pl, 1, 200) != 1)
			continue;
		c = accept(l, NULL, NULL);
		t = socket(AF_INET, SOCK_STREAM, 0);
		if (c < 0 || t < 0 || connect(t, (struct sockaddr *)&ta, sizeof(ta))) {
			if (c >= 0)
				close(c);
			if (t >= 0)
				close(t);
			continue;
		}
		conns++;
		for (;;) {
			struct pollfd p[2] = {{.fd = c, .events = POLLIN}, {.fd = t, .events = POLLIN}};
			unsigned char b[8192];
			int i, done = 0;

			if (poll(p, 2, 5000) <= 0)
				break;
			for (i = 0; i < 2 && !done; i++) {
				ssize_t n;

				if (!p[i].revents)
					continue;
				n = recv(p[i].fd, b, sizeof(b), 0);
				if (n <= 0) {
					done = 1;
					break;
				}
				/* i == 0: from the dialer (direction 0) */
				if (i == dir && seen[i] <= offset && offset < seen[i] + n) {
					b[offset - seen[i]] ^= 0x01;
					flipped++;
					/* a count per flip: the caller may stop the
					 * relay before its time is up */
					printf("flipproxy flipped=%d\n", flipped);
					fflush(stdout);
				}
				seen[i] += n;
				if (send(i == 0 ? t : c, b, (size_t)n, MSG_NOSIGNAL) != n)
					done = 1;
			}
			if (done)
				break;
		}
		close(c);
		close(t);
	}
	printf("flipproxy connections=%d flipped=%d\n", conns, flipped);
	return 0;
}

int main(int argc, char **argv)
{
	int fds[MAXC], n, i, closed = 0, opened = 0, sent[MAXC];
	long long end, interval = 0, next = 0;
	static const char hello[] = "SWIFTX06"; /* the first bytes of a hello */

	if (argc >= 9 && !strcmp(argv[1], "flipproxy"))
		return flipproxy(argv);
	if (argc < 5) {
		fprintf(stderr,
			"usage: hostile-client silent-ctl SOCKET N SECONDS | slow-tcp IP PORT N SECONDS INTERVAL_MS\n");
		return 2;
	}
	if (!strcmp(argv[1], "silent-ctl")) {
		struct sockaddr_un sa;

		n = atoi(argv[3]);
		end = now_ms() + atoll(argv[4]) * 1000;
		memset(&sa, 0, sizeof(sa));
		sa.sun_family = AF_UNIX;
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", argv[2]);
		for (i = 0; i < n && i < MAXC; i++) {
			fds[i] = socket(AF_UNIX, SOCK_SEQPACKET, 0);
			if (fds[i] >= 0 && !connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)))
				opened++;
		}
	} else if (!strcmp(argv[1], "slow-tcp") && argc >= 7) {
		struct sockaddr_in sa;

		n = atoi(argv[4]);
		end = now_ms() + atoll(argv[5]) * 1000;
		interval = atoll(argv[6]);
		memset(&sa, 0, sizeof(sa));
		sa.sin_family = AF_INET;
		sa.sin_port = htons((uint16_t)atoi(argv[3]));
		inet_pton(AF_INET, argv[2], &sa.sin_addr);
		for (i = 0; i < n && i < MAXC; i++) {
			fds[i] = socket(AF_INET, SOCK_STREAM, 0);
			sent[i] = 0;
			if (fds[i] >= 0 && !connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)))
				opened++;
		}
		next = now_ms();
	} else {
		fprintf(stderr, "hostile-client: unknown mode %s\n", argv[1]);
		return 2;
	}
	printf("hostile-client %s opened=%d\n", argv[1], opened);
	fflush(stdout);
	while (now_ms() < end) {
		if (interval && now_ms() >= next) {
			for (i = 0; i < n && i < MAXC; i++)
				if (fds[i] >= 0 && send(fds[i], &hello[sent[i] % 8], 1, MSG_NOSIGNAL) == 1)
					sent[i]++;
			next += interval;
		}
		usleep(50000);
	}
	for (i = 0; i < n && i < MAXC; i++)
		closed += fds[i] >= 0 && closed_by_peer(fds[i]);
	printf("hostile-client %s closed_by_zygote=%d of %d\n", argv[1], closed, opened);
	return 0;
}
