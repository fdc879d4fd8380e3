/*
 * Unit tests for src/stream/json.c: the hot-path JSON tokenizer and the
 * helpers that walk its tokens.
 *
 * Every document is parsed from an exact-size heap copy (parse()), so that
 * a read past len is an ASan error in the sanitizer build, and a prefix of a
 * longer text is parsed to show that len alone bounds the input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "airetry.h"
#include "json.h"

/* ---- helpers ------------------------------------------------------------- */

/* An exact-size copy of the first n bytes of text, kept for the test. */
typedef struct doc {
  air__json j;
  char *text;
  size_t n;
  int rc;
} doc;

static void parse_n(doc *d, const char *text, size_t n) {
  d->text = malloc(n ? n : 1);
  assert_non_null(d->text);
  if (n) memcpy(d->text, text, n);
  d->n = n;
  d->rc = air__json_parse(&d->j, d->text, n);
}

static void parse(doc *d, const char *text) {
  parse_n(d, text, strlen(text));
}

static void done(doc *d) {
  air__json_cleanup(&d->j);
  assert_int_equal(d->j.n, 0);
  assert_ptr_equal(d->j.tok, d->j.inline_tok);
  free(d->text);
  d->text = NULL;
}

/* Parses text and expects rc; on failure no tokens and no memory remain. */
static void expect_rc(const char *text, size_t n, int rc) {
  doc d;
  parse_n(&d, text, n);
  if (d.rc != rc) {
    fprintf(stderr, "  input (%zu bytes): \"", n);
    for (size_t i = 0; i < n && i < 80; i++) {
      unsigned char c = (unsigned char)text[i];
      if (c >= 0x20 && c < 0x7f)
        fputc(c, stderr);
      else
        fprintf(stderr, "\\x%02x", c);
    }
    fprintf(stderr, "\"%s\n", n > 80 ? "..." : "");
  }
  assert_int_equal(d.rc, rc);
  /* The validator (no tokens) agrees wherever the token limit is not the
   * reason: it has none. */
  int v = air__json_validate(text, n);
  if (rc == AIR_ETOOBIG)
    assert_true(v == 0 || v == AIR_EPARSE);
  else
    assert_int_equal(v, rc);
  if (rc != 0) {
    assert_int_equal(d.j.n, 0);
    assert_ptr_equal(d.j.tok, d.j.inline_tok);
  }
  done(&d);
}

#define ACCEPT(lit) expect_rc((lit), sizeof(lit) - 1, 0)
#define REJECT(lit) expect_rc((lit), sizeof(lit) - 1, AIR_EPARSE)

/* Token i has this type, raw text, size and next. */
static void tok_is(const doc *d, int i, int type, const char *raw, int size,
                   int next) {
  assert_true(i >= 0 && i < d->j.n);
  const air__jtok *t = &d->j.tok[i];
  if (t->type != type || t->size != size || t->next != next)
    fprintf(stderr, "  token %d: type %d size %d next %d\n", i, t->type,
            t->size, t->next);
  assert_int_equal(t->type, type);
  size_t n;
  const char *p = air__json_raw(&d->j, i, &n);
  assert_int_equal(n, strlen(raw));
  assert_memory_equal(p, raw, n);
  assert_int_equal(t->size, size);
  assert_int_equal(t->next, next);
  assert_int_equal(air__json_skip(&d->j, i), next);
}

/* "[0,1,...,count-1]" in a heap buffer of *n bytes. */
static char *int_array(int count, size_t *n) {
  size_t cap = 16 + (size_t)count * 8;
  char *s = malloc(cap);
  assert_non_null(s);
  size_t at = 0;
  s[at++] = '[';
  for (int i = 0; i < count; i++)
    at += (size_t)snprintf(s + at, cap - at, "%s%d", i ? "," : "", i);
  s[at++] = ']';
  *n = at;
  return s;
}

/* ---- token structure ----------------------------------------------------- */

static const char NESTED[] =
    "{\"a\":[1,{\"b\":null},\"x\\\"y\"],\"c\":{},\"d\":true,\"e\":[]}";

