/*
 * Requests of a caller that speaks the OpenAI Responses API: the
 * same-dialect upstream body (the byte fast path, or the caller's tree
 * under an override), and the decoding of the body into the canonical
 * request for a target of another dialect (canon.h).
 *
 * Decoding keeps, in canonical form:
 *   - "instructions" as the system text given apart; "input" as one user
 *     turn (a string) or items: messages (role system / developer / user /
 *     assistant; content a string or input_text / output_text / refusal /
 *     input_image parts), function_call (a tool call of an assistant
 *     turn), function_call_output (a tool result of a user turn), reasoning
 *     (its summary text, encrypted_content as the provider-bound opaque,
 *     dropped for a target of another dialect);
 *   - function tools, and the function tools of a "namespace" tool
 *     (flattened); tool_choice (auto / required / none / a function);
 *     parallel_tool_calls false; max_output_tokens; temperature; top_p;
 *     user;
 *   - text.format json_schema {name, schema, strict} / json_object as the
 *     answer's format, reasoning.effort as the reasoning effort (as chat's
 *     response_format and reasoning_effort);
 *   - as extras (a target of another dialect cannot say them: skipped, or
 *     dropped under drop_params): previous_response_id, conversation,
 *     background true, prompt, item_reference and other item types,
 *     input_file parts, other text.format types and reasoning.effort
 *     values, tool_choice forms other than the four known, and every
 *     unknown top-level field;
 *   - nothing of (ours to set, or only hints: docs/design.md §5): stream,
 *     stream_options, store, include, metadata, prompt_cache_key,
 *     safety_identifier, service_tier, truncation, top_logprobs,
 *     max_tool_calls, text.verbosity, reasoning.summary (the summary parts
 *     are what a reasoning target streams anyway), and built-in tools
 *     (web_search, file_search, code_interpreter, computer_use, ...), which
 *     only OpenAI can run: they are removed for a target of another
 *     dialect.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "openai_responses.h"

/* "FIELD: WHAT" into err; returns AIR_EINVAL. */
static int invalid(air_error *err, const char *field, const char *what) {
  if (err != NULL) {
    err->code = AIR_EINVAL;
    snprintf(err->message, sizeof(err->message), "%s: %s", field, what);
  }
  return AIR_EINVAL;
}

static const char *const builtin_tools[] = {"web_search",
                                            "web_search_preview",
                                            "web_search_2025_08_26",
                                            "web_search_preview_2025_03_11",
                                            "file_search",
                                            "code_interpreter",
                                            "computer_use",
                                            "computer_use_preview",
                                            "image_generation",
                                            "local_shell",
                                            "mcp",
                                            "shell",
                                            "apply_patch",
                                            "custom"};

bool air__rsp_builtin_tool(const char *type) {
  for (size_t i = 0; i < sizeof(builtin_tools) / sizeof(builtin_tools[0]); i++)
    if (strcmp(type, builtin_tools[i]) == 0) return true;
  return false;
}

/* ---- the same dialect ------------------------------------------------------
 */

int air__rsp_build_same(const air__request *req, const air__build_opts *o,
                        air__buf *out, air_error *err) {
  int rc = 0;
  if (req->raw != NULL && o->override_json == NULL) {
    /* The caller's text with model and stream set. */
    const char *model = o->model != NULL ? o->model : req->model;
    air__buf mv;
    air__buf_init(&mv, AIR__MAX_MODEL_VALUE_BYTES);
    rc = air__buf_add_json_str(&mv, model ? model : "",
                               model ? strlen(model) : 0);
    const air__patch set[] = {{"model", mv.p, AIR__PATCH_SET},
                              {"stream", "true", AIR__PATCH_SET}};
    if (rc == 0) rc = air__request_patch(req, set, 2, out);
    air__buf_cleanup(&mv);
    return rc;
  }
  const json_t *body = air__request_body(req);
  if (!json_is_object(body))
    return invalid(err, "request", "expected a parsed request");
  json_t *root = json_deep_copy(body);
  if (root == NULL) return AIR_ENOMEM;
  rc = air__rsp_finish_body(root, req->model, o, err);
  if (rc == 0) rc = air__json_dump(root, JSON_COMPACT, out);
  json_decref(root);
  return rc;
}

/* ---- decoding into the canonical request -----------------------------------
 */

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

