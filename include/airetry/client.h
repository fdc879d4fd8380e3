/*
 * airetry/client.h: the HTTP client: real upstream calls (libcurl on libuv).
 * Part of the public API; include <airetry.h>, the umbrella over them all.
 */
#ifndef AIRETRY_CLIENT_H
#define AIRETRY_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airetry/drive.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the client: real upstream calls ------------------------------------- */

/*
 * Process-wide setup of the HTTP stack (libcurl). Call once before the first
 * air_client_new or air_async_new, from one thread; air_global_cleanup at
 * exit. The only global state of the library.
 */
AIR_EXTERN int air_global_init(void);
AIR_EXTERN void air_global_cleanup(void);

/*
 * A client: providers and routes from a config, breaker/sticky state, and
 * `workers` threads each with one event loop and one connection pool
 * (libcurl multi on libuv). Every air_client_* call is thread-safe.
 */
typedef struct air_client air_client;
/* cfg must outlive the client. AIR_EINVAL, AIR_ENOMEM, or AIR_EIO when a
 * worker's event loop or thread cannot start; err says which. */
AIR_EXTERN int air_client_new(const air_config *cfg, unsigned workers,
                              air_client **out, air_error *err);
/*
 * Waits for the calls in flight to end, each as it would have (its own
 * deadlines bound it; trigger its cancel token to end it at once), then
 * frees the client. No call may start during or after it.
 */
AIR_EXTERN void air_client_free(air_client *c);

/* The outcome of one chat call. Free with air_chat_result_free. */
typedef struct air_chat_result {
  int status; /* 200, or the final HTTP status (504 timeouts, 502 network) */
  air_reason reason; /* NONE on success */
  char *body;        /* the response (or error) body in the caller's dialect */
  size_t body_len;
  char *text; /* the answer's text ("" on failure) */
  size_t text_len;
  air_finish finish;
  char *target;     /* the target of the last attempt */
  air_attempt *log; /* every attempt */
  size_t n_log;
  uint64_t first_content_ms; /* 0 when nothing was released */
  uint64_t total_ms;
} air_chat_result;
AIR_EXTERN void air_chat_result_free(air_chat_result *r);

/* Set size to sizeof(air_chat_opts) (AIR_CHAT_OPTS_INIT does). */
typedef struct air_chat_opts {
  size_t size;
  /* Each part after commit, in order. A failure after commit arrives as one
   * AIR_PART_ERROR part (name: the reason name, text: the message) and
   * nothing follows. Runs on a client worker thread; a non-zero return
   * cancels the call. NULL: the answer is held whole (commit: complete). */
  int (*on_part)(void *data, const air_part *p);
  void *data; /* passed to on_part */
  /* on_failed and on_commit run on a client worker thread, on_settled on
   * the calling thread just before air_client_chat returns; on_retry is
   * never called. May be NULL. */
  const air_observers *observers;
  air_cancel *cancel; /* may be NULL; may be triggered from any thread */
  /* With observers->on_span: a W3C traceparent value (NUL-terminated) the
   * call's spans continue, so they join the application's trace; NULL or
   * invalid: a new trace. Ignored without on_span. */
  const char *traceparent;
} air_chat_opts;
#define AIR_CHAT_OPTS_INIT \
  { .size = sizeof(air_chat_opts) }

/*
 * One chat call. body is a request in `dialect` (an OpenAI chat.completions
 * or Anthropic messages JSON body) whose "model" names a route or a
 * "provider/model". opts may be NULL (the answer held whole, no observers,
 * no cancel); with opts->on_part, parts stream to it under the route's
 * commit mode. Returns 0 (answered), AIR_EUPSTREAM (every attempt failed:
 * *out has the error body and log), AIR_ECANCELED, AIR_ENOTFOUND (unknown
 * model), AIR_EINVAL / AIR_EPARSE (bad request: *out->body holds the dialect
 * error). *out is set in every case but AIR_ENOMEM and invalid arguments
 * (a NULL argument, an unknown dialect, opts->size too small), which leave
 * it untouched. err (may be NULL) says why in every failing case.
 */
AIR_EXTERN int air_client_chat(air_client *c, air_dialect dialect,
                               const char *body, size_t len,
                               const air_chat_opts *opts, air_chat_result **out,
                               air_error *err);

#ifdef __cplusplus
}
#endif
#endif
