/*
 * gatewaysvc.h - GatewayService (proto/permit/v1/gateway.proto) on the
 * admin listener: the forward-auth rules, listed by viewers and written by
 * editors (admin.c decides who the caller is, as for policies).
 *
 * A write goes to MySQL (stores/gateway_rules.h, audited by the schema's
 * triggers), then this instance reloads its rules at once and tells every
 * other instance through the change notice (control/gatewaysync.h).
 */
#ifndef PERMITD_GATEWAYSVC_H
#define PERMITD_GATEWAYSVC_H

#include "control/gatewaysync.h"
#include "core/config.h"
#include "core/status.h"
#include "stores/redis.h"
#include "transport/connect.h"
#include "transport/http.h"

struct admin;
struct gatewaysvc;

/* Returns a new GatewayService in *out (free with gatewaysvc_free()).
 * cfg->mysql must be set; everything passed must outlive it. */
int gatewaysvc_new(const struct config *cfg, struct admin *admin, struct redis *redis,
                   struct gatewaysync *sync, struct gatewaysvc **out, struct permitd_error *err);
void gatewaysvc_free(struct gatewaysvc *s);

/* The GatewayService procedures: admin_add_methods() (admin.h) serves them, ud
 * the gatewaysvc. */
extern const struct connect_method gatewaysvc_methods[];

#endif
