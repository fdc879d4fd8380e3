/*
 * Cancellation (docs/design.md §3.4) against `airetry mock`: a cancel token
 * triggered from another thread, once the call reached the phase under test
 * (an event: parts delivered, a failure reported, the attempt open at the
 * mock), ends air_client_chat at once in every
 * phase, the upstream transfer is closed at once (the mock saw the hang-up
 * within 100 ms of the cancel, on its own clock), and nothing follows it:
 * no retry, no switch, no further part.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>

#include "harness.h"

/* The contract: the upstream connection closes within 100 ms of a cancel. */
#define HANGUP_MS 100
/* A hang-up may appear this much before the cancel (the ms rounding of two
 * clocks); never more. */
#define CLOCK_SLACK_MS 5
/* air_client_chat returns this soon after the cancel. */
#define RETURN_MS 100

#define TIMEOUTS                                                              \
  "defaults:\n"                                                               \
  "  breaker: {enabled: false}\n"                                             \
  "  timeouts: {first_byte_ms: 5000, first_chunk_ms: 5000, chunk_ms: 5000,\n" \
  "             total_ms: 20000}\n"

static void free_token(void *p) {
  air_cancel_free(p);
}

/* A new token, released by the teardown if the test does not get to. */
static air_cancel *new_token(void) {
  air_cancel *t = NULL;
  assert_int_equal(air_cancel_new(&t), 0);
  it_track(t, free_token);
  return t;
}

static void drop_token(air_cancel *t) {
  it_untrack(t);
  air_cancel_free(t);
}

/*
 * Triggers a token from its own thread when an event has happened: the call
 * delivered `texts` text parts, or reported `failures` failed attempts, or
 * the mock's log shows `open` attempts of `model` (NULL: any) in flight.
 * The wait is a bounded poll (EVENT_MS); an event that never comes is
 * reported by expect_event, and the token is triggered anyway so the call
 * ends.
 */
#define EVENT_MS 10000u

typedef struct canceller {
  pthread_t th;
  air_cancel *token;
  /* the event (0 / NULL: not this one) */
  const it_call *call;
  unsigned texts, failures;
  int open;
  const char *model;
  /* what happened */
  bool missed;       /* the event did not come within EVENT_MS */
  uint64_t at;       /* it_now_ms when triggered */
  unsigned texts_at; /* text parts delivered when triggered */
} canceller;

static bool event_came(void *p) {
  canceller *k = p;
  if (k->texts && it_call_texts(k->call) < k->texts) return false;
  if (k->failures && it_call_failures(k->call) < k->failures) return false;
  if (k->open && it_mock_open(it_suite(), k->model) < k->open) return false;
  return true;
}

static void *cancel_main(void *p) {
  canceller *k = p;
  k->missed = it_wait_for(event_came, k, EVENT_MS) != 0;
  k->at = it_now_ms();
  if (k->call != NULL) k->texts_at = it_call_texts(k->call);
  air_cancel_trigger(k->token);
  return NULL;
}

/* Starts the canceller thread of k (its event fields set by the caller). */
static void cancel_on(canceller *k, air_cancel *token) {
  k->token = token;
  assert_int_equal(pthread_create(&k->th, NULL, cancel_main, k), 0);
}

static void expect_event(const canceller *k) {
  if (k->missed)
    fail_msg("the event the cancel waited for did not come in %u ms", EVENT_MS);
}

/* The call ended as a cancel, promptly. */
static void expect_cancelled(const it_call *c, const canceller *k) {
  expect_event(k);
  if (c->rc != AIR_ECANCELED) it_call_print(c);
  assert_int_equal(c->rc, AIR_ECANCELED);
  assert_non_null(c->res);
  assert_int_equal(c->res->reason, AIR_REASON_ABORTED);
  assert_int_equal(c->res->status, 499);
  assert_string_equal(c->res->text, "");
  assert_true(c->t_end >= k->at);
  if (c->t_end - k->at > RETURN_MS) {
    fprintf(stderr, "air_client_chat returned %llu ms after the cancel\n",
            (unsigned long long)(c->t_end - k->at));
    fail();
  }
}

/*
 * The mock's entry was hung up within HANGUP_MS of the cancel, on the
 * mock's clock. The mock's zero lies between our reset_before and
 * reset_after, so on its clock the cancel happened at k->at - reset_after
 * at the earliest and k->at - reset_before at the latest. The delay is
 * measured from the earliest (the bound that makes the hang-up look latest);
 * the hang-up cannot come before the earliest.
 */
