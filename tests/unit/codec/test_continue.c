/*
 * The continuation's upstream request (src/codec/continue.c, docs/design.md
 * §3.5) for every caller dialect x target dialect x style, and the 400 that
 * rejects a prefill.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "canon.h"
#include "dialect.h"

static const char SENT[] = "Once upon a time, in a \"tall\" castle";

/* Each caller dialect's request: a system prompt, one user turn, stop
 * sequences (where the dialect has them), max tokens 100, reasoning asked
 * for, and one field the canonical form keeps only as an extra. */
static const char *const BODY[] = {
    [AIR_DIALECT_OPENAI] =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":"
        "\"Be brief.\"},{\"role\":\"user\",\"content\":\"Tell me a story\"}],"
        "\"stop\":[\"END\"],\"max_tokens\":100,\"reasoning_effort\":\"high\","
        "\"stream\":true,\"chat_template_kwargs\":{\"k\":1}}",
    [AIR_DIALECT_ANTHROPIC] =
        "{\"model\":\"m\",\"system\":\"Be brief.\",\"messages\":[{\"role\":"
        "\"user\",\"content\":\"Tell me a story\"}],\"stop_sequences\":"
        "[\"END\"],\"max_tokens\":100,\"thinking\":{\"type\":\"enabled\","
        "\"budget_tokens\":2048},\"stream\":true,\"frobnicate\":1}",
    [AIR_DIALECT_OPENAI_RESPONSES] =
        "{\"model\":\"m\",\"instructions\":\"Be brief.\",\"input\":[{\"role\":"
        "\"user\",\"content\":\"Tell me a story\"}],\"max_output_tokens\":100,"
        "\"reasoning\":{\"effort\":\"high\"},\"stream\":true,"
        "\"frobnicate\":1}",
};

static const air__dialect_ops *const TARGET[] = {
    &air__dialect_openai_chat, &air__dialect_anthropic,
    &air__dialect_openai_responses};

static void parse(air_dialect d, const char *body, air__request *r) {
  air_error err = {0};
  if (air__request_parse(d, body, strlen(body), r, &err) != 0)
    fail_msg("parse: %s", err.message);
}

/* The body's turns: "messages", or a Responses "input". */
static json_t *turns(json_t *root, const air__dialect_ops *t) {
  return json_object_get(
      root, t->api == AIR_DIALECT_OPENAI_RESPONSES ? "input" : "messages");
}

/* A turn's text: content as a string, or its text parts joined. */
static char *text_of(json_t *m) {
  json_t *c = json_object_get(m, "content");
  if (json_is_string(c)) return strdup(json_string_value(c));
  size_t i;
  json_t *p;
  size_t n = 0;
  char *s = calloc(1, 4096);
  json_array_foreach(c, i, p) {
    const char *t = json_string_value(json_object_get(p, "text"));
    if (t != NULL && n + strlen(t) < 4095) {
      memcpy(s + n, t, strlen(t));
      n += strlen(t);
    }
  }
  return s;
}

static const char *role_of(json_t *m) {
  return json_string_value(json_object_get(m, "role"));
}

/* Builds the continuation and parses it (fails the test on an error). */
static json_t *build(air_dialect caller, const air__dialect_ops *target,
                     air_cont_style style, const char *sent, int64_t max,
                     air__request *r) {
  parse(caller, BODY[caller], r);
  air__build_opts o = {.model = "up", .drop_params = caller != target->api};
  air__cont_ask ask = {style, sent, strlen(sent), max};
  air__buf out;
  air__buf_init(&out, 1u << 20);
  air_error err = {0};
  int rc = air__request_build_continuation(target, r, &o, &ask, &out, &err);
  if (rc != 0)
    fail_msg("build %d -> %s: %s", caller, target->name, err.message);
  json_t *root = json_loadb(out.p, out.n, 0, NULL);
  if (root == NULL) fail_msg("not JSON: %s", out.p);
  air__buf_cleanup(&out);
  return root;
}

