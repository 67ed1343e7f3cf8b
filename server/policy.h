/*
 * policy.h - what a policy is allowed to look like, and where it lives in
 * Redis. Shared by the limiter (every request) and by whatever writes
 * policies, so a name is judged the same way everywhere.
 *
 * Redis layout, for prefix P (default "permitd:") and policy NAME:
 *   P{NAME}:policy      hash: name, apps, max_permits, rate, version, enabled, ...
 *   P{NAME}:b           the policy's shared bucket (requests without a key)
 *   P{NAME}:k:KEY       the bucket of one key (user id, IP, tenant)
 * "{NAME}" is the Redis Cluster hash tag: a policy and all its buckets sit
 * in one slot, which is what lets one script read both atomically.
 */
#ifndef PERMITD_POLICY_H
#define PERMITD_POLICY_H

#include <stddef.h>

#include "status.h"

#define POLICY_NAME_MAX 128
#define POLICY_KEY_MAX 256

/* Room for the longest key policy_redis_key() builds. */
#define POLICY_REDIS_KEY_MAX (128 + 2 + POLICY_NAME_MAX + 4 + POLICY_KEY_MAX + 1)

/* Checks a policy or app name: [A-Za-z0-9][A-Za-z0-9._-]{0,127}.
 * field names the request field for the message ("bucket", "app").
 * Returns PERMITD_OK or PERMITD_EINVAL naming the field and the value. */
int policy_check_name(const char *field, const char *value, struct permitd_error *err);

/* Checks a bucket key: at most 256 bytes, no control characters; "" = none. */
int policy_check_key(const char *field, const char *value, struct permitd_error *err);

enum policy_key_kind { POLICY_KEY_HASH, POLICY_KEY_BUCKET };

/* Writes into buf (POLICY_REDIS_KEY_MAX bytes) the Redis key of the policy
 * hash, or of the bucket for `key` ("" or NULL: the shared bucket). The
 * inputs must have passed the checks above. Returns the key's length. */
size_t policy_redis_key(char *buf, const char *prefix, const char *name,
                        enum policy_key_kind kind, const char *key);

#endif
