/*
 * The Redis URL of `state: {redis: …}` (docs/design.md §3.1), parsed without
 * I/O:
 *
 *   redis://[[USER][:PASSWORD]@]HOST[:PORT][/DB]
 *
 * HOST is a name, an IPv4 address or a bracketed IPv6 address; PORT
 * defaults to 6379, DB to 0. USER and PASSWORD are percent-decoded. No
 * query, no fragment, no unix socket. `rediss://` is refused with its
 * reason (the packaged hiredis 0.14 has no TLS; docs/scale-out.md shows a
 * sidecar). Pure and thread-safe; the config loader checks a URL with it
 * and the Redis backend connects with what it returns.
 */
#ifndef AIR__REDIS_URL_H
#define AIR__REDIS_URL_H

#include <stdbool.h>
#include <stddef.h>

#include "limits.h"

typedef struct air__redis_url {
  char host[AIR__MAX_REDIS_HOST_BYTES]; /* without brackets */
  unsigned port;
  unsigned db;
  char user[AIR__MAX_REDIS_SECRET_BYTES]; /* "" when none */
  char password[AIR__MAX_REDIS_SECRET_BYTES];
  bool has_password;
} air__redis_url;

/*
 * Parses the n bytes at s into *out. Returns 0, or -1 with the reason in
 * why (wsz bytes, NUL-terminated, truncated to fit). The reason never
 * quotes the user or the password: a URL with a secret may be written to a
 * log or a terminal only through air__redis_url_redact.
 */
int air__redis_url_parse(const char *s, size_t n, air__redis_url *out,
                         char *why, size_t wsz);

/* Writes "redis://HOST:PORT/DB" (with "USER:***@" or ":***@" when the URL
 * has them) into out (sz bytes, truncated, NUL-terminated). */
void air__redis_url_redact(const air__redis_url *u, char *out, size_t sz);

/* Wipes the secrets of u (a volatile write the compiler keeps). */
void air__redis_url_wipe(air__redis_url *u);

#endif
