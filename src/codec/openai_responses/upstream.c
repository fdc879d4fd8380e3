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
#include <string.h>

#include "openai_responses.h"

#define API_NAME "openai_responses"

int air__rsp_finish_body(json_t *root, const char *req_model,
                         const air__build_opts *o, air__buf *out,
                         air_error *err) {
  int rc = air__json_override(root, o->override_json,
                              AIR__OVERRIDE_OUTPUT_TOKENS, err);
  if (rc == 0) rc = air__json_target(root, req_model, o);
  return rc != 0 ? rc : air__json_dump(root, JSON_COMPACT, out);
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
  int rc =
      air__canon_text_results(c, AIR_DIALECT_OPENAI_RESPONSES, API_NAME, err);
  if (rc == 0 && c->n_stop > 0)
    return air__canon_unsupported(
        err, c->origin == AIR_DIALECT_ANTHROPIC ? "stop_sequences" : "stop",
        API_NAME);
  return rc;
}

/* An image part: {type: input_image, image_url} (inline data as a data:
 * URL). */
static int image(const air__cpart *p, json_t *parts) {
  json_t *url;
  int rc = air__json_image_url(p, &url);
  if (rc != 0) return rc;
  return air__json_push(
      parts, json_pack("{s:s, s:o}", "type", "input_image", "image_url", url));
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
                                           "text", air__json_strn(p->text)));
    else if (p->kind == AIR__CP_IMAGE)
      rc = image(p, parts);
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
    json_t *text;
    if ((rc = air__json_result_text(p, &text)) != 0) break;
    rc = air__json_push(
        items, json_pack("{s:s, s:o, s:o}", "type", "function_call_output",
                         "call_id", air__json_strn(p->id), "output", text));
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
                             air__json_strn(p->text)));
    json_t *it =
        json_pack("{s:s, s:o}", "type", "reasoning", "summary", summary);
    if (rc == 0 && it != NULL && p->opaque.p != NULL)
      rc = air__json_put(it, "encrypted_content", air__json_strn(p->opaque));
    rc = rc == 0 ? air__json_push(items, it) : (json_decref(it), rc);
  }
  if (rc == 0) rc = message(m, "assistant", "output_text", items);
  for (size_t j = 0; j < m->n_parts && rc == 0; j++) {
    const air__cpart *p = &m->parts[j];
    if (p->kind != AIR__CP_TOOL_CALL) continue;
    air__str args = p->args.p != NULL ? p->args : (air__str){"{}", 2};
    rc = air__json_push(
        items,
        json_pack("{s:s, s:o, s:o, s:o}", "type", "function_call", "call_id",
                  air__json_strn(p->id), "name", air__json_strn(p->name),
                  "arguments", air__json_strn(args)));
  }
  return rc;
}

static int input(const air__canon *c, json_t *root) {
  json_t *items = json_array();
  int rc = items != NULL ? 0 : AIR_ENOMEM;
  if (rc == 0 && c->has_system && c->n_system > 0) {
    json_t *ins;
    rc = air__json_joined(c->system, c->n_system, "\n", &ins);
    if (rc == 0 && json_string_length(ins) > 0)
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

/* A tool: {type: function, name, strict: false, description,
 * parameters}. */
static json_t *tool_head(const air__ctool *t) {
  return json_pack("{s:s, s:o, s:b}", "type", "function", "name",
                   air__json_strn(t->name), "strict", 0);
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
                    c->format_name.p != NULL ? air__json_strn(c->format_name)
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
  air__ceffort e = air__canon_effort(c);
  if (e == AIR__EFFORT_UNSET) return 0;
  const char *name = air__canon_effort_name(e);
  bool thinking = c->thinking_budget > 0 || c->thinking_adaptive;
  json_t *r = thinking && e != AIR__EFFORT_NONE
                  ? json_pack("{s:s, s:s}", "effort", name, "summary", "auto")
                  : json_pack("{s:s}", "effort", name);
  return air__json_put(out, "reasoning", r);
}

static int fields(const air__canon *c, json_t *out) {
  int rc = air__json_openai_sampling(c, out, "max_output_tokens");
  if (rc == 0) rc = air__json_tools(c, out, tool_head, "parameters", NULL);
  if (rc == 0) rc = air__json_openai_choice(c, out, false);
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
  if (rc == 0) rc = air__rsp_finish_body(root, c->model, o, out, err);
  json_decref(root);
  return rc;
}
