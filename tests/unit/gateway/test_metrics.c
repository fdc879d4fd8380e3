/*
 * Gateway metrics (src/gateway/metrics.h): only configured routes and
 * targets become series, anything else is "other" and adds no series;
 * counts from several threads add up exactly; counters survive a new
 * config for the names it keeps, and a request still holding the old
 * config counts safely.
 */
#include "helpers.h"

#include <pthread.h>
#include <stdlib.h>

#include "metrics.h"

#define CFG_A                                                     \
  "providers:\n"                                                  \
  "  - {name: p, api: openai, base_url: http://127.0.0.1:1/v1}\n" \
  "routes:\n"                                                     \
  "  - {name: smart, targets: [p/a, p/b]}\n"                      \
  "  - {name: gone, targets: [p/g]}\n"

#define CFG_B                                                     \
  "providers:\n"                                                  \
  "  - {name: p, api: openai, base_url: http://127.0.0.1:1/v1}\n" \
  "routes:\n"                                                     \
  "  - {name: smart, targets: [p/a, p/b]}\n"                      \
  "  - {name: fresh, targets: [p/f]}\n"

/* The exposition, NUL-terminated (the caller frees it). */
static char *render(air__metrics *m) {
  air__buf b;
  air__buf_init(&b, 64u << 20);
  assert_int_equal(air__metrics_render(m, NULL, 0, &b), 0);
  assert_int_equal(air__buf_addc(&b, '\0'), 0);
  size_t n = 0;
  return air__buf_take(&b, &n);
}

/* The value of the line starting with `series ` (-1 when missing). */
static long long value(const char *text, const char *series) {
  size_t n = strlen(series);
  for (const char *p = text; p != NULL && *p;) {
    if (strncmp(p, series, n) == 0 && p[n] == ' ') return atoll(p + n + 1);
    p = strchr(p, '\n');
    if (p) p++;
  }
  return -1;
}

static size_t lines(const char *text) {
  size_t n = 0;
  for (const char *p = text; *p; p++) n += *p == '\n';
  return n;
}

static air_attempt attempt(const char *target, air_reason r) {
  air_attempt a;
  memset(&a, 0, sizeof(a));
  a.target = target;
  a.reason = r;
  a.message = "";
  a.request_id = "";
  return a;
}

static void test_configured_names_and_other(void **s) {
  (void)s;
  air_config *cfg = test_config(CFG_A);
  air__metrics *m = NULL;
  assert_int_equal(air__metrics_new(&m), 0);
  air_attempt log[2] = {attempt("p/a", AIR_REASON_OVERLOADED),
                        attempt("p/b", AIR_REASON_NONE)};
  air__metrics_request(m, cfg, "smart", "ok", log, 2, 5, 10, 1, 0);
  /* A direct request to a configured target: labelled by its name. */
  air_attempt d = attempt("p/a", AIR_REASON_BAD_REQUEST);
  air__metrics_request(m, cfg, "p/a", "error", &d, 1, 0, 10, 1, 0);
  /* Unknown route, unknown direct target: "other", also its attempts. */
  air__metrics_request(m, cfg, "junk", "rejected", NULL, 0, 0, 1, 1, 0);
  air_attempt j = attempt("p/junk", AIR_REASON_NOT_FOUND);
  air__metrics_request(m, cfg, "p/junk", "error", &j, 1, 0, 10, 1, 0);
  char *t = render(m);
  assert_int_equal(
      value(t, "airetry_requests_total{route=\"smart\",outcome=\"ok\"}"), 1);
  assert_int_equal(
      value(t, "airetry_requests_total{route=\"p/a\",outcome=\"error\"}"), 1);
  assert_int_equal(
      value(t, "airetry_requests_total{route=\"other\",outcome=\"rejected\"}"),
      1);
  assert_int_equal(
      value(t, "airetry_requests_total{route=\"other\",outcome=\"error\"}"), 1);
  assert_int_equal(
      value(t, "airetry_attempts_total{target=\"p/a\",reason=\"overloaded\"}"),
      1);
  assert_int_equal(
      value(t, "airetry_attempts_total{target=\"p/b\",reason=\"ok\"}"), 1);
  assert_int_equal(
      value(t, "airetry_attempts_total{target=\"p/a\",reason=\"bad_request\"}"),
      1);
  assert_int_equal(
      value(t, "airetry_attempts_total{target=\"other\",reason=\"not_found\"}"),
      1);
  assert_null(strstr(t, "junk"));
  assert_int_equal(value(t, "airetry_switches_total"), 1);
  assert_int_equal(value(t, "airetry_request_seconds_count"), 4);
  assert_non_null(strstr(t, "airetry_request_seconds_sum 0.031\n"));
  /* Breaker gauges for configured targets only. */
  assert_non_null(strstr(t, "airetry_breaker_state{target=\"p/a\"} 0\n"));
  assert_null(strstr(t, "airetry_breaker_state{target=\"other\"}"));
  free(t);
  air__metrics_free(m);
  air_config_free(cfg);
}

