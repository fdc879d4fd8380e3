/*
 * What the dialects share: caller request validation, error-body reading,
 * aggregation of parts for non-streaming callers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "canon.h"
#include "codec_decode.h"
#include "codec_json.h"
#include "dialect.h"
#include "error.h"
#include "limits.h"

/* ---- request validation
 * ------------------------------------------------------ */

static int bad(air_error *err, int code, const char *field, const char *what) {
  return air__error_set(err, code, "%s: %s", field, what);
}

/* Known top-level fields and their types; null is accepted for each. */
static const air__field_rule openai_fields[] = {
    {"stream", AIR__F_BOOL},
    {"max_tokens", AIR__F_INT_POS},
    {"max_completion_tokens", AIR__F_INT_POS},
    {"temperature", AIR__F_NUMBER},
    {"top_p", AIR__F_NUMBER},
    {"n", AIR__F_INT_POS},
    {"stop", AIR__F_STR_OR_ARRAY},
    {"tools", AIR__F_ARRAY},
    {"tool_choice", AIR__F_STR_OR_OBJ},
    {"stream_options", AIR__F_OBJECT},
    {"response_format", AIR__F_OBJECT},
    {"user", AIR__F_STRING},
    {"seed", AIR__F_NUMBER},
};

static const air__field_rule anthropic_fields[] = {
    {"stream", AIR__F_BOOL},         {"max_tokens", AIR__F_INT_POS},
    {"temperature", AIR__F_NUMBER},  {"top_p", AIR__F_NUMBER},
    {"top_k", AIR__F_INT_POS},       {"stop_sequences", AIR__F_ARRAY},
    {"tools", AIR__F_ARRAY},         {"tool_choice", AIR__F_OBJECT},
    {"system", AIR__F_STR_OR_ARRAY}, {"metadata", AIR__F_OBJECT},
    {"thinking", AIR__F_OBJECT},
};

static const air__field_rule responses_fields[] = {
    {"stream", AIR__F_BOOL},
    {"max_output_tokens", AIR__F_INT_POS},
    {"temperature", AIR__F_NUMBER},
    {"top_p", AIR__F_NUMBER},
    {"instructions", AIR__F_STRING},
    {"tools", AIR__F_ARRAY},
    {"tool_choice", AIR__F_STR_OR_OBJ},
    {"parallel_tool_calls", AIR__F_BOOL},
    {"text", AIR__F_OBJECT},
    {"reasoning", AIR__F_OBJECT},
    {"metadata", AIR__F_OBJECT},
    {"user", AIR__F_STRING},
    {"store", AIR__F_BOOL},
    {"background", AIR__F_BOOL},
    {"include", AIR__F_ARRAY},
    {"previous_response_id", AIR__F_STRING},
};

const air__field_rule *air__field_rules(air_dialect dialect, size_t *n) {
  if (dialect == AIR_DIALECT_OPENAI_RESPONSES) {
    *n = sizeof(responses_fields) / sizeof(responses_fields[0]);
    return responses_fields;
  }
  if (dialect == AIR_DIALECT_OPENAI) {
    *n = sizeof(openai_fields) / sizeof(openai_fields[0]);
    return openai_fields;
  }
  *n = sizeof(anthropic_fields) / sizeof(anthropic_fields[0]);
  return anthropic_fields;
}

static bool type_ok(const json_t *v, air__field_type t) {
  if (json_is_null(v)) return true;
  switch (t) {
    case AIR__F_BOOL:
      return json_is_boolean(v);
    case AIR__F_INT_POS:
      return json_is_integer(v) && json_integer_value(v) > 0;
    case AIR__F_NUMBER:
      return json_is_number(v);
    case AIR__F_STRING:
      return json_is_string(v);
    case AIR__F_ARRAY:
      return json_is_array(v);
    case AIR__F_OBJECT:
      return json_is_object(v);
    case AIR__F_STR_OR_ARRAY:
      return json_is_string(v) || json_is_array(v);
    case AIR__F_STR_OR_OBJ:
      return json_is_string(v) || json_is_object(v);
  }
  return false;
}

