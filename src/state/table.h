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

/* Chains a table starts with; they double whenever the records outnumber
 * them twice, so a lookup walks a short chain however full the table is. */
#define AIR__STATE_BUCKETS 1024u
#define AIR__STATE_MAX_BUCKETS (1u << 20)
/* Records an op looks at for eviction (air__table_at): at most this many
 * per op, so eviction costs O(1) per request and never walks the table. */
#define AIR__STATE_EVICT_STEP 2

/* The head of every record: a backend's record struct starts with it. */
typedef struct air__table_node {
  struct air__table_node *next;  /* the hash chain */
  struct air__table_node *older; /* its list: the idle order or the pinned */
  struct air__table_node *newer;
  uint64_t hash;
  const char *key; /* len bytes and a NUL, in the record's allocation */
  size_t len;
  uint64_t touched; /* the table's clock when an op last used it */
  char kind;
  bool pinned; /* never evicted and not counted against the cap */
} air__table_node;

/*
 * Whether a record that has not been used for AIR__STATE_IDLE_MS holds
 * nothing a decision at now_ms still needs (the backend's rule: no open
 * breaker, no lease, nothing in flight), so that it may be freed. Called
 * with the backend's lock held.
 */
typedef bool (*air__table_idle_fn)(const air__table_node *rec, uint64_t now_ms,
                                   void *data);
/* Frees what the backend hangs off a record about to be freed (not the
 * record itself). */
typedef void (*air__table_drop_fn)(air__table_node *rec, void *data);

/* A list of records, oldest first. */
typedef struct air__table_list {
  air__table_node *oldest, *newest;
} air__table_list;

/*
 * Records come in two sorts. Pinned ones (a configured target or route,
 * air__table_pin) are bounded by the config and live until unpinned. The
 * others (caller-chosen names: a direct `provider/model`) are at most
 * AIR__MAX_STATE_TARGETS, kept in the order they were last used, and one
 * unused for AIR__STATE_IDLE_MS is freed when the backend's idle rule
 * agrees: each op looks at the AIR__STATE_EVICT_STEP least recently used
 * (air__table_at); one the rule keeps counts as used then.
 */
typedef struct air__table {
  air__table_node **buckets;
  size_t n_buckets;     /* a power of two; 0 before the first record */
  size_t count;         /* records */
  size_t loose;         /* records not pinned: at most AIR__MAX_STATE_TARGETS */
  air__table_list idle; /* records not pinned, least recently used first */
  air__table_list pins; /* pinned records */
  uint64_t now;         /* the latest now_ms an op gave (air__table_at) */
  uint64_t evicted;     /* records freed as idle */
  uint64_t tokens;      /* the last probe lease token made */
  air__table_idle_fn idle_fn; /* NULL: any idle record may go */
  air__table_drop_fn drop_fn; /* NULL: nothing hangs off a record */
  void *fn_data;
} air__table;

/*
 * An op at now_ms begins: the table's clock moves on to now_ms (never
 * back), and up to AIR__STATE_EVICT_STEP records unused for
 * AIR__STATE_IDLE_MS are freed or, when the idle rule keeps them, counted
 * as used now. A record pointer taken before this call may be stale.
 */
void air__table_at(air__table *t, uint64_t now_ms);

/*
 * The record of (kind, key[0..n)), or NULL when there is none and create
 * is false. With create, a missing one is made, not pinned: size bytes
 * zeroed (the record struct, an air__table_node first) followed by the
 * key; NULL when AIR__MAX_STATE_TARGETS records are not pinned or memory
 * is short. A record found or made counts as used at the table's clock.
 */
void *air__table_get(air__table *t, char kind, const char *key, size_t n,
                     bool create, size_t size);

/* The record of (kind, key[0..n)), found or made (past the cap: the config
 * bounds pinned records) and pinned; NULL only when memory is short. */
void *air__table_get_pinned(air__table *t, char kind, const char *key, size_t n,
                            size_t size);

/*
 * Pins rec (pinned true: never evicted, out of the cap) or unpins it (it
 * counts as used now, and may go once idle). Unpinning may leave more
 * than AIR__MAX_STATE_TARGETS records loose until eviction catches up.
 */
void air__table_pin(air__table *t, void *rec, bool pinned);

/*
 * The record after rec in the table's order, the first one when rec is
 * NULL; NULL past the last. No record may be made or freed meanwhile.
 */
void *air__table_next(const air__table *t, const void *rec);

/* The pinned record after rec (the first when rec is NULL), or NULL: a
 * walk over the pinned records only. The same rule as air__table_next. */
void *air__table_next_pinned(const air__table *t, const void *rec);

/* Frees every record (the drop hook first) and the chains; the table is
 * empty afterwards. */
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

/* A target's learned continuation style (docs/design.md §3.5): valid until
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
