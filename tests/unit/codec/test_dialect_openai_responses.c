/*
 * The OpenAI Responses dialect (src/codec/openai_responses/). Its streams
 * are replayed from transcripts by test_transcripts.c (tests/data/README.md,
 * tests/data/openai_responses/); here: bodies, the encoder's failures after
 * commit, interleaved calls and refused parts, whole responses, error
 * bodies, and requests to and from the other dialects through the hub.
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

#include "canon.h"
#include "classify.h"
#include "limits.h"
#include "dialect.h"
#include "sse.h"
#include "tl_json.h"
#include "tl_parts.h"

static const air__dialect_ops *const OPS = &air__dialect_openai_responses;

/* The name of a failure event's error classifies (the error parts of
 * tests/data/openai_responses/ carry it). */
static void test_error_names_classify(void **s) {
  (void)s;
  assert_int_equal(
      air__classify(200, "overloaded_error", NULL, "busy", AIR_TRANSPORT_OK),
      AIR_REASON_OVERLOADED);
}

static void test_decode_body(void **s) {
  (void)s;
  static const char body[] =
      "{\"id\":\"resp_2\",\"object\":\"response\",\"model\":\"gpt-5\","
      "\"status\":\"completed\",\"output\":[{\"type\":\"reasoning\","
      "\"summary\":[{\"type\":\"summary_text\",\"text\":\"hm\"}]},"
      "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":"
      "\"output_text\",\"text\":\"Hello\"}]},{\"type\":\"function_call\","
      "\"call_id\":\"c1\",\"name\":\"f\",\"arguments\":\"{}\"}],\"usage\":"
      "{\"input_tokens\":3,\"output_tokens\":4}}";
  tl_run r;
  tl_run_init(&r, OPS);
  assert_int_equal(OPS->decode_body(&r.d, body, strlen(body), tl_run_part, &r),
                   0);
  assert_string_equal(r.lines.p,
                      "START \"resp_2\" \"gpt-5\"\nREASONING 0 \"hm\"\n"
                      "TEXT 0 \"Hello\"\nTOOL_START 0 \"c1\" \"f\"\n"
                      "TOOL_DELTA 0 \"{}\"\n"
                      "FINISH tool_calls \"completed\"\nUSAGE 3 4\n");
  air__buf_reset(&r.lines);
  assert_int_equal(OPS->decode_body(&r.d, "{}", 2, tl_run_part, &r),
                   AIR_EPARSE);
  assert_int_equal(r.lines.n, 0);
  tl_run_cleanup(&r);
}

/* ---- encoding ---------------------------------------------------------------
 */

typedef struct enc_run {
  air__encoder e;
  air__buf out;
} enc_run;

static void enc_begin(enc_run *r) {
  OPS->encoder_init(&r->e, NULL, 1718000000);
  air__buf_init(&r->out, 1u << 20);
}

static void enc_part(enc_run *r, air_part p) {
  assert_int_equal(OPS->encode_part(&r->e, &p, &r->out), 0);
}

static void enc_done(enc_run *r) {
  air__encoder_cleanup(&r->e);
  air__buf_cleanup(&r->out);
}

/* The "type" of every event in order, space-separated, and a check that
 * each data is JSON with a sequence_number one more than the last. */
static void event_types(const char *s, air__buf *types) {
  long long seq = 0;
  for (const char *p = strstr(s, "data: "); p != NULL;
       p = strstr(p + 1, "\ndata: ")) {
    p = p[0] == '\n' ? p + 1 : p;
    const char *e = strstr(p, "\n\n");
    assert_non_null(e);
    json_t *j = json_loadb(p + 6, (size_t)(e - p - 6), 0, NULL);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "sequence_number")),
                     seq++);
    if (types->n > 0) assert_int_equal(air__buf_addc(types, ' '), 0);
    assert_int_equal(
        air__buf_adds(types, json_string_value(json_object_get(j, "type"))), 0);
    json_decref(j);
  }
}

#define PART(...) ((air_part){__VA_ARGS__})

/* A length finish ends with response.incomplete; a failure after commit
 * with response.failed and an error event, never response.completed. */
