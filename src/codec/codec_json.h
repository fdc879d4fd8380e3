/*
 * JSON helpers private to src/codec (the dialect folders and the shared
 * files): the one place the codec's JSON library (jansson) meets its
 * interface. No header outside src/codec includes this one (the mock and
 * tests read bodies with their own parser).
 *
 * Every helper that can fail returns 0 or an error code as it is
 * (docs/style.md §5): AIR_ENOMEM for an allocation, AIR_ETOOBIG for a
 * buffer over its limit, AIR_EINVAL (with err) for a request found
 * invalid. A helper that builds a value hands it out through an out
 * parameter, never as a NULL that would read as out of memory.
 */
#ifndef AIR__CODEC_JSON_H
#define AIR__CODEC_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "buf.h"
#include "canon.h"
#include "dialect.h"

/* ---- values (codec_json.c) ---------------------------------------------- */

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

/* A string value of s ((NULL, 0): ""); NULL when out of memory. */
json_t *air__json_strn(air__str s);
/* A number as the caller wrote it (an integer stays one). */
json_t *air__json_num(const air__cnum *n);
/* n, or, outside 0..max, a real clamped to it (the OpenAI dialects'
 * temperature). */
json_t *air__json_clamped(const air__cnum *n, double max);
/* A string value's bytes (*n its length), or "" (0) for anything else. */
const char *air__json_sv(const json_t *v, size_t *n);
/* Whether v is a string over max bytes. */
bool air__json_over(const json_t *v, size_t max);
/* A token count: a positive integer, else 0. */
uint64_t air__json_count(const json_t *v);

/* An image part's URL as a string value into *out: its URL, or its inline
 * data as a data: URL ("data:TYPE;base64,DATA", bounded by
 * AIR__MAX_REQUEST_BYTES: AIR_ETOOBIG past it). */
int air__json_image_url(const air__cpart *p, json_t **out);
/* The TEXT parts of parts joined with sep as a string value into *out
 * (other parts left out; bounded as above). */
int air__json_joined(const air__cpart *parts, size_t n, const char *sep,
                     json_t **out);
/* A tool's input schema: its JSON text parsed, or {"type": "object",
 * "properties": {}} when it has none; NULL when out of memory. */
json_t *air__json_tool_schema(const air__ctool *t);

/* How air__json_override merges (flags). */
#define AIR__OVERRIDE_NULL_REMOVES 1u  /* a null value removes the field */
#define AIR__OVERRIDE_OUTPUT_TOKENS 2u /* max_tokens is max_output_tokens */
/* Merges the JSON object override_json (NULL: nothing) over root's
 * top-level fields (a null value is written as null unless
 * AIR__OVERRIDE_NULL_REMOVES). AIR_EINVAL "override: expected a JSON
 * object" when it is not one. */
int air__json_override(json_t *root, const char *override_json, unsigned how,
                       air_error *err);
/* Sets root's "model" (o->model, else req_model, else "") and "stream":
 * true. */
int air__json_target(json_t *root, const char *req_model,
                     const air__build_opts *o);

/* A dialect's finish of an upstream body (upstream.c): o's override, model
 * and stream (and the dialect's own flags) set on root, which is then
 * dumped into out. */
typedef int (*air__finish_fn)(json_t *root, const char *req_model,
                              const air__build_opts *o, air__buf *out,
                              air_error *err);
/*
 * The ops' build_same: the caller's text with the members of set patched
 * (air__request_patch; set[0] is {"model", NULL, AIR__PATCH_SET}, whose
 * value this fills with o->model, else the caller's, as JSON text) when the
 * request has its text and no override; else a copy of the caller's tree
 * through finish. AIR_EINVAL "request: expected a parsed request" when
 * there is no tree.
 */
int air__build_same(const air__request *req, const air__build_opts *o,
                    air__patch *set, size_t n_set, air__finish_fn finish,
                    air__buf *out, air_error *err);

