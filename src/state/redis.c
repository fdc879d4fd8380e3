/*
 * The Redis state backend (redis.h, docs/design.md §3.1).
 *
 * Reads never wait for Redis: every op is decided on an in-memory mirror
 * under one mutex, exactly as the local backend decides (core's breaker.h),
 * and a shared key's transition is then queued for the Redis thread, which
 * runs it as a Lua script (redis_lua.h) and applies the script's answer and
 * every change other instances publish to the mirror, newer versions only.
 *
 * The Redis thread and its link are redis_link.c; what both sides share,
 * redis_int.h.
 *
 * Times: an op's now_ms is the caller's monotonic clock; a change from
 * Redis carries durations, converted at the moment they are applied (the
 * op's now for the answer to our own script, the Redis thread's monotonic
 * clock for a change published by another instance). The answer to our own
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

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "error.h"
#include "limits.h"
#include "redis_int.h"

/* A sticky record's life in Redis past its last use. */
#define STICKY_TTL_MS 86400000ull

static uint64_t fnv(const char *s, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 1099511628211ull;
  }
  return h;
}

/* ---- keys ---------------------------------------------------------------- */

static int cmp_name(const void *a, const void *b) {
  return strcmp(((const air__redis_name_hash *)a)->name,
                ((const air__redis_name_hash *)b)->name);
}

static const air__redis_name_hash *find_name(const air__redis_name_hash *v,
                                             size_t n, const char *name) {
  air__redis_name_hash k = {.name = (char *)(uintptr_t)name};
  return n ? bsearch(&k, v, n, sizeof(*v), cmp_name) : NULL;
}

/*
 * The key of target (kind b) or route (kind s) into out; *shared is false
 * for a name that stays local (then out is a local name, never sent).
 * Caller holds mu. Returns the key's length, 0 when it does not fit.
 */
