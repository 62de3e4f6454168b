/* What the 1-thread permuted 256^3 float copy is made of: C models of the
 * loop tessera runs (src/kernels/blocked.rs and transpose.rs), taken apart
 * step by step, each timed against a streamed contiguous copy of the same
 * 64 MiB in the same process (best of 10). benches/PERF_RESULTS.md quotes
 * its figures.
 *
 *   clang -O2 -mavx2 benches/permute_model.c -o /tmp/permute_model && /tmp/permute_model
 *
 * (clang, as rustc is LLVM: GCC 12's build of the same file runs the full
 * copy in 9.2-9.6 ms where clang's takes 6.9-7.1.)
 *
 * The copy: dst[i][j][k] = src[k][j][i] (x.permute(2, 1, 0) made
 * contiguous). Tessera's tiles are 64 source rows (k) by one whole source
 * row segment of 256 floats (i); each tile is transposed in 8 x 8 blocks
 * into a buffer laid out as the destination, and after each block one
 * 256-byte destination row of the previous tile is streamed out. */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { S = 256, TK = 64 };
static const long P = (long)S * S; /* elements between source rows k, k+1 */
static float bufs[2][TK * S] __attribute__((aligned(64)));

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* 8 x 8 block: row r of src (stride sr) becomes column r of dst (stride dr). */
static inline void t8(const float* src, long sr, float* dst, long dr) {
    __m256 r[8], t[8], u[8];
    for (int q = 0; q < 8; q++) r[q] = _mm256_loadu_ps(src + q * sr);
    for (int q = 0; q < 8; q += 2) {
        t[q] = _mm256_unpacklo_ps(r[q], r[q + 1]);
        t[q + 1] = _mm256_unpackhi_ps(r[q], r[q + 1]);
    }
    for (int h = 0; h < 8; h += 4) {
        u[h] = _mm256_shuffle_ps(t[h], t[h + 2], 0x44);
        u[h + 1] = _mm256_shuffle_ps(t[h], t[h + 2], 0xEE);
        u[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0x44);
        u[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0xEE);
    }
    for (int q = 0; q < 4; q++) {
        _mm256_storeu_ps(dst + q * dr, _mm256_permute2f128_ps(u[q], u[q + 4], 0x20));
        _mm256_storeu_ps(dst + (q + 4) * dr, _mm256_permute2f128_ps(u[q], u[q + 4], 0x31));
    }
}

static void stream256(float* d, const float* s) {
    for (int q = 0; q < 64; q += 8) _mm256_stream_ps(d + q, _mm256_load_ps(s + q));
}

/* The anchor: streamed contiguous copy. */
static void contiguous(const float* a, float* b) {
    for (long i = 0; i < P * S; i += 8) _mm256_stream_ps(b + i, _mm256_loadu_ps(a + i));
    _mm_sfence();
}

/* Writes only, 256-byte destination rows 256 KiB apart, in the copy's order. */
static void writes_scattered(const float* a, float* b) {
    (void)a;
    __m256 z = _mm256_set1_ps(1);
    for (int j = 0; j < S; j++)
        for (int kt = 0; kt < S; kt += TK)
            for (int i = 0; i < S; i++)
                for (int q = 0; q < TK; q += 8) _mm256_stream_ps(b + i * P + j * S + kt + q, z);
    _mm_sfence();
}

/* Data movement only (no buffer, no shuffles): source read in the tiles'
 * order (8 rows x 32 bytes at a time), 8 streaming stores per block, either
 * to a sequential destination or to the destination rows the copy writes. */
static void moves(const float* a, float* b, int scattered) {
    float* seq = b;
    for (int j = 0; j < S; j++)
        for (int kt = 0; kt < S; kt += TK) {
            int row = 0;
            for (int k = kt; k < kt + TK; k += 8)
                for (int i = 0; i < S; i += 8, row++) {
                    const float* s = a + k * P + j * S + i;
                    float* d = scattered ? b + row * P + j * S + kt : seq;
                    for (int r = 0; r < 8; r++) _mm256_stream_ps(d + 8 * r, _mm256_loadu_ps(s + r * P));
                    seq += 64;
                }
        }
    _mm_sfence();
}
static void moves_sequential(const float* a, float* b) { moves(a, b, 0); }
static void moves_scattered(const float* a, float* b) { moves(a, b, 1); }

/* The copy's loop; with shuffle = 0 the blocks go to the buffer unshuffled
 * (same loads and stores, wrong result: timing only). */
static void tiled(const float* a, float* b, int shuffle) {
    float* prev = NULL;
    int cur = 0;
    for (int j = 0; j < S; j++)
        for (int kt = 0; kt < S; kt += TK) {
            float *buf = bufs[cur], *pbuf = bufs[cur ^ 1];
            int row = 0;
            for (int k = 0; k < TK; k += 8)
                for (int i = 0; i < S; i += 8, row++) {
                    const float* s = a + (kt + k) * P + j * S + i;
                    if (shuffle)
                        t8(s, P, buf + i * TK + k, TK);
                    else
                        for (int r = 0; r < 8; r++)
                            _mm256_store_ps(buf + (i + r) * TK + k, _mm256_loadu_ps(s + r * P));
                    if (prev) stream256(prev + row * P, pbuf + row * TK);
                }
            prev = b + j * S + kt;
            cur ^= 1;
        }
    for (int row = 0; row < S; row++) stream256(prev + row * P, bufs[cur ^ 1] + row * TK);
    _mm_sfence();
}
static void tiled_unshuffled(const float* a, float* b) { tiled(a, b, 0); }
static void tiled_full(const float* a, float* b) { tiled(a, b, 1); }

int main(void) {
    long n = P * S;
    float* a = aligned_alloc(4096, n * 4);
    float* b = aligned_alloc(4096, n * 4);
    if (!a || !b) return 1;
    for (long x = 0; x < n; x++) a[x] = (float)x, b[x] = 0;
    struct {
        const char* name;
        void (*f)(const float*, float*);
    } cases[] = {
        {"streamed contiguous copy (anchor)", contiguous},
        {"writes only, real destination rows", writes_scattered},
        {"tile-order reads, sequential writes", moves_sequential},
        {"tile-order reads, real destination rows", moves_scattered},
        {"+ tile buffer stores (no shuffles)", tiled_unshuffled},
        {"+ 8x8 shuffles: the full tiled copy", tiled_full},
    };
    enum { N = sizeof cases / sizeof cases[0] };
    double best[N];
    for (int c = 0; c < N; c++) best[c] = 1e30;
    for (int rep = 0; rep < 10; rep++)
        for (int c = 0; c < N; c++) {
            double t0 = now_ms();
            cases[c].f(a, b);
            double t = now_ms() - t0;
            if (t < best[c]) best[c] = t;
        }
    /* The last case ran last: check its result. */
    for (long i = 0; i < S; i++)
        for (long j = 0; j < S; j++)
            for (long k = 0; k < S; k++)
                if (b[i * P + j * S + k] != a[k * P + j * S + i]) {
                    printf("wrong result at (%ld, %ld, %ld)\n", i, j, k);
                    return 1;
                }
    for (int c = 0; c < N; c++)
        printf("%-42s %6.2f ms  %.2fx\n", cases[c].name, best[c], best[c] / best[0]);
    return 0;
}
