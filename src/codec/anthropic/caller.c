/*
 * Parts encoded for a caller that speaks Anthropic Messages (docs/design.md §2,
 * 5). message_start is written lazily, just before the first bytes that
 * need it, so that the usage of an Anthropic upstream's message_start
 * (which arrives after START) is in it. Thinking blocks start with an empty
 * "signature" as the API's own do. An ERROR part writes nothing: the stream
 * layer turns it into a failure and calls encode_error_event. A TOOL_DELTA
 * for a tool whose block was already closed (tool calls interleaved by an
 * OpenAI-compatible upstream) is written to that tool's block index; one
 * for a tool that never started opens a tool_use block with empty id and
 * name. message_delta's usage carries input_tokens too (as the API now
 * sends it) once any usage is known, since an OpenAI upstream reports it
 * only at the end. A STOP finish is "end_turn" (the stop sequence is not
 * carried by parts), except in encode_response when the raw reason was
 * "stop_sequence". encode_response writes a tool call whose arguments are
 * not a JSON object with input {} (the API's input is always an object).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anthropic.h"
#include "limits.h"

/* ---- encoding for an Anthropic caller
 * ------------------------------------------ */

/* Copies at most cap-1 bytes of p into dst, cut at a UTF-8 boundary. */
static void copy_trunc(char *dst, size_t cap, const char *p, size_t n) {
  if (n >= cap) {
    n = cap - 1;
    while (n > 0 && ((unsigned char)p[n] & 0xC0) == 0x80) n--;
  }
  if (n) memcpy(dst, p, n);
  dst[n] = '\0';
}

/* The message's id and model from a START part (each only when given). */
static void set_ident(air__encoder *e, const char *id, size_t id_n,
                      const char *model, size_t model_n) {
  if (id_n > 0) copy_trunc(e->id, sizeof(e->id), id, id_n);
  if (model_n > 0) copy_trunc(e->model, sizeof(e->model), model, model_n);
}

void air__ant_encoder_init(air__encoder *e, const air__request *req,
                           uint64_t created_s) {
  memset(e, 0, sizeof(*e));
  e->api = AIR_DIALECT_ANTHROPIC;
  e->open_block = -1;
  e->created = created_s;
  for (int i = 0; i < AIR__DECODER_MAX_TOOLS; i++) e->tool_block[i] = -1;
  copy_trunc(e->id, sizeof(e->id), LIT("msg_airetry"));
  if (req != NULL && req->model != NULL)
    copy_trunc(e->model, sizeof(e->model), req->model, strlen(req->model));
}

/* message_start, once, before anything else of the message. */
static int ensure_started(air__encoder *e, air__buf *out) {
  if (e->started) return 0;
  int rc = air__buf_add(
      out, LIT("event: message_start\ndata: "
               "{\"type\":\"message_start\",\"message\":{\"id\":"));
  if (rc == 0) rc = air__text_cstr(out, e->id);
  if (rc == 0)
    rc = air__buf_add(
        out, LIT(",\"type\":\"message\",\"role\":\"assistant\",\"model\":"));
  if (rc == 0) rc = air__text_cstr(out, e->model);
  if (rc == 0)
    rc = air__buf_add(
        out, LIT(",\"content\":[],\"stop_reason\":null,"
                 "\"stop_sequence\":null,\"usage\":{\"input_tokens\":"));
  if (rc == 0) rc = air__buf_addu(out, e->input_tokens);
  if (rc == 0) rc = air__buf_add(out, LIT(",\"output_tokens\":"));
  if (rc == 0) rc = air__buf_addu(out, e->output_tokens);
  if (rc == 0) rc = air__buf_add(out, LIT("}}}\n\n"));
  if (rc == 0) e->started = true;
  return rc;
}

