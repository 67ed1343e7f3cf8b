/*
 * overridecsv.c - a policy's overrides read from and written to CSV (see
 * overridecsv.h).
 *
 * A file is read whole before anything is written: its rows are checked
 * one by one as csv_read() hands them over (overridecheck_row(), whose
 * error names the field, so the column is found by the field's name), then
 * no two rows may share a match (the second is refused with both lines),
 * then override_edits_import() writes them in one transaction.
 */
#define _GNU_SOURCE                     /* qsort_r */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/overridecheck.h"
#include "control/overridecsv.h"
#include "core/clock.h"
#include "core/csv.h"
#include "core/utf8.h"

/* The columns, in the order an export writes them. */
enum col { C_KIND, C_VALUE, C_ACTION, C_MAX, C_RATE, C_WINDOW, C_EXPIRES, C_DESCRIPTION, C_N };
static const char *const col_names[C_N] = {
    "match_kind", "match_value", "action", "max_permits", "rate", "window", "expires_at",
    "description",
};

struct upload {
    char id[OVERRIDECSV_ID_LEN + 1];            /* "" = free */
    char user[POLICY_NAME_MAX + 1];
    char policy[POLICY_NAME_MAX + 1];
    char *data;
    size_t len;
    int64_t touched_us;
};

struct overridecsv {
    struct override_edits_db *db;
    pthread_mutex_t *lock;                      /* the caller's, around db */
    pthread_mutex_t uploads_lock;
    struct upload uploads[OVERRIDECSV_UPLOADS];
};

int overridecsv_new(struct override_edits_db *db, pthread_mutex_t *lock,
                    struct overridecsv **out, struct permitd_error *err)
{
    struct overridecsv *c = calloc(1, sizeof(*c));

    *out = NULL;
    if (c == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    c->db = db;
    c->lock = lock;
    pthread_mutex_init(&c->uploads_lock, NULL);
    *out = c;
    return PERMITD_OK;
}

void overridecsv_free(struct overridecsv *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < OVERRIDECSV_UPLOADS; i++)
        free(c->uploads[i].data);
    pthread_mutex_destroy(&c->uploads_lock);
    free(c);
}

/* An import being read: the header's columns, then the rows. */
struct import {
    const char *policy;
    enum policy_algorithm alg;
    int col[C_N];                               /* the file's column of each; -1 absent */
    size_t ncols;
    struct override_row *rows;
    size_t *lines;                              /* each row's first line */
    size_t n, cap;
    int header_read;
};

static int import_header(struct import *im, size_t line, char **f, size_t n,
                         struct permitd_error *err)
{
    for (size_t c = 0; c < C_N; c++)
        im->col[c] = -1;
    for (size_t i = 0; i < n; i++) {
        size_t c = 0;
        while (c < C_N && strcmp(f[i], col_names[c]) != 0)
            c++;
        if (c == C_N)
            return permitd_error_set(err, PERMITD_EINVAL, "line %zu, column %zu: \"%.40s\" is "
                                     "not a column (the header names some of match_kind, "
                                     "match_value, action, max_permits, rate, window, "
                                     "expires_at, description)", line, i + 1, f[i]);
        if (im->col[c] >= 0)
            return permitd_error_set(err, PERMITD_EINVAL, "line %zu, column %zu: \"%s\" is "
                                     "named twice", line, i + 1, f[i]);
        im->col[c] = (int)i;
    }
    if (im->col[C_KIND] < 0 || im->col[C_VALUE] < 0)
        return permitd_error_set(err, PERMITD_EINVAL, "line %zu: the header must name "
                                 "match_kind and match_value (the first line is the header, as "
                                 "ExportOverridesCsv writes it)", line);
    im->ncols = n;
    im->header_read = 1;
    return PERMITD_OK;
}

/* The field of column c in f, or "" when the file has no such column. */
static const char *cell(const struct import *im, char **f, enum col c)
{
    return im->col[c] >= 0 ? f[im->col[c]] : "";
}

