#ifndef CLINUX_SHIM_H
#define CLINUX_SHIM_H
/* Linux headers Glibc's Swift module does not export. */
#include <sys/xattr.h>
#include <spawn.h>
/* glibc defines POSIX_SPAWN_SETSID only under _GNU_SOURCE; the value is fixed ABI. */
#ifdef POSIX_SPAWN_SETSID
static const int CLinux_POSIX_SPAWN_SETSID = POSIX_SPAWN_SETSID;
#else
static const int CLinux_POSIX_SPAWN_SETSID = 0x80;
#endif

/* Closes every descriptor from `from` up in the spawned child (glibc 2.34+, declared only under
   _GNU_SOURCE): a completion hook must not inherit /dev/fuse, the index or the control socket. */
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *, int);
static inline int CLinux_spawn_closefrom(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

#include <unistd.h>
#include <sys/syscall.h>
/* Waits for any process to exit (not only children) without polling: a pidfd is readable once it has. */
static inline int CLinux_pidfd_open(int pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

/* sync_file_range(SYNC_FILE_RANGE_WRITE): start writeback of a range without waiting for it
   (glibc declares it only under _GNU_SOURCE). */
static inline int CLinux_start_writeback(int fd, long long offset, long long length) {
    return (int)syscall(SYS_sync_file_range, fd, offset, length, 2 /* SYNC_FILE_RANGE_WRITE */);
}

/* dup3 with O_CLOEXEC (glibc declares dup3 only under _GNU_SOURCE). */
static inline int CLinux_dup3_cloexec(int from, int to) { return (int)syscall(SYS_dup3, from, to, 02000000 /* O_CLOEXEC */); }

/* name_to_handle_at / open_by_handle_at (glibc declares them only under _GNU_SOURCE): what the
   kernel NFS server does with a file handle, for tests of FUSE export support. `handle` is a
   struct file_handle of at most 128 bytes of f_handle (MAX_HANDLE_SZ). */
static inline int CLinux_name_to_handle(const char *path, void *handle, int *mount_id) {
    return (int)syscall(SYS_name_to_handle_at, -100 /* AT_FDCWD */, path, handle, mount_id, 0);
}
static inline int CLinux_open_by_handle(int mount_fd, void *handle, int flags) {
    return (int)syscall(SYS_open_by_handle_at, mount_fd, handle, flags);
}

#include <malloc.h>
/* Hands the heap's free pages back to the kernel: after a catalog of 100 000 items is read and
   the tree built from it, glibc keeps the peak's pages resident otherwise. */
static inline void CLinux_release_free_memory(void) { (void)malloc_trim(0); }
/* Allocations of 4 MiB and more (a large library's catalog, tree and tables: tens of MiB each)
   get their own mapping, handed back whole when freed. glibc's default raises this threshold to
   the largest block freed, so a reload's arrays landed in the heap between small blocks that
   outlive them, and their pages stayed resident (about 35 MiB at 100 000 items). Reads' buffers
   (1 MiB at most) stay in the heap. */
static inline void CLinux_map_large_allocations(void) { (void)mallopt(M_MMAP_THRESHOLD, 4 << 20); }
/* One malloc arena for every thread. With one per thread (glibc's default, up to 8 per core), a
   sync's garbage and the tree the daemon keeps after it interleave in the sync thread's arena and
   its free pages cannot go back: at 100 000 items, 37 MiB more at rest and at the peak of a sync
   (B10). mallinfo2, which the heap-trim policy reads, also sees the main arena only. Must run
   before any other thread allocates. */
static inline void CLinux_use_one_malloc_arena(void) { (void)mallopt(M_ARENA_MAX, 1); }

#include <stdio.h>
#include <unistd.h>
/* Anonymous memory resident but not in use by malloc's callers: what a trim may hand back (it
   also counts thread stacks and the like, which stay). -1 when /proc cannot be read. */
static inline long CLinux_resident_slack_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "re");
    if (!f) return -1;
    long size, resident, shared;
    int n = fscanf(f, "%ld %ld %ld", &size, &resident, &shared);
    fclose(f);
    if (n != 3) return -1;
    struct mallinfo2 m = mallinfo2();
    long slack = (resident - shared) * sysconf(_SC_PAGESIZE) - (long)(m.uordblks + m.hblkhd);
    return slack < 0 ? 0 : slack;
}

#include <sys/socket.h>
/* The uid and gid of a Unix socket's peer; 0 on success. */
static inline int CLinux_peer_credentials(int fd, unsigned int *uid, unsigned int *gid) {
    struct { int pid; unsigned int uid; unsigned int gid; } cred;
    socklen_t length = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, 17 /* SO_PEERCRED */, &cred, &length) != 0) return -1;
    *uid = cred.uid;
    *gid = cred.gid;
    return 0;
}
#endif
