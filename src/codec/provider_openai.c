/*
 * The OpenAI chat-completions dialect (DESIGN.md 5): upstream requests for
 * POST {base_url}/chat/completions (from OpenAI or Anthropic callers), its
 * stream of chat.completion.chunk events and its chat.completion bodies
 * decoded into parts, and parts of either upstream encoded for callers that
 * speak OpenAI.
 *
 * Hot path (decode_event, encode_part): json.c tokens and appends to
 * bounded buffers. Nothing is allocated per event once the decoder's scratch
 * buffer has grown to the largest escaped event seen. Cold paths
 * (build_request, decode_body, encode_response) use jansson where it helps.
 *
 * Choices where the API is silent:
 *   - decode: an event whose data is empty or white space is a keep-alive
 *     (nothing, not malformed). A chunk with no choices and no usage (Azure's
 *     prompt_filter_results chunk, id "") yields nothing, not even START.
 *     An event is checked whole before any of its parts is handed over, so a
 *     malformed event (not a JSON object; choices, delta, finish_reason,
 *     tool_calls or usage of the wrong type; a tool index outside
 *     0..AIR__DECODER_MAX_TOOLS-1) yields nothing at all. An empty
 *     finish_reason ("") is no finish. A tool call piece with neither id,
 *     name nor arguments yields nothing; a second id/name for a tool index
 *     that already had its TOOL_START yields no second TOOL_START.
 *     "reasoning_content" wins over "reasoning" when both are present.
 *   - encode: empty TEXT/REASONING/REFUSAL/TOOL_DELTA parts write nothing; a
 *     second START or FINISH writes nothing. encode_end after no FINISH
 *     writes a finish chunk ("stop") so a clean end always carries a
 *     finish_reason; the usage chunk is written only when the caller asked
 *     for it and a USAGE part was seen. ids and model names are cut to the
 *     encoder's fixed fields (at a UTF-8 boundary, and at a NUL byte).
 *   - encode_response: "created" comes from air__aggregate.created; a tool
 *     call without arguments gets "{}" (clients JSON.parse them); a finish
 *     of NONE is "stop"; an empty id is "chatcmpl-airetry".
 *   - build_request: override_json is merged first, then model, stream and
 *     stream_options.include_usage are set, so an override cannot turn
 *     streaming off or change the model. Across dialects the keys are
 *     written in a fixed order (model, messages, then the caller's order).
 *     The rules of the Anthropic translation are above from_anthropic().
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "limits.h"
#include "provider.h"

/* A string literal as (pointer, length) for air__buf_add. */
#define LIT(s) (s), (sizeof(s) - 1)

/* The id used when a stream or body has none. */
#define DEFAULT_ID "chatcmpl-airetry"

/* The most bytes of one request body built for an upstream. */
#define MAX_REQUEST_BYTES AIR__MAX_REQUEST_BYTES

/* ---- small helpers
 * ------------------------------------------------------------ */