static void test_every_dialect_and_style(void **st) {
  (void)st;
  static const air_cont_style styles[] = {
      AIR_CONT_PREFILL, AIR_CONT_VLLM, AIR_CONT_PREFIX_FLAG, AIR_CONT_INSTRUCT};
  for (int c = 0; c < 3; c++) {
    for (int t = 0; t < 3; t++) {
      for (int k = 0; k < 4; k++) {
        air__request r;
        const air__dialect_ops *tg = TARGET[t];
        air_cont_style style = styles[k];
        json_t *root = build((air_dialect)c, tg, style, SENT, 0, &r);
        json_t *ms = turns(root, tg);
        size_t n = json_array_size(ms);
        /* The original turn is there, the assistant message with exactly
         * the sent text, and for INSTRUCT one user message after it. */
        size_t a = style == AIR_CONT_INSTRUCT ? n - 2 : n - 1;
        assert_true(n >= 2);
        json_t *am = json_array_get(ms, a);
        assert_string_equal(role_of(am), "assistant");
        char *txt = text_of(am);
        assert_string_equal(txt, SENT);
        free(txt);
        if (tg->api == AIR_DIALECT_OPENAI_RESPONSES) {
          assert_string_equal(json_string_value(json_object_get(am, "type")),
                              "message");
          json_t *part = json_array_get(json_object_get(am, "content"), 0);
          assert_string_equal(json_string_value(json_object_get(part, "type")),
                              "output_text");
        }
        char *first = text_of(json_array_get(ms, a - 1));
        assert_string_equal(first, "Tell me a story");
        free(first);
        if (style == AIR_CONT_INSTRUCT) {
          json_t *um = json_array_get(ms, n - 1);
          assert_string_equal(role_of(um), "user");
          char *ins = text_of(um);
          assert_string_equal(ins, AIR__CONT_INSTRUCT_TEXT);
          assert_null(strstr(ins, "Once upon"));
          free(ins);
        }
        /* The style's flags, and only the style's. */
        json_t *cfm = json_object_get(root, "continue_final_message");
        json_t *agp = json_object_get(root, "add_generation_prompt");
        if (style == AIR_CONT_VLLM) {
          assert_true(json_is_true(cfm));
          assert_true(json_is_false(agp));
        } else {
          assert_null(cfm);
          assert_null(agp);
        }
        json_t *prefix = json_object_get(am, "prefix");
        if (style == AIR_CONT_PREFIX_FLAG)
          assert_true(json_is_true(prefix));
        else
          assert_null(prefix);
        /* Thinking and reasoning off. */
        assert_null(json_object_get(root, "thinking"));
        assert_null(json_object_get(root, "reasoning_effort"));
        assert_null(json_object_get(root, "reasoning"));
        /* Stop kept where both dialects have it; max tokens the caller's. */
        if (c != AIR_DIALECT_OPENAI_RESPONSES &&
            tg->api != AIR_DIALECT_OPENAI_RESPONSES) {
          json_t *stop = json_object_get(root, tg->api == AIR_DIALECT_ANTHROPIC
                                                   ? "stop_sequences"
                                                   : "stop");
          assert_string_equal(json_string_value(json_array_get(stop, 0)),
                              "END");
        }
        const char *mt = tg->api == AIR_DIALECT_OPENAI_RESPONSES
                             ? "max_output_tokens"
                             : "max_tokens";
        assert_int_equal(json_integer_value(json_object_get(root, mt)), 100);
        assert_true(json_is_true(json_object_get(root, "stream")));
        assert_string_equal(json_string_value(json_object_get(root, "model")),
                            "up");
        json_decref(root);
        air__request_cleanup(&r);
      }
    }
  }
}

