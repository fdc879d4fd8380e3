/*
 * What every endpoint shares (endpoint.h): error answers before any
 * exchange, forwarded caller headers, the access-log line, clocks.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "endpoint.h"
#include "limits.h"

const air__http_field air__gw_json_ct = {"content-type", 12, "application/json",
                                         16};

/* ---- clocks -------------------------------------------------------------- */

uint64_t air__gw_mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The date and time of day are formatted once per second per thread. */
void air__gw_utc_now(char *t, size_t n) {
  static _Thread_local time_t sec = -1;
  static _Thread_local char head[64]; /* "YYYY-MM-DDThh:mm:ss" */
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (ts.tv_sec != sec) {
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(head, sizeof(head), "%04d-%02d-%02dT%02d:%02d:%02d",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec);
    sec = ts.tv_sec;
  }
  long ms = ts.tv_nsec / 1000000;
  if (n < 25) {
    if (n > 0) t[0] = '\0';
    return;
  }
  memcpy(t, head, 19);
  t[19] = '.';
  t[20] = (char)('0' + ms / 100);
  t[21] = (char)('0' + ms / 10 % 10);
  t[22] = (char)('0' + ms % 10);
  t[23] = 'Z';
  t[24] = '\0';
}

/* ---- the access-log line ------------------------------------------------- */

static void line_head(air__gw_line *l) {
  air__buf_puts(&l->b, "{\"time\":\"");
  air__buf_puts(&l->b, l->t);
  air__buf_puts(&l->b, "\",\"request_id\":\"");
  air__buf_puts(&l->b, l->rid);
  air__buf_putc(&l->b, '"');
}

void air__gw_line_begin(air__gw_line *l, const char *rid) {
  air__buf_init_on(&l->b, AIR__MAX_LOG_LINE_BYTES, l->mem, sizeof(l->mem));
  l->rid = rid ? rid : "";
  air__gw_utc_now(l->t, sizeof(l->t));
  line_head(l);
}

void air__gw_line_api(air__gw_line *l, air_dialect dialect) {
  air__buf_puts(&l->b, ",\"api\":\"");
  air__buf_puts(&l->b, air__dialect_get(dialect)->name);
  air__buf_putc(&l->b, '"');
}

void air__gw_line_attempts(air__gw_line *l, const air_attempt *log, size_t n) {
  air__buf *b = &l->b;
  air__buf_puts(b, ",\"attempts\":[");
  for (size_t i = 0; i < n; i++) {
    const air_attempt *a = &log[i];
    if (i) air__buf_putc(b, ',');
    air__buf_puts(b, "{\"target\":");
    air__buf_put_json_str(b, a->target, strlen(a->target));
    if (a->skipped) {
      air__buf_puts(b, ",\"outcome\":\"skipped\",\"field\":");
      air__buf_put_json_str(b, a->field ? a->field : "",
                            a->field ? strlen(a->field) : 0);
      air__buf_putc(b, '}');
      continue;
    }
    /* A hedge racer is marked; one that lost has outcome hedge_lost and
     * no reason (docs/design.md §2.1, 3.6). */
    if (a->hedge) air__buf_puts(b, ",\"hedge\":true");
    /* A continuation (docs/design.md §3.5); one whose prefill was rejected was
     * asked again with instruct and counts toward no budget. */
    if (a->continuation) air__buf_puts(b, ",\"continuation\":true");
    if (a->prefill_rejected) air__buf_puts(b, ",\"prefill_rejected\":true");
    if (a->hedge_lost) {
      air__buf_puts(b, ",\"outcome\":\"hedge_lost\"");
    } else {
      air__buf_puts(b, ",\"reason\":\"");
      air__buf_puts(b, a->reason ? air_reason_name(a->reason) : "ok");
      air__buf_putc(b, '"');
    }
    air__buf_puts(b, ",\"status\":");
    air__buf_putu(b, (unsigned long long)a->status);
    air__buf_puts(b, ",\"ms\":");
    air__buf_putu(b, a->ms);
    if (a->wait_ms) {
      air__buf_puts(b, ",\"wait_ms\":");
      air__buf_putu(b, a->wait_ms);
    }
    air__buf_putc(b, '}');
  }
  air__buf_putc(b, ']');
}

void air__gw_line_outcome(air__gw_line *l, const char *outcome, int status) {
  air__buf_puts(&l->b, ",\"outcome\":\"");
  air__buf_puts(&l->b, outcome);
  air__buf_puts(&l->b, "\",\"status\":");
  air__buf_putu(&l->b, (unsigned long long)status);
}

