/*
 * Every deadline of docs/design.md §2.3 against `airetry mock` (and, for
 * timeout.connect, a listener whose accept queue is full): the reason, when
 * it fired (the client's attempt log and the mock's clock), and what the
 * policy did next. Also what the request deadlines must not do: cut a
 * streaming answer after commit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

/* Upper slack on a measured deadline (loaded 2-core CI, ASan). */
#define SLACK_MS 400
/* Lower slack of the client's own measurements (ms granularity). */
#define EARLY_MS 15
/* Lower slack on the mock's clock: a deadline counts from the attempt's
 * start, the mock's t_ms from the request's arrival, after the connect and
 * the request were written (slow under ASan). */
#define EARLY_MOCK_MS 60

/* A client with one route "r" of `targets` and these timeouts. */
static void client_for(it_client *cl, const char *targets, const char *timeouts,
                       const char *extra) {
  char tail[2048];
  snprintf(tail, sizeof(tail),
           "defaults:\n"
           "  breaker: {enabled: false}\n"
           "routes:\n"
           "  - name: r\n"
           "    targets: %s\n"
           "    timeouts: %s\n"
           "%s",
           targets, timeouts, extra ? extra : "");
  assert_int_equal(it_client_new(it_suite(), tail, 1, cl), 0);
}

static void call(it_client *cl, it_call *c, bool stream) {
  memset(c, 0, sizeof(*c));
  c->dialect = AIR_DIALECT_OPENAI;
  c->model = "r";
  c->stream = stream;
  it_chat(cl->client, c);
}

static void expect_ms(const char *what, int64_t got, int64_t want) {
  if (got < want - EARLY_MS || got > want + SLACK_MS) {
    fprintf(stderr, "%s: %lld ms, expected %lld (-%d/+%d)\n", what,
            (long long)got, (long long)want, EARLY_MS, SLACK_MS);
    fail();
  }
}

/* The same on the mock's clock. */
static void expect_mock_ms(const char *what, int64_t got, int64_t want) {
  if (got < want - EARLY_MOCK_MS || got > want + SLACK_MS) {
    fprintf(stderr,
            "%s: %lld ms on the mock's clock, expected %lld (-%d/+%d)\n", what,
            (long long)got, (long long)want, EARLY_MOCK_MS, SLACK_MS);
    fail();
  }
}

static void expect_text(const it_call *c, const char *model, unsigned tokens) {
  char want[512];
  it_answer(model, tokens, want, sizeof(want));
  if (c->rc != 0) it_call_print(c);
  assert_int_equal(c->rc, 0);
  assert_string_equal(c->stream ? c->text : c->res->text, want);
}

/* ---- timeout.connect
 * -------------------------------------------------------------- */

/*
 * A listener on 127.0.0.1 whose accept queue is full: further connects get
 * no SYN-ACK (Linux drops the SYN) and hang. Returns the port, or 0 when the
 * kernel completes connects anyway. fds receives every socket to close.
 */
#define FILLERS 4
static int full_listener(int fds[FILLERS + 1]) {
  for (int i = 0; i <= FILLERS; i++) fds[i] = -1;
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  if (ls < 0) return 0;
  fds[0] = ls;
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(ls, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(ls, 0) != 0 ||
      getsockname(ls, (struct sockaddr *)&a, &len) != 0)
    return 0;
  for (int i = 1; i <= FILLERS; i++) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return 0;
    fds[i] = s;
    fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK);
    connect(s, (struct sockaddr *)&a, sizeof(a));
  }
  /* Wait until each filler's handshake is done (or refused), not a fixed
   * time: a filler still in progress would make the probe's verdict early. */
  for (int i = 1; i <= FILLERS; i++) {
    struct pollfd pf = {fds[i], POLLOUT, 0};
    (void)poll(&pf, 1, 1000);
  }
  /* Probe: a connect that completes within 300 ms means no cooperation. */
  int p = socket(AF_INET, SOCK_STREAM, 0);
  if (p < 0) return 0;
  fcntl(p, F_SETFL, fcntl(p, F_GETFL) | O_NONBLOCK);
  int rc = connect(p, (struct sockaddr *)&a, sizeof(a));
  bool hangs = false;
  if (rc != 0 && errno == EINPROGRESS) {
    struct pollfd pf = {p, POLLOUT, 0};
    hangs = poll(&pf, 1, 300) == 0;
  }
  close(p);
  return hangs ? ntohs(a.sin_port) : 0;
}

