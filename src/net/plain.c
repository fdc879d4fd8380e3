/*
 * The plain exchange (plain.h): the engine + the transport for endpoints
 * without a stream. One request body, one response body per attempt.
 *
 * Reentrancy: the transport calls on_head / on_body / on_done from inside
 * libcurl; nothing here removes the transfer from inside on_head or
 * on_body (on_body returns non-zero instead, and the attempt ends in
 * on_done). The consumer is called through tell_failed and the end only:
 * a cancel made inside on_failed is carried out once that call returns,
 * and the consumer hears nothing but on_end from then on. on_end fires from
 * on_done, a timer or a cancel made outside a callback, never inside
 * air__plain_start (the first step runs on the next loop turn) nor inside
 * on_failed; the owner may free the exchange inside it (the memory stays
 * until the timer's close callback).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "engine.h"
#include "limits.h"
#include "plain.h"
#include "dialect.h"
#include "retry_after.h"
#include "state.h"

#define MAX_KEPT_HEADERS 32
#define MAX_REQUEST_HEADERS (AIR__MAX_HEADERS + 16)

enum { T_FIRST_BYTE, T_ATTEMPT, T_WAIT, N_TIMERS };

struct air__plain {
  air__loop loop;
  air__transport_if tr;
  air__plain_opts o;
  air__plain_cb cb;
  const air_clock *clock;
  json_t *doc;  /* the caller's body, parsed once */
  air_state ro; /* the read-only view of o.state (record false) */
  air_run *run;
  air_action act;
  void *xfer;             /* the transfer in flight, or NULL */
  air__timer *timer;      /* armed at the earliest due[] */
  uint64_t due[N_TIMERS]; /* deadlines on the clock; 0 = off */
  bool ended, freeing;
  bool starting; /* inside air__plain_start_on */
  bool kick;     /* the first launch's failure waits for the next
                    loop turn (kick_rc: launch's result) */
  int kick_rc;
  bool end_due;          /* on_end waits for the next loop turn (res) */
  air__plain_result res; /* the end, kept while its delivery waits */
  bool calling;          /* inside the consumer's on_failed */
  bool cancel_pending;   /* a cancel made inside on_failed */
  int status;
  air_failure fail;
  bool have_fail;
  air__buf body; /* the upstream request body */
  air__buf resp; /* the response body (an error body: its first part) */
  air__buf kept; /* copies of the response headers, then hv */
  air__buf strs; /* the failure's strings */
  air_header *hv;
  size_t n_hv;
  const char *key; /* the attempt's upstream key, redacted from failures */
  const char *att_target;
  unsigned att_id;
  uint64_t start_ms, attempt_start, upstream_ms, wait_ms;
  bool has_hint;
  uint64_t hint_ms;
};

static void step(air__plain *p);
static void launched(air__plain *p, int rc);

static uint64_t now_of(const air__plain *p) {
  return p->clock->now_ms(p->clock->data);
}

/* ---- the read-only breaker (record false) -------------------------------- */

/* Closed admits; anything else is passed over as if open, reopening "now"
 * (so when every target is passed over the first is tried). No lease. */
static air__admit ro_try_probe(void *impl, const char *target,
                               uint64_t lease_ms, uint64_t now_ms,
                               uint64_t *reopen_ms, uint64_t *lease) {
  air_state *in = impl;
  (void)lease_ms;
  *lease = 0;
  if (in->ops->mode(in->impl, target, now_ms) == AIR_BREAKER_CLOSED)
    return AIR__ADMIT_YES;
  if (reopen_ms != NULL) *reopen_ms = now_ms;
  return AIR__ADMIT_NO;
}

static void ro_record(void *impl, const char *target, const air__verdict *v,
                      uint64_t now_ms) {
  (void)impl, (void)target, (void)v, (void)now_ms;
}

static void ro_release(void *impl, const char *target, uint64_t lease) {
  (void)impl, (void)target, (void)lease;
}

static void ro_cool(void *impl, const char *target, uint64_t now_ms,
                    uint64_t cool_ms) {
  (void)impl, (void)target, (void)now_ms, (void)cool_ms;
}

