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
#include <stdlib.h>
#include <string.h>

#include "codec_json.h"
#include "limits.h"
#include "openai_chat.h"

#define API_NAME "openai"

static int fail(air_error *err, int code, const char *what) {
  if (err != NULL) {
    err->code = code;
    snprintf(err->message, sizeof(err->message), "%s", what);
  }
  return code;
}

int air__oai_finish_body(json_t *root, const char *req_model,
                         const air__build_opts *o, air_error *err) {
  int rc;
  if (o->override_json != NULL) {
    json_t *ov = json_loads(o->override_json, 0, NULL);
    if (!json_is_object(ov)) {
      json_decref(ov);
      return fail(err, AIR_EINVAL, "override: expected a JSON object");
    }
    rc = json_object_update(root, ov) == 0 ? 0 : AIR_ENOMEM;
    json_decref(ov);
    if (rc != 0) return rc;
  }
  const char *model = o->model != NULL ? o->model : req_model;
  if ((rc = air__json_put(root, "model",
                          json_string(model != NULL ? model : ""))) != 0 ||
      (rc = air__json_put(root, "stream", json_true())) != 0)
    return rc;
  json_t *so = json_object_get(root, "stream_options");
  if (!json_is_object(so)) {
    so = json_object();
    if ((rc = air__json_put(root, "stream_options", so)) != 0) return rc;
  }
  return air__json_put(so, "include_usage", json_true());
}

/* ---- can_express ------------------------------------------------------------
 */

int air__oai_can_express(const air__canon *c, const air__build_opts *o,
                         air_error *err) {
  (void)o;
  const air__cextra *x = air__canon_first_extra(c, AIR_DIALECT_OPENAI);
  /* A tool result holding more than text (an image). */
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
  return 0;
}

/* ---- encode_request
 * ---------------------------------------------------------- */

static json_t *jstring(air__str s) {
  return json_stringn(s.p ? s.p : "", s.n);
}

static json_t *num(const air__cnum *n) {
  return n->is_int ? json_integer((json_int_t)n->i) : json_real(n->d);
}

/* An image part: {type: image_url, image_url: {url}} (inline data as a
 * data: URL). */
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
  return json_pack("{s:s, s:{s:o}}", "type", "image_url", "image_url", "url",
                   url);
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

/* Text and image parts as a content array (other parts left out). */
static int content_parts(const air__cmsg *m, json_t *parts) {
  int rc = 0;
  for (size_t j = 0; j < m->n_parts && rc == 0; j++) {
    const air__cpart *p = &m->parts[j];
    if (p->kind == AIR__CP_TEXT)
      rc = air__json_push(parts, json_pack("{s:s, s:o}", "type", "text", "text",
                                           jstring(p->text)));
    else if (p->kind == AIR__CP_IMAGE)
      rc = air__json_push(parts, image(p));
  }
  return rc;
}

static int system_turn(const air__cmsg *m, json_t *msgs) {
  json_t *parts = json_array();
  if (parts == NULL) return AIR_ENOMEM;
  int rc = content_parts(m, parts);
  if (rc != 0) {
    json_decref(parts);
    return rc;
  }
  json_t *c = as_content(parts);
  return air__json_push(
      msgs,
      json_pack("{s:s, s:o}", "role", m->developer ? "developer" : "system",
                "content", c != NULL ? c : json_string("")));
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
    json_t *text = p->content_string ? jstring(p->text)
                                     : joined(p->parts, p->n_parts, "\n");
    rc = air__json_push(
        msgs, json_pack("{s:s, s:o, s:o}", "role", "tool", "tool_call_id",
                        jstring(p->id), "content", text));
  }
  if (rc != 0) return rc;
  json_t *parts = json_array();
  if (parts == NULL) return AIR_ENOMEM;
  if ((rc = content_parts(m, parts)) != 0) {
    json_decref(parts);
    return rc;
  }
  if (json_array_size(parts) == 0 && n_results > 0) {
    json_decref(parts);
    return 0;
  }
  json_t *c = as_content(parts);
  return air__json_push(msgs, json_pack("{s:s, s:o}", "role", "user", "content",
                                        c != NULL ? c : json_string("")));
}

