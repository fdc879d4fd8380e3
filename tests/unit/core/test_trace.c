/*
 * Unit tests for src/core/trace.c: the W3C traceparent parser (valid,
 * every kind of malformed, split at every length), formatting, span id
 * derivation and the ratio sampler with fixed trace ids.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "airetry.h"
#include "trace.h"

#define GOOD "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

/* Parses a copy in an exact-size heap block (ASan sees any overread). */
static int parse(const char *s, size_t n, air__span_ctx *c) {
  char *p = malloc(n ? n : 1);
  assert_non_null(p);
  memcpy(p, s, n);
  int rc = air__traceparent_parse(p, n, c);
  free(p);
  return rc;
}

static int parse_s(const char *s, air__span_ctx *c) {
  return parse(s, strlen(s), c);
}

static void valid_header_parses(void **state) {
  (void)state;
  air__span_ctx c;
  assert_int_equal(parse_s(GOOD, &c), 0);
  static const uint8_t tid[16] = {0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3,
                                  0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d,
                                  0x0e, 0x0e, 0x47, 0x36};
  static const uint8_t sid[8] = {0x00, 0xf0, 0x67, 0xaa,
                                 0x0b, 0xa9, 0x02, 0xb7};
  assert_memory_equal(c.trace_id, tid, 16);
  assert_memory_equal(c.span_id, sid, 8);
  assert_int_equal(c.flags, 1);
  char out[AIR__TRACEPARENT_LEN + 1];
  air__traceparent_format(&c, out);
  assert_string_equal(out, GOOD);
  /* Not sampled, other flag bits kept. */
  assert_int_equal(
      parse_s("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", &c),
      0);
  assert_int_equal(c.flags, 0);
  assert_int_equal(
      parse_s("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff", &c),
      0);
  assert_int_equal(c.flags, 0xff);
  /* A later version may carry more after a '-'. */
  assert_int_equal(
      parse_s(
          "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-ever",
          &c),
      0);
  assert_int_equal(
      parse_s("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", &c),
      0);
}

static void malformed_headers_are_refused(void **state) {
  (void)state;
  static const char *const bad[] = {
      "",
      "00",
      /* uppercase hex */
      "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A",
      /* all-zero ids */
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
      /* version ff, bad version */
      "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      /* version 00 with anything after it */
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 ",
      /* later version, more without a '-' */
      "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
      /* separators */
      "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",
      /* short fields */
      "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-701",
      /* blanks and non-hex */
      " 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
      "00-4bf92f3577b34da6a3ce929d0e0e47 6-00f067aa0ba902b7-01",
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba9z2b7-01",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    air__span_ctx c;
    memset(&c, 0xaa, sizeof(c));
    air__span_ctx before = c;
    if (parse_s(bad[i], &c) != AIR_EPARSE) fail_msg("accepted: '%s'", bad[i]);
    assert_memory_equal(&c, &before, sizeof(c)); /* untouched */
  }
  air__span_ctx c;
  assert_int_equal(air__traceparent_parse(NULL, 0, &c), AIR_EPARSE);
  /* Every prefix of a good header is refused (no read past n). */
  for (size_t n = 0; n < strlen(GOOD); n++)
    assert_int_equal(parse(GOOD, n, &c), AIR_EPARSE);
  /* A NUL inside is not the end of the value. */
  char nul[AIR__TRACEPARENT_LEN];
  memcpy(nul, GOOD, sizeof(nul));
  nul[40] = '\0';
  assert_int_equal(parse(nul, sizeof(nul), &c), AIR_EPARSE);
}

static void span_ids_derive_stably(void **state) {
  (void)state;
  uint8_t a[8], b[8], c[8];
  air__span_id_derive(12345, 1, a);
  air__span_id_derive(12345, 1, b);
  air__span_id_derive(12345, 2, c);
  assert_memory_equal(a, b, 8);
  assert_memory_not_equal(a, c, 8);
  air__span_id_derive(12346, 1, b);
  assert_memory_not_equal(a, b, 8);
  for (unsigned i = 0; i < 100000; i++) {
    air__span_id_derive(0xdeadbeefull * i, i, a);
    assert_false(air__id_zero(a, 8));
  }
  char hex[17];
  uint8_t id[8] = {0x00, 0x01, 0xab, 0xcd, 0xef, 0x10, 0x99, 0xff};
  air__hex(id, 8, hex);
  assert_string_equal(hex, "0001abcdef1099ff");
}

/* A trace id whose last 8 bytes are v (big-endian). */
static void tid_of(uint64_t v, uint8_t tid[16]) {
  memset(tid, 0x5a, 8);
  for (int i = 15; i >= 8; i--) {
    tid[i] = (uint8_t)v;
    v >>= 8;
  }
}

static void sampler_ratio_and_parent(void **state) {
  (void)state;
  uint8_t tid[16];
  air__sampler half = {true, 0.5};
  /* (x >> 1) < 2^62: kept up to 2^63 - 1, not from 2^63 on. */
  tid_of(0, tid);
  assert_true(air__sample(&half, NULL, tid));
  tid_of(0x7fffffffffffffffull, tid);
  assert_true(air__sample(&half, NULL, tid));
  tid_of(0x8000000000000000ull, tid);
  assert_false(air__sample(&half, NULL, tid));
  tid_of(UINT64_MAX, tid);
  assert_false(air__sample(&half, NULL, tid));
  air__sampler all = {true, 1.0}, none = {true, 0.0};
  assert_true(air__sample(&all, NULL, tid));
  tid_of(0, tid);
  assert_false(air__sample(&none, NULL, tid));
  /* Parent-based: the incoming flag decides, whatever the ratio. */
  air__span_ctx parent;
  assert_int_equal(parse_s(GOOD, &parent), 0);
  assert_true(air__sample(&none, &parent, tid));
  parent.flags = 0;
  assert_false(air__sample(&all, &parent, tid));
  /* Not parent-based: the ratio decides. */
  air__sampler root_all = {false, 1.0};
  assert_true(air__sample(&root_all, &parent, tid));
  /* A quarter over evenly spread ids: exactly a quarter of them. */
  air__sampler quarter = {false, 0.25};
  unsigned kept = 0;
  for (uint64_t i = 0; i < 4096; i++) {
    tid_of(i << 52, tid);
    kept += air__sample(&quarter, NULL, tid);
  }
  assert_int_equal(kept, 1024);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(valid_header_parses),
      cmocka_unit_test(malformed_headers_are_refused),
      cmocka_unit_test(span_ids_derive_stably),
      cmocka_unit_test(sampler_ratio_and_parent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
