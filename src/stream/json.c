/*
 * The hot-path JSON tokenizer (json.h) and the helpers over its tokens.
 *
 * The tokenizer is one pass over the text with an explicit state (the
 * labels value, after, closing, key and string) instead of recursion: an
 * open container's token keeps its parent's index in `next` until it
 * closes, which is when its real `next` becomes known, so no stack is
 * needed and the depth limit bounds the document, not the C stack. Bytes
 * are classified by one table; string bodies, most of a stream event, are
 * scanned 8 bytes at a time.
 */
#include "json.h"

#include <stdlib.h>
#include <string.h>

#include "airetry.h"

/* Byte classes: one table look-up per byte in the loops below. */
enum {
  W = 1, /* white space between tokens: space, tab, CR, LF */
  S = 2, /* stops a run of plain string bytes: " \ and controls < 0x20 */
  D = 4, /* decimal digit */
  H = 8, /* hex digit */
  SW = S | W,
  DH = D | H
};

/* clang-format off */
static const unsigned char cls[256] = {
    S,  S,  S,  S,  S,  S,  S,  S,  S,  SW, SW, S,  S,  SW, S,  S,  /* 00 */
    S,  S,  S,  S,  S,  S,  S,  S,  S,  S,  S,  S,  S,  S,  S,  S,  /* 10 */
    W,  0,  S,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  /* 20 */
    DH, DH, DH, DH, DH, DH, DH, DH, DH, DH, 0,  0,  0,  0,  0,  0,  /* 30 */
    0,  H,  H,  H,  H,  H,  H,  0,  0,  0,  0,  0,  0,  0,  0,  0,  /* 40 */
    0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  S,  0,  0,  0,  /* 50 */
    0,  H,  H,  H,  H,  H,  H,  0,  0,  0,  0,  0,  0,  0,  0,  0,  /* 60 */
    /* 70-FF: 0 (UTF-8 is not checked here) */
};
/* clang-format on */

#define IS(c, k) (cls[(unsigned char)(c)] & (k))

static const char *skip_ws(const char *p, const char *e) {
  while (p < e && IS(*p, W)) p++;
  return p;
}

static const char *skip_digits(const char *p, const char *e) {
  while (p < e && IS(*p, D)) p++;
  return p;
}

#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

/*
 * The byte offset of the first stop byte (S) among the 8 at p, or 8 when
 * there is none (SWAR: a byte's high bit in t is set where a subtraction
 * borrows, which only a stop byte causes; bytes >= 0x80 are masked out).
 */
static unsigned first_stop8(const char *p) {
  uint64_t x;
  memcpy(&x, p, 8);
  uint64_t t = ((x ^ (ONES * '"')) - ONES) | ((x ^ (ONES * '\\')) - ONES) |
               (x - ONES * 0x20);
  t &= ~x & HIGHS;
  if (t == 0) return 8;
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  /* Bytes above the first stop may be flagged too (borrows); the lowest
   * set bit is exact. */
  return (unsigned)__builtin_ctzll(t) >> 3;
#else
  unsigned i = 0;
  while (!IS(p[i], S)) i++;
  return i;
#endif
}

/*
 * p is just past an opening quote: returns the closing quote, or NULL when
 * the string is unterminated, holds a raw control byte or a bad escape.
 */
static const char *scan_string(const char *p, const char *e) {
  for (;;) {
    for (;;) {
      if (e - p < 8) {
        while (p < e && !IS(*p, S)) p++;
        if (p == e) return NULL;
        break;
      }
      unsigned i = first_stop8(p);
      p += i;
      if (i < 8) break;
    }
    if (*p == '"') return p;
    if (*p != '\\' || e - p < 2) return NULL;
    switch (p[1]) {
      case '"':
      case '\\':
      case '/':
      case 'b':
      case 'f':
      case 'n':
      case 'r':
      case 't':
        p += 2;
        break;
      case 'u':
        if (e - p < 6 || !IS(p[2], H) || !IS(p[3], H) || !IS(p[4], H) ||
            !IS(p[5], H))
          return NULL;
        p += 6;
        break;
      default:
        return NULL;
    }
  }
}

