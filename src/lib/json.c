#define AIR_JSON_IMPL
#include "json.h"

#include <stdlib.h>
#include <string.h>

#include "airetry.h"

static int count_tokens(const char *js, size_t len) {
  jsmn_parser p;
  jsmn_init(&p);
  return jsmn_parse(&p, js, len, NULL, 0);
}

int air__json_parse(air__json *j, const char *js, size_t len) {
  j->js = js;
  j->len = len;
  j->tok = j->inline_tok;
  j->n = 0;
  jsmn_parser p;
  jsmn_init(&p);
  int n = jsmn_parse(&p, js, len, j->tok, AIR_JSON_INLINE_TOKENS);
  if (n == JSMN_ERROR_NOMEM) {
    n = count_tokens(js, len);
    if (n < 0) return AIR_EPARSE;
    if (n > AIR_MAX_JSON_TOKENS) return AIR_ETOOBIG;
    j->tok = malloc((size_t)n * sizeof(jsmntok_t));
    if (j->tok == NULL) {
      j->tok = j->inline_tok;
      return AIR_ENOMEM;
    }
    jsmn_init(&p);
    n = jsmn_parse(&p, js, len, j->tok, (unsigned)n);
  }
  if (n <= 0) return AIR_EPARSE;
  j->n = n;
  /* One value only: its subtree must cover every token, and only white
   * space may follow it. */
  if (air__json_skip(j, 0) != n) return AIR_EPARSE;
  for (size_t k = (size_t)j->tok[0].end; k < len; k++) {
    char c = js[k];
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return AIR_EPARSE;
  }
  return 0;
}

void air__json_cleanup(air__json *j) {
  if (j->tok != j->inline_tok) free(j->tok);
  j->tok = j->inline_tok;
  j->n = 0;
}

int air__json_skip(const air__json *j, int i) {
  if (i < 0 || i >= j->n) return j->n;
  int end = j->tok[i].end;
  int k = i + 1;
  while (k < j->n && j->tok[k].start < end) k++;
  return k;
}

int air__json_get(const air__json *j, int obj, const char *key) {
  if (!air__json_is_obj(j, obj)) return -1;
  int pairs = j->tok[obj].size;
  int k = obj + 1;
  for (int p = 0; p < pairs && k < j->n; p++) {
    if (air__json_eq(j, k, key)) return k + 1 < j->n ? k + 1 : -1;
    k = air__json_skip(j, k + 1);
  }
  return -1;
}

int air__json_at(const air__json *j, int arr, int idx) {
  if (!air__json_is_arr(j, arr) || idx < 0 || idx >= j->tok[arr].size)
    return -1;
  int k = arr + 1;
  for (int e = 0; e < idx && k < j->n; e++) k = air__json_skip(j, k);
  return k < j->n ? k : -1;
}

bool air__json_is_obj(const air__json *j, int i) {
  return i >= 0 && i < j->n && j->tok[i].type == JSMN_OBJECT;
}

bool air__json_is_arr(const air__json *j, int i) {
  return i >= 0 && i < j->n && j->tok[i].type == JSMN_ARRAY;
}

bool air__json_is_str(const air__json *j, int i) {
  return i >= 0 && i < j->n && j->tok[i].type == JSMN_STRING;
}

bool air__json_is_null(const air__json *j, int i) {
  if (i < 0 || i >= j->n) return true;
  return j->tok[i].type == JSMN_PRIMITIVE && j->js[j->tok[i].start] == 'n';
}

bool air__json_eq(const air__json *j, int i, const char *s) {
  if (!air__json_is_str(j, i)) return false;
  size_t n = (size_t)(j->tok[i].end - j->tok[i].start);
  return strlen(s) == n && memcmp(j->js + j->tok[i].start, s, n) == 0;
}

const char *air__json_raw(const air__json *j, int i, size_t *n) {
  if (i < 0 || i >= j->n) {
    *n = 0;
    return "";
  }
  *n = (size_t)(j->tok[i].end - j->tok[i].start);
  return j->js + j->tok[i].start;
}

bool air__json_int(const air__json *j, int i, int64_t *v) {
  if (i < 0 || i >= j->n || j->tok[i].type != JSMN_PRIMITIVE) return false;
  const char *p = j->js + j->tok[i].start;
  const char *e = j->js + j->tok[i].end;
  bool neg = false;
  if (p < e && *p == '-') {
    neg = true;
    p++;
  }
  if (p == e) return false;
  uint64_t acc = 0;
  for (; p < e; p++) {
    if (*p < '0' || *p > '9') return false;
    if (acc > (UINT64_MAX - 9) / 10) return false;
    acc = acc * 10 + (uint64_t)(*p - '0');
  }
  if (acc > (uint64_t)INT64_MAX) return false;
  *v = neg ? -(int64_t)acc : (int64_t)acc;
  return true;
}

bool air__json_plain(const air__json *j, int i, const char **p, size_t *n) {
  if (!air__json_is_str(j, i)) return false;
  *p = j->js + j->tok[i].start;
  *n = (size_t)(j->tok[i].end - j->tok[i].start);
  return memchr(*p, '\\', *n) == NULL;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Reads 4 hex digits at p (bounds checked by the caller); -1 if bad. */
static long hex4(const char *p) {
  long v = 0;
  for (int k = 0; k < 4; k++) {
    int h = hexval(p[k]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

static int add_utf8(air__buf *out, unsigned long cp) {
  char u[4];
  size_t n;
  if (cp < 0x80) {
    u[0] = (char)cp;
    n = 1;
  } else if (cp < 0x800) {
    u[0] = (char)(0xC0 | (cp >> 6));
    u[1] = (char)(0x80 | (cp & 0x3F));
    n = 2;
  } else if (cp < 0x10000) {
    u[0] = (char)(0xE0 | (cp >> 12));
    u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    u[2] = (char)(0x80 | (cp & 0x3F));
    n = 3;
  } else {
    u[0] = (char)(0xF0 | (cp >> 18));
    u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    u[3] = (char)(0x80 | (cp & 0x3F));
    n = 4;
  }
  return air__buf_add(out, u, n);
}

int air__json_str(const air__json *j, int i, air__buf *out) {
  if (!air__json_is_str(j, i)) return AIR_EINVAL;
  const char *p = j->js + j->tok[i].start;
  const char *e = j->js + j->tok[i].end;
  int rc = 0;
  while (p < e && rc == 0) {
    const char *bs = memchr(p, '\\', (size_t)(e - p));
    if (bs == NULL) return air__buf_add(out, p, (size_t)(e - p));
    rc = air__buf_add(out, p, (size_t)(bs - p));
    if (rc != 0 || bs + 1 >= e) break;
    char c = bs[1];
    p = bs + 2;
    switch (c) {
      case 'n': rc = air__buf_addc(out, '\n'); break;
      case 't': rc = air__buf_addc(out, '\t'); break;
      case 'r': rc = air__buf_addc(out, '\r'); break;
      case 'b': rc = air__buf_addc(out, '\b'); break;
      case 'f': rc = air__buf_addc(out, '\f'); break;
      case 'u': {
        long cp = e - p >= 4 ? hex4(p) : -1;
        if (cp < 0) return AIR_EPARSE;
        p += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF && e - p >= 6 && p[0] == '\\' &&
            p[1] == 'u') {
          long lo = hex4(p + 2);
          if (lo >= 0xDC00 && lo <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            p += 6;
          }
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
        rc = add_utf8(out, (unsigned long)cp);
        break;
      }
      default:  /* " \ / */
        rc = air__buf_addc(out, c);
    }
  }
  return rc;
}
