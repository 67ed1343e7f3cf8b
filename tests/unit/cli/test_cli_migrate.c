/*
 * test_cli_migrate.c - `permitd migrate`'s command line
 * (server/cli/cli_migrate.c): every mistake in the options or a verb's
 * arguments is a usage error (exit 2) found before any connection is
 * made, --help is exit 0, and with no database named the run stops there
 * too. No server is started: a check that let an argument through would
 * go on to connect and exit 1, not 2.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli_migrate.h"
#include "stores/migrate.h"
#include "test.h"

/* Runs `permitd migrate ARGS...` (a NULL-ended list) with cfg. */
static int run(const struct config *cfg, const char *const *args)
{
    char *argv[16];
    int argc = 0;

    argv[argc++] = "migrate";
    for (; *args != NULL && argc < 15; args++)
        argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    return cli_migrate_main(cfg, argc, argv);
}

/* A database is named, on a port nothing listens on: any line that got
 * past the checks would fail to connect (exit 1), not exit 2. */
static void with_database(struct config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    snprintf(cfg->mysql_url, sizeof(cfg->mysql_url), "mysql://u:p@127.0.0.1:1/db");
    snprintf(cfg->mysql.host, sizeof(cfg->mysql.host), "127.0.0.1");
    cfg->mysql.port = 1;
    cfg->mysql_timeout_ms = 200;
}

static void test_cli_migrate_usage_errors(void)
{
    static const char *const lines[][6] = {
        {NULL},                                 /* no verb */
        {"sideways", NULL},
        {"up", "--all", NULL},
        {"up", "0", NULL},
        {"up", "x", NULL},
        {"up", "1", "2", NULL},
        {"down", NULL},                         /* refuses to guess a count */
        {"down", "1", "--all", NULL},
        {"down", "-1", NULL},
        {"force", NULL},
        {"force", "v3", NULL},
        {"force", "3x", NULL},
        {"force", "99999999999999999999999", NULL},
        {"status", "1", NULL},
        {"validate", "--all", NULL},
        {"new", NULL},
        {"new", "--all", "x", NULL},
        {"--bogus", "up", NULL},
        {"--lock-timeout", "0", "up", NULL},
        {"--lock-timeout=86401", "up", NULL},
        {"--lock-timeout", NULL},               /* an option without its value */
        {"--mysql-url", "http://x/", "up", NULL},
        {"new", "---", "--dir", "/nonexistent-dir", NULL},
    };
    struct config cfg;

    with_database(&cfg);
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        int rc = run(&cfg, lines[i]);
        if (rc != MIGRATE_EXIT_USAGE)
            fprintf(stderr, "line %zu (%s ...): exit %d\n", i, lines[i][0] ? lines[i][0] : "",
                    rc);
        CHECK_INT(rc, MIGRATE_EXIT_USAGE);
    }
}

static void test_cli_migrate_help(void)
{
    static const char *const help[] = {"--help", NULL}, *const h[] = {"up", "-h", NULL};
    struct config cfg;

    with_database(&cfg);
    CHECK_INT(run(&cfg, help), MIGRATE_EXIT_OK);
    CHECK_INT(run(&cfg, h), MIGRATE_EXIT_OK);
}

/* No PERMITD_MYSQL_URL and no --mysql-url: a usage error, not an attempt. */
static void test_cli_migrate_needs_a_database(void)
{
    static const char *const up[] = {"up", NULL}, *const status[] = {"status", NULL};
    struct config cfg;

    memset(&cfg, 0, sizeof(cfg));
    CHECK_INT(run(&cfg, up), MIGRATE_EXIT_USAGE);
    CHECK_INT(run(&cfg, status), MIGRATE_EXIT_USAGE);
}

/* Arguments that pass go on to the database: here none answers (exit 1). */
static void test_cli_migrate_valid_lines_connect(void)
{
    static const char *const lines[][4] = {
        {"up", NULL}, {"up", "2", NULL}, {"down", "1", NULL}, {"down", "--all", NULL},
        {"status", NULL}, {"validate", NULL}, {"force", "0", NULL},
        {"--lock-timeout=5", "status", NULL},
    };
    struct config cfg;

    with_database(&cfg);
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        CHECK_INT(run(&cfg, lines[i]), MIGRATE_EXIT_FAILURE);
}

int main(void)
{
    TEST_RUN(test_cli_migrate_usage_errors);
    TEST_RUN(test_cli_migrate_help);
    TEST_RUN(test_cli_migrate_needs_a_database);
    TEST_RUN(test_cli_migrate_valid_lines_connect);
    return TEST_REPORT();
}
