/*
 * utf8.h - well-formed UTF-8 (RFC 3629), for the one rule both codecs
 * share: a protobuf string field holds UTF-8.
 *
 * jansson refuses anything else in JSON text, but protobuf-c's binary
 * decoder copies string fields as it finds them; utf8_check_message()
 * walks a decoded message by its descriptors, so every string field of
 * every request message (and of messages nested in it) is checked, new
 * ones included, with no code of their own.
 */
#ifndef PERMITD_UTF8_H
#define PERMITD_UTF8_H

#include <stddef.h>
#include <protobuf-c/protobuf-c.h>

#include "core/status.h"

/* Length of the well-formed UTF-8 character at s (no overlong forms,
 * surrogates or code points past U+10FFFF), or 0. s must be
 * NUL-terminated: a character cut short by the NUL is not well-formed. */
size_t utf8_char_len(const unsigned char *s);

/* Checks every string field of msg and of the messages in it. PERMITD_OK,
 * or PERMITD_EINVAL with err naming the first bad field by its path
 * ("key", "requests[3].app") and showing its value, the bad bytes
 * escaped (e.g. `key: "k\xff\xfe" is not valid UTF-8 (byte 0xff at
 * offset 1)`). */
int utf8_check_message(const ProtobufCMessage *msg, struct permitd_error *err);

/* 1 when s is all well-formed UTF-8, 0 if not (no message: where a path
 * is made only for an error, utf8_check_string() names it after). */
int utf8_valid(const char *s);

/* Checks one string (NULL passes) as utf8_check_message() checks a field,
 * with the same error naming it path. */
int utf8_check_string(const char *path, const char *s, struct permitd_error *err);

#endif
