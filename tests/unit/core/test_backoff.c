/* Unit tests for src/core/backoff.c: backoff tables, jitter, rng helpers. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "backoff.h"

static air_rng splitmix(uint64_t *seed) {
  air_rng r = {air__splitmix64, seed};
  return r;
}

/* A scripted source: returns vals[0], vals[1], ... and counts the draws. */
typedef struct script {
  const uint64_t *vals;
  size_t n;
  size_t next;
} script;

static uint64_t script_next(void *data) {
  script *s = data;
  assert_true(s->next < s->n); /* drawing more than scripted is a bug */
  return s->vals[s->next++];
}

/* Known splitmix64 outputs (Vigna's reference implementation). */
static void test_splitmix64_reference(void **state) {
  (void)state;
  uint64_t s = 0;
  assert_true(air__splitmix64(&s) == 0xe220a8397b1dcdafull);
  assert_true(air__splitmix64(&s) == 0x6e789e6aa1b965f4ull);
  assert_true(air__splitmix64(&s) == 0x06c45d188009454full);
  s = 1234567;
  assert_true(air__splitmix64(&s) == 6457827717110365317ull);
  assert_true(air__splitmix64(&s) == 3203168211198807973ull);
  assert_true(air__splitmix64(&s) == 9817491932198370423ull);
  assert_true(air__splitmix64(&s) == 4593380528125082431ull);
  assert_true(air__splitmix64(&s) == 16408922859458223821ull);
}

static void test_none_table(void **state) {
  (void)state;
  air__backoff b = {500, 2.0, 8000, AIR__JITTER_NONE};
  const uint64_t want[] = {500, 1000, 2000, 4000, 8000, 8000, 8000};
  for (unsigned n = 1; n <= 7; n++)
    assert_int_equal(air__backoff_wait(&b, n, NULL), want[n - 1]);
  /* n = 0 counts as the first wait. */
  assert_int_equal(air__backoff_wait(&b, 0, NULL), 500);

  air__backoff b2 = {250, 2.0, 4000, AIR__JITTER_NONE};
  const uint64_t want2[] = {250, 500, 1000, 2000, 4000, 4000};
  for (unsigned n = 1; n <= 6; n++)
    assert_int_equal(air__backoff_wait(&b2, n, NULL), want2[n - 1]);

  /* Non-integer factor: fractions of a ms are dropped. */
  air__backoff b3 = {100, 1.5, 1000, AIR__JITTER_NONE};
  const uint64_t want3[] = {100, 150, 225, 337, 506, 759, 1000};
  for (unsigned n = 1; n <= 7; n++)
    assert_int_equal(air__backoff_wait(&b3, n, NULL), want3[n - 1]);

  /* factor 1: constant; base above max: clipped at once. */
  air__backoff b4 = {300, 1.0, 8000, AIR__JITTER_NONE};
  assert_int_equal(air__backoff_wait(&b4, 100, NULL), 300);
  air__backoff b5 = {9000, 2.0, 8000, AIR__JITTER_NONE};
  assert_int_equal(air__backoff_wait(&b5, 1, NULL), 8000);
}

/* Huge n saturates at max_ms: no overflow, NaN or wrap to a small value. */
static void test_saturation(void **state) {
  (void)state;
  air__backoff b = {500, 2.0, 8000, AIR__JITTER_NONE};
  assert_int_equal(air__backoff_wait(&b, 1000, NULL), 8000);
  assert_int_equal(air__backoff_wait(&b, UINT32_MAX, NULL), 8000);
  assert_int_equal(air__backoff_wait(&b, 64, NULL), 8000);
  assert_int_equal(air__backoff_wait(&b, 65, NULL), 8000);

  /* max_ms at the top of the range: the value still never wraps. */
  air__backoff big = {UINT64_MAX / 2, 2.0, UINT64_MAX, AIR__JITTER_NONE};
  assert_true(air__backoff_wait(&big, 1000, NULL) == UINT64_MAX);
  assert_true(air__backoff_wait(&big, 3, NULL) == UINT64_MAX);

  air__backoff inf = {500, INFINITY, 8000, AIR__JITTER_NONE};
  assert_int_equal(air__backoff_wait(&inf, 1, NULL), 500);
  assert_int_equal(air__backoff_wait(&inf, 2, NULL), 8000);

  air__backoff zero = {0, INFINITY, 8000, AIR__JITTER_NONE};
  assert_int_equal(air__backoff_wait(&zero, 5, NULL), 0);

  air__backoff nan_factor = {500, NAN, 8000, AIR__JITTER_NONE};
  assert_int_equal(air__backoff_wait(&nan_factor, 9, NULL), 500);

  /* Full jitter at saturation stays within [0, max]. */
  uint64_t seed = 7;
  air_rng r = splitmix(&seed);
  air__backoff full = {500, 2.0, 8000, AIR__JITTER_FULL};
  for (int i = 0; i < 1000; i++)
    assert_true(air__backoff_wait(&full, 1000, &r) <= 8000);
}

/* Expected values computed independently (Python splitmix64 + rejection). */
static void test_full_exact(void **state) {
  (void)state;
  uint64_t seed = 42;
  air_rng r = splitmix(&seed);
  air__backoff b = {500, 2.0, 8000, AIR__JITTER_FULL};
  const uint64_t want[] = {73, 313, 168, 542, 7279, 4974};
  for (unsigned n = 1; n <= 6; n++)
    assert_int_equal(air__backoff_wait(&b, n, &r), want[n - 1]);
}

