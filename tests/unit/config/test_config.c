/*
 * Tests of the config loader (src/config/config.c, config_table.c,
 * config_dump.c): built-in defaults, resolution and merging, every
 * diagnostic with its position, limits, the dump round trip, and that the
 * example config and docs/config.md agree with the option table.
 *
 * `test_config --print-reference` prints the generated Markdown reference
 * that docs/config.md embeds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "airetry.h"
#include "policy.h"
#include "config_table.h"
#include "limits.h"
#include "tl_files.h"

#ifndef AIR_SOURCE_DIR
#define AIR_SOURCE_DIR "."
#endif

#define MAX_SEEN 128

typedef struct seen_diag {
  air_severity sev;
  int line, col;
  char msg[512];
} seen_diag;

typedef struct diags {
  seen_diag d[MAX_SEEN];
  size_t n, errors, warnings;
} diags;

static void collect(void *data, const air_diag *d) {
  diags *ds = data;
  if (d->severity == AIR_DIAG_ERROR)
    ds->errors++;
  else
    ds->warnings++;
  if (ds->n == MAX_SEEN) return;
  seen_diag *s = &ds->d[ds->n++];
  s->sev = d->severity;
  s->line = d->line;
  s->col = d->column;
  snprintf(s->msg, sizeof s->msg, "%s", d->message);
}

static int parse(const char *text, diags *ds, air_config **out) {
  memset(ds, 0, sizeof *ds);
  return air_config_parse("test.yaml", text, strlen(text), collect, ds, out);
}

/* Parses text that must load without any diagnostic. */
static air_config *good(const char *text) {
  diags ds;
  air_config *cfg = NULL;
  int rc = parse(text, &ds, &cfg);
  for (size_t i = 0; i < ds.n; i++)
    print_message("unexpected %d:%d: %s\n", ds.d[i].line, ds.d[i].col,
                  ds.d[i].msg);
  assert_int_equal(rc, 0);
  assert_int_equal(ds.n, 0);
  assert_non_null(cfg);
  return cfg;
}

static bool has_diag(const diags *ds, air_severity sev, int line, int col,
                     const char *sub) {
  for (size_t i = 0; i < ds->n; i++)
    if (ds->d[i].sev == sev && ds->d[i].line == line && ds->d[i].col == col &&
        strstr(ds->d[i].msg, sub))
      return true;
  return false;
}

/* Asserts a diagnostic; on failure prints every diagnostic received. */
#define expect_diag(ds, sev, L, C, sub)                                     \
  do {                                                                      \
    if (!has_diag((ds), (sev), (L), (C), (sub))) {                          \
      for (size_t i_ = 0; i_ < (ds)->n; i_++)                               \
        print_message("got %d:%d: %s\n", (ds)->d[i_].line, (ds)->d[i_].col, \
                      (ds)->d[i_].msg);                                     \
      fail_msg("missing %d:%d: %s", (L), (C), (sub));                       \
    }                                                                       \
  } while (0)

static char *dump_text(const air_config *cfg) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  assert_non_null(f);
  assert_int_equal(air_config_dump(cfg, f), 0);
  fclose(f);
  return buf;
}

#define BIT(r) (1u << (r))

/* ---- built-in defaults (docs/design.md §3)
 * --------------------------------------
 */

static void builtin_defaults_are_design_3(void **state) {
  (void)state;
  air_config *cfg = good("");
  const air__policy *p = &cfg->defaults;

  assert_int_equal(p->n_rules, 4);
  const air__rule *r = p->rules;
  assert_int_equal(r[0].action, AIR__RULE_RETRY);
  assert_int_equal(r[0].on_mask, BIT(AIR_REASON_RATE_LIMIT));
  assert_int_equal(r[0].max, 2);
  assert_int_equal(r[0].backoff.base_ms, 500);
  assert_true(r[0].backoff.factor == 2.0);
  assert_int_equal(r[0].backoff.max_ms, 8000);
  assert_int_equal(r[0].backoff.jitter, AIR__JITTER_FULL);
  assert_int_equal(r[0].retry_after_max_ms, 10000);

  assert_int_equal(r[1].action, AIR__RULE_RETRY);
  assert_int_equal(r[1].on_mask,
                   BIT(AIR_REASON_OVERLOADED) | BIT(AIR_REASON_SERVER_ERROR) |
                       BIT(AIR_REASON_NETWORK) | BIT(AIR_REASON_MALFORMED));
  assert_int_equal(r[1].max, 1);
  assert_int_equal(r[1].backoff.base_ms, 250);
  assert_true(r[1].backoff.factor == 2.0);
  assert_int_equal(r[1].backoff.max_ms, 4000);
  assert_int_equal(r[1].backoff.jitter, AIR__JITTER_FULL);
  assert_int_equal(r[1].retry_after_max_ms, 10000);

  assert_int_equal(r[2].action, AIR__RULE_SWITCH);
  assert_int_equal(
      r[2].on_mask,
      BIT(AIR_REASON_RATE_LIMIT) | BIT(AIR_REASON_OVERLOADED) |
          BIT(AIR_REASON_SERVER_ERROR) | BIT(AIR_REASON_NETWORK) |
          BIT(AIR_REASON_MALFORMED) | BIT(AIR_REASON_TIMEOUT_CONNECT) |
          BIT(AIR_REASON_TIMEOUT_FIRST_BYTE) |
          BIT(AIR_REASON_TIMEOUT_FIRST_CHUNK) | BIT(AIR_REASON_TIMEOUT_CHUNK) |
          BIT(AIR_REASON_TIMEOUT_ATTEMPT) | BIT(AIR_REASON_CONTEXT_OVERFLOW) |
          BIT(AIR_REASON_AUTH) | BIT(AIR_REASON_QUOTA) |
          BIT(AIR_REASON_NOT_FOUND) | BIT(AIR_REASON_REFUSAL));
  assert_int_equal(r[2].max, AIR__UNLIMITED);
  assert_null(r[2].to);

  assert_int_equal(r[3].action, AIR__RULE_FAIL);
  assert_int_equal(r[3].on_mask, BIT(AIR_REASON_CONTENT_FILTER) |
                                     BIT(AIR_REASON_BAD_REQUEST) |
                                     BIT(AIR_REASON_LENGTH));
  assert_int_equal(r[3].max, AIR__UNLIMITED);
  for (size_t i = 0; i < 4; i++) {
    assert_int_equal(r[i].n_status, 0);
    assert_null(r[i].message);
    assert_null(r[i].override_json);
  }

  assert_int_equal(p->budget.max_total_attempts, 6);
  for (int i = 0; i < AIR_REASON__COUNT; i++)
    assert_int_equal(p->budget.per_reason[i], AIR__UNLIMITED);
  assert_int_equal(p->timeouts.connect_ms, 5000);
  assert_int_equal(p->timeouts.first_byte_ms, 15000);
  assert_int_equal(p->timeouts.first_chunk_ms, 30000);
  assert_int_equal(p->timeouts.chunk_ms, 30000);
  assert_int_equal(p->timeouts.attempt_ms, 600000);
  assert_int_equal(p->timeouts.total_ms, 900000);
  assert_false(p->sticky.enabled);
  assert_int_equal(p->sticky.after_ms, 0);
  assert_int_equal(p->sticky.requests, 0);
  assert_int_equal(p->commit, AIR__COMMIT_FIRST_CONTENT);
  assert_int_equal(p->max_malformed, 3);
  assert_int_equal(p->malformed, AIR__MALFORMED_SKIP);
  assert_int_equal(p->n_phrases, 0);

  assert_true(cfg->breaker_defaults.enabled);
  assert_int_equal(cfg->breaker_defaults.failures, 3);
  assert_int_equal(cfg->breaker_defaults.open_ms, 10000);
  assert_int_equal(cfg->breaker_defaults.quota_open_ms, 300000);

  assert_string_equal(air_config_listen(cfg), "127.0.0.1:8080");
  assert_null(cfg->client_keys_env);
  assert_null(cfg->redis.url);
  assert_null(cfg->redis.resolved_url);
  assert_string_equal(cfg->redis.prefix, "airetry:");
  assert_int_equal(cfg->redis.connect_timeout_ms, 200);
  assert_int_equal(cfg->redis.command_timeout_ms, 200);
  assert_int_equal(cfg->n_forward_headers, 0);
  assert_false(cfg->drop_params);
  assert_int_equal(cfg->default_max_tokens, 4096);
  assert_int_equal(cfg->limits.max_body_bytes, 33554432);
  assert_int_equal(cfg->limits.max_header_bytes, 65536);
  assert_int_equal(cfg->limits.max_connections, 10000);
  assert_int_equal(cfg->limits.idle_timeout_ms, 75000);
  assert_int_equal(cfg->limits.request_timeout_ms, 30000);
  assert_int_equal(cfg->limits.max_inflight_body_bytes, 268435456);
  assert_int_equal(cfg->limits.max_response_bytes, 64u << 20);
  assert_int_equal(cfg->n_providers, 0);
  assert_int_equal(cfg->n_routes, 0);
  air_config_free(cfg);
}

