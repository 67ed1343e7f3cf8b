/*
 * migrate.c - `permitd migrate`: applies and reverts the SQL files of
 * migrations/ against MySQL 8 or MariaDB, for DBAs. This file holds the
 * verbs (up, down, status, validate, force, new) and the command line;
 * the pieces they are built from have files of their own:
 *
 *   migrate_files.c    the migrations: embedded or --dir, paired, checksummed
 *   migrate_sql.c      splitting a file into statements like the mysql client
 *   migrate_history.c  the control connection, the run's lock, the history table
 *   migrate_run.c      running one file on a connection of its own
 *
 * The idea: MySQL DDL is not transactional, so a migration cannot be rolled
 * back when statement 3 of 5 fails. Instead every run is made safe to
 * reason about afterwards:
 *
 *   - one run at a time: a GET_LOCK on a connection of its own (the
 *     "control" connection) is held from before the history is read until
 *     the run ends, so a second `up` waits and then finds the work done;
 *   - a version is recorded as 'dirty' in permitd_schema_history *before*
 *     its first statement runs and as 'applied' after its last one, so a
 *     failure, a lost connection or a killed process all leave the same
 *     clear mark: which version, which statement, the server's message;
 *   - a dirty version blocks every later up/down until a DBA has repaired
 *     the schema by hand and said what state it is in (`force VERSION`);
 *   - the SHA-256 of every applied .up.sql file is recorded, and `up`,
 *     `down` and `validate` refuse to go on when a file changed afterwards.
 *
 * Every check of the arguments happens before any connection is made.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "stores/dbconn.h"
#include "stores/migrate.h"
#include "stores/migrate_files.h"
#include "stores/migrate_history.h"
#include "stores/migrate_run.h"
#include "stores/migrate_sql.h"

/* Short names for the many format strings and statements below. */
#define VFMT MIGRATE_VFMT

#define DEFAULT_LOCK_TIMEOUT_S 60

/* One run of a verb: the migrations it knows and the database it works on. */
struct run {
    struct migrate_files set;
    struct migrate_history h;
};

static int64_t now_ms(void)
{
    return clock_now_us() / 1000;
}

/* Describes a dirty history row on stderr. */
static void print_dirty(const struct run *r, const struct migrate_history_row *h)
{
    fprintf(stderr, "permitd migrate: version " VFMT " (%s) is dirty: ", h->version, h->title);
    if (h->error != NULL)
        fprintf(stderr, "%s failed at statement %s%s%s%s at %s UTC: %s\n",
                strcmp(h->direction, "down") == 0 ? "down" : "up",
                h->failed_statement ? h->failed_statement : "?",
                h->failed_line ? " (line " : "", h->failed_line ? h->failed_line : "",
                h->failed_line ? ")" : "", h->applied_at, h->error);
    else
        fprintf(stderr, "its %s started at %s UTC and never finished (the run was interrupted "
                "or lost its connection)\n",
                strcmp(h->direction, "down") == 0 ? "down" : "up", h->applied_at);
    migrate_history_print_hint(&r->h, h->version);
}

/* The checks up, down and validate share. Prints every problem found;
 * returns how many there were. */
static int check_state(struct run *r)
{
    int problems = 0;
    unsigned long long top = 0;

    for (size_t i = 0; i < r->h.n; i++) {
        struct migrate_history_row *h = &r->h.rows[i];
        struct migrate_file *m = migrate_files_find(&r->set, h->version);
        if (h->version > top)
            top = h->version;
        if (strcmp(h->state, "dirty") == 0) {
            print_dirty(r, h);
            problems++;
            continue;
        }
        if (m == NULL) {
            fprintf(stderr, "permitd migrate: version " VFMT " (%s) is applied but %s has no "
                    "file for it (is this binary or --dir older than the database?)\n",
                    h->version, h->title, r->set.source);
            problems++;
        } else if (strcmp(h->checksum, m->checksum) != 0) {
            fprintf(stderr, "permitd migrate: %s%s%s changed after it was applied on %s UTC "
                    "(checksum recorded %.12s..., file now %.12s...): restore the file, or put "
                    "the change in a new migration (`permitd migrate new TITLE`)\n",
                    r->set.dir ? r->set.dir : "", r->set.dir ? "/" : "", m->up_name,
                    h->applied_at, h->checksum, m->checksum);
            problems++;
        }
    }
    for (size_t i = 0; i < r->set.n; i++) {
        struct migrate_file *m = &r->set.v[i];
        if (m->version < top && migrate_history_find(&r->h, m->version) == NULL) {
            fprintf(stderr, "permitd migrate: %s is pending but the later version " VFMT
                    " is already applied: give it a version above " VFMT "\n",
                    m->up_name, top, top);
            problems++;
        }
    }
    return problems;
}

