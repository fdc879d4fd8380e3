/*
 * JSON helpers private to src/codec (the dialect folders and the shared
 * files): the one place the codec's JSON library (jansson) meets its
 * interface. No header outside src/codec includes this one (the mock and
 * tests read bodies with their own parser).
 */
#ifndef AIR__CODEC_JSON_H
#define AIR__CODEC_JSON_H

#include <stddef.h>

#include <jansson.h>

#include "buf.h"
#include "dialect.h"

/* The request's JSON object, parsed from raw on first use; NULL when out of
 * memory. */
json_t *air__request_body(const air__request *r);

/* json_object_set_new / json_array_append_new that report AIR_ENOMEM when v
 * is NULL (a failed constructor) or the insertion fails. Both steal v. */
int air__json_put(json_t *obj, const char *key, json_t *v);
int air__json_push(json_t *arr, json_t *v);
/* Appends v dumped with jansson flags; on failure out is left as it was and
 * AIR_ENOMEM or AIR_ETOOBIG is returned. */
int air__json_dump(const json_t *v, size_t flags, air__buf *out);

struct air__canon;
/* A continuation's style in an encoded body (continue.c): VLLM sets
 * "continue_final_message": true and "add_generation_prompt": false on
 * root; PREFIX_FLAG sets "prefix": true on the last element of msgs whose
 * "role" is "assistant"; other styles change nothing. Returns 0 or
 * AIR_ENOMEM. */
int air__json_cont_style(const struct air__canon *c, json_t *root,
                         json_t *msgs);

#endif
