/*
 * air_async (include/airetry/async.h) against `airetry mock`, driven the
 * way its callers drive it: a plain poll(2) loop on air_async_fd with
 * air_async_timeout, then air_async_perform. A streamed call (its parts
 * arrive during perform), a call held whole, two calls at once on one
 * handle, a cancel from the loop and one from another thread, failover to
 * the next target, calls refused at once, and air_async_free with calls in
 * flight (each still gets its on_done; LeakSanitizer checks nothing is
 * left). No callback ever runs inside the call that started the work.
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
#include <poll.h>
#include <pthread.h>

#include "harness.h"

#define TIMEOUTS                                                              \
  "defaults:\n"                                                               \
  "  breaker: {enabled: false}\n"                                             \
  "  timeouts: {first_byte_ms: 5000, first_chunk_ms: 5000, chunk_ms: 5000,\n" \
  "             total_ms: 20000}\n"

/* Bound on any wait for the calls of a test (loaded CI, ASan). */
#define DRIVE_MS 15000u

/* Set while the test is inside an air_async_* call that must not run a
 * callback (air_async_chat, air_async_cancel, air_async_timeout). */
static bool outside_perform;

/* One call and everything its callbacks saw. */
typedef struct acall {
  air_async *a;
  air_async_call *h;
  bool stream;
  unsigned cancel_after; /* air_async_cancel from on_part after this many
                            text parts (0: never) */
  /* out */
  char text[IT_MAX_TEXT];
  size_t text_n;
  unsigned n_parts, n_text;
  bool part_size_ok; /* every part had size sizeof(air_part) */
  unsigned n_done, n_settled, n_failed, n_commit;
  unsigned parts_after_done;
  bool in_start; /* a callback ran inside a call that must not run one */
  int rc;
  air_chat_result *res;
  uint64_t t_first_part, t_done;
  int perform_in_cb; /* air_async_perform from inside on_done */
  atomic_uint texts; /* n_text, for another thread */
} acall;

static void free_result(void *p) {
  air_chat_result_free(p);
}

static void free_async(void *p) {
  air_async_free(p);
}

static int on_part(void *data, const air_part *p) {
  acall *c = data;
  if (outside_perform) c->in_start = true;
  if (c->n_done) c->parts_after_done++;
  if (p->size != sizeof(air_part)) c->part_size_ok = false;
  if (c->n_parts++ == 0) c->t_first_part = it_now_ms();
  if (p->kind == AIR_PART_TEXT) {
    c->n_text++;
    atomic_store(&c->texts, c->n_text);
    if (c->text_n + p->text_len < sizeof(c->text)) {
      memcpy(c->text + c->text_n, p->text, p->text_len);
      c->text_n += p->text_len;
      c->text[c->text_n] = '\0';
    }
    if (c->cancel_after && c->n_text == c->cancel_after) air_async_cancel(c->h);
  }
  return 0;
}

static void on_done(void *data, int rc, air_chat_result *res) {
  acall *c = data;
  if (outside_perform) c->in_start = true;
  c->n_done++;
  c->rc = rc;
  c->res = res;
  c->t_done = it_now_ms();
  it_track(res, free_result);
  /* The handle refuses to run itself from inside its own callback. */
  c->perform_in_cb = air_async_perform(c->a, NULL);
}

static void on_settled(void *data, int rc, const air_attempt *log, size_t n) {
  acall *c = data;
  (void)rc;
  (void)log;
  (void)n;
  c->n_settled++;
}

static void on_failed(void *data, const air_attempt *a) {
  acall *c = data;
  (void)a;
  c->n_failed++;
}

static void on_commit(void *data, const char *target, unsigned attempt) {
  acall *c = data;
  (void)target;
  (void)attempt;
  c->n_commit++;
}

static air_observers observers(acall *c) {
  air_observers o = AIR_OBSERVERS_INIT;
  o.data = c;
  o.on_settled = on_settled;
  o.on_failed = on_failed;
  o.on_commit = on_commit;
  return o;
}

static void body_for(air_dialect d, const char *model, char *buf, size_t cap) {
  if (d == AIR_DIALECT_ANTHROPIC)
    snprintf(buf, cap,
             "{\"model\":\"%s\",\"max_tokens\":256,\"messages\":"
             "[{\"role\":\"user\",\"content\":\"hello\"}]}",
             model);
  else
    snprintf(buf, cap,
             "{\"model\":\"%s\",\"messages\":"
             "[{\"role\":\"user\",\"content\":\"hello\"}]}",
             model);
}

