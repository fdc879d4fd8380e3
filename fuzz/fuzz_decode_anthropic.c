/*
 * libFuzzer target for the Anthropic codec (src/codec/anthropic/).
 *
 * The input is taken as an upstream byte stream: parsed by air__sse, every
 * event goes through decode_event, every part is checked and handed to the
 * Anthropic encoder (up to the first ERROR, which becomes
 * encode_error_event, as the gateway does). The encoder's bytes must parse
 * back (SSE + decoder) into the same text and reasoning, with nothing
 * malformed. The whole input also goes through decode_body, the aggregate
 * of each decode through encode_response (both also with the forced JSON
 * tool read back as text, decoder json_tool), and, as a caller body of either
 * dialect, through air__request_parse + air__request_build, whose output must
 * be a JSON object.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "airetry.h"
#include "dialect.h"
#include "sse.h"

#define CHECK(cond)       \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

static const air__dialect_ops *const ops = &air__dialect_anthropic;

typedef struct ctx {
  air__decoder d;
  air__encoder e;
  air__aggregate agg;
  air__buf out;  /* encoder bytes */
  air__buf text; /* text of the parts given to the encoder */
  air__buf reasoning;
  bool errored; /* an ERROR part ended the encoding */
  bool encode;  /* feed parts to the encoder */
} ctx;

static void check_part(const air_part *p) {
  CHECK(p->text != NULL || p->text_len == 0);
  CHECK(p->id != NULL || p->id_len == 0);
  CHECK(p->name != NULL || p->name_len == 0);
  /* Every byte must be readable during the callback. */
  volatile unsigned char sink = 0;
  for (size_t i = 0; i < p->text_len; i++) sink ^= (unsigned char)p->text[i];
  for (size_t i = 0; i < p->id_len; i++) sink ^= (unsigned char)p->id[i];
  for (size_t i = 0; i < p->name_len; i++) sink ^= (unsigned char)p->name[i];
  (void)sink;
  switch (p->kind) {
    case AIR_PART_TOOL_START:
    case AIR_PART_TOOL_DELTA:
      CHECK(p->index >= 0 && p->index < AIR__DECODER_MAX_TOOLS);
      CHECK(p->kind == AIR_PART_TOOL_START || p->text_len > 0);
      break;
    case AIR_PART_TEXT:
    case AIR_PART_REASONING:
      CHECK(p->index >= 0 && p->text_len > 0);
      break;
    case AIR_PART_FINISH:
      CHECK(p->finish != AIR_FINISH_NONE);
      break;
    default:
      break;
  }
}

static int on_part(void *data, const air_part *p) {
  ctx *c = data;
  check_part(p);
  int rc = air__aggregate_add(&c->agg, p);
  CHECK(rc == 0 || rc == AIR_ETOOBIG);
  if (!c->encode || c->errored) return 0;
  if (p->kind == AIR_PART_ERROR) {
    CHECK(ops->encode_error_event(&c->e, AIR_REASON_OVERLOADED, "boom",
                                  &c->out) == 0);
    c->errored = true;
    return 0;
  }
  CHECK(ops->encode_part(&c->e, p, &c->out) == 0);
  if (p->kind == AIR_PART_TEXT || p->kind == AIR_PART_REFUSAL)
    CHECK(air__buf_add(&c->text, p->text, p->text_len) == 0);
  if (p->kind == AIR_PART_REASONING)
    CHECK(air__buf_add(&c->reasoning, p->text, p->text_len) == 0);
  return 0;
}

static int on_event(void *data, const air__sse_event *ev) {
  ctx *c = data;
  ops->decode_event(&c->d, ev, on_part, c);
  return 0;
}

static void ctx_init(ctx *c, bool encode) {
  memset(c, 0, sizeof(*c));
  ops->decoder_init(&c->d);
  ops->encoder_init(&c->e, NULL, 1);
  air__aggregate_init(&c->agg);
  air__buf_init(&c->out, 64u << 20);
  air__buf_init(&c->text, 64u << 20);
  air__buf_init(&c->reasoning, 64u << 20);
  c->encode = encode;
}

static void ctx_cleanup(ctx *c) {
  air__decoder_cleanup(&c->d);
  air__aggregate_cleanup(&c->agg);
  air__buf_cleanup(&c->out);
  air__buf_cleanup(&c->text);
  air__buf_cleanup(&c->reasoning);
}

static bool same(const air__buf *a, const air__buf *b) {
  return a->n == b->n && (a->n == 0 || memcmp(a->p, b->p, a->n) == 0);
}

/* The encoder writes invalid UTF-8 as U+FFFD, so only valid text is
 * expected back byte for byte. */
static bool valid_utf8(const air__buf *b) {
  for (size_t i = 0; i < b->n;) {
    size_t k = air__utf8_seq((const unsigned char *)b->p + i, b->n - i);
    if (k == 0) return false;
    i += k;
  }
  return true;
}

