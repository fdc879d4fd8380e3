/*
 * The client (docs/design.md §7): worker threads, each with one uv loop and one
 * transport (one curl multi handle: one connection pool). A call is parsed
 * on the caller's thread, handed to a worker through a locked queue and a
 * uv_async, run there as an exchange, and the caller waits on a condition
 * variable. A cancel token wakes the worker through the same uv_async.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "cancel.h"
#include "driver.h"
#include "error.h"
#include "exchange.h"
#include "limits.h"
#include "spans.h"

typedef struct worker worker;

typedef struct job {
  struct job *next;
  worker *w;
  air__request req;
  air_chat_opts o; /* the caller's, as its version has them */
  air_observers obs;
  atomic_bool cancel;
  air_cancel *token;         /* the caller's, or NULL */
  air__cancel_watcher watch; /* on token until the job is done */
  air__exchange *x;
  air__aggregate agg;
  air_dialect dialect;
  air_chat_result *res;
  int rc;
  bool done;
  bool lost;        /* part of the answer could not be kept: never a success */
  bool cancel_sent; /* air__exchange_cancel was called (on_async: once) */
  char sub_model[AIR__MAX_TARGET_BYTES]; /* the committed target's model: what
                                            replaces an upstream model over
                                            AIR__MAX_IDENT_BYTES */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool traced; /* obs.on_span is set: trace is the call's */
  air__trace trace;
  air__trace_answer ans;
} job;

struct worker {
  air_client *cl;
  pthread_t thread;
  uv_loop_t loop;
  uv_async_t async;
  air__transport *t;
  pthread_mutex_t mu;
  job *incoming; /* under mu */
  bool stopping; /* under mu */
  job *active;   /* loop thread only */
  bool closed;   /* loop thread only: async closed, the loop ends */
  bool started;
};

struct air_client {
  const air_config *cfg;
  air_state *state;
  worker *w;
  unsigned n;
  atomic_uint next;
};

int air_global_init(void) {
  CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (rc == CURLE_OK) return 0;
  return rc == CURLE_OUT_OF_MEMORY ? AIR_ENOMEM : AIR_EIO;
}

void air_global_cleanup(void) {
  curl_global_cleanup();
}

