/*
 * Unit tests for src/config/yaml.c, the one YAML walker of the config loader
 * and the mock's script loader: loading (text checks, blank texts, libfyaml
 * problems with their positions), positions of nodes, aliases under a
 * budget, map and list iteration, kinds and scalar conversions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "yaml.h"

/* What the problem callback heard. */
typedef struct heard {
  int errors, warnings;
  air__yaml_loc first_error;
  char first_msg[256];
} heard;

static void on_problem(void *data, bool error, air__yaml_loc at,
                       const char *msg) {
  heard *h = data;
  if (!error) {
    h->warnings++;
    return;
  }
  if (h->errors++ == 0) {
    h->first_error = at;
    snprintf(h->first_msg, sizeof h->first_msg, "%s", msg);
  }
}

static air__yaml_result load(air__yaml_doc *d, const char *text, heard *h) {
  memset(h, 0, sizeof *h);
  return air__yaml_load(d, text, strlen(text), on_problem, h);
}

/* The value of top-level key name in d's root map, as written. */
static struct fy_node *get(air__yaml_walk *w, air__yaml_doc *d,
                           const char *name) {
  void *it = NULL;
  struct fy_node *k, *v;
  while (air__yaml_map_next(w, d->root, &it, &k, &v)) {
    size_t n;
    const char *s = air__yaml_scalar(k, &n);
    if (n == strlen(name) && memcmp(s, name, n) == 0) return v;
  }
  return NULL;
}

static air__yaml_walk walk(unsigned long max) {
  return (air__yaml_walk){.max_visits = max};
}

/* ---- loading ------------------------------------------------------------- */

static void loads_a_map(void **state) {
  (void)state;
  air__yaml_doc d;
  heard h;
  assert_int_equal(load(&d, "a: 1\nb: [x, y]\n", &h), AIR__YAML_OK);
  assert_true(air__yaml_is_map(d.root));
  assert_int_equal(air__yaml_count(d.root), 2);
  assert_int_equal(h.errors + h.warnings, 0);
  assert_int_equal(d.n_errors, 0);
  air__yaml_doc_cleanup(&d);
  assert_null(d.doc);
  air__yaml_doc_cleanup(&d); /* twice is harmless */
}

static void blank_texts_have_a_null_root(void **state) {
  (void)state;
  static const char *const blank[] = {"",
                                      "\n\n",
                                      "# only a comment\n",
                                      "---\n",
                                      "  \t\r\n# x\n...\n",
                                      "---\n# a\n...\n"};
  for (size_t i = 0; i < sizeof blank / sizeof blank[0]; i++) {
    air__yaml_doc d;
    heard h;
    assert_int_equal(load(&d, blank[i], &h), AIR__YAML_OK);
    assert_true(air__yaml_is_null(d.root));
    assert_int_equal(h.errors, 0);
    air__yaml_doc_cleanup(&d);
  }
}

static void text_is_checked_before_parsing(void **state) {
  (void)state;
  air__yaml_doc d;
  heard h;
  const char nul[] = "a: 1\nbb: x\0y\n";
  memset(&h, 0, sizeof h);
  assert_int_equal(air__yaml_load(&d, nul, sizeof nul - 1, on_problem, &h),
                   AIR__YAML_BAD_TEXT);
  assert_string_equal(d.why, "contains a NUL byte");
  assert_int_equal(d.bad_at.line, 2);
  assert_int_equal(d.bad_at.col, 6);
  assert_null(d.root);
  air__yaml_doc_cleanup(&d);

  const char utf8[] = "a: \xc3\xa9\nb: \xc3(\n";
  assert_int_equal(air__yaml_load(&d, utf8, sizeof utf8 - 1, on_problem, &h),
                   AIR__YAML_BAD_TEXT);
  assert_string_equal(d.why, "is not valid UTF-8");
  assert_int_equal(d.bad_at.line, 2);
  assert_int_equal(d.bad_at.col, 4);
  assert_int_equal(h.errors + h.warnings, 0); /* libfyaml never saw it */
  air__yaml_doc_cleanup(&d);
}

