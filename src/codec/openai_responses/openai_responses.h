/*
 * What the files of the OpenAI Responses dialect share (private to
 * src/codec/openai_responses/): the ops they implement and a few helpers.
 * The dialect is served statelessly (docs/design.md §5): nothing a response
 * creates can be referred to later.
 */
#ifndef AIR__OPENAI_RESPONSES_H
#define AIR__OPENAI_RESPONSES_H

#include <stdint.h>
#include <string.h>

#include "canon.h"
#include "codec_json.h"
#include "json.h"
#include "limits.h"
#include "dialect.h"

/* A string literal as (pointer, length) for air__buf_add. */
#define LIT(s) (s), (sizeof(s) - 1)

/* The id used when a stream or body has none. */
#define RSP_DEFAULT_ID "resp_airetry"

/* Drops what was appended to out since mark. */
static inline void rsp_rollback(air__buf *out, size_t mark) {
  out->n = mark;
  if (out->p != NULL) out->p[mark] = '\0';
}

/* air__buf_add_json_str that accepts (NULL, 0). */
static inline int rsp_jstr(air__buf *b, const char *s, size_t n) {
  return air__buf_add_json_str(b, s != NULL ? s : "", s != NULL ? n : 0);
}

static inline uint64_t rsp_sat_add(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* Built-in tool types: run by OpenAI, so a target of another dialect cannot
 * call them (dropped there, named in x-airetry-dropped). */
bool air__rsp_builtin_tool(const char *type);

/* request.c: a caller of this dialect. */
int air__rsp_build_same(const air__request *req, const air__build_opts *o,
                        air__buf *out, air_error *err);
int air__rsp_decode_request(const air__request *req, air__canon *c,
                            air_error *err);
/* upstream.c: canonical form into an upstream request. */
int air__rsp_finish_body(json_t *root, const char *req_model,
                         const air__build_opts *o, air_error *err);
int air__rsp_stateful_field(const air__canon *c, const char *api_name,
                            air_error *err);
int air__rsp_can_express(const air__canon *c, const air__build_opts *o,
                         air_error *err);
int air__rsp_encode_request(const air__canon *c, const air__build_opts *o,
                            air__buf *out, air_error *err);
/* events.c: the upstream's stream and bodies into parts. */
void air__rsp_decoder_init(air__decoder *d);
int air__rsp_decode_event(air__decoder *d, const air__sse_event *ev,
                          air__part_cb cb, void *data);
int air__rsp_decode_body(air__decoder *d, const char *body, size_t n,
                         air__part_cb cb, void *data);
/* decode_event without its fast path (the full decoder alone), and with it
 * telling whether the fast path decoded the event (*took) or left it to the
 * full decoder: for the differential tests. */
int air__rsp_decode_event_full(air__decoder *d, const air__sse_event *ev,
                               air__part_cb cb, void *data);
int air__rsp_decode_event_fast(air__decoder *d, const air__sse_event *ev,
                               air__part_cb cb, void *data, bool *took);
/* caller.c: parts for a caller of this dialect. */
void air__rsp_encoder_init(air__encoder *e, const air__request *req,
                           uint64_t created_s);
void air__rsp_encoder_cleanup(air__encoder *e);
int air__rsp_encode_part(air__encoder *e, const air_part *p, air__buf *out);
int air__rsp_encode_end(air__encoder *e, air__buf *out);
void air__rsp_encoder_observe(air__encoder *e, const air__sse_event *ev,
                              const air_part *parts, size_t n);
int air__rsp_encode_keepalive(air__encoder *e, air__buf *out);
int air__rsp_encode_error_event(air__encoder *e, air_reason reason,
                                const char *message, air__buf *out);
int air__rsp_encode_response(const air__aggregate *a, air__buf *out);
int air__rsp_encode_error_body(int status, air_reason reason,
                               const char *message, const air_attempt *log,
                               size_t n, air__buf *out);

#endif
