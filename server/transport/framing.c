/*
 * framing.c - HTTP/1.1 request framing, read from a connection's raw bytes.
 *
 * libmicrohttpd 0.9.75 answers some framing errors itself, before any
 * callback of ours: a Content-Length that is not a number (its status line
 * and headers then go out twice, a bug of 0.9.75), over 2^64, a bad chunk,
 * a head over its memory pool, a header line without a colon, a version it
 * does not speak; a request line it cannot parse gets no answer at all.
 * It keeps the first of several Content-Lengths. So http.c shows every byte
 * of a plain-HTTP connection to framing_read() before libmicrohttpd reads
 * it, and a request that fails here is answered by http.c, once, with the
 * listener's own error, and never reaches libmicrohttpd.
 *
 * The rules are RFC 9112's, read strictly where a lenient reading could
 * differ from a proxy's (request smuggling): lines end in CR LF or LF, a
 * lone CR is refused; no folded header lines; no space before a header's
 * colon; one Content-Length of digits only, or one Transfer-Encoding that
 * is exactly "chunked", never both; chunk sizes in hex, each chunk's data
 * followed by its line end. A body, declared or chunked, over the limit is
 * refused as soon as the limit is passed, before its bytes are read.
 *
 * One byte at a time through a head's bytes that mean something (line
 * ends, spaces, colons, control characters), its plain runs in one step
 * (plain_run()); body bytes are skipped in one step.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "transport/framing.h"

enum state {
    S_LINE,                     /* the request line (empty lines before it are skipped) */
    S_HEADER,                   /* header lines, to the empty line */
    S_BODY,                     /* `left` bytes of a Content-Length body */
    S_CHUNK_SIZE,               /* a chunk-size line */
    S_CHUNK_DATA,               /* `left` bytes of a chunk */
    S_CHUNK_END,                /* the line end after a chunk's data */
    S_TRAILER,                  /* trailer lines after the last chunk, to the empty line */
};

enum fail {
    F_NONE,
    F_CR,                       /* a CR not followed by LF */
    F_REQUEST_LINE,             /* not METHOD SP target SP HTTP/1.x */
    F_VERSION,                  /* HTTP/ but not 1.0 or 1.1 */
    F_FOLDED,                   /* a header line starting with SP or HTAB */
    F_NO_COLON,
    F_SPACE_BEFORE_COLON,
    F_HEAD_SIZE,
    F_CL_NUMBER,                /* Content-Length not digits */
    F_CL_TWICE,
    F_CL_AND_TE,
    F_TE,                       /* a Transfer-Encoding other than one "chunked" */
    F_BODY_SIZE,                /* declared (Content-Length) over the limit */
    F_CHUNKED_SIZE,             /* chunked body past the limit */
    F_CHUNK_SIZE,               /* a chunk size that is not hex */
    F_CHUNK_END,                /* chunk data not followed by its line end */
    F_NO_NAME,                  /* a header line starting with its colon */
    F_CONTROL,                  /* a control character in the head */
    F_TE_HTTP10,                /* Transfer-Encoding in an HTTP/1.0 request */
};

void framing_init(struct framing *f)
{
    memset(f, 0, sizeof(*f));
}

/* Copies the value of the kept line (after its colon, spaces trimmed)
 * into detail, printable characters only. */
static void set_detail(struct framing *f, const char *s, size_t n)
{
    size_t k = 0;

    while (n > 0 && (*s == ' ' || *s == '\t'))
        s++, n--;
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    for (; k < n && k < sizeof(f->detail) - 1; k++)
        f->detail[k] = (s[k] >= 0x20 && s[k] < 0x7f && s[k] != '"') ? s[k] : '?';
    f->detail[k] = '\0';
}

/* The kept part of the current line as a string (it may be cut short). */
static size_t kept(const struct framing *f)
{
    return f->line_len < sizeof(f->line) ? f->line_len : sizeof(f->line);
}