/* Starts c on a as model in dialect d (obs may be NULL). Returns rc. */
static int start(air_async *a, acall *c, air_dialect d, const char *model,
                 const air_observers *obs, air_cancel *token) {
  char body[512];
  body_for(d, model, body, sizeof(body));
  c->a = a;
  c->part_size_ok = true;
  air_async_opts o = AIR_ASYNC_OPTS_INIT;
  o.on_part = c->stream ? on_part : NULL;
  o.on_done = on_done;
  o.data = c;
  o.observers = obs;
  o.cancel = token;
  outside_perform = true;
  int rc = air_async_chat(a, d, body, strlen(body), &o, &c->h, NULL);
  outside_perform = false;
  return rc;
}

/*
 * The caller's event loop: poll(2) on the handle's descriptor for as long
 * as its timeout says, then perform, until cond(data) holds (NULL: no call
 * is running) or DRIVE_MS passed. Returns 0 when it held, -1 otherwise.
 */
static int drive(air_async *a, bool (*cond)(void *data), void *data) {
  uint64_t until = it_now_ms() + DRIVE_MS;
  unsigned running = 1;
  for (;;) {
    if (air_async_perform(a, &running) != 0) return -1;
    if (cond != NULL ? cond(data) : running == 0) return 0;
    uint64_t now = it_now_ms();
    if (now >= until) return -1;
    outside_perform = true;
    int t = air_async_timeout(a);
    outside_perform = false;
    int left = (int)(until - now);
    struct pollfd p = {.fd = air_async_fd(a), .events = POLLIN};
    poll(&p, 1, t < 0 || t > left ? left : t);
  }
}

static bool has_text(void *data) {
  return ((acall *)data)->n_text > 0;
}

static void free_token(void *p) {
  air_cancel_free(p);
}

/*
 * One test's world: a config on the mock with TIMEOUTS and `routes`, n call
 * records, a cancel token when asked, and an async handle. The handle is
 * made last, so that a teardown after a failed assert frees it (whose calls
 * write to the records and watch the token) first.
 */
typedef struct fixture {
  it_client cl;
  acall *c;
  int n;
  air_cancel *token;
  air_async *a;
} fixture;

static void fx_open(fixture *fx, const char *routes, int n, bool token) {
  memset(fx, 0, sizeof(*fx));
  char tail[1024];
  snprintf(tail, sizeof(tail), "%sroutes:\n%s", TIMEOUTS, routes);
  assert_int_equal(it_client_new(it_suite(), tail, 1, &fx->cl), 0);
  fx->n = n;
  fx->c = calloc((size_t)n, sizeof(*fx->c));
  assert_non_null(fx->c);
  it_track(fx->c, free);
  if (token) {
    assert_int_equal(air_cancel_new(&fx->token), 0);
    it_track(fx->token, free_token);
  }
  air_error err;
  if (air_async_new(fx->cl.cfg, &fx->a, &err) != 0)
    fail_msg("air_async_new: %s", err.message);
  it_track(fx->a, free_async);
}

/* Frees the handle (unless the test did), the results, the rest. */
static void fx_close(fixture *fx) {
  if (fx->a != NULL) {
    it_untrack(fx->a);
    air_async_free(fx->a);
  }
  for (int i = 0; i < fx->n; i++) {
    it_untrack(fx->c[i].res);
    air_chat_result_free(fx->c[i].res);
  }
  if (fx->token != NULL) {
    it_untrack(fx->token);
    air_cancel_free(fx->token);
  }
  it_untrack(fx->c);
  free(fx->c);
  it_client_free(&fx->cl);
}

/* Callbacks ran only inside perform, on_done once and last. */
static void expect_clean(const acall *c) {
  assert_false(c->in_start);
  assert_int_equal(c->n_done, 1);
  assert_int_equal(c->parts_after_done, 0);
  assert_int_equal(c->perform_in_cb, AIR_ESTATE);
  assert_true(c->part_size_ok);
}

/* c answered model's canonical answer of `tokens` tokens. */
static void expect_answer(const acall *c, const char *model, unsigned tokens) {
  expect_clean(c);
  assert_int_equal(c->rc, 0);
  assert_non_null(c->res);
  assert_int_equal(c->res->status, 200);
  char want[256];
  it_answer(model, tokens, want, sizeof(want));
  assert_string_equal(c->res->text, want);
  if (c->stream) assert_string_equal(c->text, want);
}

