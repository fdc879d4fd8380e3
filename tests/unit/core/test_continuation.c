/*
 * Continuation after commit (docs/design.md §3.5) in the run state machine,
 * driven with a fake clock: which failures are continued, where and in
 * which style, what continuation.max, the shared budget, max_gap_ms, the
 * breaker, a rejected prefill and a learned style do, and that nothing is
 * hedged after commit.
 */
#include "helpers.h"

#include <stdlib.h>

#include "engine.h"
#include "policy.h"
#include "state.h"

#define PROVIDERS                                                 \
  "providers:\n"                                                  \
  "  - {name: a, api: anthropic, base_url: http://127.0.0.1:1,\n" \
  "     breaker: {failures: 9, open_ms: 1000}}\n"                 \
  "  - {name: b, api: anthropic, base_url: http://127.0.0.1:1,\n" \
  "     breaker: {failures: 9, open_ms: 1000}}\n"                 \
  "  - {name: o, api: openai, base_url: http://127.0.0.1:1/v1}\n" \
  "  - {name: v, api: openai, base_url: http://127.0.0.1:1/v1,\n" \
  "     continuation_style: vllm}\n"

/* Every upstream failure retried on the same target at once, up to max
 * times, then a switch: keeps the rules out of the way of what is tested. */
#define RULES                                                        \
  "    rules:\n"                                                     \
  "      - on: [network, timeout.chunk, overloaded, server_error,\n" \
  "             malformed, rate_limit, timeout.first_byte]\n"        \
  "        action: retry\n"                                          \
  "        max: unlimited\n"                                         \
  "        backoff: {base_ms: 0, max_ms: 0, jitter: none}\n"

#define ROUTE(targets, extra) \
  PROVIDERS                   \
  "routes:\n"                 \
  "  - name: r\n"             \
  "    targets: " targets "\n" extra

typedef test_run fx;

static void fx_run(fx *f) {
  test_run_again(f, "r");
}

static void fx_start(fx *f, const char *yaml) {
  test_run_start(f, yaml, "r", 7);
}

static void fx_end(fx *f) {
  test_run_end(f);
}

static void fail_h(fx *f, unsigned id, air_reason reason, int status,
                   const air_header *h, size_t nh) {
  test_run_fail(f, id, reason, status, h, nh, 0);
}

static void fail_id(fx *f, unsigned id, air_reason reason) {
  fail_h(f, id, reason, 0, NULL, 0);
}

/* The current ATTEMPT commits: returns its id. */
static unsigned commit_now(fx *f) {
  assert_true(f->act.kind == AIR_ACT_ATTEMPT ||
              f->act.kind == AIR_ACT_CONTINUE);
  unsigned id = f->act.attempt_id;
  assert_int_equal(air_run_ready_to_commit(f->run, id, f->now, &f->act), 0);
  assert_int_equal(f->act.kind, AIR_ACT_COMMIT);
  assert_int_equal(f->act.attempt_id, id);
  return id;
}

static void expect_continue(const fx *f, unsigned n, const char *target,
                            air_cont_style style) {
  assert_int_equal(f->act.kind, AIR_ACT_CONTINUE);
  assert_int_equal(f->act.attempt, n);
  assert_string_equal(f->act.target, target);
  assert_int_equal(f->act.style, (unsigned)style);
  assert_int_equal(f->act.hedge_at_ms, 0);
  const air_attempt *e =
      air_run_attempt(f->run, air_run_attempt_count(f->run) - 1);
  assert_true(e->continuation);
  assert_int_equal(e->n, n);
}

static void expect_fail(const fx *f, air_reason reason) {
  assert_int_equal(f->act.kind, AIR_ACT_FAIL);
  assert_int_equal(f->act.reason, reason);
}

/* ---- tests ----------------------------------------------------------------
 */

static void off_by_default(void **s) {
  (void)s;
  fx f;
  fx_start(&f, ROUTE("[a/m, b/m]", RULES));
  unsigned id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_NETWORK);
  expect_fail(&f, AIR_REASON_NETWORK);
  assert_int_equal(air_run_attempt_count(f.run), 1);
  fx_end(&f);
}

