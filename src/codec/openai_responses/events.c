/*
 * The OpenAI Responses stream (response.* events) and response bodies
 * decoded into parts (docs/design.md §5).
 *
 * The type is the data's "type" member (the SSE event name repeats it and
 * is not read). What yields parts:
 *   response.created / .in_progress   START (response.id, response.model)
 *   response.output_item.added        TOOL_START for a function_call item
 *                                     (tool index: the call's ordinal)
 *   response.output_text.delta        TEXT
 *   response.refusal.delta            REFUSAL
 *   response.reasoning_summary_text.delta, response.reasoning_text.delta
 *                                     REASONING
 *   response.function_call_arguments.delta  TOOL_DELTA of the call at
 *                                     output_index
 *   response.output_item.done         a function_call whose arguments were
 *                                     never streamed: TOOL_START (if none
 *                                     yet) and its arguments whole
 *   response.completed                FINISH stop (tool_calls when a call
 *                                     was made), USAGE; the terminator
 *                                     (it carries the output and usage:
 *                                     the responder holds it for a
 *                                     same-dialect caller until the end)
 *   response.incomplete               FINISH by incomplete_details.reason
 *                                     (max_output_tokens: length,
 *                                     content_filter: content_filter),
 *                                     USAGE; the terminator
 *   response.failed                   ERROR (response.error code, message)
 *   error                             ERROR (code or type, message; also
 *                                     inside an "error" object)
 * Every other type (content_part.*, *.done, keep-alives) yields nothing and
 * is not malformed. Malformed: data that is not a JSON object with a
 * string "type", a delta that is not a string, an output_index outside
 * 0..AIR__DECODER_MAX_TOOLS-1 on a function call event, arguments for an
 * output_index that holds no function call. An event is checked whole
 * before any of its parts is handed over. A function call's name or an
 * incomplete_details.reason over its limit (as written) makes the event
 * fatal (d->fatal, dialect.h): it yields nothing and the attempt fails.
 *
 * block_kind[output_index]: 0 nothing, 1 a function call started, 2 its
 * arguments have streamed; block_tool[output_index]: its tool index.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec_decode.h"
#include "openai_responses.h"

void air__rsp_decoder_init(air__decoder *d) {
  air__decoder_init_for(d, AIR_DIALECT_OPENAI_RESPONSES);
}

/* ---- the mapping: a response's pieces into parts ---------------------------
 *
 * A stream's events and a body's response object carry the same pieces
 * (START's id and model, text deltas or texts, function calls, the end,
 * the usage, a failure); both decoders hand them over through these. A
 * body is one whole answer: its START comes whatever the decoder saw
 * before.
 */

/* A function call's TOOL_START, at the next tool index (*tool). */
static int emit_tool_start(air__decoder *d, const char *id, size_t id_n,
                           const char *name, size_t name_n, int *tool,
                           air__part_cb cb, void *data) {
  *tool = d->n_tools++;
  return air__emit_tool_start(*tool, id, id_n, name, name_n, cb, data);
}

static bool is(const char *t, size_t n, const char *s) {
  return n == strlen(s) && memcmp(t, s, n) == 0;
}

/* The end of a response: FINISH. Incomplete: by its reason (reason, n;
 * content_filter, else length; "incomplete" when it gives none); else
 * tool_calls when a call was made, else stop ("completed"). */
static int emit_finish(air__decoder *d, bool incomplete, const char *reason,
                       size_t n, air__part_cb cb, void *data) {
  air_part f = {.kind = AIR_PART_FINISH};
  if (incomplete) {
    f.finish = is(reason, n, "content_filter") ? AIR_FINISH_CONTENT_FILTER
                                               : AIR_FINISH_LENGTH;
    f.finish_raw = n > 0 ? reason : "incomplete";
    f.finish_raw_len = n > 0 ? n : 10;
  } else {
    f.finish = d->n_tools > 0 ? AIR_FINISH_TOOL_CALLS : AIR_FINISH_STOP;
    f.finish_raw = "completed";
    f.finish_raw_len = 9;
  }
  d->finished = true;
  EMIT(f);
  return 0;
}

