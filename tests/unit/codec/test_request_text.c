/*
 * Unit tests for src/codec/request_text.c, the fast path for callers'
 * requests (docs/decisions.md, "Callers' requests are validated on the
 * tokens"): air__request_fast accepts a body only where jansson would give
 * the same answer, and falls back (returns false) on everything else;
 * air__request_patch builds a same-dialect upstream body from the caller's
 * text with a few members replaced or appended, byte for byte.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dialect.h"

#define MSGS "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"

/* ---- validation ------------------------------------------------------------
 */

/* Bodies the fast path takes, and what it reads from them. */
static void fast_path_takes_ordinary_bodies(void **state) {
  (void)state;
  static const struct {
    air_dialect d;
    const char *body;
    const char *model;
    bool stream, include_usage, json_response;
  } cases[] = {
      {AIR_DIALECT_OPENAI, "{\"model\":\"m\"," MSGS "}", "m", false, false,
       false},
      {AIR_DIALECT_OPENAI,
       "{ \"model\" : \"gpt-x\" , " MSGS
       ", \"stream\": true, \"stream_options\": {\"include_usage\": true},"
       " \"temperature\": 0.5, \"seed\": -9223372036854775807,"
       " \"response_format\": {\"type\": \"json_schema\"}}",
       "gpt-x", true, true, true},
      {AIR_DIALECT_OPENAI,
       "{\"model\":\"m\"," MSGS ",\"stream\":false,\"max_tokens\":null,"
       "\"response_format\":{\"type\":\"text\"},\"user\":\"h\\u00e9\\n\"}",
       "m", false, false, false},
      {AIR_DIALECT_ANTHROPIC,
       "{\"model\":\"claude\",\"max_tokens\":10,\"system\":[]," MSGS
       ",\"stream\":true,\"metadata\":{\"a\":\"\\ud83d\\ude00\"}}",
       "claude", true, false, false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *b = cases[i].body;
    air__request r;
    if (!air__request_fast(cases[i].d, b, strlen(b), &r))
      fail_msg("fast path declined case %zu", i);
    assert_int_equal(r.dialect, cases[i].d);
    assert_null(r.tree); /* no tree until a build needs one */
    assert_int_equal(r.raw_n, strlen(b));
    assert_memory_equal(r.raw, b, r.raw_n);
    assert_int_equal(r.raw[r.raw_n], '\0');
    assert_string_equal(r.model, cases[i].model);
    assert_int_equal(r.stream, cases[i].stream);
    assert_int_equal(r.include_usage, cases[i].include_usage);
    assert_int_equal(r.json_response, cases[i].json_response);
    /* jansson reads the same request. */
    air__request t;
    air_error err = {0};
    assert_int_equal(
        air__request_parse_tree(cases[i].d, b, strlen(b), &t, &err), 0);
    assert_string_equal(t.model, r.model);
    assert_int_equal(t.stream, r.stream);
    assert_int_equal(t.include_usage, r.include_usage);
    assert_int_equal(t.json_response, r.json_response);
    air__request_cleanup(&t);
    air__request_cleanup(&r);
  }
}

/*
 * Each case docs/decisions.md sends to jansson: the fast path declines, and
 * air__request_parse then answers with jansson (a tree and no raw text when
 * it accepts; jansson's message when it does not).
 */
static void fast_path_falls_back_where_documented(void **state) {
  (void)state;
  char big[2048];
  size_t off = (size_t)snprintf(big, sizeof big, "{\"model\":\"m\"," MSGS);
  for (int i = 0; i < 63; i++) /* 65 members: over the pairwise check */
    off += (size_t)snprintf(big + off, sizeof big - off, ",\"x%d\":%d", i, i);
  snprintf(big + off, sizeof big - off, "}");
  const struct {
    const char *why;
    const char *body;
    bool jansson_accepts;
  } cases[] = {
      {"escaped key", "{\"mod\\u0065l\":\"m\"," MSGS "}", true},
      {"escaped model", "{\"model\":\"m\\u0041\"," MSGS "}", true},
      {"escaped member key",
       "{\"model\":\"m\",\"messages\":[{\"r\\u006fle\":\"user\"}]}", true},
      {"duplicate key", "{\"model\":\"m\"," MSGS ",\"model\":\"n\"}", false},
      {"nested duplicate",
       "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"c\":1,\"c\":2}]}",
       false},
      {"\\u0000", "{\"model\":\"m\"," MSGS ",\"user\":\"a\\u0000b\"}", false},
      {"lone low surrogate", "{\"model\":\"m\"," MSGS ",\"user\":\"\\udc00\"}",
       false},
      {"lone high surrogate",
       "{\"model\":\"m\"," MSGS ",\"user\":\"\\ud800x\"}", false},
      {"integer over 64 bits",
       "{\"model\":\"m\"," MSGS ",\"seed\":9223372036854775808}", false},
      /* Fits in 64 bits, yet declined: json.c reads magnitudes up to
       * INT64_MAX only (conservative, jansson takes it). */
      {"INT64_MIN", "{\"model\":\"m\"," MSGS ",\"seed\":-9223372036854775808}",
       true},
      {"real with exponent", "{\"model\":\"m\"," MSGS ",\"seed\":1e3}", true},
      {"real with exponent overflowing",
       "{\"model\":\"m\"," MSGS ",\"seed\":1e999}", false},
      {"invalid UTF-8", "{\"model\":\"m\"," MSGS ",\"user\":\"\xc3(\"}", false},
      {"not JSON", "{\"model\":\"m\"," MSGS ",}", false},
      {"not an object", "[1]", false},
      {"no model", "{" MSGS "}", false},
      {"empty model", "{\"model\":\"\"," MSGS "}", false},
      {"empty messages", "{\"model\":\"m\",\"messages\":[]}", false},
      {"message without role", "{\"model\":\"m\",\"messages\":[{}]}", false},
      {"wrong field type", "{\"model\":\"m\"," MSGS ",\"stream\":\"yes\"}",
       false},
      {"max_tokens not positive", "{\"model\":\"m\"," MSGS ",\"max_tokens\":0}",
       false},
      {"too many members", big, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *b = cases[i].body;
    air__request r;
    if (air__request_fast(AIR_DIALECT_OPENAI, b, strlen(b), &r)) {
      air__request_cleanup(&r);
      fail_msg("fast path took: %s", cases[i].why);
    }
    air_error err = {0};
    int rc = air__request_parse(AIR_DIALECT_OPENAI, b, strlen(b), &r, &err);
    if (cases[i].jansson_accepts) {
      if (rc != 0) fail_msg("%s: %s", cases[i].why, err.message);
      assert_null(r.raw);
      assert_non_null(r.tree);
      air__request_cleanup(&r);
    } else {
      if (rc == 0) fail_msg("jansson took: %s", cases[i].why);
      assert_true(err.message[0] != '\0');
    }
  }
}

/* ---- patching ---------------------------------------------------------------
 */

/* air__request_patch over the fast-parsed body b; returns the text. */
static char *patched(air_dialect d, const char *b, const air__patch *set,
                     size_t n) {
  air__request r;
  assert_true(air__request_fast(d, b, strlen(b), &r));
  air__buf out;
  air__buf_init(&out, 1u << 20);
  assert_int_equal(air__request_patch(&r, set, n, &out), 0);
  air__request_cleanup(&r);
  size_t len;
  return air__buf_take(&out, &len);
}

static void openai_patch_is_byte_exact(void **state) {
  (void)state;
  const air__patch set[] = {
      {"model", "\"up\\\"stream\"", AIR__PATCH_SET},
      {"stream", "true", AIR__PATCH_SET},
      {"stream_options", NULL, AIR__PATCH_STREAM_OPTIONS}};
  static const struct {
    const char *in, *out;
  } cases[] = {
      /* Replaced in place, missing members appended in set's order. */
      {"{\"model\":\"m\"," MSGS "}",
       "{\"model\":\"up\\\"stream\"," MSGS
       ",\"stream\":true,\"stream_options\":{\"include_usage\":true}}"},
      /* Key order kept; values copied as written (blanks inside them too),
       * blanks between members dropped. */
      {"{ \"temperature\" : 1.50 , \"stream\":false, \"messages\": [ {\"role\""
       ":\"user\"} ], \"model\":\"m\",\"user\":\"caf\\u00e9\"}",
       "{\"temperature\":1.50,\"stream\":true,\"messages\":[ "
       "{\"role\":\"user\"}"
       " ],\"model\":\"up\\\"stream\",\"user\":\"caf\\u00e9\",\"stream_"
       "options\""
       ":{\"include_usage\":true}}"},
      /* The caller's stream_options keep their other members. */
      {"{\"model\":\"m\"," MSGS
       ",\"stream_options\":{\"include_usage\":false,\"x\":[1, 2]}}",
       "{\"model\":\"up\\\"stream\"," MSGS
       ",\"stream_options\":{\"x\":[1, 2],\"include_usage\":true},"
       "\"stream\":true}"},
      /* A null stream_options becomes the object. */
      {"{\"model\":\"m\"," MSGS ",\"stream_options\":null}",
       "{\"model\":\"up\\\"stream\"," MSGS
       ",\"stream_options\":{\"include_usage\":true},\"stream\":true}"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *got = patched(AIR_DIALECT_OPENAI, cases[i].in, set, 3);
    assert_string_equal(got, cases[i].out);
    free(got);
  }
}

static void anthropic_default_only_where_missing_or_null(void **state) {
  (void)state;
  const air__patch set[] = {{"model", "\"u\"", AIR__PATCH_SET},
                            {"stream", "true", AIR__PATCH_SET},
                            {"max_tokens", "4096", AIR__PATCH_DEFAULT}};
  static const struct {
    const char *in, *out;
  } cases[] = {
      {"{\"model\":\"m\"," MSGS "}",
       "{\"model\":\"u\"," MSGS ",\"stream\":true,\"max_tokens\":4096}"},
      {"{\"max_tokens\":null,\"model\":\"m\"," MSGS "}",
       "{\"max_tokens\":4096,\"model\":\"u\"," MSGS ",\"stream\":true}"},
      {"{\"model\":\"m\",\"max_tokens\":7," MSGS ",\"stream\":false}",
       "{\"model\":\"u\",\"max_tokens\":7," MSGS ",\"stream\":true}"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *got = patched(AIR_DIALECT_ANTHROPIC, cases[i].in, set, 3);
    assert_string_equal(got, cases[i].out);
    free(got);
  }
}

static void patch_refuses_and_leaves_out_as_it_was(void **state) {
  (void)state;
  const char *b = "{\"model\":\"m\"," MSGS "}";
  air__request r;
  assert_true(air__request_fast(AIR_DIALECT_OPENAI, b, strlen(b), &r));
  air__patch nine[9];
  for (size_t i = 0; i < 9; i++)
    nine[i] = (air__patch){"k", "1", AIR__PATCH_SET};
  air__buf out;
  air__buf_init(&out, 64);
  assert_int_equal(air__buf_adds(&out, "before"), 0);
  assert_int_equal(air__request_patch(&r, nine, 9, &out), AIR_EINVAL);
  /* Over the buffer's maximum: nothing of the body is left behind. */
  const air__patch set[] = {
      {"model", "\"a-long-upstream-model-name\"", AIR__PATCH_SET}};
  assert_int_equal(air__request_patch(&r, set, 1, &out), AIR_ETOOBIG);
  assert_int_equal(out.n, 6);
  assert_string_equal(out.p, "before");
  /* A request from the jansson path has no text to patch. */
  air__request t;
  air_error err = {0};
  assert_int_equal(
      air__request_parse_tree(AIR_DIALECT_OPENAI, b, strlen(b), &t, &err), 0);
  assert_int_equal(air__request_patch(&t, set, 1, &out), AIR_EINVAL);
  air__request_cleanup(&t);
  air__buf_cleanup(&out);
  air__request_cleanup(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fast_path_takes_ordinary_bodies),
      cmocka_unit_test(fast_path_falls_back_where_documented),
      cmocka_unit_test(openai_patch_is_byte_exact),
      cmocka_unit_test(anthropic_default_only_where_missing_or_null),
      cmocka_unit_test(patch_refuses_and_leaves_out_as_it_was),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
