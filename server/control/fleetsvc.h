/*
 * fleetsvc.h - FleetService (proto/permit/v1/fleet.proto) on the admin
 * listener: the fleet's traffic and its instances, read back from what
 * every instance's publisher (control/fleet.h) writes into Redis.
 *
 * A service of its own, registered with the admin listener like AppService
 * (admin_add_methods()), so it runs on the admin RPC pool (core/pool.h)
 * and its Redis reads never hold the listener's thread.
 */
#ifndef PERMITD_FLEETSVC_H
#define PERMITD_FLEETSVC_H

#include "core/config.h"
#include "core/status.h"
#include "stores/redis.h"
#include "transport/connect.h"
#include "transport/http.h"

struct admin;
struct fleet;
struct fleetsvc;

/* Returns a new FleetService in *out (free with fleetsvc_free()). admin
 * decides who the caller is; fleet is this instance's publisher (for its
 * id). Everything passed must outlive it. */
int fleetsvc_new(const struct config *cfg, struct admin *admin, struct redis *redis,
                 struct fleet *fleet, struct fleetsvc **out, struct permitd_error *err);
void fleetsvc_free(struct fleetsvc *s);

/* The FleetService procedures: admin_add_methods() (admin.h) serves them, ud
 * the fleetsvc. */
extern const struct connect_method fleetsvc_methods[];

#endif
