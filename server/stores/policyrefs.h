/*
 * policyrefs.h - what names a policy (issue 40): gateway rules
 * (gateway_rules.policy) and Envoy descriptors (envoy_descriptors.policy)
 * name policies by name, without a foreign key. These run inside a
 * transaction the caller began on its own connection
 * (dbconn_kept_begin()), so a check and the write it guards commit
 * together.
 */
#ifndef PERMITD_POLICYREFS_H
#define PERMITD_POLICYREFS_H

#include <stddef.h>

#include "core/status.h"
#include "stores/dbconn.h"

/* PERMITD_OK when policy exists (its row share-locked until the caller's
 * transaction ends, so it cannot be deleted under the write); else
 * PERMITD_EPRECONDITION naming it, with field ("policy") first. */
int policyrefs_require(struct dbconn_kept *k, const char *field, const char *policy,
                       struct permitd_error *err);

/* What names policy, as words into buf ("gateway rule 3, envoy descriptor
 * api/generic_key=x"; "" when nothing; size > 0, cut at it), *count of
 * them. */
int policyrefs_list(struct dbconn_kept *k, const char *policy, char *buf, size_t size,
                    int *count, struct permitd_error *err);

/* Deletes every gateway rule and Envoy descriptor naming policy. The
 * gateway rules' audit triggers record each, as the transaction's actor;
 * Envoy descriptors have no audit table, so the ones deleted are returned
 * in *removed, whole, for the policy's own audit row: a new JSON array
 * (free()), "[]" when none, [{"domain", "descriptor", "policy",
 * "key_entry", "description", "version", "updated_by"}, ...]. */
int policyrefs_remove(struct dbconn_kept *k, const char *policy, char **removed,
                      struct permitd_error *err);

#endif
