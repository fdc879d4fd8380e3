/*
 * The in-process state backend (core/state.h): a table of records keyed by
 * (kind, name) under one mutex (table.h). Records are created on first use
 * and live until air_state_free; their number is bounded by
 * AIR__MAX_STATE_TARGETS (past it, targets are admitted untracked and
 * routes are not sticky, rather than failing requests). It stores; the
 * decisions are core's (breaker.h), applied under the mutex.
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

static air__admit local_try_probe(void *impl, const char *target,
                                  uint64_t lease_ms, uint64_t now_ms,
                                  uint64_t *reopen_ms, uint64_t *lease) {
  local *st = impl;
  air__admit a = AIR__ADMIT_YES;
  pthread_mutex_lock(&st->mu);
  entry *e = lookup(st, KIND_TARGET, target, false);
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
  entry *e = lookup(st, KIND_TARGET, target, v->kind == AIR__VERDICT_FAILURE);
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
  entry *e = lookup(st, KIND_TARGET, target, true);
  if (e != NULL) air__breaker_cool(&e->breaker, now_ms, cool_ms);
  pthread_mutex_unlock(&st->mu);
}

static air_breaker_mode local_mode(void *impl, const char *target,
                                   uint64_t now_ms) {
  local *st = impl;
  pthread_mutex_lock(&st->mu);
  entry *e = lookup(st, KIND_TARGET, target, false);
  air_breaker_mode m = air__breaker_mode(e ? &e->breaker : NULL, now_ms);
  pthread_mutex_unlock(&st->mu);
  return m;
}

static int local_sticky_get(void *impl, const char *route, uint64_t now_ms,
                            air__sticky_rec *out) {
  local *st = impl;
  int found = 0;
  pthread_mutex_lock(&st->mu);
  entry *e = lookup(st, KIND_ROUTE, route, false);
  if (e != NULL && e->sticky != NULL)
    found = air__sticky_mem_get(e->sticky, now_ms, out);
  pthread_mutex_unlock(&st->mu);
  return found;
}

static void local_sticky_set(void *impl, const char *route, const char *target,
                             uint64_t now_ms) {
  local *st = impl;
  pthread_mutex_lock(&st->mu);
  entry *e = lookup(st, KIND_ROUTE, route, target != NULL);
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
  entry *e = lookup(st, KIND_TARGET, target, false);
  if (e != NULL) s = air__style_mem_get(&e->style, now_ms);
  pthread_mutex_unlock(&st->mu);
  return s;
}

static void local_style_set(void *impl, const char *target,
                            air_cont_style style, uint64_t now_ms,
                            uint64_t ttl_ms) {
  local *st = impl;
  pthread_mutex_lock(&st->mu);
  entry *e = lookup(st, KIND_TARGET, target, style != AIR_CONT_NONE);
  if (e != NULL) air__style_mem_set(&e->style, style, now_ms, ttl_ms);
  pthread_mutex_unlock(&st->mu);
}

static void local_destroy(void *impl) {
  local *st = impl;
  for (entry *e = air__table_next(&st->table, NULL); e != NULL;
       e = air__table_next(&st->table, e))
    free(e->sticky);
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
  int rc = air__state_new(&local_ops, st, out);
  if (rc != 0) {
    local_destroy(st);
    return air__error_set(err, rc, "out of memory");
  }
  air__error_set(err, 0, NULL);
  return 0;
}