/* A route that sets nothing gets the built-ins, deep-copied. */
static void route_inherits_builtins(void **state) {
  (void)state;
  air_config *cfg = good(
      "providers: [{name: p, api: openai}]\n"
      "routes: [{name: r, targets: [p/m]}]\n");
  const air__route *r = air__config_route(cfg, "r", 1);
  assert_non_null(r);
  assert_int_equal(r->policy.n_rules, 4);
  assert_ptr_not_equal(r->policy.rules, cfg->defaults.rules);
  assert_int_equal(r->policy.rules[0].max, 2);
  assert_int_equal(r->policy.budget.max_total_attempts, 6);
  assert_int_equal(r->targets[0].timeouts.first_chunk_ms, 30000);
  air_config_free(cfg);
}

/* ---- resolution ------------------------------------------------------------
 */

static void route_timeouts_merge_key_by_key(void **state) {
  (void)state;
  air_config *cfg = good(
      "providers: [{name: p, api: openai}]\n"
      "defaults:\n"
      "  timeouts: {connect_ms: 1000, total_ms: 20000}\n"
      "routes:\n"
      "  - name: r\n"
      "    targets: [p/m]\n"
      "    timeouts: {first_chunk_ms: 8000, total_ms: 40000}\n");
  const air__route *r = air__config_route(cfg, "r", 1);
  assert_int_equal(r->policy.timeouts.connect_ms, 1000);     /* defaults: */
  assert_int_equal(r->policy.timeouts.first_byte_ms, 15000); /* built-in */
  assert_int_equal(r->policy.timeouts.first_chunk_ms, 8000); /* route */
  assert_int_equal(r->policy.timeouts.chunk_ms, 30000);
  assert_int_equal(r->policy.timeouts.attempt_ms, 600000);
  assert_int_equal(r->policy.timeouts.total_ms, 40000); /* route wins */
  assert_int_equal(cfg->defaults.timeouts.first_chunk_ms, 30000);
  assert_int_equal(cfg->defaults.timeouts.total_ms, 20000);
  air_config_free(cfg);
}

static void route_rules_replace_defaults(void **state) {
  (void)state;
  air_config *cfg = good(
      "providers: [{name: p, api: openai}, {name: q, api: anthropic}]\n"
      "routes:\n"
      "  - name: r\n"
      "    targets: [p/m, q/n]\n"
      "    rules:\n"
      "      - {on: server_error, action: retry, backoff: {base_ms: 100}}\n"
      "      - {status: [429, \"5xx\"], message: Slow Down, action: switch,\n"
      "         to: q/n, override: {max_tokens: 8192, top_k: [1, 2.5]}}\n"
      "      - {on: [length], action: fail, max: 0}\n");
  const air__route *r = air__config_route(cfg, "r", 1);
  assert_int_equal(r->policy.n_rules, 3);
  const air__rule *x = r->policy.rules;
  assert_int_equal(x[0].on_mask, BIT(AIR_REASON_SERVER_ERROR));
  assert_int_equal(x[0].max, 1); /* retry default */
  assert_int_equal(x[0].backoff.base_ms, 100);
  assert_true(x[0].backoff.factor == 2.0); /* rest of the default backoff */
  assert_int_equal(x[0].backoff.max_ms, 8000);
  assert_int_equal(x[0].backoff.jitter, AIR__JITTER_FULL);
  assert_int_equal(x[0].retry_after_max_ms, 10000);
  assert_int_equal(x[1].on_mask, 0);
  assert_int_equal(x[1].n_status, 2);
  assert_int_equal(x[1].status[0].lo, 429);
  assert_int_equal(x[1].status[0].hi, 429);
  assert_int_equal(x[1].status[1].lo, 500);
  assert_int_equal(x[1].status[1].hi, 599);
  assert_string_equal(x[1].message, "Slow Down");
  assert_int_equal(x[1].action, AIR__RULE_SWITCH);
  assert_int_equal(x[1].max, AIR__UNLIMITED);
  assert_string_equal(x[1].to, "q/n");
  assert_string_equal(x[1].override_json,
                      "{\"max_tokens\":8192,\"top_k\":[1,2.5]}");
  assert_int_equal(x[2].max, 0);
  assert_int_equal(x[2].action, AIR__RULE_FAIL);
  /* The defaults keep the built-ins. */
  assert_int_equal(cfg->defaults.n_rules, 4);
  air_config_free(cfg);
}

