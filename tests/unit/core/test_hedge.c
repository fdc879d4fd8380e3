/*
 * Hedged first content (docs/design.md §3.6) in the run state machine, driven
 * with a fake clock: when hedges start, who wins, what a racer's failure,
 * the budget, the breaker, a probe and sticky routes do while racers run.
 */
#include "helpers.h"

#include <stdlib.h>

#include "engine.h"
#include "policy.h"

#define PROVIDERS                                                 \
  "providers:\n"                                                  \
  "  - {name: p, api: openai, base_url: http://127.0.0.1:1/v1,\n" \
  "     breaker: {failures: 1, open_ms: 1000}}\n"

typedef test_run fx;

static void fx_run(fx *f, const char *model) {
  test_run_again(f, model);
}

static void fx_start(fx *f, const char *yaml, const char *model) {
  test_run_start(f, yaml, model, 7);
}

static void fx_end(fx *f) {
  test_run_end(f);
}

static void fail_id(fx *f, unsigned id, air_reason reason, int status) {
  test_run_fail(f, id, reason, status, NULL, 0, 0);
}

static void expect_attempt(const fx *f, unsigned n, const char *target,
                           bool hedge) {
  assert_int_equal(f->act.kind, AIR_ACT_ATTEMPT);
  assert_int_equal(f->act.attempt, n);
  assert_string_equal(f->act.target, target);
  assert_int_equal((f->act.flags & AIR_ACTF_HEDGE) != 0, hedge);
}

/* Starts the hedge due now; asserts it was announced for exactly now. */
static void hedge_now(fx *f) {
  uint64_t at = f->act.hedge_at_ms;
  assert_true(at != 0);
  assert_int_equal(air_run_hedge(f->run, at - 1, &f->act), 0);
  assert_int_equal(f->act.kind, AIR_ACT_IDLE); /* not yet */
  f->now = at;
  assert_int_equal(air_run_hedge(f->run, f->now, &f->act), 0);
}

#define ROUTE(targets, extra) \
  PROVIDERS                   \
  "routes:\n"                 \
  "  - name: r\n"             \
  "    targets: " targets     \
  "\n"                        \
  "    hedge: {after_ms: 500" extra "}\n"

static void hedge_starts_late_and_first_content_wins(void **s) {
  (void)s;
  fx f;
  fx_start(&f, ROUTE("[p/a, p/b]", ""), "r");
  expect_attempt(&f, 1, "p/a", false);
  unsigned a = f.act.attempt_id;
  assert_int_equal(f.act.hedge_at_ms, 1500); /* after_ms after its start */
  hedge_now(&f);
  expect_attempt(&f, 2, "p/b", true);
  unsigned b = f.act.attempt_id;
  assert_int_equal(f.act.hedge_at_ms, 0); /* max 1 */
  f.now += 20;
  assert_int_equal(air_run_ready_to_commit(f.run, b, f.now, &f.act), 0);
  assert_int_equal(f.act.kind, AIR_ACT_COMMIT);
  assert_int_equal(f.act.attempt_id, b);
  assert_int_equal(f.act.attempt, 2);
  assert_string_equal(f.act.target, "p/b");
  /* Every other racer is cancelled, at once. */
  assert_int_equal(air_run_next(f.run, &f.act), 1);
  assert_int_equal(f.act.kind, AIR_ACT_CANCEL);
  assert_int_equal(f.act.attempt_id, a);
  assert_int_equal(air_run_next(f.run, &f.act), 0);
  /* The loser is hedge_lost, not a failure, and the breaker (failures: 1)
   * does not count it. */
  const air_attempt *la = air_run_attempt(f.run, 0);
  assert_true(la->hedge_lost);
  assert_false(la->hedge);
  assert_int_equal(la->reason, AIR_REASON_NONE);
  assert_int_equal(la->ms, 520);
  assert_true(air_run_attempt(f.run, 1)->hedge);
  assert_int_equal(air_state_breaker(f.st, "p/a", f.now), AIR_BREAKER_CLOSED);
  /* The loser's id is finished: its events are refused. */
  air_failure fl = {.reason = AIR_REASON_NETWORK};
  assert_int_equal(air_run_fail(f.run, a, &fl, f.now, 0, &f.act), AIR_ESTATE);
  assert_int_equal(air_run_succeed(f.run, b, f.now, &f.act), 0);
  assert_int_equal(f.act.kind, AIR_ACT_DONE);
  fx_end(&f);
}

