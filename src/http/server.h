/*
 * A small HTTP/1.1 server on libuv + llhttp, shared by `airetry mock` and
 * `airetry serve`. It accepts connections, reads requests (reader.h) with
 * every limit of docs/design.md §4/8 enforced, hands each complete request
 * (head and whole body) to one handler callback and lets the handler answer
 * with a full body or a streamed one, or fail the connection on purpose (reset,
 * cut, hang) for fault injection.
 *
 * Threads: a server lives on the one uv_loop_t it was created with; every
 * function here must be called on that loop's thread, and a server never
 * starts a thread of its own. One loop serves thousands of connections; to
 * use more cores, run several servers, each on its own loop and thread,
 * with `reuseport` set and the same port (the kernel spreads connections
 * over them). The gateway does that: one server per worker thread
 * (src/gateway/gateway.c), all sharing one air_state, which locks.
 *
 * Auth before body (docs/design.md §5): when a request's head is complete, and
 * before any byte of its body is read or `100 Continue` is sent, the
 * optional head hook (air__http_config.on_head) may answer the request at
 * once (air__http_head_reject: `connection: close`, the body is never
 * read). Then the body is charged against the process-wide bound on the
 * bytes of request bodies being read (max_inflight_body_bytes, one counter
 * shared by every server of the process) as its bytes arrive: at the head
 * a declared Content-Length reserves at most AIR__HTTP_BODY_RESERVE_BYTES,
 * so a client that declares much and sends little holds only what it sent
 * plus one read. A request that would pass the bound gets 503 with
 * `retry-after: 1` and `connection: close`, the rest of its body unread.
 * The bytes are released when the handler finishes the request or the
 * connection closes.
 *
 * Connections: keep-alive; requests are handled strictly one at a time in
 * order (pipelined requests wait until the previous response has ended
 * and been flushed); the socket is read during a response, so a client
 * that goes away is seen at once (air__http_req_on_disconnect), but only
 * AIR__HTTP_BUSY_READ_AHEAD_BYTES of what it sends meanwhile are buffered:
 * past them the socket is not read until the response is done (a client
 * that leaves then is seen by the next write that fails, or at the end).
 *
 * Output: response bytes libuv cannot send at once are copied and queued;
 * the queue of one connection is bounded for streamed writes
 * (max_queued_bytes), and the queues of every server sharing `stats` by
 * max_output_queue_bytes (a streamed write past it is refused, any other
 * write past it closes the connection). A connection whose queue makes no
 * progress for write_timeout_ms (the client reads nothing) is closed; a
 * held request gets its disconnect callback.
 * Errors found by the server itself are answered with a small JSON body
 * {"error":{"message":"...","type":"invalid_request_error"}} ("server_error"
 * for 5xx) and `connection: close`:
 *   400 malformed request or smuggling pattern, 408 request not complete
 *   within request_timeout_ms of its first byte, 413 body too large,
 *   417 unsupported Expect, 431 head too large, 503 over max_connections
 *   or over max_inflight_body_bytes (with `retry-after: 1`), 505 HTTP
 *   version. A server whose config sets the error-body hook
 *   (air__http_config.error_body) sends the body the hook writes instead,
 *   so the user of the server answers in the shape its clients expect
 *   (the gateway: the dialect of the endpoint the request targets); the
 *   server itself knows no dialect. An idle keep-alive connection is
 *   closed after idle_timeout_ms without a response.
 */
#ifndef AIR__HTTP_SERVER_H
#define AIR__HTTP_SERVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "limits.h"
#include "reader.h"

/* Defaults of air__http_config (docs/design.md §4 `limits:`), and named maxima.
 */
