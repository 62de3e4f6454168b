/*
 * test_fork.c: tessera keeps working in a child made by fork() (issue 22):
 * after the thread pool ran (a quiet fork), and while two threads
 * allocate, free, use the caching layer and run parallel kernels (20 busy
 * forks). Every child runs a parallel add and a sum (checking the values),
 * allocates through the CPU allocator and the caching layer, reads the
 * statistics, and exits 0; an alarm turns a hang into a failure (the
 * parent sees SIGALRM). Each child prints the time of its first parallel
 * add (clock_gettime around it).
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tsr_test.h"

/* Seconds a child may run (generous: under valgrind a child is ~50x slower). */
#define CHILD_ALARM_S 60

/* The tensors (4M floats for the quiet fork, as in the report) and
 * the busy forks. Under valgrind (.ci/valgrind.sh sets
 * TESSERA_C_TEST_VALGRIND) a debug build adds 4M floats in about a minute:
 * there, 64K floats (still two chunks of the kernels' 32K grain, so the
 * add is parallel) and 8 busy forks. */
static int64_t quiet_n = (int64_t)4 << 20;
static int64_t busy_n = (int64_t)1 << 18;
static int busy_forks = 20;

static TsrDevice cpu(void) {
    TsrDevice d = {TSR_CPU, -1};
    return d;
}

static TsrTensor *filled(int64_t n, double v) {
    TsrTensor *t = NULL;
    CHECK_OK(tsr_tensor_empty(1, &n, TSR_FLOAT, cpu(), &t));
    CHECK_OK(tsr_tensor_fill(t, tsr_scalar_float(v)));
    return t;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* a = 1.5 and b = 2.25 everywhere: checks a + b and sum(b); returns the
 * add's time in milliseconds. */
static double add_and_sum(const TsrTensor *a, const TsrTensor *b) {
    TsrTensor *c = NULL, *s = NULL;
    int64_t n = tsr_tensor_numel(a), idx[] = {0, 1, n / 2, n / 2 + 1, n - 1};
    double t0, ms, want = 2.25 * (double)n, got;
    size_t i;
    t0 = now_ms();
    CHECK_OK(tsr_add(NULL, a, b, tsr_scalar_int(1), &c));
    ms = now_ms() - t0;
    for (i = 0; i < sizeof idx / sizeof idx[0]; i++)
        CHECK(((const float *)tsr_tensor_data(c))[idx[i]] == 3.75f);
    CHECK_OK(tsr_sum(b, 0, NULL, false, &s));
    got = *(const float *)tsr_tensor_data(s);
    CHECK(got > want * (1 - 1e-6) && got < want * (1 + 1e-6));
    CHECK_OK(tsr_tensor_decref(c));
    CHECK_OK(tsr_tensor_decref(s));
    return ms;
}

static void alloc_free(TsrAllocator *a, size_t n) {
    TsrDataPtr p;
    CHECK_OK(tsr_allocator_allocate(a, n, &p));
    CHECK(p.data != NULL);
    ((volatile char *)p.data)[n - 1] = 1;
    tsr_data_ptr_free(&p);
}

static void *child_thread(void *arg) {
    TsrAllocator *cpu_alloc = (TsrAllocator *)arg;
    alloc_free(cpu_alloc, 1000);
    return NULL;
}

/* What every child does; `at_fork` (or NULL) are the parent's CPU
 * allocator statistics at the fork, which the child must see unchanged. */
static double child_work(const TsrTensor *a, const TsrTensor *b, TsrAllocator *cached,
                         const TsrAllocatorStats *at_fork, double *second) {
    TsrAllocator *cpu_alloc = tsr_cpu_allocator();
    TsrAllocatorStats s0, s1;
    TsrCachingStats c0, c1;
    pthread_t th;
    double first;
    CHECK_OK(tsr_allocator_stats(cpu_alloc, &s0));
    if (at_fork != NULL) {
        CHECK_EQ(s0.allocated_bytes, at_fork->allocated_bytes);
        CHECK_EQ(s0.num_allocs, at_fork->num_allocs);
        CHECK_EQ(s0.num_frees, at_fork->num_frees);
    }
    CHECK_EQ(tsr_get_num_threads(), 2);
    first = add_and_sum(a, b);
    *second = add_and_sum(a, b);

    alloc_free(cpu_alloc, 4096);
    alloc_free(cpu_alloc, (size_t)3 << 20);
    CHECK_OK(tsr_allocator_stats(cpu_alloc, &s1));
    CHECK_EQ(s1.allocated_bytes, s0.allocated_bytes);
    CHECK(s1.num_allocs >= s0.num_allocs + 2 + 4); /* + the kernels' outputs */

    memset(&c0, 0, sizeof c0);
    c0.struct_size = sizeof c0;
    c1 = c0;
    CHECK_OK(tsr_caching_allocator_stats(cached, &c0));
    alloc_free(cached, 512);
    alloc_free(cached, (size_t)2 << 20);
    CHECK_OK(tsr_caching_allocator_stats(cached, &c1));
    CHECK_EQ(c1.all.active_blocks.current, c0.all.active_blocks.current);
    CHECK_EQ(c1.all.num_allocs, c0.all.num_allocs + 2);
    CHECK_OK(tsr_caching_allocator_empty_cache(cached));

    /* A thread of the child allocates too. */
    CHECK(pthread_create(&th, NULL, child_thread, cpu_alloc) == 0);
    CHECK(pthread_join(th, NULL) == 0);
    CHECK_OK(tsr_allocator_decref(cpu_alloc));
    return first;
}

/* Forks; the child runs child_work under an alarm, prints its first add's
 * time and _exits 0 (a failed check exits 1). The parent checks the
 * child's status. */
static void fork_and_check(const char *label, const TsrTensor *a, const TsrTensor *b,
                           TsrAllocator *cached, const TsrAllocatorStats *at_fork) {
    pid_t pid;
    int status = 0;
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        double ms, second = 0;
        alarm(CHILD_ALARM_S);
        ms = child_work(a, b, cached, at_fork, &second);
        printf("    %s: child's first parallel add %.2f ms (second %.2f ms)\n", label, ms,
               second);
        fflush(stdout);
        _exit(0);
    }
    CHECK(waitpid(pid, &status, 0) == pid);
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "%s: child killed by signal %d%s\n", label, WTERMSIG(status),
                WTERMSIG(status) == SIGALRM ? " (the alarm: it hung)" : "");
    }
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
}

