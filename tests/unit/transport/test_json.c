/*
 * test_json.c - the proto3 JSON mapping of server/transport/json.c.
 *
 * Runs against the real API messages (permit.v1) and against
 * tests/unit/proto/jsontest.proto, which has a field of every kind the
 * mapping treats differently, plus jsontest2.proto for proto2 has_ flags.
 * Every decoded message is freed with protobuf_c_message_free_unpacked(),
 * as the server does, so ASan/LeakSanitizer check the ownership contract,
 * failed decodes included.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/json.h"
#include "permit/v1/ratelimit.pb-c.h"
#include "jsontest.pb-c.h"
#include "jsontest2.pb-c.h"
#include "test.h"

#define REQ (&permit__v1__acquire_request__descriptor)
#define RESP (&permit__v1__acquire_response__descriptor)
#define ALL (&permit__test__all_types__descriptor)
#define LEGACY (&permit__test__legacy__descriptor)

/* Decodes text; NULL when it fails (the failure is then printed). */
static void *decode(const ProtobufCMessageDescriptor *desc, const char *text,
                    int flags)
{
    struct permitd_error err = { 0 };
    ProtobufCMessage *msg = NULL;

    if (json_decode(desc, text, strlen(text), flags, NULL, &msg, &err) != PERMITD_OK) {
        fprintf(stderr, "decode %s: %s\n", text, err.message);
        return NULL;
    }
    return msg;
}

/* The error json_decode() gives for text, or a marker that says what went
 * wrong instead: it decoded, the code is not PERMITD_EINVAL, or *out was
 * not left NULL. Valid until the next call. */
static const char *error_of(const ProtobufCMessageDescriptor *desc,
                            const char *text, int flags)
{
    static struct permitd_error err;
    ProtobufCMessage *msg = (ProtobufCMessage *)&err;   /* must become NULL */
    int rc;

    memset(&err, 0, sizeof(err));
    rc = json_decode(desc, text, strlen(text), flags, NULL, &msg, &err);
    if (rc == PERMITD_OK) {
        protobuf_c_message_free_unpacked(msg, NULL);
        return "(decoded)";
    }
    if (rc != PERMITD_EINVAL || err.code != PERMITD_EINVAL)
        return "(not PERMITD_EINVAL)";
    if (msg != NULL)
        return "(*out not NULL)";
    return err.message;
}

/* json_encode() of msg, checked against its reported length; valid until
 * the next call. encoded(NULL) frees the last result. */
static const char *encoded(const void *msg)
{
    static char *last;
    size_t len = 0;

    free(last);
    last = NULL;
    if (msg == NULL)
        return NULL;
    last = json_encode(msg, NULL, &len);
    if (last != NULL && strlen(last) != len)
        return "(wrong length)";
    return last;
}

/* Whether text decodes and encodes back to exactly want. */
static int reencodes(const ProtobufCMessageDescriptor *desc, const char *text,
                     const char *want)
{
    ProtobufCMessage *msg = decode(desc, text, 0);
    const char *got;
    int ok;

    if (msg == NULL)
        return 0;
    got = encoded(msg);
    ok = got != NULL && strcmp(got, want) == 0;
    if (!ok)
        fprintf(stderr, "want %s\n got %s\n", want, got ? got : "(null)");
    protobuf_c_message_free_unpacked(msg, NULL);
    return ok;
}

static void test_json_acquire_request_decodes(void)
{
    Permit__V1__AcquireRequest *req = decode(REQ,
        "{\"bucket\":\"api\",\"app\":\"web\",\"key\":\"user-1\",\"permits\":\"3\"}", 0);

    CHECK(req != NULL);
    if (req == NULL)
        return;
    CHECK_STR(req->bucket, "api");
    CHECK_STR(req->app, "web");
    CHECK_STR(req->key, "user-1");
    CHECK_INT(req->permits, 3);
    protobuf_c_message_free_unpacked(&req->base, NULL);

    req = decode(REQ, "{}", 0);
    CHECK(req != NULL);
    if (req == NULL)
        return;
    CHECK_STR(req->bucket, "");
    CHECK_INT(req->permits, 0);
    protobuf_c_message_free_unpacked(&req->base, NULL);
}

static void test_json_original_names(void)
{
    static const char *const texts[] = {
        "{\"retry_after_ms\":\"5\",\"reset_after_ms\":7}",
        "{\"retryAfterMs\":\"5\",\"resetAfterMs\":7}",
        "{\"retry_after_ms\":5,\"resetAfterMs\":\"7\"}",
    };

    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        Permit__V1__AcquireResponse *resp = decode(RESP, texts[i], 0);

        CHECK(resp != NULL);
        if (resp == NULL)
            continue;
        CHECK_INT(resp->retry_after_ms, 5);
        CHECK_INT(resp->reset_after_ms, 7);
        protobuf_c_message_free_unpacked(&resp->base, NULL);
    }
    /* a JSON name is matched exactly, not case-insensitively */
    CHECK_CONTAINS(error_of(RESP, "{\"RetryAfterMs\":1}", 0),
                   "unknown field \"RetryAfterMs\"");
}

static void test_json_int64_string_and_number(void)
{
    static const struct { const char *text; int64_t want; } cases[] = {
        { "{\"permits\":5}", 5 },
        { "{\"permits\":\"5\"}", 5 },
        { "{\"permits\":-9223372036854775808}", INT64_MIN },
        { "{\"permits\":\"-9223372036854775808\"}", INT64_MIN },
        { "{\"permits\":9223372036854775807}", INT64_MAX },
        { "{\"permits\":\"9223372036854775807\"}", INT64_MAX },
        { "{\"permits\":1e3}", 1000 },
        { "{\"permits\":2.0}", 2 },
        { "{\"permits\":\"-0\"}", 0 },
        { "{\"permits\":\"007\"}", 7 },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        Permit__V1__AcquireRequest *req = decode(REQ, cases[i].text, 0);

        CHECK(req != NULL);
        if (req == NULL)
            continue;
        CHECK_INT(req->permits, cases[i].want);
        protobuf_c_message_free_unpacked(&req->base, NULL);
    }
}

