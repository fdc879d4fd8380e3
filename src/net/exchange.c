/*
 * The exchange: engine + codec + transport + gate on one uv loop.
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
 * The consumer (exchange.h) is called through tell_* only, which count the
 * callouts in progress (x->calling) and call nothing once the exchange
 * ended or a cancel is pending. A cancel made inside a transfer callback
 * or a consumer callout is recorded (cancel_pending) and carried out where
 * the call chain unwinds (on_done, step, the timer) or, at the latest, on
 * the next loop turn; from the cancel on, the consumer hears on_end only.
 * Nothing of the consumer's runs inside air__exchange_start (libuv's rule):
 * the first attempt is launched there, but a launch that fails at once is
 * told on the next loop turn (kick), and on_end, when it would come inside
 * start or inside a callout, is delivered on the next loop turn (end_due).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "classify.h"
#include "engine.h"
#include "exchange.h"
#include "limits.h"
#include "retry_after.h"
#include "seam.h"
#include "spans.h"
#include "sse.h"

#define MAX_EVENT_PARTS 4 /* parts of one SSE event kept inline */
/* An error (non-200) body is diagnostic only: its first MAX_ERROR_BODY
 * bytes are kept for classification and the rest is read and dropped. A
 * whole 200 body is an answer: bounded by limits.max_response_bytes, past it
 * the attempt fails (malformed), never a silently shortened answer. */
#define MAX_ERROR_BODY AIR__MAX_ERROR_BODY_BYTES
#define MAX_KEPT_HEADERS 32
#define MAX_REQUEST_HEADERS (AIR__MAX_HEADERS + 16)
/* Legs: every racer, plus as many again for losers whose transfer is
 * removed on the next loop turn while new attempts start. */
#define MAX_LEGS (2 * AIR__MAX_RACERS)
/* launch's header lines and URL start on its stack: they usually fit. */
#define LAUNCH_STACK_BYTES 1024

enum mode { M_NONE, M_SSE, M_BODY };

enum leg_state {
  L_FREE,    /* unused */
  L_RUNNING, /* an attempt in flight */
  L_WAITING, /* the backoff WAIT after a failed attempt (id: that one) */
  L_LOST,    /* cancelled from inside a transfer callback: its transfer
                is removed on the next loop turn (reap) */
};

enum { T_FIRST_BYTE, T_ATTEMPT, T_PART, T_WAIT, T_COUNT };

typedef struct leg {
  air__exchange *x;
  enum leg_state state;
  unsigned id;        /* the engine's attempt id */
  size_t log;         /* its attempt log entry */
  const char *target; /* its target and 1-based number: a judged answer */
  unsigned no;        /* released after the run stopped still names it */
  int status;         /* (fields ordered to leave no holes: issue 20) */
  const air__dialect_ops *ops;
  void *xfer;            /* the transfer in flight (tr's), or NULL */
  uint64_t due[T_COUNT]; /* first byte, attempt, part, wait: 0 = off */
  uint64_t wait_len;     /* L_WAITING: the wait's length */
  enum mode mode;
  bool in_cb; /* inside its on_head / on_body */
  bool pause_pending;
  bool content_told; /* air_run_first_part was called for it */
  bool have_fail;
  air_failure fail; /* the attempt's failure under construction */
  air__gate gate;
  air__sse sse;
  air__decoder dec;
  air__buf body;  /* upstream request body */
  air__buf err;   /* a non-stream response body */
  air__buf kept;  /* copies of response headers, then hv */
  air__buf strs;  /* error strings of its failure */
  air_header *hv; /* the kept headers (inside kept) */
  size_t n_hv;
  air_part parts_inline[MAX_EVENT_PARTS];
  air_part *parts; /* parts_inline, or a heap array for big events */
  size_t n_parts, cap_parts;
  uint64_t attempt_start;
  const char *key; /* the attempt's upstream key (environment), or NULL */
  const char *skip_field; /* launch() == 2: offsets into strs (see fix()) */
  const char *skip_msg;
  air_action act; /* the ATTEMPT it runs (sent again with the tool) */
  /* A continuation (docs/design.md §3.5): its style, whether its seam opened
   * (then it is the committed attempt, x->win), whether the seam failed it
   * (final), and the usage it reported before the seam. */
  bool cont;
  bool open;
  bool seam_failed;
  bool native_json; /* the attempt asks a schema natively (4) */
  bool paused;      /* the consumer paused its transfer: chunk_ms waits */
  int body_stop;    /* finish_body: what stopped the release */
  air_cont_style style;
  uint64_t u_in, u_out;
  air_part *cparts; /* the parts it releases, rebuilt per event */
  bool *coff;       /* cparts[i].text is an offset into x->c.joined */
  size_t cap_cparts;
} leg;

/* What continuation needs across the request's attempts. */
typedef struct cont {
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
  air__seam *seam;      /* from the first continuation on (allocated then,
                           not with every exchange: issue 20) */
  air__buf joined;      /* text the seam lets through, per event */
  air__continued *list; /* the continuations that joined */
  size_t n_list, cap_list;
} cont;

struct air__exchange {
  air__loop loop;       /* time (loop.h) */
  air__transport_if tr; /* upstreams (transport.h) */
  air__exchange_opts o;
  air__exchange_cb cb;
  const air_clock *clock;
  air_run *run;
  air_action act;
  air__gate_cfg gcfg;  /* every leg's gate, deadlines set per attempt */
  air__timer *timer;   /* one loop timer, armed at the earliest due */
  uint64_t armed;      /* when the loop timer fires (exchange clock), 0: off */
  uint64_t hedge_due;  /* air_run_hedge then (0: off) */
  leg *legs[MAX_LEGS]; /* made on first use: one without hedging */
  leg *win;            /* the leg whose answer is released, or NULL */
  leg *last;           /* the leg of the failure the engine saw last */
  bool freeing;
  bool ended;
  int in_xfer_cb;      /* inside some leg's on_head / on_body */
  unsigned calling;    /* consumer callouts in progress (tell_*) */
  bool cancel_pending; /* a cancel from inside a callback, carried out
                          when the call chain unwinds */
  bool starting;       /* inside air__exchange_start_on */
  bool kick;           /* the first launch's failure waits for the next
                          loop turn (kick_leg, kick_rc) */
  bool end_due;        /* on_end waits for the next loop turn (res) */
  bool resume_pending; /* a resume from inside a callback */
  bool notified;
  bool reap;       /* L_LOST legs wait for the next loop turn */
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
  struct leg *kick_leg;   /* kick: the leg whose launch failed, and how */
  int kick_rc;
  cont c;                   /* continuation (docs/design.md §3.5) */
  air__exchange_result res; /* the end, kept while its delivery waits */
  size_t state_provider;    /* the provider of the route's first
                               openai_responses target (SIZE_MAX: none): the
                               only one a stateful Responses request goes to
                               (issue 15) */
};

static void step(air__exchange *x);
static bool launched(leg *l, int rc);
static void record_stop(leg *l, int rc);
static void attempt_failed(leg *l);
static void set_fail(leg *l, air_reason reason, int status, const char *type,
                     const char *code, const char *message,
                     air_transport_err transport);

static uint64_t now_of(const air__exchange *x) {
  return x->clock->now_ms(x->clock->data);
}

/* ---- the seams: timers (loop.h) and the transfer (transport.h) ----------- */

/*
 * Every deadline of every leg (first byte, attempt, part gap, wait), the
 * next hedge and the reap share one loop timer armed at the earliest of
 * them: one timer per request. A due time is on the exchange's clock, 0
 * when it is off.
 */
static void rearm(air__exchange *x) {
  if (x->reap || x->kick || x->cancel_pending || x->resume_pending) {
    /* Work for the next loop turn: before any due time. */
    uint64_t now = now_of(x);
    x->armed = now ? now : 1;
    x->loop.ops->timer_start(x->loop.impl, x->timer, 0);
    return;
  }
  uint64_t next = x->hedge_due;
  uint64_t ka = x->c.keepalive_due;
  if (ka != 0 && (next == 0 || ka < next)) next = ka;
  for (unsigned k = 0; k < x->n_legs; k++)
    for (int i = 0; i < T_COUNT; i++) {
      uint64_t d = x->legs[k]->due[i];
      if (d != 0 && (next == 0 || d < next)) next = d;
    }
  if (next == 0) {
    if (x->armed != 0) x->loop.ops->timer_stop(x->loop.impl, x->timer);
    x->armed = 0;
    return;
  }
  /* Armed for no later than next: left as it is. Firing early is harmless
   * (on_timer finds nothing due and arms again), and a part deadline moved
   * on by every event then costs no timer call (issue 20). */
  if (x->armed != 0 && x->armed <= next) return;
  uint64_t now = now_of(x);
  x->armed = next;
  x->loop.ops->timer_start(x->loop.impl, x->timer, next > now ? next - now : 0);
}

static void timer_stop(leg *l, int which) {
  if (l->due[which] == 0) return;
  l->due[which] = 0;
  rearm(l->x);
}

static void stop_leg_timers(leg *l) {
  for (int i = 0; i < T_COUNT; i++) l->due[i] = 0;
}

static void stop_timers(air__exchange *x) {
  for (unsigned k = 0; k < x->n_legs; k++) stop_leg_timers(x->legs[k]);
  x->hedge_due = 0;
  x->c.keepalive_due = 0;
  x->armed = 0;
  x->loop.ops->timer_stop(x->loop.impl, x->timer);
}

/* Arms deadline which at deadline on the exchange's clock (at once when it
 * has passed: the loop fires it on its next turn). */
static void arm(leg *l, int which, uint64_t deadline) {
  l->due[which] = deadline != 0 ? deadline : 1;
  rearm(l->x);
}

static void xfer_cancel(leg *l) {
  if (l->xfer != NULL) l->x->tr.ops->cancel(l->x->tr.impl, l->xfer);
  l->xfer = NULL;
}

/* ---- legs ---------------------------------------------------------------- */

static leg *leg_of(air__exchange *x, unsigned id, enum leg_state state) {
  for (unsigned k = 0; k < x->n_legs; k++)
    if (x->legs[k]->state == state && x->legs[k]->id == id) return x->legs[k];
  return NULL;
}

static int emit(void *data, const air__gate_event *ev);
static int on_sse(void *data, const air__sse_event *ev);

/* The loop thread's pool of kind (exchanges, legs), or NULL: calloc and
 * free. */
#define pool_of(x, kind) ((x)->o.pools ? &(x)->o.pools->kind : NULL)

/* A free leg; a new one is made and set up when none is (the gate
 * allocates). NULL when MAX_LEGS are in use or out of memory. */
