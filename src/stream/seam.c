/*
 * The seam of a continued stream: see seam.h for the rules and how the
 * whitespace normalisation maps back to bytes.
 *
 * How: sent is normalised once. At the continuation's first normalised
 * character, the candidate tails are every start t (0, and the starts of
 * tails of AIR__SEAM_MIN_OVERLAP.. characters within the last
 * AIR__SEAM_MAX_TAIL normalised bytes) whose character equals it; each
 * later character keeps the candidates whose next byte equals it. A
 * candidate whose tail is all matched is complete: the latest to complete
 * is the longest (smallest t) and wins. The seam decides when no candidate
 * is pending.
 *
 * The preamble list (instruct only; matched case-insensitively on the
 * normalised text, typographic quotes as ASCII and en / em dashes as
 * "-", after leading markdown
 * marks * _ # >):
 *   - an announcement: "continuing:", "continuing from", "continuing
 *     where", "continuing the text/response/answer/reply/previous",
 *     "continuing exactly", "continuing...", "continued:", "(continued",
 *     "[continued", "here is / here's the rest / continuation / remainder /
 *     remaining / completion", "picking up where/from", "resuming
 *     from/where", "let me continue", "let's continue", "I'll / I will
 *     continue", "I'll / I will pick up", "I'll resume";
 *   - an acknowledgement ("sure", "certainly", "of course", "absolutely",
 *     "no problem", "got it", "understood", "gladly") followed by ! , . : ;
 *   - any acknowledgement (those, and "okay", "ok", "yes", "alright", "all
 *     right") followed by spaces or punctuation and then an announcement or
 *     "continuing", "here is", "here's", "here it is", "here you go",
 *     "here goes".
 * A phrase ending in a letter must be followed by a non-letter (or the
 * end of the text). The list is deliberately narrow: a continuation that
 * begins mid-sentence with "OK" or "Yes" is legitimate text.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "airetry.h"
#include "seam.h"

static bool is_ws(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v';
}

static bool is_cont(unsigned char c) {
  return (c & 0xC0) == 0x80;
}

static bool is_alnum(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9');
}

int air__seam_init(air__seam *s, const char *sent, size_t n, bool instruct) {
  memset(s, 0, sizeof(*s));
  s->best = SIZE_MAX;
  s->lead = true;
  s->instruct = instruct;
  s->sent_n = n;
  s->restart_alive = true;
  air__buf_init(&s->held, SIZE_MAX / 2);
  s->norm = malloc(n + 1);
  if (s->norm == NULL) return AIR_ENOMEM;
  size_t k = 0;
  bool ws = true; /* drops sent's leading white space */
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)sent[i];
    if (is_ws(c)) {
      if (!ws) s->norm[k++] = ' ';
      ws = true;
      continue;
    }
    ws = false;
    s->norm[k++] = (char)c;
  }
  s->norm[k] = '\0';
  s->norm_n = k;
  /* Tail starts: at a character (not a continuation byte, not the space a
   * continuation's skipped leading white space could never match), with at
   * least AIR__SEAM_MIN_OVERLAP characters from there to the end. */
  size_t chars = 0, hi = 0;
  bool any = false;
  for (size_t t = k; t-- > 1;) {
    if (!is_cont((unsigned char)s->norm[t])) chars++;
    if (chars >= AIR__SEAM_MIN_OVERLAP) {
      hi = t;
      any = true;
      break;
    }
  }
  s->min_start = k > AIR__SEAM_MAX_TAIL ? k - AIR__SEAM_MAX_TAIL : 1;
  s->max_start = any ? hi : 0;
  if (!any || s->max_start < s->min_start) {
    s->min_start = 1;
    s->max_start = 0;
  }
  if (k == 0) {
    s->cand_ready = true;
    s->restart_alive = false;
    if (!instruct) s->state = AIR__SEAM_OPEN;
  }
  return 0;
}

void air__seam_cleanup(air__seam *s) {
  free(s->norm);
  free(s->cand);
  air__buf_cleanup(&s->held);
  s->norm = NULL;
  s->cand = NULL;
  s->n_cand = 0;
}

