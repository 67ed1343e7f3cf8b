/*
 * messages.h - the permit.v1 messages as fuzz_json and fuzz_proto see them:
 * the table of descriptors a fuzzer picks from, packing for byte-for-byte
 * comparison, and the validation the server runs on a decoded request
 * (server/stores/policy.c), checked against a re-statement of its rules.
 *
 * Comparing two messages means comparing what protobuf_c_message_pack()
 * makes of them: it writes fields in number order with one encoding each,
 * so equal messages give equal bytes.
 */
#ifndef PERMITD_FUZZ_MESSAGES_H
#define PERMITD_FUZZ_MESSAGES_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

#include "fuzz.h"
#include "stores/policy.h"
#include "permit/v1/admin.pb-c.h"
#include "permit/v1/ratelimit.pb-c.h"
#include "jsontest.pb-c.h"
#include "jsontest2.pb-c.h"

/* Requests first: they are what permitd decodes from clients. The
 * responses follow, for the kinds of fields only they have (double, oneof),
 * then the test messages of tests/unit/proto, which have every kind of
 * field json.c maps (bytes, enums, maps, floats, proto2 defaults and
 * required fields), so no path of the generic codec goes unfuzzed. */
static const ProtobufCMessageDescriptor *const fuzz_messages[] = {
    &permit__v1__acquire_request__descriptor,
    &permit__v1__peek_request__descriptor,
    &permit__v1__acquire_batch_request__descriptor,
    &permit__v1__list_policies_request__descriptor,
    &permit__v1__get_policy_request__descriptor,
    &permit__v1__create_policy_request__descriptor,
    &permit__v1__update_policy_request__descriptor,
    &permit__v1__delete_policy_request__descriptor,
    &permit__v1__list_policy_history_request__descriptor,
    &permit__v1__get_bucket_request__descriptor,
    &permit__v1__reset_bucket_request__descriptor,
    &permit__v1__get_policy_stats_request__descriptor,
    &permit__v1__login_request__descriptor,
    &permit__v1__logout_request__descriptor,
    &permit__v1__who_am_irequest__descriptor,
    &permit__v1__acquire_response__descriptor,
    &permit__v1__peek_response__descriptor,
    &permit__v1__acquire_batch_response__descriptor,
    &permit__v1__list_policies_response__descriptor,
    &permit__v1__get_policy_response__descriptor,
    &permit__v1__list_policy_history_response__descriptor,
    &permit__v1__get_bucket_response__descriptor,
    &permit__v1__get_policy_stats_response__descriptor,
    &permit__v1__login_response__descriptor,
    &permit__test__all_types__descriptor,
    &permit__test__legacy__descriptor,
};
#define FUZZ_NMESSAGES (sizeof(fuzz_messages) / sizeof(fuzz_messages[0]))

/* Whether messages of type d can hold a map (at any depth). A map read
 * from JSON can hold one key twice ("1" and "01" for an int32 key; binary
 * input any key twice) and JSON keeps only the last, so for these the
 * fuzzers check that JSON is stable rather than that it is lossless. */
