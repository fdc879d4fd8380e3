/*
 * The client API's calls on a loop (chat.h): preparing a call on the
 * caller's thread, running it as an exchange on the loop's, building its
 * result in the caller's dialect, and the loop's wake-up that starts and
 * cancels calls.
 */
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "driver.h"
#include "error.h"

void air_chat_result_free(air_chat_result *r) {
  if (r == NULL) return;
  free(r->body);
  free(r->text);
  free(r->target);
  air_attempt_log_free(r->log, r->n_log);
  free(r);
}

/* ---- the loop's side ----------------------------------------------------- */

static void unlink_active(air__chat_loop *l, air__chat *ch) {
  for (air__chat **p = &l->active; *p; p = &(*p)->next)
    if (*p == ch) {
      *p = ch->next;
      break;
    }
}

/*
 * The call is over: its token stops watching it first (so no cancel reaches
 * this loop once the caller may have returned and the loop may be freed),
 * then its owner takes it. ch is the owner's after this.
 */
static void finish(air__chat *ch, int rc) {
  air__cancel_unwatch(ch->token, &ch->watch);
  ch->rc = rc;
  ch->ended(ch);
}

static void on_commit(void *data, const air__commit_info *ci) {
  air__chat *ch = data;
  const char *slash = ci->target != NULL ? strchr(ci->target, '/') : NULL;
  snprintf(ch->sub_model, sizeof(ch->sub_model), "%s",
           slash != NULL        ? slash + 1
           : ci->target != NULL ? ci->target
                                : "");
  ch->agg.idents.model = ch->sub_model;
  if (ch->obs.on_commit)
    ch->obs.on_commit(ch->obs.data, ci->target, ci->attempts);
}

static int on_event(void *data, const air__gate_event *ev) {
  air__chat *ch = data;
  for (size_t i = 0; i < ev->n_parts; i++) {
    if (ch->traced) air__trace_answer_part(&ch->ans, &ev->parts[i]);
    if (air__aggregate_add(&ch->agg, &ev->parts[i]) != 0) {
      ch->lost = true;
      air__exchange_cancel(ch->x);
      break;
    }
    if (ch->o.on_part == NULL) continue;
    air_part p = ev->parts[i];
    p.size = sizeof(p); /* the decoders' parts leave it 0 */
    if (ch->o.on_part(ch->o.data, &p) != 0) {
      /* Carried out when this callback returns; on_end follows, nothing
       * else (exchange.h). */
      atomic_store(&ch->cancel, true);
      ch->cancel_sent = true;
      air__exchange_cancel(ch->x);
      break;
    }
  }
  return 0;
}

/* The seam of a continuation (docs/design.md §3.5): its parts follow
 * on_event (the aggregate and on_part get one answer); the result's body
 * carries the continuation and the usage of every attempt joined. */
static void on_continue(void *data, const air__continue_info *ci) {
  air__chat *ch = data;
  air__aggregate_add_usage(&ch->agg, ci->input_tokens, ci->output_tokens);
  if (air__aggregate_add_continued(&ch->agg, ci->target, ci->at_char) != 0) {
    ch->lost = true;
    air__exchange_cancel(ch->x);
  }
}

static void on_failed(void *data, const air_attempt *a) {
  air__chat *ch = data;
  if (ch->obs.on_failed) ch->obs.on_failed(ch->obs.data, a);
}

/* A deep copy of the exchange's log. */
static air_attempt *copy_log(const air_attempt *log, size_t n) {
  air_attempt *out = calloc(n ? n : 1, sizeof(*out));
  if (out == NULL) return NULL;
  for (size_t i = 0; i < n; i++) {
    out[i] = log[i];
    out[i].target = air__memdup0(log[i].target, strlen(log[i].target));
    out[i].message = air__memdup0(log[i].message, strlen(log[i].message));
    out[i].request_id =
        air__memdup0(log[i].request_id, strlen(log[i].request_id));
    out[i].field =
        log[i].field ? air__memdup0(log[i].field, strlen(log[i].field)) : NULL;
  }
  return out;
}

typedef struct span_fwd {
  const air_observers *obs;
} span_fwd;

static void forward_span(void *data, const air_span *s) {
  const span_fwd *f = data;
  f->obs->on_span(f->obs->data, s);
}

