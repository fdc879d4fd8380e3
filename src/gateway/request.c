/*
 * One caller request through the gateway (docs/design.md §5): endpoint
 * dispatch, client auth, request validation, the exchange, and the answer in
 * the caller's dialect — streamed from commit on (raw upstream events when the
 * dialects match, re-encoded parts when they differ), or whole.
 *
 * Lifetime: a gw_req lives from the handler call until the exchange's
 * on_end has finished the HTTP request (never inside air__exchange_start:
 * the exchange delivers even a failure at once on a later loop turn).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <strings.h>

#include "gw_int.h"
#include "limits.h"
#include "responder.h"
#include "spans.h"

#define HIGH_WATER (256u << 10) /* queued response bytes before pausing */
#define MAX_FORWARD 32
#define LOG_STACK_BYTES 2048 /* the log line is built on the stack first */

typedef struct gw_req {
  air__gw_worker *w;
  air__gw_cfg *cfg;
  air__http_req *req;
  air_dialect dialect;
  air__request areq;
  air__exchange *x;
  air__responder rs; /* the response's head and bytes (responder.h); its
                        out is written at flush, its gone is ours */
  bool stream;
  bool ended;    /* on_end ran */
  bool finished; /* the HTTP request was finished */
  bool pending;  /* on w->pending: out is written at the end of the turn */
  bool traced;   /* tracing is on: trace holds the request's trace */
  struct gw_req *pend_prev, *pend_next;
  uint64_t start_ms;
  uint64_t bytes;
  unsigned attempts;
  char rid[40];
  int inflight;           /* air__gw_inflight_begin's handle */
  const char *const *fwd; /* forwarded header lines (inside fwd_buf) */
  air__buf fwd_buf;
  air__trace trace;
  air__trace_answer *ans; /* what the released answer said: sampled
                            requests only, so an unsampled one allocates
                            nothing for it (else NULL) */
} gw_req;

static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A response header; a NULL value is sent empty, never dereferenced. */
static air__http_field field(const char *name, const char *value) {
  if (value == NULL) value = "";
  air__http_field f = {name, strlen(name), value, strlen(value)};
  return f;
}

static const air__http_field json_ct = {"content-type", 12, "application/json",
                                        16};

/* ---- simple answers ------------------------------------------------------ */

/* "YYYY-MM-DDThh:mm:ss.mmmZ" of now into t (at least 25 bytes); the date
 * and time of day are formatted once per second per thread. */
void air__gw_utc_now(char *t, size_t n) {
  static _Thread_local time_t sec = -1;
  static _Thread_local char head[64]; /* "YYYY-MM-DDThh:mm:ss" */
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (ts.tv_sec != sec) {
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(head, sizeof(head), "%04d-%02d-%02dT%02d:%02d:%02d",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec);
    sec = ts.tv_sec;
  }
  long ms = ts.tv_nsec / 1000000;
  if (n < 25) {
    if (n > 0) t[0] = '\0';
    return;
  }
  memcpy(t, head, 19);
  t[19] = '.';
  t[20] = (char)('0' + ms / 100);
  t[21] = (char)('0' + ms / 10 % 10);
  t[22] = (char)('0' + ms % 10);
  t[23] = 'Z';
  t[24] = '\0';
}

/* The log line of a request the gateway answered itself (docs/design.md §5: one
 * line per request, rejected ones included). */
static void log_rejected(const air__http_request *msg, air_dialect dialect,
                         int status, air_reason reason, const char *message,
                         const char *rid) {
  air__buf b;
  air__buf_init(&b, AIR__MAX_LOG_LINE_BYTES);
  char t[64];
  air__gw_utc_now(t, sizeof(t));
  air__buf_puts(&b, "{\"time\":\"");
  air__buf_puts(&b, t);
  air__buf_puts(&b, "\",\"request_id\":");
  air__buf_put_json_str(&b, rid ? rid : "", rid ? strlen(rid) : 0);
  air__buf_puts(&b, ",\"path\":");
  air__buf_put_json_str(&b, msg->path.p, msg->path.n < 256 ? msg->path.n : 256);
  air__buf_puts(&b, ",\"api\":\"");
  air__buf_puts(&b, air__dialect_get(dialect)->name);
  air__buf_putc(&b, '"');
  air__buf_puts(&b, ",\"attempts\":[],\"outcome\":\"rejected\",\"status\":");
  air__buf_putu(&b, (unsigned long long)status);
  air__buf_puts(&b, ",\"reason\":\"");
  air__buf_puts(&b, air_reason_name(reason));
  air__buf_puts(&b, "\",\"message\":");
  air__buf_put_json_str(&b, message, strlen(message));
  air__buf_puts(&b, "}\n");
  if (air__buf_error(&b) == 0) air__gw_log(b.p, b.n);
  air__buf_cleanup(&b);
}

