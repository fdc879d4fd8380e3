/* Refusal phrase detection over leading text (docs/design.md §3.2). */
#include "helpers.h"

#include <stdlib.h>

#include "refusal.h"

static char *phrases[] = {"I'm sorry, but I cannot assist",
                          "I can't help with"};

static air__refusal_verdict feed_all(const char *const *pieces, size_t n) {
  air__refusal r;
  assert_int_equal(air__refusal_init(&r, phrases, 2), 0);
  air__refusal_verdict v = AIR__REFUSAL_UNDECIDED;
  for (size_t i = 0; i < n; i++)
    v = air__refusal_feed(&r, pieces[i], strlen(pieces[i]));
  air__refusal_cleanup(&r);
  return v;
}

static void test_match_across_pieces(void **s) {
  (void)s;
  const char *p[] = {"I'm sor", "ry, but I cannot ", "assist with that."};
  assert_int_equal(feed_all(p, 3), AIR__REFUSAL_MATCH);
  const char *p2[] = {"I'm sor"};
  assert_int_equal(feed_all(p2, 1), AIR__REFUSAL_UNDECIDED);
}

static void test_case_whitespace_and_typographic_quotes(void **s) {
  (void)s;
  const char *p[] = {"  \n\tI\xE2\x80\x99M SORRY, BUT i cannot assist"};
  assert_int_equal(feed_all(p, 1), AIR__REFUSAL_MATCH);
  /* The quote split across pieces. */
  const char *p2[] = {"I\xE2", "\x80", "\x99m sorry, but I cannot assist"};
  assert_int_equal(feed_all(p2, 3), AIR__REFUSAL_MATCH);
  const char *p3[] = {"I can\xE2\x80\x98t help with this"};
  assert_int_equal(feed_all(p3, 1), AIR__REFUSAL_MATCH);
}

static void test_divergence_clears_early(void **s) {
  (void)s;
  const char *p[] = {"I'm happy"};
  assert_int_equal(feed_all(p, 1), AIR__REFUSAL_CLEAR);
  const char *p2[] = {"Sure"};
  assert_int_equal(feed_all(p2, 1), AIR__REFUSAL_CLEAR);
  /* Shared prefix with both phrases, then divergence. */
  const char *p3[] = {"I", "'m sorry, but I can do it"};
  assert_int_equal(feed_all(p3, 2), AIR__REFUSAL_CLEAR);
  /* Only white space so far: undecided. */
  const char *p4[] = {"   "};
  assert_int_equal(feed_all(p4, 1), AIR__REFUSAL_UNDECIDED);
}

static void test_verdict_is_final_and_reset(void **s) {
  (void)s;
  air__refusal r;
  assert_int_equal(air__refusal_init(&r, phrases, 2), 0);
  assert_int_equal(air__refusal_feed(&r, "Hello", 5), AIR__REFUSAL_CLEAR);
  assert_int_equal(air__refusal_feed(&r, "I'm sorry, but I cannot assist", 30),
                   AIR__REFUSAL_CLEAR);
  air__refusal_reset(&r);
  assert_int_equal(air__refusal_feed(&r, "I'm sorry, but I cannot assist", 30),
                   AIR__REFUSAL_MATCH);
  assert_int_equal(r.matched, 0);
  air__refusal_cleanup(&r);
  /* No phrases: clear at once. */
  assert_int_equal(air__refusal_init(&r, NULL, 0), 0);
  assert_int_equal(air__refusal_feed(&r, "I'm sorry", 9), AIR__REFUSAL_CLEAR);
  air__refusal_cleanup(&r);
}

static void test_anywhere(void **s) {
  (void)s;
  air__refusal r;
  assert_int_equal(air__refusal_init(&r, phrases, 2), 0);
  const char *t =
      "Here is some text. I CAN\xE2\x80\x99T HELP WITH that, though.";
  assert_true(air__refusal_anywhere(&r, t, strlen(t)));
  const char *u = "Here is some text. I can help with that.";
  assert_false(air__refusal_anywhere(&r, u, strlen(u)));
  air__refusal_cleanup(&r);
}

/*
 * Text that ends exactly at the end of its buffer (a malloc'd copy of
 * exactly n bytes, so ASan sees a read past it), for every way it can end
 * inside or just after a possible typographic quote.
 */
