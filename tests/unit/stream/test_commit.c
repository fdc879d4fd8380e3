/* The commit gate: hold until first content, judge soft failures, release. */
#include "helpers.h"

#include "commit.h"

typedef struct out {
  char log[4096]; /* released parts, one letter each, and raw bytes */
  size_t n;
  unsigned events;
} out;

static void add(out *o, const char *s, size_t n) {
  if (o->n + n >= sizeof(o->log)) return;
  memcpy(o->log + o->n, s, n);
  o->n += n;
  o->log[o->n] = '\0';
}

static int emit(void *data, const air__gate_event *ev) {
  out *o = data;
  o->events++;
  if (ev->raw) {
    add(o, "[", 1);
    add(o, ev->raw, ev->raw_len);
    add(o, "]", 1);
  }
  for (size_t i = 0; i < ev->n_parts; i++) {
    const air_part *p = &ev->parts[i];
    switch (p->kind) {
      case AIR_PART_START:
        add(o, "S", 1);
        break;
      case AIR_PART_TEXT:
        add(o, p->text, p->text_len);
        break;
      case AIR_PART_TOOL_START:
        add(o, "T(", 2);
        add(o, p->name, p->name_len);
        add(o, ")", 1);
        break;
      case AIR_PART_REASONING:
        add(o, "R", 1);
        break;
      case AIR_PART_FINISH:
        add(o, "F", 1);
        break;
      case AIR_PART_USAGE:
        add(o, "U", 1);
        break;
      default:
        add(o, "?", 1);
    }
  }
  return 0;
}

static char *phrases[] = {"I'm sorry, but I cannot assist"};

static void gate_new(air__gate *g, out *o, air__commit mode, bool json) {
  memset(o, 0, sizeof(*o));
  air__gate_cfg cfg = {.commit = mode,
                       .phrases = phrases,
                       .n_phrases = 1,
                       .max_malformed = 2,
                       .malformed = AIR__MALFORMED_SKIP,
                       .json_response = json,
                       .first_chunk_ms = 3000,
                       .chunk_ms = 1000};
  assert_int_equal(air__gate_init(g, &cfg, emit, o), 0);
  air__gate_begin(g, 100);
}

static air_part text(const char *t) {
  air_part p = {.kind = AIR_PART_TEXT, .text = t, .text_len = strlen(t)};
  return p;
}

static int feed1(air__gate *g, air_part p, const char *raw) {
  air__gate_event ev = {raw, raw ? strlen(raw) : 0, &p, 1, 0};
  return air__gate_feed(g, &ev, 200);
}

static air_part kind(air_part_kind k) {
  air_part p = {.kind = k};
  return p;
}

static air_part finish(air_finish f) {
  air_part p = {.kind = AIR_PART_FINISH, .finish = f};
  return p;
}

static void test_holds_until_first_content(void **s) {
  (void)s;
  air__gate g;
  out o;
  gate_new(&g, &o, AIR__COMMIT_FIRST_CONTENT, false);
  assert_int_equal(feed1(&g, kind(AIR_PART_START), "a"), 0);
  assert_int_equal(feed1(&g, text(""), "b"), 0); /* empty: not content */
  assert_int_equal(o.events, 0);
  assert_int_equal(g.state, AIR__GATE_HOLDING);
  assert_int_equal(feed1(&g, text("Hello"), "c"), 0);
  /* Everything held is released in order, raw bytes with it. */
  assert_int_equal(g.state, AIR__GATE_COMMITTED);
  assert_string_equal(o.log, "[a]S[b][c]Hello");
  assert_int_equal(feed1(&g, text(" world"), NULL), 0);
  assert_int_equal(feed1(&g, finish(AIR_FINISH_STOP), NULL), 0);
  assert_int_equal(air__gate_end(&g, true, 300), 0);
  assert_int_equal(g.state, AIR__GATE_DONE);
  assert_string_equal(o.log, "[a]S[b][c]Hello worldF");
  air__gate_cleanup(&g);
}

