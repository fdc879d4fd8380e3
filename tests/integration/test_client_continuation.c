/*
 * Continuing a stream after its first token (docs/design.md §3.5) through the
 * client against `airetry mock` (docs/mock.md, "Continuation"): a stream
 * cut, stalled or broken by an overload after 3 tokens reaches the caller
 * as the one uncut answer (the mock's answers are deterministic: its
 * continuation of assistant text P of answer A is A after P); a rejected
 * prefill is asked again with instruct, never reaching the caller; a
 * preamble in an instruct continuation ends the stream with the error
 * part; without continuation, or for a non-streaming call, nothing is
 * continued.
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

#define TOKENS 8 /* the mock's answer: "[M] w1 ... w8" */

/* A client on route r: one target, continuation as given (NULL: off), and
 * rules that retry every reason a continuation is asked on. */
static void client_for(it_client *cl, const char *target, const char *cont) {
  char tail[2048];
  snprintf(
      tail, sizeof(tail),
      "routes:\n"
      "  - name: r\n"
      "    targets: [%s]\n"
      "    timeouts: {chunk_ms: 400}\n"
      "    rules:\n"
      "      - on: [network, overloaded, server_error, timeout.chunk, "
      "malformed]\n"
      "        action: retry\n"
      "        max: 3\n"
      "        backoff: {base_ms: 10, factor: 1, max_ms: 10, jitter: none}\n"
      "%s%s%s",
      target, cont ? "    continuation: " : "", cont ? cont : "",
      cont ? "\n" : "");
  assert_int_equal(it_client_new(it_suite(), tail, 1, cl), 0);
}

static void call(it_client *cl, it_call *c, air_dialect d, bool stream) {
  memset(c, 0, sizeof(*c));
  c->dialect = d;
  c->model = "r";
  c->stream = stream;
  it_chat(cl->client, c);
}

/* The mock's raw log, for the continuation fields it_entry leaves out. */
static char *raw_log(void) {
  char *out = NULL;
  assert_int_equal(it_http_get(it_suite(), "/__mock/log", &out), 200);
  it_track(out, free);
  return out;
}

/* The call got model's whole answer, once, and no error part. */
static void expect_whole(const it_call *c, const char *model) {
  char want[512];
  it_answer(model, TOKENS, want, sizeof(want));
  if (c->rc != 0 || c->n_error != 0) it_call_print(c);
  assert_int_equal(c->rc, 0);
  assert_int_equal(c->n_error, 0);
  assert_string_equal(c->stream ? c->text : c->res->text, want);
  assert_int_equal(c->res->finish, AIR_FINISH_STOP);
}

/* A cut stream is continued on the same target with a prefill, for an
 * OpenAI and an Anthropic caller: one answer, the continuation in the
 * attempt log and the result's body ("airetry": {"continued": ...}). */
static void test_cut_stream_is_continued(void **state) {
  (void)state;
  static const char *const model = "m@cut=3@k=1";
  it_client cl;
  client_for(&cl, "ma/m@cut=3@k=1", "{enabled: true}");
  for (int d = 0; d < 2; d++) {
    assert_int_equal(it_mock_reset(it_suite()), 0);
    it_call c;
    call(&cl, &c, d ? AIR_DIALECT_ANTHROPIC : AIR_DIALECT_OPENAI, true);
    expect_whole(&c, model);
    assert_int_equal(c.n_commit, 1);
    assert_int_equal(c.res->n_log, 2);
    assert_int_equal(c.res->log[0].reason, AIR_REASON_NETWORK);
    assert_false(c.res->log[0].continuation);
    assert_true(c.res->log[1].continuation);
    assert_int_equal(c.res->log[1].reason, AIR_REASON_NONE);
    assert_non_null(strstr(c.res->body, "\"continued\""));
    assert_non_null(strstr(c.res->body, "\"at_char\""));
    it_log log;
    assert_int_equal(it_mock_log_exactly(it_suite(), 2, 3000, &log), 0);
    const char *raw = raw_log();
    assert_non_null(strstr(raw, "\"continuation\":\"prefill\""));
    it_call_cleanup(&c);
  }
  it_client_free(&cl);
}