static void test_text_ending_at_buffer_end(void **s) {
  (void)s;
  static const char *const tails[] = {
      "I can\xE2",
      "I can\xE2\x80",
      "I can\xE2"
      "A",
      "I can\xE2\x80\x99",
      "I can\xE2\x81",
      "\xE2",
      "\xE2"
      "A",
      "\xE2\x80\x9C",
      "I can\xE2\x80\x99t help with",
  };
  for (size_t k = 0; k < sizeof(tails) / sizeof(tails[0]); k++) {
    size_t n = strlen(tails[k]);
    char *t = malloc(n);
    assert_non_null(t);
    memcpy(t, tails[k], n);
    air__refusal r;
    assert_int_equal(air__refusal_init(&r, phrases, 2), 0);
    bool last = k == sizeof(tails) / sizeof(tails[0]) - 1;
    assert_int_equal(air__refusal_anywhere(&r, t, n), last);
    air__refusal_verdict v = air__refusal_feed(&r, t, n);
    assert_int_equal(v, last ? AIR__REFUSAL_MATCH
                        : k == 2 || k == 4 || k == 6 || k == 7
                            ? AIR__REFUSAL_CLEAR
                            : AIR__REFUSAL_UNDECIDED);
    air__refusal_cleanup(&r);
    free(t);
  }
}

static void test_long_whitespace_is_bounded(void **s) {
  (void)s;
  air__refusal r;
  assert_int_equal(air__refusal_init(&r, phrases, 2), 0);
  char ws[512];
  memset(ws, ' ', sizeof(ws));
  air__refusal_verdict v = AIR__REFUSAL_UNDECIDED;
  for (int i = 0; i < 64 && v == AIR__REFUSAL_UNDECIDED; i++)
    v = air__refusal_feed(&r, ws, sizeof(ws));
  /* The hold is bounded: it gives up holding and releases. */
  assert_int_equal(v, AIR__REFUSAL_CLEAR);
  assert_true(r.lead.n <= r.lead.max);
  air__refusal_cleanup(&r);
}

/* Matching anywhere against a naive search over the normalized text:
 * overlapping and self-similar phrases (where a matcher that restarts
 * wrongly misses), quotes folded mid-text, phrases at the very end. */
static void test_anywhere_matches_naive(void **s) {
  (void)s;
  char *ph[] = {"aab", "abab", "I\xe2\x80\x99m sorry", "zz"};
  air__refusal r;
  assert_int_equal(air__refusal_init(&r, ph, 4), 0);
  static const struct {
    const char *text;
    bool hit;
  } cases[] = {
      {"aaab", true},
      {"aab", true},
      {"abaab", true},
      {"ababab", true},
      {"abaabb", true},
      {"aba", false},
      {"xx I'M SORRY", true},
      {"x i\xe2\x80\x98m sorry!", true},
      {"im sorry", false},
      {"z", false},
      {"yzz", true},
      {"a a b", false},
      {"", false},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    size_t n = strlen(cases[i].text);
    /* Exactly n bytes on the heap: nothing past the end is read (ASan). */
    char *t = malloc(n ? n : 1);
    assert_non_null(t);
    memcpy(t, cases[i].text, n);
    if (air__refusal_anywhere(&r, t, n) != cases[i].hit)
      fail_msg("'%s': want %d", cases[i].text, cases[i].hit);
    free(t);
  }
  /* A long text: the phrase at the very end of 1 MiB of near misses. */
  size_t big = (size_t)1 << 20;
  char *t = malloc(big);
  assert_non_null(t);
  for (size_t i = 0; i < big; i++) t[i] = i % 2 ? 'b' : 'a';
  t[big - 3] = 'a';
  t[big - 2] = 'a';
  t[big - 1] = 'b';
  assert_true(air__refusal_anywhere(&r, t, big));
  t[big - 1] = 'a';
  t[big - 2] = 'b'; /* ...abab still matches "abab" */
  assert_true(air__refusal_anywhere(&r, t, big));
  free(t);
  air__refusal_cleanup(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_match_across_pieces),
      cmocka_unit_test(test_case_whitespace_and_typographic_quotes),
      cmocka_unit_test(test_divergence_clears_early),
      cmocka_unit_test(test_verdict_is_final_and_reset),
      cmocka_unit_test(test_anywhere),
      cmocka_unit_test(test_anywhere_matches_naive),
      cmocka_unit_test(test_text_ending_at_buffer_end),
      cmocka_unit_test(test_long_whitespace_is_bounded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
