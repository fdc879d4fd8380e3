/*
 * Unit tests for src/codec/anthropic/: the Anthropic Messages dialect. Its
 * stream codec is replayed from transcripts by test_transcripts.c
 * (tests/data/README.md); here: request building, the decoder's edge
 * cases, bodies and the encoder's corners.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "airetry.h"
#include "classify.h"
#include "dialect.h"
#include "sse.h"
#include "tl_json.h"
#include "tl_parts.h"

#ifndef AIR_SOURCE_DIR
#error "AIR_SOURCE_DIR must name the source tree"
#endif

static const air__dialect_ops *const ops = &air__dialect_anthropic;

/* ---- decoder edge cases
 * -------------------------------------------------------- */

static void test_decode_block_bounds(void **state) {
  (void)state;
  tl_run r;
  tl_run_init(&r, ops);
  /* A tool_use block past the tracked range is malformed, not a crash. */
  tl_run_event(
      &r, "content_block_start",
      "{\"type\":\"content_block_start\",\"index\":128,\"content_block\":"
      "{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"n\",\"input\":{}}}");
  assert_int_equal(r.d.malformed, 1);
  assert_int_equal(r.n, 0);
  /* Negative and huge indices are malformed. */
  tl_run_event(&r, "content_block_delta",
               "{\"type\":\"content_block_delta\",\"index\":-1,\"delta\":"
               "{\"type\":\"text_delta\",\"text\":\"x\"}}");
  tl_run_event(
      &r, "content_block_delta",
      "{\"type\":\"content_block_delta\",\"index\":99999999999,\"delta\":"
      "{\"type\":\"text_delta\",\"text\":\"x\"}}");
  assert_int_equal(r.d.malformed, 3);
  /* Text on a block past the table still decodes (by the delta's type). */
  tl_run_event(&r, "content_block_delta",
               "{\"type\":\"content_block_delta\",\"index\":5000,\"delta\":"
               "{\"type\":\"text_delta\",\"text\":\"far\"}}");
  /* input_json_delta on a block never started: malformed; on a block past
   * the table: malformed. */
  tl_run_event(&r, "content_block_delta",
               "{\"type\":\"content_block_delta\",\"index\":7,\"delta\":"
               "{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}");
  tl_run_event(&r, "content_block_delta",
               "{\"type\":\"content_block_delta\",\"index\":500,\"delta\":"
               "{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}");
  assert_int_equal(r.d.malformed, 5);
  assert_string_equal(r.lines.p, "TEXT 5000 \"far\"\n");
  /* More tool blocks than AIR__DECODER_MAX_TOOLS: the extra ones are
   * malformed, every ordinal handed out is in range. */
  air__buf_reset(&r.lines);
  for (int i = 0; i < AIR__DECODER_MAX_TOOLS + 3; i++)
    tl_run_event(
        &r, "content_block_start",
        "{\"type\":\"content_block_start\",\"index\":3,\"content_block\":"
        "{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"n\",\"input\":{}}}");
  assert_int_equal(r.d.n_tools, AIR__DECODER_MAX_TOOLS);
  assert_int_equal(r.d.malformed, 5 + 3);
  assert_int_equal(r.agg.n_tools, AIR__DECODER_MAX_TOOLS);
  tl_run_event(
      &r, "content_block_delta",
      "{\"type\":\"content_block_delta\",\"index\":3,\"delta\":"
      "{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":1}\"}}");
  assert_string_equal(r.agg.tools[AIR__DECODER_MAX_TOOLS - 1].args.p,
                      "{\"a\":1}");
  tl_run_cleanup(&r);
}

