/*
 * The in-process state backend (core/state.h): a chained hash table of
 * entries keyed by (kind, name) under one mutex. Entries are created on
 * first use and live until air_state_free; their number is bounded by
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

#define NBUCKETS 1024u

enum { KIND_TARGET = 't', KIND_ROUTE = 'r' };

typedef struct entry {
  struct entry *next;
  uint64_t hash;
  air__breaker_rec breaker;
  /* sticky */
  bool sticky;
  char *target;         /* the sticky target's name (owned) */
  uint64_t since;
  uint32_t used;        /* requests started since it became sticky */
  char kind;
  size_t len;
  char name[];
} entry;

typedef struct local {
  pthread_mutex_t mu;
  entry *buckets[NBUCKETS];
  size_t count;
  uint64_t tokens;      /* the last probe lease token made */
} local;

static uint64_t hash_name(char kind, const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull ^ (uint64_t)(unsigned char)kind;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 1099511628211ull;
  }
  return h;
}

/* Finds or (when create) makes the entry; NULL when absent or over the cap. */
static entry *lookup(local *st, char kind, const char *name, bool create) {
  size_t n = strlen(name);
  uint64_t h = hash_name(kind, name, n);
  entry **slot = &st->buckets[h % NBUCKETS];
  for (entry *e = *slot; e != NULL; e = e->next)
    if (e->hash == h && e->kind == kind && e->len == n &&
        memcmp(e->name, name, n) == 0)
      return e;
  if (!create || st->count >= AIR__MAX_STATE_TARGETS) return NULL;
  entry *e = calloc(1, sizeof(*e) + n + 1);
  if (e == NULL) return NULL;
  e->hash = h;
  e->kind = kind;
  e->len = n;
  memcpy(e->name, name, n + 1);
  e->next = *slot;
  *slot = e;
  st->count++;
  return e;
}

static air__admit local_try_probe(void *impl, const char *target,
                                  uint64_t lease_ms, uint64_t now_ms,
                                  uint64_t *reopen_ms, uint64_t *lease) {
  local *st = impl;
  air__admit a = AIR__ADMIT_YES;
  pthread_mutex_lock(&st->mu);
  entry *e = lookup(st, KIND_TARGET, target, false);
  if (e != NULL) {
    uint64_t token = st->tokens + 1;
    a = air__breaker_admit(&e->breaker, now_ms, lease_ms, token, reopen_ms);
    if (a == AIR__ADMIT_PROBE) {
      st->tokens = token;
      *lease = token;
    }
  }
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
  if (e != NULL && e->sticky) {
    size_t n = strlen(e->target);
    if (n < sizeof(out->target)) {
      memcpy(out->target, e->target, n + 1);
      out->age_ms = now_ms >= e->since ? now_ms - e->since : 0;
      out->used = e->used;
      if (e->used < UINT32_MAX) e->used++;
      found = 1;
    }
  }
  pthread_mutex_unlock(&st->mu);
  return found;
}

static void local_sticky_set(void *impl, const char *route, const char *target,
                             uint64_t now_ms) {
  local *st = impl;
  pthread_mutex_lock(&st->mu);
  entry *e = lookup(st, KIND_ROUTE, route, target != NULL);
  if (e != NULL) {
    if (target == NULL) {
      e->sticky = false;
    } else if (!e->sticky || strcmp(e->target, target) != 0) {
      size_t n = strlen(target);
      char *copy = malloc(n + 1);
      if (copy == NULL) {
        e->sticky = false; /* no memory: not sticky rather than wrong */
      } else {
        memcpy(copy, target, n + 1);
        free(e->target);
        e->target = copy;
        e->sticky = true;
        e->since = now_ms;
        e->used = 0;
      }
    }
  }
  pthread_mutex_unlock(&st->mu);
}

static void local_destroy(void *impl) {
  local *st = impl;
  for (size_t i = 0; i < NBUCKETS; i++) {
    entry *e = st->buckets[i];
    while (e != NULL) {
      entry *next = e->next;
      free(e->target);
      free(e);
      e = next;
    }
  }
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
