/*
 * A per-request bump arena (docs/style.md §4): many small allocations, one free
 * at request end. Not thread-safe; owned by one request.
 */
#ifndef AIR__ARENA_H
#define AIR__ARENA_H

#include <stddef.h>

typedef struct air__arena_chunk air__arena_chunk;

typedef struct air__arena {
  air__arena_chunk *head;
  size_t total; /* bytes handed out, for limits and metrics */
} air__arena;

void air__arena_init(air__arena *a);
/* Frees every chunk; the arena may be used again afterwards. */
void air__arena_cleanup(air__arena *a);
/* n bytes aligned for any type, or NULL when out of memory. */
void *air__arena_alloc(air__arena *a, size_t n);
/* A NUL-terminated copy of the first n bytes of s (s may be NULL: ""). */
char *air__arena_strndup(air__arena *a, const char *s, size_t n);

#endif
