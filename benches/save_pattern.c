// A 1 GiB save against the file patterns it is made of, in interleaved
// rounds, each with its wall and CPU time (getrusage): tessera's save
// (one float tensor, the format by EXT: npy, npz, gguf, pt, safetensors),
// write() with O_TRUNC over an existing file (benches/bench.cpp's write()
// anchor), write() into a new file renamed over an existing one (the
// pattern an atomic save needs, without tessera), and the same with the
// new file's bytes reserved first (fallocate, FALLOC_FL_KEEP_SIZE, as
// files::reserve does). benches/PERF_RESULTS.md, 2026-11-28, has what it
// showed, with strace -T and perf record over it.
//
//   cargo build --profile dist --lib && ln -sf libtessera.so target/dist/$(scripts/soname.sh)
//   gcc -O2 -Iinclude benches/save_pattern.c -o /tmp/save_pattern
//       -Ltarget/dist -ltessera -Wl,-rpath,$PWD/target/dist   (one line)
//   /tmp/save_pattern [all|tessera|trunc|rename|falloc] [ROUNDS] [EXT] [DIR]
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include "tessera.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
static double cpu(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}
static void write_all(int fd, const char* p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) exit(1);
        p += w; n -= (size_t)w;
    }
}
int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "all";  // all | tessera | trunc | rename
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    const char* ext = argc > 3 ? argv[3] : "npy";
    int64_t all = ((int64_t)1 << 30) / 4;
    TsrTensorDict* one = NULL;
    if (tsr_dict_new(&one)) return 1;
    TsrTensor* t = NULL;
    TsrDevice dev = {TSR_CPU, -1};
    if (tsr_tensor_empty(1, &all, TSR_FLOAT, dev, &t)) return 1;
    memset(tsr_tensor_data(t), 3, (size_t)all * 4);
    tsr_dict_set(one, "weight", t);
    tsr_tensor_decref(t);
    size_t len = (size_t)all * 4;
    char* src = malloc(len);
    memset(src, 1, len);
    const char* dir = argc > 4 ? argv[4] : "/tmp";
    char path[512], raw[512], raw2[512], tmp[512];
    snprintf(path, sizeof path, "%s/tsr-save-pattern.%s", dir, ext);
    snprintf(raw, sizeof raw, "%s/tsr-save-pattern.raw", dir);
    snprintf(raw2, sizeof raw2, "%s/tsr-save-pattern2.raw", dir);
    snprintf(tmp, sizeof tmp, "%s/.tsr-save-pattern2.raw.tmp", dir);
    int do_t = !strcmp(mode, "all") || !strcmp(mode, "tessera");
    int do_w = !strcmp(mode, "all") || !strcmp(mode, "trunc");
    int do_r = !strcmp(mode, "all") || !strcmp(mode, "rename");
    int do_f = !strcmp(mode, "all") || !strcmp(mode, "falloc");
    int do_n = !strcmp(mode, "all") || !strcmp(mode, "new");
    int do_tn = !strcmp(mode, "all") || !strcmp(mode, "tnew");
    for (int r = 0; r < rounds; r++) {
        if (do_t) {
            double a = now(), c = cpu();
            if (tsr_save(one, path, TSR_FORMAT_AUTO)) { fprintf(stderr, "%s\n", tsr_last_error_message()); return 1; }
            printf("round %d tessera save  %8.1f ms wall %8.1f ms cpu\n", r, (now() - a) * 1e3, (cpu() - c) * 1e3);
        }
        if (do_w) {
            double a = now(), c = cpu();
            int fd = open(raw, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            write_all(fd, src, len);
            close(fd);
            printf("round %d write() trunc %8.1f ms wall %8.1f ms cpu\n", r, (now() - a) * 1e3, (cpu() - c) * 1e3);
        }
        if (do_r) {
            double a = now(), c = cpu();
            int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
            if (fd < 0) return 1;
            write_all(fd, src, len);
            close(fd);
            if (rename(tmp, raw2)) return 1;
            printf("round %d write() temp+rename %8.1f ms wall %8.1f ms cpu\n", r, (now() - a) * 1e3, (cpu() - c) * 1e3);
        }
        if (do_f) {
            double a = now(), c = cpu();
            int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
            if (fd < 0) return 1;
            if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)len)) return 1;
            write_all(fd, src, len);
            close(fd);
            if (rename(tmp, raw2)) return 1;
            printf("round %d write() falloc+temp+rename %8.1f ms wall %8.1f ms cpu\n", r, (now() - a) * 1e3, (cpu() - c) * 1e3);
        }
        if (do_n) {
            double a = now(), c = cpu();
            unlink(raw);
            int fd = open(raw, O_WRONLY | O_CREAT | O_EXCL, 0600);
            if (fd < 0) return 1;
            write_all(fd, src, len);
            close(fd);
            printf("round %d write() new file %8.1f ms wall %8.1f ms cpu\n", r, (now() - a) * 1e3, (cpu() - c) * 1e3);
        }
        if (do_tn) {
            double a = now(), c = cpu();
            unlink(path);
            if (tsr_save(one, path, TSR_FORMAT_AUTO)) { fprintf(stderr, "%s\n", tsr_last_error_message()); return 1; }
            printf("round %d tessera save new file %8.1f ms wall %8.1f ms cpu\n", r, (now() - a) * 1e3, (cpu() - c) * 1e3);
        }
        fflush(stdout);
    }
    tsr_dict_free(one);
    free(src);
    unlink(path); unlink(raw); unlink(raw2);
    return 0;
}
