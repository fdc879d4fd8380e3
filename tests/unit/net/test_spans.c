/*
 * Unit tests for src/net/spans.c: the spans built from a finished exchange
 * (roles, parents, skipped targets, the answering attempt's GenAI fields,
 * failures before and after commit, times inside the request), the trace a
 * request begins (continued or new, sampled by the sampler) and the
 * traceparent each attempt sends.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "helpers.h"
#include "limits.h"
#include "spans.h"

#define CONFIG                                                         \
  "providers:\n"                                                       \
  "  - {name: oa, api: openai, base_url: \"http://127.0.0.1:1/v1\"}\n" \
  "  - {name: an, api: anthropic, base_url: \"http://127.0.0.1:1\"}\n" \
  "routes:\n"                                                          \
  "  - {name: r, targets: [oa/gpt, an/claude]}\n"

#define MAX_SPANS 8

typedef struct rec {
  size_t n;
  air_span s[MAX_SPANS];
  char names[MAX_SPANS][64], models[MAX_SPANS][64], providers[MAX_SPANS][16],
      errors[MAX_SPANS][32];
  char resp[MAX_SPANS][64], finish[MAX_SPANS][32];
  size_t msg_n[MAX_SPANS]; /* strlen of the message, 0 without one */
  char msg[MAX_SPANS][AIR__MAX_SPAN_MESSAGE_BYTES + 1];
} rec;

static void keep(void *data, const air_span *s) {
  rec *r = data;
  assert_true(r->n < MAX_SPANS);
  size_t i = r->n++;
  r->s[i] = *s;
  snprintf(r->names[i], 64, "%s", s->name);
  snprintf(r->models[i], 64, "%s", s->request_model ? s->request_model : "-");
  snprintf(r->providers[i], 16, "%s", s->provider ? s->provider : "-");
  snprintf(r->errors[i], 32, "%s", s->error_type ? s->error_type : "-");
  snprintf(r->resp[i], 64, "%s", s->response_model ? s->response_model : "-");
  snprintf(r->finish[i], 32, "%s", s->finish_reason ? s->finish_reason : "-");
  r->msg_n[i] = s->message ? strlen(s->message) : 0;
  snprintf(r->msg[i], sizeof r->msg[i], "%s", s->message ? s->message : "");
}

static air__trace fixed_trace(void) {
  air__trace t;
  memset(&t, 0, sizeof(t));
  for (int i = 0; i < 16; i++) t.span.trace_id[i] = (uint8_t)(0x10 + i);
  for (int i = 0; i < 8; i++) t.span.span_id[i] = (uint8_t)(0xa0 + i);
  t.span.flags = 1;
  t.sampled = true;
  t.attempt_base = 42;
  t.start_mono_ms = 1000;
  t.start_unix_nano = 1796040000000000000ull;
  return t;
}

static air_attempt att(unsigned n, const char *target, air_reason reason,
                       int status, uint64_t start, uint64_t ms, uint64_t wait) {
  air_attempt a;
  memset(&a, 0, sizeof(a));
  a.n = n;
  a.target = target;
  a.reason = reason;
  a.status = status;
  a.message = reason ? "it failed" : "";
  a.request_id = "";
  a.start_ms = start;
  a.ms = ms;
  a.wait_ms = wait;
  return a;
}