static leg *take_leg(air__exchange *x) {
  for (unsigned k = 0; k < x->n_legs; k++)
    if (x->legs[k]->state == L_FREE) return x->legs[k];
  if (x->n_legs >= MAX_LEGS) return NULL;
  leg *l = air__pool_take(pool_of(x, legs), sizeof(*l));
  if (l == NULL) return NULL;
  l->x = x;
  if (air__gate_init(&l->gate, &x->gcfg, emit, l) != 0) {
    air__gate_cleanup(&l->gate);
    air__pool_put(pool_of(x, legs), l, sizeof(*l));
    return NULL;
  }
  l->parts = l->parts_inline;
  l->cap_parts = MAX_EVENT_PARTS;
  air__sse_init(&l->sse, on_sse, l);
  air__buf_init(&l->body, AIR__MAX_REQUEST_BYTES);
  air__buf_init(&l->err, x->o.cfg->limits.max_response_bytes
                             ? x->o.cfg->limits.max_response_bytes
                             : AIR__MAX_RESPONSE_BYTES);
  air__buf_init(&l->kept, AIR__MAX_KEPT_HEADER_BYTES);
  air__buf_init(&l->strs, AIR__MAX_FAILURE_TEXT_BYTES);
  x->legs[x->n_legs++] = l;
  return l;
}

static void leg_cleanup(leg *l) {
  air__gate_cleanup(&l->gate);
  air__sse_cleanup(&l->sse);
  air__decoder_cleanup(&l->dec);
  air__buf_cleanup(&l->body);
  air__buf_cleanup(&l->err);
  air__buf_cleanup(&l->kept);
  air__buf_cleanup(&l->strs);
  if (l->parts != l->parts_inline) free(l->parts);
  free(l->cparts);
  free(l->coff);
}

/*
 * The engine cancelled leg l (it lost the race, or the run ended): its
 * transfer is removed now, closing the upstream connection, or from the
 * next loop turn when a transfer callback is running; a wait just stops.
 */
static void cancel_leg(air__exchange *x, leg *l) {
  if (l == NULL) return;
  stop_leg_timers(l);
  if (l->state == L_RUNNING) x->upstream_ms += now_of(x) - l->attempt_start;
  if (l->state == L_RUNNING && l->xfer != NULL && x->in_xfer_cb > 0) {
    l->state = L_LOST;
    x->reap = true;
  } else {
    xfer_cancel(l);
    l->state = L_FREE;
  }
  rearm(x);
}

/* Removes the transfers of lost legs (never inside a transfer callback). */
static void reap(air__exchange *x) {
  x->reap = false;
  for (unsigned k = 0; k < x->n_legs; k++) {
    leg *l = x->legs[k];
    if (l->state != L_LOST) continue;
    xfer_cancel(l);
    l->state = L_FREE;
  }
}

/*
 * After every engine call: the next hedge's time, and the CANCELs that
 * follow its action (a CANCEL may be the action itself: air_run_first_part).
 */
static void engine_did(air__exchange *x, const air_action *a) {
  x->hedge_due = a->hedge_at_ms;
  if (a->kind == AIR_ACT_CANCEL)
    cancel_leg(x, leg_of(x, a->attempt_id, L_RUNNING)
                      ? leg_of(x, a->attempt_id, L_RUNNING)
                      : leg_of(x, a->attempt_id, L_WAITING));
  air_action c;
  while (air_run_next(x->run, &c) == 1) {
    x->hedge_due = c.hedge_at_ms;
    if (c.kind != AIR_ACT_CANCEL) continue;
    leg *l = leg_of(x, c.attempt_id, L_RUNNING);
    cancel_leg(x, l ? l : leg_of(x, c.attempt_id, L_WAITING));
  }
  if (!x->ended && !x->freeing) rearm(x);
}

/* ---- the consumer -------------------------------------------------------- */

/* Whether the consumer may still be called: not after the end, nor once a
 * cancel is pending (from then on it hears on_end only). */
static bool live(const air__exchange *x) {
  return !x->ended && !x->cancel_pending;
}

static void tell_commit(air__exchange *x, const air__commit_info *ci) {
  if (!live(x) || x->cb.on_commit == NULL) return;
  x->calling++;
  x->cb.on_commit(x->cb.data, ci);
  x->calling--;
}

/* 1 when the consumer asks to pause the upstream. */
static int tell_event(air__exchange *x, const air__gate_event *ev) {
  if (!live(x) || x->cb.on_event == NULL) return 0;
  x->calling++;
  int rc = x->cb.on_event(x->cb.data, ev);
  x->calling--;
  return rc == 1;
}

static int tell_flush(air__exchange *x) {
  if (!live(x) || x->cb.on_flush == NULL) return 0;
  x->calling++;
  int rc = x->cb.on_flush(x->cb.data);
  x->calling--;
  return rc == 1;
}

static void tell_failed(air__exchange *x, const air_attempt *a) {
  if (!live(x) || x->cb.on_failed == NULL) return;
  x->calling++;
  x->cb.on_failed(x->cb.data, a);
  x->calling--;
}

static void tell_continue(air__exchange *x, const air__continue_info *ci) {
  if (!live(x) || x->cb.on_continue == NULL) return;
  x->calling++;
  x->cb.on_continue(x->cb.data, ci);
  x->calling--;
}

static void tell_keepalive(air__exchange *x) {
  if (!live(x) || x->cb.on_keepalive == NULL) return;
  x->calling++;
  x->cb.on_keepalive(x->cb.data);
  x->calling--;
}

/* ---- ending -------------------------------------------------------------- */

/* "no target of this route can express the request: FIELD (TARGET), ..."
 * for a request whose every target was skipped; kept in x->msg. */
static const char *skipped_message(air__exchange *x, size_t n) {
  air__buf_reset(&x->msg);
  int rc = air__buf_adds(&x->msg, "no target can express this request:");
  for (size_t i = 0; rc == 0 && i < n; i++) {
    const air_attempt *a = air_run_attempt(x->run, i);
    rc = air__buf_adds(&x->msg, i ? ", " : " ");
    if (rc == 0) rc = air__buf_adds(&x->msg, a->field ? a->field : "");
    if (rc == 0) rc = air__buf_adds(&x->msg, " (");
    if (rc == 0) rc = air__buf_adds(&x->msg, a->target);
    if (rc == 0) rc = air__buf_addc(&x->msg, ')');
  }
  if (rc == 0) rc = air__buf_addc(&x->msg, '\0');
  return rc == 0 ? x->msg.p : "no target can express this request";
}

/* Hands the end to the consumer: the last call it gets. */
static void deliver_end(air__exchange *x) {
  x->end_due = false;
  x->cb.on_end(x->cb.data, &x->res);
}

/*
 * The exchange ends with rc: racers stop, the result is kept in x->res and
 * delivered now, or on the next loop turn when a transfer callback or a
 * consumer callout is still on the stack (the consumer may free what that
 * callout still uses).
 */
static void end(air__exchange *x, int rc) {
  if (x->ended) return;
  if (x->cancel_pending && rc != AIR_ECANCELED) {
    /* The consumer cancelled while the run was deciding: its end is a
     * cancel, whatever the run came to. */
    air_run_cancel(x->run, now_of(x), &x->act);
    rc = AIR_ECANCELED;
  }
  if (rc != 0 && rc != AIR_ECANCELED && rc != AIR_EUPSTREAM) {
    /* The exchange's own failure (no memory, a broken promise): the run
     * closes the attempts still in flight and frees their probe leases;
     * the end reports rc as it is. */
    air_action gone;
    air_run_cancel(x->run, now_of(x), &gone);
  }
  x->ended = true;
  x->cancel_pending = false;
  x->kick = false;
  x->resume_pending = false;
  /* Racers still running stop with the request. */
  for (unsigned k = 0; k < x->n_legs; k++)
    if (x->legs[k]->state == L_RUNNING || x->legs[k]->state == L_WAITING)
      cancel_leg(x, x->legs[k]);
  if (x->in_xfer_cb == 0) reap(x); /* else air__exchange_free removes them */
  stop_timers(x);
  air__exchange_result r;
  memset(&r, 0, sizeof(r));
  r.rc = rc;
  r.committed = x->notified;
  for (unsigned k = 0; k < x->n_legs; k++)
    if (x->legs[k]->gate.committed) r.committed = true;
  r.reason = rc == 0 ? AIR_REASON_NONE : x->act.reason;
  r.status = rc == 0 ? 200 : x->act.status;
  size_t n = air_run_attempt_count(x->run);
  /* The final error is the last real failure (skipped entries are not
   * attempts, lost racers did not fail); when every target was skipped, a
   * message naming them. */
  const air_attempt *last = NULL;
  for (size_t i = n; i > 0 && last == NULL; i--) {
    const air_attempt *a = air_run_attempt(x->run, i - 1);
    if (!a->skipped && !a->hedge_lost) last = a;
  }
  r.message = last && rc != 0 ? last->message : "";
  r.target = last ? last->target : "";
  if (last == NULL && n > 0 && rc == AIR_EUPSTREAM)
    r.message = skipped_message(x, n);
  r.n_attempts = air__run_attempts(x->run);
  r.answered = x->answered;
  r.log = n ? air_run_attempt(x->run, 0) : NULL;
  r.n_log = n;
  r.has_retry_after = x->has_hint;
  r.retry_after_ms = x->hint_ms;
  r.first_content_ms = x->first_content_ms;
  r.total_ms = now_of(x) - x->start_ms;
  r.upstream_wait_ms = x->upstream_ms + x->wait_ms;
  r.malformed = x->malformed;
  r.continued = x->c.list;
  r.n_continued = x->c.n_list;
  if (rc == AIR_EUPSTREAM && x->c.broke) {
    /* No continuation joined after the break: the caller hears what broke
     * its answer, never a continuation's own failure (its 429, a prefill
     * the target refused). */
    const air_attempt *b = air_run_attempt(x->run, x->c.brk_log);
    if (b != NULL) {
      r.reason = b->reason;
      r.status = b->status;
      r.message = b->message;
      r.target = b->target;
      r.has_retry_after = x->c.brk_hint;
      r.retry_after_ms = x->c.brk_hint_ms;
    }
  }
  x->c.rescuing = false;
  x->res = r;
  if (x->calling > 0 || x->in_xfer_cb > 0 || x->starting) {
    x->end_due = true;
    x->loop.ops->timer_start(x->loop.impl, x->timer, 0);
    return;
  }
  deliver_end(x);
}

/* ---- released events ----------------------------------------------------- */

/*
 * The first release of an attempt is its first content: the engine is told
 * and the bytes go on only when it answers COMMIT for that attempt (x->act);
 * the other racers are cancelled then. A judged answer released after the
 * run failed (step, FAIL) is the run's own final decision, with no attempt
 * in flight to report. A leg that lost never releases anything.
 */
