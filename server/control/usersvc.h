/*
 * usersvc.h - UserService (proto/permit/v1/users.proto) on the admin
 * listener, for admins only, and what `permitd admin add-user`
 * (cli/cli_users.c), which stays for the first user and for scripts,
 * shares with it.
 *
 * Both write MySQL through stores/users.h, which audits every change and
 * keeps the last enabled admin.
 */
#ifndef PERMITD_USERSVC_H
#define PERMITD_USERSVC_H

#include "core/config.h"
#include "core/status.h"
#include "transport/connect.h"
#include "transport/http.h"

struct admin;
struct usersvc;

/* Returns a new UserService in *out (free with usersvc_free()). admin
 * decides who the caller is; cfg->mysql must be set. Both must outlive it. */
int usersvc_new(const struct config *cfg, struct admin *admin, struct usersvc **out,
                struct permitd_error *err);
void usersvc_free(struct usersvc *s);

/* The UserService procedures: admin_add_methods() (admin.h) serves them, ud
 * the usersvc. */
extern const struct connect_method usersvc_methods[];

/* A user name as UserService and `add-user` accept it (and Login looks
 * up); else PERMITD_EINVAL naming the field. */
int usersvc_check_username(const char *name, struct permitd_error *err);

/* viewer, editor or admin; else PERMITD_EINVAL naming the field. */
int usersvc_check_role(const char *role, struct permitd_error *err);

#endif
