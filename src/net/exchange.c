/*
 * The exchange: engine + codec + transport + gate on one uv loop.
 *
 * Reentrancy: the transport calls on_head/on_body/on_done from inside
 * libcurl; the exchange never removes its transfer from inside on_head or
 * on_body (it returns non-zero from on_body instead, and finishes the
 * attempt in on_done). A cancel that arrives while such a callback runs is
 * recorded and acted on when the callback returns.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "classify.h"
#include "engine.h"
#include "exchange.h"
#include "limits.h"
#include "retry_after.h"
#include "spans.h"
#include "sse.h"

#define MAX_EVENT_PARTS 4  /* parts of one SSE event kept inline */
/* An error (non-200) body is diagnostic only: its first MAX_ERROR_BODY
 * bytes are kept for classification and the rest is read and dropped. A
 * whole 200 body is an answer: bounded by limits.max_response_bytes, past it
 * the attempt fails (malformed), never a silently shortened answer. */
#define MAX_ERROR_BODY AIR__MAX_ERROR_BODY_BYTES
#define MAX_KEPT_HEADERS 32
#define MAX_REQUEST_HEADERS (AIR__MAX_HEADERS + 16)

enum mode { M_NONE, M_SSE, M_BODY };

struct air__exchange {
  air__loop loop;         /* time (loop.h) */
  air__transport_if tr;   /* upstreams (transport.h) */
  air__exchange_opts o;
  air__exchange_cb cb;
  const air_clock *clock;
  air_run *run;
  air_action act;
  air__gate gate;
  air__sse sse;
  air__decoder dec;
  const air__provider_ops *ops;
  void *xfer;             /* the transfer in flight (tr's), or NULL */
  air__timer *timer;      /* one loop timer, armed at the earliest due[] */
  uint64_t due[4];        /* first byte, attempt, part, wait: 0 = off */
  bool freeing;
  bool ended;
  bool in_xfer_cb;       /* inside on_head / on_body */
  bool cancel_pending;
  bool pause_pending;
  bool notified;
  enum mode mode;
  int status;
  air_failure fail;      /* the attempt's failure under construction */
  bool have_fail;
  air__buf body;         /* upstream request body */
  air__buf err;          /* a non-stream response body */
  air__buf kept;         /* copies of response headers, then hv */
  air__buf strs;         /* error strings of the last failure */
  air_header *hv;        /* the kept headers (inside kept) */
  size_t n_hv;
  air_part parts_inline[MAX_EVENT_PARTS];
  air_part *parts;       /* parts_inline, or a heap array for big events */
  size_t n_parts, cap_parts;
  uint64_t start_ms;
  uint64_t first_content_ms;
  uint64_t wait_ms;      /* time spent in backoff waits */
  uint64_t attempt_start;
  uint64_t upstream_ms;  /* time spent in attempts */
  unsigned malformed;
  bool has_hint;
  uint64_t hint_ms;
  const char *key;       /* the attempt's upstream key (environment), or NULL */
  const char *att_target;  /* the current (or last) attempt's target and 1-based */
  unsigned att_no;         /* number: a judged answer released after the run
                              stopped still names the attempt that made it */
  unsigned att_id;         /* the engine's id of the current (or last) attempt */
  const char *answered;    /* the target whose answer was released, or NULL */
  const char *skip_field;  /* launch() == 2: offsets into strs (see fix()) */
  const char *skip_msg;
};

enum { T_FIRST_BYTE, T_ATTEMPT, T_PART, T_WAIT };

static void step(air__exchange *x);
static void attempt_failed(air__exchange *x);
static void on_part_timeout(void *arg);
static void set_fail(air__exchange *x, air_reason reason, int status,
                     const char *type, const char *code, const char *message,
                     air_transport_err transport);

static uint64_t now_of(const air__exchange *x) {
  return x->clock->now_ms(x->clock->data);
}

/* ---- the seams: timers (loop.h) and the transfer (transport.h) ---------------- */

/*
 * The four deadlines of an exchange (first byte, attempt, part gap, wait)
 * share one loop timer armed at the earliest of them: one timer per open
 * stream instead of four. due[] holds each deadline on the exchange's
 * clock, 0 when it is off.
 */
static void rearm(air__exchange *x) {
  uint64_t next = 0;
  for (int i = 0; i < 4; i++)
    if (x->due[i] != 0 && (next == 0 || x->due[i] < next)) next = x->due[i];
  if (next == 0) {
    x->loop.ops->timer_stop(x->loop.impl, x->timer);
    return;
  }
  uint64_t now = now_of(x);
  x->loop.ops->timer_start(x->loop.impl, x->timer, next > now ? next - now : 0);
}

static void timer_stop(air__exchange *x, int which) {
  if (x->due[which] == 0) return;
  x->due[which] = 0;
  rearm(x);
}

static void stop_timers(air__exchange *x) {
  for (int i = 0; i < 4; i++) x->due[i] = 0;
  x->loop.ops->timer_stop(x->loop.impl, x->timer);
}

/* Arms deadline which at deadline on the exchange's clock (at once when it
 * has passed: the loop fires it on its next turn). */
