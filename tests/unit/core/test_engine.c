/*
 * The run state machine, driven with a fake clock: exact attempt sequences,
 * targets and waits for docs/design.md §3.
 */
#include "helpers.h"

#include <stdlib.h>

#include "backoff.h"
#include "policy.h"
#include "engine.h"
#include "limits.h"

#define PROVIDERS                                                 \
  "providers:\n"                                                  \
  "  - {name: p, api: openai, base_url: http://127.0.0.1:1/v1}\n" \
  "  - {name: q, api: anthropic, base_url: http://127.0.0.1:1}\n"

typedef test_run run_fx;

static void fx_start(run_fx *fx, const char *yaml, const char *model) {
  test_run_start(fx, yaml, model, 42);
}

static void fx_new_run(run_fx *fx, const char *model) {
  test_run_again(fx, model);
}

static void fx_end(run_fx *fx) {
  test_run_end(fx);
}

/* Fails the current attempt with a status (and optional headers). */
static void fx_fail(run_fx *fx, air_reason reason, int status,
                    const air_header *h, size_t nh) {
  test_run_fail(fx, fx->act.attempt_id, reason, status, h, nh,
                1700000000000ull);
}

static void expect_attempt(run_fx *fx, unsigned n, const char *target) {
  assert_int_equal(fx->act.kind, AIR_ACT_ATTEMPT);
  assert_int_equal(fx->act.attempt, n);
  assert_string_equal(fx->act.target, target);
}

static void expect_wait(run_fx *fx, uint64_t ms) {
  assert_int_equal(fx->act.kind, AIR_ACT_WAIT);
  assert_int_equal(fx->act.wait_ms, ms);
  fx->now += ms;
  assert_int_equal(
      air_run_wait_done(fx->run, fx->act.attempt_id, fx->now, &fx->act), 0);
}

static void expect_fail(run_fx *fx, air_reason reason) {
  assert_int_equal(fx->act.kind, AIR_ACT_FAIL);
  assert_string_equal(air_reason_name(fx->act.reason), air_reason_name(reason));
}

/* ---- budgets ------------------------------------------------------------- */

#define BUDGET_ROUTE(budget)                                                   \
  PROVIDERS                                                                    \
  "routes:\n"                                                                  \
  "  - name: r\n"                                                              \
  "    targets: [p/a, p/b]\n"                                                  \
  "    budget: " budget                                                        \
  "\n"                                                                         \
  "    rules:\n"                                                               \
  "      - {on: [rate_limit], action: retry, max: 2,\n"                        \
  "         backoff: {base_ms: 100, factor: 2, max_ms: 1000, jitter: none}}\n" \
  "      - {on: [length], action: retry, max: 3,\n"                            \
  "         backoff: {base_ms: 10, factor: 1, max_ms: 10, jitter: none},\n"    \
  "         override: {max_tokens: 8192}}\n"

static void test_shared_budget_429_429_length(void **s) {
  (void)s;
  run_fx fx;
  fx_start(&fx, BUDGET_ROUTE("{max_total_attempts: 3}"), "r");
  expect_attempt(&fx, 1, "p/a");
  fx_fail(&fx, AIR_REASON_RATE_LIMIT, 429, NULL, 0);
  expect_wait(&fx, 100);
  expect_attempt(&fx, 2, "p/a");
  fx_fail(&fx, AIR_REASON_RATE_LIMIT, 429, NULL, 0);
  expect_wait(&fx, 200);
  expect_attempt(&fx, 3, "p/a");
  fx_fail(&fx, AIR_REASON_LENGTH, 200, NULL, 0);
  /* The cap of 3 is spent: no resample. */
  expect_fail(&fx, AIR_REASON_LENGTH);
  assert_int_equal(air_run_attempt_count(fx.run), 3);
  assert_int_equal(air_run_attempt(fx.run, 2)->reason, AIR_REASON_LENGTH);
  assert_int_equal(air_run_attempt(fx.run, 0)->wait_ms, 100);
  fx_end(&fx);
}

static void test_per_reason_budget_allows_resample(void **s) {
  (void)s;
  run_fx fx;
  fx_start(
      &fx,
      BUDGET_ROUTE("{max_total_attempts: unlimited, per_reason: {length: 3}}"),
      "r");
  fx_fail(&fx, AIR_REASON_RATE_LIMIT, 429, NULL, 0);
  expect_wait(&fx, 100);
  fx_fail(&fx, AIR_REASON_RATE_LIMIT, 429, NULL, 0);
  expect_wait(&fx, 200);
  fx_fail(&fx, AIR_REASON_LENGTH, 200, NULL, 0);
  expect_wait(&fx, 10);
  /* The resample happens, with the rule's override. */
  expect_attempt(&fx, 4, "p/a");
  assert_non_null(fx.act.override_json);
  assert_non_null(strstr(fx.act.override_json, "8192"));
  fx_fail(&fx, AIR_REASON_LENGTH, 200, NULL, 0);
  expect_wait(&fx, 10);
  expect_attempt(&fx, 5, "p/a");
  /* The third length failure reaches per_reason: {length: 3}. */
  fx_fail(&fx, AIR_REASON_LENGTH, 200, NULL, 0);
  expect_fail(&fx, AIR_REASON_LENGTH);
  assert_int_equal(air_run_attempt_count(fx.run), 5);
  fx_end(&fx);
}

/* ---- Retry-After --------------------------------------------------------- */

#define HINT_ROUTE(max_ms)                                                    \
  PROVIDERS                                                                   \
  "routes:\n"                                                                 \
  "  - name: r\n"                                                             \
  "    targets: [p/a, p/b]\n"                                                 \
  "    rules:\n"                                                              \
  "      - {on: [rate_limit], action: retry, max: 5,\n"                       \
  "         backoff: {base_ms: 777, factor: 1, max_ms: 777, jitter: none},\n" \
  "         retry_after: {max_ms: " max_ms                                    \
  "}}\n"                                                                      \
  "      - {on: [rate_limit], action: switch}\n"

static air_header hdr(const char *name, const char *value) {
  air_header h = {name, strlen(name), value, strlen(value)};
  return h;
}

/* One 429 with the given header; returns the action's wait (or ~0 on switch).
 */
static uint64_t wait_for_header(const char *name, const char *value) {
  run_fx fx;
  fx_start(&fx, HINT_ROUTE("10000"), "r");
  air_header h = hdr(name, value);
  fx_fail(&fx, AIR_REASON_RATE_LIMIT, 429, &h, 1);
  uint64_t w = fx.act.kind == AIR_ACT_WAIT ? fx.act.wait_ms : UINT64_MAX;
  if (fx.act.kind == AIR_ACT_WAIT)
    assert_true(air_run_attempt(fx.run, 0)->hint || w == 777);
  fx_end(&fx);
  return w;
}

