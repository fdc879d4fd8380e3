/*
 * Series live in cells, one per (kind, name): a route cell counts requests
 * per outcome, a target cell attempts per reason. Cells are made once, the
 * first time a configured name is counted, and live until air__metrics_free,
 * so a request that still runs under an old config snapshot counts into the
 * same cells as the new one, and a name kept across a reload keeps counting
 * up. Names are copied: nothing points into a config.
 *
 * Finding a cell takes no lock: an open-addressing table of atomic cell
 * pointers, read with acquire loads. Inserts (under mu) publish a cell with
 * a release store; a table past half full is copied into one twice as large
 * and published the same way; the old one is kept until air__metrics_free
 * because a reader may still be probing it (a reader that misses there
 * takes the locked path and looks again in the current table). Counters are
 * relaxed atomics: each is exact, a render is not a snapshot of all of them.
 *
 * Bounded: at most MAX_CELLS cells (every name of a large config, many
 * reloads over); past that, new names count as "other".
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "redis.h"
#include "server.h"

#define MAX_CELLS 65536
#define FIRST_CAP 64 /* slots of the first table (a power of two) */
#define N_BUCKETS 12

static const double bucket_s[N_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                           0.5,   1,    2.5,   5,    10,  30};

/* Request outcomes, in render order; the last one takes unknown strings. */
static const char *const outcomes[] = {
    "ok", "error", "error_after_commit", "aborted", "rejected", "other"};
#define N_OUTCOMES (sizeof(outcomes) / sizeof(outcomes[0]))

/* Outcomes of a hedge (docs/design.md §3.6): its answer was the caller's, it
 * was cancelled because another racer won, or it failed. */
static const char *const hedge_outcomes[] = {"won", "lost", "failed"};
#define N_HEDGE_OUTCOMES (sizeof(hedge_outcomes) / sizeof(hedge_outcomes[0]))

/* Outcomes of a continuation attempt (docs/design.md §3.5): its seam opened
 * and its text reached the caller, it failed before that, or its prefill
 * was rejected (then it was asked again with instruct, or failed). */
static const char *const cont_outcomes[] = {"joined", "failed",
                                            "prefill_rejected"};
#define N_CONT_OUTCOMES (sizeof(cont_outcomes) / sizeof(cont_outcomes[0]))

/* Slots of a cell: a route's outcomes or a target's reasons (0: "ok"). */
#define N_SLOTS                                        \
  (N_OUTCOMES > (size_t)AIR_REASON__COUNT ? N_OUTCOMES \
                                          : (size_t)AIR_REASON__COUNT)

/* K_HEDGE: a route's hedges; K_CONT: a route's continuations on one target
 * (named "route" CONT_SEP "target"). */
enum kind { K_ROUTE, K_TARGET, K_HEDGE, K_CONT };
#define CONT_SEP '\x01'

typedef struct cell {
  struct cell *next_all; /* every cell, oldest first (under mu) */
  enum kind kind;
  uint64_t hash;
  size_t len;
  _Atomic uint64_t n[N_SLOTS];
  char name[]; /* NUL-terminated */
} cell;

typedef struct table {
  struct table *retired; /* older tables, freed with the metrics */
  size_t cap;            /* a power of two */
  _Atomic(cell *) slot[];
} table;

typedef struct histogram {
  _Atomic uint64_t buckets[N_BUCKETS];
  _Atomic uint64_t count;
  _Atomic uint64_t sum_ms;
} histogram;

struct air__metrics {
  pthread_mutex_t mu; /* inserts, the cell list, render, worker_restarts */
  _Atomic(table *) tab;
  cell *first, *last; /* every cell (under mu) */
  size_t n_cells;     /* under mu */
  cell *other_route;  /* the "other" cells, made at start */
  cell *other_target;
  _Atomic uint64_t retries;
  _Atomic uint64_t switches;
  _Atomic uint64_t malformed;
  uint64_t worker_restarts;
  const _Atomic uint64_t *log_dropped;
  const _Atomic uint64_t *spans_exported, *spans_dropped;
  const air__http_stats *http;
  histogram first_content;
  histogram total;
  histogram self;
};