static int emit_cont(leg *l, const air__gate_event *ev);
static void note_released(air__exchange *x, const air__gate_event *ev);

static int emit(void *data, const air__gate_event *ev) {
  leg *l = data;
  air__exchange *x = l->x;
  if (!live(x)) return 1; /* cancelled: nothing more is released */
  if (l->cont) return emit_cont(l, ev);
  if (x->notified && x->win != l) return AIR_ESTATE;
  if (!x->notified) {
    if (x->act.kind != AIR_ACT_FAIL) {
      air_action a;
      int rc = air_run_ready_to_commit(x->run, l->id, now_of(x), &a);
      if (rc != 0) return rc;
      if (a.kind != AIR_ACT_COMMIT || a.attempt_id != l->id) return AIR_ESTATE;
      x->act = a;
      engine_did(x, &a);
    }
    x->notified = true;
    x->win = l;
    x->first_content_ms = now_of(x) - x->start_ms;
    x->answered = l->target;
    air__commit_info ci = {
        .target = l->target,
        .attempts = l->no,
        .made = air__run_attempts(x->run),
        .upstream = l->ops ? l->ops->api : AIR_DIALECT_OPENAI,
        .ms = x->first_content_ms,
        .headers = l->hv,
        .n_headers = l->n_hv,
    };
    ci.continuable = x->c.on && !x->c.never;
    tell_commit(x, &ci);
    if (!live(x)) return 1;
  }
  if (x->c.on && !x->c.never) note_released(x, ev);
  if (tell_event(x, ev) == 1) l->pause_pending = true;
  return live(x) ? 0 : 1;
}

/* ---- continuation (docs/design.md §3.5) ---------------------------------- */

/* Tells the engine what forbids continuing; NEVER also drops the kept text. */
static void limit(air__exchange *x, unsigned flags) {
  air_run_limit_continuation(x->run, flags);
  if ((flags & AIR_CONTF_NEVER) && !x->c.never) {
    x->c.never = true;
    air__buf_cleanup(&x->c.sent);
  }
}

static uint64_t utf8_chars(const char *p, size_t n) {
  uint64_t k = 0;
  for (size_t i = 0; i < n; i++) k += ((unsigned char)p[i] & 0xc0) != 0x80;
  return k;
}

/*
 * A released event of the committed attempt while it may still be
 * continued: its text is kept, its usage noted, and what forbids a
 * continuation is told: any tool call or refusal text (only text is
 * continued), reasoning once the text began, the finish (the answer
 * ended; a cut after it is no missing text), more text than
 * continuation.max_sent_bytes.
 */
static void note_released(air__exchange *x, const air__gate_event *ev) {
  for (size_t i = 0; i < ev->n_parts && !x->c.never; i++) {
    const air_part *p = &ev->parts[i];
    switch (p->kind) {
      case AIR_PART_TEXT:
        if (p->text_len == 0) break;
        x->c.text_began = true;
        if (air__buf_add(&x->c.sent, p->text, p->text_len) != 0)
          limit(x, AIR_CONTF_NEVER);
        else
          x->c.sent_chars += utf8_chars(p->text, p->text_len);
        break;
      case AIR_PART_REASONING:
        if (x->c.text_began) limit(x, AIR_CONTF_NEVER);
        break;
      case AIR_PART_TOOL_START:
      case AIR_PART_TOOL_DELTA:
      case AIR_PART_REFUSAL:
      case AIR_PART_FINISH: /* the answer ended: nothing is left to continue */
        limit(x, AIR_CONTF_NEVER);
        break;
      case AIR_PART_USAGE:
        x->c.in_tok = p->input_tokens;
        x->c.out_tok = p->output_tokens;
        break;
      default:
        break;
    }
  }
}

/* Room for n parts in l->cparts (and their marks in l->coff). */
static int cparts_room(leg *l, size_t n) {
  if (n <= l->cap_cparts) return 0;
  size_t cap = n < 8 ? 8 : n;
  air_part *a = realloc(l->cparts, cap * sizeof(*a));
  if (a == NULL) return AIR_ENOMEM;
  l->cparts = a;
  bool *o = realloc(l->coff, cap * sizeof(*o));
  if (o == NULL) return AIR_ENOMEM;
  l->coff = o;
  for (size_t i = l->cap_cparts; i < cap; i++) o[i] = false;
  l->cap_cparts = cap;
  return 0;
}

/*
 * The seam opened for continuation leg l: the engine commits it, the
 * consumer hears where it joins (and the usage of the attempt it
 * continues), and the rescue is over (from now on only chunk_ms bounds it).
 */
static int open_seam(leg *l) {
  air__exchange *x = l->x;
  air_action a;
  int rc = air_run_ready_to_commit(x->run, l->id, now_of(x), &a);
  if (rc != 0) return rc;
  if (a.kind != AIR_ACT_COMMIT || a.attempt_id != l->id) return AIR_ESTATE;
  x->act = a;
  engine_did(x, &a);
  if (x->c.n_list == x->c.cap_list) {
    size_t cap = x->c.cap_list ? 2 * x->c.cap_list : 4;
    air__continued *n = realloc(x->c.list, cap * sizeof(*n));
    if (n == NULL) return AIR_ENOMEM;
    x->c.list = n;
    x->c.cap_list = cap;
  }
  x->c.list[x->c.n_list++] =
      (air__continued){l->target, l->no, x->c.sent_chars};
  l->open = true;
  x->win = l;
  x->c.rescuing = false;
  x->c.keepalive_due = 0;
  timer_stop(l, T_ATTEMPT);
  air__continue_info ci = {
      .target = l->target,
      .attempt = l->no,
      .at_char = x->c.sent_chars,
      .input_tokens = x->c.in_tok,
      .output_tokens = x->c.out_tok,
  };
  x->c.out_done += x->c.out_tok;
  x->c.in_tok = l->u_in;
  x->c.out_tok = l->u_out;
  tell_continue(x, &ci);
  return 0;
}

/* The seam failed continuation leg l: the attempt fails, final (never
 * stitched in, never continued again: docs/decisions.md). */
static int seam_fail(leg *l) {
  const char *m = l->x->c.seam != NULL ? l->x->c.seam->message : NULL;
  char msg[256];
  snprintf(msg, sizeof(msg), "the continuation from %s cannot be joined: %s",
           l->target, m != NULL ? m : "it does not fit the sent text");
  set_fail(l, AIR_REASON_MALFORMED, l->status, NULL, NULL, msg,
           AIR_TRANSPORT_OK);
  l->seam_failed = true;
  return 1;
}

/*
 * A continuation's event, released by its gate (the refusal hold passed):
 * before the seam opens its text goes to the seam, which holds it or lets
 * the part after a repeat through; the first non-text part decides the
 * seam with what it has. Its message start is dropped (the caller's stream
 * began with the first attempt), as is reasoning (thinking is off for it).
 * What passes reaches the consumer as parts only.
 */
static int emit_cont(leg *l, const air__gate_event *ev) {
  air__exchange *x = l->x;
  if (!live(x)) return 1;
  /* Room for every part, the text the seam let through and the usage. */
  if (cparts_room(l, ev->n_parts + 2) != 0) {
    set_fail(l, AIR_REASON_MALFORMED, l->status, NULL, NULL,
             "the continuation could not be joined", AIR_TRANSPORT_OK);
    l->seam_failed = true;
    return 1;
  }
  size_t n = 0;
  air__buf_reset(&x->c.joined);
  for (size_t i = 0; i < ev->n_parts; i++) {
    const air_part *p = &ev->parts[i];
    if (p->kind == AIR_PART_START || p->kind == AIR_PART_REASONING) continue;
    if (p->kind == AIR_PART_USAGE && !l->open) {
      l->u_in = p->input_tokens;
      l->u_out = p->output_tokens;
      continue;
    }
    if (p->kind != AIR_PART_TEXT && l->open) {
      l->cparts[n++] = *p;
      continue;
    }
    /* Text always passes the seam (it may still drop white space after
     * it opened); another part decides a seam still holding. */
    size_t before = x->c.joined.n;
    air__seam_state st =
        p->kind == AIR_PART_TEXT
            ? air__seam_feed(x->c.seam, p->text, p->text_len, &x->c.joined)
            : air__seam_end(x->c.seam, &x->c.joined);
    if (st == AIR__SEAM_FAILED) return seam_fail(l);
    if (st == AIR__SEAM_HOLD) continue;
    bool opening = !l->open;
    if (opening && open_seam(l) != 0) {
      /* Not joined (no memory, or the engine refused): final, as a seam
       * that failed. */
      set_fail(l, AIR_REASON_MALFORMED, l->status, NULL, NULL,
               "the continuation could not be joined", AIR_TRANSPORT_OK);
      l->seam_failed = true;
      return 1;
    }
    if (x->c.joined.n > before) {
      /* Its text points into joined once nothing more moves it. */
      air_part t;
      memset(&t, 0, sizeof(t));
      t.kind = AIR_PART_TEXT;
      t.index = p->index;
      t.text = (const char *)(uintptr_t)before;
      t.text_len = x->c.joined.n - before;
      l->coff[n] = true;
      l->cparts[n++] = t;
    }
    if (opening && (l->u_in || l->u_out)) { /* its usage from before the seam */
      air_part u;
      memset(&u, 0, sizeof(u));
      u.kind = AIR_PART_USAGE;
      u.input_tokens = l->u_in;
      u.output_tokens = l->u_out;
      l->cparts[n++] = u;
    }
    if (p->kind != AIR_PART_TEXT) l->cparts[n++] = *p;
  }
  for (size_t i = 0; i < n; i++)
    if (l->coff[i]) {
      l->coff[i] = false;
      l->cparts[i].text = x->c.joined.p + (uintptr_t)l->cparts[i].text;
    }
  if (!l->open || n == 0) return 0;
  air__gate_event out = {NULL, 0, l->cparts, n, ev->flags};
  if (!x->c.never) note_released(x, &out);
  if (tell_event(x, &out) == 1) l->pause_pending = true;
  return live(x) ? 0 : 1;
}

/* ---- decoding ------------------------------------------------------------ */

/* Gathers the parts of one event; an event with many (parallel tool calls)
 * moves to a heap array, bounded by AIR__MAX_EVENT_PARTS. */
static int collect(void *data, const air_part *p) {
  leg *l = data;
  if (l->n_parts == l->cap_parts) {
    size_t cap = l->cap_parts * 2;
    if (cap > AIR__MAX_EVENT_PARTS) return 1; /* stops decoding: malformed */
    air_part *a = l->parts == l->parts_inline
                      ? malloc(cap * sizeof(*a))
                      : realloc(l->parts, cap * sizeof(*a));
    if (a == NULL) {
      l->dec.oom = true;
      return 1;
    }
    if (l->parts == l->parts_inline)
      memcpy(a, l->parts_inline, sizeof(l->parts_inline));
    l->parts = a;
    l->cap_parts = cap;
  }
  l->parts[l->n_parts++] = *p;
  return 0;
}

