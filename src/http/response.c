/*
 * The answering API: response heads, full and streamed bodies, the
 * server's own error responses, and the fault-injection endings.
 */
#include <stdlib.h>
#include <string.h>

#include "airetry.h"
#include "http_int.h"

/* A response head is built on the stack when it fits (most do: ~300
 * bytes), on the heap when not: no allocation for a typical answer. */
#define HEAD_STACK_BYTES 1024

static const char *reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 206:
      return "Partial Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 304:
      return "Not Modified";
    case 307:
      return "Temporary Redirect";
    case 308:
      return "Permanent Redirect";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 402:
      return "Payment Required";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
    case 417:
      return "Expectation Failed";
    case 422:
      return "Unprocessable Content";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    case 529:
      return "Site Overloaded";
    default:
      return "Status";
  }
}

/* RFC 9110 tchar: ALPHA, DIGIT and !#$%&'*+-.^_`|~ (one look-up a byte). */
static const unsigned char tchar[256] = {
    ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1,
    ['*'] = 1, ['+'] = 1, ['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 1,
    ['`'] = 1, ['|'] = 1, ['~'] = 1, ['0'] = 1, ['1'] = 1, ['2'] = 1,
    ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1,
    ['9'] = 1, ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1,
    ['F'] = 1, ['G'] = 1, ['H'] = 1, ['I'] = 1, ['J'] = 1, ['K'] = 1,
    ['L'] = 1, ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1, ['Q'] = 1,
    ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1, ['V'] = 1, ['W'] = 1,
    ['X'] = 1, ['Y'] = 1, ['Z'] = 1, ['a'] = 1, ['b'] = 1, ['c'] = 1,
    ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1, ['i'] = 1,
    ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1,
    ['p'] = 1, ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1,
    ['v'] = 1, ['w'] = 1, ['x'] = 1, ['y'] = 1, ['z'] = 1,
};

static bool is_token(const char *p, size_t n) {
  if (n == 0) return false;
  for (size_t i = 0; i < n; i++)
    if (!tchar[(unsigned char)p[i]]) return false;
  return true;
}

/* No CR, LF or NUL (one comparison for the bytes above CR). */
static bool is_value(const char *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)p[i];
    if (c <= '\r' && (c == '\r' || c == '\n' || c == '\0')) return false;
  }
  return true;
}

static bool name_is(const char *p, size_t n, const char *lit) {
  air__str s = {p, n};
  return air__http_str_eq(s, lit);
}

/*
 * Builds the status line and fields into b. framing: AIR__RESP_FIXED with
 * `length` (no content-length for 1xx/204/304), AIR__RESP_CHUNKED or
 * AIR__RESP_EOF. Returns 0, AIR_EINVAL, AIR_ETOOBIG or AIR_ENOMEM.
 */
static int build_head(air__http_conn *c, air__buf *b, int status,
                      const air__http_field *f, size_t nf, int framing,
                      uint64_t length) {
  if (status < 200 || status > 599) return AIR_EINVAL;
  for (size_t i = 0; i < nf; i++) {
    if (!is_token(f[i].name, f[i].name_n) ||
        (f[i].value_n > 0 && !is_value(f[i].value, f[i].value_n)))
      return AIR_EINVAL;
  }
  int rc = air__buf_adds(b, "HTTP/1.1 ");
  if (!rc) rc = air__buf_addu(b, (unsigned long long)status);
  if (!rc) rc = air__buf_addc(b, ' ');
  if (!rc) rc = air__buf_adds(b, reason_phrase(status));
  if (!rc) rc = air__buf_add(b, "\r\n", 2);
  for (size_t i = 0; i < nf && !rc; i++) {
    size_t nn = f[i].name_n; /* the names airetry frames itself */
    if ((nn == 14 && name_is(f[i].name, nn, "content-length")) ||
        (nn == 17 && name_is(f[i].name, nn, "transfer-encoding")) ||
        (nn == 10 && name_is(f[i].name, nn, "connection")))
      continue;
    rc = air__buf_add(b, f[i].name, f[i].name_n);
    if (!rc) rc = air__buf_add(b, ": ", 2);
    if (!rc && f[i].value_n > 0) rc = air__buf_add(b, f[i].value, f[i].value_n);
    if (!rc) rc = air__buf_add(b, "\r\n", 2);
  }
  const char *date = air__http_server_date(c->srv);
  if (!rc && date[0] != '\0') {
    rc = air__buf_adds(b, "date: ");
    if (!rc) rc = air__buf_adds(b, date);
    if (!rc) rc = air__buf_add(b, "\r\n", 2);
  }
  if (!rc && framing == AIR__RESP_FIXED && status != 204 && status != 304) {
    rc = air__buf_adds(b, "content-length: ");
    if (!rc) rc = air__buf_addu(b, (unsigned long long)length);
    if (!rc) rc = air__buf_add(b, "\r\n", 2);
  } else if (!rc && framing == AIR__RESP_CHUNKED) {
    rc = air__buf_adds(b, "transfer-encoding: chunked\r\n");
  }
  if (!rc)
    rc = air__buf_adds(b, c->keep_alive ? "connection: keep-alive\r\n\r\n"
                                        : "connection: close\r\n\r\n");
  return rc;
}