static void test_connect_timeout(void **state) {
  (void)state;
  int fds[FILLERS + 1];
  int port = full_listener(fds);
  if (port == 0) {
    for (int i = 0; i <= FILLERS; i++)
      if (fds[i] >= 0) close(fds[i]);
    fprintf(stderr,
            "the kernel completes connects to a full accept queue: "
            "timeout.connect not testable here\n");
    skip();
  }
  for (int with_fallback = 0; with_fallback < 2; with_fallback++) {
    assert_int_equal(it_mock_reset(it_suite()), 0);
    char yaml[2048];
    snprintf(
        yaml, sizeof(yaml),
        "providers:\n"
        "  - {name: mc, api: openai, base_url: \"http://127.0.0.1:%d/v1\"}\n"
        "  - {name: mo, api: openai, base_url: \"http://127.0.0.1:%d/v1\"}\n"
        "defaults:\n"
        "  breaker: {enabled: false}\n"
        "routes:\n"
        "  - name: r\n"
        "    targets: [mc/x%s]\n"
        "    timeouts: {connect_ms: 200, first_byte_ms: 3000,\n"
        "               first_chunk_ms: 3000, total_ms: 6000}\n",
        port, it_suite()->port, with_fallback ? ", mo/f" : "");
    it_client cl;
    assert_int_equal(it_client_new_text(yaml, 1, &cl), 0);
    it_call c;
    call(&cl, &c, true);
    if (c.res == NULL || c.res->n_log < 1) it_call_print(&c);
    assert_true(c.res->n_log >= 1);
    assert_string_equal(c.res->log[0].target, "mc/x");
    if (c.res->log[0].reason != AIR_REASON_TIMEOUT_CONNECT) it_call_print(&c);
    assert_int_equal(c.res->log[0].reason, AIR_REASON_TIMEOUT_CONNECT);
    expect_ms("connect attempt", (int64_t)c.res->log[0].ms, 200);
    it_log log;
    if (with_fallback) {
      expect_text(&c, "f", 8);
      assert_int_equal(c.res->n_log, 2);
      assert_int_equal(it_mock_log_settled(it_suite(), 1, 3000, &log), 0);
      const char *models[] = {"f"};
      assert_true(it_log_models(&log, 1, models));
    } else {
      assert_int_equal(c.rc, AIR_EUPSTREAM);
      assert_int_equal(c.res->reason, AIR_REASON_TIMEOUT_CONNECT);
      assert_int_equal(c.res->status, 504);
      assert_int_equal(c.res->n_log, 1);
      expect_ms("request", (int64_t)(c.t_end - c.t_start), 200);
      assert_int_equal(it_mock_log(it_suite(), &log), 0);
      assert_int_equal(log.n, 0);
    }
    it_call_cleanup(&c);
    it_client_free(&cl);
  }
  for (int i = 0; i <= FILLERS; i++) close(fds[i]);
}

/* ---- timeout.first_byte
 * ------------------------------------------------------------ */

