/*
 * test_shm.c: shared-memory storages (issue 17): share_memory in place
 * (views, weak references, version counters, the allocator's statistics,
 * 4 threads at once), and two real processes: this program re-executes
 * itself (fork + exec of argv[0] with a child mode) and the child maps
 * the segment by descriptor or opens it by name, checks what the parent
 * wrote and writes back. The segment is gone (/proc/self/fd, /dev/shm)
 * once both released it, and a child killed with SIGKILL leaves nothing.
 * A peer that truncates a named segment does not make a release fault; a
 * read-only storage hands out no descriptor or name, and a read-only
 * descriptor maps into a read-only storage (issue 36).
 * Bad input: each a clear error, no descriptor or segment left.
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tsr_runner.h"
#include "tsr_test.h"

static const char *self_path;

/* Open descriptors of this process that are tessera's memfd segments. */
static int memfds(void) {
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;
    CHECK(d != NULL);
    while ((e = readdir(d)) != NULL) {
        char path[300], link[256];
        ssize_t len;
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        len = readlink(path, link, sizeof link - 1);
        if (len <= 0) continue;
        link[len] = '\0';
        if (strncmp(link, "/memfd:tessera", 14) == 0) n++;
    }
    closedir(d);
    return n;
}

/* Open descriptors of this process. */
static int open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    CHECK(d != NULL);
    while (readdir(d) != NULL) n++;
    closedir(d);
    return n;
}

/* Names in /dev/shm that tessera made in process `pid` (share_name:
 * "/tessera-<pid, 8 hex digits>-..."). Only one process's names count:
 * CTest runs this test's shared and static builds at the same time, and
 * the other one's names come and go meanwhile. */
static int shm_names_of(pid_t pid) {
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    char prefix[32];
    int n = 0;
    if (d == NULL) return 0;
    snprintf(prefix, sizeof prefix, "tessera-%08x-", (unsigned)pid);
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
    closedir(d);
    return n;
}

static int shm_names(void) { return shm_names_of(getpid()); }

/* The foreign segment test_bad_input makes, one per process (the shared
 * and static builds of this test run at the same time). */
static void foreign_name(char *out, size_t n) {
    snprintf(out, n, "/tessera-test-foreign-%08x", (unsigned)getpid());
}

/* At exit, a failed CHECK included: removes every segment this process
 * named, so a failing run leaves nothing in /dev/shm. */
static void unlink_own_names(void) {
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    char prefix[32], name[320];
    if (d == NULL) return;
    snprintf(prefix, sizeof prefix, "tessera-%08x-", (unsigned)getpid());
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            snprintf(name, sizeof name, "/%s", e->d_name);
            shm_unlink(name);
        }
    closedir(d);
    foreign_name(name, sizeof name);
    shm_unlink(name);
}

static bool shm_exists(const char *name) {
    char path[320];
    struct stat st;
    snprintf(path, sizeof path, "/dev/shm%s", name);
    return stat(path, &st) == 0;
}

static TsrDevice cpu(void) {
    TsrDevice d = {TSR_CPU, -1};
    return d;
}

static TsrTensor *floats(int64_t n, float base) {
    TsrTensor *t = NULL;
    int64_t i;
    CHECK_OK(tsr_tensor_empty(1, &n, TSR_FLOAT, cpu(), &t));
    for (i = 0; i < n; i++) ((float *)tsr_tensor_data(t))[i] = (float)i + base;
    return t;
}

/* Runs this program again as `mode` with the arguments (through
 * TESSERA_TEST_RUNNER where set: tsr_runner.h); returns the pid. */
static pid_t spawn(const char *mode, const char *a1, const char *a2, const char *a3) {
    char *argv[16];
    int n = tsr_runner_argv(argv, 10);
    pid_t pid;
    argv[n++] = (char *)self_path;
    argv[n++] = (char *)mode;
    argv[n++] = (char *)a1; /* a NULL ends the list early, as execl's */
    argv[n++] = (char *)a2;
    argv[n++] = (char *)a3;
    argv[n] = NULL;
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        execvp(argv[0], argv);
        _exit(127);
    }
    return pid;
}

