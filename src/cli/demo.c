/*
 * `airetry demo`: the policy engine at work with no keys and no network. A
 * scripted, flaky primary and a healthy fallback stand in for the upstreams;
 * the generic driver (air_call) runs each request on the real clock, and the
 * observers print a live trace of every attempt, wait and failover.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airetry.h"
#include "cli.h"

static const char demo_config[] =
    "providers:\n"
    "  - {name: primary, api: openai, base_url: http://127.0.0.1:9/v1,\n"
    "     breaker: {failures: 5}}\n"
    "  - {name: fallback, api: anthropic, base_url: http://127.0.0.1:9}\n"
    "routes:\n"
    "  - name: smart\n"
    "    targets: [primary/gpt-4o, fallback/claude-sonnet-4-5]\n"
    "    timeouts: {first_chunk_ms: 800, total_ms: 20000}\n"
    "    refusal: {phrases: [\"I'm sorry, but I cannot assist\"]}\n";

/* What the simulated primary does on one attempt. */
typedef enum behaviour {
  OK,
  RATE_LIMIT_1S,   /* 429, retry-after: 1 */
  RATE_LIMIT_30S,  /* 429, retry-after: 30 (too long to wait) */
  OVERLOADED,      /* 529 overloaded_error */
  SILENT,          /* headers, then no content until first_chunk_ms */
  REFUSAL,         /* leading text matches a refusal phrase */
} behaviour;

typedef struct scenario {
  const char *title;
  behaviour primary[4];  /* per attempt on the primary; OK after the list */
} scenario;

static const scenario scenarios[] = {
    {"primary rate-limits once (Retry-After: 1)", {RATE_LIMIT_1S}},
    {"primary is overloaded twice", {OVERLOADED, OVERLOADED}},
    {"primary goes silent (no first content)", {SILENT}},
    {"primary answers with a canned refusal", {REFUSAL}},
    {"primary asks for 30 s (Retry-After: 30)", {RATE_LIMIT_30S}},
    {"next request while primary cools down", {OK}},
};

typedef struct demo {
  const scenario *sc;
  unsigned primary_calls;
  air_header hdr;
  unsigned attempts;
  unsigned failovers;
  const char *last_target;
  char answered_by[64];
} demo;

static void pause_ms(unsigned ms) {
  air_cancel_sleep(NULL, ms);
}

static int attempt(void *data, const air_attempt_info *info, air_failure *f) {
  demo *d = data;
  d->attempts++;
  if (d->last_target != NULL && strcmp(d->last_target, info->target) != 0)
    d->failovers++;
  d->last_target = info->target;
  if (strncmp(info->target, "primary/", 8) != 0) {
    pause_ms(60);  /* the fallback streams its answer */
    return 0;
  }
  unsigned i = d->primary_calls++;
  behaviour b = i < 4 ? d->sc->primary[i] : OK;
  switch (b) {
    case OK:
      pause_ms(40);
      return 0;
    case RATE_LIMIT_1S:
    case RATE_LIMIT_30S:
      pause_ms(15);
      d->hdr.name = "retry-after";
      d->hdr.name_len = 11;
      d->hdr.value = b == RATE_LIMIT_1S ? "1" : "30";
      d->hdr.value_len = strlen(d->hdr.value);
      f->status = 429;
      f->type = "rate_limit_error";
      f->message = "Rate limit reached for requests";
      f->headers = &d->hdr;
      f->n_headers = 1;
      return 1;
    case OVERLOADED:
      pause_ms(20);
      f->status = 529;
      f->type = "overloaded_error";
      f->message = "Overloaded";
      return 1;
    case SILENT:
      pause_ms(800);
      f->reason = AIR_REASON_TIMEOUT_FIRST_CHUNK;
      f->message = "no content within first_chunk_ms (800 ms)";
      return 1;
    case REFUSAL:
      pause_ms(30);
      f->reason = AIR_REASON_REFUSAL;
      f->status = 200;
      f->message = "leading text matched \"I'm sorry, but I cannot assist\"";
      return 1;
  }
  return 0;
}

