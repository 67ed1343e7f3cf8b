/*
 * migrate_sql.c - the statement splitter of `permitd migrate`.
 *
 * A migration file is plain SQL that the stock mysql client must run too,
 * so it is split exactly as that client splits its input: a delimiter
 * (";", or what a DELIMITER line sets, for triggers and procedures) ends a
 * statement unless it sits inside a string, a quoted name or a comment;
 * slash-star-bang comments are code for the server and start a statement.
 * Each statement keeps the line it starts on, so a failure can name it.
 * Pure text in, pointers into that text out: no server needed, which is
 * why tests/unit/test_migrate_sql.c can test every case.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "stores/migrate_sql.h"

static int add_statement(struct migrate_sql_script *s, size_t *cap, const char *text,
                         size_t len, int line)
{
    while (len > 0 && isspace((unsigned char)text[len - 1]))
        len--;
    if (len == 0)
        return PERMITD_OK;
    if (s->n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        struct migrate_sql_statement *v = realloc(s->v, ncap * sizeof(*v));
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

int migrate_sql_split(const char *sql, size_t len, struct migrate_sql_script *out,
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
                    migrate_sql_free(out);
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
                migrate_sql_free(out);
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
                migrate_sql_free(out);
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
    migrate_sql_free(out);
    return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
}

void migrate_sql_free(struct migrate_sql_script *s)
{
    if (s == NULL)
        return;
    free(s->v);
    s->v = NULL;
    s->n = 0;
}
