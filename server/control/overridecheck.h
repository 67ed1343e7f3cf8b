/*
 * overridecheck.h - what a client sends of one override (an RPC's fields,
 * a CSV row's cells), checked against its policy's algorithm before MySQL
 * is asked: for OverrideService (overridesvc.c) and its CSV import
 * (overridecsv.c), so a field means the same wherever it comes from.
 * Every error starts with the field's name ("rate: ..."), so a form shows
 * it at its field and an import names its column.
 */
#ifndef PERMITD_OVERRIDECHECK_H
#define PERMITD_OVERRIDECHECK_H

#include <stdint.h>

#include "core/status.h"
#include "stores/override_edits.h"
#include "stores/policy.h"

/* One override as a client gives it: text, but max_permits. */
struct overridecheck_given {
    const char *policy, *kind, *value, *action, *rate, *window, *expires_at, *description;
    int64_t max_permits;
};

/* Checks g for a policy of algorithm alg and fills *r (id and version
 * left 0): the policy's name; match_kind key, prefix or app; a key or
 * prefix (policy_check_key(), not empty) or an app's name; action limit
 * ("" too), block or exempt; a limit's max_permits, and its rate (a
 * token bucket) or window (the others), one of them at least, each left
 * out (0, "") the policy's; block and exempt no limits; an expiry in the future (RFC 3339); a description of
 * at most OVERRIDE_DESCRIPTION_MAX characters of UTF-8. */
int overridecheck_row(const struct overridecheck_given *g, enum policy_algorithm alg,
                      struct override_row *r, struct permitd_error *err);

/* Reads an RFC 3339 time ("2026-11-28T18:00:00Z", "...:00.5+01:00") into
 * Unix microseconds; PERMITD_EINVAL naming expires_at otherwise. */
int overridecheck_time(const char *s, int64_t *us, struct permitd_error *err);

#endif
