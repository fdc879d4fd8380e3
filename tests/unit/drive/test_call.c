/*
 * The generic driver air_call: observers, options, cancellation, deadlines,
 * and concurrent calls on one shared state.
 */
#include "helpers.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define CFG                                                                \
  "providers:\n"                                                           \
  "  - {name: p, api: openai, base_url: http://127.0.0.1:1/v1}\n"          \
  "routes:\n"                                                              \
  "  - name: r\n"                                                          \
  "    targets: [p/a, p/b, p/c]\n"                                         \
  "    timeouts: {attempt_ms: 2000, total_ms: 60000}\n"                    \
  "    rules:\n"                                                           \
  "      - {on: [overloaded], action: retry, max: 2,\n"                    \
  "         backoff: {base_ms: 10000, factor: 1, max_ms: 10000, jitter: "  \
  "none}}\n"                                                               \
  "      - {on: [overloaded, server_error, timeout.first_chunk], action: " \
  "switch}\n"

/* A scripted attempt function: per attempt, a reason to fail with (NONE = ok).
 */
typedef struct script {
  const air_reason *plan;
  size_t n_plan;
  unsigned calls;
  test_clock *clock;
  uint64_t advance_ms;  /* how far an attempt moves the fake clock */
  bool run_to_deadline; /* attempts burn their whole deadline */
  air_cancel *expect_cancel;
  char targets[16][32];
  void *options_seen[16];
  uint64_t deadlines[16];
  uint64_t timeouts[16];
  unsigned errors;
  unsigned retries;
  unsigned settled;
  int settled_rc;
  size_t settled_n;
  air_reason settled_last;
  unsigned commits;
  char commit_target[32];
  unsigned commit_attempt;
  air_observers obs; /* make_opts points the options here */
} script;

static int scripted(void *data, const air_attempt_info *info, air_failure *f) {
  script *s = data;
  unsigned i = s->calls++;
  assert_true(i < 16);
  assert_int_equal(info->attempt, i + 1);
  assert_ptr_equal(info->cancel, s->expect_cancel);
  snprintf(s->targets[i], sizeof(s->targets[i]), "%s", info->target);
  s->options_seen[i] = info->options;
  s->deadlines[i] = info->deadline_ms;
  s->timeouts[i] = info->timeout_ms;
  if (s->clock) {
    if (s->run_to_deadline)
      s->clock->now = info->deadline_ms;
    else
      s->clock->now += s->advance_ms;
  }
  air_reason r = i < s->n_plan ? s->plan[i] : AIR_REASON_NONE;
  if (r == AIR_REASON_NONE) return 0;
  f->reason = r;
  f->status = r == AIR_REASON_OVERLOADED ? 503 : 0;
  f->message = "scripted failure";
  return 1;
}

static void on_failed(void *data, const air_attempt *a) {
  script *s = data;
  assert_int_not_equal(a->reason, AIR_REASON_NONE);
  /* Atomic: a canceller thread waits on it. */
  __atomic_fetch_add(&s->errors, 1u, __ATOMIC_SEQ_CST);
}

static void on_retry(void *data, const air_attempt_info *next, void **options) {
  script *s = data;
  assert_true(next->attempt > 1);
  s->retries++;
  *options = (void *)(uintptr_t)(0x1000 + next->attempt);
}

static void on_settled(void *data, int rc, const air_attempt *log, size_t n) {
  script *s = data;
  s->settled++;
  s->settled_rc = rc;
  s->settled_n = n;
  s->settled_last = n ? log[n - 1].reason : AIR_REASON_NONE;
}

static void on_commit(void *data, const char *target, unsigned attempt) {
  script *s = data;
  s->commits++;
  snprintf(s->commit_target, sizeof(s->commit_target), "%s", target);
  s->commit_attempt = attempt;
}

static air_call_opts make_opts(script *s, const air_clock *clk) {
  air_observers obs = AIR_OBSERVERS_INIT;
  obs.data = s;
  obs.on_failed = on_failed;
  obs.on_retry = on_retry;
  obs.on_commit = on_commit;
  obs.on_settled = on_settled;
  s->obs = obs;
  air_call_opts o = AIR_CALL_OPTS_INIT;
  o.fn = scripted;
  o.data = s;
  o.observers = &s->obs;
  o.options = (void *)(uintptr_t)0x1;
  o.clock = clk;
  return o;
}

