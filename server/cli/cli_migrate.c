/*
 * cli_migrate.c - `permitd migrate`'s command line: reads and checks the
 * options and the verb's arguments, all before any connection is made,
 * then hands the run to stores/migrate.c (migrate_do(), migrate_create()),
 * which holds the verbs themselves.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_migrate.h"
#include "stores/migrate.h"
#include "stores/migrate_history.h"

/* How long a run waits for another run's lock unless --lock-timeout says. */
#define DEFAULT_LOCK_TIMEOUT_S 60

static void usage(FILE *f)
{
    fprintf(f,
"usage: permitd migrate [options] VERB [args]\n"
"\n"
"Applies the SQL migrations (NNNN_title.up.sql / NNNN_title.down.sql) to the\n"
"database of PERMITD_MYSQL_URL (mysql://user:pass@host:port/db, or\n"
"mysql://user:pass@localhost/db?socket=/path). The files are the ones built\n"
"into this binary unless --dir is given.\n"
"\n"
"verbs:\n"
"  up [N]          apply the pending migrations in order (only the next N when\n"
"                  N is given)\n"
"  down N          revert the last N applied migrations, newest first\n"
"  down --all      revert every applied migration (down without N or --all\n"
"                  refuses: reverting drops tables and their data)\n"
"  status          list applied, pending and dirty versions with when, by whom\n"
"                  and how long they took\n"
"  validate        check that the files parse, that no applied file changed\n"
"                  since it was applied, that nothing is dirty and nothing is\n"
"                  pending below an applied version; exit 1 if anything is wrong\n"
"  force VERSION   record by hand that exactly the versions up to VERSION are\n"
"                  applied (0: none) and clear the dirty mark, without running\n"
"                  any SQL; also re-records the checksums of changed files up to\n"
"                  VERSION. Use it after repairing the schema of a failed run\n"
"  new TITLE       create the next NNNN_title.up.sql / .down.sql pair in the\n"
"                  migrations directory (--dir, default ./migrations); the title\n"
"                  is reduced to [a-z0-9_]\n"
"\n"
"options:\n"
"  --dir DIR             read the migrations from DIR instead of the binary\n"
"  --mysql-url URL       the database (default: PERMITD_MYSQL_URL)\n"
"  --lock-timeout SECS   how long to wait for another run's lock (default %d)\n"
"  -h, --help            this text\n"
"\n"
"How a run stays safe: it holds GET_LOCK('" MIGRATE_HISTORY_LOCK_PREFIX ":<database>') for its\n"
"whole length, so a second run waits and then finds the work done. Each file\n"
"runs statement by statement on a fresh connection (split like the mysql\n"
"client does, DELIMITER lines included). The table " MIGRATE_HISTORY_TABLE "\n"
"records every applied version with the SHA-256 of its .up.sql, when, by whom\n"
"and how long it took. A version is marked dirty before its first statement\n"
"and applied after its last: when a statement fails, the run stops, prints\n"
"the statement's number and the server's message, records both, and up and\n"
"down refuse to run until a DBA has repaired the schema and run force.\n"
"\n"
"exit status: 0 ok, 1 failure (or problems found by validate), 2 usage error\n",
            DEFAULT_LOCK_TIMEOUT_S);
}

static int parse_count(const char *s, long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 1)
        return -1;
    *out = v;
    return 0;
}

/* The option that a ("--dir", "--dir=x", ...) names, or NULL. */
static const char *option_name(const char *a)
{
    static const char *const names[] = {"--dir", "--mysql-url", "--lock-timeout"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        size_t n = strlen(names[i]);
        if (strncmp(a, names[i], n) == 0 && (a[n] == '\0' || a[n] == '='))
            return names[i];
    }
    return NULL;
}