static inline int fuzz_has_map(const ProtobufCMessageDescriptor *d, int depth)
{
    for (unsigned i = 0; depth < 8 && i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const ProtobufCMessageDescriptor *sub = f->descriptor;
        size_t n;

        if (f->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        n = strlen(sub->short_name);
        if (f->label == PROTOBUF_C_LABEL_REPEATED && n > 5 &&
            strcmp(sub->short_name + n - 5, "Entry") == 0)
            return 1;
        if (fuzz_has_map(sub, depth + 1))
            return 1;
    }
    return 0;
}

/* The packed bytes of msg: a new buffer (free()), its length in *len. */
static inline uint8_t *fuzz_pack(const ProtobufCMessage *msg, size_t *len)
{
    uint8_t *out;

    *len = protobuf_c_message_get_packed_size(msg);
    out = malloc(*len + 1);
    FUZZ_CHECK(out != NULL);
    FUZZ_CHECK(protobuf_c_message_pack(msg, out) == *len);
    return out;
}

static inline int fuzz_same_packed(const ProtobufCMessage *a, const ProtobufCMessage *b)
{
    size_t la, lb;
    uint8_t *pa = fuzz_pack(a, &la), *pb = fuzz_pack(b, &lb);
    int same = la == lb && memcmp(pa, pb, la) == 0;

    free(pa);
    free(pb);
    return same;
}

/* Calls fn on every sub-message of msg (not msg itself), depth first. */
static inline void fuzz_each_sub(ProtobufCMessage *msg, void (*fn)(ProtobufCMessage *, void *),
                                 void *ud)
{
    const ProtobufCMessageDescriptor *d = msg->descriptor;

    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        char *slot = (char *)msg + f->offset;

        if (f->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(size_t *)((char *)msg + f->quantifier_offset);
            ProtobufCMessage **arr = *(ProtobufCMessage ***)slot;
            for (size_t k = 0; k < n; k++)
                if (arr[k] != NULL) {
                    fn(arr[k], ud);
                    fuzz_each_sub(arr[k], fn, ud);
                }
        } else if (*(ProtobufCMessage **)slot != NULL) {
            if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
                *(uint32_t *)((char *)msg + f->quantifier_offset) != f->id)
                continue;
            fn(*(ProtobufCMessage **)slot, ud);
            fuzz_each_sub(*(ProtobufCMessage **)slot, fn, ud);
        }
    }
}

/* Calls fn on every string field value of msg and its sub-messages. */
static inline void fuzz_each_string(ProtobufCMessage *msg, void (*fn)(const char *, void *),
                                    void *ud);

struct fuzz_strings_walk {
    void (*fn)(const char *, void *);
    void *ud;
};

static inline void fuzz_strings_of(ProtobufCMessage *msg, void *ud)
{
    struct fuzz_strings_walk *w = ud;
    const ProtobufCMessageDescriptor *d = msg->descriptor;

    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        char *slot = (char *)msg + f->offset;

        if (f->type != PROTOBUF_C_TYPE_STRING)
            continue;
        if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
            *(uint32_t *)((char *)msg + f->quantifier_offset) != f->id)
            continue;    /* not the member chosen: its slot is another's */
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(size_t *)((char *)msg + f->quantifier_offset);
            for (size_t k = 0; k < n; k++)
                w->fn((*(char ***)slot)[k], w->ud);
        } else if (*(char **)slot != NULL) {
            w->fn(*(char **)slot, w->ud);
        }
    }
}

static inline void fuzz_each_string(ProtobufCMessage *msg, void (*fn)(const char *, void *),
                                    void *ud)
{
    struct fuzz_strings_walk w = { fn, ud };

    fuzz_strings_of(msg, &w);
    fuzz_each_sub(msg, fuzz_strings_of, &w);
}

static inline void fuzz_check_utf8(const char *s, void *ud)
{
    if (s != NULL && !fuzz_utf8((const unsigned char *)s, strlen(s)))
        *(int *)ud = 0;
}

/* Whether every string in msg is well-formed UTF-8 (the binary codec does
 * not check; the JSON one must, since JSON text is UTF-8). */
static inline int fuzz_all_utf8(ProtobufCMessage *msg)
{
    int ok = 1;

    fuzz_each_string(msg, fuzz_check_utf8, &ok);
    return ok;
}

/* Unknown fields (kept by the binary codec, dropped by JSON) of one
 * message are hidden by zeroing their count; fuzz_unhide_unknown() puts the
 * counts back so that free_unpacked() frees them. */
struct fuzz_hidden {
    ProtobufCMessage *msg[256];
    unsigned n_unknown[256];
    size_t n;
    int overflow;
};

static inline void fuzz_hide_one(ProtobufCMessage *msg, void *ud)
{
    struct fuzz_hidden *h = ud;

    if (msg->n_unknown_fields == 0)
        return;
    if (h->n == sizeof(h->msg) / sizeof(h->msg[0])) {
        h->overflow = 1;
        return;
    }
    h->msg[h->n] = msg;
    h->n_unknown[h->n++] = msg->n_unknown_fields;
    msg->n_unknown_fields = 0;
}

