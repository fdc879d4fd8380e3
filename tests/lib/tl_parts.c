/*
 * tl_parts.h: parts as text, and decoding runs.
 */
#include "tl_parts.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

/* ---- parts as lines ------------------------------------------------------ */

static void add_str(air__buf *b, const char *s, size_t n) {
  assert_true(n == 0 || s != NULL);
  assert_int_equal(air__buf_addc(b, ' '), 0);
  assert_int_equal(air__buf_add_json_str(b, n > 0 ? s : "", n), 0);
}

static void add_int(air__buf *b, long long v) {
  char t[32];
  snprintf(t, sizeof(t), " %lld", v);
  assert_int_equal(air__buf_adds(b, t), 0);
}

static void add_u64(air__buf *b, uint64_t v) {
  char t[32];
  snprintf(t, sizeof(t), " %llu", (unsigned long long)v);
  assert_int_equal(air__buf_adds(b, t), 0);
}

static const char *finish_word(air_finish f) {
  return f == AIR_FINISH_NONE ? "none" : air_finish_name(f);
}

static const char *kind_word(air_part_kind k) {
  switch (k) {
    case AIR_PART_START:
      return "START";
    case AIR_PART_TEXT:
      return "TEXT";
    case AIR_PART_REASONING:
      return "REASONING";
    case AIR_PART_TOOL_START:
      return "TOOL_START";
    case AIR_PART_TOOL_DELTA:
      return "TOOL_DELTA";
    case AIR_PART_REFUSAL:
      return "REFUSAL";
    case AIR_PART_FINISH:
      return "FINISH";
    case AIR_PART_USAGE:
      return "USAGE";
    case AIR_PART_ERROR:
      return "ERROR";
  }
  fail_msg("unknown part kind %d", (int)k);
  return "";
}

void tl_part_line(air__buf *b, const air_part *p) {
  assert_int_equal(air__buf_adds(b, kind_word(p->kind)), 0);
  switch (p->kind) {
    case AIR_PART_START:
      add_str(b, p->id, p->id_len);
      add_str(b, p->name, p->name_len);
      break;
    case AIR_PART_TEXT:
    case AIR_PART_REASONING:
    case AIR_PART_REFUSAL:
    case AIR_PART_TOOL_DELTA:
      add_int(b, p->index);
      add_str(b, p->text, p->text_len);
      break;
    case AIR_PART_TOOL_START:
      add_int(b, p->index);
      add_str(b, p->id, p->id_len);
      add_str(b, p->name, p->name_len);
      break;
    case AIR_PART_FINISH:
      assert_int_equal(air__buf_addc(b, ' '), 0);
      assert_int_equal(air__buf_adds(b, finish_word(p->finish)), 0);
      add_str(b, p->finish_raw, p->finish_raw_len);
      break;
    case AIR_PART_USAGE:
      add_u64(b, p->input_tokens);
      add_u64(b, p->output_tokens);
      break;
    case AIR_PART_ERROR:
      add_str(b, p->name, p->name_len);
      add_str(b, p->text, p->text_len);
      break;
  }
  assert_int_equal(air__buf_addc(b, '\n'), 0);
}

/* ---- lines back into parts ----------------------------------------------- */

/* The next field at *s: a JSON string literal (decoded, owned by ps) or a
 * bare word (*n bytes at the returned pointer, inside the text). */