static int import_record(void *ud, size_t line, char **f, size_t n, struct permitd_error *err)
{
    struct import *im = ud;
    struct overridecheck_given g;
    struct permitd_error why = {0, ""};
    const char *max = NULL;
    char *end;
    int rc = PERMITD_OK;

    if (!im->header_read)
        return import_header(im, line, f, n, err);
    if (n != im->ncols)
        return permitd_error_set(err, PERMITD_EINVAL, "line %zu: %zu columns, the header has "
                                 "%zu", line, n, im->ncols);
    if (im->n == OVERRIDES_PER_POLICY_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "line %zu: more than %d rows, the most "
                                 "one policy may have", line, OVERRIDES_PER_POLICY_MAX);
    for (size_t i = 0; i < n; i++)
        if (utf8_check_string("x", f[i], &why) != PERMITD_OK)
            return permitd_error_set(err, PERMITD_EINVAL, "line %zu, column %zu: not valid "
                                     "UTF-8", line, i + 1);
    if (im->n == im->cap) {
        size_t cap = im->cap ? im->cap * 2 : 64;
        struct override_row *rows = realloc(im->rows, cap * sizeof(*rows));
        size_t *lines = rows ? realloc(im->lines, cap * sizeof(*lines)) : NULL;
        if (rows != NULL)
            im->rows = rows;
        if (lines != NULL)
            im->lines = lines;
        if (rows == NULL || lines == NULL)
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        im->cap = cap;
    }
    g = (struct overridecheck_given){im->policy, cell(im, f, C_KIND), cell(im, f, C_VALUE),
                                     cell(im, f, C_ACTION), cell(im, f, C_RATE),
                                     cell(im, f, C_WINDOW), cell(im, f, C_EXPIRES),
                                     cell(im, f, C_DESCRIPTION), 0};
    max = cell(im, f, C_MAX);
    if (max[0] != '\0') {
        g.max_permits = strtoll(max, &end, 10);
        if (!isdigit((unsigned char)max[0]) || *end != '\0')
            rc = permitd_error_set(&why, PERMITD_EINVAL, "max_permits: \"%.40s\" is not a "
                                   "whole number", max);
    }
    if (rc == PERMITD_OK)
        rc = overridecheck_row(&g, im->alg, &im->rows[im->n], &why);
    if (rc != PERMITD_OK) {
        /* why starts with the field's name: the column it came from. */
        size_t c = 0, flen = strcspn(why.message, ": ");
        const char *rest = why.message[flen] == ':' ? why.message + flen + 1 : why.message;
        while (*rest == ' ')
            rest++;
        while (c < C_N && !(strlen(col_names[c]) == flen &&
                            strncmp(why.message, col_names[c], flen) == 0))
            c++;
        if (c < C_N && im->col[c] >= 0)
            return permitd_error_set(err, rc, "line %zu, column %d (%s): %s", line,
                                     im->col[c] + 1, col_names[c], rest);
        return permitd_error_set(err, rc, "line %zu: %s", line, why.message);
    }
    im->lines[im->n++] = line;
    return PERMITD_OK;
}

