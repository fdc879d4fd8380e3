/* Process-local sticky state (src/state/state.c): stickiness follows the
 * target by name, so a reload that reorders or drops targets never moves
 * traffic to another target (docs/design.md §5, Reload). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "airetry.h"
#include "policy.h"
#include "state.h"

static air__sticky_cfg sticky_on(void) {
  air__sticky_cfg c;
  memset(&c, 0, sizeof(c));
  c.enabled = true;
  c.after_ms = 60000;
  c.requests = 100;
  return c;
}

static void targets_of(air__target *t, size_t n, char **names) {
  memset(t, 0, n * sizeof(*t));
  for (size_t i = 0; i < n; i++) t[i].name = names[i];
}

static void sticky_follows_name_across_reorder(void **unused) {
  (void)unused;
  air_state *st = NULL;
  assert_int_equal(air_state_new(NULL, &st, NULL), 0);
  air__sticky_cfg c = sticky_on();
  char *before[] = {"a/x", "b/y", "c/z"};
  air__target t[3];
  targets_of(t, 3, before);
  /* Not sticky yet: start on the first. */
  assert_int_equal(air__sticky_take(st, "r", &c, t, 3, 0), 0);
  /* Succeeded on c/z (index 2): sticky to it. */
  air__sticky_settle(st, "r", &c, "c/z", false, 10);
  assert_int_equal(air__sticky_take(st, "r", &c, t, 3, 20), 2);
  /* A reload reorders the targets: c/z is now index 1, b/y index 2. */
  char *after[] = {"a/x", "c/z", "b/y"};
  targets_of(t, 3, after);
  assert_int_equal(air__sticky_take(st, "r", &c, t, 3, 30), 1);
  /* A reload drops c/z: not sticky any more, and it stays so. */
  char *dropped[] = {"a/x", "b/y"};
  targets_of(t, 2, dropped);
  assert_int_equal(air__sticky_take(st, "r", &c, t, 2, 40), 0);
  targets_of(t, 3, after);
  assert_int_equal(air__sticky_take(st, "r", &c, t, 3, 50), 0);
  air_state_free(st);
}

static void sticky_settle_first_clears(void **unused) {
  (void)unused;
  air_state *st = NULL;
  assert_int_equal(air_state_new(NULL, &st, NULL), 0);
  air__sticky_cfg c = sticky_on();
  char *names[] = {"a/x", "b/y"};
  air__target t[2];
  targets_of(t, 2, names);
  air__sticky_settle(st, "r", &c, "b/y", false, 0);
  assert_int_equal(air__sticky_take(st, "r", &c, t, 2, 1), 1);
  air__sticky_settle(st, "r", &c, "a/x", true, 2);
  assert_int_equal(air__sticky_take(st, "r", &c, t, 2, 3), 0);
  /* Another route is independent; an expired window returns to the first. */
  air__sticky_settle(st, "r2", &c, "b/y", false, 100);
  assert_int_equal(air__sticky_take(st, "r", &c, t, 2, 101), 0);
  assert_int_equal(air__sticky_take(st, "r2", &c, t, 2, 101), 1);
  assert_int_equal(air__sticky_take(st, "r2", &c, t, 2, 100 + 60000), 0);
  air_state_free(st);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sticky_follows_name_across_reorder),
      cmocka_unit_test(sticky_settle_first_clears),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
