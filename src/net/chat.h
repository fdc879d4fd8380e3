/*
 * The client API's calls on a loop (docs/design.md §7), shared by the two
 * ways a caller reaches them: air_client (client.c: worker threads, the
 * caller waits) and air_async (async.c: the caller's own event loop drives
 * one loop). A chat loop is one uv loop with one transport (one libcurl
 * multi: one connection pool) and the calls on it. A call is prepared on
 * the caller's thread (its body parsed, its model checked), handed to the
 * loop through a locked queue and a uv_async (as cancels are), run there as
 * an exchange, and ends with its result built in the caller's dialect.
 */
#ifndef AIR__CHAT_H
#define AIR__CHAT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <uv.h>

#include "airetry.h"
#include "cancel.h"
#include "exchange.h"
#include "limits.h"
#include "spans.h"

typedef struct air__chat air__chat;
typedef struct air__chat_loop air__chat_loop;

/*
 * The call ended, on the loop's thread: rc is set and its cancel token no
 * longer watches it. The owner takes it from here (wakes the caller that
 * waits, or settles it at once); the loop never touches it again.
 */
typedef void (*air__chat_ended_fn)(air__chat *ch);

/* One call. Zeroed, then air__chat_prepare; owned by whoever allocated it. */
struct air__chat {
  air__chat *next; /* the loop's queue, then its list of calls in flight */
  air__chat_loop *l;
  air__chat_ended_fn ended;
  void *owner; /* for ended */
  air__request req;
  air_chat_opts o; /* the caller's, as its version has them */
  air_observers obs;
  atomic_bool cancel;
  air_cancel *token;         /* the caller's, or NULL */
  air__cancel_watcher watch; /* on token until the call ends */
  air__exchange *x;
  air__aggregate agg;
  air_dialect dialect;
  air_chat_result *res;
  int rc;
  bool lost;        /* part of the answer could not be kept: never a success */
  bool cancel_sent; /* air__exchange_cancel was called (the loop: once) */
  char sub_model[AIR__MAX_TARGET_BYTES]; /* the committed target's model: what
                                            replaces an upstream model over
                                            AIR__MAX_IDENT_BYTES */
  bool traced; /* obs.on_span is set: trace is the call's */
  air__trace trace;
  air__trace_answer ans;
};

/* A loop and the calls on it. Fields past `state` belong to chat.c. */
struct air__chat_loop {
  const air_config *cfg;
  air_state *state;
  uv_loop_t loop;
  uv_async_t async;
  air__transport *t;
  pthread_mutex_t mu;
  air__chat *incoming; /* under mu */
  bool stopping;       /* under mu: end once no call is in flight */
  bool abort;          /* under mu: cancel the calls in flight too */
  air__chat *active;   /* loop thread only */
  bool closed;         /* loop thread only: async closed, the loop ends */
};

/*
 * Opens l's loop, its wake-up and its transport for cfg and state (both
 * outlive l). Returns 0; AIR_EIO when the loop does not start (*uv_err:
 * the libuv error), or the transport's error (*uv_err 0). On failure
 * nothing is left open.
 */
int air__chat_loop_init(air__chat_loop *l, const air_config *cfg,
                        air_state *state, int *uv_err);
/*
 * Asks l to end: once no call is in flight (abort: after cancelling the
 * calls in flight, and ending those not started with AIR_ECANCELED, each
 * through its `ended`) it closes what keeps its loop alive, so uv_run
 * returns. Thread-safe. No call may be submitted after it.
 */
void air__chat_loop_stop(air__chat_loop *l, bool abort);
/* Closes what is left of l and its loop, once uv_run returned after
 * air__chat_loop_stop (or when the loop never ran). */
void air__chat_loop_cleanup(air__chat_loop *l);

/*
 * Prepares ch for a call in `dialect` with opts (NULL: none) on cfg: checks
 * the dialect and opts, parses body and checks its model. Returns 0; or
 * AIR_EINVAL (an unknown dialect, opts->size too small) and AIR_ENOMEM with
 * *early untouched; or AIR_EINVAL / AIR_EPARSE (bad request) and
 * AIR_ENOTFOUND (unknown model) with *early set to the result a caller
 * gets for them (the dialect's 400 / 404 body; NULL without memory). On
 * failure ch holds nothing to clean up; err says why.
 */
int air__chat_prepare(air__chat *ch, const air_config *cfg, air_dialect dialect,
                      const char *body, size_t len, const air_chat_opts *opts,
                      air_chat_result **early, air_error *err);
/* Hands a prepared ch to l (its token now watches it); `ended` fires on
 * l's thread once it is over. Thread-safe. */
void air__chat_submit(air__chat_loop *l, air__chat *ch,
                      air__chat_ended_fn ended, void *owner);
/* Cancels ch from any thread: carried out on its loop's next turn. */
void air__chat_cancel(air__chat *ch);
/*
 * After `ended`: ch's result (*res, owned by the caller, NULL only without
 * memory) and its rc, with err filled; ch holds nothing more to clean up.
 */
int air__chat_settle(air__chat *ch, air_chat_result **res, air_error *err);
/* obs->on_settled, if set, with rc and res's log (res may be NULL). */
void air__chat_settled(const air_observers *obs, int rc,
                       const air_chat_result *res);

#endif
