/* Unit tests for src/core/pool.c: blocks come back zeroed, the list is
 * bounded, cleanup empties it, a NULL pool is calloc and free. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pool.h"

#define SIZE 2304

static void assert_zero(const unsigned char *m, size_t n) {
  for (size_t i = 0; i < n; i++) assert_int_equal(m[i], 0);
}

/* A block given back dirty is the next one taken, zeroed as calloc's. */
static void test_reuse_is_zeroed(void **state) {
  (void)state;
  air__pool p;
  memset(&p, 0, sizeof(p));
  unsigned char *a = air__pool_take(&p, SIZE);
  assert_non_null(a);
  assert_zero(a, SIZE);
  memset(a, 0xA5, SIZE);
  air__pool_put(&p, a, SIZE);
  assert_int_equal(p.n, 1);
  unsigned char *b = air__pool_take(&p, SIZE);
  assert_ptr_equal(a, b); /* the same memory: reused, not a new calloc */
  assert_int_equal(p.n, 0);
  assert_zero(b, SIZE);
  air__pool_put(&p, b, SIZE);
  air__pool_cleanup(&p);
  assert_int_equal(p.n, 0);
}

/* At most AIR__POOL_MAX wait; the one more is freed (ASan/valgrind see
 * no leak), and taking them all back empties the list in LIFO order. */
static void test_bounded(void **state) {
  (void)state;
  air__pool p;
  memset(&p, 0, sizeof(p));
  void *m[AIR__POOL_MAX + 1];
  for (size_t i = 0; i < AIR__POOL_MAX + 1; i++) {
    m[i] = air__pool_take(&p, 64);
    assert_non_null(m[i]);
  }
  for (size_t i = 0; i < AIR__POOL_MAX + 1; i++) air__pool_put(&p, m[i], 64);
  assert_int_equal(p.n, AIR__POOL_MAX);
  void *last = air__pool_take(&p, 64);
  assert_ptr_equal(last, m[AIR__POOL_MAX - 1]);
  air__pool_put(&p, last, 64);
  air__pool_cleanup(&p);
  assert_int_equal(p.n, 0);
  air__pool_put(&p, NULL, 64); /* nothing */
  assert_int_equal(p.n, 0);
}

/* No pool: plain calloc and free. */
static void test_null_pool(void **state) {
  (void)state;
  unsigned char *a = air__pool_take(NULL, SIZE);
  assert_non_null(a);
  assert_zero(a, SIZE);
  air__pool_put(NULL, a, SIZE);
  air__pool_cleanup(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reuse_is_zeroed),
      cmocka_unit_test(test_bounded),
      cmocka_unit_test(test_null_pool),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
