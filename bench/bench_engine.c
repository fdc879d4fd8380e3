/*
 * One engine decision: a failed attempt is classified (from status and body
 * type), the rules are walked, a backoff is drawn, and the next attempt is
 * started (air_run_fail + air_run_wait_done). Prints the median and p99 over
 * batches, in ns per decision.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "airetry.h"

static const char cfg_text[] =
    "providers:\n"
    "  - {name: p, api: openai, base_url: http://127.0.0.1:1/v1}\n"
    "routes:\n"
    "  - name: r\n"
    "    targets: [p/a, p/b]\n"
    "    budget: {max_total_attempts: unlimited}\n"
    "    rules:\n"
    "      - {on: [rate_limit], action: retry, max: unlimited}\n"
    "      - {on: [overloaded, server_error, network, malformed], action: "
    "retry, max: unlimited,\n"
    "         backoff: {base_ms: 250, factor: 2, max_ms: 4000, jitter: full}}\n"
    "      - {on: [timeout.first_chunk, refusal], action: switch}\n";

static uint64_t ns_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static uint64_t splitmix(void *d) {
  uint64_t *s = d;
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

#define BATCH 1000
#define ROUNDS 400

int main(void) {
  air_config *cfg = NULL;
  if (air_config_parse("bench", cfg_text, sizeof(cfg_text) - 1, NULL, NULL,
                       &cfg) != 0) {
    fprintf(stderr, "bench_engine: config did not load\n");
    return 1;
  }
  air_state *st = NULL;
  air_state_new(cfg, &st, NULL);
  uint64_t seed = 1;
  air_rng rng = {splitmix, &seed};
  uint64_t per[ROUNDS];
  uint64_t now = 1;
  air_failure f;
  memset(&f, 0, sizeof(f));
  f.status = 503;
  f.type = "overloaded_error";
  f.message = "Overloaded";
  for (int r = 0; r < ROUNDS; r++) {
    air_run *run = NULL;
    air_action act;
    if (air_run_new(cfg, st, "r", &rng, now, &run, &act) != 0) return 1;
    uint64_t t0 = ns_now();
    for (int i = 0; i < BATCH; i++) {
      air_run_fail(run, act.attempt_id, &f, now, 0, &act);
      air_run_wait_done(run, act.attempt_id, now, &act);
    }
    per[r] = (ns_now() - t0) / BATCH;
    if (act.kind != AIR_ACT_ATTEMPT) {
      fprintf(stderr, "bench_engine: unexpected action %d\n", act.kind);
      return 1;
    }
    air_run_free(run);
  }
  qsort(per, ROUNDS, sizeof(per[0]), cmp_u64);
  printf(
      "engine decision (classify + rule walk + backoff + next attempt): "
      "median %llu ns, p99 %llu ns  [%d rounds x %d decisions]\n",
      (unsigned long long)per[ROUNDS / 2],
      (unsigned long long)per[ROUNDS * 99 / 100], ROUNDS, BATCH);
  air_state_free(st);
  air_config_free(cfg);
  return 0;
}
