/*
 * Shared helpers for the unit tests: config from YAML text, a fake clock and
 * a seeded random source. Header-only so each test stays one file.
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

#endif
