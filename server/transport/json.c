/*
 * json.c - the proto3 JSON mapping for any protobuf-c message.
 *
 * protobuf-c already describes every message at run time: a
 * ProtobufCMessageDescriptor lists each field's name, type, label and byte
 * offset into the C struct. So one walker over descriptors turns any message
 * into a jansson tree and back, and a new RPC needs no JSON code. jansson
 * does all the work on JSON text (parsing, UTF-8 checks, duplicate keys,
 * escaping); this file only maps values, following
 * https://protobuf.dev/programming-guides/proto3/#json.
 *
 * Decoding builds the message as protobuf_c_message_unpack() would with the
 * caller's allocator (NULL: the system's): a struct with its strings, bytes,
 * arrays and sub-messages, each allocated on its own. So the caller frees it
 * with protobuf_c_message_free_unpacked(msg, allocator), and so does the
 * decoder when it fails halfway. For that to work, every allocation is
 * attached to the message (and counted in its n_ field) before anything
 * that can fail.
 *
 * protobuf-c 1.4.1 does not record two things, so this file works them out:
 * - the JSON name: protoc's rule (drop each '_', upper-case the letter after
 *   it) is applied to the field name. A custom [json_name = "..."] option is
 *   lost, because protoc-c does not keep it;
 * - map fields: a map<K, V> is compiled to a repeated field whose type is a
 *   nested "<Name>Entry" message with fields key = 1 and value = 2, with no
 *   flag to mark it. is_map() looks for that shape.
 */
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/arena.h"
#include "core/base64.h"

#include "transport/json.h"
#include "core/utf8.h"

/* ---- jansson's memory ----
 *
 * Every tree jansson builds here lives for one json_decode() or
 * json_encode() call, and jansson allocates each value, key, string and
 * hash table of it on its own: some forty allocations for an Acquire. While
 * such a call runs, its thread's allocations come from a bump arena of the
 * thread's own instead, and the arena is emptied when the outermost call
 * returns (nothing of a tree outlives it: what the caller keeps is copied
 * out with malloc). What does not fit, and whatever jansson allocates
 * outside these calls or on other threads, goes to malloc; jfree() tells
 * the two apart by address. Temporaries of this file (JSON names, scratch
 * strings) use the same pair. */
#define ARENA_BYTES 16384

static __thread struct {
    struct arena a;             /* over buf once the thread's first call starts */
    int depth;                  /* codec calls in progress on this thread */
    _Alignas(max_align_t) char buf[ARENA_BYTES];
} jarena;
static pthread_once_t alloc_once = PTHREAD_ONCE_INIT;

static void *jalloc(size_t n)
{
    void *p;

    if (jarena.depth > 0 && (p = arena_alloc(&jarena.a, n)) != NULL)
        return p;
    return malloc(n);
}

static void jfree(void *p)
{
    if (arena_owns(&jarena.a, p))
        return;                 /* the arena's: reclaimed all at once */
    free(p);
}

/* Only pointers jfree() can tell apart ever reach it: malloc's, or this
 * thread's arena's within a codec call. So installing the pair late (after
 * jansson allocated with malloc) is harmless. */
static void install_alloc(void)
{
    json_set_alloc_funcs(jalloc, jfree);
}

static void jarena_enter(void)
{
    pthread_once(&alloc_once, install_alloc);
    if (jarena.a.buf == NULL)
        arena_init(&jarena.a, jarena.buf, sizeof(jarena.buf));
    jarena.depth++;
}

static void jarena_leave(void)
{
    if (--jarena.depth == 0)
        arena_reset(&jarena.a);
}

/* A copy of what an arena call produced, len bytes and a NUL, from al
 * (NULL: malloc). */
static char *keep(const char *s, size_t len, ProtobufCAllocator *al)
{
    char *out = al != NULL ? al->alloc(al->allocator_data, len + 1) : malloc(len + 1);

    if (out != NULL) {
        memcpy(out, s, len);
        out[len] = '\0';
    }
    return out;
}

/* scalar() result for a value that is dropped, not an error: an unknown
 * enum name when the caller asked to ignore unknown names. */
#define SKIP 1

/* State for one json_decode() call. */
struct dec {
    int flags;                  /* JSON_IGNORE_UNKNOWN */
    ProtobufCAllocator *al;     /* the message's blocks; NULL: malloc */
    struct permitd_error *err;
    char path[256];             /* where we are, e.g. "inner.items[2]" */
};

/* State for one json_encode() call. */
struct enc {
    int digits;     /* significant digits the reals so far need to read back */
    const ProtobufCFieldDescriptor *const *always;  /* written even at their
                                                       default; NULL-ended */
};

static int dec_message(struct dec *d, const ProtobufCMessageDescriptor *desc,
                       json_t *obj, ProtobufCMessage *msg);
static json_t *enc_message(struct enc *e, const ProtobufCMessage *msg);

/* ---- descriptors ---- */

/* The member at a descriptor's offset (or quantifier_offset) in a message. */
static void *at(const void *base, unsigned offset)
{
    return (char *)base + offset;
}

/* Size of one element of a repeated field of this type. */
static size_t width(ProtobufCType type)
{
    switch (type) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return sizeof(uint64_t);
    case PROTOBUF_C_TYPE_DOUBLE:
        return sizeof(double);
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
        return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(ProtobufCMessage *);
    default:
        return sizeof(uint32_t);    /* 32-bit integers, float, enums */
    }
}