/* The call's spans to on_span (docs/design.md §7 observers, 5 Traces). */
static void emit_spans(air__chat *ch, const air__exchange_result *r) {
  if (!ch->traced) return;
  const char *outcome = r->rc == 0               ? "ok"
                        : r->rc == AIR_ECANCELED ? "aborted"
                        : r->committed           ? "error_after_commit"
                                                 : "error";
  air__trace_end e = {
      .cfg = ch->l->cfg,
      .route = ch->req.model ? ch->req.model : "",
      .dialect = ch->dialect,
      .outcome = outcome,
      .end_unix_nano = air__unix_nano(),
  };
  span_fwd f = {&ch->obs};
  air__trace_spans(&ch->trace, &e, r, &ch->ans, forward_span, &f);
}

static void on_end(void *data, const air__exchange_result *r) {
  air__chat *ch = data;
  emit_spans(ch, r);
  if (r->committed && r->rc == AIR_EUPSTREAM && ch->o.on_part) {
    /* A failure after commit reaches the part callback once, as an ERROR
     * part named after the reason (as in air_stream). */
    air_part err;
    memset(&err, 0, sizeof(err));
    err.size = sizeof(err);
    err.kind = AIR_PART_ERROR;
    err.name = air_reason_name(r->reason);
    err.name_len = strlen(err.name);
    err.text = r->message ? r->message : "";
    err.text_len = strlen(err.text);
    ch->o.on_part(ch->o.data, &err);
  }
  air_chat_result *res = ch->res;
  const air__dialect_ops *ops = air__dialect_get(ch->dialect);
  air__buf body;
  air__buf_init(&body, AIR__MAX_RESULT_BODY_BYTES);
  res->reason = r->reason;
  res->first_content_ms = r->first_content_ms;
  res->total_ms = r->total_ms;
  res->log = copy_log(r->log, r->n_log);
  res->n_log = res->log ? r->n_log : 0;
  res->target = air__memdup0(r->target, strlen(r->target));
  int rc = r->rc;
  if (rc == 0 && !ch->lost && ops->encode_response(&ch->agg, &body) == 0) {
    res->status = 200;
  } else {
    air_reason reason = r->reason;
    const char *message = r->message;
    int status = r->status;
    if (rc == 0 || ch->lost) {
      /* The answer came but could not be kept whole. */
      rc = AIR_EUPSTREAM;
      reason = res->reason = AIR_REASON_MALFORMED;
      message = "the answer is over the client's limits (malformed)";
      status = 0;
    }
    air__buf_reset(&body);
    res->status = air__final_status(reason, status);
    if (ops->encode_error_body(res->status, reason, message, r->log, r->n_log,
                               &body) != 0) {
      air__buf_reset(&body);
      if (ops->encode_error_body(res->status, reason, message, NULL, 0,
                                 &body) != 0)
        air__buf_reset(&body);
    }
  }
  res->body =
      body.p ? air__buf_take(&body, &res->body_len) : air__memdup0("", 0);
  air__buf_cleanup(&body);
  res->text = air__memdup0(rc == 0 && ch->agg.text.p ? ch->agg.text.p : "",
                           rc == 0 ? ch->agg.text.n : 0);
  res->text_len = rc == 0 ? ch->agg.text.n : 0;
  res->finish = ch->agg.finish;
  air__chat_loop *l = ch->l;
  unlink_active(l, ch);
  air__exchange_free(ch->x);
  ch->x = NULL;
  finish(ch, rc);
  /* The last call ended while the loop is asked to end: let on_async
   * close. */
  if (l->active == NULL && !l->closed) {
    pthread_mutex_lock(&l->mu);
    bool stopping = l->stopping;
    pthread_mutex_unlock(&l->mu);
    if (stopping) uv_async_send(&l->async);
  }
}

static void start(air__chat_loop *l, air__chat *ch) {
  if (atomic_load(&ch->cancel)) {
    finish(ch, AIR_ECANCELED);
    return;
  }
  air__exchange_opts o = {
      .cfg = l->cfg,
      .state = l->state,
      .req = &ch->req,
      .model = ch->req.model,
      .trace = ch->traced ? &ch->trace : NULL,
  };
  air__exchange_cb cb = {.on_commit = on_commit,
                         .on_event = on_event,
                         .on_failed = on_failed,
                         .on_end = on_end,
                         .data = ch,
                         .on_continue = on_continue};
  ch->next = l->active;
  l->active = ch;
  int rc = air__exchange_start(&l->loop, l->t, &o, &cb, &ch->x);
  if (rc != 0) {
    unlink_active(l, ch);
    finish(ch, rc);
  }
}

