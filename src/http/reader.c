/*
 * The request reader: llhttp callbacks store the head into one bounded
 * buffer (offsets, turned into pointers once the head is complete, so the
 * buffer may move while it grows) and the body into another. Every event
 * pauses llhttp, so one feed never reads past the end of a request.
 */
#include <stdlib.h>
#include <string.h>

#include "airetry.h"
#include "reader.h"

/* Buffers larger than this are freed between requests, not kept. */
#define AIR__HTTP_KEEP_BYTES 16384

enum {
  PH_IDLE, /* no byte of the request yet */
  PH_HEAD, /* reading the head */
  PH_BODY, /* head done: body and trailers */
  PH_DONE, /* request complete, waiting for next() */
  PH_FAIL, /* failed for good */
};

/* Records the first failure; llhttp is then stopped by a -1 return. */
static int fail(air__http_reader *r, int status, const char *msg) {
  if (r->status == 0) {
    r->status = status;
    r->error = msg;
  }
  return -1;
}

static int add_head(air__http_reader *r, const char *at, size_t n) {
  int rc = air__buf_add(&r->head, at, n);
  if (rc == AIR_ETOOBIG) return fail(r, 431, "request header fields too large");
  if (rc != 0) return fail(r, 500, "out of memory");
  return 0;
}

/* Bytes of trailers are not kept, only counted against the head limit. */
static int count_trailer(air__http_reader *r, size_t n) {
  r->trailer_bytes += n;
  if (r->trailer_bytes > r->max_header_bytes)
    return fail(r, 431, "request trailer fields too large");
  return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t n) {
  air__http_reader *r = p->data;
  if (r->target_n == 0) r->target = r->head.n;
  r->target_n += n;
  return add_head(r, at, n);
}

static int new_header(air__http_reader *r) {
  if (r->n_hdrs == r->max_headers)
    return fail(r, 431, "too many request header fields");
  if (r->n_hdrs == r->cap_hdrs) {
    size_t cap = r->cap_hdrs ? r->cap_hdrs * 2 : 16;
    if (cap > r->max_headers) cap = r->max_headers;
    air__http_hdr_off *o = realloc(r->offs, cap * sizeof(*o));
    if (o == NULL) return fail(r, 500, "out of memory");
    r->offs = o;
    r->hdrs = (air__http_header *)(void *)o; /* the same slots (see below) */
    r->cap_hdrs = cap;
  }
  air__http_hdr_off *o = &r->offs[r->n_hdrs++];
  o->name = r->head.n;
  o->name_n = 0;
  o->value = r->head.n;
  o->value_n = 0;
  return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n) {
  air__http_reader *r = p->data;
  if (r->phase == PH_BODY) return count_trailer(r, n + 4);
  if (!r->in_field) {
    if (new_header(r) != 0) return -1;
    r->in_field = true;
  }
  r->offs[r->n_hdrs - 1].name_n += n;
  return add_head(r, at, n);
}

static int on_header_field_complete(llhttp_t *p) {
  air__http_reader *r = p->data;
  /* llhttp 8 lets a line start with ':' (an empty name) through. */
  if (r->phase == PH_HEAD &&
      (r->n_hdrs == 0 || r->offs[r->n_hdrs - 1].name_n == 0))
    return fail(r, 400, "empty header name");
  r->in_field = false;
  if (r->phase == PH_HEAD && r->n_hdrs > 0)
    r->offs[r->n_hdrs - 1].value = r->head.n;
  return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n) {
  air__http_reader *r = p->data;
  if (r->phase == PH_BODY) return count_trailer(r, n);
  if (r->n_hdrs == 0) return fail(r, 400, "header value without a name");
  r->offs[r->n_hdrs - 1].value_n += n;
  return add_head(r, at, n);
}

static bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

static air__str trim(air__str s) {
  while (s.n > 0 && is_blank(s.p[0])) {
    s.p++;
    s.n--;
  }
  while (s.n > 0 && is_blank(s.p[s.n - 1])) s.n--;
  return s;
}

/* Splits the request-target into path and query (origin-, absolute- and
 * asterisk-form; authority-form has no path and gets ""). */
static void split_target(air__http_request *m) {
  const char *p = m->target.p;
  size_t n = m->target.n;
  size_t start = 0;
  if (n > 0 && p[0] != '/' && p[0] != '*') {
    /* absolute-form: skip "scheme://authority" */
    const char *sep = NULL;
    for (size_t i = 0; i + 2 < n; i++) {
      if (p[i] == ':' && p[i + 1] == '/' && p[i + 2] == '/') {
        sep = p + i + 3;
        break;
      }
    }
    start = n;
    if (sep != NULL) {
      start = (size_t)(sep - p);
      while (start < n && p[start] != '/' && p[start] != '?') start++;
    }
  }
  size_t q = start;
  while (q < n && p[q] != '?') q++;
  m->path.p = p + start;
  m->path.n = q - start;
  if (m->path.n == 0 && start < n) m->path.p = "/", m->path.n = 1;
  if (q < n) {
    m->query.p = p + q + 1;
    m->query.n = n - q - 1;
  } else {
    m->query.p = p + n;
    m->query.n = 0;
  }
}