/* An input_image's image_url (a data: URL or an http(s) URL). */
static int image(dec *d, const json_t *jp, const char *field, air__cpart *p) {
  char f[AIR__MAX_CANON_FIELD_BYTES + 16];
  const json_t *u = json_object_get(jp, "image_url");
  snprintf(f, sizeof(f), "%s.image_url", field);
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

/* One content part into parts; system: text only. */
static int part(dec *d, const json_t *jp, const char *base, size_t j,
                air__cpart **parts, size_t *n, size_t *cap, bool system) {
  char field[AIR__MAX_CANON_FIELD_BYTES], f[AIR__MAX_CANON_FIELD_BYTES + 32];
  int rc = 0;
  snprintf(field, sizeof(field), "%s.content[%zu]", base, j);
  if (!json_is_object(jp)) return invalid(d->err, field, "expected an object");
  const char *type = json_string_value(json_object_get(jp, "type"));
  if (type == NULL) {
    snprintf(f, sizeof(f), "%s.type", field);
    return invalid(d->err, f, "expected a string");
  }
  bool refusal = strcmp(type, "refusal") == 0;
  if (strcmp(type, "input_text") == 0 || strcmp(type, "output_text") == 0 ||
      (!system && refusal)) {
    const json_t *t = json_object_get(jp, refusal ? "refusal" : "text");
    snprintf(f, sizeof(f), "%s.%s", field, refusal ? "refusal" : "text");
    if (!json_is_string(t)) return invalid(d->err, f, "expected a string");
    air__cpart *p = air__canon_add_part(d->c, parts, n, cap, AIR__CP_TEXT, &rc);
    if (p == NULL) return rc;
    p->text = copy_str(d, t);
    return p->text.p != NULL ? 0 : AIR_ENOMEM;
  }
  if (!system && strcmp(type, "input_image") == 0 &&
      json_is_string(json_object_get(jp, "image_url"))) {
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

static int content(dec *d, const json_t *c, const char *base,
                   air__cpart **parts, size_t *n, size_t *cap, bool system) {
  char field[AIR__MAX_CANON_FIELD_BYTES];
  int rc = 0;
  if (c == NULL || json_is_null(c)) return 0;
  if (json_is_string(c)) {
    air__cpart *p = air__canon_add_part(d->c, parts, n, cap, AIR__CP_TEXT, &rc);
    if (p == NULL) return rc;
    p->text = copy_str(d, c);
    return p->text.p != NULL ? 0 : AIR_ENOMEM;
  }
  if (!json_is_array(c)) {
    snprintf(field, sizeof(field), "%s.content", base);
    return invalid(d->err, field, "expected a string or an array");
  }
  size_t j;
  const json_t *jp;
  json_array_foreach(c, j, jp) {
    if ((rc = part(d, jp, base, j, parts, n, cap, system)) != 0) return rc;
  }
  return 0;
}

/* The last turn when it has role, else a new one. A user turn that holds
 * only tool results takes more tool results; an assistant turn takes more
 * tool calls and reasoning. */
static air__cmsg *turn(dec *d, air__crole role, bool results_only, int *rc) {
  air__canon *c = d->c;
  if (c->n_msgs > 0 && c->msgs[c->n_msgs - 1].role == role) {
    air__cmsg *m = &c->msgs[c->n_msgs - 1];
    bool ok = role == AIR__ROLE_ASSISTANT;
    if (role == AIR__ROLE_USER && results_only) {
      ok = true;
      for (size_t i = 0; i < m->n_parts; i++)
        if (m->parts[i].kind != AIR__CP_TOOL_RESULT) ok = false;
    }
    if (ok) return m;
  }
  return air__canon_add_msg(c, role, rc);
}

static int message(dec *d, const json_t *it, const char *base) {
  char f[AIR__MAX_CANON_FIELD_BYTES + 16];
  const char *role = json_string_value(json_object_get(it, "role"));
  int rc = 0;
  if (role == NULL) {
    snprintf(f, sizeof(f), "%s.role", base);
    return invalid(d->err, f, "expected a string");
  }
  bool system = strcmp(role, "system") == 0;
  bool developer = strcmp(role, "developer") == 0;
  air__crole r;
  if (system || developer)
    r = AIR__ROLE_SYSTEM;
  else if (strcmp(role, "user") == 0)
    r = AIR__ROLE_USER;
  else if (strcmp(role, "assistant") == 0)
    r = AIR__ROLE_ASSISTANT;
  else {
    snprintf(f, sizeof(f), "%s.role", base);
    return extra(d, f, NULL, NULL);
  }
  air__cmsg *m = r == AIR__ROLE_ASSISTANT ? turn(d, r, false, &rc)
                                          : air__canon_add_msg(d->c, r, &rc);
  if (m == NULL) return rc;
  m->developer = developer;
  return content(d, json_object_get(it, "content"), base, &m->parts,
                 &m->n_parts, &m->cap_parts, system || developer);
}

static int function_call(dec *d, const json_t *it, const char *base) {
  char f[AIR__MAX_CANON_FIELD_BYTES + 16];
  int rc = 0;
  const json_t *id = json_object_get(it, "call_id");
  const json_t *name = json_object_get(it, "name");
  const json_t *args = json_object_get(it, "arguments");
  if (!json_is_string(id)) {
    snprintf(f, sizeof(f), "%s.call_id", base);
    return invalid(d->err, f, "expected a string");
  }
  if (!json_is_string(name)) {
    snprintf(f, sizeof(f), "%s.name", base);
    return invalid(d->err, f, "expected a string");
  }
  snprintf(f, sizeof(f), "%s.arguments", base);
  if (args != NULL && !json_is_null(args) && !json_is_string(args))
    return invalid(d->err, f, "expected a string");
  air__cmsg *m = turn(d, AIR__ROLE_ASSISTANT, false, &rc);
  if (m == NULL) return rc;
  air__cpart *p = air__canon_add_part(d->c, &m->parts, &m->n_parts,
                                      &m->cap_parts, AIR__CP_TOOL_CALL, &rc);
  if (p == NULL) return rc;
  p->id = copy_str(d, id);
  p->name = copy_str(d, name);
  if (json_is_string(args)) p->args = copy_str(d, args);
  p->field = air__canon_fmt(d->c, "%s", base);
  p->args_field = air__canon_fmt(d->c, "%s", f);
  if (p->id.p == NULL || p->name.p == NULL || p->args_field == NULL ||
      (json_is_string(args) && p->args.p == NULL))
    return AIR_ENOMEM;
  return 0;
}

static int function_call_output(dec *d, const json_t *it, const char *base) {
  char f[AIR__MAX_CANON_FIELD_BYTES + 16];
  int rc = 0;
  const json_t *id = json_object_get(it, "call_id");
  if (!json_is_string(id)) {
    snprintf(f, sizeof(f), "%s.call_id", base);
    return invalid(d->err, f, "expected a string");
  }
  air__cmsg *m = turn(d, AIR__ROLE_USER, true, &rc);
  if (m == NULL) return rc;
  air__cpart *p = air__canon_add_part(d->c, &m->parts, &m->n_parts,
                                      &m->cap_parts, AIR__CP_TOOL_RESULT, &rc);
  if (p == NULL) return rc;
  p->id = copy_str(d, id);
  p->field = air__canon_fmt(d->c, "%s", base);
  if (p->id.p == NULL) return AIR_ENOMEM;
  const json_t *o = json_object_get(it, "output");
  if (o == NULL || json_is_null(o) || json_is_string(o)) {
    p->content_string = true;
    p->text = air__canon_str(d->c, json_string_value(o),
                             json_is_string(o) ? json_string_length(o) : 0);
    return p->text.p != NULL ? 0 : AIR_ENOMEM;
  }
  if (!json_is_array(o)) {
    snprintf(f, sizeof(f), "%s.output", base);
    return invalid(d->err, f, "expected a string or an array");
  }
  return content(d, o, base, &p->parts, &p->n_parts, &p->cap_parts, false);
}

/* A reasoning item: its summary text (joined) and encrypted_content. */
static int reasoning(dec *d, const json_t *it) {
  int rc = 0;
  air__cmsg *m = turn(d, AIR__ROLE_ASSISTANT, false, &rc);
  if (m == NULL) return rc;
  air__cpart *p = air__canon_add_part(d->c, &m->parts, &m->n_parts,
                                      &m->cap_parts, AIR__CP_REASONING, &rc);
  if (p == NULL) return rc;
  air__buf b;
  air__buf_init(&b, AIR__MAX_REQUEST_BYTES);
  size_t i;
  const json_t *s;
  json_array_foreach(json_object_get(it, "summary"), i, s) {
    const json_t *t = json_object_get(s, "text");
    if (!json_is_string(t)) continue;
    if (b.n > 0 && rc == 0) rc = air__buf_add(&b, LIT("\n\n"));
    if (rc == 0)
      rc = air__buf_add(&b, json_string_value(t), json_string_length(t));
  }
  if (rc == 0) p->text = air__canon_str(d->c, b.p ? b.p : "", b.n);
  air__buf_cleanup(&b);
  if (rc != 0) return rc;
  const json_t *enc = json_object_get(it, "encrypted_content");
  if (json_is_string(enc)) p->opaque = copy_str(d, enc);
  p->type = air__canon_str(d->c, "reasoning", 9);
  return p->text.p != NULL ? 0 : AIR_ENOMEM;
}

static int input(dec *d, const json_t *in) {
  char base[64];
  int rc = 0;
  if (json_is_string(in)) {
    air__cmsg *m = air__canon_add_msg(d->c, AIR__ROLE_USER, &rc);
    if (m == NULL) return rc;
    air__cpart *p = air__canon_add_part(d->c, &m->parts, &m->n_parts,
                                        &m->cap_parts, AIR__CP_TEXT, &rc);
    if (p == NULL) return rc;
    p->text = copy_str(d, in);
    return p->text.p != NULL ? 0 : AIR_ENOMEM;
  }
  if (!json_is_array(in))
    return invalid(d->err, "input", "expected a string or an array");
  size_t i;
  const json_t *it;
  json_array_foreach(in, i, it) {
    snprintf(base, sizeof(base), "input[%zu]", i);
    if (!json_is_object(it)) return invalid(d->err, base, "expected an object");
    const char *type = json_string_value(json_object_get(it, "type"));
    if (type == NULL || strcmp(type, "message") == 0)
      rc = message(d, it, base);
    else if (strcmp(type, "function_call") == 0)
      rc = function_call(d, it, base);
    else if (strcmp(type, "function_call_output") == 0)
      rc = function_call_output(d, it, base);
    else if (strcmp(type, "reasoning") == 0)
      rc = reasoning(d, it);
    else {
      char f[96];
      snprintf(f, sizeof(f), "%s.%s", base, type);
      rc = extra(d, f, NULL, NULL);
    }
    if (rc != 0) return rc;
  }
  return 0;
}

/* A function tool ({type: function, name, description, parameters}). */
static int function_tool(dec *d, const json_t *t, const char *field) {
  char f[96];
  const json_t *name = json_object_get(t, "name");
  const json_t *desc = json_object_get(t, "description");
  const json_t *params = json_object_get(t, "parameters");
  if (!json_is_string(name)) {
    snprintf(f, sizeof(f), "%s.name", field);
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
  return 0;
}

/* Names a built-in tool type in c->dropped (once). */
static int dropped(dec *d, const char *type) {
  const char *old = d->c->dropped;
  size_t n = strlen(type);
  for (const char *p = old; p != NULL && *p != '\0';) {
    size_t k = strcspn(p, ",");
    if (k == n && memcmp(p, type, n) == 0) return 0;
    p += k + (p[k] == ',');
  }
  d->c->dropped = old != NULL ? air__canon_fmt(d->c, "%s,%s", old, type)
                              : air__canon_fmt(d->c, "%s", type);
  return d->c->dropped != NULL ? 0 : AIR_ENOMEM;
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
    int rc = 0;
    if (type == NULL) {
      snprintf(f, sizeof(f), "%s.type", field);
      return invalid(d->err, f, "expected a string");
    }
    if (strcmp(type, "function") == 0) {
      rc = function_tool(d, t, field);
    } else if (strcmp(type, "namespace") == 0) {
      /* A group of function tools: flattened into function tools. */
      size_t k;
      const json_t *nt;
      json_array_foreach(json_object_get(t, "tools"), k, nt) {
        snprintf(f, sizeof(f), "%s.tools[%zu]", field, k);
        const char *nty = json_string_value(json_object_get(nt, "type"));
        if (nty == NULL || strcmp(nty, "function") == 0)
          rc = function_tool(d, nt, f);
        if (rc != 0) return rc;
      }
    } else if (air__rsp_builtin_tool(type)) {
      rc = dropped(d, type);
    } else {
      snprintf(f, sizeof(f), "%s.type", field);
      rc = extra(d, f, NULL, NULL);
    }
    if (rc != 0) return rc;
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
  const json_t *name = json_object_get(tc, "name");
  if (type == NULL || strcmp(type, "function") != 0)
    return extra(d, "tool_choice", "tool_choice", tc);
  if (!json_is_string(name))
    return invalid(d->err, "tool_choice.name", "expected a string");
  d->c->tool_choice = AIR__TC_TOOL;
  d->c->tool_choice_name = copy_str(d, name);
  return d->c->tool_choice_name.p != NULL ? 0 : AIR_ENOMEM;
}

static void num(air__cnum *n, const json_t *v) {
  n->set = true;
  n->is_int = json_is_integer(v);
  n->i = n->is_int ? (int64_t)json_integer_value(v) : 0;
  n->d = json_number_value(v);
}

static const char *const ignored_fields[] = {"model",
                                             "stream",
                                             "stream_options",
                                             "store",
                                             "include",
                                             "metadata",
                                             "prompt_cache_key",
                                             "safety_identifier",
                                             "service_tier",
                                             "truncation",
                                             "top_logprobs",
                                             "max_tool_calls",
                                             "input",
                                             "instructions",
                                             "max_output_tokens",
                                             "prompt_cache_retention"};

static bool ignored(const char *key) {
  for (size_t i = 0; i < sizeof(ignored_fields) / sizeof(ignored_fields[0]);
       i++)
    if (strcmp(key, ignored_fields[i]) == 0) return true;
  return false;
}

/* text.format: text (nothing), json_object, json_schema {name, schema,
 * strict} (flat, unlike chat's response_format); another type is an
 * extra. text.verbosity is a hint. */
static int text_format(dec *d, const json_t *v) {
  air__canon *c = d->c;
  const json_t *fmt = json_object_get(v, "format");
  if (fmt == NULL || json_is_null(fmt)) return 0;
  if (!json_is_object(fmt))
    return invalid(d->err, "text.format", "expected an object");
  const char *t = json_string_value(json_object_get(fmt, "type"));
  if (t != NULL && strcmp(t, "text") == 0) return 0;
  c->format_field = "text.format";
  if (t != NULL && strcmp(t, "json_object") == 0) {
    c->format = AIR__FMT_JSON_OBJECT;
    return 0;
  }
  if (t == NULL || strcmp(t, "json_schema") != 0)
    return extra(d, "text.format", "text", v);
  const json_t *name = json_object_get(fmt, "name");
  const json_t *schema = json_object_get(fmt, "schema");
  const json_t *strict = json_object_get(fmt, "strict");
  if (schema != NULL && !json_is_null(schema) && !json_is_object(schema))
    return invalid(d->err, "text.format.schema", "expected an object");
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

/* reasoning.effort as the effort asked (the names chat's reasoning_effort
 * takes); another value is an extra. reasoning.summary is a hint. */
static int reasoning_opts(dec *d, const json_t *v) {
  static const char *const names[] = {"none",   "minimal", "low",
                                      "medium", "high",    "xhigh"};
  const json_t *ef = json_object_get(v, "effort");
  if (ef == NULL || json_is_null(ef)) return 0;
  const char *s = json_string_value(ef);
  for (size_t i = 0; s != NULL && i < sizeof(names) / sizeof(names[0]); i++) {
    if (strcmp(s, names[i]) == 0) {
      d->c->effort =
          i == 5 ? AIR__EFFORT_MAX : (air__ceffort)(AIR__EFFORT_NONE + i);
      d->c->reasoning_field = "reasoning.effort";
      return 0;
    }
  }
  return extra(d, "reasoning.effort", "reasoning", v);
}

static int field(dec *d, const char *key, const json_t *v) {
  air__canon *c = d->c;
  if (strcmp(key, "text") == 0) return text_format(d, v);
  if (strcmp(key, "reasoning") == 0) return reasoning_opts(d, v);
  if (strcmp(key, "background") == 0)
    return json_is_true(v) ? extra(d, key, key, v) : 0;
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
  if (strcmp(key, "tools") == 0) return tools(d, v);
  if (strcmp(key, "tool_choice") == 0) return tool_choice(d, v);
  if (strcmp(key, "user") == 0) {
    if (!json_is_string(v)) return invalid(d->err, key, "expected a string");
    c->user = copy_str(d, v);
    return c->user.p != NULL ? 0 : AIR_ENOMEM;
  }
  return extra(d, key, key, v);
}

int air__rsp_decode_request(const air__request *req, air__canon *c,
                            air_error *err) {
  const json_t *body = air__request_body(req);
  if (!json_is_object(body))
    return invalid(err, "request", "expected a parsed request");
  dec d = {c, err};
  int rc = 0;
  const json_t *ins = json_object_get(body, "instructions");
  if (json_is_string(ins) && json_string_length(ins) > 0) {
    c->has_system = true;
    c->system_string = true;
    air__cpart *p = air__canon_add_part(c, &c->system, &c->n_system,
                                        &c->cap_system, AIR__CP_TEXT, &rc);
    if (p == NULL) return rc;
    p->text = copy_str(&d, ins);
    if (p->text.p == NULL) return AIR_ENOMEM;
  }
  const json_t *mt = json_object_get(body, "max_output_tokens");
  if (json_is_integer(mt) && json_integer_value(mt) > 0)
    c->max_tokens = (int64_t)json_integer_value(mt);
  rc = input(&d, json_object_get(body, "input"));
  const char *key;
  const json_t *v;
  json_object_foreach((json_t *)body, key, v) {
    if (rc != 0) break;
    if (json_is_null(v) || ignored(key)) continue;
    rc = field(&d, key, v);
  }
  return rc;
}
