/*
 * The canonical request as an Anthropic Messages upstream body (POST
 * {base_url}/v1/messages), and what this dialect cannot say.
 *
 *   - system text (given apart, and every system or developer turn) is
 *     hoisted into the top-level "system" string, every non-empty text
 *     joined with "\n\n";
 *   - turns become content blocks: text, image (inline data -> base64
 *     source, a URL -> url source); empty texts are left out (the API
 *     rejects empty text blocks) and a turn left with no block is dropped;
 *     consecutive turns of one role are merged (the API wants alternating
 *     roles) and a message holding a single plain text block is written
 *     with string content;
 *   - tool calls -> tool_use blocks (arguments parsed; none or blank ->
 *     {}); tool results -> tool_result blocks in a user message;
 *     reasoning of another provider is dropped (its opaque fields mean
 *     nothing here);
 *   - tools, tool_choice, stop -> stop_sequences, max tokens (else
 *     o->default_max_tokens), temperature clamped to 0..1, top_p, user ->
 *     metadata.user_id, parallel tool calls off ->
 *     tool_choice.disable_parallel_tool_use.
 * Not expressible (can_express: AIR_ENOTSUP naming the first in the
 * caller's order; dropped under drop_params): the caller dialect's extras.
 *
 * The body: o->override_json is merged last over the top-level fields (a
 * null value removes the field), then model and stream are forced and a
 * missing max_tokens filled in. Reals are written with 15 significant
 * digits, so a value a client typed (0.7) is sent as typed.
 */
#include <stdio.h>
#include <string.h>

#include "anthropic.h"
#include "codec_json.h"
#include "error.h"
#include "limits.h"

#define API_NAME "anthropic"

/* "FIELD: WHAT" into err; returns AIR_EINVAL. */
static int invalid(air_error *err, const char *field, const char *what) {
  return air__error_set(err, AIR_EINVAL, "%s: %s", field, what);
}

int air__ant_finish_body(json_t *root, const char *req_model,
                         const air__build_opts *o, air__buf *out,
                         air_error *err) {
  int rc = air__json_override(root, o->override_json,
                              AIR__OVERRIDE_NULL_REMOVES, err);
  if (rc == 0) rc = air__json_target(root, req_model, o);
  json_t *mt = json_object_get(root, "max_tokens");
  if (rc == 0 && (mt == NULL || json_is_null(mt))) {
    uint32_t dm =
        o->default_max_tokens ? o->default_max_tokens : DEFAULT_MAX_TOKENS;
    rc = air__json_put(root, "max_tokens", json_integer(dm));
  }
  /* Reals with 15 significant digits: a value a client typed (0.7) is
   * sent as typed. */
  if (rc == 0)
    rc = air__json_dump(root, JSON_COMPACT | JSON_REAL_PRECISION(15), out);
  if (rc == AIR_ETOOBIG) rc = invalid(err, "body", "too big");
  return rc;
}

/* The thinking budget of a reasoning effort (docs/config.md); 0: none. */
static int64_t budget_of(air__ceffort e) {
  switch (e) {
    case AIR__EFFORT_MINIMAL:
      return 1024;
    case AIR__EFFORT_LOW:
      return 2048;
    case AIR__EFFORT_MEDIUM:
      return 8192;
    case AIR__EFFORT_HIGH:
      return 16384;
    case AIR__EFFORT_MAX:
      return 32768;
    default:
      return 0;
  }
}

/* Whether the request asks for thinking (an effort, or a budget). */
static bool wants_thinking(const air__canon *c) {
  return budget_of(c->effort) > 0 ||
         (c->effort == AIR__EFFORT_UNSET && c->thinking_budget > 0);
}

/* A JSON format asked through the forced tool (structured_output: tool). */
static bool json_tool(const air__canon *c, const air__build_opts *o) {
  return c->format != AIR__FMT_TEXT && o->structured_output == AIR__STRUCT_TOOL;
}