/*
 * The race (docs/design.md §3.6) is won when a leg's first content part
 * arrives, before the refusal hold or complete-mode judging: the engine cancels
 * the other racers. Without racers this only ends hedging for the request.
 */
static void tell_content(leg *l) {
  air__exchange *x = l->x;
  if (l->content_told || !l->gate.content || x->notified) return;
  l->content_told = true;
  air_action a;
  if (air_run_first_part(x->run, l->id, now_of(x), &a) == 0) engine_did(x, &a);
}

/* Feeds one decoded batch of parts to the gate; 1 when the attempt stops. */
static int feed_gate(leg *l, const char *raw, size_t raw_len,
                     unsigned before_malformed) {
  air__exchange *x = l->x;
  for (unsigned m = before_malformed; m < l->dec.malformed; m++) {
    x->malformed++;
    if (air__gate_malformed(&l->gate) == 1) return 1;
  }
  unsigned flags = (l->dec.usage_only ? AIR__EV_USAGE_ONLY : 0) |
                   (l->dec.terminator ? AIR__EV_TERMINATOR : 0) |
                   (l->dec.error_event ? AIR__EV_ERROR : 0) |
                   (l->dec.server_tool ? AIR__EV_SERVER_TOOL : 0);
  /* A caller that does not stream gets parts only: the gate need not
   * keep the raw bytes of the whole answer it holds (issue 20). */
  if (!x->o.req->stream) {
    raw = NULL;
    raw_len = 0;
  }
  air__gate_event gev = {raw, raw_len, l->parts, l->n_parts, flags};
  int rc = air__gate_feed(&l->gate, &gev, now_of(x));
  if (rc == 0) tell_content(l);
  return rc != 0 ? 1 : 0;
}

/* Copies a part string into buf as a C string. */
static void part_str(char *buf, size_t cap, const char *p, size_t n) {
  if (p == NULL) n = 0;
  if (n >= cap) n = cap - 1;
  if (n) memcpy(buf, p, n);
  buf[n] = '\0';
}

static int on_sse(void *data, const air__sse_event *ev) {
  leg *l = data;
  air__exchange *x = l->x;
  l->n_parts = 0;
  unsigned before = l->dec.malformed;
  l->dec.oom = false;
  if (l->ops->decode_event(&l->dec, ev, collect, l) != 0 && !l->dec.oom)
    l->dec.malformed++; /* over AIR__MAX_EVENT_PARTS: skipped as malformed */
  if (l->dec.oom) {
    /* Not the upstream's fault, and never a part to skip: the attempt
     * fails (an answer is never passed on shortened). */
    record_stop(l, AIR_ENOMEM);
    return 1;
  }
  if (l->dec.fatal != NULL) {
    /* A field that carries meaning over its limit (dialect.h). */
    x->malformed++;
    set_fail(l, AIR_REASON_MALFORMED, l->status, NULL, NULL, l->dec.fatal,
             AIR_TRANSPORT_OK);
    return 1;
  }
  if (l->gate.committed && l->dec.error_event && l->dec.malformed == before) {
    /* An error event after commit ends the attempt, final; the consumer
     * hears of it once, through on_end, never as a part. */
    char type[64] = "", msg[256] = "upstream error event";
    for (size_t i = 0; i < l->n_parts; i++) {
      if (l->parts[i].kind != AIR_PART_ERROR) continue;
      part_str(type, sizeof(type), l->parts[i].name, l->parts[i].name_len);
      if (l->parts[i].text_len)
        part_str(msg, sizeof(msg), l->parts[i].text, l->parts[i].text_len);
    }
    set_fail(l, air__classify(200, type, NULL, msg, AIR_TRANSPORT_OK),
             l->status, type, NULL, msg, AIR_TRANSPORT_OK);
    return 1;
  }
  if (l->dec.malformed > before) {
    /* Skipped and counted: never released, not even as raw bytes. */
    for (unsigned m = before; m < l->dec.malformed; m++) {
      x->malformed++;
      if (air__gate_malformed(&l->gate) == 1) return 1;
    }
    return 0;
  }
  return feed_gate(l, ev->raw.p, ev->raw.n, before);
}

/* ---- the attempt's failure ----------------------------------------------- */

/*
 * Copies s into the leg's failure strings, with every occurrence of the
 * attempt's upstream key replaced by "[redacted]": an upstream that echoes
 * the key it got (in a 401 message, say) must not leak it to callers or
 * logs.
 */
static const char *keep_str(leg *l, const char *s) {
  if (s == NULL) return NULL;
  size_t off = l->strs.n;
  size_t kn = l->key ? strlen(l->key) : 0;
  const char *p = s;
  int rc = 0;
  while (rc == 0 && *p) {
    const char *hit = kn >= 8 ? strstr(p, l->key) : NULL;
    if (hit == NULL) {
      rc = air__buf_adds(&l->strs, p);
      break;
    }
    rc = air__buf_add(&l->strs, p, (size_t)(hit - p));
    if (rc == 0) rc = air__buf_adds(&l->strs, "[redacted]");
    p = hit + kn;
  }
  if (rc == 0) rc = air__buf_addc(&l->strs, '\0');
  if (rc != 0) return NULL;
  return (const char *)(uintptr_t)(off + 1); /* fixed up by fix() */
}

static const char *fix(const leg *l, const char *off) {
  return off == NULL ? NULL : l->strs.p + ((uintptr_t)off - 1);
}

/* Sets the attempt's failure; strings are copied. */
static void set_fail(leg *l, air_reason reason, int status, const char *type,
                     const char *code, const char *message,
                     air_transport_err transport) {
  air__buf_reset(&l->strs);
  memset(&l->fail, 0, sizeof(l->fail));
  l->fail.reason = reason;
  l->fail.status = status;
  l->fail.transport = transport;
  const char *t = keep_str(l, type), *c = keep_str(l, code),
             *m = keep_str(l, message);
  const char *rid = NULL;
  for (size_t i = 0; i < l->n_hv; i++) {
    const air_header *h = &l->hv[i];
    if ((h->name_len == 12 && strncasecmp(h->name, "x-request-id", 12) == 0) ||
        (h->name_len == 10 && strncasecmp(h->name, "request-id", 10) == 0)) {
      char tmp[128];
      size_t n =
          h->value_len < sizeof(tmp) - 1 ? h->value_len : sizeof(tmp) - 1;
      memcpy(tmp, h->value, n);
      tmp[n] = '\0';
      rid = keep_str(l, tmp);
    }
  }
  l->fail.type = fix(l, t);
  l->fail.code = fix(l, c);
  l->fail.message = fix(l, m);
  l->fail.request_id = fix(l, rid);
  l->fail.headers = l->hv;
  l->fail.n_headers = l->n_hv;
  l->have_fail = true;
}

static void fail_from_gate(leg *l) {
  set_fail(l, l->gate.reason, l->status, NULL, NULL, l->gate.message,
           AIR_TRANSPORT_OK);
}

/* ---- transport callbacks ------------------------------------------------- */

static void keep_headers(leg *l, const air_header *h, size_t n) {
  air__buf_reset(&l->kept);
  l->hv = NULL;
  l->n_hv = 0;
  /* The strings, then the array (8-aligned) after them in the same buffer,
   * pointing into it once nothing more moves it: one allocation per
   * stream, sized to what the upstream sent. */
  air_header tmp[MAX_KEPT_HEADERS];
  size_t k = 0, need = 0, m = n < MAX_KEPT_HEADERS ? n : MAX_KEPT_HEADERS;
  if (m == 0) return;
  for (size_t i = 0; i < m; i++) need += h[i].name_len + h[i].value_len;
  /* Exactly what they take (the array 8-aligned): no doubling to 512 for
   * a held stream to keep (issue 20). Failing that, the appends fail. */
  if (air__buf_reserve(&l->kept, need + 8 + m * sizeof(tmp[0])) != 0) return;
  for (size_t i = 0; i < n && k < MAX_KEPT_HEADERS; i++) {
    size_t a = l->kept.n;
    if (air__buf_add(&l->kept, h[i].name, h[i].name_len) != 0) break;
    size_t b = l->kept.n;
    if (air__buf_add(&l->kept, h[i].value, h[i].value_len) != 0) break;
    tmp[k].name = (const char *)(uintptr_t)a;
    tmp[k].value = (const char *)(uintptr_t)b;
    tmp[k].name_len = h[i].name_len;
    tmp[k].value_len = h[i].value_len;
    k++;
  }
  size_t at;
  if (k == 0 ||
      air__buf_add_aligned(&l->kept, tmp, k * sizeof(tmp[0]), &at) != 0)
    return;
  l->hv = (air_header *)(void *)(l->kept.p + at);
  for (size_t i = 0; i < k; i++) {
    l->hv[i].name = l->kept.p + (uintptr_t)l->hv[i].name;
    l->hv[i].value = l->kept.p + (uintptr_t)l->hv[i].value;
  }
  l->n_hv = k;
}

static bool is_event_stream(const air_header *h, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (h[i].name_len == 12 &&
        strncasecmp(h[i].name, "content-type", 12) == 0) {
      for (size_t k = 0; k + 17 <= h[i].value_len; k++)
        if (strncasecmp(h[i].value + k, "text/event-stream", 17) == 0)
          return true;
      return false;
    }
  }
  return false;
}

static void on_head(void *data, int status, const air_header *h, size_t n) {
  leg *l = data;
  if (l->state != L_RUNNING) return; /* lost: removed on the next turn */
  timer_stop(l, T_FIRST_BYTE);
  l->status = status;
  air__run_note_status(l->x->run, l->id, status);
  keep_headers(l, h, n);
  l->mode = status == 200 && is_event_stream(h, n) ? M_SSE : M_BODY;
}

/* Stops when the request was cancelled or this leg lost the race. */
static bool stopped(const leg *l) {
  return l->x->cancel_pending || l->state != L_RUNNING;
}

/*
 * The attempt stops before its transfer ended (the decoder, the gate or the
 * release said stop): a failure is always recorded, so a stop never reads
 * as a success nor waits for a deadline. rc is what stopped it.
 */
static void record_stop(leg *l, int rc) {
  if (l->have_fail) return;
  if (l->gate.state == AIR__GATE_FAILED) {
    fail_from_gate(l);
    return;
  }
  set_fail(l, AIR_REASON_MALFORMED, l->status, NULL, NULL,
           rc == AIR_ENOMEM ? "out of memory while passing the answer on"
                            : "the answer could not be passed on",
           AIR_TRANSPORT_BADBODY);
}