/* A streamed call: its parts arrive during perform, before on_done; the
 * text is the mock's answer; the observers fire; running ends at 0. */
static void test_streamed(void **state) {
  (void)state;
  fixture fx;
  fx_open(&fx, "  - {name: r, targets: [mo/s@tokens=6]}\n", 1, false);
  acall *c = fx.c;
  c->stream = true;
  air_observers obs = observers(c);
  assert_int_equal(start(fx.a, c, AIR_DIALECT_OPENAI, "r", &obs, NULL), 0);
  assert_int_equal(c->n_parts + c->n_done, 0); /* nothing ran yet */
  assert_int_equal(drive(fx.a, NULL, NULL), 0);
  expect_answer(c, "s@tokens=6", 6);
  assert_true(c->n_parts > c->n_text); /* start, finish, usage too */
  assert_true(c->t_first_part <= c->t_done);
  assert_int_equal(c->n_commit, 1);
  assert_int_equal(c->n_settled, 1);
  fx_close(&fx);
}

/* A call held whole (no on_part), in the Anthropic dialect. */
static void test_whole(void **state) {
  (void)state;
  fixture fx;
  fx_open(&fx, "  - {name: r, targets: [ma/w@tokens=4]}\n", 1, false);
  acall *c = fx.c;
  assert_int_equal(start(fx.a, c, AIR_DIALECT_ANTHROPIC, "r", NULL, NULL), 0);
  assert_int_equal(drive(fx.a, NULL, NULL), 0);
  expect_answer(c, "w@tokens=4", 4);
  assert_int_equal(c->n_parts, 0);
  assert_non_null(strstr(c->res->body, "\"type\":\"message\""));
  fx_close(&fx);
}

/* Two calls at once on one handle: each one's first part comes before the
 * other's end (they overlap), both answer whole. */
static void test_two_concurrent(void **state) {
  (void)state;
  fixture fx;
  fx_open(&fx,
          "  - {name: x, targets: [mo/x@delay=60@tokens=5]}\n"
          "  - {name: y, targets: [ma/y@delay=60@tokens=5]}\n",
          2, false);
  acall *c = fx.c;
  c[0].stream = c[1].stream = true;
  assert_int_equal(start(fx.a, &c[0], AIR_DIALECT_OPENAI, "x", NULL, NULL), 0);
  assert_int_equal(start(fx.a, &c[1], AIR_DIALECT_ANTHROPIC, "y", NULL, NULL),
                   0);
  assert_int_equal(drive(fx.a, NULL, NULL), 0);
  expect_answer(&c[0], "x@delay=60@tokens=5", 5);
  expect_answer(&c[1], "y@delay=60@tokens=5", 5);
  assert_true(c[0].t_first_part < c[1].t_done);
  assert_true(c[1].t_first_part < c[0].t_done);
  fx_close(&fx);
}

/* Failover: the first target answers 503 (overloaded), the rule switches,
 * the second answers; on_failed saw the first. */
static void test_failover(void **state) {
  (void)state;
  fixture fx;
  fx_open(&fx,
          "  - name: r\n"
          "    targets: [mo/a@503, mo/b@tokens=3]\n"
          "    rules: [{on: [overloaded], action: switch}]\n",
          1, false);
  acall *c = fx.c;
  c->stream = true;
  air_observers obs = observers(c);
  assert_int_equal(start(fx.a, c, AIR_DIALECT_OPENAI, "r", &obs, NULL), 0);
  assert_int_equal(drive(fx.a, NULL, NULL), 0);
  expect_answer(c, "b@tokens=3", 3);
  assert_string_equal(c->res->target, "mo/b@tokens=3");
  assert_int_equal(c->res->n_log, 2);
  assert_int_equal(c->res->log[0].reason, AIR_REASON_OVERLOADED);
  assert_int_equal(c->res->log[0].status, 503);
  assert_int_equal(c->n_failed, 1);
  it_log log;
  assert_int_equal(it_mock_log_exactly(it_suite(), 2, 5000, &log), 0);
  const char *models[] = {"a@503", "b@tokens=3"};
  assert_true(it_log_models(&log, 2, models));
  fx_close(&fx);
}

