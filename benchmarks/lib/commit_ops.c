// What placing one small file costs the file system, by the way it is placed. Built and run by
// benchmarks/commit-ops.sh; see there.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { FOLDERS = 100, SIZE = 256 };

static double wall(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec + now.tv_nsec / 1e9;
}

static double cpu(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
}

static int folder(const char *base, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", base, name);
    mkdir(path, 0755);
    int descriptor = open(path, O_DIRECTORY | O_RDONLY);
    if (descriptor < 0) { perror(path); exit(1); }
    return descriptor;
}

static void fail(const char *what, const char *name) { perror(what); fprintf(stderr, "at %s\n", name); exit(1); }

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: commit_ops WAY EMPTY-FOLDER COUNT\n"); return 64; }
    const char *way = argv[1], *base = argv[2];
    int count = atoi(argv[3]);
    char bytes[SIZE];
    memset(bytes, 'x', sizeof bytes);
    int staging = folder(base, "staging");
    int folders[FOLDERS];
    for (int index = 0; index < FOLDERS; index++) {
        char name[16];
        snprintf(name, sizeof name, "d%03d", index);
        folders[index] = folder(base, name);
    }
    double started = wall(), used = cpu();
    for (int index = 0; index < count; index++) {
        int target = folders[index % FOLDERS];
        char name[32], temporary[48];
        snprintf(name, sizeof name, "t%06d.bin", index);
        snprintf(temporary, sizeof temporary, "haul-%08x-%d", index * 2654435761u, index);
        int file;
        if (!strcmp(way, "direct")) {            // what curl does: create the destination itself (not atomic)
            if ((file = openat(target, name, O_RDWR | O_CREAT | O_EXCL, 0644)) < 0) fail("openat", name);
            pwrite(file, bytes, SIZE, 0);
            close(file);
        } else if (!strcmp(way, "staged")) {     // what haul does: a named file in one staging folder, renamed
            if ((file = openat(staging, temporary, O_RDWR | O_CREAT | O_EXCL, 0644)) < 0) fail("openat", temporary);
            pwrite(file, bytes, SIZE, 0);
            close(file);
            if (renameat(staging, temporary, target, name)) fail("renameat", name);
        } else if (!strcmp(way, "beside")) {     // a named file beside its destination, renamed (rsync's way)
            snprintf(temporary, sizeof temporary, ".%s.tmp", name);
            if ((file = openat(target, temporary, O_RDWR | O_CREAT | O_EXCL, 0644)) < 0) fail("openat", temporary);
            pwrite(file, bytes, SIZE, 0);
            close(file);
            if (renameat(target, temporary, target, name)) fail("renameat", name);
        } else if (!strcmp(way, "linked")) {     // an unnamed file (O_TMPFILE), linked in by its descriptor
            if ((file = openat(staging, ".", O_TMPFILE | O_RDWR, 0644)) < 0) fail("O_TMPFILE", name);
            pwrite(file, bytes, SIZE, 0);
            if (linkat(file, "", target, name, AT_EMPTY_PATH)) fail("linkat", name);
            close(file);
        } else if (!strcmp(way, "linked-proc")) { // the same, linked by /proc/self/fd (kernels before 6.10, unprivileged)
            char path[64];
            if ((file = openat(staging, ".", O_TMPFILE | O_RDWR, 0644)) < 0) fail("O_TMPFILE", name);
            pwrite(file, bytes, SIZE, 0);
            snprintf(path, sizeof path, "/proc/self/fd/%d", file);
            if (linkat(AT_FDCWD, path, target, name, AT_SYMLINK_FOLLOW)) fail("linkat", name);
            close(file);
        } else {
            fprintf(stderr, "commit_ops: unknown way %s\n", way);
            return 64;
        }
    }
    printf("%.3f %.3f\n", wall() - started, cpu() - used);
    return 0;
}
