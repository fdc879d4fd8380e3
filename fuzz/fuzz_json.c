/*
 * libFuzzer target for the hot-path JSON tokenizer (src/stream/json.c).
 *
 * The input is one JSON text, tokenized by air__json_parse, then:
 *   1. the result is checked: 0, AIR_EPARSE or AIR_ETOOBIG, and on failure
 *      no tokens and no heap array left; air__json_validate gives the same
 *      answer (past the token limit, whatever the grammar says);
 *   2. on success every token is walked from the root: each container's
 *      members are where size and next say, each token's bytes lie inside
 *      its parent's and look like its type, only white space and exactly
 *      the right separator lie between them, skip(i) == next, at() finds
 *      every element, get() finds every key (the first one with the same
 *      raw bytes), strings decode;
 *   3. differential against jansson (json_loadb with JSON_DECODE_ANY and
 *      JSON_ALLOW_NUL): both accept or both reject, and an accepted text
 *      gives the same tree (types, member counts, decoded strings and keys,
 *      integers). Skipped where the two differ by design: invalid UTF-8
 *      (jansson checks it, json.c leaves it to its callers), NUL bytes
 *      (jansson's reader passes over some outside strings), keys with
 *      \u0000 (jansson refuses them even with JSON_ALLOW_NUL), \u escapes of
 *      surrogates (jansson rejects lone ones, json.c decodes them to
 *      U+FFFD), more than AIR__JSON_MAX_DEPTH brackets (jansson allows 2048
 *      levels), numbers jansson cannot hold (16+ digits in a row, an
 *      exponent of 3+ digits) and AIR_ETOOBIG.
 * libFuzzer passes an exact-size buffer, so ASan reports any read past len.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "airetry.h"
#include "buf.h"
#include "json.h"

#define CHECK(cond)       \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

typedef struct walk {
  const air__json *j;
  const char *js;
  air__buf s; /* decoded strings */
} walk;

static bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Between from and to: white space only, and exactly one sep unless sep
 * is 0. */
static void gap(const char *js, int from, int to, char sep) {
  CHECK(from <= to);
  int seps = 0;
  for (int k = from; k < to; k++) {
    if (sep != 0 && js[k] == sep)
      seps++;
    else
      CHECK(is_ws(js[k]));
  }
  CHECK(seps == (sep != 0));
}

/* The bytes of token i, quotes included for a string. */
static int ext_start(const air__json *j, int i) {
  return j->tok[i].start - (j->tok[i].type == AIR__JSON_STR);
}
static int ext_end(const air__json *j, int i) {
  return j->tok[i].end + (j->tok[i].type == AIR__JSON_STR);
}

static bool raw_is(const walk *w, int i, const char *lit) {
  size_t n;
  const char *p = air__json_raw(w->j, i, &n);
  return n == strlen(lit) && memcmp(p, lit, n) == 0;
}

/* Checks string token i and leaves its decoded bytes in w->s. */
static void check_str(walk *w, int i) {
  const air__json *j = w->j;
  const air__jtok *t = &j->tok[i];
  CHECK(t->start >= 1 && w->js[t->start - 1] == '"' && w->js[t->end] == '"');
  air__buf_reset(&w->s);
  CHECK(air__json_str(j, i, &w->s) == 0);
  CHECK(w->s.n <= (size_t)(t->end - t->start));
  const char *p;
  size_t n;
  bool plain = air__json_plain(j, i, &p, &n);
  CHECK(plain ==
        (memchr(w->js + t->start, '\\', (size_t)(t->end - t->start)) == NULL));
  if (plain) CHECK(n == w->s.n && (n == 0 || memcmp(p, w->s.p, n) == 0));
}

/* Key token k of the object obj: get() finds it, or an earlier key with
 * the same raw bytes. */
static void check_key(walk *w, int obj, int k) {
  const air__json *j = w->j;
  size_t n;
  const char *raw = air__json_raw(j, k, &n);
  int r = air__json_getn(j, obj, raw, n);
  CHECK(r > obj + 1 && r <= k + 1);
  CHECK(j->tok[r - 1].type == AIR__JSON_STR && j->tok[r - 1].next == r);
  size_t rn;
  const char *rr = air__json_raw(j, r - 1, &rn);
  CHECK(rn == n && memcmp(rr, raw, n) == 0);
  /* Raw keys hold no NUL byte (a control byte): the C-string forms agree. */
  char *key = malloc(n + 1);
  CHECK(key);
  memcpy(key, raw, n);
  key[n] = '\0';
  CHECK(air__json_get(j, obj, key) == r);
  CHECK(air__json_eq(j, k, key));
  free(key);
}

/* Checks the subtree at token i, whose bytes lie within [lo, hi); returns
 * the index past it. */
