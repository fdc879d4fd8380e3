/*
 * Unit tests for src/codec/openai_chat/: the OpenAI chat-completions
 * dialect. Its stream codec is replayed from transcripts by
 * test_transcripts.c (tests/data/README.md); here: decode_event's flags and
 * corners, bodies, the encoder's edges, responses and error bodies, and
 * requests built and parsed back with jansson.
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
#include "tl_files.h"
#include "tl_json.h"
#include "tl_parts.h"
#include "tl_wire.h"

#ifndef AIR_SOURCE_DIR
#error "AIR_SOURCE_DIR must name the source root"
#endif

static const air__dialect_ops *const OPS = &air__dialect_openai_chat;

#define DATA AIR_SOURCE_DIR "/tests/data/"

static int on_part(void *data, const air_part *p) {
  tl_part_line(data, p);
  return 0;
}

/* ---- decode_event details
 * ------------------------------------------------------------ */

static air__sse_event ev_of(const char *data) {
  air__sse_event ev = {
      {"message", 7}, {data, strlen(data)}, {"", 0}, -1, {data, strlen(data)}};
  return ev;
}

typedef struct stopper {
  unsigned calls;
  unsigned stop_at;
  air__buf lines;
} stopper;

static int on_part_stop(void *data, const air_part *p) {
  stopper *s = data;
  tl_part_line(&s->lines, p);
  return ++s->calls == s->stop_at ? 42 : 0;
}

/* Per-event flags, and the callback's stop value coming back. */
static void test_decode_flags_and_stop(void **state) {
  (void)state;
  air__decoder d;
  OPS->decoder_init(&d);
  stopper s = {0};
  air__buf_init(&s.lines, 4096);
  air__sse_event ev = ev_of(
      "{\"id\":\"a\",\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_"
      "tokens\":"
      "3,\"completion_tokens\":4}}");
  assert_int_equal(OPS->decode_event(&d, &ev, on_part_stop, &s), 0);
  assert_true(d.usage_only);
  assert_false(d.terminator);
  assert_string_equal(s.lines.p, "START \"a\" \"m\"\nUSAGE 3 4\n");
  assert_int_equal(d.input_tokens, 3);

  ev = ev_of("[DONE]");
  assert_int_equal(OPS->decode_event(&d, &ev, on_part_stop, &s), 0);
  assert_true(d.terminator && d.done);
  assert_false(d.usage_only);

  ev = ev_of("{\"error\":{\"message\":\"slow down\",\"code\":429}}");
  air__buf_reset(&s.lines);
  assert_int_equal(OPS->decode_event(&d, &ev, on_part_stop, &s), 0);
  assert_true(d.error_event);
  assert_false(d.terminator);
  assert_string_equal(s.lines.p, "ERROR \"429\" \"slow down\"\n");

  /* Usage together with choices is not usage_only; the flags reset. */
  ev = ev_of(
      "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},"
      "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1}}");
  air__buf_reset(&s.lines);
  assert_int_equal(OPS->decode_event(&d, &ev, on_part_stop, &s), 0);
  assert_false(d.usage_only || d.error_event || d.terminator);
  assert_string_equal(s.lines.p,
                      "TEXT 0 \"x\"\nFINISH stop \"stop\"\nUSAGE 1 0\n");

  /* The callback's value stops the event at once. */
  air__decoder d2;
  OPS->decoder_init(&d2);
  s.calls = 0;
  s.stop_at = 2;
  air__buf_reset(&s.lines);
  ev = ev_of(
      "{\"id\":\"b\",\"choices\":[{\"index\":0,\"delta\":{\"content\":"
      "\"hi\"},\"finish_reason\":\"length\"}]}");
  assert_int_equal(OPS->decode_event(&d2, &ev, on_part_stop, &s), 42);
  assert_string_equal(s.lines.p, "START \"b\" \"\"\nTEXT 0 \"hi\"\n");
  assert_int_equal(s.calls, 2);

  air__buf_cleanup(&s.lines);
  air__decoder_cleanup(&d);
  air__decoder_cleanup(&d2);
}

/* Malformed events yield nothing at all and are counted; keep-alives and
 * unknown chunks are not malformed. */
static void test_decode_malformed(void **state) {
  (void)state;
  static const char *bad[] = {
      "{not json",
      "[1,2]",
      "\"str\"",
      "{\"id\":\"x\"} trailing",
      "{\"choices\":{}}",
      "{\"choices\":[1]}",
      "{\"choices\":[{\"index\":0,\"delta\":\"x\"}]}",
      "{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":1}]}",
      "{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":{}}}]}",
      ("{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\",\"tool_calls\":"
       "[{\"index\":128,\"id\":\"c\"}]}}]}"),
      "{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":-1}]}}]"
      "}",
      "{\"choices\":[],\"usage\":5}",
  };
  static const char *quiet[] = {
      "",
      "  \n ",
      "{}",
      "{\"choices\":[]}",
      "{\"choices\":null,\"usage\":null}",
      "{\"error\":null}",
  };
  air__decoder d;
  OPS->decoder_init(&d);
  air__buf lines;
  air__buf_init(&lines, 4096);
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    air__sse_event ev = ev_of(bad[i]);
    assert_int_equal(OPS->decode_event(&d, &ev, on_part, &lines), 0);
    if (d.malformed != i + 1) fail_msg("not malformed: %s", bad[i]);
  }
  for (size_t i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++) {
    air__sse_event ev = ev_of(quiet[i]);
    assert_int_equal(OPS->decode_event(&d, &ev, on_part, &lines), 0);
  }
  assert_int_equal(d.malformed, sizeof(bad) / sizeof(bad[0]));
  assert_int_equal(lines.n, 0);
  assert_false(d.started);
  air__buf_cleanup(&lines);
  air__decoder_cleanup(&d);
}