static void defaults_section_merges(void **state) {
  (void)state;
  air_config *cfg = good(
      "providers:\n"
      "  - {name: p, api: openai}\n"
      "  - {name: q, api: anthropic, breaker: {failures: 7}}\n"
      "defaults:\n"
      "  breaker: {open_ms: 2000}\n"
      "  budget: {max_total_attempts: unlimited, per_reason: {length: 3}}\n"
      "  sticky: {requests: 10}\n"
      "  refusal: {phrases: [\"I cannot\", \"I won't\"]}\n"
      "  commit: complete\n"
      "  max_malformed: 0\n"
      "  malformed: fail\n"
      "  rules: [{on: quota, action: fail}]\n"
      "routes:\n"
      "  - name: a\n"
      "    targets: [p/m]\n"
      "    budget: {per_reason: {quota: 1}}\n"
      "    refusal: {phrases: [\"Sorry\"]}\n"
      "    sticky: {after_ms: 5000}\n"
      "  - name: b\n"
      "    targets: [q/n]\n"
      "    sticky: {enabled: false}\n");
  const air__route *a = air__config_route(cfg, "a", 1);
  const air__route *b = air__config_route(cfg, "b", 1);
  assert_non_null(a);
  assert_non_null(b);
  /* defaults: over the built-ins */
  assert_int_equal(cfg->defaults.budget.max_total_attempts, AIR__UNLIMITED);
  assert_int_equal(cfg->defaults.n_rules, 1);
  /* maps merge key by key through all three layers */
  assert_int_equal(a->policy.budget.max_total_attempts, AIR__UNLIMITED);
  assert_int_equal(a->policy.budget.per_reason[AIR_REASON_LENGTH], 3);
  assert_int_equal(a->policy.budget.per_reason[AIR_REASON_QUOTA], 1);
  assert_int_equal(a->policy.budget.per_reason[AIR_REASON_AUTH],
                   AIR__UNLIMITED);
  assert_true(a->policy.sticky.enabled);
  assert_int_equal(a->policy.sticky.requests, 10);
  assert_int_equal(a->policy.sticky.after_ms, 5000);
  assert_false(b->policy.sticky.enabled);
  /* lists replace */
  assert_int_equal(a->policy.n_phrases, 1);
  assert_string_equal(a->policy.phrases[0], "Sorry");
  assert_int_equal(b->policy.n_phrases, 2);
  assert_string_equal(b->policy.phrases[1], "I won't");
  assert_int_equal(b->policy.n_rules, 1);
  assert_int_equal(b->policy.rules[0].on_mask, BIT(AIR_REASON_QUOTA));
  assert_int_equal(a->policy.commit, AIR__COMMIT_COMPLETE);
  assert_int_equal(a->policy.max_malformed, 0);
  assert_int_equal(a->policy.malformed, AIR__MALFORMED_FAIL);
  /* breaker: built-ins <- defaults.breaker <- providers[].breaker */
  size_t qi = 99;
  const air__provider *p = air__config_provider(cfg, "p", 1, NULL);
  const air__provider *q = air__config_provider(cfg, "q", 1, &qi);
  assert_int_equal(qi, 1);
  assert_int_equal(p->breaker.failures, 3);
  assert_int_equal(p->breaker.open_ms, 2000);
  assert_int_equal(q->breaker.failures, 7);
  assert_int_equal(q->breaker.open_ms, 2000);
  assert_int_equal(q->breaker.quota_open_ms, 300000);
  assert_true(q->breaker.enabled);
  assert_null(air__config_provider(cfg, "pq", 2, NULL));
  assert_null(air__config_route(cfg, "ab", 2));
  air_config_free(cfg);
}

static void target_map_form(void **state) {
  (void)state;
  air_config *cfg = good(
      "providers: [{name: p, api: openai, base_url: "
      "\"http://127.0.0.1:9/v1\"},\n"
      "            {name: q, api: anthropic}]\n"
      "routes:\n"
      "  - name: r\n"
      "    timeouts: {first_chunk_ms: 8000, chunk_ms: 9000}\n"
      "    targets:\n"
      "      - p/meta/llama-3\n"
      "      - target: q/claude\n"
      "        timeouts: {first_chunk_ms: 60000}\n"
      "        override: {max_tokens: 8192, thinking: {type: enabled},\n"
      "                   stop: [\"a\", 'b'], n: null, t: 0.7, s: \"42\"}\n");
  const air__route *r = air__config_route(cfg, "r", 1);
  assert_int_equal(r->n_targets, 2);
  const air__target *t0 = &r->targets[0], *t1 = &r->targets[1];
  assert_string_equal(t0->name, "p/meta/llama-3");
  assert_string_equal(t0->model, "meta/llama-3");
  assert_int_equal(t0->provider, 0);
  assert_int_equal(t0->timeouts.first_chunk_ms, 8000);
  assert_null(t0->override_json);
  assert_string_equal(t1->name, "q/claude");
  assert_string_equal(t1->model, "claude");
  assert_int_equal(t1->provider, 1);
  assert_int_equal(t1->timeouts.first_chunk_ms, 60000); /* target wins */
  assert_int_equal(t1->timeouts.chunk_ms, 9000);        /* route's */
  assert_int_equal(t1->timeouts.connect_ms, 5000);      /* built-in */
  assert_string_equal(
      t1->override_json,
      "{\"max_tokens\":8192,\"thinking\":{\"type\":\"enabled\"},"
      "\"stop\":[\"a\",\"b\"],\"n\":null,\"t\":0.7,\"s\":\"42\"}");
  assert_string_equal(cfg->providers[0].base_url, "http://127.0.0.1:9/v1");
  assert_string_equal(cfg->providers[1].base_url, "https://api.anthropic.com");
  air_config_free(cfg);
}

static void misc_values(void **state) {
  (void)state;
  air_config *cfg = good(
      "listen: \"[::1]:9000\"\n"
      "state: {redis: {url: \"redis://127.0.0.1:6379\", prefix: \"x:\"}}\n"
      "forward_headers: [Anthropic-Beta, openai-project]\n"
      "drop_params: true\n"
      "default_max_tokens: 1024\n"
      "limits: {max_body_bytes: 2048, request_timeout_ms: 5,\n"
      "         max_inflight_body_bytes: 1048576}\n"
      "x-anchors:\n"
      "  targets: &t [p/a, p/b]\n"
      "providers:\n"
      "  - name: p\n"
      "    api: openai\n"
      "    headers: {X-Team: infra, OpenAI-Beta: \"assistants=v2\"}\n"
      "routes:\n"
      "  - {name: r, targets: *t}\n"
      "  - {name: s, targets: *t, rules: [{on: rate_limit, action: retry,\n"
      "     max: unlimited, retry_after: {max_ms: 0}}]}\n");
  assert_string_equal(air_config_listen(cfg), "[::1]:9000");
  assert_string_equal(cfg->redis.url, "redis://127.0.0.1:6379");
  assert_string_equal(cfg->redis.resolved_url, "redis://127.0.0.1:6379");
  assert_string_equal(cfg->redis.prefix, "x:");
  assert_int_equal(cfg->n_forward_headers, 2);
  assert_string_equal(cfg->forward_headers[0], "anthropic-beta");
  assert_true(cfg->drop_params);
  assert_int_equal(cfg->default_max_tokens, 1024);
  assert_int_equal(cfg->limits.max_body_bytes, 2048);
  assert_int_equal(cfg->limits.request_timeout_ms, 5);
  assert_int_equal(cfg->limits.max_inflight_body_bytes, 1048576);
  assert_int_equal(cfg->limits.max_header_bytes, 65536);
  assert_int_equal(cfg->providers[0].n_headers, 2);
  assert_string_equal(cfg->providers[0].headers[1].name, "OpenAI-Beta");
  assert_string_equal(cfg->providers[0].headers[1].value, "assistants=v2");
  assert_int_equal(cfg->routes[1].n_targets, 2);
  assert_string_equal(cfg->routes[1].targets[1].name, "p/b");
  assert_int_equal(cfg->routes[1].policy.rules[0].max, AIR__UNLIMITED);
  assert_int_equal(cfg->routes[1].policy.rules[0].retry_after_max_ms, 0);
  air_config_free(cfg);
}

/* state.redis: url or url_env, rediss:// refused with its reason, no
 * password in the file; the password and the env URL never appear in a
 * diagnostic or in the dump, which says where state lives. */