static void test_encode_incomplete_and_failed(void **s) {
  (void)s;
  enc_run r;
  enc_begin(&r);
  enc_part(&r, PART(.kind = AIR_PART_TEXT, .text = "a", .text_len = 1));
  enc_part(&r, PART(.kind = AIR_PART_FINISH, .finish = AIR_FINISH_LENGTH));
  assert_int_equal(OPS->encode_end(&r.e, &r.out), 0);
  assert_non_null(strstr(r.out.p, "event: response.incomplete\n"));
  assert_non_null(strstr(
      r.out.p, "\"incomplete_details\":{\"reason\":\"max_output_tokens\"}"));
  assert_null(strstr(r.out.p, "response.completed"));
  assert_int_equal(OPS->encode_end(&r.e, &r.out), AIR_ESTATE);
  enc_done(&r);

  enc_begin(&r);
  enc_part(&r, PART(.kind = AIR_PART_TEXT, .text = "part", .text_len = 4));
  assert_int_equal(OPS->encode_error_event(&r.e, AIR_REASON_NETWORK,
                                           "cut (network)", &r.out),
                   0);
  air__buf types;
  air__buf_init(&types, 1u << 16);
  event_types(r.out.p, &types);
  assert_string_equal(
      types.p,
      "response.created response.in_progress response.output_item.added "
      "response.content_part.added response.output_text.delta "
      "response.output_text.done response.content_part.done "
      "response.output_item.done response.failed error");
  assert_non_null(strstr(r.out.p,
                         "\"status\":\"failed\",\"error\":{\"code\":"
                         "\"network\",\"message\":\"cut (network)\"}"));
  assert_non_null(strstr(r.out.p, "\"status\":\"incomplete\",\"role\""));
  assert_null(strstr(r.out.p, "response.completed"));
  air__buf_cleanup(&types);
  enc_done(&r);

  /* Interleaved calls are concurrent items, each with its own output
   * index; arguments for a call closed by text in between cannot be
   * placed: an error, not a lost piece. */
  enc_begin(&r);
  enc_part(&r, PART(.kind = AIR_PART_TOOL_START, .index = 0, .id = "a",
                    .id_len = 1, .name = "f", .name_len = 1));
  enc_part(&r, PART(.kind = AIR_PART_TOOL_START, .index = 1, .id = "b",
                    .id_len = 1, .name = "g", .name_len = 1));
  enc_part(&r, PART(.kind = AIR_PART_TOOL_DELTA, .index = 1,
                    .text = "{\"y\":2}", .text_len = 7));
  enc_part(&r, PART(.kind = AIR_PART_TOOL_DELTA, .index = 0,
                    .text = "{\"x\":1}", .text_len = 7));
  assert_int_equal(OPS->encode_end(&r.e, &r.out), 0);
  tl_run back;
  tl_run_init(&back, OPS);
  tl_run_sse(&back, r.out.p, r.out.n, 0);
  assert_string_equal(back.lines.p,
                      "START \"resp_airetry\" \"\"\n"
                      "TOOL_START 0 \"a\" \"f\"\nTOOL_START 1 \"b\" \"g\"\n"
                      "TOOL_DELTA 1 \"{\\\"y\\\":2}\"\n"
                      "TOOL_DELTA 0 \"{\\\"x\\\":1}\"\n"
                      "FINISH tool_calls \"completed\"\n"
                      "STATE malformed=0 done=1 finished=1\n");
  tl_run_cleanup(&back);
  assert_non_null(strstr(r.out.p,
                         "\"output\":[{\"id\":\"fc_airetry_0\","
                         "\"type\":\"function_call\",\"status\":"
                         "\"completed\",\"call_id\":\"a\",\"name\":"
                         "\"f\",\"arguments\":\"{\\\"x\\\":1}\"}"));
  enc_done(&r);

  /* Text after a call is a new message item; the call's later arguments
   * still go to the call. Arguments of a call never started: an error. */
  enc_begin(&r);
  enc_part(&r, PART(.kind = AIR_PART_TEXT, .text = "a", .text_len = 1));
  enc_part(&r, PART(.kind = AIR_PART_TOOL_START, .index = 0, .id = "c",
                    .id_len = 1, .name = "f", .name_len = 1));
  enc_part(&r, PART(.kind = AIR_PART_TEXT, .text = "b", .text_len = 1));
  enc_part(&r, PART(.kind = AIR_PART_TOOL_DELTA, .index = 0, .text = "{}",
                    .text_len = 2));
  air_part late = {
      .kind = AIR_PART_TOOL_DELTA, .index = 5, .text = "{}", .text_len = 2};
  size_t n = r.out.n;
  assert_int_equal(OPS->encode_part(&r.e, &late, &r.out), AIR_EINVAL);
  assert_int_equal(r.out.n, n);
  assert_int_equal(OPS->encode_end(&r.e, &r.out), 0);
  const char *c = strstr(r.out.p, "data: {\"type\":\"response.completed\"");
  assert_non_null(c);
  assert_non_null(
      strstr(c,
             "\"output\":[{\"id\":\"msg_airetry_0\",\"type\":\"message\","
             "\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{"
             "\"type\":\"output_text\",\"text\":\"a\",\"annotations\":[],"
             "\"logprobs\":[]}]},{\"id\":\"fc_airetry_1\",\"type\":"
             "\"function_call\",\"status\":\"completed\",\"call_id\":\"c\","
             "\"name\":\"f\",\"arguments\":\"{}\"},{\"id\":\"msg_airetry_2\""));
  enc_done(&r);
}

