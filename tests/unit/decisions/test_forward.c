/*
 * test_forward.c - forward-auth's pure parts: the original request read
 * from each gateway's headers, the client's address through trusted
 * proxies, and which rules match.
 */
#include <stdlib.h>
#include <string.h>

#include "decisions/forward.h"
#include "test.h"

static void test_forward_original_from_each_gateway(void)
{
    struct forward_original o;

    /* nginx: X-Original-* from its config, X-Forwarded-Host */
    forward_original_parse(&o, "GET", "/v1/forward-auth", "post", NULL, "/api/x?y=1#f", NULL,
                           "API.example.com:8443", "permitd:8080");
    CHECK_STR(o.method, "POST");
    CHECK_STR(o.path, "/api/x");
    CHECK_STR(o.host, "api.example.com");
    /* Traefik, Caddy: X-Forwarded-* */
    forward_original_parse(&o, "GET", "/v1/forward-auth", NULL, "DELETE", NULL, "/t?q",
                           "a.example, b.example", NULL);
    CHECK_STR(o.method, "DELETE");
    CHECK_STR(o.path, "/t");
    CHECK_STR(o.host, "a.example");
    /* Envoy: the request's own method, the path after the prefix, Host */
    forward_original_parse(&o, "PUT", "/v1/forward-auth/items/7", NULL, NULL, NULL, NULL, NULL,
                           "[2001:db8::1]:80");
    CHECK_STR(o.method, "PUT");
    CHECK_STR(o.path, "/items/7");
    CHECK_STR(o.host, "[2001:db8::1]");
    forward_original_parse(&o, "GET", "/v1/forward-auth", NULL, NULL, NULL, NULL, NULL, NULL);
    CHECK_STR(o.path, "/");
    CHECK_STR(o.host, "");
}

static void test_forward_client_address_trusts_only_its_proxies(void)
{
    struct cidr_list t;
    struct permitd_error err;
    char out[64];

    CHECK_INT(cidr_list_parse("127.0.0.1,10.0.0.0/8", &t, &err), PERMITD_OK);
    /* An untrusted peer: its headers are not read. */
    forward_client_address(&t, "192.0.2.1", "198.51.100.1", "198.51.100.2", out, sizeof(out));
    CHECK_STR(out, "192.0.2.1");
    /* The right-most untrusted address; what was left of it is not read. */
    forward_client_address(&t, "127.0.0.1", "6.6.6.6, 203.0.113.5, 10.1.1.1", NULL, out,
                           sizeof(out));
    CHECK_STR(out, "203.0.113.5");
    /* All trusted: the left-most. */
    forward_client_address(&t, "127.0.0.1", "10.0.0.9, 10.0.0.8", NULL, out, sizeof(out));
    CHECK_STR(out, "10.0.0.9");
    /* Garbage stops the walk at the last address vouched for. */
    forward_client_address(&t, "127.0.0.1", "evil, 10.0.0.7", NULL, out, sizeof(out));
    CHECK_STR(out, "10.0.0.7");
    /* X-Real-IP when no X-Forwarded-For, and only an address. */
    forward_client_address(&t, "127.0.0.1", NULL, "203.0.113.9", out, sizeof(out));
    CHECK_STR(out, "203.0.113.9");
    forward_client_address(&t, "127.0.0.1", NULL, "nonsense", out, sizeof(out));
    CHECK_STR(out, "127.0.0.1");
}

static void test_forward_rules_match_in_order(void)
{
    struct forward_rules *t = NULL;
    struct permitd_error err;
    struct gateway_rule v[3];
    struct forward_match m[4];
    struct forward_original o = {"GET", "api.example.com", "/api/users/1"};

    memset(v, 0, sizeof(v));
    strcpy(v[0].path_prefix, "/api/");
    strcpy(v[0].policy, "all");
    v[0].permits = 1;
    strcpy(v[1].host, "api.example.com");
    strcpy(v[1].path_prefix, "/api/users");
    strcpy(v[1].method, "GET");
    strcpy(v[1].policy, "users");
    v[1].key_source = GATEWAY_KEY_HEADER;
    strcpy(v[1].key_header, "X-Api-Key");
    v[1].permits = 2;
    strcpy(v[2].host, "other.example.com");
    strcpy(v[2].path_prefix, "/");
    strcpy(v[2].policy, "other");
    CHECK_INT(forward_rules_new(&t, &err), PERMITD_OK);
    CHECK_INT(forward_rules_match(t, &o, m, 4), 0);
    CHECK_INT(forward_rules_replace(t, v, 3, &err), PERMITD_OK);
    CHECK_INT(forward_rules_count(t), 3);
    CHECK_INT(forward_rules_match(t, &o, m, 4), 2);
    CHECK_STR(m[0].policy, "all");
    CHECK_STR(m[1].policy, "users");
    CHECK_STR(m[1].key_header, "X-Api-Key");
    CHECK_INT(m[1].permits, 2);
    CHECK_INT(forward_rules_match(t, &o, m, 1), 1);           /* at most max */
    strcpy(o.method, "POST");
    CHECK_INT(forward_rules_match(t, &o, m, 4), 1);
    strcpy(o.path, "/ap");
    CHECK_INT(forward_rules_match(t, &o, m, 4), 0);
    CHECK_INT(forward_rules_replace(t, NULL, 0, &err), PERMITD_OK);
    CHECK_INT(forward_rules_count(t), 0);
    forward_rules_free(t);
    forward_rules_free(NULL);
}

static void test_forward_path(void)
{
    CHECK(forward_path("/v1/forward-auth"));
    CHECK(forward_path("/v1/forward-auth/a/b"));
    CHECK(!forward_path("/v1/forward-authx"));
    CHECK(!forward_path("/v1/forward"));
}

int main(void)
{
    TEST_RUN(test_forward_original_from_each_gateway);
    TEST_RUN(test_forward_client_address_trusts_only_its_proxies);
    TEST_RUN(test_forward_rules_match_in_order);
    TEST_RUN(test_forward_path);
    return TEST_REPORT();
}
