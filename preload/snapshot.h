/* snapshot.h — the verbs cache snapshot, as libswiftverbs.so reads it.
 *
 * `swiftctl cache build` (Go, verbs/snapshot.go) writes snapshot.bin; this
 * file is the C reader. The format is fixed-size little-endian records, so
 * both sides agree by offsets alone:
 *
 *   header (SWV_HDR_SIZE bytes)
 *     0   magic "SWIFTVB1"            8 bytes, no NUL
 *     8   u32 version                 SWV_VERSION
 *     12  u32 size                    whole file, = SWV_HDR_SIZE + ndev * SWV_DEV_SIZE
 *     16  u64 checksum                FNV-1a 64 of bytes [24, size)
 *     24  u32 ndev                    <= SWV_MAX_DEVS
 *     28  u32 flags                   SWV_F_*
 *     32  char kernel[64]             uname release the cache was built on
 *     96  char rdma_core[32]          rdma-core version of the node
 *     128 char drivers[256]           the node's stock provider names, ':'-separated
 *   device (SWV_DEV_SIZE bytes), ndev times
 *     0   char name[64]               ibdev name (rxe0)
 *     64  char uverbs[16]             uverbs node name (uverbs0)
 *     80  u32 major, 84 u32 minor     uverbs device number
 *     88  char node_guid[32]          sysfs node_guid
 *     120 char fw_ver[64]             sysfs fw_ver ("" when absent)
 *     184 u32 flags                   SWV_D_*
 *     188 u32 attr_len                bytes of attr that are valid (<= SWV_ATTR_MAX)
 *     192 u8 attr[512]                struct ibv_device_attr_ex as queried
 *     704 u32 nports                  <= SWV_MAX_PORTS
 *     708 u32 reserved
 *     712 port[4], SWV_PORT_SIZE each
 *     840 u64 inode                 of class/infiniband_verbs/<uverbs>: the
 *                                   device's registration (0: not recorded)
 *   port
 *     0 u32 flags (SWV_P_*), 4 u32 max_mtu, 8 i32 gid_tbl_len,
 *     12 u32 port_cap_flags, 16 u32 max_msg_sz, 20 u16 pkey_tbl_len,
 *     22 u8 max_vl_num, 23 u8 link_layer, 24 u16 port_cap_flags2,
 *     26..31 reserved
 *
 * Every string field is NUL-terminated inside its field; a file that breaks
 * any rule (size, checksum, counts, strings) is rejected as a whole.
 */
#ifndef SWIFT_SNAPSHOT_H
#define SWIFT_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#define SWV_MAGIC "SWIFTVB1"
#define SWV_VERSION 2
#define SWV_HDR_SIZE 384
#define SWV_DEV_SIZE 848
#define SWV_PORT_SIZE 32
#define SWV_MAX_DEVS 16
#define SWV_MAX_PORTS 4
#define SWV_ATTR_MAX 512
#define SWV_MAX_SIZE (SWV_HDR_SIZE + SWV_MAX_DEVS * SWV_DEV_SIZE)

#define SWV_F_COPY_ON_FORK 1u /* the kernel does copy-on-fork for verbs memory */
#define SWV_D_ATTR_STABLE 1u  /* attr was identical over every profiling run: serve it */
#define SWV_P_STABLE 1u       /* the port's static fields were identical over every run */

struct swv_port {
	uint32_t flags;
	uint32_t max_mtu;
	int32_t gid_tbl_len;
	uint32_t port_cap_flags;
	uint32_t max_msg_sz;
	uint16_t pkey_tbl_len;
	uint8_t max_vl_num;
	uint8_t link_layer;
	uint16_t port_cap_flags2;
};

struct swv_dev {
	char name[64];
	char uverbs[16];
	uint32_t major, minor;
	char node_guid[32];
	char fw_ver[64];
	uint32_t flags;
	uint32_t attr_len;
	uint8_t attr[SWV_ATTR_MAX];
	uint32_t nports;
	struct swv_port ports[SWV_MAX_PORTS];
	uint64_t inode;
};

struct swv_snapshot {
	uint32_t ndev;
	uint32_t flags;
	char kernel[64];
	char rdma_core[32];
	char drivers[256];
	struct swv_dev devs[SWV_MAX_DEVS];
};

/* FNV-1a 64 of n bytes. */
uint64_t swv_fnv1a64(const void *p, size_t n);

/* swv_parse decodes and validates buf (len bytes) into out. Returns 0, or -1
 * with the reason in why (at most whylen bytes, NUL-terminated). */
int swv_parse(const void *buf, size_t len, struct swv_snapshot *out, char *why, size_t whylen);

/* swv_check_fingerprint compares the snapshot with the running node: the
 * kernel release and, in one listing of class/infiniband_verbs under sysfs
 * (normally "/sys"), the set of uverbs devices and their registrations
 * (the class entries' inode numbers, new whenever a device is registered
 * again): a device added, removed or registered again is found with a
 * fixed number of system calls, however many devices there are. A device
 * whose registration the snapshot does not know (inode 0) is read in full:
 * name, device number, node GUID and firmware. Returns 0 when they match,
 * else 1 with a one-line reason in why. */
int swv_check_fingerprint(const struct swv_snapshot *s, const char *sysfs, const char *release, char *why,
			  size_t whylen);

/* swv_check_open compares snapshot device d with what libibverbs found for
 * the device a process opens under its name: its uverbs node (dev_name)
 * and node GUID (guid, host order; 0 when libibverbs does not know it),
 * read while libibverbs listed devices, so that it costs no system call.
 * Returns 0 when they match, else 1 with a reason in why. */
int swv_check_open(const struct swv_dev *d, const char *dev_name, uint64_t guid, char *why, size_t whylen);

/* swv_find_dev returns the index of the device called name, or -1. */
int swv_find_dev(const struct swv_snapshot *s, const char *name);

/* swv_port_static_diff compares the static fields of a queried port with the
 * snapshot's; returns 0 when equal, else 1 with the first difference in why. */
struct ibv_port_attr;
int swv_port_static_diff(const struct swv_port *want, const struct ibv_port_attr *got, char *why, size_t whylen);

/* Error-triggered revalidation: after a call failed with arguments an
 * application may have taken from cached attributes, and the device's real
 * attributes turned out to differ, these replace every argument that equals
 * the cached limit (and not the real one) with the real limit, so that the
 * one retry can succeed. Each returns how many fields it changed. */
struct ibv_device_attr;
struct ibv_qp_cap;
struct ibv_qp_attr;
int swv_fix_qp_cap(struct ibv_qp_cap *cap, const struct ibv_device_attr *cached, const struct ibv_device_attr *real);
int swv_fix_cqe(int *cqe, const struct ibv_device_attr *cached, const struct ibv_device_attr *real);
int swv_fix_qp_attr(struct ibv_qp_attr *attr, int mask, const struct ibv_device_attr *cached,
		    const struct ibv_device_attr *real);

#endif
