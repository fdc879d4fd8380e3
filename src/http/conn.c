/*
 * One client connection: reads into a bounded buffer, feeds the request
 * reader, hands complete requests to the handler one at a time, keeps
 * reading while a request is handled (so a disconnect is seen at once),
 * runs the idle / request / linger timers and closes.
 *
 * Lifetime: `refs` counts the two handles (tcp, timer) until their close
 * callbacks, the request while the handler holds it, and a guard around
 * every stretch that calls out to the handler. The connection is freed when
 * it drops to zero, so a handler may finish its request from anywhere,
 * including its disconnect callback, and never sees freed memory.
 *
 * Body accounting: `charged` is what this connection added to the
 * server's shared count of body bytes being read (srv->inflight): at the
 * head at most AIR__HTTP_BODY_RESERVE_BYTES of a declared Content-Length,
 * then the body's bytes as they come, so a client that declares a large
 * body and trickles it holds only what it sent plus one read. It is given
 * back (body_release) when the handler finishes the request, when a
 * request fails or the connection starts closing, and when the connection
 * is closed or freed while no handler holds the body.
 *
 * Read-ahead: while a request is handled, or its response drains before
 * the next one is read, at most AIR__HTTP_BUSY_READ_AHEAD_BYTES are
 * buffered (plus what the read that ended the request brought); then the
 * socket is not read until the connection is reading requests again.
 * stats->read_ahead counts the bytes of every connection's `in`.
 *
 * Output: stats->output_queued counts the bytes copied into write requests
 * until their write callback, bounded by max_output_queue_bytes. While
 * bytes are queued the timer runs as T_WRITE: each write_timeout_ms it
 * checks that some were sent since the last check, else the client is
 * taken as gone (it reads nothing) and the connection closed.
 *
 * Re-entrancy: handler callbacks (request, disconnect, drain) are only ever
 * called from libuv callbacks, never from inside a call the handler made.
 * So the next request of a keep-alive connection is started from the
 * timer (0 ms) or from the write callback, not from the terminal call.
 */
#include <stdlib.h>
#include <string.h>

#include "airetry.h"
#include "http_int.h"

/* What the one timer of a connection is counting. */
enum {
  T_NONE,
  T_IDLE,    /* keep-alive connection without a request: close */
  T_REQUEST, /* request not complete in time: 408 */
  T_NEXT,    /* 0 ms: go on with the next request (out of the handler) */
  T_WRITE,   /* queued output: close when it made no progress (see top) */
  T_LINGER,  /* last response sent: stop draining the client, close */
};

/* Unread buffers above this are freed once empty, not kept. */
#define AIR__HTTP_KEEP_IN_BYTES 16384

static void conn_process(air__http_conn *c);
static void conn_close(air__http_conn *c);

/* Brings stats->read_ahead in line with the bytes now in `in`. */
static void in_sync(air__http_conn *c) {
  size_t n = c->in.n;
  if (n > c->in_counted)
    atomic_fetch_add_explicit(&c->srv->stats->read_ahead, n - c->in_counted,
                              memory_order_relaxed);
  else if (n < c->in_counted)
    atomic_fetch_sub_explicit(&c->srv->stats->read_ahead, c->in_counted - n,
                              memory_order_relaxed);
  c->in_counted = n;
}

/* True while no request may be read: one is handled, or the previous
 * response drains first. */
static bool busy(const air__http_conn *c) {
  return (c->state == AIR__CONN_HANDLING && !c->hung) || c->wait_drain;
}

/* Bytes `in` may still take: up to max_pending_bytes between requests, up
 * to AIR__HTTP_BUSY_READ_AHEAD_BYTES while busy. */
static size_t in_room(const air__http_conn *c) {
  size_t max = busy(c) ? AIR__HTTP_BUSY_READ_AHEAD_BYTES : c->in.max;
  if (max > c->in.max) max = c->in.max;
  return c->in.n < max ? max - c->in.n : 0;
}

/* The write queue's timeout: write_timeout_ms, or idle_timeout_ms when it
 * is 0 (the last response of a connection is always bounded). */
static uint64_t flush_ms(const air__http_conn *c) {
  uint64_t ms = c->srv->cfg.write_timeout_ms;
  return ms ? ms : c->srv->cfg.idle_timeout_ms;
}

/* Adds n body bytes to the shared count unless that would pass the bound.
 * Returns true when they were added. */
