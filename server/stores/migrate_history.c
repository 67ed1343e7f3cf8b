/*
 * migrate_history.c - the lock and the history table of `permitd migrate`.
 *
 * MySQL DDL is not transactional, so a run cannot be undone when statement
 * 3 of 5 fails; instead the history makes every run safe to reason about
 * afterwards:
 *
 *   - one run at a time: a GET_LOCK on the control connection is held from
 *     before the history is read until the run ends, so a second `up`
 *     waits and then finds the work done;
 *   - a version is recorded as 'dirty' before its first statement runs and
 *     as 'applied' after its last one, so a failure, a lost connection or a
 *     killed process all leave the same clear mark: which version, which
 *     statement, the server's message;
 *   - the SHA-256 of every applied .up.sql file is recorded, so a file
 *     changed afterwards is noticed.
 *
 * Every statement on the control connection is built here (struct sbuf:
 * a growable string that quotes for this connection), so the layout of
 * the table is known in one file. Connections come from dbconn.c.
 */
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mysql.h>

#include "stores/dbconn.h"
#include "stores/migrate_history.h"
#include "core/sha256.h"

/* Short names for the many format strings and statements below. */
#define VFMT MIGRATE_VFMT
#define HISTORY_TABLE MIGRATE_HISTORY_TABLE
#define LOCK_PREFIX MIGRATE_HISTORY_LOCK_PREFIX


/* A growable NUL-terminated string; on allocation failure it is marked
 * failed and later appends do nothing (checked once, in sb_ok()). */
struct sbuf {
    char *p;
    size_t len, cap;
    int failed;
};

static void sb_reserve(struct sbuf *b, size_t more)
{
    size_t cap;
    char *p;

    if (b->failed || b->len + more + 1 <= b->cap)
        return;
    cap = b->cap ? b->cap : 256;
    while (cap < b->len + more + 1)
        cap *= 2;
    p = realloc(b->p, cap);
    if (p == NULL) {
        b->failed = 1;
        return;
    }
    b->p = p;
    b->cap = cap;
}

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    sb_reserve(b, (size_t)n);
    if (b->failed)
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Appends s[0..n) as a quoted SQL string literal, escaped for conn. */
static void sb_quote(struct sbuf *b, MYSQL *conn, const char *s, size_t n)
{
    sb_reserve(b, 2 * n + 3);
    if (b->failed)
        return;
    b->p[b->len++] = '\'';
    b->len += mysql_real_escape_string(conn, b->p + b->len, s, (unsigned long)n);
    b->p[b->len++] = '\'';
    b->p[b->len] = '\0';
}

static int sb_ok(const struct sbuf *b)
{
    return !b->failed && b->p != NULL;
}

static void sb_free(struct sbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

static void rows_free(struct migrate_history *h)
{
    for (size_t i = 0; i < h->n; i++) {
        struct migrate_history_row *w = &h->rows[i];
        free(w->title); free(w->checksum); free(w->state); free(w->direction);
        free(w->applied_at); free(w->applied_by); free(w->execution_ms); free(w->statements);
        free(w->failed_statement); free(w->failed_line); free(w->error);
    }
    free(h->rows);
    h->rows = NULL;
    h->n = 0;
}

struct migrate_history_row *migrate_history_find(const struct migrate_history *h,
                                                 unsigned long long v)
{
    for (size_t i = 0; i < h->n; i++)
        if (h->rows[i].version == v)
            return &h->rows[i];
    return NULL;
}


/* Runs a statement on the control connection that returns no rows. */
static int ctl_exec(const struct migrate_history *h, const char *sql, const char *what)
{
    char msg[600];

    if (mysql_query(h->ctl, sql) != 0) {
        dbconn_error(h->ctl, msg, sizeof(msg));
        fprintf(stderr, "permitd migrate: %s: %s\n", what, msg);
        return -1;
    }
    return 0;
}

/* Runs a query returning one value; *out is a new string (NULL for SQL NULL).
 * Returns 0, or -1 after printing the error. */
static int ctl_value(const struct migrate_history *h, const char *sql, char **out, const char *what)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    char msg[600];

    *out = NULL;
    if (mysql_query(h->ctl, sql) != 0 || (res = mysql_store_result(h->ctl)) == NULL) {
        dbconn_error(h->ctl, msg, sizeof(msg));
        fprintf(stderr, "permitd migrate: %s: %s\n", what, msg);
        return -1;
    }
    row = mysql_fetch_row(res);
    if (row != NULL && row[0] != NULL)
        *out = strdup(row[0]);
    mysql_free_result(res);
    return 0;
}