static void on_async(uv_async_t *a) {
  air__chat_loop *l = a->data;
  if (l->closed) return;
  pthread_mutex_lock(&l->mu);
  air__chat *in = l->incoming;
  l->incoming = NULL;
  bool stopping = l->stopping;
  bool abort = l->abort;
  pthread_mutex_unlock(&l->mu);
  while (in != NULL) {
    air__chat *next = in->next;
    if (abort)
      finish(in, AIR_ECANCELED);
    else
      start(l, in);
    in = next;
  }
  /* Cancels, each once: on_end may unlink (and its owner free) the call
   * cancelled, never another, so the next one is taken first. A cancel
   * the call made itself from inside a callback is already on its way. */
  for (air__chat *ch = l->active, *next; ch; ch = next) {
    next = ch->next;
    if ((abort || atomic_load(&ch->cancel)) && ch->x != NULL &&
        !ch->cancel_sent) {
      ch->cancel_sent = true;
      air__exchange_cancel(ch->x);
    }
  }
  /* Stopping: once the calls in flight ended (on_end wakes us again for
   * the last one), close what keeps the loop alive. */
  if (stopping && l->active == NULL) {
    air__transport_free(l->t);
    l->t = NULL;
    l->closed = true;
    uv_close((uv_handle_t *)&l->async, NULL);
  }
}

int air__chat_loop_init(air__chat_loop *l, const air_config *cfg,
                        air_state *state, int *uv_err) {
  memset(l, 0, sizeof(*l));
  l->cfg = cfg;
  l->state = state;
  *uv_err = uv_loop_init(&l->loop);
  if (*uv_err != 0) return AIR_EIO;
  pthread_mutex_init(&l->mu, NULL);
  uv_async_init(&l->loop, &l->async, on_async);
  l->async.data = l;
  int rc = air__transport_new(&l->loop, NULL, &l->t);
  if (rc != 0) air__chat_loop_cleanup(l);
  return rc;
}

void air__chat_loop_stop(air__chat_loop *l, bool abort) {
  pthread_mutex_lock(&l->mu);
  l->stopping = true;
  l->abort = abort;
  pthread_mutex_unlock(&l->mu);
  uv_async_send(&l->async);
}

void air__chat_loop_cleanup(air__chat_loop *l) {
  if (!l->closed) {
    /* The loop never ran to its end: close what was opened on it. */
    air__transport_free(l->t);
    l->t = NULL;
    l->closed = true;
    uv_close((uv_handle_t *)&l->async, NULL);
  }
  uv_run(&l->loop, UV_RUN_DEFAULT); /* close callbacks, if any are left */
  uv_loop_close(&l->loop);
  pthread_mutex_destroy(&l->mu);
}

/* ---- the caller's side --------------------------------------------------- */

static void on_cancel(void *data) {
  air__chat_cancel(data);
}

void air__chat_cancel(air__chat *ch) {
  atomic_store(&ch->cancel, true);
  uv_async_send(&ch->l->async);
}

/* A result for a call that never reached an upstream. */
static air_chat_result *early_result(air_dialect d, int status, air_reason r,
                                     const char *message) {
  air_chat_result *res = calloc(1, sizeof(*res));
  if (res == NULL) return NULL;
  air__buf body;
  air__buf_init(&body, AIR__MAX_ERROR_BODY_BYTES);
  air__dialect_get((air_dialect)d)
      ->encode_error_body(status, r, message, NULL, 0, &body);
  res->status = status;
  res->reason = r;
  res->body =
      body.p ? air__buf_take(&body, &res->body_len) : air__memdup0("", 0);
  air__buf_cleanup(&body);
  res->text = air__memdup0("", 0);
  res->target = air__memdup0("", 0);
  return res;
}

/* The minimum size of air_chat_opts: its first version (0.1). */
#define CHAT_OPTS_SIZE_V0 AIR__SIZE_TO(air_chat_opts, cancel)

