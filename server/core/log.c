/*
 * log.c - logfmt lines on stderr.
 *
 * Each line is built in a stack buffer and written with one write(2), so
 * lines from different threads never interleave.
 *
 * Values a client or an editor chose are quoted by log_q() (one escaping
 * for every caller); the pairs are then swept once more (sweep()): a
 * control byte or malformed UTF-8 that reached them unquoted is escaped
 * there, so a line is always one line.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/utf8.h"

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

static const char hex[] = "0123456789abcdef";

char *log_quote(const char *s, char *out, size_t cap)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t n = 0;

    out[n++] = '"';
    while (*p != '\0') {
        char esc[4];
        size_t len = 0, take = 1;
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            len = 2;
        } else if (*p == '\n' || *p == '\r' || *p == '\t') {
            esc[0] = '\\';
            esc[1] = *p == '\n' ? 'n' : *p == '\r' ? 'r' : 't';
            len = 2;
        } else if (*p < 0x20 || *p == 0x7f || (*p >= 0x80 && utf8_char_len(p) == 0)) {
            esc[0] = '\\';
            esc[1] = 'x';
            esc[2] = hex[*p >> 4];
            esc[3] = hex[*p & 15];
            len = 4;
        } else if (*p >= 0x80) {
            take = utf8_char_len(p);
        }
        /* room for this, then `..."` and the NUL */
        if (n + (len ? len : take) + 5 > cap) {
            memcpy(out + n, "...", 3);
            n += 3;
            break;
        }
        memcpy(out + n, len ? esc : (const char *)p, len ? len : take);
        n += len ? len : take;
        p += take;
    }
    out[n++] = '"';
    out[n] = '\0';
    return out;
}

/* s as a bare logfmt word: bytes outside [A-Za-z0-9._-] as '?'; at most
 * room bytes, not terminated. Returns how many were written. */
static size_t bare_word(char *dst, size_t room, const char *s)
{
    size_t i = 0;

    for (; s != NULL && s[i] && i < room; i++) {
        char c = s[i];
        dst[i] = ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-') ? c : '?';
    }
    return i;
}

void log_who(char *dst, const char *app, const char *key)
{
    size_t n;

    memcpy(dst, " app=", 5);
    n = 5 + bare_word(dst + 5, 128, app);
    if (key != NULL && key[0] != '\0') {
        memcpy(dst + n, " key=", 5);
        n += 5;
        n += bare_word(dst + n, LOG_WHO_MAX - n - 1, key);
    }
    dst[n] = '\0';
}

const char *log_q(const char *s)
{
    /* This thread's own: a ring, so several values fit one log_msg(). */
    static __thread char ring[LOG_Q_SLOTS][LOG_Q_MAX];
    static __thread unsigned next;

    return log_quote(s, ring[next++ % LOG_Q_SLOTS], LOG_Q_MAX);
}

/* Escapes, within line[from..*n) (cap bytes in all), every control byte
 * and byte of malformed UTF-8 as \xNN, cutting what no longer fits: the
 * line stays one line whatever a caller passed. */
static void sweep(char *line, size_t from, size_t *n, size_t cap)
{
    char tmp[2048];
    size_t m = 0, i = from;

    line[*n] = '\0';
    while (i < *n && m + 5 < sizeof(tmp)) {
        unsigned char c = (unsigned char)line[i];
        size_t k = c >= 0x80 ? utf8_char_len((const unsigned char *)line + i) : 1;
        if (c < 0x20 || c == 0x7f || k == 0) {
            tmp[m++] = '\\';
            tmp[m++] = 'x';
            tmp[m++] = hex[c >> 4];
            tmp[m++] = hex[c & 15];
            i++;
            continue;
        }
        if (m + k + 1 >= sizeof(tmp))
            break;
        memcpy(tmp + m, line + i, k);
        m += k;
        i += k;
    }
    if (from + m > cap - 2)
        m = cap - 2 - from;
    memcpy(line + from, tmp, m);
    *n = from + m;
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
        if (w > 0) {
            size_t from = n;
            n += (size_t)w < sizeof(line) - n ? (size_t)w : sizeof(line) - n - 1;
            sweep(line, from, &n, sizeof(line));
        }
    }
    line[n++] = '\n';
    if (write(STDERR_FILENO, line, n) < 0) {
        /* Nowhere left to report it. */
    }
}