/* The request-target of the request being read, as far as it was read
 * (empty before its first byte). */
static air__str target_so_far(const air__http_conn *c) {
  const air__http_reader *r = &c->rd;
  air__str t = {"", 0};
  if (r->head.p != NULL && r->target_n > 0 && r->target < r->head.n) {
    t.p = r->head.p + r->target;
    t.n = r->head.n - r->target < r->target_n ? r->head.n - r->target
                                              : r->target_n;
  }
  return t;
}

/* {"error":{"message":"...","type":"..."}}: server_error for 5xx. */
static int own_error_body(int status, const char *message, air__buf *body) {
  int rc = air__buf_adds(body, "{\"error\":{\"message\":");
  if (!rc) rc = air__buf_add_json_str(body, message, strlen(message));
  if (!rc)
    rc = air__buf_adds(body, status >= 500
                                 ? ",\"type\":\"server_error\"}}"
                                 : ",\"type\":\"invalid_request_error\"}}");
  return rc;
}

int air__http_write_error(air__http_conn *c, int status, const char *message) {
  char head[HEAD_STACK_BYTES];
  air__buf b;
  air__buf_init_on(&b, AIR__HTTP_MAX_RESPONSE_HEAD_BYTES, head, sizeof(head));
  air__buf body;
  air__buf_init(&body, 1024);
  const air__http_config *cfg = &c->srv->cfg;
  int rc;
  if (cfg->error_body != NULL &&
      cfg->error_body(cfg->error_body_data, target_so_far(c), status, message,
                      &body))
    rc = air__buf_error(&body);
  else
    rc = own_error_body(status, message, &body);
  static const air__http_field ct[] = {
      {"content-type", 12, "application/json", 16},
      {"retry-after", 11, "1", 1}};
  c->keep_alive = false;
  if (!rc)
    rc = build_head(c, &b, status, ct, status == 503 ? 2 : 1, AIR__RESP_FIXED,
                    (uint64_t)body.n);
  if (!rc) {
    uv_buf_t bufs[2] = {air__http_buf(b.p, b.n), air__http_buf(body.p, body.n)};
    rc = air__http_conn_write(c, bufs, 2, false);
  }
  air__buf_cleanup(&b);
  air__buf_cleanup(&body);
  return rc;
}

int air__http_head_reject(air__http_head *h, int status,
                          const air__http_field *fields, size_t n_fields,
                          const void *body, size_t body_n) {
  air__http_conn *c = h->conn;
  if (h->answered) return AIR_ESTATE;
  h->answered = true;
  if (status < 400 || status > 599) {
    air__http_write_error(c, 500, "internal error: invalid response");
    return AIR_EINVAL;
  }
  c->keep_alive = false; /* the body that follows is never read */
  char head[HEAD_STACK_BYTES];
  air__buf b;
  air__buf_init_on(&b, AIR__HTTP_MAX_RESPONSE_HEAD_BYTES, head, sizeof(head));
  int rc = build_head(c, &b, status, fields, n_fields, AIR__RESP_FIXED,
                      (uint64_t)body_n);
  if (rc == 0) {
    uv_buf_t bufs[2] = {air__http_buf(b.p, b.n), air__http_buf(body, body_n)};
    rc = air__http_conn_write(c, bufs, body_n == 0 ? 1 : 2, false);
  } else if (rc == AIR_EINVAL || rc == AIR_ETOOBIG) {
    air__http_write_error(c, status, reason_phrase(status));
  }
  air__buf_cleanup(&b);
  return rc;
}

/* The handler may only answer a request it holds, on a live connection. */
static int check_live(air__http_req *req) {
  air__http_conn *c = req->conn;
  if (c->gone || c->state != AIR__CONN_HANDLING || c->hung)
    return AIR_ECANCELED;
  return 0;
}

const air__http_request *air__http_req_msg(const air__http_req *req) {
  return air__http_reader_msg(&req->conn->rd);
}

