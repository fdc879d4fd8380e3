/*
 * The canonical request as an OpenAI Responses upstream body
 * (POST {base_url}/responses), and what this dialect cannot say.
 *
 *   - system text given apart is "instructions"; system turns are system
 *     (or developer) message items in their place;
 *   - user turns: text and images are one message item (input_text,
 *     input_image with a URL or a data: URL); tool results are
 *     function_call_output items placed before it (output a string; text
 *     parts joined with "\n");
 *   - assistant turns: text is a message item of output_text parts, tool
 *     calls are function_call items (arguments as given, "{}" when none),
 *     reasoning is written back only when it came from a Responses caller
 *     (a reasoning item with its summary and encrypted_content); reasoning
 *     of another dialect is dropped;
 *   - tools as function tools ("strict": false: the caller's schema is
 *     taken as it is), tool_choice, parallel_tool_calls false,
 *     max_output_tokens, temperature clamped to 0..2, top_p, user;
 *   - the answer's format as text.format, the reasoning effort (or a
 *     thinking budget's) as reasoning.effort (summary "auto" for a
 *     caller that asked for thinking);
 *   - "store": false: the gateway serves the dialect statelessly.
 * Not expressible (can_express: AIR_ENOTSUP naming the first in the
 * caller's order; dropped under drop_params): the caller dialect's extras,
 * stop sequences, and anything but text in a tool result.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "openai_responses.h"

#define API_NAME "openai_responses"

static int fail(air_error *err, int code, const char *what) {
  if (err != NULL) {
    err->code = code;
    snprintf(err->message, sizeof(err->message), "%s", what);
  }
  return code;
}

int air__rsp_finish_body(json_t *root, const char *req_model,
                         const air__build_opts *o, air_error *err) {
  int rc;
  if (o->override_json != NULL) {
    json_t *ov = json_loads(o->override_json, 0, NULL);
    if (!json_is_object(ov)) {
      json_decref(ov);
      return fail(err, AIR_EINVAL, "override: expected a JSON object");
    }
    /* max_tokens is what rules say (docs/design.md §3): max_output_tokens here.
     */
    json_t *mt = json_object_get(ov, "max_tokens");
    if (mt != NULL && json_object_get(ov, "max_output_tokens") == NULL) {
      json_object_set(ov, "max_output_tokens", mt);
      json_object_del(ov, "max_tokens");
    }
    rc = json_object_update(root, ov) == 0 ? 0 : AIR_ENOMEM;
    json_decref(ov);
    if (rc != 0) return rc;
  }
  const char *model = o->model != NULL ? o->model : req_model;
  if ((rc = air__json_put(root, "model",
                          json_string(model != NULL ? model : ""))) != 0)
    return rc;
  return air__json_put(root, "stream", json_true());
}

/* The stateful extras of a Responses caller (kept by its provider only):
 * previous_response_id, conversation, background true, item_reference
 * items. */
int air__rsp_stateful_field(const air__canon *c, const char *api_name,
                            air_error *err) {
  static const char suffix[] = ".item_reference";
  for (size_t i = 0; i < c->n_extras; i++) {
    const air__cextra *x = &c->extras[i];
    if (x->origin != AIR_DIALECT_OPENAI_RESPONSES || x->field == NULL) continue;
    size_t n = strlen(x->field);
    bool ref = n >= sizeof(suffix) - 1 &&
               strcmp(x->field + n - (sizeof(suffix) - 1), suffix) == 0;
    if (ref ||
        (x->key != NULL && (strcmp(x->key, "previous_response_id") == 0 ||
                            strcmp(x->key, "conversation") == 0 ||
                            strcmp(x->key, "background") == 0)))
      return air__canon_unsupported(err, x->field, api_name);
  }
  return 0;
}