/* Hedges (docs/design.md §3.6): airetry_hedges_total{route,outcome}; a racer
 * that lost is neither an attempt outcome nor a retry or switch. */
static void test_hedges(void **s) {
  (void)s;
  air_config *cfg = test_config(CFG_A);
  air__metrics *m = NULL;
  assert_int_equal(air__metrics_new(&m), 0);
  /* The hedge won; the primary lost. */
  air_attempt won[2] = {attempt("p/a", AIR_REASON_NONE),
                        attempt("p/b", AIR_REASON_NONE)};
  won[0].hedge_lost = true;
  won[1].hedge = true;
  air__metrics_request(m, cfg, "smart", "ok", won, 2, 5, 10, 1, 0);
  /* The primary won; the hedge lost. Then one whose hedge failed. */
  air_attempt lost[2] = {attempt("p/a", AIR_REASON_NONE),
                         attempt("p/b", AIR_REASON_NONE)};
  lost[1].hedge = lost[1].hedge_lost = true;
  air__metrics_request(m, cfg, "smart", "ok", lost, 2, 5, 10, 1, 0);
  air_attempt failed[2] = {attempt("p/a", AIR_REASON_NONE),
                           attempt("p/b", AIR_REASON_OVERLOADED)};
  failed[1].hedge = true;
  air__metrics_request(m, cfg, "smart", "ok", failed, 2, 5, 10, 1, 0);
  char *t = render(m);
  assert_int_equal(
      value(t, "airetry_hedges_total{route=\"smart\",outcome=\"won\"}"), 1);
  assert_int_equal(
      value(t, "airetry_hedges_total{route=\"smart\",outcome=\"lost\"}"), 1);
  assert_int_equal(
      value(t, "airetry_hedges_total{route=\"smart\",outcome=\"failed\"}"), 1);
  assert_int_equal(
      value(t, "airetry_attempts_total{target=\"p/a\",reason=\"ok\"}"), 2);
  assert_int_equal(
      value(t, "airetry_attempts_total{target=\"p/b\",reason=\"ok\"}"), 1);
  assert_int_equal(
      value(t, "airetry_attempts_total{target=\"p/b\",reason=\"overloaded\"}"),
      1);
  assert_int_equal(value(t, "airetry_switches_total"), 0);
  assert_int_equal(value(t, "airetry_retries_total"), 0);
  free(t);
  air__metrics_free(m);
  air_config_free(cfg);
}

/* Continuations (docs/design.md §3.5):
 * airetry_continuations_total{route,target, outcome}; names the config does not
 * define count as "other", unknown outcomes not at all. */
static void test_continuations(void **s) {
  (void)s;
  air_config *cfg = test_config(CFG_A);
  air__metrics *m = NULL;
  assert_int_equal(air__metrics_new(&m), 0);
  air__metrics_continuation(m, cfg, "smart", "p/b", "joined");
  air__metrics_continuation(m, cfg, "smart", "p/b", "joined");
  air__metrics_continuation(m, cfg, "smart", "p/a", "failed");
  air__metrics_continuation(m, cfg, "smart", "p/a", "prefill_rejected");
  air__metrics_continuation(m, cfg, "nope", "p/a", "joined");
  air__metrics_continuation(m, cfg, "smart", "q/zz", "failed");
  air__metrics_continuation(m, cfg, "smart", "p/a", "bogus");
  char *t = render(m);
  assert_non_null(strstr(t, "# TYPE airetry_continuations_total counter"));
  assert_int_equal(value(t,
                         "airetry_continuations_total{route=\"smart\",target="
                         "\"p/b\",outcome=\"joined\"}"),
                   2);
  assert_int_equal(value(t,
                         "airetry_continuations_total{route=\"smart\",target="
                         "\"p/a\",outcome=\"failed\"}"),
                   1);
  assert_int_equal(
      value(t,
            "airetry_continuations_total{route=\"smart\",target=\"p/a\","
            "outcome=\"prefill_rejected\"}"),
      1);
  assert_int_equal(value(t,
                         "airetry_continuations_total{route=\"other\",target="
                         "\"other\",outcome=\"joined\"}"),
                   1);
  assert_int_equal(value(t,
                         "airetry_continuations_total{route=\"smart\",target="
                         "\"other\",outcome=\"failed\"}"),
                   1);
  assert_null(strstr(t, "bogus"));
  free(t);
  air__metrics_free(m);
  air_config_free(cfg);
}