static inline void fuzz_hide_unknown(ProtobufCMessage *msg, struct fuzz_hidden *h)
{
    memset(h, 0, sizeof(*h));
    fuzz_hide_one(msg, h);
    fuzz_each_sub(msg, fuzz_hide_one, h);
}

static inline void fuzz_unhide_unknown(struct fuzz_hidden *h)
{
    for (size_t i = 0; i < h->n; i++)
        h->msg[i]->n_unknown_fields = h->n_unknown[i];
}

/* ---- what the server checks on a decoded request (policy.c) ---- */

static inline int fuzz_name_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > POLICY_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
            return 0;
    }
    return 1;
}

static inline int fuzz_key_ok(const char *s)
{
    if (strlen(s) > POLICY_KEY_MAX)
        return 0;
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 0;
    return 1;
}

static inline int fuzz_rate_ok(const char *s)
{
    size_t digits = 0, frac = 0;
    int dot = 0, nonzero = 0;

    for (const char *p = s; *p; p++) {
        if (*p == '.' && !dot) {
            dot = 1;
        } else if (*p >= '0' && *p <= '9') {
            digits++;
            frac += dot;
            nonzero |= *p != '0';
        } else {
            return 0;
        }
    }
    return digits > 0 && frac <= 12 && nonzero && strtod(s, NULL) <= 1e9;
}

/* Characters of a description, or -1 when it is not well-formed UTF-8
 * (the rule policy.c applies, restated: fuzz_utf8()). */
static inline long fuzz_description_chars(const char *s)
{
    long n = 0;

    if (!fuzz_utf8((const unsigned char *)s, strlen(s)))
        return -1;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        n += (*p & 0xc0) != 0x80;
    return n;
}

static inline void fuzz_check_error(int rc, const struct permitd_error *err)
{
    FUZZ_CHECK(rc == PERMITD_OK || rc == PERMITD_EINVAL);
    if (rc != PERMITD_OK) {
        FUZZ_CHECK(err->code == PERMITD_EINVAL && err->message[0] != '\0');
        FUZZ_CHECK(memchr(err->message, '\0', sizeof(err->message)) != NULL);
    }
}

/* The checks limiter.c runs on one Acquire/Peek item, then the Redis keys
 * it builds from them. */
static inline void fuzz_validate_item(const char *bucket, const char *app, const char *key)
{
    struct permitd_error err = { 0 };
    char rkey[POLICY_REDIS_KEY_MAX];
    int rc;

    bucket = bucket ? bucket : "";
    app = app ? app : "";
    key = key ? key : "";
    rc = policy_check_name("bucket", bucket, &err);
    fuzz_check_error(rc, &err);
    FUZZ_CHECK((rc == PERMITD_OK) == fuzz_name_ok(bucket));
    rc = policy_check_name("app", app, &err);
    fuzz_check_error(rc, &err);
    FUZZ_CHECK((rc == PERMITD_OK) == fuzz_name_ok(app));
    rc = policy_check_key("key", key, &err);
    fuzz_check_error(rc, &err);
    FUZZ_CHECK((rc == PERMITD_OK) == fuzz_key_ok(key));
    if (!fuzz_name_ok(bucket) || !fuzz_key_ok(key))
        return;
    FUZZ_CHECK(policy_slot(bucket) < 16384);
    /* the longest prefix config allows is 127 bytes: no key may be cut */
    static const char long_prefix[128] =
        "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp"
        "ppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp";
    const char *prefixes[] = { "permitd:", "", long_prefix };
    for (size_t i = 0; i < 3; i++) {
        size_t want = strlen(prefixes[i]) + strlen(bucket) + 2;
        size_t n = policy_redis_key(rkey, prefixes[i], bucket, POLICY_KEY_HASH, NULL);
        FUZZ_CHECK(n == strlen(rkey) && n == want + strlen(":policy"));
        n = policy_redis_key(rkey, prefixes[i], bucket, POLICY_KEY_BUCKET, key);
        FUZZ_CHECK(n == strlen(rkey));
        FUZZ_CHECK(n == want + (key[0] ? strlen(":k:") + strlen(key) : strlen(":b")));
    }
}

