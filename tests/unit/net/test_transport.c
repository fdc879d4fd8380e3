/*
 * The transport's socket handling against a tiny keep-alive HTTP server on
 * the same loop (127.0.0.1, ephemeral port): a pooled connection is reused
 * by the next transfer, a pooled connection the server closes is noticed
 * without the loop spinning on it, and the next transfer reconnects; a
 * reused handle sends each transfer's own header lines (it keeps the last
 * list and reuses it only when the lines are the same), and a small body
 * goes without "Expect: 100-continue"; each transfer goes to its own URL
 * whether the transport kept it parsed or not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <uv.h>

#include "transport.h"

#define MAX_CONNS 8

typedef struct srv_conn {
  uv_tcp_t tcp;
  char buf[4096];
  size_t n;
  bool open;
} srv_conn;

typedef struct fixture {
  uv_loop_t loop;
  uv_tcp_t listener;
  int port;
  srv_conn conns[MAX_CONNS];
  unsigned accepted;
  unsigned answered;
  char last_head[2048]; /* the head of the last request answered */
  uv_prepare_t turns;   /* counts loop iterations */
  unsigned long n_turns;
  air__transport *t;
} fixture;

typedef struct result {
  bool done;
  int rc;
  int status;
  char body[64];
  size_t n;
} result;

static void on_alloc(uv_handle_t *h, size_t want, uv_buf_t *b) {
  (void)want;
  srv_conn *c = h->data;
  b->base = c->buf + c->n;
  b->len = sizeof(c->buf) - c->n - 1;
}

static void on_written(uv_write_t *w, int status) {
  (void)status;
  free(w);
}

/* Answers each complete request (head + Content-Length body) with "ok". */
static void on_srv_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b) {
  (void)b;
  srv_conn *c = s->data;
  fixture *f = s->loop->data;
  if (nread < 0) {
    if (c->open) uv_close((uv_handle_t *)s, NULL);
    c->open = false;
    return;
  }
  c->n += (size_t)nread;
  c->buf[c->n] = '\0';
  char *end = strstr(c->buf, "\r\n\r\n");
  if (end == NULL) return;
  const char *cl = strstr(c->buf, "Content-Length: ");
  size_t body = cl && cl < end ? strtoul(cl + 16, NULL, 10) : 0;
  size_t need = (size_t)(end + 4 - c->buf) + body;
  if (c->n < need) return;
  size_t hn = (size_t)(end + 4 - c->buf);
  if (hn >= sizeof(f->last_head)) hn = sizeof(f->last_head) - 1;
  memcpy(f->last_head, c->buf, hn);
  f->last_head[hn] = '\0';
  memmove(c->buf, c->buf + need, c->n - need);
  c->n -= need;
  static char reply[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
  uv_write_t *w = malloc(sizeof(*w));
  assert_non_null(w);
  uv_buf_t out = uv_buf_init(reply, sizeof(reply) - 1);
  assert_int_equal(uv_write(w, s, &out, 1, on_written), 0);
  f->answered++;
}

static void on_conn(uv_stream_t *l, int status) {
  fixture *f = l->loop->data;
  assert_int_equal(status, 0);
  assert_true(f->accepted < MAX_CONNS);
  srv_conn *c = &f->conns[f->accepted++];
  uv_tcp_init(l->loop, &c->tcp);
  c->tcp.data = c;
  c->open = true;
  assert_int_equal(uv_accept(l, (uv_stream_t *)&c->tcp), 0);
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_srv_read);
}

static void on_turn(uv_prepare_t *p) {
  fixture *f = p->loop->data;
  f->n_turns++;
}

static int setup(void **state) {
  fixture *f = calloc(1, sizeof(*f));
  assert_non_null(f);
  assert_int_equal(uv_loop_init(&f->loop), 0);
  f->loop.data = f;
  uv_tcp_init(&f->loop, &f->listener);
  struct sockaddr_in a;
  uv_ip4_addr("127.0.0.1", 0, &a);
  assert_int_equal(uv_tcp_bind(&f->listener, (const struct sockaddr *)&a, 0),
                   0);
  assert_int_equal(uv_listen((uv_stream_t *)&f->listener, 16, on_conn), 0);
  struct sockaddr_in got;
  int len = sizeof(got);
  uv_tcp_getsockname(&f->listener, (struct sockaddr *)&got, &len);
  f->port = ntohs(got.sin_port);
  uv_prepare_init(&f->loop, &f->turns);
  uv_prepare_start(&f->turns, on_turn);
  uv_unref((uv_handle_t *)&f->turns);
  assert_int_equal(air__transport_new(&f->loop, NULL, &f->t), 0);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  air__transport_free(f->t);
  for (unsigned i = 0; i < f->accepted; i++)
    if (f->conns[i].open) uv_close((uv_handle_t *)&f->conns[i].tcp, NULL);
  uv_close((uv_handle_t *)&f->listener, NULL);
  uv_close((uv_handle_t *)&f->turns, NULL);
  for (int i = 0; i < 100 && uv_loop_alive(&f->loop); i++)
    uv_run(&f->loop, UV_RUN_NOWAIT);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  free(f);
  return 0;
}

static int on_body(void *data, const char *p, size_t n) {
  result *r = data;
  if (r->n + n < sizeof(r->body)) {
    memcpy(r->body + r->n, p, n);
    r->n += n;
  }
  return 0;
}

static void on_head(void *data, int status, const air_header *h, size_t n) {
  (void)h;
  (void)n;
  ((result *)data)->status = status;
}

static void on_done(void *data, int rc, air_transport_err kind, bool ct,
                    const char *msg) {
  (void)kind;
  (void)ct;
  (void)msg;
  result *r = data;
  r->done = true;
  r->rc = rc;
}

