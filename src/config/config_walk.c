/*
 * The walk of a config document against the option table (config_table.h,
 * docs/style.md §8): each map's keys looked up in the table for the map's
 * scope, read in phase order, required keys checked, an unknown key
 * answered with "did you mean" (or where it belongs, or what the map
 * takes); the table's defaults filled in first. Each value goes to the
 * reader of its type (config_value.c for values, config.c for the lists
 * that make the config). Every problem is collected with its FILE:LINE:COL
 * and handed to the caller's callback sorted by position; the walk never
 * stops at the first error.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"

#define MAX_DIAGS 1000            /* diagnostics kept; the rest counted */
#define MAX_NODE_VISITS 1000000ul /* bounds alias expansion */

/* ---- diagnostics --------------------------------------------------------- */

typedef air__yaml_loc loc;

static void vreport(air__cfg_ctx *c, air_severity sev, loc at, const char *fmt,
                    va_list ap) __attribute__((format(printf, 4, 0)));

static void vreport(air__cfg_ctx *c, air_severity sev, loc at, const char *fmt,
                    va_list ap) {
  char buf[AIR__CFG_MSG_BYTES];
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
    air__cfg_diag *d = realloc(c->diags, cap * sizeof *d);
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
      (air__cfg_diag){.sev = sev, .at = at, .seq = c->n_diags, .msg = m};
  c->n_diags++;
}

void air__cfg_error(air__cfg_ctx *c, loc at, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(c, AIR_DIAG_ERROR, at, fmt, ap);
  va_end(ap);
}

void air__cfg_warn(air__cfg_ctx *c, loc at, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(c, AIR_DIAG_WARNING, at, fmt, ap);
  va_end(ap);
}