static const char *field(tl_parts *ps, const char **s, size_t *n, bool *str) {
  while (**s == ' ') (*s)++;
  const char *p = *s, *e = p;
  *str = *p == '"';
  if (!*str) {
    while (*e != '\0' && *e != ' ' && *e != '\n') e++;
    assert_true(e != p);
    *n = (size_t)(e - p);
    *s = e;
    return p;
  }
  for (e++; *e != '"'; e += *e == '\\' ? 2 : 1)
    if (*e == '\0' || *e == '\n' || (*e == '\\' && e[1] == '\0'))
      fail_msg("unterminated string field: %s", p);
  e++;
  json_error_t jerr;
  json_t *v =
      json_loadb(p, (size_t)(e - p), JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
  if (!json_is_string(v)) fail_msg("bad string field: %s", jerr.text);
  *n = json_string_length(v);
  char *own = malloc(*n + 1);
  assert_non_null(own);
  memcpy(own, json_string_value(v), *n + 1);
  json_decref(v);
  char **o = realloc(ps->own, (ps->n_own + 1) * sizeof(char *));
  assert_non_null(o);
  ps->own = o;
  ps->own[ps->n_own++] = own;
  *s = e;
  return own;
}

static const char *str_field(tl_parts *ps, const char **s, size_t *n) {
  bool str;
  const char *v = field(ps, s, n, &str);
  if (!str) fail_msg("expected a string field: %.*s", (int)*n, v);
  return v;
}

static long long int_field(tl_parts *ps, const char **s) {
  bool str;
  size_t n;
  const char *v = field(ps, s, &n, &str);
  char num[32], *end;
  if (str || n >= sizeof(num)) fail_msg("expected an integer: %.*s", (int)n, v);
  memcpy(num, v, n);
  num[n] = '\0';
  long long x = strtoll(num, &end, 10);
  if (*end != '\0') fail_msg("expected an integer: %s", num);
  return x;
}

static air_finish finish_of(const char *w, size_t n) {
  for (int f = AIR_FINISH_NONE; f <= AIR_FINISH_PAUSE; f++) {
    const char *name = finish_word((air_finish)f);
    if (strlen(name) == n && memcmp(name, w, n) == 0) return (air_finish)f;
  }
  fail_msg("unknown finish %.*s", (int)n, w);
  return AIR_FINISH_NONE;
}

static bool is_kind(const char *w, size_t n, const char *kind) {
  return strlen(kind) == n && memcmp(w, kind, n) == 0;
}

static void parse_line(tl_parts *ps, const char *s, air_part *p) {
  bool str;
  size_t kn;
  const char *k = field(ps, &s, &kn, &str);
  assert_false(str);
  memset(p, 0, sizeof(*p));
  p->id = p->name = p->text = p->finish_raw = "";
  if (is_kind(k, kn, "START")) {
    p->kind = AIR_PART_START;
    p->id = str_field(ps, &s, &p->id_len);
    p->name = str_field(ps, &s, &p->name_len);
  } else if (is_kind(k, kn, "TOOL_START")) {
    p->kind = AIR_PART_TOOL_START;
    p->index = (int)int_field(ps, &s);
    p->id = str_field(ps, &s, &p->id_len);
    p->name = str_field(ps, &s, &p->name_len);
  } else if (is_kind(k, kn, "FINISH")) {
    p->kind = AIR_PART_FINISH;
    size_t wn;
    const char *w = field(ps, &s, &wn, &str);
    assert_false(str);
    p->finish = finish_of(w, wn);
    p->finish_raw = str_field(ps, &s, &p->finish_raw_len);
  } else if (is_kind(k, kn, "USAGE")) {
    p->kind = AIR_PART_USAGE;
    p->input_tokens = (uint64_t)int_field(ps, &s);
    p->output_tokens = (uint64_t)int_field(ps, &s);
  } else if (is_kind(k, kn, "ERROR")) {
    p->kind = AIR_PART_ERROR;
    p->name = str_field(ps, &s, &p->name_len);
    p->text = str_field(ps, &s, &p->text_len);
  } else {
    if (is_kind(k, kn, "TEXT"))
      p->kind = AIR_PART_TEXT;
    else if (is_kind(k, kn, "REASONING"))
      p->kind = AIR_PART_REASONING;
    else if (is_kind(k, kn, "REFUSAL"))
      p->kind = AIR_PART_REFUSAL;
    else if (is_kind(k, kn, "TOOL_DELTA"))
      p->kind = AIR_PART_TOOL_DELTA;
    else
      fail_msg("unknown part %.*s", (int)kn, k);
    p->index = (int)int_field(ps, &s);
    p->text = str_field(ps, &s, &p->text_len);
  }
  while (*s == ' ') s++;
  if (*s != '\0' && *s != '\n') fail_msg("extra fields: %s", s);
}

void tl_parts_parse(const char *text, tl_parts *out) {
  memset(out, 0, sizeof(*out));
  for (const char *s = text; *s != '\0';) {
    const char *eol = strchr(s, '\n');
    if (eol == NULL) eol = s + strlen(s);
    if (s != eol && *s != '#' && strncmp(s, "STATE", 5) != 0) {
      air_part *v = realloc(out->p, (out->n + 1) * sizeof(*v));
      assert_non_null(v);
      out->p = v;
      parse_line(out, s, &out->p[out->n++]);
    }
    s = *eol != '\0' ? eol + 1 : eol;
  }
}

void tl_parts_free(tl_parts *ps) {
  for (size_t i = 0; i < ps->n_own; i++) free(ps->own[i]);
  free(ps->own);
  free(ps->p);
  memset(ps, 0, sizeof(*ps));
}

void tl_parts_strip(const char *text, air__buf *out) {
  for (const char *s = text; *s != '\0';) {
    const char *eol = strchr(s, '\n');
    size_t n = eol != NULL ? (size_t)(eol - s) : strlen(s);
    if (n > 0 && *s != '#') {
      assert_int_equal(air__buf_add(out, s, n), 0);
      assert_int_equal(air__buf_addc(out, '\n'), 0);
    }
    s += n + (eol != NULL);
  }
}

/* ---- decoding runs ------------------------------------------------------- */

void tl_run_init(tl_run *r, const air__dialect_ops *ops) {
  memset(r, 0, sizeof(*r));
  r->ops = ops;
  ops->decoder_init(&r->d);
  air__buf_init(&r->lines, 64u << 20);
  air__aggregate_init(&r->agg);
}

void tl_run_cleanup(tl_run *r) {
  air__decoder_cleanup(&r->d);
  air__buf_cleanup(&r->lines);
  air__aggregate_cleanup(&r->agg);
}

int tl_run_part(void *data, const air_part *p) {
  tl_run *r = data;
  /* Every string is readable in full during the callback. */
  if (p->text_len > 0)
    assert_non_null(memchr(p->text, p->text[p->text_len - 1], p->text_len));
  tl_part_line(&r->lines, p);
  assert_int_equal(air__aggregate_add(&r->agg, p), 0);
  r->n++;
  return r->stop_at > 0 && r->n == r->stop_at ? TL_STOP : 0;
}

int tl_run_event(tl_run *r, const char *type, const char *data) {
  air__sse_event ev = {{type, strlen(type)},
                       {data, strlen(data)},
                       {"", 0},
                       -1,
                       {data, strlen(data)}};
  return r->ops->decode_event(&r->d, &ev, tl_run_part, r);
}

static int on_sse_event(void *data, const air__sse_event *ev) {
  tl_run *r = data;
  return r->ops->decode_event(&r->d, ev, tl_run_part, r);
}

void tl_run_sse(tl_run *r, const char *in, size_t n, size_t piece) {
  air__sse p;
  air__sse_init(&p, on_sse_event, r);
  size_t step = piece > 0 ? piece : (n > 0 ? n : 1);
  for (size_t at = 0; at < n; at += step)
    assert_int_equal(air__sse_feed(&p, in + at, n - at < step ? n - at : step),
                     0);
  assert_int_equal(air__sse_finish(&p), 0);
  air__sse_cleanup(&p);
  char st[96];
  snprintf(st, sizeof(st), "STATE malformed=%u done=%d finished=%d\n",
           r->d.malformed, r->d.done, r->d.finished);
  assert_int_equal(air__buf_adds(&r->lines, st), 0);
}