/* Not continued, a committed attempt's timeout past total_ms reads
 * timeout.total, exactly as without continuation. */
static void not_continued_is_as_before(void **s) {
  (void)s;
  for (int on = 0; on <= 1; on++) {
    fx f;
    fx_start(&f, on ? ROUTE("[a/m]",
                            "    continuation: {max: 1}\n"
                            "    timeouts: {total_ms: 3000}\n"
                            "    rules: [{on: network, action: "
                            "fail}]\n")
                    : ROUTE("[a/m]",
                            "    timeouts: {total_ms: 3000}\n"
                            "    rules: [{on: network, action: "
                            "fail}]\n"));
    unsigned id = commit_now(&f);
    f.now = 9000;
    fail_id(&f, id, AIR_REASON_TIMEOUT_CHUNK);
    expect_fail(&f, AIR_REASON_TIMEOUT_TOTAL);
    const air_attempt *e = air_run_attempt(f.run, 0);
    assert_int_equal(e->reason, AIR_REASON_TIMEOUT_TOTAL);
    assert_string_equal(e->message, "a/m: boom (timeout.total)");
    fx_end(&f);
  }
}

static void continue_commit_done(void **s) {
  (void)s;
  fx f;
  fx_start(&f, ROUTE("[a/m]",
                     "    continuation: {}\n"
                     "    timeouts: {chunk_ms: 7000, total_ms: "
                     "3000}\n" RULES));
  unsigned id = commit_now(&f);
  /* Past total_ms: it does not apply after commit (no timeout.total). */
  f.now = 5000;
  fail_id(&f, id, AIR_REASON_TIMEOUT_CHUNK);
  expect_continue(&f, 2, "a/m", AIR_CONT_PREFILL);
  /* The rescue ends max_gap_ms (default: chunk_ms) after the failure. */
  assert_int_equal(f.act.deadline_ms, 5000 + 7000);
  unsigned c = f.act.attempt_id;
  assert_true(c != id);
  /* Old ids are over; the continuation's first content commits it. */
  assert_int_equal(air_run_ready_to_commit(f.run, id, f.now, &f.act),
                   AIR_ESTATE);
  /* air_run_first_part (a hedge race's signal) says nothing else to do. */
  assert_int_equal(air_run_first_part(f.run, c, f.now, &f.act), 0);
  assert_int_equal(f.act.kind, AIR_ACT_IDLE);
  assert_int_equal(air_run_ready_to_commit(f.run, c, f.now, &f.act), 0);
  assert_int_equal(f.act.kind, AIR_ACT_COMMIT);
  assert_int_equal(f.act.attempt_id, c);
  assert_int_equal(air_run_succeed(f.run, c, f.now, &f.act), 0);
  assert_int_equal(f.act.kind, AIR_ACT_DONE);
  assert_int_equal(f.act.attempt_id, c);
  assert_int_equal(air_run_attempt_count(f.run), 2);
  assert_int_equal(air_run_attempt(f.run, 0)->reason, AIR_REASON_TIMEOUT_CHUNK);
  assert_false(air_run_attempt(f.run, 0)->continuation);
  assert_int_equal(air_run_attempt(f.run, 1)->reason, AIR_REASON_NONE);
  fx_end(&f);
}

