/*
 * The Redis state backend's inside (redis.h, docs/design.md §3.1), shared by
 * its two sides: redis.c, what request threads call (the ops on the mirror,
 * which never wait for Redis, and the queue they hand shared transitions
 * to), and redis_link.c, the Redis thread (the connections, the commands in
 * flight, the answers and others' changes applied to the mirror). The
 * mutex `mu` guards what both touch; the fields under "the Redis thread's
 * own" are that thread's alone.
 */
#ifndef AIR__STATE_REDIS_INT_H
#define AIR__STATE_REDIS_INT_H

#include <hiredis/async.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "limits.h"
#include "redis_lua.h"
#include "redis_url.h"
#include "state.h"
#include "table.h"

#define AIR__REDIS_MAX_ARGS 8 /* a script's ARGV */
/* The probe lease's life in Redis: renewed every third of it while the
 * probe runs (up to the engine's lease), so a holder that died frees it
 * for the other instances within this long (docs/design.md §3.1). */
#define AIR__REDIS_LEASE_PX_MS 3000u

/* b: a target's breaker; s: a route's sticky choice; c: a target's learned
 * continuation style (docs/design.md §3.5), keyed like its breaker. */
enum {
  AIR__REDIS_KIND_TARGET = 'b',
  AIR__REDIS_KIND_ROUTE = 's',
  AIR__REDIS_KIND_STYLE = 'c'
};

/* ---- the mirror ---------------------------------------------------------- */

/* A change as a message says it (redis_lua.h), waiting or being applied. */
typedef struct air__redis_change {
  bool have;
  uint64_t version;
  uint32_t n;    /* breaker: failures; sticky: used; style: the style */
  bool on;       /* breaker: open; sticky: sticky */
  uint64_t ms;   /* breaker: left open; sticky: age; style: left valid */
  uint64_t base; /* the local time the durations count from */
  char target[AIR__MAX_TARGET_BYTES];
} air__redis_change;

typedef struct air__redis_entry {
  air__table_node node; /* its key: the Redis key (or a local name) */
  bool shared;          /* has a Redis key */
  air__breaker_rec br;  /* breaker (kind b) */
  uint64_t ready;       /* a lease Redis gave us, not handed out yet */
  uint64_t ready_until;
  bool asking;            /* a lease request is in flight */
  bool own_lease;         /* br.lease is ours in Redis (not a local one) */
  uint64_t renewed;       /* own lease: last renewal (this thread's clock) */
  uint64_t renew_until;   /* own lease: the engine's lease ends (same clock) */
  air__sticky_mem st;     /* sticky (kind s) */
  air__style_mem style;   /* style (kind c): the style learned (local clock) */
  uint64_t version;       /* the newest version applied */
  uint32_t pending;       /* our commands in flight on this key */
  bool dirty;             /* changed without reaching Redis */
  air__redis_change wait; /* the newest of others' changes while pending */
  struct air__redis_entry *dirty_next; /* dirty: the next in redis.dirty */
  struct air__redis_entry *lease_prev,
      *lease_next; /* own_lease: in redis.leases */
} air__redis_entry;

/* ---- commands ------------------------------------------------------------ */

typedef enum air__redis_op {
  AIR__REDIS_OP_AUTH,
  AIR__REDIS_OP_SELECT,
  AIR__REDIS_OP_LOAD,
  AIR__REDIS_OP_PING, /* the handshake */
  AIR__REDIS_OP_BREAKER,
  AIR__REDIS_OP_LEASE,
  AIR__REDIS_OP_STICKY,
  AIR__REDIS_OP_STYLE, /* scripts on an entry */
  AIR__REDIS_OP_SCAN,
  AIR__REDIS_OP_READ, /* the full sync */
} air__redis_op;

typedef struct air__redis_cmd {
  struct air__redis_cmd *next;
  air__redis_op op;
  int script;          /* AIR__REDIS_OP_LOAD: which; scripts: AIR__LUA_* */
  air__redis_entry *e; /* scripts: the entry (lives as long as the state) */
  uint64_t op_now;     /* the caller's now when queued */
  uint64_t token;      /* AIR__REDIS_OP_LEASE 'a': the token asked for */
  uint64_t lease_ms;
  bool eval;   /* sent as EVAL (after NOSCRIPT, or no SHA yet) */
  bool counts; /* counted in e->pending */
  uint64_t sent_at;
  unsigned gen; /* the link it was sent on */
  int argc;
  char a[AIR__REDIS_MAX_ARGS][AIR__MAX_TARGET_BYTES]; /* the script's ARGV */
  char keys[2][AIR__MAX_REDIS_KEY_BYTES];
  int nkeys;
} air__redis_cmd;

typedef struct air__redis_conn {
  redisAsyncContext *ac;
  bool ready;
} air__redis_conn;

typedef struct air__redis_provider_hash {
  char name[AIR__MAX_NAME_BYTES];
  char hash[17];
} air__redis_provider_hash;

typedef struct air__redis_name_hash {
  char *name;
  char hash[17];
} air__redis_name_hash;