static const char *type_name(air__field_type t) {
  switch (t) {
    case AIR__F_BOOL:
      return "expected a boolean";
    case AIR__F_INT_POS:
      return "expected a positive integer";
    case AIR__F_NUMBER:
      return "expected a number";
    case AIR__F_STRING:
      return "expected a string";
    case AIR__F_ARRAY:
      return "expected an array";
    case AIR__F_OBJECT:
      return "expected an object";
    case AIR__F_STR_OR_ARRAY:
      return "expected a string or an array";
    case AIR__F_STR_OR_OBJ:
      return "expected a string or an object";
  }
  return "wrong type";
}

/* A Responses request's "input": a string, or a non-empty array of
 * objects (items). */
static int responses_input(const json_t *in, air_error *err) {
  if (in == NULL) return bad(err, AIR_EINVAL, "input", "required");
  if (json_is_string(in)) return 0;
  if (!json_is_array(in))
    return bad(err, AIR_EINVAL, "input", "expected a string or an array");
  if (json_array_size(in) == 0)
    return bad(err, AIR_EINVAL, "input", "must not be empty");
  for (size_t i = 0; i < json_array_size(in); i++) {
    char field[64];
    snprintf(field, sizeof(field), "input[%zu]", i);
    if (!json_is_object(json_array_get(in, i)))
      return bad(err, AIR_EINVAL, field, "expected an object");
  }
  return 0;
}

int air__request_parse(air_dialect dialect, const char *body, size_t n,
                       air__request *out, air_error *err) {
  if (air__request_fast(dialect, body, n, out)) return 0;
  return air__request_parse_tree(dialect, body, n, out, err);
}

/*
 * A fixed description of a JSON parse error. jansson's own text quotes the
 * token it stopped at ("near '...'"), which is the caller's prompt: it
 * never reaches an answer or a log line, only the position does.
 */
static const char *json_error_what(const json_error_t *e) {
  switch (json_error_code(e)) {
    case json_error_out_of_memory:
      return "out of memory";
    case json_error_stack_overflow:
      return "nested too deeply";
    case json_error_invalid_utf8:
      return "invalid UTF-8";
    case json_error_premature_end_of_input:
      return "the body ends inside a value";
    case json_error_end_of_input_expected:
      return "bytes after the JSON value";
    case json_error_null_character:
    case json_error_null_byte_in_key:
      return "a NUL character";
    case json_error_duplicate_key:
      return "an object key given twice";
    case json_error_numeric_overflow:
      return "a number out of range";
    default:
      return "invalid syntax";
  }
}

