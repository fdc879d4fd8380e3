/*
 * The OTLP/HTTP JSON encoder (otlp.h): pure, one span at a time, so a
 * worker encodes its request's spans and the exporter thread only wraps
 * them in the request envelope.
 */
#include "otlp.h"

#include <string.h>

#define KIND_SERVER 2
#define KIND_CLIENT 3
#define STATUS_UNSET 0
#define STATUS_ERROR 2

typedef struct attrs {
  air__buf *b;
  bool first;
} attrs;

static void key(attrs *a, const char *k) {
  air__buf_puts(a->b, a->first ? "{\"key\":\"" : ",{\"key\":\"");
  a->first = false;
  air__buf_puts(a->b, k); /* keys are ours: plain ASCII */
  air__buf_puts(a->b, "\",\"value\":");
}

static void attr_str(attrs *a, const char *k, const char *v) {
  if (v == NULL) return;
  key(a, k);
  air__buf_puts(a->b, "{\"stringValue\":");
  air__buf_put_json_str(a->b, v, strlen(v));
  air__buf_puts(a->b, "}}");
}

/* intValue is an int64: a JSON string. */
static void attr_int(attrs *a, const char *k, int64_t v) {
  key(a, k);
  air__buf_puts(a->b, "{\"intValue\":\"");
  if (v < 0) {
    air__buf_putc(a->b, '-');
    air__buf_putu(a->b, (unsigned long long)(-(v + 1)) + 1u);
  } else {
    air__buf_putu(a->b, (unsigned long long)v);
  }
  air__buf_puts(a->b, "\"}}");
}

static void attr_str_array(attrs *a, const char *k, const char *v) {
  if (v == NULL) return;
  key(a, k);
  air__buf_puts(a->b, "{\"arrayValue\":{\"values\":[{\"stringValue\":");
  air__buf_put_json_str(a->b, v, strlen(v));
  air__buf_puts(a->b, "}]}}}");
}

static void put_nanos(air__buf *b, const char *name, uint64_t ns) {
  air__buf_puts(b, name);
  air__buf_puts(b, ":\"");
  air__buf_putu(b, (unsigned long long)ns);
  air__buf_putc(b, '"');
}

int air__otlp_span(const air_span *s, const char *request_id, air__buf *out) {
  if (air__buf_error(out) != 0) return air__buf_error(out);
  size_t was = out->n;
  air__buf *b = out;
  bool req = s->kind == AIR_SPAN_REQUEST;
  air__buf_puts(b, "{\"traceId\":\"");
  air__buf_puts(b, s->trace_id);
  air__buf_puts(b, "\",\"spanId\":\"");
  air__buf_puts(b, s->span_id);
  air__buf_putc(b, '"');
  if (s->parent_span_id[0] != '\0') {
    air__buf_puts(b, ",\"parentSpanId\":\"");
    air__buf_puts(b, s->parent_span_id);
    air__buf_putc(b, '"');
  }
  air__buf_puts(b, ",\"name\":");
  air__buf_put_json_str(b, s->name ? s->name : "",
                        s->name ? strlen(s->name) : 0);
  air__buf_puts(b, ",\"kind\":");
  air__buf_putu(b, req ? KIND_SERVER : KIND_CLIENT);
  air__buf_putc(b, ',');
  put_nanos(b, "\"startTimeUnixNano\"", s->start_unix_nano);
  air__buf_putc(b, ',');
  put_nanos(b, "\"endTimeUnixNano\"", s->end_unix_nano);
  air__buf_puts(b, ",\"attributes\":[");
  attrs a = {b, true};
  attr_str(&a, "gen_ai.operation.name", s->operation);
  attr_str(&a, "gen_ai.provider.name", s->provider);
  attr_str(&a, "gen_ai.request.model", s->request_model);
  attr_str(&a, "gen_ai.response.model", s->response_model);
  if (s->input_tokens >= 0)
    attr_int(&a, "gen_ai.usage.input_tokens", s->input_tokens);
  if (s->output_tokens >= 0)
    attr_int(&a, "gen_ai.usage.output_tokens", s->output_tokens);
  attr_str_array(&a, "gen_ai.response.finish_reasons", s->finish_reason);
  attr_str(&a, "error.type", s->error_type);
  if (req) {
    attr_str(&a, "airetry.route", s->route);
    attr_str(&a, "airetry.caller.dialect",
             s->dialect == AIR_DIALECT_ANTHROPIC ? "anthropic" : "openai");
    attr_str(&a, "airetry.outcome", s->outcome);
    attr_int(&a, "airetry.attempts", s->attempts);
    attr_str(&a, "airetry.target", s->target);
    attr_str(&a, "airetry.request_id", request_id);
  } else {
    attr_int(&a, "airetry.attempt", s->attempt);
    attr_str(&a, "airetry.role", air_span_role_name(s->role));
    attr_str(&a, "airetry.outcome", s->outcome); /* "hedge_lost" or none */
    attr_str(&a, "airetry.target", s->target);
    attr_str(&a, "airetry.provider", s->provider_name);
    attr_str(&a, "airetry.reason",
             s->reason != AIR_REASON_NONE ? air_reason_name(s->reason) : NULL);
    if (s->status > 0) attr_int(&a, "http.response.status_code", s->status);
    attr_int(&a, "airetry.wait_ms",
             s->wait_ms > INT64_MAX ? INT64_MAX : (int64_t)s->wait_ms);
    attr_str(&a, "airetry.upstream.request_id", s->upstream_request_id);
  }
  if (s->first_content_ms >= 0)
    attr_int(&a, "airetry.first_content_ms", s->first_content_ms);
  air__buf_puts(b, "],\"status\":{\"code\":");
  air__buf_putu(b, s->error ? STATUS_ERROR : STATUS_UNSET);
  if (s->error && s->message != NULL) {
    air__buf_puts(b, ",\"message\":");
    air__buf_put_json_str(b, s->message, strlen(s->message));
  }
  air__buf_puts(b, "}}");
  int rc = air__buf_error(b);
  if (rc != 0) {
    /* Drop the partial object; the error stays for the caller to see. */
    out->n = was;
    if (out->p) out->p[was] = '\0';
  }
  return rc;
}

int air__otlp_request(const char *service, const char *spans, size_t n,
                      air__buf *out) {
  air__buf *b = out;
  air__buf_puts(b,
                "{\"resourceSpans\":[{\"resource\":{\"attributes\":["
                "{\"key\":\"service.name\",\"value\":{\"stringValue\":");
  air__buf_put_json_str(b, service, strlen(service));
  air__buf_puts(b,
                "}},{\"key\":\"telemetry.sdk.name\",\"value\":{\"stringValue\":"
                "\"airetry\"}},{\"key\":\"telemetry.sdk.version\","
                "\"value\":{\"stringValue\":\"" AIR_VERSION
                "\"}}]},"
                "\"scopeSpans\":[{\"scope\":{\"name\":\"airetry\",\"version\":"
                "\"" AIR_VERSION "\"},\"spans\":[");
  /* The ring separates span objects with '\n': JSON wants ','. */
  size_t start = b->n;
  air__buf_put(b, spans, n);
  if (air__buf_error(b) == 0) {
    size_t end = b->n;
    while (end > start && b->p[end - 1] == '\n') end--;
    for (char *q = b->p + start;
         (q = memchr(q, '\n', (size_t)(b->p + end - q))) != NULL;)
      *q++ = ',';
    b->n = end;
    b->p[end] = '\0';
  }
  air__buf_puts(b, "]}]}]}");
  return air__buf_error(b);
}