static bool body_charge(air__http_conn *c, size_t n) {
  atomic_size_t *count = c->srv->inflight;
  size_t max = c->srv->cfg.max_inflight_body_bytes;
  if (max == 0) max = SIZE_MAX;
  size_t cur = atomic_load_explicit(count, memory_order_relaxed);
  do {
    if (n > max || cur > max - n) return false;
  } while (!atomic_compare_exchange_weak_explicit(
      count, &cur, cur + n, memory_order_relaxed, memory_order_relaxed));
  c->charged += n;
  return true;
}

/* Gives back every byte this connection counted. */
static void body_release(air__http_conn *c) {
  if (c->charged == 0) return;
  atomic_fetch_sub_explicit(c->srv->inflight, c->charged, memory_order_relaxed);
  c->charged = 0;
}

/* The reader's admit callback: a body growing to `total` bytes. */
static int body_admit(void *data, size_t total) {
  air__http_conn *c = data;
  if (total <= c->charged) return 0; /* reserved at the head */
  return body_charge(c, total - c->charged) ? 0 : AIR_ETOOBIG;
}

static void conn_free(air__http_conn *c) {
  air__http_server *s = c->srv;
  body_release(c);
  free(c->req.lazy_head);
  air__http_reader_cleanup(&c->rd);
  air__buf_cleanup(&c->in);
  in_sync(c);
  air__http_server_conn_freed(s, c);
  free(c);
}

static void unref(air__http_conn *c) {
  if (--c->refs == 0) conn_free(c);
}

static void notify(air__http_conn *c);

/* A write that failed inside a handler's call closed the connection: the
 * disconnect callback fires here, from the close callback. */
static void on_close(uv_handle_t *h) {
  air__http_conn *c = h->data;
  if (h == (uv_handle_t *)&c->tcp) notify(c);
  unref(c);
}

static void timer_cb(uv_timer_t *t);

/*
 * Arms the timer for `kind`. An idle or request timer already running is
 * left alone (the request deadline counts from the request's first byte,
 * not from the last read). ms == 0 disables idle and request timers.
 */
static void set_timer(air__http_conn *c, int kind, uint64_t ms) {
  if (c->state == AIR__CONN_CLOSED) return;
  if (kind == c->timer_kind && (kind == T_IDLE || kind == T_REQUEST)) return;
  uv_timer_stop(&c->timer);
  c->timer_kind = T_NONE;
  if (kind == T_NONE) return;
  if (ms == 0 && (kind == T_IDLE || kind == T_REQUEST || kind == T_WRITE))
    return;
  if (kind == T_WRITE) {
    c->wq_mark = uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp);
    c->wq_added = 0;
  }
  c->timer_kind = kind;
  uv_timer_start(&c->timer, timer_cb, ms, 0);
}

/* Fires the disconnect callback once, if the handler holds the request.
 * Every caller holds a reference (a handle or a guard) across the call. */
static void notify(air__http_conn *c) {
  c->gone = true;
  if (!c->held || c->notified) return;
  c->notified = true;
  if (c->req.on_disconnect == NULL) return;
  c->req.on_disconnect(c->req.disconnect_data, &c->req);
}

/* Closes both handles now. The tcp close callback comes after every
 * pending write and shutdown callback (cancelled). */
static void conn_close(air__http_conn *c) {
  if (c->state == AIR__CONN_CLOSED) return;
  c->state = AIR__CONN_CLOSED;
  c->timer_kind = T_NONE;
  if (!c->held) body_release(c); /* else when the handler finishes */
  if (c->reading) uv_read_stop((uv_stream_t *)&c->tcp);
  c->reading = false;
  uv_timer_stop(&c->timer);
  uv_close((uv_handle_t *)&c->timer, on_close);
  uv_close((uv_handle_t *)&c->tcp, on_close);
}

/* Resets the connection (RST): SO_LINGER {1, 0}, then close. */
static void conn_reset(air__http_conn *c) {
  if (c->state == AIR__CONN_CLOSED) return;
  c->state = AIR__CONN_CLOSED;
  c->timer_kind = T_NONE;
  if (c->reading) uv_read_stop((uv_stream_t *)&c->tcp);
  c->reading = false;
  uv_timer_stop(&c->timer);
  uv_close((uv_handle_t *)&c->timer, on_close);
  /* Fails only while a shutdown is pending (never here: shutdown is only
   * issued in CLOSING, after the request was released). */
  if (uv_tcp_close_reset(&c->tcp, on_close) != 0)
    uv_close((uv_handle_t *)&c->tcp, on_close);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  air__http_conn *c = h->data;
  (void)suggested;
  size_t want = AIR__HTTP_READ_BYTES;
  if (c->state == AIR__CONN_READING ||
      (c->state == AIR__CONN_HANDLING && !c->hung)) {
    size_t room = in_room(c);
    if (room < want) want = room;
  }
  buf->base = c->srv->slab;
  buf->len = want;
}

