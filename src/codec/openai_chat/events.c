/*
 * The OpenAI chat-completions stream (chat.completion.chunk events) and
 * chat.completion bodies decoded into parts (docs/design.md §5).
 *
 * Hot path (decode_event): the plain text chunk by a fast path without
 * tokens (below decode_chunk), everything else by json.c tokens; appends
 * to bounded buffers. Nothing is allocated per event once the decoder's
 * scratch buffers have grown to the largest escaped event seen and the
 * kept chunk shape. decode_body (cold) uses jansson.
 *
 * Choices where the API is silent: an event whose data is empty or white
 * space is a keep-alive (nothing, not malformed). A chunk with no choices
 * and no usage (Azure's prompt_filter_results chunk, id "") yields nothing,
 * not even START. An event is checked whole before any of its parts is
 * handed over, so a malformed event (not a JSON object; choices, delta,
 * finish_reason, tool_calls or usage of the wrong type; a tool index
 * outside 0..AIR__DECODER_MAX_TOOLS-1) yields nothing at all. An empty
 * finish_reason ("") is no finish. A tool call piece with neither id, name
 * nor arguments yields nothing; a second id/name for a tool index that
 * already had its TOOL_START yields no second TOOL_START. A finish_reason
 * or tool name over its limit (as written) makes the event fatal
 * (d->fatal, dialect.h): it yields nothing and the attempt fails.
 * "reasoning_content" wins over "reasoning" when both are present.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec_decode.h"
#include "codec_json.h"
#include "limits.h"
#include "openai_chat.h"

void air__oai_decoder_init(air__decoder *d) {
  air__decoder_init_for(d, AIR_DIALECT_OPENAI);
}

/* ---- the mapping: a message's pieces into parts ---------------------------
 *
 * A chunk's delta and a body's message carry the same pieces (START's id
 * and model, reasoning, content and refusal text, tool calls, the finish,
 * the usage); both decoders hand them over through these, in that order.
 * A body is one whole answer: its START and each of its calls' TOOL_START
 * come whatever the decoder saw before.
 */

/* A tool call piece at tool index idx: TOOL_START when it has an id or a
 * name (once: only the first time the index has one), TOOL_DELTA for
 * arguments. */
static int emit_tool(air__decoder *d, int idx, bool once, const char *id,
                     size_t id_n, const char *name, size_t name_n,
                     const char *args, size_t args_n, air__part_cb cb,
                     void *data) {
  int rc;
  if ((id_n > 0 || name_n > 0) && !(once && d->block_kind[idx])) {
    d->block_kind[idx] = 1;
    d->n_tools++;
    if ((rc = air__emit_tool_start(idx, id, id_n, name, name_n, cb, data)))
      return rc;
  }
  return air__emit_text(AIR_PART_TOOL_DELTA, idx, args, args_n, cb, data);
}

/* The finish_reason: nothing when empty. */
static int emit_finish(air__decoder *d, const char *raw, size_t n,
                       air__part_cb cb, void *data) {
  if (n == 0) return 0;
  air_part p = {.kind = AIR_PART_FINISH,
                .finish = map_finish(raw, n),
                .finish_raw = raw,
                .finish_raw_len = n};
  d->finished = true;
  EMIT(p);
  return 0;
}

/* ---- decoding: a stream chunk (json.c tokens) ------------------------------
 */

/* An "error" member inside a 200 stream: one ERROR part. */
static int decode_error(air__decoder *d, const air__json *j, int e,
                        air__part_cb cb, void *data) {
  air_part p = {.kind = AIR_PART_ERROR};
  d->error_event = true;
  if (air__json_is_obj(j, e)) {
    int type = air__json_get(j, e, "type");
    int code = air__json_get(j, e, "code");
    air__event_str(d, j, type, &p.name, &p.name_len);
    if (p.name_len == 0 && air__json_is_str(j, code))
      air__event_str(d, j, code, &p.name, &p.name_len);
    else if (p.name_len == 0 && !air__json_is_null(j, code) &&
             !air__json_is_obj(j, code) && !air__json_is_arr(j, code))
      p.name = air__json_raw(j, code, &p.name_len);
    air__event_str(d, j, air__json_get(j, e, "message"), &p.text, &p.text_len);
  } else {
    air__event_str(d, j, e, &p.text, &p.text_len);
  }
  EMIT(p);
  return 0;
}