/* Builds the error for f->fail; *status its HTTP status. */
static int failure(const struct framing *f, const struct framing_limits *lim, int *status,
                   struct permitd_error *err)
{
    *status = 400;
    switch (f->fail) {
    case F_CR:
        return permitd_error_set(err, PERMITD_EINVAL, "a CR in the request not followed by LF");
    case F_REQUEST_LINE:
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "the request line is not METHOD SP target SP HTTP/1.1");
    case F_VERSION:
        *status = 505;
        return permitd_error_set(err, PERMITD_EUNIMPLEMENTED,
                                 "only HTTP/1.0 and HTTP/1.1 are spoken on this listener");
    case F_FOLDED:
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "a header line folded onto the one before (obs-fold)");
    case F_NO_COLON:
        return permitd_error_set(err, PERMITD_EINVAL, "a header line without a colon");
    case F_NO_NAME:
        return permitd_error_set(err, PERMITD_EINVAL, "a header line without a name");
    case F_CONTROL:
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "a control character in the request head");
    case F_TE_HTTP10:
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "Transfer-Encoding in an HTTP/1.0 request (RFC 9112: its "
                                 "framing is faulty)");
    case F_SPACE_BEFORE_COLON:
        return permitd_error_set(err, PERMITD_EINVAL, "white space before a header's colon");
    case F_HEAD_SIZE:
        *status = 431;
        return permitd_error_set(err, PERMITD_EEXHAUSTED,
                                 "request head is over the %zu-byte limit (--max-header-bytes)",
                                 lim->max_header_bytes);
    case F_CL_NUMBER:
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "Content-Length \"%s\" is not a length (digits only)", f->detail);
    case F_CL_TWICE:
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "Content-Length is given more than once: a request has one "
                                 "length");
    case F_CL_AND_TE:
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "Content-Length and Transfer-Encoding together: a request is "
                                 "framed by one of them");
    case F_TE:
        *status = 501;
        return permitd_error_set(err, PERMITD_EUNIMPLEMENTED,
                                 "Transfer-Encoding \"%s\"%s is not supported: only a single "
                                 "\"chunked\"", f->detail,
                                 f->nte > 1 ? " (given more than once)" : "");
    case F_BODY_SIZE:
        *status = 429;
        return permitd_error_set(err, PERMITD_EEXHAUSTED,
                                 "request body of %s bytes is over the %llu-byte limit "
                                 "(--max-body-bytes)", f->detail,
                                 (unsigned long long)lim->max_body_bytes);
    case F_CHUNKED_SIZE:
        *status = 429;
        return permitd_error_set(err, PERMITD_EEXHAUSTED,
                                 "chunked request body is over the %llu-byte limit "
                                 "(--max-body-bytes)", (unsigned long long)lim->max_body_bytes);
    case F_CHUNK_SIZE:
        return permitd_error_set(err, PERMITD_EINVAL, "chunk size \"%s\" is not a hex number",
                                 f->detail);
    case F_CHUNK_END:
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "a chunk's data is not followed by CR LF (bad chunk size?)");
    default:
        return permitd_error_set(err, PERMITD_EINVAL, "malformed request");
    }
}

#define PACK8(s) \
    (((uint64_t)(s)[0] << 56) | ((uint64_t)(s)[1] << 48) | ((uint64_t)(s)[2] << 40) | \
     ((uint64_t)(s)[3] << 32) | ((uint64_t)(s)[4] << 24) | ((uint64_t)(s)[5] << 16) | \
     ((uint64_t)(s)[6] << 8) | (uint64_t)(s)[7])

/* The request line just ended: METHOD SP target SP HTTP/1.x. */
static int request_line(struct framing *f)
{
    uint64_t v = f->last8;

    if (f->spaces != 2 || f->line[0] == ' ' || f->line_len < 12)
        return F_REQUEST_LINE;
    f->http10 = v == PACK8("HTTP/1.0");
    if (v == PACK8("HTTP/1.1") || f->http10)
        return F_NONE;
    if ((v >> 24) == (PACK8("HTTP/\0\0\0") >> 24))
        return F_VERSION;
    return F_REQUEST_LINE;
}