static void retry_switch_and_skip(void **state) {
  (void)state;
  air_config *cfg = test_config(CONFIG);
  air__trace t = fixed_trace();
  air_attempt log[4] = {
      att(1, "oa/gpt", AIR_REASON_OVERLOADED, 503, 1000, 10, 250),
      att(2, "oa/gpt", AIR_REASON_OVERLOADED, 503, 1260, 10, 0),
  };
  memset(&log[2], 0, sizeof(log[2])); /* a skipped target: no span */
  log[2].target = "oa/gpt";
  log[2].skipped = true;
  log[2].message = "";
  log[2].request_id = "";
  log[3] = att(3, "an/claude", AIR_REASON_NONE, 200, 1270, 100, 0);
  air__exchange_result res;
  memset(&res, 0, sizeof(res));
  res.committed = true;
  res.answered = "an/claude";
  res.log = log;
  res.n_log = 4;
  res.n_attempts = 3;
  res.first_content_ms = 300; /* since the start: 30 ms into attempt 3 */
  res.total_ms = 370;
  air__trace_answer ans;
  air__trace_answer_init(&ans);
  air_part p;
  memset(&p, 0, sizeof(p));
  p.kind = AIR_PART_START;
  p.name = "claude-x-1";
  p.name_len = 10;
  air__trace_answer_part(&ans, &p);
  p.kind = AIR_PART_USAGE;
  p.input_tokens = 7;
  p.output_tokens = 5;
  air__trace_answer_part(&ans, &p);
  p.kind = AIR_PART_FINISH;
  p.finish = AIR_FINISH_STOP;
  air__trace_answer_part(&ans, &p);
  air__trace_end e = {cfg, "r", AIR_DIALECT_ANTHROPIC, "ok",
                      t.start_unix_nano + 370000000ull};
  rec r;
  memset(&r, 0, sizeof(r));
  air__trace_spans(&t, &e, &res, &ans, keep, &r);
  assert_int_equal(r.n, 4); /* three attempts, then the request */
  air_span *req = &r.s[3];
  assert_int_equal(req->kind, AIR_SPAN_REQUEST);
  assert_string_equal(req->trace_id, "101112131415161718191a1b1c1d1e1f");
  assert_string_equal(req->span_id, "a0a1a2a3a4a5a6a7");
  assert_string_equal(req->parent_span_id, "");
  assert_string_equal(r.names[3], "chat r");
  assert_string_equal(r.models[3], "r");
  assert_string_equal(r.providers[3], "anthropic");
  assert_string_equal(r.resp[3], "claude-x-1");
  assert_string_equal(r.finish[3], "stop");
  assert_int_equal(req->input_tokens, 7);
  assert_int_equal(req->output_tokens, 5);
  assert_int_equal(req->attempts, 3);
  assert_int_equal(req->first_content_ms, 300);
  assert_false(req->error);
  assert_int_equal(req->start_unix_nano, t.start_unix_nano);
  assert_int_equal(req->end_unix_nano, e.end_unix_nano);
  static const air_span_role roles[3] = {AIR_ROLE_FIRST, AIR_ROLE_RETRY,
                                         AIR_ROLE_SWITCH};
  static const char *const models[3] = {"gpt", "gpt", "claude"};
  for (int i = 0; i < 3; i++) {
    air_span *a = &r.s[i];
    assert_int_equal(a->kind, AIR_SPAN_ATTEMPT);
    assert_string_equal(a->parent_span_id, req->span_id);
    assert_string_equal(a->trace_id, req->trace_id);
    assert_int_equal(a->role, roles[i]);
    assert_int_equal(a->attempt, (unsigned)i + 1);
    assert_string_equal(r.models[i], models[i]);
    /* The id each attempt sent upstream is its span's id. */
    char tp[AIR__TRACEPARENT_LEN + 1], want[AIR__TRACEPARENT_LEN + 1];
    air__trace_attempt_header(&t, a->attempt, tp);
    snprintf(want, sizeof(want), "00-%s-%s-01", a->trace_id, a->span_id);
    assert_string_equal(tp, want);
    assert_true(a->start_unix_nano >= req->start_unix_nano);
    assert_true(a->end_unix_nano <= req->end_unix_nano);
  }
  assert_string_not_equal(r.s[0].span_id, r.s[1].span_id);
  assert_true(r.s[0].error && r.s[1].error && !r.s[2].error);
  assert_string_equal(r.errors[0], "overloaded");
  assert_int_equal(r.s[0].status, 503);
  assert_string_equal(r.providers[0], "openai");
  assert_string_equal(r.providers[2], "anthropic");
  assert_int_equal(r.s[1].wait_ms, 250); /* the wait before the retry */
  assert_int_equal(r.s[0].wait_ms, 0);
  assert_string_equal(r.resp[0], "-"); /* only the answer carries these */
  assert_string_equal(r.resp[2], "claude-x-1");
  assert_int_equal(r.s[2].first_content_ms, 30);
  assert_int_equal(r.s[0].first_content_ms, -1);
  /* Attempt 2 started 260 ms into the request: its offset on the wall. */
  assert_int_equal(r.s[1].start_unix_nano, t.start_unix_nano + 260000000ull);
  air_config_free(cfg);
}

