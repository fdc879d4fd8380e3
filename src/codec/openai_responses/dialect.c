/*
 * The OpenAI Responses dialect (POST {base_url}/responses): its line of the
 * dialect table. request.c decodes its callers' requests, upstream.c
 * encodes canonical requests for it, events.c decodes its streams and
 * bodies, caller.c encodes parts for its callers.
 */
#include "openai_responses.h"

const air__dialect_ops air__dialect_openai_responses = {
    AIR__DIALECT_OPS(air__rsp, AIR_DIALECT_OPENAI_RESPONSES, "openai_responses",
                     "/responses", "resp_"),
    .stateful_field = air__rsp_stateful_field,
    .encoder_cleanup = air__rsp_encoder_cleanup,
    .encode_keepalive = air__openai_keepalive,
    .encode_error_body = air__openai_error_body,
};
