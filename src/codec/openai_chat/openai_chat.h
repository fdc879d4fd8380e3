/*
 * What the files of the OpenAI chat-completions dialect share (private to
 * src/codec/openai_chat/): the ops they implement and the finish reasons.
 */
#ifndef AIR__OPENAI_CHAT_H
#define AIR__OPENAI_CHAT_H

#include <stdint.h>
#include <string.h>

#include "canon.h"
#include "codec_json.h"
#include "codec_text.h"
#include "dialect.h"
#include "limits.h"

/* The id used when a stream or body has none. */
#define DEFAULT_ID "chatcmpl-airetry"

/* The normalized finish of an OpenAI finish_reason (an unknown one is
 * STOP). */
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

AIR__DIALECT_FUNCS(air__oai);

/* upstream.c: an upstream body's end (air__finish_fn): the override merged
 * over root, then model (o->model, else req_model), stream and
 * stream_options.include_usage set, and root dumped into out. */
int air__oai_finish_body(json_t *root, const char *req_model,
                         const air__build_opts *o, air__buf *out,
                         air_error *err);

#endif
