/*
 * wordlist.c - items joined with ", " into a fixed buffer (see wordlist.h).
 */
#include <stdarg.h>
#include <stdio.h>

#include "core/wordlist.h"

void wordlist_init(struct wordlist *l, char *buf, size_t size)
{
    l->buf = buf;
    l->size = size;
    l->len = 0;
    l->count = 0;
    buf[0] = '\0';
}

void wordlist_add(struct wordlist *l, const char *fmt, ...)
{
    va_list ap;
    int w = 0;

    if (l->count > 0 && l->len + 1 < l->size)
        w = snprintf(l->buf + l->len, l->size - l->len, ", ");
    if (w > 0)
        l->len = l->len + (size_t)w < l->size ? l->len + (size_t)w : l->size - 1;
    l->count++;
    if (l->len + 1 >= l->size)
        return;             /* full: counted, not named */
    va_start(ap, fmt);
    w = vsnprintf(l->buf + l->len, l->size - l->len, fmt, ap);
    va_end(ap);
    if (w > 0)
        l->len = l->len + (size_t)w < l->size ? l->len + (size_t)w : l->size - 1;
}
