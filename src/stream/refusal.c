#include <stdlib.h>
#include <string.h>

#include "airetry.h"
#include "limits.h"
#include "refusal.h"

static bool is_space(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v';
}

/*
 * Normalizes s into out (appending). skip_ws drops leading white space.
 * Returns true when s ends inside a possible typographic-quote sequence
 * (E2 or E2 80 at the very end), whose meaning the next bytes decide.
 */
static bool normalize(const char *s, size_t n, bool skip_ws, air__buf *out) {
  size_t i = 0;
  if (skip_ws)
    while (i < n && is_space((unsigned char)s[i])) i++;
  for (; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == 0xE2 &&
        (i + 1 == n || (i + 2 == n && (unsigned char)s[i + 1] == 0x80)))
      return true;
    /* E2 80 98/99/9C/9D; an E2 followed by one byte that is not 80 at the
     * end is no quote (and nothing past s[n - 1] is read). */
    if (c == 0xE2 && i + 2 < n) {
      unsigned char c1 = (unsigned char)s[i + 1], c2 = (unsigned char)s[i + 2];
      if (c1 == 0x80 && (c2 == 0x98 || c2 == 0x99)) {
        air__buf_putc(out, '\'');
        i += 2;
        continue;
      }
      if (c1 == 0x80 && (c2 == 0x9C || c2 == 0x9D)) {
        air__buf_putc(out, '"');
        i += 2;
        continue;
      }
    }
    if (c >= 'A' && c <= 'Z') c = (unsigned char)(c - 'A' + 'a');
    air__buf_putc(out, (char)c);
  }
  return false;
}

int air__refusal_init(air__refusal *r, char *const *phrases, size_t n) {
  memset(r, 0, sizeof(*r));
  air__buf_init(&r->lead, 4 * AIR__MAX_PHRASE_BYTES + 64);
  air__buf_init(&r->norm, 4 * AIR__MAX_PHRASE_BYTES + 64);
  if (n == 0) {
    r->verdict = AIR__REFUSAL_CLEAR;
    return 0;
  }
  r->phrases = calloc(n, sizeof(char *));
  r->lens = calloc(n, sizeof(size_t));
  if (r->phrases == NULL || r->lens == NULL) {
    air__refusal_cleanup(r);
    return AIR_ENOMEM;
  }
  for (size_t i = 0; i < n; i++) {
    air__buf b;
    air__buf_init(&b, 4 * AIR__MAX_PHRASE_BYTES + 64);
    const char *p = phrases[i] ? phrases[i] : "";
    normalize(p, strlen(p), true, &b);
    size_t len = 0;
    r->phrases[i] = air__buf_take(&b, &len);
    if (r->phrases[i] == NULL) {
      r->phrases[i] = calloc(1, 1);
      if (r->phrases[i] == NULL) {
        r->n = i;
        air__refusal_cleanup(r);
        return AIR_ENOMEM;
      }
    }
    r->lens[i] = len;
    if (len > r->longest) r->longest = len;
  }
  r->n = n;
  size_t total = 0;
  for (size_t i = 0; i < n; i++) total += r->lens[i];
  r->fail = malloc((total ? total : 1) * sizeof(size_t));
  r->at = malloc(n * sizeof(size_t));
  if (r->fail == NULL || r->at == NULL) {
    air__refusal_cleanup(r);
    return AIR_ENOMEM;
  }
  for (size_t i = 0, off = 0; i < n; off += r->lens[i], i++) {
    /* fail[k]: the longest proper border of the phrase's first k + 1 bytes. */
    const char *ph = r->phrases[i];
    size_t *f = r->fail + off;
    r->at[i] = off;
    if (r->lens[i] > 0) f[0] = 0;
    for (size_t k = 1, b = 0; k < r->lens[i]; k++) {
      while (b > 0 && ph[k] != ph[b]) b = f[b - 1];
      if (ph[k] == ph[b]) b++;
      f[k] = b;
    }
  }
  r->verdict = AIR__REFUSAL_UNDECIDED;
  return 0;
}

