/*
 * The client (docs/design.md §7): worker threads, each running one chat loop
 * (chat.h: one uv loop and one transport, one curl multi handle: one
 * connection pool). A call is prepared on the caller's thread, handed to a
 * worker, run there, and the caller waits on a condition variable.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "chat.h"
#include "error.h"

typedef struct worker {
  air__chat_loop l;
  pthread_t thread;
  bool ready;   /* l is open */
  bool started; /* its thread runs */
} worker;

struct air_client {
  const air_config *cfg;
  air_state *state;
  worker *w;
  unsigned n;
  atomic_uint next;
};

/* One call and the caller that waits for it. */
typedef struct job {
  air__chat ch;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done; /* under mu */
} job;

int air_global_init(void) {
  CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
  if (rc == CURLE_OK) return 0;
  return rc == CURLE_OUT_OF_MEMORY ? AIR_ENOMEM : AIR_EIO;
}

void air_global_cleanup(void) {
  curl_global_cleanup();
}

static void *worker_main(void *arg) {
  worker *w = arg;
  uv_run(&w->l.loop, UV_RUN_DEFAULT);
  return NULL;
}

int air_client_new(const air_config *cfg, unsigned workers, air_client **out,
                   air_error *err) {
  if (cfg == NULL || out == NULL)
    return air__error_set(err, AIR_EINVAL, "cfg and out are required");
  air_client *c = calloc(1, sizeof(*c));
  if (c == NULL) return air__error_set(err, AIR_ENOMEM, "out of memory");
  c->cfg = cfg;
  c->n = workers ? workers : 1;
  c->w = calloc(c->n, sizeof(worker));
  if (c->w == NULL) {
    free(c);
    return air__error_set(err, AIR_ENOMEM, "out of memory");
  }
  int rc = air_state_new(cfg, &c->state, err);
  const char *what = NULL;
  for (unsigned i = 0; rc == 0 && i < c->n; i++) {
    worker *w = &c->w[i];
    int e = 0;
    rc = air__chat_loop_init(&w->l, cfg, c->state, &e);
    if (rc != 0) {
      if (e != 0)
        air__error_set(err, rc, "worker %u: event loop: %s", i, uv_strerror(e));
      else
        what = "the HTTP transport did not start";
      break;
    }
    w->ready = true;
    if ((e = pthread_create(&w->thread, NULL, worker_main, w)) != 0) {
      rc = AIR_EIO;
      air__error_set(err, rc, "worker %u: thread: %s", i,
                     uv_strerror(uv_translate_sys_error(e)));
      break;
    }
    w->started = true;
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
    if (!w->ready) continue;
    if (w->started) {
      /* The calls in flight end as they would have; then the loop ends. */
      air__chat_loop_stop(&w->l, false);
      pthread_join(w->thread, NULL);
    }
    air__chat_loop_cleanup(&w->l);
  }
  air_state_free(c->state);
  free(c->w);
  free(c);
}

/* The call ended, on its worker: wake the caller. */
static void wake(air__chat *ch) {
  job *j = ch->owner;
  pthread_mutex_lock(&j->mu);
  j->done = true;
  pthread_cond_signal(&j->cv);
  pthread_mutex_unlock(&j->mu);
}

int air_client_chat(air_client *c, air_dialect dialect, const char *body,
                    size_t len, const air_chat_opts *opts,
                    air_chat_result **out, air_error *err) {
  if (c == NULL || body == NULL || out == NULL)
    return air__error_set(err, AIR_EINVAL, "client, body and out are required");
  job *j = calloc(1, sizeof(*j));
  if (j == NULL) return air__error_set(err, AIR_ENOMEM, "out of memory");
  air_chat_result *res = NULL;
  int rc =
      air__chat_prepare(&j->ch, c->cfg, dialect, body, len, opts, &res, err);
  if (rc != 0) {
    free(j);
    if (res != NULL) *out = res;
    return rc;
  }
  pthread_mutex_init(&j->mu, NULL);
  pthread_cond_init(&j->cv, NULL);
  worker *w = &c->w[atomic_fetch_add(&c->next, 1) % c->n];
  air__chat_submit(&w->l, &j->ch, wake, j);

  pthread_mutex_lock(&j->mu);
  while (!j->done) pthread_cond_wait(&j->cv, &j->mu);
  pthread_mutex_unlock(&j->mu);

  air_observers obs = j->ch.obs;
  rc = air__chat_settle(&j->ch, &res, err);
  if (res != NULL) *out = res;
  pthread_cond_destroy(&j->cv);
  pthread_mutex_destroy(&j->mu);
  free(j);
  air__chat_settled(&obs, rc, res);
  return rc;
}
