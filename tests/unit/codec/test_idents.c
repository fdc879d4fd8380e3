/*
 * Upstream identifiers and fields that carry meaning, at and past their
 * limits (dialect.h, "identifiers"), in every dialect: an id, model name
 * or tool call id is kept whole up to AIR__MAX_IDENT_BYTES and replaced
 * past it (the same replacement for the same tool call id) by the
 * aggregate and every encoder; a finish reason or tool name over its limit
 * makes the event or body fatal (the decoder yields nothing).
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

#include "airetry.h"
#include "dialect.h"
#include "sse.h"

/* A string of n copies of c (static storage, one per slot). */
static const char *rep(int slot, char c, size_t n) {
  static char s[4][AIR__MAX_IDENT_BYTES * 2];
  assert_true(n < sizeof(s[0]));
  memset(s[slot], c, n);
  s[slot][n] = '\0';
  return s[slot];
}

typedef struct got {
  unsigned n, start, tool, finish;
  size_t id_len, name_len, tool_id_len, tool_name_len;
} got;

static int on_part(void *data, const air_part *p) {
  got *g = data;
  g->n++;
  if (p->kind == AIR_PART_START) {
    g->start++;
    g->id_len = p->id_len;
    g->name_len = p->name_len;
  } else if (p->kind == AIR_PART_TOOL_START) {
    g->tool++;
    g->tool_id_len = p->id_len;
    g->tool_name_len = p->name_len;
  } else if (p->kind == AIR_PART_FINISH) {
    g->finish++;
  }
  return 0;
}

/* Decodes one event (type may be NULL) with ops into g; returns the decoder's
 * fatal description (NULL: none). */
static const char *decode1(const air__dialect_ops *ops, const char *type,
                           const char *data, got *g) {
  air__decoder d;
  ops->decoder_init(&d);
  air__sse_event ev;
  memset(&ev, 0, sizeof(ev));
  ev.type.p = type != NULL ? type : "";
  ev.type.n = type != NULL ? strlen(type) : 0;
  ev.data.p = data;
  ev.data.n = strlen(data);
  memset(g, 0, sizeof(*g));
  assert_int_equal(ops->decode_event(&d, &ev, on_part, g), 0);
  assert_int_equal(d.malformed, 0);
  const char *fatal = d.fatal;
  air__decoder_cleanup(&d);
  return fatal;
}

static const char *decode_body(const air__dialect_ops *ops, const char *body,
                               got *g, int *rc) {
  air__decoder d;
  ops->decoder_init(&d);
  memset(g, 0, sizeof(*g));
  *rc = ops->decode_body(&d, body, strlen(body), on_part, g);
  const char *fatal = d.fatal;
  air__decoder_cleanup(&d);
  return fatal;
}

static char buf[1][AIR__MAX_IDENT_BYTES * 5];

/* fmt into out with each "%s" replaced by the next argument (the only
 * directive: the texts are JSON with long strings spliced in). */
static void fill(char *out, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t n = 0;
  for (const char *f = fmt; *f; f++) {
    const char *s = NULL;
    if (f[0] == '%' && f[1] == 's') {
      s = va_arg(ap, const char *);
      f++;
    }
    size_t k = s != NULL ? strlen(s) : 1;
    assert_true(n + k < cap);
    memcpy(out + n, s != NULL ? s : f, k);
    n += k;
  }
  out[n] = '\0';
  va_end(ap);
}

/* ---- decoders
 * ---------------------------------------------------------------- */

