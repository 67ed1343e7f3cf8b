/*
 * test_ui.c - the admin UI's files (server/control/ui.c): the embedded
 * copy served by name with its content type and the UI's headers, a
 * folder given by --admin-ui-dir read instead, and every name that is not
 * a bare file name (a path, a dot file, a byte outside the alphabet)
 * refused before anything is opened.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control/ui.h"
#include "test.h"

/* The value of header name in resp, or NULL. */
static const char *header(const struct http_response *resp, const char *name)
{
    for (int i = 0; i < resp->nheaders; i++)
        if (strcmp(resp->headers[i].name, name) == 0)
            return resp->headers[i].value;
    return NULL;
}

static void done(struct http_response *resp)
{
    if (resp->body_owned)
        free(resp->body);
    http_response_init(resp);
}

static void test_ui_embedded_files(void)
{
    struct http_response resp;

    http_response_init(&resp);
    CHECK_INT(ui_file("", "index.html", NULL, &resp), 1);
    CHECK_STR(resp.content_type, "text/html; charset=utf-8");
    CHECK(resp.body_len > 0);
    CHECK_INT(resp.body_owned, 0);          /* the binary's own copy */
    CHECK(resp.body_len > 15 && memcmp(resp.body, "<!doctype html>", 15) == 0);
    CHECK_STR(header(&resp, "Cache-Control"), "no-cache");
    CHECK_STR(header(&resp, "X-Content-Type-Options"), "nosniff");
    CHECK_STR(header(&resp, "X-Frame-Options"), "DENY");
    CHECK_CONTAINS(header(&resp, "Content-Security-Policy"), "frame-ancestors 'none'");
    CHECK_CONTAINS(header(&resp, "Content-Security-Policy"), "script-src 'self'");
    done(&resp);

    CHECK_INT(ui_file("", "app.js", NULL, &resp), 1);
    CHECK_STR(resp.content_type, "text/javascript; charset=utf-8");
    done(&resp);

    CHECK_INT(ui_file("", "no-such-file.js", NULL, &resp), 0);
    CHECK_INT(resp.nheaders, 0);
    done(&resp);
}

static void test_ui_names_refused(void)
{
    static const char *const bad[] = {"../index.html", "a/index.html", ".index.html",
                                      "index.html?x", "index html", "index.html\n", "%2e%2e"};
    struct http_response resp;

    http_response_init(&resp);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_INT(ui_file("", bad[i], NULL, &resp), 0);
        CHECK_INT(resp.nheaders, 0);
        CHECK(resp.body == NULL);
    }
    /* Not even in a folder where such a file exists. */
    CHECK_INT(ui_file("/etc", "../etc/hostname", NULL, &resp), 0);
    CHECK_INT(ui_file("/", ".dockerenv", NULL, &resp), 0);
}

/* --admin-ui-dir: files come from the folder (not the embedded copy), each
 * with the type its extension says. */
static void test_ui_dir(void)
{
    char dir[] = "/tmp/test_ui_XXXXXX", path[128];
    static const struct { const char *name, *body, *type; } files[] = {
        {"index.html", "<p>dev</p>", "text/html; charset=utf-8"},
        {"x.css", "p{}", "text/css; charset=utf-8"},
        {"m.mjs", "export{}", "text/javascript; charset=utf-8"},
        {"i.svg", "<svg/>", "image/svg+xml"},
        {"f.png", "PNG", "image/png"},
        {"f.ico", "ICO", "image/x-icon"},
        {"d.json", "{}", "application/json"},
        {"raw.bin", "\x01\x02", "application/octet-stream"},
        {"noext", "n", "application/octet-stream"},
    };
    struct http_response resp;

    CHECK(mkdtemp(dir) != NULL);
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        FILE *f;
        snprintf(path, sizeof(path), "%s/%s", dir, files[i].name);
        CHECK((f = fopen(path, "wb")) != NULL);
        if (f != NULL) {
            fputs(files[i].body, f);
            fclose(f);
        }
    }
    http_response_init(&resp);
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        CHECK_INT(ui_file(dir, files[i].name, NULL, &resp), 1);
        CHECK_STR(resp.content_type, files[i].type);
        CHECK_INT(resp.body_len, strlen(files[i].body));
        CHECK(resp.body != NULL && memcmp(resp.body, files[i].body, resp.body_len) == 0);
        CHECK_INT(resp.body_owned, 1);
        CHECK_STR(header(&resp, "X-Frame-Options"), "DENY");
        done(&resp);
    }
    /* The folder replaces the embedded copy: what it lacks is not found. */
    CHECK_INT(ui_file(dir, "app.js", NULL, &resp), 0);
    done(&resp);
    /* A name with a path in it is refused though the file is there. */
    snprintf(path, sizeof(path), "%s/sub", dir);
    CHECK(mkdir(path, 0700) == 0);
    snprintf(path, sizeof(path), "%s/sub/s.css", dir);
    {
        FILE *f = fopen(path, "wb");
        CHECK(f != NULL);
        if (f != NULL)
            fclose(f);
    }
    CHECK_INT(ui_file(dir, "sub/s.css", NULL, &resp), 0);
    done(&resp);
    CHECK_INT(ui_file(dir, "sub/../index.html", NULL, &resp), 0);
    done(&resp);
    unlink(path);
    snprintf(path, sizeof(path), "%s/sub", dir);
    rmdir(path);
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i].name);
        unlink(path);
    }
    rmdir(dir);
}

int main(void)
{
    TEST_RUN(test_ui_embedded_files);
    TEST_RUN(test_ui_names_refused);
    TEST_RUN(test_ui_dir);
    return TEST_REPORT();
}
