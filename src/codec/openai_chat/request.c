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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "codec_json.h"
#include "limits.h"
#include "openai_chat.h"

/* "FIELD: WHAT" into err; returns AIR_EINVAL. */
static int invalid(air_error *err, const char *field, const char *what) {
  if (err != NULL) {
    err->code = AIR_EINVAL;
    snprintf(err->message, sizeof(err->message), "%s: %s", field, what);
  }
  return AIR_EINVAL;
}

/* ---- the same dialect ------------------------------------------------------
 */

int air__oai_build_same(const air__request *req, const air__build_opts *o,
                        air__buf *out, air_error *err) {
  int rc = 0;
  if (req->raw != NULL && o->override_json == NULL) {
    /* The caller's text with model, stream and stream_options set. */
    const char *model = o->model != NULL ? o->model : req->model;
    air__buf mv;
    air__buf_init(&mv, AIR__MAX_MODEL_VALUE_BYTES);
    rc = air__buf_add_json_str(&mv, model ? model : "",
                               model ? strlen(model) : 0);
    const air__patch set[] = {
        {"model", mv.p, AIR__PATCH_SET},
        {"stream", "true", AIR__PATCH_SET},
        {"stream_options", NULL, AIR__PATCH_STREAM_OPTIONS}};
    if (rc == 0) rc = air__request_patch(req, set, 3, out);
    air__buf_cleanup(&mv);
    return rc;
  }
  const json_t *body = air__request_body(req);
  if (!json_is_object(body))
    return invalid(err, "request", "expected a parsed request");
  json_t *root = json_deep_copy(body);
  if (root == NULL) return AIR_ENOMEM;
  rc = air__oai_finish_body(root, req->model, o, err);
  if (rc == 0) rc = air__json_dump(root, JSON_COMPACT, out);
  json_decref(root);
  return rc;
}

/* ---- decoding into the canonical request -----------------------------------
 */

/* Decoding state: the canonical request being filled and where errors go. */
typedef struct dec {
  air__canon *c;
  air_error *err;
} dec;

/* An extra named field (copied into the arena), with v's JSON text when v
 * is given. */
static int extra(dec *d, const char *field, const char *key, const json_t *v) {
  air__str raw = {NULL, 0};
  if (v != NULL) {
    char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (t == NULL) return AIR_ENOMEM;
    raw = air__canon_str(d->c, t, strlen(t));
    free(t);
    if (raw.p == NULL) return AIR_ENOMEM;
  }
  const char *k = key != NULL ? air__canon_fmt(d->c, "%s", key) : NULL;
  if (key != NULL && k == NULL) return AIR_ENOMEM;
  return air__canon_add_extra(d->c, air__canon_fmt(d->c, "%s", field), k, raw);
}

static air__str copy_str(dec *d, const json_t *v) {
  return air__canon_str(d->c, json_string_value(v), json_string_length(v));
}

/* An image_url part's URL as canonical image fields. */
static int image(dec *d, const json_t *part, const char *field, air__cpart *p) {
  char f[AIR__MAX_CANON_FIELD_BYTES];
  const json_t *iu = json_object_get(part, "image_url");
  const json_t *u = json_is_object(iu) ? json_object_get(iu, "url") : iu;
  snprintf(f, sizeof(f), "%s.image_url.url", field);
  if (!json_is_string(u)) return invalid(d->err, f, "expected a string");
  const char *url = json_string_value(u);
  size_t n = json_string_length(u);
  if (n >= 5 && strncasecmp(url, "data:", 5) == 0) {
    const char *comma = memchr(url, ',', n);
    const char *head = url + 5;
    size_t hn = comma ? (size_t)(comma - head) : 0;
    const char *semi = memchr(head, ';', hn);
    if (comma == NULL || hn < 7 || memcmp(comma - 7, ";base64", 7) != 0 ||
        semi == NULL || semi == head)
      return invalid(d->err, f,
                     "expected a base64 data URL (data:TYPE;base64,...)");
    p->media_type = air__canon_str(d->c, head, (size_t)(semi - head));
    p->data = air__canon_str(d->c, comma + 1, n - (size_t)(comma + 1 - url));
    return p->media_type.p != NULL && p->data.p != NULL ? 0 : AIR_ENOMEM;
  }
  if ((n >= 7 && strncasecmp(url, "http://", 7) == 0) ||
      (n >= 8 && strncasecmp(url, "https://", 8) == 0)) {
    p->url = air__canon_str(d->c, url, n);
    return p->url.p != NULL ? 0 : AIR_ENOMEM;
  }
  return invalid(d->err, f, "expected an http(s) or base64 data URL");
}

