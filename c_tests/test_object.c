/*
 * Host objects (TsrObject): strong and weak counts as c10's intrusive_ptr,
 * release_resources / destroy callbacks, lock on an expired object, use of
 * a dead object, and a multi-threaded stress with exact final counts.
 */
#include <pthread.h>

#include "tsr_test.h"

/* What the tests keep in an object's data block. The callbacks may run on
 * any thread, so they only record what they see; the tests check it. */
typedef struct {
    int magic;
    int release_resources_calls;
    int destroy_calls;
    int *destroyed_flag; /* set by destroy: outlives the block */
} Payload;

static void on_release_resources(void *obj) {
    Payload *p = obj;
    if (p->magic == 42) p->release_resources_calls++;
}

/* *destroyed_flag becomes 1 + the number of release_resources calls seen,
 * or -1 when destroy ran twice or on a block that is not a Payload. */
static void on_destroy(void *obj) {
    Payload *p = obj;
    p->destroy_calls++;
    *p->destroyed_flag =
        (p->magic == 42 && p->destroy_calls == 1) ? 1 + p->release_resources_calls : -1;
}

static const TsrObjectVTable vtable = {sizeof(TsrObjectVTable), on_release_resources,
                                       on_destroy};

/* *destroyed is 0 while alive, then 1 + the number of release_resources calls. */
static TsrObject *new_object(int *destroyed) {
    TsrObject *obj = NULL;
    Payload *p;
    *destroyed = 0;
    CHECK_OK(tsr_object_new(sizeof(Payload), &vtable, &obj));
    CHECK(obj != NULL);
    p = tsr_object_data(obj);
    CHECK(p != NULL);
    CHECK_EQ(p->magic, 0); /* zeroed */
    p->magic = 42;
    p->destroyed_flag = destroyed;
    return obj;
}

static void test_counts(void) {
    int destroyed;
    TsrObject *obj = new_object(&destroyed);
    TsrObject *locked = NULL;
    TsrWeakObject *weak = NULL;

    CHECK_EQ(tsr_object_use_count(obj), 1);
    CHECK_EQ(tsr_object_weak_use_count(obj), 1);
    CHECK_OK(tsr_object_incref(obj));
    CHECK_EQ(tsr_object_use_count(obj), 2);
    CHECK_EQ(tsr_object_weak_use_count(obj), 1);

    CHECK_OK(tsr_object_downgrade(obj, &weak));
    CHECK(weak != NULL);
    CHECK_EQ(tsr_object_weak_use_count(obj), 2);
    CHECK_EQ(tsr_weak_object_use_count(weak), 2);
    CHECK_EQ(tsr_weak_object_weak_use_count(weak), 2);
    CHECK(!tsr_weak_object_expired(weak));
    CHECK(tsr_weak_object_data(weak) == tsr_object_data(obj));

    CHECK_OK(tsr_weak_object_incref(weak));
    CHECK_EQ(tsr_object_weak_use_count(obj), 3);
    CHECK_OK(tsr_weak_object_decref(weak));
    CHECK_EQ(tsr_object_weak_use_count(obj), 2);

    CHECK_OK(tsr_weak_object_lock(weak, &locked));
    CHECK(locked == obj);
    CHECK_EQ(tsr_object_use_count(obj), 3);
    CHECK_OK(tsr_object_decref(locked));
    CHECK_OK(tsr_object_decref(obj));
    CHECK_EQ(tsr_object_use_count(obj), 1);
    CHECK_EQ(destroyed, 0);

    CHECK_OK(tsr_weak_object_decref(weak));
    CHECK_EQ(tsr_object_weak_use_count(obj), 1);
    CHECK_OK(tsr_object_decref(obj));
    CHECK_EQ(destroyed, 1); /* destroyed, no release_resources */
}

