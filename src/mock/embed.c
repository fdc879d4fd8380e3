/*
 * The mock's answers without a stream (docs/mock.md "Embeddings" and
 * "count_tokens"). Pure: a parsed request in, a whole JSON body out.
 *
 * Embeddings are deterministic: each input's vector comes from a generator
 * (splitmix64) seeded with the FNV-1a hash of the input (its UTF-8 bytes; a
 * token array's values as 4-byte little-endian integers) and the model
 * name, scaled to unit length, computed in float32 so that the decimal
 * ("float") and the base64 encodings carry the same numbers. Nothing here
 * depends on the time, the locale or the attempt.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "mock_int.h"

#define LIT(s) s, sizeof(s) - 1

/* FNV-1a, continued from h. */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *s = p;
  for (size_t i = 0; i < n; i++) {
    h ^= s[i];
    h *= 1099511628211ull;
  }
  return h;
}

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* The seed of one input (a string, or an array of integer tokens). */
static uint64_t seed_of(const json_t *in, const char *model, size_t m_n) {
  uint64_t h = fnv(14695981039346656037ull, model, m_n);
  h = fnv(h, "\0", 1);
  if (json_is_string(in))
    return fnv(h, json_string_value(in), json_string_length(in));
  size_t i;
  const json_t *t;
  json_array_foreach(in, i, t) {
    uint32_t v = (uint32_t)json_integer_value(t);
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8),
                          (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    h = fnv(h, b, 4);
  }
  return h;
}

/* The vector of one input: dims floats of unit length. */
static void vector(uint64_t seed, float *v, size_t dims) {
  double sum = 0;
  for (size_t i = 0; i < dims; i++) {
    /* 24 random bits, uniform in [-1, 1). */
    double u = (double)(splitmix(&seed) >> 40) / (double)(1u << 23) - 1.0;
    v[i] = (float)u;
    sum += u * u;
  }
  double norm = sum > 0 ? sqrt(sum) : 1.0;
  for (size_t i = 0; i < dims; i++) v[i] = (float)(v[i] / norm);
}

static bool is_token_array(const json_t *a) {
  if (!json_is_array(a) || json_array_size(a) == 0) return false;
  size_t i;
  const json_t *t;
  json_array_foreach(a, i, t) {
    if (!json_is_integer(t) || json_integer_value(t) < 0 ||
        json_integer_value(t) > 0xffffffffll)
      return false;
  }
  return true;
}

/* The inputs of a request as a list: a string or one token array is one
 * input; an array of strings or of token arrays is many. NULL when input
 * has none of these shapes (an empty string or list included). */
static bool inputs_of(const json_t *input, const json_t **one, size_t *n) {
  *one = NULL;
  *n = 0;
  if (json_is_string(input)) {
    if (json_string_length(input) == 0) return false;
    *one = input;
    *n = 1;
    return true;
  }
  if (is_token_array(input)) {
    *one = input;
    *n = 1;
    return true;
  }
  if (!json_is_array(input) || json_array_size(input) == 0) return false;
  size_t i;
  const json_t *e;
  json_array_foreach(input, i, e) {
    if (!(json_is_string(e) && json_string_length(e) > 0) && !is_token_array(e))
      return false;
  }
  *n = json_array_size(input);
  return true;
}

static const char b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The float32 values as base64 of their little-endian bytes (OpenAI's
 * encoding_format "base64"), in quotes. */
static int add_base64(air__buf *out, const float *v, size_t dims) {
  int rc = air__buf_addc(out, '"');
  unsigned char tri[3];
  size_t k = 0;
  for (size_t i = 0; rc == 0 && i < dims; i++) {
    uint32_t u;
    memcpy(&u, &v[i], 4);
    for (int j = 0; rc == 0 && j < 4; j++) {
      tri[k++] = (unsigned char)(u >> (8 * j));
      if (k < 3) continue;
      char q[4] = {b64[tri[0] >> 2], b64[((tri[0] & 3) << 4) | (tri[1] >> 4)],
                   b64[((tri[1] & 15) << 2) | (tri[2] >> 6)], b64[tri[2] & 63]};
      rc = air__buf_add(out, q, 4);
      k = 0;
    }
  }
  if (rc == 0 && k > 0) {
    if (k == 1) tri[1] = 0;
    tri[2] = 0;
    char q[4] = {b64[tri[0] >> 2], b64[((tri[0] & 3) << 4) | (tri[1] >> 4)],
                 k == 2 ? b64[(tri[1] & 15) << 2] : '=', '='};
    rc = air__buf_add(out, q, 4);
  }
  if (rc == 0) rc = air__buf_addc(out, '"');
  return rc;
}

static int add_floats(air__buf *out, const float *v, size_t dims) {
  int rc = air__buf_addc(out, '[');
  for (size_t i = 0; rc == 0 && i < dims; i++) {
    char num[32];
    int len = snprintf(num, sizeof(num), "%s%.9g", i ? "," : "", (double)v[i]);
    rc = air__buf_add(out, num, (size_t)len);
  }
  if (rc == 0) rc = air__buf_addc(out, ']');
  return rc;
}

/* Prompt tokens of one input: a token array's length; a string's bytes / 4
 * rounded up. */
