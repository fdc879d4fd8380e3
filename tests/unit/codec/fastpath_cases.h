/*
 * What the three fast-path tests share (test_fastpath_{openai,anthropic,
 * responses}.c; include after cmocka.h and fastpath_diff.h): one event
 * checked through both paths, a list of events all declined, the
 * cut-and-replace sweep (every event of the
 * taken and the declined lists cut at every length and with each byte
 * replaced by a structural byte, in a fresh and in a started decoder), and
 * a 1 MiB text taken whole.
 */
#ifndef AIR__FASTPATH_CASES_H
#define AIR__FASTPATH_CASES_H

typedef void (*fp_setup_fn)(fp_pair *x);

/* One event of SSE type type (NULL: "message") through both decoders:
 * they must agree; want_took 1 / 0: the fast path must / must not take
 * it, -1: either. */
static inline void fp_check(fp_pair *x, const char *type, const char *data,
                            size_t n, size_t stop_at, int want_took) {
  bool took;
  if (!fp_event(x, type, data, n, stop_at, &took))
    fail_msg("%s\n  event: %.*s", x->why, (int)(n > 300 ? 300 : n), data);
  if (want_took >= 0 && took != (want_took == 1))
    fail_msg("fast path %s the event: %.*s", took ? "took" : "declined",
             (int)(n > 300 ? 300 : n), data);
}

/* Every event of list, from a started decoder, left by the fast path to
 * the full decoder, which gives the same. */
static inline void fp_all_declined(const char *const *list, size_t n,
                                   fp_setup_fn started, const char *type) {
  for (size_t i = 0; i < n; i++) {
    fp_pair x;
    started(&x);
    fp_check(&x, type, list[i], strlen(list[i]), 0, 0);
    fp_cleanup(&x);
  }
}

static inline void fp_cuts_and_replacements(
    const char *const *taken, size_t n_taken, const char *const *declined,
    size_t n_declined, fp_setup_fn fresh, fp_setup_fn started,
    const char *type) {
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
          fp_check(&x, type, buf, cut, 0, -1);
        }
        for (size_t at = 0; at < n; at++) {
          for (size_t s = 0; s < sizeof(subst) - 1; s++) {
            memcpy(buf, ev, n);
            buf[at] = subst[s];
            fp_check(&x, type, buf, n, 0, -1);
          }
        }
        fp_cleanup(&x);
      }
    }
  }
}

/* An event of head, a text of 1 MiB and tail, plain and with esc written
 * every 64 bytes, through both paths from a started decoder: taken, the
 * same parts. */
static inline void fp_huge_text(fp_setup_fn started, const char *type,
                                const char *head, const char *esc,
                                const char *tail) {
  size_t big = 1u << 20, hn = strlen(head), en = strlen(esc), tn = strlen(tail);
  char *ev = malloc(hn + big + tn);
  assert_non_null(ev);
  for (int escaped = 0; escaped < 2; escaped++) {
    memcpy(ev, head, hn);
    size_t n = hn;
    for (size_t k = 0; k < big; k++) {
      if (escaped && k % 64 == 0 && k + en < big) {
        memcpy(ev + n, esc, en);
        n += en;
        k += en - 1;
      } else {
        ev[n++] = (char)('a' + k % 26);
      }
    }
    memcpy(ev + n, tail, tn);
    n += tn;
    fp_pair x;
    started(&x);
    fp_check(&x, type, ev, n, 0, 1);
    fp_cleanup(&x);
  }
  free(ev);
}

#endif