/* The tool index of the tool call at token t, the k-th of its array: its
 * "index", or k when it has none; -1 when out of range or not an integer. */
static int tool_index(const air__json *j, int t, int k) {
  int it = air__json_get(j, t, "index");
  if (it < 0) return k < AIR__DECODER_MAX_TOOLS ? k : -1;
  int64_t v;
  if (!air__json_int(j, it, &v) || v < 0 || v >= AIR__DECODER_MAX_TOOLS)
    return -1;
  return (int)v;
}

/* True when token i is absent, null or of the wanted kind. */
static bool opt_obj(const air__json *j, int i) {
  return air__json_is_null(j, i) || air__json_is_obj(j, i);
}
static bool opt_str(const air__json *j, int i) {
  return air__json_is_null(j, i) || air__json_is_str(j, i);
}

/*
 * One chat.completion.chunk (an object at token 0) into parts. Everything
 * that could make the event malformed is checked before the first part is
 * handed over.
 */
static int decode_chunk(air__decoder *d, const air__sse_event *ev,
                        const air__json *j, air__part_cb cb, void *data) {
  (void)ev;
  int e = air__json_get(j, 0, "error");
  if (!air__json_is_null(j, e)) return decode_error(d, j, e, cb, data);

  int choices = air__json_get(j, 0, "choices");
  int usage = air__json_get(j, 0, "usage");
  if (!opt_obj(j, usage) ||
      !(air__json_is_null(j, choices) || air__json_is_arr(j, choices)))
    goto malformed;
  int n_choices = air__json_is_arr(j, choices) ? j->tok[choices].size : 0;
  bool has_usage = air__json_is_obj(j, usage);
  if (n_choices == 0 && !has_usage) return 0;

  /* Choice index 0: the element whose "index" is 0 (or that has none). */
  int choice = -1;
  for (int k = 0, c = choices + 1; k < n_choices;
       k++, c = air__json_skip(j, c)) {
    if (!air__json_is_obj(j, c)) goto malformed;
    int it = air__json_get(j, c, "index");
    int64_t v;
    if (choice < 0 && (it < 0 || (air__json_int(j, it, &v) && v == 0)))
      choice = c;
  }
  int delta = air__json_get(j, choice, "delta");
  int finish = air__json_get(j, choice, "finish_reason");
  int tools = air__json_get(j, delta, "tool_calls");
  if (!opt_obj(j, delta) || !opt_str(j, finish) ||
      !(air__json_is_null(j, tools) || air__json_is_arr(j, tools)))
    goto malformed;
  int n_tools = air__json_is_arr(j, tools) ? j->tok[tools].size : 0;
  for (int k = 0, t = tools + 1; k < n_tools; k++, t = air__json_skip(j, t)) {
    int fn = air__json_get(j, t, "function");
    if (!air__json_is_obj(j, t) || tool_index(j, t, k) < 0 || !opt_obj(j, fn))
      goto malformed;
    if (air__event_over(j, air__json_get(j, fn, "name"),
                        AIR__MAX_TOOL_NAME_BYTES)) {
      d->fatal = AIR__OVER_TOOL_NAME;
      return 0;
    }
  }
  if (air__event_over(j, finish, AIR__MAX_FINISH_REASON_BYTES)) {
    d->fatal = AIR__OVER_FINISH;
    return 0;
  }

  /* Checked: from here on the event yields its parts. */
  const char *p, *q;
  size_t pn, qn;
  int rc;
  if (!d->started) {
    air__event_str(d, j, air__json_get(j, 0, "id"), &p, &pn);
    air__event_str(d, j, air__json_get(j, 0, "model"), &q, &qn);
    if ((rc = air__emit_start(d, p, pn, q, qn, cb, data)) != 0) return rc;
  }
  if (air__json_is_obj(j, delta)) {
    static const air_part_kind kinds[] = {AIR_PART_REASONING, AIR_PART_TEXT,
                                          AIR_PART_REFUSAL};
    int toks[3];
    toks[0] = air__json_get(j, delta, "reasoning_content");
    if (!air__json_is_str(j, toks[0]))
      toks[0] = air__json_get(j, delta, "reasoning");
    toks[1] = air__json_get(j, delta, "content");
    toks[2] = air__json_get(j, delta, "refusal");
    for (int k = 0; k < 3; k++) {
      air__event_str(d, j, toks[k], &p, &pn);
      if ((rc = air__emit_text(kinds[k], 0, p, pn, cb, data)) != 0) return rc;
    }
  }
  for (int k = 0, t = tools + 1; k < n_tools; k++, t = air__json_skip(j, t)) {
    int fn = air__json_get(j, t, "function");
    const char *a;
    size_t an;
    air__event_str(d, j, air__json_get(j, t, "id"), &p, &pn);
    air__event_str(d, j, air__json_get(j, fn, "name"), &q, &qn);
    air__event_str(d, j, air__json_get(j, fn, "arguments"), &a, &an);
    rc = emit_tool(d, tool_index(j, t, k), true, p, pn, q, qn, a, an, cb, data);
    if (rc != 0) return rc;
  }
  air__event_str(d, j, finish, &p, &pn);
  if ((rc = emit_finish(d, p, pn, cb, data)) != 0) return rc;
  if (!has_usage) return 0;
  d->usage_only = n_choices == 0;
  return air__emit_usage(
      d, air__event_count(j, air__json_get(j, usage, "prompt_tokens")),
      air__event_count(j, air__json_get(j, usage, "completion_tokens")), cb,
      data);

malformed:
  air__decoder_malformed(d, 0);
  return 0;
}

