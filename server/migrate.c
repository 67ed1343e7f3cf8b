/*
 * migrate.c - `permitd migrate`: applies and reverts the SQL files of
 * migrations/ against MySQL 8 or MariaDB, for DBAs.
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
 * Each file runs on a fresh connection of its own (the "work" connection),
 * statement by statement as the stock mysql client would split it
 * (migrate_split), so session settings a file makes do not leak into the
 * next one or into the history bookkeeping. Only this file (and store.c)
 * include mysql.h.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mysql.h>

#include "embed.h"
#include "migrate.h"

/* The files of migrations/, embedded by cmake/embed.cmake (PREFIX migration). */
extern const struct embedded_file migration_files[];

#define HISTORY_TABLE "permitd_schema_history"
#define LOCK_PREFIX "permitd_migrate"
#define DEFAULT_LOCK_TIMEOUT_S 60
#define STATEMENT_SHOWN 300        /* bytes of a failed statement printed */

/* ------------------------------------------------------------------ */
/* small helpers                                                      */

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

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------ */
/* SHA-256 (FIPS 180-4), for the file checksums                       */

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha_block(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[64], a, b, c, d, e, f, g, hh, t1, t2;

    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    a = h[0]; b = h[1]; c = h[2]; d = h[3]; e = h[4]; f = h[5]; g = h[6]; hh = h[7];
    for (int i = 0; i < 64; i++) {
        t1 = hh + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + sha_k[i] + w[i];
        t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

void migrate_sha256_hex(const void *data, size_t len, char hex[65])
{
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const unsigned char *p = data;
    unsigned char tail[128];
    size_t rest = len % 64, tlen = rest < 56 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8;

    for (size_t i = 0; i + 64 <= len; i += 64)
        sha_block(h, p + i);
    memset(tail, 0, sizeof(tail));
    if (rest)
        memcpy(tail, p + len - rest, rest);
    tail[rest] = 0x80;
    for (int i = 0; i < 8; i++)
        tail[tlen - 1 - i] = (unsigned char)(bits >> (8 * i));
    sha_block(h, tail);
    if (tlen == 128)
        sha_block(h, tail + 64);
    for (int i = 0; i < 8; i++)
        snprintf(hex + 8 * i, 9, "%08" PRIx32, h[i]);
}

/* ------------------------------------------------------------------ */
/* splitting a file into statements                                   */

static int add_statement(struct migrate_script *s, size_t *cap, const char *text,
                         size_t len, int line)
{
    while (len > 0 && isspace((unsigned char)text[len - 1]))
        len--;
    if (len == 0)
        return PERMITD_OK;
    if (s->n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        struct migrate_statement *v = realloc(s->v, ncap * sizeof(*v));
        if (v == NULL)
            return PERMITD_EINTERNAL;
        s->v = v;
        *cap = ncap;
    }
    s->v[s->n].text = text;
    s->v[s->n].len = len;
    s->v[s->n].line = line;
    s->n++;
    return PERMITD_OK;
}

/* Counts the newlines in sql[from..to). */
static int newlines(const char *sql, size_t from, size_t to)
{
    int n = 0;

    for (size_t i = from; i < to; i++)
        n += sql[i] == '\n';
    return n;
}

int migrate_split(const char *sql, size_t len, struct migrate_script *out,
                  struct permitd_error *err)
{
    char delim[32] = ";";
    size_t dlen = 1, cap = 0, i = 0, start = 0;
    int line = 1, start_line = 0, in_stmt = 0;

    out->v = NULL;
    out->n = 0;
    while (i < len) {
        char c = sql[i];

        /* "DELIMITER xx" on a line of its own, between statements: a
         * client command, never sent to the server. */
        if (!in_stmt && (i == 0 || sql[i - 1] == '\n')) {
            size_t j = i;
            while (j < len && (sql[j] == ' ' || sql[j] == '\t'))
                j++;
            if (len - j >= 9 && strncasecmp(sql + j, "delimiter", 9) == 0 &&
                (j + 9 == len || isspace((unsigned char)sql[j + 9]))) {
                size_t k = j + 9, d0;
                while (k < len && (sql[k] == ' ' || sql[k] == '\t'))
                    k++;
                d0 = k;
                while (k < len && !isspace((unsigned char)sql[k]))
                    k++;
                if (k == d0 || k - d0 >= sizeof(delim)) {
                    migrate_script_free(out);
                    return permitd_error_set(err, PERMITD_EINVAL,
                                             "line %d: DELIMITER needs a delimiter of 1 to %zu characters",
                                             line, sizeof(delim) - 1);
                }
                memcpy(delim, sql + d0, k - d0);
                dlen = k - d0;
                delim[dlen] = '\0';
                while (k < len && sql[k] != '\n')
                    k++;
                i = k;       /* the newline, if any, is counted below */
                continue;
            }
        }

        if (in_stmt && len - i >= dlen && memcmp(sql + i, delim, dlen) == 0) {
            if (add_statement(out, &cap, sql + start, i - start, start_line) != PERMITD_OK)
                goto oom;
            in_stmt = 0;
            i += dlen;
            continue;
        }
        if (!in_stmt && len - i >= dlen && memcmp(sql + i, delim, dlen) == 0) {
            i += dlen;       /* an empty statement */
            continue;
        }

        if (c == '\n') {
            line++;
            i++;
        } else if (c == '#' ||
                   (c == '-' && i + 1 < len && sql[i + 1] == '-' &&
                    (i + 2 == len || isspace((unsigned char)sql[i + 2]) ||
                     iscntrl((unsigned char)sql[i + 2])))) {
            while (i < len && sql[i] != '\n')
                i++;
        } else if (c == '/' && i + 1 < len && sql[i + 1] == '*') {
            /* Slash-star-bang and slash-star-M-bang comments hold code
             * for the server; other comments are only kept when they sit
             * inside a statement. */
            const char *end = NULL;
            int executable = (i + 2 < len && sql[i + 2] == '!') ||
                             (i + 3 < len && sql[i + 2] == 'M' && sql[i + 3] == '!');
            for (size_t j = i + 2; j + 1 < len; j++)
                if (sql[j] == '*' && sql[j + 1] == '/') {
                    end = sql + j;
                    break;
                }
            if (end == NULL) {
                migrate_script_free(out);
                return permitd_error_set(err, PERMITD_EINVAL,
                                         "line %d: comment /* is never closed", line);
            }
            if (executable && !in_stmt) {
                in_stmt = 1;
                start = i;
                start_line = line;
            }
            line += newlines(sql, i, (size_t)(end - sql));
            i = (size_t)(end - sql) + 2;
        } else if (c == '\'' || c == '"' || c == '`') {
            size_t j = i + 1;
            int closed = 0;
            if (!in_stmt) {
                in_stmt = 1;
                start = i;
                start_line = line;
            }
            while (j < len) {
                if (sql[j] == '\\' && c != '`') {
                    j += 2;
                } else if (sql[j] == c) {
                    if (j + 1 < len && sql[j + 1] == c) {
                        j += 2;          /* '' inside '...' */
                    } else {
                        closed = 1;
                        j++;
                        break;
                    }
                } else {
                    j++;
                }
            }
            if (!closed) {
                migrate_script_free(out);
                return permitd_error_set(err, PERMITD_EINVAL,
                                         "line %d: %s %c is never closed", line,
                                         c == '`' ? "quoted name" : "string", c);
            }
            line += newlines(sql, i, j);
            i = j;
        } else {
            if (!in_stmt && !isspace((unsigned char)c)) {
                in_stmt = 1;
                start = i;
                start_line = line;
            }
            i++;
        }
    }
    if (in_stmt && add_statement(out, &cap, sql + start, len - start, start_line) != PERMITD_OK)
        goto oom;
    return PERMITD_OK;

oom:
    migrate_script_free(out);
    return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
}

void migrate_script_free(struct migrate_script *s)
{
    if (s == NULL)
        return;
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

/* ------------------------------------------------------------------ */
/* the migration files                                                */

struct migration {
    unsigned long long version;
    char *title;                  /* "policies" */
    char *up_name, *down_name;    /* "0001_policies.up.sql"; down may be NULL */
    char *up, *down;              /* file contents, NUL-terminated */
    size_t up_len, down_len;
    char checksum[65];            /* SHA-256 of up */
};

struct migration_set {
    struct migration *v;          /* sorted by version */
    size_t n;
    char source[1100];            /* "embedded" or the directory, for messages */
    const char *dir;              /* NULL when embedded */
};

static void set_free(struct migration_set *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].title);
        free(s->v[i].up_name);
        free(s->v[i].down_name);
        free(s->v[i].up);
        free(s->v[i].down);
    }
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

/* Parses "NNNN_title.up.sql" / ".down.sql". Returns 1 and fills the parts,
 * 0 when name does not follow the convention. */
static int parse_name(const char *name, unsigned long long *version, char *title,
                      size_t titlelen, int *is_up)
{
    const char *us, *dot;
    size_t n = strlen(name), tl;
    char *end;

    if (n > 7 && strcmp(name + n - 7, ".up.sql") == 0) {
        *is_up = 1;
        dot = name + n - 7;
    } else if (n > 9 && strcmp(name + n - 9, ".down.sql") == 0) {
        *is_up = 0;
        dot = name + n - 9;
    } else {
        return 0;
    }
    if (!isdigit((unsigned char)name[0]))
        return 0;
    errno = 0;
    *version = strtoull(name, &end, 10);
    if (errno != 0 || *end != '_' || *version == 0)
        return 0;
    us = end;
    tl = (size_t)(dot - us - 1);
    if (dot <= us + 1 || tl >= titlelen)
        return 0;
    memcpy(title, us + 1, tl);
    title[tl] = '\0';
    return 1;
}

static struct migration *find_version(struct migration_set *s, unsigned long long v)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].version == v)
            return &s->v[i];
    return NULL;
}

