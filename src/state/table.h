/*
 * What both state backends keep in memory (local.c, and redis.c's mirror):
 * a chained hash table of records keyed by (kind, key), the probe lease
 * tokens they make, and a route's sticky window. The decisions stay core's
 * (breaker.h); these are the bookkeeping around them, the same in both.
 * Nothing here locks: each backend calls it under its own mutex.
 */
#ifndef AIR__STATE_TABLE_H
#define AIR__STATE_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state.h"

#define AIR__STATE_BUCKETS 1024u

/* The head of every record: a backend's record struct starts with it. */
typedef struct air__table_node {
  struct air__table_node *next;
  uint64_t hash;
  const char *key; /* len bytes and a NUL, in the record's allocation */
  size_t len;
  char kind;
} air__table_node;

typedef struct air__table {
  air__table_node *buckets[AIR__STATE_BUCKETS];
  size_t count;    /* records, at most AIR__MAX_STATE_TARGETS */
  uint64_t tokens; /* the last probe lease token made */
} air__table;

/*
 * The record of (kind, key[0..n)), or NULL when there is none and create
 * is false. With create, a missing one is made: size bytes zeroed (the
 * record struct, an air__table_node first) followed by the key; NULL when
 * the table holds AIR__MAX_STATE_TARGETS records or memory is short.
 */
void *air__table_get(air__table *t, char kind, const char *key, size_t n,
                     bool create, size_t size);

/*
 * The record after rec in the table's order, the first one when rec is
 * NULL; NULL past the last. Records made meanwhile may or may not be seen.
 */
void *air__table_next(const air__table *t, const void *rec);

/* Frees every record; the table is empty afterwards. */
void air__table_cleanup(air__table *t);

/*
 * air__breaker_admit on br with the table's next token: on AIR__ADMIT_PROBE
 * the token is taken and *lease set to it.
 */
air__admit air__table_admit(air__table *t, air__breaker_rec *br,
                            uint64_t now_ms, uint64_t lease_ms,
                            uint64_t *reopen_ms, uint64_t *lease);

/* A route's sticky window. Zero is not sticky. */
typedef struct air__sticky_mem {
  bool on;
  uint32_t used;  /* requests started since it became sticky */
  uint64_t since; /* when it became sticky (the caller's clock) */
  char target[AIR__MAX_TARGET_BYTES];
} air__sticky_mem;

/*
 * sticky_get (state.h) on s: 1 and *out filled when sticky, counting this
 * request (saturating); 0 otherwise.
 */
int air__sticky_mem_get(air__sticky_mem *s, uint64_t now_ms,
                        air__sticky_rec *out);

/*
 * sticky_set (state.h) on s: target NULL ends the window, the same target
 * keeps it, another one starts a new window at now_ms (a name that does not
 * fit ends it: not sticky rather than wrong). true when s changed.
 */
bool air__sticky_mem_set(air__sticky_mem *s, const char *target,
                         uint64_t now_ms);

/* A target's learned continuation style (DESIGN.md 3.5): valid until
 * `until` on the caller's clock. */
typedef struct air__style_mem {
  air_cont_style style;
  uint64_t until;
} air__style_mem;

/* style_get (state.h) on s: the style while it is valid at now_ms, else
 * NONE. */
air_cont_style air__style_mem_get(const air__style_mem *s, uint64_t now_ms);

/* style_set (state.h) on s: NONE forgets; another style is kept for ttl_ms
 * from now_ms (saturating). */
void air__style_mem_set(air__style_mem *s, air_cont_style style,
                        uint64_t now_ms, uint64_t ttl_ms);

#endif
