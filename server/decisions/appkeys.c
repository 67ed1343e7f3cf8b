/*
 * appkeys.c - the in-memory table of API keys and the check every API
 * request goes through (see appkeys.h).
 *
 * The table is an array sorted by prefix, searched by bisection, behind a
 * read-write lock: a check holds the read lock only to find the entry,
 * compare the digests and copy the app's name out; the secret's SHA-256 is
 * computed before, outside the lock, for every well-formed key, known or
 * not. Whether a prefix exists is not a secret (it is printed in lists and
 * logs); the secret's hash is compared in constant time against the entry's,
 * or against a dummy digest when there is none, so an attacker learns
 * nothing of a secret from the time an answer takes.
 *
 * The sync replaces the whole array; a key issued or revoked on this
 * instance changes it at once and bumps a generation, so a load that read
 * MySQL before that change cannot put the old state back (the loader
 * reads again). A key revoked here is remembered, and stays revoked
 * through any later load: revocation is never undone.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "core/sha256.h"
#include "decisions/appkeys.h"

struct entry {
    char prefix[APPKEYS_PREFIX_LEN + 1];
    unsigned char hash[SHA256_RAW_LEN];
    char app[APPS_NAME_MAX + 1];
    int64_t expires_s;              /* 0: never */
    int revoked;
    int app_enabled;
    atomic_int used;                /* checked successfully since appkeys_take_used() */
};

struct appkeys {
    int off;
    pthread_rwlock_t lock;
    struct entry *v;                /* sorted by prefix */
    size_t n;
    uint64_t generation;            /* under lock */
    char (*revoked)[APPKEYS_PREFIX_LEN + 1];   /* revoked here; under lock */
    size_t nrevoked;
    atomic_ullong refused[APPKEYS_NREASONS];
};

const char *appkeys_reason_name(enum appkeys_reason r)
{
    static const char *const names[APPKEYS_NREASONS] = {
        "ok", "missing", "malformed", "unknown", "revoked", "expired", "disabled", "app_mismatch",
    };
    return (unsigned)r < APPKEYS_NREASONS ? names[r] : "unknown";
}

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static int is_b64url(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_';
}

/* A well-formed prefix: "pk_" and 16 lowercase hex digits. */
static int good_prefix(const char *p, size_t len)
{
    if (len != APPKEYS_PREFIX_LEN || memcmp(p, "pk_", 3) != 0)
        return 0;
    for (size_t i = 3; i < len; i++)
        if (!is_hex(p[i]))
            return 0;
    return 1;
}

enum appkeys_reason appkeys_parse(const char *value, size_t len, struct appkeys_token *out)
{
    size_t i = 0, start;

    if (value == NULL)
        return APPKEYS_MISSING;
    if (len < 7 || strncasecmp(value, "Bearer", 6) != 0 || (value[6] != ' ' && value[6] != '\t'))
        return APPKEYS_MALFORMED;
    i = 6;
    while (i < len && (value[i] == ' ' || value[i] == '\t'))
        i++;
    start = i;
    while (i < len && value[i] != ' ' && value[i] != '\t')
        i++;
    if (i - start != APPKEYS_KEY_LEN)
        return APPKEYS_MALFORMED;
    for (size_t j = i; j < len; j++)
        if (value[j] != ' ' && value[j] != '\t')
            return APPKEYS_MALFORMED;
    if (!good_prefix(value + start, APPKEYS_PREFIX_LEN) || value[start + APPKEYS_PREFIX_LEN] != '_')
        return APPKEYS_MALFORMED;
    for (size_t j = start + APPKEYS_PREFIX_LEN + 1; j < i; j++)
        if (!is_b64url(value[j]))
            return APPKEYS_MALFORMED;
    memcpy(out->prefix, value + start, APPKEYS_PREFIX_LEN);
    out->prefix[APPKEYS_PREFIX_LEN] = '\0';
    out->secret = value + start + APPKEYS_PREFIX_LEN + 1;
    out->secret_len = APPKEYS_SECRET_LEN;
    return APPKEYS_OK;
}

