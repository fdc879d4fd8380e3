/*
 * tl_wire.h: the wire forms of the dialects' callers.
 */
#include "tl_wire.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "sse.h"

void tl_check_openai_chat(const char *p, size_t n) {
  size_t at = 0;
  while (at < n) {
    assert_true(n - at > 8 && memcmp(p + at, "data: ", 6) == 0);
    const char *end = strstr(p + at, "\n\n");
    assert_non_null(end);
    const char *js = p + at + 6;
    size_t jn = (size_t)(end - js);
    if (!(jn == 6 && memcmp(js, "[DONE]", 6) == 0)) {
      json_error_t jerr;
      json_t *v = json_loadb(js, jn, 0, &jerr);
      if (!json_is_object(v))
        fail_msg("chunk is not a JSON object: %s: %.*s", jerr.text, (int)jn,
                 js);
      json_decref(v);
    }
    at = (size_t)(end + 2 - p);
  }
}

/* The Anthropic stream so far. */
typedef struct ant_state {
  int events;
  int open;       /* open block, -1 none */
  int next;       /* next block index */
  char kind[256]; /* 't'ext, 'k' thinking, 'u' tool_use, by block */
  bool delta_seen, stopped, errored;
} ant_state;

static int on_anthropic_event(void *data, const air__sse_event *ev) {
  ant_state *v = data;
  json_error_t jerr;
  json_t *d = json_loadb(ev->data.p, ev->data.n, JSON_REJECT_DUPLICATES, &jerr);
  assert_true(json_is_object(d));
  const char *type = json_string_value(json_object_get(d, "type"));
  assert_non_null(type);
  assert_true(strlen(type) == ev->type.n &&
              memcmp(type, ev->type.p, ev->type.n) == 0);
  assert_false(v->stopped || v->errored);
  int idx = (int)json_integer_value(json_object_get(d, "index"));
  if (strcmp(type, "error") == 0) {
    json_t *e = json_object_get(d, "error");
    assert_true(json_is_string(json_object_get(e, "type")));
    assert_true(json_is_string(json_object_get(e, "message")));
    v->errored = true;
  } else if (v->events == 0) {
    assert_string_equal(type, "message_start");
    json_t *m = json_object_get(d, "message");
    assert_true(json_is_string(json_object_get(m, "id")));
    assert_true(json_is_string(json_object_get(m, "model")));
    assert_string_equal(json_string_value(json_object_get(m, "role")),
                        "assistant");
    assert_int_equal(json_array_size(json_object_get(m, "content")), 0);
    assert_true(json_is_integer(
        json_object_get(json_object_get(m, "usage"), "input_tokens")));
  } else if (strcmp(type, "content_block_start") == 0) {
    assert_int_equal(v->open, -1);
    assert_int_equal(idx, v->next);
    assert_true(idx < 256);
    const char *bt = json_string_value(
        json_object_get(json_object_get(d, "content_block"), "type"));
    assert_non_null(bt);
    v->kind[idx] = strcmp(bt, "text") == 0       ? 't'
                   : strcmp(bt, "thinking") == 0 ? 'k'
                                                 : 'u';
    assert_true(strcmp(bt, "text") == 0 || strcmp(bt, "thinking") == 0 ||
                strcmp(bt, "tool_use") == 0);
    v->open = idx;
    v->next++;
  } else if (strcmp(type, "content_block_delta") == 0) {
    assert_true(idx >= 0 && idx < v->next);
    /* Only a tool block may get deltas after its stop (interleaved calls). */
    if (idx != v->open) assert_int_equal(v->kind[idx], 'u');
    const char *dt =
        json_string_value(json_object_get(json_object_get(d, "delta"), "type"));
    assert_non_null(dt);
    assert_string_equal(dt, v->kind[idx] == 't'   ? "text_delta"
                            : v->kind[idx] == 'k' ? "thinking_delta"
                                                  : "input_json_delta");
  } else if (strcmp(type, "content_block_stop") == 0) {
    assert_int_equal(idx, v->open);
    v->open = -1;
  } else if (strcmp(type, "message_delta") == 0) {
    assert_int_equal(v->open, -1);
    const char *sr = json_string_value(
        json_object_get(json_object_get(d, "delta"), "stop_reason"));
    assert_non_null(sr);
    assert_true(strcmp(sr, "end_turn") == 0 || strcmp(sr, "max_tokens") == 0 ||
                strcmp(sr, "tool_use") == 0 || strcmp(sr, "refusal") == 0 ||
                strcmp(sr, "stop_sequence") == 0 ||
                strcmp(sr, "pause_turn") == 0 ||
                strcmp(sr, "model_context_window_exceeded") == 0);
    assert_true(json_is_integer(
        json_object_get(json_object_get(d, "usage"), "output_tokens")));
    v->delta_seen = true;
  } else if (strcmp(type, "message_stop") == 0) {
    assert_true(v->delta_seen);
    v->stopped = true;
  } else {
    fail_msg("unexpected event %s", type);
  }
  v->events++;
  json_decref(d);
  return 0;
}

void tl_check_anthropic(const char *p, size_t n) {
  ant_state v = {.open = -1};
  air__sse s;
  air__sse_init(&s, on_anthropic_event, &v);
  assert_int_equal(air__sse_feed(&s, p, n), 0);
  assert_int_equal(air__sse_finish(&s), 0);
  assert_int_equal(air__sse_pending(&s), 0);
  air__sse_cleanup(&s);
  assert_true(v.stopped || v.errored);
}

static int on_responses_event(void *data, const air__sse_event *ev) {
  long long *seq = data;
  json_t *d = json_loadb(ev->data.p, ev->data.n, JSON_REJECT_DUPLICATES, NULL);
  assert_true(json_is_object(d));
  const char *type = json_string_value(json_object_get(d, "type"));
  assert_non_null(type);
  assert_true(strlen(type) == ev->type.n &&
              memcmp(type, ev->type.p, ev->type.n) == 0);
  assert_int_equal(json_integer_value(json_object_get(d, "sequence_number")),
                   (*seq)++);
  json_decref(d);
  return 0;
}

void tl_check_responses(const char *p, size_t n) {
  long long seq = 0;
  air__sse s;
  air__sse_init(&s, on_responses_event, &seq);
  assert_int_equal(air__sse_feed(&s, p, n), 0);
  assert_int_equal(air__sse_finish(&s), 0);
  assert_int_equal(air__sse_pending(&s), 0);
  air__sse_cleanup(&s);
  assert_true(seq > 0);
}
