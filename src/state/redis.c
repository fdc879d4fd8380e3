/*
 * The Redis state backend (redis.h, docs/design.md §3.1).
 *
 * Reads never wait for Redis: every op is decided on an in-memory mirror
 * under one mutex, exactly as the local backend decides (core's breaker.h),
 * and a shared key's transition is then queued for the Redis thread, which
 * runs it as a Lua script (redis_lua.h) and applies the script's answer and
 * every change other instances publish to the mirror, newer versions only.
 *
 * One Redis thread per state (one per process) with its own uv loop and
 * two hiredis 0.14 async connections on it: `cmd` (scripts, SCAN) and `sub`
 * (SUBSCRIBE to PREFIX "changes"). hiredis 0.14 has no timeouts and
 * resolves no names asynchronously, so the thread resolves with
 * uv_getaddrinfo, connects the address, and keeps its own timers: the
 * whole handshake (connect, AUTH, SELECT, SCRIPT LOAD, PING, SUBSCRIBE)
 * within connect_timeout_ms, each command answered within
 * command_timeout_ms; a miss drops both connections. A link that drops is
 * made again after a jittered backoff capped at 500 ms. On every link:
 * subscribe first, push what changed locally meanwhile through the merge
 * scripts (the stricter state wins), then SCAN the prefix and apply newer
 * versions.
 *
 * Times: an op's now_ms is the caller's monotonic clock; a change from
 * Redis carries durations, converted at the moment they are applied (the
 * op's now for the answer to our own script, this thread's monotonic clock
 * for a change published by another instance). The answer to our own
 * script only replaces the mirror's record when the decision differs (the
 * count or the open bit: another instance wrote in between); the same
 * decision keeps the times the op computed. While a key has our commands
 * in flight, others' changes to it wait (the newest kept) until the last
 * answer, so the mirror never steps back to a state older than our own.
 *
 * Probe lease: half-open on the mirror with the link up means "skip the
 * target and ask Redis for the lease" (SET NX PX); when it is ours, the
 * next admit on this instance is the probe. With the link down, the
 * instance decides alone (local lease). A target that no route lists, and
 * a route the backend does not know, stay local (no key).
 */
#include "redis.h"

#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "error.h"
#include "limits.h"
#include "redis_lua.h"
#include "redis_url.h"
#include "state.h"
#include "table.h"

#define BACKOFF_MAX_MS 500u /* docs/design.md §3.1: reconnect backoff cap */
#define BACKOFF_BASE_MS 25u
#define TICK_MS 20u /* command timeouts, dirty pushes */
#define STICKY_TTL_MS                                     \
  86400000ull /* a sticky record's life past its last use \
               */
#define MAX_ARGS 8
/* The probe lease's life in Redis: renewed every third of it while the
 * probe runs (up to the engine's lease), so a holder that died frees it
 * for the other instances within this long (docs/design.md §3.1). */
#define LEASE_PX_MS 3000u

/* b: a target's breaker; s: a route's sticky choice; c: a target's learned
 * continuation style (docs/design.md §3.5), keyed like its breaker. */
enum { KIND_TARGET = 'b', KIND_ROUTE = 's', KIND_STYLE = 'c' };

/* ---- the mirror -----------------------------------------------------------
 */

/* A change as a message says it (redis_lua.h), waiting or being applied. */
typedef struct change {
  bool have;
  uint64_t version;
  uint32_t n;    /* breaker: failures; sticky: used; style: the style */
  bool on;       /* breaker: open; sticky: sticky */
  uint64_t ms;   /* breaker: left open; sticky: age; style: left valid */
  uint64_t base; /* the local time the durations count from */
  char target[AIR__MAX_TARGET_BYTES];
} change;

typedef struct entry {
  air__table_node node; /* its key: the Redis key (or a local name) */
  bool shared;          /* has a Redis key */
  air__breaker_rec br;  /* breaker (kind b) */
  uint64_t ready;       /* a lease Redis gave us, not handed out yet */
  uint64_t ready_until;
  bool asking;          /* a lease request is in flight */
  bool own_lease;       /* br.lease is ours in Redis (not a local one) */
  uint64_t renewed;     /* own lease: last renewal (this thread's clock) */
  uint64_t renew_until; /* own lease: the engine's lease ends (same clock) */
  air__sticky_mem st;   /* sticky (kind s) */
  air__style_mem style; /* style (kind c): the style learned (local clock) */
  uint64_t version;     /* the newest version applied */
  uint32_t pending;     /* our commands in flight on this key */
  bool dirty;           /* changed without reaching Redis */
  change wait;          /* the newest of others' changes while pending */
  struct entry *dirty_next;              /* dirty: the next in redis.dirty */
  struct entry *lease_prev, *lease_next; /* own_lease: in redis.leases */
} entry;

/* ---- commands ---------------------------------------------------------------
 */

typedef enum op_kind {
  OP_AUTH,
  OP_SELECT,
  OP_LOAD,
  OP_PING, /* the handshake */
  OP_BREAKER,
  OP_LEASE,
  OP_STICKY,
  OP_STYLE, /* scripts on an entry */
  OP_SCAN,
  OP_READ, /* the full sync */
} op_kind;

typedef struct cmd {
  struct cmd *next;
  op_kind op;
  int script;      /* OP_LOAD: which; scripts: AIR__LUA_* */
  entry *e;        /* scripts: the entry (lives as long as the state) */
  uint64_t op_now; /* the caller's now when queued */
  uint64_t token;  /* OP_LEASE 'a': the token asked for */
  uint64_t lease_ms;
  bool eval;   /* sent as EVAL (after NOSCRIPT, or no SHA yet) */
  bool counts; /* counted in e->pending */
  uint64_t sent_at;
  unsigned gen; /* the link it was sent on */
  int argc;
  char a[MAX_ARGS][AIR__MAX_TARGET_BYTES]; /* the script's ARGV */
  char keys[2][AIR__MAX_REDIS_KEY_BYTES];
  int nkeys;
} cmd;

typedef struct conn {
  redisAsyncContext *ac;
  bool ready;
} conn;

typedef struct provider_hash {
  char name[AIR__MAX_NAME_BYTES];
  char hash[17];
} provider_hash;

typedef struct name_hash {
  char *name;
  char hash[17];
} name_hash;

typedef struct redis {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* answers arrived (air__state_redis_sync) */
  air__table table;  /* the mirror; shared entries are pinned in it */
  size_t n_leases;   /* entries whose own_lease is set */
  entry *leases;     /* those entries (on_tick renews their leases) */
  entry *dirty;      /* the dirty entries (n_dirty), newest first */
  char instance[17];
  /* What is shared and under which key (from the config). */
  char prefix[AIR__MAX_REDIS_PREFIX_BYTES + 1];
  char channel[AIR__MAX_REDIS_PREFIX_BYTES + 16];
  provider_hash *providers;
  size_t n_providers;
  name_hash *targets; /* sorted: targets some route lists */
  size_t n_targets;
  name_hash *routes; /* sorted: route name -> hash of its target list */
  size_t n_routes;
  /* The link. */
  air__redis_url url;
  char *password;
  uint64_t connect_timeout_ms, command_timeout_ms;
  cmd *queue, *queue_tail; /* waiting to be sent (under mu) */
  size_t queued;           /* waiting + in flight */
  uint64_t sent, answered; /* script commands, for sync */
  bool up;                 /* link ready and synced once (under mu) */
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
  conn cmd, sub;
  unsigned gen;     /* bumped on every drop */
  unsigned attempt; /* links failed in a row */
  bool gai_busy;
  bool linking, want_down;
  cmd *inflight, *inflight_tail;
  uint64_t scan_reads; /* reads of this scan unanswered */
  bool scanning;
  bool scan_more;
  char cursor[32];
  char sha[AIR__LUA_COUNT][41];
  uint64_t rng;
} redis;

static uint64_t mono_ms(void) {
  return uv_hrtime() / 1000000u;
}

static uint64_t fnv(const char *s, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 1099511628211ull;
  }
  return h;
}

static uint64_t next_rand(redis *r) {
  r->rng ^= r->rng << 13;
  r->rng ^= r->rng >> 7;
  r->rng ^= r->rng << 17;
  return r->rng;
}

/* ---- keys -------------------------------------------------------------------
 */

