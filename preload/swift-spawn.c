/* swift-spawn — what the verbs cache costs a process that never uses RDMA.
 *
 *   swift-spawn [--runs N] [--no-aslr] [--preload LIB] PROG [ARG...]
 *
 * Run inside a container, this runs PROG N times as the container's
 * environment has it ("with": whatever LD_PRELOAD the container was given,
 * or LD_PRELOAD=LIB with --preload) and N times with LD_PRELOAD removed
 * ("plain"), alternating run by run so that drift hits both alike, and
 * prints the medians of fork to exit as seen by the parent:
 *
 *   spawn runs=N plain_us=.. with_us=.. overhead_us=.. aslr=on|off preload=none|LIB
 *
 * It exits 1 if any run of PROG fails. --no-aslr as in swift-profile.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* spawn runs argv once with LD_PRELOAD set to preload (NULL: unset; ""
 * as it is) and returns the wall time in µs, or -1 if it did not exit 0. */
static double spawn(char **argv, const char *preload)
{
	double t0 = now_us();
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (preload && *preload)
			setenv("LD_PRELOAD", preload, 1);
		else if (!preload)
			unsetenv("LD_PRELOAD");
		execv(argv[0], argv);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -1;
	return now_us() - t0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"runs", required_argument, NULL, 'r'},
		{"preload", required_argument, NULL, 'P'},
		{"no-aslr", no_argument, NULL, 'A'},
		{NULL, 0, NULL, 0},
	};
	const char *preload = NULL, *as_is = getenv("LD_PRELOAD");
	int c, i, runs = 20, no_aslr = 0;
	double *plain, *pre;

	while ((c = getopt_long(argc, argv, "+", lo, NULL)) != -1) {
		switch (c) {
		case 'r':
			runs = atoi(optarg);
			break;
		case 'P':
			preload = optarg;
			break;
		case 'A':
			no_aslr = 1;
			break;
		default:
			goto usage;
		}
	}
	if ((preload && !*preload) || optind >= argc || runs < 1 || runs > 100000)
		goto usage;
	if (!preload) /* the "with" runs: the environment as it is */
		preload = "";
	if (access(argv[optind], X_OK) != 0) {
		fprintf(stderr, "swift-spawn: %s: %s\n", argv[optind], strerror(errno));
		return 2;
	}
	if (no_aslr) {
		int p = personality(0xffffffff);

		if (p < 0 || personality((unsigned long)p | ADDR_NO_RANDOMIZE) < 0) {
			fprintf(stderr, "swift-spawn: cannot turn address space randomization off: %s\n",
				strerror(errno));
			return 2;
		}
	}
	plain = calloc((size_t)runs, sizeof(*plain));
	pre = calloc((size_t)runs, sizeof(*pre));
	if (!plain || !pre)
		return 2;
	for (i = 0; i < runs; i++) {
		plain[i] = spawn(argv + optind, NULL);
		pre[i] = spawn(argv + optind, preload);
		if (plain[i] < 0 || pre[i] < 0) {
			fprintf(stderr, "swift-spawn: run %d of %s failed (%s LD_PRELOAD)\n", i, argv[optind],
				plain[i] < 0 ? "without" : "with");
			return 1;
		}
	}
	{
		double p = median(plain, runs), q = median(pre, runs);

		const char *with = *preload ? preload : as_is && *as_is ? as_is : "none";

		printf("spawn runs=%d plain_us=%.1f with_us=%.1f overhead_us=%.1f aslr=%s preload=%s\n", runs, p, q,
		       q - p, personality(0xffffffff) & ADDR_NO_RANDOMIZE ? "off" : "on", with);
	}
	free(plain);
	free(pre);
	return 0;
usage:
	fprintf(stderr, "usage: swift-spawn [--runs N] [--no-aslr] [--preload LIB] PROG [ARG...]\n");
	return 2;
}
