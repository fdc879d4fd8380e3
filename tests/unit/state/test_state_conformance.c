/*
 * The state interface's conformance test (core/state.h, docs/design.md §3.1): a
 * table of scenarios, each run against every backend in `backends` through
 * the interface only (the engine's calls: admit / record / release / cool,
 * sticky take / settle, and the backend's mode). A new backend (Redis)
 * passes when it adds one line to `backends`: the scenarios are the
 * contract, not the local table's internals.
 *
 * The Redis backend runs against a redis-server this test starts on a
 * free 127.0.0.1 port (redis_fixture.h), each case under a key prefix of
 * its own. Its one documented difference (state.h): half-open with the
 * link up, an admit asks Redis for the probe lease and refuses; the admit
 * after the answer is the probe. admit() below waits for that answer
 * (air__state_redis_sync, an event, not a sleep) and asks again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "airetry.h"
#include "policy.h"
#include "redis.h"
#include "redis_fixture.h"
#include "state.h"

/* ---- backends ------------------------------------------------------------ */

typedef struct backend {
  const char *name;
  int (*make)(air_state **out); /* a fresh, empty state */
  bool shared;                  /* asks Redis for the probe lease */
} backend;

static int make_local(air_state **out) {
  return air_state_new(NULL, out, NULL);
}

static redis_fixture redis_srv;
static unsigned redis_cases;
static air_config *redis_cfg;

/* A Redis state with the routes the scenarios use, under a fresh prefix. */
static int make_redis(air_state **out) {
  char text[1024];
  snprintf(
      text, sizeof text,
      "providers:\n"
      "  - {name: p, api: openai, base_url: \"http://127.0.0.1:9/v1\"}\n"
      "  - {name: q, api: openai, base_url: \"http://127.0.0.1:9/v1\"}\n"
      "routes:\n"
      "  - {name: r, targets: [p/a, p/b, q/c]}\n"
      "  - {name: r2, targets: [p/a, p/b, q/c]}\n"
      "state: {redis: {url: \"redis://127.0.0.1:%d\", prefix: \"c%u:\"}}\n",
      redis_srv.port, ++redis_cases);
  air_config_free(redis_cfg);
  redis_cfg = NULL;
  if (air_config_parse("conformance.yaml", text, strlen(text), NULL, NULL,
                       &redis_cfg) != 0)
    return -1;
  int rc = air_state_new(redis_cfg, out, NULL);
  /* Start linked: the link-down path is the local backend's. */
  if (rc == 0 && air__state_redis_sync(*out, 5000) != 0) return -1;
  return rc;
}

static const backend backends[] = {
    {"local", make_local, false},
    {"redis", make_redis, true},
};

static const backend *current;

/* ---- helpers ------------------------------------------------------------- */

#define T0 1000000u /* a clock far from 0 */
#define OPEN_MS 1000u
#define QUOTA_MS 50000u
#define LEASE_MS 500u

static air__breaker_cfg breaker(void) {
  air__breaker_cfg c = {.enabled = true,
                        .failures = 3,
                        .open_ms = OPEN_MS,
                        .quota_open_ms = QUOTA_MS};
  return c;
}

static air__admit admit(air_state *st, const char *t, uint64_t now,
                        uint64_t *reopen, uint64_t *lease) {
  air__breaker_cfg c = breaker();
  uint64_t r = 0, l = 0;
  air__admit a = air__state_admit(st, t, &c, LEASE_MS, now, &r, &l);
  if (a == AIR__ADMIT_NO && current->shared &&
      air_state_breaker(st, t, now) == AIR_BREAKER_HALF_OPEN) {
    /* The lease was asked for: once answered, the admit probes (unless
     * another holds it). */
    assert_int_equal(air__state_redis_sync(st, 5000), 0);
    a = air__state_admit(st, t, &c, LEASE_MS, now, &r, &l);
  }
  if (reopen) *reopen = r;
  if (lease) *lease = l;
  if (a == AIR__ADMIT_PROBE)
    assert_true(l != 0);
  else
    assert_true(l == 0);
  return a;
}

static void record(air_state *st, const char *t, air_reason reason,
                   uint64_t lease, uint64_t now) {
  air__breaker_cfg c = breaker();
  air__state_record(st, t, &c, reason, lease, now);
}

