/*
 * The run state machine (docs/design.md §1 and 3): one request's walk through
 * its route. Pure: the clock and the random source come from the caller,
 * nothing here does I/O or sleeps. Shared breaker/sticky state goes through
 * state.h.
 *
 * Phases: RACING (attempts in flight or in a retry backoff) -> COMMITTED
 * (one attempt's first content was released) -> OVER. The attempts of the
 * RACING phase live in racer slots: without hedging there is one, which
 * is in flight or waits (a retry backoff). Hedging (docs/design.md §3.6) adds
 * slots, up to 1 + hedge.max: a failure ends only its own slot's attempt
 * (a retry or switch refills the slot, anything else frees it), and the
 * run fails when the last slot is freed. The first racer with content wins
 * and every other slot is cancelled (CANCEL actions, read with
 * air_run_next). Every attempt has an id, unique in the run (a skipped
 * attempt's id is not reused, unlike its number); every event names the
 * attempt it is about, checks the phase and the id it is valid for and
 * returns AIR_ESTATE otherwise, leaving the run unchanged.
 *
 * Continuation (docs/design.md §3.5, engine_cont.c): with it on, a failure of
 * the committed attempt starts a rescue (phase RESCUE): the racer slot is
 * refilled with a continuation attempt (CONTINUE), or waits for one (WAIT),
 * chosen by the rules among the eligible targets; its first content commits it
 * (COMMITTED again), its failure before that is decided again. The whole
 * rescue must reach first content by rescue_end (the failure that started
 * it + continuation.max_gap_ms); total_ms does not apply after commit.
 * Nothing is ever hedged after commit (hedge_at is 0 outside RACING).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backoff.h"
#include "classify.h"
#include "engine_int.h"
#include "error.h"
#include "retry_after.h"
#include "state.h"

const air__policy *air__run_policy(const air_run *run) {
  return run->pol;
}

const air__target *air__run_target(const air_run *run) {
  return run->n_log == 0 ? NULL : &run->route->targets[run->cur];
}

const air__route *air__run_route(const air_run *run) {
  return run->route;
}

const air__breaker_cfg *air__run_breaker_of(const air_run *run, unsigned idx) {
  const air__target *t = &run->route->targets[idx];
  return &run->cfg->providers[t->provider].breaker;
}

/* Case-insensitive substring test; needle is a config string. */
static bool contains_ci(const char *hay, const char *needle) {
  if (hay == NULL) return false;
  size_t hn = strlen(hay), nn = strlen(needle);
  if (nn == 0) return true;
  for (size_t i = 0; i + nn <= hn; i++) {
    size_t j = 0;
    while (j < nn && tolower((unsigned char)hay[i + j]) ==
                         tolower((unsigned char)needle[j]))
      j++;
    if (j == nn) return true;
  }
  return false;
}

bool air__run_rule_matches(const air__rule *r, air_reason reason, int status,
                           const char *message) {
  if (r->on_mask == 0 && r->n_status == 0 && r->message == NULL) return false;
  if (r->on_mask != 0 && (r->on_mask & (1u << reason)) == 0) return false;
  if (r->n_status != 0) {
    bool hit = false;
    for (size_t i = 0; i < r->n_status && !hit; i++)
      hit = status >= r->status[i].lo && status <= r->status[i].hi;
    if (!hit) return false;
  }
  if (r->message != NULL && !contains_ci(message, r->message)) return false;
  return true;
}

/*
 * The override for an attempt on target idx: the target's fields with the
 * rule's merged over them (rule wins), merged once when the config loaded
 * (air__rule.target_override); the target's own without a rule.
 */
const char *air__run_merge_override(const air_run *run, unsigned idx,
                                    const air__rule *rule) {
  const char *own = run->route->targets[idx].override_json;
  if (rule == NULL || rule->override_json == NULL) return own;
  if (own == NULL) return rule->override_json;
  if (idx < rule->n_target_override && rule->target_override[idx] != NULL)
    return rule->target_override[idx];
  return rule->override_json;
}

/* ---- racer slots --------------------------------------------------------- */

/* The slot of attempt id in flight (waiting false) or of the WAIT that
 * follows failed attempt id (waiting true); NULL when there is none. */
air__racer *air__run_slot(air_run *run, unsigned id, bool waiting) {
  if (id == 0 || run->phase == AIR__RUN_OVER) return NULL;
  for (unsigned i = 0; i < AIR__MAX_RACERS; i++)
    if (run->racers[i].id == id && run->racers[i].waiting == waiting)
      return &run->racers[i];
  return NULL;
}

static unsigned n_busy(const air_run *run) {
  unsigned n = 0;
  for (unsigned i = 0; i < AIR__MAX_RACERS; i++) n += run->racers[i].id != 0;
  return n;
}

