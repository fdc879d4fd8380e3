/*
 * Micro-benchmark of the Anthropic codec on its hot path: one typical
 * content_block_delta text event (~110 bytes) per feed, as a gateway sees
 * it when every read holds one event.
 *
 *   sse + decode_event          the event parsed and decoded into a part
 *   sse + decode + encode       the same, the part re-encoded for an
 *                               Anthropic caller (the bytes a gateway writes)
 *   encode_part only            a TEXT part encoded (the cross-dialect
 *                               half: parts from an OpenAI upstream)
 *
 * Prints the median ns per event over ROUNDS rounds of EVENTS events.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dialect.h"
#include "sse.h"

#define EVENTS 200000
#define ROUNDS 7

static const char event[] =
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,"
    "\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello there\"}}\n\n";

static const air__dialect_ops *const ops = &air__dialect_anthropic;

typedef struct sink {
  air__decoder d;
  air__encoder e;
  air__buf out;
  uint64_t parts;
  uint64_t bytes;
  int encode;
} sink;

static int on_part(void *data, const air_part *p) {
  sink *s = data;
  s->parts++;
  s->bytes += p->text_len;
  if (s->encode) {
    air__buf_reset(&s->out);
    if (ops->encode_part(&s->e, p, &s->out) != 0) return -1;
    s->bytes += s->out.n;
  }
  return 0;
}

static int on_event(void *data, const air__sse_event *ev) {
  sink *s = data;
  return ops->decode_event(&s->d, ev, on_part, s);
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One round of EVENTS events; mode 0 decode, 1 decode + encode, 2 encode
 * only. Returns ns per event. */
static double round_ns(int mode) {
  sink s;
  memset(&s, 0, sizeof(s));
  ops->decoder_init(&s.d);
  ops->encoder_init(&s.e, NULL, 0);
  air__buf_init(&s.out, 1u << 20);
  s.encode = mode == 1;
  air__sse p;
  air__sse_init(&p, on_event, &s);
  /* A text block already open, as in the middle of a stream. */
  air_part text = {.kind = AIR_PART_TEXT,
                   .text = "Hello there",
                   .text_len = 11,
                   .id = "",
                   .name = "",
                   .finish_raw = ""};
  if (ops->encode_part(&s.e, &text, &s.out) != 0) exit(1);
  size_t n = sizeof(event) - 1;
  double t0 = now_ns();
  if (mode == 2) {
    for (int i = 0; i < EVENTS; i++) {
      air__buf_reset(&s.out);
      if (ops->encode_part(&s.e, &text, &s.out) != 0) exit(1);
      s.bytes += s.out.n;
      s.parts++;
    }
  } else {
    for (int i = 0; i < EVENTS; i++) air__sse_feed(&p, event, n);
  }
  double t1 = now_ns();
  if (s.parts != (uint64_t)EVENTS || s.d.malformed != 0) {
    fprintf(stderr,
            "bench_anthropic: %llu parts, %u malformed, want %d parts\n",
            (unsigned long long)s.parts, s.d.malformed, EVENTS);
    exit(1);
  }
  air__sse_cleanup(&p);
  air__decoder_cleanup(&s.d);
  air__buf_cleanup(&s.out);
  return (t1 - t0) / EVENTS;
}

int main(void) {
  static const char *const names[3] = {
      "sse + decode_event", "sse + decode + encode", "encode_part only"};
  printf(
      "anthropic text delta: %zu bytes, %d events per round, median of %d "
      "rounds\n",
      sizeof(event) - 1, EVENTS, ROUNDS);
  for (int mode = 0; mode < 3; mode++) {
    double t[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) t[r] = round_ns(mode);
    qsort(t, ROUNDS, sizeof(t[0]), cmp_double);
    printf("%-24s %7.1f ns/event  (min %.1f, max %.1f)\n", names[mode],
           t[ROUNDS / 2], t[0], t[ROUNDS - 1]);
  }
  return 0;
}