static void test_json_int64_rejected(void)
{
    CHECK_STR(error_of(REQ, "{\"permits\":\"abc\"}", 0),
              "field \"permits\": \"abc\" is not a 64-bit integer");
    CHECK_STR(error_of(REQ, "{\"permits\":1.5}", 0),
              "field \"permits\": 1.5 is not a 64-bit integer");
    CHECK_CONTAINS(error_of(REQ, "{\"permits\":\"1.5\"}", 0),
                   "field \"permits\": \"1.5\"");
    CHECK_CONTAINS(error_of(REQ, "{\"permits\":\"9223372036854775808\"}", 0),
                   "field \"permits\": \"9223372036854775808\" is not");
    CHECK_CONTAINS(error_of(REQ, "{\"permits\":\"-9223372036854775809\"}", 0),
                   "field \"permits\"");
    CHECK_CONTAINS(error_of(REQ, "{\"permits\":1e19}", 0), "field \"permits\"");
    CHECK_CONTAINS(error_of(REQ, "{\"permits\":true}", 0),
                   "field \"permits\": true is not");
    CHECK_CONTAINS(error_of(REQ, "{\"permits\":\"\"}", 0), "field \"permits\"");
    CHECK_CONTAINS(error_of(REQ, "{\"permits\":\" 5\"}", 0), "field \"permits\"");
    CHECK_CONTAINS(error_of(REQ, "{\"permits\":\"+5\"}", 0), "field \"permits\"");
    CHECK_CONTAINS(error_of(REQ, "{\"permits\":\"0x10\"}", 0), "field \"permits\"");
    CHECK_CONTAINS(error_of(REQ, "{\"permits\":\"5 \"}", 0), "field \"permits\"");
    CHECK_CONTAINS(error_of(REQ, "{\"permits\":[]}", 0),
                   "field \"permits\": [] is not");
    CHECK_CONTAINS(error_of(REQ, "{\"permits\":{}}", 0),
                   "field \"permits\": {} is not");
    /* Past int64 as a bare number, jansson itself refuses the text. */
    CHECK_CONTAINS(error_of(REQ, "{\"permits\":9223372036854775808}", 0),
                   "invalid JSON");
    /* A long bad value is cut short in the message. */
    CHECK_CONTAINS(error_of(REQ, "{\"permits\":\"1234567890123456789012345678901"
                                 "23456789012345678901234567890123456789\"}", 0),
                   "...");
}

static void test_json_response_encodes(void)
{
    Permit__V1__AcquireResponse resp = PERMIT__V1__ACQUIRE_RESPONSE__INIT;

    CHECK_STR(encoded(&resp), "{}");
    resp.allowed = 1;
    resp.remaining = 5;
    resp.limit = 10;
    resp.reset_after_ms = 1500;
    CHECK_STR(encoded(&resp),
              "{\"allowed\":true,\"remaining\":\"5\",\"limit\":\"10\","
              "\"resetAfterMs\":\"1500\"}");
    resp.allowed = 0;
    resp.remaining = -1;
    resp.retry_after_ms = INT64_MAX;
    CHECK_STR(encoded(&resp),
              "{\"remaining\":\"-1\",\"limit\":\"10\","
              "\"retryAfterMs\":\"9223372036854775807\",\"resetAfterMs\":\"1500\"}");
}

static void test_json_request_round_trip(void)
{
    CHECK(reencodes(REQ, "{\"key\":\"k\",\"permits\":2,\"app\":\"a\",\"bucket\":\"b\"}",
                    "{\"bucket\":\"b\",\"app\":\"a\",\"key\":\"k\",\"permits\":\"2\"}"));
    CHECK(reencodes(REQ, "{\"bucket\":\"\",\"permits\":\"0\"}", "{}"));
}

static void test_json_unknown_fields(void)
{
    Permit__V1__AcquireRequest *req;
    Permit__Test__AllTypes *all;

    CHECK_STR(error_of(REQ, "{\"bucket\":\"b\",\"foo\":1}", 0),
              "unknown field \"foo\"");
    CHECK_STR(error_of(ALL, "{\"inner\":{\"bogus\":true}}", 0),
              "unknown field \"inner.bogus\"");
    req = decode(REQ, "{\"bucket\":\"b\",\"foo\":{\"x\":[1,{\"y\":null}]},"
                      "\"bar\":null}", JSON_IGNORE_UNKNOWN);
    CHECK(req != NULL);
    if (req != NULL) {
        CHECK_STR(req->bucket, "b");
        protobuf_c_message_free_unpacked(&req->base, NULL);
    }
    all = decode(ALL, "{\"inner\":{\"bogus\":true,\"name\":\"n\"}}",
                 JSON_IGNORE_UNKNOWN);
    CHECK(all != NULL);
    if (all != NULL) {
        CHECK(all->inner != NULL);
        if (all->inner != NULL)
            CHECK_STR(all->inner->name, "n");
        protobuf_c_message_free_unpacked(&all->base, NULL);
    }
}

static void test_json_null_means_default(void)
{
    Permit__V1__AcquireRequest *req;
    Permit__Test__AllTypes *all;

    req = decode(REQ, "{\"bucket\":null,\"app\":\"a\",\"permits\":null}", 0);
    CHECK(req != NULL);
    if (req != NULL) {
        CHECK_STR(req->bucket, "");
        CHECK_STR(req->app, "a");
        CHECK_INT(req->permits, 0);
        protobuf_c_message_free_unpacked(&req->base, NULL);
    }
    all = decode(ALL, "{\"inner\":null,\"rInt64\":null,\"counts\":null,"
                      "\"color\":null,\"fBytes\":null,\"fDouble\":null,"
                      "\"choiceName\":null}", 0);
    CHECK(all != NULL);
    if (all != NULL) {
        CHECK(all->inner == NULL);
        CHECK_INT(all->n_r_int64, 0);
        CHECK_INT(all->n_counts, 0);
        CHECK_INT(all->color, 0);
        CHECK_INT(all->f_bytes.len, 0);
        CHECK_INT(all->choice_case, PERMIT__TEST__ALL_TYPES__CHOICE__NOT_SET);
        CHECK_STR(encoded(all), "{}");
        protobuf_c_message_free_unpacked(&all->base, NULL);
    }
    /* ...but not as an element of a list or a map value */
    CHECK_STR(error_of(ALL, "{\"rInt64\":[1,null]}", 0),
              "field \"rInt64[1]\": null is not allowed in a list");
    CHECK_STR(error_of(ALL, "{\"counts\":{\"a\":null}}", 0),
              "field \"counts[a]\": null is not allowed as a map value");
}

static void test_json_duplicate_fields(void)
{
    CHECK_CONTAINS(error_of(REQ, "{\"app\":\"a\",\"app\":\"b\"}", 0),
                   "duplicate object key");
    CHECK_CONTAINS(error_of(RESP, "{\"retryAfterMs\":1,\"retry_after_ms\":2}", 0),
                   "field \"retry_after_ms\" is given twice");
    CHECK_CONTAINS(error_of(ALL, "{\"inner\":{\"name\":\"a\",\"name\":\"b\"}}", 0),
                   "duplicate object key");
    CHECK_CONTAINS(error_of(ALL, "{\"fInt32\":null,\"f_int32\":1}", 0),
                   "field \"f_int32\" is given twice");
}

static void test_json_invalid_json(void)
{
    static const char *const texts[] = {
        "", "{", "{\"app\":}", "{} x", "{'app':1}", "{\"app\":\"a\",}",
        "{\"app\":\"\xff\"}", "{\"app\":\"\\u0000\"}", "{\"app\":\"\\ud800\"}",
        "{\"permits\":NaN}", "{\"permits\":1e400}",
    };

    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
        CHECK_CONTAINS(error_of(REQ, texts[i], 0), "invalid JSON");
    CHECK_CONTAINS(error_of(REQ, "{\n  \"app\": ]", 0), "line 2");
}

