/*
 * The Redis URL parser (redis_url.h). Rules, in the order they are checked:
 * the scheme (case-insensitive) is redis:// (rediss:// is refused: no TLS
 * in hiredis 0.14); the authority ends at the first '/' after the last '@';
 * userinfo before that '@' splits at its first ':' into user and password,
 * both percent-decoded (a bad escape or a NUL is an error); the host is
 * non-empty, [bracketed] for IPv6; the port is 1..65535; the path is empty,
 * "/" or "/DB" with DB 0..2147483647; '?' and '#' are errors, as are blanks
 * and control characters anywhere.
 */
#include "redis_url.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static bool prefix_ieq(const char *s, size_t n, const char *lit) {
  size_t k = strlen(lit);
  if (n < k) return false;
  for (size_t i = 0; i < k; i++) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
    if (c != lit[i]) return false;
  }
  return true;
}

static int fail(char *why, size_t wsz, const char *msg) {
  if (why && wsz) snprintf(why, wsz, "%s", msg);
  return -1;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Percent-decodes s[0..n) into out (sz bytes with the NUL); -1 on a bad
 * escape, a decoded NUL or no room. */
static int decode(const char *s, size_t n, char *out, size_t sz) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= n) return -1;
      int hi = hexval(s[i + 1]), lo = hexval(s[i + 2]);
      if (hi < 0 || lo < 0) return -1;
      c = (char)(hi * 16 + lo);
      if (c == '\0') return -1;
      i += 2;
    }
    if (o + 1 >= sz) return -1;
    out[o++] = c;
  }
  out[o] = '\0';
  return 0;
}

static bool parse_uint(const char *s, size_t n, uint64_t max, uint64_t *out) {
  if (n == 0 || n > 10) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (uint64_t)(s[i] - '0');
  }
  if (v > max) return false;
  *out = v;
  return true;
}

int air__redis_url_parse(const char *s, size_t n, air__redis_url *out,
                         char *why, size_t wsz) {
  memset(out, 0, sizeof(*out));
  out->port = 6379;
  if (s == NULL) return fail(why, wsz, "no URL");
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
      return fail(why, wsz, "the URL contains a blank or control character");
  if (prefix_ieq(s, n, "rediss://"))
    return fail(why, wsz,
                "rediss:// (TLS) is not supported: the packaged hiredis 0.14 "
                "has no TLS; connect through a local TLS sidecar (stunnel or "
                "spiped, docs/scale-out.md) with a redis:// URL");
  if (!prefix_ieq(s, n, "redis://"))
    return fail(why, wsz, "the URL must start with redis://");
  const char *p = s + 8, *end = s + n;
  for (const char *q = p; q < end; q++)
    if (*q == '?' || *q == '#')
      return fail(why, wsz, "the URL must not have a query or a fragment");
  /* userinfo: up to the last '@' before the path */
  const char *slash = NULL, *at = NULL;
  for (const char *q = p; q < end; q++)
    if (*q == '@') at = q;
  for (const char *q = at ? at + 1 : p; q < end; q++)
    if (*q == '/') {
      slash = q;
      break;
    }
  if (at) {
    const char *colon = memchr(p, ':', (size_t)(at - p));
    size_t un = colon ? (size_t)(colon - p) : (size_t)(at - p);
    if (decode(p, un, out->user, sizeof(out->user)) != 0)
      return fail(why, wsz, "the URL's user is badly escaped or too long");
    if (colon) {
      if (decode(colon + 1, (size_t)(at - colon - 1), out->password,
                 sizeof(out->password)) != 0) {
        air__redis_url_wipe(out);
        return fail(why, wsz,
                    "the URL's password is badly escaped or too long");
      }
      out->has_password = true;
    }
    p = at + 1;
  }
  const char *hend = slash ? slash : end;
  const char *port = NULL;
  size_t hn;
  if (p < hend && *p == '[') {
    const char *rb = memchr(p, ']', (size_t)(hend - p));
    if (!rb) return fail(why, wsz, "the URL's IPv6 host has no ']'");
    hn = (size_t)(rb - p - 1);
    if (hn == 0 || hn >= sizeof(out->host))
      return fail(why, wsz, "the URL's host is empty or too long");
    memcpy(out->host, p + 1, hn);
    if (rb + 1 < hend) {
      if (rb[1] != ':') return fail(why, wsz, "junk after the URL's host");
      port = rb + 2;
    }
  } else {
    const char *colon = memchr(p, ':', (size_t)(hend - p));
    hn = colon ? (size_t)(colon - p) : (size_t)(hend - p);
    if (hn == 0 || hn >= sizeof(out->host))
      return fail(why, wsz, "the URL's host is empty or too long");
    memcpy(out->host, p, hn);
    if (colon) port = colon + 1;
  }
  if (port) {
    uint64_t v = 0;
    if (!parse_uint(port, (size_t)(hend - port), 65535, &v) || v == 0)
      return fail(why, wsz, "the URL's port is not 1..65535");
    out->port = (unsigned)v;
  }
  if (slash && slash + 1 < end) {
    uint64_t v = 0;
    if (!parse_uint(slash + 1, (size_t)(end - slash - 1), INT32_MAX, &v))
      return fail(why, wsz, "the URL's path is not a database number");
    out->db = (unsigned)v;
  }
  return 0;
}

void air__redis_url_redact(const air__redis_url *u, char *out, size_t sz) {
  const char *bracket_l = strchr(u->host, ':') ? "[" : "";
  const char *bracket_r = *bracket_l ? "]" : "";
  snprintf(out, sz, "redis://%s%s%s%s%s%s:%u/%u", u->user,
           u->has_password ? ":***" : "",
           (u->user[0] || u->has_password) ? "@" : "", bracket_l, u->host,
           bracket_r, u->port, u->db);
}

void air__redis_url_wipe(air__redis_url *u) {
  volatile char *p = u->password;
  for (size_t i = 0; i < sizeof(u->password); i++) p[i] = 0;
  u->has_password = false;
}
