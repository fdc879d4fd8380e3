/*
 * The breaker and sticky routes (docs/design.md §3.1) through the real async
 * path: air_client_chat against `airetry mock` (scripts/breaker.yaml), the
 * breaker on with `failures: 2` and a short `open_ms`. What the client did
 * is read from the mock's log (which attempts reached it) and from each
 * call's attempt log.
 *
 * Time: the breaker opens at the failure that trips it, which happens
 * inside the call that saw it, so between that call's t_start and t_end on
 * the client's monotonic clock (it_now_ms). "Still open" is asserted only
 * for a call that ended before t_start + OPEN_MS, and a probe is awaited by
 * a bounded poll of the clock until t_end + OPEN_MS: no sleep decides an
 * outcome.
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

#define OPEN_MS 1000u
/* The breaker's clock and it_now_ms may round a millisecond apart. */
#define CLOCK_SLACK_MS 2u
/* Bounds of the event waits. */
#define EVENT_MS 10000u

/* Every overloaded failure switches at once (one attempt per target), the
 * deadlines are far from every wait here (the probe's lease with them). */
#define POLICY                                                           \
  "    rules:\n"                                                         \
  "      - {on: [overloaded], action: switch}\n"                         \
  "    timeouts: {first_byte_ms: 5000, first_chunk_ms: 5000, chunk_ms: " \
  "5000,\n"                                                              \
  "               total_ms: 20000}\n"

#define BREAKER \
  "defaults:\n" \
  "  breaker: {failures: 2, open_ms: 1000}\n" /* open_ms: OPEN_MS */

static void free_token(void *p) {
  air_cancel_free(p);
}

/* One whole (non-streamed) call of route r; asserts it answered. */
static void call_ok(it_client *cl, it_call *c, const char *want_target) {
  *c = (it_call){.dialect = AIR_DIALECT_OPENAI, .model = "r"};
  it_chat(cl->client, c);
  if (c->rc != 0 || strcmp(c->res->target, want_target) != 0) {
    it_call_print(c);
    fail_msg("want an answer from %s", want_target);
  }
}

/* The clock is past `at`. */
static bool clock_past(void *data) {
  return it_now_ms() >= *(const uint64_t *)data;
}

/* Waits (a bounded poll of the clock) until a breaker tripped by a call
 * that ended at t_end is half-open for sure. */
static void wait_half_open(uint64_t t_end) {
  uint64_t at = t_end + OPEN_MS + CLOCK_SLACK_MS;
  assert_int_equal(it_wait_for(clock_past, &at, OPEN_MS + EVENT_MS), 0);
}

/* The call ended while a breaker tripped in the call `opener` is surely
 * still open. */
static void expect_still_open(const it_call *c, const it_call *opener) {
  if (c->t_end >= opener->t_start + OPEN_MS)
    fail_msg(
        "the call ended %llu ms after the breaker opened: too late to "
        "see it open (open_ms %u)",
        (unsigned long long)(c->t_end - opener->t_start), OPEN_MS);
}

/* Opens the breaker of mo/<model> (its attempts 1 and 2 fail with 503):
 * two calls, each failing over to mo/fb. Returns in *second the call that
 * tripped it. */
static void open_breaker(it_client *cl, const char *model, it_call *second) {
  it_call first;
  call_ok(cl, &first, "mo/fb");
  assert_int_equal(first.res->n_log, 2);
  it_call_cleanup(&first);
  call_ok(cl, second, "mo/fb");
  assert_int_equal(second->res->n_log, 2);
  assert_int_equal(second->res->log[0].reason, AIR_REASON_OVERLOADED);
  it_log log;
  const char *models[] = {model, "fb", model, "fb"};
  assert_int_equal(it_mock_log_settled(it_suite(), 4, EVENT_MS, &log), 0);
  assert_true(it_log_models(&log, 4, models));
}

/* Two calls started at once, from their own threads. */
typedef struct racer {
  pthread_t th;
  air_client *client;
  it_call c;
} racer;