/* Adds one file to the set; takes ownership of data. */
static int set_add(struct migration_set *s, const char *name, char *data, size_t len,
                   struct permitd_error *err)
{
    unsigned long long version;
    char title[256];
    int is_up;
    struct migration *m;

    if (!parse_name(name, &version, title, sizeof(title), &is_up)) {
        free(data);
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "%s: %s is not named NNNN_title.up.sql or NNNN_title.down.sql "
                                 "(NNNN a version from 1)", s->source, name);
    }
    m = find_version(s, version);
    if (m == NULL) {
        struct migration *v = realloc(s->v, (s->n + 1) * sizeof(*v));
        if (v == NULL) {
            free(data);
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        }
        s->v = v;
        m = &s->v[s->n++];
        memset(m, 0, sizeof(*m));
        m->version = version;
        m->title = strdup(title);
        if (m->title == NULL) {
            free(data);
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        }
    } else if (strcmp(m->title, title) != 0) {
        free(data);
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "%s: %s and %s share version %llu: give each migration a "
                                 "version of its own and its up and down files the same title",
                                 s->source, name, m->up_name ? m->up_name : m->down_name, version);
    }
    if ((is_up && m->up != NULL) || (!is_up && m->down != NULL)) {
        free(data);
        return permitd_error_set(err, PERMITD_EINVAL, "%s: two %s files for version %llu (%s and %s)",
                                 s->source, is_up ? "up" : "down", version, name,
                                 is_up ? m->up_name : m->down_name);
    }
    if (is_up) {
        m->up = data;
        m->up_len = len;
        m->up_name = strdup(name);
        migrate_sha256_hex(data, len, m->checksum);
    } else {
        m->down = data;
        m->down_len = len;
        m->down_name = strdup(name);
    }
    if ((is_up && m->up_name == NULL) || (!is_up && m->down_name == NULL))
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    return PERMITD_OK;
}