/* Matches s against protoc's CamelCase form of a field name: each '_' is
 * dropped and the letter after it upper-cased, and so is the first letter
 * when upper_first (map entry names) but not otherwise (JSON names).
 * Returns what follows the match in s, or NULL. */
static const char *camel_match(const char *name, int upper_first,
                               const char *s)
{
    int up = upper_first;

    for (; *name != '\0'; name++) {
        char c = *name;

        if (c == '_') {
            up = 1;
            continue;
        }
        if (up && c >= 'a' && c <= 'z')
            c = (char)(c - 'a' + 'A');
        up = 0;
        if (*s != c)
            return NULL;
        s++;
    }
    return s;
}

/* Returns the JSON name of a field (a new string, freed with jfree()). */
static char *camel(const char *name)
{
    char *out = jalloc(strlen(name) + 1), *o = out;
    int up = 0;

    if (out == NULL)
        return NULL;
    for (; *name != '\0'; name++) {
        if (*name == '_') {
            up = 1;
            continue;
        }
        *o++ = up && *name >= 'a' && *name <= 'z'
               ? (char)(*name - 'a' + 'A') : *name;
        up = 0;
    }
    *o = '\0';
    return out;
}

/* Whether field f of parent is a map. protobuf-c 1.4.1 has no flag for it,
 * so this checks the shape protoc gives every map<K, V>: a repeated field
 * whose message is nested in parent, named after the field plus "Entry"
 * (foo_bar -> FooBarEntry), with exactly key = 1 and value = 2. A
 * hand-written message of that name and shape is taken for a map too,
 * which is how protoc itself defines a map. */
static int is_map(const ProtobufCMessageDescriptor *parent,
                  const ProtobufCFieldDescriptor *f)
{
    const ProtobufCMessageDescriptor *entry = f->descriptor;
    size_t len = strlen(parent->name);
    const char *rest;

    if (f->label != PROTOBUF_C_LABEL_REPEATED
        || f->type != PROTOBUF_C_TYPE_MESSAGE || entry->n_fields != 2)
        return 0;
    if (entry->fields[0].id != 1 || strcmp(entry->fields[0].name, "key") != 0
        || entry->fields[1].id != 2
        || strcmp(entry->fields[1].name, "value") != 0
        || entry->fields[0].label == PROTOBUF_C_LABEL_REPEATED
        || entry->fields[1].label == PROTOBUF_C_LABEL_REPEATED)
        return 0;
    if (strncmp(entry->name, parent->name, len) != 0 || entry->name[len] != '.')
        return 0;
    rest = camel_match(f->name, 1, entry->short_name);
    return rest != NULL && strcmp(rest, "Entry") == 0;
}

/* The field a JSON key names: its proto name or its JSON name. */
static const ProtobufCFieldDescriptor *
lookup(const ProtobufCMessageDescriptor *desc, const char *key)
{
    const ProtobufCFieldDescriptor *f;
    const char *rest;

    f = protobuf_c_message_descriptor_get_field_by_name(desc, key);
    if (f != NULL)
        return f;
    for (unsigned i = 0; i < desc->n_fields; i++) {
        rest = camel_match(desc->fields[i].name, 0, key);
        if (rest != NULL && *rest == '\0')
            return &desc->fields[i];
    }
    return NULL;
}

/* A block of the message being decoded, from the caller's allocator. */
static void *dalloc(struct dec *d, size_t n)
{
    return d->al != NULL ? d->al->alloc(d->al->allocator_data, n) : malloc(n);
}

static void dfree(struct dec *d, void *p)
{
    if (d->al != NULL)
        d->al->free(d->al->allocator_data, p);
    else
        free(p);
}

/* A new message of type desc at its defaults, freed with
 * protobuf_c_message_free_unpacked(msg, d->al); NULL when out of memory. */
static ProtobufCMessage *fresh(struct dec *d, const ProtobufCMessageDescriptor *desc)
{
    ProtobufCMessage *msg = dalloc(d, desc->sizeof_message);

    if (msg != NULL)
        protobuf_c_message_init(desc, msg);
    return msg;
}

/* ---- UTF-8 ---- */

/* utf8_char_len() (utf8.h) says how long a well-formed character is. */

/* Replaces, in place, each byte of s that does not belong to well-formed
 * UTF-8 with '?'. */
static void tidy(char *s)
{
    size_t k;

    for (unsigned char *p = (unsigned char *)s; *p != '\0'; p += k) {
        k = utf8_char_len(p);
        if (k == 0) {
            *p = '?';
            k = 1;
        }
    }
}

/* Encodes p[0, n) as padded standard base64: a new JSON string. */
static json_t *base64(const uint8_t *p, size_t n)
{
    char *out = jalloc(base64_encoded_len(n) + 1);
    json_t *v;
    size_t len;

    if (out == NULL)
        return NULL;
    len = base64_encode(p, n, out);
    v = json_stringn(out, len);
    jfree(out);
    return v;
}

/* ---- decoding: errors and where they happened ---- */

/* Appends a step ("name", ".name", "[3]") to the path and returns the old
 * length, for pop(). A path too long for the buffer is cut, on a UTF-8
 * character boundary so the error message stays valid UTF-8. */
