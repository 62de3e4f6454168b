/* Read bandwidth of a [4096, 4096] float matrix (64 MiB) summed in the
 * access patterns a reduction can choose, on 1 and 2 threads: the ceiling
 * under the bench's sum rows (issue 20). Plain C with AVX2, no tessera.
 * See benches/PERF_RESULTS.md, 2026-11-25.
 *
 *   cc -O2 -mavx2 -pthread benches/read_patterns.c -o /tmp/read_patterns && /tmp/read_patterns
 *
 * Each thread takes a contiguous half of the rows (all of them on one
 * thread) and reads it as:
 *   one stream     front to back, four accumulators;
 *   4 streams      its part cut in quarters, 16 KiB of each in turn;
 *   rows, 4 apart  one output per row, rows from the four quarters in turn
 *                  (tessera's sum along dim 1);
 *   rows in order  one output per row, one row after the other;
 *   4 adjacent     one output per row, four neighbouring rows in turn.
 * Prints the median and the best of 200 passes per case.
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ROWS 4096
#define COLS 4096
#define PASSES 200

static float* matrix;
static volatile float row_sums[ROWS];
static volatile float sink;
static int mode, threads;
static pthread_barrier_t barrier;

static __m256 sum_run(const float* p, long n) {
    __m256 a = _mm256_setzero_ps(), b = a, c = a, d = a;
    for (long i = 0; i < n; i += 32) {
        a = _mm256_add_ps(a, _mm256_loadu_ps(p + i));
        b = _mm256_add_ps(b, _mm256_loadu_ps(p + i + 8));
        c = _mm256_add_ps(c, _mm256_loadu_ps(p + i + 16));
        d = _mm256_add_ps(d, _mm256_loadu_ps(p + i + 24));
    }
    return _mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d));
}

static float lanes(__m256 v) {
    float t[8], s = 0;
    _mm256_storeu_ps(t, v);
    for (int i = 0; i < 8; i++) s += t[i];
    return s;
}

static float row(long r) { return lanes(sum_run(matrix + r * COLS, COLS)); }

static void part(int t) {
    long r0 = (long)ROWS * t / threads, r1 = (long)ROWS * (t + 1) / threads;
    const float* base = matrix + r0 * COLS;
    long n = (r1 - r0) * COLS, quarter_rows = (r1 - r0) / 4;
    if (mode == 0) {
        sink = lanes(sum_run(base, n));
    } else if (mode == 1) {
        long q = n / 4;
        __m256 s = _mm256_setzero_ps();
        for (long i = 0; i < q; i += 4096)
            for (int k = 0; k < 4; k++) s = _mm256_add_ps(s, sum_run(base + k * q + i, 4096));
        sink = lanes(s);
    } else if (mode == 2) {
        for (long r = r0; r < r0 + quarter_rows; r++)
            for (int k = 0; k < 4; k++) row_sums[r + k * quarter_rows] = row(r + k * quarter_rows);
    } else if (mode == 3) {
        for (long r = r0; r < r1; r++) row_sums[r] = row(r);
    } else {
        for (long r = r0; r < r1; r += 4)
            for (int k = 0; k < 4; k++) row_sums[r + k] = row(r + k);
    }
}

static void* helper(void* arg) {
    for (int i = 0; i < PASSES; i++) {
        pthread_barrier_wait(&barrier);
        part((int)(long)arg);
        pthread_barrier_wait(&barrier);
    }
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int by_value(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

int main(void) {
    static const char* names[] = {"one stream", "4 streams", "rows, 4 apart", "rows in order",
                                  "4 adjacent"};
    matrix = aligned_alloc(64, (size_t)ROWS * COLS * sizeof(float));
    if (!matrix) return 1;
    for (long i = 0; i < (long)ROWS * COLS; i++) matrix[i] = 1.0f;
    const double gb = (double)ROWS * COLS * sizeof(float) / 1e9;
    for (threads = 1; threads <= 2; threads++) {
        for (mode = 0; mode < 5; mode++) {
            static double times[PASSES];
            pthread_t other;
            pthread_barrier_init(&barrier, NULL, threads);
            if (threads == 2 && pthread_create(&other, NULL, helper, (void*)1L) != 0) return 1;
            for (int i = 0; i < PASSES; i++) {
                double t0 = now();
                pthread_barrier_wait(&barrier);
                part(0);
                pthread_barrier_wait(&barrier);
                times[i] = now() - t0;
            }
            if (threads == 2) pthread_join(other, NULL);
            pthread_barrier_destroy(&barrier);
            qsort(times, PASSES, sizeof times[0], by_value);
            printf("%d thread%s, %-14s median %.3f ms (%.1f GB/s), best %.3f ms (%.1f GB/s)\n",
                   threads, threads > 1 ? "s" : " ", names[mode], times[PASSES / 2] * 1e3,
                   gb / times[PASSES / 2], times[0] * 1e3, gb / times[0]);
        }
    }
    free(matrix);
    return 0;
}
