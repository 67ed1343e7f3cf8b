/*
 * migrate_run.c - runs one migration file: splits it (migrate_sql.c), marks
 * the version dirty in the history (migrate_history.c), sends each
 * statement on a connection of its own and records the outcome.
 *
 * The file runs on a fresh "work" connection, so session settings a file
 * makes do not leak into the next one or into the history's bookkeeping on
 * the control connection. The work connection has no read timeout: an
 * ALTER may run for hours, and giving up on the client side would not stop
 * it on the server. Every result a statement produces is drained (a CALL
 * can produce several), and the server's warnings are printed.
 *
 * A file may open with a check that refuses it: a stored procedure named
 * permitd_check_* that it creates, CALLs (the procedure SIGNALs to refuse,
 * naming why) and drops again (0006's down refuses while a policy would be
 * lost). Those statements run before the version is marked dirty: a
 * refusal changes nothing, so the DBA fixes what it names and runs the
 * verb again, with no `force` (a SIGNAL from statement 3 of a plain file
 * would leave the version dirty). The mysql client running the file by
 * hand stops at the same SIGNAL.
 */
#include <stdint.h>
#include <strings.h>
#include <stdio.h>
#include <string.h>

#include <mysql.h>

#include "core/clock.h"
#include "stores/dbconn.h"
#include "stores/migrate_run.h"
#include "stores/migrate_sql.h"

/* Short names for the many format strings and statements below. */
#define VFMT MIGRATE_VFMT
#define HISTORY_TABLE MIGRATE_HISTORY_TABLE

#define STATEMENT_SHOWN 300        /* bytes of a failed statement printed */

/* Prints the server's warnings for the last statement on conn. */
static void print_warnings(MYSQL *conn, const char *file, size_t n)
{
    MYSQL_RES *res;
    MYSQL_ROW row;

    if (mysql_query(conn, "SHOW WARNINGS") != 0 || (res = mysql_store_result(conn)) == NULL)
        return;
    while ((row = mysql_fetch_row(res)) != NULL)
        printf("  %s statement %zu: %s %s: %s\n", file, n, row[0] ? row[0] : "",
               row[1] ? row[1] : "", row[2] ? row[2] : "");
    mysql_free_result(res);
}

/* Runs one statement and drains every result it produces. Returns 0, or
 * -1 with the server's message in msg. */
static int exec_statement(MYSQL *conn, const struct migrate_sql_statement *st, char *msg,
                          size_t len)
{
    int status;

    if (mysql_real_query(conn, st->text, (unsigned long)st->len) != 0)
        goto fail;
    do {
        MYSQL_RES *res = mysql_store_result(conn);
        if (res != NULL)
            mysql_free_result(res);
        else if (mysql_field_count(conn) != 0)
            goto fail;
        status = mysql_next_result(conn);
    } while (status == 0);
    if (status > 0)
        goto fail;
    return 0;
fail:
    dbconn_error(conn, msg, len);
    return -1;
}

/* Prints the first STATEMENT_SHOWN bytes of a statement, indented. */
static void print_statement(FILE *f, const struct migrate_sql_statement *st)
{
    size_t n = st->len < STATEMENT_SHOWN ? st->len : STATEMENT_SHOWN;

    fprintf(f, "permitd migrate: the statement was:\n    ");
    for (size_t i = 0; i < n; i++) {
        fputc(st->text[i], f);
        if (st->text[i] == '\n')
            fputs("    ", f);
    }
    fprintf(f, "%s\n", n < st->len ? " ..." : "");
}

/* Moves *p past the keyword kw (any case) and the blanks after it; 0 when
 * the text at *p is not kw followed by a blank. */
static int keyword(const char **p, const char *end, const char *kw)
{
    size_t n = strlen(kw);

    if ((size_t)(end - *p) <= n || strncasecmp(*p, kw, n) != 0 ||
        !((*p)[n] == ' ' || (*p)[n] == '\t' || (*p)[n] == '\n' || (*p)[n] == '\r'))
        return 0;
    *p += n;
    while (*p < end && (**p == ' ' || **p == '\t' || **p == '\n' || **p == '\r'))
        (*p)++;
    return 1;
}

#define CHECK_PREFIX "permitd_check_"

/* Whether st is a statement of a file's opening check (see the top):
 * DROP PROCEDURE [IF EXISTS], CREATE PROCEDURE or CALL of a procedure
 * named permitd_check_*. *drop is set for a DROP. */
static int check_statement(const struct migrate_sql_statement *st, int *drop)
{
    const char *p = st->text, *end = st->text + st->len;

    *drop = 0;
    if (keyword(&p, end, "DROP") && keyword(&p, end, "PROCEDURE")) {
        *drop = 1;
        if (keyword(&p, end, "IF"))
            keyword(&p, end, "EXISTS");
    } else {
        p = st->text;
        if (!(keyword(&p, end, "CREATE") && keyword(&p, end, "PROCEDURE"))) {
            p = st->text;
            if (!keyword(&p, end, "CALL"))
                return 0;
        }
    }
    return (size_t)(end - p) > strlen(CHECK_PREFIX) &&
           strncasecmp(p, CHECK_PREFIX, strlen(CHECK_PREFIX)) == 0;
}