/* The tokens of NESTED; tok_is() checks start/end through the raw text. */
static void check_nested(const doc *d) {
  assert_int_equal(d->rc, 0);
  assert_int_equal(d->j.n, 14);
  tok_is(d, 0, AIR__JSON_OBJ, NESTED, 4, 14);
  tok_is(d, 1, AIR__JSON_STR, "a", 0, 2);
  tok_is(d, 2, AIR__JSON_ARR, "[1,{\"b\":null},\"x\\\"y\"]", 3, 8);
  tok_is(d, 3, AIR__JSON_NUM, "1", 0, 4);
  tok_is(d, 4, AIR__JSON_OBJ, "{\"b\":null}", 1, 7);
  tok_is(d, 5, AIR__JSON_STR, "b", 0, 6);
  tok_is(d, 6, AIR__JSON_NULL, "null", 0, 7);
  tok_is(d, 7, AIR__JSON_STR, "x\\\"y", 0, 8);
  tok_is(d, 8, AIR__JSON_STR, "c", 0, 9);
  tok_is(d, 9, AIR__JSON_OBJ, "{}", 0, 10);
  tok_is(d, 10, AIR__JSON_STR, "d", 0, 11);
  tok_is(d, 11, AIR__JSON_TRUE, "true", 0, 12);
  tok_is(d, 12, AIR__JSON_STR, "e", 0, 13);
  tok_is(d, 13, AIR__JSON_ARR, "[]", 0, 14);
}

static void test_structure(void **state) {
  (void)state;
  doc d;
  parse(&d, NESTED);
  check_nested(&d);
  /* start/end are offsets: a string's exclude its quotes. */
  assert_int_equal(d.j.tok[0].start, 0);
  assert_int_equal(d.j.tok[0].end, (int)strlen(NESTED));
  assert_int_equal(d.j.tok[1].start, 2);
  assert_int_equal(d.j.tok[1].end, 3);
  assert_int_equal(d.j.tok[2].start, 5);
  done(&d);
}

/* The same document with white space everywhere it may go: same tokens
 * (the containers' raw text then differs, so only scalars are compared). */
static void test_structure_white_space(void **state) {
  (void)state;
  static const char spaced[] =
      " \t\r\n{ \"a\" :\n[ 1 ,\t{\"b\"\r:null } , \"x\\\"y\" ] , \"c\":{ } ,"
      "\"d\" : true,\"e\":[\n] }\n ";
  doc d;
  parse(&d, spaced);
  assert_int_equal(d.rc, 0);
  assert_int_equal(d.j.n, 14);
  static const int types[] = {AIR__JSON_OBJ,  AIR__JSON_STR, AIR__JSON_ARR,
                              AIR__JSON_NUM,  AIR__JSON_OBJ, AIR__JSON_STR,
                              AIR__JSON_NULL, AIR__JSON_STR, AIR__JSON_STR,
                              AIR__JSON_OBJ,  AIR__JSON_STR, AIR__JSON_TRUE,
                              AIR__JSON_STR,  AIR__JSON_ARR};
  static const int sizes[] = {4, 0, 3, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  static const int nexts[] = {14, 2, 8, 4, 7, 6, 7, 8, 9, 10, 11, 12, 13, 14};
  for (int i = 0; i < 14; i++) {
    assert_int_equal(d.j.tok[i].type, types[i]);
    assert_int_equal(d.j.tok[i].size, sizes[i]);
    assert_int_equal(d.j.tok[i].next, nexts[i]);
  }
  tok_is(&d, 3, AIR__JSON_NUM, "1", 0, 4);
  tok_is(&d, 6, AIR__JSON_NULL, "null", 0, 7);
  tok_is(&d, 7, AIR__JSON_STR, "x\\\"y", 0, 8);
  tok_is(&d, 9, AIR__JSON_OBJ, "{ }", 0, 10);
  tok_is(&d, 13, AIR__JSON_ARR, "[\n]", 0, 14);
  /* The top value's bytes: from '{' to '}', surrounding space excluded. */
  size_t n;
  const char *p = air__json_raw(&d.j, 0, &n);
  assert_ptr_equal(p, d.text + 4);
  assert_int_equal(n, strlen(spaced) - 4 - 2);
  done(&d);
}

static void test_scalars_at_top(void **state) {
  (void)state;
  static const struct {
    const char *text;
    int type;
    const char *raw;
  } cases[] = {
      {"0", AIR__JSON_NUM, "0"},
      {"-0", AIR__JSON_NUM, "-0"},
      {" 12 ", AIR__JSON_NUM, "12"},
      {"-1.25e+10", AIR__JSON_NUM, "-1.25e+10"},
      {"0.5E-3", AIR__JSON_NUM, "0.5E-3"},
      {"1e5", AIR__JSON_NUM, "1e5"},
      {"\"\"", AIR__JSON_STR, ""},
      {"\"hi\"", AIR__JSON_STR, "hi"},
      {"true", AIR__JSON_TRUE, "true"},
      {"false", AIR__JSON_FALSE, "false"},
      {"\n\tnull\r ", AIR__JSON_NULL, "null"},
  };
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    doc d;
    parse(&d, cases[c].text);
    assert_int_equal(d.rc, 0);
    assert_int_equal(d.j.n, 1);
    tok_is(&d, 0, cases[c].type, cases[c].raw, 0, 1);
    done(&d);
  }
}