static int close_block(air__encoder *e, air__buf *out) {
  if (e->open_block < 0) return 0;
  int rc =
      air__buf_add(out, LIT("event: content_block_stop\ndata: "
                            "{\"type\":\"content_block_stop\",\"index\":"));
  if (rc == 0) rc = air__text_int(out, e->open_block);
  if (rc == 0) rc = air__buf_add(out, LIT("}\n\n"));
  e->open_block = -1;
  e->open_kind = EK_NONE;
  return rc;
}

/* Closes the open block and starts a new one of kind (tool: p's id and
 * name). */
static int open_block(air__encoder *e, air__buf *out, int kind,
                      const air_part *p) {
  int rc = ensure_started(e, out);
  if (rc == 0) rc = close_block(e, out);
  if (rc == 0)
    rc = air__buf_add(out, LIT("event: content_block_start\ndata: "
                               "{\"type\":\"content_block_start\",\"index\":"));
  if (rc == 0) rc = air__text_int(out, e->next_block);
  if (rc != 0) return rc;
  if (kind == EK_TEXT) {
    rc = air__buf_add(
        out, LIT(",\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"));
  } else if (kind == EK_THINKING) {
    rc = air__buf_add(out, LIT(",\"content_block\":{\"type\":\"thinking\","
                               "\"thinking\":\"\",\"signature\":\"\"}}\n\n"));
  } else {
    rc = air__buf_add(out,
                      LIT(",\"content_block\":{\"type\":\"tool_use\",\"id\":"));
    if (rc == 0) rc = air__text_str(out, p ? p->id : NULL, p ? p->id_len : 0);
    if (rc == 0) rc = air__buf_add(out, LIT(",\"name\":"));
    if (rc == 0)
      rc = air__text_str(out, p ? p->name : NULL, p ? p->name_len : 0);
    if (rc == 0) rc = air__buf_add(out, LIT(",\"input\":{}}}\n\n"));
  }
  if (rc == 0) {
    e->open_block = e->next_block++;
    e->open_kind = kind;
  }
  return rc;
}

static int block_delta(air__buf *out, int block, const char *dtype,
                       const char *key, const air_part *p) {
  int rc =
      air__buf_add(out, LIT("event: content_block_delta\ndata: "
                            "{\"type\":\"content_block_delta\",\"index\":"));
  if (rc == 0) rc = air__text_int(out, block);
  if (rc == 0) rc = air__buf_add(out, LIT(",\"delta\":{\"type\":\""));
  if (rc == 0) rc = air__buf_adds(out, dtype);
  if (rc == 0) rc = air__buf_add(out, LIT("\",\""));
  if (rc == 0) rc = air__buf_adds(out, key);
  if (rc == 0) rc = air__buf_add(out, LIT("\":"));
  if (rc == 0) rc = air__text_str(out, p->text, p->text_len);
  if (rc == 0) rc = air__buf_add(out, LIT("}}\n\n"));
  return rc;
}

static int encode_part_bytes(air__encoder *e, const air_part *p,
                             air__buf *out) {
  int rc = 0;
  switch (p->kind) {
    case AIR_PART_START:
      if (!e->started) set_ident(e, p->id, p->id_len, p->name, p->name_len);
      return 0;
    case AIR_PART_TEXT:
    case AIR_PART_REFUSAL:
    case AIR_PART_REASONING: {
      if (p->text_len == 0) return 0;
      bool think = p->kind == AIR_PART_REASONING;
      int kind = think ? EK_THINKING : EK_TEXT;
      if (e->open_kind != kind || e->open_block < 0)
        rc = open_block(e, out, kind, NULL);
      if (rc == 0)
        rc = block_delta(out, e->open_block,
                         think ? "thinking_delta" : "text_delta",
                         think ? "thinking" : "text", p);
      return rc;
    }
    case AIR_PART_TOOL_START:
      if (p->index < 0 || p->index >= AIR__DECODER_MAX_TOOLS) return AIR_EINVAL;
      rc = open_block(e, out, EK_TOOL, p);
      if (rc == 0) e->tool_block[p->index] = e->open_block;
      return rc;
    case AIR_PART_TOOL_DELTA:
      if (p->index < 0 || p->index >= AIR__DECODER_MAX_TOOLS) return AIR_EINVAL;
      if (p->text_len == 0) return 0;
      if (e->tool_block[p->index] < 0) {
        rc = open_block(e, out, EK_TOOL, NULL);
        if (rc == 0) e->tool_block[p->index] = e->open_block;
      }
      if (rc == 0)
        rc = block_delta(out, e->tool_block[p->index], "input_json_delta",
                         "partial_json", p);
      return rc;
    case AIR_PART_FINISH:
      e->finish = p->finish;
      e->finished = true;
      return 0;
    case AIR_PART_USAGE:
      air__encoder_usage(e, p);
      return 0;
    case AIR_PART_ERROR:
      return 0;
  }
  return 0;
}