static void test_decode_flags_and_stop(void **state) {
  (void)state;
  tl_run r;
  tl_run_init(&r, ops);
  tl_run_event(&r, "message_delta",
               "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":null},"
               "\"usage\":{\"output_tokens\":4}}");
  assert_true(r.d.usage_only);
  assert_false(r.d.finished);
  assert_string_equal(r.lines.p, "USAGE 0 4\n");
  tl_run_event(&r, "message_stop", "{\"type\":\"message_stop\"}");
  assert_false(r.d.usage_only);
  assert_true(r.d.terminator && r.d.done);
  tl_run_event(&r, "error",
               "{\"type\":\"error\",\"error\":{\"type\":\"api_error\","
               "\"message\":\"Internal \\\"server\\\" error\"}}");
  assert_false(r.d.terminator);
  assert_true(r.d.error_event);
  assert_true(r.d.done); /* sticky */
  /* Data that is not a JSON object: malformed, flags cleared. */
  tl_run_event(&r, "message_delta", "");
  assert_false(r.d.error_event);
  assert_int_equal(r.d.malformed, 1);
  /* ping: nothing, whatever its data; an unknown type: nothing. */
  tl_run_event(&r, "ping", "");
  tl_run_event(&r, "message", "{\"type\":\"brand_new\"}");
  tl_run_event(&r, "content_block_stop",
               "{\"type\":\"content_block_stop\",\"index\":0}");
  assert_int_equal(r.d.malformed, 1);
  /* The data's type wins over the event field. */
  tl_run_event(&r, "message", "{\"type\":\"message_stop\"}");
  assert_true(r.d.terminator);
  assert_string_equal(
      r.lines.p,
      "USAGE 0 4\nERROR \"api_error\" \"Internal \\\"server\\\" error\"\n");
  tl_run_cleanup(&r);

  /* The callback's non-zero value stops at once and is returned. */
  tl_run_init(&r, ops);
  r.stop_at = 1;
  int rc = tl_run_event(
      &r, "message_start",
      "{\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"x\","
      "\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}");
  assert_int_equal(rc, TL_STOP);
  assert_int_equal(r.n, 1);
  assert_true(r.d.started);
  tl_run_cleanup(&r);

  /* A bad usage count makes message_start malformed: no START. */
  tl_run_init(&r, ops);
  tl_run_event(
      &r, "message_start",
      "{\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"x\","
      "\"usage\":{\"input_tokens\":-3,\"output_tokens\":1}}}");
  tl_run_event(&r, "message_start", "{\"type\":\"message_start\"}");
  assert_int_equal(r.d.malformed, 2);
  assert_int_equal(r.n, 0);
  assert_false(r.d.started);
  /* A tool_use start with its input given at once passes it as a delta. */
  tl_run_event(
      &r, "content_block_start",
      "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":"
      "{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"n\",\"input\":{"
      "\"k\": [1, 2]}}}");
  /* A text block opening with text yields it. */
  tl_run_event(
      &r, "content_block_start",
      "{\"type\":\"content_block_start\",\"index\":1,\"content_block\":"
      "{\"type\":\"text\",\"text\":\"Hi\"}}");
  assert_string_equal(
      r.lines.p,
      "TOOL_START 0 \"t\" \"n\"\nTOOL_DELTA 0 \"{\\\"k\\\": [1, 2]}\"\n"
      "TEXT 1 \"Hi\"\n");
  tl_run_cleanup(&r);
}

/* ---- decode_body
 * ------------------------------------------------------------------ */

static void test_decode_body(void **state) {
  (void)state;
  static const char body[] =
      "{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\","
      "\"model\":\"claude-x\",\"content\":["
      "{\"type\":\"thinking\",\"thinking\":\"Hmm\",\"signature\":\"s\"},"
      "{\"type\":\"text\",\"text\":\"Caf\\u00e9\"},"
      "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"f\","
      "\"input\":{\"a\":1,\"b\":[true,null]}},"
      "{\"type\":\"tool_use\",\"id\":\"toolu_2\",\"name\":\"g\",\"input\":{}}],"
      "\"stop_reason\":\"tool_use\",\"stop_sequence\":null,"
      "\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":5,"
      "\"output_tokens\":7}}";
  tl_run r;
  tl_run_init(&r, ops);
  assert_int_equal(
      ops->decode_body(&r.d, body, sizeof(body) - 1, tl_run_part, &r), 0);
  assert_string_equal(r.lines.p,
                      "START \"msg_1\" \"claude-x\"\n"
                      "REASONING 0 \"Hmm\"\n"
                      "TEXT 1 \"Café\"\n"
                      "TOOL_START 0 \"toolu_1\" \"f\"\n"
                      "TOOL_DELTA 0 \"{\\\"a\\\":1,\\\"b\\\":[true,null]}\"\n"
                      "TOOL_START 1 \"toolu_2\" \"g\"\n"
                      "TOOL_DELTA 1 \"{}\"\n"
                      "FINISH tool_calls \"tool_use\"\n"
                      "USAGE 15 7\n");
  assert_true(r.d.started && r.d.finished);
  tl_run_cleanup(&r);

  static const char *const bad[] = {
      "",
      "not json",
      "[]",
      "{\"type\":\"error\",\"error\":{\"type\":\"api_error\"}}",
      "{\"id\":\"x\"}",
      "{\"type\":\"message\",\"content\":\"text\"}"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    tl_run_init(&r, ops);
    assert_int_equal(
        ops->decode_body(&r.d, bad[i], strlen(bad[i]), tl_run_part, &r),
        AIR_EPARSE);
    assert_int_equal(r.n, 0);
    tl_run_cleanup(&r);
  }
}

/* ---- air__request_build
 * --------------------------------------------------------------- */

static const air__build_opts base_opts = {.model = "claude-target",
                                          .default_max_tokens = 4096};

/* Builds from a caller body; returns the parsed upstream body (or NULL with
 * *rc set). *raw (optional) receives the bytes. */
static json_t *build(air_dialect dialect, const char *body,
                     const air__build_opts *o, int *rc, air_error *err,
                     char **raw) {
  air__request req;
  air_error perr;
  int prc = air__request_parse(dialect, body, strlen(body), &req, &perr);
  if (prc != 0) fail_msg("request_parse: %s", perr.message);
  air__buf out;
  air__buf_init(&out, 1u << 20);
  *rc = air__request_build(ops, &req, o, &out, err);
  air__request_cleanup(&req);
  json_t *v = NULL;
  if (*rc == 0) {
    v = json_loadb(out.p, out.n, JSON_REJECT_DUPLICATES, NULL);
    assert_non_null(v);
  } else {
    assert_int_equal(out.n, 0);
  }
  if (raw) {
    *raw = air__buf_take(&out, NULL);
  } else {
    air__buf_cleanup(&out);
  }
  return v;
}

