/*
 * Taking over a caller's stream for a continuation (docs/design.md §3.5): for
 * each caller dialect, a passthrough stream's first events go through
 * encoder_observe (their raw bytes are what the caller got), the stream
 * dies, the encoder takes over and encodes the continuation's parts; the
 * whole byte stream must be one valid stream of that dialect: the same
 * ids, an Anthropic caller's open block index kept and no second
 * content_block_start for it, Responses sequence numbers strictly
 * increasing, the end carrying airetry.continued and the summed usage.
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

#include "dialect.h"
#include "sse.h"

/* ---- running a passthrough stream through observe ------------------------
 */

typedef struct run {
  const air__dialect_ops *ops;
  air__decoder dec;
  air__encoder enc;
  air__buf out; /* the caller's bytes */
  air_part parts[32];
  size_t n_parts;
  unsigned observed;
} run;

static int collect(void *data, const air_part *p) {
  run *r = data;
  if (r->n_parts < 32) r->parts[r->n_parts++] = *p;
  return 0;
}

static int on_event(void *data, const air__sse_event *ev) {
  run *r = data;
  r->n_parts = 0;
  r->ops->decode_event(&r->dec, ev, collect, r);
  /* Passthrough: the raw event is what the caller gets. */
  assert_int_equal(air__buf_add(&r->out, ev->raw.p, ev->raw.n), 0);
  r->ops->encoder_observe(&r->enc, ev, r->parts, r->n_parts);
  r->observed++;
  return 0;
}

static void start(run *r, air_dialect d, const char *upstream) {
  memset(r, 0, sizeof(*r));
  r->ops = air__dialect_get(d);
  assert_non_null(r->ops->encoder_observe);
  assert_non_null(r->ops->encode_keepalive);
  air__request req;
  memset(&req, 0, sizeof(req));
  req.dialect = d;
  req.stream = true;
  req.include_usage = true;
  req.model = "asked-model";
  r->ops->decoder_init(&r->dec);
  r->ops->encoder_init(&r->enc, &req, 42);
  r->enc.passthrough = true;
  air__buf_init(&r->out, 1u << 20);
  air__sse sse;
  air__sse_init(&sse, on_event, r);
  assert_int_equal(air__sse_feed(&sse, upstream, strlen(upstream)), 0);
  air__sse_cleanup(&sse);
  assert_true(r->observed > 0);
}

/* The stream died: take over, a keep-alive, then the continuation's parts
 * (from another upstream) and the end. */
static void take_over_and_finish(run *r, const char *text) {
  air__encoder *e = &r->enc;
  air__encoder_take_over(e);
  assert_false(e->passthrough);
  air__encoder_add_usage(e, 10, 3);
  assert_int_equal(air__encoder_add_continued(e, "backup/model-b", 17), 0);
  assert_int_equal(r->ops->encode_keepalive(e, &r->out), 0);
  air_part parts[] = {
      {.kind = AIR_PART_START,
       .id = "other-id",
       .id_len = 8,
       .name = "model-b",
       .name_len = 7},
      {.kind = AIR_PART_USAGE, .input_tokens = 11, .output_tokens = 1},
      {.kind = AIR_PART_TEXT, .text = text, .text_len = strlen(text)},
      {.kind = AIR_PART_TEXT, .text = " The end.", .text_len = 9},
      {.kind = AIR_PART_FINISH, .finish = AIR_FINISH_STOP},
      {.kind = AIR_PART_USAGE, .input_tokens = 11, .output_tokens = 4},
  };
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
    assert_int_equal(r->ops->encode_part(e, &parts[i], &r->out), 0);
  assert_int_equal(r->ops->encode_end(e, &r->out), 0);
}

static void finish(run *r) {
  air__decoder_cleanup(&r->dec);
  air__encoder_cleanup(&r->enc);
  air__buf_cleanup(&r->out);
}

/* ---- reading the caller's bytes back ---------------------------------------
 */

typedef struct event {
  char type[64];
  json_t *data; /* NULL: not JSON ([DONE]) */
  bool done;
} event;

typedef struct events {
  event ev[256];
  size_t n;
  size_t comments; /* keep-alive comments seen (not events) */
} events;