static void on_error(void *data, const air_attempt *a) {
  (void)data;
  char status[16] = "";
  if (a->status) snprintf(status, sizeof(status), "%d", a->status);
  printf("    attempt %u  %-28s %-20s %-4s %5llu ms", a->n, a->target,
         air_reason_name(a->reason), status, (unsigned long long)a->ms);
  if (a->wait_ms > 0)
    printf("  -> wait %llu ms%s\n", (unsigned long long)a->wait_ms,
           a->hint ? " (Retry-After)" : " (backoff)");
  else
    printf("\n");
  fflush(stdout);
}

static void on_retry(void *data, const air_attempt_info *next, void **options) {
  demo *d = data;
  (void)options;
  if (d->last_target != NULL && strcmp(d->last_target, next->target) != 0)
    printf("    -> switch to %s\n", next->target);
  fflush(stdout);
}

static void on_settled(void *data, int rc, const air_attempt *log, size_t n) {
  demo *d = data;
  if (rc == 0 && n > 0) {
    const air_attempt *a = &log[n - 1];
    printf("    attempt %u  %-28s %-20s %-4s %5llu ms\n", a->n, a->target,
           "answered", "200", (unsigned long long)a->ms);
    snprintf(d->answered_by, sizeof(d->answered_by), "%s", a->target);
  }
}

int air__cmd_demo(int argc, char **argv) {
  (void)argv;
  if (argc > 1) {
    fprintf(stderr, "usage: airetry demo\n");
    return AIR_EXIT_USAGE;
  }
  air_config *cfg = NULL;
  if (air_config_parse("demo", demo_config, sizeof(demo_config) - 1, NULL, NULL,
                       &cfg) != 0) {
    fprintf(stderr, "airetry demo: built-in config did not load\n");
    return AIR_EXIT_FAIL;
  }
  air_state *st = NULL;
  if (air_state_new(cfg, &st) != 0) {
    air_config_free(cfg);
    return AIR_EXIT_FAIL;
  }
  const air_clock *clk = air_clock_system();
  printf("airetry demo: route \"smart\" = primary/gpt-4o -> fallback/claude-sonnet-4-5\n"
         "(simulated upstreams, real clock, default retry rules)\n\n");
  unsigned answered = 0, attempts = 0, failovers = 0;
  size_t n_sc = sizeof(scenarios) / sizeof(scenarios[0]);
  uint64_t t_all = clk->now_ms(NULL);
  for (size_t i = 0; i < n_sc; i++) {
    demo d;
    memset(&d, 0, sizeof(d));
    d.sc = &scenarios[i];
    printf("request %zu: %s\n", i + 1, d.sc->title);
    fflush(stdout);
    air_call_opts o;
    memset(&o, 0, sizeof(o));
    o.fn = attempt;
    o.data = &d;
    o.on_error = on_error;
    o.on_retry = on_retry;
    o.on_settled = on_settled;
    uint64_t t0 = clk->now_ms(NULL);
    int rc = air_call(cfg, st, "smart", &o, NULL, NULL);
    uint64_t took = clk->now_ms(NULL) - t0;
    attempts += d.attempts;
    failovers += d.failovers;
    if (rc == 0) {
      answered++;
      printf("    = answered by %s after %u attempt%s in %llu ms\n\n",
             d.answered_by, d.attempts, d.attempts == 1 ? "" : "s",
             (unsigned long long)took);
    } else {
      printf("    = FAILED: %s\n\n", air_strerror(rc));
    }
  }
  printf("summary: %u/%zu requests answered, %u upstream attempts, %u failovers, "
         "%llu ms\n",
         answered, n_sc, attempts, failovers,
         (unsigned long long)(clk->now_ms(NULL) - t_all));
  air_state_free(st);
  air_config_free(cfg);
  return answered == n_sc ? AIR_EXIT_OK : AIR_EXIT_FAIL;
}