static air_breaker_mode ro_mode(void *impl, const char *target,
                                uint64_t now_ms) {
  air_state *in = impl;
  return in->ops->mode(in->impl, target, now_ms);
}

static int ro_sticky_get(void *impl, const char *route, uint64_t now_ms,
                         air__sticky_rec *out) {
  (void)impl, (void)route, (void)now_ms, (void)out;
  return 0;
}

static void ro_sticky_set(void *impl, const char *route, const char *target,
                          uint64_t now_ms) {
  (void)impl, (void)route, (void)target, (void)now_ms;
}

static void ro_destroy(void *impl) {
  (void)impl;
}

static const air__state_ops ro_ops = {
    .try_probe = ro_try_probe,
    .record = ro_record,
    .release = ro_release,
    .cool = ro_cool,
    .mode = ro_mode,
    .sticky_get = ro_sticky_get,
    .sticky_set = ro_sticky_set,
    .configure = NULL,
    .destroy = ro_destroy,
};

/* ---- timers -------------------------------------------------------------- */

static void cancel_now(air__plain *p);

/* Tells the consumer of a failed or skipped attempt (entry i of the log);
 * a cancel it makes is carried out by the caller (cancel_pending). */
static void tell_failed(air__plain *p, size_t i) {
  if (p->ended || p->cancel_pending || p->cb.on_failed == NULL) return;
  p->calling = true;
  p->cb.on_failed(p->cb.data, air_run_attempt(p->run, i));
  p->calling = false;
}

static void rearm(air__plain *p) {
  if (p->kick) { /* the next loop turn */
    p->loop.ops->timer_start(p->loop.impl, p->timer, 0);
    return;
  }
  uint64_t next = 0;
  for (int i = 0; i < N_TIMERS; i++)
    if (p->due[i] != 0 && (next == 0 || p->due[i] < next)) next = p->due[i];
  if (next == 0) {
    p->loop.ops->timer_stop(p->loop.impl, p->timer);
    return;
  }
  uint64_t now = now_of(p);
  p->loop.ops->timer_start(p->loop.impl, p->timer, next > now ? next - now : 0);
}

static void arm(air__plain *p, int which, uint64_t deadline) {
  p->due[which] = deadline != 0 ? deadline : 1;
  rearm(p);
}

static void stop_timers(air__plain *p) {
  for (int i = 0; i < N_TIMERS; i++) p->due[i] = 0;
  p->loop.ops->timer_stop(p->loop.impl, p->timer);
}

static void xfer_cancel(air__plain *p) {
  if (p->xfer != NULL) p->tr.ops->cancel(p->tr.impl, p->xfer);
  p->xfer = NULL;
}

/* ---- the end ------------------------------------------------------------- */

/* "no target of this route serves /v1/embeddings: anthropic/claude (...)"
 * when every target was skipped; kept in strs. */
static const char *skipped_message(air__plain *p, size_t n) {
  air__buf_reset(&p->strs);
  int rc = air__buf_adds(&p->strs, "no target of this route serves ");
  if (rc == 0) rc = air__buf_adds(&p->strs, p->o.endpoint);
  if (rc == 0)
    rc = air__buf_adds(&p->strs, p->o.api == AIR_DIALECT_ANTHROPIC
                                     ? " (it needs an anthropic provider):"
                                     : " (it needs an openai provider):");
  for (size_t i = 0; rc == 0 && i < n; i++) {
    rc = air__buf_adds(&p->strs, i ? ", " : " ");
    if (rc == 0)
      rc = air__buf_adds(&p->strs, air_run_attempt(p->run, i)->target);
  }
  if (rc == 0) rc = air__buf_addc(&p->strs, '\0');
  return rc == 0 ? p->strs.p : "no target of this route serves this endpoint";
}

