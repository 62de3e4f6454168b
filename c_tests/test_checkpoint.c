/* Checkpoints opened once and loaded in parts, from C: names and sizes
 * before any load, one tensor and rows, a set with progress on the
 * calling thread, a cancel that keeps nothing, a close while another
 * thread's load runs, loads from several threads, and tensors that
 * outlive their checkpoint. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <unistd.h>

#include "tsr_test.h"

static const TsrDevice CPU = {TSR_CPU, -1};
static char path[96];

/* Saves {"t0".."t7": float [64, 256], element i of tk = k * 1e5 + i}. */
static void make_file(void) {
    TsrTensorDict *d = NULL;
    int64_t sizes[2] = {64, 256};
    snprintf(path, sizeof path, "/tmp/tsr-c-checkpoint-%ld.safetensors", (long)getpid());
    CHECK_OK(tsr_dict_new(&d));
    for (int k = 0; k < 8; k++) {
        TsrTensor *t = NULL;
        char name[8];
        CHECK_OK(tsr_tensor_empty(2, sizes, TSR_FLOAT, CPU, &t));
        float *p = (float *)tsr_tensor_data(t);
        for (int i = 0; i < 64 * 256; i++) p[i] = (float)(k * 100000 + i);
        snprintf(name, sizeof name, "t%d", k);
        CHECK_OK(tsr_dict_set(d, name, t));
        CHECK_OK(tsr_tensor_decref(t));
    }
    CHECK_OK(tsr_save(d, path, TSR_FORMAT_SAFETENSORS));
    tsr_dict_free(d);
}

static void test_index_then_parts(void) {
    TsrCheckpoint *c = NULL;
    TsrTensor *t = NULL, *rows = NULL;
    size_t i = 99;
    CHECK_OK(tsr_checkpoint_open(path, TSR_FORMAT_AUTO, 0, &c));
    CHECK_EQ(tsr_checkpoint_size(c), 8);
    CHECK_EQ(tsr_checkpoint_format(c), TSR_FORMAT_SAFETENSORS);
    CHECK_OK(tsr_checkpoint_find(c, "t5", &i));
    CHECK(strcmp(tsr_checkpoint_name(c, i), "t5") == 0);
    CHECK_EQ(tsr_checkpoint_ndim(c, i), 2);
    CHECK_EQ(tsr_checkpoint_sizes(c, i)[1], 256);
    CHECK_EQ(tsr_checkpoint_nbytes(c, i), 64 * 256 * 4);
    uint64_t index_bytes = tsr_checkpoint_bytes_read(c);
    CHECK(index_bytes > 0 && index_bytes < 4096);

    CHECK_OK(tsr_checkpoint_load(c, "t5", CPU, 0, &t));
    CHECK_EQ(((const float *)tsr_tensor_data(t))[300], 500300.0f);
    CHECK_OK(tsr_checkpoint_load_rows(c, "t2", 10, 12, CPU, 0, &rows));
    CHECK_EQ(tsr_tensor_numel(rows), 512);
    CHECK_EQ(((const float *)tsr_tensor_data(rows))[0], 200000.0f + 10 * 256);
    CHECK_EQ(tsr_checkpoint_bytes_read(c), index_bytes + 65536 + 2048);
    tsr_checkpoint_close(c);
    /* The tensors outlive the checkpoint. */
    CHECK_EQ(((const float *)tsr_tensor_data(t))[301], 500301.0f);
    CHECK_OK(tsr_tensor_decref(t));
    CHECK_OK(tsr_tensor_decref(rows));
}

typedef struct {
    int calls, finished;
    uint64_t last_done, total;
    pthread_t thread;
} Seen;

static int count(void *user, uint64_t done, uint64_t total, const char *finished) {
    Seen *s = (Seen *)user;
    CHECK(pthread_equal(pthread_self(), s->thread)); /* on the calling thread */
    CHECK(done >= s->last_done && done <= total);
    s->calls++;
    s->last_done = done;
    s->total = total;
    if (finished != NULL) s->finished++;
    return 0;
}

static int cancel_at_once(void *user, uint64_t done, uint64_t total, const char *finished) {
    (void)done, (void)total, (void)finished;
    (*(int *)user)++;
    return 1;
}