/* A failure: one ERROR part (name: its code, text: its message). */
static int emit_error(air__decoder *d, const char *name, size_t name_n,
                      const char *msg, size_t msg_n, air__part_cb cb,
                      void *data) {
  air_part p = {.kind = AIR_PART_ERROR,
                .text = msg,
                .text_len = msg_n,
                .name = name,
                .name_len = name_n};
  d->error_event = true;
  EMIT(p);
  return 0;
}

/* ---- decoding: a stream event (json.c tokens) ------------------------------
 */

/* START from the response object at token resp (-1: none: "" and ""). */
static int start(air__decoder *d, const air__json *j, int resp, air__part_cb cb,
                 void *data) {
  if (d->started) return 0;
  const char *id, *model;
  size_t id_n, model_n;
  air__event_str(d, j, air__json_get(j, resp, "id"), &id, &id_n);
  air__event_str(d, j, air__json_get(j, resp, "model"), &model, &model_n);
  return air__emit_start(d, id, id_n, model, model_n, cb, data);
}

/* An output_index token as a slot, or -1. */
static int slot_of(const air__json *j, int tok) {
  int64_t v;
  if (!air__json_int(j, tok, &v) || v < 0 || v >= AIR__DECODER_MAX_TOOLS)
    return -1;
  return (int)v;
}

/* The function call item at token item, output index slot: its TOOL_START
 * once (nothing past AIR__DECODER_MAX_TOOLS calls). */
static int tool_start(air__decoder *d, const air__json *j, int item, int slot,
                      air__part_cb cb, void *data) {
  if (d->block_kind[slot] != 0) return 0;
  if (d->n_tools >= AIR__DECODER_MAX_TOOLS) return 0;
  const char *id, *name;
  size_t id_n, name_n;
  air__event_str(d, j, air__json_get(j, item, "call_id"), &id, &id_n);
  if (id_n == 0) air__event_str(d, j, air__json_get(j, item, "id"), &id, &id_n);
  air__event_str(d, j, air__json_get(j, item, "name"), &name, &name_n);
  d->block_kind[slot] = 1;
  return emit_tool_start(d, id, id_n, name, name_n, &d->block_tool[slot], cb,
                         data);
}

/* An error object (or the event itself) as one ERROR part: its code, else
 * its type unless that is "error", and its message. */
static int error_part(air__decoder *d, const air__json *j, int e,
                      air__part_cb cb, void *data) {
  const char *name, *msg;
  size_t name_n, msg_n;
  air__event_str(d, j, air__json_get(j, e, "code"), &name, &name_n);
  if (name_n == 0)
    air__event_str(d, j, air__json_get(j, e, "type"), &name, &name_n);
  if (name_n == 5 && memcmp(name, "error", 5) == 0) name_n = 0;
  air__event_str(d, j, air__json_get(j, e, "message"), &msg, &msg_n);
  return emit_error(d, name, name_n, msg, msg_n, cb, data);
}

/* Whether event type t names a built-in tool call's progress:
 * "response.<tool>_call." or "response.<tool>_call_<what>." for any tool
 * but function calls (whose arguments are parts). */
static bool builtin_tool_event(const char *t, size_t n) {
  static const char pre[] = "response.";
  if (n < sizeof(pre) || memcmp(t, pre, sizeof(pre) - 1) != 0) return false;
  if (n >= 22 && memcmp(t, "response.function_call", 22) == 0) return false;
  for (size_t i = sizeof(pre) - 1; i + 5 < n; i++)
    if (memcmp(t + i, "_call", 5) == 0 && (t[i + 5] == '.' || t[i + 5] == '_'))
      return true;
  return false;
}

/* response.completed / .incomplete: START if none yet, FINISH, USAGE;
 * the terminator. */
static int end(air__decoder *d, const air__json *j, int resp, bool incomplete,
               air__part_cb cb, void *data) {
  int rc = start(d, j, resp, cb, data);
  if (rc != 0) return rc;
  const char *reason = "";
  size_t n = 0;
  if (incomplete)
    air__event_str(
        d, j,
        air__json_get(j, air__json_get(j, resp, "incomplete_details"),
                      "reason"),
        &reason, &n);
  d->done = d->terminator = true;
  if ((rc = emit_finish(d, incomplete, reason, n, cb, data)) != 0) return rc;
  int u = air__json_get(j, resp, "usage");
  if (!air__json_is_obj(j, u)) return 0;
  return air__emit_usage(
      d, air__event_count(j, air__json_get(j, u, "input_tokens")),
      air__event_count(j, air__json_get(j, u, "output_tokens")), cb, data);
}