static void test_refusal_phrase_fails_with_nothing_released(void **s) {
  (void)s;
  air__gate g;
  out o;
  gate_new(&g, &o, AIR__COMMIT_FIRST_CONTENT, false);
  feed1(&g, kind(AIR_PART_START), NULL);
  assert_int_equal(feed1(&g, text("I'm sorry, "), NULL), 0);
  assert_int_equal(g.state, AIR__GATE_HOLDING);
  assert_int_equal(feed1(&g, text("but I cannot assist with that"), NULL), 1);
  assert_int_equal(g.state, AIR__GATE_FAILED);
  assert_int_equal(g.reason, AIR_REASON_REFUSAL);
  assert_int_equal(o.events, 0);
  /* Next attempt: a real answer that starts like the phrase. */
  air__gate_begin(&g, 500);
  assert_int_equal(feed1(&g, text("I'm sorry"), NULL), 0);
  assert_int_equal(o.events, 0);
  assert_int_equal(feed1(&g, text(" for the delay: here it is"), NULL), 0);
  assert_int_equal(g.state, AIR__GATE_COMMITTED);
  assert_string_equal(o.log, "I'm sorry for the delay: here it is");
  air__gate_cleanup(&g);
}

static void test_short_answer_that_is_a_phrase_prefix_is_released_at_end(
    void **s) {
  (void)s;
  air__gate g;
  out o;
  gate_new(&g, &o, AIR__COMMIT_FIRST_CONTENT, false);
  feed1(&g, text("I'm"), NULL);
  feed1(&g, finish(AIR_FINISH_STOP), NULL);
  assert_int_equal(o.events, 0);
  assert_int_equal(air__gate_end(&g, true, 300), 0);
  assert_string_equal(o.log, "I'mF");
  air__gate_cleanup(&g);
}

static void test_non_text_first_content_commits_at_once(void **s) {
  (void)s;
  air__gate g;
  out o;
  gate_new(&g, &o, AIR__COMMIT_FIRST_CONTENT, false);
  air_part t = {
      .kind = AIR_PART_TOOL_START, .name = "get_weather", .name_len = 11};
  assert_int_equal(feed1(&g, t, NULL), 0);
  assert_int_equal(g.state, AIR__GATE_COMMITTED);
  assert_string_equal(o.log, "T(get_weather)");
  air__gate_begin(&g, 0);
  memset(&o, 0, sizeof(o));
  air_part r = {.kind = AIR_PART_REASONING, .text = "hm", .text_len = 2};
  assert_int_equal(feed1(&g, r, NULL), 0);
  assert_int_equal(g.state, AIR__GATE_COMMITTED);
  air__gate_cleanup(&g);
}

static void test_soft_failures_before_content(void **s) {
  (void)s;
  air__gate g;
  out o;
  gate_new(&g, &o, AIR__COMMIT_FIRST_CONTENT, false);
  /* length and content_filter are judged at the end (a cut one too). */
  assert_int_equal(feed1(&g, finish(AIR_FINISH_LENGTH), NULL), 0);
  assert_int_equal(air__gate_end(&g, true, 10), 1);
  assert_int_equal(g.reason, AIR_REASON_LENGTH);
  assert_true(g.judged);
  air__gate_begin(&g, 0);
  assert_int_equal(feed1(&g, finish(AIR_FINISH_CONTENT_FILTER), NULL), 0);
  assert_int_equal(air__gate_end(&g, false, 10), 1);
  assert_int_equal(g.reason, AIR_REASON_CONTENT_FILTER);
  assert_true(g.judged);
  air__gate_begin(&g, 0);
  assert_int_equal(feed1(&g, finish(AIR_FINISH_REFUSAL), NULL), 1);
  assert_int_equal(g.reason, AIR_REASON_REFUSAL);
  air__gate_begin(&g, 0);
  air_part nat = {.kind = AIR_PART_REFUSAL, .text = "No.", .text_len = 3};
  assert_int_equal(feed1(&g, nat, NULL), 1);
  assert_int_equal(g.reason, AIR_REASON_REFUSAL);
  air__gate_begin(&g, 0);
  air_part err = {.kind = AIR_PART_ERROR,
                  .name = "overloaded_error",
                  .name_len = 16,
                  .text = "Overloaded",
                  .text_len = 10};
  assert_int_equal(feed1(&g, err, NULL), 1);
  assert_int_equal(g.reason, AIR_REASON_OVERLOADED);
  assert_false(g.judged);
  assert_int_equal(o.events, 0);
  /* A cut stream before commit is a network failure. */
  air__gate_begin(&g, 0);
  feed1(&g, kind(AIR_PART_START), NULL);
  assert_int_equal(air__gate_end(&g, false, 10), 1);
  assert_int_equal(g.reason, AIR_REASON_NETWORK);
  assert_int_equal(o.events, 0);
  air__gate_cleanup(&g);
}

/* A judged finish before content is judged at the stream's end: the usage
 * and the terminator that follow it are held, and a judged answer passed
 * on carries them; nothing after the finish commits. */
