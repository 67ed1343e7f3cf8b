/*
 * admin.c - the admin listener's routes.
 *
 * /readyz answers 200 only when this instance can do its whole job: Redis
 * answers, and (with a policy store) the last MySQL sync succeeded. Its
 * plain-text body says what is wrong, one line per dependency, so an
 * operator reading it needs no log:
 *   redis: ok
 *   mysql sync: failing for 12 s: mysql at mysql://permitd:***@db:3306/permitd: cannot connect ...
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "clock.h"

#define READYZ_REDIS_DEADLINE_MS 250

struct admin {
    const struct config *cfg;
    struct redis *redis;
    struct sync *sync;
};

int admin_new(const struct config *cfg, struct redis *redis, struct sync *sync,
              struct admin **out, struct permitd_error *err)
{
    struct admin *a = calloc(1, sizeof(*a));

    *out = NULL;
    if (a == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    a->cfg = cfg;
    a->redis = redis;
    a->sync = sync;
    *out = a;
    return PERMITD_OK;
}

void admin_free(struct admin *a)
{
    free(a);
}

static void readyz(struct admin *a, struct http_response *resp)
{
    struct permitd_error err = {0, ""};
    size_t cap = 2048, n = 0;
    char *body = malloc(cap);
    int ready = 1;

    if (body == NULL) {
        resp->status = 500;
        return;
    }
    if (redis_ping(a->redis, clock_now_us() + READYZ_REDIS_DEADLINE_MS * 1000, &err) == PERMITD_OK) {
        n += (size_t)snprintf(body + n, cap - n, "redis: ok\n");
    } else {
        ready = 0;
        n += (size_t)snprintf(body + n, cap - n, "redis: %s\n", err.message);
    }
    if (a->sync == NULL) {
        n += (size_t)snprintf(body + n, cap - n, "mysql sync: off (no --mysql-url)\n");
    } else {
        struct sync_status st;
        int64_t now = clock_now_us();

        sync_get_status(a->sync, &st);
        if (!st.ever_succeeded && st.passes == 0) {
            ready = 0;
            n += (size_t)snprintf(body + n, cap - n, "mysql sync: first pass not done yet\n");
        } else if (st.failing) {
            ready = 0;
            n += (size_t)snprintf(body + n, cap - n,
                                  "mysql sync: failing (%" PRIu64 " failures; last success %s%" PRId64
                                  " s ago): %s\n", st.failures,
                                  st.ever_succeeded ? "" : "never, ",
                                  st.ever_succeeded ? (now - st.last_success_us) / 1000000 : 0,
                                  st.last_error);
        } else {
            n += (size_t)snprintf(body + n, cap - n,
                                  "mysql sync: ok, %zu policies, last pass %" PRId64 " ms ago\n",
                                  st.last.policies, (now - st.last_success_us) / 1000);
        }
    }
    if (n >= cap)
        n = cap - 1;
    resp->status = ready ? 200 : 503;
    resp->content_type = "text/plain; charset=utf-8";
    resp->body = body;
    resp->body_len = n;
    resp->body_owned = 1;
}

void admin_handle(void *ud, const struct http_request *req, struct http_response *resp)
{
    struct admin *a = ud;
    const char *path = http_request_path(req);

    if (strcmp(path, "/healthz") == 0) {
        resp->content_type = "text/plain";
        resp->body = (char *)"ok\n";
        resp->body_len = 3;
        return;
    }
    if (strcmp(path, "/readyz") == 0) {
        readyz(a, resp);
        return;
    }
    resp->status = 404;
    resp->content_type = "text/plain";
    resp->body = (char *)"not found\n";
    resp->body_len = 10;
}
