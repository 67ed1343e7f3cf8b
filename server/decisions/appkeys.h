/*
 * appkeys.h - which app a request comes from: its API key, checked in
 * memory (issue 21).
 *
 * An API key is pk_<id>_<secret>: "pk_" and 16 lowercase hex digits (the
 * prefix: names the key in lists and logs, not secret), "_", and 43
 * base64url characters (256 random bits). MySQL holds only the prefix and
 * SHA-256(secret) (stores/apps.h); the sync loads every key into this
 * table, so a request's key is checked without any round trip: hash the
 * secret it brings, find its prefix, compare the hashes in constant time
 * (a prefix that is not there is compared against a dummy digest, so an
 * unknown key costs what a known one does).
 *
 * Thread-safety: any number of API workers check at once under a read
 * lock; the sync replaces the whole table, and the admin RPCs add or
 * revoke one key, under the write lock.
 */
#ifndef PERMITD_APPKEYS_H
#define PERMITD_APPKEYS_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "stores/apps.h"

#define APPKEYS_PREFIX_LEN 19       /* "pk_" + 16 hex digits */
#define APPKEYS_SECRET_LEN 43       /* base64url of 32 bytes, unpadded */
#define APPKEYS_KEY_LEN (APPKEYS_PREFIX_LEN + 1 + APPKEYS_SECRET_LEN)

/* Why a request was not let in, for permitd_unauthenticated_total{reason}.
 * A bounded set of labels: appkeys_reason_name(). */
enum appkeys_reason {
    APPKEYS_OK = 0,
    APPKEYS_MISSING,                /* no Authorization header */
    APPKEYS_MALFORMED,              /* not "Bearer pk_<16 hex>_<43 base64url>" */
    APPKEYS_UNKNOWN,                /* no such key (or its secret is wrong) */
    APPKEYS_REVOKED,
    APPKEYS_EXPIRED,
    APPKEYS_DISABLED,               /* the key's app is disabled */
    APPKEYS_APP_MISMATCH,           /* the request's app is not the key's */
    APPKEYS_NREASONS
};

const char *appkeys_reason_name(enum appkeys_reason r);

/* A parsed Authorization header: the key's prefix (NUL-ended) and its
 * secret (secret_len bytes inside the header value, not NUL-ended). */
struct appkeys_token {
    char prefix[APPKEYS_PREFIX_LEN + 1];
    const char *secret;
    size_t secret_len;
};

/* Parses an Authorization header value (NULL: no header): "Bearer" (any
 * case), spaces, the key, optional trailing spaces. APPKEYS_OK and *out,
 * APPKEYS_MISSING, or APPKEYS_MALFORMED. Pure; never reads past len. */
enum appkeys_reason appkeys_parse(const char *value, size_t len, struct appkeys_token *out);

/* A key just made, shown once. */
struct appkeys_minted {
    char key[APPKEYS_KEY_LEN + 1];          /* the whole key: give it to the app */
    char prefix[APPKEYS_PREFIX_LEN + 1];
    char hash_hex[65];                      /* SHA-256(secret): what MySQL keeps */
};

/* Makes a new key from the kernel's random numbers (getrandom). */
int appkeys_mint(struct appkeys_minted *out, struct permitd_error *err);

struct appkeys;

/* Returns a new, empty table in *out (free with appkeys_free()). off: 1
 * for --app-auth off (every request passes with the app it names). */
int appkeys_new(int off, struct appkeys **out, struct permitd_error *err);
void appkeys_free(struct appkeys *k);

/* 1 when the table checks keys (--app-auth keys). */
int appkeys_enforced(const struct appkeys *k);

/* A number that changes whenever a key is added or revoked here
 * (appkeys_add, appkeys_revoke). A loader reads it before it reads MySQL
 * and hands it to appkeys_replace(), which refuses a load that a local
 * change may have overtaken. */
uint64_t appkeys_generation(struct appkeys *k);

/* Replaces the table with rows (copied), unless a key was added or revoked
 * here since generation was read: then PERMITD_EABORTED and nothing
 * changes (load again). Rows with a malformed prefix or hash are skipped. */
int appkeys_replace(struct appkeys *k, const struct apps_key_row *rows, size_t n,
                    uint64_t generation, struct permitd_error *err);

/* Adds one key now (issued on this instance). */
int appkeys_add(struct appkeys *k, const struct apps_key_row *row, struct permitd_error *err);

/* Marks the key with this prefix revoked now (revoked on this instance);
 * it stays revoked whatever a later load says. */
void appkeys_revoke(struct appkeys *k, const char *prefix);

/* Enables or disables every key of app now (changed on this instance). */
void appkeys_set_app_enabled(struct appkeys *k, const char *app, int enabled);

/* Keys in the table. */
size_t appkeys_count(struct appkeys *k);

/* Checks a request: authz is its Authorization header (NULL: none), app
 * its app field ("" = the key's). On PERMITD_OK the app to decide for is
 * in app_out (APPS_NAME_MAX + 1 bytes; "" with --app-auth off: the
 * request's own app stands) and the key's prefix in prefix_out
 * (APPKEYS_PREFIX_LEN + 1; "" with --app-auth off). Otherwise
 * PERMITD_EUNAUTHENTICATED (a bad key), or PERMITD_EPERM (a good key for
 * another app), err naming the key's prefix and the apps, never the
 * secret; the reason is counted and left in *why (may be NULL), and
 * app_out holds the key's app when the key itself is good (revoked,
 * expired, disabled, another app's), else "". now_s:
 * Unix seconds, for expiry. */
int appkeys_check(struct appkeys *k, const char *authz, const char *app, int64_t now_s,
                  char *app_out, char *prefix_out, enum appkeys_reason *why,
                  struct permitd_error *err);

/* Counts one refusal decided by the caller (an AcquireBatch item's app
 * that is not the key's). */
void appkeys_refused(struct appkeys *k, enum appkeys_reason r);

/* Refusals so far by reason (index enum appkeys_reason; [0] unused). */
void appkeys_counters(struct appkeys *k, unsigned long long out[APPKEYS_NREASONS]);

/* Calls fn for each key checked successfully since the last call (for
 * last_used_at), and clears the marks. */
void appkeys_take_used(struct appkeys *k, void (*fn)(void *ud, const char *prefix), void *ud);

#endif
