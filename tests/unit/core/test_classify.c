/* Unit tests for src/core/classify.c: one table row per classification case. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "airetry.h"
#include "classify.h"

typedef struct row {
  int status;
  const char *type;
  const char *code;
  const char *message;
  air_transport_err transport;
  air_reason want;
} row;

#define OK AIR_TRANSPORT_OK

static void run_rows(const row *rows, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const row *r = &rows[i];
    air_reason got =
        air__classify(r->status, r->type, r->code, r->message, r->transport);
    if (got != r->want)
      fail_msg(
          "row %zu (status %d, type %s, code %s, message %s): got %s, "
          "want %s",
          i, r->status, r->type ? r->type : "NULL", r->code ? r->code : "NULL",
          r->message ? r->message : "NULL", air_reason_name(got),
          air_reason_name(r->want));
  }
}

#define RUN(rows) run_rows(rows, sizeof rows / sizeof rows[0])

/* A transport error wins over everything a response might carry. */
static void test_transport_first(void **state) {
  (void)state;
  static const row rows[] = {
      {0, NULL, NULL, NULL, AIR_TRANSPORT_CONNECT, AIR_REASON_NETWORK},
      {0, NULL, NULL, NULL, AIR_TRANSPORT_CLOSED, AIR_REASON_NETWORK},
      {0, NULL, NULL, NULL, AIR_TRANSPORT_BADBODY, AIR_REASON_MALFORMED},
      {200, NULL, NULL, NULL, AIR_TRANSPORT_CLOSED, AIR_REASON_NETWORK},
      {429, "rate_limit_error", NULL, NULL, AIR_TRANSPORT_CLOSED,
       AIR_REASON_NETWORK},
      {500, "overloaded_error", NULL, NULL, AIR_TRANSPORT_BADBODY,
       AIR_REASON_MALFORMED},
      {200, NULL, NULL, NULL, AIR_TRANSPORT_BADBODY, AIR_REASON_MALFORMED},
  };
  RUN(rows);
}

/* Every body type/code of the table, on a status that means something else. */
static void test_body_table(void **state) {
  (void)state;
  static const row rows[] = {
      {429, "insufficient_quota", "insufficient_quota",
       "You exceeded your "
       "current quota",
       OK, AIR_REASON_QUOTA},
      {429, NULL, "insufficient_quota", NULL, OK, AIR_REASON_QUOTA},
      {400, "billing_error", NULL, NULL, OK, AIR_REASON_QUOTA},
      {400, "rate_limit_error", NULL, NULL, OK, AIR_REASON_RATE_LIMIT},
      {400, "requests", "rate_limit_exceeded", NULL, OK, AIR_REASON_RATE_LIMIT},
      {400, "overloaded_error", NULL, NULL, OK, AIR_REASON_OVERLOADED},
      {400, "api_error", NULL, NULL, OK, AIR_REASON_SERVER_ERROR},
      {400, "server_error", NULL, NULL, OK, AIR_REASON_SERVER_ERROR},
      {400, "authentication_error", NULL, NULL, OK, AIR_REASON_AUTH},
      {400, "permission_error", NULL, NULL, OK, AIR_REASON_AUTH},
      {400, "invalid_request_error", "invalid_api_key", NULL, OK,
       AIR_REASON_AUTH},
      {400, "not_found_error", NULL, NULL, OK, AIR_REASON_NOT_FOUND},
      {400, "invalid_request_error", "model_not_found", NULL, OK,
       AIR_REASON_NOT_FOUND},
      {400, "invalid_request_error", "context_length_exceeded", "whatever", OK,
       AIR_REASON_CONTEXT_OVERFLOW},
      {200, NULL, "model_context_window_exceeded", NULL, OK,
       AIR_REASON_CONTEXT_OVERFLOW},
      {400, "invalid_request_error", "content_policy_violation", NULL, OK,
       AIR_REASON_CONTENT_FILTER},
      {400, "content_filter", NULL, NULL, OK, AIR_REASON_CONTENT_FILTER},
      {413, "request_too_large", NULL, NULL, OK, AIR_REASON_BAD_REQUEST},
      {500, "request_too_large", NULL, NULL, OK, AIR_REASON_BAD_REQUEST},
  };
  RUN(rows);
}