/* Opens target t at now with cfg.failures counting failures. */
static void open_it(air_state *st, const char *t, uint64_t now) {
  for (int i = 0; i < 3; i++) record(st, t, AIR_REASON_SERVER_ERROR, 0, now);
  assert_int_equal(air_state_breaker(st, t, now), AIR_BREAKER_OPEN);
}

static air__sticky_cfg sticky(uint64_t after_ms, uint32_t requests) {
  air__sticky_cfg c = {
      .enabled = true, .after_ms = after_ms, .requests = requests};
  return c;
}

static void targets_of(air__target *t, size_t n, char **names) {
  memset(t, 0, n * sizeof(*t));
  for (size_t i = 0; i < n; i++) t[i].name = names[i];
}

/* ---- breaker scenarios --------------------------------------------------- */

static void open_after_n_counting_failures(air_state *st) {
  assert_int_equal(air_state_breaker(st, "p/a", T0), AIR_BREAKER_CLOSED);
  assert_int_equal(admit(st, "p/a", T0, NULL, NULL), AIR__ADMIT_YES);
  record(st, "p/a", AIR_REASON_SERVER_ERROR, 0, T0);
  record(st, "p/a", AIR_REASON_NETWORK, 0, T0);
  assert_int_equal(air_state_breaker(st, "p/a", T0), AIR_BREAKER_CLOSED);
  record(st, "p/a", AIR_REASON_TIMEOUT_FIRST_BYTE, 0, T0 + 5);
  assert_int_equal(air_state_breaker(st, "p/a", T0 + 5), AIR_BREAKER_OPEN);
  uint64_t reopen = 0;
  assert_int_equal(admit(st, "p/a", T0 + 6, &reopen, NULL), AIR__ADMIT_NO);
  assert_int_equal(reopen, T0 + 5 + OPEN_MS);
  /* Per target: another one is untouched. */
  assert_int_equal(admit(st, "p/b", T0 + 6, NULL, NULL), AIR__ADMIT_YES);
}

static void non_counting_reasons_ignored(air_state *st) {
  const air_reason ignored[] = {
      AIR_REASON_CONTEXT_OVERFLOW, AIR_REASON_CONTENT_FILTER,
      AIR_REASON_REFUSAL,          AIR_REASON_LENGTH,
      AIR_REASON_NOT_FOUND,        AIR_REASON_BAD_REQUEST,
      AIR_REASON_TIMEOUT_CHUNK,    AIR_REASON_TIMEOUT_ATTEMPT,
      AIR_REASON_ABORTED,
  };
  for (size_t k = 0; k < 3; k++)
    for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
      record(st, "p/a", ignored[i], 0, T0);
  assert_int_equal(air_state_breaker(st, "p/a", T0), AIR_BREAKER_CLOSED);
  /* Nor do they break a run of counting failures. */
  record(st, "p/a", AIR_REASON_RATE_LIMIT, 0, T0);
  record(st, "p/a", AIR_REASON_BAD_REQUEST, 0, T0);
  record(st, "p/a", AIR_REASON_OVERLOADED, 0, T0);
  record(st, "p/a", AIR_REASON_REFUSAL, 0, T0);
  assert_int_equal(air_state_breaker(st, "p/a", T0), AIR_BREAKER_CLOSED);
  record(st, "p/a", AIR_REASON_AUTH, 0, T0);
  assert_int_equal(air_state_breaker(st, "p/a", T0), AIR_BREAKER_OPEN);
}

static void success_resets_the_count(air_state *st) {
  record(st, "p/a", AIR_REASON_SERVER_ERROR, 0, T0);
  record(st, "p/a", AIR_REASON_SERVER_ERROR, 0, T0);
  record(st, "p/a", AIR_REASON_NONE, 0, T0);
  record(st, "p/a", AIR_REASON_SERVER_ERROR, 0, T0);
  record(st, "p/a", AIR_REASON_SERVER_ERROR, 0, T0);
  assert_int_equal(air_state_breaker(st, "p/a", T0), AIR_BREAKER_CLOSED);
}