static air__racer *free_slot(air_run *run) {
  for (unsigned i = 0; i < AIR__MAX_RACERS; i++)
    if (run->racers[i].id == 0) return &run->racers[i];
  return NULL;
}

/* The racer in flight that started last, or NULL. */
static const air__racer *newest(const air_run *run) {
  const air__racer *best = NULL;
  for (unsigned i = 0; i < AIR__MAX_RACERS; i++) {
    const air__racer *r = &run->racers[i];
    if (r->id != 0 && !r->waiting && (best == NULL || r->log > best->log))
      best = r;
  }
  return best;
}

void air__run_drop(air__racer *r) {
  memset(r, 0, sizeof(*r));
}

/* Queues an action for air_run_next. */
static void queue(air_run *run, air_action_kind kind, unsigned id) {
  if (run->n_pend >= AIR__MAX_RACERS) return;
  air_action *a = &run->pend[run->n_pend++];
  memset(a, 0, sizeof(*a));
  a->kind = kind;
  a->attempt_id = id;
}

void air__run_reset_pending(air_run *run) {
  run->n_pend = run->pend_at = 0;
}

/*
 * Racer r stops because the request is decided elsewhere: it lost the race
 * (reason NONE: outcome hedge_lost, no breaker verdict) or the run ends
 * with reason. A probe lease it held is released; CANCEL is queued.
 */
static void lose(air_run *run, air__racer *r, air_reason reason,
                 uint64_t now_ms) {
  if (!r->waiting) {
    air_attempt *e = &run->log[r->log];
    e->ms = now_ms - e->start_ms;
    if (reason == AIR_REASON_NONE)
      e->hedge_lost = true;
    else
      e->reason = reason;
  }
  air__state_release(run->st, run->route->targets[r->idx].name, r->lease);
  queue(run, AIR_ACT_CANCEL, r->id);
  air__run_drop(r);
}

/* Every racer but keep loses the race (keep may be NULL). */
static void lose_others(air_run *run, const air__racer *keep, uint64_t now_ms) {
  for (unsigned i = 0; i < AIR__MAX_RACERS; i++)
    if (run->racers[i].id != 0 && &run->racers[i] != keep)
      lose(run, &run->racers[i], AIR_REASON_NONE, now_ms);
}

/* The run is over with reason: racers still in flight end with it (CANCEL
 * queued for each). */
int air__run_finish(air_run *run, air_reason reason, int status,
                    uint64_t now_ms, air_action *act) {
  for (unsigned i = 0; i < AIR__MAX_RACERS; i++)
    if (run->racers[i].id != 0) lose(run, &run->racers[i], reason, now_ms);
  run->phase = AIR__RUN_OVER;
  memset(act, 0, sizeof(*act));
  act->kind = AIR_ACT_FAIL;
  act->attempt_id = run->last_id;
  act->reason = reason;
  act->status = status;
  return 0;
}

static int idle(air_action *act) {
  memset(act, 0, sizeof(*act));
  act->kind = AIR_ACT_IDLE;
  return 0;
}

/* Racer r is out (its failure stays in the log): the others go on (IDLE),
 * or with none left the run fails with the last failure. */
static int end_racer(air_run *run, air__racer *r, uint64_t now_ms,
                     air_action *act) {
  air__run_drop(r);
  if (n_busy(run) > 0) return idle(act);
  return air__run_finish(run, run->last_reason, run->last_status, now_ms, act);
}

/* The monotonic time an attempt on target idx started at now_ms must commit
 * by: attempt_ms, clipped to the request's deadline. */
static uint64_t attempt_deadline(const air_run *run, unsigned idx,
                                 uint64_t now_ms) {
  uint64_t deadline = now_ms + run->route->targets[idx].timeouts.attempt_ms;
  if (deadline > run->deadline_ms || deadline < now_ms)
    deadline = run->deadline_ms;
  return deadline;
}

/*
 * Starts an attempt on target idx in slot r. lease: pick acquired the
 * target's half-open probe lease for it (0: none); every return without an
 * attempt (the log is full, no memory) gives the lease back, or the target
 * would not be admitted again until the lease expired.
 */
