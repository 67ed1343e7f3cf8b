/*
 * test_session.c - the admin listener's own services without a store
 * (server/control/session.c and policysvc.c): what each table serves
 * (every procedure of AdminAuthService and PolicyService, the read-only
 * ones also by GET, Login the one SESSION_LOGIN_PATH names), and that
 * without --mysql-url every call, Login included, is refused
 * failed_precondition, naming the setting, before anything else is read.
 * What needs MySQL is tested through the admin listener
 * (tests/integration/test_admin.py).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/policysvc.h"
#include "control/session.h"
#include "permit/v1/admin.pb-c.h"
#include "test.h"

static const struct connect_method *find(const struct connect_method *m, const char *path)
{
    for (; m->path != NULL; m++)
        if (strcmp(m->path, path) == 0)
            return m;
    return NULL;
}

static size_t count(const struct connect_method *m)
{
    size_t n = 0;

    for (; m->path != NULL; m++, n++)
        CHECK(m->input != NULL && m->output != NULL && m->fn != NULL);
    return n;
}

static void test_session_tables(void)
{
    static const struct { const char *path; int get; } policy[] = {
        {"/permit.v1.PolicyService/ListPolicies", 1},
        {"/permit.v1.PolicyService/GetPolicy", 1},
        {"/permit.v1.PolicyService/CreatePolicy", 0},
        {"/permit.v1.PolicyService/UpdatePolicy", 0},
        {"/permit.v1.PolicyService/DeletePolicy", 0},
        {"/permit.v1.PolicyService/ListPolicyHistory", 1},
        {"/permit.v1.PolicyService/GetBucket", 1},
        {"/permit.v1.PolicyService/ResetBucket", 0},
        {"/permit.v1.PolicyService/GetPolicyStats", 1},
        {"/permit.v1.PolicyService/GetPolicyReservations", 1},
    };
    const struct connect_method *m;

    CHECK_INT(count(policysvc_methods), sizeof(policy) / sizeof(policy[0]));
    for (size_t i = 0; i < sizeof(policy) / sizeof(policy[0]); i++) {
        CHECK((m = find(policysvc_methods, policy[i].path)) != NULL);
        if (m != NULL)
            CHECK_INT(m->no_side_effects, policy[i].get);
    }
    CHECK_INT(count(session_methods), 3);
    CHECK((m = find(session_methods, SESSION_LOGIN_PATH)) != NULL);
    if (m != NULL) {
        CHECK_INT(m->no_side_effects, 0);
        CHECK(m->input == &permit__v1__login_request__descriptor);
    }
    CHECK((m = find(session_methods, "/permit.v1.AdminAuthService/Logout")) != NULL);
    CHECK((m = find(session_methods, "/permit.v1.AdminAuthService/WhoAmI")) != NULL);
    if (m != NULL) {
        CHECK_INT(m->no_side_effects, 1);
        CHECK(m->output == &permit__v1__who_am_iresponse__descriptor);
    }
}

/* No store: every procedure answers failed_precondition naming
 * --mysql-url, whatever the call carries; nothing touches the call. */
static void test_session_no_store(void)
{
    struct config cfg;
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    struct session *s = NULL;
    struct policysvc *p = NULL;
    struct connect_call call;
    struct http_response resp;
    struct store_user user;
    struct permitd_error err = {0, ""};
    char scratch[64];
    const struct connect_method *tables[] = {session_methods, policysvc_methods};
    void *uds[2];

    memset(&cfg, 0, sizeof(cfg));
    memset(&call, 0, sizeof(call));
    http_response_init(&resp);
    call.resp = &resp;          /* Logout clears the cookie whatever comes */
    CHECK_INT(session_new(&cfg, NULL, NULL, &lock, NULL, NULL, NULL, NULL, NULL, &s,
                          &err), PERMITD_OK);
    CHECK_INT(policysvc_new(&cfg, NULL, NULL, NULL, NULL, NULL, &lock, s, &p, &err), PERMITD_OK);
    for (int need = ADMIN_VIEWER; need <= ADMIN_ADMIN; need++) {
        err = (struct permitd_error){0, ""};
        CHECK_INT(session_authenticate(s, &call, need, &user, &err), PERMITD_EPRECONDITION);
        CHECK_CONTAINS(err.message, "--mysql-url");
    }
    uds[0] = s;
    uds[1] = p;
    for (int t = 0; t < 2; t++) {
        for (const struct connect_method *m = tables[t]; m->path != NULL; m++) {
            ProtobufCMessage *in = calloc(1, m->input->sizeof_message);
            ProtobufCMessage *out = calloc(1, m->output->sizeof_message);
            CHECK(in != NULL && out != NULL);
            if (in == NULL || out == NULL)
                continue;
            protobuf_c_message_init(m->input, in);
            protobuf_c_message_init(m->output, out);
            err = (struct permitd_error){0, ""};
            if (m->fn(uds[t], &call, in, out, scratch, &err) != PERMITD_EPRECONDITION)
                fprintf(stderr, "%s: not failed_precondition\n", m->path);
            CHECK_CONTAINS(err.message, "--mysql-url");
            free(in);
            free(out);
        }
    }
    policysvc_free(p);
    session_free(s);
    session_free(NULL);
    policysvc_free(NULL);
}

int main(void)
{
    TEST_RUN(test_session_tables);
    TEST_RUN(test_session_no_store);
    return TEST_REPORT();
}
