/*
 * The run state machine (DESIGN.md 1 and 3): one request's walk through its
 * route. Pure: the clock and the random source come from the caller, nothing
 * here does I/O or sleeps. Shared breaker/sticky state goes through state.h.
 *
 * Phases: ATTEMPT (an attempt is in flight) -> WAIT (a retry backoff) ->
 * ATTEMPT ... -> COMMITTED (its first content was released) -> OVER.
 * Every attempt has an id, unique in the run (a skipped attempt's id is not
 * reused, unlike its number); every event names the attempt it is about.
 * Every event checks the phase and the id it is valid for and returns
 * AIR_ESTATE otherwise, leaving the run unchanged. One attempt is in flight
 * at a time today; hedging and continuation will add racers and CANCEL /
 * CONTINUE actions without changing the event functions.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "backoff.h"
#include "classify.h"
#include "engine.h"
#include "limits.h"
#include "retry_after.h"
#include "state.h"

enum phase { P_ATTEMPT, P_COMMITTED, P_WAIT, P_OVER };

/* The default retry_after.max_ms: a hint longer than this, on a failure no
 * retry rule waits for, cools the target down for every request. */
#define COOL_AFTER_MS 10000u
/* How long a probe lease outlives the deadline its attempt must commit by. */
#define PROBE_LEASE_SLACK_MS 1000u

struct air_run {
  const air_config *cfg;
  air_state *st;
  const air__route *route;
  const air__policy *pol;
  air__route direct;  /* a "provider/model" request: one target */
  air__target direct_target;
  air_rng rng;
  uint64_t seed;  /* splitmix64 state when the caller gave no rng */
  uint64_t deadline_ms;  /* start + total_ms */
  enum phase phase;
  unsigned attempts;
  unsigned last_id;  /* the id of the latest attempt (0: none yet) */
  unsigned cur;  /* route index of the target of the current attempt */
  int cause_rule;  /* the rule whose max the current attempt used, or -1 */
  unsigned n_real; /* log entries that are not skipped */
  uint64_t lease;  /* the half-open probe lease the current attempt holds, or 0 */
  const char *next_override;  /* for the attempt after a WAIT */
  int wait_rule;              /* the retry rule of that WAIT */
  unsigned n_order;
  unsigned order[AIR__MAX_TARGETS];  /* route indices, sticky target first */
  bool tried[AIR__MAX_TARGETS];
  uint32_t rule_used[AIR__MAX_RULES];
  uint32_t reason_count[AIR_REASON__COUNT];
  air_reason last_reason;
  int last_status;
  air_attempt *log;
  size_t n_log;
  size_t cap_log;
  air__arena arena;
  air__run_expressible_fn expressible; /* NULL: every target can */
  void *expressible_data;
};

const air__policy *air__run_policy(const air_run *run) {
  return run->pol;
}

const air__target *air__run_target(const air_run *run) {
  return run->n_log == 0 ? NULL : &run->route->targets[run->cur];
}

const air__route *air__run_route(const air_run *run) {
  return run->route;
}

