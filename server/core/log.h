/*
 * log.h - one line per event on stderr, in logfmt:
 *   ts=2026-11-21T16:20:01.123Z level=warn msg="redis unreachable" addr=...
 * The caller writes the key=value pairs after the message; log_* never
 * prints secrets on its own, and callers must not pass them.
 */
#ifndef PERMITD_LOG_H
#define PERMITD_LOG_H

#include "core/status.h"

/* LOG_LEVEL_*, not LOG_*: <syslog.h> defines LOG_DEBUG, LOG_INFO, ... */
enum log_level { LOG_LEVEL_DEBUG, LOG_LEVEL_INFO, LOG_LEVEL_WARN, LOG_LEVEL_ERROR };

/* Sets the threshold once at start-up, before any thread starts. */
void log_set_level(enum log_level level);
/* Parses "debug", "info", "warn" or "error" (any case): PERMITD_OK and
 * *out, or PERMITD_EINVAL with err (may be NULL) naming the value. */
int log_level_parse(const char *s, enum log_level *out, struct permitd_error *err);

/* msg is a fixed text (quoted as is); fmt, when not NULL, adds key=value
 * pairs, e.g. log_msg(LOG_LEVEL_WARN, "redis unreachable", "addr=%s", addr). */
void log_msg(enum log_level level, const char *msg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
