/*
 * tsr_test.h: the tiny assertion helper of tessera's C tests.
 *
 * Each c_tests/test_*.c file is one program: it defines test functions
 * `static void test_name(void)` and lists them in main() with RUN(test_name).
 * A failing check prints the expression, the file, the line and (for status
 * checks) tessera's last error message, then exits with status 1.
 */
#ifndef TSR_TEST_H
#define TSR_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera.h"

static int tsr_test_checks = 0;

static void tsr_test_fail(const char *file, int line, const char *expr, const char *detail) {
    fprintf(stderr, "%s:%d: CHECK FAILED: %s", file, line, expr);
    if (detail != NULL && detail[0] != '\0') {
        fprintf(stderr, " (%s)", detail);
    }
    fprintf(stderr, "\n  last error: %s\n", tsr_last_error_message());
    exit(1);
}

/* Any condition. */
#define CHECK(cond)                                                \
    do {                                                           \
        tsr_test_checks++;                                         \
        if (!(cond)) tsr_test_fail(__FILE__, __LINE__, #cond, ""); \
    } while (0)

/* A call that must return TSR_OK. */
#define CHECK_OK(call)                                                                  \
    do {                                                                                \
        TsrStatus tsr_test_s_ = (call);                                                 \
        tsr_test_checks++;                                                              \
        if (tsr_test_s_ != TSR_OK)                                                      \
            tsr_test_fail(__FILE__, __LINE__, #call, tsr_status_name(tsr_test_s_));     \
    } while (0)

/* A call that must fail with `status` and leave a non-empty message. */
#define CHECK_STATUS(call, status)                                                      \
    do {                                                                                \
        TsrStatus tsr_test_s_ = (call);                                                 \
        tsr_test_checks++;                                                              \
        if (tsr_test_s_ != (status))                                                    \
            tsr_test_fail(__FILE__, __LINE__, #call " == " #status,                    \
                          tsr_status_name(tsr_test_s_));                                \
        if (tsr_last_error_message()[0] == '\0')                                        \
            tsr_test_fail(__FILE__, __LINE__, #call, "empty error message");           \
    } while (0)

/* Two integers that must be equal (printed on failure). */
#define CHECK_EQ(a, b)                                                                  \
    do {                                                                                \
        long long tsr_test_a_ = (long long)(a), tsr_test_b_ = (long long)(b);          \
        tsr_test_checks++;                                                              \
        if (tsr_test_a_ != tsr_test_b_) {                                               \
            char tsr_test_d_[96];                                                       \
            snprintf(tsr_test_d_, sizeof tsr_test_d_, "%lld != %lld", tsr_test_a_,      \
                     tsr_test_b_);                                                      \
            tsr_test_fail(__FILE__, __LINE__, #a " == " #b, tsr_test_d_);               \
        }                                                                               \
    } while (0)

/* The last error message must contain `needle`. */
#define CHECK_MSG_CONTAINS(needle)                                                      \
    do {                                                                                \
        tsr_test_checks++;                                                              \
        if (strstr(tsr_last_error_message(), (needle)) == NULL)                         \
            tsr_test_fail(__FILE__, __LINE__, "message contains \"" needle "\"", "");   \
    } while (0)

/* Runs one test function and reports it. */
#define RUN(test)                                        \
    do {                                                 \
        int tsr_test_before_ = tsr_test_checks;          \
        test();                                          \
        printf("ok %s (%d checks)\n", #test,             \
               tsr_test_checks - tsr_test_before_);      \
    } while (0)

#endif /* TSR_TEST_H */