static void arm(air__exchange *x, int which, uint64_t deadline) {
  x->due[which] = deadline != 0 ? deadline : 1;
  rearm(x);
}

static void xfer_cancel(air__exchange *x) {
  if (x->xfer != NULL) x->tr.ops->cancel(x->tr.impl, x->xfer);
  x->xfer = NULL;
}

/* ---- ending ---------------------------------------------------------------------- */

/* "no target of this route can express the request: FIELD (TARGET), ..."
 * for a request whose every target was skipped; kept in x->strs. */
static const char *skipped_message(air__exchange *x, size_t n) {
  air__buf_reset(&x->strs);
  int rc = air__buf_adds(&x->strs, "no target can express this request:");
  for (size_t i = 0; rc == 0 && i < n; i++) {
    const air_attempt *a = air_run_attempt(x->run, i);
    rc = air__buf_adds(&x->strs, i ? ", " : " ");
    if (rc == 0) rc = air__buf_adds(&x->strs, a->field ? a->field : "");
    if (rc == 0) rc = air__buf_adds(&x->strs, " (");
    if (rc == 0) rc = air__buf_adds(&x->strs, a->target);
    if (rc == 0) rc = air__buf_addc(&x->strs, ')');
  }
  if (rc == 0) rc = air__buf_addc(&x->strs, '\0');
  return rc == 0 ? x->strs.p : "no target can express this request";
}

static void end(air__exchange *x, int rc) {
  if (x->ended) return;
  x->ended = true;
  stop_timers(x);
  air__exchange_result r;
  memset(&r, 0, sizeof(r));
  r.rc = rc;
  r.committed = x->gate.committed || x->notified;
  r.reason = rc == 0 ? AIR_REASON_NONE : x->act.reason;
  r.status = rc == 0 ? 200 : x->act.status;
  size_t n = air_run_attempt_count(x->run);
  /* The final error is the last real failure (skipped entries are not
   * attempts); when every target was skipped, a message naming them. */
  const air_attempt *last = NULL;
  for (size_t i = n; i > 0 && last == NULL; i--) {
    const air_attempt *a = air_run_attempt(x->run, i - 1);
    if (!a->skipped) last = a;
  }
  r.message = last && rc != 0 ? last->message : "";
  r.target = last ? last->target : "";
  if (last == NULL && n > 0 && rc == AIR_EUPSTREAM)
    r.message = skipped_message(x, n);
  r.n_attempts = air__run_attempts(x->run);
  r.answered = x->answered;
  r.log = n ? air_run_attempt(x->run, 0) : NULL;
  r.n_log = n;
  r.has_retry_after = x->has_hint;
  r.retry_after_ms = x->hint_ms;
  r.first_content_ms = x->first_content_ms;
  r.total_ms = now_of(x) - x->start_ms;
  r.upstream_wait_ms = x->upstream_ms + x->wait_ms;
  r.malformed = x->malformed;
  x->cb.on_end(x->cb.data, &r);
}

/* ---- released events --------------------------------------------------------------- */

/*
 * The first release of an attempt is its first content: the engine is told
 * and the bytes go on only when it answers COMMIT for that attempt (x->act).
 * A judged answer released after the run failed (step, FAIL) is the run's
 * own final decision, with no attempt in flight to report.
 */
static int emit(void *data, const air__gate_event *ev) {
  air__exchange *x = data;
  if (!x->notified) {
    if (x->act.kind != AIR_ACT_FAIL) {
      air_action a;
      int rc = air_run_first_content(x->run, x->att_id, now_of(x), &a);
      if (rc != 0) return rc;
      if (a.kind != AIR_ACT_COMMIT || a.attempt_id != x->att_id)
        return AIR_ESTATE;
      x->act = a;
    }
    x->notified = true;
    x->first_content_ms = now_of(x) - x->start_ms;
    x->answered = x->att_target;
    air__commit_info ci = {
        .target = x->att_target,
        .attempts = x->att_no,
        .upstream = x->ops ? x->ops->api : AIR_DIALECT_OPENAI,
        .ms = x->first_content_ms,
        .headers = x->hv,
        .n_headers = x->n_hv,
    };
    if (x->cb.on_commit) x->cb.on_commit(x->cb.data, &ci);
  }
  if (x->cb.on_event && x->cb.on_event(x->cb.data, ev) == 1)
    x->pause_pending = true;
  return 0;
}

/* ---- decoding ------------------------------------------------------------------- */

/* Gathers the parts of one event; an event with many (parallel tool calls)
 * moves to a heap array, bounded by AIR__MAX_EVENT_PARTS. */
static int collect(void *data, const air_part *p) {
  air__exchange *x = data;
  if (x->n_parts == x->cap_parts) {
    size_t cap = x->cap_parts * 2;
    if (cap > AIR__MAX_EVENT_PARTS) return 1;  /* stops decoding: malformed */
    air_part *a = x->parts == x->parts_inline ? malloc(cap * sizeof(*a))
                                              : realloc(x->parts, cap * sizeof(*a));
    if (a == NULL) return 1;
    if (x->parts == x->parts_inline) memcpy(a, x->parts_inline, sizeof(x->parts_inline));
    x->parts = a;
    x->cap_parts = cap;
  }
  x->parts[x->n_parts++] = *p;
  return 0;
}