static int decode(air__decoder *d, const air__sse_event *ev, const air__json *j,
                  air__part_cb cb, void *data) {
  (void)ev;
  int tt = air__json_get(j, 0, "type");
  const char *t;
  size_t n;
  if (!air__json_is_str(j, tt) || !air__json_plain(j, tt, &t, &n))
    goto malformed;
  int resp = air__json_get(j, 0, "response");
  if (is(t, n, "response.created") || is(t, n, "response.in_progress"))
    return air__json_is_obj(j, resp) ? start(d, j, resp, cb, data) : 0;
  if (is(t, n, "response.completed") || is(t, n, "response.incomplete")) {
    if (!air__json_is_obj(j, resp)) goto malformed;
    if (air__event_over(
            j,
            air__json_get(j, air__json_get(j, resp, "incomplete_details"),
                          "reason"),
            AIR__MAX_FINISH_REASON_BYTES)) {
      d->fatal = AIR__OVER_FINISH;
      return 0;
    }
    return end(d, j, resp, t[9] == 'i', cb, data);
  }
  if (is(t, n, "response.failed")) {
    int e = air__json_get(j, resp, "error");
    return error_part(d, j, air__json_is_obj(j, e) ? e : 0, cb, data);
  }
  if (is(t, n, "error")) {
    int e = air__json_get(j, 0, "error");
    return error_part(d, j, air__json_is_obj(j, e) ? e : 0, cb, data);
  }
  static const struct {
    const char *type;
    air_part_kind kind;
  } deltas[] = {
      {"response.output_text.delta", AIR_PART_TEXT},
      {"response.refusal.delta", AIR_PART_REFUSAL},
      {"response.reasoning_summary_text.delta", AIR_PART_REASONING},
      {"response.reasoning_text.delta", AIR_PART_REASONING},
      {"response.function_call_arguments.delta", AIR_PART_TOOL_DELTA}};
  for (size_t k = 0; k < sizeof(deltas) / sizeof(deltas[0]); k++) {
    if (!is(t, n, deltas[k].type)) continue;
    int dt = air__json_get(j, 0, "delta");
    if (!air__json_is_str(j, dt)) goto malformed;
    int index = 0;
    if (deltas[k].kind == AIR_PART_TOOL_DELTA) {
      int slot = slot_of(j, air__json_get(j, 0, "output_index"));
      if (slot < 0 || d->block_kind[slot] == 0) goto malformed;
      d->block_kind[slot] = 2;
      index = d->block_tool[slot];
    }
    int rc = start(d, j, -1, cb, data);
    if (rc != 0) return rc;
    const char *text;
    size_t text_n;
    air__event_str(d, j, dt, &text, &text_n);
    return air__emit_text(deltas[k].kind, index, text, text_n, cb, data);
  }
  /* A built-in tool call's own events (response.web_search_call.searching,
   * response.code_interpreter_call_code.delta, ...): progress, no part. */
  if (builtin_tool_event(t, n)) {
    d->server_tool = true;
    return 0;
  }
  bool added = is(t, n, "response.output_item.added");
  if (added || is(t, n, "response.output_item.done")) {
    int item = air__json_get(j, 0, "item");
    int ity = air__json_get(j, item, "type");
    if (!air__json_is_obj(j, item)) return 0;
    if (!air__json_eq(j, ity, "function_call")) {
      /* A built-in tool's item (web_search_call, code_interpreter_call,
       * ...): progress, no part. */
      const char *it;
      size_t itn;
      d->server_tool = air__json_is_str(j, ity) &&
                       air__json_plain(j, ity, &it, &itn) && itn > 5 &&
                       memcmp(it + itn - 5, "_call", 5) == 0;
      return 0;
    }
    int slot = slot_of(j, air__json_get(j, 0, "output_index"));
    if (slot < 0) goto malformed;
    if (air__event_over(j, air__json_get(j, item, "name"),
                        AIR__MAX_TOOL_NAME_BYTES)) {
      d->fatal = AIR__OVER_TOOL_NAME;
      return 0;
    }
    int rc = start(d, j, -1, cb, data);
    if (rc == 0) rc = tool_start(d, j, item, slot, cb, data);
    if (rc != 0 || added || d->block_kind[slot] != 1) return rc;
    const char *args;
    size_t args_n;
    air__event_str(d, j, air__json_get(j, item, "arguments"), &args, &args_n);
    d->block_kind[slot] = 2;
    return air__emit_text(AIR_PART_TOOL_DELTA, d->block_tool[slot], args,
                          args_n, cb, data);
  }
  return 0;

malformed:
  air__decoder_malformed(d, 0);
  return 0;
}

