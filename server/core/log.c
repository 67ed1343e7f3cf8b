/*
 * log.c - logfmt lines on stderr.
 *
 * Each line is built in a stack buffer and written with one write(2), so
 * lines from different threads never interleave.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"

/* Set once in main() before threads start; read-only afterwards. */
static enum log_level threshold = LOG_LEVEL_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void log_set_level(enum log_level level)
{
    threshold = level;
}

int log_level_parse(const char *s, enum log_level *out, struct permitd_error *err)
{
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(s, level_names[i]) == 0) {
            *out = (enum log_level)i;
            return PERMITD_OK;
        }
    }
    return permitd_error_set(err, PERMITD_EINVAL, "\"%s\" is not one of debug, info, warn, error",
                             s);
}

void log_msg(enum log_level level, const char *msg, const char *fmt, ...)
{
    char line[2048];
    struct timeval tv;
    struct tm tm;
    size_t n;
    int w;

    if (level < threshold)
        return;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    n = strftime(line, sizeof(line), "ts=%Y-%m-%dT%H:%M:%S", &tm);
    w = snprintf(line + n, sizeof(line) - n, ".%03dZ level=%s msg=\"%s\"",
                 (int)(tv.tv_usec / 1000), level_names[level], msg);
    if (w > 0)
        n += (size_t)w < sizeof(line) - n ? (size_t)w : sizeof(line) - n - 1;
    if (fmt != NULL && n < sizeof(line) - 2) {
        va_list ap;
        line[n++] = ' ';
        va_start(ap, fmt);
        w = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
        va_end(ap);
        if (w > 0)
            n += (size_t)w < sizeof(line) - n ? (size_t)w : sizeof(line) - n - 1;
    }
    line[n++] = '\n';
    if (write(STDERR_FILENO, line, n) < 0) {
        /* Nowhere left to report it. */
    }
}