static void syntax_errors_reach_the_callback(void **state) {
  (void)state;
  air__yaml_doc d;
  heard h;
  assert_int_equal(load(&d, "a: 1\nb: [1, 2\n", &h), AIR__YAML_SYNTAX);
  assert_true(h.errors >= 1);
  assert_int_equal(d.n_errors, (size_t)h.errors);
  assert_true(h.first_error.line >= 2);
  assert_true(h.first_msg[0] != '\0');
  assert_null(d.root);
  air__yaml_doc_cleanup(&d);
  /* A NULL callback is allowed. */
  assert_int_equal(air__yaml_load(&d, "a: [", 4, NULL, NULL), AIR__YAML_SYNTAX);
  air__yaml_doc_cleanup(&d);
}

static void offset_positions(void **state) {
  (void)state;
  const char *t = "ab\nc\n\nxyz";
  air__yaml_loc l = air__yaml_offset_loc(t, 0);
  assert_int_equal(l.line, 1);
  assert_int_equal(l.col, 1);
  l = air__yaml_offset_loc(t, 2);
  assert_int_equal(l.line, 1);
  assert_int_equal(l.col, 3);
  l = air__yaml_offset_loc(t, 3);
  assert_int_equal(l.line, 2);
  assert_int_equal(l.col, 1);
  l = air__yaml_offset_loc(t, 8);
  assert_int_equal(l.line, 4);
  assert_int_equal(l.col, 3);
}

/* ---- positions of nodes -------------------------------------------------- */

static void node_positions(void **state) {
  (void)state;
  air__yaml_doc d;
  heard h;
  assert_int_equal(load(&d,
                        "plain: value\n"
                        "quoted:  \"q\"\n"
                        "single: 'sq'\n"
                        "map:\n"
                        "    first: 1\n"
                        "list: [  7, 8]\n"
                        "empty: {}\n",
                        &h),
                   AIR__YAML_OK);
  air__yaml_walk w = walk(1000);
  air__yaml_loc fb = {99, 98};
  struct {
    const char *key;
    int line, col;
  } want[] = {{"plain", 1, 8}, {"quoted", 2, 10}, {"single", 3, 9},
              {"map", 5, 5},   {"list", 6, 10},   {"empty", 99, 98}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    air__yaml_loc l = air__yaml_node_loc(get(&w, &d, want[i].key), fb);
    assert_int_equal(l.line, want[i].line);
    assert_int_equal(l.col, want[i].col);
  }
  air__yaml_loc l = air__yaml_node_loc(NULL, fb);
  assert_int_equal(l.line, 99);
  /* The root map is where its first key is. */
  l = air__yaml_node_loc(d.root, fb);
  assert_int_equal(l.line, 1);
  assert_int_equal(l.col, 1);
  air__yaml_doc_cleanup(&d);
}

/* ---- aliases and the budget ---------------------------------------------- */

typedef struct over_seen {
  int calls;
  unsigned long max;
} over_seen;

static void on_over(void *data, unsigned long max) {
  over_seen *o = data;
  o->calls++;
  o->max = max;
}

