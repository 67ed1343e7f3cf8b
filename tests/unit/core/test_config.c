/*
 * test_config.c - the settings table: defaults, env, flags, and errors that
 * name the setting and the value.
 */
#include <stdlib.h>
#include <unistd.h>

#include "core/config.h"
#include "test.h"

static int load(struct config *cfg, struct permitd_error *err, int argc, const char **argv)
{
    FILE *out = fopen("/dev/null", "w");
    int rc = config_load(cfg, argc, (char **)argv, out, err);
    fclose(out);
    return rc;
}

static void clear_env(void)
{
    unsetenv("PERMITD_LISTEN");
    unsetenv("PERMITD_THREADS");
    unsetenv("PERMITD_REDIS_URL");
    unsetenv("PERMITD_REDIS_PREFIX");
    unsetenv("PERMITD_LOG_LEVEL");
}

static void test_config_defaults(void)
{
    struct config cfg;
    struct permitd_error err;
    const char *argv[] = {"permitd"};

    clear_env();
    CHECK_INT(load(&cfg, &err, 1, argv), PERMITD_OK);
    CHECK_STR(cfg.listen_host, "127.0.0.1");
    CHECK_INT(cfg.listen_port, 8080);
    CHECK_STR(cfg.redis_host, "127.0.0.1");
    CHECK_INT(cfg.redis_port, 6379);
    CHECK_STR(cfg.redis_prefix, "permitd:");
    CHECK_INT(cfg.redis_timeout_ms, 50);
    CHECK_INT(cfg.max_body_bytes, 65536);
    {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        CHECK_INT(cfg.threads, cpus < 1 ? 1 : (cpus > 256 ? 256 : cpus));   /* one loop per CPU */
    }
}

static void test_config_env_then_flags(void)
{
    struct config cfg;
    struct permitd_error err;
    const char *argv[] = {"permitd", "--threads", "7", "--listen=0.0.0.0:9000"};

    clear_env();
    setenv("PERMITD_THREADS", "3", 1);
    setenv("PERMITD_LISTEN", "127.0.0.1:7000", 1);
    setenv("PERMITD_REDIS_PREFIX", "rl:", 1);
    CHECK_INT(load(&cfg, &err, 4, argv), PERMITD_OK);
    CHECK_INT(cfg.threads, 7);                 /* flag wins */
    CHECK_INT(cfg.listen_port, 9000);
    CHECK_STR(cfg.listen_host, "0.0.0.0");
    CHECK_STR(cfg.redis_prefix, "rl:");        /* env applies */
    clear_env();
}

static void test_config_bad_values_name_setting_and_value(void)
{
    struct config cfg;
    struct permitd_error err;

    clear_env();
    setenv("PERMITD_THREADS", "abc", 1);
    const char *a0[] = {"permitd"};
    CHECK_INT(load(&cfg, &err, 1, a0), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "PERMITD_THREADS");
    CHECK_CONTAINS(err.message, "\"abc\"");
    clear_env();

    const char *a1[] = {"permitd", "--threads", "0"};
    CHECK_INT(load(&cfg, &err, 3, a1), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "--threads");
    CHECK_CONTAINS(err.message, "\"0\"");

    const char *a2[] = {"permitd", "--listen", "nonsense"};
    CHECK_INT(load(&cfg, &err, 3, a2), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "--listen");
    CHECK_CONTAINS(err.message, "nonsense");

    const char *a3[] = {"permitd", "--redis-url", "http://x"};
    CHECK_INT(load(&cfg, &err, 3, a3), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "--redis-url");
    CHECK_CONTAINS(err.message, "http://x");

    const char *a4[] = {"permitd", "--log-level", "loud"};
    CHECK_INT(load(&cfg, &err, 3, a4), PERMITD_EINVAL);
    CHECK_STR(err.message, "--log-level (PERMITD_LOG_LEVEL): \"loud\" is not one of debug, "
                           "info, warn, error");

    const char *a5[] = {"permitd", "--nope"};
    CHECK_INT(load(&cfg, &err, 2, a5), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "--nope");

    const char *a6[] = {"permitd", "--redis-prefix", "a{b"};
    CHECK_INT(load(&cfg, &err, 3, a6), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "a{b");

    const char *a7[] = {"permitd", "--threads"};
    CHECK_INT(load(&cfg, &err, 2, a7), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "needs a value");
}