/* The lock is per database: runs against two schemas on one server do not
 * wait for each other. GET_LOCK names hold at most 64 characters, so a
 * long database name is replaced by its hash. */
static void lock_name(struct migrate_history *h)
{
    char hex[65];

    if (strlen(LOCK_PREFIX ":") + strlen(h->db->database) <= 64) {
        /* Checked above: it fits; the precision only tells the compiler. */
        snprintf(h->lock_name, sizeof(h->lock_name), LOCK_PREFIX ":%.48s", h->db->database);
    } else {
        sha256_hex(h->db->database, strlen(h->db->database), hex);
        snprintf(h->lock_name, sizeof(h->lock_name), LOCK_PREFIX ":%.*s",
                 (int)(64 - strlen(LOCK_PREFIX ":")), hex);
    }
}

int migrate_history_lock(struct migrate_history *h)
{
    struct sbuf q = {0};
    char *v = NULL, *holder = NULL;
    int rc = PERMITD_EINTERNAL;

    sb_printf(&q, "SELECT GET_LOCK(");
    sb_quote(&q, h->ctl, h->lock_name, strlen(h->lock_name));
    sb_printf(&q, ", 0)");
    if (!sb_ok(&q) || ctl_value(h, q.p, &v, "taking the migration lock") != 0)
        goto out;
    if (v == NULL || strcmp(v, "1") != 0) {
        free(v);
        v = NULL;
        q.len = 0;
        sb_printf(&q, "SELECT IS_USED_LOCK(");
        sb_quote(&q, h->ctl, h->lock_name, strlen(h->lock_name));
        sb_printf(&q, ")");
        if (!sb_ok(&q) || ctl_value(h, q.p, &holder, "looking up the migration lock") != 0)
            goto out;
        printf("waiting up to %d s for the migration lock \"%s\", held by connection %s "
               "(another permitd migrate is running)...\n",
               h->lock_timeout_s, h->lock_name, holder ? holder : "?");
        fflush(stdout);
        q.len = 0;
        sb_printf(&q, "SELECT GET_LOCK(");
        sb_quote(&q, h->ctl, h->lock_name, strlen(h->lock_name));
        sb_printf(&q, ", %d)", h->lock_timeout_s);
        if (!sb_ok(&q) || ctl_value(h, q.p, &v, "waiting for the migration lock") != 0)
            goto out;
        if (v == NULL || strcmp(v, "1") != 0) {
            fprintf(stderr, "permitd migrate: gave up after %d s waiting for the migration lock "
                    "\"%s\" (held by connection %s); try again when the other run has finished "
                    "or raise --lock-timeout\n", h->lock_timeout_s, h->lock_name,
                    holder ? holder : "?");
            goto out;
        }
        printf("got the migration lock\n");
    }
    h->locked = 1;
    rc = PERMITD_OK;
out:
    free(v);
    free(holder);
    sb_free(&q);
    return rc;
}

static void lock_release(struct migrate_history *h)
{
    struct sbuf q = {0};
    MYSQL_RES *res;

    if (!h->locked)
        return;
    sb_printf(&q, "SELECT RELEASE_LOCK(");
    sb_quote(&q, h->ctl, h->lock_name, strlen(h->lock_name));
    sb_printf(&q, ")");
    /* Closing the connection releases it too; this only makes it prompt. */
    if (sb_ok(&q) && mysql_query(h->ctl, q.p) == 0 && (res = mysql_store_result(h->ctl)) != NULL)
        mysql_free_result(res);
    h->locked = 0;
    sb_free(&q);
}

