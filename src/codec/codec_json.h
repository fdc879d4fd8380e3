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
/* The same into *body as an error code: 0, AIR_ENOMEM when its validated
 * text could not be parsed again, AIR_EINVAL when the request has neither
 * text nor tree (the caller names it). */
int air__request_tree(const air__request *r, const json_t **body);

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

/* A tool's object before its description and schema: {name} for most,
 * with more members first for some dialects. */
typedef json_t *(*air__tool_head_fn)(const air__ctool *t);
/* A tool's object once complete, as the tools array holds it (steals def;
 * NULL: def itself). */
typedef json_t *(*air__tool_wrap_fn)(json_t *def);
/* c's tools, each head(t) with its "description" (when given) and its
 * input schema at schema_key, wrapped, as the array "tools" of out;
 * nothing when there are none. */
int air__json_tools(const air__canon *c, json_t *out, air__tool_head_fn head,
                    const char *schema_key, air__tool_wrap_fn wrap);
/* The sampling fields both OpenAI dialects write alike: max tokens (at
 * max_key), temperature (clamped to 0..2), top_p. */
int air__json_openai_sampling(const air__canon *c, json_t *out,
                              const char *max_key);
/* The OpenAI tool_choice ("auto", "required", "none", or the named
 * function: {type: function, function: {name}} when nested, else {type:
 * function, name}), then parallel_tool_calls false when parallel calls
 * are off, and user. */
int air__json_openai_choice(const air__canon *c, json_t *out, bool nested);
/* A tool result's content as one string into *out: its string, or its
 * text parts joined with "\n" (air__json_joined). */
int air__json_result_text(const air__cpart *p, json_t **out);

/* Whether a whole body's root is an answer of the dialect. */
typedef bool (*air__body_is_fn)(const json_t *root);
/* A whole body's parts handed over from its root (cb's first non-zero, or
 * an error). */
typedef int (*air__body_walk_fn)(air__decoder *d, const json_t *root,
                                 air__part_cb cb, void *data);
/* The ops' decode_body: body parsed (jansson flags), AIR_EPARSE unless
 * is(root), then its parts through walk; d->done set after a walk that
 * returned 0 when done. */
int air__json_decode_body(air__decoder *d, const char *body, size_t n,
                          size_t flags, air__body_is_fn is,
                          air__body_walk_fn walk, bool done, air__part_cb cb,
                          void *data);
/* A body's START (its "id" and "model"): a body is one whole answer, so
 * it has its START whatever the decoder saw before. */
int air__json_body_start(air__decoder *d, const json_t *root, air__part_cb cb,
                         void *data);
/* USAGE from a body's usage object u (when it is one): the counts at
 * in_key and out_key (air__json_count); 0 otherwise. */
int air__json_body_usage(air__decoder *d, const json_t *u, const char *in_key,
                         const char *out_key, air__part_cb cb, void *data);

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
 * into the canon's arena; a NULL .p is out of memory. A body invalid in
 * itself is AIR_EINVAL with err naming the field ("FIELD: expected ...").
 */

/* A caller body being decoded: the canonical request being filled and
 * where errors go. */
typedef struct air__cdec {
  air__canon *c;
  air_error *err;
} air__cdec;

/* The request's JSON object into *body: 0, or AIR_EINVAL "request:
 * expected a parsed request" when it has none. */
int air__canon_json_body(const air__request *req, air_error *err,
                         const json_t **body);
/* The top-level fields of body, in its order, through field: all but the
 * null ones and those named in skip (n_skip names); the first error. */
typedef int (*air__cfield_fn)(air__cdec *d, const char *key, const json_t *v);
int air__canon_json_fields(air__cdec *d, const json_t *body,
                           const char *const *skip, size_t n_skip,
                           air__cfield_fn field);
/* Each element of v, the array at key (a top-level field, or a field of
 * one), through each with its field name "KEY[i]": AIR_EINVAL "KEY:
 * expected an array" or "KEY[i]: expected an object" for another value. */
typedef int (*air__cobject_fn)(air__cdec *d, const json_t *el,
                               const char *field, size_t i);
int air__canon_json_objects(air__cdec *d, const json_t *v, const char *key,
                            air__cobject_fn each);
/*
 * A message's content at base ("BASE.content"): null or absent nothing, a
 * string one TEXT part, an array its parts "BASE.content[j]" each through
 * part with its string "type" (a part that is no object, or has none, is
 * AIR_EINVAL); any other value AIR_EINVAL. system: the content of system
 * instructions (the dialect keeps only their text).
 */
typedef int (*air__cpart_fn)(air__cdec *d, const json_t *jp, const char *field,
                             const char *type, air__cpart **parts, size_t *n,
                             size_t *cap, bool system);
int air__canon_json_content(air__cdec *d, const json_t *v, const char *base,
                            air__cpart **parts, size_t *n, size_t *cap,
                            bool system, air__cpart_fn part);

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
/* An IMAGE part (at field, of the caller's type) of the image at URL
 * string u appended to parts: a base64 data: URL as media type and data,
 * an http(s) URL as a URL; AIR_EINVAL "URL_FIELD: expected ..." for any
 * other value. */
int air__canon_json_image(air__cdec *d, air__cpart **parts, size_t *n,
                          size_t *cap, const json_t *u, const char *field,
                          const char *type, const char *url_field);
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
/* An OpenAI tool_choice tc: "auto", "required", "none", or {type:
 * function} with name (the function's name, looked up by the dialect;
 * name_field names it in an error); another form is an extra. */
int air__canon_json_tool_choice(air__cdec *d, const json_t *tc,
                                const json_t *name, const char *name_field);
/*
 * An OpenAI answer format fmt (field: its name, "response_format" or
 * "text.format", kept in c->format_field): text nothing, json_object,
 * json_schema {name, schema, strict}, in fmt or (nest not NULL) in its
 * member nest; another type is an extra named field, of key with value v.
 */
int air__canon_json_format(air__cdec *d, const json_t *fmt, const char *field,
                           const char *nest, const char *key, const json_t *v);
/*
 * The top-level fields both OpenAI dialects read alike (parallel_tool_calls,
 * temperature, top_p, user) into c: *done false for any other key. A value
 * of the wrong type is AIR_EINVAL ("KEY: expected ..."); a form the
 * canonical request cannot hold is an extra.
 */
int air__canon_json_openai_field(air__canon *c, const char *key,
                                 const json_t *v, air_error *err, bool *done);

#endif
