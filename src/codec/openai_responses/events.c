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

#include "openai_responses.h"

void air__rsp_decoder_init(air__decoder *d) {
  memset(d, 0, sizeof(*d));
  d->api = AIR_DIALECT_OPENAI_RESPONSES;
  air__buf_init(&d->scratch, AIR__MAX_SSE_EVENT_BYTES);
  air__buf_init(&d->scratch2, AIR__MAX_SSE_EVENT_BYTES);
}

/* String token tok: borrowed when it holds no escape, else decoded into
 * d->scratch (sized for the whole event first, so it never moves). */
static void ev_str(air__decoder *d, const air__json *j, int tok, const char **p,
                   size_t *n) {
  if (air__json_plain(j, tok, p, n)) return;
  *p = "";
  *n = 0;
  if (!air__json_is_str(j, tok)) return;
  size_t off = d->scratch.n;
  if (air__json_str(j, tok, &d->scratch) != 0) {
    rsp_rollback(&d->scratch, off);
    return;
  }
  *p = d->scratch.p + off;
  *n = d->scratch.n - off;
}

static uint64_t count_of(const air__json *j, int tok) {
  int64_t v;
  return air__json_int(j, tok, &v) && v > 0 ? (uint64_t)v : 0;
}

#define EMIT(part)              \
  do {                          \
    int r_ = cb(data, &(part)); \
    if (r_ != 0) return r_;     \
  } while (0)

static int start(air__decoder *d, const air__json *j, int resp, air__part_cb cb,
                 void *data) {
  if (d->started) return 0;
  air_part p = {.kind = AIR_PART_START};
  ev_str(d, j, air__json_get(j, resp, "id"), &p.id, &p.id_len);
  ev_str(d, j, air__json_get(j, resp, "model"), &p.name, &p.name_len);
  d->started = true;
  EMIT(p);
  return 0;
}

/* An output_index token as a slot, or -1. */
static int slot_of(const air__json *j, int tok) {
  int64_t v;
  if (!air__json_int(j, tok, &v) || v < 0 || v >= AIR__DECODER_MAX_TOOLS)
    return -1;
  return (int)v;
}

static int tool_start(air__decoder *d, const air__json *j, int item, int slot,
                      air__part_cb cb, void *data) {
  if (d->block_kind[slot] != 0) return 0;
  if (d->n_tools >= AIR__DECODER_MAX_TOOLS) return 0;
  air_part p = {.kind = AIR_PART_TOOL_START, .index = d->n_tools};
  ev_str(d, j, air__json_get(j, item, "call_id"), &p.id, &p.id_len);
  if (p.id_len == 0)
    ev_str(d, j, air__json_get(j, item, "id"), &p.id, &p.id_len);
  ev_str(d, j, air__json_get(j, item, "name"), &p.name, &p.name_len);
  d->block_kind[slot] = 1;
  d->block_tool[slot] = d->n_tools++;
  EMIT(p);
  return 0;
}

static int usage(air__decoder *d, const air__json *j, int resp, air__part_cb cb,
                 void *data) {
  int u = air__json_get(j, resp, "usage");
  if (!air__json_is_obj(j, u)) return 0;
  air_part p = {.kind = AIR_PART_USAGE};
  p.input_tokens = count_of(j, air__json_get(j, u, "input_tokens"));
  p.output_tokens = count_of(j, air__json_get(j, u, "output_tokens"));
  d->input_tokens = p.input_tokens;
  d->output_tokens = p.output_tokens;
  EMIT(p);
  return 0;
}

/* An error object (or the event itself) as one ERROR part. */
static int error_part(air__decoder *d, const air__json *j, int e,
                      air__part_cb cb, void *data) {
  air_part p = {.kind = AIR_PART_ERROR};
  d->error_event = true;
  int code = air__json_get(j, e, "code");
  ev_str(d, j, code, &p.name, &p.name_len);
  if (p.name_len == 0)
    ev_str(d, j, air__json_get(j, e, "type"), &p.name, &p.name_len);
  if (p.name_len == 5 && memcmp(p.name, "error", 5) == 0) p.name_len = 0;
  ev_str(d, j, air__json_get(j, e, "message"), &p.text, &p.text_len);
  EMIT(p);
  return 0;
}