static int cmp_name(const void *a, const void *b) {
  return strcmp(((const name_hash *)a)->name, ((const name_hash *)b)->name);
}

static const name_hash *find_name(const name_hash *v, size_t n,
                                  const char *name) {
  name_hash k = {.name = (char *)(uintptr_t)name};
  return n ? bsearch(&k, v, n, sizeof(*v), cmp_name) : NULL;
}

/*
 * The key of target (kind b) or route (kind s) into out; *shared is false
 * for a name that stays local (then out is a local name, never sent).
 * Caller holds mu. Returns the key's length, 0 when it does not fit.
 */
static size_t key_of(const redis *r, char kind, const char *name, char *out,
                     size_t sz, bool *shared) {
  int n = 0;
  *shared = false;
  if (kind == KIND_TARGET || kind == KIND_STYLE) {
    const char *slash = strchr(name, '/');
    const name_hash *t = find_name(r->targets, r->n_targets, name);
    for (size_t i = 0; t && slash && i < r->n_providers; i++) {
      const provider_hash *p = &r->providers[i];
      if (strlen(p->name) == (size_t)(slash - name) &&
          memcmp(p->name, name, (size_t)(slash - name)) == 0) {
        n = snprintf(out, sz, "%s%c:%s:%s", r->prefix, kind, name, p->hash);
        *shared = true;
        break;
      }
    }
  } else {
    const name_hash *rt = find_name(r->routes, r->n_routes, name);
    if (rt) {
      n = snprintf(out, sz, "%ss:%s:%s", r->prefix, name, rt->hash);
      *shared = true;
    }
  }
  if (!*shared) n = snprintf(out, sz, "%c:%s", kind, name);
  return n > 0 && (size_t)n < sz ? (size_t)n : 0;
}

/*
 * Finds or (when create) makes the entry of key; NULL over the cap. A
 * shared entry is pinned (table.h): commands in flight point at it, and
 * its keys are the config's (or another instance's), never a caller's
 * choice; a local one may be evicted once idle (entry_idle).
 */
static entry *lookup_key(redis *r, char kind, const char *key, size_t n,
                         bool shared, bool create) {
  size_t before = r->table.count;
  entry *e =
      shared && create
          ? air__table_get_pinned(&r->table, kind, key, n, sizeof(entry))
          : air__table_get(&r->table, kind, key, n, create, sizeof(entry));
  if (e != NULL && r->table.count != before) e->shared = shared;
  return e;
}

/* The idle rule of the mirror (table.h): only a local entry goes, with
 * nothing open, leased, learned, sticky or on its way to Redis. */
static bool entry_idle(const air__table_node *rec, uint64_t now_ms,
                       void *data) {
  const entry *e = (const entry *)rec;
  (void)data;
  return !e->shared && !e->br.open && e->br.lease == 0 && !e->st.on &&
         air__style_mem_get(&e->style, now_ms) == AIR_CONT_NONE &&
         e->pending == 0 && !e->dirty && !e->own_lease && !e->asking &&
         e->ready == 0;
}

/* lookup after the op's clock moved the table on (air__table_at). */
static entry *lookup_at(redis *r, char kind, const char *name, bool create,
                        uint64_t now_ms) {
  air__table_at(&r->table, now_ms);
  char key[AIR__MAX_REDIS_KEY_BYTES];
  bool shared;
  size_t n = key_of(r, kind, name, key, sizeof key, &shared);
  if (n == 0) return NULL;
  return lookup_key(r, kind, key, n, shared, create);
}

static entry *lookup(redis *r, char kind, const char *name, bool create) {
  char key[AIR__MAX_REDIS_KEY_BYTES];
  bool shared;
  size_t n = key_of(r, kind, name, key, sizeof key, &shared);
  if (n == 0) return NULL;
  return lookup_key(r, kind, key, n, shared, create);
}

/* ---- the queue (any thread, under mu)
 * ----------------------------------------- */

static void mark_dirty(redis *r, entry *e) {
  if (!e->dirty) {
    e->dirty = true;
    e->dirty_next = r->dirty;
    r->dirty = e;
    r->n_dirty++;
  }
}

/* The newest dirty entry, no longer dirty; NULL when none is. */
static entry *take_dirty(redis *r) {
  entry *e = r->dirty;
  if (e == NULL) return NULL;
  r->dirty = e->dirty_next;
  e->dirty_next = NULL;
  e->dirty = false;
  r->n_dirty--;
  return e;
}

/* Frees c; an AUTH command's password is wiped first. */
static void cmd_free(cmd *c) {
  if (c == NULL) return;
  if (c->op == OP_AUTH) {
    volatile char *p = (volatile char *)c->a;
    for (size_t i = 0; i < sizeof c->a; i++) p[i] = 0;
  }
  free(c);
}

/* e's lease is no longer ours in Redis. Caller holds mu. */
static void drop_own(redis *r, entry *e) {
  if (!e->own_lease) return;
  if (r->n_leases > 0) r->n_leases--;
  if (e->lease_prev != NULL)
    e->lease_prev->lease_next = e->lease_next;
  else
    r->leases = e->lease_next;
  if (e->lease_next != NULL) e->lease_next->lease_prev = e->lease_prev;
  e->lease_prev = e->lease_next = NULL;
  e->own_lease = false;
}

/* e's lease is ours in Redis (renewed by on_tick). Caller holds mu. */
static void take_own(redis *r, entry *e) {
  if (e->own_lease) return;
  e->own_lease = true;
  e->lease_prev = NULL;
  e->lease_next = r->leases;
  if (r->leases != NULL) r->leases->lease_prev = e;
  r->leases = e;
  r->n_leases++;
}

static cmd *cmd_new(op_kind o, int script, entry *e, uint64_t now) {
  cmd *c = calloc(1, sizeof(*c));
  if (c == NULL) return NULL;
  c->op = o;
  c->script = script;
  c->e = e;
  c->op_now = now;
  if (e != NULL) {
    snprintf(c->keys[0], sizeof c->keys[0], "%.*s", (int)e->node.len,
             e->node.key);
    c->nkeys = 1;
  }
  return c;
}

static void cmd_str(cmd *c, const char *s) {
  if (c->argc < MAX_ARGS) snprintf(c->a[c->argc++], sizeof c->a[0], "%s", s);
}

static void cmd_num(cmd *c, long long v) {
  if (c->argc < MAX_ARGS) snprintf(c->a[c->argc++], sizeof c->a[0], "%lld", v);
}

/* The lease key of a breaker key: "l" in place of its "b". */
static void lease_key(const redis *r, const entry *e, char *out, size_t sz) {
  size_t p = strlen(r->prefix);
  snprintf(out, sz, "%sl%.*s", r->prefix, (int)(e->node.len - p - 1),
           e->node.key + p + 1);
}

static void lease_value(const redis *r, uint64_t token, char *out, size_t sz) {
  snprintf(out, sz, "%s:%llu", r->instance, (unsigned long long)token);
}

/*
 * Queues c (taking it) when the link is up and the queue has room; else
 * drops it (counted) and marks its entry dirty, to be merged when the link
 * is back. Caller holds mu.
 */
static void enqueue(redis *r, cmd *c) {
  if (c == NULL || !r->up || r->queued >= AIR__MAX_REDIS_QUEUE) {
    r->dropped++;
    if (c != NULL && c->e != NULL && c->op != OP_LEASE) mark_dirty(r, c->e);
    if (c != NULL && c->e != NULL && c->op == OP_LEASE) c->e->asking = false;
    cmd_free(c);
    return;
  }
  if (c->e != NULL) {
    c->e->pending++;
    c->counts = true;
    r->sent++;
  }
  r->queued++;
  if (r->queue_tail)
    r->queue_tail->next = c;
  else
    r->queue = c;
  r->queue_tail = c;
  uv_async_send(&r->wake);
}

static cmd *breaker_cmd(redis *r, entry *e, char op, uint64_t n1, long long n2,
                        uint64_t lease, uint64_t now) {
  cmd *c = cmd_new(OP_BREAKER, AIR__LUA_BREAKER, e, now);
  if (c == NULL) return NULL;
  char lv[64] = "";
  lease_key(r, e, c->keys[1], sizeof c->keys[1]);
  c->nkeys = 2;
  if (lease != 0) lease_value(r, lease, lv, sizeof lv);
  char o[2] = {op, 0};
  cmd_str(c, o);
  cmd_num(c, (long long)(n1));
  cmd_num(c, (long long)((unsigned long long)n2));
  cmd_str(c, lv);
  cmd_str(c, r->channel);
  cmd_str(c, r->instance);
  return c;
}

