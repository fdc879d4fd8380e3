/*
 * The exchange's lifecycle and stepping (exchange_int.h says how its files
 * divide the work): start, the engine's actions, the one timer, the racers
 * cancelled and reaped, cancel, resume and the end.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "exchange_int.h"
#include "retry_after.h"

static bool launched(air__leg *l, int rc);

/* ---- timers -------------------------------------------------------------- */

/*
 * Every deadline of every leg (first byte, attempt, part gap, wait), the
 * next hedge and the reap share one loop timer armed at the earliest of
 * them: one timer per request. A due time is on the exchange's clock, 0
 * when it is off.
 */
void air__exchange_rearm(air__exchange *x) {
  if (x->reap || x->kick || x->cancel_pending || x->resume_pending) {
    /* Work for the next loop turn: before any due time. */
    air__deadlines_soon(&x->dl, air__now(x));
    return;
  }
  uint64_t next = x->hedge_due;
  uint64_t ka = x->c.keepalive_due;
  if (ka != 0 && (next == 0 || ka < next)) next = ka;
  for (unsigned k = 0; k < x->n_legs; k++)
    next = air__due_min(x->legs[k]->due, AIR__DUE_COUNT, next);
  air__deadlines_arm(&x->dl, next);
}

static void stop_timers(air__exchange *x) {
  for (unsigned k = 0; k < x->n_legs; k++) air__leg_disarm_all(x->legs[k]);
  x->hedge_due = 0;
  x->c.keepalive_due = 0;
  air__deadlines_stop(&x->dl);
}

/* ---- legs ---------------------------------------------------------------- */

static air__leg *leg_of(air__exchange *x, unsigned id,
                        enum air__leg_state state) {
  for (unsigned k = 0; k < x->n_legs; k++)
    if (x->legs[k]->state == state && x->legs[k]->id == id) return x->legs[k];
  return NULL;
}

/*
 * The engine cancelled leg l (it lost the race, or the run ended): its
 * transfer is removed now, closing the upstream connection, or from the
 * next loop turn when a transfer callback is running; a wait just stops.
 */
static void cancel_leg(air__exchange *x, air__leg *l) {
  if (l == NULL) return;
  air__leg_disarm_all(l);
  if (l->state == AIR__LEG_RUNNING)
    x->upstream_ms += air__now(x) - l->attempt_start;
  if (l->state == AIR__LEG_RUNNING && l->xfer != NULL && x->in_xfer_cb > 0) {
    l->state = AIR__LEG_LOST;
    x->reap = true;
  } else {
    air__leg_xfer_cancel(l);
    l->state = AIR__LEG_FREE;
  }
  air__exchange_rearm(x);
}

/* Removes the transfers of lost legs (never inside a transfer callback). */
static void reap(air__exchange *x) {
  x->reap = false;
  for (unsigned k = 0; k < x->n_legs; k++) {
    air__leg *l = x->legs[k];
    if (l->state != AIR__LEG_LOST) continue;
    air__leg_xfer_cancel(l);
    l->state = AIR__LEG_FREE;
  }
}

/*
 * After every engine call: the next hedge's time, and the CANCELs that
 * follow its action (a CANCEL may be the action itself: air_run_first_part).
 */
void air__exchange_engine_did(air__exchange *x, const air_action *a) {
  x->hedge_due = a->hedge_at_ms;
  if (a->kind == AIR_ACT_CANCEL)
    cancel_leg(x, leg_of(x, a->attempt_id, AIR__LEG_RUNNING)
                      ? leg_of(x, a->attempt_id, AIR__LEG_RUNNING)
                      : leg_of(x, a->attempt_id, AIR__LEG_WAITING));
  air_action c;
  while (air_run_next(x->run, &c) == 1) {
    x->hedge_due = c.hedge_at_ms;
    if (c.kind != AIR_ACT_CANCEL) continue;
    air__leg *l = leg_of(x, c.attempt_id, AIR__LEG_RUNNING);
    cancel_leg(x, l ? l : leg_of(x, c.attempt_id, AIR__LEG_WAITING));
  }
  if (!x->ended && !x->freeing) air__exchange_rearm(x);
}