static void failures_before_and_after_commit(void **state) {
  (void)state;
  air_config *cfg = test_config(CONFIG);
  air__trace t = fixed_trace();
  uint8_t parent[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  memcpy(t.parent_id, parent, 8);
  air_attempt log[1] = {
      att(1, "oa/gpt", AIR_REASON_TIMEOUT_CHUNK, 200, 1000, 50, 0)};
  air__exchange_result res;
  memset(&res, 0, sizeof(res));
  res.rc = AIR_EUPSTREAM;
  res.committed = true; /* the stream broke after commit */
  res.answered = "oa/gpt";
  res.reason = AIR_REASON_TIMEOUT_CHUNK;
  res.message = "no event within chunk_ms";
  res.status = 200;
  res.log = log;
  res.n_log = 1;
  res.n_attempts = 1;
  res.first_content_ms = 5;
  air__trace_answer ans;
  air__trace_answer_init(&ans);
  air__trace_end e = {cfg, "r", AIR_DIALECT_OPENAI, "error_after_commit",
                      t.start_unix_nano + 60000000ull};
  rec r;
  memset(&r, 0, sizeof(r));
  air__trace_spans(&t, &e, &res, &ans, keep, &r);
  assert_int_equal(r.n, 2);
  assert_string_equal(r.s[1].parent_span_id,
                      "0102030405060708"); /* continued */
  assert_true(r.s[1].error);
  assert_string_equal(r.errors[1], "timeout.chunk");
  assert_int_equal(r.s[1].first_content_ms, 5);
  assert_true(r.s[0].error);
  assert_int_equal(r.s[0].first_content_ms, 5); /* it answered, then broke */
  assert_int_equal(r.s[0].input_tokens, -1);

  /* Every attempt failed before commit: no answer anywhere. */
  log[0] = att(1, "oa/gpt", AIR_REASON_RATE_LIMIT, 429, 1000, 3, 0);
  res.committed = false;
  res.answered = NULL;
  res.reason = AIR_REASON_RATE_LIMIT;
  res.status = 429;
  res.first_content_ms = 0;
  memset(&r, 0, sizeof(r));
  air__trace_spans(&t, &e, &res, &ans, keep, &r);
  assert_int_equal(r.n, 2);
  assert_int_equal(r.s[1].first_content_ms, -1);
  assert_string_equal(r.providers[1], "-");
  assert_string_equal(r.errors[1], "rate_limit");
  assert_int_equal(r.s[0].first_content_ms, -1);
  air_config_free(cfg);
}

/* True when s[0..n) is whole UTF-8 (no sequence cut). */
static bool whole_utf8(const char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    size_t k = air__utf8_seq((const unsigned char *)s + i, n - i);
    if (k == 0) return false;
    i += k;
  }
  return true;
}

/* An upstream's error text of any length is a span's message of at most
 * AIR__MAX_SPAN_MESSAGE_BYTES, cut between characters; a short one whole. */
