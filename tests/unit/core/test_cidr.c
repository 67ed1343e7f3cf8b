/*
 * test_cidr.c - --trusted-proxies' address ranges: parsing (and its
 * errors), IPv4, IPv6 and IPv4-mapped matches.
 */
#include "core/cidr.h"
#include "test.h"

static void test_cidr_matches(void)
{
    struct cidr_list l;
    struct permitd_error err;

    CHECK_INT(cidr_list_parse(" 10.0.0.0/8, 127.0.0.1 ,2001:db8::/32,192.168.1.128/25", &l,
                              &err), PERMITD_OK);
    CHECK_INT(l.n, 4);
    CHECK(cidr_list_match(&l, "10.255.1.2"));
    CHECK(!cidr_list_match(&l, "11.0.0.1"));
    CHECK(cidr_list_match(&l, "127.0.0.1"));
    CHECK(!cidr_list_match(&l, "127.0.0.2"));
    CHECK(cidr_list_match(&l, "::ffff:10.1.2.3"));        /* a dual-stack socket's view */
    CHECK(cidr_list_match(&l, "2001:db8:ffff::1"));
    CHECK(!cidr_list_match(&l, "2001:db9::1"));
    CHECK(cidr_list_match(&l, "192.168.1.200"));
    CHECK(!cidr_list_match(&l, "192.168.1.127"));
    CHECK(!cidr_list_match(&l, "not an address"));
    CHECK(!cidr_list_match(&l, "127.000.0.1"));
    CHECK_INT(cidr_list_parse("", &l, &err), PERMITD_OK);
    CHECK_INT(l.n, 0);
    CHECK(!cidr_list_match(&l, "127.0.0.1"));
    CHECK_INT(cidr_list_parse("0.0.0.0/0", &l, &err), PERMITD_OK);
    CHECK(cidr_list_match(&l, "8.8.8.8"));
    CHECK(!cidr_list_match(&l, "::1"));
}

static void test_cidr_errors_name_the_item(void)
{
    struct cidr_list l;
    struct permitd_error err;

    CHECK_INT(cidr_list_parse("10.0.0.0/8,10.0.0.300", &l, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "\"10.0.0.300\" is not an IPv4 or IPv6 address");
    CHECK_INT(cidr_list_parse("10.0.0.0/33", &l, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "prefix length \"33\"");
    CHECK_INT(cidr_list_parse("10.0.0.1/8", &l, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "bits set past the /8 prefix");
    CHECK_INT(cidr_list_parse("10.0.0.0/8,", &l, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "item 2 is empty");
    CHECK_INT(cidr_list_parse("::1/129", &l, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "from 0 to 128");
}

int main(void)
{
    TEST_RUN(test_cidr_matches);
    TEST_RUN(test_cidr_errors_name_the_item);
    return TEST_REPORT();
}
