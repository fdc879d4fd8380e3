/*
 * The config loader: YAML (or JSON) text -> a resolved, immutable air_config.
 *
 * Every key is described once in the option table (config_table.c); this file
 * walks the YAML tree against that table. Resolution: built-in defaults <-
 * `defaults:` <- the route, each map merged key by key, each list replacing
 * the one below. Every problem is collected with its FILE:LINE:COL and
 * handed to the caller's callback sorted by position; loading never stops at
 * the first error.
 */
#include "buf.h"
#include "policy.h"
#include "yaml.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_table.h"
#include "limits.h"
#include "redis_url.h"
#include "telemetry.h"

#define PATH_BYTES 320
#define MSG_BYTES 1024
#define MAX_DIAGS 1000            /* diagnostics kept; the rest counted */
#define MAX_NODE_VISITS 1000000ul /* bounds alias expansion */
#define MAX_OVERRIDE_NODES 10000  /* values in one override: map */
#define MAX_HEADER_VALUE_BYTES 8192
#define DEFAULT_LISTEN "127.0.0.1:8080"

/* ---- diagnostics --------------------------------------------------------- */

typedef air__yaml_loc loc; /* {0, 0}: not tied to a place */

typedef struct diag_rec {
  air_severity sev;
  loc at;
  size_t seq;
  char *msg;
} diag_rec;

typedef struct ctx {
  const char *file;
  air_config *cfg;
  const air__opt *opts;
  size_t n_opts;
  diag_rec *diags;
  size_t n_diags;
  size_t cap_diags;
  size_t n_errors;
  size_t n_dropped;
  bool oom;
  bool in_builtin;     /* reading the built-in rules: no file positions */
  air__yaml_walk walk; /* stop: an alias bomb ended the walk */
  struct fy_node *defaults_rules; /* rules: of defaults:, NULL if none */
} ctx;

/* Keys seen in one map, by option index: key node and value node. */
typedef struct seen_t {
  struct fy_node *key[AIR__MAX_OPTS];
  struct fy_node *val[AIR__MAX_OPTS];
} seen_t;

static void vreport(ctx *c, air_severity sev, loc at, const char *fmt,
                    va_list ap) __attribute__((format(printf, 4, 0)));

static void vreport(ctx *c, air_severity sev, loc at, const char *fmt,
                    va_list ap) {
  char buf[MSG_BYTES];
  size_t off = 0;
  if (sev == AIR_DIAG_ERROR) c->n_errors++;
  if (c->in_builtin) {
    off = (size_t)snprintf(buf, sizeof buf, "internal: built-in default: ");
    at.line = at.col = 0;
  }
  vsnprintf(buf + off, sizeof buf - off, fmt, ap);
  if (c->n_diags >= MAX_DIAGS) {
    c->n_dropped++;
    return;
  }
  if (c->n_diags == c->cap_diags) {
    size_t cap = c->cap_diags ? c->cap_diags * 2 : 16;
    diag_rec *d = realloc(c->diags, cap * sizeof *d);
    if (!d) {
      c->oom = true;
      return;
    }
    c->diags = d;
    c->cap_diags = cap;
  }
  char *m = strdup(buf);
  if (!m) {
    c->oom = true;
    return;
  }
  c->diags[c->n_diags] =
      (diag_rec){.sev = sev, .at = at, .seq = c->n_diags, .msg = m};
  c->n_diags++;
}

