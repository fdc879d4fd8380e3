/*
 * The canonical request as an OpenAI chat-completions upstream body
 * (POST {base_url}/chat/completions), and what this dialect cannot say.
 *
 *   - system text given apart (Anthropic's "system": a string, or text
 *     blocks joined with "\n") is a first system message; system turns are
 *     system (or developer) messages in their place;
 *   - user turns: text and images are content (a string for one text part,
 *     else an array of text / image_url parts; inline images as data:
 *     URLs); tool results are {role: tool} messages placed before them
 *     (content a string; text parts joined with "\n"; is_error has no
 *     OpenAI form and is left out);
 *   - assistant turns: text is content, tool calls are tool_calls
 *     (arguments as given, "{}" when none), reasoning of earlier turns
 *     (thinking blocks with their signatures) has no OpenAI form and is
 *     dropped;
 *   - tools, tool_choice (parallel off -> parallel_tool_calls false), stop,
 *     max_tokens, temperature clamped to 0..2 (a value in range is written
 *     as given), top_p, user.
 * Not expressible (can_express: AIR_ENOTSUP naming the first in the
 * caller's order; dropped under drop_params): the caller dialect's extras
 * and anything but text in a tool result.
 *
 * The body: the override merged first (json_object_update: a null value
 * is written as null), then model, stream and stream_options.include_usage
 * are set, so an override cannot turn streaming off or change the model.
 */
#include <stdio.h>
#include <string.h>

#include "codec_json.h"
#include "limits.h"
#include "openai_chat.h"

#define API_NAME "openai"

int air__oai_finish_body(json_t *root, const char *req_model,
                         const air__build_opts *o, air__buf *out,
                         air_error *err) {
  int rc = air__json_override(root, o->override_json, 0, err);
  if (rc == 0) rc = air__json_target(root, req_model, o);
  if (rc != 0) return rc;
  json_t *so = json_object_get(root, "stream_options");
  if (!json_is_object(so)) {
    so = json_object();
    if ((rc = air__json_put(root, "stream_options", so)) != 0) return rc;
  }
  rc = air__json_put(so, "include_usage", json_true());
  return rc != 0 ? rc : air__json_dump(root, JSON_COMPACT, out);
}

int air__oai_can_express(const air__canon *c, const air__build_opts *o,
                         air_error *err) {
  (void)o;
  return air__canon_text_results(c, AIR_DIALECT_OPENAI, API_NAME, err);
}

/* ---- encode_request
 * ---------------------------------------------------------- */

/* A text part: {type: text, text}. */
static int text_part(const air__cpart *p, json_t *parts) {
  return air__json_push(parts, json_pack("{s:s, s:o}", "type", "text", "text",
                                         air__json_strn(p->text)));
}

/* An image part: {type: image_url, image_url: {url}} (inline data as a
 * data: URL). */
static int image(const air__cpart *p, json_t *parts) {
  json_t *url;
  int rc = air__json_image_url(p, &url);
  if (rc != 0) return rc;
  return air__json_push(parts, json_pack("{s:s, s:{s:o}}", "type", "image_url",
                                         "image_url", "url", url));
}

/* Content parts as a message "content": one text part is a plain string,
 * anything else the array; no parts is NULL. Consumes parts. */
static json_t *as_content(json_t *parts) {
  json_t *c;
  json_t *p0 = json_array_get(parts, 0);
  const char *t0 = json_string_value(json_object_get(p0, "type"));
  if (json_array_size(parts) == 0) {
    c = NULL;
  } else if (json_array_size(parts) == 1 &&
             json_is_string(json_object_get(p0, "text")) && t0 != NULL &&
             strcmp(t0, "text") == 0) {
    c = json_incref(json_object_get(p0, "text"));
  } else {
    c = json_incref(parts);
  }
  json_decref(parts);
  return c;
}