static void test_max_tokens_as_asked(void **st) {
  (void)st;
  for (int t = 0; t < 3; t++) {
    air__request r;
    json_t *root =
        build(AIR_DIALECT_OPENAI, TARGET[t], AIR_CONT_PREFILL, SENT, 37, &r);
    const char *mt = TARGET[t]->api == AIR_DIALECT_OPENAI_RESPONSES
                         ? "max_output_tokens"
                         : "max_tokens";
    assert_int_equal(json_integer_value(json_object_get(root, mt)), 37);
    json_decref(root);
    air__request_cleanup(&r);
  }
  /* The caller gave none: none for OpenAI, the default for Anthropic. */
  const char *none =
      "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
  for (int t = 0; t < 2; t++) {
    air__request r;
    parse(AIR_DIALECT_OPENAI, none, &r);
    air__build_opts o = {.model = "up", .default_max_tokens = 555};
    air__cont_ask ask = {AIR_CONT_PREFILL, "Hel", 3, 0};
    air__buf out;
    air__buf_init(&out, 1u << 20);
    assert_int_equal(
        air__request_build_continuation(TARGET[t], &r, &o, &ask, &out, NULL),
        0);
    json_t *root = json_loadb(out.p, out.n, 0, NULL);
    json_t *v = json_object_get(root, "max_tokens");
    if (t == 0)
      assert_null(v);
    else
      assert_int_equal(json_integer_value(v), 555);
    json_decref(root);
    air__buf_cleanup(&out);
    air__request_cleanup(&r);
  }
}

static void test_same_dialect_keeps_extras(void **st) {
  (void)st;
  /* A field only the dialect knows passes unchanged to its own dialect
   * (through the canonical form), never across. */
  air__request r;
  json_t *root = build(AIR_DIALECT_OPENAI, &air__dialect_openai_chat,
                       AIR_CONT_VLLM, SENT, 0, &r);
  json_t *k =
      json_object_get(json_object_get(root, "chat_template_kwargs"), "k");
  assert_int_equal(json_integer_value(k), 1);
  assert_non_null(r.canon);
  json_decref(root);
  air__request_cleanup(&r);
  root = build(AIR_DIALECT_ANTHROPIC, &air__dialect_anthropic, AIR_CONT_PREFILL,
               SENT, 0, &r);
  assert_int_equal(json_integer_value(json_object_get(root, "frobnicate")), 1);
  /* Prefill: the conversation ends with the assistant message. */
  json_t *ms = json_object_get(root, "messages");
  assert_string_equal(role_of(json_array_get(ms, json_array_size(ms) - 1)),
                      "assistant");
  json_decref(root);
  air__request_cleanup(&r);
}

static void test_canonical_form_unchanged(void **st) {
  (void)st;
  air__request r;
  parse(AIR_DIALECT_ANTHROPIC, BODY[AIR_DIALECT_ANTHROPIC], &r);
  air__build_opts o = {.model = "up", .drop_params = true};
  air__cont_ask ask = {AIR_CONT_INSTRUCT, SENT, strlen(SENT), 0};
  air__buf out;
  air__buf_init(&out, 1u << 20);
  assert_int_equal(air__request_build_continuation(&air__dialect_openai_chat,
                                                   &r, &o, &ask, &out, NULL),
                   0);
  const air__canon *c = r.canon;
  assert_non_null(c);
  size_t n = c->n_msgs;
  assert_int_equal(c->thinking_budget, 2048);
  assert_int_equal(c->cont_style, AIR_CONT_NONE);
  /* An ordinary attempt after it still asks what the caller asked. */
  air__buf_reset(&out);
  assert_int_equal(
      air__request_build(&air__dialect_openai_chat, &r, &o, &out, NULL), 0);
  assert_int_equal(r.canon->n_msgs, n);
  assert_null(strstr(out.p, "castle"));
  assert_non_null(strstr(out.p, "reasoning_effort"));
  air__buf_cleanup(&out);
  air__request_cleanup(&r);
}

