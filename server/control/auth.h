/*
 * auth.h - passwords and session tokens for administrators.
 *
 * Passwords are hashed with argon2id (libargon2) into the PHC string
 * format; session tokens are 256 random bits from getrandom(2), hex.
 */
#ifndef PERMITD_AUTH_H
#define PERMITD_AUTH_H

#include <stddef.h>

#include "core/status.h"

#define AUTH_HASH_MAX 256
#define AUTH_TOKEN_LEN 64             /* hex characters */
#define AUTH_COOKIE "permitd_session"

#define AUTH_PASSWORD_MIN 8
#define AUTH_PASSWORD_MAX 1000          /* bytes */

/* The password rule of every way a password is set (`permitd admin
 * add-user`, UserService): AUTH_PASSWORD_MIN to AUTH_PASSWORD_MAX bytes,
 * one line (no CR or LF). PERMITD_EINVAL says which part fails, never
 * the password. */
int auth_check_password(const char *password, struct permitd_error *err);

/* Hashes password into out (AUTH_HASH_MAX bytes), with a fresh salt. */
int auth_hash_password(const char *password, char *out, struct permitd_error *err);

/* 1 when password matches the encoded hash, 0 otherwise (also for a
 * malformed hash). Takes the same time whether or not the user exists when
 * callers pass auth_dummy_hash() for unknown users. */
int auth_verify_password(const char *encoded, const char *password);

/* A valid hash of no password anyone knows, for timing-safe misses. */
const char *auth_dummy_hash(void);

/* Writes a new random token (AUTH_TOKEN_LEN hex characters + NUL). */
int auth_new_token(char *out, struct permitd_error *err);

/* Finds the session token in a Cookie header; 0 and out filled, or -1. */
int auth_cookie_token(const char *cookie_header, char *out, size_t outlen);

#endif