static void test_observers_and_options(void **st) {
  (void)st;
  air_config *cfg = test_config(CFG);
  test_clock tc = {.now = 5000, .wall = 1700000000000ull};
  air_clock clk = test_clock_iface(&tc);
  const air_reason plan[] = {AIR_REASON_OVERLOADED, AIR_REASON_SERVER_ERROR,
                             AIR_REASON_NONE};
  script s = {.plan = plan, .n_plan = 3, .clock = &tc, .advance_ms = 100};
  air_call_opts o = make_opts(&s, &clk);
  air_attempt *log = NULL;
  size_t n = 0;
  assert_int_equal(air_call(cfg, NULL, "r", &o, &log, &n, NULL), 0);
  assert_int_equal(s.calls, 3);
  /* The attempt that answered is the one that committed, once. */
  assert_int_equal(s.commits, 1);
  assert_string_equal(s.commit_target, "p/b");
  assert_int_equal(s.commit_attempt, 3);
  assert_string_equal(s.targets[0], "p/a");
  assert_string_equal(s.targets[1], "p/a");
  assert_string_equal(s.targets[2], "p/b");
  /* Options: the initial ones, then what on_retry set. */
  assert_ptr_equal(s.options_seen[0], (void *)(uintptr_t)0x1);
  assert_ptr_equal(s.options_seen[1], (void *)(uintptr_t)0x1002);
  assert_ptr_equal(s.options_seen[2], (void *)(uintptr_t)0x1003);
  assert_int_equal(s.errors, 2);
  assert_int_equal(s.retries, 2);
  assert_int_equal(s.settled, 1);
  assert_int_equal(s.settled_rc, 0);
  assert_int_equal(s.settled_n, 3);
  /* One 10 s backoff on the fake clock. */
  assert_int_equal(tc.slept, 10000);
  assert_int_equal(tc.sleeps, 1);
  /* The attempt deadline is start + attempt_ms. */
  assert_int_equal(s.deadlines[0], 5000 + 2000);
  assert_int_equal(s.timeouts[0], 2000);
  /* The returned log is a deep copy that outlives the call. */
  assert_int_equal(n, 3);
  assert_string_equal(log[0].target, "p/a");
  assert_int_equal(log[0].reason, AIR_REASON_OVERLOADED);
  assert_int_equal(log[0].status, 503);
  assert_int_equal(log[0].wait_ms, 10000);
  assert_string_equal(log[0].message, "p/a: scripted failure (overloaded)");
  assert_int_equal(log[1].reason, AIR_REASON_SERVER_ERROR);
  assert_string_equal(log[2].target, "p/b");
  assert_int_equal(log[2].reason, AIR_REASON_NONE);
  assert_int_equal(log[2].ms, 100);
  air_attempt_log_free(log, n);
  air_config_free(cfg);
}

static void test_final_failure_returns_log(void **st) {
  (void)st;
  air_config *cfg = test_config(CFG);
  test_clock tc = {.now = 1};
  air_clock clk = test_clock_iface(&tc);
  const air_reason plan[] = {AIR_REASON_SERVER_ERROR, AIR_REASON_SERVER_ERROR,
                             AIR_REASON_BAD_REQUEST};
  script s = {.plan = plan, .n_plan = 3, .clock = &tc};
  air_call_opts o = make_opts(&s, &clk);
  air_attempt *log = NULL;
  size_t n = 0;
  air_error err;
  assert_int_equal(air_call(cfg, NULL, "r", &o, &log, &n, &err), AIR_EUPSTREAM);
  assert_int_equal(err.code, AIR_EUPSTREAM);
  assert_non_null(strstr(err.message, "bad_request"));
  assert_int_equal(s.commits, 0);
  assert_int_equal(n, 3);
  assert_int_equal(log[2].reason, AIR_REASON_BAD_REQUEST);
  assert_string_equal(log[2].target, "p/c");
  assert_int_equal(s.settled, 1);
  assert_int_equal(s.settled_rc, AIR_EUPSTREAM);
  assert_int_equal(s.settled_last, AIR_REASON_BAD_REQUEST);
  air_attempt_log_free(log, n);
  air_config_free(cfg);
}