static void expect_hangup(const it_log *log, size_t i, const canceller *k) {
  const it_entry *e = &log->e[i];
  if (!e->hung_up || e->hung_up_ms < 0) {
    it_log_print(log);
    fail_msg("the mock did not see the hang-up");
  }
  int64_t earliest = (int64_t)(k->at - it_suite()->reset_after);
  int64_t d = e->hung_up_ms - earliest;
  fprintf(
      stderr, "  hang-up %lld ms after the cancel (mock clock, +-%llu)\n",
      (long long)d,
      (unsigned long long)(it_suite()->reset_after - it_suite()->reset_before));
  if (d < -CLOCK_SLACK_MS || d > HANGUP_MS) {
    it_log_print(log);
    fail_msg("hang-up %lld ms after the cancel", (long long)d);
  }
}

/* While the answer streams slowly: parts stop, the transfer closes. */
static void test_cancel_while_streaming(void **state) {
  (void)state;
  it_client cl;
  assert_int_equal(
      it_client_new(
          it_suite(),
          TIMEOUTS "routes:\n"
                   "  - {name: r, targets: [mo/s@delay=100@tokens=40, mo/f]}\n",
          1, &cl),
      0);
  air_cancel *token = new_token();
  it_call c = {.dialect = AIR_DIALECT_OPENAI,
               .model = "r",
               .stream = true,
               .cancel = token};
  /* Cancelled while the answer streams: after its fourth text part. */
  canceller k = {.call = &c, .texts = 4};
  cancel_on(&k, token);
  it_chat(cl.client, &c);
  pthread_join(k.th, NULL);
  expect_cancelled(&c, &k);
  /* What arrived before the cancel, and nothing after it (one part may
   * have been on its way to on_part while the token was triggered). */
  unsigned parts = c.n_parts;
  if (c.n_text < 4 || c.n_text > k.texts_at + 1) {
    fprintf(stderr, "%u text parts, %u when cancelled\n", c.n_text, k.texts_at);
    fail();
  }
  char full[512];
  it_answer("s@delay=100@tokens=40", 40, full, sizeof(full));
  assert_memory_equal(c.text, full, c.text_n);
  assert_int_equal(c.n_error, 0);
  assert_int_equal(c.res->n_log, 1);
  assert_int_equal(c.res->log[0].reason, AIR_REASON_ABORTED);
  it_log log;
  assert_int_equal(it_mock_log_exactly(it_suite(), 1, 2000, &log), 0);
  const char *models[] = {"s@delay=100@tokens=40"};
  assert_true(it_log_models(&log, 1, models));
  expect_hangup(&log, 0, &k);
  assert_int_equal(c.n_parts, parts);
  it_call_cleanup(&c);
  drop_token(token);
  it_client_free(&cl);
}

/* While the upstream is silent (no head yet), for both kinds of caller and
 * both upstream dialects. */
static void test_cancel_while_hanging(void **state) {
  (void)state;
  static const char *const targets[] = {"mo/h@hang", "ma/h@hang",
                                        "mo/h@silent=4000", "ma/h@slow=4000"};
  for (int i = 0; i < 4; i++) {
    for (int stream = 0; stream < 2; stream++) {
      assert_int_equal(it_mock_reset(it_suite()), 0);
      char tail[1024];
      snprintf(tail, sizeof(tail),
               TIMEOUTS "routes:\n  - {name: r, targets: [%s, mo/f]}\n",
               targets[i]);
      it_client cl;
      assert_int_equal(it_client_new(it_suite(), tail, 1, &cl), 0);
      air_cancel *token = new_token();
      it_call c = {.dialect = AIR_DIALECT_ANTHROPIC,
                   .model = "r",
                   .stream = stream,
                   .cancel = token};
      /* Cancelled while the mock holds the attempt open. */
      canceller k = {.open = 1, .model = targets[i] + 3};
      cancel_on(&k, token);
      it_chat(cl.client, &c);
      pthread_join(k.th, NULL);
      fprintf(stderr, "  %s %s\n", targets[i], stream ? "streaming" : "whole");
      expect_cancelled(&c, &k);
      assert_int_equal(c.n_parts, 0);
      assert_int_equal(c.n_commit, 0);
      it_log log;
      assert_int_equal(it_mock_log_exactly(it_suite(), 1, 2000, &log), 0);
      assert_string_equal(log.e[0].model, targets[i] + 3);
      expect_hangup(&log, 0, &k);
      it_call_cleanup(&c);
      drop_token(token);
      it_client_free(&cl);
    }
  }
}

