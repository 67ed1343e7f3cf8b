/*
 * hotkeysvc.h - HotKeyService (proto/permit/v1/hotkeys.proto) on the admin
 * listener: a policy's hot keys (decisions/hotkeys.h) merged over every
 * instance, each with its bucket's live level.
 *
 * Keys are user data: only a logged-in user (viewer or editor, admin.c
 * decides from the session) gets them; nothing here logs them.
 */
#ifndef PERMITD_HOTKEYSVC_H
#define PERMITD_HOTKEYSVC_H

#include "core/config.h"
#include "core/status.h"
#include "decisions/limiter.h"
#include "stores/redis.h"
#include "transport/connect.h"
#include "transport/http.h"

struct admin;
struct hotkeysvc;

/* Returns a new HotKeyService in *out (free with hotkeysvc_free()).
 * Everything passed must outlive it. */
int hotkeysvc_new(const struct config *cfg, struct admin *admin, struct redis *redis,
                  struct limiter *limiter, struct hotkeysvc **out, struct permitd_error *err);
void hotkeysvc_free(struct hotkeysvc *s);

/* The HotKeyService procedures: admin_add_methods() (admin.h) serves them, ud
 * the hotkeysvc. */
extern const struct connect_method hotkeysvc_methods[];

#endif
