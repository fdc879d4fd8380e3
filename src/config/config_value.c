/*
 * One config value into its typed field, per its option (config_table.h):
 * scalars with their ranges and string checks (names, environment
 * variables, URLs, HOST:PORT, provider/model), and the values that are
 * lists or maps: reasons, statuses, per-reason counts, phrases and header
 * names, extra headers, override maps (stored as JSON text). What a value
 * means for the rest of the config is config.c's.
 */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"
#include "limits.h"
#include "redis_url.h"

#define MAX_OVERRIDE_NODES 10000 /* values in one override: map */
#define MAX_HEADER_VALUE_BYTES 8192

typedef air__yaml_loc loc;

/* ---- scalars ------------------------------------------------------------- */

static void expect_desc(const air__opt *o, char *out, size_t sz) {
  size_t off = 0;
  switch (o->type) {
    case AIR__T_U64:
    case AIR__T_U32:
      snprintf(out, sz, "an integer from %llu to %llu",
               (unsigned long long)o->min, (unsigned long long)o->max);
      return;
    case AIR__T_COUNT:
    case AIR__T_PER_REASON:
      snprintf(out, sz, "an integer from %llu to %llu or unlimited",
               (unsigned long long)o->min, (unsigned long long)o->max);
      return;
    case AIR__T_DOUBLE:
      snprintf(out, sz, "a number from %g to %g", o->dmin, o->dmax);
      return;
    case AIR__T_BOOL:
      snprintf(out, sz, "true or false");
      return;
    case AIR__T_ENUM:
      off = (size_t)snprintf(out, sz, "one of");
      for (size_t i = 0; o->enums[i] && off < sz; i++)
        off += (size_t)snprintf(out + off, sz - off, "%s %s", i ? "," : "",
                                o->enums[i]);
      return;
    default:
      snprintf(out, sz, "a string");
      return;
  }
}

/* JSON number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool json_number(const char *s, size_t n, bool *integer) {
  size_t i = 0;
  *integer = true;
  if (i < n && s[i] == '-') i++;
  if (i >= n || !isdigit((unsigned char)s[i])) return false;
  if (s[i] == '0')
    i++;
  else
    while (i < n && isdigit((unsigned char)s[i])) i++;
  if (i < n && s[i] == '.') {
    *integer = false;
    i++;
    if (i >= n || !isdigit((unsigned char)s[i])) return false;
    while (i < n && isdigit((unsigned char)s[i])) i++;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    *integer = false;
    i++;
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    if (i >= n || !isdigit((unsigned char)s[i])) return false;
    while (i < n && isdigit((unsigned char)s[i])) i++;
  }
  return i == n;
}

/* An RFC 9110 token. Explicit bounds: strchr would find a NUL (a YAML
 * "\0") in its own terminator and take it for a token character. */
static bool header_token(const char *s, size_t n) {
  static const char extra[] = "!#$%&'*+-.^_`|~";
  if (n == 0) return false;
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (!isalnum(ch) && memchr(extra, ch, sizeof(extra) - 1) == NULL)
      return false;
  }
  return true;
}

/* A header value that is one line: no control byte but HTAB (so no NUL, CR
 * or LF, which would end or split the header on the wire). */
static bool header_value_ok(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if ((ch < 0x20 && ch != '\t') || ch == 0x7f) return false;
  }
  return true;
}

static bool has_ctl_or_blank(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] <= 0x20 || s[i] == 0x7f) return true;
  return false;
}

/* Formats why (wsz bytes) and returns -1: a check's refusal. */
static int why_not(char *why, size_t wsz, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int why_not(char *why, size_t wsz, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, wsz, fmt, ap);
  va_end(ap);
  return -1;
}