/* A header (or trailer) line just ended. */
static int header_line(struct framing *f, int trailer)
{
    size_t n = kept(f);
    const char *colon = memchr(f->line, ':', n);

    if (!f->colon)
        return F_NO_COLON;
    if (trailer || colon == NULL)
        return F_NONE;          /* a name longer than the kept part is neither */
    if ((size_t)(colon - f->line) == 14 && strncasecmp(f->line, "Content-Length", 14) == 0) {
        const char *v = colon + 1, *end = f->line + n;
        uint64_t cl = 0;
        int digits = 0;

        if (++f->ncl > 1)
            return F_CL_TWICE;
        set_detail(f, v, (size_t)(end - v));
        if (f->line_len > n)
            return F_CL_NUMBER;     /* longer than any length */
        while (v < end && (*v == ' ' || *v == '\t'))
            v++;
        for (; v < end && *v >= '0' && *v <= '9'; v++, digits++) {
            if (cl > (UINT64_MAX - 9) / 10)
                return F_BODY_SIZE;
            cl = cl * 10 + (uint64_t)(*v - '0');
        }
        while (v < end && (*v == ' ' || *v == '\t'))
            v++;
        if (digits == 0 || v != end)
            return F_CL_NUMBER;
        f->cl = cl;
    } else if ((size_t)(colon - f->line) == 17 &&
               strncasecmp(f->line, "Transfer-Encoding", 17) == 0) {
        const char *v = colon + 1;

        f->nte++;
        set_detail(f, v, (size_t)(f->line + n - v));
        f->te_chunked = f->line_len <= n && strcasecmp(f->detail, "chunked") == 0;
    }
    return F_NONE;
}

/* The head just ended: how its body is framed. */
static int head_end(struct framing *f, const struct framing_limits *lim)
{
    f->head_len = 0;
    if (f->ncl > 0 && f->nte > 0)
        return F_CL_AND_TE;
    if (f->nte > 0) {
        if (f->http10)
            return F_TE_HTTP10;
        if (f->nte > 1 || !f->te_chunked)
            return F_TE;
        f->body = 0;
        f->state = S_CHUNK_SIZE;
        return F_NONE;
    }
    if (f->ncl > 0 && f->cl > lim->max_body_bytes)
        return F_BODY_SIZE;
    f->left = f->ncl > 0 ? f->cl : 0;
    f->state = f->left > 0 ? S_BODY : S_LINE;
    return F_NONE;
}

/* A chunk-size line just ended: hex digits, then nothing or an extension. */
static int chunk_size(struct framing *f, const struct framing_limits *lim)
{
    size_t n = kept(f), i = 0;
    uint64_t size = 0;

    set_detail(f, f->line, n);
    for (; i < n; i++) {
        char c = f->line[i];
        int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (d < 0)
            break;
        if (size > (UINT64_MAX >> 4))
            return F_CHUNKED_SIZE;
        size = size << 4 | (uint64_t)d;
    }
    if (i == 0 || (i < n && f->line[i] != ';' && f->line[i] != ' ' && f->line[i] != '\t') ||
        (i == n && f->line_len > n))
        return F_CHUNK_SIZE;
    if (size > lim->max_body_bytes - f->body)
        return F_CHUNKED_SIZE;
    f->body += size;
    f->left = size;
    f->state = size > 0 ? S_CHUNK_DATA : S_TRAILER;
    f->head_len = 0;
    return F_NONE;
}

/* One line ended (its CR LF or LF read): what it means in f's state.
 * *done: it ended a request. */
static int line_end(struct framing *f, const struct framing_limits *lim, int *done)
{
    int rc = F_NONE;

    *done = 0;
    switch (f->state) {
    case S_LINE:
        if (f->line_len == 0)
            break;              /* an empty line before a request: skipped */
        if ((rc = request_line(f)) == F_NONE) {
            f->state = S_HEADER;
            f->ncl = f->nte = f->te_chunked = 0;
        }
        break;
    case S_HEADER:
        if (f->line_len > 0) {
            rc = header_line(f, 0);
            break;
        }
        rc = head_end(f, lim);
        *done = rc == F_NONE && f->state == S_LINE;
        break;
    case S_CHUNK_SIZE:
        rc = chunk_size(f, lim);
        break;
    case S_CHUNK_END:
        if (f->line_len != 0)
            rc = F_CHUNK_END;
        f->state = S_CHUNK_SIZE;
        break;
    case S_TRAILER:
        if (f->line_len > 0) {
            rc = header_line(f, 1);
            break;
        }
        f->state = S_LINE;
        *done = 1;
        break;
    }
    f->line_len = 0;
    f->colon = 0;
    f->spaces = 0;
    f->last8 = 0;
    if (f->state == S_LINE || *done)
        f->head_len = 0;
    return rc;
}

