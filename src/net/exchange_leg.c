/*
 * One leg of the exchange (exchange_int.h): an attempt launched, the
 * transport's callbacks, its decoding, its commit gate and what it
 * releases, its deadlines and its failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "classify.h"
#include "exchange_int.h"
#include "spans.h"

static int emit(void *data, const air__gate_event *ev);
static int on_sse(void *data, const air__sse_event *ev);
static void record_stop(air__leg *l, int rc);

/* The loop thread's pool of legs, or NULL: calloc and free. */
static air__pool *pool_of(const air__exchange *x) {
  return x->o.pools ? &x->o.pools->legs : NULL;
}

/* ---- legs ---------------------------------------------------------------- */

air__leg *air__leg_take(air__exchange *x) {
  for (unsigned k = 0; k < x->n_legs; k++)
    if (x->legs[k]->state == AIR__LEG_FREE) return x->legs[k];
  if (x->n_legs >= AIR__MAX_LEGS) return NULL;
  air__leg *l = air__pool_take(pool_of(x), sizeof(*l));
  if (l == NULL) return NULL;
  l->x = x;
  if (air__gate_init(&l->gate, &x->gcfg, emit, l) != 0) {
    air__gate_cleanup(&l->gate);
    air__pool_put(pool_of(x), l, sizeof(*l));
    return NULL;
  }
  l->parts = l->parts_inline;
  l->cap_parts = AIR__LEG_INLINE_PARTS;
  air__sse_init(&l->sse, on_sse, l);
  air__buf_init(&l->body, AIR__MAX_REQUEST_BYTES);
  air__buf_init(&l->err, x->o.cfg->limits.max_response_bytes
                             ? x->o.cfg->limits.max_response_bytes
                             : AIR__MAX_RESPONSE_BYTES);
  air__upstream_init(&l->up);
  x->legs[x->n_legs++] = l;
  return l;
}

void air__leg_free(air__leg *l) {
  air__gate_cleanup(&l->gate);
  air__sse_cleanup(&l->sse);
  air__decoder_cleanup(&l->dec);
  air__buf_cleanup(&l->body);
  air__buf_cleanup(&l->err);
  air__upstream_cleanup(&l->up);
  if (l->parts != l->parts_inline) free(l->parts);
  free(l->cparts);
  free(l->coff);
  air__pool_put(pool_of(l->x), l, sizeof(*l));
}

/* ---- released events ----------------------------------------------------- */

/*
 * The first release of an attempt is its first content: the engine is told
 * and the bytes go on only when it answers COMMIT for that attempt (x->act);
 * the other racers are cancelled then. A judged answer released after the
 * run failed (step, FAIL) is the run's own final decision, with no attempt
 * in flight to report. A leg that lost never releases anything.
 */
static int emit(void *data, const air__gate_event *ev) {
  air__leg *l = data;
  air__exchange *x = l->x;
  if (!air__live(x)) return 1; /* cancelled: nothing more is released */
  if (l->cont) return air__cont_emit(l, ev);
  if (x->notified && x->win != l) return AIR_ESTATE;
  if (!x->notified) {
    if (x->act.kind != AIR_ACT_FAIL) {
      int rc = air__exchange_commit(l);
      if (rc != 0) return rc;
    }
    x->notified = true;
    x->win = l;
    x->first_content_ms = air__now(x) - x->start_ms;
    x->answered = l->target;
    air__commit_info ci = {
        .target = l->target,
        .attempts = l->no,
        .made = air__run_attempts(x->run),
        .upstream = l->ops ? l->ops->api : AIR_DIALECT_OPENAI,
        .ms = x->first_content_ms,
        .headers = l->up.hv,
        .n_headers = l->up.n_hv,
    };
    ci.continuable = x->c.on && !x->c.never;
    air__tell_commit(x, &ci);
    if (!air__live(x)) return 1;
  }
  if (x->c.on && !x->c.never) air__cont_note(x, ev);
  if (air__tell_event(x, ev) == 1) l->pause_pending = true;
  return air__live(x) ? 0 : 1;
}

/* ---- decoding ------------------------------------------------------------ */

/* Gathers the parts of one event; an event with many (parallel tool calls)
 * moves to a heap array, bounded by AIR__MAX_EVENT_PARTS. */
