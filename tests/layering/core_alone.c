/*
 * src/core links alone (docs/design.md §1): this program is linked from core's
 * objects and libm only (CMakeLists.txt, layering_core_alone), no jansson,
 * libcurl, libuv, libfyaml or pthread; a core function that calls into
 * another layer leaves an undefined symbol and the link fails. It drives
 * runs to their end on a hand-built config, with no state and with an
 * in-test state backend (the interface of core/state.h), and exits 0 when
 * every decision is the expected one.
 */
#include <stdio.h>
#include <string.h>

#include "airetry.h"
#include "engine.h"
#include "policy.h"
#include "state.h"

#define CHECK(c)                                              \
  do {                                                        \
    if (!(c)) {                                               \
      fprintf(stderr, "core_alone.c:%d: %s\n", __LINE__, #c); \
      return 1;                                               \
    }                                                         \
  } while (0)

/* ---- an in-test backend: a few breaker records, never sticky ------------- */

typedef struct mini {
  const char *name[4];
  air__breaker_rec rec[4];
  uint64_t tokens;
} mini;

static air__breaker_rec *find(mini *m, const char *target) {
  for (size_t i = 0; i < 4; i++) {
    if (m->name[i] == NULL) m->name[i] = target;
    if (strcmp(m->name[i], target) == 0) return &m->rec[i];
  }
  return NULL;
}

static air__admit mini_try_probe(void *impl, const char *target,
                                 uint64_t lease_ms, uint64_t now_ms,
                                 uint64_t *reopen_ms, uint64_t *lease) {
  mini *m = impl;
  air__breaker_rec *r = find(m, target);
  if (r == NULL) return AIR__ADMIT_YES;
  air__admit a =
      air__breaker_admit(r, now_ms, lease_ms, m->tokens + 1, reopen_ms);
  if (a == AIR__ADMIT_PROBE) *lease = ++m->tokens;
  return a;
}

static void mini_record(void *impl, const char *target, const air__verdict *v,
                        uint64_t now_ms) {
  air__breaker_rec *r = find(impl, target);
  if (r != NULL) air__breaker_apply(r, v, now_ms);
}

static void mini_release(void *impl, const char *target, uint64_t lease) {
  air__breaker_rec *r = find(impl, target);
  if (r != NULL) air__breaker_release(r, lease);
}

static void mini_cool(void *impl, const char *target, uint64_t now_ms,
                      uint64_t cool_ms) {
  air__breaker_rec *r = find(impl, target);
  if (r != NULL) air__breaker_cool(r, now_ms, cool_ms);
}

static air_breaker_mode mini_mode(void *impl, const char *target,
                                  uint64_t now_ms) {
  return air__breaker_mode(find(impl, target), now_ms);
}

static int mini_sticky_get(void *impl, const char *route, uint64_t now_ms,
                           air__sticky_rec *out) {
  (void)impl, (void)route, (void)now_ms, (void)out;
  return 0;
}

static void mini_sticky_set(void *impl, const char *route, const char *target,
                            uint64_t now_ms) {
  (void)impl, (void)route, (void)target, (void)now_ms;
}

static const air__state_ops mini_ops = {
    .try_probe = mini_try_probe,
    .record = mini_record,
    .release = mini_release,
    .cool = mini_cool,
    .mode = mini_mode,
    .sticky_get = mini_sticky_get,
    .sticky_set = mini_sticky_set,
    .destroy = NULL, /* mini lives on the stack */
};

/* ---- a config by hand: route r = [p/a, p/b], server_error switches ------- */

static air__timeouts timeouts(void) {
  air__timeouts t = {.connect_ms = 5000,
                     .first_byte_ms = 15000,
                     .first_chunk_ms = 30000,
                     .chunk_ms = 30000,
                     .attempt_ms = 600000,
                     .total_ms = 900000};
  return t;
}

/* One run of r: p/a fails with a 500, the switch goes to p/b, which
 * answers. Returns 0 when every action is the expected one. */
static int one_run(const air_config *cfg, air_state *st, uint64_t now,
                   const char *first) {
  air_run *run = NULL;
  air_action act;
  CHECK(air_run_new(cfg, st, "r", NULL, now, &run, &act) == 0);
  CHECK(act.kind == AIR_ACT_ATTEMPT && strcmp(act.target, first) == 0);
  if (strcmp(first, "p/a") == 0) {
    air_failure f;
    memset(&f, 0, sizeof(f));
    f.status = 500;
    CHECK(air_run_fail(run, act.attempt_id, &f, now, 0, &act) == 0);
    CHECK(act.kind == AIR_ACT_ATTEMPT && strcmp(act.target, "p/b") == 0);
    CHECK(act.attempt == 2);
    CHECK(air_run_attempt(run, 0)->reason == AIR_REASON_SERVER_ERROR);
  }
  unsigned id = act.attempt_id;
  CHECK(air_run_ready_to_commit(run, id, now + 1, &act) == 0);
  CHECK(act.kind == AIR_ACT_COMMIT && act.attempt_id == id);
  CHECK(air_run_succeed(run, id, now + 5, &act) == 0);
  CHECK(act.kind == AIR_ACT_DONE && act.attempt_id == id);
  air_run_free(run);
  return 0;
}

int main(void) {
  char pname[] = "p", rname[] = "r", a[] = "p/a", b[] = "p/b";
  air__provider prov;
  memset(&prov, 0, sizeof(prov));
  prov.name = pname;
  prov.breaker = (air__breaker_cfg){
      .enabled = true, .failures = 1, .open_ms = 1000, .quota_open_ms = 5000};
  air__target targets[2];
  memset(targets, 0, sizeof(targets));
  targets[0].name = a;
  targets[0].model = a + 2;
  targets[1].name = b;
  targets[1].model = b + 2;
  targets[0].timeouts = targets[1].timeouts = timeouts();
  air__rule rule;
  memset(&rule, 0, sizeof(rule));
  rule.on_mask = 1u << AIR_REASON_SERVER_ERROR;
  rule.action = AIR__RULE_SWITCH;
  rule.max = AIR__UNLIMITED;
  air__route route;
  memset(&route, 0, sizeof(route));
  route.name = rname;
  route.targets = targets;
  route.n_targets = 2;
  route.policy.timeouts = timeouts();
  route.policy.budget.max_total_attempts = 3;
  for (size_t i = 0; i < AIR_REASON__COUNT; i++)
    route.policy.budget.per_reason[i] = AIR__UNLIMITED;
  route.policy.rules = &rule;
  route.policy.n_rules = 1;
  air_config cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.providers = &prov;
  cfg.n_providers = 1;
  cfg.routes = &route;
  cfg.n_routes = 1;
  cfg.defaults = route.policy;

  /* No state: no breaker, the same walk every time. */
  CHECK(one_run(&cfg, NULL, 1000, "p/a") == 0);
  CHECK(one_run(&cfg, NULL, 1001, "p/a") == 0);

  /* The in-test backend: p/a's failure opens it (failures: 1), so the next
   * run starts on p/b; after open_ms it is probed again. */
  mini m;
  memset(&m, 0, sizeof(m));
  air_state *st = NULL;
  CHECK(air__state_new(&mini_ops, &m, &st) == 0);
  CHECK(one_run(&cfg, st, 1000, "p/a") == 0);
  CHECK(air_state_breaker(st, "p/a", 1001) == AIR_BREAKER_OPEN);
  CHECK(one_run(&cfg, st, 1001, "p/b") == 0);
  CHECK(air_state_breaker(st, "p/a", 2000) == AIR_BREAKER_HALF_OPEN);
  CHECK(one_run(&cfg, st, 2000, "p/a") == 0);
  CHECK(air_state_breaker(st, "p/a", 2000) == AIR_BREAKER_OPEN);
  air_state_free(st);
  puts("core alone: ok");
  return 0;
}
