/*
 * What only the Redis backend has (src/state/redis.c, docs/design.md §3.1), on
 * the real clock against a redis-server this test starts (redis_fixture.h):
 * two instances (two air_state, as two processes would have) sharing one
 * breaker, one probe lease, a cooldown and a sticky choice; versions in
 * the store; Redis killed, paused (SIGSTOP) and read-only while ops go on
 * without delay; restart and merge (the stricter state wins). Every wait
 * is a bounded poll on an event (a published change reaching the mirror,
 * the link coming back), never a fixed sleep.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>

#include "airetry.h"
#include "policy.h"
#include "redis.h"
#include "redis_fixture.h"
#include "state.h"

#define OPEN_MS 400u
#define WAIT_MS 3000u  /* the bound on every wait for a change or a link */
#define SLOW_OP_MS 50u /* an op slower than this "waited on Redis" */

static redis_fixture srv;

static void ops_stay_fast(air_state *st, const char *t);
static unsigned n_prefix;

typedef struct pair {
  air_config *cfg;
  air_state *a, *b;
} pair;

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static air__breaker_cfg breaker(void) {
  air__breaker_cfg c = {.enabled = true,
                        .failures = 3,
                        .open_ms = OPEN_MS,
                        .quota_open_ms = 60000};
  return c;
}

/* Two instances on one Redis, one fresh prefix, both linked. */
static int setup(void **state) {
  pair *p = calloc(1, sizeof *p);
  char text[1024];
  snprintf(text, sizeof text,
           "providers:\n"
           "  - {name: p, api: openai, base_url: \"http://127.0.0.1:9/v1\"}\n"
           "routes:\n"
           "  - {name: r, targets: [p/a, p/b, p/c]}\n"
           "state: {redis: {url: \"redis://127.0.0.1:%d\", prefix: \"t%u:\",\n"
           "        connect_timeout_ms: 100, command_timeout_ms: 100}}\n",
           srv.port, ++n_prefix);
  assert_int_equal(
      air_config_parse("t.yaml", text, strlen(text), NULL, NULL, &p->cfg), 0);
  assert_int_equal(air_state_new(p->cfg, &p->a, NULL), 0);
  assert_int_equal(air_state_new(p->cfg, &p->b, NULL), 0);
  assert_int_equal(air__state_redis_sync(p->a, WAIT_MS), 0);
  assert_int_equal(air__state_redis_sync(p->b, WAIT_MS), 0);
  *state = p;
  return 0;
}

static int teardown(void **state) {
  pair *p = *state;
  air_state_free(p->a);
  air_state_free(p->b);
  air_config_free(p->cfg);
  free(p);
  if (srv.pid == 0) assert_true(rf_restart(&srv));
  return 0;
}

/* Polls until st's breaker of t is mode (true) or WAIT_MS passed. */
static bool wait_mode(air_state *st, const char *t, air_breaker_mode mode) {
  uint64_t end = now_ms() + WAIT_MS;
  while (now_ms() < end) {
    if (air_state_breaker(st, t, now_ms()) == mode) return true;
    rf_nap_ms(5);
  }
  return false;
}

static bool wait_up(air_state *st, bool up) {
  uint64_t end = now_ms() + WAIT_MS;
  air__redis_stats s;
  while (now_ms() < end) {
    if (air__state_redis_stats(st, &s) == 0 && s.up == up) return true;
    rf_nap_ms(5);
  }
  return false;
}

static void fail_n(air_state *st, const char *t, int n) {
  air__breaker_cfg c = breaker();
  for (int i = 0; i < n; i++)
    air__state_record(st, t, &c, AIR_REASON_SERVER_ERROR, 0, now_ms());
}

/* An admit, timed: never slower than SLOW_OP_MS. */
static air__admit timed_admit(air_state *st, const char *t, uint64_t *lease) {
  air__breaker_cfg c = breaker();
  uint64_t reopen = 0, l = 0, t0 = now_ms();
  air__admit a = air__state_admit(st, t, &c, 5000, now_ms(), &reopen, &l);
  assert_true(now_ms() - t0 < SLOW_OP_MS);
  if (lease) *lease = l;
  return a;
}

/* A redis-cli style command's string reply (the first KEYS match's
 * field), or "" (for asserting what the store holds). */