static void test_judged_finish_keeps_what_follows(void **s) {
  (void)s;
  air__gate g;
  out o;
  gate_new(&g, &o, AIR__COMMIT_FIRST_CONTENT, false);
  assert_int_equal(feed1(&g, kind(AIR_PART_START), "s"), 0);
  assert_int_equal(feed1(&g, finish(AIR_FINISH_CONTENT_FILTER), "f"), 0);
  air_part u = {.kind = AIR_PART_USAGE, .input_tokens = 3};
  air__gate_event ev = {"u", 1, &u, 1, AIR__EV_USAGE_ONLY};
  assert_int_equal(air__gate_feed(&g, &ev, 300), 0);
  assert_int_equal(feed1(&g, text("late"), "t"), 0);
  assert_int_equal(g.state, AIR__GATE_HOLDING);
  assert_int_equal(o.events, 0);
  assert_int_equal(air__gate_end(&g, true, 400), 1);
  assert_int_equal(g.reason, AIR_REASON_CONTENT_FILTER);
  assert_true(g.judged);
  assert_int_equal(air__gate_release_judged(&g), 0);
  assert_string_equal(o.log, "[s]S[f]F[u]U[t]late");
  air__gate_cleanup(&g);
}

static void test_malformed_budget(void **s) {
  (void)s;
  air__gate g;
  out o;
  gate_new(&g, &o, AIR__COMMIT_FIRST_CONTENT, false);
  assert_int_equal(air__gate_malformed(&g), 0);
  assert_int_equal(air__gate_malformed(&g), 0);
  assert_int_equal(air__gate_malformed(&g), 1); /* more than max_malformed 2 */
  assert_int_equal(g.reason, AIR_REASON_MALFORMED);
  air__gate_cleanup(&g);
  /* malformed: fail */
  memset(&o, 0, sizeof(o));
  air__gate_cfg cfg = {.commit = AIR__COMMIT_FIRST_CONTENT,
                       .max_malformed = 3,
                       .malformed = AIR__MALFORMED_FAIL,
                       .chunk_ms = 1,
                       .first_chunk_ms = 1};
  assert_int_equal(air__gate_init(&g, &cfg, emit, &o), 0);
  air__gate_begin(&g, 0);
  assert_int_equal(air__gate_malformed(&g), 1);
  air__gate_cleanup(&g);
}

static void test_complete_mode_judges_then_releases(void **s) {
  (void)s;
  air__gate g;
  out o;
  gate_new(&g, &o, AIR__COMMIT_COMPLETE, false);
  feed1(&g, text("Hello"), NULL);
  feed1(&g, text(" there"), NULL);
  assert_int_equal(o.events, 0);
  feed1(&g, finish(AIR_FINISH_LENGTH), NULL);
  assert_int_equal(o.events, 0);
  assert_int_equal(air__gate_end(&g, true, 0), 1);
  assert_int_equal(g.reason, AIR_REASON_LENGTH);
  assert_true(g.judged);
  /* As the final answer it is released unchanged. */
  assert_int_equal(air__gate_release_judged(&g), 0);
  assert_string_equal(o.log, "Hello thereF");
  /* A refusal phrase anywhere fails; nothing released. */
  memset(&o, 0, sizeof(o));
  air__gate_begin(&g, 0);
  feed1(&g, text("Well. I'M SORRY, BUT I cannot assist."), NULL);
  feed1(&g, finish(AIR_FINISH_STOP), NULL);
  assert_int_equal(air__gate_end(&g, true, 0), 1);
  assert_int_equal(g.reason, AIR_REASON_REFUSAL);
  assert_int_equal(air__gate_release_judged(&g), AIR_ESTATE);
  assert_int_equal(o.events, 0);
  air__gate_cleanup(&g);
}

static void test_complete_mode_json_check(void **s) {
  (void)s;
  air__gate g;
  out o;
  gate_new(&g, &o, AIR__COMMIT_COMPLETE, true);
  feed1(&g, text("{\"a\": "), NULL);
  feed1(&g, finish(AIR_FINISH_STOP), NULL);
  assert_int_equal(air__gate_end(&g, true, 0), 1);
  assert_int_equal(g.reason, AIR_REASON_MALFORMED);
  air__gate_begin(&g, 0);
  feed1(&g, text("{\"a\": "), NULL);
  feed1(&g, text("[1, 2]}"), NULL);
  feed1(&g, finish(AIR_FINISH_STOP), NULL);
  assert_int_equal(air__gate_end(&g, true, 0), 0);
  assert_string_equal(o.log, "{\"a\": [1, 2]}F");
  air__gate_cleanup(&g);
}