/* ---- helpers over the tokens --------------------------------------------- */

static void test_get_at_skip(void **state) {
  (void)state;
  doc d;
  parse(&d, NESTED);
  assert_int_equal(d.rc, 0);
  const air__json *j = &d.j;
  assert_int_equal(air__json_get(j, 0, "a"), 2);
  assert_int_equal(air__json_get(j, 0, "c"), 9);
  assert_int_equal(air__json_get(j, 0, "d"), 11);
  assert_int_equal(air__json_get(j, 0, "e"), 13);
  assert_int_equal(air__json_get(j, 0, "b"), -1); /* nested, not a member */
  assert_int_equal(air__json_get(j, 0, "aa"), -1);
  assert_int_equal(air__json_get(j, 0, ""), -1);
  assert_int_equal(air__json_get(j, 4, "b"), 6);
  assert_int_equal(air__json_get(j, 9, "a"), -1); /* empty object */
  assert_int_equal(air__json_get(j, 2, "a"), -1); /* an array */
  assert_int_equal(air__json_get(j, 1, "a"), -1); /* a key */
  assert_int_equal(air__json_get(j, -1, "a"), -1);
  assert_int_equal(air__json_get(j, 14, "a"), -1);
  assert_int_equal(air__json_getn(j, 0, "abc", 1), 2);

  assert_int_equal(air__json_at(j, 2, 0), 3);
  assert_int_equal(air__json_at(j, 2, 1), 4);
  assert_int_equal(air__json_at(j, 2, 2), 7);
  assert_int_equal(air__json_at(j, 2, 3), -1);
  assert_int_equal(air__json_at(j, 2, -1), -1);
  assert_int_equal(air__json_at(j, 13, 0), -1); /* empty array */
  assert_int_equal(air__json_at(j, 0, 0), -1);  /* an object */
  assert_int_equal(air__json_at(j, -1, 0), -1);

  assert_int_equal(air__json_skip(j, 0), 14);
  assert_int_equal(air__json_skip(j, 2), 8);
  assert_int_equal(air__json_skip(j, -1), 14);
  assert_int_equal(air__json_skip(j, 14), 14);

  /* Out of range: false, but null for is_null (a missing member). */
  for (int i = -2; i <= 15; i += 17) {
    assert_false(air__json_is_obj(j, i));
    assert_false(air__json_is_arr(j, i));
    assert_false(air__json_is_str(j, i));
    assert_true(air__json_is_null(j, i));
    assert_false(air__json_eq(j, i, "a"));
    size_t n = 7;
    assert_string_equal(air__json_raw(j, i, &n), "");
    assert_int_equal(n, 0);
  }
  assert_true(air__json_is_obj(j, 0));
  assert_true(air__json_is_arr(j, 2));
  assert_true(air__json_is_str(j, 7));
  assert_true(air__json_is_null(j, 6));
  assert_false(air__json_is_null(j, 3));
  assert_false(air__json_is_null(j, 11));
  assert_true(air__json_eq(j, 1, "a"));
  assert_false(air__json_eq(j, 1, "ab"));
  assert_false(air__json_eq(j, 1, ""));
  assert_true(air__json_eq(j, 7, "x\\\"y")); /* raw bytes */
  assert_false(air__json_eq(j, 3, "1"));     /* not a string */
  done(&d);
}