static void half_open_after_open_ms(air_state *st) {
  open_it(st, "p/a", T0);
  assert_int_equal(air_state_breaker(st, "p/a", T0 + OPEN_MS - 1),
                   AIR_BREAKER_OPEN);
  assert_int_equal(admit(st, "p/a", T0 + OPEN_MS - 1, NULL, NULL),
                   AIR__ADMIT_NO);
  assert_int_equal(air_state_breaker(st, "p/a", T0 + OPEN_MS),
                   AIR_BREAKER_HALF_OPEN);
}

static void exactly_one_probe_lease(air_state *st) {
  open_it(st, "p/a", T0);
  uint64_t now = T0 + OPEN_MS, reopen = 0, lease = 0;
  assert_int_equal(admit(st, "p/a", now, NULL, &lease), AIR__ADMIT_PROBE);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(admit(st, "p/a", now + 1, &reopen, NULL), AIR__ADMIT_NO);
    assert_int_equal(reopen, now + 1);
  }
  /* Still half-open: the lease does not change the mode. */
  assert_int_equal(air_state_breaker(st, "p/a", now + 1),
                   AIR_BREAKER_HALF_OPEN);
  /* Released with no verdict: the next request probes. */
  air__state_release(st, "p/a", lease);
  uint64_t lease2 = 0;
  assert_int_equal(admit(st, "p/a", now + 2, NULL, &lease2), AIR__ADMIT_PROBE);
  assert_int_equal(admit(st, "p/a", now + 2, NULL, NULL), AIR__ADMIT_NO);
}

static void lease_expiry_frees_it(air_state *st) {
  open_it(st, "p/a", T0);
  uint64_t now = T0 + OPEN_MS, first = 0, second = 0;
  assert_int_equal(admit(st, "p/a", now, NULL, &first), AIR__ADMIT_PROBE);
  assert_int_equal(admit(st, "p/a", now + LEASE_MS - 1, NULL, NULL),
                   AIR__ADMIT_NO);
  /* Its owner vanished: the lease frees itself. */
  assert_int_equal(admit(st, "p/a", now + LEASE_MS, NULL, &second),
                   AIR__ADMIT_PROBE);
  assert_true(second != first);
  /* The vanished owner's late release does not free the new lease. */
  air__state_release(st, "p/a", first);
  assert_int_equal(admit(st, "p/a", now + LEASE_MS + 1, NULL, NULL),
                   AIR__ADMIT_NO);
  /* The new owner's release does. */
  air__state_release(st, "p/a", second);
  assert_int_equal(admit(st, "p/a", now + LEASE_MS + 2, NULL, NULL),
                   AIR__ADMIT_PROBE);
}

static void probe_success_closes(air_state *st) {
  open_it(st, "p/a", T0);
  uint64_t now = T0 + OPEN_MS, lease = 0;
  assert_int_equal(admit(st, "p/a", now, NULL, &lease), AIR__ADMIT_PROBE);
  record(st, "p/a", AIR_REASON_NONE, lease, now + 10);
  assert_int_equal(air_state_breaker(st, "p/a", now + 10), AIR_BREAKER_CLOSED);
  assert_int_equal(admit(st, "p/a", now + 10, NULL, NULL), AIR__ADMIT_YES);
  /* Closed with the count reset: it takes cfg.failures again to open. */
  record(st, "p/a", AIR_REASON_SERVER_ERROR, 0, now + 11);
  record(st, "p/a", AIR_REASON_SERVER_ERROR, 0, now + 11);
  assert_int_equal(air_state_breaker(st, "p/a", now + 11), AIR_BREAKER_CLOSED);
}

static void probe_failure_reopens(air_state *st) {
  open_it(st, "p/a", T0);
  uint64_t now = T0 + OPEN_MS, lease = 0;
  assert_int_equal(admit(st, "p/a", now, NULL, &lease), AIR__ADMIT_PROBE);
  /* One counting failure of the probe re-opens it for open_ms. */
  record(st, "p/a", AIR_REASON_OVERLOADED, lease, now + 20);
  assert_int_equal(air_state_breaker(st, "p/a", now + 20), AIR_BREAKER_OPEN);
  assert_int_equal(air_state_breaker(st, "p/a", now + 20 + OPEN_MS - 1),
                   AIR_BREAKER_OPEN);
  assert_int_equal(air_state_breaker(st, "p/a", now + 20 + OPEN_MS),
                   AIR_BREAKER_HALF_OPEN);
  /* Its lease went with the verdict. */
  assert_int_equal(admit(st, "p/a", now + 20 + OPEN_MS, NULL, NULL),
                   AIR__ADMIT_PROBE);
}