static int check_tree(walk *w, int i, int lo, int hi, int depth) {
  const air__json *j = w->j;
  CHECK(i >= 0 && i < j->n);
  const air__jtok *t = &j->tok[i];
  CHECK(lo <= ext_start(j, i) && t->start <= t->end && ext_end(j, i) <= hi);
  CHECK(air__json_skip(j, i) == t->next);
  CHECK(air__json_is_obj(j, i) == (t->type == AIR__JSON_OBJ));
  CHECK(air__json_is_arr(j, i) == (t->type == AIR__JSON_ARR));
  CHECK(air__json_is_str(j, i) == (t->type == AIR__JSON_STR));
  CHECK(air__json_is_null(j, i) == (t->type == AIR__JSON_NULL));
  if (t->type != AIR__JSON_OBJ && t->type != AIR__JSON_ARR) {
    CHECK(t->size == 0 && t->next == i + 1);
    CHECK(air__json_get(j, i, "") == -1 && air__json_at(j, i, 0) == -1);
  }
  int64_t v;
  if (t->type != AIR__JSON_NUM) CHECK(!air__json_int(j, i, &v));
  switch (t->type) {
    case AIR__JSON_OBJ:
    case AIR__JSON_ARR: {
      bool obj = t->type == AIR__JSON_OBJ;
      CHECK(depth <= AIR__JSON_MAX_DEPTH);
      CHECK(t->end - t->start >= 2);
      CHECK(w->js[t->start] == (obj ? '{' : '['));
      CHECK(w->js[t->end - 1] == (obj ? '}' : ']'));
      CHECK(t->size >= 0 && t->next > i && t->next <= j->n);
      int c = i + 1;
      int at = t->start + 1; /* where the previous member ended */
      for (int m = 0; m < t->size; m++) {
        if (obj) {
          CHECK(c < j->n);
          const air__jtok *k = &j->tok[c];
          CHECK(k->type == AIR__JSON_STR && k->size == 0 && k->next == c + 1);
          CHECK(ext_start(j, c) >= at && ext_end(j, c) <= t->end - 1);
          gap(w->js, at, ext_start(j, c), m ? ',' : 0);
          check_str(w, c);
          check_key(w, i, c);
          at = ext_end(j, c);
          c++;
          CHECK(c < j->n);
          gap(w->js, at, ext_start(j, c), ':');
        } else {
          CHECK(air__json_at(j, i, m) == c);
          CHECK(c < j->n);
          gap(w->js, at, ext_start(j, c), m ? ',' : 0);
        }
        int next = check_tree(w, c, at, t->end - 1, depth + 1);
        at = ext_end(j, c);
        c = next;
      }
      gap(w->js, at, t->end - 1, 0);
      CHECK(c == t->next);
      if (!obj) CHECK(air__json_at(j, i, t->size) == -1);
      return c;
    }
    case AIR__JSON_STR:
      check_str(w, i);
      return i + 1;
    case AIR__JSON_NUM: {
      const char *p = w->js + t->start;
      CHECK(t->end > t->start && (*p == '-' || (*p >= '0' && *p <= '9')));
      for (int k = t->start; k < t->end; k++)
        CHECK(strchr("0123456789+-.eE", w->js[k]) != NULL && w->js[k]);
      return i + 1;
    }
    case AIR__JSON_TRUE:
      CHECK(raw_is(w, i, "true"));
      return i + 1;
    case AIR__JSON_FALSE:
      CHECK(raw_is(w, i, "false"));
      return i + 1;
    case AIR__JSON_NULL:
      CHECK(raw_is(w, i, "null"));
      return i + 1;
    default:
      abort();
  }
}

