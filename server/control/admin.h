/*
 * admin.h - the admin listener: the admin UI, PolicyService and
 * AdminAuthService (proto/permit/v1/admin.proto), /healthz and /readyz;
 * and the `permitd admin` command line.
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
#include "control/sync.h"

struct admin;
struct appsvc;
struct appkeys;
struct connect_call;
struct loop;

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

/* Serves AppService through apps (may be NULL: no MySQL) and reports on
 * keys in /readyz and /metrics; call before the listeners start. */
void admin_set_apps(struct admin *a, struct appsvc *apps, struct appkeys *keys);

struct gatewaysvc;

/* Serves GatewayService (control/gatewaysvc.h) on this listener too;
 * gateway must outlive a. Call before the listener starts. */
void admin_set_gateway(struct admin *a, struct gatewaysvc *gateway);
struct envoysvc;

/* Serves EnvoyDescriptorService (control/envoysvc.h) on this listener;
 * call before the listeners start. */
void admin_set_envoy(struct admin *a, struct envoysvc *envoy);
/* Serves FleetService through svc (control/fleetsvc.h) and reports on the
 * publisher fleet in /metrics; call before the listeners start. */
struct fleet;
struct fleetsvc;
void admin_set_fleet(struct admin *a, struct fleetsvc *svc, struct fleet *fleet);
struct hotkeysvc;

/* Serves HotKeyService (control/hotkeysvc.h) on this listener too; call
 * before the listeners start. */
void admin_set_hotkeys(struct admin *a, struct hotkeysvc *hot);

/* Who calls: the session's user name into user (len bytes) when the call
 * carries a live session with the role needed (editor: 1 for editors
 * only, 0 for viewers too); else PERMITD_EUNAUTHENTICATED, or
 * PERMITD_EPERM naming the user and the role. For the RPCs of other
 * control modules served on this listener (appsvc.c). */
int admin_authenticate(struct admin *a, struct connect_call *call, int editor, char *user,
                       size_t len, struct permitd_error *err);

/* The admin listener's http_options worker_open and worker_close: its
 * worker's loop gets the inbox through which password checks (verifier.c)
 * come back, which the Login handler finds with http_request_worker(). The
 * loop's close frees the inbox, so worker_close has nothing left to do. */
int admin_worker_open(void *ud, struct loop *loop, void **worker, struct permitd_error *err);
void admin_worker_close(void *ud, void *worker);

/* The http_handler_fn of the admin listener; ud is the struct admin. */
void admin_handle(void *ud, const struct http_request *req, struct http_response *resp);

/* `permitd admin VERB ...` (argv[0] is "admin"); returns the exit status. */
int admin_cli_main(const struct config *cfg, int argc, char **argv);

#endif
