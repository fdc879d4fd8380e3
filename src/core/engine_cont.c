/*
 * The run after commit (docs/design.md §3.5): what follows a failure of the
 * committed attempt. With continuation on, that failure starts a rescue
 * (phase RESCUE): the racer slot is refilled with a continuation attempt
 * (CONTINUE) on an eligible target, or waits for one (WAIT), chosen by the
 * route's rules as before commit; its first content commits it (COMMITTED
 * again), its failure before that is decided again. The whole rescue must
 * reach first content by rescue_end (the failure that started it +
 * continuation.max_gap_ms); total_ms does not apply after commit. Without
 * continuation, or when no rule continues, the failure is final.
 *
 * A target is eligible when it can continue the answer (its style, the same
 * model unless targets: any, it can express the request) and its breaker
 * admits it now; a target whose prefill is rejected is asked once more with
 * instruct, an attempt no budget counts.
 */
#include <string.h>

#include "backoff.h"
#include "engine_int.h"
#include "state.h"

/* Reasons a committed attempt's failure is continued on: the upstream
 * broke, not the request. */
static bool cont_reason(air_reason r) {
  return r == AIR_REASON_NETWORK || r == AIR_REASON_TIMEOUT_CHUNK ||
         r == AIR_REASON_OVERLOADED || r == AIR_REASON_SERVER_ERROR ||
         r == AIR_REASON_MALFORMED;
}

/*
 * Reasons a continuation attempt that failed before its first content is
 * decided again on: the ones above and every other upstream failure the
 * rules act on before commit (rate_limit, the start deadlines, auth, quota,
 * not_found, context_overflow). Never bad_request (our continuation request
 * itself), nor what judges the answer (refusal, content_filter, length).
 */
static bool cont_reason_early(air_reason r) {
  switch (r) {
    case AIR_REASON_BAD_REQUEST:
    case AIR_REASON_REFUSAL:
    case AIR_REASON_CONTENT_FILTER:
    case AIR_REASON_LENGTH:
    case AIR_REASON_ABORTED:
    case AIR_REASON_TIMEOUT_TOTAL:
    case AIR_REASON_NONE:
      return false;
    default:
      return r < AIR_REASON__COUNT;
  }
}

static uint64_t max_gap_of(const air_run *run) {
  const air__continuation *k = &run->pol->continuation;
  return k->max_gap_ms != 0 ? k->max_gap_ms : run->pol->timeouts.chunk_ms;
}

/*
 * The style target idx is continued with in this request: instruct once
 * its prefill was rejected in this request; else the configured one
 * (target, provider) when given; else a learned one (state, 24 h); else
 * the default by api.
 */
static air_cont_style style_of(const air_run *run, unsigned idx,
                               uint64_t now_ms) {
  const air__target *t = &run->route->targets[idx];
  if (idx < AIR__MAX_TARGETS && run->prefill_done[idx])
    return AIR_CONT_INSTRUCT;
  if (!t->style_set) {
    air_cont_style learned = air__state_style_get(run->st, t->name, now_ms);
    if (learned != AIR_CONT_NONE) return learned;
  }
  return t->style;
}

/*
 * Whether target idx may continue the answer (style not NONE, no INSTRUCT
 * under AIR_CONTF_NO_INSTRUCT, the same model unless targets: any, it can
 * express the request) and its breaker admits it now (no "soonest reopen"
 * fallback: an open breaker is skipped). *lease is the probe lease taken.
 */
static bool cont_eligible(air_run *run, unsigned idx, uint64_t now_ms,
                          air_cont_style *style, uint64_t *lease) {
  const air__target *t = &run->route->targets[idx];
  *lease = 0;
  *style = style_of(run, idx, now_ms);
  if (*style == AIR_CONT_NONE) return false;
  if (*style == AIR_CONT_INSTRUCT &&
      (run->cont_flags & AIR_CONTF_NO_INSTRUCT) != 0)
    return false;
  if (!run->pol->continuation.any_target) {
    const char *m = run->route->targets[run->answer_idx].model;
    if (t->model == NULL || m == NULL || strcmp(t->model, m) != 0) return false;
  }
  if (run->expressible != NULL && !run->expressible(run->expressible_data, t))
    return false;
  uint64_t reopen = now_ms;
  air__admit a =
      air__state_admit(run->st, t->name, air__run_breaker_of(run, idx),
                       run->rescue_end - now_ms + AIR__RUN_PROBE_LEASE_SLACK_MS,
                       now_ms, &reopen, lease);
  return a != AIR__ADMIT_NO;
}

/* The next untried eligible target for a switch (`to` when given). */
static bool cont_pick(air_run *run, const char *to, uint64_t now_ms,
                      unsigned *idx, air_cont_style *style, uint64_t *lease) {
  for (unsigned k = 0; k < run->n_order; k++) {
    unsigned i = run->order[k];
    if (run->tried[i]) continue;
    if (to != NULL && strcmp(run->route->targets[i].name, to) != 0) continue;
    if (cont_eligible(run, i, now_ms, style, lease)) {
      *idx = i;
      return true;
    }
  }
  return false;
}

