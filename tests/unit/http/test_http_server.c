/*
 * The HTTP/1.1 server layer (src/http): every test starts a server on
 * 127.0.0.1, port 0, in a background thread with its own uv loop, talks to
 * it with plain blocking sockets (every read bounded by SO_RCVTIMEO, every
 * wait by a deadline) and stops it, checking that the loop closes clean.
 *
 * The handler picks its behaviour from the path (see on_request).
 */
#include "helpers.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "server.h"

#define RCV_TIMEOUT_MS 3000
#define MAX_RESP_BYTES (16u << 20)

/* ---- time ---------------------------------------------------------------- */

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(unsigned ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- the server side ----------------------------------------------------- */

typedef struct fixture {
  /* owned by the server thread */
  uv_loop_t loop;
  uv_async_t stop_async;
  uv_timer_t timer; /* drives /stream and /slow */
  air__http_server *srv;
  air__http_req *timed; /* the request the timer works on */
  int timed_step;
  air__http_config cfg;
  pthread_t thread;
  bool started;
  /* shared, under mu */
  pthread_mutex_t mu;
  int port;
  bool ready;
  int listen_rc;
  int loop_close_rc;
  int requests;
  char method[16];
  char path[64];
  char query[64];
  size_t body_n;
  bool chunked;
  bool held; /* /hold or /stream-hold is being held */
  int disconnects;
  uint64_t disconnect_at;
  int end_after_disconnect_rc;
  size_t conns_at_stop;
  int bad; /* failed server-side checks */
  size_t drain_written;
  int drains, queued_seen;
  int heads;              /* head hook calls */
  size_t head_body_n;     /* body bytes the last head hook saw */
  atomic_size_t inflight; /* cfg.inflight_body when a test sets it */
  air__http_stats stats;  /* cfg.stats (every test) */
  int fill_rc;            /* /fill: the write that stopped it */
  size_t fill_written;    /* /fill: bytes written before it */
} fixture;

static void lock(fixture *f) {
  pthread_mutex_lock(&f->mu);
}
static void unlock(fixture *f) {
  pthread_mutex_unlock(&f->mu);
}

/* Checks on the server thread: counted, asserted by the test thread. */
#define CHECK_SRV(f, cond)                                                    \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf(stderr, "%s:%d: server check failed: %s\n", __FILE__, __LINE__, \
              #cond);                                                         \
      lock(f);                                                                \
      (f)->bad++;                                                             \
      unlock(f);                                                              \
    }                                                                         \
  } while (0)

static air__http_field field(const char *name, const char *value) {
  air__http_field fl = {name, strlen(name), value, strlen(value)};
  return fl;
}

static void on_disconnect_abort(void *data, air__http_req *req) {
  fixture *f = data;
  lock(f);
  f->disconnects++;
  f->disconnect_at = now_ms();
  unlock(f);
  CHECK_SRV(f, air__http_req_disconnected(req));
  /* Still valid here; a terminal call releases it. */
  int rc = air__http_respond(req, 200, NULL, 0, "late", 4);
  lock(f);
  f->end_after_disconnect_rc = rc;
  f->held = false;
  unlock(f);
}

static void on_timer(uv_timer_t *t) {
  fixture *f = t->data;
  air__http_req *req = f->timed;
  const air__http_request *m = air__http_req_msg(req);
  if (air__http_str_eq(m->path, "/slow")) {
    f->timed = NULL;
    air__http_respond(req, 200, NULL, 0, "slow", 4);
    return;
  }
  /* /stream: four events 100 ms apart, then the end */
  char ev[32];
  int n = snprintf(ev, sizeof(ev), "data: %d\n\n", ++f->timed_step);
  CHECK_SRV(f, (air__http_write(req, ev, (size_t)n)) == 0);
  if (f->timed_step == 4) {
    f->timed = NULL;
    CHECK_SRV(f, (air__http_end(req)) == 0);
    return;
  }
  uv_timer_start(&f->timer, on_timer, 100, 0);
}

#define DRAIN_TOTAL (8u << 20)
#define DRAIN_BLOCK (16u * 1024u) /* fits the client's buffer */

/* /drain: writes blocks until libuv queues some, then waits for on_drain. */
static void drain_more(void *data, air__http_req *req) {
  fixture *f = data;
  static const char block[DRAIN_BLOCK] = {0};
  while (f->drain_written < DRAIN_TOTAL) {
    CHECK_SRV(f, air__http_write(req, block, DRAIN_BLOCK) == 0);
    f->drain_written += DRAIN_BLOCK;
    if (air__http_req_queued(req) > 0) {
      lock(f);
      f->queued_seen++;
      unlock(f);
      return; /* resume in the drain callback */
    }
  }
  CHECK_SRV(f, air__http_end(req) == 0);
}

static void on_drain(void *data, air__http_req *req) {
  fixture *f = data;
  CHECK_SRV(f, air__http_req_queued(req) == 0);
  lock(f);
  f->drains++;
  unlock(f);
  drain_more(data, req);
}

static void on_request(void *data, air__http_req *req,
                       const air__http_request *m) {
  fixture *f = data;
  lock(f);
  f->requests++;
  snprintf(f->method, sizeof(f->method), "%.*s", (int)m->method.n, m->method.p);
  snprintf(f->path, sizeof(f->path), "%.*s", (int)m->path.n, m->path.p);
  snprintf(f->query, sizeof(f->query), "%.*s", (int)m->query.n, m->query.p);
  f->body_n = m->body.n;
  f->chunked = m->chunked;
  unlock(f);
  CHECK_SRV(f, air__http_req_msg(req) == m);

  air__str p = m->path;
  if (air__http_str_eq(p, "/hello")) {
    air__http_field fl[] = {field("content-type", "text/plain"),
                            field("Content-Length", "999"),
                            field("x-test", "yes")};
    CHECK_SRV(f, (air__http_respond(req, 200, fl, 3, "hello", 5)) == 0);
  } else if (air__http_str_eq(p, "/echo")) {
    char nh[16];
    snprintf(nh, sizeof(nh), "%zu", m->n_headers);
    const air__str *h = air__http_find_header(m, "x-in");
    char hv[64] = "";
    if (h) snprintf(hv, sizeof(hv), "%.*s", (int)h->n, h->p);
    air__http_field fl[] = {field("x-method", f->method),
                            field("x-chunked", m->chunked ? "1" : "0"),
                            field("x-headers", nh), field("x-in", hv)};
    CHECK_SRV(f,
              (air__http_respond(req, 200, fl, 4, m->body.p, m->body.n)) == 0);
  } else if (air__http_str_eq(p, "/slow") || air__http_str_eq(p, "/stream")) {
    CHECK_SRV(f, f->timed == NULL);
    f->timed = req;
    f->timed_step = 0;
    if (air__http_str_eq(p, "/stream")) {
      air__http_field fl[] = {field("content-type", "text/event-stream")};
      CHECK_SRV(f, (air__http_begin(req, 200, fl, 1, -1)) == 0);
      CHECK_SRV(f, (air__http_begin(req, 200, fl, 1, -1)) == AIR_ESTATE);
      on_timer(&f->timer);
    } else {
      uv_timer_start(&f->timer, on_timer, 50, 0);
    }
  } else if (air__http_str_eq(p, "/hold") ||
             air__http_str_eq(p, "/stream-hold")) {
    air__http_req_on_disconnect(req, on_disconnect_abort, f);
    if (air__http_str_eq(p, "/stream-hold")) {
      air__http_field fl[] = {field("content-type", "text/event-stream")};
      CHECK_SRV(f, (air__http_begin(req, 200, fl, 1, -1)) == 0);
      CHECK_SRV(f, (air__http_write(req, "data: 1\n\n", 9)) == 0);
    }
    lock(f);
    f->held = true;
    unlock(f);
  } else if (air__http_str_eq(p, "/drain")) {
    air__http_field fl[] = {field("content-type", "application/octet-stream")};
    CHECK_SRV(f, air__http_begin(req, 200, fl, 1, -1) == 0);
    char *huge = calloc(1, f->cfg.max_queued_bytes + 1);
    CHECK_SRV(f, air__http_write(req, huge, f->cfg.max_queued_bytes + 1) ==
                     AIR_ETOOBIG);
    free(huge);
    air__http_req_on_drain(req, on_drain, f);
    air__http_req_on_disconnect(req, on_disconnect_abort, f);
    f->drain_written = 0;
    drain_more(f, req);
  } else if (air__http_str_eq(p, "/fill")) {
    /* Streams 64 KiB blocks until a write fails, then holds. */
    static const char block[65536] = {0};
    air__http_req_on_disconnect(req, on_disconnect_abort, f);
    CHECK_SRV(f, air__http_begin(req, 200, NULL, 0, -1) == 0);
    int rc = 0;
    size_t n = 0;
    while (rc == 0 && n < (64u << 20)) {
      rc = air__http_write(req, block, sizeof(block));
      if (rc == 0) n += sizeof(block);
    }
    lock(f);
    f->fill_rc = rc;
    f->fill_written = n;
    f->held = true;
    unlock(f);
  } else if (air__http_str_eq(p, "/big")) {
    char *big = calloc(1, 4u << 20);
    CHECK_SRV(f, air__http_respond(req, 200, NULL, 0, big, 4u << 20) == 0);
    free(big);
  } else if (air__http_str_eq(p, "/lazy") ||
             air__http_str_eq(p, "/lazy-empty") ||
             air__http_str_eq(p, "/lazy-abort")) {
    air__http_field fl[] = {field("content-type", "text/event-stream")};
    CHECK_SRV(f, (air__http_begin_lazy(req, 200, fl, 1)) == 0);
    CHECK_SRV(f, (air__http_begin_lazy(req, 200, fl, 1)) == AIR_ESTATE);
    if (air__http_str_eq(p, "/lazy")) {
      CHECK_SRV(f, (air__http_write(req, "data: 1\n\n", 9)) == 0);
      CHECK_SRV(f, (air__http_end_with(req, "data: 2\n\n", 9)) == 0);
    } else if (air__http_str_eq(p, "/lazy-empty")) {
      CHECK_SRV(f, (air__http_end(req)) == 0);
    } else {
      air__http_abort(req);
    }
  } else if (air__http_str_eq(p, "/reset")) {
    air__http_reset(req);
  } else if (air__http_str_eq(p, "/hang")) {
    air__http_hang(req);
  } else if (air__http_str_eq(p, "/cut")) {
    CHECK_SRV(f, (air__http_begin(req, 200, NULL, 0, 100)) == 0);
    CHECK_SRV(f, (air__http_write(req, "0123456789", 10)) == 0);
    air__http_abort(req);
  } else if (air__http_str_eq(p, "/bad-header")) {
    air__http_field fl[] = {field("x-evil", "a\r\nset-cookie: x")};
    CHECK_SRV(f, (air__http_respond(req, 200, fl, 1, "x", 1)) == AIR_EINVAL);
  } else if (air__http_str_eq(p, "/fixed")) {
    CHECK_SRV(f, (air__http_begin(req, 200, NULL, 0, 6)) == 0);
    CHECK_SRV(f, (air__http_write(req, "abc", 3)) == 0);
    CHECK_SRV(f, (air__http_write(req, "defg", 4)) == AIR_ESTATE);
    CHECK_SRV(f, (air__http_write(req, "def", 3)) == 0);
    CHECK_SRV(f, (air__http_end(req)) == 0);
  } else {
    air__http_field fl[] = {field("content-type", "text/plain")};
    CHECK_SRV(f, (air__http_respond(req, 404, fl, 1, "nope", 4)) == 0);
  }
}

