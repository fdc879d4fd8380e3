/* Internal hooks on cancel tokens, for drivers whose waits are event loops. */
#ifndef AIR__CANCEL_H
#define AIR__CANCEL_H

#include <stdbool.h>

#include "airetry.h"

typedef void (*air__cancel_fn)(void *data);

/*
 * One watch on a token, owned by the watcher (embedded in its job, say), so
 * a token holds any number of watchers and a watch never allocates or
 * fails. Fill fn and data; the rest belongs to the token while linked.
 */
typedef struct air__cancel_watcher {
  air__cancel_fn fn;
  void *data;
  struct air__cancel_watcher *prev, *next; /* the token's list */
  bool linked;
} air__cancel_watcher;

/*
 * Runs w->fn(w->data) every time c is triggered, on the triggering thread,
 * under the token's lock (so fn must only signal: set a flag,
 * uv_async_send; never touch the token). If c is already triggered, fn runs
 * once before this returns. A NULL token is never triggered: nothing
 * happens. w must stay valid until air__cancel_unwatch and must not be
 * linked already.
 */
void air__cancel_watch(air_cancel *c, air__cancel_watcher *w);
/*
 * O(1). After it returns, w->fn is not running and will not run; w may then
 * be freed. Harmless on a watcher that is not linked (or a NULL token).
 */
void air__cancel_unwatch(air_cancel *c, air__cancel_watcher *w);

#endif