static void test_retry_after_variants(void **s) {
  (void)s;
  /* wall clock of fx_fail: 1700000000000 ms = Tue, 14 Nov 2023 22:13:20 GMT */
  assert_int_equal(wait_for_header("retry-after-ms", "1500"), 1500);
  assert_int_equal(wait_for_header("retry-after-ms", "1500.2"), 1501);
  assert_int_equal(wait_for_header("Retry-After", "3"), 3000);
  assert_int_equal(wait_for_header("retry-after", "0.25"), 250);
  assert_int_equal(
      wait_for_header("retry-after", "Tue, 14 Nov 2023 22:13:25 GMT"), 5000);
  assert_int_equal(
      wait_for_header("retry-after", "Tue, 14 Nov 2023 22:13:00 GMT"), 777);
  assert_int_equal(wait_for_header("retry-after", "-5"), 777);
  assert_int_equal(wait_for_header("retry-after", "soon"), 777);
}

static void test_ratelimit_reset_duration(void **s) {
  (void)s;
  run_fx fx;
  fx_start(&fx, HINT_ROUTE("100000"), "r");
  air_header h[2] = {hdr("x-ratelimit-remaining-requests", "0"),
                     hdr("x-ratelimit-reset-requests", "1m2.5s")};
  fx_fail(&fx, AIR_REASON_RATE_LIMIT, 429, h, 2);
  expect_wait(&fx, 62500);
  assert_true(air_run_attempt(fx.run, 0)->hint);
  /* Remaining not 0: the reset is no hint, the backoff applies. */
  air_header h2[2] = {hdr("x-ratelimit-remaining-requests", "3"),
                      hdr("x-ratelimit-reset-requests", "20ms")};
  fx_fail(&fx, AIR_REASON_RATE_LIMIT, 429, h2, 2);
  expect_wait(&fx, 777);
  fx_end(&fx);
}

static void test_long_retry_after_switches_and_cools(void **s) {
  (void)s;
  run_fx fx;
  fx_start(&fx, HINT_ROUTE("10000"), "r");
  air_header h = hdr("retry-after", "50");
  uint64_t t0 = fx.now;
  fx_fail(&fx, AIR_REASON_RATE_LIMIT, 429, &h, 1);
  /* No sleep: straight to the next target. */
  expect_attempt(&fx, 2, "p/b");
  assert_int_equal(air_run_attempt(fx.run, 0)->wait_ms, 0);
  assert_int_equal(air_state_breaker(fx.st, "p/a", t0 + 49999),
                   AIR_BREAKER_OPEN);
  assert_int_equal(air_state_breaker(fx.st, "p/a", t0 + 50000),
                   AIR_BREAKER_HALF_OPEN);
  assert_int_equal(air_state_breaker(fx.st, "p/b", t0), AIR_BREAKER_CLOSED);
  /* A new request while p/a cools starts on p/b. */
  fx.now = t0 + 1000;
  fx_new_run(&fx, "r");
  expect_attempt(&fx, 1, "p/b");
  fx_end(&fx);
}

/* ---- backoff through the engine ------------------------------------------ */

static void backoff_table(const char *jitter, const uint64_t *expect,
                          size_t n) {
  char yaml[1024];
  snprintf(yaml, sizeof(yaml),
           PROVIDERS
           "routes:\n"
           "  - name: r\n"
           "    targets: [p/a]\n"
           "    budget: {max_total_attempts: unlimited}\n"
           "    rules:\n"
           "      - {on: [overloaded], action: retry, max: unlimited,\n"
           "         backoff: {base_ms: 250, factor: 2, max_ms: 4000, jitter: "
           "%s}}\n",
           jitter);
  run_fx fx;
  fx_start(&fx, yaml, "r");
  uint64_t ref_seed = 42;
  air_rng ref = {test_rng_next, &ref_seed};
  for (size_t i = 0; i < n; i++) {
    fx_fail(&fx, AIR_REASON_OVERLOADED, 503, NULL, 0);
    assert_int_equal(fx.act.kind, AIR_ACT_WAIT);
    uint64_t cap = expect[i];
    if (strcmp(jitter, "none") == 0) {
      assert_int_equal(fx.act.wait_ms, cap);
    } else {
      /* Same seeded source, same draws: the engine used n = i + 1. */
      air__backoff b = {
          250, 2.0, 4000,
          strcmp(jitter, "full") == 0 ? AIR__JITTER_FULL : AIR__JITTER_EQUAL};
      assert_int_equal(fx.act.wait_ms,
                       air__backoff_wait(&b, (unsigned)i + 1, &ref));
      assert_true(fx.act.wait_ms <= cap);
      if (b.jitter == AIR__JITTER_EQUAL) assert_true(fx.act.wait_ms >= cap / 2);
    }
    expect_wait(&fx, fx.act.wait_ms);
    expect_attempt(&fx, (unsigned)i + 2, "p/a");
  }
  fx_end(&fx);
}

static void test_backoff_tables(void **s) {
  (void)s;
  const uint64_t table[] = {250, 500, 1000, 2000, 4000, 4000, 4000};
  backoff_table("none", table, 7);
  backoff_table("full", table, 7);
  backoff_table("equal", table, 7);
}

/* ---- rules walk ---------------------------------------------------------- */

static void test_exhausted_rule_next_decides(void **s) {
  (void)s;
  run_fx fx;
  fx_start(
      &fx,
      PROVIDERS
      "routes:\n"
      "  - name: r\n"
      "    targets: [p/a, p/b, q/c]\n"
      "    rules:\n"
      "      - {on: [rate_limit], action: retry, max: 1,\n"
      "         backoff: {base_ms: 5, factor: 1, max_ms: 5, jitter: none}}\n"
      "      - {on: [server_error], action: fail}\n"
      "      - {on: [rate_limit], action: switch, to: q/c}\n",
      "r");
  fx_fail(&fx, AIR_REASON_RATE_LIMIT, 429, NULL, 0);
  expect_wait(&fx, 5);
  expect_attempt(&fx, 2, "p/a");
  fx_fail(&fx, AIR_REASON_RATE_LIMIT, 429, NULL, 0);
  /* The retry rule is spent; the switch rule decides, with its `to`. */
  expect_attempt(&fx, 3, "q/c");
  fx_fail(&fx, AIR_REASON_RATE_LIMIT, 429, NULL, 0);
  /* `to` was tried: a switch never revisits, so the next untried is p/b. */
  expect_attempt(&fx, 4, "p/b");
  fx_fail(&fx, AIR_REASON_SERVER_ERROR, 500, NULL, 0);
  expect_fail(&fx, AIR_REASON_SERVER_ERROR);
  assert_int_equal(fx.act.status, 500);
  fx_end(&fx);
}