/* One content part of message i into parts; system: text only. */
static int part(dec *d, const json_t *jp, size_t i, size_t j,
                air__cpart **parts, size_t *n, size_t *cap, bool system) {
  char field[96], f[AIR__MAX_CANON_FIELD_BYTES];
  int rc = 0;
  snprintf(field, sizeof(field), "messages[%zu].content[%zu]", i, j);
  if (!json_is_object(jp)) return invalid(d->err, field, "expected an object");
  const char *type = json_string_value(json_object_get(jp, "type"));
  if (type == NULL) {
    snprintf(f, sizeof(f), "%s.type", field);
    return invalid(d->err, f, "expected a string");
  }
  bool text = strcmp(type, "text") == 0;
  if (text || (!system && strcmp(type, "refusal") == 0)) {
    const json_t *t = json_object_get(jp, type);
    snprintf(f, sizeof(f), "%s.%s", field, type);
    if (!json_is_string(t)) return invalid(d->err, f, "expected a string");
    air__cpart *p = air__canon_add_part(d->c, parts, n, cap, AIR__CP_TEXT, &rc);
    if (p == NULL) return rc;
    p->text = copy_str(d, t);
    return p->text.p != NULL ? 0 : AIR_ENOMEM;
  }
  if (!system && strcmp(type, "image_url") == 0) {
    air__cpart *p =
        air__canon_add_part(d->c, parts, n, cap, AIR__CP_IMAGE, &rc);
    if (p == NULL) return rc;
    p->field = air__canon_fmt(d->c, "%s", field);
    p->type = air__canon_str(d->c, type, strlen(type));
    return image(d, jp, field, p);
  }
  snprintf(f, sizeof(f), "%s.%s", field, type);
  if ((rc = extra(d, f, NULL, NULL)) != 0) return rc;
  air__cpart *p = air__canon_add_part(d->c, parts, n, cap, AIR__CP_OPAQUE, &rc);
  if (p == NULL) return rc;
  char *t = json_dumps(jp, JSON_COMPACT);
  if (t == NULL) return AIR_ENOMEM;
  p->raw = air__canon_str(d->c, t, strlen(t));
  free(t);
  p->field = air__canon_fmt(d->c, "%s", f);
  p->type = air__canon_str(d->c, type, strlen(type));
  return p->raw.p != NULL ? 0 : AIR_ENOMEM;
}

/* A message's content (string, parts or null) into parts. */
static int content(dec *d, const json_t *c, size_t i, air__cpart **parts,
                   size_t *n, size_t *cap, bool system) {
  char field[64];
  int rc = 0;
  if (c == NULL || json_is_null(c)) return 0;
  if (json_is_string(c)) {
    air__cpart *p = air__canon_add_part(d->c, parts, n, cap, AIR__CP_TEXT, &rc);
    if (p == NULL) return rc;
    p->text = copy_str(d, c);
    return p->text.p != NULL ? 0 : AIR_ENOMEM;
  }
  if (!json_is_array(c)) {
    snprintf(field, sizeof(field), "messages[%zu].content", i);
    return invalid(d->err, field, "expected a string or an array");
  }
  size_t j;
  const json_t *jp;
  json_array_foreach(c, j, jp) {
    if ((rc = part(d, jp, i, j, parts, n, cap, system)) != 0) return rc;
  }
  return 0;
}