static void test_lock_after_expiry(void) {
    int destroyed;
    TsrObject *obj = new_object(&destroyed);
    TsrWeakObject *weak = NULL;
    TsrObject *locked = obj;
    Payload *p = tsr_object_data(obj);

    CHECK_OK(tsr_object_downgrade(obj, &weak));
    CHECK_OK(tsr_object_decref(obj));
    /* strong reached 0 with a weak ref left: release_resources ran, the
     * memory stays until the weak ref goes */
    CHECK_EQ(p->release_resources_calls, 1);
    CHECK_EQ(p->destroy_calls, 0);
    CHECK(tsr_weak_object_expired(weak));
    CHECK_EQ(tsr_weak_object_use_count(weak), 0);
    CHECK_EQ(tsr_weak_object_weak_use_count(weak), 1);
    CHECK(tsr_weak_object_data(weak) == p);

    CHECK_OK(tsr_weak_object_lock(weak, &locked));
    CHECK(locked == NULL);
    CHECK_EQ(tsr_weak_object_use_count(weak), 0);
    CHECK_OK(tsr_weak_object_lock(weak, &locked));
    CHECK(locked == NULL);

    CHECK_OK(tsr_weak_object_decref(weak));
    CHECK_EQ(destroyed, 2); /* destroy ran once, after one release_resources */
}

static void test_no_release_resources_without_weak_refs(void) {
    int destroyed;
    TsrObject *obj = new_object(&destroyed);
    CHECK_OK(tsr_object_incref(obj));
    CHECK_OK(tsr_object_decref(obj));
    CHECK_EQ(destroyed, 0);
    CHECK_OK(tsr_object_decref(obj));
    CHECK_EQ(destroyed, 1);
}

static void test_dead_object(void) {
    int destroyed;
    TsrObject *obj = new_object(&destroyed);
    TsrWeakObject *weak = NULL;
    TsrWeakObject *weak2 = NULL;

    CHECK_OK(tsr_object_downgrade(obj, &weak));
    CHECK_OK(tsr_object_decref(obj));
    /* the weak ref keeps the memory, so misuse is detected, not a crash */
    CHECK_STATUS(tsr_object_decref(obj), TSR_ERR_DEAD_OBJECT);
    CHECK_MSG_CONTAINS("tsr_object_decref");
    CHECK_STATUS(tsr_object_incref(obj), TSR_ERR_DEAD_OBJECT);
    CHECK_MSG_CONTAINS("tsr_object_incref");
    CHECK_STATUS(tsr_object_downgrade(obj, &weak2), TSR_ERR_DEAD_OBJECT);
    CHECK(weak2 == NULL);
    CHECK_EQ(tsr_object_use_count(obj), 0);
    CHECK_EQ(destroyed, 0);
    CHECK_OK(tsr_weak_object_decref(weak));
    CHECK_EQ(destroyed, 2);
}

static void test_null_arguments(void) {
    int destroyed;
    TsrObject *obj = new_object(&destroyed);
    TsrWeakObject *weak = NULL;
    TsrObject *locked = obj;

    CHECK_STATUS(tsr_weak_object_lock(NULL, &locked), TSR_ERR_NULL_POINTER);
    CHECK_MSG_CONTAINS("tsr_weak_object_lock");
    CHECK(locked == obj);
    CHECK_OK(tsr_object_downgrade(obj, &weak));
    CHECK_STATUS(tsr_weak_object_lock(weak, NULL), TSR_ERR_NULL_POINTER);
    CHECK_EQ(tsr_object_use_count(obj), 1); /* the failed lock added nothing */
    CHECK_OK(tsr_weak_object_decref(weak));
    CHECK_OK(tsr_object_decref(obj));
    CHECK_EQ(destroyed, 1);
}

static int old_destroy_calls = 0;
static void old_destroy(void *obj) {
    (void)obj;
    old_destroy_calls++;
}