static void test_config_help_and_version(void)
{
    struct config cfg;
    struct permitd_error err;
    const char *a[] = {"permitd", "--help"};
    const char *b[] = {"permitd", "--version"};

    clear_env();
    CHECK_INT(load(&cfg, &err, 2, a), 1);
    CHECK_INT(load(&cfg, &err, 2, b), 1);
}

static void test_config_redis_urls(void)
{
    struct config cfg;
    struct permitd_error err;

    memset(&cfg, 0, sizeof(cfg));
    CHECK_INT(config_parse_redis_url(&cfg, "redis://db.example:6380/2", &err), PERMITD_OK);
    CHECK_STR(cfg.redis_host, "db.example");
    CHECK_INT(cfg.redis_port, 6380);
    CHECK_INT(cfg.redis_db, 2);

    CHECK_INT(config_parse_redis_url(&cfg, "redis://:s3cret@h", &err), PERMITD_OK);
    CHECK_STR(cfg.redis_password, "s3cret");
    CHECK_STR(cfg.redis_user, "");
    CHECK_INT(cfg.redis_port, 6379);

    CHECK_INT(config_parse_redis_url(&cfg, "redis://alice:pw@h:1/0", &err), PERMITD_OK);
    CHECK_STR(cfg.redis_user, "alice");
    CHECK_STR(cfg.redis_password, "pw");

    CHECK_INT(config_parse_redis_url(&cfg, "redis://[::1]:7000", &err), PERMITD_OK);
    CHECK_STR(cfg.redis_host, "::1");
    CHECK_INT(cfg.redis_port, 7000);

    CHECK_INT(config_parse_redis_url(&cfg, "unix:///run/redis.sock?db=4", &err), PERMITD_OK);
    CHECK_STR(cfg.redis_socket, "/run/redis.sock");
    CHECK_INT(cfg.redis_db, 4);

    CHECK_INT(config_parse_redis_url(&cfg, "redis://h:99999", &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "99999");
    CHECK_INT(config_parse_redis_url(&cfg, "redis://h/x", &err), PERMITD_EINVAL);
    CHECK_INT(config_parse_redis_url(&cfg, "unix://relative.sock", &err), PERMITD_EINVAL);

    /* The password never appears in an error or in the masked URL. */
    CHECK_INT(config_parse_redis_url(&cfg, "redis://:hunter2@h:0", &err), PERMITD_EINVAL);
    CHECK(strstr(err.message, "hunter2") == NULL);
    /* ... nor in the error for a scheme permitd does not take. */
    CHECK_INT(config_parse_redis_url(&cfg, "rediss://:hunter2@h:6379", &err), PERMITD_EINVAL);
    CHECK(strstr(err.message, "hunter2") == NULL);
    CHECK_CONTAINS(err.message, "rediss://");
    CHECK_INT(config_parse_redis_url(&cfg, "h:hunter2@x", &err), PERMITD_EINVAL);
    CHECK(strstr(err.message, "hunter2") == NULL);
    /* A password holding '/' (or '@') is the password, whole, and an
     * error names the URL with it masked (it took "se" for a port, or
     * "cret@h" for a database, and echoed them). */
    CHECK_INT(config_parse_redis_url(&cfg, "redis://:se/cret@h:99999", &err), PERMITD_EINVAL);
    CHECK(strstr(err.message, "se/") == NULL && strstr(err.message, "cret") == NULL);
    CHECK_CONTAINS(err.message, "99999");
    CHECK_CONTAINS(err.message, "(in redis://:***@h:99999)");
    CHECK_INT(config_parse_redis_url(&cfg, "redis://u:se/cret@h:1/x", &err), PERMITD_EINVAL);
    CHECK(strstr(err.message, "cret") == NULL);
    CHECK_CONTAINS(err.message, "redis://u:***@h:1/x");
    CHECK_INT(config_parse_redis_url(&cfg, "redis://u:12/se@cret@h:2/3", &err), PERMITD_OK);
    CHECK_STR(cfg.redis_password, "12/se@cret");
    CHECK_STR(cfg.redis_host, "h");
    CHECK_INT(cfg.redis_port, 2);
    CHECK_INT(cfg.redis_db, 3);
    char masked[300];
    CHECK_INT(config_parse_redis_url(&cfg, "redis://:hunter2@h:1", &err), PERMITD_OK);
    config_redis_url_masked(&cfg, masked, sizeof(masked));
    CHECK(strstr(masked, "hunter2") == NULL);
    CHECK_CONTAINS(masked, "***");
}

/* redis+cluster:// seed lists (cluster.c's discover takes them). */
static void test_config_redis_cluster_urls(void)
{
    static const struct { const char *url; const char *want[3]; } bad[] = {
        {"redis://h:1,h:2", {"scheme \"redis\" is not redis+cluster"}},
        {"h:1,h:2", {"no scheme"}},
        {"redis+cluster://", {"no seed node given"}},
        {"redis+cluster://a:1,,b:2", {"seed 2 is empty"}},
        {"redis+cluster://a:1,b:2,", {"seed 3 is empty"}},
        {"redis+cluster://a:1,b:99999", {"seed 2 \"b:99999\"", "port \"99999\""}},
        {"redis+cluster://a:0", {"seed 1 \"a:0\"", "port \"0\""}},
        {"redis+cluster://a:", {"seed 1 \"a:\"", "port \"\""}},
        {"redis+cluster://a:+1", {"port \"+1\""}},
        {"redis+cluster://:7000", {"seed 1 \":7000\" has no host"}},
        {"redis+cluster://::1:7000", {"seed 1 \"::1:7000\"", "brackets"}},
        {"redis+cluster://[::1:7000", {"seed 1 \"[::1:7000\"", "[address]:port"}},
        {"redis+cluster://[::1]x", {"[address]:port"}},
        {"redis+cluster://a b:1", {"seed 1 \"a b:1\"", "' '"}},
        {"redis+cluster://a:1,b:2,a:1", {"seed 3 \"a:1\" repeats seed 1"}},
        {"redis+cluster://a:1/2", {"database \"2\"", "database 0 only"}},
        {"redis+cluster://u:@a:1", {"empty password", "user \"u\""}},
        {"redis+cluster://a:1?db=2", {"port \"1?db=2\""}},
    };
    struct config_redis_cluster c;
    struct permitd_error err;
    char masked[512], many[512];

    CHECK_INT(config_parse_redis_cluster_url("redis+cluster://10.0.0.1:7000,node-2.example,"
                                             "[::1]:7002", &c, &err), PERMITD_OK);
    CHECK_INT(c.nseeds, 3);
    CHECK_STR(c.seeds[0].host, "10.0.0.1");
    CHECK_INT(c.seeds[0].port, 7000);
    CHECK_STR(c.seeds[1].host, "node-2.example");
    CHECK_INT(c.seeds[1].port, 6379);
    CHECK_STR(c.seeds[2].host, "::1");
    CHECK_INT(c.seeds[2].port, 7002);
    CHECK_STR(c.user, "");
    CHECK_STR(c.password, "");
    config_redis_cluster_url_masked(&c, masked, sizeof(masked));
    CHECK_STR(masked, "redis+cluster://10.0.0.1:7000,node-2.example:6379,[::1]:7002");

    /* user:password, and a password holding '@', ',' and '/'; /0 is fine. */
    CHECK_INT(config_parse_redis_cluster_url("redis+cluster://alice:p@s,s/w@h:1,h:2/0", &c, &err),
              PERMITD_OK);
    CHECK_STR(c.user, "alice");
    CHECK_STR(c.password, "p@s,s/w");
    CHECK_INT(c.nseeds, 2);
    config_redis_cluster_url_masked(&c, masked, sizeof(masked));
    CHECK_STR(masked, "redis+cluster://alice:***@h:1,h:2");
    CHECK_INT(config_parse_redis_cluster_url("redis+cluster://hunter2@h:1", &c, &err), PERMITD_OK);
    CHECK_STR(c.user, "");
    CHECK_STR(c.password, "hunter2");

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&err, 0, sizeof(err));
        CHECK_INT(config_parse_redis_cluster_url(bad[i].url, &c, &err), PERMITD_EINVAL);
        for (int w = 0; w < 3 && bad[i].want[w]; w++)
            CHECK_CONTAINS(err.message, bad[i].want[w]);
        /* and the same with a password: it never shows */
        if (strncmp(bad[i].url, "redis+cluster://", 16) == 0 && strchr(bad[i].url, '@') == NULL) {
            char withpw[256];
            snprintf(withpw, sizeof(withpw), "redis+cluster://bob:Hunter2@%s", bad[i].url + 16);
            memset(&err, 0, sizeof(err));
            CHECK_INT(config_parse_redis_cluster_url(withpw, &c, &err), PERMITD_EINVAL);
            CHECK(strstr(err.message, "Hunter2") == NULL);
        }
    }
    CHECK_INT(config_parse_redis_cluster_url("redis://:Hunter2@h:1", &c, &err), PERMITD_EINVAL);
    CHECK(strstr(err.message, "Hunter2") == NULL);

    /* At most CONFIG_REDIS_SEEDS_MAX seeds. */
    strcpy(many, "redis+cluster://");
    for (int i = 0; i <= CONFIG_REDIS_SEEDS_MAX; i++)
        snprintf(many + strlen(many), sizeof(many) - strlen(many), "%sh:%d", i ? "," : "", i + 1);
    CHECK_INT(config_parse_redis_cluster_url(many, &c, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "more than 16 seed nodes");
    *strrchr(many, ',') = '\0';
    CHECK_INT(config_parse_redis_cluster_url(many, &c, &err), PERMITD_OK);
    CHECK_INT(c.nseeds, CONFIG_REDIS_SEEDS_MAX);

    /* The single-node parser is as it was: a cluster URL is not its form. */
    {
        struct config cfg;
        memset(&cfg, 0, sizeof(cfg));
        CHECK_INT(config_parse_redis_url(&cfg, "redis+cluster://h:1,h:2", &err), PERMITD_EINVAL);
    }
}