/* Extra checks of a string option; 0 or -1 with why. */
static int check_str(air__cfg_ctx *c, air__str_check ck, const char *s,
                     size_t n, char *why, size_t wsz) {
  char v[64];
  switch (ck) {
    case AIR__CK_NONE:
      return 0;
    case AIR__CK_TEXT:
      if (n == 0) return why_not(why, wsz, "must not be empty");
      return 0;
    case AIR__CK_NAME:
      if (n == 0) return why_not(why, wsz, "must not be empty");
      if (memchr(s, '/', n))
        return why_not(why, wsz, "%s must not contain '/'",
                       air__cfg_shown(v, sizeof v, s, n));
      if (has_ctl_or_blank(s, n))
        return why_not(why, wsz,
                       "%s must not contain blanks or control characters",
                       air__cfg_shown(v, sizeof v, s, n));
      return 0;
    case AIR__CK_ENV: {
      bool ok = n > 0 && !isdigit((unsigned char)s[0]);
      for (size_t i = 0; ok && i < n; i++)
        ok = isalnum((unsigned char)s[i]) || s[i] == '_';
      if (!ok)
        return why_not(why, wsz,
                       "%s is not an environment variable name "
                       "([A-Za-z_][A-Za-z0-9_]*)",
                       air__cfg_shown(v, sizeof v, s, n));
      return 0;
    }
    case AIR__CK_URL: {
      const char *a = "http://", *b = "https://";
      size_t skip = 0;
      if (n > strlen(a) && air__cfg_ieq(s, strlen(a), a))
        skip = strlen(a);
      else if (n > strlen(b) && air__cfg_ieq(s, strlen(b), b))
        skip = strlen(b);
      if (!skip || s[skip] == '/' || has_ctl_or_blank(s, n))
        return why_not(why, wsz, "%s is not a %s or %s URL",
                       air__cfg_shown(v, sizeof v, s, n), a, b);
      return 0;
    }
    case AIR__CK_REDIS: {
      /* The value is never quoted: it might hold a password. */
      air__redis_url u;
      char r[256];
      int bad = air__redis_url_parse(s, n, &u, r, sizeof r);
      bool secret = bad == 0 && u.has_password;
      air__redis_url_wipe(&u);
      if (bad) return why_not(why, wsz, "is not a usable URL: %s", r);
      if (secret)
        return why_not(why, wsz,
                       "must not hold a password (a config file is no "
                       "place for it): give it in password_env, or the "
                       "whole URL in url_env");
      return 0;
    }
    case AIR__CK_LISTEN: {
      const char *colon = NULL;
      for (size_t i = 0; i < n; i++)
        if (s[i] == ':') colon = s + i;
      uint64_t port = 0;
      size_t hn = colon ? (size_t)(colon - s) : 0;
      if (!colon || hn == 0 ||
          !air__yaml_u64(colon + 1, n - hn - 1, UINT64_MAX, &port) ||
          port > 65535 || has_ctl_or_blank(s, n))
        return why_not(why, wsz,
                       "%s is not HOST:PORT (port 0 to 65535, "
                       "[v6 address]:PORT)",
                       air__cfg_shown(v, sizeof v, s, n));
      if (s[0] == '[' ? s[hn - 1] != ']' || hn < 3 : memchr(s, ':', hn) != NULL)
        return why_not(why, wsz,
                       "%s: an IPv6 address goes in brackets, "
                       "as [::1]:8080",
                       air__cfg_shown(v, sizeof v, s, n));
      return 0;
    }
    case AIR__CK_TARGET: {
      const char *slash = memchr(s, '/', n);
      if (!slash || slash == s || slash == s + n - 1 || has_ctl_or_blank(s, n))
        return why_not(why, wsz, "%s is not of the form provider/model",
                       air__cfg_shown(v, sizeof v, s, n));
      size_t pn = (size_t)(slash - s);
      if (air__config_provider(c->cfg, s, pn, NULL) == NULL) {
        char p[64];
        size_t off =
            (size_t)snprintf(why, wsz, "target %s names unknown provider %s",
                             air__cfg_shown(v, sizeof v, s, n),
                             air__cfg_shown(p, sizeof p, s, pn));
        size_t listed = 0;
        for (size_t i = 0; i < c->cfg->n_providers && listed < 10 && off < wsz;
             i++) {
          if (!c->cfg->providers[i].name) continue;
          off += (size_t)snprintf(
              why + off, wsz - off, "%s%s",
              listed++ ? ", " : " (providers: ", c->cfg->providers[i].name);
        }
        if (off < wsz)
          snprintf(why + off, wsz - off, "%s",
                   listed ? ")" : " (no providers are configured)");
        return -1;
      }
      return 0;
    }
  }
  return 0;
}

