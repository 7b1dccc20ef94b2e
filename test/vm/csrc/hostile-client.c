/*
 * hostile-client: clients that try to hold a zygote's event loop, for the
 * VM suite's hostile scenario (built static: it runs in the container).
 *
 *   hostile-client silent-ctl SOCKET N SECONDS
 *       N control connections that never send a request
 *   hostile-client slow-tcp IP PORT N SECONDS INTERVAL_MS
 *       N exchange connections that send a hello one byte per INTERVAL_MS
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

int main(int argc, char **argv)
{
	int fds[MAXC], n, i, closed = 0, opened = 0, sent[MAXC];
	long long end, interval = 0, next = 0;
	static const char hello[] = "SWIFTX02"; /* the first bytes of a hello */

	if (argc < 5) {
		fprintf(stderr, "usage: hostile-client silent-ctl SOCKET N SECONDS | slow-tcp IP PORT N SECONDS INTERVAL_MS\n");
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
