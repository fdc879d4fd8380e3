/*
 * What the files of the OpenAI chat-completions dialect share (private to
 * src/codec/openai_chat/): the ops they implement and a few helpers.
 */
#ifndef AIR__OPENAI_CHAT_H
#define AIR__OPENAI_CHAT_H

#include <stdint.h>
#include <string.h>

#include "canon.h"
#include "codec_json.h"
#include "dialect.h"

#include "json.h"
#include "limits.h"
#include "dialect.h"

/* A string literal as (pointer, length) for air__buf_add. */
#define LIT(s) (s), (sizeof(s) - 1)

/* The id used when a stream or body has none. */
#define DEFAULT_ID "chatcmpl-airetry"

/* Drops what was appended to out since mark (a failed append leaves no
 * partial chunk behind). */
static inline void rollback(air__buf *out, size_t mark) {
  out->n = mark;
  if (out->p != NULL) out->p[mark] = '\0';
}

/* air__buf_add_json_str that accepts (NULL, 0). */
static inline int jstr(air__buf *b, const char *s, size_t n) {
  return air__buf_add_json_str(b, s != NULL ? s : "", s != NULL ? n : 0);
}

static inline int add_int(air__buf *b, long long v) {
  if (v >= 0) return air__buf_addu(b, (unsigned long long)v);
  int rc = air__buf_addc(b, '-');
  return rc != 0 ? rc : air__buf_addu(b, 0ull - (unsigned long long)v);
}

static inline uint64_t sat_add(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static inline air_finish map_finish(const char *s, size_t n) {
  if (n == 4 && memcmp(s, "stop", 4) == 0) return AIR_FINISH_STOP;
  if (n == 6 && memcmp(s, "length", 6) == 0) return AIR_FINISH_LENGTH;
  if ((n == 10 && memcmp(s, "tool_calls", 10) == 0) ||
      (n == 13 && memcmp(s, "function_call", 13) == 0))
    return AIR_FINISH_TOOL_CALLS;
  if (n == 14 && memcmp(s, "content_filter", 14) == 0)
    return AIR_FINISH_CONTENT_FILTER;
  return AIR_FINISH_STOP;
}

/* The OpenAI finish_reason for a normalized finish (docs/design.md §2.1: a
 * refusal is a content_filter to an OpenAI caller). */
static inline const char *finish_str(air_finish f) {
  switch (f) {
    case AIR_FINISH_LENGTH:
    case AIR_FINISH_CONTEXT:
      return "length";
    case AIR_FINISH_TOOL_CALLS:
      return "tool_calls";
    case AIR_FINISH_CONTENT_FILTER:
    case AIR_FINISH_REFUSAL:
      return "content_filter";
    default:
      return "stop";
  }
}

/* request.c: a caller of this dialect. */
int air__oai_build_same(const air__request *req, const air__build_opts *o,
                        air__buf *out, air_error *err);
int air__oai_decode_request(const air__request *req, air__canon *c,
                            air_error *err);
/* upstream.c: canonical form into an upstream request. finish_body: the
 * override merged over root, then model (o->model, else req_model), stream
 * and stream_options.include_usage set. */
int air__oai_finish_body(json_t *root, const char *req_model,
                         const air__build_opts *o, air_error *err);
int air__oai_can_express(const air__canon *c, const air__build_opts *o,
                         air_error *err);
int air__oai_encode_request(const air__canon *c, const air__build_opts *o,
                            air__buf *out, air_error *err);
/* events.c: the upstream's stream and bodies into parts. */
void air__oai_decoder_init(air__decoder *d);
int air__oai_decode_event(air__decoder *d, const air__sse_event *ev,
                          air__part_cb cb, void *data);
int air__oai_decode_body(air__decoder *d, const char *body, size_t n,
                         air__part_cb cb, void *data);
/* decode_event without its fast path (the full decoder alone), and with it
 * telling whether the fast path decoded the event (*took) or left it to the
 * full decoder: for the differential tests. */
int air__oai_decode_event_full(air__decoder *d, const air__sse_event *ev,
                               air__part_cb cb, void *data);
int air__oai_decode_event_fast(air__decoder *d, const air__sse_event *ev,
                               air__part_cb cb, void *data, bool *took);
/* caller.c: parts for a caller of this dialect. */
void air__oai_encoder_init(air__encoder *e, const air__request *req,
                           uint64_t created_s);
int air__oai_encode_part(air__encoder *e, const air_part *p, air__buf *out);
int air__oai_encode_end(air__encoder *e, air__buf *out);
void air__oai_encoder_observe(air__encoder *e, const air__sse_event *ev,
                              const air_part *parts, size_t n);
int air__oai_encode_keepalive(air__encoder *e, air__buf *out);
int air__oai_encode_error_event(air__encoder *e, air_reason reason,
                                const char *message, air__buf *out);
int air__oai_encode_response(const air__aggregate *a, air__buf *out);
int air__oai_encode_error_body(int status, air_reason reason,
                               const char *message, const air_attempt *log,
                               size_t n, air__buf *out);

#endif
