/*
 * test_parts.c - the table walker (core/parts.c): parts are made, then
 * started, in table order and stopped, then freed, in reverse; a failure
 * in the middle undoes in reverse exactly what was done before it; a part
 * not enabled is skipped at every step.
 */
#include <stdlib.h>

#include "core/parts.h"
#include "test.h"

/* What the hooks did, in order: "n1" = part 1 made, "s1" started, "t1"
 * stopped, "f1" freed; fail_new / fail_start name a part that fails. */
struct trace {
    char log[512];
    int fail_new, fail_start;
    int off;                    /* a part not enabled; -1: none */
};

static void note(struct trace *t, char what, int i)
{
    size_t n = strlen(t->log);

    snprintf(t->log + n, sizeof(t->log) - n, "%s%c%d", n ? " " : "", what, i);
}

#define PART_HOOKS(i) \
    static int en##i(void *ctx) { return ((struct trace *)ctx)->off != i; } \
    static int new##i(void *ctx, struct permitd_error *err) \
    { \
        struct trace *t = ctx; \
        if (t->fail_new == i) \
            return permitd_error_set(err, PERMITD_EINVAL, "part %d cannot be made", i); \
        note(t, 'n', i); \
        return PERMITD_OK; \
    } \
    static __attribute__((unused)) int start##i(void *ctx, struct permitd_error *err) \
    { \
        struct trace *t = ctx; \
        if (t->fail_start == i) \
            return permitd_error_set(err, PERMITD_EUNAVAILABLE, "part %d cannot start", i); \
        note(t, 's', i); \
        return PERMITD_OK; \
    } \
    static void stop##i(void *ctx) { note(ctx, 't', i); } \
    static void free##i(void *ctx) { note(ctx, 'f', i); }

PART_HOOKS(1)
PART_HOOKS(2)
PART_HOOKS(3)
PART_HOOKS(4)

static const struct part table[] = {
    {"one", en1, new1, start1, stop1, free1},
    {"two", en2, new2, start2, stop2, free2},
    {"three", en3, new3, NULL, stop3, free3},     /* no start: at rest once made */
    {"four", en4, new4, start4, stop4, free4},
};
#define NPARTS (sizeof(table) / sizeof(table[0]))

static void test_parts_forward_to_start_backward_to_stop(void)
{
    struct trace t = {"", 0, 0, -1};
    struct permitd_error err = {0, ""};
    struct parts p;

    CHECK_INT(parts_start(&p, table, NPARTS, &t, &err), PERMITD_OK);
    CHECK_STR(t.log, "n1 n2 n3 n4 s1 s2 s4");
    t.log[0] = '\0';
    parts_stop(&p);
    CHECK_STR(t.log, "t4 t3 t2 t1 f4 f3 f2 f1");
    t.log[0] = '\0';
    parts_stop(&p);                         /* a second stop does nothing */
    CHECK_STR(t.log, "");
}

/* A start failing at part 4 stops 3, 2 and 1 (3 has no start: it counts
 * as started once 2 is) and frees all four, each once, in reverse; the
 * error is the part's own. */
static void test_parts_start_failure_undoes_in_reverse(void)
{
    struct trace t = {"", 0, 4, -1};
    struct permitd_error err = {0, ""};
    struct parts p;

    CHECK_INT(parts_start(&p, table, NPARTS, &t, &err), PERMITD_EUNAVAILABLE);
    CHECK_STR(err.message, "part 4 cannot start");
    CHECK_STR(t.log, "n1 n2 n3 n4 s1 s2 t3 t2 t1 f4 f3 f2 f1");
    t.log[0] = '\0';
    parts_stop(&p);                         /* what the caller's exit path does */
    CHECK_STR(t.log, "");

    struct trace t2 = {"", 0, 2, -1};
    CHECK_INT(parts_start(&p, table, NPARTS, &t2, &err), PERMITD_EUNAVAILABLE);
    CHECK_STR(t2.log, "n1 n2 n3 n4 s1 t1 f4 f3 f2 f1");
}

/* A part failing to be made is not freed (it left nothing); those before
 * it are freed in reverse; none was started. */
static void test_parts_new_failure_frees_the_made_ones(void)
{
    struct trace t = {"", 3, 0, -1};
    struct permitd_error err = {0, ""};
    struct parts p;

    CHECK_INT(parts_start(&p, table, NPARTS, &t, &err), PERMITD_EINVAL);
    CHECK_STR(err.message, "part 3 cannot be made");
    CHECK_STR(t.log, "n1 n2 f2 f1");

    struct trace t1 = {"", 1, 0, -1};
    CHECK_INT(parts_start(&p, table, NPARTS, &t1, &err), PERMITD_EINVAL);
    CHECK_STR(t1.log, "");
}

static void test_parts_disabled_part_is_skipped(void)
{
    struct trace t = {"", 0, 0, 2};
    struct permitd_error err = {0, ""};
    struct parts p;

    CHECK_INT(parts_start(&p, table, NPARTS, &t, &err), PERMITD_OK);
    parts_stop(&p);
    CHECK_STR(t.log, "n1 n3 n4 s1 s4 t4 t3 t1 f4 f3 f1");

    struct trace t4 = {"", 0, 4, 2};          /* and when a later one fails */
    CHECK_INT(parts_start(&p, table, NPARTS, &t4, &err), PERMITD_EUNAVAILABLE);
    CHECK_STR(t4.log, "n1 n3 n4 s1 t3 t1 f4 f3 f1");
}

static void test_parts_table_too_long_is_refused(void)
{
    struct trace t = {"", 0, 0, -1};
    struct permitd_error err = {0, ""};
    struct parts p;

    CHECK_INT(parts_start(&p, table, PARTS_MAX + 1, &t, &err), PERMITD_EINVAL);
    CHECK_STR(t.log, "");
    parts_stop(&p);
    CHECK_STR(t.log, "");
}

int main(void)
{
    TEST_RUN(test_parts_forward_to_start_backward_to_stop);
    TEST_RUN(test_parts_start_failure_undoes_in_reverse);
    TEST_RUN(test_parts_new_failure_frees_the_made_ones);
    TEST_RUN(test_parts_disabled_part_is_skipped);
    TEST_RUN(test_parts_table_too_long_is_refused);
    return TEST_REPORT();
}
