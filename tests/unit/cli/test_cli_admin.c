/*
 * test_cli_admin.c - `permitd admin`'s command line (server/cli/:
 * cli_admin.c finds the verb, cli_users.c and cli_apps.c check their
 * arguments): help is exit 0, an unknown verb or a bad argument is a usage
 * error (exit 2) found before the database is opened, and a verb without
 * PERMITD_MYSQL_URL stops there (exit 2). No server is started.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_admin.h"
#include "test.h"

/* Runs `permitd admin ARGS...` (a NULL-ended list) with cfg. */
static int run(const struct config *cfg, const char *const *args)
{
    char *argv[16];
    int argc = 0;

    argv[argc++] = "admin";
    for (; *args != NULL && argc < 15; args++)
        argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    return cli_admin_main(cfg, argc, argv);
}

/* cfg names a database on a port nothing listens on: a line that got past
 * the checks would fail to connect (exit 1), not exit 2. */
static void with_database(struct config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    snprintf(cfg->mysql_url, sizeof(cfg->mysql_url), "mysql://u:p@127.0.0.1:1/db");
    snprintf(cfg->mysql.host, sizeof(cfg->mysql.host), "127.0.0.1");
    cfg->mysql.port = 1;
    cfg->mysql_timeout_ms = 200;
}

static void test_cli_admin_help_and_unknown(void)
{
    static const char *const none[] = {NULL}, *const help[] = {"--help", NULL},
                             *const h[] = {"-h", NULL}, *const what[] = {"frobnicate", NULL};
    static const char *const verbs[][3] = {
        {"add-user", "--help", NULL}, {"add-app", "-h", NULL}, {"update-app", "--help", NULL},
        {"issue-key", "--help", NULL}, {"revoke-key", "--help", NULL}, {"list-apps", "-h", NULL},
    };
    struct config cfg;

    with_database(&cfg);
    CHECK_INT(run(&cfg, none), 2);
    CHECK_INT(run(&cfg, help), 0);
    CHECK_INT(run(&cfg, h), 0);
    CHECK_INT(run(&cfg, what), 2);
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
        CHECK_INT(run(&cfg, verbs[i]), 0);
}

static void test_cli_admin_usage_errors(void)
{
    static const char *const lines[][6] = {
        {"add-user", NULL},
        {"add-user", "bob", "--role", "owner", NULL},
        {"add-user", "b/ob", "--role", "admin", NULL},
        {"add-user", "bob", "--colour", "red", NULL},
        {"add-app", NULL},
        {"add-app", "bad name", NULL},
        {"add-app", "shop", "--expires", "1d", NULL},   /* issue-key's option */
        {"update-app", "shop", NULL},                   /* nothing to change */
        {"update-app", "-shop", "--enable", NULL},
        {"issue-key", NULL},
        {"issue-key", "shop", "--expires", "forever", NULL},
        {"issue-key", "shop", "--expires", "0d", NULL},
        {"issue-key", "shop", "--expires=4000d", NULL}, /* over ten years */
        {"issue-key", "shop", "--expires", "12x", NULL},
        {"revoke-key", NULL},
        {"list-apps", "extra", NULL},
    };
    struct config cfg;
    char big[1100];

    with_database(&cfg);
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        int rc = run(&cfg, lines[i]);
        if (rc != 2)
            fprintf(stderr, "line %zu (%s %s): exit %d\n", i, lines[i][0],
                    lines[i][1] ? lines[i][1] : "", rc);
        CHECK_INT(rc, 2);
    }
    memset(big, 'd', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    {
        const char *const line[] = {"add-app", "shop", "--description", big, NULL};
        CHECK_INT(run(&cfg, line), 2);
    }
}

/* Each verb, its arguments right, needs PERMITD_MYSQL_URL (exit 2 without
 * it) and then the database (exit 1: none answers here). add-user opens
 * its connection when it first uses it, after reading the password from
 * standard input, so only the first half holds for it here. */
static void test_cli_admin_needs_a_database(void)
{
    static const char *const lines[][5] = {
        {"add-app", "shop", NULL},
        {"update-app", "shop", "--disable", NULL},
        {"issue-key", "shop", "--expires", "90d", NULL},
        {"revoke-key", "pk_0123456789abcdef", NULL},
        {"list-apps", NULL},
        {"add-user", "bob", "--role", "viewer", NULL},
    };
    struct config none, db;

    memset(&none, 0, sizeof(none));
    with_database(&db);
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        CHECK_INT(run(&none, lines[i]), 2);
        if (strcmp(lines[i][0], "add-user") != 0)
            CHECK_INT(run(&db, lines[i]), 1);
    }
}

int main(void)
{
    TEST_RUN(test_cli_admin_help_and_unknown);
    TEST_RUN(test_cli_admin_usage_errors);
    TEST_RUN(test_cli_admin_needs_a_database);
    return TEST_REPORT();
}
