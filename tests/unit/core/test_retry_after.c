/*
 * Unit tests for src/core/retry_after.c. Expected epoch times were computed
 * independently (Python calendar.timegm).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "airetry.h"
#include "limits.h"
#include "retry_after.h"

/* A header from two string literals. */
#define H(n, v) \
  { n, sizeof(n) - 1, v, sizeof(v) - 1 }
#define NO_HINT UINT64_MAX /* "want" for rows that must yield no hint */

/* 1994-11-06 08:49:30 GMT: seven seconds before the RFC 9110 example date. */
#define WALL_1994 784111770000ull
/* 2026-11-30 12:00:00 UTC */
#define WALL_2026 1796040000000ull
#define MAX_MS AIR__MAX_RETRY_AFTER_MS

/*
 * Copies every header into its own exact-size heap block so a read past a
 * value's length is caught by ASan, then calls air__retry_after.
 */
static int retry_after(const air_header *src, size_t n, uint64_t wall,
                       uint64_t *out) {
  air_header *h = calloc(n ? n : 1, sizeof *h);
  assert_non_null(h);
  for (size_t i = 0; i < n; i++) {
    char *name = malloc(src[i].name_len ? src[i].name_len : 1);
    char *value = malloc(src[i].value_len ? src[i].value_len : 1);
    assert_non_null(name);
    assert_non_null(value);
    memcpy(name, src[i].name, src[i].name_len);
    memcpy(value, src[i].value, src[i].value_len);
    h[i] = (air_header){name, src[i].name_len, value, src[i].value_len};
  }
  *out = 0xabcdefull; /* must be left alone when there is no hint */
  int rc = air__retry_after(h, n, wall, out);
  for (size_t i = 0; i < n; i++) {
    free((void *)h[i].name);
    free((void *)h[i].value);
  }
  free(h);
  return rc;
}

/* Asserts the result for headers h: want ms, or NO_HINT. */
static void expect(const air_header *h, size_t n, uint64_t wall, uint64_t want,
                   const char *what) {
  uint64_t got;
  int rc = retry_after(h, n, wall, &got);
  if (want == NO_HINT) {
    if (rc != 0 || got != 0xabcdefull)
      fail_msg("%s: got hint %llu, want none", what, (unsigned long long)got);
  } else if (rc != 1 || got != want) {
    fail_msg("%s: got rc %d wait %llu, want %llu", what, rc,
             (unsigned long long)got, (unsigned long long)want);
  }
}

/* One header name, one value, one wall clock, one expected wait. */
typedef struct row {
  const char *name;
  const char *value;
  uint64_t wall;
  uint64_t want;
} row;

static void run_rows(const row *rows, size_t n) {
  for (size_t i = 0; i < n; i++) {
    air_header h = {rows[i].name, strlen(rows[i].name), rows[i].value,
                    strlen(rows[i].value)};
    expect(&h, 1, rows[i].wall, rows[i].want, rows[i].value);
  }
}

#define RUN(rows) run_rows(rows, sizeof rows / sizeof rows[0])

static void test_retry_after_ms(void **state) {
  (void)state;
  static const row rows[] = {
      {"retry-after-ms", "1500", 0, 1500},
      {"retry-after-ms", "0", 0, 0},
      {"retry-after-ms", "1500.5", 0, 1501},
      {"retry-after-ms", "1500.0000001", 0, 1501},
      {"retry-after-ms", "1500.000", 0, 1500},
      {"retry-after-ms", "0.2", 0, 1},
      {"retry-after-ms", ".5", 0, 1},
      {"retry-after-ms", "7.", 0, 7},
      {"retry-after-ms", "  250\t", 0, 250},
      {"retry-after-ms", "604800001", 0, MAX_MS},
      {"retry-after-ms", "99999999999999999999999999", 0, MAX_MS},
      {"retry-after-ms", "-5", 0, NO_HINT},
      {"retry-after-ms", "", 0, NO_HINT},
      {"retry-after-ms", "   ", 0, NO_HINT},
      {"retry-after-ms", ".", 0, NO_HINT},
      {"retry-after-ms", "1e3", 0, NO_HINT},
      {"retry-after-ms", "inf", 0, NO_HINT},
      {"retry-after-ms", "nan", 0, NO_HINT},
      {"retry-after-ms", "12abc", 0, NO_HINT},
      {"retry-after-ms", "1 2", 0, NO_HINT},
      {"retry-after-ms", "+5", 0, NO_HINT},
      {"retry-after-ms", "1,5", 0, NO_HINT},
  };
  RUN(rows);
}