static void end(air__plain *p, int rc) {
  if (p->ended) return;
  p->ended = true;
  stop_timers(p);
  air__plain_result r;
  memset(&r, 0, sizeof(r));
  air__exchange_result *x = &r.x;
  x->rc = rc;
  x->committed = rc == 0;
  x->reason = rc == 0 ? AIR_REASON_NONE : p->act.reason;
  x->status = rc == 0 ? p->status : p->act.status;
  size_t n = air_run_attempt_count(p->run);
  const air_attempt *last = NULL;
  for (size_t i = n; i > 0 && last == NULL; i--) {
    const air_attempt *a = air_run_attempt(p->run, i - 1);
    if (!a->skipped) last = a;
  }
  x->message = last && rc != 0 ? last->message : "";
  x->target = last ? last->target : "";
  if (last == NULL && n > 0 && rc == AIR_EUPSTREAM)
    x->message = skipped_message(p, n);
  x->answered = rc == 0 ? p->att_target : NULL;
  x->n_attempts = air__run_attempts(p->run);
  x->log = n ? air_run_attempt(p->run, 0) : NULL;
  x->n_log = n;
  x->has_retry_after = p->has_hint;
  x->retry_after_ms = p->hint_ms;
  x->total_ms = now_of(p) - p->start_ms;
  x->first_content_ms = rc == 0 ? x->total_ms : 0;
  x->upstream_wait_ms = p->upstream_ms + p->wait_ms;
  if (rc == 0) {
    r.status = p->status;
    r.body = p->resp.p ? p->resp.p : "";
    r.body_len = p->resp.n;
    r.headers = p->hv;
    r.n_headers = p->n_hv;
  }
  p->res = r;
  if (p->starting || p->calling) {
    p->end_due = true;
    p->loop.ops->timer_start(p->loop.impl, p->timer, 0);
    return;
  }
  p->cb.on_end(p->cb.data, &p->res);
}

/* ---- the attempt's failure ----------------------------------------------- */

/* Copies s into strs with the upstream key replaced by "[redacted]" (an
 * upstream may echo the key it got); an offset + 1, fixed by fix(). */
static const char *keep_str(air__plain *p, const char *s) {
  if (s == NULL) return NULL;
  size_t off = p->strs.n;
  size_t kn = p->key ? strlen(p->key) : 0;
  int rc = 0;
  while (rc == 0 && *s) {
    const char *hit = kn >= 8 ? strstr(s, p->key) : NULL;
    if (hit == NULL) {
      rc = air__buf_adds(&p->strs, s);
      break;
    }
    rc = air__buf_add(&p->strs, s, (size_t)(hit - s));
    if (rc == 0) rc = air__buf_adds(&p->strs, "[redacted]");
    s = hit + kn;
  }
  if (rc == 0) rc = air__buf_addc(&p->strs, '\0');
  return rc == 0 ? (const char *)(uintptr_t)(off + 1) : NULL;
}

static const char *fix(const air__plain *p, const char *off) {
  return off == NULL ? NULL : p->strs.p + ((uintptr_t)off - 1);
}

static void set_fail(air__plain *p, air_reason reason, int status,
                     const char *type, const char *code, const char *message,
                     air_transport_err transport) {
  air__buf_reset(&p->strs);
  memset(&p->fail, 0, sizeof(p->fail));
  p->fail.reason = reason;
  p->fail.status = status;
  p->fail.transport = transport;
  const char *t = keep_str(p, type), *c = keep_str(p, code),
             *m = keep_str(p, message), *rid = NULL;
  for (size_t i = 0; i < p->n_hv; i++) {
    const air_header *h = &p->hv[i];
    if ((h->name_len == 12 && strncasecmp(h->name, "x-request-id", 12) == 0) ||
        (h->name_len == 10 && strncasecmp(h->name, "request-id", 10) == 0)) {
      char tmp[128];
      size_t n =
          h->value_len < sizeof(tmp) - 1 ? h->value_len : sizeof(tmp) - 1;
      memcpy(tmp, h->value, n);
      tmp[n] = '\0';
      rid = keep_str(p, tmp);
    }
  }
  p->fail.type = fix(p, t);
  p->fail.code = fix(p, c);
  p->fail.message = fix(p, m);
  p->fail.request_id = fix(p, rid);
  p->fail.headers = p->hv;
  p->fail.n_headers = p->n_hv;
  p->have_fail = true;
}