/*
 * Starts a continuation attempt on target idx in slot r (CONTINUE), which
 * continuation.max counts. cause: the rule whose max it used (-1: none),
 * given back should the attempt be skipped.
 */
static int start_cont(air_run *run, air__racer *r, unsigned idx, uint64_t lease,
                      const char *override, air_cont_style style, int cause,
                      uint64_t now_ms, air_action *act) {
  int rc =
      air__run_start_attempt(run, r, idx, lease, override, false, now_ms, act);
  if (rc != 0 || act->kind != AIR_ACT_ATTEMPT) return rc;
  run->phase = AIR__RUN_RESCUE;
  run->cont_used++;
  r->cont = true;
  r->style = style;
  r->cause_rule = cause;
  run->log[r->log].continuation = true;
  act->kind = AIR_ACT_CONTINUE;
  act->deadline_ms = run->rescue_end;
  act->style = style;
  return 0;
}

/*
 * The rescue ends without a continuation: FAIL with the failure recorded
 * last. A committed attempt's timeout past total_ms reads timeout.total,
 * as it does without continuation (air__run_fail_racer).
 */
static int cont_give_up(air_run *run, air__racer *r, bool early,
                        const air_failure *f, uint64_t now_ms,
                        air_action *act) {
  if (!early && air__run_is_timeout(run->last_reason) &&
      now_ms >= run->deadline_ms) {
    air_attempt *e = &run->log[r->log];
    run->last_reason = AIR_REASON_TIMEOUT_TOTAL;
    e->reason = AIR_REASON_TIMEOUT_TOTAL;
    e->message = air__run_plain_message(run, e->target, f->message,
                                        AIR_REASON_TIMEOUT_TOTAL);
  }
  air__run_drop(r);
  return air__run_finish(run, run->last_reason, run->last_status, now_ms, act);
}

/*
 * Retry rule i matched r's failure in a rescue (early: r is a continuation
 * that failed before its first content). After a break another eligible
 * target comes first: the target whose stream just broke (went silent, was
 * cut) is the last choice for its own continuation (docs/design.md §3.5).
 * Else the same target after the rule's wait (or the failure's Retry-After
 * hint). Returns NEXT_RULE when the rule does not apply (the same target
 * may not continue): the walk goes on as past an exhausted rule.
 */
/* cont_retry's answer when its rule does not apply. */
#define NEXT_RULE 1

static int cont_retry(air_run *run, air__racer *r, size_t i, bool early,
                      const air_failure *f, bool hint, uint64_t hint_ms,
                      uint64_t now_ms, air_action *act) {
  const air__rule *rule = &run->pol->rules[i];
  const air__target *t = &run->route->targets[r->idx];
  unsigned idx;
  uint64_t lease;
  air_cont_style style;
  if (!early && cont_pick(run, NULL, now_ms, &idx, &style, &lease)) {
    run->rule_used[i]++;
    return start_cont(run, r, idx, lease,
                      air__run_merge_override(run, idx, rule), style, (int)i,
                      now_ms, act);
  }
  if (!cont_eligible(run, r->idx, now_ms, &style, &lease)) return NEXT_RULE;
  uint64_t remaining = run->rescue_end - now_ms;
  uint64_t wait = hint_ms;
  if (hint && (wait > rule->retry_after_max_ms || wait >= remaining)) {
    /* Too long to sleep: cool the target down and go elsewhere. */
    air__state_release(run->st, t->name, lease);
    air__state_cool(run->st, t->name, now_ms, hint_ms);
    if (!cont_pick(run, NULL, now_ms, &idx, &style, &lease))
      return cont_give_up(run, r, early, f, now_ms, act);
    return start_cont(run, r, idx, lease,
                      air__run_merge_override(run, idx, NULL), style, -1,
                      now_ms, act);
  }
  if (!hint)
    wait = air__backoff_wait(&rule->backoff, run->rule_used[i] + 1, &run->rng);
  /* No continuation could follow a wait that reaches the rescue's end. */
  if (wait >= remaining) {
    air__state_release(run->st, t->name, lease);
    return cont_give_up(run, r, early, f, now_ms, act);
  }
  run->rule_used[i]++;
  if (wait == 0)
    return start_cont(run, r, r->idx, lease,
                      air__run_merge_override(run, r->idx, rule), style, (int)i,
                      now_ms, act);
  /* The lease is asked again when the wait is over. */
  air__state_release(run->st, t->name, lease);
  run->phase = AIR__RUN_RESCUE;
  r->style = style;
  return air__run_wait(run, r, i, wait, hint, act);
}