static void which_reasons_continue(void **s) {
  (void)s;
  static const struct {
    air_reason r;
    bool cont;
  } cases[] = {
      {AIR_REASON_NETWORK, true},         {AIR_REASON_TIMEOUT_CHUNK, true},
      {AIR_REASON_OVERLOADED, true},      {AIR_REASON_SERVER_ERROR, true},
      {AIR_REASON_MALFORMED, true},       {AIR_REASON_BAD_REQUEST, false},
      {AIR_REASON_RATE_LIMIT, false},     {AIR_REASON_CONTEXT_OVERFLOW, false},
      {AIR_REASON_CONTENT_FILTER, false}, {AIR_REASON_ABORTED, false},
      {AIR_REASON_AUTH, false},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    fx f;
    /* Rules that would act on every reason: only the reason decides. */
    fx_start(&f, ROUTE("[a/m]",
                       "    continuation: {max: 1}\n"
                       "    rules:\n"
                       "      - on: [network, timeout.chunk, "
                       "overloaded, server_error, malformed,\n"
                       "             bad_request, rate_limit, "
                       "context_overflow, content_filter, auth]\n"
                       "        action: retry\n"
                       "        max: unlimited\n"
                       "        backoff: {base_ms: 0, max_ms: 0, "
                       "jitter: none}\n"));
    unsigned id = commit_now(&f);
    fail_id(&f, id, cases[i].r);
    if (cases[i].cont) {
      expect_continue(&f, 2, "a/m", AIR_CONT_PREFILL);
    } else {
      expect_fail(&f, cases[i].r);
      assert_int_equal(air_run_attempt_count(f.run), 1);
    }
    fx_end(&f);
  }
}

static void max_bounds_continuations(void **s) {
  (void)s;
  fx f;
  fx_start(&f, ROUTE("[a/m]",
                     "    continuation: {max: 2}\n"
                     "    budget: {max_total_attempts: 10}\n" RULES));
  unsigned id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_TIMEOUT_CHUNK);
  expect_continue(&f, 2, "a/m", AIR_CONT_PREFILL);
  id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_OVERLOADED);
  expect_continue(&f, 3, "a/m", AIR_CONT_PREFILL);
  id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_NETWORK);
  expect_fail(&f, AIR_REASON_NETWORK);
  assert_int_equal(air_run_attempt_count(f.run), 3);
  fx_end(&f);
}

/* 429, 429, then a cut: with max_total_attempts 3 the budget is spent. */
static void budget_is_shared(void **s) {
  (void)s;
  for (int total = 3; total <= 4; total++) {
    const char *text =
        total == 3 ? ROUTE("[a/m]",
                           "    continuation: {max: 2}\n"
                           "    budget: {max_total_attempts: 3}\n" RULES)
                   : ROUTE("[a/m]",
                           "    continuation: {max: 2}\n"
                           "    budget: {max_total_attempts: 4}\n" RULES);
    fx f;
    fx_start(&f, text);
    fail_id(&f, f.act.attempt_id, AIR_REASON_RATE_LIMIT);
    assert_int_equal(f.act.kind, AIR_ACT_WAIT);
    assert_int_equal(air_run_wait_done(f.run, f.act.attempt_id, f.now, &f.act),
                     0);
    fail_id(&f, f.act.attempt_id, AIR_REASON_RATE_LIMIT);
    assert_int_equal(air_run_wait_done(f.run, f.act.attempt_id, f.now, &f.act),
                     0);
    unsigned id = commit_now(&f);
    fail_id(&f, id, AIR_REASON_NETWORK);
    if (total == 3) {
      expect_fail(&f, AIR_REASON_NETWORK);
    } else {
      expect_continue(&f, 4, "a/m", AIR_CONT_PREFILL);
      /* The continuation spent the last attempt: no other follows. */
      id = commit_now(&f);
      fail_id(&f, id, AIR_REASON_NETWORK);
      expect_fail(&f, AIR_REASON_NETWORK);
    }
    fx_end(&f);
  }
}

static void per_reason_budget(void **s) {
  (void)s;
  fx f;
  fx_start(&f, ROUTE("[a/m]",
                     "    continuation: {}\n"
                     "    budget: {per_reason: {network: 1}}\n" RULES));
  unsigned id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_NETWORK);
  expect_fail(&f, AIR_REASON_NETWORK);
  fx_end(&f);
}

#define SWITCH_RULES \
  "    rules:\n"     \
  "      - {on: [timeout.chunk, network], action: switch}\n"

