/*
 * Breaker decisions (docs/design.md §3.1), pure: which reasons count, what a
 * verdict does to a target's record, when a probe may go. Every state
 * backend (state.h: local, Redis) stores records and applies these
 * functions under its own atomicity (a mutex, a Lua script, a mirror), so
 * the backends never differ in policy: the backend stores, core decides.
 *
 * Times are the caller's monotonic milliseconds; what crosses instances is
 * only ever a duration (open_ms, lease_ms, cool_ms), which a shared backend
 * converts (PX / PTTL) and never compares with another instance's clock.
 */
#ifndef AIR__BREAKER_H
#define AIR__BREAKER_H

#include <stdbool.h>
#include <stdint.h>

#include "airetry.h"
#include "policy.h"

/* What a request may do with one target (air__breaker_admit). */
typedef enum air__admit {
  AIR__ADMIT_YES,   /* closed (or breaker disabled): go */
  AIR__ADMIT_PROBE, /* half-open: this caller holds the probe lease */
  AIR__ADMIT_NO,    /* open, or half-open with a live lease held by another */
} air__admit;

/* One target's breaker as a backend stores it. Zero is closed. */
typedef struct air__breaker_rec {
  uint32_t failures; /* consecutive counting failures */
  bool open;
  uint64_t open_until;  /* open: a probe may go from then on */
  uint64_t lease;       /* the probe lease's token, 0 when none */
  uint64_t lease_until; /* the lease frees itself then (its owner vanished) */
} air__breaker_rec;

typedef enum air__verdict_kind {
  AIR__VERDICT_SUCCESS, /* closes a half-open breaker, resets the count */
  AIR__VERDICT_FAILURE, /* a counting failure */
} air__verdict_kind;

/* The verdict of one attempt, as record(target, verdict, threshold,
 * open_ms) of docs/design.md §1 takes it. */
typedef struct air__verdict {
  air__verdict_kind kind;
  uint32_t threshold; /* FAILURE: consecutive failures that open it (1: now) */
  uint64_t open_ms;   /* FAILURE: how long it opens for */
  uint64_t lease;     /* the probe lease the attempt held (freed), or 0 */
} air__verdict;

/* True for the reasons that count towards opening a breaker. */
bool air__breaker_counts(air_reason r);

/*
 * The verdict an attempt on a target with breaker cfg gives when it ends
 * with reason (NONE: success); lease is the probe lease it held, or 0.
 * Returns false when there is none (a reason that does not count): the
 * caller then only releases the lease. A probe's failure re-opens at once
 * (threshold 1); quota opens at once for quota_open_ms.
 */
bool air__breaker_verdict_of(const air__breaker_cfg *cfg, air_reason reason,
                             uint64_t lease, air__verdict *v);

/* The mode of r at now_ms (a live lease does not change it). */
air_breaker_mode air__breaker_mode(const air__breaker_rec *r, uint64_t now_ms);

/*
 * try_probe's decision: closed admits; open refuses (*reopen_ms, when not
 * NULL, is when a probe may go); half-open with no live lease gives the
 * caller the lease token (valid lease_ms from now_ms) and PROBE; with a live
 * one it refuses (*reopen_ms = now_ms). token is a backend-made nonzero
 * value unique among live leases of this record.
 */
air__admit air__breaker_admit(air__breaker_rec *r, uint64_t now_ms,
                              uint64_t lease_ms, uint64_t token,
                              uint64_t *reopen_ms);

/*
 * Applies a verdict at now_ms. A success resets the count and closes a
 * half-open breaker (a probe's success closes it even under a cooling that
 * began while it ran; any other success does not cut a cooling short). A
 * failure counts and opens at the threshold (re-opening keeps the later
 * open-until). The verdict's lease, when it is the record's, is freed.
 */
void air__breaker_apply(air__breaker_rec *r, const air__verdict *v,
                        uint64_t now_ms);

/* Frees the probe lease token with no verdict; another token is left be. */
void air__breaker_release(air__breaker_rec *r, uint64_t token);

/* Keeps r open for cool_ms from now_ms (a Retry-After the engine won't
 * wait); an open-until already later stays. */
void air__breaker_cool(air__breaker_rec *r, uint64_t now_ms, uint64_t cool_ms);

#endif