/*
 * A render that does not fit passes the buffer's own error on (not a bare
 * 1), whatever family it stops in, and the buffer keeps its maximum.
 */
static void test_render_error_is_passed_on(void **s) {
  (void)s;
  air_config *cfg = test_config(CFG_A);
  air__metrics *m = NULL;
  assert_int_equal(air__metrics_new(&m), 0);
  air_attempt a = attempt("p/a", AIR_REASON_NONE);
  air__metrics_request(m, cfg, "smart", "ok", &a, 1, 5, 10, 1, 0);
  char *full = render(m);
  size_t n = strlen(full);
  free(full);
  for (size_t max = 0; max < n; max += 1 + max / 8) {
    air__buf b;
    air__buf_init(&b, max);
    assert_int_equal(air__metrics_render(m, NULL, 0, &b), AIR_ETOOBIG);
    assert_true(b.n <= max);
    air__buf_cleanup(&b);
  }
  air__buf b;
  air__buf_init(&b, n);
  assert_int_equal(air__metrics_render(m, NULL, 0, &b), 0);
  assert_int_equal(b.n, n);
  air__buf_cleanup(&b);
  air__metrics_free(m);
  air_config_free(cfg);
}

/* 10,000 distinct junk models (routes and direct targets) add no line. */
static void test_junk_models_do_not_grow_the_output(void **s) {
  (void)s;
  air_config *cfg = test_config(CFG_A);
  air__metrics *m = NULL;
  assert_int_equal(air__metrics_new(&m), 0);
  air_attempt j = attempt("p/x", AIR_REASON_NOT_FOUND);
  air__metrics_request(m, cfg, "junk-0", "rejected", NULL, 0, 0, 1, 1, 0);
  air__metrics_request(m, cfg, "p/junk-0", "error", &j, 1, 0, 1, 1, 0);
  char *before = render(m);
  char name[64];
  for (int i = 1; i <= 10000; i++) {
    snprintf(name, sizeof(name), "junk-%d", i);
    air__metrics_request(m, cfg, name, "rejected", NULL, 0, 0, 1, 1, 0);
    snprintf(name, sizeof(name), "p/junk-%d", i);
    j.target = name;
    air__metrics_request(m, cfg, name, "error", &j, 1, 0, 1, 1, 0);
  }
  char *after = render(m);
  assert_int_equal(lines(after), lines(before));
  assert_int_equal(
      value(after,
            "airetry_requests_total{route=\"other\",outcome=\"rejected\"}"),
      10001);
  assert_int_equal(
      value(after,
            "airetry_attempts_total{target=\"other\",reason=\"not_found\"}"),
      10001);
  free(before);
  free(after);
  air__metrics_free(m);
  air_config_free(cfg);
}

/* Two threads counting at once: every count is exact. */
enum { PER_THREAD = 100000 };

typedef struct counting {
  air__metrics *m;
  const air_config *cfg;
  const char *model;
} counting;

static void *count_main(void *p) {
  counting *c = p;
  air_attempt log[2] = {attempt("p/a", AIR_REASON_RATE_LIMIT),
                        attempt("p/a", AIR_REASON_NONE)};
  for (int i = 0; i < PER_THREAD; i++)
    air__metrics_request(c->m, c->cfg, c->model, "ok", log, 2, 3, 7, 1, 1);
  return NULL;
}

static void test_two_threads_add_up(void **s) {
  (void)s;
  air_config *cfg = test_config(CFG_A);
  air__metrics *m = NULL;
  assert_int_equal(air__metrics_new(&m), 0);
  counting c[2] = {{m, cfg, "smart"}, {m, cfg, "smart"}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&th[i], NULL, count_main, &c[i]), 0);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  char *t = render(m);
  long long total = 2LL * PER_THREAD;
  assert_int_equal(
      value(t, "airetry_requests_total{route=\"smart\",outcome=\"ok\"}"),
      total);
  assert_int_equal(
      value(t, "airetry_attempts_total{target=\"p/a\",reason=\"rate_limit\"}"),
      total);
  assert_int_equal(
      value(t, "airetry_attempts_total{target=\"p/a\",reason=\"ok\"}"), total);
  assert_int_equal(value(t, "airetry_retries_total"), total);
  assert_int_equal(value(t, "airetry_malformed_events_total"), total);
  assert_int_equal(value(t, "airetry_request_seconds_count"), total);
  assert_int_equal(value(t, "airetry_first_content_seconds_count"), total);
  assert_int_equal(value(t, "airetry_request_seconds_bucket{le=\"0.01\"}"),
                   total);
  free(t);
  air__metrics_free(m);
  air_config_free(cfg);
}

