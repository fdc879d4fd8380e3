/*
 * Backoff waits (docs/design.md §3 step 5) and the small random helpers they
 * use. Pure: the random source is passed in; nothing here keeps state.
 */
#include <math.h>
#include <stdint.h>

#include "backoff.h"

/*
 * min(max_ms, base_ms * factor^(n-1)), computed in double so it saturates at
 * max_ms instead of overflowing. n = 0 counts as 1. A NaN or negative factor
 * counts as 1 (config validation should have refused it); a product that is
 * not a number (0 * inf) counts as 0. Fractions of a ms are dropped.
 */
static uint64_t backoff_value(const air__backoff *b, unsigned n) {
  if (n == 0) n = 1;
  if (b->base_ms == 0) return 0;
  double factor = b->factor;
  if (isnan(factor) || factor < 0) factor = 1;
  double v = (double)b->base_ms * pow(factor, (double)(n - 1));
  if (isnan(v) || v < 0) return 0;
  /* (double)max_ms may round up to 2^64; a v below it still fits. */
  if (v >= (double)b->max_ms) return b->max_ms;
  return (uint64_t)v;
}

uint64_t air__backoff_wait(const air__backoff *b, unsigned n,
                           const air_rng *rng) {
  uint64_t v = backoff_value(b, n);
  /* Without a random source, jitter cannot be drawn: the wait is v. */
  if (rng == NULL || rng->next == NULL) return v;
  switch (b->jitter) {
    case AIR__JITTER_FULL:
      return air__rng_upto(rng, v);
    case AIR__JITTER_EQUAL:
      return v / 2 + air__rng_upto(rng, v - v / 2);
    case AIR__JITTER_NONE:
      break;
  }
  return v;
}

/*
 * Rejection sampling: draws below 2^64 mod (hi+1) are discarded so every
 * residue has the same number of preimages. Draws nothing when hi is 0;
 * returns 0 for a NULL rng.
 */
uint64_t air__rng_upto(const air_rng *rng, uint64_t hi) {
  if (hi == 0 || rng == NULL || rng->next == NULL) return 0;
  if (hi == UINT64_MAX) return rng->next(rng->data);
  uint64_t range = hi + 1;
  uint64_t threshold = (UINT64_MAX - hi) % range; /* 2^64 mod range */
  for (;;) {
    uint64_t x = rng->next(rng->data);
    if (x >= threshold) return x % range;
  }
}

/* splitmix64 (Steele, Lea, Flood 2014; Vigna's reference constants). */
uint64_t air__splitmix64(void *state) {
  uint64_t *s = state;
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
