/*
 * Requests of a caller that speaks OpenAI chat completions: the
 * same-dialect upstream body (the byte fast path, or the caller's tree
 * under an override), and the decoding of the body into the canonical
 * request for a target of another dialect (canon.h).
 *
 * Decoding keeps, in canonical form:
 *   - system and developer messages as system turns (their text parts; any
 *     other part is an extra), user and assistant messages with their text,
 *     image_url (a data: URL as media type and base64 data, an http(s) URL
 *     as a URL; anything else is invalid), refusal parts (as text) and
 *     tool_calls (arguments as given), tool messages as tool results in a
 *     user turn (content: a string, or parts);
 *   - tools (function tools), tool_choice, parallel_tool_calls false,
 *     stop, max_completion_tokens (or else max_tokens), temperature, top_p,
 *     user;
 *   - as extras (a target of another dialect cannot say them: skipped, or
 *     dropped under drop_params): n > 1, response_format json_object /
 *     json_schema, every other top-level field (reasoning_effort, audio,
 *     functions, ...), message roles other than system / developer / user /
 *     assistant / tool, a message's function_call, content parts other
 *     than text / image_url / refusal (named by their payload key,
 *     "messages[1].content[0].input_audio"), tools of a type other than
 *     function and tool calls of a type other than function, tool_choice
 *     forms other than the four known;
 *   - nothing of: stream, stream_options, store, metadata, seed, logprobs,
 *     top_logprobs, presence_penalty, frequency_penalty, logit_bias,
 *     service_tier, prompt_cache_key, safety_identifier, prediction, n 1,
 *     response_format text, parallel_tool_calls true, null values, a
 *     message's "name" (ours to set, no meaning upstream, or only a hint to
 *     a provider: docs/design.md §5).
 */
#include <stdio.h>
#include <string.h>

#include "codec_json.h"
#include "error.h"
#include "limits.h"
#include "openai_chat.h"

/* "FIELD: WHAT" into err; returns AIR_EINVAL. */
static int invalid(air_error *err, const char *field, const char *what) {
  return air__error_set(err, AIR_EINVAL, "%s: %s", field, what);
}

/* ---- the same dialect ------------------------------------------------------
 */

int air__oai_build_same(const air__request *req, const air__build_opts *o,
                        air__buf *out, air_error *err) {
  /* The caller's text with model, stream and stream_options set. */
  air__patch set[] = {{"model", NULL, AIR__PATCH_SET},
                      {"stream", "true", AIR__PATCH_SET},
                      {"stream_options", NULL, AIR__PATCH_STREAM_OPTIONS}};
  return air__build_same(req, o, set, 3, air__oai_finish_body, out, err);
}

/* ---- decoding into the canonical request -----------------------------------
 */

/* One content part at field (type: its type) into parts; system: text
 * only. */
static int part(air__cdec *d, const json_t *jp, const char *field,
                const char *type, air__cpart **parts, size_t *n, size_t *cap,
                bool system) {
  char f[AIR__MAX_CANON_FIELD_BYTES];
  snprintf(f, sizeof(f), "%s.%s", field, type);
  if (strcmp(type, "text") == 0 || (!system && strcmp(type, "refusal") == 0)) {
    const json_t *t = json_object_get(jp, type);
    if (!json_is_string(t)) return invalid(d->err, f, "expected a string");
    return air__canon_json_text_part(d->c, parts, n, cap, t);
  }
  if (!system && strcmp(type, "image_url") == 0) {
    const json_t *iu = json_object_get(jp, "image_url");
    snprintf(f, sizeof(f), "%s.image_url.url", field);
    return air__canon_json_image(
        d, parts, n, cap, json_is_object(iu) ? json_object_get(iu, "url") : iu,
        field, type, f);
  }
  return air__canon_json_opaque(d->c, parts, n, cap, jp, f, type);
}

/* A required member of a tool call or tool: "FIELD.KEY: expected TYPE"
 * unless ok. */
static int want(air__cdec *d, bool ok, const char *field, const char *key,
                const char *type) {
  if (ok) return 0;
  return air__error_set(d->err, AIR_EINVAL, "%s.%s: expected %s", field, key,
                        type);
}

/* An assistant's tool call (field: "messages[i].tool_calls[j]") into a
 * TOOL_CALL part of m. */