/* ---- the fast path: the common chunk without tokens
 * ------------------------------------------------
 *
 * Most chunks are one shape: a single choice (index 0) whose delta holds
 * only text, with no finish or a plain one, no usage, no error. fast_chunk
 * recognises that shape in one forward scan and yields what decode_chunk
 * would, so air__json_parse and the look-ups are skipped. It takes an event
 * only when sure: every byte valid JSON by the tokenizer's grammar, no key
 * decode_chunk reads given twice, every value it does not read without
 * members, and each value it reads of a type it handles: "error", "usage",
 * "refusal", "reasoning_content", "reasoning" and "tool_calls" null; the
 * choice's "index" exactly 0 (or absent); "delta" an object; "content" a
 * string (escapes decoded as air__event_str would) or null; "finish_reason"
 * null or a string without escapes; "id" and "model", read for START, a string
 * without escapes or a value without members. Anything else (n > 1 choices,
 * tool calls, usage, errors, nesting, too many members) goes to the full
 * decoder untouched: a fallback costs what decoding cost before.
 *
 * The chunks of one stream mostly differ only in their text, so even that
 * scan is mostly skipped: a chunk fast_chunk took after START, with text
 * and no finish, is kept as its shape, the bytes before its text's opening
 * quote and from its closing quote on (d->scratch2, which nothing else of
 * this decoder uses: its length, those bytes). A later chunk made of the
 * same bytes around one valid string (scanned: it must end exactly where
 * the kept bytes resume) tokenizes as the kept one did, token for token,
 * with only that string changed, so fast_chunk would take it too and hand
 * over only that text: it is decoded from the two comparisons and one
 * string scan. Shapes over AIR__FAST_SHAPE_MAX_BYTES bytes are not kept.
 */

