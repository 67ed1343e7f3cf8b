/*
 * policy.c - policy name rules and the Redis key layout (see policy.h).
 */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stores/policy.h"

static int name_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
}

/* Prints at most 64 bytes of value, escaping what would garble a message. */
static void quote(char *out, size_t outlen, const char *value)
{
    size_t o = 0;

    for (size_t i = 0; value[i] != '\0' && o + 6 < outlen; i++) {
        unsigned char c = (unsigned char)value[i];
        if (i == 64) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (c < 0x20 || c == 0x7f || c == '"' || c == '\\')
            o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", c);
        else
            out[o++] = (char)c;
    }
    out[o] = '\0';
}

int policy_check_name(const char *field, const char *value, struct permitd_error *err)
{
    size_t len = strlen(value);
    char q[300];

    if (len == 0)
        return permitd_error_set(err, PERMITD_EINVAL, "%s: is required", field);
    if (len > POLICY_NAME_MAX) {
        quote(q, sizeof(q), value);
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "%s: \"%s\" is %zu characters long, the limit is %d",
                                 field, q, len, POLICY_NAME_MAX);
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)value[i];
        if (!name_char(c) || (i == 0 && (c == '.' || c == '_' || c == '-'))) {
            quote(q, sizeof(q), value);
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "%s: \"%s\" is not a valid name: use letters, digits, "
                                     "'.', '_' and '-', starting with a letter or digit",
                                     field, q);
        }
    }
    return PERMITD_OK;
}

int policy_check_key(const char *field, const char *value, struct permitd_error *err)
{
    size_t len = strlen(value);
    char q[300];

    if (len > POLICY_KEY_MAX) {
        quote(q, sizeof(q), value);
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "%s: \"%s\" is %zu bytes long, the limit is %d",
                                 field, q, len, POLICY_KEY_MAX);
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)value[i];
        if (c < 0x20 || c == 0x7f) {
            quote(q, sizeof(q), value);
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "%s: \"%s\" holds a control character", field, q);
        }
    }
    return PERMITD_OK;
}

/* Appends s to the key being built in buf (*n bytes so far), as much as
 * fits before the terminating NUL. */
static void key_put(char *buf, size_t *n, const char *s)
{
    size_t len = strlen(s), room = POLICY_REDIS_KEY_MAX - 1 - *n;

    if (len > room)
        len = room;
    memcpy(buf + *n, s, len);
    *n += len;
}

/* Built piece by piece rather than with snprintf: every decision names a
 * key. */
size_t policy_redis_key(char *buf, const char *prefix, const char *name,
                        enum policy_key_kind kind, const char *key)
{
    size_t n = 0;

    key_put(buf, &n, prefix);
    key_put(buf, &n, "{");
    key_put(buf, &n, name);
    if (kind == POLICY_KEY_HASH) {
        key_put(buf, &n, "}:policy");
    } else if (key == NULL || key[0] == '\0') {
        key_put(buf, &n, "}:b");
    } else if (kind == POLICY_KEY_BUCKET_COLOCATED) {
        key_put(buf, &n, "}:k:");
        key_put(buf, &n, key);
    } else {
        key_put(buf, &n, ":");
        key_put(buf, &n, key);
        key_put(buf, &n, "}:k");
    }
    buf[n] = '\0';
    return n;
}

static const char *const algorithm_names[POLICY_ALGORITHMS] = {
    "token_bucket", "fixed_window", "sliding_window", "sliding_log", "concurrency",
};

const char *policy_algorithm_name(enum policy_algorithm a)
{
    return (unsigned)a < POLICY_ALGORITHMS ? algorithm_names[a] : "?";
}

int policy_algorithm_parse(const char *field, const char *s, enum policy_algorithm *out,
                           struct permitd_error *err)
{
    char q[300];

    if (s[0] == '\0') {
        *out = POLICY_TOKEN_BUCKET;
        return PERMITD_OK;
    }
    for (int a = 0; a < POLICY_ALGORITHMS; a++) {
        if (strcmp(s, algorithm_names[a]) == 0) {
            *out = (enum policy_algorithm)a;
            return PERMITD_OK;
        }
    }
    quote(q, sizeof(q), s);
    return permitd_error_set(err, PERMITD_EINVAL,
                             "%s \"%s\" is no algorithm: token_bucket, fixed_window, "
                             "sliding_window, sliding_log or concurrency", field, q);
}

static const char *const calendar_names[] = {"", "minute", "hour", "day", "month"};

const char *policy_calendar_name(enum policy_calendar c)
{
    return (unsigned)c <= POLICY_CALENDAR_MONTH ? calendar_names[c] : "?";
}