static int read_event(void *data, const air__sse_event *ev) {
  events *es = data;
  assert_true(es->n < 256);
  event *e = &es->ev[es->n++];
  size_t tn = ev->type.n < 63 ? ev->type.n : 63;
  memcpy(e->type, ev->type.p, tn);
  e->type[tn] = '\0';
  e->done = ev->data.n == 6 && memcmp(ev->data.p, "[DONE]", 6) == 0;
  e->data = e->done ? NULL : json_loadb(ev->data.p, ev->data.n, 0, NULL);
  if (!e->done && e->data == NULL)
    fail_msg("not JSON: %.*s", (int)ev->data.n, ev->data.p);
  return 0;
}

static void read_all(const air__buf *b, events *es) {
  memset(es, 0, sizeof(*es));
  air__sse sse;
  air__sse_init(&sse, read_event, es);
  assert_int_equal(air__sse_feed(&sse, b->p, b->n), 0);
  assert_int_equal(air__sse_finish(&sse), 0);
  air__sse_cleanup(&sse);
  for (const char *p = b->p; (p = strstr(p, ": keep-alive\n\n")) != NULL; p++)
    es->comments++;
}

static void free_all(events *es) {
  for (size_t i = 0; i < es->n; i++) json_decref(es->ev[i].data);
}

static const char *str_at(json_t *v, const char *path) {
  char key[64];
  const char *dot;
  while ((dot = strchr(path, '.')) != NULL) {
    size_t n = (size_t)(dot - path);
    memcpy(key, path, n);
    key[n] = '\0';
    v = json_is_array(v) ? json_array_get(v, (size_t)atoi(key))
                         : json_object_get(v, key);
    path = dot + 1;
  }
  v = json_is_array(v) ? json_array_get(v, (size_t)atoi(path))
                       : json_object_get(v, path);
  return json_string_value(v);
}

static json_int_t int_at(json_t *v, const char *path) {
  char key[64];
  const char *dot;
  while ((dot = strchr(path, '.')) != NULL) {
    size_t n = (size_t)(dot - path);
    memcpy(key, path, n);
    key[n] = '\0';
    v = json_is_array(v) ? json_array_get(v, (size_t)atoi(key))
                         : json_object_get(v, key);
    path = dot + 1;
  }
  v = json_is_array(v) ? json_array_get(v, (size_t)atoi(path))
                       : json_object_get(v, path);
  if (!json_is_integer(v)) return -1;
  return json_integer_value(v);
}

/* The marker: exactly one continuation, ours. */
static void check_marker(json_t *holder) {
  json_t *c = json_object_get(json_object_get(holder, "airetry"), "continued");
  assert_int_equal(json_array_size(c), 1);
  assert_string_equal(str_at(c, "0.target"), "backup/model-b");
  assert_int_equal(int_at(c, "0.at_char"), 17);
}

/* Appends s (NULL: nothing) to the NUL-terminated text in dst[cap]. */
static void append(char *dst, size_t cap, const char *s) {
  if (s == NULL) return;
  size_t n = strlen(dst), k = strlen(s);
  assert_true(n + k < cap);
  memcpy(dst + n, s, k + 1);
}

static const char FULL[] = "Once upon a time in a castle. The end.";

/* ---- OpenAI chat
 * ------------------------------------------------------------ */

#define OAI(delta)                                                         \
  "data: {\"id\":\"chatcmpl-up1\",\"object\":\"chat.completion.chunk\","   \
  "\"created\":1700000000,\"model\":\"gpt-up\",\"choices\":[{\"index\":0," \
  "\"delta\":" delta ",\"finish_reason\":null}]}\n\n"

