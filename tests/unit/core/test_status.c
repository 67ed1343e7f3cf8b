/*
 * test_status.c - server/core/status.c: every status code has its Connect
 * name, the names are the wire's (DESIGN.md, "Wire protocol") and unique,
 * and permitd_error_set() fills and returns as its callers rely on.
 */
#include <stdio.h>
#include <string.h>

#include "core/status.h"
#include "test.h"

static const struct {
    int code;
    const char *name;
} want[] = {
    {PERMITD_OK, "ok"},
    {PERMITD_ECANCELED, "canceled"},
    {PERMITD_EUNKNOWN, "unknown"},
    {PERMITD_EINVAL, "invalid_argument"},
    {PERMITD_EDEADLINE, "deadline_exceeded"},
    {PERMITD_ENOTFOUND, "not_found"},
    {PERMITD_EEXIST, "already_exists"},
    {PERMITD_EPERM, "permission_denied"},
    {PERMITD_EEXHAUSTED, "resource_exhausted"},
    {PERMITD_EPRECONDITION, "failed_precondition"},
    {PERMITD_EABORTED, "aborted"},
    {PERMITD_ERANGE, "out_of_range"},
    {PERMITD_EUNIMPLEMENTED, "unimplemented"},
    {PERMITD_EINTERNAL, "internal"},
    {PERMITD_EUNAVAILABLE, "unavailable"},
    {PERMITD_EDATALOSS, "data_loss"},
    {PERMITD_EUNAUTHENTICATED, "unauthenticated"},
};
#define NWANT (sizeof(want) / sizeof(want[0]))

static void test_status_every_code_named(void)
{
    CHECK_INT(NWANT, PERMITD_STATUS_COUNT);
    for (size_t i = 0; i < NWANT; i++)
        CHECK_STR(permitd_status_name(want[i].code), want[i].name);
}

/* Every code from 0 down to -(COUNT - 1) has a name of its own: a gap or a
 * duplicate in the table would map two codes to one wire name. */
static void test_status_names_unique(void)
{
    for (int a = 0; a < PERMITD_STATUS_COUNT; a++) {
        const char *na = permitd_status_name(-a);
        CHECK(na != NULL && na[0] != '\0');
        for (int b = a + 1; b < PERMITD_STATUS_COUNT; b++) {
            if (na != NULL && strcmp(na, permitd_status_name(-b)) == 0) {
                fprintf(stderr, "codes %d and %d are both \"%s\"\n", -a, -b, na);
                CHECK(0);
            }
        }
    }
}

static void test_status_unknown_values(void)
{
    CHECK_STR(permitd_status_name(-PERMITD_STATUS_COUNT), "unknown");
    CHECK_STR(permitd_status_name(-99), "unknown");
    CHECK_STR(permitd_status_name(1), "unknown");
    CHECK_STR(permitd_status_name(-2147483647 - 1), "unknown");
}

static void test_status_error_set(void)
{
    struct permitd_error err = {0, ""};

    CHECK_INT(permitd_error_set(&err, PERMITD_EINVAL, "bucket: \"%s\" is too long", "x"),
              PERMITD_EINVAL);
    CHECK_INT(err.code, PERMITD_EINVAL);
    CHECK_STR(err.message, "bucket: \"x\" is too long");
    CHECK_INT(permitd_error_set(NULL, PERMITD_EINTERNAL, "out of memory"), PERMITD_EINTERNAL);
}

int main(void)
{
    TEST_RUN(test_status_every_code_named);
    TEST_RUN(test_status_names_unique);
    TEST_RUN(test_status_unknown_values);
    TEST_RUN(test_status_error_set);
    return TEST_REPORT();
}