static void test_no_rule_matches_fails_with_original(void **s) {
  (void)s;
  run_fx fx;
  fx_start(&fx,
           PROVIDERS
           "routes:\n"
           "  - name: r\n"
           "    targets: [p/a, p/b]\n"
           "    rules:\n"
           "      - {on: [rate_limit], action: switch}\n",
           "r");
  air_failure f = {0};
  f.status = 502; /* classified: server_error */
  f.message = "bad gateway";
  f.request_id = "req_123";
  assert_int_equal(
      air_run_fail(fx.run, fx.act.attempt_id, &f, fx.now, 0, &fx.act), 0);
  expect_fail(&fx, AIR_REASON_SERVER_ERROR);
  assert_int_equal(fx.act.status, 502);
  const air_attempt *a = air_run_attempt(fx.run, 0);
  /* The message names the upstream and the reason (docs/design.md §5). */
  assert_string_equal(a->message, "p/a: bad gateway (server_error)");
  assert_string_equal(a->request_id, "req_123");
  assert_int_equal(air_run_attempt_count(fx.run), 1);
  fx_end(&fx);
}

static void test_status_and_message_matchers(void **s) {
  (void)s;
  run_fx fx;
  fx_start(
      &fx,
      PROVIDERS
      "routes:\n"
      "  - name: r\n"
      "    targets: [p/a, p/b]\n"
      "    budget: {max_total_attempts: 10}\n"
      "    rules:\n"
      "      - {status: [418], action: fail}\n"
      "      - {status: [\"5xx\"], message: \"try again\", action: retry, max: "
      "3,\n"
      "         backoff: {base_ms: 1, factor: 1, max_ms: 1, jitter: none}}\n"
      "      - {status: [\"5xx\"], action: switch}\n",
      "r");
  air_failure f = {0};
  f.status = 500;
  f.message = "Please TRY AGAIN later";
  assert_int_equal(
      air_run_fail(fx.run, fx.act.attempt_id, &f, fx.now, 0, &fx.act), 0);
  expect_wait(&fx, 1);
  f.message = "nope";
  assert_int_equal(
      air_run_fail(fx.run, fx.act.attempt_id, &f, fx.now, 0, &fx.act), 0);
  expect_attempt(&fx, 3, "p/b");
  f.status = 418;
  assert_int_equal(
      air_run_fail(fx.run, fx.act.attempt_id, &f, fx.now, 0, &fx.act), 0);
  expect_fail(&fx, AIR_REASON_BAD_REQUEST);
  fx_end(&fx);
}

static void test_default_rules(void **s) {
  (void)s;
  run_fx fx;
  fx_start(&fx,
           PROVIDERS
           "routes:\n"
           "  - {name: r, targets: [p/a, q/b, p/c]}\n",
           "r");
  /* overloaded: one retry on the same target, then switch. */
  fx_fail(&fx, AIR_REASON_NONE, 529, NULL, 0);
  assert_int_equal(fx.act.kind, AIR_ACT_WAIT);
  assert_true(fx.act.wait_ms <= 250);
  expect_wait(&fx, fx.act.wait_ms);
  expect_attempt(&fx, 2, "p/a");
  fx_fail(&fx, AIR_REASON_NONE, 503, NULL, 0);
  expect_attempt(&fx, 3, "q/b");
  /* A silent upstream is switched away from, not retried. */
  fx_fail(&fx, AIR_REASON_TIMEOUT_FIRST_BYTE, 0, NULL, 0);
  expect_attempt(&fx, 4, "p/c");
  /* content_filter fails at once. */
  fx_fail(&fx, AIR_REASON_CONTENT_FILTER, 400, NULL, 0);
  expect_fail(&fx, AIR_REASON_CONTENT_FILTER);
  fx_end(&fx);
}

/* ---- hard stops and deadlines -------------------------------------------- */

static void test_aborted_and_total_are_hard_stops(void **s) {
  (void)s;
  run_fx fx;
  fx_start(&fx, PROVIDERS "routes:\n  - {name: r, targets: [p/a, p/b]}\n", "r");
  fx_fail(&fx, AIR_REASON_TIMEOUT_TOTAL, 0, NULL, 0);
  expect_fail(&fx, AIR_REASON_TIMEOUT_TOTAL);
  fx_new_run(&fx, "r");
  fx_fail(&fx, AIR_REASON_ABORTED, 0, NULL, 0);
  expect_fail(&fx, AIR_REASON_ABORTED);
  assert_int_equal(air_run_attempt_count(fx.run), 1);
  /* Cancel while waiting: no new attempt. */
  fx_new_run(&fx, "r");
  fx_fail(&fx, AIR_REASON_OVERLOADED, 503, NULL, 0);
  assert_int_equal(fx.act.kind, AIR_ACT_WAIT);
  assert_int_equal(air_run_cancel(fx.run, fx.now, &fx.act), 0);
  expect_fail(&fx, AIR_REASON_ABORTED);
  assert_int_equal(air_run_attempt_count(fx.run), 1);
  /* Events after the end are refused. */
  assert_int_equal(
      air_run_wait_done(fx.run, fx.act.attempt_id, fx.now, &fx.act),
      AIR_ESTATE);
  fx_end(&fx);
}

static void test_deadlines_and_total_clipping(void **s) {
  (void)s;
  run_fx fx;
  fx_start(&fx,
           PROVIDERS
           "routes:\n"
           "  - name: r\n"
           "    targets: [p/a, p/b]\n"
           "    timeouts: {attempt_ms: 3000, total_ms: 5000}\n"
           "    rules:\n"
           "      - {on: [overloaded], action: retry, max: 5,\n"
           "         backoff: {base_ms: 1500, factor: 2, max_ms: 60000, "
           "jitter: none}}\n"
           "      - {on: [timeout.attempt], action: switch}\n",
           "r");
  uint64_t t0 = fx.now;
  /* Attempt deadline: now + attempt_ms, within total. */
  assert_int_equal(fx.act.deadline_ms, t0 + 3000);
  fx.now = t0 + 3000;
  fx_fail(&fx, AIR_REASON_TIMEOUT_ATTEMPT, 0, NULL, 0);
  /* A timeout is a failure like any other: the policy switches. */
  expect_attempt(&fx, 2, "p/b");
  /* The second attempt's deadline is clipped to the request's total. */
  assert_int_equal(fx.act.deadline_ms, t0 + 5000);
  fx.now = t0 + 3200;
  fx_fail(&fx, AIR_REASON_OVERLOADED, 503, NULL, 0);
  expect_wait(&fx, 1500); /* ends at t0+4700, before total */
  fx.now += 100;
  fx_fail(&fx, AIR_REASON_OVERLOADED, 503, NULL, 0);
  /* 3000 ms more would pass total_ms: no sleep, fail with the last failure. */
  expect_fail(&fx, AIR_REASON_OVERLOADED);
  /* A timeout at the total deadline is reported as timeout.total. */
  fx_new_run(&fx, "r");
  fx.now += 5000;
  fx_fail(&fx, AIR_REASON_TIMEOUT_ATTEMPT, 0, NULL, 0);
  expect_fail(&fx, AIR_REASON_TIMEOUT_TOTAL);
  fx_end(&fx);
}

