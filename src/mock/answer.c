/*
 * What the mock says (docs/mock.md "The answer"): the answer's tokens and
 * prefill, and the bytes of streams, whole bodies and error bodies in
 * either dialect. The regular events and bodies come from the provider
 * codecs (byte-exact dialect output); only the faults — error bodies, the
 * mid-stream error event, malformed events — and Anthropic's early
 * message_start are written here. Pure: no I/O.
 */
#include <stdlib.h>
#include <string.h>

#include "mock_int.h"
#include "provider.h"

#define LIT(s) s, sizeof(s) - 1

/* The answer text's maximum: the longest canonical answer fits. */
#define ANSWER_MAX_BYTES                                      \
  (AIR__MOCK_MAX_MODEL_BYTES + 4u + AIR__MOCK_MAX_TOKENS * 9u + \
   AIR__MOCK_MAX_TEXT_BYTES)

void air__mock_answer_init(air__mock_answer *a) {
  memset(a, 0, sizeof(*a));
  air__buf_init(&a->text, ANSWER_MAX_BYTES);
}

void air__mock_answer_cleanup(air__mock_answer *a) {
  air__buf_cleanup(&a->text);
  free(a->ends);
  memset(a, 0, sizeof(*a));
}

/* Token ends of text: a token starts at each space after a non-space. */
static size_t split(const char *s, size_t n, size_t *ends) {
  size_t k = 0;
  for (size_t i = 1; i < n; i++)
    if (s[i] == ' ' && s[i - 1] != ' ') {
      if (ends != NULL) ends[k] = i;
      k++;
    }
  if (n > 0) {
    if (ends != NULL) ends[k] = n;
    k++;
  }
  return k;
}

int air__mock_answer_build(air__mock_answer *a, const char *model, size_t m_n,
                           const air__mock_beh *b, const char *prefill,
                           size_t p_n) {
  air__buf_reset(&a->text);
  free(a->ends);
  a->ends = NULL;
  a->n = a->first = a->last = 0;
  a->prefill = false;
  int rc = 0;
  const char *src = NULL;
  if ((b->set & AIR__MOCK_K_REFUSAL) && b->refusal != NULL)
    src = b->refusal;
  else if ((b->set & AIR__MOCK_K_ANSWER) && b->answer != NULL)
    src = b->answer;
  if (src != NULL) {
    size_t n = strlen(src);
    rc = air__buf_add(&a->text, src, n);
    size_t k = split(src, n, NULL);
    a->ends = k ? malloc(k * sizeof(*a->ends)) : NULL;
    if (rc == 0 && k && a->ends == NULL) rc = AIR_ENOMEM;
    if (rc == 0) a->n = split(src, n, a->ends);
  } else {
    uint32_t tokens =
        (b->set & AIR__MOCK_K_TOKENS) ? b->tokens : AIR__MOCK_DEFAULT_TOKENS;
    a->ends = malloc(((size_t)tokens + 1) * sizeof(*a->ends));
    if (a->ends == NULL) return AIR_ENOMEM;
    rc = air__buf_addc(&a->text, '[');
    if (rc == 0) rc = air__buf_add(&a->text, model, m_n);
    if (rc == 0) rc = air__buf_addc(&a->text, ']');
    if (rc == 0) a->ends[a->n++] = a->text.n;
    for (uint32_t i = 1; rc == 0 && i <= tokens; i++) {
      rc = air__buf_add(&a->text, LIT(" w"));
      if (rc == 0) rc = air__buf_addu(&a->text, i);
      if (rc == 0) a->ends[a->n++] = a->text.n;
    }
  }
  if (rc != 0) return rc;
  a->last = a->n;
  if ((b->set & AIR__MOCK_K_FINISH) && b->finish == AIR_FINISH_LENGTH &&
      a->n > 0)
    a->last = a->n / 2 > 0 ? a->n / 2 : 1;
  if (prefill != NULL && p_n > 0 && p_n <= a->text.n &&
      memcmp(a->text.p, prefill, p_n) == 0) {
    a->prefill = true;
    size_t i = 0;
    /* ends is NULL only with n == 0 (split() counts the same twice).
     * NOLINTNEXTLINE(clang-analyzer-core.NullDereference) */
    while (i < a->n && a->ends[i] < p_n) i++;
    /* Token i is the first to end at or after the prefix's end: the
     * boundary after the prefix is its end. */
    a->first = i + 1;
    if (a->first > a->last) a->first = a->last;
  }
  return 0;
}

