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
#include "dialect.h"
#include "sse.h"

static const air__build_opts plain = {.model = "up"};
static const air__build_opts dropping = {.model = "up", .drop_params = true};

static void parse(air_dialect d, const char *body, air__request *r) {
  air_error err = {0};
  assert_int_equal(air__request_parse(d, body, strlen(body), r, &err), 0);
}

static const char THINKING[] =
    "{\"model\":\"m\",\"max_tokens\":9,\"messages\":[{\"role\":\"user\","
    "\"content\":\"hi\"}],\"thinking\":{\"type\":\"enabled\","
    "\"budget_tokens\":1024},\"frobnicate\":1}";

static void test_same_dialect_builds_no_canon(void **s) {
  (void)s;
  air__request r;
  parse(AIR_DIALECT_ANTHROPIC, THINKING, &r);
  air__buf out;
  air__buf_init(&out, 1u << 20);
  air__build_opts o = {.model = "up"};
  air_error err;
  assert_int_equal(
      air__request_can_express(&air__dialect_anthropic, &r, &o, &err), 0);
  assert_int_equal(
      air__request_build(&air__dialect_anthropic, &r, &o, &out, &err), 0);
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
      air__request_can_express(&air__dialect_openai_chat, &r, &plain, &err),
      AIR_ENOTSUP);
  assert_string_equal(err.message,
                      "frobnicate: not supported by openai upstreams");
  const struct air__canon *c = r.canon;
  assert_non_null(c); /* built once ... */
  assert_int_equal(
      air__request_can_express(&air__dialect_openai_chat, &r, &dropping, &err),
      0);
  air__buf out;
  air__buf_init(&out, 1u << 20);
  air__build_opts o = {.model = "up", .drop_params = true};
  assert_int_equal(
      air__request_build(&air__dialect_openai_chat, &r, &o, &out, &err), 0);
  assert_ptr_equal(r.canon, c); /* ... and kept for the next attempts */
  assert_null(strstr(out.p, "frobnicate"));
  assert_non_null(strstr(out.p, "\"reasoning_effort\":\"low\""));
  /* Not under drop_params: the same refusal from the build, nothing out. */
  out.n = 0;
  o.drop_params = false;
  assert_int_equal(
      air__request_build(&air__dialect_openai_chat, &r, &o, &out, &err),
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
      air__request_can_express(&air__dialect_openai_chat, &r, &plain, &err),
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
      air__request_build(&air__dialect_anthropic, &r, &o, &out, &err),
      AIR_ETOOBIG);
  assert_string_equal(err.message, "request too large to translate");
  assert_int_equal(out.n, 0);
  air__buf_cleanup(&out);
  air__buf_cleanup(&b);
  air__request_cleanup(&r);
}

/* A request whose canonical form is given (the hub takes the cached one):
 * from an Anthropic caller, one user turn, freed with the request. */
static air__cmsg *given_canon(air__request *r) {
  memset(r, 0, sizeof(*r));
  r->dialect = AIR_DIALECT_ANTHROPIC;
  r->model = "m";
  r->canon = malloc(sizeof(*r->canon));
  assert_non_null(r->canon);
  air__canon_init(r->canon, AIR_DIALECT_ANTHROPIC);
  r->canon->model = "m";
  int rc;
  air__cmsg *m = air__canon_add_msg(r->canon, AIR__ROLE_USER, &rc);
  assert_non_null(m);
  return m;
}

/* What a build over AIR__MAX_REQUEST_BYTES gives a caller: AIR_ETOOBIG and
 * "request too large to translate", never out of memory, nothing written. */
static void assert_too_big(const air__dialect_ops *target,
                           const air__request *r) {
  air__buf out;
  air__buf_init(&out, 1u << 20);
  air_error err;
  assert_int_equal(air__request_build(target, r, &plain, &out, &err),
                   AIR_ETOOBIG);
  assert_int_equal(err.code, AIR_ETOOBIG);
  assert_string_equal(err.message, "request too large to translate");
  assert_int_equal(out.n, 0);
  air__buf_cleanup(&out);
}

/* An inline image whose data: URL would pass AIR__MAX_REQUEST_BYTES, and
 * system texts that joined would: the limit's error reaches the caller as
 * it is (docs/style.md §5), for both targets that build such strings. */
static void test_too_big_is_not_out_of_memory(void **s) {
  (void)s;
  size_t n = AIR__MAX_REQUEST_BYTES;
  air__request r;
  air__cmsg *m = given_canon(&r);
  char *data = air__canon_zalloc(r.canon, n, 1);
  assert_non_null(data);
  memset(data, 'A', n);
  int rc;
  air__cpart *p = air__canon_add_part(r.canon, &m->parts, &m->n_parts,
                                      &m->cap_parts, AIR__CP_IMAGE, &rc);
  assert_non_null(p);
  p->media_type = (air__str){"image/png", 9};
  p->data = (air__str){data, n};
  assert_too_big(&air__dialect_openai_chat, &r);
  assert_too_big(&air__dialect_openai_responses, &r);
  air__request_cleanup(&r);

  /* Two system texts of half the limit and more, joined with "\n". */
  m = given_canon(&r);
  data = air__canon_zalloc(r.canon, n / 2 + 1, 1);
  assert_non_null(data);
  memset(data, 'B', n / 2 + 1);
  air__canon *c = r.canon;
  c->has_system = true;
  for (int i = 0; i < 2; i++) {
    p = air__canon_add_part(c, &c->system, &c->n_system, &c->cap_system,
                            AIR__CP_TEXT, &rc);
    assert_non_null(p);
    p->text = (air__str){data, n / 2 + 1};
  }
  p = air__canon_add_part(c, &m->parts, &m->n_parts, &m->cap_parts,
                          AIR__CP_TEXT, &rc);
  assert_non_null(p);
  p->text = (air__str){"hi", 2};
  assert_too_big(&air__dialect_openai_chat, &r);
  assert_too_big(&air__dialect_openai_responses, &r);
  air__request_cleanup(&r);
}

