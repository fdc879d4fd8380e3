/*
 * Internals of the exchange (exchange.h), shared by its three files:
 * exchange.c (lifecycle and stepping: start, the engine's actions, the
 * timer, cancel, resume, the end), exchange_leg.c (one attempt in flight: its
 * launch, the transport's callbacks, decoding, its commit gate, its
 * failure) and exchange_cont.c (continuation). Nothing outside them
 * includes this file.
 *
 * Racers (docs/design.md §3.6): every attempt in flight is a leg with its own
 * transfer, SSE parser, decoder, commit gate, headers, failure and
 * deadlines. Without hedging one leg runs at a time; with it the engine
 * starts hedges beside the running leg (air_run_hedge at hedge_at_ms), the
 * first leg whose content arrives wins (air_run_first_part, then
 * air_run_ready_to_commit at its release) and the engine's CANCELs stop the
 * others at once: their transfers are removed, which closes their
 * upstream connections.
 *
 * Continuation (docs/design.md §3.5, opt-in per route): while the answer of a
 * streamed caller may still be continued, the exchange keeps the text it
 * released (at most continuation.max_sent_bytes) and notes what forbids a
 * continuation (a tool call, reasoning after text, n > 1, logprobs, too
 * much text: AIR_CONTF_NEVER; a JSON response: AIR_CONTF_NO_INSTRUCT). A
 * failure after commit goes to the engine (air_run_fail), which may answer
 * CONTINUE (or WAIT, then CONTINUE): a leg marked `cont` asks the target for
 * the rest (air__request_build_continuation), its events pass its own gate
 * (the refusal hold) and then the seam (seam.h), which drops a repeat and
 * fails a diverging restart or a preamble. Nothing of it is released before
 * the seam opens; then the engine commits it (air_run_ready_to_commit), the
 * consumer hears on_continue and the continuation's parts follow (raw
 * NULL: the consumer's encoder takes over). From the failure to the seam
 * (the rescue) the consumer gets on_keepalive every AIR__CONT_KEEPALIVE_MS,
 * and the rescue ends at the CONTINUE's deadline_ms (continuation.max_gap_ms).
 *
 * Reentrancy: the transport calls on_head/on_body/on_done from inside
 * libcurl; the exchange never removes a transfer from inside on_head or
 * on_body (its own: it returns non-zero from on_body instead, and finishes
 * the attempt in on_done; another leg's: marked and removed from the next
 * loop turn, the reap).
 *
 * The consumer (exchange.h) is called through air__tell_* only, which
 * count the callouts in progress (x->calling) and call nothing once the
 * exchange ended or a cancel is pending. A cancel made inside a transfer
 * callback or a consumer callout is recorded (cancel_pending) and carried
 * out where the call chain unwinds (on_done, step, the timer) or, at the
 * latest, on the next loop turn; from the cancel on, the consumer hears
 * on_end only. A resume made inside one waits for the next loop turn
 * (resume_pending). Nothing of the consumer's runs inside
 * air__exchange_start (libuv's rule): the first attempt is launched there,
 * but a launch that fails at once is told on the next loop turn (kick), and
 * on_end, when it would come inside start or inside a callout, is delivered
 * on the next loop turn (end_due).
 */
#ifndef AIR__EXCHANGE_INT_H
#define AIR__EXCHANGE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "commit.h"
#include "dialect.h"
#include "engine.h"
#include "exchange.h"
#include "limits.h"
#include "seam.h"
#include "sse.h"
#include "upstream.h"

#define AIR__LEG_INLINE_PARTS 4 /* parts of one SSE event kept inline */
/* Legs: every racer, plus as many again for losers whose transfer is
 * removed on the next loop turn while new attempts start. */
#define AIR__MAX_LEGS (2 * AIR__MAX_RACERS)

/* How a leg reads its response. */
enum air__read {
  AIR__READ_NONE, /* no head yet */
  AIR__READ_SSE,  /* a 200 event stream: decoded as it comes */
  AIR__READ_BODY, /* anything else: kept whole (err), decoded at the end */
};

enum air__leg_state {
  AIR__LEG_FREE,    /* unused */
  AIR__LEG_RUNNING, /* an attempt in flight */
  AIR__LEG_WAITING, /* the backoff WAIT after a failed attempt (id: that
                       one) */
  AIR__LEG_LOST,    /* cancelled from inside a transfer callback: its
                       transfer is removed on the next loop turn (reap) */
};

