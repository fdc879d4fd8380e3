/*
 * Unit tests for src/gateway/otlp.c and exporter.c: spans encoded as
 * OTLP/HTTP JSON checked field by field against the encoding rules (hex
 * ids, 64-bit integers and nanosecond times as strings, enums as integers,
 * no parentSpanId on a root), the request envelope, and an exporter that
 * drops and counts when its queue is full or its collector is dead or
 * stalled — without ever blocking the caller.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <curl/curl.h>
#include <jansson.h>
#include <malloc.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "airetry.h"
#include "limits.h"
#include "otlp.h"
#include "tl_proc.h"

static air_span attempt_span(void) {
  air_span s;
  memset(&s, 0, sizeof(s));
  s.size = sizeof(s);
  s.kind = AIR_SPAN_ATTEMPT;
  strcpy(s.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
  strcpy(s.span_id, "00f067aa0ba902b7");
  strcpy(s.parent_span_id, "1111111111111111");
  s.sampled = true;
  s.name = "chat gpt-4o";
  s.start_unix_nano =
      1796040000123456789ull; /* past 2^53: exact as a string only */
  s.end_unix_nano = 1796040000987654321ull;
  s.error = true;
  s.operation = "chat";
  s.provider = "openai";
  s.request_model = "gpt-4o";
  s.input_tokens = s.output_tokens = -1;
  s.error_type = "overloaded";
  s.message = "upstream said \"busy\"\n";
  s.first_content_ms = -1;
  s.attempt = 1;
  s.role = AIR_ROLE_FIRST;
  s.target = "primary/gpt-4o";
  s.provider_name = "primary";
  s.reason = AIR_REASON_OVERLOADED;
  s.status = 503;
  s.upstream_request_id = "req_up_1";
  return s;
}

static json_t *parse(const air__buf *b) {
  json_error_t e;
  json_t *j = json_loadb(b->p, b->n, 0, &e);
  if (j == NULL) fail_msg("not JSON: %s: %.*s", e.text, (int)b->n, b->p);
  return j;
}

/* The value object of attribute key, or NULL. */
static json_t *attr(json_t *span, const char *key) {
  json_t *a = json_object_get(span, "attributes");
  assert_true(json_is_array(a));
  for (size_t i = 0; i < json_array_size(a); i++) {
    json_t *kv = json_array_get(a, i);
    if (strcmp(json_string_value(json_object_get(kv, "key")), key) == 0)
      return json_object_get(kv, "value");
  }
  return NULL;
}

static const char *attr_s(json_t *span, const char *key) {
  json_t *v = attr(span, key);
  if (v == NULL) return NULL;
  assert_int_equal(json_object_size(v), 1);
  return json_string_value(json_object_get(v, "stringValue"));
}

static const char *attr_i(json_t *span, const char *key) {
  json_t *v = attr(span, key);
  if (v == NULL) return NULL;
  json_t *i = json_object_get(v, "intValue");
  assert_true(json_is_string(i)); /* int64 as a JSON string */
  return json_string_value(i);
}

