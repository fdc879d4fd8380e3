/*
 * Upstream HTTP: one libcurl multi handle driven by one libuv loop
 * (curl_multi_socket_action), so every transfer of a loop shares a bounded
 * keep-alive pool per host and HTTP/2 where the upstream offers it. The
 * transport only moves bytes: deadlines other than connect, decoding and
 * policy live in the exchange above it. Everything here runs on the loop's
 * thread; nothing is thread-safe.
 */
#ifndef AIR__TRANSPORT_H
#define AIR__TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "airetry.h"

typedef struct air__transport air__transport;
typedef struct air__xfer air__xfer;

typedef struct air__transport_opts {
  long max_host_connections;  /* transfers in flight per host (0: 4096) */
  long max_total_connections; /* 0: unlimited */
} air__transport_opts;

/* Creates a transport on loop. curl_global_init must have run (see
 * air_global_init). Returns 0, AIR_ENOMEM. */
int air__transport_new(uv_loop_t *loop, const air__transport_opts *o,
                       air__transport **out);
/*
 * Aborts every transfer (their on_done does not fire) and closes the uv
 * handles; the memory is freed once the loop has run their close callbacks.
 */
void air__transport_free(air__transport *t);

/* Returned by on_body to pause the transfer until air__xfer_resume. */
#define AIR__XFER_PAUSE 1

typedef struct air__xfer_cb {
  /* The response head is complete (also for error statuses). Header
   * pointers are valid during the call only. */
  void (*on_head)(void *data, int status, const air_header *h, size_t n);
  /* Body bytes as they arrive: 0 to go on, AIR__XFER_PAUSE to pause, any
   * other value aborts the transfer (on_done then reports AIR_ECANCELED). */
  int (*on_body)(void *data, const char *p, size_t n);
  /*
   * The transfer ended: rc 0 (complete), AIR_ECANCELED (on_body aborted),
   * or AIR_EIO with kind and a static message (connect failure, timeout on
   * connect, reset, closed early). Fires exactly once unless the transfer
   * was cancelled with air__xfer_cancel. The xfer is freed after it returns.
   */
  void (*on_done)(void *data, int rc, air_transport_err kind,
                  bool connect_timeout, const char *msg);
  void *data;
} air__xfer_cb;

typedef struct air__xfer_req {
  const char *url;
  const char *const *headers; /* "Name: value" lines, NULL-terminated */
  const char *body;           /* POST body: must outlive the transfer */
  size_t body_len;
  bool get;            /* a GET (no body) instead of the POST */
  uint64_t connect_ms; /* TCP + TLS connect deadline */
  /* The target ("provider/model") the transfer is for, valid during start
   * only; never sent. It names the attempt: a URL's host need not name its
   * provider (two providers may share a base_url). */
  const char *target;
} air__xfer_req;

/* Starts a POST (a GET when r->get). Returns 0 and sets *out, or AIR_ENOMEM /
 * AIR_EINVAL; on failure no callback fires. */
int air__xfer_start(air__transport *t, const air__xfer_req *r,
                    const air__xfer_cb *cb, air__xfer **out);
/* Aborts at once and closes the connection; no callback fires after it. */
void air__xfer_cancel(air__xfer *x);
/* Stops reading the response (backpressure); may be called from within
 * on_body, which has then consumed its bytes. */
void air__xfer_pause(air__xfer *x);
/* Resumes a paused transfer. */
void air__xfer_resume(air__xfer *x);

/*
 * The transport interface (docs/design.md §1): what the exchange needs of an
 * upstream, as an ops table over an implementation. libcurl's is
 * air__transport_curl (the functions above); the simulator's (tests/sim)
 * replays scripts on a virtual clock. Every implementation keeps the
 * contract of air__xfer_cb and the functions above: no callback fires from
 * inside start, cancel, pause or resume; on_done fires exactly once unless
 * the transfer was cancelled.
 */
typedef struct air__transport_ops {
  int (*start)(void *impl, const air__xfer_req *r, const air__xfer_cb *cb,
               void **xfer);
  void (*cancel)(void *impl, void *xfer);
  void (*pause)(void *impl, void *xfer);
  void (*resume)(void *impl, void *xfer);
} air__transport_ops;

typedef struct air__transport_if {
  const air__transport_ops *ops;
  void *impl;
} air__transport_if;

/* libcurl's implementation over t. */
air__transport_if air__transport_curl(air__transport *t);

#endif