static void test_encode_response_and_error_body(void **s) {
  (void)s;
  air__aggregate a;
  air__aggregate_init(&a);
  air_part parts[] = {
      {.kind = AIR_PART_START,
       .id = "msg_9",
       .id_len = 5,
       .name = "claude",
       .name_len = 6},
      {.kind = AIR_PART_TEXT, .text = "Hi", .text_len = 2},
      {.kind = AIR_PART_TOOL_START,
       .index = 0,
       .id = "t1",
       .id_len = 2,
       .name = "f",
       .name_len = 1},
      {.kind = AIR_PART_FINISH, .finish = AIR_FINISH_TOOL_CALLS},
      {.kind = AIR_PART_USAGE, .input_tokens = 1, .output_tokens = 2}};
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
    assert_int_equal(air__aggregate_add(&a, &parts[i]), 0);
  a.created = 7;
  air__buf out;
  air__buf_init(&out, 1u << 16);
  assert_int_equal(OPS->encode_response(&a, &out), 0);
  json_t *j = json_loadb(out.p, out.n, 0, NULL);
  assert_non_null(j);
  assert_string_equal(json_string_value(json_object_get(j, "object")),
                      "response");
  assert_string_equal(json_string_value(json_object_get(j, "id")),
                      "resp_msg_9");
  json_t *o = json_object_get(j, "output");
  assert_int_equal(json_array_size(o), 2);
  assert_string_equal(
      json_string_value(json_object_get(json_array_get(o, 1), "arguments")),
      "{}");
  assert_int_equal(json_integer_value(json_object_get(j, "created_at")), 7);
  json_decref(j);
  air__aggregate_cleanup(&a);

  air__buf_reset(&out);
  air_attempt log[2] = {{.target = "p/a",
                         .reason = AIR_REASON_RATE_LIMIT,
                         .status = 429,
                         .ms = 3,
                         .request_id = "r1"},
                        {.target = "q/b", .skipped = true, .field = "stop"}};
  assert_int_equal(
      OPS->encode_error_body(429, AIR_REASON_RATE_LIMIT, "slow", log, 2, &out),
      0);
  assert_string_equal(
      out.p,
      "{\"error\":{\"message\":\"slow\",\"type\":\"rate_limit_exceeded\","
      "\"code\":\"rate_limit\",\"param\":null,\"attempts\":[{\"target\":"
      "\"p/a\",\"reason\":\"rate_limit\",\"status\":429,\"ms\":3,"
      "\"request_id\":\"r1\"},{\"target\":\"q/b\",\"outcome\":\"skipped\","
      "\"field\":\"stop\"}]}}");
  air__buf_cleanup(&out);
}

/* ---- requests through the hub
 * ------------------------------------------------
 */

