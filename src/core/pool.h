/*
 * A bounded free list of same-sized blocks for one loop thread:
 * the large per-request structures (the exchange's legs, the exchange, the
 * gateway's request) are taken from it and given back instead of a calloc
 * and a free each; a calloc of a block over glibc's small-bin size also runs
 * malloc_consolidate on every request.
 *
 * A block taken is zeroed, as calloc's is, whether it is new or was given
 * back: nothing of the last request survives. At most AIR__POOL_MAX blocks
 * wait; one more is freed. Under AddressSanitizer a waiting block is
 * poisoned, so a pointer kept past the put still faults.
 *
 * A zeroed air__pool is empty and valid; a NULL pool means plain calloc and
 * free. Every block of one pool has the size given to its calls. Not
 * thread-safe: one pool per loop thread.
 */
#ifndef AIR__POOL_H
#define AIR__POOL_H

#include <stddef.h>

#include "limits.h"

typedef struct air__pool {
  void *free[AIR__POOL_MAX];
  unsigned n;
  size_t size; /* of the blocks waiting */
} air__pool;

/* A zeroed block of size bytes (from p when it has one), or NULL. */
void *air__pool_take(air__pool *p, size_t size);
/* Gives block m (of size bytes, from air__pool_take or calloc) back: kept
 * when p has room, else freed. m NULL: nothing. */
void air__pool_put(air__pool *p, void *m, size_t size);
/* Frees every waiting block; p is empty after. */
void air__pool_cleanup(air__pool *p);

#endif
