/*
 * connect.c - Connect unary protocol between http.c and the handlers.
 *
 * Everything a stock Connect client (Go, TypeScript, Swift, Kotlin, Python,
 * `buf curl`) may send is handled here once, for every service: the
 * handlers never see HTTP. Errors are produced in exactly one place,
 * connect_error_reply(), from a struct permitd_error.
 */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <zlib.h>

#include "core/arena.h"
#include "core/base64.h"
#include "core/clock.h"
#include "transport/connect.h"
#include "transport/json.h"
#include "core/utf8.h"

/* HTTP statuses, indexed by -code (server/core/status.h); the code's name
 * is permitd_status_name()'s. */
static const int http_statuses[PERMITD_STATUS_COUNT] = {
    200,    /* ok */
    499,    /* canceled */
    500,    /* unknown */
    400,    /* invalid_argument */
    504,    /* deadline_exceeded */
    404,    /* not_found */
    409,    /* already_exists */
    403,    /* permission_denied */
    429,    /* resource_exhausted */
    400,    /* failed_precondition */
    409,    /* aborted */
    400,    /* out_of_range */
    501,    /* unimplemented */
    500,    /* internal */
    503,    /* unavailable */
    500,    /* data_loss */
    401,    /* unauthenticated */
};

int connect_http_status(int code)
{
    return code <= 0 && -code < PERMITD_STATUS_COUNT ? http_statuses[-code] : 500;
}

void connect_error_reply(struct http_response *resp, const struct permitd_error *err)
{
    size_t len = 0;
    char *body = json_encode_error(permitd_status_name(err->code), err->message, &len);

    resp->status = connect_http_status(err->code);
    resp->content_type = "application/json";
    if (body == NULL) {
        resp->body = (char *)"{\"code\":\"internal\",\"message\":\"out of memory\"}";
        resp->body_len = strlen(resp->body);
        resp->body_owned = 0;
        resp->status = 500;
        return;
    }
    resp->body = body;
    resp->body_len = len;
    resp->body_owned = 1;
}

/* Replies with an error whose HTTP status is not the code's own (404, 405,
 * 415 are HTTP-level answers in the Connect protocol). */
static void http_error(struct http_response *resp, int http_status, int code,
                       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void http_error(struct http_response *resp, int http_status, int code,
                       const char *fmt, ...)
{
    struct permitd_error err;
    va_list ap;

    err.code = code;
    va_start(ap, fmt);
    vsnprintf(err.message, sizeof(err.message), fmt, ap);
    va_end(ap);
    connect_error_reply(resp, &err);
    resp->status = http_status;
}

int connect_parse_content_type(const char *ct, enum connect_codec *codec,
                               struct permitd_error *err)
{
    const char *value = ct != NULL ? ct : "";
    size_t n;

    if (ct == NULL)
        goto bad;
    while (*ct == ' ')
        ct++;
    n = strcspn(ct, "; ");
    if (n == 17 && strncasecmp(ct, "application/proto", n) == 0)
        *codec = CONNECT_CODEC_PROTO;
    else if (n == 16 && strncasecmp(ct, "application/json", n) == 0)
        *codec = CONNECT_CODEC_JSON;
    else
        goto bad;
    /* Parameters: only charset=utf-8 (any case, optionally quoted). */
    for (const char *p = ct + n; *p != '\0';) {
        while (*p == ' ' || *p == ';')
            p++;
        if (*p == '\0')
            break;
        size_t len = strcspn(p, ";");
        while (len > 0 && p[len - 1] == ' ')
            len--;
        if (!(len == 13 && strncasecmp(p, "charset=utf-8", 13) == 0) &&
            !(len == 15 && strncasecmp(p, "charset=\"utf-8\"", 15) == 0))
            goto bad;
        p += strcspn(p, ";");
    }
    return PERMITD_OK;
bad:
    return permitd_error_set(err, PERMITD_EINVAL,
                             "Content-Type \"%.64s\" is not supported: use application/proto or "
                             "application/json", value);
}

int connect_parse_timeout(const char *value, int64_t *ms, struct permitd_error *err)
{
    size_t n = strlen(value);
    int64_t v = 0;

    /* The Connect spec: a positive integer of at most 10 ASCII digits.
     * 0 is refused, not read as "already expired": a deadline that has
     * passed before the work starts is never what a caller means. */
    if (n == 0 || n > 10)
        goto bad;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)value[i]))
            goto bad;
        v = v * 10 + (value[i] - '0');
    }
    if (v == 0)
        goto bad;
    *ms = v;
    return PERMITD_OK;