static cmd *lease_cmd(redis *r, entry *e, char op, uint64_t token, uint64_t px,
                      uint64_t now) {
  cmd *c = cmd_new(OP_LEASE, AIR__LUA_LEASE, e, now);
  if (c == NULL) return NULL;
  char lv[64];
  lease_key(r, e, c->keys[0], sizeof c->keys[0]);
  lease_value(r, token, lv, sizeof lv);
  char o[2] = {op, 0};
  cmd_str(c, o);
  cmd_str(c, lv);
  cmd_num(c, (long long)(px ? px : 1));
  cmd_str(c, r->instance);
  c->token = token;
  c->lease_ms = px;
  return c;
}

static cmd *sticky_cmd(redis *r, entry *e, const char *op, const char *target,
                       uint64_t used, uint64_t age, uint64_t now) {
  cmd *c = cmd_new(OP_STICKY, AIR__LUA_STICKY, e, now);
  if (c == NULL) return NULL;
  cmd_str(c, op);
  cmd_str(c, target ? target : "");
  cmd_str(c, r->channel);
  cmd_str(c, r->instance);
  cmd_num(c, (long long)(STICKY_TTL_MS));
  cmd_num(c, (long long)(used));
  cmd_num(c, (long long)(age));
  return c;
}

static cmd *style_cmd(redis *r, entry *e, const char *op, air_cont_style style,
                      uint64_t ttl_ms, uint64_t now) {
  cmd *c = cmd_new(OP_STYLE, AIR__LUA_STYLE, e, now);
  if (c == NULL) return NULL;
  cmd_str(c, op);
  cmd_num(c, (long long)style);
  cmd_num(c, (long long)ttl_ms);
  cmd_str(c, r->channel);
  cmd_str(c, r->instance);
  return c;
}

/* The ms left of an open record at now (for a merge), -1 when closed. */
static long long left_open(const entry *e, uint64_t now) {
  if (!e->br.open) return -1;
  return e->br.open_until > now ? (long long)(e->br.open_until - now) : 0;
}

/* Queues e's record through the merge script of its kind (the stricter
 * state wins). Caller holds mu. */
static void push_merge(redis *r, entry *e, uint64_t now) {
  if (e->node.kind == KIND_TARGET)
    enqueue(r,
            breaker_cmd(r, e, 'm', e->br.failures, left_open(e, now), 0, now));
  else if (e->node.kind == KIND_STYLE) {
    if (air__style_mem_get(&e->style, now) != AIR_CONT_NONE)
      enqueue(r,
              style_cmd(r, e, "m", e->style.style, e->style.until - now, now));
  } else if (e->st.on)
    enqueue(r, sticky_cmd(r, e, "m", e->st.target, e->st.used,
                          now > e->st.since ? now - e->st.since : 0, now));
}

/* ---- the ops (worker threads)
 * ------------------------------------------------ */

static air__admit redis_try_probe(void *impl, const char *target,
                                  uint64_t lease_ms, uint64_t now_ms,
                                  uint64_t *reopen_ms, uint64_t *lease) {
  redis *r = impl;
  air__admit a = AIR__ADMIT_YES;
  pthread_mutex_lock(&r->mu);
  entry *e = lookup_at(r, KIND_TARGET, target, false, now_ms);
  if (e == NULL) goto out;
  air_breaker_mode m = air__breaker_mode(&e->br, now_ms);
  if (m != AIR_BREAKER_HALF_OPEN && e->ready != 0) {
    /* A lease we got is no longer needed. */
    enqueue(r, lease_cmd(r, e, 'd', e->ready, 0, now_ms));
    e->ready = 0;
  }
  if (m != AIR_BREAKER_HALF_OPEN || !e->shared || !r->up) {
    a = air__table_admit(&r->table, &e->br, now_ms, lease_ms, reopen_ms, lease);
    if (a == AIR__ADMIT_PROBE) drop_own(r, e);
    goto out;
  }
  a = AIR__ADMIT_NO;
  if (reopen_ms) *reopen_ms = now_ms;
  if (e->br.lease != 0 && now_ms < e->br.lease_until) goto out;
  if (e->ready != 0 && now_ms < e->ready_until) {
    e->br.lease = e->ready;
    e->br.lease_until = now_ms + lease_ms;
    take_own(r, e);
    e->renewed = mono_ms();
    e->renew_until = e->renewed + lease_ms;
    *lease = e->ready;
    e->ready = 0;
    a = AIR__ADMIT_PROBE;
    goto out;
  }
  if (!e->asking) {
    e->asking = true;
    enqueue(r,
            lease_cmd(r, e, 'a', ++r->table.tokens,
                      lease_ms < LEASE_PX_MS ? lease_ms : LEASE_PX_MS, now_ms));
  }
out:
  pthread_mutex_unlock(&r->mu);
  return a;
}

static void redis_record(void *impl, const char *target, const air__verdict *v,
                         uint64_t now_ms) {
  redis *r = impl;
  pthread_mutex_lock(&r->mu);
  entry *e = lookup_at(r, KIND_TARGET, target, v->kind == AIR__VERDICT_FAILURE,
                       now_ms);
  if (e != NULL) {
    air__breaker_rec before = e->br;
    bool own = v->lease != 0 && v->lease == e->br.lease && e->own_lease;
    air__breaker_apply(&e->br, v, now_ms);
    bool changed = before.failures != e->br.failures ||
                   before.open != e->br.open ||
                   before.open_until != e->br.open_until;
    if (e->shared && (changed || own)) {
      if (v->kind == AIR__VERDICT_SUCCESS)
        enqueue(r, breaker_cmd(r, e, 's', 0, 0, own ? v->lease : 0, now_ms));
      else
        enqueue(r, breaker_cmd(r, e, 'f', v->threshold, (long long)v->open_ms,
                               own ? v->lease : 0, now_ms));
    }
    if (own) drop_own(r, e);
  }
  pthread_mutex_unlock(&r->mu);
}

static void redis_release(void *impl, const char *target, uint64_t lease) {
  redis *r = impl;
  pthread_mutex_lock(&r->mu);
  entry *e = lookup(r, KIND_TARGET, target, false);
  if (e != NULL) {
    bool own = lease != 0 && lease == e->br.lease && e->own_lease;
    air__breaker_release(&e->br, lease);
    if (own) {
      drop_own(r, e);
      if (e->shared) enqueue(r, lease_cmd(r, e, 'd', lease, 0, 0));
    }
  }
  pthread_mutex_unlock(&r->mu);
}

static void redis_cool(void *impl, const char *target, uint64_t now_ms,
                       uint64_t cool_ms) {
  redis *r = impl;
  pthread_mutex_lock(&r->mu);
  entry *e = lookup_at(r, KIND_TARGET, target, true, now_ms);
  if (e != NULL) {
    air__breaker_cool(&e->br, now_ms, cool_ms);
    if (e->shared)
      enqueue(r, breaker_cmd(r, e, 'c', 0, (long long)cool_ms, 0, now_ms));
  }
  pthread_mutex_unlock(&r->mu);
}

static air_breaker_mode redis_mode(void *impl, const char *target,
                                   uint64_t now_ms) {
  redis *r = impl;
  pthread_mutex_lock(&r->mu);
  entry *e = lookup_at(r, KIND_TARGET, target, false, now_ms);
  air_breaker_mode m = air__breaker_mode(e ? &e->br : NULL, now_ms);
  pthread_mutex_unlock(&r->mu);
  return m;
}

static int redis_sticky_get(void *impl, const char *route, uint64_t now_ms,
                            air__sticky_rec *out) {
  redis *r = impl;
  int found = 0;
  pthread_mutex_lock(&r->mu);
  entry *e = lookup_at(r, KIND_ROUTE, route, false, now_ms);
  if (e != NULL && air__sticky_mem_get(&e->st, now_ms, out)) {
    found = 1;
    if (e->shared)
      enqueue(r, sticky_cmd(r, e, "use", e->st.target, 0, 0, now_ms));
  }
  pthread_mutex_unlock(&r->mu);
  return found;
}