/* Feeds one decoded batch of parts to the gate; 1 when the attempt stops. */
static int feed_gate(air__exchange *x, const char *raw, size_t raw_len,
                     unsigned before_malformed) {
  for (unsigned m = before_malformed; m < x->dec.malformed; m++) {
    x->malformed++;
    if (air__gate_malformed(&x->gate) == 1) return 1;
  }
  unsigned flags = (x->dec.usage_only ? AIR__EV_USAGE_ONLY : 0) |
                   (x->dec.terminator ? AIR__EV_TERMINATOR : 0) |
                   (x->dec.error_event ? AIR__EV_ERROR : 0);
  air__gate_event gev = {raw, raw_len, x->parts, x->n_parts, flags};
  int rc = air__gate_feed(&x->gate, &gev, now_of(x));
  return rc != 0 ? 1 : 0;
}

/* Copies a part string into buf as a C string. */
static void part_str(char *buf, size_t cap, const char *p, size_t n) {
  if (p == NULL) n = 0;
  if (n >= cap) n = cap - 1;
  if (n) memcpy(buf, p, n);
  buf[n] = '\0';
}

static int on_sse(void *data, const air__sse_event *ev) {
  air__exchange *x = data;
  x->n_parts = 0;
  unsigned before = x->dec.malformed;
  if (x->ops->decode_event(&x->dec, ev, collect, x) != 0)
    x->dec.malformed++;  /* over AIR__MAX_EVENT_PARTS: skipped as malformed */
  if (x->gate.committed && x->dec.error_event && x->dec.malformed == before) {
    /* An error event after commit ends the attempt, final; the consumer
     * hears of it once, through on_end, never as a part. */
    char type[64] = "", msg[256] = "upstream error event";
    for (size_t i = 0; i < x->n_parts; i++) {
      if (x->parts[i].kind != AIR_PART_ERROR) continue;
      part_str(type, sizeof(type), x->parts[i].name, x->parts[i].name_len);
      if (x->parts[i].text_len)
        part_str(msg, sizeof(msg), x->parts[i].text, x->parts[i].text_len);
    }
    set_fail(x, air__classify(200, type, NULL, msg, AIR_TRANSPORT_OK),
             x->status, type, NULL, msg, AIR_TRANSPORT_OK);
    return 1;
  }
  if (x->dec.malformed > before) {
    /* Skipped and counted: never released, not even as raw bytes. */
    for (unsigned m = before; m < x->dec.malformed; m++) {
      x->malformed++;
      if (air__gate_malformed(&x->gate) == 1) return 1;
    }
    return 0;
  }
  return feed_gate(x, ev->raw.p, ev->raw.n, before);
}

/* ---- the attempt's failure ------------------------------------------------------- */

/*
 * Copies s into the failure strings, with every occurrence of the attempt's
 * upstream key replaced by "[redacted]": an upstream that echoes the key it
 * got (in a 401 message, say) must not leak it to callers or logs.
 */
static const char *keep_str(air__exchange *x, const char *s) {
  if (s == NULL) return NULL;
  size_t off = x->strs.n;
  size_t kn = x->key ? strlen(x->key) : 0;
  const char *p = s;
  int rc = 0;
  while (rc == 0 && *p) {
    const char *hit = kn >= 8 ? strstr(p, x->key) : NULL;
    if (hit == NULL) {
      rc = air__buf_adds(&x->strs, p);
      break;
    }
    rc = air__buf_add(&x->strs, p, (size_t)(hit - p));
    if (rc == 0) rc = air__buf_adds(&x->strs, "[redacted]");
    p = hit + kn;
  }
  if (rc == 0) rc = air__buf_addc(&x->strs, '\0');
  if (rc != 0) return NULL;
  return (const char *)(uintptr_t)(off + 1);  /* fixed up by fix() */
}

static const char *fix(const air__exchange *x, const char *off) {
  return off == NULL ? NULL : x->strs.p + ((uintptr_t)off - 1);
}

/* Sets the attempt's failure; strings are copied. */
static void set_fail(air__exchange *x, air_reason reason, int status,
                     const char *type, const char *code, const char *message,
                     air_transport_err transport) {
  air__buf_reset(&x->strs);
  memset(&x->fail, 0, sizeof(x->fail));
  x->fail.reason = reason;
  x->fail.status = status;
  x->fail.transport = transport;
  const char *t = keep_str(x, type), *c = keep_str(x, code),
             *m = keep_str(x, message);
  const char *rid = NULL;
  for (size_t i = 0; i < x->n_hv; i++) {
    const air_header *h = &x->hv[i];
    if ((h->name_len == 12 && strncasecmp(h->name, "x-request-id", 12) == 0) ||
        (h->name_len == 10 && strncasecmp(h->name, "request-id", 10) == 0)) {
      char tmp[128];
      size_t n = h->value_len < sizeof(tmp) - 1 ? h->value_len : sizeof(tmp) - 1;
      memcpy(tmp, h->value, n);
      tmp[n] = '\0';
      rid = keep_str(x, tmp);
    }
  }
  x->fail.type = fix(x, t);
  x->fail.code = fix(x, c);
  x->fail.message = fix(x, m);
  x->fail.request_id = fix(x, rid);
  x->fail.headers = x->hv;
  x->fail.n_headers = x->n_hv;
  x->have_fail = true;
}