static void test_json_top_level_must_be_object(void)
{
    static const char *const texts[] = {
        "[]", "[{}]", "1", "\"x\"", "null", "true",
    };

    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
        CHECK_STR(error_of(REQ, texts[i], 0), "the message must be a JSON object");
}

static void test_json_text_not_nul_terminated(void)
{
    static const char buf[] = "{\"app\":\"web\"}{\"app\":\"x\"}";
    struct permitd_error err = { 0 };
    ProtobufCMessage *msg = NULL;
    Permit__V1__AcquireRequest *req;

    CHECK_INT(json_decode(REQ, buf, 13, 0, NULL, &msg, &err), PERMITD_OK);
    req = (Permit__V1__AcquireRequest *)msg;
    if (req != NULL) {
        CHECK_STR(req->app, "web");
        protobuf_c_message_free_unpacked(msg, NULL);
    }
    CHECK_INT(json_decode(REQ, buf, 12, 0, NULL, &msg, &err), PERMITD_EINVAL);
    CHECK(msg == NULL);
    CHECK_INT(json_decode(REQ, NULL, 0, 0, NULL, &msg, &err), PERMITD_EINVAL);
    CHECK(msg == NULL);
}

/* Every kind of field, in canonical output form (field-number order). */
static const char all_canonical[] =
    "{\"fInt32\":-2147483648,\"fSint32\":-5,\"fSfixed32\":2147483647,"
    "\"fInt64\":\"-9223372036854775808\",\"fSint64\":\"-7\","
    "\"fSfixed64\":\"9223372036854775807\",\"fUint32\":4294967295,"
    "\"fFixed32\":7,\"fUint64\":\"18446744073709551615\","
    "\"fFixed64\":\"18446744073709551615\",\"fFloat\":0.1,\"fDouble\":2.5,"
    "\"fBool\":true,\"fString\":\"h\xc3\xa9llo \\\"q\\\"\",\"fBytes\":\"AP8=\","
    "\"color\":\"COLOR_RED\",\"inner\":{\"name\":\"in\",\"count\":3},"
    "\"rInt64\":[\"1\",\"-2\"],\"rString\":[\"a\",\"\"],"
    "\"rInner\":[{\"name\":\"x\"},{}],"
    "\"rColor\":[\"COLOR_GREEN\",\"COLOR_UNSPECIFIED\",7],"
    "\"rBytes\":[\"\",\"aGk=\"],\"rDouble\":[1.5,\"NaN\",\"-Infinity\"],"
    "\"rBool\":[true,false],\"counts\":{\"a\":\"1\",\"b\":\"-2\"},"
    "\"byId\":{\"-1\":{\"name\":\"neg\"},\"7\":{}},"
    "\"byFlag\":{\"true\":\"yes\",\"false\":\"no\"},"
    "\"choiceId\":\"0\",\"colors\":{\"c\":\"COLOR_GREEN\"}}";

/* The same message in all the other accepted spellings: proto names,
 * numbers as strings and strings as numbers, enums by number, unpadded
 * base64, keys in another order. */
static const char all_variant[] =
    "{\"colors\":{\"c\":2},\"f_int32\":\"-2147483648\",\"fSint32\":-5.0,"
    "\"f_sfixed32\":2147483647,\"f_int64\":-9223372036854775808,"
    "\"f_sint64\":\"-7\",\"f_sfixed64\":\"9223372036854775807\","
    "\"f_uint32\":\"4294967295\",\"f_fixed32\":7e0,"
    "\"f_uint64\":\"18446744073709551615\",\"f_fixed64\":\"18446744073709551615\","
    "\"f_float\":\"0.1\",\"f_double\":\"2.5\",\"f_bool\":true,"
    "\"f_string\":\"h\\u00e9llo \\\"q\\\"\",\"f_bytes\":\"AP8\",\"color\":1,"
    "\"inner\":{\"count\":\"3\",\"name\":\"in\"},\"r_int64\":[1,\"-2\"],"
    "\"r_string\":[\"a\",\"\"],\"r_inner\":[{\"name\":\"x\"},{\"count\":0}],"
    "\"r_color\":[2,\"COLOR_UNSPECIFIED\",7],\"r_bytes\":[\"\",\"aGk\"],"
    "\"r_double\":[\"1.5\",\"NaN\",\"-Infinity\"],\"r_bool\":[true,false],"
    "\"counts\":{\"a\":1,\"b\":\"-2\"},"
    "\"by_id\":{\"-1\":{\"name\":\"neg\"},\"7\":{}},"
    "\"by_flag\":{\"true\":\"yes\",\"false\":\"no\"},\"choice_id\":0}";

static void test_json_all_types_decode(void)
{
    Permit__Test__AllTypes *m = decode(ALL, all_canonical, 0);

    CHECK(m != NULL);
    if (m == NULL)
        return;
    CHECK_INT(m->f_int32, INT32_MIN);
    CHECK_INT(m->f_sint32, -5);
    CHECK_INT(m->f_sfixed32, INT32_MAX);
    CHECK(m->f_int64 == INT64_MIN);
    CHECK_INT(m->f_sint64, -7);
    CHECK(m->f_sfixed64 == INT64_MAX);
    CHECK(m->f_uint32 == UINT32_MAX);
    CHECK_INT(m->f_fixed32, 7);
    CHECK(m->f_uint64 == UINT64_MAX);
    CHECK(m->f_fixed64 == UINT64_MAX);
    CHECK(m->f_float == 0.1f);
    CHECK(m->f_double == 2.5);
    CHECK_INT(m->f_bool, 1);
    CHECK_STR(m->f_string, "h\xc3\xa9llo \"q\"");
    CHECK_INT(m->f_bytes.len, 2);
    CHECK(m->f_bytes.len == 2 && m->f_bytes.data[0] == 0x00
          && m->f_bytes.data[1] == 0xff);
    CHECK_INT(m->color, PERMIT__TEST__COLOR__COLOR_RED);
    CHECK(m->inner != NULL && strcmp(m->inner->name, "in") == 0
          && m->inner->count == 3);
    CHECK_INT(m->n_r_int64, 2);
    CHECK(m->n_r_int64 == 2 && m->r_int64[0] == 1 && m->r_int64[1] == -2);
    CHECK_INT(m->n_r_string, 2);
    CHECK(m->n_r_string == 2 && strcmp(m->r_string[1], "") == 0);
    CHECK_INT(m->n_r_inner, 2);
    CHECK(m->n_r_inner == 2 && m->r_inner[1] != NULL
          && strcmp(m->r_inner[1]->name, "") == 0);
    CHECK_INT(m->n_r_color, 3);
    CHECK(m->n_r_color == 3 && m->r_color[0] == PERMIT__TEST__COLOR__COLOR_GREEN
          && (int)m->r_color[2] == 7);
    CHECK_INT(m->n_r_bytes, 2);
    CHECK(m->n_r_bytes == 2 && m->r_bytes[0].len == 0 && m->r_bytes[1].len == 2
          && memcmp(m->r_bytes[1].data, "hi", 2) == 0);
    CHECK_INT(m->n_r_double, 3);
    CHECK(m->n_r_double == 3 && m->r_double[0] == 1.5 && isnan(m->r_double[1])
          && isinf(m->r_double[2]) && m->r_double[2] < 0);
    CHECK_INT(m->n_r_bool, 2);
    CHECK_INT(m->n_counts, 2);
    CHECK(m->n_counts == 2 && strcmp(m->counts[0]->key, "a") == 0
          && m->counts[0]->value == 1 && strcmp(m->counts[1]->key, "b") == 0
          && m->counts[1]->value == -2);
    CHECK_INT(m->n_by_id, 2);
    CHECK(m->n_by_id == 2 && m->by_id[0]->key == -1 && m->by_id[0]->value != NULL
          && strcmp(m->by_id[0]->value->name, "neg") == 0 && m->by_id[1]->key == 7);
    CHECK_INT(m->n_by_flag, 2);
    CHECK(m->n_by_flag == 2 && m->by_flag[0]->key == 1
          && strcmp(m->by_flag[0]->value, "yes") == 0 && m->by_flag[1]->key == 0);
    CHECK_INT(m->choice_case, PERMIT__TEST__ALL_TYPES__CHOICE_CHOICE_ID);
    CHECK_INT(m->choice_id, 0);
    CHECK_INT(m->n_colors, 1);
    CHECK(m->n_colors == 1 && m->colors[0]->value == PERMIT__TEST__COLOR__COLOR_GREEN);
    protobuf_c_message_free_unpacked(&m->base, NULL);
}