static void wait_ok(pid_t pid) {
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st));
    CHECK_EQ(WEXITSTATUS(st), 0);
}

static int no_cloexec(int fd) {
    CHECK(fcntl(fd, F_SETFD, 0) == 0);
    return fd;
}

static void put_byte(int fd, char c) { CHECK(write(fd, &c, 1) == 1); }

static char get_byte(int fd) {
    char c = 0;
    CHECK(read(fd, &c, 1) == 1);
    return c;
}

/* ---- child modes (argv[1]) ---- */

/* child-fd FD N: floats 0..N-1 are there; writes -i. */
static int child_fd(char **argv) {
    int fd = atoi(argv[2]);
    int64_t n = atoll(argv[3]), i;
    TsrStorage *s = NULL;
    float *v;
    CHECK_OK(tsr_storage_from_fd(fd, 0, &s));
    CHECK(close(fd) == 0); /* borrowed: the storage keeps its own */
    CHECK_EQ(tsr_storage_nbytes(s), n * 4);
    CHECK(tsr_storage_is_shared(s));
    v = tsr_storage_data(s);
    for (i = 0; i < n; i++) CHECK(v[i] == (float)i);
    for (i = 0; i < n; i++) v[i] = (float)-i;
    CHECK_OK(tsr_storage_decref(s));
    return 0;
}

/* child-name NAME TO_PARENT FROM_PARENT: opens by name, checks i + 0.5,
 * writes 2i, says 'o', waits for 'g' before releasing. */
static int child_name(char **argv) {
    int to_parent = atoi(argv[3]), from_parent = atoi(argv[4]);
    TsrStorage *s = NULL;
    float *v;
    size_t n, i;
    CHECK_OK(tsr_storage_open_shared(argv[2], &s));
    CHECK(tsr_storage_is_shared(s));
    n = tsr_storage_nbytes(s) / 4;
    v = tsr_storage_data(s);
    for (i = 0; i < n; i++) CHECK(v[i] == (float)i + 0.5f);
    for (i = 0; i < n; i++) v[i] = (float)(2 * i);
    put_byte(to_parent, 'o');
    CHECK(get_byte(from_parent) == 'g');
    CHECK_OK(tsr_storage_decref(s));
    return 0;
}

/* child-hold FD READY: maps the descriptor, says 'r', waits to be killed. */
static int child_hold(char **argv) {
    TsrStorage *s = NULL;
    CHECK_OK(tsr_storage_from_fd(atoi(argv[2]), 0, &s));
    ((volatile char *)tsr_storage_data(s))[0] = 42;
    put_byte(atoi(argv[3]), 'r');
    for (;;) pause();
    return 1;
}

/* child-truncate NAME: opens the segment, shrinks it to 0 bytes through
 * a descriptor of its own (a peer taking the memory away), then releases
 * its storage: no SIGBUS, exit 0. */
static int child_truncate(char **argv) {
    TsrStorage *s = NULL;
    int fd;
    CHECK_OK(tsr_storage_open_shared(argv[2], &s));
    fd = shm_open(argv[2], O_RDWR, 0);
    CHECK(fd >= 0);
    CHECK(ftruncate(fd, 0) == 0);
    CHECK(close(fd) == 0);
    CHECK_OK(tsr_storage_decref(s));
    return 0;
}

/* ---- tests ---- */

