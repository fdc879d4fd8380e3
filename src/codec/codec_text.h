/*
 * Writing JSON text into an air__buf: the builders the encoders of
 * src/codec share (each dialect's caller.c, the continuation marker, the
 * error bodies). Every function returns 0 or the buffer's error
 * (AIR_ENOMEM, AIR_ETOOBIG) as it is (docs/style.md §5); what a failed
 * encoder appended is dropped by air__text_undo, so a caller never sees a
 * partial chunk.
 */
#ifndef AIR__CODEC_TEXT_H
#define AIR__CODEC_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "airetry.h"
#include "buf.h"
#include "str.h"

/* A string literal as (pointer, length) for air__buf_add. */
#define LIT(s) (s), (sizeof(s) - 1)

/* Whether the n bytes at p are the string literal lit. */
#define IS(p, n, lit) \
  ((n) == sizeof(lit) - 1 && memcmp((p), (lit), sizeof(lit) - 1) == 0)

/* rc = x; when it fails, on to the function's `out:` label, the one exit
 * (which undoes what the function appended and returns rc). */
#define TRY(x)             \
  do {                     \
    rc = (x);              \
    if (rc != 0) goto out; \
  } while (0)

/* Drops what was appended to out since mark. */
static inline void air__text_undo(air__buf *out, size_t mark) {
  out->n = mark;
  if (out->p != NULL) out->p[mark] = '\0';
}

/* (s, n) as a JSON string; NULL is "". */
static inline int air__text_str(air__buf *b, const char *s, size_t n) {
  return air__buf_add_json_str(b, s != NULL ? s : "", s != NULL ? n : 0);
}

/* A C string as a JSON string; NULL is "". */
static inline int air__text_cstr(air__buf *b, const char *s) {
  return air__text_str(b, s, s != NULL ? strlen(s) : 0);
}

/* Whether s is the C string t. */
static inline bool air__str_is(air__str s, const char *t) {
  size_t n = strlen(t);
  return s.n == n && memcmp(s.p, t, n) == 0;
}

/* Whether name is one of the n names. */
static inline bool air__name_in(const char *name, const char *const *names,
                                size_t n) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(name, names[i]) == 0) return true;
  return false;
}

/* A signed integer in decimal. */
int air__text_int(air__buf *b, long long v);

/* a + b, UINT64_MAX when it overflows (token counts). */
static inline uint64_t air__sat_add(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* How many bytes of an identifier (s, n) fit max: cut at its first NUL
 * byte, then back to a UTF-8 boundary; 0 for NULL. */
size_t air__ident_fit(const char *s, size_t n, size_t max);

/* How a dialect writes the "attempts" of a final error body. */
typedef struct air__attempts_style {
  const char *no_reason; /* the reason of an attempt whose reason has no
                            name ("unknown", "none") */
  bool null_request_id;  /* an empty request id is null, not "" */
} air__attempts_style;

/* The members of the attempts array, comma-separated (docs/design.md §5):
 * {"target","reason","status","ms","request_id"}, or for a skipped target
 * {"target","outcome":"skipped","field"}. */
int air__text_attempts(air__buf *out, const air_attempt *log, size_t n,
                       const air__attempts_style *style);

/* The OpenAI error object's first members, {"message":…,"type":…,"code":…
 * without its closing brace (both OpenAI dialects): the type is the
 * OpenAI error type of reason, the code its reason name; a NULL message is
 * "". */
int air__text_openai_error(air__buf *out, air_reason reason,
                           const char *message);

#endif
