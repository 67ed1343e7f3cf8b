/*
 * usersvc.h - UserService (proto/permit/v1/users.proto) on the admin
 * listener, for admins only, and `permitd admin add-user`, which stays for
 * the first user and for scripts.
 *
 * Both write MySQL through stores/users.h, which audits every change and
 * keeps the last enabled admin.
 */
#ifndef PERMITD_USERSVC_H
#define PERMITD_USERSVC_H

#include <stdio.h>

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

/* `permitd admin add-user ...` (argv[0] is "admin", argv[1] "add-user"):
 * the exit status. */
int usersvc_cli_main(const struct config *cfg, int argc, char **argv);

/* The user verbs' part of `permitd admin --help`. */
void usersvc_cli_usage(FILE *out);

#endif
