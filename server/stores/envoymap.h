/*
 * envoymap.h - the Envoy descriptor mapping in MySQL (migration 0011,
 * table envoy_descriptors; issue 25): which policy and which bucket key a
 * ShouldRateLimit descriptor of a domain is limited by.
 *
 * Rows are read whole by the sync (every instance keeps them in memory,
 * decisions/envoyrls.h) and written one at a time by the admin RPCs
 * (control/envoysvc.h), which check them first (envoyrls_check_row()).
 */
#ifndef PERMITD_ENVOYMAP_H
#define PERMITD_ENVOYMAP_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/status.h"

#define ENVOYMAP_DOMAIN_MAX 255
#define ENVOYMAP_DESCRIPTOR_MAX 512
#define ENVOYMAP_KEY_ENTRY_MAX 255

struct envoymap_row {
    char domain[ENVOYMAP_DOMAIN_MAX + 1];
    char descriptor[ENVOYMAP_DESCRIPTOR_MAX + 1];   /* "generic_key=api,user_id" */
    char policy[129];
    char key_entry[ENVOYMAP_KEY_ENTRY_MAX + 1];      /* "" = the shared bucket */
    int allow_limit_override;       /* 1: a matching descriptor's own `limit` stands in for
                                       the policy's limits (issue 37, migration 0014) */
    char description[1025];
    int64_t version;
    char updated_by[129];
    char updated_at[40];                             /* ISO 8601, UTC */
    int policy_missing;                              /* at load: no policy has that name */
};

struct envoymap;

/* Returns a new store for cfg's --mysql-url in *out (free with
 * envoymap_free()); connects on first use. */
int envoymap_new(const struct config *cfg, struct envoymap **out, struct permitd_error *err);
void envoymap_free(struct envoymap *m);

/* Every row, ordered by domain and descriptor: a new array in *out
 * (free()), *n rows. PERMITD_EUNAVAILABLE when MySQL cannot be reached. */
int envoymap_load(struct envoymap *m, struct envoymap_row **out, size_t *n,
                  struct permitd_error *err);

/* Creates or replaces the row of (row->domain, row->descriptor), written by
 * actor. With expect_version > 0 an existing row must be at that version
 * (else PERMITD_EABORTED, naming both); 0 writes whatever is there. */
int envoymap_put(struct envoymap *m, const struct envoymap_row *row, int64_t expect_version,
                 const char *actor, struct permitd_error *err);

/* Deletes the row of (domain, descriptor) as actor (audited by migration
 * 0018's trigger); PERMITD_ENOTFOUND naming them when there is none. */
int envoymap_delete(struct envoymap *m, const char *domain, const char *descriptor,
                    const char *actor, struct permitd_error *err);

#endif
