/*
 * The per-chunk cost of the streaming hot path, as the exchange runs it:
 * SSE parse + decode_event + commit gate (committed, so events flow through),
 * for a typical OpenAI chunk (~150 bytes) and an Anthropic text delta event:
 *   passthrough  same dialect: the raw event is what reaches the caller
 *   translate    cross dialect: + encode_part into the other dialect
 * Median ns per event over ROUNDS rounds of EVENTS events, fed in 16 KiB
 * reads like a socket. Build optimised, without sanitizers (make bench).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commit.h"
#include "provider.h"
#include "sse.h"

#define EVENTS 200000
#define ROUNDS 9
#define READ 16384

static const char OPENAI_CHUNK[] =
    "data: {\"id\":\"chatcmpl-AbC123\",\"object\":\"chat.completion.chunk\","
    "\"created\":1718000000,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,"
    "\"delta\":{\"content\":\" world\"},\"finish_reason\":null}]}\n\n";

static const char ANTHROPIC_DELTA[] =
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
    "{\"type\":\"text_delta\",\"text\":\" world\"}}\n\n";

typedef struct ctx {
  const air__provider_ops *up;    /* upstream dialect */
  const air__provider_ops *down;  /* caller dialect, NULL: passthrough */
  air__decoder dec;
  air__encoder enc;
  air__gate gate;
  air__buf out;
  air_part parts[16];
  size_t n_parts;
  uint64_t bytes;
} ctx;

static int collect(void *data, const air_part *p) {
  ctx *c = data;
  if (c->n_parts < 16) c->parts[c->n_parts++] = *p;
  return 0;
}

static int emit(void *data, const air__gate_event *ev) {
  ctx *c = data;
  if (c->down == NULL) {
    c->bytes += ev->raw_len; /* forwarded as is */
    return 0;
  }
  for (size_t i = 0; i < ev->n_parts; i++)
    c->down->encode_part(&c->enc, &ev->parts[i], &c->out);
  c->bytes += c->out.n;
  air__buf_reset(&c->out);
  return 0;
}

static int on_event(void *data, const air__sse_event *ev) {
  ctx *c = data;
  c->n_parts = 0;
  c->up->decode_event(&c->dec, ev, collect, c);
  air__gate_event gev = {ev->raw.p, ev->raw.n, c->parts, c->n_parts, 0};
  return air__gate_feed(&c->gate, &gev, 1) < 0;
}

static uint64_t ns_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double run(const char *name, const air__provider_ops *up,
                  const air__provider_ops *down, const char *event) {
  size_t ev_len = strlen(event);
  size_t per = READ / ev_len;
  char *stream = malloc(per * ev_len);
  for (size_t i = 0; i < per; i++) memcpy(stream + i * ev_len, event, ev_len);
  double med[ROUNDS];
  air__request req;
  memset(&req, 0, sizeof(req));
  req.dialect = down ? down->api : up->api;
  req.stream = true;
  for (int r = 0; r < ROUNDS; r++) {
    ctx c;
    memset(&c, 0, sizeof(c));
    c.up = up;
    c.down = down;
    up->decoder_init(&c.dec);
    if (down) down->encoder_init(&c.enc, &req, 1718000000);
    air__buf_init(&c.out, 1u << 20);
    air__gate_cfg gc = {.commit = AIR__COMMIT_FIRST_CONTENT, .max_malformed = 3,
                        .first_chunk_ms = 30000, .chunk_ms = 30000};
    air__gate_init(&c.gate, &gc, emit, &c);
    air__gate_begin(&c.gate, 0);
    air__sse sse;
    air__sse_init(&sse, on_event, &c);
    size_t done = 0;
    uint64_t t0 = ns_now();
    while (done < EVENTS) {
      air__sse_feed(&sse, stream, per * ev_len);
      done += per;
    }
    med[r] = (double)(ns_now() - t0) / (double)done;
    if (c.bytes == 0 || c.gate.state != AIR__GATE_COMMITTED) {
      fprintf(stderr, "bench_stream: %s produced nothing\n", name);
      exit(1);
    }
    air__sse_cleanup(&sse);
    air__gate_cleanup(&c.gate);
    air__decoder_cleanup(&c.dec);
    air__buf_cleanup(&c.out);
  }
  free(stream);
  qsort(med, ROUNDS, sizeof(med[0]), cmp);
  printf("%-44s median %7.1f ns/event  (%zu-byte event)\n", name, med[ROUNDS / 2],
         ev_len);
  return med[ROUNDS / 2];
}

int main(void) {
  run("openai chunk, passthrough (parse+decode+gate)", &air__provider_openai,
      NULL, OPENAI_CHUNK);
  run("openai chunk -> anthropic caller (translate)", &air__provider_openai,
      &air__provider_anthropic, OPENAI_CHUNK);
  run("anthropic delta, passthrough", &air__provider_anthropic, NULL,
      ANTHROPIC_DELTA);
  run("anthropic delta -> openai caller (translate)", &air__provider_anthropic,
      &air__provider_openai, ANTHROPIC_DELTA);
  return 0;
}