static void test_retry_after_seconds(void **state) {
  (void)state;
  static const row rows[] = {
      {"retry-after", "1", 0, 1000},
      {"retry-after", "0", 0, 0},
      {"retry-after", "120", 0, 120000},
      {"retry-after", "1.5", 0, 1500},
      {"retry-after", "0.0004", 0, 1},
      {"retry-after", "2.0001", 0, 2001},
      {"retry-after", " 3 ", 0, 3000},
      {"retry-after", "604800", 0, MAX_MS},
      {"retry-after", "604801", 0, MAX_MS},
      {"retry-after", "-1", 0, NO_HINT},
      {"retry-after", "soon", 0, NO_HINT},
      {"retry-after", "5s", 0, NO_HINT},
      {"retry-after", "Infinity", 0, NO_HINT},
  };
  RUN(rows);
}

static void test_retry_after_dates(void **state) {
  (void)state;
  static const row rows[] = {
      /* the three RFC 9110 formats of one instant */
      {"retry-after", "Sun, 06 Nov 1994 08:49:37 GMT", WALL_1994, 7000},
      {"retry-after", "Sunday, 06-Nov-94 08:49:37 GMT", WALL_1994, 7000},
      {"retry-after", "Sun Nov  6 08:49:37 1994", WALL_1994, 7000},
      {"retry-after", "Sun Nov 06 08:49:37 1994", WALL_1994, 7000},
      /* names are read case-insensitively; white space around is OWS */
      {"retry-after", "sun, 06 nov 1994 08:49:37 gmt", WALL_1994, 7000},
      {"retry-after", "\t Sun, 06 Nov 1994 08:49:37 GMT ", WALL_1994, 7000},
      /* now and the past */
      {"retry-after", "Sun, 06 Nov 1994 08:49:30 GMT", WALL_1994, 0},
      {"retry-after", "Sun, 06 Nov 1994 08:49:29 GMT", WALL_1994, NO_HINT},
      {"retry-after", "Sat, 05 Nov 1994 08:49:37 GMT", WALL_1994, NO_HINT},
      {"retry-after", "Sun, 06 Nov 1994 08:49:37 GMT", WALL_2026, NO_HINT},
      {"retry-after", "Thu, 01 Jan 1970 00:00:00 GMT", 0, 0},
      /* far future: clipped */
      {"retry-after", "Fri, 31 Dec 9999 23:59:59 GMT", WALL_2026, MAX_MS},
      /* leap years: 2000-02-29 is a date, 1900-02-29 is not */
      {"retry-after", "Tue, 29 Feb 2000 12:00:00 GMT", 951825599000ull, 1000},
      {"retry-after", "Mon, 01 Mar 2100 00:00:00 GMT", WALL_2026, MAX_MS},
      {"retry-after", "Mon, 29 Feb 2100 00:00:00 GMT", WALL_2026, NO_HINT},
      {"retry-after", "Thu, 29 Feb 2029 00:00:00 GMT", WALL_2026, NO_HINT},
      {"retry-after", "Thu, 29 Feb 2028 00:00:00 GMT", WALL_2026, MAX_MS},
      {"retry-after", "Wed, 31 Apr 2030 00:00:00 GMT", WALL_2026, NO_HINT},
      {"retry-after", "Wed, 30 Apr 2030 00:00:00 GMT", WALL_2026, MAX_MS},
      {"retry-after", "Sun, 06 Nov 1994 24:00:00 GMT", 0, NO_HINT},
      {"retry-after", "Sun, 06 Nov 1994 08:60:00 GMT", 0, NO_HINT},
      /* leap second 60 is accepted and counts as the next second */
      {"retry-after", "Sun, 06 Nov 1994 08:49:60 GMT", WALL_1994, 30000},
      /* malformed dates */
      {"retry-after", "Sun, 06 Nov 1994 08:49:37", WALL_1994, NO_HINT},
      {"retry-after", "Sun, 06 Nov 1994 08:49:37 UTC", WALL_1994, NO_HINT},
      {"retry-after", "Sun, 6 Nov 1994 08:49:37 GMT", WALL_1994, NO_HINT},
      {"retry-after", "Sun, 06 Nov 94 08:49:37 GMT", WALL_1994, NO_HINT},
      {"retry-after", "Xyz, 06 Nov 1994 08:49:37 GMT", WALL_1994, NO_HINT},
      {"retry-after", "Sun, 06 Foo 1994 08:49:37 GMT", WALL_1994, NO_HINT},
      {"retry-after", "Sun, 06 Nov 1994 08:49:37 GMT x", WALL_1994, NO_HINT},
      {"retry-after", "Sun, 00 Nov 1994 08:49:37 GMT", WALL_1994, NO_HINT},
      {"retry-after", "Sunday, 06-Nov-1994 08:49:37 GMT", WALL_1994, NO_HINT},
      {"retry-after", "Sun Nov 6 08:49:37 1994", WALL_1994, NO_HINT},
      {"retry-after", "Sun Nov  6 08:49:37 1994 GMT", WALL_1994, NO_HINT},
      {"retry-after", "Sun,", WALL_1994, NO_HINT},
  };
  RUN(rows);
}