/*
 * Converts scalar text s (n bytes) per o and stores it in field. Returns 0,
 * or -1 with why set (field untouched). Used for file values and for the
 * table's own defaults.
 */
int air__cfg_convert(air__cfg_ctx *c, const air__opt *o, const char *s,
                     size_t n, void *field, char *why, size_t wsz) {
  char v[64], want[160];
  uint64_t u = 0;
  switch (o->type) {
    case AIR__T_U64:
    case AIR__T_U32:
    case AIR__T_COUNT:
    case AIR__T_PER_REASON:
      if ((o->type == AIR__T_COUNT || o->type == AIR__T_PER_REASON) &&
          air__cfg_eq(s, n, "unlimited")) {
        *(uint32_t *)field = AIR__UNLIMITED;
        return 0;
      }
      if (!air__yaml_u64(s, n, UINT64_MAX, &u)) {
        expect_desc(o, want, sizeof want);
        snprintf(why, wsz, "expected %s, got %s", want,
                 air__cfg_shown(v, sizeof v, s, n));
        return -1;
      }
      if (u < o->min || u > o->max) {
        snprintf(why, wsz, "%llu is out of range (%llu to %llu)",
                 (unsigned long long)u, (unsigned long long)o->min,
                 (unsigned long long)o->max);
        return -1;
      }
      if (o->type == AIR__T_U64)
        *(uint64_t *)field = u;
      else
        *(uint32_t *)field = (uint32_t)u;
      return 0;
    case AIR__T_DOUBLE: {
      bool integer;
      char buf[64];
      if (n >= sizeof buf || !json_number(s, n, &integer)) {
        expect_desc(o, want, sizeof want);
        snprintf(why, wsz, "expected %s, got %s", want,
                 air__cfg_shown(v, sizeof v, s, n));
        return -1;
      }
      memcpy(buf, s, n);
      buf[n] = '\0';
      double d = strtod(buf, NULL);
      if (!(d >= o->dmin && d <= o->dmax)) {
        snprintf(why, wsz, "%s is out of range (%g to %g)", buf, o->dmin,
                 o->dmax);
        return -1;
      }
      *(double *)field = d;
      return 0;
    }
    case AIR__T_BOOL:
      if (air__cfg_ieq(s, n, "true") || air__cfg_ieq(s, n, "false")) {
        *(bool *)field = air__cfg_ieq(s, n, "true");
        return 0;
      }
      snprintf(why, wsz, "expected true or false, got %s",
               air__cfg_shown(v, sizeof v, s, n));
      return -1;
    case AIR__T_ENUM:
      for (int i = 0; o->enums[i]; i++) {
        if (air__cfg_eq(s, n, o->enums[i])) {
          *(int *)field = i;
          return 0;
        }
      }
      expect_desc(o, want, sizeof want);
      snprintf(why, wsz, "expected %s, got %s", want,
               air__cfg_shown(v, sizeof v, s, n));
      return -1;
    case AIR__T_STR: {
      if (n > o->max) {
        snprintf(why, wsz, "is %zu bytes, over the limit of %llu", n,
                 (unsigned long long)o->max);
        return -1;
      }
      if (memchr(s, '\0', n)) {
        snprintf(why, wsz, "contains a NUL byte");
        return -1;
      }
      if (check_str(c, o->check, s, n, why, wsz) != 0) return -1;
      char *p = air__cfg_strndup(c, s, n);
      if (!p) {
        snprintf(why, wsz, "out of memory");
        return -1;
      }
      free(*(char **)field);
      *(char **)field = p;
      return 0;
    }
    default:
      snprintf(why, wsz, "internal: not a scalar option");
      return -1;
  }
}

/* Reads a scalar value node into field, reporting type and range errors. */
void air__cfg_read_scalar(air__cfg_ctx *c, const air__opt *o, struct fy_node *v,
                          loc at, const char *path, void *field) {
  char want[160], why[AIR__CFG_MSG_BYTES / 2];
  if (!air__yaml_is_scalar(v)) {
    expect_desc(o, want, sizeof want);
    air__cfg_error(c, at, "%s: expected %s, got %s", path, want,
                   air__yaml_kind(v));
    return;
  }
  size_t n;
  const char *s = air__yaml_scalar(v, &n);
  if (air__cfg_convert(c, o, s, n, field, why, sizeof why) != 0)
    air__cfg_error(c, at, "%s: %s", path, why);
}

