/*
 * What the files of the Anthropic Messages dialect share (private to
 * src/codec/anthropic/): the ops they implement and a few helpers.
 */
#ifndef AIR__ANTHROPIC_H
#define AIR__ANTHROPIC_H

#include <stdint.h>
#include <string.h>

#include "canon.h"
#include "codec_json.h"
#include "dialect.h"

#define LIT(s) (s), (sizeof(s) - 1)
#define IS(p, n, lit) \
  ((n) == sizeof(lit) - 1 && memcmp((p), (lit), sizeof(lit) - 1) == 0)

#define DEFAULT_MAX_TOKENS 4096
/* Block indices past this are malformed (no message has that many). */
#define MAX_BLOCK_INDEX 1000000

/* Content block kinds the decoder remembers (d->block_kind). */
enum {
  BK_NONE = 0,
  BK_TEXT,
  BK_THINKING,
  BK_REDACTED,
  BK_TOOL,
  BK_OTHER,
  BK_JSON /* the forced JSON tool (d->json_tool): its input is text */
};
/* What the encoder's open block is (e->open_kind). */
enum { EK_NONE = 0, EK_TEXT, EK_THINKING, EK_TOOL };

static inline air_finish finish_of(const char *p, size_t n) {
  typedef struct stop_map {
    const char *name;
    air_finish finish;
  } stop_map;

  static const stop_map stop_reasons[] = {
      {"end_turn", AIR_FINISH_STOP},
      {"stop_sequence", AIR_FINISH_STOP},
      {"max_tokens", AIR_FINISH_LENGTH},
      {"tool_use", AIR_FINISH_TOOL_CALLS},
      {"refusal", AIR_FINISH_REFUSAL},
      {"model_context_window_exceeded", AIR_FINISH_CONTEXT},
      {"pause_turn", AIR_FINISH_PAUSE},
  };

  for (size_t i = 0; i < sizeof(stop_reasons) / sizeof(stop_reasons[0]); i++) {
    const char *s = stop_reasons[i].name;
    if (strlen(s) == n && memcmp(s, p, n) == 0) return stop_reasons[i].finish;
  }
  return AIR_FINISH_STOP;
}

/* The stop_reason written for a finish (NONE: the stream simply ended). */
static inline const char *stop_name(air_finish f) {
  switch (f) {
    case AIR_FINISH_LENGTH:
      return "max_tokens";
    case AIR_FINISH_TOOL_CALLS:
      return "tool_use";
    case AIR_FINISH_CONTENT_FILTER:
    case AIR_FINISH_REFUSAL:
      return "refusal";
    case AIR_FINISH_CONTEXT:
      return "model_context_window_exceeded";
    case AIR_FINISH_PAUSE:
      return "pause_turn";
    default:
      return "end_turn";
  }
}

static inline uint64_t sat_add(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* request.c: a caller of this dialect. */
int air__ant_build_same(const air__request *req, const air__build_opts *o,
                        air__buf *out, air_error *err);
int air__ant_decode_request(const air__request *req, air__canon *c,
                            air_error *err);
/* upstream.c: canonical form into an upstream request. finish_body: the
 * override merged over root (a null value removes the field), model
 * (o->model, else req_model) and stream set, a missing max_tokens filled
 * in, and the body dumped into out. */
int air__ant_finish_body(json_t *root, const char *req_model,
                         const air__build_opts *o, air__buf *out,
                         air_error *err);
int air__ant_can_express(const air__canon *c, const air__build_opts *o,
                         air_error *err);
int air__ant_encode_request(const air__canon *c, const air__build_opts *o,
                            air__buf *out, air_error *err);
/* events.c: the upstream's stream and bodies into parts. */
void air__ant_decoder_init(air__decoder *d);
int air__ant_decode_event(air__decoder *d, const air__sse_event *ev,
                          air__part_cb cb, void *data);
int air__ant_decode_body(air__decoder *d, const char *body, size_t n,
                         air__part_cb cb, void *data);
/* decode_event without its fast path (the full decoder alone), and with it
 * telling whether the fast path decoded the event (*took) or left it to the
 * full decoder: for the differential tests. */
int air__ant_decode_event_full(air__decoder *d, const air__sse_event *ev,
                               air__part_cb cb, void *data);
int air__ant_decode_event_fast(air__decoder *d, const air__sse_event *ev,
                               air__part_cb cb, void *data, bool *took);
/* caller.c: parts for a caller of this dialect. */
void air__ant_encoder_init(air__encoder *e, const air__request *req,
                           uint64_t created_s);
int air__ant_encode_part(air__encoder *e, const air_part *p, air__buf *out);
int air__ant_encode_end(air__encoder *e, air__buf *out);
void air__ant_encoder_observe(air__encoder *e, const air__sse_event *ev,
                              const air_part *parts, size_t n);
int air__ant_encode_keepalive(air__encoder *e, air__buf *out);
int air__ant_encode_error_event(air__encoder *e, air_reason reason,
                                const char *message, air__buf *out);
int air__ant_encode_response(const air__aggregate *a, air__buf *out);
int air__ant_encode_error_body(int status, air_reason reason,
                               const char *message, const air_attempt *log,
                               size_t n, air__buf *out);

#endif