/* An error in the caller's dialect, before any exchange. */
void air__gw_respond_error(air__http_req *req, air_dialect dialect, int status,
                           air_reason reason, const char *message,
                           const char *rid) {
  log_rejected(air__http_req_msg(req), dialect, status, reason, message, rid);
  air__buf body;
  air__buf_init(&body, AIR__MAX_ERROR_BODY_BYTES);
  air__dialect_get(dialect)->encode_error_body(status, reason, message, NULL, 0,
                                               &body);
  /* Anthropic callers also get request-id (docs/design.md §5). */
  air__http_field f[4] = {json_ct, field("x-should-retry", "false"),
                          field("x-request-id", rid ? rid : ""),
                          field("request-id", rid ? rid : "")};
  size_t nf = rid == NULL ? 2 : dialect == AIR_DIALECT_ANTHROPIC ? 4 : 3;
  air__http_respond(req, status, f, nf, body.p, body.n);
  air__buf_cleanup(&body);
}

/* 405 with the Allow header RFC 9110 asks for. */
static void method_not_allowed(air__http_req *req, air_dialect dialect,
                               const char *allow, const char *rid) {
  air__buf body;
  air__buf_init(&body, AIR__MAX_ERROR_BODY_BYTES);
  char m[64];
  snprintf(m, sizeof(m), "method not allowed: use %s", allow);
  log_rejected(air__http_req_msg(req), dialect, 405, AIR_REASON_BAD_REQUEST, m,
               rid);
  air__dialect_get(dialect)->encode_error_body(405, AIR_REASON_BAD_REQUEST, m,
                                               NULL, 0, &body);
  air__http_field f[5] = {json_ct, field("allow", allow),
                          field("x-should-retry", "false"),
                          field("x-request-id", rid), field("request-id", rid)};
  air__http_respond(req, 405, f, dialect == AIR_DIALECT_ANTHROPIC ? 5 : 4,
                    body.p, body.n);
  air__buf_cleanup(&body);
}

static void respond_text(air__http_req *req, int status, const char *ct,
                         const char *body, size_t n) {
  air__http_field f[1] = {field("content-type", ct)};
  air__http_respond(req, status, f, 1, body, n);
}

/* Constant-time comparison of a presented key with every accepted key. */
static bool key_ok(const air__gw_cfg *c, const char *k, size_t n) {
  bool ok = false;
  for (size_t i = 0; i < c->n_keys; i++) {
    const char *want = c->keys[i];
    size_t wn = strlen(want);
    unsigned char diff = (unsigned char)(wn != n);
    for (size_t j = 0; j < wn; j++)
      diff |= (unsigned char)(want[j] ^ (j < n ? k[j] : 0));
    ok |= diff == 0;
  }
  return ok;
}

static bool authorized(const air__gw_cfg *c, const air__http_request *msg) {
  if (!c->auth) return true;
  if (c->n_keys == 0) return false;
  const air__str *h = air__http_find_header(msg, "authorization");
  if (h != NULL && h->n > 7 && strncasecmp(h->p, "Bearer ", 7) == 0)
    return key_ok(c, h->p + 7, h->n - 7);
  h = air__http_find_header(msg, "x-api-key");
  return h != NULL && key_ok(c, h->p, h->n);
}

/* The route list in the caller's dialect (docs/design.md §5): Anthropic's shape
 * (one page: has_more false, first_id and last_id) when the request carries
 * anthropic-version, OpenAI's list otherwise. */
static void models_list(air__http_req *req, const air__http_request *msg,
                        const air_config *cfg) {
  bool anth = air__http_find_header(msg, "anthropic-version") != NULL;
  air__buf b;
  air__buf_init(&b, AIR__MAX_MODELS_LIST_BYTES);
  air__buf_puts(&b, anth ? "{\"data\":[" : "{\"object\":\"list\",\"data\":[");
  for (size_t i = 0; i < cfg->n_routes; i++) {
    const char *name = cfg->routes[i].name;
    if (i) air__buf_putc(&b, ',');
    if (anth) {
      air__buf_puts(&b, "{\"type\":\"model\",\"id\":");
      air__buf_put_json_str(&b, name, strlen(name));
      air__buf_puts(&b, ",\"display_name\":");
      air__buf_put_json_str(&b, name, strlen(name));
      air__buf_puts(&b, ",\"created_at\":\"1970-01-01T00:00:00Z\"}");
    } else {
      air__buf_puts(&b, "{\"id\":");
      air__buf_put_json_str(&b, name, strlen(name));
      air__buf_puts(
          &b, ",\"object\":\"model\",\"created\":0,\"owned_by\":\"airetry\"}");
    }
  }
  air__buf_putc(&b, ']');
  if (anth) {
    air__buf_puts(&b, ",\"has_more\":false,\"first_id\":");
    if (cfg->n_routes == 0) {
      air__buf_puts(&b, "null,\"last_id\":null");
    } else {
      const char *f = cfg->routes[0].name,
                 *l = cfg->routes[cfg->n_routes - 1].name;
      air__buf_put_json_str(&b, f, strlen(f));
      air__buf_puts(&b, ",\"last_id\":");
      air__buf_put_json_str(&b, l, strlen(l));
    }
  }
  air__buf_putc(&b, '}');
  air_dialect dialect = anth ? AIR_DIALECT_ANTHROPIC : AIR_DIALECT_OPENAI;
  if (air__buf_error(&b) != 0) {
    air__buf_cleanup(&b);
    air__gw_respond_error(req, dialect, 503, AIR_REASON_OVERLOADED,
                          "the model list is over the gateway's limits", NULL);
    return;
  }
  air__http_field f[1] = {json_ct};
  air__http_respond(req, 200, f, 1, b.p, b.n);
  air__buf_cleanup(&b);
}