static void *racer_main(void *p) {
  racer *r = p;
  it_chat(r->client, &r->c);
  return NULL;
}

/*
 * Open: after 2 failures the target is skipped (no attempt reaches it).
 * Half-open: of two calls started together, exactly one probes (one attempt
 * reaches it); its failure re-opens the breaker. The next probe answers and
 * closes it: the call after it starts on the target again.
 */
static void test_open_probe_close(void **state) {
  (void)state;
  it_client cl;
  assert_int_equal(
      it_client_new(
          it_suite(),
          BREAKER "routes:\n  - name: r\n    targets: [mo/bo, mo/fb]\n" POLICY,
          2, &cl),
      0);
  it_call opener;
  open_breaker(&cl, "bo", &opener);

  /* Open: skipped. */
  it_call c;
  call_ok(&cl, &c, "mo/fb");
  expect_still_open(&c, &opener);
  assert_int_equal(c.res->n_log, 1);
  it_call_cleanup(&c);
  it_log log;
  const char *open_models[] = {"bo", "fb", "bo", "fb", "fb"};
  assert_int_equal(it_mock_log_exactly(it_suite(), 5, EVENT_MS, &log), 0);
  assert_true(it_log_models(&log, 5, open_models));

  /* Half-open: one probe among two calls. */
  wait_half_open(opener.t_end);
  it_call_cleanup(&opener);
  racer *r = calloc(2, sizeof(*r));
  assert_non_null(r);
  it_track(r, free);
  for (int i = 0; i < 2; i++) {
    r[i].client = cl.client;
    r[i].c = (it_call){.dialect = AIR_DIALECT_OPENAI, .model = "r"};
    assert_int_equal(pthread_create(&r[i].th, NULL, racer_main, &r[i]), 0);
  }
  for (int i = 0; i < 2; i++) pthread_join(r[i].th, NULL);
  uint64_t probe_end = 0;
  unsigned probes = 0;
  for (int i = 0; i < 2; i++) {
    if (r[i].c.rc != 0) it_call_print(&r[i].c);
    assert_int_equal(r[i].c.rc, 0);
    assert_string_equal(r[i].c.res->target, "mo/fb");
    probes += r[i].c.res->n_log == 2;
    if (r[i].c.t_end > probe_end) probe_end = r[i].c.t_end;
    it_call_cleanup(&r[i].c);
  }
  it_untrack(r);
  free(r);
  assert_int_equal(probes, 1);
  assert_int_equal(it_mock_log_exactly(it_suite(), 8, EVENT_MS, &log), 0);
  size_t on_bo = 0;
  for (size_t i = 5; i < log.n; i++) on_bo += strcmp(log.e[i].model, "bo") == 0;
  if (on_bo != 1) {
    it_log_print(&log);
    fail_msg("%zu probe attempts reached the target, want 1", on_bo);
  }

  /* The failed probe re-opened it; the next probe (attempt 4) answers and
   * closes it: the call after that starts on it. */
  wait_half_open(probe_end);
  call_ok(&cl, &c, "mo/bo");
  assert_int_equal(c.res->n_log, 1);
  it_call_cleanup(&c);
  call_ok(&cl, &c, "mo/bo");
  assert_int_equal(c.res->n_log, 1);
  it_call_cleanup(&c);
  assert_int_equal(it_mock_log_exactly(it_suite(), 10, EVENT_MS, &log), 0);
  assert_string_equal(log.e[8].model, "bo");
  assert_string_equal(log.e[9].model, "bo");
  it_client_free(&cl);
}

/* The probe's target holds the attempt open (bc attempt 3 hangs). */
static bool probe_in_flight(void *data) {
  (void)data;
  return it_mock_open(it_suite(), "bc") >= 1;
}

typedef struct probe_call {
  pthread_t th;
  air_client *client;
  it_call c;
} probe_call;

static void *probe_main(void *p) {
  probe_call *pc = p;
  it_chat(pc->client, &pc->c);
  return NULL;
}