int cli_migrate_main(const struct config *cfg, int argc, char **argv)
{
    struct migrate_job job;
    struct config_mysql url_db;
    const struct config_mysql *db = &cfg->mysql;
    int lock_timeout_s = DEFAULT_LOCK_TIMEOUT_S;
    struct permitd_error err = {0, ""};
    const char *dir = NULL, *verb = NULL;
    char *args[8];
    int nargs = 0, all = 0;
    long count = -1;
    unsigned long long force_to = 0;

    /* Progress on stdout and errors on stderr stay in order when both go
     * to one pipe or file (a CI log, `2>&1 | tee`). */
    setvbuf(stdout, NULL, _IOLBF, 0);

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL, *opt;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return MIGRATE_EXIT_OK;
        }
        if (strcmp(a, "--all") == 0) {
            all = 1;
            continue;
        }
        if ((opt = option_name(a)) != NULL) {
            const char *eq = strchr(a, '=');
            if (eq != NULL) {
                val = eq + 1;
            } else if (i + 1 < argc) {
                val = argv[++i];
            } else {
                fprintf(stderr, "permitd migrate: %s needs a value\n", a);
                return MIGRATE_EXIT_USAGE;
            }
            if (strcmp(opt, "--dir") == 0) {
                dir = val;
            } else if (strcmp(opt, "--mysql-url") == 0) {
                if (config_parse_mysql_url(val, &url_db, &err) != PERMITD_OK) {
                    fprintf(stderr, "permitd migrate: --mysql-url: %s\n", err.message);
                    return MIGRATE_EXIT_USAGE;
                }
                db = &url_db;
            } else {
                long t;
                if (parse_count(val, &t) != 0 || t > 86400) {
                    fprintf(stderr, "permitd migrate: --lock-timeout must be whole seconds "
                            "from 1 to 86400, not \"%s\"\n", val);
                    return MIGRATE_EXIT_USAGE;
                }
                lock_timeout_s = (int)t;
            }
            continue;
        }
        if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "permitd migrate: unknown option %s (see permitd migrate --help; "
                    "settings such as the database come from PERMITD_* variables)\n", a);
            return MIGRATE_EXIT_USAGE;
        }
        if (verb == NULL) {
            verb = a;
        } else if (nargs < (int)(sizeof(args) / sizeof(args[0]))) {
            args[nargs++] = argv[i];
        } else {
            fprintf(stderr, "permitd migrate: too many arguments\n");
            return MIGRATE_EXIT_USAGE;
        }
    }

    if (verb == NULL) {
        usage(stderr);
        return MIGRATE_EXIT_USAGE;
    }
    if (strcmp(verb, "new") == 0) {
        if (nargs == 0 || all) {
            fprintf(stderr, "permitd migrate: usage: new TITLE\n");
            return MIGRATE_EXIT_USAGE;
        }
        return migrate_create(dir ? dir : "migrations", nargs, args);
    }

    /* Check the arguments of every other verb before connecting. */
    if (strcmp(verb, "up") == 0) {
        if (all || nargs > 1 || (nargs == 1 && parse_count(args[0], &count) != 0)) {
            fprintf(stderr, "permitd migrate: usage: up [N], N a count from 1\n");
            return MIGRATE_EXIT_USAGE;
        }
    } else if (strcmp(verb, "down") == 0) {
        if (nargs == 0 && !all) {
            fprintf(stderr, "permitd migrate: down needs a count: `down N` reverts the last N "
                    "migrations, `down --all` reverts every one (refusing to guess: reverting "
                    "drops tables and their data)\n");
            return MIGRATE_EXIT_USAGE;
        }
        if (nargs > 1 || (nargs == 1 && (all || parse_count(args[0], &count) != 0))) {
            fprintf(stderr, "permitd migrate: usage: down N | down --all (N a count from 1)\n");
            return MIGRATE_EXIT_USAGE;
        }
    } else if (strcmp(verb, "force") == 0) {
        char *end;
        if (nargs != 1 || all || !isdigit((unsigned char)args[0][0])) {
            fprintf(stderr, "permitd migrate: usage: force VERSION (0 for none)\n");
            return MIGRATE_EXIT_USAGE;
        }
        errno = 0;
        force_to = strtoull(args[0], &end, 10);
        if (errno != 0 || *end != '\0') {
            fprintf(stderr, "permitd migrate: force: \"%s\" is not a version\n", args[0]);
            return MIGRATE_EXIT_USAGE;
        }
    } else if (strcmp(verb, "status") == 0 || strcmp(verb, "validate") == 0) {
        if (nargs > 0 || all) {
            fprintf(stderr, "permitd migrate: %s takes no arguments\n", verb);
            return MIGRATE_EXIT_USAGE;
        }
    } else {
        fprintf(stderr, "permitd migrate: unknown verb \"%s\" (up, down, status, validate, "
                "force, new; see --help)\n", verb);
        return MIGRATE_EXIT_USAGE;
    }

    if (db == &cfg->mysql && cfg->mysql_url[0] == '\0') {
        fprintf(stderr, "permitd migrate: no database: set PERMITD_MYSQL_URL (or pass "
                "--mysql-url) to mysql://user:pass@host:port/db\n");
        return MIGRATE_EXIT_USAGE;
    }
    job = (struct migrate_job){db, cfg->mysql_timeout_ms > 0 ? cfg->mysql_timeout_ms : 5000,
                               lock_timeout_s, dir, verb, all ? -1 : count, force_to};
    return migrate_do(&job);
}