static void metrics(air__gw_worker *w, air__http_req *req) {
  air__buf b;
  air__buf_init(&b, AIR__MAX_METRICS_BYTES);
  if (air__metrics_render(w->g->metrics, w->g->state, mono_ms(), &b) != 0) {
    air__buf_cleanup(&b);
    respond_text(req, 503, "text/plain", "metrics over the limits\n", 24);
    return;
  }
  respond_text(req, 200, "text/plain; version=0.0.4", b.p ? b.p : "", b.n);
  air__buf_cleanup(&b);
}

/* ---- the log line -------------------------------------------------------- */

static void log_line(gw_req *r, const air__exchange_result *res, int status,
                     const char *outcome) {
  char mem[LOG_STACK_BYTES]; /* a line of one or two attempts fits */
  air__buf b;
  air__buf_init_on(&b, AIR__MAX_LOG_LINE_BYTES, mem, sizeof(mem));
  char t[64];
  air__gw_utc_now(t, sizeof(t));
  air__buf_puts(&b, "{\"time\":\"");
  air__buf_puts(&b, t);
  air__buf_puts(&b, "\",\"request_id\":\"");
  air__buf_puts(&b, r->rid);
  air__buf_puts(&b, "\",\"route\":");
  const char *model = r->areq.model ? r->areq.model : "";
  air__buf_put_json_str(&b, model, strlen(model));
  air__buf_puts(&b, ",\"api\":\"");
  air__buf_puts(&b, air__dialect_get(r->dialect)->name);
  air__buf_putc(&b, '"');
  air__buf_puts(&b, r->stream ? ",\"stream\":true" : ",\"stream\":false");
  air__buf_puts(&b, ",\"attempts\":[");
  for (size_t i = 0; i < res->n_log; i++) {
    const air_attempt *a = &res->log[i];
    if (i) air__buf_putc(&b, ',');
    air__buf_puts(&b, "{\"target\":");
    air__buf_put_json_str(&b, a->target, strlen(a->target));
    if (a->skipped) {
      air__buf_puts(&b, ",\"outcome\":\"skipped\",\"field\":");
      air__buf_put_json_str(&b, a->field ? a->field : "",
                            a->field ? strlen(a->field) : 0);
      air__buf_putc(&b, '}');
      continue;
    }
    /* A hedge racer is marked; one that lost has outcome hedge_lost and
     * no reason (docs/design.md §2.1, 3.6). */
    if (a->hedge) air__buf_puts(&b, ",\"hedge\":true");
    /* A continuation (docs/design.md §3.5); one whose prefill was rejected was
     * asked again with instruct and counts toward no budget. */
    if (a->continuation) air__buf_puts(&b, ",\"continuation\":true");
    if (a->prefill_rejected) air__buf_puts(&b, ",\"prefill_rejected\":true");
    if (a->hedge_lost) {
      air__buf_puts(&b, ",\"outcome\":\"hedge_lost\"");
    } else {
      air__buf_puts(&b, ",\"reason\":\"");
      air__buf_puts(&b, a->reason ? air_reason_name(a->reason) : "ok");
      air__buf_putc(&b, '"');
    }
    air__buf_puts(&b, ",\"status\":");
    air__buf_putu(&b, (unsigned long long)a->status);
    air__buf_puts(&b, ",\"ms\":");
    air__buf_putu(&b, a->ms);
    if (a->wait_ms) {
      air__buf_puts(&b, ",\"wait_ms\":");
      air__buf_putu(&b, a->wait_ms);
    }
    air__buf_putc(&b, '}');
  }
  air__buf_puts(&b, "],\"outcome\":\"");
  air__buf_puts(&b, outcome);
  air__buf_puts(&b, "\",\"status\":");
  air__buf_putu(&b, (unsigned long long)status);
  air__buf_puts(&b, ",\"first_content_ms\":");
  air__buf_putu(&b, res->first_content_ms);
  air__buf_puts(&b, ",\"total_ms\":");
  air__buf_putu(&b, res->total_ms);
  air__buf_puts(&b, ",\"bytes\":");
  air__buf_putu(&b, r->bytes);
  air__buf_puts(&b, ",\"malformed\":");
  air__buf_putu(&b, res->malformed);
  if (res->n_continued > 0) {
    /* Where each continuation joined the answer (docs/design.md §3.5). */
    air__buf_puts(&b, ",\"continued\":[");
    for (size_t i = 0; i < res->n_continued; i++) {
      const air__continued *c = &res->continued[i];
      air__buf_puts(&b, i ? ",{\"target\":" : "{\"target\":");
      air__buf_put_json_str(&b, c->target, strlen(c->target));
      air__buf_puts(&b, ",\"attempt\":");
      air__buf_putu(&b, c->attempt);
      air__buf_puts(&b, ",\"at_char\":");
      air__buf_putu(&b, c->at_char);
      air__buf_putc(&b, '}');
    }
    air__buf_putc(&b, ']');
  }
  if (r->rs.dropped != NULL) {
    air__buf_puts(&b, ",\"dropped\":");
    air__buf_put_json_str(&b, r->rs.dropped, strlen(r->rs.dropped));
  }
  if (r->rs.replaced != 0) {
    /* Upstream identifiers over their limit, replaced (dialect.h). */
    air__buf_puts(&b, ",\"replaced\":\"");
    air__buf_puts(&b, air__ident_names(r->rs.replaced));
    air__buf_putc(&b, '"');
  }
  air__buf_puts(&b, "}\n");
  if (air__buf_error(&b) != 0) {
    /* Over the line's limit (a huge attempt log): the line without it. */
    air__buf_reset(&b);
    air__buf_puts(&b, "{\"time\":\"");
    air__buf_puts(&b, t);
    air__buf_puts(&b, "\",\"request_id\":\"");
    air__buf_puts(&b, r->rid);
    air__buf_puts(&b, "\",\"attempts_omitted\":");
    air__buf_putu(&b, res->n_log);
    air__buf_puts(&b, ",\"outcome\":\"");
    air__buf_puts(&b, outcome);
    air__buf_puts(&b, "\",\"status\":");
    air__buf_putu(&b, (unsigned long long)status);
    air__buf_puts(&b, "}\n");
  }
  if (air__buf_error(&b) == 0) air__gw_log(b.p, b.n);
  air__buf_cleanup(&b);
}

