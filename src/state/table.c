/*
 * The records both state backends keep (table.h): FNV-1a over the key,
 * seeded with the kind, into chains that double as records are made; two
 * lists through the records (the loose ones in the order they were used,
 * and the pinned ones) so that eviction and the backends' walks over
 * pinned records never visit the whole table.
 */
#include "table.h"

#include <stdlib.h>
#include <string.h>

static uint64_t hash_key(char kind, const char *key, size_t n) {
  uint64_t h = 1469598103934665603ull ^ (uint64_t)(unsigned char)kind;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)key[i];
    h *= 1099511628211ull;
  }
  return h;
}

static size_t slot_of(const air__table *t, uint64_t h) {
  return (size_t)(h & (uint64_t)(t->n_buckets - 1));
}

static void list_push(air__table_list *l, air__table_node *e) {
  e->newer = NULL;
  e->older = l->newest;
  if (l->newest != NULL)
    l->newest->newer = e;
  else
    l->oldest = e;
  l->newest = e;
}

static void list_remove(air__table_list *l, air__table_node *e) {
  if (e->older != NULL)
    e->older->newer = e->newer;
  else
    l->oldest = e->newer;
  if (e->newer != NULL)
    e->newer->older = e->older;
  else
    l->newest = e->older;
  e->older = e->newer = NULL;
}

/* e counts as used at the table's clock. */
static void touch(air__table *t, air__table_node *e) {
  e->touched = t->now;
  if (e->pinned || t->idle.newest == e) return;
  list_remove(&t->idle, e);
  list_push(&t->idle, e);
}

/* Doubles the chains (once the records outnumber them twice); stays as it
 * is when memory is short or the chains are at their maximum. */
static void grow(air__table *t) {
  size_t n = t->n_buckets == 0 ? AIR__STATE_BUCKETS : 2 * t->n_buckets;
  if (t->n_buckets != 0 &&
      (t->count < 2 * t->n_buckets || t->n_buckets >= AIR__STATE_MAX_BUCKETS))
    return;
  /* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of chain heads */
  air__table_node **b = calloc(n, sizeof(*b));
  if (b == NULL) return;
  air__table_node **old = t->buckets;
  size_t old_n = t->n_buckets;
  t->buckets = b;
  t->n_buckets = n;
  for (size_t i = 0; i < old_n; i++) {
    air__table_node *e = old[i];
    while (e != NULL) {
      air__table_node *next = e->next;
      air__table_node **slot = &b[slot_of(t, e->hash)];
      e->next = *slot;
      *slot = e;
      e = next;
    }
  }
  free(old);
}

/* Takes the least recently used loose record out of its list and its
 * chain and frees it. */
static void evict_oldest(air__table *t) {
  air__table_node *e = t->idle.oldest;
  t->idle.oldest = e->newer;
  if (e->newer != NULL)
    e->newer->older = NULL;
  else
    t->idle.newest = NULL;
  air__table_node **pp = &t->buckets[slot_of(t, e->hash)];
  while (*pp != e) pp = &(*pp)->next;
  *pp = e->next;
  if (t->drop_fn != NULL) t->drop_fn(e, t->fn_data);
  free(e);
  t->count--;
  t->loose--;
  t->evicted++;
}

void air__table_at(air__table *t, uint64_t now_ms) {
  if (now_ms > t->now) t->now = now_ms;
  for (int i = 0; i < AIR__STATE_EVICT_STEP; i++) {
    air__table_node *e = t->idle.oldest;
    if (e == NULL || t->now - e->touched < AIR__STATE_IDLE_MS) return;
    if (t->idle_fn == NULL || t->idle_fn(e, t->now, t->fn_data))
      evict_oldest(t);
    else
      touch(t, e); /* still in use: looked at again after another while */
  }
}

/* air__table_get; capped: the cap on loose records applies. */
static air__table_node *get(air__table *t, char kind, const char *key, size_t n,
                            bool create, size_t size, bool capped) {
  uint64_t h = hash_key(kind, key, n);
  if (t->n_buckets != 0) {
    for (air__table_node *e = t->buckets[slot_of(t, h)]; e != NULL; e = e->next)
      if (e->hash == h && e->kind == kind && e->len == n &&
          memcmp(e->key, key, n) == 0) {
        touch(t, e);
        return e;
      }
  }
  if (!create || (capped && t->loose >= AIR__MAX_STATE_TARGETS)) return NULL;
  grow(t);
  if (t->n_buckets == 0) return NULL;
  char *mem = calloc(1, size + n + 1);
  if (mem == NULL) return NULL;
  air__table_node *e = (air__table_node *)mem;
  memcpy(mem + size, key, n);
  e->key = mem + size;
  e->len = n;
  e->hash = h;
  e->kind = kind;
  e->touched = t->now;
  air__table_node **slot = &t->buckets[slot_of(t, h)];
  e->next = *slot;
  *slot = e;
  list_push(&t->idle, e);
  t->count++;
  t->loose++;
  return e;
}