static int collect(void *data, const air_part *p) {
  air__leg *l = data;
  if (l->n_parts == l->cap_parts) {
    size_t cap = l->cap_parts * 2;
    if (cap > AIR__MAX_EVENT_PARTS) return 1; /* stops decoding: malformed */
    air_part *a = l->parts == l->parts_inline
                      ? malloc(cap * sizeof(*a))
                      : realloc(l->parts, cap * sizeof(*a));
    if (a == NULL) {
      l->dec.oom = true;
      return 1;
    }
    if (l->parts == l->parts_inline)
      memcpy(a, l->parts_inline, sizeof(l->parts_inline));
    l->parts = a;
    l->cap_parts = cap;
  }
  l->parts[l->n_parts++] = *p;
  return 0;
}

/*
 * The race (docs/design.md §3.6) is won when a leg's first content part
 * arrives, before the refusal hold or complete-mode judging: the engine cancels
 * the other racers. Without racers this only ends hedging for the request.
 */
static void tell_content(air__leg *l) {
  air__exchange *x = l->x;
  if (l->content_told || !l->gate.content || x->notified) return;
  l->content_told = true;
  air_action a;
  if (air_run_first_part(x->run, l->id, air__now(x), &a) == 0)
    air__exchange_engine_did(x, &a);
}

/* Feeds one decoded batch of parts to the gate; 1 when the attempt stops. */
static int feed_gate(air__leg *l, const char *raw, size_t raw_len,
                     unsigned before_malformed) {
  air__exchange *x = l->x;
  for (unsigned m = before_malformed; m < l->dec.malformed; m++) {
    x->malformed++;
    if (air__gate_malformed(&l->gate) == 1) return 1;
  }
  unsigned flags = (l->dec.usage_only ? AIR__EV_USAGE_ONLY : 0) |
                   (l->dec.terminator ? AIR__EV_TERMINATOR : 0) |
                   (l->dec.error_event ? AIR__EV_ERROR : 0) |
                   (l->dec.server_tool ? AIR__EV_SERVER_TOOL : 0);
  /* A caller that does not stream gets parts only: the gate need not
   * keep the raw bytes of the whole answer it holds. */
  if (!x->o.req->stream) {
    raw = NULL;
    raw_len = 0;
  }
  air__gate_event gev = {raw, raw_len, l->parts, l->n_parts, flags};
  int rc = air__gate_feed(&l->gate, &gev, air__now(x));
  if (rc == 0) tell_content(l);
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
  air__leg *l = data;
  air__exchange *x = l->x;
  l->n_parts = 0;
  unsigned before = l->dec.malformed;
  l->dec.oom = false;
  if (l->ops->decode_event(&l->dec, ev, collect, l) != 0 && !l->dec.oom)
    l->dec.malformed++; /* over AIR__MAX_EVENT_PARTS: skipped as malformed */
  if (l->dec.oom) {
    /* Not the upstream's fault, and never a part to skip: the attempt
     * fails (an answer is never passed on shortened). */
    record_stop(l, AIR_ENOMEM);
    return 1;
  }
  if (l->dec.fatal != NULL) {
    /* A field that carries meaning over its limit (dialect.h). */
    x->malformed++;
    air__leg_fail(l, AIR_REASON_MALFORMED, l->up.status, l->dec.fatal,
                  AIR_TRANSPORT_OK);
    return 1;
  }
  if (l->gate.committed && l->dec.error_event && l->dec.malformed == before) {
    /* An error event after commit ends the attempt, final; the consumer
     * hears of it once, through on_end, never as a part. */
    char type[64] = "", msg[256] = "upstream error event";
    for (size_t i = 0; i < l->n_parts; i++) {
      if (l->parts[i].kind != AIR_PART_ERROR) continue;
      part_str(type, sizeof(type), l->parts[i].name, l->parts[i].name_len);
      if (l->parts[i].text_len)
        part_str(msg, sizeof(msg), l->parts[i].text, l->parts[i].text_len);
    }
    air__upstream_fail(&l->up,
                       air__classify(200, type, NULL, msg, AIR_TRANSPORT_OK),
                       l->up.status, type, NULL, msg, AIR_TRANSPORT_OK);
    return 1;
  }
  if (l->dec.malformed > before) {
    /* Skipped and counted: never released, not even as raw bytes. */
    for (unsigned m = before; m < l->dec.malformed; m++) {
      x->malformed++;
      if (air__gate_malformed(&l->gate) == 1) return 1;
    }
    return 0;
  }
  return feed_gate(l, ev->raw.p, ev->raw.n, before);
}