static int line_cmp(const void *a, const void *b, void *ud)
{
    const struct import *im = ud;
    const struct override_row *x = &im->rows[*(const size_t *)a];
    const struct override_row *y = &im->rows[*(const size_t *)b];
    int c = strcmp(x->kind, y->kind);

    if (c == 0)
        c = strcmp(x->value, y->value);
    return c != 0 ? c : *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

/* Two rows of one match would leave the result up to their order: the
 * second is refused, naming both lines. */
static int import_unique(struct import *im, struct permitd_error *err)
{
    size_t *order = malloc((im->n + 1) * sizeof(*order));
    int rc = PERMITD_OK;

    if (order == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    for (size_t i = 0; i < im->n; i++)
        order[i] = i;
    qsort_r(order, im->n, sizeof(*order), line_cmp, im);
    for (size_t i = 1; i < im->n && rc == PERMITD_OK; i++) {
        const struct override_row *a = &im->rows[order[i - 1]], *b = &im->rows[order[i]];
        if (strcmp(a->kind, b->kind) == 0 && strcmp(a->value, b->value) == 0)
            rc = permitd_error_set(err, PERMITD_EINVAL, "line %zu, column %d (match_value): "
                                   "%s \"%.256s\" is on line %zu already", im->lines[order[i]],
                                   im->col[C_VALUE] + 1, b->kind, b->value,
                                   im->lines[order[i - 1]]);
    }
    free(order);
    return rc;
}

/* Reads a whole CSV file of policy's overrides and writes them, all or
 * nothing, as user. */
static int apply(struct overridecsv *c, const char *policy, const char *data, size_t len,
                 int replace, const char *user, struct override_import_counts *counts,
                 struct permitd_error *err)
{
    struct import im;
    int rc;

    memset(&im, 0, sizeof(im));
    im.policy = policy;
    pthread_mutex_lock(c->lock);
    rc = override_edits_policy(c->db, "policy", policy, &im.alg, err);
    pthread_mutex_unlock(c->lock);
    if (rc == PERMITD_OK)
        rc = csv_read(data, len, C_N, import_record, &im, err);
    if (rc == PERMITD_OK && !im.header_read)
        rc = permitd_error_set(err, PERMITD_EINVAL, "line 1: the file is empty (its first line "
                               "is the header: match_kind,match_value,...)");
    if (rc == PERMITD_OK)
        rc = import_unique(&im, err);
    if (rc == PERMITD_OK) {
        pthread_mutex_lock(c->lock);
        rc = override_edits_import(c->db, policy, im.rows, im.n, replace, user, counts, err);
        pthread_mutex_unlock(c->lock);
    }
    free(im.rows);
    free(im.lines);
    return rc;
}

static void upload_drop(struct upload *u)
{
    free(u->data);
    memset(u, 0, sizeof(*u));
}

/* Appends piece to upload u: the file's bound is resource_exhausted (the
 * upload dropped). */
static int upload_append(struct upload *u, const void *piece, size_t len,
                         struct permitd_error *err)
{
    char *p;

    if (u->len + len > OVERRIDECSV_UPLOAD_MAX) {
        upload_drop(u);
        return permitd_error_set(err, PERMITD_EEXHAUSTED, "csv: the file is over %d bytes; "
                                 "split it", OVERRIDECSV_UPLOAD_MAX);
    }
    if ((p = realloc(u->data, u->len + len + 1)) == NULL) {
        upload_drop(u);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    u->data = p;
    if (len > 0)
        memcpy(u->data + u->len, piece, len);
    u->len += len;
    u->data[u->len] = '\0';
    u->touched_us = clock_now_us();
    return PERMITD_OK;
}

/* The upload a piece goes to, the piece appended: the first one starts
 * it. Under c->uploads_lock. */
static int upload_piece(struct overridecsv *c, const char *user, const char *policy,
                        const char *upload_id, const void *data, size_t len,
                        struct upload **out, struct permitd_error *err)
{
    int64_t now = clock_now_us();
    struct upload *u = NULL;
    int rc;

    *out = NULL;
    for (size_t i = 0; i < OVERRIDECSV_UPLOADS; i++)
        if (c->uploads[i].id[0] != '\0' &&
            now - c->uploads[i].touched_us > OVERRIDECSV_UPLOAD_TTL_S * 1000000LL)
            upload_drop(&c->uploads[i]);
    if (upload_id[0] == '\0') {
        for (size_t i = 0; u == NULL && i < OVERRIDECSV_UPLOADS; i++)
            if (c->uploads[i].id[0] == '\0')
                u = &c->uploads[i];
        if (u == NULL)
            return permitd_error_set(err, PERMITD_EEXHAUSTED, "upload_id: %d CSV uploads are "
                                     "under way; try again when one is done",
                                     OVERRIDECSV_UPLOADS);
        if ((rc = auth_new_token(u->id, err)) != PERMITD_OK)
            return rc;
        snprintf(u->user, sizeof(u->user), "%s", user);
        snprintf(u->policy, sizeof(u->policy), "%s", policy);
    } else {
        for (size_t i = 0; u == NULL && i < OVERRIDECSV_UPLOADS; i++)
            if (c->uploads[i].id[0] != '\0' && strcmp(c->uploads[i].id, upload_id) == 0 &&
                strcmp(c->uploads[i].user, user) == 0)
                u = &c->uploads[i];
        if (u == NULL)
            return permitd_error_set(err, PERMITD_ENOTFOUND, "upload_id: no upload of yours "
                                     "has that id (one left %d s without a piece is dropped): "
                                     "send the file again from its first piece",
                                     OVERRIDECSV_UPLOAD_TTL_S);
        if (strcmp(u->policy, policy) != 0)
            return permitd_error_set(err, PERMITD_EINVAL, "policy: the upload is of policy "
                                     "\"%s\"", u->policy);
    }
    if ((rc = upload_append(u, data, len, err)) != PERMITD_OK)
        return rc;
    *out = u;
    return PERMITD_OK;
}

int overridecsv_import(struct overridecsv *c, const char *user, const char *policy,
                       const void *data, size_t len, const char *upload_id, int last,
                       int replace, char *next_id, struct override_import_counts *counts,
                       struct permitd_error *err)
{
    struct upload *u = NULL;
    char *file = NULL;
    size_t flen = 0;
    int rc = PERMITD_OK;

    next_id[0] = '\0';
    memset(counts, 0, sizeof(*counts));
    if (upload_id[0] == '\0' && last) {
        /* A file sent whole (a NUL inside it is csv_read()'s to refuse). */
        if ((file = malloc(len + 1)) == NULL)
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        if (len > 0)
            memcpy(file, data, len);
        flen = len;
    } else {
        pthread_mutex_lock(&c->uploads_lock);
        rc = upload_piece(c, user, policy, upload_id, data, len, &u, err);
        if (rc == PERMITD_OK && !last)
            snprintf(next_id, OVERRIDECSV_ID_LEN + 1, "%s", u->id);
        if (rc == PERMITD_OK && last) {
            file = u->data;             /* taken: the slot is free again */
            flen = u->len;
            u->data = NULL;
            upload_drop(u);
        }
        pthread_mutex_unlock(&c->uploads_lock);
        if (rc != PERMITD_OK || !last)
            return rc;
    }
    rc = apply(c, policy, file, flen, replace, user, counts, err);
    free(file);
    return rc;
}

int overridecsv_export(struct overridecsv *c, const char *policy, char **out, int64_t *count,
                       struct permitd_error *err)
{
    struct override_query q = {.policy = policy, .limit = 1000};
    struct csv_out o = {0};
    int64_t total = 0;
    int rc = PERMITD_OK;

    *out = NULL;
    *count = 0;
    for (size_t i = 0; i < C_N; i++)
        csv_put(&o, col_names[i], i == C_N - 1);
    for (;;) {
        struct override_row *rows = NULL;
        size_t n = 0;
        pthread_mutex_lock(c->lock);
        rc = override_edits_list(c->db, &q, &rows, &n, &total, err);
        pthread_mutex_unlock(c->lock);
        if (rc != PERMITD_OK)
            break;
        for (size_t i = 0; i < n; i++) {
            const struct override_row *r = &rows[i];
            char max[32] = "", window[POLICY_DURATION_TEXT] = "";
            if (r->expired)
                continue;
            if (r->max_permits > 0)
                snprintf(max, sizeof(max), "%" PRId64, r->max_permits);
            if (r->window_ms > 0)
                policy_format_duration(window, r->window_ms);
            csv_put(&o, r->kind, 0);
            csv_put(&o, r->value, 0);
            csv_put(&o, r->action, 0);
            csv_put(&o, max, 0);
            csv_put(&o, r->rate, 0);
            csv_put(&o, window, 0);
            csv_put(&o, r->expires_at, 0);
            csv_put(&o, r->description, 1);
            (*count)++;
        }
        free(rows);
        if (n < q.limit)
            break;
        q.offset += n;
    }
    if (rc == PERMITD_OK && o.oom)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if (rc != PERMITD_OK) {
        free(o.s);
        *count = 0;
        return rc;
    }
    *out = o.s;
    return PERMITD_OK;
}