int policy_calendar_parse(const char *s, enum policy_calendar *out)
{
    for (int c = POLICY_CALENDAR_MINUTE; c <= POLICY_CALENDAR_MONTH; c++) {
        if (strcmp(s, calendar_names[c]) == 0) {
            *out = (enum policy_calendar)c;
            return PERMITD_OK;
        }
    }
    return PERMITD_ENOTFOUND;
}

/* Duration units, largest first (policy_format_duration() picks the first
 * that divides). */
static const struct {
    const char *name;
    int64_t ms;
} units[] = {
    {"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}, {"ms", 1},
};

int policy_parse_duration(const char *field, const char *s, int64_t *ms,
                          struct permitd_error *err)
{
    char q[300];
    int64_t v = 0;
    size_t i = 0;

    for (; s[i] >= '0' && s[i] <= '9' && i < 13; i++)
        v = v * 10 + (s[i] - '0');
    if (i > 0 && i < 13) {
        for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
            if (strcmp(s + i, units[u].name) != 0)
                continue;
            if (v < 1 || v > POLICY_DURATION_MAX_MS / units[u].ms)
                break;
            *ms = v * units[u].ms;
            return PERMITD_OK;
        }
    }
    quote(q, sizeof(q), s);
    return permitd_error_set(err, PERMITD_EINVAL,
                             "%s \"%s\" is no duration: a whole number and a unit "
                             "(ms, s, m, h or d), from 1ms to 400d, e.g. \"1s\", \"90s\", \"1h\"",
                             field, q);
}

void policy_format_duration(char *buf, int64_t ms)
{
    size_t u = 0;

    while (u + 1 < sizeof(units) / sizeof(units[0]) && ms % units[u].ms != 0)
        u++;
    snprintf(buf, POLICY_DURATION_TEXT, "%lld%s", (long long)(ms / units[u].ms), units[u].name);
}

size_t policy_bucket_key(char *buf, const char *prefix, const char *name,
                         enum policy_algorithm a, int colocate, const char *key)
{
    static const char letters[POLICY_ALGORITHMS] = {'k', 'f', 's', 'l', 'c'};
    char t[3] = {':', letters[(unsigned)a < POLICY_ALGORITHMS ? a : 0], '\0'};
    size_t n = 0;

    if (a == POLICY_TOKEN_BUCKET)
        return policy_redis_key(buf, prefix, name,
                                colocate ? POLICY_KEY_BUCKET_COLOCATED : POLICY_KEY_BUCKET, key);
    key_put(buf, &n, prefix);
    key_put(buf, &n, "{");
    key_put(buf, &n, name);
    if (key == NULL || key[0] == '\0') {
        key_put(buf, &n, "}");
        key_put(buf, &n, t);
    } else if (colocate) {
        key_put(buf, &n, "}");
        key_put(buf, &n, t);
        key_put(buf, &n, ":");
        key_put(buf, &n, key);
    } else {
        key_put(buf, &n, ":");
        key_put(buf, &n, key);
        key_put(buf, &n, "}");
        key_put(buf, &n, t);
    }
    buf[n] = '\0';
    return n;
}

/* Appends s to the pattern in out (*n bytes so far), escaping SCAN's glob
 * characters. */
static void glob_put(char *out, size_t *n, const char *s)
{
    for (; *s && *n + 3 < POLICY_PATTERN_MAX; s++) {
        if (strchr("*?[]\\", *s) != NULL)
            out[(*n)++] = '\\';
        out[(*n)++] = *s;
    }
    out[*n] = '\0';
}

void policy_bucket_patterns(char out[2][POLICY_PATTERN_MAX], const char *prefix,
                            const char *name)
{
    size_t n = 0;

    glob_put(out[0], &n, prefix);
    glob_put(out[0], &n, "{");
    glob_put(out[0], &n, name);
    memcpy(out[1], out[0], n + 1);
    memcpy(out[0] + n, "}:k:*", 6);
    memcpy(out[1] + n, ":*}:k", 6);
}

void policy_prefix_pattern(char out[POLICY_PATTERN_MAX], const char *prefix, const char *glob)
{
    size_t n = 0, len = strlen(glob);

    glob_put(out, &n, prefix);
    if (n + len < POLICY_PATTERN_MAX)
        memcpy(out + n, glob, len + 1);
}

/* Whether len bytes at s end with the NUL-terminated suffix. */
static int ends_with(const char *s, size_t len, const char *suffix)
{
    size_t k = strlen(suffix);

    return len >= k && memcmp(s + len - k, suffix, k) == 0;
}