static void attempt_span_fields(void **state) {
  (void)state;
  air_span s = attempt_span();
  air__buf b;
  air__buf_init(&b, AIR__MAX_SPAN_BYTES);
  assert_int_equal(air__otlp_span(&s, NULL, &b), 0);
  json_t *j = parse(&b);
  assert_string_equal(json_string_value(json_object_get(j, "traceId")),
                      "4bf92f3577b34da6a3ce929d0e0e4736");
  assert_string_equal(json_string_value(json_object_get(j, "spanId")),
                      "00f067aa0ba902b7");
  assert_string_equal(json_string_value(json_object_get(j, "parentSpanId")),
                      "1111111111111111");
  assert_string_equal(json_string_value(json_object_get(j, "name")),
                      "chat gpt-4o");
  assert_true(json_is_integer(json_object_get(j, "kind")));
  assert_int_equal(json_integer_value(json_object_get(j, "kind")),
                   3); /* CLIENT */
  assert_string_equal(
      json_string_value(json_object_get(j, "startTimeUnixNano")),
      "1796040000123456789");
  assert_string_equal(json_string_value(json_object_get(j, "endTimeUnixNano")),
                      "1796040000987654321");
  assert_string_equal(attr_s(j, "gen_ai.operation.name"), "chat");
  assert_string_equal(attr_s(j, "gen_ai.provider.name"), "openai");
  assert_string_equal(attr_s(j, "gen_ai.request.model"), "gpt-4o");
  assert_null(attr(j, "gen_ai.response.model"));
  assert_null(attr(j, "gen_ai.usage.input_tokens"));
  assert_string_equal(attr_s(j, "error.type"), "overloaded");
  assert_string_equal(attr_s(j, "airetry.reason"), "overloaded");
  assert_string_equal(attr_s(j, "airetry.role"), "first");
  assert_string_equal(attr_s(j, "airetry.target"), "primary/gpt-4o");
  assert_string_equal(attr_s(j, "airetry.provider"), "primary");
  assert_string_equal(attr_i(j, "airetry.attempt"), "1");
  assert_string_equal(attr_i(j, "http.response.status_code"), "503");
  assert_string_equal(attr_i(j, "airetry.wait_ms"), "0");
  assert_string_equal(attr_s(j, "airetry.upstream.request_id"), "req_up_1");
  assert_null(attr(j, "airetry.first_content_ms"));
  json_t *st = json_object_get(j, "status");
  assert_true(json_is_integer(json_object_get(st, "code")));
  assert_int_equal(json_integer_value(json_object_get(st, "code")),
                   2); /* ERROR */
  assert_string_equal(json_string_value(json_object_get(st, "message")),
                      "upstream said \"busy\"\n");
  /* No raw newline: the exporter's ring separates spans with one. */
  assert_null(memchr(b.p, '\n', b.n));
  json_decref(j);
  air__buf_cleanup(&b);
}

static void request_span_fields(void **state) {
  (void)state;
  air_span s = attempt_span();
  s.kind = AIR_SPAN_REQUEST;
  s.parent_span_id[0] = '\0'; /* a root */
  s.name = "chat smart";
  s.error = false;
  s.error_type = s.message = NULL;
  s.reason = AIR_REASON_NONE;
  s.request_model = "smart";
  s.response_model = "gpt-4o-2024-08-06";
  s.input_tokens = 12;
  s.output_tokens = 9000000000; /* past 32 bits */
  s.finish_reason = "stop";
  s.first_content_ms = 250;
  s.route = "smart";
  s.dialect = AIR_DIALECT_ANTHROPIC;
  s.outcome = "ok";
  s.attempts = 2;
  air__buf b;
  air__buf_init(&b, AIR__MAX_SPAN_BYTES);
  assert_int_equal(air__otlp_span(&s, "req_abc", &b), 0);
  json_t *j = parse(&b);
  assert_null(json_object_get(j, "parentSpanId"));
  assert_int_equal(json_integer_value(json_object_get(j, "kind")),
                   2); /* SERVER */
  assert_string_equal(attr_s(j, "gen_ai.request.model"), "smart");
  assert_string_equal(attr_s(j, "gen_ai.response.model"), "gpt-4o-2024-08-06");
  assert_string_equal(attr_i(j, "gen_ai.usage.input_tokens"), "12");
  assert_string_equal(attr_i(j, "gen_ai.usage.output_tokens"), "9000000000");
  json_t *fr = json_object_get(
      json_object_get(attr(j, "gen_ai.response.finish_reasons"), "arrayValue"),
      "values");
  assert_int_equal(json_array_size(fr), 1);
  assert_string_equal(
      json_string_value(json_object_get(json_array_get(fr, 0), "stringValue")),
      "stop");
  assert_null(attr(j, "error.type"));
  assert_string_equal(attr_s(j, "airetry.route"), "smart");
  assert_string_equal(attr_s(j, "airetry.caller.dialect"), "anthropic");
  assert_string_equal(attr_s(j, "airetry.outcome"), "ok");
  assert_string_equal(attr_i(j, "airetry.attempts"), "2");
  assert_string_equal(attr_i(j, "airetry.first_content_ms"), "250");
  assert_string_equal(attr_s(j, "airetry.request_id"), "req_abc");
  assert_null(attr(j, "airetry.attempt"));
  json_t *st = json_object_get(j, "status");
  assert_int_equal(json_integer_value(json_object_get(st, "code")),
                   0); /* UNSET */
  assert_null(json_object_get(st, "message"));
  json_decref(j);

  /* Over the span limit: an error, and the buffer as it was. */
  air__buf small;
  air__buf_init(&small, 64);
  assert_int_equal(air__otlp_span(&s, NULL, &small), AIR_ETOOBIG);
  assert_int_equal(small.n, 0);
  air__buf_cleanup(&small);
  air__buf_cleanup(&b);
}