/* ---- lists and maps ------------------------------------------------------ */

/* Checks v is a list of at most max entries; returns the count to read. */
size_t air__cfg_list_count(air__cfg_ctx *c, struct fy_node *v, loc at,
                           const char *path, uint64_t max, const char *what) {
  if (!air__yaml_is_seq(v)) {
    air__cfg_error(c, at, "%s: expected a list, got %s", path,
                   air__yaml_kind(v));
    return 0;
  }
  size_t n = air__yaml_count(v);
  if (n > max) {
    air__cfg_error(c, at, "%s: %zu %s, over the limit of %llu", path, n, what,
                   (unsigned long long)max);
    n = (size_t)max;
  }
  return n;
}

/* Reports s (n bytes) as an unknown reason, with a guess or the list. */
static void unknown_reason(air__cfg_ctx *c, loc at, const char *path,
                           const char *s, size_t n) {
  char sv[64], msg[AIR__CFG_MSG_BYTES / 2];
  size_t best = SIZE_MAX, off = 0;
  const char *guess = NULL;
  for (int i = 1; i < AIR_REASON__COUNT; i++)
    if (air__cfg_close_to(s, n, air_reason_name((air_reason)i), &best))
      guess = air_reason_name((air_reason)i);
  if (guess) {
    air__cfg_error(c, at, "%s: unknown reason %s (did you mean '%s'?)", path,
                   air__cfg_shown(sv, sizeof sv, s, n), guess);
    return;
  }
  for (int i = 1; i < AIR_REASON__COUNT && off < sizeof msg; i++)
    off += (size_t)snprintf(msg + off, sizeof msg - off, "%s%s",
                            i > 1 ? ", " : "", air_reason_name((air_reason)i));
  air__cfg_error(c, at, "%s: unknown reason %s (reasons: %s)", path,
                 air__cfg_shown(sv, sizeof sv, s, n), msg);
}

/* One reason name of an `on` list into *m; reports unknown names. */
static void reason_item(air__cfg_ctx *c, struct fy_node *r, loc at,
                        const char *path, uint32_t *m) {
  loc il = air__yaml_node_loc(r, at);
  if (!air__yaml_is_scalar(r)) {
    air__cfg_error(c, il, "%s: expected a reason name, got %s", path,
                   air__yaml_kind(r));
    return;
  }
  size_t n;
  const char *s = air__yaml_scalar(r, &n);
  air_reason reason;
  if (air_reason_from_name(s, n, &reason) == 0)
    *m |= 1u << reason;
  else
    unknown_reason(c, il, path, s, n);
}

/* `on`: a reason or a list of reasons, replacing *mask. */
void air__cfg_read_reasons(air__cfg_ctx *c, const air__opt *o,
                           struct fy_node *v, loc at, const char *path,
                           void *obj, air__policy *pol) {
  uint32_t *mask = air__cfg_field(o, obj, pol);
  uint32_t m = 0;
  if (air__yaml_is_scalar(v)) {
    reason_item(c, v, at, path, &m);
  } else if (air__yaml_is_seq(v)) {
    void *it = NULL;
    struct fy_node *item;
    while ((item = air__yaml_seq_next(v, &it)))
      reason_item(c, air__cfg_deref(c, item), at, path, &m);
  } else {
    air__cfg_error(c, at, "%s: expected a reason or a list of reasons, got %s",
                   path, air__yaml_kind(v));
    return;
  }
  *mask = m;
}

