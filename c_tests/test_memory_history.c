/*
 * Memory history, snapshots and out-of-memory observers through the C
 * API: a C plugin's allocations and frees are events like the built-in
 * allocators', an observer sees a plugin's failure with the right figures
 * (and may call back into tessera), the snapshot file names the plugin and
 * its live block, a snapshot's stacks start at the C caller's function
 * with no frame of tessera's, a host's frames (tsr_memory_set_host_frames)
 * join the stacks only while backtraces are recorded,
 * tsr_cpu_allocator_release_all_caches
 * empties another thread's cache, and a snapshot replaces its file
 * atomically and refuses a FIFO without blocking. (Event sequences,
 * schema validation and the TORCH pickle: tests/memory_history.rs.)
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tsr_test.h"

static const TsrDevice CPU = {TSR_CPU, -1};

/* ---- a plugin that refuses requests above a limit ----------------------- */

static size_t limit = 1 << 20;

static void hist_free(void *ctx) { free(ctx); }

static TsrStatus hist_allocate(void *self, size_t nbytes, TsrDevice device, TsrDataPtr *out) {
    (void)self;
    if (nbytes > limit) return tsr_set_last_error(TSR_ERR_OUT_OF_MEMORY, "hist plugin: over its limit");
    void *p = malloc(nbytes ? nbytes : 1);
    if (p == NULL) return TSR_ERR_OUT_OF_MEMORY;
    out->data = p;
    out->ctx = p;
    out->deleter = hist_free;
    out->device = device;
    return TSR_OK;
}

static TsrAllocator *new_plugin(const char *name) {
    TsrAllocatorVTable v;
    memset(&v, 0, sizeof v);
    v.struct_size = sizeof v;
    v.name = name;
    v.allocate = hist_allocate;
    TsrAllocator *a = NULL;
    CHECK_OK(tsr_allocator_new(&v, NULL, &a));
    return a;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (f == NULL) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    CHECK_EQ((long)fread(buf, 1, (size_t)n, f), n);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static void scratch_path(char *buf, size_t n, const char *name) {
    const char *dir = getenv("TMPDIR");
    snprintf(buf, n, "%s/tessera-%ld-%s", dir ? dir : "/tmp", (long)getpid(), name);
}

static void test_plugin_events_reach_the_snapshot(void) {
    TsrHistoryOptions o = {sizeof o, 1000, false};
    CHECK_OK(tsr_memory_record_history(&o));
    CHECK(tsr_memory_history_is_recording());
    TsrAllocator *a = new_plugin("hist-c-plugin");
    TsrStorage *kept = NULL, *gone = NULL;
    CHECK_OK(tsr_storage_new_with_allocator(12345, a, false, &kept));
    CHECK_OK(tsr_storage_new_with_allocator(54321, a, false, &gone));
    CHECK_OK(tsr_storage_decref(gone));
    char path[512];
    scratch_path(path, sizeof path, "snapshot.json");
    CHECK_OK(tsr_memory_snapshot(path, TSR_SNAPSHOT_JSON));
    char *doc = read_file(path);
    CHECK(doc != NULL);
    if (doc != NULL) {
        CHECK(strstr(doc, "\"name\":\"hist-c-plugin\"") != NULL);
        CHECK(strstr(doc, "\"kind\":\"plugin\"") != NULL);
        /* the live block with its size, and the freed one's free event */
        CHECK(strstr(doc, "\"size\":12345") != NULL);
        CHECK(strstr(doc, "\"action\":\"free\"") != NULL);
        CHECK(strstr(doc, "\"size\":54321") != NULL);
        free(doc);
    }
    unlink(path);
    scratch_path(path, sizeof path, "snapshot.pickle");
    CHECK_OK(tsr_memory_snapshot(path, TSR_SNAPSHOT_TORCH));
    doc = read_file(path);
    if (doc != NULL) {
        CHECK_EQ((unsigned char)doc[0], 0x80); /* pickle protocol 2 */
        free(doc);
    }
    unlink(path);
    CHECK_OK(tsr_storage_decref(kept));
    CHECK_OK(tsr_allocator_decref(a));
    CHECK_OK(tsr_memory_record_history(NULL));
    CHECK(!tsr_memory_history_is_recording());
}

/* ---- stacks start at the caller -------------------------------------------- */

/* Whether the n bytes at buf hold s (the pickle holds NUL bytes). */
static int holds(const char *buf, size_t n, const char *s) {
    size_t k = strlen(s);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(buf + i, s, k) == 0) return 1;
    return 0;
}