/* ---- the exchange's callbacks -------------------------------------------- */

static void on_drain(void *data, air__http_req *req) {
  gw_req *r = data;
  (void)req;
  air__http_req_on_drain(r->req, NULL, NULL);
  if (r->x != NULL && !r->ended) air__exchange_resume(r->x);
}

/* Writes the responder's bytes to the client; 1 when the upstream should pause.
 */
static int flush_out(gw_req *r) {
  if (r->rs.out.n == 0 || r->rs.gone) return 0;
  int rc = air__http_write(r->req, r->rs.out.p, r->rs.out.n);
  r->bytes += r->rs.out.n;
  air__buf_reset(&r->rs.out);
  if (rc == AIR_ECANCELED || rc == AIR_ETOOBIG) {
    r->rs.gone = true;
    air__exchange_cancel(r->x);
    return 0;
  }
  if (air__http_req_queued(r->req) > HIGH_WATER) {
    air__http_req_on_drain(r->req, on_drain, r);
    return 1;
  }
  return 0;
}

/* The responder's head fields as the HTTP layer's. */
static size_t head_fields(const air__responder *rs, air__http_field *f) {
  for (size_t i = 0; i < rs->n_head; i++)
    f[i] = field(rs->head[i].name, rs->head[i].value);
  return rs->n_head;
}

static void on_commit(void *data, const air__commit_info *ci) {
  gw_req *r = data;
  r->attempts = ci->attempts;
  if (air__responder_commit(&r->rs, ci, (uint64_t)time(NULL)) == 0) {
    /* No memory for the stream's encoder: the caller gets an error, whole
     * (air__responder_end); the upstream need not go on. */
    if (r->rs.lost) air__exchange_cancel(r->x);
    return;
  }
  air__http_field f[AIR__RESP_MAX_HEADERS];
  size_t n = head_fields(&r->rs, f);
  /* The head leaves with the first events (on_flush follows at once). */
  if (air__http_begin_lazy(r->req, r->rs.status, f, n) != 0) {
    r->rs.gone = true;
    air__exchange_cancel(r->x);
  }
}

static int on_event(void *data, const air__gate_event *ev) {
  gw_req *r = data;
  if (r->ans != NULL)
    for (size_t i = 0; i < ev->n_parts; i++)
      air__trace_answer_part(r->ans, &ev->parts[i]);
  /* Written at on_flush: one write per upstream read, not per event. */
  if (air__responder_event(&r->rs, ev) == 1 && r->x != NULL && !r->ended)
    air__exchange_cancel(r->x);
  return 0;
}

static int on_flush(void *data);

/* The seam of a continuation (docs/design.md §3.5): the responder's encoder
 * takes the stream over. */
static void on_continue(void *data, const air__continue_info *ci) {
  gw_req *r = data;
  if (air__responder_continue(&r->rs, ci) == 1 && r->x != NULL && !r->ended)
    air__exchange_cancel(r->x);
}

/* A rescue runs: a keep-alive goes out with the turn's writes. */
static void on_keepalive(void *data) {
  gw_req *r = data;
  air__responder_keepalive(&r->rs);
  if (r->rs.lost) {
    if (r->x != NULL && !r->ended) air__exchange_cancel(r->x);
    return;
  }
  /* Over the high-water mark nothing is paused: no upstream sends now. */
  (void)on_flush(r);
}

static void unpend(gw_req *r) {
  if (!r->pending) return;
  if (r->pend_prev)
    r->pend_prev->pend_next = r->pend_next;
  else
    r->w->pending = r->pend_next;
  if (r->pend_next) r->pend_next->pend_prev = r->pend_prev;
  r->pending = false;
  r->pend_prev = r->pend_next = NULL;
}

