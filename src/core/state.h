/*
 * Breaker and sticky state shared by the concurrent requests of one process
 * (DESIGN.md 3.1). Every function here is safe to call from any thread; each
 * takes the state's one mutex for a few instructions and never blocks on I/O.
 * Times are monotonic milliseconds supplied by the caller (no clock reads).
 */
#ifndef AIR__STATE_H
#define AIR__STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "airetry.h"
#include "policy.h"

/* What air__breaker_acquire decided about one target. */
typedef enum air__admit {
  AIR__ADMIT_YES,    /* closed (or breaker disabled): go */
  AIR__ADMIT_PROBE,  /* half-open: this caller holds the single probe slot */
  AIR__ADMIT_NO,     /* open, or half-open with the probe taken */
} air__admit;

/*
 * Asks to send a request to target. When the answer is AIR__ADMIT_NO,
 * *reopen_ms (if not NULL) is the time the breaker allows a probe again
 * (now_ms when a probe is in flight). The caller that got AIR__ADMIT_PROBE must
 * end it with air__breaker_record or air__breaker_release.
 */
air__admit air__breaker_acquire(air_state *st, const char *target,
                                const air__breaker_cfg *cfg, uint64_t now_ms,
                                uint64_t *reopen_ms);

/*
 * The verdict of one attempt on target: reason NONE is a success (closes the
 * breaker, resets the failure count). A counting reason (3.1) adds a
 * consecutive failure and opens the breaker at cfg->failures, or re-opens it
 * when the attempt was the probe; quota opens it for quota_open_ms. Any other
 * reason is no verdict: it only frees the probe slot if probe is true.
 */
void air__breaker_record(air_state *st, const char *target,
                         const air__breaker_cfg *cfg, air_reason reason,
                         bool probe, uint64_t now_ms);

/* Frees a probe slot with no verdict (caller cancelled). */
void air__breaker_release(air_state *st, const char *target);

/* Keeps target open until until_ms (a Retry-After the engine won't wait). */
void air__breaker_cool(air_state *st, const char *target, uint64_t until_ms);

/* True for the reasons that count towards opening a breaker. */
bool air__breaker_counts(air_reason r);

/*
 * Sticky routes, kept by target name so a reload that reorders, adds or
 * removes targets never sends traffic to another target (DESIGN.md 5,
 * Reload). air__sticky_take returns the index in targets[0..n) of the
 * target a new request of route should start on (0 when not sticky, and
 * when the sticky target is no longer in the list: that ends the
 * stickiness) and counts the request against cfg->requests.
 * air__sticky_settle records the target a request succeeded on: a target
 * other than the route's first makes the route sticky to it from now_ms,
 * NULL or the first clears it.
 */
unsigned air__sticky_take(air_state *st, const char *route,
                          const air__sticky_cfg *cfg,
                          const air__target *targets, size_t n,
                          uint64_t now_ms);
void air__sticky_settle(air_state *st, const char *route,
                        const air__sticky_cfg *cfg, const char *target,
                        bool first, uint64_t now_ms);

#endif
