/* dlopen + the first call of a tessera library, in nanoseconds, for the
 * cost of a build feature (docs/FORMATS.md, "What the feature costs"):
 *   cc -O2 benches/dlopen_cost.c -o dlopen_cost -ldl
 *   for i in $(seq 41); do ./dlopen_cost A.so >>a.txt; ./dlopen_cost B.so >>b.txt; done
 * and the medians of the two files. */
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>
int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: dlopen_cost LIBRARY\n"); return 2; }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    const char *(*v)(void) = (const char *(*)(void))dlsym(h, "tsr_version");
    if (!v) { fprintf(stderr, "no tsr_version in %s\n", argv[1]); return 1; }
    const char *s = v();
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%ld %s\n", (b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec), s ? "" : "?");
    return 0;
}