/* An assistant's tool_calls into TOOL_CALL parts of m. */
static int tool_calls(dec *d, const json_t *calls, size_t i, air__cmsg *m) {
  char field[96], f[AIR__MAX_CANON_FIELD_BYTES];
  int rc = 0;
  if (calls == NULL || json_is_null(calls)) return 0;
  snprintf(field, sizeof(field), "messages[%zu].tool_calls", i);
  if (!json_is_array(calls)) return invalid(d->err, field, "expected an array");
  size_t j;
  const json_t *tc;
  json_array_foreach(calls, j, tc) {
    snprintf(field, sizeof(field), "messages[%zu].tool_calls[%zu]", i, j);
    if (!json_is_object(tc))
      return invalid(d->err, field, "expected an object");
    const json_t *type = json_object_get(tc, "type");
    if (type != NULL && !json_is_null(type) &&
        !(json_is_string(type) &&
          strcmp(json_string_value(type), "function") == 0)) {
      snprintf(f, sizeof(f), "%s.type", field);
      if ((rc = extra(d, f, NULL, NULL)) != 0) return rc;
      continue;
    }
    const json_t *fn = json_object_get(tc, "function");
    const json_t *id = json_object_get(tc, "id");
    const json_t *name = json_object_get(fn, "name");
    const json_t *args = json_object_get(fn, "arguments");
    if (!json_is_string(id)) {
      snprintf(f, sizeof(f), "%s.id", field);
      return invalid(d->err, f, "expected a string");
    }
    if (!json_is_object(fn)) {
      snprintf(f, sizeof(f), "%s.function", field);
      return invalid(d->err, f, "expected an object");
    }
    if (!json_is_string(name)) {
      snprintf(f, sizeof(f), "%s.function.name", field);
      return invalid(d->err, f, "expected a string");
    }
    snprintf(f, sizeof(f), "%s.function.arguments", field);
    if (args != NULL && !json_is_null(args) && !json_is_string(args))
      return invalid(d->err, f, "expected a string");
    air__cpart *p = air__canon_add_part(d->c, &m->parts, &m->n_parts,
                                        &m->cap_parts, AIR__CP_TOOL_CALL, &rc);
    if (p == NULL) return rc;
    p->id = copy_str(d, id);
    p->name = copy_str(d, name);
    if (json_is_string(args)) p->args = copy_str(d, args);
    p->field = air__canon_fmt(d->c, "%s", field);
    p->args_field = air__canon_fmt(d->c, "%s", f);
    if (p->id.p == NULL || p->name.p == NULL || p->args_field == NULL ||
        (json_is_string(args) && p->args.p == NULL))
      return AIR_ENOMEM;
  }
  return 0;
}

/* A tool message into a TOOL_RESULT part of a user turn. */
static int tool_result(dec *d, const json_t *jm, size_t i) {
  char field[64];
  int rc = 0;
  const json_t *id = json_object_get(jm, "tool_call_id");
  if (!json_is_string(id)) {
    snprintf(field, sizeof(field), "messages[%zu].tool_call_id", i);
    return invalid(d->err, field, "expected a string");
  }
  air__cmsg *m = air__canon_add_msg(d->c, AIR__ROLE_USER, &rc);
  if (m == NULL) return rc;
  air__cpart *p = air__canon_add_part(d->c, &m->parts, &m->n_parts,
                                      &m->cap_parts, AIR__CP_TOOL_RESULT, &rc);
  if (p == NULL) return rc;
  p->id = copy_str(d, id);
  p->field = air__canon_fmt(d->c, "messages[%zu]", i);
  if (p->id.p == NULL) return AIR_ENOMEM;
  const json_t *c = json_object_get(jm, "content");
  if (c == NULL || json_is_null(c) || json_is_string(c)) {
    p->content_string = true;
    p->text = air__canon_str(d->c, json_string_value(c),
                             json_is_string(c) ? json_string_length(c) : 0);
    return p->text.p != NULL ? 0 : AIR_ENOMEM;
  }
  return content(d, c, i, &p->parts, &p->n_parts, &p->cap_parts, false);
}

static int messages(dec *d, const json_t *msgs) {
  char field[64];
  if (!json_is_array(msgs))
    return invalid(d->err, "messages", "expected an array");
  size_t i;
  const json_t *jm;
  json_array_foreach(msgs, i, jm) {
    snprintf(field, sizeof(field), "messages[%zu]", i);
    if (!json_is_object(jm))
      return invalid(d->err, field, "expected an object");
    const char *role = json_string_value(json_object_get(jm, "role"));
    if (role == NULL) {
      snprintf(field, sizeof(field), "messages[%zu].role", i);
      return invalid(d->err, field, "expected a string");
    }
    const json_t *c = json_object_get(jm, "content");
    const json_t *fc = json_object_get(jm, "function_call");
    int rc = 0;
    if (fc != NULL && !json_is_null(fc)) {
      snprintf(field, sizeof(field), "messages[%zu].function_call", i);
      if ((rc = extra(d, field, NULL, NULL)) != 0) return rc;
    }
    air__cmsg *m = NULL;
    bool system = strcmp(role, "system") == 0;
    bool developer = strcmp(role, "developer") == 0;
    if (system || developer || strcmp(role, "user") == 0 ||
        strcmp(role, "assistant") == 0) {
      m = air__canon_add_msg(d->c,
                             system || developer ? AIR__ROLE_SYSTEM
                             : role[0] == 'u'    ? AIR__ROLE_USER
                                                 : AIR__ROLE_ASSISTANT,
                             &rc);
      if (m == NULL) return rc;
      m->developer = developer;
      rc = content(d, c, i, &m->parts, &m->n_parts, &m->cap_parts,
                   system || developer);
      if (rc == 0 && m->role == AIR__ROLE_ASSISTANT)
        rc = tool_calls(d, json_object_get(jm, "tool_calls"), i, m);
    } else if (strcmp(role, "tool") == 0) {
      rc = tool_result(d, jm, i);
    } else {
      snprintf(field, sizeof(field), "messages[%zu].role", i);
      rc = extra(d, field, NULL, NULL);
    }
    if (rc != 0) return rc;
  }
  return 0;
}