static void start_reading(air__http_conn *c);
static void conn_close_graceful(air__http_conn *c);

/* The client closed or reset the connection, or reading failed. */
static void conn_gone(air__http_conn *c) {
  c->gone = true;
  conn_close(c);
  notify(c);
}

static void read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  air__http_conn *c = st->data;
  if (nread == 0) return;
  c->refs++;
  if (nread == UV_ENOBUFS) {
    /* The read-ahead buffer is full: wait until it is parsed. */
    uv_read_stop(st);
    c->reading = false;
  } else if (nread == UV_EOF &&
             (c->state == AIR__CONN_READING || c->state == AIR__CONN_CLOSING) &&
             uv_stream_get_write_queue_size(st) > 0) {
    /* The client is done sending (a half-close) while a response is still
     * on its way: libuv stopped reading; send the rest, then close. */
    c->eof = true;
    c->reading = false;
    conn_close_graceful(c);
  } else if (nread < 0) {
    conn_gone(c);
  } else if (c->state == AIR__CONN_READING ||
             (c->state == AIR__CONN_HANDLING && !c->hung)) {
    /* alloc_cb bounded the read by the room left, so this fits. */
    if (air__buf_add(&c->in, buf->base, (size_t)nread) != 0) {
      conn_close(c);
    } else {
      in_sync(c);
      if (in_room(c) == 0) {
        uv_read_stop(st);
        c->reading = false;
      }
      if (c->state == AIR__CONN_READING) conn_process(c);
    }
  }
  /* CLOSING, or a hung request: the bytes are discarded. */
  unref(c);
}

static void start_reading(air__http_conn *c) {
  if (c->reading || c->eof || c->state == AIR__CONN_CLOSED) return;
  if (c->state != AIR__CONN_CLOSING && !c->hung && in_room(c) == 0) return;
  if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb) == 0)
    c->reading = true;
  else
    conn_close(c);
}

static void shutdown_cb(uv_shutdown_t *req, int status) {
  air__http_conn *c = req->data;
  if (c->state != AIR__CONN_CLOSING) return;
  if (status < 0 || c->eof || c->srv->cfg.linger_ms == 0)
    conn_close(c);
  else
    set_timer(c, T_LINGER, c->srv->cfg.linger_ms);
}

/*
 * Ends the connection politely after its last response: the write side is
 * shut down once every queued byte is sent, and the client's unread bytes
 * are drained for linger_ms so the kernel does not answer them with a RST
 * that could destroy the response before the client read it.
 */
static void conn_close_graceful(air__http_conn *c) {
  if (c->state == AIR__CONN_CLOSED || c->state == AIR__CONN_CLOSING) return;
  c->state = AIR__CONN_CLOSING;
  c->wait_drain = false;
  body_release(c); /* never held here: no request is read any more */
  air__http_reader_drop_body(&c->rd);
  air__buf_cleanup(&c->in);
  in_sync(c);
  c->in_off = 0;
  start_reading(c);
  if (c->state == AIR__CONN_CLOSED) return;
  set_timer(c, T_WRITE, flush_ms(c));
  c->shut.data = c;
  if (uv_shutdown(&c->shut, (uv_stream_t *)&c->tcp, shutdown_cb) != 0)
    conn_close(c);
}

/* T_WRITE fired: bytes sent since the last check keep the connection for
 * another period; none while some are queued mean the client reads
 * nothing, and it is taken as gone. */
static void write_check(air__http_conn *c) {
  size_t q = uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp);
  if (q > 0 && c->wq_mark + c->wq_added <= q) {
    atomic_fetch_add_explicit(&c->srv->stats->write_timeouts, 1,
                              memory_order_relaxed);
    conn_gone(c);
    return;
  }
  if (q > 0 || c->state == AIR__CONN_CLOSING)
    set_timer(c, T_WRITE, flush_ms(c));
}

