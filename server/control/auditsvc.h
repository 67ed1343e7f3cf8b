/*
 * auditsvc.h - AuditService (proto/permit/v1/audit.proto) on the admin
 * listener: every change to policies, apps and keys, and users, newest
 * first, filtered and paged (stores/audit.h). Any logged-in user may read
 * it; it runs on the admin RPCs' pool like every RPC but Login.
 */
#ifndef PERMITD_AUDITSVC_H
#define PERMITD_AUDITSVC_H

#include "core/config.h"
#include "core/status.h"
#include "transport/connect.h"
#include "transport/http.h"

struct admin;
struct auditsvc;

/* Returns a new AuditService in *out (free with auditsvc_free()). admin
 * decides who the caller is; cfg->mysql must be set. Both must outlive it. */
int auditsvc_new(const struct config *cfg, struct admin *admin, struct auditsvc **out,
                 struct permitd_error *err);
void auditsvc_free(struct auditsvc *s);

/* The AuditService procedures: admin_add_methods() (admin.h) serves them, ud
 * the auditsvc. */
extern const struct connect_method auditsvc_methods[];

#endif