static void redis_state_settings(void **state) {
  (void)state;
  diags ds;
  air_config *cfg = NULL;
  setenv("AIR__TEST_RURL", "redis://bob:pw-in-url-777@127.0.0.1:6390/3", 1);
  setenv("AIR__TEST_RPW", "pw-alone-888", 1);
  cfg = good(
      "state:\n"
      "  redis: {url_env: AIR__TEST_RURL, password_env: AIR__TEST_RPW,\n"
      "          connect_timeout_ms: 50, command_timeout_ms: 70}\n");
  assert_string_equal(cfg->redis.resolved_url,
                      "redis://bob:pw-in-url-777@127.0.0.1:6390/3");
  assert_string_equal(cfg->redis.password, "pw-alone-888");
  assert_int_equal(cfg->redis.connect_timeout_ms, 50);
  assert_int_equal(cfg->redis.command_timeout_ms, 70);
  char *out = dump_text(cfg);
  assert_null(strstr(out, "pw-in-url-777"));
  assert_null(strstr(out, "pw-alone-888"));
  assert_non_null(strstr(out,
                         "# shared through redis://bob:***@127.0.0.1:6390/3, "
                         "password from password_env"));
  free(out);
  air_config_free(cfg);

  cfg = good("listen: 127.0.0.1:1\n");
  out = dump_text(cfg);
  assert_non_null(strstr(out,
                         "# not in use: breaker and sticky state is "
                         "per process"));
  free(out);
  air_config_free(cfg);

  /* rediss:// names the reason, in url and in url_env. */
  assert_int_equal(
      parse("state: {redis: {url: \"rediss://h:6380\"}}\n", &ds, &cfg),
      AIR_ECONFIG);
  expect_diag(&ds, AIR_DIAG_ERROR, 1, 22, "hiredis 0.14 has no TLS");
  setenv("AIR__TEST_RURL", "rediss://:pw-tls-999@h:6380", 1);
  assert_int_equal(
      parse("state: {redis: {url_env: AIR__TEST_RURL}}\n", &ds, &cfg),
      AIR_ECONFIG);
  expect_diag(&ds, AIR_DIAG_ERROR, 1, 17, "no TLS");
  for (size_t i = 0; i < ds.n; i++) assert_null(strstr(ds.d[i].msg, "pw-"));
  /* A password in the file is an error that does not quote it. */
  assert_int_equal(
      parse("state: {redis: {url: \"redis://:pw-file-555@h/1\"}}\n", &ds, &cfg),
      AIR_ECONFIG);
  expect_diag(&ds, AIR_DIAG_ERROR, 1, 22, "must not hold a password");
  for (size_t i = 0; i < ds.n; i++) assert_null(strstr(ds.d[i].msg, "pw-"));
  /* Neither, both, a bad port, the old string form. */
  assert_int_equal(parse("state: {redis: {prefix: a}}\n", &ds, &cfg),
                   AIR_ECONFIG);
  expect_diag(&ds, AIR_DIAG_ERROR, 1, 17, "needs url or url_env");
  assert_int_equal(
      parse("state: {redis: {url: \"redis://h\", url_env: X}}\n", &ds, &cfg),
      AIR_ECONFIG);
  expect_diag(&ds, AIR_DIAG_ERROR, 1, 17, "not both");
  assert_int_equal(
      parse("state: {redis: {url: \"redis://h:99999\"}}\n", &ds, &cfg),
      AIR_ECONFIG);
  expect_diag(&ds, AIR_DIAG_ERROR, 1, 22, "port");
  assert_int_equal(parse("state: {redis: \"redis://h\"}\n", &ds, &cfg),
                   AIR_ECONFIG);
  /* An unset url_env is a warning: state stays per process. */
  unsetenv("AIR__TEST_RURL");
  assert_int_equal(
      parse("state: {redis: {url_env: AIR__TEST_RURL}}\n", &ds, &cfg), 0);
  expect_diag(&ds, AIR_DIAG_WARNING, 1, 17, "state stays per process");
  assert_null(cfg->redis.resolved_url);
  air_config_free(cfg);
}

static void json_input_works(void **state) {
  (void)state;
  air_config *cfg = good(
      "{\"providers\": [{\"name\": \"o\", \"api\": \"openai\"}],\n"
      " \"routes\": [{\"name\": \"r\", \"targets\": [\"o/m\", "
      "{\"target\": \"o/n\", \"override\": {\"max_tokens\": 5}}],\n"
      "   \"rules\": [{\"on\": \"rate_limit\", \"action\": \"retry\", "
      "\"max\": 4}]}],\n"
      " \"limits\": {\"max_connections\": 12}}\n");
  assert_int_equal(cfg->n_routes, 1);
  assert_int_equal(cfg->routes[0].n_targets, 2);
  assert_string_equal(cfg->routes[0].targets[1].override_json,
                      "{\"max_tokens\":5}");
  assert_int_equal(cfg->routes[0].policy.rules[0].max, 4);
  assert_int_equal(cfg->limits.max_connections, 12);
  air_config_free(cfg);

  /* A JSON file with an error still reports line and column. */
  diags ds;
  air_config *bad = NULL;
  assert_int_equal(
      parse("{\"routes\": [\n  {\"name\": \"r\", \"targets\": 5}]}", &ds, &bad),
      AIR_ECONFIG);
  assert_null(bad);
  expect_diag(&ds, AIR_DIAG_ERROR, 2, 28, "expected a list");
}

/* ---- diagnostics -----------------------------------------------------------
 */

typedef struct expect {
  int line, col;
  char sub[200];
} expect;

/* Reads the "# expect: COL: substring" annotations of a data file. */
static size_t read_expectations(const char *text, expect *out, size_t cap) {
  size_t n = 0;
  int line = 1;
  for (const char *p = text; *p; line++) {
    const char *eol = strchr(p, '\n');
    size_t len = eol ? (size_t)(eol - p) : strlen(p);
    const char *q = p;
    while ((q = strstr(q, "# expect: ")) && q < p + len && n < cap) {
      q += strlen("# expect: ");
      int col = atoi(q);
      const char *s = strstr(q, ": ") + 2;
      const char *end = strstr(s, " # expect: ");
      if (!end || end > p + len) end = p + len;
      out[n].line = line;
      out[n].col = col;
      snprintf(out[n].sub, sizeof out[n].sub, "%.*s", (int)(end - s), s);
      n++;
    }
    p += len + (eol ? 1 : 0);
  }
  return n;
}

static void every_error_reported_with_position(void **state) {
  (void)state;
  char *text = tl_read_file(AIR_SOURCE_DIR "/tests/data/config/bad.yaml", NULL);
  assert_non_null(text);
  expect ex[100];
  size_t n = read_expectations(text, ex, 100);
  assert_true(n >= 35);
  diags ds;
  air_config *cfg = NULL;
  assert_int_equal(parse(text, &ds, &cfg), AIR_ECONFIG);
  assert_null(cfg);
  for (size_t i = 0; i < n; i++)
    expect_diag(&ds, AIR_DIAG_ERROR, ex[i].line, ex[i].col, ex[i].sub);
  if (ds.errors != n)
    for (size_t i = 0; i < ds.n; i++)
      print_message("got %d:%d: %s\n", ds.d[i].line, ds.d[i].col, ds.d[i].msg);
  assert_int_equal(ds.errors, n); /* and nothing else */
  /* sorted by position */
  for (size_t i = 1; i < ds.n; i++)
    assert_true(
        ds.d[i - 1].line < ds.d[i].line ||
        (ds.d[i - 1].line == ds.d[i].line && ds.d[i - 1].col <= ds.d[i].col));
  free(text);
}