static void probe_without_verdict_frees_the_lease(air_state *st) {
  open_it(st, "p/a", T0);
  uint64_t now = T0 + OPEN_MS, lease = 0;
  assert_int_equal(admit(st, "p/a", now, NULL, &lease), AIR__ADMIT_PROBE);
  record(st, "p/a", AIR_REASON_REFUSAL, lease, now + 1);
  assert_int_equal(air_state_breaker(st, "p/a", now + 1),
                   AIR_BREAKER_HALF_OPEN);
  assert_int_equal(admit(st, "p/a", now + 1, NULL, NULL), AIR__ADMIT_PROBE);
}

static void cooldown(air_state *st) {
  air__state_cool(st, "p/a", T0, 5000);
  assert_int_equal(air_state_breaker(st, "p/a", T0 + 4999), AIR_BREAKER_OPEN);
  /* A shorter cooling does not cut a longer one short. */
  air__state_cool(st, "p/a", T0 + 100, 10);
  assert_int_equal(air_state_breaker(st, "p/a", T0 + 4999), AIR_BREAKER_OPEN);
  /* Neither does a success that is not the probe's. */
  record(st, "p/a", AIR_REASON_NONE, 0, T0 + 200);
  assert_int_equal(air_state_breaker(st, "p/a", T0 + 4999), AIR_BREAKER_OPEN);
  assert_int_equal(air_state_breaker(st, "p/a", T0 + 5000),
                   AIR_BREAKER_HALF_OPEN);
  /* A longer one extends it. */
  air__state_cool(st, "p/a", T0 + 5000, 3000);
  assert_int_equal(air_state_breaker(st, "p/a", T0 + 7999), AIR_BREAKER_OPEN);
  assert_int_equal(air_state_breaker(st, "p/a", T0 + 8000),
                   AIR_BREAKER_HALF_OPEN);
}

static void quota_opens_for_quota_open_ms(air_state *st) {
  record(st, "p/a", AIR_REASON_QUOTA, 0, T0);
  assert_int_equal(air_state_breaker(st, "p/a", T0 + QUOTA_MS - 1),
                   AIR_BREAKER_OPEN);
  assert_int_equal(air_state_breaker(st, "p/a", T0 + QUOTA_MS),
                   AIR_BREAKER_HALF_OPEN);
}

static void disabled_breaker_admits_and_records_nothing(air_state *st) {
  air__breaker_cfg off = breaker();
  off.enabled = false;
  for (int i = 0; i < 10; i++)
    air__state_record(st, "p/a", &off, AIR_REASON_SERVER_ERROR, 0, T0);
  assert_int_equal(air_state_breaker(st, "p/a", T0), AIR_BREAKER_CLOSED);
  open_it(st, "p/b", T0);
  uint64_t lease = 7;
  assert_int_equal(
      air__state_admit(st, "p/b", &off, LEASE_MS, T0, NULL, &lease),
      AIR__ADMIT_YES);
  assert_int_equal(lease, 0);
}

/* ---- sticky scenarios ---------------------------------------------------- */

static char *abc[] = {"p/a", "p/b", "q/c"};