int migrate_history_create(struct migrate_history *h)
{
    static const char ddl[] =
        "CREATE TABLE IF NOT EXISTS " HISTORY_TABLE " (\n"
        "  version          BIGINT UNSIGNED NOT NULL,\n"
        "  title            VARCHAR(255) NOT NULL,\n"
        "  checksum         CHAR(64) NOT NULL,\n"
        "  state            VARCHAR(8) NOT NULL,\n"
        "  direction        VARCHAR(4) NOT NULL DEFAULT 'up',\n"
        "  applied_at       DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),\n"
        "  applied_by       VARCHAR(255) NOT NULL DEFAULT '',\n"
        "  execution_ms     BIGINT UNSIGNED NULL,\n"
        "  statements       INT UNSIGNED NULL,\n"
        "  failed_statement INT UNSIGNED NULL,\n"
        "  failed_line      INT UNSIGNED NULL,\n"
        "  error            TEXT NULL,\n"
        "  PRIMARY KEY (version),\n"
        "  CONSTRAINT chk_" HISTORY_TABLE "_state CHECK (state IN ('applied', 'dirty')),\n"
        "  CONSTRAINT chk_" HISTORY_TABLE "_direction CHECK (direction IN ('up', 'down'))\n"
        ") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci";

    if (ctl_exec(h, ddl, "creating " HISTORY_TABLE) != 0)
        return PERMITD_EINTERNAL;
    h->have_table = 1;
    return PERMITD_OK;
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

int migrate_history_load(struct migrate_history *h)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    char msg[600];

    rows_free(h);
    if (mysql_query(h->ctl,
                    "SELECT version, title, checksum, state, direction, "
                    "DATE_FORMAT(applied_at, '%Y-%m-%d %H:%i:%s.%f'), applied_by, execution_ms, "
                    "statements, failed_statement, failed_line, error "
                    "FROM " HISTORY_TABLE " ORDER BY version") != 0) {
        if (mysql_errno(h->ctl) == 1146) {        /* ER_NO_SUCH_TABLE */
            h->have_table = 0;
            return PERMITD_OK;
        }
        dbconn_error(h->ctl, msg, sizeof(msg));
        fprintf(stderr, "permitd migrate: reading " HISTORY_TABLE ": %s\n", msg);
        return PERMITD_EINTERNAL;
    }
    h->have_table = 1;
    if ((res = mysql_store_result(h->ctl)) == NULL) {
        dbconn_error(h->ctl, msg, sizeof(msg));
        fprintf(stderr, "permitd migrate: reading " HISTORY_TABLE ": %s\n", msg);
        return PERMITD_EINTERNAL;
    }
    h->rows = calloc(mysql_num_rows(res) + 1, sizeof(*h->rows));
    if (h->rows == NULL) {
        mysql_free_result(res);
        fprintf(stderr, "permitd migrate: out of memory\n");
        return PERMITD_EINTERNAL;
    }
    while ((row = mysql_fetch_row(res)) != NULL) {
        struct migrate_history_row *w = &h->rows[h->n++];
        w->version = strtoull(row[0], NULL, 10);
        w->title = dup_or_null(row[1]);
        w->checksum = dup_or_null(row[2]);
        w->state = dup_or_null(row[3]);
        w->direction = dup_or_null(row[4]);
        w->applied_at = dup_or_null(row[5]);
        if (w->applied_at != NULL && strlen(w->applied_at) > 23)
            w->applied_at[23] = '\0';            /* milliseconds are enough */
        w->applied_by = dup_or_null(row[6]);
        w->execution_ms = dup_or_null(row[7]);
        w->statements = dup_or_null(row[8]);
        w->failed_statement = dup_or_null(row[9]);
        w->failed_line = dup_or_null(row[10]);
        w->error = dup_or_null(row[11]);
    }
    mysql_free_result(res);
    return PERMITD_OK;
}

/* Appends "CONCAT(CURRENT_USER(), ' (os user NAME)')" for applied_by. */
static void sb_applied_by(struct sbuf *q, const struct migrate_history *h)
{
    char who[200];

    snprintf(who, sizeof(who), " (os user %s)", h->os_user);
    sb_printf(q, "CONCAT(CURRENT_USER(), ");
    sb_quote(q, h->ctl, who, strlen(who));
    sb_printf(q, ")");
}


/* Tells the DBA how to get out of a dirty version v (prev: the version
 * applied before it). */
