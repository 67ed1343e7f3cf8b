/*
 * status.h - the one status enum every permitd module returns.
 *
 * Functions return 0 (PERMITD_OK) on success and a negative PERMITD_E* on
 * failure. The codes are the Connect/gRPC codes negated, so a failure has
 * one wire name, kept here (permitd_status_name()), and the transport adds
 * only the HTTP status (connect_http_status()): no second vocabulary.
 * A denied Acquire is not an error: it is a result with allowed = false.
 */
#ifndef PERMITD_STATUS_H
#define PERMITD_STATUS_H

#include <stdarg.h>
#include <stddef.h>

enum permitd_status {
    PERMITD_OK = 0,
    PERMITD_ECANCELED = -1,          /* canceled            499 */
    PERMITD_EUNKNOWN = -2,           /* unknown             500 */
    PERMITD_EINVAL = -3,             /* invalid_argument    400 */
    PERMITD_EDEADLINE = -4,          /* deadline_exceeded   504 */
    PERMITD_ENOTFOUND = -5,          /* not_found           404 */
    PERMITD_EEXIST = -6,             /* already_exists      409 */
    PERMITD_EPERM = -7,              /* permission_denied   403 */
    PERMITD_EEXHAUSTED = -8,         /* resource_exhausted  429 */
    PERMITD_EPRECONDITION = -9,      /* failed_precondition 400 */
    PERMITD_EABORTED = -10,          /* aborted             409 */
    PERMITD_ERANGE = -11,            /* out_of_range        400 */
    PERMITD_EUNIMPLEMENTED = -12,    /* unimplemented       501 */
    PERMITD_EINTERNAL = -13,         /* internal            500 */
    PERMITD_EUNAVAILABLE = -14,      /* unavailable         503 */
    PERMITD_EDATALOSS = -15,         /* data_loss           500 */
    PERMITD_EUNAUTHENTICATED = -16,  /* unauthenticated     401 */
};

/* How many codes there are, PERMITD_OK included: -code indexes a table of
 * PERMITD_STATUS_COUNT entries for every code above. */
#define PERMITD_STATUS_COUNT 17

/* The Connect code name of code ("invalid_argument" for PERMITD_EINVAL,
 * "ok" for PERMITD_OK); "unknown" for a value that is no PERMITD_* code.
 * A static string. */
const char *permitd_status_name(int code);

/* A failure and the sentence that explains it to the caller. Lives in the
 * context that failed (one per request); the transport turns it into the
 * Connect error body in one place. */
struct permitd_error {
    int code;              /* PERMITD_E*, or PERMITD_OK */
    char message[512];
};

/* Sets err (when not NULL) and returns code, so callers can write
 * `return permitd_error_set(err, PERMITD_EINVAL, "bucket: ...")`. */
int permitd_error_set(struct permitd_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