/* A stall (timeout.chunk) and a mid-stream overload error event are
 * continued as well. */
static void test_stall_and_overload_are_continued(void **state) {
  (void)state;
  static const char *const models[] = {"m@stall=3@k=1", "m@overload=3@k=1"};
  static const air_reason reasons[] = {AIR_REASON_TIMEOUT_CHUNK,
                                       AIR_REASON_OVERLOADED};
  for (int i = 0; i < 2; i++) {
    assert_int_equal(it_mock_reset(it_suite()), 0);
    char target[64];
    snprintf(target, sizeof(target), "ma/%s", models[i]);
    it_client cl;
    client_for(&cl, target, "{enabled: true, max_gap_ms: 5000}");
    it_call c;
    call(&cl, &c, AIR_DIALECT_OPENAI, true);
    expect_whole(&c, models[i]);
    assert_int_equal(c.res->n_log, 2);
    assert_int_equal(c.res->log[0].reason, reasons[i]);
    assert_true(c.res->log[1].continuation);
    it_call_cleanup(&c);
    it_client_free(&cl);
  }
}

/* The mock restarts from the beginning when asked to continue: the seam
 * drops the repeat. */
static void test_restart_is_trimmed(void **state) {
  (void)state;
  it_client cl;
  client_for(&cl, "ma/m@cut=3@k=1@restart", "{enabled: true}");
  it_call c;
  call(&cl, &c, AIR_DIALECT_OPENAI, true);
  expect_whole(&c, "m@cut=3@k=1@restart");
  assert_true(c.res->log[1].continuation);
  it_call_cleanup(&c);
  it_client_free(&cl);
}

/* A target that rejects prefill (Anthropic's 400) is asked again at once
 * with instruct: the 400 is logged (prefill_rejected) and never reaches
 * the caller. */
static void test_rejected_prefill_asks_instruct(void **state) {
  (void)state;
  it_client cl;
  client_for(&cl, "ma/m@cut=3@k=1@noprefill",
             "{enabled: true, instruct: true}");
  it_call c;
  call(&cl, &c, AIR_DIALECT_OPENAI, true);
  expect_whole(&c, "m@cut=3@k=1@noprefill");
  assert_int_equal(c.res->n_log, 3);
  assert_true(c.res->log[1].continuation);
  assert_int_equal(c.res->log[1].status, 400); /* the refused prefill, logged */
  assert_int_equal(c.res->log[1].status, 400);
  assert_true(c.res->log[2].continuation);
  assert_false(c.res->log[2].prefill_rejected);
  it_log log;
  assert_int_equal(it_mock_log_exactly(it_suite(), 3, 3000, &log), 0);
  assert_int_equal(log.e[1].status, 400);
  const char *raw = raw_log();
  assert_non_null(strstr(raw, "\"continuation\":\"instruct\""));
  it_call_cleanup(&c);
  it_client_free(&cl);
}

/* An instruct continuation that starts with a preamble is never stitched
 * in: the stream ends with the error part after the released prefix. */
static void test_preamble_fails(void **state) {
  (void)state;
  static const char *const model = "m@cut=3@k=1@noprefill@preamble";
  it_client cl;
  client_for(&cl, "ma/m@cut=3@k=1@noprefill@preamble",
             "{enabled: true, instruct: true}");
  it_call c;
  call(&cl, &c, AIR_DIALECT_OPENAI, true);
  assert_int_not_equal(c.rc, 0);
  assert_int_equal(c.n_error, 1);
  assert_false(c.part_after_error);
  char whole[512];
  it_answer(model, TOKENS, whole, sizeof(whole));
  assert_true(c.text_n > 0 && c.text_n < strlen(whole));
  assert_memory_equal(c.text, whole, c.text_n);
  assert_null(strstr(c.text, "Sure"));
  it_call_cleanup(&c);
  it_client_free(&cl);
}

/*
 * When no continuation succeeds, the caller's error is what broke its
 * stream: a prefill the target refuses with instruct off, and a
 * continuation target's own 429, never reach the caller.
 */