/* The head hook of the auth tests: `x-key: good` or a 401 at once. */
static void on_head(void *data, air__http_head *h, const air__http_request *m) {
  fixture *f = data;
  lock(f);
  f->heads++;
  f->head_body_n = m->body.n;
  unlock(f);
  const air__str *k = air__http_find_header(m, "x-key");
  if (k != NULL && air__http_str_eq(*k, "good")) return;
  static const char body[] = "{\"error\":{\"message\":\"bad key\"}}";
  air__http_field fl[] = {field("content-type", "application/json"),
                          field("connection", "keep-alive")};
  CHECK_SRV(f,
            air__http_head_reject(h, 401, fl, 2, body, sizeof(body) - 1) == 0);
  CHECK_SRV(f, air__http_head_reject(h, 401, fl, 2, body, sizeof(body) - 1) ==
                   AIR_ESTATE);
}

static void on_stopped(void *data) {
  fixture *f = data;
  uv_close((uv_handle_t *)&f->stop_async, NULL);
  uv_close((uv_handle_t *)&f->timer, NULL);
}

static void on_stop_async(uv_async_t *a) {
  fixture *f = a->data;
  lock(f);
  f->conns_at_stop = air__http_server_connections(f->srv);
  unlock(f);
  CHECK_SRV(f, (air__http_server_stop(f->srv, on_stopped, f)) == 0);
  CHECK_SRV(f, (air__http_server_stop(f->srv, on_stopped, f)) == AIR_ESTATE);
}

static void *server_main(void *arg) {
  fixture *f = arg;
  int rc = uv_loop_init(&f->loop);
  if (rc == 0) rc = uv_async_init(&f->loop, &f->stop_async, on_stop_async);
  f->stop_async.data = f;
  uv_timer_init(&f->loop, &f->timer);
  f->timer.data = f;
  if (rc == 0)
    rc = air__http_server_new(&f->loop, &f->cfg, on_request, f, &f->srv);
  if (rc == 0) rc = air__http_server_listen(f->srv, NULL);
  lock(f);
  f->listen_rc = rc;
  f->port = rc == 0 ? air__http_server_port(f->srv) : 0;
  f->ready = true;
  unlock(f);
  if (rc != 0) return NULL;
  uv_run(&f->loop, UV_RUN_DEFAULT);
  air__http_server_free(f->srv);
  f->loop_close_rc = uv_loop_close(&f->loop);
  return NULL;
}

/* Test config: small limits and timeouts. */
static void test_cfg(air__http_config *c) {
  air__http_config_init(c);
  c->host = "127.0.0.1";
  c->port = 0;
  c->max_body_bytes = 4096;
  c->max_header_bytes = 2048;
  c->idle_timeout_ms = 5000;
  c->request_timeout_ms = 5000;
  c->linger_ms = 200;
  c->shutdown_timeout_ms = 1000;
  c->max_queued_bytes = 1u << 20;
}

static void start(fixture *f) {
  f->started = true;
  assert_int_equal(pthread_create(&f->thread, NULL, server_main, f), 0);
  uint64_t until = now_ms() + 5000;
  for (;;) {
    lock(f);
    bool ready = f->ready;
    unlock(f);
    if (ready) break;
    assert_true(now_ms() < until);
    sleep_ms(2);
  }
  assert_int_equal(f->listen_rc, 0);
  assert_true(f->port > 0);
}

static int setup(void **state) {
  fixture *f = calloc(1, sizeof(*f));
  pthread_mutex_init(&f->mu, NULL);
  atomic_init(&f->inflight, 0);
  air__http_stats_init(&f->stats);
  test_cfg(&f->cfg);
  f->cfg.stats = &f->stats;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  if (f->started) {
    uv_async_send(&f->stop_async);
    pthread_join(f->thread, NULL);
    if (f->listen_rc == 0 && f->loop_close_rc != 0) {
      fprintf(stderr, "uv_loop_close: %s\n", uv_strerror(f->loop_close_rc));
      return -1;
    }
  }
  if (f->bad != 0) return -1;
  pthread_mutex_destroy(&f->mu);
  free(f);
  return 0;
}

/* ---- the client side ----------------------------------------------------- */

typedef struct client {
  int fd;
  char buf[65537]; /* one more for a NUL */
  size_t n;        /* unread bytes in buf */
} client;

typedef struct resp {
  int status;
  char head[8192];
  size_t head_n;
  char *body;
  size_t body_n;
  bool chunked;
  long long content_length;
} resp;

static void set_timeout(int fd, unsigned ms) {
  struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* rcvbuf > 0: a small receive buffer, so the server's writes back up. */
static client *dial_rcvbuf(int port, int rcvbuf) {
  client *c = calloc(1, sizeof(*c));
  c->fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(c->fd >= 0);
  if (rcvbuf > 0)
    setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(c->fd, (struct sockaddr *)&a, sizeof(a)), 0);
  set_timeout(c->fd, RCV_TIMEOUT_MS);
  return c;
}

static client *dial(int port) {
  return dial_rcvbuf(port, 0);
}

static void hangup(client *c) {
  if (c->fd >= 0) close(c->fd);
  free(c);
}

static void send_bytes(client *c, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
    assert_true(w > 0);
    p += w;
    n -= (size_t)w;
  }
}

static void send_str(client *c, const char *s) {
  send_bytes(c, s, strlen(s));
}