static void hget_first(const char *pattern, const char *field, char *out,
                       size_t sz) {
  struct timeval tv = {1, 0};
  out[0] = 0;
  redisContext *c = redisConnectWithTimeout("127.0.0.1", srv.port, tv);
  assert_non_null(c);
  redisReply *k = redisCommand(c, "KEYS %s", pattern);
  if (k && k->type == REDIS_REPLY_ARRAY && k->elements > 0) {
    redisReply *v = redisCommand(c, "HGET %s %s", k->element[0]->str, field);
    if (v && v->type == REDIS_REPLY_STRING) snprintf(out, sz, "%s", v->str);
    if (v) freeReplyObject(v);
  }
  if (k) freeReplyObject(k);
  redisFree(c);
}

/* ---- sharing --------------------------------------------------------------
 */

static void breaker_opened_by_one_is_open_for_the_other(void **state) {
  pair *p = *state;
  fail_n(p->a, "p/a", 3);
  assert_int_equal(air_state_breaker(p->a, "p/a", now_ms()), AIR_BREAKER_OPEN);
  /* B learns it from the published change, without asking Redis. */
  assert_true(wait_mode(p->b, "p/a", AIR_BREAKER_OPEN));
  assert_int_equal(timed_admit(p->b, "p/a", NULL), AIR__ADMIT_NO);
  assert_int_equal(timed_admit(p->b, "p/b", NULL), AIR__ADMIT_YES);
  /* Failures count across instances: 2 on A + 1 on B open p/b. */
  fail_n(p->a, "p/b", 2);
  assert_int_equal(air__state_redis_sync(p->a, WAIT_MS), 0);
  assert_true(wait_mode(p->b, "p/b", AIR_BREAKER_CLOSED));
  fail_n(p->b, "p/b", 1);
  assert_int_equal(air__state_redis_sync(p->b, WAIT_MS), 0);
  assert_true(wait_mode(p->b, "p/b", AIR_BREAKER_OPEN));
  assert_true(wait_mode(p->a, "p/b", AIR_BREAKER_OPEN));
  /* Versions: one per change of the key, in the store. */
  char pat[64], v[32];
  snprintf(pat, sizeof pat, "t%u:b:p/b:*", n_prefix);
  hget_first(pat, "v", v, sizeof v);
  assert_string_equal(v, "3");
  hget_first(pat, "o", v, sizeof v);
  assert_string_equal(v, "1");
  air__redis_stats s;
  assert_int_equal(air__state_redis_stats(p->b, &s), 0);
  assert_true(s.up);
  assert_true(s.applied >= 2);
}

static void one_probe_across_instances(void **state) {
  pair *p = *state;
  fail_n(p->a, "p/a", 3);
  assert_true(wait_mode(p->b, "p/a", AIR_BREAKER_OPEN));
  assert_true(wait_mode(p->a, "p/a", AIR_BREAKER_HALF_OPEN));
  assert_true(wait_mode(p->b, "p/a", AIR_BREAKER_HALF_OPEN));
  /* Half-open: each skips the target and asks for the lease. */
  assert_int_equal(timed_admit(p->a, "p/a", NULL), AIR__ADMIT_NO);
  assert_int_equal(timed_admit(p->b, "p/a", NULL), AIR__ADMIT_NO);
  assert_int_equal(air__state_redis_sync(p->a, WAIT_MS), 0);
  assert_int_equal(air__state_redis_sync(p->b, WAIT_MS), 0);
  int probes = 0;
  uint64_t la = 0, lb = 0;
  for (int i = 0; i < 3; i++) {
    probes += timed_admit(p->a, "p/a", i ? NULL : &la) == AIR__ADMIT_PROBE;
    probes += timed_admit(p->b, "p/a", i ? NULL : &lb) == AIR__ADMIT_PROBE;
  }
  assert_int_equal(probes, 1);
  /* The probe's success closes it for both. */
  air_state *owner = la ? p->a : p->b;
  air__breaker_cfg c = breaker();
  air__state_record(owner, "p/a", &c, AIR_REASON_NONE, la ? la : lb, now_ms());
  assert_true(wait_mode(p->a, "p/a", AIR_BREAKER_CLOSED));
  assert_true(wait_mode(p->b, "p/a", AIR_BREAKER_CLOSED));
}

static void cooldown_is_shared(void **state) {
  pair *p = *state;
  air__state_cool(p->a, "p/c", now_ms(), 30000);
  assert_true(wait_mode(p->b, "p/c", AIR_BREAKER_OPEN));
  air__breaker_cfg c = breaker();
  uint64_t reopen = 0, lease = 0, t = now_ms();
  assert_int_equal(air__state_admit(p->b, "p/c", &c, 5000, t, &reopen, &lease),
                   AIR__ADMIT_NO);
  /* A duration crossed, converted on B's clock: about 30 s from now. */
  assert_true(reopen > t + 29000 && reopen <= t + 30000);
}

