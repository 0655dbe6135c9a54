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

#include <unistd.h>
#include <sys/syscall.h>
/* Waits for any process to exit (not only children) without polling: a pidfd is readable once it has. */
static inline int CLinux_pidfd_open(int pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }
#endif
