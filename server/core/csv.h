/*
 * csv.h - CSV as RFC 4180 has it, read and written: fields separated by
 * commas, records by CRLF (LF and a lone CR read as well), a field in
 * double quotes when it holds a comma, a quote, CR or LF, a quote inside
 * one doubled. A file may start with a UTF-8 byte order mark (what a
 * spreadsheet saves), which is skipped. For the overrides' import and
 * export (control/overridesvc.c); nothing here knows their columns.
 */
#ifndef PERMITD_CSV_H
#define PERMITD_CSV_H

#include <stddef.h>

#include "core/status.h"

/* Called once per record, in order: fields[0..n) NUL-terminated, valid
 * until it returns; line is the line the record starts on (1-based;
 * a quoted field may hold line breaks, so a record may span several).
 * Anything but PERMITD_OK stops the reading and is returned. */
typedef int (*csv_record_fn)(void *ud, size_t line, char **fields, size_t n,
                             struct permitd_error *err);

/* Reads text[0..len) record by record into fn. An empty line is no
 * record. PERMITD_EINVAL naming the line and column (1-based, counted in
 * fields) for: a NUL byte, a quote that is never closed, text after a
 * closing quote, a quote inside an unquoted field, more than max_fields
 * fields. */
int csv_read(const char *text, size_t len, size_t max_fields, csv_record_fn fn, void *ud,
             struct permitd_error *err);

/* A text being written. */
struct csv_out {
    char *s;                        /* NUL-terminated; free() it */
    size_t len, cap;
    int oom;                        /* 1: memory ran out; s holds what fitted */
};

/* Appends field s (quoted when it must be), then a comma, or CRLF when
 * last is 1. */
void csv_put(struct csv_out *o, const char *s, int last);

#endif