int air__run_start_attempt(air_run *run, air__racer *r, unsigned idx,
                           uint64_t lease, const char *override, bool hedge,
                           uint64_t now_ms, air_action *act) {
  if (run->n_log >= AIR__MAX_ATTEMPT_LOG) {
    air__state_release(run->st, run->route->targets[idx].name, lease);
    air__run_drop(r);
    return air__run_finish(run, run->last_reason, run->last_status, now_ms,
                           act);
  }
  if (run->n_log == run->cap_log) {
    size_t cap = run->cap_log ? run->cap_log * 2 : 8;
    if (cap > AIR__MAX_ATTEMPT_LOG) cap = AIR__MAX_ATTEMPT_LOG;
    air_attempt *log = realloc(run->log, cap * sizeof(*log));
    if (log == NULL) {
      air__state_release(run->st, run->route->targets[idx].name, lease);
      return AIR_ENOMEM;
    }
    run->log = log;
    run->cap_log = cap;
  }
  const air__target *t = &run->route->targets[idx];
  bool refill = r->id != 0; /* the slot's attempt failed: a retry or switch */
  run->attempts++;
  run->last_id++;
  run->n_real++;
  run->cur = idx;
  run->tried[idx] = true;
  run->phase = AIR__RUN_RACING;
  r->id = run->last_id;
  r->idx = idx;
  r->log = run->n_log;
  r->lease = lease;
  r->cause_rule = -1;
  r->waiting = false;
  r->hedge = hedge;
  r->content = false;
  air_attempt *e = &run->log[run->n_log++];
  memset(e, 0, sizeof(*e));
  e->n = run->attempts;
  e->target = t->name;
  e->message = "";
  e->request_id = "";
  e->start_ms = now_ms;
  e->hedge = hedge;
  e->hedge_refill = hedge && refill;

  uint64_t deadline = attempt_deadline(run, idx, now_ms);
  memset(act, 0, sizeof(*act));
  act->kind = AIR_ACT_ATTEMPT;
  act->attempt_id = run->last_id;
  act->target = t->name;
  act->target_index = idx;
  act->attempt = run->attempts;
  act->deadline_ms = deadline;
  act->override_json = override;
  act->flags = hedge ? AIR_ACTF_HEDGE : 0;
  return 0;
}

/*
 * The probe lease an attempt on target idx takes: until the attempt must
 * commit (the engine gives the probe's verdict by then, or the attempt
 * fails: attempt_ms) plus AIR__RUN_PROBE_LEASE_SLACK_MS, so it outlives every
 * live probe and frees itself only when its owner vanished without a verdict.
 */
static uint64_t probe_lease_ms(const air_run *run, unsigned idx,
                               uint64_t now_ms) {
  return attempt_deadline(run, idx, now_ms) - now_ms +
         AIR__RUN_PROBE_LEASE_SLACK_MS;
}

/*
 * Chooses the next untried target (a racing one is tried): `to` when given
 * and untried, else the first in order whose breaker admits it; when every
 * untried one is open, the one that reopens soonest (not for a hedge, which
 * only starts where the breaker admits it). Returns false when none is
 * left. *lease is the probe lease taken for the chosen target (0: none).
 */
static bool pick(air_run *run, const char *to, bool hedge, uint64_t now_ms,
                 unsigned *idx, uint64_t *lease) {
  *lease = 0;
  if (to != NULL) {
    for (unsigned i = 0; i < run->route->n_targets; i++) {
      if (!run->tried[i] && strcmp(run->route->targets[i].name, to) == 0) {
        *idx = i;
        return true;
      }
    }
  }
  bool found = false;
  uint64_t soonest = UINT64_MAX;
  for (unsigned k = 0; k < run->n_order; k++) {
    unsigned i = run->order[k];
    if (run->tried[i]) continue;
    if (run->expressible != NULL &&
        !run->expressible(run->expressible_data, &run->route->targets[i])) {
      /* It will be skipped: no probe slot, no breaker verdict. */
      *idx = i;
      return true;
    }
    uint64_t reopen = now_ms;
    air__admit a = air__state_admit(
        run->st, run->route->targets[i].name, air__run_breaker_of(run, i),
        probe_lease_ms(run, i, now_ms), now_ms, &reopen, lease);
    if (a != AIR__ADMIT_NO) {
      *idx = i;
      return true;
    }
    if (!hedge && (!found || reopen < soonest)) {
      soonest = reopen;
      *idx = i;
      found = true;
    }
  }
  return found;
}

/* Refills slot r with the next target (a switch), or ends it. A hedge
 * slot stays a hedge and, as a hedge does, goes only where the breaker
 * admits it (docs/design.md §3.6). */
static int switch_target(air_run *run, air__racer *r, const char *to,
                         const air__rule *rule, bool hedge, uint64_t now_ms,
                         air_action *act) {
  unsigned idx;
  uint64_t lease;
  if (!pick(run, to, hedge, now_ms, &idx, &lease))
    return end_racer(run, r, now_ms, act);
  const char *ov = air__run_merge_override(run, idx, rule);
  return air__run_start_attempt(run, r, idx, lease, ov, hedge, now_ms, act);
}

/* ---- hedging (docs/design.md §3.6) --------------------------------------- */

