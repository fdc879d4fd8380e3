/*
 * One attempt's HTTP conversation with its upstream (upstream.h): the
 * request's headers and URL, the response headers kept, the failure's
 * strings, and the one timer behind an exchange's deadlines.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "dialect.h"
#include "limits.h"
#include "upstream.h"

/* The request's header lines, its URL and a bearer credential start on the
 * stack of air__upstream_send: they usually fit. */
#define SEND_STACK_BYTES 1024

/* ---- the attempt --------------------------------------------------------- */

void air__upstream_begin(air__upstream *u) {
  u->status = 0;
  u->have_fail = false;
  u->hv = NULL;
  u->n_hv = 0;
}

void air__upstream_init(air__upstream *u) {
  u->key = NULL;
  air__upstream_begin(u);
  air__buf_init(&u->kept, AIR__MAX_KEPT_HEADER_BYTES);
  air__buf_init(&u->strs, AIR__MAX_FAILURE_TEXT_BYTES);
}

void air__upstream_cleanup(air__upstream *u) {
  air__buf_cleanup(&u->kept);
  air__buf_cleanup(&u->strs);
}

int air__upstream_key(air__upstream *u, const air__provider *p) {
  u->key = NULL;
  if (p->api_key_env == NULL) return 0;
  u->key = p->api_key;
  if (u->key != NULL && u->key[0] != '\0') return 0;
  char msg[2 * AIR__MAX_NAME_BYTES + 64];
  snprintf(msg, sizeof(msg), "%s is not set: no API key for provider %s",
           p->api_key_env, p->name);
  air__upstream_fail(u, AIR_REASON_AUTH, 0, NULL, NULL, msg, AIR_TRANSPORT_OK);
  return 1;
}

void air__upstream_keep_headers(air__upstream *u, const air_header *h,
                                size_t n) {
  air__buf_reset(&u->kept);
  u->hv = NULL;
  u->n_hv = 0;
  /* The strings, then the array (8-aligned) after them in the same buffer,
   * pointing into it once nothing more moves it: one allocation of
   * exactly what they take, sized to what the upstream sent. Failing
   * that, the appends fail. */
  air_header tmp[AIR__MAX_KEPT_HEADERS];
  size_t k = 0, need = 0;
  size_t m = n < AIR__MAX_KEPT_HEADERS ? n : AIR__MAX_KEPT_HEADERS;
  if (m == 0) return;
  for (size_t i = 0; i < m; i++) need += h[i].name_len + h[i].value_len;
  if (air__buf_reserve(&u->kept, need + 8 + m * sizeof(tmp[0])) != 0) return;
  for (size_t i = 0; i < n && k < AIR__MAX_KEPT_HEADERS; i++) {
    size_t a = u->kept.n;
    if (air__buf_add(&u->kept, h[i].name, h[i].name_len) != 0) break;
    size_t b = u->kept.n;
    if (air__buf_add(&u->kept, h[i].value, h[i].value_len) != 0) break;
    tmp[k].name = (const char *)(uintptr_t)a;
    tmp[k].value = (const char *)(uintptr_t)b;
    tmp[k].name_len = h[i].name_len;
    tmp[k].value_len = h[i].value_len;
    k++;
  }
  size_t at;
  if (k == 0 ||
      air__buf_add_aligned(&u->kept, tmp, k * sizeof(tmp[0]), &at) != 0)
    return;
  u->hv = (air_header *)(void *)(u->kept.p + at);
  for (size_t i = 0; i < k; i++) {
    u->hv[i].name = u->kept.p + (uintptr_t)u->hv[i].name;
    u->hv[i].value = u->kept.p + (uintptr_t)u->hv[i].value;
  }
  u->n_hv = k;
}

