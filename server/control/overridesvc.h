/*
 * overridesvc.h - OverrideService (proto/permit/v1/overrides.proto) on the
 * admin listener: a policy's overrides listed (search, sort by traffic,
 * pages), read, written, imported and exported as CSV. Viewers read,
 * editors write (admin.c decides who the caller is, as for policies).
 *
 * A write goes to MySQL (stores/override_edits.h, audited by the schema's
 * triggers), then this instance reloads the policy's overrides at once and
 * tells every other instance through the change notice
 * (control/overridesync.h: PUBLISH on <prefix>override-changes).
 */
#ifndef PERMITD_OVERRIDESVC_H
#define PERMITD_OVERRIDESVC_H

#include "control/overridesync.h"
#include "core/config.h"
#include "core/status.h"
#include "stores/redis.h"
#include "transport/connect.h"

struct admin;
struct overridesvc;

/* Returns a new OverrideService in *out (free with overridesvc_free()).
 * cfg->mysql must be set; everything passed must outlive it. */
int overridesvc_new(const struct config *cfg, struct admin *admin, struct redis *redis,
                    struct overridesync *sync, struct overridesvc **out,
                    struct permitd_error *err);
void overridesvc_free(struct overridesvc *s);

/* The OverrideService procedures: admin_add_methods() (admin.h) serves
 * them, ud the overridesvc. */
extern const struct connect_method overridesvc_methods[];

#endif