static int on_body(void *data, const char *p, size_t n) {
  leg *l = data;
  air__exchange *x = l->x;
  if (stopped(l)) return -1;
  if (l->mode != M_SSE) {
    if (l->status != 200) {
      size_t room = l->err.n < MAX_ERROR_BODY ? MAX_ERROR_BODY - l->err.n : 0;
      if (room == 0) return 0;
      if (air__buf_add(&l->err, p, n < room ? n : room) == 0) return 0;
      /* No memory for the diagnostic body: the status is the failure. */
      char what[64];
      snprintf(what, sizeof(what), "upstream answered HTTP %d", l->status);
      set_fail(l, AIR_REASON_NONE, l->status, NULL, NULL, what,
               AIR_TRANSPORT_OK);
      return -1;
    }
    if (air__buf_add(&l->err, p, n) == 0) return 0;
    set_fail(l, AIR_REASON_MALFORMED, l->status, NULL, NULL,
             "response body over max_response_bytes", AIR_TRANSPORT_BADBODY);
    return -1;
  }
  x->in_xfer_cb++;
  int rc = air__sse_feed(&l->sse, p, n);
  x->in_xfer_cb--;
  if (stopped(l)) return -1;
  if (rc < 0 && !l->have_fail && l->gate.state != AIR__GATE_FAILED) {
    set_fail(l, AIR_REASON_MALFORMED, l->status, NULL, NULL,
             rc == AIR_ENOMEM ? "out of memory while reading the event stream"
                              : "event stream over the size limits",
             AIR_TRANSPORT_BADBODY);
    return -1;
  }
  if (rc != 0 || l->have_fail || l->gate.state == AIR__GATE_FAILED) {
    record_stop(l, rc);
    return -1;
  }
  /* Deadlines: attempt_ms only until commit (a continuation's rescue
   * deadline until its seam opens); the part gap always. */
  if (l->gate.committed && (!l->cont || l->open)) timer_stop(l, T_ATTEMPT);
  arm(l, T_PART, air__gate_deadline(&l->gate, NULL));
  /* Only the attempt the caller reads: a continuation before its seam
   * may run in the leg that broke (x->win), yet nothing of it is the
   * caller's. */
  if (x->notified && x->win == l && (!l->cont || l->open)) {
    x->in_xfer_cb++;
    if (tell_flush(x) == 1) l->pause_pending = true;
    x->in_xfer_cb--;
  }
  if (stopped(l)) return -1;
  if (l->pause_pending) {
    /* The caller does not read: the gap is the caller's, not the
     * upstream's. chunk_ms waits until the resume; the caller's own write
     * timeout bounds the stop. */
    l->pause_pending = false;
    l->paused = true;
    timer_stop(l, T_PART);
    x->tr.ops->pause(x->tr.impl, l->xfer);
  }
  return 0;
}

/* Feeds one part of a whole response body to the gate at once: its strings
 * point into the decoder's document, valid only during this callback. */
static int feed_body_part(void *data, const air_part *p) {
  leg *l = data;
  air__gate_event gev = {NULL, 0, p, 1, 0};
  int rc = air__gate_feed(&l->gate, &gev, now_of(l->x));
  if (rc == 0) tell_content(l);
  if (rc != 0) l->body_stop = rc;
  return rc != 0 ? 1 : 0;
}

/* Decodes a complete non-stream 200 body into one released answer. */
static void finish_body(leg *l) {
  l->n_parts = 0;
  l->body_stop = 0;
  if (l->ops->decode_body(&l->dec, l->err.p ? l->err.p : "", l->err.n,
                          feed_body_part, l) != 0 &&
      l->gate.state != AIR__GATE_FAILED) {
    if (l->body_stop != 0) {
      record_stop(l, l->body_stop); /* the release stopped, not the decoder */
      return;
    }
    set_fail(l, AIR_REASON_MALFORMED, 200, NULL, NULL,
             l->dec.fatal != NULL
                 ? l->dec.fatal
                 : "response is neither an event stream nor a response body",
             AIR_TRANSPORT_BADBODY);
    return;
  }
  int rc = 0;
  if (l->gate.state != AIR__GATE_FAILED)
    rc = air__gate_end(&l->gate, true, now_of(l->x));
  if (rc != 0 || l->gate.state == AIR__GATE_FAILED) record_stop(l, rc);
}

static void cancel_now(air__exchange *x);

static void on_done(void *data, int rc, air_transport_err kind,
                    bool connect_timeout, const char *msg) {
  leg *l = data;
  air__exchange *x = l->x;
  l->xfer = NULL;
  if (l->state == L_LOST) { /* it ended before the reap removed it */
    l->state = L_FREE;
    return;
  }
  /* A stream whose part deadline had passed when it closed was silent
   * first: its close (by the upstream, or a proxy's idle timeout) is that
   * deadline's failure, not a network one (docs/design.md §3.5: a continuation
   * then avoids the target that went silent). */
  air_reason late = AIR_REASON_NONE;
  if (l->mode == M_SSE && l->due[T_PART] != 0 && now_of(x) >= l->due[T_PART])
    air__gate_deadline(&l->gate, &late);
  timer_stop(l, T_FIRST_BYTE);
  timer_stop(l, T_ATTEMPT);
  timer_stop(l, T_PART);
  x->upstream_ms += now_of(x) - l->attempt_start;
  if (x->cancel_pending) {
    cancel_now(x);
    return;
  }
  if (rc == AIR_ECANCELED) {
    /* We stopped it: the failure is set (record_stop), never a success. */
    if (!l->have_fail) record_stop(l, rc);
  } else if (rc != 0) {
    set_fail(l, connect_timeout ? AIR_REASON_TIMEOUT_CONNECT : AIR_REASON_NONE,
             l->status == 200 ? 0 : l->status, NULL, NULL, msg, kind);
  } else if (l->mode == M_SSE) {
    air__sse_finish(&l->sse);
    if (l->gate.state != AIR__GATE_FAILED && l->gate.state != AIR__GATE_DONE) {
      /* Complete only with a finish: a terminator ([DONE], message_stop)
       * after no finish is a stream cut short as much as a closed socket
       * (docs/design.md §9: a terminator only after a finish). */
      bool clean = l->dec.finished;
      int grc = air__gate_end(&l->gate, clean, now_of(x));
      if (grc != 0 && live(x)) record_stop(l, grc);
    }
    if (l->gate.state == AIR__GATE_FAILED && !l->have_fail) fail_from_gate(l);
  } else if (l->status == 200) {
    finish_body(l);
  } else {
    air__buf tmp;
    air__buf_init(&tmp, AIR__MAX_FAILURE_TEXT_BYTES);
    air_failure f;
    memset(&f, 0, sizeof(f));
    air__parse_error_body(l->err.p, l->err.n, &tmp, &f);
    char what[64];
    if (f.message == NULL) {
      snprintf(what, sizeof(what), "upstream answered HTTP %d", l->status);
      f.message = what;
    }
    set_fail(l, AIR_REASON_NONE, l->status, f.type, f.code, f.message,
             AIR_TRANSPORT_OK);
    air__buf_cleanup(&tmp);
  }
  if (x->cancel_pending) { /* the consumer cancelled while it was released */
    cancel_now(x);
    return;
  }
  if (late != AIR_REASON_NONE && l->have_fail &&
      (l->fail.reason == AIR_REASON_NETWORK ||
       (l->fail.reason == AIR_REASON_NONE &&
        l->fail.transport != AIR_TRANSPORT_OK)))
    set_fail(l, late, l->status, NULL, NULL,
             late == AIR_REASON_TIMEOUT_CHUNK
                 ? "no event within chunk_ms, then the connection closed"
                 : "no content part within first_chunk_ms, then the connection "
                   "closed",
             AIR_TRANSPORT_OK);
  if (x->ended || l->state != L_RUNNING) return; /* decided while releasing */
  if (!l->have_fail && l->cont && !l->open) /* ended cleanly, nothing joined */
    set_fail(l, AIR_REASON_MALFORMED, l->status, NULL, NULL,
             "the continuation ended before it could be joined",
             AIR_TRANSPORT_OK);
  if (l->have_fail) {
    attempt_failed(l);
    return;
  }
  l->state = L_FREE;
  air_run_succeed(x->run, l->id, now_of(x), &x->act);
  engine_did(x, &x->act);
  step(x);
}

/* ---- timers -------------------------------------------------------------- */

static void timeout_fail(leg *l, air_reason reason, const char *msg) {
  air__exchange *x = l->x;
  xfer_cancel(l);
  stop_leg_timers(l);
  x->upstream_ms += now_of(x) - l->attempt_start;
  set_fail(l, reason, l->status, NULL, NULL, msg, AIR_TRANSPORT_OK);
  attempt_failed(l);
}

static void on_first_byte_timeout(leg *l) {
  timeout_fail(l, AIR_REASON_TIMEOUT_FIRST_BYTE,
               "no response headers within first_byte_ms");
}

static void on_attempt_timeout(leg *l) {
  if (l->cont) {
    /* The rescue's end (continuation.max_gap_ms): the gap the caller sees
     * has grown too long. */
    if (!l->open)
      timeout_fail(l, AIR_REASON_TIMEOUT_CHUNK,
                   "no continuation within continuation.max_gap_ms");
    return;
  }
  if (l->gate.committed) return;
  timeout_fail(l, AIR_REASON_TIMEOUT_ATTEMPT, "no commit within attempt_ms");
}

static void on_part_timeout(leg *l) {
  air_reason which;
  air__gate_deadline(&l->gate, &which);
  timeout_fail(l, which,
               which == AIR_REASON_TIMEOUT_FIRST_CHUNK
                   ? "no content part within first_chunk_ms"
                   : "no event within chunk_ms");
}

static void on_wait_done(leg *l) {
  air__exchange *x = l->x;
  x->wait_ms += l->wait_len;
  l->state = L_FREE;
  air_run_wait_done(x->run, l->id, now_of(x), &x->act);
  engine_did(x, &x->act);
  step(x);
}

/* The newest racer has had no content for hedge.after_ms: the engine may
 * start a hedge beside it (docs/design.md §3.6). */
static void on_hedge(air__exchange *x) {
  air_action a;
  if (air_run_hedge(x->run, now_of(x), &a) != 0) return;
  engine_did(x, &a);
  if (a.kind != AIR_ACT_ATTEMPT) return;
  x->act = a;
  step(x);
}

/* The loop timer fired: lost legs are reaped, then the earliest deadline
 * that is due runs (by leg; first byte, attempt, part, wait in that order
 * on a tie; a hedge after them), then the timer is armed for what is left.
 * A handler may end the exchange, and its owner free it: the memory stays
 * until the timer's close callback. */