static void sticky_is_shared(void **state) {
  pair *p = *state;
  air__sticky_cfg c = {.enabled = true, .after_ms = 60000, .requests = 0};
  air__target t[3];
  memset(t, 0, sizeof t);
  char *names[] = {"p/a", "p/b", "p/c"};
  for (int i = 0; i < 3; i++) t[i].name = names[i];
  air__sticky_settle(p->a, "r", &c, "p/c", false, now_ms());
  uint64_t end = now_ms() + WAIT_MS;
  unsigned idx = 0;
  while (idx == 0 && now_ms() < end) {
    idx = air__sticky_take(p->b, "r", &c, t, 3, now_ms());
    if (idx == 0) rf_nap_ms(5);
  }
  assert_int_equal(idx, 2);
  /* The first target's success on B ends it for A too. */
  air__sticky_settle(p->b, "r", &c, "p/a", true, now_ms());
  end = now_ms() + WAIT_MS;
  while ((idx = air__sticky_take(p->a, "r", &c, t, 3, now_ms())) != 0 &&
         now_ms() < end)
    rf_nap_ms(5);
  assert_int_equal(idx, 0);
}

/* Polls until st's learned style of t is style (true) or WAIT_MS passed. */
static bool wait_style(air_state *st, const char *t, air_cont_style style) {
  uint64_t end = now_ms() + WAIT_MS;
  while (now_ms() < end) {
    if (air__state_style_get(st, t, now_ms()) == style) return true;
    rf_nap_ms(5);
  }
  return false;
}

/* A learned continuation style (docs/design.md §3.5) reaches the other instance
 * with the time it has left, not a clock value. */
static void style_is_shared(void **state) {
  pair *p = *state;
  assert_int_equal(air__state_style_get(p->b, "p/b", now_ms()), AIR_CONT_NONE);
  air__state_style_learn(p->a, "p/b", AIR_CONT_INSTRUCT, now_ms());
  assert_true(wait_style(p->b, "p/b", AIR_CONT_INSTRUCT));
  /* About 24 h left on B's clock. */
  uint64_t t = now_ms();
  assert_int_equal(air__state_style_get(p->b, "p/b", t + 86400000u - 60000u),
                   AIR_CONT_INSTRUCT);
  assert_int_equal(air__state_style_get(p->b, "p/b", t + 86400000u + 1000u),
                   AIR_CONT_NONE);
  assert_int_equal(air__state_style_get(p->b, "p/a", t), AIR_CONT_NONE);
}

/* Learned during an outage: merged when Redis is back, read by the other. */
static void style_learned_in_outage_is_merged(void **state) {
  pair *p = *state;
  rf_kill(&srv);
  assert_true(wait_up(p->a, false));
  air__state_style_learn(p->a, "p/c", AIR_CONT_INSTRUCT, now_ms());
  assert_int_equal(air__state_style_get(p->a, "p/c", now_ms()),
                   AIR_CONT_INSTRUCT);
  assert_int_equal(air__state_style_get(p->b, "p/c", now_ms()), AIR_CONT_NONE);
  assert_true(rf_restart(&srv));
  assert_true(wait_up(p->a, true));
  assert_true(wait_up(p->b, true));
  assert_true(wait_style(p->b, "p/c", AIR_CONT_INSTRUCT));
}

/* B may probe only until it gets the lease (bounded); true when it did. */
static bool b_probes_within(air_state *b, uint64_t ms) {
  uint64_t end = now_ms() + ms;
  while (now_ms() < end) {
    uint64_t lease = 0;
    if (timed_admit(b, "p/a", &lease) == AIR__ADMIT_PROBE) {
      air__state_release(b, "p/a", lease);
      return true;
    }
    assert_int_equal(air__state_redis_sync(b, WAIT_MS), 0);
    rf_nap_ms(20);
  }
  return false;
}

