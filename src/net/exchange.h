/*
 * One caller request driven to its end on a libuv loop: the asynchronous
 * counterpart of air_stream, used by the client API and the gateway. It
 * runs the engine (air_run_*), builds each attempt's upstream request with
 * the target's codec, moves bytes with the transport, arms every deadline of
 * docs/design.md §2.3 as a loop timer (loop.h), decodes the stream (sse +
 * codec) and passes it through the commit gate. Everything runs on the loop's
 * thread.
 */
#ifndef AIR__EXCHANGE_H
#define AIR__EXCHANGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "airetry.h"
#include "commit.h"
#include "loop.h"
#include "pool.h"
#include "dialect.h"
#include "transport.h"

/* While a continuation's rescue runs, the caller gets a keep-alive this
 * often (docs/design.md §3.5). */
#define AIR__CONT_KEEPALIVE_MS 10000u

typedef struct air__exchange air__exchange;

/* Exchanges and their legs kept for the next exchanges of one loop thread
 * (pool.h). Zeroed: empty. Emptied by air__exchange_pools_cleanup
 * once every exchange started with it has been freed (its timer closed). */
typedef struct air__exchange_pools {
  air__pool exchanges;
  air__pool legs;
} air__exchange_pools;
void air__exchange_pools_cleanup(air__exchange_pools *p);
/* A request's trace (spans.h). */
typedef struct air__trace air__trace;

/* What the exchange knows when it commits. Valid during the callback. */
typedef struct air__commit_info {
  const char *target;        /* "provider/model" that answers */
  unsigned attempts;         /* the answering attempt's number */
  unsigned made;             /* attempts made so far, every racer and hedge
                                included (air__run_attempts): the
                                x-airetry-attempts header */
  air_dialect upstream;      /* the answering upstream's dialect */
  uint64_t ms;               /* since the exchange started */
  const air_header *headers; /* the answering response's headers (valid
                                during on_commit only) */
  size_t n_headers;
  bool continuable; /* a continuation may follow (docs/design.md §3.5: the
                       route has it on and the caller streams): a
                       consumer that forwards raw events lets its
                       encoder observe them (encoder_observe) */
} air__commit_info;

/* The seam of a continuation (docs/design.md §3.5): from this call on, the
 * released events continue the answer with another attempt's parts (raw
 * NULL: nothing of it may be forwarded as bytes). Valid during on_continue
 * only. */
typedef struct air__continue_info {
  const char *target;    /* the continuation's "provider/model" */
  unsigned attempt;      /* its number */
  uint64_t at_char;      /* text the caller had, in characters (UTF-8 code
                            points): where the continuation joins */
  uint64_t input_tokens; /* usage of the attempt it continues, to be added to
                            what the end reports (air__encoder_add_usage) */
  uint64_t output_tokens;
} air__continue_info;

/* One continuation that joined the answer (its seam opened). */
typedef struct air__continued {
  const char *target; /* valid as long as the exchange */
  unsigned attempt;
  uint64_t at_char;
} air__continued;

/* The end of an exchange. Valid during on_end only. */
typedef struct air__exchange_result {
  int rc;               /* 0, AIR_EUPSTREAM, AIR_ECANCELED */
  bool committed;       /* something was released (final) */
  air_reason reason;    /* failures: the last failure's reason */
  int status;           /* failures: the last upstream status (0 none) */
  const char *message;  /* failures: the last failure's message */
  bool has_retry_after; /* a Retry-After hint of the last failure */
  uint64_t retry_after_ms;
  const char *target;     /* the last attempt's target ("" when none) */
  const char *answered;   /* the target whose answer was released (it
                             answered: committed, or a judged answer
                             returned as it is), NULL when none did */
  const air_attempt *log; /* every attempt, and skipped targets */
  size_t n_log;
  unsigned n_attempts;       /* attempts made (skipped entries not counted) */
  uint64_t first_content_ms; /* since start; 0 when nothing was released */
  uint64_t total_ms;
  uint64_t upstream_wait_ms; /* time spent waiting for upstreams and backoffs */
  unsigned malformed;        /* malformed events skipped, all attempts */
  const air__continued *continued; /* the continuations that joined, in
                                      order (docs/design.md §3.5) */
  size_t n_continued;
} air__exchange_result;

