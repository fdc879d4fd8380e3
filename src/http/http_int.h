/*
 * Internals shared by server.c (listener, lifecycle), conn.c (one
 * connection: reading, timers, closing) and response.c (the answering API).
 * Nothing outside src/http includes this file.
 */
#ifndef AIR__HTTP_INT_H
#define AIR__HTTP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include <uv.h>

#include "buf.h"
#include "reader.h"
#include "server.h"

typedef struct air__http_conn air__http_conn;

/* How the body of the response in progress is framed. */
enum {
  AIR__RESP_NONE,    /* nothing sent yet */
  AIR__RESP_FIXED,   /* content-length: `left` bytes still due */
  AIR__RESP_CHUNKED, /* transfer-encoding: chunked */
  AIR__RESP_EOF,     /* HTTP/1.0 stream: ends when the connection closes */
};

struct air__http_req {
  air__http_conn *conn;
  air__http_req_cb on_disconnect;
  void *disconnect_data;
  air__http_req_cb on_drain;
  void *drain_data;
  int resp;        /* AIR__RESP_* */
  uint64_t left;   /* AIR__RESP_FIXED: body bytes still due */
  bool head_only;  /* HEAD request (or 204/304): body bytes are not sent */
  bool want_drain; /* a write left bytes queued: fire on_drain at zero */
  char
      *lazy_head; /* air__http_begin_lazy: the head, sent with the next bytes */
  size_t lazy_n;
};

/* What the head hook gets: the connection whose request head is complete. */
struct air__http_head {
  air__http_conn *conn;
  bool answered; /* air__http_head_reject was called */
};

/* Connection states. */
enum {
  AIR__CONN_READING,  /* reading a request (or idle between requests) */
  AIR__CONN_HANDLING, /* the handler holds a request (or hung it) */
  AIR__CONN_CLOSING,  /* last response flushing, then lingering */
  AIR__CONN_CLOSED,   /* uv_close issued, waiting for the close callbacks */
};

/* What a terminal call asks of the connection. */
enum {
  AIR__FINISH_DONE,  /* response complete: next request or close */
  AIR__FINISH_CUT,   /* response unfinished: flush, then close */
  AIR__FINISH_RESET, /* RST now */
  AIR__FINISH_HANG,  /* never answer; close when the client does */
};

struct air__http_conn {
  uv_tcp_t tcp;
  uv_timer_t timer;
  uv_shutdown_t shut;
  air__http_server *srv;
  air__http_conn *prev, *next; /* the server's list */
  air__http_reader rd;
  air__buf in;       /* read, not yet parsed: max_pending_bytes */
  size_t in_off;     /* bytes of `in` already parsed */
  air__http_req req; /* the one request being handled */
  int state;         /* AIR__CONN_* */
  int timer_kind;    /* see conn.c */
  unsigned refs;     /* 2 handles + held request + callback guards */
  bool held;         /* the handler holds req */
  bool hung;         /* the handler hung req */
  bool gone;         /* the client is gone or a write failed */
  bool notified;     /* the disconnect callback fired */
  bool keep_alive;   /* the current response keeps the connection */
  bool reading;      /* uv_read_start is active */
  bool eof;          /* the client half-closed: never read again */
  bool wait_drain;   /* the next request waits for the write queue */
  bool processing;   /* inside conn_process (no re-entry) */
  bool rejecting;    /* over max_connections: answered 503 */
  size_t charged;    /* body bytes counted in srv->inflight (see conn.c) */
  size_t in_counted; /* bytes of `in` counted in stats->read_ahead */
  size_t wq_mark;    /* write queue size at the last progress check */
  size_t wq_added;   /* bytes queued since that check */
};

struct air__http_server {
  uv_loop_t *loop;
  air__http_config cfg;
  char host[AIR__HTTP_MAX_HOST_BYTES + 1];
  struct sockaddr_storage addr;
  air__http_handler on_request;
  void *data;
  uv_tcp_t *listener; /* heap: a failed listen closes it on its own */
  uv_timer_t stop_timer;
  bool stop_timer_open;
  bool stopping;
  bool accept_pending; /* a connection waits for memory to accept it */
  int port;
  air__http_conn *conns;
  size_t n_conns;
  size_t n_rejecting;
  void (*on_stopped)(void *data);
  void *stopped_data;
  atomic_size_t *inflight; /* cfg.inflight_body, or &own_inflight */
  atomic_size_t own_inflight;
  air__http_stats *stats; /* cfg.stats, or &own_stats */
  air__http_stats own_stats;
  char *slab; /* AIR__HTTP_READ_BYTES: every read lands here */
  time_t date_at;
  char date[48]; /* the date header value for date_at */
};

/* A uv_buf_t over n bytes at p (libuv never writes through it here). */
static inline uv_buf_t air__http_buf(const void *p, size_t n) {
  uv_buf_t b;
  b.base = (char *)p;
  b.len = n;
  return b;
}

/* conn.c */
void air__http_conn_accept(air__http_server *s);
/* Server stopping: close if idle, else close after the current response. */
void air__http_conn_stop(air__http_conn *c);
/* Shutdown timeout: close now (a held request is told it is gone). */
void air__http_conn_force(air__http_conn *c);
/* Writes the bytes of bufs (copied when libuv cannot send them at once).
 * capped: fail with AIR_ETOOBIG past max_queued_bytes. Returns 0,
 * AIR_ETOOBIG, AIR_ENOMEM or AIR_ECANCELED (connection gone or failing). */
int air__http_conn_write(air__http_conn *c, const uv_buf_t *bufs,
                         unsigned nbufs, bool capped);
/* After a terminal call: releases the request, goes on as `how` says. */
void air__http_conn_finish(air__http_conn *c, int how);

/* response.c */
/* Writes an error response with a JSON body (the error-body hook's when
 * the config sets one and it takes the request) and connection: close; a
 * 503 also carries `retry-after: 1`. */
int air__http_write_error(air__http_conn *c, int status, const char *message);

/* server.c */
/* A connection was freed: unlink it and see whether stop is complete. */
void air__http_server_conn_freed(air__http_server *s, air__http_conn *c);
/* The current date header value (cached per second). */
const char *air__http_server_date(air__http_server *s);

#endif