static void test_deadline_is_a_timeout_not_a_cancel(void **st) {
  (void)st;
  air_config *cfg = test_config(CFG);
  test_clock tc = {.now = 100};
  air_clock clk = test_clock_iface(&tc);
  air_cancel *c = NULL;
  assert_int_equal(air_cancel_new(&c), 0);
  const air_reason plan[] = {AIR_REASON_TIMEOUT_FIRST_CHUNK};
  script s = {.plan = plan,
              .n_plan = 1,
              .clock = &tc,
              .run_to_deadline = true,
              .expect_cancel = c};
  air_call_opts o = make_opts(&s, &clk);
  o.cancel = c;
  assert_int_equal(air_call(cfg, NULL, "r", &o, NULL, NULL, NULL), 0);
  /* The first attempt used its whole deadline, then the policy switched. */
  assert_int_equal(s.calls, 2);
  assert_string_equal(s.targets[1], "p/b");
  assert_int_equal(s.deadlines[1], 100 + 2000 + 2000);
  assert_false(air_cancel_is_set(c));
  air_cancel_free(c);
  air_config_free(cfg);
}

static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Triggers c once the script saw `errors` failed attempts (on_failed ran:
 * the driver is about to wait), polling every 1 ms for at most 10 s. */
typedef struct canceller {
  air_cancel *c;
  script *s;
  unsigned errors;
  bool missed; /* the failure never came */
} canceller;

static void *cancel_on_error(void *arg) {
  canceller *k = arg;
  uint64_t until = mono_ms() + 10000;
  while (__atomic_load_n(&k->s->errors, __ATOMIC_SEQ_CST) < k->errors) {
    if (mono_ms() >= until) {
      k->missed = true;
      break;
    }
    struct timespec ts = {0, 1000000L};
    nanosleep(&ts, NULL);
  }
  air_cancel_trigger(k->c);
  return NULL;
}

static void test_cancel_during_wait_ends_it_at_once(void **st) {
  (void)st;
  air_config *cfg = test_config(CFG);
  air_cancel *c = NULL;
  assert_int_equal(air_cancel_new(&c), 0);
  const air_reason plan[] = {AIR_REASON_OVERLOADED, AIR_REASON_NONE};
  script s = {.plan = plan, .n_plan = 2, .expect_cancel = c};
  air_call_opts o = make_opts(&s, NULL); /* the real clock: a 10 s backoff */
  o.cancel = c;
  canceller k = {.c = c, .s = &s, .errors = 1};
  pthread_t th;
  uint64_t t0 = mono_ms();
  assert_int_equal(pthread_create(&th, NULL, cancel_on_error, &k), 0);
  air_attempt *log = NULL;
  size_t n = 0;
  int rc = air_call(cfg, NULL, "r", &o, &log, &n, NULL);
  uint64_t took = mono_ms() - t0;
  pthread_join(th, NULL);
  assert_false(k.missed);
  assert_int_equal(rc, AIR_ECANCELED);
  assert_true(took < 2000);     /* not the 10 s backoff */
  assert_int_equal(s.calls, 1); /* no further attempt */
  assert_int_equal(n, 1);
  assert_int_equal(s.settled, 1);
  assert_int_equal(s.settled_rc, AIR_ECANCELED);
  air_attempt_log_free(log, n);

  /* An already-cancelled token: no attempt at all, settled once. */
  memset(&s, 0, sizeof(s));
  s.expect_cancel = c;
  o = make_opts(&s, NULL);
  o.cancel = c;
  assert_int_equal(air_call(cfg, NULL, "r", &o, &log, &n, NULL), AIR_ECANCELED);
  assert_int_equal(s.calls, 0);
  assert_int_equal(s.settled, 1);
  assert_int_equal(n, 0);
  air_attempt_log_free(log, n);
  air_cancel_free(c);
  air_config_free(cfg);
}

static void test_unknown_model_fires_nothing(void **st) {
  (void)st;
  air_config *cfg = test_config(CFG);
  script s = {0};
  air_call_opts o = make_opts(&s, NULL);
  air_error err;
  assert_int_equal(air_call(cfg, NULL, "nope", &o, NULL, NULL, &err),
                   AIR_ENOTFOUND);
  assert_int_equal(err.code, AIR_ENOTFOUND);
  assert_non_null(strstr(err.message, "'nope'"));
  assert_int_equal(s.settled, 0);
  assert_int_equal(s.calls, 0);
  o.fn = NULL;
  assert_int_equal(air_call(cfg, NULL, "r", &o, NULL, NULL, &err), AIR_EINVAL);
  assert_int_equal(err.code, AIR_EINVAL);
  assert_int_equal(s.settled, 0);
  air_config_free(cfg);
}

