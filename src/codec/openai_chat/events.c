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

#include "codec_json.h"
#include "json.h"
#include "limits.h"
#include "openai_chat.h"

void air__oai_decoder_init(air__decoder *d) {
  memset(d, 0, sizeof(*d));
  d->api = AIR_DIALECT_OPENAI;
  air__buf_init(&d->scratch, AIR__MAX_SSE_EVENT_BYTES);
  air__buf_init(&d->scratch2, AIR__MAX_SSE_EVENT_BYTES);
}

/*
 * String token tok of the current event: borrowed from the event when it
 * holds no escape, else decoded into d->scratch. decode_event sized scratch
 * for the whole event before the first decode (a decoded string is never
 * longer than its escaped form), so scratch never moves during an event and
 * earlier pointers stay valid. A missing or non-string token is "".
 */
static void ev_str(air__decoder *d, const air__json *j, int tok, const char **p,
                   size_t *n) {
  if (air__json_plain(j, tok, p, n)) return;
  *p = "";
  *n = 0;
  if (!air__json_is_str(j, tok)) return;
  size_t off = d->scratch.n;
  if (air__json_str(j, tok, &d->scratch) != 0) {
    rollback(&d->scratch, off);
    return;
  }
  *p = d->scratch.p + off;
  *n = d->scratch.n - off;
}

/* A token count: a non-negative integer, else 0. */
static uint64_t count_of(const air__json *j, int tok) {
  int64_t v;
  return air__json_int(j, tok, &v) && v > 0 ? (uint64_t)v : 0;
}

#define EMIT(part)              \
  do {                          \
    int r_ = cb(data, &(part)); \
    if (r_ != 0) return r_;     \
  } while (0)