static void on_timer(void *arg) {
  static void (*const handler[T_COUNT])(leg *) = {
      on_first_byte_timeout, on_attempt_timeout, on_part_timeout, on_wait_done};
  air__exchange *x = arg;
  x->armed = 0; /* a one-shot timer: it is off now */
  if (x->end_due) {
    deliver_end(x);
    return;
  }
  if (x->ended) return;
  if (x->reap) reap(x);
  if (x->cancel_pending) {
    cancel_now(x);
    return;
  }
  if (x->resume_pending) air__exchange_resume(x);
  if (x->kick) {
    /* What air__exchange_start could not tell: its first launch failed. */
    leg *l = x->kick_leg;
    x->kick = false;
    x->kick_leg = NULL;
    if (l != NULL && launched(l, x->kick_rc)) step(x);
    if (!x->freeing && !x->ended) rearm(x);
    return;
  }
  uint64_t now = now_of(x);
  leg *which_leg = NULL;
  int which = -1;
  uint64_t best = 0;
  for (unsigned k = 0; k < x->n_legs; k++)
    for (int i = 0; i < T_COUNT; i++) {
      uint64_t d = x->legs[k]->due[i];
      if (d != 0 && d <= now && (which_leg == NULL || d < best)) {
        which_leg = x->legs[k];
        which = i;
        best = d;
      }
    }
  if (which_leg == NULL && x->hedge_due != 0 && x->hedge_due <= now) {
    x->hedge_due = 0;
    on_hedge(x);
  } else if (which_leg == NULL && x->c.keepalive_due != 0 &&
             x->c.keepalive_due <= now) {
    /* A rescue runs (docs/design.md §3.5): the caller hears we are alive. */
    x->c.keepalive_due = now + AIR__CONT_KEEPALIVE_MS;
    tell_keepalive(x);
  } else if (which_leg != NULL) {
    which_leg->due[which] = 0;
    handler[which](which_leg);
  }
  if (x->cancel_pending) cancel_now(x);
  if (!x->freeing && !x->ended) rearm(x);
}

/* ---- attempts ------------------------------------------------------------ */

/* The upstream request's header lines, built per attempt; libcurl copies
 * them, so they live on the stack of launch only. */
typedef struct hdrs {
  air__buf buf;
  size_t off[MAX_REQUEST_HEADERS];
  size_t n;
} hdrs;

static int add_header(hdrs *hl, const char *name, size_t name_len,
                      const char *value, size_t value_len) {
  if (hl->n >= MAX_REQUEST_HEADERS) return AIR_ETOOBIG;
  /* A header value with CR or LF could split the request: never sent. */
  if (memchr(value, '\r', value_len) || memchr(value, '\n', value_len) ||
      memchr(name, '\r', name_len) || memchr(name, '\n', name_len))
    return 0;
  size_t off = hl->buf.n;
  int rc = air__buf_add(&hl->buf, name, name_len);
  if (rc == 0) rc = air__buf_add(&hl->buf, ": ", 2);
  if (rc == 0) rc = air__buf_add(&hl->buf, value, value_len);
  if (rc == 0) rc = air__buf_addc(&hl->buf, '\0');
  if (rc != 0) return rc;
  hl->off[hl->n++] = off;
  return 0;
}

static int add_header_s(hdrs *hl, const char *name, const char *value) {
  return add_header(hl, name, strlen(name), value, strlen(value));
}

/*
 * Caller headers named in forward_headers are copied upstream, except those
 * that carry credentials or HTTP framing, which only airetry sets.
 */
static bool forwardable(const char *name, size_t n) {
  static const char *const never[] = {"authorization",
                                      "x-api-key",
                                      "host",
                                      "content-length",
                                      "transfer-encoding",
                                      "connection",
                                      "content-type",
                                      "accept",
                                      "anthropic-version",
                                      "expect",
                                      "upgrade",
                                      "te",
                                      "trailer",
                                      "proxy-authorization",
                                      "cookie"};
  for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
    if (strlen(never[i]) == n && strncasecmp(never[i], name, n) == 0)
      return false;
  return true;
}

/* The upstream request's headers: ours, the provider's, and the caller's
 * forwarded ones (same dialect only). */
static int add_headers(const leg *l, const air__provider *p, const char *key,
                       hdrs *hl) {
  const air__exchange *x = l->x;
  int rc = add_header_s(hl, "Content-Type", "application/json");
  if (rc == 0) rc = add_header_s(hl, "Accept", "text/event-stream");
  if (rc == 0) rc = add_header_s(hl, "User-Agent", "airetry/" AIR_VERSION);
  bool has_version = false;
  for (size_t i = 0; i < p->n_headers; i++)
    if (strcasecmp(p->headers[i].name, "anthropic-version") == 0)
      has_version = true;
  if (rc == 0 && p->api == AIR_DIALECT_ANTHROPIC) {
    if (key != NULL) rc = add_header_s(hl, "x-api-key", key);
    if (rc == 0 && !has_version)
      rc = add_header_s(hl, "anthropic-version", "2023-06-01");
  } else if (rc == 0 && key != NULL) {
    char bmem[LAUNCH_STACK_BYTES];
    air__buf bearer;
    air__buf_init_on(&bearer, AIR__MAX_UPSTREAM_HEADER_BYTES, bmem,
                     sizeof(bmem));
    rc = air__buf_adds(&bearer, "Bearer ");
    if (rc == 0) rc = air__buf_adds(&bearer, key);
    if (rc == 0) rc = add_header(hl, "Authorization", 13, bearer.p, bearer.n);
    air__buf_cleanup(&bearer);
  }
  for (size_t i = 0; rc == 0 && i < p->n_headers; i++)
    rc = add_header_s(hl, p->headers[i].name, p->headers[i].value);
  if (rc == 0 && x->o.trace != NULL) { /* docs/design.md §5, Traces */
    char tp[AIR__TRACEPARENT_LEN + 1];
    air__trace_attempt_header(x->o.trace, l->no, tp);
    rc = add_header_s(hl, "traceparent", tp);
  }
  if (x->o.req->dialect == p->api) {
    for (const char *const *f = x->o.forward; rc == 0 && f && *f; f++) {
      const char *colon = strchr(*f, ':');
      if (colon == NULL || !forwardable(*f, (size_t)(colon - *f))) continue;
      if (x->o.trace != NULL && colon - *f == 11 &&
          strncasecmp(*f, "traceparent", 11) == 0)
        continue; /* ours replaces the caller's */
      const char *v = colon + 1;
      while (*v == ' ') v++;
      rc = add_header(hl, *f, (size_t)(colon - *f), v, strlen(v));
    }
  }
  return rc;
}

/*
 * The body of continuation leg l (docs/design.md §3.5): the caller's request
 * plus the released text in the leg's style, max_tokens lowered by the output
 * released so far (the upstream's count when it gave one, else an
 * estimate of 4 bytes a token, whichever is larger); and its seam, which
 * compares what comes back with that text.
 */
static int build_continuation(leg *l, const air__build_opts *bo,
                              air_error *err) {
  air__exchange *x = l->x;
  if (!x->c.on || x->c.never) {
    snprintf(err->message, sizeof(err->message), "nothing may be continued");
    return AIR_EINVAL;
  }
  if (x->c.seam_live) air__seam_cleanup(x->c.seam);
  x->c.seam_live = false;
  if (x->c.seam == NULL && (x->c.seam = malloc(sizeof(*x->c.seam))) == NULL)
    return AIR_ENOMEM;
  const char *sent = x->c.sent.p ? x->c.sent.p : "";
  int rc = air__seam_init(x->c.seam, sent, x->c.sent.n,
                          l->style == AIR_CONT_INSTRUCT);
  if (rc != 0) return rc;
  x->c.seam_live = true;
  uint64_t est = ((uint64_t)x->c.sent.n + 3) / 4;
  uint64_t released = x->c.out_done + x->c.out_tok;
  if (est > released) released = est;
  int64_t max = 0;
  if (x->c.caller_max > 0)
    max = (uint64_t)x->c.caller_max > released
              ? x->c.caller_max - (int64_t)released
              : 1;
  air__cont_ask ask = {
      .style = l->style,
      .sent = sent,
      .sent_n = x->c.sent.n,
      .max_tokens = max,
  };
  return air__request_build_continuation(l->ops, x->o.req, bo, &ask, &l->body,
                                         err);
}

/* Prepares and starts on leg l the transfer of ATTEMPT action a. Returns 0
 * when it is in flight, 1 with l->fail set when it failed at once, or 2
 * when the target cannot express the request (skip_field / skip_msg). */
