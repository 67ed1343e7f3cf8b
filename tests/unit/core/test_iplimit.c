/*
 * test_iplimit.c - connections per client address (core/iplimit.c): the
 * limit per address, IPv4 and IPv6, ports ignored, records freed at zero,
 * and many threads taking and putting back at once ending at zero.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>

#include "core/iplimit.h"
#include "test.h"

static struct sockaddr_storage v4(const char *ip, int port)
{
    struct sockaddr_storage ss;
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;

    memset(&ss, 0, sizeof(ss));
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, ip, &a->sin_addr);
    return ss;
}

static struct sockaddr_storage v6(const char *ip, int port)
{
    struct sockaddr_storage ss;
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

    memset(&ss, 0, sizeof(ss));
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)port);
    inet_pton(AF_INET6, ip, &a->sin6_addr);
    return ss;
}

#define SA(ss) ((const struct sockaddr *)&(ss))

static void test_iplimit_limit_per_address_ports_ignored(void)
{
    struct iplimit *t;
    struct permitd_error err;
    struct sockaddr_storage a1 = v4("192.0.2.1", 1000), a2 = v4("192.0.2.1", 2000),
                            a3 = v4("192.0.2.1", 3000), b = v4("192.0.2.2", 1000);

    CHECK_INT(iplimit_new(2, &t, &err), PERMITD_OK);
    CHECK_INT(iplimit_limit(t), 2);
    CHECK_INT(iplimit_take(t, SA(a1)), PERMITD_OK);
    CHECK(iplimit_allows(t, SA(a3)));
    CHECK_INT(iplimit_take(t, SA(a2)), PERMITD_OK);
    /* a third connection from the same address on another port */
    CHECK(!iplimit_allows(t, SA(a3)));
    CHECK_INT(iplimit_take(t, SA(a3)), PERMITD_EEXHAUSTED);
    CHECK_INT(iplimit_held(t, SA(a3)), 2);
    /* another address is not held back */
    CHECK(iplimit_allows(t, SA(b)));
    CHECK_INT(iplimit_take(t, SA(b)), PERMITD_OK);
    CHECK_INT(iplimit_addresses(t), 2);
    /* a port the address never used gives its slot back all the same */
    iplimit_put(t, SA(a3));
    CHECK_INT(iplimit_held(t, SA(a1)), 1);
    CHECK_INT(iplimit_take(t, SA(a3)), PERMITD_OK);
    iplimit_free(t);
}

static void test_iplimit_ipv6(void)
{
    struct iplimit *t;
    struct permitd_error err;
    struct sockaddr_storage a = v6("2001:db8::1", 1), a2 = v6("2001:db8::1", 2),
                            b = v6("2001:db8::2", 1), mapped = v6("::ffff:192.0.2.1", 1),
                            four = v4("192.0.2.1", 1);

    CHECK_INT(iplimit_new(1, &t, &err), PERMITD_OK);
    CHECK_INT(iplimit_take(t, SA(a)), PERMITD_OK);
    CHECK_INT(iplimit_take(t, SA(a2)), PERMITD_EEXHAUSTED);
    CHECK(!iplimit_allows(t, SA(a2)));
    CHECK_INT(iplimit_take(t, SA(b)), PERMITD_OK);
    /* v4 and v6 keys never mix */
    CHECK_INT(iplimit_take(t, SA(four)), PERMITD_OK);
    CHECK_INT(iplimit_take(t, SA(mapped)), PERMITD_OK);
    CHECK_INT(iplimit_addresses(t), 4);
    iplimit_put(t, SA(a2));
    CHECK_INT(iplimit_take(t, SA(a)), PERMITD_OK);
    iplimit_free(t);
}

static void test_iplimit_counts_freed_at_zero(void)
{
    struct iplimit *t;
    struct permitd_error err;
    struct sockaddr_storage a = v4("198.51.100.7", 5), b = v6("2001:db8::7", 5);

    CHECK_INT(iplimit_new(3, &t, &err), PERMITD_OK);
    /* libmicrohttpd's way: asked, then counted past the limit regardless */
    for (int i = 0; i < 4; i++)
        CHECK_INT(iplimit_count(t, SA(a)), PERMITD_OK);
    CHECK_INT(iplimit_held(t, SA(a)), 4);
    CHECK(!iplimit_allows(t, SA(a)));
    CHECK_INT(iplimit_count(t, SA(b)), PERMITD_OK);
    CHECK_INT(iplimit_addresses(t), 2);
    for (int i = 0; i < 4; i++)
        iplimit_put(t, SA(a));
    CHECK_INT(iplimit_held(t, SA(a)), 0);
    CHECK_INT(iplimit_addresses(t), 1);
    iplimit_put(t, SA(a));          /* nothing held: left alone, no underflow */
    CHECK_INT(iplimit_held(t, SA(a)), 0);
    iplimit_put(t, SA(b));
    CHECK_INT(iplimit_addresses(t), 0);
    CHECK(iplimit_allows(t, SA(a)));
    iplimit_free(t);
}