__attribute__((format(printf, 2, 3)))
static size_t push(struct dec *d, const char *fmt, ...)
{
    size_t len = strlen(d->path), end;
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(d->path + len, sizeof(d->path) - len, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n >= sizeof(d->path) - len) {
        end = strlen(d->path);
        while (end > len && ((unsigned char)d->path[end - 1] & 0xc0) == 0x80)
            end--;
        if (end > len && (unsigned char)d->path[end - 1] >= 0xc0)
            end--;
        d->path[end] = '\0';
    }
    return len;
}

static void pop(struct dec *d, size_t len)
{
    d->path[len] = '\0';
}

/* Fails with `field "<path>": <value> <what>`, the value shown as JSON
 * (ASCII-escaped and cut short, since it comes from the client). */
__attribute__((format(printf, 3, 4)))
static int bad(struct dec *d, const json_t *v, const char *fmt, ...)
{
    char what[200];
    char *shown = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT
                                | JSON_ENSURE_ASCII);
    va_list ap;
    int rc;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    rc = permitd_error_set(d->err, PERMITD_EINVAL, "field \"%s\": %.64s%s %s",
                           d->path, shown != NULL ? shown : "value",
                           shown != NULL && strlen(shown) > 64 ? "..." : "",
                           what);
    jfree(shown);
    return rc;
}

static int oom(struct dec *d)
{
    return permitd_error_set(d->err, PERMITD_EINTERNAL,
                             "out of memory decoding JSON");
}

/* ---- decoding: numbers ---- */

static int digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Whether s is a plain decimal integer: an optional '-' (when signed), then
 * digits only: no '+', spaces, fraction or exponent. */
static int decimal(const char *s, int is_signed)
{
    if (is_signed && *s == '-')
        s++;
    if (!digit(*s))
        return 0;
    while (digit(*s))
        s++;
    return *s == '\0';
}

/* Whether s has JSON number syntax ("-1.5e3"): the numeric strings that
 * floating-point fields accept. Rules out what strtod() also takes ("inf",
 * "0x1p3", " 1"). */
static int number(const char *s)
{
    if (*s == '-')
        s++;
    if (!digit(*s))
        return 0;
    while (digit(*s))
        s++;
    if (*s == '.') {
        s++;
        if (!digit(*s))
            return 0;
        while (digit(*s))
            s++;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (!digit(*s))
            return 0;
        while (digit(*s))
            s++;
    }
    return *s == '\0';
}

/* Reads v as an integer in [min, max]: a JSON integer, a real with no
 * fraction (1e3, 2.0), or a decimal string ("-12"). Returns 0, or -1 when v
 * is none of those or out of range. */
static int to_int(const json_t *v, int64_t min, int64_t max, int64_t *out)
{
    int64_t n;

    if (json_is_integer(v)) {
        n = json_integer_value(v);
    } else if (json_is_real(v)) {
        double x = json_real_value(v);

        if (!(x >= -0x1p63 && x < 0x1p63) || (double)(int64_t)x != x)
            return -1;
        n = (int64_t)x;
    } else if (json_is_string(v) && decimal(json_string_value(v), 1)) {
        errno = 0;
        n = strtoll(json_string_value(v), NULL, 10);
        if (errno == ERANGE)
            return -1;
    } else {
        return -1;
    }
    if (n < min || n > max)
        return -1;
    *out = n;
    return 0;
}

/* to_int() for unsigned fields: no sign at all, up to max. */
static int to_uint(const json_t *v, uint64_t max, uint64_t *out)
{
    uint64_t n;

    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0)
            return -1;
        n = (uint64_t)json_integer_value(v);
    } else if (json_is_real(v)) {
        double x = json_real_value(v);

        if (!(x >= 0 && x < 0x1p64) || (double)(uint64_t)x != x)
            return -1;
        n = (uint64_t)x;
    } else if (json_is_string(v) && decimal(json_string_value(v), 0)) {
        errno = 0;
        n = strtoull(json_string_value(v), NULL, 10);
        if (errno == ERANGE)
            return -1;
    } else {
        return -1;
    }
    if (n > max)
        return -1;
    *out = n;
    return 0;
}

/* Reads v as a double: a JSON number, "NaN", "Infinity", "-Infinity", or a
 * string holding a JSON number. Returns 0, or -1 (also for a string too
 * large for a double). */
static int to_double(const json_t *v, double *out)
{
    const char *s;

    if (json_is_number(v)) {
        *out = json_number_value(v);
        return 0;
    }
    if (!json_is_string(v))
        return -1;
    s = json_string_value(v);
    if (strcmp(s, "NaN") == 0)
        *out = NAN;
    else if (strcmp(s, "Infinity") == 0)
        *out = INFINITY;
    else if (strcmp(s, "-Infinity") == 0)
        *out = -INFINITY;
    else if (number(s))
        *out = strtod(s, NULL);
    else
        return -1;
    /* "1e999" overflows to infinity: refused, like 1e999 unquoted */
    return isinf(*out) && number(s) ? -1 : 0;
}

/* ---- decoding: values ---- */

static int dec_enum(struct dec *d, const ProtobufCEnumDescriptor *ed,
                    const json_t *v, int32_t *slot)
{
    const ProtobufCEnumValue *ev;
    int64_t n;

    if (json_is_string(v)) {
        ev = protobuf_c_enum_descriptor_get_value_by_name(ed,
                                                          json_string_value(v));
        if (ev == NULL && (d->flags & JSON_IGNORE_UNKNOWN))
            return SKIP;
        if (ev == NULL)
            return bad(d, v, "is not a value of enum %s", ed->name);
        *slot = ev->value;
        return 0;
    }
    /* proto3 enums are open: any 32-bit number is kept, known or not. */
    if (!json_is_number(v) || to_int(v, INT32_MIN, INT32_MAX, &n) < 0)
        return bad(d, v, "is not a value of enum %s", ed->name);
    *slot = (int32_t)n;
    return 0;
}