#define AIR__HTTP_DEFAULT_MAX_BODY_BYTES ((size_t)AIR__DEFAULT_MAX_BODY_BYTES)
#define AIR__HTTP_DEFAULT_MAX_HEADER_BYTES 65536u
#define AIR__HTTP_DEFAULT_MAX_CONNECTIONS 10000u
#define AIR__HTTP_DEFAULT_IDLE_TIMEOUT_MS 75000u
#define AIR__HTTP_DEFAULT_REQUEST_TIMEOUT_MS 30000u
#define AIR__HTTP_DEFAULT_MAX_HEADERS 256u
#define AIR__HTTP_DEFAULT_MAX_PENDING_BYTES 1048576u /* read ahead */
#define AIR__HTTP_DEFAULT_WRITE_TIMEOUT_MS \
  ((uint64_t)AIR__DEFAULT_CLIENT_WRITE_TIMEOUT_MS)
#define AIR__HTTP_DEFAULT_MAX_OUTPUT_QUEUE_BYTES \
  ((size_t)AIR__DEFAULT_MAX_OUTPUT_QUEUE_BYTES)
#define AIR__HTTP_DEFAULT_MAX_QUEUED_BYTES \
  ((size_t)AIR__DEFAULT_MAX_QUEUED_BYTES)
#define AIR__HTTP_DEFAULT_LINGER_MS 2000u
#define AIR__HTTP_DEFAULT_SHUTDOWN_TIMEOUT_MS 30000u
#define AIR__HTTP_DEFAULT_MAX_INFLIGHT_BODY_BYTES \
  ((size_t)AIR__DEFAULT_MAX_INFLIGHT_BODY_BYTES)
#define AIR__HTTP_MAX_HOST_BYTES 255 /* the listen host literal */
#define AIR__HTTP_MAX_REJECTING 64   /* excess connections answered 503 */
#define AIR__HTTP_READ_BYTES 65536   /* one socket read */
/* Bytes a declared Content-Length reserves at the head: one read. */
#define AIR__HTTP_BODY_RESERVE_BYTES AIR__HTTP_READ_BYTES
/* Bytes read ahead of the next request while one is handled or its
 * response drains (a pipelining client's next request head fits). */
#define AIR__HTTP_BUSY_READ_AHEAD_BYTES 8192
#define AIR__HTTP_MAX_RESPONSE_HEAD_BYTES 65536 /* status line + headers */

typedef struct air__http_head air__http_head;

/*
 * The head hook: called once per request on the loop's thread, with the
 * server's `data`, when the head is complete and before any byte of the
 * body is read (or `100 Continue` sent). `head` holds the head only (its
 * body is empty); it and `h` are valid during the call only. Returning
 * without calling air__http_head_reject lets the request go on; the
 * handler still gets it once its body is read.
 */
typedef void (*air__http_head_cb)(void *data, air__http_head *h,
                                  const air__http_request *head);

/*
 * The error-body hook: called on the loop's thread, with the config's
 * error_body_data, when the server answers a request itself (the errors
 * listed at the top of this file). target: the request-target as far as
 * it was read (empty when none was). Returning true, the hook has written
 * the JSON body for status and message into out (an append that failed
 * stays in out's error: the answer is then not sent, as when the server's
 * own body does not fit); returning false, it wrote nothing and the
 * server's own body is sent. It must not call into the server.
 */
typedef bool (*air__http_error_body_cb)(void *data, air__str target, int status,
                                        const char *message, air__buf *out);

/*
 * Counters shared by the servers of a process (each field atomic; any
 * thread may read them, e.g. for /metrics).
 */
typedef struct air__http_stats {
  atomic_size_t read_ahead;            /* bytes read from clients, not parsed */
  atomic_size_t output_queued;         /* response bytes copied and queued */
  atomic_uint_fast64_t output_refused; /* writes refused or connections
                                          closed over max_output_queue_bytes */
  atomic_uint_fast64_t write_timeouts; /* connections closed: no output
                                          progress for write_timeout_ms */
} air__http_stats;

/* Sets every counter to zero. */
void air__http_stats_init(air__http_stats *st);