/* On failure out is left as it was (the encoder should not be used on). */
int air__ant_encode_part(air__encoder *e, const air_part *p, air__buf *out) {
  size_t start = out->n;
  air_part tmp;
  char sub[AIR__TOOL_ID_SUB_BYTES];
  int rc = encode_part_bytes(e, air__ident_fix(p, &e->idents, &tmp, sub), out);
  if (rc != 0) air__text_undo(out, start);
  return rc;
}

/* encoder_observe: what a take-over needs from a passthrough stream, by
 * event type (only content_block_start is parsed): message_start (the
 * message went out; id and model from its START part), the open content
 * block's index and kind, the next free index, tool blocks by tool index,
 * the finish. Deltas and pings change nothing. */
void air__ant_encoder_observe(air__encoder *e, const air__sse_event *ev,
                              const air_part *parts, size_t n) {
  air__encoder_observe_parts(e, parts, n, set_ident);
  if (ev == NULL) return;
  air__str ty = air__event_type(ev);
  if (air__str_is(ty, "content_block_delta")) return;
  if (air__str_is(ty, "message_start")) {
    e->started = true;
  } else if (air__str_is(ty, "content_block_stop")) {
    e->open_block = -1;
    e->open_kind = EK_NONE;
  } else if (air__str_is(ty, "content_block_start")) {
    json_t *v = json_loadb(ev->data.p, ev->data.n, 0, NULL);
    json_t *ix = json_object_get(v, "index");
    const char *t = json_string_value(
        json_object_get(json_object_get(v, "content_block"), "type"));
    if (json_is_integer(ix) && json_integer_value(ix) >= 0 &&
        json_integer_value(ix) < MAX_BLOCK_INDEX) {
      int b = (int)json_integer_value(ix);
      e->open_block = b;
      e->open_kind =
          t == NULL                ? EK_NONE
          : strcmp(t, "text") == 0 ? EK_TEXT
          : strcmp(t, "thinking") == 0 || strcmp(t, "redacted_thinking") == 0
              ? EK_THINKING
              : EK_TOOL;
      if (b + 1 > e->next_block) e->next_block = b + 1;
      for (size_t i = 0; i < n; i++)
        if (parts[i].kind == AIR_PART_TOOL_START && parts[i].index >= 0 &&
            parts[i].index < AIR__DECODER_MAX_TOOLS)
          e->tool_block[parts[i].index] = b;
    }
    json_decref(v);
  }
}

int air__ant_encode_keepalive(air__encoder *e, air__buf *out) {
  (void)e;
  return air__buf_add(out, LIT("event: ping\ndata: {\"type\":\"ping\"}\n\n"));
}

static const char message_stop[] =
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

