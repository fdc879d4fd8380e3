/*
 * Counters keyed by label strings live in small open lists (routes and
 * targets come from the config, so there are few); label values are
 * escaped when rendered. Bounded: past MAX_SERIES new label sets are folded
 * into one "other" series instead of growing without end.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

#define MAX_SERIES 4096
#define N_BUCKETS 12

static const double bucket_s[N_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                           0.5,   1,    2.5,   5,    10,  30};

typedef struct series {
  char *a;  /* first label value */
  char *b;  /* second label value (may be NULL) */
  uint64_t n;
} series;

typedef struct counter {
  series *s;
  size_t n, cap;
} counter;

typedef struct histogram {
  uint64_t buckets[N_BUCKETS];
  uint64_t count;
  double sum_s;
} histogram;

struct air__metrics {
  pthread_mutex_t mu;
  counter requests;  /* route, outcome */
  counter attempts;  /* target, reason */
  counter targets;   /* target (breaker gauge), n unused */
  uint64_t retries;
  uint64_t switches;
  uint64_t malformed;
  uint64_t worker_restarts;
  const _Atomic uint64_t *log_dropped;
  histogram first_content;
  histogram total;
  histogram self;
};

int air__metrics_new(air__metrics **out) {
  air__metrics *m = calloc(1, sizeof(*m));
  if (m == NULL) return AIR_ENOMEM;
  pthread_mutex_init(&m->mu, NULL);
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

static void counter_free(counter *c) {
  for (size_t i = 0; i < c->n; i++) {
    free(c->s[i].a);
    free(c->s[i].b);
  }
  free(c->s);
}

void air__metrics_free(air__metrics *m) {
  if (m == NULL) return;
  counter_free(&m->requests);
  counter_free(&m->attempts);
  counter_free(&m->targets);
  pthread_mutex_destroy(&m->mu);
  free(m);
}

static char *dup_or_null(const char *s) {
  if (s == NULL) return NULL;
  size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

static bool same(const char *x, const char *y) {
  if (x == NULL || y == NULL) return x == y;
  return strcmp(x, y) == 0;
}

/* Adds v to the series (a, b), creating it (or "other" when full). */
static void add(counter *c, const char *a, const char *b, uint64_t v) {
  for (size_t i = 0; i < c->n; i++)
    if (same(c->s[i].a, a) && same(c->s[i].b, b)) {
      c->s[i].n += v;
      return;
    }
  if (c->n >= MAX_SERIES) {
    a = "other";
    b = b ? "other" : NULL;
    for (size_t i = 0; i < c->n; i++)
      if (same(c->s[i].a, a) && same(c->s[i].b, b)) {
        c->s[i].n += v;
        return;
      }
  }
  if (c->n == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 16;
    series *s = realloc(c->s, cap * sizeof(*s));
    if (s == NULL) return;
    c->s = s;
    c->cap = cap;
  }
  series *s = &c->s[c->n];
  s->a = dup_or_null(a);
  s->b = dup_or_null(b);
  if (s->a == NULL || (b != NULL && s->b == NULL)) {
    free(s->a);
    free(s->b);
    return;
  }
  s->n = v;
  c->n++;
}

static void observe(histogram *h, uint64_t ms) {
  double s = (double)ms / 1000.0;
  for (int i = 0; i < N_BUCKETS; i++)
    if (s <= bucket_s[i]) h->buckets[i]++;
  h->count++;
  h->sum_s += s;
}

void air__metrics_request(air__metrics *m, const char *route,
                          const char *outcome, const air_attempt *log,
                          size_t n, uint64_t first_content_ms,
                          uint64_t total_ms, uint64_t self_ms,
                          unsigned malformed) {
  pthread_mutex_lock(&m->mu);
  add(&m->requests, route, outcome, 1);
  for (size_t i = 0; i < n; i++) {
    const char *r = log[i].reason == AIR_REASON_NONE ? "ok"
                                                     : air_reason_name(log[i].reason);
    add(&m->attempts, log[i].target, r, 1);
    add(&m->targets, log[i].target, NULL, 0);
    if (i > 0) {
      if (strcmp(log[i].target, log[i - 1].target) == 0)
        m->retries++;
      else
        m->switches++;
    }
  }
  m->malformed += malformed;
  if (first_content_ms > 0) observe(&m->first_content, first_content_ms);
  observe(&m->total, total_ms);
  observe(&m->self, self_ms);
  pthread_mutex_unlock(&m->mu);
}

/* A label value: backslash, quote and newline escaped. */
static int add_label(air__buf *out, const char *v) {
  int rc = air__buf_addc(out, '"');
  for (const char *p = v; rc == 0 && *p; p++) {
    if (*p == '\\' || *p == '"')
      rc = air__buf_addc(out, '\\') || air__buf_addc(out, *p);
    else if (*p == '\n')
      rc = air__buf_adds(out, "\\n");
    else
      rc = air__buf_addc(out, *p);
  }
  return rc ? rc : air__buf_addc(out, '"');
}

static int render_counter(air__buf *out, const char *name, const char *help,
                          const counter *c, const char *la, const char *lb) {
  int rc = air__buf_adds(out, "# HELP ");
  rc = rc || air__buf_adds(out, name) || air__buf_addc(out, ' ') ||
       air__buf_adds(out, help) || air__buf_adds(out, "\n# TYPE ") ||
       air__buf_adds(out, name) || air__buf_adds(out, " counter\n");
  for (size_t i = 0; rc == 0 && i < c->n; i++) {
    rc = air__buf_adds(out, name) || air__buf_addc(out, '{') ||
         air__buf_adds(out, la) || air__buf_addc(out, '=') ||
         add_label(out, c->s[i].a);
    if (rc == 0 && lb != NULL)
      rc = air__buf_addc(out, ',') || air__buf_adds(out, lb) ||
           air__buf_addc(out, '=') || add_label(out, c->s[i].b);
    rc = rc || air__buf_adds(out, "} ") || air__buf_addu(out, c->s[i].n) ||
         air__buf_addc(out, '\n');
  }
  return rc;
}

static int render_scalar(air__buf *out, const char *name, const char *help,
                         uint64_t v) {
  return air__buf_adds(out, "# HELP ") || air__buf_adds(out, name) ||
         air__buf_addc(out, ' ') || air__buf_adds(out, help) ||
         air__buf_adds(out, "\n# TYPE ") || air__buf_adds(out, name) ||
         air__buf_adds(out, " counter\n") || air__buf_adds(out, name) ||
         air__buf_addc(out, ' ') || air__buf_addu(out, v) ||
         air__buf_addc(out, '\n');
}

static int render_histogram(air__buf *out, const char *name, const char *help,
                            const histogram *h) {
  char line[160];
  int rc = air__buf_adds(out, "# HELP ") || air__buf_adds(out, name) ||
           air__buf_addc(out, ' ') || air__buf_adds(out, help) ||
           air__buf_adds(out, "\n# TYPE ") || air__buf_adds(out, name) ||
           air__buf_adds(out, " histogram\n");
  for (int i = 0; rc == 0 && i < N_BUCKETS; i++) {
    snprintf(line, sizeof(line), "%s_bucket{le=\"%g\"} %llu\n", name,
             bucket_s[i], (unsigned long long)h->buckets[i]);
    rc = air__buf_adds(out, line);
  }
  snprintf(line, sizeof(line),
           "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name,
           (unsigned long long)h->count, name, h->sum_s, name,
           (unsigned long long)h->count);
  return rc ? rc : air__buf_adds(out, line);
}

int air__metrics_render(air__metrics *m, air_state *st, uint64_t now_ms,
                        air__buf *out) {
  pthread_mutex_lock(&m->mu);
  int rc = render_counter(out, "airetry_requests_total",
                          "Requests by route and outcome.", &m->requests,
                          "route", "outcome");
  rc = rc || render_counter(out, "airetry_attempts_total",
                            "Upstream attempts by target and reason (ok: answered).",
                            &m->attempts, "target", "reason");
  rc = rc || render_scalar(out, "airetry_retries_total",
                           "Attempts on the same target as the one before.",
                           m->retries);
  rc = rc || render_scalar(out, "airetry_switches_total",
                           "Attempts on another target than the one before.",
                           m->switches);
  rc = rc || render_scalar(out, "airetry_malformed_events_total",
                           "Malformed upstream events skipped.", m->malformed);
  rc = rc || render_scalar(out, "airetry_worker_restarts_total",
                           "Worker processes the supervisor replaced after they "
                           "died.", m->worker_restarts);
  rc = rc || render_scalar(out, "airetry_log_lines_dropped_total",
                           "Log lines dropped because stderr did not keep up.",
                           m->log_dropped ? atomic_load(m->log_dropped) : 0);
  rc = rc || air__buf_adds(out,
                           "# HELP airetry_breaker_state Breaker per target: "
                           "0 closed, 1 open, 2 half-open.\n"
                           "# TYPE airetry_breaker_state gauge\n");
  for (size_t i = 0; rc == 0 && i < m->targets.n; i++) {
    air_breaker_mode b = air_state_breaker(st, m->targets.s[i].a, now_ms);
    int v = b == AIR_BREAKER_OPEN ? 1 : b == AIR_BREAKER_HALF_OPEN ? 2 : 0;
    rc = air__buf_adds(out, "airetry_breaker_state{target=") ||
         add_label(out, m->targets.s[i].a) || air__buf_adds(out, "} ") ||
         air__buf_addu(out, (unsigned long long)v) || air__buf_addc(out, '\n');
  }
  rc = rc || render_histogram(out, "airetry_first_content_seconds",
                              "Time from request to first content released.",
                              &m->first_content);
  rc = rc || render_histogram(out, "airetry_request_seconds",
                              "Time from request to its end.", &m->total);
  rc = rc || render_histogram(out, "airetry_overhead_seconds",
                              "Gateway self-time: time not spent waiting for "
                              "upstreams or backoffs.",
                              &m->self);
  pthread_mutex_unlock(&m->mu);
  return rc;
}
