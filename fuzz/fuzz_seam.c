/*
 * libFuzzer target for the seam of a continued stream (src/stream/seam.c).
 *
 * Input layout: a 4-byte header, then sent, then the continuation.
 *   h[0] bit 0   instruct (the preamble check is on)
 *   h[1]         seed of the piece sizes (1..h[1] % 64 + 1 bytes each)
 *   h[2] h[3]    sent's length (little endian, cut to what there is)
 *
 * The continuation is fed three ways: at once, in pseudo-random pieces and
 * one byte at a time, each followed by the end. All three must give the
 * same state and the same released text; the released text is always a
 * suffix of the continuation (the seam only drops a prefix), empty when
 * FAILED; nothing is released while HOLD; the state after the end is
 * never HOLD.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "airetry.h"
#include "seam.h"

#define CHECK(cond)       \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

/* Feeds cont in pieces of at most max bytes (max 0: whole; seed picks the
 * sizes) and ends; the outcome's text goes to out. */
static air__seam_state feed(const char *sent, size_t sent_n, bool instruct,
                            const char *cont, size_t n, size_t max,
                            unsigned seed, air__buf *out) {
  air__seam s;
  CHECK(air__seam_init(&s, sent, sent_n, instruct) == 0);
  air__seam_state st = s.state;
  size_t at = 0;
  while (at < n) {
    size_t k = n - at;
    if (max > 0) {
      seed = seed * 1103515245u + 12345u;
      size_t piece = 1 + (seed >> 16) % max;
      if (piece < k) k = piece;
    }
    size_t before = out->n;
    st = air__seam_feed(&s, cont + at, k, out);
    if (st != AIR__SEAM_OPEN) CHECK(out->n == before);
    at += k;
  }
  st = air__seam_end(&s, out);
  CHECK(st != AIR__SEAM_HOLD);
  if (st == AIR__SEAM_FAILED) CHECK(s.message != NULL);
  air__seam_cleanup(&s);
  return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4) return 0;
  bool instruct = data[0] & 1;
  unsigned seed = data[1];
  size_t sent_n = (size_t)data[2] | (size_t)data[3] << 8;
  const char *rest = (const char *)data + 4;
  size_t rest_n = size - 4;
  if (sent_n > rest_n) sent_n = rest_n;
  const char *cont = rest + sent_n;
  size_t n = rest_n - sent_n;

  air__buf a, b, c;
  air__buf_init(&a, 1 << 24);
  air__buf_init(&b, 1 << 24);
  air__buf_init(&c, 1 << 24);
  air__seam_state sa = feed(rest, sent_n, instruct, cont, n, 0, 0, &a);
  air__seam_state sb =
      feed(rest, sent_n, instruct, cont, n, seed % 64 + 1, seed, &b);
  air__seam_state sc = feed(rest, sent_n, instruct, cont, n, 1, 0, &c);
  CHECK(sa == sb && sb == sc);
  CHECK(a.n == b.n && b.n == c.n);
  CHECK(a.n == 0 || (memcmp(a.p, b.p, a.n) == 0 && memcmp(a.p, c.p, a.n) == 0));
  if (sa == AIR__SEAM_FAILED) CHECK(a.n == 0);
  CHECK(a.n <= n);
  CHECK(a.n == 0 || memcmp(a.p, cont + (n - a.n), a.n) == 0);
  air__buf_cleanup(&a);
  air__buf_cleanup(&b);
  air__buf_cleanup(&c);
  return 0;
}
