/*
 * policy.h - what a policy is allowed to look like, and where it lives in
 * Redis. Shared by the limiter (every request) and by whatever writes
 * policies, so a name is judged the same way everywhere.
 *
 * Redis layout, for prefix P (default "permitd:") and policy NAME:
 *   P{NAME}:policy      hash: name, apps, max_permits, rate, version, enabled, ...
 *   P{NAME}:b           the policy's shared bucket (requests without a key)
 *   P{NAME:KEY}:k       the bucket of one key (user id, IP, tenant)
 *   P{NAME}:k:KEY       the bucket of one key of a policy that sets
 *                       `colocate` (and every keyed bucket before issue 19)
 *   P{T}il:NAME         the index of the policy's token buckets: a list
 *                       a group of 64 slots, T a tag of the group's first
 *                       (lua/bucket.lua's top; policy_index_group_key())
 *   P{T}ix:NAME         the index's fallback, one set per slot, T a tag
 *                       of that slot (policy_index_key())
 *   P{T}ig:NAME[:<i>]   the index's hashes of before the lists, read and
 *                       moved into them
 * The part in braces is the Redis Cluster hash tag: Redis hashes the bytes
 * from the first '{' to the next '}' (the prefix holds no brace, config.c).
 * A keyed bucket's tag holds its key, so one policy's keyed buckets spread
 * over every slot, and so over every master: its throughput grows with the
 * cluster. The script reads no policy hash (lua/bucket.lua: the limits come
 * in ARGV), so nothing needs them in the policy's slot. A KEY holding '}'
 * ends the tag there: "a}b" and "a}c" share the tag "NAME:a" (one slot,
 * deterministically; the keys stay distinct). A policy with `colocate` keeps
 * every bucket in the slot of "{NAME}", so one script may decide any of its
 * buckets together (all_or_nothing across keys), at one node's throughput.
 */
#ifndef PERMITD_POLICY_H
#define PERMITD_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

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

#define POLICY_DESCRIPTION_MAX 1024
#define POLICY_MAX_PERMITS_MAX 9007199254740992LL   /* 2^53: exact in Lua */

/* Checks a rate: decimal text of permits per second, > 0, at most 12
 * decimal places and at most 1e9 (the column is DECIMAL(24,12)).
 * field names it in the message ("rate"). */
int policy_check_rate(const char *field, const char *value, struct permitd_error *err);

/* Checks a policy's editable fields but its limits (policy_check_limits()
 * checks those), naming the first bad one: name, apps (names or "*"; at
 * least one), description (at most 1024 characters of UTF-8 text),
 * failure_mode ("open" or "closed"). */
int policy_check_fields(const char *name, const char *const *apps, size_t napps,
                        const char *description, const char *failure_mode,
                        struct permitd_error *err);

/* The Redis Cluster slot (0..16383) of every key of policy `name`: CRC16
 * (XMODEM) of the hash tag, as Redis computes it. */
unsigned policy_slot(const char *name);

/* The bucket index (issue 22, lua/bucket.lua's top): per policy and Redis
 * Cluster slot, the set P{T}ix:NAME of the policy's token-bucket keys in
 * that slot, T a tag of POLICY_INDEX_TAG_LEN characters of [0-9a-zA-Z]
 * that hashes to the slot (the first in the order 0-9, a-z, A-Z, first
 * character slowest: the table bucket.lua holds). The same on a single
 * Redis, so one layout serves both. */
#define POLICY_INDEX_TAG_LEN 3
#define POLICY_SLOTS 16384

/* The tag of slot (0..16383): POLICY_INDEX_TAG_LEN characters and a NUL,
 * in a table made once, on first use (thread-safe). */
const char *policy_index_tag(unsigned slot);

/* Writes into buf (POLICY_REDIS_KEY_MAX bytes) the index key of policy
 * name's buckets in slot; returns its length. */
size_t policy_index_key(char *buf, const char *prefix, const char *name, unsigned slot);

/* The group lists (issue 41, lua/bucket.lua's top): the slots cut into
 * groups of POLICY_INDEX_GROUP, group g's entries in the list P{T}il:NAME
 * in slot POLICY_INDEX_GROUP * g (T its tag), blobs of "\n"-ended entries.
 * Before the lists, the same group's entries were fields of the hashes
 * P{T}ig:NAME:<i>, and P{T}ig:NAME held "k p", saying how many there are
 * (2^k + p). Writes into buf (POLICY_REDIS_KEY_MAX bytes) the list
 * (POLICY_INDEX_LIST) or the "k p" (POLICY_INDEX_HASHES) of the group of
 * slot; returns its length. */
#define POLICY_INDEX_GROUP 64
enum policy_index_form { POLICY_INDEX_LIST = 'l', POLICY_INDEX_HASHES = 'g' };
size_t policy_index_group_key(char *buf, const char *prefix, const char *name, unsigned slot,
                              enum policy_index_form form);