static int dec_bytes(struct dec *d, const json_t *v, ProtobufCBinaryData *slot)
{
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    uint8_t *data;
    long len;

    if (!json_is_string(v))
        return bad(d, v, "is not base64");
    data = dalloc(d, base64_decoded_max(n) + 1);
    if (data == NULL)
        return oom(d);
    len = base64_decode(s, n, data);
    if (len <= 0) {
        dfree(d, data);
        if (len < 0)
            return bad(d, v, "is not base64");
        data = NULL;
    }
    slot->data = data;
    slot->len = len < 0 ? 0 : (size_t)len;
    return 0;
}

/* Decodes one value of field f's type (one element, for a repeated field)
 * into slot, which holds the defaults. Anything allocated is stored in slot
 * at once, so whoever owns slot frees it even if decoding fails later on.
 * Returns 0, SKIP, or a negative PERMITD_E*. */
static int scalar(struct dec *d, const ProtobufCFieldDescriptor *f,
                  json_t *v, void *slot)
{
    ProtobufCMessage *sub;
    int64_t i;
    uint64_t u;
    double x;
    char *s;

    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        if (to_int(v, INT32_MIN, INT32_MAX, &i) < 0)
            return bad(d, v, "is not a 32-bit integer");
        *(int32_t *)slot = (int32_t)i;
        return 0;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        if (to_int(v, INT64_MIN, INT64_MAX, &i) < 0)
            return bad(d, v, "is not a 64-bit integer");
        *(int64_t *)slot = i;
        return 0;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        if (to_uint(v, UINT32_MAX, &u) < 0)
            return bad(d, v, "is not an unsigned 32-bit integer");
        *(uint32_t *)slot = (uint32_t)u;
        return 0;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        if (to_uint(v, UINT64_MAX, &u) < 0)
            return bad(d, v, "is not an unsigned 64-bit integer");
        *(uint64_t *)slot = u;
        return 0;
    case PROTOBUF_C_TYPE_FLOAT:
        if (to_double(v, &x) < 0)
            return bad(d, v, "is not a number");
        /* Out of range means rounding to infinity as a float: FLT_MAX
         * itself prints as 3.4028235e38 (shortest form, json_encode's and
         * every proto3 JSON printer's), which is a little over FLT_MAX as
         * a double but rounds back to it. Halfway to 2^128 rounds up. */
        if (isfinite(x) && (x >= 0x1.ffffffp127 || x <= -0x1.ffffffp127))
            return bad(d, v, "is out of range for a float");
        *(float *)slot = (float)x;
        return 0;
    case PROTOBUF_C_TYPE_DOUBLE:
        if (to_double(v, &x) < 0)
            return bad(d, v, "is not a number");
        *(double *)slot = x;
        return 0;
    case PROTOBUF_C_TYPE_BOOL:
        if (!json_is_boolean(v))
            return bad(d, v, "is not a boolean");
        *(protobuf_c_boolean *)slot = json_is_true(v);
        return 0;
    case PROTOBUF_C_TYPE_ENUM:
        return dec_enum(d, f->descriptor, v, slot);
    case PROTOBUF_C_TYPE_STRING:
        /* jansson has checked the UTF-8, and refuses "\u0000" (no
         * JSON_ALLOW_NUL), so the C string holds all of it. */
        if (!json_is_string(v))
            return bad(d, v, "is not a string");
        s = dalloc(d, json_string_length(v) + 1);
        if (s == NULL)
            return oom(d);
        memcpy(s, json_string_value(v), json_string_length(v) + 1);
        *(char **)slot = s;
        return 0;
    case PROTOBUF_C_TYPE_BYTES:
        return dec_bytes(d, v, slot);
    case PROTOBUF_C_TYPE_MESSAGE:
        if (!json_is_object(v))
            return bad(d, v, "is not an object");
        sub = fresh(d, f->descriptor);
        if (sub == NULL)
            return oom(d);
        *(ProtobufCMessage **)slot = sub;
        return dec_message(d, f->descriptor, v, sub);
    }
    return bad(d, v, "has a type this codec does not know");
}

/* Sets the has_ flag of a field that has one: an optional scalar (proto2,
 * or proto3 `optional` in later protobuf-c) outside a oneof. Strings and
 * messages mark presence by their pointer, proto3 fields not at all. */