static void test_iplimit_no_limit_and_bad_limit(void)
{
    struct iplimit *t;
    struct permitd_error err;
    struct sockaddr_storage a = v4("192.0.2.9", 1);

    CHECK_INT(iplimit_new(0, &t, &err), PERMITD_OK);
    for (int i = 0; i < 1000; i++)
        CHECK_INT(iplimit_take(t, SA(a)), PERMITD_OK);
    CHECK(iplimit_allows(t, SA(a)));
    CHECK(iplimit_allows(t, NULL));
    CHECK_INT(iplimit_addresses(t), 0);     /* nothing counted without a limit */
    iplimit_free(t);
    iplimit_free(NULL);
    CHECK_INT(iplimit_new(-2, &t, &err), PERMITD_EINVAL);
    CHECK(t == NULL);
    CHECK_CONTAINS(err.message, "-2 is negative");
}

#define THREADS 8
#define ROUNDS 20000
#define LIMIT 3

struct racer {
    struct iplimit *t;
    int id;
    int taken, refused, over;
};

/* Takes and puts back, on 4 addresses (2 v4, 2 v6) shared by every
 * thread; whatever it holds never takes an address past the limit. */
static void *race(void *arg)
{
    struct racer *r = arg;
    struct sockaddr_storage addrs[4] = {v4("10.0.0.1", 0), v4("10.0.0.2", 0),
                                        v6("fd00::1", 0), v6("fd00::2", 0)};
    struct sockaddr_storage held[4];
    int nheld = 0;

    for (int i = 0; i < ROUNDS; i++) {
        struct sockaddr_storage a = addrs[(i + r->id) % 4];
        ((struct sockaddr_in *)&a)->sin_port = htons((uint16_t)(i + 1));
        if (nheld < 4 && (i + r->id) % 3 != 0) {
            if (iplimit_take(r->t, SA(a)) == PERMITD_OK) {
                held[nheld++] = a;
                r->taken++;
                if (iplimit_held(r->t, SA(a)) > LIMIT)
                    r->over++;
            } else {
                r->refused++;
            }
        } else if (nheld > 0) {
            iplimit_put(r->t, SA(held[--nheld]));
        }
    }
    while (nheld > 0)
        iplimit_put(r->t, SA(held[--nheld]));
    return NULL;
}

static void test_iplimit_threads_end_at_zero(void)
{
    struct iplimit *t;
    struct permitd_error err;
    struct racer r[THREADS];
    pthread_t th[THREADS];
    int taken = 0, refused = 0, over = 0;

    CHECK_INT(iplimit_new(LIMIT, &t, &err), PERMITD_OK);
    /* One address held full all along: its takes are refused however the
     * threads are scheduled (on a loaded machine they may run one after
     * another, and then the other three never meet the limit). */
    for (int i = 0; i < LIMIT; i++) {
        struct sockaddr_storage a = v4("10.0.0.1", 60000 + i);
        CHECK_INT(iplimit_take(t, SA(a)), PERMITD_OK);
    }
    for (int i = 0; i < THREADS; i++) {
        r[i] = (struct racer){.t = t, .id = i};
        CHECK_INT(pthread_create(&th[i], NULL, race, &r[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        taken += r[i].taken;
        refused += r[i].refused;
        over += r[i].over;
    }
    for (int i = 0; i < LIMIT; i++) {
        struct sockaddr_storage a = v4("10.0.0.1", 60000 + i);
        iplimit_put(t, SA(a));
    }
    CHECK(taken > 0);
    CHECK(refused > 0);     /* the full address, and the others' when threads met */
    CHECK_INT(over, 0);
    CHECK_INT(iplimit_addresses(t), 0);
    iplimit_free(t);
}

int main(void)
{
    TEST_RUN(test_iplimit_limit_per_address_ports_ignored);
    TEST_RUN(test_iplimit_ipv6);
    TEST_RUN(test_iplimit_counts_freed_at_zero);
    TEST_RUN(test_iplimit_no_limit_and_bad_limit);
    TEST_RUN(test_iplimit_threads_end_at_zero);
    return TEST_REPORT();
}
