/*
 * The plain exchange (plain.h): the engine + the transport for endpoints
 * without a stream. One request body, one response body per attempt.
 *
 * Reentrancy: the transport calls on_head / on_body / on_done from inside
 * libcurl; nothing here removes the transfer from inside on_head or
 * on_body (on_body returns non-zero instead, and the attempt ends in
 * on_done). The consumer is called through tell_failed and the end only:
 * a cancel made inside on_failed is carried out once that call returns,
 * and the consumer hears nothing but on_end from then on. on_end fires from
 * on_done, a timer or a cancel made outside a callback, never inside
 * air__plain_start (the first step runs on the next loop turn) nor inside
 * on_failed; the owner may free the exchange inside it (the memory stays
 * until the timer's close callback).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "engine.h"
#include "limits.h"
#include "plain.h"
#include "retry_after.h"
#include "state.h"
#include "upstream.h"

enum { T_FIRST_BYTE, T_ATTEMPT, T_WAIT, N_TIMERS };

struct air__plain {
  air__transport_if tr;
  air__plain_opts o;
  air__plain_cb cb;
  const air_clock *clock;
  json_t *doc;  /* the caller's body, parsed once */
  air_state ro; /* the read-only view of o.state (record false) */
  air_run *run;
  air_action act;
  void *xfer;             /* the transfer in flight, or NULL */
  air__deadlines dl;      /* one timer, armed at the earliest due[] */
  uint64_t due[N_TIMERS]; /* deadlines on the clock; 0 = off */
  bool ended, freeing;
  bool starting; /* inside air__plain_start_on */
  bool kick;     /* the first launch's failure waits for the next
                    loop turn (kick_rc: launch's result) */
  int kick_rc;
  bool end_due;          /* on_end waits for the next loop turn (res) */
  air__plain_result res; /* the end, kept while its delivery waits */
  bool calling;          /* inside the consumer's on_failed */
  bool cancel_pending;   /* a cancel made inside on_failed */
  air__upstream up;      /* the attempt's status, headers and failure */
  air__buf body;         /* the upstream request body */
  air__buf resp;         /* the response body (an error body: its first part) */
  const char *att_target;
  unsigned att_id;
  uint64_t start_ms, attempt_start, upstream_ms, wait_ms;
  bool has_hint;
  uint64_t hint_ms;
};

static void step(air__plain *p);
static void launched(air__plain *p, int rc);

static uint64_t now_of(const air__plain *p) {
  return p->clock->now_ms(p->clock->data);
}

/* ---- the read-only breaker (record false) -------------------------------- */

/* Closed admits; anything else is passed over as if open, reopening "now"
 * (so when every target is passed over the first is tried). No lease. */
static air__admit ro_try_probe(void *impl, const char *target,
                               uint64_t lease_ms, uint64_t now_ms,
                               uint64_t *reopen_ms, uint64_t *lease) {
  air_state *in = impl;
  (void)lease_ms;
  *lease = 0;
  if (in->ops->mode(in->impl, target, now_ms) == AIR_BREAKER_CLOSED)
    return AIR__ADMIT_YES;
  if (reopen_ms != NULL) *reopen_ms = now_ms;
  return AIR__ADMIT_NO;
}

static void ro_record(void *impl, const char *target, const air__verdict *v,
                      uint64_t now_ms) {
  (void)impl, (void)target, (void)v, (void)now_ms;
}

static void ro_release(void *impl, const char *target, uint64_t lease) {
  (void)impl, (void)target, (void)lease;
}

static void ro_cool(void *impl, const char *target, uint64_t now_ms,
                    uint64_t cool_ms) {
  (void)impl, (void)target, (void)now_ms, (void)cool_ms;
}

static air_breaker_mode ro_mode(void *impl, const char *target,
                                uint64_t now_ms) {
  air_state *in = impl;
  return in->ops->mode(in->impl, target, now_ms);
}

static int ro_sticky_get(void *impl, const char *route, uint64_t now_ms,
                         air__sticky_rec *out) {
  (void)impl, (void)route, (void)now_ms, (void)out;
  return 0;
}

static void ro_sticky_set(void *impl, const char *route, const char *target,
                          uint64_t now_ms) {
  (void)impl, (void)route, (void)target, (void)now_ms;
}

static void ro_destroy(void *impl) {
  (void)impl;
}