static void test_openai_decoder(void **s) {
  (void)s;
  const air__dialect_ops *ops = &air__dialect_openai_chat;
  got g;
  /* Ids of 5000 bytes are decoded whole (the consumers replace them). */
  fill(buf[0], sizeof(buf[0]),
       "{\"id\":\"%s\",\"model\":\"%s\",\"choices\":[{\"index\":0,\"delta\":{"
       "\"content\":"
       "\"hi\",\"tool_calls\":[{\"index\":0,\"id\":\"%s\",\"function\":{"
       "\"name\":\"f\"}}]},"
       "\"finish_reason\":null}]}",
       rep(0, 'a', 5000), rep(1, 'm', 5000), rep(2, 'c', 5000));
  assert_null(decode1(ops, NULL, buf[0], &g));
  assert_int_equal(g.id_len, 5000);
  assert_int_equal(g.name_len, 5000);
  assert_int_equal(g.tool_id_len, 5000);
  /* A finish reason at the limit is one; past it the event is fatal. */
  const char *fmt =
      "{\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},"
      "\"finish_reason\":\"%s\"}]}";
  fill(buf[0], sizeof(buf[0]), fmt, rep(0, 'f', AIR__MAX_FINISH_REASON_BYTES));
  assert_null(decode1(ops, NULL, buf[0], &g));
  assert_int_equal(g.finish, 1);
  fill(buf[0], sizeof(buf[0]), fmt,
       rep(0, 'f', AIR__MAX_FINISH_REASON_BYTES + 1));
  assert_string_equal(decode1(ops, NULL, buf[0], &g), AIR__OVER_FINISH);
  assert_int_equal(g.n, 0);
  /* A tool name past its limit: fatal, nothing handed over. */
  fill(buf[0], sizeof(buf[0]),
       "{\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{"
       "\"index\":0,"
       "\"id\":\"c\",\"function\":{\"name\":\"%s\"}}]}}]}",
       rep(0, 't', AIR__MAX_TOOL_NAME_BYTES + 1));
  assert_string_equal(decode1(ops, NULL, buf[0], &g), AIR__OVER_TOOL_NAME);
  assert_int_equal(g.n, 0);
  /* Bodies. */
  int rc;
  fill(buf[0], sizeof(buf[0]),
       "{\"id\":\"x\",\"choices\":[{\"index\":0,\"message\":{\"content\":"
       "\"hi\"},"
       "\"finish_reason\":\"%s\"}]}",
       rep(0, 'f', AIR__MAX_FINISH_REASON_BYTES + 1));
  assert_string_equal(decode_body(ops, buf[0], &g, &rc), AIR__OVER_FINISH);
  assert_int_equal(rc, AIR_EPARSE);
  assert_int_equal(g.n, 0);
  fill(buf[0], sizeof(buf[0]),
       "{\"id\":\"x\",\"choices\":[{\"index\":0,\"message\":{\"tool_calls\":[{"
       "\"id\":\"c\","
       "\"function\":{\"name\":\"%s\",\"arguments\":\"{}\"}}]},\"finish_"
       "reason\":\"tool_calls\"}]}",
       rep(0, 't', AIR__MAX_TOOL_NAME_BYTES + 1));
  assert_string_equal(decode_body(ops, buf[0], &g, &rc), AIR__OVER_TOOL_NAME);
  assert_int_equal(g.n, 0);
}

static void test_anthropic_decoder(void **s) {
  (void)s;
  const air__dialect_ops *ops = &air__dialect_anthropic;
  got g;
  fill(buf[0], sizeof(buf[0]),
       "{\"type\":\"message_start\",\"message\":{\"id\":\"%s\",\"model\":\"%"
       "s\"}}",
       rep(0, 'a', 5000), rep(1, 'm', 5000));
  assert_null(decode1(ops, "message_start", buf[0], &g));
  assert_int_equal(g.id_len, 5000);
  assert_int_equal(g.name_len, 5000);
  fill(buf[0], sizeof(buf[0]),
       "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{"
       "\"type\":"
       "\"tool_use\",\"id\":\"%s\",\"name\":\"f\",\"input\":{}}}",
       rep(0, 'c', 5000));
  assert_null(decode1(ops, "content_block_start", buf[0], &g));
  assert_int_equal(g.tool_id_len, 5000);
  fill(buf[0], sizeof(buf[0]),
       "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{"
       "\"type\":"
       "\"tool_use\",\"id\":\"c\",\"name\":\"%s\",\"input\":{}}}",
       rep(0, 't', AIR__MAX_TOOL_NAME_BYTES + 1));
  assert_string_equal(decode1(ops, "content_block_start", buf[0], &g),
                      AIR__OVER_TOOL_NAME);
  assert_int_equal(g.n, 0);
  const char *fmt =
      "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"%s\"}}";
  fill(buf[0], sizeof(buf[0]), fmt, rep(0, 'f', AIR__MAX_FINISH_REASON_BYTES));
  assert_null(decode1(ops, "message_delta", buf[0], &g));
  assert_int_equal(g.finish, 1);
  fill(buf[0], sizeof(buf[0]), fmt,
       rep(0, 'f', AIR__MAX_FINISH_REASON_BYTES + 1));
  assert_string_equal(decode1(ops, "message_delta", buf[0], &g),
                      AIR__OVER_FINISH);
  assert_int_equal(g.n, 0);
  int rc;
  fill(buf[0], sizeof(buf[0]),
       "{\"type\":\"message\",\"id\":\"m\",\"content\":[{\"type\":\"tool_use\","
       "\"id\":\"c\","
       "\"name\":\"%s\",\"input\":{}}],\"stop_reason\":\"tool_use\"}",
       rep(0, 't', AIR__MAX_TOOL_NAME_BYTES + 1));
  assert_string_equal(decode_body(ops, buf[0], &g, &rc), AIR__OVER_TOOL_NAME);
  assert_int_equal(rc, AIR_EPARSE);
  assert_int_equal(g.n, 0);
  fill(buf[0], sizeof(buf[0]),
       "{\"type\":\"message\",\"id\":\"m\",\"content\":[],\"stop_reason\":\"%"
       "s\"}",
       rep(0, 'f', AIR__MAX_FINISH_REASON_BYTES + 1));
  assert_string_equal(decode_body(ops, buf[0], &g, &rc), AIR__OVER_FINISH);
}