/* Several escaped strings in one event: every pointer handed over stays
 * valid while later strings are decoded (scratch never moves). */
typedef struct keep {
  const air_part *first;
  air_part copy;
  char first_id[64];
  bool checked;
} keep;

static int on_part_keep(void *data, const air_part *p) {
  keep *k = data;
  if (k->first == NULL) {
    k->first = p;
    k->copy = *p;
    assert_true(p->id_len < sizeof(k->first_id));
    memcpy(k->first_id, p->id, p->id_len);
    return 0;
  }
  /* The START part's strings are still intact during the later callbacks. */
  assert_memory_equal(k->copy.id, k->first_id, k->copy.id_len);
  k->checked = true;
  return 0;
}

static void test_decode_scratch_stable(void **state) {
  (void)state;
  air__decoder d;
  OPS->decoder_init(&d);
  /* Long escaped strings so scratch would have to grow several times. */
  air__buf js;
  air__buf_init(&js, 1u << 20);
  air__buf_puts(&js,
                "{\"id\":\"id\\u00e9\",\"model\":\"m\\n\",\"choices\":[{"
                "\"index\":0,\"delta\":{\"content\":\"");
  for (int i = 0; i < 2000; i++) air__buf_puts(&js, "\\u00e9\\n");
  air__buf_puts(&js,
                "\",\"tool_calls\":[{\"index\":0,\"id\":\"c\\t\",\"function\""
                ":{\"name\":\"n\\\"\",\"arguments\":\"");
  for (int i = 0; i < 3000; i++) air__buf_puts(&js, "\\\"x");
  air__buf_puts(&js, "\"}}]}}]}");
  air__sse_event ev = ev_of(js.p);
  keep k = {0};
  assert_int_equal(OPS->decode_event(&d, &ev, on_part_keep, &k), 0);
  assert_true(k.checked);
  assert_int_equal(k.copy.id_len, 4);
  assert_memory_equal(k.first_id, "id\xc3\xa9", 4);
  assert_int_equal(d.malformed, 0);
  air__buf_cleanup(&js);
  air__decoder_cleanup(&d);
}

/* ---- decode_body
 * --------------------------------------------------------------------- */

static void test_decode_body(void **state) {
  (void)state;
  static const char body[] =
      "{\"id\":\"chatcmpl-9\",\"object\":\"chat.completion\",\"created\":1,"
      "\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"message\":{\"role\":"
      "\"assistant\",\"content\":\"Hi \\u00e9\",\"refusal\":null,"
      "\"reasoning_content\":\"think\",\"tool_calls\":[{\"id\":\"call_1\","
      "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":"
      "\"{\\\"a\\\":1}\"}},{\"id\":\"call_2\",\"type\":\"function\","
      "\"function\":{\"name\":\"g\",\"arguments\":\"\"}}]},\"logprobs\":null,"
      "\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":9,"
      "\"completion_tokens\":3,\"total_tokens\":12}}";
  air__decoder d;
  OPS->decoder_init(&d);
  air__buf lines;
  air__buf_init(&lines, 4096);
  assert_int_equal(
      OPS->decode_body(&d, body, sizeof(body) - 1, on_part, &lines), 0);
  assert_string_equal(lines.p,
                      "START \"chatcmpl-9\" \"gpt-4o\"\n"
                      "REASONING 0 \"think\"\n"
                      "TEXT 0 \"Hi \xc3\xa9\"\n"
                      "TOOL_START 0 \"call_1\" \"f\"\n"
                      "TOOL_DELTA 0 \"{\\\"a\\\":1}\"\n"
                      "TOOL_START 1 \"call_2\" \"g\"\n"
                      "FINISH tool_calls \"tool_calls\"\n"
                      "USAGE 9 3\n");
  assert_true(d.started && d.finished && d.done);

  /* A refusal body. */
  static const char refusal[] =
      "{\"id\":\"r\",\"object\":\"chat.completion\",\"model\":\"m\","
      "\"choices\":"
      "[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":null,"
      "\"refusal\":\"No.\"},\"finish_reason\":\"stop\"}]}";
  air__buf_reset(&lines);
  assert_int_equal(
      OPS->decode_body(&d, refusal, sizeof(refusal) - 1, on_part, &lines), 0);
  assert_string_equal(lines.p,
                      "START \"r\" \"m\"\nREFUSAL 0 \"No.\"\n"
                      "FINISH stop \"stop\"\n");

  static const char *bad[] = {
      "not json",
      "[]",
      "{\"choices\":{}}",
      "{\"object\":\"chat.completion.chunk\",\"choices\":[]}",
      "{\"error\":{\"message\":\"x\",\"type\":\"server_error\"}}",
      "{\"type\":\"message\",\"content\":[]}",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    air__buf_reset(&lines);
    assert_int_equal(
        OPS->decode_body(&d, bad[i], strlen(bad[i]), on_part, &lines),
        AIR_EPARSE);
    assert_int_equal(lines.n, 0);
  }
  air__buf_cleanup(&lines);
  air__decoder_cleanup(&d);
}