void air__cfg_read_status(air__cfg_ctx *c, const air__opt *o, struct fy_node *v,
                          loc at, const char *path, void *obj,
                          air__policy *pol) {
  air__rule *r = obj;
  (void)pol;
  struct fy_node *single = air__yaml_is_scalar(v) ? v : NULL;
  size_t n_items =
      single ? 1 : air__cfg_list_count(c, v, at, path, o->max, "statuses");
  void *it = NULL;
  r->n_status = 0;
  for (size_t i = 0; i < n_items; i++) {
    struct fy_node *s =
        air__cfg_deref(c, single ? single : air__yaml_seq_next(v, &it));
    loc il = air__yaml_node_loc(s, at);
    size_t n = 0;
    const char *t = air__yaml_is_scalar(s) ? air__yaml_scalar(s, &n) : "";
    uint64_t code;
    air__status_range range;
    if (air__yaml_is_scalar(s) && air__yaml_u64(t, n, UINT64_MAX, &code) &&
        code >= 100 && code <= 599) {
      range = (air__status_range){(uint16_t)code, (uint16_t)code};
    } else if (air__yaml_is_scalar(s) && n == 3 && t[0] >= '1' && t[0] <= '5' &&
               (t[1] == 'x' || t[1] == 'X') && (t[2] == 'x' || t[2] == 'X')) {
      uint16_t lo = (uint16_t)((t[0] - '0') * 100);
      range = (air__status_range){lo, (uint16_t)(lo + 99)};
    } else {
      char sv[64];
      air__cfg_error(c, il,
                     "%s: expected an HTTP status (100 to 599) or a class like "
                     "\"5xx\", got %s",
                     path,
                     air__yaml_is_scalar(s)
                         ? air__cfg_shown(sv, sizeof sv, t, n)
                         : air__yaml_kind(s));
      continue;
    }
    r->status[r->n_status++] = range;
  }
}

void air__cfg_read_per_reason(air__cfg_ctx *c, const air__opt *o,
                              struct fy_node *v, loc at, const char *path,
                              void *obj, air__policy *pol) {
  uint32_t *per = air__cfg_field(o, obj, pol);
  if (air__yaml_is_null(v)) return;
  if (!air__yaml_is_map(v)) {
    air__cfg_error(c, at, "%s: expected a map of reason: count, got %s", path,
                   air__yaml_kind(v));
    return;
  }
  void *it = NULL;
  struct fy_node *k, *val;
  while (air__yaml_map_next(&c->walk, v, &it, &k, &val)) {
    val = air__cfg_deref(c, val);
    loc kl = air__yaml_node_loc(k, at);
    char kp[AIR__CFG_PATH_BYTES];
    size_t n = 0;
    const char *s = air__yaml_is_scalar(k) ? air__yaml_scalar(k, &n) : "";
    air_reason reason;
    if (!air__yaml_is_scalar(k)) {
      air__cfg_error(c, kl, "%s: keys must be reason names, got %s", path,
                     air__yaml_kind(k));
      continue;
    }
    if (air_reason_from_name(s, n, &reason) != 0) {
      unknown_reason(c, kl, path, s, n);
      continue;
    }
    air__cfg_path_key(kp, path, air_reason_name(reason));
    air__cfg_read_scalar(c, o, val, air__yaml_node_loc(val, kl), kp,
                         &per[reason]);
  }
}

/* Where the element count of list option o lives (noffset). */
static size_t *count_of(const air__opt *o, void *obj, air__policy *pol) {
  void *base = o->base == AIR__B_POLICY ? (void *)pol : obj;
  return (size_t *)(void *)((char *)base + o->noffset);
}