int air__run_cont_fail(air_run *run, air__racer *r, const air_failure *f,
                       uint64_t now_ms, uint64_t wall_ms, air_action *act) {
  bool early = run->phase == AIR__RUN_RESCUE;
  const air__continuation *k = &run->pol->continuation;
  air_reason raw = air__run_reason_of(f);
  bool may = k->enabled && (run->cont_flags & AIR_CONTF_NEVER) == 0 &&
             (early ? cont_reason_early(raw) : cont_reason(raw));
  if (!may) return air__run_fail_racer(run, r, f, now_ms, act);

  air_reason reason = air__run_record_failure(run, r, f, now_ms, false);
  uint64_t hint_ms = 0;
  bool hint = air__run_verdict(run, r, f, reason, now_ms, wall_ms, &hint_ms);
  if (!early) {
    uint64_t end = now_ms + max_gap_of(run);
    run->rescue_end = end < now_ms ? UINT64_MAX : end;
  }
  if (now_ms >= run->rescue_end || air__run_budget_spent(run, reason) ||
      run->cont_used >= k->max)
    return cont_give_up(run, r, early, f, now_ms, act);

  const air__policy *pol = run->pol;
  size_t n_rules =
      pol->n_rules < AIR__MAX_RULES ? pol->n_rules : AIR__MAX_RULES;
  for (size_t i = 0; i < n_rules; i++) {
    const air__rule *rule = &pol->rules[i];
    if (!air__run_rule_matches(rule, reason, f->status, f->message)) continue;
    if (rule->max != AIR__UNLIMITED && run->rule_used[i] >= rule->max) continue;
    unsigned idx;
    uint64_t lease;
    air_cont_style style;
    switch (rule->action) {
      case AIR__RULE_FAIL:
        return cont_give_up(run, r, early, f, now_ms, act);
      case AIR__RULE_SWITCH:
        if (!cont_pick(run, rule->to, now_ms, &idx, &style, &lease))
          return cont_give_up(run, r, early, f, now_ms, act);
        run->rule_used[i]++;
        return start_cont(run, r, idx, lease,
                          air__run_merge_override(run, idx, rule), style,
                          (int)i, now_ms, act);
      case AIR__RULE_RETRY: {
        int rc = cont_retry(run, r, i, early, f, hint, hint_ms, now_ms, act);
        if (rc != NEXT_RULE) return rc;
        break;
      }
    }
  }
  return cont_give_up(run, r, early, f, now_ms, act);
}

int air__run_cont_wait_done(air_run *run, air__racer *r, uint64_t now_ms,
                            air_action *act) {
  const air__budget *b = &run->pol->budget;
  air_cont_style style;
  uint64_t lease = 0;
  if (now_ms >= run->rescue_end ||
      (b->max_total_attempts != AIR__UNLIMITED &&
       air__run_counted(run) >= b->max_total_attempts) ||
      !cont_eligible(run, r->idx, now_ms, &style, &lease)) {
    air__run_drop(r);
    return air__run_finish(run, run->last_reason, run->last_status, now_ms,
                           act);
  }
  return start_cont(run, r, r->idx, lease, r->next_override, style,
                    r->wait_rule, now_ms, act);
}

int air_run_limit_continuation(air_run *run, unsigned flags) {
  if (run == NULL) return AIR_EINVAL;
  run->cont_flags |= flags;
  return 0;
}

int air_run_prefill_rejected(air_run *run, unsigned attempt_id, uint64_t now_ms,
                             air_action *act) {
  if (run == NULL || act == NULL) return AIR_EINVAL;
  air__racer *r = air__run_slot(run, attempt_id, false);
  if (r == NULL) return AIR_ESTATE;
  air_failure f;
  memset(&f, 0, sizeof(f));
  f.reason = AIR_REASON_BAD_REQUEST;
  f.status = 400;
  f.message = "the target rejected the assistant prefill";
  unsigned idx = r->idx;
  bool again =
      run->phase == AIR__RUN_RESCUE && r->cont &&
      r->style == AIR_CONT_PREFILL && !r->content &&
      run->pol->continuation.instruct && idx < AIR__MAX_TARGETS &&
      !run->prefill_done[idx] &&
      (run->cont_flags & (AIR_CONTF_NEVER | AIR_CONTF_NO_INSTRUCT)) == 0 &&
      now_ms < run->rescue_end;
  if (!again) return air_run_fail(run, attempt_id, &f, now_ms, 0, act);
  air__run_reset_pending(run);
  /* Logged, but no budget, continuation.max or breaker counts it; the
   * rejected attempt's rule stays used by the one asked instead. */
  air_attempt *e = &run->log[r->log];
  e->reason = AIR_REASON_BAD_REQUEST;
  e->status = 400;
  e->ms = now_ms - e->start_ms;
  e->message = air__run_plain_message(run, e->target, f.message, f.reason);
  e->prefill_rejected = true;
  run->free_attempts++;
  if (run->cont_used > 0) run->cont_used--;
  run->prefill_done[idx] = true;
  const air__target *t = &run->route->targets[idx];
  air__state_style_learn(run->st, t->name, AIR_CONT_INSTRUCT, now_ms);
  uint64_t lease = r->lease; /* the same target: the lease goes on */
  r->lease = 0;
  const air__rule *rule =
      r->cause_rule >= 0 ? &run->pol->rules[r->cause_rule] : NULL;
  const char *override = air__run_merge_override(run, idx, rule);
  int rc = start_cont(run, r, idx, lease, override, AIR_CONT_INSTRUCT,
                      r->cause_rule, now_ms, act);
  return air__run_stamped(run, rc, act);
}
