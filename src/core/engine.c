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
 * Continuation (docs/design.md §3.5): with it on, a failure of the committed
 * attempt starts a rescue (phase RESCUE): the racer slot is refilled with
 * a continuation attempt (CONTINUE), or waits for one (WAIT), chosen by
 * the rules among the eligible targets; its first content commits it
 * (COMMITTED again), its failure before that is decided again. The whole
 * rescue must reach first content by rescue_end (the failure that started
 * it + continuation.max_gap_ms); total_ms does not apply after commit.
 * Nothing is ever hedged after commit (hedge_at is 0 outside RACING).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "backoff.h"
#include "classify.h"
#include "engine.h"
#include "error.h"
#include "limits.h"
#include "retry_after.h"
#include "state.h"

enum phase { P_RACING, P_COMMITTED, P_RESCUE, P_OVER };

/* The default retry_after.max_ms: a hint longer than this, on a failure no
 * retry rule waits for, cools the target down for every request. */
#define COOL_AFTER_MS 10000u
/* How long a probe lease outlives the deadline its attempt must commit by. */
#define PROBE_LEASE_SLACK_MS 1000u

/* One racer slot: an attempt from its start until it commits, fails for
 * good or loses the race; between a failure and its retry, the WAIT. */
typedef struct racer {
  unsigned id;    /* the attempt's id (the failed one while waiting); 0: free */
  unsigned idx;   /* route index of its target */
  size_t log;     /* its log entry */
  uint64_t lease; /* the half-open probe lease it holds, or 0 */
  int cause_rule; /* the rule whose max the attempt used, or -1 */
  bool waiting;   /* failed; its retry WAIT runs */
  bool hedge;     /* started by air_run_hedge */
  bool content;   /* its first content part arrived: it won the race */
  const char *next_override; /* for the attempt after the WAIT */
  int wait_rule;             /* the retry rule of that WAIT */
  bool cont;                 /* a continuation attempt (after commit) */
  air_cont_style style;      /* cont: the style it was asked with; while
                                waiting: the style of the next one */
} racer;

