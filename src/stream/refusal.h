/*
 * Refusal detection over the leading text of a stream (docs/design.md §3.2).
 * Pure.
 *
 * Phrases are case-insensitive prefixes. The text is matched after skipping
 * leading white space, with ASCII letters folded to lower case and the
 * typographic quotes U+2018/U+2019 (as ') and U+201C/U+201D (as ") folded to
 * ASCII. The detector answers after each piece of text: still undecided,
 * refusal, or clear (diverged from every phrase, or longer than the longest).
 */
#ifndef AIR__REFUSAL_H
#define AIR__REFUSAL_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

typedef enum air__refusal_verdict {
  AIR__REFUSAL_UNDECIDED,
  AIR__REFUSAL_MATCH,
  AIR__REFUSAL_CLEAR,
} air__refusal_verdict;

typedef struct air__refusal {
  char **phrases; /* normalized copies (owned) */
  size_t *lens;
  size_t *fail; /* KMP failure links, phrase i's at fail + at[i] (owned) */
  size_t *at;
  size_t n;
  size_t longest; /* in normalized bytes */
  air__buf lead;  /* leading raw text seen so far (bounded) */
  air__buf norm;  /* its normalized form */
  air__refusal_verdict verdict;
  size_t matched; /* index of the matching phrase */
} air__refusal;

/* Copies and normalizes phrases. Returns 0 or AIR_ENOMEM. */
int air__refusal_init(air__refusal *r, char *const *phrases, size_t n);
void air__refusal_cleanup(air__refusal *r);
/* Forgets the text (a new attempt); keeps the phrases. */
void air__refusal_reset(air__refusal *r);
/* Adds leading text; returns the verdict (final once not UNDECIDED). With
 * no phrases the verdict is CLEAR at once. */
air__refusal_verdict air__refusal_feed(air__refusal *r, const char *text,
                                       size_t n);
/* True when some phrase occurs anywhere in text (complete mode). One pass
 * over text, normalizing as it goes (no copy), advancing a KMP matcher per
 * phrase: O(len(text) x phrases), no allocation. */
bool air__refusal_anywhere(const air__refusal *r, const char *text, size_t n);

#endif