/* A leg's deadlines, in the order the timer runs them on a tie. */
enum {
  AIR__DUE_FIRST_BYTE,
  AIR__DUE_ATTEMPT,
  AIR__DUE_PART,
  AIR__DUE_WAIT,
  AIR__DUE_COUNT
};

typedef struct air__leg air__leg;

/* One attempt in flight, or a backoff wait (exchange_leg.c). */
struct air__leg {
  air__exchange *x;
  enum air__leg_state state;
  unsigned id;        /* the engine's attempt id */
  size_t log;         /* its attempt log entry */
  const char *target; /* its target and 1-based number: a judged answer */
  unsigned no;        /* released after the run stopped still names it */
  int body_stop;      /* finish_body: what stopped the release (the fields
                         are ordered to leave no holes) */
  const air__dialect_ops *ops;
  void *xfer;                   /* the transfer in flight (tr's), or NULL */
  uint64_t due[AIR__DUE_COUNT]; /* first byte, attempt, part, wait: 0 = off */
  uint64_t wait_len;            /* AIR__LEG_WAITING: the wait's length */
  enum air__read mode;
  bool pause_pending; /* the consumer asked to pause during a read */
  bool content_told;  /* air_run_first_part was called for it */
  bool paused;        /* the consumer paused its transfer: chunk_ms waits */
  air__upstream up;   /* its status, kept headers and failure */
  air__gate gate;
  air__sse sse;
  air__decoder dec;
  air__buf body; /* upstream request body */
  /* A non-stream response body. An error (non-200) body is diagnostic
   * only: its first AIR__MAX_ERROR_BODY_BYTES are kept for classification
   * and the rest is read and dropped. A whole 200 body is an answer:
   * bounded by limits.max_response_bytes, past it the attempt fails
   * (malformed), never a silently shortened answer. */
  air__buf err;
  air_part parts_inline[AIR__LEG_INLINE_PARTS];
  air_part *parts; /* parts_inline, or a heap array for big events */
  size_t n_parts, cap_parts;
  uint64_t attempt_start;
  /* launch == 2: offsets into up.strs (air__upstream_keep) */
  const char *skip_field;
  const char *skip_msg;
  air_action act; /* the ATTEMPT it runs (sent again with the tool) */
  /* A continuation (docs/design.md §3.5): its style, whether its seam opened
   * (then it is the committed attempt, x->win), whether the seam failed it
   * (final), and the usage it reported before the seam. */
  bool cont;
  bool open;
  bool seam_failed;
  bool native_json; /* the attempt asks a schema natively (docs/design.md
                       §4, structured_output) */
  air_cont_style style;
  uint64_t u_in, u_out;
  air_part *cparts; /* the parts it releases, rebuilt per event */
  bool *coff;       /* cparts[i].text is an offset into x->c.joined */
  size_t cap_cparts;
};

/* What continuation needs across the request's attempts
 * (exchange_cont.c). */
typedef struct air__cont {
  bool on;             /* the route continues and the caller streams */
  bool never;          /* AIR_CONTF_NEVER was told: keep nothing more */
  bool text_began;     /* text was released */
  air__buf sent;       /* the released text (max_sent_bytes) */
  uint64_t sent_chars; /* its UTF-8 code points */
  uint64_t in_tok;     /* usage of the committed attempt so far */
  uint64_t out_tok;
  uint64_t out_done;  /* output tokens of the attempts joined before it */
  int64_t caller_max; /* the caller's max tokens, 0 when unset */
  bool rescuing;      /* a failure after commit is being continued */
  bool broke;         /* the released answer broke (brk_* say how) */
  size_t brk_log;     /* the attempt log entry of the latest break */
  bool brk_hint;      /* its Retry-After hint */
  uint64_t brk_hint_ms;
  uint64_t keepalive_due;
  bool seam_live;       /* seam is initialised */
  air__seam *seam;      /* from the first continuation on (allocated then:
                           most exchanges never continue) */
  air__buf joined;      /* text the seam lets through, per event */
  air__continued *list; /* the continuations that joined */
  size_t n_list, cap_list;
} air__cont;