static const air__breaker_cfg *breaker_of(const air_run *run, unsigned idx) {
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

static bool rule_matches(const air__rule *r, air_reason reason, int status,
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
static const char *merge_override(const air_run *run, unsigned idx,
                                  const air__rule *rule) {
  const char *own = run->route->targets[idx].override_json;
  if (rule == NULL || rule->override_json == NULL) return own;
  if (own == NULL) return rule->override_json;
  if (idx < rule->n_target_override && rule->target_override[idx] != NULL)
    return rule->target_override[idx];
  return rule->override_json;
}

/* True when id is the attempt in flight (before or after its commit). */
static bool in_flight(const air_run *run, unsigned id) {
  return (run->phase == P_ATTEMPT || run->phase == P_COMMITTED) &&
         id == run->last_id && id != 0;
}

static int finish(air_run *run, air_reason reason, int status, air_action *act) {
  run->phase = P_OVER;
  memset(act, 0, sizeof(*act));
  act->kind = AIR_ACT_FAIL;
  act->attempt_id = run->last_id;
  act->reason = reason;
  act->status = status;
  return 0;
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
 * Starts an attempt on target idx. lease: pick acquired the target's
 * half-open probe lease for it (0: none); every return without an attempt
 * (the log is full, no memory) gives the lease back, or the target would
 * not be admitted again until the lease expired.
 */
static int start_attempt(air_run *run, unsigned idx, uint64_t lease,
                         const char *override, uint64_t now_ms,
                         air_action *act) {
  if (run->n_log >= AIR__MAX_ATTEMPT_LOG) {
    air__state_release(run->st, run->route->targets[idx].name, lease);
    return finish(run, run->last_reason, run->last_status, act);
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
  run->attempts++;
  run->last_id++;
  run->n_real++;
  run->cause_rule = -1;
  run->cur = idx;
  run->lease = lease;
  run->tried[idx] = true;
  run->phase = P_ATTEMPT;
  air_attempt *e = &run->log[run->n_log++];
  memset(e, 0, sizeof(*e));
  e->n = run->attempts;
  e->target = t->name;
  e->message = "";
  e->request_id = "";
  e->start_ms = now_ms;

  uint64_t deadline = attempt_deadline(run, idx, now_ms);
  memset(act, 0, sizeof(*act));
  act->kind = AIR_ACT_ATTEMPT;
  act->attempt_id = run->last_id;
  act->target = t->name;
  act->target_index = idx;
  act->attempt = run->attempts;
  act->deadline_ms = deadline;
  act->override_json = override;
  return 0;
}

/*
 * The probe lease an attempt on target idx takes: until the attempt must
 * commit (the engine gives the probe's verdict by then, or the attempt
 * fails: attempt_ms) plus PROBE_LEASE_SLACK_MS, so it outlives every live
 * probe and frees itself only when its owner vanished without a verdict.
 */
static uint64_t probe_lease_ms(const air_run *run, unsigned idx,
                               uint64_t now_ms) {
  return attempt_deadline(run, idx, now_ms) - now_ms + PROBE_LEASE_SLACK_MS;
}

/*
 * Chooses the next untried target: `to` when given and untried, else the
 * first in order whose breaker admits it; when every untried one is open,
 * the one that reopens soonest. Returns false when none is left. *lease is
 * the probe lease taken for the chosen target (0: none).
 */
static bool pick(air_run *run, const char *to, uint64_t now_ms, unsigned *idx,
                 uint64_t *lease) {
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
    air__admit a = air__state_admit(run->st, run->route->targets[i].name,
                                    breaker_of(run, i),
                                    probe_lease_ms(run, i, now_ms), now_ms,
                                    &reopen, lease);
    if (a != AIR__ADMIT_NO) {
      *idx = i;
      return true;
    }
    if (!found || reopen < soonest) {
      soonest = reopen;
      *idx = i;
      found = true;
    }
  }
  return found;
}

static int switch_target(air_run *run, const char *to, const air__rule *rule,
                         uint64_t now_ms, air_action *act) {
  unsigned idx;
  uint64_t lease;
  if (!pick(run, to, now_ms, &idx, &lease))
    return finish(run, run->last_reason, run->last_status, act);
  const char *ov = merge_override(run, idx, rule);
  return start_attempt(run, idx, lease, ov, now_ms, act);
}

int air_run_new(const air_config *cfg, air_state *state, const char *model,
                const air_rng *rng, uint64_t now_ms, air_run **out,
                air_action *act) {
  return air__run_new_checked(cfg, state, model, rng, now_ms, NULL, NULL, out,
                              act);
}

int air__run_new_checked(const air_config *cfg, air_state *state,
                         const char *model, const air_rng *rng,
                         uint64_t now_ms, air__run_expressible_fn ok,
                         void *ok_data, air_run **out, air_action *act) {
  if (cfg == NULL || model == NULL || out == NULL || act == NULL)
    return AIR_EINVAL;
  size_t mlen = strlen(model);
  const air__route *route = air__config_route(cfg, model, mlen);
  size_t pidx = 0;
  const char *slash = memchr(model, '/', mlen);
  if (route == NULL) {
    if (slash == NULL || slash == model || slash[1] == '\0' ||
        air__config_provider(cfg, model, (size_t)(slash - model), &pidx) == NULL)
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

  int rc = switch_target(run, NULL, NULL, now_ms, act);
  if (rc != 0) {
    air_run_free(run);
    return rc;
  }
  *out = run;
  return 0;
}

void air_run_free(air_run *run) {
  if (run == NULL) return;
  if (run->phase == P_ATTEMPT || run->phase == P_COMMITTED)
    air__state_release(run->st, run->route->targets[run->cur].name, run->lease);
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
 * The message a caller and the log see for a failed attempt (DESIGN.md 5):
 * "TARGET: DETAIL (REASON)", the detail being what the attempt reported
 * (the upstream's own message, or ours), bounded by AIR__MAX_MESSAGE_BYTES.
 * It names the upstream and the reason in words; rules that match on
 * `message` see the attempt's own message, not this one.
 */
static const char *plain_message(air_run *run, const char *target,
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

static bool is_timeout(air_reason r) {
  return r >= AIR_REASON_TIMEOUT_CONNECT && r <= AIR_REASON_TIMEOUT_TOTAL;
}

static air_reason record_failure(air_run *run, const air_failure *f,
                                 uint64_t now_ms);

int air_run_fail(air_run *run, unsigned attempt_id, const air_failure *f,
                 uint64_t now_ms, uint64_t wall_ms, air_action *act) {
  if (run == NULL || f == NULL || act == NULL) return AIR_EINVAL;
  if (!in_flight(run, attempt_id)) return AIR_ESTATE;
  /* After commit the attempt is final: no policy runs. */
  if (run->phase == P_COMMITTED)
    return air__run_fail_final(run, attempt_id, f, now_ms, act);
  air_reason reason = record_failure(run, f, now_ms);
  air_attempt *e = &run->log[run->n_log - 1];
  const air__target *t = &run->route->targets[run->cur];

  if (reason == AIR_REASON_ABORTED) {
    air__state_release(run->st, t->name, run->lease);
    run->lease = 0;
    return finish(run, reason, f->status, act);
  }
  air__state_record(run->st, t->name, breaker_of(run, run->cur), reason,
                    run->lease, now_ms);
  run->lease = 0;
  /* A Retry-After longer than the engine would wait opens the breaker until
   * it expires (3.1): here, longer than the default retry_after.max_ms; a
   * retry rule with its own max_ms cools below when it declines to wait. */
  uint64_t hint_ms = 0;
  bool hint =
      f->n_headers > 0 &&
      air__retry_after(f->headers, f->n_headers, wall_ms, &hint_ms) == 1;
  if (hint && hint_ms > COOL_AFTER_MS)
    air__state_cool(run->st, t->name, now_ms, hint_ms);
  if (reason == AIR_REASON_TIMEOUT_TOTAL || now_ms >= run->deadline_ms)
    return finish(run, reason, f->status, act);

  /* Budgets: the shared counter first, then the reason's own cap. */
  if (run->reason_count[reason] < UINT32_MAX) run->reason_count[reason]++;
  const air__budget *b = &run->pol->budget;
  if (b->max_total_attempts != AIR__UNLIMITED &&
      run->attempts >= b->max_total_attempts)
    return finish(run, reason, f->status, act);
  if (b->per_reason[reason] != AIR__UNLIMITED &&
      run->reason_count[reason] >= b->per_reason[reason])
    return finish(run, reason, f->status, act);

  const air__policy *pol = run->pol;
  size_t n_rules = pol->n_rules < AIR__MAX_RULES ? pol->n_rules : AIR__MAX_RULES;
  int rc;
  for (size_t i = 0; i < n_rules; i++) {
    const air__rule *r = &pol->rules[i];
    if (!rule_matches(r, reason, f->status, f->message)) continue;
    if (r->max != AIR__UNLIMITED && run->rule_used[i] >= r->max) continue;
    switch (r->action) {
      case AIR__RULE_FAIL:
        return finish(run, reason, f->status, act);
      case AIR__RULE_SWITCH:
        run->rule_used[i]++;
        rc = switch_target(run, r->to, r, now_ms, act);
        if (act->kind == AIR_ACT_ATTEMPT) run->cause_rule = (int)i;
        return rc;
      case AIR__RULE_RETRY:
        break;
    }
    uint64_t remaining = run->deadline_ms - now_ms;
    uint64_t wait = hint_ms;
    if (hint && (wait > r->retry_after_max_ms || wait >= remaining)) {
      /* Too long to sleep: cool the target down and go elsewhere. */
      air__state_cool(run->st, t->name, now_ms, hint_ms);
      return switch_target(run, NULL, NULL, now_ms, act);
    }
    if (!hint)
      wait = air__backoff_wait(&r->backoff, run->rule_used[i] + 1, &run->rng);
    /* No attempt could follow a wait that reaches the deadline. */
    if (wait >= remaining) return finish(run, reason, f->status, act);
    run->rule_used[i]++;
    run->wait_rule = (int)i;
    e->wait_ms = wait;
    e->hint = hint;
    run->next_override = merge_override(run, run->cur, r);
    run->phase = P_WAIT;
    memset(act, 0, sizeof(*act));
    act->kind = AIR_ACT_WAIT;
    act->attempt_id = run->last_id;
    act->wait_ms = wait;
    return 0;
  }
  return finish(run, reason, f->status, act);
}

/* Fills the current log entry from f; returns the classified reason. */
static air_reason record_failure(air_run *run, const air_failure *f,
                                 uint64_t now_ms) {
  air_reason reason = f->reason;
  if (reason == AIR_REASON_NONE || reason >= AIR_REASON__COUNT)
    reason =
        air__classify(f->status, f->type, f->code, f->message, f->transport);
  if (is_timeout(reason) && now_ms >= run->deadline_ms)
    reason = AIR_REASON_TIMEOUT_TOTAL;
  air_attempt *e = &run->log[run->n_log - 1];
  e->reason = reason;
  e->status = f->status;
  e->ms = now_ms - e->start_ms;
  e->message = plain_message(run, e->target, f->message, reason);
  e->request_id = keep(run, f->request_id);
  run->last_reason = reason;
  run->last_status = f->status;
  return reason;
}

int air__run_fail_final(air_run *run, unsigned attempt_id,
                        const air_failure *f, uint64_t now_ms,
                        air_action *act) {
  if (run == NULL || f == NULL || act == NULL) return AIR_EINVAL;
  if (!in_flight(run, attempt_id)) return AIR_ESTATE;
  air_reason reason = record_failure(run, f, now_ms);
  const air__target *t = &run->route->targets[run->cur];
  if (reason == AIR_REASON_ABORTED) {
    air__state_release(run->st, t->name, run->lease);
  } else {
    air__state_record(run->st, t->name, breaker_of(run, run->cur), reason,
                      run->lease, now_ms);
  }
  run->lease = 0;
  return finish(run, reason, f->status, act);
}

int air_run_first_content(air_run *run, unsigned attempt_id, uint64_t now_ms,
                          air_action *act) {
  if (run == NULL || act == NULL) return AIR_EINVAL;
  if (run->phase != P_ATTEMPT || !in_flight(run, attempt_id)) return AIR_ESTATE;
  const air__target *t = &run->route->targets[run->cur];
  /* A probe's verdict is given at its first content (DESIGN.md 3.1): the
   * target answers, so the breaker closes and the lease is freed now, not
   * when a long answer ends. Other attempts give theirs when they end. */
  if (run->lease != 0) {
    air__state_record(run->st, t->name, breaker_of(run, run->cur),
                      AIR_REASON_NONE, run->lease, now_ms);
    run->lease = 0;
  }
  run->phase = P_COMMITTED;
  memset(act, 0, sizeof(*act));
  act->kind = AIR_ACT_COMMIT;
  act->attempt_id = attempt_id;
  act->target = t->name;
  act->target_index = run->cur;
  act->attempt = run->attempts;
  return 0;
}

int air_run_succeed(air_run *run, unsigned attempt_id, uint64_t now_ms,
                    air_action *act) {
  if (run == NULL || act == NULL) return AIR_EINVAL;
  if (!in_flight(run, attempt_id)) return AIR_ESTATE;
  air_attempt *e = &run->log[run->n_log - 1];
  const air__target *t = &run->route->targets[run->cur];
  e->reason = AIR_REASON_NONE;
  e->ms = now_ms - e->start_ms;
  air__state_record(run->st, t->name, breaker_of(run, run->cur),
                    AIR_REASON_NONE, run->lease, now_ms);
  run->lease = 0;
  if (run->route != &run->direct)
    air__sticky_settle(run->st, run->route->name, &run->pol->sticky,
                       t->name, run->cur == 0, now_ms);
  run->phase = P_OVER;
  memset(act, 0, sizeof(*act));
  act->kind = AIR_ACT_DONE;
  act->attempt_id = attempt_id;
  return 0;
}

int air_run_wait_done(air_run *run, unsigned attempt_id, uint64_t now_ms,
                      air_action *act) {
  if (run == NULL || act == NULL) return AIR_EINVAL;
  if (run->phase != P_WAIT || attempt_id != run->last_id) return AIR_ESTATE;
  if (now_ms >= run->deadline_ms)
    return finish(run, AIR_REASON_TIMEOUT_TOTAL, 0, act);
  int rc = start_attempt(run, run->cur, 0, run->next_override, now_ms, act);
  if (rc == 0 && act->kind == AIR_ACT_ATTEMPT) run->cause_rule = run->wait_rule;
  return rc;
}

int air__run_skip(air_run *run, unsigned attempt_id, const char *field,
                  const char *message, uint64_t now_ms, air_action *act) {
  if (run == NULL || act == NULL) return AIR_EINVAL;
  if (run->phase != P_ATTEMPT || !in_flight(run, attempt_id)) return AIR_ESTATE;
  air_attempt *e = &run->log[run->n_log - 1];
  const air__target *t = &run->route->targets[run->cur];
  e->n = 0;
  e->skipped = true;
  e->reason = AIR_REASON_NONE;
  e->status = 0;
  e->ms = now_ms - e->start_ms;
  e->field = keep(run, field);
  e->message = keep(run, message);
  air__state_release(run->st, t->name, run->lease);
  run->lease = 0;
  run->attempts--;
  run->n_real--;
  if (run->cause_rule >= 0 && run->rule_used[run->cause_rule] > 0)
    run->rule_used[run->cause_rule]--;
  run->cause_rule = -1;
  if (run->n_real == 0 && run->last_reason == AIR_REASON_NONE) {
    run->last_reason = AIR_REASON_BAD_REQUEST;
    run->last_status = 400;
  }
  return switch_target(run, NULL, NULL, now_ms, act);
}

unsigned air__run_attempts(const air_run *run) {
  return run == NULL ? 0 : run->attempts;
}

int air_run_cancel(air_run *run, uint64_t now_ms, air_action *act) {
  if (run == NULL || act == NULL) return AIR_EINVAL;
  if (run->phase == P_OVER) return AIR_ESTATE;
  if (run->phase == P_ATTEMPT || run->phase == P_COMMITTED) {
    air_attempt *e = &run->log[run->n_log - 1];
    e->reason = AIR_REASON_ABORTED;
    e->ms = now_ms - e->start_ms;
    air__state_release(run->st, run->route->targets[run->cur].name, run->lease);
    run->lease = 0;
  }
  run->last_reason = AIR_REASON_ABORTED;
  return finish(run, AIR_REASON_ABORTED, 0, act);
}

void air__run_note_status(air_run *run, unsigned attempt_id, int status) {
  if (run != NULL && in_flight(run, attempt_id) && run->n_log > 0)
    run->log[run->n_log - 1].status = status;
}

size_t air_run_attempt_count(const air_run *run) {
  return run == NULL ? 0 : run->n_log;
}

const air_attempt *air_run_attempt(const air_run *run, size_t i) {
  if (run == NULL || i >= run->n_log) return NULL;
  return &run->log[i];
}