/* --redis-url takes a cluster URL: the seeds, and the user and password
 * every node is sent in AUTH; a bad one names the setting and the seed;
 * the masked form for the log hides the password. */
/* rediss:// and rediss+cluster://: the plain forms over TLS; the client
 * certificate and key go together. */
static void test_config_redis_tls_urls(void)
{
    struct config cfg;
    struct permitd_error err;
    char masked[512];
    const char *single[] = {"permitd", "--redis-url", "rediss://u:pw@cache.example:6380/2"};
    const char *cluster[] = {"permitd", "--redis-url", "rediss+cluster://:pw@10.0.0.1:7000,10.0.0.2:7000"};
    const char *plain[] = {"permitd", "--redis-url", "redis://h:6379"};
    const char *half[] = {"permitd", "--redis-url", "rediss://h", "--redis-tls-cert-file", "/c.pem"};

    clear_env();
    CHECK_INT(load(&cfg, &err, 3, single), PERMITD_OK);
    CHECK_INT(cfg.redis_tls, 1);
    CHECK_INT(cfg.redis_cluster, 0);
    CHECK_STR(cfg.redis_host, "cache.example");
    CHECK_INT(cfg.redis_port, 6380);
    CHECK_INT(cfg.redis_db, 2);
    CHECK_STR(cfg.redis_user, "u");
    config_redis_url_masked(&cfg, masked, sizeof(masked));
    CHECK_STR(masked, "rediss://u:***@cache.example:6380/2");
    CHECK_INT(cfg.redis_tls_insecure_skip_verify, 0);          /* verification on by default */

    CHECK_INT(load(&cfg, &err, 3, cluster), PERMITD_OK);
    CHECK_INT(cfg.redis_tls, 1);
    CHECK_INT(cfg.redis_cluster, 1);
    CHECK_INT(cfg.redis_seeds.nseeds, 2);
    CHECK_STR(cfg.redis_password, "pw");

    CHECK_INT(load(&cfg, &err, 3, plain), PERMITD_OK);
    CHECK_INT(cfg.redis_tls, 0);

    CHECK_INT(load(&cfg, &err, 5, half), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "--redis-tls-key-file");
}

