#include <string.h>

#include <libfyaml.h>

#include "buf.h"
#include "yaml.h"

/* ---- loading ---------------------------------------------------------------
 */

static void discard_output(struct fy_diag *diag, void *user, const char *buf,
                           size_t len) {
  (void)diag;
  (void)user;
  (void)buf;
  (void)len;
}

/* A fy_diag that prints nothing and collects errors, or NULL (no memory). */
static struct fy_diag *quiet_diag(void) {
  struct fy_diag_cfg dc;
  fy_diag_cfg_default(&dc);
  dc.fp = NULL;
  dc.output_fn = discard_output;
  dc.colorize = false;
  struct fy_diag *d = fy_diag_create(&dc);
  if (d != NULL) fy_diag_set_collect_errors(d, true);
  return d;
}

/* True when s holds nothing but blanks, comments and document markers
 * (libfyaml builds no document for such a text). */
static bool blank(const char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    size_t e = i;
    while (e < n && s[e] != '\n') e++;
    size_t j = i;
    while (j < e && (s[j] == ' ' || s[j] == '\t' || s[j] == '\r')) j++;
    bool marker = e - j >= 3 && (memcmp(s + j, "---", 3) == 0 ||
                                 memcmp(s + j, "...", 3) == 0);
    if (j < e && s[j] != '#' && !marker) return false;
    i = e + 1;
  }
  return true;
}

/* NULL when s may go to libfyaml, else why, with *off the offending byte. */
static const char *check_text(const char *s, size_t n, size_t *off) {
  const char *nul = n ? memchr(s, '\0', n) : NULL;
  if (nul != NULL) {
    *off = (size_t)(nul - s);
    return "contains a NUL byte";
  }
  for (size_t i = 0; i < n;) {
    size_t k = air__utf8_seq((const unsigned char *)s + i, n - i);
    if (k == 0) {
      *off = i;
      return "is not valid UTF-8";
    }
    i += k;
  }
  return NULL;
}

air__yaml_loc air__yaml_offset_loc(const char *text, size_t off) {
  air__yaml_loc l = {1, 1};
  for (size_t i = 0; i < off; i++) {
    if (text[i] == '\n') {
      l.line++;
      l.col = 1;
    } else {
      l.col++;
    }
  }
  return l;
}

air__yaml_result air__yaml_load(air__yaml_doc *d, const char *text, size_t n,
                                air__yaml_problem_cb cb, void *data) {
  memset(d, 0, sizeof(*d));
  size_t bad = 0;
  d->why = check_text(text, n, &bad);
  if (d->why != NULL) {
    d->bad_at = air__yaml_offset_loc(text, bad);
    return AIR__YAML_BAD_TEXT;
  }
  if (n == 0) return AIR__YAML_OK;
  struct fy_diag *diag = quiet_diag();
  if (diag == NULL) return AIR__YAML_NOMEM;
  struct fy_parse_cfg pc = {.flags = FYPCF_QUIET, .diag = diag};
  d->doc = fy_document_build_from_string(&pc, text, n);
  void *it = NULL;
  struct fy_diag_error *e;
  while ((e = fy_diag_errors_iterate(diag, &it)) != NULL) {
    if (e->type < FYET_WARNING) continue;
    bool error = e->type >= FYET_ERROR;
    if (error) d->n_errors++;
    air__yaml_loc at = {e->line > 0 ? e->line : 0,
                        e->column > 0 ? e->column : 0};
    if (cb != NULL) cb(data, error, at, e->msg);
  }
  fy_diag_destroy(diag);
  if (d->n_errors > 0) return AIR__YAML_SYNTAX;
  if (d->doc == NULL) return blank(text, n) ? AIR__YAML_OK : AIR__YAML_NOT_YAML;
  d->root = fy_document_root(d->doc);
  return AIR__YAML_OK;
}

void air__yaml_doc_cleanup(air__yaml_doc *d) {
  fy_document_destroy(d->doc);
  d->doc = NULL;
  d->root = NULL;
}

/* ---- walking ----------------------------------------------------------------
 */

struct fy_node *air__yaml_deref(air__yaml_walk *w, struct fy_node *n) {
  if (n == NULL || w->stop) return NULL;
  if (++w->visits > w->max_visits) {
    w->stop = true;
    if (w->over != NULL) w->over(w->data, w->max_visits);
    return NULL;
  }
  return fy_node_is_alias(n) ? fy_node_resolve_alias(n) : n;
}

