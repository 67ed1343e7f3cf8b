/*
 * admin.c - the admin listener's router: what administrators reach, and
 * what every answer there carries. It serves /healthz, /readyz and
 * /metrics (health.c), the admin UI's files (ui.c), and the Connect
 * services of the control plane: its own PolicyService (policysvc.c) and
 * AdminAuthService (session.c), and those of other files
 * (admin_add_methods(): AppService, UserService, AuditService, ...).
 * (The `permitd admin` command line is cli/cli_admin.c's.)
 *
 * Who may do what is decided on this listener, for every RPC, not only in
 * the UI:
 *   - every RPC but Login needs a live session of a user with the role
 *     the RPC needs (session.c; viewers read, editors also write, admins
 *     also manage users);
 *   - a POST must carry an Origin equal to this listener's own origin
 *     (scheme://Host), and every request but the probes a Host that is an
 *     IP address, localhost or a name --admin-hosts lists, whatever the
 *     bind (which stops DNS rebinding), so a page on another site cannot make a
 *     logged-in browser change anything, and no CORS header is ever sent; connect.c
 *     already refuses any content type but JSON and proto, which a plain
 *     HTML form cannot send;
 *   - the RPCs run on a pool of their own (offload_rpc()), so /healthz,
 *     /readyz and /metrics answer at once whatever an RPC costs; Login
 *     stays on the listener's thread and defers by itself (session.c).
 *
 * The store connection is opened here and shared by session.c and
 * policysvc.c under one mutex: admin traffic is light.
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "control/admin.h"
#include "control/health.h"
#include "control/policysvc.h"
#include "control/session.h"
#include "control/ui.h"
#include "control/verifier.h"
#include "core/log.h"
#include "core/pool.h"
#include "stores/store.h"
#include "transport/connect.h"

#define ADMIN_HSTS_MAX_AGE_S (365 * 24 * 3600)
/* The admin RPCs' pool (core/pool.h): two threads, so one slow page does not
 * hold the next editor's RPC either; 64 waiting at most. */
#define ADMIN_RPC_WORKERS 2
#define ADMIN_RPC_QUEUE 64

/* The most services served here (admin_add_methods()): twelve of other
 * files, and this listener's own two (PolicyService, AdminAuthService). */
#define ADMIN_SERVICES_MAX (12 + 2)

struct admin {
    const struct config *cfg;
    struct store *store;            /* NULL without --mysql-url */
    struct verifier *verifier;      /* password checks; NULL without a store */
    struct session *sessions;       /* AdminAuthService and the role checks */
    struct policysvc *policies;     /* PolicyService */
    struct pool *rpcs;              /* the RPCs run here, off the listener's thread */
    struct health health;           /* what /readyz and /metrics report on */
    pthread_mutex_t store_lock;     /* held around every use of store */
    struct connect_limits limits;
    struct {
        const struct connect_method *methods;
        void *ud;
    } services[ADMIN_SERVICES_MAX]; /* admin_add_methods() */
    size_t nservices;
};

/* What each admin listener worker's loop has (admin_worker_open()): the
 * inboxes through which password checks and RPCs run elsewhere come back. */
struct admin_worker {
    struct session_worker sessions; /* first: session.c finds it with http_request_worker() */
    struct pool_inbox *rpcs;
};

/* Every admin answer's headers (admin_handle() adds them to the answers
 * made at once; ud is the struct admin). */
static void answer_headers(void *ud, struct http_response *resp);

int admin_new(const struct config *cfg, struct redis *redis, struct limiter *limiter,
              struct sync *sync, struct stats *stats, struct admin **out,
              struct permitd_error *err)
{
    struct admin *a = calloc(1, sizeof(*a));
    int rc;