/* The checks admin.c runs on a policy to be created or updated. */
static inline void fuzz_validate_policy(const Permit__V1__Policy *p)
{
    struct permitd_error err = { 0 };
    const char *name = p->name ? p->name : "", *rate = p->rate ? p->rate : "";
    const char *desc = p->description ? p->description : "";
    const char *mode = p->failure_mode ? p->failure_mode : "";
    const char *algorithm = p->algorithm ? p->algorithm : "", *window = p->window ? p->window : "";
    const char *lease = p->lease_ttl ? p->lease_ttl : "";
    struct policy_limits limits;
    const char **apps = calloc(p->n_apps + 1, sizeof(*apps));
    long chars = fuzz_description_chars(desc);
    int want = 1, rc;

    FUZZ_CHECK(apps != NULL);
    for (size_t i = 0; i < p->n_apps; i++) {
        apps[i] = p->apps[i] ? p->apps[i] : "";
        want &= strcmp(apps[i], "*") == 0 || fuzz_name_ok(apps[i]);
    }
    want &= fuzz_name_ok(name) && p->n_apps > 0;
    want &= chars >= 0 && chars <= POLICY_DESCRIPTION_MAX;
    want &= strcmp(mode, "open") == 0 || strcmp(mode, "closed") == 0;
    rc = policy_check_fields(name, apps, p->n_apps, desc, mode, &err);
    fuzz_check_error(rc, &err);
    FUZZ_CHECK((rc == PERMITD_OK) == want);
    /* The limits: exactly predicted for a token bucket given as such; any
     * answer of the others must be a well-formed one. */
    rc = policy_check_limits(algorithm, (long long)p->max_permits, rate, window, lease, &limits,
                             &err);
    fuzz_check_error(rc, &err);
    if (algorithm[0] == '\0' && window[0] == '\0' && lease[0] == '\0')
        FUZZ_CHECK((rc == PERMITD_OK) ==
                   (p->max_permits >= 1 && p->max_permits <= POLICY_MAX_PERMITS_MAX &&
                    fuzz_rate_ok(rate)));
    rc = policy_check_rate("rate", rate, &err);
    fuzz_check_error(rc, &err);
    FUZZ_CHECK((rc == PERMITD_OK) == fuzz_rate_ok(rate));
    free(apps);
}

/* Runs the server's validation of a decoded message, where it has one. */
static inline void fuzz_validate(const ProtobufCMessage *msg)
{
    const ProtobufCMessageDescriptor *d = msg->descriptor;

    if (d == &permit__v1__acquire_request__descriptor) {
        const Permit__V1__AcquireRequest *r = (const void *)msg;
        fuzz_validate_item(r->bucket, r->app, r->key);
    } else if (d == &permit__v1__peek_request__descriptor) {
        const Permit__V1__PeekRequest *r = (const void *)msg;
        fuzz_validate_item(r->bucket, r->app, r->key);
    } else if (d == &permit__v1__acquire_batch_request__descriptor) {
        const Permit__V1__AcquireBatchRequest *r = (const void *)msg;
        for (size_t i = 0; i < r->n_requests; i++)
            if (r->requests[i] != NULL)
                fuzz_validate_item(r->requests[i]->bucket, r->requests[i]->app,
                                   r->requests[i]->key);
    } else if (d == &permit__v1__create_policy_request__descriptor) {
        const Permit__V1__CreatePolicyRequest *r = (const void *)msg;
        if (r->policy != NULL)
            fuzz_validate_policy(r->policy);
    } else if (d == &permit__v1__update_policy_request__descriptor) {
        const Permit__V1__UpdatePolicyRequest *r = (const void *)msg;
        if (r->policy != NULL)
            fuzz_validate_policy(r->policy);
    } else if (d == &permit__v1__get_bucket_request__descriptor) {
        const Permit__V1__GetBucketRequest *r = (const void *)msg;
        fuzz_validate_item(r->name, "app", r->key);
    } else if (d == &permit__v1__reset_bucket_request__descriptor) {
        const Permit__V1__ResetBucketRequest *r = (const void *)msg;
        fuzz_validate_item(r->name, "app", r->key);
    }
}

#endif
