/*
 * The mock's behaviour model (docs/mock.md "Choosing a behaviour"): the
 * script (YAML, first problem reported with line:column), the layering of
 * behaviours per attempt and the log's fault string. Pure: no I/O, no
 * clock. The model-name convention, the other way to choose a behaviour,
 * is convention.c.
 *
 * One table of keys drives the script parser, the merge and the fault
 * description, so a key is added in one place.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mock_int.h"
#include "yaml.h"

/* Alias expansion is followed at most this many nodes (alias bombs). */
#define MAX_NODE_VISITS 200000ul

/* ---- the key table ----------------------------------------------------------
 */

typedef enum ktype {
  KT_STATUS,  /* int 400..599 */
  KT_STR,     /* text */
  KT_NUMSTR,  /* non-negative decimal, kept as written */
  KT_HEADERS, /* {name: value} */
  KT_BOOL,
  KT_MS,      /* uint64 0..AIR__MOCK_MAX_MS */
  KT_COUNT,   /* uint32 0..AIR__MOCK_MAX_COUNT */
  KT_COUNT1,  /* uint32 1..AIR__MOCK_MAX_COUNT */
  KT_TOKENS,  /* uint32 0..AIR__MOCK_MAX_TOKENS */
  KT_REFUSAL, /* true/false or text */
  KT_FINISH,  /* stop | length | content_filter */
  KT_TOOLS,   /* uint32 0..AIR__MOCK_MAX_TOOL_CALLS */
  KT_CONT,    /* exact | restart | repeat | preamble | diverge */
  KT_REPEAT,  /* uint32 0..AIR__MOCK_MAX_REPEAT_CHARS */
} ktype;

/* Where a key may appear: in any behaviour, or in model entries only. */
enum { SC_BEH = 1, SC_MODEL = 2 };

typedef struct key_desc {
  const char *name;
  uint32_t bit;
  ktype type;
  size_t off;     /* offset of the field in air__mock_beh */
  unsigned scope; /* SC_* where the key is allowed */
  bool fault;     /* named in the log's fault string */
} key_desc;

#define OFF(f) offsetof(air__mock_beh, f)

/* In docs/mock.md's order, which is also the fault string's order. */
static const key_desc keys[] = {
    {"status", AIR__MOCK_K_STATUS, KT_STATUS, OFF(status), SC_BEH, true},
    {"body", AIR__MOCK_K_BODY, KT_STR, OFF(body), SC_BEH, false},
    {"code", AIR__MOCK_K_CODE, KT_STR, OFF(code), SC_BEH, false},
    {"retry_after", AIR__MOCK_K_RETRY_AFTER, KT_NUMSTR, OFF(retry_after),
     SC_BEH, false},
    {"retry_after_ms", AIR__MOCK_K_RETRY_AFTER_MS, KT_NUMSTR,
     OFF(retry_after_ms), SC_BEH, false},
    {"headers", AIR__MOCK_K_HEADERS, KT_HEADERS, OFF(headers), SC_BEH, false},
    {"reset", AIR__MOCK_K_RESET, KT_BOOL, OFF(reset), SC_BEH, true},
    {"hang", AIR__MOCK_K_HANG, KT_BOOL, OFF(hang), SC_BEH, true},
    {"headers_delay_ms", AIR__MOCK_K_HEADERS_DELAY, KT_MS,
     OFF(headers_delay_ms), SC_BEH, true},
    {"first_delay_ms", AIR__MOCK_K_FIRST_DELAY, KT_MS, OFF(first_delay_ms),
     SC_BEH, true},
    {"cut_after", AIR__MOCK_K_CUT, KT_COUNT, OFF(cut_after), SC_BEH, true},
    {"stall_after", AIR__MOCK_K_STALL, KT_COUNT, OFF(stall_after), SC_BEH,
     true},
    {"malformed_at", AIR__MOCK_K_MALFORMED, KT_COUNT1, OFF(malformed_at),
     SC_BEH, true},
    {"no_done", AIR__MOCK_K_NO_DONE, KT_BOOL, OFF(no_done), SC_BEH, true},
    {"refusal", AIR__MOCK_K_REFUSAL, KT_REFUSAL, OFF(refusal), SC_BEH, true},
    {"finish", AIR__MOCK_K_FINISH, KT_FINISH, OFF(finish), SC_BEH, true},
    {"overload_after", AIR__MOCK_K_OVERLOAD, KT_COUNT, OFF(overload_after),
     SC_BEH, true},
    {"tool_calls", AIR__MOCK_K_TOOL_CALLS, KT_TOOLS, OFF(tool_calls), SC_BEH,
     true},
    {"json", AIR__MOCK_K_JSON, KT_BOOL, OFF(json), SC_BEH, true},
    {"tool_text", AIR__MOCK_K_TOOL_TEXT, KT_BOOL, OFF(tool_text), SC_BEH, true},
    {"reasoning", AIR__MOCK_K_REASONING, KT_TOKENS, OFF(reasoning), SC_BEH,
     true},
    {"tokens", AIR__MOCK_K_TOKENS, KT_TOKENS, OFF(tokens), SC_BEH, false},
    {"delay_ms", AIR__MOCK_K_DELAY, KT_MS, OFF(delay_ms), SC_BEH, false},
    {"answer", AIR__MOCK_K_ANSWER, KT_STR, OFF(answer), SC_BEH, false},
    {"reject_prefill", AIR__MOCK_K_REJECT_PREFILL, KT_BOOL, OFF(reject_prefill),
     SC_MODEL, false},
    /* Named in the fault string only when a continuation used it (mock.c). */
    {"continue_as", AIR__MOCK_K_CONTINUE_AS, KT_CONT, OFF(continue_as), SC_BEH,
     false},
    {"repeat_chars", AIR__MOCK_K_REPEAT_CHARS, KT_REPEAT, OFF(repeat_chars),
     SC_BEH, false},
};