static int by_version(const void *a, const void *b)
{
    const struct migration *x = a, *y = b;

    return x->version < y->version ? -1 : x->version > y->version;
}

static int read_file(const char *path, char **data, size_t *len, struct permitd_error *err)
{
    FILE *f = fopen(path, "rb");
    char *p = NULL;
    size_t n = 0, cap = 0, got;

    *data = NULL;
    if (f == NULL)
        return permitd_error_set(err, PERMITD_EINVAL, "cannot read %s: %s", path, strerror(errno));
    for (;;) {
        if (cap - n < 4096) {
            char *q = realloc(p, cap ? cap * 2 : 8192);
            if (q == NULL) {
                free(p);
                fclose(f);
                return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
            }
            p = q;
            cap = cap ? cap * 2 : 8192;
        }
        got = fread(p + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        free(p);
        fclose(f);
        return permitd_error_set(err, PERMITD_EINVAL, "cannot read %s", path);
    }
    fclose(f);
    p[n] = '\0';
    *data = p;
    *len = n;
    return PERMITD_OK;
}

/* Loads the migrations: from dir when not NULL, else the embedded ones.
 * Every up file must have a version of its own; a down file needs its up
 * file. Files in dir that do not end in .sql are ignored. */
static int set_load(struct migration_set *s, const char *dir, struct permitd_error *err)
{
    int rc = PERMITD_OK;

    memset(s, 0, sizeof(*s));
    s->dir = dir;
    if (dir == NULL) {
        snprintf(s->source, sizeof(s->source), "embedded migrations");
        for (const struct embedded_file *f = migration_files; f->name != NULL; f++) {
            char *copy = malloc(f->len + 1);
            if (copy == NULL)
                return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
            memcpy(copy, f->data, f->len + 1);
            if ((rc = set_add(s, f->name, copy, f->len, err)) != PERMITD_OK)
                return rc;
        }
    } else {
        DIR *d = opendir(dir);
        struct dirent *e;

        snprintf(s->source, sizeof(s->source), "%s", dir);
        if (d == NULL)
            return permitd_error_set(err, PERMITD_EINVAL, "cannot open migrations directory %s: %s",
                                     dir, strerror(errno));
        while ((e = readdir(d)) != NULL) {
            size_t n = strlen(e->d_name);
            char path[4096], *data;
            size_t len = 0;
            if (n < 4 || strcmp(e->d_name + n - 4, ".sql") != 0)
                continue;
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            if ((rc = read_file(path, &data, &len, err)) != PERMITD_OK ||
                (rc = set_add(s, e->d_name, data, len, err)) != PERMITD_OK)
                break;
        }
        closedir(d);
        if (rc != PERMITD_OK)
            return rc;
    }
    if (s->n > 1)
        qsort(s->v, s->n, sizeof(*s->v), by_version);
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].up == NULL)
            return permitd_error_set(err, PERMITD_EINVAL, "%s: %s has no %.*s.up.sql",
                                     s->source, s->v[i].down_name,
                                     (int)(strlen(s->v[i].down_name) - 9), s->v[i].down_name);
    return PERMITD_OK;
}

/* ------------------------------------------------------------------ */
/* the run: settings, connections, lock, history                      */

struct hist {
    unsigned long long version;
    char *title, *checksum, *state, *direction, *applied_at, *applied_by;
    char *execution_ms, *statements, *failed_statement, *failed_line, *error;  /* NULL = SQL NULL */
};

struct run {
    const struct config_mysql *db;
    int timeout_ms;
    int lock_timeout_s;
    char url[1400];               /* masked, for messages */
    char lock_name[65];
    char os_user[128];
    MYSQL *ctl;                   /* control connection: lock + history */
    int locked;
    struct migration_set set;
    struct hist *hist;
    size_t nhist;
    int have_table;
};

static void hist_free(struct run *r)
{
    for (size_t i = 0; i < r->nhist; i++) {
        struct hist *h = &r->hist[i];
        free(h->title); free(h->checksum); free(h->state); free(h->direction);
        free(h->applied_at); free(h->applied_by); free(h->execution_ms); free(h->statements);
        free(h->failed_statement); free(h->failed_line); free(h->error);
    }
    free(r->hist);
    r->hist = NULL;
    r->nhist = 0;
}

static struct hist *hist_find(struct run *r, unsigned long long v)
{
    for (size_t i = 0; i < r->nhist; i++)
        if (r->hist[i].version == v)
            return &r->hist[i];
    return NULL;
}

/* "ERROR 1064 (42000): You have an error ...", the stock client's format. */
static void server_error(MYSQL *conn, char *buf, size_t len)
{
    snprintf(buf, len, "ERROR %u (%s): %s", mysql_errno(conn), mysql_sqlstate(conn),
             mysql_error(conn));
}

/* Opens a connection to r->db. read_timeout_s 0 means no read timeout (for
 * migration statements: an ALTER may run for hours, and giving up on the
 * client side would not stop it on the server). */