/* The body's error type decides over the HTTP status. */
static void test_body_wins_over_status(void **state) {
  (void)state;
  static const row rows[] = {
      {400, "overloaded_error", NULL, NULL, OK, AIR_REASON_OVERLOADED},
      {429, "insufficient_quota", NULL, NULL, OK, AIR_REASON_QUOTA},
      {429, "requests", "insufficient_quota", NULL, OK, AIR_REASON_QUOTA},
      {200, "overloaded_error", NULL, NULL, OK, AIR_REASON_OVERLOADED},
      {200, "rate_limit_error", NULL, NULL, OK, AIR_REASON_RATE_LIMIT},
      {200, "api_error", NULL, NULL, OK, AIR_REASON_SERVER_ERROR},
      {500, "authentication_error", NULL, NULL, OK, AIR_REASON_AUTH},
      {503, "rate_limit_error", NULL, NULL, OK, AIR_REASON_RATE_LIMIT},
      {0, "overloaded_error", NULL, NULL, OK, AIR_REASON_OVERLOADED},
      /* the code is read before the type */
      {429, "rate_limit_error", "insufficient_quota", NULL, OK,
       AIR_REASON_QUOTA},
  };
  RUN(rows);
}

/* Matching is exact and case-sensitive; unknown names fall to the status. */
static void test_body_exact(void **state) {
  (void)state;
  static const row rows[] = {
      {400, "Overloaded_Error", NULL, NULL, OK, AIR_REASON_BAD_REQUEST},
      {400, "overloaded_error ", NULL, NULL, OK, AIR_REASON_BAD_REQUEST},
      {400, "overloaded", NULL, NULL, OK, AIR_REASON_BAD_REQUEST},
      {400, "", "", "", OK, AIR_REASON_BAD_REQUEST},
      {429, "tokens", "something_new", NULL, OK, AIR_REASON_RATE_LIMIT},
      {500, "weird_error", NULL, NULL, OK, AIR_REASON_SERVER_ERROR},
  };
  RUN(rows);
}

/* invalid_request_error: decided by its message, else by the status. */
static void test_invalid_request(void **state) {
  (void)state;
  static const row rows[] = {
      {400, "invalid_request_error", NULL,
       "prompt is too long: 208310 tokens > 200000 maximum", OK,
       AIR_REASON_CONTEXT_OVERFLOW},
      {400, "invalid_request_error", NULL, "Prompt Is Too Long", OK,
       AIR_REASON_CONTEXT_OVERFLOW},
      {400, "invalid_request_error", NULL,
       "This model's maximum context length is 8192 tokens. However, your "
       "messages resulted in 9000 tokens.",
       OK, AIR_REASON_CONTEXT_OVERFLOW},
      {400, "invalid_request_error", NULL, "CONTEXT LENGTH exceeded", OK,
       AIR_REASON_CONTEXT_OVERFLOW},
      {400, "invalid_request_error", NULL,
       "input length and `max_tokens` exceed context limit: 197626 + 8192 > "
       "200000",
       OK, AIR_REASON_CONTEXT_OVERFLOW},
      {422, "invalid_request_error", NULL, "prompt is too long", OK,
       AIR_REASON_CONTEXT_OVERFLOW},
      /* the status decides otherwise */
      {400, "invalid_request_error", NULL, "messages: field required", OK,
       AIR_REASON_BAD_REQUEST},
      {400, "invalid_request_error", NULL, NULL, OK, AIR_REASON_BAD_REQUEST},
      {404, "invalid_request_error", NULL, "no such model", OK,
       AIR_REASON_NOT_FOUND},
      {401, "invalid_request_error", NULL, "bad key", OK, AIR_REASON_AUTH},
      {500, "invalid_request_error", NULL, "oops", OK, AIR_REASON_SERVER_ERROR},
      /* as a mid-stream event or with no status: a bad request */
      {200, "invalid_request_error", NULL, "oops", OK, AIR_REASON_BAD_REQUEST},
      {0, "invalid_request_error", NULL, NULL, OK, AIR_REASON_BAD_REQUEST},
      /* a near miss of the phrase does not count */
      {400, "invalid_request_error", NULL, "prompt is too", OK,
       AIR_REASON_BAD_REQUEST},
      {400, "invalid_request_error", NULL, "context", OK,
       AIR_REASON_BAD_REQUEST},
  };
  RUN(rows);
}