/* Hedge k starts after_ms after racer k-1; at most max. */
static void hedges_follow_the_newest_racer(void **s) {
  (void)s;
  fx f;
  fx_start(&f, ROUTE("[p/a, p/b, p/c, p/d]", ", max: 2"), "r");
  hedge_now(&f);
  expect_attempt(&f, 2, "p/b", true);
  assert_int_equal(f.act.hedge_at_ms, 2000);
  hedge_now(&f);
  expect_attempt(&f, 3, "p/c", true);
  assert_int_equal(f.act.hedge_at_ms, 0);
  /* Content on a racer ends the race: CANCEL for both others. */
  assert_int_equal(air_run_first_part(f.run, 1, f.now, &f.act), 0);
  assert_int_equal(f.act.kind, AIR_ACT_CANCEL);
  unsigned c1 = f.act.attempt_id;
  assert_int_equal(air_run_next(f.run, &f.act), 1);
  unsigned c2 = f.act.attempt_id;
  assert_true((c1 == 2 && c2 == 3) || (c1 == 3 && c2 == 2));
  assert_int_equal(air_run_next(f.run, &f.act), 0);
  fx_end(&f);
}

/* A racer's failure goes through the rules: `fail` drops only that racer,
 * a switch never picks a racing target, and the request fails when the
 * last racer failed. */
static void racer_failures_while_another_runs(void **s) {
  (void)s;
  fx f;
  fx_start(&f,
           PROVIDERS
           "routes:\n"
           "  - name: r\n"
           "    targets: [p/a, p/b, p/c]\n"
           "    hedge: {after_ms: 500}\n"
           "    rules:\n"
           "      - {on: bad_request, action: fail}\n"
           "      - {on: [network, overloaded], action: switch}\n",
           "r");
  hedge_now(&f);
  expect_attempt(&f, 2, "p/b", true);
  /* b fails with a `fail` rule: only b stops, a goes on. */
  fail_id(&f, 2, AIR_REASON_BAD_REQUEST, 400);
  assert_int_equal(f.act.kind, AIR_ACT_IDLE);
  assert_int_equal(f.act.hedge_at_ms, 0); /* max spent */
  /* a fails and switches: to c (b is tried, racing or not). */
  fail_id(&f, 1, AIR_REASON_NETWORK, 0);
  expect_attempt(&f, 3, "p/c", false);
  fail_id(&f, 3, AIR_REASON_OVERLOADED, 503);
  /* The last racer failed, no target left: the request fails. */
  assert_int_equal(f.act.kind, AIR_ACT_FAIL);
  assert_int_equal(f.act.reason, AIR_REASON_OVERLOADED);
  fx_end(&f);

  /* Two racers, both fail: IDLE for the first, FAIL for the last. */
  fx_start(
      &f,
      ROUTE("[p/a, p/b]",
            "") "    rules: [{on: [network, overloaded], action: switch}]\n",
      "r");
  hedge_now(&f);
  fail_id(&f, 1, AIR_REASON_NETWORK, 0);
  assert_int_equal(f.act.kind, AIR_ACT_IDLE);
  fail_id(&f, 2, AIR_REASON_OVERLOADED, 529);
  assert_int_equal(f.act.kind, AIR_ACT_FAIL);
  assert_int_equal(f.act.reason, AIR_REASON_OVERLOADED);
  assert_int_equal(air_run_attempt_count(f.run), 2);
  fx_end(&f);
}

