/*
 * The OpenAI chat-completions dialect (POST {base_url}/chat/completions):
 * its line of the dialect table. request.c decodes its callers' requests,
 * upstream.c encodes canonical requests for it, events.c decodes its
 * streams and bodies, caller.c encodes parts for its callers.
 */
#include "openai_chat.h"

const air__dialect_ops air__dialect_openai_chat = {
    AIR__DIALECT_OPS(air__oai, AIR_DIALECT_OPENAI, "openai",
                     "/chat/completions", "chatcmpl-"),
    .encode_keepalive = air__openai_keepalive,
    .encode_error_body = air__openai_error_body,
};