/*
 * RFC 850's two-digit year (RFC 9110 5.6.7): more than 50 years in the
 * future means the previous century.
 */
static void test_rfc850_century(void **state) {
  (void)state;
  /* 2026-12-31 23:59:00 UTC */
  const uint64_t wall = 1798761600000ull - 60000;
  /* 2100-01-01 00:00:00 UTC minus one hour */
  const uint64_t wall_2099 = 4102441200000ull;
  /* 2027-01-15 00:00:00 UTC */
  const uint64_t jan_2027 = 1799971200000ull;
  static const char *const ok = "Friday, 01-Jan-27 00:00:00 GMT";
  static const char *const fifty = "Wednesday, 01-Jan-76 00:00:00 GMT";
  static const char *const fifty_one = "Friday, 01-Jan-77 00:00:00 GMT";
  static const char *const wrap = "Friday, 01-Jan-00 00:00:00 GMT";
  const row rows[] = {
      {"retry-after", ok, wall, 60000},
      {"retry-after", fifty, wall, MAX_MS},      /* 2076: far future, clipped */
      {"retry-after", fifty_one, wall, NO_HINT}, /* 1977: past */
      {"retry-after", wrap, wall_2099, 3600000}, /* 2100, not 2000 */
      /* in January the wall clock's year is already the new one */
      {"retry-after", fifty_one, jan_2027, MAX_MS}, /* 2077 */
  };
  RUN(rows);
}

/* retry-after-ms is read first; an unusable one falls through. */
static void test_precedence(void **state) {
  (void)state;
  const air_header both[] = {H("Retry-After", "7"),
                             H("Retry-After-Ms", "1234")};
  expect(both, 2, 0, 1234, "ms wins over seconds");

  const air_header bad_ms[] = {H("retry-after-ms", "soon"),
                               H("retry-after", "7")};
  expect(bad_ms, 2, 0, 7000, "garbage ms falls through");

  const air_header neg_ms[] = {H("retry-after-ms", "-100"),
                               H("retry-after", "2.5")};
  expect(neg_ms, 2, 0, 2500, "negative ms falls through");

  const air_header past[] = {H("retry-after", "Sun, 06 Nov 1994 08:49:29 GMT"),
                             H("x-ratelimit-remaining-tokens", "0"),
                             H("x-ratelimit-reset-tokens", "3s")};
  expect(past, 3, WALL_1994, 3000, "past date falls to the rate-limit family");

  const air_header direct_first[] = {H("x-ratelimit-remaining-tokens", "0"),
                                     H("x-ratelimit-reset-tokens", "30s"),
                                     H("retry-after", "2")};
  expect(direct_first, 3, 0, 2000, "retry-after before the family");

  const air_header zero_ms[] = {H("retry-after-ms", "0"),
                                H("retry-after", "9")};
  expect(zero_ms, 2, 0, 0, "0 is a hint");

  const air_header dup[] = {H("retry-after", "4"), H("retry-after", "9")};
  expect(dup, 2, 0, 4000, "the first occurrence counts");

  const air_header none[] = {H("content-type", "application/json"),
                             H("retry-afterx", "5"), H("xretry-after", "5"),
                             H("retry-after-m", "5")};
  expect(none, 4, 0, NO_HINT, "no hint header");
  expect(NULL, 0, 0, NO_HINT, "no headers at all");
  uint64_t w = 0;
  assert_int_equal(air__retry_after(NULL, 3, 0, &w), 0);
}

