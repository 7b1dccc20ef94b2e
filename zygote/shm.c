/* Shared memory for queues a forked child posts on (SHARE_BUFFERS). */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "zygote.h"

/* Shared-buffer allocations for the parent domain (SHARE_BUFFERS): every
 * queue, CQ and doorbell record the provider allocates lands in its own
 * MAP_SHARED pages, which a forked child and the device see alike. */
#define SHM_BLOCKS (4 * SWIFT_MAX_QPS + 16)
static struct {
	void *p;
	size_t len;
} shm_blocks[SHM_BLOCKS];

void *swift_shm_alloc(struct ibv_pd *pd, void *pd_context, size_t size, size_t alignment, uint64_t type)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), len;
	uint8_t *p;
	int i;

	(void)pd;
	(void)pd_context;
	(void)type;
	if (alignment > page) /* mmap aligns to pages only */
		return NULL;
	for (i = 0; i < SHM_BLOCKS && shm_blocks[i].p; i++)
		;
	if (i == SHM_BLOCKS) {
		swift_log("shared queue memory: all %d blocks in use", SHM_BLOCKS);
		return NULL;
	}
	len = (size + page - 1) / page * page;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		swift_log("shared queue memory: mmap %zu bytes: %s", len, strerror(errno));
		return NULL;
	}
	shm_blocks[i].p = p;
	shm_blocks[i].len = len;
	return p;
}

void swift_shm_free(struct ibv_pd *pd, void *pd_context, void *ptr, uint64_t type)
{
	int i;

	(void)pd;
	(void)pd_context;
	(void)type;
	for (i = 0; i < SHM_BLOCKS; i++)
		if (shm_blocks[i].p == ptr) {
			munmap(ptr, shm_blocks[i].len);
			shm_blocks[i].p = NULL;
			return;
		}
}