/* Text and image parts as a content array (other parts left out). */
static int content_parts(const air__cmsg *m, json_t *parts) {
  int rc = 0;
  for (size_t j = 0; j < m->n_parts && rc == 0; j++) {
    const air__cpart *p = &m->parts[j];
    if (p->kind == AIR__CP_TEXT)
      rc = text_part(p, parts);
    else if (p->kind == AIR__CP_IMAGE)
      rc = image(p, parts);
  }
  return rc;
}

/* A message {role, content} of m's text and image parts (none when it has
 * none and empty_ok is false; else content "" for none). */
static int content_msg(const air__cmsg *m, const char *role, bool empty_ok,
                       json_t *msgs) {
  json_t *parts = json_array();
  if (parts == NULL) return AIR_ENOMEM;
  int rc = content_parts(m, parts);
  if (rc != 0 || (json_array_size(parts) == 0 && !empty_ok)) {
    json_decref(parts);
    return rc;
  }
  json_t *c = as_content(parts);
  return air__json_push(msgs, json_pack("{s:s, s:o}", "role", role, "content",
                                        c != NULL ? c : json_string("")));
}

/* A user turn: tool results as {role: tool} messages, then the other parts
 * as one user message (none when the turn held only tool results). */
static int user_turn(const air__cmsg *m, json_t *msgs) {
  size_t n_results = 0;
  int rc = 0;
  for (size_t j = 0; j < m->n_parts && rc == 0; j++) {
    const air__cpart *p = &m->parts[j];
    if (p->kind != AIR__CP_TOOL_RESULT) continue;
    n_results++;
    json_t *text;
    if ((rc = air__json_result_text(p, &text)) != 0) break;
    rc = air__json_push(
        msgs, json_pack("{s:s, s:o, s:o}", "role", "tool", "tool_call_id",
                        air__json_strn(p->id), "content", text));
  }
  return rc != 0 ? rc : content_msg(m, "user", n_results == 0, msgs);
}

/* An assistant turn: text as content, tool calls as tool_calls. */
static int assistant_turn(const air__cmsg *m, json_t *msgs) {
  json_t *parts = json_array();
  json_t *calls = json_array();
  int rc = parts != NULL && calls != NULL ? 0 : AIR_ENOMEM;
  for (size_t j = 0; j < m->n_parts && rc == 0; j++) {
    const air__cpart *p = &m->parts[j];
    if (p->kind == AIR__CP_TEXT) {
      rc = text_part(p, parts);
    } else if (p->kind == AIR__CP_TOOL_CALL) {
      air__str args = p->args.p != NULL ? p->args : (air__str){"{}", 2};
      rc = air__json_push(calls,
                          json_pack("{s:o, s:s, s:{s:o, s:o}}", "id",
                                    air__json_strn(p->id), "type", "function",
                                    "function", "name", air__json_strn(p->name),
                                    "arguments", air__json_strn(args)));
    }
  }
  if (rc != 0) {
    json_decref(parts);
    json_decref(calls);
    return rc;
  }
  json_t *msg = json_pack("{s:s}", "role", "assistant");
  json_t *c = as_content(parts);
  if (msg == NULL) {
    json_decref(c);
    rc = AIR_ENOMEM;
  } else {
    rc = air__json_put(msg, "content", c != NULL ? c : json_null());
  }
  if (rc == 0 && json_array_size(calls) > 0)
    rc = air__json_put(msg, "tool_calls", json_incref(calls));
  json_decref(calls);
  if (rc != 0) {
    json_decref(msg);
    return rc;
  }
  return air__json_push(msgs, msg);
}

/* System text given apart: one system message (a string given empty: none;
 * text blocks joined with "\n"). */
static int system_text(const air__canon *c, json_t *msgs) {
  json_t *text;
  if (!c->has_system) return 0;
  if (c->system_string) {
    if (c->n_system == 0 || c->system[0].text.n == 0) return 0;
    text = air__json_strn(c->system[0].text);
  } else {
    int rc = air__json_joined(c->system, c->n_system, "\n", &text);
    if (rc != 0) return rc;
  }
  return air__json_push(
      msgs, json_pack("{s:s, s:o}", "role", "system", "content", text));
}