/* ---- encoder details
 * ------------------------------------------------------------------- */

static void test_encode_edges(void **state) {
  (void)state;
  air__encoder e;
  air__buf out;
  air__buf_init(&out, 1u << 16);
  air__request req = {.dialect = AIR_DIALECT_OPENAI, .include_usage = false};

  /* First part not START: a role chunk with the generated id first; usage
   * remembered but not written (the caller did not ask); REFUSAL finish is
   * content_filter; no [DONE] twice. */
  OPS->encoder_init(&e, &req, 7);
  air_part t = {.kind = AIR_PART_TEXT, .text = "a", .text_len = 1};
  air_part u = {.kind = AIR_PART_USAGE, .input_tokens = 1, .output_tokens = 2};
  air_part f = {.kind = AIR_PART_FINISH, .finish = AIR_FINISH_REFUSAL};
  assert_int_equal(OPS->encode_part(&e, &t, &out), 0);
  assert_int_equal(OPS->encode_part(&e, &u, &out), 0);
  assert_int_equal(OPS->encode_part(&e, &f, &out), 0);
  assert_int_equal(OPS->encode_part(&e, &f, &out), 0);
  assert_int_equal(OPS->encode_end(&e, &out), 0);
  assert_string_equal(
      out.p,
      "data: {\"id\":\"chatcmpl-airetry\",\"object\":\"chat.completion.chunk\","
      "\"created\":7,\"model\":\"\",\"choices\":[{\"index\":0,\"delta\":{"
      "\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n"
      "data: {\"id\":\"chatcmpl-airetry\",\"object\":\"chat.completion.chunk\","
      "\"created\":7,\"model\":\"\",\"choices\":[{\"index\":0,\"delta\":{"
      "\"content\":\"a\"},\"finish_reason\":null}]}\n\n"
      "data: {\"id\":\"chatcmpl-airetry\",\"object\":\"chat.completion.chunk\","
      "\"created\":7,\"model\":\"\",\"choices\":[{\"index\":0,\"delta\":{},"
      "\"finish_reason\":\"content_filter\"}]}\n\n"
      "data: [DONE]\n\n");
  assert_int_equal(OPS->encode_end(&e, &out), AIR_ESTATE);
  assert_int_equal(OPS->encode_part(&e, &t, &out), AIR_ESTATE);

  /* Finish mapping of the Anthropic-only reasons. */
  static const struct {
    air_finish f;
    const char *s;
  } map[] = {
      {AIR_FINISH_CONTEXT, "\"length\""},
      {AIR_FINISH_PAUSE, "\"stop\""},
      {AIR_FINISH_TOOL_CALLS, "\"tool_calls\""},
      {AIR_FINISH_LENGTH, "\"length\""},
      {AIR_FINISH_STOP, "\"stop\""},
      {AIR_FINISH_CONTENT_FILTER, "\"content_filter\""},
  };
  for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
    OPS->encoder_init(&e, &req, 0);
    air__buf_reset(&out);
    air_part fp = {.kind = AIR_PART_FINISH, .finish = map[i].f};
    assert_int_equal(OPS->encode_part(&e, &fp, &out), 0);
    char want[64];
    snprintf(want, sizeof(want), "\"finish_reason\":%s}]}\n\n", map[i].s);
    assert_non_null(strstr(out.p, want));
  }

  /* A stream ended with nothing: role chunk, a stop finish, [DONE]. */
  OPS->encoder_init(&e, &req, 0);
  air__buf_reset(&out);
  assert_int_equal(OPS->encode_end(&e, &out), 0);
  tl_check_openai_chat(out.p, out.n);
  assert_non_null(
      strstr(out.p, "\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"));

  /* Passthrough: parts write nothing; the end is only [DONE]. */
  req.include_usage = true;
  OPS->encoder_init(&e, &req, 0);
  e.passthrough = true;
  air__buf_reset(&out);
  assert_int_equal(OPS->encode_part(&e, &t, &out), 0);
  assert_int_equal(OPS->encode_part(&e, &u, &out), 0);
  assert_int_equal(OPS->encode_part(&e, &f, &out), 0);
  assert_int_equal(out.n, 0);
  assert_int_equal(OPS->encode_end(&e, &out), 0);
  assert_string_equal(out.p, "data: [DONE]\n\n");

  /* Error event: never [DONE], nothing after it. */
  OPS->encoder_init(&e, &req, 0);
  air__buf_reset(&out);
  assert_int_equal(OPS->encode_error_event(&e, AIR_REASON_TIMEOUT_CHUNK,
                                           "no data for 30000 ms \"x\"", &out),
                   0);
  assert_string_equal(out.p,
                      "data: {\"error\":{\"message\":\"no data for 30000 ms "
                      "\\\"x\\\"\",\"type\":\"timeout\",\"code\":"
                      "\"timeout.chunk\"}}\n\n");
  assert_int_equal(OPS->encode_end(&e, &out), AIR_ESTATE);

  /* A 300-byte id is kept whole (up to AIR__MAX_IDENT_BYTES); control
   * bytes escaped. */
  char id[300];
  memset(id, 'a', sizeof(id));
  memcpy(id + 124, "\xc3\xa9\xc3\xa9", 4);
  OPS->encoder_init(&e, &req, 0);
  air__buf_reset(&out);
  air_part st = {.kind = AIR_PART_START,
                 .id = id,
                 .id_len = sizeof(id),
                 .name = "m\x01",
                 .name_len = 2};
  assert_int_equal(OPS->encode_part(&e, &st, &out), 0);
  assert_int_equal(strlen(e.id), sizeof(id));
  assert_memory_equal(e.id + 124, "\xc3\xa9\xc3\xa9", 4);
  assert_non_null(strstr(out.p, "\"model\":\"m\\u0001\""));
  tl_check_openai_chat(out.p, out.n);

  /* A full buffer: typed error, nothing half-written. */
  air__buf small;
  air__buf_init(&small, 40);
  OPS->encoder_init(&e, &req, 0);
  assert_int_equal(OPS->encode_part(&e, &t, &small), AIR_ETOOBIG);
  assert_int_equal(small.n, 0);
  assert_false(e.started);
  air__buf_cleanup(&small);
  air__buf_cleanup(&out);
}