static void missing_env_is_a_warning(void **state) {
  (void)state;
  unsetenv("AIR__TEST_SURELY_UNSET_KEY");
  setenv("AIR__TEST_SET_KEY", "sk-secret-value-123", 1);
  diags ds;
  air_config *cfg = NULL;
  int rc = parse(
      "providers:\n"
      "  - name: a\n"
      "    api: openai\n"
      "    api_key_env: AIR__TEST_SURELY_UNSET_KEY\n"
      "  - name: b\n"
      "    api: openai\n"
      "    api_key_env: AIR__TEST_SET_KEY\n",
      &ds, &cfg);
  assert_int_equal(rc, 0);
  assert_non_null(cfg);
  assert_int_equal(ds.errors, 0);
  assert_int_equal(ds.warnings, 1);
  expect_diag(&ds, AIR_DIAG_WARNING, 4, 18,
              "AIR__TEST_SURELY_UNSET_KEY is not set");
  assert_string_equal(cfg->providers[0].api_key_env,
                      "AIR__TEST_SURELY_UNSET_KEY");
  /* The dump says whether a key is set, never what it is. */
  char *out = dump_text(cfg);
  assert_null(strstr(out, "sk-secret-value-123"));
  assert_non_null(strstr(out, "api_key_env: AIR__TEST_SET_KEY  # set"));
  assert_non_null(strstr(out, "AIR__TEST_SURELY_UNSET_KEY  # NOT SET"));
  free(out);
  air_config_free(cfg);
}

/* The key is read once, at load: unsetting the variable afterwards (or
 * changing it) does not change the loaded config; the dump never shows it. */
static void api_key_resolved_at_load(void **state) {
  (void)state;
  setenv("AIR__TEST_LOAD_KEY", "sk-loaded-at-start-456", 1);
  unsetenv("AIR__TEST_SURELY_UNSET_KEY");
  setenv("AIR__TEST_EMPTY_KEY", "", 1);
  diags ds;
  air_config *cfg = NULL;
  int rc = parse(
      "providers:\n"
      "  - {name: a, api: openai, api_key_env: AIR__TEST_LOAD_KEY}\n"
      "  - {name: b, api: openai, api_key_env: AIR__TEST_SURELY_UNSET_KEY}\n"
      "  - {name: c, api: openai, api_key_env: AIR__TEST_EMPTY_KEY}\n"
      "  - {name: d, api: openai}\n",
      &ds, &cfg);
  assert_int_equal(rc, 0);
  assert_int_equal(ds.errors, 0);
  assert_int_equal(ds.warnings, 2);
  unsetenv("AIR__TEST_LOAD_KEY");
  assert_non_null(cfg->providers[0].api_key);
  assert_string_equal(cfg->providers[0].api_key, "sk-loaded-at-start-456");
  assert_null(cfg->providers[1].api_key);
  assert_null(cfg->providers[2].api_key);
  assert_null(cfg->providers[3].api_key);
  setenv("AIR__TEST_LOAD_KEY", "sk-changed-later", 1);
  assert_string_equal(cfg->providers[0].api_key, "sk-loaded-at-start-456");
  char *out = dump_text(cfg);
  assert_null(strstr(out, "sk-loaded-at-start-456"));
  assert_null(strstr(out, "sk-changed-later"));
  free(out);
  unsetenv("AIR__TEST_LOAD_KEY");
  unsetenv("AIR__TEST_EMPTY_KEY");
  air_config_free(cfg);
}

/* Header names and values reach the wire: a NUL (YAML "\0"), CR or LF, a
 * control byte or a non-token name is an error at the key or value. */
static void header_names_and_values_are_checked(void **state) {
  (void)state;
  diags ds;
  air_config *cfg = NULL;
  int rc = parse(
      "providers:\n"
      "  - name: a\n"
      "    api: openai\n"
      "    headers:\n"
      "      \"x-a\\0b\": v\n"
      "      \"x-c\\rd\": v\n"
      "      \"x e\": v\n"
      "      x-ok: \"a\\0b\"\n"
      "      x-ok2: \"a\\x01b\"\n"
      "      x-ok3: \"a\\nb\"\n"
      "      x-fine: \"tab\\tand text\"\n"
      "forward_headers: [\"x-f\\0g\"]\n",
      &ds, &cfg);
  assert_int_equal(rc, AIR_ECONFIG);
  assert_null(cfg);
  expect_diag(&ds, AIR_DIAG_ERROR, 5, 7, "is not a header name");
  expect_diag(&ds, AIR_DIAG_ERROR, 6, 7, "is not a header name");
  expect_diag(&ds, AIR_DIAG_ERROR, 7, 7, "is not a header name");
  expect_diag(&ds, AIR_DIAG_ERROR, 8, 13, "expected a header value");
  expect_diag(&ds, AIR_DIAG_ERROR, 9, 14, "expected a header value");
  expect_diag(&ds, AIR_DIAG_ERROR, 10, 14, "expected a header value");
  expect_diag(&ds, AIR_DIAG_ERROR, 12, 19, "is not a header name");
  assert_int_equal(ds.errors, 7);
  for (size_t i = 0; i < ds.n; i++)
    assert_null(memchr(ds.d[i].msg, '\r', strlen(ds.d[i].msg)));
}

static void yaml_syntax_error_has_position(void **state) {
  (void)state;
  diags ds;
  air_config *cfg = NULL;
  int rc = parse("providers:\n  - name: a\n    api: openai\n   bad: [1, 2\n",
                 &ds, &cfg);
  assert_int_equal(rc, AIR_ECONFIG);
  assert_null(cfg);
  assert_int_equal(ds.errors, 1);
  assert_int_equal(ds.d[0].line, 4);
  assert_true(ds.d[0].col > 0);
  assert_non_null(strstr(ds.d[0].msg, "YAML"));

  rc = parse("a: 1\na: 2\n", &ds, &cfg);
  assert_int_equal(rc, AIR_ECONFIG);
  expect_diag(&ds, AIR_DIAG_ERROR, 2, 1, "duplicate key");

  rc = parse("- just\n- a list\n", &ds, &cfg);
  assert_int_equal(rc, AIR_ECONFIG);
  expect_diag(&ds, AIR_DIAG_ERROR, 1, 3, "must be a map");

  static const char nul[] = "listen: x\n\0more: 1\n";
  memset(&ds, 0, sizeof ds);
  rc = air_config_parse("t", nul, sizeof nul - 1, collect, &ds, &cfg);
  assert_int_equal(rc, AIR_ECONFIG);
  expect_diag(&ds, AIR_DIAG_ERROR, 2, 1, "NUL byte");
}

static void oversized_config_is_toobig(void **state) {
  (void)state;
  size_t n = AIR__MAX_CONFIG_BYTES + 1;
  char *big = malloc(n);
  assert_non_null(big);
  memset(big, '#', n);
  diags ds;
  memset(&ds, 0, sizeof ds);
  air_config *cfg = NULL;
  assert_int_equal(air_config_parse("big", big, n, collect, &ds, &cfg),
                   AIR_ETOOBIG);
  assert_null(cfg);
  assert_int_equal(ds.errors, 1);
  assert_non_null(strstr(ds.d[0].msg, "over the limit"));
  /* exactly at the limit is fine (all comments) */
  assert_int_equal(air_config_parse("big", big, n - 1, NULL, NULL, &cfg), 0);
  air_config_free(cfg);
  cfg = NULL;

  char path[] = "/tmp/air_test_config_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *f = fdopen(fd, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(big, 1, n, f), n);
  fclose(f);
  assert_int_equal(air_config_load(path, NULL, NULL, &cfg), AIR_ETOOBIG);
  assert_null(cfg);
  unlink(path);
  free(big);

  memset(&ds, 0, sizeof ds);
  assert_int_equal(
      air_config_load("/nonexistent/airetry.yaml", collect, &ds, &cfg),
      AIR_EIO);
  assert_int_equal(ds.errors, 1);
  assert_int_equal(air_config_parse("x", NULL, 3, NULL, NULL, &cfg),
                   AIR_EINVAL);
}

