/*
 * The records both state backends keep (table.h): FNV-1a over the key,
 * seeded with the kind, into a fixed number of chains.
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

void *air__table_get(air__table *t, char kind, const char *key, size_t n,
                     bool create, size_t size) {
  uint64_t h = hash_key(kind, key, n);
  air__table_node **slot = &t->buckets[h % AIR__STATE_BUCKETS];
  for (air__table_node *e = *slot; e != NULL; e = e->next)
    if (e->hash == h && e->kind == kind && e->len == n &&
        memcmp(e->key, key, n) == 0)
      return e;
  if (!create || t->count >= AIR__MAX_STATE_TARGETS) return NULL;
  char *mem = calloc(1, size + n + 1);
  if (mem == NULL) return NULL;
  air__table_node *e = (air__table_node *)mem;
  memcpy(mem + size, key, n);
  e->key = mem + size;
  e->len = n;
  e->hash = h;
  e->kind = kind;
  e->next = *slot;
  *slot = e;
  t->count++;
  return e;
}

void *air__table_next(const air__table *t, const void *rec) {
  const air__table_node *e = rec;
  size_t b = 0;
  if (e != NULL) {
    if (e->next != NULL) return e->next;
    b = (size_t)(e->hash % AIR__STATE_BUCKETS) + 1;
  }
  for (; b < AIR__STATE_BUCKETS; b++)
    if (t->buckets[b] != NULL) return t->buckets[b];
  return NULL;
}

void air__table_cleanup(air__table *t) {
  for (size_t i = 0; i < AIR__STATE_BUCKETS; i++) {
    air__table_node *e = t->buckets[i];
    while (e != NULL) {
      air__table_node *next = e->next;
      free(e);
      e = next;
    }
    t->buckets[i] = NULL;
  }
  t->count = 0;
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
