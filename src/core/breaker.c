/*
 * Breaker decisions (breaker.h): pure functions over one target's record.
 * Saturating arithmetic: a far-off clock or duration never wraps to "now".
 */
#include "breaker.h"

static uint64_t add_sat(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

bool air__breaker_counts(air_reason r) {
  switch (r) {
    case AIR_REASON_RATE_LIMIT:
    case AIR_REASON_OVERLOADED:
    case AIR_REASON_SERVER_ERROR:
    case AIR_REASON_NETWORK:
    case AIR_REASON_MALFORMED:
    case AIR_REASON_TIMEOUT_CONNECT:
    case AIR_REASON_TIMEOUT_FIRST_BYTE:
    case AIR_REASON_TIMEOUT_FIRST_CHUNK:
    case AIR_REASON_AUTH:
    case AIR_REASON_QUOTA:
      return true;
    default:
      return false;
  }
}

bool air__breaker_verdict_of(const air__breaker_cfg *cfg, air_reason reason,
                             uint64_t lease, air__verdict *v) {
  v->kind = AIR__VERDICT_SUCCESS;
  v->threshold = 0;
  v->open_ms = 0;
  v->lease = lease;
  if (reason == AIR_REASON_NONE) return true;
  if (!air__breaker_counts(reason)) return false;
  v->kind = AIR__VERDICT_FAILURE;
  if (reason == AIR_REASON_QUOTA) {
    v->threshold = 1;
    v->open_ms = cfg->quota_open_ms;
  } else {
    v->threshold = lease != 0 ? 1 : cfg->failures;
    v->open_ms = cfg->open_ms;
  }
  return true;
}

air_breaker_mode air__breaker_mode(const air__breaker_rec *r, uint64_t now_ms) {
  if (r == NULL || !r->open) return AIR_BREAKER_CLOSED;
  return now_ms < r->open_until ? AIR_BREAKER_OPEN : AIR_BREAKER_HALF_OPEN;
}

air__admit air__breaker_admit(air__breaker_rec *r, uint64_t now_ms,
                              uint64_t lease_ms, uint64_t token,
                              uint64_t *reopen_ms) {
  switch (air__breaker_mode(r, now_ms)) {
    case AIR_BREAKER_CLOSED:
      return AIR__ADMIT_YES;
    case AIR_BREAKER_OPEN:
      if (reopen_ms) *reopen_ms = r->open_until;
      return AIR__ADMIT_NO;
    case AIR_BREAKER_HALF_OPEN:
      break;
  }
  if (r->lease != 0 && now_ms < r->lease_until) {
    if (reopen_ms) *reopen_ms = now_ms;
    return AIR__ADMIT_NO;
  }
  r->lease = token;
  r->lease_until = add_sat(now_ms, lease_ms);
  return AIR__ADMIT_PROBE;
}

void air__breaker_apply(air__breaker_rec *r, const air__verdict *v,
                        uint64_t now_ms) {
  bool probe = v->lease != 0 && v->lease == r->lease;
  if (probe) r->lease = 0;
  if (v->kind == AIR__VERDICT_SUCCESS) {
    r->failures = 0;
    if (probe || (r->open && now_ms >= r->open_until)) r->open = false;
    return;
  }
  if (r->failures < UINT32_MAX) r->failures++;
  if (r->failures < v->threshold) return;
  uint64_t until = add_sat(now_ms, v->open_ms);
  if (!r->open || until > r->open_until) r->open_until = until;
  r->open = true;
}

void air__breaker_release(air__breaker_rec *r, uint64_t token) {
  if (token != 0 && r->lease == token) r->lease = 0;
}

void air__breaker_cool(air__breaker_rec *r, uint64_t now_ms, uint64_t cool_ms) {
  uint64_t until = add_sat(now_ms, cool_ms);
  if (!r->open || until > r->open_until) r->open_until = until;
  r->open = true;
}
