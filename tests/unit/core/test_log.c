/*
 * test_log.c - server/core/log.c's level parser: the four names in any
 * case, and a refusal that is a status with an error naming the value, as
 * every other parser's (config_parse_*, connect_parse_*).
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

int main(void)
{
    TEST_RUN(test_log_level_parse_names);
    TEST_RUN(test_log_level_parse_refuses);
    return TEST_REPORT();
}