static void error_at(ctx *c, loc at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void error_at(ctx *c, loc at, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(c, AIR_DIAG_ERROR, at, fmt, ap);
  va_end(ap);
}

static void warn_at(ctx *c, loc at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void warn_at(ctx *c, loc at, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(c, AIR_DIAG_WARNING, at, fmt, ap);
  va_end(ap);
}

/* Tracing settings come from the environment too: no place in the file. */
static void otel_diag(void *data, bool error, const char *msg) {
  ctx *c = data;
  if (error)
    error_at(c, (loc){0, 0}, "%s", msg);
  else
    warn_at(c, (loc){0, 0}, "%s", msg);
}

static int diag_cmp(const void *a, const void *b) {
  const diag_rec *x = a, *y = b;
  if (x->at.line != y->at.line) return x->at.line < y->at.line ? -1 : 1;
  if (x->at.col != y->at.col) return x->at.col < y->at.col ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Hands every collected diagnostic to cb, sorted by position, then frees. */
static void flush_diags(ctx *c, air_diag_cb cb, void *data) {
  if (c->n_diags > 1) qsort(c->diags, c->n_diags, sizeof *c->diags, diag_cmp);
  for (size_t i = 0; i < c->n_diags; i++) {
    if (cb) {
      air_diag d = {c->diags[i].sev, c->file, c->diags[i].at.line,
                    c->diags[i].at.col, c->diags[i].msg};
      cb(data, &d);
    }
    free(c->diags[i].msg);
  }
  if (c->n_dropped && cb) {
    char m[128];
    snprintf(m, sizeof m, "%zu more problems not shown", c->n_dropped);
    air_diag d = {AIR_DIAG_ERROR, c->file, 0, 0, m};
    cb(data, &d);
  }
  free(c->diags);
  c->diags = NULL;
  c->n_diags = c->cap_diags = 0;
}

/* ---- small string helpers ------------------------------------------------ */

static char *xstrndup(ctx *c, const char *s, size_t n) {
  char *p = malloc(n + 1);
  if (!p) {
    c->oom = true;
    return NULL;
  }
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

/* 'value' for messages: quoted, truncated, control bytes shown as '?'. */
static const char *shown(char *out, size_t sz, const char *s, size_t n) {
  size_t lim = n > 48 ? 48 : n, j = 0;
  out[j++] = '\'';
  for (size_t i = 0; i < lim && j + 5 < sz; i++)
    out[j++] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
  if (lim < n && j + 5 < sz) {
    memcpy(out + j, "...", 3);
    j += 3;
  }
  out[j++] = '\'';
  out[j] = '\0';
  return out;
}

static bool eq(const char *s, size_t n, const char *lit) {
  return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

static bool ieq(const char *s, size_t n, const char *lit) {
  if (strlen(lit) != n) return false;
  for (size_t i = 0; i < n; i++)
    if (tolower((unsigned char)s[i]) != tolower((unsigned char)lit[i]))
      return false;
  return true;
}

/* Formats a config path into out[PATH_BYTES]; a long one ends in "...". */
static void path_fmt(char *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void path_fmt(char *out, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(out, PATH_BYTES, fmt, ap);
  va_end(ap);
  if (n >= PATH_BYTES) memcpy(out + PATH_BYTES - 4, "...", 4);
}

static void path_key(char *out, const char *path, const char *key) {
  if (path[0])
    path_fmt(out, "%s.%s", path, key);
  else
    path_fmt(out, "%s", key);
}

static void path_idx(char *out, const char *path, size_t i) {
  path_fmt(out, "%s[%zu]", path, i);
}

static const char *where(const char *path) {
  return path[0] ? path : "the top level";
}

/* "in routes[0]" or "at the top level", for unknown-key messages. */
static void in_where(char *out, size_t sz, const char *path) {
  snprintf(out, sz, "%s %s", path[0] ? "in" : "at", where(path));
}

/* Levenshtein distance, case-insensitive; SIZE_MAX for long inputs. */
static size_t edit_distance(const char *a, size_t an, const char *b,
                            size_t bn) {
  size_t row[65];
  if (an > 64 || bn > 64) return SIZE_MAX;
  for (size_t j = 0; j <= bn; j++) row[j] = j;
  for (size_t i = 1; i <= an; i++) {
    size_t prev = row[0];
    row[0] = i;
    for (size_t j = 1; j <= bn; j++) {
      size_t tmp = row[j];
      size_t cost =
          tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
      size_t best = row[j] + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      if (prev + cost < best) best = prev + cost;
      row[j] = best;
      prev = tmp;
    }
  }
  return row[bn];
}

/* Whether candidate is a likely misspelling of s (n bytes). */
static bool close_to(const char *s, size_t n, const char *cand, size_t *best) {
  size_t d = edit_distance(s, n, cand, strlen(cand));
  if (d == 0 || d > 2 || d >= strlen(cand) || d >= *best) return false;
  *best = d;
  return true;
}

/* ---- YAML node helpers --------------------------------------------------- */

/* The walker's budget was crossed: one error, and the walk stops. */
static void over_budget(void *data, unsigned long max) {
  error_at(data, (loc){0, 0},
           "config expands to more than %lu nodes (alias expansion?)", max);
}

/* Follows an alias; counts visits so alias bombs end in an error. */
static struct fy_node *deref(ctx *c, struct fy_node *n) {
  return air__yaml_deref(&c->walk, n);
}

/*
 * The value of key in mapping n (aliases followed), or NULL; *keyp (when not
 * NULL) receives the key node.
 */
static struct fy_node *map_get(ctx *c, struct fy_node *n, const char *key,
                               struct fy_node **keyp) {
  void *it = NULL;
  struct fy_node *k, *v;
  if (!air__yaml_is_map(n)) return NULL;
  while (air__yaml_map_next(&c->walk, n, &it, &k, &v)) {
    size_t kn = 0;
    const char *ks = air__yaml_is_scalar(k) ? air__yaml_scalar(k, &kn) : NULL;
    if (ks && eq(ks, kn, key)) {
      if (keyp) *keyp = k;
      return deref(c, v);
    }
  }
  return NULL;
}

/* ---- the option table ---------------------------------------------------- */

static const air__opt *find_opt(const ctx *c, unsigned scope, const char *name,
                                size_t n, size_t *idx) {
  for (size_t i = 0; i < c->n_opts; i++) {
    if ((c->opts[i].scopes & scope) && eq(name, n, c->opts[i].name)) {
      if (idx) *idx = i;
      return &c->opts[i];
    }
  }
  return NULL;
}

static size_t opt_index(const ctx *c, unsigned scope, const char *name) {
  size_t i = 0;
  find_opt(c, scope, name, strlen(name), &i);
  return i;
}

static void *field_of(const air__opt *o, void *obj, air__policy *pol) {
  void *base = o->base == AIR__B_POLICY ? (void *)pol : obj;
  return base ? (char *)base + o->offset : NULL;
}

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

static size_t provider_index(const air_config *cfg, const char *s, size_t n) {
  for (size_t i = 0; i < cfg->n_providers; i++)
    if (cfg->providers[i].name && eq(s, n, cfg->providers[i].name)) return i;
  return SIZE_MAX;
}

/* Extra checks of a string option; 0 or -1 with why. */
static int check_str(ctx *c, air__str_check ck, const char *s, size_t n,
                     char *why, size_t wsz) {
  char v[64];
  switch (ck) {
    case AIR__CK_NONE:
      return 0;
    case AIR__CK_TEXT:
      if (n == 0) return snprintf(why, wsz, "must not be empty"), -1;
      return 0;
    case AIR__CK_NAME:
      if (n == 0) return snprintf(why, wsz, "must not be empty"), -1;
      if (memchr(s, '/', n))
        return snprintf(why, wsz, "%s must not contain '/'",
                        shown(v, sizeof v, s, n)),
               -1;
      if (has_ctl_or_blank(s, n))
        return snprintf(why, wsz,
                        "%s must not contain blanks or control characters",
                        shown(v, sizeof v, s, n)),
               -1;
      return 0;
    case AIR__CK_ENV: {
      bool ok = n > 0 && !isdigit((unsigned char)s[0]);
      for (size_t i = 0; ok && i < n; i++)
        ok = isalnum((unsigned char)s[i]) || s[i] == '_';
      if (!ok)
        return snprintf(why, wsz,
                        "%s is not an environment variable name "
                        "([A-Za-z_][A-Za-z0-9_]*)",
                        shown(v, sizeof v, s, n)),
               -1;
      return 0;
    }
    case AIR__CK_URL: {
      const char *a = "http://", *b = "https://";
      size_t skip = 0;
      if (n > strlen(a) && ieq(s, strlen(a), a))
        skip = strlen(a);
      else if (n > strlen(b) && ieq(s, strlen(b), b))
        skip = strlen(b);
      if (!skip || s[skip] == '/' || has_ctl_or_blank(s, n))
        return snprintf(why, wsz, "%s is not a %s or %s URL",
                        shown(v, sizeof v, s, n), a, b),
               -1;
      return 0;
    }
    case AIR__CK_REDIS: {
      /* The value is never quoted: it might hold a password. */
      air__redis_url u;
      char r[256];
      int bad = air__redis_url_parse(s, n, &u, r, sizeof r);
      bool secret = bad == 0 && u.has_password;
      air__redis_url_wipe(&u);
      if (bad) return snprintf(why, wsz, "is not a usable URL: %s", r), -1;
      if (secret)
        return snprintf(why, wsz,
                        "must not hold a password (a config file is no "
                        "place for it): give it in password_env, or the "
                        "whole URL in url_env"),
               -1;
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
        return snprintf(why, wsz,
                        "%s is not HOST:PORT (port 0 to 65535, "
                        "[v6 address]:PORT)",
                        shown(v, sizeof v, s, n)),
               -1;
      if (s[0] == '[' ? s[hn - 1] != ']' || hn < 3 : memchr(s, ':', hn) != NULL)
        return snprintf(why, wsz,
                        "%s: an IPv6 address goes in brackets, "
                        "as [::1]:8080",
                        shown(v, sizeof v, s, n)),
               -1;
      return 0;
    }
    case AIR__CK_TARGET: {
      const char *slash = memchr(s, '/', n);
      if (!slash || slash == s || slash == s + n - 1 || has_ctl_or_blank(s, n))
        return snprintf(why, wsz, "%s is not of the form provider/model",
                        shown(v, sizeof v, s, n)),
               -1;
      size_t pn = (size_t)(slash - s);
      if (provider_index(c->cfg, s, pn) == SIZE_MAX) {
        char p[64];
        size_t off = (size_t)snprintf(
            why, wsz, "target %s names unknown provider %s",
            shown(v, sizeof v, s, n), shown(p, sizeof p, s, pn));
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
static int convert(ctx *c, const air__opt *o, const char *s, size_t n,
                   void *field, char *why, size_t wsz) {
  char v[64], want[160];
  uint64_t u = 0;
  switch (o->type) {
    case AIR__T_U64:
    case AIR__T_U32:
    case AIR__T_COUNT:
    case AIR__T_PER_REASON:
      if ((o->type == AIR__T_COUNT || o->type == AIR__T_PER_REASON) &&
          eq(s, n, "unlimited")) {
        *(uint32_t *)field = AIR__UNLIMITED;
        return 0;
      }
      if (!air__yaml_u64(s, n, UINT64_MAX, &u)) {
        expect_desc(o, want, sizeof want);
        snprintf(why, wsz, "expected %s, got %s", want,
                 shown(v, sizeof v, s, n));
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
                 shown(v, sizeof v, s, n));
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
      if (ieq(s, n, "true") || ieq(s, n, "false")) {
        *(bool *)field = ieq(s, n, "true");
        return 0;
      }
      snprintf(why, wsz, "expected true or false, got %s",
               shown(v, sizeof v, s, n));
      return -1;
    case AIR__T_ENUM:
      for (int i = 0; o->enums[i]; i++) {
        if (eq(s, n, o->enums[i])) {
          *(int *)field = i;
          return 0;
        }
      }
      expect_desc(o, want, sizeof want);
      snprintf(why, wsz, "expected %s, got %s", want, shown(v, sizeof v, s, n));
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
      char *p = xstrndup(c, s, n);
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
static void read_scalar(ctx *c, const air__opt *o, struct fy_node *v, loc at,
                        const char *path, void *field) {
  char want[160], why[MSG_BYTES / 2];
  if (!air__yaml_is_scalar(v)) {
    expect_desc(o, want, sizeof want);
    error_at(c, at, "%s: expected %s, got %s", path, want, air__yaml_kind(v));
    return;
  }
  size_t n;
  const char *s = air__yaml_scalar(v, &n);
  if (convert(c, o, s, n, field, why, sizeof why) != 0)
    error_at(c, at, "%s: %s", path, why);
}

/* ---- freeing and copying ------------------------------------------------- */

static void rule_cleanup(air__rule *r) {
  free(r->message);
  free(r->to);
  free(r->override_json);
  for (size_t i = 0; i < r->n_target_override; i++) free(r->target_override[i]);
  free(r->target_override);
}

static void strlist_free(char **v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

static void policy_cleanup(air__policy *p) {
  for (size_t i = 0; i < p->n_rules; i++) rule_cleanup(&p->rules[i]);
  free(p->rules);
  strlist_free(p->phrases, p->n_phrases);
  p->rules = NULL;
  p->phrases = NULL;
  p->n_rules = p->n_phrases = 0;
}

static char *dup_or_null(ctx *c, const char *s) {
  return s ? xstrndup(c, s, strlen(s)) : NULL;
}

/* Deep copy of src into dst (dst uninitialised). On OOM sets c->oom. */
static void policy_copy(ctx *c, air__policy *dst, const air__policy *src) {
  *dst = *src;
  dst->rules = NULL;
  dst->phrases = NULL;
  dst->n_rules = dst->n_phrases = 0;
  if (src->n_rules) {
    dst->rules = calloc(src->n_rules, sizeof *dst->rules);
    if (!dst->rules) {
      c->oom = true;
      return;
    }
    for (size_t i = 0; i < src->n_rules; i++) {
      air__rule *r = &dst->rules[i];
      *r = src->rules[i];
      r->message = dup_or_null(c, src->rules[i].message);
      r->to = dup_or_null(c, src->rules[i].to);
      r->override_json = dup_or_null(c, src->rules[i].override_json);
      r->target_override = NULL;
      r->n_target_override = 0;
      dst->n_rules = i + 1;
    }
  }
  if (src->n_phrases) {
    dst->phrases = calloc(src->n_phrases, sizeof *dst->phrases);
    if (!dst->phrases) {
      c->oom = true;
      return;
    }
    for (size_t i = 0; i < src->n_phrases; i++) {
      dst->phrases[i] = dup_or_null(c, src->phrases[i]);
      dst->n_phrases = i + 1;
    }
  }
}

/* Frees a secret after overwriting it, so it does not linger in the heap. */
static void free_secret(char *s) {
  if (!s) return;
  for (volatile char *p = s; *p; p++) *p = 0;
  free(s);
}

void air_config_free(air_config *cfg) {
  if (!cfg) return;
  free(cfg->file);
  free(cfg->listen);
  free(cfg->client_keys_env);
  for (size_t i = 0; i < cfg->n_providers; i++) {
    air__provider *p = &cfg->providers[i];
    free(p->name);
    free(p->base_url);
    free(p->api_key_env);
    free_secret(p->api_key);
    for (size_t j = 0; j < p->n_headers; j++) {
      free(p->headers[j].name);
      free(p->headers[j].value);
    }
    free(p->headers);
  }
  free(cfg->providers);
  for (size_t i = 0; i < cfg->n_routes; i++) {
    air__route *r = &cfg->routes[i];
    free(r->name);
    for (size_t j = 0; j < r->n_targets; j++) {
      free(r->targets[j].name);
      free(r->targets[j].model);
      free(r->targets[j].override_json);
    }
    free(r->targets);
    policy_cleanup(&r->policy);
  }
  free(cfg->routes);
  policy_cleanup(&cfg->defaults);
  free(cfg->redis.url);
  free(cfg->redis.url_env);
  free(cfg->redis.password_env);
  free(cfg->redis.prefix);
  free_secret(cfg->redis.resolved_url);
  free_secret(cfg->redis.password);
  strlist_free(cfg->forward_headers, cfg->n_forward_headers);
  free(cfg->telemetry.otlp.endpoint);
  free(cfg->telemetry.otlp.headers_env);
  air__otel_cleanup(&cfg->otel);
  free(cfg);
}

/* ---- walking maps -------------------------------------------------------- */

static void apply_value(ctx *c, const air__opt *o, struct fy_node *key,
                        struct fy_node *val, void *obj, air__policy *pol,
                        const char *path);

static void unknown_key(ctx *c, unsigned scope, loc at, const char *k,
                        size_t kn, const char *path) {
  char v[64], msg[MSG_BYTES / 2], in[PATH_BYTES + 8];
  size_t best = SIZE_MAX, off = 0;
  const char *guess = NULL;
  shown(v, sizeof v, k, kn);
  in_where(in, sizeof in, path);
  if (eq(k, kn, "<<")) {
    error_at(c, at, "%s: merge keys (<<) are not supported", where(path));
    return;
  }
  for (size_t i = 0; i < c->n_opts; i++)
    if ((c->opts[i].scopes & scope) && close_to(k, kn, c->opts[i].name, &best))
      guess = c->opts[i].name;
  if (guess) {
    error_at(c, at, "unknown key %s %s (did you mean '%s'?)", v, in, guess);
    return;
  }
  /* A key of another map: say where it belongs. */
  for (size_t i = 0; i < c->n_opts && off < sizeof msg; i++) {
    if (!eq(k, kn, c->opts[i].name)) continue;
    for (unsigned b = 1; b && off < sizeof msg; b <<= 1)
      if (c->opts[i].scopes & b)
        off += (size_t)snprintf(msg + off, sizeof msg - off, "%s%s",
                                off ? ", " : "", air__config_scope_path(b));
  }
  if (off) {
    error_at(c, at, "unknown key %s %s (it belongs in: %s)", v, in, msg);
    return;
  }
  for (size_t i = 0; i < c->n_opts && off < sizeof msg; i++)
    if (c->opts[i].scopes & scope)
      off += (size_t)snprintf(msg + off, sizeof msg - off, "%s%s",
                              off ? ", " : "", c->opts[i].name);
  error_at(c, at, "unknown key %s %s (expected one of: %s)", v, in, msg);
}

/*
 * Applies the keys of map (a mapping, or null meaning empty) to obj/pol per
 * the options of scope, in phase order. `at` locates the map for "missing
 * key" errors. seen (optional) receives the key and value nodes by index.
 */
static void apply_map(ctx *c, unsigned scope, struct fy_node *map, loc at,
                      void *obj, air__policy *pol, const char *path,
                      seen_t *seen) {
  seen_t local;
  if (!seen) seen = &local;
  memset(seen, 0, sizeof *seen);
  if (c->walk.stop) return;
  if (!air__yaml_is_null(map) && !air__yaml_is_map(map)) {
    error_at(c, air__yaml_node_loc(map, at), "%s: expected a map, got %s",
             where(path), air__yaml_kind(map));
    return;
  }
  if (!air__yaml_is_null(map)) {
    void *it = NULL;
    struct fy_node *k, *v;
    while (air__yaml_map_next(&c->walk, map, &it, &k, &v) && !c->walk.stop) {
      loc kl = air__yaml_node_loc(k, at);
      if (!air__yaml_is_scalar(k)) {
        error_at(c, kl, "%s: keys must be strings, got %s", where(path),
                 air__yaml_kind(k));
        continue;
      }
      size_t kn, idx;
      const char *ks = air__yaml_scalar(k, &kn);
      if (scope == AIR__SC_TOP && kn > 2 && memcmp(ks, "x-", 2) == 0)
        continue; /* extension keys: a place for YAML anchors */
      if (!find_opt(c, scope, ks, kn, &idx)) {
        unknown_key(c, scope, kl, ks, kn, path);
        continue;
      }
      seen->key[idx] = k;
      seen->val[idx] = v;
    }
    for (unsigned phase = 0; phase < 3; phase++)
      for (size_t i = 0; i < c->n_opts; i++)
        if (seen->key[i] && c->opts[i].phase == phase)
          apply_value(c, &c->opts[i], seen->key[i], seen->val[i], obj, pol,
                      path);
  }
  for (size_t i = 0; i < c->n_opts; i++)
    if ((c->opts[i].scopes & scope) && (c->opts[i].flags & AIR__F_REQUIRED) &&
        !seen->key[i])
      error_at(c, at, "%s: missing required key '%s'", where(path),
               c->opts[i].name);
  if (scope == AIR__SC_HEDGE && !seen->key[opt_index(c, scope, "enabled")])
    ((air__hedge_cfg *)obj)->enabled = true; /* the map given turns it on */
  if (scope == AIR__SC_CONTINUATION &&
      !seen->key[opt_index(c, scope, "enabled")])
    ((air__continuation *)obj)->enabled = true; /* likewise */
  if (scope == AIR__SC_STICKY) {
    air__sticky_cfg *st = obj;
    size_t en = opt_index(c, scope, "enabled");
    if (!seen->key[en] && (seen->key[opt_index(c, scope, "after_ms")] ||
                           seen->key[opt_index(c, scope, "requests")]))
      st->enabled = true;
    if (st->enabled && st->after_ms == 0 && st->requests == 0)
      error_at(c, at,
               "%s: sticky needs after_ms or requests above 0 "
               "(enabled: false turns it off)",
               where(path));
  }
}

/* ---- list and special values --------------------------------------------- */

/* Checks v is a list of at most max entries; returns the count to read. */
static size_t list_count(ctx *c, struct fy_node *v, loc at, const char *path,
                         uint64_t max, const char *what) {
  if (!air__yaml_is_seq(v)) {
    error_at(c, at, "%s: expected a list, got %s", path, air__yaml_kind(v));
    return 0;
  }
  size_t n = air__yaml_count(v);
  if (n > max) {
    error_at(c, at, "%s: %zu %s, over the limit of %llu", path, n, what,
             (unsigned long long)max);
    n = (size_t)max;
  }
  return n;
}

/* Reports s (n bytes) as an unknown reason, with a guess or the list. */
static void unknown_reason(ctx *c, loc at, const char *path, const char *s,
                           size_t n) {
  char sv[64], msg[MSG_BYTES / 2];
  size_t best = SIZE_MAX, off = 0;
  const char *guess = NULL;
  for (int i = 1; i < AIR_REASON__COUNT; i++)
    if (close_to(s, n, air_reason_name((air_reason)i), &best))
      guess = air_reason_name((air_reason)i);
  if (guess) {
    error_at(c, at, "%s: unknown reason %s (did you mean '%s'?)", path,
             shown(sv, sizeof sv, s, n), guess);
    return;
  }
  for (int i = 1; i < AIR_REASON__COUNT && off < sizeof msg; i++)
    off += (size_t)snprintf(msg + off, sizeof msg - off, "%s%s",
                            i > 1 ? ", " : "", air_reason_name((air_reason)i));
  error_at(c, at, "%s: unknown reason %s (reasons: %s)", path,
           shown(sv, sizeof sv, s, n), msg);
}

/* One reason name of an `on` list into *m; reports unknown names. */
static void reason_item(ctx *c, struct fy_node *r, loc at, const char *path,
                        uint32_t *m) {
  loc il = air__yaml_node_loc(r, at);
  if (!air__yaml_is_scalar(r)) {
    error_at(c, il, "%s: expected a reason name, got %s", path,
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
static void parse_reasons(ctx *c, struct fy_node *v, loc at, const char *path,
                          uint32_t *mask) {
  uint32_t m = 0;
  if (air__yaml_is_scalar(v)) {
    reason_item(c, v, at, path, &m);
  } else if (air__yaml_is_seq(v)) {
    void *it = NULL;
    struct fy_node *item;
    while ((item = air__yaml_seq_next(v, &it)))
      reason_item(c, deref(c, item), at, path, &m);
  } else {
    error_at(c, at, "%s: expected a reason or a list of reasons, got %s", path,
             air__yaml_kind(v));
    return;
  }
  *mask = m;
}

static void parse_status(ctx *c, const air__opt *o, struct fy_node *v, loc at,
                         const char *path, air__rule *r) {
  struct fy_node *single = air__yaml_is_scalar(v) ? v : NULL;
  size_t n_items = single ? 1 : list_count(c, v, at, path, o->max, "statuses");
  void *it = NULL;
  r->n_status = 0;
  for (size_t i = 0; i < n_items; i++) {
    struct fy_node *s = deref(c, single ? single : air__yaml_seq_next(v, &it));
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
      error_at(c, il,
               "%s: expected an HTTP status (100 to 599) or a class like "
               "\"5xx\", got %s",
               path,
               air__yaml_is_scalar(s) ? shown(sv, sizeof sv, t, n)
                                      : air__yaml_kind(s));
      continue;
    }
    r->status[r->n_status++] = range;
  }
}

static void parse_per_reason(ctx *c, const air__opt *o, struct fy_node *v,
                             loc at, const char *path, uint32_t *per) {
  if (air__yaml_is_null(v)) return;
  if (!air__yaml_is_map(v)) {
    error_at(c, at, "%s: expected a map of reason: count, got %s", path,
             air__yaml_kind(v));
    return;
  }
  void *it = NULL;
  struct fy_node *k, *val;
  while (air__yaml_map_next(&c->walk, v, &it, &k, &val)) {
    val = deref(c, val);
    loc kl = air__yaml_node_loc(k, at);
    char kp[PATH_BYTES];
    size_t n = 0;
    const char *s = air__yaml_is_scalar(k) ? air__yaml_scalar(k, &n) : "";
    air_reason reason;
    if (!air__yaml_is_scalar(k)) {
      error_at(c, kl, "%s: keys must be reason names, got %s", path,
               air__yaml_kind(k));
      continue;
    }
    if (air_reason_from_name(s, n, &reason) != 0) {
      unknown_reason(c, kl, path, s, n);
      continue;
    }
    path_key(kp, path, air_reason_name(reason));
    read_scalar(c, o, val, air__yaml_node_loc(val, kl), kp, &per[reason]);
  }
}

/* PHRASES and NAMES: a list replacing *list wholesale. */
static void parse_strlist(ctx *c, const air__opt *o, struct fy_node *v, loc at,
                          const char *path, char ***list, size_t *count) {
  size_t n = list_count(c, v, at, path, o->max, "entries");
  if (!air__yaml_is_seq(v)) return;
  char **out = n ? calloc(n, sizeof *out) : NULL;
  size_t k = 0;
  if (n && !out) {
    c->oom = true;
    return;
  }
  void *it = NULL;
  for (size_t i = 0; i < n; i++) {
    struct fy_node *s = deref(c, air__yaml_seq_next(v, &it));
    loc il = air__yaml_node_loc(s, at);
    char ip[PATH_BYTES], sv[64];
    path_idx(ip, path, i);
    if (!air__yaml_is_scalar(s)) {
      error_at(c, il, "%s: expected a string, got %s", ip, air__yaml_kind(s));
      continue;
    }
    size_t len;
    const char *t = air__yaml_scalar(s, &len);
    if (o->type == AIR__T_NAMES) {
      if (!header_token(t, len)) {
        error_at(c, il, "%s: %s is not a header name", ip,
                 shown(sv, sizeof sv, t, len));
        continue;
      }
    } else if (len == 0 || len > AIR__MAX_PHRASE_BYTES ||
               memchr(t, '\0', len)) {
      error_at(c, il,
               "%s: a phrase must have 1 to %u bytes and no NUL (got %zu)", ip,
               (unsigned)AIR__MAX_PHRASE_BYTES, len);
      continue;
    }
    char *d = xstrndup(c, t, len);
    if (!d) break;
    if (o->type == AIR__T_NAMES)
      for (size_t j = 0; j < len; j++)
        d[j] = (char)tolower((unsigned char)d[j]);
    out[k++] = d;
  }
  strlist_free(*list, *count);
  *list = out;
  *count = k;
}

static void parse_headers(ctx *c, const air__opt *o, struct fy_node *v, loc at,
                          const char *path, air__kv **list, size_t *count) {
  if (air__yaml_is_null(v)) return;
  if (!air__yaml_is_map(v)) {
    error_at(c, at, "%s: expected a map of header: value, got %s", path,
             air__yaml_kind(v));
    return;
  }
  size_t n = air__yaml_count(v);
  if (n > o->max) {
    error_at(c, at, "%s: %zu headers, over the limit of %llu", path, n,
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
    val = deref(c, val);
    loc kl = air__yaml_node_loc(key, at);
    char sv[64];
    size_t kn = 0, vn = 0;
    const char *ks = air__yaml_is_scalar(key) ? air__yaml_scalar(key, &kn) : "";
    if (!header_token(ks, kn)) {
      error_at(c, kl, "%s: %s is not a header name", path,
               air__yaml_is_scalar(key) ? shown(sv, sizeof sv, ks, kn)
                                        : air__yaml_kind(key));
      continue;
    }
    const char *vs =
        air__yaml_is_scalar(val) ? air__yaml_scalar(val, &vn) : NULL;
    if (!vs || vn > MAX_HEADER_VALUE_BYTES || !header_value_ok(vs, vn)) {
      error_at(c, air__yaml_node_loc(val, kl),
               "%s.%s: expected a header value (one line, at most %u bytes)",
               path, shown(sv, sizeof sv, ks, kn),
               (unsigned)MAX_HEADER_VALUE_BYTES);
      continue;
    }
    out[k].name = xstrndup(c, ks, kn);
    out[k].value = xstrndup(c, vs, vn);
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
static json_t *to_json(ctx *c, struct fy_node *n, loc at, const char *path,
                       int depth, size_t *budget) {
  n = deref(c, n);
  loc nl = air__yaml_node_loc(n, at);
  if (c->walk.stop) return NULL;
  if (*budget == 0) return NULL; /* reported already */
  if (depth > 64 || --*budget == 0) {
    error_at(c, nl,
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
      char kp[PATH_BYTES];
      if (!ks || memchr(ks, '\0', kn)) {
        error_at(c, air__yaml_node_loc(k, nl), "%s: keys must be strings",
                 path);
        continue;
      }
      path_fmt(kp, "%s.%.*s", path, (int)(kn > 64 ? 64 : kn), ks);
      json_t *val =
          to_json(c, v, air__yaml_node_loc(k, nl), kp, depth + 1, budget);
      if (!val) continue;
      char *key = xstrndup(c, ks, kn);
      if (!key || json_object_set_new(o, key, val) != 0) {
        if (key)
          error_at(c, air__yaml_node_loc(k, nl), "%s: key is not valid UTF-8",
                   kp);
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
      char ip[PATH_BYTES];
      path_idx(ip, path, i++);
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
    if (eq(s, len, "true")) return json_true();
    if (eq(s, len, "false")) return json_false();
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
  if (!str) error_at(c, nl, "%s: not a valid UTF-8 string", path);
  return str;
}

static void parse_override(ctx *c, struct fy_node *v, loc at, const char *path,
                           char **out) {
  static const char *const reserved[] = {"model", "messages", "stream"};
  if (!air__yaml_is_map(v)) {
    error_at(c, at, "%s: expected a map of request fields, got %s", path,
             air__yaml_kind(v));
    return;
  }
  size_t before = c->n_errors, budget = MAX_OVERRIDE_NODES;
  json_t *j = to_json(c, v, at, path, 0, &budget);
  if (!j) return;
  for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++) {
    if (json_object_get(j, reserved[i])) {
      struct fy_node *k = NULL;
      map_get(c, v, reserved[i], &k);
      error_at(c, air__yaml_node_loc(k, at),
               "%s: cannot override '%s' (the route and target decide it)",
               path, reserved[i]);
    }
  }
  if (c->n_errors == before) {
    char *text = json_dumps(
        j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
    if (!text) {
      c->oom = true;
    } else {
      free(*out);
      *out = xstrndup(c, text, strlen(text));
      free(text);
    }
  }
  json_decref(j);
}

/* ---- initialisation from the table's defaults -----------------------------
 */

static void parse_rules(ctx *c, const air__opt *o, struct fy_node *v, loc at,
                        const char *path, air__policy *pol);

static void load_builtin_rules(ctx *c, const air__opt *o, air__policy *pol) {
  const char *text = air__config_builtin_rules();
  air__yaml_doc d;
  air__yaml_result r = air__yaml_load(&d, text, strlen(text), NULL, NULL);
  bool was = c->in_builtin;
  c->in_builtin = true;
  if (r != AIR__YAML_OK || !d.root)
    error_at(c, (loc){0, 0}, "cannot parse the built-in rules");
  else
    parse_rules(c, o, d.root, (loc){0, 0}, "rules", pol);
  c->in_builtin = was;
  air__yaml_doc_cleanup(&d);
}

/* Fills obj/pol with the defaults of every option of scope (recursively). */
static void init_obj(ctx *c, unsigned scope, void *obj, air__policy *pol) {
  char why[MSG_BYTES / 2];
  for (size_t i = 0; i < c->n_opts; i++) {
    const air__opt *o = &c->opts[i];
    if (!(o->scopes & scope)) continue;
    void *field = field_of(o, obj, pol);
    if (!field) continue;
    switch (o->type) {
      case AIR__T_SECTION:
        init_obj(c, o->sub, field, NULL);
        break;
      case AIR__T_DEFAULTS:
        init_obj(c, AIR__SC_DEFAULTS, c->cfg, &c->cfg->defaults);
        break;
      case AIR__T_RULES:
        load_builtin_rules(c, o, pol);
        break;
      case AIR__T_PER_REASON:
        for (int r = 0; r < AIR_REASON__COUNT; r++)
          ((uint32_t *)field)[r] = AIR__UNLIMITED;
        break;
      case AIR__T_U64:
      case AIR__T_U32:
      case AIR__T_COUNT:
      case AIR__T_DOUBLE:
      case AIR__T_BOOL:
      case AIR__T_STR:
      case AIR__T_ENUM:
        if (o->def &&
            convert(c, o, o->def, strlen(o->def), field, why, sizeof why))
          error_at(c, (loc){0, 0}, "internal: default of %s: %s", o->name, why);
        break;
      default:
        break;
    }
  }
}

/* ---- rules, targets, providers, routes ------------------------------------
 */

static void parse_rules(ctx *c, const air__opt *o, struct fy_node *v, loc at,
                        const char *path, air__policy *pol) {
  size_t n = list_count(c, v, at, path, o->max, "rules");
  if (!air__yaml_is_seq(v)) return;
  air__rule *rules = n ? calloc(n, sizeof *rules) : NULL;
  if (n && !rules) {
    c->oom = true;
    return;
  }
  const size_t i_action = opt_index(c, AIR__SC_RULE, "action");
  const size_t i_max = opt_index(c, AIR__SC_RULE, "max");
  const size_t i_to = opt_index(c, AIR__SC_RULE, "to");
  const size_t i_backoff = opt_index(c, AIR__SC_RULE, "backoff");
  const size_t i_override = opt_index(c, AIR__SC_RULE, "override");
  void *it = NULL;
  for (size_t i = 0; i < n; i++) {
    air__rule *r = &rules[i];
    struct fy_node *item = deref(c, air__yaml_seq_next(v, &it));
    loc il = air__yaml_node_loc(item, at);
    char ip[PATH_BYTES];
    seen_t sn;
    path_idx(ip, path, i);
    init_obj(c, AIR__SC_RULE, r, NULL);
    if (!air__yaml_is_map(item)) {
      error_at(c, il, "%s: expected a rule (a map), got %s", ip,
               air__yaml_kind(item));
      continue;
    }
    apply_map(c, AIR__SC_RULE, item, il, r, NULL, ip, &sn);
    if (!sn.key[i_max])
      r->max = r->action == AIR__RULE_RETRY ? 1 : AIR__UNLIMITED;
    if (r->on_mask == 0 && r->n_status == 0 && r->message == NULL)
      error_at(c, il, "%s: a rule needs at least one of on, status, message",
               ip);
    if (!sn.key[i_action]) continue;
    if (sn.key[i_to] && r->action != AIR__RULE_SWITCH)
      error_at(c, air__yaml_node_loc(sn.key[i_to], il),
               "%s.to: only a switch rule may name a target", ip);
    if (sn.key[i_backoff] && r->action != AIR__RULE_RETRY)
      warn_at(c, air__yaml_node_loc(sn.key[i_backoff], il),
              "%s.backoff: used by retry rules only; ignored", ip);
    if (sn.key[i_override] && r->action == AIR__RULE_FAIL)
      warn_at(c, air__yaml_node_loc(sn.key[i_override], il),
              "%s.override: a fail rule causes no attempt; ignored", ip);
  }
  /* pol is non-NULL: the rules option has base AIR__B_POLICY, and an option
   * of that base is skipped where no policy is given (field_of).
   * NOLINTNEXTLINE(clang-analyzer-core.NullDereference) */
  for (size_t i = 0; i < pol->n_rules; i++) rule_cleanup(&pol->rules[i]);
  free(pol->rules);
  pol->rules = rules;
  pol->n_rules = n;
}

static void parse_targets(ctx *c, const air__opt *o, struct fy_node *v, loc at,
                          const char *path, air__route *route) {
  size_t n = list_count(c, v, at, path, o->max, "targets");
  if (!air__yaml_is_seq(v)) return;
  if (n == 0) {
    error_at(c, at, "%s: a route needs at least one target", path);
    return;
  }
  route->targets = calloc(n, sizeof *route->targets);
  if (!route->targets) {
    c->oom = true;
    return;
  }
  const air__opt *to = find_opt(c, AIR__SC_TARGET, "target", 6, NULL);
  const size_t i_style = opt_index(c, AIR__SC_TARGET, "continuation_style");
  char why[MSG_BYTES / 2];
  void *it = NULL;
  for (size_t i = 0; i < n; i++) {
    air__target *t = &route->targets[i];
    route->n_targets = i + 1;
    t->timeouts = route->policy.timeouts;
    t->hedge = route->policy.hedge;
    t->provider = SIZE_MAX;
    struct fy_node *item = deref(c, air__yaml_seq_next(v, &it));
    loc il = air__yaml_node_loc(item, at);
    char ip[PATH_BYTES];
    path_idx(ip, path, i);
    if (air__yaml_is_scalar(item)) {
      size_t len;
      const char *s = air__yaml_scalar(item, &len);
      if (convert(c, to, s, len, &t->name, why, sizeof why) != 0)
        error_at(c, il, "%s: %s", ip, why);
    } else if (air__yaml_is_map(item)) {
      seen_t sn;
      apply_map(c, AIR__SC_TARGET, item, il, t, NULL, ip, &sn);
      t->style_set = sn.key[i_style] != NULL;
    } else {
      error_at(c, il, "%s: expected provider/model or a target map, got %s", ip,
               air__yaml_kind(item));
    }
    if (!t->name) continue;
    const char *slash = strchr(t->name, '/');
    if (slash) {
      t->provider = provider_index(c->cfg, t->name, (size_t)(slash - t->name));
      t->model = xstrndup(c, slash + 1, strlen(slash + 1));
    }
    /* continuation_style: the target's, else its provider's (docs/design.md
     * §3.5), which parse_providers resolved by api when not given. */
    if (!t->style_set && t->provider < c->cfg->n_providers) {
      t->style = c->cfg->providers[t->provider].continuation_style;
      t->style_set = c->cfg->providers[t->provider].continuation_style_set;
    }
    for (size_t j = 0; j < i; j++) {
      if (route->targets[j].name &&
          strcmp(route->targets[j].name, t->name) == 0) {
        error_at(c, il, "%s: duplicate target '%s' (also %s[%zu])", ip, t->name,
                 path, j);
        break;
      }
    }
  }
}

/* Every switch rule's `to` must be one of the route's targets. */
/*
 * For every rule of r with an override, its fields merged over each
 * target's own override (the rule's win), so the engine never parses JSON
 * per attempt. Both are JSON objects (parse_override checked them).
 */
static void merge_rule_overrides(ctx *c, air__route *r) {
  for (size_t i = 0; i < r->policy.n_rules && !c->oom; i++) {
    air__rule *rule = &r->policy.rules[i];
    if (rule->override_json == NULL || r->n_targets == 0) continue;
    rule->target_override = calloc(r->n_targets, sizeof(char *));
    if (rule->target_override == NULL) {
      c->oom = true;
      return;
    }
    rule->n_target_override = r->n_targets;
    for (size_t j = 0; j < r->n_targets; j++) {
      const char *tj = r->targets[j].override_json;
      if (tj == NULL) continue;
      json_t *a = json_loads(tj, 0, NULL);
      json_t *b = json_loads(rule->override_json, 0, NULL);
      char *out = NULL;
      if (json_is_object(a) && json_is_object(b) &&
          json_object_update(a, b) == 0)
        out = json_dumps(a, JSON_COMPACT);
      json_decref(a);
      json_decref(b);
      if (out == NULL) {
        c->oom = true;
        return;
      }
      rule->target_override[j] = out;
    }
  }
}

static void check_rule_targets(ctx *c, const air__route *r, size_t ri,
                               struct fy_node *rules_node,
                               const char *rules_path) {
  void *it = NULL;
  for (size_t i = 0; i < r->policy.n_rules; i++) {
    struct fy_node *item =
        rules_node ? deref(c, air__yaml_seq_next(rules_node, &it)) : NULL;
    const char *to = r->policy.rules[i].to;
    if (!to) continue;
    bool found = false;
    for (size_t j = 0; j < r->n_targets && !found; j++)
      found = r->targets[j].name && strcmp(r->targets[j].name, to) == 0;
    if (found) continue;
    struct fy_node *tn = map_get(c, item, "to", NULL);
    error_at(c, air__yaml_node_loc(tn, air__yaml_node_loc(item, (loc){0, 0})),
             "%s[%zu].to: '%s' is not one of the targets of routes[%zu]%s%s%s",
             rules_path, i, to, ri, r->name ? " ('" : "",
             r->name ? r->name : "", r->name ? "')" : "");
  }
}

/* True when the path segment s[0..n) names an API version: "v" and a
 * digit, then letters or digits ("v1", "v1beta", "v4"). */
static bool version_segment(const char *s, size_t n) {
  if (n < 2 || (s[0] != 'v' && s[0] != 'V') || !isdigit((unsigned char)s[1]))
    return false;
  for (size_t i = 2; i < n; i++)
    if (!isalnum((unsigned char)s[i])) return false;
  return true;
}

/*
 * Where the version path of base_url stands: *any when one path segment
 * names a version, *last when the last non-empty one does. The gateway
 * appends "/chat/completions" (openai) and "/v1/messages" (anthropic), so an
 * openai base_url without a version path and an anthropic one ending in one
 * usually mean a wrong URL (docs/design.md §5; docs/config.md).
 */
static void version_path(const char *url, bool *any, bool *last) {
  *any = *last = false;
  const char *p = strstr(url, "://");
  p = p ? p + 3 : url;
  /* p is at a '/' that starts a segment, or NULL past the path. */
  for (p = strchr(p, '/'); p != NULL;) {
    const char *seg = p + 1;
    size_t n = strcspn(seg, "/?#");
    if (n > 0) {
      bool v = version_segment(seg, n);
      *any = *any || v;
      *last = v;
    }
    p = seg[n] == '/' ? seg + n : NULL;
  }
}

static void parse_providers(ctx *c, const air__opt *o, struct fy_node *v,
                            loc at, const char *path) {
  air_config *cfg = c->cfg;
  size_t n = list_count(c, v, at, path, o->max, "providers");
  if (!n) return;
  cfg->providers = calloc(n, sizeof *cfg->providers);
  if (!cfg->providers) {
    c->oom = true;
    return;
  }
  const size_t i_name = opt_index(c, AIR__SC_PROVIDER, "name");
  const size_t i_api = opt_index(c, AIR__SC_PROVIDER, "api");
  const size_t i_env = opt_index(c, AIR__SC_PROVIDER, "api_key_env");
  const size_t i_url = opt_index(c, AIR__SC_PROVIDER, "base_url");
  const size_t i_style = opt_index(c, AIR__SC_PROVIDER, "continuation_style");
  void *it = NULL;
  for (size_t i = 0; i < n; i++) {
    air__provider *p = &cfg->providers[i];
    cfg->n_providers = i + 1;
    p->breaker = cfg->breaker_defaults;
    struct fy_node *item = deref(c, air__yaml_seq_next(v, &it));
    loc il = air__yaml_node_loc(item, at);
    char ip[PATH_BYTES];
    seen_t sn;
    path_idx(ip, path, i);
    if (!air__yaml_is_map(item)) {
      error_at(c, il, "%s: expected a provider (a map), got %s", ip,
               air__yaml_kind(item));
      continue;
    }
    apply_map(c, AIR__SC_PROVIDER, item, il, p, NULL, ip, &sn);
    p->continuation_style_set = sn.key[i_style] != NULL;
    if (!p->continuation_style_set)
      p->continuation_style = air__cont_style_by_api(p->api);
    if (p->name) {
      for (size_t j = 0; j < i; j++) {
        if (cfg->providers[j].name &&
            strcmp(cfg->providers[j].name, p->name) == 0) {
          error_at(c, air__yaml_node_loc(deref(c, sn.val[i_name]), il),
                   "%s.name: duplicate provider name '%s' (also %s[%zu])", ip,
                   p->name, path, j);
          break;
        }
      }
    }
    if (!p->base_url && sn.key[i_api]) {
      const char *def = p->api == AIR_DIALECT_ANTHROPIC
                            ? "https://api.anthropic.com"
                            : "https://api.openai.com/v1";
      p->base_url = xstrndup(c, def, strlen(def));
    } else if (p->base_url && sn.key[i_url]) {
      bool any, last;
      version_path(p->base_url, &any, &last);
      loc ul = air__yaml_node_loc(deref(c, sn.val[i_url]), il);
      if (p->api == AIR_DIALECT_OPENAI && !any)
        warn_at(c, ul,
                "%s.base_url: an openai base_url usually includes its version "
                "path (like https://api.openai.com/v1); the gateway appends "
                "/chat/completions to '%s'",
                ip, p->base_url);
      else if (p->api == AIR_DIALECT_ANTHROPIC && last)
        warn_at(c, ul,
                "%s.base_url: an anthropic base_url has no version path (like "
                "https://api.anthropic.com); the gateway appends /v1/messages "
                "to '%s'",
                ip, p->base_url);
    }
    if (p->api_key_env) {
      const char *val = getenv(p->api_key_env);
      if (val && val[0])
        p->api_key = xstrndup(c, val, strlen(val));
      else
        warn_at(c, air__yaml_node_loc(deref(c, sn.val[i_env]), il),
                "%s.api_key_env: %s is not set in the environment; attempts "
                "on provider '%s' will fail with reason auth",
                ip, p->api_key_env, p->name ? p->name : "?");
    }
  }
}

/* docs/design.md §3.6: a single-target route does not hedge unless
 * hedge.same_target is set; hedging turned on there is worth a warning. */
static void warn_lone_hedge(ctx *c, const air__route *r, loc at,
                            const char *path) {
  if (r->n_targets != 1) return;
  const air__hedge_cfg *h = &r->targets[0].hedge;
  if (h->enabled && !h->same_target)
    warn_at(c, at,
            "%s: hedge is on but the route has one target: it never hedges "
            "without hedge.same_target: true",
            path);
}

/* continuation (docs/design.md §3.5): what is resolved once the policy is read:
 * targets as a flag, max_gap_ms unset (0) as the route's chunk_ms. */
static void resolve_continuation(air__policy *pol) {
  air__continuation *k = &pol->continuation;
  k->any_target = k->targets == AIR__CONT_ANY;
  if (k->max_gap_ms == 0) k->max_gap_ms = pol->timeouts.chunk_ms;
}

/* Continuation turned on where no target can be continued (every
 * resolved style none) does nothing; say so, and how to change it. */
static void warn_no_continuation(ctx *c, const air__route *r, loc at,
                                 const char *path) {
  if (!r->policy.continuation.enabled) return;
  for (size_t i = 0; i < r->n_targets; i++)
    if (r->targets[i].style != AIR_CONT_NONE) return;
  warn_at(c, at,
          "%s: continuation is on but no target can continue: every "
          "target's continuation_style is none (openai and openai_responses "
          "providers default to none; set continuation_style: vllm, "
          "prefix_flag or instruct where the upstream supports it)",
          path);
}

static void parse_routes(ctx *c, const air__opt *o, struct fy_node *v, loc at,
                         const char *path) {
  air_config *cfg = c->cfg;
  size_t n = list_count(c, v, at, path, o->max, "routes");
  if (!n) return;
  cfg->routes = calloc(n, sizeof *cfg->routes);
  if (!cfg->routes) {
    c->oom = true;
    return;
  }
  const size_t i_name = opt_index(c, AIR__SC_ROUTE, "name");
  const size_t i_rules = opt_index(c, AIR__SC_ROUTE, "rules");
  void *it = NULL;
  for (size_t i = 0; i < n && !c->oom; i++) {
    air__route *r = &cfg->routes[i];
    cfg->n_routes = i + 1;
    policy_copy(c, &r->policy, &cfg->defaults);
    struct fy_node *item = deref(c, air__yaml_seq_next(v, &it));
    loc il = air__yaml_node_loc(item, at);
    char ip[PATH_BYTES], rp[PATH_BYTES];
    seen_t sn;
    path_idx(ip, path, i);
    if (!air__yaml_is_map(item)) {
      error_at(c, il, "%s: expected a route (a map), got %s", ip,
               air__yaml_kind(item));
      continue;
    }
    apply_map(c, AIR__SC_ROUTE, item, il, r, &r->policy, ip, &sn);
    if (r->name) {
      for (size_t j = 0; j < i; j++) {
        if (cfg->routes[j].name && strcmp(cfg->routes[j].name, r->name) == 0) {
          error_at(c, air__yaml_node_loc(deref(c, sn.val[i_name]), il),
                   "%s.name: duplicate route name '%s' (also %s[%zu])", ip,
                   r->name, path, j);
          break;
        }
      }
    }
    if (sn.key[i_rules]) {
      path_key(rp, ip, "rules");
      check_rule_targets(c, r, i, deref(c, sn.val[i_rules]), rp);
    } else {
      check_rule_targets(c, r, i, c->defaults_rules, "defaults.rules");
    }
    merge_rule_overrides(c, r);
    warn_lone_hedge(c, r, il, ip);
    resolve_continuation(&r->policy);
    warn_no_continuation(c, r, il, ip);
  }
}

static void apply_value(ctx *c, const air__opt *o, struct fy_node *key,
                        struct fy_node *val, void *obj, air__policy *pol,
                        const char *path) {
  char cp[PATH_BYTES];
  path_key(cp, path, o->name);
  loc kl = air__yaml_node_loc(key, (loc){0, 0});
  struct fy_node *v = deref(c, val);
  if (c->walk.stop) return;
  loc vl = air__yaml_node_loc(v, kl);
  void *field = field_of(o, obj, pol);
  void *base = o->base == AIR__B_POLICY ? (void *)pol : obj;
  switch (o->type) {
    case AIR__T_U64:
    case AIR__T_U32:
    case AIR__T_COUNT:
    case AIR__T_DOUBLE:
    case AIR__T_BOOL:
    case AIR__T_STR:
    case AIR__T_ENUM:
      read_scalar(c, o, v, vl, cp, field);
      break;
    case AIR__T_SECTION:
      apply_map(c, o->sub, v, vl, field, NULL, cp, NULL);
      break;
    case AIR__T_DEFAULTS: {
      seen_t sn;
      apply_map(c, AIR__SC_DEFAULTS, v, vl, c->cfg, &c->cfg->defaults, cp, &sn);
      size_t i_rules = opt_index(c, AIR__SC_DEFAULTS, "rules");
      c->defaults_rules = sn.key[i_rules] ? deref(c, sn.val[i_rules]) : NULL;
      break;
    }
    case AIR__T_PROVIDERS:
      parse_providers(c, o, v, vl, cp);
      break;
    case AIR__T_ROUTES:
      parse_routes(c, o, v, vl, cp);
      break;
    case AIR__T_TARGETS:
      parse_targets(c, o, v, vl, cp, obj);
      break;
    case AIR__T_RULES:
      parse_rules(c, o, v, vl, cp, pol);
      break;
    case AIR__T_REASONS:
      parse_reasons(c, v, vl, cp, field);
      break;
    case AIR__T_STATUS:
      parse_status(c, o, v, vl, cp, obj);
      break;
    case AIR__T_PER_REASON:
      parse_per_reason(c, o, v, vl, cp, field);
      break;
    case AIR__T_PHRASES:
    case AIR__T_NAMES:
      parse_strlist(c, o, v, vl, cp, field,
                    (size_t *)(void *)((char *)base + o->noffset));
      break;
    case AIR__T_HEADERS:
      parse_headers(c, o, v, vl, cp, field,
                    (size_t *)(void *)((char *)base + o->noffset));
      break;
    case AIR__T_OVERRIDE:
      parse_override(c, v, vl, cp, field);
      break;
  }
}

/* ---- entry points -------------------------------------------------------- */

/* A libfyaml warning or error, in the config's words. */
static void yaml_problem(void *data, bool error, loc at, const char *msg) {
  if (error)
    error_at(data, at, "YAML syntax error: %s", msg);
  else
    warn_at(data, at, "YAML: %s", msg);
}

/*
 * state.redis after its keys were read: url or url_env (not both), the
 * URL resolved from the environment and checked like url, the password
 * read from password_env. What the environment holds is never quoted in a
 * message. An unset url_env or password_env is a warning, as api_key_env's
 * is: the instance then keeps its state to itself, or connects without
 * AUTH.
 */
static void resolve_redis(ctx *c, struct fy_node *root) {
  air__redis_cfg *r = &c->cfg->redis;
  struct fy_node *key = NULL;
  struct fy_node *state = map_get(c, root, "state", NULL);
  struct fy_node *node = map_get(c, state, "redis", &key);
  if (!key || air__yaml_is_null(node)) return;
  loc at = air__yaml_node_loc(node, air__yaml_node_loc(key, (loc){1, 1}));
  if (!r->url && !r->url_env) {
    error_at(c, at, "state.redis: needs url or url_env");
    return;
  }
  if (r->url && r->url_env) {
    error_at(c, at, "state.redis: give url or url_env, not both");
    return;
  }
  const char *url = r->url;
  if (r->url_env) {
    url = getenv(r->url_env);
    if (!url || !url[0]) {
      warn_at(c, at,
              "state.redis.url_env: %s is not set in the environment; state "
              "stays per process",
              r->url_env);
      return;
    }
    air__redis_url u;
    char why[MSG_BYTES / 4];
    size_t n = strlen(url);
    int bad = n > AIR__MAX_REDIS_URL_BYTES
                  ? (snprintf(why, sizeof why, "it is over %u bytes",
                              (unsigned)AIR__MAX_REDIS_URL_BYTES),
                     -1)
                  : air__redis_url_parse(url, n, &u, why, sizeof why);
    air__redis_url_wipe(&u);
    if (bad) {
      error_at(c, at, "state.redis.url_env: the URL in %s is not usable: %s",
               r->url_env, why);
      return;
    }
  }
  r->resolved_url = xstrndup(c, url, strlen(url));
  if (r->password_env) {
    const char *pw = getenv(r->password_env);
    if (pw && pw[0])
      r->password = xstrndup(c, pw, strlen(pw));
    else
      warn_at(c, at,
              "state.redis.password_env: %s is not set in the environment; "
              "connecting without a password",
              r->password_env);
  }
}

static void load_tree(ctx *c, const char *text, size_t len) {
  air__yaml_doc d;
  air__yaml_result r = air__yaml_load(&d, text, len, yaml_problem, c);
  struct fy_node *root = d.root;
  switch (r) {
    case AIR__YAML_BAD_TEXT:
      error_at(c, d.bad_at, "the config %s", d.why);
      break;
    case AIR__YAML_NOMEM:
      c->oom = true;
      break;
    case AIR__YAML_SYNTAX:
      break;
    case AIR__YAML_NOT_YAML:
      error_at(c, (loc){0, 0}, "cannot parse the config as YAML");
      break;
    case AIR__YAML_OK:
      if (root && !air__yaml_is_null(root) && !air__yaml_is_map(root)) {
        error_at(c, air__yaml_node_loc(root, (loc){1, 1}),
                 "the config must be a map of keys at the top level, got %s",
                 air__yaml_kind(root));
        break;
      }
      seen_t sn;
      apply_map(c, AIR__SC_TOP, root, (loc){1, 1}, c->cfg, NULL, "", &sn);
      /* After the routes, which copied defaults' max_gap_ms unset. */
      resolve_continuation(&c->cfg->defaults);
      if (!c->n_errors && !c->oom) resolve_redis(c, root);
      size_t i_keys = opt_index(c, AIR__SC_TOP, "client_keys_env");
      const char *env = c->cfg->client_keys_env;
      const char *val = env ? getenv(env) : NULL;
      if (env && (!val || !val[0]))
        warn_at(c, air__yaml_node_loc(deref(c, sn.val[i_keys]), (loc){1, 1}),
                "client_keys_env: %s is not set in the environment; no client "
                "key will be accepted",
                env);
      if (air__otel_resolve(&c->cfg->telemetry, air__env_getenv, NULL,
                            &c->cfg->otel, otel_diag, c) == AIR_ENOMEM)
        c->oom = true;
      break;
  }
  air__yaml_doc_cleanup(&d);
}

int air_config_parse(const char *name, const char *text, size_t len,
                     air_diag_cb cb, void *data, air_config **out) {
  if (!out || (!text && len)) return AIR_EINVAL;
  ctx c = {.file = name ? name : "<config>"};
  c.opts = air__config_opts(&c.n_opts);
  c.walk = (air__yaml_walk){
      .max_visits = MAX_NODE_VISITS, .over = over_budget, .data = &c};
  if (len > AIR__MAX_CONFIG_BYTES) {
    error_at(&c, (loc){0, 0}, "the config is %zu bytes, over the limit of %u",
             len, (unsigned)AIR__MAX_CONFIG_BYTES);
    flush_diags(&c, cb, data);
    return AIR_ETOOBIG;
  }
  c.cfg = calloc(1, sizeof *c.cfg);
  if (!c.cfg) return AIR_ENOMEM;
  c.cfg->file = xstrndup(&c, c.file, strlen(c.file));
  init_obj(&c, AIR__SC_TOP, c.cfg, NULL);
  if (!c.oom) load_tree(&c, text ? text : "", len);
  int rc = c.oom ? AIR_ENOMEM : c.n_errors ? AIR_ECONFIG : 0;
  if (!c.oom)
    flush_diags(&c, cb, data);
  else
    flush_diags(&c, NULL, NULL);
  if (rc == 0)
    *out = c.cfg;
  else
    air_config_free(c.cfg);
  return rc;
}

int air_config_load(const char *path, air_diag_cb cb, void *data,
                    air_config **out) {
  if (!path || !out) return AIR_EINVAL;
  ctx c = {.file = path};
  FILE *f = fopen(path, "rb");
  if (!f) {
    char why[128];
    if (strerror_r(errno, why, sizeof why) != 0)
      snprintf(why, sizeof why, "error %d", errno);
    error_at(&c, (loc){0, 0}, "cannot open: %s", why);
    flush_diags(&c, cb, data);
    return AIR_EIO;
  }
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  int rc = buf ? 0 : AIR_ENOMEM;
  while (rc == 0) {
    if (len == cap) {
      if (cap > AIR__MAX_CONFIG_BYTES) {
        rc = AIR_ETOOBIG;
        break;
      }
      char *nb = realloc(buf, cap * 2);
      if (!nb) {
        rc = AIR_ENOMEM;
        break;
      }
      buf = nb;
      cap *= 2;
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) {
      if (ferror(f)) {
        error_at(&c, (loc){0, 0}, "cannot read the file");
        rc = AIR_EIO;
      }
      break;
    }
  }
  fclose(f);
  if (rc == AIR_ETOOBIG)
    error_at(&c, (loc){0, 0}, "the config is over the limit of %u bytes",
             (unsigned)AIR__MAX_CONFIG_BYTES);
  if (rc != 0) {
    flush_diags(&c, cb, data);
    free(buf);
    return rc;
  }
  rc = air_config_parse(path, buf, len, cb, data, out);
  free(buf);
  return rc;
}

const char *air_config_listen(const air_config *cfg) {
  return cfg && cfg->listen ? cfg->listen : DEFAULT_LISTEN;
}
