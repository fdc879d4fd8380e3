/*
 * libFuzzer target for the caller request decoders of both dialects
 * (air__request_parse in src/codec/dialect.c) and the upstream request
 * builders (air__request_build: src/codec/hub.c and the dialect folders
 * src/codec/openai_chat/, src/codec/anthropic/).
 *
 * Input layout: one header byte, then the caller's request body.
 *   h bit 0      the caller's dialect: 0 OpenAI, 1 Anthropic
 *   h >> 1       picks the override (a JSON object of request fields, as a
 *                route, target or rule of a config gives one) from OVERRIDES
 *
 * A body that parses is built into an upstream body by BOTH providers, with
 * drop_params false and true and default_max_tokens 4096. A build either
 * succeeds, giving a JSON object with "stream": true, "model" the upstream
 * model, an array "messages" (and, per API, stream_options.include_usage
 * true or a positive integer max_tokens), or fails with AIR_EINVAL (or
 * AIR_ENOTSUP: a field the target cannot express), a
 * message and nothing written. A body that does not parse fails with
 * AIR_EPARSE or AIR_EINVAL and a message; that message (which may quote
 * the body's bytes) goes into encode_error_body of both dialects, whose
 * result must be a JSON object too (see known_bad below).
 *
 * Differential: the fast validator (request_text.c) may accept only what
 * the jansson path accepts, with the same model and flags, and every
 * upstream body built from its text must equal (as JSON) the one built
 * from the jansson tree, or fail the same way.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "airetry.h"
#include "codec_json.h"
#include "dialect.h"

#define CHECK(cond)       \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

/* Overrides a config may hold (objects; never model, messages or stream). */
static const char *const OVERRIDES[] = {
    NULL,
    "{\"seed\":1}",
    "{\"max_tokens\":8192}",
    "{\"max_tokens\":null,\"temperature\":null}",
    "{\"temperature\":1.5,\"top_p\":0.9,\"stop\":[\"\\n\\n\"]}",
    "{\"stream_options\":{\"include_usage\":false},\"metadata\":{\"u\":1}}",
    "{\"tools\":[],\"tool_choice\":\"auto\"}",
    "{\"x-unknown\":{\"nested\":[1,\"\\u00e9\",null]}}",
};
#define N_OVERRIDES (sizeof OVERRIDES / sizeof OVERRIDES[0])

/* Upstream model names, one per provider. */
static const char *const MODELS[2] = {"gpt-4o-mini", "claude/sonnet-4.5"};

/* Parses an upstream body and checks what every build must give. */
static void check_upstream(const air__buf *out, const air__dialect_ops *ops,
                           const char *model) {
  json_error_t jerr;
  json_t *v = json_loadb(out->p, out->n, 0, &jerr);
  CHECK(json_is_object(v));
  CHECK(json_is_true(json_object_get(v, "stream")));
  const char *m = json_string_value(json_object_get(v, "model"));
  CHECK(m != NULL && strcmp(m, model) == 0);
  CHECK(json_is_array(json_object_get(v, "messages")));
  if (ops->api == AIR_DIALECT_OPENAI) {
    json_t *so = json_object_get(v, "stream_options");
    CHECK(json_is_true(json_object_get(so, "include_usage")));
  } else {
    json_t *mt = json_object_get(v, "max_tokens");
    CHECK(json_is_integer(mt) || json_is_real(mt));
  }
  json_decref(v);
}

/* The upstream body from a fast-path request equals the tree path's. */
static void same_builds(const air__request *fast, const air__request *tree,
                        const char *override) {
  for (int p = 0; p < 2; p++) {
    const air__dialect_ops *ops =
        p ? &air__dialect_anthropic : &air__dialect_openai_chat;
    for (int drop = 0; drop < 2; drop++) {
      air__build_opts o = {.model = MODELS[p],
                           .override_json = override,
                           .drop_params = drop != 0,
                           .default_max_tokens = 4096};
      air__buf a, b;
      air__buf_init(&a, 1u << 26);
      air__buf_init(&b, 1u << 26);
      air_error ea, eb;
      memset(&ea, 0, sizeof(ea));
      memset(&eb, 0, sizeof(eb));
      int ra = air__request_build(ops, fast, &o, &a, &ea);
      int rb = air__request_build(ops, tree, &o, &b, &eb);
      CHECK(ra == rb);
      if (ra == 0) {
        json_t *va = json_loadb(a.p, a.n, JSON_REJECT_DUPLICATES, NULL);
        json_t *vb = json_loadb(b.p, b.n, JSON_REJECT_DUPLICATES, NULL);
        CHECK(va != NULL && vb != NULL && json_equal(va, vb));
        json_decref(va);
        json_decref(vb);
      } else {
        CHECK(strcmp(ea.message, eb.message) == 0);
      }
      air__buf_cleanup(&a);
      air__buf_cleanup(&b);
    }
  }
}

