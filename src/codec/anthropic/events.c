/*
 * The Anthropic Messages stream and bodies decoded into parts (docs/design.md
 * §2, 5). Usage input counts include the cache creation and cache read
 * tokens (the total prompt, as OpenAI counts it). A stop reason this file
 * does not know is FINISH STOP with the raw string kept. Deltas are decoded
 * by their own type, so a text delta on a block never started still yields
 * TEXT; an input_json_delta needs a started tool_use block (else malformed)
 * and is ignored on other blocks (server tools). A stop reason or tool_use
 * name over its limit makes the event fatal (d->fatal, dialect.h): it
 * yields nothing and the attempt fails.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anthropic.h"
#include "codec_decode.h"
#include "codec_json.h"
#include "json.h"
#include "limits.h"

void air__ant_decoder_init(air__decoder *d) {
  air__decoder_init_for(d, AIR_DIALECT_ANTHROPIC);
  for (int i = 0; i < AIR__DECODER_MAX_TOOLS; i++) d->block_tool[i] = -1;
}

/* ---- the mapping: a message's pieces into parts ---------------------------
 *
 * A stream's events and a body's message carry the same pieces (the
 * message's id and model, content blocks, the stop reason, the usage);
 * both decoders hand them over through these. Parts carry "" for the
 * strings they do not use.
 */

static int emit_start(air__decoder *d, const char *id, size_t id_n,
                      const char *model, size_t model_n, air__part_cb cb,
                      void *data) {
  air_part part = {.kind = AIR_PART_START,
                   .text = "",
                   .id = id,
                   .id_len = id_n,
                   .name = model,
                   .name_len = model_n,
                   .finish_raw = ""};
  d->started = true;
  return cb(data, &part);
}

static int emit_text(air__part_cb cb, void *data, air_part_kind k, int idx,
                     const char *p, size_t n) {
  air_part part = {.kind = k,
                   .index = idx,
                   .text = p,
                   .text_len = n,
                   .id = "",
                   .name = "",
                   .finish_raw = ""};
  return cb(data, &part);
}

/* The usage so far (d's totals). */
static int emit_usage(air__decoder *d, air__part_cb cb, void *data) {
  air_part part = {.kind = AIR_PART_USAGE,
                   .text = "",
                   .id = "",
                   .name = "",
                   .finish_raw = "",
                   .input_tokens = d->input_tokens,
                   .output_tokens = d->output_tokens};
  return cb(data, &part);
}

/* A text or thinking block at index idx with its text (p, n; nothing when
 * empty). */
static int text_block(air__decoder *d, int idx, bool text, const char *p,
                      size_t n, air__part_cb cb, void *data) {
  if (idx < AIR__DECODER_MAX_TOOLS)
    d->block_kind[idx] = text ? BK_TEXT : BK_THINKING;
  if (n == 0) return 0;
  return emit_text(cb, data, text ? AIR_PART_TEXT : AIR_PART_REASONING, idx, p,
                   n);
}

/* The forced JSON tool's block at idx: its input, which the caller hands
 * over next, is the answer's text. */
static void json_block(air__decoder *d, int idx) {
  if (idx < AIR__DECODER_MAX_TOOLS) d->block_kind[idx] = BK_JSON;
  d->json_seen = true;
}

/* A tool_use block at idx: TOOL_START at the next tool index (*tool), the
 * input's TOOL_DELTA for the caller to hand over. */
static int tool_block(air__decoder *d, int idx, const char *id, size_t id_n,
                      const char *name, size_t name_n, int *tool,
                      air__part_cb cb, void *data) {
  *tool = d->n_tools++;
  if (idx < AIR__DECODER_MAX_TOOLS) {
    d->block_kind[idx] = BK_TOOL;
    d->block_tool[idx] = *tool;
  }
  air_part part = {.kind = AIR_PART_TOOL_START,
                   .index = *tool,
                   .text = "",
                   .id = id,
                   .id_len = id_n,
                   .name = name,
                   .name_len = name_n,
                   .finish_raw = ""};
  return cb(data, &part);
}

/* The stop reason (p, n): the forced JSON tool's tool_use stop is the
 * answer's end (end_turn). */