static void mark_present(const ProtobufCFieldDescriptor *f, ProtobufCMessage *msg)
{
    if (f->label == PROTOBUF_C_LABEL_OPTIONAL
        && !(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
        && f->type != PROTOBUF_C_TYPE_STRING
        && f->type != PROTOBUF_C_TYPE_MESSAGE)
        *(protobuf_c_boolean *)at(msg, f->quantifier_offset) = 1;
}

/* Decodes a JSON array into repeated field f. Each element is counted in
 * n_<field> before it is decoded, so a half-built one is freed too. */
static int dec_list(struct dec *d, const ProtobufCFieldDescriptor *f,
                    json_t *v, ProtobufCMessage *msg)
{
    size_t *n = at(msg, f->quantifier_offset), size = width(f->type), mark;
    char *arr;
    json_t *elem;
    int rc;

    if (!json_is_array(v))
        return bad(d, v, "is not an array");
    if (json_array_size(v) == 0)
        return 0;
    arr = dalloc(d, json_array_size(v) * size);
    if (arr == NULL)
        return oom(d);
    memset(arr, 0, json_array_size(v) * size);
    *(void **)at(msg, f->offset) = arr;
    for (size_t i = 0; i < json_array_size(v); i++) {
        elem = json_array_get(v, i);
        mark = push(d, "[%zu]", i);
        if (json_is_null(elem))
            return bad(d, elem, "is not allowed in a list");
        (*n)++;
        rc = scalar(d, f, elem, arr + (*n - 1) * size);
        if (rc < 0)
            return rc;
        if (rc == SKIP)
            (*n)--;
        pop(d, mark);
    }
    return 0;
}

/* Decodes a map key, which JSON always writes as a string, into slot. */
static int dec_key(struct dec *d, const ProtobufCFieldDescriptor *kf,
                   const char *key, void *slot)
{
    json_t *k;
    int rc;

    if (kf->type == PROTOBUF_C_TYPE_BOOL && strcmp(key, "true") == 0)
        k = json_true();
    else if (kf->type == PROTOBUF_C_TYPE_BOOL && strcmp(key, "false") == 0)
        k = json_false();
    else
        k = json_string(key);
    if (k == NULL)
        return oom(d);
    rc = scalar(d, kf, k, slot);
    json_decref(k);
    return rc;
}

/* Decodes a JSON object into map field f: one entry message per key. */
static int dec_map(struct dec *d, const ProtobufCFieldDescriptor *f,
                   json_t *v, ProtobufCMessage *msg)
{
    const ProtobufCMessageDescriptor *ed = f->descriptor;
    const ProtobufCFieldDescriptor *kf = &ed->fields[0], *vf = &ed->fields[1];
    size_t *n = at(msg, f->quantifier_offset), mark;
    ProtobufCMessage **arr, *entry;
    const char *key;
    json_t *val;
    int rc;

    if (!json_is_object(v))
        return bad(d, v, "is not an object");
    if (json_object_size(v) == 0)
        return 0;
    arr = dalloc(d, json_object_size(v) * sizeof(*arr));
    if (arr == NULL)
        return oom(d);
    memset(arr, 0, json_object_size(v) * sizeof(*arr));
    *(ProtobufCMessage ***)at(msg, f->offset) = arr;
    json_object_foreach(v, key, val) {
        mark = push(d, "[%s]", key);
        if (json_is_null(val))
            return bad(d, val, "is not allowed as a map value");
        entry = fresh(d, ed);
        if (entry == NULL)
            return oom(d);
        arr[(*n)++] = entry;
        rc = dec_key(d, kf, key, at(entry, kf->offset));
        if (rc < 0)
            return rc;
        mark_present(kf, entry);
        rc = scalar(d, vf, val, at(entry, vf->offset));
        if (rc < 0)
            return rc;
        if (rc == SKIP) {
            protobuf_c_message_free_unpacked(entry, d->al);
            arr[--(*n)] = NULL;
        } else {
            mark_present(vf, entry);
        }
        pop(d, mark);
    }
    return 0;
}

/* Decodes v, not null, into field f of msg. */
static int dec_member(struct dec *d, const ProtobufCFieldDescriptor *f,
                      json_t *v, ProtobufCMessage *msg)
{
    const ProtobufCFieldDescriptor *other;
    uint32_t *which;
    int rc;

    if (f->label == PROTOBUF_C_LABEL_REPEATED)
        return is_map(msg->descriptor, f) ? dec_map(d, f, v, msg)
                                          : dec_list(d, f, v, msg);
    if (!(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)) {
        rc = scalar(d, f, v, at(msg, f->offset));
        if (rc == 0)
            mark_present(f, msg);
        return rc < 0 ? rc : 0;
    }
    /* The case is set before the value, so that free_unpacked() frees
     * what the value allocated if decoding fails inside it. */
    which = at(msg, f->quantifier_offset);
    if (*which != 0 && *which != f->id) {
        other = protobuf_c_message_descriptor_get_field(msg->descriptor, *which);
        return permitd_error_set(d->err, PERMITD_EINVAL,
                                 "field \"%s\": another field of its oneof "
                                 "(\"%s\") is already set", d->path,
                                 other != NULL ? other->name : "?");
    }
    *which = f->id;
    rc = scalar(d, f, v, at(msg, f->offset));
    if (rc == SKIP)
        *which = 0;
    return rc < 0 ? rc : 0;
}

/* Decodes JSON object obj into msg, a fresh message of type desc. `null`
 * leaves a field at its default. A field given under both its names is
 * refused (jansson only catches the same key twice). */
static int dec_message(struct dec *d, const ProtobufCMessageDescriptor *desc,
                       json_t *obj, ProtobufCMessage *msg)
{
    enum { UNSEEN, GIVEN_NULL, GIVEN };
    const ProtobufCFieldDescriptor *f;
    unsigned char *seen = NULL;
    const char *key;
    json_t *v;
    size_t mark;
    int rc = 0;

    seen = jalloc(desc->n_fields + 1);
    if (seen == NULL)
        return oom(d);
    memset(seen, 0, desc->n_fields + 1);
    json_object_foreach(obj, key, v) {
        f = lookup(desc, key);
        mark = push(d, "%s%s", d->path[0] != '\0' ? "." : "", key);
        if (f == NULL && !(d->flags & JSON_IGNORE_UNKNOWN)) {
            rc = permitd_error_set(d->err, PERMITD_EINVAL,
                                   "unknown field \"%s\"", d->path);
            goto cleanup;
        }
        if (f != NULL && seen[f - desc->fields] != UNSEEN) {
            rc = permitd_error_set(d->err, PERMITD_EINVAL,
                                   "field \"%s\" is given twice (by its JSON "
                                   "name and its proto name)", d->path);
            goto cleanup;
        }
        if (f != NULL) {
            seen[f - desc->fields] = json_is_null(v) ? GIVEN_NULL : GIVEN;
            if (!json_is_null(v)) {
                rc = dec_member(d, f, v, msg);
                if (rc < 0)
                    goto cleanup;
            }
        }
        pop(d, mark);
    }
    /* proto2 only: proto3 has no required fields. */
    for (unsigned i = 0; i < desc->n_fields; i++) {
        f = &desc->fields[i];
        if (f->label == PROTOBUF_C_LABEL_REQUIRED && seen[i] != GIVEN
            && f->default_value == NULL) {
            push(d, "%s%s", d->path[0] != '\0' ? "." : "", f->name);
            rc = permitd_error_set(d->err, PERMITD_EINVAL,
                                   "field \"%s\" is required", d->path);
            goto cleanup;
        }
    }
cleanup:
    jfree(seen);
    return rc;
}

int json_decode(const ProtobufCMessageDescriptor *desc, const char *text,
                size_t len, int flags, ProtobufCAllocator *al,
                ProtobufCMessage **out, struct permitd_error *err)
{
    struct dec d = { .flags = flags, .al = al, .err = err };
    ProtobufCMessage *msg = NULL;
    json_error_t jerr;
    json_t *root = NULL;
    int rc;

    *out = NULL;
    jarena_enter();
    root = json_loadb(text != NULL ? text : "", text != NULL ? len : 0,
                      JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (root == NULL) {
        if (json_error_code(&jerr) == json_error_out_of_memory) {
            rc = oom(&d);
            goto cleanup;
        }
        /* jansson quotes the text near the error, cut to its buffer, and
         * the client will get this message back as JSON */
        tidy(jerr.text);
        rc = permitd_error_set(err, PERMITD_EINVAL,
                               "invalid JSON at line %d, column %d: %s",
                               jerr.line, jerr.column, jerr.text);
        goto cleanup;
    }
    if (!json_is_object(root)) {
        rc = permitd_error_set(err, PERMITD_EINVAL,
                               "the message must be a JSON object");
        goto cleanup;
    }
    msg = fresh(&d, desc);
    if (msg == NULL) {
        rc = oom(&d);
        goto cleanup;
    }
    rc = dec_message(&d, desc, root, msg);
    if (rc < 0)
        goto cleanup;
    *out = msg;
    msg = NULL;
cleanup:
    if (msg != NULL)
        protobuf_c_message_free_unpacked(msg, al);
    json_decref(root);
    jarena_leave();
    return rc;
}

/* ---- encoding ---- */

/* A JSON string for a C string. protobuf-c's binary decoder does not check
 * UTF-8 but jansson takes nothing else, so a string that arrived as
 * application/proto gets each bad byte replaced by U+FFFD rather than
 * failing the whole reply. */
static json_t *text(const char *s)
{
    const unsigned char *p;
    char *fixed, *o;
    json_t *v;
    size_t k;

    if (s == NULL)
        s = "";
    for (p = (const unsigned char *)s; *p != '\0'; p += k) {
        k = utf8_char_len(p);
        if (k == 0)
            break;
    }
    if (*p == '\0')    /* checked here, so jansson need not check again */
        return json_string_nocheck(s);
    fixed = jalloc(3 * strlen(s) + 1);
    if (fixed == NULL)
        return NULL;
    for (p = (const unsigned char *)s, o = fixed; *p != '\0'; p += k) {
        k = utf8_char_len(p);
        if (k == 0) {
            memcpy(o, "\xef\xbf\xbd", 3);
            o += 3;
            k = 1;
        } else {
            memcpy(o, p, k);
            o += k;
        }
    }
    *o = '\0';
    v = json_string_nocheck(fixed);
    jfree(fixed);
    return v;
}

/* Fewest significant digits (%.Ng) that print x so it reads back as the
 * same value (the same float, when is_float), and no fewer than its whole
 * part has. */
static int digits(double x, int is_float)
{
    char buf[32];
    double back;
    int p, whole = 1;

    for (p = 1; p < 17; p++) {
        snprintf(buf, sizeof(buf), "%.*g", p, x);
        back = strtod(buf, NULL);
        if (is_float ? (float)back == (float)x : back == x)
            break;
    }
    /* Below 1e17, enough for every digit before the point, so that 100
     * prints as 100.0 rather than 1e2. */
    for (double t = x < 0 ? -x : x; t >= 10 && t < 1e17; t /= 10)
        whole++;
    return p > whole ? p : whole;
}

/* A JSON number for a float or double, or the string proto3 JSON uses for
 * NaN and the infinities. jansson prints every real of a document with one
 * precision (%.17g by default, which shows 0.1 as 0.10000000000000001), so
 * each value raises e->digits to what it needs and json_encode() prints
 * with that: exact and usually short. */
static json_t *real(struct enc *e, double x, int is_float)
{
    int p;

    if (isnan(x))
        return json_string("NaN");
    if (isinf(x))
        return json_string(x > 0 ? "Infinity" : "-Infinity");
    p = digits(x, is_float);
    if (p > e->digits)
        e->digits = p;
    return json_real(x);
}

/* One value of field f's type, read from slot. */
static json_t *enc_value(struct enc *e, const ProtobufCFieldDescriptor *f,
                         const void *slot)
{
    const ProtobufCBinaryData *b;
    const ProtobufCEnumValue *ev;
    const ProtobufCMessage *sub;
    char buf[32];

    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        return json_integer(*(const int32_t *)slot);
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        return json_integer(*(const uint32_t *)slot);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        snprintf(buf, sizeof(buf), "%" PRId64, *(const int64_t *)slot);
        return json_string(buf);
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        snprintf(buf, sizeof(buf), "%" PRIu64, *(const uint64_t *)slot);
        return json_string(buf);
    case PROTOBUF_C_TYPE_FLOAT:
        return real(e, *(const float *)slot, 1);
    case PROTOBUF_C_TYPE_DOUBLE:
        return real(e, *(const double *)slot, 0);
    case PROTOBUF_C_TYPE_BOOL:
        return json_boolean(*(const protobuf_c_boolean *)slot);
    case PROTOBUF_C_TYPE_ENUM:
        ev = protobuf_c_enum_descriptor_get_value(f->descriptor,
                                                  *(const int32_t *)slot);
        return ev != NULL ? json_string(ev->name)
                          : json_integer(*(const int32_t *)slot);
    case PROTOBUF_C_TYPE_STRING:
        return text(*(char *const *)slot);
    case PROTOBUF_C_TYPE_BYTES:
        b = slot;
        return base64(b->data, b->len);
    case PROTOBUF_C_TYPE_MESSAGE:
        sub = *(ProtobufCMessage *const *)slot;
        return sub != NULL ? enc_message(e, sub) : json_object();
    }
    return NULL;
}

/* Whether a singular field is written out: a oneof member when it is the
 * one chosen, a proto2 optional when present, a required field always, and
 * a proto3 field when it is not at its default (0, false, "", empty bytes,
 * enum 0, no message). */
static int present(const ProtobufCFieldDescriptor *f, const ProtobufCMessage *msg)
{
    const void *slot = at(msg, f->offset);
    const char *s;

    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
        if (*(const uint32_t *)at(msg, f->quantifier_offset) != f->id)
            return 0;
        return (f->type != PROTOBUF_C_TYPE_STRING
                && f->type != PROTOBUF_C_TYPE_MESSAGE)
               || *(void *const *)slot != NULL;
    }
    if (f->type == PROTOBUF_C_TYPE_STRING) {
        s = *(char *const *)slot;
        if (s == NULL)
            return 0;
        if (f->label == PROTOBUF_C_LABEL_OPTIONAL)
            return s != f->default_value;
        return f->label == PROTOBUF_C_LABEL_REQUIRED || *s != '\0';
    }
    if (f->type == PROTOBUF_C_TYPE_MESSAGE)
        return *(ProtobufCMessage *const *)slot != NULL;
    if (f->label == PROTOBUF_C_LABEL_OPTIONAL)
        return *(const protobuf_c_boolean *)at(msg, f->quantifier_offset);
    if (f->label == PROTOBUF_C_LABEL_REQUIRED)
        return 1;
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return *(const uint64_t *)slot != 0;
    case PROTOBUF_C_TYPE_FLOAT:
        return *(const float *)slot != 0;
    case PROTOBUF_C_TYPE_DOUBLE:
        return *(const double *)slot != 0;
    case PROTOBUF_C_TYPE_BOOL:
        return *(const protobuf_c_boolean *)slot != 0;
    case PROTOBUF_C_TYPE_BYTES:
        return ((const ProtobufCBinaryData *)slot)->len != 0;
    default:
        return *(const uint32_t *)slot != 0;    /* 32-bit integers, enums */
    }
}