static int fail(air_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Fills err (when given) and returns code. */
static int fail(air_error *err, int code, const char *fmt, ...) {
  if (err != NULL) {
    va_list ap;
    va_start(ap, fmt);
    err->code = code;
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
  }
  return code;
}

/* Drops what was appended to out since mark (a failed append leaves no
 * partial chunk behind). */
static void rollback(air__buf *out, size_t mark) {
  out->n = mark;
  if (out->p != NULL) out->p[mark] = '\0';
}

/* air__buf_add_json_str that accepts (NULL, 0). */
static int jstr(air__buf *b, const char *s, size_t n) {
  return air__buf_add_json_str(b, s != NULL ? s : "", s != NULL ? n : 0);
}

static int add_int(air__buf *b, long long v) {
  if (v >= 0) return air__buf_addu(b, (unsigned long long)v);
  int rc = air__buf_addc(b, '-');
  return rc != 0 ? rc : air__buf_addu(b, 0ull - (unsigned long long)v);
}

static uint64_t sat_add(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static air_finish map_finish(const char *s, size_t n) {
  if (n == 4 && memcmp(s, "stop", 4) == 0) return AIR_FINISH_STOP;
  if (n == 6 && memcmp(s, "length", 6) == 0) return AIR_FINISH_LENGTH;
  if ((n == 10 && memcmp(s, "tool_calls", 10) == 0) ||
      (n == 13 && memcmp(s, "function_call", 13) == 0))
    return AIR_FINISH_TOOL_CALLS;
  if (n == 14 && memcmp(s, "content_filter", 14) == 0)
    return AIR_FINISH_CONTENT_FILTER;
  return AIR_FINISH_STOP;
}

/* The OpenAI finish_reason for a normalized finish (DESIGN.md 2.1: a refusal
 * is a content_filter to an OpenAI caller). */
static const char *finish_str(air_finish f) {
  switch (f) {
    case AIR_FINISH_LENGTH:
    case AIR_FINISH_CONTEXT:
      return "length";
    case AIR_FINISH_TOOL_CALLS:
      return "tool_calls";
    case AIR_FINISH_CONTENT_FILTER:
    case AIR_FINISH_REFUSAL:
      return "content_filter";
    default:
      return "stop";
  }
}

/* ---- build_request
 * -------------------------------------------------------------- */

/*
 * What every upstream body gets, after the dialect's own fields: the
 * override merged over the top level, then "model", "stream": true and
 * stream_options.include_usage: true (other stream_options keys kept).
 */
static int finish_body(json_t *root, const air__request *req,
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
  const char *model = o->model != NULL ? o->model : req->model;
  if ((rc = air__json_put(root, "model", json_string(model != NULL ? model : ""))) != 0 ||
      (rc = air__json_put(root, "stream", json_true())) != 0)
    return rc;
  json_t *so = json_object_get(root, "stream_options");
  if (!json_is_object(so)) {
    so = json_object();
    if ((rc = air__json_put(root, "stream_options", so)) != 0) return rc;
  }
  return air__json_put(so, "include_usage", json_true());
}

/* Translation state: the options and where errors go. */
typedef struct xl {
  const air__build_opts *o;
  air_error *err;
} xl;

/* A field OpenAI cannot express: 0 (drop it) with drop_params, otherwise
 * AIR_EINVAL naming it. */
static int unsupported(xl *x, const char *field) {
  if (x->o->drop_params) return 0;
  return fail(x->err, AIR_ENOTSUP, "%s" AIR__NOT_SUPPORTED "openai upstreams",
              field);
}

/* The "type" string of a content block, or NULL (and an error) when the
 * block is not an object with a string type. */
static const char *block_type(xl *x, json_t *b, const char *path, int *rc) {
  const char *t = json_string_value(json_object_get(b, "type"));
  if (!json_is_object(b) || t == NULL) {
    *rc = fail(x->err, AIR_EINVAL, "%s.type: expected a string", path);
    return NULL;
  }
  return t;
}

/* The "text" of a text block, or an error naming it. */
static json_t *block_text(xl *x, json_t *b, const char *path, int *rc) {
  json_t *t = json_object_get(b, "text");
  if (!json_is_string(t)) {
    *rc = fail(x->err, AIR_EINVAL, "%s.text: expected a string", path);
    return NULL;
  }
  return t;
}

/*
 * Text blocks joined with "\n" into one string (system prompts, tool
 * results). Other block types are unsupported (dropped with drop_params).
 * *out is NULL on error.
 */
static int join_text(xl *x, json_t *blocks, const char *path, json_t **out) {
  *out = NULL;
  air__buf b;
  air__buf_init(&b, MAX_REQUEST_BYTES);
  int rc = 0;
  bool first = true;
  size_t i;
  json_t *blk;
  json_array_foreach(blocks, i, blk) {
    char p[96];
    snprintf(p, sizeof(p), "%s[%zu]", path, i);
    const char *t = block_type(x, blk, p, &rc);
    if (t == NULL) break;
    if (strcmp(t, "text") != 0) {
      char f[128];
      snprintf(f, sizeof(f), "%s (type %s)", p, t);
      if ((rc = unsupported(x, f)) != 0) break;
      continue;
    }
    json_t *s = block_text(x, blk, p, &rc);
    if (s == NULL) break;
    if (!first) rc = air__buf_addc(&b, '\n');
    if (rc == 0)
      rc = air__buf_add(&b, json_string_value(s), json_string_length(s));
    if (rc != 0) break;
    first = false;
  }
  if (rc == 0) {
    *out = json_stringn(b.p != NULL ? b.p : "", b.n);
    if (*out == NULL) rc = AIR_ENOMEM;
  }
  air__buf_cleanup(&b);
  return rc;
}

static int xl_system(xl *x, json_t *sys, json_t *msgs) {
  json_t *content = NULL;
  int rc = 0;
  if (sys == NULL || json_is_null(sys)) return 0;
  if (json_is_string(sys)) {
    if (json_string_length(sys) == 0) return 0;
    content = json_incref(sys);
  } else if ((rc = join_text(x, sys, "system", &content)) != 0) {
    return rc;
  }
  json_t *m = json_pack("{s:s, s:o}", "role", "system", "content", content);
  return air__json_push(msgs, m);
}

/*
 * An Anthropic image block as an OpenAI image_url part: base64 sources
 * become data: URLs, url sources keep their URL. *out stays NULL when the
 * source cannot be expressed and is dropped.
 */
static int xl_image(xl *x, json_t *blk, const char *path, json_t **out) {
  *out = NULL;
  json_t *src = json_object_get(blk, "source");
  const char *st = json_string_value(json_object_get(src, "type"));
  char f[160];
  if (st != NULL && strcmp(st, "base64") == 0) {
    json_t *mt = json_object_get(src, "media_type");
    json_t *dt = json_object_get(src, "data");
    if (!json_is_string(mt) || !json_is_string(dt))
      return fail(x->err, AIR_EINVAL,
                  "%s.source: expected media_type and data strings", path);
    air__buf u;
    air__buf_init(&u, MAX_REQUEST_BYTES);
    int rc = air__buf_add(&u, LIT("data:"));
    if (rc == 0)
      rc = air__buf_add(&u, json_string_value(mt), json_string_length(mt));
    if (rc == 0) rc = air__buf_add(&u, LIT(";base64,"));
    if (rc == 0)
      rc = air__buf_add(&u, json_string_value(dt), json_string_length(dt));
    json_t *url = rc == 0 ? json_stringn(u.p, u.n) : NULL;
    air__buf_cleanup(&u);
    if (rc != 0) return rc;
    *out = json_pack("{s:s, s:{s:o}}", "type", "image_url", "image_url", "url",
                     url);
    return *out != NULL ? 0 : AIR_ENOMEM;
  }
  if (st != NULL && strcmp(st, "url") == 0) {
    json_t *url = json_object_get(src, "url");
    if (!json_is_string(url))
      return fail(x->err, AIR_EINVAL, "%s.source.url: expected a string", path);
    *out = json_pack("{s:s, s:{s:O}}", "type", "image_url", "image_url", "url",
                     url);
    return *out != NULL ? 0 : AIR_ENOMEM;
  }
  snprintf(f, sizeof(f), "%s.source.type %s", path, st != NULL ? st : "(none)");
  return unsupported(x, f);
}

/* Content parts as a message "content": one text part is a plain string,
 * anything else the array; no parts is NULL. Consumes parts. */
static json_t *as_content(json_t *parts) {
  json_t *c;
  if (json_array_size(parts) == 0) {
    c = NULL;
  } else if (json_array_size(parts) == 1 &&
             json_is_string(
                 json_object_get(json_array_get(parts, 0), "text")) &&
             strcmp(json_string_value(
                        json_object_get(json_array_get(parts, 0), "type")),
                    "text") == 0) {
    c = json_incref(json_object_get(json_array_get(parts, 0), "text"));
  } else {
    c = json_incref(parts);
  }
  json_decref(parts);
  return c;
}

/* A tool_result block as an OpenAI {role: tool} message. */
static int xl_tool_result(xl *x, json_t *blk, const char *path, json_t *msgs) {
  json_t *id = json_object_get(blk, "tool_use_id");
  if (!json_is_string(id))
    return fail(x->err, AIR_EINVAL, "%s.tool_use_id: expected a string", path);
  json_t *c = json_object_get(blk, "content");
  json_t *text = NULL;
  int rc = 0;
  if (c == NULL || json_is_null(c)) {
    text = json_string("");
  } else if (json_is_string(c)) {
    text = json_incref(c);
  } else if (json_is_array(c)) {
    char p[112];
    snprintf(p, sizeof(p), "%s.content", path);
    if ((rc = join_text(x, c, p, &text)) != 0) return rc;
  } else {
    return fail(x->err, AIR_EINVAL, "%s.content: expected a string or an array",
                path);
  }
  if (text == NULL) return AIR_ENOMEM;
  return air__json_push(msgs, json_pack("{s:s, s:O, s:o}", "role", "tool", "tool_call_id",
                              id, "content", text));
}

/*
 * A user message. tool_result blocks become {role: tool} messages, in their
 * order, and the other blocks (text, images) one user message after them:
 * OpenAI wants the tool messages right after the assistant's tool calls.
 */
static int xl_user(xl *x, size_t i, json_t *content, json_t *msgs) {
  if (json_is_string(content))
    return air__json_push(msgs,
                json_pack("{s:s, s:O}", "role", "user", "content", content));
  json_t *parts = json_array();
  if (parts == NULL) return AIR_ENOMEM;
  int rc = 0;
  size_t n_results = 0;
  size_t j;
  json_t *blk;
  json_array_foreach(content, j, blk) {
    char path[64];
    snprintf(path, sizeof(path), "messages[%zu].content[%zu]", i, j);
    const char *t = block_type(x, blk, path, &rc);
    if (t == NULL) break;
    if (strcmp(t, "text") == 0) {
      json_t *s = block_text(x, blk, path, &rc);
      if (s == NULL) break;
      rc = air__json_push(parts, json_pack("{s:s, s:O}", "type", "text", "text", s));
    } else if (strcmp(t, "image") == 0) {
      json_t *img = NULL;
      rc = xl_image(x, blk, path, &img);
      if (rc == 0 && img != NULL) rc = air__json_push(parts, img);
    } else if (strcmp(t, "tool_result") == 0) {
      rc = xl_tool_result(x, blk, path, msgs);
      n_results++;
    } else {
      char f[128];
      snprintf(f, sizeof(f), "%s (type %s)", path, t);
      rc = unsupported(x, f);
    }
    if (rc != 0) break;
  }
  if (rc != 0) {
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

/* An assistant tool_use block as an OpenAI tool call. */
static int xl_tool_use(xl *x, json_t *blk, const char *path, json_t *calls) {
  json_t *id = json_object_get(blk, "id");
  json_t *name = json_object_get(blk, "name");
  if (!json_is_string(id) || !json_is_string(name))
    return fail(x->err, AIR_EINVAL, "%s: expected id and name strings", path);
  json_t *input = json_object_get(blk, "input");
  char *args =
      input != NULL ? json_dumps(input, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
  json_t *a = json_string(args != NULL ? args : "{}");
  free(args);
  if (a == NULL) return AIR_ENOMEM;
  return air__json_push(
      calls, json_pack("{s:O, s:s, s:{s:O, s:o}}", "id", id, "type", "function",
                       "function", "name", name, "arguments", a));
}

/* An assistant message: text and tool_use blocks. Thinking blocks of
 * earlier turns have no OpenAI form and are dropped silently. */
static int xl_assistant(xl *x, size_t i, json_t *content, json_t *msgs) {
  if (json_is_string(content))
    return air__json_push(
        msgs, json_pack("{s:s, s:O}", "role", "assistant", "content", content));
  json_t *parts = json_array();
  json_t *calls = json_array();
  int rc = parts != NULL && calls != NULL ? 0 : AIR_ENOMEM;
  size_t j;
  json_t *blk;
  json_array_foreach(content, j, blk) {
    if (rc != 0) break;
    char path[64];
    snprintf(path, sizeof(path), "messages[%zu].content[%zu]", i, j);
    const char *t = block_type(x, blk, path, &rc);
    if (t == NULL) break;
    if (strcmp(t, "text") == 0) {
      json_t *s = block_text(x, blk, path, &rc);
      if (s == NULL) break;
      rc = air__json_push(parts, json_pack("{s:s, s:O}", "type", "text", "text", s));
    } else if (strcmp(t, "tool_use") == 0) {
      rc = xl_tool_use(x, blk, path, calls);
    } else if (strcmp(t, "thinking") != 0 &&
               strcmp(t, "redacted_thinking") != 0) {
      char f[128];
      snprintf(f, sizeof(f), "%s (type %s)", path, t);
      rc = unsupported(x, f);
    }
  }
  if (rc != 0) {
    json_decref(parts);
    json_decref(calls);
    return rc;
  }
  json_t *m = json_pack("{s:s}", "role", "assistant");
  json_t *c = as_content(parts);
  if (m == NULL) {
    json_decref(c);
    rc = AIR_ENOMEM;
  } else {
    rc = air__json_put(m, "content", c != NULL ? c : json_null());
  }
  if (rc == 0 && json_array_size(calls) > 0)
    rc = air__json_put(m, "tool_calls", json_incref(calls));
  json_decref(calls);
  if (rc != 0) {
    json_decref(m);
    return rc;
  }
  return air__json_push(msgs, m);
}

static int xl_messages(xl *x, json_t *in, json_t *msgs) {
  size_t i;
  json_t *m;
  json_array_foreach(in, i, m) {
    const char *role = json_string_value(json_object_get(m, "role"));
    json_t *content = json_object_get(m, "content");
    int rc;
    if (!json_is_string(content) && !json_is_array(content))
      return fail(x->err, AIR_EINVAL,
                  "messages[%zu].content: expected a string or an array", i);
    if (role != NULL && strcmp(role, "user") == 0)
      rc = xl_user(x, i, content, msgs);
    else if (role != NULL && strcmp(role, "assistant") == 0)
      rc = xl_assistant(x, i, content, msgs);
    else
      rc = fail(x->err, AIR_EINVAL,
                "messages[%zu].role: expected \"user\" or \"assistant\"", i);
    if (rc != 0) return rc;
  }
  return 0;
}

/* tools [{name, description, input_schema}] -> [{type: function, function:
 * {name, description, parameters}}]. Anthropic server tools (a type other
 * than "custom") are unsupported. */
static int xl_tools(xl *x, json_t *tools, json_t *out) {
  json_t *arr = json_array();
  if (arr == NULL) return AIR_ENOMEM;
  int rc = 0;
  size_t i;
  json_t *t;
  json_array_foreach(tools, i, t) {
    const char *type = json_string_value(json_object_get(t, "type"));
    json_t *name = json_object_get(t, "name");
    if (!json_is_object(t)) {
      rc = fail(x->err, AIR_EINVAL, "tools[%zu]: expected an object", i);
      break;
    }
    if (type != NULL && strcmp(type, "custom") != 0) {
      char f[128];
      snprintf(f, sizeof(f), "tools[%zu] (type %s)", i, type);
      if ((rc = unsupported(x, f)) != 0) break;
      continue;
    }
    if (!json_is_string(name)) {
      rc = fail(x->err, AIR_EINVAL, "tools[%zu].name: expected a string", i);
      break;
    }
    json_t *fn = json_pack("{s:O}", "name", name);
    json_t *desc = json_object_get(t, "description");
    json_t *schema = json_object_get(t, "input_schema");
    if (fn != NULL && json_is_string(desc))
      rc = air__json_put(fn, "description", json_incref(desc));
    if (rc == 0 && fn != NULL)
      rc = air__json_put(fn, "parameters",
               json_is_object(schema)
                   ? json_incref(schema)
                   : json_pack("{s:s, s:{}}", "type", "object", "properties"));
    if (rc != 0 || fn == NULL) {
      json_decref(fn);
      rc = rc != 0 ? rc : AIR_ENOMEM;
      break;
    }
    if ((rc = air__json_push(arr, json_pack("{s:s, s:o}", "type", "function", "function",
                                  fn))) != 0)
      break;
  }
  if (rc == 0 && json_array_size(arr) > 0) return air__json_put(out, "tools", arr);
  json_decref(arr);
  return rc;
}

/* tool_choice {type: auto|any|tool|none, name, disable_parallel_tool_use}. */
static int xl_tool_choice(xl *x, json_t *tc, json_t *out) {
  const char *t = json_string_value(json_object_get(tc, "type"));
  json_t *v;
  if (t != NULL && strcmp(t, "auto") == 0) {
    v = json_string("auto");
  } else if (t != NULL && strcmp(t, "any") == 0) {
    v = json_string("required");
  } else if (t != NULL && strcmp(t, "none") == 0) {
    v = json_string("none");
  } else if (t != NULL && strcmp(t, "tool") == 0) {
    json_t *name = json_object_get(tc, "name");
    if (!json_is_string(name))
      return fail(x->err, AIR_EINVAL, "tool_choice.name: expected a string");
    v = json_pack("{s:s, s:{s:O}}", "type", "function", "function", "name",
                  name);
  } else {
    return fail(x->err, AIR_EINVAL,
                "tool_choice.type: expected auto, any, tool or none");
  }
  int rc = air__json_put(out, "tool_choice", v);
  if (rc == 0 && json_is_true(json_object_get(tc, "disable_parallel_tool_use")))
    rc = air__json_put(out, "parallel_tool_calls", json_false());
  return rc;
}

/* metadata.user_id -> user; other metadata is only a hint to the
 * provider (DESIGN.md 5): dropped. */
static int xl_metadata(json_t *md, json_t *out) {
  json_t *v = json_object_get(md, "user_id");
  return json_is_string(v) ? air__json_put(out, "user", json_incref(v)) : 0;
}

/* One top-level Anthropic field other than model, messages, system and
 * stream. */
static int xl_field(xl *x, const char *k, json_t *v, json_t *out) {
  if (strcmp(k, "max_tokens") == 0 || strcmp(k, "top_p") == 0)
    return air__json_put(out, k, json_incref(v));
  if (strcmp(k, "temperature") == 0) {
    double t = json_number_value(v);
    if (t >= 0 && t <= 2) return air__json_put(out, k, json_incref(v));
    return air__json_put(out, k, json_real(t > 2 ? 2.0 : 0.0));
  }
  if (strcmp(k, "stop_sequences") == 0)
    return json_array_size(v) > 0 ? air__json_put(out, "stop", json_incref(v)) : 0;
  if (strcmp(k, "tools") == 0) return xl_tools(x, v, out);
  if (strcmp(k, "tool_choice") == 0) return xl_tool_choice(x, v, out);
  if (strcmp(k, "metadata") == 0) return xl_metadata(v, out);
  if (strcmp(k, "thinking") == 0) {
    const char *t = json_string_value(json_object_get(v, "type"));
    if (t != NULL && strcmp(t, "disabled") == 0) return 0;
  }
  /* Only hints to a provider (DESIGN.md 5): dropped, never skipped. */
  static const char *const hints[] = {"top_k", "service_tier",
                                      "context_management", "cache_control"};
  for (size_t i = 0; i < sizeof(hints) / sizeof(hints[0]); i++)
    if (strcmp(k, hints[i]) == 0) return 0;
  char f[160];
  snprintf(f, sizeof(f), "%.150s", k);
  return unsupported(x, f);
}

/*
 * Anthropic messages request -> OpenAI chat completions request:
 *   system (string, or text blocks joined with "\n") -> a first system
 *   message; user messages: text and image blocks -> content (a string for
 *   one text block, else an array of text / image_url parts), tool_result
 *   blocks -> {role: tool} messages placed before them (their content a
 *   string; text blocks joined with "\n"; is_error has no OpenAI form and
 *   is ignored); assistant messages: text -> content, tool_use -> tool_calls
 *   (arguments: the input as compact JSON), thinking blocks dropped;
 *   tools, tool_choice (+ disable_parallel_tool_use -> parallel_tool_calls
 *   false), stop_sequences -> stop, max_tokens, temperature clamped to
 *   0..2, top_p, metadata.user_id -> user; thinking {type: disabled} is
 *   dropped. Hints without an OpenAI form are dropped (DESIGN.md 5): other
 *   metadata, top_k, service_tier, context_management, cache_control and
 *   citations of blocks. Anything else (thinking, server tools, document
 *   blocks, unknown fields, ...) is unsupported: AIR_ENOTSUP naming the
 *   first one, in the caller's key order (the target is skipped), or
 *   dropped with drop_params. A null field counts as absent.
 */
static int from_anthropic(const air__request *req, const air__build_opts *o,
                          json_t *out, air_error *err) {
  xl x = {o, err};
  json_t *in = air__request_body(req);
  json_t *msgs = json_array();
  int rc = air__json_put(out, "model", json_string(""));
  if (rc == 0)
    rc = msgs != NULL ? air__json_put(out, "messages", json_incref(msgs)) : AIR_ENOMEM;
  if (rc == 0) rc = xl_system(&x, json_object_get(in, "system"), msgs);
  if (rc == 0) rc = xl_messages(&x, json_object_get(in, "messages"), msgs);
  json_decref(msgs);
  const char *k;
  json_t *v;
  json_object_foreach(in, k, v) {
    if (rc != 0) break;
    if (json_is_null(v) || strcmp(k, "model") == 0 ||
        strcmp(k, "messages") == 0 || strcmp(k, "system") == 0 ||
        strcmp(k, "stream") == 0)
      continue;
    rc = xl_field(&x, k, v, out);
  }
  return rc;
}

/* build_request: see provider.h. Appends the body to out. */
static int openai_build_request(const air__request *req,
                                const air__build_opts *o, air__buf *out,
                                air_error *err) {
  if (req == NULL || o == NULL)
    return fail(err, AIR_EINVAL, "request: expected a parsed request");
  int rc = 0;
  if (req->dialect == AIR_DIALECT_OPENAI && req->raw != NULL && o->override_json == NULL) {
    /* The caller's text with model, stream and stream_options set. */
    const char *model = o->model != NULL ? o->model : req->model;
    air__buf mv;
    air__buf_init(&mv, AIR__MAX_MODEL_VALUE_BYTES);
    rc = air__buf_add_json_str(&mv, model ? model : "", model ? strlen(model) : 0);
    const air__patch set[] = {{"model", mv.p, AIR__PATCH_SET},
                              {"stream", "true", AIR__PATCH_SET},
                              {"stream_options", NULL, AIR__PATCH_STREAM_OPTIONS}};
    if (rc == 0) rc = air__request_patch(req, set, 3, out);
    air__buf_cleanup(&mv);
    if (rc != 0)
      fail(err, rc, "%s", rc == AIR_ENOMEM ? "out of memory" : "request body too large");
    return rc;
  }
  if (!json_is_object(air__request_body(req)))
    return fail(err, AIR_EINVAL, "request: expected a parsed request");
  json_t *root;
  if (req->dialect == AIR_DIALECT_OPENAI) {
    root = json_deep_copy(req->body);
    if (root == NULL) return fail(err, AIR_ENOMEM, "out of memory");
  } else {
    root = json_object();
    if (root == NULL) return fail(err, AIR_ENOMEM, "out of memory");
    rc = from_anthropic(req, o, root, err);
  }
  if (rc == 0) rc = finish_body(root, req, o, err);
  if (rc == 0) {
    rc = air__json_dump(root, JSON_COMPACT, out);
  }
  json_decref(root);
  if (rc == AIR_ENOMEM || rc == AIR_ETOOBIG)
    fail(err, rc, "%s",
         rc == AIR_ENOMEM ? "out of memory" : "request body too large");
  return rc;
}

/* ---- decoding: the stream
 * ------------------------------------------------------- */

static void openai_decoder_init(air__decoder *d) {
  memset(d, 0, sizeof(*d));
  d->api = AIR_DIALECT_OPENAI;
  air__buf_init(&d->scratch, AIR__MAX_SSE_EVENT_BYTES);
  air__buf_init(&d->scratch2, AIR__MAX_SSE_EVENT_BYTES);
}

/*
 * String token tok of the current event: borrowed from the event when it
 * holds no escape, else decoded into d->scratch. decode_event sized scratch
 * for the whole event before the first decode (a decoded string is never
 * longer than its escaped form), so scratch never moves during an event and
 * earlier pointers stay valid. A missing or non-string token is "".
 */
static void ev_str(air__decoder *d, const air__json *j, int tok, const char **p,
                   size_t *n) {
  if (air__json_plain(j, tok, p, n)) return;
  *p = "";
  *n = 0;
  if (!air__json_is_str(j, tok)) return;
  size_t off = d->scratch.n;
  if (air__json_str(j, tok, &d->scratch) != 0) {
    rollback(&d->scratch, off);
    return;
  }
  *p = d->scratch.p + off;
  *n = d->scratch.n - off;
}

/* A token count: a non-negative integer, else 0. */
static uint64_t count_of(const air__json *j, int tok) {
  int64_t v;
  return air__json_int(j, tok, &v) && v > 0 ? (uint64_t)v : 0;
}

#define EMIT(part)              \
  do {                          \
    int r_ = cb(data, &(part)); \
    if (r_ != 0) return r_;     \
  } while (0)

/* An "error" member inside a 200 stream: one ERROR part. */
static int decode_error(air__decoder *d, const air__json *j, int e,
                        air__part_cb cb, void *data) {
  air_part p = {.kind = AIR_PART_ERROR};
  d->error_event = true;
  if (air__json_is_obj(j, e)) {
    int type = air__json_get(j, e, "type");
    int code = air__json_get(j, e, "code");
    ev_str(d, j, type, &p.name, &p.name_len);
    if (p.name_len == 0 && air__json_is_str(j, code))
      ev_str(d, j, code, &p.name, &p.name_len);
    else if (p.name_len == 0 && !air__json_is_null(j, code) &&
             !air__json_is_obj(j, code) && !air__json_is_arr(j, code))
      p.name = air__json_raw(j, code, &p.name_len);
    ev_str(d, j, air__json_get(j, e, "message"), &p.text, &p.text_len);
  } else {
    ev_str(d, j, e, &p.text, &p.text_len);
  }
  EMIT(p);
  return 0;
}

/* The tool index of the tool call at token t, the k-th of its array: its
 * "index", or k when it has none; -1 when out of range or not an integer. */
static int tool_index(const air__json *j, int t, int k) {
  int it = air__json_get(j, t, "index");
  if (it < 0) return k < AIR__DECODER_MAX_TOOLS ? k : -1;
  int64_t v;
  if (!air__json_int(j, it, &v) || v < 0 || v >= AIR__DECODER_MAX_TOOLS)
    return -1;
  return (int)v;
}

/* True when token i is absent, null or of the wanted kind. */
static bool opt_obj(const air__json *j, int i) {
  return air__json_is_null(j, i) || air__json_is_obj(j, i);
}
static bool opt_str(const air__json *j, int i) {
  return air__json_is_null(j, i) || air__json_is_str(j, i);
}

/*
 * One chat.completion.chunk (an object at token 0) into parts. Everything
 * that could make the event malformed is checked before the first part is
 * handed over.
 */
static int decode_chunk(air__decoder *d, const air__json *j, air__part_cb cb,
                        void *data) {
  int e = air__json_get(j, 0, "error");
  if (!air__json_is_null(j, e)) return decode_error(d, j, e, cb, data);

  int choices = air__json_get(j, 0, "choices");
  int usage = air__json_get(j, 0, "usage");
  if (!opt_obj(j, usage) ||
      !(air__json_is_null(j, choices) || air__json_is_arr(j, choices)))
    goto malformed;
  int n_choices = air__json_is_arr(j, choices) ? j->tok[choices].size : 0;
  bool has_usage = air__json_is_obj(j, usage);
  if (n_choices == 0 && !has_usage) return 0;

  /* Choice index 0: the element whose "index" is 0 (or that has none). */
  int choice = -1;
  for (int k = 0, c = choices + 1; k < n_choices;
       k++, c = air__json_skip(j, c)) {
    if (!air__json_is_obj(j, c)) goto malformed;
    int it = air__json_get(j, c, "index");
    int64_t v;
    if (choice < 0 && (it < 0 || (air__json_int(j, it, &v) && v == 0)))
      choice = c;
  }
  int delta = air__json_get(j, choice, "delta");
  int finish = air__json_get(j, choice, "finish_reason");
  int tools = air__json_get(j, delta, "tool_calls");
  if (!opt_obj(j, delta) || !opt_str(j, finish) ||
      !(air__json_is_null(j, tools) || air__json_is_arr(j, tools)))
    goto malformed;
  int n_tools = air__json_is_arr(j, tools) ? j->tok[tools].size : 0;
  for (int k = 0, t = tools + 1; k < n_tools; k++, t = air__json_skip(j, t)) {
    if (!air__json_is_obj(j, t) || tool_index(j, t, k) < 0 ||
        !opt_obj(j, air__json_get(j, t, "function")))
      goto malformed;
  }

  /* Checked: from here on the event yields its parts. */
  if (!d->started) {
    air_part p = {.kind = AIR_PART_START};
    ev_str(d, j, air__json_get(j, 0, "id"), &p.id, &p.id_len);
    ev_str(d, j, air__json_get(j, 0, "model"), &p.name, &p.name_len);
    d->started = true;
    EMIT(p);
  }
  if (air__json_is_obj(j, delta)) {
    static const air_part_kind kinds[] = {AIR_PART_REASONING, AIR_PART_TEXT,
                                          AIR_PART_REFUSAL};
    int toks[3];
    toks[0] = air__json_get(j, delta, "reasoning_content");
    if (!air__json_is_str(j, toks[0]))
      toks[0] = air__json_get(j, delta, "reasoning");
    toks[1] = air__json_get(j, delta, "content");
    toks[2] = air__json_get(j, delta, "refusal");
    for (int k = 0; k < 3; k++) {
      air_part p = {.kind = kinds[k]};
      ev_str(d, j, toks[k], &p.text, &p.text_len);
      if (p.text_len > 0) EMIT(p);
    }
  }
  for (int k = 0, t = tools + 1; k < n_tools; k++, t = air__json_skip(j, t)) {
    int idx = tool_index(j, t, k);
    int fn = air__json_get(j, t, "function");
    air_part p = {.kind = AIR_PART_TOOL_START, .index = idx};
    ev_str(d, j, air__json_get(j, t, "id"), &p.id, &p.id_len);
    ev_str(d, j, air__json_get(j, fn, "name"), &p.name, &p.name_len);
    if ((p.id_len > 0 || p.name_len > 0) && !d->block_kind[idx]) {
      d->block_kind[idx] = 1;
      d->n_tools++;
      EMIT(p);
    }
    air_part a = {.kind = AIR_PART_TOOL_DELTA, .index = idx};
    ev_str(d, j, air__json_get(j, fn, "arguments"), &a.text, &a.text_len);
    if (a.text_len > 0) EMIT(a);
  }
  if (air__json_is_str(j, finish)) {
    air_part p = {.kind = AIR_PART_FINISH};
    ev_str(d, j, finish, &p.finish_raw, &p.finish_raw_len);
    if (p.finish_raw_len > 0) {
      p.finish = map_finish(p.finish_raw, p.finish_raw_len);
      d->finished = true;
      EMIT(p);
    }
  }
  if (has_usage) {
    air_part p = {.kind = AIR_PART_USAGE};
    p.input_tokens = count_of(j, air__json_get(j, usage, "prompt_tokens"));
    p.output_tokens = count_of(j, air__json_get(j, usage, "completion_tokens"));
    d->input_tokens = p.input_tokens;
    d->output_tokens = p.output_tokens;
    d->usage_only = n_choices == 0;
    EMIT(p);
  }
  return 0;

malformed:
  d->malformed++;
  return 0;
}

static bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* decode_event: see provider.h and the notes at the top of this file. */
static int openai_decode_event(air__decoder *d, const air__sse_event *ev,
                               air__part_cb cb, void *data) {
  d->usage_only = d->terminator = d->error_event = false;
  const char *s = ev->data.p;
  size_t n = ev->data.n;
  while (n > 0 && is_ws(s[0])) {
    s++;
    n--;
  }
  while (n > 0 && is_ws(s[n - 1])) n--;
  if (n == 0) return 0;
  if (n == 6 && memcmp(s, "[DONE]", 6) == 0) {
    d->done = d->terminator = true;
    return 0;
  }
  /* Size scratch for every string of the event at once (see ev_str). */
  air__buf_reset(&d->scratch);
  if (memchr(s, '\\', n) != NULL && d->scratch.cap <= n) {
    int rc = air__buf_add(&d->scratch, s, n);
    air__buf_reset(&d->scratch);
    if (rc != 0) {
      d->malformed++;
      return 0;
    }
  }
  air__json j;
  int rc = air__json_parse(&j, s, n);
  if (rc != 0 || !air__json_is_obj(&j, 0)) {
    air__json_cleanup(&j);
    d->malformed++;
    return 0;
  }
  rc = decode_chunk(d, &j, cb, data);
  air__json_cleanup(&j);
  return rc;
}

/* ---- decoding: a whole body
 * ------------------------------------------------------- */

/* A jansson string as a part field ("" for anything else). */
static const char *jv(json_t *v, size_t *n) {
  if (!json_is_string(v)) {
    *n = 0;
    return "";
  }
  *n = json_string_length(v);
  return json_string_value(v);
}

static int body_parts(air__decoder *d, json_t *root, air__part_cb cb,
                      void *data) {
  air_part s = {.kind = AIR_PART_START};
  s.id = jv(json_object_get(root, "id"), &s.id_len);
  s.name = jv(json_object_get(root, "model"), &s.name_len);
  d->started = true;
  EMIT(s);

  json_t *choices = json_object_get(root, "choices");
  json_t *choice = NULL;
  size_t i;
  json_t *c;
  json_array_foreach(choices, i, c) {
    json_t *idx = json_object_get(c, "index");
    if (idx == NULL || (json_is_integer(idx) && json_integer_value(idx) == 0)) {
      choice = c;
      break;
    }
  }
  json_t *msg = json_object_get(choice, "message");
  json_t *reasoning = json_object_get(msg, "reasoning_content");
  if (!json_is_string(reasoning)) reasoning = json_object_get(msg, "reasoning");
  air_part p = {.kind = AIR_PART_REASONING};
  p.text = jv(reasoning, &p.text_len);
  if (p.text_len > 0) EMIT(p);

  json_t *content = json_object_get(msg, "content");
  if (json_is_array(content)) {
    json_t *part;
    json_array_foreach(content, i, part) {
      air_part t = {.kind = AIR_PART_TEXT};
      if (json_is_string(json_object_get(part, "type")) &&
          strcmp(json_string_value(json_object_get(part, "type")), "text") == 0)
        t.text = jv(json_object_get(part, "text"), &t.text_len);
      if (t.text_len > 0) EMIT(t);
    }
  } else {
    air_part t = {.kind = AIR_PART_TEXT};
    t.text = jv(content, &t.text_len);
    if (t.text_len > 0) EMIT(t);
  }
  air_part r = {.kind = AIR_PART_REFUSAL};
  r.text = jv(json_object_get(msg, "refusal"), &r.text_len);
  if (r.text_len > 0) EMIT(r);

  json_t *calls = json_object_get(msg, "tool_calls");
  json_array_foreach(calls, i, c) {
    if (i >= AIR__DECODER_MAX_TOOLS) return AIR_ETOOBIG;
    json_t *fn = json_object_get(c, "function");
    air_part t = {.kind = AIR_PART_TOOL_START, .index = (int)i};
    t.id = jv(json_object_get(c, "id"), &t.id_len);
    t.name = jv(json_object_get(fn, "name"), &t.name_len);
    if (t.id_len > 0 || t.name_len > 0) {
      d->block_kind[i] = 1;
      d->n_tools++;
      EMIT(t);
    }
    air_part a = {.kind = AIR_PART_TOOL_DELTA, .index = (int)i};
    a.text = jv(json_object_get(fn, "arguments"), &a.text_len);
    if (a.text_len > 0) EMIT(a);
  }

  air_part f = {.kind = AIR_PART_FINISH};
  f.finish_raw =
      jv(json_object_get(choice, "finish_reason"), &f.finish_raw_len);
  if (f.finish_raw_len > 0) {
    f.finish = map_finish(f.finish_raw, f.finish_raw_len);
    d->finished = true;
    EMIT(f);
  }
  json_t *usage = json_object_get(root, "usage");
  if (json_is_object(usage)) {
    air_part u = {.kind = AIR_PART_USAGE};
    json_t *pt = json_object_get(usage, "prompt_tokens");
    json_t *ct = json_object_get(usage, "completion_tokens");
    u.input_tokens =
        json_integer_value(pt) > 0 ? (uint64_t)json_integer_value(pt) : 0;
    u.output_tokens =
        json_integer_value(ct) > 0 ? (uint64_t)json_integer_value(ct) : 0;
    d->input_tokens = u.input_tokens;
    d->output_tokens = u.output_tokens;
    EMIT(u);
  }
  return 0;
}

/* decode_body: a chat.completion object ("object" absent or
 * "chat.completion", "choices" an array); anything else is AIR_EPARSE. */
static int openai_decode_body(air__decoder *d, const char *body, size_t n,
                              air__part_cb cb, void *data) {
  json_t *root = json_loadb(body, n, JSON_ALLOW_NUL, NULL);
  json_t *obj = json_object_get(root, "object");
  if (!json_is_object(root) ||
      !json_is_array(json_object_get(root, "choices")) ||
      (obj != NULL &&
       !(json_is_string(obj) &&
         strcmp(json_string_value(obj), "chat.completion") == 0))) {
    json_decref(root);
    return AIR_EPARSE;
  }
  int rc = body_parts(d, root, cb, data);
  if (rc == 0) d->done = true;
  json_decref(root);
  return rc;
}

/* ---- encoding: the stream
 * ----------------------------------------------------------- */

/* Bytes of s (n bytes) that fit max, cut at a NUL and at a UTF-8 boundary. */
static size_t fit(const char *s, size_t n, size_t max) {
  if (s == NULL) return 0;
  const char *z = memchr(s, '\0', n);
  if (z != NULL) n = (size_t)(z - s);
  if (n <= max) return n;
  size_t k = max;
  while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
  return k;
}

static void set_ident(air__encoder *e, const char *id, size_t id_n,
                      const char *model, size_t model_n) {
  /* fit() returns 0 for a NULL string, so id and model are non-NULL
   * wherever they are copied (the analyzer misses it). */
  size_t k = fit(id, id_n, sizeof(e->id) - 1);
  if (k == 0) {
    memcpy(e->id, DEFAULT_ID, sizeof(DEFAULT_ID));
  } else {
    /* NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): see above */
    memcpy(e->id, id, k);
    e->id[k] = '\0';
  }
  k = fit(model, model_n, sizeof(e->model) - 1);
  /* NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): see above */
  if (k > 0) memcpy(e->model, model, k);
  e->model[k] = '\0';
}

static void openai_encoder_init(air__encoder *e, const air__request *req,
                                uint64_t created_s) {
  memset(e, 0, sizeof(*e));
  e->api = AIR_DIALECT_OPENAI;
  e->include_usage = req != NULL && req->include_usage;
  e->created = created_s;
  e->open_block = -1;
}

#define TRY(x)             \
  do {                     \
    rc = (x);              \
    if (rc != 0) goto out; \
  } while (0)

/* 'data: {"id":…,"object":"chat.completion.chunk","created":…,"model":…,' */
static int chunk_head(const air__encoder *e, air__buf *out) {
  int rc;
  TRY(air__buf_add(out, LIT("data: {\"id\":")));
  TRY(air__buf_add_json_str(out, e->id, strlen(e->id)));
  TRY(air__buf_add(out,
                   LIT(",\"object\":\"chat.completion.chunk\",\"created\":")));
  TRY(air__buf_addu(out, e->created));
  TRY(air__buf_add(out, LIT(",\"model\":")));
  TRY(air__buf_add_json_str(out, e->model, strlen(e->model)));
  TRY(air__buf_add(out, LIT(",\"choices\":[")));
out:
  return rc;
}

/* A whole chunk whose choice has the delta members in body (already JSON,
 * without braces) and the given finish_reason (NULL: null). */
static int delta_chunk(const air__encoder *e, const char *body, size_t n,
                       const char *finish, air__buf *out) {
  int rc;
  TRY(chunk_head(e, out));
  TRY(air__buf_add(out, LIT("{\"index\":0,\"delta\":{")));
  TRY(air__buf_add(out, body, n));
  TRY(air__buf_add(out, LIT("},\"finish_reason\":")));
  if (finish != NULL) {
    TRY(air__buf_addc(out, '"'));
    TRY(air__buf_adds(out, finish));
    TRY(air__buf_addc(out, '"'));
  } else {
    TRY(air__buf_add(out, LIT("null")));
  }
  TRY(air__buf_add(out, LIT("}]}\n\n")));
out:
  return rc;
}

static int role_chunk(const air__encoder *e, air__buf *out) {
  return delta_chunk(e, LIT("\"role\":\"assistant\",\"content\":\"\""), NULL,
                     out);
}

/* A chunk whose delta holds one member: "key":<JSON string s>. Built in
 * place (no temporary buffer): head, then the member, then the tail. */
static int string_chunk(const air__encoder *e, const char *key, size_t key_n,
                        const char *s, size_t n, air__buf *out) {
  int rc;
  TRY(chunk_head(e, out));
  TRY(air__buf_add(out, LIT("{\"index\":0,\"delta\":{\"")));
  TRY(air__buf_add(out, key, key_n));
  TRY(air__buf_add(out, LIT("\":")));
  TRY(jstr(out, s, n));
  TRY(air__buf_add(out, LIT("},\"finish_reason\":null}]}\n\n")));
out:
  return rc;
}

static int tool_chunk(const air__encoder *e, const air_part *p, air__buf *out) {
  int rc;
  TRY(chunk_head(e, out));
  TRY(air__buf_add(out,
                   LIT("{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":")));
  TRY(add_int(out, p->index));
  if (p->kind == AIR_PART_TOOL_START) {
    TRY(air__buf_add(out, LIT(",\"id\":")));
    TRY(jstr(out, p->id, p->id_len));
    TRY(air__buf_add(out,
                     LIT(",\"type\":\"function\",\"function\":{\"name\":")));
    TRY(jstr(out, p->name, p->name_len));
    TRY(air__buf_add(
        out, LIT(",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n")));
  } else {
    TRY(air__buf_add(out, LIT(",\"function\":{\"arguments\":")));
    TRY(jstr(out, p->text, p->text_len));
    TRY(air__buf_add(out, LIT("}}]},\"finish_reason\":null}]}\n\n")));
  }
out:
  return rc;
}

static int usage_chunk(const air__encoder *e, air__buf *out) {
  int rc;
  TRY(chunk_head(e, out));
  TRY(air__buf_add(out, LIT("],\"usage\":{\"prompt_tokens\":")));
  TRY(air__buf_addu(out, e->input_tokens));
  TRY(air__buf_add(out, LIT(",\"completion_tokens\":")));
  TRY(air__buf_addu(out, e->output_tokens));
  TRY(air__buf_add(out, LIT(",\"total_tokens\":")));
  TRY(air__buf_addu(out, sat_add(e->input_tokens, e->output_tokens)));
  TRY(air__buf_add(out, LIT("}}\n\n")));
out:
  return rc;
}

/* encode_part: see provider.h and the notes at the top of this file. */
static int openai_encode_part(air__encoder *e, const air_part *p,
                              air__buf *out) {
  if (e->ended) return AIR_ESTATE;
  switch (p->kind) {
    case AIR_PART_USAGE:
      e->input_tokens = p->input_tokens;
      e->output_tokens = p->output_tokens;
      e->has_usage = true;
      return 0;
    case AIR_PART_ERROR:
      return 0;
    case AIR_PART_START:
      if (e->started) return 0;
      set_ident(e, p->id, p->id_len, p->name, p->name_len);
      break;
    case AIR_PART_TEXT:
    case AIR_PART_REASONING:
    case AIR_PART_REFUSAL:
    case AIR_PART_TOOL_DELTA:
      if (p->text_len == 0) return 0;
      break;
    case AIR_PART_FINISH:
      if (e->finished) return 0;
      break;
    case AIR_PART_TOOL_START:
      break;
  }
  if (!e->started && p->kind != AIR_PART_START) set_ident(e, NULL, 0, NULL, 0);
  if (e->passthrough) {
    e->started = true;
    if (p->kind == AIR_PART_FINISH) {
      e->finished = true;
      e->finish = p->finish;
    }
    return 0;
  }
  size_t mark = out->n;
  int rc = 0;
  if (!e->started) TRY(role_chunk(e, out));
  switch (p->kind) {
    case AIR_PART_TEXT:
      TRY(string_chunk(e, LIT("content"), p->text, p->text_len, out));
      break;
    case AIR_PART_REASONING:
      TRY(string_chunk(e, LIT("reasoning_content"), p->text, p->text_len, out));
      break;
    case AIR_PART_REFUSAL:
      TRY(string_chunk(e, LIT("refusal"), p->text, p->text_len, out));
      break;
    case AIR_PART_TOOL_START:
    case AIR_PART_TOOL_DELTA:
      TRY(tool_chunk(e, p, out));
      break;
    case AIR_PART_FINISH:
      TRY(delta_chunk(e, "", 0, finish_str(p->finish), out));
      e->finished = true;
      e->finish = p->finish;
      break;
    default:
      break;
  }
  e->started = true;
out:
  if (rc != 0) rollback(out, mark);
  return rc;
}

/* encode_end: [finish chunk if none was seen,] [usage chunk,] [DONE]. */
static int openai_encode_end(air__encoder *e, air__buf *out) {
  if (e->ended) return AIR_ESTATE;
  size_t mark = out->n;
  int rc = 0;
  if (!e->passthrough) {
    if (!e->started) {
      set_ident(e, NULL, 0, NULL, 0);
      TRY(role_chunk(e, out));
    }
    if (!e->finished) TRY(delta_chunk(e, "", 0, finish_str(e->finish), out));
    if (e->include_usage && e->has_usage) TRY(usage_chunk(e, out));
  }
  TRY(air__buf_add(out, LIT("data: [DONE]\n\n")));
  e->started = e->finished = e->ended = true;
out:
  if (rc != 0) rollback(out, mark);
  return rc;
}

/* {"message":…,"type":…,"code":…, without the closing brace. */
static int error_members(air_reason reason, const char *message,
                         air__buf *out) {
  const char *code = air_reason_name(reason);
  const char *msg = message != NULL ? message : "";
  int rc;
  TRY(air__buf_add(out, LIT("{\"message\":")));
  TRY(air__buf_add_json_str(out, msg, strlen(msg)));
  TRY(air__buf_add(out, LIT(",\"type\":")));
  TRY(air__buf_adds(out, "\""));
  TRY(air__buf_adds(out, air__error_type(AIR_DIALECT_OPENAI, reason)));
  TRY(air__buf_add(out, LIT("\",\"code\":")));
  TRY(air__buf_add_json_str(out, code != NULL ? code : "unknown",
                            strlen(code != NULL ? code : "unknown")));
out:
  return rc;
}

/* encode_error_event: 'data: {"error":{…}}' and never [DONE]. */
static int openai_encode_error_event(air__encoder *e, air_reason reason,
                                     const char *message, air__buf *out) {
  if (e->ended) return AIR_ESTATE;
  size_t mark = out->n;
  int rc;
  TRY(air__buf_add(out, LIT("data: {\"error\":")));
  TRY(error_members(reason, message, out));
  TRY(air__buf_add(out, LIT("}}\n\n")));
  e->ended = true;
out:
  if (rc != 0) rollback(out, mark);
  return rc;
}

/* ---- encoding: whole bodies
 * ----------------------------------------------------------- */

/* A buffer's bytes as a JSON string, or null when empty. */
static int str_or_null(air__buf *out, const air__buf *b) {
  if (b->n == 0) return air__buf_add(out, LIT("null"));
  return air__buf_add_json_str(out, b->p, b->n);
}

static int tool_calls_member(const air__aggregate *a, air__buf *out) {
  int rc = 0;
  bool first = true;
  for (size_t i = 0; i < a->n_tools; i++) {
    const air__tool_call *t = &a->tools[i];
    if (t->id == NULL && t->name == NULL && t->args.n == 0) continue;
    if (first)
      TRY(air__buf_add(out, LIT(",\"tool_calls\":[")));
    else
      TRY(air__buf_addc(out, ','));
    TRY(air__buf_add(out, LIT("{\"id\":")));
    if (t->id != NULL && t->id[0] != '\0') {
      TRY(air__buf_add_json_str(out, t->id, strlen(t->id)));
    } else {
      TRY(air__buf_add(out, LIT("\"call_")));
      TRY(air__buf_addu(out, i));
      TRY(air__buf_addc(out, '"'));
    }
    TRY(air__buf_add(out,
                     LIT(",\"type\":\"function\",\"function\":{\"name\":")));
    const char *name = t->name != NULL ? t->name : "";
    TRY(air__buf_add_json_str(out, name, strlen(name)));
    TRY(air__buf_add(out, LIT(",\"arguments\":")));
    if (t->args.n > 0)
      TRY(air__buf_add_json_str(out, t->args.p, t->args.n));
    else
      TRY(air__buf_add(out, LIT("\"{}\"")));
    TRY(air__buf_add(out, LIT("}}")));
    first = false;
  }
  if (!first) TRY(air__buf_addc(out, ']'));
out:
  return rc;
}

/* encode_response: a chat.completion body (notes at the top of the file). */
static int openai_encode_response(const air__aggregate *a, air__buf *out) {
  size_t mark = out->n;
  int rc;
  TRY(air__buf_add(out, LIT("{\"id\":")));
  if (a->id.n > 0)
    TRY(air__buf_add_json_str(out, a->id.p, a->id.n));
  else
    TRY(air__buf_add(out, LIT("\"" DEFAULT_ID "\"")));
  TRY(air__buf_add(out, LIT(",\"object\":\"chat.completion\",\"created\":")));
  TRY(air__buf_addu(out, a->created));
  TRY(air__buf_add(out, LIT(",\"model\":")));
  TRY(jstr(out, a->model.p, a->model.n));
  TRY(air__buf_add(out, LIT(",\"choices\":[{\"index\":0,\"message\":"
                            "{\"role\":\"assistant\",\"content\":")));
  TRY(str_or_null(out, &a->text));
  TRY(air__buf_add(out, LIT(",\"refusal\":")));
  TRY(str_or_null(out, &a->refusal));
  if (a->reasoning.n > 0) {
    TRY(air__buf_add(out, LIT(",\"reasoning_content\":")));
    TRY(air__buf_add_json_str(out, a->reasoning.p, a->reasoning.n));
  }
  TRY(tool_calls_member(a, out));
  TRY(air__buf_add(out, LIT("},\"finish_reason\":\"")));
  TRY(air__buf_adds(out, finish_str(a->finish)));
  TRY(air__buf_add(out, LIT("\"}]")));
  if (a->has_usage) {
    TRY(air__buf_add(out, LIT(",\"usage\":{\"prompt_tokens\":")));
    TRY(air__buf_addu(out, a->input_tokens));
    TRY(air__buf_add(out, LIT(",\"completion_tokens\":")));
    TRY(air__buf_addu(out, a->output_tokens));
    TRY(air__buf_add(out, LIT(",\"total_tokens\":")));
    TRY(air__buf_addu(out, sat_add(a->input_tokens, a->output_tokens)));
    TRY(air__buf_addc(out, '}'));
  }
  TRY(air__buf_addc(out, '}'));
out:
  if (rc != 0) rollback(out, mark);
  return rc;
}

/* A C string (NULL: "") as a JSON string. */
static int cstr(air__buf *out, const char *s) {
  return air__buf_add_json_str(out, s != NULL ? s : "",
                               s != NULL ? strlen(s) : 0);
}

/* encode_error_body: {"error":{"message","type","code","param":null,
 * "attempts":[{"target","reason","status","ms","request_id"}]}} (a skipped
 * target: {"target","outcome":"skipped","field"}). The
 * status is the response's; the body does not repeat it. */
static int openai_encode_error_body(int status, air_reason reason,
                                    const char *message, const air_attempt *log,
                                    size_t n, air__buf *out) {
  (void)status;
  size_t mark = out->n;
  int rc;
  TRY(air__buf_add(out, LIT("{\"error\":")));
  TRY(error_members(reason, message, out));
  TRY(air__buf_add(out, LIT(",\"param\":null,\"attempts\":[")));
  for (size_t i = 0; log != NULL && i < n; i++) {
    const char *rn = air_reason_name(log[i].reason);
    if (i > 0) TRY(air__buf_addc(out, ','));
    TRY(air__buf_add(out, LIT("{\"target\":")));
    TRY(cstr(out, log[i].target));
    if (log[i].skipped) {
      TRY(air__buf_add(out, LIT(",\"outcome\":\"skipped\",\"field\":")));
      TRY(cstr(out, log[i].field));
      TRY(air__buf_addc(out, '}'));
      continue;
    }
    TRY(air__buf_add(out, LIT(",\"reason\":")));
    TRY(cstr(out, rn != NULL ? rn : "unknown"));
    TRY(air__buf_add(out, LIT(",\"status\":")));
    TRY(add_int(out, log[i].status));
    TRY(air__buf_add(out, LIT(",\"ms\":")));
    TRY(air__buf_addu(out, log[i].ms));
    TRY(air__buf_add(out, LIT(",\"request_id\":")));
    TRY(cstr(out, log[i].request_id));
    TRY(air__buf_addc(out, '}'));
  }
  TRY(air__buf_add(out, LIT("]}}")));
out:
  if (rc != 0) rollback(out, mark);
  return rc;
}

const air__provider_ops air__provider_openai = {
    .api = AIR_DIALECT_OPENAI,
    .name = "openai",
    .path = "/chat/completions",
    .build_request = openai_build_request,
    .decoder_init = openai_decoder_init,
    .decode_event = openai_decode_event,
    .decode_body = openai_decode_body,
    .encoder_init = openai_encoder_init,
    .encode_part = openai_encode_part,
    .encode_end = openai_encode_end,
    .encode_error_event = openai_encode_error_event,
    .encode_response = openai_encode_response,
    .encode_error_body = openai_encode_error_body,
};
