// Linux calls that glibc declares only under _GNU_SOURCE, which Swift's Glibc module is not built with.
// glibc (>= 2.28) exports them; we only restate the prototypes.
#ifndef HAUL_LINUX_SHIMS_H
#define HAUL_LINUX_SHIMS_H
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>

/// A descriptor that names a directory without opening it for reading (usable as the dirfd of *at calls).
#ifndef O_PATH
#define O_PATH 010000000
#endif
static const int haul_O_PATH = O_PATH;

/// renameat2's flags: fail rather than replace an existing name; swap two names atomically (Linux 3.15).
#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
static const unsigned int haul_RENAME_NOREPLACE = RENAME_NOREPLACE;
static const unsigned int haul_RENAME_EXCHANGE = RENAME_EXCHANGE;

extern int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags);
extern int syncfs(int fd);

/// Starts writeback of a file's dirty pages in a range without waiting for it (`sync_file_range(2)`): the flush
/// before a rename then finds little left to write.
#ifndef SYNC_FILE_RANGE_WRITE
#define SYNC_FILE_RANGE_WRITE 2
#endif
static const unsigned int haul_SYNC_FILE_RANGE_WRITE = SYNC_FILE_RANGE_WRITE;
extern int sync_file_range(int fd, __off64_t offset, __off64_t nbytes, unsigned int flags);

/// fcntl is variadic in C; these are the two forms haul uses (file locks come with the state cache).
static inline int haul_fcntl_int(int fd, int cmd, int arg) { return fcntl(fd, cmd, arg); }
static inline int haul_fcntl_lock(int fd, int cmd, struct flock *lock) { return fcntl(fd, cmd, lock); }

/// Open-file-description locks (Linux 3.15): byte-range locks owned by the descriptor, not the process.
#ifndef F_OFD_SETLK
#define F_OFD_GETLK 36
#define F_OFD_SETLK 37
#define F_OFD_SETLKW 38
#endif
static const int haul_F_OFD_GETLK = F_OFD_GETLK;
static const int haul_F_OFD_SETLK = F_OFD_SETLK;
static const int haul_F_OFD_SETLKW = F_OFD_SETLKW;

/// The attributes every thread created without its own gets (glibc 2.18): its stack size, for one.
extern int pthread_setattr_default_np(const pthread_attr_t *attr);

/// At most `count` malloc arenas (`mallopt(M_ARENA_MAX)`; Swift's Glibc module leaves malloc.h out).
static inline int haul_limit_malloc_arenas(int count) { return mallopt(M_ARENA_MAX, count); }
#endif