void air__refusal_cleanup(air__refusal *r) {
  /* r->n counts the phrases stored, so phrases is non-NULL when n > 0 (init
   * calls this with n still 0 after a failed calloc).
   * NOLINTNEXTLINE(clang-analyzer-core.NullDereference) */
  for (size_t i = 0; i < r->n; i++) free(r->phrases[i]);
  free(r->phrases);
  free(r->lens);
  free(r->fail);
  free(r->at);
  air__buf_cleanup(&r->lead);
  air__buf_cleanup(&r->norm);
  memset(r, 0, sizeof(*r));
}

void air__refusal_reset(air__refusal *r) {
  air__buf_reset(&r->lead);
  air__buf_reset(&r->norm);
  r->verdict = r->n == 0 ? AIR__REFUSAL_CLEAR : AIR__REFUSAL_UNDECIDED;
}

air__refusal_verdict air__refusal_feed(air__refusal *r, const char *text,
                                       size_t n) {
  if (r->verdict != AIR__REFUSAL_UNDECIDED) return r->verdict;
  if (air__buf_add(&r->lead, text, n) != 0) {
    /* Far more leading text (white space) than any phrase: not a refusal. */
    r->verdict = AIR__REFUSAL_CLEAR;
    return r->verdict;
  }
  air__buf_reset(&r->norm);
  /* A quote sequence split at the end is left out of norm; a phrase that
   * still matches the rest keeps the verdict open until it completes. */
  (void)normalize(r->lead.p, r->lead.n, true, &r->norm);
  const char *t = r->norm.p ? r->norm.p : "";
  size_t tn = r->norm.n;
  bool possible = false;
  for (size_t i = 0; i < r->n; i++) {
    size_t pl = r->lens[i];
    if (pl == 0) continue;
    if (tn >= pl) {
      if (memcmp(t, r->phrases[i], pl) == 0) {
        r->verdict = AIR__REFUSAL_MATCH;
        r->matched = i;
        return r->verdict;
      }
    } else if (memcmp(t, r->phrases[i], tn) == 0) {
      possible = true;
    }
  }
  if (!possible) r->verdict = AIR__REFUSAL_CLEAR;
  return r->verdict;
}

/* The normalized byte at text[*i] (as normalize), advancing *i past it. */
static unsigned char next_norm(const char *s, size_t n, size_t *i) {
  unsigned char c = (unsigned char)s[*i];
  if (c == 0xE2 && *i + 2 < n && (unsigned char)s[*i + 1] == 0x80) {
    unsigned char c2 = (unsigned char)s[*i + 2];
    if (c2 == 0x98 || c2 == 0x99 || c2 == 0x9C || c2 == 0x9D) {
      *i += 3;
      return c2 == 0x98 || c2 == 0x99 ? '\'' : '"';
    }
  }
  (*i)++;
  return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c;
}

bool air__refusal_anywhere(const air__refusal *r, const char *text, size_t n) {
  if (r->n == 0 || n == 0) return false;
  size_t state[AIR__MAX_PHRASES]; /* bytes of each phrase matched so far */
  size_t np = r->n < AIR__MAX_PHRASES ? r->n : AIR__MAX_PHRASES;
  memset(state, 0, np * sizeof(state[0]));
  for (size_t i = 0; i < n;) {
    char c = (char)next_norm(text, n, &i);
    for (size_t k = 0; k < np; k++) {
      size_t pl = r->lens[k];
      if (pl == 0) continue;
      const char *ph = r->phrases[k];
      const size_t *f = r->fail + r->at[k];
      size_t b = state[k];
      while (b > 0 && c != ph[b]) b = f[b - 1];
      if (c == ph[b]) b++;
      if (b == pl) return true;
      state[k] = b;
    }
  }
  return false;
}
