/*
 * air_state_new (airetry/core.h): the backend the config asks for. With
 * state.redis resolved (config.c read its URL, from url or url_env), the
 * Redis backend; without, the in-process one, told the config at once.
 */
#include "policy.h"
#include "redis.h"
#include "state.h"
#include "state_new.h"

int air_state_new(const air_config *cfg, air_state **out, air_error *err) {
  if (cfg != NULL && cfg->redis.resolved_url != NULL)
    return air__state_redis_new(cfg, out, err);
  int rc = air__state_local_new(out, err);
  if (rc == 0) air__state_configure(*out, cfg); /* pins its targets */
  return rc;
}
