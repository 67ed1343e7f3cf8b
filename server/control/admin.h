/*
 * admin.h - the admin listener: the admin UI, PolicyService and
 * AdminAuthService (proto/permit/v1/admin.proto), /healthz and /readyz.
 * (The `permitd admin` command line is cli/cli_admin.c's.)
 *
 * Separate from the API listener, so what administrators reach is never
 * what applications reach: an application that can call Acquire cannot
 * change a policy.
 */
#ifndef PERMITD_ADMIN_H
#define PERMITD_ADMIN_H

#include "core/config.h"
#include "transport/http.h"
#include "decisions/limiter.h"
#include "stores/redis.h"
#include "decisions/stats.h"
#include "control/adminrpc.h"
#include "control/sync.h"

struct admin;
struct appsvc;
struct appkeys;
struct connect_call;
struct connect_method;
struct loop;
struct grpc_server;

/* Returns a new admin in *out (free with admin_free()). sync is NULL when
 * no policy store is configured (then only /healthz, /readyz and the UI's
 * files answer; the RPCs say MySQL is not configured). Everything passed
 * must outlive it. */
int admin_new(const struct config *cfg, struct redis *redis, struct limiter *limiter,
              struct sync *sync, struct stats *stats, struct admin **out,
              struct permitd_error *err);
void admin_free(struct admin *a);

/* Tells the admin which listeners to report on in /metrics (either may be
 * NULL); call once both have started. */
void admin_set_listeners(struct admin *a, struct http_server *api, struct http_server *admin);

/* Tells the admin the gRPC listener to report on in /metrics (NULL: none);
 * call once it has started, and stop the admin listener before it. */
void admin_set_grpc(struct admin *a, struct grpc_server *grpc);

/* Reports on keys in /readyz and /metrics; call before the listeners
 * start. */
void admin_set_appkeys(struct admin *a, struct appkeys *keys);

struct fleet;

/* Reports on the fleet publisher (control/fleet.h) in /metrics; fleet must
 * outlive a. Call before the listeners start. */
void admin_set_fleet(struct admin *a, struct fleet *fleet);

struct traffic;
struct trafficlog;

/* Reports on the traffic history's counts and writer (issue 39) in
 * /metrics; both must outlive a. Call before the listeners start. */
void admin_set_traffic(struct admin *a, struct traffic *traffic, struct trafficlog *log);

struct gatewaysync;
struct envoysvc;

/* Names the gateway rules whose policy is gone in /readyz (issue 40); s
 * must outlive a. Call before the listeners start. */
void admin_set_gatewaysync(struct admin *a, struct gatewaysync *s);
/* The Envoy descriptors' service, whose broken rows /readyz names. */
void admin_set_envoysvc(struct admin *a, struct envoysvc *s);

struct service;

/* Reports on the decision service's reservations pool in /metrics; s must
 * outlive a. Call before the listeners start. */
void admin_set_service(struct admin *a, struct service *s);

struct follow;

/* Reports on the change-notice listener in /metrics (NULL: no more); f
 * must outlive the listeners. */
void admin_set_follow(struct admin *a, struct follow *f);

/* Who calls: the session's user name into user (len bytes) when the call
 * carries a live session of an enabled user with the role needed (need:
 * ADMIN_VIEWER, ADMIN_EDITOR or ADMIN_ADMIN; 0 and 1 read as before the
 * admin role: anyone, editors); else PERMITD_EUNAUTHENTICATED, or
 * PERMITD_EPERM naming the user and the role. For the RPCs of other
 * control modules served on this listener (appsvc.c, usersvc.c). */
int admin_authenticate(struct admin *a, struct connect_call *call, int need, char *user,
                       size_t len, struct permitd_error *err);

/* Serves the Connect procedures of methods (a table ending in {NULL},
 * transport/connect.h) on this listener beside PolicyService, each handler
 * called with ud, under the listener's limits (--max-body-bytes): the way
 * in of every other admin service (AppService, UserService, AuditService,
 * GatewayService, EnvoyDescriptorService, FleetService, HotKeyService),
 * whose file then holds only its handlers and their table. Each handler
 * asks admin_authenticate() for the role it needs; the Origin check of a
 * POST is made for every procedure before any runs (admin.c). methods and
 * ud must outlive a. Call before the listeners start. PERMITD_OK, or
 * PERMITD_EEXHAUSTED naming the service when the table (12) is full. */
int admin_add_methods(struct admin *a, const struct connect_method *methods, void *ud,
                      struct permitd_error *err);

/* The admin listener's http_options worker_open and worker_close: its
 * worker's loop gets the inbox through which password checks (verifier.c)
 * come back, which the Login handler finds with http_request_worker(). The
 * loop's close frees the inbox, so worker_close has nothing left to do. */
int admin_worker_open(void *ud, struct loop *loop, void **worker, struct permitd_error *err);
void admin_worker_close(void *ud, void *worker);

/* The http_handler_fn of the admin listener; ud is the struct admin. */
void admin_handle(void *ud, const struct http_request *req, struct http_response *resp);

#endif
