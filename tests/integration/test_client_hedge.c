/*
 * Hedged first content (docs/design.md §3.6) through the client against
 * `airetry mock`: a primary whose first content is late (slow=MS) is
 * hedged after hedge.after_ms, the fallback's answer arrives about then,
 * and the primary's upstream connection is closed at once (the mock's log:
 * hung_up_ms within 100 ms of the fallback's arrival, which is when it
 * sends its first content).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

/* Upper slack on a measured time (loaded 2-core CI, ASan). */
#define SLACK_MS 400
#define EARLY_MS 15
/* The loser's connection closes this soon after the winner's content. */
#define CLOSE_MS 100

static void client_for(it_client *cl, const char *targets, const char *extra) {
  char tail[2048];
  snprintf(tail, sizeof(tail),
           "defaults:\n"
           "  breaker: {failures: 1}\n"
           "routes:\n"
           "  - name: r\n"
           "    targets: %s\n"
           "    hedge: {after_ms: 300}\n"
           "%s",
           targets, extra ? extra : "");
  assert_int_equal(it_client_new(it_suite(), tail, 1, cl), 0);
}

static void call(it_client *cl, it_call *c, bool stream) {
  memset(c, 0, sizeof(*c));
  c->dialect = AIR_DIALECT_OPENAI;
  c->model = "r";
  c->stream = stream;
  it_chat(cl->client, c);
}

static void expect_text(const it_call *c, const char *model, unsigned tokens) {
  char want[512];
  it_answer(model, tokens, want, sizeof(want));
  if (c->rc != 0) it_call_print(c);
  assert_int_equal(c->rc, 0);
  assert_string_equal(c->stream ? c->text : c->res->text, want);
}

static void expect_between(const char *what, int64_t got, int64_t lo,
                           int64_t hi) {
  if (got < lo || got > hi) {
    fprintf(stderr, "%s: %lld ms, expected %lld..%lld\n", what, (long long)got,
            (long long)lo, (long long)hi);
    fail();
  }
}

/* A slow primary is hedged: the fallback answers after about after_ms, the
 * primary loses (hedge_lost, no breaker verdict) and its connection is
 * closed within CLOSE_MS of the fallback's first content. Streaming and
 * not (a non-streaming caller races to the first content part too). */
static void test_slow_primary_is_hedged(void **state) {
  (void)state;
  it_client cl;
  client_for(&cl, "[mo/h@slow=5000, mo/f]", NULL);
  for (int stream = 0; stream < 2; stream++) {
    assert_int_equal(it_mock_reset(it_suite()), 0);
    it_call c;
    call(&cl, &c, stream);
    expect_text(&c, "f", 8);
    expect_between("first content", (int64_t)c.res->first_content_ms,
                   300 - EARLY_MS, 300 + SLACK_MS);
    assert_int_equal(c.res->n_log, 2);
    assert_true(c.res->log[0].hedge_lost);
    assert_int_equal(c.res->log[0].reason, AIR_REASON_NONE);
    assert_true(c.res->log[1].hedge);
    assert_false(c.res->log[1].hedge_lost);
    assert_string_equal(c.res->log[1].target, "mo/f");
    it_log log;
    assert_int_equal(it_mock_log_settled(it_suite(), 2, 3000, &log), 0);
    const char *models[] = {"h@slow=5000", "f"};
    assert_true(it_log_models(&log, 2, models));
    /* The hedge reached the mock after_ms after the primary. */
    expect_between("hedge start", log.e[1].t_ms - log.e[0].t_ms, 300 - 60,
                   300 + SLACK_MS);
    /* The loser's connection closed right after the winner's content,
     * long before its own first content (5 s). */
    assert_true(log.e[0].hung_up);
    expect_between("loser closed", log.e[0].hung_up_ms - log.e[1].t_ms, 0,
                   CLOSE_MS);
    assert_false(log.e[1].hung_up);
    /* A lost race is no failure: with the breaker at failures: 1 the
     * second call still starts on the primary (the models above). */
    it_call_cleanup(&c);
  }
  it_client_free(&cl);
}

/* The primary answers before after_ms: no hedge is sent at all. */
static void test_fast_primary_is_not_hedged(void **state) {
  (void)state;
  it_client cl;
  client_for(&cl, "[mo/a, mo/f]", NULL);
  it_call c;
  call(&cl, &c, true);
  expect_text(&c, "a", 8);
  assert_int_equal(c.res->n_log, 1);
  it_log log;
  assert_int_equal(it_mock_log_exactly(it_suite(), 1, 3000, &log), 0);
  it_call_cleanup(&c);
  it_client_free(&cl);
}

/* The hedge fails while the primary runs: only the hedge stops, and the
 * late primary's answer is the caller's. */
static void test_failed_hedge_leaves_primary(void **state) {
  (void)state;
  it_client cl;
  client_for(&cl, "[mo/h@slow=800, mo/e@500]",
             "    rules: [{on: server_error, action: fail}]\n");
  it_call c;
  call(&cl, &c, true);
  expect_text(&c, "h@slow=800", 8);
  assert_int_equal(c.res->n_log, 2);
  assert_int_equal(c.res->log[1].reason, AIR_REASON_SERVER_ERROR);
  assert_true(c.res->log[1].hedge);
  assert_false(c.res->log[0].hedge_lost);
  it_log log;
  assert_int_equal(it_mock_log_exactly(it_suite(), 2, 3000, &log), 0);
  assert_false(log.e[0].hung_up);
  it_call_cleanup(&c);
  it_client_free(&cl);
}

int main(void) {
  it_case_filter();
  const struct CMUnitTest tests[] = {
      IT_TEST(test_slow_primary_is_hedged),
      IT_TEST(test_fast_primary_is_not_hedged),
      IT_TEST(test_failed_hedge_leaves_primary),
  };
  return cmocka_run_group_tests(tests, it_group_setup, it_group_teardown);
}
