/*
 * The seam of a continued stream (docs/design.md §3.5). Pure, sans-I/O.
 *
 * After a stream dies past its first token, the exchange asks another
 * attempt for the rest of the answer; the seam compares the continuation's
 * text, as it streams, with the text already sent to the caller ("sent")
 * and decides where the new text begins:
 *
 *   restart        the continuation starts by repeating all of sent: the
 *                  repeat is dropped (any length of sent);
 *   tail overlap   it starts by repeating a tail of sent of at least
 *                  AIR__SEAM_MIN_OVERLAP whitespace-normalised characters:
 *                  that overlap is dropped (the longest such tail wins);
 *   diverging      it starts by repeating the beginning of sent for at least
 *   restart        AIR__SEAM_RESTART_MIN characters and then differs before
 *                  sent's end: FAILED (never stitched in);
 *   preamble       (instruct only) it starts with an announcement such as
 *                  "Sure, continuing:" or "Here is the rest": FAILED;
 *   otherwise      nothing is dropped.
 *
 * Comparison is on whitespace-normalised text: every run of white space
 * (space, tab, CR, LF, FF, VT) is one space, sent's leading white space and
 * the continuation's leading white space are skipped; bytes are compared
 * exactly (case and non-ASCII included), and characters are counted as
 * UTF-8 sequences (continuation bytes 0x80-0xBF do not count), so a tail
 * never starts inside a multi-byte character.
 *
 * Back to bytes: the part of the continuation dropped is its leading white
 * space plus every byte up to the end of the last character of the
 * overlap; when that last character is a (collapsed) white space run, the
 * whole run is dropped, also the part of it that arrives in later feeds
 * (sent already ended with white space); sent's trailing white space
 * need not be repeated (a continuation "castle.X" after "castle. " drops
 * "castle." and passes "X"). Nothing else is ever changed: the
 * bytes passed on are exactly the continuation's bytes after that point.
 * When nothing is dropped the continuation passes whole, leading white
 * space included, unless sent ended with white space: then the
 * continuation's leading white space is dropped (the caller already has a
 * separator there; an Anthropic prefill is sent without it, as the API
 * refuses trailing white space, and the model then starts with one).
 *
 * Holding: the seam holds the continuation's bytes (HOLD) while some tail
 * of sent could still match, i.e. at most as many normalised characters
 * as sent has, and only tails of up to AIR__SEAM_MAX_TAIL normalised bytes
 * (and the whole of sent, the restart) are tracked, so the work per byte is
 * bounded by AIR__SEAM_MAX_TAIL. The raw bytes held are bounded by sent's
 * length plus AIR__SEAM_HOLD_SLACK (a long run of white space): past that
 * the seam decides as at the end. With instruct the preamble check holds
 * too, at most AIR__SEAM_PREAMBLE_MAX bytes.
 */
#ifndef AIR__SEAM_H
#define AIR__SEAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* The shortest tail overlap dropped (whitespace-normalised characters). */
#define AIR__SEAM_MIN_OVERLAP 32
/* A continuation that agrees with the beginning of sent for this many
 * normalised characters and then differs before sent's end is a diverging
 * restart (FAILED). Below it the agreement is taken as chance. */
#define AIR__SEAM_RESTART_MIN 16
/* The longest tail (normalised bytes) tracked besides the whole of sent. */
#define AIR__SEAM_MAX_TAIL 4096
/* Raw bytes held past sent's length before the seam decides anyway. */
#define AIR__SEAM_HOLD_SLACK 4096
/* The most normalised bytes the preamble check looks at. */
#define AIR__SEAM_PREAMBLE_MAX 64

typedef enum air__seam_state {
  AIR__SEAM_HOLD,
  AIR__SEAM_OPEN,
  AIR__SEAM_FAILED
} air__seam_state;

/* Caller-owned (air__seam_init / air__seam_cleanup). Read only state and
 * message; the rest is private to seam.c. */
typedef struct air__seam {
  air__seam_state state;
  const char *message; /* FAILED: why (a static string) */
  /* sent, normalised (owned), and the character count of each suffix is
   * found from it when needed. */
  char *norm;
  size_t norm_n;
  size_t min_start; /* tail starts tracked besides 0: min_start..max_start */
  size_t max_start; /* (min_start > max_start: none) */
  /* pending candidates: starts t in norm whose text so far equals the
   * continuation's normalised text (owned array) */
  size_t *cand;
  size_t n_cand;
  size_t matched;        /* normalised bytes of the continuation so far */
  bool cand_ready;       /* candidates were filled (at the first character) */
  bool lead;             /* still in the continuation's leading white space */
  bool in_ws;            /* the last byte was white space */
  bool restart_alive;    /* candidate 0 still matches */
  bool restart_diverged; /* candidate 0 died after RESTART_MIN characters */
  size_t restart_chars;  /* characters candidate 0 matched */
  size_t best;           /* held bytes to drop (SIZE_MAX: no overlap) */
  bool best_ws;          /* the overlap ended on a white space run */
  bool instruct;
  int preamble;                         /* 0 undecided, 1 none, 2 a preamble */
  char pre[AIR__SEAM_PREAMBLE_MAX + 1]; /* lower-cased normalised lead */
  bool pre_ws;
  size_t pre_n;
  size_t sent_n;  /* raw length of sent */
  air__buf held;  /* the continuation's bytes held while HOLD */
  size_t scanned; /* bytes of held already compared */
  bool skip_ws;   /* OPEN: drop white space until another byte */
} air__seam;

/*
 * sent: the text released so far (copied, normalised); instruct: the
 * continuation was asked with INSTRUCT (then a preamble fails it). Returns
 * 0 or AIR_ENOMEM. With an empty (or all white space) sent the seam is
 * OPEN at once.
 */
int air__seam_init(air__seam *s, const char *sent, size_t n, bool instruct);
void air__seam_cleanup(air__seam *s);

/*
 * Feeds the continuation's next text; appends to out the text the caller
 * may get now (after the repeated part is dropped). Returns the state:
 * HOLD (still deciding; nothing appended), OPEN (decided; this and all
 * later text is appended), FAILED (diverging restart or preamble;
 * s->message says which, static string). After FAILED nothing more is
 * appended. An append that fails (out over its maximum) is FAILED too
 * (message "the continuation is over the answer limit").
 */
air__seam_state air__seam_feed(air__seam *s, const char *t, size_t n,
                               air__buf *out);

/* The continuation's text ended (or a non-text part came) while HOLD:
 * decides with what it has (a tail not complete is no overlap, a preamble
 * not complete is none) and appends what is released. Returns the state
 * (unchanged when not HOLD). */
air__seam_state air__seam_end(air__seam *s, air__buf *out);

#endif