static bool is(const char *t, size_t n, const char *s) {
  return n == strlen(s) && memcmp(t, s, n) == 0;
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

/* The end of a response: FINISH and USAGE. */
static int end(air__decoder *d, const air__json *j, int resp, bool incomplete,
               air__part_cb cb, void *data) {
  int rc = start(d, j, resp, cb, data);
  if (rc != 0) return rc;
  air_part f = {.kind = AIR_PART_FINISH};
  if (incomplete) {
    int det = air__json_get(j, resp, "incomplete_details");
    ev_str(d, j, air__json_get(j, det, "reason"), &f.finish_raw,
           &f.finish_raw_len);
    f.finish = is(f.finish_raw, f.finish_raw_len, "content_filter")
                   ? AIR_FINISH_CONTENT_FILTER
                   : AIR_FINISH_LENGTH;
    if (f.finish_raw_len == 0) {
      f.finish_raw = "incomplete";
      f.finish_raw_len = 10;
    }
  } else {
    f.finish = d->n_tools > 0 ? AIR_FINISH_TOOL_CALLS : AIR_FINISH_STOP;
    f.finish_raw = "completed";
    f.finish_raw_len = 9;
  }
  d->finished = true;
  d->done = d->terminator = true;
  EMIT(f);
  return usage(d, j, resp, cb, data);
}

/* True when token i is a string whose bytes as written (escapes
 * included) are over max (dialect.h, "identifiers"). */
static bool raw_over(const air__json *j, int i, size_t max) {
  size_t n = 0;
  if (air__json_is_str(j, i)) air__json_raw(j, i, &n);
  return n > max;
}

static int decode(air__decoder *d, const air__json *j, air__part_cb cb,
                  void *data) {
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
    if (raw_over(j,
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
    air_part p = {.kind = deltas[k].kind};
    if (p.kind == AIR_PART_TOOL_DELTA) {
      int slot = slot_of(j, air__json_get(j, 0, "output_index"));
      if (slot < 0 || d->block_kind[slot] == 0) goto malformed;
      d->block_kind[slot] = 2;
      p.index = d->block_tool[slot];
    }
    int rc = start(d, j, -1, cb, data);
    if (rc != 0) return rc;
    ev_str(d, j, dt, &p.text, &p.text_len);
    if (p.text_len > 0) EMIT(p);
    return 0;
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
    if (raw_over(j, air__json_get(j, item, "name"), AIR__MAX_TOOL_NAME_BYTES)) {
      d->fatal = AIR__OVER_TOOL_NAME;
      return 0;
    }
    int rc = start(d, j, -1, cb, data);
    if (rc == 0) rc = tool_start(d, j, item, slot, cb, data);
    if (rc != 0 || added || d->block_kind[slot] != 1) return rc;
    air_part a = {.kind = AIR_PART_TOOL_DELTA, .index = d->block_tool[slot]};
    ev_str(d, j, air__json_get(j, item, "arguments"), &a.text, &a.text_len);
    d->block_kind[slot] = 2;
    if (a.text_len > 0) EMIT(a);
    return 0;
  }
  return 0;

malformed:
  air__decoder_note_oom(d, 0); /* out of memory is no malformed event */
  if (!d->oom) d->malformed++;
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

/*
 * The fast path (see above) on the trimmed data s, n: 1 when it decoded the
 * event (cb's first non-zero in *rc), 0 when it changed nothing and the
 * full decoder must run. d->scratch is as decode_event left it (reset,
 * sized for the event's escapes).
 */
static int fast_delta(air__decoder *d, const char *s, size_t n, air__part_cb cb,
                      void *data, int *rc) {
  const char *p = s, *e = s + n;
  fast_val type = {0}, delta = {0};
  unsigned members = 0;
  int more = air__json_scan_open(&p, e, '{');
  while (more > 0) {
    const char *k;
    size_t kn;
    if (++members > AIR__JSON_SCAN_MAX_MEMBERS ||
        !air__json_scan_key(&p, e, &k, &kn))
      return 0;
    bool ok;
    if (is(k, kn, "type"))
      ok = air__json_scan_once(&p, e, &type);
    else if (is(k, kn, "delta"))
      ok = air__json_scan_once(&p, e, &delta);
    else
      ok = (p = air__json_scan_leaf(p, e)) != NULL;
    if (!ok) return 0;
    more = air__json_scan_next(&p, e, '}');
  }
  air_part_kind kind = fast_kind(&type);
  if (more != 0 || p != e || kind == AIR_PART_START || !delta.str) return 0;

  /* Sure: the parts, as decode gives them. The text is decoded first, so
   * that nothing is handed over when that fails. */
  const char *text = delta.p;
  size_t text_n = delta.n;
  if (memchr(text, '\\', text_n) != NULL) {
    size_t off = d->scratch.n;
    if (air__json_unescape(text, text_n, &d->scratch) != 0) {
      rsp_rollback(&d->scratch, off);
      return 0;
    }
    text = d->scratch.p + off;
    text_n = d->scratch.n - off;
  }
  *rc = 0;
  if (!d->started) {
    air_part st = {.kind = AIR_PART_START, .id = "", .name = ""};
    d->started = true;
    if ((*rc = cb(data, &st)) != 0) return 1;
  }
  if (text_n > 0) {
    air_part t = {.kind = kind, .text = text, .text_len = text_n};
    *rc = cb(data, &t);
  }
  return 1;
}

static bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* decode_event, with the fast path tried first when fast; *took tells
 * whether it decoded the event. */
static int decode_event(air__decoder *d, const air__sse_event *ev,
                        air__part_cb cb, void *data, bool fast, bool *took) {
  *took = false;
  d->usage_only = d->terminator = d->error_event = d->server_tool = false;
  const char *s = ev->data.p;
  size_t n = ev->data.n;
  while (n > 0 && is_ws(s[0])) {
    s++;
    n--;
  }
  while (n > 0 && is_ws(s[n - 1])) n--;
  if (n == 0) return 0;
  if (n == 6 && memcmp(s, "[DONE]", 6) == 0) {
    d->done = d->terminator = true;
    return 0;
  }
  air__buf_reset(&d->scratch);
  if (memchr(s, '\\', n) != NULL && d->scratch.cap <= n) {
    int rc = air__buf_add(&d->scratch, s, n);
    air__buf_reset(&d->scratch);
    if (rc != 0) {
      air__decoder_note_oom(d, rc);
      if (!d->oom) d->malformed++;
      return 0;
    }
  }
  int rc;
  if (fast && fast_delta(d, s, n, cb, data, &rc)) {
    *took = true;
    return rc;
  }
  air__json j;
  rc = air__json_parse(&j, s, n);
  if (rc != 0 || !air__json_is_obj(&j, 0)) {
    air__json_cleanup(&j);
    air__decoder_note_oom(d, rc);
    if (!d->oom) d->malformed++;
    return 0;
  }
  rc = decode(d, &j, cb, data);
  air__json_cleanup(&j);
  return rc;
}

int air__rsp_decode_event(air__decoder *d, const air__sse_event *ev,
                          air__part_cb cb, void *data) {
  bool took;
  return decode_event(d, ev, cb, data, true, &took);
}

int air__rsp_decode_event_full(air__decoder *d, const air__sse_event *ev,
                               air__part_cb cb, void *data) {
  bool took;
  return decode_event(d, ev, cb, data, false, &took);
}

int air__rsp_decode_event_fast(air__decoder *d, const air__sse_event *ev,
                               air__part_cb cb, void *data, bool *took) {
  return decode_event(d, ev, cb, data, true, took);
}

/* ---- decoding: a whole body ------------------------------------------------
 */

static const char *jv(json_t *v, size_t *n) {
  if (!json_is_string(v)) {
    *n = 0;
    return "";
  }
  *n = json_string_length(v);
  return json_string_value(v);
}

/* Whether v is a string over max bytes. */
static bool over(const json_t *v, size_t max) {
  return json_is_string(v) && json_string_length(v) > max;
}

static int body_parts(air__decoder *d, json_t *root, air__part_cb cb,
                      void *data) {
  /* What carries meaning is checked before any part is handed over. */
  size_t i, k;
  json_t *it, *c;
  if (over(json_object_get(json_object_get(root, "incomplete_details"),
                           "reason"),
           AIR__MAX_FINISH_REASON_BYTES))
    d->fatal = AIR__OVER_FINISH;
  json_array_foreach(json_object_get(root, "output"), i, it) {
    const char *type = json_string_value(json_object_get(it, "type"));
    if (type != NULL && strcmp(type, "function_call") == 0 &&
        over(json_object_get(it, "name"), AIR__MAX_TOOL_NAME_BYTES))
      d->fatal = AIR__OVER_TOOL_NAME;
  }
  if (d->fatal != NULL) return AIR_EPARSE;
  air_part s = {.kind = AIR_PART_START};
  s.id = jv(json_object_get(root, "id"), &s.id_len);
  s.name = jv(json_object_get(root, "model"), &s.name_len);
  d->started = true;
  EMIT(s);
  const char *status = json_string_value(json_object_get(root, "status"));
  if (status != NULL && strcmp(status, "failed") == 0) {
    json_t *e = json_object_get(root, "error");
    air_part p = {.kind = AIR_PART_ERROR};
    p.name = jv(json_object_get(e, "code"), &p.name_len);
    p.text = jv(json_object_get(e, "message"), &p.text_len);
    d->error_event = true;
    EMIT(p);
    return 0;
  }
  json_array_foreach(json_object_get(root, "output"), i, it) {
    const char *type = json_string_value(json_object_get(it, "type"));
    if (type == NULL) continue;
    if (strcmp(type, "reasoning") == 0) {
      json_t *sum = json_object_get(it, "summary");
      if (json_array_size(sum) == 0) sum = json_object_get(it, "content");
      json_array_foreach(sum, k, c) {
        air_part p = {.kind = AIR_PART_REASONING};
        p.text = jv(json_object_get(c, "text"), &p.text_len);
        if (p.text_len > 0) EMIT(p);
      }
    } else if (strcmp(type, "message") == 0) {
      json_array_foreach(json_object_get(it, "content"), k, c) {
        const char *ct = json_string_value(json_object_get(c, "type"));
        bool refusal = ct != NULL && strcmp(ct, "refusal") == 0;
        air_part p = {.kind = refusal ? AIR_PART_REFUSAL : AIR_PART_TEXT};
        if (ct == NULL || (!refusal && strcmp(ct, "output_text") != 0))
          continue;
        p.text =
            jv(json_object_get(c, refusal ? "refusal" : "text"), &p.text_len);
        if (p.text_len > 0) EMIT(p);
      }
    } else if (strcmp(type, "function_call") == 0) {
      if (d->n_tools >= AIR__DECODER_MAX_TOOLS) return AIR_ETOOBIG;
      air_part t = {.kind = AIR_PART_TOOL_START, .index = d->n_tools++};
      t.id = jv(json_object_get(it, "call_id"), &t.id_len);
      t.name = jv(json_object_get(it, "name"), &t.name_len);
      EMIT(t);
      air_part a = {.kind = AIR_PART_TOOL_DELTA, .index = t.index};
      a.text = jv(json_object_get(it, "arguments"), &a.text_len);
      if (a.text_len > 0) EMIT(a);
    }
  }
  air_part f = {.kind = AIR_PART_FINISH};
  if (status != NULL && strcmp(status, "incomplete") == 0) {
    json_t *det = json_object_get(root, "incomplete_details");
    f.finish_raw = jv(json_object_get(det, "reason"), &f.finish_raw_len);
    f.finish = f.finish_raw_len == 14 &&
                       memcmp(f.finish_raw, "content_filter", 14) == 0
                   ? AIR_FINISH_CONTENT_FILTER
                   : AIR_FINISH_LENGTH;
    if (f.finish_raw_len == 0)
      f.finish_raw = jv(json_object_get(root, "status"), &f.finish_raw_len);
  } else {
    f.finish = d->n_tools > 0 ? AIR_FINISH_TOOL_CALLS : AIR_FINISH_STOP;
    f.finish_raw = "completed";
    f.finish_raw_len = 9;
  }
  d->finished = true;
  EMIT(f);
  json_t *usage = json_object_get(root, "usage");
  if (json_is_object(usage)) {
    air_part u = {.kind = AIR_PART_USAGE};
    json_t *in = json_object_get(usage, "input_tokens");
    json_t *out = json_object_get(usage, "output_tokens");
    u.input_tokens =
        json_integer_value(in) > 0 ? (uint64_t)json_integer_value(in) : 0;
    u.output_tokens =
        json_integer_value(out) > 0 ? (uint64_t)json_integer_value(out) : 0;
    d->input_tokens = u.input_tokens;
    d->output_tokens = u.output_tokens;
    EMIT(u);
  }
  return 0;
}

/* decode_body: a response object ("object": "response", "output" an
 * array); anything else is AIR_EPARSE. */
int air__rsp_decode_body(air__decoder *d, const char *body, size_t n,
                         air__part_cb cb, void *data) {
  json_t *root = json_loadb(body, n, JSON_ALLOW_NUL, NULL);
  const char *obj = json_string_value(json_object_get(root, "object"));
  if (!json_is_object(root) || obj == NULL || strcmp(obj, "response") != 0 ||
      !json_is_array(json_object_get(root, "output"))) {
    json_decref(root);
    return AIR_EPARSE;
  }
  int rc = body_parts(d, root, cb, data);
  if (rc == 0) d->done = true;
  json_decref(root);
  return rc;
}