static uint64_t tokens_of(const json_t *in) {
  if (json_is_array(in)) return json_array_size(in);
  return (json_string_length(in) + 3) / 4;
}

int air__mock_embeddings(const json_t *req, const char *model, size_t m_n,
                         air__buf *out, const char **err) {
  *err = NULL;
  const json_t *one;
  size_t n;
  if (!inputs_of(json_object_get(req, "input"), &one, &n)) {
    *err =
        "input: expected a non-empty string, array of strings, array of "
        "integer tokens or array of token arrays";
    return AIR_EINVAL;
  }
  if (n > AIR__MOCK_MAX_EMBED_INPUTS) {
    *err = "input: more than 2048 inputs";
    return AIR_EINVAL;
  }
  size_t dims = AIR__MOCK_EMBED_DIMS;
  const json_t *d = json_object_get(req, "dimensions");
  if (d != NULL) {
    if (!json_is_integer(d) || json_integer_value(d) < 1 ||
        json_integer_value(d) > AIR__MOCK_MAX_EMBED_DIMS) {
      *err = "dimensions: expected an integer from 1 to 4096";
      return AIR_EINVAL;
    }
    dims = (size_t)json_integer_value(d);
  }
  bool base64 = false;
  const json_t *f = json_object_get(req, "encoding_format");
  if (f != NULL) {
    const char *s = json_string_value(f);
    if (s == NULL || (strcmp(s, "float") != 0 && strcmp(s, "base64") != 0)) {
      *err = "encoding_format: expected \"float\" or \"base64\"";
      return AIR_EINVAL;
    }
    base64 = strcmp(s, "base64") == 0;
  }
  float v[AIR__MOCK_MAX_EMBED_DIMS];
  uint64_t tokens = 0;
  int rc = air__buf_add(out, LIT("{\"object\":\"list\",\"data\":["));
  for (size_t i = 0; rc == 0 && i < n; i++) {
    const json_t *in =
        one ? one : json_array_get(json_object_get(req, "input"), i);
    tokens += tokens_of(in);
    vector(seed_of(in, model, m_n), v, dims);
    if (i) rc = air__buf_addc(out, ',');
    if (rc == 0)
      rc = air__buf_add(out, LIT("{\"object\":\"embedding\",\"index\":"));
    if (rc == 0) rc = air__buf_addu(out, i);
    if (rc == 0) rc = air__buf_add(out, LIT(",\"embedding\":"));
    if (rc == 0)
      rc = base64 ? add_base64(out, v, dims) : add_floats(out, v, dims);
    if (rc == 0) rc = air__buf_addc(out, '}');
  }
  if (rc == 0) rc = air__buf_add(out, LIT("],\"model\":"));
  if (rc == 0) rc = air__buf_add_json_str(out, model, m_n);
  if (rc == 0) rc = air__buf_add(out, LIT(",\"usage\":{\"prompt_tokens\":"));
  if (rc == 0) rc = air__buf_addu(out, tokens);
  if (rc == 0) rc = air__buf_add(out, LIT(",\"total_tokens\":"));
  if (rc == 0) rc = air__buf_addu(out, tokens);
  if (rc == 0) rc = air__buf_add(out, LIT("}}"));
  if (rc != 0) *err = "the embeddings are over the mock's size limit";
  return rc;
}

/* The bytes a value adds to the count: a string's length, else its
 * compact JSON with sorted keys (0 when it cannot be written). */
static size_t bytes_of(const json_t *v) {
  if (v == NULL) return 0;
  if (json_is_string(v)) return json_string_length(v);
  return json_dumpb(v, NULL, 0, JSON_COMPACT | JSON_SORT_KEYS);
}

/* A content (string or list of blocks): text blocks count their text,
 * other blocks their JSON. */
static size_t content_bytes(const json_t *c) {
  if (!json_is_array(c)) return bytes_of(c);
  size_t n = 0, i;
  const json_t *b;
  json_array_foreach(c, i, b) {
    const json_t *t = json_object_get(b, "text");
    n += json_is_string(t) ? json_string_length(t) : bytes_of(b);
  }
  return n;
}

int air__mock_count_tokens(const json_t *req, air__buf *out, const char **err) {
  *err = NULL;
  const json_t *msgs = json_object_get(req, "messages");
  if (!json_is_array(msgs) || json_array_size(msgs) == 0) {
    *err = "messages: expected a non-empty array";
    return AIR_EINVAL;
  }
  size_t bytes = content_bytes(json_object_get(req, "system"));
  size_t i;
  const json_t *m;
  json_array_foreach(msgs, i, m) {
    if (!json_is_object(m)) {
      *err = "messages: every message must be an object";
      return AIR_EINVAL;
    }
    bytes += content_bytes(json_object_get(m, "content"));
  }
  const json_t *tools = json_object_get(req, "tools");
  const json_t *t;
  if (json_is_array(tools))
    json_array_foreach(tools, i, t) bytes += bytes_of(t);
  uint64_t n = (bytes + 3) / 4 + 3 * (uint64_t)json_array_size(msgs);
  int rc = air__buf_add(out, LIT("{\"input_tokens\":"));
  if (rc == 0) rc = air__buf_addu(out, n);
  if (rc == 0) rc = air__buf_addc(out, '}');
  if (rc != 0) *err = "the count is over the mock's size limit";
  return rc;
}
