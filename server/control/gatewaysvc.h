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
#include "transport/http.h"

struct admin;
struct gatewaysvc;

/* Returns a new GatewayService in *out (free with gatewaysvc_free()).
 * cfg->mysql must be set; everything passed must outlive it. */
int gatewaysvc_new(const struct config *cfg, struct admin *admin, struct redis *redis,
                   struct gatewaysync *sync, struct gatewaysvc **out, struct permitd_error *err);
void gatewaysvc_free(struct gatewaysvc *s);

/* An admin_service_fn (admin.h; ud: the gatewaysvc): serves req when its path
 * is a GatewayService procedure: returns 1 (resp filled), else 0. */
int gatewaysvc_serve(void *ud, const struct http_request *req, struct http_response *resp);

#endif
