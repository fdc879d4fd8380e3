#include <stdlib.h>
#include <string.h>

#include "airetry.h"
#include "buf.h"

void air__buf_init(air__buf *b, size_t max) {
  b->p = NULL;
  b->n = 0;
  b->cap = 0;
  b->max = max;
  b->err = 0;
  b->stack = false;
}

void air__buf_init_on(air__buf *b, size_t max, char *mem, size_t cap) {
  air__buf_init(b, max);
  if (mem == NULL || cap == 0) return;
  b->p = mem;
  b->p[0] = '\0';
  /* As grow's: never more than max + 1, which air__buf_add relies on. */
  b->cap = max < cap - 1 ? max + 1 : cap;
  b->stack = true;
}

void air__buf_cleanup(air__buf *b) {
  if (!b->stack) free(b->p);
  b->p = NULL;
  b->n = 0;
  b->cap = 0;
  b->stack = false;
}

void air__buf_reset(air__buf *b) {
  b->n = 0;
  b->err = 0;
  if (b->p) b->p[0] = '\0';
}

/* Makes room for n more bytes plus the terminating NUL: doubling, or
 * exactly that room (air__buf_reserve). */
static int grow(air__buf *b, size_t n, bool exact) {
  if (n > b->max || b->n > b->max - n) return AIR_ETOOBIG;
  size_t need = b->n + n + 1;
  if (need <= b->cap) return 0;
  size_t cap = exact ? need : b->cap ? b->cap : 256;
  while (cap < need) cap *= 2;
  if (cap > b->max + 1) cap = b->max + 1;
  char *p;
  if (b->stack) {
    /* Out of the caller's storage: to the heap, with what it holds. */
    p = malloc(cap);
    if (p == NULL) return AIR_ENOMEM;
    memcpy(p, b->p, b->n + 1);
    b->stack = false;
  } else {
    p = realloc(b->p, cap);
    if (p == NULL) return AIR_ENOMEM;
  }
  b->p = p;
  b->cap = cap;
  return 0;
}

int air__buf_reserve(air__buf *b, size_t n) {
  if (b->n > b->max) return 0;
  if (n > b->max - b->n) n = b->max - b->n; /* a guess past max: up to it */
  int rc = grow(b, n, true);
  if (rc != 0 && b->err == 0) b->err = rc;
  return rc;
}

int air__buf_add_grow(air__buf *b, const void *p, size_t n) {
  int rc = grow(b, n, false);
  if (rc != 0) {
    if (b->err == 0) b->err = rc;
    return rc;
  }
  if (n > 0) memcpy(b->p + b->n, p, n);
  b->n += n;
  b->p[b->n] = '\0';
  return 0;
}

int air__buf_add_aligned(air__buf *b, const void *p, size_t n, size_t *at) {
  static const char pad[8];
  size_t start = b->n;
  *at = (b->n + 7) & ~(size_t)7;
  int rc = air__buf_add(b, pad, *at - b->n);
  if (rc == 0) rc = air__buf_add(b, p, n);
  if (rc != 0 && b->p != NULL) {
    b->n = start;
    b->p[start] = '\0';
  }
  return rc;
}

int air__buf_addu(air__buf *b, unsigned long long v) {
  char tmp[24];
  size_t i = sizeof(tmp);
  do {
    tmp[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  return air__buf_add(b, tmp + i, sizeof(tmp) - i);
}

size_t air__utf8_cut(const char *s, size_t n, size_t max) {
  if (n <= max) return n;
  size_t k = max;
  /* s[k] is the first byte left out: back to the start of its sequence. */
  for (int i = 0; i < 3 && k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80; i++)
    k--;
  return ((unsigned char)s[k] & 0xC0) == 0x80 ? max : k;
}

size_t air__utf8_seq(const unsigned char *s, size_t n) {
  unsigned char c = s[0];
  if (c < 0x80) return 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF; /* bounds of the second byte */
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0; /* no overlongs */
    if (c == 0xED) hi = 0x9F; /* no surrogates */
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F; /* nothing past U+10FFFF */
  } else {
    return 0;
  }
  if (n < len) return 0;
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t k = 2; k < len; k++)
    if (s[k] < 0x80 || s[k] > 0xBF) return 0;
  return len;
}

int air__buf_add_json_str(air__buf *b, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  size_t start = b->n;
  int rc = air__buf_addc(b, '"');
  size_t run = 0; /* bytes of s not yet copied, ending at i */
  for (size_t i = 0; rc == 0 && i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x80) {
      size_t len = air__utf8_seq((const unsigned char *)s + i, n - i);
      if (len > 0) {
        run += len;
        i += len - 1;
        continue;
      }
      /* Invalid UTF-8 never reaches a JSON document: U+FFFD instead. */
      rc = air__buf_add(b, s + i - run, run);
      run = 0;
      if (rc == 0) rc = air__buf_add(b, "\\ufffd", 6);
      continue;
    }
    if (c >= 0x20 && c != '"' && c != '\\') {
      run++;
      continue;
    }
    rc = air__buf_add(b, s + i - run, run);
    run = 0;
    if (rc != 0) break;
    char esc[6] = {'\\', 0, 0, 0, 0, 0};
    size_t len = 2;
    switch (c) {
      case '"':
        esc[1] = '"';
        break;
      case '\\':
        esc[1] = '\\';
        break;
      case '\n':
        esc[1] = 'n';
        break;
      case '\r':
        esc[1] = 'r';
        break;
      case '\t':
        esc[1] = 't';
        break;
      case '\b':
        esc[1] = 'b';
        break;
      case '\f':
        esc[1] = 'f';
        break;
      default:
        esc[1] = 'u';
        esc[2] = '0';
        esc[3] = '0';
        esc[4] = hex[c >> 4];
        esc[5] = hex[c & 15];
        len = 6;
    }
    rc = air__buf_add(b, esc, len);
  }
  if (rc == 0) rc = air__buf_add(b, s + n - run, run);
  if (rc == 0) rc = air__buf_addc(b, '"');
  if (rc != 0) {
    b->n = start;
    if (b->p) b->p[b->n] = '\0';
  }
  return rc;
}

char *air__buf_take(air__buf *b, size_t *n) {
  char *p = b->p;
  if (b->stack) {
    p = malloc(b->n + 1);
    if (p != NULL) memcpy(p, b->p, b->n + 1);
    b->stack = false;
  }
  if (n) *n = p ? b->n : 0;
  b->p = NULL;
  b->n = 0;
  b->cap = 0;
  return p;
}

char *air__memdup0(const char *s, size_t n) {
  char *p = malloc(n + 1);
  if (p == NULL) return NULL;
  if (n) memcpy(p, s, n);
  p[n] = '\0';
  return p;
}