/* PHRASES and NAMES: a list replacing *list wholesale. */
void air__cfg_read_strlist(air__cfg_ctx *c, const air__opt *o,
                           struct fy_node *v, loc at, const char *path,
                           void *obj, air__policy *pol) {
  char ***list = air__cfg_field(o, obj, pol);
  size_t *count = count_of(o, obj, pol);
  size_t n = air__cfg_list_count(c, v, at, path, o->max, "entries");
  if (!air__yaml_is_seq(v)) return;
  char **out = n ? calloc(n, sizeof *out) : NULL;
  size_t k = 0;
  if (n && !out) {
    c->oom = true;
    return;
  }
  void *it = NULL;
  for (size_t i = 0; i < n; i++) {
    struct fy_node *s = air__cfg_deref(c, air__yaml_seq_next(v, &it));
    loc il = air__yaml_node_loc(s, at);
    char ip[AIR__CFG_PATH_BYTES], sv[64];
    air__cfg_path_idx(ip, path, i);
    if (!air__yaml_is_scalar(s)) {
      air__cfg_error(c, il, "%s: expected a string, got %s", ip,
                     air__yaml_kind(s));
      continue;
    }
    size_t len;
    const char *t = air__yaml_scalar(s, &len);
    if (o->type == AIR__T_NAMES) {
      if (!header_token(t, len)) {
        air__cfg_error(c, il, "%s: %s is not a header name", ip,
                       air__cfg_shown(sv, sizeof sv, t, len));
        continue;
      }
    } else if (len == 0 || len > AIR__MAX_PHRASE_BYTES ||
               memchr(t, '\0', len)) {
      air__cfg_error(
          c, il, "%s: a phrase must have 1 to %u bytes and no NUL (got %zu)",
          ip, (unsigned)AIR__MAX_PHRASE_BYTES, len);
      continue;
    }
    char *d = air__cfg_strndup(c, t, len);
    if (!d) break;
    if (o->type == AIR__T_NAMES)
      for (size_t j = 0; j < len; j++)
        d[j] = (char)tolower((unsigned char)d[j]);
    out[k++] = d;
  }
  air__cfg_strlist_free(*list, *count);
  *list = out;
  *count = k;
}

void air__cfg_read_headers(air__cfg_ctx *c, const air__opt *o,
                           struct fy_node *v, loc at, const char *path,
                           void *obj, air__policy *pol) {
  air__kv **list = air__cfg_field(o, obj, pol);
  size_t *count = count_of(o, obj, pol);
  if (air__yaml_is_null(v)) return;
  if (!air__yaml_is_map(v)) {
    air__cfg_error(c, at, "%s: expected a map of header: value, got %s", path,
                   air__yaml_kind(v));
    return;
  }
  size_t n = air__yaml_count(v);
  if (n > o->max) {
    air__cfg_error(c, at, "%s: %zu headers, over the limit of %llu", path, n,
                   (unsigned long long)o->max);
    n = (size_t)o->max;
  }
  air__kv *out = n ? calloc(n, sizeof *out) : NULL;
  size_t k = 0;
  if (n && !out) {
    c->oom = true;
    return;
  }
  void *it = NULL;
  struct fy_node *key, *val;
  while (k < n && air__yaml_map_next(&c->walk, v, &it, &key, &val)) {
    val = air__cfg_deref(c, val);
    loc kl = air__yaml_node_loc(key, at);
    char sv[64];
    size_t kn = 0, vn = 0;
    const char *ks = air__yaml_is_scalar(key) ? air__yaml_scalar(key, &kn) : "";
    if (!header_token(ks, kn)) {
      air__cfg_error(c, kl, "%s: %s is not a header name", path,
                     air__yaml_is_scalar(key)
                         ? air__cfg_shown(sv, sizeof sv, ks, kn)
                         : air__yaml_kind(key));
      continue;
    }
    const char *vs =
        air__yaml_is_scalar(val) ? air__yaml_scalar(val, &vn) : NULL;
    if (!vs || vn > MAX_HEADER_VALUE_BYTES || !header_value_ok(vs, vn)) {
      air__cfg_error(
          c, air__yaml_node_loc(val, kl),
          "%s.%s: expected a header value (one line, at most %u bytes)", path,
          air__cfg_shown(sv, sizeof sv, ks, kn),
          (unsigned)MAX_HEADER_VALUE_BYTES);
      continue;
    }
    out[k].name = air__cfg_strndup(c, ks, kn);
    out[k].value = air__cfg_strndup(c, vs, vn);
    k++;
  }
  for (size_t i = 0; i < *count; i++) {
    free((*list)[i].name);
    free((*list)[i].value);
  }
  free(*list);
  *list = out;
  *count = k;
}

/*
 * YAML -> jansson value; NULL on error (reported once). *budget counts the
 * values still allowed, so aliases cannot blow an override up.
 */
