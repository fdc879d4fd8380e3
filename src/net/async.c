/*
 * air_async (airetry/async.h): one chat loop (chat.h) that the caller's own
 * event loop drives, without a thread: the caller waits on the libuv loop's
 * backend descriptor and timeout, and air_async_perform runs the loop once
 * without blocking (UV_RUN_NOWAIT). A call is started and cancelled through
 * the loop's wake-up, as the client's worker threads do it, so neither
 * happens inside the caller's call: every callback runs inside perform.
 */
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "error.h"

struct air_async {
  air__chat_loop l;
  air_state *state;
  unsigned running; /* calls started whose on_done has not run */
  bool performing;  /* inside air_async_perform (or air_async_free) */
  bool freeing;     /* air_async_free runs: no call may start */
};

struct air_async_call {
  air__chat ch;
  air_async *a;
  air_async_opts o; /* the caller's, as its version has them */
  bool done;        /* on_done runs: air_async_cancel does nothing */
};

/* The minimum size of air_async_opts: its first version. */
#define ASYNC_OPTS_SIZE_V0 AIR__SIZE_TO(air_async_opts, traceparent)

int air_async_new(const air_config *cfg, air_async **out, air_error *err) {
  if (cfg == NULL || out == NULL)
    return air__error_set(err, AIR_EINVAL, "cfg and out are required");
  air_async *a = calloc(1, sizeof(*a));
  if (a == NULL) return air__error_set(err, AIR_ENOMEM, "out of memory");
  int rc = air_state_new(cfg, &a->state, err);
  if (rc != 0) {
    free(a);
    return rc;
  }
  int e = 0;
  rc = air__chat_loop_init(&a->l, cfg, a->state, &e);
  if (rc != 0) {
    if (e != 0)
      air__error_set(err, rc, "event loop: %s", uv_strerror(e));
    else
      air__error_set(err, rc, "the HTTP transport did not start");
    air_state_free(a->state);
    free(a);
    return rc;
  }
  *out = a;
  return air__error_set(err, 0, NULL);
}

void air_async_free(air_async *a) {
  if (a == NULL || a->performing) return;
  a->freeing = true;
  a->performing = true;
  /* Calls not started end at once, those in flight are cancelled (each
   * settles through `settle`); then the loop closes and uv_run returns. */
  air__chat_loop_stop(&a->l, true);
  uv_run(&a->l.loop, UV_RUN_DEFAULT);
  air__chat_loop_cleanup(&a->l);
  air_state_free(a->state);
  free(a);
}

int air_async_fd(const air_async *a) {
  return a != NULL ? uv_backend_fd(&a->l.loop) : -1;
}

int air_async_timeout(air_async *a) {
  if (a == NULL) return -1;
  /* The loop's clock is the one its timers were set on: brought up to
   * date, so the time the caller spent since the last perform counts. */
  uv_update_time(&a->l.loop);
  return uv_backend_timeout(&a->l.loop);
}

int air_async_perform(air_async *a, unsigned *running) {
  if (a == NULL) return AIR_EINVAL;
  if (a->performing) return AIR_ESTATE;
  a->performing = true;
  uv_run(&a->l.loop, UV_RUN_NOWAIT);
  a->performing = false;
  if (running != NULL) *running = a->running;
  return 0;
}

/* A call ended (inside perform or free): its result to on_done, then it is
 * gone. */
static void settle(air__chat *ch) {
  air_async_call *call = ch->owner;
  air_observers obs = ch->obs;
  air_chat_result *res = NULL;
  int rc = air__chat_settle(ch, &res, NULL);
  call->done = true;
  call->a->running--;
  air__chat_settled(&obs, rc, res);
  if (call->o.on_done != NULL)
    call->o.on_done(call->o.data, rc, res);
  else
    air_chat_result_free(res);
  free(call);
}

int air_async_chat(air_async *a, air_dialect dialect, const char *body,
                   size_t len, const air_async_opts *opts, air_async_call **out,
                   air_error *err) {
  if (a == NULL || body == NULL)
    return air__error_set(err, AIR_EINVAL, "handle and body are required");
  if (a->freeing)
    return air__error_set(err, AIR_ESTATE, "the handle is being freed");
  air_async_opts o;
  if (opts == NULL) {
    memset(&o, 0, sizeof(o));
  } else {
    int rc = air__opts_copy(&o, sizeof(o), opts, ASYNC_OPTS_SIZE_V0,
                            "air_async_opts", err);
    if (rc != 0) return rc;
  }
  air_chat_opts co = AIR_CHAT_OPTS_INIT;
  co.on_part = o.on_part;
  co.data = o.data;
  co.observers = o.observers;
  co.cancel = o.cancel;
  co.traceparent = o.traceparent;
  air_async_call *call = calloc(1, sizeof(*call));
  if (call == NULL) return air__error_set(err, AIR_ENOMEM, "out of memory");
  air_chat_result *early = NULL;
  int rc = air__chat_prepare(&call->ch, a->l.cfg, dialect, body, len, &co,
                             &early, err);
  if (rc != 0) {
    /* The synchronous client returns the dialect's error body for a bad
     * request; here err says why and nothing is left to free. */
    air_chat_result_free(early);
    free(call);
    return rc;
  }
  call->a = a;
  call->o = o;
  a->running++;
  air__chat_submit(&a->l, &call->ch, settle, call);
  if (out != NULL) *out = call;
  return air__error_set(err, 0, NULL);
}

void air_async_cancel(air_async_call *call) {
  if (call == NULL || call->done) return;
  air__chat_cancel(&call->ch);
}
