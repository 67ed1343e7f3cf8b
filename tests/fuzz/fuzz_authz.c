/*
 * fuzz_authz.c - libFuzzer target for the Authorization header of every
 * API call (decisions/appkeys.c, issue 21): appkeys_parse() on the raw
 * value, then appkeys_check() against a table holding one real key.
 *
 * Beyond "no crash, no read past the value": whatever the parser accepts
 * is a whole key of the documented shape (prefix pk_ + 16 lowercase hex,
 * a 43-character base64url secret inside the value); a check never
 * answers anything but ok, unauthenticated or permission_denied; only the
 * table's own key passes; and no message ever carries the secret part of
 * what was sent.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "decisions/appkeys.h"
#include "fuzz.h"

static struct appkeys *table;
static struct appkeys_minted real;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    struct permitd_error err = {0, ""};
    struct apps_key_row row;

    (void)argc;
    (void)argv;
    if (appkeys_new(0, &table, &err) != PERMITD_OK || appkeys_mint(&real, &err) != PERMITD_OK)
        abort();
    memset(&row, 0, sizeof(row));
    memcpy(row.prefix, real.prefix, sizeof(real.prefix));
    strcpy(row.app, "billing");
    memcpy(row.hash, real.hash_hex, sizeof(real.hash_hex));
    row.app_enabled = 1;
    if (appkeys_replace(table, &row, 1, appkeys_generation(table), &err) != PERMITD_OK)
        abort();
    return 0;
}

static int b64url(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct appkeys_token t;
    struct permitd_error err = {0, ""};
    char *value = malloc(size + 1), app[APPS_NAME_MAX + 1], prefix[APPKEYS_PREFIX_LEN + 1];
    int rc;

    if (value == NULL)
        return 0;
    memcpy(value, data, size);
    value[size] = '\0';
    /* The parser on exactly size bytes (no NUL needed: ASan sees a read
     * past them through the exact-size copy below). */
    {
        char *exact = malloc(size ? size : 1);
        if (exact == NULL) {
            free(value);
            return 0;
        }
        memcpy(exact, data, size);
        if (appkeys_parse(exact, size, &t) == APPKEYS_OK) {
            FUZZ_CHECK(strlen(t.prefix) == APPKEYS_PREFIX_LEN);
            FUZZ_CHECK(memcmp(t.prefix, "pk_", 3) == 0);
            for (int i = 3; i < APPKEYS_PREFIX_LEN; i++)
                FUZZ_CHECK((t.prefix[i] >= '0' && t.prefix[i] <= '9') ||
                            (t.prefix[i] >= 'a' && t.prefix[i] <= 'f'));
            FUZZ_CHECK(t.secret_len == APPKEYS_SECRET_LEN);
            FUZZ_CHECK(t.secret >= exact && t.secret + t.secret_len <= exact + size);
            for (size_t i = 0; i < t.secret_len; i++)
                FUZZ_CHECK(b64url(t.secret[i]));
        }
        free(exact);
    }
    /* The whole check on the NUL-ended value (headers are strings). */
    rc = appkeys_check(table, value, "", 1700000000, app, prefix, NULL, &err);
    FUZZ_CHECK(rc == PERMITD_OK || rc == PERMITD_EUNAUTHENTICATED || rc == PERMITD_EPERM);
    if (rc == PERMITD_OK) {
        FUZZ_CHECK(strcmp(app, "billing") == 0);
        FUZZ_CHECK(strstr(value, real.key) != NULL);
    } else if (appkeys_parse(value, strlen(value), &t) == APPKEYS_OK) {
        char secret[APPKEYS_SECRET_LEN + 1];
        memcpy(secret, t.secret, APPKEYS_SECRET_LEN);
        secret[APPKEYS_SECRET_LEN] = '\0';
        FUZZ_CHECK(strstr(err.message, secret) == NULL);
    }
    free(value);
    return 0;
}
