/*
 * Cancel tokens' watchers (cancel.h): any number of watchers, every one
 * fired by one trigger, unwatch anywhere in the list, a watch on a token
 * already triggered fires at once, a trigger from another thread.
 */
#include "helpers.h"

#include <pthread.h>
#include <stdlib.h>

#include "cancel.h"

enum { N_WATCHERS = 100 };

typedef struct counted {
  air__cancel_watcher w;
  unsigned fired;
} counted;

static void count(void *data) {
  ((counted *)data)->fired++;
}

static counted *watch_all(air_cancel *c, size_t n) {
  counted *k = calloc(n, sizeof(*k));
  assert_non_null(k);
  for (size_t i = 0; i < n; i++) {
    k[i].w.fn = count;
    k[i].w.data = &k[i];
    air__cancel_watch(c, &k[i].w);
    assert_int_equal(k[i].fired, 0);
  }
  return k;
}

static void test_hundred_watchers_one_trigger(void **s) {
  (void)s;
  air_cancel *c = NULL;
  assert_int_equal(air_cancel_new(&c), 0);
  counted *k = watch_all(c, N_WATCHERS);
  /* Unwatched ones (first, middle, last, twice) are not fired. */
  air__cancel_unwatch(c, &k[0].w);
  air__cancel_unwatch(c, &k[50].w);
  air__cancel_unwatch(c, &k[50].w);
  air__cancel_unwatch(c, &k[N_WATCHERS - 1].w);
  air_cancel_trigger(c);
  for (size_t i = 0; i < N_WATCHERS; i++) {
    bool gone = i == 0 || i == 50 || i == N_WATCHERS - 1;
    assert_int_equal(k[i].fired, gone ? 0 : 1);
  }
  /* Every trigger fires the watchers still linked. */
  air_cancel_trigger(c);
  assert_int_equal(k[1].fired, 2);
  assert_int_equal(k[50].fired, 0);
  for (size_t i = 0; i < N_WATCHERS; i++) air__cancel_unwatch(c, &k[i].w);
  air_cancel_trigger(c);
  assert_int_equal(k[1].fired, 2);
  free(k);
  air_cancel_free(c);
}

/* A watcher unwatched in the middle and watched again goes on working. */
static void test_unwatch_and_watch_again(void **s) {
  (void)s;
  air_cancel *c = NULL;
  assert_int_equal(air_cancel_new(&c), 0);
  counted *k = watch_all(c, 3);
  air__cancel_unwatch(c, &k[1].w);
  air__cancel_watch(c, &k[1].w);
  air_cancel_trigger(c);
  for (size_t i = 0; i < 3; i++) assert_int_equal(k[i].fired, 1);
  for (size_t i = 0; i < 3; i++) air__cancel_unwatch(c, &k[i].w);
  free(k);
  air_cancel_free(c);
}

/* A token already triggered fires a new watcher before the watch returns,
 * once. */
static void test_watch_after_trigger_fires_at_once(void **s) {
  (void)s;
  air_cancel *c = NULL;
  assert_int_equal(air_cancel_new(&c), 0);
  air_cancel_trigger(c);
  counted k = {{count, NULL, NULL, NULL, false}, 0};
  k.w.data = &k;
  air__cancel_watch(c, &k.w);
  assert_int_equal(k.fired, 1);
  air__cancel_unwatch(c, &k.w);
  air_cancel_free(c);
}

/* No token: nothing to watch, nothing fires, nothing crashes. */
static void test_null_token(void **s) {
  (void)s;
  counted k = {{count, NULL, NULL, NULL, false}, 0};
  k.w.data = &k;
  air__cancel_watch(NULL, &k.w);
  air__cancel_unwatch(NULL, &k.w);
  assert_int_equal(k.fired, 0);
}

/* A trigger from another thread reaches every watcher. */
static void *trigger_main(void *p) {
  air_cancel_trigger(p);
  return NULL;
}

static void test_trigger_from_another_thread(void **s) {
  (void)s;
  air_cancel *c = NULL;
  assert_int_equal(air_cancel_new(&c), 0);
  counted *k = watch_all(c, N_WATCHERS);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, trigger_main, c), 0);
  pthread_join(th, NULL);
  for (size_t i = 0; i < N_WATCHERS; i++) {
    assert_int_equal(k[i].fired, 1);
    air__cancel_unwatch(c, &k[i].w);
  }
  const air_clock *clk = air_clock_system();
  assert_int_equal(clk->sleep(clk->data, 10000, c), 1);
  free(k);
  air_cancel_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hundred_watchers_one_trigger),
      cmocka_unit_test(test_unwatch_and_watch_again),
      cmocka_unit_test(test_watch_after_trigger_fires_at_once),
      cmocka_unit_test(test_null_token),
      cmocka_unit_test(test_trigger_from_another_thread),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
