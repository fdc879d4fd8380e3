/*
 * The plain exchange: one caller request to an endpoint that has no stream
 * (docs/design.md §2.3 and 5: `POST /v1/embeddings`, `POST
 * /v1/messages/count_tokens`) driven to its end on a loop. Like the
 * exchange (exchange.h) it runs the engine over the route's targets, so
 * retries, failover, backoff, budgets, deadlines and the breaker are the
 * chat ones; unlike it there is no stream, no codec and no commit gate: the
 * caller's JSON body goes upstream with `model` replaced, and the first
 * complete 2xx JSON body is the answer.
 *
 * - Targets whose provider speaks another dialect than `api` are `skipped`
 *   (field: the endpoint's name); when every target is skipped the run
 *   fails with bad_request (400).
 * - Deadlines: `connect_ms` (transport), `first_byte_ms` from the attempt's
 *   start to the response head, and the attempt's deadline (`attempt_ms`,
 *   capped by `total_ms`) over the whole response. The body is bounded by
 *   `limits.max_response_bytes`; past it, or a 2xx body that is not a JSON
 *   object, the attempt fails with reason malformed.
 * - `record` false (count_tokens): the breaker is read, never written: a
 *   target whose breaker is not closed is passed over (tried only when no
 *   target is closed), no verdict is recorded, no probe lease is taken,
 *   no cooldown set, and no sticky state is read or written.
 *
 * Everything runs on the loop's thread; nothing is thread-safe.
 */
#ifndef AIR__PLAIN_H
#define AIR__PLAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "airetry.h"
#include "exchange.h"
#include "loop.h"
#include "transport.h"

typedef struct air__plain air__plain;

typedef struct air__plain_opts {
  const air_config *cfg;
  air_state *state;     /* may be NULL: no breaker */
  const char *model;    /* route or "provider/model" */
  air_dialect api;      /* the dialect every target must speak */
  const char *endpoint; /* "embeddings": the skipped field's name */
  const char *path;     /* appended to the provider's base_url; borrowed
                           until the end (every attempt reads it) */
  const char *body;     /* the caller's JSON object (read during
                           start); its "model" is replaced per target */
  size_t body_len;
  bool get; /* a GET of path with no body (body and the target's model
               unused): GET /v1/responses/{id} */
  const char *const *forward; /* "Name: value" lines for the upstream */
  bool record;                /* false: the breaker is read-only */
  const air_clock *clock;     /* NULL: the system clock */
} air__plain_opts;

/* The end. x is in the exchange's shape (responder.h writes its errors);
 * x.committed and x.first_content_ms are set when an answer came. The rest
 * is the answer (rc 0): valid during on_end only. */
typedef struct air__plain_result {
  air__exchange_result x;
  int status;       /* the answering response's status */
  const char *body; /* its body */
  size_t body_len;
  const air_header *headers; /* its headers */
  size_t n_headers;
} air__plain_result;

typedef struct air__plain_cb {
  /* After each failed or skipped attempt, once the policy decided. May be
   * NULL. */
  void (*on_failed)(void *data, const air_attempt *a);
  /* Exactly once, at the end (also after air__plain_cancel). */
  void (*on_end)(void *data, const air__plain_result *res);
  void *data;
} air__plain_cb;

/*
 * Starts the exchange. Returns 0 (on_end will fire exactly once, maybe
 * before this returns: every target skipped), or AIR_ENOTFOUND (unknown
 * model), AIR_EINVAL (no JSON object body), AIR_ENOMEM — then no callback
 * fires.
 */
int air__plain_start(uv_loop_t *loop, air__transport *t,
                     const air__plain_opts *o, const air__plain_cb *cb,
                     air__plain **out);
/* The same on any loop and transport (the simulator's). */
int air__plain_start_on(const air__loop *loop, const air__transport_if *tr,
                        const air__plain_opts *o, const air__plain_cb *cb,
                        air__plain **out);
/* A caller cancel: aborts the transfer, ends a wait; on_end fires (rc
 * AIR_ECANCELED) before this returns, unless it already fired. */
void air__plain_cancel(air__plain *p);
/* Frees the exchange; only after on_end fired. */
void air__plain_free(air__plain *p);

#endif
