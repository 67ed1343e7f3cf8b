/*
 * audit.h - one history of every change (issue 23): policy_audit (0001,
 * written by the admin API and the plain-SQL triggers), app_audit (0007:
 * apps and keys), user_audit (0009: users), bucket_audit (0013: bucket
 * resets, the key in key_prefix's place), override_audit (0014: a
 * policy's overrides, the match in key_prefix's place, "key alice") and
 * envoy_descriptor_audit (0018: the domain as subject, the descriptor in
 * key_prefix's place) and gateway_rule_audit (0010: "rule 7" as subject,
 * the policy it names in key_prefix's place), read as one list, newest first, in pages;
 * libmariadb stays inside audit.c.
 *
 * A page ends at a cursor (struct audit_cursor: the last entry's time,
 * table and id), and the next page starts strictly after it, so entries
 * written meanwhile never shift a page: they are newer than the first.
 *
 * A struct audit_db is one connection of its own, used by one thread at a
 * time (the caller locks); it connects lazily and again after a failure.
 */
#ifndef PERMITD_AUDIT_H
#define PERMITD_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/status.h"

#define AUDIT_TIME_MAX 40           /* "2026-11-25T10:00:00.123456Z" and NUL */
#define AUDIT_PAGE_MAX 500

/* Which table an entry comes from, in the order entries of the same
 * instant are listed (newest first: the higher first). */
enum audit_source {
    AUDIT_POLICY = 1, AUDIT_APP = 2, AUDIT_USER = 3, AUDIT_BUCKET = 4, AUDIT_OVERRIDE = 5,
    AUDIT_ENVOY = 6, AUDIT_GATEWAY = 7
};
#define AUDIT_SOURCE_MAX AUDIT_GATEWAY

/* Where a page ended: entries strictly older than (time, source, id). */
struct audit_cursor {
    char time[AUDIT_TIME_MAX];      /* MySQL DATETIME(6) text, UTC: "2026-11-25 10:00:00.123456" */
    int source;                     /* enum audit_source */
    uint64_t id;
};

/* One change. old_value and new_value are JSON text ("" when none), owned
 * by the list. */
struct audit_entry {
    char kind[16];                  /* "policy", "app", "key", "user", "bucket", "override",
                                     * "envoy", "gateway" */
    char subject[1025];             /* a name; an Envoy descriptor's domain (255 characters) */
    char key_prefix[2049];          /* an app's key prefix, a reset bucket's key, an override's
                                     * match, an Envoy descriptor (512 characters) */
    char action[17];
    char actor[129];
    char changed_at[AUDIT_TIME_MAX];    /* RFC 3339 UTC */
    char *old_value;
    char *new_value;
    struct audit_cursor at;         /* this entry's place, for the next page's cursor */
};

/* What to list; NULL or "" fields filter nothing. since and until are
 * MySQL DATETIME text in UTC, as audit_cursor.time. */
struct audit_filter {
    const char *policy;             /* only this policy's entries (an Envoy descriptor's or
                                     * gateway rule's: it named the policy before or after) */
    const char *actor;              /* only entries made by this actor */
    const char *kind;               /* "policy", "app", "key", "user", "bucket", "override",
                                     * "envoy" or "gateway" */
    const char *since;              /* inclusive */
    const char *until;              /* exclusive */
    const struct audit_cursor *after;   /* NULL: from the newest */
    int limit;                      /* 1..AUDIT_PAGE_MAX */
};

struct audit_db;

/* A new, not yet connected handle for cfg's --mysql-url (free with
 * audit_db_free()); cfg must outlive it. */
int audit_db_new(const struct config *cfg, struct audit_db **out, struct permitd_error *err);
void audit_db_free(struct audit_db *d);

/* Up to f->limit entries, newest first, into a new array *out of *n
 * (free with audit_list_free()). */
int audit_list(struct audit_db *d, const struct audit_filter *f, struct audit_entry **out,
               size_t *n, struct permitd_error *err);
void audit_list_free(struct audit_entry *v, size_t n);

#endif