/* ---- breaker and sticky -------------------------------------------------- */

#define BREAKER_CFG                                               \
  "providers:\n"                                                  \
  "  - {name: p, api: openai, base_url: http://127.0.0.1:1/v1,\n" \
  "     breaker: {failures: 3, open_ms: 10000}}\n"                \
  "routes:\n"                                                     \
  "  - name: r\n"                                                 \
  "    targets: [p/a, p/b]\n"                                     \
  "    rules: [{on: [server_error, refusal], action: switch}]\n"

static void test_breaker_cycle(void **s) {
  (void)s;
  run_fx fx;
  fx_start(&fx, BREAKER_CFG, "r");
  for (int i = 0; i < 3; i++) {
    if (i > 0) fx_new_run(&fx, "r");
    expect_attempt(&fx, 1, "p/a");
    fx_fail(&fx, AIR_REASON_SERVER_ERROR, 500, NULL, 0);
    expect_attempt(&fx, 2, "p/b");
    assert_int_equal(
        air_run_succeed(fx.run, fx.act.attempt_id, fx.now, &fx.act), 0);
    fx.now += 10;
  }
  uint64_t opened = fx.now - 10;
  assert_int_equal(air_state_breaker(fx.st, "p/a", fx.now), AIR_BREAKER_OPEN);
  /* Open: skipped. */
  fx_new_run(&fx, "r");
  expect_attempt(&fx, 1, "p/b");
  /* After open_ms: one probe; a concurrent request does not probe. */
  fx.now = opened + 10000;
  fx_new_run(&fx, "r");
  expect_attempt(&fx, 1, "p/a");
  air_run *other = NULL;
  air_action oact;
  assert_int_equal(air_run_new(fx.cfg, fx.st, "r", NULL, fx.now, &other, &oact),
                   0);
  assert_string_equal(oact.target, "p/b");
  air_run_free(other);
  /* The probe succeeds: closed. */
  assert_int_equal(air_run_succeed(fx.run, fx.act.attempt_id, fx.now, &fx.act),
                   0);
  assert_int_equal(air_state_breaker(fx.st, "p/a", fx.now), AIR_BREAKER_CLOSED);
  fx_end(&fx);
}

static void test_breaker_probe_failure_and_release(void **s) {
  (void)s;
  run_fx fx;
  fx_start(&fx, BREAKER_CFG, "r");
  for (int i = 0; i < 3; i++) {
    if (i > 0) fx_new_run(&fx, "r");
    fx_fail(&fx, AIR_REASON_SERVER_ERROR, 500, NULL, 0);
  }
  fx.now += 10000;
  fx_new_run(&fx, "r");
  expect_attempt(&fx, 1, "p/a"); /* probe */
  /* A refusal is no verdict: the slot is freed, the breaker stays half-open. */
  fx_fail(&fx, AIR_REASON_REFUSAL, 200, NULL, 0);
  assert_int_equal(air_state_breaker(fx.st, "p/a", fx.now),
                   AIR_BREAKER_HALF_OPEN);
  fx_new_run(&fx, "r");
  expect_attempt(&fx, 1, "p/a"); /* probe again */
  fx_fail(&fx, AIR_REASON_SERVER_ERROR, 500, NULL, 0);
  /* A failed probe re-opens it for open_ms. */
  assert_int_equal(air_state_breaker(fx.st, "p/a", fx.now + 9999),
                   AIR_BREAKER_OPEN);
  /* Cancelling a probe frees the slot. */
  fx.now += 10000;
  fx_new_run(&fx, "r");
  expect_attempt(&fx, 1, "p/a");
  assert_int_equal(air_run_cancel(fx.run, fx.now, &fx.act), 0);
  fx_new_run(&fx, "r");
  expect_attempt(&fx, 1, "p/a");
  fx_end(&fx);
}

/*
 * A run that reaches the attempt-log cap just as a switch picks a half-open
 * target has taken its probe slot and ends without an attempt: the slot is
 * given back, so a later run is admitted as the probe.
 */
#define LOG_CAP_CFG                                                       \
  "providers:\n"                                                          \
  "  - {name: p, api: openai, base_url: http://127.0.0.1:1/v1,\n"         \
  "     breaker: {failures: 1, open_ms: 10000}}\n"                        \
  "routes:\n"                                                             \
  "  - name: r\n"                                                         \
  "    targets: [p/a, p/b]\n"                                             \
  "    budget: {max_total_attempts: unlimited}\n"                         \
  "    rules:\n"                                                          \
  "      - {on: [refusal], action: retry, max: unlimited,\n"              \
  "         backoff: {base_ms: 1, factor: 1, max_ms: 1, jitter: none}}\n" \
  "      - {on: [rate_limit], action: switch}\n"                          \
  "  - {name: rb, targets: [p/b], rules: [{on: [server_error], action: "  \
  "fail}]}\n"                                                             \
  "  - {name: rbc, targets: [p/b, p/c]}\n"

static void test_probe_released_at_attempt_log_cap(void **s) {
  (void)s;
  run_fx fx;
  /* p/b opens, then turns half-open. */
  fx_start(&fx, LOG_CAP_CFG, "rb");
  expect_attempt(&fx, 1, "p/b");
  fx_fail(&fx, AIR_REASON_SERVER_ERROR, 500, NULL, 0);
  expect_fail(&fx, AIR_REASON_SERVER_ERROR);
  fx.now += 10000;
  assert_int_equal(air_state_breaker(fx.st, "p/b", fx.now),
                   AIR_BREAKER_HALF_OPEN);
  /* Retries on p/a (refusals are no verdict) until the log is full. */
  fx_new_run(&fx, "r");
  for (unsigned n = 1; n < AIR__MAX_ATTEMPT_LOG; n++) {
    assert_int_equal(fx.act.kind, AIR_ACT_ATTEMPT);
    fx_fail(&fx, AIR_REASON_REFUSAL, 200, NULL, 0);
    assert_int_equal(fx.act.kind, AIR_ACT_WAIT);
    fx.now += fx.act.wait_ms;
    assert_int_equal(
        air_run_wait_done(fx.run, fx.act.attempt_id, fx.now, &fx.act), 0);
  }
  expect_attempt(&fx, AIR__MAX_ATTEMPT_LOG, "p/a");
  /* The last one fails with a reason that switches: p/b is picked (its
   * probe slot taken), but the log is full, so the run ends. */
  fx_fail(&fx, AIR_REASON_RATE_LIMIT, 429, NULL, 0);
  expect_fail(&fx, AIR_REASON_RATE_LIMIT);
  assert_int_equal(air_run_attempt_count(fx.run), AIR__MAX_ATTEMPT_LOG);
  /* A later run is admitted on p/b as the probe (not skipped for p/c). */
  fx_new_run(&fx, "rbc");
  expect_attempt(&fx, 1, "p/b");
  assert_int_equal(air_run_succeed(fx.run, fx.act.attempt_id, fx.now, &fx.act),
                   0);
  assert_int_equal(air_state_breaker(fx.st, "p/b", fx.now), AIR_BREAKER_CLOSED);
  fx_end(&fx);
}