static int emit_finish(air__decoder *d, const char *p, size_t n,
                       air__part_cb cb, void *data) {
  air_finish f = air__ant_finish_of(p, n);
  if (f == AIR_FINISH_TOOL_CALLS && d->json_seen) {
    f = AIR_FINISH_STOP;
    p = "end_turn";
    n = 8;
  }
  air_part part = {.kind = AIR_PART_FINISH,
                   .text = "",
                   .id = "",
                   .name = "",
                   .finish = f,
                   .finish_raw = p,
                   .finish_raw_len = n};
  d->finished = true;
  return cb(data, &part);
}

/* ---- decoding: a stream event (json.c tokens, no allocation) ---------------
 */

/*
 * The string at token i, decoded: borrowed from the event when it holds no
 * escape, else unescaped into buf. A missing or null token is "" (true); a
 * token of another type, or a bad escape, is false.
 */
static bool str_at(const air__json *j, int i, air__buf *buf, const char **p,
                   size_t *n) {
  if (i < 0 || air__json_is_null(j, i)) {
    *p = "";
    *n = 0;
    return true;
  }
  if (!air__json_is_str(j, i)) return false;
  if (air__json_plain(j, i, p, n)) return true;
  air__buf_reset(buf);
  if (air__json_str(j, i, buf) != 0) return false;
  *p = buf->n > 0 ? buf->p : "";
  *n = buf->n;
  return true;
}

/* A non-negative integer at token i; missing or null leaves *set false. */
static bool count_at(const air__json *j, int i, bool *set, uint64_t *v) {
  int64_t x;
  *set = false;
  if (i < 0 || air__json_is_null(j, i)) return true;
  if (!air__json_int(j, i, &x) || x < 0) return false;
  *set = true;
  *v = (uint64_t)x;
  return true;
}

/*
 * Reads a usage object. *has_in when input_tokens is there (then *in also
 * counts the cache tokens), *has_out when output_tokens is. False when a
 * count is not a non-negative integer.
 */
static bool read_usage(const air__json *j, int u, bool *has_in, uint64_t *in,
                       bool *has_out, uint64_t *out) {
  bool s1, s2;
  uint64_t c1 = 0, c2 = 0;
  *in = *out = 0;
  if (!count_at(j, air__json_get(j, u, "input_tokens"), has_in, in) ||
      !count_at(j, air__json_get(j, u, "cache_creation_input_tokens"), &s1,
                &c1) ||
      !count_at(j, air__json_get(j, u, "cache_read_input_tokens"), &s2, &c2) ||
      !count_at(j, air__json_get(j, u, "output_tokens"), has_out, out))
    return false;
  if (*has_in) *in = air__sat_add(*in, air__sat_add(s1 ? c1 : 0, s2 ? c2 : 0));
  return true;
}

static bool index_at(const air__json *j, int obj, int *idx) {
  int64_t v;
  if (!air__json_int(j, air__json_get(j, obj, "index"), &v) || v < 0 ||
      v > MAX_BLOCK_INDEX)
    return false;
  *idx = (int)v;
  return true;
}

/* Each handler validates the event first: *bad (and nothing emitted) when it
 * cannot be decoded; otherwise the parts, returning cb's first non-zero. */

static int on_message_start(air__decoder *d, const air__json *j, bool *bad,
                            air__part_cb cb, void *data) {
  int m = air__json_get(j, 0, "message");
  int u = air__json_get(j, m, "usage");
  const char *id, *model;
  size_t id_n, model_n;
  bool has_in, has_out;
  uint64_t in = 0, out = 0;
  if (!air__json_is_obj(j, m) ||
      !str_at(j, air__json_get(j, m, "id"), &d->scratch, &id, &id_n) ||
      !str_at(j, air__json_get(j, m, "model"), &d->scratch2, &model,
              &model_n) ||
      (u >= 0 && !air__json_is_obj(j, u) && !air__json_is_null(j, u)) ||
      (air__json_is_obj(j, u) &&
       !read_usage(j, u, &has_in, &in, &has_out, &out))) {
    *bad = true;
    return 0;
  }
  int rc = emit_start(d, id, id_n, model, model_n, cb, data);
  if (rc != 0 || !air__json_is_obj(j, u)) return rc;
  d->input_tokens = in;
  d->output_tokens = out;
  return emit_usage(d, cb, data);
}

/* The block index of a content_block_* event, its object member `key` and
 * that member's "type" string; false when any is missing (malformed). */
static bool block_member(const air__json *j, const char *key, int *idx,
                         int *obj, int *type) {
  *obj = air__json_get(j, 0, key);
  *type = air__json_get(j, *obj, "type");
  return index_at(j, 0, idx) && air__json_is_obj(j, *obj) &&
         air__json_is_str(j, *type);
}

