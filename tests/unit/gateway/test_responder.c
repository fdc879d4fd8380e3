/*
 * The responder at a continuation's seam (docs/design.md §3.5): an Anthropic
 * caller's stream forwarded raw (passthrough) is taken over by the encoder
 * at on_continue, so the continuation's parts go on in the same message
 * and the same open text block; a keep-alive is a ping; the end carries
 * airetry.continued and the usage of both attempts. What the caller got
 * must decode as one answer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "responder.h"
#include "sse.h"

static const char MSG_START[] =
    "event: message_start\ndata: "
    "{\"type\":\"message_start\",\"message\":{\"id\":"
    "\"msg_up\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\","
    "\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":10,"
    "\"output_tokens\":1}}}\n\n";
static const char BLOCK_START[] =
    "event: content_block_start\ndata: "
    "{\"type\":\"content_block_start\",\"index\":0,"
    "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n";
static const char DELTA[] =
    "event: content_block_delta\ndata: "
    "{\"type\":\"content_block_delta\",\"index\":0,"
    "\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n";

/* What the caller decoded. */
typedef struct got {
  const air__dialect_ops *ops;
  air__decoder dec;
  char text[256];
  size_t n;
  unsigned malformed;
  bool finished, terminator;
} got;

static int on_part(void *data, const air_part *p) {
  got *g = data;
  if (p->kind == AIR_PART_TEXT && g->n + p->text_len < sizeof(g->text)) {
    memcpy(g->text + g->n, p->text, p->text_len);
    g->n += p->text_len;
  }
  if (p->kind == AIR_PART_FINISH) g->finished = true;
  return 0;
}

static int on_ev(void *data, const air__sse_event *ev) {
  got *g = data;
  unsigned before = g->dec.malformed;
  g->ops->decode_event(&g->dec, ev, on_part, g);
  if (g->dec.malformed > before) g->malformed++;
  if (g->dec.terminator) g->terminator = true;
  return 0;
}

static size_t count(const char *s, size_t n, const char *what) {
  size_t k = 0, wn = strlen(what);
  for (size_t i = 0; i + wn <= n; i++) k += memcmp(s + i, what, wn) == 0;
  return k;
}

static void forward(air__responder *rs, air__buf *all, const char *raw,
                    const air_part *parts, size_t n) {
  air__gate_event ev = {raw, strlen(raw), parts, n, 0};
  assert_int_equal(air__responder_event(rs, &ev), 0);
  assert_int_equal(air__buf_add(all, rs->out.p ? rs->out.p : "", rs->out.n), 0);
  air__buf_reset(&rs->out);
}

