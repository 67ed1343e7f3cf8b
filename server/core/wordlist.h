/*
 * wordlist.h - items joined with ", " into a fixed buffer the caller owns
 * ("rule 3 names policy p, rule 9 names policy q"), for messages and
 * /readyz lines that name what they are about. Past the buffer's size the
 * text is cut and the count still counts every item, so a reader is told
 * how many there are even when not all are named.
 */
#ifndef PERMITD_WORDLIST_H
#define PERMITD_WORDLIST_H

#include <stddef.h>

struct wordlist {
    char *buf;          /* the caller's; always NUL-terminated */
    size_t size, len;
    int count;          /* items added, named or cut */
};

/* Starts an empty list in buf (size > 0). */
void wordlist_init(struct wordlist *l, char *buf, size_t size);

/* Adds one item, printf-style, after ", " when it is not the first. */
void wordlist_add(struct wordlist *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
