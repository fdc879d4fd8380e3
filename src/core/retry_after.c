/*
 * Retry-After hints (docs/design.md §2.2): the wait a failed response asks for.
 *
 * Sources, in order; the first that yields a usable value wins:
 *   1. retry-after-ms   milliseconds, may be fractional ("1500.5" -> 1501)
 *   2. retry-after      delta-seconds, may be fractional ("1.5" -> 1500), or
 *                       an HTTP-date (RFC 9110 5.6.7: IMF-fixdate, RFC 850,
 *                       asctime) minus the wall clock
 *   3. the rate-limit families below, each only when its "remaining" header
 *      is 0; the largest of those that apply.
 *
 * Rules common to every source:
 * - header names are ASCII case-insensitive; when a name repeats, its first
 *   occurrence is the one read;
 * - values carry their length and are never read past it; optional white
 *   space (SP, HTAB) around them is ignored;
 * - numbers are plain decimals ("12", "1.5", ".5"): no sign, no exponent, no
 *   "inf"/"nan", nothing after them; anything else makes the value unusable
 *   and the next source is tried; waits are rounded up to whole ms;
 * - a time in the past is unusable; a time equal to the wall clock is 0 ms;
 * - the result is clipped to AIR__MAX_RETRY_AFTER_MS.
 *
 * Pure: no allocation, no locale, no libc time functions (calendar maths is
 * done here, so the process's TZ never matters).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "airetry.h"
#include "limits.h"
#include "retry_after.h"
#include "str.h"

#define NS_PER_US 1000ull
#define NS_PER_MS 1000000ull
#define NS_PER_S 1000000000ull
#define MS_PER_DAY 86400000ll

/* A cursor over a span for the date parsers. */
typedef struct cursor {
  const char *p;
  size_t n;
  size_t i;
} cursor;

/* ---- bytes --------------------------------------------------------------- */

static int lower(int c) {
  return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c;
}

static int is_digit(int c) {
  return c >= '0' && c <= '9';
}