/* Runs the loop until *flag, at most ms of wall time. */
static void run_until(fixture *f, const bool *flag, uint64_t ms) {
  uint64_t end = uv_hrtime() + ms * 1000000u;
  while (!*flag && uv_hrtime() < end) uv_run(&f->loop, UV_RUN_ONCE);
}

static void post_to(fixture *f, result *r, const char *path,
                    const char *const *headers) {
  char url[96];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", f->port, path);
  static const char body[] = "{\"a\":1}";
  air__xfer_req req = {.url = url,
                       .body = body,
                       .body_len = sizeof(body) - 1,
                       .headers = headers};
  air__xfer_cb cb = {
      .on_head = on_head, .on_body = on_body, .on_done = on_done, .data = r};
  air__xfer *x = NULL;
  memset(r, 0, sizeof(*r));
  assert_int_equal(air__xfer_start(f->t, &req, &cb, &x), 0);
  run_until(f, &r->done, 5000);
  assert_true(r->done);
  assert_int_equal(r->rc, 0);
  assert_int_equal(r->status, 200);
  assert_int_equal(r->n, 2);
  assert_memory_equal(r->body, "ok", 2);
}

static void post_with(fixture *f, result *r, const char *const *headers) {
  post_to(f, r, "/x", headers);
}

static void post(fixture *f, result *r) {
  post_with(f, r, NULL);
}

static void on_idle_timer(uv_timer_t *h) {
  *(bool *)h->data = true;
}

/* Runs the loop for ms with nothing to do but what the transport watches. */
static void idle_for(fixture *f, uint64_t ms) {
  bool fired = false;
  uv_timer_t tm;
  uv_timer_init(&f->loop, &tm);
  tm.data = &fired;
  uv_timer_start(&tm, on_idle_timer, ms, 0);
  run_until(f, &fired, ms + 1000);
  uv_close((uv_handle_t *)&tm, NULL);
  uv_run(&f->loop, UV_RUN_NOWAIT);
}

static void test_keepalive_reused(void **state) {
  fixture *f = *state;
  result r;
  for (int i = 0; i < 5; i++) post(f, &r);
  assert_int_equal(f->answered, 5);
  assert_int_equal(f->accepted, 1);
}

static void test_pooled_connection_closed_by_peer(void **state) {
  fixture *f = *state;
  result r;
  post(f, &r);
  assert_int_equal(f->accepted, 1);
  /* The server drops the pooled connection while nobody uses it. */
  uv_close((uv_handle_t *)&f->conns[0].tcp, NULL);
  f->conns[0].open = false;
  unsigned long before = f->n_turns;
  idle_for(f, 300);
  /* A handful of turns (the close, the timer), not a spin on a readable
   * socket nobody reads. */
  assert_true(f->n_turns - before < 20);
  post(f, &r);
  assert_int_equal(f->accepted, 2);
  post(f, &r);
  assert_int_equal(f->accepted, 2);
}

/* Each transfer on a reused handle sends its own lines, the same list
 * twice or a different one; none sends Expect for a small body. */
static void test_reused_handle_headers(void **state) {
  fixture *f = *state;
  result r;
  static const char *const a[] = {"Content-Type: application/json",
                                  "Authorization: Bearer key-a", NULL};
  static const char *const b[] = {"Content-Type: application/json",
                                  "X-Other: b", NULL};
  static const char *const a2[] = {"Content-Type: application/json",
                                   "Authorization: Bearer key-a2", NULL};
  const char *const *seq[] = {a, a, b, NULL, a2, a2, a};
  const char *want[] = {"key-a\r\n",  "key-a\r\n",  "X-Other: b\r\n", NULL,
                        "key-a2\r\n", "key-a2\r\n", "key-a\r\n"};
  for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
    post_with(f, &r, seq[i]);
    assert_int_equal(f->answered, i + 1);
    assert_null(strstr(f->last_head, "Expect"));
    assert_null(strstr(f->last_head, "expect"));
    if (want[i] != NULL) assert_non_null(strstr(f->last_head, want[i]));
    bool has_auth = strstr(f->last_head, "Authorization:") != NULL;
    bool has_other = strstr(f->last_head, "X-Other:") != NULL;
    assert_int_equal(has_auth, seq[i] == a || seq[i] == a2);
    assert_int_equal(has_other, seq[i] == b);
    assert_int_equal(strstr(f->last_head, "application/json") != NULL,
                     seq[i] != NULL);
  }
  assert_int_equal(f->accepted, 1); /* one connection, handles reused */
}

/* Parsed URLs are kept per transport (up to a bound, then given as text):
 * each transfer on a reused handle goes to its own URL, in either case. */
static void test_reused_handle_urls(void **state) {
  fixture *f = *state;
  result r;
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < 24; i++) { /* more than the transport keeps */
      char path[32], want[64];
      snprintf(path, sizeof(path), "/v1/p%d?q=%d", i, i % 3);
      post_to(f, &r, path, NULL);
      snprintf(want, sizeof(want), "POST %s HTTP/1.1\r\n", path);
      assert_memory_equal(f->last_head, want, strlen(want));
    }
  }
  /* Dot segments are resolved, as libcurl does for a URL given as text. */
  post_to(f, &r, "/a/../b", NULL);
  assert_memory_equal(f->last_head, "POST /b HTTP/1.1\r\n", 18);
  assert_int_equal(f->accepted, 1);
}

int main(void) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_keepalive_reused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pooled_connection_closed_by_peer,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_reused_handle_headers, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_reused_handle_urls, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  curl_global_cleanup();
  return rc;
}