    *out = NULL;
    if (a == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    a->cfg = cfg;
    a->limits.max_body_bytes = (size_t)cfg->max_body_bytes;
    a->health.redis = redis;
    a->health.limiter = limiter;
    a->health.sync = sync;
    a->health.stats = stats;
    pthread_mutex_init(&a->store_lock, NULL);
    if ((cfg->mysql_url[0] != '\0' && (rc = store_new(cfg, &a->store, err)) != PERMITD_OK) ||
        (a->store != NULL &&
         (rc = verifier_new(cfg->login_workers, cfg->login_queue, &a->verifier,
                            err)) != PERMITD_OK) ||
        (rc = pool_new(ADMIN_RPC_WORKERS, ADMIN_RPC_QUEUE, "admin rpc pool", &a->rpcs,
                       err)) != PERMITD_OK ||
        (rc = session_new(cfg, redis, a->store, &a->store_lock, limiter, sync,
                          a->verifier, answer_headers, a, &a->sessions, err)) != PERMITD_OK ||
        (rc = policysvc_new(cfg, redis, limiter, sync, stats, a->store, &a->store_lock,
                            a->sessions, &a->policies, err)) != PERMITD_OK ||
        (rc = admin_add_methods(a, policysvc_methods, a->policies, err)) != PERMITD_OK ||
        (rc = admin_add_methods(a, session_methods, a->sessions, err)) != PERMITD_OK) {
        admin_free(a);
        return rc;
    }
    a->health.verifier = a->verifier;
    *out = a;
    return PERMITD_OK;
}

void admin_free(struct admin *a)
{
    if (a == NULL)
        return;
    policysvc_free(a->policies);
    session_free(a->sessions);
    verifier_free(a->verifier);
    pool_free(a->rpcs);
    store_free(a->store);
    pthread_mutex_destroy(&a->store_lock);
    free(a);
}

int admin_authenticate(struct admin *a, struct connect_call *call, int need, char *user,
                       size_t len, struct permitd_error *err)
{
    struct store_user u;
    int rc = session_authenticate(a->sessions, call,
                                  need >= ADMIN_ADMIN ? ADMIN_ADMIN : need ? ADMIN_EDITOR
                                                                           : ADMIN_VIEWER,
                                  &u, err);

    if (rc == PERMITD_OK)
        snprintf(user, len, "%s", u.username);
    return rc;
}

void admin_set_fleet(struct admin *a, struct fleet *fleet)
{
    a->health.fleet = fleet;
}

void admin_set_traffic(struct admin *a, struct traffic *traffic, struct trafficlog *log)
{
    a->health.traffic = traffic;
    a->health.trafficlog = log;
}

void admin_set_gatewaysync(struct admin *a, struct gatewaysync *s)
{
    a->health.gwsync = s;
}

void admin_set_envoysvc(struct admin *a, struct envoysvc *s)
{
    a->health.envoysvc = s;
}

void admin_set_service(struct admin *a, struct service *s)
{
    a->health.service = s;
}

void admin_set_follow(struct admin *a, struct follow *f)
{
    a->health.follow = f;
}

void admin_set_appkeys(struct admin *a, struct appkeys *keys)
{
    a->health.appkeys = keys;
}

int admin_add_methods(struct admin *a, const struct connect_method *methods, void *ud,
                      struct permitd_error *err)
{
    if (a->nservices == ADMIN_SERVICES_MAX)
        return permitd_error_set(err, PERMITD_EEXHAUSTED, "admin listener: no room for the "
                                 "service of %.200s (%d services at most)", methods[0].path,
                                 ADMIN_SERVICES_MAX);
    a->services[a->nservices].methods = methods;
    a->services[a->nservices++].ud = ud;
    return PERMITD_OK;
}

/* ---- /readyz and /metrics (health.c) ---- */

int admin_worker_open(void *ud, struct loop *loop, void **worker, struct permitd_error *err)
{
    struct admin *a = ud;
    struct admin_worker *w = calloc(1, sizeof(*w));
    int rc;

    *worker = NULL;
    if (w == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    /* (no store: no logins to check) */
    if ((a->verifier != NULL &&
         (rc = verifier_inbox_new(a->verifier, loop, &w->sessions.logins, err)) != PERMITD_OK) ||
        (rc = pool_inbox_new(a->rpcs, loop, &w->rpcs, err)) != PERMITD_OK) {
        free(w);                    /* the loop's close frees an inbox attached */
        return rc;
    }
    *worker = w;
    return PERMITD_OK;
}

void admin_worker_close(void *ud, void *worker)
{
    (void)ud;
    free(worker);
}

void admin_set_listeners(struct admin *a, struct http_server *api, struct http_server *admin)
{
    a->health.listeners[0] = api;
    a->health.listeners[1] = admin;
}

void admin_set_grpc(struct admin *a, struct grpc_server *grpc)
{
    a->health.grpc = grpc;
}

/* A name a browser may rightly use for this listener, whatever it is bound
 * to: an IP address (a literal cannot be rebound), "localhost", or a name
 * --admin-hosts lists ("*": any). Any other name in Host is a DNS
 * rebinding page that points its own name at this address, which a
 * loopback bind does not stop either: Docker binds 0.0.0.0 behind a
 * 127.0.0.1 port map, and the port in Host is the map's, not ours. A
 * request without Host (HTTP/1.0) comes from no browser: allowed here
 * (same_origin() still needs one). */
static int host_allowed(const struct admin *a, const char *host)
{
    char name[256];
    const char *colon, *list = a->cfg->admin_hosts;
    size_t n;
    unsigned char addr[16];

    if (host == NULL)
        return 1;
    if (host[0] == '[') {
        const char *end = strchr(host, ']');
        if (end == NULL || (size_t)(end - host - 1) >= sizeof(name))
            return 0;
        n = (size_t)(end - host - 1);
        memcpy(name, host + 1, n);
        name[n] = '\0';
        colon = end[1] == ':' ? end + 1 : end[1] == '\0' ? end + 1 : NULL;
        if (colon == NULL)
            return 0;
        if (inet_pton(AF_INET6, name, addr) != 1)
            return 0;
    } else {
        colon = strchr(host, ':');
        n = colon ? (size_t)(colon - host) : strlen(host);
        if (n == 0 || n >= sizeof(name))
            return 0;
        memcpy(name, host, n);
        name[n] = '\0';
        if (colon == NULL)
            colon = host + n;
    }
    /* The port, if any: digits only. */
    if (*colon == ':' && (colon[1] == '\0' || strspn(colon + 1, "0123456789") != strlen(colon + 1)))
        return 0;
    if (host[0] == '[' || inet_pton(AF_INET, name, addr) == 1)
        return 1;
    if (n > 1 && name[n - 1] == '.')
        name[--n] = '\0';
    if (strcasecmp(name, "localhost") == 0)
        return 1;
    while (*list != '\0') {
        size_t len = strcspn(list, ",");
        const char *item = list;
        while (len > 0 && *item == ' ')
            item++, len--;
        while (len > 0 && item[len - 1] == ' ')
            len--;
        if ((len == 1 && item[0] == '*') || (len == n && strncasecmp(item, name, n) == 0))
            return 1;
        list += strcspn(list, ",");
        if (*list == ',')
            list++;
    }
    return 0;
}

/* A state-changing request must come from a page of this listener. */
static int same_origin(const struct admin *a, const struct http_request *req)
{
    const char *origin = http_request_header(req, "Origin");
    const char *host = http_request_header(req, "Host");
    size_t n;

    if (origin == NULL || host == NULL || !host_allowed(a, host))
        return 0;
    if (strncmp(origin, "http://", 7) == 0)
        n = 7;
    else if (strncmp(origin, "https://", 8) == 0)
        n = 8;
    else
        return 0;
    return strcasecmp(origin + n, host) == 0;
}

static void text(struct http_response *resp, int status, const char *body)
{
    resp->status = status;
    resp->content_type = "text/plain; charset=utf-8";
    resp->body = (char *)body;
    resp->body_len = strlen(body);
}

/* Everything but the UI's files (which say so themselves) answers with
 * data that is live or private: sessions, policies, health. No cache or
 * proxy may keep it, and no browser may guess it is HTML or script. */
static void no_store(struct http_response *resp)
{
    http_response_header(resp, "Cache-Control", "no-store");
    http_response_header(resp, "X-Content-Type-Options", "nosniff");
}

/* An RPC, or the 404 of a path that is none. */
static void serve(struct admin *a, const struct http_request *req, struct http_response *resp)
{
    struct permitd_error err;

    for (size_t i = 0; i < a->nservices; i++) {
        if (connect_serve(a->services[i].methods, a->services[i].ud, &a->limits, req, resp)) {
            no_store(resp);
            return;
        }
    }
    permitd_error_set(&err, PERMITD_EUNIMPLEMENTED, "no procedure or page %.200s",
                      http_request_path(req));
    connect_error_reply(resp, &err);
    resp->status = 404;
    no_store(resp);
}

/* An RPC on its way through the pool (core/pool.h): in the request's
 * storage, as long as the request. */
struct rpc {
    struct pool_job job;            /* first: the pool hands this back */
    struct admin *a;
    const struct http_request *req;
    struct http_response resp;
};

static void rpc_run(struct pool_job *j)
{
    struct rpc *r = (struct rpc *)j;

    http_response_init(&r->resp);
    serve(r->a, r->req, &r->resp);
}

static void rpc_done(struct pool_job *j)
{
    struct rpc *r = (struct rpc *)j;

    answer_headers(r->a, &r->resp);
    http_request_resume(r->req, &r->resp);
}

/* Hands an RPC to the pool, so the listener's thread goes back to
 * accepting and answering /healthz, /readyz and /metrics at once, whatever
 * the RPC costs (issue 22). Login stays here: it defers by itself, and its
 * argon2 runs on the verifier's threads. Returns 1 when the RPC went (it
 * is answered later, or resp holds why not: a full queue), 0 when it is
 * to be served here (no loop to come back to, out of memory). */
static int offload_rpc(struct admin *a, const struct http_request *req,
                       struct http_response *resp)
{
    struct admin_worker *w = http_request_worker(req);
    struct permitd_error err = {0, ""};
    struct pool_load seen;
    struct rpc *r;

    if (w == NULL || w->rpcs == NULL || http_request_detach(req) != 0 ||
        (r = http_request_alloc(req, sizeof(*r))) == NULL)
        return 0;
    r->job = (struct pool_job){rpc_run, rpc_done, NULL, NULL, NULL};
    r->a = a;
    r->req = req;
    http_request_defer(req);
    if (pool_submit(a->rpcs, w->rpcs, &r->job, &seen) != PERMITD_OK) {
        permitd_error_set(&err, PERMITD_EEXHAUSTED, "too many admin calls at once (%u running, "
                          "%u waiting); try again in a moment", seen.busy, seen.waiting);
        http_response_init(&r->resp);
        connect_error_reply(&r->resp, &err);
        rpc_done(&r->job);
    }
    return 1;
}

/* Routes one request; admin_handle() adds what every answer carries. */
static void route(struct admin *a, const struct http_request *req, struct http_response *resp)
{
    const char *path = http_request_path(req), *method = http_request_method(req);
    struct permitd_error err;

    if (strcmp(path, "/healthz") == 0) {
        text(resp, 200, "ok\n");
        no_store(resp);
        return;
    }
    if (strcmp(path, "/readyz") == 0) {
        health_readyz(&a->health, resp);
        no_store(resp);
        return;
    }
    /* Past the probes, whatever the bind: no DNS name this listener was not
     * told it has (host_allowed()). */
    if (!host_allowed(a, http_request_header(req, "Host"))) {
        permitd_error_set(&err, PERMITD_EPERM,
                          "Host %s refused: the admin listener answers to IP addresses, "
                          "localhost and the names in --admin-hosts only (DNS rebinding)",
                          log_q(http_request_header(req, "Host")));
        connect_error_reply(resp, &err);
        no_store(resp);
        return;
    }
    if (strcmp(path, "/metrics") == 0) {
        health_metrics(&a->health, resp);
        no_store(resp);
        return;
    }
    if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0) {
        const char *ae = http_request_header_all(req, "Accept-Encoding");
        if (strcmp(path, "/") == 0 && ui_file(a->cfg->admin_ui_dir, "index.html", ae, resp))
            return;
        if (strncmp(path, "/ui/", 4) == 0 && ui_file(a->cfg->admin_ui_dir, path + 4, ae, resp))
            return;
    }
    if (strcmp(method, "POST") == 0 && strncmp(path, "/permit.v1.", 11) == 0 && !same_origin(a, req)) {
        permitd_error_set(&err, PERMITD_EPERM,
                          "cross-origin request refused: the Origin header must be this admin "
                          "listener's own origin");
        connect_error_reply(resp, &err);
        no_store(resp);
        return;
    }
    if (strncmp(path, "/permit.v1.", 11) == 0 && strcmp(path, SESSION_LOGIN_PATH) != 0 &&
        offload_rpc(a, req, resp))
        return;
    serve(a, req, resp);
}

/* Under TLS, a browser that has seen this listener once never talks to it
 * over plain HTTP again (a year), so no one on the path can downgrade it
 * and read the session cookie. */
static void hsts(const struct admin *a, struct http_response *resp)
{
    if (a->cfg->tls_cert[0] != '\0')
        http_response_header(resp, "Strict-Transport-Security", "max-age=%d", ADMIN_HSTS_MAX_AGE_S);
}

static void answer_headers(void *ud, struct http_response *resp)
{
    const struct admin *a = ud;

    no_store(resp);
    hsts(a, resp);
}

void admin_handle(void *ud, const struct http_request *req, struct http_response *resp)
{
    struct admin *a = ud;

    route(a, req, resp);
    hsts(a, resp);
}