static void test_share_memory_in_place(void) {
    int64_t sizes[2] = {64, 64}, i, j;
    int before_fds = memfds();
    TsrAllocator *a = tsr_cpu_allocator();
    TsrAllocatorStats s0, s1, s2;
    TsrTensor *t = NULL, *tr = NULL, *nar = NULL, *view = NULL;
    TsrStorage *st, *locked = NULL;
    TsrWeakStorage *w = NULL;
    uint64_t version;
    char *old, *now;

    CHECK_OK(tsr_allocator_stats(a, &s0));
    CHECK_OK(tsr_tensor_empty(2, sizes, TSR_FLOAT, cpu(), &t));
    CHECK_OK(tsr_allocator_stats(a, &s1));
    CHECK(s1.allocated_bytes >= s0.allocated_bytes + 64 * 64 * 4);
    for (i = 0; i < 64 * 64; i++) ((float *)tsr_tensor_data(t))[i] = (float)i;
    CHECK_OK(tsr_tensor_fill(t, tsr_scalar_float(0))); /* bump the version */
    for (i = 0; i < 64 * 64; i++) ((float *)tsr_tensor_data(t))[i] = (float)i;
    version = tsr_tensor_version(t);
    CHECK_OK(tsr_tensor_transpose(t, 0, 1, &tr));
    CHECK_OK(tsr_tensor_narrow(t, 0, 3, 10, &nar));
    st = tsr_tensor_storage(t);
    CHECK_OK(tsr_tensor_from_storage(st, 100, 1, &sizes[0], NULL, TSR_FLOAT, &view));
    CHECK_OK(tsr_storage_downgrade(st, &w));
    CHECK(!tsr_storage_is_shared(st));
    CHECK(tsr_storage_resizable(st));
    old = tsr_storage_data(st);

    CHECK_OK(tsr_storage_share_memory(st));
    now = tsr_storage_data(st);
    CHECK(now != old);
    CHECK(tsr_storage_is_shared(st));
    CHECK(!tsr_storage_resizable(st));
    CHECK(tsr_storage_allocator(st) == NULL);
    CHECK_EQ(tsr_storage_nbytes(st), 64 * 64 * 4);
    /* every view at the new address, same values */
    CHECK(tsr_tensor_data(t) == (void *)now);
    CHECK(tsr_tensor_data(tr) == (void *)now);
    CHECK(tsr_tensor_data(nar) == (void *)(now + 3 * 64 * 4));
    CHECK(tsr_tensor_data(view) == (void *)(now + 100 * 4));
    for (i = 0; i < 64; i++)
        for (j = 0; j < 64; j++) {
            const float *p = tsr_tensor_data(tr);
            CHECK(p[i * tsr_tensor_stride(tr, 0) + j * tsr_tensor_stride(tr, 1)] ==
                  (float)(j * 64 + i));
        }
    CHECK(((const float *)tsr_tensor_data(nar))[0] == 3 * 64);
    CHECK(((const float *)tsr_tensor_data(view))[5] == 105);
    /* a write through one tensor shows in the others */
    ((float *)tsr_tensor_data(t))[3 * 64 + 1] = -7;
    CHECK(((const float *)tsr_tensor_data(nar))[1] == -7);
    /* the old allocation was freed; versions and weak refs unaffected */
    CHECK_OK(tsr_allocator_stats(a, &s2));
    CHECK_EQ(s2.allocated_bytes, s0.allocated_bytes);
    CHECK_EQ(s2.num_frees, s1.num_frees + 1);
    CHECK_EQ(tsr_tensor_version(t), version);
    CHECK_EQ(tsr_tensor_version(tr), version);
    CHECK_OK(tsr_weak_storage_lock(w, &locked));
    CHECK(locked == st);
    CHECK_OK(tsr_storage_decref(locked));
    CHECK_EQ(memfds(), before_fds + 1);
    /* no-op when already shared; not resizable */
    CHECK_OK(tsr_storage_share_memory(st));
    CHECK(tsr_storage_data(st) == (void *)now);
    CHECK_EQ(memfds(), before_fds + 1);
    CHECK_STATUS(tsr_storage_resize(st, 8), TSR_ERR_NOT_RESIZABLE);

    CHECK_OK(tsr_tensor_decref(view));
    CHECK_OK(tsr_tensor_decref(nar));
    CHECK_OK(tsr_tensor_decref(tr));
    CHECK_OK(tsr_tensor_decref(t));
    CHECK_OK(tsr_storage_decref(st));
    CHECK_EQ(memfds(), before_fds);
    CHECK_OK(tsr_weak_storage_decref(w));
    CHECK_OK(tsr_allocator_decref(a));
}

