/*
 * overridecheck.c - one override as a client sends it, checked (see
 * overridecheck.h). The limits follow the policy's algorithm as
 * policy_check_limits() does for a policy, but the window may be left to
 * the policy's and a calendar unit is not one (an override's window is a
 * duration).
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "control/overridecheck.h"
#include "core/utf8.h"

int overridecheck_time(const char *s, int64_t *us, struct permitd_error *err)
{
    struct tm tm;
    int y, mo, d, h, mi, sec, n = 0, off = 0;
    int64_t frac = 0, scale = 1000000;
    const char *p;

    memset(&tm, 0, sizeof(tm));
    if (sscanf(s, "%4d-%2d-%2d%n", &y, &mo, &d, &n) != 3 || n != 10 ||
        (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
        sscanf(s + 11, "%2d:%2d:%2d%n", &h, &mi, &sec, &n) != 3 || n != 8)
        goto bad;
    p = s + 19;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p))
            goto bad;
        for (; isdigit((unsigned char)*p); p++)
            if (scale > 1) {
                scale /= 10;
                frac += (*p - '0') * scale;
            }
    }
    if ((*p == 'Z' || *p == 'z') && p[1] == '\0') {
        off = 0;
    } else if ((*p == '+' || *p == '-') && isdigit((unsigned char)p[1]) &&
               isdigit((unsigned char)p[2]) && p[3] == ':' && isdigit((unsigned char)p[4]) &&
               isdigit((unsigned char)p[5]) && p[6] == '\0') {
        off = ((p[1] - '0') * 10 + (p[2] - '0')) * 60 + (p[4] - '0') * 10 + (p[5] - '0');
        if (off > 24 * 60)
            goto bad;
        off = *p == '-' ? -off : off;
    } else {
        goto bad;
    }
    if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
        sec > 59)
        goto bad;
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    {
        time_t t = timegm(&tm);
        struct tm back;
        gmtime_r(&t, &back);
        if (back.tm_mday != d)      /* February 30th */
            goto bad;
        *us = ((int64_t)t - (int64_t)off * 60) * 1000000 + frac;
    }
    return PERMITD_OK;
bad:
    return permitd_error_set(err, PERMITD_EINVAL, "expires_at: \"%.60s\" is not a time as RFC "
                             "3339 writes it (2026-11-28T18:00:00Z, or with an offset: "
                             "+01:00)", s);
}

static int64_t wall_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Characters of UTF-8 s, or -1 when it is not well-formed. */
static long chars(const char *s)
{
    long n = 0;
    size_t len;

    for (; *s; s += len, n++)
        if ((len = utf8_char_len((const unsigned char *)s)) == 0)
            return -1;
    return n;
}

int overridecheck_row(const struct overridecheck_given *g, enum policy_algorithm alg,
                      struct override_row *r, struct permitd_error *err)
{
    long n;
    int rc;

    memset(r, 0, sizeof(*r));
    if ((rc = policy_check_name("policy", g->policy, err)) != PERMITD_OK)
        return rc;
    snprintf(r->policy, sizeof(r->policy), "%s", g->policy);
    if (strcmp(g->kind, "key") != 0 && strcmp(g->kind, "prefix") != 0 &&
        strcmp(g->kind, "app") != 0)
        return permitd_error_set(err, PERMITD_EINVAL, "match_kind: \"%.20s\" is not key, prefix "
                                 "or app", g->kind);
    snprintf(r->kind, sizeof(r->kind), "%s", g->kind);
    if (g->value[0] == '\0')
        return permitd_error_set(err, PERMITD_EINVAL, "match_value: empty (the %s to match)",
                                 strcmp(g->kind, "app") == 0 ? "app's name" : g->kind);
    if ((rc = strcmp(g->kind, "app") == 0 ? policy_check_name("match_value", g->value, err)
                                          : policy_check_key("match_value", g->value, err)) !=
        PERMITD_OK)
        return rc;
    snprintf(r->value, sizeof(r->value), "%s", g->value);
    snprintf(r->action, sizeof(r->action), "%s", g->action[0] ? g->action : "limit");
    if (strcmp(r->action, "limit") == 0) {
        /* Each number left out (0, "") is the policy's own; one at least
         * is given (the schema's CHECK says so too). */
        if (g->max_permits < 0 || g->max_permits > POLICY_MAX_PERMITS_MAX)
            return permitd_error_set(err, PERMITD_EINVAL, "max_permits: %" PRId64 " is not "
                                     "1..%lld (0 or empty: the policy's)", g->max_permits,
                                     POLICY_MAX_PERMITS_MAX);
        if (alg == POLICY_SLIDING_LOG && g->max_permits > POLICY_LOG_MAX_PERMITS)
            return permitd_error_set(err, PERMITD_EINVAL, "max_permits: %" PRId64 " is more "
                                     "than a sliding_log policy allows (%d)", g->max_permits,
                                     POLICY_LOG_MAX_PERMITS);
        r->max_permits = g->max_permits;
        if (alg == POLICY_TOKEN_BUCKET) {
            if (g->rate[0] != '\0' && (rc = policy_check_rate("rate", g->rate, err)) != PERMITD_OK)
                return rc;
            if (g->window[0] != '\0')
                return permitd_error_set(err, PERMITD_EINVAL, "window: a token_bucket policy "
                                         "has none (give rate)");
            snprintf(r->rate, sizeof(r->rate), "%s", g->rate);
        } else {
            if (g->rate[0] != '\0')
                return permitd_error_set(err, PERMITD_EINVAL, "rate: a %s policy has none "
                                         "(give window, or leave it for the policy's)",
                                         policy_algorithm_name(alg));
            if (g->window[0] != '\0' &&
                (rc = policy_parse_duration("window", g->window, &r->window_ms, err)) !=
                    PERMITD_OK)
                return rc;
        }
        if (r->max_permits == 0 && r->rate[0] == '\0' && r->window_ms == 0)
            return permitd_error_set(err, PERMITD_EINVAL, "max_permits: action limit sets one "
                                     "number at least (max_permits, or %s); each left empty "
                                     "is the policy's", alg == POLICY_TOKEN_BUCKET ? "rate"
                                     : "window");
    } else if (strcmp(r->action, "block") == 0 || strcmp(r->action, "exempt") == 0) {
        const char *f = g->max_permits ? "max_permits" : g->rate[0] ? "rate"
                                                       : g->window[0] ? "window" : NULL;
        if (f != NULL)
            return permitd_error_set(err, PERMITD_EINVAL, "%s: action %s sets no limits "
                                     "(leave it empty)", f, r->action);
    } else {
        return permitd_error_set(err, PERMITD_EINVAL, "action: \"%.20s\" is not limit, block "
                                 "or exempt", g->action);
    }
    if (g->expires_at[0] != '\0') {
        if ((rc = overridecheck_time(g->expires_at, &r->expires_us, err)) != PERMITD_OK)
            return rc;
        if (r->expires_us <= wall_us())
            return permitd_error_set(err, PERMITD_EINVAL, "expires_at: %.60s has passed "
                                     "(an expiry is in the future; empty for never)",
                                     g->expires_at);
    }
    if ((n = chars(g->description)) < 0)
        return permitd_error_set(err, PERMITD_EINVAL, "description: is not valid UTF-8 text");
    if (n > OVERRIDE_DESCRIPTION_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "description: %ld characters, the limit "
                                 "is %d", n, OVERRIDE_DESCRIPTION_MAX);
    snprintf(r->description, sizeof(r->description), "%s", g->description);
    return PERMITD_OK;
}