/* A repeated field as a JSON array. */
static json_t *enc_list(struct enc *e, const ProtobufCFieldDescriptor *f,
                        const ProtobufCMessage *msg)
{
    size_t n = *(const size_t *)at(msg, f->quantifier_offset);
    size_t size = width(f->type);
    const char *arr = *(char *const *)at(msg, f->offset);
    json_t *list = json_array();

    for (size_t i = 0; list != NULL && i < n; i++) {
        if (json_array_append_new(list, enc_value(e, f, arr + i * size)) < 0) {
            json_decref(list);
            list = NULL;
        }
    }
    return list;
}

/* A map key, which JSON writes as a string whatever its type. */
static json_t *enc_key(const ProtobufCFieldDescriptor *kf, const void *slot)
{
    char buf[32];

    switch (kf->type) {
    case PROTOBUF_C_TYPE_STRING:
        return text(*(char *const *)slot);
    case PROTOBUF_C_TYPE_BOOL:
        return json_string(*(const protobuf_c_boolean *)slot ? "true" : "false");
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        snprintf(buf, sizeof(buf), "%" PRId32, *(const int32_t *)slot);
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        snprintf(buf, sizeof(buf), "%" PRIu32, *(const uint32_t *)slot);
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        snprintf(buf, sizeof(buf), "%" PRId64, *(const int64_t *)slot);
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        snprintf(buf, sizeof(buf), "%" PRIu64, *(const uint64_t *)slot);
        break;
    default:
        return NULL;    /* protoc allows no other key type */
    }
    return json_string(buf);
}

