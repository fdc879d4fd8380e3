#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"

#define CHUNK_MIN 2048u

struct air__arena_chunk {
  air__arena_chunk *next;
  size_t used;
  size_t cap;
  alignas(max_align_t) unsigned char data[];
};

void air__arena_init(air__arena *a) {
  a->head = NULL;
  a->total = 0;
}

void air__arena_cleanup(air__arena *a) {
  air__arena_chunk *c = a->head;
  while (c != NULL) {
    air__arena_chunk *next = c->next;
    free(c);
    c = next;
  }
  a->head = NULL;
  a->total = 0;
}

void *air__arena_alloc(air__arena *a, size_t n) {
  const size_t align = alignof(max_align_t);
  size_t need = (n + align - 1) & ~(align - 1);
  if (need < n) return NULL;
  air__arena_chunk *c = a->head;
  if (c == NULL || c->cap - c->used < need) {
    size_t cap = need > CHUNK_MIN ? need : CHUNK_MIN;
    c = malloc(sizeof(*c) + cap);
    if (c == NULL) return NULL;
    c->next = a->head;
    c->used = 0;
    c->cap = cap;
    a->head = c;
  }
  void *p = c->data + c->used;
  c->used += need;
  a->total += need;
  return p;
}

char *air__arena_strndup(air__arena *a, const char *s, size_t n) {
  if (s == NULL) n = 0;
  char *p = air__arena_alloc(a, n + 1);
  if (p == NULL) return NULL;
  if (n > 0) memcpy(p, s, n);
  p[n] = '\0';
  return p;
}
