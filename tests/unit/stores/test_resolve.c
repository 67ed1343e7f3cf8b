/*
 * test_resolve.c - the Redis host's address: numeric hosts at once, names
 * looked up off the caller's thread with IPv4 first, the next address after
 * a failed connect. Run with tests/integration/slowdns.c preloaded (ctest
 * does), whose "two.slow.test" answers ::1 then 127.0.0.1; a slow DNS is
 * test_redis.py's.
 */
#include <stdint.h>
#include <time.h>

#include "stores/resolve.h"
#include "test.h"

/* The address rs gives now must be want. A macro, so a failure names the
 * caller's line. */
#define CHECK_ADDRESS(rs, want) do { \
    char ip_[RESOLVE_ADDR_MAX] = "", why_[200] = ""; \
    CHECK_INT(resolver_address((rs), ip_, why_, sizeof(why_)), 0); \
    CHECK_STR(ip_, (want)); \
} while (0)

static void test_resolve_numeric_hosts_need_no_lookup(void)
{
    const char *hosts[] = {"127.0.0.1", "::1", "10.1.2.3", "fe80::1"};
    struct permitd_error err = {0, ""};

    for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
        struct resolver *rs = NULL;
        CHECK_INT(resolver_new(hosts[i], 0, &rs, &err), PERMITD_OK);
        CHECK_ADDRESS(rs, hosts[i]);
        resolver_failed(rs, hosts[i]);     /* nothing else to try: the same */
        CHECK_ADDRESS(rs, hosts[i]);
        resolver_free(rs);
    }
}

static void test_resolve_names_ipv4_first_then_the_next(void)
{
    struct permitd_error err = {0, ""};
    struct resolver *rs = NULL;

    CHECK_INT(resolver_new("two.slow.test", 5000, &rs, &err), PERMITD_OK);
    CHECK_ADDRESS(rs, "127.0.0.1");     /* IPv4 first, as hiredis connects */
    /* A failure reported for an address no longer in use moves nothing
     * (several connections fail on one address at once). */
    resolver_failed(rs, "::1");
    CHECK_ADDRESS(rs, "127.0.0.1");
    /* A failure on the address in use moves to the next, and round. */
    resolver_failed(rs, "127.0.0.1");
    CHECK_ADDRESS(rs, "::1");
    resolver_failed(rs, "::1");
    CHECK_ADDRESS(rs, "127.0.0.1");
    resolver_free(rs);

    /* A plain name through the system's resolver: /etc/hosts. */
    CHECK_INT(resolver_new("localhost", 5000, &rs, &err), PERMITD_OK);
    CHECK_ADDRESS(rs, "127.0.0.1");
    resolver_free(rs);
}

static void test_resolve_answers_why_while_looking_up(void)
{
    struct permitd_error err = {0, ""};
    struct resolver *rs = NULL;
    char ip[RESOLVE_ADDR_MAX] = "", why[200] = "";

    /* The shim's lookups take SLOWDNS_MS (set to 300 by ctest): no wait at
     * start, so the first ask finds nothing yet, without blocking. */
    CHECK_INT(resolver_new("late.slow.test", 0, &rs, &err), PERMITD_OK);
    CHECK_INT(resolver_address(rs, ip, why, sizeof(why)), -1);
    CHECK_STR(why, "still looking up the host name");
    for (int i = 0; i < 100 && resolver_address(rs, ip, why, sizeof(why)) != 0; i++) {
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    CHECK_STR(ip, "127.0.0.1");
    resolver_free(rs);
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_resolve_free_does_not_wait_for_a_lookup(void)
{
    struct permitd_error err = {0, ""};
    struct resolver *rs = NULL;
    int64_t t0;

    /* A lookup of 3 s is running; shutting down leaves it to its thread
     * (which frees the resolver when getaddrinfo() returns). */
    CHECK_INT(resolver_new("3000ms.slow.test", 100, &rs, &err), PERMITD_OK);
    t0 = now_ms();
    resolver_free(rs);
    CHECK(now_ms() - t0 < 1500);
}

static void test_resolve_rejects_a_host_too_long(void)
{
    struct permitd_error err = {0, ""};
    struct resolver *rs = NULL;
    char host[300];

    memset(host, 'a', sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    CHECK_INT(resolver_new(host, 0, &rs, &err), PERMITD_EINVAL);
    CHECK(rs == NULL);
    CHECK_CONTAINS(err.message, "redis host");
}

int main(void)
{
    TEST_RUN(test_resolve_numeric_hosts_need_no_lookup);
    TEST_RUN(test_resolve_names_ipv4_first_then_the_next);
    TEST_RUN(test_resolve_answers_why_while_looking_up);
    TEST_RUN(test_resolve_free_does_not_wait_for_a_lookup);
    TEST_RUN(test_resolve_rejects_a_host_too_long);
    return TEST_REPORT();
}