/* Token i and jansson's value v are the same tree. */
static void same_tree(walk *w, int i, const json_t *v) {
  const air__json *j = w->j;
  const air__jtok *t = &j->tok[i];
  switch (t->type) {
    case AIR__JSON_OBJ: {
      CHECK(json_is_object(v));
      /* Fewer in jansson when keys repeat (the last one wins there). */
      CHECK(json_object_size(v) <= (size_t)t->size);
      if (json_object_size(v) != (size_t)t->size) return;
      for (int c = i + 1; c < t->next; c = j->tok[c + 1].next) {
        check_str(w, c); /* decodes the key into w->s */
        /* An empty key may have left the buffer unallocated. */
        const json_t *m = json_object_getn(v, w->s.n ? w->s.p : "", w->s.n);
        CHECK(m != NULL);
        same_tree(w, c + 1, m);
      }
      return;
    }
    case AIR__JSON_ARR: {
      CHECK(json_is_array(v) && json_array_size(v) == (size_t)t->size);
      int c = i + 1;
      for (size_t k = 0; k < json_array_size(v); k++) {
        same_tree(w, c, json_array_get(v, k));
        c = j->tok[c].next;
      }
      return;
    }
    case AIR__JSON_STR:
      check_str(w, i);
      CHECK(json_is_string(v) && json_string_length(v) == w->s.n);
      CHECK(w->s.n == 0 || memcmp(json_string_value(v), w->s.p, w->s.n) == 0);
      return;
    case AIR__JSON_NUM: {
      int64_t x;
      CHECK(json_is_number(v));
      if (json_is_integer(v))
        CHECK(air__json_int(j, i, &x) && x == json_integer_value(v));
      else
        CHECK(!air__json_int(j, i, &x));
      return;
    }
    case AIR__JSON_TRUE:
      CHECK(json_is_true(v));
      return;
    case AIR__JSON_FALSE:
      CHECK(json_is_false(v));
      return;
    case AIR__JSON_NULL:
      CHECK(json_is_null(v));
      return;
    default:
      abort();
  }
}

/* True when some object key decodes to bytes with a NUL (\u0000), which
 * jansson refuses even with JSON_ALLOW_NUL. */
static bool nul_in_key(walk *w) {
  const air__json *j = w->j;
  for (int i = 0; i < j->n; i++) {
    if (j->tok[i].type != AIR__JSON_OBJ) continue;
    for (int c = i + 1; c < j->tok[i].next; c = j->tok[c + 1].next) {
      check_str(w, c);
      if (w->s.n && memchr(w->s.p, '\0', w->s.n) != NULL) return true;
    }
  }
  return false;
}

/* True when jansson and json.c are meant to agree on this text. */
static bool comparable(const uint8_t *d, size_t n) {
  size_t brackets = 0;
  size_t digits = 0;
  for (size_t i = 0; i < n;) {
    uint8_t c = d[i];
    if (c >= 0x80) {
      size_t k = air__utf8_seq(d + i, n - i);
      if (k == 0) return false;
      i += k;
      digits = 0;
      continue;
    }
    if (c == 0) return false;
    if (c == '[' || c == '{') brackets++;
    digits = c >= '0' && c <= '9' ? digits + 1 : 0;
    if (digits >= 16) return false;
    if (c == '\\' && n - i >= 4 && d[i + 1] == 'u' &&
        (d[i + 2] | 0x20) == 'd' && strchr("89abcdefABCDEF", d[i + 3]) &&
        d[i + 3] != 0)
      return false;
    if (c == 'e' || c == 'E') {
      size_t k = i + 1;
      if (k < n && (d[k] == '+' || d[k] == '-')) k++;
      size_t m = 0;
      while (k + m < n && d[k + m] >= '0' && d[k + m] <= '9') m++;
      if (m >= 3) return false;
    }
    i++;
  }
  return brackets <= AIR__JSON_MAX_DEPTH;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *js = (const char *)data;
  air__json j;
  int rc = air__json_parse(&j, js, size);
  CHECK(rc == 0 || rc == AIR_EPARSE || rc == AIR_ETOOBIG);
  if (rc != 0) CHECK(j.n == 0 && j.tok == j.inline_tok);
  /* The token-free validator agrees (it has no token limit). */
  int vrc = air__json_validate(js, size);
  CHECK(rc == AIR_ETOOBIG ? (vrc == 0 || vrc == AIR_EPARSE) : vrc == rc);

  walk w = {.j = &j, .js = js};
  air__buf_init(&w.s, (size_t)1 << 26);
  if (rc == 0) {
    CHECK(j.n >= 1 && j.n <= AIR__MAX_JSON_TOKENS);
    CHECK(j.n > AIR__JSON_INLINE_TOKENS || j.tok == j.inline_tok);
    gap(js, 0, ext_start(&j, 0), 0);
    gap(js, ext_end(&j, 0), (int)size, 0);
    CHECK(check_tree(&w, 0, 0, (int)size, 1) == j.n);
    CHECK(air__json_skip(&j, -1) == j.n && air__json_skip(&j, j.n) == j.n);
    CHECK(air__json_is_null(&j, -1) && air__json_is_null(&j, j.n));
    CHECK(!air__json_is_obj(&j, j.n) && air__json_get(&j, -1, "") == -1);
  }

  if (rc != AIR_ETOOBIG && comparable(data, size)) {
    json_error_t err;
    json_t *v = json_loadb(js, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
    CHECK((v != NULL) == (rc == 0) || (v == NULL && nul_in_key(&w)));
    if (v != NULL) same_tree(&w, 0, v);
    json_decref(v);
  }
  air__buf_cleanup(&w.s);
  air__json_cleanup(&j);
  return 0;
}