static void test_responses_decoder(void **s) {
  (void)s;
  const air__dialect_ops *ops = &air__dialect_openai_responses;
  got g;
  fill(buf[0], sizeof(buf[0]),
       "{\"type\":\"response.created\",\"response\":{\"id\":\"%s\",\"model\":"
       "\"%s\"}}",
       rep(0, 'a', 5000), rep(1, 'm', 5000));
  assert_null(decode1(ops, NULL, buf[0], &g));
  assert_int_equal(g.id_len, 5000);
  assert_int_equal(g.name_len, 5000);
  const char *item =
      "{\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{"
      "\"type\":"
      "\"function_call\",\"id\":\"fc_1\",\"call_id\":\"%s\",\"name\":\"%s\","
      "\"arguments\":\"\"}}";
  fill(buf[0], sizeof(buf[0]), item, rep(0, 'c', 5000), "f");
  assert_null(decode1(ops, NULL, buf[0], &g));
  assert_int_equal(g.tool_id_len, 5000);
  fill(buf[0], sizeof(buf[0]), item, "c",
       rep(0, 't', AIR__MAX_TOOL_NAME_BYTES + 1));
  assert_string_equal(decode1(ops, NULL, buf[0], &g), AIR__OVER_TOOL_NAME);
  assert_int_equal(g.n, 0);
  fill(buf[0], sizeof(buf[0]),
       "{\"type\":\"response.incomplete\",\"response\":{\"id\":\"r\","
       "\"incomplete_details\":"
       "{\"reason\":\"%s\"}}}",
       rep(0, 'f', AIR__MAX_FINISH_REASON_BYTES + 1));
  assert_string_equal(decode1(ops, NULL, buf[0], &g), AIR__OVER_FINISH);
  assert_int_equal(g.n, 0);
  int rc;
  fill(buf[0], sizeof(buf[0]),
       "{\"object\":\"response\",\"id\":\"r\",\"output\":[{\"type\":\"function_"
       "call\","
       "\"call_id\":\"c\",\"name\":\"%s\",\"arguments\":\"{}\"}]}",
       rep(0, 't', AIR__MAX_TOOL_NAME_BYTES + 1));
  assert_string_equal(decode_body(ops, buf[0], &g, &rc), AIR__OVER_TOOL_NAME);
  assert_int_equal(rc, AIR_EPARSE);
  assert_int_equal(g.n, 0);
}

/* ---- the aggregate and the encoders
 * ------------------------------------------ */

static air_part start_part(const char *id, const char *model) {
  air_part p = {.kind = AIR_PART_START,
                .id = id,
                .id_len = strlen(id),
                .name = model,
                .name_len = strlen(model)};
  return p;
}

static air_part tool_part(const char *id) {
  air_part p = {.kind = AIR_PART_TOOL_START,
                .index = 0,
                .id = id,
                .id_len = strlen(id),
                .name = "f",
                .name_len = 1};
  return p;
}

static void test_aggregate(void **s) {
  (void)s;
  air__aggregate a;
  air__aggregate_init(&a);
  a.idents.id = "chatcmpl-rid1";
  a.idents.model = "target-model";
  /* At the limit: whole. */
  const char *id4096 = rep(0, 'a', AIR__MAX_IDENT_BYTES);
  air_part p = start_part(id4096, "m");
  assert_int_equal(air__aggregate_add(&a, &p), 0);
  assert_int_equal(a.id.n, AIR__MAX_IDENT_BYTES);
  assert_int_equal(a.idents.replaced, 0);
  /* Past it: replaced. */
  p = start_part(rep(0, 'a', AIR__MAX_IDENT_BYTES + 1), rep(1, 'm', 5000));
  assert_int_equal(air__aggregate_add(&a, &p), 0);
  assert_string_equal(a.id.p, "chatcmpl-rid1");
  assert_string_equal(a.model.p, "target-model");
  const char *tid = rep(2, 'c', 5000);
  p = tool_part(tid);
  assert_int_equal(air__aggregate_add(&a, &p), 0);
  char sub[AIR__TOOL_ID_SUB_BYTES];
  air__tool_id_sub(tid, strlen(tid), sub);
  assert_string_equal(a.tools[0].id, sub);
  assert_int_equal(strncmp(sub, "call_airetry_", 13), 0);
  assert_int_equal(a.idents.replaced,
                   AIR__IDENT_ID | AIR__IDENT_MODEL | AIR__IDENT_TOOL_ID);
  assert_string_equal(air__ident_names(a.idents.replaced), "id,model,tool_id");
  /* A tool name past its limit is refused (the decoders made it fatal). */
  p = tool_part("c");
  p.name = rep(3, 't', AIR__MAX_TOOL_NAME_BYTES + 1);
  p.name_len = AIR__MAX_TOOL_NAME_BYTES + 1;
  assert_int_equal(air__aggregate_add(&a, &p), AIR_ETOOBIG);
  /* Every dialect's body carries the replacements. */
  air_part f = {.kind = AIR_PART_FINISH,
                .finish = AIR_FINISH_TOOL_CALLS,
                .finish_raw = "tool_calls",
                .finish_raw_len = 10};
  assert_int_equal(air__aggregate_add(&a, &f), 0);
  size_t n;
  const air__dialect_ops *const *all = air__dialects(&n);
  for (size_t i = 0; i < n; i++) {
    air__buf out;
    air__buf_init(&out, AIR__MAX_ANSWER_BYTES);
    assert_int_equal(all[i]->encode_response(&a, &out), 0);
    assert_non_null(strstr(out.p, "rid1"));
    assert_non_null(strstr(out.p, sub));
    assert_null(strstr(out.p, "ccccccccccccccccccccccccccccccccccccccc"));
    air__buf_cleanup(&out);
  }
  air__aggregate_cleanup(&a);
}