static json_t *build(air_dialect from, const char *body,
                     const air__dialect_ops *to, int want_rc,
                     const char *want_msg) {
  air__request r;
  air_error err = {0};
  assert_int_equal(air__request_parse(from, body, strlen(body), &r, &err), 0);
  air__build_opts o = {.model = "up", .default_max_tokens = 4096};
  air__buf out;
  air__buf_init(&out, 1u << 20);
  int rc = air__request_build(to, &r, &o, &out, &err);
  assert_int_equal(rc, want_rc);
  json_t *j = NULL;
  if (rc == 0) {
    j = json_loadb(out.p, out.n, 0, NULL);
    assert_non_null(j);
  } else {
    assert_string_equal(err.message, want_msg);
  }
  air__buf_cleanup(&out);
  air__request_cleanup(&r);
  return j;
}

/* got is the value want holds; got is freed. */
static void expect_json(json_t *got, const char *want) {
  tl_expect_json(got, want);
  json_decref(got);
}

static void test_requests(void **s) {
  (void)s;
  /* A Responses caller (Codex's shape) to a chat target. */
  expect_json(
      build(AIR_DIALECT_OPENAI_RESPONSES,
            "{\"model\":\"r\",\"instructions\":\"Be brief\",\"input\":["
            "{\"type\":\"message\",\"role\":\"developer\",\"content\":[{"
            "\"type\":\"input_text\",\"text\":\"dev\"}]},"
            "{\"role\":\"user\",\"content\":\"hi\"},"
            "{\"type\":\"reasoning\",\"summary\":[],\"encrypted_content\":"
            "\"xx\"},"
            "{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"ls\","
            "\"arguments\":\"{}\"},"
            "{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":"
            "\"ok\"}],"
            "\"tools\":[{\"type\":\"function\",\"name\":\"ls\",\"parameters\":"
            "{\"type\":\"object\"}},{\"type\":\"web_search\"},{\"type\":"
            "\"namespace\",\"name\":\"ns\",\"tools\":[{\"type\":\"function\","
            "\"name\":\"cat\"}]}],"
            "\"reasoning\":{\"effort\":\"low\"},\"store\":false,\"include\":["
            "\"reasoning.encrypted_content\"],\"prompt_cache_key\":\"k\","
            "\"max_output_tokens\":99,\"stream\":true}",
            &air__dialect_openai_chat, 0, NULL),
      "{\"model\":\"up\",\"stream\":true,\"stream_options\":{"
      "\"include_usage\":true},\"max_tokens\":99,\"reasoning_effort\":"
      "\"low\",\"messages\":["
      "{\"role\":\"system\",\"content\":\"Be brief\"},"
      "{\"role\":\"developer\",\"content\":\"dev\"},"
      "{\"role\":\"user\",\"content\":\"hi\"},"
      "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":"
      "\"c1\",\"type\":\"function\",\"function\":{\"name\":\"ls\","
      "\"arguments\":\"{}\"}}]},"
      "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"ok\"}],"
      "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"ls\","
      "\"parameters\":{\"type\":\"object\"}}},{\"type\":\"function\","
      "\"function\":{\"name\":\"cat\",\"parameters\":{\"type\":\"object\","
      "\"properties\":{}}}}]}");
  /* Stateful and structured fields skip a target of another dialect. */
  build(AIR_DIALECT_OPENAI_RESPONSES,
        "{\"model\":\"r\",\"input\":\"x\",\"previous_response_id\":\"resp_1\"}",
        &air__dialect_anthropic, AIR_ENOTSUP,
        "previous_response_id: not supported by anthropic upstreams");
  build(AIR_DIALECT_OPENAI_RESPONSES,
        "{\"model\":\"r\",\"input\":[{\"type\":\"item_reference\",\"id\":"
        "\"m\"}]}",
        &air__dialect_openai_chat, AIR_ENOTSUP,
        "input[0].item_reference: not supported by openai upstreams");
  /* A chat caller to a Responses target; stop cannot be said there. */
  expect_json(
      build(AIR_DIALECT_OPENAI,
            "{\"model\":\"c\",\"messages\":[{\"role\":\"system\",\"content\":"
            "\"S\"},{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":5,"
            "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
            "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":"
            "\"f\"}},\"temperature\":3}",
            &air__dialect_openai_responses, 0, NULL),
      "{\"model\":\"up\",\"stream\":true,\"store\":false,\"input\":["
      "{\"type\":\"message\",\"role\":\"system\",\"content\":[{\"type\":"
      "\"input_text\",\"text\":\"S\"}]},{\"type\":\"message\",\"role\":"
      "\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"hi\"}]}],"
      "\"max_output_tokens\":5,\"temperature\":2.0,\"tools\":[{\"type\":"
      "\"function\",\"name\":\"f\",\"strict\":false,\"parameters\":{\"type\":"
      "\"object\",\"properties\":{}}}],\"tool_choice\":{\"type\":\"function\","
      "\"name\":\"f\"}}");
  build(AIR_DIALECT_OPENAI,
        "{\"model\":\"c\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
        "\"stop\":[\"END\"]}",
        &air__dialect_openai_responses, AIR_ENOTSUP,
        "stop: not supported by openai_responses upstreams");
  /* Same dialect: the caller's text with model and stream set. */
  expect_json(build(AIR_DIALECT_OPENAI_RESPONSES,
                    "{\"model\":\"r\",\"input\":\"x\",\"store\":true,"
                    "\"previous_response_id\":\"resp_1\"}",
                    &air__dialect_openai_responses, 0, NULL),
              "{\"model\":\"up\",\"input\":\"x\",\"store\":true,"
              "\"previous_response_id\":\"resp_1\",\"stream\":true}");
}