static void test_anthropic_trims_trailing_white_space(void **st) {
  (void)st;
  air__request r;
  json_t *root = build(AIR_DIALECT_OPENAI, &air__dialect_anthropic,
                       AIR_CONT_PREFILL, "Once upon a time \n", 0, &r);
  json_t *ms = json_object_get(root, "messages");
  char *t = text_of(json_array_get(ms, json_array_size(ms) - 1));
  assert_string_equal(t, "Once upon a time");
  free(t);
  json_decref(root);
  air__request_cleanup(&r);
  /* Other dialects get exactly the text. */
  root = build(AIR_DIALECT_OPENAI, &air__dialect_openai_chat, AIR_CONT_PREFILL,
               "Once upon a time \n", 0, &r);
  ms = json_object_get(root, "messages");
  t = text_of(json_array_get(ms, json_array_size(ms) - 1));
  assert_string_equal(t, "Once upon a time \n");
  free(t);
  json_decref(root);
  air__request_cleanup(&r);
}

static void test_errors(void **st) {
  (void)st;
  air__request r;
  parse(AIR_DIALECT_OPENAI, BODY[AIR_DIALECT_OPENAI], &r);
  air__build_opts o = {.model = "up"};
  air__cont_ask ask = {AIR_CONT_NONE, SENT, strlen(SENT), 0};
  air__buf out;
  air__buf_init(&out, 1u << 20);
  air_error err = {0};
  assert_int_equal(air__request_build_continuation(&air__dialect_openai_chat,
                                                   &r, &o, &ask, &out, &err),
                   AIR_EINVAL);
  assert_non_null(strstr(err.message, "style"));
  assert_int_equal(out.n, 0);
  /* Across dialects without drop_params: what the target cannot say is
   * named, as for any attempt, and nothing is written. */
  ask.style = AIR_CONT_PREFILL;
  assert_int_equal(air__request_build_continuation(&air__dialect_anthropic, &r,
                                                   &o, &ask, &out, &err),
                   AIR_ENOTSUP);
  assert_non_null(strstr(err.message, "chat_template_kwargs"));
  assert_int_equal(out.n, 0);
  air__buf_cleanup(&out);
  air__request_cleanup(&r);
}

static bool rejected(int status, const char *body) {
  air__buf b;
  air__buf_init(&b, 1u << 16);
  air_failure f = {0};
  air__parse_error_body(body, strlen(body), &b, &f);
  bool r = air__prefill_rejected(status, &f);
  air__buf_cleanup(&b);
  return r;
}

static void test_prefill_rejected(void **st) {
  (void)st;
  const char *anthropic =
      "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","
      "\"message\":\"This model does not support assistant message prefill. "
      "The conversation must end with a user message.\"},\"request_id\":"
      "\"req_011\"}";
  assert_true(rejected(400, anthropic));
  /* Either sentence, as proxies quote them, in any case; OpenAI's shape. */
  assert_true(rejected(
      400,
      "{\"error\":{\"message\":\"The conversation must end with a user "
      "message.\",\"type\":\"invalid_request_error\"}}"));
  assert_true(rejected(
      400,
      "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","
      "\"message\":\"this model does not support ASSISTANT MESSAGE "
      "PREFILL\"}}"));
  /* Not a 400, or another complaint about the final message. */
  assert_false(rejected(500, anthropic));
  assert_false(rejected(429, anthropic));
  assert_false(rejected(
      400,
      "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","
      "\"message\":\"messages: final assistant content cannot end with "
      "trailing whitespace\"}}"));
  assert_false(rejected(
      400,
      "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","
      "\"message\":\"max_tokens: 0 < 1\"}}"));
  assert_false(air__prefill_rejected(400, NULL));
  air_failure none = {0};
  assert_false(air__prefill_rejected(400, &none));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_dialect_and_style),
      cmocka_unit_test(test_max_tokens_as_asked),
      cmocka_unit_test(test_same_dialect_keeps_extras),
      cmocka_unit_test(test_canonical_form_unchanged),
      cmocka_unit_test(test_anthropic_trims_trailing_white_space),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_prefill_rejected),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
