/*
 * adminrpc.h - what a service served on the admin listener is written
 * with: the roles a handler asks for and the entry of its table of
 * procedures. A header of its own, so the services admin.c itself serves
 * (session.c, policysvc.c) use them without including admin.h, which
 * includes theirs.
 */
#ifndef PERMITD_ADMINRPC_H
#define PERMITD_ADMINRPC_H

/* What admin_authenticate() and session_authenticate() ask of the
 * caller's role (each rank may do what the ones below it may). */
enum { ADMIN_VIEWER = 0, ADMIN_EDITOR = 1, ADMIN_ADMIN = 2 };

/* One entry of a table of procedures (admin_add_methods()):
 * /permit.v1.<svc>/<name> (svc and name string literals), its request and
 * response messages named by protoc-c's lower-case stem (list_users:
 * permit__v1__list_users_request__descriptor and ..._response__...), also
 * served by GET when get is 1, handled by fn (a connect_handler_fn). */
#define ADMIN_METHOD(svc, name, lower, get, fn) \
    {"/permit.v1." svc "/" name, &permit__v1__##lower##_request__descriptor, \
     &permit__v1__##lower##_response__descriptor, get, fn}

#endif