/* The target's body built from a caller's body under structured (NULL
 * json_tool: not asked). */
static json_t *build_so(air_dialect from, const char *body,
                        const air__dialect_ops *to, air__structured so,
                        bool *json_tool, int want_rc, const char *want_msg) {
  air__request r;
  air_error err = {0};
  assert_int_equal(air__request_parse(from, body, strlen(body), &r, &err), 0);
  air__build_opts o = {.model = "up",
                       .default_max_tokens = 4096,
                       .structured_output = so,
                       .json_tool = json_tool};
  air__buf out;
  air__buf_init(&out, 1u << 20);
  int rc = air__request_build(to, &r, &o, &out, &err);
  assert_int_equal(rc, want_rc);
  json_t *j = NULL;
  if (rc == 0) {
    j = json_loadb(out.p, out.n, 0, NULL);
    assert_non_null(j);
  } else {
    assert_string_equal(err.message, want_msg);
  }
  air__buf_cleanup(&out);
  air__request_cleanup(&r);
  return j;
}

/* The JSON text of root's member at the dotted path (NULL: absent). */
static char *member(const json_t *root, const char *path) {
  char key[64];
  const json_t *v = root;
  while (v != NULL && *path != '\0') {
    size_t n = strcspn(path, ".");
    snprintf(key, sizeof(key), "%.*s", (int)n, path);
    v = json_object_get(v, key);
    path += n + (path[n] == '.');
  }
  return v != NULL
             ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS)
             : NULL;
}

static void expect_member(const json_t *root, const char *path,
                          const char *want) {
  char *got = member(root, path);
  if (want == NULL) {
    if (got != NULL) fprintf(stderr, "%s: %s\n", path, got);
    assert_null(got);
    return;
  }
  if (got == NULL || strcmp(got, want) != 0)
    fprintf(stderr, "%s: got %s\n", path, got != NULL ? got : "(absent)");
  assert_non_null(got);
  assert_string_equal(got, want);
  free(got);
}

#define RSP_SCHEMA                                                     \
  "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}}," \
  "\"required\":[\"a\"]}"

/* text.format and reasoning.effort mean what chat's response_format and
 * reasoning_effort mean, both ways. */