/* ---- encode_response / aggregate
 * ------------------------------------------------------ */

/* Decodes a transcript into an aggregate and encodes the response. */
static json_t *response_of(const char *name, uint64_t created) {
  char path[512];
  snprintf(path, sizeof(path), DATA "openai/%s.sse", name);
  size_t n;
  char *in = tl_read_file(path, &n);
  assert_non_null(in);
  tl_run r;
  tl_run_init(&r, OPS);
  r.agg.created = created;
  tl_run_sse(&r, in, n, 0);
  air__buf out;
  air__buf_init(&out, 1u << 20);
  assert_int_equal(OPS->encode_response(&r.agg, &out), 0);
  json_error_t jerr;
  json_t *v = json_loadb(out.p, out.n, 0, &jerr);
  if (v == NULL) fail_msg("%s: %s", jerr.text, out.p);
  air__buf_cleanup(&out);
  tl_run_cleanup(&r);
  free(in);
  return v;
}

static void test_encode_response(void **state) {
  (void)state;
  json_t *v = response_of("text_usage", 1718000123);
  json_t *want = json_loads(
      "{\"id\":\"chatcmpl-AbC123\",\"object\":\"chat.completion\",\"created\":"
      "1718000123,\"model\":\"gpt-4o-2024-08-06\",\"choices\":[{\"index\":0,"
      "\"message\":{\"role\":\"assistant\",\"content\":\"Hello world!\","
      "\"refusal\":null},\"finish_reason\":\"stop\"}],\"usage\":{"
      "\"prompt_tokens\":12,\"completion_tokens\":5,\"total_tokens\":17}}",
      0, NULL);
  assert_true(json_equal(v, want));
  json_decref(v);
  json_decref(want);

  v = response_of("tool_calls", 0);
  json_t *msg = json_object_get(
      json_array_get(json_object_get(v, "choices"), 0), "message");
  assert_true(json_is_null(json_object_get(msg, "content")));
  json_t *calls = json_object_get(msg, "tool_calls");
  assert_int_equal(json_array_size(calls), 2);
  json_t *c1 = json_array_get(calls, 1);
  assert_string_equal(json_string_value(json_object_get(c1, "id")), "call_def");
  assert_string_equal(json_string_value(json_object_get(c1, "type")),
                      "function");
  json_t *fn = json_object_get(c1, "function");
  assert_string_equal(json_string_value(json_object_get(fn, "name")),
                      "get_time");
  assert_string_equal(json_string_value(json_object_get(fn, "arguments")),
                      "{\"tz\": \"CET\"}");
  assert_string_equal(
      json_string_value(json_object_get(
          json_array_get(json_object_get(v, "choices"), 0), "finish_reason")),
      "tool_calls");
  json_decref(v);

  v = response_of("reasoning_content", 0);
  msg = json_object_get(json_array_get(json_object_get(v, "choices"), 0),
                        "message");
  assert_string_equal(
      json_string_value(json_object_get(msg, "reasoning_content")),
      "The user wants a number.");
  assert_string_equal(json_string_value(json_object_get(msg, "content")), "42");
  json_decref(v);

  v = response_of("refusal", 0);
  msg = json_object_get(json_array_get(json_object_get(v, "choices"), 0),
                        "message");
  assert_string_equal(json_string_value(json_object_get(msg, "refusal")),
                      "I'm sorry, I can't help with that.");
  assert_null(json_object_get(msg, "reasoning_content"));
  assert_null(json_object_get(v, "usage"));
  json_decref(v);

  /* An empty aggregate: generated id, null content, "{}" arguments. */
  air__aggregate a;
  air__aggregate_init(&a);
  air_part ts = {.kind = AIR_PART_TOOL_START,
                 .index = 0,
                 .id = "",
                 .name = "f",
                 .name_len = 1};
  assert_int_equal(air__aggregate_add(&a, &ts), 0);
  air__buf out;
  air__buf_init(&out, 4096);
  assert_int_equal(OPS->encode_response(&a, &out), 0);
  v = json_loadb(out.p, out.n, 0, NULL);
  assert_non_null(v);
  assert_string_equal(json_string_value(json_object_get(v, "id")),
                      "chatcmpl-airetry");
  msg = json_object_get(json_array_get(json_object_get(v, "choices"), 0),
                        "message");
  json_t *c0 = json_array_get(json_object_get(msg, "tool_calls"), 0);
  assert_string_equal(json_string_value(json_object_get(c0, "id")), "call_0");
  assert_string_equal(json_string_value(json_object_get(
                          json_object_get(c0, "function"), "arguments")),
                      "{}");
  json_decref(v);
  air__buf_cleanup(&out);
  air__aggregate_cleanup(&a);
}