static void test_first_byte_timeout(void **state) {
  (void)state;
  static const char *const faults[] = {"fb@hang", "fb@silent=3000"};
  for (int i = 0; i < 2; i++) {
    for (int stream = 0; stream < 2; stream++) {
      assert_int_equal(it_mock_reset(it_suite()), 0);
      it_client cl;
      char targets[128];
      snprintf(targets, sizeof(targets), "[mo/%s, ma/f]", faults[i]);
      client_for(&cl, targets,
                 "{first_byte_ms: 450, first_chunk_ms: 3000, chunk_ms: 3000}",
                 NULL);
      it_call c;
      call(&cl, &c, stream);
      expect_text(&c, "f", 8);
      assert_int_equal(c.res->n_log, 2);
      assert_int_equal(c.res->log[0].reason, AIR_REASON_TIMEOUT_FIRST_BYTE);
      expect_ms("first_byte attempt", (int64_t)c.res->log[0].ms, 450);
      it_log log;
      assert_int_equal(it_mock_log_settled(it_suite(), 2, 3000, &log), 0);
      const char *models[] = {faults[i], "f"};
      assert_true(it_log_models(&log, 2, models));
      /* The client hung up on the silent upstream when the deadline fired;
       * no head was sent. */
      assert_int_equal(log.e[0].status, 0);
      assert_true(log.e[0].hung_up);
      expect_mock_ms("hang-up on the mock's clock",
                     log.e[0].hung_up_ms - log.e[0].t_ms, 450);
      expect_mock_ms("fallback started", log.e[1].t_ms - log.e[0].t_ms, 450);
      it_call_cleanup(&c);
      it_client_free(&cl);
    }
  }
}

/* ---- timeout.first_chunk
 * ------------------------------------------------------------ */

static void test_first_chunk_timeout(void **state) {
  (void)state;
  for (int stream = 0; stream < 2; stream++) {
    assert_int_equal(it_mock_reset(it_suite()), 0);
    it_client cl;
    client_for(&cl, "[ma/fc@slow=3000, mo/f]",
               "{first_byte_ms: 3000, first_chunk_ms: 450, chunk_ms: 3000}",
               NULL);
    it_call c;
    call(&cl, &c, stream);
    expect_text(&c, "f", 8);
    assert_int_equal(c.res->log[0].reason, AIR_REASON_TIMEOUT_FIRST_CHUNK);
    expect_ms("first_chunk attempt", (int64_t)c.res->log[0].ms, 450);
    it_log log;
    assert_int_equal(it_mock_log_settled(it_suite(), 2, 3000, &log), 0);
    const char *models[] = {"fc@slow=3000", "f"};
    assert_true(it_log_models(&log, 2, models));
    assert_int_equal(log.e[0].status, 200); /* the head came at once */
    assert_true(log.e[0].hung_up);
    expect_mock_ms("hang-up", log.e[0].hung_up_ms - log.e[0].t_ms, 450);
    it_call_cleanup(&c);
    it_client_free(&cl);
  }
}

/* ---- timeout.chunk
 * ------------------------------------------------------------------- */

/* Before commit: the gap after the role event; recoverable (switch). */
static void test_chunk_timeout_before_commit(void **state) {
  (void)state;
  for (int stream = 0; stream < 2; stream++) {
    assert_int_equal(it_mock_reset(it_suite()), 0);
    it_client cl;
    /* The first content part arrives at once but is held (it may still
     * become the refusal phrase), then the stream stalls: before commit,
     * the gap after content is chunk_ms, and the policy switches. */
    client_for(&cl, "[mo/ck@stall=1, mo/f]",
               "{first_byte_ms: 3000, first_chunk_ms: 3000, chunk_ms: 350}",
               "    refusal: {phrases: [\"[ck@stall=1] w1 w2 w3 w4 w5\"]}\n");
    it_call c;
    call(&cl, &c, stream);
    expect_text(&c, "f", 8);
    assert_int_equal(c.res->log[0].reason, AIR_REASON_TIMEOUT_CHUNK);
    expect_ms("chunk attempt", (int64_t)c.res->log[0].ms, 350);
    it_log log;
    assert_int_equal(it_mock_log_settled(it_suite(), 2, 3000, &log), 0);
    const char *models[] = {"ck@stall=1", "f"};
    assert_true(it_log_models(&log, 2, models));
    assert_true(log.e[0].hung_up);
    it_call_cleanup(&c);
    it_client_free(&cl);
  }
}