/* ---- concurrency --------------------------------------------------------- */

#define CALLS_PER_THREAD 10000

typedef struct worker {
  const air_config *cfg;
  air_state *st;
  unsigned seed;
  unsigned fn_calls;
  unsigned logged;
  unsigned ok;
  unsigned bad; /* a call whose targets repeated or disagreed with its log */
  unsigned per_target[3];
} worker;

typedef struct one_call {
  worker *w;
  unsigned n;
  char seen[8][8];
} one_call;

/* p/a always fails, p/b fails one call in three, p/c always answers. */
static int flaky(void *data, const air_attempt_info *info, air_failure *f) {
  one_call *oc = data;
  oc->w->fn_calls++;
  if (oc->n < 8) snprintf(oc->seen[oc->n], 8, "%s", info->target);
  oc->n++;
  oc->w->per_target[info->target[2] - 'a']++;
  bool fail = info->target[2] == 'a' ||
              (info->target[2] == 'b' && rand_r(&oc->w->seed) % 3 == 0);
  if (!fail) return 0;
  f->reason = AIR_REASON_SERVER_ERROR;
  f->status = 500;
  return 1;
}

static void *work(void *arg) {
  worker *w = arg;
  for (int i = 0; i < CALLS_PER_THREAD; i++) {
    one_call oc = {.w = w};
    air_call_opts o = AIR_CALL_OPTS_INIT;
    o.fn = flaky;
    o.data = &oc;
    air_attempt *log = NULL;
    size_t n = 0;
    int rc = air_call(w->cfg, w->st, "r", &o, &log, &n, NULL);
    if (rc == 0) w->ok++;
    w->logged += (unsigned)n;
    if (n != oc.n) w->bad++;
    for (size_t j = 0; j < n && j < 8; j++) {
      if (strcmp(log[j].target, oc.seen[j]) != 0) w->bad++;
      for (size_t k = 0; k < j; k++)
        if (strcmp(log[j].target, log[k].target) == 0) w->bad++;
    }
    air_attempt_log_free(log, n);
  }
  return NULL;
}

static void test_concurrent_calls_share_state_consistently(void **st) {
  (void)st;
  air_config *cfg = test_config(
      "providers:\n"
      "  - {name: p, api: openai, base_url: http://127.0.0.1:1/v1,\n"
      "     breaker: {failures: 3, open_ms: 5}}\n"
      "routes:\n"
      "  - name: r\n"
      "    targets: [p/a, p/b, p/c]\n"
      "    rules: [{on: [server_error], action: switch}]\n");
  air_state *state = NULL;
  assert_int_equal(air_state_new(cfg, &state, NULL), 0);
  worker w[2] = {{cfg, state, 1, 0, 0, 0, 0, {0}},
                 {cfg, state, 2, 0, 0, 0, 0, {0}}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 2; i++) {
    /* p/c always answers, so every call succeeds. */
    assert_int_equal(w[i].ok, CALLS_PER_THREAD);
    assert_int_equal(w[i].bad, 0);
    /* Every attempt the function saw is in some log, and no more. */
    assert_int_equal(w[i].fn_calls, w[i].logged);
    assert_int_equal(
        w[i].per_target[0] + w[i].per_target[1] + w[i].per_target[2],
        w[i].fn_calls);
    assert_true(w[i].fn_calls >= CALLS_PER_THREAD);
    assert_true(w[i].fn_calls <= 3 * CALLS_PER_THREAD);
  }
  /* p/a never answers; its breaker must have kept most calls off it. */
  assert_true(w[0].per_target[0] + w[1].per_target[0] < 2 * CALLS_PER_THREAD);
  air_state_free(state);
  air_config_free(cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_observers_and_options),
      cmocka_unit_test(test_final_failure_returns_log),
      cmocka_unit_test(test_deadline_is_a_timeout_not_a_cancel),
      cmocka_unit_test(test_cancel_during_wait_ends_it_at_once),
      cmocka_unit_test(test_unknown_model_fires_nothing),
      cmocka_unit_test(test_concurrent_calls_share_state_consistently),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