/* ---- encode_error_body
 * ------------------------------------------------------------------ */

static void test_encode_error_body(void **state) {
  (void)state;
  air_attempt log[2] = {
      {.n = 1,
       .target = "openai/gpt-4o",
       .reason = AIR_REASON_RATE_LIMIT,
       .status = 429,
       .message = "slow",
       .request_id = "req_1",
       .ms = 120},
      {.n = 2,
       .target = "anthropic/claude",
       .reason = AIR_REASON_TIMEOUT_FIRST_CHUNK,
       .status = 0,
       .message = "",
       .request_id = "",
       .ms = 8000},
  };
  air__buf out;
  air__buf_init(&out, 4096);
  assert_int_equal(air__buf_adds(&out, "keep:"), 0);
  assert_int_equal(
      OPS->encode_error_body(504, AIR_REASON_TIMEOUT_FIRST_CHUNK,
                             "all \"targets\" failed", log, 2, &out),
      0);
  assert_memory_equal(out.p, "keep:", 5);
  json_t *v = json_loadb(out.p + 5, out.n - 5, 0, NULL);
  json_t *want = json_loads(
      "{\"error\":{\"message\":\"all \\\"targets\\\" "
      "failed\",\"type\":\"timeout\","
      "\"code\":\"timeout.first_chunk\",\"param\":null,\"attempts\":["
      "{\"target\":\"openai/gpt-4o\",\"reason\":\"rate_limit\",\"status\":429,"
      "\"ms\":120,\"request_id\":\"req_1\"},"
      "{\"target\":\"anthropic/claude\",\"reason\":\"timeout.first_chunk\","
      "\"status\":0,\"ms\":8000,\"request_id\":\"\"}]}}",
      0, NULL);
  assert_non_null(v);
  assert_true(json_equal(v, want));
  json_decref(v);
  json_decref(want);

  air__buf_reset(&out);
  assert_int_equal(
      OPS->encode_error_body(429, AIR_REASON_QUOTA, NULL, NULL, 0, &out), 0);
  v = json_loadb(out.p, out.n, 0, NULL);
  json_t *err = json_object_get(v, "error");
  assert_string_equal(json_string_value(json_object_get(err, "type")),
                      "insufficient_quota");
  assert_string_equal(json_string_value(json_object_get(err, "code")), "quota");
  assert_string_equal(json_string_value(json_object_get(err, "message")), "");
  assert_int_equal(json_array_size(json_object_get(err, "attempts")), 0);
  json_decref(v);
  air__buf_cleanup(&out);
}

/* ---- air__request_build
 * -------------------------------------------------------------------- */

/* Builds an upstream body from a caller body; returns the parsed result, or
 * NULL with *rc and err set. */
static json_t *build(air_dialect dialect, const char *body, const char *model,
                     const char *override, bool drop, int *rc, air_error *err) {
  air__request req;
  memset(err, 0, sizeof(*err));
  assert_int_equal(air__request_parse(dialect, body, strlen(body), &req, err),
                   0);
  air__build_opts o = {.model = model,
                       .override_json = override,
                       .drop_params = drop,
                       .default_max_tokens = 4096};
  air__buf out;
  air__buf_init(&out, 1u << 20);
  *rc = air__request_build(OPS, &req, &o, &out, err);
  json_t *v = NULL;
  if (*rc == 0) {
    json_error_t jerr;
    v = json_loadb(out.p, out.n, 0, &jerr);
    if (v == NULL) fail_msg("%s: %s", jerr.text, out.p);
    /* Compact: no white space outside strings in this test's bodies. */
    assert_null(strstr(out.p, "\": "));
  } else {
    assert_int_equal(out.n, 0);
  }
  air__buf_cleanup(&out);
  air__request_cleanup(&req);
  return v;
}

