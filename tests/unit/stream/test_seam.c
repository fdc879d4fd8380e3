/* The seam of a continued stream (docs/design.md §3.5): every rule, fed whole,
 * byte by byte and split at every offset (multi-byte UTF-8 included). */
#include "helpers.h"

#include <stdlib.h>

#include "seam.h"

typedef struct outcome {
  air__seam_state st;
  char *text; /* what was released (owned) */
  size_t n;
  const char *message;
} outcome;

/* Runs cont through a seam in the given pieces (cuts: offsets, ascending),
 * then ends it. */
static outcome run_cuts(const char *sent, const char *cont, bool instruct,
                        const size_t *cuts, size_t n_cuts) {
  air__seam s;
  air__buf out;
  air__buf_init(&out, 1 << 24);
  assert_int_equal(air__seam_init(&s, sent, strlen(sent), instruct), 0);
  size_t len = strlen(cont), at = 0;
  air__seam_state st = s.state;
  for (size_t i = 0; i <= n_cuts; i++) {
    size_t to = i < n_cuts ? cuts[i] : len;
    size_t before = out.n;
    st = air__seam_feed(&s, cont + at, to - at, &out);
    if (st == AIR__SEAM_HOLD) assert_int_equal(out.n, before);
    if (st == AIR__SEAM_FAILED) assert_int_equal(out.n, before);
    at = to;
  }
  st = air__seam_end(&s, &out);
  outcome o = {st, NULL, out.n, s.message};
  o.text = malloc(out.n + 1);
  assert_non_null(o.text);
  if (out.n) memcpy(o.text, out.p, out.n);
  o.text[out.n] = '\0';
  air__buf_cleanup(&out);
  air__seam_cleanup(&s);
  return o;
}

/* The same outcome fed whole, byte by byte and cut at every offset. */
static outcome run(const char *sent, const char *cont, bool instruct) {
  outcome whole = run_cuts(sent, cont, instruct, NULL, 0);
  size_t len = strlen(cont);
  size_t *cuts = malloc((len + 1) * sizeof(size_t));
  assert_non_null(cuts);
  for (size_t i = 0; i < len; i++) cuts[i] = i + 1;
  outcome bytes = run_cuts(sent, cont, instruct, cuts, len ? len - 1 : 0);
  assert_int_equal(bytes.st, whole.st);
  assert_string_equal(bytes.text, whole.text);
  free(bytes.text);
  for (size_t k = 1; k < len; k++) {
    outcome two = run_cuts(sent, cont, instruct, &k, 1);
    assert_int_equal(two.st, whole.st);
    assert_string_equal(two.text, whole.text);
    free(two.text);
  }
  free(cuts);
  return whole;
}

static void expect(const char *sent, const char *cont, bool instruct,
                   air__seam_state st, const char *text) {
  outcome o = run(sent, cont, instruct);
  if (o.st != st || strcmp(o.text, text) != 0)
    print_error("sent=[%s] cont=[%s]: state %d text [%s], want %d [%s]\n", sent,
                cont, (int)o.st, o.text, (int)st, text);
  assert_int_equal(o.st, st);
  assert_string_equal(o.text, text);
  free(o.text);
}

#define OPEN AIR__SEAM_OPEN
#define FAILED AIR__SEAM_FAILED

static const char tale[] =
    "Once upon a time there was a princess who lived in a tall castle.";

static void test_full_restart_dropped(void **st) {
  (void)st;
  expect(tale,
         "Once upon a time there was a princess who lived in a tall "
         "castle. She had a cat.",
         false, OPEN, " She had a cat.");
  /* Leading white space and different white space inside. */
  expect(tale,
         "\n\n Once upon a time  there was a\nprincess who lived in a "
         "tall castle.\tShe",
         false, OPEN, "\tShe");
  /* A sent text shorter than both minima: a whole repeat is still one. */
  expect("Hi th", "Hi there", false, OPEN, "ere");
  /* The restart is exactly sent and nothing more. */
  expect(tale, tale, false, OPEN, "");
}

