/*
 * Seeing memory: record the allocation history of a small "training loop"
 * that uses two allocators (the built-in CPU allocator for its weights and
 * a caching allocator over it for activations), then write a snapshot and
 * open it in docs/memory_viewer.html (drop the file on the page) or turn it
 * into a report: scripts/snapshot_report.py snapshot.json report.html.
 *
 * Build and run (from the repository root): examples/run.sh memory_history
 * builds it into target/examples/bin (with -g), then
 *   target/examples/bin/memory_history snapshot.json            # tessera's JSON
 *   target/examples/bin/memory_history snapshot.pickle torch    # the pickle memory_viz reads
 *
 * Without a path the snapshot goes to a temporary file that is removed.
 * Compiled with -g, the allocation sites carry file and line.
 */
#define _POSIX_C_SOURCE 200112L /* getpid */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tessera.h"

#define TRY(call)                                                                               \
    do {                                                                                        \
        TsrStatus s_ = (call);                                                                  \
        if (s_ != TSR_OK) {                                                                     \
            fprintf(stderr, "%s failed: %s (%s)\n", #call, tsr_last_error_message(),           \
                    tsr_status_name(s_));                                                       \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

enum { LAYERS = 4, STEPS = 8 };

static const TsrDevice CPU = {TSR_CPU, -1};

/* The weights: one CPU storage per layer, kept for the whole run. */
static TsrStorage *load_weights(size_t bytes) {
    TsrStorage *w = NULL;
    TRY(tsr_storage_new(bytes, CPU, false, &w));
    memset(tsr_storage_data(w), 0, bytes);
    return w;
}

/* An activation from the caching allocator, written as a layer would. */
static TsrStorage *activation(TsrAllocator *cache, size_t bytes) {
    TsrStorage *a = NULL;
    TRY(tsr_storage_new_with_allocator(bytes, cache, false, &a));
    for (int pass = 0; pass < 8; pass++) memset(tsr_storage_data(a), pass, bytes);
    return a;
}

/* A temporary of the CPU allocator, freed at once. */
static void scratch(size_t bytes) {
    TsrStorage *t = NULL;
    TRY(tsr_storage_new(bytes, CPU, false, &t));
    TRY(tsr_storage_decref(t));
}

static void forward(TsrAllocator *cache, TsrStorage *acts[LAYERS], int step) {
    for (int l = 0; l < LAYERS; l++) {
        acts[l] = activation(cache, (size_t)(256 + 128 * l + 32 * step) << 10);
        scratch((size_t)64 << 10);
    }
}

static void backward(TsrStorage *acts[LAYERS]) {
    for (int l = LAYERS - 1; l >= 0; l--) {
        scratch((size_t)512 << 10);
        TRY(tsr_storage_decref(acts[l]));
        acts[l] = NULL;
    }
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : NULL;
    TsrSnapshotFormat format = argc > 2 && strcmp(argv[2], "torch") == 0 ? TSR_SNAPSHOT_TORCH
                                                                         : TSR_SNAPSHOT_JSON;
    char tmp[256];
    if (path == NULL) {
        const char *dir = getenv("TMPDIR");
        snprintf(tmp, sizeof tmp, "%s/tessera-example-%ld.json", dir ? dir : "/tmp",
                 (long)getpid());
        path = tmp;
    }

    TsrHistoryOptions history = {sizeof history, 10000, true};
    TRY(tsr_memory_record_history(&history));

    TsrAllocator *cpu = tsr_cpu_allocator();
    TsrCachingOptions opts;
    memset(&opts, 0, sizeof opts);
    opts.struct_size = sizeof opts;
    opts.name = "activations";
    TsrAllocator *cache = NULL;
    TRY(tsr_caching_allocator_new(cpu, &opts, &cache));

    TsrStorage *weights[LAYERS];
    for (int l = 0; l < LAYERS; l++) weights[l] = load_weights((size_t)(1 + l) << 19);
    TsrStorage *acts[LAYERS];
    TsrStorage *kept = NULL;
    for (int step = 0; step < STEPS; step++) {
        forward(cache, acts, step);
        if (step == STEPS - 1) {
            kept = acts[LAYERS - 1]; /* the last output outlives the loop */
            TRY(tsr_storage_incref(kept));
        }
        backward(acts);
    }

    TRY(tsr_memory_snapshot(path, format));
    TsrAllocatorStats cs, ks;
    TRY(tsr_allocator_stats(cpu, &cs));
    TRY(tsr_allocator_stats(cache, &ks));
    printf("snapshot written (%s); cpu holds %llu bytes, activations %llu bytes\n",
           format == TSR_SNAPSHOT_TORCH ? "torch pickle" : "json",
           (unsigned long long)cs.allocated_bytes, (unsigned long long)ks.allocated_bytes);
    if (path == tmp) remove(tmp);

    TRY(tsr_storage_decref(kept));
    for (int l = 0; l < LAYERS; l++) TRY(tsr_storage_decref(weights[l]));
    TRY(tsr_allocator_decref(cache));
    TRY(tsr_allocator_decref(cpu));
    TRY(tsr_memory_record_history(NULL));
    return 0;
}