/* A map field as a JSON object. Two entries with one key (possible in
 * binary input) leave the last, as protobuf's own parsers do. */
static json_t *enc_map(struct enc *e, const ProtobufCFieldDescriptor *f,
                       const ProtobufCMessage *msg)
{
    const ProtobufCMessageDescriptor *ed = f->descriptor;
    const ProtobufCFieldDescriptor *kf = &ed->fields[0], *vf = &ed->fields[1];
    size_t n = *(const size_t *)at(msg, f->quantifier_offset);
    ProtobufCMessage *const *entries = *(ProtobufCMessage **const *)at(msg, f->offset);
    json_t *obj = NULL, *key = NULL, *rv = NULL;

    obj = json_object();
    if (obj == NULL)
        goto cleanup;
    for (size_t i = 0; i < n; i++) {
        if (entries[i] == NULL)
            continue;
        key = enc_key(kf, at(entries[i], kf->offset));
        if (key == NULL)
            goto cleanup;
        if (json_object_set_new(obj, json_string_value(key),
                                enc_value(e, vf, at(entries[i], vf->offset))) < 0)
            goto cleanup;
        json_decref(key);
        key = NULL;
    }
    rv = obj;
    obj = NULL;
cleanup:
    json_decref(key);
    json_decref(obj);
    return rv;
}