static void test_deadline_bookkeeping(void **s) {
  (void)s;
  air__gate g;
  out o;
  gate_new(&g, &o, AIR__COMMIT_FIRST_CONTENT, false);
  air_reason which;
  /* begun at 100: until content only first_chunk_ms counts (3100), even
   * though chunk_ms (1000) is shorter. */
  assert_int_equal(air__gate_deadline(&g, &which), 3100);
  assert_int_equal(which, AIR_REASON_TIMEOUT_FIRST_CHUNK);
  air__gate_event ev = {NULL, 0, NULL, 0, 0};
  air_part st = kind(AIR_PART_START);
  ev.parts = &st;
  ev.n_parts = 1;
  air__gate_feed(&g, &ev, 2500);
  assert_int_equal(air__gate_deadline(&g, &which), 3100);
  assert_int_equal(which, AIR_REASON_TIMEOUT_FIRST_CHUNK);
  air_part t = text("x");
  ev.parts = &t;
  air__gate_feed(&g, &ev, 2600);
  assert_int_equal(air__gate_deadline(&g, &which), 3600);
  assert_int_equal(which, AIR_REASON_TIMEOUT_CHUNK);
  air__gate_cleanup(&g);
}

/* Feeds one event of parts at now; its flags as given. */
static void feed_at(air__gate *g, air_part *parts, size_t n, unsigned flags,
                    uint64_t now) {
  air__gate_event ev = {NULL, 0, parts, n, flags};
  air__gate_feed(g, &ev, now);
}

/*
 * chunk_ms is the gap between progress events: after commit, a ping (an
 * event without parts), an empty delta and a usage-only event leave the
 * deadline where the last content put it; text, a tool call's arguments, a
 * finish and a server-tool event move it on. A resume after the caller's
 * pause moves it to the resume.
 */
static void test_chunk_deadline_counts_progress_only(void **s) {
  (void)s;
  air__gate g;
  out o;
  gate_new(&g, &o, AIR__COMMIT_FIRST_CONTENT, false);
  air_reason which;
  air_part t = text("hello there");
  feed_at(&g, &t, 1, 0, 1000); /* commits (no phrase prefix) */
  assert_int_equal(air__gate_deadline(&g, &which), 2000);
  assert_int_equal(which, AIR_REASON_TIMEOUT_CHUNK);
  feed_at(&g, NULL, 0, 0, 1500); /* ping */
  air_part empty = text("");
  feed_at(&g, &empty, 1, 0, 1600); /* empty delta */
  air_part u = kind(AIR_PART_USAGE);
  feed_at(&g, &u, 1, AIR__EV_USAGE_ONLY, 1700); /* usage only */
  assert_int_equal(air__gate_deadline(&g, &which), 2000);
  feed_at(&g, NULL, 0, AIR__EV_SERVER_TOOL, 1800); /* a server tool runs */
  assert_int_equal(air__gate_deadline(&g, &which), 2800);
  air_part td = {.kind = AIR_PART_TOOL_DELTA, .text = "{", .text_len = 1};
  feed_at(&g, &td, 1, 0, 1900);
  assert_int_equal(air__gate_deadline(&g, &which), 2900);
  air__gate_resumed(&g, 5000);
  assert_int_equal(air__gate_deadline(&g, &which), 6000);
  air_part f = finish(AIR_FINISH_STOP);
  feed_at(&g, &f, 1, 0, 5500);
  assert_int_equal(air__gate_deadline(&g, &which), 6500);
  air__gate_cleanup(&g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_holds_until_first_content),
      cmocka_unit_test(test_refusal_phrase_fails_with_nothing_released),
      cmocka_unit_test(
          test_short_answer_that_is_a_phrase_prefix_is_released_at_end),
      cmocka_unit_test(test_non_text_first_content_commits_at_once),
      cmocka_unit_test(test_soft_failures_before_content),
      cmocka_unit_test(test_judged_finish_keeps_what_follows),
      cmocka_unit_test(test_malformed_budget),
      cmocka_unit_test(test_complete_mode_judges_then_releases),
      cmocka_unit_test(test_complete_mode_json_check),
      cmocka_unit_test(test_deadline_bookkeeping),
      cmocka_unit_test(test_chunk_deadline_counts_progress_only),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