static int on_headers_complete(llhttp_t *p) {
  air__http_reader *r = p->data;
  air__http_request *m = &r->msg;
  r->phase = PH_BODY;
  r->in_field = false;
  memset(m, 0, sizeof(*m));

  const char *base = r->head.p ? r->head.p : "";
  /* Each slot's offsets become its pointers in place (one array per
   * connection, not two: less memory per held stream); the offsets are read
   * before the slot is written. */
  for (size_t i = 0; i < r->n_hdrs; i++) {
    air__http_hdr_off o = r->offs[i];
    air__http_header h;
    h.name.p = base + o.name;
    h.name.n = o.name_n;
    air__str v = {base + o.value, o.value_n};
    h.value = trim(v);
    r->hdrs[i] = h;
  }
  m->headers = r->hdrs;
  m->n_headers = r->n_hdrs;
  const char *method = llhttp_method_name((llhttp_method_t)p->method);
  m->method.p = method;
  m->method.n = strlen(method);
  m->target.p = base + r->target;
  m->target.n = r->target_n;
  split_target(m);
  m->body.p = "";
  m->version_minor = p->http_minor;
  m->chunked = (p->flags & F_CHUNKED) != 0;
  m->has_content_length = (p->flags & F_CONTENT_LENGTH) != 0;
  m->content_length = m->has_content_length ? p->content_length : 0;
  m->upgrade = p->upgrade != 0;
  m->keep_alive = llhttp_should_keep_alive(p) && !m->upgrade;

  if (p->http_major != 1 || p->http_minor > 1)
    return fail(r, 505, "HTTP version not supported");
  if (m->content_length > r->max_body_bytes)
    return fail(r, 413, "request body too large");
  bool want = false;
  for (size_t i = 0; i < m->n_headers; i++) {
    if (!air__http_str_eq(m->headers[i].name, "expect")) continue;
    if (!air__http_str_eq(m->headers[i].value, "100-continue"))
      return fail(r, 417, "unsupported expectation");
    want = true;
  }
  m->expect_continue =
      want && m->version_minor >= 1 && (m->chunked || m->content_length > 0);
  return HPE_PAUSED;
}

static int on_body(llhttp_t *p, const char *at, size_t n) {
  air__http_reader *r = p->data;
  if (r->admit != NULL && n > 0 &&
      (n > r->max_body_bytes || r->body.n > r->max_body_bytes - n))
    return fail(r, 413, "request body too large");
  if (r->admit != NULL && n > 0 && r->admit(r->admit_data, r->body.n + n) != 0)
    return fail(r, 503,
                "server busy: too many request bodies being read, "
                "retry later");
  int rc = air__buf_add(&r->body, at, n);
  if (rc == AIR_ETOOBIG) return fail(r, 413, "request body too large");
  if (rc != 0) return fail(r, 500, "out of memory");
  return 0;
}

static int on_message_complete(llhttp_t *p) {
  air__http_reader *r = p->data;
  r->phase = PH_DONE;
  r->msg.body.p = r->body.p ? r->body.p : "";
  r->msg.body.n = r->body.n;
  r->msg.keep_alive = llhttp_should_keep_alive(p) && !r->msg.upgrade;
  return HPE_PAUSED;
}