static void print_hint(unsigned long long v, unsigned long long prev)
{
    fprintf(stderr, "permitd migrate: repair the schema by hand, then run `permitd migrate force "
            VFMT "` if version " VFMT " is now fully applied, or `permitd migrate "
            "force " VFMT "` if its changes are undone, and run `permitd migrate up` "
            "again\n", v, v, prev);
}

/* The version applied before v (0 when none), from the history. */
static unsigned long long prev_version(const struct migrate_history *h, unsigned long long v)
{
    unsigned long long p = 0;

    for (size_t i = 0; i < h->n; i++)
        if (h->rows[i].version < v && h->rows[i].version > p)
            p = h->rows[i].version;
    return p;
}

/* Describes a dirty history row on stderr. */


static void os_user(char *buf, size_t len)
{
    struct passwd *pw = getpwuid(geteuid());
    const char *env = getenv("USER");

    if (pw != NULL && pw->pw_name != NULL)
        snprintf(buf, len, "%s", pw->pw_name);
    else if (env != NULL && env[0] != '\0')
        snprintf(buf, len, "%s", env);
    else
        snprintf(buf, len, "uid %u", (unsigned)geteuid());
}

void migrate_history_init(struct migrate_history *h, const struct config_mysql *db,
                          int timeout_ms, int lock_timeout_s)
{
    memset(h, 0, sizeof(*h));
    h->db = db;
    h->timeout_ms = timeout_ms;
    h->lock_timeout_s = lock_timeout_s;
    config_mysql_url_masked(db, h->url, sizeof(h->url));
    lock_name(h);
    os_user(h->os_user, sizeof(h->os_user));
}

/* Times in the history are UTC (dbconn.c); the connection speaks utf8mb4
 * with the collation the schema uses. The server must not close it for
 * being idle while a long migration runs on the other one (wait_timeout):
 * the control connection holds the run's lock and writes its result. */
static const char *const run_session[] = {
    "SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci",
    "SET SESSION wait_timeout = 31536000",
    NULL,
};

MYSQL *migrate_history_connect_work(const struct migrate_history *h, unsigned int read_timeout_s,
                                    unsigned long client_flags)
{
    struct dbconn_options o = {
        .timeout_ms = h->timeout_ms,
        .read_timeout_s = read_timeout_s,
        .client_flags = client_flags,
        .session = run_session,
    };
    struct permitd_error err = {0, ""};
    MYSQL *conn;

    if (dbconn_open(h->db, &o, &conn, &err) != PERMITD_OK) {
        fprintf(stderr, "permitd migrate: %s\n", err.message);
        return NULL;
    }
    return conn;
}

int migrate_history_connect(struct migrate_history *h)
{
    /* The lock wait may be long; the other queries here are short. */
    h->ctl = migrate_history_connect_work(
        h, (unsigned int)(h->lock_timeout_s + (h->timeout_ms + 999) / 1000), 0);
    return h->ctl != NULL ? PERMITD_OK : PERMITD_EINTERNAL;
}

void migrate_history_close(struct migrate_history *h)
{
    if (h->ctl != NULL) {
        lock_release(h);
        mysql_close(h->ctl);
        h->ctl = NULL;
    }
    rows_free(h);
}

int migrate_history_lock_holder(struct migrate_history *h, char **holder)
{
    struct sbuf q = {0};
    int rc = PERMITD_EINTERNAL;

    *holder = NULL;
    sb_printf(&q, "SELECT IS_USED_LOCK(");
    sb_quote(&q, h->ctl, h->lock_name, strlen(h->lock_name));
    sb_printf(&q, ")");
    if (sb_ok(&q) && ctl_value(h, q.p, holder, "looking up the migration lock") == 0)
        rc = PERMITD_OK;
    sb_free(&q);
    return rc;
}

unsigned long long migrate_history_top(const struct migrate_history *h)
{
    unsigned long long top = 0;

    for (size_t i = 0; i < h->n; i++)
        if (h->rows[i].version > top)
            top = h->rows[i].version;
    return top;
}

void migrate_history_print_hint(const struct migrate_history *h, unsigned long long v)
{
    print_hint(v, prev_version(h, v));
}

