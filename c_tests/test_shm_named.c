/*
 * test_shm_named.c: named shared-memory storages through the C ABI on
 * every platform (POSIX shm on Unix, named file mappings on Windows:
 * docs/PLATFORMS.md). This program runs itself again as a child with the
 * name (fork + exec on POSIX, _spawnv on Windows); the child opens the
 * segment, checks what the parent wrote and writes back, and the parent
 * sees it. The name stays while any storage over it lives, in any
 * process, and goes with the last. Read-only storages hand out no name;
 * on Windows the descriptor calls are refused naming the platform.
 * test_shm.c covers the POSIX-only rest (descriptors, SIGKILL, /dev/shm).
 */
#if !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L
#endif

#include "tsr_test.h"

#if defined(_WIN32)
#include <process.h>
#else
#include "tsr_runner.h"
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

static const char *self_path;

static TsrDevice cpu(void) {
    TsrDevice d = {TSR_CPU, -1};
    return d;
}

/* Runs this program again as "child NAME" and waits: its exit status.
 * On POSIX through TESSERA_TEST_RUNNER where set (tsr_runner.h). */
static int run_child(const char *name) {
#if defined(_WIN32)
    /* _spawnv joins the arguments with spaces: the path is quoted. */
    static char quoted[1024];
    const char *argv[4];
    CHECK(strlen(self_path) + 3 < sizeof quoted);
    snprintf(quoted, sizeof quoted, "\"%s\"", self_path);
    argv[0] = quoted;
    argv[1] = "child";
    argv[2] = name;
    argv[3] = NULL;
    return (int)_spawnv(_P_WAIT, self_path, argv);
#else
    char *argv[16];
    int n = tsr_runner_argv(argv, 12), st = 0;
    pid_t pid;
    argv[n++] = (char *)self_path;
    argv[n++] = (char *)"child";
    argv[n++] = (char *)name;
    argv[n] = NULL;
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        execvp(argv[0], argv);
        _exit(127);
    }
    CHECK(waitpid(pid, &st, 0) == pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
#endif
}

/* child NAME: opens the segment, checks byte i == i % 251, writes 255 - that. */
static int child(const char *name) {
    TsrStorage *s = NULL;
    unsigned char *b;
    size_t i, n;
    CHECK_OK(tsr_storage_open_shared(name, &s));
    CHECK(tsr_storage_is_shared(s));
    n = tsr_storage_nbytes(s);
    CHECK_EQ(n, 5000);
    b = tsr_storage_data(s);
    for (i = 0; i < n; i++) CHECK_EQ(b[i], i % 251);
    for (i = 0; i < n; i++) b[i] = (unsigned char)(255 - i % 251);
    CHECK_OK(tsr_storage_decref(s));
    return 0;
}

static void test_two_processes_one_name(void) {
    TsrStorage *st = NULL, *again = NULL, *gone = NULL;
    char name[TSR_SHM_NAME_SIZE];
    unsigned char *b;
    size_t i;
    CHECK_OK(tsr_storage_new(5000, cpu(), false, &st));
    b = tsr_storage_data(st);
    for (i = 0; i < 5000; i++) b[i] = (unsigned char)(i % 251);
    CHECK_OK(tsr_storage_share_name(st, name, sizeof name));
    CHECK_EQ(strlen(name) + 1, TSR_SHM_NAME_SIZE);
    CHECK(strncmp(name, "/tessera-", 9) == 0);
    CHECK_EQ(run_child(name), 0);
    b = tsr_storage_data(st); /* moved into the segment by share_name */
    for (i = 0; i < 5000; i++) CHECK_EQ(b[i], 255 - i % 251);
    /* The child released its storage; this one keeps the name. */
    CHECK_OK(tsr_storage_open_shared(name, &again));
    CHECK(tsr_storage_data(again) != tsr_storage_data(st)); /* a second view */
    CHECK_EQ(((unsigned char *)tsr_storage_data(again))[4999], 255 - 4999 % 251);
    CHECK_OK(tsr_storage_decref(st));
    CHECK_OK(tsr_storage_decref(again));
    CHECK_STATUS(tsr_storage_open_shared(name, &gone), TSR_ERR_IO);
    CHECK_MSG_CONTAINS("tsr_storage_open_shared: no shared-memory segment is named");
    CHECK(gone == NULL);
}

static void test_read_only_and_refusals(void) {
    TsrStorage *st = NULL;
    char name[TSR_SHM_NAME_SIZE];
    CHECK_OK(tsr_storage_new(64, cpu(), false, &st));
    CHECK_OK(tsr_storage_make_read_only(st));
    CHECK_STATUS(tsr_storage_share_name(st, name, sizeof name), TSR_ERR_READ_ONLY);
    CHECK_MSG_CONTAINS("tsr_storage_share_name: the storage of 64 bytes is read-only");
    CHECK_OK(tsr_storage_decref(st));
#if defined(_WIN32)
    {
        int fd = -1;
        TsrStorage *out = NULL;
        CHECK_OK(tsr_storage_new(64, cpu(), false, &st));
        CHECK_STATUS(tsr_storage_share_memory(st), TSR_ERR_UNSUPPORTED);
        CHECK_MSG_CONTAINS("tsr_storage_share_memory: share_memory is not supported on Windows");
        CHECK(!tsr_storage_is_shared(st));
        CHECK_OK(tsr_storage_share_name(st, name, sizeof name));
        CHECK_STATUS(tsr_storage_share_fd(st, &fd), TSR_ERR_UNSUPPORTED);
        CHECK_STATUS(tsr_storage_from_fd(3, 0, &out), TSR_ERR_UNSUPPORTED);
        CHECK(out == NULL);
        CHECK_OK(tsr_storage_decref(st));
    }
#endif
}

int main(int argc, char **argv) {
    self_path = argv[0];
    if (argc >= 3 && strcmp(argv[1], "child") == 0) return child(argv[2]);
    RUN(test_two_processes_one_name);
    RUN(test_read_only_and_refusals);
    return 0;
}