static void test_openai_chat(void **st) {
  (void)st;
  run r;
  start(&r, AIR_DIALECT_OPENAI,
        OAI("{\"role\":\"assistant\",\"content\":\"\"}")
            OAI("{\"content\":\"Once upon\"}")
                OAI("{\"content\":\" a time\"}"));
  take_over_and_finish(&r, " in a castle.");
  events es;
  read_all(&r.out, &es);
  assert_int_equal(es.comments, 1);
  char text[256] = "";
  size_t roles = 0, finishes = 0, usages = 0;
  for (size_t i = 0; i < es.n; i++) {
    event *e = &es.ev[i];
    if (e->done) {
      assert_int_equal(i, es.n - 1); /* [DONE] last */
      continue;
    }
    /* One answer: the upstream's id, created and model on every chunk. */
    assert_string_equal(str_at(e->data, "id"), "chatcmpl-up1");
    assert_int_equal(int_at(e->data, "created"), 1700000000);
    assert_string_equal(str_at(e->data, "model"), "gpt-up");
    json_t *ch = json_object_get(e->data, "choices");
    if (json_array_size(ch) == 0) {
      usages++;
      assert_int_equal(int_at(e->data, "usage.prompt_tokens"), 21);
      assert_int_equal(int_at(e->data, "usage.completion_tokens"), 7);
      assert_int_equal(int_at(e->data, "usage.total_tokens"), 28);
      continue;
    }
    if (str_at(ch, "0.delta.role") != NULL) roles++;
    const char *c = str_at(ch, "0.delta.content");
    if (c != NULL) append(text, sizeof(text), c);
    if (str_at(ch, "0.finish_reason") != NULL) {
      finishes++;
      assert_string_equal(str_at(ch, "0.finish_reason"), "stop");
      check_marker(e->data);
    } else {
      assert_null(json_object_get(e->data, "airetry"));
    }
  }
  assert_string_equal(text, FULL);
  assert_int_equal(roles, 1);
  assert_int_equal(finishes, 1);
  assert_int_equal(usages, 1);
  assert_true(es.ev[es.n - 1].done);
  free_all(&es);
  finish(&r);
}

/* ---- Anthropic
 * ----------------------------------------------------------- */

#define ANT(type, json) "event: " type "\ndata: " json "\n\n"
#define ANT_START                                                             \
  ANT("message_start",                                                        \
      "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_up1\",\"type\":" \
      "\"message\",\"role\":\"assistant\",\"model\":\"claude-up\","           \
      "\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,"           \
      "\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}")
#define ANT_BLOCK(i, kind, body)                        \
  ANT("content_block_start",                            \
      "{\"type\":\"content_block_start\",\"index\":" #i \
      ",\"content_block\":{\"type\":\"" kind "\"," body "}}")
#define ANT_TEXT(i, t)                                                         \
  ANT("content_block_delta", "{\"type\":\"content_block_delta\",\"index\":" #i \
                             ",\"delta\":{\"type\":\"text_delta\","            \
                             "\"text\":\"" t "\"}}")