static void test_build_same_dialect(void **state) {
  (void)state;
  int rc;
  air_error err;
  char *raw;
  /* Unknown fields pass through; model replaced; stream forced; default
   * max_tokens added at the end. */
  json_t *v = build(AIR_DIALECT_ANTHROPIC,
                    "{\"model\":\"smart\",\"messages\":[{\"role\":\"user\","
                    "\"content\":\"Hi\"}],\"stream\":false,\"temperature\":0.7,"
                    "\"x_future\":{\"deep\":[1,2.5,\"s\"]},\"top_k\":5}",
                    &base_opts, &rc, &err, &raw);
  assert_int_equal(rc, 0);
  assert_string_equal(
      raw,
      "{\"model\":\"claude-target\",\"messages\":[{\"role\":\"user\","
      "\"content\":\"Hi\"}],\"stream\":true,\"temperature\":0.7,"
      "\"x_future\":{\"deep\":[1,2.5,\"s\"]},\"top_k\":5,"
      "\"max_tokens\":4096}");
  free(raw);
  json_decref(v);

  /* The caller's max_tokens stays; an override wins over the caller's
   * fields, null removes one, and cannot change model or stream. */
  air__build_opts o = base_opts;
  o.override_json =
      "{\"max_tokens\":8192,\"top_k\":null,\"model\":\"evil\","
      "\"stream\":false,\"metadata\":{\"user_id\":\"u\"}}";
  o.default_max_tokens = 1000;
  v = build(AIR_DIALECT_ANTHROPIC,
            "{\"model\":\"smart\",\"messages\":[{\"role\":\"user\",\"content\":"
            "\"Hi\"}],\"max_tokens\":100,\"top_k\":5}",
            &o, &rc, &err, NULL);
  assert_int_equal(rc, 0);
  tl_expect_json(
      v,
      "{\"model\":\"claude-target\",\"messages\":[{\"role\":\"user\","
      "\"content\":\"Hi\"}],\"max_tokens\":8192,\"stream\":true,"
      "\"metadata\":{\"user_id\":\"u\"}}");
  json_decref(v);

  /* A default of 0 means 4096; a bad override is an error. */
  o = base_opts;
  o.default_max_tokens = 0;
  v = build(
      AIR_DIALECT_ANTHROPIC,
      "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
      &o, &rc, &err, NULL);
  assert_int_equal(json_integer_value(json_object_get(v, "max_tokens")), 4096);
  json_decref(v);
  o.override_json = "[1]";
  v = build(
      AIR_DIALECT_ANTHROPIC,
      "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
      &o, &rc, &err, NULL);
  assert_null(v);
  assert_int_equal(rc, AIR_EINVAL);
  assert_string_equal(err.message, "override: expected a JSON object");

  /* An output buffer too small: an error and nothing written. */
  air__request req;
  static const char tiny[] =
      "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}";
  assert_int_equal(air__request_parse(AIR_DIALECT_ANTHROPIC, tiny,
                                      sizeof(tiny) - 1, &req, &err),
                   0);
  air__buf small;
  air__buf_init(&small, 20);
  assert_int_equal(air__request_build(ops, &req, &base_opts, &small, &err),
                   AIR_EINVAL);
  assert_int_equal(small.n, 0);
  assert_string_equal(err.message, "body: too big");
  air__buf_cleanup(&small);
  air__request_cleanup(&req);
}