static void test_sets_progress_and_cancel(void) {
    TsrCheckpoint *c = NULL;
    TsrTensorDict *d = NULL;
    const char *names[3] = {"t7", "t0", "t3"};
    Seen seen = {0, 0, 0, 0, pthread_self()};
    TsrLoadOptions opts = {sizeof(TsrLoadOptions), 3, 4096, count, &seen};
    CHECK_OK(tsr_checkpoint_open(path, TSR_FORMAT_AUTO, 0, &c));
    CHECK_OK(tsr_checkpoint_load_many_with(c, names, 3, CPU, 0, &opts, &d));
    CHECK_EQ(tsr_dict_size(d), 3);
    CHECK(strcmp(tsr_dict_name(d, 0), "t7") == 0);
    CHECK_EQ(seen.total, 3 * 65536);
    CHECK_EQ(seen.last_done, seen.total);
    CHECK_EQ(seen.calls, 3 * 16); /* 4 KiB chunks */
    CHECK_EQ(seen.finished, 3);
    TsrTensor *t = tsr_dict_get(d, "t3");
    CHECK_EQ(((const float *)tsr_tensor_data(t))[16383], 316383.0f);
    CHECK_OK(tsr_tensor_decref(t));
    tsr_dict_free(d);

    int calls = 0;
    TsrLoadOptions stop = {sizeof(TsrLoadOptions), 1, 4096, cancel_at_once, &calls};
    d = NULL;
    CHECK_STATUS(tsr_checkpoint_load_many_with(c, NULL, 0, CPU, 0, &stop, &d), TSR_ERR_CANCELLED);
    CHECK_MSG_CONTAINS("tsr_checkpoint_load_many_with");
    CHECK(d == NULL);
    CHECK_EQ(calls, 1);
    tsr_checkpoint_close(c);
}

/* A load on another thread that waits, inside its progress callback,
 * until the main thread has closed the checkpoint: it then finishes. */
typedef struct {
    TsrCheckpoint *c;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int started, closed;
    TsrStatus status;
    TsrTensorDict *dict;
} Race;

static int wait_for_close(void *user, uint64_t done, uint64_t total, const char *finished) {
    Race *r = (Race *)user;
    (void)done, (void)total, (void)finished;
    pthread_mutex_lock(&r->lock);
    r->started = 1;
    pthread_cond_broadcast(&r->cond);
    while (!r->closed) pthread_cond_wait(&r->cond, &r->lock);
    pthread_mutex_unlock(&r->lock);
    return 0;
}

static void *loader(void *arg) {
    Race *r = (Race *)arg;
    TsrLoadOptions opts = {sizeof(TsrLoadOptions), 2, 16384, wait_for_close, r};
    r->status = tsr_checkpoint_load_many_with(r->c, NULL, 0, CPU, 0, &opts, &r->dict);
    return NULL;
}

static void test_close_while_a_load_runs(void) {
    Race r;
    pthread_t th;
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.lock, NULL);
    pthread_cond_init(&r.cond, NULL);
    CHECK_OK(tsr_checkpoint_open(path, TSR_FORMAT_AUTO, 0, &r.c));
    CHECK(pthread_create(&th, NULL, loader, &r) == 0);
    pthread_mutex_lock(&r.lock);
    while (!r.started) pthread_cond_wait(&r.cond, &r.lock);
    pthread_mutex_unlock(&r.lock);
    tsr_checkpoint_close(r.c); /* the load holds it until it returns */
    pthread_mutex_lock(&r.lock);
    r.closed = 1;
    pthread_cond_broadcast(&r.cond);
    pthread_mutex_unlock(&r.lock);
    CHECK(pthread_join(th, NULL) == 0);
    CHECK_OK(r.status);
    CHECK_EQ(tsr_dict_size(r.dict), 8);
    TsrTensor *t = tsr_dict_get(r.dict, "t6");
    CHECK_EQ(((const float *)tsr_tensor_data(t))[77], 600077.0f);
    CHECK_OK(tsr_tensor_decref(t));
    tsr_dict_free(r.dict);
    pthread_mutex_destroy(&r.lock);
    pthread_cond_destroy(&r.cond);
}

/* Four threads load different tensors from one checkpoint at once. */
typedef struct {
    TsrCheckpoint *c;
    int k;
    int bad;
} Job;

static void *load_some(void *arg) {
    Job *j = (Job *)arg;
    for (int round = 0; round < 25; round++) {
        char name[8];
        int k = (j->k + round) % 8;
        TsrTensor *t = NULL;
        snprintf(name, sizeof name, "t%d", k);
        if (tsr_checkpoint_load_rows(j->c, name, round, round + 1, CPU, 0, &t) != TSR_OK) {
            j->bad++;
            continue;
        }
        if (((const float *)tsr_tensor_data(t))[5] != (float)(k * 100000 + round * 256 + 5))
            j->bad++;
        tsr_tensor_decref(t);
    }
    return NULL;
}

static void test_threads_share_one_checkpoint(void) {
    TsrCheckpoint *c = NULL;
    pthread_t th[4];
    Job jobs[4];
    CHECK_OK(tsr_checkpoint_open(path, TSR_FORMAT_AUTO, 0, &c));
    for (int i = 0; i < 4; i++) {
        jobs[i].c = c;
        jobs[i].k = i * 2;
        jobs[i].bad = 0;
        CHECK(pthread_create(&th[i], NULL, load_some, &jobs[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        CHECK(pthread_join(th[i], NULL) == 0);
        CHECK_EQ(jobs[i].bad, 0);
    }
    tsr_checkpoint_close(c);
}

int main(void) {
    make_file();
    RUN(test_index_then_parts);
    RUN(test_sets_progress_and_cancel);
    RUN(test_close_while_a_load_runs);
    RUN(test_threads_share_one_checkpoint);
    unlink(path);
    return 0;
}
