/*
 * The fast path for callers' requests: validating a body on the token array
 * of json.c instead of building a jansson tree, and building a same-dialect
 * upstream body by copying the caller's text with a few members replaced.
 *
 * The fast validator accepts only what the jansson path (dialect.c) also
 * accepts, with the same results; anything it is not sure of (escaped keys
 * or model, \u0000, lone surrogate escapes, numbers jansson might reject,
 * objects too big to check for duplicate keys cheaply) falls back to
 * jansson, which then also writes the error message.
 */
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "dialect.h"

#define MAX_FAST_KEYS 64 /* duplicate keys are checked pairwise up to this */
/* What a patch usually adds to the caller's text: stream_options, a
 * longer model name. More still fits: the buffer then grows. */
#define PATCH_SLACK_BYTES 128

/* A string token jansson reads the same way: valid UTF-8, escapes that
 * decode to neither NUL nor a lone surrogate. */
static bool str_ok(const air__json *j, int i) {
  const unsigned char *p = (const unsigned char *)j->js + j->tok[i].start;
  const unsigned char *e = (const unsigned char *)j->js + j->tok[i].end;
  while (p < e) {
    if (*p < 0x80 && *p != '\\') {
      p++;
      continue;
    }
    if (*p >= 0x80) {
      size_t k = air__utf8_seq(p, (size_t)(e - p));
      if (k == 0) return false;
      p += k;
      continue;
    }
    /* An escape: the tokenizer checked its form (\u and 4 hex digits). */
    if (p[1] != 'u') {
      p += 2;
      continue;
    }
    long cp = air__json_hex4((const char *)p + 2);
    p += 6;
    if (cp == 0 || (cp >= 0xDC00 && cp <= 0xDFFF)) return false;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (e - p < 6 || p[0] != '\\' || p[1] != 'u') return false;
      long lo = air__json_hex4((const char *)p + 2);
      if (lo < 0xDC00 || lo > 0xDFFF) return false;
      p += 6;
    }
  }
  return true;
}

/* A number jansson reads without complaint: an integer that fits in
 * int64, or a real short enough that it cannot overflow a double. */
static bool num_ok(const air__json *j, int i) {
  size_t n;
  const char *s = air__json_raw(j, i, &n);
  if (memchr(s, '.', n) || memchr(s, 'e', n) || memchr(s, 'E', n))
    return memchr(s, 'e', n) == NULL && memchr(s, 'E', n) == NULL && n < 300;
  int64_t v;
  return air__json_int(j, i, &v);
}

/* Every token: strings and numbers as above, keys unique and unescaped. */
static bool doc_ok(const air__json *j) {
  for (int i = 0; i < j->n; i++) {
    const air__jtok *t = &j->tok[i];
    if (t->type == AIR__JSON_STR && !str_ok(j, i)) return false;
    if (t->type == AIR__JSON_NUM && !num_ok(j, i)) return false;
    if (t->type != AIR__JSON_OBJ) continue;
    if (t->size > MAX_FAST_KEYS) return false;
    int keys[MAX_FAST_KEYS];
    int k = i + 1;
    for (int m = 0; m < t->size; m++) {
      const air__jtok *key = &j->tok[k];
      if (memchr(j->js + key->start, '\\', (size_t)(key->end - key->start)))
        return false;
      for (int o = 0; o < m; o++)
        if (air__json_eqn(j, keys[o], j->js + key->start,
                          (size_t)(key->end - key->start)))
          return false;
      keys[m] = k;
      k = j->tok[k + 1].next;
    }
  }
  return true;
}

static bool is_type(const air__json *j, int i, int type) {
  return i >= 0 && i < j->n && j->tok[i].type == type;
}

static bool pos_int(const air__json *j, int i) {
  int64_t v;
  return is_type(j, i, AIR__JSON_NUM) && air__json_int(j, i, &v) && v > 0;
}

