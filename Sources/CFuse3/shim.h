#ifndef CFUSE3_SHIM_H
#define CFUSE3_SHIM_H
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <sys/xattr.h>
#include <sys/ioctl.h>
#include <stdint.h>

/* FUSE passthrough (kernel >= 6.9, protocol 7.40), which libfuse 3.14 predates. The layouts and
   values are the kernel's uapi <linux/fuse.h>; only the fields Labstream reads or sets. */
struct CFuse3_in_header { uint32_t len, opcode; uint64_t unique, nodeid; uint32_t uid, gid, pid; uint16_t total_extlen, padding; };
struct CFuse3_init_in { uint32_t major, minor, max_readahead, flags, flags2; };
struct CFuse3_out_header { uint32_t len; int32_t error; uint64_t unique; };
struct CFuse3_init_out {
    uint32_t major, minor, max_readahead, flags;
    uint16_t max_background, congestion_threshold;
    uint32_t max_write, time_gran;
    uint16_t max_pages, map_alignment;
    uint32_t flags2, max_stack_depth;
};
struct CFuse3_open_out { uint64_t fh; uint32_t open_flags; int32_t backing_id; };

static const uint32_t CFuse3_OPCODE_OPEN = 14;
static const uint32_t CFuse3_OPCODE_INIT = 26;
static const uint32_t CFuse3_INIT_EXT = 1u << 30;              /* flags: flags2 is valid */
static const uint32_t CFuse3_PASSTHROUGH_FLAGS2 = 1u << 5;     /* FUSE_PASSTHROUGH = 1ULL << 37 */
static const uint32_t CFuse3_FOPEN_KEEP_CACHE = 1u << 1;
static const uint32_t CFuse3_FOPEN_PASSTHROUGH = 1u << 7;

/* FUSE_DEV_IOC_BACKING_OPEN / _CLOSE on the /dev/fuse descriptor (CAP_SYS_ADMIN). */
struct CFuse3_backing_map { int32_t fd; uint32_t flags; uint64_t padding; };
static inline int CFuse3_backing_open(int device, int fd) {
    struct CFuse3_backing_map map = { fd, 0, 0 };
    return ioctl(device, _IOW(229, 1, struct CFuse3_backing_map), &map);
}
static inline int CFuse3_backing_close(int device, int32_t backing) {
    uint32_t id = (uint32_t)backing;
    return ioctl(device, _IOW(229, 2, uint32_t), &id);
}
#endif
