/*
 * Shared helpers for the unit tests: config from YAML text, a fake clock, a
 * seeded random source and a run of the engine in hand. Header-only; the
 * test library (tests/lib) holds the compiled ones.
 */
#ifndef AIR__TEST_HELPERS_H
#define AIR__TEST_HELPERS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "airetry.h"

static inline void test_print_diag(void *data, const air_diag *d) {
  (void)data;
  fprintf(stderr, "%s:%d:%d: %s: %s\n", d->file, d->line, d->column,
          d->severity == AIR_DIAG_ERROR ? "error" : "warning", d->message);
}

/* Loads a config from YAML text; fails the test on any error. */
static inline air_config *test_config(const char *yaml) {
  air_config *cfg = NULL;
  int rc = air_config_parse("test.yaml", yaml, strlen(yaml), test_print_diag,
                            NULL, &cfg);
  assert_int_equal(rc, 0);
  assert_non_null(cfg);
  return cfg;
}

/* A fake clock: sleep advances time; a cancel token still ends it. */
typedef struct test_clock {
  uint64_t now;
  uint64_t wall;
  uint64_t slept;  /* total ms slept */
  unsigned sleeps; /* number of sleeps */
} test_clock;

static inline uint64_t test_clock_now(void *d) {
  return ((test_clock *)d)->now;
}
static inline uint64_t test_clock_wall(void *d) {
  return ((test_clock *)d)->wall;
}
static inline int test_clock_sleep(void *d, uint64_t ms, air_cancel *c) {
  test_clock *tc = d;
  if (air_cancel_is_set(c)) return 1;
  tc->now += ms;
  tc->wall += ms;
  tc->slept += ms;
  tc->sleeps++;
  return 0;
}
static inline air_clock test_clock_iface(test_clock *tc) {
  air_clock c = {test_clock_now, test_clock_wall, test_clock_sleep, tc};
  return c;
}

/* splitmix64, independent of the library's, for reproducible jitter. */
static inline uint64_t test_rng_next(void *d) {
  uint64_t *s = d;
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* A run of the engine on a config from YAML, driven by hand: the test
 * holds the time (now, ms) and the action the engine asked for (act). */
typedef struct test_run {
  air_config *cfg;
  air_state *st;
  air_run *run;
  air_action act;
  uint64_t now;
  uint64_t seed;
  air_rng rng;
} test_run;

/* A new run on model (the previous one freed), at now. */
static inline void test_run_again(test_run *f, const char *model) {
  air_run_free(f->run);
  f->run = NULL;
  assert_int_equal(
      air_run_new(f->cfg, f->st, model, &f->rng, f->now, &f->run, &f->act), 0);
}

/* The config, a fresh state, now 1000 and the random source seeded with
 * seed, then a run on model. */
static inline void test_run_start(test_run *f, const char *yaml,
                                  const char *model, uint64_t seed) {
  memset(f, 0, sizeof(*f));
  f->cfg = test_config(yaml);
  assert_int_equal(air_state_new(f->cfg, &f->st, NULL), 0);
  f->now = 1000;
  f->seed = seed;
  f->rng.next = test_rng_next;
  f->rng.data = &f->seed;
  test_run_again(f, model);
}

static inline void test_run_end(test_run *f) {
  air_run_free(f->run);
  air_state_free(f->st);
  air_config_free(f->cfg);
}

/* Attempt id failed with reason and status (message "boom", headers h),
 * at now and wall_ms. */
static inline void test_run_fail(test_run *f, unsigned id, air_reason reason,
                                 int status, const air_header *h, size_t nh,
                                 uint64_t wall_ms) {
  air_failure fl = {0};
  fl.reason = reason;
  fl.status = status;
  fl.message = "boom";
  fl.headers = h;
  fl.n_headers = nh;
  assert_int_equal(air_run_fail(f->run, id, &fl, f->now, wall_ms, &f->act), 0);
}

#endif