static void test_get_keys(void **state) {
  (void)state;
  doc d;
  /* Duplicates: the first wins; keys compare raw; values of every kind are
   * jumped over; "" is a key like any other; a same-length, same-first-byte
   * key is not taken for another. */
  parse(&d,
        "{\"k\":{\"k\":[1,[2,{\"x\":3}]]},\"ab\":1,\"ac\":2,\"\":3,"
        "\"q\\\"\":4,\"k\":5,\"z\":\"v\"}");
  assert_int_equal(d.rc, 0);
  const air__json *j = &d.j;
  int k = air__json_get(j, 0, "k");
  assert_true(air__json_is_obj(j, k));
  assert_int_equal(k, 2);
  int ac = air__json_get(j, 0, "ac");
  assert_true(ac > 0);
  size_t n;
  assert_memory_equal(air__json_raw(j, ac, &n), "2", 1);
  assert_memory_equal(air__json_raw(j, air__json_get(j, 0, ""), &n), "3", 1);
  assert_memory_equal(air__json_raw(j, air__json_get(j, 0, "q\\\""), &n), "4",
                      1);
  assert_int_equal(air__json_get(j, 0, "q\""), -1);
  assert_true(air__json_eq(j, air__json_get(j, 0, "z"), "v"));
  assert_int_equal(air__json_get(j, 0, "x"), -1);
  assert_int_equal(air__json_get(j, 0, "a"), -1);
  /* Every value's next is where the next key is. */
  assert_int_equal(j->tok[0].size, 7);
  int seen = 0;
  for (int i = 1; i < j->n; i = j->tok[i + 1].next) {
    assert_int_equal(j->tok[i].type, AIR__JSON_STR);
    assert_int_equal(j->tok[i].next, i + 1);
    seen++;
  }
  assert_int_equal(seen, 7);
  done(&d);
}

static void test_int(void **state) {
  (void)state;
  doc d;
  parse(&d,
        "[0,-7,9223372036854775807,9223372036854775808,1.5,1e3,true,\"1\","
        "null,-0]");
  assert_int_equal(d.rc, 0);
  const air__json *j = &d.j;
  int64_t v = 42;
  assert_true(air__json_int(j, 1, &v));
  assert_int_equal(v, 0);
  assert_true(air__json_int(j, 2, &v));
  assert_int_equal(v, -7);
  assert_true(air__json_int(j, 3, &v));
  assert_true(v == INT64_MAX);
  v = 42;
  assert_false(air__json_int(j, 4, &v)); /* over INT64_MAX */
  assert_false(air__json_int(j, 5, &v)); /* fraction */
  assert_false(air__json_int(j, 6, &v)); /* exponent */
  assert_false(air__json_int(j, 7, &v)); /* true */
  assert_false(air__json_int(j, 8, &v)); /* a string */
  assert_false(air__json_int(j, 9, &v)); /* null */
  assert_false(air__json_int(j, -1, &v));
  assert_int_equal(v, 42);
  assert_true(air__json_int(j, 10, &v));
  assert_int_equal(v, 0);
  done(&d);
}

/* ---- accepted and rejected documents ------------------------------------- */

static void test_accept(void **state) {
  (void)state;
  ACCEPT("[]");
  ACCEPT("{}");
  ACCEPT("[[],{},[[]],{\"a\":{}}]");
  ACCEPT(" [ 1 , 2 ] ");
  ACCEPT("[-0,0.0,1E9,1e-9,-12.5e+3,123456789012345678901234567890]");
  ACCEPT("[true,false,null]");
  ACCEPT("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD83D\\uDE00\\uABCD\\u0000\"");
  ACCEPT("\"\xc3\xa9\xf0\x9f\x98\x80 \x7f\""); /* UTF-8 and DEL as they are */
  ACCEPT("\"\xff\xfe\"");                      /* UTF-8 is not checked */
  ACCEPT("{\"a\":1,\"a\":2}");                 /* duplicate keys */
  ACCEPT("{\"\":\"\"}");
  /* A string longer than the 8-byte steps, stops at every offset. */
  ACCEPT("\"abcdefghijklmnopqrstuvwxyz0123456789\"");
  ACCEPT(
      "[\"abcdefg\\n\",\"abcdefgh\\n\",\"a\\nbcdefgh\",\"abcdefghijklmno\"]");
}