const char *air__upstream_keep(air__upstream *u, const char *s) {
  if (s == NULL) return NULL;
  size_t off = u->strs.n;
  size_t kn = u->key ? strlen(u->key) : 0;
  int rc = 0;
  while (rc == 0 && *s) {
    const char *hit = kn >= 8 ? strstr(s, u->key) : NULL;
    if (hit == NULL) {
      rc = air__buf_adds(&u->strs, s);
      break;
    }
    rc = air__buf_add(&u->strs, s, (size_t)(hit - s));
    if (rc == 0) rc = air__buf_adds(&u->strs, "[redacted]");
    s = hit + kn;
  }
  if (rc == 0) rc = air__buf_addc(&u->strs, '\0');
  /* An offset + 1: NULL stays free for "none". */
  return rc == 0 ? (const char *)(uintptr_t)(off + 1) : NULL;
}

const char *air__upstream_str(const air__upstream *u, const char *off) {
  return off == NULL ? NULL : u->strs.p + ((uintptr_t)off - 1);
}

void air__upstream_fail(air__upstream *u, air_reason reason, int status,
                        const char *type, const char *code, const char *message,
                        air_transport_err transport) {
  air__buf_reset(&u->strs);
  memset(&u->fail, 0, sizeof(u->fail));
  u->fail.reason = reason;
  u->fail.status = status;
  u->fail.transport = transport;
  const char *t = air__upstream_keep(u, type), *c = air__upstream_keep(u, code),
             *m = air__upstream_keep(u, message), *rid = NULL;
  for (size_t i = 0; i < u->n_hv; i++) {
    const air_header *h = &u->hv[i];
    if ((h->name_len == 12 && strncasecmp(h->name, "x-request-id", 12) == 0) ||
        (h->name_len == 10 && strncasecmp(h->name, "request-id", 10) == 0)) {
      char tmp[AIR__MAX_UPSTREAM_REQUEST_ID_BYTES + 1];
      size_t n =
          h->value_len < sizeof(tmp) - 1 ? h->value_len : sizeof(tmp) - 1;
      memcpy(tmp, h->value, n);
      tmp[n] = '\0';
      rid = air__upstream_keep(u, tmp);
    }
  }
  u->fail.type = air__upstream_str(u, t);
  u->fail.code = air__upstream_str(u, c);
  u->fail.message = air__upstream_str(u, m);
  u->fail.request_id = air__upstream_str(u, rid);
  u->fail.headers = u->hv;
  u->fail.n_headers = u->n_hv;
  u->have_fail = true;
}

/* "upstream answered HTTP 503": the failure when the body says nothing. */
static void fail_status(air__upstream *u, const char *type, const char *code,
                        const char *message) {
  char what[64];
  if (message == NULL) {
    snprintf(what, sizeof(what), "upstream answered HTTP %d", u->status);
    message = what;
  }
  air__upstream_fail(u, AIR_REASON_NONE, u->status, type, code, message,
                     AIR_TRANSPORT_OK);
}

int air__upstream_error_piece(air__upstream *u, air__buf *body, const char *p,
                              size_t n) {
  size_t room = body->n < AIR__MAX_ERROR_BODY_BYTES
                    ? AIR__MAX_ERROR_BODY_BYTES - body->n
                    : 0;
  if (room == 0) return 0;
  if (air__buf_add(body, p, n < room ? n : room) == 0) return 0;
  /* No memory for the diagnostic body: the status is the failure (a stop
   * always records one: never an empty success). */
  fail_status(u, NULL, NULL, NULL);
  return -1;
}

void air__upstream_fail_error_body(air__upstream *u, const air__buf *body) {
  air__buf tmp;
  air__buf_init(&tmp, AIR__MAX_FAILURE_TEXT_BYTES);
  air_failure f;
  memset(&f, 0, sizeof(f));
  air__parse_error_body(body->p, body->n, &tmp, &f);
  fail_status(u, f.type, f.code, f.message);
  air__buf_cleanup(&tmp);
}

/* ---- the request --------------------------------------------------------- */

/* The request's header lines: libcurl copies them, so they live on the
 * stack of air__upstream_send only. */
typedef struct hdrs {
  air__buf buf;
  size_t off[AIR__MAX_UPSTREAM_HEADERS];
  size_t n;
} hdrs;