#define ANT_STOP(i)         \
  ANT("content_block_stop", \
      "{\"type\":\"content_block_stop\",\"index\":" #i "}")

/* Checks an Anthropic caller's stream; returns the index of the block the
 * continued text went to. */
static json_int_t check_anthropic(const air__buf *out, const char *want,
                                  const char *thinking) {
  events es;
  read_all(out, &es);
  bool open[8] = {false}, seen[8] = {false};
  char text[256] = "", think[256] = "";
  size_t starts = 0, deltas = 0, pings = 0;
  json_int_t last_text_block = -1;
  for (size_t i = 0; i < es.n; i++) {
    event *e = &es.ev[i];
    assert_non_null(e->data);
    const char *t = str_at(e->data, "type");
    assert_string_equal(t, e->type);
    if (strcmp(t, "message_start") == 0) {
      starts++;
      assert_int_equal(i, 0);
      assert_string_equal(str_at(e->data, "message.id"), "msg_up1");
      assert_string_equal(str_at(e->data, "message.model"), "claude-up");
    } else if (strcmp(t, "content_block_start") == 0) {
      json_int_t k = int_at(e->data, "index");
      assert_true(k >= 0 && k < 8);
      assert_false(seen[k]); /* never a second start for an index */
      seen[k] = open[k] = true;
    } else if (strcmp(t, "content_block_delta") == 0) {
      json_int_t k = int_at(e->data, "index");
      assert_true(k >= 0 && k < 8 && open[k]);
      deltas++;
      const char *x = str_at(e->data, "delta.text");
      if (x != NULL) {
        append(text, sizeof(text), x);
        last_text_block = k;
      }
      x = str_at(e->data, "delta.thinking");
      if (x != NULL) append(think, sizeof(think), x);
    } else if (strcmp(t, "content_block_stop") == 0) {
      json_int_t k = int_at(e->data, "index");
      assert_true(k >= 0 && k < 8 && open[k]);
      open[k] = false;
    } else if (strcmp(t, "message_delta") == 0) {
      for (int k = 0; k < 8; k++) assert_false(open[k]);
      assert_string_equal(str_at(e->data, "delta.stop_reason"), "end_turn");
      assert_int_equal(int_at(e->data, "usage.input_tokens"), 21);
      assert_int_equal(int_at(e->data, "usage.output_tokens"), 7);
      check_marker(e->data);
    } else if (strcmp(t, "message_stop") == 0) {
      assert_int_equal(i, es.n - 1);
    } else if (strcmp(t, "ping") == 0) {
      pings++;
    } else {
      fail_msg("unexpected event %s", t);
    }
  }
  assert_int_equal(starts, 1);
  assert_int_equal(pings, 1); /* the keep-alive */
  assert_string_equal(str_at(es.ev[es.n - 1].data, "type"), "message_stop");
  assert_string_equal(text, want);
  assert_string_equal(think, thinking);
  assert_true(deltas > 0);
  free_all(&es);
  return last_text_block;
}

static void test_anthropic_open_block_kept(void **st) {
  (void)st;
  run r;
  start(&r, AIR_DIALECT_ANTHROPIC,
        ANT_START ANT_BLOCK(0, "text", "\"text\":\"\"") ANT_TEXT(0, "Once upon")
            ANT_TEXT(0, " a time") ANT("ping", "{\"type\":\"ping\"}"));
  /* The upstream's ping was passed through too: two pings in all then. */
  take_over_and_finish(&r, " in a castle.");
  events es;
  read_all(&r.out, &es);
  size_t block_starts = 0;
  for (size_t i = 0; i < es.n; i++)
    if (strcmp(es.ev[i].type, "content_block_start") == 0) block_starts++;
  assert_int_equal(block_starts, 1); /* no duplicate content_block_start */
  free_all(&es);
  /* Drop the upstream's ping from the check (it counts pings). */
  char *p = strstr(r.out.p, "event: ping\ndata: {\"type\":\"ping\"}\n\n");
  assert_non_null(p);
  size_t pn = strlen("event: ping\ndata: {\"type\":\"ping\"}\n\n");
  memmove(p, p + pn, r.out.n - (size_t)(p - r.out.p) - pn + 1);
  r.out.n -= pn;
  assert_int_equal(check_anthropic(&r.out, FULL, ""), 0);
  finish(&r);
}

static void test_anthropic_after_thinking_and_closed_block(void **st) {
  (void)st;
  run r;
  /* Thinking (block 0, closed), then text (block 1, open): the
   * continuation's text goes on in block 1. */
  start(&r, AIR_DIALECT_ANTHROPIC,
        ANT_START ANT_BLOCK(0, "thinking", "\"thinking\":\"\"")
            ANT("content_block_delta",
                "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{"
                "\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}")
                ANT_STOP(0) ANT_BLOCK(1, "text", "\"text\":\"\"")
                    ANT_TEXT(1, "Once upon") ANT_TEXT(1, " a time"));
  take_over_and_finish(&r, " in a castle.");
  assert_int_equal(check_anthropic(&r.out, FULL, "hmm"), 1);
  finish(&r);
  /* The text block was closed before the cut: a new block, index 1. */
  start(&r, AIR_DIALECT_ANTHROPIC,
        ANT_START ANT_BLOCK(0, "text", "\"text\":\"\"") ANT_TEXT(0, "Once upon")
            ANT_TEXT(0, " a time") ANT_STOP(0));
  take_over_and_finish(&r, " in a castle.");
  assert_int_equal(check_anthropic(&r.out, FULL, ""), 1);
  finish(&r);
}

/* ---- Responses
 * ----------------------------------------------------------- */

#define RSP(type, rest)                                                     \
  "event: " type "\ndata: {\"type\":\"" type "\",\"sequence_number\":" rest \
  "}\n\n"
#define RSP_RESP                                                            \
  "{\"id\":\"resp_up1\",\"object\":\"response\",\"created_at\":1700000000," \
  "\"status\":\"in_progress\",\"model\":\"gpt-up\",\"output\":[]}"
#define RSP_ITEM(i, id)                                 \
  "{\"id\":\"" id                                       \
  "\",\"type\":\"message\",\"status\":\"in_progress\"," \
  "\"role\":\"assistant\",\"content\":[]}"

static const char RSP_STREAM[] = RSP("response.created",
                                     "0,\"response\":" RSP_RESP)
    RSP("response.in_progress", "1,\"response\":" RSP_RESP) RSP(
        "response.output_item.added",
        "2,\"output_index\":0,\"item\":" RSP_ITEM(0, "msg_up1"))
        RSP("response.content_part.added",
            "3,\"item_id\":\"msg_up1\",\"output_index\":0,\"content_index\":0,"
            "\"part\":{\"type\":\"output_text\",\"text\":\"\",\"annotations\":["
            "]}") RSP("response.output_text.delta",
                      "4,\"item_id\":\"msg_up1\",\"output_index\":0,\"content_"
                      "index\":0,"
                      "\"delta\":\"Once upon\"")
            RSP("response.output_text.delta",
                "5,\"item_id\":\"msg_up1\",\"output_index\":0,\"content_"
                "index\":0,"
                "\"delta\":\" a time\"");

static void test_responses(void **st) {
  (void)st;
  run r;
  start(&r, AIR_DIALECT_OPENAI_RESPONSES, RSP_STREAM);
  take_over_and_finish(&r, " in a castle.");
  events es;
  read_all(&r.out, &es);
  assert_int_equal(es.comments, 1);
  json_int_t seq = -1;
  char text[256] = "";
  size_t completed = 0, text_done = 0, added = 0;
  for (size_t i = 0; i < es.n; i++) {
    event *e = &es.ev[i];
    assert_non_null(e->data);
    const char *t = str_at(e->data, "type");
    assert_string_equal(t, e->type);
    json_int_t s = int_at(e->data, "sequence_number");
    assert_true(s > seq); /* strictly increasing */
    assert_int_equal(s, seq + 1);
    seq = s;
    const char *item = str_at(e->data, "item_id");
    if (item != NULL) assert_string_equal(item, "msg_up1");
    if (strcmp(t, "response.output_item.added") == 0) added++;
    if (strcmp(t, "response.output_text.delta") == 0) {
      assert_int_equal(int_at(e->data, "output_index"), 0);
      assert_int_equal(int_at(e->data, "content_index"), 0);
      append(text, sizeof(text), str_at(e->data, "delta"));
    }
    if (strcmp(t, "response.output_text.done") == 0) {
      text_done++;
      assert_string_equal(str_at(e->data, "text"), FULL);
    }
    if (strcmp(t, "response.output_item.done") == 0) {
      assert_string_equal(str_at(e->data, "item.id"), "msg_up1");
      assert_string_equal(str_at(e->data, "item.content.0.text"), FULL);
    }
    if (strcmp(t, "response.completed") == 0) {
      completed++;
      assert_int_equal(i, es.n - 1);
      json_t *resp = json_object_get(e->data, "response");
      assert_string_equal(str_at(resp, "id"), "resp_up1");
      assert_string_equal(str_at(resp, "model"), "gpt-up");
      assert_int_equal(int_at(resp, "created_at"), 1700000000);
      assert_string_equal(str_at(resp, "status"), "completed");
      assert_int_equal(json_array_size(json_object_get(resp, "output")), 1);
      assert_string_equal(str_at(resp, "output.0.id"), "msg_up1");
      assert_string_equal(str_at(resp, "output.0.content.0.text"), FULL);
      assert_int_equal(int_at(resp, "usage.input_tokens"), 21);
      assert_int_equal(int_at(resp, "usage.output_tokens"), 7);
      check_marker(resp);
    }
  }
  assert_string_equal(text, FULL);
  assert_int_equal(added, 1); /* the open item went on */
  assert_int_equal(text_done, 1);
  assert_int_equal(completed, 1);
  free_all(&es);
  finish(&r);
}

/* A reasoning item (closed) before the message: both are in
 * response.completed, in output order, the message still the upstream's. */
static void test_responses_after_reasoning(void **st) {
  (void)st;
  static const char stream[] =
      RSP("response.created", "0,\"response\":" RSP_RESP) RSP(
          "response.output_item.added",
          "1,\"output_index\":0,\"item\":{\"id\":\"rs_up1\",\"type\":"
          "\"reasoning\",\"summary\":[]}")
          RSP("response.reasoning_summary_text.delta",
              "2,\"item_id\":\"rs_up1\",\"output_index\":0,\"summary_index\":0,"
              "\"delta\":\"hmm\"")
              RSP("response.output_item.done",
                  "3,\"output_index\":0,\"item\":{\"id\":\"rs_up1\",\"type\":"
                  "\"reasoning\",\"summary\":[{\"type\":\"summary_text\","
                  "\"text\":"
                  "\"hmm\"}]}")
                  RSP("response.output_item.added",
                      "4,\"output_index\":1,\"item\":" RSP_ITEM(1, "msg_up2"))
                      RSP("response.content_part.added",
                          "5,\"item_id\":\"msg_up2\",\"output_index\":1,"
                          "\"content_index\":0,"
                          "\"part\":{\"type\":\"output_text\",\"text\":\"\"}")
                          RSP("response.output_text.delta",
                              "6,\"item_id\":\"msg_up2\",\"output_index\":1,"
                              "\"content_index\":0,"
                              "\"delta\":\"Once upon a time\"");
  run r;
  start(&r, AIR_DIALECT_OPENAI_RESPONSES, stream);
  take_over_and_finish(&r, " in a castle.");
  events es;
  read_all(&r.out, &es);
  json_int_t seq = -1;
  size_t reasoning_done = 0;
  for (size_t i = 0; i < es.n; i++) {
    json_int_t s = int_at(es.ev[i].data, "sequence_number");
    assert_int_equal(s, seq + 1);
    seq = s;
    if (strcmp(es.ev[i].type, "response.output_item.done") == 0 &&
        int_at(es.ev[i].data, "output_index") == 0)
      reasoning_done++;
    if (strcmp(es.ev[i].type, "response.output_text.delta") == 0) {
      assert_string_equal(str_at(es.ev[i].data, "item_id"), "msg_up2");
      assert_int_equal(int_at(es.ev[i].data, "output_index"), 1);
    }
  }
  assert_int_equal(reasoning_done, 1); /* closed once, by the upstream */
  event *end = &es.ev[es.n - 1];
  assert_string_equal(end->type, "response.completed");
  json_t *resp = json_object_get(end->data, "response");
  assert_int_equal(json_array_size(json_object_get(resp, "output")), 2);
  assert_string_equal(str_at(resp, "output.0.id"), "rs_up1");
  assert_string_equal(str_at(resp, "output.0.summary.0.text"), "hmm");
  assert_string_equal(str_at(resp, "output.1.id"), "msg_up2");
  assert_string_equal(str_at(resp, "output.1.content.0.text"), FULL);
  check_marker(resp);
  free_all(&es);
  finish(&r);
}

/* A failure after the take-over: the Responses stream still numbers on and
 * ends with response.failed (never completed), the item incomplete. */
static void test_responses_failure_after_take_over(void **st) {
  (void)st;
  run r;
  start(&r, AIR_DIALECT_OPENAI_RESPONSES, RSP_STREAM);
  air__encoder_take_over(&r.enc);
  air_part p = {.kind = AIR_PART_TEXT, .text = " in", .text_len = 3};
  assert_int_equal(r.ops->encode_part(&r.enc, &p, &r.out), 0);
  assert_int_equal(r.ops->encode_error_event(&r.enc, AIR_REASON_NETWORK,
                                             "cut again", &r.out),
                   0);
  events es;
  read_all(&r.out, &es);
  json_int_t seq = -1;
  for (size_t i = 0; i < es.n; i++) {
    json_int_t s = int_at(es.ev[i].data, "sequence_number");
    assert_int_equal(s, seq + 1);
    seq = s;
    assert_string_not_equal(es.ev[i].type, "response.completed");
  }
  assert_string_equal(es.ev[es.n - 1].type, "error");
  assert_string_equal(es.ev[es.n - 2].type, "response.failed");
  assert_null(json_object_get(json_object_get(es.ev[es.n - 2].data, "response"),
                              "airetry"));
  free_all(&es);
  finish(&r);
}

/* ---- observe cost, non-streaming bodies
 * -------------------------------------------------- */

static void test_observe_ignores_deltas(void **st) {
  (void)st;
  /* A delta event changes nothing a take-over reads (but Responses text). */
  run r;
  start(&r, AIR_DIALECT_ANTHROPIC,
        ANT_START ANT_BLOCK(0, "text", "\"text\":\"\"") ANT_TEXT(0, "a"));
  air__encoder before = r.enc;
  air__sse_event ev = {0};
  ev.type = (air__str){"content_block_delta", 19};
  ev.data = (air__str){"not json", 8};
  air_part p = {.kind = AIR_PART_TEXT, .text = "x", .text_len = 1};
  r.ops->encoder_observe(&r.enc, &ev, &p, 1);
  assert_memory_equal(&before, &r.enc, sizeof(before));
  finish(&r);
}

static void test_aggregate_marker_and_usage(void **st) {
  (void)st;
  for (int d = 0; d < 3; d++) {
    air__aggregate a;
    air__aggregate_init(&a);
    air_part s1 = {.kind = AIR_PART_START,
                   .id = "first",
                   .id_len = 5,
                   .name = "model-a",
                   .name_len = 7};
    air_part t1 = {.kind = AIR_PART_TEXT, .text = "Once upon", .text_len = 9};
    air_part u1 = {
        .kind = AIR_PART_USAGE, .input_tokens = 10, .output_tokens = 3};
    assert_int_equal(air__aggregate_add(&a, &s1), 0);
    assert_int_equal(air__aggregate_add(&a, &t1), 0);
    assert_int_equal(air__aggregate_add(&a, &u1), 0);
    air__aggregate_add_usage(&a, 10, 3);
    assert_int_equal(air__aggregate_add_continued(&a, "backup/model-b", 17), 0);
    air_part s2 = {.kind = AIR_PART_START,
                   .id = "second",
                   .id_len = 6,
                   .name = "model-b",
                   .name_len = 7};
    air_part t2 = {.kind = AIR_PART_TEXT, .text = " a time", .text_len = 7};
    air_part u2 = {
        .kind = AIR_PART_USAGE, .input_tokens = 11, .output_tokens = 4};
    air_part f = {.kind = AIR_PART_FINISH, .finish = AIR_FINISH_STOP};
    assert_int_equal(air__aggregate_add(&a, &s2), 0);
    assert_int_equal(air__aggregate_add(&a, &t2), 0);
    assert_int_equal(air__aggregate_add(&a, &u2), 0);
    assert_int_equal(air__aggregate_add(&a, &f), 0);
    air__buf out;
    air__buf_init(&out, 1u << 20);
    assert_int_equal(
        air__dialect_get((air_dialect)d)->encode_response(&a, &out), 0);
    json_t *v = json_loadb(out.p, out.n, 0, NULL);
    assert_non_null(v);
    check_marker(v);
    const char *in =
        d == AIR_DIALECT_OPENAI ? "usage.prompt_tokens" : "usage.input_tokens";
    const char *o = d == AIR_DIALECT_OPENAI ? "usage.completion_tokens"
                                            : "usage.output_tokens";
    assert_int_equal(int_at(v, in), 21);
    assert_int_equal(int_at(v, o), 7);
    /* The first attempt's id and model stay. */
    assert_string_equal(str_at(v, "model"), "model-a");
    assert_non_null(strstr(str_at(v, "id"), "first"));
    json_decref(v);
    /* Without a continuation: no marker. */
    air__aggregate_cleanup(&a);
    air__aggregate_init(&a);
    assert_int_equal(air__aggregate_add(&a, &t1), 0);
    air__buf_reset(&out);
    assert_int_equal(
        air__dialect_get((air_dialect)d)->encode_response(&a, &out), 0);
    assert_null(strstr(out.p, "\"airetry\":"));
    air__buf_cleanup(&out);
    air__aggregate_cleanup(&a);
  }
}

static void test_keepalive_bytes(void **st) {
  (void)st;
  air__buf b;
  air__buf_init(&b, 1024);
  air__encoder e;
  memset(&e, 0, sizeof(e));
  assert_int_equal(air__dialect_openai_chat.encode_keepalive(&e, &b), 0);
  assert_string_equal(b.p, ": keep-alive\n\n");
  air__buf_reset(&b);
  assert_int_equal(air__dialect_openai_responses.encode_keepalive(&e, &b), 0);
  assert_string_equal(b.p, ": keep-alive\n\n");
  air__buf_reset(&b);
  assert_int_equal(air__dialect_anthropic.encode_keepalive(&e, &b), 0);
  assert_string_equal(b.p, "event: ping\ndata: {\"type\":\"ping\"}\n\n");
  air__buf_cleanup(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_openai_chat),
      cmocka_unit_test(test_anthropic_open_block_kept),
      cmocka_unit_test(test_anthropic_after_thinking_and_closed_block),
      cmocka_unit_test(test_responses),
      cmocka_unit_test(test_responses_after_reasoning),
      cmocka_unit_test(test_responses_failure_after_take_over),
      cmocka_unit_test(test_observe_ignores_deltas),
      cmocka_unit_test(test_aggregate_marker_and_usage),
      cmocka_unit_test(test_keepalive_bytes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