static void test_anthropic_passthrough_taken_over(void **s) {
  (void)s;
  const char body[] =
      "{\"model\":\"r\",\"max_tokens\":50,\"stream\":true,"
      "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
  air__request req;
  air_error err;
  assert_int_equal(
      air__request_parse(AIR_DIALECT_ANTHROPIC, body, strlen(body), &req, &err),
      0);
  air__responder rs;
  air__responder_init(&rs, AIR_DIALECT_ANTHROPIC, &req, "req_1");
  air__commit_info ci = {.target = "ma/m",
                         .attempts = 1,
                         .made = 1,
                         .upstream = AIR_DIALECT_ANTHROPIC,
                         .continuable = true};
  assert_int_equal(air__responder_commit(&rs, &ci, 1), 1);
  assert_true(rs.observe);
  air__buf all;
  air__buf_init(&all, 1u << 20);
  air_part start = {.kind = AIR_PART_START,
                    .id = "msg_up",
                    .id_len = 6,
                    .name = "m",
                    .name_len = 1};
  forward(&rs, &all, MSG_START, &start, 1);
  forward(&rs, &all, BLOCK_START, NULL, 0);
  air_part hello = {.kind = AIR_PART_TEXT, .text = "Hello", .text_len = 5};
  forward(&rs, &all, DELTA, &hello, 1);
  /* The stream died; the rescue runs: a keep-alive. */
  air__responder_keepalive(&rs);
  assert_int_equal(count(rs.out.p, rs.out.n, "event: ping"), 1);
  assert_int_equal(air__buf_add(&all, rs.out.p, rs.out.n), 0);
  air__buf_reset(&rs.out);
  /* The seam: the continuation's parts, encoded. */
  air__continue_info co = {.target = "ma/m",
                           .attempt = 2,
                           .at_char = 5,
                           .input_tokens = 10,
                           .output_tokens = 1};
  assert_int_equal(air__responder_continue(&rs, &co), 0);
  air_part rest[3] = {
      {.kind = AIR_PART_TEXT, .text = " world", .text_len = 6},
      {.kind = AIR_PART_FINISH,
       .finish = AIR_FINISH_STOP,
       .finish_raw = "end_turn",
       .finish_raw_len = 8},
      {.kind = AIR_PART_USAGE, .input_tokens = 12, .output_tokens = 3},
  };
  air__gate_event ev = {NULL, 0, rest, 3, 0};
  assert_int_equal(air__responder_event(&rs, &ev), 0);
  assert_int_equal(air__buf_add(&all, rs.out.p ? rs.out.p : "", rs.out.n), 0);
  air__buf_reset(&rs.out);
  air__exchange_result res;
  memset(&res, 0, sizeof(res));
  res.committed = true;
  res.n_attempts = 2;
  res.target = res.answered = "ma/m";
  air__responder_end(&rs, &res, 1);
  assert_int_equal(rs.end, AIR__RESP_STREAM_END);
  assert_int_equal(air__buf_add(&all, rs.out.p ? rs.out.p : "", rs.out.n), 0);

  /* One message, one text block (index 0 kept), one answer. */
  assert_int_equal(count(all.p, all.n, "event: message_start"), 1);
  assert_int_equal(count(all.p, all.n, "event: content_block_start"), 1);
  assert_int_equal(count(all.p, all.n, "\"index\":1"), 0);
  assert_int_equal(count(all.p, all.n,
                         "\"continued\":[{\"target\":\"ma/m\",\"at_char\":5}]"),
                   1);
  assert_int_equal(count(all.p, all.n, "\"input_tokens\":22"), 1);
  assert_int_equal(count(all.p, all.n, "\"output_tokens\":4"), 1);
  got g;
  memset(&g, 0, sizeof(g));
  g.ops = air__dialect_get(AIR_DIALECT_ANTHROPIC);
  g.ops->decoder_init(&g.dec);
  air__sse sse;
  air__sse_init(&sse, on_ev, &g);
  assert_int_equal(air__sse_feed(&sse, all.p, all.n), 0);
  air__sse_cleanup(&sse);
  air__decoder_cleanup(&g.dec);
  assert_int_equal(g.malformed, 0);
  assert_true(g.finished);
  assert_true(g.terminator);
  g.text[g.n] = '\0';
  assert_string_equal(g.text, "Hello world");
  air__buf_cleanup(&all);
  air__responder_cleanup(&rs);
  air__request_cleanup(&req);
}

/* Without continuation nothing is observed, and a keep-alive before the
 * head (or for a whole answer) writes nothing. */
static void test_no_observe_without_continuation(void **s) {
  (void)s;
  const char body[] =
      "{\"model\":\"r\",\"stream\":false,"
      "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
  air__request req;
  air_error err;
  assert_int_equal(
      air__request_parse(AIR_DIALECT_OPENAI, body, strlen(body), &req, &err),
      0);
  air__responder rs;
  air__responder_init(&rs, AIR_DIALECT_OPENAI, &req, "req_2");
  air__responder_keepalive(&rs);
  assert_int_equal(rs.out.n, 0);
  air__commit_info ci = {.target = "mo/m",
                         .attempts = 1,
                         .made = 1,
                         .upstream = AIR_DIALECT_OPENAI};
  assert_int_equal(air__responder_commit(&rs, &ci, 1), 0);
  assert_false(rs.observe);
  air__responder_keepalive(&rs);
  assert_int_equal(rs.out.n, 0);
  air__responder_cleanup(&rs);
  air__request_cleanup(&req);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_anthropic_passthrough_taken_over),
      cmocka_unit_test(test_no_observe_without_continuation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
