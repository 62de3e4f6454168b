/* The cost of new pages against the copy of their bytes: the floor under
 * share_memory (issue 17) and copy loading (issue 24). Plain C, no
 * tessera: what the kernel charges for the memory those operations must
 * use. See benches/PERF_RESULTS.md, "New pages".
 *
 *   cc -O2 -pthread benches/page_cost.c -o /tmp/page_cost && /tmp/page_cost
 *
 * 64 MiB cases (share_memory's size), best of 9:
 *   memcpy into warm memory; malloc + memcpy (new 4 KiB pages faulted by
 *   the copy); anonymous memory populated (MADV_POPULATE_WRITE) with 4 KiB
 *   and with 2 MiB pages (MADV_HUGEPAGE), nothing copied; a memfd filled
 *   with ftruncate + pwrite (what tessera does), with pwrite on 2 threads,
 *   by mmap + memcpy, and allocated by fallocate alone; pwrite into a
 *   memfd whose pages exist already (the copy and the write path without
 *   the allocation). Releases (close, munmap, free) are not timed.
 * 1 GiB cases (a checkpoint's size), best of 4: memcpy into warm memory;
 *   read() of a file in the page cache into warm memory, into new 2 MiB
 *   pages, into new 2 MiB pages on 2 threads, into new 4 KiB pages (once).
 * The 1 GiB file is written to $TMPDIR (default /tmp) and removed.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define SMALL (64ul << 20)
#define BIG (1ul << 30)
#define HUGE (2ul << 20)

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void die(const char* what) {
    perror(what);
    exit(1);
}

struct part {
    int fd;
    char* buf;
    size_t off, len;
    int write;
};

static void* io_part(void* arg) {
    struct part* p = arg;
    for (size_t d = 0; d < p->len;) {
        ssize_t n = p->write ? pwrite(p->fd, p->buf + p->off + d, p->len - d, (off_t)(p->off + d))
                             : pread(p->fd, p->buf + p->off + d, p->len - d, (off_t)(p->off + d));
        if (n <= 0) die(p->write ? "pwrite" : "pread");
        d += (size_t)n;
    }
    return NULL;
}

/* fd's [0, len) to/from buf, on 1 or 2 threads. */
static void io(int fd, char* buf, size_t len, int write, int threads) {
    struct part a = {fd, buf, 0, threads == 2 ? len / 2 : len, write};
    struct part b = {fd, buf, len / 2, len - len / 2, write};
    pthread_t t;
    if (threads == 2 && pthread_create(&t, NULL, io_part, &b) != 0) die("pthread_create");
    io_part(&a);
    if (threads == 2) pthread_join(t, NULL);
}

static char* anon(size_t len, int huge) {
    char* p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) die("mmap");
    if (huge) madvise(p, len, MADV_HUGEPAGE);
    return p;
}

static int memfd(size_t len) {
    int fd = memfd_create("page-cost", MFD_CLOEXEC);
    if (fd < 0) die("memfd_create");
    if (len && ftruncate(fd, (off_t)len) != 0) die("ftruncate");
    return fd;
}

static double best[16];
static const char* names[16];

static void record(int k, const char* name, double ms) {
    names[k] = name;
    if (best[k] == 0 || ms < best[k]) best[k] = ms;
}

int main(void) {
    char* src = malloc(BIG);
    char* dst = malloc(BIG);
    if (!src || !dst) die("malloc");
    memset(src, 3, BIG);
    memset(dst, 1, BIG);
    for (int r = 0; r < 9; r++) {
        double t0 = now_ms();
        memcpy(dst, src, SMALL);
        record(0, "64 MiB memcpy into warm memory", now_ms() - t0);

        t0 = now_ms();
        char* p = malloc(SMALL);
        memcpy(p, src, SMALL);
        record(1, "64 MiB malloc + memcpy (new 4 KiB pages)", now_ms() - t0);
        free(p);

        for (int huge = 0; huge < 2; huge++) {
            t0 = now_ms();
            p = anon(SMALL, huge);
            if (madvise(p, SMALL, MADV_POPULATE_WRITE) != 0) die("MADV_POPULATE_WRITE");
            record(2 + huge, huge ? "64 MiB anonymous 2 MiB pages populated" : "64 MiB anonymous 4 KiB pages populated",
                   now_ms() - t0);
            munmap(p, SMALL);
        }

        for (int threads = 1; threads <= 2; threads++) {
            t0 = now_ms();
            int fd = memfd(SMALL);
            io(fd, src, SMALL, 1, threads);
            record(3 + threads, threads == 1 ? "64 MiB memfd ftruncate + pwrite" : "64 MiB memfd ftruncate + pwrite, 2 threads",
                   now_ms() - t0);
            close(fd);
        }

        t0 = now_ms();
        int fd = memfd(SMALL);
        p = mmap(NULL, SMALL, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) die("mmap memfd");
        memcpy(p, src, SMALL);
        record(6, "64 MiB memfd ftruncate + mmap + memcpy", now_ms() - t0);
        munmap(p, SMALL);
        close(fd);

        t0 = now_ms();
        fd = memfd(0);
        if (fallocate(fd, 0, 0, (off_t)SMALL) != 0) die("fallocate");
        record(7, "64 MiB memfd fallocate only (no copy)", now_ms() - t0);
        t0 = now_ms();
        io(fd, src, SMALL, 1, 1);
        record(8, "64 MiB pwrite into a memfd's existing pages", now_ms() - t0);
        close(fd);
    }

    const char* tmp = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/page-cost-%d.bin", tmp ? tmp : "/tmp", (int)getpid());
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) die(path);
    io(fd, src, BIG, 1, 1);
    for (int r = 0; r < 4; r++) {
        double t0 = now_ms();
        memcpy(dst, src, BIG);
        record(9, "1 GiB memcpy into warm memory", now_ms() - t0);
        t0 = now_ms();
        io(fd, dst, BIG, 0, 1);
        record(10, "1 GiB read() into warm memory", now_ms() - t0);
        for (int threads = 1; threads <= 2; threads++) {
            char* m = anon(BIG + HUGE, 0);
            char* p = (char*)(((size_t)m + HUGE - 1) & ~(HUGE - 1));
            madvise(p, BIG, MADV_HUGEPAGE);
            t0 = now_ms();
            io(fd, p, BIG, 0, threads);
            record(10 + threads, threads == 1 ? "1 GiB read() into new 2 MiB pages" : "1 GiB read() into new 2 MiB pages, 2 threads",
                   now_ms() - t0);
            munmap(m, BIG + HUGE);
        }
        if (r == 0) {
            char* p = anon(BIG, 0);
            t0 = now_ms();
            io(fd, p, BIG, 0, 1);
            record(13, "1 GiB read() into new 4 KiB pages", now_ms() - t0);
            munmap(p, BIG);
        }
    }
    close(fd);
    unlink(path);

    for (int k = 0; k < 14; k++) {
        double base = best[k < 9 ? 0 : 9];
        size_t pages = (k < 9 ? SMALL : BIG) / 4096;
        printf("%-48s %8.2f ms  %5.2fx memcpy  %6.3f us per 4 KiB\n", names[k], best[k], best[k] / base,
               best[k] * 1e3 / (double)pages);
    }
    return 0;
}
