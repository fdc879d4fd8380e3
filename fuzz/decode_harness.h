/*
 * The harness the libFuzzer targets of the OpenAI chat and Responses
 * dialects share (fuzz_decode_openai.c, fuzz_decode_responses.c); header
 * only, no test framework. The input is used four ways:
 *   1. as an upstream event stream: parsed by air__sse (fed at once, then
 *      again in pieces of 1..16 bytes), every event decoded by decode_event;
 *      both runs must give the same parts and decoder state;
 *   2. as a non-streaming body: decode_body;
 *   3. as a caller request body of each of the target's caller dialects:
 *      air__request_parse, then air__request_build (with and without
 *      drop_params) must give a JSON object the target's check accepts;
 *   4. every part produced in 1 and 2 is checked (strings present, indexes
 *      in range), encoded for a caller of the dialect (its wire form
 *      checked) and aggregated; the aggregate's encode_response and an
 *      encode_error_body must be valid JSON too.
 */
#ifndef AIR__FUZZ_DECODE_HARNESS_H
#define AIR__FUZZ_DECODE_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "airetry.h"
#include "dialect.h"
#include "json.h"
#include "sse.h"

#define CHECK(cond)       \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

/* What differs between the dialects the harness drives. */
typedef struct fz_dialect {
  const air__dialect_ops *ops;
  air_dialect caller; /* the encoder's request is a streamed one of this */
  /* Aborts unless out (whole events) is the dialect's wire form. */
  void (*check_out)(const air__buf *out);
  /* encode_part may answer AIR_EINVAL (a part it cannot place). */
  bool encode_may_refuse;
  const air_dialect *callers; /* the caller dialects of 3. */
  size_t n_callers;
  const char *model; /* the target model of 3. */
  /* Aborts unless v, a body request_build wrote, is one for this dialect. */
  void (*check_body)(const json_t *v);
} fz_dialect;

typedef struct fz_run {
  const fz_dialect *dl;
  air__decoder d;
  air__encoder e;
  air__aggregate a;
  air__buf out;   /* encoder output not yet checked */
  air__buf trace; /* a digest of every part, to compare runs */
  bool error_seen;
} fz_run;

/* The "\n\n" that ends the event whose data starts at js in out; NULL when
 * there is none. */
static inline const char *fz_event_end(const air__buf *out, const char *js) {
  for (const char *q = js; q + 1 < out->p + out->n; q++)
    if (q[0] == '\n' && q[1] == '\n') return q;
  return NULL;
}

/* The n bytes at js are one JSON object. */
static inline void fz_check_object(const char *js, size_t n) {
  air__json j;
  CHECK(air__json_parse(&j, js, n) == 0);
  CHECK(air__json_is_obj(&j, 0));
  air__json_cleanup(&j);
}

static inline void fz_check_json(const air__buf *b) {
  air__json j;
  CHECK(air__json_parse(&j, b->p, b->n) == 0);
  CHECK(air__json_is_obj(&j, 0));
  air__json_cleanup(&j);
}

static inline void fz_trace_str(air__buf *t, const char *p, size_t n) {
  CHECK(n == 0 || p != NULL);
  air__buf_putu(t, n);
  air__buf_putc(t, ':');
  if (n) air__buf_put(t, p, n);
}

