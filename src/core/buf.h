/*
 * A growable byte buffer with a named maximum (curl's dynbuf): appends past
 * the maximum fail with AIR_ETOOBIG and leave the buffer as it was, so a
 * hostile input can never cause a realloc storm or an unbounded allocation.
 *
 * Two ways to append. The air__buf_add* functions return the error and are
 * warn_unused_result: a caller whose lost bytes would lose data checks each
 * one. The air__buf_put* ones return nothing, for text built in one go (a
 * log line, an exposition): the first failure of any append sticks in the
 * buffer (air__buf_error) until air__buf_reset, and the builder checks it
 * once at the end and drops the text, never using a truncated one.
 */
#ifndef AIR__BUF_H
#define AIR__BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

typedef struct air__buf {
  char *p; /* NUL-terminated when n > 0 or after any append */
  size_t n;
  size_t cap;
  size_t max; /* the most bytes it may hold */
  int err;    /* the first failed append since init or reset, or 0 */
  bool stack; /* p is the caller's storage (air__buf_init_on), not heap */
} air__buf;

#define AIR__WUR __attribute__((warn_unused_result))

void air__buf_init(air__buf *b, size_t max);
/* As air__buf_init, starting in the caller's cap bytes at mem (a local
 * array): a text that fits costs no allocation; a longer one moves to the
 * heap. For a buffer built and dropped in one function: mem must outlive
 * every use of b, and air__buf_cleanup is still called. */
void air__buf_init_on(air__buf *b, size_t max, char *mem, size_t cap);
void air__buf_cleanup(air__buf *b);
/* Empties the buffer, clears its error and keeps its memory. */
void air__buf_reset(air__buf *b);
/* Makes room for n more bytes (and the NUL) when b has less: one
 * allocation of exactly that, not a doubling chain, for a text whose size
 * is known or estimated up front (a buffer that lives as long as a held
 * stream then holds no slack). An n past the maximum reserves up to it.
 * Returns 0 or AIR_ENOMEM (also kept in b->err). */
AIR__WUR int air__buf_reserve(air__buf *b, size_t n);
/* air__buf_add when the bytes might not fit: grows b (buf.c). */
AIR__WUR int air__buf_add_grow(air__buf *b, const void *p, size_t n);

/* Each returns 0, AIR_ENOMEM or AIR_ETOOBIG (also kept in b->err). The
 * common case, bytes that fit the memory b has, is inline: a request makes
 * a few hundred appends, so a call per append shows. cap never exceeds
 * max + 1, so fitting the memory is within the maximum. */
AIR__WUR static inline int air__buf_add(air__buf *b, const void *p, size_t n) {
  if (n < b->cap - b->n) { /* room for n bytes and the NUL; cap 0: never */
    if (n > 0) memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
  }
  return air__buf_add_grow(b, p, n);
}
AIR__WUR static inline int air__buf_adds(air__buf *b,
                                         const char *s) { /* a C string */
  return air__buf_add(b, s, strlen(s));
}
AIR__WUR static inline int air__buf_addc(air__buf *b, char c) {
  return air__buf_add(b, &c, 1);
}
AIR__WUR int air__buf_addu(air__buf *b, unsigned long long v); /* decimal */
/* Appends s as a JSON string literal, quotes included: escapes ", \\ and
 * control bytes; valid UTF-8 passes through unchanged, each byte of an
 * invalid sequence becomes \ufffd, so the result is always valid JSON. */
AIR__WUR int air__buf_add_json_str(air__buf *b, const char *s, size_t n);
/* The length of the valid UTF-8 sequence at s (1 to 4; n >= 1 bytes
 * available), or 0 when it is not valid UTF-8 (overlong, surrogate, past
 * U+10FFFF, truncated). */
size_t air__utf8_seq(const unsigned char *s, size_t n);
/* The length of the longest prefix of s[0..n) of at most max bytes that
 * does not end inside a UTF-8 sequence (it steps back over at most three
 * continuation bytes; bytes that are not UTF-8 are left as they are). */
size_t air__utf8_cut(const char *s, size_t n, size_t max);
/* Appends n bytes at the next 8-aligned offset (zero padding before them),
 * stored in *at: for an array of pointers kept after the strings it points
 * into, fixed up once nothing more is appended. Returns as air__buf_add. */
AIR__WUR int air__buf_add_aligned(air__buf *b, const void *p, size_t n,
                                  size_t *at);
/* Takes the bytes: returns the buffer (caller frees), leaves b empty.
 * From caller storage (air__buf_init_on) they are copied to the heap
 * first (NULL when that fails). */
char *air__buf_take(air__buf *b, size_t *n);

/* A malloc'd copy of the n bytes at s (which may hold NULs; n may be 0),
 * NUL-terminated: the strings of a result handed to a caller. NULL when
 * out of memory. */
char *air__memdup0(const char *s, size_t n);

/* The first append that failed since init or reset (0: none). */
static inline int air__buf_error(const air__buf *b) {
  return b->err;
}

/* Appends whose failure sticks in the buffer (see the top of this file). */
static inline void air__buf_put(air__buf *b, const void *p, size_t n) {
  if (air__buf_add(b, p, n) != 0) return;
}
static inline void air__buf_puts(air__buf *b, const char *s) {
  if (air__buf_adds(b, s) != 0) return;
}
static inline void air__buf_putc(air__buf *b, char c) {
  if (air__buf_addc(b, c) != 0) return;
}
static inline void air__buf_putu(air__buf *b, unsigned long long v) {
  if (air__buf_addu(b, v) != 0) return;
}
static inline void air__buf_put_json_str(air__buf *b, const char *s, size_t n) {
  if (air__buf_add_json_str(b, s, n) != 0) return;
}

#endif
