/*
 * The hub (src/codec/hub.c): same-dialect builds never build the canonical
 * form, it is built once per request for translations, can_express answers
 * before anything is built for a target, and the canonical limits hold.
 * What translations produce is held by test_hub_diff and the dialects'
 * tests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "canon.h"
#include "limits.h"
#include "provider.h"

static void parse(air_dialect d, const char *body, air__request *r) {
  air_error err = {0};
  assert_int_equal(air__request_parse(d, body, strlen(body), r, &err), 0);
}

static const char THINKING[] =
    "{\"model\":\"m\",\"max_tokens\":9,\"messages\":[{\"role\":\"user\","
    "\"content\":\"hi\"}],\"thinking\":{\"type\":\"enabled\","
    "\"budget_tokens\":1024}}";

static void test_same_dialect_builds_no_canon(void **s) {
  (void)s;
  air__request r;
  parse(AIR_DIALECT_ANTHROPIC, THINKING, &r);
  air__buf out;
  air__buf_init(&out, 1u << 20);
  air__build_opts o = {.model = "up"};
  air_error err;
  assert_int_equal(
      air__request_can_express(&air__provider_anthropic, &r, false, &err), 0);
  assert_int_equal(
      air__request_build(&air__provider_anthropic, &r, &o, &out, &err), 0);
  assert_null(r.canon); /* the byte fast path */
  assert_null(r.tree);
  assert_non_null(strstr(out.p, "\"thinking\":{\"type\":\"enabled\""));
  air__buf_cleanup(&out);
  air__request_cleanup(&r);
}

static void test_can_express_and_cache(void **s) {
  (void)s;
  air__request r;
  parse(AIR_DIALECT_ANTHROPIC, THINKING, &r);
  air_error err;
  assert_int_equal(
      air__request_can_express(&air__provider_openai, &r, false, &err),
      AIR_ENOTSUP);
  assert_string_equal(err.message,
                      "thinking: not supported by openai upstreams");
  const struct air__canon *c = r.canon;
  assert_non_null(c); /* built once ... */
  assert_int_equal(
      air__request_can_express(&air__provider_openai, &r, true, &err), 0);
  air__buf out;
  air__buf_init(&out, 1u << 20);
  air__build_opts o = {.model = "up", .drop_params = true};
  assert_int_equal(
      air__request_build(&air__provider_openai, &r, &o, &out, &err), 0);
  assert_ptr_equal(r.canon, c); /* ... and kept for the next attempts */
  assert_null(strstr(out.p, "thinking"));
  /* Not under drop_params: the same refusal from the build, nothing out. */
  out.n = 0;
  o.drop_params = false;
  assert_int_equal(
      air__request_build(&air__provider_openai, &r, &o, &out, &err),
      AIR_ENOTSUP);
  assert_int_equal(out.n, 0);
  air__buf_cleanup(&out);
  air__request_cleanup(&r);
}

/* The first problem in the caller's order is the one named, whether it is
 * an extra of the caller's dialect (the unknown field) or something only
 * the target cannot say (an image inside a tool result). */
static void test_first_problem_named(void **s) {
  (void)s;
  static const char body[] =
      "{\"model\":\"m\",\"max_tokens\":9,\"messages\":[{\"role\":\"user\","
      "\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t\","
      "\"content\":[{\"type\":\"image\",\"source\":{\"type\":\"url\","
      "\"url\":\"https://x/y.png\"}}]}]}],\"frobnicate\":1}";
  air__request r;
  parse(AIR_DIALECT_ANTHROPIC, body, &r);
  air_error err;
  assert_int_equal(
      air__request_can_express(&air__provider_openai, &r, false, &err),
      AIR_ENOTSUP);
  assert_string_equal(err.message,
                      "messages[0].content[0].content[0] (type image): not "
                      "supported by openai upstreams");
  air__request_cleanup(&r);
}

/* Over AIR__MAX_CANON_STOP stop sequences: a clean error, no crash. */
static void test_canon_limit(void **s) {
  (void)s;
  air__buf b;
  air__buf_init(&b, 1u << 24);
  assert_int_equal(air__buf_adds(&b,
                                 "{\"model\":\"m\",\"messages\":[{\"role\":"
                                 "\"user\",\"content\":\"x\"}],\"stop\":["),
                   0);
  for (unsigned i = 0; i <= AIR__MAX_CANON_STOP; i++)
    assert_int_equal(air__buf_adds(&b, i > 0 ? ",\"s\"" : "\"s\""), 0);
  assert_int_equal(air__buf_adds(&b, "]}"), 0);
  air__request r;
  parse(AIR_DIALECT_OPENAI, b.p, &r);
  air__buf out;
  air__buf_init(&out, 1u << 20);
  air__build_opts o = {.model = "up"};
  air_error err;
  assert_int_equal(
      air__request_build(&air__provider_anthropic, &r, &o, &out, &err),
      AIR_ETOOBIG);
  assert_string_equal(err.message, "request too large to translate");
  assert_int_equal(out.n, 0);
  air__buf_cleanup(&out);
  air__buf_cleanup(&b);
  air__request_cleanup(&r);
}

/* The table names every dialect at its own index. */
static void test_dialect_table(void **s) {
  (void)s;
  size_t n = 0;
  const air__provider_ops *const *t = air__dialects(&n);
  assert_int_equal(n, 3);
  for (size_t i = 0; i < n; i++) {
    assert_int_equal((size_t)t[i]->api, i);
    assert_ptr_equal(air__provider_get(t[i]->api), t[i]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_dialect_builds_no_canon),
      cmocka_unit_test(test_can_express_and_cache),
      cmocka_unit_test(test_first_problem_named),
      cmocka_unit_test(test_canon_limit),
      cmocka_unit_test(test_dialect_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