static int on_block_start(air__decoder *d, const air__json *j, bool *bad,
                          air__part_cb cb, void *data) {
  int idx, b, t;
  if (!block_member(j, "content_block", &idx, &b, &t)) {
    *bad = true;
    return 0;
  }
  const char *p;
  size_t n;
  if (air__json_eq(j, t, "text") || air__json_eq(j, t, "thinking")) {
    bool text = air__json_eq(j, t, "text");
    if (!str_at(j, air__json_get(j, b, text ? "text" : "thinking"), &d->scratch,
                &p, &n)) {
      *bad = true;
      return 0;
    }
    return text_block(d, idx, text, p, n, cb, data);
  }
  if (air__json_eq(j, t, "tool_use")) {
    const char *name;
    size_t name_n;
    int input = air__json_get(j, b, "input");
    if (idx >= AIR__DECODER_MAX_TOOLS || d->n_tools >= AIR__DECODER_MAX_TOOLS ||
        !str_at(j, air__json_get(j, b, "id"), &d->scratch, &p, &n) ||
        !str_at(j, air__json_get(j, b, "name"), &d->scratch2, &name, &name_n)) {
      *bad = true;
      return 0;
    }
    if (name_n > AIR__MAX_TOOL_NAME_BYTES) {
      d->fatal = AIR__OVER_TOOL_NAME;
      return 0;
    }
    if (d->json_tool && IS(name, name_n, AIR__JSON_TOOL)) {
      /* The JSON tool the request forced: its input is the answer. */
      json_block(d, idx);
      if (!air__json_is_obj(j, input) || j->tok[input].size == 0) return 0;
      const char *raw = air__json_raw(j, input, &n);
      return emit_text(cb, data, AIR_PART_TEXT, idx, raw, n);
    }
    int tool;
    int rc = tool_block(d, idx, p, n, name, name_n, &tool, cb, data);
    /* Streams start tool_use with "input": {} and send the arguments as
     * deltas; an input given at once is passed on as one delta. */
    if (rc == 0 && air__json_is_obj(j, input) && j->tok[input].size > 0) {
      const char *raw = air__json_raw(j, input, &n);
      rc = emit_text(cb, data, AIR_PART_TOOL_DELTA, tool, raw, n);
    }
    return rc;
  }
  bool redacted = air__json_eq(j, t, "redacted_thinking");
  if (idx < AIR__DECODER_MAX_TOOLS)
    d->block_kind[idx] = redacted ? BK_REDACTED : BK_OTHER;
  /* A server tool's block (server_tool_use, *_tool_result): progress. */
  d->server_tool = !redacted;
  return 0;
}

static int on_block_delta(air__decoder *d, const air__json *j, bool *bad,
                          air__part_cb cb, void *data) {
  int idx, dl, t;
  if (!block_member(j, "delta", &idx, &dl, &t)) {
    *bad = true;
    return 0;
  }
  const char *key;
  air_part_kind kind;
  if (air__json_eq(j, t, "text_delta")) {
    key = "text";
    kind = AIR_PART_TEXT;
  } else if (air__json_eq(j, t, "thinking_delta")) {
    key = "thinking";
    kind = AIR_PART_REASONING;
  } else if (air__json_eq(j, t, "input_json_delta")) {
    key = "partial_json";
    kind = AIR_PART_TOOL_DELTA;
  } else {
    return 0; /* signature_delta, citations_delta, future kinds */
  }
  const char *p;
  size_t n;
  int s = air__json_get(j, dl, key);
  if (!air__json_is_str(j, s) || !str_at(j, s, &d->scratch, &p, &n)) {
    *bad = true;
    return 0;
  }
  if (kind == AIR_PART_TOOL_DELTA) {
    int bk = idx < AIR__DECODER_MAX_TOOLS ? d->block_kind[idx] : BK_NONE;
    if (bk == BK_OTHER) { /* server tool input: progress, no part */
      d->server_tool = true;
      return 0;
    }
    if (bk == BK_JSON)
      return n == 0 ? 0 : emit_text(cb, data, AIR_PART_TEXT, idx, p, n);
    if (bk != BK_TOOL) {
      *bad = true;
      return 0;
    }
    idx = d->block_tool[idx];
  }
  if (n == 0) return 0;
  return emit_text(cb, data, kind, idx, p, n);
}