static void test_reject(void **state) {
  (void)state;
  /* Nothing, or more than one value. */
  REJECT("");
  REJECT(" \t\r\n");
  REJECT("[1] x");
  REJECT("1 2");
  REJECT("[1]]");
  REJECT("{}{}");
  REJECT("{} []");
  REJECT("\"a\"\"b\"");
  REJECT("1\x0c");       /* form feed is not white space */
  REJECT("\xc2\xa0[1]"); /* nor is U+00A0 */
  expect_rc("1\0", 2, AIR_EPARSE);
  /* Numbers. */
  REJECT("01");
  REJECT("-01");
  REJECT("00");
  REJECT("1.");
  REJECT("1.e5");
  REJECT("-");
  REJECT("[-]");
  REJECT("1e");
  REJECT("1e+");
  REJECT("1E-");
  REJECT(".5");
  REJECT("+1");
  REJECT("0x1");
  REJECT("1.2.3");
  REJECT("--1");
  REJECT("- 1");
  REJECT("NaN");
  REJECT("Infinity");
  REJECT("-Infinity");
  REJECT("[1e5e5]");
  /* Literals. */
  REJECT("tru");
  REJECT("nul");
  REJECT("fals");
  REJECT("True");
  REJECT("NULL");
  REJECT("nulll");
  REJECT("truefalse");
  REJECT("[nul]");
  REJECT("undefined");
  /* Strings. */
  REJECT("\"abc");
  REJECT("\"abc\\\"");
  REJECT("\"abcdefghijklmnopqrstuvwxyz");
  REJECT("\"a\x01z\"");
  REJECT("\"a\tz\"");
  REJECT("\"a\nz\"");
  REJECT("\"abcdefghijk\x1fz\"");
  expect_rc("\"a\0z\"", 5, AIR_EPARSE);
  REJECT("\"\\x\"");
  REJECT("\"\\a\"");
  REJECT("\"\\U0041\"");
  REJECT("\"\\'\"");
  REJECT("\"\\u12\"");
  REJECT("\"\\u12g4\"");
  REJECT("\"\\u\"");
  REJECT("\"\\");
  REJECT("'a'");
  /* Brackets and separators. */
  REJECT("[1");
  REJECT("[");
  REJECT("{");
  REJECT("[1}");
  REJECT("{\"a\":1]");
  REJECT("[[1]");
  REJECT("]");
  REJECT("}");
  REJECT("{\"a\"}");
  REJECT("{\"a\":}");
  REJECT("{\"a\":1,}");
  REJECT("{\"a\" 1}");
  REJECT("{\"a\"::1}");
  REJECT("{\"a\":1 \"b\":2}");
  REJECT("{\"a\":1;\"b\":2}");
  REJECT("[1,]");
  REJECT("[,1]");
  REJECT("[,]");
  REJECT("[1,,2]");
  REJECT("[1 2]");
  REJECT("[1:2]");
  REJECT("{,}");
  REJECT("{1:2}");
  REJECT("{null:2}");
  REJECT("{\"a\":1,2}");
  REJECT("{[]:1}");
  REJECT("{'a':1}");
  REJECT("{a:1}");
  REJECT(",");
  REJECT(":");
}

/* Depth: nesting AIR__JSON_MAX_DEPTH deep parses, one more does not. */
static void nest(int depth, bool objects, int rc) {
  size_t n = 0;
  char *s = malloc((size_t)depth * 5 + 2);
  assert_non_null(s);
  for (int i = 0; i < depth; i++) {
    if (objects) {
      memcpy(s + n, "{\"\":", 4);
      n += 4;
    } else {
      s[n++] = '[';
    }
  }
  s[n++] = '0';
  for (int i = 0; i < depth; i++) s[n++] = objects ? '}' : ']';
  doc d;
  parse_n(&d, s, n);
  assert_int_equal(d.rc, rc);
  if (rc == 0) {
    assert_int_equal(d.j.n, objects ? 2 * depth + 1 : depth + 1);
    assert_int_equal(d.j.tok[0].next, d.j.n);
    assert_int_equal(d.j.tok[d.j.n - 1].type, AIR__JSON_NUM);
  }
  done(&d);
  free(s);
}

static void test_depth(void **state) {
  (void)state;
  assert_int_equal(AIR__JSON_MAX_DEPTH, 512);
  nest(1, false, 0);
  nest(512, false, 0);
  nest(513, false, AIR_EPARSE);
  nest(512, true, 0);
  nest(513, true, AIR_EPARSE);
  nest(5000, false, AIR_EPARSE);
  /* Depth is nesting, not the count of containers met: many siblings at a
   * shallow level are fine. */
  size_t n = 0;
  char *s = malloc(2 + 600 * 3);
  assert_non_null(s);
  s[n++] = '[';
  for (int i = 0; i < 600; i++) {
    if (i) s[n++] = ',';
    s[n++] = '[';
    s[n++] = ']';
  }
  s[n++] = ']';
  expect_rc(s, n, 0);
  free(s);
}

/* ---- sizes: the inline array, the heap, the token limit ------------------ */

