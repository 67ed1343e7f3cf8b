/*
 * test_wordlist.c - server/core/wordlist.c: items joined with ", ", cut at
 * the buffer's size with every item still counted.
 */
#include <string.h>

#include "core/wordlist.h"
#include "test.h"

static void test_wordlist_joins_items(void)
{
    char buf[64];
    struct wordlist l;

    wordlist_init(&l, buf, sizeof(buf));
    CHECK_STR(buf, "");
    CHECK_INT(l.count, 0);
    wordlist_add(&l, "rule %d names policy %s", 3, "p");
    CHECK_STR(buf, "rule 3 names policy p");
    wordlist_add(&l, "rule %d names policy %s", 9, "q");
    CHECK_STR(buf, "rule 3 names policy p, rule 9 names policy q");
    CHECK_INT(l.count, 2);
}

static void test_wordlist_cuts_and_counts(void)
{
    char buf[16];
    struct wordlist l;

    wordlist_init(&l, buf, sizeof(buf));
    for (int i = 0; i < 10; i++)
        wordlist_add(&l, "item-%d", i);
    CHECK_INT(l.count, 10);
    CHECK_INT((int)strlen(buf), (int)sizeof(buf) - 1);
    CHECK_STR(buf, "item-0, item-1,");
    CHECK(l.len < sizeof(buf));
}

int main(void)
{
    TEST_RUN(test_wordlist_joins_items);
    TEST_RUN(test_wordlist_cuts_and_counts);
    return TEST_REPORT();
}
