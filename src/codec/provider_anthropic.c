/*
 * The Anthropic Messages dialect (POST /v1/messages): upstream requests,
 * stream and body decoding into parts, and encoding parts for a caller that
 * speaks Anthropic (DESIGN.md 2, 5). The contract of each op is in
 * provider.h; what follows records the choices this dialect makes.
 *
 * Requests from an OpenAI caller (build_request):
 *   - system and developer messages are hoisted into the top-level "system"
 *     string, every non-empty text joined with "\n\n";
 *   - user/assistant content (string or parts) becomes content blocks: text,
 *     image (data: URL -> base64 source, http(s) URL -> url source),
 *     assistant "refusal" parts become text; empty texts are left out (the
 *     API rejects empty text blocks) and a message left with no block is
 *     dropped; consecutive messages of one role are merged (the API wants
 *     alternating roles) and a message holding a single plain text block is
 *     written with string content;
 *   - assistant tool_calls -> tool_use blocks (arguments parsed; "" -> {});
 *     tool messages -> tool_result blocks in a user message;
 *   - tools, tool_choice, stop -> stop_sequences, max_completion_tokens (or
 *     else max_tokens, or else o->default_max_tokens) -> max_tokens,
 *     temperature clamped to 0..1, top_p, user -> metadata.user_id,
 *     parallel_tool_calls false -> tool_choice.disable_parallel_tool_use;
 *   - silently removed (no effect, no meaning upstream, or only a hint to a
 *     provider, DESIGN.md 5): stream_options, store, metadata, seed,
 *     logprobs, top_logprobs, presence_penalty, frequency_penalty,
 *     logit_bias, service_tier, prompt_cache_key, safety_identifier,
 *     prediction, n 1, response_format {"type": "text"},
 *     parallel_tool_calls true, null values; a message's "name";
 *   - not expressible, so AIR_ENOTSUP "FIELD: not supported by anthropic
 *     upstreams" (the target is skipped) unless o->drop_params (then
 *     dropped): n > 1, response_format json_object / json_schema, every
 *     other top-level field
 *     (reasoning_effort, audio, functions, ...), message roles
 *     other than system/developer/user/assistant/tool, a message's
 *     function_call, content parts other than text/image_url/refusal (named
 *     by their payload key, "messages[1].content[0].input_audio"), tools of a
 *     type other than function, tool_choice forms other than the four known.
 * Within the Anthropic dialect the caller's body passes unchanged apart from
 * model, stream and a missing max_tokens. In both cases o->override_json is
 * merged last over the top-level fields (a null value removes the field),
 * then model and stream are forced. Reals are written with 15 significant
 * digits, so a value a client typed (0.7) is sent as typed.
 *
 * Decoding: usage input counts include the cache creation and cache read
 * tokens (the total prompt, as OpenAI counts it). A stop reason this file
 * does not know is FINISH STOP with the raw string kept. Deltas are decoded
 * by their own type, so a text delta on a block never started still yields
 * TEXT; an input_json_delta needs a started tool_use block (else malformed)
 * and is ignored on other blocks (server tools).
 *
 * Encoding: message_start is written lazily, just before the first bytes
 * that need it, so that the usage of an Anthropic upstream's message_start
 * (which arrives after START) is in it. Thinking blocks start with an empty
 * "signature" as the API's own do. An ERROR part writes nothing: the stream
 * layer turns it into a failure and calls encode_error_event. A TOOL_DELTA
 * for a tool whose block was already closed (tool calls interleaved by an
 * OpenAI-compatible upstream) is written to that tool's block index; one for
 * a tool that never started opens a tool_use block with empty id and name.
 * message_delta's usage carries input_tokens too (as the API now sends it)
 * once any usage is known, since an OpenAI upstream reports it only at the
 * end. A STOP finish is "end_turn" (the stop sequence is not carried by
 * parts), except in encode_response when the raw reason was
 * "stop_sequence". encode_response writes a tool call whose arguments are
 * not a JSON object with input {} (the API's input is always an object).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "json.h"
#include "limits.h"
#include "provider.h"

#define LIT(s) (s), (sizeof(s) - 1)
#define IS(p, n, lit) \
  ((n) == sizeof(lit) - 1 && memcmp((p), (lit), sizeof(lit) - 1) == 0)

#define DEFAULT_MAX_TOKENS 4096
/* Block indices past this are malformed (no message has that many). */
#define MAX_BLOCK_INDEX 1000000

/* Content block kinds the decoder remembers (d->block_kind). */
enum { BK_NONE = 0, BK_TEXT, BK_THINKING, BK_REDACTED, BK_TOOL, BK_OTHER };
/* What the encoder's open block is (e->open_kind). */
enum { EK_NONE = 0, EK_TEXT, EK_THINKING, EK_TOOL };

/* ---- shared tables ----------------------------------------------------------
 */

typedef struct stop_map {
  const char *name;
  air_finish finish;
} stop_map;

static const stop_map stop_reasons[] = {
    {"end_turn", AIR_FINISH_STOP},
    {"stop_sequence", AIR_FINISH_STOP},
    {"max_tokens", AIR_FINISH_LENGTH},
    {"tool_use", AIR_FINISH_TOOL_CALLS},
    {"refusal", AIR_FINISH_REFUSAL},
    {"model_context_window_exceeded", AIR_FINISH_CONTEXT},
    {"pause_turn", AIR_FINISH_PAUSE},
};

static air_finish finish_of(const char *p, size_t n) {
  for (size_t i = 0; i < sizeof(stop_reasons) / sizeof(stop_reasons[0]); i++) {
    const char *s = stop_reasons[i].name;
    if (strlen(s) == n && memcmp(s, p, n) == 0) return stop_reasons[i].finish;
  }
  return AIR_FINISH_STOP;
}

/* The stop_reason written for a finish (NONE: the stream simply ended). */
static const char *stop_name(air_finish f) {
  switch (f) {
    case AIR_FINISH_LENGTH:
      return "max_tokens";
    case AIR_FINISH_TOOL_CALLS:
      return "tool_use";
    case AIR_FINISH_CONTENT_FILTER:
    case AIR_FINISH_REFUSAL:
      return "refusal";
    case AIR_FINISH_CONTEXT:
      return "model_context_window_exceeded";
    case AIR_FINISH_PAUSE:
      return "pause_turn";
    default:
      return "end_turn";
  }
}