int air__exchange_commit(air__leg *l) {
  air__exchange *x = l->x;
  air_action a;
  int rc = air_run_ready_to_commit(x->run, l->id, air__now(x), &a);
  if (rc != 0) return rc;
  if (a.kind != AIR_ACT_COMMIT || a.attempt_id != l->id) return AIR_ESTATE;
  x->act = a;
  air__exchange_engine_did(x, &a);
  return 0;
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
    air_run_cancel(x->run, air__now(x), &x->act);
    rc = AIR_ECANCELED;
  }
  if (rc != 0 && rc != AIR_ECANCELED && rc != AIR_EUPSTREAM) {
    /* The exchange's own failure (no memory, a broken promise): the run
     * closes the attempts still in flight and frees their probe leases;
     * the end reports rc as it is. */
    air_action gone;
    air_run_cancel(x->run, air__now(x), &gone);
  }
  x->ended = true;
  x->cancel_pending = false;
  x->kick = false;
  x->resume_pending = false;
  /* Racers still running stop with the request. */
  for (unsigned k = 0; k < x->n_legs; k++)
    if (x->legs[k]->state == AIR__LEG_RUNNING ||
        x->legs[k]->state == AIR__LEG_WAITING)
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
  r.total_ms = air__now(x) - x->start_ms;
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
    air__deadlines_soon(&x->dl, air__now(x));
    return;
  }
  deliver_end(x);
}

/* ---- when the timer fires ------------------------------------------------ */

static void on_wait_done(air__leg *l) {
  air__exchange *x = l->x;
  x->wait_ms += l->wait_len;
  l->state = AIR__LEG_FREE;
  air_run_wait_done(x->run, l->id, air__now(x), &x->act);
  air__exchange_engine_did(x, &x->act);
  air__exchange_step(x);
}

/* The newest racer has had no content for hedge.after_ms: the engine may
 * start a hedge beside it (docs/design.md §3.6). */
static void on_hedge(air__exchange *x) {
  air_action a;
  if (air_run_hedge(x->run, air__now(x), &a) != 0) return;
  air__exchange_engine_did(x, &a);
  if (a.kind != AIR_ACT_ATTEMPT) return;
  x->act = a;
  air__exchange_step(x);
}

/* The loop timer fired: lost legs are reaped, then the earliest deadline
 * that is due runs (by leg; first byte, attempt, part, wait in that order
 * on a tie; a hedge after them), then the timer is armed for what is left.
 * A handler may end the exchange, and its owner free it: the memory stays
 * until the timer's close callback. */
static void on_timer(void *arg) {
  air__exchange *x = arg;
  air__deadlines_fired(&x->dl);
  if (x->end_due) {
    deliver_end(x);
    return;
  }
  if (x->ended) return;
  if (x->reap) reap(x);
  if (x->cancel_pending) {
    air__exchange_cancel_now(x);
    return;
  }
  if (x->resume_pending) air__exchange_resume(x);
  if (x->kick) {
    /* What air__exchange_start could not tell: its first launch failed. */
    air__leg *l = x->kick_leg;
    x->kick = false;
    x->kick_leg = NULL;
    if (l != NULL && launched(l, x->kick_rc)) air__exchange_step(x);
    if (!x->freeing && !x->ended) air__exchange_rearm(x);
    return;
  }
  uint64_t now = air__now(x);
  air__leg *which_leg = NULL;
  int which = -1;
  uint64_t best = 0;
  for (unsigned k = 0; k < x->n_legs; k++) {
    int i = air__due_pick(x->legs[k]->due, AIR__DUE_COUNT, now, &best);
    if (i >= 0) {
      which_leg = x->legs[k];
      which = i;
    }
  }
  if (which_leg == NULL && x->hedge_due != 0 && x->hedge_due <= now) {
    x->hedge_due = 0;
    on_hedge(x);
  } else if (which_leg == NULL && x->c.keepalive_due != 0 &&
             x->c.keepalive_due <= now) {
    /* A rescue runs (docs/design.md §3.5): the caller hears we are alive. */
    x->c.keepalive_due = now + AIR__CONT_KEEPALIVE_MS;
    air__tell_keepalive(x);
  } else if (which_leg != NULL) {
    which_leg->due[which] = 0;
    if (which == AIR__DUE_WAIT)
      on_wait_done(which_leg);
    else
      air__leg_expired(which_leg, which);
  }
  if (x->cancel_pending) air__exchange_cancel_now(x);
  if (!x->freeing && !x->ended) air__exchange_rearm(x);
}

/* ---- stepping ------------------------------------------------------------ */

/* Hands l->up.fail to the policy (x->act is its decision) and tells the
 * observer about the failed attempt. */