static void build(const air__request *req, const char *override) {
  for (int p = 0; p < 2; p++) {
    const air__dialect_ops *ops =
        p ? &air__dialect_anthropic : &air__dialect_openai_chat;
    for (int drop = 0; drop < 2; drop++) {
      air__build_opts o = {.model = MODELS[p],
                           .override_json = override,
                           .drop_params = drop != 0,
                           .default_max_tokens = 4096};
      air__buf out;
      air__buf_init(&out, 1u << 26);
      air_error err;
      memset(&err, 0, sizeof(err));
      int rc = air__request_build(ops, req, &o, &out, &err);
      if (rc == 0) {
        check_upstream(&out, ops, o.model);
      } else {
        CHECK((rc == AIR_EINVAL || rc == AIR_ENOTSUP) && err.code == rc &&
              err.message[0] != '\0');
        CHECK(out.n == 0);
      }
      air__buf_cleanup(&out);
    }
  }
}

/* The final error body of each dialect for a parse error message. */
static void error_bodies(const char *message) {
  /* jansson's error text can quote a cut UTF-8 sequence ("\<0xC3>"): the
   * encoder must still produce valid JSON (corpus: cut_utf8_escape). */
  air_attempt log[1] = {{.n = 1,
                         .target = "openai/gpt-4o",
                         .reason = AIR_REASON_BAD_REQUEST,
                         .status = 400,
                         .message = message,
                         .request_id = ""}};
  for (int p = 0; p < 2; p++) {
    const air__dialect_ops *ops =
        p ? &air__dialect_anthropic : &air__dialect_openai_chat;
    air__buf eb;
    air__buf_init(&eb, 1u << 16);
    CHECK(ops->encode_error_body(400, AIR_REASON_BAD_REQUEST, message, log, 1,
                                 &eb) == 0);
    json_t *v = json_loadb(eb.p, eb.n, 0, NULL);
    CHECK(json_is_object(v));
    json_decref(v);
    air__buf_cleanup(&eb);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  air_dialect api = (data[0] & 1) ? AIR_DIALECT_ANTHROPIC : AIR_DIALECT_OPENAI;
  const char *override = OVERRIDES[(data[0] >> 1) % N_OVERRIDES];

  air__request req;
  air_error err;
  memset(&err, 0, sizeof(err));
  air__request fast;
  if (air__request_fast(api, (const char *)data + 1, size - 1, &fast)) {
    air__request tree;
    CHECK(air__request_parse_tree(api, (const char *)data + 1, size - 1, &tree,
                                  &err) == 0);
    CHECK(strcmp(fast.model, tree.model) == 0 && fast.stream == tree.stream &&
          fast.include_usage == tree.include_usage &&
          fast.json_response == tree.json_response && fast.raw != NULL &&
          tree.raw == NULL);
    same_builds(&fast, &tree, override);
    CHECK(json_equal(air__request_body(&fast), air__request_body(&tree)));
    air__request_cleanup(&tree);
    air__request_cleanup(&fast);
  }
  int rc =
      air__request_parse(api, (const char *)data + 1, size - 1, &req, &err);
  if (rc != 0) {
    CHECK(rc == AIR_EPARSE || rc == AIR_EINVAL);
    CHECK(err.code == rc && err.message[0] != '\0');
    CHECK(memchr(err.message, '\0', sizeof(err.message)) != NULL);
    error_bodies(err.message);
    return 0;
  }
  CHECK(json_is_object(air__request_body(&req)));
  CHECK(req.dialect == api && req.model != NULL && req.model[0] != '\0');
  build(&req, override);
  air__request_cleanup(&req);
  return 0;
}
