/*
 * csv.c - RFC 4180 CSV, read and written (see csv.h).
 *
 * The reader copies each record's fields, unquoted, into one buffer as
 * large as the text (a field never grows when its quotes go), so reading
 * allocates twice whatever the file holds, and a hostile file (a quote
 * never closed, a million commas) costs no more than a plain one of its
 * size.
 */
#include <stdlib.h>
#include <string.h>

#include "core/csv.h"

int csv_read(const char *text, size_t len, size_t max_fields, csv_record_fn fn, void *ud,
             struct permitd_error *err)
{
    char *buf = malloc(len + 1);
    char **fields = calloc(max_fields + 1, sizeof(*fields));
    size_t i = 0, line = 1;
    int rc = PERMITD_OK;

    if (buf == NULL || fields == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto out;
    }
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
        i = 3;
    while (i < len && rc == PERMITD_OK) {
        size_t start_line = line, n = 0, w = 0;
        int end = 0;
        if (text[i] == '\n' || text[i] == '\r') {      /* an empty line */
            i += text[i] == '\r' && i + 1 < len && text[i + 1] == '\n' ? 2 : 1;
            line++;
            continue;
        }
        while (!end) {
            if (n == max_fields) {
                rc = permitd_error_set(err, PERMITD_EINVAL, "line %zu, column %zu: more than "
                                       "the %zu columns there are", start_line, n + 1,
                                       max_fields);
                break;
            }
            fields[n++] = buf + w;
            if (i < len && text[i] == '"') {
                size_t qline = line;
                i++;
                for (;;) {
                    if (i >= len) {
                        rc = permitd_error_set(err, PERMITD_EINVAL, "line %zu, column %zu: "
                                               "the quote that opens the field is never "
                                               "closed", qline, n);
                        break;
                    }
                    if (text[i] == '"') {
                        if (i + 1 < len && text[i + 1] == '"') {
                            buf[w++] = '"';
                            i += 2;
                            continue;
                        }
                        i++;
                        break;
                    }
                    if (text[i] == '\0') {
                        rc = permitd_error_set(err, PERMITD_EINVAL, "line %zu, column %zu: a "
                                               "NUL byte", line, n);
                        break;
                    }
                    if (text[i] == '\n' || (text[i] == '\r' && !(i + 1 < len &&
                                                                 text[i + 1] == '\n')))
                        line++;
                    buf[w++] = text[i++];
                }
                if (rc != PERMITD_OK)
                    break;
                if (i < len && text[i] != ',' && text[i] != '\n' && text[i] != '\r') {
                    rc = permitd_error_set(err, PERMITD_EINVAL, "line %zu, column %zu: text "
                                           "after the closing quote (a quote inside a quoted "
                                           "field is written twice: \"\")", line, n);
                    break;
                }
            } else {
                while (i < len && text[i] != ',' && text[i] != '\n' && text[i] != '\r') {
                    if (text[i] == '"' || text[i] == '\0') {
                        rc = permitd_error_set(err, PERMITD_EINVAL, "line %zu, column %zu: %s "
                                               "in a field without quotes (quote the field, "
                                               "and write a quote in it twice)", line, n,
                                               text[i] ? "a quote" : "a NUL byte");
                        break;
                    }
                    buf[w++] = text[i++];
                }
                if (rc != PERMITD_OK)
                    break;
            }
            buf[w++] = '\0';
            if (i >= len) {
                end = 1;
            } else if (text[i] == ',') {
                i++;
            } else {
                i += text[i] == '\r' && i + 1 < len && text[i + 1] == '\n' ? 2 : 1;
                line++;
                end = 1;
            }
        }
        if (rc == PERMITD_OK)
            rc = fn(ud, start_line, fields, n, err);
    }
out:
    free(buf);
    free(fields);
    return rc;
}

static void put(struct csv_out *o, const char *s, size_t n)
{
    if (o->oom)
        return;
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        char *p;
        while (cap < o->len + n + 1)
            cap *= 2;
        if ((p = realloc(o->s, cap)) == NULL) {
            o->oom = 1;
            return;
        }
        o->s = p;
        o->cap = cap;
    }
    memcpy(o->s + o->len, s, n);
    o->len += n;
    o->s[o->len] = '\0';
}

void csv_put(struct csv_out *o, const char *s, int last)
{
    if (s[strcspn(s, ",\"\r\n")] == '\0') {
        put(o, s, strlen(s));
    } else {
        put(o, "\"", 1);
        for (const char *c = s; *c; c++) {
            if (*c == '"')
                put(o, "\"\"", 2);
            else
                put(o, c, 1);
        }
        put(o, "\"", 1);
    }
    put(o, last ? "\r\n" : ",", last ? 2 : 1);
}