/* Whether a group list that grew from `blobs` to `len` blobs while its
 * blobs [from, blobs) were being read may hold entries no reading met: a
 * split that made blob L moved entries out of blob L - 2^floor(log2 L)
 * (linear hashing, lua/bucket.lua's top) into L, and only a source among
 * the blobs being read may have been read after the move (sources below
 * `from` were read in full before). The settle reads the new blobs then. */
int policy_index_split_unread(unsigned long long from, unsigned long long blobs,
                              unsigned long long len);

/* What index key `key` (NUL-terminated) of prefix is: 'x' a set of one
 * slot, 'l' a group's list, 'g' a hash of before the lists (its "k p" or
 * a container); 0 for anything else, such as a bucket key whose KEY holds
 * "}il:" (which a SCAN for index keys may meet). */
int policy_index_key_kind(const char *prefix, const char *key);

/* The bucket key that an entry (len bytes, of a list's blob or a hash's
 * fields) of
 * policy name stands for, into buf (POLICY_REDIS_KEY_MAX bytes): KEY
 * for P{NAME:KEY}:k, "\1" KEY for P{NAME}:k:KEY, "\2" for P{NAME}:b.
 * Returns its length, 0 for an entry that is none of these or too long. */
size_t policy_index_entry_key(char *buf, const char *prefix, const char *name,
                              const char *entry, size_t len);

/* POLICY_KEY_BUCKET: a bucket of a policy whose buckets spread;
 * POLICY_KEY_BUCKET_COLOCATED: of one that sets colocate. The shared
 * bucket ("" key) is the same for both. */
enum policy_key_kind { POLICY_KEY_HASH, POLICY_KEY_BUCKET, POLICY_KEY_BUCKET_COLOCATED };

/* Writes into buf (POLICY_REDIS_KEY_MAX bytes) the Redis key of the policy
 * hash, or of the bucket for `key` ("" or NULL: the shared bucket). The
 * inputs must have passed the checks above. Returns the key's length. */
size_t policy_redis_key(char *buf, const char *prefix, const char *name,
                        enum policy_key_kind kind, const char *key);

/* A policy's limiting algorithm (issue 20). Its name is the same on the
 * wire, in MySQL and in the policy hash's field `algorithm` (an absent or
 * empty field: the token bucket, every policy written before issue 20):
 *   token_bucket    max_permits, refilled at `rate` per second
 *   fixed_window    at most max_permits per window (a duration, or a
 *                   calendar unit in UTC: see enum policy_calendar)
 *   sliding_window  two fixed windows' counts, the previous one weighted
 *   sliding_log     at most max_permits in every interval of `window`
 *   concurrency     at most max_permits held at once, as leases that are
 *                   released or expire after the lease time-to-live */
enum policy_algorithm {
    POLICY_TOKEN_BUCKET,
    POLICY_FIXED_WINDOW,
    POLICY_SLIDING_WINDOW,
    POLICY_SLIDING_LOG,
    POLICY_CONCURRENCY,
    POLICY_ALGORITHMS               /* how many there are */
};

/* The name of algorithm a ("token_bucket", ...). */
const char *policy_algorithm_name(enum policy_algorithm a);

/* Reads an algorithm's name into *out; "" is the token bucket. PERMITD_OK,
 * or PERMITD_EINVAL naming field and the value, and listing the names. */
int policy_algorithm_parse(const char *field, const char *s, enum policy_algorithm *out,
                           struct permitd_error *err);

/* A fixed window aligned to the calendar, in UTC: "10,000 a month" starts
 * again at 00:00 on the 1st. NONE: windows of `window` milliseconds counted
 * from the Unix epoch (so every instance and every key agrees on them). */
enum policy_calendar {
    POLICY_CALENDAR_NONE,
    POLICY_CALENDAR_MINUTE,
    POLICY_CALENDAR_HOUR,
    POLICY_CALENDAR_DAY,
    POLICY_CALENDAR_MONTH
};

/* "" for NONE, else "minute", "hour", "day", "month". */
const char *policy_calendar_name(enum policy_calendar c);

/* Reads a calendar unit's name ("minute", ...) into *out; PERMITD_ENOTFOUND
 * (err untouched) when s is none, so a caller may try a duration next. */
int policy_calendar_parse(const char *s, enum policy_calendar *out);

/* The longest window and lease time-to-live, in milliseconds: 400 days. */
#define POLICY_DURATION_MAX_MS (400LL * 24 * 3600 * 1000)

/* Reads a duration: a whole number and a unit, "250ms", "1s", "90s", "1m",
 * "1h", "1d", into *ms (1 ms .. POLICY_DURATION_MAX_MS). PERMITD_EINVAL
 * names field and the value, and says what is expected. */
