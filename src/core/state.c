/*
 * The engine's side of the state interface (state.h): breaker and sticky
 * decisions over whichever backend the air_state carries.
 */
#include <stdlib.h>
#include <string.h>

#include "state.h"

int air__state_new(const air__state_ops *ops, void *impl, air_state **out) {
  if (ops == NULL || out == NULL) return AIR_EINVAL;
  air_state *st = malloc(sizeof(*st));
  if (st == NULL) return AIR_ENOMEM;
  st->ops = ops;
  st->impl = impl;
  *out = st;
  return 0;
}

void air_state_free(air_state *st) {
  if (st == NULL) return;
  if (st->ops->destroy) st->ops->destroy(st->impl);
  free(st);
}

void air__state_configure(air_state *st, const air_config *cfg) {
  if (st != NULL && cfg != NULL && st->ops->configure)
    st->ops->configure(st->impl, cfg);
}

air_breaker_mode air_state_breaker(air_state *st, const char *target,
                                   uint64_t now_ms) {
  if (st == NULL || target == NULL) return AIR_BREAKER_CLOSED;
  return st->ops->mode(st->impl, target, now_ms);
}

air__admit air__state_admit(air_state *st, const char *target,
                            const air__breaker_cfg *cfg, uint64_t lease_ms,
                            uint64_t now_ms, uint64_t *reopen_ms,
                            uint64_t *lease) {
  *lease = 0;
  if (st == NULL || (cfg != NULL && !cfg->enabled)) return AIR__ADMIT_YES;
  uint64_t token = 0;
  air__admit a =
      st->ops->try_probe(st->impl, target, lease_ms, now_ms, reopen_ms, &token);
  if (a == AIR__ADMIT_PROBE) *lease = token;
  return a;
}

void air__state_record(air_state *st, const char *target,
                       const air__breaker_cfg *cfg, air_reason reason,
                       uint64_t lease, uint64_t now_ms) {
  if (st == NULL || cfg == NULL || !cfg->enabled) return;
  air__verdict v;
  if (air__breaker_verdict_of(cfg, reason, lease, &v))
    st->ops->record(st->impl, target, &v, now_ms);
  else if (lease != 0)
    st->ops->release(st->impl, target, lease);
}

void air__state_release(air_state *st, const char *target, uint64_t lease) {
  if (st == NULL || lease == 0) return;
  st->ops->release(st->impl, target, lease);
}

void air__state_cool(air_state *st, const char *target, uint64_t now_ms,
                     uint64_t cool_ms) {
  if (st == NULL) return;
  st->ops->cool(st->impl, target, now_ms, cool_ms);
}

unsigned air__sticky_take(air_state *st, const char *route,
                          const air__sticky_cfg *cfg,
                          const air__target *targets, size_t n,
                          uint64_t now_ms) {
  if (st == NULL || cfg == NULL || !cfg->enabled) return 0;
  air__sticky_rec rec;
  if (st->ops->sticky_get(st->impl, route, now_ms, &rec) != 1) return 0;
  bool expired = (cfg->after_ms > 0 && rec.age_ms >= cfg->after_ms) ||
                 (cfg->requests > 0 && rec.used >= cfg->requests);
  size_t i = 1;
  while (!expired && i < n && strcmp(targets[i].name, rec.target) != 0) i++;
  if (expired || i >= n) {
    /* Over, or its target left the route. */
    st->ops->sticky_set(st->impl, route, NULL, now_ms);
    return 0;
  }
  return (unsigned)i;
}

void air__sticky_settle(air_state *st, const char *route,
                        const air__sticky_cfg *cfg, const char *target,
                        bool first, uint64_t now_ms) {
  if (st == NULL || cfg == NULL || !cfg->enabled) return;
  st->ops->sticky_set(st->impl, route, first ? NULL : target, now_ms);
}

air_cont_style air__state_style_get(air_state *st, const char *target,
                                    uint64_t now_ms) {
  if (st == NULL || target == NULL || st->ops->style_get == NULL)
    return AIR_CONT_NONE;
  return st->ops->style_get(st->impl, target, now_ms);
}

void air__state_style_learn(air_state *st, const char *target,
                            air_cont_style style, uint64_t now_ms) {
  if (st == NULL || target == NULL || st->ops->style_set == NULL) return;
  st->ops->style_set(st->impl, target, style, now_ms, AIR__CONT_LEARNED_MS);
}
