/*
 * The Redis state backend (docs/design.md §3.1): the state interface of
 * core/state.h over one Redis node shared by every gateway instance, with
 * an in-memory mirror that every read answers from. air_state_new makes it
 * when the config has state.redis; the functions here are what only this
 * backend has (link metrics, a test's wait for the queue to drain).
 */
#ifndef AIR__STATE_REDIS_H
#define AIR__STATE_REDIS_H

#include <stdbool.h>
#include <stdint.h>

#include "airetry.h"

/* What /metrics shows of the link (air__state_redis_stats). */
typedef struct air__redis_stats {
  bool up;                 /* both connections ready, subscribed */
  uint64_t reconnects;     /* links made after the first */
  uint64_t command_errors; /* error replies, timeouts, lost replies */
  uint64_t dropped;        /* writes not sent: queue full or link down */
  uint64_t applied;        /* published changes of others applied */
  bool synced;             /* a full sync (SCAN) finished since start */
  uint64_t since_sync_ms;  /* how long ago the last one finished */
} air__redis_stats;

/*
 * Makes a Redis-backed state from cfg->redis (resolved_url must be set):
 * starts the Redis thread, which connects in the background; the state is
 * usable at once (on its own mirror until the link is up). cfg is read
 * here only (the backend copies what it keeps: URL, password, prefix,
 * timeouts, which targets and routes are shared and their key hashes).
 * AIR_EINVAL (a URL the parser refuses), AIR_ENOMEM, AIR_EIO (no thread).
 */
int air__state_redis_new(const air_config *cfg, air_state **out,
                         air_error *err);

/* Fills *out; AIR_EINVAL when st is not a Redis state. Thread-safe. */
int air__state_redis_stats(air_state *st, air__redis_stats *out);

/*
 * For tests: waits up to timeout_ms until the link is up and every
 * command queued before the call has its reply (applied to the mirror).
 * 0, AIR_ESTATE when the time ran out, AIR_EINVAL when st is not a Redis
 * state.
 */
int air__state_redis_sync(air_state *st, uint64_t timeout_ms);

#endif