/* The rules of dialect.c's field table, on tokens (null always passes). */
static bool field_ok(const air__json *j, int v, air__field_type t) {
  if (v < 0 || is_type(j, v, AIR__JSON_NULL)) return true;
  switch (t) {
    case AIR__F_BOOL:
      return is_type(j, v, AIR__JSON_TRUE) || is_type(j, v, AIR__JSON_FALSE);
    case AIR__F_INT_POS:
      return pos_int(j, v);
    case AIR__F_NUMBER:
      return is_type(j, v, AIR__JSON_NUM);
    case AIR__F_STRING:
      return is_type(j, v, AIR__JSON_STR);
    case AIR__F_ARRAY:
      return is_type(j, v, AIR__JSON_ARR);
    case AIR__F_OBJECT:
      return is_type(j, v, AIR__JSON_OBJ);
    case AIR__F_STR_OR_ARRAY:
      return is_type(j, v, AIR__JSON_STR) || is_type(j, v, AIR__JSON_ARR);
    case AIR__F_STR_OR_OBJ:
      return is_type(j, v, AIR__JSON_STR) || is_type(j, v, AIR__JSON_OBJ);
  }
  return false;
}

bool air__request_fast(air_dialect dialect, const char *body, size_t n,
                       air__request *out) {
  air__json j;
  if (air__json_parse(&j, body, n) != 0) {
    air__json_cleanup(&j);
    return false;
  }
  bool ok = is_type(&j, 0, AIR__JSON_OBJ) && doc_ok(&j);
  int model = ok ? air__json_get(&j, 0, "model") : -1;
  /* A Responses request's "input" is a string or items (objects of any
   * type); chat and messages requests have "messages" with roles. */
  bool rsp = dialect == AIR_DIALECT_OPENAI_RESPONSES;
  int msgs = ok ? air__json_get(&j, 0, rsp ? "input" : "messages") : -1;
  size_t model_n = 0;
  const char *model_p = NULL;
  bool in_str = rsp && is_type(&j, msgs, AIR__JSON_STR);
  ok = ok && is_type(&j, model, AIR__JSON_STR) &&
       air__json_plain(&j, model, &model_p, &model_n) && model_n > 0 &&
       (in_str || (is_type(&j, msgs, AIR__JSON_ARR) && j.tok[msgs].size > 0));
  for (int k = msgs + 1, m = 0; ok && !in_str && m < j.tok[msgs].size;
       m++, k = j.tok[k].next)
    ok = is_type(&j, k, AIR__JSON_OBJ) &&
         (rsp || is_type(&j, air__json_get(&j, k, "role"), AIR__JSON_STR));
  size_t n_rules = 0;
  const air__field_rule *rules = air__field_rules(dialect, &n_rules);
  for (size_t i = 0; ok && i < n_rules; i++)
    ok = field_ok(&j, air__json_get(&j, 0, rules[i].name), rules[i].type);
  if (!ok) {
    air__json_cleanup(&j);
    return false;
  }
  /* The body, then the model, NUL-terminated, in one allocation. */
  char *raw = malloc(n + model_n + 2);
  if (raw == NULL) {
    air__json_cleanup(&j);
    return false;
  }
  memcpy(raw, body, n);
  raw[n] = '\0';
  memcpy(raw + n + 1, model_p, model_n);
  raw[n + 1 + model_n] = '\0';
  memset(out, 0, sizeof(*out));
  out->dialect = dialect;
  out->raw = raw;
  out->raw_n = n;
  out->model = raw + n + 1;
  out->stream = is_type(&j, air__json_get(&j, 0, "stream"), AIR__JSON_TRUE);
  int so = air__json_get(&j, 0, "stream_options");
  out->include_usage =
      is_type(&j, so, AIR__JSON_OBJ) &&
      is_type(&j, air__json_get(&j, so, "include_usage"), AIR__JSON_TRUE);
  int rf = rsp ? air__json_get(&j, air__json_get(&j, 0, "text"), "format")
               : air__json_get(&j, 0, "response_format");
  int rft = is_type(&j, rf, AIR__JSON_OBJ) ? air__json_get(&j, rf, "type") : -1;
  out->json_response = is_type(&j, rft, AIR__JSON_STR) &&
                       (air__json_eq(&j, rft, "json_object") ||
                        air__json_eq(&j, rft, "json_schema"));
  air__json_cleanup(&j);
  return true;
}

/* The raw text of value token i (strings with their quotes). */
static void raw_value(const air__json *j, int i, const char **p, size_t *n) {
  const air__jtok *t = &j->tok[i];
  int s = t->start, e = t->end;
  if (t->type == AIR__JSON_STR) {
    s--;
    e++;
  }
  *p = j->js + s;
  *n = (size_t)(e - s);
}