void air__http_req_on_disconnect(air__http_req *req, air__http_req_cb cb,
                                 void *data) {
  req->on_disconnect = cb;
  req->disconnect_data = data;
}

void air__http_req_on_drain(air__http_req *req, air__http_req_cb cb,
                            void *data) {
  req->on_drain = cb;
  req->drain_data = data;
}

bool air__http_req_disconnected(const air__http_req *req) {
  return req->conn->gone || req->conn->state == AIR__CONN_CLOSED;
}

size_t air__http_req_queued(const air__http_req *req) {
  air__http_conn *c = req->conn;
  if (c->state == AIR__CONN_CLOSED) return 0;
  return uv_stream_get_write_queue_size((const uv_stream_t *)&c->tcp);
}

/* Answers 500 in place of a response the handler got wrong. */
static void fail_500(air__http_conn *c) {
  air__http_write_error(c, 500, "internal error: invalid response");
}

int air__http_respond(air__http_req *req, int status,
                      const air__http_field *fields, size_t n_fields,
                      const void *body, size_t body_n) {
  air__http_conn *c = req->conn;
  int rc = check_live(req);
  if (rc != 0) {
    air__http_conn_finish(c, AIR__FINISH_DONE);
    return rc;
  }
  if (req->resp != AIR__RESP_NONE) {
    air__http_conn_finish(c, AIR__FINISH_CUT);
    return AIR_ESTATE;
  }
  bool no_body = req->head_only || status == 204 || status == 304;
  char head[HEAD_STACK_BYTES];
  air__buf b;
  air__buf_init_on(&b, AIR__HTTP_MAX_RESPONSE_HEAD_BYTES, head, sizeof(head));
  rc = build_head(c, &b, status, fields, n_fields, AIR__RESP_FIXED,
                  (uint64_t)body_n);
  if (rc == 0) {
    uv_buf_t bufs[2] = {air__http_buf(b.p, b.n), air__http_buf(body, body_n)};
    int wrc =
        air__http_conn_write(c, bufs, no_body || body_n == 0 ? 1 : 2, false);
    if (wrc == AIR_ENOMEM) rc = wrc;
    if (wrc == AIR_ECANCELED) rc = wrc;
  } else if (rc == AIR_EINVAL || rc == AIR_ETOOBIG) {
    fail_500(c);
  }
  air__buf_cleanup(&b);
  air__http_conn_finish(c, AIR__FINISH_DONE);
  return rc;
}

/* Writes bufs, after the lazy head when one is pending (one write). */
static int send_bufs(air__http_req *req, const uv_buf_t *bufs, unsigned n,
                     bool capped) {
  if (req->lazy_head == NULL)
    return air__http_conn_write(req->conn, bufs, n, capped);
  uv_buf_t all[6];
  all[0] = air__http_buf(req->lazy_head, req->lazy_n);
  for (unsigned i = 0; i < n && i < 5; i++) all[i + 1] = bufs[i];
  int rc = air__http_conn_write(req->conn, all, n + 1, false);
  free(req->lazy_head);
  req->lazy_head = NULL;
  req->lazy_n = 0;
  return rc;
}

static int begin(air__http_req *req, int status, const air__http_field *fields,
                 size_t n_fields, int64_t length, bool lazy);

int air__http_begin(air__http_req *req, int status,
                    const air__http_field *fields, size_t n_fields,
                    int64_t length) {
  return begin(req, status, fields, n_fields, length, false);
}

int air__http_begin_lazy(air__http_req *req, int status,
                         const air__http_field *fields, size_t n_fields) {
  return begin(req, status, fields, n_fields, -1, true);
}

static int begin(air__http_req *req, int status, const air__http_field *fields,
                 size_t n_fields, int64_t length, bool lazy) {
  air__http_conn *c = req->conn;
  int rc = check_live(req);
  if (rc != 0) return rc;
  if (req->resp != AIR__RESP_NONE) return AIR_ESTATE;
  int framing = AIR__RESP_FIXED;
  if (status == 204 || status == 304) {
    length = 0;
  } else if (length < 0) {
    framing = air__http_req_msg(req)->version_minor >= 1 ? AIR__RESP_CHUNKED
                                                         : AIR__RESP_EOF;
  }
  bool keep = c->keep_alive;
  if (framing == AIR__RESP_EOF) c->keep_alive = false;
  char head[HEAD_STACK_BYTES];
  air__buf b;
  air__buf_init_on(&b, AIR__HTTP_MAX_RESPONSE_HEAD_BYTES, head, sizeof(head));
  rc = build_head(c, &b, status, fields, n_fields, framing,
                  length < 0 ? 0 : (uint64_t)length);
  if (rc == 0 && lazy) {
    size_t n;
    req->lazy_head = air__buf_take(&b, &n);
    req->lazy_n = n;
    if (req->lazy_head == NULL) rc = AIR_ENOMEM;
  } else if (rc == 0) {
    uv_buf_t buf = air__http_buf(b.p, b.n);
    rc = air__http_conn_write(c, &buf, 1, false);
  }
  air__buf_cleanup(&b);
  if (rc != 0) {
    c->keep_alive = keep;
    return rc;
  }
  req->resp = framing;
  req->left = length < 0 ? 0 : (uint64_t)length;
  if (status == 204 || status == 304) req->head_only = true;
  return 0;
}