struct air__exchange {
  air__transport_if tr; /* upstreams (transport.h) */
  air__exchange_opts o;
  air__exchange_cb cb;
  const air_clock *clock;
  air_run *run;
  air_action act;
  air__gate_cfg gcfg; /* every leg's gate, deadlines set per attempt */
  air__deadlines dl;  /* one loop timer (loop.h), armed at the earliest due */
  uint64_t hedge_due; /* air_run_hedge then (0: off) */
  air__leg *legs[AIR__MAX_LEGS]; /* made on first use: one without
                                    hedging */
  air__leg *win;                 /* the leg whose answer is released, or NULL */
  air__leg *last; /* the leg of the failure the engine saw last */
  bool freeing;
  bool ended;
  int in_xfer_cb;      /* inside some leg's on_head / on_body */
  unsigned calling;    /* consumer callouts in progress (air__tell_*) */
  bool cancel_pending; /* a cancel from inside a callback, carried out
                          when the call chain unwinds */
  bool starting;       /* inside air__exchange_start_on */
  bool kick;           /* the first launch's failure waits for the next
                          loop turn (kick_leg, kick_rc) */
  bool end_due;        /* on_end waits for the next loop turn (res) */
  bool resume_pending; /* a resume from inside a callback */
  bool notified;
  bool reap;       /* AIR__LEG_LOST legs wait for the next loop turn */
  unsigned n_legs; /* (the fields are ordered to leave no holes) */
  air__buf msg;    /* the every-target-skipped message */
  uint64_t start_ms;
  uint64_t first_content_ms;
  uint64_t wait_ms;     /* time spent in backoff waits */
  uint64_t upstream_ms; /* time spent in attempts */
  unsigned malformed;
  bool has_hint;
  uint64_t hint_ms;
  const char *answered;   /* the target whose answer was released, or NULL */
  unsigned tool_retry_id; /* the attempt re-sent with the JSON tool */
  int kick_rc;            /* kick: how the launch of kick_leg failed */
  air__leg *kick_leg;
  air__cont c;              /* continuation (docs/design.md §3.5) */
  air__exchange_result res; /* the end, kept while its delivery waits */
  size_t state_provider;    /* the provider of the route's first
                               openai_responses target (SIZE_MAX: none): the
                               only one a stateful Responses request goes to
                               (docs/decisions.md, the Responses dialect) */
};

static inline uint64_t air__now(const air__exchange *x) {
  return x->clock->now_ms(x->clock->data);
}

/* ---- the consumer (air__tell_*) ------------------------------------------ */

/* Whether the consumer may still be called: not after the end, nor once a
 * cancel is pending (from then on it hears on_end only). */
static inline bool air__live(const air__exchange *x) {
  return !x->ended && !x->cancel_pending;
}

/* Every callout: skipped unless the consumer may be called and has the
 * callback (has), else counted in x->calling until air__tell_done, so that
 * a cancel, a resume or the end it causes waits for it to return. */
static inline bool air__tell_may(air__exchange *x, bool has) {
  if (!air__live(x) || !has) return false;
  x->calling++;
  return true;
}

static inline void air__tell_done(air__exchange *x) {
  x->calling--;
}

static inline void air__tell_commit(air__exchange *x,
                                    const air__commit_info *ci) {
  if (!air__tell_may(x, x->cb.on_commit != NULL)) return;
  x->cb.on_commit(x->cb.data, ci);
  air__tell_done(x);
}

/* on_event and on_flush: 1 when the consumer asks to pause the upstream. */
static inline int air__tell_event(air__exchange *x, const air__gate_event *ev) {
  if (!air__tell_may(x, x->cb.on_event != NULL)) return 0;
  int rc = x->cb.on_event(x->cb.data, ev);
  air__tell_done(x);
  return rc == 1;
}

static inline int air__tell_flush(air__exchange *x) {
  if (!air__tell_may(x, x->cb.on_flush != NULL)) return 0;
  int rc = x->cb.on_flush(x->cb.data);
  air__tell_done(x);
  return rc == 1;
}

static inline void air__tell_failed(air__exchange *x, const air_attempt *a) {
  if (!air__tell_may(x, x->cb.on_failed != NULL)) return;
  x->cb.on_failed(x->cb.data, a);
  air__tell_done(x);
}

static inline void air__tell_continue(air__exchange *x,
                                      const air__continue_info *ci) {
  if (!air__tell_may(x, x->cb.on_continue != NULL)) return;
  x->cb.on_continue(x->cb.data, ci);
  air__tell_done(x);
}