int policy_is_bucket_key(const char *prefix, const char *key, size_t len)
{
    size_t plen = strlen(prefix);

    if (len <= plen + 1 || memcmp(key, prefix, plen) != 0 || key[plen] != '{')
        return 0;
    for (size_t i = plen; i < len; i++)
        if ((unsigned char)key[i] < 0x20 || key[i] == 0x7f)
            return 0;           /* a request-id record: bucket key, 0x1f, ... */
    if (ends_with(key, len, "}:b") || ends_with(key, len, "}:k"))
        return 1;
    for (size_t i = plen + 1; i + 4 <= len; i++)
        if (memcmp(key + i, "}:k:", 4) == 0)
            return 1;
    return 0;
}

int policy_check_rate(const char *field, const char *value, struct permitd_error *err)
{
    const char *p = value;
    size_t whole = 0, frac = 0;
    int nonzero = 0, dot = 0;
    char q[300];

    for (; *p; p++) {
        if (*p == '.' && !dot) {
            dot = 1;
        } else if (*p >= '0' && *p <= '9') {
            if (dot)
                frac++;
            else
                whole++;
            nonzero |= *p != '0';
        } else {
            break;
        }
    }
    quote(q, sizeof(q), value);
    if (*p != '\0' || (whole == 0 && frac == 0))
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "%s: \"%s\" is not a decimal number of permits per second "
                                 "(e.g. 50, 0.5, 0.016666666667)", field, q);
    if (frac > 12)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "%s: \"%s\" has more than 12 decimal places", field, q);
    if (!nonzero)
        return permitd_error_set(err, PERMITD_EINVAL, "%s: must be more than 0", field);
    if (strtod(value, NULL) > 1e9)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "%s: \"%s\" is more than 1000000000 permits per second", field, q);
    return PERMITD_OK;
}

/* Counts UTF-8 characters; -1 when s is not well-formed UTF-8 (RFC 3629:
 * no overlong forms, no surrogates, nothing above U+10FFFF). */
static long utf8_chars(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    long n = 0;

    while (*p) {
        unsigned c = *p, lo = 0x80, hi = 0xbf;
        int len;

        if (c < 0x80)
            len = 1;
        else if (c >= 0xc2 && c <= 0xdf)
            len = 2;
        else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            if (c == 0xe0)
                lo = 0xa0;          /* overlong */
            else if (c == 0xed)
                hi = 0x9f;          /* surrogates */
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            if (c == 0xf0)
                lo = 0x90;          /* overlong */
            else if (c == 0xf4)
                hi = 0x8f;          /* above U+10FFFF */
        } else {
            return -1;
        }
        for (int i = 1; i < len; i++) {
            unsigned b = p[i];
            if (i == 1 ? (b < lo || b > hi) : (b & 0xc0) != 0x80)
                return -1;
        }
        p += len;
        n++;
    }
    return n;
}

int policy_check_fields(const char *name, const char *const *apps, size_t napps,
                        const char *description, const char *failure_mode,
                        struct permitd_error *err)
{
    long chars;
    int rc;

    if ((rc = policy_check_name("name", name, err)) != PERMITD_OK)
        return rc;
    if (napps == 0)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "apps: at least one app is needed (\"*\" lets any app in)");
    for (size_t i = 0; i < napps; i++)
        if (strcmp(apps[i], "*") != 0 &&
            (rc = policy_check_name("apps", apps[i], err)) != PERMITD_OK)
            return rc;
    chars = utf8_chars(description);
    if (chars < 0)
        return permitd_error_set(err, PERMITD_EINVAL, "description: is not valid UTF-8 text");
    if (chars > POLICY_DESCRIPTION_MAX)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "description: %ld characters, the limit is %d", chars,
                                 POLICY_DESCRIPTION_MAX);
    if (strcmp(failure_mode, "open") != 0 && strcmp(failure_mode, "closed") != 0)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "failure_mode: \"%.32s\" is not \"open\" or \"closed\"",
                                 failure_mode);
    return PERMITD_OK;
}

/* CRC16 (XMODEM) & 16383 of len bytes: the Redis Cluster slot of a hash tag. */
static unsigned slot_of(const unsigned char *p, size_t len)
{
    unsigned crc = 0;

    for (size_t k = 0; k < len; k++) {
        crc ^= (unsigned)p[k] << 8;
        for (int i = 0; i < 8; i++)
            crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
        crc &= 0xffff;
    }
    return crc & 16383;
}