static void test_quiet_fork_after_the_pool_ran(void) {
    TsrTensor *a, *b;
    TsrAllocator *cpu_alloc = tsr_cpu_allocator(), *cached = NULL;
    TsrAllocatorStats at_fork;
    TsrDataPtr kept;
    tsr_set_num_threads(2);
    a = filled(quiet_n, 1.5);
    b = filled(quiet_n, 2.25);
    CHECK_OK(tsr_caching_allocator_new(cpu_alloc, NULL, &cached));
    CHECK_OK(tsr_allocator_allocate(cached, 1024, &kept));
    /* The pool starts here. */
    printf("    quiet fork: parent's first parallel add %.2f ms\n", add_and_sum(a, b));
    CHECK_OK(tsr_allocator_stats(cpu_alloc, &at_fork));
    fork_and_check("quiet fork", a, b, cached, &at_fork);
    /* The parent is unaffected. */
    add_and_sum(a, b);
    tsr_data_ptr_free(&kept);
    CHECK_OK(tsr_allocator_decref(cached));
    CHECK_OK(tsr_allocator_decref(cpu_alloc));
    CHECK_OK(tsr_tensor_decref(a));
    CHECK_OK(tsr_tensor_decref(b));
}

typedef struct {
    const TsrTensor *a, *b;
    TsrAllocator *cpu, *cached;
    volatile int stop; /* read under `lock` */
    pthread_mutex_t lock;
    long rounds;
    int failed;
} Busy;

static int busy_stopped(Busy *w) {
    int s;
    pthread_mutex_lock(&w->lock);
    s = w->stop;
    w->rounds++;
    pthread_mutex_unlock(&w->lock);
    return s;
}

