#define _GNU_SOURCE
#include "page_cache_probe.h"
#include <errno.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif

struct cachestat_range { uint64_t off; uint64_t len; };
struct cachestat {
    uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

int haul_page_cache_status(int fd, struct haul_page_cache_status *status) {
    struct cachestat_range range = { 0, 0 };  /* len 0: to the end of the file */
    struct cachestat stat;
    if (syscall(__NR_cachestat, fd, &range, &stat, 0) != 0) return -1;
    status->cached = stat.nr_cache;
    status->dirty = stat.nr_dirty;
    status->writeback = stat.nr_writeback;
    return 0;
}

long haul_file_system_magic(const char *path) {
    struct statfs info;
    if (statfs(path, &info) != 0) return -1;
    return (long)info.f_type;
}
