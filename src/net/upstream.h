/*
 * One attempt's HTTP conversation with its upstream, as the streamed
 * exchange (exchange.h) and the plain exchange (plain.h) both hold it:
 *
 * - the request: its header lines (ours, the provider's, the caller's
 *   forwarded ones, never one with CR or LF) and its URL, handed to the
 *   transport (air__upstream_send);
 * - the response: its status and the headers kept from it;
 * - the attempt's failure, its strings copied, the upstream key redacted
 *   from them;
 * - the deadlines: one loop timer armed at the earliest of an exchange's
 *   due times (air__deadlines).
 *
 * Everything runs on the loop's thread; nothing is thread-safe.
 */
#ifndef AIR__UPSTREAM_H
#define AIR__UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airetry.h"
#include "buf.h"
#include "loop.h"
#include "policy.h"
#include "transport.h"

/* ---- the attempt --------------------------------------------------------- */

typedef struct air__upstream {
  const char *key; /* the attempt's upstream key, or NULL: redacted from
                      every failure string */
  air_header *hv;  /* the response headers kept (inside kept) */
  size_t n_hv;
  int status;       /* the response's status, 0 before its head */
  bool have_fail;   /* fail is set */
  air_failure fail; /* the attempt's failure, strings inside strs */
  air__buf kept;    /* copies of the response headers, then hv */
  air__buf strs;    /* the failure's strings */
} air__upstream;

/* An empty attempt (buffers bounded by limits.h); air__upstream_cleanup
 * frees what it holds. */
void air__upstream_init(air__upstream *u);
void air__upstream_cleanup(air__upstream *u);

/* A new attempt: no status, no headers kept, no failure. */
void air__upstream_begin(air__upstream *u);

/* u->key for an attempt on provider p (read at config load, config.h):
 * returns 0, or 1 with the failure set (auth) when p names a key variable
 * that is not set. */
int air__upstream_key(air__upstream *u, const air__provider *p);

/* Keeps copies of the response headers in u->hv: the first
 * AIR__MAX_KEPT_HEADERS, as many of them as AIR__MAX_KEPT_HEADER_BYTES
 * holds (none when out of memory). Valid until the next call or
 * air__upstream_begin. */
void air__upstream_keep_headers(air__upstream *u, const air_header *h,
                                size_t n);

/*
 * Sets the attempt's failure. The strings are copied into u->strs (which
 * is emptied first: strings kept by air__upstream_keep die), each
 * occurrence of u->key replaced by "[redacted]": an upstream that echoes
 * the key it got (in a 401 message, say) must not leak it to callers or
 * logs. The request id comes from the kept headers (x-request-id or
 * request-id, its first AIR__MAX_UPSTREAM_REQUEST_ID_BYTES), which are the
 * failure's headers too.
 */
void air__upstream_fail(air__upstream *u, air_reason reason, int status,
                        const char *type, const char *code, const char *message,
                        air_transport_err transport);

/* Copies s into u->strs as air__upstream_fail does: the result is an
 * offset, NULL when s is NULL or it did not fit; air__upstream_str makes
 * it a pointer once nothing more is kept. */
const char *air__upstream_keep(air__upstream *u, const char *s);
const char *air__upstream_str(const air__upstream *u, const char *off);

/*
 * A piece of an error (non-2xx) response body: an error body is
 * diagnostic only, its first AIR__MAX_ERROR_BODY_BYTES are kept in body
 * for classification and the rest is dropped. Returns 0, or -1 with the
 * failure set (the status is the failure) when body cannot grow: the
 * transfer stops then.
 */
int air__upstream_error_piece(air__upstream *u, air__buf *body, const char *p,
                              size_t n);
/* The error response is complete: the failure is its status, with the
 * type, code and message its body gives (air__parse_error_body). */
void air__upstream_fail_error_body(air__upstream *u, const air__buf *body);

/* What one attempt sends: a POST of body (a GET when get) to the provider's
 * base_url (trailing slashes dropped) followed by path. */
typedef struct air__upstream_req {
  const air__provider *provider;
  const air__target *target; /* its connect_ms, and its name for the
                                transport */
  const char *path;
  const char *accept;         /* the Accept header's value */
  const char *traceparent;    /* the attempt's traceparent, or NULL: none
                                 (then the caller's is forwarded) */
  const char *const *forward; /* the caller's "Name: value" lines to
                                 forward, or NULL; those that carry
                                 credentials or HTTP framing never are */
  const char *body;           /* must outlive the transfer */
  size_t body_len;
  bool get;
} air__upstream_req;

/* Builds r's header lines and URL (the transport copies both) and starts
 * the transfer in *xfer. Returns 0 when it is in flight, or 1 with the
 * failure set: the request is over the size limits (air__upstream_too_big)
 * or the transfer could not start. No callback of cb fires inside. */
int air__upstream_send(air__upstream *u, const air__transport_if *tr,
                       const air__upstream_req *r, const air__xfer_cb *cb,
                       void **xfer);
/* The failure of a request that could not be built within its limits. */
void air__upstream_too_big(air__upstream *u);

/* ---- the deadlines ------------------------------------------------------- */

/*
 * One loop timer serving every deadline of an exchange. The owner keeps
 * its due times (on clock, 0 = off) and arms the timer at the earliest
 * (air__deadlines_arm). A timer armed for no later than that is left as
 * it is: it may fire early (a deadline moved later since), when the owner's
 * handler finds nothing due and arms again, but never late, and a deadline
 * moved on by every event costs no timer call.
 */
typedef struct air__deadlines {
  air__loop loop;
  const air_clock *clock;
  air__timer *timer;
  uint64_t armed; /* when the timer fires (clock's ms), 0: off */
} air__deadlines;

/* Makes the timer, which calls fire(arg). 0, or AIR_ENOMEM. */
int air__deadlines_open(air__deadlines *d, const air__loop *loop,
                        const air_clock *clock, air__timer_fn fire, void *arg);
/* Releases the timer: closed(arg) runs later, from the loop. */
void air__deadlines_close(air__deadlines *d, air__timer_fn closed, void *arg);
/* Arms the timer for next, the earliest due time (0: none, the timer
 * stops). */
void air__deadlines_arm(air__deadlines *d, uint64_t next);
/* Arms the timer for the next loop turn (now: the clock's time). */
void air__deadlines_soon(air__deadlines *d, uint64_t now);
void air__deadlines_stop(air__deadlines *d);
/* The timer fired: a one-shot, it is off now. */
static inline void air__deadlines_fired(air__deadlines *d) {
  d->armed = 0;
}

/* The earliest of next and the n due times (0 = off: none). */
static inline uint64_t air__due_min(const uint64_t *due, size_t n,
                                    uint64_t next) {
  for (size_t i = 0; i < n; i++)
    if (due[i] != 0 && (next == 0 || due[i] < next)) next = due[i];
  return next;
}

/* The index of the earliest of the n due times that has come by now and
 * is earlier than *best (0: none yet), which it becomes; -1 when none is
 * (the first of equal ones wins). */
int air__due_pick(const uint64_t *due, size_t n, uint64_t now, uint64_t *best);

#endif