/* An "error" member inside a 200 stream: one ERROR part. */
static int decode_error(air__decoder *d, const air__json *j, int e,
                        air__part_cb cb, void *data) {
  air_part p = {.kind = AIR_PART_ERROR};
  d->error_event = true;
  if (air__json_is_obj(j, e)) {
    int type = air__json_get(j, e, "type");
    int code = air__json_get(j, e, "code");
    ev_str(d, j, type, &p.name, &p.name_len);
    if (p.name_len == 0 && air__json_is_str(j, code))
      ev_str(d, j, code, &p.name, &p.name_len);
    else if (p.name_len == 0 && !air__json_is_null(j, code) &&
             !air__json_is_obj(j, code) && !air__json_is_arr(j, code))
      p.name = air__json_raw(j, code, &p.name_len);
    ev_str(d, j, air__json_get(j, e, "message"), &p.text, &p.text_len);
  } else {
    ev_str(d, j, e, &p.text, &p.text_len);
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

/* True when token i is a string whose bytes as written (escapes
 * included) are over max: a finish reason or tool name that long makes
 * the event fatal (dialect.h, "identifiers"). */
static bool raw_over(const air__json *j, int i, size_t max) {
  size_t n = 0;
  if (air__json_is_str(j, i)) air__json_raw(j, i, &n);
  return n > max;
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
static int decode_chunk(air__decoder *d, const air__json *j, air__part_cb cb,
                        void *data) {
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
    if (raw_over(j, air__json_get(j, fn, "name"), AIR__MAX_TOOL_NAME_BYTES)) {
      d->fatal = AIR__OVER_TOOL_NAME;
      return 0;
    }
  }
  if (raw_over(j, finish, AIR__MAX_FINISH_REASON_BYTES)) {
    d->fatal = AIR__OVER_FINISH;
    return 0;
  }

  /* Checked: from here on the event yields its parts. */
  if (!d->started) {
    air_part p = {.kind = AIR_PART_START};
    ev_str(d, j, air__json_get(j, 0, "id"), &p.id, &p.id_len);
    ev_str(d, j, air__json_get(j, 0, "model"), &p.name, &p.name_len);
    d->started = true;
    EMIT(p);
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
      air_part p = {.kind = kinds[k]};
      ev_str(d, j, toks[k], &p.text, &p.text_len);
      if (p.text_len > 0) EMIT(p);
    }
  }
  for (int k = 0, t = tools + 1; k < n_tools; k++, t = air__json_skip(j, t)) {
    int idx = tool_index(j, t, k);
    int fn = air__json_get(j, t, "function");
    air_part p = {.kind = AIR_PART_TOOL_START, .index = idx};
    ev_str(d, j, air__json_get(j, t, "id"), &p.id, &p.id_len);
    ev_str(d, j, air__json_get(j, fn, "name"), &p.name, &p.name_len);
    if ((p.id_len > 0 || p.name_len > 0) && !d->block_kind[idx]) {
      d->block_kind[idx] = 1;
      d->n_tools++;
      EMIT(p);
    }
    air_part a = {.kind = AIR_PART_TOOL_DELTA, .index = idx};
    ev_str(d, j, air__json_get(j, fn, "arguments"), &a.text, &a.text_len);
    if (a.text_len > 0) EMIT(a);
  }
  if (air__json_is_str(j, finish)) {
    air_part p = {.kind = AIR_PART_FINISH};
    ev_str(d, j, finish, &p.finish_raw, &p.finish_raw_len);
    if (p.finish_raw_len > 0) {
      p.finish = map_finish(p.finish_raw, p.finish_raw_len);
      d->finished = true;
      EMIT(p);
    }
  }
  if (has_usage) {
    air_part p = {.kind = AIR_PART_USAGE};
    p.input_tokens = count_of(j, air__json_get(j, usage, "prompt_tokens"));
    p.output_tokens = count_of(j, air__json_get(j, usage, "completion_tokens"));
    d->input_tokens = p.input_tokens;
    d->output_tokens = p.output_tokens;
    d->usage_only = n_choices == 0;
    EMIT(p);
  }
  return 0;

malformed:
  air__decoder_note_oom(d, 0); /* out of memory is no malformed event */
  if (!d->oom) d->malformed++;
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
 * string (escapes decoded as ev_str would) or null; "finish_reason" null or
 * a string without escapes; "id" and "model", read for START, a string
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

#define KEY(k, kn, lit) \
  ((kn) == sizeof(lit) - 1 && memcmp((k), (lit), sizeof(lit) - 1) == 0)

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

/* The key of the next member of an object, *pp at its value; counts the
 * members. */
static bool fast_key(fast_scan *f, const char **pp, const char *e,
                     const char **k, size_t *kn) {
  return ++f->members <= AIR__JSON_SCAN_MAX_MEMBERS &&
         air__json_scan_key(pp, e, k, kn);
}

static bool has_escape(const fast_val *v) {
  return v->str && memchr(v->p, '\\', v->n) != NULL;
}

static bool fast_delta(fast_scan *f, const char **pp, const char *e) {
  int more = air__json_scan_open(pp, e, '{');
  while (more > 0) {
    const char *k;
    size_t kn;
    if (!fast_key(f, pp, e, &k, &kn)) return false;
    bool ok;
    if (KEY(k, kn, "content"))
      ok = fast_str_or_null(pp, e, &f->content);
    else if (KEY(k, kn, "refusal") || KEY(k, kn, "reasoning_content") ||
             KEY(k, kn, "reasoning") || KEY(k, kn, "tool_calls"))
      ok = fast_null(pp, e);
    else
      ok = air__json_skip_leaf(pp, e);
    if (!ok) return false;
    more = air__json_scan_next(pp, e, '}');
  }
  return more == 0;
}

/* "choices": [ one object ]. */
static bool fast_choices(fast_scan *f, const char **pp, const char *e) {
  if (f->choices.seen) return false;
  f->choices.seen = true;
  if (air__json_scan_open(pp, e, '[') != 1) return false;
  int more = air__json_scan_open(pp, e, '{');
  while (more > 0) {
    const char *k;
    size_t kn;
    if (!fast_key(f, pp, e, &k, &kn)) return false;
    bool ok;
    if (KEY(k, kn, "index")) {
      ok = air__json_scan_once(pp, e, &f->index) && !f->index.str &&
           f->index.n == 1 && f->index.p[0] == '0';
    } else if (KEY(k, kn, "delta")) {
      ok = !f->delta.seen && fast_delta(f, pp, e);
      f->delta.seen = true;
    } else if (KEY(k, kn, "finish_reason")) {
      ok = fast_str_or_null(pp, e, &f->finish) && !has_escape(&f->finish) &&
           f->finish.n <= AIR__MAX_FINISH_REASON_BYTES;
    } else {
      ok = air__json_skip_leaf(pp, e);
    }
    if (!ok) return false;
    more = air__json_scan_next(pp, e, '}');
  }
  return more == 0 && air__json_scan_next(pp, e, ']') == 0;
}

/* A string member read for START: borrowed, or "" when absent or not a
 * string (what ev_str gives; fast_chunk refused one with escapes). */
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
  if (memchr(text, '\\', text_n) != NULL) {
    size_t off = d->scratch.n;
    if (air__json_unescape(text, text_n, &d->scratch) != 0) {
      rollback(&d->scratch, off);
      return 0;
    }
    text = d->scratch.p + off;
    text_n = d->scratch.n - off;
  }
  *rc = 0;
  if (text_n > 0) {
    air_part t = {.kind = AIR_PART_TEXT, .text = text, .text_len = text_n};
    *rc = cb(data, &t);
  }
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
  int more = air__json_scan_open(&p, e, '{');
  while (more > 0) {
    const char *k;
    size_t kn;
    if (!fast_key(&f, &p, e, &k, &kn)) return 0;
    bool ok;
    if (KEY(k, kn, "choices"))
      ok = fast_choices(&f, &p, e);
    else if (KEY(k, kn, "error") || KEY(k, kn, "usage"))
      ok = fast_null(&p, e);
    else if (KEY(k, kn, "id"))
      ok = air__json_scan_once(&p, e, &f.id);
    else if (KEY(k, kn, "model"))
      ok = air__json_scan_once(&p, e, &f.model);
    else
      ok = air__json_skip_leaf(&p, e);
    if (!ok) return 0;
    more = air__json_scan_next(&p, e, '}');
  }
  if (more != 0 || p != e || !f.choices.seen) return 0;
  if (!d->started && (has_escape(&f.id) || has_escape(&f.model))) return 0;

  /* Sure: the parts, as decode_chunk gives them. The text is decoded
   * first, so that nothing is handed over when that fails. */
  const char *text = f.content.p;
  size_t text_n = f.content.str ? f.content.n : 0;
  if (has_escape(&f.content)) {
    size_t off = d->scratch.n;
    if (air__json_unescape(text, text_n, &d->scratch) != 0) {
      rollback(&d->scratch, off);
      return 0;
    }
    text = d->scratch.p + off;
    text_n = d->scratch.n - off;
  }
  if (d->started && f.content.str && !(f.finish.str && f.finish.n > 0))
    keep_shape(d, s, n, f.content.p, f.content.n);
  *rc = 0;
  if (!d->started) {
    air_part st = {.kind = AIR_PART_START};
    fast_str(&f.id, &st.id, &st.id_len);
    fast_str(&f.model, &st.name, &st.name_len);
    d->started = true;
    if ((*rc = cb(data, &st)) != 0) return 1;
  }
  if (text_n > 0) {
    air_part t = {.kind = AIR_PART_TEXT, .text = text, .text_len = text_n};
    if ((*rc = cb(data, &t)) != 0) return 1;
  }
  if (f.finish.str && f.finish.n > 0) {
    air_part fin = {.kind = AIR_PART_FINISH,
                    .finish_raw = f.finish.p,
                    .finish_raw_len = f.finish.n};
    fin.finish = map_finish(fin.finish_raw, fin.finish_raw_len);
    d->finished = true;
    *rc = cb(data, &fin);
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
  /* Size scratch for every string of the event at once (see ev_str). */
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
  if (fast && (same_shape(d, s, n, cb, data, &rc) ||
               fast_chunk(d, s, n, cb, data, &rc))) {
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
  rc = decode_chunk(d, &j, cb, data);
  air__json_cleanup(&j);
  return rc;
}

/* decode_event: see dialect.h and the notes at the top of this file. */
int air__oai_decode_event(air__decoder *d, const air__sse_event *ev,
                          air__part_cb cb, void *data) {
  bool took;
  return decode_event(d, ev, cb, data, true, &took);
}

int air__oai_decode_event_full(air__decoder *d, const air__sse_event *ev,
                               air__part_cb cb, void *data) {
  bool took;
  return decode_event(d, ev, cb, data, false, &took);
}

int air__oai_decode_event_fast(air__decoder *d, const air__sse_event *ev,
                               air__part_cb cb, void *data, bool *took) {
  return decode_event(d, ev, cb, data, true, took);
}

/* ---- decoding: a whole body
 * ------------------------------------------------------- */

/* A jansson string as a part field ("" for anything else). */
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
  json_t *choices = json_object_get(root, "choices");
  json_t *choice = NULL;
  size_t i;
  json_t *c;
  json_array_foreach(choices, i, c) {
    json_t *idx = json_object_get(c, "index");
    if (idx == NULL || (json_is_integer(idx) && json_integer_value(idx) == 0)) {
      choice = c;
      break;
    }
  }
  json_t *msg = json_object_get(choice, "message");
  /* What carries meaning is checked before any part is handed over. */
  if (over(json_object_get(choice, "finish_reason"),
           AIR__MAX_FINISH_REASON_BYTES))
    d->fatal = AIR__OVER_FINISH;
  json_array_foreach(json_object_get(msg, "tool_calls"), i, c) {
    if (over(json_object_get(json_object_get(c, "function"), "name"),
             AIR__MAX_TOOL_NAME_BYTES))
      d->fatal = AIR__OVER_TOOL_NAME;
  }
  if (d->fatal != NULL) return AIR_EPARSE;

  air_part s = {.kind = AIR_PART_START};
  s.id = jv(json_object_get(root, "id"), &s.id_len);
  s.name = jv(json_object_get(root, "model"), &s.name_len);
  d->started = true;
  EMIT(s);

  json_t *reasoning = json_object_get(msg, "reasoning_content");
  if (!json_is_string(reasoning)) reasoning = json_object_get(msg, "reasoning");
  air_part p = {.kind = AIR_PART_REASONING};
  p.text = jv(reasoning, &p.text_len);
  if (p.text_len > 0) EMIT(p);

  json_t *content = json_object_get(msg, "content");
  if (json_is_array(content)) {
    json_t *part;
    json_array_foreach(content, i, part) {
      air_part t = {.kind = AIR_PART_TEXT};
      if (json_is_string(json_object_get(part, "type")) &&
          strcmp(json_string_value(json_object_get(part, "type")), "text") == 0)
        t.text = jv(json_object_get(part, "text"), &t.text_len);
      if (t.text_len > 0) EMIT(t);
    }
  } else {
    air_part t = {.kind = AIR_PART_TEXT};
    t.text = jv(content, &t.text_len);
    if (t.text_len > 0) EMIT(t);
  }
  air_part r = {.kind = AIR_PART_REFUSAL};
  r.text = jv(json_object_get(msg, "refusal"), &r.text_len);
  if (r.text_len > 0) EMIT(r);

  json_t *calls = json_object_get(msg, "tool_calls");
  json_array_foreach(calls, i, c) {
    if (i >= AIR__DECODER_MAX_TOOLS) return AIR_ETOOBIG;
    json_t *fn = json_object_get(c, "function");
    air_part t = {.kind = AIR_PART_TOOL_START, .index = (int)i};
    t.id = jv(json_object_get(c, "id"), &t.id_len);
    t.name = jv(json_object_get(fn, "name"), &t.name_len);
    if (t.id_len > 0 || t.name_len > 0) {
      d->block_kind[i] = 1;
      d->n_tools++;
      EMIT(t);
    }
    air_part a = {.kind = AIR_PART_TOOL_DELTA, .index = (int)i};
    a.text = jv(json_object_get(fn, "arguments"), &a.text_len);
    if (a.text_len > 0) EMIT(a);
  }

  air_part f = {.kind = AIR_PART_FINISH};
  f.finish_raw =
      jv(json_object_get(choice, "finish_reason"), &f.finish_raw_len);
  if (f.finish_raw_len > 0) {
    f.finish = map_finish(f.finish_raw, f.finish_raw_len);
    d->finished = true;
    EMIT(f);
  }
  json_t *usage = json_object_get(root, "usage");
  if (json_is_object(usage)) {
    air_part u = {.kind = AIR_PART_USAGE};
    json_t *pt = json_object_get(usage, "prompt_tokens");
    json_t *ct = json_object_get(usage, "completion_tokens");
    u.input_tokens =
        json_integer_value(pt) > 0 ? (uint64_t)json_integer_value(pt) : 0;
    u.output_tokens =
        json_integer_value(ct) > 0 ? (uint64_t)json_integer_value(ct) : 0;
    d->input_tokens = u.input_tokens;
    d->output_tokens = u.output_tokens;
    EMIT(u);
  }
  return 0;
}

/* decode_body: a chat.completion object ("object" absent or
 * "chat.completion", "choices" an array); anything else is AIR_EPARSE. */
int air__oai_decode_body(air__decoder *d, const char *body, size_t n,
                         air__part_cb cb, void *data) {
  json_t *root = json_loadb(body, n, JSON_ALLOW_NUL, NULL);
  json_t *obj = json_object_get(root, "object");
  if (!json_is_object(root) ||
      !json_is_array(json_object_get(root, "choices")) ||
      (obj != NULL &&
       !(json_is_string(obj) &&
         strcmp(json_string_value(obj), "chat.completion") == 0))) {
    json_decref(root);
    return AIR_EPARSE;
  }
  int rc = body_parts(d, root, cb, data);
  if (rc == 0) d->done = true;
  json_decref(root);
  return rc;
}
