/*
 * test_limiter_loader.c - what bounds the loader (limiter_loader.c), with
 * no Redis and no thread: one entry per name however often it is asked
 * for (limiter_loader_pend_get()), at most LOADER_PENDING_MAX of them, an
 * entry nobody waits for dropped unread (limiter_loader_pend_drop()), and
 * the names Redis said hold no policy, remembered for a while in a table
 * of fixed size (limiter_loader_absent_put(), limiter_loader_absent_has()).
 * The loader is built here by hand, as loader_get() would, minus the
 * thread that would read its names.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/config.h"
#include "decisions/limiter.h"
#include "decisions/limiter_internal.h"
#include "test.h"

static struct config cfg;

static struct loader *new_loader(void)
{
    struct loader *ld = calloc(1, sizeof(*ld));

    pthread_mutex_init(&ld->lock, NULL);
    pthread_cond_init(&ld->wake, NULL);
    return ld;
}

/* Drops every entry still held (each with one waiter), then the loader. */
static void free_loader(struct loader *ld)
{
    while (ld->head != NULL) {
        ld->head->waiters = 1;
        limiter_loader_pend_drop(ld, ld->head);
    }
    pthread_cond_destroy(&ld->wake);
    pthread_mutex_destroy(&ld->lock);
    free(ld);
}

static void test_limiter_loader_one_entry_per_name(void)
{
    struct loader *ld = new_loader();
    struct pend *a = limiter_loader_pend_get(ld, "alpha");
    struct pend *b = limiter_loader_pend_get(ld, "beta");

    CHECK(a != NULL && b != NULL && a != b);
    CHECK(limiter_loader_pend_get(ld, "alpha") == a);
    CHECK(limiter_loader_pend_get(ld, "beta") == b);
    CHECK_INT(ld->npend, 2);
    /* Read in the order asked. */
    CHECK(ld->head == a && a->fifo == b && ld->tail == b);
    CHECK_INT(a->state, PEND_WAIT);
    free_loader(ld);
}

static void test_limiter_loader_bounded(void)
{
    struct loader *ld = new_loader();
    char name[32];
    struct pend *first = NULL, *p;

    for (int i = 0; i < LOADER_PENDING_MAX; i++) {
        snprintf(name, sizeof(name), "p%d", i);
        CHECK((p = limiter_loader_pend_get(ld, name)) != NULL);
        if (i == 0)
            first = p;
    }
    CHECK_INT(ld->npend, LOADER_PENDING_MAX);
    /* One more name is refused; a name already held is still found. */
    CHECK(limiter_loader_pend_get(ld, "one-too-many") == NULL);
    CHECK(limiter_loader_pend_get(ld, "p0") == first);
    CHECK_INT(ld->npend, LOADER_PENDING_MAX);
    /* Its last waiter gone, an entry is dropped unread and its place is
     * free at once. */
    first->waiters = 1;
    limiter_loader_pend_drop(ld, first);
    CHECK_INT(ld->npend, LOADER_PENDING_MAX - 1);
    CHECK(ld->head != first);
    CHECK((p = limiter_loader_pend_get(ld, "one-too-many")) != NULL);
    CHECK(ld->tail == p);
    free_loader(ld);
}

static void test_limiter_loader_drop_waits_for_the_last_waiter(void)
{
    struct loader *ld = new_loader();
    struct pend *a = limiter_loader_pend_get(ld, "alpha");
    struct pend *b = limiter_loader_pend_get(ld, "beta");

    b->waiters = 2;
    limiter_loader_pend_drop(ld, b);
    CHECK_INT(ld->npend, 2);
    CHECK(ld->tail == b);
    limiter_loader_pend_drop(ld, b);
    CHECK_INT(ld->npend, 1);
    CHECK(ld->head == a && ld->tail == a && a->fifo == NULL);
    /* One being read is the loader's to free, whatever its waiters. */
    a->waiters = 1;
    a->state = PEND_READING;
    limiter_loader_pend_drop(ld, a);
    CHECK_INT(ld->npend, 1);
    a->state = PEND_WAIT;
    free_loader(ld);
}

static struct absent *absent_slot(struct limiter *l, const char *name)
{
    for (size_t i = 0; i < LIMITER_ABSENT_SLOTS; i++)
        if (l->absent[i].hash != 0 && strcmp(l->absent[i].name, name) == 0)
            return &l->absent[i];
    return NULL;
}

static void test_limiter_loader_absent_names(void)
{
    struct limiter *l = NULL;
    struct permitd_error err;
    char name[32];
    size_t held = 0;
    struct absent *a;

    memset(&cfg, 0, sizeof(cfg));
    strcpy(cfg.redis_prefix, "t");
    CHECK_INT(limiter_new(&cfg, NULL, &l, &err), PERMITD_OK);
    CHECK(!limiter_loader_absent_has(l, "ghost"));
    limiter_loader_absent_put(l, "ghost");
    CHECK(limiter_loader_absent_has(l, "ghost"));
    CHECK(!limiter_loader_absent_has(l, "ghost2"));
    /* Past its life it is asked about again. */
    CHECK((a = absent_slot(l, "ghost")) != NULL);
    if (a != NULL)
        a->until_us = 0;
    CHECK(!limiter_loader_absent_has(l, "ghost"));
    /* The table does not grow: more names than slots, and the newest
     * always held. */
    for (int i = 0; i < 2 * LIMITER_ABSENT_SLOTS; i++) {
        snprintf(name, sizeof(name), "n%d", i);
        limiter_loader_absent_put(l, name);
        CHECK(limiter_loader_absent_has(l, name));
    }
    for (int i = 0; i < 2 * LIMITER_ABSENT_SLOTS; i++) {
        snprintf(name, sizeof(name), "n%d", i);
        held += (size_t)limiter_loader_absent_has(l, name);
    }
    CHECK(held <= LIMITER_ABSENT_SLOTS);
    CHECK(held > 0);
    limiter_free(l);
}

int main(void)
{
    TEST_RUN(test_limiter_loader_one_entry_per_name);
    TEST_RUN(test_limiter_loader_bounded);
    TEST_RUN(test_limiter_loader_drop_waits_for_the_last_waiter);
    TEST_RUN(test_limiter_loader_absent_names);
    return TEST_REPORT();
}