static void test_build_from_openai(void **state) {
  (void)state;
  int rc;
  air_error err;
  char *raw;
  static const char body[] =
      "{\"model\":\"smart\",\"stream\":true,"
      "\"stream_options\":{\"include_usage\":true},"
      "\"messages\":["
      "{\"role\":\"system\",\"content\":\"You are terse.\"},"
      "{\"role\":\"developer\",\"content\":[{\"type\":\"text\",\"text\":\"Use "
      "metric.\"}]},"
      "{\"role\":\"user\",\"content\":\"What is the weather?\"},"
      "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Here:\"},"
      "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/"
      "png;base64,iVBORw0KGgo=\",\"detail\":\"low\"}},"
      "{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://example.com/"
      "a.jpg\"}}]},"
      "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":["
      "{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_"
      "weather\","
      "\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}},"
      "{\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"now\","
      "\"arguments\":\"\"}}]},"
      "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"18C\"},"
      "{\"role\":\"tool\",\"tool_call_id\":\"call_2\",\"content\":[{\"type\":"
      "\"text\",\"text\":\"noon\"}]},"
      "{\"role\":\"user\",\"content\":\"Thanks\"},"
      "{\"role\":\"assistant\",\"content\":\"You're "
      "welcome.\",\"name\":\"bot\"},"
      "{\"role\":\"user\",\"content\":\"\"},"
      "{\"role\":\"system\",\"content\":\"Late rule.\"}],"
      "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_"
      "weather\","
      "\"description\":\"Weather\",\"parameters\":{\"type\":\"object\","
      "\"properties\":{\"city\":{\"type\":\"string\"}}},\"strict\":true}},"
      "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}],"
      "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_"
      "weather\"}},"
      "\"parallel_tool_calls\":false,"
      "\"stop\":\"END\",\"max_completion_tokens\":300,\"max_tokens\":50,"
      "\"temperature\":1.5,\"top_p\":0.9,\"user\":\"user-42\","
      "\"n\":1,\"presence_penalty\":0,\"logprobs\":false,\"store\":true,"
      "\"response_format\":{\"type\":\"text\"},\"seed\":null}";
  json_t *v = build(AIR_DIALECT_OPENAI, body, &base_opts, &rc, &err, &raw);
  if (rc != 0) fail_msg("build: %s", err.message);
  tl_expect_json(
      v,
      "{\"model\":\"claude-target\",\"max_tokens\":300,"
      "\"system\":\"You are terse.\\n\\nUse metric.\\n\\nLate rule.\","
      "\"messages\":["
      "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"What is "
      "the weather?\"},"
      "{\"type\":\"text\",\"text\":\"Here:\"},"
      "{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":"
      "\"image/png\",\"data\":\"iVBORw0KGgo=\"}},"
      "{\"type\":\"image\",\"source\":{\"type\":\"url\",\"url\":\"https://"
      "example.com/a.jpg\"}}]},"
      "{\"role\":\"assistant\",\"content\":["
      "{\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":\"get_weather\","
      "\"input\":{\"city\":\"Paris\"}},"
      "{\"type\":\"tool_use\",\"id\":\"call_2\",\"name\":\"now\",\"input\":{}}]"
      "},"
      "{\"role\":\"user\",\"content\":["
      "{\"type\":\"tool_result\",\"tool_use_id\":\"call_1\",\"content\":"
      "\"18C\"},"
      "{\"type\":\"tool_result\",\"tool_use_id\":\"call_2\",\"content\":[{"
      "\"type\":\"text\",\"text\":\"noon\"}]},"
      "{\"type\":\"text\",\"text\":\"Thanks\"}]},"
      "{\"role\":\"assistant\",\"content\":\"You're welcome.\"}],"
      "\"tools\":[{\"name\":\"get_weather\",\"description\":\"Weather\","
      "\"input_schema\":{\"type\":\"object\",\"properties\":{\"city\":{"
      "\"type\":\"string\"}}}},"
      "{\"name\":\"now\",\"input_schema\":{\"type\":\"object\",\"properties\":{"
      "}}}],"
      "\"tool_choice\":{\"type\":\"tool\",\"name\":\"get_weather\",\"disable_"
      "parallel_tool_use\":true},"
      "\"stop_sequences\":[\"END\"],\"temperature\":1.0,\"top_p\":0.9,"
      "\"metadata\":{\"user_id\":\"user-42\"},\"stream\":true}");
  /* Key order: model, max_tokens, system, messages first, stream last. */
  static const char head[] =
      "{\"model\":\"claude-target\",\"max_tokens\":300,\"system\":";
  assert_memory_equal(raw, head, sizeof(head) - 1);
  assert_non_null(
      strstr(raw, "\"metadata\":{\"user_id\":\"user-42\"},\"stream\":true}"));
  free(raw);
  json_decref(v);
  v = build(
      AIR_DIALECT_OPENAI,
      "{\"temperature\":0.5,\"model\":\"m\",\"messages\":[{\"role\":\"system\","
      "\"content\":\"S\"},{\"role\":\"user\",\"content\":\"Hi\"}],\"max_"
      "tokens\":5}",
      &base_opts, &rc, &err, &raw);
  assert_int_equal(rc, 0);
  assert_string_equal(
      raw,
      "{\"model\":\"claude-target\",\"max_tokens\":5,\"system\":\"S\","
      "\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
      "\"temperature\":0.5,\"stream\":true}");
  free(raw);
  json_decref(v);

  /* Simple cases: a lone user string stays a string; stop arrays; the
   * temperature is clamped, not scaled; max_tokens alone is used; the
   * default fills in; tool_choice strings. */
  static const struct {
    const char *in, *want;
  } cases[] = {
      {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
       "\"temperature\":0.3,\"stop\":[\"a\",\"b\"],\"max_tokens\":20,\"tool_"
       "choice\":\"auto\"}",
       "{\"model\":\"claude-target\",\"max_tokens\":20,\"messages\":[{\"role\":"
       "\"user\","
       "\"content\":\"Hi\"}],\"temperature\":0.3,\"stop_sequences\":[\"a\","
       "\"b\"],"
       "\"tool_choice\":{\"type\":\"auto\"},\"stream\":true}"},
      {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
       "\"temperature\":2,\"tool_choice\":\"required\"}",
       "{\"model\":\"claude-target\",\"messages\":[{\"role\":\"user\","
       "\"content\":\"Hi\"}],"
       "\"temperature\":1.0,\"tool_choice\":{\"type\":\"any\"},\"stream\":true,"
       "\"max_tokens\":4096}"},
      {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
       "\"temperature\":0,\"tool_choice\":\"none\",\"parallel_tool_calls\":"
       "false}",
       "{\"model\":\"claude-target\",\"messages\":[{\"role\":\"user\","
       "\"content\":\"Hi\"}],"
       "\"temperature\":0.0,\"tool_choice\":{\"type\":\"none\"},\"stream\":"
       "true,\"max_tokens\":4096}"},
      /* parallel_tool_calls false without a tool_choice: auto, no parallel. */
      {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
       "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
       "\"parameters\":{\"type\":\"object\"}}}],\"parallel_tool_calls\":false}",
       "{\"model\":\"claude-target\",\"messages\":[{\"role\":\"user\","
       "\"content\":\"Hi\"}],"
       "\"tools\":[{\"name\":\"f\",\"input_schema\":{\"type\":\"object\"}}],"
       "\"tool_choice\":{\"type\":\"auto\",\"disable_parallel_tool_use\":true},"
       "\"stream\":true,\"max_tokens\":4096}"},
      /* A refusal part of an assistant is text; assistant messages merge. */
      {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},"
       "{\"role\":\"assistant\",\"content\":[{\"type\":\"refusal\",\"refusal\":"
       "\"No.\"}]},"
       "{\"role\":\"assistant\",\"content\":\"Sorry.\"}]}",
       "{\"model\":\"claude-target\",\"messages\":[{\"role\":\"user\","
       "\"content\":\"Hi\"},"
       "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"No."
       "\"},"
       "{\"type\":\"text\",\"text\":\"Sorry.\"}]}],\"stream\":true,\"max_"
       "tokens\":4096}"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    v = build(AIR_DIALECT_OPENAI, cases[i].in, &base_opts, &rc, &err, NULL);
    if (rc != 0) fail_msg("case %zu: %s", i, err.message);
    tl_expect_json(v, cases[i].want);
    json_decref(v);
  }
}

/* Fields that are only hints to a provider (docs/design.md §5) are dropped for
 * an Anthropic target, never a reason to skip it (no drop_params needed). */
static void test_build_hints_dropped(void **state) {
  (void)state;
  static const char *const hints[] = {"\"logprobs\":true",
                                      "\"top_logprobs\":3",
                                      "\"presence_penalty\":0.5",
                                      "\"frequency_penalty\":-1",
                                      "\"logit_bias\":{\"50256\":-100}",
                                      "\"seed\":7",
                                      "\"service_tier\":\"flex\"",
                                      "\"prompt_cache_key\":\"k\"",
                                      "\"safety_identifier\":\"s\""};
  for (size_t i = 0; i < sizeof(hints) / sizeof(hints[0]); i++) {
    char body[512];
    snprintf(body, sizeof(body),
             "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
             "\"Hi\"}],%s}",
             hints[i]);
    int rc;
    air_error err;
    json_t *v = build(AIR_DIALECT_OPENAI, body, &base_opts, &rc, &err, NULL);
    if (rc != 0) fail_msg("hint %s: %s", hints[i], err.message);
    tl_expect_json(
        v,
        "{\"model\":\"claude-target\",\"messages\":[{\"role\":\"user\","
        "\"content\":\"Hi\"}],\"stream\":true,\"max_tokens\":4096}");
    json_decref(v);
  }
}

static void test_build_unsupported(void **state) {
  (void)state;
  static const struct {
    const char *extra; /* a field added to a minimal body */
    const char *field; /* the name the error must give */
  } cases[] = {
      {"\"n\":2", "n"},
      {"\"response_format\":{\"type\":\"grammar\"}", "response_format"},
      {"\"reasoning_effort\":\"extreme\"", "reasoning_effort"},
      {"\"x_unknown\":1", "x_unknown"},
      {"\"tool_choice\":{\"type\":\"allowed_tools\"}", "tool_choice"},
      {"\"tools\":[{\"type\":\"custom\",\"custom\":{\"name\":\"x\"}}]",
       "tools[0].type"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char body[512], want[128];
    snprintf(body, sizeof(body),
             "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
             "\"Hi\"}],%s}",
             cases[i].extra);
    int rc;
    air_error err;
    json_t *v = build(AIR_DIALECT_OPENAI, body, &base_opts, &rc, &err, NULL);
    assert_null(v);
    assert_int_equal(rc, AIR_ENOTSUP);
    assert_int_equal(err.code, AIR_ENOTSUP);
    snprintf(want, sizeof(want), "%s: not supported by anthropic upstreams",
             cases[i].field);
    assert_string_equal(err.message, want);
    /* drop_params: dropped, the rest translated. */
    air__build_opts o = base_opts;
    o.drop_params = true;
    v = build(AIR_DIALECT_OPENAI, body, &o, &rc, &err, NULL);
    if (rc != 0) fail_msg("drop %s: %s", cases[i].field, err.message);
    tl_expect_json(
        v,
        "{\"model\":\"claude-target\",\"messages\":[{\"role\":\"user\","
        "\"content\":\"Hi\"}],\"stream\":true,\"max_tokens\":4096}");
    json_decref(v);
  }

  /* Unsupported message pieces, named by path; dropped with drop_params. */
  static const struct {
    const char *messages, *field, *dropped;
  } msg_cases[] = {
      {"[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
       "{\"type\":\"input_audio\",\"input_audio\":{\"data\":\"x\",\"format\":"
       "\"wav\"}}]}]",
       "messages[0].content[1].input_audio",
       "[{\"role\":\"user\",\"content\":\"a\"}]"},
      {"[{\"role\":\"function\",\"name\":\"f\",\"content\":\"1\"},"
       "{\"role\":\"user\",\"content\":\"b\"}]",
       "messages[0].role", "[{\"role\":\"user\",\"content\":\"b\"}]"},
      {"[{\"role\":\"system\",\"content\":[{\"type\":\"image_url\",\"image_"
       "url\":"
       "{\"url\":\"https://x/"
       "y.png\"}}]},{\"role\":\"user\",\"content\":\"c\"}]",
       "messages[0].content[0].image_url",
       "[{\"role\":\"user\",\"content\":\"c\"}]"},
  };
  for (size_t i = 0; i < sizeof(msg_cases) / sizeof(msg_cases[0]); i++) {
    char body[512], want[160];
    snprintf(body, sizeof(body), "{\"model\":\"m\",\"messages\":%s}",
             msg_cases[i].messages);
    int rc;
    air_error err;
    assert_null(build(AIR_DIALECT_OPENAI, body, &base_opts, &rc, &err, NULL));
    snprintf(want, sizeof(want), "%s: not supported by anthropic upstreams",
             msg_cases[i].field);
    assert_string_equal(err.message, want);
    air__build_opts o = base_opts;
    o.drop_params = true;
    json_t *v = build(AIR_DIALECT_OPENAI, body, &o, &rc, &err, NULL);
    assert_int_equal(rc, 0);
    json_t *want_msgs = json_loads(msg_cases[i].dropped, 0, NULL);
    assert_true(json_equal(json_object_get(v, "messages"), want_msgs));
    json_decref(want_msgs);
    json_decref(v);
  }
}

static void test_build_invalid(void **state) {
  (void)state;
  static const struct {
    const char *messages, *message;
  } cases[] = {
      {"[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"type\":"
       "\"function\","
       "\"function\":{\"name\":\"f\",\"arguments\":\"{bad\"}}]}]",
       "messages[0].tool_calls[0].function.arguments: invalid JSON"},
      {"[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"type\":"
       "\"function\","
       "\"function\":{\"name\":\"f\",\"arguments\":\"[1]\"}}]}]",
       "messages[0].tool_calls[0].function.arguments: expected a JSON object"},
      {"[{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"function\","
       "\"function\":{\"name\":\"f\"}}]}]",
       "messages[0].tool_calls[0].id: expected a string"},
      {"[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":"
       "{\"url\":\"data:image/png,rawbytes\"}}]}]",
       "messages[0].content[0].image_url.url: expected a base64 data URL "
       "(data:TYPE;base64,...)"},
      {"[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":"
       "{\"url\":\"ftp://x/y.png\"}}]}]",
       "messages[0].content[0].image_url.url: expected an http(s) or base64 "
       "data URL"},
      {"[{\"role\":\"tool\",\"content\":\"x\"}]",
       "messages[0].tool_call_id: expected a string"},
      {"[{\"role\":\"user\",\"content\":7}]",
       "messages[0].content: expected a string or an array"},
      {"[{\"role\":\"system\",\"content\":\"only a system prompt\"}]",
       "messages: no user or assistant message"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char body[512];
    snprintf(body, sizeof(body), "{\"model\":\"m\",\"messages\":%s}",
             cases[i].messages);
    int rc;
    air_error err;
    air__build_opts o = base_opts;
    o.drop_params = true; /* invalid input is not a field to drop */
    assert_null(build(AIR_DIALECT_OPENAI, body, &o, &rc, &err, NULL));
    assert_int_equal(rc, AIR_EINVAL);
    assert_string_equal(err.message, cases[i].message);
  }
}

/* ---- encoder corners
 * --------------------------------------------------------------- */

static void encode_all(air__encoder *e, const air_part *p, size_t n,
                       air__buf *out) {
  for (size_t i = 0; i < n; i++)
    assert_int_equal(ops->encode_part(e, &p[i], out), 0);
}

static void test_encoder_corners(void **state) {
  (void)state;
  air__encoder e;
  air__buf out;
  air__buf_init(&out, 1u << 20);

  /* Passthrough: only the terminator, once. */
  ops->encoder_init(&e, NULL, 1);
  e.passthrough = true;
  assert_int_equal(ops->encode_end(&e, &out), 0);
  assert_int_equal(ops->encode_end(&e, &out), 0);
  assert_string_equal(
      out.p, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");

  /* The error event after content: no block stop, no message_stop, and
   * encode_end writes nothing after it. Model from the caller's request. */
  air__buf_reset(&out);
  air__request req = {.dialect = AIR_DIALECT_ANTHROPIC, .model = "smart"};
  ops->encoder_init(&e, &req, 1);
  air_part text = {.kind = AIR_PART_TEXT, .text = "Hi \"you\"", .text_len = 8};
  encode_all(&e, &text, 1, &out);
  assert_int_equal(ops->encode_error_event(&e, AIR_REASON_TIMEOUT_CHUNK,
                                           "no data for 30000 ms", &out),
                   0);
  assert_int_equal(ops->encode_end(&e, &out), 0);
  assert_string_equal(
      out.p,
      "event: message_start\ndata: "
      "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_airetry\","
      "\"type\":\"message\",\"role\":\"assistant\",\"model\":\"smart\","
      "\"content\":[],"
      "\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":"
      "0,\"output_tokens\":0}}}\n\n"
      "event: content_block_start\ndata: "
      "{\"type\":\"content_block_start\",\"index\":0,"
      "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
      "event: content_block_delta\ndata: "
      "{\"type\":\"content_block_delta\",\"index\":0,"
      "\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi \\\"you\\\"\"}}\n\n"
      "event: error\ndata: "
      "{\"type\":\"error\",\"error\":{\"type\":\"timeout_error\","
      "\"message\":\"no data for 30000 ms\"}}\n\n");

  /* Parts with no wire form write nothing; an empty stream still ends as a
   * whole message. */
  air__buf_reset(&out);
  ops->encoder_init(&e, NULL, 1);
  air_part quiet[] = {
      {.kind = AIR_PART_START,
       .id = "m1",
       .id_len = 2,
       .name = "x",
       .name_len = 1},
      {.kind = AIR_PART_USAGE, .input_tokens = 5, .output_tokens = 0},
      {.kind = AIR_PART_TEXT, .text = "", .text_len = 0},
      {.kind = AIR_PART_ERROR,
       .name = "api_error",
       .name_len = 9,
       .text = "x",
       .text_len = 1},
      {.kind = AIR_PART_FINISH,
       .finish = AIR_FINISH_PAUSE,
       .finish_raw = "pause_turn",
       .finish_raw_len = 10},
  };
  encode_all(&e, quiet, 5, &out);
  assert_int_equal(out.n, 0);
  assert_int_equal(ops->encode_end(&e, &out), 0);
  assert_string_equal(
      out.p,
      "event: message_start\ndata: "
      "{\"type\":\"message_start\",\"message\":{\"id\":\"m1\","
      "\"type\":\"message\",\"role\":\"assistant\",\"model\":\"x\",\"content\":"
      "[],"
      "\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":"
      "5,\"output_tokens\":0}}}\n\n"
      "event: message_delta\ndata: "
      "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"pause_turn\","
      "\"stop_sequence\":null},\"usage\":{\"input_tokens\":5,\"output_tokens\":"
      "0}}\n\n"
      "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");

  /* A tool index out of range is refused; a full buffer leaves out as it
   * was. */
  air_part bad_tool = {.kind = AIR_PART_TOOL_START,
                       .index = AIR__DECODER_MAX_TOOLS};
  assert_int_equal(ops->encode_part(&e, &bad_tool, &out), AIR_EINVAL);
  air__buf small;
  air__buf_init(&small, 40);
  ops->encoder_init(&e, NULL, 1);
  assert_int_equal(ops->encode_part(&e, &text, &small), AIR_ETOOBIG);
  assert_int_equal(small.n, 0);
  air__buf_cleanup(&small);
  air__buf_cleanup(&out);
}

/* ---- non-streaming bodies
 * ---------------------------------------------------------- */

static void test_encode_response(void **state) {
  (void)state;
  air__aggregate a;
  air__aggregate_init(&a);
  air_part parts[] = {
      {.kind = AIR_PART_START,
       .id = "chatcmpl-9",
       .id_len = 10,
       .name = "gpt-4o",
       .name_len = 6},
      {.kind = AIR_PART_REASONING, .text = "Think", .text_len = 5},
      {.kind = AIR_PART_TEXT, .text = "Line\n\"q\"", .text_len = 8},
      {.kind = AIR_PART_REFUSAL, .text = " no", .text_len = 3},
      {.kind = AIR_PART_TOOL_START,
       .index = 0,
       .id = "call_1",
       .id_len = 6,
       .name = "f",
       .name_len = 1},
      {.kind = AIR_PART_TOOL_DELTA,
       .index = 0,
       .text = "{\"a\": [1, 2]}",
       .text_len = 13},
      {.kind = AIR_PART_TOOL_START,
       .index = 1,
       .id = "call_2",
       .id_len = 6,
       .name = "g",
       .name_len = 1},
      {.kind = AIR_PART_TOOL_DELTA,
       .index = 1,
       .text = "{\"cut",
       .text_len = 5},
      {.kind = AIR_PART_TOOL_START,
       .index = 2,
       .id = "call_3",
       .id_len = 6,
       .name = "h",
       .name_len = 1},
      {.kind = AIR_PART_FINISH,
       .finish = AIR_FINISH_TOOL_CALLS,
       .finish_raw = "tool_calls",
       .finish_raw_len = 10},
      {.kind = AIR_PART_USAGE, .input_tokens = 12, .output_tokens = 34},
  };
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
    assert_int_equal(air__aggregate_add(&a, &parts[i]), 0);
  air__buf out;
  air__buf_init(&out, 1u << 20);
  assert_int_equal(ops->encode_response(&a, &out), 0);
  json_t *v = json_loadb(out.p, out.n, JSON_REJECT_DUPLICATES, NULL);
  assert_non_null(v);
  tl_expect_json(
      v,
      "{\"id\":\"chatcmpl-9\",\"type\":\"message\",\"role\":\"assistant\","
      "\"model\":\"gpt-4o\","
      "\"content\":[{\"type\":\"thinking\",\"thinking\":\"Think\","
      "\"signature\":\"\"},"
      "{\"type\":\"text\",\"text\":\"Line\\n\\\"q\\\" no\"},"
      "{\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":\"f\",\"input\":{"
      "\"a\":[1,2]}},"
      "{\"type\":\"tool_use\",\"id\":\"call_2\",\"name\":\"g\",\"input\":{}},"
      "{\"type\":\"tool_use\",\"id\":\"call_3\",\"name\":\"h\",\"input\":{}}],"
      "\"stop_reason\":\"tool_use\",\"stop_sequence\":null,"
      "\"usage\":{\"input_tokens\":12,\"output_tokens\":34}}");
  json_decref(v);
  air__aggregate_cleanup(&a);

  /* Empty: default id, end_turn, zero usage, empty content; stop_sequence
   * is kept from the raw reason. */
  air__aggregate_init(&a);
  air_part fin = {.kind = AIR_PART_FINISH,
                  .finish = AIR_FINISH_STOP,
                  .finish_raw = "stop_sequence",
                  .finish_raw_len = 13};
  assert_int_equal(air__aggregate_add(&a, &fin), 0);
  air__buf_reset(&out);
  assert_int_equal(ops->encode_response(&a, &out), 0);
  assert_string_equal(
      out.p,
      "{\"id\":\"msg_airetry\",\"type\":\"message\",\"role\":\"assistant\","
      "\"model\":\"\","
      "\"content\":[],\"stop_reason\":\"stop_sequence\",\"stop_sequence\":null,"
      "\"usage\":{\"input_tokens\":0,\"output_tokens\":0}}");
  air__aggregate_cleanup(&a);
  /* Finish mapping. */
  static const struct {
    air_finish f;
    const char *want;
  } m[] = {{AIR_FINISH_NONE, "end_turn"},
           {AIR_FINISH_STOP, "end_turn"},
           {AIR_FINISH_LENGTH, "max_tokens"},
           {AIR_FINISH_TOOL_CALLS, "tool_use"},
           {AIR_FINISH_CONTENT_FILTER, "refusal"},
           {AIR_FINISH_REFUSAL, "refusal"},
           {AIR_FINISH_CONTEXT, "model_context_window_exceeded"},
           {AIR_FINISH_PAUSE, "pause_turn"}};
  for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
    air__aggregate_init(&a);
    a.finish = m[i].f;
    air__buf_reset(&out);
    assert_int_equal(ops->encode_response(&a, &out), 0);
    v = json_loadb(out.p, out.n, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(v, "stop_reason")),
                        m[i].want);
    json_decref(v);
    air__aggregate_cleanup(&a);
  }
  air__buf_cleanup(&out);
}

static void test_encode_error_body(void **state) {
  (void)state;
  air_attempt log[2] = {
      {.n = 1,
       .target = "anthropic/claude-x",
       .reason = AIR_REASON_OVERLOADED,
       .status = 529,
       .message = "Overloaded",
       .request_id = "req_011",
       .ms = 120},
      {.n = 2,
       .target = "openai/gpt-4o",
       .reason = AIR_REASON_RATE_LIMIT,
       .status = 429,
       .message = "",
       .request_id = "",
       .ms = 35},
  };
  air__buf out;
  air__buf_init(&out, 1u << 20);
  assert_int_equal(
      ops->encode_error_body(429, AIR_REASON_RATE_LIMIT,
                             "every target \"failed\"", log, 2, &out),
      0);
  json_t *v = json_loadb(out.p, out.n, JSON_REJECT_DUPLICATES, NULL);
  assert_non_null(v);
  tl_expect_json(
      v,
      "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\","
      "\"message\":\"every target \\\"failed\\\"\"},\"attempts\":["
      "{\"target\":\"anthropic/"
      "claude-x\",\"reason\":\"overloaded\",\"status\":529,"
      "\"ms\":120,\"request_id\":\"req_011\"},"
      "{\"target\":\"openai/gpt-4o\",\"reason\":\"rate_limit\",\"status\":429,"
      "\"ms\":35,\"request_id\":null}]}");
  json_decref(v);
  air__buf_reset(&out);
  assert_int_equal(ops->encode_error_body(504, AIR_REASON_TIMEOUT_TOTAL, NULL,
                                          NULL, 0, &out),
                   0);
  assert_string_equal(
      out.p,
      "{\"type\":\"error\",\"error\":{\"type\":\"timeout_error\","
      "\"message\":\"\"},\"attempts\":[]}");
  air__buf_cleanup(&out);
}

static void test_ops_table(void **state) {
  (void)state;
  assert_int_equal(ops->api, AIR_DIALECT_ANTHROPIC);
  assert_string_equal(ops->name, "anthropic");
  assert_string_equal(ops->path, "/v1/messages");
  assert_ptr_equal(air__dialect_get(AIR_DIALECT_ANTHROPIC), ops);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ops_table),
      cmocka_unit_test(test_decode_block_bounds),
      cmocka_unit_test(test_decode_flags_and_stop),
      cmocka_unit_test(test_decode_body),
      cmocka_unit_test(test_build_same_dialect),
      cmocka_unit_test(test_build_from_openai),
      cmocka_unit_test(test_build_unsupported),
      cmocka_unit_test(test_build_hints_dropped),
      cmocka_unit_test(test_build_invalid),
      cmocka_unit_test(test_encoder_corners),
      cmocka_unit_test(test_encode_response),
      cmocka_unit_test(test_encode_error_body),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
