/*
 * What the files of the Anthropic Messages dialect share (private to
 * src/codec/anthropic/): the ops they implement, the block kinds and the
 * stop reasons.
 */
#ifndef AIR__ANTHROPIC_H
#define AIR__ANTHROPIC_H

#include <stdint.h>
#include <string.h>

#include "canon.h"
#include "codec_json.h"
#include "codec_text.h"
#include "dialect.h"

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

/* dialect.c: the finish of a stop_reason (an unknown one is STOP), and the
 * stop_reason written for a finish (NONE: the stream simply ended:
 * "end_turn"; a content filter is a "refusal"). */
air_finish air__ant_finish_of(const char *p, size_t n);
const char *air__ant_stop_name(air_finish f);

AIR__DIALECT_FUNCS(air__ant);

/* upstream.c: an upstream body's end (air__finish_fn): the override merged
 * over root (a null value removes the field), model (o->model, else
 * req_model) and stream set, a missing max_tokens filled in, and the body
 * dumped into out ("body: too big", AIR_EINVAL, over its limit). */
int air__ant_finish_body(json_t *root, const char *req_model,
                         const air__build_opts *o, air__buf *out,
                         air_error *err);
/* caller.c: the ops' encode_keepalive and encode_error_body. */
int air__ant_encode_keepalive(air__encoder *e, air__buf *out);
int air__ant_encode_error_body(int status, air_reason reason,
                               const char *message, const air_attempt *log,
                               size_t n, air__buf *out);

#endif