/*
 * A probe ended by its caller's cancel gives no verdict: the probe slot is
 * freed, and the very next call probes again (a leaked slot would make it
 * skip the target until the probe's lease expired, seconds later).
 */
static void test_cancelled_probe_frees_the_slot(void **state) {
  (void)state;
  it_client cl;
  assert_int_equal(
      it_client_new(
          it_suite(),
          BREAKER "routes:\n  - name: r\n    targets: [mo/bc, mo/fb]\n" POLICY,
          2, &cl),
      0);
  it_call opener;
  open_breaker(&cl, "bc", &opener);
  wait_half_open(opener.t_end);
  it_call_cleanup(&opener);

  /* The probe: cancelled while its attempt hangs at the mock. */
  air_cancel *token = NULL;
  assert_int_equal(air_cancel_new(&token), 0);
  it_track(token, free_token);
  probe_call pc = {
      .client = cl.client,
      .c = {.dialect = AIR_DIALECT_OPENAI, .model = "r", .cancel = token}};
  assert_int_equal(pthread_create(&pc.th, NULL, probe_main, &pc), 0);
  int seen = it_wait_for(probe_in_flight, NULL, EVENT_MS);
  air_cancel_trigger(token);
  pthread_join(pc.th, NULL);
  assert_int_equal(seen, 0);
  if (pc.c.rc != AIR_ECANCELED) it_call_print(&pc.c);
  assert_int_equal(pc.c.rc, AIR_ECANCELED);
  assert_int_equal(pc.c.res->n_log, 1);
  assert_string_equal(pc.c.res->log[0].target, "mo/bc");
  it_call_cleanup(&pc.c);
  it_untrack(token);
  air_cancel_free(token);
  it_log log;
  assert_int_equal(it_mock_log_exactly(it_suite(), 5, EVENT_MS, &log), 0);
  assert_string_equal(log.e[4].model, "bc");
  assert_true(log.e[4].hung_up);

  /* The next call probes again: attempt 4 reaches the mock and answers. */
  it_call c;
  call_ok(&cl, &c, "mo/bc");
  assert_int_equal(c.res->n_log, 1);
  it_call_cleanup(&c);
  const char *models[] = {"bc", "fb", "bc", "fb", "bc", "bc"};
  assert_int_equal(it_mock_log_exactly(it_suite(), 6, EVENT_MS, &log), 0);
  assert_true(it_log_models(&log, 6, models));
  it_client_free(&cl);
}

/* Sticky on: after a failover answered, the next call starts on the
 * fallback (the mock sees no attempt on the first target). */
static void test_sticky_starts_on_the_fallback(void **state) {
  (void)state;
  it_client cl;
  assert_int_equal(
      it_client_new(it_suite(),
                    "defaults:\n  breaker: {enabled: false}\n"
                    "routes:\n  - name: r\n    targets: [mo/st, mo/fb]\n"
                    "    sticky: {requests: 5}\n" POLICY,
                    1, &cl),
      0);
  it_call c;
  call_ok(&cl, &c, "mo/fb");
  assert_int_equal(c.res->n_log, 2);
  it_call_cleanup(&c);
  call_ok(&cl, &c, "mo/fb");
  assert_int_equal(c.res->n_log, 1);
  it_call_cleanup(&c);
  it_log log;
  const char *models[] = {"st", "fb", "fb"};
  assert_int_equal(it_mock_log_exactly(it_suite(), 3, EVENT_MS, &log), 0);
  assert_true(it_log_models(&log, 3, models));
  it_client_free(&cl);
}

int main(void) {
  it_case_filter();
  it_suite_use_script(IT_SCRIPTS "breaker.yaml");
  const struct CMUnitTest tests[] = {
      IT_TEST(test_open_probe_close),
      IT_TEST(test_cancelled_probe_frees_the_slot),
      IT_TEST(test_sticky_starts_on_the_fallback),
  };
  return cmocka_run_group_tests_name("client_breaker", tests, it_group_setup,
                                     it_group_teardown);
}