static size_t key_of(const air__redis *r, char kind, const char *name,
                     char *out, size_t sz, bool *shared) {
  int n = 0;
  *shared = false;
  if (kind == AIR__REDIS_KIND_TARGET || kind == AIR__REDIS_KIND_STYLE) {
    const char *slash = strchr(name, '/');
    const air__redis_name_hash *t = find_name(r->targets, r->n_targets, name);
    for (size_t i = 0; t && slash && i < r->n_providers; i++) {
      const air__redis_provider_hash *p = &r->providers[i];
      if (strlen(p->name) == (size_t)(slash - name) &&
          memcmp(p->name, name, (size_t)(slash - name)) == 0) {
        n = snprintf(out, sz, "%s%c:%s:%s", r->prefix, kind, name, p->hash);
        *shared = true;
        break;
      }
    }
  } else {
    const air__redis_name_hash *rt = find_name(r->routes, r->n_routes, name);
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
air__redis_entry *air__redis_lookup_key(air__redis *r, char kind,
                                        const char *key, size_t n, bool shared,
                                        bool create) {
  size_t before = r->table.count;
  air__redis_entry *e = shared && create
                            ? air__table_get_pinned(&r->table, kind, key, n,
                                                    sizeof(air__redis_entry))
                            : air__table_get(&r->table, kind, key, n, create,
                                             sizeof(air__redis_entry));
  if (e != NULL && r->table.count != before) e->shared = shared;
  return e;
}

/* The idle rule of the mirror (table.h): only a local entry goes, with
 * nothing open, leased, learned, sticky or on its way to Redis. */
static bool entry_idle(const air__table_node *rec, uint64_t now_ms,
                       void *data) {
  const air__redis_entry *e = (const air__redis_entry *)rec;
  (void)data;
  return !e->shared && !e->br.open && e->br.lease == 0 && !e->st.on &&
         air__style_mem_get(&e->style, now_ms) == AIR_CONT_NONE &&
         e->pending == 0 && !e->dirty && !e->own_lease && !e->asking &&
         e->ready == 0;
}

/* lookup after the op's clock moved the table on (air__table_at). */
static air__redis_entry *lookup_at(air__redis *r, char kind, const char *name,
                                   bool create, uint64_t now_ms) {
  air__table_at(&r->table, now_ms);
  char key[AIR__MAX_REDIS_KEY_BYTES];
  bool shared;
  size_t n = key_of(r, kind, name, key, sizeof key, &shared);
  if (n == 0) return NULL;
  return air__redis_lookup_key(r, kind, key, n, shared, create);
}

static air__redis_entry *lookup(air__redis *r, char kind, const char *name,
                                bool create) {
  char key[AIR__MAX_REDIS_KEY_BYTES];
  bool shared;
  size_t n = key_of(r, kind, name, key, sizeof key, &shared);
  if (n == 0) return NULL;
  return air__redis_lookup_key(r, kind, key, n, shared, create);
}

/* ---- the queue (any thread, under mu) ----------------------------------- */

void air__redis_mark_dirty(air__redis *r, air__redis_entry *e) {
  if (!e->dirty) {
    e->dirty = true;
    e->dirty_next = r->dirty;
    r->dirty = e;
    r->n_dirty++;
  }
}

/* The newest dirty entry, no longer dirty; NULL when none is. */
air__redis_entry *air__redis_take_dirty(air__redis *r) {
  air__redis_entry *e = r->dirty;
  if (e == NULL) return NULL;
  r->dirty = e->dirty_next;
  e->dirty_next = NULL;
  e->dirty = false;
  r->n_dirty--;
  return e;
}

/* Frees c; an AUTH command's password is wiped first. */
void air__redis_cmd_free(air__redis_cmd *c) {
  if (c == NULL) return;
  if (c->op == AIR__REDIS_OP_AUTH) {
    volatile char *p = (volatile char *)c->a;
    for (size_t i = 0; i < sizeof c->a; i++) p[i] = 0;
  }
  free(c);
}

/* e's lease is no longer ours in Redis. Caller holds mu. */
void air__redis_drop_own(air__redis *r, air__redis_entry *e) {
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
static void take_own(air__redis *r, air__redis_entry *e) {
  if (e->own_lease) return;
  e->own_lease = true;
  e->lease_prev = NULL;
  e->lease_next = r->leases;
  if (r->leases != NULL) r->leases->lease_prev = e;
  r->leases = e;
  r->n_leases++;
}

air__redis_cmd *air__redis_cmd_new(air__redis_op o, int script,
                                   air__redis_entry *e, uint64_t now) {
  air__redis_cmd *c = calloc(1, sizeof(*c));
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

void air__redis_cmd_str(air__redis_cmd *c, const char *s) {
  if (c->argc < AIR__REDIS_MAX_ARGS)
    snprintf(c->a[c->argc++], sizeof c->a[0], "%s", s);
}

void air__redis_cmd_num(air__redis_cmd *c, long long v) {
  if (c->argc < AIR__REDIS_MAX_ARGS)
    snprintf(c->a[c->argc++], sizeof c->a[0], "%lld", v);
}

/* The lease key of a breaker key: "l" in place of its "b". */
static void lease_key(const air__redis *r, const air__redis_entry *e, char *out,
                      size_t sz) {
  size_t p = strlen(r->prefix);
  snprintf(out, sz, "%sl%.*s", r->prefix, (int)(e->node.len - p - 1),
           e->node.key + p + 1);
}

static void lease_value(const air__redis *r, uint64_t token, char *out,
                        size_t sz) {
  snprintf(out, sz, "%s:%llu", r->instance, (unsigned long long)token);
}

/*
 * Queues c (taking it) when the link is up and the queue has room; else
 * drops it (counted) and marks its entry dirty, to be merged when the link
 * is back. Caller holds mu.
 */
void air__redis_enqueue(air__redis *r, air__redis_cmd *c) {
  if (c == NULL || !r->up || r->queued >= AIR__MAX_REDIS_QUEUE) {
    r->dropped++;
    if (c != NULL && c->e != NULL && c->op != AIR__REDIS_OP_LEASE)
      air__redis_mark_dirty(r, c->e);
    if (c != NULL && c->e != NULL && c->op == AIR__REDIS_OP_LEASE)
      c->e->asking = false;
    air__redis_cmd_free(c);
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

static air__redis_cmd *breaker_cmd(air__redis *r, air__redis_entry *e, char op,
                                   uint64_t n1, long long n2, uint64_t lease,
                                   uint64_t now) {
  air__redis_cmd *c =
      air__redis_cmd_new(AIR__REDIS_OP_BREAKER, AIR__LUA_BREAKER, e, now);
  if (c == NULL) return NULL;
  char lv[64] = "";
  lease_key(r, e, c->keys[1], sizeof c->keys[1]);
  c->nkeys = 2;
  if (lease != 0) lease_value(r, lease, lv, sizeof lv);
  char o[2] = {op, 0};
  air__redis_cmd_str(c, o);
  air__redis_cmd_num(c, (long long)(n1));
  air__redis_cmd_num(c, (long long)((unsigned long long)n2));
  air__redis_cmd_str(c, lv);
  air__redis_cmd_str(c, r->channel);
  air__redis_cmd_str(c, r->instance);
  return c;
}

air__redis_cmd *air__redis_lease_cmd(air__redis *r, air__redis_entry *e,
                                     char op, uint64_t token, uint64_t px,
                                     uint64_t now) {
  air__redis_cmd *c =
      air__redis_cmd_new(AIR__REDIS_OP_LEASE, AIR__LUA_LEASE, e, now);
  if (c == NULL) return NULL;
  char lv[64];
  lease_key(r, e, c->keys[0], sizeof c->keys[0]);
  lease_value(r, token, lv, sizeof lv);
  char o[2] = {op, 0};
  air__redis_cmd_str(c, o);
  air__redis_cmd_str(c, lv);
  air__redis_cmd_num(c, (long long)(px ? px : 1));
  air__redis_cmd_str(c, r->instance);
  c->token = token;
  c->lease_ms = px;
  return c;
}

static air__redis_cmd *sticky_cmd(air__redis *r, air__redis_entry *e,
                                  const char *op, const char *target,
                                  uint64_t used, uint64_t age, uint64_t now) {
  air__redis_cmd *c =
      air__redis_cmd_new(AIR__REDIS_OP_STICKY, AIR__LUA_STICKY, e, now);
  if (c == NULL) return NULL;
  air__redis_cmd_str(c, op);
  air__redis_cmd_str(c, target ? target : "");
  air__redis_cmd_str(c, r->channel);
  air__redis_cmd_str(c, r->instance);
  air__redis_cmd_num(c, (long long)(STICKY_TTL_MS));
  air__redis_cmd_num(c, (long long)(used));
  air__redis_cmd_num(c, (long long)(age));
  return c;
}

static air__redis_cmd *style_cmd(air__redis *r, air__redis_entry *e,
                                 const char *op, air_cont_style style,
                                 uint64_t ttl_ms, uint64_t now) {
  air__redis_cmd *c =
      air__redis_cmd_new(AIR__REDIS_OP_STYLE, AIR__LUA_STYLE, e, now);
  if (c == NULL) return NULL;
  air__redis_cmd_str(c, op);
  air__redis_cmd_num(c, (long long)style);
  air__redis_cmd_num(c, (long long)ttl_ms);
  air__redis_cmd_str(c, r->channel);
  air__redis_cmd_str(c, r->instance);
  return c;
}

/* The ms left of an open record at now (for a merge), -1 when closed. */
static long long left_open(const air__redis_entry *e, uint64_t now) {
  if (!e->br.open) return -1;
  return e->br.open_until > now ? (long long)(e->br.open_until - now) : 0;
}

/* Queues e's record through the merge script of its kind (the stricter
 * state wins). Caller holds mu. */
void air__redis_push_merge(air__redis *r, air__redis_entry *e, uint64_t now) {
  if (e->node.kind == AIR__REDIS_KIND_TARGET)
    air__redis_enqueue(
        r, breaker_cmd(r, e, 'm', e->br.failures, left_open(e, now), 0, now));
  else if (e->node.kind == AIR__REDIS_KIND_STYLE) {
    if (air__style_mem_get(&e->style, now) != AIR_CONT_NONE)
      air__redis_enqueue(
          r, style_cmd(r, e, "m", e->style.style, e->style.until - now, now));
  } else if (e->st.on)
    air__redis_enqueue(
        r, sticky_cmd(r, e, "m", e->st.target, e->st.used,
                      now > e->st.since ? now - e->st.since : 0, now));
}

/* ---- the ops (worker threads) ------------------------------------------- */

static air__admit redis_try_probe(void *impl, const char *target,
                                  uint64_t lease_ms, uint64_t now_ms,
                                  uint64_t *reopen_ms, uint64_t *lease) {
  air__redis *r = impl;
  air__admit a = AIR__ADMIT_YES;
  pthread_mutex_lock(&r->mu);
  air__redis_entry *e =
      lookup_at(r, AIR__REDIS_KIND_TARGET, target, false, now_ms);
  if (e == NULL) goto out;
  air_breaker_mode m = air__breaker_mode(&e->br, now_ms);
  if (m != AIR_BREAKER_HALF_OPEN && e->ready != 0) {
    /* A lease we got is no longer needed. */
    air__redis_enqueue(r, air__redis_lease_cmd(r, e, 'd', e->ready, 0, now_ms));
    e->ready = 0;
  }
  if (m != AIR_BREAKER_HALF_OPEN || !e->shared || !r->up) {
    a = air__table_admit(&r->table, &e->br, now_ms, lease_ms, reopen_ms, lease);
    if (a == AIR__ADMIT_PROBE) air__redis_drop_own(r, e);
    goto out;
  }
  a = AIR__ADMIT_NO;
  if (reopen_ms) *reopen_ms = now_ms;
  if (e->br.lease != 0 && now_ms < e->br.lease_until) goto out;
  if (e->ready != 0 && now_ms < e->ready_until) {
    e->br.lease = e->ready;
    e->br.lease_until = now_ms + lease_ms;
    take_own(r, e);
    e->renewed = air__redis_mono_ms();
    e->renew_until = e->renewed + lease_ms;
    *lease = e->ready;
    e->ready = 0;
    a = AIR__ADMIT_PROBE;
    goto out;
  }
  if (!e->asking) {
    e->asking = true;
    air__redis_enqueue(r, air__redis_lease_cmd(r, e, 'a', ++r->table.tokens,
                                               lease_ms < AIR__REDIS_LEASE_PX_MS
                                                   ? lease_ms
                                                   : AIR__REDIS_LEASE_PX_MS,
                                               now_ms));
  }
out:
  pthread_mutex_unlock(&r->mu);
  return a;
}

static void redis_record(void *impl, const char *target, const air__verdict *v,
                         uint64_t now_ms) {
  air__redis *r = impl;
  pthread_mutex_lock(&r->mu);
  air__redis_entry *e = lookup_at(r, AIR__REDIS_KIND_TARGET, target,
                                  v->kind == AIR__VERDICT_FAILURE, now_ms);
  if (e != NULL) {
    air__breaker_rec before = e->br;
    bool own = v->lease != 0 && v->lease == e->br.lease && e->own_lease;
    air__breaker_apply(&e->br, v, now_ms);
    bool changed = before.failures != e->br.failures ||
                   before.open != e->br.open ||
                   before.open_until != e->br.open_until;
    if (e->shared && (changed || own)) {
      if (v->kind == AIR__VERDICT_SUCCESS)
        air__redis_enqueue(
            r, breaker_cmd(r, e, 's', 0, 0, own ? v->lease : 0, now_ms));
      else
        air__redis_enqueue(
            r, breaker_cmd(r, e, 'f', v->threshold, (long long)v->open_ms,
                           own ? v->lease : 0, now_ms));
    }
    if (own) air__redis_drop_own(r, e);
  }
  pthread_mutex_unlock(&r->mu);
}

static void redis_release(void *impl, const char *target, uint64_t lease) {
  air__redis *r = impl;
  pthread_mutex_lock(&r->mu);
  air__redis_entry *e = lookup(r, AIR__REDIS_KIND_TARGET, target, false);
  if (e != NULL) {
    bool own = lease != 0 && lease == e->br.lease && e->own_lease;
    air__breaker_release(&e->br, lease);
    if (own) {
      air__redis_drop_own(r, e);
      if (e->shared)
        air__redis_enqueue(r, air__redis_lease_cmd(r, e, 'd', lease, 0, 0));
    }
  }
  pthread_mutex_unlock(&r->mu);
}

static void redis_cool(void *impl, const char *target, uint64_t now_ms,
                       uint64_t cool_ms) {
  air__redis *r = impl;
  pthread_mutex_lock(&r->mu);
  air__redis_entry *e =
      lookup_at(r, AIR__REDIS_KIND_TARGET, target, true, now_ms);
  if (e != NULL) {
    air__breaker_cool(&e->br, now_ms, cool_ms);
    if (e->shared)
      air__redis_enqueue(
          r, breaker_cmd(r, e, 'c', 0, (long long)cool_ms, 0, now_ms));
  }
  pthread_mutex_unlock(&r->mu);
}

static air_breaker_mode redis_mode(void *impl, const char *target,
                                   uint64_t now_ms) {
  air__redis *r = impl;
  pthread_mutex_lock(&r->mu);
  air__redis_entry *e =
      lookup_at(r, AIR__REDIS_KIND_TARGET, target, false, now_ms);
  air_breaker_mode m = air__breaker_mode(e ? &e->br : NULL, now_ms);
  pthread_mutex_unlock(&r->mu);
  return m;
}

static int redis_sticky_get(void *impl, const char *route, uint64_t now_ms,
                            air__sticky_rec *out) {
  air__redis *r = impl;
  int found = 0;
  pthread_mutex_lock(&r->mu);
  air__redis_entry *e =
      lookup_at(r, AIR__REDIS_KIND_ROUTE, route, false, now_ms);
  if (e != NULL && air__sticky_mem_get(&e->st, now_ms, out)) {
    found = 1;
    if (e->shared)
      air__redis_enqueue(r,
                         sticky_cmd(r, e, "use", e->st.target, 0, 0, now_ms));
  }
  pthread_mutex_unlock(&r->mu);
  return found;
}

static void redis_sticky_set(void *impl, const char *route, const char *target,
                             uint64_t now_ms) {
  air__redis *r = impl;
  pthread_mutex_lock(&r->mu);
  air__redis_entry *e =
      lookup_at(r, AIR__REDIS_KIND_ROUTE, route, target != NULL, now_ms);
  if (e != NULL && air__sticky_mem_set(&e->st, target, now_ms) && e->shared)
    air__redis_enqueue(r, sticky_cmd(r, e, e->st.on ? "set" : "clr",
                                     e->st.target, 0, 0, now_ms));
  pthread_mutex_unlock(&r->mu);
}

static air_cont_style redis_style_get(void *impl, const char *target,
                                      uint64_t now_ms) {
  air__redis *r = impl;
  air_cont_style s = AIR_CONT_NONE;
  pthread_mutex_lock(&r->mu);
  air__redis_entry *e =
      lookup_at(r, AIR__REDIS_KIND_STYLE, target, false, now_ms);
  if (e != NULL) s = air__style_mem_get(&e->style, now_ms);
  pthread_mutex_unlock(&r->mu);
  return s;
}

static void redis_style_set(void *impl, const char *target,
                            air_cont_style style, uint64_t now_ms,
                            uint64_t ttl_ms) {
  air__redis *r = impl;
  pthread_mutex_lock(&r->mu);
  air__redis_entry *e = lookup_at(r, AIR__REDIS_KIND_STYLE, target,
                                  style != AIR_CONT_NONE, now_ms);
  if (e != NULL) {
    air__style_mem_set(&e->style, style, now_ms, ttl_ms);
    /* NONE forgets here; in Redis the record expires on its own. */
    if (e->shared && style != AIR_CONT_NONE)
      air__redis_enqueue(r, style_cmd(r, e, "set", style, ttl_ms, now_ms));
  }
  pthread_mutex_unlock(&r->mu);
}

/* ---- lifetime ------------------------------------------------------------ */

static void tables_free(air__redis *r) {
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
static int tables_build(air__redis *r, const air_config *cfg) {
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
  air__redis *r = impl;
  pthread_mutex_lock(&r->mu);
  if (tables_build(r, cfg) != 0) tables_free(r); /* no memory: all local */
  pthread_mutex_unlock(&r->mu);
}

static void redis_destroy(void *impl) {
  air__redis *r = impl;
  air__redis_link_stop(r);
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
  air__redis *r = calloc(1, sizeof(*r));
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
  hex64(air__redis_rand(r) ^ uv_hrtime(), r->instance);
  int rc = 0;
  if (cfg->redis.password) {
    r->password = strdup(cfg->redis.password);
    if (!r->password) rc = AIR_ENOMEM;
  }
  if (rc == 0) rc = tables_build(r, cfg);
  r->table.idle_fn = entry_idle;
  bool mu = false, cv = false;
  if (rc == 0) rc = pthread_mutex_init(&r->mu, NULL) ? AIR_EIO : 0;
  if (rc == 0) mu = true, rc = pthread_cond_init(&r->cv, NULL) ? AIR_EIO : 0;
  if (rc == 0) cv = true, rc = air__redis_link_start(r);
  if (rc == 0) rc = air__state_new(&redis_ops, r, out);
  if (rc != 0) {
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
  air__redis *r = st->impl;
  pthread_mutex_lock(&r->mu);
  out->up = r->up;
  out->reconnects = r->reconnects;
  out->command_errors = r->command_errors;
  out->dropped = r->dropped;
  out->applied = r->applied;
  out->synced = r->synced;
  uint64_t now = air__redis_mono_ms();
  out->since_sync_ms =
      r->synced && now > r->sync_done_at ? now - r->sync_done_at : 0;
  pthread_mutex_unlock(&r->mu);
  return 0;
}

int air__state_redis_sync(air_state *st, uint64_t timeout_ms) {
  if (st == NULL || st->ops != &redis_ops) return AIR_EINVAL;
  air__redis *r = st->impl;
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
