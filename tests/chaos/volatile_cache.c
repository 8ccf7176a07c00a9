/*
 * volatile_cache.so - LD_PRELOAD into redis-server to make a SIGKILL behave like a host crash.
 *
 * A killed process loses nothing it has already write()n: the kernel's page cache outlives
 * it. A power cut or a kernel panic loses everything not yet fsync()ed. This shim keeps the
 * bytes Redis writes to its incremental AOF file (*.incr.aof) in the process's own memory
 * until Redis calls fsync()/fdatasync() on that file, so after a SIGKILL exactly the
 * unsynced tail is gone - what `appendfsync everysec` risks on a real host crash.
 *
 * Only *.incr.aof is buffered; the manifest, the base file and everything else pass through.
 * close() writes the buffer out (Redis fsyncs what it closes on purpose; this avoids losing
 * data the process itself considers finished). Thread-safe: Redis appends from the main
 * thread and fsyncs from a background thread under `everysec`.
 *
 * Build: cc -shared -fPIC -O2 -o volatile_cache.so volatile_cache.c -ldl -lpthread
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_FD 4096
enum { UNKNOWN = 0, VOLATILE = 1, PASSTHROUGH = 2 };

static unsigned char kind[MAX_FD];
static char *buffer[MAX_FD];
static size_t used[MAX_FD], capacity[MAX_FD];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static ssize_t (*real_write)(int, const void *, size_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_close)(int);

static void resolve(void) {
    if (!real_write) {
        real_write = dlsym(RTLD_NEXT, "write");
        real_fsync = dlsym(RTLD_NEXT, "fsync");
        real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
        real_close = dlsym(RTLD_NEXT, "close");
    }
}

static int classify(int fd) {
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return PASSTHROUGH;
    path[n] = '\0';
    size_t len = (size_t)n, suffix = strlen(".incr.aof");
    return len > suffix && strcmp(path + len - suffix, ".incr.aof") == 0 ? VOLATILE : PASSTHROUGH;
}

/* Write the buffered bytes of fd to the file; call with the lock held. */
static int drain(int fd) {
    size_t done = 0;
    while (done < used[fd]) {
        ssize_t n = real_write(fd, buffer[fd] + done, used[fd] - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        done += (size_t)n;
    }
    used[fd] = 0;
    return 0;
}

ssize_t write(int fd, const void *data, size_t size) {
    resolve();
    if (fd < 0 || fd >= MAX_FD) return real_write(fd, data, size);
    pthread_mutex_lock(&lock);
    if (kind[fd] == UNKNOWN) kind[fd] = (unsigned char)classify(fd);
    if (kind[fd] != VOLATILE) {
        pthread_mutex_unlock(&lock);
        return real_write(fd, data, size);
    }
    if (used[fd] + size > capacity[fd]) {
        size_t grown = capacity[fd] ? capacity[fd] : 1 << 20;
        while (grown < used[fd] + size) grown *= 2;
        char *bigger = realloc(buffer[fd], grown);
        if (!bigger) {
            pthread_mutex_unlock(&lock);
            errno = ENOMEM;
            return -1;
        }
        buffer[fd] = bigger;
        capacity[fd] = grown;
    }
    memcpy(buffer[fd] + used[fd], data, size);
    used[fd] += size;
    pthread_mutex_unlock(&lock);
    return (ssize_t)size;
}

/* `real` is passed as a pointer to the pointer: it is only resolved on first use. */
static int sync_with(int fd, int (**real)(int)) {
    resolve();
    if (fd >= 0 && fd < MAX_FD) {
        pthread_mutex_lock(&lock);
        int failed = kind[fd] == VOLATILE ? drain(fd) : 0;
        pthread_mutex_unlock(&lock);
        if (failed) return -1;
    }
    return (*real)(fd);
}

int fsync(int fd) { return sync_with(fd, &real_fsync); }
int fdatasync(int fd) { return sync_with(fd, &real_fdatasync); }

int close(int fd) {
    resolve();
    if (fd >= 0 && fd < MAX_FD) {
        pthread_mutex_lock(&lock);
        if (kind[fd] == VOLATILE) drain(fd);
        kind[fd] = UNKNOWN;
        used[fd] = 0;
        pthread_mutex_unlock(&lock);
    }
    return real_close(fd);
}