int air__rsp_can_express(const air__canon *c, const air__build_opts *o,
                         air_error *err) {
  (void)o;
  const air__cextra *x =
      air__canon_first_extra(c, AIR_DIALECT_OPENAI_RESPONSES);
  const air__cpart *bad = NULL;
  for (size_t i = 0; i < c->n_msgs && bad == NULL; i++) {
    const air__cmsg *m = &c->msgs[i];
    for (size_t j = 0; j < m->n_parts && bad == NULL; j++) {
      const air__cpart *p = &m->parts[j];
      if (p->kind != AIR__CP_TOOL_RESULT) continue;
      for (size_t k = 0; k < p->n_parts && bad == NULL; k++)
        if (p->parts[k].kind == AIR__CP_IMAGE) bad = &p->parts[k];
    }
  }
  if (bad != NULL && (x == NULL || bad->seq < x->seq)) {
    char f[AIR__MAX_CANON_FIELD_BYTES + 64];
    snprintf(f, sizeof(f), "%s (type %.*s)", bad->field ? bad->field : "",
             (int)bad->type.n, bad->type.p ? bad->type.p : "");
    return air__canon_unsupported(err, f, API_NAME);
  }
  if (x != NULL) return air__canon_unsupported(err, x->field, API_NAME);
  if (c->n_stop > 0)
    return air__canon_unsupported(
        err, c->origin == AIR_DIALECT_ANTHROPIC ? "stop_sequences" : "stop",
        API_NAME);
  return 0;
}

static json_t *jstring(air__str s) {
  return json_stringn(s.p ? s.p : "", s.n);
}

static json_t *num(const air__cnum *n) {
  return n->is_int ? json_integer((json_int_t)n->i) : json_real(n->d);
}

static json_t *image(const air__cpart *p) {
  json_t *url;
  if (p->url.p != NULL) {
    url = jstring(p->url);
  } else {
    air__buf u;
    air__buf_init(&u, AIR__MAX_REQUEST_BYTES);
    int rc = air__buf_add(&u, LIT("data:"));
    if (rc == 0) rc = air__buf_add(&u, p->media_type.p, p->media_type.n);
    if (rc == 0) rc = air__buf_add(&u, LIT(";base64,"));
    if (rc == 0) rc = air__buf_add(&u, p->data.p, p->data.n);
    url = rc == 0 ? json_stringn(u.p, u.n) : NULL;
    air__buf_cleanup(&u);
    if (url == NULL) return NULL;
  }
  return json_pack("{s:s, s:o}", "type", "input_image", "image_url", url);
}

/* Text parts joined with sep (other parts left out). */
static json_t *joined(const air__cpart *parts, size_t n, const char *sep) {
  air__buf b;
  air__buf_init(&b, AIR__MAX_REQUEST_BYTES);
  int rc = 0;
  bool first = true;
  for (size_t i = 0; i < n && rc == 0; i++) {
    if (parts[i].kind != AIR__CP_TEXT) continue;
    if (!first) rc = air__buf_adds(&b, sep);
    if (rc == 0) rc = air__buf_add(&b, parts[i].text.p, parts[i].text.n);
    first = false;
  }
  json_t *s = rc == 0 ? json_stringn(b.p != NULL ? b.p : "", b.n) : NULL;
  air__buf_cleanup(&b);
  return s;
}

/* A message item of role with the text (as text_type) and image parts of
 * m; nothing when it has none. */
static int message(const air__cmsg *m, const char *role, const char *text_type,
                   json_t *items) {
  json_t *parts = json_array();
  int rc = parts != NULL ? 0 : AIR_ENOMEM;
  for (size_t j = 0; j < m->n_parts && rc == 0; j++) {
    const air__cpart *p = &m->parts[j];
    if (p->kind == AIR__CP_TEXT)
      rc = air__json_push(parts, json_pack("{s:s, s:o}", "type", text_type,
                                           "text", jstring(p->text)));
    else if (p->kind == AIR__CP_IMAGE)
      rc = air__json_push(parts, image(p));
  }
  if (rc != 0 || json_array_size(parts) == 0) {
    json_decref(parts);
    return rc;
  }
  return air__json_push(items, json_pack("{s:s, s:s, s:o}", "type", "message",
                                         "role", role, "content", parts));
}

static int user_turn(const air__cmsg *m, json_t *items) {
  int rc = 0;
  for (size_t j = 0; j < m->n_parts && rc == 0; j++) {
    const air__cpart *p = &m->parts[j];
    if (p->kind != AIR__CP_TOOL_RESULT) continue;
    json_t *text = p->content_string ? jstring(p->text)
                                     : joined(p->parts, p->n_parts, "\n");
    rc = air__json_push(
        items, json_pack("{s:s, s:o, s:o}", "type", "function_call_output",
                         "call_id", jstring(p->id), "output", text));
  }
  return rc != 0 ? rc : message(m, "user", "input_text", items);
}

