/*
 * test_dbconn.c - the parts of stores/dbconn.c that need no server: a
 * fetched row's field copied into a fixed buffer (SQL NULL as "", cut
 * short to fit, always terminated). The connections themselves are the
 * integration tests' (a real MariaDB).
 */
#include <string.h>

#include "stores/dbconn.h"
#include "test.h"

static void test_dbconn_field_copy_null_fit_and_cut(void)
{
    char buf[8];

    memset(buf, 'x', sizeof(buf));
    dbconn_field_copy(buf, sizeof(buf), NULL);
    CHECK_STR(buf, "");
    dbconn_field_copy(buf, sizeof(buf), "");
    CHECK_STR(buf, "");
    dbconn_field_copy(buf, sizeof(buf), "1234567");     /* just fits */
    CHECK_STR(buf, "1234567");
    dbconn_field_copy(buf, sizeof(buf), "123456789");   /* cut, terminated */
    CHECK_STR(buf, "1234567");
    dbconn_field_copy(buf, 1, "abc");
    CHECK_STR(buf, "");
}

int main(void)
{
    TEST_RUN(test_dbconn_field_copy_null_fit_and_cut);
    return TEST_REPORT();
}