static int collect(void *data, const air_part *p) {
  air__buf *b = data;
  static const char *const names[] = {[AIR_PART_TEXT] = "T",
                                      [AIR_PART_TOOL_START] = "S",
                                      [AIR_PART_TOOL_DELTA] = "D",
                                      [AIR_PART_FINISH] = "F"};
  if ((size_t)p->kind >= sizeof(names) / sizeof(names[0]) ||
      names[p->kind] == NULL)
    return 0;
  int rc = air__buf_adds(b, names[p->kind]);
  if (rc == 0 && p->kind == AIR_PART_FINISH)
    rc = air__buf_adds(b, p->finish == AIR_FINISH_STOP ? "stop" : "other");
  if (rc == 0 && p->text_len > 0) rc = air__buf_add(b, p->text, p->text_len);
  return rc == 0 ? air__buf_addc(b, '|') : rc;
}

/* Feeds Anthropic events (one "data" each) to a decoder; the parts. */
static void decode(bool json_tool, const char *const *ev, size_t n,
                   air__buf *out) {
  air__decoder d;
  air__dialect_anthropic.decoder_init(&d);
  d.json_tool = json_tool;
  for (size_t i = 0; i < n; i++) {
    air__sse_event e = {.type = {"message", 7},
                        .data = {ev[i], strlen(ev[i])},
                        .id = {"", 0},
                        .retry = -1,
                        .raw = {ev[i], strlen(ev[i])}};
    assert_int_equal(air__dialect_anthropic.decode_event(&d, &e, collect, out),
                     0);
  }
  assert_int_equal(d.malformed, 0);
  air__decoder_cleanup(&d);
}

/* An OpenAI caller's schema to an Anthropic target: structured_output
 * tool forces json_output and flags the decoder, which gives the tool's
 * input back as text and its tool_use stop as a plain stop; native sends
 * output_config.format; an unflagged decoder leaves a json_output call a
 * tool call. */
static void test_json_tool(void **s) {
  (void)s;
  static const char body[] =
      "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
      "\"x\"}],\"response_format\":{\"type\":\"json_schema\","
      "\"json_schema\":{\"name\":\"w\",\"schema\":{\"type\":\"object\"}}}}";
  air__request r;
  parse(AIR_DIALECT_OPENAI, body, &r);
  air__buf out;
  air__buf_init(&out, 1u << 20);
  bool flag = false;
  air__build_opts o = {.model = "up", .json_tool = &flag};
  air_error err;
  assert_int_equal(
      air__request_build(&air__dialect_anthropic, &r, &o, &out, &err), 0);
  assert_true(flag);
  assert_non_null(strstr(out.p,
                         "\"tool_choice\":{\"type\":\"tool\","
                         "\"name\":\"json_output\"}"));
  out.n = 0;
  o.structured_output = AIR__STRUCT_NATIVE;
  assert_int_equal(
      air__request_build(&air__dialect_anthropic, &r, &o, &out, &err), 0);
  assert_false(flag);
  assert_non_null(strstr(out.p, "\"output_config\":{\"format\":{"));
  assert_null(strstr(out.p, "json_output"));
  air__buf_cleanup(&out);
  air__request_cleanup(&r);

  static const char *const ev[] = {
      "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":"
      "{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"json_output\","
      "\"input\":{}}}",
      "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
      "\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":\"}}",
      "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
      "\"input_json_delta\",\"partial_json\":\"1}\"}}",
      "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"}}"};
  air__buf parts;
  air__buf_init(&parts, 1u << 16);
  decode(true, ev, 4, &parts);
  assert_string_equal(parts.p, "T{\"a\":|T1}|Fstop|");
  parts.n = 0;
  decode(false, ev, 4, &parts);
  assert_string_equal(parts.p, "S|D{\"a\":|D1}|Fother|");
  air__buf_cleanup(&parts);
}

/* The table names every dialect at its own index. */
static void test_dialect_table(void **s) {
  (void)s;
  size_t n = 0;
  const air__dialect_ops *const *t = air__dialects(&n);
  assert_int_equal(n, 3);
  for (size_t i = 0; i < n; i++) {
    assert_int_equal((size_t)t[i]->api, i);
    assert_ptr_equal(air__dialect_get(t[i]->api), t[i]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_dialect_builds_no_canon),
      cmocka_unit_test(test_can_express_and_cache),
      cmocka_unit_test(test_first_problem_named),
      cmocka_unit_test(test_canon_limit),
      cmocka_unit_test(test_too_big_is_not_out_of_memory),
      cmocka_unit_test(test_dialect_table),
      cmocka_unit_test(test_json_tool),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