static void redis_sticky_set(void *impl, const char *route, const char *target,
                             uint64_t now_ms) {
  redis *r = impl;
  pthread_mutex_lock(&r->mu);
  entry *e = lookup_at(r, KIND_ROUTE, route, target != NULL, now_ms);
  if (e != NULL && air__sticky_mem_set(&e->st, target, now_ms) && e->shared)
    enqueue(r, sticky_cmd(r, e, e->st.on ? "set" : "clr", e->st.target, 0, 0,
                          now_ms));
  pthread_mutex_unlock(&r->mu);
}

static air_cont_style redis_style_get(void *impl, const char *target,
                                      uint64_t now_ms) {
  redis *r = impl;
  air_cont_style s = AIR_CONT_NONE;
  pthread_mutex_lock(&r->mu);
  entry *e = lookup_at(r, KIND_STYLE, target, false, now_ms);
  if (e != NULL) s = air__style_mem_get(&e->style, now_ms);
  pthread_mutex_unlock(&r->mu);
  return s;
}

static void redis_style_set(void *impl, const char *target,
                            air_cont_style style, uint64_t now_ms,
                            uint64_t ttl_ms) {
  redis *r = impl;
  pthread_mutex_lock(&r->mu);
  entry *e = lookup_at(r, KIND_STYLE, target, style != AIR_CONT_NONE, now_ms);
  if (e != NULL) {
    air__style_mem_set(&e->style, style, now_ms, ttl_ms);
    /* NONE forgets here; in Redis the record expires on its own. */
    if (e->shared && style != AIR_CONT_NONE)
      enqueue(r, style_cmd(r, e, "set", style, ttl_ms, now_ms));
  }
  pthread_mutex_unlock(&r->mu);
}

/* ---- applying changes (the Redis thread, under mu) ------------------------
 */

/*
 * Parses a change message (redis_lua.h) into *ch; *key points at its key
 * within s. false on anything malformed (then nothing is applied).
 */
static bool parse_change(const char *s, size_t n, char *kind, change *ch,
                         char inst[17], const char **key, size_t *kn) {
  const char *f[8];
  size_t fl[8], k = 0;
  const char *p = s, *end = s + n;
  memset(ch, 0, sizeof(*ch));
  while (k < 8) {
    const char *nl = k < 7 ? memchr(p, '\n', (size_t)(end - p)) : NULL;
    f[k] = p;
    fl[k] = nl ? (size_t)(nl - p) : (size_t)(end - p);
    k++;
    if (!nl) break;
    p = nl + 1;
  }
  if (k < 7 || fl[0] != 1 || fl[1] != 16) return false;
  *kind = f[0][0];
  if (*kind != KIND_TARGET && *kind != KIND_ROUTE && *kind != KIND_STYLE)
    return false;
  if ((*kind == KIND_TARGET || *kind == KIND_STYLE) && k != 7) return false;
  if (*kind == KIND_ROUTE && k != 8) return false;
  memcpy(inst, f[1], 16);
  inst[16] = 0;
  uint64_t v[4];
  for (int i = 0; i < 4; i++) {
    if (fl[i + 2] == 0 || fl[i + 2] > 19) return false;
    v[i] = 0;
    for (size_t j = 0; j < fl[i + 2]; j++) {
      char c = f[i + 2][j];
      if (c < '0' || c > '9') return false;
      v[i] = v[i] * 10 + (uint64_t)(c - '0');
    }
  }
  ch->have = true;
  ch->version = v[0];
  ch->n = v[1] > UINT32_MAX ? UINT32_MAX : (uint32_t)v[1];
  ch->on = v[2] != 0;
  ch->ms = v[3];
  if (*kind == KIND_ROUTE) {
    if (fl[6] >= sizeof ch->target) return false;
    memcpy(ch->target, f[6], fl[6]);
    ch->target[fl[6]] = 0;
  }
  *key = f[k - 1];
  *kn = fl[k - 1];
  return *kn > 0 && *kn < AIR__MAX_REDIS_KEY_BYTES;
}

/* Applies ch to e when newer; reply: it answers our own script. */
static void apply(redis *r, entry *e, const change *ch, bool reply) {
  if (!ch->have || ch->version <= e->version) return;
  e->version = ch->version;
  if (!reply) r->applied++;
  if (e->node.kind == KIND_TARGET) {
    if (reply && e->br.failures == ch->n && e->br.open == ch->on) return;
    e->br.failures = ch->n;
    e->br.open = ch->on;
    e->br.open_until = ch->on ? ch->base + ch->ms : 0;
    if (!ch->on && !e->own_lease) e->br.lease = 0;
    return;
  }
  if (e->node.kind == KIND_STYLE) {
    uint64_t until = ch->base + ch->ms;
    if (reply && (uint32_t)e->style.style == ch->n) return;
    e->style.style =
        ch->n <= AIR_CONT_INSTRUCT ? (air_cont_style)ch->n : AIR_CONT_NONE;
    e->style.until = until < ch->base ? UINT64_MAX : until;
    return;
  }
  if (reply && e->st.on == ch->on && e->st.used == ch->n &&
      (!ch->on || strcmp(e->st.target, ch->target) == 0))
    return;
  e->st.on = ch->on;
  e->st.used = ch->n;
  snprintf(e->st.target, sizeof e->st.target, "%s", ch->target);
  e->st.since = ch->base >= ch->ms ? ch->base - ch->ms : 0;
}

/* Others' change: applied now, or kept until our commands on e are done. */
static void offer(redis *r, entry *e, const change *ch) {
  if (e->pending > 0) {
    if (!e->wait.have || ch->version > e->wait.version) e->wait = *ch;
    return;
  }
  apply(r, e, ch, false);
}

/* A change message from pub/sub or a read: to the entry of its key. */
static void take_message(redis *r, const char *s, size_t n, bool read) {
  char kind, inst[17];
  change ch;
  const char *key;
  size_t kn;
  if (!parse_change(s, n, &kind, &ch, inst, &key, &kn)) return;
  if (!read && strcmp(inst, r->instance) == 0) return; /* our reply has it */
  size_t pn = strlen(r->prefix);
  if (kn <= pn + 2 || memcmp(key, r->prefix, pn) != 0 || key[pn] != kind)
    return;
  ch.base = mono_ms();
  entry *e = lookup_key(r, kind, key, kn, true, true);
  if (e != NULL) offer(r, e, &ch);
}

/* ---- the Redis thread
 * --------------------------------------------------------- */

static void link_drop(redis *r);
static void pump(redis *r);

static void on_kick(uv_timer_t *t);

/* Drops the link from outside any hiredis callback (the kick timer). */
static void kick(redis *r) {
  uv_timer_start(&r->kick, on_kick, 0, 0);
}

static void request_drop(redis *r) {
  r->want_down = true;
  kick(r);
}

static void inflight_remove(redis *r, cmd *c) {
  cmd **pp = &r->inflight;
  cmd *prev = NULL;
  while (*pp && *pp != c) {
    prev = *pp;
    pp = &(*pp)->next;
  }
  if (*pp == NULL) return;
  *pp = c->next;
  if (r->inflight_tail == c) r->inflight_tail = prev;
  c->next = NULL;
}

static int send_cmd(redis *r, cmd *c);

/* The end of a command on an entry: pending down, a waiting change in. */
static void entry_done(redis *r, cmd *c, const change *ch, bool ok) {
  entry *e = c->e;
  if (e == NULL || !c->counts) return;
  if (e->pending > 0) e->pending--;
  if (!ok && c->op != OP_LEASE) mark_dirty(r, e);
  if (ch != NULL && ch->have) {
    if (e->pending > 0) {
      if (!e->wait.have || ch->version > e->wait.version) e->wait = *ch;
    } else {
      apply(r, e, ch, true);
    }
  }
  if (e->pending == 0 && e->wait.have) {
    change w = e->wait;
    e->wait.have = false;
    apply(r, e, &w, false);
  }
}

static bool is_error(const redisReply *rep, const char *code) {
  size_t n = strlen(code);
  return rep->type == REDIS_REPLY_ERROR && rep->len >= n &&
         memcmp(rep->str, code, n) == 0;
}