static void probe_lease_renewed_while_it_runs(void **state) {
  pair *p = *state;
  fail_n(p->a, "p/a", 3);
  assert_true(wait_mode(p->b, "p/a", AIR_BREAKER_OPEN));
  assert_true(wait_mode(p->a, "p/a", AIR_BREAKER_HALF_OPEN));
  assert_true(wait_mode(p->b, "p/a", AIR_BREAKER_HALF_OPEN));
  uint64_t lease = 0;
  assert_int_equal(timed_admit(p->a, "p/a", NULL), AIR__ADMIT_NO);
  assert_int_equal(air__state_redis_sync(p->a, WAIT_MS), 0);
  assert_int_equal(timed_admit(p->a, "p/a", &lease), AIR__ADMIT_PROBE);
  /* The probe runs (its engine lease is 5 s): past the lease's 3 s life
   * in Redis, renewals keep B out. */
  assert_false(b_probes_within(p->b, 4000));
  /* A vanishes mid-probe: its lease in Redis ends within 3 s. */
  air_state_free(p->a);
  p->a = NULL;
  assert_true(b_probes_within(p->b, 4000));
}

/* ---- outages ----------------------------------------------------------------
 */

/* Ops on a state whose Redis is gone: each fast, decided locally. */
static void ops_stay_fast(air_state *st, const char *t) {
  for (int i = 0; i < 200; i++) {
    uint64_t t0 = now_ms();
    fail_n(st, t, 1);
    (void)timed_admit(st, "p/b", NULL);
    (void)air_state_breaker(st, t, now_ms());
    assert_true(now_ms() - t0 < SLOW_OP_MS);
  }
}

static void killed_then_restarted_merges(void **state) {
  pair *p = *state;
  rf_kill(&srv);
  /* A opens p/a alone while Redis is gone: no op waits. */
  ops_stay_fast(p->a, "p/a");
  assert_int_equal(air_state_breaker(p->a, "p/a", now_ms()), AIR_BREAKER_OPEN);
  assert_int_equal(air_state_breaker(p->b, "p/a", now_ms()),
                   AIR_BREAKER_CLOSED);
  assert_true(wait_up(p->a, false));
  fail_n(p->a, "p/a", 1); /* not sent: counted, merged later */
  /* Back on the same port (empty: no persistence): A merges what it holds,
   * B reads it. */
  assert_true(rf_restart(&srv));
  assert_true(wait_up(p->a, true));
  assert_true(wait_up(p->b, true));
  assert_true(wait_mode(p->b, "p/a", AIR_BREAKER_OPEN));
  air__redis_stats s;
  assert_int_equal(air__state_redis_stats(p->a, &s), 0);
  assert_true(s.reconnects >= 1);
  assert_true(s.dropped >= 1);
}

static void paused_redis_delays_nothing(void **state) {
  pair *p = *state;
  kill(srv.pid, SIGSTOP);
  fail_n(p->a, "p/a", 3); /* queued: the link does not know yet */
  ops_stay_fast(p->a, "p/c");
  assert_true(wait_up(p->a, false)); /* the command timeout noticed */
  ops_stay_fast(p->a, "p/c");
  assert_int_equal(air_state_breaker(p->a, "p/c", now_ms()), AIR_BREAKER_OPEN);
  kill(srv.pid, SIGCONT);
  assert_true(wait_up(p->a, true));
  assert_true(wait_mode(p->b, "p/c", AIR_BREAKER_OPEN));
}

static void read_only_redis_is_an_outage(void **state) {
  pair *p = *state;
  /* A replica of nothing: writes answer READONLY. */
  assert_int_equal(rf_cmd(&srv, "REPLICAOF 127.0.0.1 1"), 0);
  fail_n(p->a, "p/b", 3);
  ops_stay_fast(p->a, "p/b");
  assert_int_equal(air_state_breaker(p->a, "p/b", now_ms()), AIR_BREAKER_OPEN);
  air__redis_stats s;
  uint64_t end = now_ms() + WAIT_MS;
  do {
    assert_int_equal(air__state_redis_stats(p->a, &s), 0);
    if (s.command_errors == 0) rf_nap_ms(5);
  } while (s.command_errors == 0 && now_ms() < end);
  assert_true(s.command_errors > 0);
  assert_int_equal(rf_cmd(&srv, "REPLICAOF NO ONE"), 0);
  /* Writable again: the merge reaches B. */
  assert_true(wait_mode(p->b, "p/b", AIR_BREAKER_OPEN));
}

/* ---- a Redis that is still loading ------------------------------------------
 */

/* A fake server on 127.0.0.1 that answers every command with -LOADING (a
 * Redis reading its dataset after a restart), until stopped. */
typedef struct loading_srv {
  int lfd, port, stop[2];
  pthread_t thread;
} loading_srv;