/* A hedge is an attempt: the budget bounds it, and a spent budget mid-race
 * ends the failing racer only. */
static void budget_spent_mid_race(void **s) {
  (void)s;
  fx f;
  fx_start(&f,
           ROUTE("[p/a, p/b, p/c]", "") "    budget: {max_total_attempts: 2}\n",
           "r");
  hedge_now(&f);
  expect_attempt(&f, 2, "p/b", true);
  fail_id(&f, 1, AIR_REASON_NETWORK, 0); /* would switch to c: budget spent */
  assert_int_equal(f.act.kind, AIR_ACT_IDLE);
  assert_int_equal(air_run_ready_to_commit(f.run, 2, f.now, &f.act), 0);
  assert_int_equal(f.act.kind, AIR_ACT_COMMIT);
  assert_int_equal(air_run_next(f.run, &f.act), 0); /* nobody left to cancel */
  assert_int_equal(air__run_attempts(f.run), 2);
  fx_end(&f);

  /* A budget of one attempt never hedges. */
  fx_start(&f, ROUTE("[p/a, p/b]", "") "    budget: {max_total_attempts: 1}\n",
           "r");
  assert_int_equal(f.act.hedge_at_ms, 0);
  assert_int_equal(air_run_hedge(f.run, f.now + 10000, &f.act), 0);
  assert_int_equal(f.act.kind, AIR_ACT_IDLE);
  fx_end(&f);
}

/* A racer holding the half-open probe lease that loses releases it, with
 * no verdict: the next request may probe at once. */
static void losing_probe_releases_its_lease(void **s) {
  (void)s;
  fx f;
  fx_start(&f,
           PROVIDERS
           "routes:\n"
           "  - {name: r, targets: [p/a, p/b], hedge: {after_ms: 500}}\n"
           "  - {name: b_first, targets: [p/b, p/a]}\n",
           "p/b");
  fail_id(&f, f.act.attempt_id, AIR_REASON_OVERLOADED, 529);
  assert_int_equal(air_state_breaker(f.st, "p/b", f.now), AIR_BREAKER_OPEN);
  f.now += 1000;
  assert_int_equal(air_state_breaker(f.st, "p/b", f.now),
                   AIR_BREAKER_HALF_OPEN);
  fx_run(&f, "r");
  expect_attempt(&f, 1, "p/a", false);
  hedge_now(&f);
  expect_attempt(&f, 2, "p/b", true); /* the probe */
  air_run *race = f.run;
  f.run = NULL;
  /* While the hedge holds the lease, another request does not probe b. */
  fx_run(&f, "b_first");
  expect_attempt(&f, 1, "p/a", false);
  air_run *other = f.run;
  f.run = race;
  assert_int_equal(air_run_ready_to_commit(f.run, 1, f.now, &f.act), 0);
  assert_int_equal(air_run_next(f.run, &f.act), 1);
  assert_int_equal(f.act.attempt_id, 2);
  assert_int_equal(air_state_breaker(f.st, "p/b", f.now),
                   AIR_BREAKER_HALF_OPEN);
  air_run_free(other);
  fx_run(&f, "b_first");
  expect_attempt(&f, 1, "p/b", false); /* lease free: this one probes */
  fx_end(&f);
}