static void test_all_open_tries_soonest(void **s) {
  (void)s;
  run_fx fx;
  fx_start(&fx,
           PROVIDERS
           "routes:\n"
           "  - name: r\n"
           "    targets: [p/a, p/b]\n"
           "    rules: [{on: [rate_limit], action: switch}]\n",
           "r");
  air_header h = hdr("retry-after", "60");
  fx_fail(&fx, AIR_REASON_RATE_LIMIT, 429, &h, 1); /* a cools 60 s */
  expect_attempt(&fx, 2, "p/b");
  air_header h2 = hdr("retry-after", "30");
  fx_fail(&fx, AIR_REASON_RATE_LIMIT, 429, &h2, 1); /* b cools 30 s */
  expect_fail(&fx, AIR_REASON_RATE_LIMIT);
  fx.now += 1000;
  fx_new_run(&fx, "r");
  expect_attempt(&fx, 1, "p/b"); /* reopens soonest */
  fx_end(&fx);
}

static void test_quota_opens_for_quota_open_ms(void **s) {
  (void)s;
  run_fx fx;
  fx_start(&fx, PROVIDERS "routes:\n  - {name: r, targets: [p/a, q/b]}\n", "r");
  air_failure f = {0};
  f.status = 429;
  f.code = "insufficient_quota";
  assert_int_equal(
      air_run_fail(fx.run, fx.act.attempt_id, &f, fx.now, 0, &fx.act), 0);
  expect_attempt(&fx, 2, "q/b");
  assert_int_equal(air_run_attempt(fx.run, 0)->reason, AIR_REASON_QUOTA);
  assert_int_equal(air_state_breaker(fx.st, "p/a", fx.now + 299999),
                   AIR_BREAKER_OPEN);
  assert_int_equal(air_state_breaker(fx.st, "p/a", fx.now + 300000),
                   AIR_BREAKER_HALF_OPEN);
  fx_end(&fx);
}

#define STICKY_CFG(sticky)         \
  PROVIDERS                        \
  "routes:\n"                      \
  "  - name: r\n"                  \
  "    targets: [p/a, p/b, q/c]\n" \
  "    sticky: " sticky            \
  "\n"                             \
  "    rules: [{on: [overloaded], action: switch}]\n"

static void succeed_on_b(run_fx *fx) {
  fx_new_run(fx, "r");
  expect_attempt(fx, 1, "p/a");
  fx_fail(fx, AIR_REASON_OVERLOADED, 503, NULL, 0);
  expect_attempt(fx, 2, "p/b");
  assert_int_equal(
      air_run_succeed(fx->run, fx->act.attempt_id, fx->now, &fx->act), 0);
}

static void test_sticky_after_ms(void **s) {
  (void)s;
  run_fx fx;
  fx_start(&fx, STICKY_CFG("{after_ms: 60000}"), "r");
  succeed_on_b(&fx);
  uint64_t t = fx.now;
  fx.now = t + 59999;
  fx_new_run(&fx, "r");
  expect_attempt(&fx, 1, "p/b");
  /* The sticky target fails: the others follow, first target included. */
  fx_fail(&fx, AIR_REASON_OVERLOADED, 503, NULL, 0);
  expect_attempt(&fx, 2, "p/a");
  air_run_free(fx.run);
  fx.run = NULL;
  fx.now = t + 60000;
  fx_new_run(&fx, "r");
  expect_attempt(&fx, 1, "p/a");
  fx_end(&fx);
}

static void test_sticky_requests(void **s) {
  (void)s;
  run_fx fx;
  fx_start(&fx, STICKY_CFG("{requests: 2}"), "r");
  succeed_on_b(&fx);
  fx_new_run(&fx, "r");
  expect_attempt(&fx, 1, "p/b");
  fx_new_run(&fx, "r");
  expect_attempt(&fx, 1, "p/b");
  fx_new_run(&fx, "r");
  expect_attempt(&fx, 1, "p/a");
  /* A success on the first target clears stickiness. */
  succeed_on_b(&fx);
  fx_new_run(&fx, "r");
  expect_attempt(&fx, 1, "p/b");
  fx_fail(&fx, AIR_REASON_OVERLOADED, 503, NULL, 0);
  expect_attempt(&fx, 2, "p/a");
  assert_int_equal(air_run_succeed(fx.run, fx.act.attempt_id, fx.now, &fx.act),
                   0);
  fx_new_run(&fx, "r");
  expect_attempt(&fx, 1, "p/a");
  fx_end(&fx);
}

static void test_sticky_off_by_default(void **s) {
  (void)s;
  run_fx fx;
  fx_start(&fx, PROVIDERS "routes:\n  - {name: r, targets: [p/a, p/b]}\n", "r");
  fx_fail(&fx, AIR_REASON_TIMEOUT_FIRST_CHUNK, 0, NULL, 0);
  expect_attempt(&fx, 2, "p/b");
  assert_int_equal(air_run_succeed(fx.run, fx.act.attempt_id, fx.now, &fx.act),
                   0);
  fx_new_run(&fx, "r");
  expect_attempt(&fx, 1, "p/a");
  fx_end(&fx);
}

/* ---- direct targets and lookups ------------------------------------------ */

static void test_direct_target_and_unknown_model(void **s) {
  (void)s;
  run_fx fx;
  fx_start(&fx, PROVIDERS "routes:\n  - {name: r, targets: [p/a]}\n",
           "q/some-model");
  expect_attempt(&fx, 1, "q/some-model");
  /* Default policy: one retry on overload, then no target left. */
  fx_fail(&fx, AIR_REASON_OVERLOADED, 529, NULL, 0);
  expect_wait(&fx, fx.act.wait_ms);
  expect_attempt(&fx, 2, "q/some-model");
  fx_fail(&fx, AIR_REASON_OVERLOADED, 529, NULL, 0);
  expect_fail(&fx, AIR_REASON_OVERLOADED);
  air_run *run = NULL;
  air_action act;
  assert_int_equal(air_run_new(fx.cfg, fx.st, "nope", NULL, 0, &run, &act),
                   AIR_ENOTFOUND);
  assert_int_equal(air_run_new(fx.cfg, fx.st, "zz/m", NULL, 0, &run, &act),
                   AIR_ENOTFOUND);
  assert_int_equal(air_run_new(fx.cfg, fx.st, "p/", NULL, 0, &run, &act),
                   AIR_ENOTFOUND);
  assert_null(run);
  fx_end(&fx);
}