void air__gw_line_end(air__gw_line *l, size_t n_log, const char *outcome,
                      int status) {
  air__buf_puts(&l->b, "}\n");
  if (air__buf_error(&l->b) != 0) {
    /* Over the line's limit (a huge attempt log): the line without it. */
    air__buf_reset(&l->b);
    line_head(l);
    air__buf_puts(&l->b, ",\"attempts_omitted\":");
    air__buf_putu(&l->b, n_log);
    air__gw_line_outcome(l, outcome, status);
    air__buf_puts(&l->b, "}\n");
  }
  if (air__buf_error(&l->b) == 0) air__gw_log(l->b.p, l->b.n);
  air__buf_cleanup(&l->b);
}

/* ---- error answers before any exchange ----------------------------------- */

/* The log line of a request the gateway answered itself. */
static void log_rejected(const air__http_request *msg, air_dialect dialect,
                         int status, air_reason reason, const char *message,
                         const char *rid) {
  air__gw_line l;
  air__gw_line_begin(&l, rid);
  air__buf_puts(&l.b, ",\"path\":");
  air__buf_put_json_str(&l.b, msg->path.p,
                        msg->path.n < 256 ? msg->path.n : 256);
  air__gw_line_api(&l, dialect);
  air__gw_line_attempts(&l, NULL, 0);
  air__gw_line_outcome(&l, "rejected", status);
  air__buf_puts(&l.b, ",\"reason\":\"");
  air__buf_puts(&l.b, air_reason_name(reason));
  air__buf_puts(&l.b, "\",\"message\":");
  air__buf_put_json_str(&l.b, message, strlen(message));
  air__gw_line_end(&l, 0, "rejected", status);
}

size_t air__gw_error_parts(const air__http_request *msg, air_dialect dialect,
                           int status, air_reason reason, const char *message,
                           const char *rid, air__buf *body,
                           air__http_field *f) {
  log_rejected(msg, dialect, status, reason, message, rid);
  air__buf_init(body, AIR__MAX_ERROR_BODY_BYTES);
  air__dialect_get(dialect)->encode_error_body(status, reason, message, NULL, 0,
                                               body);
  size_t n = 0;
  f[n++] = air__gw_field("x-should-retry", "false");
  if (rid == NULL) return n;
  f[n++] = air__gw_field("x-request-id", rid);
  /* Anthropic callers also get request-id (docs/design.md §5). */
  if (dialect == AIR_DIALECT_ANTHROPIC)
    f[n++] = air__gw_field("request-id", rid);
  return n;
}

void air__gw_respond_text(air__http_req *req, int status, const char *ct,
                          const char *body, size_t n) {
  air__http_field f[1] = {air__gw_field("content-type", ct)};
  air__http_respond(req, status, f, 1, body, n);
}

void air__gw_respond_error(air__http_req *req, air_dialect dialect, int status,
                           air_reason reason, const char *message,
                           const char *rid) {
  air__buf body;
  air__http_field f[1 + AIR__GW_ERROR_FIELDS] = {air__gw_json_ct};
  size_t n = 1 + air__gw_error_parts(air__http_req_msg(req), dialect, status,
                                     reason, message, rid, &body, f + 1);
  air__http_respond(req, status, f, n, body.p, body.n);
  air__buf_cleanup(&body);
}

void air__gw_respond_start_error(air__http_req *req, air_dialect dialect,
                                 int rc, const char *model, const char *rid) {
  if (rc == AIR_ENOTFOUND) {
    char m[320];
    snprintf(m, sizeof(m), "model '%.200s' is not a route or provider/model",
             model);
    air__gw_respond_error(req, dialect, 404, AIR_REASON_NOT_FOUND, m, rid);
  } else {
    air__gw_respond_error(req, dialect, 503, AIR_REASON_OVERLOADED,
                          air_strerror(rc), rid);
  }
}

/* ---- forwarded caller headers -------------------------------------------- */

void air__gw_forward_init(air__gw_forward *f) {
  air__buf_init(&f->buf, AIR__MAX_FORWARD_BYTES);
  f->lines[0] = NULL;
}

/* Offsets first, pointers once the buffer no longer moves. */
void air__gw_forward_collect(air__gw_forward *f, const air_config *cfg,
                             const air__http_request *msg) {
  size_t offs[AIR__GW_MAX_FORWARD], n = 0;
  for (size_t i = 0; i < cfg->n_forward_headers && n < AIR__GW_MAX_FORWARD;
       i++) {
    const air__str *h = air__http_find_header(msg, cfg->forward_headers[i]);
    if (h == NULL) continue;
    size_t at = f->buf.n;
    int rc = air__buf_adds(&f->buf, cfg->forward_headers[i]);
    if (rc == 0) rc = air__buf_adds(&f->buf, ": ");
    if (rc == 0) rc = air__buf_add(&f->buf, h->p, h->n);
    if (rc == 0) rc = air__buf_addc(&f->buf, '\0');
    if (rc != 0) break;
    offs[n++] = at;
  }
  for (size_t i = 0; i < n; i++) f->lines[i] = f->buf.p + offs[i];
  f->lines[n] = NULL;
}

void air__gw_forward_cleanup(air__gw_forward *f) {
  air__buf_cleanup(&f->buf);
}