/* ------------------------------------------------------------------ */
/* the verbs                                                          */

static int all_parse(struct run *r, int down)
{
    struct permitd_error err = {0, ""};
    struct migrate_sql_script s;
    int problems = 0;

    for (size_t i = 0; i < r->set.n; i++) {
        struct migrate_file *m = &r->set.v[i];
        const char *file = down ? m->down_name : m->up_name;
        if (file == NULL)
            continue;
        if (migrate_sql_split(down ? m->down : m->up, down ? m->down_len : m->up_len, &s, &err)
            != PERMITD_OK) {
            fprintf(stderr, "permitd migrate: %s: %s\n", file, err.message);
            problems++;
        }
        migrate_sql_free(&s);
    }
    return problems;
}

static int verb_up(struct run *r, long limit)
{
    size_t done = 0, pending = 0;
    int64_t t0 = now_ms();

    if (all_parse(r, 0) != 0)
        return MIGRATE_EXIT_FAILURE;
    if (migrate_history_lock(&r->h) != PERMITD_OK || migrate_history_create(&r->h) != PERMITD_OK ||
        migrate_history_load(&r->h) != PERMITD_OK)
        return MIGRATE_EXIT_FAILURE;
    if (check_state(r) != 0) {
        fprintf(stderr, "permitd migrate: refusing to apply anything until the problems above "
                "are fixed\n");
        return MIGRATE_EXIT_FAILURE;
    }
    for (size_t i = 0; i < r->set.n; i++)
        if (migrate_history_find(&r->h, r->set.v[i].version) == NULL)
            pending++;
    if (pending == 0) {
        printf("nothing to do: version " VFMT " is applied and nothing is pending\n",
               migrate_history_top(&r->h));
        return MIGRATE_EXIT_OK;
    }
    for (size_t i = 0; i < r->set.n && (limit < 0 || (long)done < limit); i++) {
        struct migrate_file *m = &r->set.v[i];
        if (migrate_history_find(&r->h, m->version) != NULL)
            continue;
        if (migrate_run_one(&r->h, &r->set, m, 1) != 0) {
            fprintf(stderr, "permitd migrate: up failed after applying %zu migration%s\n",
                    done, done == 1 ? "" : "s");
            return MIGRATE_EXIT_FAILURE;
        }
        done++;
        if (migrate_history_load(&r->h) != 0)
            return MIGRATE_EXIT_FAILURE;
    }
    printf("up: applied %zu migration%s in %lld ms; now at version " VFMT ", %zu pending\n",
           done, done == 1 ? "" : "s", (long long)(now_ms() - t0), migrate_history_top(&r->h),
           pending - done);
    return MIGRATE_EXIT_OK;
}

static int verb_down(struct run *r, long count)
{
    size_t done = 0;
    int64_t t0 = now_ms();

    if (all_parse(r, 1) != 0)
        return MIGRATE_EXIT_FAILURE;
    if (migrate_history_lock(&r->h) != 0 || migrate_history_load(&r->h) != 0)
        return MIGRATE_EXIT_FAILURE;
    if (check_state(r) != 0) {
        fprintf(stderr, "permitd migrate: refusing to revert anything until the problems above "
                "are fixed\n");
        return MIGRATE_EXIT_FAILURE;
    }
    if (r->h.n == 0) {
        printf("nothing to do: no migration is applied\n");
        return MIGRATE_EXIT_OK;
    }
    if (count > (long)r->h.n) {
        printf("only %zu migration%s applied: reverting %s\n", r->h.n,
               r->h.n == 1 ? " is" : "s are", r->h.n == 1 ? "it" : "all of them");
        count = (long)r->h.n;
    }
    /* Every down file needed must be there before the first one runs. */
    for (long i = 0; i < (count < 0 ? (long)r->h.n : count); i++) {
        unsigned long long version = r->h.rows[r->h.n - 1 - (size_t)i].version;
        struct migrate_file *m = migrate_files_find(&r->set, version);
        if (m->down == NULL) {
            fprintf(stderr, "permitd migrate: %s has no down file (%.*s.down.sql): cannot "
                    "revert version " VFMT "\n", m->up_name, (int)(strlen(m->up_name) - 7),
                    m->up_name, m->version);
            return MIGRATE_EXIT_FAILURE;
        }
    }
    while (r->h.n > 0 && (count < 0 || (long)done < count)) {
        struct migrate_file *m = migrate_files_find(&r->set, r->h.rows[r->h.n - 1].version);
        if (migrate_run_one(&r->h, &r->set, m, 0) != 0) {
            fprintf(stderr, "permitd migrate: down failed after reverting %zu migration%s\n",
                    done, done == 1 ? "" : "s");
            return MIGRATE_EXIT_FAILURE;
        }
        done++;
        if (migrate_history_load(&r->h) != 0)
            return MIGRATE_EXIT_FAILURE;
    }
    printf("down: reverted %zu migration%s in %lld ms; now at version " VFMT "\n", done,
           done == 1 ? "" : "s", (long long)(now_ms() - t0), migrate_history_top(&r->h));
    return MIGRATE_EXIT_OK;
}