static void long_messages_are_bounded(void **state) {
  (void)state;
  air_config *cfg = test_config(CONFIG);
  air__trace t = fixed_trace();
  enum { BIG = 64 << 10 };
  char *big = malloc(BIG + 1);
  assert_non_null(big);
  /* "é" (2 bytes) and "€" (3 bytes) so that any cut may fall inside one. */
  for (size_t k = 0; k < 3; k++) {
    size_t i = 0;
    for (size_t j = 0; j < k; j++) big[i++] = 'x';
    while (i + 5 <= BIG) {
      memcpy(big + i, "\xc3\xa9\xe2\x82\xac", 5);
      i += 5;
    }
    big[i] = '\0';
    air_attempt log[1] = {
        att(1, "oa/gpt", AIR_REASON_SERVER_ERROR, 500, 1000, 3, 0)};
    log[0].message = big;
    air__exchange_result res;
    memset(&res, 0, sizeof(res));
    res.rc = AIR_EUPSTREAM;
    res.reason = AIR_REASON_SERVER_ERROR;
    res.message = big;
    res.status = 500;
    res.log = log;
    res.n_log = 1;
    res.n_attempts = 1;
    air__trace_answer ans;
    air__trace_answer_init(&ans);
    air__trace_end e = {cfg, "r", AIR_DIALECT_OPENAI, "error",
                        t.start_unix_nano + 60000000ull};
    rec r;
    memset(&r, 0, sizeof(r));
    air__trace_spans(&t, &e, &res, &ans, keep, &r);
    assert_int_equal(r.n, 2);
    for (size_t s = 0; s < 2; s++) {
      assert_true(r.msg_n[s] > AIR__MAX_SPAN_MESSAGE_BYTES / 2);
      assert_true(r.msg_n[s] <= AIR__MAX_SPAN_MESSAGE_BYTES);
      assert_true(whole_utf8(r.msg[s], r.msg_n[s]));
    }
  }
  /* A short one is kept whole. */
  air_attempt log[1] = {
      att(1, "oa/gpt", AIR_REASON_SERVER_ERROR, 500, 1000, 3, 0)};
  air__exchange_result res;
  memset(&res, 0, sizeof(res));
  res.rc = AIR_EUPSTREAM;
  res.reason = AIR_REASON_SERVER_ERROR;
  res.message = "upstream said \xe2\x82\xac";
  res.log = log;
  res.n_log = 1;
  air__trace_answer ans;
  air__trace_answer_init(&ans);
  air__trace_end e = {cfg, "r", AIR_DIALECT_OPENAI, "error",
                      t.start_unix_nano + 60000000ull};
  rec r;
  memset(&r, 0, sizeof(r));
  air__trace_spans(&t, &e, &res, &ans, keep, &r);
  assert_string_equal(r.msg[1], "upstream said \xe2\x82\xac");
  assert_string_equal(r.msg[0], "it failed");
  free(big);
  air_config_free(cfg);
}

/* Racers (docs/design.md §3.6): a hedge has role hedge; the racer that lost has
 * outcome hedge_lost, no error and no answer, also when it is the last
 * entry of the log (the first racer won and broke after commit). */
static void hedge_racers(void **state) {
  (void)state;
  air_config *cfg = test_config(CONFIG);
  air__trace t = fixed_trace();
  air_attempt log[2] = {
      att(1, "oa/gpt", AIR_REASON_TIMEOUT_CHUNK, 200, 1000, 900, 0),
      att(2, "an/claude", AIR_REASON_NONE, 200, 1300, 320, 0)};
  log[1].hedge = log[1].hedge_lost = true;
  air__exchange_result res;
  memset(&res, 0, sizeof(res));
  res.rc = AIR_EUPSTREAM;
  res.committed = true;
  res.answered = "oa/gpt";
  res.reason = AIR_REASON_TIMEOUT_CHUNK;
  res.log = log;
  res.n_log = 2;
  res.n_attempts = 2;
  res.first_content_ms = 620;
  air__trace_answer ans;
  air__trace_answer_init(&ans);
  air__trace_end e = {cfg, "r", AIR_DIALECT_OPENAI, "error_after_commit",
                      t.start_unix_nano + 1000000000ull};
  rec r;
  memset(&r, 0, sizeof(r));
  air__trace_spans(&t, &e, &res, &ans, keep, &r);
  assert_int_equal(r.n, 3);
  assert_int_equal(r.s[0].role, AIR_ROLE_FIRST);
  assert_null(r.s[0].outcome);
  assert_true(r.s[0].error);
  assert_int_equal(r.s[0].first_content_ms, 620); /* it answered */
  assert_int_equal(r.s[1].role, AIR_ROLE_HEDGE);
  assert_false(r.s[1].error);
  assert_int_equal(r.s[1].first_content_ms, -1);
  assert_string_equal(r.s[1].outcome, "hedge_lost");
  air_config_free(cfg);
}