int air__request_parse_tree(air_dialect dialect, const char *body, size_t n,
                            air__request *out, air_error *err) {
  memset(out, 0, sizeof(*out));
  out->dialect = dialect;
  json_error_t jerr;
  /* JSON_REJECT_DUPLICATES: a key given twice is ambiguous, so an error.
   * Invalid UTF-8 is rejected by jansson itself. */
  json_t *root = json_loadb(body, n, JSON_REJECT_DUPLICATES, &jerr);
  if (root == NULL) {
    if (err != NULL) {
      err->code = AIR_EPARSE;
      snprintf(err->message, sizeof(err->message),
               "invalid JSON body at line %d column %d (byte %d): %s",
               jerr.line, jerr.column, jerr.position, json_error_what(&jerr));
    }
    return AIR_EPARSE;
  }
  if (!json_is_object(root)) {
    json_decref(root);
    return bad(err, AIR_EINVAL, "body", "expected a JSON object");
  }
  int rc = 0;
  json_t *model = json_object_get(root, "model");
  bool rsp = dialect == AIR_DIALECT_OPENAI_RESPONSES;
  json_t *messages = json_object_get(root, rsp ? "input" : "messages");
  if (model == NULL)
    rc = bad(err, AIR_EINVAL, "model", "required");
  else if (!json_is_string(model) || json_string_length(model) == 0)
    rc = bad(err, AIR_EINVAL, "model", "expected a non-empty string");
  else if (rsp)
    rc = responses_input(messages, err);
  else if (messages == NULL)
    rc = bad(err, AIR_EINVAL, "messages", "required");
  else if (!json_is_array(messages))
    rc = bad(err, AIR_EINVAL, "messages", "expected an array");
  else if (json_array_size(messages) == 0)
    rc = bad(err, AIR_EINVAL, "messages", "must not be empty");
  for (size_t i = 0; rc == 0 && !rsp && i < json_array_size(messages); i++) {
    json_t *m = json_array_get(messages, i);
    json_t *role = json_object_get(m, "role");
    char field[64];
    snprintf(field, sizeof(field), "messages[%zu]", i);
    if (!json_is_object(m))
      rc = bad(err, AIR_EINVAL, field, "expected an object");
    else if (!json_is_string(role))
      rc = bad(err, AIR_EINVAL, field, "role: expected a string");
  }
  size_t n_rules = 0;
  const air__field_rule *rules = air__field_rules(dialect, &n_rules);
  for (size_t i = 0; rc == 0 && i < n_rules; i++) {
    json_t *v = json_object_get(root, rules[i].name);
    if (v != NULL && !type_ok(v, rules[i].type))
      rc = bad(err, AIR_EINVAL, rules[i].name, type_name(rules[i].type));
  }
  if (rc != 0) {
    json_decref(root);
    return rc;
  }
  out->tree = root;
  out->model = json_string_value(model);
  out->stream = json_is_true(json_object_get(root, "stream"));
  json_t *so = json_object_get(root, "stream_options");
  out->include_usage = json_is_true(json_object_get(so, "include_usage"));
  json_t *rf = rsp ? json_object_get(json_object_get(root, "text"), "format")
                   : json_object_get(root, "response_format");
  const char *rft = json_string_value(json_object_get(rf, "type"));
  out->json_response = rft != NULL && (strcmp(rft, "json_object") == 0 ||
                                       strcmp(rft, "json_schema") == 0);
  return 0;
}

json_t *air__request_body(const air__request *r) {
  if (r->tree == NULL && r->raw != NULL) {
    /* A cache filled on first use; the text passed validation already.
     * NOLINTNEXTLINE(clang-diagnostic-cast-qual) */
    air__request *w = (air__request *)(uintptr_t)r;
    w->tree = json_loadb(r->raw, r->raw_n, JSON_REJECT_DUPLICATES, NULL);
  }
  return r->tree;
}

int air__request_tree(const air__request *r, const json_t **body) {
  *body = air__request_body(r);
  if (json_is_object(*body)) return 0;
  return r->raw != NULL ? AIR_ENOMEM : AIR_EINVAL;
}

void air__request_cleanup(air__request *r) {
  json_decref(r->tree);
  if (r->canon != NULL) {
    air__canon_cleanup(r->canon);
    free(r->canon);
  }
  free(r->raw);
  memset(r, 0, sizeof(*r));
}

void air__decoder_init_for(air__decoder *d, air_dialect api) {
  memset(d, 0, sizeof(*d));
  d->api = api;
  air__buf_init(&d->scratch, AIR__MAX_SSE_EVENT_BYTES);
  air__buf_init(&d->scratch2, AIR__MAX_SSE_EVENT_BYTES);
}

void air__decoder_cleanup(air__decoder *d) {
  air__buf_cleanup(&d->scratch);
  air__buf_cleanup(&d->scratch2);
}

void air__decoder_note_oom(air__decoder *d, int rc) {
  if (rc == AIR_ENOMEM || air__buf_error(&d->scratch) == AIR_ENOMEM ||
      air__buf_error(&d->scratch2) == AIR_ENOMEM)
    d->oom = true;
}

/* ---- error bodies
 * --------------------------------------------------------------- */

/* Copies a JSON string (or a number's text) into buf; returns its offset or -1.
 */
static long keep_str(air__buf *buf, const json_t *v) {
  char num[32];
  const char *s = NULL;
  size_t n = 0;
  if (json_is_string(v)) {
    s = json_string_value(v);
    n = json_string_length(v);
  } else if (json_is_integer(v)) {
    snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
    s = num;
    n = strlen(num);
  } else {
    return -1;
  }
  if (n > AIR__MAX_MESSAGE_BYTES) n = AIR__MAX_MESSAGE_BYTES;
  long off = (long)buf->n;
  if (air__buf_add(buf, s, n) != 0 || air__buf_addc(buf, '\0') != 0) return -1;
  return off;
}