static const air__state_ops ro_ops = {
    .try_probe = ro_try_probe,
    .record = ro_record,
    .release = ro_release,
    .cool = ro_cool,
    .mode = ro_mode,
    .sticky_get = ro_sticky_get,
    .sticky_set = ro_sticky_set,
    .configure = NULL,
    .destroy = ro_destroy,
};

/* ---- timers -------------------------------------------------------------- */

static void cancel_now(air__plain *p);

/* Tells the consumer of a failed or skipped attempt (entry i of the log);
 * a cancel it makes is carried out by the caller (cancel_pending). */
static void tell_failed(air__plain *p, size_t i) {
  if (p->ended || p->cancel_pending || p->cb.on_failed == NULL) return;
  p->calling = true;
  p->cb.on_failed(p->cb.data, air_run_attempt(p->run, i));
  p->calling = false;
}

static void rearm(air__plain *p) {
  if (p->kick) { /* the next loop turn */
    air__deadlines_soon(&p->dl, now_of(p));
    return;
  }
  air__deadlines_arm(&p->dl, air__due_min(p->due, N_TIMERS, 0));
}

static void arm(air__plain *p, int which, uint64_t deadline) {
  p->due[which] = deadline != 0 ? deadline : 1;
  rearm(p);
}

static void stop_timers(air__plain *p) {
  for (int i = 0; i < N_TIMERS; i++) p->due[i] = 0;
  air__deadlines_stop(&p->dl);
}

static void xfer_cancel(air__plain *p) {
  if (p->xfer != NULL) p->tr.ops->cancel(p->tr.impl, p->xfer);
  p->xfer = NULL;
}

/* ---- the end ------------------------------------------------------------- */

/* "no target of this route serves /v1/embeddings: anthropic/claude (...)"
 * when every target was skipped; kept in the failure strings. */
static const char *skipped_message(air__plain *p, size_t n) {
  air__buf *b = &p->up.strs;
  air__buf_reset(b);
  int rc = air__buf_adds(b, "no target of this route serves ");
  if (rc == 0) rc = air__buf_adds(b, p->o.endpoint);
  if (rc == 0)
    rc = air__buf_adds(b, p->o.api == AIR_DIALECT_ANTHROPIC
                              ? " (it needs an anthropic provider):"
                              : " (it needs an openai provider):");
  for (size_t i = 0; rc == 0 && i < n; i++) {
    rc = air__buf_adds(b, i ? ", " : " ");
    if (rc == 0) rc = air__buf_adds(b, air_run_attempt(p->run, i)->target);
  }
  if (rc == 0) rc = air__buf_addc(b, '\0');
  return rc == 0 ? b->p : "no target of this route serves this endpoint";
}

static void end(air__plain *p, int rc) {
  if (p->ended) return;
  p->ended = true;
  stop_timers(p);
  air__plain_result r;
  memset(&r, 0, sizeof(r));
  air__exchange_result *x = &r.x;
  x->rc = rc;
  x->committed = rc == 0;
  x->reason = rc == 0 ? AIR_REASON_NONE : p->act.reason;
  x->status = rc == 0 ? p->up.status : p->act.status;
  size_t n = air_run_attempt_count(p->run);
  const air_attempt *last = NULL;
  for (size_t i = n; i > 0 && last == NULL; i--) {
    const air_attempt *a = air_run_attempt(p->run, i - 1);
    if (!a->skipped) last = a;
  }
  x->message = last && rc != 0 ? last->message : "";
  x->target = last ? last->target : "";
  if (last == NULL && n > 0 && rc == AIR_EUPSTREAM)
    x->message = skipped_message(p, n);
  x->answered = rc == 0 ? p->att_target : NULL;
  x->n_attempts = air__run_attempts(p->run);
  x->log = n ? air_run_attempt(p->run, 0) : NULL;
  x->n_log = n;
  x->has_retry_after = p->has_hint;
  x->retry_after_ms = p->hint_ms;
  x->total_ms = now_of(p) - p->start_ms;
  x->first_content_ms = rc == 0 ? x->total_ms : 0;
  x->upstream_wait_ms = p->upstream_ms + p->wait_ms;
  if (rc == 0) {
    r.status = p->up.status;
    r.body = p->resp.p ? p->resp.p : "";
    r.body_len = p->resp.n;
    r.headers = p->up.hv;
    r.n_headers = p->up.n_hv;
  }
  p->res = r;
  if (p->starting || p->calling) {
    p->end_due = true;
    air__deadlines_soon(&p->dl, now_of(p));
    return;
  }
  p->cb.on_end(p->cb.data, &p->res);
}

