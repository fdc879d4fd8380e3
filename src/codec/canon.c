/*
 * The canonical request's memory: one arena, arrays that double in it, and
 * the named bounds of limits.h (canon.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "canon.h"
#include "limits.h"
#include "dialect.h"

void air__canon_init(air__canon *c, air_dialect origin) {
  memset(c, 0, sizeof(*c));
  c->origin = origin;
  c->parallel_tools = -1;
  c->format_strict = -1;
  air__arena_init(&c->arena);
}

void air__canon_cleanup(air__canon *c) {
  air__arena_cleanup(&c->arena);
  memset(c, 0, sizeof(*c));
}

air__str air__canon_str(air__canon *c, const char *p, size_t n) {
  air__str s = {air__arena_strndup(&c->arena, p, n), p != NULL ? n : 0};
  return s;
}

const char *air__canon_fmt(air__canon *c, const char *fmt, ...) {
  char tmp[AIR__MAX_CANON_FIELD_BYTES];
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(tmp, sizeof(tmp), fmt, ap);
  va_end(ap);
  if (k < 0) return NULL;
  size_t n = (size_t)k < sizeof(tmp) ? (size_t)k : sizeof(tmp) - 1;
  return air__arena_strndup(&c->arena, tmp, n);
}

void *air__canon_zalloc(air__canon *c, size_t count, size_t size) {
  if (size != 0 && count > SIZE_MAX / size) return NULL;
  void *p = air__arena_alloc(&c->arena, count * size);
  if (p != NULL) memset(p, 0, count * size);
  return p;
}

/* Makes room for one more element in an arena array of n (capacity *cap)
 * elements of size bytes; the old block stays in the arena (freed with
 * it). 0, AIR_ENOMEM, or AIR_ETOOBIG past max. */
static int grow(air__canon *c, void **arr, size_t n, size_t *cap, size_t size,
                size_t max) {
  if (n >= max) return AIR_ETOOBIG;
  if (n < *cap) return 0;
  size_t nc = *cap != 0 ? *cap * 2 : 4;
  if (nc > max) nc = max;
  void *p = air__canon_zalloc(c, nc, size);
  if (p == NULL) return AIR_ENOMEM;
  if (n > 0) memcpy(p, *arr, n * size);
  *arr = p;
  *cap = nc;
  return 0;
}

air__cmsg *air__canon_add_msg(air__canon *c, air__crole role, int *rc) {
  void *arr = c->msgs;
  *rc = grow(c, &arr, c->n_msgs, &c->cap_msgs, sizeof(air__cmsg),
             AIR__MAX_CANON_MSGS);
  if (*rc != 0) return NULL;
  c->msgs = arr;
  air__cmsg *m = &c->msgs[c->n_msgs++];
  memset(m, 0, sizeof(*m));
  m->role = role;
  return m;
}

air__cpart *air__canon_add_part(air__canon *c, air__cpart **parts, size_t *n,
                                size_t *cap, air__cpart_kind kind, int *rc) {
  void *arr = *parts;
  *rc = grow(c, &arr, *n, cap, sizeof(air__cpart), AIR__MAX_CANON_PARTS);
  if (*rc != 0) return NULL;
  *parts = arr;
  air__cpart *p = &(*parts)[(*n)++];
  memset(p, 0, sizeof(*p));
  p->kind = kind;
  p->origin = c->origin;
  p->seq = c->next_seq++;
  return p;
}

int air__canon_add_extra(air__canon *c, const char *field, const char *key,
                         air__str raw) {
  void *arr = c->extras;
  int rc = grow(c, &arr, c->n_extras, &c->cap_extras, sizeof(air__cextra),
                AIR__MAX_CANON_EXTRAS);
  if (rc != 0) return rc;
  c->extras = arr;
  air__cextra *e = &c->extras[c->n_extras++];
  e->field = field;
  e->key = key;
  e->raw = raw;
  e->origin = c->origin;
  e->seq = c->next_seq++;
  return field != NULL ? 0 : AIR_ENOMEM;
}

int air__canon_add_tool(air__canon *c, air__ctool **out) {
  void *arr = c->tools;
  int rc = grow(c, &arr, c->n_tools, &c->cap_tools, sizeof(air__ctool),
                AIR__MAX_CANON_TOOLS);
  if (rc != 0) return rc;
  c->tools = arr;
  *out = &c->tools[c->n_tools++];
  memset(*out, 0, sizeof(**out));
  return 0;
}

int air__canon_add_stop(air__canon *c, const char *p, size_t n) {
  void *arr = c->stop;
  int rc = grow(c, &arr, c->n_stop, &c->cap_stop, sizeof(air__str),
                AIR__MAX_CANON_STOP);
  if (rc != 0) return rc;
  c->stop = arr;
  air__str s = air__canon_str(c, p, n);
  if (s.p == NULL) return AIR_ENOMEM;
  c->stop[c->n_stop++] = s;
  return 0;
}

const air__cextra *air__canon_first_extra(const air__canon *c,
                                          air_dialect api) {
  for (size_t i = 0; i < c->n_extras; i++)
    if (c->extras[i].origin != api) return &c->extras[i];
  return NULL;
}

int air__canon_unsupported(air_error *err, const char *field,
                           const char *api_name) {
  if (err != NULL) {
    err->code = AIR_ENOTSUP;
    snprintf(err->message, sizeof(err->message),
             "%s" AIR__NOT_SUPPORTED "%s upstreams", field, api_name);
  }
  return AIR_ENOTSUP;
}

int air__canon_text_results(const air__canon *c, air_dialect api,
                            const char *api_name, air_error *err) {
  const air__cextra *x = air__canon_first_extra(c, api);
  const air__cpart *bad = NULL;
  for (size_t i = 0; i < c->n_msgs && bad == NULL; i++) {
    const air__cmsg *m = &c->msgs[i];
    for (size_t j = 0; j < m->n_parts && bad == NULL; j++) {
      const air__cpart *p = &m->parts[j];
      if (p->kind != AIR__CP_TOOL_RESULT) continue;
      for (size_t k = 0; k < p->n_parts && bad == NULL; k++)
        if (p->parts[k].kind == AIR__CP_IMAGE) bad = &p->parts[k];
    }
  }
  if (bad != NULL && (x == NULL || bad->seq < x->seq)) {
    char f[AIR__MAX_CANON_FIELD_BYTES + 64];
    snprintf(f, sizeof(f), "%s (type %.*s)", bad->field ? bad->field : "",
             (int)bad->type.n, bad->type.p ? bad->type.p : "");
    return air__canon_unsupported(err, f, api_name);
  }
  return x != NULL ? air__canon_unsupported(err, x->field, api_name) : 0;
}

air__ceffort air__canon_effort(const air__canon *c) {
  if (c->effort != AIR__EFFORT_UNSET || c->thinking_budget <= 0)
    return c->effort;
  return c->thinking_budget < 4096    ? AIR__EFFORT_LOW
         : c->thinking_budget < 16384 ? AIR__EFFORT_MEDIUM
                                      : AIR__EFFORT_HIGH;
}

const char *air__canon_effort_name(air__ceffort e) {
  static const char *const names[] = {NULL,     "none", "minimal", "low",
                                      "medium", "high", "high"};
  return (size_t)e < sizeof(names) / sizeof(names[0]) ? names[e] : NULL;
}