/* A member the fast path reads (json.h). */
typedef air__json_leaf fast_val;

/* What fast_chunk found. */
typedef struct fast_scan {
  fast_val id, model, choices, index, delta, content, finish;
  unsigned members;
} fast_scan;

static bool is_null(const fast_val *v) {
  return !v->str && v->n == 4 && memcmp(v->p, "null", 4) == 0;
}

/* A string or null into v (once). */
static bool fast_str_or_null(const char **pp, const char *e, fast_val *v) {
  return air__json_scan_once(pp, e, v) && (v->str || is_null(v));
}

/* null at *pp; *pp past it. */
static bool fast_null(const char **pp, const char *e) {
  if (e - *pp < 4 || memcmp(*pp, "null", 4) != 0) return false;
  *pp += 4;
  return true;
}

static bool has_escape(const fast_val *v) {
  return v->str && memchr(v->p, '\\', v->n) != NULL;
}

/* A member of the choice's delta. */
static bool delta_member(void *ctx, const char *k, size_t kn, const char **pp,
                         const char *e) {
  fast_scan *f = ctx;
  if (IS(k, kn, "content")) return fast_str_or_null(pp, e, &f->content);
  if (IS(k, kn, "refusal") || IS(k, kn, "reasoning_content") ||
      IS(k, kn, "reasoning") || IS(k, kn, "tool_calls"))
    return fast_null(pp, e);
  return air__json_skip_leaf(pp, e);
}

/* A member of the one choice. */
static bool choice_member(void *ctx, const char *k, size_t kn, const char **pp,
                          const char *e) {
  fast_scan *f = ctx;
  if (IS(k, kn, "index"))
    return air__json_scan_once(pp, e, &f->index) && !f->index.str &&
           f->index.n == 1 && f->index.p[0] == '0';
  if (IS(k, kn, "delta")) {
    bool ok =
        !f->delta.seen && air__scan_object(pp, e, &f->members, delta_member, f);
    f->delta.seen = true;
    return ok;
  }
  if (IS(k, kn, "finish_reason"))
    return fast_str_or_null(pp, e, &f->finish) && !has_escape(&f->finish) &&
           f->finish.n <= AIR__MAX_FINISH_REASON_BYTES;
  return air__json_skip_leaf(pp, e);
}

/* A member of the chunk: "choices" is [ one object ]. */
static bool chunk_member(void *ctx, const char *k, size_t kn, const char **pp,
                         const char *e) {
  fast_scan *f = ctx;
  if (IS(k, kn, "choices")) {
    if (f->choices.seen) return false;
    f->choices.seen = true;
    return air__json_scan_open(pp, e, '[') == 1 &&
           air__scan_object(pp, e, &f->members, choice_member, f) &&
           air__json_scan_next(pp, e, ']') == 0;
  }
  if (IS(k, kn, "error") || IS(k, kn, "usage")) return fast_null(pp, e);
  if (IS(k, kn, "id")) return air__json_scan_once(pp, e, &f->id);
  if (IS(k, kn, "model")) return air__json_scan_once(pp, e, &f->model);
  return air__json_skip_leaf(pp, e);
}

/* A string member read for START: borrowed, or "" when absent or not a
 * string (what air__event_str gives; fast_chunk refused one with escapes). */
static void fast_str(const fast_val *v, const char **p, size_t *n) {
  *p = v->str ? v->p : "";
  *n = v->str ? v->n : 0;
}

/* Keeps the shape of the chunk s, n around its text's raw bytes t, tn
 * (see above); a shape too big, or that cannot be stored, leaves none. */
