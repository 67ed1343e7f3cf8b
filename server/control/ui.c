/*
 * ui.c - the admin UI's static files (admin-ui/), as admin.c serves them
 * on GET / and GET /ui/NAME: from --admin-ui-dir when set (development),
 * else from the copy embedded in the binary (core/embed.h), with the
 * headers that keep them where they belong (no framing, no sniffing,
 * scripts and styles from this origin only).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int ui_file(const char *dir, const char *name, struct http_response *resp)
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
        resp->body = (char *)e->data;
        resp->body_len = e->len;
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