typedef struct air__http_config {
  const char *host; /* IPv4 or IPv6 literal ("::1" or "[::1]"); copied */
  int port;         /* 0: an ephemeral port (see air__http_server_port) */
  bool reuseport;   /* SO_REUSEPORT, for several servers on one port */
  int backlog;      /* listen(2) backlog */
  size_t max_body_bytes;
  size_t max_header_bytes;        /* request line + header fields, raw bytes */
  size_t max_headers;             /* header fields in one request */
  size_t max_connections;         /* open client connections; more get 503 */
  size_t max_pending_bytes;       /* bytes read and not yet parsed between
                                     requests (>= AIR__HTTP_READ_BYTES); while
                                     a request is handled at most
                                     AIR__HTTP_BUSY_READ_AHEAD_BYTES */
  size_t max_queued_bytes;        /* unsent response bytes per connection;
                                     a write past it fails with AIR_ETOOBIG */
  size_t max_output_queue_bytes;  /* queued response bytes, summed over
                                     every server sharing `stats`; 0: no
                                     bound */
  uint64_t write_timeout_ms;      /* queued output without progress for
                                     this long: close (0: idle_timeout_ms) */
  uint64_t idle_timeout_ms;       /* keep-alive connection without a request */
  uint64_t request_timeout_ms;    /* first byte of a request to its end */
  uint64_t linger_ms;             /* after the last response of a connection
                                     has been sent: how long to drain the
                                     client's unread bytes before closing, so
                                     an error response is not lost to a RST */
  uint64_t shutdown_timeout_ms;   /* stop: then connections are closed; 0:
                                     wait for every response */
  size_t max_inflight_body_bytes; /* bytes of request bodies being read,
                                     summed over every server that shares
                                     `inflight_body`; over it: 503. 0: no
                                     bound */
  atomic_size_t *inflight_body;   /* the shared count (its owner outlives the
                                     servers); NULL: the server's own */
  air__http_stats *stats;         /* shared counters (their owner outlives
                                     the servers); NULL: the server's own */
  air__http_head_cb on_head;      /* optional, see air__http_head_cb */
  air__http_error_body_cb error_body; /* optional, see
                                         air__http_error_body_cb */
  void *error_body_data;
} air__http_config;

/* Fills cfg with the defaults, listening on 127.0.0.1:8080. */
void air__http_config_init(air__http_config *cfg);

typedef struct air__http_server air__http_server;
typedef struct air__http_req air__http_req;

/*
 * Called once per complete request. `msg` (head and whole body) stays valid
 * until the request is finished. The handler (now or later, from any
 * callback on the loop) must finish every request it is given with exactly
 * one of the terminal calls: air__http_respond, air__http_end,
 * air__http_abort, air__http_reset or air__http_hang. A terminal call
 * releases `req` and `msg`: neither may be used after it.
 */
typedef void (*air__http_handler)(void *data, air__http_req *req,
                                  const air__http_request *msg);

/* Per-request notifications; `data` is the one given with the callback. */
typedef void (*air__http_req_cb)(void *data, air__http_req *req);

/* A response header; name and value are copied when sent. */
typedef struct air__http_field {
  const char *name;
  size_t name_n;
  const char *value;
  size_t value_n;
} air__http_field;

/* ---- server -------------------------------------------------------------- */

/*
 * Creates a server on `loop` (no I/O yet). cfg is copied. Returns 0,
 * AIR_EINVAL (bad host literal, port or limit) or AIR_ENOMEM.
 */
int air__http_server_new(uv_loop_t *loop, const air__http_config *cfg,
                         air__http_handler on_request, void *data,
                         air__http_server **out);

/*
 * Binds and listens. Returns 0, AIR_EIO (bind/listen failed; *uv_err, when
 * not NULL, receives the libuv error, e.g. UV_EADDRINUSE) or AIR_ESTATE
 * (already listening or stopped). On failure the server holds no handle
 * and may be freed at once or listened again.
 */