static void test_case_and_whitespace(void **state) {
  (void)state;
  const air_header a[] = {H("RETRY-AFTER-MS", " \t 42 \t")};
  expect(a, 1, 0, 42, "upper-case name");
  const air_header b[] = {H("rEtRy-AfTeR", "\t3")};
  expect(b, 1, 0, 3000, "mixed-case name");
  const air_header c[] = {H("X-RateLimit-Remaining-Requests", " 0 "),
                          H("X-RATELIMIT-RESET-REQUESTS", " 20ms ")};
  expect(c, 2, 0, 20, "mixed-case family");
  /* a name with trailing space is another name */
  const air_header d[] = {H("retry-after ", "3")};
  expect(d, 1, 0, NO_HINT, "name is not trimmed");
}

/* Values are read by length only: the bytes after them do not count. */
static void test_lengths(void **state) {
  (void)state;
  static const char buf[] = "1234retry-after-msXYZ";
  air_header h = {buf + 4, 14, buf, 2}; /* "retry-after-ms": "12" */
  uint64_t w;
  assert_int_equal(air__retry_after(&h, 1, 0, &w), 1);
  assert_int_equal(w, 12);
  air_header e = {buf + 4, 14, NULL, 0};
  assert_int_equal(air__retry_after(&e, 1, 0, &w), 0);
  /* NULL wait_ms is allowed: the answer alone. */
  assert_int_equal(air__retry_after(&h, 1, 0, NULL), 1);
}

static void test_openai_durations(void **state) {
  (void)state;
  static const struct {
    const char *value;
    uint64_t want;
  } cases[] = {
      {"1s", 1000},
      {"6m0s", 360000},
      {"20ms", 20},
      {"1h2m3.5s", 3723500},
      {"0.5s", 500},
      {"100us", 1},
      {"1500\xc2\xb5s", 2},
      {"2000\xce\xbcs", 2},
      {"1.5h", 5400000},
      {"0s", 0},
      {"0", 0},
      {"1m30s", 90000},
      {".25s", 250},
      {"17ms", 17},
      {"999999ns", 1},
      {"1000000ns", 1},
      {"1000001ns", 2},
      {"2.s", 2000},
      {"200h", MAX_MS},
      {"1", NO_HINT},
      {"-1s", NO_HINT},
      {"1x", NO_HINT},
      {"", NO_HINT},
      {"s", NO_HINT},
      {"1S", NO_HINT},
      {"1s ms", NO_HINT},
      {".s", NO_HINT},
      {"1sm", NO_HINT},
      {"1.5.5s", NO_HINT},
      {"00", NO_HINT},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    air_header h[] = {
        H("x-ratelimit-remaining-requests", "0"),
        {"x-ratelimit-reset-requests", 26, cases[i].value,
         strlen(cases[i].value)},
    };
    expect(h, 2, 0, cases[i].want, cases[i].value);
  }
}

/* The reset counts only while its own remaining is exactly 0. */
static void test_family_remaining(void **state) {
  (void)state;
  const air_header not_zero[] = {H("x-ratelimit-remaining-requests", "5"),
                                 H("x-ratelimit-reset-requests", "1s")};
  expect(not_zero, 2, 0, NO_HINT, "remaining 5");
  const air_header absent[] = {H("x-ratelimit-reset-requests", "1s")};
  expect(absent, 1, 0, NO_HINT, "remaining absent");
  const air_header garbage[] = {H("x-ratelimit-remaining-requests", "none"),
                                H("x-ratelimit-reset-requests", "1s")};
  expect(garbage, 2, 0, NO_HINT, "remaining garbage");
  const air_header neg[] = {H("x-ratelimit-remaining-requests", "-0"),
                            H("x-ratelimit-reset-requests", "1s")};
  expect(neg, 2, 0, NO_HINT, "remaining -0");
  const air_header zero_point[] = {H("x-ratelimit-remaining-requests", "0.0"),
                                   H("x-ratelimit-reset-requests", "1s")};
  expect(zero_point, 2, 0, 1000, "remaining 0.0");
  /* the other window's remaining does not unlock this reset */
  const air_header crossed[] = {H("x-ratelimit-remaining-requests", "0"),
                                H("x-ratelimit-remaining-tokens", "100"),
                                H("x-ratelimit-reset-tokens", "6m0s")};
  expect(crossed, 3, 0, NO_HINT, "crossed windows");
  const air_header tokens[] = {H("x-ratelimit-remaining-requests", "99"),
                               H("x-ratelimit-reset-requests", "1s"),
                               H("x-ratelimit-remaining-tokens", "0"),
                               H("x-ratelimit-reset-tokens", "6m0s")};
  expect(tokens, 4, 0, 360000, "tokens window only");
  const air_header both[] = {H("x-ratelimit-remaining-requests", "0"),
                             H("x-ratelimit-reset-requests", "1s"),
                             H("x-ratelimit-remaining-tokens", "0"),
                             H("x-ratelimit-reset-tokens", "20ms")};
  expect(both, 4, 0, 1000, "largest of both windows");
  const air_header one_bad[] = {H("x-ratelimit-remaining-requests", "0"),
                                H("x-ratelimit-reset-requests", "later"),
                                H("x-ratelimit-remaining-tokens", "0"),
                                H("x-ratelimit-reset-tokens", "20ms")};
  expect(one_bad, 4, 0, 20, "unparseable reset skipped");
}