/* Reads more bytes into c->buf. Returns bytes read, 0 at EOF, -errno. */
static ssize_t fill(client *c) {
  if (c->n == sizeof(c->buf) - 1) return -ENOBUFS;
  ssize_t r = recv(c->fd, c->buf + c->n, sizeof(c->buf) - 1 - c->n, 0);
  if (r < 0) return -errno;
  c->n += (size_t)r;
  return r;
}

static void consume(client *c, size_t k) {
  memmove(c->buf, c->buf + k, c->n - k);
  c->n -= k;
}

/* Index just past the first "\r\n" in buf, or 0. */
static size_t line_end(const client *c) {
  for (size_t i = 0; i + 1 < c->n; i++)
    if (c->buf[i] == '\r' && c->buf[i + 1] == '\n') return i + 2;
  return 0;
}

static bool need(client *c, size_t k) {
  while (c->n < k)
    if (fill(c) <= 0) return false;
  return true;
}

/* Value of header `name` in r->head (case-insensitive), or NULL. */
static const char *hdr(const resp *r, const char *name, char *out,
                       size_t outn) {
  size_t nl = strlen(name);
  const char *p = strstr(r->head, "\r\n");
  while (p != NULL && p[2] != '\r') {
    p += 2;
    const char *e = strstr(p, "\r\n");
    if (e == NULL) break;
    if ((size_t)(e - p) > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
      const char *v = p + nl + 1;
      while (*v == ' ') v++;
      snprintf(out, outn, "%.*s", (int)(e - v), v);
      return out;
    }
    p = e;
  }
  return NULL;
}

static void resp_free(resp *r) {
  free(r->body);
  r->body = NULL;
}

/*
 * Reads one response; strictly decodes a chunked body. no_body: a HEAD
 * request. Returns 0, or -1 when the connection ended before it was whole.
 */
static int read_resp(client *c, resp *r, bool no_body) {
  memset(r, 0, sizeof(*r));
  r->body = malloc(MAX_RESP_BYTES);
  r->content_length = -1;
  size_t end = 0;
  for (;;) {
    for (size_t i = 0; i + 3 < c->n; i++)
      if (memcmp(c->buf + i, "\r\n\r\n", 4) == 0) {
        end = i + 4;
        break;
      }
    if (end) break;
    if (fill(c) <= 0) return -1;
  }
  assert_true(end < sizeof(r->head));
  memcpy(r->head, c->buf, end);
  r->head[end] = '\0';
  r->head_n = end;
  consume(c, end);
  assert_int_equal(sscanf(r->head, "HTTP/1.1 %d", &r->status), 1);
  char v[64];
  if (hdr(r, "transfer-encoding", v, sizeof(v))) {
    assert_string_equal(v, "chunked");
    r->chunked = true;
  }
  if (hdr(r, "content-length", v, sizeof(v))) r->content_length = atoll(v);
  if (no_body || r->status < 200 || r->status == 204 || r->status == 304)
    return 0;
  if (r->chunked) {
    assert_int_equal(r->content_length, -1);
    for (;;) {
      size_t le;
      while ((le = line_end(c)) == 0)
        if (fill(c) <= 0) return -1;
      char *endp;
      unsigned long size = strtoul(c->buf, &endp, 16);
      assert_true(endp == c->buf + le - 2); /* no extensions, valid hex */
      consume(c, le);
      if (size == 0) {
        if (!need(c, 2)) return -1;
        assert_memory_equal(c->buf, "\r\n", 2);
        consume(c, 2);
        return 0;
      }
      if (!need(c, size + 2)) return -1;
      assert_true(r->body_n + size <= MAX_RESP_BYTES);
      memcpy(r->body + r->body_n, c->buf, size);
      r->body_n += size;
      assert_memory_equal(c->buf + size, "\r\n", 2);
      consume(c, size + 2);
    }
  }
  if (r->content_length >= 0) {
    size_t want = (size_t)r->content_length;
    assert_true(want <= MAX_RESP_BYTES);
    while (r->body_n < want) {
      if (c->n == 0 && fill(c) <= 0) return -1;
      size_t k = c->n < want - r->body_n ? c->n : want - r->body_n;
      memcpy(r->body + r->body_n, c->buf, k);
      r->body_n += k;
      consume(c, k);
    }
    return 0;
  }
  for (;;) { /* until EOF */
    ssize_t got = fill(c);
    if (got < 0) return -1;
    memcpy(r->body + r->body_n, c->buf, c->n);
    r->body_n += c->n;
    c->n = 0;
    if (got == 0) return 0;
  }
}

/* Waits for EOF: returns 0 at EOF, -errno otherwise (unread data: -1). */
static int wait_eof(client *c) {
  for (;;) {
    ssize_t r = fill(c);
    if (r == 0) return c->n ? -1 : 0;
    if (r < 0) return (int)r;
  }
}

static void expect_error(client *c, int status) {
  resp r;
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_int_equal(r.status, status);
  char v[128];
  assert_non_null(hdr(&r, "connection", v, sizeof(v)));
  assert_string_equal(v, "close");
  assert_non_null(hdr(&r, "content-type", v, sizeof(v)));
  assert_string_equal(v, "application/json");
  r.body[r.body_n] = '\0';
  assert_non_null(strstr(r.body, "{\"error\":{\"message\":\""));
  assert_non_null(strstr(r.body, status >= 500
                                     ? "\"type\":\"server_error\"}}"
                                     : "\"type\":\"invalid_request_error\"}}"));
  resp_free(&r);
  assert_int_equal(wait_eof(c), 0);
}

static void get_ok(client *c, const char *path, const char *body) {
  char req[256];
  snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", path);
  send_str(c, req);
  resp r;
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_int_equal(r.status, 200);
  assert_int_equal(r.body_n, strlen(body));
  assert_memory_equal(r.body, body, r.body_n);
  resp_free(&r);
}

/* Polls cond under the lock until it holds or ms pass. */
#define WAIT_FOR(f, cond, ms)          \
  do {                                 \
    uint64_t until_ = now_ms() + (ms); \
    for (;;) {                         \
      lock(f);                         \
      bool ok_ = (cond);               \
      unlock(f);                       \
      if (ok_) break;                  \
      assert_true(now_ms() < until_);  \
      sleep_ms(1);                     \
    }                                  \
  } while (0)

/* ---- tests ----------------------------------------------------------------
 */