/* A hedge win never makes a route sticky; a plain fallback win does. */
static void hedge_win_is_not_sticky(void **s) {
  (void)s;
  fx f;
  fx_start(&f, ROUTE("[p/a, p/b]", "") "    sticky: {after_ms: 60000}\n", "r");
  hedge_now(&f);
  assert_int_equal(air_run_ready_to_commit(f.run, 2, f.now, &f.act), 0);
  assert_int_equal(air_run_succeed(f.run, 2, f.now, &f.act), 0);
  assert_int_equal(f.act.kind, AIR_ACT_DONE);
  fx_run(&f, "r");
  expect_attempt(&f, 1, "p/a", false);
  fx_end(&f);
  /* The same answer from b after a's failure sticks. */
  fx_start(&f,
           ROUTE("[p/a, p/b]", "") "    sticky: {after_ms: 60000}\n"
           "    rules: [{on: network, action: switch}]\n", "r");
  fail_id(&f, 1, AIR_REASON_NETWORK, 0);
  expect_attempt(&f, 2, "p/b", false);
  assert_int_equal(air_run_ready_to_commit(f.run, 2, f.now, &f.act), 0);
  assert_int_equal(air_run_succeed(f.run, 2, f.now, &f.act), 0);
  fx_run(&f, "r");
  expect_attempt(&f, 1, "p/b", false);
  fx_end(&f);
}

/* A hedge slot refilled by a retry or a switch stays a hedge: flagged,
 * logged as one, and its win never makes the route sticky. */
static void refilled_hedge_stays_a_hedge(void **s) {
  (void)s;
  fx f;
  fx_start(&f,
           ROUTE("[p/a, p/b, p/c]", "") "    sticky: {after_ms: 60000}\n"
           "    rules:\n"
           "      - {on: overloaded, action: retry, max: 1, backoff: {base_ms: 100, jitter: none}}\n"
           "      - {on: network, action: switch}\n",
           "r");
  hedge_now(&f);
  expect_attempt(&f, 2, "p/b", true);
  /* The hedge's retry after its wait. */
  fail_id(&f, 2, AIR_REASON_OVERLOADED, 529);
  assert_int_equal(f.act.kind, AIR_ACT_WAIT);
  f.now += 100;
  assert_int_equal(air_run_wait_done(f.run, 2, f.now, &f.act), 0);
  expect_attempt(&f, 3, "p/b", true);
  assert_true(air_run_attempt(f.run, 2)->hedge);
  assert_true(air_run_attempt(f.run, 2)->hedge_refill); /* no new hedge */
  assert_false(air_run_attempt(f.run, 1)->hedge_refill);
  /* Its switch. */
  fail_id(&f, 3, AIR_REASON_NETWORK, 0);
  expect_attempt(&f, 4, "p/c", true);
  assert_true(air_run_attempt(f.run, 3)->hedge);
  assert_int_equal(air_run_ready_to_commit(f.run, 4, f.now, &f.act), 0);
  assert_int_equal(air_run_succeed(f.run, 4, f.now, &f.act), 0);
  assert_int_equal(f.act.kind, AIR_ACT_DONE);
  assert_int_equal(air__run_attempts(f.run), 4);
  fx_run(&f, "r");
  expect_attempt(&f, 1, "p/a", false); /* not sticky to p/c */
  fx_end(&f);
}

static bool all_but_b(void *data, const air__target *t) {
  (void)data;
  return strcmp(t->name, "p/b") != 0;
}

/* A hedge on a target that cannot express the request is skipped; its
 * replacement goes only where the breaker admits it, never to an open
 * breaker's target as a plain switch would. */
static void skipped_hedge_never_falls_back_to_an_open_breaker(void **s) {
  (void)s;
  fx f;
  fx_start(&f, ROUTE("[p/a, p/b, p/c]", ""), "p/c");
  fail_id(&f, f.act.attempt_id, AIR_REASON_OVERLOADED, 529);
  assert_int_equal(air_state_breaker(f.st, "p/c", f.now), AIR_BREAKER_OPEN);
  air_run_free(f.run);
  f.run = NULL;
  assert_int_equal(air__run_new_checked(f.cfg, f.st, "r", &f.rng, f.now,
                                        all_but_b, NULL, &f.run, &f.act),
                   0);
  expect_attempt(&f, 1, "p/a", false);
  hedge_now(&f);
  expect_attempt(&f, 2, "p/b", true); /* to be skipped */
  assert_int_equal(air__run_skip(f.run, f.act.attempt_id, "n",
                                 "n: not supported", f.now, &f.act),
                   0);
  assert_int_equal(f.act.kind, AIR_ACT_IDLE); /* not p/c: its breaker is open */
  assert_int_equal(air_run_attempt_count(f.run), 2);
  assert_int_equal(air__run_attempts(f.run), 1);
  fx_end(&f);
}