/* An assistant turn in order: reasoning items (of this dialect), text as a
 * message item, tool calls as function_call items. */
static int assistant_turn(const air__cmsg *m, json_t *items) {
  int rc = 0;
  for (size_t j = 0; j < m->n_parts && rc == 0; j++) {
    const air__cpart *p = &m->parts[j];
    if (p->kind != AIR__CP_REASONING ||
        p->origin != AIR_DIALECT_OPENAI_RESPONSES)
      continue;
    json_t *summary = json_array();
    if (summary != NULL && p->text.n > 0)
      rc = air__json_push(
          summary, json_pack("{s:s, s:o}", "type", "summary_text", "text",
                             jstring(p->text)));
    json_t *it =
        json_pack("{s:s, s:o}", "type", "reasoning", "summary", summary);
    if (rc == 0 && it != NULL && p->opaque.p != NULL)
      rc = air__json_put(it, "encrypted_content", jstring(p->opaque));
    rc = rc == 0 ? air__json_push(items, it) : (json_decref(it), rc);
  }
  if (rc == 0) rc = message(m, "assistant", "output_text", items);
  for (size_t j = 0; j < m->n_parts && rc == 0; j++) {
    const air__cpart *p = &m->parts[j];
    if (p->kind != AIR__CP_TOOL_CALL) continue;
    air__str args = p->args.p != NULL ? p->args : (air__str){"{}", 2};
    rc = air__json_push(
        items, json_pack("{s:s, s:o, s:o, s:o}", "type", "function_call",
                         "call_id", jstring(p->id), "name", jstring(p->name),
                         "arguments", jstring(args)));
  }
  return rc;
}

static int input(const air__canon *c, json_t *root) {
  json_t *items = json_array();
  int rc = items != NULL ? 0 : AIR_ENOMEM;
  if (rc == 0 && c->has_system && c->n_system > 0) {
    json_t *ins = joined(c->system, c->n_system, "\n");
    if (json_string_length(ins) > 0)
      rc = air__json_put(root, "instructions", ins);
    else
      json_decref(ins);
  }
  for (size_t i = 0; i < c->n_msgs && rc == 0; i++) {
    const air__cmsg *m = &c->msgs[i];
    if (m->role == AIR__ROLE_SYSTEM)
      rc = message(m, m->developer ? "developer" : "system", "input_text",
                   items);
    else if (m->role == AIR__ROLE_USER)
      rc = user_turn(m, items);
    else
      rc = assistant_turn(m, items);
  }
  if (rc == 0) return air__json_put(root, "input", items);
  json_decref(items);
  return rc;
}

static int tools(const air__canon *c, json_t *out) {
  if (c->n_tools == 0) return 0;
  json_t *arr = json_array();
  if (arr == NULL) return AIR_ENOMEM;
  int rc = 0;
  for (size_t i = 0; i < c->n_tools && rc == 0; i++) {
    const air__ctool *t = &c->tools[i];
    json_t *fn = json_pack("{s:s, s:o, s:b}", "type", "function", "name",
                           jstring(t->name), "strict", 0);
    if (fn == NULL) {
      rc = AIR_ENOMEM;
      break;
    }
    if (t->description.p != NULL)
      rc = air__json_put(fn, "description", jstring(t->description));
    json_t *schema =
        t->schema.p != NULL
            ? json_loadb(t->schema.p, t->schema.n, 0, NULL)
            : json_pack("{s:s, s:{}}", "type", "object", "properties");
    if (rc == 0) rc = air__json_put(fn, "parameters", schema);
    rc = rc == 0 ? air__json_push(arr, fn) : (json_decref(fn), rc);
  }
  if (rc == 0) return air__json_put(out, "tools", arr);
  json_decref(arr);
  return rc;
}

/* The format as text.format: {type: json_object} or {type: json_schema,
 * name, schema, strict} (name "output" when the caller gave none). */
