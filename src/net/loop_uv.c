/* The loop interface over libuv: each timer is a malloc'd uv_timer_t. */
#include <stdlib.h>

#include "loop.h"

struct air__timer {
  uv_timer_t h;
  air__timer_fn fire, closed;
  void *arg, *closed_arg;
};

static void on_fire(uv_timer_t *h) {
  air__timer *t = h->data;
  t->fire(t->arg);
}

static air__timer *lt_new(void *impl, air__timer_fn fire, void *arg) {
  air__timer *t = calloc(1, sizeof(*t));
  if (t == NULL) return NULL;
  if (uv_timer_init(impl, &t->h) != 0) {
    free(t);
    return NULL;
  }
  t->h.data = t;
  t->fire = fire;
  t->arg = arg;
  return t;
}

static void lt_start(void *impl, air__timer *t, uint64_t after_ms) {
  /* uv timers count from the loop's cached time, which is stale after a
   * slow callback in this iteration: refresh it first. */
  uv_update_time(impl);
  uv_timer_start(&t->h, on_fire, after_ms, 0);
}

static void lt_stop(void *impl, air__timer *t) {
  (void)impl;
  uv_timer_stop(&t->h);
}

static void on_closed(uv_handle_t *h) {
  air__timer *t = h->data;
  air__timer_fn closed = t->closed;
  void *arg = t->closed_arg;
  free(t);
  if (closed) closed(arg);
}

static void lt_close(void *impl, air__timer *t, air__timer_fn closed,
                     void *arg) {
  (void)impl;
  uv_timer_stop(&t->h);
  t->closed = closed;
  t->closed_arg = arg;
  uv_close((uv_handle_t *)&t->h, on_closed);
}

static uint64_t lt_now(void *impl) {
  uv_update_time(impl);
  return uv_now(impl);
}

static const air__loop_ops uv_ops = {lt_new, lt_start, lt_stop, lt_close,
                                     lt_now};

air__loop air__loop_uv(uv_loop_t *l) {
  air__loop lp = {&uv_ops, l};
  return lp;
}
