/*
 * gateway_rules.h - the forward-auth rules in MySQL
 * (migrations/0010_gateway_rules.up.sql,
 * 0012_gateway_hash_key.up.sql); libmariadb stays inside
 * gateway_rules.c.
 *
 * A rule says which policy, key and permits a request seen by a gateway is
 * limited by: it matches the original request's host (exact, or any), path
 * prefix and method (or any). The admin RPCs (control/gatewaysvc.c) write
 * rules here, every change audited by the schema's triggers naming the
 * actor; the sync (control/gatewaysync.c) reads them all into the
 * in-memory table the forward-auth endpoint matches against
 * (decisions/forward.h).
 *
 * A struct gateway_rules_db is one connection of its own, used by one
 * thread at a time (the caller locks); it connects lazily and again after
 * a failure.
 */
#ifndef PERMITD_GATEWAY_RULES_H
#define PERMITD_GATEWAY_RULES_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/status.h"

#define GATEWAY_RULES_MAX 10000         /* rules loaded; more are refused by the admin RPCs */
#define GATEWAY_HOST_MAX 253
#define GATEWAY_PATH_MAX 1024
#define GATEWAY_METHOD_MAX 16
#define GATEWAY_HEADER_MAX 64
#define GATEWAY_NAME_MAX 128
#define GATEWAY_DESCRIPTION_MAX 1024

enum gateway_key_source {
    GATEWAY_KEY_CLIENT,                 /* the client's address, through trusted proxies */
    GATEWAY_KEY_HEADER,                 /* the value of key_header */
    GATEWAY_KEY_NONE,                   /* one bucket for every request matched */
};

struct gateway_rule {
    int64_t id;                         /* 0 for a rule not stored yet */
    int position;                       /* evaluation order; ties by id */
    char host[GATEWAY_HOST_MAX + 1];    /* lowercase, no port; "" = any */
    char path_prefix[GATEWAY_PATH_MAX + 1];
    char method[GATEWAY_METHOD_MAX + 1];    /* capitals; "" = any */
    char policy[GATEWAY_NAME_MAX + 1];
    enum gateway_key_source key_source;
    char key_header[GATEWAY_HEADER_MAX + 1];    /* key_source header only */
    int hash_key;                       /* 1: the key is its SHA-256 (decisions/bucketkey.h) */
    int64_t permits;                    /* >= 1 */
    char description[GATEWAY_DESCRIPTION_MAX + 1];
    int64_t version;                    /* grows on every change */
    char created_by[GATEWAY_NAME_MAX + 1];
    char updated_by[GATEWAY_NAME_MAX + 1];
    char created_at[40];                /* RFC 3339 UTC */
    char updated_at[40];
    int policy_missing;                 /* at load: no policy has that name (issue 40) */
};

/* "client", "header" or "none". A static string. */
const char *gateway_key_source_name(enum gateway_key_source s);

/* The source named s into *out: PERMITD_EINVAL naming the field
 * "key_source" and the value otherwise. */
int gateway_key_source_parse(const char *s, enum gateway_key_source *out,
                             struct permitd_error *err);

/* Checks what a DBA's CHECK constraints check, with errors that name the
 * field first ("host: ...", "path_prefix: ..."), so a form can show each
 * at its field. The host is expected lowercase already (callers fold it). */
int gateway_rule_check(const struct gateway_rule *r, struct permitd_error *err);

struct gateway_rules_db;

/* Returns a new handle in *out (free with gateway_rules_db_free()); does
 * not connect yet. cfg->mysql must be filled; cfg must outlive it. */
int gateway_rules_db_new(const struct config *cfg, struct gateway_rules_db **out,
                         struct permitd_error *err);
void gateway_rules_db_free(struct gateway_rules_db *db);

/* Every rule, by position then id. *out is a new array of *n rules (free
 * with free()). PERMITD_EUNAVAILABLE when MySQL cannot be reached. */
int gateway_rules_load(struct gateway_rules_db *db, struct gateway_rule **out, size_t *n,
                       struct permitd_error *err);

/* Stores r (checked with gateway_rule_check()) as a new rule, as actor;
 * its id into *id. PERMITD_EEXHAUSTED past GATEWAY_RULES_MAX rules. */
int gateway_rules_create(struct gateway_rules_db *db, const struct gateway_rule *r,
                         const char *actor, int64_t *id, struct permitd_error *err);

/* Replaces rule r->id with r, as actor, if it is still at r->version:
 * PERMITD_ENOTFOUND when there is no such rule, PERMITD_EABORTED when
 * another edit came first (err names both versions). */
int gateway_rules_update(struct gateway_rules_db *db, const struct gateway_rule *r,
                         const char *actor, struct permitd_error *err);

/* Deletes rule id, as actor, if it is at version (0: whatever its
 * version). Errors as gateway_rules_update(). */
int gateway_rules_delete(struct gateway_rules_db *db, int64_t id, int64_t version,
                         const char *actor, struct permitd_error *err);

#endif