static void fail_from_gate(air__exchange *x) {
  set_fail(x, x->gate.reason, x->status, NULL, NULL, x->gate.message,
           AIR_TRANSPORT_OK);
}

/* ---- transport callbacks -------------------------------------------------------- */

static void keep_headers(air__exchange *x, const air_header *h, size_t n) {
  air__buf_reset(&x->kept);
  x->hv = NULL;
  x->n_hv = 0;
  /* The strings, then the array (8-aligned) after them in the same buffer,
   * pointing into it once nothing more moves it: one allocation per
   * stream, sized to what the upstream sent. */
  air_header tmp[MAX_KEPT_HEADERS];
  size_t k = 0;
  for (size_t i = 0; i < n && k < MAX_KEPT_HEADERS; i++) {
    size_t a = x->kept.n;
    if (air__buf_add(&x->kept, h[i].name, h[i].name_len) != 0) break;
    size_t b = x->kept.n;
    if (air__buf_add(&x->kept, h[i].value, h[i].value_len) != 0) break;
    tmp[k].name = (const char *)(uintptr_t)a;
    tmp[k].value = (const char *)(uintptr_t)b;
    tmp[k].name_len = h[i].name_len;
    tmp[k].value_len = h[i].value_len;
    k++;
  }
  size_t at;
  if (k == 0 || air__buf_add_aligned(&x->kept, tmp, k * sizeof(tmp[0]), &at) != 0)
    return;
  x->hv = (air_header *)(void *)(x->kept.p + at);
  for (size_t i = 0; i < k; i++) {
    x->hv[i].name = x->kept.p + (uintptr_t)x->hv[i].name;
    x->hv[i].value = x->kept.p + (uintptr_t)x->hv[i].value;
  }
  x->n_hv = k;
}

static bool is_event_stream(const air_header *h, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (h[i].name_len == 12 && strncasecmp(h[i].name, "content-type", 12) == 0) {
      for (size_t k = 0; k + 17 <= h[i].value_len; k++)
        if (strncasecmp(h[i].value + k, "text/event-stream", 17) == 0) return true;
      return false;
    }
  }
  return false;
}

static void on_head(void *data, int status, const air_header *h, size_t n) {
  air__exchange *x = data;
  timer_stop(x, T_FIRST_BYTE);
  x->status = status;
  air__run_note_status(x->run, x->att_id, status);
  keep_headers(x, h, n);
  x->mode = status == 200 && is_event_stream(h, n) ? M_SSE : M_BODY;
}

static int on_body(void *data, const char *p, size_t n) {
  air__exchange *x = data;
  if (x->cancel_pending) return -1;
  if (x->mode != M_SSE) {
    if (x->status != 200) {
      size_t room = x->err.n < MAX_ERROR_BODY ? MAX_ERROR_BODY - x->err.n : 0;
      if (room == 0) return 0;
      return air__buf_add(&x->err, p, n < room ? n : room) == 0 ? 0 : -1;
    }
    if (air__buf_add(&x->err, p, n) == 0) return 0;
    set_fail(x, AIR_REASON_MALFORMED, x->status, NULL, NULL,
             "response body over max_response_bytes", AIR_TRANSPORT_BADBODY);
    return -1;
  }
  x->in_xfer_cb = true;
  int rc = air__sse_feed(&x->sse, p, n);
  x->in_xfer_cb = false;
  if (x->cancel_pending) return -1;
  if (rc < 0) {
    set_fail(x, AIR_REASON_MALFORMED, x->status, NULL, NULL,
             "event stream over the size limits", AIR_TRANSPORT_BADBODY);
    return -1;
  }
  if (x->have_fail) return -1;
  if (x->gate.state == AIR__GATE_FAILED) {
    fail_from_gate(x);
    return -1;
  }
  /* Deadlines: attempt_ms only until commit; the part gap always. */
  if (x->gate.committed) timer_stop(x, T_ATTEMPT);
  arm(x, T_PART, air__gate_deadline(&x->gate, NULL));
  if (x->notified && x->cb.on_flush) {
    x->in_xfer_cb = true;
    if (x->cb.on_flush(x->cb.data) == 1) x->pause_pending = true;
    x->in_xfer_cb = false;
  }
  if (x->cancel_pending) return -1;
  if (x->pause_pending) {
    x->pause_pending = false;
    x->tr.ops->pause(x->tr.impl, x->xfer);
  }
  return 0;
}

/* Feeds one part of a whole response body to the gate at once: its strings
 * point into the decoder's document, valid only during this callback. */
static int feed_body_part(void *data, const air_part *p) {
  air__exchange *x = data;
  air__gate_event gev = {NULL, 0, p, 1, 0};
  return air__gate_feed(&x->gate, &gev, now_of(x)) != 0 ? 1 : 0;
}