/* Hands the failure to the policy and acts on its answer. */
static void attempt_failed(air__plain *p) {
  uint64_t hint = 0;
  p->has_hint = air__retry_after(p->fail.headers, p->fail.n_headers,
                                 p->clock->wall_ms(p->clock->data), &hint) == 1;
  p->hint_ms = hint;
  size_t failed = air_run_attempt_count(p->run) - 1;
  air_run_fail(p->run, p->att_id, &p->fail, now_of(p),
               p->clock->wall_ms(p->clock->data), &p->act);
  tell_failed(p, failed);
  step(p);
}

/* ---- transport callbacks ------------------------------------------------- */

static void keep_headers(air__plain *p, const air_header *h, size_t n) {
  air__buf_reset(&p->kept);
  p->hv = NULL;
  p->n_hv = 0;
  air_header tmp[MAX_KEPT_HEADERS];
  size_t k = 0;
  for (size_t i = 0; i < n && k < MAX_KEPT_HEADERS; i++) {
    size_t a = p->kept.n;
    if (air__buf_add(&p->kept, h[i].name, h[i].name_len) != 0) break;
    size_t b = p->kept.n;
    if (air__buf_add(&p->kept, h[i].value, h[i].value_len) != 0) break;
    tmp[k].name = (const char *)(uintptr_t)a;
    tmp[k].value = (const char *)(uintptr_t)b;
    tmp[k].name_len = h[i].name_len;
    tmp[k].value_len = h[i].value_len;
    k++;
  }
  size_t at;
  if (k == 0 ||
      air__buf_add_aligned(&p->kept, tmp, k * sizeof(tmp[0]), &at) != 0)
    return;
  p->hv = (air_header *)(void *)(p->kept.p + at);
  for (size_t i = 0; i < k; i++) {
    p->hv[i].name = p->kept.p + (uintptr_t)p->hv[i].name;
    p->hv[i].value = p->kept.p + (uintptr_t)p->hv[i].value;
  }
  p->n_hv = k;
}

static bool ok_status(int status) {
  return status >= 200 && status < 300;
}

static void on_head(void *data, int status, const air_header *h, size_t n) {
  air__plain *p = data;
  p->due[T_FIRST_BYTE] = 0;
  rearm(p);
  p->status = status;
  air__run_note_status(p->run, p->att_id, status);
  keep_headers(p, h, n);
}

static int on_body(void *data, const char *s, size_t n) {
  air__plain *p = data;
  if (!ok_status(p->status)) {
    /* An error body is diagnostic: its first part is kept. */
    size_t room = p->resp.n < AIR__MAX_ERROR_BODY_BYTES
                      ? AIR__MAX_ERROR_BODY_BYTES - p->resp.n
                      : 0;
    if (room == 0) return 0;
    if (air__buf_add(&p->resp, s, n < room ? n : room) == 0) return 0;
    /* No memory for the diagnostic body: the status is the failure (a
     * stop always records one: never an empty success). */
    char what[64];
    snprintf(what, sizeof(what), "upstream answered HTTP %d", p->status);
    set_fail(p, AIR_REASON_NONE, p->status, NULL, NULL, what, AIR_TRANSPORT_OK);
    return -1;
  }
  if (air__buf_add(&p->resp, s, n) == 0) return 0;
  char m[128];
  snprintf(m, sizeof(m),
           "response body over limits.max_response_bytes (%llu bytes)",
           (unsigned long long)p->o.cfg->limits.max_response_bytes);
  set_fail(p, AIR_REASON_MALFORMED, p->status, NULL, NULL, m,
           AIR_TRANSPORT_BADBODY);
  return -1;
}