static inline int fz_on_part(void *data, const air_part *p) {
  fz_run *r = data;
  CHECK(p->kind >= AIR_PART_START && p->kind <= AIR_PART_ERROR);
  if (p->kind == AIR_PART_TOOL_START || p->kind == AIR_PART_TOOL_DELTA)
    CHECK(p->index >= 0 && p->index < AIR__DECODER_MAX_TOOLS);
  if (p->kind == AIR_PART_FINISH)
    CHECK(p->finish != AIR_FINISH_NONE && p->finish_raw_len > 0);
  if (p->kind == AIR_PART_TEXT || p->kind == AIR_PART_REASONING ||
      p->kind == AIR_PART_REFUSAL || p->kind == AIR_PART_TOOL_DELTA)
    CHECK(p->text_len > 0);
  air__buf_putu(&r->trace, (unsigned)p->kind);
  air__buf_putu(&r->trace, (unsigned)p->index);
  fz_trace_str(&r->trace, p->text, p->text_len);
  fz_trace_str(&r->trace, p->id, p->id_len);
  fz_trace_str(&r->trace, p->name, p->name_len);
  fz_trace_str(&r->trace, p->finish_raw, p->finish_raw_len);
  air__buf_putu(&r->trace, p->input_tokens);
  air__buf_putu(&r->trace, p->output_tokens);
  air__buf_putc(&r->trace, '\n');
  if (r->trace.n > (1u << 20)) air__buf_reset(&r->trace);

  int rc = air__aggregate_add(&r->a, p);
  CHECK(rc == 0 || rc == AIR_ETOOBIG);
  if (p->kind == AIR_PART_ERROR) r->error_seen = true;
  if (!r->error_seen) {
    rc = r->dl->ops->encode_part(&r->e, p, &r->out);
    CHECK(rc == 0 || rc == AIR_ETOOBIG ||
          (r->dl->encode_may_refuse && rc == AIR_EINVAL));
    if (r->out.n > (1u << 16)) {
      r->dl->check_out(&r->out);
      air__buf_reset(&r->out);
    }
  }
  return 0;
}

static inline int fz_on_event(void *data, const air__sse_event *ev) {
  fz_run *r = data;
  CHECK(r->dl->ops->decode_event(&r->d, ev, fz_on_part, r) == 0);
  if (r->d.terminator) CHECK(r->d.done);
  return 0;
}

static inline void fz_run_init(fz_run *r, const fz_dialect *dl,
                               bool include_usage) {
  air__request req = {.dialect = dl->caller, .include_usage = include_usage};
  r->dl = dl;
  dl->ops->decoder_init(&r->d);
  dl->ops->encoder_init(&r->e, &req, 1718000000);
  air__aggregate_init(&r->a);
  air__buf_init(&r->out, 1u << 22);
  air__buf_init(&r->trace, 1u << 22);
  r->error_seen = false;
}

/* Ends the encoding (clean end or error event), checks every output. */
static inline void fz_run_finish(fz_run *r) {
  const air__dialect_ops *ops = r->dl->ops;
  int rc = r->error_seen
               ? ops->encode_error_event(&r->e, AIR_REASON_SERVER_ERROR,
                                         "upstream \"error\"\n", &r->out)
               : ops->encode_end(&r->e, &r->out);
  CHECK(rc == 0 || rc == AIR_ETOOBIG);
  r->dl->check_out(&r->out);
  if (rc == 0) CHECK(ops->encode_end(&r->e, &r->out) == AIR_ESTATE);

  air__buf body;
  air__buf_init(&body, 1u << 24);
  r->a.created = 1;
  rc = ops->encode_response(&r->a, &body);
  CHECK(rc == 0 || rc == AIR_ETOOBIG);
  if (rc == 0) fz_check_json(&body);
  air__buf_cleanup(&body);
}

static inline void fz_run_cleanup(fz_run *r) {
  air__decoder_cleanup(&r->d);
  air__encoder_cleanup(&r->e);
  air__aggregate_cleanup(&r->a);
  air__buf_cleanup(&r->out);
  air__buf_cleanup(&r->trace);
}

static inline void fz_stream(const uint8_t *in, size_t n, size_t piece,
                             fz_run *r) {
  air__sse p;
  air__sse_init(&p, fz_on_event, r);
  size_t at = 0;
  uint32_t seed = (uint32_t)n * 2654435761u | 1u;
  while (at < n) {
    size_t k = n - at;
    if (piece) {
      seed ^= seed << 13;
      seed ^= seed >> 17;
      seed ^= seed << 5;
      size_t want = 1 + seed % piece;
      if (want < k) k = want;
    }
    int rc = air__sse_feed(&p, (const char *)in + at, k);
    CHECK(rc == 0 || rc == AIR_ETOOBIG);
    if (rc != 0) break;
    at += k;
  }
  air__sse_finish(&p);
  air__sse_cleanup(&p);
}