unsigned policy_slot(const char *name)
{
    return slot_of((const unsigned char *)name, strlen(name));
}

static char index_tags[POLICY_SLOTS][POLICY_INDEX_TAG_LEN + 1];
static pthread_once_t index_tags_once = PTHREAD_ONCE_INIT;

/* Fills index_tags: for each slot the first 3-character tag, in the order
 * lua/bucket.lua's INDEX_TAGS was made in, that hashes to it (every slot
 * has one: 238,328 tags over 16,384 slots). */
static void index_tags_make(void)
{
    static const char alphabet[] = "0123456789abcdefghijklmnopqrstuvwxyz"
                                   "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    const size_t na = sizeof(alphabet) - 1;

    for (size_t a = 0; a < na; a++)
        for (size_t b = 0; b < na; b++)
            for (size_t c = 0; c < na; c++) {
                unsigned char t[3] = {(unsigned char)alphabet[a], (unsigned char)alphabet[b],
                                      (unsigned char)alphabet[c]};
                unsigned s = slot_of(t, 3);
                if (index_tags[s][0] == '\0')
                    memcpy(index_tags[s], t, 3);
            }
}

const char *policy_index_tag(unsigned slot)
{
    pthread_once(&index_tags_once, index_tags_make);
    return index_tags[slot % POLICY_SLOTS];
}

size_t policy_index_key(char *buf, const char *prefix, const char *name, unsigned slot)
{
    int n = snprintf(buf, POLICY_REDIS_KEY_MAX, "%s{%s}ix:%s", prefix, policy_index_tag(slot),
                     name);

    return n < 0 ? 0 : (size_t)n;
}

size_t policy_index_group_key(char *buf, const char *prefix, const char *name, unsigned slot,
                              enum policy_index_form form)
{
    unsigned first = slot % POLICY_SLOTS / POLICY_INDEX_GROUP * POLICY_INDEX_GROUP;
    int n = snprintf(buf, POLICY_REDIS_KEY_MAX, "%s{%s}i%c:%s", prefix, policy_index_tag(first),
                     (char)form, name);

    return n < 0 ? 0 : (size_t)n;
}

int policy_index_split_unread(unsigned long long from, unsigned long long blobs,
                              unsigned long long len)
{
    for (unsigned long long l = blobs > 1 ? blobs : 1; l < len; l++) {
        unsigned long long top = 1;

        while (top * 2 <= l)
            top *= 2;
        if (l - top >= from && l - top < blobs)
            return 1;
    }
    return 0;
}

int policy_index_key_kind(const char *prefix, const char *key)
{
    size_t plen = strlen(prefix), i;
    const char *t = key + plen + 1, *name = t + POLICY_INDEX_TAG_LEN + 4;
    char kind;

    if (strncmp(key, prefix, plen) != 0 || key[plen] != '{' ||
        strnlen(t, POLICY_INDEX_TAG_LEN + 4) < POLICY_INDEX_TAG_LEN + 4)
        return 0;
    for (i = 0; i < POLICY_INDEX_TAG_LEN; i++)
        if (!isalnum((unsigned char)t[i]))
            return 0;
    kind = t[i + 2];
    if (memcmp(t + i, "}i", 2) != 0 || t[i + 3] != ':' || strchr("xlg", kind) == NULL ||
        kind == '\0')
        return 0;
    for (i = 0; name[i] != '\0' && name_char((unsigned char)name[i]); i++)
        ;
    if (i == 0)
        return 0;
    if (name[i] == ':' && kind == 'g' && name[i + 1] != '\0')    /* a hash of before: :<i> */
        for (i++; isdigit((unsigned char)name[i]); i++)
            ;
    return name[i] == '\0' ? kind : 0;
}

size_t policy_index_entry_key(char *buf, const char *prefix, const char *name,
                              const char *entry, size_t len)
{
    int n;

    if (len == 0)
        return 0;
    if (entry[0] == '\2')
        n = len == 1 ? snprintf(buf, POLICY_REDIS_KEY_MAX, "%s{%s}:b", prefix, name) : -1;
    else if (entry[0] == '\1')
        n = snprintf(buf, POLICY_REDIS_KEY_MAX, "%s{%s}:k:%.*s", prefix, name, (int)len - 1,
                     entry + 1);
    else
        n = snprintf(buf, POLICY_REDIS_KEY_MAX, "%s{%s:%.*s}:k", prefix, name, (int)len, entry);
    return n < 0 || n >= POLICY_REDIS_KEY_MAX ? 0 : (size_t)n;
}