/* ---- the attempt's failure ----------------------------------------------- */

void air__leg_fail(air__leg *l, air_reason reason, int status,
                   const char *message, air_transport_err transport) {
  air__upstream_fail(&l->up, reason, status, NULL, NULL, message, transport);
}

static void fail_from_gate(air__leg *l) {
  air__leg_fail(l, l->gate.reason, l->up.status, l->gate.message,
                AIR_TRANSPORT_OK);
}

/* ---- transport callbacks ------------------------------------------------- */

static bool is_event_stream(const air_header *h, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (h[i].name_len == 12 &&
        strncasecmp(h[i].name, "content-type", 12) == 0) {
      for (size_t k = 0; k + 17 <= h[i].value_len; k++)
        if (strncasecmp(h[i].value + k, "text/event-stream", 17) == 0)
          return true;
      return false;
    }
  }
  return false;
}

static void on_head(void *data, int status, const air_header *h, size_t n) {
  air__leg *l = data;
  if (l->state != AIR__LEG_RUNNING) return; /* lost: removed on the next turn */
  air__leg_disarm(l, AIR__DUE_FIRST_BYTE);
  l->up.status = status;
  air__run_note_status(l->x->run, l->id, status);
  air__upstream_keep_headers(&l->up, h, n);
  l->mode =
      status == 200 && is_event_stream(h, n) ? AIR__READ_SSE : AIR__READ_BODY;
}

/* Stops when the request was cancelled or this leg lost the race. */
static bool stopped(const air__leg *l) {
  return l->x->cancel_pending || l->state != AIR__LEG_RUNNING;
}

/*
 * The attempt stops before its transfer ended (the decoder, the gate or the
 * release said stop): a failure is always recorded, so a stop never reads
 * as a success nor waits for a deadline. rc is what stopped it.
 */
static void record_stop(air__leg *l, int rc) {
  if (l->up.have_fail) return;
  if (l->gate.state == AIR__GATE_FAILED) {
    fail_from_gate(l);
    return;
  }
  air__leg_fail(l, AIR_REASON_MALFORMED, l->up.status,
                rc == AIR_ENOMEM ? "out of memory while passing the answer on"
                                 : "the answer could not be passed on",
                AIR_TRANSPORT_BADBODY);
}

static int on_body(void *data, const char *p, size_t n) {
  air__leg *l = data;
  air__exchange *x = l->x;
  if (stopped(l)) return -1;
  if (l->mode != AIR__READ_SSE) {
    if (l->up.status != 200) /* diagnostic: its first part is kept */
      return air__upstream_error_piece(&l->up, &l->err, p, n);
    if (air__buf_add(&l->err, p, n) == 0) return 0;
    air__leg_fail(l, AIR_REASON_MALFORMED, l->up.status,
                  "response body over max_response_bytes",
                  AIR_TRANSPORT_BADBODY);
    return -1;
  }
  x->in_xfer_cb++;
  int rc = air__sse_feed(&l->sse, p, n);
  x->in_xfer_cb--;
  if (stopped(l)) return -1;
  if (rc < 0 && !l->up.have_fail && l->gate.state != AIR__GATE_FAILED) {
    air__leg_fail(l, AIR_REASON_MALFORMED, l->up.status,
                  rc == AIR_ENOMEM
                      ? "out of memory while reading the event stream"
                      : "event stream over the size limits",
                  AIR_TRANSPORT_BADBODY);
    return -1;
  }
  if (rc != 0 || l->up.have_fail || l->gate.state == AIR__GATE_FAILED) {
    record_stop(l, rc);
    return -1;
  }
  /* Deadlines: attempt_ms only until commit (a continuation's rescue
   * deadline until its seam opens); the part gap always. */
  if (l->gate.committed && (!l->cont || l->open))
    air__leg_disarm(l, AIR__DUE_ATTEMPT);
  air__leg_arm(l, AIR__DUE_PART, air__gate_deadline(&l->gate, NULL));
  /* Only the attempt the caller reads: a continuation before its seam
   * may run in the leg that broke (x->win), yet nothing of it is the
   * caller's. */
  if (x->notified && x->win == l && (!l->cont || l->open)) {
    x->in_xfer_cb++;
    if (air__tell_flush(x) == 1) l->pause_pending = true;
    x->in_xfer_cb--;
  }
  if (stopped(l)) return -1;
  if (l->pause_pending) {
    /* The caller does not read: the gap is the caller's, not the
     * upstream's. chunk_ms waits until the resume; the caller's own write
     * timeout bounds the stop. */
    l->pause_pending = false;
    l->paused = true;
    air__leg_disarm(l, AIR__DUE_PART);
    x->tr.ops->pause(x->tr.impl, l->xfer);
  }
  return 0;
}