/*
 * The events of an upstream read are written when the loop turn ends
 * (air__gw_flush, before the loop waits), so the events of every read of one
 * turn, and the end when it comes in the same turn, reach the client in one
 * write. A backlog near HIGH_WATER is written at once (and may pause the
 * upstream).
 */
static int on_flush(void *data) {
  gw_req *r = data;
  if (!r->stream || !r->rs.began || r->rs.gone || r->rs.out.n == 0) return 0;
  if (air__http_req_queued(r->req) + r->rs.out.n > HIGH_WATER / 2) {
    unpend(r);
    return flush_out(r);
  }
  if (!r->pending) {
    r->pending = true;
    r->pend_prev = NULL;
    r->pend_next = r->w->pending;
    if (r->w->pending) r->w->pending->pend_prev = r;
    r->w->pending = r;
  }
  return 0;
}

void air__gw_flush(air__gw_worker *w) {
  while (w->pending != NULL) {
    gw_req *r = w->pending;
    unpend(r); /* before the write: a failed one may end and free r */
    flush_out(r);
  }
}

static void finish_request(gw_req *r);

typedef struct span_out {
  air__exporter *e;
  const char *rid;
  air__buf b;
} span_out;

static void export_span(void *data, const air_span *s) {
  span_out *o = data;
  air__buf_reset(&o->b);
  if (air__otlp_span(s, s->kind == AIR_SPAN_REQUEST ? o->rid : NULL, &o->b) ==
      0)
    air__exporter_put(o->e, o->b.p, o->b.n);
  else
    air__exporter_put(o->e, NULL, 0); /* over the span limit: counted dropped */
}

/* The request's spans to the exporter (docs/design.md §5, Traces). */
static void export_spans(gw_req *r, const air__exchange_result *res,
                         const char *outcome) {
  if (!r->traced || !r->trace.sampled || r->ans == NULL ||
      r->w->g->traces == NULL)
    return;
  air__trace_end e = {
      .cfg = r->cfg->cfg,
      .route = r->areq.model ? r->areq.model : "",
      .dialect = r->dialect,
      .outcome = outcome,
      .end_unix_nano = air__unix_nano(),
  };
  span_out o = {r->w->g->traces, r->rid, {0}};
  air__buf_init(&o.b, AIR__MAX_SPAN_BYTES);
  air__trace_spans(&r->trace, &e, res, r->ans, export_span, &o);
  air__buf_cleanup(&o.b);
}

/* airetry_continuations_total: each continuation attempt's outcome. */
static void count_continuations(gw_req *r, const air__exchange_result *res) {
  for (size_t i = 0; i < res->n_log; i++) {
    const air_attempt *a = &res->log[i];
    if (!a->continuation || a->skipped) continue;
    bool joined = false;
    for (size_t k = 0; k < res->n_continued && !joined; k++)
      joined = res->continued[k].attempt == a->n;
    air__metrics_continuation(r->w->g->metrics, r->cfg->cfg,
                              r->areq.model ? r->areq.model : "", a->target,
                              a->prefill_rejected ? "prefill_rejected"
                              : joined            ? "joined"
                                                  : "failed");
  }
}

static void on_end(void *data, const air__exchange_result *res) {
  gw_req *r = data;
  r->ended = true;
  air__responder *rs = &r->rs;
  air__responder_end(rs, res, (uint64_t)time(NULL));
  int status = rs->status;
  const char *outcome = rs->outcome;
  if (rs->end == AIR__RESP_ABORT) {
    if (!r->finished) air__http_abort(r->req);
  } else if (rs->end == AIR__RESP_STREAM_END) {
    r->bytes += rs->out.n;
    air__http_end_with(r->req, rs->out.p, rs->out.n);
  } else {
    air__http_field f[AIR__RESP_MAX_HEADERS];
    size_t n = head_fields(rs, f);
    r->bytes += rs->out.n;
    air__http_respond(r->req, rs->status, f, n, rs->out.p ? rs->out.p : "",
                      rs->out.n);
  }
  air__buf_reset(&rs->out);
  r->finished = true;
  uint64_t self = res->total_ms > res->upstream_wait_ms
                      ? res->total_ms - res->upstream_wait_ms
                      : 0;
  air__metrics_request(r->w->g->metrics, r->cfg->cfg,
                       r->areq.model ? r->areq.model : "", outcome, res->log,
                       res->n_log, res->first_content_ms, res->total_ms, self,
                       res->malformed);
  count_continuations(r, res);
  log_line(r, res, status, outcome);
  export_spans(r, res, outcome);
  air__exchange_free(r->x);
  r->x = NULL;
  finish_request(r);
}

static void on_disconnect(void *data, air__http_req *req) {
  gw_req *r = data;
  (void)req;
  r->rs.gone = true;
  if (r->x != NULL && !r->ended) air__exchange_cancel(r->x);
}

static void finish_request(gw_req *r) {
  air__gw_inflight_end(r->w, r->inflight);
  unpend(r);
  air__responder_cleanup(&r->rs);
  air__request_cleanup(&r->areq);
  air__buf_cleanup(&r->fwd_buf);
  air__gw_cfg_release(r->cfg);
  free(r->ans);
  air__pool_put(&r->w->reqs, r, sizeof(*r));
}