/* What each algorithm's limits are called, for the messages below. */
static const char *const limits_said[POLICY_ALGORITHMS] = {
    "it refills at `rate` permits a second",
    "it allows max_permits per window",
    "it allows max_permits per sliding window",
    "it allows max_permits in every interval of `window`",
    "it allows max_permits held at once, each for lease_ttl",
};

int policy_check_limits(const char *algorithm, long long max_permits, const char *rate,
                        const char *window, const char *lease_ttl, struct policy_limits *out,
                        struct permitd_error *err)
{
    /* Set: GCC's -O2 -Wmaybe-uninitialized (the Release build) does not see
     * that policy_algorithm_parse() stores it whenever it returns OK. */
    enum policy_algorithm a = POLICY_TOKEN_BUCKET;
    const char *an;
    char q[300];
    int rc;

    memset(out, 0, sizeof(*out));
    out->rate = "";
    if ((rc = policy_algorithm_parse("algorithm:", algorithm, &a, err)) != PERMITD_OK)
        return rc;
    out->algorithm = a;
    an = algorithm_names[a];
    if (max_permits < 1)
        return permitd_error_set(err, PERMITD_EINVAL, "max_permits: %lld is less than 1",
                                 max_permits);
    if (max_permits > POLICY_MAX_PERMITS_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "max_permits: %lld is more than %lld",
                                 max_permits, POLICY_MAX_PERMITS_MAX);
    if (a == POLICY_SLIDING_LOG && max_permits > POLICY_LOG_MAX_PERMITS)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "max_permits: %lld is more than %d, the most a sliding_log "
                                 "policy allows (its log keeps one entry per permit in Redis); "
                                 "use sliding_window for larger limits",
                                 max_permits, POLICY_LOG_MAX_PERMITS);
    out->max_permits = max_permits;

    if (a == POLICY_TOKEN_BUCKET) {
        if (rate[0] == '\0')
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "rate: is required for a token_bucket policy (permits "
                                     "added per second, e.g. 50 or 0.5)");
        if ((rc = policy_check_rate("rate", rate, err)) != PERMITD_OK)
            return rc;
        out->rate = rate;
    } else if (rate[0] != '\0') {
        quote(q, sizeof(q), rate);
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "rate: a %s policy takes no rate (\"%s\"): %s; leave rate "
                                 "empty", an, q, limits_said[a]);
    }

    if (a == POLICY_TOKEN_BUCKET || a == POLICY_CONCURRENCY) {
        if (window[0] != '\0') {
            quote(q, sizeof(q), window);
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "window: a %s policy takes no window (\"%s\"): %s; leave "
                                     "window empty", an, q, limits_said[a]);
        }
    } else if (window[0] == '\0') {
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "window: is required for a %s policy: a duration such as "
                                 "\"1s\", \"1m\", \"1h\" or \"1d\"%s", an,
                                 a == POLICY_FIXED_WINDOW
                                     ? ", or a calendar unit in UTC: minute, hour, day or month"
                                     : "");
    } else if (policy_calendar_parse(window, &out->calendar) == PERMITD_OK) {
        if (a != POLICY_FIXED_WINDOW) {
            out->calendar = POLICY_CALENDAR_NONE;
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "window: \"%s\" is a calendar unit, which only a "
                                     "fixed_window policy takes; give a %s policy a duration "
                                     "such as \"1h\" or \"1d\"", window, an);
        }
    } else if ((rc = policy_parse_duration("window:", window, &out->window_ms, err)) !=
               PERMITD_OK) {
        return rc;
    }

    if (a != POLICY_CONCURRENCY) {
        if (lease_ttl[0] != '\0') {
            quote(q, sizeof(q), lease_ttl);
            return permitd_error_set(err, PERMITD_EINVAL,
                                     "lease_ttl: only a concurrency policy takes a lease_ttl, "
                                     "not a %s one (\"%s\"); leave lease_ttl empty", an, q);
        }
    } else if (lease_ttl[0] == '\0') {
        out->lease_ms = POLICY_LEASE_DEFAULT_MS;
    } else if ((rc = policy_parse_duration("lease_ttl:", lease_ttl, &out->lease_ms, err)) !=
               PERMITD_OK) {
        return rc;
    }
    return PERMITD_OK;
}

void policy_format_window(char *buf, int64_t window_ms, enum policy_calendar calendar)
{
    if (calendar != POLICY_CALENDAR_NONE)
        snprintf(buf, POLICY_DURATION_TEXT, "%s", policy_calendar_name(calendar));
    else if (window_ms > 0)
        policy_format_duration(buf, window_ms);
    else
        buf[0] = '\0';
}
