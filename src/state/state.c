/*
 * Process-local breaker and sticky state: a chained hash table of entries
 * keyed by (kind, name) under one mutex. Entries are created on first use and
 * live until air_state_free; their number is bounded by AIR__MAX_STATE_TARGETS
 * (past it, targets are admitted untracked rather than failing requests).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "limits.h"
#include "state.h"

#define NBUCKETS 1024u

enum { KIND_TARGET = 't', KIND_ROUTE = 'r' };

typedef struct entry {
  struct entry *next;
  uint64_t hash;
  /* breaker */
  uint32_t failures;    /* consecutive counting failures */
  bool open;
  bool probing;         /* the half-open probe slot is taken */
  uint64_t open_until;  /* open: probes allowed from then on */
  /* sticky */
  bool sticky;
  char *target;         /* the sticky target's name (owned) */
  uint64_t since;
  uint32_t used;        /* requests started since it became sticky */
  char kind;
  size_t len;
  char name[];
} entry;

struct air_state {
  pthread_mutex_t mu;
  entry *buckets[NBUCKETS];
  size_t count;
};

static uint64_t hash_name(char kind, const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull ^ (uint64_t)(unsigned char)kind;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 1099511628211ull;
  }
  return h;
}

/* Finds or (when create) makes the entry; NULL when absent or over the cap. */
static entry *lookup(air_state *st, char kind, const char *name, bool create) {
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

int air_state_new(const air_config *cfg, air_state **out, air_error *err) {
  (void)cfg;
  if (out == NULL) return air__error_set(err, AIR_EINVAL, "out is NULL");
  air_state *st = calloc(1, sizeof(*st));
  if (st == NULL) return air__error_set(err, AIR_ENOMEM, "out of memory");
  if (pthread_mutex_init(&st->mu, NULL) != 0) {
    free(st);
    return air__error_set(err, AIR_ENOMEM, "cannot create the state's lock");
  }
  air__error_set(err, 0, NULL);
  *out = st;
  return 0;
}

void air_state_free(air_state *st) {
  if (st == NULL) return;
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

static air_breaker_mode mode_of(const entry *e, uint64_t now_ms) {
  if (e == NULL || !e->open) return AIR_BREAKER_CLOSED;
  return now_ms < e->open_until ? AIR_BREAKER_OPEN : AIR_BREAKER_HALF_OPEN;
}

air_breaker_mode air_state_breaker(air_state *st, const char *target,
                                   uint64_t now_ms) {
  if (st == NULL || target == NULL) return AIR_BREAKER_CLOSED;
  pthread_mutex_lock(&st->mu);
  air_breaker_mode m = mode_of(lookup(st, KIND_TARGET, target, false), now_ms);
  pthread_mutex_unlock(&st->mu);
  return m;
}

air__admit air__breaker_acquire(air_state *st, const char *target,
                                const air__breaker_cfg *cfg, uint64_t now_ms,
                                uint64_t *reopen_ms) {
  if (st == NULL || (cfg != NULL && !cfg->enabled)) return AIR__ADMIT_YES;
  air__admit a = AIR__ADMIT_YES;
  pthread_mutex_lock(&st->mu);
  entry *e = lookup(st, KIND_TARGET, target, false);
  switch (mode_of(e, now_ms)) {
    case AIR_BREAKER_CLOSED:
      break;
    case AIR_BREAKER_OPEN:
      a = AIR__ADMIT_NO;
      if (reopen_ms) *reopen_ms = e->open_until;
      break;
    case AIR_BREAKER_HALF_OPEN:
      if (e->probing) {
        a = AIR__ADMIT_NO;
        if (reopen_ms) *reopen_ms = now_ms;
      } else {
        e->probing = true;
        a = AIR__ADMIT_PROBE;
      }
      break;
  }
  pthread_mutex_unlock(&st->mu);
  return a;
}

void air__breaker_record(air_state *st, const char *target,
                         const air__breaker_cfg *cfg, air_reason reason,
                         bool probe, uint64_t now_ms) {
  if (st == NULL || cfg == NULL || !cfg->enabled) return;
  pthread_mutex_lock(&st->mu);
  bool counts = air__breaker_counts(reason);
  entry *e = lookup(st, KIND_TARGET, target, counts || probe);
  if (e == NULL) goto out;
  if (reason == AIR_REASON_NONE) {
    e->failures = 0;
    /* A success closes a half-open breaker; one that arrives while a newer
     * Retry-After cooling is in force does not cut that cooling short. */
    if (probe || (e->open && now_ms >= e->open_until)) e->open = false;
    if (probe) e->probing = false;
    goto out;
  }
  if (!counts) {
    if (probe) e->probing = false;
    goto out;
  }
  if (e->failures < UINT32_MAX) e->failures++;
  uint64_t open_for = 0;
  if (reason == AIR_REASON_QUOTA)
    open_for = cfg->quota_open_ms;
  else if (probe || e->failures >= cfg->failures)
    open_for = cfg->open_ms;
  if (open_for > 0 || reason == AIR_REASON_QUOTA) {
    uint64_t until = now_ms + open_for;
    if (!e->open || until > e->open_until) e->open_until = until;
    e->open = true;
  }
  if (probe) e->probing = false;
out:
  pthread_mutex_unlock(&st->mu);
}

void air__breaker_release(air_state *st, const char *target) {
  if (st == NULL) return;
  pthread_mutex_lock(&st->mu);
  entry *e = lookup(st, KIND_TARGET, target, false);
  if (e != NULL) e->probing = false;
  pthread_mutex_unlock(&st->mu);
}

void air__breaker_cool(air_state *st, const char *target, uint64_t until_ms) {
  if (st == NULL) return;
  pthread_mutex_lock(&st->mu);
  entry *e = lookup(st, KIND_TARGET, target, true);
  if (e != NULL) {
    if (!e->open || until_ms > e->open_until) e->open_until = until_ms;
    e->open = true;
  }
  pthread_mutex_unlock(&st->mu);
}

unsigned air__sticky_take(air_state *st, const char *route,
                          const air__sticky_cfg *cfg,
                          const air__target *targets, size_t n,
                          uint64_t now_ms) {
  if (st == NULL || cfg == NULL || !cfg->enabled) return 0;
  unsigned index = 0;
  pthread_mutex_lock(&st->mu);
  entry *e = lookup(st, KIND_ROUTE, route, false);
  if (e != NULL && e->sticky) {
    bool expired = (cfg->after_ms > 0 && now_ms - e->since >= cfg->after_ms) ||
                   (cfg->requests > 0 && e->used >= cfg->requests);
    size_t i = 1;
    while (!expired && i < n && strcmp(targets[i].name, e->target) != 0) i++;
    if (expired || i >= n) {
      e->sticky = false; /* over, or its target left the route */
    } else {
      e->used++;
      index = (unsigned)i;
    }
  }
  pthread_mutex_unlock(&st->mu);
  return index;
}

void air__sticky_settle(air_state *st, const char *route,
                        const air__sticky_cfg *cfg, const char *target,
                        bool first, uint64_t now_ms) {
  if (st == NULL || cfg == NULL || !cfg->enabled) return;
  bool clear = first || target == NULL;
  pthread_mutex_lock(&st->mu);
  entry *e = lookup(st, KIND_ROUTE, route, !clear);
  if (e != NULL) {
    if (clear) {
      e->sticky = false;
    } else if (!e->sticky || strcmp(e->target, target) != 0) {
      /* A new stickiness starts its window now; a request that confirms the
       * current one does not extend it (it still returns to the first). */
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