static void same_model_or_any(void **s) {
  (void)s;
  fx f;
  /* same_model (default): b/m continues a/m's answer, a/other never. */
  fx_start(&f, ROUTE("[a/m, a/other, b/m]",
                     "    continuation: {max: 5}\n" SWITCH_RULES));
  unsigned id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_TIMEOUT_CHUNK);
  expect_continue(&f, 2, "b/m", AIR_CONT_PREFILL);
  id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_TIMEOUT_CHUNK);
  expect_fail(&f, AIR_REASON_TIMEOUT_CHUNK);
  fx_end(&f);

  fx_start(&f,
           ROUTE("[a/m, a/other, b/m]",
                 "    continuation: {max: 5, targets: any}\n" SWITCH_RULES));
  id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_TIMEOUT_CHUNK);
  expect_continue(&f, 2, "a/other", AIR_CONT_PREFILL);
  id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_TIMEOUT_CHUNK);
  expect_continue(&f, 3, "b/m", AIR_CONT_PREFILL);
  fx_end(&f);
}

/* openai targets default to style none: never asked to continue; a
 * configured style (vllm) makes one eligible. */
static void none_style_is_skipped(void **s) {
  (void)s;
  fx f;
  fx_start(&f, ROUTE("[o/m, v/m, a/m]", "    continuation: {}\n" RULES
                                        "      - {on: network, action: "
                                        "switch}\n"));
  unsigned id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_NETWORK);
  /* retry on o/m cannot continue: the walk goes on to the switch. */
  expect_continue(&f, 2, "v/m", AIR_CONT_VLLM);
  fx_end(&f);

  /* A one-target route whose target cannot continue fails as before. */
  fx_start(&f, ROUTE("[o/m]", "    continuation: {}\n" RULES));
  id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_NETWORK);
  expect_fail(&f, AIR_REASON_NETWORK);
  fx_end(&f);
}

static void limits_never_and_no_instruct(void **s) {
  (void)s;
  fx f;
  fx_start(&f, ROUTE("[a/m]", "    continuation: {}\n" RULES));
  unsigned id = commit_now(&f);
  assert_int_equal(air_run_limit_continuation(f.run, AIR_CONTF_NEVER), 0);
  fail_id(&f, id, AIR_REASON_NETWORK);
  expect_fail(&f, AIR_REASON_NETWORK);
  assert_int_equal(air_run_attempt_count(f.run), 1);
  assert_int_equal(air_run_limit_continuation(NULL, 1), AIR_EINVAL);
  fx_end(&f);

  /* NO_INSTRUCT: an instruct target is not eligible, a prefill one is. */
  fx_start(&f, ROUTE("[{target: a/m, continuation_style: instruct}, b/m]",
                     "    continuation: {}\n" SWITCH_RULES));
  id = commit_now(&f);
  assert_int_equal(air_run_limit_continuation(f.run, AIR_CONTF_NO_INSTRUCT), 0);
  fail_id(&f, id, AIR_REASON_NETWORK);
  expect_continue(&f, 2, "b/m", AIR_CONT_PREFILL);
  fx_end(&f);

  fx_start(&f, ROUTE("[a/x, {target: b/x, continuation_style: instruct}]",
                     "    continuation: {}\n" SWITCH_RULES));
  id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_NETWORK);
  expect_continue(&f, 2, "b/x", AIR_CONT_INSTRUCT);
  fx_end(&f);

  fx_start(&f, ROUTE("[a/x, {target: b/x, continuation_style: instruct}]",
                     "    continuation: {}\n" SWITCH_RULES));
  id = commit_now(&f);
  assert_int_equal(air_run_limit_continuation(f.run, AIR_CONTF_NO_INSTRUCT), 0);
  fail_id(&f, id, AIR_REASON_NETWORK);
  expect_fail(&f, AIR_REASON_NETWORK);
  fx_end(&f);
}

#define SLOW_RETRY                                                            \
  "    rules:\n"                                                              \
  "      - on: [network, rate_limit]\n"                                       \
  "        action: retry\n"                                                   \
  "        max: unlimited\n"                                                  \
  "        backoff: {base_ms: 5000, factor: 1, max_ms: 5000, jitter: none}\n" \
  "        retry_after: {max_ms: 60000}\n"                                    \
  "      - {on: [network, rate_limit], action: switch}\n"

