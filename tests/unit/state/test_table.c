/* The records both state backends keep (src/state/table.c): lookup by
 * (kind, key), the cap, a walk that sees every record once, probe lease
 * tokens and a route's sticky window. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "table.h"

typedef struct rec {
  air__table_node node;
  unsigned seen;
  air__breaker_rec br;
} rec;

static air__table *table_new(void) {
  air__table *t = calloc(1, sizeof(*t));
  assert_non_null(t);
  return t;
}

static rec *get(air__table *t, char kind, const char *key, bool create) {
  return air__table_get(t, kind, key, strlen(key), create, sizeof(rec));
}

static void get_finds_by_kind_and_key(void **unused) {
  (void)unused;
  air__table *t = table_new();
  assert_null(get(t, 'b', "p/m", false));
  assert_int_equal(t->count, 0);
  rec *b = get(t, 'b', "p/m", true);
  rec *s = get(t, 's', "p/m", true);
  assert_non_null(b);
  assert_non_null(s);
  assert_ptr_not_equal(b, s); /* the kind is part of the key */
  assert_ptr_equal(get(t, 'b', "p/m", false), b);
  assert_ptr_equal(get(t, 'b', "p/m", true), b);
  assert_null(get(t, 'b', "p/m2", false));
  assert_null(get(t, 'b', "p/", false)); /* a prefix is another key */
  assert_string_equal(b->node.key, "p/m");
  assert_int_equal(b->node.len, 3);
  assert_int_equal(b->node.kind, 'b');
  assert_int_equal(b->seen, 0); /* made zeroed */
  assert_int_equal(t->count, 2);
  air__table_cleanup(t);
  assert_int_equal(t->count, 0);
  assert_null(get(t, 'b', "p/m", false));
  free(t);
}

static void next_walks_every_record_once(void **unused) {
  (void)unused;
  air__table *t = table_new();
  assert_null(air__table_next(t, NULL));
  /* More records than buckets: chains of several. */
  enum { N = 3 * AIR__STATE_BUCKETS + 7 };
  char key[32];
  for (int i = 0; i < N; i++) {
    snprintf(key, sizeof key, "t%d", i);
    assert_non_null(get(t, 'b', key, true));
  }
  size_t walked = 0;
  for (rec *r = air__table_next(t, NULL); r != NULL;
       r = air__table_next(t, r)) {
    r->seen++;
    walked++;
  }
  assert_int_equal(walked, N);
  for (int i = 0; i < N; i++) {
    snprintf(key, sizeof key, "t%d", i);
    assert_int_equal(get(t, 'b', key, false)->seen, 1);
  }
  air__table_cleanup(t);
  free(t);
}

static void get_stops_at_the_cap(void **unused) {
  /* The cap counts records that are not pinned. */
  (void)unused;
  air__table *t = table_new();
  char key[32];
  for (int i = 0; i < AIR__MAX_STATE_TARGETS; i++) {
    snprintf(key, sizeof key, "t%d", i);
    assert_non_null(get(t, 'b', key, true));
  }
  assert_null(get(t, 'b', "one-more", true));
  assert_int_equal(t->count, AIR__MAX_STATE_TARGETS);
  assert_non_null(get(t, 'b', "t0", true)); /* the ones there are still found */
  air__table_cleanup(t);
  free(t);
}

static bool keep_seen(const air__table_node *n, uint64_t now_ms, void *data) {
  (void)now_ms;
  (void)data;
  return ((const rec *)n)->seen == 0;
}

static void at_evicts_idle_loose_records_a_few_per_op(void **unused) {
  (void)unused;
  air__table *t = table_new();
  t->idle_fn = keep_seen;
  air__table_at(t, 1000);
  rec *a = get(t, 'b', "a", true);
  rec *b = get(t, 'b', "b", true);
  rec *c = get(t, 'b', "c", true);
  rec *p = air__table_get_pinned(t, 'b', "p", 1, sizeof(rec));
  assert_non_null(p);
  assert_true(p->node.pinned);
  assert_int_equal(t->loose, 3);
  b->seen = 1; /* the idle rule keeps b */
  /* Not idle long enough: nothing goes. */
  air__table_at(t, 1000 + AIR__STATE_IDLE_MS - 1);
  assert_int_equal(t->count, 4);
  /* a is used again: c and b are the oldest now. */
  assert_ptr_equal(get(t, 'b', "a", false), a);
  (void)c;
  air__table_at(t, 1000 + AIR__STATE_IDLE_MS);
  /* Two looked at: b kept (and counted as used), c freed; a is younger. */
  assert_int_equal(t->evicted, 1);
  assert_null(get(t, 'b', "c", false));
  assert_non_null(get(t, 'b', "b", false));
  air__table_at(t, 1000 + 2 * AIR__STATE_IDLE_MS);
  air__table_at(t, 1000 + 2 * AIR__STATE_IDLE_MS);
  assert_null(get(t, 'b', "a", false));
  assert_non_null(get(t, 'b', "b", false));
  /* A pinned record is never looked at, and made past the cap. */
  air__table_at(t, 1000 + 100 * AIR__STATE_IDLE_MS);
  assert_ptr_equal(get(t, 'b', "p", false), p);
  t->loose = AIR__MAX_STATE_TARGETS;
  assert_null(get(t, 'b', "loose", true));
  assert_non_null(air__table_get_pinned(t, 'b', "q", 1, sizeof(rec)));
  t->loose = 1;
  /* Unpinned, it may go once idle like any other. */
  air__table_pin(t, p, false);
  assert_int_equal(t->loose, 2);
  air__table_at(t, 1000 + 101 * AIR__STATE_IDLE_MS);
  air__table_at(t, 1000 + 101 * AIR__STATE_IDLE_MS);
  assert_null(get(t, 'b', "p", false));
  assert_non_null(get(t, 'b', "q", false));
  air__table_cleanup(t);
  free(t);
}