/* Feeds one part of a whole response body to the gate at once: its strings
 * point into the decoder's document, valid only during this callback. */
static int feed_body_part(void *data, const air_part *p) {
  air__leg *l = data;
  air__gate_event gev = {NULL, 0, p, 1, 0};
  int rc = air__gate_feed(&l->gate, &gev, air__now(l->x));
  if (rc == 0) tell_content(l);
  if (rc != 0) l->body_stop = rc;
  return rc != 0 ? 1 : 0;
}

/* Decodes a complete non-stream 200 body into one released answer. */
static void finish_body(air__leg *l) {
  l->n_parts = 0;
  l->body_stop = 0;
  if (l->ops->decode_body(&l->dec, l->err.p ? l->err.p : "", l->err.n,
                          feed_body_part, l) != 0 &&
      l->gate.state != AIR__GATE_FAILED) {
    if (l->body_stop != 0) {
      record_stop(l, l->body_stop); /* the release stopped, not the decoder */
      return;
    }
    air__leg_fail(
        l, AIR_REASON_MALFORMED, 200,
        l->dec.fatal != NULL
            ? l->dec.fatal
            : "response is neither an event stream nor a response body",
        AIR_TRANSPORT_BADBODY);
    return;
  }
  int rc = 0;
  if (l->gate.state != AIR__GATE_FAILED)
    rc = air__gate_end(&l->gate, true, air__now(l->x));
  if (rc != 0 || l->gate.state == AIR__GATE_FAILED) record_stop(l, rc);
}

static void on_done(void *data, int rc, air_transport_err kind,
                    bool connect_timeout, const char *msg) {
  air__leg *l = data;
  air__exchange *x = l->x;
  l->xfer = NULL;
  if (l->state == AIR__LEG_LOST) { /* it ended before the reap removed it */
    l->state = AIR__LEG_FREE;
    return;
  }
  /* A stream whose part deadline had passed when it closed was silent
   * first: its close (by the upstream, or a proxy's idle timeout) is that
   * deadline's failure, not a network one (docs/design.md §3.5: a continuation
   * then avoids the target that went silent). */
  air_reason late = AIR_REASON_NONE;
  if (l->mode == AIR__READ_SSE && l->due[AIR__DUE_PART] != 0 &&
      air__now(x) >= l->due[AIR__DUE_PART])
    air__gate_deadline(&l->gate, &late);
  air__leg_disarm(l, AIR__DUE_FIRST_BYTE);
  air__leg_disarm(l, AIR__DUE_ATTEMPT);
  air__leg_disarm(l, AIR__DUE_PART);
  x->upstream_ms += air__now(x) - l->attempt_start;
  if (x->cancel_pending) {
    air__exchange_cancel_now(x);
    return;
  }
  if (rc == AIR_ECANCELED) {
    /* We stopped it: the failure is set (record_stop), never a success. */
    if (!l->up.have_fail) record_stop(l, rc);
  } else if (rc != 0) {
    air__leg_fail(
        l, connect_timeout ? AIR_REASON_TIMEOUT_CONNECT : AIR_REASON_NONE,
        l->up.status == 200 ? 0 : l->up.status, msg, kind);
  } else if (l->mode == AIR__READ_SSE) {
    air__sse_finish(&l->sse);
    if (l->gate.state != AIR__GATE_FAILED && l->gate.state != AIR__GATE_DONE) {
      /* Complete only with a finish: a terminator ([DONE], message_stop)
       * after no finish is a stream cut short as much as a closed socket
       * (docs/design.md §9: a terminator only after a finish). */
      bool clean = l->dec.finished;
      int grc = air__gate_end(&l->gate, clean, air__now(x));
      if (grc != 0 && air__live(x)) record_stop(l, grc);
    }
    if (l->gate.state == AIR__GATE_FAILED && !l->up.have_fail)
      fail_from_gate(l);
  } else if (l->up.status == 200) {
    finish_body(l);
  } else {
    air__upstream_fail_error_body(&l->up, &l->err);
  }
  if (x->cancel_pending) { /* the consumer cancelled while it was released */
    air__exchange_cancel_now(x);
    return;
  }
  if (late != AIR_REASON_NONE && l->up.have_fail &&
      (l->up.fail.reason == AIR_REASON_NETWORK ||
       (l->up.fail.reason == AIR_REASON_NONE &&
        l->up.fail.transport != AIR_TRANSPORT_OK)))
    air__leg_fail(
        l, late, l->up.status,
        late == AIR_REASON_TIMEOUT_CHUNK
            ? "no event within chunk_ms, then the connection closed"
            : "no content part within first_chunk_ms, then the connection "
              "closed",
        AIR_TRANSPORT_OK);
  /* Decided while releasing. */
  if (x->ended || l->state != AIR__LEG_RUNNING) return;
  /* A continuation that ended cleanly with nothing joined. */
  if (!l->up.have_fail && l->cont && !l->open)
    air__leg_fail(l, AIR_REASON_MALFORMED, l->up.status,
                  "the continuation ended before it could be joined",
                  AIR_TRANSPORT_OK);
  if (l->up.have_fail) {
    air__exchange_failed(l);
    return;
  }
  l->state = AIR__LEG_FREE;
  air_run_succeed(x->run, l->id, air__now(x), &x->act);
  air__exchange_engine_did(x, &x->act);
  air__exchange_step(x);
}

