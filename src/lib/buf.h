/*
 * A growable byte buffer with a named maximum (curl's dynbuf): appends past
 * the maximum fail with AIR_ETOOBIG and leave the buffer as it was, so a
 * hostile input can never cause a realloc storm or an unbounded allocation.
 */
#ifndef AIR_BUF_H
#define AIR_BUF_H

#include <stddef.h>

typedef struct air__buf {
  char *p;      /* NUL-terminated when n > 0 or after any append */
  size_t n;
  size_t cap;
  size_t max;   /* the most bytes it may hold */
} air__buf;

void air__buf_init(air__buf *b, size_t max);
void air__buf_cleanup(air__buf *b);
/* Empties the buffer and keeps its memory. */
void air__buf_reset(air__buf *b);
/* Each returns 0, AIR_ENOMEM or AIR_ETOOBIG. */
int air__buf_add(air__buf *b, const void *p, size_t n);
int air__buf_adds(air__buf *b, const char *s);  /* a NUL-terminated string */
int air__buf_addc(air__buf *b, char c);
int air__buf_addu(air__buf *b, unsigned long long v);  /* decimal */
/* Appends s as a JSON string literal, quotes included: escapes ", \\ and
 * control bytes; valid UTF-8 passes through unchanged, each byte of an
 * invalid sequence becomes \ufffd, so the result is always valid JSON. */
int air__buf_add_json_str(air__buf *b, const char *s, size_t n);
/* The length of the valid UTF-8 sequence at s (1 to 4; n >= 1 bytes
 * available), or 0 when it is not valid UTF-8 (overlong, surrogate, past
 * U+10FFFF, truncated). */
size_t air__utf8_seq(const unsigned char *s, size_t n);
/* Appends n bytes at the next 8-aligned offset (zero padding before them),
 * stored in *at: for an array of pointers kept after the strings it points
 * into, fixed up once nothing more is appended. Returns as air__buf_add. */
int air__buf_add_aligned(air__buf *b, const void *p, size_t n, size_t *at);
/* Takes the bytes: returns the buffer (caller frees), leaves b empty. */
char *air__buf_take(air__buf *b, size_t *n);

#endif