/* c ended as a cancel: on_done with AIR_ECANCELED, nothing after it. */
static void expect_cancelled(const acall *c) {
  expect_clean(c);
  assert_int_equal(c->rc, AIR_ECANCELED);
  assert_non_null(c->res);
  assert_int_equal(c->res->reason, AIR_REASON_ABORTED);
  assert_int_equal(c->res->status, 499);
  assert_string_equal(c->res->text, "");
}

/* The mock saw exactly n attempts, each one's connection closed by the
 * client (no fallback followed a cancel). */
static void expect_hung_up(size_t n) {
  it_log log;
  assert_int_equal(it_mock_log_exactly(it_suite(), n, 5000, &log), 0);
  for (size_t i = 0; i < log.n; i++) assert_true(log.e[i].hung_up);
}

#define SLOW_ROUTE "  - {name: r, targets: [mo/m@delay=100@tokens=100, mo/f]}\n"

/* air_async_cancel from the loop once the first text part came, and from
 * inside on_part: each call ends as a cancel in a later perform. */
static void test_cancel(void **state) {
  (void)state;
  fixture fx;
  fx_open(&fx, SLOW_ROUTE, 2, false);
  acall *c = fx.c;
  c[0].stream = c[1].stream = true;
  c[1].cancel_after = 2; /* cancels itself from inside on_part */
  assert_int_equal(start(fx.a, &c[0], AIR_DIALECT_OPENAI, "r", NULL, NULL), 0);
  assert_int_equal(start(fx.a, &c[1], AIR_DIALECT_OPENAI, "r", NULL, NULL), 0);
  assert_int_equal(drive(fx.a, has_text, &c[0]), 0);
  assert_int_equal(c[0].n_done, 0);
  outside_perform = true;
  air_async_cancel(c[0].h);
  outside_perform = false;
  assert_int_equal(c[0].n_done, 0); /* nothing ran inside the cancel */
  assert_int_equal(drive(fx.a, NULL, NULL), 0);
  expect_cancelled(&c[0]);
  expect_cancelled(&c[1]);
  /* Carried out in a later perform: the parts of the read that held the
   * second may follow it, never the whole answer. */
  assert_true(c[1].n_text >= 2 && c[1].n_text < 100);
  expect_hung_up(2);
  fx_close(&fx);
}

/* A cancel token triggered from another thread wakes the descriptor: the
 * call ends in the next perform. */
typedef struct trigger {
  pthread_t th;
  air_cancel *token;
  acall *c;
  bool missed;
} trigger;

static bool texts_came(void *p) {
  trigger *t = p;
  return atomic_load(&t->c->texts) > 0;
}

static void *trigger_main(void *p) {
  trigger *t = p;
  t->missed = it_wait_for(texts_came, t, DRIVE_MS) != 0;
  air_cancel_trigger(t->token);
  return NULL;
}

static void test_cancel_token_from_another_thread(void **state) {
  (void)state;
  fixture fx;
  fx_open(&fx, SLOW_ROUTE, 1, true);
  acall *c = fx.c;
  c->stream = true;
  atomic_init(&c->texts, 0);
  assert_int_equal(start(fx.a, c, AIR_DIALECT_OPENAI, "r", NULL, fx.token), 0);
  trigger t = {.token = fx.token, .c = c};
  assert_int_equal(pthread_create(&t.th, NULL, trigger_main, &t), 0);
  int rc = drive(fx.a, NULL, NULL);
  pthread_join(t.th, NULL);
  assert_false(t.missed);
  assert_int_equal(rc, 0);
  expect_cancelled(c);
  expect_hung_up(1);
  fx_close(&fx);
}