static int tool_call(air__cdec *d, const json_t *tc, const char *field,
                     air__cmsg *m) {
  char f[AIR__MAX_CANON_FIELD_BYTES];
  int rc;
  const json_t *type = json_object_get(tc, "type");
  if (type != NULL && !json_is_null(type) &&
      !(json_is_string(type) &&
        strcmp(json_string_value(type), "function") == 0)) {
    snprintf(f, sizeof(f), "%s.type", field);
    return air__canon_json_extra(d->c, f, NULL, NULL);
  }
  const json_t *fn = json_object_get(tc, "function");
  const json_t *id = json_object_get(tc, "id");
  const json_t *name = json_object_get(fn, "name");
  const json_t *args = json_object_get(fn, "arguments");
  if ((rc = want(d, json_is_string(id), field, "id", "a string")) ||
      (rc = want(d, json_is_object(fn), field, "function", "an object")) ||
      (rc = want(d, json_is_string(name), field, "function.name", "a string")))
    return rc;
  snprintf(f, sizeof(f), "%s.function.arguments", field);
  if (args != NULL && !json_is_null(args) && !json_is_string(args))
    return invalid(d->err, f, "expected a string");
  return air__canon_json_call(d->c, m, id, name, args, false, field, f);
}

/* An assistant's tool_calls into TOOL_CALL parts of m. */
static int tool_calls(air__cdec *d, const json_t *calls, size_t i,
                      air__cmsg *m) {
  char field[96];
  if (calls == NULL || json_is_null(calls)) return 0;
  snprintf(field, sizeof(field), "messages[%zu].tool_calls", i);
  if (!json_is_array(calls)) return invalid(d->err, field, "expected an array");
  size_t j;
  const json_t *tc;
  json_array_foreach(calls, j, tc) {
    snprintf(field, sizeof(field), "messages[%zu].tool_calls[%zu]", i, j);
    if (!json_is_object(tc))
      return invalid(d->err, field, "expected an object");
    int rc = tool_call(d, tc, field, m);
    if (rc != 0) return rc;
  }
  return 0;
}

/* A tool message (at field "messages[i]") into a TOOL_RESULT part of a
 * user turn. */
static int tool_result(air__cdec *d, const json_t *jm, const char *field) {
  int rc = 0;
  const json_t *id = json_object_get(jm, "tool_call_id");
  if ((rc = want(d, json_is_string(id), field, "tool_call_id", "a string")))
    return rc;
  air__cmsg *m = air__canon_add_msg(d->c, AIR__ROLE_USER, &rc);
  if (m == NULL) return rc;
  air__cpart *p = air__canon_json_result(d->c, m, id, field, &rc);
  if (p == NULL) return rc;
  const json_t *c = json_object_get(jm, "content");
  if (c == NULL || json_is_null(c) || json_is_string(c))
    return air__canon_json_result_text(d->c, p, c);
  return air__canon_json_content(d, c, field, &p->parts, &p->n_parts,
                                 &p->cap_parts, false, part);
}

/* Message i (at field "messages[i]"). */
static int message(air__cdec *d, const json_t *jm, const char *field,
                   size_t i) {
  char f[64];
  const char *role = json_string_value(json_object_get(jm, "role"));
  if (role == NULL) return want(d, false, field, "role", "a string");
  int rc;
  const json_t *fc = json_object_get(jm, "function_call");
  if (fc != NULL && !json_is_null(fc)) {
    snprintf(f, sizeof(f), "%s.function_call", field);
    if ((rc = air__canon_json_extra(d->c, f, NULL, NULL)) != 0) return rc;
  }
  bool system = strcmp(role, "system") == 0;
  bool developer = strcmp(role, "developer") == 0;
  if (strcmp(role, "tool") == 0) return tool_result(d, jm, field);
  if (!system && !developer && strcmp(role, "user") != 0 &&
      strcmp(role, "assistant") != 0) {
    snprintf(f, sizeof(f), "%s.role", field);
    return air__canon_json_extra(d->c, f, NULL, NULL);
  }
  air__cmsg *m = air__canon_add_msg(d->c,
                                    system || developer ? AIR__ROLE_SYSTEM
                                    : role[0] == 'u'    ? AIR__ROLE_USER
                                                        : AIR__ROLE_ASSISTANT,
                                    &rc);
  if (m == NULL) return rc;
  m->developer = developer;
  rc = air__canon_json_content(d, json_object_get(jm, "content"), field,
                               &m->parts, &m->n_parts, &m->cap_parts,
                               system || developer, part);
  if (rc == 0 && m->role == AIR__ROLE_ASSISTANT)
    rc = tool_calls(d, json_object_get(jm, "tool_calls"), i, m);
  return rc;
}

