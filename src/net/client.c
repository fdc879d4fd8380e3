/*
 * The client (DESIGN.md 7): worker threads, each with one uv loop and one
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
#include "exchange.h"

typedef struct worker worker;

typedef struct job {
  struct job *next;
  worker *w;
  air__request req;
  const air_chat_cb *cb;
  atomic_bool cancel;
  air_cancel *token;         /* the caller's, or NULL */
  air__cancel_watcher watch; /* on token until the job is done */
  air__exchange *x;
  air__aggregate agg;
  air_dialect dialect;
  air_chat_result *res;
  int rc;
  bool done;
  bool lost;  /* part of the answer could not be kept: never a success */
  pthread_mutex_t mu;
  pthread_cond_t cv;
} job;

struct worker {
  air_client *cl;
  pthread_t thread;
  uv_loop_t loop;
  uv_async_t async;
  air__transport *t;
  pthread_mutex_t mu;
  job *incoming;     /* under mu */
  bool stopping;     /* under mu */
  job *active;       /* loop thread only */
  bool closed;       /* loop thread only: async closed, the loop ends */
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
  return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : AIR_ENOMEM;
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

/* ---- the worker's side ----------------------------------------------------------- */

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
  if (j->cb && j->cb->on_commit) j->cb->on_commit(j->cb->data, ci->target, ci->attempts);
}

static int on_event(void *data, const air__gate_event *ev) {
  job *j = data;
  for (size_t i = 0; i < ev->n_parts; i++) {
    if (air__aggregate_add(&j->agg, &ev->parts[i]) != 0) {
      j->lost = true;
      air__exchange_cancel(j->x);
      break;
    }
    if (j->cb && j->cb->on_part && j->cb->on_part(j->cb->data, &ev->parts[i]) != 0) {
      atomic_store(&j->cancel, true);
      air__exchange_cancel(j->x);
      break;
    }
  }
  return 0;
}

static void on_failed(void *data, const air_attempt *a) {
  job *j = data;
  if (j->cb && j->cb->on_failed) j->cb->on_failed(j->cb->data, a);
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
    out[i].field = log[i].field ? dupn(log[i].field, strlen(log[i].field)) : NULL;
  }
  return out;
}

static void on_end(void *data, const air__exchange_result *r) {
  job *j = data;
  if (r->committed && r->rc == AIR_EUPSTREAM && j->cb && j->cb->on_part) {
    /* A failure after commit reaches the part callback once, as an ERROR
     * part named after the reason (as in air_stream). */
    air_part err;
    memset(&err, 0, sizeof(err));
    err.kind = AIR_PART_ERROR;
    err.name = air_reason_name(r->reason);
    err.name_len = strlen(err.name);
    err.text = r->message ? r->message : "";
    err.text_len = strlen(err.text);
    j->cb->on_part(j->cb->data, &err);
  }
  air_chat_result *res = j->res;
  const air__provider_ops *ops = air__provider_get(j->dialect);
  air__buf body;
  air__buf_init(&body, 256u << 20);
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
      if (ops->encode_error_body(res->status, reason, message, NULL, 0, &body) != 0)
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
  };
  air__exchange_cb cb = {on_commit, on_event, NULL, on_failed, on_end, j};
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
  /* Cancels: the exchange's on_end unlinks the job, so restart the scan. */
  bool again = true;
  while (again) {
    again = false;
    for (job *j = w->active; j; j = j->next) {
      if (atomic_load(&j->cancel) && j->x != NULL) {
        air__exchange_cancel(j->x);
        again = true;
        break;
      }
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

/* ---- the caller's side ------------------------------------------------------------ */

int air_client_new(const air_config *cfg, unsigned workers, air_client **out) {
  if (cfg == NULL || out == NULL) return AIR_EINVAL;
  air_client *c = calloc(1, sizeof(*c));
  if (c == NULL) return AIR_ENOMEM;
  c->cfg = cfg;
  c->n = workers ? workers : 1;
  c->w = calloc(c->n, sizeof(worker));
  int rc = c->w ? air_state_new(cfg, &c->state) : AIR_ENOMEM;
  for (unsigned i = 0; rc == 0 && i < c->n; i++) {
    worker *w = &c->w[i];
    w->cl = c;
    pthread_mutex_init(&w->mu, NULL);
    if (uv_loop_init(&w->loop) != 0) {
      rc = AIR_ENOMEM;
      break;
    }
    uv_async_init(&w->loop, &w->async, on_async);
    w->async.data = w;
    rc = air__transport_new(&w->loop, NULL, &w->t);
    if (rc == 0 && pthread_create(&w->thread, NULL, worker_main, w) != 0)
      rc = AIR_ENOMEM;
    if (rc == 0) w->started = true;
  }
  if (rc != 0) {
    air_client_free(c);
    return rc;
  }
  *out = c;
  return 0;
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
    uv_run(&w->loop, UV_RUN_DEFAULT);  /* close callbacks, if any are left */
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
  air__buf_init(&body, 1u << 20);
  air__provider_get((air_dialect)d)->encode_error_body(status, r, message, NULL, 0,
                                                     &body);
  res->status = status;
  res->reason = r;
  res->body = body.p ? air__buf_take(&body, &res->body_len) : dupn("", 0);
  air__buf_cleanup(&body);
  res->text = dupn("", 0);
  res->target = dupn("", 0);
  return res;
}

int air_client_chat(air_client *c, air_dialect dialect, const char *body,
                    size_t len, air_cancel *cancel, const air_chat_cb *cb,
                    air_chat_result **out) {
  if (c == NULL || body == NULL || out == NULL) return AIR_EINVAL;
  *out = NULL;
  if (dialect != AIR_DIALECT_OPENAI && dialect != AIR_DIALECT_ANTHROPIC)
    return AIR_EINVAL;
  air_dialect api = dialect;
  job *j = calloc(1, sizeof(*j));
  if (j == NULL) return AIR_ENOMEM;
  air_error err;
  memset(&err, 0, sizeof(err));
  int rc = air__request_parse(api, body, len, &j->req, &err);
  if (rc != 0) {
    *out = early_result(dialect, 400, AIR_REASON_BAD_REQUEST, err.message);
    free(j);
    return rc;
  }
  j->req.stream = cb != NULL && cb->on_part != NULL;
  /* An unknown model is the caller's error, found before any worker runs. */
  air_run *probe = NULL;
  air_action act;
  rc = air_run_new(c->cfg, NULL, j->req.model, NULL, 0, &probe, &act);
  air_run_free(probe);
  if (rc != 0) {
    char msg[300];
    snprintf(msg, sizeof(msg), "model '%.200s' is not a route or provider/model",
             j->req.model);
    *out = early_result(dialect, 404, AIR_REASON_NOT_FOUND, msg);
    air__request_cleanup(&j->req);
    free(j);
    return rc;
  }
  j->res = calloc(1, sizeof(*j->res));
  if (j->res == NULL) {
    air__request_cleanup(&j->req);
    free(j);
    return AIR_ENOMEM;
  }
  j->cb = cb;
  j->dialect = api;
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
  return rc;
}
