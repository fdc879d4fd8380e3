/*
 * The loop interface (docs/design.md §1): how the exchange reaches time. A loop
 * gives one-shot timers and its own "now"; libuv implements it for the
 * library and the gateway (air__loop_uv), the simulator (tests/sim) with a
 * virtual clock that jumps to the next timer. Everything runs on the loop's
 * thread; nothing is thread-safe.
 */
#ifndef AIR__LOOP_H
#define AIR__LOOP_H

#include <stdint.h>

#include <uv.h>

typedef struct air__timer air__timer; /* opaque, owned by the loop impl */
typedef void (*air__timer_fn)(void *arg);

typedef struct air__loop_ops {
  /* A stopped timer that calls fire(arg) when it expires. NULL when out of
   * memory. */
  air__timer *(*timer_new)(void *impl, air__timer_fn fire, void *arg);
  /* (Re)arms t to fire once, after_ms from the loop's now (0: on the next
   * turn, never from inside this call). */
  void (*timer_start)(void *impl, air__timer *t, uint64_t after_ms);
  /* Disarms t; stopping a stopped timer is a no-op. */
  void (*timer_stop)(void *impl, air__timer *t);
  /* Stops and releases t; closed(arg) runs later, from the loop (never
   * inside this call), once t's memory is gone. */
  void (*timer_close)(void *impl, air__timer *t, air__timer_fn closed,
                      void *arg);
  /* The loop's clock in milliseconds (refreshed on each call). */
  uint64_t (*now_ms)(void *impl);
} air__loop_ops;

/* A loop: an ops table and its implementation's state; passed by value. */
typedef struct air__loop {
  const air__loop_ops *ops;
  void *impl;
} air__loop;

/* The libuv implementation over l (which must outlive every timer). */
air__loop air__loop_uv(uv_loop_t *l);

#endif