static int add_header(hdrs *hl, const char *name, size_t name_len,
                      const char *value, size_t value_len) {
  if (hl->n >= AIR__MAX_UPSTREAM_HEADERS) return AIR_ETOOBIG;
  /* A header with CR or LF could split the request: never sent. */
  if (memchr(value, '\r', value_len) || memchr(value, '\n', value_len) ||
      memchr(name, '\r', name_len) || memchr(name, '\n', name_len))
    return 0;
  size_t off = hl->buf.n;
  int rc = air__buf_add(&hl->buf, name, name_len);
  if (rc == 0) rc = air__buf_add(&hl->buf, ": ", 2);
  if (rc == 0) rc = air__buf_add(&hl->buf, value, value_len);
  if (rc == 0) rc = air__buf_addc(&hl->buf, '\0');
  if (rc != 0) return rc;
  hl->off[hl->n++] = off;
  return 0;
}

static int add_header_s(hdrs *hl, const char *name, const char *value) {
  return add_header(hl, name, strlen(name), value, strlen(value));
}

/*
 * Caller headers named in forward_headers are copied upstream, except those
 * that carry credentials or HTTP framing, which only airetry sets.
 */
static bool forwardable(const char *name, size_t n) {
  static const char *const never[] = {"authorization",
                                      "x-api-key",
                                      "host",
                                      "content-length",
                                      "transfer-encoding",
                                      "connection",
                                      "content-type",
                                      "accept",
                                      "anthropic-version",
                                      "expect",
                                      "upgrade",
                                      "te",
                                      "trailer",
                                      "proxy-authorization",
                                      "cookie"};
  for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
    if (strlen(never[i]) == n && strncasecmp(never[i], name, n) == 0)
      return false;
  return true;
}

/* The request's headers: ours (with the key as the provider's dialect
 * expects it), the provider's, the traceparent, the caller's forwarded
 * ones. */
static int add_headers(const air__upstream_req *r, const char *key, hdrs *hl) {
  const air__provider *p = r->provider;
  int rc = add_header_s(hl, "Content-Type", "application/json");
  if (rc == 0) rc = add_header_s(hl, "Accept", r->accept);
  if (rc == 0) rc = add_header_s(hl, "User-Agent", "airetry/" AIR_VERSION);
  bool has_version = false;
  for (size_t i = 0; i < p->n_headers; i++)
    if (strcasecmp(p->headers[i].name, "anthropic-version") == 0)
      has_version = true;
  if (rc == 0 && p->api == AIR_DIALECT_ANTHROPIC) {
    if (key != NULL) rc = add_header_s(hl, "x-api-key", key);
    if (rc == 0 && !has_version)
      rc = add_header_s(hl, "anthropic-version", "2023-06-01");
  } else if (rc == 0 && key != NULL) {
    char bmem[SEND_STACK_BYTES];
    air__buf bearer;
    air__buf_init_on(&bearer, AIR__MAX_UPSTREAM_HEADER_BYTES, bmem,
                     sizeof(bmem));
    rc = air__buf_adds(&bearer, "Bearer ");
    if (rc == 0) rc = air__buf_adds(&bearer, key);
    if (rc == 0) rc = add_header(hl, "Authorization", 13, bearer.p, bearer.n);
    air__buf_cleanup(&bearer);
  }
  for (size_t i = 0; rc == 0 && i < p->n_headers; i++)
    rc = add_header_s(hl, p->headers[i].name, p->headers[i].value);
  if (rc == 0 && r->traceparent != NULL) /* docs/design.md §5, Traces */
    rc = add_header_s(hl, "traceparent", r->traceparent);
  for (const char *const *f = r->forward; rc == 0 && f && *f; f++) {
    const char *colon = strchr(*f, ':');
    if (colon == NULL || !forwardable(*f, (size_t)(colon - *f))) continue;
    if (r->traceparent != NULL && colon - *f == 11 &&
        strncasecmp(*f, "traceparent", 11) == 0)
      continue; /* ours replaces the caller's */
    const char *v = colon + 1;
    while (*v == ' ') v++;
    rc = add_header(hl, *f, (size_t)(colon - *f), v, strlen(v));
  }
  return rc;
}