static void test_json_all_types_round_trip(void)
{
    CHECK(reencodes(ALL, all_canonical, all_canonical));
    CHECK(reencodes(ALL, all_variant, all_canonical));
}

/* The decoded struct is what protobuf-c itself would build: it packs, and
 * the unpacked copy encodes to the same JSON. */
static void test_json_decoded_message_packs(void)
{
    ProtobufCMessage *m = decode(ALL, all_variant, 0), *back;
    uint8_t *buf;
    size_t len;

    CHECK(m != NULL);
    if (m == NULL)
        return;
    CHECK(protobuf_c_message_check(m));
    len = protobuf_c_message_get_packed_size(m);
    buf = malloc(len + 1);
    CHECK(buf != NULL);
    if (buf != NULL) {
        CHECK_INT(protobuf_c_message_pack(m, buf), len);
        back = protobuf_c_message_unpack(ALL, NULL, len, buf);
        CHECK(back != NULL);
        if (back != NULL) {
            CHECK_STR(encoded(back), all_canonical);
            protobuf_c_message_free_unpacked(back, NULL);
        }
        free(buf);
    }
    protobuf_c_message_free_unpacked(m, NULL);
}

static void test_json_int_limits(void)
{
    Permit__Test__AllTypes *m;

    CHECK_STR(error_of(ALL, "{\"fInt32\":2147483648}", 0),
              "field \"fInt32\": 2147483648 is not a 32-bit integer");
    CHECK_CONTAINS(error_of(ALL, "{\"fInt32\":-2147483649}", 0), "field \"fInt32\"");
    CHECK_CONTAINS(error_of(ALL, "{\"fSint32\":\"2147483648\"}", 0), "field \"fSint32\"");
    CHECK_CONTAINS(error_of(ALL, "{\"fInt32\":1.5}", 0), "field \"fInt32\": 1.5");
    CHECK_STR(error_of(ALL, "{\"fUint32\":-1}", 0),
              "field \"fUint32\": -1 is not an unsigned 32-bit integer");
    CHECK_CONTAINS(error_of(ALL, "{\"fUint32\":4294967296}", 0), "field \"fUint32\"");
    CHECK_CONTAINS(error_of(ALL, "{\"fFixed32\":\"-0\"}", 0), "field \"fFixed32\"");
    CHECK_CONTAINS(error_of(ALL, "{\"fUint64\":\"18446744073709551616\"}", 0),
                   "field \"fUint64\": \"18446744073709551616\" is not an unsigned 64-bit integer");
    CHECK_CONTAINS(error_of(ALL, "{\"fUint64\":\"-1\"}", 0), "field \"fUint64\"");
    CHECK_CONTAINS(error_of(ALL, "{\"fFixed64\":-1}", 0), "field \"fFixed64\"");
    CHECK_CONTAINS(error_of(ALL, "{\"fFixed64\":1.8446744073709552e19}", 0),
                   "field \"fFixed64\"");
    CHECK_CONTAINS(error_of(ALL, "{\"fSint64\":\"-9223372036854775809\"}", 0),
                   "field \"fSint64\"");
    CHECK_CONTAINS(error_of(ALL, "{\"fSfixed64\":9.3e18}", 0), "field \"fSfixed64\"");
    /* Past int64, a bare number is refused by jansson: use a string. */
    CHECK_CONTAINS(error_of(ALL, "{\"fUint64\":18446744073709551615}", 0),
                   "invalid JSON");

    m = decode(ALL, "{\"fInt32\":1e3,\"fUint32\":4294967295.0,"
                    "\"fUint64\":9223372036854775807,\"fFixed64\":1e19,"
                    "\"fSfixed32\":\"-2147483648\",\"fSint64\":-4.0}", 0);
    CHECK(m != NULL);
    if (m == NULL)
        return;
    CHECK_INT(m->f_int32, 1000);
    CHECK(m->f_uint32 == UINT32_MAX);
    CHECK(m->f_uint64 == (uint64_t)INT64_MAX);
    CHECK(m->f_fixed64 == 10000000000000000000u);
    CHECK_INT(m->f_sfixed32, INT32_MIN);
    CHECK_INT(m->f_sint64, -4);
    protobuf_c_message_free_unpacked(&m->base, NULL);
}