/* ---- the fast path: a text delta without tokens
 * -----------------------------------------------------
 *
 * Most events of a stream are one shape: {"type":"response.output_text.delta",
 * "sequence_number":N,"item_id":"...","output_index":0,"content_index":0,
 * "delta":"...","logprobs":[]} (or the refusal and reasoning deltas).
 * fast_delta recognises it in one forward scan and yields what decode
 * would, without air__json_parse. It takes an event only when sure: every
 * byte valid JSON by the tokenizer's grammar; "type" and "delta" each given
 * once, the type one of those four without escapes, the delta a string;
 * every other value without members ({} and [] included). Anything else
 * (function call arguments, whose output_index decides, included) goes to
 * the full decoder untouched.
 */

/* A member the fast path reads (json.h). */
typedef air__json_leaf fast_val;

/* The part kind of a text delta type ("type" raw), or 0 (AIR_PART_START,
 * never a delta's) for any other. */
static air_part_kind fast_kind(const fast_val *t) {
  if (!t->str) return AIR_PART_START;
  if (is(t->p, t->n, "response.output_text.delta")) return AIR_PART_TEXT;
  if (is(t->p, t->n, "response.refusal.delta")) return AIR_PART_REFUSAL;
  if (is(t->p, t->n, "response.reasoning_summary_text.delta") ||
      is(t->p, t->n, "response.reasoning_text.delta"))
    return AIR_PART_REASONING;
  return AIR_PART_START;
}

/* What fast_delta found. */
typedef struct delta_scan {
  fast_val type, delta;
  unsigned members;
} delta_scan;

/* A member of the event: its "type" and "delta", once each. */
static bool delta_member(void *ctx, const char *k, size_t kn, const char **pp,
                         const char *e) {
  delta_scan *f = ctx;
  if (is(k, kn, "type")) return air__json_scan_once(pp, e, &f->type);
  if (is(k, kn, "delta")) return air__json_scan_once(pp, e, &f->delta);
  return (*pp = air__json_scan_leaf(*pp, e)) != NULL;
}

/*
 * The fast path (see above) on the trimmed data s, n: 1 when it decoded the
 * event (cb's first non-zero in *rc), 0 when it changed nothing and the
 * full decoder must run. d->scratch is as decode_event left it (reset,
 * sized for the event's escapes).
 */
static int fast_delta(air__decoder *d, const char *s, size_t n, air__part_cb cb,
                      void *data, int *rc) {
  const char *p = s, *e = s + n;
  delta_scan f = {{0}, {0}, 0};
  bool whole = air__scan_object(&p, e, &f.members, delta_member, &f);
  air_part_kind kind = fast_kind(&f.type);
  if (!whole || p != e || kind == AIR_PART_START || !f.delta.str) return 0;

  /* Sure: the parts, as decode gives them. The text is decoded first, so
   * that nothing is handed over when that fails. */
  const char *text = f.delta.p;
  size_t text_n = f.delta.n;
  if (!air__event_unescape(d, &text, &text_n)) return 0;
  if ((*rc = air__emit_start(d, "", 0, "", 0, cb, data)) == 0)
    *rc = air__emit_text(kind, 0, text, text_n, cb, data);
  return 1;
}

/* decode_event: see dialect.h and the notes at the top of this file. */
AIR__DECODE_EVENT_FUNCS(air__rsp, air__openai_event_data, fast_delta, decode)

/* ---- decoding: a whole body (jansson) -------------------------------------
 */