int air__ant_can_express(const air__canon *c, const air__build_opts *o,
                         air_error *err) {
  const air__cextra *x = air__canon_first_extra(c, AIR_DIALECT_ANTHROPIC);
  if (x != NULL) return air__canon_unsupported(err, x->field, API_NAME);
  /* The API refuses thinking with a forced tool: a schema asked through
   * the tool and thinking together cannot be said (docs/design.md §4). */
  if (json_tool(c, o) && wants_thinking(c)) {
    char f[160];
    snprintf(f, sizeof(f), "%s with %s (structured_output: tool)",
             c->reasoning_field ? c->reasoning_field : "reasoning_effort",
             c->format_field ? c->format_field : "response_format");
    return air__canon_unsupported(err, f, API_NAME);
  }
  return 0;
}

/* ---- encode_request
 * ---------------------------------------------------------- */

static bool all_space(air__str s) {
  for (size_t k = 0; k < s.n; k++)
    if (s.p[k] != ' ' && s.p[k] != '\t' && s.p[k] != '\r' && s.p[k] != '\n')
      return false;
  return true;
}

/* Encoding state: the messages so far and the system text. */
typedef struct enc {
  const air__canon *c;
  air_error *err;
  json_t *msgs;
  air__buf system;
} enc;

static int add_system(enc *e, air__str s) {
  if (s.n == 0) return 0;
  int rc = 0;
  if (e->system.n > 0) rc = air__buf_add(&e->system, LIT("\n\n"));
  if (rc == 0) rc = air__buf_add(&e->system, s.p, s.n);
  return rc;
}

static json_t *text_block(air__str s) {
  return json_pack("{s:s, s:o}", "type", "text", "text", air__json_strn(s));
}

static json_t *image_block(const air__cpart *p) {
  json_t *src = p->url.p != NULL
                    ? json_pack("{s:s, s:o}", "type", "url", "url",
                                air__json_strn(p->url))
                    : json_pack("{s:s, s:o, s:o}", "type", "base64",
                                "media_type", air__json_strn(p->media_type),
                                "data", air__json_strn(p->data));
  return json_pack("{s:s, s:o}", "type", "image", "source", src);
}

/* Text (non-empty) and image parts as blocks appended to blocks. */
static int plain_block(const air__cpart *p, json_t *blocks) {
  if (p->kind == AIR__CP_TEXT)
    return p->text.n == 0 ? 0 : air__json_push(blocks, text_block(p->text));
  if (p->kind == AIR__CP_IMAGE) return air__json_push(blocks, image_block(p));
  if (p->kind == AIR__CP_OPAQUE && p->origin == AIR_DIALECT_ANTHROPIC)
    return air__json_push(blocks, json_loadb(p->raw.p, p->raw.n, 0, NULL));
  return 0;
}

static int tool_use_block(enc *e, const air__cpart *p, json_t *blocks) {
  json_t *input;
  if (p->args.p == NULL || all_space(p->args)) {
    input = json_object();
  } else {
    input = json_loadb(p->args.p, p->args.n, 0, NULL);
    if (input == NULL) return invalid(e->err, p->args_field, "invalid JSON");
    if (!json_is_object(input)) {
      json_decref(input);
      return invalid(e->err, p->args_field, "expected a JSON object");
    }
  }
  return air__json_push(
      blocks, json_pack("{s:s, s:o, s:o, s:o}", "type", "tool_use", "id",
                        air__json_strn(p->id), "name", air__json_strn(p->name),
                        "input", input));
}

static int tool_result_block(const air__cpart *p, json_t *blocks) {
  json_t *content;
  int rc = 0;
  if (p->content_string) {
    content = air__json_strn(p->text);
  } else {
    content = json_array();
    for (size_t k = 0; content != NULL && rc == 0 && k < p->n_parts; k++)
      rc = plain_block(&p->parts[k], content);
    if (rc == 0 && json_array_size(content) == 0) {
      json_decref(content);
      content = json_string("");
    }
  }
  if (rc != 0 || content == NULL) {
    json_decref(content);
    return rc != 0 ? rc : AIR_ENOMEM;
  }
  json_t *b = json_pack("{s:s, s:o, s:o}", "type", "tool_result", "tool_use_id",
                        air__json_strn(p->id), "content", content);
  if (b != NULL && p->is_error &&
      (rc = air__json_put(b, "is_error", json_true())) != 0) {
    json_decref(b);
    return rc;
  }
  return air__json_push(blocks, b);
}