static void on_done(void *data, int rc, air_transport_err kind,
                    bool connect_timeout, const char *msg) {
  air__plain *p = data;
  p->xfer = NULL;
  p->due[T_FIRST_BYTE] = p->due[T_ATTEMPT] = 0;
  rearm(p);
  p->upstream_ms += now_of(p) - p->attempt_start;
  if (rc == AIR_ECANCELED) {
    /* on_body stopped it: the failure is set, and never passed as a
     * success if it were not. */
    if (!p->have_fail)
      set_fail(p, AIR_REASON_MALFORMED, p->status, NULL, NULL,
               "the response could not be read", AIR_TRANSPORT_BADBODY);
  } else if (rc != 0) {
    set_fail(p, connect_timeout ? AIR_REASON_TIMEOUT_CONNECT : AIR_REASON_NONE,
             ok_status(p->status) ? 0 : p->status, NULL, NULL, msg, kind);
  } else if (ok_status(p->status)) {
    json_error_t je;
    json_t *v = json_loadb(p->resp.p ? p->resp.p : "", p->resp.n, 0, &je);
    if (!json_is_object(v))
      set_fail(p, AIR_REASON_MALFORMED, p->status, NULL, NULL,
               "the response body is not a JSON object", AIR_TRANSPORT_BADBODY);
    json_decref(v);
  } else {
    air__buf tmp;
    air__buf_init(&tmp, AIR__MAX_FAILURE_TEXT_BYTES);
    air_failure f;
    memset(&f, 0, sizeof(f));
    air__parse_error_body(p->resp.p, p->resp.n, &tmp, &f);
    char what[64];
    if (f.message == NULL) {
      snprintf(what, sizeof(what), "upstream answered HTTP %d", p->status);
      f.message = what;
    }
    set_fail(p, AIR_REASON_NONE, p->status, f.type, f.code, f.message,
             AIR_TRANSPORT_OK);
    air__buf_cleanup(&tmp);
  }
  if (p->have_fail) {
    attempt_failed(p);
    return;
  }
  /* The whole answer is the first content: the engine commits it (a probe's
   * success is recorded here) and the run is done. */
  air_action a;
  if (air_run_ready_to_commit(p->run, p->att_id, now_of(p), &a) != 0 ||
      air_run_succeed(p->run, p->att_id, now_of(p), &p->act) != 0) {
    end(p, AIR_ESTATE);
    return;
  }
  end(p, 0);
}

/* ---- timers' handlers ---------------------------------------------------- */

static void timeout_fail(air__plain *p, air_reason reason, const char *msg) {
  xfer_cancel(p);
  stop_timers(p);
  p->upstream_ms += now_of(p) - p->attempt_start;
  set_fail(p, reason, p->status, NULL, NULL, msg, AIR_TRANSPORT_OK);
  attempt_failed(p);
}

static void on_timer(void *arg) {
  air__plain *p = arg;
  if (p->end_due) {
    p->end_due = false;
    p->cb.on_end(p->cb.data, &p->res);
    return;
  }
  if (p->ended) return;
  if (p->kick) {
    /* What start could not tell: its first launch failed. */
    p->kick = false;
    launched(p, p->kick_rc);
    step(p);
    if (!p->freeing && !p->ended) rearm(p);
    return;
  }
  uint64_t now = now_of(p);
  int which = -1;
  for (int i = 0; i < N_TIMERS; i++)
    if (p->due[i] != 0 && p->due[i] <= now &&
        (which < 0 || p->due[i] < p->due[which]))
      which = i;
  if (which < 0) {
    rearm(p);
    return;
  }
  p->due[which] = 0;
  switch (which) {
    case T_FIRST_BYTE:
      timeout_fail(p, AIR_REASON_TIMEOUT_FIRST_BYTE,
                   "no response headers within first_byte_ms");
      break;
    case T_ATTEMPT:
      timeout_fail(p, AIR_REASON_TIMEOUT_ATTEMPT,
                   "no complete response within attempt_ms");
      break;
    default:
      p->wait_ms += p->act.wait_ms;
      air_run_wait_done(p->run, p->act.attempt_id, now, &p->act);
      step(p);
      break;
  }
  if (!p->freeing && !p->ended) rearm(p);
}

/* ---- attempts ------------------------------------------------------------ */

typedef struct hdrs {
  air__buf buf;
  size_t off[MAX_REQUEST_HEADERS];
  size_t n;
} hdrs;

