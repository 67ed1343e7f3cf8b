/*
 * ui.c - the admin UI's static files (admin-ui/), as admin.c serves them
 * on GET / and GET /ui/NAME: from --admin-ui-dir when set (development),
 * else from the copy embedded in the binary (core/embed.h), with the
 * headers that keep them where they belong (no framing, no sniffing,
 * scripts and styles from this origin only). The embedded files are
 * gzipped at build too (cmake/embed.cmake): a client whose
 * Accept-Encoding allows gzip gets that copy, Content-Encoding: gzip.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "control/ui.h"
#include "core/embed.h"

static const char *content_type(const char *name)
{
    const char *dot = strrchr(name, '.');

    if (dot == NULL)
        return "application/octet-stream";
    if (strcmp(dot, ".html") == 0)
        return "text/html; charset=utf-8";
    if (strcmp(dot, ".js") == 0 || strcmp(dot, ".mjs") == 0)
        return "text/javascript; charset=utf-8";
    if (strcmp(dot, ".css") == 0)
        return "text/css; charset=utf-8";
    if (strcmp(dot, ".svg") == 0)
        return "image/svg+xml";
    if (strcmp(dot, ".png") == 0)
        return "image/png";
    if (strcmp(dot, ".ico") == 0)
        return "image/x-icon";
    if (strcmp(dot, ".json") == 0)
        return "application/json";
    return "application/octet-stream";
}

/* 1 when the Accept-Encoding value accept allows gzip: "gzip" (or
 * "x-gzip", or "*" when gzip is not named) with no q or a q above 0.
 * NULL, unparsable parameters or q=0 are no. */
static int accepts_gzip(const char *accept)
{
    int star = 0;

    if (accept == NULL)
        return 0;
    while (*accept != '\0') {
        const char *tok, *end, *semi;
        size_t n;
        int ok = 1;

        while (*accept == ' ' || *accept == '\t' || *accept == ',')
            accept++;
        if (*accept == '\0')
            break;
        tok = accept;
        end = strchr(tok, ',');
        if (end == NULL)
            end = tok + strlen(tok);
        accept = end;
        semi = memchr(tok, ';', (size_t)(end - tok));
        n = (size_t)((semi != NULL ? semi : end) - tok);
        while (n > 0 && (tok[n - 1] == ' ' || tok[n - 1] == '\t'))
            n--;
        if (semi != NULL) {
            /* ";q=0", ";q=0.0", ";q=0.000": refused; any other q accepts. */
            const char *q = semi + 1;
            while (q < end && (*q == ' ' || *q == '\t'))
                q++;
            if (end - q >= 2 && (q[0] == 'q' || q[0] == 'Q') && q[1] == '=') {
                q += 2;
                ok = 0;
                for (; q < end && *q != ' ' && *q != '\t' && *q != ';'; q++)
                    if (*q >= '1' && *q <= '9')
                        ok = 1;
            }
        }
        if ((n == 4 && strncasecmp(tok, "gzip", 4) == 0) ||
            (n == 6 && strncasecmp(tok, "x-gzip", 6) == 0))
            return ok;
        if (n == 1 && tok[0] == '*')
            star = ok;
    }
    return star;
}

int ui_file(const char *dir, const char *name, const char *accept_encoding,
            struct http_response *resp)
{
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '.' || *c == '-' || *c == '_') || (c == name && *c == '.'))
            return 0;
    if (dir[0] != '\0') {
        char path[1200];
        FILE *f;
        long len;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "rb");
        if (f == NULL)
            return 0;
        if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
            (resp->body = malloc((size_t)len + 1)) == NULL) {
            fclose(f);
            return 0;
        }
        resp->body_len = fread(resp->body, 1, (size_t)len, f);
        resp->body_owned = 1;
        fclose(f);
    } else {
        const struct embedded_file *e = embed_find(admin_ui_files, name);
        if (e == NULL)
            return 0;
        if (e->gz != NULL && accepts_gzip(accept_encoding)) {
            resp->body = (char *)e->gz;
            resp->body_len = e->gz_len;
            http_response_header(resp, "Content-Encoding", "gzip");
        } else {
            resp->body = (char *)e->data;
            resp->body_len = e->len;
        }
        http_response_header(resp, "Vary", "Accept-Encoding");
    }
    resp->content_type = content_type(name);
    http_response_header(resp, "Cache-Control", "no-cache");
    http_response_header(resp, "X-Content-Type-Options", "nosniff");
    http_response_header(resp, "X-Frame-Options", "DENY");
    http_response_header(resp, "Content-Security-Policy",
                         "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                         "script-src 'self'; connect-src 'self'; frame-ancestors 'none'");
    return 1;
}