static int add_member(air__buf *out, bool *first, const char *key, size_t kn,
                      const char *v, size_t vn) {
  int rc = *first ? 0 : air__buf_addc(out, ',');
  *first = false;
  if (rc == 0) rc = air__buf_add_json_str(out, key, kn);
  if (rc == 0) rc = air__buf_addc(out, ':');
  if (rc == 0) rc = air__buf_add(out, v, vn);
  return rc;
}

/* A member of the parsed text whose key token is k: its key is copied as
 * written (quotes included; the tokenizer validated it), not re-escaped. */
static int add_raw_member(air__buf *out, bool *first, const air__json *j, int k,
                          const char *v, size_t vn) {
  int rc = *first ? 0 : air__buf_addc(out, ',');
  *first = false;
  const char *key = j->js + j->tok[k].start - 1;
  size_t kn = (size_t)(j->tok[k].end - j->tok[k].start) + 2;
  if (rc == 0) rc = air__buf_add(out, key, kn);
  if (rc == 0) rc = air__buf_addc(out, ':');
  if (rc == 0) rc = air__buf_add(out, v, vn);
  return rc;
}

/* stream_options with include_usage true, keeping its other members. */
static int add_stream_options(air__buf *out, const air__json *j, int so) {
  int rc = air__buf_addc(out, '{');
  bool first = true;
  if (is_type(j, so, AIR__JSON_OBJ)) {
    for (int k = so + 1, m = 0; rc == 0 && m < j->tok[so].size;
         m++, k = j->tok[k + 1].next) {
      if (air__json_eqn(j, k, "include_usage", 13)) continue;
      const char *v;
      size_t vn;
      raw_value(j, k + 1, &v, &vn);
      rc = add_raw_member(out, &first, j, k, v, vn);
    }
  }
  if (rc == 0) rc = add_member(out, &first, "include_usage", 13, "true", 4);
  if (rc == 0) rc = air__buf_addc(out, '}');
  return rc;
}

int air__request_patch(const air__request *req, const air__patch *set,
                       size_t n_set, air__buf *out) {
  if (req->raw == NULL || n_set > 8) return AIR_EINVAL;
  air__json j;
  int rc = air__json_parse(&j, req->raw, req->raw_n);
  if (rc != 0 || !is_type(&j, 0, AIR__JSON_OBJ)) {
    air__json_cleanup(&j);
    return rc != 0 ? rc : AIR_EINVAL;
  }
  bool seen[8] = {false};
  bool first = true;
  size_t start = out->n;
  /* The caller's text and the few members set: one allocation, about the
   * body's size (it is kept while the attempt runs, so no doubling slack). */
  rc = air__buf_reserve(out, req->raw_n + PATCH_SLACK_BYTES);
  if (rc == 0) rc = air__buf_addc(out, '{');
  for (int k = 1, m = 0; rc == 0 && m < j.tok[0].size;
       m++, k = j.tok[k + 1].next) {
    const air__patch *p = NULL;
    for (size_t s = 0; s < n_set && p == NULL; s++)
      if (air__json_eq(&j, k, set[s].key)) {
        p = &set[s];
        seen[s] = true;
      }
    const char *v;
    size_t vn;
    raw_value(&j, k + 1, &v, &vn);
    if (p != NULL && p->how == AIR__PATCH_STREAM_OPTIONS) {
      rc = add_raw_member(out, &first, &j, k, "", 0);
      if (rc == 0) rc = add_stream_options(out, &j, k + 1);
    } else if (p != NULL && (p->how == AIR__PATCH_SET ||
                             is_type(&j, k + 1, AIR__JSON_NULL))) {
      rc = add_raw_member(out, &first, &j, k, p->value, strlen(p->value));
    } else {
      rc = add_raw_member(out, &first, &j, k, v, vn);
    }
  }
  for (size_t s = 0; rc == 0 && s < n_set; s++) {
    if (seen[s]) continue;
    if (set[s].how == AIR__PATCH_STREAM_OPTIONS) {
      rc = add_member(out, &first, set[s].key, strlen(set[s].key), "", 0);
      if (rc == 0) rc = add_stream_options(out, &j, -1);
    } else {
      rc = add_member(out, &first, set[s].key, strlen(set[s].key), set[s].value,
                      strlen(set[s].value));
    }
  }
  if (rc == 0) rc = air__buf_addc(out, '}');
  if (rc != 0 && out->p != NULL) {
    out->n = start; /* nothing written on failure */
    out->p[start] = '\0';
  }
  air__json_cleanup(&j);
  return rc;
}