static void test_vtable_sizes(void) {
    TsrObject *obj = NULL;
    /* a host built when the table ended after release_resources: the
     * fields past struct_size are not read */
    TsrObjectVTable old = {0, NULL, old_destroy};
    TsrObjectVTable tiny = {2, NULL, NULL};
    old.struct_size = (uint32_t)offsetof(TsrObjectVTable, destroy);
    CHECK_OK(tsr_object_new(16, &old, &obj));
    CHECK_OK(tsr_object_decref(obj));
    CHECK_EQ(old_destroy_calls, 0);

    obj = NULL;
    CHECK_STATUS(tsr_object_new(16, &tiny, &obj), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("struct_size");
    CHECK(obj == NULL);

    /* no vtable, no data */
    CHECK_OK(tsr_object_new(0, NULL, &obj));
    CHECK_OK(tsr_object_decref(obj));
}

/* ---- stress: 4 threads x 250k operations on one object ---- */

enum { STRESS_THREADS = 4, STRESS_OPS = 250000 };

typedef struct {
    TsrObject *obj;
    TsrWeakObject *weak;
    int failures;
} StressArg;

static void *stress_thread(void *varg) {
    StressArg *arg = varg;
    int i;
    /* 5 operations per round */
    for (i = 0; i < STRESS_OPS / 5; i++) {
        TsrObject *locked = NULL;
        arg->failures += tsr_object_incref(arg->obj) != TSR_OK;
        arg->failures += tsr_weak_object_lock(arg->weak, &locked) != TSR_OK;
        arg->failures += locked != arg->obj;
        arg->failures += tsr_object_decref(arg->obj) != TSR_OK;
        arg->failures += tsr_weak_object_incref(arg->weak) != TSR_OK;
        arg->failures += tsr_weak_object_decref(arg->weak) != TSR_OK;
        if (locked != NULL) arg->failures += tsr_object_decref(locked) != TSR_OK;
    }
    return NULL;
}

static void test_stress(void) {
    int destroyed, t;
    TsrObject *obj = new_object(&destroyed);
    TsrWeakObject *weak = NULL;
    pthread_t threads[STRESS_THREADS];
    StressArg args[STRESS_THREADS];
    Payload *p = tsr_object_data(obj);

    CHECK_OK(tsr_object_downgrade(obj, &weak));
    for (t = 0; t < STRESS_THREADS; t++) {
        args[t].obj = obj;
        args[t].weak = weak;
        args[t].failures = 0;
        CHECK_EQ(pthread_create(&threads[t], NULL, stress_thread, &args[t]), 0);
    }
    for (t = 0; t < STRESS_THREADS; t++) {
        CHECK_EQ(pthread_join(threads[t], NULL), 0);
        CHECK_EQ(args[t].failures, 0);
    }
    CHECK_EQ(tsr_object_use_count(obj), 1);
    CHECK_EQ(tsr_object_weak_use_count(obj), 2);
    CHECK_EQ(p->release_resources_calls, 0);
    CHECK_EQ(destroyed, 0);
    CHECK_OK(tsr_object_decref(obj));
    CHECK_EQ(p->release_resources_calls, 1);
    CHECK_OK(tsr_weak_object_decref(weak));
    CHECK_EQ(destroyed, 2);
}

/* ---- lock racing with the last decref ---- */

typedef struct {
    TsrWeakObject *weak;
    int locked_after_expiry; /* a lock that succeeded once expired: a bug */
    int failures;
} RaceArg;

static void *race_locker(void *varg) {
    RaceArg *arg = varg;
    for (;;) {
        TsrObject *locked = NULL;
        bool was_expired = tsr_weak_object_expired(arg->weak);
        arg->failures += tsr_weak_object_lock(arg->weak, &locked) != TSR_OK;
        if (locked == NULL) break;
        arg->locked_after_expiry += was_expired;
        arg->failures += tsr_object_decref(locked) != TSR_OK;
    }
    return NULL;
}

static void test_lock_races_last_decref(void) {
    int round;
    for (round = 0; round < 50; round++) {
        int destroyed, i;
        TsrObject *obj = new_object(&destroyed);
        RaceArg arg = {NULL, 0, 0};
        pthread_t thread;
        CHECK_OK(tsr_object_downgrade(obj, &arg.weak));
        CHECK_EQ(pthread_create(&thread, NULL, race_locker, &arg), 0);
        for (i = 0; i < 100; i++) {
            CHECK_OK(tsr_object_incref(obj));
            CHECK_OK(tsr_object_decref(obj));
        }
        CHECK_OK(tsr_object_decref(obj));
        CHECK_EQ(pthread_join(thread, NULL), 0);
        CHECK_EQ(arg.failures, 0);
        CHECK_EQ(arg.locked_after_expiry, 0);
        CHECK(tsr_weak_object_expired(arg.weak));
        CHECK_EQ(destroyed, 0);
        CHECK_OK(tsr_weak_object_decref(arg.weak));
        CHECK_EQ(destroyed, 2); /* one release_resources, one destroy */
    }
}

int main(void) {
    RUN(test_counts);
    RUN(test_lock_after_expiry);
    RUN(test_no_release_resources_without_weak_refs);
    RUN(test_dead_object);
    RUN(test_null_arguments);
    RUN(test_vtable_sizes);
    RUN(test_stress);
    RUN(test_lock_races_last_decref);
    return 0;
}