static uint64_t sat_add(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* ---- build_request
 * -------------------------------------------------------------- */

static int fail(air_error *err, int code, const char *field, const char *what) {
  if (err != NULL) {
    err->code = code;
    snprintf(err->message, sizeof(err->message), "%s: %s", field, what);
  }
  return code;
}

static int invalid(air_error *err, const char *field, const char *what) {
  return fail(err, AIR_EINVAL, field, what);
}

/* A field the API cannot express: 0 (drop it) under drop_params, else the
 * error naming it. */
static int unsupported(const air__build_opts *o, air_error *err,
                       const char *field) {
  if (o->drop_params) return 0;
  return fail(err, AIR_ENOTSUP, field, "not supported by anthropic upstreams");
}

/* Sets obj[key] = v, taking v; AIR_ENOMEM when v is NULL or the set fails. */
/* Appends v as compact JSON; on failure out is left as it was. */
static int dump_json(const json_t *v, air__buf *out) {
  return air__json_dump(v, JSON_COMPACT | JSON_REAL_PRECISION(15), out);
}

/* Merges o->override_json over root's top-level fields; null removes. */
static int apply_override(json_t *root, const air__build_opts *o,
                          air_error *err) {
  if (o->override_json == NULL) return 0;
  json_t *ov = json_loads(o->override_json, 0, NULL);
  if (!json_is_object(ov)) {
    json_decref(ov);
    return invalid(err, "override", "expected a JSON object");
  }
  const char *key;
  json_t *v;
  int rc = 0;
  json_object_foreach(ov, key, v) {
    if (json_is_null(v))
      json_object_del(root, key);
    else if (json_object_set(root, key, v) != 0)
      rc = AIR_ENOMEM;
  }
  json_decref(ov);
  return rc;
}

/* Forces model and stream, fills a missing max_tokens, and dumps. */
static int finish_body(json_t *root, const air__request *req,
                       const air__build_opts *o, air__buf *out,
                       air_error *err) {
  int rc = apply_override(root, o, err);
  const char *model = o->model != NULL ? o->model : req->model;
  if (rc == 0) rc = air__json_put(root, "model", json_string(model ? model : ""));
  if (rc == 0) rc = air__json_put(root, "stream", json_true());
  json_t *mt = json_object_get(root, "max_tokens");
  if (rc == 0 && (mt == NULL || json_is_null(mt))) {
    uint32_t dm =
        o->default_max_tokens ? o->default_max_tokens : DEFAULT_MAX_TOKENS;
    rc = air__json_put(root, "max_tokens", json_integer(dm));
  }
  if (rc == 0) rc = dump_json(root, out);
  if (rc == AIR_ETOOBIG) rc = invalid(err, "body", "too big");
  return rc;
}

/* Translation state for one OpenAI request. */
typedef struct xl {
  const air__build_opts *o;
  air_error *err;
  json_t *msgs;    /* the translated messages */
  air__buf system; /* system texts joined with "\n\n" */
} xl;

static int add_system(xl *x, const char *s, size_t n) {
  if (n == 0) return 0;
  int rc = 0;
  if (x->system.n > 0) rc = air__buf_add(&x->system, LIT("\n\n"));
  if (rc == 0) rc = air__buf_add(&x->system, s, n);
  return rc;
}

static json_t *text_block(const char *s, size_t n) {
  json_t *b = json_object();
  if (b == NULL) return NULL;
  if (air__json_put(b, "type", json_string("text")) != 0 ||
      air__json_put(b, "text", json_stringn(s, n)) != 0) {
    json_decref(b);
    return NULL;
  }
  return b;
}

/* An image_url part into an image block appended to blocks. */
static int xl_image(xl *x, const json_t *part, const char *field,
                    json_t *blocks) {
  char f[160];
  const json_t *iu = json_object_get(part, "image_url");
  const json_t *u = json_is_object(iu) ? json_object_get(iu, "url") : iu;
  snprintf(f, sizeof(f), "%s.image_url.url", field);
  if (!json_is_string(u)) return invalid(x->err, f, "expected a string");
  const char *url = json_string_value(u);
  size_t n = json_string_length(u);
  json_t *src = json_object();
  json_t *img = json_object();
  int rc = src && img ? 0 : AIR_ENOMEM;
  if (rc == 0 && n >= 5 && strncasecmp(url, "data:", 5) == 0) {
    const char *comma = memchr(url, ',', n);
    const char *head = url + 5;
    size_t hn = comma ? (size_t)(comma - head) : 0;
    const char *semi = memchr(head, ';', hn);
    if (comma == NULL || hn < 7 || memcmp(comma - 7, ";base64", 7) != 0 ||
        semi == NULL || semi == head) {
      rc = invalid(x->err, f,
                   "expected a base64 data URL (data:TYPE;base64,...)");
    } else {
      rc = air__json_put(src, "type", json_string("base64"));
      if (rc == 0)
        rc = air__json_put(src, "media_type", json_stringn(head, (size_t)(semi - head)));
      if (rc == 0)
        rc = air__json_put(src, "data",
                 json_stringn(comma + 1, n - (size_t)(comma + 1 - url)));
    }
  } else if (rc == 0 && ((n >= 7 && strncasecmp(url, "http://", 7) == 0) ||
                         (n >= 8 && strncasecmp(url, "https://", 8) == 0))) {
    rc = air__json_put(src, "type", json_string("url"));
    if (rc == 0) rc = air__json_put(src, "url", json_incref((json_t *)u));
  } else if (rc == 0) {
    rc = invalid(x->err, f, "expected an http(s) or base64 data URL");
  }
  if (rc == 0) rc = air__json_put(img, "type", json_string("image"));
  if (rc == 0) {
    rc = air__json_put(img, "source", src);
    src = NULL;
  }
  if (rc == 0) {
    rc = air__json_push(blocks, img);
    img = NULL;
  }
  json_decref(src);
  json_decref(img);
  return rc;
}

/* One content part (of message i) into blocks; system: text only, into
 * x->system. */
static int xl_part(xl *x, const json_t *part, size_t i, size_t j,
                   json_t *blocks, bool system) {
  char field[96], f[160];
  snprintf(field, sizeof(field), "messages[%zu].content[%zu]", i, j);
  if (!json_is_object(part))
    return invalid(x->err, field, "expected an object");
  const char *type = json_string_value(json_object_get(part, "type"));
  if (type == NULL) {
    snprintf(f, sizeof(f), "%s.type", field);
    return invalid(x->err, f, "expected a string");
  }
  bool text = strcmp(type, "text") == 0;
  if (text || (!system && strcmp(type, "refusal") == 0)) {
    const json_t *t = json_object_get(part, type);
    snprintf(f, sizeof(f), "%s.%s", field, type);
    if (!json_is_string(t)) return invalid(x->err, f, "expected a string");
    size_t n = json_string_length(t);
    if (system) return add_system(x, json_string_value(t), n);
    if (n == 0) return 0;
    return air__json_push(blocks, text_block(json_string_value(t), n));
  }
  if (!system && strcmp(type, "image_url") == 0)
    return xl_image(x, part, field, blocks);
  snprintf(f, sizeof(f), "%s.%s", field, type);
  return unsupported(x->o, x->err, f);
}

/* A message's content (string, parts or null) into blocks. */
static int xl_content(xl *x, const json_t *content, size_t i, json_t *blocks,
                      bool system) {
  char field[64];
  if (content == NULL || json_is_null(content)) return 0;
  if (json_is_string(content)) {
    const char *s = json_string_value(content);
    size_t n = json_string_length(content);
    if (system) return add_system(x, s, n);
    return n == 0 ? 0 : air__json_push(blocks, text_block(s, n));
  }
  if (!json_is_array(content)) {
    snprintf(field, sizeof(field), "messages[%zu].content", i);
    return invalid(x->err, field, "expected a string or an array");
  }
  size_t j;
  const json_t *part;
  json_array_foreach(content, j, part) {
    int rc = xl_part(x, part, i, j, blocks, system);
    if (rc != 0) return rc;
  }
  return 0;
}

static bool all_space(const char *s, size_t n) {
  for (size_t k = 0; k < n; k++)
    if (s[k] != ' ' && s[k] != '\t' && s[k] != '\r' && s[k] != '\n')
      return false;
  return true;
}

/* An assistant's tool_calls into tool_use blocks. */
static int xl_tool_calls(xl *x, const json_t *calls, size_t i, json_t *blocks) {
  char field[96], f[160];
  if (calls == NULL || json_is_null(calls)) return 0;
  snprintf(field, sizeof(field), "messages[%zu].tool_calls", i);
  if (!json_is_array(calls)) return invalid(x->err, field, "expected an array");
  size_t j;
  const json_t *tc;
  json_array_foreach(calls, j, tc) {
    snprintf(field, sizeof(field), "messages[%zu].tool_calls[%zu]", i, j);
    if (!json_is_object(tc))
      return invalid(x->err, field, "expected an object");
    const json_t *type = json_object_get(tc, "type");
    if (type != NULL && !json_is_null(type) &&
        !(json_is_string(type) &&
          strcmp(json_string_value(type), "function") == 0)) {
      snprintf(f, sizeof(f), "%s.type", field);
      int rc = unsupported(x->o, x->err, f);
      if (rc != 0) return rc;
      continue;
    }
    const json_t *fn = json_object_get(tc, "function");
    const json_t *id = json_object_get(tc, "id");
    const json_t *name = json_object_get(fn, "name");
    const json_t *args = json_object_get(fn, "arguments");
    if (!json_is_string(id)) {
      snprintf(f, sizeof(f), "%s.id", field);
      return invalid(x->err, f, "expected a string");
    }
    if (!json_is_object(fn)) {
      snprintf(f, sizeof(f), "%s.function", field);
      return invalid(x->err, f, "expected an object");
    }
    if (!json_is_string(name)) {
      snprintf(f, sizeof(f), "%s.function.name", field);
      return invalid(x->err, f, "expected a string");
    }
    snprintf(f, sizeof(f), "%s.function.arguments", field);
    json_t *input = NULL;
    if (args == NULL || json_is_null(args) ||
        (json_is_string(args) &&
         all_space(json_string_value(args), json_string_length(args)))) {
      input = json_object();
    } else if (!json_is_string(args)) {
      return invalid(x->err, f, "expected a string");
    } else {
      input = json_loadb(json_string_value(args), json_string_length(args), 0,
                         NULL);
      if (input == NULL) return invalid(x->err, f, "invalid JSON");
      if (!json_is_object(input)) {
        json_decref(input);
        return invalid(x->err, f, "expected a JSON object");
      }
    }
    json_t *b = json_object();
    int rc = b ? 0 : AIR_ENOMEM;
    if (rc == 0) rc = air__json_put(b, "type", json_string("tool_use"));
    if (rc == 0) rc = air__json_put(b, "id", json_incref((json_t *)id));
    if (rc == 0) rc = air__json_put(b, "name", json_incref((json_t *)name));
    if (rc == 0) {
      rc = air__json_put(b, "input", input);
      input = NULL;
    }
    json_decref(input);
    if (rc == 0) {
      rc = air__json_push(blocks, b);
    } else {
      json_decref(b);
    }
    if (rc != 0) return rc;
  }
  return 0;
}

/* A tool message into a tool_result block. */
static int xl_tool_result(xl *x, const json_t *m, size_t i, json_t *blocks) {
  char field[64];
  const json_t *id = json_object_get(m, "tool_call_id");
  if (!json_is_string(id)) {
    snprintf(field, sizeof(field), "messages[%zu].tool_call_id", i);
    return invalid(x->err, field, "expected a string");
  }
  const json_t *c = json_object_get(m, "content");
  json_t *content = NULL;
  int rc = 0;
  if (c == NULL || json_is_null(c)) {
    content = json_string("");
  } else if (json_is_string(c)) {
    content = json_incref((json_t *)c);
  } else {
    content = json_array();
    rc = content ? xl_content(x, c, i, content, false) : AIR_ENOMEM;
    if (rc == 0 && json_array_size(content) == 0) {
      json_decref(content);
      content = json_string("");
    }
  }
  json_t *b = json_object();
  if (rc == 0 && (b == NULL || content == NULL)) rc = AIR_ENOMEM;
  if (rc == 0) rc = air__json_put(b, "type", json_string("tool_result"));
  if (rc == 0) rc = air__json_put(b, "tool_use_id", json_incref((json_t *)id));
  if (rc == 0) {
    rc = air__json_put(b, "content", content);
    content = NULL;
  }
  if (rc == 0) {
    rc = air__json_push(blocks, b);
    b = NULL;
  }
  json_decref(content);
  json_decref(b);
  return rc;
}

/* Appends blocks (taken) as a message of role, merged into the previous
 * message when it has the same role; nothing when blocks is empty. */
static int xl_push(xl *x, const char *role, json_t *blocks) {
  if (blocks == NULL) return AIR_ENOMEM;
  if (json_array_size(blocks) == 0) {
    json_decref(blocks);
    return 0;
  }
  size_t k = json_array_size(x->msgs);
  json_t *last = k > 0 ? json_array_get(x->msgs, k - 1) : NULL;
  const char *lr = json_string_value(json_object_get(last, "role"));
  if (lr != NULL && strcmp(lr, role) == 0) {
    int rc = json_array_extend(json_object_get(last, "content"), blocks);
    json_decref(blocks);
    return rc == 0 ? 0 : AIR_ENOMEM;
  }
  json_t *m = json_object();
  if (m == NULL) {
    json_decref(blocks);
    return AIR_ENOMEM;
  }
  int rc = air__json_put(m, "role", json_string(role));
  if (rc == 0) {
    rc = air__json_put(m, "content", blocks);
  } else {
    json_decref(blocks);
  }
  if (rc == 0) return air__json_push(x->msgs, m);
  json_decref(m);
  return rc;
}

static int xl_messages(xl *x, const json_t *messages) {
  char field[64];
  if (!json_is_array(messages))
    return invalid(x->err, "messages", "expected an array");
  size_t i;
  const json_t *m;
  json_array_foreach(messages, i, m) {
    snprintf(field, sizeof(field), "messages[%zu]", i);
    if (!json_is_object(m)) return invalid(x->err, field, "expected an object");
    const char *role = json_string_value(json_object_get(m, "role"));
    if (role == NULL) {
      snprintf(field, sizeof(field), "messages[%zu].role", i);
      return invalid(x->err, field, "expected a string");
    }
    const json_t *content = json_object_get(m, "content");
    int rc = 0;
    if (json_object_get(m, "function_call") != NULL &&
        !json_is_null(json_object_get(m, "function_call"))) {
      snprintf(field, sizeof(field), "messages[%zu].function_call", i);
      rc = unsupported(x->o, x->err, field);
      if (rc != 0) return rc;
    }
    if (strcmp(role, "system") == 0 || strcmp(role, "developer") == 0) {
      rc = xl_content(x, content, i, NULL, true);
    } else if (strcmp(role, "user") == 0) {
      json_t *blocks = json_array();
      rc = blocks ? xl_content(x, content, i, blocks, false) : AIR_ENOMEM;
      if (rc == 0) {
        rc = xl_push(x, "user", blocks);
      } else {
        json_decref(blocks);
      }
    } else if (strcmp(role, "assistant") == 0) {
      json_t *blocks = json_array();
      rc = blocks ? xl_content(x, content, i, blocks, false) : AIR_ENOMEM;
      if (rc == 0)
        rc = xl_tool_calls(x, json_object_get(m, "tool_calls"), i, blocks);
      if (rc == 0) {
        rc = xl_push(x, "assistant", blocks);
      } else {
        json_decref(blocks);
      }
    } else if (strcmp(role, "tool") == 0) {
      json_t *blocks = json_array();
      rc = blocks ? xl_tool_result(x, m, i, blocks) : AIR_ENOMEM;
      if (rc == 0) {
        rc = xl_push(x, "user", blocks);
      } else {
        json_decref(blocks);
      }
    } else {
      snprintf(field, sizeof(field), "messages[%zu].role", i);
      rc = unsupported(x->o, x->err, field);
    }
    if (rc != 0) return rc;
  }
  if (json_array_size(x->msgs) == 0)
    return invalid(x->err, "messages", "no user or assistant message");
  /* A message holding one plain text block is written as a string. */
  json_array_foreach(x->msgs, i, m) {
    json_t *c = json_object_get(m, "content");
    json_t *b = json_array_get(c, 0);
    if (json_array_size(c) == 1 && json_object_size(b) == 2 &&
        json_is_string(json_object_get(b, "text"))) {
      const char *t = json_string_value(json_object_get(b, "type"));
      if (t != NULL && strcmp(t, "text") == 0 &&
          json_object_set((json_t *)m, "content", json_object_get(b, "text")) !=
              0)
        return AIR_ENOMEM;
    }
  }
  return 0;
}

static int xl_tools(xl *x, const json_t *tools, json_t *out) {
  char field[64], f[96];
  if (!json_is_array(tools))
    return invalid(x->err, "tools", "expected an array");
  json_t *res = json_array();
  if (res == NULL) return AIR_ENOMEM;
  size_t i;
  const json_t *t;
  int rc = 0;
  json_array_foreach(tools, i, t) {
    snprintf(field, sizeof(field), "tools[%zu]", i);
    if (!json_is_object(t)) {
      rc = invalid(x->err, field, "expected an object");
      break;
    }
    const char *type = json_string_value(json_object_get(t, "type"));
    if (type != NULL && strcmp(type, "function") != 0) {
      snprintf(f, sizeof(f), "%s.type", field);
      rc = unsupported(x->o, x->err, f);
      if (rc != 0) break;
      continue;
    }
    const json_t *fn = json_object_get(t, "function");
    const json_t *name = json_object_get(fn, "name");
    const json_t *desc = json_object_get(fn, "description");
    const json_t *params = json_object_get(fn, "parameters");
    if (!json_is_object(fn)) {
      snprintf(f, sizeof(f), "%s.function", field);
      rc = invalid(x->err, f, "expected an object");
      break;
    }
    if (!json_is_string(name)) {
      snprintf(f, sizeof(f), "%s.function.name", field);
      rc = invalid(x->err, f, "expected a string");
      break;
    }
    json_t *a = json_object();
    rc = a ? air__json_put(a, "name", json_incref((json_t *)name)) : AIR_ENOMEM;
    if (rc == 0 && json_is_string(desc))
      rc = air__json_put(a, "description", json_incref((json_t *)desc));
    if (rc == 0) {
      json_t *schema =
          json_is_object(params)
              ? json_deep_copy(params)
              : json_pack("{s:s,s:{}}", "type", "object", "properties");
      rc = air__json_put(a, "input_schema", schema);
    }
    if (rc == 0) {
      rc = air__json_push(res, a);
    } else {
      json_decref(a);
    }
    if (rc != 0) break;
  }
  if (rc == 0 && json_array_size(res) > 0) return air__json_put(out, "tools", res);
  json_decref(res);
  return rc;
}

static int xl_tool_choice(xl *x, const json_t *tc, json_t *out) {
  const char *s = json_string_value(tc);
  json_t *r = NULL;
  if (s != NULL) {
    const char *t = strcmp(s, "auto") == 0       ? "auto"
                    : strcmp(s, "required") == 0 ? "any"
                    : strcmp(s, "none") == 0     ? "none"
                                                 : NULL;
    if (t == NULL) return unsupported(x->o, x->err, "tool_choice");
    r = json_pack("{s:s}", "type", t);
  } else {
    const char *type = json_string_value(json_object_get(tc, "type"));
    const json_t *name =
        json_object_get(json_object_get(tc, "function"), "name");
    if (type == NULL || strcmp(type, "function") != 0)
      return unsupported(x->o, x->err, "tool_choice");
    if (!json_is_string(name))
      return invalid(x->err, "tool_choice.function.name", "expected a string");
    r = json_pack("{s:s,s:O}", "type", "tool", "name", name);
  }
  return air__json_put(out, "tool_choice", r);
}

static int xl_stop(xl *x, const json_t *stop, json_t *out) {
  char field[32];
  json_t *seq = json_array();
  if (seq == NULL) return AIR_ENOMEM;
  int rc = 0;
  if (json_is_string(stop)) {
    rc = air__json_push(seq, json_incref((json_t *)stop));
  } else if (json_is_array(stop)) {
    size_t i;
    const json_t *s;
    json_array_foreach(stop, i, s) {
      if (!json_is_string(s)) {
        snprintf(field, sizeof(field), "stop[%zu]", i);
        rc = invalid(x->err, field, "expected a string");
        break;
      }
      rc = air__json_push(seq, json_incref((json_t *)s));
      if (rc != 0) break;
    }
  } else {
    rc = invalid(x->err, "stop", "expected a string or an array");
  }
  if (rc == 0 && json_array_size(seq) > 0)
    return air__json_put(out, "stop_sequences", seq);
  json_decref(seq);
  return rc;
}

/* True when a field's value is the OpenAI default, so dropping it changes
 * nothing. */
static bool is_noop(const char *key, const json_t *v) {
  if (json_is_null(v)) return true;
  if (strcmp(key, "n") == 0)
    return json_is_integer(v) && json_integer_value(v) == 1;
  if (strcmp(key, "response_format") == 0) {
    const char *t = json_string_value(json_object_get(v, "type"));
    return t != NULL && strcmp(t, "text") == 0;
  }
  if (strcmp(key, "parallel_tool_calls") == 0) return json_is_true(v);
  return false;
}

/* Fields removed without a word whatever their value. */
/* Passed over: ours to set, or only a hint to a provider (DESIGN.md 5:
 * dropped for a target that lacks them, never a reason to skip it). */
static const char *const ignored_fields[] = {
    "model", "stream", "stream_options", "store", "metadata", "seed",
    "logprobs", "top_logprobs", "presence_penalty", "frequency_penalty",
    "logit_bias", "service_tier", "prompt_cache_key", "safety_identifier",
    "prediction"};

/* Fields whose default is accepted (is_noop) and any other value is not. */
static const char *const noop_fields[] = {"n", "response_format",
                                          "parallel_tool_calls"};

static bool in_list(const char *key, const char *const *list, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(key, list[i]) == 0) return true;
  return false;
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int from_openai(const air__request *req, const air__build_opts *o,
                       air__buf *out, air_error *err) {
  const json_t *body = air__request_body(req);
  xl x = {o, err, json_array(), {0}};
  air__buf_init(&x.system, AIR__MAX_REQUEST_BYTES);
  json_t *root = json_object();
  int rc = root && x.msgs ? 0 : AIR_ENOMEM;

  /* Key order of the result: model, max_tokens, system, messages, then the
   * caller's fields in the caller's order, stream last. */
  const json_t *mt = json_object_get(body, "max_completion_tokens");
  if (mt == NULL || json_is_null(mt)) mt = json_object_get(body, "max_tokens");
  if (rc == 0) rc = air__json_put(root, "model", json_string(""));
  if (rc == 0 && json_is_integer(mt) && json_integer_value(mt) > 0)
    rc = air__json_put(root, "max_tokens", json_incref((json_t *)mt));

  if (rc == 0) rc = xl_messages(&x, json_object_get(body, "messages"));
  if (rc == 0 && x.system.n > 0)
    rc = air__json_put(root, "system", json_stringn(x.system.p, x.system.n));
  if (rc == 0) rc = air__json_put(root, "messages", json_incref(x.msgs));

  bool no_parallel = false;
  const char *key;
  json_t *v;
  json_object_foreach((json_t *)body, key, v) {
    if (rc != 0) break;
    if (strcmp(key, "messages") == 0 || strcmp(key, "max_tokens") == 0 ||
        strcmp(key, "max_completion_tokens") == 0 ||
        in_list(key, ignored_fields, COUNT(ignored_fields)))
      continue;
    if (in_list(key, noop_fields, COUNT(noop_fields))) {
      if (strcmp(key, "parallel_tool_calls") == 0 && json_is_false(v))
        no_parallel = true;
      else if (!is_noop(key, v))
        rc = unsupported(o, err, key);
    } else if (json_is_null(v)) {
      continue;
    } else if (strcmp(key, "temperature") == 0) {
      if (!json_is_number(v)) {
        rc = invalid(err, key, "expected a number");
      } else {
        double t = json_number_value(v);
        rc = air__json_put(root, key, json_real(t < 0 ? 0 : t > 1 ? 1 : t));
      }
    } else if (strcmp(key, "top_p") == 0) {
      rc = air__json_put(root, key, json_incref(v));
    } else if (strcmp(key, "stop") == 0) {
      rc = xl_stop(&x, v, root);
    } else if (strcmp(key, "tools") == 0) {
      rc = xl_tools(&x, v, root);
    } else if (strcmp(key, "tool_choice") == 0) {
      rc = xl_tool_choice(&x, v, root);
    } else if (strcmp(key, "user") == 0) {
      if (!json_is_string(v))
        rc = invalid(err, key, "expected a string");
      else
        rc = air__json_put(root, "metadata", json_pack("{s:O}", "user_id", v));
    } else {
      rc = unsupported(o, err, key);
    }
  }
  /* parallel_tool_calls false: Anthropic says it on tool_choice. */
  if (rc == 0 && no_parallel && json_object_get(root, "tools") != NULL) {
    if (json_object_get(root, "tool_choice") == NULL)
      rc = air__json_put(root, "tool_choice", json_pack("{s:s}", "type", "auto"));
    json_t *tc = rc == 0 ? json_object_get(root, "tool_choice") : NULL;
    const char *t = json_string_value(json_object_get(tc, "type"));
    if (t != NULL && strcmp(t, "none") != 0)
      rc = air__json_put(tc, "disable_parallel_tool_use", json_true());
  }
  if (rc == 0) rc = finish_body(root, req, o, out, err);
  json_decref(root);
  json_decref(x.msgs);
  air__buf_cleanup(&x.system);
  if (rc == AIR_ETOOBIG && err != NULL && err->code != AIR_EINVAL)
    rc = invalid(err, "system", "too big");
  return rc;
}

/* The caller's text with model, stream and (when missing) max_tokens set:
 * what finish_body does to a copy of the tree. */
static int patch_body(const air__request *req, const air__build_opts *o,
                      air__buf *out, air_error *err) {
  const char *model = o->model != NULL ? o->model : req->model;
  char mt[24];
  snprintf(mt, sizeof(mt), "%u",
           (unsigned)(o->default_max_tokens ? o->default_max_tokens : DEFAULT_MAX_TOKENS));
  air__buf mv;
  air__buf_init(&mv, AIR__MAX_MODEL_VALUE_BYTES);
  int rc = air__buf_add_json_str(&mv, model ? model : "", model ? strlen(model) : 0);
  const air__patch set[] = {{"model", mv.p, AIR__PATCH_SET},
                            {"stream", "true", AIR__PATCH_SET},
                            {"max_tokens", mt, AIR__PATCH_DEFAULT}};
  if (rc == 0) rc = air__request_patch(req, set, 3, out);
  air__buf_cleanup(&mv);
  if (rc == AIR_ETOOBIG) return invalid(err, "body", "too big");
  return rc;
}

static int build_request(const air__request *req, const air__build_opts *o,
                         air__buf *out, air_error *err) {
  if (err != NULL) {
    err->code = 0;
    err->message[0] = '\0';
  }
  if (req == NULL || o == NULL) return invalid(err, "body", "expected a JSON object");
  if (req->dialect == AIR_DIALECT_ANTHROPIC && req->raw != NULL && o->override_json == NULL)
    return patch_body(req, o, out, err);
  if (!json_is_object(air__request_body(req)))
    return invalid(err, "body", "expected a JSON object");
  if (req->dialect == AIR_DIALECT_OPENAI) return from_openai(req, o, out, err);
  json_t *root = json_deep_copy(req->body);
  if (root == NULL) return AIR_ENOMEM;
  int rc = finish_body(root, req, o, out, err);
  json_decref(root);
  return rc;
}

/* ---- decoding: the hot path (json.c tokens, no allocation)
 * -------------------------------- */

static void decoder_init(air__decoder *d) {
  memset(d, 0, sizeof(*d));
  d->api = AIR_DIALECT_ANTHROPIC;
  air__buf_init(&d->scratch, AIR__MAX_SSE_EVENT_BYTES);
  air__buf_init(&d->scratch2, AIR__MAX_SSE_EVENT_BYTES);
  for (int i = 0; i < AIR__DECODER_MAX_TOOLS; i++) d->block_tool[i] = -1;
}

/*
 * The string at token i, decoded: borrowed from the event when it holds no
 * escape, else unescaped into buf. A missing or null token is "" (true); a
 * token of another type, or a bad escape, is false.
 */
static bool str_at(const air__json *j, int i, air__buf *buf, const char **p,
                   size_t *n) {
  if (i < 0 || air__json_is_null(j, i)) {
    *p = "";
    *n = 0;
    return true;
  }
  if (!air__json_is_str(j, i)) return false;
  if (air__json_plain(j, i, p, n)) return true;
  air__buf_reset(buf);
  if (air__json_str(j, i, buf) != 0) return false;
  *p = buf->n > 0 ? buf->p : "";
  *n = buf->n;
  return true;
}

/* A non-negative integer at token i; missing or null leaves *set false. */
static bool count_at(const air__json *j, int i, bool *set, uint64_t *v) {
  int64_t x;
  *set = false;
  if (i < 0 || air__json_is_null(j, i)) return true;
  if (!air__json_int(j, i, &x) || x < 0) return false;
  *set = true;
  *v = (uint64_t)x;
  return true;
}

/*
 * Reads a usage object. *has_in when input_tokens is there (then *in also
 * counts the cache tokens), *has_out when output_tokens is. False when a
 * count is not a non-negative integer.
 */
static bool read_usage(const air__json *j, int u, bool *has_in, uint64_t *in,
                       bool *has_out, uint64_t *out) {
  bool s1, s2;
  uint64_t c1 = 0, c2 = 0;
  *in = *out = 0;
  if (!count_at(j, air__json_get(j, u, "input_tokens"), has_in, in) ||
      !count_at(j, air__json_get(j, u, "cache_creation_input_tokens"), &s1,
                &c1) ||
      !count_at(j, air__json_get(j, u, "cache_read_input_tokens"), &s2, &c2) ||
      !count_at(j, air__json_get(j, u, "output_tokens"), has_out, out))
    return false;
  if (*has_in) *in = sat_add(*in, sat_add(s1 ? c1 : 0, s2 ? c2 : 0));
  return true;
}

static bool index_at(const air__json *j, int obj, int *idx) {
  int64_t v;
  if (!air__json_int(j, air__json_get(j, obj, "index"), &v) || v < 0 ||
      v > MAX_BLOCK_INDEX)
    return false;
  *idx = (int)v;
  return true;
}

static int emit_text(air__part_cb cb, void *data, air_part_kind k, int idx,
                     const char *p, size_t n) {
  air_part part = {.kind = k,
                   .index = idx,
                   .text = p,
                   .text_len = n,
                   .id = "",
                   .name = "",
                   .finish_raw = ""};
  return cb(data, &part);
}

static int emit_usage(air__decoder *d, air__part_cb cb, void *data) {
  air_part part = {.kind = AIR_PART_USAGE,
                   .text = "",
                   .id = "",
                   .name = "",
                   .finish_raw = "",
                   .input_tokens = d->input_tokens,
                   .output_tokens = d->output_tokens};
  return cb(data, &part);
}

/* Each handler validates the event first: *bad (and nothing emitted) when it
 * cannot be decoded; otherwise the parts, returning cb's first non-zero. */

static int on_message_start(air__decoder *d, const air__json *j, bool *bad,
                            air__part_cb cb, void *data) {
  int m = air__json_get(j, 0, "message");
  int u = air__json_get(j, m, "usage");
  const char *id, *model;
  size_t id_n, model_n;
  bool has_in, has_out;
  uint64_t in = 0, out = 0;
  if (!air__json_is_obj(j, m) ||
      !str_at(j, air__json_get(j, m, "id"), &d->scratch, &id, &id_n) ||
      !str_at(j, air__json_get(j, m, "model"), &d->scratch2, &model,
              &model_n) ||
      (u >= 0 && !air__json_is_obj(j, u) && !air__json_is_null(j, u)) ||
      (air__json_is_obj(j, u) &&
       !read_usage(j, u, &has_in, &in, &has_out, &out))) {
    *bad = true;
    return 0;
  }
  air_part part = {.kind = AIR_PART_START,
                   .text = "",
                   .id = id,
                   .id_len = id_n,
                   .name = model,
                   .name_len = model_n,
                   .finish_raw = ""};
  d->started = true;
  int rc = cb(data, &part);
  if (rc != 0 || !air__json_is_obj(j, u)) return rc;
  d->input_tokens = in;
  d->output_tokens = out;
  return emit_usage(d, cb, data);
}

/* The block index of a content_block_* event, its object member `key` and
 * that member's "type" string; false when any is missing (malformed). */
static bool block_member(const air__json *j, const char *key, int *idx,
                         int *obj, int *type) {
  *obj = air__json_get(j, 0, key);
  *type = air__json_get(j, *obj, "type");
  return index_at(j, 0, idx) && air__json_is_obj(j, *obj) &&
         air__json_is_str(j, *type);
}

static int on_block_start(air__decoder *d, const air__json *j, bool *bad,
                          air__part_cb cb, void *data) {
  int idx, b, t;
  if (!block_member(j, "content_block", &idx, &b, &t)) {
    *bad = true;
    return 0;
  }
  const char *p;
  size_t n;
  if (air__json_eq(j, t, "text") || air__json_eq(j, t, "thinking")) {
    bool text = air__json_eq(j, t, "text");
    if (!str_at(j, air__json_get(j, b, text ? "text" : "thinking"), &d->scratch,
                &p, &n)) {
      *bad = true;
      return 0;
    }
    if (idx < AIR__DECODER_MAX_TOOLS)
      d->block_kind[idx] = text ? BK_TEXT : BK_THINKING;
    if (n == 0) return 0;
    return emit_text(cb, data, text ? AIR_PART_TEXT : AIR_PART_REASONING, idx,
                     p, n);
  }
  if (air__json_eq(j, t, "tool_use")) {
    const char *name;
    size_t name_n;
    int input = air__json_get(j, b, "input");
    if (idx >= AIR__DECODER_MAX_TOOLS || d->n_tools >= AIR__DECODER_MAX_TOOLS ||
        !str_at(j, air__json_get(j, b, "id"), &d->scratch, &p, &n) ||
        !str_at(j, air__json_get(j, b, "name"), &d->scratch2, &name, &name_n)) {
      *bad = true;
      return 0;
    }
    int tool = d->n_tools++;
    d->block_kind[idx] = BK_TOOL;
    d->block_tool[idx] = tool;
    air_part part = {.kind = AIR_PART_TOOL_START,
                     .index = tool,
                     .text = "",
                     .id = p,
                     .id_len = n,
                     .name = name,
                     .name_len = name_n,
                     .finish_raw = ""};
    int rc = cb(data, &part);
    /* Streams start tool_use with "input": {} and send the arguments as
     * deltas; an input given at once is passed on as one delta. */
    if (rc == 0 && air__json_is_obj(j, input) && j->tok[input].size > 0) {
      const char *raw = air__json_raw(j, input, &n);
      rc = emit_text(cb, data, AIR_PART_TOOL_DELTA, tool, raw, n);
    }
    return rc;
  }
  if (idx < AIR__DECODER_MAX_TOOLS)
    d->block_kind[idx] =
        air__json_eq(j, t, "redacted_thinking") ? BK_REDACTED : BK_OTHER;
  return 0;
}

static int on_block_delta(air__decoder *d, const air__json *j, bool *bad,
                          air__part_cb cb, void *data) {
  int idx, dl, t;
  if (!block_member(j, "delta", &idx, &dl, &t)) {
    *bad = true;
    return 0;
  }
  const char *key;
  air_part_kind kind;
  if (air__json_eq(j, t, "text_delta")) {
    key = "text";
    kind = AIR_PART_TEXT;
  } else if (air__json_eq(j, t, "thinking_delta")) {
    key = "thinking";
    kind = AIR_PART_REASONING;
  } else if (air__json_eq(j, t, "input_json_delta")) {
    key = "partial_json";
    kind = AIR_PART_TOOL_DELTA;
  } else {
    return 0; /* signature_delta, citations_delta, future kinds */
  }
  const char *p;
  size_t n;
  int s = air__json_get(j, dl, key);
  if (!air__json_is_str(j, s) || !str_at(j, s, &d->scratch, &p, &n)) {
    *bad = true;
    return 0;
  }
  if (kind == AIR_PART_TOOL_DELTA) {
    int bk = idx < AIR__DECODER_MAX_TOOLS ? d->block_kind[idx] : BK_NONE;
    if (bk == BK_OTHER) return 0; /* server tool input */
    if (bk != BK_TOOL) {
      *bad = true;
      return 0;
    }
    idx = d->block_tool[idx];
  }
  if (n == 0) return 0;
  return emit_text(cb, data, kind, idx, p, n);
}

static int on_message_delta(air__decoder *d, const air__json *j, bool *bad,
                            air__part_cb cb, void *data) {
  int dl = air__json_get(j, 0, "delta");
  int sr = air__json_get(j, dl, "stop_reason");
  int u = air__json_get(j, 0, "usage");
  bool has_in = false, has_out = false;
  uint64_t in = 0, out = 0;
  const char *p;
  size_t n;
  if ((dl >= 0 && !air__json_is_obj(j, dl) && !air__json_is_null(j, dl)) ||
      (sr >= 0 && !air__json_is_str(j, sr) && !air__json_is_null(j, sr)) ||
      !str_at(j, sr, &d->scratch, &p, &n) ||
      (u >= 0 && !air__json_is_obj(j, u) && !air__json_is_null(j, u)) ||
      (air__json_is_obj(j, u) &&
       !read_usage(j, u, &has_in, &in, &has_out, &out))) {
    *bad = true;
    return 0;
  }
  bool finish = air__json_is_str(j, sr);
  int rc = 0;
  if (finish) {
    air_part part = {.kind = AIR_PART_FINISH,
                     .text = "",
                     .id = "",
                     .name = "",
                     .finish = finish_of(p, n),
                     .finish_raw = p,
                     .finish_raw_len = n};
    d->finished = true;
    rc = cb(data, &part);
  }
  if (rc != 0 || !air__json_is_obj(j, u)) return rc;
  if (has_in) d->input_tokens = in;
  if (has_out) d->output_tokens = out;
  d->usage_only = !finish;
  return emit_usage(d, cb, data);
}

static int on_error(air__decoder *d, const air__json *j, bool *bad,
                    air__part_cb cb, void *data) {
  int e = air__json_get(j, 0, "error");
  const char *type = "", *msg = "";
  size_t type_n = 0, msg_n = 0;
  if (air__json_is_obj(j, e) &&
      (!str_at(j, air__json_get(j, e, "type"), &d->scratch, &type, &type_n) ||
       !str_at(j, air__json_get(j, e, "message"), &d->scratch2, &msg,
               &msg_n))) {
    *bad = true;
    return 0;
  }
  d->error_event = true;
  air_part part = {.kind = AIR_PART_ERROR,
                   .text = msg,
                   .text_len = msg_n,
                   .id = "",
                   .name = type,
                   .name_len = type_n,
                   .finish_raw = ""};
  return cb(data, &part);
}

static int decode_event(air__decoder *d, const air__sse_event *ev,
                        air__part_cb cb, void *data) {
  d->usage_only = d->terminator = d->error_event = false;
  if (IS(ev->type.p, ev->type.n, "ping")) return 0;
  air__json j;
  if (air__json_parse(&j, ev->data.p, ev->data.n) != 0 ||
      !air__json_is_obj(&j, 0)) {
    air__json_cleanup(&j);
    d->malformed++;
    return 0;
  }
  /* The data's own type decides; the event field only when it has none. */
  const char *t = ev->type.p;
  size_t tn = ev->type.n;
  int ti = air__json_get(&j, 0, "type");
  if (air__json_is_str(&j, ti)) t = air__json_raw(&j, ti, &tn);
  bool bad = false;
  int rc = 0;
  if (IS(t, tn, "content_block_delta"))
    rc = on_block_delta(d, &j, &bad, cb, data);
  else if (IS(t, tn, "content_block_start"))
    rc = on_block_start(d, &j, &bad, cb, data);
  else if (IS(t, tn, "message_start"))
    rc = on_message_start(d, &j, &bad, cb, data);
  else if (IS(t, tn, "message_delta"))
    rc = on_message_delta(d, &j, &bad, cb, data);
  else if (IS(t, tn, "message_stop"))
    d->done = d->terminator = true;
  else if (IS(t, tn, "error"))
    rc = on_error(d, &j, &bad, cb, data);
  /* content_block_stop, ping and unknown types: nothing. */
  air__json_cleanup(&j);
  if (bad) d->malformed++;
  return rc;
}

/* ---- decoding a whole body (cold path, jansson)
 * ------------------------------- */

static const char *jstr(const json_t *v, size_t *n) {
  if (!json_is_string(v)) {
    *n = 0;
    return "";
  }
  *n = json_string_length(v);
  return json_string_value(v);
}

static uint64_t jcount(const json_t *v) {
  return json_is_integer(v) && json_integer_value(v) > 0
             ? (uint64_t)json_integer_value(v)
             : 0;
}

static int body_block(air__decoder *d, const json_t *b, int i, air__part_cb cb,
                      void *data) {
  const char *type = json_string_value(json_object_get(b, "type"));
  size_t n;
  const char *s;
  if (type == NULL) return 0;
  bool text = strcmp(type, "text") == 0;
  if (text || strcmp(type, "thinking") == 0) {
    s = jstr(json_object_get(b, text ? "text" : "thinking"), &n);
    if (n == 0) return 0;
    return emit_text(cb, data, text ? AIR_PART_TEXT : AIR_PART_REASONING, i, s,
                     n);
  }
  if (strcmp(type, "tool_use") != 0) return 0;
  if (d->n_tools >= AIR__DECODER_MAX_TOOLS) return AIR_ETOOBIG;
  int tool = d->n_tools++;
  size_t id_n, name_n;
  const char *id = jstr(json_object_get(b, "id"), &id_n);
  const char *name = jstr(json_object_get(b, "name"), &name_n);
  air_part part = {.kind = AIR_PART_TOOL_START,
                   .index = tool,
                   .text = "",
                   .id = id,
                   .id_len = id_n,
                   .name = name,
                   .name_len = name_n,
                   .finish_raw = ""};
  int rc = cb(data, &part);
  if (rc != 0) return rc;
  const json_t *input = json_object_get(b, "input");
  air__buf_reset(&d->scratch);
  if (input == NULL) {
    rc = air__buf_add(&d->scratch, LIT("{}"));
  } else {
    rc = dump_json(input, &d->scratch);
  }
  if (rc != 0) return rc;
  return emit_text(cb, data, AIR_PART_TOOL_DELTA, tool, d->scratch.p,
                   d->scratch.n);
}

static int decode_body(air__decoder *d, const char *body, size_t n,
                       air__part_cb cb, void *data) {
  json_t *root = json_loadb(body, n, 0, NULL);
  const char *type = json_string_value(json_object_get(root, "type"));
  const json_t *content = json_object_get(root, "content");
  if (type == NULL || strcmp(type, "message") != 0 ||
      (content != NULL && !json_is_array(content))) {
    json_decref(root);
    return AIR_EPARSE;
  }
  size_t id_n, model_n, sr_n;
  const char *id = jstr(json_object_get(root, "id"), &id_n);
  const char *model = jstr(json_object_get(root, "model"), &model_n);
  air_part start = {.kind = AIR_PART_START,
                    .text = "",
                    .id = id,
                    .id_len = id_n,
                    .name = model,
                    .name_len = model_n,
                    .finish_raw = ""};
  d->started = true;
  int rc = cb(data, &start);
  size_t i;
  const json_t *b;
  json_array_foreach(content, i, b) {
    if (rc != 0) break;
    rc = body_block(d, b, i > MAX_BLOCK_INDEX ? MAX_BLOCK_INDEX : (int)i, cb,
                    data);
  }
  const json_t *sr = json_object_get(root, "stop_reason");
  if (rc == 0 && json_is_string(sr)) {
    const char *raw = jstr(sr, &sr_n);
    air_part fin = {.kind = AIR_PART_FINISH,
                    .text = "",
                    .id = "",
                    .name = "",
                    .finish = finish_of(raw, sr_n),
                    .finish_raw = raw,
                    .finish_raw_len = sr_n};
    d->finished = true;
    rc = cb(data, &fin);
  }
  const json_t *u = json_object_get(root, "usage");
  if (rc == 0 && json_is_object(u)) {
    d->input_tokens = sat_add(
        jcount(json_object_get(u, "input_tokens")),
        sat_add(jcount(json_object_get(u, "cache_creation_input_tokens")),
                jcount(json_object_get(u, "cache_read_input_tokens"))));
    d->output_tokens = jcount(json_object_get(u, "output_tokens"));
    rc = emit_usage(d, cb, data);
  }
  json_decref(root);
  return rc;
}

/* ---- encoding for an Anthropic caller
 * ------------------------------------------ */

/* Copies at most cap-1 bytes of p into dst, cut at a UTF-8 boundary. */
static void copy_trunc(char *dst, size_t cap, const char *p, size_t n) {
  if (n >= cap) {
    n = cap - 1;
    while (n > 0 && ((unsigned char)p[n] & 0xC0) == 0x80) n--;
  }
  if (n) memcpy(dst, p, n);
  dst[n] = '\0';
}

static void encoder_init(air__encoder *e, const air__request *req,
                         uint64_t created_s) {
  memset(e, 0, sizeof(*e));
  e->api = AIR_DIALECT_ANTHROPIC;
  e->open_block = -1;
  e->created = created_s;
  for (int i = 0; i < AIR__DECODER_MAX_TOOLS; i++) e->tool_block[i] = -1;
  copy_trunc(e->id, sizeof(e->id), LIT("msg_airetry"));
  if (req != NULL && req->model != NULL)
    copy_trunc(e->model, sizeof(e->model), req->model, strlen(req->model));
}

static int add_str(air__buf *b, const char *s, size_t n) {
  return air__buf_add_json_str(b, s != NULL ? s : "", s != NULL ? n : 0);
}

static int add_cstr(air__buf *b, const char *s) {
  return add_str(b, s, s != NULL ? strlen(s) : 0);
}

static int add_int(air__buf *b, long long v) {
  int rc = 0;
  if (v < 0) {
    rc = air__buf_addc(b, '-');
    return rc != 0 ? rc : air__buf_addu(b, 0ull - (unsigned long long)v);
  }
  return air__buf_addu(b, (unsigned long long)v);
}

/* message_start, once, before anything else of the message. */
static int ensure_started(air__encoder *e, air__buf *out) {
  if (e->started) return 0;
  int rc = air__buf_add(
      out, LIT("event: message_start\ndata: "
               "{\"type\":\"message_start\",\"message\":{\"id\":"));
  if (rc == 0) rc = add_cstr(out, e->id);
  if (rc == 0)
    rc = air__buf_add(
        out, LIT(",\"type\":\"message\",\"role\":\"assistant\",\"model\":"));
  if (rc == 0) rc = add_cstr(out, e->model);
  if (rc == 0)
    rc = air__buf_add(
        out, LIT(",\"content\":[],\"stop_reason\":null,"
                 "\"stop_sequence\":null,\"usage\":{\"input_tokens\":"));
  if (rc == 0) rc = air__buf_addu(out, e->input_tokens);
  if (rc == 0) rc = air__buf_add(out, LIT(",\"output_tokens\":"));
  if (rc == 0) rc = air__buf_addu(out, e->output_tokens);
  if (rc == 0) rc = air__buf_add(out, LIT("}}}\n\n"));
  if (rc == 0) e->started = true;
  return rc;
}

static int close_block(air__encoder *e, air__buf *out) {
  if (e->open_block < 0) return 0;
  int rc =
      air__buf_add(out, LIT("event: content_block_stop\ndata: "
                            "{\"type\":\"content_block_stop\",\"index\":"));
  if (rc == 0) rc = add_int(out, e->open_block);
  if (rc == 0) rc = air__buf_add(out, LIT("}\n\n"));
  e->open_block = -1;
  e->open_kind = EK_NONE;
  return rc;
}

/* Closes the open block and starts a new one of kind (tool: p's id and
 * name). */
static int open_block(air__encoder *e, air__buf *out, int kind,
                      const air_part *p) {
  int rc = ensure_started(e, out);
  if (rc == 0) rc = close_block(e, out);
  if (rc == 0)
    rc = air__buf_add(out, LIT("event: content_block_start\ndata: "
                               "{\"type\":\"content_block_start\",\"index\":"));
  if (rc == 0) rc = add_int(out, e->next_block);
  if (rc != 0) return rc;
  if (kind == EK_TEXT) {
    rc = air__buf_add(
        out, LIT(",\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"));
  } else if (kind == EK_THINKING) {
    rc = air__buf_add(out, LIT(",\"content_block\":{\"type\":\"thinking\","
                               "\"thinking\":\"\",\"signature\":\"\"}}\n\n"));
  } else {
    rc = air__buf_add(out,
                      LIT(",\"content_block\":{\"type\":\"tool_use\",\"id\":"));
    if (rc == 0) rc = add_str(out, p ? p->id : NULL, p ? p->id_len : 0);
    if (rc == 0) rc = air__buf_add(out, LIT(",\"name\":"));
    if (rc == 0) rc = add_str(out, p ? p->name : NULL, p ? p->name_len : 0);
    if (rc == 0) rc = air__buf_add(out, LIT(",\"input\":{}}}\n\n"));
  }
  if (rc == 0) {
    e->open_block = e->next_block++;
    e->open_kind = kind;
  }
  return rc;
}

static int block_delta(air__buf *out, int block, const char *dtype,
                       const char *key, const air_part *p) {
  int rc =
      air__buf_add(out, LIT("event: content_block_delta\ndata: "
                            "{\"type\":\"content_block_delta\",\"index\":"));
  if (rc == 0) rc = add_int(out, block);
  if (rc == 0) rc = air__buf_add(out, LIT(",\"delta\":{\"type\":\""));
  if (rc == 0) rc = air__buf_adds(out, dtype);
  if (rc == 0) rc = air__buf_add(out, LIT("\",\""));
  if (rc == 0) rc = air__buf_adds(out, key);
  if (rc == 0) rc = air__buf_add(out, LIT("\":"));
  if (rc == 0) rc = add_str(out, p->text, p->text_len);
  if (rc == 0) rc = air__buf_add(out, LIT("}}\n\n"));
  return rc;
}

static int encode_part_bytes(air__encoder *e, const air_part *p,
                             air__buf *out) {
  int rc = 0;
  switch (p->kind) {
    case AIR_PART_START:
      if (!e->started) {
        if (p->id_len > 0) copy_trunc(e->id, sizeof(e->id), p->id, p->id_len);
        if (p->name_len > 0)
          copy_trunc(e->model, sizeof(e->model), p->name, p->name_len);
      }
      return 0;
    case AIR_PART_TEXT:
    case AIR_PART_REFUSAL:
    case AIR_PART_REASONING: {
      if (p->text_len == 0) return 0;
      bool think = p->kind == AIR_PART_REASONING;
      int kind = think ? EK_THINKING : EK_TEXT;
      if (e->open_kind != kind || e->open_block < 0)
        rc = open_block(e, out, kind, NULL);
      if (rc == 0)
        rc = block_delta(out, e->open_block,
                         think ? "thinking_delta" : "text_delta",
                         think ? "thinking" : "text", p);
      return rc;
    }
    case AIR_PART_TOOL_START:
      if (p->index < 0 || p->index >= AIR__DECODER_MAX_TOOLS) return AIR_EINVAL;
      rc = open_block(e, out, EK_TOOL, p);
      if (rc == 0) e->tool_block[p->index] = e->open_block;
      return rc;
    case AIR_PART_TOOL_DELTA:
      if (p->index < 0 || p->index >= AIR__DECODER_MAX_TOOLS) return AIR_EINVAL;
      if (p->text_len == 0) return 0;
      if (e->tool_block[p->index] < 0) {
        rc = open_block(e, out, EK_TOOL, NULL);
        if (rc == 0) e->tool_block[p->index] = e->open_block;
      }
      if (rc == 0)
        rc = block_delta(out, e->tool_block[p->index], "input_json_delta",
                         "partial_json", p);
      return rc;
    case AIR_PART_FINISH:
      e->finish = p->finish;
      e->finished = true;
      return 0;
    case AIR_PART_USAGE:
      e->input_tokens = p->input_tokens;
      e->output_tokens = p->output_tokens;
      e->has_usage = true;
      return 0;
    case AIR_PART_ERROR:
      return 0;
  }
  return 0;
}

/* On failure out is left as it was (the encoder should not be used on). */
static int encode_part(air__encoder *e, const air_part *p, air__buf *out) {
  size_t start = out->n;
  int rc = encode_part_bytes(e, p, out);
  if (rc != 0) {
    out->n = start;
    if (out->p) out->p[start] = '\0';
  }
  return rc;
}

static const char message_stop[] =
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

static int encode_end(air__encoder *e, air__buf *out) {
  if (e->ended) return 0;
  size_t start = out->n;
  int rc = 0;
  if (!e->passthrough) {
    rc = ensure_started(e, out);
    if (rc == 0) rc = close_block(e, out);
    if (rc == 0)
      rc = air__buf_add(
          out, LIT("event: message_delta\ndata: {\"type\":\"message_delta\","
                   "\"delta\":{\"stop_reason\":\""));
    if (rc == 0) rc = air__buf_adds(out, stop_name(e->finish));
    if (rc == 0)
      rc = air__buf_add(out, LIT("\",\"stop_sequence\":null},\"usage\":{"));
    if (rc == 0 && e->has_usage) {
      rc = air__buf_add(out, LIT("\"input_tokens\":"));
      if (rc == 0) rc = air__buf_addu(out, e->input_tokens);
      if (rc == 0) rc = air__buf_addc(out, ',');
    }
    if (rc == 0) rc = air__buf_add(out, LIT("\"output_tokens\":"));
    if (rc == 0) rc = air__buf_addu(out, e->output_tokens);
    if (rc == 0) rc = air__buf_add(out, LIT("}}\n\n"));
  }
  if (rc == 0) rc = air__buf_add(out, LIT(message_stop));
  if (rc != 0) {
    out->n = start;
    if (out->p) out->p[start] = '\0';
    return rc;
  }
  e->ended = true;
  return 0;
}

static int add_error_obj(air__buf *out, air_reason reason,
                         const char *message) {
  int rc = air__buf_add(out, LIT("{\"type\":\"error\",\"error\":{\"type\":"));
  if (rc == 0) rc = add_cstr(out, air__error_type(AIR_DIALECT_ANTHROPIC, reason));
  if (rc == 0) rc = air__buf_add(out, LIT(",\"message\":"));
  if (rc == 0) rc = add_cstr(out, message);
  if (rc == 0) rc = air__buf_addc(out, '}');
  return rc;
}

static int encode_error_event(air__encoder *e, air_reason reason,
                              const char *message, air__buf *out) {
  size_t start = out->n;
  int rc = air__buf_add(out, LIT("event: error\ndata: "));
  if (rc == 0) rc = add_error_obj(out, reason, message);
  if (rc == 0) rc = air__buf_add(out, LIT("}\n\n"));
  if (rc != 0) {
    out->n = start;
    if (out->p) out->p[start] = '\0';
    return rc;
  }
  e->ended = true;
  return 0;
}

static int add_bufstr(air__buf *out, const air__buf *s, const char *dflt) {
  if (s->n == 0) return add_cstr(out, dflt);
  return add_str(out, s->p, s->n);
}

/* A tool call's input: its arguments when they are a JSON object (copied
 * as they are), else {}. */
static int add_input(air__buf *out, const air__buf *args) {
  json_t *v = args->n > 0 ? json_loadb(args->p, args->n, 0, NULL) : NULL;
  bool obj = json_is_object(v);
  json_decref(v);
  if (!obj) return air__buf_add(out, LIT("{}"));
  return air__buf_add(out, args->p, args->n);
}

/* Appends s JSON-escaped without the surrounding quotes. */
static int add_str_body(air__buf *out, const char *s, size_t n) {
  size_t at = out->n;
  int rc = add_str(out, s, n);
  if (rc != 0) return rc;
  size_t len = out->n - at; /* quotes included */
  memmove(out->p + at, out->p + at + 1, len - 2);
  out->n -= 2;
  out->p[out->n] = '\0';
  return 0;
}

static int encode_response(const air__aggregate *a, air__buf *out) {
  size_t start = out->n;
  bool first = true;
  int rc = air__buf_add(out, LIT("{\"id\":"));
  if (rc == 0) rc = add_bufstr(out, &a->id, "msg_airetry");
  if (rc == 0)
    rc = air__buf_add(
        out, LIT(",\"type\":\"message\",\"role\":\"assistant\",\"model\":"));
  if (rc == 0) rc = add_bufstr(out, &a->model, "");
  if (rc == 0) rc = air__buf_add(out, LIT(",\"content\":["));
  if (rc == 0 && a->reasoning.n > 0) {
    rc = air__buf_add(out, LIT("{\"type\":\"thinking\",\"thinking\":"));
    if (rc == 0) rc = add_str(out, a->reasoning.p, a->reasoning.n);
    if (rc == 0) rc = air__buf_add(out, LIT(",\"signature\":\"\"}"));
    first = false;
  }
  if (rc == 0 && (a->text.n > 0 || a->refusal.n > 0)) {
    /* Text then refusal text, as one text block. */
    if (!first) rc = air__buf_addc(out, ',');
    if (rc == 0) rc = air__buf_add(out, LIT("{\"type\":\"text\",\"text\":\""));
    if (rc == 0) rc = add_str_body(out, a->text.p, a->text.n);
    if (rc == 0) rc = add_str_body(out, a->refusal.p, a->refusal.n);
    if (rc == 0) rc = air__buf_add(out, LIT("\"}"));
    first = false;
  }
  for (size_t i = 0; rc == 0 && i < a->n_tools; i++) {
    const air__tool_call *t = &a->tools[i];
    if (!first) rc = air__buf_addc(out, ',');
    first = false;
    if (rc == 0) rc = air__buf_add(out, LIT("{\"type\":\"tool_use\",\"id\":"));
    if (rc == 0) rc = add_cstr(out, t->id);
    if (rc == 0) rc = air__buf_add(out, LIT(",\"name\":"));
    if (rc == 0) rc = add_cstr(out, t->name);
    if (rc == 0) rc = air__buf_add(out, LIT(",\"input\":"));
    if (rc == 0) rc = add_input(out, &t->args);
    if (rc == 0) rc = air__buf_addc(out, '}');
  }
  const char *sr = stop_name(a->finish);
  if (a->finish == AIR_FINISH_STOP &&
      IS(a->finish_raw.p, a->finish_raw.n, "stop_sequence"))
    sr = "stop_sequence";
  if (rc == 0) rc = air__buf_add(out, LIT("],\"stop_reason\":\""));
  if (rc == 0) rc = air__buf_adds(out, sr);
  if (rc == 0)
    rc = air__buf_add(
        out, LIT("\",\"stop_sequence\":null,\"usage\":{\"input_tokens\":"));
  if (rc == 0) rc = air__buf_addu(out, a->input_tokens);
  if (rc == 0) rc = air__buf_add(out, LIT(",\"output_tokens\":"));
  if (rc == 0) rc = air__buf_addu(out, a->output_tokens);
  if (rc == 0) rc = air__buf_add(out, LIT("}}"));
  if (rc != 0) {
    out->n = start;
    if (out->p) out->p[start] = '\0';
  }
  return rc;
}

static int encode_error_body(int status, air_reason reason, const char *message,
                             const air_attempt *log, size_t n, air__buf *out) {
  (void)status; /* the HTTP status line carries it */
  size_t start = out->n;
  int rc = add_error_obj(out, reason, message);
  if (rc == 0) rc = air__buf_add(out, LIT(",\"attempts\":["));
  for (size_t i = 0; rc == 0 && i < n; i++) {
    const air_attempt *at = &log[i];
    const char *rn = air_reason_name(at->reason);
    if (i > 0) rc = air__buf_addc(out, ',');
    if (rc == 0) rc = air__buf_add(out, LIT("{\"target\":"));
    if (rc == 0) rc = add_cstr(out, at->target);
    if (rc == 0 && at->skipped) {
      rc = air__buf_add(out, LIT(",\"outcome\":\"skipped\",\"field\":"));
      if (rc == 0) rc = add_cstr(out, at->field);
      if (rc == 0) rc = air__buf_addc(out, '}');
      continue;
    }
    if (rc == 0) rc = air__buf_add(out, LIT(",\"reason\":"));
    if (rc == 0) rc = add_cstr(out, rn != NULL ? rn : "none");
    if (rc == 0) rc = air__buf_add(out, LIT(",\"status\":"));
    if (rc == 0) rc = add_int(out, at->status);
    if (rc == 0) rc = air__buf_add(out, LIT(",\"ms\":"));
    if (rc == 0) rc = air__buf_addu(out, at->ms);
    if (rc == 0) rc = air__buf_add(out, LIT(",\"request_id\":"));
    if (rc == 0) {
      if (at->request_id == NULL || at->request_id[0] == '\0')
        rc = air__buf_add(out, LIT("null"));
      else
        rc = add_cstr(out, at->request_id);
    }
    if (rc == 0) rc = air__buf_addc(out, '}');
  }
  if (rc == 0) rc = air__buf_add(out, LIT("]}"));
  if (rc != 0) {
    out->n = start;
    if (out->p) out->p[start] = '\0';
  }
  return rc;
}

const air__provider_ops air__provider_anthropic = {
    .api = AIR_DIALECT_ANTHROPIC,
    .name = "anthropic",
    .path = "/v1/messages",
    .build_request = build_request,
    .decoder_init = decoder_init,
    .decode_event = decode_event,
    .decode_body = decode_body,
    .encoder_init = encoder_init,
    .encode_part = encode_part,
    .encode_end = encode_end,
    .encode_error_event = encode_error_event,
    .encode_response = encode_response,
    .encode_error_body = encode_error_body,
};