static void aliases_are_followed_under_a_budget(void **state) {
  (void)state;
  air__yaml_doc d;
  heard h;
  assert_int_equal(load(&d, "a: &x [1, 2, 3]\nb: *x\n", &h), AIR__YAML_OK);
  over_seen o = {0, 0};
  air__yaml_walk w = {.max_visits = 100, .over = on_over, .data = &o};
  struct fy_node *b = get(&w, &d, "b");
  struct fy_node *rb = air__yaml_deref(&w, b);
  /* map_next leaves the value as written: the alias is not the list. */
  assert_false(air__yaml_is_seq(b));
  assert_true(air__yaml_is_seq(rb));
  assert_ptr_equal(rb, air__yaml_deref(&w, get(&w, &d, "a")));
  assert_int_equal(air__yaml_count(rb), 3);
  assert_int_equal(o.calls, 0);

  /* Every dereference is a visit; the one crossing the budget is refused,
   * reported once, and the walk stays stopped. */
  w = (air__yaml_walk){.max_visits = 3, .over = on_over, .data = &o};
  assert_non_null(air__yaml_deref(&w, b));
  assert_non_null(air__yaml_deref(&w, b));
  assert_non_null(air__yaml_deref(&w, b));
  assert_null(air__yaml_deref(&w, b));
  assert_true(w.stop);
  assert_int_equal(o.calls, 1);
  assert_int_equal(o.max, 3);
  assert_null(air__yaml_deref(&w, d.root));
  assert_int_equal(o.calls, 1);
  /* A stopped walk yields NULL keys, so loops over maps end cleanly. */
  void *it = NULL;
  struct fy_node *k, *v;
  assert_true(air__yaml_map_next(&w, d.root, &it, &k, &v));
  assert_null(k);
  /* A caller may stop a walk itself; NULL is never a visit. */
  air__yaml_walk w2 = walk(10);
  assert_null(air__yaml_deref(&w2, NULL));
  assert_int_equal(w2.visits, 0);
  w2.stop = true;
  assert_null(air__yaml_deref(&w2, d.root));
  air__yaml_doc_cleanup(&d);
}

/* ---- iteration ------------------------------------------------------------
 */

static void iterates_in_document_order(void **state) {
  (void)state;
  air__yaml_doc d;
  heard h;
  assert_int_equal(load(&d, "z: 1\ny: 2\nx: [c, b, a]\n", &h), AIR__YAML_OK);
  air__yaml_walk w = walk(1000);
  void *it = NULL;
  struct fy_node *k, *v;
  const char *keys = "zyx";
  size_t i = 0;
  while (air__yaml_map_next(&w, d.root, &it, &k, &v)) {
    size_t n;
    const char *s = air__yaml_scalar(k, &n);
    assert_int_equal(n, 1);
    assert_int_equal(s[0], keys[i++]);
  }
  assert_int_equal(i, 3);
  assert_int_equal(w.visits, 3); /* keys only: values are the caller's */
  struct fy_node *list = air__yaml_deref(&w, get(&w, &d, "x"));
  it = NULL;
  struct fy_node *item;
  i = 0;
  while ((item = air__yaml_seq_next(list, &it)) != NULL) {
    size_t n;
    assert_int_equal(air__yaml_scalar(item, &n)[0], "cba"[i++]);
  }
  assert_int_equal(i, 3);
  assert_int_equal(air__yaml_count(get(&w, &d, "z")), 0); /* a scalar */
  assert_int_equal(air__yaml_count(NULL), 0);
  air__yaml_doc_cleanup(&d);
}

/* ---- kinds and scalars ----------------------------------------------------
 */

