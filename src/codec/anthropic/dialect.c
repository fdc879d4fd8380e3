/*
 * The Anthropic Messages dialect (POST {base_url}/v1/messages): its line
 * of the dialect table and its stop reasons. request.c decodes its
 * callers' requests, upstream.c encodes canonical requests for it,
 * events.c decodes its streams and bodies, caller.c encodes parts for its
 * callers.
 */
#include "anthropic.h"

const air__dialect_ops air__dialect_anthropic = {
    AIR__DIALECT_OPS(air__ant, AIR_DIALECT_ANTHROPIC, "anthropic",
                     "/v1/messages", "msg_"),
    .encode_keepalive = air__ant_encode_keepalive,
    .encode_error_body = air__ant_encode_error_body,
};

/* The stop reasons and their finishes; the first of a finish is the one
 * written for it. */
static const struct {
  const char *name;
  air_finish finish;
} stop_reasons[] = {
    {"end_turn", AIR_FINISH_STOP},
    {"stop_sequence", AIR_FINISH_STOP},
    {"max_tokens", AIR_FINISH_LENGTH},
    {"tool_use", AIR_FINISH_TOOL_CALLS},
    {"refusal", AIR_FINISH_REFUSAL},
    {"model_context_window_exceeded", AIR_FINISH_CONTEXT},
    {"pause_turn", AIR_FINISH_PAUSE},
};

#define N_STOP_REASONS (sizeof(stop_reasons) / sizeof(stop_reasons[0]))

air_finish air__ant_finish_of(const char *p, size_t n) {
  for (size_t i = 0; i < N_STOP_REASONS; i++) {
    const char *s = stop_reasons[i].name;
    if (strlen(s) == n && memcmp(s, p, n) == 0) return stop_reasons[i].finish;
  }
  return AIR_FINISH_STOP;
}

const char *air__ant_stop_name(air_finish f) {
  if (f == AIR_FINISH_CONTENT_FILTER) f = AIR_FINISH_REFUSAL;
  for (size_t i = 0; i < N_STOP_REASONS; i++)
    if (stop_reasons[i].finish == f) return stop_reasons[i].name;
  return "end_turn";
}
