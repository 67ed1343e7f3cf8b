/*
 * trafficsvc.h - TrafficService (proto/permit/v1/traffic.proto) on the
 * admin listener: the traffic history read from MySQL's traffic_minutes
 * (stores/trafficdb.h), which every instance's control/trafficlog.c
 * writes. Registered with admin_add_methods() like AuditService, so its
 * MySQL reads run on the admin RPC pool.
 */
#ifndef PERMITD_TRAFFICSVC_H
#define PERMITD_TRAFFICSVC_H

#include "core/config.h"
#include "core/status.h"
#include "transport/connect.h"

struct admin;
struct trafficsvc;

/* Returns a new TrafficService in *out (free with trafficsvc_free(); NULL
 * is a no-op). cfg and admin must outlive it. */
int trafficsvc_new(const struct config *cfg, struct admin *admin, struct trafficsvc **out,
                   struct permitd_error *err);
void trafficsvc_free(struct trafficsvc *s);

/* The TrafficService procedures: admin_add_methods() (admin.h) serves
 * them, ud the trafficsvc. */
extern const struct connect_method trafficsvc_methods[];

#endif
