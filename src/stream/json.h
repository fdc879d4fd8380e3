/*
 * Allocation-free JSON reading for the hot path (stream events): one
 * validating, single-pass tokenizer (json.c) fills an array of tokens in
 * document order, these helpers walk it. Requests and other cold paths use
 * jansson instead.
 *
 * Tokens point into the caller's text, which must outlive the air__json.
 */
#ifndef AIR__JSON_H
#define AIR__JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"

/* Tokens kept inline; bigger documents take a heap array (doubling). */
#define AIR__JSON_INLINE_TOKENS 96
/* The most tokens one document may have (AIR_ETOOBIG past it). */
#define AIR__MAX_JSON_TOKENS 65536
/* The longest text (token offsets are int). */
#define AIR__MAX_JSON_BYTES ((size_t)INT32_MAX)
/* The deepest nesting of objects and arrays (AIR_EPARSE past it). */
#define AIR__JSON_MAX_DEPTH 512

/* Token types; true, false and null each have their own. */
enum {
  AIR__JSON_OBJ = 1,
  AIR__JSON_ARR,
  AIR__JSON_STR,
  AIR__JSON_NUM,
  AIR__JSON_TRUE,
  AIR__JSON_FALSE,
  AIR__JSON_NULL
};

/*
 * One value, or one object key (a string token; its value is the next
 * token). An object's members follow it as key, value, key, value...; an
 * array's elements follow it in order, each with its whole subtree.
 *   start, end  byte offsets into the text: a string without its quotes,
 *               an object or array from its bracket to just past the
 *               closing one, anything else exactly
 *   size        members: pairs of an object, elements of an array, else 0
 *   next        the index just past this token's subtree (i + 1 for a
 *               scalar or a key), so skipping a value costs nothing
 */
typedef struct air__jtok {
  int start;
  int end;
  int size;
  int next;
  unsigned char type;
} air__jtok;

typedef struct air__json {
  const char *js;
  size_t len;
  air__jtok *tok; /* inline_tok or the heap */
  int n;
  int cap;
  air__jtok inline_tok[AIR__JSON_INLINE_TOKENS];
} air__json;

/*
 * Tokenizes one JSON document of len bytes at js (RFC 8259, strict; no NUL
 * terminator needed, nothing past len is read): a single value, white space
 * (space, tab, CR, LF) allowed around it. Strings must not hold raw control
 * bytes and their escapes must be valid (\u with four hex digits); their
 * UTF-8 is not checked. Numbers follow the JSON grammar exactly; true,
 * false and null are the only literals.
 * Returns 0, AIR_EPARSE (not JSON, trailing bytes, nesting deeper than
 * AIR__JSON_MAX_DEPTH), AIR_ETOOBIG (more than AIR__MAX_JSON_TOKENS tokens,
 * reported when the limit is crossed even if a syntax error follows; or
 * len over AIR__MAX_JSON_BYTES) or AIR_ENOMEM. On failure j holds no tokens
 * (n == 0) and no memory.
 * Always call air__json_cleanup afterwards.
 */
int air__json_parse(air__json *j, const char *js, size_t len);
void air__json_cleanup(air__json *j);

/* Whether the len bytes at js are one JSON document by the grammar of
 * air__json_parse, without keeping tokens (no allocation, no token limit,
 * linear): 0, AIR_EPARSE or AIR_ETOOBIG (len over AIR__MAX_JSON_BYTES). */
int air__json_validate(const char *js, size_t len);

/*
 * The helpers below take any token index: out of range (-1 included, what
 * a failed look-up returns) reads as a missing value. The small, hot ones
 * are inline so that a literal key's length and comparison are worked out
 * at compile time.
 */

/* Each is false for an index out of range. */
static inline bool air__json_is_obj(const air__json *j, int i) {
  return i >= 0 && i < j->n && j->tok[i].type == AIR__JSON_OBJ;
}
static inline bool air__json_is_arr(const air__json *j, int i) {
  return i >= 0 && i < j->n && j->tok[i].type == AIR__JSON_ARR;
}
static inline bool air__json_is_str(const air__json *j, int i) {
  return i >= 0 && i < j->n && j->tok[i].type == AIR__JSON_STR;
}
/* True for a null token and, unlike the others, for any index out of range
 * (a missing member reads as null). */
static inline bool air__json_is_null(const air__json *j, int i) {
  return i < 0 || i >= j->n || j->tok[i].type == AIR__JSON_NULL;
}

/* The index just past the value at token i (its whole subtree); n when i
 * is out of range. */
static inline int air__json_skip(const air__json *j, int i) {
  return i < 0 || i >= j->n ? j->n : j->tok[i].next;
}

/* The value of the key of kn bytes (its raw, escaped bytes compared) in
 * the object at token obj, the first when the key repeats, or -1. Walks
 * the members, jumping over each value's subtree. */
static inline int air__json_getn(const air__json *j, int obj, const char *key,
                                 size_t kn) {
  if (!air__json_is_obj(j, obj)) return -1;
  const air__jtok *t = j->tok;
  int end = t[obj].next;
  /* Every key has its value after it (the tokenizer checks). */
  for (int k = obj + 1; k < end; k = t[k + 1].next) {
    if ((size_t)(t[k].end - t[k].start) == kn &&
        memcmp(j->js + t[k].start, key, kn) == 0)
      return k + 1;
  }
  return -1;
}
/* The same for a NUL-terminated key. */
static inline int air__json_get(const air__json *j, int obj, const char *key) {
  return air__json_getn(j, obj, key, strlen(key));
}

/* The element idx of the array at token arr, or -1. */
int air__json_at(const air__json *j, int arr, int idx);