struct air__canon;
/* A continuation's style in an encoded body (continue.c): VLLM sets
 * "continue_final_message": true and "add_generation_prompt": false on
 * root; PREFIX_FLAG sets "prefix": true on the last element of msgs whose
 * "role" is "assistant"; other styles change nothing. Returns 0 or
 * AIR_ENOMEM. */
int air__json_cont_style(const struct air__canon *c, json_t *root,
                         json_t *msgs);

/* ---- decoding a caller's body into the canonical form (canon_json.c) -----
 *
 * The pieces every dialect's decode_request shares. Strings are copied
 * into the canon's arena; a NULL .p is out of memory.
 */

/* A copy of string v (anything else: ""). */
air__str air__canon_json_str(air__canon *c, const json_t *v);
/* v as compact JSON text (any value). */
air__str air__canon_json_text(air__canon *c, const json_t *v);
/* An extra named field (copied), with v's JSON text when v is given; key:
 * the top-level key (NULL: inside messages or tools). */
int air__canon_json_extra(air__canon *c, const char *field, const char *key,
                          const json_t *v);
/* A number v as the caller wrote it. */
void air__canon_json_num(air__cnum *n, const json_t *v);
/* A TEXT part holding string v appended to parts. */
int air__canon_json_text_part(air__canon *c, air__cpart **parts, size_t *n,
                              size_t *cap, const json_t *v);
/* A part of no canonical form (field names it; type its type): the extra
 * naming it and an OPAQUE part holding v's JSON text. */
int air__canon_json_opaque(air__canon *c, air__cpart **parts, size_t *n,
                           size_t *cap, const json_t *v, const char *field,
                           const char *type);
/* The image at URL string u into p: a base64 data: URL as media type and
 * data, an http(s) URL as a URL; AIR_EINVAL "FIELD: expected ..." for any
 * other value. */
int air__canon_image_url(air__canon *c, const json_t *u, const char *field,
                         air__cpart *p, air_error *err);
/* A TOOL_CALL part of m: id and name (strings), the arguments args (a
 * string copied, or with args_json any value as JSON text; NULL: none),
 * where it was (field, args_field). */
int air__canon_json_call(air__canon *c, air__cmsg *m, const json_t *id,
                         const json_t *name, const json_t *args, bool args_json,
                         const char *field, const char *args_field);
/* A TOOL_RESULT part of m answering call id, at field; its content is
 * for the caller to fill (air__canon_json_result_text or parts). */
air__cpart *air__canon_json_result(air__canon *c, air__cmsg *m,
                                   const json_t *id, const char *field,
                                   int *rc);
/* A tool result's content given as one string (or null / absent: ""). */
int air__canon_json_result_text(air__canon *c, air__cpart *p, const json_t *v);
/* A function tool: name (a string), description and parameters (the input
 * schema, an object) when given. */
int air__canon_json_tool(air__canon *c, const json_t *name, const json_t *desc,
                         const json_t *params);
/* The answer's format as a JSON schema: name and strict when given, the
 * schema's text (an object; else "{}"). */
int air__canon_json_schema(air__canon *c, const json_t *name,
                           const json_t *schema, const json_t *strict);
/* The effort an OpenAI name asks for ("none" ... "xhigh"); false for
 * another value. */
bool air__canon_effort_named(const char *s, air__ceffort *e);
/* The tool choice an OpenAI word asks for ("auto", "required", "none"), or
 * AIR__TC_UNSET. */
air__ctool_choice air__canon_tool_choice_word(const char *s);
/*
 * The top-level fields both OpenAI dialects read alike (parallel_tool_calls,
 * temperature, top_p, user) into c: *done false for any other key. A value
 * of the wrong type is AIR_EINVAL ("KEY: expected ..."); a form the
 * canonical request cannot hold is an extra.
 */
int air__canon_json_openai_field(air__canon *c, const char *key,
                                 const json_t *v, air_error *err, bool *done);

#endif
