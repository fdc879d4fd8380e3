/*
 * The generic driver: any function becomes a policy-driven sequence of
 * attempts. Here the "upstream" is a function that is overloaded twice, then
 * answers; the default rules retry once on the same target, then switch.
 *
 *   cc call.c $(pkg-config --cflags --libs airetry)
 */
#include <stdio.h>

#include <airetry.h>

static const char config[] =
    "providers:\n"
    "  - {name: main, api: openai, base_url: http://127.0.0.1:9/v1}\n"
    "  - {name: backup, api: anthropic, base_url: http://127.0.0.1:9}\n"
    "routes:\n"
    "  - {name: smart, targets: [main/gpt-4o, backup/claude-sonnet-4-5]}\n";

/* One attempt: in real code, an HTTP call to info->target by info->deadline_ms.
 */
static int attempt(void *data, const air_attempt_info *info, air_failure *f) {
  int *calls = data;
  printf("attempt %u -> %s (timeout %llu ms)\n", info->attempt, info->target,
         (unsigned long long)info->timeout_ms);
  if (++*calls <= 2) {
    f->status = 529;
    f->type = "overloaded_error";
    f->message = "Overloaded";
    return 1;
  }
  return 0;
}

static void on_retry(void *data, const air_attempt_info *next, void **options) {
  (void)data;
  (void)options;
  printf("  retrying: next is attempt %u on %s\n", next->attempt, next->target);
}

int main(void) {
  air_config *cfg = NULL;
  if (air_config_parse("inline", config, sizeof(config) - 1, NULL, NULL,
                       &cfg) != 0)
    return 1;
  air_state *state = NULL;
  air_state_new(cfg, &state, NULL);
  int calls = 0;
  air_observers obs = AIR_OBSERVERS_INIT;
  obs.on_retry = on_retry;
  air_call_opts opts = AIR_CALL_OPTS_INIT;
  opts.fn = attempt;
  opts.data = &calls;
  opts.observers = &obs;
  air_attempt *log = NULL;
  size_t n = 0;
  air_error err;
  int rc = air_call(cfg, state, "smart", &opts, &log, &n, &err);
  printf("result: %s after %zu attempts\n", rc == 0 ? "ok" : err.message, n);
  for (size_t i = 0; i < n; i++)
    printf("  %u %-28s %-12s status=%d wait=%llu ms\n", log[i].n, log[i].target,
           air_reason_name(log[i].reason), log[i].status,
           (unsigned long long)log[i].wait_ms);
  air_attempt_log_free(log, n);
  air_state_free(state);
  air_config_free(cfg);
  return rc == 0 ? 0 : 1;
}