static int launch(leg *l, const air_action *a) {
  air__exchange *x = l->x;
  const air__target *t = &air__run_route(x->run)->targets[a->target_index];
  const air_config *cfg = x->o.cfg;
  const air__provider *p = &cfg->providers[t->provider];
  l->state = L_RUNNING;
  l->ops = air__dialect_get(p->api);
  l->target = a->target;
  l->no = a->attempt;
  l->id = a->attempt_id;
  l->act = *a;
  l->cont = a->kind == AIR_ACT_CONTINUE;
  l->style = l->cont ? (air_cont_style)a->style : AIR_CONT_NONE;
  l->open = false;
  l->seam_failed = false;
  l->u_in = l->u_out = 0;
  /* Its log entry: the last one with its number (a relaunch with the JSON
   * tool runs after other racers may have started). */
  l->log = air_run_attempt_count(x->run) - 1;
  for (size_t i = l->log + 1; i > 0; i--) {
    const air_attempt *e = air_run_attempt(x->run, i - 1);
    if (!e->skipped && e->n == a->attempt) {
      l->log = i - 1;
      break;
    }
  }
  l->attempt_start = now_of(x);
  l->status = 0;
  l->mode = M_NONE;
  l->have_fail = false;
  l->content_told = false;
  l->pause_pending = false;
  l->paused = false;
  l->hv = NULL;
  l->n_hv = 0;
  air__buf_reset(&l->err);
  air__buf_reset(&l->body);
  air__sse_reset(&l->sse);
  air__decoder_cleanup(&l->dec);
  l->ops->decoder_init(&l->dec);
  air__gate_begin(&l->gate, l->attempt_start);
  l->gate.cfg.first_chunk_ms = t->timeouts.first_chunk_ms;
  l->gate.cfg.chunk_ms = t->timeouts.chunk_ms;

  const char *key = NULL;
  l->key = NULL;
  if (p->api_key_env != NULL) {
    key = l->key = p->api_key; /* read at config load (config.h) */
    if (key == NULL || key[0] == '\0') {
      char msg[2 * AIR__MAX_NAME_BYTES + 64];
      snprintf(msg, sizeof(msg), "%s is not set: no API key for provider %s",
               p->api_key_env, p->name);
      set_fail(l, AIR_REASON_AUTH, 0, NULL, NULL, msg, AIR_TRANSPORT_OK);
      return 1;
    }
  }
  air_error err;
  memset(&err, 0, sizeof(err));
  air__build_opts bo = {
      .model = t->model,
      .override_json = a->override_json,
      .drop_params = cfg->drop_params,
      .default_max_tokens = cfg->default_max_tokens,
      .structured_output = t->structured_output,
      .other_provider =
          x->state_provider != SIZE_MAX && t->provider != x->state_provider,
      .json_tool = &l->dec.json_tool,
  };
  if (x->tool_retry_id == l->id) bo.structured_output = AIR__STRUCT_TOOL;
  l->native_json = bo.structured_output == AIR__STRUCT_NATIVE &&
                   l->ops->api == AIR_DIALECT_ANTHROPIC &&
                   x->o.req->dialect != AIR_DIALECT_ANTHROPIC &&
                   x->o.req->json_response;
  int built = l->cont
                  ? build_continuation(l, &bo, &err)
                  : air__request_build(l->ops, x->o.req, &bo, &l->body, &err);
  if (built == AIR_ENOTSUP) {
    /* Outcome skipped (docs/design.md §2.1): nothing is sent to this target. */
    char field[AIR__MAX_NAME_BYTES];
    air__unsupported_field(err.message, field, sizeof(field));
    air__buf_reset(&l->strs);
    l->skip_field = keep_str(l, field);
    l->skip_msg = keep_str(l, err.message);
    return 2;
  }
  if (built != 0) {
    set_fail(l, AIR_REASON_BAD_REQUEST, 400, "invalid_request_error", NULL,
             err.message, AIR_TRANSPORT_OK);
    return 1;
  }
  if (x->o.req->raw == NULL && !l->cont) /* no caller text: the body's size */
    air__run_set_prompt_bytes(x->run, l->body.n);
  /* Both are built and dropped here: on the stack when they fit. */
  char hmem[LAUNCH_STACK_BYTES], umem[LAUNCH_STACK_BYTES];
  hdrs hl;
  air__buf_init_on(&hl.buf, AIR__MAX_UPSTREAM_HEADER_BYTES, hmem, sizeof(hmem));
  hl.n = 0;
  int rc = add_headers(l, p, key, &hl);
  const char *lines[MAX_REQUEST_HEADERS + 1];
  for (size_t i = 0; i < hl.n; i++) lines[i] = hl.buf.p + hl.off[i];
  lines[hl.n] = NULL;
  air__buf url;
  air__buf_init_on(&url, AIR__MAX_URL_BYTES, umem, sizeof(umem));
  size_t bl = strlen(p->base_url);
  while (bl > 0 && p->base_url[bl - 1] == '/') bl--;
  if (rc == 0) rc = air__buf_add(&url, p->base_url, bl);
  if (rc == 0) rc = air__buf_adds(&url, l->ops->path);
  air__xfer_req r = {
      .url = url.p,
      .headers = lines,
      .body = l->body.p,
      .body_len = l->body.n,
      .connect_ms = t->timeouts.connect_ms,
      .target = t->name,
  };
  air__xfer_cb cb = {on_head, on_body, on_done, l};
  int started = rc == 0 ? x->tr.ops->start(x->tr.impl, &r, &cb, &l->xfer) : rc;
  air__buf_cleanup(&hl.buf); /* libcurl keeps copies */
  air__buf_cleanup(&url);
  if (rc != 0) {
    set_fail(l, AIR_REASON_BAD_REQUEST, 0, NULL, NULL,
             "upstream request over the size limits", AIR_TRANSPORT_OK);
    return 1;
  }
  if (started != 0) {
    set_fail(l, AIR_REASON_NETWORK, 0, NULL, NULL,
             "could not start the transfer", AIR_TRANSPORT_CONNECT);
    return 1;
  }
  uint64_t now = l->attempt_start;
  arm(l, T_FIRST_BYTE, now + t->timeouts.first_byte_ms);
  arm(l, T_ATTEMPT, a->deadline_ms);
  arm(l, T_PART, air__gate_deadline(&l->gate, NULL));
  return 0;
}

/* Hands l->fail to the policy (x->act is its decision) and tells the
 * observer about the failed attempt. */
static void policy_fail(leg *l) {
  air__exchange *x = l->x;
  l->state = L_FREE;
  x->last = l;
  air_run_fail(x->run, l->id, &l->fail, now_of(x),
               x->clock->wall_ms(x->clock->data), &x->act);
  engine_did(x, &x->act);
  tell_failed(x, air_run_attempt(x->run, l->log));
}

/* launch() found that the target cannot express the request: the run goes
 * on without it, and the observer hears of the skipped entry. */
static void skip_target(leg *l) {
  air__exchange *x = l->x;
  l->state = L_FREE;
  air__run_skip(x->run, l->id, fix(l, l->skip_field), fix(l, l->skip_msg),
                now_of(x), &x->act);
  engine_did(x, &x->act);
  tell_failed(x, air_run_attempt(x->run, l->log));
}

/* Whether a failure's message speaks of the structured-output schema. */
static bool schema_error(const air_failure *f) {
  static const char *const words[] = {"schema", "output_config",
                                      "output_format"};
  const char *m = f->message != NULL ? f->message : "";
  for (size_t i = 0; m[i] != '\0'; i++)
    for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++)
      if (strncasecmp(m + i, words[w], strlen(words[w])) == 0) return true;
  return false;
}

/*
 * The committed attempt (or a continuation before or after its seam)
 * failed while the route continues: the engine decides (CONTINUE, WAIT or
 * FAIL, docs/design.md §3.5); a rescue begins, and with it the keep-alives.
 * Nothing continues an answer that released no text.
 */
static void continue_failed(leg *l) {
  air__exchange *x = l->x;
  uint64_t now = now_of(x);
  if (!x->c.text_began) limit(x, AIR_CONTF_NEVER);
  if (!l->cont || l->open) {
    /* The answer the caller reads broke: if no continuation joins, this
     * is the caller's error, not a continuation's (docs/design.md §3.5). */
    x->c.broke = true;
    x->c.brk_log = l->log;
    x->c.brk_hint = x->has_hint;
    x->c.brk_hint_ms = x->hint_ms;
  }
  l->state = L_FREE;
  x->last = l;
  if (l->seam_failed) {
    air__run_fail_final(x->run, l->id, &l->fail, now, &x->act);
  } else if (l->cont && !l->open && l->style == AIR_CONT_PREFILL &&
             air__prefill_rejected(l->fail.status, &l->fail)) {
    /* Never the caller's: asked again with instruct, or a failure. */
    air_run_prefill_rejected(x->run, l->id, now, &x->act);
  } else {
    air_run_fail(x->run, l->id, &l->fail, now,
                 x->clock->wall_ms(x->clock->data), &x->act);
  }
  engine_did(x, &x->act);
  tell_failed(x, air_run_attempt(x->run, l->log));
  if ((x->act.kind == AIR_ACT_CONTINUE || x->act.kind == AIR_ACT_WAIT) &&
      !x->c.rescuing) {
    x->c.rescuing = true;
    x->c.keepalive_due = now + AIR__CONT_KEEPALIVE_MS;
    rearm(x);
  }
  step(x);
}

/* The attempt failed (l->fail): before commit the policy decides. */
static void attempt_failed(leg *l) {
  air__exchange *x = l->x;
  uint64_t now = now_of(x);
  uint64_t hint = 0;
  x->has_hint = air__retry_after(l->fail.headers, l->fail.n_headers,
                                 x->clock->wall_ms(x->clock->data), &hint) == 1;
  x->hint_ms = hint;
  if (l->cont || (l->gate.committed && x->c.on)) {
    continue_failed(l);
    return;
  }
  if (l->gate.committed) {
    l->state = L_FREE;
    x->last = l;
    air__run_fail_final(x->run, l->id, &l->fail, now, &x->act);
    engine_did(x, &x->act);
    end(x, AIR_EUPSTREAM);
    return;
  }
  if (l->native_json && x->tool_retry_id != l->id && l->fail.status == 400 &&
      schema_error(&l->fail)) {
    /* A schema 400 from a native structured-output target: the same
     * attempt once more with the JSON tool (docs/design.md §4), from the
     * ATTEMPT action the leg ran. */
    x->tool_retry_id = l->id;
    l->state = L_FREE;
    x->act = l->act;
    step(x);
    return;
  }
  policy_fail(l);
  step(x);
}

/*
 * After launch(l) returned rc: true when step goes on with x->act (a target
 * skipped, an attempt that could not start), false when something is in
 * flight or the run moved on by itself. Inside air__exchange_start the
 * consumer must not hear of a failure yet: it is told on the next loop
 * turn (kick_leg).
 */
static bool launched(leg *l, int rc) {
  air__exchange *x = l->x;
  if (rc == 0) return false;
  if (x->starting) {
    x->kick_leg = l;
    x->kick_rc = rc;
    x->kick = true;
    rearm(x);
    return false;
  }
  if (rc == 2) {
    if (l->cont) { /* a continuation is never skipped: it fails */
      char m[AIR__MAX_MESSAGE_BYTES];
      const char *sm = fix(l, l->skip_msg);
      snprintf(m, sizeof(m), "%s", sm ? sm : "cannot be continued");
      set_fail(l, AIR_REASON_BAD_REQUEST, 0, NULL, NULL, m, AIR_TRANSPORT_OK);
      continue_failed(l);
      return false;
    }
    skip_target(l);
    return true;
  }
  if (l->cont) {
    continue_failed(l);
    return false;
  }
  policy_fail(l);
  return true;
}

/* Acts on x->act until something asynchronous is in flight or the end. */
static void step(air__exchange *x) {
  for (;;) {
    leg *l;
    if (x->ended) return;
    if (x->cancel_pending) { /* the consumer cancelled in on_failed */
      cancel_now(x);
      return;
    }
    switch (x->act.kind) {
      case AIR_ACT_ATTEMPT:
      case AIR_ACT_CONTINUE:
        l = take_leg(x);
        if (l == NULL) {
          end(x, AIR_ENOMEM);
          return;
        }
        if (!launched(l, launch(l, &x->act))) return;
        continue;
      case AIR_ACT_WAIT:
        l = take_leg(x);
        if (l == NULL) {
          end(x, AIR_ENOMEM);
          return;
        }
        l->state = L_WAITING;
        l->id = x->act.attempt_id;
        l->wait_len = x->act.wait_ms;
        arm(l, T_WAIT, now_of(x) + x->act.wait_ms);
        return;
      case AIR_ACT_DONE:
        end(x, 0);
        return;
      case AIR_ACT_FAIL:
        if (x->act.reason == AIR_REASON_ABORTED) {
          end(x, AIR_ECANCELED);
        } else if (x->last != NULL && x->last->gate.state == AIR__GATE_FAILED &&
                   x->last->gate.judged &&
                   air__gate_release_judged(&x->last->gate) == 0) {
          end(x, 0);
        } else if (x->cancel_pending) { /* cancelled while it was released */
          cancel_now(x);
        } else {
          end(x, AIR_EUPSTREAM);
        }
        return;
      case AIR_ACT_IDLE:
        return; /* other racers go on */
      case AIR_ACT_COMMIT:
      case AIR_ACT_CANCEL:
        /* Not answers to the events step follows (COMMIT answers first
         * content, in emit; CANCEL is read by engine_did): a broken
         * promise, ended rather than hung. */
        end(x, AIR_ESTATE);
        return;
    }
  }
}

