/* Shared memory for queues a forked child posts on (SHARE_BUFFERS). */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "pool.h"

/* Parent-domain allocators (struct ibv_parent_domain_init_attr, with
 * pd_context the device's struct swift_shm): every queue, CQ and doorbell
 * record the provider allocates lands in MAP_SHARED pages of its own, which
 * a forked child and the device see alike, recorded as belonging to the row
 * being created so that other functions never keep them mapped. */
void *swift_shm_alloc(struct ibv_pd *pd, void *pd_context, size_t size, size_t alignment, uint64_t type)
{
	struct swift_shm *shm = pd_context;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), len;
	uint8_t *p;
	int i;

	(void)pd;
	(void)type;
	if (!shm || alignment > page) /* mmap aligns to pages only */
		return NULL;
	for (i = 0; i < SWIFT_SHM_BLOCKS && shm->blocks[i].p; i++)
		;
	if (i == SWIFT_SHM_BLOCKS)
		return NULL;
	len = (size + page - 1) / page * page;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	shm->blocks[i].p = p;
	shm->blocks[i].len = len;
	shm->blocks[i].row = shm->current_row;
	return p;
}

void swift_shm_free(struct ibv_pd *pd, void *pd_context, void *ptr, uint64_t type)
{
	struct swift_shm *shm = pd_context;
	int i;

	(void)pd;
	(void)type;
	if (!shm)
		return;
	for (i = 0; i < SWIFT_SHM_BLOCKS; i++)
		if (shm->blocks[i].p == ptr) {
			munmap(ptr, shm->blocks[i].len);
			memset(&shm->blocks[i], 0, sizeof(shm->blocks[i]));
			return;
		}
}
