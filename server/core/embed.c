/*
 * embed.c - lookup in the tables that cmake/embed.cmake generates.
 */
#include <string.h>

#include "core/embed.h"

const struct embedded_file *embed_find(const struct embedded_file *table,
                                       const char *name)
{
    for (; table->name != NULL; table++)
        if (strcmp(table->name, name) == 0)
            return table;
    return NULL;
}