static void test_inline_and_heap(void **state) {
  (void)state;
  /* AIR__JSON_INLINE_TOKENS tokens stay inline, one more goes to the heap;
   * much bigger documents grow it several times. */
  static const int counts[] = {AIR__JSON_INLINE_TOKENS - 1,
                               AIR__JSON_INLINE_TOKENS, 1000, 20000};
  for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
    size_t n;
    char *s = int_array(counts[c], &n);
    doc d;
    parse_n(&d, s, n);
    free(s);
    assert_int_equal(d.rc, 0);
    assert_int_equal(d.j.n, counts[c] + 1);
    if (d.j.n <= AIR__JSON_INLINE_TOKENS)
      assert_ptr_equal(d.j.tok, d.j.inline_tok);
    else
      assert_ptr_not_equal(d.j.tok, d.j.inline_tok);
    assert_int_equal(d.j.tok[0].size, counts[c]);
    assert_int_equal(d.j.tok[0].next, d.j.n);
    int last = air__json_at(&d.j, 0, counts[c] - 1);
    assert_int_equal(last, counts[c]);
    char want[16];
    snprintf(want, sizeof(want), "%d", counts[c] - 1);
    size_t rn;
    const char *raw = air__json_raw(&d.j, last, &rn);
    assert_int_equal(rn, strlen(want));
    assert_memory_equal(raw, want, rn);
    done(&d);
  }
  /* A failure after the move to the heap frees it (ASan / valgrind). */
  size_t n;
  char *s = int_array(500, &n);
  s[n - 1] = '}';
  expect_rc(s, n, AIR_EPARSE);
  free(s);
  /* The struct lives on the stack of every decode. */
  assert_true(sizeof(air__json) <= 2560);
}

static void test_token_limit(void **state) {
  (void)state;
  /* AIR__MAX_JSON_TOKENS tokens parse: the array and its elements. */
  size_t n;
  char *s = int_array(AIR__MAX_JSON_TOKENS - 1, &n);
  doc d;
  parse_n(&d, s, n);
  free(s);
  assert_int_equal(d.rc, 0);
  assert_int_equal(d.j.n, AIR__MAX_JSON_TOKENS);
  done(&d);
  /* One more does not. */
  s = int_array(AIR__MAX_JSON_TOKENS, &n);
  expect_rc(s, n, AIR_ETOOBIG);
  /* The limit is reported when it is crossed, whatever follows. */
  s[n - 1] = '}';
  expect_rc(s, n, AIR_ETOOBIG);
  free(s);
  /* An object's keys count too. */
  s = malloc((size_t)AIR__MAX_JSON_TOKENS * 8);
  assert_non_null(s);
  n = 0;
  s[n++] = '{';
  for (int i = 0; i < AIR__MAX_JSON_TOKENS / 2; i++) {
    if (i) s[n++] = ',';
    memcpy(s + n, "\"\":0", 4);
    n += 4;
  }
  s[n++] = '}';
  expect_rc(s, n, AIR_ETOOBIG);
  /* The validator has no token limit: a document of any token count is
   * judged by its grammar alone. */
  assert_int_equal(air__json_validate(s, n), 0);
  free(s);
}

/* ---- len is the end ------------------------------------------------------ */

/* The first n bytes of text parse with rc, while the whole text parses
 * with whole_rc: only len can explain the difference. */
static void prefix(const char *text, size_t n, int rc, int whole_rc) {
  expect_rc(text, strlen(text), whole_rc);
  expect_rc(text, n, rc);
}

static void test_len_honoured(void **state) {
  (void)state;
  prefix("[12]", 3, AIR_EPARSE, 0);   /* "[12" */
  prefix("[12]", 2, AIR_EPARSE, 0);   /* "[1" */
  prefix("12", 1, 0, 0);              /* "1" */
  prefix("1.5", 2, AIR_EPARSE, 0);    /* "1." */
  prefix("1e5", 2, AIR_EPARSE, 0);    /* "1e" */
  prefix("-1", 1, AIR_EPARSE, 0);     /* "-" */
  prefix("true", 3, AIR_EPARSE, 0);   /* "tru" */
  prefix("false", 4, AIR_EPARSE, 0);  /* "fals" */
  prefix("null", 3, AIR_EPARSE, 0);   /* "nul" */
  prefix("\"ab\"", 3, AIR_EPARSE, 0); /* "\"ab" */
  prefix("\"\\u1234\"", 6, AIR_EPARSE, 0);
  prefix("\"\\u1234\"", 2, AIR_EPARSE, 0);
  prefix("\"abcdefghijklmnopqrstuvwxyz\"", 27, AIR_EPARSE, 0);
  prefix("\"abcdefghijklmnopqrstuvwxyz\"", 9, AIR_EPARSE, 0);
  prefix("{\"a\":1}xyz", 7, 0, AIR_EPARSE);
  prefix("[1] 2", 4, 0, AIR_EPARSE);
  prefix("{\"a\":1}", 6, AIR_EPARSE, 0);
  prefix("{\"a\":1}", 4, AIR_EPARSE, 0);
  prefix("{\"a\":1}", 0, AIR_EPARSE, 0);
  /* The tokens of a prefix end inside it. */
  doc d;
  parse_n(&d, "[1,22]333", 6);
  assert_int_equal(d.rc, 0);
  assert_int_equal(d.j.n, 3);
  tok_is(&d, 2, AIR__JSON_NUM, "22", 0, 3);
  assert_int_equal(d.j.tok[0].end, 6);
  done(&d);
}