/* ---- the handler --------------------------------------------------------- */

static void make_rid(air__gw_worker *w, const air__http_request *msg, char *out,
                     size_t n) {
  const air__str *h = air__http_find_header(msg, "x-request-id");
  if (h != NULL && h->n > 0 && h->n < 40) {
    bool ok = true;
    for (size_t i = 0; i < h->n && ok; i++) {
      char c = h->p[i];
      ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '-' || c == '_';
    }
    if (ok) {
      memcpy(out, h->p, h->n);
      out[h->n] = '\0';
      return;
    }
  }
  uint64_t v = w->seed + 0x9e3779b97f4a7c15ull * ++w->seq;
  v ^= v >> 29;
  snprintf(out, n, "req_%016llx", (unsigned long long)v);
}

/* The caller headers named in forward_headers, as "name: value" lines,
 * then the NULL-terminated array of them (8-aligned), all in fwd_buf. */
static void collect_forward(gw_req *r, const air__http_request *msg) {
  const air_config *cfg = r->cfg->cfg;
  size_t n = 0;
  uintptr_t offs[MAX_FORWARD + 1];
  for (size_t i = 0; i < cfg->n_forward_headers && n < MAX_FORWARD; i++) {
    const air__str *h = air__http_find_header(msg, cfg->forward_headers[i]);
    if (h == NULL) continue;
    size_t at = r->fwd_buf.n;
    int rc = air__buf_adds(&r->fwd_buf, cfg->forward_headers[i]);
    if (rc == 0) rc = air__buf_adds(&r->fwd_buf, ": ");
    if (rc == 0) rc = air__buf_add(&r->fwd_buf, h->p, h->n);
    if (rc == 0) rc = air__buf_addc(&r->fwd_buf, '\0');
    if (rc != 0) break;
    offs[n++] = at;
  }
  r->fwd = NULL;
  if (n == 0) return;
  size_t at;
  offs[n] = 0;
  if (air__buf_add_aligned(&r->fwd_buf, offs, (n + 1) * sizeof(offs[0]), &at) !=
      0)
    return;
  const char **lines = (const char **)(void *)(r->fwd_buf.p + at);
  for (size_t i = 0; i < n; i++) lines[i] = r->fwd_buf.p + offs[i];
  lines[n] = NULL;
  r->fwd = lines;
}

static void chat(air__gw_worker *w, air__http_req *req,
                 const air__http_request *msg, air_dialect dialect,
                 air__gw_cfg *cfg, const char *rid) {
  gw_req *r = air__pool_take(&w->reqs, sizeof(*r));
  if (r == NULL) {
    air__gw_cfg_release(cfg);
    air__gw_respond_error(req, dialect, 503, AIR_REASON_OVERLOADED,
                          "out of memory", NULL);
    return;
  }
  r->w = w;
  r->cfg = cfg;
  r->req = req;
  r->dialect = dialect;
  r->start_ms = mono_ms();
  snprintf(r->rid, sizeof(r->rid), "%s", rid);
  r->inflight = air__gw_inflight_begin(w, r->rid);
  air__responder_init(&r->rs, dialect, &r->areq, r->rid);
  air__buf_init(&r->fwd_buf, AIR__MAX_FORWARD_BYTES);
  air_error err;
  memset(&err, 0, sizeof(err));
  if (air__request_parse(dialect, msg->body.p ? msg->body.p : "", msg->body.n,
                         &r->areq, &err) != 0) {
    air__gw_respond_error(req, dialect, 400, AIR_REASON_BAD_REQUEST,
                          err.message, r->rid);
    finish_request(r);
    return;
  }
  r->stream = r->areq.stream;
  r->rs.stream = r->stream;
  collect_forward(r, msg);
  air__exchange_opts o = {
      .cfg = cfg->cfg,
      .state = w->g->state,
      .req = &r->areq,
      .model = r->areq.model,
      .forward = (const char *const *)r->fwd,
      .pools = &w->pools,
  };
  air__exporter *traces = w->g->traces;
  if (traces != NULL) {
    /* An incoming traceparent is continued when valid (a new trace when
     * not); a system without randomness leaves the request untraced. */
    const air__str *tp = air__http_find_header(msg, "traceparent");
    r->traced = air__trace_begin(&r->trace, tp ? tp->p : NULL, tp ? tp->n : 0,
                                 air__exporter_sampler(traces)) == 0;
    if (r->traced && r->trace.sampled) {
      r->ans = malloc(sizeof(*r->ans));
      if (r->ans == NULL)
        r->traced = false; /* out of memory: the request goes untraced */
      else
        air__trace_answer_init(r->ans);
    }
    if (r->traced) o.trace = &r->trace;
  }
  air__exchange_cb cb = {.on_commit = on_commit,
                         .on_event = on_event,
                         .on_flush = on_flush,
                         .on_end = on_end,
                         .data = r,
                         .on_continue = on_continue,
                         .on_keepalive = on_keepalive};
  air__http_req_on_disconnect(req, on_disconnect, r);
  int rc = air__exchange_start(&w->loop, w->t, &o, &cb, &r->x);
  if (rc == AIR_ENOTFOUND) {
    char m[320];
    snprintf(m, sizeof(m), "model '%.200s' is not a route or provider/model",
             r->areq.model);
    air__gw_respond_error(req, dialect, 404, AIR_REASON_NOT_FOUND, m, r->rid);
    finish_request(r);
  } else if (rc != 0) {
    air__gw_respond_error(req, dialect, 503, AIR_REASON_OVERLOADED,
                          air_strerror(rc), r->rid);
    finish_request(r);
  }
}

