/*
 * The client's lifetime against `airetry mock`: air_client_free waits for
 * the calls in flight and returns once they ended (include/airetry.h), and
 * one cancel token ends any number of calls that share it (more than the 8
 * watchers a token once held).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>

#include "harness.h"

#define TIMEOUTS                                                              \
  "defaults:\n"                                                               \
  "  breaker: {enabled: false}\n"                                             \
  "  timeouts: {first_byte_ms: 5000, first_chunk_ms: 5000, chunk_ms: 5000,\n" \
  "             total_ms: 20000}\n"

/* Bound on air_client_free with one ~1 s call in flight (loaded CI, ASan). */
#define FREE_MS 10000u
/* Bound on the mock seeing every call of a test start. */
#define STARTED_MS 10000u

static void free_token(void *p) {
  air_cancel_free(p);
}

/* One call on its own thread. */
typedef struct bg_call {
  pthread_t th;
  air_client *client;
  it_call c;
  atomic_bool ended;
} bg_call;

static void *bg_main(void *p) {
  bg_call *b = p;
  it_chat(b->client, &b->c);
  atomic_store(&b->ended, true);
  return NULL;
}

/* Polls the mock log until it holds n entries. Returns 0, or -1 after
 * timeout_ms. */
static int wait_started(size_t n, unsigned timeout_ms) {
  it_log *log = malloc(sizeof(*log));
  if (log == NULL) return -1;
  uint64_t until = it_now_ms() + timeout_ms;
  int rc = -1;
  while (it_now_ms() < until) {
    if (it_mock_log(it_suite(), log) == 0 && log->n >= n) {
      rc = 0;
      break;
    }
    it_sleep_ms(10);
  }
  free(log);
  return rc;
}

/* air_client_free on its own thread, so a hang is a failed test, not a
 * stuck suite. */
typedef struct freer {
  pthread_t th;
  air_client *client;
  atomic_bool returned;
  uint64_t at; /* it_now_ms when it returned */
} freer;

static void *free_main(void *p) {
  freer *f = p;
  air_client_free(f->client);
  f->at = it_now_ms();
  atomic_store(&f->returned, true);
  return NULL;
}

/* Free with a streaming call in flight: free waits for it, the call
 * completes whole, then free returns. */
static void test_free_waits_for_call_in_flight(void **state) {
  (void)state;
  it_client cl;
  assert_int_equal(
      it_client_new(it_suite(),
                    TIMEOUTS
                    "routes:\n"
                    "  - {name: r, targets: [mo/s@delay=100@tokens=10]}\n",
                    1, &cl),
      0);
  bg_call *b = calloc(1, sizeof(*b));
  assert_non_null(b);
  it_track(b, free);
  b->client = cl.client;
  b->c = (it_call){.dialect = AIR_DIALECT_OPENAI, .model = "r", .stream = true};
  atomic_init(&b->ended, false);
  assert_int_equal(pthread_create(&b->th, NULL, bg_main, b), 0);
  assert_int_equal(wait_started(1, STARTED_MS), 0);

  /* The client is the freer's now: the teardown must not free it again. */
  it_untrack(cl.client);
  freer f = {.client = cl.client};
  atomic_init(&f.returned, false);
  assert_int_equal(pthread_create(&f.th, NULL, free_main, &f), 0);
  uint64_t until = it_now_ms() + FREE_MS;
  while (!atomic_load(&f.returned) && it_now_ms() < until) it_sleep_ms(10);
  if (!atomic_load(&f.returned))
    fail_msg("air_client_free did not return within %u ms", FREE_MS);
  pthread_join(f.th, NULL);
  pthread_join(b->th, NULL);

  /* The call ran to its end before free returned: its last part (the
   * finish, delivered on the client's worker before the call ends) came
   * first. The caller's own return (t_end) may be scheduled after free's. */
  assert_true(atomic_load(&b->ended));
  if (b->c.rc != 0) it_call_print(&b->c);
  assert_int_equal(b->c.rc, 0);
  assert_int_equal(b->c.n_finish, 1);
  assert_true(b->c.t_last_part <= f.at);
  char full[512];
  it_answer("s@delay=100@tokens=10", 10, full, sizeof(full));
  assert_string_equal(b->c.text, full);
  it_call_cleanup(&b->c);
  it_untrack(b);
  free(b);
  it_untrack(cl.cfg);
  air_config_free(cl.cfg);
}