static int on_message_delta(air__decoder *d, const air__json *j, bool *bad,
                            air__part_cb cb, void *data) {
  int dl = air__json_get(j, 0, "delta");
  int sr = air__json_get(j, dl, "stop_reason");
  int u = air__json_get(j, 0, "usage");
  bool has_in = false, has_out = false;
  uint64_t in = 0, out = 0;
  const char *p;
  size_t n;
  if ((dl >= 0 && !air__json_is_obj(j, dl) && !air__json_is_null(j, dl)) ||
      (sr >= 0 && !air__json_is_str(j, sr) && !air__json_is_null(j, sr)) ||
      !str_at(j, sr, &d->scratch, &p, &n) ||
      (u >= 0 && !air__json_is_obj(j, u) && !air__json_is_null(j, u)) ||
      (air__json_is_obj(j, u) &&
       !read_usage(j, u, &has_in, &in, &has_out, &out))) {
    *bad = true;
    return 0;
  }
  bool finish = air__json_is_str(j, sr);
  if (finish && n > AIR__MAX_FINISH_REASON_BYTES) {
    d->fatal = AIR__OVER_FINISH;
    return 0;
  }
  int rc = finish ? emit_finish(d, p, n, cb, data) : 0;
  if (rc != 0 || !air__json_is_obj(j, u)) return rc;
  if (has_in) d->input_tokens = in;
  if (has_out) d->output_tokens = out;
  d->usage_only = !finish;
  return emit_usage(d, cb, data);
}

static int on_error(air__decoder *d, const air__json *j, bool *bad,
                    air__part_cb cb, void *data) {
  int e = air__json_get(j, 0, "error");
  const char *type = "", *msg = "";
  size_t type_n = 0, msg_n = 0;
  if (air__json_is_obj(j, e) &&
      (!str_at(j, air__json_get(j, e, "type"), &d->scratch, &type, &type_n) ||
       !str_at(j, air__json_get(j, e, "message"), &d->scratch2, &msg,
               &msg_n))) {
    *bad = true;
    return 0;
  }
  d->error_event = true;
  air_part part = {.kind = AIR_PART_ERROR,
                   .text = msg,
                   .text_len = msg_n,
                   .id = "",
                   .name = type,
                   .name_len = type_n,
                   .finish_raw = ""};
  return cb(data, &part);
}

/* ---- the fast path: a text delta without tokens
 * -----------------------------------------------------
 *
 * Most events of a stream are one shape: {"type":"content_block_delta",
 * "index":N,"delta":{"type":"text_delta","text":"..."}} (or thinking_delta
 * and "thinking"). fast_event recognises it in one forward scan and yields
 * what on_block_delta would, without air__json_parse. It takes an event
 * only when sure: every byte valid JSON by the tokenizer's grammar; "type",
 * "index", "delta" and the delta's "type", "text" and "thinking" each given
 * once; "index" a plain integer 0..MAX_BLOCK_INDEX; the delta's type
 * text_delta or thinking_delta and its text a string; every other value
 * without members. Anything else goes to the full decoder untouched.
 */

/* A member the fast path reads (json.h). */
typedef air__json_leaf fast_val;

typedef struct fast_scan {
  fast_val type, index, delta, dtype, text, thinking;
  unsigned members;
} fast_scan;

/* A member of the delta object. */
static bool delta_member(void *ctx, const char *k, size_t kn, const char **pp,
                         const char *e) {
  fast_scan *f = ctx;
  if (IS(k, kn, "type")) return air__json_scan_once(pp, e, &f->dtype);
  if (IS(k, kn, "text")) return air__json_scan_once(pp, e, &f->text);
  if (IS(k, kn, "thinking")) return air__json_scan_once(pp, e, &f->thinking);
  return air__json_skip_leaf(pp, e);
}

/* A member of the event: "delta" is the one object read. */
static bool event_member(void *ctx, const char *k, size_t kn, const char **pp,
                         const char *e) {
  fast_scan *f = ctx;
  if (IS(k, kn, "type")) return air__json_scan_once(pp, e, &f->type);
  if (IS(k, kn, "index")) return air__json_scan_once(pp, e, &f->index);
  if (!IS(k, kn, "delta")) return air__json_skip_leaf(pp, e);
  if (f->delta.seen) return false;
  f->delta.seen = true;
  return air__scan_object(pp, e, &f->members, delta_member, f);
}