/* Appends blocks (taken) as a message of role, merged into the previous
 * message when it has the same role; nothing when blocks is empty. */
static int push(enc *e, const char *role, json_t *blocks) {
  if (blocks == NULL) return AIR_ENOMEM;
  if (json_array_size(blocks) == 0) {
    json_decref(blocks);
    return 0;
  }
  size_t k = json_array_size(e->msgs);
  json_t *last = k > 0 ? json_array_get(e->msgs, k - 1) : NULL;
  const char *lr = json_string_value(json_object_get(last, "role"));
  if (lr != NULL && strcmp(lr, role) == 0) {
    int rc = json_array_extend(json_object_get(last, "content"), blocks);
    json_decref(blocks);
    return rc == 0 ? 0 : AIR_ENOMEM;
  }
  json_t *m = json_pack("{s:s, s:o}", "role", role, "content", blocks);
  return air__json_push(e->msgs, m);
}

static int turn(enc *e, const air__cmsg *m) {
  int rc = 0;
  if (m->role == AIR__ROLE_SYSTEM) {
    for (size_t j = 0; j < m->n_parts && rc == 0; j++)
      if (m->parts[j].kind == AIR__CP_TEXT)
        rc = add_system(e, m->parts[j].text);
    return rc;
  }
  json_t *blocks = json_array();
  if (blocks == NULL) return AIR_ENOMEM;
  for (size_t j = 0; j < m->n_parts && rc == 0; j++) {
    const air__cpart *p = &m->parts[j];
    if (p->kind == AIR__CP_TOOL_CALL)
      rc = tool_use_block(e, p, blocks);
    else if (p->kind == AIR__CP_TOOL_RESULT)
      rc = tool_result_block(p, blocks);
    else
      rc = plain_block(p, blocks);
  }
  if (rc != 0) {
    json_decref(blocks);
    return rc;
  }
  return push(e, m->role == AIR__ROLE_USER ? "user" : "assistant", blocks);
}

static int messages(enc *e) {
  const air__canon *c = e->c;
  int rc = 0;
  for (size_t i = 0; i < c->n_system && rc == 0; i++)
    if (c->system[i].kind == AIR__CP_TEXT)
      rc = add_system(e, c->system[i].text);
  for (size_t i = 0; i < c->n_msgs && rc == 0; i++) rc = turn(e, &c->msgs[i]);
  if (rc != 0) return rc;
  if (json_array_size(e->msgs) == 0)
    return invalid(e->err, "messages", "no user or assistant message");
  /* A message holding one plain text block is written as a string. */
  size_t i;
  json_t *m;
  json_array_foreach(e->msgs, i, m) {
    json_t *content = json_object_get(m, "content");
    json_t *b = json_array_get(content, 0);
    if (json_array_size(content) == 1 && json_object_size(b) == 2 &&
        json_is_string(json_object_get(b, "text"))) {
      const char *t = json_string_value(json_object_get(b, "type"));
      if (t != NULL && strcmp(t, "text") == 0 &&
          json_object_set(m, "content", json_object_get(b, "text")) != 0)
        return AIR_ENOMEM;
    }
  }
  return 0;
}

/* A tool: {name, description, input_schema}. */
static json_t *tool_head(const air__ctool *t) {
  return json_pack("{s:o}", "name", air__json_strn(t->name));
}