static void test_failed_continuation_reports_the_break(void **state) {
  (void)state;
  it_client cl;
  client_for(&cl, "ma/m@cut=3@k=1@noprefill",
             "{enabled: true, instruct: false}");
  it_call c;
  call(&cl, &c, AIR_DIALECT_OPENAI, true);
  if (c.rc == 0 || strcmp(c.error_name, "network") != 0) it_call_print(&c);
  assert_int_not_equal(c.rc, 0);
  assert_int_equal(c.n_error, 1);
  assert_string_equal(c.error_name, "network");
  assert_int_equal(c.res->reason, AIR_REASON_NETWORK);
  assert_int_equal(c.res->n_log, 2);
  assert_true(c.res->log[1].continuation);
  assert_int_equal(c.res->log[1].status, 400); /* the refused prefill, logged */
  assert_string_equal(c.res->target, "ma/m@cut=3@k=1@noprefill");
  assert_int_equal(c.res->status, 502);
  it_call_cleanup(&c);
  it_client_free(&cl);

  /* The continuation goes to the other target (the broken one is the last
   * choice), which answers 429: the caller still hears of the cut. */
  assert_int_equal(it_mock_reset(it_suite()), 0);
  assert_int_equal(
      it_client_new(it_suite(),
                    "routes:\n"
                    "  - name: r\n"
                    "    targets: [ma/m@cut=3@k=1, ma/busy@429]\n"
                    "    continuation: {enabled: true, targets: any}\n"
                    "    rules:\n"
                    "      - {on: [network], action: retry, max: 3,\n"
                    "         backoff: {base_ms: 10, factor: 1, max_ms: 10, "
                    "jitter: none}}\n"
                    "      - {on: [rate_limit], action: fail}\n",
                    1, &cl),
      0);
  call(&cl, &c, AIR_DIALECT_OPENAI, true);
  if (c.rc == 0 || strcmp(c.error_name, "network") != 0) it_call_print(&c);
  assert_int_not_equal(c.rc, 0);
  assert_string_equal(c.error_name, "network");
  assert_int_equal(c.res->reason, AIR_REASON_NETWORK);
  assert_true(c.res->n_log >= 2);
  assert_string_equal(c.res->log[1].target, "ma/busy@429");
  assert_int_equal(c.res->log[1].reason, AIR_REASON_RATE_LIMIT);
  it_call_cleanup(&c);
  it_client_free(&cl);
}

/* Without continuation the caller gets today's error part; a
 * non-streaming call (commit = the end of its answer) is retried whole. */
static void test_nothing_continued_otherwise(void **state) {
  (void)state;
  it_client cl;
  client_for(&cl, "ma/m@cut=3@k=1", NULL);
  it_call c;
  call(&cl, &c, AIR_DIALECT_OPENAI, true);
  assert_int_not_equal(c.rc, 0);
  assert_int_equal(c.n_error, 1);
  assert_string_equal(c.error_name, "network");
  assert_int_equal(c.res->n_log, 1);
  it_call_cleanup(&c);
  it_client_free(&cl);

  assert_int_equal(it_mock_reset(it_suite()), 0);
  client_for(&cl, "ma/m@cut=3@k=1", "{enabled: true}");
  call(&cl, &c, AIR_DIALECT_OPENAI, false);
  expect_whole(&c, "m@cut=3@k=1");
  assert_int_equal(c.res->n_log, 2);
  assert_false(c.res->log[1].continuation);
  assert_null(strstr(c.res->body, "\"continued\""));
  it_call_cleanup(&c);
  it_client_free(&cl);
}

int main(void) {
  it_case_filter();
  const struct CMUnitTest tests[] = {
      IT_TEST(test_cut_stream_is_continued),
      IT_TEST(test_stall_and_overload_are_continued),
      IT_TEST(test_restart_is_trimmed),
      IT_TEST(test_rejected_prefill_asks_instruct),
      IT_TEST(test_preamble_fails),
      IT_TEST(test_failed_continuation_reports_the_break),
      IT_TEST(test_nothing_continued_otherwise),
  };
  return cmocka_run_group_tests(tests, it_group_setup, it_group_teardown);
}