/* The status matchers a rule holds and the limit the loader enforces are
 * one number (they were 16 and 32). */
static void status_matchers_are_one_limit(void **state) {
  (void)state;
  air__rule r;
  assert_int_equal(sizeof r.status / sizeof r.status[0],
                   AIR__MAX_STATUS_MATCHERS);
  size_t n = 0;
  const air__opt *opts = air__config_opts(&n);
  bool found = false;
  for (size_t i = 0; i < n; i++) {
    if (strcmp(opts[i].name, "status") != 0) continue;
    assert_int_equal(opts[i].max, AIR__MAX_STATUS_MATCHERS);
    found = true;
  }
  assert_true(found);
}

static void limits_are_enforced(void **state) {
  (void)state;
  /* AIR__MAX_TARGETS + 1 targets, one over-long phrase, 17 statuses. */
  size_t cap = 64 * 1024;
  char *t = malloc(cap);
  assert_non_null(t);
  size_t off = (size_t)snprintf(
      t, cap,
      "providers: [{name: p, api: openai}]\nroutes:\n  - name: r\n"
      "    targets: [");
  for (int i = 0; i <= AIR__MAX_TARGETS; i++)
    off += (size_t)snprintf(t + off, cap - off, "%sp/m%d", i ? ", " : "", i);
  off += (size_t)snprintf(t + off, cap - off, "]\n    refusal: {phrases: [\"");
  for (int i = 0; i <= AIR__MAX_PHRASE_BYTES; i++) t[off++] = 'a';
  off += (size_t)snprintf(t + off, cap - off,
                          "\"]}\n    rules: [{action: fail, status: [");
  for (int i = 0; i < 17; i++)
    off += (size_t)snprintf(t + off, cap - off, "%s%d", i ? ", " : "", 400 + i);
  snprintf(t + off, cap - off, "]}]\n");
  diags ds;
  air_config *cfg = NULL;
  assert_int_equal(parse(t, &ds, &cfg), AIR_ECONFIG);
  expect_diag(&ds, AIR_DIAG_ERROR, 4, 15, "65 targets, over the limit of 64");
  expect_diag(&ds, AIR_DIAG_ERROR, 5, 25, "a phrase must have 1 to 512 bytes");
  expect_diag(&ds, AIR_DIAG_ERROR, 6, 37, "17 statuses, over the limit of 16");
  assert_int_equal(ds.errors, 3);
  free(t);
}

/* limits.max_inflight_body_bytes: 1024 to 1 TiB (default in
 * builtin_defaults_are_design_3, a value in misc_values). */
static void inflight_body_bounds(void **state) {
  (void)state;
  diags ds;
  air_config *cfg = NULL;
  assert_int_equal(
      parse("limits:\n  max_inflight_body_bytes: 1023\n", &ds, &cfg),
      AIR_ECONFIG);
  expect_diag(&ds, AIR_DIAG_ERROR, 2, 28,
              "limits.max_inflight_body_bytes: 1023 is out of range (1024 to "
              "1099511627776)");
  assert_int_equal(ds.errors, 1);
  assert_int_equal(
      parse("limits: {max_inflight_body_bytes: 1099511627777}\n", &ds, &cfg),
      AIR_ECONFIG);
  assert_int_equal(ds.errors, 1);
  cfg = good("limits: {max_inflight_body_bytes: 1099511627776}\n");
  assert_int_equal(cfg->limits.max_inflight_body_bytes, 1ull << 40);
  air_config_free(cfg);
}

/* limits.max_response_bytes: 1024 to 1 GiB (default 64 MiB, docs/design.md §4).
 */
static void response_bytes_bounds(void **state) {
  (void)state;
  diags ds;
  air_config *cfg = NULL;
  assert_int_equal(parse("limits:\n  max_response_bytes: 1023\n", &ds, &cfg),
                   AIR_ECONFIG);
  expect_diag(&ds, AIR_DIAG_ERROR, 2, 23,
              "limits.max_response_bytes: 1023 is out of range (1024 to "
              "1073741824)");
  assert_int_equal(ds.errors, 1);
  cfg = good("limits: {max_response_bytes: 4096}\n");
  assert_int_equal(cfg->limits.max_response_bytes, 4096);
  air_config_free(cfg);
}

static void unknown_keys_and_types(void **state) {
  (void)state;
  diags ds;
  air_config *cfg = NULL;
  assert_int_equal(parse("providers: {name: p}\n"
                         "routes: [{name: r, targets: [p/m], timeouts: 5}]\n"
                         "limits: {idle_timeout_ms: [1]}\n"
                         "defaults: {rules: [{on: [rate_limit], action: retry, "
                         "max: -1, backoff: {base_ms: 1}, color: red}]}\n",
                         &ds, &cfg),
                   AIR_ECONFIG);
  expect_diag(&ds, AIR_DIAG_ERROR, 1, 13,
              "providers: expected a list, got a map");
  expect_diag(&ds, AIR_DIAG_ERROR, 2, 30, "unknown provider 'p'");
  expect_diag(&ds, AIR_DIAG_ERROR, 2, 46,
              "routes[0].timeouts: expected a map, got a scalar");
  expect_diag(&ds, AIR_DIAG_ERROR, 3, 28,
              "limits.idle_timeout_ms: expected an integer");
  expect_diag(
      &ds, AIR_DIAG_ERROR, 4, 59,
      "max: expected an integer from 0 to 1000000 or unlimited, got '-1'");
  expect_diag(&ds, AIR_DIAG_ERROR, 4, 86,
              "unknown key 'color' in defaults.rules[0]");
  assert_int_equal(ds.errors, 6);
}

static void warnings_for_ignored_rule_keys(void **state) {
  (void)state;
  diags ds;
  air_config *cfg = NULL;
  assert_int_equal(
      parse("defaults:\n  rules:\n"
            "    - {on: auth, action: switch, backoff: {base_ms: 1}}\n"
            "    - {on: length, action: fail, override: {a: 1}}\n",
            &ds, &cfg),
      0);
  assert_int_equal(ds.warnings, 2);
  expect_diag(&ds, AIR_DIAG_WARNING, 3, 34,
              "backoff: used by retry rules only");
  expect_diag(&ds, AIR_DIAG_WARNING, 4, 34, "a fail rule causes no attempt");
  air_config_free(cfg);
}

/* hedge: (docs/design.md §3.6): off by default, on when the map is given,
 * merged key by key defaults <- route <- target, and a one-target route
 * without same_target is warned about. */
