/*
 * The Anthropic Messages dialect (POST {base_url}/v1/messages): its line
 * of the dialect table. request.c decodes its callers' requests,
 * upstream.c encodes canonical requests for it, events.c decodes its
 * streams and bodies, caller.c encodes parts for its callers.
 */
#include "anthropic.h"

const air__dialect_ops air__dialect_anthropic = {
    .api = AIR_DIALECT_ANTHROPIC,
    .name = "anthropic",
    .path = "/v1/messages",
    .id_prefix = "msg_",
    .build_same = air__ant_build_same,
    .decode_request = air__ant_decode_request,
    .can_express = air__ant_can_express,
    .encode_request = air__ant_encode_request,
    .decoder_init = air__ant_decoder_init,
    .decode_event = air__ant_decode_event,
    .decode_body = air__ant_decode_body,
    .encoder_init = air__ant_encoder_init,
    .encode_part = air__ant_encode_part,
    .encode_end = air__ant_encode_end,
    .encoder_observe = air__ant_encoder_observe,
    .encode_keepalive = air__ant_encode_keepalive,
    .encode_error_event = air__ant_encode_error_event,
    .encode_response = air__ant_encode_response,
    .encode_error_body = air__ant_encode_error_body,
};