struct air_run {
  const air_config *cfg;
  air_state *st;
  const air__route *route;
  const air__policy *pol;
  air__route direct; /* a "provider/model" request: one target */
  air__target direct_target;
  air_rng rng;
  uint64_t seed;        /* splitmix64 state when the caller gave no rng */
  uint64_t deadline_ms; /* start + total_ms */
  enum phase phase;
  unsigned attempts;
  unsigned last_id; /* the id of the latest attempt (0: none yet) */
  unsigned cur; /* route index: the latest attempt's target, or the winner's */
  unsigned n_real; /* log entries that are not skipped */
  racer racers[AIR__MAX_RACERS];
  unsigned hedges;       /* hedges started */
  unsigned hedge_block;  /* no target was left for a hedge while this
                            attempt was the newest racer */
  uint64_t prompt_bytes; /* the request body (hedge.max_prompt_bytes) */
  air_action pend[AIR__MAX_RACERS]; /* CANCELs for air_run_next */
  unsigned n_pend, pend_at;
  unsigned n_order;
  unsigned order[AIR__MAX_TARGETS]; /* route indices, sticky target first */
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
  unsigned cont_flags;    /* AIR_CONTF_* */
  unsigned cont_used;     /* continuations counted by continuation.max */
  unsigned free_attempts; /* attempts no budget counts (rejected prefills) */
  unsigned answer_idx;    /* the target the answer was first committed on */
  uint64_t rescue_end;    /* RESCUE: the rescue must commit by then */
  bool prefill_done[AIR__MAX_TARGETS]; /* re-asked with instruct already */
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

/* ---- racer slots --------------------------------------------------------- */

/* The slot of attempt id in flight (waiting false) or of the WAIT that
 * follows failed attempt id (waiting true); NULL when there is none. */
static racer *slot_of(air_run *run, unsigned id, bool waiting) {
  if (id == 0 || run->phase == P_OVER) return NULL;
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

static racer *free_slot(air_run *run) {
  for (unsigned i = 0; i < AIR__MAX_RACERS; i++)
    if (run->racers[i].id == 0) return &run->racers[i];
  return NULL;
}

/* The racer in flight that started last, or NULL. */
static const racer *newest(const air_run *run) {
  const racer *best = NULL;
  for (unsigned i = 0; i < AIR__MAX_RACERS; i++) {
    const racer *r = &run->racers[i];
    if (r->id != 0 && !r->waiting && (best == NULL || r->log > best->log))
      best = r;
  }
  return best;
}

static void drop(racer *r) {
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

static void reset_pending(air_run *run) {
  run->n_pend = run->pend_at = 0;
}

/*
 * Racer r stops because the request is decided elsewhere: it lost the race
 * (reason NONE: outcome hedge_lost, no breaker verdict) or the run ends
 * with reason. A probe lease it held is released; CANCEL is queued.
 */
static void lose(air_run *run, racer *r, air_reason reason, uint64_t now_ms) {
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
  drop(r);
}

/* Every racer but keep loses the race (keep may be NULL). */
static void lose_others(air_run *run, const racer *keep, uint64_t now_ms) {
  for (unsigned i = 0; i < AIR__MAX_RACERS; i++)
    if (run->racers[i].id != 0 && &run->racers[i] != keep)
      lose(run, &run->racers[i], AIR_REASON_NONE, now_ms);
}

/* The run is over with reason: racers still in flight end with it (CANCEL
 * queued for each). */
static int finish(air_run *run, air_reason reason, int status, uint64_t now_ms,
                  air_action *act) {
  for (unsigned i = 0; i < AIR__MAX_RACERS; i++)
    if (run->racers[i].id != 0) lose(run, &run->racers[i], reason, now_ms);
  run->phase = P_OVER;
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
static int end_racer(air_run *run, racer *r, uint64_t now_ms, air_action *act) {
  drop(r);
  if (n_busy(run) > 0) return idle(act);
  return finish(run, run->last_reason, run->last_status, now_ms, act);
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
static int start_attempt(air_run *run, racer *r, unsigned idx, uint64_t lease,
                         const char *override, bool hedge, uint64_t now_ms,
                         air_action *act) {
  if (run->n_log >= AIR__MAX_ATTEMPT_LOG) {
    air__state_release(run->st, run->route->targets[idx].name, lease);
    drop(r);
    return finish(run, run->last_reason, run->last_status, now_ms, act);
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
  run->phase = P_RACING;
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
 * fails: attempt_ms) plus PROBE_LEASE_SLACK_MS, so it outlives every live
 * probe and frees itself only when its owner vanished without a verdict.
 */
static uint64_t probe_lease_ms(const air_run *run, unsigned idx,
                               uint64_t now_ms) {
  return attempt_deadline(run, idx, now_ms) - now_ms + PROBE_LEASE_SLACK_MS;
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
        run->st, run->route->targets[i].name, breaker_of(run, i),
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
static int switch_target(air_run *run, racer *r, const char *to,
                         const air__rule *rule, bool hedge, uint64_t now_ms,
                         air_action *act) {
  unsigned idx;
  uint64_t lease;
  if (!pick(run, to, hedge, now_ms, &idx, &lease))
    return end_racer(run, r, now_ms, act);
  const char *ov = merge_override(run, idx, rule);
  return start_attempt(run, r, idx, lease, ov, hedge, now_ms, act);
}

/* ---- hedging (docs/design.md §3.6) --------------------------------------- */

uint64_t air__run_hedge_at(const air_run *run) {
  if (run == NULL || run->phase != P_RACING) return 0;
  const racer *nw = newest(run);
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
static int stamped(air_run *run, int rc, air_action *act) {
  if (rc == 0) act->hedge_at_ms = air__run_hedge_at(run);
  return rc;
}

static int run_hedge(air_run *run, uint64_t now_ms, air_action *act) {
  uint64_t at = air__run_hedge_at(run);
  const racer *nw = newest(run);
  racer *slot = free_slot(run);
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
  return start_attempt(run, slot, idx, lease, merge_override(run, idx, NULL),
                       true, now_ms, act);
}

int air_run_hedge(air_run *run, uint64_t now_ms, air_action *act) {
  if (run == NULL || act == NULL) return AIR_EINVAL;
  if (run->phase != P_RACING) return AIR_ESTATE;
  reset_pending(run);
  return stamped(run, run_hedge(run, now_ms, act), act);
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
  return stamped(run, 0, act);
}

void air_run_free(air_run *run) {
  if (run == NULL) return;
  for (unsigned i = 0; i < AIR__MAX_RACERS; i++) {
    const racer *r = &run->racers[i];
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

/* Fills racer r's log entry from f; returns the classified reason. */
/* total: a timeout past total_ms reads timeout.total (not for a failure
 * a continuation may follow: total_ms bounds the time before commit only,
 * docs/design.md §2.3). */
static air_reason record_failure_as(air_run *run, const racer *r,
                                    const air_failure *f, uint64_t now_ms,
                                    bool total) {
  air_reason reason = f->reason;
  if (reason == AIR_REASON_NONE || reason >= AIR_REASON__COUNT)
    reason =
        air__classify(f->status, f->type, f->code, f->message, f->transport);
  if (total && is_timeout(reason) && now_ms >= run->deadline_ms)
    reason = AIR_REASON_TIMEOUT_TOTAL;
  air_attempt *e = &run->log[r->log];
  e->reason = reason;
  e->status = f->status;
  e->ms = now_ms - e->start_ms;
  e->message = plain_message(run, e->target, f->message, reason);
  e->request_id = keep(run, f->request_id);
  run->last_reason = reason;
  run->last_status = f->status;
  return reason;
}

static air_reason record_failure(air_run *run, const racer *r,
                                 const air_failure *f, uint64_t now_ms) {
  return record_failure_as(run, r, f, now_ms, run->phase != P_RESCUE);
}

/* ---- events -------------------------------------------------------------- */

static int fail_final(air_run *run, racer *r, const air_failure *f,
                      uint64_t now_ms, air_action *act) {
  air_reason reason = record_failure(run, r, f, now_ms);
  const air__target *t = &run->route->targets[r->idx];
  if (reason == AIR_REASON_ABORTED) {
    air__state_release(run->st, t->name, r->lease);
  } else {
    air__state_record(run->st, t->name, breaker_of(run, r->idx), reason,
                      r->lease, now_ms);
  }
  drop(r);
  return finish(run, reason, f->status, now_ms, act);
}

/* ---- continuation (docs/design.md §3.5) ---------------------------------- */

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

static air_reason reason_of(const air_failure *f) {
  air_reason reason = f->reason;
  if (reason == AIR_REASON_NONE || reason >= AIR_REASON__COUNT)
    reason =
        air__classify(f->status, f->type, f->code, f->message, f->transport);
  return reason;
}

static uint64_t max_gap_of(const air_run *run) {
  const air__continuation *k = &run->pol->continuation;
  return k->max_gap_ms != 0 ? k->max_gap_ms : run->pol->timeouts.chunk_ms;
}

/* Attempts the budget counts (a rejected prefill is not one). */
static unsigned counted(const air_run *run) {
  return run->attempts - run->free_attempts;
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
  air__admit a = air__state_admit(
      run->st, t->name, breaker_of(run, idx),
      run->rescue_end - now_ms + PROBE_LEASE_SLACK_MS, now_ms, &reopen, lease);
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

/* Starts continuation attempt on target idx in slot r: CONTINUE. */
static int start_cont(air_run *run, racer *r, unsigned idx, uint64_t lease,
                      const char *override, air_cont_style style, bool counts,
                      uint64_t now_ms, air_action *act) {
  int rc = start_attempt(run, r, idx, lease, override, false, now_ms, act);
  if (rc != 0 || act->kind != AIR_ACT_ATTEMPT) return rc;
  run->phase = P_RESCUE;
  if (counts) run->cont_used++;
  r->cont = true;
  r->style = style;
  run->log[r->log].continuation = true;
  act->kind = AIR_ACT_CONTINUE;
  act->deadline_ms = run->rescue_end;
  act->style = style;
  return 0;
}

/*
 * The rescue ends without a continuation: FAIL with the failure recorded
 * last. A committed attempt's timeout past total_ms reads timeout.total,
 * as it does without continuation (fail_final).
 */
static int cont_give_up(air_run *run, racer *r, bool early,
                        const air_failure *f, uint64_t now_ms,
                        air_action *act) {
  if (!early && is_timeout(run->last_reason) && now_ms >= run->deadline_ms) {
    air_attempt *e = &run->log[r->log];
    run->last_reason = AIR_REASON_TIMEOUT_TOTAL;
    e->reason = AIR_REASON_TIMEOUT_TOTAL;
    e->message =
        plain_message(run, e->target, f->message, AIR_REASON_TIMEOUT_TOTAL);
  }
  drop(r);
  return finish(run, run->last_reason, run->last_status, now_ms, act);
}

/*
 * Attempt r failed after commit (the committed one, or a continuation
 * before its first content: early). Continued when the route allows it,
 * else final exactly as without continuation.
 */
static int cont_fail(air_run *run, racer *r, const air_failure *f,
                     uint64_t now_ms, uint64_t wall_ms, air_action *act) {
  bool early = run->phase == P_RESCUE;
  const air__continuation *k = &run->pol->continuation;
  air_reason raw = reason_of(f);
  bool may = k->enabled && (run->cont_flags & AIR_CONTF_NEVER) == 0 &&
             (early ? cont_reason_early(raw) : cont_reason(raw));
  if (!may) return fail_final(run, r, f, now_ms, act);

  air_reason reason = record_failure_as(run, r, f, now_ms, false);
  air_attempt *e = &run->log[r->log];
  const air__target *t = &run->route->targets[r->idx];
  air__state_record(run->st, t->name, breaker_of(run, r->idx), reason, r->lease,
                    now_ms);
  r->lease = 0;
  uint64_t hint_ms = 0;
  bool hint = f->n_headers > 0 && air__retry_after(f->headers, f->n_headers,
                                                   wall_ms, &hint_ms) == 1;
  if (hint && hint_ms > COOL_AFTER_MS)
    air__state_cool(run->st, t->name, now_ms, hint_ms);
  if (!early) {
    uint64_t end = now_ms + max_gap_of(run);
    run->rescue_end = end < now_ms ? UINT64_MAX : end;
  }
  if (now_ms >= run->rescue_end)
    return cont_give_up(run, r, early, f, now_ms, act);

  if (run->reason_count[reason] < UINT32_MAX) run->reason_count[reason]++;
  const air__budget *b = &run->pol->budget;
  if (b->max_total_attempts != AIR__UNLIMITED &&
      counted(run) >= b->max_total_attempts)
    return cont_give_up(run, r, early, f, now_ms, act);
  if (b->per_reason[reason] != AIR__UNLIMITED &&
      run->reason_count[reason] >= b->per_reason[reason])
    return cont_give_up(run, r, early, f, now_ms, act);
  if (run->cont_used >= k->max)
    return cont_give_up(run, r, early, f, now_ms, act);

  const air__policy *pol = run->pol;
  size_t n_rules =
      pol->n_rules < AIR__MAX_RULES ? pol->n_rules : AIR__MAX_RULES;
  for (size_t i = 0; i < n_rules; i++) {
    const air__rule *rule = &pol->rules[i];
    if (!rule_matches(rule, reason, f->status, f->message)) continue;
    if (rule->max != AIR__UNLIMITED && run->rule_used[i] >= rule->max) continue;
    unsigned idx;
    uint64_t lease;
    air_cont_style style;
    if (rule->action == AIR__RULE_FAIL)
      return cont_give_up(run, r, early, f, now_ms, act);
    if (rule->action == AIR__RULE_SWITCH) {
      if (!cont_pick(run, rule->to, now_ms, &idx, &style, &lease))
        return cont_give_up(run, r, early, f, now_ms, act);
      run->rule_used[i]++;
      int rc = start_cont(run, r, idx, lease, merge_override(run, idx, rule),
                          style, true, now_ms, act);
      if (rc == 0 && act->kind == AIR_ACT_CONTINUE) r->cause_rule = (int)i;
      return rc;
    }
    /* retry: after a break, another eligible target first: the target
     * whose stream just broke (went silent, was cut) is the last choice
     * for its own continuation (docs/design.md §3.5). */
    if (!early && cont_pick(run, NULL, now_ms, &idx, &style, &lease)) {
      run->rule_used[i]++;
      int rc = start_cont(run, r, idx, lease, merge_override(run, idx, rule),
                          style, true, now_ms, act);
      if (rc == 0 && act->kind == AIR_ACT_CONTINUE) r->cause_rule = (int)i;
      return rc;
    }
    /* Else the same target, when it may continue; else the walk goes on
     * as past an exhausted rule. */
    if (!cont_eligible(run, r->idx, now_ms, &style, &lease)) continue;
    uint64_t remaining = run->rescue_end - now_ms;
    uint64_t wait = hint_ms;
    if (hint && (wait > rule->retry_after_max_ms || wait >= remaining)) {
      /* Too long to sleep: cool the target down and go elsewhere. */
      air__state_release(run->st, t->name, lease);
      air__state_cool(run->st, t->name, now_ms, hint_ms);
      if (!cont_pick(run, NULL, now_ms, &idx, &style, &lease))
        return cont_give_up(run, r, early, f, now_ms, act);
      return start_cont(run, r, idx, lease, merge_override(run, idx, NULL),
                        style, true, now_ms, act);
    }
    if (!hint)
      wait =
          air__backoff_wait(&rule->backoff, run->rule_used[i] + 1, &run->rng);
    /* No continuation could follow a wait that reaches the rescue's end. */
    if (wait >= remaining) {
      air__state_release(run->st, t->name, lease);
      return cont_give_up(run, r, early, f, now_ms, act);
    }
    run->rule_used[i]++;
    if (wait == 0) {
      int rc =
          start_cont(run, r, r->idx, lease, merge_override(run, r->idx, rule),
                     style, true, now_ms, act);
      if (rc == 0 && act->kind == AIR_ACT_CONTINUE) r->cause_rule = (int)i;
      return rc;
    }
    /* The lease is asked again when the wait is over. */
    air__state_release(run->st, t->name, lease);
    run->phase = P_RESCUE;
    r->wait_rule = (int)i;
    e->wait_ms = wait;
    e->hint = hint;
    r->next_override = merge_override(run, r->idx, rule);
    r->style = style;
    r->waiting = true;
    memset(act, 0, sizeof(*act));
    act->kind = AIR_ACT_WAIT;
    act->attempt_id = r->id;
    act->wait_ms = wait;
    return 0;
  }
  return cont_give_up(run, r, early, f, now_ms, act);
}

/* The WAIT before a continuation ended: CONTINUE on the same target (or
 * FAIL when the rescue's time or the budget is spent meanwhile, or the
 * target may no longer continue). */
static int cont_wait_done(air_run *run, racer *r, uint64_t now_ms,
                          air_action *act) {
  const air__budget *b = &run->pol->budget;
  air_cont_style style;
  uint64_t lease = 0;
  if (now_ms >= run->rescue_end ||
      (b->max_total_attempts != AIR__UNLIMITED &&
       counted(run) >= b->max_total_attempts) ||
      !cont_eligible(run, r->idx, now_ms, &style, &lease)) {
    drop(r);
    return finish(run, run->last_reason, run->last_status, now_ms, act);
  }
  int wait_rule = r->wait_rule;
  int rc = start_cont(run, r, r->idx, lease, r->next_override, style, true,
                      now_ms, act);
  if (rc == 0 && act->kind == AIR_ACT_CONTINUE) r->cause_rule = wait_rule;
  return rc;
}

static int run_fail(air_run *run, racer *r, const air_failure *f,
                    uint64_t now_ms, uint64_t wall_ms, air_action *act) {
  /* After commit the attempt is final unless it is continued (3.5). */
  if (run->phase == P_COMMITTED || run->phase == P_RESCUE)
    return cont_fail(run, r, f, now_ms, wall_ms, act);
  air_reason reason = record_failure(run, r, f, now_ms);
  air_attempt *e = &run->log[r->log];
  const air__target *t = &run->route->targets[r->idx];

  if (reason == AIR_REASON_ABORTED) {
    air__state_release(run->st, t->name, r->lease);
    drop(r);
    return finish(run, reason, f->status, now_ms, act);
  }
  air__state_record(run->st, t->name, breaker_of(run, r->idx), reason, r->lease,
                    now_ms);
  r->lease = 0;
  /* A Retry-After longer than the engine would wait opens the breaker until
   * it expires (3.1): here, longer than the default retry_after.max_ms; a
   * retry rule with its own max_ms cools below when it declines to wait. */
  uint64_t hint_ms = 0;
  bool hint = f->n_headers > 0 && air__retry_after(f->headers, f->n_headers,
                                                   wall_ms, &hint_ms) == 1;
  if (hint && hint_ms > COOL_AFTER_MS)
    air__state_cool(run->st, t->name, now_ms, hint_ms);
  if (reason == AIR_REASON_TIMEOUT_TOTAL || now_ms >= run->deadline_ms) {
    drop(r);
    return finish(run, reason, f->status, now_ms, act);
  }

  /* Budgets: the shared counter first, then the reason's own cap. A spent
   * budget ends this racer; the others go on (docs/design.md §3.6). */
  if (run->reason_count[reason] < UINT32_MAX) run->reason_count[reason]++;
  const air__budget *b = &run->pol->budget;
  if (b->max_total_attempts != AIR__UNLIMITED &&
      run->attempts >= b->max_total_attempts)
    return end_racer(run, r, now_ms, act);
  if (b->per_reason[reason] != AIR__UNLIMITED &&
      run->reason_count[reason] >= b->per_reason[reason])
    return end_racer(run, r, now_ms, act);

  const air__policy *pol = run->pol;
  size_t n_rules =
      pol->n_rules < AIR__MAX_RULES ? pol->n_rules : AIR__MAX_RULES;
  int rc;
  for (size_t i = 0; i < n_rules; i++) {
    const air__rule *rule = &pol->rules[i];
    if (!rule_matches(rule, reason, f->status, f->message)) continue;
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
    r->wait_rule = (int)i;
    e->wait_ms = wait;
    e->hint = hint;
    r->next_override = merge_override(run, r->idx, rule);
    r->waiting = true;
    memset(act, 0, sizeof(*act));
    act->kind = AIR_ACT_WAIT;
    act->attempt_id = r->id;
    act->wait_ms = wait;
    return 0;
  }
  return end_racer(run, r, now_ms, act);
}

int air_run_fail(air_run *run, unsigned attempt_id, const air_failure *f,
                 uint64_t now_ms, uint64_t wall_ms, air_action *act) {
  if (run == NULL || f == NULL || act == NULL ||
      !air__record_size_ok(f->size, AIR__FAILURE_SIZE_V0))
    return AIR_EINVAL;
  racer *r = slot_of(run, attempt_id, false);
  if (r == NULL) return AIR_ESTATE;
  reset_pending(run);
  return stamped(run, run_fail(run, r, f, now_ms, wall_ms, act), act);
}

int air__run_fail_final(air_run *run, unsigned attempt_id, const air_failure *f,
                        uint64_t now_ms, air_action *act) {
  if (run == NULL || f == NULL || act == NULL) return AIR_EINVAL;
  racer *r = slot_of(run, attempt_id, false);
  if (r == NULL) return AIR_ESTATE;
  reset_pending(run);
  return stamped(run, fail_final(run, r, f, now_ms, act), act);
}

int air_run_first_part(air_run *run, unsigned attempt_id, uint64_t now_ms,
                       air_action *act) {
  if (run == NULL || act == NULL) return AIR_EINVAL;
  racer *r = slot_of(run, attempt_id, false);
  if (r == NULL ||
      (run->phase != P_RACING && !(run->phase == P_RESCUE && r->cont)))
    return AIR_ESTATE;
  reset_pending(run);
  r->content = true;
  lose_others(run, r, now_ms);
  if (air_run_next(run, act) == 0) idle(act);
  return stamped(run, 0, act);
}

int air_run_ready_to_commit(air_run *run, unsigned attempt_id, uint64_t now_ms,
                            air_action *act) {
  if (run == NULL || act == NULL) return AIR_EINVAL;
  racer *r = slot_of(run, attempt_id, false);
  /* Before commit a racer; in a rescue the continuation attempt. */
  if (r == NULL ||
      (run->phase != P_RACING && !(run->phase == P_RESCUE && r->cont)))
    return AIR_ESTATE;
  reset_pending(run);
  if (run->phase == P_RACING) run->answer_idx = r->idx;
  const air__target *t = &run->route->targets[r->idx];
  /* A probe's verdict is given at its first content (docs/design.md §3.1): the
   * target answers, so the breaker closes and the lease is freed now, not
   * when a long answer ends. Other attempts give theirs when they end. */
  if (r->lease != 0) {
    air__state_record(run->st, t->name, breaker_of(run, r->idx),
                      AIR_REASON_NONE, r->lease, now_ms);
    r->lease = 0;
  }
  r->content = true;
  lose_others(run, r, now_ms);
  run->phase = P_COMMITTED;
  run->cur = r->idx;
  memset(act, 0, sizeof(*act));
  act->kind = AIR_ACT_COMMIT;
  act->attempt_id = attempt_id;
  act->target = t->name;
  act->target_index = r->idx;
  act->attempt = run->log[r->log].n;
  return stamped(run, 0, act);
}

int air_run_succeed(air_run *run, unsigned attempt_id, uint64_t now_ms,
                    air_action *act) {
  if (run == NULL || act == NULL) return AIR_EINVAL;
  racer *r = slot_of(run, attempt_id, false);
  if (r == NULL) return AIR_ESTATE;
  reset_pending(run);
  air_attempt *e = &run->log[r->log];
  const air__target *t = &run->route->targets[r->idx];
  e->reason = AIR_REASON_NONE;
  e->ms = now_ms - e->start_ms;
  air__state_record(run->st, t->name, breaker_of(run, r->idx), AIR_REASON_NONE,
                    r->lease, now_ms);
  r->lease = 0;
  lose_others(run, r, now_ms);
  /* A hedge win never makes a route sticky (docs/design.md §3.6). */
  /* Nor does a continued answer change it. */
  if (run->route != &run->direct && !r->hedge && !r->cont)
    air__sticky_settle(run->st, run->route->name, &run->pol->sticky, t->name,
                       r->idx == 0, now_ms);
  run->cur = r->idx;
  drop(r);
  run->phase = P_OVER;
  memset(act, 0, sizeof(*act));
  act->kind = AIR_ACT_DONE;
  act->attempt_id = attempt_id;
  return stamped(run, 0, act);
}

int air_run_wait_done(air_run *run, unsigned attempt_id, uint64_t now_ms,
                      air_action *act) {
  if (run == NULL || act == NULL) return AIR_EINVAL;
  racer *r = slot_of(run, attempt_id, true);
  if (r == NULL || (run->phase != P_RACING && run->phase != P_RESCUE))
    return AIR_ESTATE;
  reset_pending(run);
  if (run->phase == P_RESCUE)
    return stamped(run, cont_wait_done(run, r, now_ms, act), act);
  if (now_ms >= run->deadline_ms) {
    drop(r);
    return stamped(run, finish(run, AIR_REASON_TIMEOUT_TOTAL, 0, now_ms, act),
                   act);
  }
  /* A hedge may have spent the budget during the wait (docs/design.md §3.6). */
  const air__budget *b = &run->pol->budget;
  if (b->max_total_attempts != AIR__UNLIMITED &&
      run->attempts >= b->max_total_attempts)
    return stamped(run, end_racer(run, r, now_ms, act), act);
  int wait_rule = r->wait_rule;
  /* The retry of a hedge is a hedge (docs/design.md §3.6). */
  int rc =
      start_attempt(run, r, r->idx, 0, r->next_override, r->hedge, now_ms, act);
  if (rc == 0 && act->kind == AIR_ACT_ATTEMPT) r->cause_rule = wait_rule;
  return stamped(run, rc, act);
}

int air__run_skip(air_run *run, unsigned attempt_id, const char *field,
                  const char *message, uint64_t now_ms, air_action *act) {
  if (run == NULL || act == NULL) return AIR_EINVAL;
  racer *r = slot_of(run, attempt_id, false);
  if (r == NULL || run->phase != P_RACING) return AIR_ESTATE;
  reset_pending(run);
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
  return stamped(run, switch_target(run, r, NULL, NULL, r->hedge, now_ms, act),
                 act);
}

unsigned air__run_attempts(const air_run *run) {
  return run == NULL ? 0 : run->attempts;
}

int air_run_cancel(air_run *run, uint64_t now_ms, air_action *act) {
  if (run == NULL || act == NULL) return AIR_EINVAL;
  if (run->phase == P_OVER) return AIR_ESTATE;
  reset_pending(run);
  for (unsigned i = 0; i < AIR__MAX_RACERS; i++) {
    racer *r = &run->racers[i];
    if (r->id == 0) continue;
    if (!r->waiting) {
      air_attempt *e = &run->log[r->log];
      e->reason = AIR_REASON_ABORTED;
      e->ms = now_ms - e->start_ms;
    }
    air__state_release(run->st, run->route->targets[r->idx].name, r->lease);
    drop(r);
  }
  run->last_reason = AIR_REASON_ABORTED;
  return stamped(run, finish(run, AIR_REASON_ABORTED, 0, now_ms, act), act);
}

void air__run_note_status(air_run *run, unsigned attempt_id, int status) {
  racer *r = run != NULL ? slot_of(run, attempt_id, false) : NULL;
  if (r != NULL) run->log[r->log].status = status;
}

size_t air_run_attempt_count(const air_run *run) {
  return run == NULL ? 0 : run->n_log;
}

const air_attempt *air_run_attempt(const air_run *run, size_t i) {
  if (run == NULL || i >= run->n_log) return NULL;
  return &run->log[i];
}

/* ---- continuation (docs/design.md §3.5) ---------------------------------- */

int air_run_limit_continuation(air_run *run, unsigned flags) {
  if (run == NULL) return AIR_EINVAL;
  run->cont_flags |= flags;
  return 0;
}

int air_run_prefill_rejected(air_run *run, unsigned attempt_id, uint64_t now_ms,
                             air_action *act) {
  if (run == NULL || act == NULL) return AIR_EINVAL;
  racer *r = slot_of(run, attempt_id, false);
  if (r == NULL) return AIR_ESTATE;
  air_failure f;
  memset(&f, 0, sizeof(f));
  f.reason = AIR_REASON_BAD_REQUEST;
  f.status = 400;
  f.message = "the target rejected the assistant prefill";
  unsigned idx = r->idx;
  bool again =
      run->phase == P_RESCUE && r->cont && r->style == AIR_CONT_PREFILL &&
      !r->content && run->pol->continuation.instruct &&
      idx < AIR__MAX_TARGETS && !run->prefill_done[idx] &&
      (run->cont_flags & (AIR_CONTF_NEVER | AIR_CONTF_NO_INSTRUCT)) == 0 &&
      now_ms < run->rescue_end;
  if (!again) return air_run_fail(run, attempt_id, &f, now_ms, 0, act);
  reset_pending(run);
  /* Logged, but no budget, continuation.max or breaker counts it; the
   * rejected attempt's rule stays used by the one asked instead. */
  air_attempt *e = &run->log[r->log];
  e->reason = AIR_REASON_BAD_REQUEST;
  e->status = 400;
  e->ms = now_ms - e->start_ms;
  e->message = plain_message(run, e->target, f.message, f.reason);
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
  const char *override = merge_override(run, idx, rule);
  int cause = r->cause_rule;
  int rc = start_cont(run, r, idx, lease, override, AIR_CONT_INSTRUCT, true,
                      now_ms, act);
  if (rc == 0 && act->kind == AIR_ACT_CONTINUE) r->cause_rule = cause;
  return stamped(run, rc, act);
}