static void hedge_settings(void **state) {
  (void)state;
  const char *text =
      "providers: [{name: p, api: openai}]\n"
      "defaults: {hedge: {after_ms: 700, max_prompt_bytes: 1000}}\n"
      "routes:\n"
      "  - name: r\n"
      "    targets: [p/a, {target: p/b, hedge: {after_ms: 50}}, p/c]\n"
      "    hedge: {max: 2}\n"
      "  - name: off\n"
      "    targets: [p/a, {target: p/b, hedge: {after_ms: 9}}]\n"
      "    hedge: {enabled: false}\n"
      "  - name: plain\n"
      "    targets: [p/a, p/b]\n"
      "    hedge: {enabled: false}\n"
      "  - name: lone\n"
      "    targets: [p/a]\n"
      "  - name: same\n"
      "    targets: [p/a]\n"
      "    hedge: {same_target: true}\n";
  diags ds;
  air_config *cfg = NULL;
  assert_int_equal(parse(text, &ds, &cfg), 0);
  /* lone inherits hedging from defaults with one target: one warning. */
  assert_int_equal(ds.warnings, 1);
  expect_diag(&ds, AIR_DIAG_WARNING, 13, 5, "never hedges without");
  assert_true(cfg->defaults.hedge.enabled);
  assert_int_equal(cfg->defaults.hedge.after_ms, 700);
  assert_int_equal(cfg->defaults.hedge.max, 1);
  const air__route *r = &cfg->routes[0];
  assert_true(r->policy.hedge.enabled);
  assert_int_equal(r->policy.hedge.max, 2);
  assert_int_equal(r->policy.hedge.after_ms, 700);
  assert_int_equal(r->policy.hedge.max_prompt_bytes, 1000);
  assert_int_equal(r->targets[0].hedge.after_ms, 700);
  assert_int_equal(r->targets[1].hedge.after_ms, 50);
  assert_int_equal(r->targets[1].hedge.max, 2);
  /* A target's map turns hedging on for it, as any hedge map does. */
  assert_false(cfg->routes[1].targets[0].hedge.enabled);
  assert_true(cfg->routes[1].targets[1].hedge.enabled);
  assert_false(cfg->routes[2].policy.hedge.enabled);
  assert_true(cfg->routes[4].targets[0].hedge.same_target);
  air_config_free(cfg);
  /* Built-in: off; max is bounded by AIR__MAX_HEDGES. */
  cfg = good(
      "providers: [{name: p, api: openai}]\n"
      "routes: [{name: r, targets: [p/a, p/b]}]\n");
  assert_false(cfg->routes[0].policy.hedge.enabled);
  assert_int_equal(cfg->routes[0].policy.hedge.after_ms, 4000);
  assert_int_equal(cfg->routes[0].policy.hedge.max_prompt_bytes, 262144);
  air_config_free(cfg);
  assert_int_equal(
      parse("routes: []\ndefaults: {hedge: {max: 4}}\n", &ds, &cfg),
      AIR_ECONFIG);
}

/* A `to:` inherited from defaults is checked against each route. */
/* continuation: (docs/design.md §3.5): off by default, on when the map is
 * given, merged key by key; max_gap_ms defaults to the route's chunk_ms; styles
 * resolved target <- provider <- api; bad values named with their place. */
static void continuation_settings(void **state) {
  (void)state;
  const char *text =
      "providers:\n"
      "  - {name: o, api: openai}\n"
      "  - {name: a, api: anthropic}\n"
      "  - {name: r, api: openai_responses}\n"
      "  - {name: v, api: openai, continuation_style: vllm}\n"
      "defaults: {continuation: {max: 3, max_sent_bytes: 5000}}\n"
      "routes:\n"
      "  - name: one\n"
      "    targets: [a/m, v/m, {target: o/m, continuation_style: "
      "prefix_flag},\n"
      "              {target: a/n, continuation_style: none}, r/m]\n"
      "    timeouts: {chunk_ms: 1234}\n"
      "    continuation: {targets: any, instruct: true}\n"
      "  - name: two\n"
      "    targets: [a/m]\n"
      "    continuation: {enabled: false, max_gap_ms: 99}\n"
      "  - name: three\n"
      "    targets: [a/m]\n";
  diags ds;
  air_config *cfg = NULL;
  assert_int_equal(parse(text, &ds, &cfg), 0);
  assert_int_equal(ds.errors, 0);
  /* Built-ins and defaults: off, same_model, max 3 from defaults. */
  const air__continuation *d = &cfg->defaults.continuation;
  assert_true(d->enabled); /* defaults gave the map */
  assert_int_equal(d->max, 3);
  assert_int_equal(d->max_gap_ms, 30000);
  assert_int_equal(d->max_sent_bytes, 5000);
  assert_false(d->any_target);
  const air__route *one = &cfg->routes[0];
  const air__continuation *k = &one->policy.continuation;
  assert_true(k->enabled);
  assert_true(k->any_target);
  assert_true(k->instruct);
  assert_int_equal(k->max, 3);
  assert_int_equal(k->max_gap_ms, 1234); /* the route's chunk_ms */
  assert_int_equal(k->max_sent_bytes, 5000);
  /* Styles: by api, the provider's, the target's. */
  assert_int_equal(cfg->providers[0].continuation_style, AIR_CONT_NONE);
  assert_false(cfg->providers[0].continuation_style_set);
  assert_int_equal(cfg->providers[1].continuation_style, AIR_CONT_PREFILL);
  assert_int_equal(cfg->providers[2].continuation_style, AIR_CONT_NONE);
  assert_int_equal(cfg->providers[3].continuation_style, AIR_CONT_VLLM);
  assert_true(cfg->providers[3].continuation_style_set);
  assert_int_equal(one->targets[0].style, AIR_CONT_PREFILL);
  assert_false(one->targets[0].style_set);
  assert_int_equal(one->targets[1].style, AIR_CONT_VLLM);
  assert_true(one->targets[1].style_set);
  assert_int_equal(one->targets[2].style, AIR_CONT_PREFIX_FLAG);
  assert_true(one->targets[2].style_set);
  assert_int_equal(one->targets[3].style, AIR_CONT_NONE);
  assert_true(one->targets[3].style_set);
  assert_int_equal(one->targets[4].style, AIR_CONT_NONE);
  const air__continuation *two = &cfg->routes[1].policy.continuation;
  assert_false(two->enabled);
  assert_int_equal(two->max_gap_ms, 99);
  assert_true(cfg->routes[2].policy.continuation.enabled);
  /* The dump shows every resolved value. */
  char *out = dump_text(cfg);
  assert_non_null(strstr(out, "continuation_style: prefix_flag"));
  assert_non_null(strstr(out, "continuation_style: vllm"));
  assert_non_null(strstr(out, "targets: any"));
  assert_non_null(strstr(out, "max_gap_ms: 1234"));
  free(out);
  air_config_free(cfg);

  /* Off by default. */
  cfg = good(
      "providers: [{name: a, api: anthropic}]\n"
      "routes: [{name: r, targets: [a/m]}]\n");
  assert_false(cfg->routes[0].policy.continuation.enabled);
  assert_int_equal(cfg->routes[0].policy.continuation.max, 2);
  assert_int_equal(cfg->routes[0].policy.continuation.max_sent_bytes, 1048576);
  air_config_free(cfg);
  cfg = NULL; /* a failing parse leaves it as it is */

  /* Errors name the place; a route that cannot continue is a warning. */
  const char *bad =
      "providers:\n"
      "  - {name: o, api: openai, continuation_style: prefil}\n"
      "  - {name: p, api: openai}\n"
      "routes:\n"
      "  - name: r\n"
      "    targets: [p/m]\n"
      "    continuation: {targets: some, max: 0, max_gap_ms: 0,\n"
      "                   max_sent_bytes: 0, instruct: yes please}\n"
      "  - name: s\n"
      "    targets: [p/m]\n"
      "    continuation: {}\n";
  assert_int_equal(parse(bad, &ds, &cfg), AIR_ECONFIG);
  expect_diag(&ds, AIR_DIAG_ERROR, 2, 48,
              "continuation_style: expected one of none, prefill, vllm, "
              "prefix_flag, instruct, got 'prefil'");
  expect_diag(&ds, AIR_DIAG_ERROR, 7, 29,
              "continuation.targets: expected one of same_model, any");
  expect_diag(&ds, AIR_DIAG_ERROR, 7, 40, "continuation.max: 0 is out of");
  expect_diag(&ds, AIR_DIAG_ERROR, 7, 55, "max_gap_ms: 0 is out of range");
  expect_diag(&ds, AIR_DIAG_ERROR, 8, 36, "max_sent_bytes");
  expect_diag(&ds, AIR_DIAG_ERROR, 8, 49, "instruct");
  expect_diag(&ds, AIR_DIAG_WARNING, 9, 5, "no target can continue");
  assert_null(cfg);
}

