/*
 * The client's spans (air_observers.on_span, docs/design.md §5 Traces and 7)
 * against `airetry mock`: a request retried on a 503 primary and switched
 * to a healthy fallback yields three attempt spans and one request span
 * with the right ids, parents, roles, reasons and GenAI attributes; each
 * upstream request carried its attempt span's traceparent (the mock's log
 * records it); an application traceparent is continued; without on_span
 * nothing is sent upstream.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "harness.h"

#define CONFIG                                                           \
  "defaults:\n"                                                          \
  "  breaker: {enabled: false}\n"                                        \
  "  timeouts: {connect_ms: 1000, first_byte_ms: 2000, first_chunk_ms: " \
  "2000,\n"                                                              \
  "             chunk_ms: 2000, total_ms: 10000}\n"                      \
  "routes:\n"                                                            \
  "  - name: smart\n"                                                    \
  "    targets: [mo/p@503, mo/f]\n"

#define MAX_SPANS 8
#define APP_TP "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

/* A copy of what on_span saw (its strings live only during the call). */
typedef struct span_rec {
  air_span_kind kind;
  char trace_id[33], span_id[17], parent[17];
  bool sampled, error;
  char name[64], provider[32], request_model[64], response_model[64];
  char finish[32], error_type[32], outcome[32], target[64], role[16];
  int64_t in, out, first_content_ms;
  unsigned attempts, attempt;
  air_reason reason;
  int status;
  uint64_t start, end, wait_ms;
} span_rec;

typedef struct spans {
  size_t n;
  span_rec s[MAX_SPANS];
  unsigned settled; /* on_settled calls; on_span must come first */
  bool span_after_settled;
} spans;

static void cp(char *dst, size_t cap, const char *s) {
  snprintf(dst, cap, "%s", s ? s : "");
}

static void on_span(void *data, const air_span *s) {
  spans *sp = data;
  if (sp->settled) sp->span_after_settled = true;
  if (sp->n == MAX_SPANS) return;
  span_rec *r = &sp->s[sp->n++];
  memset(r, 0, sizeof(*r));
  assert_true(s->size >= sizeof(air_span));
  r->kind = s->kind;
  cp(r->trace_id, sizeof(r->trace_id), s->trace_id);
  cp(r->span_id, sizeof(r->span_id), s->span_id);
  cp(r->parent, sizeof(r->parent), s->parent_span_id);
  r->sampled = s->sampled;
  r->error = s->error;
  cp(r->name, sizeof(r->name), s->name);
  cp(r->provider, sizeof(r->provider), s->provider);
  cp(r->request_model, sizeof(r->request_model), s->request_model);
  cp(r->response_model, sizeof(r->response_model), s->response_model);
  cp(r->finish, sizeof(r->finish), s->finish_reason);
  cp(r->error_type, sizeof(r->error_type), s->error_type);
  cp(r->outcome, sizeof(r->outcome), s->outcome);
  cp(r->target, sizeof(r->target), s->target);
  cp(r->role, sizeof(r->role), air_span_role_name(s->role));
  r->in = s->input_tokens;
  r->out = s->output_tokens;
  r->first_content_ms = s->first_content_ms;
  r->attempts = s->attempts;
  r->attempt = s->attempt;
  r->reason = s->reason;
  r->status = s->status;
  r->start = s->start_unix_nano;
  r->end = s->end_unix_nano;
  r->wait_ms = s->wait_ms;
}

static void on_settled(void *data, int rc, const air_attempt *log, size_t n) {
  (void)rc;
  (void)log;
  (void)n;
  ((spans *)data)->settled++;
}

static int on_part(void *data, const air_part *p) {
  (void)data;
  (void)p;
  return 0;
}

/* One call of route smart; returns rc. */
static int call(it_client *c, bool stream, bool traced, const char *tp,
                spans *sp) {
  memset(sp, 0, sizeof(*sp));
  air_observers obs = AIR_OBSERVERS_INIT;
  obs.data = sp;
  obs.on_settled = on_settled;
  if (traced) obs.on_span = on_span;
  air_chat_opts o = AIR_CHAT_OPTS_INIT;
  o.observers = &obs;
  o.on_part = stream ? on_part : NULL;
  o.traceparent = tp;
  static const char body[] =
      "{\"model\":\"smart\",\"messages\":[{\"role\":\"user\",\"content\":"
      "\"hi\"}]}";
  air_chat_result *res = NULL;
  air_error err;
  int rc = air_client_chat(c->client, AIR_DIALECT_OPENAI, body,
                           sizeof(body) - 1, &o, &res, &err);
  air_chat_result_free(res);
  return rc;
}

/* The traceparent values the mock recorded, in order (NULL for none). */
static size_t mock_traceparents(char out[][64], size_t cap) {
  char *text = NULL;
  assert_int_equal(it_http_get(it_suite(), "/__mock/log", &text), 200);
  json_error_t e;
  json_t *j = json_loads(text, 0, &e);
  free(text);
  assert_non_null(j);
  json_t *a = json_object_get(j, "attempts");
  size_t n = json_array_size(a);
  assert_true(n <= cap);
  for (size_t i = 0; i < n; i++) {
    const char *tp =
        json_string_value(json_object_get(json_array_get(a, i), "traceparent"));
    snprintf(out[i], 64, "%s", tp ? tp : "");
  }
  json_decref(j);
  return n;
}