/* Writes "<hex size>\r\n" + the bytes + "\r\n" (+ the last chunk). */
static int write_chunk(air__http_req *req, const void *p, size_t n, bool last) {
  static const char hex[] = "0123456789abcdef";
  char size[24];
  size_t i = sizeof(size);
  size[--i] = '\n';
  size[--i] = '\r';
  size_t v = n;
  do {
    size[--i] = hex[v & 15];
    v >>= 4;
  } while (v != 0);
  uv_buf_t bufs[4] = {air__http_buf(size + i, (sizeof(size) - i)),
                      air__http_buf(p, n), air__http_buf("\r\n", 2),
                      air__http_buf("0\r\n\r\n", 5)};
  return send_bufs(req, bufs, last ? 4 : 3, true);
}

static int write_body(air__http_req *req, const void *p, size_t n, bool last) {
  int rc = check_live(req);
  if (rc != 0) return rc;
  if (req->resp == AIR__RESP_NONE) return AIR_ESTATE;
  if (n == 0) return 0;
  if (req->resp == AIR__RESP_FIXED) {
    if (n > req->left) return AIR_ESTATE;
  }
  if (req->head_only) {
    if (req->resp == AIR__RESP_FIXED) req->left -= n;
    return 0;
  }
  if (req->resp == AIR__RESP_CHUNKED) {
    rc = write_chunk(req, p, n, last);
  } else {
    uv_buf_t buf = air__http_buf(p, n);
    rc = send_bufs(req, &buf, 1, true);
  }
  if (rc != 0) return rc;
  if (req->resp == AIR__RESP_FIXED) req->left -= n;
  if (air__http_req_queued(req) > 0) req->want_drain = true;
  return 0;
}

int air__http_write(air__http_req *req, const void *p, size_t n) {
  return write_body(req, p, n, false);
}

int air__http_end_with(air__http_req *req, const void *p, size_t n) {
  if (n == 0 || req->resp != AIR__RESP_CHUNKED || req->head_only) {
    int rc = air__http_write(req, p, n);
    if (rc == 0) return air__http_end(req);
    air__http_abort(req);
    return rc;
  }
  int rc = write_body(req, p, n, true);
  if (rc != 0) {
    air__http_conn_finish(req->conn, AIR__FINISH_CUT);
    return rc;
  }
  air__http_conn_finish(req->conn, AIR__FINISH_DONE);
  return 0;
}

int air__http_end(air__http_req *req) {
  air__http_conn *c = req->conn;
  int rc = check_live(req);
  if (rc != 0) {
    air__http_conn_finish(c, AIR__FINISH_DONE);
    return rc;
  }
  if (req->resp == AIR__RESP_NONE) {
    fail_500(c);
    air__http_conn_finish(c, AIR__FINISH_DONE);
    return AIR_ESTATE;
  }
  if (req->resp == AIR__RESP_FIXED && req->left > 0) {
    air__http_conn_finish(c, AIR__FINISH_CUT);
    return AIR_ESTATE;
  }
  if (req->resp == AIR__RESP_CHUNKED && !req->head_only) {
    uv_buf_t buf = air__http_buf("0\r\n\r\n", 5);
    rc = send_bufs(req, &buf, 1, false);
  } else if (req->lazy_head != NULL) {
    rc = send_bufs(req, NULL, 0, false);
  }
  air__http_conn_finish(c, AIR__FINISH_DONE);
  return rc;
}

void air__http_abort(air__http_req *req) {
  air__http_conn_finish(req->conn, AIR__FINISH_CUT);
}

void air__http_reset(air__http_req *req) {
  air__http_conn_finish(req->conn, AIR__FINISH_RESET);
}

void air__http_hang(air__http_req *req) {
  air__http_conn_finish(req->conn, AIR__FINISH_HANG);
}
