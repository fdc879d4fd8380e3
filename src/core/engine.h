/*
 * Internal view of a run for the drivers in this library (call.c, the stream
 * driver, the transport): which route and target an attempt belongs to, so
 * they can read deadlines, refusal phrases and commit mode. Everything here is
 * valid as long as the run.
 */
#ifndef AIR__ENGINE_H
#define AIR__ENGINE_H

#include "airetry.h"
#include "policy.h"

const air__policy *air__run_policy(const air_run *run);
/* The target of the current (or last) attempt; NULL before the first. */
const air__target *air__run_target(const air_run *run);
const air__route *air__run_route(const air_run *run);

/*
 * Attempt attempt_id failed after commit (released content the engine may
 * not have been told of, such as an answer with no content part): recorded
 * in the log (and the breaker) like any failure, but final: no policy runs
 * and nothing is continued, the action is FAIL. Also what ends a
 * continuation whose seam failed (diverging restart, preamble, refusal:
 * docs/design.md §3.5). AIR_ESTATE for an attempt not in flight.
 */
int air__run_fail_final(air_run *run, unsigned attempt_id, const air_failure *f,
                        uint64_t now_ms, air_action *act);

/*
 * Attempt attempt_id's target cannot express the request (docs/design.md §2.1,
 * outcome `skipped`): nothing was sent. Its log entry becomes a skipped one
 * (not numbered; field and message copied), it counts towards no budget,
 * rule max or breaker (a probe slot it held is released), and the run goes
 * on with the next untried target as a switch would; with none left it
 * fails with the last real failure, or with bad_request (status 400) when
 * every attempt was skipped.
 */
int air__run_skip(air_run *run, unsigned attempt_id, const char *field,
                  const char *message, uint64_t now_ms, air_action *act);

/*
 * Whether target t can express the request (the exchange asks the codec,
 * docs/design.md §2.1). air__run_new_checked is air_run_new with this question
 * asked before a target is admitted: one that cannot express the request
 * is chosen without taking its breaker's half-open probe slot (and
 * whatever its breaker says), so the skip that follows (air__run_skip)
 * never holds or touches a slot. ok may be NULL (every target can).
 */
typedef bool (*air__run_expressible_fn)(void *data, const air__target *t);
int air__run_new_checked(const air_config *cfg, air_state *state,
                         const char *model, const air_rng *rng, uint64_t now_ms,
                         air__run_expressible_fn ok, void *ok_data,
                         air_run **out, air_action *act);

/*
 * Hedging (docs/design.md §3.6): the size of the caller's request body, which
 * hedge.max_prompt_bytes bounds (0 until set: every request may hedge),
 * and when the next hedge is due (air_action.hedge_at_ms: the newest
 * racer's start + hedge.after_ms; 0 when none may start).
 */
void air__run_set_prompt_bytes(air_run *run, uint64_t n);
uint64_t air__run_hedge_at(const air_run *run);

/* The number of attempts made (skipped ones not counted). */
unsigned air__run_attempts(const air_run *run);

/* Records the HTTP status of attempt attempt_id (the exchange knows it
 * when the response head arrives, also for attempts that succeed); ignored
 * for an attempt not in flight. */
void air__run_note_status(air_run *run, unsigned attempt_id, int status);

#endif