static void scan_step(redis *r);
static void sync_finished(redis *r);

/* The answer to a script on an entry. Caller holds mu. */
static void script_answer(redis *r, cmd *c, const redisReply *rep) {
  change ch = {0};
  bool ok = rep->type != REDIS_REPLY_ERROR;
  if (!ok) r->command_errors++;
  if (c->op == OP_LEASE && c->a[0][0] == 'a') {
    entry *e = c->e;
    e->asking = false;
    if (ok && rep->type == REDIS_REPLY_INTEGER) {
      if (rep->integer == 0) {
        e->ready = c->token;
        e->ready_until = c->op_now + c->lease_ms;
      } else if (e->br.lease == 0 || !e->own_lease) {
        /* Another instance probes: not before its lease ends. */
        e->br.lease = UINT64_MAX;
        e->br.lease_until = c->op_now + (uint64_t)rep->integer;
        drop_own(r, e);
      }
    }
  } else if (ok && rep->type == REDIS_REPLY_STRING && c->op != OP_LEASE) {
    char kind, inst[17];
    const char *key;
    size_t kn;
    if (parse_change(rep->str, rep->len, &kind, &ch, inst, &key, &kn))
      ch.base = c->op_now;
  }
  r->answered++;
  entry_done(r, c, &ch, ok);
}

static void on_reply(redisAsyncContext *ac, void *reply, void *data) {
  (void)ac;
  redis *r = ac->data;
  cmd *c = data;
  const redisReply *rep = reply;
  inflight_remove(r, c);
  pthread_mutex_lock(&r->mu);
  r->queued = r->queued > 0 ? r->queued - 1 : 0;
  if (rep == NULL || c->gen != r->gen) {
    /* The link went away: the write may not have landed. */
    if (c->op == OP_BREAKER || c->op == OP_STICKY || c->op == OP_STYLE ||
        c->op == OP_LEASE) {
      if (c->op == OP_LEASE && c->e) c->e->asking = false;
      r->answered++;
      entry_done(r, c, NULL, c->op == OP_LEASE);
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    cmd_free(c);
    return;
  }
  if (c->op >= OP_BREAKER && c->op <= OP_READ && is_error(rep, "NOSCRIPT") &&
      !c->eval) {
    c->eval = true;
    r->queued++;
    pthread_mutex_unlock(&r->mu);
    if (send_cmd(r, c) != 0) {
      pthread_mutex_lock(&r->mu);
      r->queued--;
      r->answered++;
      entry_done(r, c, NULL, false);
      pthread_mutex_unlock(&r->mu);
      cmd_free(c);
    }
    return;
  }
  bool down = is_error(rep, "LOADING") || is_error(rep, "READONLY") ||
              is_error(rep, "BUSY") || is_error(rep, "MASTERDOWN");
  switch (c->op) {
    case OP_AUTH:
    case OP_SELECT:
    case OP_PING:
      if (rep->type == REDIS_REPLY_ERROR) {
        r->command_errors++;
        down = true;
      } else if (c->op == OP_PING) {
        r->cmd.ready = true;
      }
      break;
    case OP_LOAD:
      if (rep->type == REDIS_REPLY_STRING && rep->len == 40) {
        memcpy(r->sha[c->script], rep->str, 40);
        r->sha[c->script][40] = 0;
      } else {
        r->command_errors++;
        down = down || rep->type == REDIS_REPLY_ERROR;
      }
      break;
    case OP_BREAKER:
    case OP_LEASE:
    case OP_STICKY:
    case OP_STYLE:
      script_answer(r, c, rep);
      break;
    case OP_SCAN:
      if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
          rep->element[0]->type == REDIS_REPLY_STRING &&
          rep->element[1]->type == REDIS_REPLY_ARRAY) {
        snprintf(r->cursor, sizeof r->cursor, "%.*s", (int)rep->element[0]->len,
                 rep->element[0]->str);
        r->scan_more = strcmp(r->cursor, "0") != 0;
        const redisReply *ks = rep->element[1];
        size_t pn = strlen(r->prefix);
        for (size_t i = 0; i < ks->elements; i++) {
          const redisReply *k = ks->element[i];
          if (k->type != REDIS_REPLY_STRING || k->len <= pn + 2 ||
              k->len >= AIR__MAX_REDIS_KEY_BYTES)
            continue;
          char kind = k->str[pn];
          if ((kind != KIND_TARGET && kind != KIND_ROUTE &&
               kind != KIND_STYLE) ||
              k->str[pn + 1] != ':')
            continue;
          cmd *rd = cmd_new(OP_READ,
                            kind == KIND_TARGET  ? AIR__LUA_BREAKER
                            : kind == KIND_STYLE ? AIR__LUA_STYLE
                                                 : AIR__LUA_STICKY,
                            NULL, 0);
          if (rd == NULL) continue;
          snprintf(rd->keys[0], sizeof rd->keys[0], "%.*s", (int)k->len,
                   k->str);
          rd->nkeys = 1;
          if (kind == KIND_TARGET) {
            snprintf(rd->keys[1], sizeof rd->keys[1], "%sl:", r->prefix);
            rd->nkeys = 2;
            cmd_str(rd, "r");
            for (int j = 0; j < 4; j++) cmd_str(rd, "");
            cmd_str(rd, r->instance);
          } else if (kind == KIND_STYLE) {
            cmd_str(rd, "r");
            cmd_str(rd, "0");
            cmd_str(rd, "0");
            cmd_str(rd, r->channel);
            cmd_str(rd, r->instance);
          } else {
            cmd_str(rd, "r");
            cmd_str(rd, "");
            cmd_str(rd, r->channel);
            cmd_str(rd, r->instance);
            cmd_str(rd, "1");
          }
          r->scan_reads++;
          r->queued++;
          pthread_mutex_unlock(&r->mu);
          int rc = send_cmd(r, rd);
          pthread_mutex_lock(&r->mu);
          if (rc != 0) {
            r->scan_reads--;
            r->queued--;
            cmd_free(rd);
          }
        }
      } else {
        r->command_errors++;
        down = true;
      }
      break;
    case OP_READ:
      if (r->scan_reads) r->scan_reads--;
      if (rep->type == REDIS_REPLY_STRING)
        take_message(r, rep->str, rep->len, true);
      else if (rep->type == REDIS_REPLY_ERROR)
        r->command_errors++;
      break;
  }
  if (down) request_drop(r);
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
  op_kind o = c->op;
  cmd_free(c);
  if (down) {
    kick(r);
    return;
  }
  if (o == OP_PING) scan_step(r);
  if ((o == OP_SCAN || o == OP_READ) && r->scanning) scan_step(r);
}

/* Sends c on the cmd connection (the Redis thread). 0 or -1. */
static int send_cmd(redis *r, cmd *c) {
  if (r->cmd.ac == NULL) return -1;
  const char *argv[MAX_ARGS + 8];
  size_t lens[MAX_ARGS + 8];
  int n = 0;
  char nk[4];
  switch (c->op) {
    case OP_AUTH:
      argv[n++] = "AUTH";
      for (int i = 0; i < c->argc; i++) argv[n++] = c->a[i];
      break;
    case OP_SELECT:
      argv[n++] = "SELECT";
      argv[n++] = c->a[0];
      break;
    case OP_PING:
      argv[n++] = "PING";
      break;
    case OP_LOAD:
      argv[n++] = "SCRIPT";
      argv[n++] = "LOAD";
      argv[n++] = air__redis_lua(c->script);
      break;
    case OP_SCAN:
      argv[n++] = "SCAN";
      argv[n++] = r->cursor;
      argv[n++] = "MATCH";
      argv[n++] = c->a[0];
      argv[n++] = "COUNT";
      argv[n++] = c->a[1];
      break;
    default:
      if (c->eval || r->sha[c->script][0] == 0) {
        c->eval = true;
        argv[n++] = "EVAL";
        argv[n++] = air__redis_lua(c->script);
      } else {
        argv[n++] = "EVALSHA";
        argv[n++] = r->sha[c->script];
      }
      snprintf(nk, sizeof nk, "%d", c->nkeys);
      argv[n++] = nk;
      for (int i = 0; i < c->nkeys; i++) argv[n++] = c->keys[i];
      for (int i = 0; i < c->argc; i++) argv[n++] = c->a[i];
      break;
  }
  for (int i = 0; i < n; i++) lens[i] = strlen(argv[i]);
  c->gen = r->gen;
  c->sent_at = mono_ms();
  c->next = NULL;
  if (redisAsyncCommandArgv(r->cmd.ac, on_reply, c, n, argv, lens) != REDIS_OK)
    return -1;
  if (r->inflight_tail)
    r->inflight_tail->next = c;
  else
    r->inflight = c;
  r->inflight_tail = c;
  return 0;
}