static void test_json_floats_decode(void)
{
    Permit__Test__AllTypes *m;

    m = decode(ALL, "{\"rDouble\":[\"NaN\",\"Infinity\",\"-Infinity\",\"1.5\","
                    "1e3,\"-2.5E-3\",3,\"1e308\"],\"fFloat\":\"Infinity\"}", 0);
    CHECK(m != NULL);
    if (m == NULL)
        return;
    CHECK_INT(m->n_r_double, 8);
    if (m->n_r_double == 8) {
        CHECK(isnan(m->r_double[0]));
        CHECK(isinf(m->r_double[1]) && m->r_double[1] > 0);
        CHECK(isinf(m->r_double[2]) && m->r_double[2] < 0);
        CHECK(m->r_double[3] == 1.5);
        CHECK(m->r_double[4] == 1000);
        CHECK(m->r_double[5] == -2.5e-3);
        CHECK(m->r_double[6] == 3);
        CHECK(m->r_double[7] == 1e308);
    }
    CHECK(isinf(m->f_float));
    protobuf_c_message_free_unpacked(&m->base, NULL);

    CHECK_STR(error_of(ALL, "{\"fDouble\":true}", 0),
              "field \"fDouble\": true is not a number");
    CHECK_CONTAINS(error_of(ALL, "{\"fDouble\":\"nan\"}", 0), "field \"fDouble\"");
    CHECK_CONTAINS(error_of(ALL, "{\"fDouble\":\"inf\"}", 0), "field \"fDouble\"");
    CHECK_CONTAINS(error_of(ALL, "{\"fDouble\":\"0x10\"}", 0), "field \"fDouble\"");
    CHECK_CONTAINS(error_of(ALL, "{\"fDouble\":\" 1\"}", 0), "field \"fDouble\"");
    CHECK_CONTAINS(error_of(ALL, "{\"fDouble\":\"1.\"}", 0), "field \"fDouble\"");
    CHECK_CONTAINS(error_of(ALL, "{\"fDouble\":\"1e999\"}", 0), "field \"fDouble\"");
    CHECK_STR(error_of(ALL, "{\"fFloat\":3.5e38}", 0),
              "field \"fFloat\": 3.5e38 is out of range for a float");
    CHECK_CONTAINS(error_of(ALL, "{\"fFloat\":\"-1e39\"}", 0), "field \"fFloat\"");
}

static void test_json_floats_encode(void)
{
    static const struct { double x; const char *want; } doubles[] = {
        { 0.1, "{\"fDouble\":0.1}" },
        { 2.5, "{\"fDouble\":2.5}" },
        { 100, "{\"fDouble\":100.0}" },
        { -123456789, "{\"fDouble\":-123456789.0}" },
        { 0.1 + 0.2, "{\"fDouble\":0.30000000000000004}" },
        { 1e300, "{\"fDouble\":1e300}" },
        { 5e-324, "{\"fDouble\":5e-324}" },
        { 1.0 / 3, "{\"fDouble\":0.3333333333333333}" },
    };
    Permit__Test__AllTypes m = PERMIT__TEST__ALL_TYPES__INIT;
    double r[3] = { NAN, INFINITY, -INFINITY };

    for (size_t i = 0; i < sizeof(doubles) / sizeof(doubles[0]); i++) {
        m.f_double = doubles[i].x;
        CHECK_STR(encoded(&m), doubles[i].want);
    }
    m.f_double = 0;
    m.f_float = 0.1f;
    CHECK_STR(encoded(&m), "{\"fFloat\":0.1}");
    m.f_float = 3.4028235e38f;
    CHECK_STR(encoded(&m), "{\"fFloat\":3.4028235e38}");
    m.f_float = NAN;
    CHECK_STR(encoded(&m), "{\"fFloat\":\"NaN\"}");
    m.f_float = 0;
    m.n_r_double = 3;
    m.r_double = r;
    CHECK_STR(encoded(&m), "{\"rDouble\":[\"NaN\",\"Infinity\",\"-Infinity\"]}");
}

/* Whatever a double is, it comes back bit for bit. */
static void test_json_doubles_round_trip_exactly(void)
{
    static const double values[] = {
        0.1, 1.0 / 3, 2.0 / 3, 1e-310, 1.7976931348623157e308, 123456.789,
        -0.5, 9007199254740993.0, 4.35, 1e21, 1e-7, 3.14159265358979,
    };
    Permit__Test__AllTypes m = PERMIT__TEST__ALL_TYPES__INIT;
    Permit__Test__AllTypes *back;
    char *text;
    size_t len;

    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        m.f_double = values[i];
        m.f_float = (float)values[i];
        text = json_encode(&m.base, NULL, &len);
        CHECK(text != NULL);
        if (text == NULL)
            continue;
        back = decode(ALL, text, 0);
        CHECK(back != NULL);
        if (back != NULL) {
            CHECK(back->f_double == m.f_double);
            CHECK(back->f_float == m.f_float);
            protobuf_c_message_free_unpacked(&back->base, NULL);
        }
        free(text);
    }
}

static void test_json_bools(void)
{
    Permit__Test__AllTypes *m = decode(ALL, "{\"fBool\":false,\"rBool\":[true]}", 0);

    CHECK(m != NULL);
    if (m != NULL) {
        CHECK_INT(m->f_bool, 0);
        CHECK(m->n_r_bool == 1 && m->r_bool[0] == 1);
        protobuf_c_message_free_unpacked(&m->base, NULL);
    }
    CHECK_STR(error_of(ALL, "{\"fBool\":\"true\"}", 0),
              "field \"fBool\": \"true\" is not a boolean");
    CHECK_CONTAINS(error_of(ALL, "{\"fBool\":1}", 0), "field \"fBool\": 1");
    CHECK_CONTAINS(error_of(ALL, "{\"rBool\":[true,0]}", 0), "field \"rBool[1]\": 0");
}

static void test_json_strings(void)
{
    Permit__Test__AllTypes *m;

    m = decode(ALL, "{\"fString\":\"\\u00e9\\ud83d\\ude00\\n\\\"/\","
                    "\"rString\":[\"\",\"x\"]}", 0);
    CHECK(m != NULL);
    if (m != NULL) {
        CHECK_STR(m->f_string, "\xc3\xa9\xf0\x9f\x98\x80\n\"/");
        CHECK_STR(encoded(m), "{\"fString\":\"\xc3\xa9\xf0\x9f\x98\x80\\n\\\"/\","
                              "\"rString\":[\"\",\"x\"]}");
        protobuf_c_message_free_unpacked(&m->base, NULL);
    }
    CHECK_STR(error_of(ALL, "{\"fString\":5}", 0),
              "field \"fString\": 5 is not a string");
    CHECK_CONTAINS(error_of(ALL, "{\"rString\":[\"a\",false]}", 0),
                   "field \"rString[1]\": false is not a string");
}

/* A string protobuf-c took from binary input without checking UTF-8 still
 * encodes, its bad bytes shown as U+FFFD. */
static void test_json_encode_repairs_utf8(void)
{
    Permit__V1__AcquireRequest req = PERMIT__V1__ACQUIRE_REQUEST__INIT;
    Permit__Test__AllTypes m = PERMIT__TEST__ALL_TYPES__INIT;
    Permit__Test__AllTypes__CountsEntry entry = PERMIT__TEST__ALL_TYPES__COUNTS_ENTRY__INIT;
    Permit__Test__AllTypes__CountsEntry *entries[1] = { &entry };

    req.bucket = "a\xff" "b\xc3";
    req.app = "\xed\xa0\x80";     /* a UTF-16 surrogate */
    CHECK_STR(encoded(&req), "{\"bucket\":\"a\xef\xbf\xbd" "b\xef\xbf\xbd\","
                             "\"app\":\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"}");
    entry.key = "k\x80";
    entry.value = 1;
    m.n_counts = 1;
    m.counts = entries;
    CHECK_STR(encoded(&m), "{\"counts\":{\"k\xef\xbf\xbd\":\"1\"}}");
}

