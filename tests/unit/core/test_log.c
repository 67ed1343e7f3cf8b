/*
 * test_log.c - server/core/log.c's level parser: the four names in any
 * case, and a refusal that is a status with an error naming the value, as
 * every other parser's (config_parse_*, connect_parse_*); and log_q(),
 * the one quoting of values a client or an editor chose; log_who(), the
 * access log's caller as bare words.
 */
#include <string.h>

#include "core/log.h"
#include "test.h"

static void test_log_level_parse_names(void)
{
    static const struct { const char *s; enum log_level want; } ok[] = {
        {"debug", LOG_LEVEL_DEBUG}, {"info", LOG_LEVEL_INFO}, {"warn", LOG_LEVEL_WARN},
        {"error", LOG_LEVEL_ERROR}, {"DEBUG", LOG_LEVEL_DEBUG}, {"Warn", LOG_LEVEL_WARN},
    };
    struct permitd_error err = {0, ""};
    enum log_level lvl;

    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        lvl = (enum log_level)-1;
        CHECK_INT(log_level_parse(ok[i].s, &lvl, &err), PERMITD_OK);
        CHECK_INT(lvl, ok[i].want);
    }
}

static void test_log_level_parse_refuses(void)
{
    static const char *const bad[] = {"loud", "", "warning", "info ", "err"};
    struct permitd_error err;
    enum log_level lvl = LOG_LEVEL_INFO;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err.code = PERMITD_OK;
        err.message[0] = '\0';
        CHECK_INT(log_level_parse(bad[i], &lvl, &err), PERMITD_EINVAL);
        CHECK_INT(err.code, PERMITD_EINVAL);
        CHECK_CONTAINS(err.message, "is not one of debug, info, warn, error");
        CHECK_INT(lvl, LOG_LEVEL_INFO);
    }
    CHECK_STR(err.message, "\"err\" is not one of debug, info, warn, error");
    CHECK_INT(log_level_parse("loud", &lvl, NULL), PERMITD_EINVAL);
}

static void test_log_q_escapes(void)
{
    char small[16];

    CHECK_STR(log_q("plain"), "\"plain\"");
    CHECK_STR(log_q(NULL), "\"\"");
    CHECK_STR(log_q("x\" by=root level=error"), "\"x\\\" by=root level=error\"");
    CHECK_STR(log_q("a\\b"), "\"a\\\\b\"");
    CHECK_STR(log_q("l1\r\nts=0\tx\x01\x7f"), "\"l1\\r\\nts=0\\tx\\x01\\x7f\"");
    /* well-formed UTF-8 stays, anything else is \xNN */
    CHECK_STR(log_q("caf\xc3\xa9 k\xff\xc3"), "\"caf\xc3\xa9 k\\xff\\xc3\"");
    /* cut, never mid-escape, always closed */
    CHECK_STR(log_quote("abcdefghijklmnop", small, sizeof(small)), "\"abcdefghij...\"");
    CHECK_STR(log_quote("\n\n\n\n\n\n", small, sizeof(small)), "\"\\n\\n\\n\\n\\n...\"");
}

static void test_log_who_bare_words(void)
{
    char who[LOG_WHO_MAX], long_key[400];

    log_who(who, "billing", "pk_3f9a");
    CHECK_STR(who, " app=billing key=pk_3f9a");
    log_who(who, "billing", "");
    CHECK_STR(who, " app=billing");
    /* a name a caller chose: nothing but [A-Za-z0-9._-] reaches the line */
    log_who(who, "x\" level=error", "k\nts=0");
    CHECK_STR(who, " app=x??level?error key=k?ts?0");
    memset(long_key, 'k', sizeof(long_key) - 1);
    long_key[sizeof(long_key) - 1] = '\0';
    log_who(who, "a", long_key);
    CHECK(strlen(who) == LOG_WHO_MAX - 1);
}

int main(void)
{
    TEST_RUN(test_log_level_parse_names);
    TEST_RUN(test_log_level_parse_refuses);
    TEST_RUN(test_log_q_escapes);
    TEST_RUN(test_log_who_bare_words);
    return TEST_REPORT();
}