static void timer_cb(uv_timer_t *t) {
  air__http_conn *c = t->data;
  int kind = c->timer_kind;
  c->timer_kind = T_NONE;
  c->refs++;
  switch (kind) {
    case T_IDLE:
    case T_LINGER:
      conn_close(c);
      break;
    case T_WRITE:
      write_check(c);
      break;
    case T_REQUEST:
      if (c->state == AIR__CONN_READING) {
        air__http_write_error(c, 408, "request not received in time");
        conn_close_graceful(c);
      }
      break;
    case T_NEXT:
      conn_process(c);
      break;
    default:
      break;
  }
  /* The reference taken above keeps c alive through conn_process, which
   * takes and drops its own; the analyzer cannot pair the counts.
   * NOLINTNEXTLINE(clang-analyzer-unix.Malloc) */
  unref(c);
}

/* Hands the complete request to the handler. */
static void dispatch(air__http_conn *c) {
  air__http_server *s = c->srv;
  const air__http_request *m = air__http_reader_msg(&c->rd);
  c->state = AIR__CONN_HANDLING;
  set_timer(c, T_NONE, 0);
  free(c->req.lazy_head);
  memset(&c->req, 0, sizeof(c->req));
  c->req.conn = c;
  c->req.head_only = air__http_str_eq(m->method, "HEAD");
  c->held = true;
  c->hung = false;
  c->notified = false;
  c->keep_alive = m->keep_alive && !s->stopping;
  c->refs++; /* the handler's */
  s->on_request(s->data, &c->req, m);
}

/*
 * A request's head is complete: the head hook may answer it, then its
 * declared body is reserved, then `100 Continue` is sent when asked for.
 * Returns false when the request was answered and the connection is
 * closing (nothing more is read).
 */
static bool head_admit(air__http_conn *c) {
  air__http_server *s = c->srv;
  const air__http_request *m = air__http_reader_msg(&c->rd);
  if (s->cfg.on_head != NULL) {
    air__http_head h = {c, false};
    s->cfg.on_head(s->data, &h, m);
    if (h.answered || c->state != AIR__CONN_READING) {
      conn_close_graceful(c);
      return false;
    }
  }
  size_t reserve = m->content_length < AIR__HTTP_BODY_RESERVE_BYTES
                       ? (size_t)m->content_length
                       : AIR__HTTP_BODY_RESERVE_BYTES;
  if (reserve > 0 && !body_charge(c, reserve)) {
    air__http_write_error(c, 503,
                          "server busy: too many request bodies being read, "
                          "retry later");
    conn_close_graceful(c);
    return false;
  }
  if (m->expect_continue) {
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    uv_buf_t b = air__http_buf(cont, sizeof(cont) - 1);
    air__http_conn_write(c, &b, 1, false);
  }
  return true;
}

/* Drops the bytes of `in` already parsed, frees a large empty buffer, or
 * any empty one while a request is handled: a long stream does not hold
 * its connection's read buffer (a held stream's memory is what a gateway
 * holds most of). */
static void compact(air__http_conn *c) {
  air__buf *b = &c->in;
  if (c->in_off == 0) return;
  if (c->in_off >= b->n) {
    if (b->cap > AIR__HTTP_KEEP_IN_BYTES || c->state == AIR__CONN_HANDLING)
      air__buf_cleanup(b);
    else
      air__buf_reset(b);
  } else {
    memmove(b->p, b->p + c->in_off, b->n - c->in_off);
    b->n -= c->in_off;
    b->p[b->n] = '\0';
  }
  c->in_off = 0;
  in_sync(c);
}

/*
 * Parses what was read, up to the end of one request, and dispatches it.
 * Runs only from libuv callbacks. Afterwards, while reading, it arms the
 * idle timer (nothing of a request yet) or the request timer.
 */
static void conn_process(air__http_conn *c) {
  if (c->processing) return;
  c->processing = true;
  c->refs++;
  bool again = false; /* after the head: feed again, even with no bytes */
  while (c->state == AIR__CONN_READING && !c->wait_drain) {
    size_t avail = c->in.n - c->in_off;
    if (avail == 0 && !again) break;
    size_t used = 0;
    air__http_event ev = air__http_reader_feed(
        &c->rd, avail ? c->in.p + c->in_off : NULL, avail, &used);
    c->in_off += used;
    if (ev == AIR__HTTP_MORE) break;
    if (ev == AIR__HTTP_HEAD) {
      again = true;
      if (!head_admit(c)) break;
      continue;
    }
    if (ev == AIR__HTTP_DONE) {
      dispatch(c);
      break;
    }
    air__http_write_error(c, c->rd.status, c->rd.error);
    conn_close_graceful(c);
    break;
  }
  if (c->state == AIR__CONN_READING || c->state == AIR__CONN_HANDLING) {
    compact(c);
    start_reading(c);
  }
  if (c->state == AIR__CONN_READING && c->timer_kind != T_NEXT) {
    if (air__http_reader_started(&c->rd))
      set_timer(c, T_REQUEST, c->srv->cfg.request_timeout_ms);
    else
      set_timer(c, T_IDLE, c->srv->cfg.idle_timeout_ms);
  }
  c->processing = false;
  unref(c);
}