/* A block index as index_at reads it: digits only (no sign, fraction or
 * exponent), at most MAX_BLOCK_INDEX. */
static bool fast_index(const fast_val *v, int *idx) {
  if (v->str || v->n == 0 || v->n > 7) return false;
  int x = 0;
  for (size_t i = 0; i < v->n; i++) {
    if (v->p[i] < '0' || v->p[i] > '9') return false;
    x = x * 10 + (v->p[i] - '0');
  }
  if (x > MAX_BLOCK_INDEX) return false;
  *idx = x;
  return true;
}

/*
 * The fast path (see above) on the event's data: 1 when it decoded the
 * event (cb's result in *rc), 0 when it changed nothing and the full
 * decoder must run.
 */
static int fast_event(air__decoder *d, const char *s, size_t n, air__part_cb cb,
                      void *data, int *rc) {
  const char *p = air__json_ws(s, s + n), *e = s + n;
  fast_scan f;
  memset(&f, 0, sizeof(f));
  bool whole = air__scan_object(&p, e, &f.members, event_member, &f);
  int idx;
  if (!whole || air__json_ws(p, e) != e || !f.type.str ||
      !IS(f.type.p, f.type.n, "content_block_delta") || !f.delta.seen ||
      !fast_index(&f.index, &idx) || !f.dtype.str)
    return 0;
  const fast_val *t;
  air_part_kind kind;
  if (IS(f.dtype.p, f.dtype.n, "text_delta")) {
    t = &f.text;
    kind = AIR_PART_TEXT;
  } else if (IS(f.dtype.p, f.dtype.n, "thinking_delta")) {
    t = &f.thinking;
    kind = AIR_PART_REASONING;
  } else {
    return 0;
  }
  if (!t->str) return 0;

  /* Sure: the part, as on_block_delta gives it (str_at's decoding). */
  const char *text = t->p;
  size_t text_n = t->n;
  air__buf_reset(&d->scratch);
  if (!air__event_unescape(d, &text, &text_n)) return 0;
  *rc = text_n == 0 ? 0 : emit_text(cb, data, kind, idx, text, text_n);
  return 1;
}

/* An event's data, unless it is a ping (a keep-alive). */
static bool event_data(air__decoder *d, const air__sse_event *ev,
                       const char **s, size_t *n) {
  (void)d;
  if (IS(ev->type.p, ev->type.n, "ping")) return false;
  *s = ev->data.p;
  *n = ev->data.n;
  return true;
}

/* The full decoder: the data's own type decides, the event field only
 * when it has none. content_block_stop, ping and unknown types yield
 * nothing. */
static int full_event(air__decoder *d, const air__sse_event *ev,
                      const air__json *j, air__part_cb cb, void *data) {
  const char *t = ev->type.p;
  size_t tn = ev->type.n;
  int ti = air__json_get(j, 0, "type");
  if (air__json_is_str(j, ti)) t = air__json_raw(j, ti, &tn);
  bool bad = false;
  int rc = 0;
  if (IS(t, tn, "content_block_delta"))
    rc = on_block_delta(d, j, &bad, cb, data);
  else if (IS(t, tn, "content_block_start"))
    rc = on_block_start(d, j, &bad, cb, data);
  else if (IS(t, tn, "message_start"))
    rc = on_message_start(d, j, &bad, cb, data);
  else if (IS(t, tn, "message_delta"))
    rc = on_message_delta(d, j, &bad, cb, data);
  else if (IS(t, tn, "message_stop"))
    d->done = d->terminator = true;
  else if (IS(t, tn, "error"))
    rc = on_error(d, j, &bad, cb, data);
  if (bad) air__decoder_malformed(d, 0);
  return rc;
}

/* decode_event: see dialect.h and the notes at the top of this file. */
AIR__DECODE_EVENT_FUNCS(air__ant, event_data, fast_event, full_event)

/* ---- decoding: a whole body (jansson) -------------------------------------
 */

/* A tool_use block's input as compact JSON text in d->scratch ({} when it
 * has none; reals with 15 significant digits). */
static int input_text(air__decoder *d, const json_t *b) {
  const json_t *in = json_object_get(b, "input");
  air__buf_reset(&d->scratch);
  if (in == NULL) return air__buf_add(&d->scratch, LIT("{}"));
  return air__json_dump(in, JSON_COMPACT | JSON_REAL_PRECISION(15),
                        &d->scratch);
}

