/*
 * bucketkey.h - a bucket key from bytes a client chose: the value of a
 * gateway rule's header, an Envoy descriptor's entry.
 *
 * Such a value must never turn a limit into an error (a gateway that
 * fails open then lets the request through, counted nowhere), nor let
 * its sender pick someone else's bucket. A value the key rules
 * (policy_check_key(): at most POLICY_KEY_MAX bytes, no control
 * characters; and well-formed UTF-8) refuse is limited all the same, by
 * its SHA-256: "h:" and 64 hex digits. So is a value that starts with
 * "h:" itself, so that no sent value can name a hashed value's bucket;
 * and every value when the rule asks for hashing (hash_key: an API key
 * in a header then never reaches a Redis key name).
 */
#ifndef PERMITD_BUCKETKEY_H
#define PERMITD_BUCKETKEY_H

#include "stores/policy.h"

#define BUCKETKEY_HASH_PREFIX "h:"

/* The bucket key of value into out (POLICY_KEY_MAX + 1 bytes): value
 * itself when it is a valid key not starting with "h:" and hash is 0;
 * otherwise "h:" and the lowercase hex SHA-256 of value. "" stays ""
 * (the rule's shared bucket). Always a key limiter_check() accepts. */
void bucketkey_from_untrusted(const char *value, int hash, char out[POLICY_KEY_MAX + 1]);

#endif