int policy_parse_duration(const char *field, const char *s, int64_t *ms,
                          struct permitd_error *err);

/* Writes into buf (POLICY_DURATION_TEXT bytes) ms in the largest unit
 * that holds it whole: 60000 -> "1m", 1500 -> "1500ms". */
#define POLICY_DURATION_TEXT 24
void policy_format_duration(char *buf, int64_t ms);

/* The most permits a sliding_log policy may allow per window. The log
 * keeps one entry (a Redis TIME stamp, about 16 bytes in a sorted set) per
 * permit taken within the window, so a key's memory and a decision's work
 * grow with max_permits: 10000 bounds a key at about 200 KB and a take's
 * trim at that many entries. Larger limits want sliding_window (two
 * counters), whose error the README states. */
#define POLICY_LOG_MAX_PERMITS 10000

/* The lease time-to-live of a concurrency policy created without one. */
#define POLICY_LEASE_DEFAULT_MS 30000

/* A policy's algorithm and the limits that go with it, as
 * policy_check_limits() read them. */
struct policy_limits {
    enum policy_algorithm algorithm;
    long long max_permits;
    const char *rate;               /* token_bucket only (the text given); else "" */
    int64_t window_ms;              /* fixed_window (unless calendar), sliding_*; else 0 */
    enum policy_calendar calendar;  /* fixed_window only; else NONE */
    int64_t lease_ms;               /* concurrency only; else 0 */
};

/* Checks a policy's algorithm and limits as an editor gives them (text, ""
 * = not given) and reads them into *out:
 *   algorithm   "" (token_bucket) or a name (policy_algorithm_parse())
 *   max_permits 1..2^53; a sliding_log at most POLICY_LOG_MAX_PERMITS
 *   rate        required for token_bucket, refused for the others
 *   window      required for fixed_window, sliding_window, sliding_log,
 *               refused for the others: a duration (policy_parse_duration()),
 *               or, for fixed_window only, a calendar unit ("month")
 *   lease_ttl   concurrency only: a duration, POLICY_LEASE_DEFAULT_MS when ""
 * PERMITD_EINVAL names the first field that does not fit, and the
 * algorithm. out->rate points into rate. */
int policy_check_limits(const char *algorithm, long long max_permits, const char *rate,
                        const char *window, const char *lease_ttl, struct policy_limits *out,
                        struct permitd_error *err);

/* Writes into buf (POLICY_DURATION_TEXT bytes) a window as an editor
 * gives it: the calendar unit's name, else policy_format_duration() of
 * window_ms; "" when neither (window_ms 0). */
void policy_format_window(char *buf, int64_t window_ms, enum policy_calendar calendar);

/* Writes into buf (POLICY_REDIS_KEY_MAX bytes) the Redis key of the state
 * of one bucket of algorithm a: key "" or NULL is the policy's shared
 * bucket. Each algorithm has a letter of its own (t): token_bucket k (its
 * shared bucket is P{NAME}:b, as before issue 20), fixed_window f,
 * sliding_window s, sliding_log l, concurrency c:
 *   P{NAME}:t          the shared bucket (token bucket: P{NAME}:b)
 *   P{NAME:KEY}:t      one key's, in a slot of its own
 *   P{NAME}:t:KEY      one key's, when the policy sets colocate
 * so a policy whose algorithm changes starts from fresh buckets (the old
 * ones expire on their own) and no script meets another's state. For the
 * token bucket this is policy_redis_key(). Returns the key's length. */
size_t policy_bucket_key(char *buf, const char *prefix, const char *name,
                         enum policy_algorithm a, int colocate, const char *key);

/* Room for a SCAN pattern policy_bucket_patterns() builds. */
#define POLICY_PATTERN_MAX (2 * POLICY_REDIS_KEY_MAX)

/* Writes into out[0] and out[1] the SCAN MATCH patterns of every keyed
 * bucket of policy `name`: the colocated layout (P{NAME}:k:*, also every
 * keyed bucket written before issue 19) and the spread one (P{NAME:*}:k),
 * SCAN's glob characters in the prefix escaped. The shared bucket P{NAME}:b
 * matches neither (it is one key: name it). */
void policy_bucket_patterns(char out[2][POLICY_PATTERN_MAX], const char *prefix,
                            const char *name);

/* Writes into out a SCAN pattern: prefix with SCAN's glob characters
 * escaped, then glob as it is ("{*": every key of a policy). */
void policy_prefix_pattern(char out[POLICY_PATTERN_MAX], const char *prefix, const char *glob);

/* 1 when the len bytes at key are a token bucket's state key under prefix,
 * of any policy and layout (P{NAME}:b, P{NAME:KEY}:k, P{NAME}:k:KEY); 0 for
 * anything else (a policy hash, an index, a request-id record, another
 * algorithm's state). */
int policy_is_bucket_key(const char *prefix, const char *key, size_t len);

#endif