/* redis+sentinel://: the sentinels as seeds, the master's name after the
 * '/', the user and password the master's; the sentinels' own password a
 * setting of its own; the masked form hides the password. */
static void test_config_redis_sentinel_urls(void)
{
    struct config cfg;
    struct permitd_error err;
    char masked[512];
    const char *plain[] = {"permitd", "--redis-url",
                           "redis+sentinel://al:p/w@s1:26379,10.0.0.2:26380/mymaster",
                           "--redis-sentinel-password", "sp"};
    const char *tls[] = {"permitd", "--redis-url", "rediss+sentinel://s1,s2/m"};
    const char *noname[] = {"permitd", "--redis-url", "redis+sentinel://s1:26379"};
    const char *badname[] = {"permitd", "--redis-url", "redis+sentinel://s1/a/b"};
    const char *badseed[] = {"permitd", "--redis-url", "redis+sentinel://u:Hunter2@s1:x/m"};

    clear_env();
    CHECK_INT(load(&cfg, &err, 5, plain), PERMITD_OK);
    CHECK_INT(cfg.redis_sentinel, 1);
    CHECK_INT(cfg.redis_cluster, 0);
    CHECK_INT(cfg.redis_tls, 0);
    CHECK_INT(cfg.redis_seeds.nseeds, 2);
    CHECK_STR(cfg.redis_seeds.seeds[0].host, "s1");
    CHECK_INT(cfg.redis_seeds.seeds[1].port, 26380);
    CHECK_STR(cfg.redis_sentinel_master, "mymaster");
    CHECK_STR(cfg.redis_user, "al");
    CHECK_STR(cfg.redis_password, "p/w");
    CHECK_STR(cfg.redis_sentinel_password, "sp");
    config_redis_url_masked(&cfg, masked, sizeof(masked));
    CHECK_STR(masked, "redis+sentinel://al:***@s1:26379,10.0.0.2:26380/mymaster");

    CHECK_INT(load(&cfg, &err, 3, tls), PERMITD_OK);
    CHECK_INT(cfg.redis_sentinel, 1);
    CHECK_INT(cfg.redis_tls, 1);
    CHECK_STR(cfg.redis_sentinel_master, "m");
    config_redis_url_masked(&cfg, masked, sizeof(masked));
    CHECK_STR(masked, "rediss+sentinel://s1:6379,s2:6379/m");

    CHECK_INT(load(&cfg, &err, 3, noname), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "no master name");
    CHECK_INT(load(&cfg, &err, 3, badname), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "master name");
    CHECK_INT(load(&cfg, &err, 3, badseed), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "redis sentinel url: seed 1");
    CHECK(strstr(err.message, "Hunter2") == NULL);
}

