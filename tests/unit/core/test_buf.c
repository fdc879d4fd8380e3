/* Unit tests for src/core/buf.c: a buffer started in caller storage
 * (air__buf_init_on) against one on the heap, at every length around the
 * storage's size. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "airetry.h"
#include "buf.h"

#define STORE 16

/* The same appends to a heap buffer and to one on 16 bytes of stack give
 * the same bytes, for every length from 0 to 64; the stack storage is used
 * while the text fits (n < STORE, with its NUL) and never after. */
static void test_on_stack_matches_heap(void **state) {
  (void)state;
  for (size_t len = 0; len <= 64; len++) {
    char mem[STORE + 1];
    mem[STORE] = 'X'; /* a guard past the storage */
    air__buf h, s;
    air__buf_init(&h, 1024);
    air__buf_init_on(&s, 1024, mem, STORE);
    assert_non_null(s.p);
    assert_string_equal(s.p, "");
    for (size_t i = 0; i < len; i++) {
      char c = (char)('a' + i % 26);
      assert_int_equal(air__buf_addc(&h, c), 0);
      assert_int_equal(air__buf_addc(&s, c), 0);
    }
    assert_int_equal(s.n, h.n);
    if (len > 0) assert_memory_equal(s.p, h.p, len + 1);
    assert_true(s.stack == (len + 1 <= STORE));
    assert_true((s.p == mem) == (len + 1 <= STORE));
    assert_int_equal(mem[STORE], 'X');
    air__buf_cleanup(&h);
    air__buf_cleanup(&s); /* frees only a heap copy */
    assert_null(s.p);
    assert_false(s.stack);
  }
}

/* The maximum holds for caller storage as for the heap: a failed append
 * leaves the text as it was. */
static void test_on_stack_max(void **state) {
  (void)state;
  char mem[64];
  air__buf s;
  air__buf_init_on(&s, 8, mem, sizeof(mem));
  assert_int_equal(air__buf_adds(&s, "12345678"), 0);
  assert_int_equal(air__buf_addc(&s, '9'), AIR_ETOOBIG);
  assert_int_equal(air__buf_error(&s), AIR_ETOOBIG);
  assert_string_equal(s.p, "12345678");
  air__buf_reset(&s);
  assert_int_equal(s.n, 0);
  assert_ptr_equal(s.p, mem);
  air__buf_cleanup(&s);
}

/* air__buf_take of caller storage hands out a heap copy the caller frees. */
static void test_take_copies(void **state) {
  (void)state;
  char mem[32];
  air__buf s;
  air__buf_init_on(&s, 1024, mem, sizeof(mem));
  assert_int_equal(air__buf_adds(&s, "head"), 0);
  size_t n = 0;
  char *p = air__buf_take(&s, &n);
  assert_non_null(p);
  assert_ptr_not_equal(p, mem);
  assert_int_equal(n, 4);
  assert_string_equal(p, "head");
  memset(mem, 0, sizeof(mem)); /* the copy does not depend on it */
  assert_string_equal(p, "head");
  free(p);
  assert_null(s.p);
  assert_int_equal(s.n, 0);
  air__buf_cleanup(&s);
}

/* A JSON string built past the storage moves to the heap intact. */
static void test_json_str_across(void **state) {
  (void)state;
  char mem[8];
  air__buf s;
  air__buf_init_on(&s, 1024, mem, sizeof(mem));
  assert_int_equal(air__buf_add_json_str(&s, "a\"b\n\x01z", 6), 0);
  assert_string_equal(s.p, "\"a\\\"b\\n\\u0001z\"");
  assert_false(s.stack);
  air__buf_cleanup(&s);
}

/* air__buf_reserve allocates exactly the room asked once, then appends
 * within it allocate nothing; past max it reserves up to max. */
static void test_reserve(void **state) {
  (void)state;
  air__buf b;
  air__buf_init(&b, 1000);
  assert_int_equal(air__buf_reserve(&b, 300), 0);
  assert_int_equal(b.cap, 301);
  char *p = b.p;
  for (int i = 0; i < 300; i++) assert_int_equal(air__buf_addc(&b, 'x'), 0);
  assert_ptr_equal(b.p, p); /* no realloc while within the reservation */
  assert_int_equal(b.n, 300);
  assert_int_equal(air__buf_reserve(&b, 10), 0); /* grows to exactly 311 */
  assert_int_equal(b.cap, 311);
  assert_int_equal(air__buf_reserve(&b, 5), 0); /* already there */
  assert_int_equal(b.cap, 311);
  assert_int_equal(air__buf_reserve(&b, 1u << 20), 0); /* up to max */
  assert_int_equal(b.cap, 1001);
  assert_int_equal(b.n, 300);
  assert_int_equal(air__buf_error(&b), 0);
  air__buf_cleanup(&b);
  /* From caller storage: the reservation moves the text to the heap. */
  char mem[8];
  air__buf s;
  air__buf_init_on(&s, 1000, mem, sizeof(mem));
  assert_int_equal(air__buf_adds(&s, "abc"), 0);
  assert_int_equal(air__buf_reserve(&s, 100), 0);
  assert_false(s.stack);
  assert_string_equal(s.p, "abc");
  air__buf_cleanup(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_on_stack_matches_heap),
      cmocka_unit_test(test_on_stack_max),
      cmocka_unit_test(test_take_copies),
      cmocka_unit_test(test_json_str_across),
      cmocka_unit_test(test_reserve),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