static void test_equal_exact(void **state) {
  (void)state;
  uint64_t seed = 42;
  air_rng r = splitmix(&seed);
  air__backoff b = {500, 2.0, 8000, AIR__JITTER_EQUAL};
  const uint64_t want[] = {472, 789, 1959, 2570, 4183, 6511};
  for (unsigned n = 1; n <= 6; n++)
    assert_int_equal(air__backoff_wait(&b, n, &r), want[n - 1]);
}

static void test_jitter_bounds(void **state) {
  (void)state;
  uint64_t seed = 0xdeadbeef;
  air_rng r = splitmix(&seed);
  air__backoff full = {500, 2.0, 8000, AIR__JITTER_FULL};
  air__backoff equal = {500, 2.0, 8000, AIR__JITTER_EQUAL};
  air__backoff odd = {3, 1.0, 8000, AIR__JITTER_EQUAL};
  int full_low = 0, full_high = 0, eq_low = 0, eq_high = 0;
  int odd_seen[4] = {0};
  for (int i = 0; i < 20000; i++) {
    unsigned n = 1 + (unsigned)(i % 6);
    uint64_t v = n >= 5 ? 8000 : 500ull << (n - 1);
    uint64_t f = air__backoff_wait(&full, n, &r);
    assert_true(f <= v);
    if (f < v / 4) full_low = 1;
    if (f > v - v / 4) full_high = 1;
    uint64_t e = air__backoff_wait(&equal, n, &r);
    assert_true(e >= v / 2 && e <= v);
    if (e < v / 2 + v / 8) eq_low = 1;
    if (e > v - v / 8) eq_high = 1;
    /* odd v = 3: 1 + uniform [0, 2], so the top value 3 is reachable */
    uint64_t o = air__backoff_wait(&odd, 1, &r);
    assert_true(o >= 1 && o <= 3);
    odd_seen[o]++;
  }
  assert_true(odd_seen[1] > 0 && odd_seen[2] > 0 && odd_seen[3] > 0);
  /* Jitter really spreads over the interval, not a constant. */
  assert_true(full_low && full_high && eq_low && eq_high);
}

/* Jitter none never draws; a NULL rng with jitter gives the plain value. */
static void test_none_draws_nothing(void **state) {
  (void)state;
  script s = {NULL, 0, 0};
  air_rng r = {script_next, &s};
  air__backoff b = {500, 2.0, 8000, AIR__JITTER_NONE};
  assert_int_equal(air__backoff_wait(&b, 3, &r), 2000);
  assert_int_equal(s.next, 0);
  air__backoff full = {500, 2.0, 8000, AIR__JITTER_FULL};
  assert_int_equal(air__backoff_wait(&full, 2, NULL), 1000);
}

static void test_rng_upto_uniform(void **state) {
  (void)state;
  uint64_t seed = 99;
  air_rng r = splitmix(&seed);
  int seen[4] = {0};
  for (int i = 0; i < 1000; i++) {
    uint64_t x = air__rng_upto(&r, 3);
    assert_true(x <= 3);
    seen[x]++;
  }
  for (int k = 0; k < 4; k++) {
    assert_true(seen[k] > 150); /* expected 250 each */
    assert_true(seen[k] < 350);
  }
  /* hi 0 is always 0 and draws nothing. */
  script s = {NULL, 0, 0};
  air_rng sr = {script_next, &s};
  assert_int_equal(air__rng_upto(&sr, 0), 0);
  assert_int_equal(s.next, 0);
}

/* Draws below 2^64 mod (hi+1) are rejected, not folded (no modulo bias). */
static void test_rng_upto_rejects(void **state) {
  (void)state;
  /* hi = 2^63: range 2^63+1, threshold 2^64 mod range = 2^63 - 1. */
  uint64_t hi = 1ull << 63;
  const uint64_t vals[] = {0, 5, (1ull << 63) - 2, (1ull << 63) - 1};
  script s = {vals, 4, 0};
  air_rng r = {script_next, &s};
  assert_true(air__rng_upto(&r, hi) == (1ull << 63) - 1);
  assert_int_equal(s.next, 4);

  const uint64_t vals2[] = {UINT64_MAX};
  script s2 = {vals2, 1, 0};
  air_rng r2 = {script_next, &s2};
  assert_true(air__rng_upto(&r2, hi) == (1ull << 63) - 2);

  /* hi = UINT64_MAX: the raw draw. */
  const uint64_t vals3[] = {0x123456789abcdef0ull};
  script s3 = {vals3, 1, 0};
  air_rng r3 = {script_next, &s3};
  assert_true(air__rng_upto(&r3, UINT64_MAX) == 0x123456789abcdef0ull);

  /* hi = 2: threshold 2^64 mod 3 = 1, so a 0 is rejected. */
  const uint64_t vals4[] = {0, 7};
  script s4 = {vals4, 2, 0};
  air_rng r4 = {script_next, &s4};
  assert_int_equal(air__rng_upto(&r4, 2), 1);
  assert_int_equal(s4.next, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_splitmix64_reference),
      cmocka_unit_test(test_none_table),
      cmocka_unit_test(test_saturation),
      cmocka_unit_test(test_full_exact),
      cmocka_unit_test(test_equal_exact),
      cmocka_unit_test(test_jitter_bounds),
      cmocka_unit_test(test_none_draws_nothing),
      cmocka_unit_test(test_rng_upto_uniform),
      cmocka_unit_test(test_rng_upto_rejects),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