/* Runs the file's opening check (see the top) on work, before anything is
 * marked: *nchecks is set to the number of its statements. Returns 0 when
 * there is none or it passed; -1 when it refused (or failed), after
 * dropping the check's procedure again and printing the server's message
 * and that nothing was changed. */
static int run_checks(MYSQL *work, const struct migrate_sql_script *script, const char *file,
                      const struct migrate_file *m, size_t *nchecks)
{
    char msg[2048] = "";
    int drop;
    size_t n = 0;

    while (n < script->n && check_statement(&script->v[n], &drop))
        n++;
    *nchecks = n;
    for (size_t i = 0; i < n; i++) {
        if (exec_statement(work, &script->v[i], msg, sizeof(msg)) == 0)
            continue;
        for (size_t j = i + 1; j < n; j++) {
            char ignored[256];
            if (check_statement(&script->v[j], &drop) && drop)
                exec_statement(work, &script->v[j], ignored, sizeof(ignored));
        }
        /* SQLSTATE 45000: the check's SIGNAL, the file refusing on purpose. */
        fprintf(stderr, "permitd migrate: %s %s (statement %zu, line %d): %s\n"
                "permitd migrate: nothing was changed; version " VFMT " (%s) stays as it "
                "was\n", file, strstr(msg, "(45000)") ? "refused by its check" :
                "could not run its check", i + 1, script->v[i].line, msg, m->version, m->title);
        return -1;
    }
    return 0;
}

int migrate_run_one(struct migrate_history *h, const struct migrate_files *files,
                    const struct migrate_file *m, int up)
{
    const char *file = up ? m->up_name : m->down_name;
    const char *text = up ? m->up : m->down;
    size_t text_len = up ? m->up_len : m->down_len;
    struct migrate_sql_script script = {NULL, 0};
    struct permitd_error err = {0, ""};
    MYSQL *work = NULL;
    char msg[2048] = "";
    size_t failed = 0, warnings = 0, nchecks = 0;
    int64_t t0;
    long long ms;
    int rc = PERMITD_EINTERNAL;

    if (migrate_sql_split(text, text_len, &script, &err) != PERMITD_OK) {
        fprintf(stderr, "permitd migrate: %s: %s\n", file, err.message);
        return PERMITD_EINTERNAL;
    }
    printf("%s " VFMT " %s: %zu statement%s ...\n", up ? "applying" : "reverting",
           m->version, m->title, script.n, script.n == 1 ? "" : "s");
    fflush(stdout);

    t0 = clock_now_us();
    work = migrate_history_connect_work(h, 0, CLIENT_MULTI_RESULTS);
    if (work != NULL && run_checks(work, &script, file, m, &nchecks) != 0)
        goto out;

    /* Dirty first: whatever happens next, the history says so. */
    if (migrate_history_started(h, m, up, script.n) != PERMITD_OK)
        goto out;

    if (work == NULL) {
        snprintf(msg, sizeof(msg), "could not connect to run the file");
    } else {
        for (size_t i = nchecks; i < script.n; i++) {
            if (exec_statement(work, &script.v[i], msg, sizeof(msg)) != 0) {
                failed = i + 1;
                break;
            }
            if (mysql_warning_count(work) > 0) {
                warnings += mysql_warning_count(work);
                print_warnings(work, file, i + 1);
            }
        }
    }
    ms = (long long)((clock_now_us() - t0) / 1000);

    if (work != NULL && failed == 0) {
        if (migrate_history_finished(h, m, up, ms) != PERMITD_OK) {
            fprintf(stderr, "permitd migrate: %s ran completely but " HISTORY_TABLE
                    " still marks version " VFMT " dirty: check the schema, then run "
                    "`permitd migrate force VERSION`\n", file, m->version);
            goto out;
        }
        printf("%s " VFMT " %s: ok, %zu statement%s in %lld ms%s\n",
               up ? "applied" : "reverted", m->version, m->title, script.n,
               script.n == 1 ? "" : "s", ms, warnings ? " (with warnings, above)" : "");
        rc = PERMITD_OK;
        goto out;
    }

    /* Failed: say which statement and why, and record it. */
    if (failed)
        fprintf(stderr, "permitd migrate: %s%s%s: statement %zu of %zu (line %d) failed: %s\n",
                files->dir ? files->dir : "", files->dir ? "/" : "", file, failed, script.n,
                script.v[failed - 1].line, msg);
    else
        fprintf(stderr, "permitd migrate: %s: %s\n", file, msg);
    if (failed)
        print_statement(stderr, &script.v[failed - 1]);
    if (migrate_history_failed(h, m, ms, failed, failed ? script.v[failed - 1].line : 0, msg)
        != PERMITD_OK)
        fprintf(stderr, "permitd migrate: (the failure could not be recorded; "
                HISTORY_TABLE " still marks version " VFMT " dirty)\n",
                m->version);
    fprintf(stderr, "permitd migrate: version " VFMT " (%s) is now marked dirty in "
            HISTORY_TABLE "; up and down refuse to run until it is repaired\n",
            m->version, m->title);
    migrate_history_print_hint(h, m->version);

out:
    if (work != NULL)
        mysql_close(work);
    migrate_sql_free(&script);
    return rc;
}