static void decode_stream(ctx *c, const char *in, size_t n) {
  air__sse p;
  air__sse_init(&p, on_event, c);
  air__sse_feed(&p, in, n);
  air__sse_finish(&p);
  air__sse_cleanup(&p);
}

static void check_response(const air__aggregate *a) {
  air__buf out;
  air__buf_init(&out, 256u << 20);
  CHECK(ops->encode_response(a, &out) == 0);
  CHECK(out.n > 0 && out.p[0] == '{' && out.p[out.n - 1] == '}');
  air__buf_cleanup(&out);
}

static void check_build(air_dialect dialect, const uint8_t *data, size_t size) {
  air__request req;
  air_error err;
  if (air__request_parse(dialect, (const char *)data, size, &req, &err) != 0)
    return;
  for (int drop = 0; drop < 2; drop++) {
    air__build_opts o = {
        .model = "claude-fuzz",
        .override_json = drop ? "{\"top_k\":null,\"x\":1}" : NULL,
        .drop_params = drop == 1,
        .default_max_tokens = 1024,
        .structured_output = drop ? AIR__STRUCT_NATIVE : AIR__STRUCT_TOOL};
    air__buf out;
    air__buf_init(&out, 64u << 20);
    int rc = air__request_build(ops, &req, &o, &out, &err);
    if (rc == 0) {
      json_t *v = json_loadb(out.p, out.n, 0, NULL);
      CHECK(json_is_object(v));
      CHECK(json_is_true(json_object_get(v, "stream")));
      CHECK(json_is_integer(json_object_get(v, "max_tokens")));
      json_decref(v);
    } else {
      CHECK(rc == AIR_EINVAL || rc == AIR_ENOTSUP || rc == AIR_ENOMEM);
      CHECK(err.message[0] != '\0');
    }
    air__buf_cleanup(&out);
  }
  air__request_cleanup(&req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *in = (const char *)data;

  /* The stream, decoded and re-encoded. */
  ctx c;
  ctx_init(&c, true);
  decode_stream(&c, in, size);
  if (!c.errored) CHECK(ops->encode_end(&c.e, &c.out) == 0);
  check_response(&c.agg);

  /* The encoder's bytes decode back to the same content (the decoder
   * tracks tool blocks only up to AIR__DECODER_MAX_TOOLS). */
  if (!c.errored && c.e.next_block <= AIR__DECODER_MAX_TOOLS &&
      valid_utf8(&c.text) && valid_utf8(&c.reasoning)) {
    ctx back;
    ctx_init(&back, false);
    decode_stream(&back, c.out.p, c.out.n);
    CHECK(back.d.malformed == 0 && back.d.done && back.d.finished);
    CHECK(back.agg.text.n == c.text.n &&
          (c.text.n == 0 || memcmp(back.agg.text.p, c.text.p, c.text.n) == 0));
    CHECK(same(&back.agg.reasoning, &c.reasoning));
    ctx_cleanup(&back);
  }
  ctx_cleanup(&c);

  /* The whole input as a non-streaming body. */
  ctx b;
  ctx_init(&b, false);
  int rc = ops->decode_body(&b.d, in, size, on_part, &b);
  CHECK(rc == 0 || rc == AIR_EPARSE || rc == AIR_ETOOBIG);
  if (rc == 0) check_response(&b.agg);
  ctx_cleanup(&b);

  /* Both again with the forced JSON tool read back as text (a request
   * that asked a schema through structured_output: tool). */
  ctx j;
  ctx_init(&j, true);
  j.d.json_tool = true;
  decode_stream(&j, in, size);
  if (!j.errored) CHECK(ops->encode_end(&j.e, &j.out) == 0);
  check_response(&j.agg);
  ctx_cleanup(&j);
  ctx_init(&j, false);
  j.d.json_tool = true;
  rc = ops->decode_body(&j.d, in, size, on_part, &j);
  CHECK(rc == 0 || rc == AIR_EPARSE || rc == AIR_ETOOBIG);
  if (rc == 0) check_response(&j.agg);
  ctx_cleanup(&j);

  /* The whole input as a caller request of either dialect. */
  check_build(AIR_DIALECT_ANTHROPIC, data, size);
  check_build(AIR_DIALECT_OPENAI, data, size);

  /* An error body with the input as message (NUL-terminated copy). */
  char *msg = malloc(size + 1);
  CHECK(msg != NULL);
  if (size) memcpy(msg, data, size);
  msg[size] = '\0';
  air_attempt log = {.n = 1,
                     .target = msg,
                     .reason = AIR_REASON_NETWORK,
                     .status = 502,
                     .message = msg,
                     .request_id = msg,
                     .ms = 1};
  air__buf out;
  air__buf_init(&out, 64u << 20);
  CHECK(ops->encode_error_body(502, AIR_REASON_NETWORK, msg, &log, 1, &out) ==
        0);
  air__buf_cleanup(&out);
  free(msg);
  return 0;
}