static pthread_barrier_t barrier;

static void *share_thread(void *arg) {
    pthread_barrier_wait(&barrier);
    return (void *)(intptr_t)tsr_storage_share_memory(arg);
}

static void test_four_threads_one_move(void) {
    int before_fds = memfds(), k;
    TsrAllocator *a = tsr_cpu_allocator();
    TsrAllocatorStats s0, s1;
    TsrStorage *st = NULL;
    pthread_t th[4];
    size_t i, n = 1 << 16;
    CHECK_OK(tsr_storage_new(n, cpu(), true, &st));
    for (i = 0; i < n; i++) ((unsigned char *)tsr_storage_data(st))[i] = (unsigned char)(i * 7);
    CHECK_OK(tsr_allocator_stats(a, &s0));
    CHECK(pthread_barrier_init(&barrier, NULL, 4) == 0);
    for (k = 0; k < 4; k++) CHECK(pthread_create(&th[k], NULL, share_thread, st) == 0);
    for (k = 0; k < 4; k++) {
        void *r = NULL;
        CHECK(pthread_join(th[k], &r) == 0);
        CHECK_EQ((intptr_t)r, TSR_OK);
    }
    pthread_barrier_destroy(&barrier);
    CHECK_OK(tsr_allocator_stats(a, &s1));
    CHECK_EQ(s1.num_frees, s0.num_frees + 1); /* one move: one free */
    CHECK_EQ(memfds(), before_fds + 1);       /* ... into one segment */
    for (i = 0; i < n; i++)
        CHECK(((unsigned char *)tsr_storage_data(st))[i] == (unsigned char)(i * 7));
    CHECK_OK(tsr_storage_decref(st));
    CHECK_EQ(memfds(), before_fds);
    CHECK_OK(tsr_allocator_decref(a));
}