/* p is where a number must start: returns its end, or NULL when the bytes
 * there do not follow the JSON number grammar. */
static const char *scan_number(const char *p, const char *e) {
  if (*p == '-') p++;
  if (p == e) return NULL;
  if (*p == '0')
    p++;
  else if (IS(*p, D))
    p = skip_digits(p + 1, e);
  else
    return NULL;
  if (p < e && *p == '.') {
    p++;
    if (p == e || !IS(*p, D)) return NULL;
    p = skip_digits(p + 1, e);
  }
  if (p < e && (*p == 'e' || *p == 'E')) {
    p++;
    if (p < e && (*p == '+' || *p == '-')) p++;
    if (p == e || !IS(*p, D)) return NULL;
    p = skip_digits(p + 1, e);
  }
  return p;
}

/* Makes room for one more token past n (n == cap): doubles the array,
 * moving it to the heap the first time. */
static int grow(air__json *j, int n) {
  if (j->cap >= AIR__MAX_JSON_TOKENS) return AIR_ETOOBIG;
  int cap =
      j->cap > AIR__MAX_JSON_TOKENS / 2 ? AIR__MAX_JSON_TOKENS : j->cap * 2;
  air__jtok *t;
  if (j->tok == j->inline_tok) {
    t = malloc((size_t)cap * sizeof(*t));
    if (t != NULL) memcpy(t, j->tok, (size_t)n * sizeof(*t));
  } else {
    t = realloc(j->tok, (size_t)cap * sizeof(*t));
  }
  if (t == NULL) return AIR_ENOMEM;
  j->tok = t;
  j->cap = cap;
  return 0;
}

/* The tokenizer proper (see the top of the file); j->n is set on success. */
static int tokenize(air__json *j) {
  const char *const js = j->js;
  const char *const e = js + j->len;
  const char *p = js;
  air__jtok *t = j->tok;
  air__jtok *k;
  int n = 0;
  int cap = j->cap;
  int top = -1;    /* the innermost open container, -1 outside any */
  char closer = 0; /* its closing bracket */
  int depth = 0;
  bool is_key;
  int rc;

  /* White space is skipped only where it is met: compact JSON, the common
   * case, then costs one look at the byte that is there anyway. */
value:
  if (p == e) return AIR_EPARSE;
  if (IS(*p, W)) {
    p = skip_ws(p + 1, e);
    if (p == e) return AIR_EPARSE;
  }
  if (n == cap) {
    if ((rc = grow(j, n)) != 0) return rc;
    t = j->tok;
    cap = j->cap;
  }
  k = &t[n++];
  k->start = (int)(p - js);
  k->size = 0;
  k->next = n;
  switch (*p) {
    case '{':
    case '[':
      if (depth == AIR__JSON_MAX_DEPTH) return AIR_EPARSE;
      depth++;
      k->type = *p == '{' ? AIR__JSON_OBJ : AIR__JSON_ARR;
      closer = *p == '{' ? '}' : ']';
      k->next = top;
      top = n - 1;
      p = skip_ws(p + 1, e);
      if (p == e) return AIR_EPARSE;
      if (*p == closer) goto closing;
      if (closer == '}') goto key;
      k->size = 1;
      goto value;
    case '"':
      k->start++;
      is_key = false;
      goto string;
    case 't':
      if (e - p < 4 || memcmp(p, "true", 4) != 0) return AIR_EPARSE;
      k->type = AIR__JSON_TRUE;
      p += 4;
      k->end = (int)(p - js);
      break;
    case 'f':
      if (e - p < 5 || memcmp(p, "false", 5) != 0) return AIR_EPARSE;
      k->type = AIR__JSON_FALSE;
      p += 5;
      k->end = (int)(p - js);
      break;
    case 'n':
      if (e - p < 4 || memcmp(p, "null", 4) != 0) return AIR_EPARSE;
      k->type = AIR__JSON_NULL;
      p += 4;
      k->end = (int)(p - js);
      break;
    default:
      if ((p = scan_number(p, e)) == NULL) return AIR_EPARSE;
      k->type = AIR__JSON_NUM;
      k->end = (int)(p - js);
  }

after:
  /* A value ended: a separator or the closing bracket of top follows. */
  if (top < 0) {
    p = skip_ws(p, e);
    if (p != e) return AIR_EPARSE;
    j->n = n;
    return 0;
  }
  if (p == e) return AIR_EPARSE;
  if (IS(*p, W)) {
    p = skip_ws(p + 1, e);
    if (p == e) return AIR_EPARSE;
  }
  if (*p == ',') {
    p++;
    if (closer == '}') goto key;
    t[top].size++;
    goto value;
  }
  if (*p != closer) return AIR_EPARSE;

closing:
  /* p is at the closing bracket of top. */
  k = &t[top];
  p++;
  k->end = (int)(p - js);
  top = k->next;
  k->next = n;
  depth--;
  if (top >= 0) closer = t[top].type == AIR__JSON_OBJ ? '}' : ']';
  goto after;

key:
  /* Inside the object top, where a member must start. */
  if (p < e && IS(*p, W)) p = skip_ws(p + 1, e);
  if (p == e || *p != '"') return AIR_EPARSE;
  if (n == cap) {
    if ((rc = grow(j, n)) != 0) return rc;
    t = j->tok;
    cap = j->cap;
  }
  t[top].size++;
  k = &t[n++];
  k->start = (int)(p + 1 - js);
  k->size = 0;
  k->next = n;
  is_key = true;

string:
  /* k is the new token, p at its opening quote. One place scans strings,
   * so that scan_string is inlined. */
  k->type = AIR__JSON_STR;
  if ((p = scan_string(p + 1, e)) == NULL) return AIR_EPARSE;
  k->end = (int)(p - js);
  p++;
  if (!is_key) goto after;
  if (p < e && IS(*p, W)) p = skip_ws(p + 1, e);
  if (p == e || *p != ':') return AIR_EPARSE;
  p++;
  goto value;
}