static void test_config_redis_url_cluster_flag(void)
{
    struct config cfg;
    struct permitd_error err;
    char masked[512];
    const char *ok[] = {"permitd", "--redis-url", "redis+cluster://al:s3cret@10.0.0.1:7000,[::1]:7001"};
    const char *bad[] = {"permitd", "--redis-url", "redis+cluster://h:1,h:99999"};

    clear_env();
    CHECK_INT(load(&cfg, &err, 3, ok), PERMITD_OK);
    CHECK_INT(cfg.redis_cluster, 1);
    CHECK_INT(cfg.redis_seeds.nseeds, 2);
    CHECK_STR(cfg.redis_seeds.seeds[1].host, "::1");
    CHECK_INT(cfg.redis_seeds.seeds[1].port, 7001);
    CHECK_STR(cfg.redis_user, "al");
    CHECK_STR(cfg.redis_password, "s3cret");
    CHECK_INT(cfg.redis_db, 0);
    config_redis_url_masked(&cfg, masked, sizeof(masked));
    CHECK_STR(masked, "redis+cluster://al:***@10.0.0.1:7000,[::1]:7001");

    CHECK_INT(load(&cfg, &err, 3, bad), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "--redis-url");
    CHECK_CONTAINS(err.message, "seed 2");

    {
        const char *single[] = {"permitd", "--redis-url", "redis://h:6380"};
        CHECK_INT(load(&cfg, &err, 3, single), PERMITD_OK);
        CHECK_INT(cfg.redis_cluster, 0);
        CHECK_STR(cfg.redis_host, "h");
    }
}