static MYSQL *db_connect(struct run *r, unsigned int read_timeout_s, unsigned long flags)
{
    MYSQL *conn = mysql_init(NULL);
    my_bool reconnect = 0;
    unsigned int timeout_s = (unsigned int)((r->timeout_ms + 999) / 1000);
    unsigned int protocol = r->db->socket[0] ? MYSQL_PROTOCOL_SOCKET : MYSQL_PROTOCOL_TCP;
    unsigned int local_infile = 0;
    char msg[600];

    if (conn == NULL) {
        fprintf(stderr, "permitd migrate: out of memory\n");
        return NULL;
    }
    mysql_options(conn, MYSQL_OPT_RECONNECT, &reconnect);
    mysql_options(conn, MYSQL_OPT_CONNECT_TIMEOUT, &timeout_s);
    mysql_options(conn, MYSQL_OPT_WRITE_TIMEOUT, &timeout_s);
    if (read_timeout_s > 0)
        mysql_options(conn, MYSQL_OPT_READ_TIMEOUT, &read_timeout_s);
    mysql_options(conn, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    mysql_options(conn, MYSQL_OPT_PROTOCOL, &protocol);
    mysql_options(conn, MYSQL_OPT_LOCAL_INFILE, &local_infile);
    if (mysql_real_connect(conn, r->db->socket[0] ? "localhost" : r->db->host, r->db->user,
                           r->db->password, r->db->database, (unsigned int)r->db->port,
                           r->db->socket[0] ? r->db->socket : NULL, flags) == NULL) {
        server_error(conn, msg, sizeof(msg));
        fprintf(stderr, "permitd migrate: cannot connect to %s: %s\n", r->url, msg);
        mysql_close(conn);
        return NULL;
    }
    /* Times in the history are UTC; the connection speaks utf8mb4 with the
     * collation the schema uses. The server must not close it for being
     * idle while a long migration runs on the other one (wait_timeout):
     * the control connection holds the run's lock and writes its result. */
    if (mysql_query(conn, "SET time_zone = '+00:00'") != 0 ||
        mysql_query(conn, "SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci") != 0 ||
        mysql_query(conn, "SET SESSION wait_timeout = 31536000") != 0) {
        server_error(conn, msg, sizeof(msg));
        fprintf(stderr, "permitd migrate: setting up the session on %s: %s\n", r->url, msg);
        mysql_close(conn);
        return NULL;
    }
    return conn;
}

/* Runs a statement on the control connection that returns no rows. */
static int ctl_exec(struct run *r, const char *sql, const char *what)
{
    char msg[600];

    if (mysql_query(r->ctl, sql) != 0) {
        server_error(r->ctl, msg, sizeof(msg));
        fprintf(stderr, "permitd migrate: %s: %s\n", what, msg);
        return -1;
    }
    return 0;
}

/* Runs a query returning one value; *out is a new string (NULL for SQL NULL).
 * Returns 0, or -1 after printing the error. */
static int ctl_value(struct run *r, const char *sql, char **out, const char *what)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    char msg[600];

    *out = NULL;
    if (mysql_query(r->ctl, sql) != 0 || (res = mysql_store_result(r->ctl)) == NULL) {
        server_error(r->ctl, msg, sizeof(msg));
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
static void lock_name(struct run *r)
{
    char hex[65];

    if (strlen(LOCK_PREFIX ":") + strlen(r->db->database) <= 64) {
        /* Checked above: it fits; the precision only tells the compiler. */
        snprintf(r->lock_name, sizeof(r->lock_name), LOCK_PREFIX ":%.48s", r->db->database);
    } else {
        migrate_sha256_hex(r->db->database, strlen(r->db->database), hex);
        snprintf(r->lock_name, sizeof(r->lock_name), LOCK_PREFIX ":%.*s",
                 (int)(64 - strlen(LOCK_PREFIX ":")), hex);
    }
}

/* Takes the migration lock, waiting up to r->lock_timeout_s for another run
 * to finish. Returns 0 or -1 (printed). */
static int lock_take(struct run *r)
{
    struct sbuf q = {0};
    char *v = NULL, *holder = NULL;
    int rc = -1;

    sb_printf(&q, "SELECT GET_LOCK(");
    sb_quote(&q, r->ctl, r->lock_name, strlen(r->lock_name));
    sb_printf(&q, ", 0)");
    if (!sb_ok(&q) || ctl_value(r, q.p, &v, "taking the migration lock") != 0)
        goto out;
    if (v == NULL || strcmp(v, "1") != 0) {
        free(v);
        v = NULL;
        q.len = 0;
        sb_printf(&q, "SELECT IS_USED_LOCK(");
        sb_quote(&q, r->ctl, r->lock_name, strlen(r->lock_name));
        sb_printf(&q, ")");
        if (!sb_ok(&q) || ctl_value(r, q.p, &holder, "looking up the migration lock") != 0)
            goto out;
        printf("waiting up to %d s for the migration lock \"%s\", held by connection %s "
               "(another permitd migrate is running)...\n",
               r->lock_timeout_s, r->lock_name, holder ? holder : "?");
        fflush(stdout);
        q.len = 0;
        sb_printf(&q, "SELECT GET_LOCK(");
        sb_quote(&q, r->ctl, r->lock_name, strlen(r->lock_name));
        sb_printf(&q, ", %d)", r->lock_timeout_s);
        if (!sb_ok(&q) || ctl_value(r, q.p, &v, "waiting for the migration lock") != 0)
            goto out;
        if (v == NULL || strcmp(v, "1") != 0) {
            fprintf(stderr, "permitd migrate: gave up after %d s waiting for the migration lock "
                    "\"%s\" (held by connection %s); try again when the other run has finished "
                    "or raise --lock-timeout\n", r->lock_timeout_s, r->lock_name,
                    holder ? holder : "?");
            goto out;
        }
        printf("got the migration lock\n");
    }
    r->locked = 1;
    rc = 0;
out:
    free(v);
    free(holder);
    sb_free(&q);
    return rc;
}

static void lock_release(struct run *r)
{
    struct sbuf q = {0};
    MYSQL_RES *res;

    if (!r->locked)
        return;
    sb_printf(&q, "SELECT RELEASE_LOCK(");
    sb_quote(&q, r->ctl, r->lock_name, strlen(r->lock_name));
    sb_printf(&q, ")");
    /* Closing the connection releases it too; this only makes it prompt. */
    if (sb_ok(&q) && mysql_query(r->ctl, q.p) == 0 && (res = mysql_store_result(r->ctl)) != NULL)
        mysql_free_result(res);
    r->locked = 0;
    sb_free(&q);
}

static int table_create(struct run *r)
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

    if (ctl_exec(r, ddl, "creating " HISTORY_TABLE) != 0)
        return -1;
    r->have_table = 1;
    return 0;
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* Reads the history into r->hist. A missing table is an empty history
 * (r->have_table = 0). Returns 0 or -1 (printed). */
static int hist_load(struct run *r)
{
    MYSQL_RES *res;
    MYSQL_ROW row;
    char msg[600];

    hist_free(r);
    if (mysql_query(r->ctl,
                    "SELECT version, title, checksum, state, direction, "
                    "DATE_FORMAT(applied_at, '%Y-%m-%d %H:%i:%s.%f'), applied_by, execution_ms, "
                    "statements, failed_statement, failed_line, error "
                    "FROM " HISTORY_TABLE " ORDER BY version") != 0) {
        if (mysql_errno(r->ctl) == 1146) {        /* ER_NO_SUCH_TABLE */
            r->have_table = 0;
            return 0;
        }
        server_error(r->ctl, msg, sizeof(msg));
        fprintf(stderr, "permitd migrate: reading " HISTORY_TABLE ": %s\n", msg);
        return -1;
    }
    r->have_table = 1;
    if ((res = mysql_store_result(r->ctl)) == NULL) {
        server_error(r->ctl, msg, sizeof(msg));
        fprintf(stderr, "permitd migrate: reading " HISTORY_TABLE ": %s\n", msg);
        return -1;
    }
    r->hist = calloc(mysql_num_rows(res) + 1, sizeof(*r->hist));
    if (r->hist == NULL) {
        mysql_free_result(res);
        fprintf(stderr, "permitd migrate: out of memory\n");
        return -1;
    }
    while ((row = mysql_fetch_row(res)) != NULL) {
        struct hist *h = &r->hist[r->nhist++];
        h->version = strtoull(row[0], NULL, 10);
        h->title = dup_or_null(row[1]);
        h->checksum = dup_or_null(row[2]);
        h->state = dup_or_null(row[3]);
        h->direction = dup_or_null(row[4]);
        h->applied_at = dup_or_null(row[5]);
        if (h->applied_at != NULL && strlen(h->applied_at) > 23)
            h->applied_at[23] = '\0';            /* milliseconds are enough */
        h->applied_by = dup_or_null(row[6]);
        h->execution_ms = dup_or_null(row[7]);
        h->statements = dup_or_null(row[8]);
        h->failed_statement = dup_or_null(row[9]);
        h->failed_line = dup_or_null(row[10]);
        h->error = dup_or_null(row[11]);
    }
    mysql_free_result(res);
    return 0;
}

/* Appends "CONCAT(CURRENT_USER(), ' (os user NAME)')" for applied_by. */
static void sb_applied_by(struct sbuf *q, struct run *r)
{
    char who[200];

    snprintf(who, sizeof(who), " (os user %s)", r->os_user);
    sb_printf(q, "CONCAT(CURRENT_USER(), ");
    sb_quote(q, r->ctl, who, strlen(who));
    sb_printf(q, ")");
}

/* Version numbers print as the files name them, at least 4 digits. */
#define VFMT "%04llu"

/* Tells the DBA how to get out of a dirty version v (prev: the version
 * applied before it). */
static void print_hint(unsigned long long v, unsigned long long prev)
{
    fprintf(stderr, "permitd migrate: repair the schema by hand, then run `permitd migrate force "
            VFMT "` if version " VFMT " is now fully applied, or `permitd migrate force " VFMT
            "` if its changes are undone, and run `permitd migrate up` again\n", v, v, prev);
}

/* The version applied before v (0 when none), from the history. */
static unsigned long long prev_version(struct run *r, unsigned long long v)
{
    unsigned long long p = 0;

    for (size_t i = 0; i < r->nhist; i++)
        if (r->hist[i].version < v && r->hist[i].version > p)
            p = r->hist[i].version;
    return p;
}

/* Describes a dirty history row on stderr. */
static void print_dirty(struct run *r, const struct hist *h)
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
    print_hint(h->version, prev_version(r, h->version));
}

/* The checks up, down and validate share. Prints every problem found;
 * returns how many there were. */
static int check_state(struct run *r)
{
    int problems = 0;
    unsigned long long top = 0;

    for (size_t i = 0; i < r->nhist; i++) {
        struct hist *h = &r->hist[i];
        struct migration *m = find_version(&r->set, h->version);
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
        struct migration *m = &r->set.v[i];
        if (m->version < top && hist_find(r, m->version) == NULL) {
            fprintf(stderr, "permitd migrate: %s is pending but the later version " VFMT
                    " is already applied: give it a version above " VFMT "\n",
                    m->up_name, top, top);
            problems++;
        }
    }
    return problems;
}

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
static int exec_statement(MYSQL *conn, const struct migrate_statement *st, char *msg, size_t len)
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
    server_error(conn, msg, len);
    return -1;
}

