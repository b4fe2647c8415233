// What the page cache holds of a file, from cachestat(2) (Linux 6.5): how tests see whether haul's writes are
// still dirty or already on their way to disk. glibc has no wrapper yet, and syscall(2) is variadic (which
// Swift cannot call): this is the one C function the tests need for it.
#ifndef HAUL_PAGE_CACHE_PROBE_H
#define HAUL_PAGE_CACHE_PROBE_H
#include <stdint.h>

struct haul_page_cache_status {
    uint64_t cached;
    uint64_t dirty;
    uint64_t writeback;
};

/// Pages of the whole file open as `fd`. 0 on success; -1 with errno set (ENOSYS on kernels before 6.5).
int haul_page_cache_status(int fd, struct haul_page_cache_status *status);

/// statfs(2)'s f_type of the file system holding `path` (TMPFS_MAGIC and so on); -1 with errno set on failure.
/// (Swift's Glibc module does not include sys/statfs.h.)
long haul_file_system_magic(const char *path);
#endif