static void test_get(void **state) {
  fixture *f = *state;
  start(f);
  client *c = dial(f->port);
  send_str(c, "GET /hello?a=1&b HTTP/1.1\r\nHost: t\r\n\r\n");
  resp r;
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_int_equal(r.status, 200);
  assert_int_equal(r.content_length, 5);
  assert_memory_equal(r.body, "hello", 5);
  char v[128];
  assert_string_equal(hdr(&r, "connection", v, sizeof(v)), "keep-alive");
  assert_string_equal(hdr(&r, "x-test", v, sizeof(v)), "yes");
  assert_string_equal(hdr(&r, "content-type", v, sizeof(v)), "text/plain");
  assert_non_null(hdr(&r, "date", v, sizeof(v)));
  assert_non_null(strstr(v, " GMT"));
  /* the handler's own content-length was dropped: exactly one */
  assert_ptr_equal(
      strstr(strstr(r.head, "content-length") + 1, "content-length"), NULL);
  assert_non_null(strstr(r.head, "HTTP/1.1 200 OK\r\n"));
  resp_free(&r);
  lock(f);
  assert_string_equal(f->method, "GET");
  assert_string_equal(f->path, "/hello");
  assert_string_equal(f->query, "a=1&b");
  unlock(f);

  /* HEAD: the length of the body, no body */
  send_str(c, "HEAD /hello HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_int_equal(read_resp(c, &r, true), 0);
  assert_int_equal(r.status, 200);
  assert_int_equal(r.content_length, 5);
  resp_free(&r);
  get_ok(c, "/hello", "hello"); /* nothing stray was sent after the HEAD */

  /* 404 from the handler, then a fixed-length streamed body */
  send_str(c, "GET /nothing HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_int_equal(r.status, 404);
  resp_free(&r);
  get_ok(c, "/fixed", "abcdef");
  hangup(c);
}

static void test_post_content_length(void **state) {
  fixture *f = *state;
  start(f);
  client *c = dial(f->port);
  send_str(c,
           "POST /echo HTTP/1.1\r\nHost: t\r\nX-In:  spaced value \t\r\n"
           "Content-Length: 11\r\n\r\nhello world");
  resp r;
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_int_equal(r.status, 200);
  assert_int_equal(r.body_n, 11);
  assert_memory_equal(r.body, "hello world", 11);
  char v[64];
  assert_string_equal(hdr(&r, "x-method", v, sizeof(v)), "POST");
  assert_string_equal(hdr(&r, "x-chunked", v, sizeof(v)), "0");
  assert_string_equal(hdr(&r, "x-headers", v, sizeof(v)), "3");
  assert_string_equal(hdr(&r, "x-in", v, sizeof(v)), "spaced value");
  resp_free(&r);

  /* a body sent byte by byte */
  const char *req =
      "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nabcde";
  for (size_t i = 0; req[i]; i++) send_bytes(c, req + i, 1);
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_int_equal(r.body_n, 5);
  assert_memory_equal(r.body, "abcde", 5);
  resp_free(&r);
  hangup(c);
}

static void test_chunked_request(void **state) {
  fixture *f = *state;
  start(f);
  client *c = dial(f->port);
  send_str(
      c,
      "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
      "\r\n3\r\nabc\r\nA;ext=1\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n");
  resp r;
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_int_equal(r.status, 200);
  assert_int_equal(r.body_n, 13);
  assert_memory_equal(r.body, "abc0123456789", 13);
  char v[64];
  assert_string_equal(hdr(&r, "x-chunked", v, sizeof(v)), "1");
  resp_free(&r);
  get_ok(c, "/hello", "hello");
  hangup(c);
}

static void test_expect_continue(void **state) {
  fixture *f = *state;
  start(f);
  client *c = dial(f->port);
  send_str(c,
           "POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
           "Content-Length: 4\r\n\r\n");
  resp r;
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_int_equal(r.status, 100);
  assert_string_equal(r.head, "HTTP/1.1 100 Continue\r\n\r\n");
  resp_free(&r);
  lock(f);
  assert_int_equal(f->requests, 0);
  unlock(f);
  send_str(c, "body");
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_int_equal(r.status, 200);
  assert_memory_equal(r.body, "body", 4);
  resp_free(&r);
  hangup(c);

  /* the body would be too large: 413 at once, no 100 */
  c = dial(f->port);
  send_str(c,
           "POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
           "Content-Length: 999999\r\n\r\n");
  expect_error(c, 413);
  hangup(c);

  /* an expectation we do not know */
  c = dial(f->port);
  send_str(c,
           "POST /echo HTTP/1.1\r\nHost: t\r\nExpect: something\r\n"
           "Content-Length: 1\r\n\r\nx");
  expect_error(c, 417);
  hangup(c);
}

static void test_keep_alive(void **state) {
  fixture *f = *state;
  start(f);
  client *c = dial(f->port);
  get_ok(c, "/hello", "hello");
  get_ok(c, "/hello", "hello");
  send_str(c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nok");
  resp r;
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_memory_equal(r.body, "ok", 2);
  resp_free(&r);
  lock(f);
  assert_int_equal(f->requests, 3);
  unlock(f);

  /* Connection: close is honoured */
  send_str(c, "GET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  assert_int_equal(read_resp(c, &r, false), 0);
  char v[32];
  assert_string_equal(hdr(&r, "connection", v, sizeof(v)), "close");
  resp_free(&r);
  assert_int_equal(wait_eof(c), 0);
  hangup(c);

  /* HTTP/1.0 without keep-alive: close */
  c = dial(f->port);
  send_str(c, "GET /hello HTTP/1.0\r\n\r\n");
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_string_equal(hdr(&r, "connection", v, sizeof(v)), "close");
  resp_free(&r);
  assert_int_equal(wait_eof(c), 0);
  hangup(c);
}

static void test_pipelined(void **state) {
  fixture *f = *state;
  start(f);
  client *c = dial(f->port);
  /* /slow answers from a timer: the later ones must wait for it */
  send_str(c,
           "GET /slow HTTP/1.1\r\nHost: t\r\n\r\n"
           "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\none"
           "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n"
           "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
           "\r\n3\r\ntwo\r\n0\r\n\r\n");
  const char *want[] = {"slow", "one", "hello", "two"};
  for (int i = 0; i < 4; i++) {
    resp r;
    assert_int_equal(read_resp(c, &r, false), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_n, strlen(want[i]));
    assert_memory_equal(r.body, want[i], r.body_n);
    resp_free(&r);
  }
  lock(f);
  assert_int_equal(f->requests, 4);
  unlock(f);
  hangup(c);
}

static void test_streamed_response(void **state) {
  fixture *f = *state;
  start(f);
  client *c = dial(f->port);
  uint64_t t0 = now_ms();
  send_str(c, "GET /stream HTTP/1.1\r\nHost: t\r\n\r\n");
  /* the head and the first chunk arrive before the rest is produced */
  size_t end = 0;
  while (end == 0 || !strstr(c->buf + end, "data: 1")) {
    assert_true(fill(c) > 0);
    c->buf[c->n] = '\0';
    char *e = strstr(c->buf, "\r\n\r\n");
    if (e) end = (size_t)(e - c->buf) + 4;
  }
  uint64_t first = now_ms();
  assert_true(first - t0 < 250);
  assert_non_null(strstr(c->buf, "transfer-encoding: chunked\r\n"));
  assert_non_null(strstr(c->buf, "content-type: text/event-stream\r\n"));
  assert_null(strstr(c->buf, "content-length"));
  assert_memory_equal(c->buf + end, "9\r\ndata: 1\n\n\r\n", 14);
  /* re-read the whole from the start through the strict decoder */
  resp r;
  assert_int_equal(read_resp(c, &r, false), 0);
  uint64_t last = now_ms();
  assert_true(last - first >= 250); /* three more, 100 ms apart */
  const char *all = "data: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\n";
  assert_int_equal(r.body_n, strlen(all));
  assert_memory_equal(r.body, all, r.body_n);
  resp_free(&r);
  get_ok(c, "/hello", "hello"); /* still usable */
  hangup(c);
}

/* begin_lazy: the head leaves with the first bytes (or the end), never
 * alone; end_with sends the last bytes and the last chunk together. */
static void test_lazy_head(void **state) {
  fixture *f = *state;
  start(f);
  client *c = dial(f->port);
  send_str(c, "GET /lazy HTTP/1.1\r\nHost: t\r\n\r\n");
  resp r;
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_int_equal(r.status, 200);
  assert_true(r.chunked);
  assert_int_equal(r.body_n, 18);
  assert_memory_equal(r.body, "data: 1\n\ndata: 2\n\n", 18);
  resp_free(&r);
  send_str(c, "GET /lazy-empty HTTP/1.1\r\nHost: t\r\n\r\n");
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_int_equal(r.status, 200);
  assert_int_equal(r.body_n, 0);
  resp_free(&r);
  get_ok(c, "/hello", "hello"); /* still usable */
  hangup(c);
  /* HTTP/1.0: no chunks; the body ends with the connection. */
  c = dial(f->port);
  send_str(c, "GET /lazy HTTP/1.0\r\n\r\n");
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_int_equal(r.status, 200);
  assert_false(r.chunked);
  assert_int_equal(r.body_n, 18);
  assert_memory_equal(r.body, "data: 1\n\ndata: 2\n\n", 18);
  resp_free(&r);
  hangup(c);
  /* A head never followed by bytes is never sent: the client sees the
   * connection close with no response at all. */
  c = dial(f->port);
  set_timeout(c->fd, 2000);
  send_str(c, "GET /lazy-abort HTTP/1.1\r\nHost: t\r\n\r\n");
  char b[64];
  assert_int_equal(recv(c->fd, b, sizeof(b), 0), 0);
  hangup(c);
}

static void test_stream_http10(void **state) {
  fixture *f = *state;
  start(f);
  client *c = dial(f->port);
  send_str(c, "GET /stream HTTP/1.0\r\n\r\n");
  resp r;
  assert_int_equal(read_resp(c, &r, false), 0); /* ends at EOF */
  assert_false(r.chunked);
  assert_int_equal(r.content_length, -1);
  char v[32];
  assert_string_equal(hdr(&r, "connection", v, sizeof(v)), "close");
  const char *all = "data: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\n";
  assert_int_equal(r.body_n, strlen(all));
  assert_memory_equal(r.body, all, r.body_n);
  resp_free(&r);
  hangup(c);
}

static void test_backpressure(void **state) {
  fixture *f = *state;
  start(f);
  client *c = dial_rcvbuf(f->port, 4096);
  send_str(c, "GET /drain HTTP/1.1\r\nHost: t\r\n\r\n");
  /* The server queued bytes and waits for the drain callback. */
  WAIT_FOR(f, f->queued_seen >= 1, 2000);
  resp r;
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_int_equal(r.status, 200);
  assert_int_equal(r.body_n, DRAIN_TOTAL);
  resp_free(&r);
  lock(f);
  assert_true(f->drains >= 1);
  assert_int_equal(f->drains, f->queued_seen);
  unlock(f);
  get_ok(c, "/hello", "hello");
  hangup(c);
}

/* Bytes a client pipelines while its request is handled: the server buffers
 * at most AIR__HTTP_BUSY_READ_AHEAD_BYTES (plus the read that ended the
 * request) and stops reading; the rest waits in the kernel. */
static void test_read_ahead_while_busy(void **state) {
  fixture *f = *state;
  start(f);
  client *c = dial(f->port);
  send_str(c, "GET /hold HTTP/1.1\r\nHost: t\r\n\r\n");
  WAIT_FOR(f, f->held, 3000);
  static char junk[1u << 16];
  memset(junk, 'x', sizeof(junk));
  size_t sent = 0, peak = 0;
  int blocked = 0; /* polls in a row where nothing could be sent */
  uint64_t until = now_ms() + 5000;
  while (blocked < 40 && sent < (32u << 20) && now_ms() < until) {
    ssize_t w = send(c->fd, junk, sizeof(junk), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w > 0) {
      sent += (size_t)w;
      blocked = 0;
    } else {
      assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
      blocked++;
      sleep_ms(5);
    }
    size_t ra = atomic_load(&f->stats.read_ahead);
    if (ra > peak) peak = ra;
  }
  assert_true(blocked >= 40);
  assert_true(sent > AIR__HTTP_BUSY_READ_AHEAD_BYTES + AIR__HTTP_READ_BYTES);
  assert_true(peak <= AIR__HTTP_BUSY_READ_AHEAD_BYTES + AIR__HTTP_READ_BYTES);
  /* The socket is not read now, so its close is seen only when the server
   * stops (teardown): the held request stays with its few KiB. */
  hangup(c);
  size_t held_ra = atomic_load(&f->stats.read_ahead);

  /* Reading resumes when the request ends: pipelined requests past the
   * read-ahead bound are all answered. */
  c = dial(f->port);
  static const char one[] = "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n";
  enum { N = 600 }; /* ~20 KiB of heads */
  send_str(c, "GET /slow HTTP/1.1\r\nHost: t\r\n\r\n");
  for (int i = 0; i < N; i++) send_bytes(c, one, sizeof(one) - 1);
  resp r;
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_int_equal(r.status, 200);
  resp_free(&r);
  for (int i = 0; i < N; i++) {
    assert_int_equal(read_resp(c, &r, false), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_n, 5);
    resp_free(&r);
  }
  hangup(c);
  WAIT_FOR(f, atomic_load(&f->stats.read_ahead) == held_ra, 3000);
}

/* A client that reads nothing of a queued response is gone after
 * write_timeout_ms without progress: closed, the held request told. */
static void test_write_timeout(void **state) {
  fixture *f = *state;
  f->cfg.write_timeout_ms = 300;
  start(f);
  client *c = dial_rcvbuf(f->port, 4096);
  uint64_t t0 = now_ms();
  send_str(c, "GET /drain HTTP/1.1\r\nHost: t\r\n\r\n");
  WAIT_FOR(f, f->queued_seen >= 1, 2000);
  WAIT_FOR(f, f->disconnects == 1, 3000);
  lock(f);
  uint64_t at = f->disconnect_at;
  unlock(f);
  assert_true(at - t0 >= 300);
  assert_int_equal(atomic_load(&f->stats.write_timeouts), 1);
  WAIT_FOR(f, atomic_load(&f->stats.output_queued) == 0, 3000);
  hangup(c);

  /* A client that reads slowly but steadily is kept. */
  f->drain_written = 0;
  c = dial_rcvbuf(f->port, 4096);
  send_str(c, "GET /drain HTTP/1.1\r\nHost: t\r\n\r\n");
  WAIT_FOR(f, f->queued_seen >= 2, 2000);
  resp r;
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_int_equal(r.body_n, DRAIN_TOTAL);
  resp_free(&r);
  assert_int_equal(atomic_load(&f->stats.write_timeouts), 1);
  hangup(c);
}

/* Queued output is bounded for the whole process: a streamed write past
 * max_output_queue_bytes is refused, nothing of it queued. */
static void test_output_queue_bound(void **state) {
  fixture *f = *state;
  f->cfg.max_output_queue_bytes = 256u << 10;
  start(f);
  client *c = dial_rcvbuf(f->port, 4096);
  send_str(c, "GET /fill HTTP/1.1\r\nHost: t\r\n\r\n");
  WAIT_FOR(f, f->held, 3000);
  lock(f);
  int rc = f->fill_rc;
  unlock(f);
  assert_int_equal(rc, AIR_ETOOBIG);
  assert_true(atomic_load(&f->stats.output_queued) <= (256u << 10));
  assert_true(atomic_load(&f->stats.output_refused) >= 1);
  hangup(c);
  WAIT_FOR(f, f->disconnects == 1, 3000);
  WAIT_FOR(f, atomic_load(&f->stats.output_queued) == 0, 3000);
}

static void test_half_close_gets_response(void **state) {
  fixture *f = *state;
  start(f);
  client *c = dial_rcvbuf(f->port, 4096);
  send_str(c, "GET /big HTTP/1.1\r\nHost: t\r\n\r\n");
  /* The first byte of the response arrived: the server answered, and the
   * rest of the 4 MiB is queued there. */
  char first;
  assert_int_equal(recv(c->fd, &first, 1, MSG_PEEK), 1);
  lock(f);
  assert_int_equal(f->requests, 1);
  unlock(f);
  shutdown(c->fd, SHUT_WR);
  resp r;
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_int_equal(r.status, 200);
  assert_int_equal(r.body_n, 4u << 20);
  resp_free(&r);
  assert_int_equal(wait_eof(c), 0);
  hangup(c);
}

static void test_body_too_large(void **state) {
  fixture *f = *state;
  start(f); /* max_body_bytes 4096 */
  client *c = dial(f->port);
  send_str(c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n");
  char junk[5000];
  memset(junk, 'x', sizeof(junk));
  send_bytes(c, junk, sizeof(junk));
  expect_error(c, 413);
  hangup(c);

  /* chunked: found while reading */
  c = dial(f->port);
  send_str(c,
           "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
           "\r\n");
  for (int i = 0; i < 5; i++) {
    send_str(c, "3e8\r\n");
    send_bytes(c, junk, 1000);
    send_str(c, "\r\n");
  }
  expect_error(c, 413);
  hangup(c);

  /* exactly the maximum is fine */
  c = dial(f->port);
  send_str(c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4096\r\n\r\n");
  send_bytes(c, junk, 4096);
  resp r;
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_int_equal(r.status, 200);
  assert_int_equal(r.body_n, 4096);
  resp_free(&r);
  hangup(c);
  lock(f);
  assert_int_equal(f->requests, 1);
  unlock(f);
}

static void test_head_too_large(void **state) {
  fixture *f = *state;
  start(f); /* max_header_bytes 2048 */
  client *c = dial(f->port);
  send_str(c, "GET /hello HTTP/1.1\r\nHost: t\r\nX-Big: ");
  char big[4000];
  memset(big, 'a', sizeof(big));
  send_bytes(c, big, sizeof(big));
  send_str(c, "\r\n\r\n");
  expect_error(c, 431);
  hangup(c);

  /* a long target counts too */
  c = dial(f->port);
  send_str(c, "GET /");
  send_bytes(c, big, sizeof(big));
  send_str(c, " HTTP/1.1\r\nHost: t\r\n\r\n");
  expect_error(c, 431);
  hangup(c);
  lock(f);
  assert_int_equal(f->requests, 0);
  unlock(f);
}

static void test_malformed(void **state) {
  fixture *f = *state;
  start(f);
  const char *bad[] = {
      "hello world\r\n\r\n",
      /* request smuggling: Content-Length with Transfer-Encoding */
      "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n"
      "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
      "Content-Length: 4\r\n\r\n0\r\n\r\n",
      /* duplicate and differing Content-Length */
      "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n"
      "Content-Length: 2\r\n\r\nab",
      /* bad chunk sizes */
      "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
      "zz\r\nabc\r\n0\r\n\r\n",
      "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
      "-3\r\nabc\r\n0\r\n\r\n",
      "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3\r\nabcdef\r\n0\r\n\r\n",
      /* chunked not last, unknown coding */
      "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, gzip\r\n"
      "\r\n0\r\n\r\n",
      /* bare LF, space before colon, bad content-length */
      "GET /hello HTTP/1.1\nHost: t\n\n",
      "GET /hello HTTP/1.1\r\nHost : t\r\n\r\n",
      /* an empty header name (llhttp lets it through) */
      "GET /hello HTTP/1.1\r\nHost: t\r\n: chunked\r\n\r\n",
      "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1x\r\n\r\nx",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    client *c = dial(f->port);
    send_str(c, bad[i]);
    expect_error(c, 400);
    hangup(c);
  }
  /* HTTP/0.9-style and 2.0 preface: 505 */
  client *c = dial(f->port);
  send_str(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
  expect_error(c, 505);
  hangup(c);
  /* an error after a good request on the same connection */
  c = dial(f->port);
  get_ok(c, "/hello", "hello");
  send_str(c, "GET / HTTP/1.1\r\nBad\x01Header: x\r\n\r\n");
  expect_error(c, 400);
  hangup(c);
  lock(f);
  assert_int_equal(f->requests, 1);
  unlock(f);
}

static void test_request_timeout(void **state) {
  fixture *f = *state;
  f->cfg.request_timeout_ms = 200;
  start(f);
  client *c = dial(f->port);
  uint64_t t0 = now_ms();
  send_str(c, "GET /hello HTTP/1.1\r\nHost: t\r\n");
  /* The scenario's pace, not a synchronisation: one more header line half
   * way to the deadline (trickling does not extend it). */
  while (now_ms() < t0 + 100) sleep_ms(1);
  send_str(c, "X-Slow: 1\r\n");
  expect_error(c, 408);
  uint64_t took = now_ms() - t0;
  assert_true(took >= 190 && took < 1500);
  hangup(c);

  /* a body that never completes */
  c = dial(f->port);
  send_str(c,
           "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc");
  expect_error(c, 408);
  hangup(c);
  lock(f);
  assert_int_equal(f->requests, 0);
  unlock(f);
}

static void test_idle_timeout(void **state) {
  fixture *f = *state;
  f->cfg.idle_timeout_ms = 200;
  start(f);
  client *c = dial(f->port);
  get_ok(c, "/hello", "hello");
  uint64_t t0 = now_ms();
  assert_int_equal(wait_eof(c), 0); /* closed, silently */
  uint64_t took = now_ms() - t0;
  assert_true(took >= 150 && took < 1500);
  hangup(c);

  /* a connection that never sends anything */
  c = dial(f->port);
  t0 = now_ms();
  assert_int_equal(wait_eof(c), 0);
  assert_true(now_ms() - t0 < 1500);
  hangup(c);
}

static void test_connection_limit(void **state) {
  fixture *f = *state;
  f->cfg.max_connections = 2;
  start(f);
  client *a = dial(f->port);
  client *b = dial(f->port);
  get_ok(a, "/hello", "hello");
  get_ok(b, "/hello", "hello");
  client *c = dial(f->port);
  expect_error(c, 503);
  hangup(c);
  /* the first two still work; once one leaves, a new one is served */
  get_ok(a, "/hello", "hello");
  hangup(b);
  uint64_t until = now_ms() + 2000;
  for (;;) {
    c = dial(f->port);
    send_str(c, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n");
    resp r;
    assert_int_equal(read_resp(c, &r, false), 0);
    int status = r.status;
    resp_free(&r);
    hangup(c);
    if (status == 200) break;
    assert_int_equal(status, 503);
    assert_true(now_ms() < until);
    sleep_ms(20);
  }
  hangup(a);
}

static void test_disconnect_while_held(void **state) {
  fixture *f = *state;
  start(f);
  client *c = dial(f->port);
  send_str(c, "GET /hold HTTP/1.1\r\nHost: t\r\n\r\n");
  WAIT_FOR(f, f->held, 2000);
  /* A request on another connection, answered: the server's loop has gone
   * past the held one, and reported no disconnect for it. */
  client *other = dial(f->port);
  get_ok(other, "/hello", "hello");
  lock(f);
  assert_int_equal(f->disconnects, 0);
  unlock(f);
  uint64_t t0 = now_ms();
  close(c->fd);
  c->fd = -1;
  WAIT_FOR(f, f->disconnects == 1, 100);
  lock(f);
  assert_true(f->disconnect_at - t0 <= 100);
  assert_int_equal(f->end_after_disconnect_rc, AIR_ECANCELED);
  assert_false(f->held);
  unlock(f);
  hangup(c);
  get_ok(other, "/hello", "hello"); /* the loop went on: no second report */
  hangup(other);
  lock(f);
  assert_int_equal(f->disconnects, 1); /* once */
  unlock(f);
}

static void test_disconnect_while_streaming(void **state) {
  fixture *f = *state;
  start(f);
  client *c = dial(f->port);
  send_str(c, "GET /stream-hold HTTP/1.1\r\nHost: t\r\n\r\n");
  for (;;) {
    c->buf[c->n] = '\0';
    if (strstr(c->buf, "9\r\ndata: 1\n\n\r\n")) break;
    assert_true(fill(c) > 0);
  }
  WAIT_FOR(f, f->held, 2000);
  uint64_t t0 = now_ms();
  close(c->fd);
  c->fd = -1;
  WAIT_FOR(f, f->disconnects == 1, 100);
  lock(f);
  assert_true(f->disconnect_at - t0 <= 100);
  unlock(f);
  hangup(c);
}

static void test_disconnect_by_reset(void **state) {
  fixture *f = *state;
  start(f);
  client *c = dial(f->port);
  send_str(c, "GET /hold HTTP/1.1\r\nHost: t\r\n\r\n");
  WAIT_FOR(f, f->held, 2000);
  struct linger l = {1, 0};
  setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  close(c->fd); /* RST */
  c->fd = -1;
  WAIT_FOR(f, f->disconnects == 1, 100);
  hangup(c);
}

static void test_reset(void **state) {
  fixture *f = *state;
  start(f);
  client *c = dial(f->port);
  send_str(c, "GET /reset HTTP/1.1\r\nHost: t\r\n\r\n");
  char b[64];
  ssize_t r = recv(c->fd, b, sizeof(b), 0);
  assert_int_equal(r, -1);
  assert_int_equal(errno, ECONNRESET);
  hangup(c);
}

static void test_hang_and_cut(void **state) {
  fixture *f = *state;
  start(f);
  client *c = dial(f->port);
  set_timeout(c->fd, 300);
  send_str(c, "GET /hang HTTP/1.1\r\nHost: t\r\n\r\n");
  char b[64];
  ssize_t r = recv(c->fd, b, sizeof(b), 0);
  assert_int_equal(r, -1);
  assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
  /* still open: more bytes are accepted and ignored */
  send_str(c, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n");
  r = recv(c->fd, b, sizeof(b), 0);
  assert_int_equal(r, -1);
  assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
  hangup(c);

  /* cut: the declared length never arrives */
  c = dial(f->port);
  send_str(c, "GET /cut HTTP/1.1\r\nHost: t\r\n\r\n");
  resp rs;
  assert_int_equal(read_resp(c, &rs, false), -1);
  assert_int_equal(rs.status, 200);
  assert_int_equal(rs.content_length, 100);
  assert_int_equal(rs.body_n, 10);
  assert_memory_equal(rs.body, "0123456789", 10);
  resp_free(&rs);
  hangup(c);

  /* a handler response with an injected header line becomes a 500 */
  c = dial(f->port);
  send_str(c, "GET /bad-header HTTP/1.1\r\nHost: t\r\n\r\n");
  expect_error(c, 500);
  hangup(c);
}

static void test_stop_lets_requests_finish(void **state) {
  fixture *f = *state;
  start(f);
  client *idle = dial(f->port);
  get_ok(idle, "/hello", "hello");
  client *c = dial(f->port);
  send_str(c, "GET /slow HTTP/1.1\r\nHost: t\r\n\r\n");
  WAIT_FOR(f, f->requests == 2, 2000);
  uv_async_send(&f->stop_async);
  resp r;
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_int_equal(r.status, 200);
  assert_memory_equal(r.body, "slow", 4);
  char v[32];
  assert_string_equal(hdr(&r, "connection", v, sizeof(v)), "close");
  resp_free(&r);
  assert_int_equal(wait_eof(c), 0);
  assert_int_equal(wait_eof(idle), 0);
  hangup(c);
  hangup(idle);
  pthread_join(f->thread, NULL);
  f->started = false;
  assert_int_equal(f->conns_at_stop, 2);
  assert_int_equal(f->loop_close_rc, 0);
}

static void test_stop_forces_held_requests(void **state) {
  fixture *f = *state;
  f->cfg.shutdown_timeout_ms = 200;
  start(f);
  client *c = dial(f->port);
  send_str(c, "GET /hold HTTP/1.1\r\nHost: t\r\n\r\n");
  client *h = dial(f->port);
  send_str(h, "GET /hang HTTP/1.1\r\nHost: t\r\n\r\n");
  WAIT_FOR(f, f->held && f->requests == 2, 2000);
  uint64_t t0 = now_ms();
  uv_async_send(&f->stop_async);
  pthread_join(f->thread, NULL);
  f->started = false;
  assert_true(now_ms() - t0 < 1500);
  assert_int_equal(f->disconnects, 1);
  assert_int_equal(f->loop_close_rc, 0);
  assert_int_equal(wait_eof(c), 0);
  assert_int_equal(wait_eof(h), 0);
  hangup(c);
  hangup(h);
}

/* Reads the 401 of the head hook: connection: close, then EOF, though the
 * body was never sent. */
static void expect_head_401(client *c) {
  resp r;
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_int_equal(r.status, 401);
  assert_null(strstr(r.head, "100 Continue"));
  char v[64];
  assert_string_equal(hdr(&r, "connection", v, sizeof(v)), "close");
  assert_int_equal(r.body_n, strlen("{\"error\":{\"message\":\"bad key\"}}"));
  assert_memory_equal(r.body, "{\"error\":{\"message\":\"bad key\"}}",
                      r.body_n);
  resp_free(&r);
  assert_int_equal(wait_eof(c), 0);
}

/* docs/design.md §5 "Auth before body": the head hook answers before any body
 * byte is read or buffered, and before `100 Continue`. */
static void test_auth_before_body(void **state) {
  fixture *f = *state;
  f->cfg.on_head = on_head;
  f->cfg.max_body_bytes = 1u << 30; /* the 1 GiB head passes the 413 check */
  f->cfg.max_inflight_body_bytes = (size_t)3 << 30; /* and the 503 one */
  f->cfg.inflight_body = &f->inflight;
  start(f);

  /* 1 GiB declared with a bad key, and some body bytes right behind the
   * head: 401 and close at once; nothing of the body is counted. */
  client *c = dial(f->port);
  char junk[32768];
  memset(junk, 'x', sizeof(junk));
  send_str(c,
           "POST /echo HTTP/1.1\r\nHost: t\r\nX-Key: bad\r\n"
           "Content-Length: 1073741824\r\n\r\n");
  send_bytes(c, junk, sizeof(junk));
  expect_head_401(c);
  hangup(c);
  lock(f);
  assert_int_equal(f->heads, 1);
  assert_int_equal(f->head_body_n, 0);
  assert_int_equal(f->requests, 0);
  unlock(f);
  assert_int_equal(atomic_load(&f->inflight), 0);

  /* the head alone, no key: the same, without waiting for the body */
  c = dial(f->port);
  send_str(c,
           "POST /echo HTTP/1.1\r\nHost: t\r\n"
           "Content-Length: 1073741824\r\n\r\n");
  expect_head_401(c);
  hangup(c);

  /* Expect: 100-continue with a bad key: the 401, never a 100 */
  c = dial(f->port);
  send_str(c,
           "POST /echo HTTP/1.1\r\nHost: t\r\nX-Key: bad\r\n"
           "Expect: 100-continue\r\nContent-Length: 1073741824\r\n\r\n");
  expect_head_401(c);
  hangup(c);
  /* chunked, with a chunk behind the head */
  c = dial(f->port);
  send_str(c,
           "POST /echo HTTP/1.1\r\nHost: t\r\nX-Key: bad\r\n"
           "Transfer-Encoding: chunked\r\n\r\n8000\r\n");
  send_bytes(c, junk, sizeof(junk));
  expect_head_401(c);
  hangup(c);
  lock(f);
  assert_int_equal(f->heads, 4);
  assert_int_equal(f->requests, 0);
  unlock(f);
  assert_int_equal(atomic_load(&f->inflight), 0);

  /* a good key: as before (100, the body, keep-alive) */
  c = dial(f->port);
  send_str(c,
           "POST /echo HTTP/1.1\r\nHost: t\r\nX-Key: good\r\n"
           "Expect: 100-continue\r\nContent-Length: 4\r\n\r\n");
  resp r;
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_int_equal(r.status, 100);
  resp_free(&r);
  send_str(c, "body");
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_int_equal(r.status, 200);
  assert_memory_equal(r.body, "body", 4);
  char v[64];
  assert_string_equal(hdr(&r, "connection", v, sizeof(v)), "keep-alive");
  resp_free(&r);
  send_str(c, "GET /hello HTTP/1.1\r\nHost: t\r\nX-Key: good\r\n\r\n");
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_int_equal(r.status, 200);
  resp_free(&r);
  /* a bad key on a kept connection: 401 and close */
  send_str(c, "GET /hello HTTP/1.1\r\nHost: t\r\n\r\n");
  expect_head_401(c);
  hangup(c);
  lock(f);
  assert_int_equal(f->requests, 2);
  unlock(f);
  WAIT_FOR(f, atomic_load(&f->inflight) == 0, 2000);
}

static void expect_busy(client *c) {
  resp r;
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_int_equal(r.status, 503);
  char v[64];
  assert_string_equal(hdr(&r, "connection", v, sizeof(v)), "close");
  assert_string_equal(hdr(&r, "retry-after", v, sizeof(v)), "1");
  r.body[r.body_n] = '\0';
  assert_non_null(strstr(r.body, "\"type\":\"server_error\""));
  resp_free(&r);
  assert_int_equal(wait_eof(c), 0);
}

/* limits.max_inflight_body_bytes: the bodies being read, over every
 * connection (and every server sharing the count), are bounded. */
static void test_inflight_body_bound(void **state) {
  fixture *f = *state;
  f->cfg.max_inflight_body_bytes = 3000;
  f->cfg.inflight_body = &f->inflight;
  start(f);
  char junk[4096];
  memset(junk, 'x', sizeof(junk));

  /* A: 2000 declared, 500 sent; reserved once the head is read */
  client *a = dial(f->port);
  send_str(a, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2000\r\n\r\n");
  send_bytes(a, junk, 500);
  WAIT_FOR(f, atomic_load(&f->inflight) == 2000, 3000);

  /* B: 2000 more would pass 3000: 503 at the head, body unread */
  client *b = dial(f->port);
  send_str(b, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2000\r\n\r\n");
  expect_busy(b);
  hangup(b);
  /* chunked: refused as it grows past the bound */
  b = dial(f->port);
  send_str(b,
           "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
           "\r\n200\r\n");
  send_bytes(b, junk, 512);
  send_str(b, "\r\n600\r\n");
  send_bytes(b, junk, 1536);
  send_str(b, "\r\n0\r\n\r\n");
  expect_busy(b);
  hangup(b);
  assert_int_equal(atomic_load(&f->inflight), 2000);

  /* a body that fits beside A is read and answered; its bytes come back */
  b = dial(f->port);
  send_str(b, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 900\r\n\r\n");
  send_bytes(b, junk, 900);
  resp r;
  assert_int_equal(read_resp(b, &r, false), 0);
  assert_int_equal(r.status, 200);
  assert_int_equal(r.body_n, 900);
  resp_free(&r);
  WAIT_FOR(f, atomic_load(&f->inflight) == 2000, 3000);

  /* A ends: answered, released; then B's 2000 is accepted */
  send_bytes(a, junk, 1500);
  assert_int_equal(read_resp(a, &r, false), 0);
  assert_int_equal(r.status, 200);
  assert_int_equal(r.body_n, 2000);
  resp_free(&r);
  WAIT_FOR(f, atomic_load(&f->inflight) == 0, 3000);
  send_str(b, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2000\r\n\r\n");
  send_bytes(b, junk, 2000);
  assert_int_equal(read_resp(b, &r, false), 0);
  assert_int_equal(r.status, 200);
  resp_free(&r);
  hangup(b);

  /* a client that leaves in the middle of its body gives its bytes back */
  send_str(a, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2500\r\n\r\n");
  send_bytes(a, junk, 10);
  WAIT_FOR(f, atomic_load(&f->inflight) == 2500, 3000);
  hangup(a);
  WAIT_FOR(f, atomic_load(&f->inflight) == 0, 3000);

  /* the count is shared: bytes another server holds count here too */
  atomic_store(&f->inflight, 2500);
  client *c = dial(f->port);
  send_str(c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 600\r\n\r\n");
  expect_busy(c);
  hangup(c);
  atomic_store(&f->inflight, 0);
  c = dial(f->port);
  send_str(c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 600\r\n\r\n");
  send_bytes(c, junk, 600);
  assert_int_equal(read_resp(c, &r, false), 0);
  assert_int_equal(r.status, 200);
  resp_free(&r);
  hangup(c);
  WAIT_FOR(f, atomic_load(&f->inflight) == 0, 3000);
  lock(f);
  assert_int_equal(f->requests, 4);
  unlock(f);
}

static void test_config_errors(void **state) {
  (void)state;
  uv_loop_t loop;
  assert_int_equal(uv_loop_init(&loop), 0);
  air__http_config cfg;
  test_cfg(&cfg);
  air__http_server *s = NULL;
  cfg.host = "localhost"; /* literals only */
  assert_int_equal(air__http_server_new(&loop, &cfg, on_request, NULL, &s),
                   AIR_EINVAL);
  cfg.host = "127.0.0.1";
  cfg.port = 70000;
  assert_int_equal(air__http_server_new(&loop, &cfg, on_request, NULL, &s),
                   AIR_EINVAL);
  /* IPv6 literal with brackets, and port reuse */
  cfg.host = "[::1]";
  cfg.port = 0;
  cfg.reuseport = true;
  assert_int_equal(air__http_server_new(&loop, &cfg, on_request, NULL, &s), 0);
  int err = 0;
  int rc = air__http_server_listen(s, &err);
  if (rc == 0) {
    int port = air__http_server_port(s);
    assert_true(port > 0);
    assert_int_equal(air__http_server_listen(s, NULL), AIR_ESTATE);
    /* a second server on the same port: allowed with reuseport */
    air__http_server *s2 = NULL;
    cfg.port = port;
    assert_int_equal(air__http_server_new(&loop, &cfg, on_request, NULL, &s2),
                     0);
    assert_int_equal(air__http_server_listen(s2, NULL), 0);
    /* without it: EADDRINUSE */
    air__http_server *s3 = NULL;
    cfg.reuseport = false;
    assert_int_equal(air__http_server_new(&loop, &cfg, on_request, NULL, &s3),
                     0);
    assert_int_equal(air__http_server_listen(s3, &err), AIR_EIO);
    assert_int_equal(err, UV_EADDRINUSE);
    air__http_server_free(s3);
    assert_int_equal(air__http_server_stop(s2, NULL, NULL), 0);
    assert_int_equal(air__http_server_stop(s, NULL, NULL), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    air__http_server_free(s2);
  } else {
    /* no IPv6 on this machine */
    assert_int_equal(rc, AIR_EIO);
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  air__http_server_free(s);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* ---- the reader alone: the obs-fold scan (RFC 9112 5.2) ------------------ */

/* Feeds s in pieces (split: a cut after that many bytes, 0 none; bytewise:
 * one byte a call) and returns the first event other than MORE and HEAD
 * (after HEAD it goes on from the first unused byte, if only with none). */
static air__http_event feed_reader(const char *s, size_t split, bool bytewise,
                                   int *status) {
  air__http_reader r;
  air__http_reader_init(&r, 8192, 64, 1024);
  size_t n = strlen(s), at = 0;
  air__http_event ev = AIR__HTTP_MORE;
  while ((at < n && ev == AIR__HTTP_MORE) || ev == AIR__HTTP_HEAD) {
    size_t k = at == n ? 0 : bytewise ? 1 : split > at ? split - at : n - at;
    size_t used = 0;
    ev = air__http_reader_feed(&r, s + at, k, &used);
    at += used;
  }
  *status = r.status;
  air__http_reader_cleanup(&r);
  return ev;
}

static void check_all_splits(const char *s, air__http_event want,
                             int want_status) {
  size_t n = strlen(s);
  int status = 0;
  for (size_t split = 0; split < n; split++) {
    air__http_event ev = feed_reader(s, split, false, &status);
    assert_int_equal(ev, want);
    if (want == AIR__HTTP_FAIL) assert_int_equal(status, want_status);
  }
  assert_int_equal(feed_reader(s, 0, true, &status), want);
  if (want == AIR__HTTP_FAIL) assert_int_equal(status, want_status);
}

/* A folded header line (SP or HTAB after a line's end) is refused, wherever
 * the feeds are cut; the same head unfolded is read. */
static void test_obs_fold(void **state) {
  (void)state;
  check_all_splits("GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n 2\r\n\r\n",
                   AIR__HTTP_FAIL, 400);
  check_all_splits("GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n\t2\r\n\r\n",
                   AIR__HTTP_FAIL, 400);
  check_all_splits("GET / HTTP/1.1\r\nHost: a\r\nX-A: 1 2\r\n\r\n",
                   AIR__HTTP_DONE, 0);
  /* A body after the head may hold anything: the scan stopped at the
   * empty line. */
  check_all_splits(
      "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n\n \n\t\n",
      AIR__HTTP_DONE, 0);
}

/* llhttp skips empty lines before a request line (RFC 9112 2.2): the scan
 * starts at the request line, so leading CR LF pairs never look like the
 * empty line that ends a head and hide a fold after them. */
static void test_obs_fold_after_blank_lines(void **state) {
  (void)state;
  check_all_splits("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n 2\r\n\r\n",
                   AIR__HTTP_FAIL, 400);
  check_all_splits("\r\n\r\n\r\nGET / HTTP/1.1\r\nX-A: 1\r\n\t2\r\n\r\n",
                   AIR__HTTP_FAIL, 400);
  check_all_splits("\r\nGET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n 2\r\n\r\n",
                   AIR__HTTP_FAIL, 400);
  check_all_splits("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\nX-A: 1 2\r\n\r\n",
                   AIR__HTTP_DONE, 0);
  /* The second request of a connection: blank lines after the first. */
  air__http_reader r;
  air__http_reader_init(&r, 8192, 64, 1024);
  static const char two[] =
      "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
      "\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n 2\r\n\r\n";
  size_t at = 0, used = 0;
  air__http_event ev = AIR__HTTP_MORE;
  for (int i = 0; i < 8 && ev != AIR__HTTP_DONE; i++) {
    ev = air__http_reader_feed(&r, two + at, sizeof(two) - 1 - at, &used);
    at += used;
  }
  assert_int_equal(ev, AIR__HTTP_DONE);
  air__http_reader_next(&r);
  for (int i = 0; i < 8 && ev != AIR__HTTP_FAIL && at < sizeof(two) - 1; i++) {
    ev = air__http_reader_feed(&r, two + at, sizeof(two) - 1 - at, &used);
    at += used;
  }
  assert_int_equal(ev, AIR__HTTP_FAIL);
  assert_int_equal(r.status, 400);
  air__http_reader_cleanup(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_get, setup, teardown),
      cmocka_unit_test_setup_teardown(test_post_content_length, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_chunked_request, setup, teardown),
      cmocka_unit_test_setup_teardown(test_expect_continue, setup, teardown),
      cmocka_unit_test_setup_teardown(test_keep_alive, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pipelined, setup, teardown),
      cmocka_unit_test_setup_teardown(test_streamed_response, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stream_http10, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lazy_head, setup, teardown),
      cmocka_unit_test_setup_teardown(test_backpressure, setup, teardown),
      cmocka_unit_test_setup_teardown(test_read_ahead_while_busy, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_write_timeout, setup, teardown),
      cmocka_unit_test_setup_teardown(test_output_queue_bound, setup, teardown),
      cmocka_unit_test_setup_teardown(test_half_close_gets_response, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_body_too_large, setup, teardown),
      cmocka_unit_test_setup_teardown(test_head_too_large, setup, teardown),
      cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_request_timeout, setup, teardown),
      cmocka_unit_test_setup_teardown(test_idle_timeout, setup, teardown),
      cmocka_unit_test_setup_teardown(test_connection_limit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_disconnect_while_held, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_disconnect_while_streaming, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_disconnect_by_reset, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_reset, setup, teardown),
      cmocka_unit_test_setup_teardown(test_hang_and_cut, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stop_lets_requests_finish, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_stop_forces_held_requests, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_auth_before_body, setup, teardown),
      cmocka_unit_test_setup_teardown(test_inflight_body_bound, setup,
                                      teardown),
      cmocka_unit_test(test_config_errors),
      cmocka_unit_test(test_obs_fold),
      cmocka_unit_test(test_obs_fold_after_blank_lines),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