static inline void fz_requests(const fz_dialect *dl, const uint8_t *in,
                               size_t n) {
  for (size_t dia = 0; dia < dl->n_callers; dia++) {
    air__request req;
    air_error err;
    if (air__request_parse(dl->callers[dia], (const char *)in, n, &req, &err) !=
        0)
      continue;
    for (int drop = 0; drop < 2; drop++) {
      air__build_opts o = {.model = dl->model,
                           .drop_params = drop != 0,
                           .override_json = drop ? "{\"seed\":1}" : NULL,
                           .default_max_tokens = 4096};
      air__buf out;
      air__buf_init(&out, 1u << 26);
      memset(&err, 0, sizeof(err));
      int rc = air__request_build(dl->ops, &req, &o, &out, &err);
      if (rc == 0) {
        json_t *v = json_loadb(out.p, out.n, 0, NULL);
        CHECK(json_is_object(v));
        CHECK(json_is_true(json_object_get(v, "stream")));
        dl->check_body(v);
        json_decref(v);
      } else {
        /* EINVAL: invalid in itself; ENOTSUP: a field the target cannot
         * express (the target is skipped). */
        CHECK((rc == AIR_EINVAL || rc == AIR_ENOTSUP) && err.code == rc &&
              err.message[0] != '\0');
        CHECK(out.n == 0);
      }
      air__buf_cleanup(&out);
    }
    air__request_cleanup(&req);
  }
}

/* The whole of one fuzz input for dialect dl (1. to 4. above). */
static inline void fz_decode_input(const fz_dialect *dl, const uint8_t *data,
                                   size_t size) {
  bool usage = size > 0 && (data[0] & 1);

  /* 1. The stream, at once and in pieces: the same parts either way. */
  fz_run a, b;
  fz_run_init(&a, dl, usage);
  fz_run_init(&b, dl, usage);
  fz_stream(data, size, 0, &a);
  fz_stream(data, size, 16, &b);
  CHECK(a.trace.n == b.trace.n &&
        (a.trace.n == 0 || memcmp(a.trace.p, b.trace.p, a.trace.n) == 0));
  CHECK(a.d.malformed == b.d.malformed && a.d.done == b.d.done &&
        a.d.finished == b.d.finished && a.d.started == b.d.started);
  fz_run_finish(&a);
  fz_run_cleanup(&a);
  fz_run_cleanup(&b);

  /* 2. A whole body. */
  fz_run c;
  fz_run_init(&c, dl, usage);
  int rc = dl->ops->decode_body(&c.d, (const char *)data, size, fz_on_part, &c);
  CHECK(rc == 0 || rc == AIR_EPARSE || rc == AIR_ETOOBIG);
  if (rc == 0) CHECK(c.d.started);
  fz_run_finish(&c);
  fz_run_cleanup(&c);

  /* 3. A caller request. */
  fz_requests(dl, data, size);

  /* 4. An error body with a message from the input. */
  char msg[128];
  size_t mn = size < sizeof(msg) - 1 ? size : sizeof(msg) - 1;
  memcpy(msg, data, mn);
  msg[mn] = '\0';
  air_attempt log[1] = {{.n = 1,
                         .target = msg,
                         .reason = AIR_REASON_NETWORK,
                         .status = 502,
                         .message = msg,
                         .request_id = msg}};
  air__buf eb;
  air__buf_init(&eb, 1u << 16);
  CHECK(dl->ops->encode_error_body(502, (air_reason)(size % AIR_REASON__COUNT),
                                   msg, log, 1, &eb) == 0);
  fz_check_json(&eb);
  air__buf_cleanup(&eb);
}

#endif