int air__json_parse(air__json *j, const char *js, size_t len) {
  j->js = js;
  j->len = len;
  j->tok = j->inline_tok;
  j->n = 0;
  j->cap = AIR__JSON_INLINE_TOKENS;
  if (len > AIR__MAX_JSON_BYTES) return AIR_ETOOBIG;
  int rc = tokenize(j);
  if (rc != 0) air__json_cleanup(j);
  return rc;
}

void air__json_cleanup(air__json *j) {
  if (j->tok != j->inline_tok) free(j->tok);
  j->tok = j->inline_tok;
  j->cap = AIR__JSON_INLINE_TOKENS;
  j->n = 0;
}

int air__json_at(const air__json *j, int arr, int idx) {
  if (!air__json_is_arr(j, arr) || idx < 0 || idx >= j->tok[arr].size)
    return -1;
  int k = arr + 1;
  for (int e = 0; e < idx; e++) k = j->tok[k].next;
  return k;
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
  if (i < 0 || i >= j->n || j->tok[i].type != AIR__JSON_NUM) return false;
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

long air__json_hex4(const char *p) {
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
  return air__json_unescape(j->js + j->tok[i].start,
                            (size_t)(j->tok[i].end - j->tok[i].start), out);
}

int air__json_unescape(const char *p, size_t n, air__buf *out) {
  const char *e = p + n;
  int rc = 0;
  while (p < e && rc == 0) {
    const char *bs = memchr(p, '\\', (size_t)(e - p));
    if (bs == NULL) return air__buf_add(out, p, (size_t)(e - p));
    rc = air__buf_add(out, p, (size_t)(bs - p));
    if (rc != 0 || bs + 1 >= e) break;
    char c = bs[1];
    p = bs + 2;
    switch (c) {
      case 'n':
        rc = air__buf_addc(out, '\n');
        break;
      case 't':
        rc = air__buf_addc(out, '\t');
        break;
      case 'r':
        rc = air__buf_addc(out, '\r');
        break;
      case 'b':
        rc = air__buf_addc(out, '\b');
        break;
      case 'f':
        rc = air__buf_addc(out, '\f');
        break;
      case 'u': {
        long cp = e - p >= 4 ? air__json_hex4(p) : -1;
        if (cp < 0) return AIR_EPARSE;
        p += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF && e - p >= 6 && p[0] == '\\' &&
            p[1] == 'u') {
          long lo = air__json_hex4(p + 2);
          if (lo >= 0xDC00 && lo <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            p += 6;
          }
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
        rc = add_utf8(out, (unsigned long)cp);
        break;
      }
      default: /* " \ / */
        rc = air__buf_addc(out, c);
    }
  }
  return rc;
}

const char *air__json_scan_str(const char *p, const char *e) {
  return scan_string(p, e);
}

const char *air__json_scan_leaf(const char *p, const char *e) {
  if (p == e) return NULL;
  switch (*p) {
    case '"':
      p = scan_string(p + 1, e);
      return p != NULL ? p + 1 : NULL;
    case '{':
    case '[': {
      char closer = *p == '{' ? '}' : ']';
      p = skip_ws(p + 1, e);
      return p < e && *p == closer ? p + 1 : NULL;
    }
    case 't':
      return e - p >= 4 && memcmp(p, "true", 4) == 0 ? p + 4 : NULL;
    case 'f':
      return e - p >= 5 && memcmp(p, "false", 5) == 0 ? p + 5 : NULL;
    case 'n':
      return e - p >= 4 && memcmp(p, "null", 4) == 0 ? p + 4 : NULL;
    default:
      return scan_number(p, e);
  }
}

/*
 * Validation only (no tokens, no allocation): the same grammar as tokenize,
 * with a stack of the open brackets (AIR__JSON_MAX_DEPTH bytes). Linear in
 * len, so a whole 64 MiB answer is judged without building anything.
 */
int air__json_validate(const char *js, size_t len) {
  char stack[AIR__JSON_MAX_DEPTH];
  int depth = 0;
  const char *p = js;
  const char *const e = js + len;
  if (len > AIR__MAX_JSON_BYTES) return AIR_ETOOBIG;

value:
  p = skip_ws(p, e);
  if (p == e) return AIR_EPARSE;
  switch (*p) {
    case '{':
    case '[':
      if (depth == AIR__JSON_MAX_DEPTH) return AIR_EPARSE;
      stack[depth++] = *p == '{' ? '}' : ']';
      p = skip_ws(p + 1, e);
      if (p == e) return AIR_EPARSE;
      if (*p == stack[depth - 1]) {
        p++;
        depth--;
        goto after;
      }
      if (stack[depth - 1] == '}') goto key;
      goto value;
    case '"':
      if ((p = scan_string(p + 1, e)) == NULL) return AIR_EPARSE;
      p++;
      break;
    case 't':
      if (e - p < 4 || memcmp(p, "true", 4) != 0) return AIR_EPARSE;
      p += 4;
      break;
    case 'f':
      if (e - p < 5 || memcmp(p, "false", 5) != 0) return AIR_EPARSE;
      p += 5;
      break;
    case 'n':
      if (e - p < 4 || memcmp(p, "null", 4) != 0) return AIR_EPARSE;
      p += 4;
      break;
    default:
      if ((p = scan_number(p, e)) == NULL) return AIR_EPARSE;
  }

after:
  p = skip_ws(p, e);
  if (depth == 0) return p == e ? 0 : AIR_EPARSE;
  if (p == e) return AIR_EPARSE;
  if (*p == ',') {
    p++;
    if (stack[depth - 1] == '}') goto key;
    goto value;
  }
  if (*p != stack[depth - 1]) return AIR_EPARSE;
  p++;
  depth--;
  goto after;

key:
  p = skip_ws(p, e);
  if (p == e || *p != '"') return AIR_EPARSE;
  if ((p = scan_string(p + 1, e)) == NULL) return AIR_EPARSE;
  p = skip_ws(p + 1, e);
  if (p == e || *p != ':') return AIR_EPARSE;
  p++;
  goto value;
}