static void test_format_and_reasoning(void **s) {
  (void)s;
  const char *rsp_schema =
      "{\"model\":\"r\",\"input\":\"x\",\"text\":{\"format\":{\"type\":"
      "\"json_schema\",\"name\":\"s\",\"strict\":true,\"schema\":" RSP_SCHEMA
      "},\"verbosity\":\"low\"},\"reasoning\":{\"effort\":\"medium\","
      "\"summary\":\"auto\"}}";
  /* To chat: response_format json_schema, reasoning_effort. */
  json_t *j =
      build_so(AIR_DIALECT_OPENAI_RESPONSES, rsp_schema,
               &air__dialect_openai_chat, AIR__STRUCT_TOOL, NULL, 0, NULL);
  expect_member(j, "response_format",
                "{\"json_schema\":{\"name\":\"s\",\"schema\":{\"properties\":"
                "{\"a\":{\"type\":\"string\"}},\"required\":[\"a\"],\"type\":"
                "\"object\"},\"strict\":true},\"type\":\"json_schema\"}");
  expect_member(j, "reasoning_effort", "\"medium\"");
  expect_member(j, "text", NULL);
  expect_member(j, "reasoning", NULL);
  json_decref(j);
  /* json_object to chat. */
  j = build_so(AIR_DIALECT_OPENAI_RESPONSES,
               "{\"model\":\"r\",\"input\":\"x\",\"text\":{\"format\":{"
               "\"type\":\"json_object\"}}}",
               &air__dialect_openai_chat, AIR__STRUCT_TOOL, NULL, 0, NULL);
  expect_member(j, "response_format", "{\"type\":\"json_object\"}");
  json_decref(j);
  /* To Anthropic, native: output_config.format; the effort as a thinking
   * budget. */
  j = build_so(AIR_DIALECT_OPENAI_RESPONSES, rsp_schema,
               &air__dialect_anthropic, AIR__STRUCT_NATIVE, NULL, 0, NULL);
  expect_member(j, "output_config.format.type", "\"json_schema\"");
  expect_member(j, "output_config.format.schema.required", "[\"a\"]");
  expect_member(j, "thinking.budget_tokens", "8192");
  json_decref(j);
  /* To Anthropic through the forced tool: with thinking it cannot be said
   * (the names are the Responses caller's fields); without, the tool. */
  build_so(AIR_DIALECT_OPENAI_RESPONSES, rsp_schema, &air__dialect_anthropic,
           AIR__STRUCT_TOOL, NULL, AIR_ENOTSUP,
           "reasoning.effort with text.format (structured_output: tool): not "
           "supported by anthropic upstreams");
  bool jt = false;
  j = build_so(AIR_DIALECT_OPENAI_RESPONSES,
               "{\"model\":\"r\",\"input\":\"x\",\"text\":{\"format\":{"
               "\"type\":\"json_schema\",\"name\":\"s\",\"schema\":" RSP_SCHEMA
               "}}}",
               &air__dialect_anthropic, AIR__STRUCT_TOOL, &jt, 0, NULL);
  assert_true(jt);
  expect_member(j, "tool_choice",
                "{\"name\":\"" AIR__JSON_TOOL "\",\"type\":\"tool\"}");
  json_decref(j);
  /* Unknown format types and effort values still skip. */
  build_so(AIR_DIALECT_OPENAI_RESPONSES,
           "{\"model\":\"r\",\"input\":\"x\",\"text\":{\"format\":{"
           "\"type\":\"grammar\"}}}",
           &air__dialect_openai_chat, AIR__STRUCT_TOOL, NULL, AIR_ENOTSUP,
           "text.format: not supported by openai upstreams");
  build_so(AIR_DIALECT_OPENAI_RESPONSES,
           "{\"model\":\"r\",\"input\":\"x\",\"reasoning\":{\"effort\":"
           "\"extreme\"}}",
           &air__dialect_anthropic, AIR__STRUCT_TOOL, NULL, AIR_ENOTSUP,
           "reasoning.effort: not supported by anthropic upstreams");
  build_so(AIR_DIALECT_OPENAI_RESPONSES,
           "{\"model\":\"r\",\"input\":\"x\",\"text\":{\"format\":{"
           "\"type\":\"json_schema\",\"schema\":3}}}",
           &air__dialect_openai_chat, AIR__STRUCT_TOOL, NULL, AIR_EINVAL,
           "text.format.schema: expected an object");

  /* The reverse: chat's response_format and reasoning_effort as
   * text.format and reasoning.effort (no summary: chat shows none). */
  j = build_so(AIR_DIALECT_OPENAI,
               "{\"model\":\"c\",\"messages\":[{\"role\":\"user\","
               "\"content\":\"x\"}],\"reasoning_effort\":\"high\","
               "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":"
               "{\"name\":\"s\",\"strict\":false,\"schema\":" RSP_SCHEMA "}}}",
               &air__dialect_openai_responses, AIR__STRUCT_TOOL, NULL, 0, NULL);
  expect_member(j, "text",
                "{\"format\":{\"name\":\"s\",\"schema\":{\"properties\":{"
                "\"a\":{\"type\":\"string\"}},\"required\":[\"a\"],\"type\":"
                "\"object\"},\"strict\":false,\"type\":\"json_schema\"}}");
  expect_member(j, "reasoning", "{\"effort\":\"high\"}");
  expect_member(j, "response_format", NULL);
  json_decref(j);
  j = build_so(AIR_DIALECT_OPENAI,
               "{\"model\":\"c\",\"messages\":[{\"role\":\"user\","
               "\"content\":\"x\"}],\"response_format\":{\"type\":"
               "\"json_object\"}}",
               &air__dialect_openai_responses, AIR__STRUCT_TOOL, NULL, 0, NULL);
  expect_member(j, "text", "{\"format\":{\"type\":\"json_object\"}}");
  expect_member(j, "reasoning", NULL);
  json_decref(j);
  /* Anthropic thinking: the budget's effort, with the summary streamed
   * back as thinking; output_config.format as text.format. */
  j = build_so(AIR_DIALECT_ANTHROPIC,
               "{\"model\":\"a\",\"max_tokens\":20000,\"messages\":[{\"role\":"
               "\"user\",\"content\":\"x\"}],\"thinking\":{\"type\":"
               "\"enabled\",\"budget_tokens\":2000},\"output_config\":{"
               "\"format\":{\"type\":\"json_schema\",\"schema\":" RSP_SCHEMA
               "}}}",
               &air__dialect_openai_responses, AIR__STRUCT_TOOL, NULL, 0, NULL);
  expect_member(j, "reasoning", "{\"effort\":\"low\",\"summary\":\"auto\"}");
  expect_member(j, "text.format.type", "\"json_schema\"");
  expect_member(j, "text.format.name", "\"output\"");
  expect_member(j, "text.format.schema.required", "[\"a\"]");
  json_decref(j);
}

