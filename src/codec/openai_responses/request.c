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
#include <string.h>

#include "error.h"
#include "openai_responses.h"

/* "FIELD: WHAT" into err; returns AIR_EINVAL. */
static int invalid(air_error *err, const char *field, const char *what) {
  return air__error_set(err, AIR_EINVAL, "%s: %s", field, what);
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
  return air__name_in(type, builtin_tools,
                      sizeof(builtin_tools) / sizeof(builtin_tools[0]));
}

/* ---- the same dialect ------------------------------------------------------
 */

int air__rsp_build_same(const air__request *req, const air__build_opts *o,
                        air__buf *out, air_error *err) {
  /* The caller's text with model and stream set. */
  air__patch set[] = {{"model", NULL, AIR__PATCH_SET},
                      {"stream", "true", AIR__PATCH_SET}};
  return air__build_same(req, o, set, 2, air__rsp_finish_body, out, err);
}

/* ---- decoding into the canonical request -----------------------------------
 */

/* "BASE.KEY: expected a string" unless ok. */
static int want_str(air__cdec *d, bool ok, const char *base, const char *key) {
  if (ok) return 0;
  return air__error_set(d->err, AIR_EINVAL, "%s.%s: expected a string", base,
                        key);
}

/* One content part at field (type: its type) into parts; system: text
 * only. */
static int part(air__cdec *d, const json_t *jp, const char *field,
                const char *type, air__cpart **parts, size_t *n, size_t *cap,
                bool system) {
  char f[AIR__MAX_CANON_FIELD_BYTES + 32];
  int rc;
  bool refusal = strcmp(type, "refusal") == 0;
  if (strcmp(type, "input_text") == 0 || strcmp(type, "output_text") == 0 ||
      (!system && refusal)) {
    const char *key = refusal ? "refusal" : "text";
    const json_t *t = json_object_get(jp, key);
    if ((rc = want_str(d, json_is_string(t), field, key)) != 0) return rc;
    return air__canon_json_text_part(d->c, parts, n, cap, t);
  }
  const json_t *u = json_object_get(jp, "image_url");
  if (!system && strcmp(type, "input_image") == 0 && json_is_string(u)) {
    snprintf(f, sizeof(f), "%s.image_url", field);
    return air__canon_json_image(d, parts, n, cap, u, field, type, f);
  }
  snprintf(f, sizeof(f), "%s.%s", field, type);
  return air__canon_json_opaque(d->c, parts, n, cap, jp, f, type);
}

/* The last turn when it has role, else a new one. A user turn that holds
 * only tool results takes more tool results; an assistant turn takes more
 * tool calls and reasoning. */
static air__cmsg *turn(air__cdec *d, air__crole role, bool results_only,
                       int *rc) {
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

static int message(air__cdec *d, const json_t *it, const char *base) {
  char f[AIR__MAX_CANON_FIELD_BYTES + 16];
  const char *role = json_string_value(json_object_get(it, "role"));
  if (role == NULL) return want_str(d, false, base, "role");
  int rc = 0;
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
    return air__canon_json_extra(d->c, f, NULL, NULL);
  }
  air__cmsg *m = r == AIR__ROLE_ASSISTANT ? turn(d, r, false, &rc)
                                          : air__canon_add_msg(d->c, r, &rc);
  if (m == NULL) return rc;
  m->developer = developer;
  return air__canon_json_content(d, json_object_get(it, "content"), base,
                                 &m->parts, &m->n_parts, &m->cap_parts,
                                 system || developer, part);
}

static int function_call(air__cdec *d, const json_t *it, const char *base) {
  char f[AIR__MAX_CANON_FIELD_BYTES + 16];
  const json_t *id = json_object_get(it, "call_id");
  const json_t *name = json_object_get(it, "name");
  const json_t *args = json_object_get(it, "arguments");
  int rc;
  if ((rc = want_str(d, json_is_string(id), base, "call_id")) != 0 ||
      (rc = want_str(d, json_is_string(name), base, "name")) != 0)
    return rc;
  snprintf(f, sizeof(f), "%s.arguments", base);
  if (args != NULL && !json_is_null(args) && !json_is_string(args))
    return invalid(d->err, f, "expected a string");
  air__cmsg *m = turn(d, AIR__ROLE_ASSISTANT, false, &rc);
  if (m == NULL) return rc;
  return air__canon_json_call(d->c, m, id, name, args, false, base, f);
}

static int function_call_output(air__cdec *d, const json_t *it,
                                const char *base) {
  char f[AIR__MAX_CANON_FIELD_BYTES + 16];
  const json_t *id = json_object_get(it, "call_id");
  int rc = want_str(d, json_is_string(id), base, "call_id");
  if (rc != 0) return rc;
  air__cmsg *m = turn(d, AIR__ROLE_USER, true, &rc);
  if (m == NULL) return rc;
  air__cpart *p = air__canon_json_result(d->c, m, id, base, &rc);
  if (p == NULL) return rc;
  const json_t *o = json_object_get(it, "output");
  if (o == NULL || json_is_null(o) || json_is_string(o))
    return air__canon_json_result_text(d->c, p, o);
  if (!json_is_array(o)) {
    snprintf(f, sizeof(f), "%s.output", base);
    return invalid(d->err, f, "expected a string or an array");
  }
  return air__canon_json_content(d, o, base, &p->parts, &p->n_parts,
                                 &p->cap_parts, false, part);
}

/* A reasoning item: its summary text (joined) and encrypted_content. */
static int reasoning(air__cdec *d, const json_t *it) {
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
  if (json_is_string(enc)) p->opaque = air__canon_json_str(d->c, enc);
  p->type = air__canon_str(d->c, "reasoning", 9);
  return p->text.p != NULL ? 0 : AIR_ENOMEM;
}