static void test_json_bytes(void)
{
    static const struct { const char *text; const char *want; size_t len; } ok[] = {
        { "{\"fBytes\":\"aGVsbG8=\"}", "hello", 5 },
        { "{\"fBytes\":\"aGVsbG8\"}", "hello", 5 },
        { "{\"fBytes\":\"aGVsbA==\"}", "hell", 4 },
        { "{\"fBytes\":\"aGVsbA\"}", "hell", 4 },
        { "{\"fBytes\":\"+/8=\"}", "\xfb\xff", 2 },
        { "{\"fBytes\":\"-_8=\"}", "\xfb\xff", 2 },
        { "{\"fBytes\":\"-_8\"}", "\xfb\xff", 2 },
        { "{\"fBytes\":\"\"}", "", 0 },
    };
    static const char *const bad[] = {
        "{\"fBytes\":\"a\"}", "{\"fBytes\":\"aGVsbG8==\"}", "{\"fBytes\":\"aGV=sbG8\"}",
        "{\"fBytes\":\"a*b=\"}", "{\"fBytes\":\"aG k\"}", "{\"fBytes\":\"aGk\\n\"}",
        "{\"fBytes\":\"===\"}", "{\"fBytes\":\"aGs=x\"}",
        "{\"fBytes\":5}", "{\"rBytes\":[\"aGk=\",\"a\"]}",
    };
    Permit__Test__AllTypes *m;
    Permit__Test__AllTypes out = PERMIT__TEST__ALL_TYPES__INIT;

    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        m = decode(ALL, ok[i].text, 0);
        CHECK(m != NULL);
        if (m == NULL)
            continue;
        CHECK_INT(m->f_bytes.len, ok[i].len);
        CHECK(m->f_bytes.len == ok[i].len
              && (ok[i].len == 0 || memcmp(m->f_bytes.data, ok[i].want, ok[i].len) == 0));
        protobuf_c_message_free_unpacked(&m->base, NULL);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK_CONTAINS(error_of(ALL, bad[i], 0), "Bytes");
    CHECK_STR(error_of(ALL, "{\"fBytes\":\"a\"}", 0),
              "field \"fBytes\": \"a\" is not base64");

    out.f_bytes.data = (uint8_t *)"\xfb\xff";
    out.f_bytes.len = 2;
    CHECK_STR(encoded(&out), "{\"fBytes\":\"+/8=\"}");
    out.f_bytes.data = (uint8_t *)"hello";
    out.f_bytes.len = 5;
    CHECK_STR(encoded(&out), "{\"fBytes\":\"aGVsbG8=\"}");
    out.f_bytes.len = 3;
    CHECK_STR(encoded(&out), "{\"fBytes\":\"aGVs\"}");
    out.f_bytes.len = 1;
    CHECK_STR(encoded(&out), "{\"fBytes\":\"aA==\"}");
}

static void test_json_enums(void)
{
    Permit__Test__AllTypes *m;
    Permit__Test__AllTypes out = PERMIT__TEST__ALL_TYPES__INIT;

    m = decode(ALL, "{\"color\":\"COLOR_GREEN\",\"rColor\":[1,\"COLOR_RED\",-3]}", 0);
    CHECK(m != NULL);
    if (m != NULL) {
        CHECK_INT(m->color, PERMIT__TEST__COLOR__COLOR_GREEN);
        CHECK(m->n_r_color == 3 && m->r_color[0] == 1 && m->r_color[1] == 1
              && (int)m->r_color[2] == -3);
        protobuf_c_message_free_unpacked(&m->base, NULL);
    }
    CHECK_STR(error_of(ALL, "{\"color\":\"COLOR_BLUE\"}", 0),
              "field \"color\": \"COLOR_BLUE\" is not a value of enum permit.test.Color");
    CHECK_CONTAINS(error_of(ALL, "{\"color\":\"1\"}", 0), "field \"color\"");
    CHECK_CONTAINS(error_of(ALL, "{\"color\":\"color_red\"}", 0), "field \"color\"");
    CHECK_CONTAINS(error_of(ALL, "{\"color\":1.5}", 0), "field \"color\"");
    CHECK_CONTAINS(error_of(ALL, "{\"color\":2147483648}", 0), "field \"color\"");
    CHECK_CONTAINS(error_of(ALL, "{\"color\":true}", 0), "field \"color\"");
    CHECK_CONTAINS(error_of(ALL, "{\"colors\":{\"a\":\"COLOR_BLUE\"}}", 0),
                   "field \"colors[a]\": \"COLOR_BLUE\"");

    /* Asked to ignore unknown names: the value is dropped, wherever it is. */
    m = decode(ALL, "{\"color\":\"COLOR_BLUE\",\"rColor\":[\"COLOR_RED\",\"COLOR_BLUE\","
                    "\"COLOR_GREEN\"],\"colors\":{\"a\":\"COLOR_BLUE\",\"b\":1},"
                    "\"choiceId\":\"1\"}", JSON_IGNORE_UNKNOWN);
    CHECK(m != NULL);
    if (m != NULL) {
        CHECK_INT(m->color, 0);
        CHECK(m->n_r_color == 2 && m->r_color[0] == 1 && m->r_color[1] == 2);
        CHECK(m->n_colors == 1 && strcmp(m->colors[0]->key, "b") == 0
              && m->colors[0]->value == 1);
        protobuf_c_message_free_unpacked(&m->base, NULL);
    }

    out.color = 7;
    CHECK_STR(encoded(&out), "{\"color\":7}");
    out.color = PERMIT__TEST__COLOR__COLOR_GREEN;
    CHECK_STR(encoded(&out), "{\"color\":\"COLOR_GREEN\"}");
}

static void test_json_nested_errors_name_the_path(void)
{
    CHECK_STR(error_of(ALL, "{\"inner\":{\"count\":\"x\"}}", 0),
              "field \"inner.count\": \"x\" is not a 32-bit integer");
    CHECK_STR(error_of(ALL, "{\"rInner\":[{},{\"name\":5}]}", 0),
              "field \"rInner[1].name\": 5 is not a string");
    CHECK_CONTAINS(error_of(ALL, "{\"byId\":{\"7\":{\"count\":true}}}", 0),
                   "field \"byId[7].count\": true");
    CHECK_STR(error_of(ALL, "{\"byId\":{\"x\":{}}}", 0),
              "field \"byId[x]\": \"x\" is not a 32-bit integer");
    CHECK_STR(error_of(ALL, "{\"byFlag\":{\"yes\":\"a\"}}", 0),
              "field \"byFlag[yes]\": \"yes\" is not a boolean");
    CHECK_STR(error_of(ALL, "{\"inner\":5}", 0), "field \"inner\": 5 is not an object");
    CHECK_STR(error_of(ALL, "{\"rInt64\":5}", 0), "field \"rInt64\": 5 is not an array");
    CHECK_STR(error_of(ALL, "{\"counts\":[]}", 0), "field \"counts\": [] is not an object");
    CHECK_STR(error_of(ALL, "{\"rInner\":[{\"inner\":1}]}", 0),
              "unknown field \"rInner[0].inner\"");
}