static void sticky_set_and_get(air_state *st) {
  air__sticky_cfg c = sticky(60000, 100);
  air__target t[3];
  targets_of(t, 3, abc);
  assert_int_equal(air__sticky_take(st, "r", &c, t, 3, T0), 0);
  air__sticky_settle(st, "r", &c, "q/c", false, T0);
  assert_int_equal(air__sticky_take(st, "r", &c, t, 3, T0 + 1), 2);
  assert_int_equal(air__sticky_take(st, "r", &c, t, 3, T0 + 2), 2);
  /* Routes are independent. */
  assert_int_equal(air__sticky_take(st, "r2", &c, t, 3, T0 + 2), 0);
  /* A success on the first target ends it. */
  air__sticky_settle(st, "r", &c, "p/a", true, T0 + 3);
  assert_int_equal(air__sticky_take(st, "r", &c, t, 3, T0 + 4), 0);
  /* A new target moves it. */
  air__sticky_settle(st, "r", &c, "p/b", false, T0 + 5);
  air__sticky_settle(st, "r", &c, "q/c", false, T0 + 6);
  assert_int_equal(air__sticky_take(st, "r", &c, t, 3, T0 + 7), 2);
}

static void sticky_expires_after_ms(air_state *st) {
  air__sticky_cfg c = sticky(100, 0);
  air__target t[3];
  targets_of(t, 3, abc);
  air__sticky_settle(st, "r", &c, "p/b", false, T0);
  /* Confirming the same target does not extend the window. */
  air__sticky_settle(st, "r", &c, "p/b", false, T0 + 50);
  assert_int_equal(air__sticky_take(st, "r", &c, t, 3, T0 + 99), 1);
  assert_int_equal(air__sticky_take(st, "r", &c, t, 3, T0 + 100), 0);
  /* Over for good, not only for that request. */
  assert_int_equal(air__sticky_take(st, "r", &c, t, 3, T0 + 101), 0);
}

static void sticky_expires_by_requests(air_state *st) {
  air__sticky_cfg c = sticky(0, 2);
  air__target t[3];
  targets_of(t, 3, abc);
  air__sticky_settle(st, "r", &c, "q/c", false, T0);
  assert_int_equal(air__sticky_take(st, "r", &c, t, 3, T0), 2);
  /* A confirmation keeps the count too. */
  air__sticky_settle(st, "r", &c, "q/c", false, T0);
  assert_int_equal(air__sticky_take(st, "r", &c, t, 3, T0), 2);
  assert_int_equal(air__sticky_take(st, "r", &c, t, 3, T0), 0);
  assert_int_equal(air__sticky_take(st, "r", &c, t, 3, T0), 0);
  /* A new window counts from zero. */
  air__sticky_settle(st, "r", &c, "p/b", false, T0);
  assert_int_equal(air__sticky_take(st, "r", &c, t, 3, T0), 1);
  assert_int_equal(air__sticky_take(st, "r", &c, t, 3, T0), 1);
  assert_int_equal(air__sticky_take(st, "r", &c, t, 3, T0), 0);
}

static void sticky_by_target_name(air_state *st) {
  air__sticky_cfg c = sticky(60000, 100);
  air__target t[3];
  targets_of(t, 3, abc);
  air__sticky_settle(st, "r", &c, "q/c", false, T0);
  /* A reload reorders the targets: the name is followed. */
  char *reordered[] = {"p/a", "q/c", "p/b"};
  targets_of(t, 3, reordered);
  assert_int_equal(air__sticky_take(st, "r", &c, t, 3, T0 + 1), 1);
  /* A reload drops it: not sticky any more, and it stays so. */
  char *dropped[] = {"p/a", "p/b"};
  targets_of(t, 2, dropped);
  assert_int_equal(air__sticky_take(st, "r", &c, t, 2, T0 + 2), 0);
  targets_of(t, 3, reordered);
  assert_int_equal(air__sticky_take(st, "r", &c, t, 3, T0 + 3), 0);
}

/* ---- learned continuation styles (docs/design.md §3.5) ------------------- */

#define DAY_MS 86400000u

static void learned_style_expires(air_state *st) {
  assert_int_equal(air__state_style_get(st, "p/a", T0), AIR_CONT_NONE);
  air__state_style_learn(st, "p/a", AIR_CONT_INSTRUCT, T0);
  assert_int_equal(air__state_style_get(st, "p/a", T0 + 1), AIR_CONT_INSTRUCT);
  /* Per target; the breaker of the same target is untouched. */
  assert_int_equal(air__state_style_get(st, "p/b", T0 + 1), AIR_CONT_NONE);
  assert_int_equal(air_state_breaker(st, "p/a", T0 + 1), AIR_BREAKER_CLOSED);
  assert_int_equal(air__state_style_get(st, "p/a", T0 + DAY_MS - 1),
                   AIR_CONT_INSTRUCT);
  assert_int_equal(air__state_style_get(st, "p/a", T0 + DAY_MS), AIR_CONT_NONE);
  /* Learned again, it lives 24 h from then. */
  air__state_style_learn(st, "p/a", AIR_CONT_INSTRUCT, T0 + DAY_MS);
  assert_int_equal(air__state_style_get(st, "p/a", T0 + 2 * DAY_MS - 1),
                   AIR_CONT_INSTRUCT);
}