/* Each encoder writes a 4096-byte id whole, and the replacements of longer
 * ones; the same tool call id gets the same replacement every time. */
static void test_encoders(void **s) {
  (void)s;
  size_t n;
  const air__dialect_ops *const *all = air__dialects(&n);
  const char *tid = rep(2, 'c', 5000);
  char sub[AIR__TOOL_ID_SUB_BYTES];
  air__tool_id_sub(tid, strlen(tid), sub);
  for (size_t i = 0; i < n; i++) {
    const air__dialect_ops *ops = all[i];
    for (int longer = 0; longer < 2; longer++) {
      air__request req;
      memset(&req, 0, sizeof(req));
      req.dialect = ops->api;
      req.model = "route";
      req.stream = true;
      air__encoder *e = calloc(1, sizeof(*e));
      assert_non_null(e);
      ops->encoder_init(e, &req, 1);
      e->idents.id = "gwid-rid2";
      e->idents.model = "target-model";
      air__buf out;
      air__buf_init(&out, AIR__MAX_ANSWER_BYTES);
      size_t len = longer ? 5000 : AIR__MAX_IDENT_BYTES;
      air_part p = start_part(rep(0, 'a', len), rep(1, 'm', len));
      assert_int_equal(ops->encode_part(e, &p, &out), 0);
      air_part t = {.kind = AIR_PART_TEXT, .text = "hi", .text_len = 2};
      assert_int_equal(ops->encode_part(e, &t, &out), 0);
      p = tool_part(longer ? tid : "call_short");
      assert_int_equal(ops->encode_part(e, &p, &out), 0);
      air_part f = {.kind = AIR_PART_FINISH,
                    .finish = AIR_FINISH_TOOL_CALLS,
                    .finish_raw = "tool_calls",
                    .finish_raw_len = 10};
      assert_int_equal(ops->encode_part(e, &f, &out), 0);
      assert_int_equal(ops->encode_end(e, &out), 0);
      const char *a = rep(0, 'a', len);
      if (longer) {
        assert_non_null(strstr(out.p, "gwid-rid2"));
        assert_non_null(strstr(out.p, "target-model"));
        assert_null(
            strstr(out.p, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
        assert_null(
            strstr(out.p, "ccccccccccccccccccccccccccccccccccccccccccccccc"));
        /* Every place the call is named has the one replacement. */
        for (const char *q = strstr(out.p, "call_"); q != NULL;
             q = strstr(q + 1, "call_"))
          if (q[-1] == '"' && strncmp(q, "call_id", 7) != 0)
            assert_int_equal(strncmp(q, sub, strlen(sub)), 0);
        assert_non_null(strstr(out.p, sub));
        assert_int_equal(e->idents.replaced,
                         AIR__IDENT_ID | AIR__IDENT_MODEL | AIR__IDENT_TOOL_ID);
      } else {
        assert_non_null(strstr(out.p, a));
        assert_null(strstr(out.p, "gwid-rid2"));
        assert_int_equal(e->idents.replaced, 0);
      }
      air__buf_cleanup(&out);
      air__encoder_cleanup(e);
      free(e);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_openai_decoder),
      cmocka_unit_test(test_anthropic_decoder),
      cmocka_unit_test(test_responses_decoder),
      cmocka_unit_test(test_aggregate),
      cmocka_unit_test(test_encoders),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
