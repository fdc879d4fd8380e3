/*
 * What the upstream decoders of src/codec share (each dialect's events.c):
 * handing parts over, the malformed-event rule, the skeleton of decoding
 * one stream event (a fast path first, else json.c tokens and the
 * dialect's full decoder) and reading strings and counts from tokens.
 * The skeleton and the token readers are inline: they are the hot path,
 * and the dialect's functions they are given are known where they are
 * used.
 */
#ifndef AIR__CODEC_DECODE_H
#define AIR__CODEC_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "codec_text.h"
#include "dialect.h"
#include "json.h"

/* Hands part to the decoder's callback; its first non-zero is returned
 * from the enclosing function (which has cb and data). */
#define EMIT(part)              \
  do {                          \
    int r_ = cb(data, &(part)); \
    if (r_ != 0) return r_;     \
  } while (0)

/* A fresh decoder of dialect api: zeroed, scratch buffers bounded by
 * AIR__MAX_SSE_EVENT_BYTES (dialect.c). */
void air__decoder_init_for(air__decoder *d, air_dialect api);

/* An event that yields nothing: malformed, unless decoding it ran out of
 * memory (rc, or a scratch buffer's sticky error: d->oom, and the attempt
 * fails instead of skipping it). */
static inline void air__decoder_malformed(air__decoder *d, int rc) {
  air__decoder_note_oom(d, rc);
  if (!d->oom) d->malformed++;
}

/* Before the fast path and the tokens: false when the event is done with
 * (a keep-alive, the terminator, an event already counted malformed);
 * else true with *s, *n the data to decode. */
typedef bool (*air__event_data_fn)(air__decoder *d, const air__sse_event *ev,
                                   const char **s, size_t *n);
/* A dialect's fast path on the data: 1 when it decoded the event (cb's
 * first non-zero in *rc), 0 when it changed nothing. */
typedef int (*air__event_fast_fn)(air__decoder *d, const char *s, size_t n,
                                  air__part_cb cb, void *data, int *rc);
/* A dialect's full decoder of the event's tokens (an object at token 0):
 * parts, or the event counted malformed; cb's first non-zero. */
typedef int (*air__event_full_fn)(air__decoder *d, const air__sse_event *ev,
                                  const air__json *j, air__part_cb cb,
                                  void *data);

/*
 * One stream event into parts (the ops' decode_event): the per-event flags
 * cleared, prep, then fast (NULL: none) and else the tokens of the data
 * through full; data that is not a JSON object is malformed. *took (when
 * not NULL) tells whether fast decoded the event.
 */
/* Always inlined: each dialect's copy then calls its own functions directly
 * (no call through a pointer on the hot path of every event). */
__attribute__((always_inline)) static inline int air__decode_event(
    air__decoder *d, const air__sse_event *ev, air__part_cb cb, void *data,
    air__event_data_fn prep, air__event_fast_fn fast, air__event_full_fn full,
    bool *took) {
  if (took != NULL) *took = false;
  d->usage_only = d->terminator = d->error_event = d->server_tool = false;
  const char *s;
  size_t n;
  if (!prep(d, ev, &s, &n)) return 0;
  int rc;
  if (fast != NULL && fast(d, s, n, cb, data, &rc)) {
    if (took != NULL) *took = true;
    return rc;
  }
  air__json j;
  rc = air__json_parse(&j, s, n);
  if (rc != 0 || !air__json_is_obj(&j, 0)) {
    air__json_cleanup(&j);
    air__decoder_malformed(d, rc);
    return 0;
  }
  rc = full(d, ev, &j, cb, data);
  air__json_cleanup(&j);
  return rc;
}

/*
 * The three decode_event entry points of a dialect over
 * air__decode_event: prefix_decode_event (the ops'), and for the
 * differential tests prefix_decode_event_full (no fast path) and
 * prefix_decode_event_fast (*took: the fast path decoded the event). They
 * share one static prefix_decode: one copy of the skeleton per dialect,
 * with the dialect's functions known in it.
 */
#define AIR__DECODE_EVENT_FUNCS(prefix, prep, fast, full)                      \
  static int prefix##_decode(air__decoder *d, const air__sse_event *ev,        \
                             air__part_cb cb, void *data, bool fast_path,      \
                             bool *took) {                                     \
    return air__decode_event(d, ev, cb, data, prep, fast_path ? (fast) : NULL, \
                             full, took);                                      \
  }                                                                            \
  int prefix##_decode_event(air__decoder *d, const air__sse_event *ev,         \
                            air__part_cb cb, void *data) {                     \
    return prefix##_decode(d, ev, cb, data, true, NULL);                       \
  }                                                                            \
  int prefix##_decode_event_full(air__decoder *d, const air__sse_event *ev,    \
                                 air__part_cb cb, void *data) {                \
    return prefix##_decode(d, ev, cb, data, false, NULL);                      \
  }                                                                            \
  int prefix##_decode_event_fast(air__decoder *d, const air__sse_event *ev,    \
                                 air__part_cb cb, void *data, bool *took) {    \
    return prefix##_decode(d, ev, cb, data, true, took);                       \
  }

/*
 * The data of an OpenAI event (both OpenAI dialects): white space around
 * it dropped; empty data is a keep-alive and "[DONE]" the terminator
 * (d->done, d->terminator), both done with. d->scratch is reset and, when
 * the data holds an escape, sized for all of it at once, so strings
 * decoded into it never move it during the event (air__event_str); an
 * event it cannot be sized for is malformed (or out of memory).
 */
