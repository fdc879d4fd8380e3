/*
 * Failure classification (docs/design.md §2.1): one failed attempt -> one
 * reason.
 *
 * Precedence, first match wins:
 *   1. the transport error (no usable response at all);
 *   2. the body's error code, then its error type, looked up in body_table
 *      (exact, case-sensitive, as the APIs send them);
 *      invalid_request_error is decided by its message (context overflow)
 *      or left to the status;
 *   3. the HTTP status, looked up in status_table;
 *   4. what is left: a failure on a non-error status (an error event on a
 *      200 stream, a status-less failure carrying a body error) is
 *      server_error; a status-less failure with nothing else is network.
 *
 * Pure: no allocation, no locale, no global state.
 */
#include <stddef.h>
#include <string.h>

#include "airetry.h"
#include "classify.h"

/* A body error type or code and the reason it means. */
typedef struct body_entry {
  const char *name;
  air_reason reason;
} body_entry;

static const body_entry body_table[] = {
    {"insufficient_quota", AIR_REASON_QUOTA},
    {"billing_error", AIR_REASON_QUOTA},
    {"rate_limit_error", AIR_REASON_RATE_LIMIT},
    {"rate_limit_exceeded", AIR_REASON_RATE_LIMIT},
    {"overloaded_error", AIR_REASON_OVERLOADED},
    {"api_error", AIR_REASON_SERVER_ERROR},
    {"server_error", AIR_REASON_SERVER_ERROR},
    {"authentication_error", AIR_REASON_AUTH},
    {"permission_error", AIR_REASON_AUTH},
    {"invalid_api_key", AIR_REASON_AUTH},
    {"not_found_error", AIR_REASON_NOT_FOUND},
    {"model_not_found", AIR_REASON_NOT_FOUND},
    {"context_length_exceeded", AIR_REASON_CONTEXT_OVERFLOW},
    {"model_context_window_exceeded", AIR_REASON_CONTEXT_OVERFLOW},
    {"content_policy_violation", AIR_REASON_CONTENT_FILTER},
    {"content_filter", AIR_REASON_CONTENT_FILTER},
    {"request_too_large", AIR_REASON_BAD_REQUEST},
};

/* The generic type whose meaning depends on the message. */
static const char invalid_request[] = "invalid_request_error";

/*
 * Message fragments (matched case-insensitively) that mark a request too big
 * for the model's context: Anthropic's "prompt is too long: N tokens > M
 * maximum" and "input length and `max_tokens` exceed context limit", OpenAI's
 * "This model's maximum context length is N tokens".
 */
static const char *const context_phrases[] = {
    "prompt is too long",
    "context length",
    "exceed context limit",
};

/* An inclusive HTTP status range and the reason it means. */
typedef struct status_entry {
  int lo;
  int hi;
  air_reason reason;
} status_entry;

/* Searched in order: the specific statuses before the ranges that hold them. */
static const status_entry status_table[] = {
    {429, 429, AIR_REASON_RATE_LIMIT},  {529, 529, AIR_REASON_OVERLOADED},
    {503, 503, AIR_REASON_OVERLOADED},  {401, 401, AIR_REASON_AUTH},
    {403, 403, AIR_REASON_AUTH},        {402, 402, AIR_REASON_QUOTA},
    {404, 404, AIR_REASON_NOT_FOUND},   {500, 599, AIR_REASON_SERVER_ERROR},
    {400, 499, AIR_REASON_BAD_REQUEST},
};

static int ascii_lower(int c) {
  return (c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c;
}

/* 1 when NUL-terminated hay contains needle, ASCII case-insensitively. */
static int contains_ci(const char *hay, const char *needle) {
  size_t nn = strlen(needle);
  for (const char *h = hay; *h != '\0'; h++) {
    size_t i = 0;
    while (i < nn && h[i] != '\0' &&
           ascii_lower((unsigned char)h[i]) ==
               ascii_lower((unsigned char)needle[i]))
      i++;
    if (i == nn) return 1;
    if (h[i] == '\0') return 0; /* hay is shorter than needle from here on */
  }
  return 0;
}

static int is_set(const char *s) {
  return s != NULL && s[0] != '\0';
}

/* The reason of a body type or code, or AIR_REASON_NONE when unknown. */
static air_reason body_reason(const char *s) {
  if (!is_set(s)) return AIR_REASON_NONE;
  for (size_t i = 0; i < sizeof body_table / sizeof body_table[0]; i++)
    if (strcmp(s, body_table[i].name) == 0) return body_table[i].reason;
  return AIR_REASON_NONE;
}

static int says_context_overflow(const char *message) {
  if (!is_set(message)) return 0;
  for (size_t i = 0; i < sizeof context_phrases / sizeof context_phrases[0];
       i++)
    if (contains_ci(message, context_phrases[i])) return 1;
  return 0;
}

static air_reason status_reason(int status) {
  for (size_t i = 0; i < sizeof status_table / sizeof status_table[0]; i++)
    if (status >= status_table[i].lo && status <= status_table[i].hi)
      return status_table[i].reason;
  return AIR_REASON_NONE;
}

air_reason air__classify(int status, const char *type, const char *code,
                         const char *message, air_transport_err transport) {
  switch (transport) {
    case AIR_TRANSPORT_CONNECT:
    case AIR_TRANSPORT_CLOSED:
      return AIR_REASON_NETWORK;
    case AIR_TRANSPORT_BADBODY:
      return AIR_REASON_MALFORMED;
    case AIR_TRANSPORT_OK:
      break;
  }

  /* The code is the more specific of the two (OpenAI sends type
   * "invalid_request_error" with code "context_length_exceeded"). */
  air_reason r = body_reason(code);
  if (r == AIR_REASON_NONE) r = body_reason(type);
  if (r != AIR_REASON_NONE) return r;

  int generic = (is_set(type) && strcmp(type, invalid_request) == 0) ||
                (is_set(code) && strcmp(code, invalid_request) == 0);
  if (generic && says_context_overflow(message))
    return AIR_REASON_CONTEXT_OVERFLOW;

  if (status == 400 && says_context_overflow(message))
    return AIR_REASON_CONTEXT_OVERFLOW;
  r = status_reason(status);
  if (r != AIR_REASON_NONE) return r;

  /* Not an error status: 0 (no response) or 1xx-3xx (an error event on a
   * 200 stream), or out of range. */
  if (generic) return AIR_REASON_BAD_REQUEST;
  if (status == 0 && !is_set(type) && !is_set(code)) return AIR_REASON_NETWORK;
  return AIR_REASON_SERVER_ERROR;
}
