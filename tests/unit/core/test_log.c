/*
 * test_log.c - server/core/log.c's level parser: the four names in any
 * case, and a refusal that is a status with an error naming the value, as
 * every other parser's (config_parse_*, connect_parse_*); and log_q(),
 * the one quoting of values a client or an editor chose.
 */
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

int main(void)
{
    TEST_RUN(test_log_level_parse_names);
    TEST_RUN(test_log_level_parse_refuses);
    TEST_RUN(test_log_q_escapes);
    return TEST_REPORT();
}