static int random_bytes(unsigned char *buf, size_t n, struct permitd_error *err)
{
    size_t got = 0;

    while (got < n) {
        ssize_t r = getrandom(buf + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return permitd_error_set(err, PERMITD_EINTERNAL, "getrandom failed: %s", strerror(errno));
        got += (size_t)r;
    }
    return PERMITD_OK;
}

int appkeys_mint(struct appkeys_minted *out, struct permitd_error *err)
{
    static const char hex[] = "0123456789abcdef";
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    unsigned char id[8], secret[32];
    char *s;
    int rc;

    if ((rc = random_bytes(id, sizeof(id), err)) != PERMITD_OK ||
        (rc = random_bytes(secret, sizeof(secret), err)) != PERMITD_OK)
        return rc;
    memcpy(out->prefix, "pk_", 3);
    for (size_t i = 0; i < sizeof(id); i++) {
        out->prefix[3 + 2 * i] = hex[id[i] >> 4];
        out->prefix[4 + 2 * i] = hex[id[i] & 15];
    }
    out->prefix[APPKEYS_PREFIX_LEN] = '\0';
    memcpy(out->key, out->prefix, APPKEYS_PREFIX_LEN);
    out->key[APPKEYS_PREFIX_LEN] = '_';
    s = out->key + APPKEYS_PREFIX_LEN + 1;
    /* 32 bytes: ten groups of three, then two bytes (three characters). */
    for (size_t i = 0; i < 30; i += 3) {
        uint32_t v = (uint32_t)secret[i] << 16 | (uint32_t)secret[i + 1] << 8 | secret[i + 2];
        *s++ = b64[v >> 18];
        *s++ = b64[(v >> 12) & 63];
        *s++ = b64[(v >> 6) & 63];
        *s++ = b64[v & 63];
    }
    {
        uint32_t v = (uint32_t)secret[30] << 16 | (uint32_t)secret[31] << 8;
        *s++ = b64[v >> 18];
        *s++ = b64[(v >> 12) & 63];
        *s++ = b64[(v >> 6) & 63];
    }
    *s = '\0';
    sha256_hex(out->key + APPKEYS_PREFIX_LEN + 1, APPKEYS_SECRET_LEN, out->hash_hex);
    memset(secret, 0, sizeof(secret));
    return PERMITD_OK;
}

int appkeys_new(int off, struct appkeys **out, struct permitd_error *err)
{
    struct appkeys *k = calloc(1, sizeof(*k));

    *out = NULL;
    if (k == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    k->off = off;
    pthread_rwlock_init(&k->lock, NULL);
    *out = k;
    return PERMITD_OK;
}

void appkeys_free(struct appkeys *k)
{
    if (k == NULL)
        return;
    pthread_rwlock_destroy(&k->lock);
    free(k->v);
    free(k->revoked);
    free(k);
}

int appkeys_enforced(const struct appkeys *k)
{
    return k != NULL && !k->off;
}

uint64_t appkeys_generation(struct appkeys *k)
{
    uint64_t g;

    pthread_rwlock_rdlock(&k->lock);
    g = k->generation;
    pthread_rwlock_unlock(&k->lock);
    return g;
}

static int by_prefix(const void *a, const void *b)
{
    return memcmp(((const struct entry *)a)->prefix, ((const struct entry *)b)->prefix,
                  APPKEYS_PREFIX_LEN);
}

static struct entry *lookup(struct entry *v, size_t n, const char *prefix)
{
    struct entry probe;

    memcpy(probe.prefix, prefix, APPKEYS_PREFIX_LEN);
    return n == 0 ? NULL : bsearch(&probe, v, n, sizeof(*v), by_prefix);
}

static int unhex(const char *hex, unsigned char out[SHA256_RAW_LEN])
{
    for (size_t i = 0; i < SHA256_RAW_LEN; i++) {
        int hi = hex[2 * i], lo = hex[2 * i + 1];
        if (!is_hex((char)hi) || !is_hex((char)lo))
            return -1;
        hi = hi <= '9' ? hi - '0' : hi - 'a' + 10;
        lo = lo <= '9' ? lo - '0' : lo - 'a' + 10;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return hex[2 * SHA256_RAW_LEN] == '\0' ? 0 : -1;
}

/* Fills e from row; -1 when the row is malformed. */
static int fill(struct entry *e, const struct apps_key_row *row)
{
    memset(e, 0, sizeof(*e));
    if (!good_prefix(row->prefix, strlen(row->prefix)) || unhex(row->hash, e->hash) != 0)
        return -1;
    memcpy(e->prefix, row->prefix, sizeof(e->prefix));
    memcpy(e->app, row->app, sizeof(e->app));
    e->app[APPS_NAME_MAX] = '\0';
    e->expires_s = row->expires_s;
    e->revoked = row->revoked;
    e->app_enabled = row->app_enabled;
    return 0;
}

static int revoked_here(const struct appkeys *k, const char *prefix)
{
    for (size_t i = 0; i < k->nrevoked; i++)
        if (memcmp(k->revoked[i], prefix, APPKEYS_PREFIX_LEN) == 0)
            return 1;
    return 0;
}

int appkeys_replace(struct appkeys *k, const struct apps_key_row *rows, size_t n,
                    uint64_t generation, struct permitd_error *err)
{
    struct entry *v = calloc(n + 1, sizeof(*v)), *old;
    size_t m = 0;

    if (v == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    for (size_t i = 0; i < n; i++)
        if (fill(&v[m], &rows[i]) == 0)
            m++;
    qsort(v, m, sizeof(*v), by_prefix);
    pthread_rwlock_wrlock(&k->lock);
    if (k->generation != generation) {
        pthread_rwlock_unlock(&k->lock);
        free(v);
        return permitd_error_set(err, PERMITD_EABORTED,
                                 "a key was issued or revoked here while the keys were read");
    }
    for (size_t i = 0; i < m; i++) {
        struct entry *e = lookup(k->v, k->n, v[i].prefix);
        if (revoked_here(k, v[i].prefix))
            v[i].revoked = 1;
        if (e != NULL && atomic_load_explicit(&e->used, memory_order_relaxed))
            atomic_store_explicit(&v[i].used, 1, memory_order_relaxed);
    }
    old = k->v;
    k->v = v;
    k->n = m;
    pthread_rwlock_unlock(&k->lock);
    free(old);
    return PERMITD_OK;
}

int appkeys_add(struct appkeys *k, const struct apps_key_row *row, struct permitd_error *err)
{
    struct entry e, *v;

    if (fill(&e, row) != 0)
        return permitd_error_set(err, PERMITD_EINVAL, "key \"%s\": malformed prefix or hash",
                                 row->prefix);
    pthread_rwlock_wrlock(&k->lock);
    k->generation++;
    if (lookup(k->v, k->n, e.prefix) == NULL) {
        v = realloc(k->v, (k->n + 1) * sizeof(*v));
        if (v == NULL) {
            pthread_rwlock_unlock(&k->lock);
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        }
        v[k->n++] = e;
        k->v = v;
        qsort(k->v, k->n, sizeof(*k->v), by_prefix);
    }
    pthread_rwlock_unlock(&k->lock);
    return PERMITD_OK;
}

void appkeys_revoke(struct appkeys *k, const char *prefix)
{
    struct entry *e;

    if (!good_prefix(prefix, strlen(prefix)))
        return;
    pthread_rwlock_wrlock(&k->lock);
    k->generation++;
    if ((e = lookup(k->v, k->n, prefix)) != NULL)
        e->revoked = 1;
    if (!revoked_here(k, prefix)) {
        char (*grown)[APPKEYS_PREFIX_LEN + 1] = realloc(k->revoked, (k->nrevoked + 1) * sizeof(*grown));
        if (grown != NULL) {
            memcpy(grown[k->nrevoked], prefix, APPKEYS_PREFIX_LEN + 1);
            k->revoked = grown;
            k->nrevoked++;
        }
    }
    pthread_rwlock_unlock(&k->lock);
}

void appkeys_set_app_enabled(struct appkeys *k, const char *app, int enabled)
{
    pthread_rwlock_wrlock(&k->lock);
    k->generation++;
    for (size_t i = 0; i < k->n; i++)
        if (strcmp(k->v[i].app, app) == 0)
            k->v[i].app_enabled = enabled;
    pthread_rwlock_unlock(&k->lock);
}

size_t appkeys_count(struct appkeys *k)
{
    size_t n;

    pthread_rwlock_rdlock(&k->lock);
    n = k->n;
    pthread_rwlock_unlock(&k->lock);
    return n;
}

static int refuse(struct appkeys *k, enum appkeys_reason r, enum appkeys_reason *why)
{
    atomic_fetch_add_explicit(&k->refused[r], 1, memory_order_relaxed);
    if (why != NULL)
        *why = r;
    return r == APPKEYS_APP_MISMATCH ? PERMITD_EPERM : PERMITD_EUNAUTHENTICATED;
}

int appkeys_check(struct appkeys *k, const char *authz, const char *app, int64_t now_s,
                  char *app_out, char *prefix_out, enum appkeys_reason *why,
                  struct permitd_error *err)
{
    static const unsigned char dummy[SHA256_RAW_LEN] = {0};
    unsigned char digest[SHA256_RAW_LEN];
    struct appkeys_token t;
    enum appkeys_reason r;
    struct entry *e;
    int64_t expires_s = 0;
    int match;

    if (why != NULL)
        *why = APPKEYS_OK;
    prefix_out[0] = '\0';
    app_out[0] = '\0';
    if (k->off)
        return PERMITD_OK;
    r = appkeys_parse(authz, authz ? strlen(authz) : 0, &t);
    if (r == APPKEYS_MISSING) {
        permitd_error_set(err, PERMITD_EUNAUTHENTICATED,
                          "no API key: send Authorization: Bearer pk_... (permitd admin issue-key)");
        return refuse(k, r, why);
    }
    if (r != APPKEYS_OK) {
        permitd_error_set(err, PERMITD_EUNAUTHENTICATED,
                          "the Authorization header (%zu bytes) is not \"Bearer pk_<16 hex "
                          "digits>_<43 base64url characters>\"", strlen(authz));
        return refuse(k, r, why);
    }
    sha256_raw(t.secret, t.secret_len, digest);
    pthread_rwlock_rdlock(&k->lock);
    e = lookup(k->v, k->n, t.prefix);
    match = sha256_equal(digest, e != NULL ? e->hash : dummy) && e != NULL;
    if (!match) {
        r = APPKEYS_UNKNOWN;
    } else if (e->revoked) {
        r = APPKEYS_REVOKED;
    } else if (e->expires_s != 0 && now_s >= e->expires_s) {
        r = APPKEYS_EXPIRED;
        expires_s = e->expires_s;
    } else if (!e->app_enabled) {
        r = APPKEYS_DISABLED;
    } else if (app[0] != '\0' && strcmp(app, e->app) != 0) {
        r = APPKEYS_APP_MISMATCH;
    }
    if (match)
        snprintf(app_out, APPS_NAME_MAX + 1, "%s", e->app);
    if (r == APPKEYS_OK)
        atomic_store_explicit(&e->used, 1, memory_order_relaxed);
    pthread_rwlock_unlock(&k->lock);
    memcpy(prefix_out, t.prefix, APPKEYS_PREFIX_LEN + 1);
    switch (r) {
    case APPKEYS_OK:
        return PERMITD_OK;
    case APPKEYS_UNKNOWN:
        permitd_error_set(err, PERMITD_EUNAUTHENTICATED, "API key %s: unknown", t.prefix);
        break;
    case APPKEYS_REVOKED:
        permitd_error_set(err, PERMITD_EUNAUTHENTICATED, "API key %s: revoked", t.prefix);
        break;
    case APPKEYS_EXPIRED:
        permitd_error_set(err, PERMITD_EUNAUTHENTICATED,
                          "API key %s: expired %lld s ago", t.prefix,
                          (long long)(now_s - expires_s));
        break;
    case APPKEYS_DISABLED:
        permitd_error_set(err, PERMITD_EUNAUTHENTICATED, "API key %s: its app \"%s\" is disabled",
                          t.prefix, app_out);
        break;
    default:
        permitd_error_set(err, PERMITD_EPERM,
                          "app: \"%.128s\" is not the app of API key %s (\"%s\"); send app "
                          "\"%s\" or leave it empty", app, t.prefix, app_out, app_out);
        break;
    }
    return refuse(k, r, why);
}

void appkeys_refused(struct appkeys *k, enum appkeys_reason r)
{
    if ((unsigned)r < APPKEYS_NREASONS)
        atomic_fetch_add_explicit(&k->refused[r], 1, memory_order_relaxed);
}

void appkeys_counters(struct appkeys *k, unsigned long long out[APPKEYS_NREASONS])
{
    for (int i = 0; i < APPKEYS_NREASONS; i++)
        out[i] = atomic_load_explicit(&k->refused[i], memory_order_relaxed);
}

void appkeys_take_used(struct appkeys *k, void (*fn)(void *ud, const char *prefix), void *ud)
{
    pthread_rwlock_rdlock(&k->lock);
    for (size_t i = 0; i < k->n; i++)
        if (atomic_exchange_explicit(&k->v[i].used, 0, memory_order_relaxed))
            fn(ud, k->v[i].prefix);
    pthread_rwlock_unlock(&k->lock);
}