static void test_build_same_dialect(void **state) {
  (void)state;
  int rc;
  air_error err;
  json_t *v =
      build(AIR_DIALECT_OPENAI,
            "{\"model\":\"smart\",\"messages\":[{\"role\":\"user\","
            "\"content\":\"hi\",\"name\":\"bob\"}],\"stream\":false,"
            "\"stream_options\":{\"include_usage\":false,\"x\":1},"
            "\"logit_bias\":{\"50256\":-100},\"custom_field\":[1,{\"a\":null}],"
            "\"temperature\":0.5,\"max_tokens\":100}",
            "gpt-4o",
            "{\"max_tokens\":8192,\"seed\":7,\"model\":\"no\","
            "\"stream\":false}",
            false, &rc, &err);
  assert_int_equal(rc, 0);
  tl_expect_json(
      v,
      "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":"
      "\"hi\",\"name\":\"bob\"}],\"stream\":true,\"stream_options\":{"
      "\"include_usage\":true,\"x\":1},\"logit_bias\":{\"50256\":-100},"
      "\"custom_field\":[1,{\"a\":null}],\"temperature\":0.5,"
      "\"max_tokens\":8192,\"seed\":7}");
  /* Key order kept: model stays first, unknown fields where they were. */
  const char *first = NULL;
  void *it = json_object_iter(v);
  if (it != NULL) first = json_object_iter_key(it);
  assert_string_equal(first, "model");
  json_decref(v);

  /* No stream_options at all: one is added. */
  v = build(AIR_DIALECT_OPENAI,
            "{\"model\":\"a\",\"messages\":[{\"role\":\"user\","
            "\"content\":\"x\"}]}",
            "b", NULL, false, &rc, &err);
  tl_expect_json(
      v,
      "{\"model\":\"b\",\"messages\":[{\"role\":\"user\",\"content\":"
      "\"x\"}],\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
  json_decref(v);

  /* A broken override is a clean error. */
  v = build(AIR_DIALECT_OPENAI,
            "{\"model\":\"a\",\"messages\":[{\"role\":\"user\","
            "\"content\":\"x\"}]}",
            "b", "[1]", false, &rc, &err);
  assert_null(v);
  assert_int_equal(rc, AIR_EINVAL);
  assert_non_null(strstr(err.message, "override"));
}

static void test_build_from_anthropic(void **state) {
  (void)state;
  int rc;
  air_error err;
  json_t *v = build(
      AIR_DIALECT_ANTHROPIC,
      "{\"model\":\"smart\",\"max_tokens\":1024,\"system\":[{\"type\":\"text\","
      "\"text\":\"Be "
      "brief.\",\"cache_control\":{\"type\":\"ephemeral\"}},{\"type\":"
      "\"text\",\"text\":\"Be kind.\"}],\"messages\":["
      "{\"role\":\"user\",\"content\":\"What is the weather?\"},"
      "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Look:\"},"
      "{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":"
      "\"image/png\",\"data\":\"iVBOR\"}},{\"type\":\"image\",\"source\":{"
      "\"type\":\"url\",\"url\":\"https://x/y.jpg\"}}]},"
      "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\","
      "\"thinking\":"
      "\"hmm\",\"signature\":\"s\"},{\"type\":\"text\",\"text\":\"Checking.\"},"
      "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get_weather\","
      "\"input\":{\"city\":\"Paris\"}},{\"type\":\"tool_use\",\"id\":\"toolu_"
      "2\","
      "\"name\":\"get_time\",\"input\":{}}]},"
      "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_"
      "id\":"
      "\"toolu_1\",\"content\":\"18C\"},{\"type\":\"tool_result\",\"tool_use_"
      "id\":"
      "\"toolu_2\",\"content\":[{\"type\":\"text\",\"text\":\"12:00\"},{"
      "\"type\":"
      "\"text\",\"text\":\"CET\"}],\"is_error\":false},{\"type\":\"text\","
      "\"text\":"
      "\"Thanks\"}]},"
      "{\"role\":\"assistant\",\"content\":\"You're welcome.\"}],"
      "\"tools\":[{\"name\":\"get_weather\",\"description\":\"Weather\","
      "\"input_schema\":{\"type\":\"object\",\"properties\":{\"city\":{"
      "\"type\":"
      "\"string\"}}}},{\"name\":\"get_time\",\"input_schema\":{\"type\":"
      "\"object\"}}],"
      "\"tool_choice\":{\"type\":\"tool\",\"name\":\"get_weather\","
      "\"disable_parallel_tool_use\":true},"
      "\"stop_sequences\":[\"END\"],\"temperature\":1,\"top_p\":0.9,"
      "\"metadata\":{\"user_id\":\"u-1\"},\"stream\":false,\"thinking\":{"
      "\"type\":"
      "\"disabled\"}}",
      "gpt-4o", NULL, false, &rc, &err);
  if (rc != 0) fail_msg("%s", err.message);
  tl_expect_json(
      v,
      "{\"model\":\"gpt-4o\",\"messages\":["
      "{\"role\":\"system\",\"content\":\"Be brief.\\nBe kind.\"},"
      "{\"role\":\"user\",\"content\":\"What is the weather?\"},"
      "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Look:\"},"
      "{\"type\":\"image_url\",\"image_url\":{\"url\":"
      "\"data:image/"
      "png;base64,iVBOR\"}},{\"type\":\"image_url\",\"image_url\":{"
      "\"url\":\"https://x/y.jpg\"}}]},"
      "{\"role\":\"assistant\",\"content\":\"Checking.\",\"tool_calls\":["
      "{\"id\":\"toolu_1\",\"type\":\"function\",\"function\":{\"name\":"
      "\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}},"
      "{\"id\":\"toolu_2\",\"type\":\"function\",\"function\":{\"name\":"
      "\"get_time\",\"arguments\":\"{}\"}}]},"
      "{\"role\":\"tool\",\"tool_call_id\":\"toolu_1\",\"content\":\"18C\"},"
      "{\"role\":\"tool\",\"tool_call_id\":\"toolu_2\",\"content\":\"12:"
      "00\\nCET\"},"
      "{\"role\":\"user\",\"content\":\"Thanks\"},"
      "{\"role\":\"assistant\",\"content\":\"You're welcome.\"}],"
      "\"max_tokens\":1024,"
      "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_"
      "weather\","
      "\"description\":\"Weather\",\"parameters\":{\"type\":\"object\","
      "\"properties\":{\"city\":{\"type\":\"string\"}}}}},{\"type\":"
      "\"function\","
      "\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":\"object\"}"
      "}}],"
      "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":"
      "\"get_weather\"}},\"parallel_tool_calls\":false,"
      "\"stop\":[\"END\"],\"temperature\":1,\"top_p\":0.9,\"user\":\"u-1\","
      "\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
  /* The keys: model first, then messages. */
  void *it = json_object_iter(v);
  assert_string_equal(json_object_iter_key(it), "model");
  assert_string_equal(json_object_iter_key(json_object_iter_next(v, it)),
                      "messages");
  json_decref(v);

  /* tool_choice mapping, temperature clamp, override after translation. */
  static const struct {
    const char *in, *out;
  } tc[] = {
      {"{\"type\":\"auto\"}", "\"auto\""},
      {"{\"type\":\"any\"}", "\"required\""},
      {"{\"type\":\"none\"}", "\"none\""},
  };
  for (size_t i = 0; i < sizeof(tc) / sizeof(tc[0]); i++) {
    char body[256];
    snprintf(
        body, sizeof(body),
        "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\","
        "\"content\":\"x\"}],\"tool_choice\":%s,\"temperature\":-1}",
        tc[i].in);
    v = build(AIR_DIALECT_ANTHROPIC, body, "o", "{\"max_tokens\":9}", false,
              &rc, &err);
    char want[512];
    snprintf(
        want, sizeof(want),
        "{\"model\":\"o\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
        "\"max_tokens\":9,\"tool_choice\":%s,\"temperature\":0.0,"
        "\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
        tc[i].out);
    tl_expect_json(v, want);
    json_decref(v);
  }
}

/* Hints without an OpenAI form (docs/design.md §5) are dropped, never a reason
 * to skip the target; metadata.user_id still becomes user. */
static void test_build_hints_dropped(void **state) {
  (void)state;
  const char *body =
      "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\","
      "\"content\":\"x\"}],\"top_k\":5,\"service_tier\":\"auto\","
      "\"context_management\":{\"edits\":[]},"
      "\"metadata\":{\"user_id\":\"u\",\"tenant\":\"t\"}}";
  int rc;
  air_error err;
  json_t *v = build(AIR_DIALECT_ANTHROPIC, body, "o", NULL, false, &rc, &err);
  if (rc != 0) fail_msg("%s", err.message);
  assert_null(json_object_get(v, "top_k"));
  assert_null(json_object_get(v, "service_tier"));
  assert_null(json_object_get(v, "context_management"));
  assert_null(json_object_get(v, "metadata"));
  assert_string_equal(json_string_value(json_object_get(v, "user")), "u");
  json_decref(v);
}

static void test_build_unsupported(void **state) {
  (void)state;
  static const struct {
    const char *body, *field;
  } cases[] = {
      {"\"thinking\":{\"type\":\"sometimes\"}",
       "thinking: not supported by openai upstreams"},
      {"\"frobnicate\":true", "frobnicate: not supported by openai upstreams"},
      {"\"tools\":[{\"type\":\"web_search_20250305\",\"name\":\"web_search\"}]",
       "tools[0] (type web_search_20250305): not supported by openai "
       "upstreams"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char body[512];
    snprintf(
        body, sizeof(body),
        "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\","
        "\"content\":[{\"type\":\"text\",\"text\":\"x\"}]}],%s}",
        cases[i].body);
    int rc;
    air_error err;
    json_t *v = build(AIR_DIALECT_ANTHROPIC, body, "o", NULL, false, &rc, &err);
    assert_null(v);
    assert_int_equal(rc, AIR_ENOTSUP);
    assert_int_equal(err.code, AIR_ENOTSUP);
    assert_string_equal(err.message, cases[i].field);
    /* drop_params: the field is gone, the rest is there. */
    v = build(AIR_DIALECT_ANTHROPIC, body, "o", NULL, true, &rc, &err);
    assert_int_equal(rc, 0);
    assert_null(json_object_get(v, "top_k"));
    assert_null(json_object_get(v, "thinking"));
    assert_null(json_object_get(v, "frobnicate"));
    assert_null(json_object_get(v, "tools"));
    assert_null(json_object_get(v, "metadata"));
    json_t *m0 = json_array_get(json_object_get(v, "messages"), 0);
    assert_string_equal(json_string_value(json_object_get(m0, "content")), "x");
    assert_int_equal(json_integer_value(json_object_get(v, "max_tokens")), 5);
    json_decref(v);
  }

  /* Unsupported content blocks: named by position; dropped with drop_params. */
  static const char doc[] =
      "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\","
      "\"content\":[{\"type\":\"document\",\"source\":{\"type\":\"base64\","
      "\"media_type\":\"application/"
      "pdf\",\"data\":\"JVB\"}},{\"type\":\"text\","
      "\"text\":\"sum\"},{\"type\":\"image\",\"source\":{\"type\":\"file\","
      "\"file_id\":\"f\"}}]}]}";
  int rc;
  air_error err;
  json_t *v = build(AIR_DIALECT_ANTHROPIC, doc, "o", NULL, false, &rc, &err);
  assert_null(v);
  assert_string_equal(err.message,
                      "messages[0].content[0] (type document): not "
                      "supported by openai upstreams");
  v = build(AIR_DIALECT_ANTHROPIC, doc, "o", NULL, true, &rc, &err);
  tl_expect_json(
      v,
      "{\"model\":\"o\",\"messages\":[{\"role\":\"user\",\"content\":"
      "\"sum\"}],\"max_tokens\":5,\"stream\":true,\"stream_options\":"
      "{\"include_usage\":true}}");
  json_decref(v);

  /* Bad shapes are errors even with drop_params. */
  v = build(
      AIR_DIALECT_ANTHROPIC,
      "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"tool\","
      "\"content\":\"x\"}]}",
      "o", NULL, true, &rc, &err);
  assert_null(v);
  assert_int_equal(rc, AIR_EINVAL);
  assert_non_null(strstr(err.message, "messages[0].role"));
  v = build(
      AIR_DIALECT_ANTHROPIC,
      "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"assistant\","
      "\"content\":[{\"type\":\"tool_use\",\"name\":\"f\"}]}]}",
      "o", NULL, true, &rc, &err);
  assert_null(v);
  assert_string_equal(err.message,
                      "messages[0].content[0]: expected id and name strings");
}

/*
 * The fast request path (request_text.c) takes ordinary bodies without
 * jansson and builds the upstream body from the caller's text; what it
 * cannot be sure of goes the jansson way, with the same result.
 */
static void test_request_fast_path(void **state) {
  (void)state;
  static const char *const fast[] = {
      "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
      "{\"model\":\"m\",\"stream\":true,\"stream_options\":{\"x\":1},"
      "\"messages\":[{\"role\":\"user\",\"content\":\"h\\u00e9 "
      "\\ud83d\\ude00\"}]}",
  };
  static const char *const slow[] = {
      "{\"model\":\"m\\u0041\",\"messages\":[{\"role\":\"user\"}]}",
      "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"c\":1,\"c\":2}]}",
      "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"c\":\"\\u0000\"}]}",
      "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"c\":\"\\udc00\"}]}",
      "{\"model\":\"m\",\"seed\":1e999,\"messages\":[{\"role\":\"user\"}]}",
  };
  for (size_t i = 0; i < sizeof(fast) / sizeof(fast[0]); i++) {
    air__request r;
    air_error err = {0};
    assert_int_equal(air__request_parse(AIR_DIALECT_OPENAI, fast[i],
                                        strlen(fast[i]), &r, &err),
                     0);
    assert_non_null(r.raw);
    assert_null(r.tree); /* no tree unless a build needs one */
    assert_string_equal(r.model, "m");
    air__buf out;
    air__buf_init(&out, 1u << 20);
    air__build_opts o = {.model = "up\"stream"};
    assert_int_equal(
        air__request_build(&air__dialect_openai_chat, &r, &o, &out, &err), 0);
    assert_null(r.tree); /* same dialect: built from the text */
    json_t *v = json_loads(out.p, JSON_REJECT_DUPLICATES, NULL);
    assert_non_null(v);
    assert_string_equal(json_string_value(json_object_get(v, "model")),
                        "up\"stream");
    assert_true(json_is_true(json_object_get(v, "stream")));
    assert_true(json_is_true(json_object_get(
        json_object_get(v, "stream_options"), "include_usage")));
    if (i == 1) {
      assert_int_equal(json_integer_value(json_object_get(
                           json_object_get(v, "stream_options"), "x")),
                       1);
      const char *c = json_string_value(json_object_get(
          json_array_get(json_object_get(v, "messages"), 0), "content"));
      assert_string_equal(c, "h\xc3\xa9 \xf0\x9f\x98\x80");
    }
    json_decref(v);
    air__buf_cleanup(&out);
    air__request_cleanup(&r);
  }
  for (size_t i = 0; i < sizeof(slow) / sizeof(slow[0]); i++) {
    air__request r;
    air_error err = {0};
    int rc = air__request_parse(AIR_DIALECT_OPENAI, slow[i], strlen(slow[i]),
                                &r, &err);
    if (rc == 0) {
      assert_null(r.raw);
      assert_non_null(r.tree);
      air__request_cleanup(&r);
    } else {
      assert_true(err.message[0] != '\0'); /* jansson's words */
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decode_flags_and_stop),
      cmocka_unit_test(test_decode_malformed),
      cmocka_unit_test(test_decode_scratch_stable),
      cmocka_unit_test(test_decode_body),
      cmocka_unit_test(test_encode_edges),
      cmocka_unit_test(test_encode_response),
      cmocka_unit_test(test_encode_error_body),
      cmocka_unit_test(test_build_same_dialect),
      cmocka_unit_test(test_build_from_anthropic),
      cmocka_unit_test(test_build_unsupported),
      cmocka_unit_test(test_build_hints_dropped),
      cmocka_unit_test(test_request_fast_path),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