/* During a backoff wait: the wait ends, no further attempt is made. */
static void test_cancel_during_backoff(void **state) {
  (void)state;
  it_client cl;
  assert_int_equal(
      it_client_new(it_suite(),
                    TIMEOUTS "routes:\n"
                             "  - {name: r, targets: [mo/b@429@ra=3, mo/f]}\n",
                    1, &cl),
      0);
  air_cancel *token = new_token();
  it_call c = {.dialect = AIR_DIALECT_OPENAI,
               .model = "r",
               .stream = true,
               .cancel = token};
  /* Cancelled in the 3 s wait that follows the first failure. */
  canceller k = {.call = &c, .failures = 1};
  cancel_on(&k, token);
  it_chat(cl.client, &c);
  pthread_join(k.th, NULL);
  expect_cancelled(&c, &k);
  assert_int_equal(c.res->n_log, 1);
  assert_int_equal(c.res->log[0].reason, AIR_REASON_RATE_LIMIT);
  assert_int_equal(c.res->log[0].wait_ms, 3000);
  assert_int_equal(c.n_failed, 1);
  /* No retry or switch reached the mock. */
  it_log log;
  assert_int_equal(it_mock_log_exactly(it_suite(), 1, 2000, &log), 0);
  const char *models[] = {"b@429@ra=3"};
  assert_true(it_log_models(&log, 1, models));
  it_call_cleanup(&c);
  drop_token(token);
  it_client_free(&cl);
}

/* A token already triggered: no attempt at all. */
static void test_cancel_before_the_call(void **state) {
  (void)state;
  it_client cl;
  assert_int_equal(
      it_client_new(it_suite(),
                    TIMEOUTS "routes:\n  - {name: r, targets: [mo/n]}\n", 1,
                    &cl),
      0);
  air_cancel *token = new_token();
  air_cancel_trigger(token);
  for (int stream = 0; stream < 2; stream++) {
    it_call c = {.dialect = AIR_DIALECT_OPENAI,
                 .model = "r",
                 .stream = stream,
                 .cancel = token};
    it_chat(cl.client, &c);
    assert_int_equal(c.rc, AIR_ECANCELED);
    assert_int_equal(c.res->reason, AIR_REASON_ABORTED);
    assert_int_equal(c.res->n_log, 0);
    assert_int_equal(c.n_parts, 0);
    it_call_cleanup(&c);
  }
  it_log log;
  assert_int_equal(it_mock_log_exactly(it_suite(), 0, 2000, &log), 0);
  drop_token(token);
  it_client_free(&cl);
}

/* on_part returning non-zero cancels the call and closes the transfer. */
static void test_stop_from_on_part(void **state) {
  (void)state;
  it_client cl;
  assert_int_equal(
      it_client_new(
          it_suite(),
          TIMEOUTS "routes:\n"
                   "  - {name: r, targets: [ma/p@delay=100@tokens=40, mo/f]}\n",
          1, &cl),
      0);
  it_call c = {.dialect = AIR_DIALECT_OPENAI,
               .model = "r",
               .stream = true,
               .stop_after = 4};
  it_chat(cl.client, &c);
  if (c.rc != AIR_ECANCELED) it_call_print(&c);
  assert_int_equal(c.rc, AIR_ECANCELED);
  assert_int_equal(c.n_parts, 4);
  assert_int_equal(c.res->n_log, 1);
  /* The last part was delivered at ~300 ms; the call ended right after. */
  assert_true(c.t_end - c.t_start < 300 + 100 + 300);
  it_log log;
  assert_int_equal(it_mock_log_exactly(it_suite(), 1, 2000, &log), 0);
  assert_true(log.e[0].hung_up);
  assert_true(log.e[0].hung_up_ms - log.e[0].t_ms < 300 + 100 + 200);
  assert_int_equal(c.n_parts, 4);
  it_call_cleanup(&c);
  it_client_free(&cl);
}

