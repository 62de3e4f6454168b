/* File-backed storages (tsr_storage_from_file, tsr_storage_filename,
 * tsr_storage_flush) and a storage's DataPtr (tsr_storage_data_ptr,
 * tsr_storage_set_data_ptr). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "dlpack_fixture/dlpack/dlpack.h"
#include "tsr_test.h"

static char dir[64];

static const char *path_of(const char *name) {
    static char buf[160];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

static void write_file(const char *path, const void *bytes, size_t n) {
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, bytes, n) == (ssize_t)n);
    CHECK(close(fd) == 0);
}

/* The file's bytes through read(2), into buf (at most cap); returns the
 * count. */
static size_t read_file(const char *path, void *buf, size_t cap) {
    int fd = open(path, O_RDONLY);
    ssize_t n;
    CHECK(fd >= 0);
    n = read(fd, buf, cap);
    CHECK(n >= 0);
    close(fd);
    return (size_t)n;
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static void test_read_only_mode(void) {
    const char *p = path_of("ro.bin");
    float vals[4] = {1.5f, 2.5f, 3.5f, 4.5f};
    TsrStorage *s = NULL;
    TsrTensor *t = NULL;
    int64_t n = 4;
    write_file(p, vals, sizeof vals);
    CHECK_OK(tsr_storage_from_file(p, TSR_FILE_READ_ONLY, 0, &s));
    CHECK_EQ(tsr_storage_nbytes(s), 16);
    CHECK(tsr_storage_is_read_only(s));
    CHECK(!tsr_storage_resizable(s));
    CHECK(tsr_storage_allocator(s) == NULL);
    CHECK(tsr_storage_filename(s) == NULL); /* only SHARED storages have one */
    CHECK_OK(tsr_storage_flush(s));         /* a no-op */
    CHECK_OK(tsr_tensor_from_storage(s, 0, 1, &n, NULL, TSR_FLOAT, &t));
    CHECK(((const float *)tsr_tensor_data(t))[3] == 4.5f);
    CHECK(tsr_tensor_is_read_only(t));
    CHECK_STATUS(tsr_tensor_fill(t, tsr_scalar_float(0)), TSR_ERR_READ_ONLY);
    CHECK_MSG_CONTAINS("tsr_tensor_fill");
    CHECK_OK(tsr_storage_decref(s));
    /* the tensor keeps the mapping alive */
    CHECK(((const float *)tsr_tensor_data(t))[0] == 1.5f);
    CHECK_OK(tsr_tensor_decref(t));
    CHECK(unlink(p) == 0);
}

static void test_private_mode(void) {
    const char *p = path_of("private.bin");
    unsigned char bytes[8] = {1, 2, 3, 4, 5, 6, 7, 8}, back[16];
    TsrStorage *s = NULL;
    write_file(p, bytes, sizeof bytes);
    CHECK_OK(tsr_storage_from_file(p, TSR_FILE_PRIVATE, 0, &s));
    CHECK(!tsr_storage_is_read_only(s));
    CHECK(tsr_storage_filename(s) == NULL);
    CHECK_EQ(((unsigned char *)tsr_storage_data(s))[7], 8);
    CHECK_OK(tsr_storage_fill(s, 0xAB));
    CHECK_OK(tsr_storage_flush(s));
    CHECK_EQ(((unsigned char *)tsr_storage_data(s))[0], 0xAB);
    CHECK_OK(tsr_storage_decref(s));
    /* reopened: the file never changed */
    CHECK_EQ(read_file(p, back, sizeof back), 8);
    CHECK(memcmp(back, bytes, 8) == 0);
    CHECK_OK(tsr_storage_from_file(p, TSR_FILE_PRIVATE, 0, &s));
    CHECK_EQ(((unsigned char *)tsr_storage_data(s))[0], 1);
    CHECK_OK(tsr_storage_decref(s));
    CHECK(unlink(p) == 0);
}

static void test_shared_mode(void) {
    const char *p = path_of("shared.bin");
    unsigned char back[32];
    TsrStorage *s = NULL, *second = NULL;
    CHECK(!exists(p));
    /* created (mode 0600) at nbytes, zero-filled */
    CHECK_OK(tsr_storage_from_file(p, TSR_FILE_SHARED, 16, &s));
    {
        struct stat st;
        CHECK(stat(p, &st) == 0);
        CHECK_EQ(st.st_size, 16);
        CHECK_EQ(st.st_mode & 0777, 0600);
    }
    CHECK(strcmp(tsr_storage_filename(s), p) == 0);
    CHECK(!tsr_storage_is_read_only(s));
    CHECK_EQ(((unsigned char *)tsr_storage_data(s))[15], 0);
    /* a second mapping sees the writes at once */
    CHECK_OK(tsr_storage_from_file(p, TSR_FILE_SHARED, 0, &second));
    CHECK_OK(tsr_storage_fill(s, 0x5A));
    CHECK_EQ(((unsigned char *)tsr_storage_data(second))[9], 0x5A);
    /* and read() after flush */
    CHECK_OK(tsr_storage_flush(s));
    CHECK_EQ(read_file(p, back, sizeof back), 16);
    CHECK_EQ(back[0], 0x5A);
    CHECK_EQ(back[15], 0x5A);
    CHECK_OK(tsr_storage_decref(second));
    CHECK_OK(tsr_storage_decref(s));
    /* extended when shorter than nbytes; old bytes kept */
    CHECK_OK(tsr_storage_from_file(p, TSR_FILE_SHARED, 24, &s));
    CHECK_EQ(((unsigned char *)tsr_storage_data(s))[0], 0x5A);
    CHECK_EQ(((unsigned char *)tsr_storage_data(s))[20], 0);
    CHECK_OK(tsr_storage_decref(s));
    CHECK_EQ(read_file(p, back, sizeof back), 24);
    CHECK(unlink(p) == 0);
}

static void test_sizes(void) {
    const char *p = path_of("sizes.bin");
    unsigned char bytes[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, back[16];
    TsrStorage *s = NULL;
    TsrFileMode modes[3] = {TSR_FILE_PRIVATE, TSR_FILE_SHARED, TSR_FILE_READ_ONLY};
    int i;
    write_file(p, bytes, sizeof bytes);
    for (i = 0; i < 3; i++) {
        /* 0: the file's size */
        CHECK_OK(tsr_storage_from_file(p, modes[i], 0, &s));
        CHECK_EQ(tsr_storage_nbytes(s), 10);
        CHECK_OK(tsr_storage_decref(s));
        /* smaller: a prefix; the file keeps its size */
        CHECK_OK(tsr_storage_from_file(p, modes[i], 4, &s));
        CHECK_EQ(tsr_storage_nbytes(s), 4);
        CHECK_EQ(((unsigned char *)tsr_storage_data(s))[3], 3);
        CHECK_OK(tsr_storage_decref(s));
        CHECK_EQ(read_file(p, back, sizeof back), 10);
    }
    /* larger: refused for PRIVATE and READ_ONLY, naming both sizes */
    CHECK_STATUS(tsr_storage_from_file(p, TSR_FILE_PRIVATE, 11, &s), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("tsr_storage_from_file");
    CHECK_MSG_CONTAINS("nbytes 11 is larger than");
    CHECK_MSG_CONTAINS("(10 bytes)");
    CHECK_STATUS(tsr_storage_from_file(p, TSR_FILE_READ_ONLY, 64, &s), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("READ_ONLY");
    CHECK_EQ(read_file(p, back, sizeof back), 10);
    /* an empty file: a 0-byte storage */
    write_file(p, bytes, 0);
    CHECK_OK(tsr_storage_from_file(p, TSR_FILE_READ_ONLY, 0, &s));
    CHECK_EQ(tsr_storage_nbytes(s), 0);
    CHECK_OK(tsr_storage_decref(s));
    CHECK(unlink(p) == 0);
}

/* A sparse 5 GiB SHARED file: both ends written through the mapping. */
static void test_five_gib_sparse(void) {
    const char *p = path_of("big.bin");
    size_t n = (size_t)5 << 30;
    TsrStorage *s = NULL;
    unsigned char *d;
    unsigned char last = 0;
    int fd;
    struct stat st;
    CHECK_OK(tsr_storage_from_file(p, TSR_FILE_SHARED, n, &s));
    CHECK_EQ(tsr_storage_nbytes(s), n);
    d = (unsigned char *)tsr_storage_data(s);
    d[0] = 0x11;
    d[n - 1] = 0x22;
    CHECK_OK(tsr_storage_flush(s));
    CHECK_OK(tsr_storage_decref(s));
    CHECK(stat(p, &st) == 0);
    CHECK_EQ(st.st_size, (long long)n);
    CHECK(st.st_blocks * 512 < (1 << 24)); /* sparse: two pages, not 5 GiB */
    fd = open(p, O_RDONLY);
    CHECK(fd >= 0);
    CHECK(pread(fd, &last, 1, (off_t)(n - 1)) == 1);
    CHECK_EQ(last, 0x22);
    CHECK(pread(fd, &last, 1, 0) == 1);
    CHECK_EQ(last, 0x11);
    close(fd);
    /* mapped again read-only, past 4 GiB */
    CHECK_OK(tsr_storage_from_file(p, TSR_FILE_READ_ONLY, 0, &s));
    CHECK_EQ(((unsigned char *)tsr_storage_data(s))[n - 1], 0x22);
    CHECK_OK(tsr_storage_decref(s));
    CHECK(unlink(p) == 0);
}

static void test_bad_input(void) {
    const char *missing = path_of("missing.bin");
    TsrStorage *s = (TsrStorage *)0x10; /* untouched on error */
    char small[4] = {0};
    CHECK_STATUS(tsr_storage_from_file(missing, TSR_FILE_READ_ONLY, 0, &s), TSR_ERR_IO);
    CHECK_MSG_CONTAINS("missing.bin");
    CHECK_MSG_CONTAINS("No such file");
    CHECK_STATUS(tsr_storage_from_file(missing, TSR_FILE_PRIVATE, 0, &s), TSR_ERR_IO);
    CHECK(!exists(missing));
    CHECK_STATUS(tsr_storage_from_file(dir, TSR_FILE_READ_ONLY, 0, &s), TSR_ERR_IO);
    CHECK_MSG_CONTAINS("directory");
    CHECK_STATUS(tsr_storage_from_file(dir, TSR_FILE_SHARED, 0, &s), TSR_ERR_IO);
    CHECK_STATUS(tsr_storage_from_file(missing, 7, 0, &s), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("mode 7");
    CHECK_STATUS(tsr_storage_from_file(NULL, TSR_FILE_SHARED, 0, &s), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_storage_from_file(missing, TSR_FILE_SHARED, 0, NULL), TSR_ERR_NULL_POINTER);
    CHECK(!exists(missing));
    /* nbytes overflow: refused before the file is created */
    CHECK_STATUS(tsr_storage_from_file(missing, TSR_FILE_SHARED, SIZE_MAX, &s),
                 TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("18446744073709551615");
    CHECK(!exists(missing));
    /* too large for the file system: the file SHARED created is removed */
    CHECK_STATUS(tsr_storage_from_file(missing, TSR_FILE_SHARED, (size_t)1 << 62, &s),
                 TSR_ERR_IO);
    CHECK(!exists(missing));
    /* an existing file keeps its size */
    write_file(missing, small, sizeof small);
    CHECK_STATUS(tsr_storage_from_file(missing, TSR_FILE_SHARED, (size_t)1 << 62, &s),
                 TSR_ERR_IO);
    {
        struct stat st;
        CHECK(stat(missing, &st) == 0);
        CHECK_EQ(st.st_size, 4);
    }
    CHECK(unlink(missing) == 0);
    /* no permission */
    if (geteuid() != 0) {
        const char *p = path_of("noperm.bin");
        write_file(p, small, sizeof small);
        CHECK(chmod(p, 0) == 0);
        CHECK_STATUS(tsr_storage_from_file(p, TSR_FILE_READ_ONLY, 0, &s), TSR_ERR_IO);
        CHECK_MSG_CONTAINS("Permission denied");
        CHECK(unlink(p) == 0);
    } else if (exists("/sys/devices/system/cpu/online")) {
        /* root passes file modes; a read-only sysfs attribute refuses a
         * writable open even to root */
        CHECK_STATUS(tsr_storage_from_file("/sys/devices/system/cpu/online", TSR_FILE_SHARED,
                                           0, &s),
                     TSR_ERR_IO);
        CHECK_MSG_CONTAINS("Permission denied");
    } else {
        printf("  (no-permission case skipped: running as root without sysfs)\n");
    }
    CHECK(s == (TsrStorage *)0x10);
}

/* A FIFO is refused at once in every mode (an open() that blocked would
 * hang: the alarm fails the test instead) and stays a FIFO. */
static void test_fifo_refused(void) {
    const char *p = path_of("pipe.bin");
    TsrStorage *s = (TsrStorage *)0x10;
    TsrFileMode modes[3] = {TSR_FILE_PRIVATE, TSR_FILE_READ_ONLY, TSR_FILE_SHARED};
    CHECK(mkfifo(p, 0600) == 0);
    alarm(10);
    for (int i = 0; i < 3; i++) {
        CHECK_STATUS(tsr_storage_from_file(p, modes[i], 0, &s), TSR_ERR_IO);
        CHECK_MSG_CONTAINS("FIFO");
        CHECK_MSG_CONTAINS("pipe.bin");
    }
    alarm(0);
    struct stat st;
    CHECK(lstat(p, &st) == 0 && S_ISFIFO(st.st_mode));
    CHECK(s == (TsrStorage *)0x10);
    CHECK(unlink(p) == 0);
}

static void test_views_weak_refs_and_dlpack(void) {
    const char *p = path_of("views.bin");
    float vals[6] = {0, 1, 2, 3, 4, 5};
    TsrStorage *s = NULL, *locked = NULL;
    TsrWeakStorage *weak = NULL;
    TsrTensor *t = NULL, *v = NULL;
    DLManagedTensorVersioned *m = NULL;
    int64_t shape[2] = {2, 3};
    write_file(p, vals, sizeof vals);
    CHECK_OK(tsr_storage_from_file(p, TSR_FILE_PRIVATE, 0, &s));
    CHECK_OK(tsr_storage_downgrade(s, &weak));
    CHECK_OK(tsr_tensor_from_storage(s, 0, 2, shape, NULL, TSR_FLOAT, &t));
    CHECK_OK(tsr_tensor_transpose(t, 0, 1, &v));
    CHECK_OK(tsr_tensor_to_dlpack(v, &m));
    CHECK_EQ(m->flags, 0);
    CHECK_OK(tsr_storage_decref(s));
    CHECK_OK(tsr_tensor_decref(t));
    CHECK_OK(tsr_tensor_decref(v));
    /* the export alone keeps the mapping */
    CHECK(!tsr_weak_storage_expired(weak));
    CHECK(((const float *)m->dl_tensor.data)[5] == 5.0f);
    m->deleter(m);
    CHECK(tsr_weak_storage_expired(weak));
    CHECK_OK(tsr_weak_storage_lock(weak, &locked));
    CHECK(locked == NULL);
    CHECK_OK(tsr_weak_storage_decref(weak));
    CHECK(unlink(p) == 0);
}

static int frees = 0;
static void count_free(void *ctx) {
    frees++;
    free(ctx);
}

static TsrDataPtr heap_ptr(size_t n) {
    TsrDataPtr dp;
    TsrDevice cpu = {TSR_CPU, -1};
    dp.data = calloc(1, n);
    dp.ctx = dp.data;
    dp.deleter = count_free;
    dp.device = cpu;
    return dp;
}

static void test_data_ptr_view(void) {
    TsrDataPtr dp = heap_ptr(16), view;
    void *ctx = dp.ctx;
    TsrStorage *s = NULL;
    CHECK_OK(tsr_storage_from_data_ptr(&dp, 16, &s));
    CHECK_OK(tsr_storage_data_ptr(s, &view));
    CHECK(view.data == ctx && view.ctx == ctx && view.deleter == count_free);
    CHECK_EQ(view.device.type, TSR_CPU);
    /* a plugin gets its per-block context back */
    CHECK(tsr_data_ptr_cast_context(&view, count_free) == ctx);
    CHECK_STATUS(tsr_storage_data_ptr(s, NULL), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_storage_data_ptr(NULL, &view), TSR_ERR_NULL_POINTER);
    frees = 0;
    CHECK_OK(tsr_storage_decref(s));
    CHECK_EQ(frees, 1); /* the view owned nothing */
}

static void test_set_data_ptr_once(void) {
    TsrDevice cpu = {TSR_CPU, -1};
    TsrStorage *s = NULL;
    TsrTensor *t = NULL;
    TsrDataPtr first = heap_ptr(16), second = heap_ptr(32), old = {0};
    void *first_addr = first.data, *second_addr = second.data;
    int64_t n = 4;
    frees = 0;
    CHECK_OK(tsr_storage_new(16, cpu, true, &s));
    CHECK_OK(tsr_tensor_from_storage(s, 0, 1, &n, NULL, TSR_FLOAT, &t));
    /* handed back: the caller owns the old one */
    CHECK_OK(tsr_storage_set_data_ptr(s, &first, 16, &old));
    CHECK(first.data == NULL && first.ctx == NULL && first.deleter == NULL);
    CHECK(old.data != NULL && old.data != first_addr);
    CHECK(tsr_storage_data(s) == first_addr);
    CHECK(tsr_tensor_data(t) == first_addr); /* every view sees it */
    CHECK(tsr_storage_resizable(s));
    tsr_data_ptr_free(&old);
    CHECK_EQ(frees, 0);
    /* freed: the old one (ours) runs its deleter exactly once */
    CHECK_OK(tsr_storage_set_data_ptr(s, &second, 32, NULL));
    CHECK_EQ(frees, 1);
    CHECK_EQ(tsr_storage_nbytes(s), 32);
    CHECK(tsr_tensor_data(t) == second_addr);
    CHECK_OK(tsr_tensor_decref(t));
    CHECK_OK(tsr_storage_decref(s));
    CHECK_EQ(frees, 2);
}

static void test_set_data_ptr_refusals(void) {
    TsrDevice cpu = {TSR_CPU, -1};
    TsrStorage *s = NULL;
    TsrTensor *t = NULL;
    TsrDataPtr dp = heap_ptr(16), old = {0};
    DLManagedTensorVersioned *m = NULL;
    int64_t n = 4;
    frees = 0;
    CHECK_OK(tsr_storage_new(16, cpu, true, &s));
    CHECK_OK(tsr_tensor_from_storage(s, 0, 1, &n, NULL, TSR_FLOAT, &t));
    /* a live DLPack export: its consumer points at the current memory */
    CHECK_OK(tsr_tensor_to_dlpack(t, &m));
    CHECK_STATUS(tsr_storage_set_data_ptr(s, &dp, 16, &old), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("tsr_storage_set_data_ptr");
    CHECK_MSG_CONTAINS("1 live DLPack export");
    CHECK(dp.ctx != NULL && old.ctx == NULL); /* untouched */
    CHECK(tsr_storage_data(s) == m->dl_tensor.data);
    m->deleter(m);
    /* other device, NULL data */
    dp.device.type = TSR_META;
    CHECK_STATUS(tsr_storage_set_data_ptr(s, &dp, 16, NULL), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("expected the same device");
    dp.device = cpu;
    {
        TsrDataPtr null_dp = {0};
        null_dp.device = cpu;
        CHECK_STATUS(tsr_storage_set_data_ptr(s, &null_dp, 8, NULL), TSR_ERR_INVALID_ARGUMENT);
        CHECK_MSG_CONTAINS("nbytes is 8");
    }
    CHECK_STATUS(tsr_storage_set_data_ptr(s, NULL, 16, NULL), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_storage_set_data_ptr(NULL, &dp, 16, NULL), TSR_ERR_NULL_POINTER);
    CHECK(dp.ctx != NULL);
    CHECK_EQ(frees, 0);
    /* once the export is gone it is accepted */
    CHECK_OK(tsr_storage_set_data_ptr(s, &dp, 16, NULL));
    CHECK_OK(tsr_tensor_decref(t));
    CHECK_OK(tsr_storage_decref(s));
    CHECK_EQ(frees, 1);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/tessera-file-test-%ld", (long)getpid());
    CHECK(mkdir(dir, 0700) == 0);
    RUN(test_read_only_mode);
    RUN(test_private_mode);
    RUN(test_shared_mode);
    RUN(test_sizes);
    RUN(test_five_gib_sparse);
    RUN(test_bad_input);
    RUN(test_fifo_refused);
    RUN(test_views_weak_refs_and_dlpack);
    RUN(test_data_ptr_view);
    RUN(test_set_data_ptr_once);
    RUN(test_set_data_ptr_refusals);
    CHECK(rmdir(dir) == 0); /* nothing left behind */
    printf("all file storage tests passed\n");
    return 0;
}
