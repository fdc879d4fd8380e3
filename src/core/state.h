/*
 * The state interface (docs/design.md §1 and 3.1): breaker records, the
 * half-open probe lease, cooldowns and sticky choices, stored by a backend
 * behind one ops table and decided here, in core (breaker.h holds the
 * transitions). src/state/local.c is the in-process backend (air_state_new);
 * the Redis backend of 3.1 is another ops table over the same transitions, and
 * tests/unit/test_state_conformance.c runs against any of them.
 *
 * Contract of every backend: each op is atomic with respect to every other
 * op on the same key (target or route) from any thread or instance; no op
 * blocks on I/O (a shared backend answers from its mirror); times passed in
 * are the caller's monotonic milliseconds, and what a backend shares with
 * other instances is only ever a duration (open_ms, lease_ms, cool_ms, the
 * age of a sticky choice), never a clock value. An op that cannot store
 * (no memory, a full table) degrades to "closed" / "not sticky", never to a
 * failed request.
 */
#ifndef AIR__STATE_H
#define AIR__STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airetry.h"
#include "breaker.h"
#include "limits.h"
#include "policy.h"

/* A route's sticky choice as sticky_get reads it. */
typedef struct air__sticky_rec {
  char target[AIR__MAX_TARGET_BYTES]; /* "provider/model", NUL-terminated */
  uint64_t age_ms; /* how long it has been sticky (a duration) */
  uint32_t used;   /* requests started on it before this one */
} air__sticky_rec;

typedef struct air__state_ops {
  /* try_probe(target, lease_ms): air__breaker_admit on target's record,
   * with a token the backend makes (nonzero, unique among live leases);
   * *lease is set to it on AIR__ADMIT_PROBE, *reopen_ms as admit says. An
   * unknown target is closed. */
  air__admit (*try_probe)(void *impl, const char *target, uint64_t lease_ms,
                          uint64_t now_ms, uint64_t *reopen_ms,
                          uint64_t *lease);
  /* record(target, verdict, threshold, open_ms): air__breaker_apply. */
  void (*record)(void *impl, const char *target, const air__verdict *v,
                 uint64_t now_ms);
  /* Frees the probe lease with no verdict (air__breaker_release). */
  void (*release)(void *impl, const char *target, uint64_t lease);
  /* cool(target, cool_ms): air__breaker_cool. */
  void (*cool)(void *impl, const char *target, uint64_t now_ms,
               uint64_t cool_ms);
  /* The breaker's mode (air__breaker_mode); CLOSED for an unknown target. */
  air_breaker_mode (*mode)(void *impl, const char *target, uint64_t now_ms);
  /* Sticky get: 1 with *out filled when route is sticky, counting the
   * request that asks (out->used is the count before it), in one atomic
   * step; 0 when it is not (or its target name does not fit). */
  int (*sticky_get)(void *impl, const char *route, uint64_t now_ms,
                    air__sticky_rec *out);
  /* Sticky set: target NULL ends the stickiness; a route already sticky to
   * target keeps its window (age and count); any other target starts a new
   * window at now_ms with no request counted. */
  void (*sticky_set)(void *impl, const char *route, const char *target,
                     uint64_t now_ms);
  /* Optional (NULL: nothing is learned): the continuation style learned
   * for target (docs/design.md §3.5), AIR_CONT_NONE when none is known or it
   * expired. style_set(target, style, ttl_ms): remember style for ttl_ms
   * from now_ms (a shared backend shares the duration); NONE forgets. */
  air_cont_style (*style_get)(void *impl, const char *target, uint64_t now_ms);
  void (*style_set)(void *impl, const char *target, air_cont_style style,
                    uint64_t now_ms, uint64_t ttl_ms);
  /* Optional: a config was loaded (at start and on every reload); a
   * shared backend learns from it which targets and routes it shares and
   * under which keys. cfg is borrowed for the call. */
  void (*configure)(void *impl, const air_config *cfg);
  /* Frees impl (air_state_free). */
  void (*destroy)(void *impl);
} air__state_ops;

/* What air_state is: a backend's ops and its data. */
struct air_state {
  const air__state_ops *ops;
  void *impl;
};

/*
 * Wraps a backend into an air_state (for air_state_new and its kin). On
 * success the state owns impl (air_state_free calls ops->destroy); on
 * AIR_ENOMEM it does not. Returns 0, AIR_EINVAL or AIR_ENOMEM.
 */
int air__state_new(const air__state_ops *ops, void *impl, air_state **out);

/* Tells st's backend about a (re)loaded config (ops->configure); a no-op
 * for a backend without one, and for st NULL. */
void air__state_configure(air_state *st, const air_config *cfg);

/*
 * What the engine calls: the decisions over the interface. st may be NULL
 * (no breaker, no sticky: every target admitted); a disabled breaker cfg
 * admits and records nothing.
 *
 * air__state_admit asks to send a request to target; the caller that gets
 * AIR__ADMIT_PROBE holds *lease (valid lease_ms) and ends it with
 * air__state_record or air__state_release. *reopen_ms as in admit.
 */
air__admit air__state_admit(air_state *st, const char *target,
                            const air__breaker_cfg *cfg, uint64_t lease_ms,
                            uint64_t now_ms, uint64_t *reopen_ms,
                            uint64_t *lease);

/*
 * The end of an attempt on target with reason (NONE: success): the verdict
 * of air__breaker_verdict_of is recorded; a reason that gives none only
 * frees the lease the attempt held (0: none).
 */
void air__state_record(air_state *st, const char *target,
                       const air__breaker_cfg *cfg, air_reason reason,
                       uint64_t lease, uint64_t now_ms);

/* Frees a probe lease with no verdict (caller cancelled, no attempt). */
void air__state_release(air_state *st, const char *target, uint64_t lease);

/* Keeps target open for cool_ms (a Retry-After the engine won't wait). */
void air__state_cool(air_state *st, const char *target, uint64_t now_ms,
                     uint64_t cool_ms);

/*
 * Learned continuation styles (docs/design.md §3.5): air__state_style_get is
 * the style learned for target at now_ms (AIR_CONT_NONE: none, or st NULL);
 * air__state_style_learn remembers style for AIR__CONT_LEARNED_MS (24 h).
 */
air_cont_style air__state_style_get(air_state *st, const char *target,
                                    uint64_t now_ms);
void air__state_style_learn(air_state *st, const char *target,
                            air_cont_style style, uint64_t now_ms);

/*
 * Sticky routes, kept by target name so a reload that reorders, adds or
 * removes targets never sends traffic to another target (docs/design.md §5,
 * Reload). air__sticky_take returns the index in targets[0..n) of the
 * target a new request of route should start on (0 when not sticky, and
 * when the sticky target is no longer in the list or its window, after_ms
 * or requests, is over: that ends the stickiness) and counts the request.
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