/* Input item i (at base "input[i]"): a message, a function call or its
 * output, reasoning; any other type is an extra. */
static int item(air__cdec *d, const json_t *it, const char *base, size_t i) {
  (void)i;
  const char *type = json_string_value(json_object_get(it, "type"));
  if (type == NULL || strcmp(type, "message") == 0) return message(d, it, base);
  if (strcmp(type, "function_call") == 0) return function_call(d, it, base);
  if (strcmp(type, "function_call_output") == 0)
    return function_call_output(d, it, base);
  if (strcmp(type, "reasoning") == 0) return reasoning(d, it);
  char f[96];
  snprintf(f, sizeof(f), "%s.%s", base, type);
  return air__canon_json_extra(d->c, f, NULL, NULL);
}

static int input(air__cdec *d, const json_t *in) {
  int rc = 0;
  if (json_is_string(in)) {
    air__cmsg *m = air__canon_add_msg(d->c, AIR__ROLE_USER, &rc);
    if (m == NULL) return rc;
    return air__canon_json_text_part(d->c, &m->parts, &m->n_parts,
                                     &m->cap_parts, in);
  }
  if (!json_is_array(in))
    return invalid(d->err, "input", "expected a string or an array");
  return air__canon_json_objects(d, in, "input", item);
}

/* A function tool ({type: function, name, description, parameters}). */
static int function_tool(air__cdec *d, const json_t *t, const char *field) {
  const json_t *name = json_object_get(t, "name");
  int rc = want_str(d, json_is_string(name), field, "name");
  if (rc != 0) return rc;
  return air__canon_json_tool(d->c, name, json_object_get(t, "description"),
                              json_object_get(t, "parameters"));
}

/* Names a built-in tool type in c->dropped (once). */
static int dropped(air__cdec *d, const char *type) {
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

/* Tool i (at field "tools[i]"): a function tool, the function tools of a
 * namespace, a built-in tool (dropped), or an extra. */
static int tool(air__cdec *d, const json_t *t, const char *field, size_t i) {
  char f[96];
  (void)i;
  const char *type = json_string_value(json_object_get(t, "type"));
  if (type == NULL) return want_str(d, false, field, "type");
  int rc = 0;
  if (strcmp(type, "function") == 0) return function_tool(d, t, field);
  if (strcmp(type, "namespace") == 0) {
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
    return 0;
  }
  if (air__rsp_builtin_tool(type)) return dropped(d, type);
  snprintf(f, sizeof(f), "%s.type", field);
  return air__canon_json_extra(d->c, f, NULL, NULL);
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

/* text.format: text (nothing), json_object, json_schema {name, schema,
 * strict} (flat, unlike chat's response_format); another type is an
 * extra. text.verbosity is a hint. */
static int text_format(air__cdec *d, const json_t *v) {
  const json_t *fmt = json_object_get(v, "format");
  if (fmt == NULL || json_is_null(fmt)) return 0;
  if (!json_is_object(fmt))
    return invalid(d->err, "text.format", "expected an object");
  return air__canon_json_format(d, fmt, "text.format", NULL, "text", v);
}

/* reasoning.effort as the effort asked (the names chat's reasoning_effort
 * takes); another value is an extra. reasoning.summary is a hint. */
static int reasoning_opts(air__cdec *d, const json_t *v) {
  const json_t *ef = json_object_get(v, "effort");
  if (ef == NULL || json_is_null(ef)) return 0;
  if (!air__canon_effort_named(json_string_value(ef), &d->c->effort))
    return air__canon_json_extra(d->c, "reasoning.effort", "reasoning", v);
  d->c->reasoning_field = "reasoning.effort";
  return 0;
}

static int field(air__cdec *d, const char *key, const json_t *v) {
  bool done;
  int rc = air__canon_json_openai_field(d->c, key, v, d->err, &done);
  if (done) return rc;
  if (strcmp(key, "text") == 0) return text_format(d, v);
  if (strcmp(key, "reasoning") == 0) return reasoning_opts(d, v);
  if (strcmp(key, "background") == 0)
    return json_is_true(v) ? air__canon_json_extra(d->c, key, key, v) : 0;
  if (strcmp(key, "tools") == 0)
    return air__canon_json_objects(d, v, "tools", tool);
  if (strcmp(key, "tool_choice") == 0)
    return air__canon_json_tool_choice(d, v, json_object_get(v, "name"),
                                       "tool_choice.name");
  return air__canon_json_extra(d->c, key, key, v);
}

int air__rsp_decode_request(const air__request *req, air__canon *c,
                            air_error *err) {
  const json_t *body;
  int rc = air__canon_json_body(req, err, &body);
  if (rc != 0) return rc;
  air__cdec d = {c, err};
  const json_t *ins = json_object_get(body, "instructions");
  if (json_is_string(ins) && json_string_length(ins) > 0) {
    c->has_system = true;
    c->system_string = true;
    rc = air__canon_json_text_part(c, &c->system, &c->n_system, &c->cap_system,
                                   ins);
    if (rc != 0) return rc;
  }
  const json_t *mt = json_object_get(body, "max_output_tokens");
  if (json_is_integer(mt) && json_integer_value(mt) > 0)
    c->max_tokens = (int64_t)json_integer_value(mt);
  if ((rc = input(&d, json_object_get(body, "input"))) != 0) return rc;
  return air__canon_json_fields(
      &d, body, ignored_fields,
      sizeof(ignored_fields) / sizeof(ignored_fields[0]), field);
}