void air__parse_error_body(const char *body, size_t n, air__buf *buf,
                           air_failure *f) {
  f->type = f->code = f->message = NULL;
  json_t *root = n > 0 ? json_loadb(body, n, 0, NULL) : NULL;
  long t = -1, c = -1, m = -1;
  if (json_is_object(root)) {
    json_t *e = json_object_get(root, "error");
    if (json_is_object(e)) {
      t = keep_str(buf, json_object_get(e, "type"));
      c = keep_str(buf, json_object_get(e, "code"));
      m = keep_str(buf, json_object_get(e, "message"));
    } else if (json_is_string(e)) {
      m = keep_str(buf, e);
    } else {
      m = keep_str(buf, json_object_get(root, "message"));
    }
  } else if (n > 0) {
    /* Not JSON: keep a printable prefix as the message. */
    size_t k = n < 200 ? n : 200;
    m = (long)buf->n;
    for (size_t i = 0; i < k; i++) {
      char ch = body[i];
      if (air__buf_addc(buf, (ch >= 0x20 && ch < 0x7f) ? ch : ' ') != 0) {
        m = -1;
        break;
      }
    }
    if (m >= 0 && air__buf_addc(buf, '\0') != 0) m = -1;
  }
  json_decref(root);
  if (t >= 0) f->type = buf->p + t;
  if (c >= 0) f->code = buf->p + c;
  if (m >= 0) f->message = buf->p + m;
}

/* The reasons that are timeouts (docs/design.md §2.1). */
static bool is_timeout(air_reason r) {
  switch (r) {
    case AIR_REASON_TIMEOUT_CONNECT:
    case AIR_REASON_TIMEOUT_FIRST_BYTE:
    case AIR_REASON_TIMEOUT_FIRST_CHUNK:
    case AIR_REASON_TIMEOUT_CHUNK:
    case AIR_REASON_TIMEOUT_ATTEMPT:
    case AIR_REASON_TIMEOUT_TOTAL:
      return true;
    default:
      return false;
  }
}

int air__final_status(air_reason reason, int status) {
  if (status >= 400 && status <= 599) return status;
  if (is_timeout(reason)) return 504;
  switch (reason) {
    case AIR_REASON_RATE_LIMIT:
      return 429;
    case AIR_REASON_OVERLOADED:
      return 503;
    case AIR_REASON_CONTEXT_OVERFLOW:
    case AIR_REASON_CONTENT_FILTER:
    case AIR_REASON_LENGTH:
    case AIR_REASON_BAD_REQUEST:
      return 400;
    case AIR_REASON_REFUSAL:
      return 422;
    case AIR_REASON_AUTH:
      return 401;
    case AIR_REASON_QUOTA:
      return 402;
    case AIR_REASON_NOT_FOUND:
      return 404;
    case AIR_REASON_ABORTED:
      return 499;
    default:
      return 502;
  }
}

const char *air__error_type(air_dialect api, air_reason r) {
  bool a = api == AIR_DIALECT_ANTHROPIC;
  if (is_timeout(r)) return a ? "timeout_error" : "timeout";
  switch (r) {
    case AIR_REASON_RATE_LIMIT:
      return a ? "rate_limit_error" : "rate_limit_exceeded";
    case AIR_REASON_OVERLOADED:
      return a ? "overloaded_error" : "server_error";
    case AIR_REASON_AUTH:
      return a ? "authentication_error" : "authentication_error";
    case AIR_REASON_QUOTA:
      return a ? "billing_error" : "insufficient_quota";
    case AIR_REASON_NOT_FOUND:
      return a ? "not_found_error" : "not_found_error";
    case AIR_REASON_BAD_REQUEST:
    case AIR_REASON_CONTEXT_OVERFLOW:
    case AIR_REASON_CONTENT_FILTER:
      return "invalid_request_error";
    default:
      return a ? "api_error" : "server_error";
  }
}

/* ---- identifiers (dialect.h)
 * ------------------------------------------------------- */