static int add_header(hdrs *hl, const char *name, size_t name_len,
                      const char *value, size_t value_len) {
  if (hl->n >= MAX_REQUEST_HEADERS) return AIR_ETOOBIG;
  /* A value with CR or LF could split the request: never sent. */
  if (memchr(value, '\r', value_len) || memchr(value, '\n', value_len) ||
      memchr(name, '\r', name_len) || memchr(name, '\n', name_len))
    return 0;
  size_t off = hl->buf.n;
  int rc = air__buf_add(&hl->buf, name, name_len);
  if (rc == 0) rc = air__buf_add(&hl->buf, ": ", 2);
  if (rc == 0) rc = air__buf_add(&hl->buf, value, value_len);
  if (rc == 0) rc = air__buf_addc(&hl->buf, '\0');
  if (rc == 0) hl->off[hl->n++] = off;
  return rc;
}

static int add_header_s(hdrs *hl, const char *name, const char *value) {
  return add_header(hl, name, strlen(name), value, strlen(value));
}

/* Forwarded caller headers that carry credentials or framing are never
 * sent: only airetry sets those. */
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

static int add_headers(const air__plain *p, const air__provider *pv,
                       const char *key, hdrs *hl) {
  int rc = add_header_s(hl, "Content-Type", "application/json");
  if (rc == 0) rc = add_header_s(hl, "Accept", "application/json");
  if (rc == 0) rc = add_header_s(hl, "User-Agent", "airetry/" AIR_VERSION);
  bool has_version = false;
  for (size_t i = 0; i < pv->n_headers; i++)
    if (strcasecmp(pv->headers[i].name, "anthropic-version") == 0)
      has_version = true;
  if (rc == 0 && pv->api == AIR_DIALECT_ANTHROPIC) {
    if (key != NULL) rc = add_header_s(hl, "x-api-key", key);
    if (rc == 0 && !has_version)
      rc = add_header_s(hl, "anthropic-version", "2023-06-01");
  } else if (rc == 0 && key != NULL) {
    air__buf bearer;
    air__buf_init(&bearer, AIR__MAX_UPSTREAM_HEADER_BYTES);
    rc = air__buf_adds(&bearer, "Bearer ");
    if (rc == 0) rc = air__buf_adds(&bearer, key);
    if (rc == 0) rc = add_header(hl, "Authorization", 13, bearer.p, bearer.n);
    air__buf_cleanup(&bearer);
  }
  for (size_t i = 0; rc == 0 && i < pv->n_headers; i++)
    rc = add_header_s(hl, pv->headers[i].name, pv->headers[i].value);
  for (const char *const *f = p->o.forward; rc == 0 && f && *f; f++) {
    const char *colon = strchr(*f, ':');
    if (colon == NULL || !forwardable(*f, (size_t)(colon - *f))) continue;
    const char *v = colon + 1;
    while (*v == ' ') v++;
    rc = add_header(hl, *f, (size_t)(colon - *f), v, strlen(v));
  }
  return rc;
}

/* The caller's body with "model" set to the target's model. */
static int build_body(air__plain *p, const char *model) {
  air__buf_reset(&p->body);
  json_t *m = json_string(model);
  if (m == NULL || json_object_set_new(p->doc, "model", m) != 0)
    return AIR_ENOMEM;
  char *text = json_dumps(p->doc, JSON_COMPACT);
  if (text == NULL) return AIR_ENOMEM;
  int rc = air__buf_adds(&p->body, text);
  free(text);
  return rc;
}

/* Starts the current ATTEMPT. 0: in flight; 1: failed at once (fail set);
 * 2: the target speaks another dialect (skipped). */