static void *loading_main(void *data) {
  loading_srv *l = data;
  struct pollfd fds[34];
  size_t n = 2;
  fds[0] = (struct pollfd){.fd = l->lfd, .events = POLLIN};
  fds[1] = (struct pollfd){.fd = l->stop[0], .events = POLLIN};
  for (;;) {
    if (poll(fds, n, 1000) < 0) break;
    if (fds[1].revents) break;
    if ((fds[0].revents & POLLIN) && n < 34) {
      int c = accept(l->lfd, NULL, NULL);
      if (c >= 0) fds[n++] = (struct pollfd){.fd = c, .events = POLLIN};
    }
    for (size_t i = 2; i < n; i++) {
      if (!fds[i].revents) continue;
      char buf[8192];
      ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got <= 0) {
        close(fds[i].fd);
        fds[i--] = fds[--n];
        continue;
      }
      /* One error per command: a RESP array starts a line with '*'. */
      for (ssize_t j = 0; j + 1 < got; j++) {
        if (buf[j] == '*' && buf[j + 1] >= '0' && buf[j + 1] <= '9' &&
            (j == 0 || buf[j - 1] == '\n')) {
          static const char err[] =
              "-LOADING Redis is loading the dataset in memory\r\n";
          if (send(fds[i].fd, err, sizeof err - 1, MSG_NOSIGNAL) < 0) break;
        }
      }
    }
  }
  for (size_t i = 2; i < n; i++) close(fds[i].fd);
  return NULL;
}

static void loading_start(loading_srv *l) {
  l->lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  assert_int_equal(bind(l->lfd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(l->lfd, 16), 0);
  assert_int_equal(getsockname(l->lfd, (struct sockaddr *)&a, &len), 0);
  l->port = ntohs(a.sin_port);
  assert_int_equal(pipe(l->stop), 0);
  assert_int_equal(pthread_create(&l->thread, NULL, loading_main, l), 0);
}

static void loading_stop(loading_srv *l) {
  assert_int_equal(write(l->stop[1], "x", 1), 1);
  pthread_join(l->thread, NULL);
  close(l->lfd);
  close(l->stop[0]);
  close(l->stop[1]);
}

static void loading_redis_is_an_outage(void **state) {
  (void)state;
  loading_srv l;
  loading_start(&l);
  char text[512];
  snprintf(text, sizeof text,
           "providers: [{name: p, api: openai, base_url: \"http://x/v1\"}]\n"
           "routes: [{name: r, targets: [p/a, p/b, p/c]}]\n"
           "state: {redis: {url: \"redis://127.0.0.1:%d\",\n"
           "        connect_timeout_ms: 100, command_timeout_ms: 100}}\n",
           l.port);
  air_config *cfg = NULL;
  air_state *st = NULL;
  assert_int_equal(
      air_config_parse("l.yaml", text, strlen(text), NULL, NULL, &cfg), 0);
  assert_int_equal(air_state_new(cfg, &st, NULL), 0);
  ops_stay_fast(st, "p/a");
  assert_int_equal(air_state_breaker(st, "p/a", now_ms()), AIR_BREAKER_OPEN);
  air__redis_stats s;
  uint64_t end = now_ms() + WAIT_MS;
  do {
    assert_int_equal(air__state_redis_stats(st, &s), 0);
    if (s.reconnects < 2) rf_nap_ms(5);
  } while (s.reconnects < 2 && now_ms() < end);
  /* Never up, the errors counted, linking again and again. */
  assert_false(s.up);
  assert_true(s.command_errors >= 2);
  assert_true(s.reconnects >= 2);
  ops_stay_fast(st, "p/a");
  air_state_free(st);
  air_config_free(cfg);
  loading_stop(&l);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          breaker_opened_by_one_is_open_for_the_other, setup, teardown),
      cmocka_unit_test_setup_teardown(one_probe_across_instances, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(probe_lease_renewed_while_it_runs, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(cooldown_is_shared, setup, teardown),
      cmocka_unit_test_setup_teardown(sticky_is_shared, setup, teardown),
      cmocka_unit_test_setup_teardown(style_is_shared, setup, teardown),
      cmocka_unit_test_setup_teardown(style_learned_in_outage_is_merged, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(killed_then_restarted_merges, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(paused_redis_delays_nothing, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(read_only_redis_is_an_outage, setup,
                                      teardown),
      cmocka_unit_test(loading_redis_is_an_outage),
  };
  if (!rf_start(&srv)) {
    fprintf(stderr,
            "cannot start redis-server (scripts/deps.sh installs it)\n");
    return 1;
  }
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  rf_stop(&srv);
  return rc;
}
