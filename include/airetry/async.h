/*
 * airetry/async.h: the client for a caller that runs its own event loop, in
 * the manner of libcurl's multi interface: a descriptor and a timeout to
 * wait on, and a perform step that runs what is ready without blocking.
 * Part of the public API; include <airetry.h>, the umbrella over them all.
 *
 * The loop of a caller on poll(2) (select, epoll, or a libuv, libevent or
 * GLib loop watching the descriptor, work the same way):
 *
 *   struct pollfd p = {.fd = air_async_fd(a), .events = POLLIN};
 *   unsigned running = 1;
 *   while (running > 0) {
 *     poll(&p, 1, air_async_timeout(a));
 *     air_async_perform(a, &running);
 *   }
 */
#ifndef AIRETRY_ASYNC_H
#define AIRETRY_ASYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airetry/client.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * An async handle: providers and routes from a config, breaker/sticky state
 * of its own, one event loop and one connection pool (libcurl multi on
 * libuv), and no thread: everything it does runs inside air_async_perform,
 * on the thread that calls it. One thread at a time uses a handle and its
 * calls; only a call's cancel token may be triggered from another thread
 * (it wakes the descriptor).
 */
typedef struct air_async air_async;
/* One call in flight on a handle. */
typedef struct air_async_call air_async_call;

/* cfg must outlive the handle; air_global_init must have run. AIR_EINVAL,
 * AIR_ENOMEM, or AIR_EIO when the event loop cannot start; err says which. */
AIR_EXTERN int air_async_new(const air_config *cfg, air_async **out,
                             air_error *err);
/*
 * Cancels every call in flight and frees the handle. Each of those calls
 * ends as a cancelled call does, its on_settled and on_done (rc
 * AIR_ECANCELED) running before this returns, so every call started gets
 * its on_done exactly once. From inside a callback of the handle it does
 * nothing (a caller frees the handle after air_async_perform returned).
 */
AIR_EXTERN void air_async_free(air_async *a);

/*
 * The descriptor to wait on for reading: it becomes readable when
 * air_async_perform has something to do (a socket, a cancel from another
 * thread, a call started). The same for the handle's life; the caller
 * never reads nor closes it. (The descriptor of the handle's libuv loop,
 * uv_backend_fd: on Linux an epoll descriptor.)
 */
AIR_EXTERN int air_async_fd(const air_async *a);
/*
 * How long, in milliseconds, the caller may wait on the descriptor before
 * calling air_async_perform anyway (a deadline, a backoff or a hedge falls
 * due): 0 for at once, -1 for as long as it takes the descriptor. Read it
 * again after every air_async_perform and air_async_chat.
 */
AIR_EXTERN int air_async_timeout(air_async *a);
/*
 * Runs what is ready, without blocking: I/O, timers, the calls started and
 * cancelled since. Every callback of the handle's calls (on_part, the
 * observers, on_done) runs inside it, on this thread. *running (may be
 * NULL): the calls started whose on_done has not run yet. Returns 0;
 * AIR_EINVAL for a NULL handle; AIR_ESTATE from inside one of the handle's
 * callbacks (nothing runs).
 */
AIR_EXTERN int air_async_perform(air_async *a, unsigned *running);

/* Set size to sizeof(air_async_opts) (AIR_ASYNC_OPTS_INIT does). */
typedef struct air_async_opts {
  size_t size;
  /* Each part after commit, as air_chat_opts.on_part says; NULL: the answer
   * is held whole (commit: complete). */
  int (*on_part)(void *data, const air_part *p);
  /* Exactly once per call air_async_chat started, last of its callbacks:
   * rc and res as air_client_chat returns them (0, AIR_EUPSTREAM,
   * AIR_ECANCELED; AIR_ENOMEM when memory ran out, res then NULL). res is
   * the callback's to free (air_chat_result_free). The call's handle is
   * invalid once it returns. NULL: the result is freed. */
  void (*on_done)(void *data, int rc, air_chat_result *res);
  void *data; /* passed to on_part and on_done */
  /* As for air_client_chat; they run inside air_async_perform. May be
   * NULL. */
  const air_observers *observers;
  air_cancel *cancel;      /* may be NULL; may be triggered from any thread */
  const char *traceparent; /* as air_chat_opts.traceparent */
} air_async_opts;
#define AIR_ASYNC_OPTS_INIT \
  { .size = sizeof(air_async_opts) }

/*
 * Starts one chat call: body is a request in `dialect` as for
 * air_client_chat, whose "model" names a route or a "provider/model"; opts
 * may be NULL (the answer held whole, the result freed). Returns 0 and, when
 * out is not NULL, *out: the call's handle, valid until its on_done
 * returns. The call begins in the next air_async_perform; no callback runs
 * inside this function. A request refused at once fires no callback and
 * leaves *out untouched: AIR_EINVAL (a NULL argument, an unknown dialect,
 * opts->size too small, a bad request), AIR_EPARSE (a body that is not
 * JSON), AIR_ENOTFOUND (an unknown model), AIR_ENOMEM, AIR_ESTATE (the
 * handle is being freed); err (may be NULL) says why.
 */
AIR_EXTERN int air_async_chat(air_async *a, air_dialect dialect,
                              const char *body, size_t len,
                              const air_async_opts *opts, air_async_call **out,
                              air_error *err);
/*
 * Cancels a call: it ends in a later air_async_perform with on_done's rc
 * AIR_ECANCELED (unless it ended first); nothing runs inside this call.
 * A no-op from inside the call's own on_done.
 */
AIR_EXTERN void air_async_cancel(air_async_call *call);

#ifdef __cplusplus
}
#endif
#endif