static void test_tail_overlap_dropped(void **st) {
  (void)st;
  /* "a princess who lived in a tall castle." is 38 characters. */
  expect(tale, "a princess who lived in a tall castle. She had a cat.", false,
         OPEN, " She had a cat.");
  expect(tale, " princess who  lived\nin a tall castle. She", false, OPEN,
         " She");
  /* Exactly 32 characters. */
  expect(tale, "cess who lived in a tall castle. X", false, OPEN, " X");
  /* 31 characters: not an overlap, passed whole. */
  expect(tale, "ess who lived in a tall castle. X", false, OPEN,
         "ess who lived in a tall castle. X");
}

static void test_overlap_ending_on_white_space(void **st) {
  (void)st;
  /* sent ends with white space: the continuation's whole run after the
   * overlap is dropped, however it is split. */
  char sent[128];
  snprintf(sent, sizeof(sent), "%s  ", tale);
  expect(sent, "princess who lived in a tall castle. \n\n  The end.", false,
         OPEN, "The end.");
  expect(sent, "a princess who lived in a tall castle.", false, OPEN, "");
  /* No overlap after a sent ending with white space: the continuation's
   * leading white space is dropped (never doubled). */
  expect(sent, " She had a cat.", false, OPEN, "She had a cat.");
  expect(sent, "\n\nShe", false, OPEN, "She");
  expect(sent, "She", false, OPEN, "She");
  /* sent ends without: the continuation's white space is kept. */
  expect(tale, "princess who lived in a tall castle.\n\nThe end.", false, OPEN,
         "\n\nThe end.");
}

static void test_no_overlap_passes_whole(void **st) {
  (void)st;
  expect(tale, " She had a cat.", false, OPEN, " She had a cat.");
  expect(tale, "\n\nThe end.", false, OPEN, "\n\nThe end.");
  /* Agreement with sent's beginning below AIR__SEAM_RESTART_MIN is chance. */
  expect(tale, "Once upon a ti", false, OPEN, "Once upon a ti");
  expect(tale, "Once upon a tide, the sea", false, OPEN,
         "Once upon a tide, the sea");
  /* Only white space. */
  expect(tale, "  \n ", false, OPEN, "  \n ");
  expect(tale, "", false, OPEN, "");
}

static void test_diverging_restart_fails(void **st) {
  (void)st;
  expect(tale, "Once upon a time there was a king.", false, FAILED, "");
  /* 16 characters agree, then it differs; 15 are chance. */
  expect(tale, "Once upon a timeX", false, FAILED, "");
  expect(tale, "Once upon a timX", false, OPEN, "Once upon a timX");
  /* The text ends while still repeating sent's beginning. */
  expect(tale, "Once upon a time there", false, FAILED, "");
  outcome o = run(tale, "Once upon a time there was a king.", false);
  assert_non_null(strstr(o.message, "restarted"));
  free(o.text);
}

static void test_longest_overlap_wins(void **st) {
  (void)st;
  const char *p = "the quick brown fox jumps over the lazy dog";
  char sent[256], cont[256];
  snprintf(sent, sizeof(sent), "%s, said the %s", p, p);
  /* A tail overlap that is also sent's beginning: the restart diverges
   * after the tail, but the complete tail overlap wins. */
  snprintf(cont, sizeof(cont), "%s. Then", p);
  expect(sent, cont, false, OPEN, ". Then");
  /* The whole restart is longer than the tail: it wins. */
  snprintf(cont, sizeof(cont), "%s, said the %s. Then", p, p);
  expect(sent, cont, false, OPEN, ". Then");
}