/* ---- lifecycle ----------------------------------------------------------- */

static void on_timer_closed(void *arg);

int air__exchange_start(uv_loop_t *loop, air__transport *t,
                        const air__exchange_opts *o, const air__exchange_cb *cb,
                        air__exchange **out) {
  if (loop == NULL || t == NULL) return AIR_EINVAL;
  air__loop lp = air__loop_uv(loop);
  air__transport_if tr = air__transport_curl(t);
  return air__exchange_start_on(&lp, &tr, o, cb, out);
}

/* The provider of the first openai_responses target of the route named
 * model (SIZE_MAX: not a route, or none): where a Responses caller's
 * stored state lives (docs/decisions.md, issue 15). */
static size_t state_provider(const air_config *cfg, const char *model) {
  const air__route *r =
      model != NULL ? air__config_route(cfg, model, strlen(model)) : NULL;
  for (size_t i = 0; r != NULL && i < r->n_targets; i++) {
    size_t p = r->targets[i].provider;
    if (p < cfg->n_providers &&
        cfg->providers[p].api == AIR_DIALECT_OPENAI_RESPONSES)
      return p;
  }
  return SIZE_MAX;
}

/* The engine's question before it admits a target (air__run_new_checked):
 * can the target's dialect express the request? Only AIR_ENOTSUP says no;
 * any other failure is left to launch, which reports it. */
static bool expressible(void *data, const air__target *t) {
  const air__exchange *x = data;
  const air_config *cfg = x->o.cfg;
  const air__dialect_ops *ops =
      air__dialect_get(cfg->providers[t->provider].api);
  air__build_opts bo = {.drop_params = cfg->drop_params,
                        .structured_output = t->structured_output,
                        .other_provider = x->state_provider != SIZE_MAX &&
                                          t->provider != x->state_provider};
  air_error err;
  return air__request_can_express(ops, x->o.req, &bo, &err) != AIR_ENOTSUP;
}

/* A member of the caller's JSON object, or NULL. */
static const json_t *member(const json_t *o, const char *key) {
  return json_is_object(o) ? json_object_get(o, key) : NULL;
}

/*
 * Continuation for this request (docs/design.md §3.5): only for a streamed
 * caller under commit first_content (a non-streamed caller's commit is the end
 * of its answer: nothing is left to continue). What the request itself forbids
 * is told to the engine at once: n > 1 or logprobs (a continuation could not
 * give them back: NEVER), a JSON response (json_object or json_schema: no
 * instruct target, docs/decisions.md). The caller's max_tokens is kept for the
 * continuation's.
 */
static void continuation_begin(air__exchange *x, const air__policy *pol) {
  const air__continuation *cc = &pol->continuation;
  const air__request *req = x->o.req;
  x->c.on =
      cc->enabled && req->stream && x->gcfg.commit == AIR__COMMIT_FIRST_CONTENT;
  if (!x->c.on) return;
  uint64_t max =
      cc->max_sent_bytes ? cc->max_sent_bytes : AIR__DEFAULT_CONT_SENT_BYTES;
  air__buf_init(&x->c.sent, max);
  air__buf_init(&x->c.joined, max + AIR__MAX_ANSWER_BYTES);
  if (req->json_response) limit(x, AIR_CONTF_NO_INSTRUCT);
  /* The caller's object: its text when there is one (parsed here, once),
   * else the tree the parser kept. */
  json_t *own = req->tree == NULL && req->raw != NULL
                    ? json_loadb(req->raw, req->raw_n, 0, NULL)
                    : NULL;
  const json_t *o = own ? own : (const json_t *)req->tree;
  const json_t *n = member(o, "n"), *lp = member(o, "logprobs"),
               *tlp = member(o, "top_logprobs"), *inc = member(o, "include");
  bool never = (json_is_integer(n) && json_integer_value(n) > 1) ||
               json_is_true(lp) ||
               (json_is_integer(tlp) && json_integer_value(tlp) > 0);
  for (size_t i = 0; json_is_array(inc) && i < json_array_size(inc); i++) {
    const char *v = json_string_value(json_array_get(inc, i));
    if (v != NULL && strstr(v, "logprobs") != NULL) never = true;
  }
  static const char *const max_keys[] = {"max_tokens", "max_completion_tokens",
                                         "max_output_tokens"};
  for (size_t i = 0; i < sizeof(max_keys) / sizeof(max_keys[0]); i++) {
    const json_t *v = member(o, max_keys[i]);
    if (json_is_integer(v) && json_integer_value(v) > 0)
      x->c.caller_max = (int64_t)json_integer_value(v);
  }
  json_decref(own);
  if (never) limit(x, AIR_CONTF_NEVER);
}

int air__exchange_start_on(const air__loop *loop, const air__transport_if *tr,
                           const air__exchange_opts *o,
                           const air__exchange_cb *cb, air__exchange **out) {
  if (loop == NULL || tr == NULL || o == NULL || o->cfg == NULL ||
      o->req == NULL || o->model == NULL || cb == NULL || cb->on_end == NULL)
    return AIR_EINVAL;
  air__pool *xpool = o->pools ? &o->pools->exchanges : NULL;
  air__exchange *x = air__pool_take(xpool, sizeof(*x));
  if (x == NULL) return AIR_ENOMEM;
  x->loop = *loop;
  x->tr = *tr;
  x->o = *o;
  x->cb = *cb;
  x->clock = o->clock ? o->clock : air_clock_system();
  x->start_ms = now_of(x);
  x->state_provider = state_provider(o->cfg, o->model);
  int rc = air__run_new_checked(o->cfg, o->state, o->model, NULL, x->start_ms,
                                expressible, x, &x->run, &x->act);
  if (rc != 0) {
    air__pool_put(xpool, x, sizeof(*x));
    return rc;
  }
  /* hedge.max_prompt_bytes bounds the caller's body (docs/design.md §3.6). */
  if (o->req->raw != NULL) air__run_set_prompt_bytes(x->run, o->req->raw_n);
  x->act.hedge_at_ms = air__run_hedge_at(x->run);
  const air__policy *pol = air__run_policy(x->run);
  x->gcfg =
      air__gate_cfg_of(pol, o->req->stream ? pol->commit : AIR__COMMIT_COMPLETE,
                       o->req->json_response);
  air__buf_init(&x->msg, AIR__MAX_FAILURE_TEXT_BYTES);
  continuation_begin(x, pol);
  x->timer = x->loop.ops->timer_new(x->loop.impl, on_timer, x);
  if (x->timer == NULL || take_leg(x) == NULL) {
    if (x->timer != NULL) {
      x->freeing = true;
      x->loop.ops->timer_close(x->loop.impl, x->timer, on_timer_closed, x);
      return AIR_ENOMEM;
    }
    x->freeing = true;
    on_timer_closed(x);
    return AIR_ENOMEM;
  }
  *out = x;
  x->hedge_due = x->act.hedge_at_ms;
  /* The first attempt starts now; nothing of the consumer's is called
   * inside this call: a failure at once is told, and an end delivered, on
   * the next loop turn (launched, end). */
  x->starting = true;
  step(x);
  x->starting = false;
  return 0;
}

void air__exchange_cancel(air__exchange *x) {
  if (x == NULL || x->ended || x->cancel_pending) return;
  if (x->in_xfer_cb > 0 || x->calling > 0) {
    /* Inside a callback: carried out where the call chain unwinds; the
     * consumer hears on_end only from now on. */
    x->cancel_pending = true;
    rearm(x);
    return;
  }
  cancel_now(x);
}

/* The cancel itself: transfers removed, timers stopped, the run told. */
static void cancel_now(air__exchange *x) {
  x->cancel_pending = false;
  if (x->ended) return;
  uint64_t now = now_of(x);
  for (unsigned k = 0; k < x->n_legs; k++) {
    leg *l = x->legs[k];
    if (l->xfer == NULL) continue;
    xfer_cancel(l);
    if (l->state == L_RUNNING) x->upstream_ms += now - l->attempt_start;
    l->state = L_FREE;
  }
  stop_timers(x);
  air_run_cancel(x->run, now, &x->act);
  end(x, AIR_ECANCELED);
}

void air__exchange_resume(air__exchange *x) {
  if (x == NULL || x->ended) return;
  if (x->in_xfer_cb > 0 || x->calling > 0) {
    /* A transfer may deliver at once when resumed: never inside a
     * callback (the decoders are not reentrant). */
    x->resume_pending = true;
    rearm(x);
    return;
  }
  x->resume_pending = false;
  uint64_t now = now_of(x);
  for (unsigned k = 0; k < x->n_legs; k++) {
    leg *l = x->legs[k];
    if (l->xfer == NULL || l->state != L_RUNNING) continue;
    if (l->paused) {
      /* The caller reads again: the gap between events counts from now. */
      l->paused = false;
      air__gate_resumed(&l->gate, now);
      arm(l, T_PART, air__gate_deadline(&l->gate, NULL));
    }
    x->tr.ops->resume(x->tr.impl, l->xfer);
  }
}

static void on_timer_closed(void *arg) {
  air__exchange *x = arg;
  for (unsigned k = 0; k < x->n_legs; k++) {
    leg_cleanup(x->legs[k]);
    air__pool_put(pool_of(x, legs), x->legs[k], sizeof(leg));
  }
  air__buf_cleanup(&x->msg);
  air__buf_cleanup(&x->c.sent);
  air__buf_cleanup(&x->c.joined);
  if (x->c.seam_live) air__seam_cleanup(x->c.seam);
  free(x->c.seam);
  free(x->c.list);
  air_run_free(x->run);
  air__pool_put(pool_of(x, exchanges), x, sizeof(*x));
}

void air__exchange_pools_cleanup(air__exchange_pools *p) {
  if (p == NULL) return;
  air__pool_cleanup(&p->exchanges);
  air__pool_cleanup(&p->legs);
}

void air__exchange_free(air__exchange *x) {
  if (x == NULL || x->freeing) return;
  x->freeing = true;
  for (unsigned k = 0; k < x->n_legs; k++) xfer_cancel(x->legs[k]);
  x->loop.ops->timer_close(x->loop.impl, x->timer, on_timer_closed, x);
}