void *air__table_get(air__table *t, char kind, const char *key, size_t n,
                     bool create, size_t size) {
  return get(t, kind, key, n, create, size, true);
}

void *air__table_get_pinned(air__table *t, char kind, const char *key, size_t n,
                            size_t size) {
  air__table_node *e = get(t, kind, key, n, true, size, false);
  if (e != NULL) air__table_pin(t, e, true);
  return e;
}

void air__table_pin(air__table *t, void *rec, bool pinned) {
  air__table_node *e = rec;
  if (e->pinned == pinned) return;
  list_remove(pinned ? &t->idle : &t->pins, e);
  e->pinned = pinned;
  e->touched = t->now;
  list_push(pinned ? &t->pins : &t->idle, e);
  if (pinned)
    t->loose--;
  else
    t->loose++;
}

void *air__table_next(const air__table *t, const void *rec) {
  const air__table_node *e = rec;
  size_t b = 0;
  if (e != NULL) {
    if (e->next != NULL) return e->next;
    b = slot_of(t, e->hash) + 1;
  }
  for (; b < t->n_buckets; b++)
    if (t->buckets[b] != NULL) return t->buckets[b];
  return NULL;
}

void *air__table_next_pinned(const air__table *t, const void *rec) {
  const air__table_node *e = rec;
  return e == NULL ? t->pins.oldest : e->newer;
}

void air__table_cleanup(air__table *t) {
  for (size_t i = 0; i < t->n_buckets; i++) {
    air__table_node *e = t->buckets[i];
    while (e != NULL) {
      air__table_node *next = e->next;
      if (t->drop_fn != NULL) t->drop_fn(e, t->fn_data);
      free(e);
      e = next;
    }
  }
  free(t->buckets);
  t->buckets = NULL;
  t->n_buckets = 0;
  t->count = t->loose = 0;
  t->idle.oldest = t->idle.newest = NULL;
  t->pins.oldest = t->pins.newest = NULL;
}

air__admit air__table_admit(air__table *t, air__breaker_rec *br,
                            uint64_t now_ms, uint64_t lease_ms,
                            uint64_t *reopen_ms, uint64_t *lease) {
  uint64_t token = t->tokens + 1;
  air__admit a = air__breaker_admit(br, now_ms, lease_ms, token, reopen_ms);
  if (a == AIR__ADMIT_PROBE) {
    t->tokens = token;
    *lease = token;
  }
  return a;
}

int air__sticky_mem_get(air__sticky_mem *s, uint64_t now_ms,
                        air__sticky_rec *out) {
  if (!s->on) return 0;
  size_t n = strlen(s->target);
  if (n >= sizeof(out->target)) return 0;
  memcpy(out->target, s->target, n + 1);
  out->age_ms = now_ms >= s->since ? now_ms - s->since : 0;
  out->used = s->used;
  if (s->used < UINT32_MAX) s->used++;
  return 1;
}

bool air__sticky_mem_set(air__sticky_mem *s, const char *target,
                         uint64_t now_ms) {
  if (target == NULL || strlen(target) >= sizeof s->target) {
    bool changed = s->on;
    s->on = false;
    return changed;
  }
  if (s->on && strcmp(s->target, target) == 0) return false;
  memcpy(s->target, target, strlen(target) + 1);
  s->on = true;
  s->since = now_ms;
  s->used = 0;
  return true;
}

air_cont_style air__style_mem_get(const air__style_mem *s, uint64_t now_ms) {
  return now_ms < s->until ? s->style : AIR_CONT_NONE;
}

void air__style_mem_set(air__style_mem *s, air_cont_style style,
                        uint64_t now_ms, uint64_t ttl_ms) {
  uint64_t until = now_ms + ttl_ms;
  s->style = style;
  s->until = style == AIR_CONT_NONE ? 0 : until < now_ms ? UINT64_MAX : until;
}