/* Failures deep inside allocated state: LeakSanitizer checks that all of
 * it is freed, and error_of() that *out stays NULL. */
static void test_json_failed_decode_frees_everything(void)
{
    static const char *const texts[] = {
        "{\"fString\":\"x\",\"fBytes\":\"aGk=\",\"inner\":{\"name\":\"n\"},"
        "\"rString\":[\"a\",\"b\"],\"rInner\":[{\"name\":\"a\"}],\"counts\":{\"a\":1},"
        "\"byId\":{\"1\":{\"name\":\"z\"}},\"choiceInner\":{\"name\":\"c\"},"
        "\"rBytes\":[\"aGk=\"],\"byFlag\":{\"true\":\"t\"},\"fBool\":\"bad\"}",
        "{\"choiceInner\":{\"name\":\"c\",\"count\":\"x\"}}",
        "{\"choiceName\":\"n\",\"choiceInner\":{\"name\":\"c\"}}",
        "{\"rInner\":[{\"name\":\"a\"},{\"name\":\"b\",\"count\":[]}]}",
        "{\"rString\":[\"a\",\"b\",3]}",
        "{\"byId\":{\"1\":{\"name\":\"z\"},\"2\":{\"name\":\"y\",\"count\":{}}}}",
        "{\"byFlag\":{\"true\":\"t\",\"false\":7}}",
        "{\"counts\":{\"a\":1,\"b\":\"x\"}}",
        "{\"rBytes\":[\"aGk=\",\"*\"]}",
        "{\"inner\":{\"name\":\"n\",\"count\":1.5}}",
        "{\"inner\":{\"name\":\"n\"},\"nope\":1}",
    };

    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
        CHECK_CONTAINS(error_of(ALL, texts[i], 0), "field \"");
}

/* An allocator that keeps a list of the blocks it handed out: a block that
 * did not come from it, or comes back twice, is a failure; so is one left. */
struct tracked {
    void *live[256];
    size_t nlive, allocs, strays;
};

static void *tracked_alloc(void *ud, size_t n)
{
    struct tracked *t = ud;
    void *p = malloc(n);

    if (p != NULL && t->nlive < sizeof(t->live) / sizeof(t->live[0])) {
        t->live[t->nlive++] = p;
        t->allocs++;
    }
    return p;
}

static void tracked_free(void *ud, void *p)
{
    struct tracked *t = ud;

    if (p == NULL)
        return;
    for (size_t i = 0; i < t->nlive; i++) {
        if (t->live[i] == p) {
            t->live[i] = t->live[--t->nlive];
            free(p);
            return;
        }
    }
    t->strays++;
}

/* connect.c decodes into a per-thread arena: every block of a message,
 * whether decoding succeeds or fails halfway, comes from the caller's
 * allocator and goes back to it; and json_encode() writes its text with
 * the allocator it is given. */
static void test_json_caller_allocator(void)
{
    static const char *const texts[] = {
        "{\"fString\":\"x\",\"fBytes\":\"aGk=\",\"inner\":{\"name\":\"n\"},"
        "\"rString\":[\"a\",\"b\"],\"rInner\":[{\"name\":\"a\"}],\"counts\":{\"a\":1},"
        "\"byId\":{\"1\":{\"name\":\"z\"}},\"choiceInner\":{\"name\":\"c\"},"
        "\"rBytes\":[\"aGk=\"],\"byFlag\":{\"true\":\"t\"}}",
        "{\"rInner\":[{\"name\":\"a\"},{\"name\":\"b\",\"count\":[]}]}",
        "{\"byId\":{\"1\":{\"name\":\"z\"},\"2\":{\"name\":\"y\",\"count\":{}}}}",
        "{\"rBytes\":[\"aGk=\",\"*\"]}",
        "{\"fBytes\":\"\"}",
    };

    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        struct tracked t = {.nlive = 0};
        ProtobufCAllocator al = {tracked_alloc, tracked_free, &t};
        struct permitd_error err = {0, ""};
        ProtobufCMessage *msg = NULL;
        int rc = json_decode(ALL, texts[i], strlen(texts[i]), 0, &al, &msg, &err);

        CHECK_INT(rc, i == 0 || i == 4 ? PERMITD_OK : PERMITD_EINVAL);
        CHECK(t.allocs > 0);
        if (i == 0) {
            /* struct, 3 strings, bytes, inner, 2 arrays of 2 and 1, ... */
            CHECK(t.allocs >= 15);
            CHECK_INT((int)t.nlive, (int)t.allocs);
        }
        if (msg != NULL) {
            size_t len;
            struct tracked out = {.nlive = 0};
            ProtobufCAllocator oal = {tracked_alloc, tracked_free, &out};
            char *text = json_encode(msg, &oal, &len);
            CHECK(text != NULL);
            CHECK_INT((int)out.allocs, 1);
            CHECK_INT((int)strlen(text), (int)len);
            tracked_free(&out, text);
            CHECK_INT((int)out.nlive, 0);
            protobuf_c_message_free_unpacked(msg, &al);
        }
        CHECK_INT((int)t.nlive, 0);
        CHECK_INT((int)t.strays, 0);
    }
}

static void test_json_maps(void)
{
    Permit__Test__AllTypes *m;
    Permit__Test__AllTypes out = PERMIT__TEST__ALL_TYPES__INIT;
    Permit__Test__AllTypes__ByIdEntry e1 = PERMIT__TEST__ALL_TYPES__BY_ID_ENTRY__INIT;
    Permit__Test__AllTypes__ByIdEntry *by_id[1] = { &e1 };

    m = decode(ALL, "{\"counts\":{\"x\":\"9223372036854775807\",\"\":0},"
                    "\"byId\":{\"2147483647\":{\"count\":1}}}", 0);
    CHECK(m != NULL);
    if (m != NULL) {
        CHECK_INT(m->n_counts, 2);
        CHECK(m->n_counts == 2 && m->counts[0]->value == INT64_MAX
              && strcmp(m->counts[1]->key, "") == 0);
        CHECK(m->n_by_id == 1 && m->by_id[0]->key == INT32_MAX
              && m->by_id[0]->value->count == 1);
        CHECK_STR(encoded(m), "{\"counts\":{\"x\":\"9223372036854775807\",\"\":\"0\"},"
                              "\"byId\":{\"2147483647\":{\"count\":1}}}");
        protobuf_c_message_free_unpacked(&m->base, NULL);
    }
    CHECK(reencodes(ALL, "{\"counts\":{}}", "{}"));

    /* an entry with no value message still shows as {} */
    e1.key = -5;
    out.n_by_id = 1;
    out.by_id = by_id;
    CHECK_STR(encoded(&out), "{\"byId\":{\"-5\":{}}}");
}

