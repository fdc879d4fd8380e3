/*
 * Trace context (trace.h). The W3C rules applied, in the order checked:
 * a version of two lowercase hex digits other than "ff"; for version 00
 * exactly 55 bytes, for a later version at least 55 with '-' at byte 55
 * when longer; '-' separators at 2, 35 and 52; 32 and 16 lowercase hex
 * digits for trace id and parent id, neither all zero; two hex digits of
 * flags. Uppercase hex is invalid (the spec says so), as is any blank.
 */
#include "trace.h"

#include <string.h>

#include "airetry.h"

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* n bytes from 2n lowercase hex digits; false on any other character. */
static bool unhex(const char *p, size_t n, uint8_t *out) {
  for (size_t i = 0; i < n; i++) {
    int hi = hexval(p[2 * i]), lo = hexval(p[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = (uint8_t)(hi << 4 | lo);
  }
  return true;
}

bool air__id_zero(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != 0) return false;
  return true;
}

int air__traceparent_parse(const char *p, size_t n, air__span_ctx *out) {
  uint8_t version, flags;
  air__span_ctx c;
  if (p == NULL || n < AIR__TRACEPARENT_LEN) return AIR_EPARSE;
  if (!unhex(p, 1, &version) || version == 0xff) return AIR_EPARSE;
  if (version == 0 && n != AIR__TRACEPARENT_LEN) return AIR_EPARSE;
  if (n > AIR__TRACEPARENT_LEN && p[AIR__TRACEPARENT_LEN] != '-')
    return AIR_EPARSE;
  if (p[2] != '-' || p[35] != '-' || p[52] != '-') return AIR_EPARSE;
  if (!unhex(p + 3, 16, c.trace_id) || !unhex(p + 36, 8, c.span_id) ||
      !unhex(p + 53, 1, &flags))
    return AIR_EPARSE;
  if (air__id_zero(c.trace_id, 16) || air__id_zero(c.span_id, 8))
    return AIR_EPARSE;
  c.flags = flags;
  *out = c;
  return 0;
}

void air__hex(const uint8_t *p, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
  out[2 * n] = '\0';
}

void air__traceparent_format(const air__span_ctx *c, char *out) {
  out[0] = '0';
  out[1] = '0';
  out[2] = '-';
  air__hex(c->trace_id, 16, out + 3);
  out[35] = '-';
  air__hex(c->span_id, 8, out + 36);
  out[52] = '-';
  air__hex(&c->flags, 1, out + 53);
}

void air__span_id_derive(uint64_t base, unsigned attempt, uint8_t out[8]) {
  uint64_t z = base + 0x9e3779b97f4a7c15ull * ((uint64_t)attempt + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  if (z == 0) z = 1;
  for (int i = 7; i >= 0; i--) {
    out[i] = (uint8_t)z;
    z >>= 8;
  }
}

bool air__sample(const air__sampler *s, const air__span_ctx *parent,
                 const uint8_t trace_id[16]) {
  if (s->parent_based && parent != NULL) return (parent->flags & 1) != 0;
  if (!(s->ratio > 0.0)) return false;
  if (s->ratio >= 1.0) return true;
  uint64_t x = 0;
  for (int i = 8; i < 16; i++) x = x << 8 | trace_id[i];
  /* ratio * 2^63 is below 2^63 here: exact in the conversion back. */
  uint64_t bound = (uint64_t)(s->ratio * 9223372036854775808.0);
  return (x >> 1) < bound;
}