/* ---- the attempt's failure ----------------------------------------------- */

static void set_fail(air__plain *p, air_reason reason, int status,
                     const char *message, air_transport_err transport) {
  air__upstream_fail(&p->up, reason, status, NULL, NULL, message, transport);
}

/* Hands the failure to the policy and acts on its answer. */
static void attempt_failed(air__plain *p) {
  uint64_t hint = 0;
  p->has_hint = air__retry_after(p->up.fail.headers, p->up.fail.n_headers,
                                 p->clock->wall_ms(p->clock->data), &hint) == 1;
  p->hint_ms = hint;
  size_t failed = air_run_attempt_count(p->run) - 1;
  air_run_fail(p->run, p->att_id, &p->up.fail, now_of(p),
               p->clock->wall_ms(p->clock->data), &p->act);
  tell_failed(p, failed);
  step(p);
}

/* ---- transport callbacks ------------------------------------------------- */

static bool ok_status(int status) {
  return status >= 200 && status < 300;
}

static void on_head(void *data, int status, const air_header *h, size_t n) {
  air__plain *p = data;
  p->due[T_FIRST_BYTE] = 0;
  rearm(p);
  p->up.status = status;
  air__run_note_status(p->run, p->att_id, status);
  air__upstream_keep_headers(&p->up, h, n);
}

static int on_body(void *data, const char *s, size_t n) {
  air__plain *p = data;
  if (!ok_status(p->up.status)) /* diagnostic: its first part is kept */
    return air__upstream_error_piece(&p->up, &p->resp, s, n);
  if (air__buf_add(&p->resp, s, n) == 0) return 0;
  char m[128];
  snprintf(m, sizeof(m),
           "response body over limits.max_response_bytes (%llu bytes)",
           (unsigned long long)p->o.cfg->limits.max_response_bytes);
  set_fail(p, AIR_REASON_MALFORMED, p->up.status, m, AIR_TRANSPORT_BADBODY);
  return -1;
}

static void on_done(void *data, int rc, air_transport_err kind,
                    bool connect_timeout, const char *msg) {
  air__plain *p = data;
  p->xfer = NULL;
  p->due[T_FIRST_BYTE] = p->due[T_ATTEMPT] = 0;
  rearm(p);
  p->upstream_ms += now_of(p) - p->attempt_start;
  if (rc == AIR_ECANCELED) {
    /* on_body stopped it: the failure is set, and never passed as a
     * success if it were not. */
    if (!p->up.have_fail)
      set_fail(p, AIR_REASON_MALFORMED, p->up.status,
               "the response could not be read", AIR_TRANSPORT_BADBODY);
  } else if (rc != 0) {
    set_fail(p, connect_timeout ? AIR_REASON_TIMEOUT_CONNECT : AIR_REASON_NONE,
             ok_status(p->up.status) ? 0 : p->up.status, msg, kind);
  } else if (ok_status(p->up.status)) {
    json_error_t je;
    json_t *v = json_loadb(p->resp.p ? p->resp.p : "", p->resp.n, 0, &je);
    if (!json_is_object(v))
      set_fail(p, AIR_REASON_MALFORMED, p->up.status,
               "the response body is not a JSON object", AIR_TRANSPORT_BADBODY);
    json_decref(v);
  } else {
    air__upstream_fail_error_body(&p->up, &p->resp);
  }
  if (p->up.have_fail) {
    attempt_failed(p);
    return;
  }
  /* The whole answer is the first content: the engine commits it (a probe's
   * success is recorded here) and the run is done. */
  air_action a;
  if (air_run_ready_to_commit(p->run, p->att_id, now_of(p), &a) != 0 ||
      air_run_succeed(p->run, p->att_id, now_of(p), &p->act) != 0) {
    end(p, AIR_ESTATE);
    return;
  }
  end(p, 0);
}

/* ---- timers' handlers ---------------------------------------------------- */

static void timeout_fail(air__plain *p, air_reason reason, const char *msg) {
  xfer_cancel(p);
  stop_timers(p);
  p->upstream_ms += now_of(p) - p->attempt_start;
  set_fail(p, reason, p->up.status, msg, AIR_TRANSPORT_OK);
  attempt_failed(p);
}