static void test_target_override_merges_with_rule(void **s) {
  (void)s;
  run_fx fx;
  fx_start(
      &fx,
      PROVIDERS
      "routes:\n"
      "  - name: r\n"
      "    targets:\n"
      "      - {target: p/a, override: {temperature: 0.5, max_tokens: 100}}\n"
      "    rules:\n"
      "      - {on: [length], action: retry, override: {max_tokens: 8192},\n"
      "         backoff: {base_ms: 1, factor: 1, max_ms: 1, jitter: none}}\n",
      "r");
  assert_non_null(fx.act.override_json);
  assert_non_null(strstr(fx.act.override_json, "100"));
  fx_fail(&fx, AIR_REASON_LENGTH, 200, NULL, 0);
  expect_wait(&fx, 1);
  assert_non_null(strstr(fx.act.override_json, "8192"));
  assert_non_null(strstr(fx.act.override_json, "temperature"));
  assert_null(strstr(fx.act.override_json, ":100"));
  fx_end(&fx);
}

/* ---- skipped targets (docs/design.md §2.1) ------------------------------- */

#define SKIP_ROUTE                                            \
  PROVIDERS                                                   \
  "routes:\n"                                                 \
  "  - name: r\n"                                             \
  "    targets: [p/a, q/b, p/c, p/d]\n"                       \
  "    budget: {max_total_attempts: 3}\n"                     \
  "    rules: [{on: [overloaded], action: switch, max: 1}]\n" \
  "  - name: only\n"                                          \
  "    targets: [q/b]\n"

/* A skip is not numbered and counts towards neither the budget nor the
 * rule's max: with both spent by a skip, p/d would never be tried. */
static void test_skip_counts_nothing(void **s) {
  (void)s;
  run_fx fx;
  fx_start(&fx, SKIP_ROUTE, "r");
  expect_attempt(&fx, 1, "p/a");
  fx_fail(&fx, AIR_REASON_OVERLOADED, 503, NULL, 0);
  expect_attempt(&fx, 2, "q/b");
  assert_int_equal(air__run_skip(fx.run, fx.act.attempt_id, "n",
                                 "n: not supported", fx.now, &fx.act),
                   0);
  expect_attempt(&fx, 2, "p/c");
  fx_fail(&fx, AIR_REASON_OVERLOADED, 503, NULL, 0);
  expect_attempt(&fx, 3, "p/d");
  assert_int_equal(air__run_attempts(fx.run), 3);
  fx_fail(&fx, AIR_REASON_OVERLOADED, 503, NULL, 0);
  expect_fail(&fx, AIR_REASON_OVERLOADED);
  assert_int_equal(air_run_attempt_count(fx.run), 4);
  const air_attempt *sk = air_run_attempt(fx.run, 1);
  assert_true(sk->skipped);
  assert_int_equal(sk->n, 0);
  assert_string_equal(sk->field, "n");
  assert_string_equal(sk->target, "q/b");
  assert_int_equal(air_run_attempt(fx.run, 2)->n, 2);
  fx_end(&fx);
}

/* Every target skipped: bad_request, status 400, no attempt made. */
static void test_skip_all_is_bad_request(void **s) {
  (void)s;
  run_fx fx;
  fx_start(&fx, SKIP_ROUTE, "only");
  expect_attempt(&fx, 1, "q/b");
  assert_int_equal(air__run_skip(fx.run, fx.act.attempt_id, "n",
                                 "n: not supported", fx.now, &fx.act),
                   0);
  expect_fail(&fx, AIR_REASON_BAD_REQUEST);
  assert_int_equal(fx.act.status, 400);
  assert_int_equal(air__run_attempts(fx.run), 0);
  fx_end(&fx);
}

/* A skipped probe frees its half-open slot: the next request probes. */
static void test_skip_releases_probe(void **s) {
  (void)s;
  run_fx fx;
  fx_start(&fx, BREAKER_CFG, "r");
  for (int i = 0; i < 3; i++) {
    if (i > 0) fx_new_run(&fx, "r");
    fx_fail(&fx, AIR_REASON_SERVER_ERROR, 500, NULL, 0);
  }
  fx.now += 10000;
  fx_new_run(&fx, "r");
  expect_attempt(&fx, 1, "p/a"); /* the probe */
  assert_int_equal(air__run_skip(fx.run, fx.act.attempt_id, "n",
                                 "n: not supported", fx.now, &fx.act),
                   0);
  expect_attempt(&fx, 1, "p/b");
  fx_new_run(&fx, "r");
  expect_attempt(&fx, 1, "p/a"); /* probes again */
  fx_end(&fx);
}

/* The exchange's answer to "can this target express the request?": here,
 * every target but the one named by data. */
static bool all_but(void *data, const air__target *t) {
  return strcmp(t->name, (const char *)data) != 0;
}

/* A target that cannot express the request is chosen without taking its
 * half-open probe slot (can_express is asked before the probe): while
 * this run is on it, a concurrent run still probes it. Without the check
 * the first run holds the slot and the second goes to p/b. */
static void test_inexpressible_takes_no_probe(void **s) {
  (void)s;
  run_fx fx;
  fx_start(&fx, BREAKER_CFG, "r");
  for (int i = 0; i < 3; i++) {
    if (i > 0) fx_new_run(&fx, "r");
    fx_fail(&fx, AIR_REASON_SERVER_ERROR, 500, NULL, 0);
  }
  fx.now += 10000;
  air_run_free(fx.run);
  fx.run = NULL;
  assert_int_equal(
      air__run_new_checked(fx.cfg, fx.st, "r", &fx.rng, fx.now, all_but,
                           (void *)"p/a", &fx.run, &fx.act),
      0);
  expect_attempt(&fx, 1, "p/a"); /* to be skipped, not a probe */
  air_run *other = NULL;
  air_action oact;
  assert_int_equal(air_run_new(fx.cfg, fx.st, "r", NULL, fx.now, &other, &oact),
                   0);
  assert_string_equal(oact.target, "p/a"); /* the probe is still free */
  air_run_free(other);
  assert_int_equal(air__run_skip(fx.run, fx.act.attempt_id, "thinking",
                                 "thinking: not supported", fx.now, &fx.act),
                   0);
  expect_attempt(&fx, 1, "p/b");
  assert_true(air_run_attempt(fx.run, 0)->skipped);
  assert_int_equal(air_state_breaker(fx.st, "p/a", fx.now),
                   AIR_BREAKER_HALF_OPEN);
  fx_end(&fx);
}

/* ---- attempt ids, first content and commit ------------------------------- */