static int verb_status(struct run *r)
{
    size_t applied = 0, pending = 0, dirty = 0, ghosts = 0;
    char *holder = NULL;

    /* Who holds the lock, first: a dirty row without an error is then a
     * migration still running, not an interrupted one. */
    if (migrate_history_lock_holder(&r->h, &holder) != PERMITD_OK ||
        migrate_history_load(&r->h) != PERMITD_OK) {
        free(holder);
        return MIGRATE_EXIT_FAILURE;
    }
    printf("%-8s %-8s %-23s %9s  %-40s %s\n", "VERSION", "STATE", "APPLIED_AT (UTC)", "MS",
           "APPLIED_BY", "TITLE");
    /* Files and history rows, merged in version order. */
    for (size_t i = 0, j = 0; i < r->set.n || j < r->h.n;) {
        struct migrate_file *m = i < r->set.n ? &r->set.v[i] : NULL;
        struct migrate_history_row *h = j < r->h.n ? &r->h.rows[j] : NULL;
        if (h != NULL && (m == NULL || h->version <= m->version)) {
            const char *state = h->state;
            char note[200] = "";
            if (m == NULL || h->version < m->version) {
                snprintf(note, sizeof(note), "  [no file for this version]");
                ghosts++;
            } else if (strcmp(h->checksum, m->checksum) != 0) {
                snprintf(note, sizeof(note), "  [%s CHANGED since applied]", m->up_name);
            }
            int is_dirty = strcmp(h->state, "dirty") == 0;
            int running = is_dirty && h->error == NULL && holder != NULL;
            if (running) {
                state = "RUNNING";
            } else if (is_dirty) {
                dirty++;
                state = "DIRTY";
            } else {
                applied++;
            }
            printf(VFMT "     %-8s %-23s %9s  %-40s %s%s\n", h->version, state, h->applied_at,
                   h->execution_ms ? h->execution_ms : (is_dirty ? "-" : "forced"),
                   h->applied_by, h->title, note);
            if (running)
                printf("         %s in progress\n", h->direction);
            else if (is_dirty && h->error != NULL)
                printf("         %s failed at statement %s (line %s): %s\n",
                       h->direction, h->failed_statement ? h->failed_statement : "?",
                       h->failed_line ? h->failed_line : "?", h->error);
            else if (is_dirty)
                printf("         %s started and never finished (the run was interrupted or "
                       "lost its connection)\n", h->direction);
            if (m != NULL && h->version == m->version)
                i++;
            j++;
        } else {
            printf(VFMT "     %-8s %-23s %9s  %-40s %s\n", m->version, "pending", "-", "-", "-",
                   m->title);
            pending++;
            i++;
        }
    }
    if (holder != NULL)
        printf("a migration run is in progress (connection %s holds \"%s\")\n", holder,
               r->h.lock_name);
    printf("version " VFMT ": %zu applied, %zu pending, %zu dirty%s (migrations: %s, %zu files)\n",
           migrate_history_top(&r->h), applied, pending, dirty,
           ghosts ? ", some applied versions have no file" : "", r->set.source, r->set.n);
    if (dirty > 0)
        printf("a dirty version blocks up and down: see `permitd migrate --help` (force)\n");
    free(holder);
    return MIGRATE_EXIT_OK;
}