/* Decodes a complete non-stream 200 body into one released answer. */
static void finish_body(air__exchange *x) {
  x->n_parts = 0;
  if (x->ops->decode_body(&x->dec, x->err.p ? x->err.p : "", x->err.n,
                          feed_body_part, x) != 0 &&
      x->gate.state != AIR__GATE_FAILED) {
    set_fail(x, AIR_REASON_MALFORMED, 200, NULL, NULL,
             "response is neither an event stream nor a response body",
             AIR_TRANSPORT_BADBODY);
    return;
  }
  if (x->gate.state != AIR__GATE_FAILED) air__gate_end(&x->gate, true, now_of(x));
  if (x->gate.state == AIR__GATE_FAILED) fail_from_gate(x);
}

static void on_done(void *data, int rc, air_transport_err kind,
                    bool connect_timeout, const char *msg) {
  air__exchange *x = data;
  x->xfer = NULL;
  timer_stop(x, T_FIRST_BYTE);
  timer_stop(x, T_ATTEMPT);
  timer_stop(x, T_PART);
  x->upstream_ms += now_of(x) - x->attempt_start;
  if (x->cancel_pending) {
    air__exchange_cancel(x);
    return;
  }
  if (rc == AIR_ECANCELED) {
    /* We stopped it: the failure is already set. */
  } else if (rc != 0) {
    set_fail(x, connect_timeout ? AIR_REASON_TIMEOUT_CONNECT : AIR_REASON_NONE,
             x->status == 200 ? 0 : x->status, NULL, NULL, msg, kind);
  } else if (x->mode == M_SSE) {
    air__sse_finish(&x->sse);
    if (x->gate.state != AIR__GATE_FAILED && x->gate.state != AIR__GATE_DONE) {
      /* Complete only with a finish: a terminator ([DONE], message_stop)
       * after no finish is a stream cut short as much as a closed socket
       * (DESIGN.md 9: a terminator only after a finish). */
      bool clean = x->dec.finished;
      air__gate_end(&x->gate, clean, now_of(x));
    }
    if (x->gate.state == AIR__GATE_FAILED) fail_from_gate(x);
  } else if (x->status == 200) {
    finish_body(x);
  } else {
    air__buf tmp;
    air__buf_init(&tmp, AIR__MAX_FAILURE_TEXT_BYTES);
    air_failure f;
    memset(&f, 0, sizeof(f));
    air__parse_error_body(x->err.p, x->err.n, &tmp, &f);
    char what[64];
    if (f.message == NULL) {
      snprintf(what, sizeof(what), "upstream answered HTTP %d", x->status);
      f.message = what;
    }
    set_fail(x, AIR_REASON_NONE, x->status, f.type, f.code, f.message,
             AIR_TRANSPORT_OK);
    air__buf_cleanup(&tmp);
  }
  if (x->have_fail) {
    attempt_failed(x);
    return;
  }
  air_run_succeed(x->run, x->att_id, now_of(x), &x->act);
  step(x);
}

/* ---- timers ------------------------------------------------------------------------ */

static void timeout_fail(air__exchange *x, air_reason reason, const char *msg) {
  xfer_cancel(x);
  stop_timers(x);
  x->upstream_ms += now_of(x) - x->attempt_start;
  set_fail(x, reason, x->status, NULL, NULL, msg, AIR_TRANSPORT_OK);
  attempt_failed(x);
}

static void on_first_byte_timeout(void *arg) {
  timeout_fail(arg, AIR_REASON_TIMEOUT_FIRST_BYTE,
               "no response headers within first_byte_ms");
}

static void on_attempt_timeout(void *arg) {
  air__exchange *x = arg;
  if (x->gate.committed) return;
  timeout_fail(x, AIR_REASON_TIMEOUT_ATTEMPT, "no commit within attempt_ms");
}

static void on_part_timeout(void *arg) {
  air__exchange *x = arg;
  air_reason which;
  air__gate_deadline(&x->gate, &which);
  timeout_fail(x, which,
               which == AIR_REASON_TIMEOUT_FIRST_CHUNK
                   ? "no content part within first_chunk_ms"
                   : "no event within chunk_ms");
}

static void on_wait_done(void *arg) {
  air__exchange *x = arg;
  x->wait_ms += x->act.wait_ms;
  air_run_wait_done(x->run, x->act.attempt_id, now_of(x), &x->act);
  step(x);
}

/* The loop timer fired: the earliest deadline that is due runs (first
 * byte, attempt, part, wait in that order on a tie), then the timer is
 * armed for what is left. A handler may end the exchange, and its owner
 * free it: the memory stays until the timer's close callback. */
static void on_timer(void *arg) {
  static void (*const handler[4])(void *) = {on_first_byte_timeout,
                                              on_attempt_timeout,
                                              on_part_timeout, on_wait_done};
  air__exchange *x = arg;
  uint64_t now = now_of(x);
  int which = -1;
  for (int i = 0; i < 4; i++)
    if (x->due[i] != 0 && x->due[i] <= now &&
        (which < 0 || x->due[i] < x->due[which]))
      which = i;
  if (which < 0) {
    rearm(x); /* early (a coarser loop clock): wait for the rest */
    return;
  }
  x->due[which] = 0;
  handler[which](x);
  if (!x->freeing && !x->ended) rearm(x);
}

