/*
 * json.h - the proto3 JSON mapping for any protobuf-c message.
 *
 * One generic codec driven by ProtobufCMessageDescriptor, so a new message
 * or RPC needs no JSON code of its own. Parsing is jansson's; this module
 * only walks descriptors. Follows https://protobuf.dev/programming-guides/proto3/#json:
 * lowerCamelCase names on output (the original names are accepted too),
 * 64-bit integers as strings (numbers accepted), enums by name (numbers
 * accepted), bytes as base64, `null` meaning the default, unknown fields
 * refused unless the caller asks to ignore them.
 *
 * Not supported: the well-known types' special forms (Timestamp, Duration,
 * wrappers, Any) and custom json_name options (protobuf-c does not keep
 * them; names are derived with protoc's rule).
 */
#ifndef PERMITD_JSON_H
#define PERMITD_JSON_H

#include <stddef.h>
#include <protobuf-c/protobuf-c.h>

#include "core/status.h"

enum {
    JSON_IGNORE_UNKNOWN = 1 << 0,   /* skip unknown fields and enum names */
};

/* Decodes len bytes of JSON text into a new message of type desc, its
 * blocks allocated with al (NULL: malloc), as protobuf_c_message_unpack()
 * would. On success returns PERMITD_OK and *out, to be freed with
 * protobuf_c_message_free_unpacked(*out, al). On failure returns
 * PERMITD_EINVAL (PERMITD_EINTERNAL when out of memory) with err->message
 * naming the field and the bad value
 * (e.g. `field "permits": "abc" is not a 64-bit integer`); *out is NULL.
 * The text need not be NUL-terminated. */
int json_decode(const ProtobufCMessageDescriptor *desc, const char *text,
                size_t len, int flags, ProtobufCAllocator *al,
                ProtobufCMessage **out, struct permitd_error *err);

/* Encodes msg as compact proto3 JSON (fields at their default value are
 * omitted). Returns a new NUL-terminated string allocated with al (NULL:
 * malloc, freed with free()), and its length in *len; NULL when out of
 * memory. */
char *json_encode(const ProtobufCMessage *msg, ProtobufCAllocator *al, size_t *len);

/* json_encode(), but the fields in always (a NULL-ended list of field
 * descriptors of msg's type or of messages nested in it; NULL: none) are
 * written even at their default, as proto3 JSON printers do for fields
 * with presence: an answer whose meaning a reader must not have to guess
 * (`"allowed": false`). Only singular scalar fields (not oneof members)
 * are affected. */
char *json_encode_always(const ProtobufCMessage *msg,
                         const ProtobufCFieldDescriptor *const *always,
                         ProtobufCAllocator *al, size_t *len);

#endif

/* Encodes the Connect error body {"code":code,"message":message} (message
 * omitted when empty). Returns a new string (free()) and its length in
 * *len; NULL when out of memory. */
char *json_encode_error(const char *code, const char *message, size_t *len);