static void admit_takes_a_token_only_for_a_probe(void **unused) {
  (void)unused;
  air__table *t = table_new();
  rec *a = get(t, 'b', "a", true);
  rec *b = get(t, 'b', "b", true);
  air__verdict fail = {
      .kind = AIR__VERDICT_FAILURE, .threshold = 1, .open_ms = 100};
  uint64_t lease = 0, reopen = 0;
  /* Closed: admitted, no token. */
  assert_int_equal(air__table_admit(t, &a->br, 0, 50, &reopen, &lease),
                   AIR__ADMIT_YES);
  assert_int_equal(t->tokens, 0);
  air__breaker_apply(&a->br, &fail, 0);
  air__breaker_apply(&b->br, &fail, 0);
  /* Open: refused, no token. */
  assert_int_equal(air__table_admit(t, &a->br, 10, 50, &reopen, &lease),
                   AIR__ADMIT_NO);
  assert_int_equal(reopen, 100);
  assert_int_equal(lease, 0);
  /* Half-open: the probe holds the next token, unique across records. */
  assert_int_equal(air__table_admit(t, &a->br, 100, 50, &reopen, &lease),
                   AIR__ADMIT_PROBE);
  assert_int_equal(lease, 1);
  assert_int_equal(air__table_admit(t, &a->br, 101, 50, &reopen, &lease),
                   AIR__ADMIT_NO); /* the lease is live */
  assert_int_equal(air__table_admit(t, &b->br, 101, 50, &reopen, &lease),
                   AIR__ADMIT_PROBE);
  assert_int_equal(lease, 2);
  assert_int_equal(t->tokens, 2);
  air__table_cleanup(t);
  free(t);
}

static void sticky_window(void **unused) {
  (void)unused;
  air__sticky_mem s;
  memset(&s, 0, sizeof s);
  air__sticky_rec out;
  assert_int_equal(air__sticky_mem_get(&s, 0, &out), 0);
  assert_false(air__sticky_mem_set(&s, NULL, 0)); /* not sticky: no change */
  assert_true(air__sticky_mem_set(&s, "p/a", 100));
  assert_int_equal(air__sticky_mem_get(&s, 150, &out), 1);
  assert_string_equal(out.target, "p/a");
  assert_int_equal(out.age_ms, 50);
  assert_int_equal(out.used, 0);
  assert_int_equal(air__sticky_mem_get(&s, 160, &out), 1);
  assert_int_equal(out.used, 1); /* each get counts a request */
  /* The same target keeps the window; another starts a new one. */
  assert_false(air__sticky_mem_set(&s, "p/a", 200));
  assert_int_equal(air__sticky_mem_get(&s, 210, &out), 1);
  assert_int_equal(out.age_ms, 110);
  assert_int_equal(out.used, 2);
  assert_true(air__sticky_mem_set(&s, "p/b", 300));
  assert_int_equal(air__sticky_mem_get(&s, 300, &out), 1);
  assert_string_equal(out.target, "p/b");
  assert_int_equal(out.age_ms, 0);
  assert_int_equal(out.used, 0);
  /* A clock before the window's start reads as age 0. */
  assert_int_equal(air__sticky_mem_get(&s, 299, &out), 1);
  assert_int_equal(out.age_ms, 0);
  /* The count saturates. */
  s.used = UINT32_MAX;
  assert_int_equal(air__sticky_mem_get(&s, 400, &out), 1);
  assert_int_equal(out.used, UINT32_MAX);
  assert_int_equal(s.used, UINT32_MAX);
  /* A name that does not fit ends the window rather than cut it. */
  char big[AIR__MAX_TARGET_BYTES + 1];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  assert_true(air__sticky_mem_set(&s, big, 500));
  assert_int_equal(air__sticky_mem_get(&s, 500, &out), 0);
  assert_true(air__sticky_mem_set(&s, "p/a", 600));
  assert_true(air__sticky_mem_set(&s, NULL, 700));
  assert_int_equal(air__sticky_mem_get(&s, 700, &out), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(get_finds_by_kind_and_key),
      cmocka_unit_test(next_walks_every_record_once),
      cmocka_unit_test(get_stops_at_the_cap),
      cmocka_unit_test(at_evicts_idle_loose_records_a_few_per_op),
      cmocka_unit_test(admit_takes_a_token_only_for_a_probe),
      cmocka_unit_test(sticky_window),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