/* A content element at index i through the mapping: text and thinking
 * blocks, tool_use blocks (their input whole, as one delta); other blocks
 * yield nothing. */
static int body_block(air__decoder *d, const json_t *b, int i, air__part_cb cb,
                      void *data) {
  const char *type = json_string_value(json_object_get(b, "type"));
  size_t n, m;
  const char *s, *t;
  if (type == NULL) return 0;
  bool text = strcmp(type, "text") == 0;
  if (text || strcmp(type, "thinking") == 0) {
    s = air__json_sv(json_object_get(b, text ? "text" : "thinking"), &n);
    return text_block(d, i, text, s, n, cb, data);
  }
  if (strcmp(type, "tool_use") != 0) return 0;
  const char *tn = json_string_value(json_object_get(b, "name"));
  int rc;
  if (d->json_tool && tn != NULL && strcmp(tn, AIR__JSON_TOOL) == 0) {
    /* The JSON tool the request forced: its input is the answer. */
    json_block(d, i);
    if ((rc = input_text(d, b)) != 0) return rc;
    return emit_text(cb, data, AIR_PART_TEXT, i, d->scratch.p, d->scratch.n);
  }
  if (d->n_tools >= AIR__DECODER_MAX_TOOLS) return AIR_ETOOBIG;
  int tool;
  s = air__json_sv(json_object_get(b, "id"), &n);
  t = air__json_sv(json_object_get(b, "name"), &m);
  if ((rc = tool_block(d, i, s, n, t, m, &tool, cb, data)) != 0 ||
      (rc = input_text(d, b)) != 0)
    return rc;
  return emit_text(cb, data, AIR_PART_TOOL_DELTA, tool, d->scratch.p,
                   d->scratch.n);
}

/* A message object: "type": "message", "content" absent or an array. */
static bool is_body(const json_t *root) {
  const char *type = json_string_value(json_object_get(root, "type"));
  const json_t *content = json_object_get(root, "content");
  return type != NULL && strcmp(type, "message") == 0 &&
         (content == NULL || json_is_array(content));
}

/* A message's content, stop reason and usage through the mapping. */
static int body_parts(air__decoder *d, const json_t *root, air__part_cb cb,
                      void *data) {
  const json_t *content = json_object_get(root, "content");
  /* What carries meaning is checked before any part is handed over. */
  size_t i, id_n, model_n, sr_n;
  const json_t *b;
  const json_t *sr = json_object_get(root, "stop_reason");
  const char *raw = air__json_sv(sr, &sr_n);
  if (sr_n > AIR__MAX_FINISH_REASON_BYTES) d->fatal = AIR__OVER_FINISH;
  json_array_foreach(content, i, b) {
    const char *bt = json_string_value(json_object_get(b, "type"));
    if (bt != NULL && strcmp(bt, "tool_use") == 0 &&
        air__json_over(json_object_get(b, "name"), AIR__MAX_TOOL_NAME_BYTES))
      d->fatal = AIR__OVER_TOOL_NAME;
  }
  if (d->fatal != NULL) return AIR_EPARSE;
  const char *id = air__json_sv(json_object_get(root, "id"), &id_n);
  const char *model = air__json_sv(json_object_get(root, "model"), &model_n);
  int rc = emit_start(d, id, id_n, model, model_n, cb, data);
  json_array_foreach(content, i, b) {
    if (rc != 0) break;
    rc = body_block(d, b, i > MAX_BLOCK_INDEX ? MAX_BLOCK_INDEX : (int)i, cb,
                    data);
  }
  if (rc == 0 && json_is_string(sr)) rc = emit_finish(d, raw, sr_n, cb, data);
  const json_t *u = json_object_get(root, "usage");
  if (rc == 0 && json_is_object(u)) {
    d->input_tokens = air__sat_add(
        air__json_count(json_object_get(u, "input_tokens")),
        air__sat_add(
            air__json_count(json_object_get(u, "cache_creation_input_tokens")),
            air__json_count(json_object_get(u, "cache_read_input_tokens"))));
    d->output_tokens = air__json_count(json_object_get(u, "output_tokens"));
    rc = emit_usage(d, cb, data);
  }
  return rc;
}

int air__ant_decode_body(air__decoder *d, const char *body, size_t n,
                         air__part_cb cb, void *data) {
  return air__json_decode_body(d, body, n, 0, is_body, body_parts, false, cb,
                               data);
}