static void test_fd_two_processes(void) {
    int64_t n = 5000, i;
    int before_fds = memfds(), fd = -1;
    char fds[16], ns[24];
    TsrTensor *t = floats(n, 0);
    TsrStorage *st = tsr_tensor_storage(t);
    CHECK_STATUS(tsr_storage_share_fd(st, &fd), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("share_memory");
    CHECK_EQ(fd, -1);
    CHECK_OK(tsr_storage_share_memory(st));
    CHECK_OK(tsr_storage_share_fd(st, &fd));
    CHECK(fd >= 0);
    CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    snprintf(fds, sizeof fds, "%d", no_cloexec(fd));
    snprintf(ns, sizeof ns, "%lld", (long long)n);
    wait_ok(spawn("child-fd", fds, ns, NULL));
    for (i = 0; i < n; i++) CHECK(((const float *)tsr_tensor_data(t))[i] == (float)-i);
    CHECK(close(fd) == 0);
    CHECK_OK(tsr_storage_decref(st));
    CHECK_EQ(memfds(), before_fds + 1);
    CHECK_OK(tsr_tensor_decref(t));
    CHECK_EQ(memfds(), before_fds); /* the segment is gone */
}

static void test_name_two_processes(void) {
    int64_t n = 3000, i;
    int up[2], down[2], names = shm_names();
    char name[TSR_SHM_NAME_SIZE], a[16], b[16];
    TsrTensor *t = floats(n, 0.5f);
    TsrStorage *st = tsr_tensor_storage(t);
    char small[8];
    pid_t pid;
    CHECK_STATUS(tsr_storage_share_name(st, small, sizeof small), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("tsr_storage_share_name: buflen 8 is too small: the name needs 35 bytes");
    CHECK(!tsr_storage_is_shared(st)); /* nothing moved */
    CHECK_OK(tsr_storage_share_name(st, name, sizeof name));
    CHECK_EQ(strlen(name) + 1, TSR_SHM_NAME_SIZE);
    CHECK(strncmp(name, "/tessera-", 9) == 0);
    CHECK(tsr_storage_is_shared(st));
    CHECK(shm_exists(name));
    CHECK_EQ(shm_names(), names + 1);
    CHECK(pipe(up) == 0 && pipe(down) == 0);
    snprintf(a, sizeof a, "%d", up[1]);
    snprintf(b, sizeof b, "%d", down[0]);
    pid = spawn("child-name", name, a, b);
    CHECK(get_byte(up[0]) == 'o');
    for (i = 0; i < n; i++) CHECK(((const float *)tsr_tensor_data(t))[i] == (float)(2 * i));
    /* the parent releases first: the child still holds the name */
    CHECK_OK(tsr_storage_decref(st));
    CHECK_OK(tsr_tensor_decref(t));
    CHECK(shm_exists(name));
    put_byte(down[1], 'g');
    wait_ok(pid);
    CHECK(!shm_exists(name)); /* the last user, in the child, removed it */
    CHECK_EQ(shm_names(), names);
    CHECK_EQ(shm_names_of(pid), 0);
    close(up[0]); close(up[1]); close(down[0]); close(down[1]);
}

static void test_sigkill_leaves_nothing(void) {
    int before_fds = memfds(), names = shm_names(), ready[2], fd = -1, st_ = 0;
    char fds[16], r[16];
    TsrStorage *st = NULL;
    pid_t pid;
    CHECK_OK(tsr_storage_new(1 << 16, cpu(), false, &st));
    CHECK_OK(tsr_storage_fill(st, 0)); /* memcheck: no uninitialised bytes to pwrite */
    CHECK_OK(tsr_storage_share_memory(st));
    CHECK_OK(tsr_storage_share_fd(st, &fd));
    CHECK(pipe(ready) == 0);
    snprintf(fds, sizeof fds, "%d", no_cloexec(fd));
    snprintf(r, sizeof r, "%d", ready[1]);
    pid = spawn("child-hold", fds, r, NULL);
    CHECK(get_byte(ready[0]) == 'r');
    CHECK(((volatile char *)tsr_storage_data(st))[0] == 42);
    CHECK(kill(pid, SIGKILL) == 0);
    CHECK(waitpid(pid, &st_, 0) == pid);
    CHECK(WIFSIGNALED(st_) && WTERMSIG(st_) == SIGKILL);
    CHECK(close(fd) == 0);
    CHECK_OK(tsr_storage_decref(st));
    CHECK_EQ(memfds(), before_fds);
    CHECK_EQ(shm_names(), names);
    CHECK_EQ(shm_names_of(pid), 0);
    close(ready[0]);
    close(ready[1]);
}

/* Issue 36 item 9: a peer that truncates a named segment must not make
 * any holder's release fault (the count of users is not in the segment). */
static void test_truncated_segment_releases(void) {
    int names = shm_names(), fd;
    char name[64];
    TsrTensor *t = floats(4096, 0);
    TsrStorage *st = tsr_tensor_storage(t), *out = NULL;
    CHECK_OK(tsr_storage_share_name(st, name, sizeof name));
    /* a peer process opens it, truncates it and releases its storage */
    wait_ok(spawn("child-truncate", name, NULL, NULL));
    CHECK(shm_exists(name)); /* this process still holds it */
    /* and once more through a second descriptor of this process */
    fd = shm_open(name, O_RDWR, 0);
    CHECK(fd >= 0);
    CHECK(ftruncate(fd, 0) == 0);
    CHECK(close(fd) == 0);
    /* a new opener finds no trailer: refused, nothing mapped */
    CHECK_STATUS(tsr_storage_open_shared(name, &out), TSR_ERR_FORMAT);
    CHECK_MSG_CONTAINS("holds 0 bytes");
    CHECK(out == NULL);
    /* releasing the tensor and the storage touches none of the memory */
    CHECK_OK(tsr_storage_decref(st));
    CHECK_OK(tsr_tensor_decref(t));
    CHECK(!shm_exists(name)); /* the last user removed the name */
    CHECK_EQ(shm_names(), names);
}

/* Issue 36 item 10: a read-only storage hands out no descriptor and no
 * name (each would map it writable), whether it was shared before or not;
 * its bytes stay as they were. */
static void test_read_only_hands_out_nothing(void) {
    int names = shm_names(), fds = open_fds(), fd = -1, i;
    char name[64], again[64] = "";
    TsrStorage *anon = NULL, *named = NULL;
    CHECK_OK(tsr_storage_new(64, cpu(), false, &anon));
    CHECK_OK(tsr_storage_fill(anon, 7));
    CHECK_OK(tsr_storage_share_memory(anon));
    CHECK_OK(tsr_storage_make_read_only(anon));
    CHECK_STATUS(tsr_storage_share_fd(anon, &fd), TSR_ERR_READ_ONLY);
    CHECK_MSG_CONTAINS("tsr_storage_share_fd: the storage of 64 bytes is read-only: share_fd "
                       "would hand out a writable alias");
    CHECK_EQ(fd, -1);
    CHECK_STATUS(tsr_storage_share_name(anon, again, sizeof again), TSR_ERR_READ_ONLY);
    CHECK_MSG_CONTAINS("tsr_storage_share_name: the storage of 64 bytes is read-only");
    CHECK(again[0] == '\0');
    CHECK_OK(tsr_storage_share_memory(anon)); /* shared already: a no-op, nothing handed out */
    CHECK_EQ(shm_names(), names);

    CHECK_OK(tsr_storage_new(64, cpu(), false, &named));
    CHECK_OK(tsr_storage_fill(named, 9));
    CHECK_OK(tsr_storage_share_name(named, name, sizeof name));
    CHECK_OK(tsr_storage_make_read_only(named));
    CHECK_STATUS(tsr_storage_share_name(named, again, sizeof again), TSR_ERR_READ_ONLY);
    CHECK(again[0] == '\0');
    CHECK_STATUS(tsr_storage_share_fd(named, &fd), TSR_ERR_READ_ONLY);
    CHECK_EQ(fd, -1);
    for (i = 0; i < 64; i++) {
        CHECK(((const unsigned char *)tsr_storage_data(anon))[i] == 7);
        CHECK(((const unsigned char *)tsr_storage_data(named))[i] == 9);
    }
    CHECK_OK(tsr_storage_decref(anon));
    CHECK_OK(tsr_storage_decref(named));
    CHECK(!shm_exists(name));
    CHECK_EQ(shm_names(), names);
    CHECK_EQ(open_fds(), fds);
}

/* A descriptor opened read-only maps read-only into a read-only storage
 * (it failed in mmap before): the receiving side of a read-only share. */
static void test_read_only_descriptor(void) {
    int fds = open_fds(), fd = -1, ro, fd2 = -1;
    char path[64];
    TsrStorage *st = NULL, *r = NULL;
    CHECK_OK(tsr_storage_new(64, cpu(), false, &st));
    CHECK_OK(tsr_storage_fill(st, 5));
    CHECK_OK(tsr_storage_share_memory(st));
    CHECK_OK(tsr_storage_share_fd(st, &fd));
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ro = open(path, O_RDONLY | O_CLOEXEC);
    CHECK(ro >= 0);
    CHECK_OK(tsr_storage_from_fd(ro, 0, &r));
    CHECK(tsr_storage_is_read_only(r));
    CHECK(tsr_storage_is_shared(r));
    CHECK(((const unsigned char *)tsr_storage_data(r))[63] == 5);
    CHECK_STATUS(tsr_storage_fill(r, 1), TSR_ERR_READ_ONLY);
    CHECK_STATUS(tsr_storage_share_fd(r, &fd2), TSR_ERR_READ_ONLY);
    CHECK_EQ(fd2, -1);
    ((unsigned char *)tsr_storage_data(st))[63] = 6; /* the writer's change shows */
    CHECK(((const unsigned char *)tsr_storage_data(r))[63] == 6);
    CHECK(close(ro) == 0);
    CHECK(close(fd) == 0);
    CHECK_OK(tsr_storage_decref(r));
    CHECK_OK(tsr_storage_decref(st));
    CHECK_EQ(open_fds(), fds);
}

static void test_bad_input(void) {
    int fds = open_fds(), names = shm_names(), p[2], fd = -1;
    TsrStorage *out = NULL, *st = NULL;
    char longname[300], buf[64], foreign[64];
    CHECK_STATUS(tsr_storage_from_fd(-1, 0, &out), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("tsr_storage_from_fd: descriptor -1");
    CHECK_STATUS(tsr_storage_from_fd(4000, 0, &out), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("descriptor 4000 is not open");
    CHECK(pipe(p) == 0);
    CHECK_STATUS(tsr_storage_from_fd(p[0], 0, &out), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("is a pipe");
    close(p[0]);
    close(p[1]);
    CHECK(out == NULL);
    CHECK_STATUS(tsr_storage_open_shared("/tessera-does-not-exist", &out), TSR_ERR_IO);
    CHECK_MSG_CONTAINS("tsr_storage_open_shared: no shared-memory segment is named \"/tessera-does-not-exist\"");
    memset(longname, 'x', sizeof longname - 1);
    longname[0] = '/';
    longname[sizeof longname - 1] = '\0';
    CHECK_STATUS(tsr_storage_open_shared(longname, &out), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("name of 298 bytes is too long");
    /* a segment someone else made */
    foreign_name(foreign, sizeof foreign);
    fd = shm_open(foreign, O_RDWR | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0);
    CHECK(ftruncate(fd, 100) == 0);
    CHECK_STATUS(tsr_storage_open_shared(foreign, &out), TSR_ERR_FORMAT);
    CHECK_MSG_CONTAINS("not a segment made by share_name");
    close(fd);
    CHECK(shm_unlink(foreign) == 0);
    /* nbytes larger than the segment */
    CHECK_OK(tsr_storage_new(10, cpu(), true, &st));
    CHECK_OK(tsr_storage_fill(st, 0));
    CHECK_OK(tsr_storage_share_memory(st));
    CHECK_OK(tsr_storage_share_fd(st, &fd));
    CHECK_STATUS(tsr_storage_from_fd(fd, 11, &out), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("nbytes 11 is larger than descriptor");
    CHECK(close(fd) == 0);
    CHECK_OK(tsr_storage_decref(st));
    CHECK(out == NULL);
    /* NULLs */
    CHECK_STATUS(tsr_storage_share_memory(NULL), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_storage_share_name(NULL, buf, sizeof buf), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_storage_open_shared(NULL, &out), TSR_ERR_NULL_POINTER);
    CHECK(!tsr_storage_is_shared(NULL));
    /* nothing left behind */
    CHECK_EQ(open_fds(), fds);
    CHECK_EQ(shm_names(), names);
}

int main(int argc, char **argv) {
    self_path = argv[0];
    if (argc >= 4 && strcmp(argv[1], "child-fd") == 0) return child_fd(argv);
    if (argc >= 5 && strcmp(argv[1], "child-name") == 0) return child_name(argv);
    if (argc >= 4 && strcmp(argv[1], "child-hold") == 0) return child_hold(argv);
    if (argc >= 3 && strcmp(argv[1], "child-truncate") == 0) return child_truncate(argv);
    atexit(unlink_own_names);
    RUN(test_share_memory_in_place);
    RUN(test_four_threads_one_move);
    RUN(test_fd_two_processes);
    RUN(test_name_two_processes);
    RUN(test_sigkill_leaves_nothing);
    RUN(test_truncated_segment_releases);
    RUN(test_read_only_hands_out_nothing);
    RUN(test_read_only_descriptor);
    RUN(test_bad_input);
    return 0;
}