static void write_cb(uv_write_t *w, int status);

/* A write request with the bytes it sends, in one allocation. */
typedef struct air__http_wreq {
  uv_write_t w;
  air__http_conn *c;
  size_t n; /* bytes counted in stats->output_queued */
  char data[];
} air__http_wreq;

/* Counts n more queued output bytes unless that would pass
 * max_output_queue_bytes. Returns true when they were counted. */
static bool output_charge(air__http_conn *c, size_t n) {
  atomic_size_t *count = &c->srv->stats->output_queued;
  size_t max = c->srv->cfg.max_output_queue_bytes;
  if (max == 0) max = SIZE_MAX;
  size_t cur = atomic_load_explicit(count, memory_order_relaxed);
  do {
    if (n > max || cur > max - n) {
      atomic_fetch_add_explicit(&c->srv->stats->output_refused, 1,
                                memory_order_relaxed);
      return false;
    }
  } while (!atomic_compare_exchange_weak_explicit(
      count, &cur, cur + n, memory_order_relaxed, memory_order_relaxed));
  return true;
}

static void write_failed(air__http_conn *c) {
  c->gone = true;
  conn_close(c);
  /* The disconnect callback fires from the tcp close callback path:
   * never from inside the handler's own call. */
}

int air__http_conn_write(air__http_conn *c, const uv_buf_t *bufs,
                         unsigned nbufs, bool capped) {
  if (c->state == AIR__CONN_CLOSED || c->gone) return AIR_ECANCELED;
  uv_stream_t *st = (uv_stream_t *)&c->tcp;
  size_t total = 0;
  for (unsigned i = 0; i < nbufs; i++) total += bufs[i].len;
  if (total == 0) return 0;
  size_t queued = uv_stream_get_write_queue_size(st);
  if (capped && (total > c->srv->cfg.max_queued_bytes ||
                 queued > c->srv->cfg.max_queued_bytes - total))
    return AIR_ETOOBIG;
  size_t sent = 0;
  if (queued == 0) {
    int r = uv_try_write(st, bufs, nbufs);
    if (r >= 0) {
      sent = (size_t)r;
    } else if (r != UV_EAGAIN && r != UV_ENOSYS) {
      write_failed(c);
      return AIR_ECANCELED;
    }
  }
  if (sent == total) return 0;
  if (!output_charge(c, total - sent)) {
    /* A streamed write is refused whole; any other, or one partly sent,
     * cannot be kept: the connection is cut there. */
    if (capped && sent == 0) return AIR_ETOOBIG;
    write_failed(c);
    return AIR_ETOOBIG;
  }
  air__http_wreq *w = malloc(sizeof(*w) + (total - sent));
  if (w == NULL) {
    atomic_fetch_sub_explicit(&c->srv->stats->output_queued, total - sent,
                              memory_order_relaxed);
    write_failed(c);
    return AIR_ENOMEM;
  }
  size_t at = 0, skip = sent;
  for (unsigned i = 0; i < nbufs; i++) {
    size_t len = bufs[i].len;
    if (skip >= len) {
      skip -= len;
      continue;
    }
    memcpy(w->data + at, bufs[i].base + skip, len - skip);
    at += len - skip;
    skip = 0;
  }
  w->c = c;
  w->n = at;
  uv_buf_t b = air__http_buf(w->data, at);
  if (uv_write(&w->w, st, &b, 1, write_cb) != 0) {
    atomic_fetch_sub_explicit(&c->srv->stats->output_queued, at,
                              memory_order_relaxed);
    free(w);
    write_failed(c);
    return AIR_ECANCELED;
  }
  c->wq_added += at;
  if (c->state == AIR__CONN_HANDLING && c->timer_kind == T_NONE)
    set_timer(c, T_WRITE, flush_ms(c));
  return 0;
}