static int tools(dec *d, const json_t *v) {
  char field[64], f[96];
  if (!json_is_array(v)) return invalid(d->err, "tools", "expected an array");
  size_t i;
  const json_t *t;
  json_array_foreach(v, i, t) {
    snprintf(field, sizeof(field), "tools[%zu]", i);
    if (!json_is_object(t)) return invalid(d->err, field, "expected an object");
    const char *type = json_string_value(json_object_get(t, "type"));
    if (type != NULL && strcmp(type, "function") != 0) {
      snprintf(f, sizeof(f), "%s.type", field);
      int rc = extra(d, f, NULL, NULL);
      if (rc != 0) return rc;
      continue;
    }
    const json_t *fn = json_object_get(t, "function");
    const json_t *name = json_object_get(fn, "name");
    const json_t *desc = json_object_get(fn, "description");
    const json_t *params = json_object_get(fn, "parameters");
    if (!json_is_object(fn)) {
      snprintf(f, sizeof(f), "%s.function", field);
      return invalid(d->err, f, "expected an object");
    }
    if (!json_is_string(name)) {
      snprintf(f, sizeof(f), "%s.function.name", field);
      return invalid(d->err, f, "expected a string");
    }
    air__ctool *ct;
    int rc = air__canon_add_tool(d->c, &ct);
    if (rc != 0) return rc;
    ct->name = copy_str(d, name);
    if (ct->name.p == NULL) return AIR_ENOMEM;
    if (json_is_string(desc)) {
      ct->description = copy_str(d, desc);
      if (ct->description.p == NULL) return AIR_ENOMEM;
    }
    if (json_is_object(params)) {
      char *s = json_dumps(params, JSON_COMPACT);
      if (s == NULL) return AIR_ENOMEM;
      ct->schema = air__canon_str(d->c, s, strlen(s));
      free(s);
      if (ct->schema.p == NULL) return AIR_ENOMEM;
    }
  }
  return 0;
}

static int tool_choice(dec *d, const json_t *tc) {
  const char *s = json_string_value(tc);
  if (s != NULL) {
    air__ctool_choice v = strcmp(s, "auto") == 0       ? AIR__TC_AUTO
                          : strcmp(s, "required") == 0 ? AIR__TC_REQUIRED
                          : strcmp(s, "none") == 0     ? AIR__TC_NONE
                                                       : AIR__TC_UNSET;
    if (v == AIR__TC_UNSET) return extra(d, "tool_choice", "tool_choice", tc);
    d->c->tool_choice = v;
    return 0;
  }
  const char *type = json_string_value(json_object_get(tc, "type"));
  const json_t *name = json_object_get(json_object_get(tc, "function"), "name");
  if (type == NULL || strcmp(type, "function") != 0)
    return extra(d, "tool_choice", "tool_choice", tc);
  if (!json_is_string(name))
    return invalid(d->err, "tool_choice.function.name", "expected a string");
  d->c->tool_choice = AIR__TC_TOOL;
  d->c->tool_choice_name = copy_str(d, name);
  return d->c->tool_choice_name.p != NULL ? 0 : AIR_ENOMEM;
}

