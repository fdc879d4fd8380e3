/* Backoff waits (docs/design.md §3 step 5). Pure. */
#ifndef AIR__BACKOFF_H
#define AIR__BACKOFF_H

#include <stdint.h>

#include "airetry.h"
#include "policy.h"

/*
 * The wait before a rule's n-th retry in one request (n >= 1):
 * min(max_ms, base_ms * factor^(n-1)), then jittered: full -> uniform in
 * [0, v], equal -> v/2 + uniform in [0, v - v/2] (so odd v can reach v),
 * none -> v. n = 0 counts as 1. rng may be NULL (the wait is then v, not
 * jittered). Saturates at max_ms instead of overflowing for large n.
 */
uint64_t air__backoff_wait(const air__backoff *b, unsigned n,
                           const air_rng *rng);

/*
 * A uniform integer in [0, hi] from rng (hi may be UINT64_MAX), by rejection
 * sampling: no modulo bias. Draws nothing when hi is 0; 0 for a NULL rng.
 */
uint64_t air__rng_upto(const air_rng *rng, uint64_t hi);

/*
 * A small deterministic generator (splitmix64) for callers with no source of
 * their own: state is the caller's seed, advanced on every call.
 */
uint64_t air__splitmix64(void *state);

#endif