/* Appends a content value's text: a string, or the text of its text
 * parts / blocks. */
static int add_content_text(const json_t *c, air__buf *out) {
  if (json_is_string(c))
    return air__buf_add(out, json_string_value(c), json_string_length(c));
  if (!json_is_array(c)) return 0;
  size_t i;
  const json_t *part;
  json_array_foreach(c, i, part) {
    const char *type = json_string_value(json_object_get(part, "type"));
    const json_t *t = json_object_get(part, "text");
    if (type != NULL && strcmp(type, "text") == 0 && json_is_string(t)) {
      int rc = air__buf_add(out, json_string_value(t), json_string_length(t));
      if (rc != 0) return rc;
    }
  }
  return 0;
}

int air__mock_prefill_text(const json_t *body, air__buf *out) {
  const json_t *msgs = json_object_get(body, "messages");
  size_t n = json_array_size(msgs);
  if (n == 0) return 0;
  const json_t *last = json_array_get(msgs, n - 1);
  const char *role = json_string_value(json_object_get(last, "role"));
  if (role == NULL || strcmp(role, "assistant") != 0) return 0;
  air__buf_reset(out);
  int rc = add_content_text(json_object_get(last, "content"), out);
  if (rc != 0) return rc;
  return out->n > 0 ? 1 : 0;
}

/* ---- errors
 * ------------------------------------------------------------------- */

const char *air__mock_error_type(int status) {
  switch (status) {
    case 400:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 402:
      return "billing_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

static const char *default_message(int status) {
  switch (status) {
    case 400:
      return "Invalid request (airetry mock)";
    case 401:
      return "Invalid API key (airetry mock)";
    case 402:
      return "Your credit balance is too low (airetry mock)";
    case 403:
      return "Permission denied (airetry mock)";
    case 404:
      return "The model does not exist (airetry mock)";
    case 413:
      return "Request too large (airetry mock)";
    case 429:
      return "Rate limit exceeded (airetry mock)";
    case 503:
    case 529:
      return "Overloaded (airetry mock)";
    default:
      return status >= 500 ? "Internal server error (airetry mock)"
                           : "Request failed (airetry mock)";
  }
}

static int add_cstr(air__buf *out, const char *s) {
  return air__buf_add_json_str(out, s, strlen(s));
}

/* The error object's JSON (OpenAI: the value of "error"; Anthropic: the
 * whole body). */
static int error_json(air_dialect api, const char *type, const char *code,
                      const char *message, air__buf *out) {
  int rc;
  if (api == AIR_DIALECT_ANTHROPIC) {
    rc = air__buf_add(out, LIT("{\"type\":\"error\",\"error\":{\"type\":"));
    if (rc == 0) rc = add_cstr(out, type);
    if (rc == 0) rc = air__buf_add(out, LIT(",\"message\":"));
    if (rc == 0) rc = add_cstr(out, message);
    if (rc == 0) rc = air__buf_add(out, LIT("}}"));
    return rc;
  }
  rc = air__buf_add(out, LIT("{\"error\":{\"message\":"));
  if (rc == 0) rc = add_cstr(out, message);
  if (rc == 0) rc = air__buf_add(out, LIT(",\"type\":"));
  if (rc == 0) rc = add_cstr(out, type);
  if (rc == 0) rc = air__buf_add(out, LIT(",\"param\":null,\"code\":"));
  if (rc == 0)
    rc = code != NULL ? add_cstr(out, code) : air__buf_add(out, LIT("null"));
  if (rc == 0) rc = air__buf_add(out, LIT("}}"));
  return rc;
}

int air__mock_error_body(air_dialect api, int status, const char *code,
                         const char *message, air__buf *out) {
  return error_json(api, air__mock_error_type(status), code,
                    message != NULL ? message : default_message(status), out);
}

int air__mock_overload_event(air_dialect api, air__buf *out) {
  int rc = api == AIR_DIALECT_ANTHROPIC
               ? air__buf_add(out, LIT("event: error\ndata: "))
               : air__buf_add(out, LIT("data: "));
  if (rc == 0)
    rc = error_json(api, "overloaded_error", NULL, default_message(529), out);
  if (rc == 0) rc = air__buf_add(out, LIT("\n\n"));
  return rc;
}

int air__mock_malformed_event(air_dialect api, air__buf *out) {
  if (api == AIR_DIALECT_ANTHROPIC)
    return air__buf_add(out,
                        LIT("event: content_block_delta\ndata: {\"broken\n\n"));
  return air__buf_add(out, LIT("data: {\"broken\n\n"));
}