typedef struct air__exchange_cb {
  /* Once, before the first released event. */
  void (*on_commit)(void *data, const air__commit_info *info);
  /* Each released event (raw upstream bytes + decoded parts), in order;
   * raw is NULL when the caller does not stream (its answer is whole: the
   * bytes are never forwarded) and for a whole upstream body. Return 1 to
   * pause the upstream until air__exchange_resume. */
  int (*on_event)(void *data, const air__gate_event *ev);
  /* After the events of one upstream read were handed over (so a consumer
   * can write them to its client in one go). Return 1 to pause the
   * upstream until air__exchange_resume. May be NULL. */
  int (*on_flush)(void *data);
  /* After each failed attempt, once the policy decided (wait_ms is set).
   * May be NULL. */
  void (*on_failed)(void *data, const air_attempt *a);
  /* Exactly once, at the end (also after air__exchange_cancel), and the
   * last call: nothing of this struct is called after it. Never inside
   * air__exchange_start nor inside another of these callbacks (then it
   * comes on a later loop turn), so the consumer may free its data in it. */
  void (*on_end)(void *data, const air__exchange_result *res);
  void *data;
  /* Continuation (docs/design.md §3.5), both may be NULL. on_continue: once per
   * continuation, at its seam, before its first released event; the
   * consumer's encoder takes over the caller's stream then
   * (air__encoder_take_over, add_usage, add_continued). on_keepalive: every
   * AIR__CONT_KEEPALIVE_MS while a rescue runs (from the failure after
   * commit to the seam): the consumer may send the caller a keep-alive. */
  void (*on_continue)(void *data, const air__continue_info *ci);
  void (*on_keepalive)(void *data);
} air__exchange_cb;

typedef struct air__exchange_opts {
  const air_config *cfg;
  air_state *state;
  const air__request *req; /* borrowed until on_end */
  const char *model;       /* route or "provider/model" */
  const char *const
      *forward;            /* "Name: value" lines for same-dialect upstreams */
  const air_clock *clock;  /* NULL: the system clock */
  const air__trace *trace; /* borrowed until on_end; non-NULL: each
                              attempt sends its span's traceparent */
  air__exchange_pools *pools; /* NULL: none; else the loop thread's, which
                                 must outlive the exchange (freed) */
} air__exchange_opts;

/*
 * Starts the exchange. Returns 0 (on_end will fire exactly once), or
 * AIR_ENOTFOUND (unknown model), AIR_ENOMEM, AIR_EINVAL — then no callback
 * fires. No callback runs inside this call: the first attempt starts on
 * the loop's next turn.
 */
int air__exchange_start(uv_loop_t *loop, air__transport *t,
                        const air__exchange_opts *o, const air__exchange_cb *cb,
                        air__exchange **out);
/* The same on any loop and transport (loop.h, transport.h): the simulator's
 * virtual clock and scripted upstreams. Both are copied. */
int air__exchange_start_on(const air__loop *loop, const air__transport_if *tr,
                           const air__exchange_opts *o,
                           const air__exchange_cb *cb, air__exchange **out);
/* A caller cancel: aborts the upstream transfers, ends pending waits; from
 * this call on, the consumer hears on_end only (rc AIR_ECANCELED). Called
 * from outside the callbacks, on_end fires before this returns; from
 * inside one, the cancel is carried out when that callback returns and
 * on_end comes later. A no-op once on_end fired. */
void air__exchange_cancel(air__exchange *x);
/* Resumes the upstream after on_event or on_flush returned 1 (from inside a
 * callback: on the next loop turn). While paused, the gap between events
 * (chunk_ms) is not counted: a caller that does not read is bounded by its
 * own write timeout, never blamed on the upstream. */
void air__exchange_resume(air__exchange *x);
/* Frees the exchange; only after on_end fired. Timers close asynchronously. */
void air__exchange_free(air__exchange *x);

#endif