static int launch(air__plain *p) {
  const air__target *t = air__run_target(p->run);
  const air_config *cfg = p->o.cfg;
  const air__provider *pv = &cfg->providers[t->provider];
  p->att_target = p->act.target;
  p->att_id = p->act.attempt_id;
  p->attempt_start = now_of(p);
  p->status = 0;
  p->have_fail = false;
  p->hv = NULL;
  p->n_hv = 0;
  air__buf_reset(&p->resp);
  if (pv->api != p->o.api) return 2;
  p->key = NULL;
  if (pv->api_key_env != NULL) {
    p->key = pv->api_key;
    if (p->key == NULL || p->key[0] == '\0') {
      char msg[2 * AIR__MAX_NAME_BYTES + 64];
      snprintf(msg, sizeof(msg), "%s is not set: no API key for provider %s",
               pv->api_key_env, pv->name);
      set_fail(p, AIR_REASON_AUTH, 0, NULL, NULL, msg, AIR_TRANSPORT_OK);
      return 1;
    }
  }
  int rc = p->o.get ? 0 : build_body(p, t->model);
  hdrs hl;
  air__buf_init(&hl.buf, AIR__MAX_UPSTREAM_HEADER_BYTES);
  hl.n = 0;
  if (rc == 0) rc = add_headers(p, pv, p->key, &hl);
  const char *lines[MAX_REQUEST_HEADERS + 1];
  for (size_t i = 0; i < hl.n; i++) lines[i] = hl.buf.p + hl.off[i];
  lines[hl.n] = NULL;
  air__buf url;
  air__buf_init(&url, AIR__MAX_URL_BYTES);
  size_t bl = strlen(pv->base_url);
  while (bl > 0 && pv->base_url[bl - 1] == '/') bl--;
  if (rc == 0) rc = air__buf_add(&url, pv->base_url, bl);
  if (rc == 0) rc = air__buf_adds(&url, p->o.path);
  air__xfer_req r = {
      .url = url.p,
      .headers = lines,
      .body = p->o.get ? NULL : p->body.p,
      .body_len = p->o.get ? 0 : p->body.n,
      .get = p->o.get,
      .connect_ms = t->timeouts.connect_ms,
      .target = t->name,
  };
  air__xfer_cb cb = {on_head, on_body, on_done, p};
  int started = rc == 0 ? p->tr.ops->start(p->tr.impl, &r, &cb, &p->xfer) : rc;
  air__buf_cleanup(&hl.buf);
  air__buf_cleanup(&url);
  if (rc != 0) {
    set_fail(p, AIR_REASON_BAD_REQUEST, 0, NULL, NULL,
             "upstream request over the size limits", AIR_TRANSPORT_OK);
    return 1;
  }
  if (started != 0) {
    set_fail(p, AIR_REASON_NETWORK, 0, NULL, NULL,
             "could not start the transfer", AIR_TRANSPORT_CONNECT);
    return 1;
  }
  arm(p, T_FIRST_BYTE, p->attempt_start + t->timeouts.first_byte_ms);
  arm(p, T_ATTEMPT, p->act.deadline_ms);
  return 0;
}

/* After launch returned rc (non-zero): the run is told (a skipped
 * target, or the attempt's failure) and then the consumer. */
static void launched(air__plain *p, int rc) {
  size_t i = air_run_attempt_count(p->run) - 1;
  if (rc == 2)
    air__run_skip(p->run, p->att_id, p->o.endpoint,
                  "the provider does not serve this endpoint", now_of(p),
                  &p->act);
  else
    air_run_fail(p->run, p->att_id, &p->fail, now_of(p),
                 p->clock->wall_ms(p->clock->data), &p->act);
  tell_failed(p, i);
}

static void step(air__plain *p) {
  for (;;) {
    if (p->ended) return;
    if (p->cancel_pending) {
      cancel_now(p);
      return;
    }
    switch (p->act.kind) {
      case AIR_ACT_ATTEMPT: {
        int l = launch(p);
        if (l == 0) return;
        if (p->starting) {
          /* Inside start: the consumer hears of it on the next turn. */
          p->kick = true;
          p->kick_rc = l;
          rearm(p);
          return;
        }
        launched(p, l);
        continue;
      }
      case AIR_ACT_WAIT:
        arm(p, T_WAIT, now_of(p) + p->act.wait_ms);
        return;
      case AIR_ACT_FAIL:
        end(p, p->act.reason == AIR_REASON_ABORTED ? AIR_ECANCELED
                                                   : AIR_EUPSTREAM);
        return;
      default:
        /* DONE comes only from on_done; COMMIT, CANCEL and CONTINUE answer
         * events this exchange never sends: a broken promise, ended. */
        end(p, AIR_ESTATE);
        return;
    }
  }
}