static int verb_validate(struct run *r)
{
    int problems = all_parse(r, 0) + all_parse(r, 1);
    size_t pending = 0;

    if (migrate_history_load(&r->h) != 0)
        return MIGRATE_EXIT_FAILURE;
    problems += check_state(r);
    for (size_t i = 0; i < r->set.n; i++) {
        if (migrate_history_find(&r->h, r->set.v[i].version) == NULL)
            pending++;
        if (r->set.v[i].down == NULL)
            printf("note: %s has no down file; `down` cannot revert it\n", r->set.v[i].up_name);
    }
    if (problems > 0) {
        fprintf(stderr, "validate: %d problem%s found\n", problems, problems == 1 ? "" : "s");
        return MIGRATE_EXIT_FAILURE;
    }
    printf("validate: ok: %zu migration%s (%s), %zu applied and unchanged, %zu pending\n",
           r->set.n, r->set.n == 1 ? "" : "s", r->set.source, r->h.n, pending);
    return MIGRATE_EXIT_OK;
}

/* force V: records that exactly the versions up to V are applied, as the
 * current files describe them, and that nothing is dirty. Runs no SQL from
 * the files: the DBA has made the schema match by hand. */
static int verb_force(struct run *r, unsigned long long v)
{
    int changed = 0;

    if (v != 0 && migrate_files_find(&r->set, v) == NULL) {
        fprintf(stderr, "permitd migrate: force: there is no migration " VFMT " in %s "
                "(use 0 for \"nothing applied\")\n", v, r->set.source);
        return MIGRATE_EXIT_FAILURE;
    }
    if (migrate_history_lock(&r->h) != PERMITD_OK || migrate_history_create(&r->h) != PERMITD_OK ||
        migrate_history_load(&r->h) != PERMITD_OK)
        return MIGRATE_EXIT_FAILURE;
    for (size_t i = 0; i < r->h.n; i++) {
        struct migrate_history_row *h = &r->h.rows[i];
        struct migrate_file *m = migrate_files_find(&r->set, h->version);
        int rc;
        if (h->version > v) {
            printf("force: " VFMT " %s: removed from the history (%s before)\n",
                   h->version, h->title, h->state);
            rc = migrate_history_forget(&r->h, h->version);
        } else if (m == NULL) {
            continue;    /* applied without a file here: left as it is */
        } else if (strcmp(h->state, "dirty") == 0 || strcmp(h->checksum, m->checksum) != 0) {
            printf("force: " VFMT " %s: marked applied%s\n", h->version, h->title,
                   strcmp(h->state, "dirty") == 0 ? " (was dirty)"
                                                  : " with the checksum of the current file");
            rc = migrate_history_mark_applied(&r->h, m, 1);
        } else {
            continue;
        }
        if (rc != PERMITD_OK)
            return MIGRATE_EXIT_FAILURE;
        changed++;
    }
    for (size_t i = 0; i < r->set.n; i++) {
        struct migrate_file *m = &r->set.v[i];
        if (m->version > v || migrate_history_find(&r->h, m->version) != NULL)
            continue;
        if (migrate_history_mark_applied(&r->h, m, 0) != PERMITD_OK)
            return MIGRATE_EXIT_FAILURE;
        printf("force: " VFMT " %s: marked applied (not run)\n", m->version, m->title);
        changed++;
    }
    printf("force: now at version " VFMT "%s\n", v, changed ? "" : " (nothing changed)");
    return MIGRATE_EXIT_OK;
}

