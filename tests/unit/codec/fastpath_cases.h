/*
 * The cut-and-replace sweep the three fast-path tests share
 * (test_fastpath_{openai,anthropic,responses}.c; include after cmocka.h and
 * fastpath_diff.h): every event of the taken and the declined lists cut at
 * every length and with each byte replaced by a structural byte, in a fresh
 * and in a started decoder; `feed` hands one event to both paths and
 * asserts that they agree.
 */
#ifndef AIR__FASTPATH_CASES_H
#define AIR__FASTPATH_CASES_H

typedef void (*fp_setup_fn)(fp_pair *x);
typedef void (*fp_feed_fn)(fp_pair *x, const char *data, size_t n);

static inline void fp_cuts_and_replacements(
    const char *const *taken, size_t n_taken, const char *const *declined,
    size_t n_declined, fp_setup_fn fresh, fp_setup_fn started,
    fp_feed_fn feed) {
  static const char subst[] = "\"\\{}[],: 0n\x01";
  const char *const *lists[2] = {taken, declined};
  size_t lens[2] = {n_taken, n_declined};
  char buf[1024];
  for (int l = 0; l < 2; l++) {
    for (size_t i = 0; i < lens[l]; i++) {
      const char *ev = lists[l][i];
      size_t n = strlen(ev);
      assert_true(n < sizeof(buf));
      for (int f = 0; f < 2; f++) {
        fp_pair x;
        if (f)
          fresh(&x);
        else
          started(&x);
        for (size_t cut = 0; cut <= n; cut++) {
          memcpy(buf, ev, cut); /* a copy: nothing past cut is readable */
          feed(&x, buf, cut);
        }
        for (size_t at = 0; at < n; at++) {
          for (size_t s = 0; s < sizeof(subst) - 1; s++) {
            memcpy(buf, ev, n);
            buf[at] = subst[s];
            feed(&x, buf, n);
          }
        }
        fp_cleanup(&x);
      }
    }
  }
}

#endif