void air__upstream_too_big(air__upstream *u) {
  air__upstream_fail(u, AIR_REASON_BAD_REQUEST, 0, NULL, NULL,
                     "upstream request over the size limits", AIR_TRANSPORT_OK);
}

int air__upstream_send(air__upstream *u, const air__transport_if *tr,
                       const air__upstream_req *r, const air__xfer_cb *cb,
                       void **xfer) {
  /* Both are built and dropped here: on the stack when they fit. */
  char hmem[SEND_STACK_BYTES], umem[SEND_STACK_BYTES];
  hdrs hl;
  air__buf_init_on(&hl.buf, AIR__MAX_UPSTREAM_HEADER_BYTES, hmem, sizeof(hmem));
  hl.n = 0;
  int rc = add_headers(r, u->key, &hl);
  const char *lines[AIR__MAX_UPSTREAM_HEADERS + 1];
  for (size_t i = 0; i < hl.n; i++) lines[i] = hl.buf.p + hl.off[i];
  lines[hl.n] = NULL;
  air__buf url;
  air__buf_init_on(&url, AIR__MAX_URL_BYTES, umem, sizeof(umem));
  const char *base = r->provider->base_url;
  size_t bl = strlen(base);
  while (bl > 0 && base[bl - 1] == '/') bl--;
  if (rc == 0) rc = air__buf_add(&url, base, bl);
  if (rc == 0) rc = air__buf_adds(&url, r->path);
  air__xfer_req x = {
      .url = url.p,
      .headers = lines,
      .body = r->body,
      .body_len = r->body_len,
      .get = r->get,
      .connect_ms = r->target->timeouts.connect_ms,
      .target = r->target->name,
  };
  int started = rc == 0 ? tr->ops->start(tr->impl, &x, cb, xfer) : rc;
  air__buf_cleanup(&hl.buf); /* the transport keeps copies */
  air__buf_cleanup(&url);
  if (rc != 0) {
    air__upstream_too_big(u);
    return 1;
  }
  if (started != 0) {
    air__upstream_fail(u, AIR_REASON_NETWORK, 0, NULL, NULL,
                       "could not start the transfer", AIR_TRANSPORT_CONNECT);
    return 1;
  }
  return 0;
}

/* ---- the deadlines ------------------------------------------------------- */

int air__deadlines_open(air__deadlines *d, const air__loop *loop,
                        const air_clock *clock, air__timer_fn fire, void *arg) {
  d->loop = *loop;
  d->clock = clock;
  d->armed = 0;
  d->timer = d->loop.ops->timer_new(d->loop.impl, fire, arg);
  return d->timer != NULL ? 0 : AIR_ENOMEM;
}

void air__deadlines_close(air__deadlines *d, air__timer_fn closed, void *arg) {
  d->loop.ops->timer_close(d->loop.impl, d->timer, closed, arg);
}

void air__deadlines_arm(air__deadlines *d, uint64_t next) {
  if (next == 0) {
    if (d->armed != 0) d->loop.ops->timer_stop(d->loop.impl, d->timer);
    d->armed = 0;
    return;
  }
  if (d->armed != 0 && d->armed <= next) return;
  uint64_t now = d->clock->now_ms(d->clock->data);
  d->armed = next;
  d->loop.ops->timer_start(d->loop.impl, d->timer, next > now ? next - now : 0);
}

void air__deadlines_soon(air__deadlines *d, uint64_t now) {
  d->armed = now ? now : 1;
  d->loop.ops->timer_start(d->loop.impl, d->timer, 0);
}

void air__deadlines_stop(air__deadlines *d) {
  d->armed = 0;
  d->loop.ops->timer_stop(d->loop.impl, d->timer);
}

int air__due_pick(const uint64_t *due, size_t n, uint64_t now, uint64_t *best) {
  int which = -1;
  for (size_t i = 0; i < n; i++)
    if (due[i] != 0 && due[i] <= now && (*best == 0 || due[i] < *best)) {
      which = (int)i;
      *best = due[i];
    }
  return which;
}