static void kinds_and_nulls(void **state) {
  (void)state;
  air__yaml_doc d;
  heard h;
  assert_int_equal(load(&d,
                        "e:\n"
                        "t: ~\n"
                        "n1: null\n"
                        "n2: Null\n"
                        "n3: NULL\n"
                        "q: \"null\"\n"
                        "qe: ''\n"
                        "nul: \"a\\0b\"\n"
                        "m: {}\n"
                        "l: []\n"
                        "blk: |\n  text\n",
                        &h),
                   AIR__YAML_OK);
  air__yaml_walk w = walk(1000);
  static const char *const nulls[] = {"e", "t", "n1", "n2", "n3"};
  for (size_t i = 0; i < 5; i++) {
    struct fy_node *n = get(&w, &d, nulls[i]);
    assert_true(air__yaml_is_null(n));
    assert_false(air__yaml_is_scalar(n));
    assert_string_equal(air__yaml_kind(n), "null");
  }
  struct fy_node *q = get(&w, &d, "q");
  assert_false(air__yaml_is_null(q));
  assert_true(air__yaml_is_scalar(q));
  assert_false(air__yaml_is_plain(q));
  assert_string_equal(air__yaml_kind(q), "a scalar");
  assert_true(air__yaml_is_scalar(get(&w, &d, "qe")));
  size_t n;
  const char *s = air__yaml_scalar(get(&w, &d, "nul"), &n);
  assert_int_equal(n, 3);
  assert_memory_equal(s, "a\0b", 3);
  assert_string_equal(air__yaml_kind(get(&w, &d, "m")), "a map");
  assert_true(air__yaml_is_map(get(&w, &d, "m")));
  assert_string_equal(air__yaml_kind(get(&w, &d, "l")), "a list");
  assert_true(air__yaml_is_seq(get(&w, &d, "l")));
  assert_false(air__yaml_is_plain(get(&w, &d, "blk")));
  assert_string_equal(air__yaml_kind(NULL), "null");
  s = air__yaml_scalar(NULL, &n);
  assert_int_equal(n, 0);
  assert_string_equal(s, "");
  air__yaml_doc_cleanup(&d);
}

static void booleans_follow_the_core_schema(void **state) {
  (void)state;
  air__yaml_doc d;
  heard h;
  assert_int_equal(load(&d,
                        "- true\n- True\n- TRUE\n- false\n- False\n- FALSE\n"
                        "- tRUE\n- yes\n- 'true'\n- 1\n",
                        &h),
                   AIR__YAML_OK);
  const int want[] = {1, 1, 1, 0, 0, 0, -1, -1, -1, -1}; /* -1: not a bool */
  void *it = NULL;
  struct fy_node *item;
  size_t i = 0;
  while ((item = air__yaml_seq_next(d.root, &it)) != NULL) {
    bool ok = true;
    bool v = air__yaml_bool(item, &ok);
    if (want[i] < 0) {
      assert_false(ok);
      assert_false(v);
    } else {
      assert_true(ok);
      assert_int_equal(v, want[i]);
    }
    i++;
  }
  assert_int_equal(i, 10);
  air__yaml_doc_cleanup(&d);
}

static void unsigned_integers_are_bounded(void **state) {
  (void)state;
  uint64_t v = 42;
  assert_true(air__yaml_u64("0", 1, 0, &v));
  assert_true(v == 0);
  assert_true(air__yaml_u64("18446744073709551615", 20, UINT64_MAX, &v));
  assert_true(v == UINT64_MAX);
  assert_true(air__yaml_u64("599", 3, 599, &v));
  assert_true(v == 599);
  v = 7;
  assert_false(air__yaml_u64("600", 3, 599, &v)); /* over max */
  static const char *const bad[] = {"",
                                    "18446744073709551616",
                                    "000000000000000000001",
                                    "+1",
                                    "-1",
                                    "1 ",
                                    " 1",
                                    "1e3",
                                    "0x10",
                                    "1.0"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_false(air__yaml_u64(bad[i], strlen(bad[i]), UINT64_MAX, &v));
  assert_true(v == 7); /* untouched on failure */
  /* Bounded by n, not by a terminator. */
  assert_true(air__yaml_u64("12x", 2, 100, &v));
  assert_true(v == 12);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(loads_a_map),
      cmocka_unit_test(blank_texts_have_a_null_root),
      cmocka_unit_test(text_is_checked_before_parsing),
      cmocka_unit_test(syntax_errors_reach_the_callback),
      cmocka_unit_test(offset_positions),
      cmocka_unit_test(node_positions),
      cmocka_unit_test(aliases_are_followed_under_a_budget),
      cmocka_unit_test(iterates_in_document_order),
      cmocka_unit_test(kinds_and_nulls),
      cmocka_unit_test(booleans_follow_the_core_schema),
      cmocka_unit_test(unsigned_integers_are_bounded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