static int messages(const air__canon *c, json_t *msgs) {
  int rc = system_text(c, msgs);
  for (size_t i = 0; i < c->n_msgs && rc == 0; i++) {
    const air__cmsg *m = &c->msgs[i];
    if (m->role == AIR__ROLE_SYSTEM)
      rc = content_msg(m, m->developer ? "developer" : "system", true, msgs);
    else if (m->role == AIR__ROLE_USER)
      rc = user_turn(m, msgs);
    else
      rc = assistant_turn(m, msgs);
  }
  return rc;
}

/* A tool: {type: function, function: {name, description, parameters}}. */
static json_t *tool_head(const air__ctool *t) {
  return json_pack("{s:o}", "name", air__json_strn(t->name));
}

static json_t *tool_wrap(json_t *def) {
  return json_pack("{s:s, s:o}", "type", "function", "function", def);
}

/* The format: {type: json_object} or {type: json_schema, json_schema:
 * {name, schema, strict}} (name "output" when the caller gave none). */
static int response_format(const air__canon *c, json_t *out) {
  if (c->format == AIR__FMT_TEXT) return 0;
  if (c->format == AIR__FMT_JSON_OBJECT)
    return air__json_put(out, "response_format",
                         json_pack("{s:s}", "type", "json_object"));
  json_t *schema = json_loadb(c->format_schema.p, c->format_schema.n, 0, NULL);
  json_t *js =
      json_pack("{s:o, s:o}", "name",
                c->format_name.p != NULL ? air__json_strn(c->format_name)
                                         : json_string("output"),
                "schema", schema);
  int rc = js != NULL ? 0 : AIR_ENOMEM;
  if (rc == 0 && c->format_strict >= 0)
    rc = air__json_put(js, "strict", json_boolean(c->format_strict));
  if (rc != 0) {
    json_decref(js);
    return rc;
  }
  return air__json_put(
      out, "response_format",
      json_pack("{s:s, s:o}", "type", "json_schema", "json_schema", js));
}

static int fields(const air__canon *c, json_t *out) {
  int rc = air__json_openai_sampling(c, out, "max_tokens");
  if (rc == 0 && c->n_stop > 0) {
    json_t *s = json_array();
    for (size_t i = 0; s != NULL && rc == 0 && i < c->n_stop; i++)
      rc = air__json_push(s, air__json_strn(c->stop[i]));
    rc = rc == 0 ? air__json_put(out, "stop", s) : (json_decref(s), rc);
  }
  if (rc == 0) rc = air__json_tools(c, out, tool_head, "parameters", tool_wrap);
  if (rc == 0) rc = air__json_openai_choice(c, out, true);
  if (rc == 0) rc = response_format(c, out);
  /* reasoning_effort from the effort asked, else from a thinking budget
   * (air__canon_effort); adaptive thinking without an effort sends none
   * (the model's default). */
  air__ceffort e = air__canon_effort(c);
  if (rc == 0 && e != AIR__EFFORT_UNSET)
    rc = air__json_put(out, "reasoning_effort",
                       json_string(air__canon_effort_name(e)));
  return rc;
}

int air__oai_encode_request(const air__canon *c, const air__build_opts *o,
                            air__buf *out, air_error *err) {
  json_t *root = json_object();
  json_t *msgs = json_array();
  int rc = root != NULL && msgs != NULL ? 0 : AIR_ENOMEM;
  if (rc == 0) rc = air__json_put(root, "model", json_string(""));
  if (rc == 0) rc = air__json_put(root, "messages", json_incref(msgs));
  if (rc == 0) rc = messages(c, msgs);
  if (rc == 0) rc = fields(c, root);
  if (rc == 0) rc = air__json_cont_style(c, root, msgs);
  if (rc == 0) rc = air__oai_finish_body(root, c->model, o, out, err);
  json_decref(msgs);
  json_decref(root);
  return rc;
}