/* Every byte value at every offset of a string body, so that each lane of
 * the 8-byte scan and the byte-wise tail meet each class of byte. */
static void test_string_bytes(void **state) {
  (void)state;
  char s[64];
  for (size_t pos = 0; pos < 24; pos++) {
    for (int b = 0; b < 256; b++) {
      /* "aaa<b>aaaa...": 30 bytes of body, then the closing quote. */
      s[0] = '"';
      memset(s + 1, 'a', 30);
      s[1 + pos] = (char)b;
      s[31] = '"';
      int want = b < 0x20 || b == '"' || b == '\\' ? AIR_EPARSE : 0;
      expect_rc(s, 32, want);
    }
    /* A closing quote there: the string ends exactly there. */
    memset(s, ' ', sizeof(s));
    s[0] = '"';
    memset(s + 1, 'a', pos);
    s[1 + pos] = '"';
    doc d;
    parse_n(&d, s, 40);
    assert_int_equal(d.rc, 0);
    assert_int_equal(d.j.tok[0].start, 1);
    assert_int_equal(d.j.tok[0].end, 1 + (int)pos);
    done(&d);
    /* An escape there: valid ones pass, others fail, in any lane. */
    static const char *const escapes[] = {
        "\\n",     "\\\"",    "\\\\",    "\\/",     "\\u00aF", "\\x", "\\u 123",
        "\\ug123", "\\u1g23", "\\u12g3", "\\u123g", "\\\x01",  "\\ "};
    for (size_t k = 0; k < sizeof(escapes) / sizeof(escapes[0]); k++) {
      size_t en = strlen(escapes[k]);
      s[0] = '"';
      memset(s + 1, 'a', 40);
      memcpy(s + 1 + pos, escapes[k], en);
      s[41] = '"';
      expect_rc(s, 42, k < 5 ? 0 : AIR_EPARSE);
    }
  }
}

/* ---- strings --------------------------------------------------------------
 */

/* The decoded value of the single string document text. */
static void str_is(const char *text, const char *want, size_t want_n) {
  doc d;
  parse(&d, text);
  assert_int_equal(d.rc, 0);
  air__buf out;
  air__buf_init(&out, 1024);
  assert_int_equal(air__json_str(&d.j, 0, &out), 0);
  assert_int_equal(out.n, want_n);
  if (want_n) assert_memory_equal(out.p, want, want_n);
  const char *p;
  size_t n;
  bool plain = air__json_plain(&d.j, 0, &p, &n);
  assert_int_equal(plain, memchr(text, '\\', strlen(text)) == NULL);
  if (plain) {
    assert_int_equal(n, want_n);
    assert_ptr_equal(p, d.text + 1);
  }
  air__buf_cleanup(&out);
  done(&d);
}

#define STR_IS(text, want) str_is((text), (want), sizeof(want) - 1)

