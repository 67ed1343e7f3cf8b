/*
 * status.c - filling a struct permitd_error.
 */
#include <stdio.h>

#include "core/status.h"

int permitd_error_set(struct permitd_error *err, int code, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL)
        return code;
    err->code = code;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    return code;
}
