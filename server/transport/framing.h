/*
 * framing.h - HTTP/1.1 request framing read from the raw bytes of a
 * connection, before libmicrohttpd reads them (http.c).
 *
 * A struct framing follows one connection's byte stream request after
 * request: request line, header lines, then a body framed by its one
 * Content-Length or by chunked coding, then the next request. It keeps
 * no bytes beyond the start of the current line (enough to read a
 * Content-Length or a Transfer-Encoding), so it costs the same whatever a
 * client sends. It stops at the first byte that makes the stream
 * ambiguous, malformed or over a limit, and says why: http.c then answers
 * that request itself, once, instead of letting libmicrohttpd 0.9.75 answer
 * with a page of its own (or nothing).
 */
#ifndef PERMITD_FRAMING_H
#define PERMITD_FRAMING_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define FRAMING_LINE_KEPT 64    /* the start of a line kept: a header's name and short value */

struct framing {
    uint8_t state;              /* enum in framing.c */
    uint8_t cr;                 /* the last byte was a CR */
    uint8_t colon;              /* the current header line has had its colon */
    uint8_t ncl, nte;           /* Content-Length / Transfer-Encoding lines of this head */
    uint8_t te_chunked;         /* the Transfer-Encoding value is "chunked" */
    uint8_t spaces;             /* spaces in the request line */
    uint8_t http10;             /* the request is HTTP/1.0 */
    int fail;                   /* why it stopped (enum in framing.c), 0 while fine */
    uint32_t line_len;          /* bytes of the current line so far (CR LF not counted) */
    uint32_t head_len;          /* bytes of the current head (or trailer) so far */
    uint64_t last8;             /* the request line's last 8 bytes, its version */
    uint64_t cl;                /* the Content-Length given */
    uint64_t left;              /* body or chunk bytes still to come */
    uint64_t body;              /* bytes of a chunked body so far */
    uint32_t requests;          /* requests read to their end */
    char line[FRAMING_LINE_KEPT];
    char detail[40];            /* the offending value (printable), for the error */
};

/* Limits the stream is held to. */
struct framing_limits {
    size_t max_header_bytes;    /* one head (request line + headers), or one trailer */
    uint64_t max_body_bytes;    /* one body, declared or chunked */
};

/* f at the start of a connection. */
void framing_init(struct framing *f);

/* Reads the next n bytes of the stream. Returns PERMITD_OK while they are
 * well framed. Otherwise an error with *status the HTTP status to answer
 * (400, 429, 431, 501 or 505), err saying what is wrong, and *keep the
 * number of leading bytes of data that belong to requests before the one
 * that failed (0 when it began in an earlier call); every later call
 * fails the same way. */
int framing_read(struct framing *f, const struct framing_limits *lim, const char *data,
                 size_t n, size_t *keep, int *status, struct permitd_error *err);

#endif