int air__chat_prepare(air__chat *ch, const air_config *cfg, air_dialect dialect,
                      const char *body, size_t len, const air_chat_opts *opts,
                      air_chat_result **early, air_error *err) {
  if (dialect != AIR_DIALECT_OPENAI && dialect != AIR_DIALECT_ANTHROPIC)
    return air__error_set(err, AIR_EINVAL, "unknown dialect %d", (int)dialect);
  int rc = 0;
  if (opts == NULL) {
    memset(&ch->o, 0, sizeof(ch->o));
  } else {
    rc = air__opts_copy(&ch->o, sizeof(ch->o), opts, CHAT_OPTS_SIZE_V0,
                        "air_chat_opts", err);
  }
  if (rc == 0) rc = air__observers_copy(ch->o.observers, &ch->obs, err);
  if (rc != 0) return rc;
  air_error perr;
  memset(&perr, 0, sizeof(perr));
  rc = air__request_parse(dialect, body, len, &ch->req, &perr);
  if (rc != 0) {
    *early = early_result(dialect, 400, AIR_REASON_BAD_REQUEST, perr.message);
    return air__error_set(err, rc, "bad request: %s", perr.message);
  }
  ch->req.stream = ch->o.on_part != NULL;
  /* An unknown model is the caller's error, found before the loop runs. */
  if (air__config_policy(cfg, ch->req.model) == NULL) {
    char msg[300];
    snprintf(msg, sizeof(msg),
             "model '%.200s' is not a route or provider/model", ch->req.model);
    *early = early_result(dialect, 404, AIR_REASON_NOT_FOUND, msg);
    air__request_cleanup(&ch->req);
    return air__error_set(err, AIR_ENOTFOUND, "%s", msg);
  }
  ch->res = calloc(1, sizeof(*ch->res));
  if (ch->res == NULL) {
    air__request_cleanup(&ch->req);
    return air__error_set(err, AIR_ENOMEM, "out of memory");
  }
  ch->dialect = dialect;
  if (ch->obs.on_span != NULL) {
    /* A call whose spans are asked for is sampled; it continues the
     * application's traceparent when one is given. */
    static const air__sampler always = {false, 1.0};
    const char *tp = ch->o.traceparent;
    ch->traced =
        air__trace_begin(&ch->trace, tp, tp ? strlen(tp) : 0, &always) == 0;
    air__trace_answer_init(&ch->ans);
  }
  air__aggregate_init(&ch->agg);
  atomic_init(&ch->cancel, false);
  ch->token = ch->o.cancel;
  ch->watch.fn = on_cancel;
  ch->watch.data = ch;
  return 0;
}

void air__chat_submit(air__chat_loop *l, air__chat *ch,
                      air__chat_ended_fn ended, void *owner) {
  ch->l = l;
  ch->ended = ended;
  ch->owner = owner;
  air__cancel_watch(ch->token, &ch->watch);
  pthread_mutex_lock(&l->mu);
  ch->next = l->incoming;
  l->incoming = ch;
  pthread_mutex_unlock(&l->mu);
  uv_async_send(&l->async);
}

/* err for a call that ended with rc after the exchange ran. */
static void settle_error(int rc, const air_chat_result *res, air_error *err) {
  if (rc == 0)
    air__error_set(err, 0, NULL);
  else if (rc == AIR_EUPSTREAM && res != NULL)
    air__error_set(err, rc, "every attempt failed; the last: %s (HTTP %d)",
                   air_reason_name(res->reason), res->status);
  else if (rc == AIR_ECANCELED)
    air__error_set(err, rc, "cancelled by the caller");
  else
    air__error_set(err, rc, "%s", air_strerror(rc));
}

int air__chat_settle(air__chat *ch, air_chat_result **res, air_error *err) {
  int rc = ch->rc;
  if (ch->res->body == NULL) {
    /* Ended before the exchange ran (cancelled first, or no memory). */
    air_chat_result_free(ch->res);
    ch->res =
        rc == AIR_ECANCELED
            ? early_result(ch->dialect, 499, AIR_REASON_ABORTED, "cancelled")
            : early_result(ch->dialect, 500, AIR_REASON_SERVER_ERROR,
                           air_strerror(rc));
  }
  *res = ch->res;
  ch->res = NULL;
  air__aggregate_cleanup(&ch->agg);
  air__request_cleanup(&ch->req);
  settle_error(rc, *res, err);
  return rc;
}

void air__chat_settled(const air_observers *obs, int rc,
                       const air_chat_result *res) {
  if (obs->on_settled)
    obs->on_settled(obs->data, rc, res ? res->log : NULL, res ? res->n_log : 0);
}