/* Sends a handshake or sync command made here (counted in queued). */
static void send_own(redis *r, cmd *c) {
  if (c == NULL) {
    request_drop(r);
    return;
  }
  pthread_mutex_lock(&r->mu);
  r->queued++;
  pthread_mutex_unlock(&r->mu);
  if (send_cmd(r, c) != 0) {
    pthread_mutex_lock(&r->mu);
    r->queued--;
    pthread_mutex_unlock(&r->mu);
    cmd_free(c);
    request_drop(r);
  }
}

/*
 * After the handshake: push what changed while the link was down (the
 * merge scripts), then SCAN; the link counts as up (ops queue again) once
 * the subscriber is ready too, before the scan ends (changes published
 * meanwhile reach the mirror through the subscription).
 */
static void scan_step(redis *r) {
  if (!r->cmd.ready || !r->sub.ready) return;
  if (!r->scanning) {
    r->scanning = true;
    r->scan_more = true;
    snprintf(r->cursor, sizeof r->cursor, "0");
    pthread_mutex_lock(&r->mu);
    r->up = true;
    r->attempt = 0;
    uv_timer_stop(&r->deadline);
    /* Merge what this instance holds (changed meanwhile, or lost by a
     * restarted Redis); versions start over, the scan reads them anew.
     * Only shared entries (pinned) have a key: the walk is over them,
     * never over the local names callers chose. */
    uint64_t now = mono_ms();
    while (take_dirty(r) != NULL) continue;
    for (entry *e = air__table_next_pinned(&r->table, NULL); e != NULL;
         e = air__table_next_pinned(&r->table, e)) {
      e->version = 0;
      e->wait.have = false;
      if (e->shared &&
          (e->node.kind != KIND_TARGET || e->br.failures || e->br.open))
        push_merge(r, e, now);
    }
    pthread_mutex_unlock(&r->mu);
    pump(r);
  }
  if (r->scan_reads > 0) return;
  if (!r->scan_more) {
    sync_finished(r);
    return;
  }
  r->scan_more = false;
  cmd *c = cmd_new(OP_SCAN, 0, NULL, 0);
  if (c) {
    snprintf(c->a[0], sizeof c->a[0], "%s*", r->prefix);
    snprintf(c->a[1], sizeof c->a[1], "%u", (unsigned)AIR__MAX_REDIS_SCAN_KEYS);
  }
  send_own(r, c);
}

static void sync_finished(redis *r) {
  r->scanning = false;
  pthread_mutex_lock(&r->mu);
  r->synced = true;
  r->sync_done_at = mono_ms();
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

/* Sends what the ops queued (the Redis thread). */
static void pump(redis *r) {
  for (;;) {
    pthread_mutex_lock(&r->mu);
    cmd *c = r->cmd.ready ? r->queue : NULL;
    if (c) {
      r->queue = c->next;
      if (!r->queue) r->queue_tail = NULL;
      c->next = NULL;
    }
    pthread_mutex_unlock(&r->mu);
    if (!c) return;
    if (send_cmd(r, c) != 0) {
      pthread_mutex_lock(&r->mu);
      r->queued--;
      r->answered++;
      entry_done(r, c, NULL, false);
      pthread_cond_broadcast(&r->cv);
      pthread_mutex_unlock(&r->mu);
      cmd_free(c);
      request_drop(r);
      return;
    }
  }
}

/* ---- the subscriber
 * ----------------------------------------------------------- */

static void on_sub(redisAsyncContext *ac, void *reply, void *data) {
  redis *r = data;
  const redisReply *rep = reply;
  (void)ac;
  if (rep == NULL) return;
  if (rep->type == REDIS_REPLY_ERROR) {
    pthread_mutex_lock(&r->mu);
    r->command_errors++;
    pthread_mutex_unlock(&r->mu);
    request_drop(r);
    return;
  }
  if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 3 ||
      rep->element[0]->type != REDIS_REPLY_STRING)
    return;
  const redisReply *kind = rep->element[0];
  if (kind->len == 9 && memcmp(kind->str, "subscribe", 9) == 0) {
    r->sub.ready = true;
    scan_step(r);
    return;
  }
  if (kind->len == 7 && memcmp(kind->str, "message", 7) == 0 &&
      rep->element[2]->type == REDIS_REPLY_STRING &&
      rep->element[2]->len < AIR__MAX_REDIS_MESSAGE_BYTES) {
    pthread_mutex_lock(&r->mu);
    take_message(r, rep->element[2]->str, rep->element[2]->len, false);
    pthread_mutex_unlock(&r->mu);
  }
}

static void on_sub_auth(redisAsyncContext *ac, void *reply, void *data) {
  redis *r = data;
  const redisReply *rep = reply;
  (void)ac;
  if (rep == NULL) return;
  if (rep->type == REDIS_REPLY_ERROR) request_drop(r);
}

/* ---- connecting
 * --------------------------------------------------------------- */

static void on_connected(const redisAsyncContext *ac, int status) {
  redis *r = ac->data;
  conn *cn = ac == r->cmd.ac ? &r->cmd : ac == r->sub.ac ? &r->sub : NULL;
  if (cn == NULL) return;
  if (status != REDIS_OK) {
    cn->ac = NULL; /* hiredis frees it */
    request_drop(r);
    return;
  }
  redisAsyncContext *c = cn->ac;
  if (cn == &r->sub) {
    const char *argv[3];
    size_t lens[3];
    int n = 0;
    if (r->password || r->url.has_password) {
      argv[n++] = "AUTH";
      if (r->url.user[0]) argv[n++] = r->url.user;
      argv[n++] = r->password ? r->password : r->url.password;
      for (int i = 0; i < n; i++) lens[i] = strlen(argv[i]);
      redisAsyncCommandArgv(c, on_sub_auth, r, n, argv, lens);
    }
    argv[0] = "SUBSCRIBE";
    argv[1] = r->channel;
    lens[0] = strlen(argv[0]);
    lens[1] = strlen(argv[1]);
    if (redisAsyncCommandArgv(c, on_sub, r, 2, argv, lens) != REDIS_OK)
      request_drop(r);
    return;
  }
  if (r->password || r->url.has_password) {
    cmd *a = cmd_new(OP_AUTH, 0, NULL, 0);
    if (a && r->url.user[0]) cmd_str(a, r->url.user);
    if (a) {
      const char *pw = r->password ? r->password : r->url.password;
      if (strlen(pw) >= sizeof a->a[0]) {
        cmd_free(a);
        a = NULL;
      } else {
        cmd_str(a, pw);
      }
    }
    send_own(r, a);
  }
  if (r->url.db != 0) {
    cmd *s = cmd_new(OP_SELECT, 0, NULL, 0);
    if (s) cmd_num(s, (long long)(r->url.db));
    send_own(r, s);
  }
  for (int i = 0; i < AIR__LUA_COUNT; i++)
    send_own(r, cmd_new(OP_LOAD, i, NULL, 0));
  send_own(r, cmd_new(OP_PING, 0, NULL, 0));
}

/* Redis closed a connection (not our redisAsyncFree: that one is no
 * longer ours when this runs); hiredis frees it after this. */
static void on_disconnected(const redisAsyncContext *ac, int status) {
  redis *r = ac->data;
  (void)status;
  bool ours = ac == r->cmd.ac || ac == r->sub.ac;
  if (ac == r->cmd.ac) r->cmd.ac = NULL;
  if (ac == r->sub.ac) r->sub.ac = NULL;
  if (ours) request_drop(r);
}