static void on_timer(void *arg) {
  air__plain *p = arg;
  air__deadlines_fired(&p->dl);
  if (p->end_due) {
    p->end_due = false;
    p->cb.on_end(p->cb.data, &p->res);
    return;
  }
  if (p->ended) return;
  if (p->kick) {
    /* What start could not tell: its first launch failed. */
    p->kick = false;
    launched(p, p->kick_rc);
    step(p);
    if (!p->freeing && !p->ended) rearm(p);
    return;
  }
  uint64_t now = now_of(p), best = 0;
  int which = air__due_pick(p->due, N_TIMERS, now, &best);
  if (which < 0) {
    rearm(p);
    return;
  }
  p->due[which] = 0;
  switch (which) {
    case T_FIRST_BYTE:
      timeout_fail(p, AIR_REASON_TIMEOUT_FIRST_BYTE,
                   "no response headers within first_byte_ms");
      break;
    case T_ATTEMPT:
      timeout_fail(p, AIR_REASON_TIMEOUT_ATTEMPT,
                   "no complete response within attempt_ms");
      break;
    default:
      p->wait_ms += p->act.wait_ms;
      air_run_wait_done(p->run, p->act.attempt_id, now, &p->act);
      step(p);
      break;
  }
  if (!p->freeing && !p->ended) rearm(p);
}

/* ---- attempts ------------------------------------------------------------ */

/* The caller's body with "model" set to the target's model. */
static int build_body(air__plain *p, const char *model) {
  air__buf_reset(&p->body);
  json_t *m = json_string(model);
  if (m == NULL || json_object_set_new(p->doc, "model", m) != 0)
    return AIR_ENOMEM;
  char *text = json_dumps(p->doc, JSON_COMPACT);
  if (text == NULL) return AIR_ENOMEM;
  int rc = air__buf_adds(&p->body, text);
  free(text);
  return rc;
}

/* Starts the current ATTEMPT. 0: in flight; 1: failed at once (fail set);
 * 2: the target speaks another dialect (skipped). */
static int launch(air__plain *p) {
  const air__target *t = air__run_target(p->run);
  const air__provider *pv = &p->o.cfg->providers[t->provider];
  p->att_target = p->act.target;
  p->att_id = p->act.attempt_id;
  p->attempt_start = now_of(p);
  air__upstream_begin(&p->up);
  air__buf_reset(&p->resp);
  if (pv->api != p->o.api) return 2;
  if (air__upstream_key(&p->up, pv) != 0) return 1;
  if (!p->o.get && build_body(p, t->model) != 0) {
    air__upstream_too_big(&p->up);
    return 1;
  }
  air__upstream_req r = {
      .provider = pv,
      .target = t,
      .path = p->o.path,
      .accept = "application/json",
      .forward = p->o.forward,
      .body = p->o.get ? NULL : p->body.p,
      .body_len = p->o.get ? 0 : p->body.n,
      .get = p->o.get,
  };
  air__xfer_cb cb = {on_head, on_body, on_done, p};
  if (air__upstream_send(&p->up, &p->tr, &r, &cb, &p->xfer) != 0) return 1;
  arm(p, T_FIRST_BYTE, p->attempt_start + t->timeouts.first_byte_ms);
  arm(p, T_ATTEMPT, p->act.deadline_ms);
  return 0;
}

/* After launch returned rc (non-zero): the run is told (a skipped
 * target, or the attempt's failure) and then the consumer. */
static void launched(air__plain *p, int rc) {
  size_t i = air_run_attempt_count(p->run) - 1;
  if (rc == 2)
    air__run_skip(p->run, p->att_id, p->o.endpoint,
                  "the provider does not serve this endpoint", now_of(p),
                  &p->act);
  else
    air_run_fail(p->run, p->att_id, &p->up.fail, now_of(p),
                 p->clock->wall_ms(p->clock->data), &p->act);
  tell_failed(p, i);
}