/* Prints the first STATEMENT_SHOWN bytes of a statement, indented. */
static void print_statement(FILE *f, const struct migrate_statement *st)
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

/* Applies (up) or reverts (!up) one migration: marks it dirty, runs the
 * file on a fresh work connection, then marks it applied (up) or deletes
 * its row (down); on failure records the statement and message. Returns 0
 * or -1 (printed). */
static int run_one(struct run *r, struct migration *m, int up)
{
    const char *file = up ? m->up_name : m->down_name;
    const char *text = up ? m->up : m->down;
    size_t text_len = up ? m->up_len : m->down_len;
    struct migrate_script script = {NULL, 0};
    struct permitd_error err = {0, ""};
    struct sbuf q = {0};
    MYSQL *work = NULL;
    char msg[2048] = "";
    size_t failed = 0, warnings = 0;
    int64_t t0;
    long long ms;
    int rc = -1;

    if (migrate_split(text, text_len, &script, &err) != PERMITD_OK) {
        fprintf(stderr, "permitd migrate: %s: %s\n", file, err.message);
        return -1;
    }
    printf("%s " VFMT " %s: %zu statement%s ...\n", up ? "applying" : "reverting", m->version,
           m->title, script.n, script.n == 1 ? "" : "s");
    fflush(stdout);

    /* Dirty first: whatever happens next, the history says so. */
    if (up) {
        sb_printf(&q, "INSERT INTO " HISTORY_TABLE " (version, title, checksum, state, direction, "
                  "applied_at, applied_by, statements) VALUES (%llu, ", m->version);
        sb_quote(&q, r->ctl, m->title, strlen(m->title));
        sb_printf(&q, ", '%s', 'dirty', 'up', UTC_TIMESTAMP(6), ", m->checksum);
        sb_applied_by(&q, r);
        sb_printf(&q, ", %zu)", script.n);
    } else {
        sb_printf(&q, "UPDATE " HISTORY_TABLE " SET state = 'dirty', direction = 'down', "
                  "applied_at = UTC_TIMESTAMP(6), execution_ms = NULL, failed_statement = NULL, "
                  "failed_line = NULL, error = NULL, statements = %zu, applied_by = ", script.n);
        sb_applied_by(&q, r);
        sb_printf(&q, " WHERE version = %llu", m->version);
    }
    if (!sb_ok(&q) || ctl_exec(r, q.p, "recording the start in " HISTORY_TABLE) != 0)
        goto out;

    t0 = now_ms();
    work = db_connect(r, 0, CLIENT_MULTI_RESULTS);
    if (work == NULL) {
        snprintf(msg, sizeof(msg), "could not connect to run the file");
    } else {
        for (size_t i = 0; i < script.n; i++) {
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
    ms = (long long)(now_ms() - t0);

    q.len = 0;
    if (work != NULL && failed == 0) {
        if (up)
            sb_printf(&q, "UPDATE " HISTORY_TABLE " SET state = 'applied', execution_ms = %lld "
                      "WHERE version = %llu", ms, m->version);
        else
            sb_printf(&q, "DELETE FROM " HISTORY_TABLE " WHERE version = %llu", m->version);
        if (!sb_ok(&q) || ctl_exec(r, q.p, "recording the result in " HISTORY_TABLE) != 0) {
            fprintf(stderr, "permitd migrate: %s ran completely but " HISTORY_TABLE
                    " still marks version " VFMT " dirty: check the schema, then run "
                    "`permitd migrate force VERSION`\n", file, m->version);
            goto out;
        }
        printf("%s " VFMT " %s: ok, %zu statement%s in %lld ms%s\n",
               up ? "applied" : "reverted", m->version, m->title, script.n,
               script.n == 1 ? "" : "s", ms, warnings ? " (with warnings, above)" : "");
        rc = 0;
        goto out;
    }

    /* Failed: record which statement and why, and say so. */
    sb_printf(&q, "UPDATE " HISTORY_TABLE " SET execution_ms = %lld, failed_statement = ", ms);
    if (failed)
        sb_printf(&q, "%zu, failed_line = %d", failed, script.v[failed - 1].line);
    else
        sb_printf(&q, "NULL, failed_line = NULL");
    sb_printf(&q, ", error = ");
    sb_quote(&q, r->ctl, msg, strlen(msg));
    sb_printf(&q, " WHERE version = %llu", m->version);
    if (failed)
        fprintf(stderr, "permitd migrate: %s%s%s: statement %zu of %zu (line %d) failed: %s\n",
                r->set.dir ? r->set.dir : "", r->set.dir ? "/" : "", file, failed, script.n,
                script.v[failed - 1].line, msg);
    else
        fprintf(stderr, "permitd migrate: %s: %s\n", file, msg);
    if (failed)
        print_statement(stderr, &script.v[failed - 1]);
    if (!sb_ok(&q) || ctl_exec(r, q.p, "recording the failure in " HISTORY_TABLE) != 0)
        fprintf(stderr, "permitd migrate: (the failure could not be recorded; "
                HISTORY_TABLE " still marks version " VFMT " dirty)\n", m->version);
    fprintf(stderr, "permitd migrate: version " VFMT " (%s) is now marked dirty in "
            HISTORY_TABLE "; up and down refuse to run until it is repaired\n",
            m->version, m->title);
    print_hint(m->version, prev_version(r, m->version));

out:
    if (work != NULL)
        mysql_close(work);
    migrate_script_free(&script);
    sb_free(&q);
    return rc;
}

/* ------------------------------------------------------------------ */
/* the verbs                                                          */

static int all_parse(struct run *r, int down)
{
    struct permitd_error err = {0, ""};
    struct migrate_script s;
    int problems = 0;

    for (size_t i = 0; i < r->set.n; i++) {
        struct migration *m = &r->set.v[i];
        const char *file = down ? m->down_name : m->up_name;
        if (file == NULL)
            continue;
        if (migrate_split(down ? m->down : m->up, down ? m->down_len : m->up_len, &s, &err)
            != PERMITD_OK) {
            fprintf(stderr, "permitd migrate: %s: %s\n", file, err.message);
            problems++;
        }
        migrate_script_free(&s);
    }
    return problems;
}

static unsigned long long current_version(struct run *r)
{
    unsigned long long top = 0;

    for (size_t i = 0; i < r->nhist; i++)
        if (r->hist[i].version > top)
            top = r->hist[i].version;
    return top;
}

static int verb_up(struct run *r, long limit)
{
    size_t done = 0, pending = 0;
    int64_t t0 = now_ms();

    if (all_parse(r, 0) != 0)
        return MIGRATE_EXIT_FAILURE;
    if (lock_take(r) != 0 || table_create(r) != 0 || hist_load(r) != 0)
        return MIGRATE_EXIT_FAILURE;
    if (check_state(r) != 0) {
        fprintf(stderr, "permitd migrate: refusing to apply anything until the problems above "
                "are fixed\n");
        return MIGRATE_EXIT_FAILURE;
    }
    for (size_t i = 0; i < r->set.n; i++)
        if (hist_find(r, r->set.v[i].version) == NULL)
            pending++;
    if (pending == 0) {
        printf("nothing to do: version " VFMT " is applied and nothing is pending\n",
               current_version(r));
        return MIGRATE_EXIT_OK;
    }
    for (size_t i = 0; i < r->set.n && (limit < 0 || (long)done < limit); i++) {
        struct migration *m = &r->set.v[i];
        if (hist_find(r, m->version) != NULL)
            continue;
        if (run_one(r, m, 1) != 0) {
            fprintf(stderr, "permitd migrate: up failed after applying %zu migration%s\n",
                    done, done == 1 ? "" : "s");
            return MIGRATE_EXIT_FAILURE;
        }
        done++;
        if (hist_load(r) != 0)
            return MIGRATE_EXIT_FAILURE;
    }
    printf("up: applied %zu migration%s in %lld ms; now at version " VFMT ", %zu pending\n",
           done, done == 1 ? "" : "s", (long long)(now_ms() - t0), current_version(r),
           pending - done);
    return MIGRATE_EXIT_OK;
}

static int verb_down(struct run *r, long count)
{
    size_t done = 0;
    int64_t t0 = now_ms();

    if (all_parse(r, 1) != 0)
        return MIGRATE_EXIT_FAILURE;
    if (lock_take(r) != 0 || hist_load(r) != 0)
        return MIGRATE_EXIT_FAILURE;
    if (check_state(r) != 0) {
        fprintf(stderr, "permitd migrate: refusing to revert anything until the problems above "
                "are fixed\n");
        return MIGRATE_EXIT_FAILURE;
    }
    if (r->nhist == 0) {
        printf("nothing to do: no migration is applied\n");
        return MIGRATE_EXIT_OK;
    }
    if (count > (long)r->nhist) {
        printf("only %zu migration%s applied: reverting %s\n", r->nhist,
               r->nhist == 1 ? " is" : "s are", r->nhist == 1 ? "it" : "all of them");
        count = (long)r->nhist;
    }
    /* Every down file needed must be there before the first one runs. */
    for (long i = 0; i < (count < 0 ? (long)r->nhist : count); i++) {
        struct migration *m = find_version(&r->set, r->hist[r->nhist - 1 - (size_t)i].version);
        if (m->down == NULL) {
            fprintf(stderr, "permitd migrate: %s has no down file (%.*s.down.sql): cannot "
                    "revert version " VFMT "\n", m->up_name, (int)(strlen(m->up_name) - 7),
                    m->up_name, m->version);
            return MIGRATE_EXIT_FAILURE;
        }
    }
    while (r->nhist > 0 && (count < 0 || (long)done < count)) {
        struct migration *m = find_version(&r->set, r->hist[r->nhist - 1].version);
        if (run_one(r, m, 0) != 0) {
            fprintf(stderr, "permitd migrate: down failed after reverting %zu migration%s\n",
                    done, done == 1 ? "" : "s");
            return MIGRATE_EXIT_FAILURE;
        }
        done++;
        if (hist_load(r) != 0)
            return MIGRATE_EXIT_FAILURE;
    }
    printf("down: reverted %zu migration%s in %lld ms; now at version " VFMT "\n", done,
           done == 1 ? "" : "s", (long long)(now_ms() - t0), current_version(r));
    return MIGRATE_EXIT_OK;
}

static int verb_status(struct run *r)
{
    size_t applied = 0, pending = 0, dirty = 0, ghosts = 0;
    struct sbuf q = {0};
    char *holder = NULL;

    /* Who holds the lock, first: a dirty row without an error is then a
     * migration still running, not an interrupted one. */
    sb_printf(&q, "SELECT IS_USED_LOCK(");
    sb_quote(&q, r->ctl, r->lock_name, strlen(r->lock_name));
    sb_printf(&q, ")");
    if (!sb_ok(&q) || ctl_value(r, q.p, &holder, "looking up the migration lock") != 0 ||
        hist_load(r) != 0) {
        free(holder);
        sb_free(&q);
        return MIGRATE_EXIT_FAILURE;
    }
    printf("%-8s %-8s %-23s %9s  %-40s %s\n", "VERSION", "STATE", "APPLIED_AT (UTC)", "MS",
           "APPLIED_BY", "TITLE");
    /* Files and history rows, merged in version order. */
    for (size_t i = 0, j = 0; i < r->set.n || j < r->nhist;) {
        struct migration *m = i < r->set.n ? &r->set.v[i] : NULL;
        struct hist *h = j < r->nhist ? &r->hist[j] : NULL;
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
               r->lock_name);
    printf("version " VFMT ": %zu applied, %zu pending, %zu dirty%s (migrations: %s, %zu files)\n",
           current_version(r), applied, pending, dirty,
           ghosts ? ", some applied versions have no file" : "", r->set.source, r->set.n);
    if (dirty > 0)
        printf("a dirty version blocks up and down: see `permitd migrate --help` (force)\n");
    free(holder);
    sb_free(&q);
    return MIGRATE_EXIT_OK;
}

static int verb_validate(struct run *r)
{
    int problems = all_parse(r, 0) + all_parse(r, 1);
    size_t pending = 0;

    if (hist_load(r) != 0)
        return MIGRATE_EXIT_FAILURE;
    problems += check_state(r);
    for (size_t i = 0; i < r->set.n; i++) {
        if (hist_find(r, r->set.v[i].version) == NULL)
            pending++;
        if (r->set.v[i].down == NULL)
            printf("note: %s has no down file; `down` cannot revert it\n", r->set.v[i].up_name);
    }
    if (problems > 0) {
        fprintf(stderr, "validate: %d problem%s found\n", problems, problems == 1 ? "" : "s");
        return MIGRATE_EXIT_FAILURE;
    }
    printf("validate: ok: %zu migration%s (%s), %zu applied and unchanged, %zu pending\n",
           r->set.n, r->set.n == 1 ? "" : "s", r->set.source, r->nhist, pending);
    return MIGRATE_EXIT_OK;
}

/* force V: records that exactly the versions up to V are applied, as the
 * current files describe them, and that nothing is dirty. Runs no SQL from
 * the files: the DBA has made the schema match by hand. */
static int verb_force(struct run *r, unsigned long long v)
{
    struct sbuf q = {0};
    int rc = MIGRATE_EXIT_FAILURE, changed = 0;

    if (v != 0 && find_version(&r->set, v) == NULL) {
        fprintf(stderr, "permitd migrate: force: there is no migration " VFMT " in %s "
                "(use 0 for \"nothing applied\")\n", v, r->set.source);
        return MIGRATE_EXIT_FAILURE;
    }
    if (lock_take(r) != 0 || table_create(r) != 0 || hist_load(r) != 0)
        return MIGRATE_EXIT_FAILURE;
    for (size_t i = 0; i < r->nhist; i++) {
        struct hist *h = &r->hist[i];
        struct migration *m = find_version(&r->set, h->version);
        q.len = 0;
        if (h->version > v) {
            sb_printf(&q, "DELETE FROM " HISTORY_TABLE " WHERE version = %llu", h->version);
            printf("force: " VFMT " %s: removed from the history (%s before)\n", h->version,
                   h->title, h->state);
        } else if (m == NULL) {
            continue;    /* applied without a file here: left as it is */
        } else if (strcmp(h->state, "dirty") == 0 || strcmp(h->checksum, m->checksum) != 0) {
            sb_printf(&q, "UPDATE " HISTORY_TABLE " SET state = 'applied', direction = 'up', "
                      "checksum = '%s', failed_statement = NULL, failed_line = NULL, "
                      "error = NULL, execution_ms = NULL, applied_at = UTC_TIMESTAMP(6), "
                      "applied_by = ", m->checksum);
            sb_applied_by(&q, r);
            sb_printf(&q, " WHERE version = %llu", h->version);
            printf("force: " VFMT " %s: marked applied%s\n", h->version, h->title,
                   strcmp(h->state, "dirty") == 0 ? " (was dirty)"
                                                  : " with the checksum of the current file");
        } else {
            continue;
        }
        if (!sb_ok(&q) || ctl_exec(r, q.p, "force") != 0)
            goto out;
        changed++;
    }
    for (size_t i = 0; i < r->set.n; i++) {
        struct migration *m = &r->set.v[i];
        if (m->version > v || hist_find(r, m->version) != NULL)
            continue;
        q.len = 0;
        sb_printf(&q, "INSERT INTO " HISTORY_TABLE " (version, title, checksum, state, direction, "
                  "applied_at, applied_by) VALUES (%llu, ", m->version);
        sb_quote(&q, r->ctl, m->title, strlen(m->title));
        sb_printf(&q, ", '%s', 'applied', 'up', UTC_TIMESTAMP(6), ", m->checksum);
        sb_applied_by(&q, r);
        sb_printf(&q, ")");
        if (!sb_ok(&q) || ctl_exec(r, q.p, "force") != 0)
            goto out;
        printf("force: " VFMT " %s: marked applied (not run)\n", m->version, m->title);
        changed++;
    }
    printf("force: now at version " VFMT "%s\n", v, changed ? "" : " (nothing changed)");
    rc = MIGRATE_EXIT_OK;
out:
    sb_free(&q);
    return rc;
}

/* new TITLE: creates the next NNNN_title.up.sql / .down.sql pair in dir. */
static int verb_new(const char *dir, int argc, char **argv)
{
    struct migration_set set;
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
    if (set_load(&set, dir, &err) != PERMITD_OK) {
        fprintf(stderr, "permitd migrate: %s\n", err.message);
        set_free(&set);
        return MIGRATE_EXIT_FAILURE;
    }
    next = set.n ? set.v[set.n - 1].version + 1 : 1;
    set_free(&set);
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
"How a run stays safe: it holds GET_LOCK('" LOCK_PREFIX ":<database>') for its\n"
"whole length, so a second run waits and then finds the work done. Each file\n"
"runs statement by statement on a fresh connection (split like the mysql\n"
"client does, DELIMITER lines included). The table " HISTORY_TABLE "\n"
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

int migrate_main(const struct config *cfg, int argc, char **argv)
{
    struct run r;
    struct config_mysql url_db;
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
    r.db = &cfg->mysql;
    r.timeout_ms = cfg->mysql_timeout_ms > 0 ? cfg->mysql_timeout_ms : 5000;
    r.lock_timeout_s = DEFAULT_LOCK_TIMEOUT_S;

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
                r.db = &url_db;
            } else {
                long t;
                if (parse_count(val, &t) != 0 || t > 86400) {
                    fprintf(stderr, "permitd migrate: --lock-timeout must be whole seconds "
                            "from 1 to 86400, not \"%s\"\n", val);
                    return MIGRATE_EXIT_USAGE;
                }
                r.lock_timeout_s = (int)t;
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

    if (r.db == &cfg->mysql && cfg->mysql_url[0] == '\0') {
        fprintf(stderr, "permitd migrate: no database: set PERMITD_MYSQL_URL (or pass "
                "--mysql-url) to mysql://user:pass@host:port/db\n");
        return MIGRATE_EXIT_USAGE;
    }
    config_mysql_url_masked(r.db, r.url, sizeof(r.url));
    lock_name(&r);
    os_user(r.os_user, sizeof(r.os_user));

    if (set_load(&r.set, dir, &err) != PERMITD_OK) {
        fprintf(stderr, "permitd migrate: %s\n", err.message);
        goto out;
    }
    printf("database %s, migrations: %s (%zu)\n", r.url, r.set.source, r.set.n);
    fflush(stdout);
    /* The lock wait may be long; the other queries here are short. */
    r.ctl = db_connect(&r, (unsigned int)(r.lock_timeout_s + (r.timeout_ms + 999) / 1000), 0);
    if (r.ctl == NULL)
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
    if (r.ctl != NULL) {
        lock_release(&r);
        mysql_close(r.ctl);
    }
    hist_free(&r);
    set_free(&r.set);
    mysql_library_end();
    fflush(stdout);
    return status;
}