/* A response object's output items, end and usage through the mapping. */
static int body_parts(air__decoder *d, const json_t *root, air__part_cb cb,
                      void *data) {
  /* What carries meaning is checked before any part is handed over. */
  size_t i, k, n;
  json_t *it, *c;
  json_t *output = json_object_get(root, "output");
  if (air__json_over(json_object_get(
                         json_object_get(root, "incomplete_details"), "reason"),
                     AIR__MAX_FINISH_REASON_BYTES))
    d->fatal = AIR__OVER_FINISH;
  json_array_foreach(output, i, it) {
    const char *type = json_string_value(json_object_get(it, "type"));
    if (type != NULL && strcmp(type, "function_call") == 0 &&
        air__json_over(json_object_get(it, "name"), AIR__MAX_TOOL_NAME_BYTES))
      d->fatal = AIR__OVER_TOOL_NAME;
  }
  if (d->fatal != NULL) return AIR_EPARSE;
  const char *p, *q;
  size_t pn, qn;
  int rc = air__json_body_start(d, root, cb, data);
  const char *status = json_string_value(json_object_get(root, "status"));
  if (rc == 0 && status != NULL && strcmp(status, "failed") == 0) {
    json_t *e = json_object_get(root, "error");
    p = air__json_sv(json_object_get(e, "code"), &pn);
    q = air__json_sv(json_object_get(e, "message"), &qn);
    return emit_error(d, p, pn, q, qn, cb, data);
  }
  json_array_foreach(output, i, it) {
    const char *type = json_string_value(json_object_get(it, "type"));
    if (rc != 0 || type == NULL) continue;
    if (strcmp(type, "reasoning") == 0) {
      json_t *sum = json_object_get(it, "summary");
      if (json_array_size(sum) == 0) sum = json_object_get(it, "content");
      json_array_foreach(sum, k, c) {
        p = air__json_sv(json_object_get(c, "text"), &n);
        if (rc == 0) rc = air__emit_text(AIR_PART_REASONING, 0, p, n, cb, data);
      }
    } else if (strcmp(type, "message") == 0) {
      json_array_foreach(json_object_get(it, "content"), k, c) {
        const char *ct = json_string_value(json_object_get(c, "type"));
        bool refusal = ct != NULL && strcmp(ct, "refusal") == 0;
        if (rc != 0 || ct == NULL ||
            (!refusal && strcmp(ct, "output_text") != 0))
          continue;
        p = air__json_sv(json_object_get(c, refusal ? "refusal" : "text"), &n);
        rc = air__emit_text(refusal ? AIR_PART_REFUSAL : AIR_PART_TEXT, 0, p, n,
                            cb, data);
      }
    } else if (strcmp(type, "function_call") == 0) {
      if (d->n_tools >= AIR__DECODER_MAX_TOOLS) return AIR_ETOOBIG;
      int tool;
      p = air__json_sv(json_object_get(it, "call_id"), &pn);
      q = air__json_sv(json_object_get(it, "name"), &qn);
      rc = emit_tool_start(d, p, pn, q, qn, &tool, cb, data);
      p = air__json_sv(json_object_get(it, "arguments"), &n);
      if (rc == 0)
        rc = air__emit_text(AIR_PART_TOOL_DELTA, tool, p, n, cb, data);
    }
  }
  bool incomplete = status != NULL && strcmp(status, "incomplete") == 0;
  p = air__json_sv(
      json_object_get(json_object_get(root, "incomplete_details"), "reason"),
      &n);
  if (rc == 0) rc = emit_finish(d, incomplete, p, n, cb, data);
  if (rc == 0)
    rc = air__json_body_usage(d, json_object_get(root, "usage"), "input_tokens",
                              "output_tokens", cb, data);
  return rc;
}

/* A response object: "object": "response", "output" an array. */
static bool is_body(const json_t *root) {
  const char *obj = json_string_value(json_object_get(root, "object"));
  return json_is_object(root) && obj != NULL && strcmp(obj, "response") == 0 &&
         json_is_array(json_object_get(root, "output"));
}

/* decode_body: a response object; anything else is AIR_EPARSE. */
int air__rsp_decode_body(air__decoder *d, const char *body, size_t n,
                         air__part_cb cb, void *data) {
  return air__json_decode_body(d, body, n, JSON_ALLOW_NUL, is_body, body_parts,
                               true, cb, data);
}