int air__http_server_listen(air__http_server *s, int *uv_err);

/*
 * Listens on fd, a socket already bound and listening (e.g. by a
 * supervisor process: docs/design.md §5, Supervision), instead of binding
 * cfg.host:cfg.port. The server takes fd over (it is closed with the
 * listener; a process that shares the socket keeps its own descriptor).
 * Returns as air__http_server_listen; fd is closed on failure too.
 */
int air__http_server_listen_fd(air__http_server *s, int fd, int *uv_err);

/*
 * Replaces the request limits (max_body_bytes, max_header_bytes,
 * max_headers, max_connections, idle_timeout_ms, request_timeout_ms,
 * write_timeout_ms, max_inflight_body_bytes, max_output_queue_bytes) by
 * those of cfg; other fields of cfg are ignored. Connections accepted
 * from now on read and get timed with the new limits; a connection
 * already open keeps its body and head limits, its next timer uses the
 * new timeouts. A zero limit keeps the old one. On the server's loop.
 */
void air__http_server_set_limits(air__http_server *s,
                                 const air__http_config *cfg);

/* The port bound by a successful listen (the ephemeral one for port 0). */
int air__http_server_port(const air__http_server *s);

/* Open client connections right now (including closing ones). */
size_t air__http_server_connections(const air__http_server *s);

/*
 * Stops: closes the listener at once, closes idle connections, lets
 * requests in progress finish (their responses carry connection: close),
 * and after shutdown_timeout_ms closes what is left (held requests get
 * their disconnect callback and must still be finished by the handler;
 * hung ones are released by the server). `on_stopped` fires once, from a
 * loop callback, when every connection and handle is closed; then the
 * server may be freed. Returns 0 or AIR_ESTATE (already stopping).
 */
int air__http_server_stop(air__http_server *s, void (*on_stopped)(void *data),
                          void *data);

/* Frees a server that never listened successfully or has stopped. */
void air__http_server_free(air__http_server *s);

/* ---- the head hook --------------------------------------------------------
 */

/*
 * From inside the head hook only: answers the request now with status
 * (400..599), the fields and a body of body_n bytes (copied), and
 * `connection: close`; its body is never read, no `100 Continue` is sent,
 * the handler never sees it, and the connection is closed once the answer
 * is sent. Fields as in air__http_respond. Returns 0; AIR_ESTATE (already
 * answered: nothing more is sent); AIR_EINVAL (a status outside 400..599:
 * a 500 is sent instead; a bad field: a plain JSON error with the status);
 * AIR_ETOOBIG (head too large: the same plain error); AIR_ECANCELED or
 * AIR_ENOMEM (the write failed: the connection is closed). In every case
 * the request is not read further.
 */
int air__http_head_reject(air__http_head *h, int status,
                          const air__http_field *fields, size_t n_fields,
                          const void *body, size_t body_n);

/* ---- the request a handler holds ----------------------------------------- */

/* The request's head and body (the handler's `msg`). */
const air__http_request *air__http_req_msg(const air__http_req *req);

/*
 * Sets the callback fired once, from a loop callback (never from inside a
 * call the handler makes), when the client closes or resets the connection
 * or a write to it fails, while the handler holds the request: before
 * anything was sent or while streaming. The request stays valid: the
 * handler still finishes it (every terminal call then just releases it and
 * returns AIR_ECANCELED). A client that half-closes (shuts down its
 * writing side) counts as gone. Replaces any previous callback.
 */
void air__http_req_on_disconnect(air__http_req *req, air__http_req_cb cb,
                                 void *data);

/*
 * Sets the callback fired, from a loop callback, each time the response
 * bytes queued in libuv drop to zero after a write left some queued (see
 * air__http_req_queued): producers pause on a high queue and resume here.
 */
void air__http_req_on_drain(air__http_req *req, air__http_req_cb cb,
                            void *data);