void air__tool_id_sub(const char *id, size_t n,
                      char out[AIR__TOOL_ID_SUB_BYTES]) {
  uint64_t h = 14695981039346656037ull; /* FNV-1a */
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)id[i]) * 1099511628211ull;
  static const char hex[] = "0123456789abcdef";
  memcpy(out, "call_airetry_", 13);
  for (int i = 0; i < 16; i++) out[13 + i] = hex[(h >> (60 - 4 * i)) & 0xf];
  out[29] = '\0';
}

const air_part *air__ident_fix(const air_part *p, air__idents *s, air_part *tmp,
                               char buf[AIR__TOOL_ID_SUB_BYTES]) {
  if (p->kind == AIR_PART_START && (p->id_len > AIR__MAX_IDENT_BYTES ||
                                    p->name_len > AIR__MAX_IDENT_BYTES)) {
    *tmp = *p;
    if (p->id_len > AIR__MAX_IDENT_BYTES) {
      tmp->id = s->id != NULL ? s->id : "";
      tmp->id_len = strlen(tmp->id);
      s->replaced |= AIR__IDENT_ID;
    }
    if (p->name_len > AIR__MAX_IDENT_BYTES) {
      tmp->name = s->model != NULL ? s->model : "";
      tmp->name_len = strlen(tmp->name);
      s->replaced |= AIR__IDENT_MODEL;
    }
    return tmp;
  }
  if (p->kind == AIR_PART_TOOL_START && p->id_len > AIR__MAX_IDENT_BYTES) {
    *tmp = *p;
    air__tool_id_sub(p->id, p->id_len, buf);
    tmp->id = buf;
    tmp->id_len = AIR__TOOL_ID_SUB_BYTES - 1;
    s->replaced |= AIR__IDENT_TOOL_ID;
    return tmp;
  }
  return p;
}

const char *air__ident_names(unsigned replaced) {
  static const char *const names[8] = {
      "",        "id",         "model",         "id,model",
      "tool_id", "id,tool_id", "model,tool_id", "id,model,tool_id"};
  return names[replaced & 7u];
}

/* ---- aggregation
 * ------------------------------------------------------------------ */

#define AGG_MAX AIR__MAX_ANSWER_BYTES

void air__aggregate_init(air__aggregate *a) {
  memset(a, 0, sizeof(*a));
  air__buf_init(&a->id, AIR__MAX_IDENT_BYTES);
  air__buf_init(&a->model, AIR__MAX_IDENT_BYTES);
  air__buf_init(&a->text, AGG_MAX);
  air__buf_init(&a->reasoning, AGG_MAX);
  air__buf_init(&a->refusal, AGG_MAX);
  air__buf_init(&a->finish_raw, AIR__MAX_FINISH_REASON_BYTES);
  air__buf_init(&a->continued, AIR__CONTINUED_MAX_BYTES);
}

void air__aggregate_cleanup(air__aggregate *a) {
  air__buf_cleanup(&a->id);
  air__buf_cleanup(&a->model);
  air__buf_cleanup(&a->text);
  air__buf_cleanup(&a->reasoning);
  air__buf_cleanup(&a->refusal);
  air__buf_cleanup(&a->finish_raw);
  air__buf_cleanup(&a->continued);
  for (size_t i = 0; i < a->n_tools; i++) {
    free(a->tools[i].id);
    free(a->tools[i].name);
    air__buf_cleanup(&a->tools[i].args);
  }
  free(a->tools);
  memset(a, 0, sizeof(*a));
}

/* The tool call with OpenAI-style index idx into *out, created (with the
 * calls before it) when new: 0, AIR_ETOOBIG for an index out of range, or
 * AIR_ENOMEM. */
static int tool_at(air__aggregate *a, int idx, air__tool_call **out) {
  if (idx < 0 || idx >= AIR__DECODER_MAX_TOOLS) return AIR_ETOOBIG;
  if ((size_t)idx >= a->n_tools) {
    air__tool_call *t = realloc(a->tools, (size_t)(idx + 1) * sizeof(*t));
    if (t == NULL) return AIR_ENOMEM;
    a->tools = t;
    for (size_t i = a->n_tools; i <= (size_t)idx; i++) {
      memset(&t[i], 0, sizeof(t[i]));
      air__buf_init(&t[i].args, AGG_MAX);
    }
    a->n_tools = (size_t)idx + 1;
  }
  *out = &a->tools[idx];
  return 0;
}