bad:
    return permitd_error_set(err, PERMITD_EINVAL,
                             "Connect-Timeout-Ms: \"%.32s\" is not a positive whole number of "
                             "milliseconds (1 to 10 digits)", value);
}

int connect_gunzip(const char *in, size_t inlen, size_t max, char **out, size_t *outlen,
                   struct permitd_error *err)
{
    z_stream zs;
    size_t cap = inlen * 4 < 4096 ? 4096 : inlen * 4, got = 0;
    char *buf = NULL;
    int zr, rc = PERMITD_OK;

    *out = NULL;
    *outlen = 0;
    if (cap > max + 1)
        cap = max + 1;
    memset(&zs, 0, sizeof(zs));
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
        return permitd_error_set(err, PERMITD_EINTERNAL, "cannot start gzip decoder");
    buf = malloc(cap);
    if (buf == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto done;
    }
    zs.next_in = (Bytef *)in;
    zs.avail_in = (uInt)inlen;
    for (;;) {
        zs.next_out = (Bytef *)buf + got;
        zs.avail_out = (uInt)(cap - got);
        zr = inflate(&zs, Z_NO_FLUSH);
        got = (size_t)((char *)zs.next_out - buf);
        if (zr == Z_STREAM_END && zs.avail_in == 0)
            break;
        if (zr == Z_STREAM_END) {
            /* More follows: a gzip body may hold several members, read
             * one after the other (RFC 1952); anything else is corrupt. */
            inflateReset(&zs);
            continue;
        }
        if (got > max) {
            rc = permitd_error_set(err, PERMITD_EEXHAUSTED,
                                   "request body is over the %zu-byte limit once decompressed",
                                   max);
            goto done;
        }
        if (zr == Z_BUF_ERROR && zs.avail_in == 0) {
            rc = permitd_error_set(err, PERMITD_EINVAL, "gzip request body is truncated");
            goto done;
        }
        if (zr != Z_OK && zr != Z_BUF_ERROR) {
            rc = permitd_error_set(err, PERMITD_EINVAL, "gzip request body is corrupt: %s",
                                   zs.msg ? zs.msg : "bad data");
            goto done;
        }
        if (zs.avail_out == 0) {
            size_t ncap = cap * 2 > max + 1 ? max + 1 : cap * 2;
            if (ncap == cap) {
                rc = permitd_error_set(err, PERMITD_EEXHAUSTED,
                                       "request body is over the %zu-byte limit once decompressed",
                                       max);
                goto done;
            }
            char *nb = realloc(buf, ncap);
            if (nb == NULL) {
                rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
                goto done;
            }
            buf = nb;
            cap = ncap;
        }
    }
    if (got > max) {
        rc = permitd_error_set(err, PERMITD_EEXHAUSTED,
                               "request body is over the %zu-byte limit once decompressed", max);
        goto done;
    }
    *out = buf;
    *outlen = got;
    buf = NULL;
done:
    inflateEnd(&zs);
    free(buf);
    return rc;
}

struct connect_block {
    struct connect_block *next;
    _Alignas(max_align_t) unsigned char data[];
};

void *connect_call_alloc(struct connect_call *call, size_t n)
{
    struct connect_block *b = calloc(1, sizeof(*b) + n);

    if (b == NULL)
        return NULL;
    b->next = call->blocks;
    call->blocks = b;
    return b->data;
}

char *connect_call_strdup(struct connect_call *call, const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = connect_call_alloc(call, n);

    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

/* Decoding a request (binary or JSON) allocates the message and each of its
 * strings; on the hot path those come from a per-thread bump arena instead
 * of malloc, reset after every request (a worker thread serves one request
 * at a time, and a handler copies what its deferred work keeps). What does
 * not fit falls back to malloc and is freed normally. */
#define ARENA_BYTES 16384

static __thread struct {
    struct arena a;             /* over buf once the thread's first decode starts */
    _Alignas(max_align_t) char buf[ARENA_BYTES];
} darena;

static void *darena_alloc(void *ud, size_t n)
{
    void *p = arena_alloc(ud, n);

    return p != NULL ? p : malloc(n);
}

static void darena_free(void *ud, void *p)
{
    if (!arena_owns(ud, p))
        free(p);
}

/* The thread's decode arena, emptied: what the last request decoded into
 * it is gone. */
static ProtobufCAllocator arena_allocator(void)
{
    ProtobufCAllocator al = {darena_alloc, darena_free, &darena.a};

    if (darena.a.buf == NULL)
        arena_init(&darena.a, darena.buf, sizeof(darena.buf));
    arena_reset(&darena.a);
    return al;
}

/* Unpacks or parses body into a new message of type desc, from the
 * thread's arena (freed with the same allocator, then the arena reset). */
static int decode(enum connect_codec codec, const ProtobufCMessageDescriptor *desc,
                  const char *body, size_t len, ProtobufCMessage **msg,
                  struct permitd_error *err)
{
    ProtobufCAllocator al = arena_allocator();

    if (codec == CONNECT_CODEC_JSON)
        return json_decode(desc, body, len, 0, &al, msg, err);
    *msg = protobuf_c_message_unpack(desc, &al, len, (const uint8_t *)body);
    if (*msg == NULL)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "request body is not a valid %s in protobuf binary",
                                 desc->name);
    /* protobuf-c copies string fields as they come; proto3 (and the JSON
     * path, through jansson) wants UTF-8. On failure *msg stays set: the
     * caller frees it, as it does after a call. */
    return utf8_check_message(*msg, err);
}