static int diag_cmp(const void *a, const void *b) {
  const air__cfg_diag *x = a, *y = b;
  if (x->at.line != y->at.line) return x->at.line < y->at.line ? -1 : 1;
  if (x->at.col != y->at.col) return x->at.col < y->at.col ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Hands every collected diagnostic to cb, sorted by position, then frees. */
void air__cfg_flush(air__cfg_ctx *c, air_diag_cb cb, void *data) {
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

char *air__cfg_strndup(air__cfg_ctx *c, const char *s, size_t n) {
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
const char *air__cfg_shown(char *out, size_t sz, const char *s, size_t n) {
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

bool air__cfg_eq(const char *s, size_t n, const char *lit) {
  return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

bool air__cfg_ieq(const char *s, size_t n, const char *lit) {
  if (strlen(lit) != n) return false;
  for (size_t i = 0; i < n; i++)
    if (tolower((unsigned char)s[i]) != tolower((unsigned char)lit[i]))
      return false;
  return true;
}

/* Formats a config path into out[AIR__CFG_PATH_BYTES]; a long one ends in
 * "...". */
void air__cfg_path_fmt(char *out, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(out, AIR__CFG_PATH_BYTES, fmt, ap);
  va_end(ap);
  if (n >= AIR__CFG_PATH_BYTES) memcpy(out + AIR__CFG_PATH_BYTES - 4, "...", 4);
}

void air__cfg_path_key(char *out, const char *path, const char *key) {
  if (path[0])
    air__cfg_path_fmt(out, "%s.%s", path, key);
  else
    air__cfg_path_fmt(out, "%s", key);
}

void air__cfg_path_idx(char *out, const char *path, size_t i) {
  air__cfg_path_fmt(out, "%s[%zu]", path, i);
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
bool air__cfg_close_to(const char *s, size_t n, const char *cand,
                       size_t *best) {
  size_t d = edit_distance(s, n, cand, strlen(cand));
  if (d == 0 || d > 2 || d >= strlen(cand) || d >= *best) return false;
  *best = d;
  return true;
}

/* ---- YAML node helpers --------------------------------------------------- */

/* The walker's budget was crossed: one error, and the walk stops. */
static void over_budget(void *data, unsigned long max) {
  air__cfg_error(data, (loc){0, 0},
                 "config expands to more than %lu nodes (alias expansion?)",
                 max);
}

void air__cfg_begin(air__cfg_ctx *c, const char *file) {
  memset(c, 0, sizeof *c);
  c->file = file;
  c->opts = air__config_opts(&c->n_opts);
  c->walk = (air__yaml_walk){
      .max_visits = MAX_NODE_VISITS, .over = over_budget, .data = c};
}

/* Follows an alias; counts visits so alias bombs end in an error. */
struct fy_node *air__cfg_deref(air__cfg_ctx *c, struct fy_node *n) {
  return air__yaml_deref(&c->walk, n);
}

/*
 * The value of key in mapping n (aliases followed), or NULL; *keyp (when not
 * NULL) receives the key node.
 */
struct fy_node *air__cfg_map_get(air__cfg_ctx *c, struct fy_node *n,
                                 const char *key, struct fy_node **keyp) {
  void *it = NULL;
  struct fy_node *k, *v;
  if (!air__yaml_is_map(n)) return NULL;
  while (air__yaml_map_next(&c->walk, n, &it, &k, &v)) {
    size_t kn = 0;
    const char *ks = air__yaml_is_scalar(k) ? air__yaml_scalar(k, &kn) : NULL;
    if (ks && air__cfg_eq(ks, kn, key)) {
      if (keyp) *keyp = k;
      return air__cfg_deref(c, v);
    }
  }
  return NULL;
}

/* ---- the option table ---------------------------------------------------- */

const air__opt *air__cfg_find_opt(const air__cfg_ctx *c, unsigned scope,
                                  const char *name, size_t n, size_t *idx) {
  for (size_t i = 0; i < c->n_opts; i++) {
    if ((c->opts[i].scopes & scope) && air__cfg_eq(name, n, c->opts[i].name)) {
      if (idx) *idx = i;
      return &c->opts[i];
    }
  }
  return NULL;
}

size_t air__cfg_opt_index(const air__cfg_ctx *c, unsigned scope,
                          const char *name) {
  size_t i = 0;
  air__cfg_find_opt(c, scope, name, strlen(name), &i);
  return i;
}

void *air__cfg_field(const air__opt *o, void *obj, air__policy *pol) {
  void *base = o->base == AIR__B_POLICY ? (void *)pol : obj;
  return base ? (char *)base + o->offset : NULL;
}

/* ---- walking maps -------------------------------------------------------- */

/* Options stored as one value (air__cfg_read_scalar). */
static bool is_scalar(air__opt_type t) {
  switch (t) {
    case AIR__T_U64:
    case AIR__T_U32:
    case AIR__T_COUNT:
    case AIR__T_DOUBLE:
    case AIR__T_BOOL:
    case AIR__T_STR:
    case AIR__T_ENUM:
      return true;
    default:
      return false;
  }
}

static void apply_value(air__cfg_ctx *c, const air__opt *o, struct fy_node *key,
                        struct fy_node *val, void *obj, air__policy *pol,
                        const char *path);

static void unknown_key(air__cfg_ctx *c, unsigned scope, loc at, const char *k,
                        size_t kn, const char *path) {
  char v[64], msg[AIR__CFG_MSG_BYTES / 2], in[AIR__CFG_PATH_BYTES + 8];
  size_t best = SIZE_MAX, off = 0;
  const char *guess = NULL;
  air__cfg_shown(v, sizeof v, k, kn);
  in_where(in, sizeof in, path);
  if (air__cfg_eq(k, kn, "<<")) {
    air__cfg_error(c, at, "%s: merge keys (<<) are not supported", where(path));
    return;
  }
  for (size_t i = 0; i < c->n_opts; i++)
    if ((c->opts[i].scopes & scope) &&
        air__cfg_close_to(k, kn, c->opts[i].name, &best))
      guess = c->opts[i].name;
  if (guess) {
    air__cfg_error(c, at, "unknown key %s %s (did you mean '%s'?)", v, in,
                   guess);
    return;
  }
  /* A key of another map: say where it belongs. */
  for (size_t i = 0; i < c->n_opts && off < sizeof msg; i++) {
    if (!air__cfg_eq(k, kn, c->opts[i].name)) continue;
    for (unsigned b = 1; b && off < sizeof msg; b <<= 1)
      if (c->opts[i].scopes & b)
        off += (size_t)snprintf(msg + off, sizeof msg - off, "%s%s",
                                off ? ", " : "", air__config_scope_path(b));
  }
  if (off) {
    air__cfg_error(c, at, "unknown key %s %s (it belongs in: %s)", v, in, msg);
    return;
  }
  for (size_t i = 0; i < c->n_opts && off < sizeof msg; i++)
    if (c->opts[i].scopes & scope)
      off += (size_t)snprintf(msg + off, sizeof msg - off, "%s%s",
                              off ? ", " : "", c->opts[i].name);
  air__cfg_error(c, at, "unknown key %s %s (expected one of: %s)", v, in, msg);
}

/*
 * Applies the keys of map (a mapping, or null meaning empty) to obj/pol per
 * the options of scope, in phase order. `at` locates the map for "missing
 * key" errors. seen (optional) receives the key and value nodes by index.
 */
void air__cfg_apply_map(air__cfg_ctx *c, unsigned scope, struct fy_node *map,
                        loc at, void *obj, air__policy *pol, const char *path,
                        air__cfg_seen *seen) {
  air__cfg_seen local;
  if (!seen) seen = &local;
  memset(seen, 0, sizeof *seen);
  if (c->walk.stop) return;
  if (!air__yaml_is_null(map) && !air__yaml_is_map(map)) {
    air__cfg_error(c, air__yaml_node_loc(map, at), "%s: expected a map, got %s",
                   where(path), air__yaml_kind(map));
    return;
  }
  if (!air__yaml_is_null(map)) {
    void *it = NULL;
    struct fy_node *k, *v;
    while (air__yaml_map_next(&c->walk, map, &it, &k, &v) && !c->walk.stop) {
      loc kl = air__yaml_node_loc(k, at);
      if (!air__yaml_is_scalar(k)) {
        air__cfg_error(c, kl, "%s: keys must be strings, got %s", where(path),
                       air__yaml_kind(k));
        continue;
      }
      size_t kn, idx;
      const char *ks = air__yaml_scalar(k, &kn);
      if (scope == AIR__SC_TOP && kn > 2 && memcmp(ks, "x-", 2) == 0)
        continue; /* extension keys: a place for YAML anchors */
      if (!air__cfg_find_opt(c, scope, ks, kn, &idx)) {
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
      air__cfg_error(c, at, "%s: missing required key '%s'", where(path),
                     c->opts[i].name);
  if (scope == AIR__SC_HEDGE &&
      !seen->key[air__cfg_opt_index(c, scope, "enabled")])
    ((air__hedge_cfg *)obj)->enabled = true; /* the map given turns it on */
  if (scope == AIR__SC_CONTINUATION &&
      !seen->key[air__cfg_opt_index(c, scope, "enabled")])
    ((air__continuation *)obj)->enabled = true; /* likewise */
  if (scope == AIR__SC_STICKY) {
    air__sticky_cfg *st = obj;
    size_t en = air__cfg_opt_index(c, scope, "enabled");
    if (!seen->key[en] &&
        (seen->key[air__cfg_opt_index(c, scope, "after_ms")] ||
         seen->key[air__cfg_opt_index(c, scope, "requests")]))
      st->enabled = true;
    if (st->enabled && st->after_ms == 0 && st->requests == 0)
      air__cfg_error(c, at,
                     "%s: sticky needs after_ms or requests above 0 "
                     "(enabled: false turns it off)",
                     where(path));
  }
}

/* ---- initialisation from the table's defaults ---------------------------- */

static void load_builtin_rules(air__cfg_ctx *c, const air__opt *o,
                               air__policy *pol) {
  const char *text = air__config_builtin_rules();
  air__yaml_doc d;
  air__yaml_result r = air__yaml_load(&d, text, strlen(text), NULL, NULL);
  bool was = c->in_builtin;
  c->in_builtin = true;
  if (r != AIR__YAML_OK || !d.root)
    air__cfg_error(c, (loc){0, 0}, "cannot parse the built-in rules");
  else
    air__cfg_read_rules(c, o, d.root, (loc){0, 0}, "rules", NULL, pol);
  c->in_builtin = was;
  air__yaml_doc_cleanup(&d);
}

/* Fills obj/pol with the defaults of every option of scope (recursively). */
void air__cfg_init_obj(air__cfg_ctx *c, unsigned scope, void *obj,
                       air__policy *pol) {
  char why[AIR__CFG_MSG_BYTES / 2];
  for (size_t i = 0; i < c->n_opts; i++) {
    const air__opt *o = &c->opts[i];
    if (!(o->scopes & scope)) continue;
    void *field = air__cfg_field(o, obj, pol);
    if (!field) continue;
    switch (o->type) {
      case AIR__T_SECTION:
        air__cfg_init_obj(c, o->sub, field, NULL);
        break;
      case AIR__T_DEFAULTS:
        air__cfg_init_obj(c, AIR__SC_DEFAULTS, c->cfg, &c->cfg->defaults);
        break;
      case AIR__T_RULES:
        load_builtin_rules(c, o, pol);
        break;
      case AIR__T_PER_REASON:
        for (int r = 0; r < AIR_REASON__COUNT; r++)
          ((uint32_t *)field)[r] = AIR__UNLIMITED;
        break;
      default:
        if (is_scalar(o->type) && o->def &&
            air__cfg_convert(c, o, o->def, strlen(o->def), field, why,
                             sizeof why))
          air__cfg_error(c, (loc){0, 0}, "internal: default of %s: %s", o->name,
                         why);
        break;
    }
  }
}

/* What a type's values are read by, when not by air__cfg_read_scalar or
 * as a map (SECTION, DEFAULTS). */
static air__cfg_read_fn *const readers[] = {
    [AIR__T_PROVIDERS] = air__cfg_read_providers,
    [AIR__T_ROUTES] = air__cfg_read_routes,
    [AIR__T_TARGETS] = air__cfg_read_targets,
    [AIR__T_RULES] = air__cfg_read_rules,
    [AIR__T_REASONS] = air__cfg_read_reasons,
    [AIR__T_STATUS] = air__cfg_read_status,
    [AIR__T_PER_REASON] = air__cfg_read_per_reason,
    [AIR__T_PHRASES] = air__cfg_read_strlist,
    [AIR__T_NAMES] = air__cfg_read_strlist,
    [AIR__T_HEADERS] = air__cfg_read_headers,
    [AIR__T_OVERRIDE] = air__cfg_read_override,
};

static void apply_value(air__cfg_ctx *c, const air__opt *o, struct fy_node *key,
                        struct fy_node *val, void *obj, air__policy *pol,
                        const char *path) {
  char cp[AIR__CFG_PATH_BYTES];
  air__cfg_path_key(cp, path, o->name);
  loc kl = air__yaml_node_loc(key, (loc){0, 0});
  struct fy_node *v = air__cfg_deref(c, val);
  if (c->walk.stop) return;
  loc vl = air__yaml_node_loc(v, kl);
  void *field = air__cfg_field(o, obj, pol);
  if (is_scalar(o->type)) {
    air__cfg_read_scalar(c, o, v, vl, cp, field);
  } else if (o->type == AIR__T_SECTION) {
    air__cfg_apply_map(c, o->sub, v, vl, field, NULL, cp, NULL);
  } else if (o->type == AIR__T_DEFAULTS) {
    air__cfg_seen sn;
    air__cfg_apply_map(c, AIR__SC_DEFAULTS, v, vl, c->cfg, &c->cfg->defaults,
                       cp, &sn);
    size_t i_rules = air__cfg_opt_index(c, AIR__SC_DEFAULTS, "rules");
    c->defaults_rules =
        sn.key[i_rules] ? air__cfg_deref(c, sn.val[i_rules]) : NULL;
  } else if ((size_t)o->type < sizeof readers / sizeof readers[0] &&
             readers[o->type] != NULL) {
    readers[o->type](c, o, v, vl, cp, obj, pol);
  }
}