static char *dupn(const char *s, size_t n) {
  char *p = malloc(n + 1);
  if (p == NULL) return NULL;
  if (n) memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

void air_chat_result_free(air_chat_result *r) {
  if (r == NULL) return;
  free(r->body);
  free(r->text);
  free(r->target);
  air_attempt_log_free(r->log, r->n_log);
  free(r);
}

/* ---- the worker's side --------------------------------------------------- */

static void unlink_active(worker *w, job *j) {
  for (job **p = &w->active; *p; p = &(*p)->next)
    if (*p == j) {
      *p = j->next;
      break;
    }
}

/*
 * The job is over: its token stops watching it first (so no cancel reaches
 * this worker once the caller may have returned and the client may be
 * freed), then the caller wakes. j is the caller's after this.
 */
static void finish_job(job *j, int rc) {
  air__cancel_unwatch(j->token, &j->watch);
  pthread_mutex_lock(&j->mu);
  j->rc = rc;
  j->done = true;
  pthread_cond_signal(&j->cv);
  pthread_mutex_unlock(&j->mu);
}

static void on_commit(void *data, const air__commit_info *ci) {
  job *j = data;
  const char *slash = ci->target != NULL ? strchr(ci->target, '/') : NULL;
  snprintf(j->sub_model, sizeof(j->sub_model), "%s",
           slash != NULL        ? slash + 1
           : ci->target != NULL ? ci->target
                                : "");
  j->agg.idents.model = j->sub_model;
  if (j->obs.on_commit) j->obs.on_commit(j->obs.data, ci->target, ci->attempts);
}

static int on_event(void *data, const air__gate_event *ev) {
  job *j = data;
  for (size_t i = 0; i < ev->n_parts; i++) {
    if (j->traced) air__trace_answer_part(&j->ans, &ev->parts[i]);
    if (air__aggregate_add(&j->agg, &ev->parts[i]) != 0) {
      j->lost = true;
      air__exchange_cancel(j->x);
      break;
    }
    if (j->o.on_part == NULL) continue;
    air_part p = ev->parts[i];
    p.size = sizeof(p); /* the decoders' parts leave it 0 */
    if (j->o.on_part(j->o.data, &p) != 0) {
      /* Carried out when this callback returns; on_end follows, nothing
       * else (exchange.h). */
      atomic_store(&j->cancel, true);
      j->cancel_sent = true;
      air__exchange_cancel(j->x);
      break;
    }
  }
  return 0;
}

/* The seam of a continuation (docs/design.md §3.5): its parts follow on_event
 * (the aggregate and on_part get one answer); the result's body carries
 * the continuation and the usage of every attempt joined. */
static void on_continue(void *data, const air__continue_info *ci) {
  job *j = data;
  air__aggregate_add_usage(&j->agg, ci->input_tokens, ci->output_tokens);
  if (air__aggregate_add_continued(&j->agg, ci->target, ci->at_char) != 0) {
    j->lost = true;
    air__exchange_cancel(j->x);
  }
}

static void on_failed(void *data, const air_attempt *a) {
  job *j = data;
  if (j->obs.on_failed) j->obs.on_failed(j->obs.data, a);
}

/* A deep copy of the exchange's log. */
static air_attempt *copy_log(const air_attempt *log, size_t n) {
  air_attempt *out = calloc(n ? n : 1, sizeof(*out));
  if (out == NULL) return NULL;
  for (size_t i = 0; i < n; i++) {
    out[i] = log[i];
    out[i].target = dupn(log[i].target, strlen(log[i].target));
    out[i].message = dupn(log[i].message, strlen(log[i].message));
    out[i].request_id = dupn(log[i].request_id, strlen(log[i].request_id));
    out[i].field =
        log[i].field ? dupn(log[i].field, strlen(log[i].field)) : NULL;
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
static void emit_spans(job *j, const air__exchange_result *r) {
  if (!j->traced) return;
  const char *outcome = r->rc == 0               ? "ok"
                        : r->rc == AIR_ECANCELED ? "aborted"
                        : r->committed           ? "error_after_commit"
                                                 : "error";
  air__trace_end e = {
      .cfg = j->w->cl->cfg,
      .route = j->req.model ? j->req.model : "",
      .dialect = j->dialect,
      .outcome = outcome,
      .end_unix_nano = air__unix_nano(),
  };
  span_fwd f = {&j->obs};
  air__trace_spans(&j->trace, &e, r, &j->ans, forward_span, &f);
}

static void on_end(void *data, const air__exchange_result *r) {
  job *j = data;
  emit_spans(j, r);
  if (r->committed && r->rc == AIR_EUPSTREAM && j->o.on_part) {
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
    j->o.on_part(j->o.data, &err);
  }
  air_chat_result *res = j->res;
  const air__dialect_ops *ops = air__dialect_get(j->dialect);
  air__buf body;
  air__buf_init(&body, AIR__MAX_RESULT_BODY_BYTES);
  res->reason = r->reason;
  res->first_content_ms = r->first_content_ms;
  res->total_ms = r->total_ms;
  res->log = copy_log(r->log, r->n_log);
  res->n_log = res->log ? r->n_log : 0;
  res->target = dupn(r->target, strlen(r->target));
  int rc = r->rc;
  if (rc == 0 && !j->lost && ops->encode_response(&j->agg, &body) == 0) {
    res->status = 200;
  } else {
    air_reason reason = r->reason;
    const char *message = r->message;
    int status = r->status;
    if (rc == 0 || j->lost) {
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
  res->body = body.p ? air__buf_take(&body, &res->body_len) : dupn("", 0);
  air__buf_cleanup(&body);
  res->text = dupn(rc == 0 && j->agg.text.p ? j->agg.text.p : "",
                   rc == 0 ? j->agg.text.n : 0);
  res->text_len = rc == 0 ? j->agg.text.n : 0;
  res->finish = j->agg.finish;
  worker *w = j->w;
  unlink_active(w, j);
  air__exchange_free(j->x);
  j->x = NULL;
  finish_job(j, rc);
  /* The last call ended while air_client_free waits: let on_async close. */
  if (w->active == NULL && !w->closed) {
    pthread_mutex_lock(&w->mu);
    bool stopping = w->stopping;
    pthread_mutex_unlock(&w->mu);
    if (stopping) uv_async_send(&w->async);
  }
}

static void start_job(worker *w, job *j) {
  if (atomic_load(&j->cancel)) {
    finish_job(j, AIR_ECANCELED);
    return;
  }
  air__exchange_opts o = {
      .cfg = w->cl->cfg,
      .state = w->cl->state,
      .req = &j->req,
      .model = j->req.model,
      .trace = j->traced ? &j->trace : NULL,
  };
  air__exchange_cb cb = {.on_commit = on_commit,
                         .on_event = on_event,
                         .on_failed = on_failed,
                         .on_end = on_end,
                         .data = j,
                         .on_continue = on_continue};
  j->next = w->active;
  w->active = j;
  int rc = air__exchange_start(&w->loop, w->t, &o, &cb, &j->x);
  if (rc != 0) {
    unlink_active(w, j);
    finish_job(j, rc);
  }
}

static void on_async(uv_async_t *a) {
  worker *w = a->data;
  if (w->closed) return;
  pthread_mutex_lock(&w->mu);
  job *in = w->incoming;
  w->incoming = NULL;
  bool stopping = w->stopping;
  pthread_mutex_unlock(&w->mu);
  while (in != NULL) {
    job *next = in->next;
    start_job(w, in);
    in = next;
  }
  /* Cancels, each once: on_end may unlink (and its caller free) the job
   * cancelled, never another, so the next one is taken first. A cancel
   * the job made itself from inside a callback is already on its way. */
  for (job *j = w->active, *next; j; j = next) {
    next = j->next;
    if (atomic_load(&j->cancel) && j->x != NULL && !j->cancel_sent) {
      j->cancel_sent = true;
      air__exchange_cancel(j->x);
    }
  }
  /* Stopping: once the calls in flight ended (on_end wakes us again for
   * the last one), close what keeps the loop alive. */
  if (stopping && w->active == NULL) {
    air__transport_free(w->t);
    w->t = NULL;
    w->closed = true;
    uv_close((uv_handle_t *)&w->async, NULL);
  }
}

static void *worker_main(void *arg) {
  worker *w = arg;
  uv_run(&w->loop, UV_RUN_DEFAULT);
  return NULL;
}

/* ---- the caller's side --------------------------------------------------- */

int air_client_new(const air_config *cfg, unsigned workers, air_client **out,
                   air_error *err) {
  if (cfg == NULL || out == NULL)
    return air__error_set(err, AIR_EINVAL, "cfg and out are required");
  air_client *c = calloc(1, sizeof(*c));
  if (c == NULL) return air__error_set(err, AIR_ENOMEM, "out of memory");
  c->cfg = cfg;
  c->n = workers ? workers : 1;
  c->w = calloc(c->n, sizeof(worker));
  int rc = c->w ? air_state_new(cfg, &c->state, err) : AIR_ENOMEM;
  const char *what = c->w ? NULL : "out of memory";
  for (unsigned i = 0; rc == 0 && i < c->n; i++) {
    worker *w = &c->w[i];
    /* rc == 0: c->w is allocated */
    /* NOLINTNEXTLINE(clang-analyzer-core.NullDereference) */
    w->cl = c;
    pthread_mutex_init(&w->mu, NULL);
    int e = uv_loop_init(&w->loop);
    if (e != 0) {
      rc = AIR_EIO;
      air__error_set(err, rc, "worker %u: event loop: %s", i, uv_strerror(e));
      what = NULL;
      break;
    }
    uv_async_init(&w->loop, &w->async, on_async);
    w->async.data = w;
    rc = air__transport_new(&w->loop, NULL, &w->t);
    if (rc != 0) what = "the HTTP transport did not start";
    if (rc == 0 &&
        (e = pthread_create(&w->thread, NULL, worker_main, w)) != 0) {
      rc = AIR_EIO;
      air__error_set(err, rc, "worker %u: thread: %s", i,
                     uv_strerror(uv_translate_sys_error(e)));
    }
    if (rc == 0) w->started = true;
  }
  if (rc != 0) {
    if (what != NULL) air__error_set(err, rc, "%s", what);
    air_client_free(c);
    return rc;
  }
  *out = c;
  return air__error_set(err, 0, NULL);
}

void air_client_free(air_client *c) {
  if (c == NULL) return;
  for (unsigned i = 0; c->w && i < c->n; i++) {
    worker *w = &c->w[i];
    if (!w->started) continue;
    pthread_mutex_lock(&w->mu);
    w->stopping = true;
    pthread_mutex_unlock(&w->mu);
    uv_async_send(&w->async);
    pthread_join(w->thread, NULL);
    uv_run(&w->loop, UV_RUN_DEFAULT); /* close callbacks, if any are left */
    uv_loop_close(&w->loop);
    pthread_mutex_destroy(&w->mu);
  }
  for (unsigned i = 0; c->w && i < c->n; i++) {
    worker *w = &c->w[i];
    if (w->started || w->t == NULL) continue;
    /* A worker that never started: close what was opened on its loop. */
    air__transport_free(w->t);
    uv_close((uv_handle_t *)&w->async, NULL);
    uv_run(&w->loop, UV_RUN_DEFAULT);
    uv_loop_close(&w->loop);
  }
  air_state_free(c->state);
  free(c->w);
  free(c);
}

static void on_cancel(void *data) {
  job *j = data;
  atomic_store(&j->cancel, true);
  uv_async_send(&j->w->async);
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
  res->body = body.p ? air__buf_take(&body, &res->body_len) : dupn("", 0);
  air__buf_cleanup(&body);
  res->text = dupn("", 0);
  res->target = dupn("", 0);
  return res;
}

/* The minimum size of air_chat_opts: its first version (0.1). */
#define CHAT_OPTS_SIZE_V0 AIR__SIZE_TO(air_chat_opts, cancel)

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

int air_client_chat(air_client *c, air_dialect dialect, const char *body,
                    size_t len, const air_chat_opts *opts,
                    air_chat_result **out, air_error *err) {
  if (c == NULL || body == NULL || out == NULL)
    return air__error_set(err, AIR_EINVAL, "client, body and out are required");
  if (dialect != AIR_DIALECT_OPENAI && dialect != AIR_DIALECT_ANTHROPIC)
    return air__error_set(err, AIR_EINVAL, "unknown dialect %d", (int)dialect);
  air_chat_opts o;
  air_observers obs;
  int rc = 0;
  if (opts == NULL) {
    memset(&o, 0, sizeof(o));
  } else {
    rc = air__opts_copy(&o, sizeof(o), opts, CHAT_OPTS_SIZE_V0, "air_chat_opts",
                        err);
  }
  if (rc == 0) rc = air__observers_copy(o.observers, &obs, err);
  if (rc != 0) return rc;
  air_dialect api = dialect;
  job *j = calloc(1, sizeof(*j));
  if (j == NULL) return air__error_set(err, AIR_ENOMEM, "out of memory");
  air_error perr;
  memset(&perr, 0, sizeof(perr));
  rc = air__request_parse(api, body, len, &j->req, &perr);
  if (rc != 0) {
    *out = early_result(dialect, 400, AIR_REASON_BAD_REQUEST, perr.message);
    free(j);
    return air__error_set(err, rc, "bad request: %s", perr.message);
  }
  j->req.stream = o.on_part != NULL;
  /* An unknown model is the caller's error, found before any worker runs. */
  if (air__config_policy(c->cfg, j->req.model) == NULL) {
    char msg[300];
    snprintf(msg, sizeof(msg),
             "model '%.200s' is not a route or provider/model", j->req.model);
    *out = early_result(dialect, 404, AIR_REASON_NOT_FOUND, msg);
    air__request_cleanup(&j->req);
    free(j);
    return air__error_set(err, AIR_ENOTFOUND, "%s", msg);
  }
  j->res = calloc(1, sizeof(*j->res));
  if (j->res == NULL) {
    air__request_cleanup(&j->req);
    free(j);
    return air__error_set(err, AIR_ENOMEM, "out of memory");
  }
  air_cancel *cancel = o.cancel;
  j->o = o;
  j->obs = obs;
  j->dialect = api;
  if (obs.on_span != NULL) {
    /* A call whose spans are asked for is sampled; it continues the
     * application's traceparent when one is given. */
    static const air__sampler always = {false, 1.0};
    const char *tp = o.traceparent;
    j->traced =
        air__trace_begin(&j->trace, tp, tp ? strlen(tp) : 0, &always) == 0;
    air__trace_answer_init(&j->ans);
  }
  air__aggregate_init(&j->agg);
  pthread_mutex_init(&j->mu, NULL);
  pthread_cond_init(&j->cv, NULL);
  atomic_init(&j->cancel, false);
  worker *w = &c->w[atomic_fetch_add(&c->next, 1) % c->n];
  j->w = w;
  j->token = cancel;
  j->watch.fn = on_cancel;
  j->watch.data = j;
  air__cancel_watch(cancel, &j->watch);
  pthread_mutex_lock(&w->mu);
  j->next = w->incoming;
  w->incoming = j;
  pthread_mutex_unlock(&w->mu);
  uv_async_send(&w->async);

  pthread_mutex_lock(&j->mu);
  while (!j->done) pthread_cond_wait(&j->cv, &j->mu);
  pthread_mutex_unlock(&j->mu);

  rc = j->rc;
  if (j->res->body == NULL) {
    /* Ended before the exchange ran (cancelled first, or no memory). */
    air_chat_result_free(j->res);
    j->res = rc == AIR_ECANCELED
                 ? early_result(dialect, 499, AIR_REASON_ABORTED, "cancelled")
                 : early_result(dialect, 500, AIR_REASON_SERVER_ERROR,
                                air_strerror(rc));
  }
  *out = j->res;
  air__aggregate_cleanup(&j->agg);
  air__request_cleanup(&j->req);
  pthread_cond_destroy(&j->cv);
  pthread_mutex_destroy(&j->mu);
  free(j);
  settle_error(rc, *out, err);
  if (obs.on_settled) {
    const air_chat_result *r = *out;
    obs.on_settled(obs.data, rc, r ? r->log : NULL, r ? r->n_log : 0);
  }
  return rc;
}
