/*
 * status.c - the status codes' names and filling a struct permitd_error.
 *
 * The names are the Connect/gRPC code names, the one vocabulary every
 * layer speaks: the Connect error body, a batch item's error, the metrics'
 * result label. They live with the enum, not in the Connect codec, so a
 * module that names a code needs no transport.
 */
#include <stdio.h>

#include "core/status.h"

/* Indexed by -code. */
static const char *const names[PERMITD_STATUS_COUNT] = {
    "ok",
    "canceled",
    "unknown",
    "invalid_argument",
    "deadline_exceeded",
    "not_found",
    "already_exists",
    "permission_denied",
    "resource_exhausted",
    "failed_precondition",
    "aborted",
    "out_of_range",
    "unimplemented",
    "internal",
    "unavailable",
    "data_loss",
    "unauthenticated",
};

const char *permitd_status_name(int code)
{
    return code <= 0 && -code < PERMITD_STATUS_COUNT ? names[-code] : "unknown";
}

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