static int tool_choice(const air__canon *c, json_t *out) {
  int rc = 0;
  if (c->tool_choice != AIR__TC_UNSET) {
    json_t *r = c->tool_choice == AIR__TC_TOOL
                    ? json_pack("{s:s,s:o}", "type", "tool", "name",
                                air__json_strn(c->tool_choice_name))
                    : json_pack("{s:s}", "type",
                                c->tool_choice == AIR__TC_AUTO       ? "auto"
                                : c->tool_choice == AIR__TC_REQUIRED ? "any"
                                                                     : "none");
    rc = air__json_put(out, "tool_choice", r);
  }
  /* Parallel tool calls off: Anthropic says it on tool_choice. */
  if (rc == 0 && c->parallel_tools == 0 &&
      json_object_get(out, "tools") != NULL) {
    if (json_object_get(out, "tool_choice") == NULL)
      rc =
          air__json_put(out, "tool_choice", json_pack("{s:s}", "type", "auto"));
    json_t *tc = rc == 0 ? json_object_get(out, "tool_choice") : NULL;
    const char *t = json_string_value(json_object_get(tc, "type"));
    if (t != NULL && strcmp(t, "none") != 0)
      rc = air__json_put(tc, "disable_parallel_tool_use", json_true());
  }
  return rc;
}

/* The schema a JSON format asks for (json_object: any object). */
static json_t *format_schema(const air__canon *c) {
  if (c->format == AIR__FMT_JSON_SCHEMA)
    return json_loadb(c->format_schema.p, c->format_schema.n, 0, NULL);
  return json_pack("{s:s}", "type", "object");
}

/*
 * The JSON format: structured_output native, output_config.format;
 * tool, one more tool (AIR__JSON_TOOL, its input_schema the schema) and
 * tool_choice forcing it (the caller's tool_choice is replaced), and the
 * decoder told to give its input back as text.
 */
static int structured(const air__canon *c, const air__build_opts *o,
                      json_t *root) {
  if (c->format == AIR__FMT_TEXT) return 0;
  if (o->structured_output == AIR__STRUCT_NATIVE)
    return air__json_put(root, "output_config",
                         json_pack("{s:{s:s, s:o}}", "format", "type",
                                   "json_schema", "schema", format_schema(c)));
  json_t *tools = json_object_get(root, "tools");
  int rc = 0;
  if (tools == NULL) {
    tools = json_array();
    rc = air__json_put(root, "tools", tools);
  }
  if (rc == 0)
    rc = air__json_push(
        tools,
        json_pack("{s:s, s:s, s:o}", "name", AIR__JSON_TOOL, "description",
                  "Give the answer as this tool's input: a JSON value "
                  "matching its schema.",
                  "input_schema", format_schema(c)));
  if (rc == 0)
    rc = air__json_put(
        root, "tool_choice",
        json_pack("{s:s, s:s}", "type", "tool", "name", AIR__JSON_TOOL));
  if (rc == 0 && o->json_tool != NULL) *o->json_tool = true;
  return rc;
}

static int fields(const air__canon *c, bool thinking, json_t *root) {
  int rc = 0;
  /* With thinking the API takes no temperature or top_p change. */
  if (c->temperature.set && !thinking) {
    double t = c->temperature.d;
    rc = air__json_put(root, "temperature",
                       json_real(t < 0   ? 0
                                 : t > 1 ? 1
                                         : t));
  }
  if (rc == 0 && c->top_p.set && !thinking)
    rc = air__json_put(root, "top_p", air__json_num(&c->top_p));
  if (rc == 0 && c->n_stop > 0) {
    json_t *seq = json_array();
    for (size_t i = 0; seq != NULL && rc == 0 && i < c->n_stop; i++)
      rc = air__json_push(seq, air__json_strn(c->stop[i]));
    if (rc == 0)
      rc = air__json_put(root, "stop_sequences", seq);
    else
      json_decref(seq);
  }
  if (rc == 0) rc = air__json_tools(c, root, tool_head, "input_schema", NULL);
  if (rc == 0) rc = tool_choice(c, root);
  if (rc == 0 && c->user.p != NULL)
    rc = air__json_put(root, "metadata",
                       json_pack("{s:o}", "user_id", air__json_strn(c->user)));
  return rc;
}