/* Constant callback table (llhttp keeps a pointer to it). */
static const llhttp_settings_t reader_settings = {
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_header_field_complete = on_header_field_complete,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

void air__http_reader_init(air__http_reader *r, size_t max_header_bytes,
                           size_t max_headers, size_t max_body_bytes) {
  memset(r, 0, sizeof(*r));
  r->max_header_bytes = max_header_bytes ? max_header_bytes : 1;
  r->max_headers = max_headers ? max_headers : 1;
  r->max_body_bytes = max_body_bytes;
  air__buf_init(&r->head, r->max_header_bytes);
  air__buf_init(&r->body, max_body_bytes);
  llhttp_init(&r->parser, HTTP_REQUEST, &reader_settings);
  /* Strict parsing: no lenient flag is ever set (they default to off). */
  r->parser.lenient_flags = 0;
  r->parser.data = r;
  r->phase = PH_IDLE;
  r->fold = 4;
}

void air__http_reader_cleanup(air__http_reader *r) {
  air__buf_cleanup(&r->head);
  air__buf_cleanup(&r->body);
  free(r->offs);
  r->offs = NULL;
  r->hdrs = NULL;
  r->n_hdrs = r->cap_hdrs = 0;
}

void air__http_reader_set_admit(air__http_reader *r, air__http_admit_cb cb,
                                void *data) {
  r->admit = cb;
  r->admit_data = data;
}

void air__http_reader_drop_body(air__http_reader *r) {
  air__buf_cleanup(&r->body);
  r->msg.body.p = "";
  r->msg.body.n = 0;
}

static void shrink(air__buf *b) {
  if (b->cap > AIR__HTTP_KEEP_BYTES)
    air__buf_cleanup(b);
  else
    air__buf_reset(b);
}

void air__http_reader_next(air__http_reader *r) {
  shrink(&r->head);
  shrink(&r->body);
  r->n_hdrs = 0;
  r->target = r->target_n = 0;
  r->head_bytes = 0;
  r->fold = 4;
  r->trailer_bytes = 0;
  r->in_field = false;
  r->started = false;
  memset(&r->msg, 0, sizeof(r->msg));
  if (r->phase == PH_DONE) r->phase = PH_IDLE;
}

bool air__http_reader_started(const air__http_reader *r) {
  return r->started;
}

const air__http_request *air__http_reader_msg(const air__http_reader *r) {
  return &r->msg;
}

static air__http_event failed(air__http_reader *r, int status,
                              const char *msg) {
  fail(r, status, msg);
  r->phase = PH_FAIL;
  return AIR__HTTP_FAIL;
}

/*
 * RFC 9112 5.2: a server must reject obs-fold (a header line continued on a
 * line that starts with SP or HTAB). llhttp's strict mode folds it into the
 * value instead, so the head bytes are scanned here, across feeds, up to the
 * empty line that ends the head. The scan starts at the request line: the
 * empty lines llhttp skips before it (RFC 9112 2.2) would otherwise look
 * like that end and hide a fold after them.
 */
static bool has_obs_fold(air__http_reader *r, const char *p, size_t n) {
  size_t i = 0;
  while (i < n && r->fold != 2) {
    if (r->fold == 4) {
      while (i < n && (p[i] == '\r' || p[i] == '\n')) i++;
      if (i < n) r->fold = 0;
      continue;
    }
    if (r->fold == 0) {
      /* Inside a line only its end matters: memchr, not a byte at a time
       * (a byte at a time cost ~2k instructions per request's head). */
      const char *nl = memchr(p + i, '\n', n - i);
      if (nl == NULL) return false;
      i = (size_t)(nl - p) + 1;
      r->fold = 1;
      continue;
    }
    char c = p[i++];
    if (r->fold == 1) {
      if (c == ' ' || c == '\t') return true;
      r->fold = c == '\n' ? 2 : c == '\r' ? 3 : 0;
    } else { /* 3: a CR at the start of a line */
      r->fold = c == '\n' ? 2 : 0;
    }
  }
  return false;
}

air__http_event air__http_reader_feed(air__http_reader *r, const char *p,
                                      size_t n, size_t *used) {
  *used = 0;
  if (r->phase == PH_FAIL) return AIR__HTTP_FAIL;
  if (r->phase == PH_DONE) return AIR__HTTP_DONE;
  if (p == NULL) {
    p = "";
    n = 0;
  }
  if (n > 0) r->started = true;
  if (n > 0 && r->phase == PH_IDLE) r->phase = PH_HEAD;
  bool in_head = r->phase == PH_HEAD || r->phase == PH_IDLE;

  llhttp_errno_t e = llhttp_execute(&r->parser, p, n);
  size_t u = n;
  if (e != HPE_OK) {
    const char *at = llhttp_get_error_pos(&r->parser);
    u = (at != NULL && at >= p && at <= p + n) ? (size_t)(at - p) : 0;
  }
  *used = u;
  /* Only bytes llhttp accepted are scanned, so whatever the feed sizes the
   * first problem in the stream decides the answer. */
  if (in_head && has_obs_fold(r, p, u))
    return failed(r, 400, "obs-fold (a header line starting with a blank)");
  if (in_head) r->head_bytes += u;

  switch (e) {
    case HPE_OK:
      if (in_head && r->head_bytes > r->max_header_bytes)
        return failed(r, 431, "request header fields too large");
      return AIR__HTTP_MORE;
    case HPE_PAUSED:
      llhttp_resume(&r->parser);
      if (in_head && r->head_bytes > r->max_header_bytes)
        return failed(r, 431, "request header fields too large");
      if (r->phase == PH_DONE) return AIR__HTTP_DONE;
      if (r->phase == PH_BODY) {
        if (in_head) return AIR__HTTP_HEAD;
        return AIR__HTTP_MORE; /* not reached: only events pause */
      }
      return failed(r, 500, "unexpected parser pause");
    case HPE_PAUSED_UPGRADE:
      return failed(r, 400, "protocol upgrade not supported");
    case HPE_PAUSED_H2_UPGRADE:
      return failed(r, 505, "HTTP/2 is not supported");
    case HPE_INVALID_VERSION:
      return failed(r, 505, "HTTP version not supported");
    default: {
      if (r->status != 0) return failed(r, r->status, r->error);
      const char *why = llhttp_get_error_reason(&r->parser);
      return failed(r, 400, why ? why : "malformed request");
    }
  }
}

const air__str *air__http_find_header(const air__http_request *m,
                                      const char *name) {
  for (size_t i = 0; i < m->n_headers; i++)
    if (air__http_str_eq(m->headers[i].name, name)) return &m->headers[i].value;
  return NULL;
}

static char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

bool air__http_str_eq(air__str s, const char *lit) {
  size_t i = 0;
  for (; i < s.n; i++) {
    if (lit[i] == '\0' || lower(s.p[i]) != lower(lit[i])) return false;
  }
  return lit[i] == '\0';
}
