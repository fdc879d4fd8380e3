/*
 * The run state machine's inside, shared by its two files: engine.c (the
 * run up to commit: racers, retries, switches, hedges, the events) and
 * engine_cont.c (what follows a failure after commit: continuation,
 * docs/design.md §3.5). Nothing outside src/core/engine*.c includes it;
 * the drivers see engine.h.
 */
#ifndef AIR__ENGINE_INT_H
#define AIR__ENGINE_INT_H

#include "arena.h"
#include "engine.h"
#include "limits.h"

enum air__run_phase {
  AIR__RUN_RACING,
  AIR__RUN_COMMITTED,
  AIR__RUN_RESCUE,
  AIR__RUN_OVER
};

/* The default retry_after.max_ms: a hint longer than this, on a failure no
 * retry rule waits for, cools the target down for every request. */
#define AIR__RUN_COOL_AFTER_MS 10000u
/* How long a probe lease outlives the deadline its attempt must commit by. */
#define AIR__RUN_PROBE_LEASE_SLACK_MS 1000u

/* One racer slot: an attempt from its start until it commits, fails for
 * good or loses the race; between a failure and its retry, the WAIT. */
typedef struct air__racer {
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
} air__racer;

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
  enum air__run_phase phase;
  unsigned attempts;
  unsigned last_id; /* the id of the latest attempt (0: none yet) */
  unsigned cur; /* route index: the latest attempt's target, or the winner's */
  unsigned n_real; /* log entries that are not skipped */
  air__racer racers[AIR__MAX_RACERS];
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

static inline bool air__run_is_timeout(air_reason r) {
  return r >= AIR_REASON_TIMEOUT_CONNECT && r <= AIR_REASON_TIMEOUT_TOTAL;
}

/* Attempts the budget counts (a rejected prefill is not one). */
static inline unsigned air__run_counted(const air_run *run) {
  return run->attempts - run->free_attempts;
}

/* ---- engine.c ------------------------------------------------------------ */

const air__breaker_cfg *air__run_breaker_of(const air_run *run, unsigned idx);
bool air__run_rule_matches(const air__rule *r, air_reason reason, int status,
                           const char *message);

/*
 * The override for an attempt on target idx: the target's fields with the
 * rule's merged over them (rule wins), merged once when the config loaded
 * (air__rule.target_override); the target's own without a rule.
 */
const char *air__run_merge_override(const air_run *run, unsigned idx,
                                    const air__rule *rule);

/* The slot of attempt id in flight (waiting false) or of the WAIT that
 * follows failed attempt id (waiting true); NULL when there is none. */
air__racer *air__run_slot(air_run *run, unsigned id, bool waiting);
void air__run_drop(air__racer *r);
void air__run_reset_pending(air_run *run);

/* Every action an event returns says when the next hedge is due. */
int air__run_stamped(air_run *run, int rc, air_action *act);

/* The run is over with reason: racers still in flight end with it (CANCEL
 * queued for each). */
int air__run_finish(air_run *run, air_reason reason, int status,
                    uint64_t now_ms, air_action *act);

/*
 * Starts an attempt on target idx in slot r. lease: the target's half-open
 * probe lease taken for it (0: none); every return without an attempt (the
 * log is full, no memory) gives the lease back, or the target would not be
 * admitted again until the lease expired.
 */
int air__run_start_attempt(air_run *run, air__racer *r, unsigned idx,
                           uint64_t lease, const char *override, bool hedge,
                           uint64_t now_ms, air_action *act);

/*
 * The message a caller and the log see for a failed attempt (docs/design.md
 * §5): "TARGET: DETAIL (REASON)", bounded by AIR__MAX_MESSAGE_BYTES.
 */
const char *air__run_plain_message(air_run *run, const char *target,
                                   const char *detail, air_reason reason);

/* The reason of failure f: its own, else the one air__classify finds. */
air_reason air__run_reason_of(const air_failure *f);

/* Fills racer r's log entry from f; returns the classified reason. total:
 * a timeout past total_ms reads timeout.total (not for a failure a
 * continuation may follow: total_ms bounds the time before commit only,
 * docs/design.md §2.3). */
air_reason air__run_record_failure(air_run *run, const air__racer *r,
                                   const air_failure *f, uint64_t now_ms,
                                   bool total);

/* Racer r failed for good: recorded, its breaker told, the run over. */
int air__run_fail_racer(air_run *run, air__racer *r, const air_failure *f,
                        uint64_t now_ms, air_action *act);

/*
 * After a failure recorded with reason: the breaker's verdict (r's probe
 * lease handed in with it), and the failure's Retry-After hint in *hint_ms
 * (returns whether there is one). A hint longer than the engine would wait
 * by default (AIR__RUN_COOL_AFTER_MS) opens the breaker until it expires
 * (docs/design.md §3.1).
 */
bool air__run_verdict(air_run *run, air__racer *r, const air_failure *f,
                      air_reason reason, uint64_t now_ms, uint64_t wall_ms,
                      uint64_t *hint_ms);

/* Counts one more failure for reason; true when the budget is spent (the
 * shared max_total_attempts first, then the reason's own cap). */
bool air__run_budget_spent(air_run *run, air_reason reason);

/* Racer r waits `wait` ms for its retry under rule i (hint: the wait is the
 * failure's Retry-After): WAIT. */
int air__run_wait(air_run *run, air__racer *r, size_t i, uint64_t wait,
                  bool hint, air_action *act);

/* ---- engine_cont.c ------------------------------------------------------- */

/*
 * Attempt r failed after commit (the committed one, or a continuation
 * before its first content). Continued when the route allows it, else
 * final exactly as without continuation.
 */
int air__run_cont_fail(air_run *run, air__racer *r, const air_failure *f,
                       uint64_t now_ms, uint64_t wall_ms, air_action *act);

/* The WAIT before a continuation ended: CONTINUE on the same target (or
 * FAIL when the rescue's time or the budget is spent meanwhile, or the
 * target may no longer continue). */
int air__run_cont_wait_done(air_run *run, air__racer *r, uint64_t now_ms,
                            air_action *act);

#endif
