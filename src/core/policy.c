/*
 * Look-ups over the resolved config (policy.h): pure functions over
 * immutable data, shared by the engine and every layer above it.
 */
#include <stdint.h>
#include <string.h>

#include "policy.h"

static bool eq(const char *s, size_t n, const char *lit) {
  return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

const air__route *air__config_route(const air_config *cfg, const char *name,
                                    size_t n) {
  if (!cfg || !name) return NULL;
  for (size_t i = 0; i < cfg->n_routes; i++)
    if (eq(name, n, cfg->routes[i].name)) return &cfg->routes[i];
  return NULL;
}

const air__provider *air__config_provider(const air_config *cfg,
                                          const char *name, size_t n,
                                          size_t *index) {
  if (!cfg || !name) return NULL;
  for (size_t i = 0; i < cfg->n_providers; i++) {
    if (cfg->providers[i].name && eq(name, n, cfg->providers[i].name)) {
      if (index) *index = i;
      return &cfg->providers[i];
    }
  }
  return NULL;
}

const air__policy *air__config_policy(const air_config *cfg,
                                      const char *model) {
  if (!cfg || !model) return NULL;
  size_t n = strlen(model);
  const air__route *route = air__config_route(cfg, model, n);
  if (route) return &route->policy;
  const char *slash = memchr(model, '/', n);
  if (!slash || slash == model || slash[1] == '\0') return NULL;
  if (!air__config_provider(cfg, model, (size_t)(slash - model), NULL))
    return NULL;
  return &cfg->defaults;
}

air_cont_style air__cont_style_by_api(air_dialect api) {
  return api == AIR_DIALECT_ANTHROPIC ? AIR_CONT_PREFILL : AIR_CONT_NONE;
}
