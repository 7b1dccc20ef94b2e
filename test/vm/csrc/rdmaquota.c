/*
 * rdmaquota — create verbs objects until the kernel refuses.
 *
 * Opens an RDMA device (the first one, or the one named by -d), then
 * alternately allocates protection domains and completion queues until a
 * creation fails or MAX objects exist. Each PD or CQ is one "hca_object" in
 * the rdma cgroup controller, so with rdma.max "hca_object=N" exactly N
 * succeed and the next fails with EAGAIN.
 *
 * Output (one key=value per line, parsed by the VM harness):
 *   device=rxe0
 *   created=N pds=P cqs=C
 *   failed_op=ibv_alloc_pd errno=11 error=Resource temporarily unavailable
 *   (or "limit_reached=MAX" when nothing failed)
 *
 * Exit status: 0 if a creation failed (a quota was hit), 2 if MAX objects
 * were created without failure, 1 on usage or device errors.
 *
 * Build: gcc -Wall -Wextra -O2 -o rdmaquota rdmaquota.c -libverbs
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

static void usage(const char *argv0)
{
	fprintf(stderr, "usage: %s [-d device] [-n max_objects]\n", argv0);
}

int main(int argc, char **argv)
{
	const char *want = NULL;
	long max = 1000;
	int opt;

	while ((opt = getopt(argc, argv, "d:n:h")) != -1) {
		switch (opt) {
		case 'd':
			want = optarg;
			break;
		case 'n':
			max = strtol(optarg, NULL, 10);
			if (max <= 0) {
				usage(argv[0]);
				return 1;
			}
			break;
		default:
			usage(argv[0]);
			return 1;
		}
	}

	int num = 0;
	struct ibv_device **list = ibv_get_device_list(&num);
	if (list == NULL) {
		printf("error=ibv_get_device_list: %s\n", strerror(errno));
		return 1;
	}
	struct ibv_device *dev = NULL;
	for (int i = 0; i < num; i++) {
		if (want == NULL || strcmp(ibv_get_device_name(list[i]), want) == 0) {
			dev = list[i];
			break;
		}
	}
	if (dev == NULL) {
		printf("error=no RDMA device%s%s (found %d)\n", want ? " named " : "", want ? want : "", num);
		return 1;
	}
	printf("device=%s\n", ibv_get_device_name(dev));

	struct ibv_context *ctx = ibv_open_device(dev);
	if (ctx == NULL) {
		printf("error=ibv_open_device: %s\n", strerror(errno));
		return 1;
	}

	struct ibv_pd **pds = calloc((size_t)max, sizeof(*pds));
	struct ibv_cq **cqs = calloc((size_t)max, sizeof(*cqs));
	if (pds == NULL || cqs == NULL) {
		printf("error=out of memory\n");
		return 1;
	}

	long npd = 0, ncq = 0, created = 0;
	const char *failed_op = NULL;
	int err = 0;
	while (created < max) {
		if (created % 2 == 0) {
			errno = 0;
			pds[npd] = ibv_alloc_pd(ctx);
			if (pds[npd] == NULL) {
				failed_op = "ibv_alloc_pd";
				err = errno;
				break;
			}
			npd++;
		} else {
			errno = 0;
			cqs[ncq] = ibv_create_cq(ctx, 1, NULL, NULL, 0);
			if (cqs[ncq] == NULL) {
				failed_op = "ibv_create_cq";
				err = errno;
				break;
			}
			ncq++;
		}
		created++;
	}

	printf("created=%ld pds=%ld cqs=%ld\n", created, npd, ncq);
	if (failed_op != NULL)
		printf("failed_op=%s errno=%d error=%s\n", failed_op, err, strerror(err));
	else
		printf("limit_reached=%ld\n", max);

	for (long i = 0; i < ncq; i++)
		ibv_destroy_cq(cqs[i]);
	for (long i = 0; i < npd; i++)
		ibv_dealloc_pd(pds[i]);
	free(cqs);
	free(pds);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	fflush(stdout);
	return failed_op != NULL ? 0 : 2;
}