/* ---- the preamble check
 * ------------------------------------------------------------ */

enum { PRE_NO, PRE_MAYBE, PRE_MATCH };

static const char *const announce[] = {
    "continuing:",
    "continuing from",
    "continuing where",
    "continuing on from",
    "continuing the text",
    "continuing the response",
    "continuing the answer",
    "continuing the reply",
    "continuing the previous",
    "continuing exactly",
    "continuing...",
    "continued:",
    "continued from",
    "(continued",
    "[continued",
    "(continuing",
    "[continuing",
    "here is the rest",
    "here's the rest",
    "here is the continuation",
    "here's the continuation",
    "here is the remainder",
    "here's the remainder",
    "here is the remaining",
    "here's the remaining",
    "here is the completion",
    "here's the completion",
    "picking up where",
    "picking up from",
    "resuming from",
    "resuming where",
    "let me continue",
    "let's continue",
    "i'll continue",
    "i will continue",
    "i'll pick up",
    "i will pick up",
    "i'll resume",
};

/* After an acknowledgement, these announce too. */
static const char *const announce_after_ack[] = {
    "continuing", "here is", "here's", "here it is", "here you go", "here goes",
};

/* Acknowledgements that are a preamble by themselves before ! , . : ; */
static const char *const ack_strong[] = {
    "sure",       "certainly", "of course",  "absolutely",
    "no problem", "got it",    "understood", "gladly",
};
static const char *const ack_weak[] = {"okay", "ok", "yes", "alright",
                                       "all right"};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* t (n bytes) against phrase p: MATCH when t starts with p and (p ends in a
 * non-letter, or the byte after it in t is no letter, or t ends there at
 * the end of the text); MAYBE when t is a proper prefix of p, or equals p
 * and more text may come; else NO. *len: p's length. */
static int phrase(const char *t, size_t n, const char *p, bool at_end,
                  size_t *len) {
  size_t pn = strlen(p);
  *len = pn;
  size_t m = n < pn ? n : pn;
  if (memcmp(t, p, m) != 0) return PRE_NO;
  if (n < pn) return at_end ? PRE_NO : PRE_MAYBE;
  if (!is_alnum((unsigned char)p[pn - 1])) return PRE_MATCH;
  if (n == pn) return at_end ? PRE_MATCH : PRE_MAYBE;
  return is_alnum((unsigned char)t[pn]) ? PRE_NO : PRE_MATCH;
}

/* c is one of set's bytes (never NUL). */
static bool in_set(char c, const char *set) {
  return c != '\0' && strchr(set, c) != NULL;
}

static int best_of(int a, int b) {
  return a > b ? a : b;
}

static int any_phrase(const char *t, size_t n, const char *const *list,
                      size_t count, bool at_end) {
  int r = PRE_NO;
  size_t len;
  for (size_t i = 0; i < count && r != PRE_MATCH; i++)
    r = best_of(r, phrase(t, n, list[i], at_end, &len));
  return r;
}

/* An acknowledgement followed by what makes it a preamble. */
static int ack(const char *t, size_t n, const char *p, bool strong,
               bool at_end) {
  size_t pn;
  int r = phrase(t, n, p, at_end, &pn);
  if (r != PRE_MATCH) return r;
  if (n == pn) return at_end ? PRE_NO : PRE_MAYBE;
  size_t i = pn;
  if (strong && in_set(t[i], "!,.:;")) return PRE_MATCH;
  while (i < n && in_set(t[i], " !,.:;-")) i++;
  if (i == pn) return PRE_NO;
  if (i == n) return at_end ? PRE_NO : PRE_MAYBE;
  return best_of(any_phrase(t + i, n - i, announce, COUNT(announce), at_end),
                 any_phrase(t + i, n - i, announce_after_ack,
                            COUNT(announce_after_ack), at_end));
}

