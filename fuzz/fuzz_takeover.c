/*
 * libFuzzer target for the encoder take-over of a continued stream
 * (docs/design.md §3.5; encoder_observe of each dialect, takeover.c).
 *
 * Input layout: h[0] % 3 picks the dialect (openai, anthropic, responses),
 * h[1] the length of the continuation's text (cut to what there is); then
 * that text, then an upstream event stream of the dialect. The stream is
 * parsed by air__sse; every event is decoded, passed through (its raw
 * bytes are the caller's) and observed. Then the encoder takes over, adds
 * an earlier attempt's usage and a continuation, writes a keep-alive and
 * encodes START, TEXT (the text), FINISH, USAGE and the end, or an error
 * event when h[0] & 4. Every event the encoder wrote must be one JSON
 * object (or [DONE]); Responses sequence numbers it wrote must be strictly
 * increasing and above every one the upstream's events carried.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "airetry.h"
#include "json.h"
#include "dialect.h"
#include "sse.h"

#define CHECK(cond)       \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

typedef struct run {
  const air__dialect_ops *ops;
  air__decoder d;
  air__encoder e;
  air_part parts[64];
  size_t n_parts;
  uint64_t max_seq; /* the highest upstream sequence_number + 1 */
  bool ours;        /* checking the encoder's own events */
  uint64_t last;    /* the last sequence number written by us + 1 */
} run;

static int on_part(void *data, const air_part *p) {
  run *r = data;
  if (r->n_parts < 64) r->parts[r->n_parts++] = *p;
  return 0;
}

static int on_upstream(void *data, const air__sse_event *ev) {
  run *r = data;
  r->n_parts = 0;
  r->ops->decode_event(&r->d, ev, on_part, r);
  r->ops->encoder_observe(&r->e, ev, r->parts, r->n_parts);
  uint64_t s;
  if (air__scan_uint(ev->data.p, ev->data.n, "sequence_number", &s) &&
      s + 1 > r->max_seq)
    r->max_seq = s + 1;
  return 0;
}

static int on_ours(void *data, const air__sse_event *ev) {
  run *r = data;
  if (ev->data.n == 6 && memcmp(ev->data.p, "[DONE]", 6) == 0) return 0;
  air__json j;
  CHECK(air__json_parse(&j, ev->data.p, ev->data.n) == 0);
  CHECK(air__json_is_obj(&j, 0));
  air__json_cleanup(&j);
  uint64_t s;
  if (r->ops->api == AIR_DIALECT_OPENAI_RESPONSES) {
    CHECK(air__scan_uint(ev->data.p, ev->data.n, "sequence_number", &s));
    CHECK(s >= r->max_seq && s >= r->last);
    r->last = s + 1;
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  static const air_dialect ds[] = {AIR_DIALECT_OPENAI, AIR_DIALECT_ANTHROPIC,
                                   AIR_DIALECT_OPENAI_RESPONSES};
  run r;
  memset(&r, 0, sizeof(r));
  r.ops = air__dialect_get(ds[data[0] % 3]);
  bool fail = data[0] & 4;
  size_t tn = data[1];
  const char *rest = (const char *)data + 2;
  size_t rn = size - 2;
  if (tn > rn) tn = rn;
  const char *text = rest;
  const char *up = rest + tn;
  size_t upn = rn - tn;

  air__request req;
  memset(&req, 0, sizeof(req));
  req.dialect = r.ops->api;
  req.stream = true;
  req.include_usage = true;
  r.ops->decoder_init(&r.d);
  r.ops->encoder_init(&r.e, &req, 42);
  r.e.passthrough = true;
  air__sse sse;
  air__sse_init(&sse, on_upstream, &r);
  (void)air__sse_feed(&sse, up, upn);
  air__sse_cleanup(&sse);

  air__buf out;
  air__buf_init(&out, 1u << 24);
  air__encoder_take_over(&r.e);
  air__encoder_add_usage(&r.e, 5, 6);
  CHECK(air__encoder_add_continued(&r.e, "p/\"m\"", 7) == 0);
  CHECK(r.ops->encode_keepalive(&r.e, &out) == 0);
  air_part parts[] = {
      {.kind = AIR_PART_START,
       .id = "x",
       .id_len = 1,
       .name = "m",
       .name_len = 1},
      {.kind = AIR_PART_TEXT, .text = text, .text_len = tn},
      {.kind = AIR_PART_FINISH, .finish = AIR_FINISH_STOP},
      {.kind = AIR_PART_USAGE, .input_tokens = 1, .output_tokens = 2},
  };
  int rc = 0;
  for (size_t i = 0; i < (fail ? 2u : 4u) && rc == 0; i++)
    rc = r.ops->encode_part(&r.e, &parts[i], &out);
  /* A tool call observed open and text after it: the Responses encoder
   * may refuse (EINVAL); a finished stream refuses more (ESTATE). */
  CHECK(rc == 0 || rc == AIR_EINVAL || rc == AIR_ESTATE || rc == AIR_ETOOBIG);
  if (rc == 0) {
    rc = fail ? r.ops->encode_error_event(&r.e, AIR_REASON_NETWORK, "x", &out)
              : r.ops->encode_end(&r.e, &out);
    CHECK(rc == 0 || rc == AIR_ESTATE || rc == AIR_ETOOBIG);
  }
  if (rc == 0) {
    r.ours = true;
    air__sse_init(&sse, on_ours, &r);
    CHECK(air__sse_feed(&sse, out.p, out.n) == 0);
    CHECK(air__sse_finish(&sse) == 0);
    air__sse_cleanup(&sse);
  }
  air__buf_cleanup(&out);
  air__decoder_cleanup(&r.d);
  air__encoder_cleanup(&r.e);
  return 0;
}