/* A reply body in the request's storage (http_request_alloc()): it lives
 * as long as the request, so nothing frees it on its own. */
static void *storage_alloc(void *req, size_t n)
{
    return http_request_alloc(req, n);
}

static void storage_free(void *req, void *p)
{
    (void)req;
    (void)p;
}

int connect_reply(const struct http_request *req, enum connect_codec codec,
                  const ProtobufCMessage *msg, const ProtobufCFieldDescriptor *const *always,
                  struct http_response *resp, struct permitd_error *err)
{
    /* The body goes straight into the request's storage: an Acquire's
     * reply costs no allocation in either codec. */
    if (codec == CONNECT_CODEC_JSON) {
        ProtobufCAllocator al = {storage_alloc, storage_free, (void *)req};
        resp->body = json_encode_always(msg, always, &al, &resp->body_len);
        resp->body_owned = 0;
        resp->content_type = "application/json";
    } else {
        size_t n = protobuf_c_message_get_packed_size(msg);
        resp->body = http_request_alloc(req, n);
        if (resp->body != NULL)
            resp->body_len = protobuf_c_message_pack(msg, (uint8_t *)resp->body);
        resp->body_owned = 0;
        resp->content_type = "application/proto";
    }
    if (resp->body == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory encoding the reply");
    return PERMITD_OK;
}

/* The request message of a GET: ?encoding=json|proto&message=...[&base64=1]
 * [&compression=gzip|identity]. Fills *codec, *body and *len, pointing
 * either into the query or into *owned (free()). */
static int get_message(const struct http_request *req, enum connect_codec *codec,
                       const char **body, size_t *len, char **owned,
                       struct permitd_error *err)
{
    const char *enc = http_request_query(req, "encoding");
    const char *msg = http_request_query(req, "message");
    const char *b64 = http_request_query(req, "base64");
    const char *ver = http_request_query(req, "connect");

    *owned = NULL;
    if (ver != NULL && strcmp(ver, "v1") != 0)
        return permitd_error_set(err, PERMITD_EINVAL, "connect: \"%.16s\" is not v1", ver);
    if (enc == NULL || strcmp(enc, "json") == 0)
        *codec = CONNECT_CODEC_JSON;
    else if (strcmp(enc, "proto") == 0)
        *codec = CONNECT_CODEC_PROTO;
    else
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "encoding: \"%.32s\" is not json or proto", enc);
    if (enc == NULL && msg != NULL)
        return permitd_error_set(err, PERMITD_EINVAL, "encoding: is required with message");
    if (msg == NULL)
        msg = "";
    *body = msg;
    *len = strlen(msg);
    if (b64 != NULL && strcmp(b64, "1") == 0) {
        unsigned char *dec = malloc(base64_decoded_max(*len) + *len + 1);
        char *text = (char *)dec + base64_decoded_max(*len);
        long n;
        if (dec == NULL)
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        /* A '+' that went through form decoding may arrive as ' '. */
        for (size_t i = 0; i <= *len; i++)
            text[i] = msg[i] == ' ' ? '+' : msg[i];
        n = base64_decode(text, *len, dec);
        if (n < 0) {
            free(dec);
            return permitd_error_set(err, PERMITD_EINVAL, "message: is not valid base64");
        }
        *owned = (char *)dec;
        *body = *owned;
        *len = (size_t)n;
    }
    return PERMITD_OK;
}