static int stop(dec *d, const json_t *v) {
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

/* response_format: text (nothing), json_object, json_schema {name, schema,
 * strict}; another type is an extra. */
static int response_format(dec *d, const json_t *v) {
  air__canon *c = d->c;
  const char *t = json_string_value(json_object_get(v, "type"));
  if (t != NULL && strcmp(t, "text") == 0) return 0;
  c->format_field = "response_format";
  if (t != NULL && strcmp(t, "json_object") == 0) {
    c->format = AIR__FMT_JSON_OBJECT;
    return 0;
  }
  if (t == NULL || strcmp(t, "json_schema") != 0)
    return extra(d, "response_format", "response_format", v);
  const json_t *js = json_object_get(v, "json_schema");
  if (!json_is_object(js))
    return invalid(d->err, "response_format.json_schema", "expected an object");
  const json_t *name = json_object_get(js, "name");
  const json_t *schema = json_object_get(js, "schema");
  const json_t *strict = json_object_get(js, "strict");
  if (schema != NULL && !json_is_null(schema) && !json_is_object(schema))
    return invalid(d->err, "response_format.json_schema.schema",
                   "expected an object");
  c->format = AIR__FMT_JSON_SCHEMA;
  if (json_is_string(name) && (c->format_name = copy_str(d, name)).p == NULL)
    return AIR_ENOMEM;
  if (json_is_boolean(strict)) c->format_strict = json_is_true(strict);
  char *s =
      json_is_object(schema) ? json_dumps(schema, JSON_COMPACT) : strdup("{}");
  if (s == NULL) return AIR_ENOMEM;
  c->format_schema = air__canon_str(c, s, strlen(s));
  free(s);
  return c->format_schema.p != NULL ? 0 : AIR_ENOMEM;
}

static void num(air__cnum *n, const json_t *v) {
  n->set = true;
  n->is_int = json_is_integer(v);
  n->i = n->is_int ? (int64_t)json_integer_value(v) : 0;
  n->d = json_number_value(v);
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

static bool ignored(const char *key) {
  for (size_t i = 0; i < sizeof(ignored_fields) / sizeof(ignored_fields[0]);
       i++)
    if (strcmp(key, ignored_fields[i]) == 0) return true;
  return false;
}

/* One top-level field (not ignored, not null). */
static int field(dec *d, const char *key, const json_t *v) {
  air__canon *c = d->c;
  if (strcmp(key, "n") == 0) {
    if (json_is_integer(v) && json_integer_value(v) == 1) return 0;
    return extra(d, key, key, v);
  }
  if (strcmp(key, "response_format") == 0) return response_format(d, v);
  if (strcmp(key, "reasoning_effort") == 0) {
    static const char *const names[] = {"none",   "minimal", "low",
                                        "medium", "high",    "xhigh"};
    const char *s = json_string_value(v);
    for (size_t i = 0; s != NULL && i < sizeof(names) / sizeof(names[0]); i++) {
      if (strcmp(s, names[i]) == 0) {
        c->effort =
            i == 5 ? AIR__EFFORT_MAX : (air__ceffort)(AIR__EFFORT_NONE + i);
        c->reasoning_field = "reasoning_effort";
        return 0;
      }
    }
    return extra(d, key, key, v);
  }
  if (strcmp(key, "parallel_tool_calls") == 0) {
    if (json_is_false(v)) {
      c->parallel_tools = 0;
      return 0;
    }
    return json_is_true(v) ? 0 : extra(d, key, key, v);
  }
  if (strcmp(key, "temperature") == 0) {
    if (!json_is_number(v)) return invalid(d->err, key, "expected a number");
    num(&c->temperature, v);
    return 0;
  }
  if (strcmp(key, "top_p") == 0) {
    if (!json_is_number(v)) return invalid(d->err, key, "expected a number");
    num(&c->top_p, v);
    return 0;
  }
  if (strcmp(key, "stop") == 0) return stop(d, v);
  if (strcmp(key, "tools") == 0) return tools(d, v);
  if (strcmp(key, "tool_choice") == 0) return tool_choice(d, v);
  if (strcmp(key, "user") == 0) {
    if (!json_is_string(v)) return invalid(d->err, key, "expected a string");
    c->user = copy_str(d, v);
    return c->user.p != NULL ? 0 : AIR_ENOMEM;
  }
  return extra(d, key, key, v);
}

int air__oai_decode_request(const air__request *req, air__canon *c,
                            air_error *err) {
  const json_t *body = air__request_body(req);
  if (!json_is_object(body))
    return invalid(err, "request", "expected a parsed request");
  dec d = {c, err};
  const json_t *mt = json_object_get(body, "max_completion_tokens");
  if (mt == NULL || json_is_null(mt)) mt = json_object_get(body, "max_tokens");
  if (json_is_integer(mt) && json_integer_value(mt) > 0)
    c->max_tokens = (int64_t)json_integer_value(mt);
  int rc = messages(&d, json_object_get(body, "messages"));
  const char *key;
  const json_t *v;
  json_object_foreach((json_t *)body, key, v) {
    if (rc != 0) break;
    if (json_is_null(v) || ignored(key)) continue;
    rc = field(&d, key, v);
  }
  return rc;
}
