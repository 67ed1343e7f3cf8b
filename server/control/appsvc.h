/*
 * appsvc.h - AppService (proto/permit/v1/admin.proto) on the admin
 * listener, and what the `permitd admin` verbs for apps and keys
 * (cli/cli_apps.c: add-app, update-app, issue-key, revoke-key, list-apps)
 * share with it.
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
struct apps_db;
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

/* The longest life a key may be given: ten years; a longer one is
 * "never", which says what it means. */
#define APPSVC_EXPIRES_MAX_S (10LL * 366 * 24 * 3600)

/* An app's description as AppService and `permitd admin` accept it (at
 * most 1024 bytes); else PERMITD_EINVAL naming the field. */
int appsvc_check_description(const char *d, struct permitd_error *err);

/* Makes, stores in db and, when keys is not NULL, enables on this
 * instance a new key of app, expiring in expires_in_s (0: never) and
 * audited as actor. On PERMITD_OK *minted holds the key, to be shown once
 * and then wiped by the caller. The AppService IssueKey and `permitd admin
 * issue-key` (cli/cli_apps.c). */
int appsvc_issue(const struct config *cfg, struct apps_db *db, struct appkeys *keys,
                 const char *app, int64_t expires_in_s, const char *actor,
                 struct appkeys_minted *minted, struct permitd_error *err);

/* Revokes the key given (its prefix, or the whole key) as actor, in db and
 * in keys when not NULL; the key's prefix into prefix (plen bytes) and its
 * app into app (APPS_NAME_MAX + 1 bytes). *applied (apps_key_revoke())
 * tells a retry recognised within retry_s (0: none is). */
int appsvc_revoke(struct apps_db *db, struct appkeys *keys, const char *given, const char *actor,
                  int retry_s, char *prefix, size_t plen, char *app, int *applied,
                  struct permitd_error *err);

#endif