#define IDS_ROUTE                                                             \
  PROVIDERS                                                                   \
  "routes:\n"                                                                 \
  "  - name: r\n"                                                             \
  "    targets: [p/a, q/b, p/c]\n"                                            \
  "    rules:\n"                                                              \
  "      - {on: [rate_limit], action: retry, max: 1,\n"                       \
  "         backoff: {base_ms: 100, factor: 1, max_ms: 100, jitter: none}}\n" \
  "      - {on: [overloaded, rate_limit], action: switch}\n"

/* Reports first content on the current attempt: the engine commits it. */
static void fx_commit(run_fx *fx) {
  unsigned id = fx->act.attempt_id;
  const char *target = fx->act.target;
  unsigned n = fx->act.attempt;
  assert_int_equal(air_run_ready_to_commit(fx->run, id, fx->now, &fx->act), 0);
  assert_int_equal(fx->act.kind, AIR_ACT_COMMIT);
  assert_int_equal(fx->act.attempt_id, id);
  assert_string_equal(fx->act.target, target);
  assert_int_equal(fx->act.attempt, n);
}

/* Every action names its attempt; ids are never reused, numbers are after
 * a skip. */
static void test_attempt_ids_on_every_action(void **s) {
  (void)s;
  run_fx fx;
  fx_start(&fx, IDS_ROUTE, "r");
  expect_attempt(&fx, 1, "p/a");
  assert_int_equal(fx.act.attempt_id, 1);
  fx_fail(&fx, AIR_REASON_RATE_LIMIT, 429, NULL, 0);
  assert_int_equal(fx.act.kind, AIR_ACT_WAIT);
  assert_int_equal(fx.act.attempt_id, 1); /* the attempt it follows */
  expect_wait(&fx, 100);
  expect_attempt(&fx, 2, "p/a");
  assert_int_equal(fx.act.attempt_id, 2);
  fx_fail(&fx, AIR_REASON_RATE_LIMIT, 429, NULL, 0);
  expect_attempt(&fx, 3, "q/b");
  assert_int_equal(fx.act.attempt_id, 3);
  assert_int_equal(
      air__run_skip(fx.run, 3, "n", "n: not supported", fx.now, &fx.act), 0);
  /* The skipped attempt's number is reused, its id is not. */
  expect_attempt(&fx, 3, "p/c");
  assert_int_equal(fx.act.attempt_id, 4);
  fx_commit(&fx);
  assert_int_equal(air_run_succeed(fx.run, 4, fx.now, &fx.act), 0);
  assert_int_equal(fx.act.kind, AIR_ACT_DONE);
  assert_int_equal(fx.act.attempt_id, 4);
  /* FAIL names the last attempt. */
  fx_new_run(&fx, "r");
  unsigned id = fx.act.attempt_id;
  assert_int_equal(id, 1);
  assert_int_equal(air_run_cancel(fx.run, fx.now, &fx.act), 0);
  expect_fail(&fx, AIR_REASON_ABORTED);
  assert_int_equal(fx.act.attempt_id, id);
  fx_end(&fx);
}

/* First content is answered with COMMIT; after it a failure is final (the
 * rule that would switch does not run) and first content is not news. */
static void test_commit_answers_first_content(void **s) {
  (void)s;
  run_fx fx;
  fx_start(&fx, IDS_ROUTE, "r");
  expect_attempt(&fx, 1, "p/a");
  fx_commit(&fx);
  air_action before = fx.act;
  assert_int_equal(air_run_ready_to_commit(fx.run, 1, fx.now, &fx.act),
                   AIR_ESTATE);
  assert_memory_equal(&before, &fx.act, sizeof(before));
  fx_fail(&fx, AIR_REASON_OVERLOADED, 503, NULL, 0);
  expect_fail(&fx, AIR_REASON_OVERLOADED);
  assert_int_equal(fx.act.attempt_id, 1);
  assert_int_equal(air_run_attempt_count(fx.run), 1);
  /* Without first content the same failure switches, as it always did;
   * a success need not have reported first content (air_call). */
  fx_new_run(&fx, "r");
  fx_fail(&fx, AIR_REASON_OVERLOADED, 503, NULL, 0);
  expect_attempt(&fx, 2, "q/b");
  assert_int_equal(air_run_succeed(fx.run, fx.act.attempt_id, fx.now, &fx.act),
                   0);
  assert_int_equal(fx.act.kind, AIR_ACT_DONE);
  fx_end(&fx);
}

/* An event for an unknown or finished attempt id is refused and changes
 * nothing: the run goes on with the right id as if it never came. */
static void test_stale_attempt_ids_refused(void **s) {
  (void)s;
  run_fx fx;
  fx_start(&fx, IDS_ROUTE, "r");
  air_failure f = {0};
  f.status = 503;
  f.type = "overloaded_error";
  const unsigned bad[] = {0, 2, 99};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    air_action before = fx.act;
    assert_int_equal(air_run_fail(fx.run, bad[i], &f, fx.now, 0, &fx.act),
                     AIR_ESTATE);
    assert_int_equal(air_run_succeed(fx.run, bad[i], fx.now, &fx.act),
                     AIR_ESTATE);
    assert_int_equal(air_run_ready_to_commit(fx.run, bad[i], fx.now, &fx.act),
                     AIR_ESTATE);
    assert_int_equal(air_run_wait_done(fx.run, bad[i], fx.now, &fx.act),
                     AIR_ESTATE);
    assert_int_equal(air__run_skip(fx.run, bad[i], "n", "m", fx.now, &fx.act),
                     AIR_ESTATE);
    assert_int_equal(air__run_fail_final(fx.run, bad[i], &f, fx.now, &fx.act),
                     AIR_ESTATE);
    air__run_note_status(fx.run, bad[i], 418);
    assert_memory_equal(&before, &fx.act, sizeof(before));
  }
  assert_int_equal(air_run_attempt_count(fx.run), 1);
  assert_int_equal(air_run_attempt(fx.run, 0)->status, 0);
  /* Attempt 1 fails and the run switches: 1 is finished now. */
  assert_int_equal(air_run_fail(fx.run, 1, &f, fx.now, 0, &fx.act), 0);
  expect_attempt(&fx, 2, "q/b");
  air_action before = fx.act;
  assert_int_equal(air_run_fail(fx.run, 1, &f, fx.now, 0, &fx.act), AIR_ESTATE);
  assert_int_equal(air_run_succeed(fx.run, 1, fx.now, &fx.act), AIR_ESTATE);
  assert_int_equal(air_run_ready_to_commit(fx.run, 1, fx.now, &fx.act),
                   AIR_ESTATE);
  assert_memory_equal(&before, &fx.act, sizeof(before));
  assert_int_equal(air_run_attempt_count(fx.run), 2);
  assert_int_equal(air_run_attempt(fx.run, 0)->reason, AIR_REASON_OVERLOADED);
  /* A WAIT is ended only by the id it carries. */
  f.status = 429;
  f.type = NULL;
  assert_int_equal(air_run_fail(fx.run, 2, &f, fx.now, 0, &fx.act), 0);
  assert_int_equal(fx.act.kind, AIR_ACT_WAIT);
  assert_int_equal(air_run_wait_done(fx.run, 1, fx.now + 100, &fx.act),
                   AIR_ESTATE);
  assert_int_equal(fx.act.kind, AIR_ACT_WAIT);
  expect_wait(&fx, 100);
  expect_attempt(&fx, 3, "q/b");
  assert_int_equal(fx.act.attempt_id, 3);
  fx_end(&fx);
}

