/*
 * The in-process state's records against caller-chosen names (state.h,
 * src/state/local.c): direct `provider/model` names can fill the record
 * table, yet a configured target's breaker still opens, an idle record of a
 * direct name is evicted to make room, and a configured target's record
 * never is.
 */
#include "helpers.h"

#include <stdio.h>
#include <stdlib.h>

#include "limits.h"
#include "policy.h"
#include "state.h"

#define DIRECT_NAMES 70000

static const char yaml[] =
    "providers:\n"
    "  - {name: p, api: openai, base_url: http://127.0.0.1:1/v1}\n"
    "routes:\n"
    "  - name: r\n"
    "    targets: [p/configured]\n";

static const char yaml_other[] =
    "providers:\n"
    "  - {name: p, api: openai, base_url: http://127.0.0.1:1/v1}\n"
    "routes:\n"
    "  - name: r\n"
    "    targets: [p/other]\n";

typedef struct fx {
  air_config *cfg;
  air_state *st;
} fx;

static void fx_start(fx *f) {
  f->cfg = test_config(yaml);
  assert_int_equal(air_state_new(f->cfg, &f->st, NULL), 0);
}

static void fx_end(fx *f) {
  air_state_free(f->st);
  air_config_free(f->cfg);
}

/* A failure on name under a breaker of threshold failures. */
static void fail_on(fx *f, const char *name, uint32_t failures,
                    uint64_t now_ms) {
  air__breaker_cfg b = {.enabled = true,
                        .failures = failures,
                        .open_ms = 3600000,
                        .quota_open_ms = 3600000};
  air__state_record(f->st, name, &b, AIR_REASON_SERVER_ERROR, 0, now_ms);
}

/* n distinct direct names, each with one failure pending (threshold 1000:
 * none opens), at now_ms. */
static void fill(fx *f, unsigned n, uint64_t now_ms) {
  char name[64];
  for (unsigned i = 0; i < n; i++) {
    snprintf(name, sizeof name, "p/direct-%u", i);
    fail_on(f, name, 1000, now_ms);
  }
}

static air_breaker_mode mode(fx *f, const char *name, uint64_t now_ms) {
  return air_state_breaker(f->st, name, now_ms);
}

static void configured_target_opens_after_a_flood(void **unused) {
  (void)unused;
  fx f;
  fx_start(&f);
  fill(&f, DIRECT_NAMES, 1000);
  fail_on(&f, "p/configured", 1, 2000);
  assert_int_equal(mode(&f, "p/configured", 2001), AIR_BREAKER_OPEN);
  fx_end(&f);
}

static void idle_record_is_evicted(void **unused) {
  (void)unused;
  fx f;
  fx_start(&f);
  fill(&f, DIRECT_NAMES, 1000);
  /* Past the idle time the flood's records make room for a new name. */
  uint64_t later = 1000 + AIR__STATE_IDLE_MS;
  fail_on(&f, "p/new", 1, later);
  assert_int_equal(mode(&f, "p/new", later + 1), AIR_BREAKER_OPEN);
  /* The idle one's pending failure was forgotten: 999 more do not open. */
  for (int i = 0; i < 999; i++) fail_on(&f, "p/direct-0", 1000, later + 2);
  assert_int_equal(mode(&f, "p/direct-0", later + 3), AIR_BREAKER_CLOSED);
  fx_end(&f);
}

static void open_breaker_is_not_evicted(void **unused) {
  (void)unused;
  fx f;
  fx_start(&f);
  fail_on(&f, "p/open", 1, 1000); /* open for an hour */
  fill(&f, 1000, 1000);
  uint64_t later = 1000 + AIR__STATE_IDLE_MS + 1;
  char name[64];
  for (unsigned i = 0; i < 2000; i++) {
    snprintf(name, sizeof name, "p/late-%u", i);
    fail_on(&f, name, 1000, later);
  }
  assert_int_equal(mode(&f, "p/open", later), AIR_BREAKER_OPEN);
  fx_end(&f);
}

static void configured_record_is_never_evicted(void **unused) {
  (void)unused;
  fx f;
  fx_start(&f);
  /* Two of three failures pending on the configured target. */
  fail_on(&f, "p/configured", 3, 1000);
  fail_on(&f, "p/configured", 3, 1000);
  fill(&f, DIRECT_NAMES, 1000);
  /* Long idle, and a churn of names that evicts every idle record. */
  uint64_t later = 1000 + 10 * AIR__STATE_IDLE_MS;
  char name[64];
  for (unsigned i = 0; i < DIRECT_NAMES; i++) {
    snprintf(name, sizeof name, "p/late-%u", i);
    fail_on(&f, name, 1000, later);
  }
  fail_on(&f, "p/configured", 3, later);
  assert_int_equal(mode(&f, "p/configured", later + 1), AIR_BREAKER_OPEN);
  fx_end(&f);
}

static void reload_moves_the_pin(void **unused) {
  (void)unused;
  fx f;
  fx_start(&f);
  fail_on(&f, "p/configured", 3, 1000);
  fail_on(&f, "p/other", 3, 1000);
  fail_on(&f, "p/other", 3, 1000);
  /* p/other becomes the configured one, p/configured a direct name. */
  air_config *other = test_config(yaml_other);
  air__state_configure(f.st, other);
  uint64_t later = 1000 + 2 * AIR__STATE_IDLE_MS;
  char name[64];
  for (unsigned i = 0; i < 100; i++) {
    snprintf(name, sizeof name, "p/late-%u", i);
    fail_on(&f, name, 1000, later);
  }
  fail_on(&f, "p/other", 3, later);
  assert_int_equal(mode(&f, "p/other", later + 1), AIR_BREAKER_OPEN);
  /* The unpinned one was idle: its pending failure is gone. */
  fail_on(&f, "p/configured", 3, later);
  fail_on(&f, "p/configured", 3, later);
  assert_int_equal(mode(&f, "p/configured", later + 1), AIR_BREAKER_CLOSED);
  air_config_free(other);
  fx_end(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(configured_target_opens_after_a_flood),
      cmocka_unit_test(idle_record_is_evicted),
      cmocka_unit_test(open_breaker_is_not_evicted),
      cmocka_unit_test(configured_record_is_never_evicted),
      cmocka_unit_test(reload_moves_the_pin),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