static void test_utf8(void **st) {
  (void)st;
  /* 40 three-byte characters: a 32-character tail (96 bytes) is an
   * overlap, a 31-character one (93 bytes) is not. */
  char sent[256] = "", cont[256];
  const char *k[] = {"\xE6\x97\xA5", "\xE6\x9C\xAC", "\xE8\xAA\x9E",
                     "\xE3\x81\xAE", "\xE3\x83\x86"};
  for (int i = 0; i < 40; i++) memcpy(sent + 3 * i, k[(i * 3 + i / 5) % 5], 4);
  size_t n = strlen(sent);
  snprintf(cont, sizeof(cont), "%s\xE3\x80\x82!", sent + n - 96);
  expect(sent, cont, false, OPEN, "\xE3\x80\x82!");
  snprintf(cont, sizeof(cont), "%s\xE3\x80\x82!", sent + n - 93);
  expect(sent, cont, false, OPEN, cont);
  /* Latin with umlauts and a dash, restarted from the beginning. */
  const char *de =
      "Gr\xC3\xBC\xC3\x9F"
      "e aus M\xC3\xBCnchen \xE2\x80\x94 bis bald";
  snprintf(cont, sizeof(cont), "%s, Anna.", de);
  expect(de, cont, false, OPEN, ", Anna.");
  /* The restart differs inside a multi-byte character (an en dash for
   * the em dash, after 18 characters); 11 characters are chance. */
  snprintf(cont, sizeof(cont),
           "Gr\xC3\xBC\xC3\x9F"
           "e aus M\xC3\xBCnchen \xE2\x80\x93 bis");
  expect(de, cont, false, FAILED, "");
  snprintf(cont, sizeof(cont),
           "Gr\xC3\xBC\xC3\x9F"
           "e aus M\xC3\xB6nchen");
  expect(de, cont, false, OPEN, cont);
  /* A tail never starts inside a character: a continuation that begins
   * with the last bytes of a character is not an overlap. */
  snprintf(cont, sizeof(cont), "%s end", sent + n - 99);
  expect(sent, cont, false, OPEN, " end");
  snprintf(cont, sizeof(cont), "%s end", sent + n - 98);
  expect(sent, cont, false, OPEN, cont);
}

static void test_preamble_fails_with_instruct(void **st) {
  (void)st;
  const char *pre[] = {
      "Sure, continuing: in a tall castle.",
      "Certainly! Here is the rest of the story.",
      "Continuing from where I left off: the castle",
      "Here\xE2\x80\x99s the rest:\n\nthe castle",
      "here is the continuation",
      "OK, here is the rest",
      "Okay \xE2\x80\x94 continuing",
      "**Continuing:** the castle",
      "Of course. The castle",
      "Absolutely! The castle",
      "(continued) the castle",
      "I\xE2\x80\x99ll continue: the castle",
      "Let me continue the story.",
      "Sure",
  };
  for (size_t i = 0; i < sizeof(pre) / sizeof(pre[0]); i++) {
    if (i == sizeof(pre) / sizeof(pre[0]) - 1) break; /* "Sure" alone: below */
    outcome o = run(tale, pre[i], true);
    if (o.st != FAILED) print_error("not a preamble: [%s]\n", pre[i]);
    assert_int_equal(o.st, FAILED);
    assert_non_null(strstr(o.message, "preamble"));
    assert_int_equal(o.n, 0);
    free(o.text);
    /* Without instruct the same text is ordinary text. */
    expect(tale, pre[i], false, OPEN, pre[i]);
  }
  /* Not preambles: ordinary continuations that merely begin alike. */
  const char *fine[] = {"Surely not.",
                        " OK then, she said.",
                        "Yes. The castle",
                        "Okay the",
                        "continuingly",
                        "Here the castle",
                        "Of course the",
                        "Sure",
                        " and more",
                        "sure-footed",
                        "Continuing to walk, she"};
  for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++)
    expect(tale, fine[i], true, OPEN, fine[i]);
  /* A preamble before an overlap still fails. */
  expect(tale, "Sure! a princess who lived in a tall castle. More", true,
         FAILED, "");
  /* With instruct, an overlap without a preamble is dropped as usual. */
  expect(tale, "a princess who lived in a tall castle. More", true, OPEN,
         " More");
}