bool air__yaml_map_next(air__yaml_walk *w, struct fy_node *map, void **it,
                        struct fy_node **key, struct fy_node **val) {
  struct fy_node_pair *p = fy_node_mapping_iterate(map, it);
  if (p == NULL) return false;
  *key = air__yaml_deref(w, fy_node_pair_key(p));
  *val = fy_node_pair_value(p);
  return true;
}

struct fy_node *air__yaml_seq_next(struct fy_node *seq, void **it) {
  return fy_node_sequence_iterate(seq, it);
}

size_t air__yaml_count(struct fy_node *n) {
  if (air__yaml_is_map(n)) return (size_t)fy_node_mapping_item_count(n);
  if (air__yaml_is_seq(n)) return (size_t)fy_node_sequence_item_count(n);
  return 0;
}

air__yaml_loc air__yaml_node_loc(struct fy_node *n, air__yaml_loc fb) {
  for (int depth = 0; n != NULL && depth < 64; depth++) {
    switch (fy_node_get_type(n)) {
      case FYNT_SCALAR: {
        struct fy_token *t = fy_node_get_scalar_token(n);
        const struct fy_mark *m = t ? fy_token_start_mark(t) : NULL;
        if (m == NULL) return fb;
        /* libfyaml marks a quoted scalar after its opening quote. */
        enum fy_node_style st = fy_node_get_style(n);
        int quoted = (st == FYNS_SINGLE_QUOTED || st == FYNS_DOUBLE_QUOTED) &&
                     m->column > 0;
        return (air__yaml_loc){m->line + 1, m->column + 1 - quoted};
      }
      case FYNT_MAPPING: {
        void *it = NULL;
        struct fy_node_pair *p = fy_node_mapping_iterate(n, &it);
        n = p ? fy_node_pair_key(p) : NULL;
        break;
      }
      case FYNT_SEQUENCE: {
        void *it = NULL;
        n = fy_node_sequence_iterate(n, &it);
        break;
      }
      default:
        return fb;
    }
  }
  return fb;
}

/* ---- kinds and scalars
 * -------------------------------------------------------
 */

static bool eqn(const char *s, size_t n, const char *lit) {
  return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

bool air__yaml_is_null(struct fy_node *n) {
  if (n == NULL) return true;
  if (fy_node_get_type(n) != FYNT_SCALAR || fy_node_get_style(n) != FYNS_PLAIN)
    return false;
  size_t len = 0;
  const char *s = fy_node_get_scalar(n, &len);
  return s == NULL || len == 0 || eqn(s, len, "~") || eqn(s, len, "null") ||
         eqn(s, len, "Null") || eqn(s, len, "NULL");
}

bool air__yaml_is_map(struct fy_node *n) {
  return n != NULL && fy_node_get_type(n) == FYNT_MAPPING;
}

bool air__yaml_is_seq(struct fy_node *n) {
  return n != NULL && fy_node_get_type(n) == FYNT_SEQUENCE;
}

bool air__yaml_is_scalar(struct fy_node *n) {
  return n != NULL && !air__yaml_is_null(n) &&
         fy_node_get_type(n) == FYNT_SCALAR;
}

bool air__yaml_is_plain(struct fy_node *n) {
  return n != NULL && fy_node_get_type(n) == FYNT_SCALAR &&
         fy_node_get_style(n) == FYNS_PLAIN;
}

const char *air__yaml_kind(struct fy_node *n) {
  if (air__yaml_is_null(n)) return "null";
  switch (fy_node_get_type(n)) {
    case FYNT_MAPPING:
      return "a map";
    case FYNT_SEQUENCE:
      return "a list";
    default:
      return "a scalar";
  }
}

const char *air__yaml_scalar(struct fy_node *n, size_t *len) {
  const char *s = n != NULL ? fy_node_get_scalar(n, len) : NULL;
  if (s == NULL) {
    *len = 0;
    return "";
  }
  return s;
}

bool air__yaml_bool(struct fy_node *n, bool *ok) {
  size_t len;
  const char *s = air__yaml_scalar(n, &len);
  *ok = air__yaml_is_plain(n);
  if (*ok &&
      (eqn(s, len, "true") || eqn(s, len, "True") || eqn(s, len, "TRUE")))
    return true;
  if (*ok &&
      (eqn(s, len, "false") || eqn(s, len, "False") || eqn(s, len, "FALSE")))
    return false;
  *ok = false;
  return false;
}

bool air__yaml_u64(const char *s, size_t n, uint64_t max, uint64_t *out) {
  if (n == 0 || n > 20) return false;
  uint64_t x = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    uint64_t d = (uint64_t)(s[i] - '0');
    if (x > (UINT64_MAX - d) / 10) return false;
    x = x * 10 + d;
  }
  if (x > max) return false;
  *out = x;
  return true;
}
