/*
 * The in-process state backend (core/state.h): a table of records keyed by
 * (kind, name) under one mutex (table.h). It stores; the decisions are
 * core's (breaker.h), applied under the mutex.
 *
 * The records of the config's targets and routes are made at configure
 * and pinned: they live until a reload drops them from the config. Any
 * other name (a direct `provider/model`, chosen by callers) gets a record
 * on first use; at most AIR__MAX_STATE_TARGETS of those (past it, such a
 * target is admitted untracked rather than failing a request), and one
 * unused for AIR__STATE_IDLE_MS is freed unless its breaker is open or
 * half-open, a probe lease is out, a learned continuation style is still
 * valid, or its route is sticky. What such a record forgets is a count of
 * consecutive failures that saw no attempt for that long. Each op looks at no
 * more than AIR__STATE_EVICT_STEP records for this (table.h), never the whole
 * table.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "limits.h"
#include "state.h"
#include "state_new.h"
#include "table.h"

enum { KIND_TARGET = 't', KIND_ROUTE = 'r' };

typedef struct entry {
  air__table_node node;
  air__breaker_rec breaker; /* kind t */
  air__style_mem style;     /* kind t: a learned continuation style */
  air__sticky_mem *sticky;  /* kind r: made by the first sticky_set */
} entry;

typedef struct local {
  pthread_mutex_t mu;
  air__table table;
} local;

/* Finds or (when create) makes the entry; NULL when absent or over the cap. */
static entry *lookup(local *st, char kind, const char *name, bool create) {
  return air__table_get(&st->table, kind, name, strlen(name), create,
                        sizeof(entry));
}

/* The same after the op's clock moved the table on (air__table_at). */
static entry *lookup_at(local *st, char kind, const char *name, bool create,
                        uint64_t now_ms) {
  air__table_at(&st->table, now_ms);
  return lookup(st, kind, name, create);
}

/* The idle rule (table.h): nothing open, leased, learned or sticky. */
static bool entry_idle(const air__table_node *rec, uint64_t now_ms,
                       void *data) {
  const entry *e = (const entry *)rec;
  (void)data;
  if (rec->kind == KIND_ROUTE) return e->sticky == NULL || !e->sticky->on;
  return !e->breaker.open && e->breaker.lease == 0 &&
         air__style_mem_get(&e->style, now_ms) == AIR_CONT_NONE;
}

static void entry_drop(air__table_node *rec, void *data) {
  (void)data;
  free(((entry *)rec)->sticky);
}

static air__admit local_try_probe(void *impl, const char *target,
                                  uint64_t lease_ms, uint64_t now_ms,
                                  uint64_t *reopen_ms, uint64_t *lease) {
  local *st = impl;
  air__admit a = AIR__ADMIT_YES;
  pthread_mutex_lock(&st->mu);
  entry *e = lookup_at(st, KIND_TARGET, target, false, now_ms);
  if (e != NULL)
    a = air__table_admit(&st->table, &e->breaker, now_ms, lease_ms, reopen_ms,
                         lease);
  pthread_mutex_unlock(&st->mu);
  return a;
}

static void local_record(void *impl, const char *target, const air__verdict *v,
                         uint64_t now_ms) {
  local *st = impl;
  pthread_mutex_lock(&st->mu);
  /* Only a failure needs a record made; a success on an unknown target
   * leaves it closed as it is. */
  entry *e = lookup_at(st, KIND_TARGET, target, v->kind == AIR__VERDICT_FAILURE,
                       now_ms);
  if (e != NULL) air__breaker_apply(&e->breaker, v, now_ms);
  pthread_mutex_unlock(&st->mu);
}

static void local_release(void *impl, const char *target, uint64_t lease) {
  local *st = impl;
  pthread_mutex_lock(&st->mu);
  entry *e = lookup(st, KIND_TARGET, target, false);
  if (e != NULL) air__breaker_release(&e->breaker, lease);
  pthread_mutex_unlock(&st->mu);
}

static void local_cool(void *impl, const char *target, uint64_t now_ms,
                       uint64_t cool_ms) {
  local *st = impl;
  pthread_mutex_lock(&st->mu);
  entry *e = lookup_at(st, KIND_TARGET, target, true, now_ms);
  if (e != NULL) air__breaker_cool(&e->breaker, now_ms, cool_ms);
  pthread_mutex_unlock(&st->mu);
}

static air_breaker_mode local_mode(void *impl, const char *target,
                                   uint64_t now_ms) {
  local *st = impl;
  pthread_mutex_lock(&st->mu);
  entry *e = lookup_at(st, KIND_TARGET, target, false, now_ms);
  air_breaker_mode m = air__breaker_mode(e ? &e->breaker : NULL, now_ms);
  pthread_mutex_unlock(&st->mu);
  return m;
}