static void waits_bounded_by_max_gap(void **s) {
  (void)s;
  fx f;
  /* A 5 s backoff inside a 10 s rescue: WAIT, then CONTINUE. */
  fx_start(&f, ROUTE("[a/m]",
                     "    continuation: {max_gap_ms: 10000}\n"
                     "    timeouts: {total_ms: 2000}\n" SLOW_RETRY));
  unsigned id = commit_now(&f);
  f.now = 20000; /* total_ms is long past: it does not apply after commit */
  fail_id(&f, id, AIR_REASON_NETWORK);
  assert_int_equal(f.act.kind, AIR_ACT_WAIT);
  assert_int_equal(f.act.wait_ms, 5000);
  assert_int_equal(f.act.hedge_at_ms, 0);
  f.now += 5000;
  assert_int_equal(air_run_wait_done(f.run, id, f.now, &f.act), 0);
  expect_continue(&f, 2, "a/m", AIR_CONT_PREFILL);
  assert_int_equal(f.act.deadline_ms, 30000);
  /* The continuation fails before content: decided again, same rescue. */
  unsigned c = f.act.attempt_id;
  f.now += 1000;
  fail_id(&f, c, AIR_REASON_NETWORK);
  /* 26000 + 5000 would reach the rescue's end (30000): no wait. */
  expect_fail(&f, AIR_REASON_NETWORK);
  fx_end(&f);

  /* A 5 s backoff with a 3 s max_gap_ms: not taken. */
  fx_start(&f,
           ROUTE("[a/m]", "    continuation: {max_gap_ms: 3000}\n" SLOW_RETRY));
  id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_NETWORK);
  expect_fail(&f, AIR_REASON_NETWORK);
  fx_end(&f);

  /* The wait_done after the rescue's end fails. */
  fx_start(&f,
           ROUTE("[a/m]", "    continuation: {max_gap_ms: 6000}\n" SLOW_RETRY));
  id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_NETWORK);
  assert_int_equal(f.act.kind, AIR_ACT_WAIT);
  f.now += 6000;
  assert_int_equal(air_run_wait_done(f.run, id, f.now, &f.act), 0);
  expect_fail(&f, AIR_REASON_NETWORK);
  fx_end(&f);

  /* A Retry-After beyond the rescue: switch to a target that can go now. */
  static const air_header ra = {"retry-after", 11, "8", 1};
  fx_start(&f, ROUTE("[a/m, b/m]",
                     "    continuation: {max_gap_ms: 6000}\n"
                     "    rules:\n"
                     "      - on: overloaded\n"
                     "        action: retry\n"
                     "        retry_after: {max_ms: 60000}\n"));
  id = commit_now(&f);
  fail_h(&f, id, AIR_REASON_OVERLOADED, 529, &ra, 1);
  expect_continue(&f, 2, "b/m", AIR_CONT_PREFILL);
  fx_end(&f);
}

static void continuation_failing_before_content(void **s) {
  (void)s;
  fx f;
  fx_start(&f, ROUTE("[a/m]", "    continuation: {max: 3}\n" RULES));
  unsigned id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_NETWORK);
  expect_continue(&f, 2, "a/m", AIR_CONT_PREFILL);
  /* Its start deadline: decided again. */
  fail_id(&f, f.act.attempt_id, AIR_REASON_TIMEOUT_FIRST_BYTE);
  expect_continue(&f, 3, "a/m", AIR_CONT_PREFILL);
  /* A bad request (our continuation request): never again. */
  fail_id(&f, f.act.attempt_id, AIR_REASON_BAD_REQUEST);
  expect_fail(&f, AIR_REASON_BAD_REQUEST);
  fx_end(&f);
}