static uint64_t hash_name(enum kind k, const char *p, size_t n) {
  uint64_t h = 1469598103934665603ull ^ (uint64_t)k;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)p[i];
    h *= 1099511628211ull;
  }
  return h;
}

static cell *find_in(const table *t, enum kind k, uint64_t h, const char *p,
                     size_t n) {
  size_t mask = t->cap - 1;
  for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
    cell *c =
        atomic_load_explicit(&((table *)t)->slot[i], memory_order_acquire);
    if (c == NULL) return NULL;
    if (c->hash == h && c->kind == k && c->len == n &&
        memcmp(c->name, p, n) == 0)
      return c;
  }
}

static table *table_new(size_t cap) {
  table *t = calloc(1, sizeof(*t) + cap * sizeof(t->slot[0]));
  if (t == NULL) return NULL;
  t->cap = cap;
  for (size_t i = 0; i < cap; i++) atomic_init(&t->slot[i], NULL);
  return t;
}

/* Under mu: puts c into t (which has a free slot). */
static void place(table *t, cell *c) {
  size_t mask = t->cap - 1;
  size_t i = (size_t)c->hash & mask;
  while (atomic_load_explicit(&t->slot[i], memory_order_relaxed) != NULL)
    i = (i + 1) & mask;
  atomic_store_explicit(&t->slot[i], c, memory_order_release);
}

/*
 * Under mu: the cell (k, p[0..n)), made when missing. NULL when no memory
 * or MAX_CELLS are made (the caller counts "other").
 */
static cell *insert_locked(air__metrics *m, enum kind k, const char *p,
                           size_t n) {
  uint64_t h = hash_name(k, p, n);
  table *t = atomic_load_explicit(&m->tab, memory_order_relaxed);
  cell *c = find_in(t, k, h, p, n);
  if (c != NULL || m->n_cells >= MAX_CELLS) return c;
  if ((m->n_cells + 1) * 2 > t->cap) {
    table *bigger = table_new(t->cap * 2);
    if (bigger == NULL) return NULL;
    for (cell *x = m->first; x != NULL; x = x->next_all) place(bigger, x);
    bigger->retired = t;
    atomic_store_explicit(&m->tab, bigger, memory_order_release);
    t = bigger;
  }
  c = calloc(1, sizeof(*c) + n + 1);
  if (c == NULL) return NULL;
  c->kind = k;
  c->hash = h;
  c->len = n;
  memcpy(c->name, p, n);
  for (size_t i = 0; i < N_SLOTS; i++) atomic_init(&c->n[i], 0);
  if (m->last != NULL)
    m->last->next_all = c;
  else
    m->first = c;
  m->last = c;
  m->n_cells++;
  place(t, c);
  return c;
}

/* The cell of a configured name: lock-free when it exists already. */
static cell *cell_of(air__metrics *m, enum kind k, const char *p, size_t n) {
  table *t = atomic_load_explicit(&m->tab, memory_order_acquire);
  cell *c = find_in(t, k, hash_name(k, p, n), p, n);
  if (c != NULL) return c;
  pthread_mutex_lock(&m->mu);
  c = insert_locked(m, k, p, n);
  pthread_mutex_unlock(&m->mu);
  if (c != NULL) return c;
  return k == K_ROUTE ? m->other_route : k == K_TARGET ? m->other_target : NULL;
}

int air__metrics_new(air__metrics **out) {
  air__metrics *m = calloc(1, sizeof(*m));
  if (m == NULL) return AIR_ENOMEM;
  table *t = table_new(FIRST_CAP);
  if (t == NULL) {
    free(m);
    return AIR_ENOMEM;
  }
  pthread_mutex_init(&m->mu, NULL);
  atomic_init(&m->tab, t);
  m->other_route = insert_locked(m, K_ROUTE, "other", 5);
  m->other_target = insert_locked(m, K_TARGET, "other", 5);
  if (m->other_route == NULL || m->other_target == NULL) {
    air__metrics_free(m);
    return AIR_ENOMEM;
  }
  *out = m;
  return 0;
}

void air__metrics_set_worker_restarts(air__metrics *m, uint64_t n) {
  pthread_mutex_lock(&m->mu);
  m->worker_restarts = n;
  pthread_mutex_unlock(&m->mu);
}

