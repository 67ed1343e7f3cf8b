/*
 * test_utf8.c - server/core/utf8.c: which bytes are well-formed UTF-8, and the
 * descriptor-driven check of every string field of a decoded protobuf
 * message (plain, repeated, nested, map, oneof), with the field's path and
 * value in the error.
 */
#include <stdint.h>
#include <string.h>

#include "jsontest.pb-c.h"
#include "permit/v1/ratelimit.pb-c.h"
#include "test.h"
#include "core/utf8.h"

static void test_utf8_char_len(void)
{
    CHECK_INT(utf8_char_len((const unsigned char *)"a"), 1);
    CHECK_INT(utf8_char_len((const unsigned char *)"\xc3\xa9"), 2);
    CHECK_INT(utf8_char_len((const unsigned char *)"\xe2\x9c\x93"), 3);
    CHECK_INT(utf8_char_len((const unsigned char *)"\xf0\x9f\x98\x80"), 4);
    CHECK_INT(utf8_char_len((const unsigned char *)"\xff"), 0);
    CHECK_INT(utf8_char_len((const unsigned char *)"\xc0\xaf"), 0);        /* overlong */
    CHECK_INT(utf8_char_len((const unsigned char *)"\xed\xa0\x80"), 0);    /* surrogate */
    CHECK_INT(utf8_char_len((const unsigned char *)"\xf4\x90\x80\x80"), 0);/* > U+10FFFF */
    CHECK_INT(utf8_char_len((const unsigned char *)"\xe2\x9c"), 0);        /* cut by the NUL */
}

static void test_utf8_request_fields(void)
{
    Permit__V1__AcquireRequest rq = PERMIT__V1__ACQUIRE_REQUEST__INIT;
    struct permitd_error err;

    rq.bucket = "example";
    rq.app = "app";
    rq.key = "cl\xc3\xa9";
    CHECK_INT(utf8_check_message(&rq.base, &err), PERMITD_OK);
    rq.key = "k\xff\xfe";
    CHECK_INT(utf8_check_message(&rq.base, &err), PERMITD_EINVAL);
    CHECK_INT(err.code, PERMITD_EINVAL);
    CHECK_STR(err.message, "key: \"k\\xff\\xfe\" is not valid UTF-8 (byte 0xff at offset 1)");
    rq.key = "";
    rq.app = "a\x80";
    CHECK_INT(utf8_check_message(&rq.base, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "app: \"a\\x80\"");
}

static void test_utf8_nested_and_repeated(void)
{
    Permit__V1__AcquireRequest items[2] = {PERMIT__V1__ACQUIRE_REQUEST__INIT,
                                           PERMIT__V1__ACQUIRE_REQUEST__INIT};
    Permit__V1__AcquireRequest *ptrs[2] = {&items[0], &items[1]};
    Permit__V1__AcquireBatchRequest b = PERMIT__V1__ACQUIRE_BATCH_REQUEST__INIT;
    struct permitd_error err;

    items[0].bucket = items[1].bucket = "example";
    items[0].app = items[1].app = "app";
    b.requests = ptrs;
    b.n_requests = 2;
    CHECK_INT(utf8_check_message(&b.base, &err), PERMITD_OK);
    items[1].bucket = "ex\xc3\x28";
    CHECK_INT(utf8_check_message(&b.base, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "requests[1].bucket: \"ex\\xc3(\"");
}

/* The generic walk: repeated strings, maps, nested messages, and a oneof
 * whose chosen member is not a string (its storage must not be read as
 * one). */
static void test_utf8_every_field_kind(void)
{
    Permit__Test__AllTypes m = PERMIT__TEST__ALL_TYPES__INIT;
    Permit__Test__Inner inner = PERMIT__TEST__INNER__INIT;
    Permit__Test__AllTypes__CountsEntry entry = PERMIT__TEST__ALL_TYPES__COUNTS_ENTRY__INIT;
    Permit__Test__AllTypes__CountsEntry *entries[1] = {&entry};
    char *strings[2] = {"ok", "ok"};
    struct permitd_error err;

    m.choice_case = PERMIT__TEST__ALL_TYPES__CHOICE_CHOICE_ID;
    m.choice_id = 0x4141414141ff41LL;   /* would read as a pointer if misread */
    m.r_string = strings;
    m.n_r_string = 2;
    m.inner = &inner;
    inner.name = "fine";
    entry.key = "k";
    m.counts = entries;
    m.n_counts = 1;
    CHECK_INT(utf8_check_message(&m.base, &err), PERMITD_OK);

    strings[1] = "b\xe0\x80\x80";
    CHECK_INT(utf8_check_message(&m.base, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "r_string[1]: ");
    strings[1] = "ok";

    inner.name = "\xfe";
    CHECK_INT(utf8_check_message(&m.base, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "inner.name: \"\\xfe\"");
    inner.name = "fine";

    entry.key = "\xc3";
    CHECK_INT(utf8_check_message(&m.base, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "counts[0].key: ");
    entry.key = "k";

    m.choice_case = PERMIT__TEST__ALL_TYPES__CHOICE_CHOICE_NAME;
    m.choice_name = "x\xff";
    CHECK_INT(utf8_check_message(&m.base, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "choice_name: ");
}

int main(void)
{
    TEST_RUN(test_utf8_char_len);
    TEST_RUN(test_utf8_request_fields);
    TEST_RUN(test_utf8_nested_and_repeated);
    TEST_RUN(test_utf8_every_field_kind);
    return TEST_REPORT();
}