static void policy_fail(air__leg *l) {
  air__exchange *x = l->x;
  l->state = AIR__LEG_FREE;
  x->last = l;
  air_run_fail(x->run, l->id, &l->up.fail, air__now(x),
               x->clock->wall_ms(x->clock->data), &x->act);
  air__exchange_engine_did(x, &x->act);
  air__tell_failed(x, air_run_attempt(x->run, l->log));
}

/* air__leg_launch found that the target cannot express the request: the
 * run goes on without it, and the observer hears of the skipped entry. */
static void skip_target(air__leg *l) {
  air__exchange *x = l->x;
  l->state = AIR__LEG_FREE;
  air__run_skip(x->run, l->id, air__upstream_str(&l->up, l->skip_field),
                air__upstream_str(&l->up, l->skip_msg), air__now(x), &x->act);
  air__exchange_engine_did(x, &x->act);
  air__tell_failed(x, air_run_attempt(x->run, l->log));
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

/* Before commit the policy decides; after it, continuation (when the
 * route continues) or the end. */
void air__exchange_failed(air__leg *l) {
  air__exchange *x = l->x;
  uint64_t now = air__now(x);
  uint64_t hint = 0;
  x->has_hint = air__retry_after(l->up.fail.headers, l->up.fail.n_headers,
                                 x->clock->wall_ms(x->clock->data), &hint) == 1;
  x->hint_ms = hint;
  if (l->cont || (l->gate.committed && x->c.on)) {
    air__cont_failed(l);
    return;
  }
  if (l->gate.committed) {
    l->state = AIR__LEG_FREE;
    x->last = l;
    air__run_fail_final(x->run, l->id, &l->up.fail, now, &x->act);
    air__exchange_engine_did(x, &x->act);
    end(x, AIR_EUPSTREAM);
    return;
  }
  if (l->native_json && x->tool_retry_id != l->id && l->up.fail.status == 400 &&
      schema_error(&l->up.fail)) {
    /* A schema 400 from a native structured-output target: the same
     * attempt once more with the JSON tool (docs/design.md §4), from the
     * ATTEMPT action the leg ran. */
    x->tool_retry_id = l->id;
    l->state = AIR__LEG_FREE;
    x->act = l->act;
    air__exchange_step(x);
    return;
  }
  policy_fail(l);
  air__exchange_step(x);
}

/*
 * After air__leg_launch(l) returned rc: true when step goes on with x->act
 * (a target skipped, an attempt that could not start), false when something
 * is in flight or the run moved on by itself. Inside air__exchange_start the
 * consumer must not hear of a failure yet: it is told on the next loop
 * turn (kick_leg).
 */
static bool launched(air__leg *l, int rc) {
  air__exchange *x = l->x;
  if (rc == 0) return false;
  if (x->starting) {
    x->kick_leg = l;
    x->kick_rc = rc;
    x->kick = true;
    air__exchange_rearm(x);
    return false;
  }
  if (rc == 2) {
    if (l->cont) { /* a continuation is never skipped: it fails */
      char m[AIR__MAX_MESSAGE_BYTES];
      const char *sm = air__upstream_str(&l->up, l->skip_msg);
      snprintf(m, sizeof(m), "%s", sm ? sm : "cannot be continued");
      air__leg_fail(l, AIR_REASON_BAD_REQUEST, 0, m, AIR_TRANSPORT_OK);
      air__cont_failed(l);
      return false;
    }
    skip_target(l);
    return true;
  }
  if (l->cont) {
    air__cont_failed(l);
    return false;
  }
  policy_fail(l);
  return true;
}

void air__exchange_step(air__exchange *x) {
  for (;;) {
    air__leg *l;
    if (x->ended) return;
    if (x->cancel_pending) { /* the consumer cancelled in on_failed */
      air__exchange_cancel_now(x);
      return;
    }
    switch (x->act.kind) {
      case AIR_ACT_ATTEMPT:
      case AIR_ACT_CONTINUE:
        l = air__leg_take(x);
        if (l == NULL) {
          end(x, AIR_ENOMEM);
          return;
        }
        if (!launched(l, air__leg_launch(l, &x->act))) return;
        continue;
      case AIR_ACT_WAIT:
        l = air__leg_take(x);
        if (l == NULL) {
          end(x, AIR_ENOMEM);
          return;
        }
        l->state = AIR__LEG_WAITING;
        l->id = x->act.attempt_id;
        l->wait_len = x->act.wait_ms;
        air__leg_arm(l, AIR__DUE_WAIT, air__now(x) + x->act.wait_ms);
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
          air__exchange_cancel_now(x);
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
 * stored state lives (docs/decisions.md, the Responses dialect). */
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
 * any other failure is left to air__leg_launch, which reports it. */
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

int air__exchange_start_on(const air__loop *loop, const air__transport_if *tr,
                           const air__exchange_opts *o,
                           const air__exchange_cb *cb, air__exchange **out) {
  if (loop == NULL || tr == NULL || o == NULL || o->cfg == NULL ||
      o->req == NULL || o->model == NULL || cb == NULL || cb->on_end == NULL)
    return AIR_EINVAL;
  air__pool *xpool = o->pools ? &o->pools->exchanges : NULL;
  air__exchange *x = air__pool_take(xpool, sizeof(*x));
  if (x == NULL) return AIR_ENOMEM;
  x->tr = *tr;
  x->o = *o;
  x->cb = *cb;
  x->clock = o->clock ? o->clock : air_clock_system();
  x->start_ms = air__now(x);
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
  air__cont_begin(x, pol);
  bool timer = air__deadlines_open(&x->dl, loop, x->clock, on_timer, x) == 0;
  if (!timer || air__leg_take(x) == NULL) {
    x->freeing = true;
    if (timer)
      air__deadlines_close(&x->dl, on_timer_closed, x);
    else
      on_timer_closed(x);
    return AIR_ENOMEM;
  }
  *out = x;
  x->hedge_due = x->act.hedge_at_ms;
  /* The first attempt starts now; nothing of the consumer's is called
   * inside this call: a failure at once is told, and an end delivered, on
   * the next loop turn (launched, end). */
  x->starting = true;
  air__exchange_step(x);
  x->starting = false;
  return 0;
}

void air__exchange_cancel(air__exchange *x) {
  if (x == NULL || x->ended || x->cancel_pending) return;
  if (x->in_xfer_cb > 0 || x->calling > 0) {
    /* Inside a callback: carried out where the call chain unwinds; the
     * consumer hears on_end only from now on. */
    x->cancel_pending = true;
    air__exchange_rearm(x);
    return;
  }
  air__exchange_cancel_now(x);
}

void air__exchange_cancel_now(air__exchange *x) {
  x->cancel_pending = false;
  if (x->ended) return;
  uint64_t now = air__now(x);
  for (unsigned k = 0; k < x->n_legs; k++) {
    air__leg *l = x->legs[k];
    if (l->xfer == NULL) continue;
    air__leg_xfer_cancel(l);
    if (l->state == AIR__LEG_RUNNING) x->upstream_ms += now - l->attempt_start;
    l->state = AIR__LEG_FREE;
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
    air__exchange_rearm(x);
    return;
  }
  x->resume_pending = false;
  uint64_t now = air__now(x);
  for (unsigned k = 0; k < x->n_legs; k++) {
    air__leg *l = x->legs[k];
    if (l->xfer == NULL || l->state != AIR__LEG_RUNNING) continue;
    if (l->paused) {
      /* The caller reads again: the gap between events counts from now. */
      l->paused = false;
      air__gate_resumed(&l->gate, now);
      air__leg_arm(l, AIR__DUE_PART, air__gate_deadline(&l->gate, NULL));
    }
    x->tr.ops->resume(x->tr.impl, l->xfer);
  }
}

static void on_timer_closed(void *arg) {
  air__exchange *x = arg;
  for (unsigned k = 0; k < x->n_legs; k++) air__leg_free(x->legs[k]);
  air__buf_cleanup(&x->msg);
  air__cont_cleanup(&x->c);
  air_run_free(x->run);
  air__pool_put(x->o.pools ? &x->o.pools->exchanges : NULL, x, sizeof(*x));
}

void air__exchange_pools_cleanup(air__exchange_pools *p) {
  if (p == NULL) return;
  air__pool_cleanup(&p->exchanges);
  air__pool_cleanup(&p->legs);
}

void air__exchange_free(air__exchange *x) {
  if (x == NULL || x->freeing) return;
  x->freeing = true;
  for (unsigned k = 0; k < x->n_legs; k++) air__leg_xfer_cancel(x->legs[k]);
  air__deadlines_close(&x->dl, on_timer_closed, x);
}