/* A new config: kept names keep counting up, a request under the old config
 * counts into the same series, new names appear, an old name's series stays
 * (a counter never goes back); the old config can be freed. Many first
 * sightings from two threads at once (the table grows while read). */
static void test_reload_keeps_counters(void **s) {
  (void)s;
  air_config *a = test_config(CFG_A);
  air_config *b = test_config(CFG_B);
  air__metrics *m = NULL;
  assert_int_equal(air__metrics_new(&m), 0);
  air__metrics_request(m, a, "smart", "ok", NULL, 0, 0, 1, 1, 0);
  air__metrics_request(m, a, "gone", "ok", NULL, 0, 0, 1, 1, 0);
  air__metrics_request(m, b, "smart", "ok", NULL, 0, 0, 1, 1, 0);
  air__metrics_request(m, a, "smart", "ok", NULL, 0, 0, 1, 1, 0); /* old */
  air__metrics_request(m, b, "fresh", "ok", NULL, 0, 0, 1, 1, 0);
  air__metrics_request(m, b, "gone", "ok", NULL, 0, 0, 1, 1, 0); /* not now */
  air_config_free(a);
  char *t = render(m);
  assert_int_equal(
      value(t, "airetry_requests_total{route=\"smart\",outcome=\"ok\"}"), 3);
  assert_int_equal(
      value(t, "airetry_requests_total{route=\"gone\",outcome=\"ok\"}"), 1);
  assert_int_equal(
      value(t, "airetry_requests_total{route=\"fresh\",outcome=\"ok\"}"), 1);
  assert_int_equal(
      value(t, "airetry_requests_total{route=\"other\",outcome=\"ok\"}"), 1);
  free(t);
  air__metrics_free(m);
  air_config_free(b);
}

/* A config of many routes, first counted from two threads at once. */
static void *many_main(void *p) {
  counting *c = p;
  char name[32];
  for (int i = 0; i < 300; i++) {
    snprintf(name, sizeof(name), "r%d", i);
    air__metrics_request(c->m, c->cfg, name, "ok", NULL, 0, 0, 1, 1, 0);
  }
  return NULL;
}

static void test_many_routes_from_two_threads(void **s) {
  (void)s;
  air__buf y;
  air__buf_init(&y, 1u << 20);
  assert_int_equal(air__buf_adds(&y,
                                 "providers:\n  - {name: p, api: openai, "
                                 "base_url: http://127.0.0.1:1/v1}\nroutes:\n"),
                   0);
  char line[64];
  for (int i = 0; i < 300; i++) {
    snprintf(line, sizeof(line), "  - {name: r%d, targets: [p/m]}\n", i);
    assert_int_equal(air__buf_adds(&y, line), 0);
  }
  assert_int_equal(air__buf_addc(&y, '\0'), 0);
  air_config *cfg = test_config(y.p);
  air__buf_cleanup(&y);
  air__metrics *m = NULL;
  assert_int_equal(air__metrics_new(&m), 0);
  counting c = {m, cfg, NULL};
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&th[i], NULL, many_main, &c), 0);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  char *t = render(m);
  for (int i = 0; i < 300; i++) {
    snprintf(line, sizeof(line),
             "airetry_requests_total{route=\"r%d\",outcome=\"ok\"}", i);
    assert_int_equal(value(t, line), 2);
  }
  free(t);
  air__metrics_free(m);
  air_config_free(cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_configured_names_and_other),
      cmocka_unit_test(test_hedges),
      cmocka_unit_test(test_continuations),
      cmocka_unit_test(test_junk_models_do_not_grow_the_output),
      cmocka_unit_test(test_two_threads_add_up),
      cmocka_unit_test(test_reload_keeps_counters),
      cmocka_unit_test(test_many_routes_from_two_threads),
      cmocka_unit_test(test_render_error_is_passed_on),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