static void defaults_rule_to_checked_per_route(void **state) {
  (void)state;
  diags ds;
  air_config *cfg = NULL;
  assert_int_equal(parse("providers: [{name: p, api: openai}]\n"
                         "defaults:\n"
                         "  rules: [{on: quota, action: switch, to: p/b}]\n"
                         "routes:\n"
                         "  - {name: ok, targets: [p/a, p/b]}\n"
                         "  - {name: bad, targets: [p/a]}\n",
                         &ds, &cfg),
                   AIR_ECONFIG);
  assert_int_equal(ds.errors, 1);
  expect_diag(&ds, AIR_DIAG_ERROR, 3, 43,
              "defaults.rules[0].to: 'p/b' is not one of the targets "
              "of routes[1] ('bad')");
}

static void alias_bomb_is_bounded(void **state) {
  (void)state;
  char text[2048];
  size_t off =
      (size_t)snprintf(text, sizeof text, "x-0: &a0 [1,1,1,1,1,1,1,1,1,1]\n");
  for (int i = 1; i < 9; i++) {
    off +=
        (size_t)snprintf(text + off, sizeof text - off, "x-%d: &a%d [", i, i);
    for (int j = 0; j < 10; j++)
      off += (size_t)snprintf(text + off, sizeof text - off, "%s*a%d",
                              j ? "," : "", i - 1);
    off += (size_t)snprintf(text + off, sizeof text - off, "]\n");
  }
  snprintf(
      text + off, sizeof text - off,
      "providers: [{name: p, api: openai}]\n"
      "routes: [{name: r, targets: [{target: p/m, override: {x: *a8}}]}]\n");
  diags ds;
  air_config *cfg = NULL;
  assert_int_equal(parse(text, &ds, &cfg), AIR_ECONFIG);
  assert_int_equal(ds.errors, 1);
  assert_non_null(strstr(ds.d[0].msg, "too large or nested too deeply"));
}

/* ---- the dump, the example, the docs ----------------------------------------
 */

static void dump_round_trips(void **state) {
  (void)state;
  char *text = tl_read_file(AIR_SOURCE_DIR "/examples/airetry.yaml", NULL);
  assert_non_null(text);
  diags ds;
  air_config *a = NULL, *b = NULL;
  assert_int_equal(parse(text, &ds, &a), 0);
  assert_int_equal(ds.errors, 0);
  char *d1 = dump_text(a);
  assert_int_equal(parse(d1, &ds, &b), 0);
  assert_int_equal(ds.errors, 0);
  char *d2 = dump_text(b);
  /* Same config: the dumps match past their first (file name) line. */
  assert_string_equal(strchr(d1, '\n'), strchr(d2, '\n'));
  /* Spot checks of what the dump must show. */
  assert_non_null(strstr(d1, "\n  - name: smart\n"));
  assert_non_null(strstr(d1, "first_chunk_ms: 60000"));
  assert_non_null(strstr(d1, "override: {\"max_tokens\":8192}"));
  assert_non_null(strstr(d1, "per_reason: {length: 3}"));
  assert_non_null(strstr(d1, "status: [429, \"5xx\"]"));
  assert_non_null(strstr(d1, "max: unlimited"));
  assert_non_null(strstr(d1, "quota_open_ms: 300000"));
  assert_non_null(strstr(d1, "request_timeout_ms: 30000"));
  free(d1);
  free(d2);
  air_config_free(a);
  air_config_free(b);
  free(text);
}

static void example_documents_every_key(void **state) {
  (void)state;
  char *text = tl_read_file(AIR_SOURCE_DIR "/examples/airetry.yaml", NULL);
  assert_non_null(text);
  size_t n;
  const air__opt *o = air__config_opts(&n);
  for (size_t i = 0; i < n; i++) {
    char key[80];
    snprintf(key, sizeof key, "%s:", o[i].name);
    if (!strstr(text, key)) fail_msg("examples/airetry.yaml lacks %s", key);
  }
  free(text);
}

static void docs_embed_the_generated_reference(void **state) {
  (void)state;
  char *docs = tl_read_file(AIR_SOURCE_DIR "/docs/config.md", NULL);
  assert_non_null(docs);
  char *ref = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&ref, &n);
  assert_non_null(f);
  air__config_reference(f);
  fclose(f);
  if (!strstr(docs, ref))
    fail_msg(
        "docs/config.md is out of date: regenerate its reference with "
        "`test_config --print-reference`");
  free(ref);
  free(docs);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--print-reference") == 0) {
    air__config_reference(stdout);
    return 0;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(builtin_defaults_are_design_3),
      cmocka_unit_test(response_bytes_bounds),
      cmocka_unit_test(route_inherits_builtins),
      cmocka_unit_test(route_timeouts_merge_key_by_key),
      cmocka_unit_test(route_rules_replace_defaults),
      cmocka_unit_test(defaults_section_merges),
      cmocka_unit_test(target_map_form),
      cmocka_unit_test(misc_values),
      cmocka_unit_test(redis_state_settings),
      cmocka_unit_test(json_input_works),
      cmocka_unit_test(every_error_reported_with_position),
      cmocka_unit_test(missing_env_is_a_warning),
      cmocka_unit_test(api_key_resolved_at_load),
      cmocka_unit_test(header_names_and_values_are_checked),
      cmocka_unit_test(yaml_syntax_error_has_position),
      cmocka_unit_test(oversized_config_is_toobig),
      cmocka_unit_test(limits_are_enforced),
      cmocka_unit_test(inflight_body_bounds),
      cmocka_unit_test(unknown_keys_and_types),
      cmocka_unit_test(warnings_for_ignored_rule_keys),
      cmocka_unit_test(hedge_settings),
      cmocka_unit_test(continuation_settings),
      cmocka_unit_test(defaults_rule_to_checked_per_route),
      cmocka_unit_test(alias_bomb_is_bounded),
      cmocka_unit_test(status_matchers_are_one_limit),
      cmocka_unit_test(dump_round_trips),
      cmocka_unit_test(example_documents_every_key),
      cmocka_unit_test(docs_embed_the_generated_reference),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