static const char *const cont_as_names[] = {"exact", "restart", "repeat",
                                            "preamble", "diverge"};
#define N_CONT_AS (sizeof(cont_as_names) / sizeof(cont_as_names[0]))

const char *air__mock_cont_as_name(unsigned v) {
  return v < N_CONT_AS ? cont_as_names[v] : "exact";
}
#define N_KEYS (sizeof(keys) / sizeof(keys[0]))

static const key_desc *find_key(const char *s, size_t n) {
  for (size_t i = 0; i < N_KEYS; i++)
    if (strlen(keys[i].name) == n && memcmp(keys[i].name, s, n) == 0)
      return &keys[i];
  return NULL;
}

static void *field(air__mock_beh *b, const key_desc *k) {
  return (char *)b + k->off;
}

static const void *cfield(const air__mock_beh *b, const key_desc *k) {
  return (const char *)b + k->off;
}

/* Copies the field of key k from src to dst. */
static void copy_field(air__mock_beh *dst, const air__mock_beh *src,
                       const key_desc *k) {
  switch (k->type) {
    case KT_STATUS:
      dst->status = src->status;
      break;
    case KT_STR:
    case KT_NUMSTR:
    case KT_REFUSAL:
      *(const char **)field(dst, k) = *(const char *const *)cfield(src, k);
      if (k->type == KT_REFUSAL) dst->refusal_native = src->refusal_native;
      break;
    case KT_HEADERS:
      dst->headers = src->headers;
      dst->n_headers = src->n_headers;
      break;
    case KT_BOOL:
      *(bool *)field(dst, k) = *(const bool *)cfield(src, k);
      break;
    case KT_MS:
      *(uint64_t *)field(dst, k) = *(const uint64_t *)cfield(src, k);
      break;
    case KT_COUNT:
    case KT_COUNT1:
    case KT_TOKENS:
    case KT_TOOLS:
    case KT_CONT:
    case KT_REPEAT:
      *(uint32_t *)field(dst, k) = *(const uint32_t *)cfield(src, k);
      break;
    case KT_FINISH:
      dst->finish = src->finish;
      break;
  }
}

void air__mock_merge(air__mock_beh *b, const air__mock_beh *top) {
  if (top->set == 0) return;
  for (size_t i = 0; i < N_KEYS; i++)
    if (top->set & keys[i].bit) copy_field(b, top, &keys[i]);
  b->set |= top->set;
}

air__mock_model air__mock_model_merge(const air__mock_model *under,
                                      const air__mock_model *over) {
  air__mock_model m = *over;
  m.base = under->base;
  air__mock_merge(&m.base, &over->base);
  m.has = over->has | under->has;
  if (!(over->has & AIR__MOCK_M_ATTEMPTS)) {
    m.attempts = under->attempts;
    m.n_attempts = under->n_attempts;
  }
  if (!(over->has & AIR__MOCK_M_THEN)) m.then = under->then;
  if (!(over->has & AIR__MOCK_M_FAULT)) {
    m.fault = under->fault;
    m.fault_k = under->fault_k;
    m.window = under->window;
    m.from_ms = under->from_ms;
    m.to_ms = under->to_ms;
  }
  return m;
}

