/*
 * Micro-benchmark of the OpenAI stream codec: median nanoseconds per event
 * over ROUNDS rounds of EVENTS events, for a typical chat.completion.chunk
 * text delta fed in 16 KiB reads:
 *   sse            air__sse parsing alone (reference)
 *   sse+decode     + decode_event (the passthrough path)
 *   sse+decode+enc + encode_part of every part for an OpenAI caller
 * One line per measurement. Build with optimisation and no sanitizers.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "airetry.h"
#include "dialect.h"
#include "sse.h"

#define EVENTS 200000
#define ROUNDS 7
#define PER_BUF 1000 /* events in the prepared stream buffer */
#define READ 16384   /* bytes per feed, like a socket read */

static const char CHUNK[] =
    "data: {\"id\":\"chatcmpl-AbC123\",\"object\":\"chat.completion.chunk\","
    "\"created\":1718000000,\"model\":\"gpt-4o-2024-08-06\",\"choices\":[{"
    "\"index\":0,\"delta\":{\"content\":\" "
    "world\"},\"finish_reason\":null}]}\n\n";

typedef enum mode { M_SSE, M_DECODE, M_ENCODE } mode;

typedef struct ctx {
  mode m;
  air__decoder d;
  air__encoder e;
  air__buf out;
  uint64_t parts;
} ctx;

static int on_part(void *data, const air_part *p) {
  ctx *c = data;
  c->parts++;
  if (c->m == M_ENCODE) {
    if (air__dialect_openai_chat.encode_part(&c->e, p, &c->out) != 0) return 1;
  }
  return 0;
}

static int on_event(void *data, const air__sse_event *ev) {
  ctx *c = data;
  if (c->m == M_SSE) {
    c->parts += ev->data.n;
    return 0;
  }
  int rc = air__dialect_openai_chat.decode_event(&c->d, ev, on_part, c);
  if (c->m == M_ENCODE) air__buf_reset(&c->out); /* as if written out */
  return rc;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double measure(mode m, const char *stream, size_t n) {
  double ns[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    ctx c = {.m = m};
    air__request req = {.dialect = AIR_DIALECT_OPENAI};
    air__dialect_openai_chat.decoder_init(&c.d);
    air__dialect_openai_chat.encoder_init(&c.e, &req, 1718000000);
    air__buf_init(&c.out, 1u << 20);
    air__sse p;
    air__sse_init(&p, on_event, &c);
    uint64_t t0 = now_ns();
    for (int k = 0; k < EVENTS / PER_BUF; k++) {
      for (size_t at = 0; at < n; at += READ) {
        if (air__sse_feed(&p, stream + at, n - at < READ ? n - at : READ) !=
            0) {
          fprintf(stderr, "feed failed\n");
          exit(1);
        }
      }
    }
    uint64_t t1 = now_ns();
    if (m != M_SSE && c.parts < EVENTS) {
      fprintf(stderr, "too few parts\n");
      exit(1);
    }
    ns[r] = (double)(t1 - t0) / EVENTS;
    air__sse_cleanup(&p);
    air__decoder_cleanup(&c.d);
    air__buf_cleanup(&c.out);
  }
  qsort(ns, ROUNDS, sizeof(ns[0]), cmp_d);
  return ns[ROUNDS / 2];
}

int main(void) {
  size_t one = sizeof(CHUNK) - 1;
  size_t n = one * PER_BUF;
  char *stream = malloc(n);
  if (stream == NULL) return 1;
  for (size_t i = 0; i < PER_BUF; i++) memcpy(stream + i * one, CHUNK, one);
  printf("event: %zu bytes, %d events x %d rounds, median\n", one, EVENTS,
         ROUNDS);
  printf("openai sse            %8.1f ns/event\n", measure(M_SSE, stream, n));
  printf("openai sse+decode     %8.1f ns/event\n",
         measure(M_DECODE, stream, n));
  printf("openai sse+decode+enc %8.1f ns/event\n",
         measure(M_ENCODE, stream, n));
  free(stream);
  return 0;
}
