/*
 * What the files of the OpenAI Responses dialect share (private to
 * src/codec/openai_responses/): the ops they implement and the built-in
 * tools. The dialect is served statelessly (docs/design.md §5): nothing a
 * response creates can be referred to later.
 */
#ifndef AIR__OPENAI_RESPONSES_H
#define AIR__OPENAI_RESPONSES_H

#include <stdint.h>
#include <string.h>

#include "canon.h"
#include "codec_json.h"
#include "codec_text.h"
#include "dialect.h"
#include "limits.h"

/* The id used when a stream or body has none. */
#define RSP_DEFAULT_ID "resp_airetry"

/* Built-in tool types: run by OpenAI, so a target of another dialect cannot
 * call them (dropped there, named in x-airetry-dropped). */
bool air__rsp_builtin_tool(const char *type);

AIR__DIALECT_FUNCS(air__rsp);

/* upstream.c: the stateful extras of a caller of this dialect (the ops'
 * stateful_field). */
int air__rsp_stateful_field(const air__canon *c, const char *api_name,
                            air_error *err);
/* upstream.c: an upstream body's end (air__finish_fn): the override merged
 * over root (max_tokens as max_output_tokens), model and stream set, and
 * root dumped into out. */
int air__rsp_finish_body(json_t *root, const char *req_model,
                         const air__build_opts *o, air__buf *out,
                         air_error *err);
/* caller.c: frees the encoder's items (the ops' encoder_cleanup). */
void air__rsp_encoder_cleanup(air__encoder *e);

#endif
