/*
 * The gateway's endpoints and what every one of them shares. request.c
 * routes a request (with client auth) to an endpoint file: chat_ep.c (the
 * chat endpoints, streamed or whole), plain_ep.c (the endpoints without a
 * stream), local_ep.c (those the gateway answers itself). Each builds its
 * answer with the helpers here (endpoint.c): response header fields, the
 * caller headers forwarded upstream, the error answer before any exchange,
 * and the access-log line (docs/design.md §5: one line per request,
 * rejected ones included), so every endpoint writes the same line shape.
 */
#ifndef AIR__GW_ENDPOINT_H
#define AIR__GW_ENDPOINT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gw_int.h"

/* ---- the endpoints ------------------------------------------------------- */

/* POST /v1/chat/completions, /v1/messages and /v1/responses through the
 * exchange, answered streamed or whole (chat_ep.c). Takes over cfg's
 * reference and finishes req. */
void air__gw_chat(air__gw_worker *w, air__http_req *req,
                  const air__http_request *msg, air_dialect dialect,
                  air__gw_cfg *cfg, const char *rid);
/* Writes the streamed events the worker's requests produced this loop turn
 * (chat_ep.c). */
void air__gw_flush(air__gw_worker *w);
/* POST /v1/embeddings (dialect OpenAI) and /v1/messages/count_tokens
 * (Anthropic) through the plain exchange (plain_ep.c). Takes over cfg's
 * reference and finishes req. */
void air__gw_plain(air__gw_worker *w, air__http_req *req,
                   const air__http_request *msg, air_dialect dialect,
                   air__gw_cfg *cfg, const char *rid);
/* GET /v1/responses/{id}: forwarded to the first openai_responses provider
 * (plain_ep.c). Takes over cfg's reference and finishes req. */
void air__gw_plain_retrieve(air__gw_worker *w, air__http_req *req,
                            const air__http_request *msg, air__gw_cfg *cfg,
                            const char *rid);
/* GET /v1/models: the route list in the caller's dialect (local_ep.c). */
void air__gw_models(air__http_req *req, const air__http_request *msg,
                    const air_config *cfg);
/* GET /metrics: the Prometheus exposition (local_ep.c). */
void air__gw_metrics(air__gw_worker *w, air__http_req *req);

/* ---- answering ----------------------------------------------------------- */

/* A response header; a NULL value is sent empty, never dereferenced. */
static inline air__http_field air__gw_field(const char *name,
                                            const char *value) {
  if (value == NULL) value = "";
  air__http_field f = {name, strlen(name), value, strlen(value)};
  return f;
}

/* content-type: application/json */
extern const air__http_field air__gw_json_ct;

/* A whole answer with one header, its content type. */
void air__gw_respond_text(air__http_req *req, int status, const char *ct,
                          const char *body, size_t n);
/* An error in the caller's dialect, before any exchange, with its log line
 * (rid NULL: none is known; the answer then carries no request id). */
void air__gw_respond_error(air__http_req *req, air_dialect dialect, int status,
                           air_reason reason, const char *message,
                           const char *rid);
/* The answer to an exchange that did not start (rc from its start): 404
 * for a model that is no route and no provider/model, else 503 naming
 * rc. */
void air__gw_respond_start_error(air__http_req *req, air_dialect dialect,
                                 int rc, const char *model, const char *rid);
/* The fields air__gw_error_parts writes at most. */
#define AIR__GW_ERROR_FIELDS 3
/*
 * What an error answer before any exchange is made of: logs its line
 * (outcome "rejected", no attempt), writes the body in the dialect into
 * body (initialised here, cleaned up by the caller) and, into f, the
 * header fields that follow content-type: x-should-retry: false, then
 * x-request-id and, for Anthropic callers, request-id (neither when rid is
 * NULL). Returns how many fields it wrote.
 */
size_t air__gw_error_parts(const air__http_request *msg, air_dialect dialect,
                           int status, air_reason reason, const char *message,
                           const char *rid, air__buf *body, air__http_field *f);

/* ---- forwarded caller headers -------------------------------------------- */

#define AIR__GW_MAX_FORWARD 32 /* caller headers forwarded upstream */

/* The caller headers named in forward_headers, as "Name: value" lines for
 * the upstream (the exchanges' `forward`). */
typedef struct air__gw_forward {
  air__buf buf;                               /* the lines' bytes */
  const char *lines[AIR__GW_MAX_FORWARD + 1]; /* into buf, NULL-terminated */
} air__gw_forward;

void air__gw_forward_init(air__gw_forward *f);
/* Collects them from msg: those present, in forward_headers' order, up to
 * AIR__GW_MAX_FORWARD and as many as AIR__MAX_FORWARD_BYTES holds. */
void air__gw_forward_collect(air__gw_forward *f, const air_config *cfg,
                             const air__http_request *msg);
void air__gw_forward_cleanup(air__gw_forward *f);

/* ---- the access-log line ------------------------------------------------- */

/* a line of one or two attempts is built without an allocation */
#define AIR__GW_LINE_STACK_BYTES 2048

/*
 * One request's log line, built in order: _begin (time and request id),
 * the endpoint's fields (air__buf_put* on b, each starting with ','),
 * _attempts, _outcome, more fields, then _end, which writes it. A line
 * over AIR__MAX_LOG_LINE_BYTES (a huge attempt log) is written without its
 * fields: time, request id, attempts_omitted, outcome and status. Lives
 * on the caller's stack (b may point into mem).
 */
typedef struct air__gw_line {
  air__buf b;
  const char *rid;
  char t[32]; /* the time, kept for the shortened line */
  char mem[AIR__GW_LINE_STACK_BYTES];
} air__gw_line;

/* {"time":"...","request_id":"..." (rid NULL: empty). A request id is
 * letters, digits, '-' and '_' (request.c makes them so): written as it
 * is, with nothing to escape. */
void air__gw_line_begin(air__gw_line *l, const char *rid);
/* ,"api":"<the dialect's name>" */
void air__gw_line_api(air__gw_line *l, air_dialect dialect);
/* ,"attempts":[...]: each attempt's target, then "outcome":"skipped" and
 * its field, or its hedge, continuation and prefill marks, reason (or
 * "outcome":"hedge_lost"), status, ms and wait_ms. */
void air__gw_line_attempts(air__gw_line *l, const air_attempt *log, size_t n);
/* ,"outcome":"...","status":N */
void air__gw_line_outcome(air__gw_line *l, const char *outcome, int status);
/* Closes the line, writes it (air__gw_log) and frees what it holds; n_log,
 * outcome and status are those of the shortened line. */
void air__gw_line_end(air__gw_line *l, size_t n_log, const char *outcome,
                      int status);

/* ---- clocks -------------------------------------------------------------- */

/* Milliseconds of the monotonic clock. */
uint64_t air__gw_mono_ms(void);
/* "YYYY-MM-DDThh:mm:ss.mmmZ" of now into t (at least 25 bytes). */
void air__gw_utc_now(char *t, size_t n);

#endif