/* Continuation (docs/design.md §3.5): a continuation's span has role
 * continuation (also the rejected prefill's), whatever target it is on;
 * the one that joined last answers. */
static void continuation_roles(void **state) {
  (void)state;
  air_config *cfg = test_config(CONFIG);
  air__trace t = fixed_trace();
  air_attempt log[3] = {
      att(1, "an/claude", AIR_REASON_NETWORK, 200, 1000, 300, 0),
      att(2, "an/claude", AIR_REASON_BAD_REQUEST, 400, 1300, 20, 0),
      att(3, "oa/gpt", AIR_REASON_NONE, 200, 1320, 400, 0)};
  log[1].continuation = log[1].prefill_rejected = true;
  log[2].continuation = true;
  air__exchange_result res;
  memset(&res, 0, sizeof(res));
  res.committed = true;
  res.answered = "an/claude";
  res.log = log;
  res.n_log = 3;
  res.n_attempts = 3;
  res.first_content_ms = 100;
  air__trace_answer ans;
  air__trace_answer_init(&ans);
  air__trace_end e = {cfg, "r", AIR_DIALECT_OPENAI, "ok",
                      t.start_unix_nano + 1000000000ull};
  rec r;
  memset(&r, 0, sizeof(r));
  air__trace_spans(&t, &e, &res, &ans, keep, &r);
  assert_int_equal(r.n, 4);
  assert_int_equal(r.s[0].role, AIR_ROLE_FIRST);
  assert_int_equal(r.s[1].role, AIR_ROLE_CONTINUATION);
  assert_int_equal(r.s[2].role, AIR_ROLE_CONTINUATION);
  assert_string_equal(air_span_role_name(r.s[2].role), "continuation");
  assert_false(r.s[2].error);
  air_config_free(cfg);
}

static void begin_continues_or_starts(void **state) {
  (void)state;
  air__sampler all = {true, 1.0}, none = {true, 0.0};
  air__trace a, b;
  static const char tp[] =
      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  assert_int_equal(air__trace_begin(&a, tp, sizeof(tp) - 1, &none), 0);
  char hex[33];
  air__hex(a.span.trace_id, 16, hex);
  assert_string_equal(hex, "0af7651916cd43dd8448eb211c80319c");
  air__hex(a.parent_id, 8, hex);
  assert_string_equal(hex, "b7ad6b7169203331");
  assert_true(a.sampled); /* the parent's flag, not the ratio */
  assert_int_equal(air__trace_begin(&b, NULL, 0, &all), 0);
  assert_true(b.sampled);
  assert_true(air__id_zero(b.parent_id, 8));
  assert_memory_not_equal(a.span.trace_id, b.span.trace_id, 16);
  assert_memory_not_equal(a.span.span_id, b.span.span_id, 8);
  assert_int_equal(air__trace_begin(&b, NULL, 0, &none), 0);
  assert_false(b.sampled);
  char out[AIR__TRACEPARENT_LEN + 1];
  air__trace_attempt_header(&b, 1, out);
  assert_string_equal(out + 53, "00"); /* unsampled still propagates */
  /* Malformed: a new trace. */
  assert_int_equal(air__trace_begin(&b, "00-xyz", 6, &all), 0);
  assert_true(air__id_zero(b.parent_id, 8));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(retry_switch_and_skip),
      cmocka_unit_test(failures_before_and_after_commit),
      cmocka_unit_test(long_messages_are_bounded),
      cmocka_unit_test(hedge_racers),
      cmocka_unit_test(continuation_roles),
      cmocka_unit_test(begin_continues_or_starts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