/* Runs q (when it was built whole) on the control connection. */
static int run_built(const struct migrate_history *h, struct sbuf *q, const char *what)
{
    int rc = sb_ok(q) && ctl_exec(h, q->p, what) == 0 ? PERMITD_OK : PERMITD_EINTERNAL;

    sb_free(q);
    return rc;
}

int migrate_history_started(struct migrate_history *h, const struct migrate_file *m, int up,
                            size_t nstatements)
{
    struct sbuf q = {0};

    if (up) {
        sb_printf(&q, "INSERT INTO " HISTORY_TABLE " (version, title, checksum, state, "
                  "direction, applied_at, applied_by, statements) VALUES (%llu, ", m->version);
        sb_quote(&q, h->ctl, m->title, strlen(m->title));
        sb_printf(&q, ", '%s', 'dirty', 'up', UTC_TIMESTAMP(6), ", m->checksum);
        sb_applied_by(&q, h);
        sb_printf(&q, ", %zu)", nstatements);
    } else {
        sb_printf(&q, "UPDATE " HISTORY_TABLE " SET state = 'dirty', direction = 'down', "
                  "applied_at = UTC_TIMESTAMP(6), execution_ms = NULL, failed_statement = NULL, "
                  "failed_line = NULL, error = NULL, statements = %zu, applied_by = ", nstatements);
        sb_applied_by(&q, h);
        sb_printf(&q, " WHERE version = %llu", m->version);
    }
    return run_built(h, &q, "recording the start in " HISTORY_TABLE);
}

int migrate_history_finished(struct migrate_history *h, const struct migrate_file *m, int up,
                             long long ms)
{
    struct sbuf q = {0};

    if (up)
        sb_printf(&q, "UPDATE " HISTORY_TABLE " SET state = 'applied', execution_ms = %lld "
                  "WHERE version = %llu", ms, m->version);
    else
        sb_printf(&q, "DELETE FROM " HISTORY_TABLE " WHERE version = %llu", m->version);
    return run_built(h, &q, "recording the result in " HISTORY_TABLE);
}

int migrate_history_failed(struct migrate_history *h, const struct migrate_file *m,
                           long long ms, size_t failed, int line, const char *msg)
{
    struct sbuf q = {0};

    sb_printf(&q, "UPDATE " HISTORY_TABLE " SET execution_ms = %lld, failed_statement = ",
              ms);
    if (failed)
        sb_printf(&q, "%zu, failed_line = %d", failed, line);
    else
        sb_printf(&q, "NULL, failed_line = NULL");
    sb_printf(&q, ", error = ");
    sb_quote(&q, h->ctl, msg, strlen(msg));
    sb_printf(&q, " WHERE version = %llu", m->version);
    return run_built(h, &q, "recording the failure in " HISTORY_TABLE);
}

int migrate_history_forget(struct migrate_history *h, unsigned long long v)
{
    struct sbuf q = {0};

    sb_printf(&q, "DELETE FROM " HISTORY_TABLE " WHERE version = %llu", v);
    return run_built(h, &q, "force");
}

int migrate_history_mark_applied(struct migrate_history *h, const struct migrate_file *m,
                                 int exists)
{
    struct sbuf q = {0};

    if (exists) {
        sb_printf(&q, "UPDATE " HISTORY_TABLE " SET state = 'applied', direction = 'up', "
                  "checksum = '%s', failed_statement = NULL, failed_line = NULL, "
                  "error = NULL, execution_ms = NULL, applied_at = UTC_TIMESTAMP(6), "
                  "applied_by = ", m->checksum);
        sb_applied_by(&q, h);
        sb_printf(&q, " WHERE version = %llu", m->version);
    } else {
        sb_printf(&q, "INSERT INTO " HISTORY_TABLE " (version, title, checksum, state, "
                  "direction, applied_at, applied_by) VALUES (%llu, ", m->version);
        sb_quote(&q, h->ctl, m->title, strlen(m->title));
        sb_printf(&q, ", '%s', 'applied', 'up', UTC_TIMESTAMP(6), ", m->checksum);
        sb_applied_by(&q, h);
        sb_printf(&q, ")");
    }
    return run_built(h, &q, "force");
}
