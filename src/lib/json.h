/*
 * Allocation-free JSON reading for the hot path (stream events): jsmn
 * (Debian's libjsmn-dev, strict mode) tokenizes into an array, these helpers
 * walk it. Requests and other cold paths use jansson instead.
 *
 * Tokens point into the caller's text, which must outlive the air__json.
 */
#ifndef AIR_JSON_H
#define AIR_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JSMN_STRICT
#ifndef AIR_JSON_IMPL
#define JSMN_HEADER
#endif
#include <jsmn.h>

#include "buf.h"

/* Tokens kept inline; bigger documents take a heap array. */
#define AIR_JSON_INLINE_TOKENS 96
/* The most tokens one document may have (AIR_ETOOBIG past it). */
#define AIR_MAX_JSON_TOKENS 65536

typedef struct air__json {
  const char *js;
  size_t len;
  jsmntok_t *tok;
  int n;
  jsmntok_t inline_tok[AIR_JSON_INLINE_TOKENS];
} air__json;

/*
 * Tokenizes one JSON document (a single value, surrounding white space
 * allowed). Returns 0, AIR_EPARSE (not JSON, or trailing bytes) or
 * AIR_ETOOBIG. Always call air__json_cleanup afterwards.
 */
int air__json_parse(air__json *j, const char *js, size_t len);
void air__json_cleanup(air__json *j);

/* The index just past the value at token i (its whole subtree). */
int air__json_skip(const air__json *j, int i);
/* The value of key in the object at token obj, or -1. */
int air__json_get(const air__json *j, int obj, const char *key);
/* The element idx of the array at token arr, or -1. */
int air__json_at(const air__json *j, int arr, int idx);

bool air__json_is_obj(const air__json *j, int i);
bool air__json_is_arr(const air__json *j, int i);
bool air__json_is_str(const air__json *j, int i);
bool air__json_is_null(const air__json *j, int i);  /* also true for i < 0 */
/* True when token i is a string whose raw (escaped) bytes equal s. */
bool air__json_eq(const air__json *j, int i, const char *s);
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

#endif