static void *busy_thread(void *arg) {
    Busy *w = (Busy *)arg;
    static const size_t sizes[] = {64, 700, 4096, 100000, (size_t)3 << 20};
    long i = 0;
    while (!busy_stopped(w)) {
        TsrDataPtr held[5], held_c[5];
        size_t k;
        for (k = 0; k < 5; k++) {
            CHECK_OK(tsr_allocator_allocate(w->cpu, sizes[k] + (size_t)(i % 64), &held[k]));
            CHECK_OK(tsr_allocator_allocate(w->cached, sizes[k] + (size_t)(i % 512), &held_c[k]));
        }
        for (k = 0; k < 5; k++) {
            tsr_data_ptr_free(&held[k]);
            tsr_data_ptr_free(&held_c[k]);
        }
        add_and_sum(w->a, w->b);
        if (i % 16 == 0) {
            pthread_t th;
            CHECK_OK(tsr_caching_allocator_empty_cache(w->cached));
            /* A short-lived thread: its counter shard goes back at exit. */
            CHECK(pthread_create(&th, NULL, child_thread, w->cpu) == 0);
            CHECK(pthread_join(th, NULL) == 0);
        }
        i++;
    }
    return NULL;
}

static long busy_rounds(Busy *w) {
    long r;
    pthread_mutex_lock(&w->lock);
    r = w->rounds;
    pthread_mutex_unlock(&w->lock);
    return r;
}

static void test_busy_forks(void) {
    Busy w;
    pthread_t th[2];
    int k;
    memset(&w, 0, sizeof w);
    pthread_mutex_init(&w.lock, NULL);
    tsr_set_num_threads(2);
    w.a = filled(busy_n, 1.5);
    w.b = filled(busy_n, 2.25);
    w.cpu = tsr_cpu_allocator();
    CHECK_OK(tsr_caching_allocator_new(w.cpu, NULL, &w.cached));
    for (k = 0; k < 2; k++) CHECK(pthread_create(&th[k], NULL, busy_thread, &w) == 0);
    for (k = 0; k < busy_forks; k++) {
        char label[32];
        long start = busy_rounds(&w);
        struct timespec pause = {0, 0};
        double t0 = now_ms();
        while (busy_rounds(&w) < start + 4 && now_ms() - t0 < 5000) {
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
        pause.tv_nsec = 300000L * (k % 7);
        nanosleep(&pause, NULL);
        snprintf(label, sizeof label, "busy fork %d", k);
        fork_and_check(label, w.a, w.b, w.cached, NULL);
    }
    pthread_mutex_lock(&w.lock);
    w.stop = 1;
    pthread_mutex_unlock(&w.lock);
    for (k = 0; k < 2; k++) CHECK(pthread_join(th[k], NULL) == 0);
    printf("    busy forks: the threads ran %ld rounds meanwhile\n", w.rounds);
    CHECK_OK(tsr_allocator_decref(w.cached));
    CHECK_OK(tsr_allocator_decref(w.cpu));
    CHECK_OK(tsr_tensor_decref((TsrTensor *)w.a));
    CHECK_OK(tsr_tensor_decref((TsrTensor *)w.b));
    pthread_mutex_destroy(&w.lock);
}

/* Whether .ci/arm.sh runs this under qemu-user (TESSERA_TEST_QEMU_USER set,
 * not "0"). */
static int under_qemu_user(void) {
    const char *q = getenv("TESSERA_TEST_QEMU_USER");
    return q != NULL && q[0] != '\0' && strcmp(q, "0") != 0;
}

int main(void) {
    const char *vg = getenv("TESSERA_C_TEST_VALGRIND");
    if (vg != NULL && vg[0] != '\0' && strcmp(vg, "0") != 0) {
        quiet_n = busy_n = (int64_t)1 << 16;
        busy_forks = 8;
    }
    /* A fork of a process with threads (the pool's, idle or busy) whose
     * child then starts threads crashes qemu-user itself: an assertion in
     * its cpu_exec (qemu 7.2, "cpu == current_cpu"). Both tests are such
     * forks: under emulation (.ci/arm.sh sets TESSERA_TEST_QEMU_USER) they
     * are skipped, saying so, and left for real Arm hardware
     * (docs/PLATFORMS.md). */
    if (under_qemu_user()) {
        printf("skipped test_quiet_fork_after_the_pool_ran, test_busy_forks: forks with "
               "threads crash qemu-user (TESSERA_TEST_QEMU_USER)\n");
        return 0;
    }
    RUN(test_quiet_fork_after_the_pool_ran);
    RUN(test_busy_forks);
    return 0;
}