static void prefill_rejected_asks_instruct_once(void **s) {
  (void)s;
  fx f;
  /* max 1 and 2 attempts: the rejected prefill counts for neither. */
  fx_start(&f, ROUTE("[a/m]",
                     "    continuation: {max: 1, instruct: true}\n"
                     "    budget: {max_total_attempts: 2}\n" RULES));
  unsigned id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_NETWORK);
  expect_continue(&f, 2, "a/m", AIR_CONT_PREFILL);
  uint64_t end = f.act.deadline_ms;
  unsigned p = f.act.attempt_id;
  f.now += 100;
  assert_int_equal(air_run_prefill_rejected(f.run, p, f.now, &f.act), 0);
  expect_continue(&f, 3, "a/m", AIR_CONT_INSTRUCT);
  assert_int_equal(f.act.deadline_ms, end);
  const air_attempt *e = air_run_attempt(f.run, 1);
  assert_true(e->prefill_rejected);
  assert_int_equal(e->reason, AIR_REASON_BAD_REQUEST);
  assert_int_equal(e->status, 400);
  /* The breaker did not count it. */
  assert_int_equal(air_state_breaker(f.st, "a/m", f.now), AIR_BREAKER_CLOSED);
  unsigned c = commit_now(&f);
  assert_int_equal(air_run_succeed(f.run, c, f.now, &f.act), 0);
  assert_int_equal(f.act.kind, AIR_ACT_DONE);
  fx_end(&f);

  /* Once per target per request: a second rejection is a failure. */
  fx_start(&f, ROUTE("[{target: a/m, continuation_style: prefill}]",
                     "    continuation: {max: 3, instruct: true}\n" RULES));
  id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_NETWORK);
  assert_int_equal(
      air_run_prefill_rejected(f.run, f.act.attempt_id, f.now, &f.act), 0);
  expect_continue(&f, 3, "a/m", AIR_CONT_INSTRUCT);
  id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_NETWORK);
  /* Configured prefill, but in this request it is known to fail. */
  expect_continue(&f, 4, "a/m", AIR_CONT_INSTRUCT);
  assert_int_equal(
      air_run_prefill_rejected(f.run, f.act.attempt_id, f.now, &f.act), 0);
  expect_fail(&f, AIR_REASON_BAD_REQUEST);
  fx_end(&f);

  /* Without continuation.instruct: an ordinary bad_request. */
  fx_start(&f, ROUTE("[a/m]", "    continuation: {max: 3}\n" RULES));
  id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_NETWORK);
  assert_int_equal(
      air_run_prefill_rejected(f.run, f.act.attempt_id, f.now, &f.act), 0);
  expect_fail(&f, AIR_REASON_BAD_REQUEST);
  assert_false(air_run_attempt(f.run, 1)->prefill_rejected);
  fx_end(&f);
}

/* Rejects a/m's prefill in one request of f (route with instruct). */
static void learn_instruct(fx *f) {
  fx_run(f);
  unsigned id = commit_now(f);
  fail_id(f, id, AIR_REASON_NETWORK);
  assert_int_equal(f->act.style, AIR_CONT_PREFILL);
  assert_int_equal(
      air_run_prefill_rejected(f->run, f->act.attempt_id, f->now, &f->act), 0);
  assert_int_equal(f->act.style, AIR_CONT_INSTRUCT);
}