static void style_beside_breaker(air_state *st) {
  open_it(st, "q/c", T0);
  air__state_style_learn(st, "q/c", AIR_CONT_INSTRUCT, T0);
  assert_int_equal(air_state_breaker(st, "q/c", T0 + 1), AIR_BREAKER_OPEN);
  assert_int_equal(air__state_style_get(st, "q/c", T0 + 1), AIR_CONT_INSTRUCT);
  record(st, "q/c", AIR_REASON_NONE, 0, T0 + 2);
  assert_int_equal(air__state_style_get(st, "q/c", T0 + 3), AIR_CONT_INSTRUCT);
}

/* ---- the table ----------------------------------------------------------- */

typedef struct scenario {
  const char *name;
  void (*fn)(air_state *st);
} scenario;

#define S(f) \
  { #f, f }
static const scenario scenarios[] = {
    S(open_after_n_counting_failures),
    S(non_counting_reasons_ignored),
    S(success_resets_the_count),
    S(half_open_after_open_ms),
    S(exactly_one_probe_lease),
    S(lease_expiry_frees_it),
    S(probe_success_closes),
    S(probe_failure_reopens),
    S(probe_without_verdict_frees_the_lease),
    S(cooldown),
    S(quota_opens_for_quota_open_ms),
    S(disabled_breaker_admits_and_records_nothing),
    S(sticky_set_and_get),
    S(sticky_expires_after_ms),
    S(sticky_expires_by_requests),
    S(sticky_by_target_name),
    S(learned_style_expires),
    S(style_beside_breaker),
};
#undef S

#define N_BACKENDS (sizeof(backends) / sizeof(backends[0]))
#define N_SCENARIOS (sizeof(scenarios) / sizeof(scenarios[0]))

typedef struct tcase {
  const backend *b;
  const scenario *s;
  air_state *st;
  char name[128];
} tcase;

static int setup(void **state) {
  tcase *c = *state;
  c->st = NULL;
  current = c->b;
  return c->b->make(&c->st) == 0 && c->st != NULL ? 0 : -1;
}

static int teardown(void **state) {
  tcase *tc = *state;
  /* Every write answered, none failed: the store agreed with the mirror. */
  if (tc->b->shared) assert_int_equal(air__state_redis_sync(tc->st, 5000), 0);
  tcase *c = *state;
  air_state_free(c->st);
  c->st = NULL;
  return 0;
}

static void run_case(void **state) {
  tcase *c = *state;
  c->s->fn(c->st);
}

int main(void) {
  static tcase cases[N_BACKENDS * N_SCENARIOS];
  static struct CMUnitTest tests[N_BACKENDS * N_SCENARIOS];
  size_t n = 0;
  for (size_t b = 0; b < N_BACKENDS; b++) {
    for (size_t s = 0; s < N_SCENARIOS; s++, n++) {
      tcase *c = &cases[n];
      c->b = &backends[b];
      c->s = &scenarios[s];
      snprintf(c->name, sizeof(c->name), "%s/%s", c->b->name, c->s->name);
      tests[n] = (struct CMUnitTest){
          .name = c->name,
          .test_func = run_case,
          .setup_func = setup,
          .teardown_func = teardown,
          .initial_state = c,
      };
    }
  }
  if (!rf_start(&redis_srv)) {
    fprintf(stderr,
            "cannot start redis-server (scripts/deps.sh installs "
            "it)\n");
    return 1;
  }
  int rc = _cmocka_run_group_tests("state_conformance", tests, n, NULL, NULL);
  air_config_free(redis_cfg);
  rf_stop(&redis_srv);
  return rc;
}
