/*
 * log.h - one line per event on stderr, in logfmt:
 *   ts=2026-11-21T16:20:01.123Z level=warn msg="redis unreachable" addr=...
 * The caller writes the key=value pairs after the message; log_* never
 * prints secrets on its own, and callers must not pass them.
 *
 * Any value a client or an editor chose (a path, a method, a user name, a
 * bucket key, an error message that may quote them) goes through log_q(),
 * which quotes and escapes it, so it cannot end the value and forge fields
 * (`x" by=root`) or lines. As a second guard, log_msg() escapes any
 * control character or byte of malformed UTF-8 left in the pairs, so no
 * value, quoted or not, can start a line of its own.
 */
#ifndef PERMITD_LOG_H
#define PERMITD_LOG_H

#include <stddef.h>

#include "core/status.h"

/* LOG_LEVEL_*, not LOG_*: <syslog.h> defines LOG_DEBUG, LOG_INFO, ... */
enum log_level { LOG_LEVEL_DEBUG, LOG_LEVEL_INFO, LOG_LEVEL_WARN, LOG_LEVEL_ERROR };

/* Sets the threshold once at start-up, before any thread starts. */
void log_set_level(enum log_level level);
/* Parses "debug", "info", "warn" or "error" (any case): PERMITD_OK and
 * *out, or PERMITD_EINVAL with err (may be NULL) naming the value. */
int log_level_parse(const char *s, enum log_level *out, struct permitd_error *err);

/* Room log_q() gives one value: longer ones are cut, ending in "...". */
#define LOG_Q_MAX 512
#define LOG_Q_SLOTS 8

/* s as a logfmt value: in double quotes, with `"` and `\` escaped by a
 * backslash, \n \r \t as such, other control characters and bytes that
 * are not well-formed UTF-8 as \xNN (NULL: ""). Returns a buffer of this
 * thread's own, one of LOG_Q_SLOTS used in turn: valid until this thread
 * has called log_q() LOG_Q_SLOTS more times, enough for every value of one
 * log_msg() call. */
const char *log_q(const char *s);

/* log_q() into out (cap bytes, at least 8), for callers that keep it;
 * returns out. */
char *log_quote(const char *s, char *out, size_t cap);

/* Room log_who() needs: " app=" + 128 + " key=" + the rest. */
#define LOG_WHO_MAX 176

/* " app=APP key=KEY" for an access log line, into dst (LOG_WHO_MAX
 * bytes): the app cut at 128 bytes, the key at what room is left, every
 * byte outside [A-Za-z0-9._-] written '?' (a name a caller chose, bare in
 * the line); no key (NULL or ""): no key field. */
void log_who(char *dst, const char *app, const char *key);

/* msg is a fixed text (quoted as is); fmt, when not NULL, adds key=value
 * pairs, e.g. log_msg(LOG_LEVEL_WARN, "redis unreachable", "addr=%s", addr). */
void log_msg(enum log_level level, const char *msg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