static uint64_t sat_add(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t sat_mul(uint64_t a, uint64_t b) {
  return (b != 0 && a > UINT64_MAX / b) ? UINT64_MAX : a * b;
}

/* 1 when the header's name is lit (lower case), case-insensitively. */
static int name_is(const air_header *h, const char *lit) {
  size_t n = strlen(lit);
  if (h->name == NULL || h->name_len != n) return 0;
  for (size_t i = 0; i < n; i++)
    if (lower((unsigned char)h->name[i]) != lit[i]) return 0;
  return 1;
}

/* The first header named lit, trimmed of OWS; 0 when there is none. */
static int find_header(const air_header *h, size_t n, const char *lit,
                       air__str *out) {
  for (size_t i = 0; i < n; i++) {
    if (!name_is(&h[i], lit)) continue;
    const char *p = h[i].value != NULL ? h[i].value : "";
    size_t len = h[i].value != NULL ? h[i].value_len : 0;
    while (len > 0 && (p[0] == ' ' || p[0] == '\t')) p++, len--;
    while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
    out->p = p;
    out->n = len;
    return 1;
  }
  return 0;
}

/* ---- numbers ------------------------------------------------------------- */

/* A scanned decimal: integer part (saturated) and the fraction's digits. */
typedef struct decimal {
  uint64_t ip;
  const char *frac;
  size_t frac_n;
} decimal;

/*
 * Scans "D+", "D+.", "D+.D+" or ".D+" at s[*i, n) and advances *i past it.
 * Returns 0 (and leaves *i) when there is no digit.
 */
static int scan_decimal(const char *s, size_t n, size_t *i, decimal *d) {
  size_t j = *i;
  int pre = 0, post = 0;
  d->ip = 0;
  while (j < n && is_digit((unsigned char)s[j])) {
    d->ip = sat_add(sat_mul(d->ip, 10), (uint64_t)(s[j] - '0'));
    j++;
    pre = 1;
  }
  d->frac = s + j;
  d->frac_n = 0;
  if (j < n && s[j] == '.') {
    j++;
    d->frac = s + j;
    while (j < n && is_digit((unsigned char)s[j])) j++, post = 1;
    d->frac_n = (size_t)(s + j - d->frac);
  }
  if (!pre && !post) return 0;
  *i = j;
  return 1;
}

/*
 * d times unit (ns per unit), rounded up to a whole ns, saturating. The
 * fraction is exact while unit has factors of ten left; a non-zero digit
 * below that adds 1 ns, so a ceiling to ms stays a ceiling.
 */
static uint64_t decimal_scale(const decimal *d, uint64_t unit) {
  uint64_t v = sat_mul(d->ip, unit);
  uint64_t frac = 0, scale = unit;
  int lost = 0;
  for (size_t k = 0; k < d->frac_n; k++) {
    uint64_t digit = (uint64_t)(d->frac[k] - '0');
    if (scale % 10 == 0) {
      scale /= 10;
      frac += digit * scale; /* < unit in total: cannot overflow */
    } else if (digit != 0) {
      lost = 1;
    }
  }
  return sat_add(sat_add(v, frac), (uint64_t)lost);
}

static uint64_t ns_to_ms_ceil(uint64_t ns) {
  return ns / NS_PER_MS + (ns % NS_PER_MS != 0);
}

/* A whole value that is one decimal number of unit; in ns. */
static int parse_number_ns(air__str v, uint64_t unit, uint64_t *ns) {
  size_t i = 0;
  decimal d;
  if (!scan_decimal(v.p, v.n, &i, &d) || i != v.n) return 0;
  *ns = decimal_scale(&d, unit);
  return 1;
}

/* 1 when the value is a decimal number equal to zero ("0", "00", "0.0"). */
static int is_zero(air__str v) {
  size_t i = 0;
  decimal d;
  if (!scan_decimal(v.p, v.n, &i, &d) || i != v.n || d.ip != 0) return 0;
  for (size_t k = 0; k < d.frac_n; k++)
    if (d.frac[k] != '0') return 0;
  return 1;
}

/* ---- Go durations -------------------------------------------------------- */

typedef struct duration_unit {
  const char *name;
  uint64_t ns;
} duration_unit;

/* The units of Go's time.ParseDuration ("µs" in both code points). */
static const duration_unit duration_units[] = {
    {"ns", 1},
    {"us", NS_PER_US},
    {"\xc2\xb5s", NS_PER_US}, /* U+00B5 micro sign */
    {"\xce\xbcs", NS_PER_US}, /* U+03BC greek mu */
    {"ms", NS_PER_MS},
    {"s", NS_PER_S},
    {"m", 60 * NS_PER_S},
    {"h", 3600 * NS_PER_S},
};

/*
 * A Go duration as OpenAI sends it ("1s", "6m0s", "20ms", "1h2m3.5s"):
 * one or more number+unit pairs, every number with a unit except a lone
 * "0". No sign (a negative duration is no hint). In ns, saturating.
 */
static int parse_duration_ns(air__str v, uint64_t *ns) {
  if (v.n == 1 && v.p[0] == '0') {
    *ns = 0;
    return 1;
  }
  if (v.n == 0) return 0;
  uint64_t total = 0;
  size_t i = 0;
  while (i < v.n) {
    decimal d;
    if (!scan_decimal(v.p, v.n, &i, &d)) return 0;
    size_t u = i;
    while (i < v.n && v.p[i] != '.' && !is_digit((unsigned char)v.p[i])) i++;
    const duration_unit *unit = NULL;
    for (size_t k = 0; k < sizeof duration_units / sizeof duration_units[0];
         k++) {
      const char *name = duration_units[k].name;
      if (strlen(name) == i - u && memcmp(name, v.p + u, i - u) == 0) {
        unit = &duration_units[k];
        break;
      }
    }
    if (unit == NULL) return 0;
    total = sat_add(total, decimal_scale(&d, unit->ns));
  }
  *ns = total;
  return 1;
}

/* ---- calendar ------------------------------------------------------------ */

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar
 * (H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d) {
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  int64_t yoe = y - era * 400;
  int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

/* The year holding day z (days since 1970-01-01, z >= 0). */
static int64_t year_of_days(int64_t z) {
  z += 719468;
  int64_t era = z / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  return yoe + era * 400 + (mp >= 10); /* Jan and Feb count to the next */
}

static int is_leap(int64_t y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int64_t y, int m) {
  static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

/* A broken-down UTC time; ms since the epoch via to_ms. */
typedef struct civil {
  int64_t year;
  int month, day, hour, min, sec;
} civil;

/* 0 when a field is out of range (second 60 is a leap second). */
static int civil_valid(const civil *c) {
  return c->year >= 0 && c->year <= 9999 && c->month >= 1 && c->month <= 12 &&
         c->day >= 1 && c->day <= days_in_month(c->year, c->month) &&
         c->hour <= 23 && c->min <= 59 && c->sec <= 60;
}

static int64_t civil_to_ms(const civil *c) {
  return days_from_civil(c->year, c->month, c->day) * MS_PER_DAY +
         ((int64_t)c->hour * 3600 + c->min * 60 + c->sec) * 1000;
}

/* The wait until UTC time t_ms; 0 when t_ms is before wall_ms. */
static int wait_until(int64_t t_ms, uint64_t wall_ms, uint64_t *ms) {
  if (t_ms < 0 || (uint64_t)t_ms < wall_ms) return 0;
  *ms = (uint64_t)t_ms - wall_ms;
  return 1;
}

/* ---- date tokens --------------------------------------------------------- */

static const char *const month_names[12] = {"jan", "feb", "mar", "apr",
                                            "may", "jun", "jul", "aug",
                                            "sep", "oct", "nov", "dec"};
static const char *const day_names[7] = {"monday",   "tuesday", "wednesday",
                                         "thursday", "friday",  "saturday",
                                         "sunday"};

/* Consumes lit (lower case) case-insensitively. */
static int eat(cursor *c, const char *lit) {
  size_t n = strlen(lit);
  if (c->n - c->i < n) return 0;
  for (size_t k = 0; k < n; k++)
    if (lower((unsigned char)c->p[c->i + k]) != lit[k]) return 0;
  c->i += n;
  return 1;
}

/* Consumes exactly k digits. */
static int digits(cursor *c, size_t k, int *v) {
  if (c->n - c->i < k) return 0;
  int x = 0;
  for (size_t j = 0; j < k; j++) {
    unsigned char ch = (unsigned char)c->p[c->i + j];
    if (!is_digit(ch)) return 0;
    x = x * 10 + (ch - '0');
  }
  c->i += k;
  *v = x;
  return 1;
}

/* A three-letter month name; *m is 1..12. */
static int month(cursor *c, int *m) {
  for (int k = 0; k < 12; k++) {
    if (eat(c, month_names[k])) {
      *m = k + 1;
      return 1;
    }
  }
  return 0;
}

/* A day name: its first three letters, or (full) the whole word. */
static int day_name(cursor *c, int full) {
  for (int k = 0; k < 7; k++) {
    char abbr[4] = {day_names[k][0], day_names[k][1], day_names[k][2], '\0'};
    if (eat(c, full ? day_names[k] : abbr)) return 1;
  }
  return 0;
}

/* "hh:mm:ss" */
static int clock_time(cursor *c, civil *t) {
  return digits(c, 2, &t->hour) && eat(c, ":") && digits(c, 2, &t->min) &&
         eat(c, ":") && digits(c, 2, &t->sec);
}

static int at_end(const cursor *c) {
  return c->i == c->n;
}

/* ---- HTTP-date (RFC 9110 5.6.7) ------------------------------------------ */

/* "Sun, 06 Nov 1994 08:49:37 GMT" */
static int imf_fixdate(air__str v, civil *t) {
  cursor c = {v.p, v.n, 0};
  int y;
  if (!(day_name(&c, 0) && eat(&c, ", ") && digits(&c, 2, &t->day) &&
        eat(&c, " ") && month(&c, &t->month) && eat(&c, " ") &&
        digits(&c, 4, &y) && eat(&c, " ") && clock_time(&c, t) &&
        eat(&c, " gmt") && at_end(&c)))
    return 0;
  t->year = y;
  return 1;
}

/*
 * "Sunday, 06-Nov-94 08:49:37 GMT". The two-digit year is the one nearest
 * the wall clock's year that is at most 50 years ahead of it.
 */
static int rfc850_date(air__str v, uint64_t wall_ms, civil *t) {
  cursor c = {v.p, v.n, 0};
  int yy;
  if (!(day_name(&c, 1) && eat(&c, ", ") && digits(&c, 2, &t->day) &&
        eat(&c, "-") && month(&c, &t->month) && eat(&c, "-") &&
        digits(&c, 2, &yy) && eat(&c, " ") && clock_time(&c, t) &&
        eat(&c, " gmt") && at_end(&c)))
    return 0;
  int64_t now = year_of_days((int64_t)(wall_ms / (uint64_t)MS_PER_DAY));
  int64_t y = now - now % 100 + yy;
  if (y > now + 50)
    y -= 100;
  else if (y + 100 <= now + 50)
    y += 100;
  t->year = y;
  return 1;
}

/* "Sun Nov  6 08:49:37 1994" (the day is space-padded). */
static int asctime_date(air__str v, civil *t) {
  cursor c = {v.p, v.n, 0};
  int y;
  if (!(day_name(&c, 0) && eat(&c, " ") && month(&c, &t->month) &&
        eat(&c, " ")))
    return 0;
  if (!(digits(&c, 2, &t->day) || (eat(&c, " ") && digits(&c, 1, &t->day))))
    return 0;
  if (!(eat(&c, " ") && clock_time(&c, t) && eat(&c, " ") &&
        digits(&c, 4, &y) && at_end(&c)))
    return 0;
  t->year = y;
  return 1;
}

static int http_date_ms(air__str v, uint64_t wall_ms, int64_t *t_ms) {
  civil t = {0};
  if (!imf_fixdate(v, &t) && !rfc850_date(v, wall_ms, &t) &&
      !asctime_date(v, &t))
    return 0;
  if (!civil_valid(&t)) return 0;
  *t_ms = civil_to_ms(&t);
  return 1;
}

/* ---- RFC 3339 ------------------------------------------------------------ */

/*
 * "2026-11-30T12:00:05Z", "2026-11-30T12:00:05.250+01:00": a full date, T
 * (or t, or a space), a time with optional fraction (rounded up to ms), Z
 * or a numeric offset.
 */
static int rfc3339_ms(air__str v, int64_t *t_ms) {
  cursor c = {v.p, v.n, 0};
  civil t = {0};
  int y;
  if (!(digits(&c, 4, &y) && eat(&c, "-") && digits(&c, 2, &t.month) &&
        eat(&c, "-") && digits(&c, 2, &t.day)))
    return 0;
  if (!(eat(&c, "t") || eat(&c, " "))) return 0;
  if (!clock_time(&c, &t)) return 0;
  t.year = y;
  int64_t frac_ms = 0;
  if (eat(&c, ".")) {
    size_t start = c.i;
    int lost = 0;
    while (c.i < c.n && is_digit((unsigned char)c.p[c.i])) {
      int d = c.p[c.i] - '0';
      size_t k = c.i - start;
      if (k < 3)
        frac_ms = frac_ms * 10 + d;
      else if (d != 0)
        lost = 1;
      c.i++;
    }
    size_t got = c.i - start;
    if (got == 0) return 0;
    for (size_t k = got; k < 3; k++) frac_ms *= 10;
    frac_ms += lost;
  }
  int64_t offset_ms = 0;
  if (!eat(&c, "z")) {
    int sign, oh, om;
    if (eat(&c, "+"))
      sign = 1;
    else if (eat(&c, "-"))
      sign = -1;
    else
      return 0;
    if (!(digits(&c, 2, &oh) && eat(&c, ":") && digits(&c, 2, &om)) ||
        oh > 23 || om > 59)
      return 0;
    offset_ms = sign * ((int64_t)oh * 3600 + om * 60) * 1000;
  }
  if (!at_end(&c) || !civil_valid(&t)) return 0;
  *t_ms = civil_to_ms(&t) + frac_ms - offset_ms;
  return 1;
}

/* ---- sources ------------------------------------------------------------- */

static int hint_ms(air__str v, uint64_t wall_ms, uint64_t *ms) {
  (void)wall_ms;
  uint64_t ns;
  if (!parse_number_ns(v, NS_PER_MS, &ns)) return 0;
  *ms = ns_to_ms_ceil(ns);
  return 1;
}

static int hint_retry_after(air__str v, uint64_t wall_ms, uint64_t *ms) {
  if (v.n > 0 && (is_digit((unsigned char)v.p[0]) || v.p[0] == '.')) {
    uint64_t ns;
    if (!parse_number_ns(v, NS_PER_S, &ns)) return 0;
    *ms = ns_to_ms_ceil(ns);
    return 1;
  }
  int64_t t_ms;
  return http_date_ms(v, wall_ms, &t_ms) && wait_until(t_ms, wall_ms, ms);
}

static int hint_duration(air__str v, uint64_t wall_ms, uint64_t *ms) {
  (void)wall_ms;
  uint64_t ns;
  if (!parse_duration_ns(v, &ns)) return 0;
  *ms = ns_to_ms_ceil(ns);
  return 1;
}

static int hint_rfc3339(air__str v, uint64_t wall_ms, uint64_t *ms) {
  int64_t t_ms;
  return rfc3339_ms(v, &t_ms) && wait_until(t_ms, wall_ms, ms);
}

typedef int (*hint_fn)(air__str v, uint64_t wall_ms, uint64_t *ms);

/* The direct hints, in the order they are read. */
static const struct {
  const char *name;
  hint_fn parse;
} direct[] = {
    {"retry-after-ms", hint_ms},
    {"retry-after", hint_retry_after},
};

/*
 * Rate-limit windows: the reset counts only while its remaining is 0. The
 * Anthropic input/output token windows are read like the combined one.
 */
static const struct {
  const char *remaining;
  const char *reset;
  hint_fn parse;
} windows[] = {
    {"x-ratelimit-remaining-requests", "x-ratelimit-reset-requests",
     hint_duration},
    {"x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens", hint_duration},
    {"anthropic-ratelimit-requests-remaining",
     "anthropic-ratelimit-requests-reset", hint_rfc3339},
    {"anthropic-ratelimit-tokens-remaining", "anthropic-ratelimit-tokens-reset",
     hint_rfc3339},
    {"anthropic-ratelimit-input-tokens-remaining",
     "anthropic-ratelimit-input-tokens-reset", hint_rfc3339},
    {"anthropic-ratelimit-output-tokens-remaining",
     "anthropic-ratelimit-output-tokens-reset", hint_rfc3339},
};

static int found(uint64_t ms, uint64_t *wait_ms) {
  if (ms > AIR__MAX_RETRY_AFTER_MS) ms = AIR__MAX_RETRY_AFTER_MS;
  if (wait_ms != NULL) *wait_ms = ms;
  return 1;
}

int air__retry_after(const air_header *h, size_t n, uint64_t wall_ms,
                     uint64_t *wait_ms) {
  if (h == NULL) return 0;
  air__str v;
  uint64_t ms;
  for (size_t k = 0; k < sizeof direct / sizeof direct[0]; k++)
    if (find_header(h, n, direct[k].name, &v) &&
        direct[k].parse(v, wall_ms, &ms))
      return found(ms, wait_ms);

  int any = 0;
  uint64_t best = 0;
  for (size_t k = 0; k < sizeof windows / sizeof windows[0]; k++) {
    air__str rem;
    if (!find_header(h, n, windows[k].remaining, &rem) || !is_zero(rem))
      continue;
    if (find_header(h, n, windows[k].reset, &v) &&
        windows[k].parse(v, wall_ms, &ms)) {
      if (!any || ms > best) best = ms;
      any = 1;
    }
  }
  return any ? found(best, wait_ms) : 0;
}