/* An assistant turn: text as content, tool calls as tool_calls. */
static int assistant_turn(const air__cmsg *m, json_t *msgs) {
  json_t *parts = json_array();
  json_t *calls = json_array();
  int rc = parts != NULL && calls != NULL ? 0 : AIR_ENOMEM;
  for (size_t j = 0; j < m->n_parts && rc == 0; j++) {
    const air__cpart *p = &m->parts[j];
    if (p->kind == AIR__CP_TEXT) {
      rc = air__json_push(parts, json_pack("{s:s, s:o}", "type", "text", "text",
                                           jstring(p->text)));
    } else if (p->kind == AIR__CP_TOOL_CALL) {
      air__str args = p->args.p != NULL ? p->args : (air__str){"{}", 2};
      rc = air__json_push(
          calls, json_pack("{s:o, s:s, s:{s:o, s:o}}", "id", jstring(p->id),
                           "type", "function", "function", "name",
                           jstring(p->name), "arguments", jstring(args)));
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

static int messages(const air__canon *c, json_t *msgs) {
  int rc = 0;
  if (c->has_system) {
    if (c->system_string) {
      if (c->n_system > 0 && c->system[0].text.n > 0)
        rc = air__json_push(msgs,
                            json_pack("{s:s, s:o}", "role", "system", "content",
                                      jstring(c->system[0].text)));
    } else {
      rc = air__json_push(msgs,
                          json_pack("{s:s, s:o}", "role", "system", "content",
                                    joined(c->system, c->n_system, "\n")));
    }
  }
  for (size_t i = 0; i < c->n_msgs && rc == 0; i++) {
    const air__cmsg *m = &c->msgs[i];
    if (m->role == AIR__ROLE_SYSTEM)
      rc = system_turn(m, msgs);
    else if (m->role == AIR__ROLE_USER)
      rc = user_turn(m, msgs);
    else
      rc = assistant_turn(m, msgs);
  }
  return rc;
}

static int tools(const air__canon *c, json_t *out) {
  if (c->n_tools == 0) return 0;
  json_t *arr = json_array();
  if (arr == NULL) return AIR_ENOMEM;
  int rc = 0;
  for (size_t i = 0; i < c->n_tools && rc == 0; i++) {
    const air__ctool *t = &c->tools[i];
    json_t *fn = json_pack("{s:o}", "name", jstring(t->name));
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
    if (rc == 0)
      rc = air__json_push(
          arr, json_pack("{s:s, s:o}", "type", "function", "function", fn));
    else
      json_decref(fn);
  }
  if (rc == 0) return air__json_put(out, "tools", arr);
  json_decref(arr);
  return rc;
}

static int tool_choice(const air__canon *c, json_t *out) {
  json_t *v;
  switch (c->tool_choice) {
    case AIR__TC_UNSET:
      return 0;
    case AIR__TC_AUTO:
      v = json_string("auto");
      break;
    case AIR__TC_REQUIRED:
      v = json_string("required");
      break;
    case AIR__TC_NONE:
      v = json_string("none");
      break;
    default:
      v = json_pack("{s:s, s:{s:o}}", "type", "function", "function", "name",
                    jstring(c->tool_choice_name));
      break;
  }
  return air__json_put(out, "tool_choice", v);
}

/* The format: {type: json_object} or {type: json_schema, json_schema:
 * {name, schema, strict}} (name "output" when the caller gave none). */
static int response_format(const air__canon *c, json_t *out) {
  if (c->format == AIR__FMT_TEXT) return 0;
  if (c->format == AIR__FMT_JSON_OBJECT)
    return air__json_put(out, "response_format",
                         json_pack("{s:s}", "type", "json_object"));
  json_t *schema = json_loadb(c->format_schema.p, c->format_schema.n, 0, NULL);
  json_t *js = json_pack("{s:o, s:o}", "name",
                         c->format_name.p != NULL ? jstring(c->format_name)
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

/* reasoning_effort from the effort asked, else from a thinking budget
 * (docs/config.md: under 4096 low, under 16384 medium, else high);
 * adaptive thinking without an effort sends none (the model's default). */
static int reasoning_effort(const air__canon *c, json_t *out) {
  air__ceffort e = c->effort;
  if (e == AIR__EFFORT_UNSET && c->thinking_budget > 0)
    e = c->thinking_budget < 4096    ? AIR__EFFORT_LOW
        : c->thinking_budget < 16384 ? AIR__EFFORT_MEDIUM
                                     : AIR__EFFORT_HIGH;
  static const char *const names[] = {NULL,     "none", "minimal", "low",
                                      "medium", "high", "high"};
  if (e == AIR__EFFORT_UNSET) return 0;
  return air__json_put(out, "reasoning_effort", json_string(names[e]));
}

static int fields(const air__canon *c, json_t *out) {
  int rc = 0;
  if (c->max_tokens > 0)
    rc = air__json_put(out, "max_tokens",
                       json_integer((json_int_t)c->max_tokens));
  if (rc == 0 && c->temperature.set) {
    double t = c->temperature.d;
    rc = air__json_put(
        out, "temperature",
        t >= 0 && t <= 2 ? num(&c->temperature) : json_real(t > 2 ? 2.0 : 0.0));
  }
  if (rc == 0 && c->top_p.set) rc = air__json_put(out, "top_p", num(&c->top_p));
  if (rc == 0 && c->n_stop > 0) {
    json_t *s = json_array();
    for (size_t i = 0; s != NULL && rc == 0 && i < c->n_stop; i++)
      rc = air__json_push(s, jstring(c->stop[i]));
    rc = rc == 0 ? air__json_put(out, "stop", s) : (json_decref(s), rc);
  }
  if (rc == 0) rc = tools(c, out);
  if (rc == 0) rc = tool_choice(c, out);
  if (rc == 0 && c->parallel_tools == 0)
    rc = air__json_put(out, "parallel_tool_calls", json_false());
  if (rc == 0 && c->user.p != NULL)
    rc = air__json_put(out, "user", jstring(c->user));
  if (rc == 0) rc = response_format(c, out);
  if (rc == 0) rc = reasoning_effort(c, out);
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
  if (rc == 0) rc = air__oai_finish_body(root, c->model, o, err);
  if (rc == 0) rc = air__json_dump(root, JSON_COMPACT, out);
  json_decref(msgs);
  json_decref(root);
  return rc;
}