static void learned_style_and_configured_wins(void **s) {
  (void)s;
  fx f;
  fx_start(
      &f, ROUTE("[a/m]", "    continuation: {max: 3, instruct: true}\n" RULES));
  learn_instruct(&f);
  /* The next request continues a/m with instruct at once. */
  f.now += 1000;
  fx_run(&f);
  unsigned id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_NETWORK);
  expect_continue(&f, 2, "a/m", AIR_CONT_INSTRUCT);
  /* 24 h later it is forgotten. */
  f.now += 86400000;
  fx_run(&f);
  id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_NETWORK);
  expect_continue(&f, 2, "a/m", AIR_CONT_PREFILL);
  fx_end(&f);

  /* b/m's configured prefill wins over a style learned for it. */
  fx_start(&f, ROUTE("[{target: b/m, continuation_style: prefill}]",
                     "    continuation: {max: 3, instruct: true}\n" RULES));
  air__state_style_learn(f.st, "b/m", AIR_CONT_INSTRUCT, f.now);
  assert_int_equal(air__state_style_get(f.st, "b/m", f.now), AIR_CONT_INSTRUCT);
  fx_run(&f);
  id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_NETWORK);
  expect_continue(&f, 2, "b/m", AIR_CONT_PREFILL);
  fx_end(&f);

  /* A provider's configured style wins too (a/m inherits a's). */
  fx_start(&f,
           "providers:\n"
           "  - {name: a, api: anthropic, base_url: http://127.0.0.1:1,\n"
           "     continuation_style: prefill}\n"
           "routes:\n"
           "  - name: r\n"
           "    targets: [a/m]\n"
           "    continuation: {instruct: true}\n" RULES);
  air__state_style_learn(f.st, "a/m", AIR_CONT_INSTRUCT, f.now);
  fx_run(&f);
  id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_NETWORK);
  expect_continue(&f, 2, "a/m", AIR_CONT_PREFILL);
  fx_end(&f);
}

static void breaker_interplay(void **s) {
  (void)s;
  fx f;
  /* a's breaker opens at its first failure: the retry on a/m is skipped
   * and the switch goes to b/m. */
  fx_start(&f,
           "providers:\n"
           "  - {name: a, api: anthropic, base_url: http://127.0.0.1:1,\n"
           "     breaker: {failures: 1, open_ms: 60000}}\n"
           "  - {name: b, api: anthropic, base_url: http://127.0.0.1:1}\n"
           "routes:\n"
           "  - name: r\n"
           "    targets: [a/m, b/m]\n"
           "    continuation: {}\n" RULES
           "      - {on: network, action: switch}\n");
  unsigned id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_NETWORK);
  assert_int_equal(air_state_breaker(f.st, "a/m", f.now), AIR_BREAKER_OPEN);
  expect_continue(&f, 2, "b/m", AIR_CONT_PREFILL);
  fx_end(&f);

  /* Only open targets left: nothing to continue on. */
  fx_start(&f,
           "providers:\n"
           "  - {name: a, api: anthropic, base_url: http://127.0.0.1:1,\n"
           "     breaker: {failures: 1, open_ms: 60000}}\n"
           "routes:\n"
           "  - name: r\n"
           "    targets: [a/m]\n"
           "    continuation: {}\n" RULES);
  id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_NETWORK);
  expect_fail(&f, AIR_REASON_NETWORK);
  fx_end(&f);
}

/* A continuation is never hedged (docs/design.md §3.6 is about first content).
 */
static void no_hedge_after_commit(void **s) {
  (void)s;
  fx f;
  fx_start(&f, ROUTE("[a/m, b/m]",
                     "    continuation: {}\n"
                     "    hedge: {after_ms: 100, max: 3}\n" RULES));
  assert_true(f.act.hedge_at_ms != 0);
  unsigned id = commit_now(&f);
  assert_int_equal(f.act.hedge_at_ms, 0);
  fail_id(&f, id, AIR_REASON_NETWORK);
  expect_continue(&f, 2, "b/m", AIR_CONT_PREFILL);
  f.now += 10000;
  assert_int_equal(air_run_hedge(f.run, f.now, &f.act), AIR_ESTATE);
  assert_int_equal(air__run_hedge_at(f.run), 0);
  /* Still one attempt in flight, no CANCEL pending. */
  air_action extra;
  assert_int_equal(air_run_next(f.run, &extra), 0);
  fx_end(&f);
}

/*
 * The target whose stream broke is the last choice for its own
 * continuation: a retry rule continues on another eligible target first
 * (a silent target stalls again), and on the broken one only when no other
 * is eligible (a single target; the others' breakers open; another model
 * under targets: same_model).
 */