/* A continuation's final assistant message loses its text's trailing
 * white space: the API refuses "final assistant content cannot end with
 * trailing whitespace" (400). The seam (stream/seam.h) drops the
 * continuation's leading white space when the text sent ended with some. */
static int trim_final(json_t *msgs) {
  size_t k = json_array_size(msgs);
  json_t *m = k > 0 ? json_array_get(msgs, k - 1) : NULL;
  const char *role = json_string_value(json_object_get(m, "role"));
  if (role == NULL || strcmp(role, "assistant") != 0) return 0;
  json_t *content = json_object_get(m, "content");
  json_t *holder = m;
  const char *key = "content";
  if (json_is_array(content)) {
    size_t nb = json_array_size(content);
    holder = nb > 0 ? json_array_get(content, nb - 1) : NULL;
    key = "text";
  }
  json_t *t = json_object_get(holder, key);
  if (!json_is_string(t)) return 0;
  const char *s = json_string_value(t);
  size_t n = json_string_length(t);
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' ||
                   s[n - 1] == '\r' || s[n - 1] == '\f' || s[n - 1] == '\v'))
    n--;
  if (n == json_string_length(t)) return 0;
  return air__json_put(holder, key, json_stringn(s, n));
}

int air__ant_encode_request(const air__canon *c, const air__build_opts *o,
                            air__buf *out, air_error *err) {
  enc e = {c, err, json_array(), {0}};
  air__buf_init(&e.system, AIR__MAX_REQUEST_BYTES);
  json_t *root = json_object();
  int rc = root != NULL && e.msgs != NULL ? 0 : AIR_ENOMEM;
  /* Thinking: the budget of the effort (or the one given), below
   * max_tokens as the API wants: with no max_tokens asked, the default
   * answer length plus the budget; with one, the budget cut to fit it, and
   * no thinking when under the API's minimum of 1024. Not with a forced
   * tool (the API refuses it): the JSON tool, or the caller's own choice. */
  int64_t budget = c->effort != AIR__EFFORT_UNSET ? budget_of(c->effort)
                                                  : c->thinking_budget;
  int64_t max_tokens = c->max_tokens;
  if (json_tool(c, o) || c->tool_choice == AIR__TC_REQUIRED ||
      c->tool_choice == AIR__TC_TOOL)
    budget = 0;
  if (budget > 0 && max_tokens > 0 && budget >= max_tokens)
    budget = max_tokens - 1;
  if (budget > 0 && budget < 1024) budget = 0;
  if (budget > 0 && max_tokens == 0)
    max_tokens = (int64_t)(o->default_max_tokens ? o->default_max_tokens
                                                 : DEFAULT_MAX_TOKENS) +
                 budget;
  /* Key order: model, max_tokens, system, messages, the rest; stream
   * last (finish_body). */
  if (rc == 0) rc = air__json_put(root, "model", json_string(""));
  if (rc == 0 && max_tokens > 0)
    rc =
        air__json_put(root, "max_tokens", json_integer((json_int_t)max_tokens));
  if (rc == 0) rc = messages(&e);
  if (rc == 0 && e.system.n > 0)
    rc = air__json_put(root, "system", json_stringn(e.system.p, e.system.n));
  if (rc == 0) rc = air__json_put(root, "messages", json_incref(e.msgs));
  if (rc == 0) rc = fields(c, budget > 0, root);
  if (rc == 0 && budget > 0)
    rc = air__json_put(root, "thinking",
                       json_pack("{s:s, s:I}", "type", "enabled",
                                 "budget_tokens", (json_int_t)budget));
  if (rc == 0) rc = structured(c, o, root);
  if (rc == 0 && c->cont_style != AIR_CONT_NONE) rc = trim_final(e.msgs);
  if (rc == 0) rc = air__json_cont_style(c, root, e.msgs);
  if (rc == 0) rc = air__ant_finish_body(root, c->model, o, out, err);
  json_decref(root);
  json_decref(e.msgs);
  air__buf_cleanup(&e.system);
  return rc;
}