/* ---- lifecycle ----------------------------------------------------------- */

static void on_timer_closed(void *arg) {
  air__plain *p = arg;
  air__buf_cleanup(&p->body);
  air__buf_cleanup(&p->resp);
  air__buf_cleanup(&p->kept);
  air__buf_cleanup(&p->strs);
  json_decref(p->doc);
  air_run_free(p->run);
  free(p);
}

int air__plain_start(uv_loop_t *loop, air__transport *t,
                     const air__plain_opts *o, const air__plain_cb *cb,
                     air__plain **out) {
  if (loop == NULL || t == NULL) return AIR_EINVAL;
  air__loop lp = air__loop_uv(loop);
  air__transport_if tr = air__transport_curl(t);
  return air__plain_start_on(&lp, &tr, o, cb, out);
}

int air__plain_start_on(const air__loop *loop, const air__transport_if *tr,
                        const air__plain_opts *o, const air__plain_cb *cb,
                        air__plain **out) {
  if (loop == NULL || tr == NULL || o == NULL || o->cfg == NULL ||
      o->model == NULL || o->path == NULL || o->endpoint == NULL ||
      cb == NULL || cb->on_end == NULL)
    return AIR_EINVAL;
  json_error_t je;
  json_t *doc =
      o->get ? NULL : json_loadb(o->body ? o->body : "", o->body_len, 0, &je);
  if (!o->get && !json_is_object(doc)) {
    json_decref(doc);
    return AIR_EINVAL;
  }
  air__plain *p = calloc(1, sizeof(*p));
  if (p == NULL) {
    json_decref(doc);
    return AIR_ENOMEM;
  }
  p->loop = *loop;
  p->tr = *tr;
  p->o = *o;
  p->cb = *cb;
  p->doc = doc;
  p->clock = o->clock ? o->clock : air_clock_system();
  p->start_ms = now_of(p);
  air_state *st = o->state;
  if (st != NULL && !o->record) {
    p->ro.ops = &ro_ops;
    p->ro.impl = o->state;
    st = &p->ro;
  }
  int rc =
      air_run_new(o->cfg, st, o->model, NULL, p->start_ms, &p->run, &p->act);
  if (rc != 0) {
    json_decref(doc);
    free(p);
    return rc;
  }
  uint64_t max = o->cfg->limits.max_response_bytes;
  air__buf_init(&p->body, AIR__MAX_REQUEST_BYTES);
  air__buf_init(&p->resp, max ? (size_t)max : AIR__MAX_RESPONSE_BYTES);
  air__buf_init(&p->kept, AIR__MAX_KEPT_HEADER_BYTES);
  air__buf_init(&p->strs, AIR__MAX_FAILURE_TEXT_BYTES);
  p->timer = p->loop.ops->timer_new(p->loop.impl, on_timer, p);
  if (p->timer == NULL) {
    on_timer_closed(p);
    return AIR_ENOMEM;
  }
  *out = p;
  /* The first attempt starts now; nothing of the consumer's is called
   * inside this call (a failure at once and the end come on the next loop
   * turn). */
  p->starting = true;
  step(p);
  p->starting = false;
  return 0;
}

void air__plain_cancel(air__plain *p) {
  if (p == NULL || p->ended) return;
  if (p->calling) {
    p->cancel_pending = true;
    return;
  }
  cancel_now(p);
}

static void cancel_now(air__plain *p) {
  p->cancel_pending = false;
  if (p->ended) return;
  if (p->xfer != NULL) {
    xfer_cancel(p);
    p->upstream_ms += now_of(p) - p->attempt_start;
  }
  stop_timers(p);
  air_run_cancel(p->run, now_of(p), &p->act);
  end(p, AIR_ECANCELED);
}

void air__plain_free(air__plain *p) {
  if (p == NULL || p->freeing) return;
  p->freeing = true;
  xfer_cancel(p);
  p->loop.ops->timer_close(p->loop.impl, p->timer, on_timer_closed, p);
}
