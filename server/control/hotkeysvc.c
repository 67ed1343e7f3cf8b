/*
 * hotkeysvc.c - GetHotKeys (see hotkeysvc.h): what every instance
 * published of a policy's hot keys (decisions/hotkeys.c reads and sums
 * it), and each key's bucket now (limiter_inspect(), as GetBucket), so
 * the policy page can show who is being limited and reset one of them
 * (ResetBucket).
 */
#include <stdlib.h>
#include <string.h>

#include "control/admin.h"
#include "control/hotkeysvc.h"
#include "core/clock.h"
#include "decisions/hotkeys.h"
#include "permit/v1/hotkeys.pb-c.h"
#include "stores/policy.h"
#include "transport/connect.h"

#define HOTKEYSVC_LIMIT 20                  /* keys per list when none is asked for */
#define HOTKEYSVC_DEADLINE_MS 1000          /* each bucket's inspection */

struct hotkeysvc {
    const struct config *cfg;
    struct admin *admin;
    struct redis *redis;
    struct limiter *limiter;
};

int hotkeysvc_new(const struct config *cfg, struct admin *admin, struct redis *redis,
                  struct limiter *limiter, struct hotkeysvc **out, struct permitd_error *err)
{
    struct hotkeysvc *s = calloc(1, sizeof(*s));

    *out = NULL;
    if (s == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    s->cfg = cfg;
    s->admin = admin;
    s->redis = redis;
    s->limiter = limiter;
    *out = s;
    return PERMITD_OK;
}

void hotkeysvc_free(struct hotkeysvc *s)
{
    free(s);
}

/* The list v[0..n) as HotKey messages in the call's memory, each with its
 * bucket's level (a bucket Redis cannot inspect now: level_known false). */
static int to_proto(struct hotkeysvc *s, struct connect_call *call, const char *policy,
                    const struct hotkeys_count *v, size_t n, Permit__V1__HotKey ***out,
                    size_t *nout, struct permitd_error *err)
{
    Permit__V1__HotKey *m = connect_call_alloc(call, (n + 1) * sizeof(*m));
    Permit__V1__HotKey **p = connect_call_alloc(call, (n + 1) * sizeof(*p));

    if (m == NULL || p == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        struct limiter_result r;
        struct permitd_error why;
        permit__v1__hot_key__init(&m[i]);
        if ((m[i].key = connect_call_strdup(call, v[i].key)) == NULL)
            return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        m[i].count = (int64_t)v[i].count;
        if (limiter_inspect(s->limiter, policy, v[i].key,
                            clock_now_us() + HOTKEYSVC_DEADLINE_MS * 1000LL, &r, NULL,
                            &why) == PERMITD_OK) {
            m[i].remaining = r.remaining;
            m[i].limit = r.limit;
            m[i].tokens = (double)r.tokens_micro / 1e6;
            m[i].level_known = 1;
        }
        p[i] = &m[i];
    }
    *out = p;
    *nout = n;
    return PERMITD_OK;
}

static int get_hot_keys(void *ud, struct connect_call *call, const ProtobufCMessage *in_,
                        ProtobufCMessage *out_, char *scratch, struct permitd_error *err)
{
    struct hotkeysvc *s = ud;
    const Permit__V1__GetHotKeysRequest *rq = (const void *)in_;
    Permit__V1__GetHotKeysResponse *rs = (void *)out_;
    struct hotkeys_count *allowed = NULL, *denied = NULL;
    char user[POLICY_NAME_MAX + 1];
    size_t limit = rq->limit <= 0 ? HOTKEYSVC_LIMIT : rq->limit > 100 ? 100 : (size_t)rq->limit;
    size_t na = 0, nd = 0, instances = 0;
    int rc;

    (void)scratch;
    if ((rc = admin_authenticate(s->admin, call, 0, user, sizeof(user), err)) != PERMITD_OK ||
        (rc = policy_check_name("name", rq->name, err)) != PERMITD_OK)
        return rc;
    allowed = malloc(limit * sizeof(*allowed));
    denied = malloc(limit * sizeof(*denied));
    if (allowed == NULL || denied == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
        goto out;
    }
    if ((rc = hotkeys_read(s->cfg, s->redis, rq->name, allowed, &na, denied, &nd, limit,
                           &instances, err)) != PERMITD_OK ||
        (rc = to_proto(s, call, rq->name, allowed, na, &rs->allowed, &rs->n_allowed,
                       err)) != PERMITD_OK ||
        (rc = to_proto(s, call, rq->name, denied, nd, &rs->denied, &rs->n_denied,
                       err)) != PERMITD_OK)
        goto out;
    rs->instances = (int32_t)instances;
    rs->window_seconds = 2 * HOTKEYS_WINDOW_MS / 1000;
out:
    free(allowed);
    free(denied);
    return rc;
}

const struct connect_method hotkeysvc_methods[] = {
    ADMIN_METHOD("HotKeyService", "GetHotKeys", get_hot_keys, 1, get_hot_keys),
    {NULL, NULL, NULL, 0, NULL},
};