/* True when token i is a string whose raw (escaped) bytes are the n at s. */
static inline bool air__json_eqn(const air__json *j, int i, const char *s,
                                 size_t n) {
  return air__json_is_str(j, i) &&
         (size_t)(j->tok[i].end - j->tok[i].start) == n &&
         memcmp(j->js + j->tok[i].start, s, n) == 0;
}
/* The same for a NUL-terminated s. */
static inline bool air__json_eq(const air__json *j, int i, const char *s) {
  return air__json_eqn(j, i, s, strlen(s));
}
/* The 4 hex digits at p (the caller checked they are there); -1 if one is
 * not a hex digit. */
long air__json_hex4(const char *p);
/* The raw bytes of token i (a string without its quotes). */
const char *air__json_raw(const air__json *j, int i, size_t *n);
/* An integer number token (no fraction/exponent) into *v. */
bool air__json_int(const air__json *j, int i, int64_t *v);
/*
 * Appends the decoded string token i to out (escapes resolved, \u pairs to
 * UTF-8, a lone surrogate to U+FFFD). Returns 0, AIR_EINVAL (not a string)
 * or a buf error.
 */
int air__json_str(const air__json *j, int i, air__buf *out);
/* The same without escapes to resolve: true and a borrowed pointer when the
 * raw bytes hold no backslash (the common case), false otherwise. */
bool air__json_plain(const air__json *j, int i, const char **p, size_t *n);

/*
 * Forward scanning without tokens, for fast paths that recognise one fixed
 * shape of document and hand anything else to air__json_parse. Both follow
 * air__json_parse's grammar exactly: what they accept, the tokenizer
 * accepts as the same bytes.
 */

/* p is just past an opening quote: returns the closing quote, or NULL when
 * the string is unterminated, holds a raw control byte or a bad escape. */
const char *air__json_scan_str(const char *p, const char *e);
/* p at a value with no members (a string, number, true, false, null, {} or
 * [], white space allowed inside the brackets): returns just past it, or
 * NULL for anything else (an object or array with members included). */
const char *air__json_scan_leaf(const char *p, const char *e);
/* p past any white space (space, tab, CR, LF) before e. */
static inline const char *air__json_ws(const char *p, const char *e) {
  while (p < e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
  return p;
}
/* The most members a fast path scans in one document before it gives up:
 * far inside AIR__MAX_JSON_TOKENS, so that a document it takes is never
 * one the tokenizer refuses as too big. */
#define AIR__JSON_SCAN_MAX_MEMBERS 1024

/* Object and array steps, *pp moved past what they read (white space
 * included); on failure *pp is left anywhere and the document should be
 * handed to air__json_parse.
 * open: *pp at the bracket open ('{' or '['): 1 when a member follows (*pp
 * at it), 0 when the bracket closes at once (*pp past it), -1 when *pp is
 * not at open. */
static inline int air__json_scan_open(const char **pp, const char *e,
                                      char open) {
  const char *p = *pp;
  if (p == e || *p != open) return -1;
  p = air__json_ws(p + 1, e);
  if (p < e && *p == (open == '{' ? '}' : ']')) {
    *pp = p + 1;
    return 0;
  }
  *pp = p;
  return 1;
}
/* *pp at a string: its raw bytes in *s, *n and *pp past its closing quote;
 * false when no valid string is there. */
static inline bool air__json_scan_strval(const char **pp, const char *e,
                                         const char **s, size_t *n) {
  const char *p = *pp;
  if (p == e || *p != '"') return false;
  const char *q = air__json_scan_str(p + 1, e);
  if (q == NULL) return false;
  *s = p + 1;
  *n = (size_t)(q - p - 1);
  *pp = q + 1;
  return true;
}
/* A member a fast path reads: seen once, its raw bytes (a string's without
 * the quotes). */
typedef struct air__json_leaf {
  bool seen;
  bool str;
  const char *p;
  size_t n;
} air__json_leaf;
/* A value without members at *pp into v, *pp past it; false when it is
 * not one, or when v was seen before (a repeated key). */
static inline bool air__json_scan_once(const char **pp, const char *e,
                                       air__json_leaf *v) {
  if (v->seen) return false;
  v->seen = true;
  v->str = *pp < e && **pp == '"';
  if (v->str) return air__json_scan_strval(pp, e, &v->p, &v->n);
  v->p = *pp;
  const char *q = air__json_scan_leaf(*pp, e);
  if (q == NULL) return false;
  v->n = (size_t)(q - *pp);
  *pp = q;
  return true;
}
/* Skips a value without members at *pp; false when it is not one. */
static inline bool air__json_skip_leaf(const char **pp, const char *e) {
  return (*pp = air__json_scan_leaf(*pp, e)) != NULL;
}
/* *pp at a member of an object: its key's raw bytes in *k, *kn and *pp at
 * the value (past the colon); false on anything else. */
static inline bool air__json_scan_key(const char **pp, const char *e,
                                      const char **k, size_t *kn) {
  if (!air__json_scan_strval(pp, e, k, kn)) return false;
  const char *p = air__json_ws(*pp, e);
  if (p == e || *p != ':') return false;
  *pp = air__json_ws(p + 1, e);
  return true;
}
/* *pp just past a member's value: 1 at the next member (past the comma), 0
 * past the closing bracket closer, -1 on anything else. */
static inline int air__json_scan_next(const char **pp, const char *e,
                                      char closer) {
  const char *p = air__json_ws(*pp, e);
  if (p == e) return -1;
  if (*p == ',') {
    *pp = air__json_ws(p + 1, e);
    return 1;
  }
  if (*p != closer) return -1;
  *pp = p + 1;
  return 0;
}
/* The raw (escaped) bytes of a string, as air__json_scan_str accepted
 * them, decoded and appended to out exactly as air__json_str does. */
int air__json_unescape(const char *p, size_t n, air__buf *out);

#endif