/* One byte of a line: kept, counted, checked as it comes. */
static int line_byte(struct framing *f, const struct framing_limits *lim, unsigned char c)
{
    int in_head = f->state == S_LINE || f->state == S_HEADER || f->state == S_TRAILER;

    if (in_head && ++f->head_len > lim->max_header_bytes)
        return F_HEAD_SIZE;
    if (f->state == S_CHUNK_END)
        return F_CHUNK_END;
    if (!in_head && f->line_len >= 1024)
        return F_CHUNK_SIZE;
    if (in_head && ((c < 0x20 && c != '\t') || c == 0x7f))
        return F_CONTROL;
    if (f->line_len < sizeof(f->line))
        f->line[f->line_len] = (char)c;
    if (f->state == S_LINE) {
        f->spaces += c == ' ' && f->spaces < 3;
        f->last8 = f->last8 << 8 | c;
    } else if (f->state == S_HEADER || f->state == S_TRAILER) {
        if (f->line_len == 0 && (c == ' ' || c == '\t'))
            return F_FOLDED;
        if (f->line_len == 0 && c == ':')
            return F_NO_NAME;
        if (!f->colon && c == ':')
            f->colon = 1;
        else if (!f->colon && (c == ' ' || c == '\t'))
            return F_SPACE_BEFORE_COLON;
    }
    f->line_len++;
    return F_NONE;
}

/* The bytes from data[0..n), at most `room`, that line_byte() would take
 * one by one with nothing to check but the head's size. In a header's
 * value: up to the first control character (CR and LF among them). In its
 * name (its first byte read) and in the request line: up to the first
 * control character, space, tab or colon (a colon ends a name; a request
 * line's spaces are counted one by one). */
static size_t plain_run(const struct framing *f, const unsigned char *data, size_t n,
                        size_t room)
{
    size_t k = 0;

    if (n > room)
        n = room;
    if (f->state == S_HEADER && f->colon) {
        while (k < n && (data[k] >= 0x20 || data[k] == '\t') && data[k] != 0x7f)
            k++;
    } else if ((f->state == S_HEADER && f->line_len > 0) || f->state == S_LINE) {
        while (k < n && data[k] > 0x20 && data[k] != 0x7f && data[k] != ':')
            k++;
    }
    return k;
}

int framing_read(struct framing *f, const struct framing_limits *lim, const char *data,
                 size_t n, size_t *keep, int *status, struct permitd_error *err)
{
    size_t i = 0, start = 0;    /* where the request being read began in data */
    int rc = F_NONE, done;

    *keep = 0;
    while (f->fail == F_NONE && i < n) {
        if (f->state == S_BODY || f->state == S_CHUNK_DATA) {
            size_t step = f->left < n - i ? (size_t)f->left : n - i;
            i += step;
            f->left -= step;
            if (f->left == 0) {
                if (f->state == S_BODY) {
                    f->state = S_LINE;
                    f->requests++;
                    start = i;
                } else {
                    f->state = S_CHUNK_END;
                }
            }
            continue;
        }
        if ((f->state == S_HEADER || f->state == S_LINE) && !f->cr &&
            f->head_len < lim->max_header_bytes) {
            /* A head's plain bytes in one step, kept and counted as
             * line_byte() would, the request line's last 8 too. */
            size_t run = plain_run(f, (const unsigned char *)data + i, n - i,
                                   lim->max_header_bytes - f->head_len);
            if (run > 0) {
                if (f->line_len < sizeof(f->line)) {
                    size_t room = sizeof(f->line) - f->line_len;
                    memcpy(f->line + f->line_len, data + i, run < room ? run : room);
                }
                if (f->state == S_LINE)
                    for (size_t k = run > 8 ? run - 8 : 0; k < run; k++)
                        f->last8 = f->last8 << 8 | (unsigned char)data[i + k];
                f->head_len += (uint32_t)run;
                f->line_len += (uint32_t)run;
                i += run;
                continue;
            }
        }
        unsigned char c = (unsigned char)data[i++];
        if (f->cr && c != '\n') {
            rc = F_CR;
        } else if (c == '\r') {
            f->cr = 1;
            continue;
        } else if (c == '\n') {
            f->cr = 0;
            if ((rc = line_end(f, lim, &done)) == F_NONE && done) {
                f->requests++;
                start = i;
            }
        } else {
            rc = line_byte(f, lim, c);
        }
        if (rc != F_NONE)
            f->fail = rc;
    }
    if (f->fail == F_NONE)
        return PERMITD_OK;
    if (rc != F_NONE)
        *keep = start;          /* it failed in this call */
    return failure(f, lim, status, err);
}