void air__metrics_watch_log_drops(air__metrics *m,
                                  const _Atomic uint64_t *dropped) {
  pthread_mutex_lock(&m->mu);
  m->log_dropped = dropped;
  pthread_mutex_unlock(&m->mu);
}

void air__metrics_watch_http(air__metrics *m, const air__http_stats *st) {
  pthread_mutex_lock(&m->mu);
  m->http = st;
  pthread_mutex_unlock(&m->mu);
}

void air__metrics_watch_traces(air__metrics *m,
                               const _Atomic uint64_t *exported,
                               const _Atomic uint64_t *dropped) {
  pthread_mutex_lock(&m->mu);
  m->spans_exported = exported;
  m->spans_dropped = dropped;
  pthread_mutex_unlock(&m->mu);
}

void air__metrics_free(air__metrics *m) {
  if (m == NULL) return;
  for (cell *c = m->first; c != NULL;) {
    cell *next = c->next_all;
    free(c);
    c = next;
  }
  for (table *t = atomic_load(&m->tab); t != NULL;) {
    table *older = t->retired;
    free(t);
    t = older;
  }
  pthread_mutex_destroy(&m->mu);
  free(m);
}

static void observe(histogram *h, uint64_t ms) {
  double s = (double)ms / 1000.0;
  for (int i = 0; i < N_BUCKETS; i++)
    if (s <= bucket_s[i])
      atomic_fetch_add_explicit(&h->buckets[i], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->sum_ms, ms, memory_order_relaxed);
}

static void bump(_Atomic uint64_t *v, uint64_t by) {
  atomic_fetch_add_explicit(v, by, memory_order_relaxed);
}

/* Whether some route of cfg lists the target named p[0..n). Linear in the
 * config's targets; only "provider/model" requests ask. */
static bool target_configured(const air_config *cfg, const char *p, size_t n) {
  for (size_t i = 0; i < cfg->n_routes; i++) {
    const air__route *r = &cfg->routes[i];
    for (size_t k = 0; k < r->n_targets; k++)
      if (strlen(r->targets[k].name) == n &&
          memcmp(r->targets[k].name, p, n) == 0)
        return true;
  }
  return false;
}

void air__metrics_request(air__metrics *m, const air_config *cfg,
                          const char *model, const char *outcome,
                          const air_attempt *log, size_t n,
                          uint64_t first_content_ms, uint64_t total_ms,
                          uint64_t self_ms, unsigned malformed) {
  if (m == NULL) return;
  if (model == NULL) model = "";
  size_t mlen = strlen(model);
  /* A route: its name and its targets' names. A configured target asked
   * for directly: its name. Anything else: "other", for every attempt. */
  bool route = cfg != NULL && air__config_route(cfg, model, mlen) != NULL;
  bool named = route || (cfg != NULL && memchr(model, '/', mlen) != NULL &&
                         target_configured(cfg, model, mlen));
  cell *rc = named ? cell_of(m, K_ROUTE, model, mlen) : m->other_route;
  size_t o = 0;
  while (o + 1 < N_OUTCOMES &&
         (outcome == NULL || strcmp(outcome, outcomes[o]) != 0))
    o++;
  bump(&rc->n[o], 1);
  cell *tc =
      named && !route ? cell_of(m, K_TARGET, model, mlen) : m->other_target;
  const char *prev = NULL; /* the target of the attempt before */
  for (size_t i = 0; i < n; i++) {
    if (log[i].skipped) continue; /* not an attempt (docs/design.md §2.1) */
    const char *t = log[i].target ? log[i].target : "";
    if (log[i].hedge && named) {
      size_t ho = log[i].hedge_lost                  ? 1
                  : log[i].reason == AIR_REASON_NONE ? 0
                                                     : 2;
      cell *hc = cell_of(m, K_HEDGE, model, mlen); /* NULL: over MAX_CELLS */
      if (hc != NULL) bump(&hc->n[ho], 1);
    }
    /* A racer that lost did not fail nor answer; a hedge is neither a
     * retry nor a switch. */
    if (log[i].hedge_lost) continue;
    if (log[i].hedge) {
      prev = t;
      if (route) tc = cell_of(m, K_TARGET, t, strlen(t));
      size_t hr = (size_t)log[i].reason;
      if (hr < (size_t)AIR_REASON__COUNT) bump(&tc->n[hr], 1);
      continue;
    }
    if (route) tc = cell_of(m, K_TARGET, t, strlen(t));
    size_t r = (size_t)log[i].reason;
    if (r < (size_t)AIR_REASON__COUNT) bump(&tc->n[r], 1);
    if (prev != NULL) {
      if (strcmp(t, prev) == 0)
        bump(&m->retries, 1);
      else
        bump(&m->switches, 1);
    }
    prev = t;
  }
  bump(&m->malformed, malformed);
  if (first_content_ms > 0) observe(&m->first_content, first_content_ms);
  observe(&m->total, total_ms);
  observe(&m->self, self_ms);
}

