/*
 * tsr_runner.h: how a C test runs itself again as a child (POSIX). When
 * TESSERA_TEST_RUNNER is set (.ci/arm.sh: "qemu-aarch64 -L SYSROOT"), the
 * child goes through it, split on spaces: under qemu-user the host kernel
 * cannot execute the aarch64 program itself.
 */
#ifndef TSR_RUNNER_H
#define TSR_RUNNER_H

#include "tsr_test.h"

/* Puts the runner's words first in `argv` (at most `max`): how many. */
static int tsr_runner_argv(char **argv, int max) {
    static char runner[256];
    char *word;
    int n = 0;
    const char *r = getenv("TESSERA_TEST_RUNNER");
    if (r == NULL || r[0] == '\0') return 0;
    CHECK(strlen(r) < sizeof runner);
    strcpy(runner, r);
    for (word = strtok(runner, " "); word != NULL && n < max; word = strtok(NULL, " ")) {
        argv[n++] = word;
    }
    return n;
}

#endif