/* The build and can_express of body (a Responses caller's) for target
 * under o agree: rc, and msg when not 0. */
static void stateful_case(const char *body, const air__dialect_ops *to,
                          const air__build_opts *o, int want_rc,
                          const char *want_msg) {
  air__request r;
  air_error err = {0};
  assert_int_equal(air__request_parse(AIR_DIALECT_OPENAI_RESPONSES, body,
                                      strlen(body), &r, &err),
                   0);
  assert_int_equal(air__request_can_express(to, &r, o, &err), want_rc);
  if (want_rc != 0) assert_string_equal(err.message, want_msg);
  air__buf out;
  air__buf_init(&out, 1u << 20);
  assert_int_equal(air__request_build(to, &r, o, &out, &err), want_rc);
  if (want_rc != 0) {
    assert_string_equal(err.message, want_msg);
    assert_int_equal(out.n, 0);
  }
  air__buf_cleanup(&out);
  air__request_cleanup(&r);
}

/* State kept upstream goes only to the provider that keeps it: a Responses
 * target of another provider, or a target of another dialect (drop_params
 * or not), is skipped naming the field. */
static void test_stateful_same_provider(void **s) {
  (void)s;
  const air__build_opts same = {.model = "up"};
  const air__build_opts other = {.model = "up", .other_provider = true};
  const air__build_opts other_drop = {
      .model = "up", .other_provider = true, .drop_params = true};
  const air__build_opts drop = {.model = "up", .drop_params = true};
  const char *prev =
      "{\"model\":\"r\",\"input\":\"x\",\"previous_response_id\":\"resp_1\"}";
  stateful_case(prev, &air__dialect_openai_responses, &same, 0, NULL);
  stateful_case(prev, &air__dialect_openai_responses, &other, AIR_ENOTSUP,
                "previous_response_id: not supported by another provider's "
                "openai_responses upstreams");
  stateful_case(prev, &air__dialect_openai_responses, &other_drop, AIR_ENOTSUP,
                "previous_response_id: not supported by another provider's "
                "openai_responses upstreams");
  stateful_case(prev, &air__dialect_anthropic, &drop, AIR_ENOTSUP,
                "previous_response_id: not supported by anthropic upstreams");
  stateful_case(
      "{\"model\":\"r\",\"input\":[{\"role\":\"user\",\"content\":\"a\"},"
      "{\"type\":\"item_reference\",\"id\":\"msg_1\"}]}",
      &air__dialect_openai_responses, &other, AIR_ENOTSUP,
      "input[1].item_reference: not supported by another provider's "
      "openai_responses upstreams");
  stateful_case(
      "{\"model\":\"r\",\"input\":\"x\",\"conversation\":\"conv_1\"}",
      &air__dialect_openai_responses, &other, AIR_ENOTSUP,
      "conversation: not supported by another provider's openai_responses "
      "upstreams");
  stateful_case("{\"model\":\"r\",\"input\":\"x\",\"background\":true}",
                &air__dialect_openai_chat, &drop, AIR_ENOTSUP,
                "background: not supported by openai upstreams");
  stateful_case("{\"model\":\"r\",\"input\":\"x\",\"background\":true}",
                &air__dialect_openai_responses, &other, AIR_ENOTSUP,
                "background: not supported by another provider's "
                "openai_responses upstreams");
  /* Nothing stateful: any provider. */
  stateful_case(
      "{\"model\":\"r\",\"input\":\"x\",\"background\":false,"
      "\"store\":true}",
      &air__dialect_openai_responses, &other, 0, NULL);
  stateful_case("{\"model\":\"r\",\"input\":\"x\",\"prompt_cache_key\":\"k\"}",
                &air__dialect_anthropic, &other, 0, NULL);
}