static void step(air__plain *p) {
  for (;;) {
    if (p->ended) return;
    if (p->cancel_pending) {
      cancel_now(p);
      return;
    }
    switch (p->act.kind) {
      case AIR_ACT_ATTEMPT: {
        int l = launch(p);
        if (l == 0) return;
        if (p->starting) {
          /* Inside start: the consumer hears of it on the next turn. */
          p->kick = true;
          p->kick_rc = l;
          rearm(p);
          return;
        }
        launched(p, l);
        continue;
      }
      case AIR_ACT_WAIT:
        arm(p, T_WAIT, now_of(p) + p->act.wait_ms);
        return;
      case AIR_ACT_FAIL:
        end(p, p->act.reason == AIR_REASON_ABORTED ? AIR_ECANCELED
                                                   : AIR_EUPSTREAM);
        return;
      default:
        /* DONE comes only from on_done; COMMIT, CANCEL and CONTINUE answer
         * events this exchange never sends: a broken promise, ended. */
        end(p, AIR_ESTATE);
        return;
    }
  }
}

/* ---- lifecycle ----------------------------------------------------------- */

static void on_timer_closed(void *arg) {
  air__plain *p = arg;
  air__buf_cleanup(&p->body);
  air__buf_cleanup(&p->resp);
  air__upstream_cleanup(&p->up);
  json_decref(p->doc);
  air_run_free(p->run);
  free(p);
}

int air__plain_start(uv_loop_t *loop, air__transport *t,
                     const air__plain_opts *o, const air__plain_cb *cb,
                     air__plain **out) {
  if (loop == NULL || t == NULL) return AIR_EINVAL;
  air__loop lp = air__loop_uv(loop);
  air__transport_if tr = air__transport_curl(t);
  return air__plain_start_on(&lp, &tr, o, cb, out);
}

int air__plain_start_on(const air__loop *loop, const air__transport_if *tr,
                        const air__plain_opts *o, const air__plain_cb *cb,
                        air__plain **out) {
  if (loop == NULL || tr == NULL || o == NULL || o->cfg == NULL ||
      o->model == NULL || o->path == NULL || o->endpoint == NULL ||
      cb == NULL || cb->on_end == NULL)
    return AIR_EINVAL;
  json_error_t je;
  json_t *doc =
      o->get ? NULL : json_loadb(o->body ? o->body : "", o->body_len, 0, &je);
  if (!o->get && !json_is_object(doc)) {
    json_decref(doc);
    return AIR_EINVAL;
  }
  air__plain *p = calloc(1, sizeof(*p));
  if (p == NULL) {
    json_decref(doc);
    return AIR_ENOMEM;
  }
  p->tr = *tr;
  p->o = *o;
  p->cb = *cb;
  p->doc = doc;
  p->clock = o->clock ? o->clock : air_clock_system();
  p->start_ms = now_of(p);
  air_state *st = o->state;
  if (st != NULL && !o->record) {
    p->ro.ops = &ro_ops;
    p->ro.impl = o->state;
    st = &p->ro;
  }
  int rc =
      air_run_new(o->cfg, st, o->model, NULL, p->start_ms, &p->run, &p->act);
  if (rc != 0) {
    json_decref(doc);
    free(p);
    return rc;
  }
  uint64_t max = o->cfg->limits.max_response_bytes;
  air__buf_init(&p->body, AIR__MAX_REQUEST_BYTES);
  air__buf_init(&p->resp, max ? (size_t)max : AIR__MAX_RESPONSE_BYTES);
  air__upstream_init(&p->up);
  if (air__deadlines_open(&p->dl, loop, p->clock, on_timer, p) != 0) {
    on_timer_closed(p);
    return AIR_ENOMEM;
  }
  *out = p;
  /* The first attempt starts now; nothing of the consumer's is called
   * inside this call (a failure at once and the end come on the next loop
   * turn). */
  p->starting = true;
  step(p);
  p->starting = false;
  return 0;
}

void air__plain_cancel(air__plain *p) {
  if (p == NULL || p->ended) return;
  if (p->calling) {
    p->cancel_pending = true;
    return;
  }
  cancel_now(p);
}

static void cancel_now(air__plain *p) {
  p->cancel_pending = false;
  if (p->ended) return;
  if (p->xfer != NULL) {
    xfer_cancel(p);
    p->upstream_ms += now_of(p) - p->attempt_start;
  }
  stop_timers(p);
  air_run_cancel(p->run, now_of(p), &p->act);
  end(p, AIR_ECANCELED);
}

void air__plain_free(air__plain *p) {
  if (p == NULL || p->freeing) return;
  p->freeing = true;
  xfer_cancel(p);
  air__deadlines_close(&p->dl, on_timer_closed, p);
}