int connect_serve(const struct connect_method *methods, void *ud,
                  const struct connect_limits *limits,
                  const struct http_request *req, struct http_response *resp)
{
    const char *path = http_request_path(req), *method = http_request_method(req);
    const struct connect_method *m;
    const char *hdr, *body = "", *compression;
    struct permitd_error err;
    struct connect_call call;
    ProtobufCMessage *in = NULL;
    char *inflated = NULL, *owned = NULL;
    char scratch[CONNECT_SCRATCH];
    _Alignas(max_align_t) unsigned char outbuf[512];
    ProtobufCMessage *out = (ProtobufCMessage *)outbuf;
    size_t len = 0;
    int is_get, rc;

    for (m = methods; m->path != NULL; m++)
        if (strcmp(m->path, path) == 0)
            break;
    if (m->path == NULL)
        return 0;

    err.code = PERMITD_OK;
    err.message[0] = '\0';
    memset(&call, 0, sizeof(call));
    call.http = req;
    call.resp = resp;

    is_get = strcmp(method, "GET") == 0;
    if (!(strcmp(method, "POST") == 0 || (is_get && m->no_side_effects))) {
        http_error(resp, 405, PERMITD_EUNIMPLEMENTED,
                   "HTTP method %s is not allowed here", method);
        http_response_header(resp, "Allow", "%s", m->no_side_effects ? "GET, POST" : "POST");
        return 1;
    }

    hdr = http_request_header(req, "Connect-Protocol-Version");
    if (hdr != NULL && strcmp(hdr, "1") != 0) {
        permitd_error_set(&err, PERMITD_EINVAL,
                          "Connect-Protocol-Version: \"%.16s\" is not 1", hdr);
        goto fail;
    }
    call.deadline_us = INT64_MAX;
    hdr = http_request_header(req, "Connect-Timeout-Ms");
    if (hdr != NULL) {
        int64_t ms = 0;
        if (connect_parse_timeout(hdr, &ms, &err) != PERMITD_OK)
            goto fail;
        call.deadline_us = clock_now_us() + ms * 1000;
    }

    /* A body declared over the limit is refused before anything else,
     * a GET's too: its answer must go out before the body would be read. */
    if (http_request_body_too_large(req)) {
        permitd_error_set(&err, PERMITD_EEXHAUSTED,
                          "request body is over the %zu-byte limit", limits->max_body_bytes);
        goto fail;
    }
    if (is_get) {
        if ((rc = get_message(req, &call.codec, &body, &len, &owned, &err)) != PERMITD_OK)
            goto fail;
        compression = http_request_query(req, "compression");
    } else {
        hdr = http_request_header(req, "Content-Type");
        if (connect_parse_content_type(hdr, &call.codec, &err) != PERMITD_OK) {
            http_error(resp, 415, PERMITD_EINTERNAL, "%s", err.message);
            http_response_header(resp, "Accept-Post", "application/json, application/proto");
            return 1;
        }
        body = http_request_body(req, &len);
        compression = http_request_header(req, "Content-Encoding");
    }

    if (compression != NULL && strcasecmp(compression, "identity") != 0) {
        if (strcasecmp(compression, "gzip") != 0) {
            permitd_error_set(&err, PERMITD_EUNIMPLEMENTED,
                              "compression \"%.32s\" is not supported: use gzip or identity",
                              compression);
            http_response_header(resp, "Accept-Encoding", "gzip, identity");
            goto fail;
        }
        if (connect_gunzip(body, len, limits->max_body_bytes, &inflated, &len, &err) != PERMITD_OK)
            goto fail;
        body = inflated;
    }

    if (decode(call.codec, m->input, body, len, &in, &err) != PERMITD_OK)
        goto fail;

    if (m->output->sizeof_message > sizeof(outbuf)) {
        permitd_error_set(&err, PERMITD_EINTERNAL, "reply message too large for its buffer");
        goto fail;
    }
    protobuf_c_message_init(m->output, out);
    rc = m->fn(ud, &call, in, out, scratch, &err);
    if (rc == CONNECT_DEFERRED)
        goto done;
    if (rc != PERMITD_OK)
        goto fail;
    if (connect_reply(req, call.codec, out, NULL, resp, &err) != PERMITD_OK)
        goto fail;
    goto done;

fail:
    if (err.code == PERMITD_OK)
        permitd_error_set(&err, PERMITD_EINTERNAL, "handler failed without saying why");
    connect_error_reply(resp, &err);
done:
    while (call.blocks != NULL) {
        struct connect_block *next = call.blocks->next;
        free(call.blocks);
        call.blocks = next;
    }
    if (in != NULL) {
        ProtobufCAllocator al = {darena_alloc, darena_free, &darena.a};
        protobuf_c_message_free_unpacked(in, &al);
        arena_reset(&darena.a);
    }
    free(inflated);
    free(owned);
    return 1;
}