static int preamble(const char *t, size_t n, bool at_end) {
  int r = any_phrase(t, n, announce, COUNT(announce), at_end);
  for (size_t i = 0; i < COUNT(ack_strong) && r != PRE_MATCH; i++)
    r = best_of(r, ack(t, n, ack_strong[i], true, at_end));
  for (size_t i = 0; i < COUNT(ack_weak) && r != PRE_MATCH; i++)
    r = best_of(r, ack(t, n, ack_weak[i], false, at_end));
  return r;
}

/* Whether pre ends inside a UTF-8 sequence (the next bytes decide it). */
static bool pre_partial(const air__seam *s) {
  size_t i = s->pre_n, back = 0;
  while (i > 0 && back < 3 && is_cont((unsigned char)s->pre[i - 1])) {
    i--;
    back++;
  }
  if (i == 0) return false;
  unsigned char lead = (unsigned char)s->pre[i - 1];
  size_t need = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
  return back < need;
}

/* One normalised character byte c of the continuation into the preamble
 * check. */
static void pre_add(air__seam *s, unsigned char c) {
  if (s->pre_n == 0 &&
      (c == '*' || c == '_' || c == '#' || c == '>' || c == ' '))
    return;
  if (c >= 'A' && c <= 'Z') c = (unsigned char)(c - 'A' + 'a');
  if (s->pre_n >= AIR__SEAM_PREAMBLE_MAX) {
    s->preamble = 1;
    return;
  }
  s->pre[s->pre_n++] = (char)c;
  if (s->pre_n >= 3 && (unsigned char)s->pre[s->pre_n - 3] == 0xE2 &&
      (unsigned char)s->pre[s->pre_n - 2] == 0x80) {
    if (c == 0x98 || c == 0x99 || c == 0x9C || c == 0x9D || c == 0x93 ||
        c == 0x94) {
      s->pre_n -= 3;
      s->pre[s->pre_n++] = c == 0x98 || c == 0x99   ? '\''
                           : c == 0x93 || c == 0x94 ? '-'
                                                    : '"';
    }
  }
  s->pre[s->pre_n] = '\0';
  if (pre_partial(s)) return;
  int r = preamble(s->pre, s->pre_n, false);
  if (r == PRE_MATCH)
    s->preamble = 2;
  else if (r == PRE_NO)
    s->preamble = 1;
  else if (s->pre_n >= AIR__SEAM_PREAMBLE_MAX)
    s->preamble = 1;
}

/* ---- the overlap
 * ------------------------------------------------------------------- */

/* Fills the candidates for the continuation's first character c. */
static int cand_fill(air__seam *s, unsigned char c) {
  size_t cap = 1;
  if (s->max_start >= s->min_start) cap += s->max_start - s->min_start + 1;
  s->cand = malloc(cap * sizeof(size_t));
  if (s->cand == NULL) return AIR_ENOMEM;
  s->n_cand = 0;
  if ((unsigned char)s->norm[0] == c)
    s->cand[s->n_cand++] = 0;
  else
    s->restart_alive = false;
  for (size_t t = s->min_start; t <= s->max_start && s->max_start != 0; t++)
    if ((unsigned char)s->norm[t] == c && !is_cont(c)) s->cand[s->n_cand++] = t;
  s->cand_ready = true;
  return 0;
}

/* One normalised byte c of the continuation, ending at held offset end
 * (the byte after it), against the pending candidates. */
static void cand_step(air__seam *s, unsigned char c, size_t end) {
  size_t m = s->matched, keep = 0;
  for (size_t i = 0; i < s->n_cand; i++) {
    size_t t = s->cand[i];
    if ((unsigned char)s->norm[t + m] != c) {
      if (t == 0) {
        s->restart_alive = false;
        if (s->restart_chars >= AIR__SEAM_RESTART_MIN)
          s->restart_diverged = true;
      }
      continue;
    }
    if (t + m + 1 == s->norm_n) { /* complete: the longest so far */
      s->best = end;
      s->best_ws = c == ' ';
      if (t == 0) s->restart_alive = false;
      continue;
    }
    /* All but sent's trailing white space: complete too (the text may go
     * on without white space); matching that space as well wins. */
    if (t + m + 2 == s->norm_n && s->norm[s->norm_n - 1] == ' ') {
      s->best = end;
      s->best_ws = false;
    }
    s->cand[keep++] = t;
  }
  s->n_cand = keep;
  if (s->restart_alive && !is_cont(c)) s->restart_chars++;
  s->matched++;
}