uint64_t air__run_hedge_at(const air_run *run) {
  if (run == NULL || run->phase != AIR__RUN_RACING) return 0;
  const air__racer *nw = newest(run);
  if (nw == NULL || nw->id == run->hedge_block) return 0;
  for (unsigned i = 0; i < AIR__MAX_RACERS; i++)
    if (run->racers[i].id != 0 && run->racers[i].content) return 0;
  const air__hedge_cfg *h = &run->route->targets[nw->idx].hedge;
  if (!h->enabled || run->hedges >= h->max || n_busy(run) >= AIR__MAX_RACERS)
    return 0;
  if (run->prompt_bytes > h->max_prompt_bytes) return 0;
  if (run->route->n_targets == 1 && !h->same_target) return 0;
  const air__budget *b = &run->pol->budget;
  if (b->max_total_attempts != AIR__UNLIMITED &&
      run->attempts >= b->max_total_attempts)
    return 0;
  uint64_t at = run->log[nw->log].start_ms + h->after_ms;
  return at < run->deadline_ms ? at : 0;
}

void air__run_set_prompt_bytes(air_run *run, uint64_t n) {
  if (run != NULL) run->prompt_bytes = n;
}

/* Every action an event returns says when the next hedge is due. */
int air__run_stamped(air_run *run, int rc, air_action *act) {
  if (rc == 0) act->hedge_at_ms = air__run_hedge_at(run);
  return rc;
}

static int run_hedge(air_run *run, uint64_t now_ms, air_action *act) {
  uint64_t at = air__run_hedge_at(run);
  const air__racer *nw = newest(run);
  air__racer *slot = free_slot(run);
  if (at == 0 || now_ms < at || nw == NULL || slot == NULL) return idle(act);
  unsigned idx = 0;
  uint64_t lease = 0;
  if (!pick(run, NULL, true, now_ms, &idx, &lease)) {
    if (!run->route->targets[nw->idx].hedge.same_target) {
      run->hedge_block = nw->id; /* asked again only for a newer racer */
      return idle(act);
    }
    idx = nw->idx; /* same_target: the newest racer's target again */
  }
  run->hedges++;
  return air__run_start_attempt(run, slot, idx, lease,
                                air__run_merge_override(run, idx, NULL), true,
                                now_ms, act);
}

int air_run_hedge(air_run *run, uint64_t now_ms, air_action *act) {
  if (run == NULL || act == NULL) return AIR_EINVAL;
  if (run->phase != AIR__RUN_RACING) return AIR_ESTATE;
  air__run_reset_pending(run);
  return air__run_stamped(run, run_hedge(run, now_ms, act), act);
}

int air_run_next(air_run *run, air_action *act) {
  if (run == NULL || act == NULL || run->pend_at >= run->n_pend) return 0;
  *act = run->pend[run->pend_at++];
  act->hedge_at_ms = air__run_hedge_at(run);
  return 1;
}

/* ---- starting ------------------------------------------------------------ */

int air_run_new(const air_config *cfg, air_state *state, const char *model,
                const air_rng *rng, uint64_t now_ms, air_run **out,
                air_action *act) {
  return air__run_new_checked(cfg, state, model, rng, now_ms, NULL, NULL, out,
                              act);
}

int air__run_new_checked(const air_config *cfg, air_state *state,
                         const char *model, const air_rng *rng, uint64_t now_ms,
                         air__run_expressible_fn ok, void *ok_data,
                         air_run **out, air_action *act) {
  if (cfg == NULL || model == NULL || out == NULL || act == NULL)
    return AIR_EINVAL;
  size_t mlen = strlen(model);
  const air__route *route = air__config_route(cfg, model, mlen);
  size_t pidx = 0;
  const char *slash = memchr(model, '/', mlen);
  if (route == NULL) {
    if (slash == NULL || slash == model || slash[1] == '\0' ||
        air__config_provider(cfg, model, (size_t)(slash - model), &pidx) ==
            NULL)
      return AIR_ENOTFOUND;
  }
  air_run *run = calloc(1, sizeof(*run));
  if (run == NULL) return AIR_ENOMEM;
  air__arena_init(&run->arena);
  run->cfg = cfg;
  run->st = state;
  run->expressible = ok;
  run->expressible_data = ok_data;
  if (route == NULL) {
    char *name = air__arena_strndup(&run->arena, model, mlen);
    if (name == NULL) {
      free(run);
      return AIR_ENOMEM;
    }
    run->direct_target.name = name;
    run->direct_target.model = name + (slash - model) + 1;
    run->direct_target.provider = pidx;
    run->direct_target.timeouts = cfg->defaults.timeouts;
    run->direct_target.hedge = cfg->defaults.hedge;
    run->direct_target.style = cfg->providers[pidx].continuation_style;
    run->direct_target.style_set = cfg->providers[pidx].continuation_style_set;
    run->direct.name = name;
    run->direct.targets = &run->direct_target;
    run->direct.n_targets = 1;
    run->direct.policy = cfg->defaults;
    run->direct.policy.sticky.enabled = false;
    route = &run->direct;
  }
  run->route = route;
  run->pol = &route->policy;
  if (rng != NULL) {
    run->rng = *rng;
  } else {
    run->seed = now_ms ^ 0x9e3779b97f4a7c15ull;
    run->rng.next = air__splitmix64;
    run->rng.data = &run->seed;
  }
  run->deadline_ms = now_ms + run->pol->timeouts.total_ms;
  if (run->deadline_ms < now_ms) run->deadline_ms = UINT64_MAX;

  unsigned n = (unsigned)route->n_targets;
  if (n > AIR__MAX_TARGETS) n = AIR__MAX_TARGETS;
  unsigned first = air__sticky_take(state, route->name, &run->pol->sticky,
                                    route->targets, n, now_ms);
  if (first >= n) first = 0;
  run->order[run->n_order++] = first;
  for (unsigned i = 0; i < n; i++)
    if (i != first) run->order[run->n_order++] = i;

  int rc = switch_target(run, &run->racers[0], NULL, NULL, false, now_ms, act);
  if (rc != 0) {
    air_run_free(run);
    return rc;
  }
  *out = run;
  return air__run_stamped(run, 0, act);
}