static void check_failover(spans *sp, bool continued) {
  assert_int_equal(sp->n, 4);
  assert_int_equal(sp->settled, 1);
  assert_false(sp->span_after_settled);
  span_rec *req = &sp->s[3];
  assert_int_equal(req->kind, AIR_SPAN_REQUEST);
  if (continued) {
    assert_string_equal(req->trace_id, "0af7651916cd43dd8448eb211c80319c");
    assert_string_equal(req->parent, "b7ad6b7169203331");
  } else {
    assert_int_equal(strlen(req->trace_id), 32);
    assert_string_equal(req->parent, "");
  }
  assert_true(req->sampled);
  assert_false(req->error);
  assert_string_equal(req->name, "chat smart");
  assert_string_equal(req->request_model, "smart");
  assert_string_equal(req->outcome, "ok");
  assert_int_equal(req->attempts, 3);
  assert_string_equal(req->target, "mo/f");
  assert_string_equal(req->provider, "openai");
  assert_string_equal(req->response_model, "f");
  assert_string_equal(req->finish, "stop");
  assert_int_equal(req->out, 9); /* "[f]" and 8 words */
  assert_true(req->in > 0);
  assert_true(req->first_content_ms >= 0);
  static const char *const roles[3] = {"first", "retry", "switch"};
  static const char *const models[3] = {"p@503", "p@503", "f"};
  for (int i = 0; i < 3; i++) {
    span_rec *a = &sp->s[i];
    assert_int_equal(a->kind, AIR_SPAN_ATTEMPT);
    assert_string_equal(a->trace_id, req->trace_id);
    assert_string_equal(a->parent, req->span_id);
    assert_string_not_equal(a->span_id, req->span_id);
    assert_int_equal(a->attempt, (unsigned)i + 1);
    assert_string_equal(a->role, roles[i]);
    assert_string_equal(a->request_model, models[i]);
    assert_string_equal(a->provider, "openai");
    assert_true(a->start >= req->start && a->end <= req->end &&
                a->start <= a->end);
    if (i < 2) {
      assert_true(a->error);
      assert_int_equal(a->reason, AIR_REASON_OVERLOADED);
      assert_string_equal(a->error_type, "overloaded");
      assert_int_equal(a->status, 503);
      assert_int_equal(a->first_content_ms, -1);
      assert_string_equal(a->response_model, "");
    } else {
      assert_false(a->error);
      assert_int_equal(a->reason, AIR_REASON_NONE);
      assert_string_equal(a->response_model, "f");
      assert_true(a->first_content_ms >= 0);
    }
  }
  assert_string_not_equal(sp->s[0].span_id, sp->s[1].span_id);
  /* The retry waited the backoff the policy chose; the first did not. */
  assert_int_equal(sp->s[0].wait_ms, 0);
  /* Each upstream request carried its attempt span's traceparent. */
  char tps[8][64];
  assert_int_equal(mock_traceparents(tps, 8), 3);
  for (int i = 0; i < 3; i++) {
    char want[64];
    snprintf(want, sizeof(want), "00-%s-%s-01", req->trace_id,
             sp->s[i].span_id);
    assert_string_equal(tps[i], want);
  }
}

static void failover_spans_whole(void **state) {
  (void)state;
  it_client c;
  assert_int_equal(it_client_new(it_suite(), CONFIG, 1, &c), 0);
  spans sp;
  assert_int_equal(call(&c, false, true, NULL, &sp), 0);
  check_failover(&sp, false);
  it_client_free(&c);
}

static void failover_spans_stream_continued(void **state) {
  (void)state;
  it_client c;
  assert_int_equal(it_client_new(it_suite(), CONFIG, 1, &c), 0);
  spans sp;
  assert_int_equal(call(&c, true, true, APP_TP, &sp), 0);
  check_failover(&sp, true);
  it_client_free(&c);
}

/* A bad application traceparent: a new trace, still traced. */
static void bad_traceparent_starts_a_trace(void **state) {
  (void)state;
  it_client c;
  assert_int_equal(it_client_new(it_suite(), CONFIG, 1, &c), 0);
  spans sp;
  assert_int_equal(
      call(&c, true, true,
           "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", &sp),
      0);
  check_failover(&sp, false);
  assert_string_not_equal(sp.s[3].trace_id, "0af7651916cd43dd8448eb211c80319c");
  it_client_free(&c);
}

/* Without on_span nothing is traced and no traceparent leaves. */
static void untraced_sends_no_traceparent(void **state) {
  (void)state;
  it_client c;
  assert_int_equal(it_client_new(it_suite(), CONFIG, 1, &c), 0);
  spans sp;
  assert_int_equal(call(&c, true, false, APP_TP, &sp), 0);
  assert_int_equal(sp.n, 0);
  char tps[8][64];
  assert_int_equal(mock_traceparents(tps, 8), 3);
  for (int i = 0; i < 3; i++) assert_string_equal(tps[i], "");
  it_client_free(&c);
}

int main(void) {
  it_case_filter();
  const struct CMUnitTest tests[] = {
      IT_TEST(failover_spans_whole),
      IT_TEST(failover_spans_stream_continued),
      IT_TEST(bad_traceparent_starts_a_trace),
      IT_TEST(untraced_sends_no_traceparent),
  };
  return cmocka_run_group_tests(tests, it_group_setup, it_group_teardown);
}
