/*
 * policyrefs.h - what names a policy (issues 40 and 37): gateway rules
 * (gateway_rules.policy), Envoy descriptors (envoy_descriptors.policy) and
 * overrides (policy_overrides.policy) name policies by name, without a
 * foreign key. These run inside a transaction the caller began on its own
 * connection (dbconn_kept_begin()), so a check and the write it guards
 * commit together.
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
 * api/generic_key=x, 12 overrides": overrides counted, not named; "" when
 * nothing; size > 0, cut at it), *count of them (each override one). */
int policyrefs_list(struct dbconn_kept *k, const char *policy, char *buf, size_t size,
                    int *count, struct permitd_error *err);

/* Deletes every gateway rule, override and Envoy descriptor naming
 * policy (so a policy made again under the name starts with none). Their
 * audit triggers (0010, 0014, 0018) record each, as the transaction's
 * actor; the Envoy descriptors deleted are also returned in *removed,
 * whole, for the policy's own audit row: a new JSON array
 * (free()), "[]" when none, [{"domain", "descriptor", "policy",
 * "key_entry", "description", "version", "updated_by"}, ...]. */
int policyrefs_remove(struct dbconn_kept *k, const char *policy, char **removed,
                      struct permitd_error *err);

#endif