static inline bool air__openai_event_data(air__decoder *d,
                                          const air__sse_event *ev,
                                          const char **sp, size_t *np) {
  const char *s = ev->data.p;
  size_t n = ev->data.n;
  while (n > 0 &&
         (s[0] == ' ' || s[0] == '\t' || s[0] == '\r' || s[0] == '\n')) {
    s++;
    n--;
  }
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' ||
                   s[n - 1] == '\n'))
    n--;
  if (n == 0) return false;
  if (n == 6 && memcmp(s, "[DONE]", 6) == 0) {
    d->done = d->terminator = true;
    return false;
  }
  air__buf_reset(&d->scratch);
  if (memchr(s, '\\', n) != NULL && d->scratch.cap <= n) {
    int rc = air__buf_add(&d->scratch, s, n);
    air__buf_reset(&d->scratch);
    if (rc != 0) {
      air__decoder_malformed(d, rc);
      return false;
    }
  }
  *sp = s;
  *np = n;
  return true;
}

/*
 * String token tok of the current event: borrowed from the event when it
 * holds no escape, else decoded into d->scratch (sized for the whole event
 * by air__openai_event_data, so it never moves and earlier pointers stay
 * valid). A missing or non-string token, or one that cannot be decoded,
 * is "".
 */
static inline void air__event_str(air__decoder *d, const air__json *j, int tok,
                                  const char **p, size_t *n) {
  if (air__json_plain(j, tok, p, n)) return;
  *p = "";
  *n = 0;
  if (!air__json_is_str(j, tok)) return;
  size_t off = d->scratch.n;
  if (air__json_str(j, tok, &d->scratch) != 0) {
    air__text_undo(&d->scratch, off);
    return;
  }
  *p = d->scratch.p + off;
  *n = d->scratch.n - off;
}

/* The raw bytes of a string (*text, *n, escapes as written) decoded into
 * d->scratch when they hold an escape, appended after the strings already
 * there (which stay where they are); false when an escape is bad (nothing
 * kept). */
static inline bool air__event_unescape(air__decoder *d, const char **text,
                                       size_t *n) {
  if (*n == 0 || memchr(*text, '\\', *n) == NULL) return true;
  size_t off = d->scratch.n;
  if (air__json_unescape(*text, *n, &d->scratch) != 0) {
    air__text_undo(&d->scratch, off);
    return false;
  }
  *text = d->scratch.p + off;
  *n = d->scratch.n - off;
  return true;
}

/*
 * The members of the JSON object at *pp, for the fast paths' one forward
 * scan (json.h): member is called with each key, *pp at its value, which
 * it must read or skip; it returns false to give up. Members are counted
 * in *count, at most AIR__JSON_SCAN_MAX_MEMBERS. True with *pp past the
 * object when every byte was read.
 */
typedef bool (*air__scan_member_fn)(void *ctx, const char *k, size_t kn,
                                    const char **pp, const char *e);
static inline bool air__scan_object(const char **pp, const char *e,
                                    unsigned *count, air__scan_member_fn member,
                                    void *ctx) {
  int more = air__json_scan_open(pp, e, '{');
  while (more > 0) {
    const char *k;
    size_t kn;
    if (++*count > AIR__JSON_SCAN_MAX_MEMBERS ||
        !air__json_scan_key(pp, e, &k, &kn) || !member(ctx, k, kn, pp, e))
      return false;
    more = air__json_scan_next(pp, e, '}');
  }
  return more == 0;
}

/* The parts both OpenAI dialects hand over alike (NULL for the strings
 * a part does not use): START once per answer (d->started), a text piece
 * of kind (a TOOL_DELTA's: of tool index; nothing when empty), a
 * TOOL_START, the usage (d's totals set). Each returns cb's value. */
static inline int air__emit_start(air__decoder *d, const char *id, size_t id_n,
                                  const char *model, size_t model_n,
                                  air__part_cb cb, void *data) {
  if (d->started) return 0;
  air_part p = {.kind = AIR_PART_START,
                .id = id,
                .id_len = id_n,
                .name = model,
                .name_len = model_n};
  d->started = true;
  return cb(data, &p);
}
static inline int air__emit_text(air_part_kind kind, int index, const char *s,
                                 size_t n, air__part_cb cb, void *data) {
  if (n == 0) return 0;
  air_part p = {.kind = kind, .index = index, .text = s, .text_len = n};
  return cb(data, &p);
}
static inline int air__emit_tool_start(int index, const char *id, size_t id_n,
                                       const char *name, size_t name_n,
                                       air__part_cb cb, void *data) {
  air_part p = {.kind = AIR_PART_TOOL_START,
                .index = index,
                .id = id,
                .id_len = id_n,
                .name = name,
                .name_len = name_n};
  return cb(data, &p);
}
static inline int air__emit_usage(air__decoder *d, uint64_t in, uint64_t out,
                                  air__part_cb cb, void *data) {
  air_part p = {
      .kind = AIR_PART_USAGE, .input_tokens = in, .output_tokens = out};
  d->input_tokens = in;
  d->output_tokens = out;
  return cb(data, &p);
}

/* A token count: a positive integer, else 0. */
static inline uint64_t air__event_count(const air__json *j, int tok) {
  int64_t v;
  return air__json_int(j, tok, &v) && v > 0 ? (uint64_t)v : 0;
}

/* True when token i is a string whose bytes as written (escapes included)
 * are over max: a finish reason or tool name that long makes the event
 * fatal (dialect.h, "identifiers"). */
static inline bool air__event_over(const air__json *j, int i, size_t max) {
  size_t n = 0;
  if (air__json_is_str(j, i)) air__json_raw(j, i, &n);
  return n > max;
}

#endif