void air__mock_select(const air__mock_model *m, unsigned attempt, uint64_t t_ms,
                      air__mock_beh *out) {
  *out = m->base;
  if (attempt >= 1 && attempt <= m->n_attempts)
    air__mock_merge(out, &m->attempts[attempt - 1]);
  else
    air__mock_merge(out, &m->then);
  if (!(m->has & AIR__MOCK_M_FAULT)) return;
  if (m->fault_k != 0 && attempt > m->fault_k) return;
  if (m->window && (t_ms < m->from_ms || t_ms >= m->to_ms)) return;
  air__mock_merge(out, &m->fault);
}

/* ---- the fault string ------------------------------------------------------
 */

static int add_kv_u(air__buf *out, bool *first, const char *k,
                    unsigned long long v) {
  int rc = *first ? 0 : air__buf_addc(out, ',');
  *first = false;
  if (rc == 0) rc = air__buf_adds(out, k);
  if (rc == 0) rc = air__buf_addc(out, '=');
  if (rc == 0) rc = air__buf_addu(out, v);
  return rc;
}

static int add_word(air__buf *out, bool *first, const char *w) {
  int rc = *first ? 0 : air__buf_addc(out, ',');
  *first = false;
  return rc == 0 ? air__buf_adds(out, w) : rc;
}

int air__mock_describe(const air__mock_beh *b, air__buf *out) {
  bool first = true;
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < N_KEYS; i++) {
    const key_desc *k = &keys[i];
    if (!k->fault || !(b->set & k->bit)) continue;
    switch (k->type) {
      case KT_STATUS:
        rc = add_kv_u(out, &first, k->name, (unsigned long long)b->status);
        break;
      case KT_BOOL:
        if (*(const bool *)cfield(b, k)) rc = add_word(out, &first, k->name);
        break;
      case KT_MS:
        rc = add_kv_u(out, &first, k->name, *(const uint64_t *)cfield(b, k));
        break;
      case KT_COUNT:
      case KT_COUNT1:
      case KT_TOKENS:
      case KT_TOOLS:
        rc = add_kv_u(out, &first, k->name, *(const uint32_t *)cfield(b, k));
        break;
      case KT_REFUSAL:
        if (b->refusal != NULL)
          rc = add_word(out, &first,
                        b->refusal_native ? "refusal=native" : "refusal");
        break;
      case KT_FINISH:
        if (b->finish == AIR_FINISH_LENGTH)
          rc = add_word(out, &first, "finish=length");
        else if (b->finish == AIR_FINISH_CONTENT_FILTER)
          rc = add_word(out, &first, "finish=content_filter");
        break;
      default:
        break;
    }
  }
  if (rc == 0 && first) rc = air__buf_adds(out, "ok");
  return rc;
}

/* ---- value checks -----------------------------------------------------------
 */

bool air__mock_is_number(const char *s, size_t n) {
  size_t i = 0, digits = 0;
  if (n == 0 || n > 32) return false;
  while (i < n && s[i] >= '0' && s[i] <= '9') i++, digits++;
  if (digits == 0) return false;
  if (i < n && s[i] == '.') {
    size_t frac = 0;
    for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++) frac++;
    if (frac == 0) return false;
  }
  return i == n;
}

static bool is_tchar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || (c != '\0' && strchr("!#$%&'*+-.^_`|~", c));
}

static bool is_token(const char *s, size_t n) {
  if (n == 0) return false;
  for (size_t i = 0; i < n; i++)
    if (!is_tchar(s[i])) return false;
  return true;
}

static bool value_ok(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] == '\r' || s[i] == '\n' || s[i] == '\0') return false;
  return true;
}

/* ---- the script parser -----------------------------------------------------
 */

typedef air__yaml_loc loc;

typedef struct pctx {
  air__mock_script *s;
  air__mock_diag *diag;
  bool failed;
  bool oom;
  air__yaml_walk walk; /* stop: set by the first failure */
} pctx;

static void fail_at(pctx *c, loc at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records the first problem only. */
static void fail_at(pctx *c, loc at, const char *fmt, ...) {
  if (c->failed) return;
  c->failed = true;
  c->walk.stop = true;
  c->diag->line = at.line;
  c->diag->column = at.col;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->diag->message, sizeof(c->diag->message), fmt, ap);
  va_end(ap);
}