int air__ant_encode_end(air__encoder *e, air__buf *out) {
  if (e->ended) return 0;
  size_t start = out->n;
  int rc = 0;
  if (!e->passthrough) {
    rc = ensure_started(e, out);
    if (rc == 0) rc = close_block(e, out);
    if (rc == 0)
      rc = air__buf_add(
          out, LIT("event: message_delta\ndata: {\"type\":\"message_delta\","
                   "\"delta\":{\"stop_reason\":\""));
    if (rc == 0) rc = air__buf_adds(out, air__ant_stop_name(e->finish));
    if (rc == 0)
      rc = air__buf_add(out, LIT("\",\"stop_sequence\":null},\"usage\":{"));
    /* A continued answer: the sum over its attempts. */
    uint64_t in = e->input_tokens + e->prior_input_tokens;
    uint64_t outt = e->output_tokens + e->prior_output_tokens;
    if (in < e->input_tokens) in = UINT64_MAX;
    if (outt < e->output_tokens) outt = UINT64_MAX;
    if (rc == 0 && (e->has_usage || e->has_prior_usage)) {
      rc = air__buf_add(out, LIT("\"input_tokens\":"));
      if (rc == 0) rc = air__buf_addu(out, in);
      if (rc == 0) rc = air__buf_addc(out, ',');
    }
    if (rc == 0) rc = air__buf_add(out, LIT("\"output_tokens\":"));
    if (rc == 0) rc = air__buf_addu(out, outt);
    if (rc == 0) rc = air__buf_addc(out, '}');
    if (rc == 0) rc = air__continued_member(&e->continued, out);
    if (rc == 0) rc = air__buf_add(out, LIT("}\n\n"));
  }
  if (rc == 0) rc = air__buf_add(out, LIT(message_stop));
  if (rc != 0) {
    air__text_undo(out, start);
    return rc;
  }
  e->ended = true;
  return 0;
}

static int add_error_obj(air__buf *out, air_reason reason,
                         const char *message) {
  int rc = air__buf_add(out, LIT("{\"type\":\"error\",\"error\":{\"type\":"));
  if (rc == 0)
    rc = air__text_cstr(out, air__error_type(AIR_DIALECT_ANTHROPIC, reason));
  if (rc == 0) rc = air__buf_add(out, LIT(",\"message\":"));
  if (rc == 0) rc = air__text_cstr(out, message);
  if (rc == 0) rc = air__buf_addc(out, '}');
  return rc;
}

int air__ant_encode_error_event(air__encoder *e, air_reason reason,
                                const char *message, air__buf *out) {
  size_t start = out->n;
  int rc = air__buf_add(out, LIT("event: error\ndata: "));
  if (rc == 0) rc = add_error_obj(out, reason, message);
  if (rc == 0) rc = air__buf_add(out, LIT("}\n\n"));
  if (rc != 0) {
    air__text_undo(out, start);
    return rc;
  }
  e->ended = true;
  return 0;
}

static int add_bufstr(air__buf *out, const air__buf *s, const char *dflt) {
  if (s->n == 0) return air__text_cstr(out, dflt);
  return air__text_str(out, s->p, s->n);
}

/* A tool call's input: its arguments when they are a JSON object (copied
 * as they are), else {}. */
static int add_input(air__buf *out, const air__buf *args) {
  json_t *v = args->n > 0 ? json_loadb(args->p, args->n, 0, NULL) : NULL;
  bool obj = json_is_object(v);
  json_decref(v);
  if (!obj) return air__buf_add(out, LIT("{}"));
  return air__buf_add(out, args->p, args->n);
}

/* Appends s JSON-escaped without the surrounding quotes. */
static int add_str_body(air__buf *out, const char *s, size_t n) {
  size_t at = out->n;
  int rc = air__text_str(out, s, n);
  if (rc != 0) return rc;
  size_t len = out->n - at; /* quotes included */
  memmove(out->p + at, out->p + at + 1, len - 2);
  out->n -= 2;
  out->p[out->n] = '\0';
  return 0;
}