static int local_sticky_get(void *impl, const char *route, uint64_t now_ms,
                            air__sticky_rec *out) {
  local *st = impl;
  int found = 0;
  pthread_mutex_lock(&st->mu);
  entry *e = lookup_at(st, KIND_ROUTE, route, false, now_ms);
  if (e != NULL && e->sticky != NULL)
    found = air__sticky_mem_get(e->sticky, now_ms, out);
  pthread_mutex_unlock(&st->mu);
  return found;
}

static void local_sticky_set(void *impl, const char *route, const char *target,
                             uint64_t now_ms) {
  local *st = impl;
  pthread_mutex_lock(&st->mu);
  entry *e = lookup_at(st, KIND_ROUTE, route, target != NULL, now_ms);
  if (e != NULL && e->sticky == NULL && target != NULL)
    e->sticky = calloc(1, sizeof(*e->sticky)); /* none: not sticky */
  if (e != NULL && e->sticky != NULL)
    air__sticky_mem_set(e->sticky, target, now_ms);
  pthread_mutex_unlock(&st->mu);
}

static air_cont_style local_style_get(void *impl, const char *target,
                                      uint64_t now_ms) {
  local *st = impl;
  air_cont_style s = AIR_CONT_NONE;
  pthread_mutex_lock(&st->mu);
  entry *e = lookup_at(st, KIND_TARGET, target, false, now_ms);
  if (e != NULL) s = air__style_mem_get(&e->style, now_ms);
  pthread_mutex_unlock(&st->mu);
  return s;
}

static void local_style_set(void *impl, const char *target,
                            air_cont_style style, uint64_t now_ms,
                            uint64_t ttl_ms) {
  local *st = impl;
  pthread_mutex_lock(&st->mu);
  entry *e = lookup_at(st, KIND_TARGET, target, style != AIR_CONT_NONE, now_ms);
  if (e != NULL) air__style_mem_set(&e->style, style, now_ms, ttl_ms);
  pthread_mutex_unlock(&st->mu);
}

/* Makes and pins the record of name (kind); one that cannot be made (no
 * memory) leaves name loose, as a direct name is. Caller holds mu. */
static void pin(local *st, char kind, const char *name) {
  (void)air__table_get_pinned(&st->table, kind, name, strlen(name),
                              sizeof(entry));
}

/* The config's targets and routes are pinned, and no other record. */
static void local_configure(void *impl, const air_config *cfg) {
  local *st = impl;
  pthread_mutex_lock(&st->mu);
  air__table *t = &st->table;
  while (t->pins.oldest != NULL) air__table_pin(t, t->pins.oldest, false);
  for (size_t i = 0; i < cfg->n_routes; i++) {
    const air__route *rt = &cfg->routes[i];
    if (rt->name != NULL) pin(st, KIND_ROUTE, rt->name);
    for (size_t j = 0; j < rt->n_targets; j++)
      if (rt->targets[j].name != NULL)
        pin(st, KIND_TARGET, rt->targets[j].name);
  }
  pthread_mutex_unlock(&st->mu);
}

static void local_destroy(void *impl) {
  local *st = impl;
  air__table_cleanup(&st->table);
  pthread_mutex_destroy(&st->mu);
  free(st);
}

static const air__state_ops local_ops = {
    .try_probe = local_try_probe,
    .record = local_record,
    .release = local_release,
    .cool = local_cool,
    .mode = local_mode,
    .sticky_get = local_sticky_get,
    .sticky_set = local_sticky_set,
    .style_get = local_style_get,
    .style_set = local_style_set,
    .configure = local_configure,
    .destroy = local_destroy,
};

int air__state_local_new(air_state **out, air_error *err) {
  if (out == NULL) return air__error_set(err, AIR_EINVAL, "out is NULL");
  local *st = calloc(1, sizeof(*st));
  if (st == NULL) return air__error_set(err, AIR_ENOMEM, "out of memory");
  if (pthread_mutex_init(&st->mu, NULL) != 0) {
    free(st);
    return air__error_set(err, AIR_EIO, "cannot create the state's lock");
  }
  st->table.idle_fn = entry_idle;
  st->table.drop_fn = entry_drop;
  int rc = air__state_new(&local_ops, st, out);
  if (rc != 0) {
    local_destroy(st);
    return air__error_set(err, rc, "out of memory");
  }
  air__error_set(err, 0, NULL);
  return 0;
}
