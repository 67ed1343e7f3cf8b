/*
 * utf8.c - UTF-8 validity, and the check of a decoded protobuf message's
 * string fields.
 *
 * Proto3 says a string field holds UTF-8, and permitd's JSON path has
 * always refused anything else (jansson does); the binary path must answer
 * the same, or a key like "k\xff\xfe" is decided as application/proto and
 * refused as application/json. The check follows the descriptors, not a
 * list of fields: a message added later is covered as it is.
 */
#include <stdio.h>
#include <string.h>

#include "core/utf8.h"

size_t utf8_char_len(const unsigned char *s)
{
    unsigned char lo = 0x80, hi = 0xbf;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        return (s[1] & 0xc0) == 0x80 ? 2 : 0;
    if (s[0] >= 0xe0 && s[0] <= 0xef) {
        if (s[0] == 0xe0)
            lo = 0xa0;
        if (s[0] == 0xed)
            hi = 0x9f;
        return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 ? 3 : 0;
    }
    if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        if (s[0] == 0xf0)
            lo = 0x90;
        if (s[0] == 0xf4)
            hi = 0x8f;
        return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80
               && (s[3] & 0xc0) == 0x80 ? 4 : 0;
    }
    return 0;
}

/* The offset of the first byte of s that starts no well-formed character,
 * or -1 when s is all UTF-8. */
static long first_bad(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t k;

    for (; *p != '\0'; p += k) {
        if (*p < 0x80) {            /* ASCII, most of what is checked: one byte each */
            k = 1;
            continue;
        }
        if ((k = utf8_char_len(p)) == 0)
            return (long)(p - (const unsigned char *)s);
    }
    return -1;
}

/* s for an error message: printable ASCII as it is, every other byte as
 * \xNN, cut at about 48 bytes of input. */
static void shown(char *out, size_t size, const char *s)
{
    size_t o = 0;

    for (size_t i = 0; s[i] != '\0' && o + 8 < size; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i == 48) {
            o += (size_t)snprintf(out + o, size - o, "...");
            break;
        }
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, size - o, "\\x%02x", c);
    }
    out[o] = '\0';
}

static int bad_string(const char *path, const char *s, long at, struct permitd_error *err)
{
    char show[200];

    shown(show, sizeof(show), s);
    return permitd_error_set(err, PERMITD_EINVAL,
                             "%s: \"%s\" is not valid UTF-8 (byte 0x%02x at offset %ld)",
                             path, show, (unsigned char)s[at], at);
}

int utf8_valid(const char *s)
{
    return first_bad(s) < 0;
}

int utf8_check_string(const char *path, const char *s, struct permitd_error *err)
{
    long at;

    if (s != NULL && (at = first_bad(s)) >= 0)
        return bad_string(path, s, at, err);
    return PERMITD_OK;
}

static int check(const ProtobufCMessage *msg, char *path, size_t used, size_t size,
                 struct permitd_error *err);

/* One value of field f (at slot, the i-th of a repeated field when i >= 0),
 * its path appended to path[0, used). path NULL: no path is kept, and a bad
 * string answers PERMITD_EINVAL with no message (utf8_check_message()'s
 * first pass: every request takes it, and only a bad one needs the name). */
static int check_value(const ProtobufCFieldDescriptor *f, const void *slot, long i, char *path,
                       size_t used, size_t size, struct permitd_error *err)
{
    int n;
    long at;

    if (f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_MESSAGE)
        return PERMITD_OK;
    if (path == NULL) {
        if (f->type == PROTOBUF_C_TYPE_STRING) {
            const char *s = *(char *const *)slot;
            return s == NULL || first_bad(s) < 0 ? PERMITD_OK : PERMITD_EINVAL;
        }
        return *(ProtobufCMessage *const *)slot == NULL
                   ? PERMITD_OK
                   : check(*(ProtobufCMessage *const *)slot, NULL, 0, 0, err);
    }
    n = i >= 0 ? snprintf(path + used, size - used, "%s%s[%ld]", used ? "." : "", f->name, i)
               : snprintf(path + used, size - used, "%s%s", used ? "." : "", f->name);
    if (n < 0 || (size_t)n >= size - used)
        n = (int)(size - used - 1);     /* cut: still names where it starts */
    if (f->type == PROTOBUF_C_TYPE_STRING) {
        const char *s = *(char *const *)slot;
        if (s != NULL && (at = first_bad(s)) >= 0)
            return bad_string(path, s, at, err);
        path[used] = '\0';
        return PERMITD_OK;
    }
    if (*(ProtobufCMessage *const *)slot != NULL) {
        int rc = check(*(ProtobufCMessage *const *)slot, path, used + (size_t)n, size, err);
        if (rc != PERMITD_OK)
            return rc;
    }
    path[used] = '\0';
    return PERMITD_OK;
}

/* Every string field of msg and of the messages in it; path[0, used) is
 * where msg sits. */
static int check(const ProtobufCMessage *msg, char *path, size_t used, size_t size,
                 struct permitd_error *err)
{
    const ProtobufCMessageDescriptor *desc = msg->descriptor;
    const char *base = (const char *)msg;

    for (unsigned i = 0; i < desc->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &desc->fields[i];
        int rc = PERMITD_OK;

        if (f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            const char *items = *(char *const *)(base + f->offset);
            for (size_t k = 0; k < n && rc == PERMITD_OK; k++)
                rc = check_value(f, items + k * sizeof(void *), (long)k, path, used, size, err);
        } else {
            /* A oneof member not chosen shares its storage with the one
             * that is: only the chosen one is read. */
            if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
                *(const uint32_t *)(base + f->quantifier_offset) != f->id)
                continue;
            rc = check_value(f, base + f->offset, -1, path, used, size, err);
        }
        if (rc != PERMITD_OK)
            return rc;
    }
    return PERMITD_OK;
}

int utf8_check_message(const ProtobufCMessage *msg, struct permitd_error *err)
{
    char path[256];

    if (check(msg, NULL, 0, 0, err) == PERMITD_OK)
        return PERMITD_OK;
    path[0] = '\0';                 /* a bad string: again, naming it */
    return check(msg, path, 0, sizeof(path), err);
}