/* ---- deadlines ----------------------------------------------------------- */

static void timeout_fail(air__leg *l, air_reason reason, const char *msg) {
  air__exchange *x = l->x;
  air__leg_xfer_cancel(l);
  air__leg_disarm_all(l);
  x->upstream_ms += air__now(x) - l->attempt_start;
  air__leg_fail(l, reason, l->up.status, msg, AIR_TRANSPORT_OK);
  air__exchange_failed(l);
}

static void on_first_byte_timeout(air__leg *l) {
  timeout_fail(l, AIR_REASON_TIMEOUT_FIRST_BYTE,
               "no response headers within first_byte_ms");
}

static void on_attempt_timeout(air__leg *l) {
  if (l->cont) {
    /* The rescue's end (continuation.max_gap_ms): the gap the caller sees
     * has grown too long. */
    if (!l->open)
      timeout_fail(l, AIR_REASON_TIMEOUT_CHUNK,
                   "no continuation within continuation.max_gap_ms");
    return;
  }
  if (l->gate.committed) return;
  timeout_fail(l, AIR_REASON_TIMEOUT_ATTEMPT, "no commit within attempt_ms");
}

static void on_part_timeout(air__leg *l) {
  air_reason which;
  air__gate_deadline(&l->gate, &which);
  timeout_fail(l, which,
               which == AIR_REASON_TIMEOUT_FIRST_CHUNK
                   ? "no content part within first_chunk_ms"
                   : "no event within chunk_ms");
}

void air__leg_expired(air__leg *l, int which) {
  if (which == AIR__DUE_FIRST_BYTE)
    on_first_byte_timeout(l);
  else if (which == AIR__DUE_ATTEMPT)
    on_attempt_timeout(l);
  else
    on_part_timeout(l);
}

/* ---- launch -------------------------------------------------------------- */