static char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (f == NULL) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(*n + 1);
    CHECK_EQ(fread(buf, 1, *n, f), *n);
    buf[*n] = 0;
    fclose(f);
    return buf;
}

/* The allocation site the snapshot's stacks must start at. */
__attribute__((noinline)) static TsrStorage *c_user_site_allocates(size_t nbytes) {
    TsrStorage *s = NULL;
    CHECK_OK(tsr_storage_new(nbytes, CPU, false, &s));
    return s;
}

static void test_snapshot_stacks_start_at_the_caller(void) {
    TsrHistoryOptions o = {sizeof o, 1000, true};
    CHECK_OK(tsr_memory_record_history(&o));
    TsrStorage *s = c_user_site_allocates(24680);
    char path[512];
    size_t n = 0;
    scratch_path(path, sizeof path, "stacks.json");
    CHECK_OK(tsr_memory_snapshot(path, TSR_SNAPSHOT_JSON));
    char *doc = read_all(path, &n);
    if (doc != NULL) {
        /* The block's (and its event's) stack: [first, ...]; its first
         * index names the C function, counted through the frames table
         * (each frame is an object whose first key starts with "f"). */
        const char *st = strstr(doc, "\"size\":24680,\"stack\":[");
        const char *fr = strstr(doc, "\"frames\":[");
        CHECK(st != NULL && fr != NULL);
        if (st != NULL && fr != NULL) {
            long first = strtol(st + strlen("\"size\":24680,\"stack\":["), NULL, 10);
            const char *f = fr;
            for (long i = 0; i <= first && f != NULL; i++) f = strstr(f + 1, "{\"f");
            CHECK(f != NULL);
            if (f != NULL) {
                const char *end = strchr(f, '}');
                const char *name = strstr(f, "\"function\":\"c_user_site_allocates\"");
                CHECK(name != NULL && end != NULL && name < end);
            }
        }
        /* No frame of tessera or the Rust runtime in any stack. */
        CHECK(!holds(doc, n, "\"function\":\"tsr_"));
        CHECK(!holds(doc, n, "\"function\":\"tessera::"));
        CHECK(!holds(doc, n, "\"function\":\"<tessera::"));
        CHECK(!holds(doc, n, "\"function\":\"backtrace::"));
        CHECK(!holds(doc, n, "\"function\":\"std::"));
        free(doc);
    }
    unlink(path);
    scratch_path(path, sizeof path, "stacks.pickle");
    CHECK_OK(tsr_memory_snapshot(path, TSR_SNAPSHOT_TORCH));
    doc = read_all(path, &n);
    if (doc != NULL) {
        CHECK(holds(doc, n, "c_user_site_allocates"));
        CHECK(!holds(doc, n, "tsr_storage_new"));
        CHECK(!holds(doc, n, "tessera::"));
        CHECK(!holds(doc, n, "backtrace::"));
        free(doc);
    }
    unlink(path);
    CHECK_OK(tsr_storage_decref(s));
    CHECK_OK(tsr_memory_record_history(NULL));
}

/* ---- a host's frames ------------------------------------------------------ */

static int host_calls = 0;

/* Reports a three-frame "Python" stack; allocates through tessera itself
 * (recorded without host frames, and no recursion). */
static size_t host_frames(void *user, TsrHostFrame *frames, size_t capacity) {
    CHECK(user == &host_calls);
    CHECK_EQ(capacity, (size_t)TSR_MAX_HOST_FRAMES);
    host_calls++;
    TsrStorage *inner = NULL;
    CHECK_OK(tsr_storage_new(48, CPU, false, &inner));
    CHECK_OK(tsr_storage_decref(inner));
    TsrHostFrame f[3] = {
        {"model.py", "forward", 12},
        {NULL, "outer", 0},       /* no file, no line */
        {"main.py", NULL, -4},    /* no function, a bad line */
    };
    memcpy(frames, f, sizeof f);
    return 3;
}