static inline void air__tell_keepalive(air__exchange *x) {
  if (!air__tell_may(x, x->cb.on_keepalive != NULL)) return;
  x->cb.on_keepalive(x->cb.data);
  air__tell_done(x);
}

/* ---- lifecycle and stepping (exchange.c) --------------------------------- */

/* Arms the timer at the earliest due time of every leg, the next hedge
 * and keep-alive; for the next loop turn when deferred work waits (a
 * reap, a kick, a cancel or a resume). */
void air__exchange_rearm(air__exchange *x);
/* Acts on x->act until something asynchronous is in flight or the end. */
void air__exchange_step(air__exchange *x);
/* After every engine call: the next hedge's time, and the CANCELs that
 * follow action a (a CANCEL may be a itself: air_run_first_part). */
void air__exchange_engine_did(air__exchange *x, const air_action *a);
/* The first release of leg l (its first content, or a continuation's
 * seam): the engine must answer COMMIT for it, which becomes x->act.
 * Returns 0, the engine's error, or AIR_ESTATE when it answered anything
 * else. */
int air__exchange_commit(air__leg *l);
/* The attempt of leg l failed (l->up.fail): the policy decides, and the
 * exchange acts on it. */
void air__exchange_failed(air__leg *l);
/* The cancel itself: transfers removed, timers stopped, the run told,
 * the end. */
void air__exchange_cancel_now(air__exchange *x);

/* Arms deadline which of l at deadline on the exchange's clock (at once
 * when it has passed: the loop fires it on its next turn). */
static inline void air__leg_arm(air__leg *l, int which, uint64_t deadline) {
  l->due[which] = deadline != 0 ? deadline : 1;
  air__exchange_rearm(l->x);
}

static inline void air__leg_disarm(air__leg *l, int which) {
  if (l->due[which] == 0) return;
  l->due[which] = 0;
  air__exchange_rearm(l->x);
}

/* Every deadline of l off (the caller rearms). */
static inline void air__leg_disarm_all(air__leg *l) {
  for (int i = 0; i < AIR__DUE_COUNT; i++) l->due[i] = 0;
}

/* Removes l's transfer, if any: never from inside a transfer callback. */
static inline void air__leg_xfer_cancel(air__leg *l) {
  if (l->xfer != NULL) l->x->tr.ops->cancel(l->x->tr.impl, l->xfer);
  l->xfer = NULL;
}

/* ---- a leg (exchange_leg.c) ---------------------------------------------- */

/* A free leg; a new one is made and set up when none is (the gate
 * allocates). NULL when AIR__MAX_LEGS are in use or out of memory. */
air__leg *air__leg_take(air__exchange *x);
/* Frees a leg made by air__leg_take (given back to the pool). */
void air__leg_free(air__leg *l);
/* Prepares and starts on leg l the transfer of ATTEMPT (or CONTINUE)
 * action a. Returns 0 when it is in flight, 1 with l->up.fail set when it
 * failed at once, or 2 when the target cannot express the request
 * (skip_field / skip_msg). */
int air__leg_launch(air__leg *l, const air_action *a);
/* Deadline which (first byte, attempt or part) of running leg l passed. */
void air__leg_expired(air__leg *l, int which);
/* Sets the attempt's failure (upstream.h: strings copied, the key
 * redacted). */
void air__leg_fail(air__leg *l, air_reason reason, int status,
                   const char *message, air_transport_err transport);

/* ---- continuation (exchange_cont.c) -------------------------------------- */

/* Continuation for this request, from the route's policy: whether it is on,
 * and what the request itself forbids (told to the engine at once). */
void air__cont_begin(air__exchange *x, const air__policy *pol);
void air__cont_cleanup(air__cont *c);
/* A released event of the committed attempt while it may still be
 * continued: its text kept, its usage noted, what forbids continuing told. */
void air__cont_note(air__exchange *x, const air__gate_event *ev);
/* An event of continuation leg l, released by its gate: through the seam
 * to the consumer. As the gate's emit: 0 to go on, non-zero to stop. */
int air__cont_emit(air__leg *l, const air__gate_event *ev);
/* The body of continuation leg l, and its seam. */
int air__cont_build(air__leg *l, const air__build_opts *bo, air_error *err);
/* The committed attempt, or a continuation, failed while the route
 * continues: the engine decides, and the exchange steps on. */
void air__cont_failed(air__leg *l);

#endif