void air__metrics_continuation(air__metrics *m, const air_config *cfg,
                               const char *route, const char *target,
                               const char *outcome) {
  if (m == NULL || route == NULL || target == NULL) return;
  size_t o = 0;
  while (o < N_CONT_OUTCOMES &&
         (outcome == NULL || strcmp(outcome, cont_outcomes[o]) != 0))
    o++;
  if (o == N_CONT_OUTCOMES) return;
  /* Names a config defines, else "other" (as for the other families). */
  size_t rn = strlen(route), tn = strlen(target);
  bool named = cfg != NULL && air__config_route(cfg, route, rn) != NULL;
  if (!named) route = "other", rn = 5;
  if (!named || !target_configured(cfg, target, tn)) target = "other", tn = 5;
  char key[2 * AIR__MAX_TARGET_BYTES + 2];
  if (rn + 1 + tn >= sizeof(key)) return;
  memcpy(key, route, rn);
  key[rn] = CONT_SEP;
  memcpy(key + rn + 1, target, tn);
  key[rn + 1 + tn] = '\0';
  cell *c = cell_of(m, K_CONT, key, rn + 1 + tn); /* NULL: over MAX_CELLS */
  if (c != NULL) bump(&c->n[o], 1);
}

/*
 * The exposition is text built in one go (buf.h): every append below is a
 * sticky put, and air__metrics_render checks the buffer's error once at the
 * end, so the first failure is passed on as it is (AIR_ETOOBIG, AIR_ENOMEM).
 */

/* A label value of n bytes: backslash, quote and newline escaped. */
static void put_label_n(air__buf *out, const char *v, size_t n) {
  air__buf_putc(out, '"');
  for (const char *p = v; p < v + n; p++) {
    if (*p == '\\' || *p == '"') {
      air__buf_putc(out, '\\');
      air__buf_putc(out, *p);
    } else if (*p == '\n') {
      air__buf_puts(out, "\\n");
    } else {
      air__buf_putc(out, *p);
    }
  }
  air__buf_putc(out, '"');
}

static void put_label(air__buf *out, const char *v) {
  put_label_n(out, v, strlen(v));
}

/* "# HELP name help\n# TYPE name type\n". */
static void put_head(air__buf *out, const char *name, const char *help,
                     const char *type) {
  air__buf_puts(out, "# HELP ");
  air__buf_puts(out, name);
  air__buf_putc(out, ' ');
  air__buf_puts(out, help);
  air__buf_puts(out, "\n# TYPE ");
  air__buf_puts(out, name);
  air__buf_putc(out, ' ');
  air__buf_puts(out, type);
  air__buf_putc(out, '\n');
}