typedef struct air__redis {
  pthread_mutex_t mu;
  pthread_cond_t cv;        /* answers arrived (air__state_redis_sync) */
  air__table table;         /* the mirror; shared entries are pinned in it */
  size_t n_leases;          /* entries whose own_lease is set */
  air__redis_entry *leases; /* those entries (on_tick renews their leases) */
  air__redis_entry *dirty;  /* the dirty entries (n_dirty), newest first */
  char instance[17];
  /* What is shared and under which key (from the config). */
  char prefix[AIR__MAX_REDIS_PREFIX_BYTES + 1];
  char channel[AIR__MAX_REDIS_PREFIX_BYTES + 16];
  air__redis_provider_hash *providers;
  size_t n_providers;
  air__redis_name_hash *targets; /* sorted: targets some route lists */
  size_t n_targets;
  air__redis_name_hash
      *routes; /* sorted: route name -> hash of its target list */
  size_t n_routes;
  /* The link. */
  air__redis_url url;
  char *password;
  uint64_t connect_timeout_ms, command_timeout_ms;
  air__redis_cmd *queue, *queue_tail; /* waiting to be sent (under mu) */
  size_t queued;                      /* waiting + in flight */
  uint64_t sent, answered;            /* script commands, for sync */
  bool up; /* link ready and synced once (under mu) */
  bool stopping;
  size_t n_dirty;
  /* Stats (under mu). */
  uint64_t reconnects, command_errors, dropped, applied, links;
  uint64_t sync_done_at;
  bool synced;
  /* The Redis thread's own (no lock). */
  pthread_t thread;
  uv_loop_t loop;
  uv_async_t wake;
  uv_timer_t tick, retry, deadline, kick;
  uv_getaddrinfo_t gai;
  air__redis_conn cmd, sub;
  unsigned gen;     /* bumped on every drop */
  unsigned attempt; /* links failed in a row */
  bool gai_busy;
  bool linking, want_down;
  air__redis_cmd *inflight, *inflight_tail;
  uint64_t scan_reads; /* reads of this scan unanswered */
  bool scanning;
  bool scan_more;
  char cursor[32];
  char sha[AIR__LUA_COUNT][41];
  uint64_t rng;
} air__redis;

/* This thread's monotonic clock in ms. */
static inline uint64_t air__redis_mono_ms(void) {
  return uv_hrtime() / 1000000u;
}

/* The next of r's xorshift64 numbers (r->rng never 0). */
static inline uint64_t air__redis_rand(air__redis *r) {
  r->rng ^= r->rng << 13;
  r->rng ^= r->rng >> 7;
  r->rng ^= r->rng << 17;
  return r->rng;
}

/* ---- redis.c: the mirror and the queue (any thread, caller holds mu) ----- */

/*
 * Finds or (when create) makes the entry of key; NULL over the cap. A
 * shared entry is pinned (table.h): commands in flight point at it, and
 * its keys are the config's (or another instance's), never a caller's
 * choice; a local one may be evicted once idle.
 */
air__redis_entry *air__redis_lookup_key(air__redis *r, char kind,
                                        const char *key, size_t n, bool shared,
                                        bool create);

/* e changed without reaching Redis: merged when the link can take it. */
void air__redis_mark_dirty(air__redis *r, air__redis_entry *e);
/* The newest dirty entry, no longer dirty; NULL when none is. */
air__redis_entry *air__redis_take_dirty(air__redis *r);
/* e's lease is no longer ours in Redis. */
void air__redis_drop_own(air__redis *r, air__redis_entry *e);

/* A command of kind o (script: which one; e: the entry it is about, or
 * NULL) made at now; NULL when memory is short. */
air__redis_cmd *air__redis_cmd_new(air__redis_op o, int script,
                                   air__redis_entry *e, uint64_t now);
/* Appends an argument (past AIR__REDIS_MAX_ARGS: dropped). */
void air__redis_cmd_str(air__redis_cmd *c, const char *s);
void air__redis_cmd_num(air__redis_cmd *c, long long v);
/* Frees c; an AUTH command's password is wiped first. */
void air__redis_cmd_free(air__redis_cmd *c);

/*
 * Queues c (taking it) when the link is up and the queue has room; else
 * drops it (counted) and marks its entry dirty, to be merged when the link
 * is back.
 */
void air__redis_enqueue(air__redis *r, air__redis_cmd *c);

/* The lease script on e: op 'a' asks for lease token for px ms, 'x'
 * renews it, 'd' gives it back. */
air__redis_cmd *air__redis_lease_cmd(air__redis *r, air__redis_entry *e,
                                     char op, uint64_t token, uint64_t px,
                                     uint64_t now);

/* Queues e's record through the merge script of its kind (the stricter
 * state wins). */
void air__redis_push_merge(air__redis *r, air__redis_entry *e, uint64_t now);

/* ---- redis_link.c: the Redis thread -------------------------------------- */

/*
 * Starts the Redis thread of r (its mutex and condition made): its loop,
 * timers and the first link, which connects in the background. 0, or
 * AIR_EIO with no thread left and the loop closed.
 */
int air__redis_link_start(air__redis *r);

/* Stops the Redis thread (the link dropped, every handle closed), waits
 * for it and closes its loop; nothing when it never started. */
void air__redis_link_stop(air__redis *r);

#endif