/* After commit: ends the stream, final; the caller has the partial text. */
static void test_chunk_timeout_after_commit(void **state) {
  (void)state;
  assert_int_equal(it_mock_reset(it_suite()), 0);
  it_client cl;
  client_for(&cl, "[ma/ca@stall=4, mo/f]",
             "{first_byte_ms: 3000, first_chunk_ms: 3000, chunk_ms: 350}",
             NULL);
  it_call c;
  call(&cl, &c, true);
  assert_int_equal(c.rc, AIR_EUPSTREAM);
  assert_int_equal(c.res->reason, AIR_REASON_TIMEOUT_CHUNK);
  assert_int_equal(c.res->n_log, 1);
  assert_string_equal(c.text, "[ca@stall=4] w1 w2 w3");
  /* From the last part received, not from the attempt start. */
  expect_ms("stream", (int64_t)(c.t_end - c.t_commit), 350);
  it_log log;
  assert_int_equal(it_mock_log_settled(it_suite(), 1, 3000, &log), 0);
  assert_int_equal(log.n, 1);
  assert_true(log.e[0].hung_up);
  it_call_cleanup(&c);
  it_client_free(&cl);
}

/* chunk_ms bounds the gap, not the stream: 8 gaps of 200 ms pass a 350 ms
 * chunk_ms; one gap of 600 ms does not. */
static void test_chunk_is_a_gap(void **state) {
  (void)state;
  assert_int_equal(it_mock_reset(it_suite()), 0);
  it_client cl;
  client_for(&cl, "[mo/g@delay=200, mo/f]",
             "{first_byte_ms: 3000, first_chunk_ms: 3000, chunk_ms: 350}",
             NULL);
  it_call c;
  call(&cl, &c, true);
  expect_text(&c, "g@delay=200", 8);
  assert_int_equal(c.res->n_log, 1);
  assert_true(c.t_end - c.t_start >= 1500);
  it_call_cleanup(&c);
  it_client_free(&cl);

  assert_int_equal(it_mock_reset(it_suite()), 0);
  client_for(&cl, "[mo/g@delay=600, mo/f]",
             "{first_byte_ms: 3000, first_chunk_ms: 3000, chunk_ms: 350}",
             NULL);
  call(&cl, &c, true);
  assert_int_equal(c.rc, AIR_EUPSTREAM);
  assert_int_equal(c.res->reason, AIR_REASON_TIMEOUT_CHUNK);
  assert_string_equal(c.text, "[g@delay=600]");
  it_call_cleanup(&c);
  it_client_free(&cl);
}

/* ---- timeout.attempt
 * ------------------------------------------------------------------ */

/* An answer still held (whole caller, or commit: complete) after attempt_ms
 * fails the attempt even though parts keep arriving. */
static void test_attempt_timeout(void **state) {
  (void)state;
  for (int mode = 0; mode < 2; mode++) {
    assert_int_equal(it_mock_reset(it_suite()), 0);
    it_client cl;
    client_for(&cl, "[mo/at@delay=100@tokens=20, ma/f]",
               "{first_byte_ms: 3000, first_chunk_ms: 3000, chunk_ms: 300,\n"
               "               attempt_ms: 500}",
               mode == 1 ? "    commit: complete\n" : NULL);
    it_call c;
    call(&cl, &c, mode == 1);
    expect_text(&c, "f", 8);
    assert_int_equal(c.res->n_log, 2);
    assert_int_equal(c.res->log[0].reason, AIR_REASON_TIMEOUT_ATTEMPT);
    expect_ms("attempt", (int64_t)c.res->log[0].ms, 500);
    it_log log;
    assert_int_equal(it_mock_log_settled(it_suite(), 2, 3000, &log), 0);
    const char *models[] = {"at@delay=100@tokens=20", "f"};
    assert_true(it_log_models(&log, 2, models));
    assert_true(log.e[0].hung_up);
    expect_mock_ms("hang-up", log.e[0].hung_up_ms - log.e[0].t_ms, 500);
    it_call_cleanup(&c);
    it_client_free(&cl);
  }
}