/* Appends p (n bytes) as released text, dropping white space first while
 * skip_ws. */
static air__seam_state release(air__seam *s, const char *p, size_t n,
                               air__buf *out) {
  size_t i = 0;
  if (s->skip_ws) {
    while (i < n && is_ws((unsigned char)p[i])) i++;
    if (i < n) s->skip_ws = false;
  }
  if (i < n && air__buf_add(out, p + i, n - i) != 0) {
    s->state = AIR__SEAM_FAILED;
    s->message = "the continuation is over the answer limit";
  }
  return s->state;
}

/* Decides (the candidates are settled or given up) and releases. */
static air__seam_state decide(air__seam *s, air__buf *out) {
  if (s->instruct && s->preamble == 2) {
    s->state = AIR__SEAM_FAILED;
    s->message = "the continuation began with a preamble";
    return s->state;
  }
  size_t drop = 0;
  if (s->best != SIZE_MAX) {
    drop = s->best;
    s->skip_ws = s->best_ws;
  } else if (s->restart_diverged) {
    s->state = AIR__SEAM_FAILED;
    s->message =
        "the continuation restarted the answer and then differed from it";
    return s->state;
  } else if (s->norm_n > 0 && s->norm[s->norm_n - 1] == ' ') {
    /* sent ended with white space (which a prefill may have trimmed):
     * the continuation's leading white space would double it. */
    s->skip_ws = true;
  }
  s->state = AIR__SEAM_OPEN;
  free(s->cand);
  s->cand = NULL;
  s->n_cand = 0;
  if (s->held.n > drop) release(s, s->held.p + drop, s->held.n - drop, out);
  air__buf_cleanup(&s->held);
  return s->state;
}

static bool settled(const air__seam *s) {
  bool seam = s->cand_ready && s->n_cand == 0;
  bool pre = !s->instruct || s->preamble != 0;
  return seam && pre;
}

air__seam_state air__seam_feed(air__seam *s, const char *t, size_t n,
                               air__buf *out) {
  if (s->state == AIR__SEAM_OPEN) return release(s, t, n, out);
  if (s->state != AIR__SEAM_HOLD || n == 0) return s->state;
  if (air__buf_add(&s->held, t, n) != 0) {
    s->state = AIR__SEAM_FAILED;
    s->message = "the continuation is over the answer limit";
    return s->state;
  }
  size_t limit = s->sent_n + AIR__SEAM_HOLD_SLACK;
  while (s->scanned < s->held.n) {
    if (s->scanned >= limit) return air__seam_end(s, out);
    unsigned char c = (unsigned char)s->held.p[s->scanned++];
    if (is_ws(c)) {
      if (s->lead || s->in_ws) continue;
      s->in_ws = true;
      c = ' ';
    } else {
      s->lead = false;
      s->in_ws = false;
    }
    if (s->instruct && s->preamble == 0) pre_add(s, c);
    if (s->instruct && s->preamble == 2) return decide(s, out);
    if (!s->cand_ready && cand_fill(s, c) != 0) {
      s->state = AIR__SEAM_FAILED;
      s->message = "out of memory";
      return s->state;
    }
    if (s->n_cand > 0) cand_step(s, c, s->scanned);
    if (settled(s)) return decide(s, out);
  }
  return s->state;
}

air__seam_state air__seam_end(air__seam *s, air__buf *out) {
  if (s->state != AIR__SEAM_HOLD) return s->state;
  if (s->instruct && s->preamble == 0 && !pre_partial(s))
    s->preamble = preamble(s->pre, s->pre_n, true) == PRE_MATCH ? 2 : 1;
  /* A restart still matching sent's beginning when the text ends has
   * diverged before sent's end. */
  if (s->restart_alive && s->n_cand > 0 &&
      s->restart_chars >= AIR__SEAM_RESTART_MIN)
    s->restart_diverged = true;
  return decide(s, out);
}
