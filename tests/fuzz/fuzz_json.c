/*
 * fuzz_json.c - libFuzzer target for application/json request bodies:
 * json_decode() of the permit.v1 messages (server/transport/json.c), the encoder on
 * what it decoded, and the server's validation.
 *
 * The first input byte picks the message type (messages.h); the rest is the
 * JSON text, decoded twice: strictly and with JSON_IGNORE_UNKNOWN. Then:
 *   - a failure is PERMITD_EINVAL with *out NULL and a message that
 *     json_encode_error() can put in a Connect error body;
 *   - what the strict decoder takes, the lenient one takes the same way;
 *   - json_encode() of the result is UTF-8 JSON that the strict decoder
 *     takes back to the same message (same packed bytes; for a message
 *     with a map, whose JSON keeps one entry per key, the same JSON), and
 *     encoding that gives the same text;
 *   - the binary codec agrees: pack -> unpack -> json_encode is the same text;
 *   - policy.c's checks pass or fail exactly as their rules say.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "transport/json.h"
#include "fuzz.h"
#include "messages.h"

/* A failed decode: the contract of json.h, and a usable error body. */
static void check_failure(int rc, const ProtobufCMessage *out, const struct permitd_error *err)
{
    char *body;
    size_t len = 0;
    json_t *back;
    json_error_t jerr;

    FUZZ_CHECK(rc == PERMITD_EINVAL && err->code == PERMITD_EINVAL);
    FUZZ_CHECK(out == NULL);
    FUZZ_CHECK(err->message[0] != '\0');
    FUZZ_CHECK(memchr(err->message, '\0', sizeof(err->message)) != NULL);
    body = json_encode_error("invalid_argument", err->message, &len);
    FUZZ_CHECK(body != NULL && strlen(body) == len);
    back = json_loadb(body, len, 0, &jerr);
    FUZZ_CHECK(back != NULL);
    FUZZ_CHECK(json_is_string(json_object_get(back, "message")));
    if (fuzz_utf8((const unsigned char *)err->message, strlen(err->message)))
        FUZZ_CHECK(strcmp(json_string_value(json_object_get(back, "message")),
                          err->message) == 0);
    json_decref(back);
    free(body);
}

/* A decoded message: the round trips, then validation. */
static void check_decoded(const ProtobufCMessageDescriptor *desc, ProtobufCMessage *msg)
{
    struct permitd_error err = { 0 };
    ProtobufCMessage *back = NULL, *unpacked;
    size_t jlen, j2len, plen;
    char *json, *json2;
    uint8_t *packed;

    json = json_encode(msg, NULL, &jlen);
    FUZZ_CHECK(json != NULL && strlen(json) == jlen);
    FUZZ_CHECK(fuzz_utf8((const unsigned char *)json, jlen));
    if (json_decode(desc, json, jlen, 0, NULL, &back, &err) != PERMITD_OK) {
        fprintf(stderr, "json_decode refused json_encode's \"%s\": %s\n", json, err.message);
        FUZZ_CHECK(!"json_encode output decodes");
    }
    if (!fuzz_has_map(desc, 0) && !fuzz_same_packed(msg, back)) {
        fprintf(stderr, "JSON round trip of %s changed it: %s\n", desc->name, json);
        FUZZ_CHECK(!"JSON round trip keeps the message");
    }
    json2 = json_encode(back, NULL, &j2len);
    FUZZ_CHECK(json2 != NULL);
    if (strcmp(json, json2) != 0) {
        fprintf(stderr, "JSON not stable:\n  %s\n  %s\n", json, json2);
        FUZZ_CHECK(!"encode -> decode -> encode is stable");
    }
    free(json2);

    packed = fuzz_pack(msg, &plen);
    unpacked = protobuf_c_message_unpack(desc, NULL, plen, packed);
    FUZZ_CHECK(unpacked != NULL);
    json2 = json_encode(unpacked, NULL, &j2len);
    FUZZ_CHECK(json2 != NULL);
    if (strcmp(json, json2) != 0) {
        fprintf(stderr, "binary round trip changed the JSON:\n  %s\n  %s\n", json, json2);
        FUZZ_CHECK(!"pack -> unpack keeps the message");
    }

    fuzz_validate(msg);

    free(json2);
    free(packed);
    free(json);
    protobuf_c_message_free_unpacked(unpacked, NULL);
    protobuf_c_message_free_unpacked(back, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const ProtobufCMessageDescriptor *desc;
    struct permitd_error err = { 0 }, lerr = { 0 };
    ProtobufCMessage *strict = NULL, *lenient = NULL;
    const char *text;
    int rc, lrc;

    if (size == 0)
        return 0;
    desc = fuzz_messages[data[0] % FUZZ_NMESSAGES];
    text = (const char *)data + 1;
    size--;

    /* not NUL-terminated: json_decode() must stay inside [text, text+size) */
    rc = json_decode(desc, text, size, 0, NULL, &strict, &err);
    lrc = json_decode(desc, text, size, JSON_IGNORE_UNKNOWN, NULL, &lenient, &lerr);
    if (rc != PERMITD_OK)
        check_failure(rc, strict, &err);
    if (lrc != PERMITD_OK)
        check_failure(lrc, lenient, &lerr);
    if (rc == PERMITD_OK) {
        FUZZ_CHECK(strict != NULL);
        FUZZ_CHECK(lrc == PERMITD_OK);
        FUZZ_CHECK(fuzz_same_packed(strict, lenient));
        check_decoded(desc, strict);
    }
    if (lrc == PERMITD_OK) {
        FUZZ_CHECK(lenient != NULL);
        check_decoded(desc, lenient);
    }
    if (strict != NULL)
        protobuf_c_message_free_unpacked(strict, NULL);
    if (lenient != NULL)
        protobuf_c_message_free_unpacked(lenient, NULL);
    return 0;
}