/* Refused at once: no callback, *out untouched, nothing reaches the mock. */
static void test_refused_at_once(void **state) {
  (void)state;
  fixture fx;
  fx_open(&fx, "  - {name: r, targets: [mo/f]}\n", 1, false);
  acall *c = fx.c;
  air_async_call *sentinel = (air_async_call *)c;
  c->h = sentinel;
  assert_int_equal(start(fx.a, c, AIR_DIALECT_OPENAI, "nope", NULL, NULL),
                   AIR_ENOTFOUND);
  assert_ptr_equal(c->h, sentinel);
  air_error err;
  air_async_call *h = sentinel;
  int rc = air_async_chat(fx.a, AIR_DIALECT_OPENAI, "{", 1, NULL, &h, &err);
  assert_int_equal(rc, err.code);
  assert_true(rc == AIR_EPARSE || rc == AIR_EINVAL);
  assert_ptr_equal(h, sentinel);
  air_async_opts o = AIR_ASYNC_OPTS_INIT;
  o.size = sizeof(size_t);
  const char body[] =
      "{\"model\":\"r\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}";
  assert_int_equal(air_async_chat(fx.a, AIR_DIALECT_OPENAI, body, strlen(body),
                                  &o, &h, &err),
                   AIR_EINVAL);
  assert_non_null(strstr(err.message, "air_async_opts"));
  assert_int_equal(
      air_async_chat(fx.a, (air_dialect)77, body, strlen(body), NULL, &h, NULL),
      AIR_EINVAL);
  assert_ptr_equal(h, sentinel);
  /* Nothing in flight: perform reports 0 running, the timeout is -1. */
  unsigned running = 99;
  assert_int_equal(air_async_perform(fx.a, &running), 0);
  assert_int_equal(running, 0);
  assert_int_equal(air_async_timeout(fx.a), -1);
  assert_int_equal(c->n_done, 0);
  /* opts NULL: held whole, the result freed by the handle. */
  assert_int_equal(air_async_chat(fx.a, AIR_DIALECT_OPENAI, body, strlen(body),
                                  NULL, NULL, NULL),
                   0);
  assert_int_equal(drive(fx.a, NULL, NULL), 0);
  it_log log;
  assert_int_equal(it_mock_log_exactly(it_suite(), 1, 5000, &log), 0);
  fx_close(&fx);
}

static bool both_open(void *data) {
  (void)data;
  return it_mock_open(it_suite(), NULL) >= 2;
}

/* air_async_free with two calls in flight at the mock and one not started
 * yet: each gets on_done (AIR_ECANCELED) and on_settled exactly once inside
 * free, the mock sees the connections close, nothing leaks. */
static void test_free_with_calls_in_flight(void **state) {
  (void)state;
  fixture fx;
  fx_open(&fx,
          "  - {name: s, targets: [mo/s@delay=100@tokens=100]}\n"
          "  - {name: h, targets: [ma/h@hang]}\n",
          3, false);
  acall *c = fx.c;
  c[0].stream = true;
  air_observers obs[3] = {observers(&c[0]), observers(&c[1]), observers(&c[2])};
  assert_int_equal(start(fx.a, &c[0], AIR_DIALECT_OPENAI, "s", &obs[0], NULL),
                   0);
  assert_int_equal(
      start(fx.a, &c[1], AIR_DIALECT_ANTHROPIC, "h", &obs[1], NULL), 0);
  assert_int_equal(drive(fx.a, both_open, NULL), 0);
  assert_int_equal(start(fx.a, &c[2], AIR_DIALECT_OPENAI, "s", &obs[2], NULL),
                   0);
  it_untrack(fx.a);
  air_async_free(fx.a);
  fx.a = NULL;
  for (int i = 0; i < 3; i++) {
    assert_int_equal(c[i].n_done, 1);
    assert_int_equal(c[i].n_settled, 1);
    assert_int_equal(c[i].rc, AIR_ECANCELED);
    assert_int_equal(c[i].res->status, 499);
    /* perform from inside an on_done that free runs: refused too. */
    assert_int_equal(c[i].perform_in_cb, AIR_ESTATE);
  }
  expect_hung_up(2);
  fx_close(&fx);
}

/* IT_CASE=glob runs only the matching tests. */
int main(void) {
  if (getenv("IT_CASE") != NULL) cmocka_set_test_filter(getenv("IT_CASE"));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_streamed, it_reset_mock, it_release),
      cmocka_unit_test_setup_teardown(test_whole, it_reset_mock, it_release),
      cmocka_unit_test_setup_teardown(test_two_concurrent, it_reset_mock,
                                      it_release),
      cmocka_unit_test_setup_teardown(test_failover, it_reset_mock, it_release),
      cmocka_unit_test_setup_teardown(test_cancel, it_reset_mock, it_release),
      cmocka_unit_test_setup_teardown(test_cancel_token_from_another_thread,
                                      it_reset_mock, it_release),
      cmocka_unit_test_setup_teardown(test_refused_at_once, it_reset_mock,
                                      it_release),
      cmocka_unit_test_setup_teardown(test_free_with_calls_in_flight,
                                      it_reset_mock, it_release),
  };
  return cmocka_run_group_tests_name("client_async", tests, it_group_setup,
                                     it_group_teardown);
}