static json_t *to_json(air__cfg_ctx *c, struct fy_node *n, loc at,
                       const char *path, int depth, size_t *budget) {
  n = air__cfg_deref(c, n);
  loc nl = air__yaml_node_loc(n, at);
  if (c->walk.stop) return NULL;
  if (*budget == 0) return NULL; /* reported already */
  if (depth > 64 || --*budget == 0) {
    air__cfg_error(c, nl,
                   "%s: too large or nested too deeply (at most %u values, "
                   "64 levels)",
                   path, (unsigned)MAX_OVERRIDE_NODES - 1);
    *budget = 0;
    return NULL;
  }
  if (air__yaml_is_null(n)) return json_null();
  if (air__yaml_is_map(n)) {
    json_t *o = json_object();
    void *it = NULL;
    struct fy_node *k, *v;
    while (o && air__yaml_map_next(&c->walk, n, &it, &k, &v)) {
      size_t kn = 0;
      const char *ks = air__yaml_is_scalar(k) ? air__yaml_scalar(k, &kn) : NULL;
      char kp[AIR__CFG_PATH_BYTES];
      if (!ks || memchr(ks, '\0', kn)) {
        air__cfg_error(c, air__yaml_node_loc(k, nl), "%s: keys must be strings",
                       path);
        continue;
      }
      air__cfg_path_fmt(kp, "%s.%.*s", path, (int)(kn > 64 ? 64 : kn), ks);
      json_t *val =
          to_json(c, v, air__yaml_node_loc(k, nl), kp, depth + 1, budget);
      if (!val) continue;
      char *key = air__cfg_strndup(c, ks, kn);
      if (!key || json_object_set_new(o, key, val) != 0) {
        if (key)
          air__cfg_error(c, air__yaml_node_loc(k, nl),
                         "%s: key is not valid UTF-8", kp);
        else
          json_decref(val);
      }
      free(key);
    }
    if (!o) c->oom = true;
    return o;
  }
  if (air__yaml_is_seq(n)) {
    json_t *a = json_array();
    void *it = NULL;
    struct fy_node *item;
    size_t i = 0;
    while (a && (item = air__yaml_seq_next(n, &it))) {
      char ip[AIR__CFG_PATH_BYTES];
      air__cfg_path_idx(ip, path, i++);
      json_t *val = to_json(c, item, nl, ip, depth + 1, budget);
      if (val) json_array_append_new(a, val);
    }
    if (!a) c->oom = true;
    return a;
  }
  size_t len;
  const char *s = air__yaml_scalar(n, &len);
  if (air__yaml_is_plain(n)) {
    bool integer;
    if (air__cfg_eq(s, len, "true")) return json_true();
    if (air__cfg_eq(s, len, "false")) return json_false();
    if (json_number(s, len, &integer) && len < 64) {
      char buf[64];
      memcpy(buf, s, len);
      buf[len] = '\0';
      errno = 0;
      long long ll = integer ? strtoll(buf, NULL, 10) : 0;
      if (integer && errno == 0) return json_integer(ll);
      return json_real(strtod(buf, NULL));
    }
  }
  json_t *str = json_stringn(s, len);
  if (!str) air__cfg_error(c, nl, "%s: not a valid UTF-8 string", path);
  return str;
}

void air__cfg_read_override(air__cfg_ctx *c, const air__opt *o,
                            struct fy_node *v, loc at, const char *path,
                            void *obj, air__policy *pol) {
  char **out = air__cfg_field(o, obj, pol);
  static const char *const reserved[] = {"model", "messages", "stream"};
  if (!air__yaml_is_map(v)) {
    air__cfg_error(c, at, "%s: expected a map of request fields, got %s", path,
                   air__yaml_kind(v));
    return;
  }
  size_t before = c->n_errors, budget = MAX_OVERRIDE_NODES;
  json_t *j = to_json(c, v, at, path, 0, &budget);
  if (!j) return;
  for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++) {
    if (json_object_get(j, reserved[i])) {
      struct fy_node *k = NULL;
      air__cfg_map_get(c, v, reserved[i], &k);
      air__cfg_error(
          c, air__yaml_node_loc(k, at),
          "%s: cannot override '%s' (the route and target decide it)", path,
          reserved[i]);
    }
  }
  if (c->n_errors == before) {
    char *text = json_dumps(
        j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
    if (!text) {
      c->oom = true;
    } else {
      free(*out);
      *out = air__cfg_strndup(c, text, strlen(text));
      free(text);
    }
  }
  json_decref(j);
}