static void broken_target_is_last_choice(void **s) {
  (void)s;
  fx f;
  fx_start(&f, ROUTE("[a/m, b/m]", "    continuation: {}\n" RULES));
  unsigned id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_TIMEOUT_CHUNK);
  expect_continue(&f, 2, "b/m", AIR_CONT_PREFILL);
  fx_end(&f);

  fx_start(&f, ROUTE("[a/m]", "    continuation: {}\n" RULES));
  id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_TIMEOUT_CHUNK);
  expect_continue(&f, 2, "a/m", AIR_CONT_PREFILL);
  fx_end(&f);

  fx_start(&f,
           "providers:\n"
           "  - {name: a, api: anthropic, base_url: http://127.0.0.1:1}\n"
           "  - {name: b, api: anthropic, base_url: http://127.0.0.1:1,\n"
           "     breaker: {failures: 1, open_ms: 60000}}\n"
           "routes:\n"
           "  - name: r\n"
           "    targets: [a/m, b/m]\n"
           "    continuation: {}\n" RULES);
  air__state_cool(f.st, "b/m", f.now, 60000);
  assert_int_equal(air_state_breaker(f.st, "b/m", f.now), AIR_BREAKER_OPEN);
  id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_NETWORK);
  expect_continue(&f, 2, "a/m", AIR_CONT_PREFILL);
  fx_end(&f);

  fx_start(&f, ROUTE("[a/m, b/other]",
                     "    continuation: {targets: same_model}\n" RULES));
  id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_TIMEOUT_CHUNK);
  expect_continue(&f, 2, "a/m", AIR_CONT_PREFILL);
  fx_end(&f);
}

/* A "provider/model" request runs under defaults: continued when they say
 * so, in its provider's style. */
static void direct_target_continues(void **s) {
  (void)s;
  fx f;
  fx_start(&f, ROUTE("[a/m]", "") "defaults:\n"
                                  "  continuation: {}\n"
                                  "  rules:\n"
                                  "    - on: timeout.chunk\n"
                                  "      action: retry\n"
                                  "      backoff: {base_ms: 0, max_ms: 0, "
                                  "jitter: none}\n");
  air_run_free(f.run);
  f.run = NULL;
  assert_int_equal(
      air_run_new(f.cfg, f.st, "b/x", &f.rng, f.now, &f.run, &f.act), 0);
  unsigned id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_TIMEOUT_CHUNK);
  expect_continue(&f, 2, "b/x", AIR_CONT_PREFILL);
  fx_end(&f);
}

/* A cancel in the middle of a rescue ends it like any other phase. */
static void cancel_during_rescue(void **s) {
  (void)s;
  fx f;
  fx_start(&f, ROUTE("[a/m]", "    continuation: {}\n" SLOW_RETRY));
  unsigned id = commit_now(&f);
  fail_id(&f, id, AIR_REASON_NETWORK);
  assert_int_equal(f.act.kind, AIR_ACT_WAIT);
  assert_int_equal(air_run_cancel(f.run, f.now, &f.act), 0);
  expect_fail(&f, AIR_REASON_ABORTED);
  assert_int_equal(air_run_wait_done(f.run, id, f.now, &f.act), AIR_ESTATE);
  fx_end(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(off_by_default),
      cmocka_unit_test(continue_commit_done),
      cmocka_unit_test(not_continued_is_as_before),
      cmocka_unit_test(which_reasons_continue),
      cmocka_unit_test(max_bounds_continuations),
      cmocka_unit_test(budget_is_shared),
      cmocka_unit_test(per_reason_budget),
      cmocka_unit_test(same_model_or_any),
      cmocka_unit_test(none_style_is_skipped),
      cmocka_unit_test(limits_never_and_no_instruct),
      cmocka_unit_test(waits_bounded_by_max_gap),
      cmocka_unit_test(continuation_failing_before_content),
      cmocka_unit_test(prefill_rejected_asks_instruct_once),
      cmocka_unit_test(learned_style_and_configured_wins),
      cmocka_unit_test(breaker_interplay),
      cmocka_unit_test(no_hedge_after_commit),
      cmocka_unit_test(broken_target_is_last_choice),
      cmocka_unit_test(cancel_during_rescue),
      cmocka_unit_test(direct_target_continues),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