static void test_states_while_feeding(void **st) {
  (void)st;
  air__seam s;
  air__buf out;
  air__buf_init(&out, 1 << 20);
  assert_int_equal(air__seam_init(&s, tale, strlen(tale), false), 0);
  /* Could still be a restart or an overlap: held. */
  assert_int_equal(air__seam_feed(&s, "Once upon", 9, &out), AIR__SEAM_HOLD);
  assert_int_equal(out.n, 0);
  assert_int_equal(
      air__seam_feed(&s,
                     " a time there was a princess who lived in a tall castle.",
                     56, &out),
      AIR__SEAM_OPEN);
  assert_int_equal(out.n, 0);
  assert_int_equal(air__seam_feed(&s, " More", 5, &out), AIR__SEAM_OPEN);
  assert_int_equal(air__seam_feed(&s, "!", 1, &out), AIR__SEAM_OPEN);
  assert_int_equal(air__seam_end(&s, &out), AIR__SEAM_OPEN);
  assert_string_equal(out.p, " More!");
  air__seam_cleanup(&s);

  /* FAILED is final: nothing more is appended. */
  air__buf_reset(&out);
  assert_int_equal(air__seam_init(&s, tale, strlen(tale), false), 0);
  assert_int_equal(air__seam_feed(&s, "Once upon a time it rained", 26, &out),
                   AIR__SEAM_FAILED);
  assert_int_equal(air__seam_feed(&s, "more", 4, &out), AIR__SEAM_FAILED);
  assert_int_equal(air__seam_end(&s, &out), AIR__SEAM_FAILED);
  assert_int_equal(out.n, 0);
  air__seam_cleanup(&s);

  /* An empty sent: open at once (without instruct). */
  assert_int_equal(air__seam_init(&s, " \n", 2, false), 0);
  assert_int_equal(s.state, AIR__SEAM_OPEN);
  assert_int_equal(air__seam_feed(&s, "abc", 3, &out), AIR__SEAM_OPEN);
  assert_string_equal(out.p, "abc");
  air__seam_cleanup(&s);
  /* With instruct it still checks the preamble. */
  air__buf_reset(&out);
  assert_int_equal(air__seam_init(&s, "", 0, true), 0);
  assert_int_equal(air__seam_feed(&s, "Sure", 4, &out), AIR__SEAM_HOLD);
  assert_int_equal(air__seam_feed(&s, "! here", 6, &out), AIR__SEAM_FAILED);
  air__seam_cleanup(&s);
  expect("", "Sure, continuing", true, FAILED, "");
  expect("", "Fine.", true, OPEN, "Fine.");

  /* The output over its maximum: FAILED with a message. */
  air__buf small;
  air__buf_init(&small, 4);
  assert_int_equal(air__seam_init(&s, tale, strlen(tale), false), 0);
  assert_int_equal(air__seam_feed(&s, " and many more words", 20, &small),
                   AIR__SEAM_FAILED);
  assert_non_null(strstr(s.message, "limit"));
  air__seam_cleanup(&s);
  air__buf_cleanup(&small);
  air__buf_cleanup(&out);
}

