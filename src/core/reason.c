/* Error strings and reason names: the vocabulary shared by every layer,
 * and the caller's error detail (error.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "airetry.h"
#include "error.h"

const char *air_version(void) {
  return AIR_VERSION;
}

const char *air_strerror(int err) {
  switch (err) {
    case AIR_OK:
      return "success";
    case AIR_ENOMEM:
      return "out of memory";
    case AIR_EINVAL:
      return "invalid argument";
    case AIR_ECONFIG:
      return "invalid config";
    case AIR_ETOOBIG:
      return "size limit exceeded";
    case AIR_ECANCELED:
      return "cancelled";
    case AIR_EUPSTREAM:
      return "every upstream attempt failed";
    case AIR_ENOTFOUND:
      return "not found";
    case AIR_EIO:
      return "I/O error";
    case AIR_EPARSE:
      return "parse error";
    case AIR_ESTATE:
      return "not allowed in this state";
    case AIR_ENOTSUP:
      return "the target cannot express the request";
    default:
      return "unknown error";
  }
}

/* Indexed by air_reason; the names used in config, logs, metrics, bodies. */
static const char *const reason_names[AIR_REASON__COUNT] = {
    [AIR_REASON_NONE] = "none",
    [AIR_REASON_RATE_LIMIT] = "rate_limit",
    [AIR_REASON_OVERLOADED] = "overloaded",
    [AIR_REASON_SERVER_ERROR] = "server_error",
    [AIR_REASON_NETWORK] = "network",
    [AIR_REASON_TIMEOUT_CONNECT] = "timeout.connect",
    [AIR_REASON_TIMEOUT_FIRST_BYTE] = "timeout.first_byte",
    [AIR_REASON_TIMEOUT_FIRST_CHUNK] = "timeout.first_chunk",
    [AIR_REASON_TIMEOUT_CHUNK] = "timeout.chunk",
    [AIR_REASON_TIMEOUT_ATTEMPT] = "timeout.attempt",
    [AIR_REASON_TIMEOUT_TOTAL] = "timeout.total",
    [AIR_REASON_CONTEXT_OVERFLOW] = "context_overflow",
    [AIR_REASON_CONTENT_FILTER] = "content_filter",
    [AIR_REASON_REFUSAL] = "refusal",
    [AIR_REASON_LENGTH] = "length",
    [AIR_REASON_AUTH] = "auth",
    [AIR_REASON_QUOTA] = "quota",
    [AIR_REASON_NOT_FOUND] = "not_found",
    [AIR_REASON_BAD_REQUEST] = "bad_request",
    [AIR_REASON_MALFORMED] = "malformed",
    [AIR_REASON_ABORTED] = "aborted",
};

const char *air_reason_name(air_reason r) {
  if ((int)r < 0 || r >= AIR_REASON__COUNT) return "unknown";
  return reason_names[r];
}

int air_reason_from_name(const char *name, size_t n, air_reason *out) {
  if (name == NULL) return AIR_EINVAL;
  for (int i = 1; i < AIR_REASON__COUNT; i++) {
    if (strlen(reason_names[i]) == n && memcmp(reason_names[i], name, n) == 0) {
      if (out) *out = (air_reason)i;
      return 0;
    }
  }
  return AIR_ENOTFOUND;
}

bool air_part_is_content(const air_part *p) {
  switch (p->kind) {
    case AIR_PART_TEXT:
    case AIR_PART_REASONING:
    case AIR_PART_REFUSAL:
      return p->text_len > 0;
    case AIR_PART_TOOL_START:
    case AIR_PART_TOOL_DELTA:
      return true;
    default:
      return false;
  }
}

const char *air_finish_name(air_finish f) {
  switch (f) {
    case AIR_FINISH_STOP:
      return "stop";
    case AIR_FINISH_LENGTH:
      return "length";
    case AIR_FINISH_TOOL_CALLS:
      return "tool_calls";
    case AIR_FINISH_CONTENT_FILTER:
      return "content_filter";
    case AIR_FINISH_REFUSAL:
      return "refusal";
    case AIR_FINISH_CONTEXT:
      return "model_context_window_exceeded";
    case AIR_FINISH_PAUSE:
      return "pause_turn";
    default:
      return "";
  }
}

int air__error_set(air_error *err, int code, const char *fmt, ...) {
  if (err == NULL) return code;
  err->code = code;
  err->message[0] = '\0';
  if (code != 0 && fmt != NULL) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
  }
  return code;
}

int air__opts_copy(void *dst, size_t dst_size, const void *src, size_t min_size,
                   const char *name, air_error *err) {
  memset(dst, 0, dst_size);
  if (src == NULL) return air__error_set(err, AIR_EINVAL, "%s is NULL", name);
  size_t size;
  memcpy(&size, src, sizeof(size));
  if (size < min_size)
    return air__error_set(err, AIR_EINVAL,
                          "%s.size is %zu, below %zu: set it to sizeof(%s)",
                          name, size, min_size, name);
  memcpy(dst, src, size < dst_size ? size : dst_size);
  return 0;
}