static void write_cb(uv_write_t *w, int status) {
  air__http_wreq *wr = (air__http_wreq *)w;
  air__http_conn *c = wr->c;
  atomic_fetch_sub_explicit(&c->srv->stats->output_queued, wr->n,
                            memory_order_relaxed);
  free(wr);
  if (status == UV_ECANCELED) return; /* closing */
  c->refs++;
  if (status < 0) {
    conn_gone(c);
  } else if (c->state != AIR__CONN_CLOSED &&
             uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) == 0) {
    if (c->state == AIR__CONN_HANDLING && c->timer_kind == T_WRITE)
      set_timer(c, T_NONE, 0);
    if (c->held && !c->gone && c->req.want_drain) {
      c->req.want_drain = false;
      if (c->req.on_drain) c->req.on_drain(c->req.drain_data, &c->req);
    }
    if (c->wait_drain && c->state == AIR__CONN_READING) {
      c->wait_drain = false;
      conn_process(c);
    }
  }
  /* As in timer_cb: the reference taken above outlives conn_process.
   * NOLINTNEXTLINE(clang-analyzer-unix.Malloc) */
  unref(c);
}

void air__http_conn_finish(air__http_conn *c, int how) {
  c->held = false;
  body_release(c);        /* the handler is done with the body */
  free(c->req.lazy_head); /* a head never followed by bytes is not sent */
  c->req.lazy_head = NULL;
  c->req.lazy_n = 0;
  if (how == AIR__FINISH_HANG && c->state == AIR__CONN_HANDLING && !c->gone) {
    c->hung = true;
    start_reading(c); /* to see the client leave; bytes are discarded */
  } else if (how == AIR__FINISH_RESET) {
    conn_reset(c);
  } else if (c->state == AIR__CONN_HANDLING && !c->gone) {
    if (how == AIR__FINISH_DONE && c->keep_alive && !c->srv->stopping) {
      air__http_reader_next(&c->rd);
      c->state = AIR__CONN_READING;
      if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > 0) {
        /* The next request waits until this response is flushed; a
         * client that reads nothing is closed (T_WRITE). */
        c->wait_drain = true;
        set_timer(c, T_WRITE, flush_ms(c));
      } else {
        set_timer(c, T_NEXT, 0);
      }
    } else {
      conn_close_graceful(c);
    }
  }
  unref(c); /* the handler's */
}

void air__http_conn_accept(air__http_server *s) {
  air__http_conn *c = calloc(1, sizeof(*c));
  if (c == NULL) {
    s->accept_pending = true; /* retried when a connection is freed */
    return;
  }
  c->srv = s;
  air__http_reader_init(&c->rd, s->cfg.max_header_bytes, s->cfg.max_headers,
                        s->cfg.max_body_bytes);
  air__http_reader_set_admit(&c->rd, body_admit, c);
  air__buf_init(&c->in, s->cfg.max_pending_bytes);
  uv_tcp_init(s->loop, &c->tcp);
  uv_timer_init(s->loop, &c->timer);
  c->tcp.data = c;
  c->timer.data = c;
  c->refs = 2; /* the two handles */
  c->state = AIR__CONN_READING;
  c->next = s->conns;
  if (s->conns) s->conns->prev = c;
  s->conns = c;
  s->n_conns++;
  if (uv_accept((uv_stream_t *)s->listener, (uv_stream_t *)&c->tcp) != 0) {
    conn_close(c);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  if (s->n_conns - s->n_rejecting > s->cfg.max_connections) {
    c->rejecting = true;
    s->n_rejecting++;
    if (s->n_rejecting > AIR__HTTP_MAX_REJECTING) {
      conn_close(c);
      return;
    }
    air__http_write_error(c, 503, "too many connections");
    conn_close_graceful(c);
    return;
  }
  start_reading(c);
  set_timer(c, T_IDLE, s->cfg.idle_timeout_ms);
}

void air__http_conn_stop(air__http_conn *c) {
  if (c->state == AIR__CONN_CLOSED || c->state == AIR__CONN_CLOSING) return;
  c->keep_alive = false;
  if (c->state == AIR__CONN_READING && !air__http_reader_started(&c->rd) &&
      c->in.n == c->in_off) {
    if (c->wait_drain)
      conn_close_graceful(c); /* let the last response reach the client */
    else
      conn_close(c);
  }
}

void air__http_conn_force(air__http_conn *c) {
  c->refs++;
  conn_close(c);
  notify(c);
  unref(c);
}