/* A probe's verdict is given at its first content (docs/design.md §3.1): the
 * breaker closes there, before the answer ends, and its lease is free. */
static void test_probe_verdict_at_first_content(void **s) {
  (void)s;
  run_fx fx;
  fx_start(&fx, BREAKER_CFG, "r");
  for (int i = 0; i < 3; i++) {
    if (i > 0) fx_new_run(&fx, "r");
    fx_fail(&fx, AIR_REASON_SERVER_ERROR, 500, NULL, 0);
  }
  fx.now += 10000;
  fx_new_run(&fx, "r");
  expect_attempt(&fx, 1, "p/a"); /* the probe */
  assert_int_equal(air_state_breaker(fx.st, "p/a", fx.now),
                   AIR_BREAKER_HALF_OPEN);
  fx_commit(&fx);
  assert_int_equal(air_state_breaker(fx.st, "p/a", fx.now), AIR_BREAKER_CLOSED);
  /* While the answer still streams, other requests go to p/a again. */
  air_run *other = NULL;
  air_action oact;
  assert_int_equal(air_run_new(fx.cfg, fx.st, "r", NULL, fx.now, &other, &oact),
                   0);
  assert_string_equal(oact.target, "p/a");
  air_run_free(other);
  assert_int_equal(air_run_succeed(fx.run, 1, fx.now + 60000, &fx.act), 0);
  assert_int_equal(air_state_breaker(fx.st, "p/a", fx.now), AIR_BREAKER_CLOSED);
  fx_end(&fx);
}

/* The stream driver reports first content and releases on COMMIT: a
 * probe's breaker verdict is in before its answer ends. */
typedef struct probe_stream {
  air_state *st;
  test_clock *tc;
  unsigned calls;
  air_breaker_mode during; /* p/a's breaker right after the first part */
  unsigned parts;
} probe_stream;

static int probe_produce(void *data, const air_attempt_info *info,
                         air_stream_sink *sink, air_failure *f) {
  probe_stream *ps = data;
  ps->calls++;
  if (strcmp(info->target, "p/a") != 0) return 0; /* p/b: empty answer */
  if (ps->calls == 1) {
    f->status = 500;
    return 1;
  }
  air_part p;
  memset(&p, 0, sizeof(p));
  p.kind = AIR_PART_TEXT;
  p.text = "hi";
  p.text_len = 2;
  if (air_stream_push(sink, &p) != 0) return 1;
  ps->during = air_state_breaker(ps->st, "p/a", ps->tc->now);
  memset(&p, 0, sizeof(p));
  p.kind = AIR_PART_FINISH;
  p.finish = AIR_FINISH_STOP;
  return air_stream_push(sink, &p) != 0;
}

static int probe_on_part(void *data, const air_part *p) {
  probe_stream *ps = data;
  (void)p;
  ps->parts++;
  return 0;
}

static void test_stream_driver_commits_through_engine(void **s) {
  (void)s;
  air_config *cfg = test_config(
      "providers:\n"
      "  - {name: p, api: openai, base_url: http://127.0.0.1:1/v1,\n"
      "     breaker: {failures: 1, open_ms: 10000}}\n"
      "routes:\n"
      "  - {name: r, targets: [p/a, p/b],\n"
      "     rules: [{on: [server_error], action: switch}]}\n");
  air_state *st = NULL;
  assert_int_equal(air_state_new(cfg, &st, NULL), 0);
  test_clock tc = {.now = 1000};
  air_clock clk = test_clock_iface(&tc);
  probe_stream ps = {.st = st, .tc = &tc, .during = AIR_BREAKER_OPEN};
  air_stream_opts o = AIR_STREAM_OPTS_INIT;
  o.fn = probe_produce;
  o.data = &ps;
  o.on_part = probe_on_part;
  o.clock = &clk;
  /* p/a fails (opens), p/b answers. */
  assert_int_equal(air_stream(cfg, st, "r", &o, NULL, NULL, NULL), 0);
  assert_int_equal(air_state_breaker(st, "p/a", tc.now), AIR_BREAKER_OPEN);
  /* Half-open: this request probes p/a and streams an answer. */
  tc.now += 10000;
  assert_int_equal(air_stream(cfg, st, "r", &o, NULL, NULL, NULL), 0);
  assert_int_equal(ps.calls, 3);
  assert_int_equal(ps.during, AIR_BREAKER_CLOSED);
  assert_true(ps.parts >= 2);
  air_state_free(st);
  air_config_free(cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shared_budget_429_429_length),
      cmocka_unit_test(test_per_reason_budget_allows_resample),
      cmocka_unit_test(test_retry_after_variants),
      cmocka_unit_test(test_ratelimit_reset_duration),
      cmocka_unit_test(test_long_retry_after_switches_and_cools),
      cmocka_unit_test(test_backoff_tables),
      cmocka_unit_test(test_exhausted_rule_next_decides),
      cmocka_unit_test(test_no_rule_matches_fails_with_original),
      cmocka_unit_test(test_status_and_message_matchers),
      cmocka_unit_test(test_default_rules),
      cmocka_unit_test(test_aborted_and_total_are_hard_stops),
      cmocka_unit_test(test_deadlines_and_total_clipping),
      cmocka_unit_test(test_breaker_cycle),
      cmocka_unit_test(test_breaker_probe_failure_and_release),
      cmocka_unit_test(test_probe_released_at_attempt_log_cap),
      cmocka_unit_test(test_all_open_tries_soonest),
      cmocka_unit_test(test_quota_opens_for_quota_open_ms),
      cmocka_unit_test(test_sticky_after_ms),
      cmocka_unit_test(test_sticky_requests),
      cmocka_unit_test(test_sticky_off_by_default),
      cmocka_unit_test(test_direct_target_and_unknown_model),
      cmocka_unit_test(test_target_override_merges_with_rule),
      cmocka_unit_test(test_skip_counts_nothing),
      cmocka_unit_test(test_skip_all_is_bad_request),
      cmocka_unit_test(test_skip_releases_probe),
      cmocka_unit_test(test_inexpressible_takes_no_probe),
      cmocka_unit_test(test_attempt_ids_on_every_action),
      cmocka_unit_test(test_commit_answers_first_content),
      cmocka_unit_test(test_stale_attempt_ids_refused),
      cmocka_unit_test(test_probe_verdict_at_first_content),
      cmocka_unit_test(test_stream_driver_commits_through_engine),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