#define AUTH_MESSAGE \
  "invalid or missing API key (Authorization: Bearer, x-api-key)"

static bool is_healthz(air__str p) {
  return p.n == 8 && memcmp(p.p, "/healthz", 8) == 0;
}

/* The dialect of an endpoint's error answers. */
static air_dialect path_dialect(air__str p) {
  bool is_msgs =
      (p.n == 12 && memcmp(p.p, "/v1/messages", 12) == 0) ||
      (p.n == 25 && memcmp(p.p, "/v1/messages/count_tokens", 25) == 0);
  bool is_rsp = p.n >= 13 && memcmp(p.p, "/v1/responses", 13) == 0 &&
                (p.n == 13 || p.p[13] == '/');
  return is_msgs  ? AIR_DIALECT_ANTHROPIC
         : is_rsp ? AIR_DIALECT_OPENAI_RESPONSES
                  : AIR_DIALECT_OPENAI;
}

/* The methods of an endpoint that takes no request body ("" for a path
 * that is no endpoint), or NULL for one that takes a body. */
static const char *bodiless_allow(air__str p) {
  if (is_healthz(p) || (p.n == 10 && memcmp(p.p, "/v1/models", 10) == 0) ||
      (p.n == 8 && memcmp(p.p, "/metrics", 8) == 0))
    return "GET, HEAD";
  if (p.n > 14 && memcmp(p.p, "/v1/responses/", 14) == 0) return "GET";
  if ((p.n == 20 && memcmp(p.p, "/v1/chat/completions", 20) == 0) ||
      (p.n == 12 && memcmp(p.p, "/v1/messages", 12) == 0) ||
      (p.n == 13 && memcmp(p.p, "/v1/responses", 13) == 0) ||
      (p.n == 14 && memcmp(p.p, "/v1/embeddings", 14) == 0) ||
      (p.n == 25 && memcmp(p.p, "/v1/messages/count_tokens", 25) == 0))
    return NULL;
  return "";
}

/* Answers the request from the head hook (connection: close, its body
 * never read), in the endpoint's dialect, with its log line. allow: the
 * Allow header of a 405, else NULL. */
static void head_refuse(air__gw_worker *w, air__http_head *h,
                        const air__http_request *msg, int status,
                        air_reason reason, const char *message,
                        const char *allow) {
  air_dialect dialect = path_dialect(msg->path);
  char rid[40];
  make_rid(w, msg, rid, sizeof(rid));
  log_rejected(msg, dialect, status, reason, message, rid);
  air__buf body;
  air__buf_init(&body, AIR__MAX_ERROR_BODY_BYTES);
  air__dialect_get(dialect)->encode_error_body(status, reason, message, NULL, 0,
                                               &body);
  air__http_field f[5] = {json_ct, field("x-should-retry", "false"),
                          field("x-request-id", rid), field("request-id", rid),
                          field("allow", allow)};
  size_t n = dialect == AIR_DIALECT_ANTHROPIC ? 4 : 3;
  if (allow != NULL) f[n++] = f[4];
  air__http_head_reject(h, status, f, n, body.p ? body.p : "", body.n);
  air__buf_cleanup(&body);
}

/* The error-body hook of every worker's server (docs/design.md §8: a
 * limit's error in the caller's dialect). A target under /v1/messages,
 * the Anthropic endpoints, gets Anthropic's error shape; so does one that
 * only begins so (a query, a longer path, a head cut short), since the
 * server may answer before the target is whole. Any other target gets the
 * server's own shape, OpenAI's. */
bool air__gw_error_body(void *data, air__str target, int status,
                        const char *message, air__buf *out) {
  (void)data;
  if (target.n < 12 || memcmp(target.p, "/v1/messages", 12) != 0) return false;
  const char *type = status == 413   ? "request_too_large"
                     : status == 503 ? "overloaded_error"
                     : status >= 500 ? "api_error"
                                     : "invalid_request_error";
  air__buf_puts(out, "{\"type\":\"error\",\"error\":{\"type\":\"");
  air__buf_puts(out, type);
  air__buf_puts(out, "\",\"message\":");
  air__buf_put_json_str(out, message, strlen(message));
  air__buf_puts(out, "}}");
  return true;
}

/* A request with a body to an endpoint that takes none: refused before its
 * body is read or counted against max_inflight_body_bytes (404 for no
 * endpoint, 405 for a method it does not take, else 400). */