/* Free with no call ever made, and right after calls ended: returns. */
static void test_free_idle_client(void **state) {
  (void)state;
  it_client cl;
  assert_int_equal(
      it_client_new(it_suite(),
                    TIMEOUTS "routes:\n  - {name: r, targets: [mo/f]}\n", 2,
                    &cl),
      0);
  it_call c = {.dialect = AIR_DIALECT_OPENAI, .model = "r", .stream = true};
  assert_int_equal(it_chat(cl.client, &c), 0);
  it_call_cleanup(&c);
  it_client_free(&cl);
}

/* One token shared by 12 calls in flight (more than the 8 watchers a token
 * once held): one trigger ends every one of them as a cancel. */
enum { N_SHARED = 12 };

static void test_token_shared_by_12_calls(void **state) {
  (void)state;
  it_client cl;
  assert_int_equal(
      it_client_new(
          it_suite(),
          TIMEOUTS "routes:\n"
                   "  - {name: r, targets: [mo/m@delay=100@tokens=100, mo/f]}\n"
                   "  - {name: h, targets: [ma/m@hang, mo/f]}\n",
          2, &cl),
      0);
  air_cancel *token = NULL;
  assert_int_equal(air_cancel_new(&token), 0);
  it_track(token, free_token);
  bg_call *s = calloc(N_SHARED, sizeof(*s));
  assert_non_null(s);
  it_track(s, free);
  for (int i = 0; i < N_SHARED; i++) {
    s[i].client = cl.client;
    s[i].c = (it_call){.dialect = AIR_DIALECT_OPENAI,
                       .model = i % 2 ? "h" : "r",
                       .stream = i % 3 != 0,
                       .cancel = token};
    atomic_init(&s[i].ended, false);
    assert_int_equal(pthread_create(&s[i].th, NULL, bg_main, &s[i]), 0);
  }
  /* Every call reached the mock (and so is watching the token). */
  assert_int_equal(wait_started(N_SHARED, STARTED_MS), 0);
  uint64_t at = it_now_ms();
  air_cancel_trigger(token);
  for (int i = 0; i < N_SHARED; i++) pthread_join(s[i].th, NULL);
  for (int i = 0; i < N_SHARED; i++) {
    if (s[i].c.rc != AIR_ECANCELED) {
      fprintf(stderr, "call %d ended %s\n", i, air_strerror(s[i].c.rc));
      it_call_print(&s[i].c);
    }
    assert_int_equal(s[i].c.rc, AIR_ECANCELED);
    assert_int_equal(s[i].c.res->reason, AIR_REASON_ABORTED);
    assert_true(s[i].c.t_end >= at);
    it_call_cleanup(&s[i].c);
  }
  /* No call went on to its fallback. */
  it_log log;
  assert_int_equal(it_mock_log_settled(it_suite(), N_SHARED, 2000, &log), 0);
  assert_int_equal(log.n, N_SHARED);
  it_untrack(s);
  free(s);
  it_untrack(token);
  air_cancel_free(token);
  it_client_free(&cl);
}

int main(void) {
  it_case_filter();
  const struct CMUnitTest tests[] = {
      IT_TEST(test_free_waits_for_call_in_flight),
      IT_TEST(test_free_idle_client),
      IT_TEST(test_token_shared_by_12_calls),
  };
  return cmocka_run_group_tests_name("client_lifecycle", tests, it_group_setup,
                                     it_group_teardown);
}
