/*
 * migrate.c - `permitd migrate`: applies and reverts the SQL files of
 * migrations/ against MySQL 8 or MariaDB, for DBAs. This file holds the
 * verbs (up, down, status, validate, force, new); their command line is
 * cli/cli_migrate.c's, and the pieces they are built from have files of
 * their own:
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
 * Every check of the arguments happens before any connection is made
 * (cli/cli_migrate.c, before migrate_do()).
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

int migrate_create(const char *dir, int argc, char **argv)
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

int migrate_do(const struct migrate_job *job)
{
    struct run r;
    struct permitd_error err = {0, ""};
    int status = MIGRATE_EXIT_FAILURE;

    memset(&r, 0, sizeof(r));
    migrate_history_init(&r.h, job->db, job->timeout_ms, job->lock_timeout_s);

    if (migrate_files_load(&r.set, job->dir, &err) != PERMITD_OK) {
        fprintf(stderr, "permitd migrate: %s\n", err.message);
        goto out;
    }
    printf("database %s, migrations: %s (%zu)\n", r.h.url, r.set.source, r.set.n);
    fflush(stdout);
    if (migrate_history_connect(&r.h) != PERMITD_OK)
        goto out;

    if (strcmp(job->verb, "up") == 0)
        status = verb_up(&r, job->count);
    else if (strcmp(job->verb, "down") == 0)
        status = verb_down(&r, job->count);
    else if (strcmp(job->verb, "status") == 0)
        status = verb_status(&r);
    else if (strcmp(job->verb, "validate") == 0)
        status = verb_validate(&r);
    else
        status = verb_force(&r, job->force_to);

out:
    migrate_history_close(&r.h);
    migrate_files_free(&r.set);
    dbconn_end();
    fflush(stdout);
    return status;
}
