/*
 * The OpenAI chat-completions dialect (POST {base_url}/chat/completions):
 * its line of the dialect table. request.c decodes its callers' requests,
 * upstream.c encodes canonical requests for it, events.c decodes its
 * streams and bodies, caller.c encodes parts for its callers.
 */
#include "openai_chat.h"

const air__dialect_ops air__dialect_openai_chat = {
    .api = AIR_DIALECT_OPENAI,
    .name = "openai",
    .path = "/chat/completions",
    .id_prefix = "chatcmpl-",
    .build_same = air__oai_build_same,
    .decode_request = air__oai_decode_request,
    .can_express = air__oai_can_express,
    .encode_request = air__oai_encode_request,
    .decoder_init = air__oai_decoder_init,
    .decode_event = air__oai_decode_event,
    .decode_body = air__oai_decode_body,
    .encoder_init = air__oai_encoder_init,
    .encode_part = air__oai_encode_part,
    .encode_end = air__oai_encode_end,
    .encoder_observe = air__oai_encoder_observe,
    .encode_keepalive = air__oai_encode_keepalive,
    .encode_error_event = air__oai_encode_error_event,
    .encode_response = air__oai_encode_response,
    .encode_error_body = air__oai_encode_error_body,
};