/* new TITLE: creates the next NNNN_title.up.sql / .down.sql pair in dir. */
static int verb_new(const char *dir, int argc, char **argv)
{
    struct migrate_files set;
    struct permitd_error err = {0, ""};
    char title[101] = "", up[4096], down[4096];
    size_t n = 0;
    unsigned long long next;
    int fd;
    FILE *f;
    struct stat st;

    /* Title words joined by '_', lower case, [a-z0-9_] only. */
    for (int a = 0; a < argc; a++) {
        for (const char *c = argv[a]; *c && n < sizeof(title) - 1; c++) {
            char ch = (char)tolower((unsigned char)*c);
            if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9')))
                ch = '_';
            if (ch == '_' && (n == 0 || title[n - 1] == '_'))
                continue;
            title[n++] = ch;
        }
        if (n > 0 && n < sizeof(title) - 1 && title[n - 1] != '_')
            title[n++] = '_';
    }
    while (n > 0 && title[n - 1] == '_')
        n--;
    title[n] = '\0';
    if (n == 0) {
        fprintf(stderr, "permitd migrate: new needs a TITLE with letters or digits, "
                "e.g. `permitd migrate new add_policy_owner`\n");
        return MIGRATE_EXIT_USAGE;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "permitd migrate: new: no migrations directory %s (run it from the "
                "source tree or give --dir DIR)\n", dir);
        return MIGRATE_EXIT_USAGE;
    }
    if (migrate_files_load(&set, dir, &err) != PERMITD_OK) {
        fprintf(stderr, "permitd migrate: %s\n", err.message);
        migrate_files_free(&set);
        return MIGRATE_EXIT_FAILURE;
    }
    next = set.n ? set.v[set.n - 1].version + 1 : 1;
    migrate_files_free(&set);
    snprintf(up, sizeof(up), "%s/" VFMT "_%s.up.sql", dir, next, title);
    snprintf(down, sizeof(down), "%s/" VFMT "_%s.down.sql", dir, next, title);

    fd = open(up, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0 || (f = fdopen(fd, "w")) == NULL) {
        fprintf(stderr, "permitd migrate: cannot create %s: %s\n", up, strerror(errno));
        if (fd >= 0)
            close(fd);
        return MIGRATE_EXIT_FAILURE;
    }
    fprintf(f, "-- " VFMT " %s: what this migration changes, and why.\n"
               "--\n"
               "-- Plain SQL for MySQL 8 and MariaDB 10.11; `permitd migrate up` runs it\n"
               "-- statement by statement (the stock mysql client runs it too). DDL is not\n"
               "-- transactional: a failure leaves the version dirty, so keep each\n"
               "-- statement small. New tables: DEFAULT CHARSET=utf8mb4\n"
               "-- COLLATE=utf8mb4_unicode_ci.\n\n", next, title);
    fclose(f);
    fd = open(down, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0 || (f = fdopen(fd, "w")) == NULL) {
        fprintf(stderr, "permitd migrate: cannot create %s: %s\n", down, strerror(errno));
        if (fd >= 0)
            close(fd);
        unlink(up);
        return MIGRATE_EXIT_FAILURE;
    }
    fprintf(f, "-- Reverts " VFMT "_%s.up.sql.\n\n", next, title);
    fclose(f);
    printf("created %s\ncreated %s\n", up, down);
    return MIGRATE_EXIT_OK;
}

/* ------------------------------------------------------------------ */
/* command line                                                       */

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

int migrate_main(const struct config *cfg, int argc, char **argv)
{
    struct run r;
    struct config_mysql url_db;
    const struct config_mysql *db = &cfg->mysql;
    int lock_timeout_s = DEFAULT_LOCK_TIMEOUT_S;
    struct permitd_error err = {0, ""};
    const char *dir = NULL, *verb = NULL;
    char *args[8];
    int nargs = 0, all = 0, status = MIGRATE_EXIT_FAILURE;
    long count = -1;
    unsigned long long force_to = 0;

    /* Progress on stdout and errors on stderr stay in order when both go
     * to one pipe or file (a CI log, `2>&1 | tee`). */
    setvbuf(stdout, NULL, _IOLBF, 0);
    memset(&r, 0, sizeof(r));

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
        return verb_new(dir ? dir : "migrations", nargs, args);
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
    migrate_history_init(&r.h, db, cfg->mysql_timeout_ms > 0 ? cfg->mysql_timeout_ms : 5000,
                         lock_timeout_s);

    if (migrate_files_load(&r.set, dir, &err) != PERMITD_OK) {
        fprintf(stderr, "permitd migrate: %s\n", err.message);
        goto out;
    }
    printf("database %s, migrations: %s (%zu)\n", r.h.url, r.set.source, r.set.n);
    fflush(stdout);
    if (migrate_history_connect(&r.h) != PERMITD_OK)
        goto out;

    if (strcmp(verb, "up") == 0)
        status = verb_up(&r, count);
    else if (strcmp(verb, "down") == 0)
        status = verb_down(&r, all ? -1 : count);
    else if (strcmp(verb, "status") == 0)
        status = verb_status(&r);
    else if (strcmp(verb, "validate") == 0)
        status = verb_validate(&r);
    else
        status = verb_force(&r, force_to);

out:
    migrate_history_close(&r.h);
    migrate_files_free(&r.set);
    dbconn_end();
    fflush(stdout);
    return status;
}