static void request_envelope(void **state) {
  (void)state;
  air_span s = attempt_span();
  air__buf spans, req;
  air__buf_init(&spans, 1u << 20);
  air__buf_init(&req, 1u << 20);
  assert_int_equal(air__otlp_span(&s, NULL, &spans), 0);
  assert_int_equal(air__buf_addc(&spans, '\n'), 0);
  strcpy(s.span_id, "2222222222222222");
  assert_int_equal(air__otlp_span(&s, NULL, &spans), 0);
  assert_int_equal(air__buf_addc(&spans, '\n'), 0);
  assert_int_equal(air__otlp_request("gw \"eu\"", spans.p, spans.n, &req), 0);
  json_t *j = parse(&req);
  json_t *rs = json_array_get(json_object_get(j, "resourceSpans"), 0);
  json_t *res = json_object_get(rs, "resource");
  assert_string_equal(attr_s(res, "service.name"), "gw \"eu\"");
  json_t *ss = json_array_get(json_object_get(rs, "scopeSpans"), 0);
  assert_string_equal(
      json_string_value(json_object_get(json_object_get(ss, "scope"), "name")),
      "airetry");
  json_t *list = json_object_get(ss, "spans");
  assert_int_equal(json_array_size(list), 2);
  assert_string_equal(
      json_string_value(json_object_get(json_array_get(list, 1), "spanId")),
      "2222222222222222");
  json_decref(j);
  air__buf_cleanup(&spans);
  air__buf_cleanup(&req);
}

/* A port on 127.0.0.1 with a listening socket that never accepts (fd
 * returned; connects complete in the backlog and are never answered), or
 * with nothing listening (listen false: the socket is closed again). */
static int local_port(bool listen_it, int *fd_out) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
  socklen_t len = sizeof(a);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  if (listen_it) {
    assert_int_equal(listen(fd, 16), 0);
    *fd_out = fd;
  } else {
    close(fd);
    *fd_out = -1;
  }
  return ntohs(a.sin_port);
}

static air__otel settings(int port, uint64_t delay_ms) {
  static char url[64];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/traces", port);
  air__otel o;
  memset(&o, 0, sizeof(o));
  o.enabled = true;
  o.endpoint = url;
  o.service_name = (char *)(uintptr_t) "airetry";
  o.sampler.parent_based = true;
  o.sampler.ratio = 1;
  o.delay_ms = delay_ms;
  o.timeout_ms = 200;
  return o;
}

static void put_spans(air__exporter *e, unsigned n) {
  air_span s = attempt_span();
  air__buf b;
  air__buf_init(&b, AIR__MAX_SPAN_BYTES);
  assert_int_equal(air__otlp_span(&s, NULL, &b), 0);
  for (unsigned i = 0; i < n; i++) air__exporter_put(e, b.p, b.n);
  air__buf_cleanup(&b);
}

/* A dead collector (nothing listens): every span is dropped and counted,
 * none exported; stop returns (one last try, then the rest dropped). */
static void dead_collector_drops(void **state) {
  (void)state;
  int fd;
  int port = local_port(false, &fd);
  air__otel o = settings(port, 10);
  air__exporter *e = NULL;
  assert_int_equal(air__exporter_start(&o, &e), 0);
  put_spans(e, 100);
  const _Atomic uint64_t *dropped = air__exporter_dropped(e);
  /* Bounded poll: the batch fails within the connect timeout. */
  struct timespec tick = {0, 10000000};
  for (int i = 0; i < 500 && atomic_load(dropped) < 100; i++)
    nanosleep(&tick, NULL);
  assert_int_equal(atomic_load(dropped), 100);
  assert_int_equal(atomic_load(air__exporter_exported(e)), 0);
  air__exporter_stop(e);
}

/* A stalled collector (accepts into its backlog, never answers) and more
 * spans than the queue holds: every put returns while the collector is
 * stalled, the overflow is dropped and counted, memory stays bounded by
 * the ring, and stop ends after one export timeout. */