/* One counter family: every non-zero slot of every cell of kind k. */
static void put_counter(air__buf *out, const char *name, const char *help,
                        const air__metrics *m, enum kind k, const char *la,
                        const char *lb) {
  put_head(out, name, help, "counter");
  size_t slots = k == K_ROUTE   ? N_OUTCOMES
                 : k == K_HEDGE ? N_HEDGE_OUTCOMES
                 : k == K_CONT  ? N_CONT_OUTCOMES
                                : (size_t)AIR_REASON__COUNT;
  for (const cell *c = m->first; air__buf_error(out) == 0 && c != NULL;
       c = c->next_all) {
    if (c->kind != k) continue;
    for (size_t i = 0; i < slots; i++) {
      uint64_t v =
          atomic_load_explicit(&((cell *)c)->n[i], memory_order_relaxed);
      if (v == 0) continue;
      const char *b = k == K_ROUTE   ? outcomes[i]
                      : k == K_HEDGE ? hedge_outcomes[i]
                      : k == K_CONT  ? cont_outcomes[i]
                      : i == 0       ? "ok"
                                     : air_reason_name((air_reason)i);
      air__buf_puts(out, name);
      air__buf_putc(out, '{');
      air__buf_puts(out, la);
      air__buf_putc(out, '=');
      const char *sep = k == K_CONT ? strchr(c->name, CONT_SEP) : NULL;
      if (sep != NULL) { /* route, then target */
        put_label_n(out, c->name, (size_t)(sep - c->name));
        air__buf_puts(out, ",target=");
        put_label(out, sep + 1);
      } else {
        put_label(out, c->name);
      }
      air__buf_putc(out, ',');
      air__buf_puts(out, lb);
      air__buf_putc(out, '=');
      put_label(out, b);
      air__buf_puts(out, "} ");
      air__buf_putu(out, v);
      air__buf_putc(out, '\n');
    }
  }
}

/* A family of one value without labels; type "counter" or "gauge". */
static void put_value(air__buf *out, const char *type, const char *name,
                      const char *help, uint64_t v) {
  put_head(out, name, help, type);
  air__buf_puts(out, name);
  air__buf_putc(out, ' ');
  air__buf_putu(out, v);
  air__buf_putc(out, '\n');
}

/* The shared state's Redis link (docs/design.md §3.1), when state is in Redis.
 */
static void put_state_link(air__buf *out, air_state *st) {
  air__redis_stats s;
  if (air__state_redis_stats(st, &s) != 0) return;
  put_value(out, "gauge", "airetry_state_redis_up",
            "1 while the shared state's Redis link is up.", s.up ? 1 : 0);
  put_value(out, "counter", "airetry_state_redis_reconnects_total",
            "Redis links made again after the first.", s.reconnects);
  put_value(out, "counter", "airetry_state_redis_command_errors_total",
            "Redis error replies, timed-out and lost commands.",
            s.command_errors);
  put_value(out, "counter", "airetry_state_redis_dropped_writes_total",
            "State changes not sent (queue full or link down; merged "
            "when the link is back).",
            s.dropped);
  put_value(out, "counter", "airetry_state_redis_applied_total",
            "State changes of other instances applied to this one.", s.applied);
  put_value(out, "gauge", "airetry_state_redis_seconds_since_sync",
            "Seconds since the last full sync with Redis (0 before one).",
            s.synced ? s.since_sync_ms / 1000u : 0);
}

/* Bucket counts are read one by one while requests go on: each read is
 * clamped to the one before, so the exposition stays cumulative. */
static void put_histogram(air__buf *out, const char *name, const char *help,
                          const histogram *h) {
  char line[160];
  put_head(out, name, help, "histogram");
  uint64_t prev = 0;
  for (int i = 0; i < N_BUCKETS; i++) {
    uint64_t v = atomic_load_explicit(&((histogram *)h)->buckets[i],
                                      memory_order_relaxed);
    if (v < prev) v = prev;
    prev = v;
    snprintf(line, sizeof(line), "%s_bucket{le=\"%g\"} %llu\n", name,
             bucket_s[i], (unsigned long long)v);
    air__buf_puts(out, line);
  }
  uint64_t count =
      atomic_load_explicit(&((histogram *)h)->count, memory_order_relaxed);
  if (count < prev) count = prev;
  uint64_t sum_ms =
      atomic_load_explicit(&((histogram *)h)->sum_ms, memory_order_relaxed);
  snprintf(line, sizeof(line),
           "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %llu.%03u\n%s_count %llu\n",
           name, (unsigned long long)count, name,
           (unsigned long long)(sum_ms / 1000), (unsigned)(sum_ms % 1000), name,
           (unsigned long long)count);
  air__buf_puts(out, line);
}