/* Identifiers over AIR__MAX_IDENT_BYTES are replaced (a->idents); a tool
 * name or finish reason over its limit is AIR_ETOOBIG (the decoders make
 * such an event malformed first). */
int air__aggregate_add(air__aggregate *a, const air_part *in) {
  air_part tmp;
  char sub[AIR__TOOL_ID_SUB_BYTES];
  const air_part *p = air__ident_fix(in, &a->idents, &tmp, sub);
  switch (p->kind) {
    case AIR_PART_START: {
      if (a->keep_ident) return 0;
      air__buf_reset(&a->id);
      air__buf_reset(&a->model);
      int rc = air__buf_add(&a->id, p->id, p->id_len);
      return rc != 0 ? rc : air__buf_add(&a->model, p->name, p->name_len);
    }
    case AIR_PART_TEXT:
      return air__buf_add(&a->text, p->text, p->text_len);
    case AIR_PART_REASONING:
      return air__buf_add(&a->reasoning, p->text, p->text_len);
    case AIR_PART_REFUSAL:
      return air__buf_add(&a->refusal, p->text, p->text_len);
    case AIR_PART_TOOL_START: {
      air__tool_call *t;
      int rc = tool_at(a, p->index, &t);
      if (rc != 0) return rc;
      if (p->name_len > AIR__MAX_TOOL_NAME_BYTES) return AIR_ETOOBIG;
      free(t->id);
      free(t->name);
      t->id = air__memdup0(p->id, p->id_len);
      t->name = air__memdup0(p->name, p->name_len);
      return t->id && t->name ? 0 : AIR_ENOMEM;
    }
    case AIR_PART_TOOL_DELTA: {
      air__tool_call *t;
      int rc = tool_at(a, p->index, &t);
      return rc != 0 ? rc : air__buf_add(&t->args, p->text, p->text_len);
    }
    case AIR_PART_FINISH:
      a->finish = p->finish;
      air__buf_reset(&a->finish_raw);
      return air__buf_add(&a->finish_raw, p->finish_raw, p->finish_raw_len);
    case AIR_PART_USAGE:
      a->input_tokens = air__sat_add(p->input_tokens, a->prior_input_tokens);
      a->output_tokens = air__sat_add(p->output_tokens, a->prior_output_tokens);
      a->has_usage = true;
      return 0;
    case AIR_PART_ERROR:
      return 0;
  }
  return 0;
}

/* ---- encoding
 * ------------------------------------------------------------------ */

void air__encoder_usage(air__encoder *e, const air_part *p) {
  e->input_tokens = p->input_tokens;
  e->output_tokens = p->output_tokens;
  e->has_usage = true;
}

int air__encoder_accept(air__encoder *e, const air_part *p,
                        air__set_ident_fn set_ident) {
  switch (p->kind) {
    case AIR_PART_USAGE:
      air__encoder_usage(e, p);
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
  if (!e->passthrough) return 1;
  e->started = true;
  if (p->kind == AIR_PART_FINISH) {
    e->finished = true;
    e->finish = p->finish;
  }
  return 0;
}

bool air__encoder_observe_parts(air__encoder *e, const air_part *parts,
                                size_t n, air__set_ident_fn set_ident) {
  bool now = false;
  for (size_t i = 0; i < n; i++) {
    const air_part *p = &parts[i];
    if (p->kind == AIR_PART_START && !e->observed) {
      set_ident(e, p->id, p->id_len, p->name, p->name_len);
      e->observed = now = true;
    } else if (p->kind == AIR_PART_FINISH) {
      e->finished = true;
      e->finish = p->finish;
    }
  }
  return now;
}

void air__unsupported_field(const char *message, char *out, size_t cap) {
  if (cap == 0) return;
  const char *end = strstr(message, AIR__NOT_SUPPORTED);
  size_t n = end ? (size_t)(end - message) : strlen(message);
  if (n >= cap) n = cap - 1;
  memcpy(out, message, n);
  out[n] = '\0';
}