static void keep_shape(air__decoder *d, const char *s, size_t n, const char *t,
                       size_t tn) {
  air__buf *b = &d->scratch2;
  size_t pre = (size_t)(t - s);
  air__buf_reset(b);
  if (n - tn + sizeof(pre) > AIR__FAST_SHAPE_MAX_BYTES ||
      air__buf_add(b, &pre, sizeof(pre)) != 0 || air__buf_add(b, s, pre) != 0 ||
      air__buf_add(b, t + tn, n - pre - tn) != 0)
    b->n = 0;
}

/*
 * A chunk of the kept shape (see above): 1 when s, n is one (its text
 * handed over, cb's result in *rc), 0 when it is not (nothing changed).
 */
static int same_shape(air__decoder *d, const char *s, size_t n, air__part_cb cb,
                      void *data, int *rc) {
  const air__buf *b = &d->scratch2;
  size_t pre;
  if (b->n == 0 || !d->started) return 0;
  memcpy(&pre, b->p, sizeof(pre));
  size_t post = b->n - sizeof(pre) - pre;
  const char *kept = b->p + sizeof(pre);
  if (n < pre + post || memcmp(s, kept, pre) != 0 ||
      memcmp(s + n - post, kept + pre, post) != 0 ||
      air__json_scan_str(s + pre, s + n) != s + n - post)
    return 0;
  const char *text = s + pre;
  size_t text_n = n - post - pre;
  if (!air__event_unescape(d, &text, &text_n)) return 0;
  *rc = air__emit_text(AIR_PART_TEXT, 0, text, text_n, cb, data);
  return 1;
}

/*
 * The fast path (see above) on the trimmed data s, n: 1 when it decoded the
 * event (cb's first non-zero in *rc), 0 when it changed nothing and the
 * full decoder must run. d->scratch is as decode_event left it (reset,
 * sized for the event's escapes).
 */
static int fast_chunk(air__decoder *d, const char *s, size_t n, air__part_cb cb,
                      void *data, int *rc) {
  const char *p = s, *e = s + n;
  fast_scan f;
  memset(&f, 0, sizeof(f));
  bool whole = air__scan_object(&p, e, &f.members, chunk_member, &f);
  if (!whole || p != e || !f.choices.seen) return 0;
  if (!d->started && (has_escape(&f.id) || has_escape(&f.model))) return 0;

  /* Sure: the parts, as decode_chunk gives them. The text is decoded
   * first, so that nothing is handed over when that fails. */
  const char *text = f.content.p;
  size_t text_n = f.content.str ? f.content.n : 0;
  if (!air__event_unescape(d, &text, &text_n)) return 0;
  if (d->started && f.content.str && !(f.finish.str && f.finish.n > 0))
    keep_shape(d, s, n, f.content.p, f.content.n);
  const char *id, *model;
  size_t id_n, model_n;
  fast_str(&f.id, &id, &id_n);
  fast_str(&f.model, &model, &model_n);
  if ((*rc = air__emit_start(d, id, id_n, model, model_n, cb, data)) == 0 &&
      (*rc = air__emit_text(AIR_PART_TEXT, 0, text, text_n, cb, data)) == 0 &&
      f.finish.str)
    *rc = emit_finish(d, f.finish.p, f.finish.n, cb, data);
  return 1;
}

/* The fast path on the trimmed data: a chunk of the kept shape, else one
 * fast_chunk takes (see above). */
static int fast_event(air__decoder *d, const char *s, size_t n, air__part_cb cb,
                      void *data, int *rc) {
  return same_shape(d, s, n, cb, data, rc) || fast_chunk(d, s, n, cb, data, rc);
}

/* decode_event: see dialect.h and the notes at the top of this file. */
AIR__DECODE_EVENT_FUNCS(air__oai, air__openai_event_data, fast_event,
                        decode_chunk)

/* ---- decoding: a whole body (jansson) -------------------------------------
 */

