/*
 * The chat endpoints (docs/design.md §5): POST /v1/chat/completions,
 * /v1/messages and /v1/responses through the exchange, answered in the
 * caller's dialect — streamed from commit on (raw upstream events when the
 * dialects match, re-encoded parts when they differ), or whole. The
 * exchange's callbacks feed the responder (responder.h), whose bytes are
 * written here with backpressure: a turn's events go out in one write.
 *
 * Lifetime: a gw_req lives from air__gw_chat until the exchange's on_end
 * has finished the HTTP request (never inside air__exchange_start: the
 * exchange delivers even a failure at once on a later loop turn).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "endpoint.h"
#include "limits.h"
#include "responder.h"
#include "spans.h"

#define HIGH_WATER (256u << 10) /* queued response bytes before pausing */

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
  int inflight; /* air__gw_inflight_begin's handle */
  air__gw_forward fwd;
  air__trace trace;
  air__trace_answer *ans; /* what the released answer said: sampled
                            requests only, so an unsampled one allocates
                            nothing for it (else NULL) */
} gw_req;

/* ---- the log line -------------------------------------------------------- */

static void log_line(gw_req *r, const air__exchange_result *res, int status,
                     const char *outcome) {
  air__gw_line l;
  air__buf *b = &l.b;
  air__gw_line_begin(&l, r->rid);
  air__buf_puts(b, ",\"route\":");
  const char *model = r->areq.model ? r->areq.model : "";
  air__buf_put_json_str(b, model, strlen(model));
  air__gw_line_api(&l, r->dialect);
  air__buf_puts(b, r->stream ? ",\"stream\":true" : ",\"stream\":false");
  air__gw_line_attempts(&l, res->log, res->n_log);
  air__gw_line_outcome(&l, outcome, status);
  air__buf_puts(b, ",\"first_content_ms\":");
  air__buf_putu(b, res->first_content_ms);
  air__buf_puts(b, ",\"total_ms\":");
  air__buf_putu(b, res->total_ms);
  air__buf_puts(b, ",\"bytes\":");
  air__buf_putu(b, r->bytes);
  air__buf_puts(b, ",\"malformed\":");
  air__buf_putu(b, res->malformed);
  if (res->n_continued > 0) {
    /* Where each continuation joined the answer (docs/design.md §3.5). */
    air__buf_puts(b, ",\"continued\":[");
    for (size_t i = 0; i < res->n_continued; i++) {
      const air__continued *c = &res->continued[i];
      air__buf_puts(b, i ? ",{\"target\":" : "{\"target\":");
      air__buf_put_json_str(b, c->target, strlen(c->target));
      air__buf_puts(b, ",\"attempt\":");
      air__buf_putu(b, c->attempt);
      air__buf_puts(b, ",\"at_char\":");
      air__buf_putu(b, c->at_char);
      air__buf_putc(b, '}');
    }
    air__buf_putc(b, ']');
  }
  if (r->rs.dropped != NULL) {
    air__buf_puts(b, ",\"dropped\":");
    air__buf_put_json_str(b, r->rs.dropped, strlen(r->rs.dropped));
  }
  if (r->rs.replaced != 0) {
    /* Upstream identifiers over their limit, replaced (dialect.h). */
    air__buf_puts(b, ",\"replaced\":\"");
    air__buf_puts(b, air__ident_names(r->rs.replaced));
    air__buf_putc(b, '"');
  }
  air__gw_line_end(&l, res->n_log, outcome, status);
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
    f[i] = air__gw_field(rs->head[i].name, rs->head[i].value);
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
  air__gw_forward_cleanup(&r->fwd);
  air__gw_cfg_release(r->cfg);
  free(r->ans);
  air__pool_put(&r->w->reqs, r, sizeof(*r));
}

/* ---- the endpoint ------------------------------------------------------- */

void air__gw_chat(air__gw_worker *w, air__http_req *req,
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
  r->start_ms = air__gw_mono_ms();
  snprintf(r->rid, sizeof(r->rid), "%s", rid);
  r->inflight = air__gw_inflight_begin(w, r->rid);
  air__responder_init(&r->rs, dialect, &r->areq, r->rid);
  air__gw_forward_init(&r->fwd);
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
  air__gw_forward_collect(&r->fwd, cfg->cfg, msg);
  air__exchange_opts o = {
      .cfg = cfg->cfg,
      .state = w->g->state,
      .req = &r->areq,
      .model = r->areq.model,
      .forward = r->fwd.lines,
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
  if (rc != 0) {
    air__gw_respond_start_error(req, dialect, rc, r->areq.model, r->rid);
    finish_request(r);
  }
}