static void stalled_collector_and_full_queue(void **state) {
  (void)state;
  int fd;
  int port = local_port(true, &fd);
  air__otel o = settings(port, 10);
  air__exporter *e = NULL;
  assert_int_equal(air__exporter_start(&o, &e), 0);
  air_span s = attempt_span();
  air__buf b;
  air__buf_init(&b, AIR__MAX_SPAN_BYTES);
  assert_int_equal(air__otlp_span(&s, NULL, &b), 0);
  unsigned n = (unsigned)(2 * AIR__MAX_TRACE_QUEUE_BYTES / (b.n + 1));
  for (unsigned i = 0; i < n; i++) air__exporter_put(e, b.p, b.n);
  /* Over half could not fit: at least n/2 - a batch dropped at once. */
  assert_true(atomic_load(air__exporter_dropped(e)) >=
              n / 2 - AIR__MAX_TRACE_BATCH_SPANS);
  assert_int_equal(atomic_load(air__exporter_exported(e)), 0);
  /* An oversized or empty span is dropped too. */
  uint64_t before = atomic_load(air__exporter_dropped(e));
  air__exporter_put(e, NULL, 0);
  assert_int_equal(atomic_load(air__exporter_dropped(e)), before + 1);
  air__exporter_stop(e);
  air__buf_cleanup(&b);
  close(fd);
}

/* More spans than the queue holds go through it a batch at a time (a dead
 * collector: each batch is taken, tried and dropped before the next is
 * put): RSS grows by less than half the queue's 4 MiB, which a ring whose
 * head moved on by every span touched in full. */
static void memory_follows_backlog_not_throughput(void **state) {
  (void)state;
  enum { PER_BATCH = 100 };
  int fd;
  int port = local_port(false, &fd);
  air__otel o = settings(port, 1);
  air__exporter *e = NULL;
  assert_int_equal(air__exporter_start(&o, &e), 0);
  air_span s = attempt_span();
  air__buf b;
  air__buf_init(&b, AIR__MAX_SPAN_BYTES);
  assert_int_equal(air__otlp_span(&s, NULL, &b), 0);
  unsigned batches =
      (unsigned)(3 * AIR__MAX_TRACE_QUEUE_BYTES / 2 / (PER_BATCH * (b.n + 1)));
  const _Atomic uint64_t *dropped = air__exporter_dropped(e);
  long before = tl_rss_kib();
  struct timespec tick = {0, 1000000};
  for (unsigned k = 0; k < batches; k++) {
    for (unsigned i = 0; i < PER_BATCH; i++) air__exporter_put(e, b.p, b.n);
    /* Bounded poll: a refused connection fails the batch at once. */
    uint64_t want = (uint64_t)(k + 1) * PER_BATCH;
    for (int i = 0; i < 5000 && atomic_load(dropped) < want; i++)
      nanosleep(&tick, NULL);
    assert_int_equal(atomic_load(dropped), want);
  }
  long after = tl_rss_kib();
  print_message("VmRSS %ld kB -> %ld kB over %u spans of %zu bytes\n", before,
                after, batches * PER_BATCH, b.n);
  /* Half the queue: the release build grows ~0.2 MiB here, ASan (its
   * quarantine keeps libcurl's freed blocks) ~1.4 MiB, the ring 4 MiB. */
  assert_true(after - before < (long)(AIR__MAX_TRACE_QUEUE_BYTES / 2 / 1024));
  air__exporter_stop(e);
  air__buf_cleanup(&b);
}

int main(void) {
  /* A fixed mmap threshold: each exporter's queue gets fresh pages, never
   * heap pages an earlier test's exporter touched and freed (glibc would
   * raise the threshold past a freed 4 MiB block and serve the next one
   * from the heap), so memory_follows_backlog_not_throughput measures its
   * own queue. (ASan's allocator ignores it and maps large blocks anew.) */
  (void)mallopt(M_MMAP_THRESHOLD, 128 << 10);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(attempt_span_fields),
      cmocka_unit_test(request_span_fields),
      cmocka_unit_test(request_envelope),
      cmocka_unit_test(dead_collector_drops),
      cmocka_unit_test(stalled_collector_and_full_queue),
      cmocka_unit_test(memory_follows_backlog_not_throughput),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  curl_global_cleanup();
  return rc;
}