static void over_budget(void *data, unsigned long max) {
  fail_at(data, (loc){0, 0}, "the script expands to more than %lu nodes", max);
}

static struct fy_node *deref(pctx *c, struct fy_node *n) {
  return air__yaml_deref(&c->walk, n);
}

static bool eqn(const char *s, size_t n, const char *lit) {
  return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

static void oom(pctx *c) {
  if (c->failed) return;
  c->oom = true;
  fail_at(c, (loc){0, 0}, "out of memory");
}

static char *dup_text(pctx *c, const char *s, size_t n) {
  char *p = air__arena_strndup(&c->s->arena, s, n);
  if (p == NULL) oom(c);
  return p;
}

static void parse_headers(pctx *c, struct fy_node *v, loc at, const char *path,
                          air__mock_beh *b) {
  if (!air__yaml_is_map(v)) {
    fail_at(c, at, "%s: expected a map of header: value, got %s", path,
            air__yaml_kind(v));
    return;
  }
  size_t n = air__yaml_count(v);
  if (n > AIR__MOCK_MAX_HEADERS) {
    fail_at(c, at, "%s: more than %u headers", path, AIR__MOCK_MAX_HEADERS);
    return;
  }
  air__mock_header *h =
      n ? air__arena_alloc(&c->s->arena, n * sizeof(*h)) : NULL;
  if (n && h == NULL) {
    oom(c);
    return;
  }
  void *it = NULL;
  struct fy_node *k, *val;
  size_t i = 0;
  while (i < n && air__yaml_map_next(&c->walk, v, &it, &k, &val) &&
         !c->failed) {
    val = deref(c, val);
    loc kl = air__yaml_node_loc(k, at);
    size_t kn = 0, vn = 0;
    const char *ks = air__yaml_is_scalar(k) ? air__yaml_scalar(k, &kn) : NULL;
    if (ks == NULL || !is_token(ks, kn)) {
      fail_at(c, kl, "%s: a header name must be an HTTP token", path);
      return;
    }
    if (!air__yaml_is_scalar(val)) {
      fail_at(c, air__yaml_node_loc(val, kl),
              "%s.%.*s: expected a string, got %s", path, (int)kn, ks,
              air__yaml_kind(val));
      return;
    }
    const char *vs = air__yaml_scalar(val, &vn);
    if (!value_ok(vs, vn) || vn > AIR__MOCK_MAX_TEXT_BYTES) {
      fail_at(c, air__yaml_node_loc(val, kl),
              "%s.%.*s: a header value may not hold CR, LF or NUL", path,
              (int)kn, ks);
      return;
    }
    h[i].name = dup_text(c, ks, kn);
    h[i].value = dup_text(c, vs, vn);
    i++;
  }
  b->headers = h;
  b->n_headers = i;
}

/* Parses the value v of key k (at `at`, named path) into b. */
static void parse_value(pctx *c, const key_desc *k, struct fy_node *v, loc at,
                        const char *path, air__mock_beh *b) {
  loc vl = air__yaml_node_loc(v, at);
  if (k->type == KT_HEADERS) {
    parse_headers(c, v, vl, path, b);
    if (!c->failed) b->set |= k->bit;
    return;
  }
  if (!air__yaml_is_scalar(v)) {
    fail_at(c, vl, "%s: expected a scalar, got %s", path, air__yaml_kind(v));
    return;
  }
  size_t n;
  const char *s = air__yaml_scalar(v, &n);
  uint64_t u = 0;
  bool ok = true;
  switch (k->type) {
    case KT_STATUS:
      if (!air__yaml_u64(s, n, 599, &u) || u < 400) {
        fail_at(c, vl, "%s: expected an HTTP status 400..599", path);
        return;
      }
      b->status = (int)u;
      break;
    case KT_STR:
      if (n > AIR__MOCK_MAX_TEXT_BYTES || memchr(s, '\0', n) != NULL) {
        fail_at(c, vl, "%s: expected a text of at most %u bytes without NUL",
                path, AIR__MOCK_MAX_TEXT_BYTES);
        return;
      }
      *(const char **)field(b, k) = dup_text(c, s, n);
      break;
    case KT_NUMSTR:
      if (!air__mock_is_number(s, n)) {
        fail_at(c, vl, "%s: expected a non-negative number", path);
        return;
      }
      *(const char **)field(b, k) = dup_text(c, s, n);
      break;
    case KT_BOOL: {
      bool x = air__yaml_bool(v, &ok);
      if (!ok) {
        fail_at(c, vl, "%s: expected true or false", path);
        return;
      }
      *(bool *)field(b, k) = x;
      break;
    }
    case KT_MS:
      if (!air__yaml_u64(s, n, AIR__MOCK_MAX_MS, &u)) {
        fail_at(c, vl, "%s: expected milliseconds 0..%u", path,
                AIR__MOCK_MAX_MS);
        return;
      }
      *(uint64_t *)field(b, k) = u;
      break;
    case KT_COUNT:
    case KT_COUNT1:
    case KT_TOKENS:
    case KT_TOOLS: {
      uint64_t lo = k->type == KT_COUNT1 ? 1 : 0;
      uint64_t hi = k->type == KT_TOKENS  ? AIR__MOCK_MAX_TOKENS
                    : k->type == KT_TOOLS ? AIR__MOCK_MAX_TOOL_CALLS
                                          : AIR__MOCK_MAX_COUNT;
      if (!air__yaml_u64(s, n, hi, &u) || u < lo) {
        fail_at(c, vl, "%s: expected an integer %llu..%llu", path,
                (unsigned long long)lo, (unsigned long long)hi);
        return;
      }
      *(uint32_t *)field(b, k) = (uint32_t)u;
      break;
    }
    case KT_REFUSAL: {
      bool x = air__yaml_bool(v, &ok);
      b->refusal_native = false;
      if (ok) {
        b->refusal = x ? AIR__MOCK_REFUSAL_TEXT : NULL;
      } else if (eqn(s, n, "native")) {
        b->refusal = AIR__MOCK_REFUSAL_TEXT;
        b->refusal_native = true;
      } else if (n == 0 || n > AIR__MOCK_MAX_TEXT_BYTES ||
                 memchr(s, '\0', n) != NULL) {
        fail_at(c, vl, "%s: expected true, false or a refusal text", path);
        return;
      } else {
        b->refusal = dup_text(c, s, n);
      }
      break;
    }
    case KT_FINISH:
      if (eqn(s, n, "stop")) {
        b->finish = AIR_FINISH_STOP;
      } else if (eqn(s, n, "length")) {
        b->finish = AIR_FINISH_LENGTH;
      } else if (eqn(s, n, "content_filter")) {
        b->finish = AIR_FINISH_CONTENT_FILTER;
      } else {
        fail_at(c, vl, "%s: expected stop, length or content_filter", path);
        return;
      }
      break;
    case KT_CONT: {
      size_t i = 0;
      while (i < N_CONT_AS && !eqn(s, n, cont_as_names[i])) i++;
      if (i == N_CONT_AS) {
        fail_at(c, vl,
                "%s: expected exact, restart, repeat, preamble or diverge",
                path);
        return;
      }
      b->continue_as = (uint32_t)i;
      break;
    }
    case KT_REPEAT:
      if (!air__yaml_u64(s, n, AIR__MOCK_MAX_REPEAT_CHARS, &u)) {
        fail_at(c, vl, "%s: expected an integer 0..%u", path,
                AIR__MOCK_MAX_REPEAT_CHARS);
        return;
      }
      b->repeat_chars = (uint32_t)u;
      break;
    case KT_HEADERS:
      break;
  }
  if (!c->failed) b->set |= k->bit;
}

static const char *const model_only[] = {"attempts", "then", "flap"};

/* A behaviour map. scope: SC_BEH, or SC_BEH | SC_MODEL for a model entry,
 * whose selection keys (attempts, then, flap) are handled by the caller:
 * for those *other receives the pair. */
typedef void (*other_fn)(pctx *c, void *obj, const char *key, size_t kn,
                         struct fy_node *v, loc kl, const char *path);

static void parse_beh_map(pctx *c, struct fy_node *map, loc at,
                          const char *path, unsigned scope, air__mock_beh *b,
                          other_fn other, void *obj) {
  memset(b, 0, sizeof(*b));
  b->finish = AIR_FINISH_STOP;
  if (air__yaml_is_null(map)) return; /* `name:` alone: healthy */
  if (!air__yaml_is_map(map)) {
    fail_at(c, air__yaml_node_loc(map, at), "%s: expected a map, got %s", path,
            air__yaml_kind(map));
    return;
  }
  void *it = NULL;
  struct fy_node *k, *v;
  while (air__yaml_map_next(&c->walk, map, &it, &k, &v) && !c->failed) {
    v = deref(c, v);
    if (c->failed) return;
    loc kl = air__yaml_node_loc(k, at);
    size_t kn = 0;
    const char *ks = air__yaml_is_scalar(k) ? air__yaml_scalar(k, &kn) : NULL;
    if (ks == NULL) {
      fail_at(c, kl, "%s: keys must be strings", path);
      return;
    }
    char sub[320];
    snprintf(sub, sizeof(sub), "%s%s%.*s", path, path[0] ? "." : "",
             (int)(kn > 64 ? 64 : kn), ks);
    const key_desc *kd = find_key(ks, kn);
    if (kd != NULL && (kd->scope & scope)) {
      parse_value(c, kd, v, kl, sub, b);
      continue;
    }
    bool sel = false;
    for (size_t i = 0; i < sizeof(model_only) / sizeof(model_only[0]); i++)
      sel = sel || eqn(ks, kn, model_only[i]);
    if (sel && (scope & SC_MODEL) && other != NULL) {
      other(c, obj, ks, kn, v, kl, sub);
      continue;
    }
    if (kd != NULL || sel)
      fail_at(c, kl, "%s: only allowed in a model entry or defaults", sub);
    else
      fail_at(c, kl, "%s: unknown key", sub);
  }
}

static const char *const flap_keys[] = {"from_ms", "to_ms", "fault"};

static void parse_flap(pctx *c, air__mock_model *m, struct fy_node *v, loc kl,
                       const char *path) {
  loc at = air__yaml_node_loc(v, kl);
  if (!air__yaml_is_map(v)) {
    fail_at(c, at, "%s: expected a map {from_ms, to_ms, fault}, got %s", path,
            air__yaml_kind(v));
    return;
  }
  struct fy_node *val[3] = {NULL, NULL, NULL};
  loc vl[3] = {at, at, at};
  void *it = NULL;
  struct fy_node *k, *x;
  while (air__yaml_map_next(&c->walk, v, &it, &k, &x) && !c->failed) {
    x = deref(c, x);
    loc l = air__yaml_node_loc(k, at);
    size_t kn = 0;
    const char *ks = air__yaml_is_scalar(k) ? air__yaml_scalar(k, &kn) : NULL;
    size_t i = 0;
    while (ks != NULL && i < 3 && !eqn(ks, kn, flap_keys[i])) i++;
    if (ks == NULL || i == 3) {
      fail_at(c, l, "%s.%.*s: unknown key (flap has from_ms, to_ms, fault)",
              path, ks ? (int)(kn > 64 ? 64 : kn) : 0, ks ? ks : "");
      return;
    }
    val[i] = x;
    vl[i] = air__yaml_node_loc(x, l);
  }
  if (c->failed) return;
  uint64_t ms[2] = {0, 0};
  for (int i = 0; i < 2; i++) {
    size_t n = 0;
    const char *s =
        air__yaml_is_scalar(val[i]) ? air__yaml_scalar(val[i], &n) : NULL;
    if (val[i] == NULL && i == 0) continue; /* from_ms defaults to 0 */
    if (val[i] == NULL) {
      fail_at(c, kl, "%s.to_ms: required", path);
      return;
    }
    if (s == NULL || !air__yaml_u64(s, n, AIR__MOCK_MAX_FLAP_MS, &ms[i])) {
      fail_at(c, vl[i], "%s.%s: expected milliseconds since reset", path,
              flap_keys[i]);
      return;
    }
  }
  if (ms[0] > ms[1]) {
    fail_at(c, vl[0], "%s: from_ms is after to_ms", path);
    return;
  }
  if (val[2] == NULL) {
    fail_at(c, kl, "%s.fault: required", path);
    return;
  }
  char sub[320];
  snprintf(sub, sizeof(sub), "%s.fault", path);
  parse_beh_map(c, val[2], vl[2], sub, SC_BEH, &m->fault, NULL, NULL);
  m->has |= AIR__MOCK_M_FAULT;
  m->fault_k = 0;
  m->window = true;
  m->from_ms = ms[0];
  m->to_ms = ms[1];
}

static void model_other(pctx *c, void *obj, const char *key, size_t kn,
                        struct fy_node *v, loc kl, const char *path) {
  air__mock_model *m = obj;
  loc at = air__yaml_node_loc(v, kl);
  if (eqn(key, kn, "then")) {
    parse_beh_map(c, v, at, path, SC_BEH, &m->then, NULL, NULL);
    m->has |= AIR__MOCK_M_THEN;
  } else if (eqn(key, kn, "flap")) {
    parse_flap(c, m, v, kl, path);
  } else {
    if (!air__yaml_is_seq(v) || air__yaml_is_null(v)) {
      fail_at(c, at, "%s: expected a list of behaviours, got %s", path,
              air__yaml_kind(v));
      return;
    }
    size_t n = air__yaml_count(v);
    if (n > AIR__MOCK_MAX_ATTEMPTS) {
      fail_at(c, at, "%s: more than %u attempts", path, AIR__MOCK_MAX_ATTEMPTS);
      return;
    }
    air__mock_beh *list =
        n ? air__arena_alloc(&c->s->arena, n * sizeof(*list)) : NULL;
    if (n && list == NULL) {
      oom(c);
      return;
    }
    void *it = NULL;
    struct fy_node *item;
    size_t i = 0;
    while (i < n && (item = air__yaml_seq_next(v, &it)) && !c->failed) {
      struct fy_node *x = deref(c, item);
      char sub[320];
      snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
      if (air__yaml_is_null(x)) {
        fail_at(c, air__yaml_node_loc(item, at),
                "%s: expected a behaviour map ({} is healthy)", sub);
        return;
      }
      parse_beh_map(c, x, air__yaml_node_loc(x, at), sub, SC_BEH, &list[i],
                    NULL, NULL);
      i++;
    }
    m->attempts = list;
    m->n_attempts = i;
    m->has |= AIR__MOCK_M_ATTEMPTS;
  }
}

static void parse_model(pctx *c, struct fy_node *v, loc at, const char *path,
                        air__mock_model *m) {
  memset(m, 0, sizeof(*m));
  m->then.finish = m->fault.finish = AIR_FINISH_STOP;
  parse_beh_map(c, v, at, path, SC_BEH | SC_MODEL, &m->base, model_other, m);
}

static int cmp_model(const void *a, const void *b) {
  return strcmp(((const air__mock_model *)a)->name,
                ((const air__mock_model *)b)->name);
}

static void parse_models(pctx *c, struct fy_node *v, loc at) {
  if (air__yaml_is_null(v)) return;
  if (!air__yaml_is_map(v)) {
    fail_at(c, air__yaml_node_loc(v, at),
            "models: expected a map of model: behaviour, got %s",
            air__yaml_kind(v));
    return;
  }
  size_t n = air__yaml_count(v);
  if (n > AIR__MOCK_MAX_SCRIPT_MODELS) {
    fail_at(c, at, "models: more than %u models", AIR__MOCK_MAX_SCRIPT_MODELS);
    return;
  }
  air__mock_script *s = c->s;
  s->models = n ? calloc(n, sizeof(*s->models)) : NULL;
  if (n && s->models == NULL) {
    oom(c);
    return;
  }
  void *it = NULL;
  struct fy_node *k, *x;
  while (s->n_models < n && air__yaml_map_next(&c->walk, v, &it, &k, &x) &&
         !c->failed) {
    x = deref(c, x);
    if (c->failed) break;
    loc kl = air__yaml_node_loc(k, at);
    size_t kn = 0;
    const char *ks = air__yaml_is_scalar(k) ? air__yaml_scalar(k, &kn) : NULL;
    if (ks == NULL || kn > AIR__MOCK_MAX_MODEL_BYTES ||
        memchr(ks, '\0', kn) != NULL) {
      fail_at(c, kl, "models: a model name must be a string of 1..%u bytes",
              AIR__MOCK_MAX_MODEL_BYTES);
      break;
    }
    char path[320];
    snprintf(path, sizeof(path), "models.%.*s", (int)(kn > 64 ? 64 : kn), ks);
    air__mock_model *m = &s->models[s->n_models];
    parse_model(c, x, kl, path, m);
    m->name = dup_text(c, ks, kn);
    s->n_models++;
  }
  if (!c->failed && s->models != NULL) {
    /* Sorted for lookup. libfyaml rejects duplicate keys already; this
     * catches names that differ only in YAML form. */
    qsort(s->models, s->n_models, sizeof(*s->models), cmp_model);
    for (size_t i = 1; i < s->n_models; i++)
      if (strcmp(s->models[i - 1].name, s->models[i].name) == 0) {
        fail_at(c, (loc){0, 0}, "models: %s is given twice", s->models[i].name);
        break;
      }
  }
}

static void parse_root(pctx *c, struct fy_node *root) {
  if (air__yaml_is_null(root)) return;
  if (!air__yaml_is_map(root)) {
    fail_at(c, air__yaml_node_loc(root, (loc){1, 1}),
            "the script must be a map with defaults: and models:, got %s",
            air__yaml_kind(root));
    return;
  }
  struct fy_node *models = NULL;
  loc models_at = {1, 1};
  void *it = NULL;
  struct fy_node *k, *v;
  while (air__yaml_map_next(&c->walk, root, &it, &k, &v) && !c->failed) {
    v = deref(c, v);
    if (c->failed) return;
    loc kl = air__yaml_node_loc(k, (loc){1, 1});
    size_t kn = 0;
    const char *ks = air__yaml_is_scalar(k) ? air__yaml_scalar(k, &kn) : NULL;
    if (ks != NULL && eqn(ks, kn, "defaults")) {
      parse_model(c, v, kl, "defaults", &c->s->defaults);
    } else if (ks != NULL && eqn(ks, kn, "models")) {
      models = v;
      models_at = kl;
    } else {
      fail_at(c, kl, "%.*s: unknown key (a script has defaults: and models:)",
              ks ? (int)(kn > 64 ? 64 : kn) : 0, ks ? ks : "");
    }
  }
  if (!c->failed) parse_models(c, models, models_at);
}

/* A libfyaml error, in the script's words (warnings are not reported). */
static void yaml_problem(void *data, bool error, loc at, const char *msg) {
  if (error) fail_at(data, at, "YAML syntax error: %s", msg);
}

int air__mock_script_parse(const char *text, size_t n, air__mock_script **out,
                           air__mock_diag *diag) {
  air__mock_diag scratch;
  if (diag == NULL) diag = &scratch;
  memset(diag, 0, sizeof(*diag));
  *out = NULL;
  if (n > AIR__MOCK_MAX_SCRIPT_BYTES) {
    snprintf(diag->message, sizeof(diag->message),
             "the script is over the limit of %u bytes",
             AIR__MOCK_MAX_SCRIPT_BYTES);
    return AIR_ETOOBIG;
  }
  air__mock_script *s = calloc(1, sizeof(*s));
  if (s == NULL) return AIR_ENOMEM;
  air__arena_init(&s->arena);
  s->defaults.base.finish = s->defaults.then.finish = s->defaults.fault.finish =
      AIR_FINISH_STOP;
  pctx c = {.s = s, .diag = diag};
  c.walk = (air__yaml_walk){
      .max_visits = MAX_NODE_VISITS, .over = over_budget, .data = &c};
  air__yaml_doc d;
  switch (air__yaml_load(&d, text, n, yaml_problem, &c)) {
    case AIR__YAML_BAD_TEXT:
      fail_at(&c, d.bad_at, "the script %s", d.why);
      break;
    case AIR__YAML_NOMEM:
      oom(&c);
      break;
    case AIR__YAML_SYNTAX:
      break; /* reported by yaml_problem */
    case AIR__YAML_NOT_YAML:
      fail_at(&c, (loc){0, 0}, "cannot parse the script as YAML");
      break;
    case AIR__YAML_OK:
      parse_root(&c, d.root);
      break;
  }
  air__yaml_doc_cleanup(&d);
  if (c.failed) {
    int rc = c.oom ? AIR_ENOMEM : AIR_ECONFIG;
    air__mock_script_free(s);
    return rc;
  }
  for (size_t i = 0; i < s->n_models; i++) {
    const char *name = s->models[i].name;
    s->models[i] = air__mock_model_merge(&s->defaults, &s->models[i]);
    s->models[i].name = name;
  }
  *out = s;
  return 0;
}

void air__mock_script_free(air__mock_script *s) {
  if (s == NULL) return;
  free(s->models);
  air__arena_cleanup(&s->arena);
  free(s);
}

const air__mock_model *air__mock_script_find(const air__mock_script *s,
                                             const char *name, size_t n) {
  if (s == NULL || s->n_models == 0) return NULL;
  size_t lo = 0, hi = s->n_models;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    const char *m = s->models[mid].name;
    size_t mn = strlen(m);
    int c = memcmp(m, name, mn < n ? mn : n);
    if (c == 0) c = mn < n ? -1 : (mn > n ? 1 : 0);
    if (c == 0) return &s->models[mid];
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}