static void test_status_table(void **state) {
  (void)state;
  static const row rows[] = {
      {429, NULL, NULL, NULL, OK, AIR_REASON_RATE_LIMIT},
      {529, NULL, NULL, NULL, OK, AIR_REASON_OVERLOADED},
      {503, NULL, NULL, NULL, OK, AIR_REASON_OVERLOADED},
      {500, NULL, NULL, NULL, OK, AIR_REASON_SERVER_ERROR},
      {502, NULL, NULL, NULL, OK, AIR_REASON_SERVER_ERROR},
      {504, NULL, NULL, NULL, OK, AIR_REASON_SERVER_ERROR},
      {599, NULL, NULL, NULL, OK, AIR_REASON_SERVER_ERROR},
      {401, NULL, NULL, NULL, OK, AIR_REASON_AUTH},
      {403, NULL, NULL, NULL, OK, AIR_REASON_AUTH},
      {402, NULL, NULL, NULL, OK, AIR_REASON_QUOTA},
      {404, NULL, NULL, NULL, OK, AIR_REASON_NOT_FOUND},
      {400, NULL, NULL, NULL, OK, AIR_REASON_BAD_REQUEST},
      {400, NULL, NULL, "prompt is too long: 1 > 0", OK,
       AIR_REASON_CONTEXT_OVERFLOW},
      {400, NULL, NULL, "some other problem", OK, AIR_REASON_BAD_REQUEST},
      {413, NULL, NULL, "prompt is too long", OK, AIR_REASON_BAD_REQUEST},
      {405, NULL, NULL, NULL, OK, AIR_REASON_BAD_REQUEST},
      {408, NULL, NULL, NULL, OK, AIR_REASON_BAD_REQUEST},
      {413, NULL, NULL, NULL, OK, AIR_REASON_BAD_REQUEST},
      {422, NULL, NULL, NULL, OK, AIR_REASON_BAD_REQUEST},
      {499, NULL, NULL, NULL, OK, AIR_REASON_BAD_REQUEST},
  };
  RUN(rows);
}

/* Failures without an error status: stream error events and no response. */
static void test_no_error_status(void **state) {
  (void)state;
  static const row rows[] = {
      {200, "something_new", NULL, "boom", OK, AIR_REASON_SERVER_ERROR},
      {200, NULL, NULL, NULL, OK, AIR_REASON_SERVER_ERROR},
      {0, NULL, NULL, NULL, OK, AIR_REASON_NETWORK},
      {0, "", "", "", OK, AIR_REASON_NETWORK},
      {0, "something_new", NULL, NULL, OK, AIR_REASON_SERVER_ERROR},
      {302, NULL, NULL, NULL, OK, AIR_REASON_SERVER_ERROR},
      {600, NULL, NULL, NULL, OK, AIR_REASON_SERVER_ERROR},
      {-1, NULL, NULL, NULL, OK, AIR_REASON_SERVER_ERROR},
  };
  RUN(rows);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_transport_first),
      cmocka_unit_test(test_body_table),
      cmocka_unit_test(test_body_wins_over_status),
      cmocka_unit_test(test_body_exact),
      cmocka_unit_test(test_invalid_request),
      cmocka_unit_test(test_status_table),
      cmocka_unit_test(test_no_error_status),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
