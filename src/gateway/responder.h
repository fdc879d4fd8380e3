/*
 * The responder (docs/design.md §1): the gateway's response writing as a pure
 * function of the exchange's callbacks. Exchange callbacks in (commit,
 * released events, the end), response head and bytes out: the streamed
 * head at commit (with x-airetry-*), the events (raw upstream bytes when
 * the dialects match, re-encoded parts when they differ), the final error
 * event or the terminator; for a non-streamed caller the aggregate answer
 * as JSON, or the error body with the attempt log. It does no I/O: the
 * gateway (chat_ep.c) sends what it produces, and the simulator
 * (tests/sim) decodes it, so what the simulation checks is exactly what
 * callers receive.
 */
#ifndef AIR__RESPONDER_H
#define AIR__RESPONDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "exchange.h"
#include "limits.h"
#include "dialect.h"

#define AIR__RESP_MAX_HEADERS 7

/* A response header; both strings are NUL-terminated and valid until the
 * next responder call (or, for targets, during the exchange callback that
 * produced them). */
typedef struct air__resp_header {
  const char *name;
  const char *value;
} air__resp_header;

typedef enum air__resp_end {
  AIR__RESP_NONE,       /* not ended yet */
  AIR__RESP_ABORT,      /* cut the connection: no clean end is sent */
  AIR__RESP_STREAM_END, /* send out (the stream's last bytes), then end */
  AIR__RESP_WHOLE       /* send status, head and out as one response */
} air__resp_end;

typedef struct air__responder {
  air_dialect dialect;       /* the caller's */
  const air__request *req;   /* borrowed */
  const char *dropped;       /* x-airetry-dropped: tools the answering
                                target could not be given (borrowed from
                                req's canonical form), or NULL */
  const char *rid;           /* the request id (borrowed) */
  bool stream;               /* the caller asked for a stream */
  bool began;                /* the streamed head was produced */
  bool passthrough;          /* raw upstream events are forwarded */
  bool decided;              /* passthrough was decided (first event) */
  bool gone;                 /* set by the caller: the client left */
  bool lost;                 /* bytes of the answer could not be kept: never
                                reported as a success */
  bool observe;              /* a continuation may follow: passthrough events
                                are shown to the encoder (encoder_observe) */
  bool continued;            /* a continuation took the stream over */
  air__sse obs;              /* observe: re-reads a forwarded event */
  const air_part *obs_parts; /* the parts of the event being observed */
  size_t obs_n;
  air__encoder *enc;   /* from commit (began) on, else NULL */
  air__aggregate *agg; /* a whole answer's, when first needed */
  air__buf out;        /* bytes to send; the sender takes and resets
                          them (air__buf_reset) as it writes */
  air__buf held;       /* a Responses upstream's terminator event
                          (response.completed), sent at a good end */
  int status;          /* the head's status (log status at the end) */
  air__resp_header head[AIR__RESP_MAX_HEADERS];
  size_t n_head;
  air__resp_end end;
  const char *outcome; /* "ok", "error", "error_after_commit", "aborted" */
  char attempts[16];   /* header values */
  char retry_after[24];
  char upstream_rid[128]; /* an Anthropic upstream's request-id ("" none) */
  /* What replaces an upstream identifier over AIR__MAX_IDENT_BYTES
   * (dialect.h, "identifiers"): the request id in the caller dialect's
   * id form, the answering target's model; replaced: what was (AIR__IDENT_*
   * bits, set by air__responder_end for the log line). */
  char sub_id[AIR__MAX_NAME_BYTES];
  char sub_model[AIR__MAX_TARGET_BYTES];
  unsigned replaced;
} air__responder;

void air__responder_init(air__responder *rs, air_dialect dialect,
                         const air__request *req, const char *rid);
void air__responder_cleanup(air__responder *rs);

/* on_commit. Returns 1 when a streamed head must be sent now (status and
 * head; it may leave with the first bytes), else 0. created_s: the answer's
 * time for the encoder. */
int air__responder_commit(air__responder *rs, const air__commit_info *ci,
                          uint64_t created_s);
/* on_event: appends a streamed event's bytes to out, or adds a
 * non-streamed one's parts to the answer. Returns 1 when the answer just
 * became lost (the caller must cancel the exchange), else 0. */
int air__responder_event(air__responder *rs, const air__gate_event *ev);
/* on_end: sets end, status, head (AIR__RESP_WHOLE), out (the last or the
 * whole bytes) and outcome. Valid until the next call or cleanup. */
void air__responder_end(air__responder *rs, const air__exchange_result *res,
                        uint64_t created_s);
/* on_continue (docs/design.md §3.5): the encoder takes the caller's stream over
 * from the raw events (same id, block index, sequence numbers) and the end
 * will carry the continuation and the earlier attempt's usage; for a
 * non-streamed caller the aggregate does. Returns 1 when the answer just
 * became lost (the caller must cancel the exchange), else 0. */
int air__responder_continue(air__responder *rs, const air__continue_info *ci);
/* on_keepalive: appends a keep-alive in the caller's dialect to out (a
 * streamed caller whose head was sent only). */
void air__responder_keepalive(air__responder *rs);

#endif