static void refuse_body(air__gw_worker *w, air__http_head *h,
                        const air__http_request *msg, const char *allow) {
  if (*allow == '\0') {
    head_refuse(w, h, msg, 404, AIR_REASON_NOT_FOUND, "no such endpoint", NULL);
    return;
  }
  bool get = air__http_str_eq(msg->method, "GET");
  bool head = air__http_str_eq(msg->method, "HEAD");
  if (get || (head && strchr(allow, 'H') != NULL)) {
    head_refuse(w, h, msg, 400, AIR_REASON_BAD_REQUEST,
                "this endpoint takes no request body", NULL);
    return;
  }
  char m[64];
  snprintf(m, sizeof(m), "method not allowed: use %s", allow);
  head_refuse(w, h, msg, 405, AIR_REASON_BAD_REQUEST, m, allow);
}

/*
 * The head hook (docs/design.md §5 "Auth before body"): the client key is
 * checked when the head arrives; an unauthorised caller gets 401 in the
 * endpoint's dialect with `connection: close`, before any body byte is read and
 * instead of `100 Continue`. A body sent to an endpoint that takes none
 * (/healthz needs no key) is refused here too, so no caller holds the body
 * budget with a body nothing reads. air__gw_handle checks the key again (a
 * SIGHUP may have changed the keys while the body was read).
 */
void air__gw_head(void *data, air__http_head *h, const air__http_request *msg) {
  air__gw_worker *w = data;
  bool has_body = msg->chunked || msg->content_length > 0;
  if (!is_healthz(msg->path)) {
    air__gw_cfg *cfg = air__gw_cfg_get(w->g);
    bool ok = authorized(cfg, msg);
    air__gw_cfg_release(cfg);
    if (!ok) {
      head_refuse(w, h, msg, 401, AIR_REASON_AUTH, AUTH_MESSAGE, NULL);
      return;
    }
  }
  const char *allow = has_body ? bodiless_allow(msg->path) : NULL;
  if (allow != NULL) refuse_body(w, h, msg, allow);
}

void air__gw_handle(void *data, air__http_req *req,
                    const air__http_request *msg) {
  air__gw_worker *w = data;
  air__gw_cfg *cfg = air__gw_cfg_get(w->g);
  bool post = air__http_str_eq(msg->method, "POST");
  bool get = air__http_str_eq(msg->method, "GET") ||
             air__http_str_eq(msg->method, "HEAD");
  air__str p = msg->path;
  bool is_chat = p.n == 20 && memcmp(p.p, "/v1/chat/completions", 20) == 0;
  bool is_msgs = p.n == 12 && memcmp(p.p, "/v1/messages", 12) == 0;
  bool is_emb = p.n == 14 && memcmp(p.p, "/v1/embeddings", 14) == 0;
  bool is_count =
      p.n == 25 && memcmp(p.p, "/v1/messages/count_tokens", 25) == 0;
  bool is_rsp = p.n == 13 && memcmp(p.p, "/v1/responses", 13) == 0;
  bool is_rsp_id = p.n > 14 && memcmp(p.p, "/v1/responses/", 14) == 0;
  air_dialect dialect = is_msgs || is_count   ? AIR_DIALECT_ANTHROPIC
                        : is_rsp || is_rsp_id ? AIR_DIALECT_OPENAI_RESPONSES
                                              : AIR_DIALECT_OPENAI;
  char rid[40];
  make_rid(w, msg, rid, sizeof(rid));
  if (is_healthz(p)) {
    if (get)
      respond_text(req, 200, "text/plain", "ok\n", 3);
    else
      method_not_allowed(req, AIR_DIALECT_OPENAI, "GET, HEAD", rid);
  } else if (!authorized(cfg, msg)) {
    /* Every endpoint but /healthz: the key comes before anything else. */
    air__gw_respond_error(req, dialect, 401, AIR_REASON_AUTH, AUTH_MESSAGE,
                          rid);
  } else if (is_chat || is_msgs || is_rsp) {
    if (!post) {
      method_not_allowed(req, dialect, "POST", rid);
    } else {
      chat(w, req, msg, dialect, cfg, rid);
      return; /* chat owns the config reference now */
    }
  } else if (is_emb || is_count) {
    if (!post) {
      method_not_allowed(req, dialect, "POST", rid);
    } else {
      air__gw_plain(w, req, msg, dialect, cfg, rid);
      return; /* it owns the config reference now */
    }
  } else if (is_rsp_id) {
    /* docs/design.md §5: to the first openai_responses provider (plain_ep.c).
     */
    if (air__http_str_eq(msg->method, "GET")) {
      air__gw_plain_retrieve(w, req, msg, cfg, rid);
      return; /* it owns the config reference now */
    }
    method_not_allowed(req, dialect, "GET", rid);
  } else if (p.n == 10 && memcmp(p.p, "/v1/models", 10) == 0) {
    if (get)
      models_list(req, msg, cfg->cfg);
    else
      method_not_allowed(req, AIR_DIALECT_OPENAI, "GET, HEAD", rid);
  } else if (p.n == 8 && memcmp(p.p, "/metrics", 8) == 0) {
    if (get)
      metrics(w, req);
    else
      method_not_allowed(req, AIR_DIALECT_OPENAI, "GET, HEAD", rid);
  } else {
    air__gw_respond_error(req, AIR_DIALECT_OPENAI, 404, AIR_REASON_NOT_FOUND,
                          "no such endpoint", rid);
  }
  air__gw_cfg_release(cfg);
}