int air__leg_launch(air__leg *l, const air_action *a) {
  air__exchange *x = l->x;
  const air__target *t = &air__run_route(x->run)->targets[a->target_index];
  const air_config *cfg = x->o.cfg;
  const air__provider *p = &cfg->providers[t->provider];
  l->state = AIR__LEG_RUNNING;
  l->ops = air__dialect_get(p->api);
  l->target = a->target;
  l->no = a->attempt;
  l->id = a->attempt_id;
  l->act = *a;
  l->cont = a->kind == AIR_ACT_CONTINUE;
  l->style = l->cont ? (air_cont_style)a->style : AIR_CONT_NONE;
  l->open = false;
  l->seam_failed = false;
  l->u_in = l->u_out = 0;
  /* Its log entry: the last one with its number (a relaunch with the JSON
   * tool runs after other racers may have started). */
  l->log = air_run_attempt_count(x->run) - 1;
  for (size_t i = l->log + 1; i > 0; i--) {
    const air_attempt *e = air_run_attempt(x->run, i - 1);
    if (!e->skipped && e->n == a->attempt) {
      l->log = i - 1;
      break;
    }
  }
  l->attempt_start = air__now(x);
  air__upstream_begin(&l->up);
  l->mode = AIR__READ_NONE;
  l->content_told = false;
  l->pause_pending = false;
  l->paused = false;
  air__buf_reset(&l->err);
  air__buf_reset(&l->body);
  air__sse_reset(&l->sse);
  air__decoder_cleanup(&l->dec);
  l->ops->decoder_init(&l->dec);
  air__gate_begin(&l->gate, l->attempt_start);
  l->gate.cfg.first_chunk_ms = t->timeouts.first_chunk_ms;
  l->gate.cfg.chunk_ms = t->timeouts.chunk_ms;
  if (air__upstream_key(&l->up, p) != 0) return 1;
  air_error err;
  memset(&err, 0, sizeof(err));
  air__build_opts bo = {
      .model = t->model,
      .override_json = a->override_json,
      .drop_params = cfg->drop_params,
      .default_max_tokens = cfg->default_max_tokens,
      .structured_output = t->structured_output,
      .other_provider =
          x->state_provider != SIZE_MAX && t->provider != x->state_provider,
      .json_tool = &l->dec.json_tool,
  };
  if (x->tool_retry_id == l->id) bo.structured_output = AIR__STRUCT_TOOL;
  l->native_json = bo.structured_output == AIR__STRUCT_NATIVE &&
                   l->ops->api == AIR_DIALECT_ANTHROPIC &&
                   x->o.req->dialect != AIR_DIALECT_ANTHROPIC &&
                   x->o.req->json_response;
  int built = l->cont
                  ? air__cont_build(l, &bo, &err)
                  : air__request_build(l->ops, x->o.req, &bo, &l->body, &err);
  if (built == AIR_ENOTSUP) {
    /* Outcome skipped (docs/design.md §2.1): nothing is sent to this target. */
    char field[AIR__MAX_NAME_BYTES];
    air__unsupported_field(err.message, field, sizeof(field));
    air__buf_reset(&l->up.strs);
    l->skip_field = air__upstream_keep(&l->up, field);
    l->skip_msg = air__upstream_keep(&l->up, err.message);
    return 2;
  }
  if (built != 0) {
    air__upstream_fail(&l->up, AIR_REASON_BAD_REQUEST, 400,
                       "invalid_request_error", NULL, err.message,
                       AIR_TRANSPORT_OK);
    return 1;
  }
  if (x->o.req->raw == NULL && !l->cont) /* no caller text: the body's size */
    air__run_set_prompt_bytes(x->run, l->body.n);
  char tp[AIR__TRACEPARENT_LEN + 1];
  if (x->o.trace != NULL) air__trace_attempt_header(x->o.trace, l->no, tp);
  air__upstream_req r = {
      .provider = p,
      .target = t,
      .path = l->ops->path,
      .accept = "text/event-stream",
      .traceparent = x->o.trace != NULL ? tp : NULL,
      /* the caller's headers go to upstreams of its own dialect only */
      .forward = x->o.req->dialect == p->api ? x->o.forward : NULL,
      .body = l->body.p,
      .body_len = l->body.n,
  };
  air__xfer_cb cb = {on_head, on_body, on_done, l};
  if (air__upstream_send(&l->up, &x->tr, &r, &cb, &l->xfer) != 0) return 1;
  uint64_t now = l->attempt_start;
  air__leg_arm(l, AIR__DUE_FIRST_BYTE, now + t->timeouts.first_byte_ms);
  air__leg_arm(l, AIR__DUE_ATTEMPT, a->deadline_ms);
  air__leg_arm(l, AIR__DUE_PART, air__gate_deadline(&l->gate, NULL));
  return 0;
}