/* ---- attempts ------------------------------------------------------------------------ */

/* The upstream request's header lines, built per attempt; libcurl copies
 * them, so they live on the stack of launch only. */
typedef struct hdrs {
  air__buf buf;
  size_t off[MAX_REQUEST_HEADERS];
  size_t n;
} hdrs;

static int add_header(hdrs *hl, const char *name, size_t name_len,
                      const char *value, size_t value_len) {
  if (hl->n >= MAX_REQUEST_HEADERS) return AIR_ETOOBIG;
  /* A header value with CR or LF could split the request: never sent. */
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
  static const char *const never[] = {
      "authorization", "x-api-key", "host", "content-length",
      "transfer-encoding", "connection", "content-type", "accept",
      "anthropic-version", "expect", "upgrade", "te", "trailer",
      "proxy-authorization", "cookie"};
  for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
    if (strlen(never[i]) == n && strncasecmp(never[i], name, n) == 0) return false;
  return true;
}

/* The upstream request's headers: ours, the provider's, and the caller's
 * forwarded ones (same dialect only). */
static int add_headers(const air__exchange *x, const air__provider *p,
                       const char *key, hdrs *hl) {
  int rc = add_header_s(hl, "Content-Type", "application/json");
  if (rc == 0) rc = add_header_s(hl, "Accept", "text/event-stream");
  if (rc == 0) rc = add_header_s(hl, "User-Agent", "airetry/" AIR_VERSION);
  bool has_version = false;
  for (size_t i = 0; i < p->n_headers; i++)
    if (strcasecmp(p->headers[i].name, "anthropic-version") == 0) has_version = true;
  if (rc == 0 && p->api == AIR_DIALECT_ANTHROPIC) {
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
  for (size_t i = 0; rc == 0 && i < p->n_headers; i++)
    rc = add_header_s(hl, p->headers[i].name, p->headers[i].value);
  if (rc == 0 && x->o.trace != NULL) { /* DESIGN.md 5, Traces */
    char tp[AIR__TRACEPARENT_LEN + 1];
    air__trace_attempt_header(x->o.trace, x->att_no, tp);
    rc = add_header_s(hl, "traceparent", tp);
  }
  if (x->o.req->dialect == p->api) {
    for (const char *const *f = x->o.forward; rc == 0 && f && *f; f++) {
      const char *colon = strchr(*f, ':');
      if (colon == NULL || !forwardable(*f, (size_t)(colon - *f))) continue;
      if (x->o.trace != NULL && colon - *f == 11 &&
          strncasecmp(*f, "traceparent", 11) == 0)
        continue; /* ours replaces the caller's */
      const char *v = colon + 1;
      while (*v == ' ') v++;
      rc = add_header(hl, *f, (size_t)(colon - *f), v, strlen(v));
    }
  }
  return rc;
}

/* Prepares and starts the transfer of the current ATTEMPT action. Returns 0
 * when it is in flight, 1 with x->fail set when it failed at once, or 2
 * when the target cannot express the request (skip_field / skip_msg). */
static int launch(air__exchange *x) {
  const air__target *t = air__run_target(x->run);
  const air_config *cfg = x->o.cfg;
  const air__provider *p = &cfg->providers[t->provider];
  x->ops = air__provider_get(p->api);
  x->att_target = x->act.target;
  x->att_no = x->act.attempt;
  x->att_id = x->act.attempt_id;
  x->attempt_start = now_of(x);
  x->status = 0;
  x->mode = M_NONE;
  x->have_fail = false;
  x->hv = NULL;
  x->n_hv = 0;
  air__buf_reset(&x->err);
  air__buf_reset(&x->body);
  air__sse_reset(&x->sse);
  air__decoder_cleanup(&x->dec);
  x->ops->decoder_init(&x->dec);
  air__gate_begin(&x->gate, x->attempt_start);
  x->gate.cfg.first_chunk_ms = t->timeouts.first_chunk_ms;
  x->gate.cfg.chunk_ms = t->timeouts.chunk_ms;

  const char *key = NULL;
  x->key = NULL;
  if (p->api_key_env != NULL) {
    key = x->key = p->api_key; /* read at config load (config.h) */
    if (key == NULL || key[0] == '\0') {
      char msg[2 * AIR__MAX_NAME_BYTES + 64];
      snprintf(msg, sizeof(msg), "%s is not set: no API key for provider %s",
               p->api_key_env, p->name);
      set_fail(x, AIR_REASON_AUTH, 0, NULL, NULL, msg, AIR_TRANSPORT_OK);
      return 1;
    }
  }
  air_error err;
  memset(&err, 0, sizeof(err));
  air__build_opts bo = {
      .model = t->model,
      .override_json = x->act.override_json,
      .drop_params = cfg->drop_params,
      .default_max_tokens = cfg->default_max_tokens,
  };
  int built = air__request_build(x->ops, x->o.req, &bo, &x->body, &err);
  if (built == AIR_ENOTSUP) {
    /* Outcome skipped (DESIGN.md 2.1): nothing is sent to this target. */
    char field[AIR__MAX_NAME_BYTES];
    air__unsupported_field(err.message, field, sizeof(field));
    air__buf_reset(&x->strs);
    x->skip_field = keep_str(x, field);
    x->skip_msg = keep_str(x, err.message);
    return 2;
  }
  if (built != 0) {
    set_fail(x, AIR_REASON_BAD_REQUEST, 400, "invalid_request_error", NULL,
             err.message, AIR_TRANSPORT_OK);
    return 1;
  }
  hdrs hl;
  air__buf_init(&hl.buf, AIR__MAX_UPSTREAM_HEADER_BYTES);
  hl.n = 0;
  int rc = add_headers(x, p, key, &hl);
  const char *lines[MAX_REQUEST_HEADERS + 1];
  for (size_t i = 0; i < hl.n; i++) lines[i] = hl.buf.p + hl.off[i];
  lines[hl.n] = NULL;
  air__buf url;
  air__buf_init(&url, AIR__MAX_URL_BYTES);
  size_t bl = strlen(p->base_url);
  while (bl > 0 && p->base_url[bl - 1] == '/') bl--;
  if (rc == 0) rc = air__buf_add(&url, p->base_url, bl);
  if (rc == 0) rc = air__buf_adds(&url, x->ops->path);
  air__xfer_req r = {
      .url = url.p,
      .headers = lines,
      .body = x->body.p,
      .body_len = x->body.n,
      .connect_ms = t->timeouts.connect_ms,
  };
  air__xfer_cb cb = {on_head, on_body, on_done, x};
  int started = rc == 0 ? x->tr.ops->start(x->tr.impl, &r, &cb, &x->xfer) : rc;
  air__buf_cleanup(&hl.buf);  /* libcurl keeps copies */
  air__buf_cleanup(&url);
  if (rc != 0) {
    set_fail(x, AIR_REASON_BAD_REQUEST, 0, NULL, NULL,
             "upstream request over the size limits", AIR_TRANSPORT_OK);
    return 1;
  }
  if (started != 0) {
    set_fail(x, AIR_REASON_NETWORK, 0, NULL, NULL, "could not start the transfer",
             AIR_TRANSPORT_CONNECT);
    return 1;
  }
  uint64_t now = x->attempt_start;
  arm(x, T_FIRST_BYTE, now + t->timeouts.first_byte_ms);
  arm(x, T_ATTEMPT, x->act.deadline_ms);
  arm(x, T_PART, air__gate_deadline(&x->gate, NULL));
  return 0;
}

/* Hands x->fail to the policy (x->act is its decision) and tells the
 * observer about the failed attempt. */
static void policy_fail(air__exchange *x) {
  size_t failed = air_run_attempt_count(x->run) - 1;
  air_run_fail(x->run, x->att_id, &x->fail, now_of(x),
               x->clock->wall_ms(x->clock->data), &x->act);
  if (x->cb.on_failed) x->cb.on_failed(x->cb.data, air_run_attempt(x->run, failed));
}

/* launch() found that the target cannot express the request: the run goes
 * on without it, and the observer hears of the skipped entry. */
static void skip_target(air__exchange *x) {
  size_t skipped = air_run_attempt_count(x->run) - 1;
  air__run_skip(x->run, x->att_id, fix(x, x->skip_field), fix(x, x->skip_msg),
                now_of(x), &x->act);
  if (x->cb.on_failed) x->cb.on_failed(x->cb.data, air_run_attempt(x->run, skipped));
}

/* The attempt failed (x->fail): before commit the policy decides. */
static void attempt_failed(air__exchange *x) {
  uint64_t now = now_of(x);
  uint64_t hint = 0;
  x->has_hint = air__retry_after(x->fail.headers, x->fail.n_headers,
                                 x->clock->wall_ms(x->clock->data), &hint) == 1;
  x->hint_ms = hint;
  if (x->gate.committed) {
    air__run_fail_final(x->run, x->att_id, &x->fail, now, &x->act);
    end(x, AIR_EUPSTREAM);
    return;
  }
  policy_fail(x);
  step(x);
}

/* Acts on x->act until something asynchronous is in flight or the end. */
static void step(air__exchange *x) {
  for (;;) {
    switch (x->act.kind) {
      case AIR_ACT_ATTEMPT:
        switch (launch(x)) {
          case 0:
            return;
          case 2:
            skip_target(x);
            continue;
          default:
            policy_fail(x);
            continue;
        }
      case AIR_ACT_WAIT:
        arm(x, T_WAIT, now_of(x) + x->act.wait_ms);
        return;
      case AIR_ACT_DONE:
        end(x, 0);
        return;
      case AIR_ACT_FAIL:
        if (x->act.reason == AIR_REASON_ABORTED) {
          end(x, AIR_ECANCELED);
        } else if (x->gate.state == AIR__GATE_FAILED && x->gate.judged &&
                   air__gate_release_judged(&x->gate) == 0) {
          end(x, 0);
        } else {
          end(x, AIR_EUPSTREAM);
        }
        return;
      case AIR_ACT_COMMIT:
      case AIR_ACT_CANCEL:
      case AIR_ACT_CONTINUE:
      case AIR_ACT_IDLE:
        /* Not answers to the events step follows (COMMIT answers first
         * content, in emit; CANCEL and CONTINUE come with hedging and
         * continuation): a broken promise, ended rather than hung. */
        end(x, AIR_ESTATE);
        return;
    }
  }
}

/* ---- lifecycle ------------------------------------------------------------------------- */

static void on_timer_closed(void *arg);

int air__exchange_start(uv_loop_t *loop, air__transport *t,
                        const air__exchange_opts *o, const air__exchange_cb *cb,
                        air__exchange **out) {
  if (loop == NULL || t == NULL) return AIR_EINVAL;
  air__loop lp = air__loop_uv(loop);
  air__transport_if tr = air__transport_curl(t);
  return air__exchange_start_on(&lp, &tr, o, cb, out);
}

/* The engine's question before it admits a target (air__run_new_checked):
 * can the target's dialect express the request? Only AIR_ENOTSUP says no;
 * any other failure is left to launch, which reports it. */
static bool expressible(void *data, const air__target *t) {
  const air__exchange *x = data;
  const air_config *cfg = x->o.cfg;
  const air__provider_ops *ops =
      air__provider_get(cfg->providers[t->provider].api);
  air_error err;
  return air__request_can_express(ops, x->o.req, cfg->drop_params, &err) !=
         AIR_ENOTSUP;
}

int air__exchange_start_on(const air__loop *loop, const air__transport_if *tr,
                           const air__exchange_opts *o, const air__exchange_cb *cb,
                           air__exchange **out) {
  if (loop == NULL || tr == NULL || o == NULL || o->cfg == NULL ||
      o->req == NULL || o->model == NULL || cb == NULL || cb->on_end == NULL)
    return AIR_EINVAL;
  air__exchange *x = calloc(1, sizeof(*x));
  if (x == NULL) return AIR_ENOMEM;
  x->loop = *loop;
  x->tr = *tr;
  x->o = *o;
  x->cb = *cb;
  x->clock = o->clock ? o->clock : air_clock_system();
  x->start_ms = now_of(x);
  int rc = air__run_new_checked(o->cfg, o->state, o->model, NULL, x->start_ms,
                                expressible, x, &x->run, &x->act);
  if (rc != 0) {
    free(x);
    return rc;
  }
  const air__policy *pol = air__run_policy(x->run);
  air__gate_cfg gc = air__gate_cfg_of(
      pol, o->req->stream ? pol->commit : AIR__COMMIT_COMPLETE,
      o->req->json_response);
  rc = air__gate_init(&x->gate, &gc, emit, x);
  if (rc != 0) {
    air__gate_cleanup(&x->gate);
    air_run_free(x->run);
    free(x);
    return rc;
  }
  x->parts = x->parts_inline;
  x->cap_parts = MAX_EVENT_PARTS;
  air__sse_init(&x->sse, on_sse, x);
  air__buf_init(&x->body, AIR__MAX_REQUEST_BYTES);
  air__buf_init(&x->err, o->cfg->limits.max_response_bytes
                             ? o->cfg->limits.max_response_bytes
                             : AIR__MAX_RESPONSE_BYTES);
  air__buf_init(&x->kept, AIR__MAX_KEPT_HEADER_BYTES);
  air__buf_init(&x->strs, AIR__MAX_FAILURE_TEXT_BYTES);
  x->timer = x->loop.ops->timer_new(x->loop.impl, on_timer, x);
  if (x->timer == NULL) {
    x->freeing = true;
    on_timer_closed(x);
    return AIR_ENOMEM;
  }
  *out = x;
  step(x);
  return 0;
}

void air__exchange_cancel(air__exchange *x) {
  if (x == NULL || x->ended) return;
  if (x->in_xfer_cb) {
    x->cancel_pending = true;
    return;
  }
  if (x->xfer != NULL) {
    xfer_cancel(x);
    x->upstream_ms += now_of(x) - x->attempt_start;
  }
  stop_timers(x);
  air_run_cancel(x->run, now_of(x), &x->act);
  end(x, AIR_ECANCELED);
}

void air__exchange_resume(air__exchange *x) {
  if (x != NULL && x->xfer != NULL) x->tr.ops->resume(x->tr.impl, x->xfer);
}

static void on_timer_closed(void *arg) {
  air__exchange *x = arg;
  air__gate_cleanup(&x->gate);
  air__sse_cleanup(&x->sse);
  air__decoder_cleanup(&x->dec);
  air__buf_cleanup(&x->body);
  air__buf_cleanup(&x->err);
  air__buf_cleanup(&x->kept);
  air__buf_cleanup(&x->strs);
  if (x->parts != x->parts_inline) free(x->parts);
  air_run_free(x->run);
  free(x);
}

void air__exchange_free(air__exchange *x) {
  if (x == NULL || x->freeing) return;
  x->freeing = true;
  xfer_cancel(x);
  x->loop.ops->timer_close(x->loop.impl, x->timer, on_timer_closed, x);
}