static void test_host_frames_join_the_stack(void) {
    CHECK_OK(tsr_memory_set_host_frames("fixture-python", "main", host_frames, &host_calls));
    /* History off, or on without backtraces: never asked. */
    TsrStorage *s = c_user_site_allocates(1000);
    CHECK_OK(tsr_storage_decref(s));
    TsrHistoryOptions o = {sizeof o, 1000, false};
    CHECK_OK(tsr_memory_record_history(&o));
    s = c_user_site_allocates(1000);
    CHECK_OK(tsr_storage_decref(s));
    CHECK_EQ(host_calls, 0);
    /* With backtraces: asked once per allocation (not for its own). */
    o.backtraces = true;
    CHECK_OK(tsr_memory_record_history(&o));
    s = c_user_site_allocates(13579);
    CHECK_EQ(host_calls, 1);
    char path[512];
    size_t n = 0;
    scratch_path(path, sizeof path, "host.json");
    CHECK_OK(tsr_memory_snapshot(path, TSR_SNAPSHOT_JSON));
    char *doc = read_all(path, &n);
    if (doc != NULL) {
        CHECK(holds(doc, n, "{\"file\":\"model.py\",\"function\":\"forward\",\"host\":\"fixture-python\",\"line\":12}"));
        CHECK(holds(doc, n, "{\"function\":\"outer\",\"host\":\"fixture-python\"}"));
        CHECK(holds(doc, n, "{\"file\":\"main.py\",\"function\":\"??\",\"host\":\"fixture-python\"}"));
        free(doc);
    }
    unlink(path);
    scratch_path(path, sizeof path, "host.pickle");
    CHECK_OK(tsr_memory_snapshot(path, TSR_SNAPSHOT_TORCH));
    doc = read_all(path, &n);
    if (doc != NULL) {
        CHECK(holds(doc, n, "fixture-python"));
        CHECK(holds(doc, n, "forward"));
        free(doc);
    }
    unlink(path);
    CHECK_OK(tsr_storage_decref(s));
    /* Removed: not asked any more. */
    CHECK_OK(tsr_memory_set_host_frames(NULL, NULL, NULL, NULL));
    s = c_user_site_allocates(1000);
    CHECK_OK(tsr_storage_decref(s));
    CHECK_EQ(host_calls, 1);
    CHECK_OK(tsr_memory_record_history(NULL));
    /* Bad input. */
    CHECK_STATUS(tsr_memory_set_host_frames(NULL, NULL, host_frames, NULL), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_memory_set_host_frames("", NULL, host_frames, NULL), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("host is \"\"");
}

/* ---- out-of-memory observer ---------------------------------------------- */

static int oom_calls = 0;
static char oom_name[64];
static size_t oom_requested = 0;
static uint64_t oom_allocated = 0;
static TsrDeviceType oom_device = -1;

static void observer(void *user, const char *allocator, TsrDevice device, size_t requested,
                     uint64_t allocated) {
    CHECK(user == &oom_calls);
    if (strcmp(allocator, "hist-oom") != 0) return;
    oom_calls++;
    snprintf(oom_name, sizeof oom_name, "%s", allocator);
    oom_device = device.type;
    oom_requested = requested;
    oom_allocated = allocated;
    /* Calling back into tessera from an observer must not deadlock. */
    TsrStorage *s = NULL;
    CHECK_OK(tsr_storage_new(64, CPU, false, &s));
    CHECK_OK(tsr_storage_decref(s));
}

static void test_oom_observer_sees_a_plugin_failure(void) {
    CHECK_OK(tsr_add_oom_observer(observer, &oom_calls));
    TsrAllocator *a = new_plugin("hist-oom");
    TsrStorage *held = NULL, *s = NULL;
    CHECK_OK(tsr_storage_new_with_allocator(1000, a, false, &held));
    CHECK_STATUS(tsr_storage_new_with_allocator(limit + 1, a, false, &s), TSR_ERR_OUT_OF_MEMORY);
    CHECK(s == NULL);
    CHECK_EQ(oom_calls, 1);
    CHECK(strcmp(oom_name, "hist-oom") == 0);
    CHECK_EQ(oom_device, TSR_CPU);
    CHECK_EQ(oom_requested, limit + 1);
    CHECK_EQ(oom_allocated, 1000);
    CHECK_OK(tsr_storage_decref(held));
    CHECK_OK(tsr_allocator_decref(a));
}

/* ---- release_all_caches --------------------------------------------------- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int phase = 0;
static size_t worker_cached = 0, worker_after = 0;

static void *worker(void *arg) {
    (void)arg;
    TsrStorage *s[4];
    for (int i = 0; i < 4; i++) CHECK_OK(tsr_storage_new(100000, CPU, false, &s[i]));
    for (int i = 0; i < 4; i++) CHECK_OK(tsr_storage_decref(s[i]));
    pthread_mutex_lock(&mu);
    worker_cached = tsr_cpu_allocator_cached_bytes();
    phase = 1;
    pthread_cond_broadcast(&cv);
    while (phase != 2) pthread_cond_wait(&cv, &mu);
    worker_after = tsr_cpu_allocator_cached_bytes();
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void test_release_all_caches_empties_another_thread(void) {
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, worker, NULL), 0);
    pthread_mutex_lock(&mu);
    while (phase != 1) pthread_cond_wait(&cv, &mu);
    CHECK(worker_cached >= 4 * 100000);
    CHECK_OK(tsr_cpu_allocator_release_all_caches());
    phase = 2;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(t, NULL);
    CHECK_EQ(worker_after, 0);
}

/* A FIFO at the path is refused at once (the alarm fails the test if the
 * open blocks) and stays; a snapshot over an existing file replaces it
 * and leaves no temporary file. POSIX only: Windows has no FIFO at a
 * path (nor mkfifo, alarm, lstat). */
#ifndef _WIN32
static void test_snapshot_refuses_a_fifo(void) {
    char dir[] = "/tmp/tsr-snapshot-XXXXXX", fifo[256], file[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(fifo, sizeof fifo, "%s/pipe.json", dir);
    snprintf(file, sizeof file, "%s/snap.json", dir);
    CHECK(mkfifo(fifo, 0600) == 0);
    alarm(10);
    CHECK_STATUS(tsr_memory_snapshot(fifo, TSR_SNAPSHOT_JSON), TSR_ERR_IO);
    CHECK_MSG_CONTAINS("a FIFO");
    CHECK_MSG_CONTAINS("pipe.json");
    CHECK_STATUS(tsr_memory_snapshot(fifo, TSR_SNAPSHOT_TORCH), TSR_ERR_IO);
    alarm(0);
    struct stat st;
    CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    fputs("old", f);
    fclose(f);
    CHECK_OK(tsr_memory_snapshot(file, TSR_SNAPSHOT_JSON));
    char *doc = read_file(file);
    CHECK(doc != NULL && doc[0] == '{');
    free(doc);
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' && strstr(e->d_name, ".tsr-tmp-") == NULL) continue;
        CHECK(strstr(e->d_name, ".tsr-tmp-") == NULL);
        n++;
    }
    closedir(d);
    CHECK_EQ(n, 2);
    CHECK(unlink(fifo) == 0);
    CHECK(unlink(file) == 0);
    CHECK(rmdir(dir) == 0);
}
#endif

int main(void) {
    RUN(test_plugin_events_reach_the_snapshot);
    RUN(test_snapshot_stacks_start_at_the_caller);
    RUN(test_host_frames_join_the_stack);
#ifndef _WIN32
    RUN(test_snapshot_refuses_a_fifo);
#endif
    RUN(test_oom_observer_sees_a_plugin_failure);
    RUN(test_release_all_caches_empties_another_thread);
    printf("all memory history tests passed (%d checks)\n", tsr_test_checks);
    return 0;
}