int air__metrics_render(air__metrics *m, air_state *st, uint64_t now_ms,
                        air__buf *out) {
  int rc = air__buf_error(out);
  if (rc != 0) return rc; /* a failure of the caller's is not ours to hide */
  size_t start = out->n;
  pthread_mutex_lock(&m->mu);
  put_counter(out, "airetry_requests_total", "Requests by route and outcome.",
              m, K_ROUTE, "route", "outcome");
  put_counter(out, "airetry_attempts_total",
              "Upstream attempts by target and reason (ok: answered).", m,
              K_TARGET, "target", "reason");
  put_counter(
      out, "airetry_hedges_total",
      "Hedges (docs/design.md §3.6) by route and outcome: won (its answer "
      "was released), lost (another racer won), failed.",
      m, K_HEDGE, "route", "outcome");
  put_counter(
      out, "airetry_continuations_total",
      "Continuation attempts (docs/design.md §3.5) by route, target and "
      "outcome: joined (its text reached the caller), failed, "
      "prefill_rejected (asked again with instruct, or failed).",
      m, K_CONT, "route", "outcome");
  put_value(out, "counter", "airetry_retries_total",
            "Attempts on the same target as the one before.",
            atomic_load_explicit(&m->retries, memory_order_relaxed));
  put_value(out, "counter", "airetry_switches_total",
            "Attempts on another target than the one before.",
            atomic_load_explicit(&m->switches, memory_order_relaxed));
  put_value(out, "counter", "airetry_malformed_events_total",
            "Malformed upstream events skipped.",
            atomic_load_explicit(&m->malformed, memory_order_relaxed));
  put_value(out, "counter", "airetry_worker_restarts_total",
            "Worker processes the supervisor replaced after they died.",
            m->worker_restarts);
  put_value(out, "counter", "airetry_log_lines_dropped_total",
            "Log lines dropped because stderr did not keep up.",
            m->log_dropped ? atomic_load(m->log_dropped) : 0);
  if (m->http != NULL) {
    put_value(out, "gauge", "airetry_http_read_ahead_bytes",
              "Bytes read from clients and not yet parsed.",
              atomic_load(&m->http->read_ahead));
    put_value(out, "gauge", "airetry_http_output_queued_bytes",
              "Response bytes waiting for clients to read them.",
              atomic_load(&m->http->output_queued));
    put_value(out, "counter", "airetry_http_output_refused_total",
              "Response writes refused or connections cut over "
              "limits.max_output_queue_bytes.",
              atomic_load(&m->http->output_refused));
    put_value(out, "counter", "airetry_http_write_timeouts_total",
              "Connections closed because the client read nothing for "
              "limits.client_write_timeout_ms.",
              atomic_load(&m->http->write_timeouts));
  }
  put_state_link(out, st);
  put_value(out, "counter", "airetry_trace_spans_exported_total",
            "Trace spans the OTLP collector accepted.",
            m->spans_exported ? atomic_load(m->spans_exported) : 0);
  put_value(out, "counter", "airetry_trace_spans_dropped_total",
            "Trace spans dropped: the export queue was full, or the "
            "collector failed or refused their batch.",
            m->spans_dropped ? atomic_load(m->spans_dropped) : 0);
  put_head(out, "airetry_breaker_state",
           "Breaker per target: 0 closed, 1 open, 2 half-open.", "gauge");
  for (const cell *c = m->first; air__buf_error(out) == 0 && c != NULL;
       c = c->next_all) {
    if (c->kind != K_TARGET || c == m->other_target) continue;
    air_breaker_mode b = air_state_breaker(st, c->name, now_ms);
    int v = b == AIR_BREAKER_OPEN ? 1 : b == AIR_BREAKER_HALF_OPEN ? 2 : 0;
    air__buf_puts(out, "airetry_breaker_state{target=");
    put_label(out, c->name);
    air__buf_puts(out, "} ");
    air__buf_putu(out, (unsigned long long)v);
    air__buf_putc(out, '\n');
  }
  put_histogram(out, "airetry_first_content_seconds",
                "Time from request to first content released.",
                &m->first_content);
  put_histogram(out, "airetry_request_seconds", "Time from request to its end.",
                &m->total);
  put_histogram(out, "airetry_overhead_seconds",
                "Gateway self-time: time not spent waiting for upstreams or "
                "backoffs.",
                &m->self);
  pthread_mutex_unlock(&m->mu);
  rc = air__buf_error(out);
  if (rc != 0 && out->p != NULL) {
    out->n = start; /* no partial exposition is left behind */
    out->p[start] = '\0';
  }
  return rc;
}