/* True once the client is gone (the disconnect callback fired or will). */
bool air__http_req_disconnected(const air__http_req *req);

/* Response bytes written to the connection but not yet sent by libuv
 * (uv_stream_get_write_queue_size). */
size_t air__http_req_queued(const air__http_req *req);

/* ---- answering ----------------------------------------------------------- */

/*
 * Terminal: sends status (200..599), the fields and a body of body_n
 * bytes (none for HEAD requests, 204 and 304). The server adds
 * content-length, date and connection: keep-alive or close; fields named
 * content-length, transfer-encoding or connection are skipped (the server
 * owns the framing). Returns 0; AIR_ECANCELED (client gone); AIR_EINVAL
 * (status, a name that is not a token, a value holding CR, LF or NUL: a
 * 500 is sent instead); AIR_ETOOBIG (head over
 * AIR__HTTP_MAX_RESPONSE_HEAD_BYTES: a 500 is sent instead); AIR_ESTATE (a
 * streamed response was begun: the connection is cut as by abort). In
 * every case the request is released.
 */
int air__http_respond(air__http_req *req, int status,
                      const air__http_field *fields, size_t n_fields,
                      const void *body, size_t body_n);

/*
 * Not terminal: sends the status line and fields of a response whose body
 * follows in air__http_write calls. length >= 0: exactly that many body
 * bytes follow (content-length); length < 0: chunked transfer encoding on
 * HTTP/1.1 (for text/event-stream), a body ended by closing the connection
 * on HTTP/1.0. Returns 0, AIR_ECANCELED, AIR_EINVAL (bad status or field:
 * nothing sent, the request is still held), AIR_ETOOBIG (head too large:
 * nothing sent), AIR_ESTATE (already begun).
 */
int air__http_begin(air__http_req *req, int status,
                    const air__http_field *fields, size_t n_fields,
                    int64_t length);

/*
 * The same for a streamed body (length -1), but the head is kept and sent
 * in one write with the first body bytes or the end: the caller must write
 * or end without waiting (a head never followed by either is not sent).
 */
int air__http_begin_lazy(air__http_req *req, int status,
                         const air__http_field *fields, size_t n_fields);

/*
 * Appends n bytes to the body begun by air__http_begin and flushes them
 * (one chunk when chunked; n == 0 does nothing). The bytes are copied.
 * Returns 0 (see air__http_req_queued for backpressure), AIR_ECANCELED,
 * AIR_ESTATE (not begun, or more bytes than the declared length),
 * AIR_ETOOBIG (the queue would pass max_queued_bytes: nothing written).
 */
int air__http_write(air__http_req *req, const void *p, size_t n);

/*
 * Terminal: ends the body begun by air__http_begin (the last chunk when
 * chunked). Returns 0; AIR_ECANCELED; AIR_ESTATE when nothing was begun (a
 * 500 is sent instead) or fewer bytes than the declared length were
 * written (the connection is cut as by abort).
 */
int air__http_end(air__http_req *req);
/* air__http_write of the last bytes and air__http_end in one write (a
 * chunked body's last chunk goes with them). Terminal; returns as they do
 * (a failed write cuts the response). */
int air__http_end_with(air__http_req *req, const void *p, size_t n);

/*
 * Terminal, fault injection: the response stops here unfinished (a
 * "stream cut"): bytes already written are flushed, then the connection
 * is closed without a last chunk or the rest of the declared length.
 */
void air__http_abort(air__http_req *req);

/* Terminal, fault injection: the connection is reset at once (TCP RST via
 * SO_LINGER {1, 0}); queued bytes are dropped. */
void air__http_reset(air__http_req *req);

/*
 * Terminal, fault injection: never answer. The connection stays open, is
 * still read (bytes are discarded) and is closed when the client closes it
 * or the server stops. No callback of this request fires after it.
 */
void air__http_hang(air__http_req *req);

#endif
