/*
 * urlpath.c - a request path's normal form (see urlpath.h).
 *
 * Two passes over a bounded copy: the first decodes the unreserved escapes
 * and capitalises the others while it copies the path (query and fragment
 * left behind), the second walks the segments with a stack of where each
 * output segment starts, dropping empty and "." segments and popping one
 * for "..": RFC 3986's remove_dot_segments, with "//" treated as "/". A
 * trailing "/" (or a last "." or "..", which name a directory) is kept, so
 * "/api/" still matches a rule "/api/" and "/api" does not.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "core/urlpath.h"

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int unreserved(int c)
{
    return isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

/* The path of uri, its unreserved escapes decoded, into buf (cap bytes);
 * its length. */
static size_t decode(const char *uri, char *buf, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    const char *p = uri;

    /* absolute-form (RFC 9112 3.2.2): scheme "://" authority, then the path */
    if (strncasecmp(p, "http://", 7) == 0 || strncasecmp(p, "https://", 8) == 0) {
        p = strstr(p, "://") + 3;
        p += strcspn(p, "/?#");
    }
    if (*p != '/' && n < cap)
        buf[n++] = '/';
    for (; *p != '\0' && *p != '?' && *p != '#' && n + 3 <= cap; p++) {
        int hi, lo;
        if (*p == '%' && (hi = hexval((unsigned char)p[1])) >= 0 &&
            (lo = hexval((unsigned char)p[2])) >= 0) {
            int c = hi * 16 + lo;
            if (unreserved(c)) {
                buf[n++] = (char)c;
            } else {
                buf[n++] = '%';
                buf[n++] = hex[hi];
                buf[n++] = hex[lo];
            }
            p += 2;
        } else {
            buf[n++] = *p;
        }
    }
    return n;
}

size_t urlpath_normalise(const char *uri, char *out, size_t len)
{
    char stackbuf[4096], *buf = stackbuf;
    size_t cap = strlen(uri) + 4, n, o = 0, i = 0;    /* + the leading "/" */
    size_t *starts, nstarts = 0, stackstarts[512];

    if (cap > sizeof(stackbuf) && (buf = malloc(cap)) == NULL)
        cap = sizeof(stackbuf), buf = stackbuf;     /* out of memory: the first 4 KiB */
    n = decode(uri, buf, cap);
    starts = stackstarts;
    if (n / 2 + 1 > sizeof(stackstarts) / sizeof(stackstarts[0]) &&
        (starts = malloc((n / 2 + 1) * sizeof(*starts))) == NULL) {
        starts = stackstarts;
        n = sizeof(stackstarts) / sizeof(stackstarts[0]) * 2 - 2;
    }
    /* buf[0] is '/'. Each step reads one segment after a run of slashes. */
    char *w = buf;          /* the output is written over the input, never ahead of it */
    while (i < n) {
        size_t s, e;
        while (i < n && buf[i] == '/')
            i++;
        s = i;
        while (i < n && buf[i] != '/')
            i++;
        e = i;
        if (e - s == 1 && buf[s] == '.') {
            if (i >= n)
                w[o++] = '/';           /* "/a/." names the directory: "/a/" */
            continue;
        }
        if (e - s == 2 && buf[s] == '.' && buf[s + 1] == '.') {
            if (nstarts > 0)
                o = starts[--nstarts];
            if (i >= n)
                w[o++] = '/';
            continue;
        }
        if (e == s) {               /* the slashes ended the path */
            w[o++] = '/';
            continue;
        }
        starts[nstarts++] = o;
        w[o++] = '/';
        memmove(w + o, buf + s, e - s);
        o += e - s;
    }
    if (o == 0)
        w[o++] = '/';
    if (o >= len)
        o = len - 1;
    memcpy(out, w, o);
    out[o] = '\0';
    if (starts != stackstarts)
        free(starts);
    if (buf != stackbuf)
        free(buf);
    return o;
}