static int text_format(const air__canon *c, json_t *out) {
  if (c->format == AIR__FMT_TEXT) return 0;
  json_t *fmt;
  if (c->format == AIR__FMT_JSON_OBJECT) {
    fmt = json_pack("{s:s}", "type", "json_object");
  } else {
    json_t *schema =
        json_loadb(c->format_schema.p, c->format_schema.n, 0, NULL);
    fmt = json_pack("{s:s, s:o, s:o}", "type", "json_schema", "name",
                    c->format_name.p != NULL ? jstring(c->format_name)
                                             : json_string("output"),
                    "schema", schema);
  }
  int rc = fmt != NULL ? 0 : AIR_ENOMEM;
  if (rc == 0 && c->format == AIR__FMT_JSON_SCHEMA && c->format_strict >= 0)
    rc = air__json_put(fmt, "strict", json_boolean(c->format_strict));
  if (rc != 0) {
    json_decref(fmt);
    return rc;
  }
  return air__json_put(out, "text", json_pack("{s:o}", "format", fmt));
}

/* reasoning.effort from the effort asked, else from a thinking budget (the
 * table chat's reasoning_effort uses, docs/config.md); summary "auto" when
 * the caller asked for thinking, so the summary streams back as its
 * thinking. Adaptive thinking without an effort sends none. */
static int reasoning_opts(const air__canon *c, json_t *out) {
  air__ceffort e = c->effort;
  if (e == AIR__EFFORT_UNSET && c->thinking_budget > 0)
    e = c->thinking_budget < 4096    ? AIR__EFFORT_LOW
        : c->thinking_budget < 16384 ? AIR__EFFORT_MEDIUM
                                     : AIR__EFFORT_HIGH;
  static const char *const names[] = {NULL,     "none", "minimal", "low",
                                      "medium", "high", "high"};
  if (e == AIR__EFFORT_UNSET) return 0;
  bool thinking = c->thinking_budget > 0 || c->thinking_adaptive;
  json_t *r =
      thinking && e != AIR__EFFORT_NONE
          ? json_pack("{s:s, s:s}", "effort", names[e], "summary", "auto")
          : json_pack("{s:s}", "effort", names[e]);
  return air__json_put(out, "reasoning", r);
}

static int fields(const air__canon *c, json_t *out) {
  int rc = 0;
  if (c->max_tokens > 0)
    rc = air__json_put(out, "max_output_tokens",
                       json_integer((json_int_t)c->max_tokens));
  if (rc == 0 && c->temperature.set) {
    double t = c->temperature.d;
    rc = air__json_put(
        out, "temperature",
        t >= 0 && t <= 2 ? num(&c->temperature) : json_real(t > 2 ? 2.0 : 0.0));
  }
  if (rc == 0 && c->top_p.set) rc = air__json_put(out, "top_p", num(&c->top_p));
  if (rc == 0) rc = tools(c, out);
  if (rc == 0 && c->tool_choice != AIR__TC_UNSET) {
    json_t *v = c->tool_choice == AIR__TC_AUTO       ? json_string("auto")
                : c->tool_choice == AIR__TC_REQUIRED ? json_string("required")
                : c->tool_choice == AIR__TC_NONE
                    ? json_string("none")
                    : json_pack("{s:s, s:o}", "type", "function", "name",
                                jstring(c->tool_choice_name));
    rc = air__json_put(out, "tool_choice", v);
  }
  if (rc == 0 && c->parallel_tools == 0)
    rc = air__json_put(out, "parallel_tool_calls", json_false());
  if (rc == 0 && c->user.p != NULL)
    rc = air__json_put(out, "user", jstring(c->user));
  if (rc == 0) rc = text_format(c, out);
  if (rc == 0) rc = reasoning_opts(c, out);
  if (rc == 0) rc = air__json_put(out, "store", json_false());
  return rc;
}

int air__rsp_encode_request(const air__canon *c, const air__build_opts *o,
                            air__buf *out, air_error *err) {
  json_t *root = json_object();
  int rc = root != NULL ? 0 : AIR_ENOMEM;
  if (rc == 0) rc = air__json_put(root, "model", json_string(""));
  if (rc == 0) rc = input(c, root);
  if (rc == 0) rc = fields(c, root);
  if (rc == 0)
    rc = air__json_cont_style(c, root, json_object_get(root, "input"));
  if (rc == 0) rc = air__rsp_finish_body(root, c->model, o, err);
  if (rc == 0) rc = air__json_dump(root, JSON_COMPACT, out);
  json_decref(root);
  return rc;
}