/* After commit attempt_ms and total_ms no longer apply: a streamed answer
 * longer than both completes. */
static void test_request_deadlines_end_at_commit(void **state) {
  (void)state;
  assert_int_equal(it_mock_reset(it_suite()), 0);
  it_client cl;
  client_for(&cl, "[mo/long@delay=100@tokens=10, mo/f]",
             "{first_byte_ms: 3000, first_chunk_ms: 3000, chunk_ms: 300,\n"
             "               attempt_ms: 400, total_ms: 500}",
             NULL);
  it_call c;
  call(&cl, &c, true);
  expect_text(&c, "long@delay=100@tokens=10", 10);
  assert_int_equal(c.res->n_log, 1);
  assert_true(c.t_end - c.t_start >= 900);
  it_call_cleanup(&c);
  it_client_free(&cl);
}

/* ---- timeout.total
 * ---------------------------------------------------------------------- */

/* The second attempt's deadline is clipped to the request's. */
static void test_total_timeout(void **state) {
  (void)state;
  for (int stream = 0; stream < 2; stream++) {
    assert_int_equal(it_mock_reset(it_suite()), 0);
    it_client cl;
    client_for(&cl, "[mo/t1@hang, ma/t2@hang, mo/f]",
               "{first_byte_ms: 500, total_ms: 800}", NULL);
    it_call c;
    call(&cl, &c, stream);
    if (c.res->n_log != 2 || c.res->reason != AIR_REASON_TIMEOUT_TOTAL)
      it_call_print(&c);
    assert_int_equal(c.rc, AIR_EUPSTREAM);
    assert_int_equal(c.res->reason, AIR_REASON_TIMEOUT_TOTAL);
    assert_int_equal(c.res->status, 504);
    assert_int_equal(c.res->n_log, 2);
    assert_int_equal(c.res->log[0].reason, AIR_REASON_TIMEOUT_FIRST_BYTE);
    assert_int_equal(c.res->log[1].reason, AIR_REASON_TIMEOUT_TOTAL);
    expect_ms("request", (int64_t)(c.t_end - c.t_start), 800);
    it_log log;
    assert_int_equal(it_mock_log_settled(it_suite(), 2, 3000, &log), 0);
    const char *models[] = {"t1@hang", "t2@hang"};
    assert_true(it_log_models(&log, 2, models));
    assert_true(log.e[0].hung_up && log.e[1].hung_up);
    expect_mock_ms("second hang-up", log.e[1].hung_up_ms - log.e[0].t_ms, 800);
    it_call_cleanup(&c);
    it_client_free(&cl);
  }
}

/* total_ms smaller than the waits the policy would make: the request ends
 * by total_ms, with no wait reaching past it (docs/decisions.md: a wait that
 * would reach the deadline is not slept, the last failure is final). */
static void test_total_bounds_waits(void **state) {
  (void)state;
  assert_int_equal(it_mock_reset(it_suite()), 0);
  it_client cl;
  client_for(&cl, "[mo/w@429@ra=1]", "{total_ms: 2500}",
             "    rules:\n"
             "      - {on: [rate_limit], action: retry, max: unlimited}\n");
  it_call c;
  call(&cl, &c, true);
  assert_int_equal(c.rc, AIR_EUPSTREAM);
  assert_int_equal(c.res->reason, AIR_REASON_RATE_LIMIT);
  assert_int_equal(c.res->n_log, 3);
  assert_true(c.t_end - c.t_start < 2500);
  expect_ms("request", (int64_t)(c.t_end - c.t_start), 2000);
  it_log log;
  assert_int_equal(it_mock_log_exactly(it_suite(), 3, 3000, &log), 0);
  const char *models[] = {"w@429@ra=1", "w@429@ra=1", "w@429@ra=1"};
  assert_true(it_log_models(&log, 3, models));
  for (int i = 1; i < 3; i++) {
    int64_t gap = log.e[i].t_ms - log.e[i - 1].t_ms;
    if (gap < 995 || gap > 1000 + SLACK_MS) {
      it_log_print(&log);
      fail();
    }
  }
  it_call_cleanup(&c);
  it_client_free(&cl);
}