static int connect_one(redis *r, conn *cn, const char *ip) {
  redisAsyncContext *ac = redisAsyncConnect(ip, (int)r->url.port);
  if (ac == NULL) return -1;
  if (ac->err) {
    redisAsyncFree(ac);
    return -1;
  }
  ac->data = r;
  if (redisLibuvAttach(ac, &r->loop) != REDIS_OK) {
    redisAsyncFree(ac);
    return -1;
  }
  cn->ac = ac;
  cn->ready = false;
  redisAsyncSetConnectCallback(ac, on_connected);
  redisAsyncSetDisconnectCallback(ac, on_disconnected);
  return 0;
}

static void on_resolved(uv_getaddrinfo_t *req, int status,
                        struct addrinfo *res) {
  redis *r = req->data;
  r->gai_busy = false;
  char ip[64] = "";
  for (struct addrinfo *a = res; status == 0 && a && !ip[0]; a = a->ai_next) {
    if (a->ai_family == AF_INET)
      uv_ip4_name((const struct sockaddr_in *)(const void *)a->ai_addr, ip,
                  sizeof ip);
    else if (a->ai_family == AF_INET6)
      uv_ip6_name((const struct sockaddr_in6 *)(const void *)a->ai_addr, ip,
                  sizeof ip);
  }
  uv_freeaddrinfo(res);
  if (r->stopping || !r->linking) return;
  if (!ip[0] || connect_one(r, &r->cmd, ip) != 0 ||
      connect_one(r, &r->sub, ip) != 0)
    request_drop(r);
}

static void on_deadline(uv_timer_t *t) {
  redis *r = t->data;
  if (!r->up && r->linking) {
    pthread_mutex_lock(&r->mu);
    r->command_errors++;
    pthread_mutex_unlock(&r->mu);
    request_drop(r);
  }
}

static void on_retry(uv_timer_t *t);

static void link_start(redis *r) {
  if (r->stopping || r->linking) return;
  if (r->gai_busy) {
    /* The cancelled lookup has not called back yet. */
    uv_timer_start(&r->retry, on_retry, BACKOFF_BASE_MS, 0);
    return;
  }
  r->linking = true;
  r->want_down = false;
  pthread_mutex_lock(&r->mu);
  if (r->links++ > 0) r->reconnects++;
  pthread_mutex_unlock(&r->mu);
  uv_timer_start(&r->deadline, on_deadline, r->connect_timeout_ms, 0);
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
  r->gai.data = r;
  if (uv_getaddrinfo(&r->loop, &r->gai, on_resolved, r->url.host, NULL,
                     &hints) == 0)
    r->gai_busy = true;
  else
    request_drop(r);
}

static void on_retry(uv_timer_t *t) {
  link_start(t->data);
}

/* Tears the link down (never inside a hiredis callback) and, unless
 * stopping, makes it again after a jittered backoff. */
static void link_drop(redis *r) {
  r->want_down = false;
  bool was = r->linking;
  r->linking = false;
  r->gen++;
  uv_timer_stop(&r->deadline);
  if (r->gai_busy) uv_cancel((uv_req_t *)&r->gai);
  pthread_mutex_lock(&r->mu);
  r->up = false;
  /* What waits unsent is merged after the next link. */
  while (r->queue) {
    cmd *c = r->queue;
    r->queue = c->next;
    r->queued--;
    r->answered++;
    r->dropped++;
    entry_done(r, c, NULL, c->op == OP_LEASE);
    if (c->op == OP_LEASE && c->e) c->e->asking = false;
    cmd_free(c);
  }
  r->queue_tail = NULL;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
  r->cmd.ready = r->sub.ready = false;
  r->scanning = false;
  r->scan_reads = 0;
  redisAsyncContext *a = r->cmd.ac, *b = r->sub.ac;
  r->cmd.ac = r->sub.ac = NULL;
  if (a) redisAsyncFree(a); /* answers every callback with NULL */
  if (b) redisAsyncFree(b);
  if (r->stopping || !was) return;
  uint64_t base = BACKOFF_BASE_MS << (r->attempt < 5 ? r->attempt : 5);
  if (base > BACKOFF_MAX_MS) base = BACKOFF_MAX_MS;
  if (r->attempt < 16) r->attempt++;
  uint64_t wait = base / 2 + next_rand(r) % (base / 2 + 1);
  uv_timer_start(&r->retry, on_retry, wait, 0);
}

static void on_kick(uv_timer_t *t) {
  redis *r = t->data;
  if (r->want_down) link_drop(r);
  if (!r->linking && !r->stopping && !uv_is_active((uv_handle_t *)&r->retry))
    link_start(r);
  pump(r);
}

/* Every TICK_MS: a command unanswered past command_timeout_ms drops the
 * link; what was marked dirty while up (a full queue) is merged. */
static void on_tick(uv_timer_t *t) {
  redis *r = t->data;
  uint64_t now = mono_ms();
  if (r->inflight && now - r->inflight->sent_at >= r->command_timeout_ms) {
    pthread_mutex_lock(&r->mu);
    r->command_errors++;
    pthread_mutex_unlock(&r->mu);
    link_drop(r);
    return;
  }
  pthread_mutex_lock(&r->mu);
  /* Renew the leases of the probes running here (their own list: the
   * tick never walks the table). */
  for (entry *e = r->up ? r->leases : NULL; e != NULL; e = e->lease_next) {
    if (now - e->renewed < LEASE_PX_MS / 3) continue;
    if (now >= e->renew_until) continue; /* its owner vanished: expire */
    e->renewed = now;
    enqueue(r, lease_cmd(r, e, 'x', e->br.lease, LEASE_PX_MS, now));
  }
  bool flush = r->up && !r->scanning && r->n_dirty > 0 &&
               r->queued < AIR__MAX_REDIS_QUEUE / 2;
  /* Each dirty entry once at most: one that stays dirty (the queue filled
   * up) is back on the list for the next tick. */
  for (size_t left = flush ? r->n_dirty : 0;
       left > 0 && r->queued < AIR__MAX_REDIS_QUEUE; left--) {
    entry *e = take_dirty(r);
    if (e == NULL) break;
    if (e->shared) push_merge(r, e, now);
  }
  pthread_mutex_unlock(&r->mu);
}

static void on_wake(uv_async_t *a) {
  redis *r = a->data;
  pthread_mutex_lock(&r->mu);
  bool stop = r->stopping;
  pthread_mutex_unlock(&r->mu);
  if (!stop) {
    pump(r);
    return;
  }
  link_drop(r);
  uv_close((uv_handle_t *)&r->wake, NULL);
  uv_close((uv_handle_t *)&r->tick, NULL);
  uv_close((uv_handle_t *)&r->retry, NULL);
  uv_close((uv_handle_t *)&r->deadline, NULL);
  uv_close((uv_handle_t *)&r->kick, NULL);
}

static void *redis_thread(void *data) {
  redis *r = data;
  link_start(r);
  uv_run(&r->loop, UV_RUN_DEFAULT);
  return NULL;
}

/* ---- lifetime
 * ------------------------------------------------------------------ */

static void tables_free(redis *r) {
  for (size_t i = 0; i < r->n_targets; i++) free(r->targets[i].name);
  for (size_t i = 0; i < r->n_routes; i++) free(r->routes[i].name);
  free(r->targets);
  free(r->routes);
  free(r->providers);
  r->targets = r->routes = NULL;
  r->providers = NULL;
  r->n_targets = r->n_routes = r->n_providers = 0;
}

static void hex64(uint64_t v, char out[17]) {
  snprintf(out, 17, "%016llx", (unsigned long long)v);
}

/*
 * Which targets and routes are shared, and their key hashes: a target's
 * key carries a hash of its provider's base_url (two accounts never share
 * a breaker), a route's a hash of its target list (routes that differ per
 * instance keep per-instance stickiness). Caller holds mu (or owns r).
 */