/* Built-in tools are named once each for x-airetry-dropped. */
static void test_dropped_tools(void **s) {
  (void)s;
  const char *body =
      "{\"model\":\"r\",\"input\":\"x\",\"tools\":[{\"type\":\"web_search\"},"
      "{\"type\":\"function\",\"name\":\"f\"},{\"type\":\"file_search\"},"
      "{\"type\":\"web_search\"}]}";
  air__request r;
  air_error err = {0};
  const air__build_opts o = {.model = "up"};
  assert_int_equal(air__request_parse(AIR_DIALECT_OPENAI_RESPONSES, body,
                                      strlen(body), &r, &err),
                   0);
  assert_int_equal(
      air__request_can_express(&air__dialect_openai_chat, &r, &o, &err), 0);
  assert_non_null(r.canon);
  assert_string_equal(r.canon->dropped, "web_search,file_search");
  assert_int_equal(r.canon->n_tools, 1);
  air__request_cleanup(&r);
}

static void test_request_validation(void **s) {
  (void)s;
  static const struct {
    const char *body;
    const char *msg;
  } bad[] = {
      {"{\"model\":\"r\"}", "input: required"},
      {"{\"model\":\"r\",\"input\":[]}", "input: must not be empty"},
      {"{\"model\":\"r\",\"input\":3}", "input: expected a string or an array"},
      {"{\"model\":\"r\",\"input\":[1]}", "input[0]: expected an object"},
      {"{\"model\":\"r\",\"input\":\"x\",\"max_output_tokens\":0}",
       "max_output_tokens: expected a positive integer"}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    air__request r;
    air_error err = {0};
    assert_int_equal(
        air__request_parse(AIR_DIALECT_OPENAI_RESPONSES, bad[i].body,
                           strlen(bad[i].body), &r, &err),
        AIR_EINVAL);
    assert_string_equal(err.message, bad[i].msg);
  }
  air__request r;
  const char *ok =
      "{\"model\":\"r\",\"input\":\"x\",\"stream\":true,\"text\":"
      "{\"format\":{\"type\":\"json_schema\"}}}";
  assert_true(
      air__request_fast(AIR_DIALECT_OPENAI_RESPONSES, ok, strlen(ok), &r));
  assert_true(r.stream);
  assert_true(r.json_response);
  assert_string_equal(r.model, "r");
  air__request_cleanup(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_error_names_classify),
      cmocka_unit_test(test_decode_body),
      cmocka_unit_test(test_encode_incomplete_and_failed),
      cmocka_unit_test(test_encode_response_and_error_body),
      cmocka_unit_test(test_requests),
      cmocka_unit_test(test_format_and_reasoning),
      cmocka_unit_test(test_stateful_same_provider),
      cmocka_unit_test(test_dropped_tools),
      cmocka_unit_test(test_request_validation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
