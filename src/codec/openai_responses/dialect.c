/*
 * The OpenAI Responses dialect (POST {base_url}/responses): its line of the
 * dialect table. request.c decodes its callers' requests, upstream.c
 * encodes canonical requests for it, events.c decodes its streams and
 * bodies, caller.c encodes parts for its callers.
 */
#include "openai_responses.h"

const air__dialect_ops air__dialect_openai_responses = {
    .api = AIR_DIALECT_OPENAI_RESPONSES,
    .name = "openai_responses",
    .path = "/responses",
    .id_prefix = "resp_",
    .build_same = air__rsp_build_same,
    .decode_request = air__rsp_decode_request,
    .can_express = air__rsp_can_express,
    .stateful_field = air__rsp_stateful_field,
    .encode_request = air__rsp_encode_request,
    .decoder_init = air__rsp_decoder_init,
    .decode_event = air__rsp_decode_event,
    .decode_body = air__rsp_decode_body,
    .encoder_init = air__rsp_encoder_init,
    .encoder_cleanup = air__rsp_encoder_cleanup,
    .encode_part = air__rsp_encode_part,
    .encode_end = air__rsp_encode_end,
    .encoder_observe = air__rsp_encoder_observe,
    .encode_keepalive = air__rsp_encode_keepalive,
    .encode_error_event = air__rsp_encode_error_event,
    .encode_response = air__rsp_encode_response,
    .encode_error_body = air__rsp_encode_error_body,
};