/*
 * on_part returning non-zero while the gate releases a held answer at its
 * end (commit: complete holds it all; a short answer under a refusal hold
 * is held to its finish): the cancel made inside that callback is carried
 * out when it returns, the call ends as a cancel, and no part reaches the
 * caller after the one that stopped it (the job lives on the caller's
 * stack: a part after its end would be a use-after-return).
 */
static void stop_in_release(const char *route_yaml, bool stream) {
  it_client cl;
  assert_int_equal(it_client_new(it_suite(), route_yaml, 1, &cl), 0);
  it_call c = {.dialect = AIR_DIALECT_OPENAI,
               .model = "r",
               .stream = stream,
               .stop_after = 2};
  it_chat(cl.client, &c);
  if (c.rc != AIR_ECANCELED || c.n_parts != 2) it_call_print(&c);
  assert_int_equal(c.rc, AIR_ECANCELED);
  assert_int_equal(c.n_parts, 2);
  assert_non_null(c.res);
  assert_int_equal(c.res->reason, AIR_REASON_ABORTED);
  it_call_cleanup(&c);
  it_client_free(&cl);
}

static void test_stop_from_on_part_under_complete(void **state) {
  (void)state;
  stop_in_release(TIMEOUTS
                  "routes:\n"
                  "  - {name: r, commit: complete, "
                  "targets: [mo/p@tokens=12]}\n",
                  true);
}

static void test_stop_from_on_part_in_refusal_hold(void **state) {
  (void)state;
  stop_in_release(TIMEOUTS
                  "routes:\n"
                  "  - name: r\n"
                  "    targets: [mo/p@tokens=3]\n"
                  "    refusal: {phrases: [\"a phrase no answer of the mock "
                  "starts with, long enough to hold it all\"]}\n",
                  true);
}

/* One token shared by several calls in flight on one client (two workers):
 * one trigger ends them all. */
typedef struct shared_call {
  pthread_t th;
  air_client *client;
  it_call c;
} shared_call;

static void *shared_main(void *p) {
  shared_call *s = p;
  it_chat(s->client, &s->c);
  return NULL;
}

static void test_one_token_many_calls(void **state) {
  (void)state;
  it_client cl;
  assert_int_equal(
      it_client_new(it_suite(),
                    TIMEOUTS
                    "routes:\n"
                    "  - {name: r, targets: [mo/m@delay=100@tokens=40, mo/f]}\n"
                    "  - {name: h, targets: [ma/m@hang, mo/f]}\n",
                    2, &cl),
      0);
  air_cancel *token = new_token();
  enum { N = 4 };
  shared_call *s = calloc(N, sizeof(*s));
  assert_non_null(s);
  it_track(s, free);
  for (int i = 0; i < N; i++) {
    s[i].client = cl.client;
    s[i].c = (it_call){.dialect = AIR_DIALECT_OPENAI,
                       .model = i % 2 ? "h" : "r",
                       .stream = i < 2,
                       .cancel = token};
    assert_int_equal(pthread_create(&s[i].th, NULL, shared_main, &s[i]), 0);
  }
  /* Cancelled when all N attempts are in flight at the mock. */
  canceller k = {.open = N};
  cancel_on(&k, token);
  pthread_join(k.th, NULL);
  for (int i = 0; i < N; i++) pthread_join(s[i].th, NULL);
  for (int i = 0; i < N; i++) {
    expect_cancelled(&s[i].c, &k);
    it_call_cleanup(&s[i].c);
  }
  it_log log;
  assert_int_equal(it_mock_log_exactly(it_suite(), N, 2000, &log), 0);
  for (int i = 0; i < N; i++) assert_true(log.e[i].hung_up);
  it_untrack(s);
  free(s);
  drop_token(token);
  it_client_free(&cl);
}

int main(void) {
  it_case_filter();
  const struct CMUnitTest tests[] = {
      IT_TEST(test_cancel_while_streaming),
      IT_TEST(test_cancel_while_hanging),
      IT_TEST(test_cancel_during_backoff),
      IT_TEST(test_cancel_before_the_call),
      IT_TEST(test_stop_from_on_part),
      IT_TEST(test_stop_from_on_part_under_complete),
      IT_TEST(test_stop_from_on_part_in_refusal_hold),
      IT_TEST(test_one_token_many_calls),
  };
  return cmocka_run_group_tests_name("client_cancel", tests, it_group_setup,
                                     it_group_teardown);
}