static int tables_build(redis *r, const air_config *cfg) {
  tables_free(r);
  size_t nt = 0;
  for (size_t i = 0; i < cfg->n_routes; i++) nt += cfg->routes[i].n_targets;
  r->providers = calloc(cfg->n_providers + 1, sizeof *r->providers);
  r->targets = calloc(nt + 1, sizeof *r->targets);
  r->routes = calloc(cfg->n_routes + 1, sizeof *r->routes);
  if (!r->providers || !r->targets || !r->routes) return AIR_ENOMEM;
  for (size_t i = 0; i < cfg->n_providers; i++) {
    const air__provider *p = &cfg->providers[i];
    const char *u = p->base_url ? p->base_url : "";
    snprintf(r->providers[i].name, sizeof r->providers[i].name, "%s",
             p->name ? p->name : "");
    hex64(fnv(u, strlen(u), 1469598103934665603ull), r->providers[i].hash);
    r->n_providers++;
  }
  for (size_t i = 0; i < cfg->n_routes; i++) {
    const air__route *rt = &cfg->routes[i];
    uint64_t h = 1469598103934665603ull;
    for (size_t j = 0; j < rt->n_targets; j++) {
      const char *t = rt->targets[j].name;
      h = fnv(t, strlen(t) + 1, h); /* the NUL separates names */
      char *copy = strdup(t);
      if (!copy) return AIR_ENOMEM;
      r->targets[r->n_targets++].name = copy;
    }
    char *copy = strdup(rt->name ? rt->name : "");
    if (!copy) return AIR_ENOMEM;
    r->routes[r->n_routes].name = copy;
    hex64(h, r->routes[r->n_routes].hash);
    r->n_routes++;
  }
  qsort(r->routes, r->n_routes, sizeof *r->routes, cmp_name);
  /* Sorted and without repeats (routes share targets). */
  qsort(r->targets, r->n_targets, sizeof *r->targets, cmp_name);
  size_t u = 0;
  for (size_t i = 0; i < r->n_targets; i++) {
    if (u > 0 && strcmp(r->targets[u - 1].name, r->targets[i].name) == 0) {
      free(r->targets[i].name);
      continue;
    }
    r->targets[u++] = r->targets[i];
  }
  r->n_targets = u;
  return 0;
}

static void redis_configure(void *impl, const air_config *cfg) {
  redis *r = impl;
  pthread_mutex_lock(&r->mu);
  if (tables_build(r, cfg) != 0) tables_free(r); /* no memory: all local */
  pthread_mutex_unlock(&r->mu);
}

static void redis_destroy(void *impl) {
  redis *r = impl;
  if (r->thread) {
    pthread_mutex_lock(&r->mu);
    r->stopping = true;
    pthread_mutex_unlock(&r->mu);
    uv_async_send(&r->wake);
    pthread_join(r->thread, NULL);
  }
  uv_loop_close(&r->loop);
  air__table_cleanup(&r->table);
  tables_free(r);
  air__redis_url_wipe(&r->url);
  if (r->password) {
    volatile char *p = r->password;
    while (*p) *p++ = 0;
    free(r->password);
  }
  pthread_cond_destroy(&r->cv);
  pthread_mutex_destroy(&r->mu);
  free(r);
}

static const air__state_ops redis_ops = {
    .try_probe = redis_try_probe,
    .record = redis_record,
    .release = redis_release,
    .cool = redis_cool,
    .mode = redis_mode,
    .sticky_get = redis_sticky_get,
    .sticky_set = redis_sticky_set,
    .style_get = redis_style_get,
    .style_set = redis_style_set,
    .configure = redis_configure,
    .destroy = redis_destroy,
};

int air__state_redis_new(const air_config *cfg, air_state **out,
                         air_error *err) {
  if (out == NULL || cfg == NULL || cfg->redis.resolved_url == NULL)
    return air__error_set(err, AIR_EINVAL, "no Redis URL");
  redis *r = calloc(1, sizeof(*r));
  if (r == NULL) return air__error_set(err, AIR_ENOMEM, "out of memory");
  const char *u = cfg->redis.resolved_url;
  char why[256];
  if (air__redis_url_parse(u, strlen(u), &r->url, why, sizeof why) != 0) {
    free(r);
    return air__error_set(err, AIR_EINVAL, "state.redis: %s", why);
  }
  const char *prefix = cfg->redis.prefix ? cfg->redis.prefix : "airetry:";
  snprintf(r->prefix, sizeof r->prefix, "%s", prefix);
  snprintf(r->channel, sizeof r->channel, "%schanges", r->prefix);
  r->connect_timeout_ms =
      cfg->redis.connect_timeout_ms ? cfg->redis.connect_timeout_ms : 200;
  r->command_timeout_ms =
      cfg->redis.command_timeout_ms ? cfg->redis.command_timeout_ms : 200;
  r->rng = uv_hrtime() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)r;
  if (r->rng == 0) r->rng = 1;
  hex64(next_rand(r) ^ uv_hrtime(), r->instance);
  int rc = 0;
  if (cfg->redis.password) {
    r->password = strdup(cfg->redis.password);
    if (!r->password) rc = AIR_ENOMEM;
  }
  if (rc == 0) rc = tables_build(r, cfg);
  r->table.idle_fn = entry_idle;
  bool mu = false, cv = false, loop = false;
  if (rc == 0) rc = pthread_mutex_init(&r->mu, NULL) ? AIR_EIO : 0;
  if (rc == 0) mu = true, rc = pthread_cond_init(&r->cv, NULL) ? AIR_EIO : 0;
  if (rc == 0) cv = true, rc = uv_loop_init(&r->loop) ? AIR_EIO : 0;
  if (rc == 0) {
    loop = true;
    uv_async_init(&r->loop, &r->wake, on_wake);
    uv_timer_init(&r->loop, &r->tick);
    uv_timer_init(&r->loop, &r->retry);
    uv_timer_init(&r->loop, &r->deadline);
    uv_timer_init(&r->loop, &r->kick);
    r->wake.data = r->tick.data = r->retry.data = r->deadline.data =
        r->kick.data = r;
    uv_timer_start(&r->tick, on_tick, TICK_MS, TICK_MS);
    /* hiredis sends with write(2): a Redis that went away must be EPIPE on
     * this thread, never a SIGPIPE that kills the application. The thread
     * inherits a mask with SIGPIPE blocked (it never unblocks it, so one
     * left pending is never delivered). */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    rc = pthread_create(&r->thread, NULL, redis_thread, r) ? AIR_EIO : 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  }
  if (rc == 0) rc = air__state_new(&redis_ops, r, out);
  if (rc != 0) {
    if (loop && !r->thread) {
      uv_close((uv_handle_t *)&r->wake, NULL);
      uv_close((uv_handle_t *)&r->tick, NULL);
      uv_close((uv_handle_t *)&r->retry, NULL);
      uv_close((uv_handle_t *)&r->deadline, NULL);
      uv_close((uv_handle_t *)&r->kick, NULL);
      uv_run(&r->loop, UV_RUN_DEFAULT);
    }
    if (!loop) uv_loop_init(&r->loop); /* so destroy may close it */
    if (!mu) pthread_mutex_init(&r->mu, NULL);
    if (!cv) pthread_cond_init(&r->cv, NULL);
    redis_destroy(r);
    return air__error_set(err, rc, "cannot start the Redis state: %s",
                          air_strerror(rc));
  }
  air__error_set(err, 0, NULL);
  return 0;
}

int air__state_redis_stats(air_state *st, air__redis_stats *out) {
  if (st == NULL || st->ops != &redis_ops || out == NULL) return AIR_EINVAL;
  redis *r = st->impl;
  pthread_mutex_lock(&r->mu);
  out->up = r->up;
  out->reconnects = r->reconnects;
  out->command_errors = r->command_errors;
  out->dropped = r->dropped;
  out->applied = r->applied;
  out->synced = r->synced;
  uint64_t now = mono_ms();
  out->since_sync_ms =
      r->synced && now > r->sync_done_at ? now - r->sync_done_at : 0;
  pthread_mutex_unlock(&r->mu);
  return 0;
}

int air__state_redis_sync(air_state *st, uint64_t timeout_ms) {
  if (st == NULL || st->ops != &redis_ops) return AIR_EINVAL;
  redis *r = st->impl;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t ns = (uint64_t)ts.tv_nsec + (timeout_ms % 1000u) * 1000000u;
  ts.tv_sec += (time_t)(timeout_ms / 1000u + ns / 1000000000u);
  ts.tv_nsec = (long)(ns % 1000000000u);
  int rc = 0;
  pthread_mutex_lock(&r->mu);
  uint64_t want = r->sent;
  while (rc == 0 && (!r->up || !r->synced || r->answered < want || r->queue))
    rc = pthread_cond_timedwait(&r->cv, &r->mu, &ts);
  pthread_mutex_unlock(&r->mu);
  return rc == 0 ? 0 : AIR_ESTATE;
}
