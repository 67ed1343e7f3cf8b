/*
 * test_urlpath.c - server/core/urlpath.c: the spellings of one path that a
 * client can send (escapes, dot segments, repeated slashes, absolute form)
 * all come out as the one path a rule is written for; what is not the
 * same path stays different.
 */
#include <stdlib.h>
#include <string.h>

#include "core/urlpath.h"
#include "test.h"

static const char *norm(const char *in)
{
    static char out[2048];

    urlpath_normalise(in, out, sizeof(out));
    return out;
}

static void test_urlpath_spellings_of_one_path(void)
{
    static const char *const same[] = {
        "/api/x", "/%61pi/x", "/%61%70%69/x", "/%41pi/x" /* 'A': another path */, "//api/x",
        "///api//x", "/./api/x", "/x/../api/x", "/x/y/../../api/x", "/../api/x",
        "/api/./x", "/api/x?q=1", "/api/x#frag", "http://evil.example/api/x",
        "HTTPS://h:8443/api/x?z", "api/x", "/%2e/api/x", "/%2E%2E/api/x", "/a/%2e%2e/api/x",
    };

    for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
        if (strcmp(same[i], "/%41pi/x") == 0) {
            CHECK_STR(norm(same[i]), "/Api/x");
            continue;
        }
        CHECK_STR(norm(same[i]), "/api/x");
    }
}

static void test_urlpath_keeps_what_differs(void)
{
    CHECK_STR(norm("/api/"), "/api/");
    CHECK_STR(norm("/api"), "/api");
    CHECK_STR(norm("/api//"), "/api/");
    CHECK_STR(norm("/api/."), "/api/");
    CHECK_STR(norm("/api/x/.."), "/api/");
    CHECK_STR(norm("/api%2Fx"), "/api%2Fx");        /* an escaped '/' is not a '/' */
    CHECK_STR(norm("/api%2fx"), "/api%2Fx");        /* its hex in capitals */
    CHECK_STR(norm("/a%20b"), "/a%20b");
    CHECK_STR(norm("/a%zzb%4"), "/a%zzb%4");        /* not escapes: as they are */
    CHECK_STR(norm("/..."), "/...");
    CHECK_STR(norm("/.hidden/..x"), "/.hidden/..x");
    CHECK_STR(norm(""), "/");
    CHECK_STR(norm("/"), "/");
    CHECK_STR(norm("/.."), "/");
    CHECK_STR(norm("/../../.."), "/");
    CHECK_STR(norm("?q"), "/");
    CHECK_STR(norm("http://h"), "/");
    CHECK_STR(norm("*"), "/*");
}

static void test_urlpath_bounds(void)
{
    char small[8], *big;
    size_t n = 100000;

    CHECK_INT(urlpath_normalise("/abcdefghij", small, sizeof(small)), 7);
    CHECK_STR(small, "/abcdef");
    /* Long inputs: dot segments far in still count, nothing overflows. */
    big = malloc(n + 16);
    for (size_t i = 0; i < n; i += 2)
        memcpy(big + i, "/a", 2);
    big[n] = '\0';
    CHECK_INT(strlen(norm(big)), 2047);
    for (size_t i = 0; i < n; i += 3)
        memcpy(big + i, "/..", 3);
    strcpy(big + n - n % 3, "/api/x");
    CHECK_STR(norm(big), "/api/x");
    for (size_t i = 0; i < n; i++)
        big[i] = '/';
    strcpy(big + n, "api/x");
    CHECK_STR(norm(big), "/api/x");
    free(big);
}

int main(void)
{
    TEST_RUN(test_urlpath_spellings_of_one_path);
    TEST_RUN(test_urlpath_keeps_what_differs);
    TEST_RUN(test_urlpath_bounds);
    return TEST_REPORT();
}