static void test_anthropic_reset(void **state) {
  (void)state;
  static const struct {
    const char *value;
    uint64_t want;
  } cases[] = {
      {"2026-11-30T12:00:05Z", 5000},
      {"2026-11-30T12:00:05.250Z", 5250},
      {"2026-11-30T12:00:05.25Z", 5250},
      {"2026-11-30T12:00:05.2504Z", 5251},
      {"2026-11-30T12:00:05.000000Z", 5000},
      {"2026-11-30t12:00:05z", 5000},
      {"2026-11-30 12:00:05Z", 5000},
      {"2026-11-30T13:00:05+01:00", 5000},
      {"2026-11-30T11:00:05.5-01:00", 5500},
      {"2026-11-30T12:00:05+00:00", 5000},
      {"2026-11-30T12:00:00Z", 0},
      {"2026-12-01T12:00:00Z", 86400000},
      {"2026-11-30T11:59:59Z", NO_HINT},
      {"2026-11-30T12:00:05", NO_HINT},
      {"2026-11-30T12:00:05.Z", NO_HINT},
      {"2026-11-30T12:00:05+0100", NO_HINT},
      {"2026-11-30T12:00:05-24:00", NO_HINT},
      {"2026-11-30T12:00:05-23:59", 86345000},
      {"2026-11-31T12:00:05Z", NO_HINT},
      {"2026-13-01T12:00:05Z", NO_HINT},
      {"2026-11-30", NO_HINT},
      {"5", NO_HINT},
      {"2026-11-30T12:00:05Zjunk", NO_HINT},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    air_header h[] = {
        H("anthropic-ratelimit-requests-remaining", "0"),
        {"anthropic-ratelimit-requests-reset", 34, cases[i].value,
         strlen(cases[i].value)},
    };
    expect(h, 2, WALL_2026, cases[i].want, cases[i].value);
  }

  const air_header not_zero[] = {
      H("anthropic-ratelimit-requests-remaining", "3"),
      H("anthropic-ratelimit-requests-reset", "2026-11-30T12:00:05Z")};
  expect(not_zero, 2, WALL_2026, NO_HINT, "anthropic remaining 3");
  const air_header largest[] = {
      H("anthropic-ratelimit-requests-remaining", "0"),
      H("anthropic-ratelimit-requests-reset", "2026-11-30T12:00:05Z"),
      H("anthropic-ratelimit-tokens-remaining", "0"),
      H("anthropic-ratelimit-tokens-reset", "2026-11-30T12:00:09Z"),
      H("x-ratelimit-remaining-tokens", "0"),
      H("x-ratelimit-reset-tokens", "7s")};
  expect(largest, 6, WALL_2026, 9000, "largest over both dialects");
  const air_header past_one[] = {
      H("anthropic-ratelimit-tokens-remaining", "0"),
      H("anthropic-ratelimit-tokens-reset", "2026-11-30T11:00:00Z"),
      H("anthropic-ratelimit-requests-remaining", "0"),
      H("anthropic-ratelimit-requests-reset", "2026-11-30T12:00:01Z")};
  expect(past_one, 4, WALL_2026, 1000, "past reset skipped");
  const air_header input[] = {
      H("anthropic-ratelimit-input-tokens-remaining", "0"),
      H("anthropic-ratelimit-input-tokens-reset", "2026-11-30T12:00:02Z")};
  expect(input, 2, WALL_2026, 2000, "input-tokens window");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_retry_after_ms),
      cmocka_unit_test(test_retry_after_seconds),
      cmocka_unit_test(test_retry_after_dates),
      cmocka_unit_test(test_rfc850_century),
      cmocka_unit_test(test_precedence),
      cmocka_unit_test(test_case_and_whitespace),
      cmocka_unit_test(test_lengths),
      cmocka_unit_test(test_openai_durations),
      cmocka_unit_test(test_family_remaining),
      cmocka_unit_test(test_anthropic_reset),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