/* Tool i (at field "tools[i]"): a function tool, or an extra. */
static int tool(air__cdec *d, const json_t *t, const char *field, size_t i) {
  char f[96];
  (void)i;
  const char *type = json_string_value(json_object_get(t, "type"));
  int rc;
  if (type != NULL && strcmp(type, "function") != 0) {
    snprintf(f, sizeof(f), "%s.type", field);
    return air__canon_json_extra(d->c, f, NULL, NULL);
  }
  const json_t *fn = json_object_get(t, "function");
  const json_t *name = json_object_get(fn, "name");
  if ((rc = want(d, json_is_object(fn), field, "function", "an object")) ||
      (rc = want(d, json_is_string(name), field, "function.name", "a string")))
    return rc;
  return air__canon_json_tool(d->c, name, json_object_get(fn, "description"),
                              json_object_get(fn, "parameters"));
}

static int stop(air__cdec *d, const json_t *v) {
  char field[32];
  if (json_is_string(v))
    return air__canon_add_stop(d->c, json_string_value(v),
                               json_string_length(v));
  if (!json_is_array(v))
    return invalid(d->err, "stop", "expected a string or an array");
  size_t i;
  const json_t *s;
  json_array_foreach(v, i, s) {
    if (!json_is_string(s)) {
      snprintf(field, sizeof(field), "stop[%zu]", i);
      return invalid(d->err, field, "expected a string");
    }
    int rc =
        air__canon_add_stop(d->c, json_string_value(s), json_string_length(s));
    if (rc != 0) return rc;
  }
  return 0;
}

/* Passed over: ours to set, or only a hint to a provider (docs/design.md §5:
 * dropped for a target that lacks them, never a reason to skip it). */
static const char *const ignored_fields[] = {"model",
                                             "stream",
                                             "stream_options",
                                             "store",
                                             "metadata",
                                             "seed",
                                             "logprobs",
                                             "top_logprobs",
                                             "presence_penalty",
                                             "frequency_penalty",
                                             "logit_bias",
                                             "service_tier",
                                             "prompt_cache_key",
                                             "safety_identifier",
                                             "prediction",
                                             "messages",
                                             "max_tokens",
                                             "max_completion_tokens"};

/* One top-level field (not ignored, not null). */
static int field(air__cdec *d, const char *key, const json_t *v) {
  air__canon *c = d->c;
  bool done;
  int rc = air__canon_json_openai_field(c, key, v, d->err, &done);
  if (done) return rc;
  if (strcmp(key, "n") == 0) {
    if (json_is_integer(v) && json_integer_value(v) == 1) return 0;
    return air__canon_json_extra(c, key, key, v);
  }
  if (strcmp(key, "response_format") == 0)
    return air__canon_json_format(d, v, "response_format", "json_schema",
                                  "response_format", v);
  if (strcmp(key, "reasoning_effort") == 0) {
    if (!air__canon_effort_named(json_string_value(v), &c->effort))
      return air__canon_json_extra(c, key, key, v);
    c->reasoning_field = "reasoning_effort";
    return 0;
  }
  if (strcmp(key, "stop") == 0) return stop(d, v);
  if (strcmp(key, "tools") == 0)
    return air__canon_json_objects(d, v, "tools", tool);
  if (strcmp(key, "tool_choice") == 0)
    return air__canon_json_tool_choice(
        d, v, json_object_get(json_object_get(v, "function"), "name"),
        "tool_choice.function.name");
  return air__canon_json_extra(c, key, key, v);
}

int air__oai_decode_request(const air__request *req, air__canon *c,
                            air_error *err) {
  const json_t *body;
  int rc = air__canon_json_body(req, err, &body);
  if (rc != 0) return rc;
  air__cdec d = {c, err};
  const json_t *mt = json_object_get(body, "max_completion_tokens");
  if (mt == NULL || json_is_null(mt)) mt = json_object_get(body, "max_tokens");
  if (json_is_integer(mt) && json_integer_value(mt) > 0)
    c->max_tokens = (int64_t)json_integer_value(mt);
  rc = air__canon_json_objects(&d, json_object_get(body, "messages"),
                               "messages", message);
  if (rc != 0) return rc;
  return air__canon_json_fields(
      &d, body, ignored_fields,
      sizeof(ignored_fields) / sizeof(ignored_fields[0]), field);
}
