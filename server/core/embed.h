/*
 * embed.h - files compiled into the binary by cmake/embed.cmake.
 */
#ifndef PERMITD_EMBED_H
#define PERMITD_EMBED_H

#include <stddef.h>

struct embedded_file {
    const char *name;   /* base name, e.g. "acquire.lua" */
    const char *data;   /* NUL-terminated */
    size_t len;         /* without the NUL */
    const char *sha1;   /* of data, in hex: the name Redis gives a script */
    const char *gz;     /* data gzipped at build (the admin UI's files), or NULL */
    size_t gz_len;
};

/* The Lua scripts of lua/, ending in {NULL, NULL, 0}. */
extern const struct embedded_file lua_script_files[];

/* The admin UI's files of admin-ui/, ending in {NULL, NULL, 0}. */
extern const struct embedded_file admin_ui_files[];

/* Returns the embedded file called name in table, or NULL. */
const struct embedded_file *embed_find(const struct embedded_file *table,
                                       const char *name);

#endif