/* One target hedges only with same_target; max_prompt_bytes and total_ms
 * stop hedging. */
static void when_no_hedge_starts(void **s) {
  (void)s;
  fx f;
  fx_start(&f, ROUTE("[p/a]", ""), "r");
  assert_int_equal(f.act.hedge_at_ms, 0);
  fx_end(&f);
  fx_start(&f, ROUTE("[p/a]", ", same_target: true"), "r");
  hedge_now(&f);
  expect_attempt(&f, 2, "p/a", true);
  fx_end(&f);
  fx_start(&f, ROUTE("[p/a, p/b]", ", max_prompt_bytes: 100"), "r");
  air__run_set_prompt_bytes(f.run, 101);
  assert_int_equal(air__run_hedge_at(f.run), 0);
  air__run_set_prompt_bytes(f.run, 100);
  assert_int_equal(air__run_hedge_at(f.run), 1500);
  fx_end(&f);
  fx_start(&f, ROUTE("[p/a, p/b]", "") "    timeouts: {total_ms: 500}\n", "r");
  assert_int_equal(f.act.hedge_at_ms, 0); /* due at the deadline: never */
  fx_end(&f);
  /* Off by default. */
  fx_start(&f, PROVIDERS "routes: [{name: r, targets: [p/a, p/b]}]\n", "r");
  assert_int_equal(f.act.hedge_at_ms, 0);
  fx_end(&f);
}

/* A hedge goes only where the breaker admits it; finding none, it is not
 * asked again for the same newest racer. */
static void hedge_respects_the_breaker(void **s) {
  (void)s;
  fx f;
  fx_start(&f, ROUTE("[p/a, p/b]", ""), "p/b");
  fail_id(&f, f.act.attempt_id, AIR_REASON_OVERLOADED, 529);
  fx_run(&f, "r");
  hedge_now(&f);
  assert_int_equal(f.act.kind, AIR_ACT_IDLE);
  assert_int_equal(f.act.hedge_at_ms, 0);
  assert_int_equal(air_run_attempt_count(f.run), 1);
  fx_end(&f);
}

/* A racer waiting for its retry loses too (CANCEL with its failed id); a
 * caller cancel aborts every racer. */
static void waits_and_cancel_while_racing(void **s) {
  (void)s;
  fx f;
  fx_start(&f,
           ROUTE("[p/a, p/b]", "")
           "    rules: [{on: overloaded, action: retry, max: 1,\n"
           "             backoff: {base_ms: 100, jitter: none}}]\n",
           "r");
  hedge_now(&f);
  fail_id(&f, 1, AIR_REASON_OVERLOADED, 529);
  assert_int_equal(f.act.kind, AIR_ACT_WAIT);
  assert_int_equal(f.act.hedge_at_ms, 0); /* b is the newest, max spent */
  assert_int_equal(air_run_ready_to_commit(f.run, 2, f.now, &f.act), 0);
  assert_int_equal(air_run_next(f.run, &f.act), 1);
  assert_int_equal(f.act.kind, AIR_ACT_CANCEL);
  assert_int_equal(f.act.attempt_id, 1);
  assert_int_equal(air_run_wait_done(f.run, 1, f.now, &f.act), AIR_ESTATE);
  assert_int_equal(air_run_attempt(f.run, 0)->reason, AIR_REASON_OVERLOADED);
  fx_end(&f);

  fx_start(&f, ROUTE("[p/a, p/b]", ""), "r");
  hedge_now(&f);
  assert_int_equal(air_run_cancel(f.run, f.now, &f.act), 0);
  assert_int_equal(f.act.kind, AIR_ACT_FAIL);
  assert_int_equal(air_run_attempt(f.run, 0)->reason, AIR_REASON_ABORTED);
  assert_int_equal(air_run_attempt(f.run, 1)->reason, AIR_REASON_ABORTED);
  fx_end(&f);
}