/* Whether f is one of the fields the caller wants written even at their
 * default: a singular scalar (not a oneof member, not a message). */
static int forced(const struct enc *e, const ProtobufCFieldDescriptor *f)
{
    if (e->always == NULL || f->type == PROTOBUF_C_TYPE_MESSAGE ||
        (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
        return 0;
    for (const ProtobufCFieldDescriptor *const *a = e->always; *a != NULL; a++)
        if (*a == f)
            return 1;
    return 0;
}

/* A message as a JSON object keyed by JSON names, defaults left out (but
 * for the fields in e->always). */
static json_t *enc_message(struct enc *e, const ProtobufCMessage *msg)
{
    const ProtobufCMessageDescriptor *desc = msg->descriptor;
    const ProtobufCFieldDescriptor *f;
    json_t *obj = NULL, *v = NULL, *rv = NULL;
    char *name = NULL;

    obj = json_object();
    if (obj == NULL)
        goto cleanup;
    for (unsigned i = 0; i < desc->n_fields; i++) {
        f = &desc->fields[i];
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            if (*(const size_t *)at(msg, f->quantifier_offset) == 0)
                continue;
            v = is_map(desc, f) ? enc_map(e, f, msg) : enc_list(e, f, msg);
        } else if (present(f, msg) || forced(e, f)) {
            v = enc_value(e, f, at(msg, f->offset));
        } else {
            continue;
        }
        name = camel(f->name);
        if (v == NULL || name == NULL)
            goto cleanup;
        /* jansson takes v, even when the call fails */
        if (json_object_set_new(obj, name, v) < 0) {
            v = NULL;
            goto cleanup;
        }
        v = NULL;
        jfree(name);
        name = NULL;
    }
    rv = obj;
    obj = NULL;
cleanup:
    jfree(name);
    json_decref(v);
    json_decref(obj);
    return rv;
}

/* jansson writes the text into the arena; the caller gets it copied out
 * with al (NULL: malloc). */
static char *dump(json_t *root, size_t flags, ProtobufCAllocator *al, size_t *len)
{
    char *text = json_dumps(root, flags), *out = NULL;

    if (text != NULL) {
        size_t n = strlen(text);
        out = keep(text, n, al);
        if (out != NULL && len != NULL)
            *len = n;
        jfree(text);
    }
    return out;
}

char *json_encode(const ProtobufCMessage *msg, ProtobufCAllocator *al, size_t *len)
{
    return json_encode_always(msg, NULL, al, len);
}

char *json_encode_always(const ProtobufCMessage *msg,
                         const ProtobufCFieldDescriptor *const *always,
                         ProtobufCAllocator *al, size_t *len)
{
    struct enc e = { .digits = 0, .always = always };
    json_t *root = NULL;
    char *out = NULL;

    jarena_enter();
    root = enc_message(&e, msg);
    if (root != NULL)
        out = dump(root, JSON_COMPACT | JSON_REAL_PRECISION(e.digits), al, len);
    json_decref(root);
    jarena_leave();
    return out;
}

char *json_encode_error(const char *code, const char *message, size_t *len)
{
    json_t *root;
    char *out = NULL;

    jarena_enter();
    if ((root = json_object()) == NULL)
        goto cleanup;
    if (json_object_set_new(root, "code", json_string(code)) != 0)
        goto cleanup;
    /* json_string() refuses invalid UTF-8; a message cut mid-character or
     * quoting raw client bytes must still produce a body. */
    if (message != NULL && message[0] != '\0') {
        json_t *m = json_string(message);
        if (m == NULL) {
            size_t n = strlen(message) + 1;
            char *clean = jalloc(n);
            if (clean == NULL)
                goto cleanup;
            memcpy(clean, message, n);
            for (unsigned char *c = (unsigned char *)clean; *c; c++)
                if (*c >= 0x80)
                    *c = '?';
            m = json_string(clean);
            jfree(clean);
        }
        if (m == NULL || json_object_set_new(root, "message", m) != 0)
            goto cleanup;
    }
    out = dump(root, JSON_COMPACT | JSON_PRESERVE_ORDER, NULL, len);
cleanup:
    json_decref(root);
    jarena_leave();
    return out;
}