int air__ant_encode_response(const air__aggregate *a, air__buf *out) {
  size_t start = out->n;
  bool first = true;
  int rc = air__buf_add(out, LIT("{\"id\":"));
  if (rc == 0) rc = add_bufstr(out, &a->id, "msg_airetry");
  if (rc == 0)
    rc = air__buf_add(
        out, LIT(",\"type\":\"message\",\"role\":\"assistant\",\"model\":"));
  if (rc == 0) rc = add_bufstr(out, &a->model, "");
  if (rc == 0) rc = air__buf_add(out, LIT(",\"content\":["));
  if (rc == 0 && a->reasoning.n > 0) {
    rc = air__buf_add(out, LIT("{\"type\":\"thinking\",\"thinking\":"));
    if (rc == 0) rc = air__text_str(out, a->reasoning.p, a->reasoning.n);
    if (rc == 0) rc = air__buf_add(out, LIT(",\"signature\":\"\"}"));
    first = false;
  }
  if (rc == 0 && (a->text.n > 0 || a->refusal.n > 0)) {
    /* Text then refusal text, as one text block. */
    if (!first) rc = air__buf_addc(out, ',');
    if (rc == 0) rc = air__buf_add(out, LIT("{\"type\":\"text\",\"text\":\""));
    if (rc == 0) rc = add_str_body(out, a->text.p, a->text.n);
    if (rc == 0) rc = add_str_body(out, a->refusal.p, a->refusal.n);
    if (rc == 0) rc = air__buf_add(out, LIT("\"}"));
    first = false;
  }
  for (size_t i = 0; rc == 0 && i < a->n_tools; i++) {
    const air__tool_call *t = &a->tools[i];
    if (!first) rc = air__buf_addc(out, ',');
    first = false;
    if (rc == 0) rc = air__buf_add(out, LIT("{\"type\":\"tool_use\",\"id\":"));
    if (rc == 0) rc = air__text_cstr(out, t->id);
    if (rc == 0) rc = air__buf_add(out, LIT(",\"name\":"));
    if (rc == 0) rc = air__text_cstr(out, t->name);
    if (rc == 0) rc = air__buf_add(out, LIT(",\"input\":"));
    if (rc == 0) rc = add_input(out, &t->args);
    if (rc == 0) rc = air__buf_addc(out, '}');
  }
  const char *sr = air__ant_stop_name(a->finish);
  if (a->finish == AIR_FINISH_STOP &&
      IS(a->finish_raw.p, a->finish_raw.n, "stop_sequence"))
    sr = "stop_sequence";
  if (rc == 0) rc = air__buf_add(out, LIT("],\"stop_reason\":\""));
  if (rc == 0) rc = air__buf_adds(out, sr);
  if (rc == 0)
    rc = air__buf_add(
        out, LIT("\",\"stop_sequence\":null,\"usage\":{\"input_tokens\":"));
  if (rc == 0) rc = air__buf_addu(out, a->input_tokens);
  if (rc == 0) rc = air__buf_add(out, LIT(",\"output_tokens\":"));
  if (rc == 0) rc = air__buf_addu(out, a->output_tokens);
  if (rc == 0) rc = air__buf_addc(out, '}');
  if (rc == 0) rc = air__continued_member(&a->continued, out);
  if (rc == 0) rc = air__buf_addc(out, '}');
  if (rc != 0) {
    air__text_undo(out, start);
  }
  return rc;
}

int air__ant_encode_error_body(int status, air_reason reason,
                               const char *message, const air_attempt *log,
                               size_t n, air__buf *out) {
  static const air__attempts_style style = {"none", true};
  (void)status; /* the HTTP status line carries it */
  size_t start = out->n;
  int rc = add_error_obj(out, reason, message);
  if (rc == 0) rc = air__buf_add(out, LIT(",\"attempts\":["));
  if (rc == 0) rc = air__text_attempts(out, log, n, &style);
  if (rc == 0) rc = air__buf_add(out, LIT("]}"));
  if (rc != 0) air__text_undo(out, start);
  return rc;
}