static void test_holding_is_bounded(void **st) {
  (void)st;
  /* A long run of white space after a matching start: decided once the
   * held bytes pass sent's length plus the slack, without the end. */
  air__seam s;
  air__buf out;
  air__buf_init(&out, 1 << 20);
  assert_int_equal(air__seam_init(&s, tale, strlen(tale), false), 0);
  assert_int_equal(air__seam_feed(&s, "Once", 4, &out), AIR__SEAM_HOLD);
  air__seam_state r = AIR__SEAM_HOLD;
  size_t fed = 0;
  while (r == AIR__SEAM_HOLD && fed < 3 * AIR__SEAM_HOLD_SLACK) {
    r = air__seam_feed(&s, "          ", 10, &out);
    fed += 10;
  }
  assert_int_equal(r, AIR__SEAM_OPEN);
  assert_true(fed <= strlen(tale) + AIR__SEAM_HOLD_SLACK + 10);
  assert_int_equal(out.n, 4 + fed);
  air__seam_cleanup(&s);

  /* A tail longer than AIR__SEAM_MAX_TAIL is not tracked (passed whole);
   * the whole sent (a restart) always is. */
  size_t big = 3 * AIR__SEAM_MAX_TAIL;
  char *sent = malloc(big + 1);
  assert_non_null(sent);
  uint32_t x = 12345;
  for (size_t i = 0; i < big; i++) {
    x = x * 1103515245u + 12345u;
    sent[i] = (char)('a' + (x >> 16) % 26);
  }
  sent[big] = '\0';
  char *cont = malloc(big + 8);
  assert_non_null(cont);
  snprintf(cont, big + 8, "%s!", sent + big - AIR__SEAM_MAX_TAIL - 100);
  air__buf_reset(&out);
  assert_int_equal(air__seam_init(&s, sent, big, false), 0);
  assert_int_equal(air__seam_feed(&s, cont, strlen(cont), &out),
                   AIR__SEAM_OPEN);
  assert_int_equal(out.n, strlen(cont));
  air__seam_cleanup(&s);
  snprintf(cont, big + 8, "%s!", sent + big - AIR__SEAM_MAX_TAIL);
  air__buf_reset(&out);
  assert_int_equal(air__seam_init(&s, sent, big, false), 0);
  assert_int_equal(air__seam_feed(&s, cont, strlen(cont), &out),
                   AIR__SEAM_OPEN);
  assert_string_equal(out.p, "!");
  air__seam_cleanup(&s);
  snprintf(cont, big + 8, "%s!", sent);
  air__buf_reset(&out);
  assert_int_equal(air__seam_init(&s, sent, big, false), 0);
  assert_int_equal(air__seam_feed(&s, cont, strlen(cont), &out),
                   AIR__SEAM_OPEN);
  assert_string_equal(out.p, "!");
  air__seam_cleanup(&s);
  free(sent);
  free(cont);
  air__buf_cleanup(&out);
}

/* A sent text of one repeated letter and a continuation of the same: the
 * worst case for candidates; must finish (bounded work per byte). */
static void test_repetitive_worst_case(void **st) {
  (void)st;
  size_t big = 1 << 16;
  char *sent = malloc(big + 1);
  assert_non_null(sent);
  memset(sent, 'a', big);
  sent[big] = '\0';
  air__seam s;
  air__buf out;
  air__buf_init(&out, 1 << 20);
  assert_int_equal(air__seam_init(&s, sent, big, false), 0);
  air__seam_state r = AIR__SEAM_HOLD;
  for (size_t i = 0; i < big && r == AIR__SEAM_HOLD; i += 64)
    r = air__seam_feed(&s, sent, 64, &out);
  r = air__seam_feed(&s, "b", 1, &out);
  assert_int_equal(r, AIR__SEAM_OPEN);
  /* The whole sent was repeated: only "b" passes. */
  assert_string_equal(out.p, "b");
  air__seam_cleanup(&s);
  air__buf_cleanup(&out);
  free(sent);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_full_restart_dropped),
      cmocka_unit_test(test_tail_overlap_dropped),
      cmocka_unit_test(test_overlap_ending_on_white_space),
      cmocka_unit_test(test_no_overlap_passes_whole),
      cmocka_unit_test(test_diverging_restart_fails),
      cmocka_unit_test(test_longest_overlap_wins),
      cmocka_unit_test(test_utf8),
      cmocka_unit_test(test_preamble_fails_with_instruct),
      cmocka_unit_test(test_states_while_feeding),
      cmocka_unit_test(test_holding_is_bounded),
      cmocka_unit_test(test_repetitive_worst_case),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
