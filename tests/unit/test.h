/*
 * test.h - the few macros the C unit tests need.
 *
 * A test file defines functions `static void test_<module>_<behaviour>(void)`
 * and lists them in main() with TEST_RUN(). A failed CHECK prints file:line
 * and the expression, marks the run failed and carries on with the next
 * check, so one run shows every broken behaviour. main() returns
 * TEST_REPORT(), which prints "N passed, N failed" and exits non-zero on any
 * failure.
 */
#ifndef PERMITD_TEST_H
#define PERMITD_TEST_H

#include <stdio.h>
#include <string.h>

static int test_checks_failed;
static int test_passed, test_failed;

#define CHECK(expr) do { \
    if (!(expr)) { \
        fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #expr); \
        test_checks_failed++; \
    } \
} while (0)

#define CHECK_INT(a, b) do { \
    long long a_ = (long long)(a), b_ = (long long)(b); \
    if (a_ != b_) { \
        fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld != %lld)\n", \
                __FILE__, __LINE__, #a, #b, a_, b_); \
        test_checks_failed++; \
    } \
} while (0)

#define CHECK_STR(a, b) do { \
    const char *a_ = (a), *b_ = (b); \
    if (a_ == NULL || b_ == NULL || strcmp(a_, b_) != 0) { \
        fprintf(stderr, "%s:%d: CHECK failed: %s == %s (\"%s\" != \"%s\")\n", \
                __FILE__, __LINE__, #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); \
        test_checks_failed++; \
    } \
} while (0)

/* Substring check, for error messages that must name a field or value. */
#define CHECK_CONTAINS(hay, needle) do { \
    const char *h_ = (hay), *n_ = (needle); \
    if (h_ == NULL || strstr(h_, n_) == NULL) { \
        fprintf(stderr, "%s:%d: CHECK failed: \"%s\" contains \"%s\"\n", \
                __FILE__, __LINE__, h_ ? h_ : "(null)", n_); \
        test_checks_failed++; \
    } \
} while (0)

#define TEST_RUN(fn) do { \
    int before_ = test_checks_failed; \
    fn(); \
    if (test_checks_failed == before_) { test_passed++; printf("ok   %s\n", #fn); } \
    else { test_failed++; printf("FAIL %s\n", #fn); } \
} while (0)

#define TEST_REPORT() \
    (printf("%d passed, %d failed\n", test_passed, test_failed), test_failed != 0)

#endif
