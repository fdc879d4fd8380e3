/* Internal hooks on cancel tokens, for drivers whose waits are event loops. */
#ifndef AIR_CANCEL_H
#define AIR_CANCEL_H

#include "airetry.h"

#define AIR_CANCEL_MAX_WATCHERS 8

typedef void (*air__cancel_fn)(void *data);

/*
 * Runs fn(data) when c is triggered, on the triggering thread, under the
 * token's lock (so fn must only signal: set a flag, uv_async_send). If c is
 * already triggered, fn runs before this returns. Returns 0 or AIR_ETOOBIG.
 */
int air__cancel_watch(air_cancel *c, air__cancel_fn fn, void *data);
/* After it returns, fn(data) is not running and will not run. */
void air__cancel_unwatch(air_cancel *c, air__cancel_fn fn, void *data);

#endif
