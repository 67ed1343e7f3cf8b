/*
 * fuzz_proto.c - libFuzzer target for application/proto request bodies:
 * protobuf_c_message_unpack() of the permit.v1 messages, then the JSON
 * encoder (server/transport/json.c) on what came out, and the server's validation.
 *
 * The first input byte picks the message type (messages.h); the rest is the
 * body. Whatever unpacks must:
 *   - pack again, and that packing must unpack and pack to the same bytes;
 *   - encode as JSON that is valid UTF-8 and that json_decode() takes back
 *     in strict mode, giving the same message (same packed bytes, unknown
 *     fields aside, which JSON has no place for), when its strings were
 *     UTF-8 and it has no map (messages.h: fuzz_has_map); otherwise the
 *     JSON must at least be stable (encode -> decode -> encode);
 *   - pass or fail policy.c's checks exactly as their rules say.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/json.h"
#include "fuzz.h"
#include "messages.h"

/* NaN payloads and the sign of zero do not survive JSON ("NaN", and 0 is
 * left out), so doubles and floats are made plain before comparing. */
static void plain_reals(ProtobufCMessage *msg, void *ud)
{
    const ProtobufCMessageDescriptor *d = msg->descriptor;

    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        size_t n = 1, width;
        char *base;

        if (f->type == PROTOBUF_C_TYPE_DOUBLE)
            width = sizeof(double);
        else if (f->type == PROTOBUF_C_TYPE_FLOAT)
            width = sizeof(float);
        else
            continue;
        base = (char *)msg + f->offset;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            n = *(size_t *)((char *)msg + f->quantifier_offset);
            base = *(char **)base;
        }
        for (size_t k = 0; k < n; k++) {
            if (width == sizeof(double)) {
                double *x = (double *)(base + k * width);
                if (isnan(*x))
                    *x = NAN;
                else if (*x == 0)
                    *x = 0;
            } else {
                float *x = (float *)(base + k * width);
                if (isnan(*x))
                    *x = NAN;
                else if (*x == 0)
                    *x = 0;
            }
        }
    }
    (void)ud;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const ProtobufCMessageDescriptor *desc;
    ProtobufCMessage *msg, *again, *fromjson;
    struct permitd_error err = { 0 };
    struct fuzz_hidden hidden;
    uint8_t *packed, *repacked;
    size_t plen, rlen, jlen, j2len;
    char *json, *json2;
    int utf8;

    if (size == 0)
        return 0;
    desc = fuzz_messages[data[0] % FUZZ_NMESSAGES];
    msg = protobuf_c_message_unpack(desc, NULL, size - 1, data + 1);
    if (msg == NULL)
        return 0;
    plain_reals(msg, NULL);
    fuzz_each_sub(msg, plain_reals, NULL);
    /* Unknown fields are left out of every comparison: JSON has no place
     * for them, and libprotobuf-c 1.4.1 keeps even an invalid field number
     * 0 (tag 80 00 with a redundant continuation byte) as "unknown", then
     * packs it back as tag 00, which its own unpack refuses. permitd never
     * looks at unknown fields, so that is harmless here. */
    fuzz_hide_unknown(msg, &hidden);
    if (hidden.overflow) {    /* too many to hide: not worth comparing */
        fuzz_unhide_unknown(&hidden);
        protobuf_c_message_free_unpacked(msg, NULL);
        return 0;
    }

    /* binary: pack -> unpack -> pack is stable */
    packed = fuzz_pack(msg, &plen);
    again = protobuf_c_message_unpack(desc, NULL, plen, packed);
    FUZZ_CHECK(again != NULL);
    repacked = fuzz_pack(again, &rlen);
    FUZZ_CHECK(rlen == plen && memcmp(packed, repacked, plen) == 0);

    /* JSON: encode -> decode gives the message back */
    json = json_encode(msg, NULL, &jlen);
    FUZZ_CHECK(json != NULL && strlen(json) == jlen);
    FUZZ_CHECK(fuzz_utf8((const unsigned char *)json, jlen));
    if (json_decode(desc, json, jlen, 0, NULL, &fromjson, &err) != PERMITD_OK) {
        fprintf(stderr, "json_decode refused json_encode's \"%s\": %s\n", json, err.message);
        FUZZ_CHECK(!"json_encode output decodes");
    }
    utf8 = fuzz_all_utf8(msg);
    if (utf8 && !fuzz_has_map(desc, 0) && !fuzz_same_packed(msg, fromjson)) {
        fprintf(stderr, "JSON round trip of %s changed it: %s\n", desc->name, json);
        FUZZ_CHECK(!"JSON round trip keeps the message");
    }
    json2 = json_encode(fromjson, NULL, &j2len);
    FUZZ_CHECK(json2 != NULL);
    if (strcmp(json, json2) != 0) {
        fprintf(stderr, "JSON not stable:\n  %s\n  %s\n", json, json2);
        FUZZ_CHECK(!"encode -> decode -> encode is stable");
    }

    fuzz_validate(msg);

    fuzz_unhide_unknown(&hidden);
    free(json2);
    free(json);
    protobuf_c_message_free_unpacked(fromjson, NULL);
    protobuf_c_message_free_unpacked(again, NULL);
    protobuf_c_message_free_unpacked(msg, NULL);
    free(repacked);
    free(packed);
    return 0;
}