static void test_config_listen_forms(void)
{
    char host[64];
    int port;
    struct permitd_error err;

    CHECK_INT(config_parse_listen("[::1]:80", host, sizeof(host), &port, &err), PERMITD_OK);
    CHECK_STR(host, "::1");
    CHECK_INT(port, 80);
    CHECK_INT(config_parse_listen(":8080", host, sizeof(host), &port, &err), PERMITD_OK);
    CHECK_STR(host, "");
    CHECK_INT(config_parse_listen("h:65536", host, sizeof(host), &port, &err), PERMITD_EINVAL);
    CHECK_INT(config_parse_listen("h:", host, sizeof(host), &port, &err), PERMITD_EINVAL);
}

static void test_config_trusted_proxies(void)
{
    struct config cfg;
    struct permitd_error err;
    const char *good[] = {"permitd", "--trusted-proxies", "10.0.0.0/8, 127.0.0.1"};
    const char *bad[] = {"permitd", "--trusted-proxies", "10.0.0.0/8,10.0.0.1/40"};

    clear_env();
    CHECK_INT(load(&cfg, &err, 3, good), PERMITD_OK);
    CHECK_INT(cfg.trusted_proxy_list.n, 2);
    CHECK(cidr_list_match(&cfg.trusted_proxy_list, "10.2.3.4"));
    CHECK_INT(load(&cfg, &err, 1, good), PERMITD_OK);      /* default: none */
    CHECK_INT(cfg.trusted_proxy_list.n, 0);
    CHECK_INT(load(&cfg, &err, 3, bad), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "--trusted-proxies (PERMITD_TRUSTED_PROXIES)");
    CHECK_CONTAINS(err.message, "\"10.0.0.1/40\"");
}

int main(void)
{
    TEST_RUN(test_config_defaults);
    TEST_RUN(test_config_env_then_flags);
    TEST_RUN(test_config_bad_values_name_setting_and_value);
    TEST_RUN(test_config_help_and_version);
    TEST_RUN(test_config_redis_urls);
    TEST_RUN(test_config_listen_forms);
    TEST_RUN(test_config_redis_cluster_urls);
    TEST_RUN(test_config_redis_url_cluster_flag);
    TEST_RUN(test_config_redis_tls_urls);
    TEST_RUN(test_config_redis_sentinel_urls);
    TEST_RUN(test_config_trusted_proxies);
    return TEST_REPORT();
}
