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
    struct forward_original o[FORWARD_READINGS_MAX];
    struct permitd_error err;
    /* Every header there, each style's a different request. */
    struct forward_headers h = {"GET", "/v1/forward-auth/nginx", "post", "/api/x?y=1#f",
                                "DELETE", "/t?q", "API.example.com:8443, b.example",
                                "permitd:8080"};

    /* nginx: X-Original-* from its config, X-Forwarded-Host; nothing else */
    CHECK_INT(forward_original_parse(o, FORWARD_STYLE_NGINX, &h, &err), 1);
    CHECK_STR(o[0].method, "POST");
    CHECK_STR(o[0].path, "/api/x");
    CHECK_STR(o[0].host, "api.example.com");
    /* Traefik, Caddy: X-Forwarded-*; X-Original-* ignored */
    CHECK_INT(forward_original_parse(o, FORWARD_STYLE_FORWARDED, &h, &err), 1);
    CHECK_STR(o[0].method, "DELETE");
    CHECK_STR(o[0].path, "/t");
    CHECK_STR(o[0].host, "api.example.com");
    /* Envoy: the request's own method, the path after the prefix, Host */
    h.own_method = "PUT";
    h.own_path = "/v1/forward-auth/envoy/items/%37";
    h.host = "[2001:db8::1]:80";
    CHECK_INT(forward_original_parse(o, FORWARD_STYLE_ENVOY, &h, &err), 1);
    CHECK_STR(o[0].method, "PUT");
    CHECK_STR(o[0].path, "/items/7");
    CHECK_STR(o[0].host, "[2001:db8::1]");
    /* The bare path: every reading there is. */
    h.own_path = "/v1/forward-auth/legacy/p";
    CHECK_INT(forward_original_parse(o, FORWARD_STYLE_ANY, &h, &err), 3);
    CHECK_STR(o[0].path, "/legacy/p");
    CHECK_STR(o[1].path, "/api/x");
    CHECK_STR(o[2].path, "/t");
    h.x_original_uri = h.x_forwarded_uri = NULL;
    h.own_path = "/v1/forward-auth";
    CHECK_INT(forward_original_parse(o, FORWARD_STYLE_ANY, &h, &err), 1);
    CHECK_STR(o[0].path, "/");
    /* A style whose header is missing is an error, not "/". */
    CHECK_INT(forward_original_parse(o, FORWARD_STYLE_NGINX, &h, &err), PERMITD_EINVAL);
    CHECK(strstr(err.message, "X-Original-URI") != NULL);
    CHECK_INT(forward_original_parse(o, FORWARD_STYLE_FORWARDED, &h, &err), PERMITD_EINVAL);
    CHECK(strstr(err.message, "X-Forwarded-Uri") != NULL);
}

static void test_forward_style_of_path(void)
{
    const char *tail = NULL;

    CHECK_INT(forward_style_of("/v1/forward-auth/nginx", &tail), FORWARD_STYLE_NGINX);
    CHECK_INT(forward_style_of("/v1/forward-auth/forwarded", &tail), FORWARD_STYLE_FORWARDED);
    CHECK_INT(forward_style_of("/v1/forward-auth/envoy/a/b", &tail), FORWARD_STYLE_ENVOY);
    CHECK_STR(tail, "/a/b");
    CHECK_INT(forward_style_of("/v1/forward-auth/envoy", &tail), FORWARD_STYLE_ENVOY);
    CHECK_STR(tail, "");
    /* nginx and forwarded name no path: anything after is the bare path's */
    CHECK_INT(forward_style_of("/v1/forward-auth/nginx/x", &tail), FORWARD_STYLE_ANY);
    CHECK_STR(tail, "/nginx/x");
    CHECK_INT(forward_style_of("/v1/forward-auth/envoyx", &tail), FORWARD_STYLE_ANY);
    CHECK_INT(forward_style_of("/v1/forward-auth", &tail), FORWARD_STYLE_ANY);
    CHECK_STR(tail, "");
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
    struct forward_original o = {"GET", "api.example.com", "/api/users/1"}, two[2];

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
    CHECK_INT(forward_rules_match(t, &o, 1, m, 4), 0);
    CHECK_INT(forward_rules_replace(t, v, 3, &err), PERMITD_OK);
    CHECK_INT(forward_rules_count(t), 3);
    CHECK_INT(forward_rules_match(t, &o, 1, m, 4), 2);
    CHECK_STR(m[0].policy, "all");
    CHECK_STR(m[1].policy, "users");
    CHECK_STR(m[1].key_header, "X-Api-Key");
    CHECK_INT(m[1].permits, 2);
    CHECK_INT(forward_rules_match(t, &o, 1, m, 1), 1);           /* at most max */
    strcpy(o.method, "POST");
    CHECK_INT(forward_rules_match(t, &o, 1, m, 4), 1);
    strcpy(o.path, "/ap");
    CHECK_INT(forward_rules_match(t, &o, 1, m, 4), 0);
    /* Any of several readings matching is a match; each rule once. */
    two[0] = o;
    two[1] = (struct forward_original){"GET", "api.example.com", "/api/users/1"};
    CHECK_INT(forward_rules_match(t, two, 2, m, 4), 2);
    CHECK_STR(m[0].policy, "all");
    CHECK_STR(m[1].policy, "users");
    /* Prefixes are normalised when replaced: "/x/../api/" is "/api/". */
    strcpy(v[0].path_prefix, "//x/../%61pi/");
    CHECK_INT(forward_rules_replace(t, v, 1, &err), PERMITD_OK);
    CHECK_INT(forward_rules_match(t, &two[1], 1, m, 4), 1);
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
    TEST_RUN(test_forward_style_of_path);
    TEST_RUN(test_forward_client_address_trusts_only_its_proxies);
    TEST_RUN(test_forward_rules_match_in_order);
    TEST_RUN(test_forward_path);
    return TEST_REPORT();
}