/* A hedge that spends the budget while a racer waits for its retry: the
 * retry does not start (the budget holds), the hedge goes on. */
static void budget_spent_during_a_wait(void **s) {
  (void)s;
  fx f;
  fx_start(&f,
           ROUTE("[p/a, p/b]", "") "    budget: {max_total_attempts: 2}\n"
           "    rules: [{on: overloaded, action: retry, max: 1,\n"
           "             backoff: {base_ms: 1000, jitter: none}}]\n",
           "r");
  f.now += 100;
  fail_id(&f, 1, AIR_REASON_OVERLOADED, 529);
  assert_int_equal(f.act.kind, AIR_ACT_WAIT);
  /* No racer runs during the wait: no hedge. */
  assert_int_equal(f.act.hedge_at_ms, 0);
  fx_end(&f);

  fx_start(&f,
           ROUTE("[p/a, p/b]", "") "    budget: {max_total_attempts: 2}\n"
           "    rules: [{on: overloaded, action: retry, max: 1,\n"
           "             backoff: {base_ms: 1000, jitter: none}}]\n",
           "r");
  hedge_now(&f);
  expect_attempt(&f, 2, "p/b", true);
  fail_id(&f, 1, AIR_REASON_OVERLOADED, 529); /* budget spent: no wait */
  assert_int_equal(f.act.kind, AIR_ACT_IDLE);
  fx_end(&f);

  fx_start(&f,
           ROUTE("[p/a, p/b]", "") "    budget: {max_total_attempts: 3}\n"
           "    rules: [{on: overloaded, action: retry, max: 2,\n"
           "             backoff: {base_ms: 1000, jitter: none}}]\n",
           "r");
  hedge_now(&f);                              /* attempt 2, at 1500 */
  fail_id(&f, 2, AIR_REASON_OVERLOADED, 529); /* b waits 1000 */
  assert_int_equal(f.act.kind, AIR_ACT_WAIT);
  unsigned wb = f.act.attempt_id;
  fail_id(&f, 1, AIR_REASON_OVERLOADED, 529); /* a waits 2000 */
  assert_int_equal(f.act.kind, AIR_ACT_WAIT);
  unsigned wa = f.act.attempt_id;
  f.now += 1000;
  assert_int_equal(air_run_wait_done(f.run, wb, f.now, &f.act), 0);
  expect_attempt(&f, 3, "p/b", true); /* the budget's last attempt, a hedge */
  f.now += 1000;
  assert_int_equal(air_run_wait_done(f.run, wa, f.now, &f.act), 0);
  assert_int_equal(f.act.kind, AIR_ACT_IDLE); /* spent: a stops, b goes on */
  assert_int_equal(air__run_attempts(f.run), 3);
  fx_end(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(hedge_starts_late_and_first_content_wins),
      cmocka_unit_test(hedges_follow_the_newest_racer),
      cmocka_unit_test(racer_failures_while_another_runs),
      cmocka_unit_test(budget_spent_mid_race),
      cmocka_unit_test(losing_probe_releases_its_lease),
      cmocka_unit_test(hedge_win_is_not_sticky),
      cmocka_unit_test(refilled_hedge_stays_a_hedge),
      cmocka_unit_test(skipped_hedge_never_falls_back_to_an_open_breaker),
      cmocka_unit_test(when_no_hedge_starts),
      cmocka_unit_test(hedge_respects_the_breaker),
      cmocka_unit_test(waits_and_cancel_while_racing),
      cmocka_unit_test(budget_spent_during_a_wait),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