static void test_str(void **state) {
  (void)state;
  STR_IS("\"\"", "");
  STR_IS("\"plain text\"", "plain text");
  STR_IS("\"a\\nb\\tc\\\"d\\\\e\\/f\\bg\\fh\\ri\"", "a\nb\tc\"d\\e/f\bg\fh\ri");
  STR_IS("\"\\u0041\\u00e9\\u20AC\"", "A\xc3\xa9\xe2\x82\xac");
  STR_IS("\"\\uD83D\\uDE00\"", "\xf0\x9f\x98\x80");   /* a pair */
  STR_IS("\"\\ud83d\\ude00!\"", "\xf0\x9f\x98\x80!"); /* lower case */
  STR_IS("\"\\uD800x\"", "\xef\xbf\xbdx");            /* lone high */
  STR_IS("\"\\uDC00\"", "\xef\xbf\xbd");              /* lone low */
  STR_IS("\"\\uD800\\u0041\"",
         "\xef\xbf\xbd"
         "A"); /* high, not low */
  STR_IS("\"\\u0000\"", "\0");
  STR_IS("\"\xc3\xa9\"", "\xc3\xa9");

  doc d;
  parse(&d, "[1,\"s\"]");
  air__buf out;
  air__buf_init(&out, 16);
  assert_int_equal(air__json_str(&d.j, 1, &out), AIR_EINVAL);
  assert_int_equal(air__json_str(&d.j, -1, &out), AIR_EINVAL);
  assert_int_equal(air__json_str(&d.j, 0, &out), AIR_EINVAL);
  assert_int_equal(air__json_str(&d.j, 2, &out), 0);
  assert_int_equal(out.n, 1);
  const char *p;
  size_t n;
  assert_false(air__json_plain(&d.j, 1, &p, &n));
  air__buf_cleanup(&out);
  done(&d);
}

/* ---- reuse and real events ------------------------------------------------
 */

static void test_reuse(void **state) {
  (void)state;
  air__json j;
  char *s;
  size_t n;
  s = int_array(300, &n);
  assert_int_equal(air__json_parse(&j, s, n), 0);
  assert_ptr_not_equal(j.tok, j.inline_tok);
  air__json_cleanup(&j);
  assert_int_equal(air__json_parse(&j, "{}", 2), 0);
  assert_ptr_equal(j.tok, j.inline_tok);
  air__json_cleanup(&j);
  assert_int_equal(air__json_parse(&j, "{", 1), AIR_EPARSE);
  air__json_cleanup(&j);
  air__json_cleanup(&j); /* twice is harmless */
  free(s);
}

static void test_events(void **state) {
  (void)state;
  doc d;
  parse(&d,
        "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\","
        "\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{"
        "\"content\":\"tok \"},\"finish_reason\":null}]}");
  assert_int_equal(d.rc, 0);
  const air__json *j = &d.j;
  int choices = air__json_get(j, 0, "choices");
  assert_true(air__json_is_arr(j, choices));
  assert_int_equal(j->tok[choices].size, 1);
  int c = air__json_at(j, choices, 0);
  assert_true(air__json_is_obj(j, c));
  assert_true(air__json_is_null(j, air__json_get(j, c, "finish_reason")));
  assert_true(air__json_is_null(j, air__json_get(j, c, "usage")));
  int64_t v = -1;
  assert_true(air__json_int(j, air__json_get(j, c, "index"), &v));
  assert_int_equal(v, 0);
  int content = air__json_get(j, air__json_get(j, c, "delta"), "content");
  assert_true(air__json_eq(j, content, "tok "));
  assert_true(air__json_eq(j, air__json_get(j, 0, "model"), "m"));
  done(&d);

  parse(&d,
        "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
        "\"text_delta\",\"text\":\"Hi \\\"there\\\"\\n\"}}");
  assert_int_equal(d.rc, 0);
  int delta = air__json_get(&d.j, 0, "delta");
  assert_true(
      air__json_eq(&d.j, air__json_get(&d.j, delta, "type"), "text_delta"));
  air__buf out;
  air__buf_init(&out, 64);
  assert_int_equal(
      air__json_str(&d.j, air__json_get(&d.j, delta, "text"), &out), 0);
  assert_int_equal(out.n, 11);
  assert_memory_equal(out.p, "Hi \"there\"\n", 11);
  air__buf_cleanup(&out);
  done(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_structure),
      cmocka_unit_test(test_structure_white_space),
      cmocka_unit_test(test_scalars_at_top),
      cmocka_unit_test(test_get_at_skip),
      cmocka_unit_test(test_get_keys),
      cmocka_unit_test(test_int),
      cmocka_unit_test(test_accept),
      cmocka_unit_test(test_reject),
      cmocka_unit_test(test_depth),
      cmocka_unit_test(test_inline_and_heap),
      cmocka_unit_test(test_token_limit),
      cmocka_unit_test(test_len_honoured),
      cmocka_unit_test(test_string_bytes),
      cmocka_unit_test(test_str),
      cmocka_unit_test(test_reuse),
      cmocka_unit_test(test_events),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
