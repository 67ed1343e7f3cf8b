/*
 * envoyrls.h - Envoy's rate limit service, envoy.service.ratelimit.v3
 * RateLimitService.ShouldRateLimit, on the gRPC listener (issue 25).
 *
 * A request's domain and each of its descriptors are looked up in the
 * mapping of migration 0011 (stores/envoymap.h), which every instance keeps
 * in memory here: the matching row names the policy and the entry whose
 * value is the bucket key; hits_addend is the permits taken. The matched
 * descriptors are decided together (one limiter batch, each item on its
 * own: a denied one takes nothing, the others take theirs, as
 * envoyproxy/ratelimit counts every descriptor). The answer: overall_code,
 * per descriptor its code, current_limit (requests_per_unit and the unit
 * closest to the policy's limit), limit_remaining, duration_until_reset,
 * and the RateLimit headers (and Retry-After on a denial) of the tightest
 * descriptor in response_headers_to_add. A descriptor no row matches is
 * OK, as envoyproxy/ratelimit answers one it has no limit for.
 *
 * Thread-safety: the gRPC workers match under a read lock; the sync and
 * the admin RPCs replace the whole table under the write lock.
 */
#ifndef PERMITD_ENVOYRLS_H
#define PERMITD_ENVOYRLS_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "decisions/grpcapi.h"
#include "decisions/limiter.h"
#include "stores/envoymap.h"

#define ENVOYRLS_ENTRIES_MAX 16     /* entries of one descriptor path */

struct envoyrls;
struct service;

/* Returns a new, empty mapping in *out (free with envoyrls_free()).
 * service (the decision service: keys, validation, the limiter, the
 * counting) must outlive it. */
int envoyrls_new(struct service *service, struct envoyrls **out, struct permitd_error *err);
void envoyrls_free(struct envoyrls *r);

/* Checks a mapping row as the admin RPCs write it: domain non-empty (at
 * most ENVOYMAP_DOMAIN_MAX bytes), descriptor a comma-separated path of
 * `key` or `key=value` entries (at most ENVOYRLS_ENTRIES_MAX; no empty key
 * or value), policy a policy name, key_entry "" or one of the path's keys.
 * PERMITD_EINVAL naming the field and the value. */
int envoyrls_check_row(const struct envoymap_row *row, struct permitd_error *err);

/* Replaces the mapping with rows (copied); rows envoyrls_check_row()
 * refuses are skipped and counted in *skipped (may be NULL). */
int envoyrls_replace(struct envoyrls *r, const struct envoymap_row *rows, size_t n,
                     size_t *skipped, struct permitd_error *err);

/* Rows in the mapping now. */
size_t envoyrls_count(struct envoyrls *r);

/* Which policy and bucket key the descriptor (n entries, keys[i] =
 * values[i]) of domain maps to: 1 and policy_out (POLICY_NAME_MAX + 1
 * bytes) and key_out (POLICY_KEY_MAX + 1 bytes) when a row matches (the
 * one pinning the most values), 0 when none does. The key is the key
 * entry's value as bucketkey_from_untrusted() makes it: a value the key
 * rules refuse (over 256 bytes, a TAB, not UTF-8) is limited by its hash,
 * never an error that would fail the whole call. */
int envoyrls_match(struct envoyrls *r, const char *domain, const char *const *keys,
                   const char *const *values, size_t n, char *policy_out, char *key_out,
                   int *allow_limit_out);

/* A descriptor's own `limit` (requests_per_unit, unit) as a request's own
 * limit (decisions/limiter.h), for a row that allows it (issue 37): 1 with
 * *out filled for requests_per_unit >= 1 and a unit Envoy names (SECOND ..
 * WEEK; a month is 30 days, a year 365); 0 for anything else, which leaves
 * the policy's limits (a caller cannot switch its limit off by sending
 * nonsense). */
int envoyrls_own_limit(uint32_t requests_per_unit, int unit, struct limiter_own_limit *out);

/* Envoy's requests_per_unit and unit (RateLimitResponse.RateLimit.Unit:
 * 1 SECOND, 2 MINUTE, 3 HOUR, 4 DAY) closest to a limit of `limit` permits
 * over window_s seconds (struct limiter_result): the window itself when it
 * is one of those units, else the smallest unit in which the rate comes to
 * at least 1, rounded to the nearest whole number. */
void envoyrls_unit(int64_t limit, int64_t window_s, uint32_t *requests_per_unit, int *unit);

/* The grpc_handler_fn of /envoy.service.ratelimit.v3.RateLimitService/
 * ShouldRateLimit (other paths: unimplemented); ud is the struct envoyrls.
 * Chained after grpcapi_handle() (grpcapi_chain()). */
void envoyrls_handle(void *ud, struct grpc_call *call);

#endif