/* For a whole-answer caller commit is the end of the answer: total_ms
 * covers the whole wait. */
static void test_total_covers_whole_answer(void **state) {
  (void)state;
  assert_int_equal(it_mock_reset(it_suite()), 0);
  it_client cl;
  client_for(&cl, "[mo/tw@delay=100@tokens=10]",
             "{first_byte_ms: 3000, first_chunk_ms: 3000, chunk_ms: 300,\n"
             "               total_ms: 500}",
             NULL);
  it_call c;
  call(&cl, &c, false);
  if (c.res->reason != AIR_REASON_TIMEOUT_TOTAL) it_call_print(&c);
  assert_int_equal(c.rc, AIR_EUPSTREAM);
  assert_int_equal(c.res->reason, AIR_REASON_TIMEOUT_TOTAL);
  expect_ms("request", (int64_t)(c.t_end - c.t_start), 500);
  assert_string_equal(c.res->text, "");
  it_log log;
  assert_int_equal(it_mock_log_settled(it_suite(), 1, 3000, &log), 0);
  assert_int_equal(log.n, 1);
  assert_true(log.e[0].hung_up);
  it_call_cleanup(&c);
  it_client_free(&cl);
}

/*
 * Deadlines are measured from the attempt's start, whatever ran before it on
 * the client's thread: an on_failed observer that takes 150 ms must not make
 * the next attempt's first_byte_ms fire 150 ms early.
 */
static void test_deadline_after_slow_observer(void **state) {
  (void)state;
  {
    /* on_failed needs a callback: a streaming caller. */
    it_client cl;
    client_for(&cl, "[mo/so1@hang, mo/so2@hang, mo/f]",
               "{first_byte_ms: 400, first_chunk_ms: 3000}", NULL);
    it_call c = {.dialect = AIR_DIALECT_OPENAI,
                 .model = "r",
                 .stream = true,
                 .failed_sleep_ms = 150};
    it_chat(cl.client, &c);
    expect_text(&c, "f", 8);
    assert_int_equal(c.res->n_log, 3);
    for (int i = 0; i < 2; i++) {
      assert_int_equal(c.res->log[i].reason, AIR_REASON_TIMEOUT_FIRST_BYTE);
      expect_ms("first_byte attempt", (int64_t)c.res->log[i].ms, 400);
    }
    it_log log;
    assert_int_equal(it_mock_log_settled(it_suite(), 3, 3000, &log), 0);
    const char *models[] = {"so1@hang", "so2@hang", "f"};
    assert_true(it_log_models(&log, 3, models));
    for (int i = 0; i < 2; i++) {
      assert_true(log.e[i].hung_up);
      expect_mock_ms("hang-up", log.e[i].hung_up_ms - log.e[i].t_ms, 400);
    }
    it_call_cleanup(&c);
    it_client_free(&cl);
  }
}

int main(void) {
  it_case_filter();
  const struct CMUnitTest tests[] = {
      IT_TEST(test_connect_timeout),
      IT_TEST(test_first_byte_timeout),
      IT_TEST(test_first_chunk_timeout),
      IT_TEST(test_chunk_timeout_before_commit),
      IT_TEST(test_chunk_timeout_after_commit),
      IT_TEST(test_chunk_is_a_gap),
      IT_TEST(test_attempt_timeout),
      IT_TEST(test_request_deadlines_end_at_commit),
      IT_TEST(test_total_timeout),
      IT_TEST(test_total_bounds_waits),
      IT_TEST(test_total_covers_whole_answer),
      IT_TEST(test_deadline_after_slow_observer),
  };
  return cmocka_run_group_tests_name("client_deadlines", tests, it_group_setup,
                                     it_group_teardown);
}
