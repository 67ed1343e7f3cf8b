/*
 * connect.h - the Connect protocol, unary, over http.h.
 *
 * A service describes its procedures in a table of struct connect_method;
 * connect_serve() does everything between the HTTP request and the
 * handler: path and HTTP method, content type (proto or JSON), request
 * compression (gzip), Connect-Timeout-Ms, GET for side-effect-free
 * procedures, decoding, encoding, and the Connect error body with its HTTP
 * status. Handlers see decoded messages and return PERMITD_OK or an error.
 * See https://connectrpc.com/docs/protocol.
 */
#ifndef PERMITD_CONNECT_H
#define PERMITD_CONNECT_H

#include <stddef.h>
#include <stdint.h>
#include <protobuf-c/protobuf-c.h>

#include "transport/http.h"
#include "core/status.h"

enum connect_codec { CONNECT_CODEC_PROTO, CONNECT_CODEC_JSON };

/* What a handler gets besides its messages. */
struct connect_call {
    const struct http_request *http;
    struct http_response *resp;     /* for extra reply headers */
    int64_t deadline_us;            /* clock_now_us() scale */
    enum connect_codec codec;
    struct connect_block *blocks;   /* connect_call_alloc()'s, freed after the reply */
};

/* Memory for the reply message (strings, arrays, sub-messages) that lives
 * until the reply is encoded, then is freed by connect_serve. Zeroed.
 * NULL when out of memory. */
void *connect_call_alloc(struct connect_call *call, size_t n);

/* connect_call_alloc() + copy of a string. */
char *connect_call_strdup(struct connect_call *call, const char *s);

/* Fills out (already initialised to its defaults) from in. Memory that out
 * points to must stay valid until the handler's call returns to
 * connect_serve, which encodes it right away (`scratch` is CONNECT_SCRATCH
 * bytes of per-call storage for that). */
#define CONNECT_SCRATCH 4096
typedef int (*connect_handler_fn)(void *ud, struct connect_call *call,
                                  const ProtobufCMessage *in, ProtobufCMessage *out,
                                  char *scratch, struct permitd_error *err);

/* A handler's return value meaning "answered later": it called
 * http_request_defer(), and whatever it set off (perhaps already, before
 * returning) ends in connect_reply() or connect_error_reply() +
 * http_request_resume(). The handler's `out` and scratch are not used
 * then. */
#define CONNECT_DEFERRED 1

struct connect_method {
    const char *path;                            /* "/permit.v1.RateLimitService/Acquire" */
    const ProtobufCMessageDescriptor *input;
    const ProtobufCMessageDescriptor *output;
    int no_side_effects;                         /* also served by GET */
    connect_handler_fn fn;
};

/* Limits that apply to every call. */
struct connect_limits {
    size_t max_body_bytes;       /* also bounds a decompressed body */
};

/* Serves req when its path is one of methods (ending in {NULL}); returns 1
 * when it did (resp is filled), 0 when the path is not a procedure here. */
int connect_serve(const struct connect_method *methods, void *ud,
                  const struct connect_limits *limits,
                  const struct http_request *req, struct http_response *resp);

/* Encodes msg with codec into resp (Content-Type and body; a binary body
 * lives in req's own storage, a JSON one is owned by resp): the reply of a
 * deferred call. In JSON, the fields in always (NULL-ended, or NULL) are
 * written even at their default (json_encode_always()). PERMITD_OK or
 * PERMITD_EINTERNAL (out of memory). */
int connect_reply(const struct http_request *req, enum connect_codec codec,
                  const ProtobufCMessage *msg, const ProtobufCFieldDescriptor *const *always,
                  struct http_response *resp, struct permitd_error *err);

/* Fills resp with the Connect error for err: HTTP status from the code
 * mapping, Content-Type application/json, {"code":"...","message":"..."}. */
void connect_error_reply(struct http_response *resp, const struct permitd_error *err);

/* The HTTP status Connect maps code to (400 for PERMITD_EINVAL, ...; 500
 * for a value that is no PERMITD_* code). The code's name in the body is
 * permitd_status_name()'s (core/status.h). */
int connect_http_status(int code);

/* Parses a Content-Type: "application/proto" or "application/json", with
 * an optional "; charset=utf-8". PERMITD_OK and *codec, or PERMITD_EINVAL
 * with err naming the value (ct may be NULL: no Content-Type). */
int connect_parse_content_type(const char *ct, enum connect_codec *codec,
                               struct permitd_error *err);

/* Parses Connect-Timeout-Ms: a positive integer of 1 to 10 ASCII digits
 * (the Connect spec). 0 and *ms, or PERMITD_EINVAL naming the header and
 * the value (0, signs, spaces, exponents, 11 digits and more). */
int connect_parse_timeout(const char *value, int64_t *ms, struct permitd_error *err);

/* Inflates a gzip body into a new buffer (free()) of at most max bytes.
 * PERMITD_EINVAL for a corrupt stream, PERMITD_EEXHAUSTED over max. */
int connect_gunzip(const char *in, size_t inlen, size_t max, char **out, size_t *outlen,
                   struct permitd_error *err);

#endif