static void test_json_oneof(void)
{
    Permit__Test__AllTypes *m;
    Permit__Test__AllTypes out = PERMIT__TEST__ALL_TYPES__INIT;
    Permit__Test__Inner inner = PERMIT__TEST__INNER__INIT;

    m = decode(ALL, "{\"choiceName\":\"n\"}", 0);
    CHECK(m != NULL);
    if (m != NULL) {
        CHECK_INT(m->choice_case, PERMIT__TEST__ALL_TYPES__CHOICE_CHOICE_NAME);
        CHECK_STR(m->choice_name, "n");
        protobuf_c_message_free_unpacked(&m->base, NULL);
    }
    m = decode(ALL, "{\"choice_inner\":{\"name\":\"x\"}}", 0);
    CHECK(m != NULL);
    if (m != NULL) {
        CHECK_INT(m->choice_case, PERMIT__TEST__ALL_TYPES__CHOICE_CHOICE_INNER);
        CHECK(m->choice_inner != NULL && strcmp(m->choice_inner->name, "x") == 0);
        protobuf_c_message_free_unpacked(&m->base, NULL);
    }
    m = decode(ALL, "{\"choiceName\":null,\"choiceId\":\"1\"}", 0);
    CHECK(m != NULL);
    if (m != NULL) {
        CHECK_INT(m->choice_case, PERMIT__TEST__ALL_TYPES__CHOICE_CHOICE_ID);
        CHECK_INT(m->choice_id, 1);
        protobuf_c_message_free_unpacked(&m->base, NULL);
    }
    CHECK_STR(error_of(ALL, "{\"choiceName\":\"n\",\"choiceId\":\"1\"}", 0),
              "field \"choiceId\": another field of its oneof (\"choice_name\") "
              "is already set");
    CHECK_CONTAINS(error_of(ALL, "{\"choiceName\":\"n\",\"choice_name\":\"m\"}", 0),
                   "given twice");

    /* the chosen member is written even at its default */
    CHECK(reencodes(ALL, "{\"choiceName\":\"\"}", "{\"choiceName\":\"\"}"));
    CHECK(reencodes(ALL, "{\"choiceInner\":{}}", "{\"choiceInner\":{}}"));
    out.choice_case = PERMIT__TEST__ALL_TYPES__CHOICE_CHOICE_ID;
    out.choice_id = 0;
    CHECK_STR(encoded(&out), "{\"choiceId\":\"0\"}");
    out.choice_case = PERMIT__TEST__ALL_TYPES__CHOICE_CHOICE_INNER;
    out.choice_inner = &inner;
    CHECK_STR(encoded(&out), "{\"choiceInner\":{}}");
}

static void test_json_defaults_omitted(void)
{
    Permit__Test__AllTypes m = PERMIT__TEST__ALL_TYPES__INIT;
    Permit__Test__Inner inner = PERMIT__TEST__INNER__INIT;
    int64_t none[1] = { 0 };

    CHECK_STR(encoded(&m), "{}");
    m.f_string = "";
    m.f_bytes.len = 0;
    m.n_r_int64 = 0;
    m.r_int64 = none;
    m.color = PERMIT__TEST__COLOR__COLOR_UNSPECIFIED;
    CHECK_STR(encoded(&m), "{}");
    m.inner = &inner;
    CHECK_STR(encoded(&m), "{\"inner\":{}}");
    m.n_r_int64 = 1;
    CHECK_STR(encoded(&m), "{\"inner\":{},\"rInt64\":[\"0\"]}");
    CHECK(reencodes(ALL, "{\"fInt32\":0,\"fInt64\":\"0\",\"fBool\":false,"
                         "\"fString\":\"\",\"fBytes\":\"\",\"color\":\"COLOR_UNSPECIFIED\","
                         "\"fDouble\":0,\"fFloat\":-0.0,\"rInt64\":[],\"byId\":{}}", "{}"));
}

/* proto2 optional scalars carry has_ flags; presence, not value, decides
 * whether they are written. */
static void test_json_proto2_has_flags(void)
{
    Permit__Test__Legacy *m;

    m = decode(LEGACY, "{\"id\":\"1\",\"count\":0}", 0);
    CHECK(m != NULL);
    if (m != NULL) {
        CHECK_INT(m->has_count, 1);
        CHECK_INT(m->count, 0);
        CHECK_INT(m->has_enabled, 0);
        CHECK_INT(m->enabled, 1);
        CHECK_STR(m->label, "none");
        CHECK_INT(m->has_blob, 0);
        CHECK_STR(encoded(m), "{\"count\":0,\"id\":\"1\"}");
        protobuf_c_message_free_unpacked(&m->base, NULL);
    }
    m = decode(LEGACY, "{\"id\":0,\"enabled\":false,\"label\":\"none\",\"blob\":\"\"}", 0);
    CHECK(m != NULL);
    if (m != NULL) {
        CHECK_INT(m->has_enabled, 1);
        CHECK_INT(m->enabled, 0);
        CHECK_INT(m->has_blob, 1);
        CHECK_INT(m->has_count, 0);
        CHECK_STR(encoded(m), "{\"label\":\"none\",\"enabled\":false,\"blob\":\"\",\"id\":\"0\"}");
        protobuf_c_message_free_unpacked(&m->base, NULL);
    }
    CHECK_STR(error_of(LEGACY, "{\"count\":1}", 0), "field \"id\" is required");
    CHECK_STR(error_of(LEGACY, "{\"id\":null}", 0), "field \"id\" is required");
}

int main(void)
{
    TEST_RUN(test_json_acquire_request_decodes);
    TEST_RUN(test_json_original_names);
    TEST_RUN(test_json_int64_string_and_number);
    TEST_RUN(test_json_int64_rejected);
    TEST_RUN(test_json_response_encodes);
    TEST_RUN(test_json_request_round_trip);
    TEST_RUN(test_json_unknown_fields);
    TEST_RUN(test_json_null_means_default);
    TEST_RUN(test_json_duplicate_fields);
    TEST_RUN(test_json_invalid_json);
    TEST_RUN(test_json_top_level_must_be_object);
    TEST_RUN(test_json_text_not_nul_terminated);
    TEST_RUN(test_json_all_types_decode);
    TEST_RUN(test_json_all_types_round_trip);
    TEST_RUN(test_json_decoded_message_packs);
    TEST_RUN(test_json_int_limits);
    TEST_RUN(test_json_floats_decode);
    TEST_RUN(test_json_floats_encode);
    TEST_RUN(test_json_doubles_round_trip_exactly);
    TEST_RUN(test_json_bools);
    TEST_RUN(test_json_strings);
    TEST_RUN(test_json_encode_repairs_utf8);
    TEST_RUN(test_json_bytes);
    TEST_RUN(test_json_enums);
    TEST_RUN(test_json_nested_errors_name_the_path);
    TEST_RUN(test_json_failed_decode_frees_everything);
    TEST_RUN(test_json_caller_allocator);
    TEST_RUN(test_json_maps);
    TEST_RUN(test_json_oneof);
    TEST_RUN(test_json_defaults_omitted);
    TEST_RUN(test_json_proto2_has_flags);
    encoded(NULL);
    return TEST_REPORT();
}