/* A chat.completion's choice 0 and its message through the mapping. */
static int body_parts(air__decoder *d, const json_t *root, air__part_cb cb,
                      void *data) {
  json_t *choices = json_object_get(root, "choices");
  json_t *choice = NULL;
  size_t i, n;
  json_t *c;
  json_array_foreach(choices, i, c) {
    json_t *idx = json_object_get(c, "index");
    if (idx == NULL || (json_is_integer(idx) && json_integer_value(idx) == 0)) {
      choice = c;
      break;
    }
  }
  json_t *msg = json_object_get(choice, "message");
  json_t *calls = json_object_get(msg, "tool_calls");
  /* What carries meaning is checked before any part is handed over. */
  if (air__json_over(json_object_get(choice, "finish_reason"),
                     AIR__MAX_FINISH_REASON_BYTES))
    d->fatal = AIR__OVER_FINISH;
  json_array_foreach(calls, i, c) {
    if (air__json_over(json_object_get(json_object_get(c, "function"), "name"),
                       AIR__MAX_TOOL_NAME_BYTES))
      d->fatal = AIR__OVER_TOOL_NAME;
  }
  if (d->fatal != NULL) return AIR_EPARSE;

  const char *p, *q;
  size_t pn, qn;
  int rc = air__json_body_start(d, root, cb, data);
  json_t *reasoning = json_object_get(msg, "reasoning_content");
  if (!json_is_string(reasoning)) reasoning = json_object_get(msg, "reasoning");
  p = air__json_sv(reasoning, &n);
  if (rc == 0) rc = air__emit_text(AIR_PART_REASONING, 0, p, n, cb, data);
  json_t *content = json_object_get(msg, "content");
  if (!json_is_array(content)) {
    p = air__json_sv(content, &n);
    if (rc == 0) rc = air__emit_text(AIR_PART_TEXT, 0, p, n, cb, data);
  }
  json_array_foreach(content, i, c) {
    const char *type = json_string_value(json_object_get(c, "type"));
    if (rc != 0 || type == NULL || strcmp(type, "text") != 0) continue;
    p = air__json_sv(json_object_get(c, "text"), &n);
    rc = air__emit_text(AIR_PART_TEXT, 0, p, n, cb, data);
  }
  p = air__json_sv(json_object_get(msg, "refusal"), &n);
  if (rc == 0) rc = air__emit_text(AIR_PART_REFUSAL, 0, p, n, cb, data);
  json_array_foreach(calls, i, c) {
    if (rc != 0) break;
    if (i >= AIR__DECODER_MAX_TOOLS) return AIR_ETOOBIG;
    json_t *fn = json_object_get(c, "function");
    const char *a;
    size_t an;
    p = air__json_sv(json_object_get(c, "id"), &pn);
    q = air__json_sv(json_object_get(fn, "name"), &qn);
    a = air__json_sv(json_object_get(fn, "arguments"), &an);
    rc = emit_tool(d, (int)i, false, p, pn, q, qn, a, an, cb, data);
  }
  p = air__json_sv(json_object_get(choice, "finish_reason"), &n);
  if (rc == 0) rc = emit_finish(d, p, n, cb, data);
  if (rc == 0)
    rc = air__json_body_usage(d, json_object_get(root, "usage"),
                              "prompt_tokens", "completion_tokens", cb, data);
  return rc;
}

/* A chat.completion object: "object" absent or "chat.completion",
 * "choices" an array. */
static bool is_body(const json_t *root) {
  const json_t *obj = json_object_get(root, "object");
  return json_is_object(root) &&
         json_is_array(json_object_get(root, "choices")) &&
         (obj == NULL ||
          (json_is_string(obj) &&
           strcmp(json_string_value(obj), "chat.completion") == 0));
}

/* decode_body: a chat.completion object; anything else is AIR_EPARSE. */
int air__oai_decode_body(air__decoder *d, const char *body, size_t n,
                         air__part_cb cb, void *data) {
  return air__json_decode_body(d, body, n, JSON_ALLOW_NUL, is_body, body_parts,
                               true, cb, data);
}
