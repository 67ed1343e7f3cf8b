/*
 * appsvc.h - AppService (proto/permit/v1/admin.proto) on the admin
 * listener, and the `permitd admin` verbs for apps and keys: add-app,
 * update-app, issue-key, revoke-key, list-apps.
 *
 * Both write MySQL (stores/apps.h). The admin listener's RPCs also change
 * this instance's key table at once (a key issued works here at the next
 * request, a key revoked stops here at the next request) and tell every
 * other instance through the change notice (control/appsync.h); the
 * command line sends the notice too when PERMITD_REDIS_URL is set, and
 * otherwise every instance picks the change up within one sync interval.
 */
#ifndef PERMITD_APPSVC_H
#define PERMITD_APPSVC_H

#include "core/config.h"
#include "core/status.h"
#include "decisions/appkeys.h"
#include "stores/redis.h"
#include "transport/connect.h"
#include "transport/http.h"

struct admin;
struct appsvc;

/* Returns a new AppService in *out (free with appsvc_free()). admin
 * decides who the caller is; cfg->mysql must be set. Everything passed
 * must outlive it. */
int appsvc_new(const struct config *cfg, struct admin *admin, struct redis *redis,
               struct appkeys *keys, struct appsvc **out, struct permitd_error *err);
void appsvc_free(struct appsvc *s);

/* The AppService procedures: admin_add_methods() (admin.h) serves them, ud
 * the appsvc. */
extern const struct connect_method appsvc_methods[];

/* 1 when verb is one of the command line's app verbs. */
int appsvc_cli_verb(const char *verb);

/* `permitd admin VERB ...` for an app verb (argv[0] is "admin"); returns
 * the exit status. */
int appsvc_cli_main(const struct config *cfg, int argc, char **argv);

/* The app verbs' part of `permitd admin --help`. */
void appsvc_cli_usage(FILE *out);

#endif