void air_run_free(air_run *run) {
  if (run == NULL) return;
  for (unsigned i = 0; i < AIR__MAX_RACERS; i++) {
    const air__racer *r = &run->racers[i];
    if (r->id != 0)
      air__state_release(run->st, run->route->targets[r->idx].name, r->lease);
  }
  free(run->log);
  air__arena_cleanup(&run->arena);
  free(run);
}

/* Copies a wire string into the arena, bounded by AIR__MAX_MESSAGE_BYTES. */
static const char *keep(air_run *run, const char *s) {
  if (s == NULL) return "";
  size_t n = strnlen(s, AIR__MAX_MESSAGE_BYTES);
  const char *p = air__arena_strndup(&run->arena, s, n);
  return p ? p : "";
}

/*
 * The message a caller and the log see for a failed attempt (docs/design.md
 * §5): "TARGET: DETAIL (REASON)", the detail being what the attempt reported
 * (the upstream's own message, or ours), bounded by AIR__MAX_MESSAGE_BYTES.
 * It names the upstream and the reason in words; rules that match on
 * `message` see the attempt's own message, not this one.
 */
const char *air__run_plain_message(air_run *run, const char *target,
                                   const char *detail, air_reason reason) {
  char buf[AIR__MAX_MESSAGE_BYTES];
  const char *rn = air_reason_name(reason);
  if (detail == NULL || detail[0] == '\0') detail = "failed";
  int n = snprintf(buf, sizeof(buf), "%s: %.*s (%s)", target,
                   (int)(sizeof(buf) / 2), detail, rn ? rn : "unknown");
  if (n < 0) return "";
  size_t len = (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1;
  const char *p = air__arena_strndup(&run->arena, buf, len);
  return p ? p : "";
}

air_reason air__run_reason_of(const air_failure *f) {
  air_reason reason = f->reason;
  if (reason == AIR_REASON_NONE || reason >= AIR_REASON__COUNT)
    reason =
        air__classify(f->status, f->type, f->code, f->message, f->transport);
  return reason;
}

air_reason air__run_record_failure(air_run *run, const air__racer *r,
                                   const air_failure *f, uint64_t now_ms,
                                   bool total) {
  air_reason reason = air__run_reason_of(f);
  if (total && air__run_is_timeout(reason) && now_ms >= run->deadline_ms)
    reason = AIR_REASON_TIMEOUT_TOTAL;
  air_attempt *e = &run->log[r->log];
  e->reason = reason;
  e->status = f->status;
  e->ms = now_ms - e->start_ms;
  e->message = air__run_plain_message(run, e->target, f->message, reason);
  e->request_id = keep(run, f->request_id);
  run->last_reason = reason;
  run->last_status = f->status;
  return reason;
}

static air_reason record_failure(air_run *run, const air__racer *r,
                                 const air_failure *f, uint64_t now_ms) {
  return air__run_record_failure(run, r, f, now_ms,
                                 run->phase != AIR__RUN_RESCUE);
}

/* ---- events -------------------------------------------------------------- */

int air__run_fail_racer(air_run *run, air__racer *r, const air_failure *f,
                        uint64_t now_ms, air_action *act) {
  air_reason reason = record_failure(run, r, f, now_ms);
  const air__target *t = &run->route->targets[r->idx];
  if (reason == AIR_REASON_ABORTED) {
    air__state_release(run->st, t->name, r->lease);
  } else {
    air__state_record(run->st, t->name, air__run_breaker_of(run, r->idx),
                      reason, r->lease, now_ms);
  }
  air__run_drop(r);
  return air__run_finish(run, reason, f->status, now_ms, act);
}

bool air__run_verdict(air_run *run, air__racer *r, const air_failure *f,
                      air_reason reason, uint64_t now_ms, uint64_t wall_ms,
                      uint64_t *hint_ms) {
  const air__target *t = &run->route->targets[r->idx];
  air__state_record(run->st, t->name, air__run_breaker_of(run, r->idx), reason,
                    r->lease, now_ms);
  r->lease = 0;
  *hint_ms = 0;
  bool hint = f->n_headers > 0 &&
              air__retry_after(f->headers, f->n_headers, wall_ms, hint_ms) == 1;
  if (hint && *hint_ms > AIR__RUN_COOL_AFTER_MS)
    air__state_cool(run->st, t->name, now_ms, *hint_ms);
  return hint;
}

bool air__run_budget_spent(air_run *run, air_reason reason) {
  if (run->reason_count[reason] < UINT32_MAX) run->reason_count[reason]++;
  const air__budget *b = &run->pol->budget;
  if (b->max_total_attempts != AIR__UNLIMITED &&
      air__run_counted(run) >= b->max_total_attempts)
    return true;
  return b->per_reason[reason] != AIR__UNLIMITED &&
         run->reason_count[reason] >= b->per_reason[reason];
}

int air__run_wait(air_run *run, air__racer *r, size_t i, uint64_t wait,
                  bool hint, air_action *act) {
  air_attempt *e = &run->log[r->log];
  r->wait_rule = (int)i;
  e->wait_ms = wait;
  e->hint = hint;
  r->next_override = air__run_merge_override(run, r->idx, &run->pol->rules[i]);
  r->waiting = true;
  memset(act, 0, sizeof(*act));
  act->kind = AIR_ACT_WAIT;
  act->attempt_id = r->id;
  act->wait_ms = wait;
  return 0;
}

static int run_fail(air_run *run, air__racer *r, const air_failure *f,
                    uint64_t now_ms, uint64_t wall_ms, air_action *act) {
  /* After commit the attempt is final unless it is continued (3.5). */
  if (run->phase == AIR__RUN_COMMITTED || run->phase == AIR__RUN_RESCUE)
    return air__run_cont_fail(run, r, f, now_ms, wall_ms, act);
  air_reason reason = record_failure(run, r, f, now_ms);
  const air__target *t = &run->route->targets[r->idx];

  if (reason == AIR_REASON_ABORTED) {
    air__state_release(run->st, t->name, r->lease);
    air__run_drop(r);
    return air__run_finish(run, reason, f->status, now_ms, act);
  }
  /* A retry rule with its own retry_after.max_ms cools below when it
   * declines to wait. */
  uint64_t hint_ms = 0;
  bool hint = air__run_verdict(run, r, f, reason, now_ms, wall_ms, &hint_ms);
  if (reason == AIR_REASON_TIMEOUT_TOTAL || now_ms >= run->deadline_ms) {
    air__run_drop(r);
    return air__run_finish(run, reason, f->status, now_ms, act);
  }

  /* A spent budget ends this racer; the others go on (docs/design.md
   * §3.6). */
  if (air__run_budget_spent(run, reason)) return end_racer(run, r, now_ms, act);

  const air__policy *pol = run->pol;
  size_t n_rules =
      pol->n_rules < AIR__MAX_RULES ? pol->n_rules : AIR__MAX_RULES;
  int rc;
  for (size_t i = 0; i < n_rules; i++) {
    const air__rule *rule = &pol->rules[i];
    if (!air__run_rule_matches(rule, reason, f->status, f->message)) continue;
    if (rule->max != AIR__UNLIMITED && run->rule_used[i] >= rule->max) continue;
    switch (rule->action) {
      case AIR__RULE_FAIL: /* with other racers: only this one stops */
        return end_racer(run, r, now_ms, act);
      case AIR__RULE_SWITCH:
        run->rule_used[i]++;
        rc = switch_target(run, r, rule->to, rule, r->hedge, now_ms, act);
        if (act->kind == AIR_ACT_ATTEMPT) r->cause_rule = (int)i;
        return rc;
      case AIR__RULE_RETRY:
        break;
    }
    uint64_t remaining = run->deadline_ms - now_ms;
    uint64_t wait = hint_ms;
    if (hint && (wait > rule->retry_after_max_ms || wait >= remaining)) {
      /* Too long to sleep: cool the target down and go elsewhere. */
      air__state_cool(run->st, t->name, now_ms, hint_ms);
      return switch_target(run, r, NULL, NULL, r->hedge, now_ms, act);
    }
    if (!hint)
      wait =
          air__backoff_wait(&rule->backoff, run->rule_used[i] + 1, &run->rng);
    /* No attempt could follow a wait that reaches the deadline. */
    if (wait >= remaining) return end_racer(run, r, now_ms, act);
    run->rule_used[i]++;
    return air__run_wait(run, r, i, wait, hint, act);
  }
  return end_racer(run, r, now_ms, act);
}

int air_run_fail(air_run *run, unsigned attempt_id, const air_failure *f,
                 uint64_t now_ms, uint64_t wall_ms, air_action *act) {
  if (run == NULL || f == NULL || act == NULL ||
      !air__record_size_ok(f->size, AIR__FAILURE_SIZE_V0))
    return AIR_EINVAL;
  air__racer *r = air__run_slot(run, attempt_id, false);
  if (r == NULL) return AIR_ESTATE;
  air__run_reset_pending(run);
  return air__run_stamped(run, run_fail(run, r, f, now_ms, wall_ms, act), act);
}

int air__run_fail_final(air_run *run, unsigned attempt_id, const air_failure *f,
                        uint64_t now_ms, air_action *act) {
  if (run == NULL || f == NULL || act == NULL) return AIR_EINVAL;
  air__racer *r = air__run_slot(run, attempt_id, false);
  if (r == NULL) return AIR_ESTATE;
  air__run_reset_pending(run);
  return air__run_stamped(run, air__run_fail_racer(run, r, f, now_ms, act),
                          act);
}

/* A content event about attempt_id begins: its racer, which content may
 * come from (before commit a racer, in a rescue the continuation attempt),
 * with the last event's pending CANCELs dropped; NULL (the run unchanged)
 * for any other attempt. */
static air__racer *content_event(air_run *run, unsigned attempt_id) {
  air__racer *r = air__run_slot(run, attempt_id, false);
  if (r == NULL || (run->phase != AIR__RUN_RACING &&
                    !(run->phase == AIR__RUN_RESCUE && r->cont)))
    return NULL;
  air__run_reset_pending(run);
  return r;
}

int air_run_first_part(air_run *run, unsigned attempt_id, uint64_t now_ms,
                       air_action *act) {
  if (run == NULL || act == NULL) return AIR_EINVAL;
  air__racer *r = content_event(run, attempt_id);
  if (r == NULL) return AIR_ESTATE;
  r->content = true;
  lose_others(run, r, now_ms);
  if (air_run_next(run, act) == 0) idle(act);
  return air__run_stamped(run, 0, act);
}

int air_run_ready_to_commit(air_run *run, unsigned attempt_id, uint64_t now_ms,
                            air_action *act) {
  if (run == NULL || act == NULL) return AIR_EINVAL;
  air__racer *r = content_event(run, attempt_id);
  if (r == NULL) return AIR_ESTATE;
  if (run->phase == AIR__RUN_RACING) run->answer_idx = r->idx;
  const air__target *t = &run->route->targets[r->idx];
  /* A probe's verdict is given at its first content (docs/design.md §3.1): the
   * target answers, so the breaker closes and the lease is freed now, not
   * when a long answer ends. Other attempts give theirs when they end. */
  if (r->lease != 0) {
    air__state_record(run->st, t->name, air__run_breaker_of(run, r->idx),
                      AIR_REASON_NONE, r->lease, now_ms);
    r->lease = 0;
  }
  r->content = true;
  lose_others(run, r, now_ms);
  run->phase = AIR__RUN_COMMITTED;
  run->cur = r->idx;
  memset(act, 0, sizeof(*act));
  act->kind = AIR_ACT_COMMIT;
  act->attempt_id = attempt_id;
  act->target = t->name;
  act->target_index = r->idx;
  act->attempt = run->log[r->log].n;
  return air__run_stamped(run, 0, act);
}

int air_run_succeed(air_run *run, unsigned attempt_id, uint64_t now_ms,
                    air_action *act) {
  if (run == NULL || act == NULL) return AIR_EINVAL;
  air__racer *r = air__run_slot(run, attempt_id, false);
  if (r == NULL) return AIR_ESTATE;
  air__run_reset_pending(run);
  air_attempt *e = &run->log[r->log];
  const air__target *t = &run->route->targets[r->idx];
  e->reason = AIR_REASON_NONE;
  e->ms = now_ms - e->start_ms;
  air__state_record(run->st, t->name, air__run_breaker_of(run, r->idx),
                    AIR_REASON_NONE, r->lease, now_ms);
  r->lease = 0;
  lose_others(run, r, now_ms);
  /* A hedge win never makes a route sticky (docs/design.md §3.6). */
  /* Nor does a continued answer change it. */
  if (run->route != &run->direct && !r->hedge && !r->cont)
    air__sticky_settle(run->st, run->route->name, &run->pol->sticky, t->name,
                       r->idx == 0, now_ms);
  run->cur = r->idx;
  air__run_drop(r);
  run->phase = AIR__RUN_OVER;
  memset(act, 0, sizeof(*act));
  act->kind = AIR_ACT_DONE;
  act->attempt_id = attempt_id;
  return air__run_stamped(run, 0, act);
}

int air_run_wait_done(air_run *run, unsigned attempt_id, uint64_t now_ms,
                      air_action *act) {
  if (run == NULL || act == NULL) return AIR_EINVAL;
  air__racer *r = air__run_slot(run, attempt_id, true);
  if (r == NULL ||
      (run->phase != AIR__RUN_RACING && run->phase != AIR__RUN_RESCUE))
    return AIR_ESTATE;
  air__run_reset_pending(run);
  if (run->phase == AIR__RUN_RESCUE)
    return air__run_stamped(run, air__run_cont_wait_done(run, r, now_ms, act),
                            act);
  if (now_ms >= run->deadline_ms) {
    air__run_drop(r);
    return air__run_stamped(
        run, air__run_finish(run, AIR_REASON_TIMEOUT_TOTAL, 0, now_ms, act),
        act);
  }
  /* A hedge may have spent the budget during the wait (docs/design.md §3.6). */
  const air__budget *b = &run->pol->budget;
  if (b->max_total_attempts != AIR__UNLIMITED &&
      run->attempts >= b->max_total_attempts)
    return air__run_stamped(run, end_racer(run, r, now_ms, act), act);
  int wait_rule = r->wait_rule;
  /* The retry of a hedge is a hedge (docs/design.md §3.6). */
  int rc = air__run_start_attempt(run, r, r->idx, 0, r->next_override, r->hedge,
                                  now_ms, act);
  if (rc == 0 && act->kind == AIR_ACT_ATTEMPT) r->cause_rule = wait_rule;
  return air__run_stamped(run, rc, act);
}

int air__run_skip(air_run *run, unsigned attempt_id, const char *field,
                  const char *message, uint64_t now_ms, air_action *act) {
  if (run == NULL || act == NULL) return AIR_EINVAL;
  air__racer *r = air__run_slot(run, attempt_id, false);
  if (r == NULL || run->phase != AIR__RUN_RACING) return AIR_ESTATE;
  air__run_reset_pending(run);
  air_attempt *e = &run->log[r->log];
  const air__target *t = &run->route->targets[r->idx];
  e->n = 0;
  e->skipped = true;
  e->reason = AIR_REASON_NONE;
  e->status = 0;
  e->ms = now_ms - e->start_ms;
  e->field = keep(run, field);
  e->message = keep(run, message);
  air__state_release(run->st, t->name, r->lease);
  r->lease = 0;
  run->attempts--;
  run->n_real--;
  if (r->cause_rule >= 0 && run->rule_used[r->cause_rule] > 0)
    run->rule_used[r->cause_rule]--;
  r->cause_rule = -1;
  if (run->n_real == 0 && run->last_reason == AIR_REASON_NONE) {
    run->last_reason = AIR_REASON_BAD_REQUEST;
    run->last_status = 400;
  }
  /* A skipped hedge goes on to the next target, still a hedge. */
  return air__run_stamped(
      run, switch_target(run, r, NULL, NULL, r->hedge, now_ms, act), act);
}

unsigned air__run_attempts(const air_run *run) {
  return run == NULL ? 0 : run->attempts;
}

int air_run_cancel(air_run *run, uint64_t now_ms, air_action *act) {
  if (run == NULL || act == NULL) return AIR_EINVAL;
  if (run->phase == AIR__RUN_OVER) return AIR_ESTATE;
  air__run_reset_pending(run);
  for (unsigned i = 0; i < AIR__MAX_RACERS; i++) {
    air__racer *r = &run->racers[i];
    if (r->id == 0) continue;
    if (!r->waiting) {
      air_attempt *e = &run->log[r->log];
      e->reason = AIR_REASON_ABORTED;
      e->ms = now_ms - e->start_ms;
    }
    air__state_release(run->st, run->route->targets[r->idx].name, r->lease);
    air__run_drop(r);
  }
  run->last_reason = AIR_REASON_ABORTED;
  return air__run_stamped(
      run, air__run_finish(run, AIR_REASON_ABORTED, 0, now_ms, act), act);
}

void air__run_note_status(air_run *run, unsigned attempt_id, int status) {
  air__racer *r = run != NULL ? air__run_slot(run, attempt_id, false) : NULL;
  if (r != NULL) run->log[r->log].status = status;
}

size_t air_run_attempt_count(const air_run *run) {
  return run == NULL ? 0 : run->n_log;
}

const air_attempt *air_run_attempt(const air_run *run, size_t i) {
  if (run == NULL || i >= run->n_log) return NULL;
  return &run->log[i];
}
