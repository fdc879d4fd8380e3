/*
 * Micro-benchmark of the event-stream parser on its hot path: one typical
 * OpenAI chat-completions chunk event (~150 bytes) per feed, as a gateway
 * sees it when every read holds one event. Also measured: the same event
 * split across two feeds (the copying path) and 16 events per feed.
 *
 * Prints the median ns per event over ROUNDS rounds of EVENTS events.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sse.h"

#define EVENTS 1000000
#define ROUNDS 7
#define BATCH 16

static const char chunk[] =
    "data: {\"id\":\"chatcmpl-9xQ2\",\"object\":\"chat.completion.chunk\","
    "\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,"
    "\"delta\":{\"content\":\"Hello\"},\"finish_reason\":null}]}\n\n";

typedef struct sink {
  uint64_t bytes;
} sink;

static int on_event(void *data, const air__sse_event *ev) {
  sink *s = data;
  s->bytes += ev->data.n + (unsigned char)ev->data.p[0];
  return 0;
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

/* One round: EVENTS events fed as `mode` says; returns ns per event. */
static double round_ns(int mode, const char *batch, size_t batch_n) {
  sink s = {0};
  air__sse p;
  air__sse_init(&p, on_event, &s);
  size_t n = sizeof(chunk) - 1, half = n / 2;
  double t0 = now_ns();
  if (mode == 0) {
    for (int i = 0; i < EVENTS; i++) air__sse_feed(&p, chunk, n);
  } else if (mode == 1) {
    for (int i = 0; i < EVENTS; i++) {
      air__sse_feed(&p, chunk, half);
      air__sse_feed(&p, chunk + half, n - half);
    }
  } else {
    for (int i = 0; i < EVENTS / BATCH; i++) air__sse_feed(&p, batch, batch_n);
  }
  double t1 = now_ns();
  if (p.n_events != (uint64_t)EVENTS || s.bytes == 0) {
    fprintf(stderr, "bench_sse: parsed %llu events, want %d\n",
            (unsigned long long)p.n_events, EVENTS);
    exit(1);
  }
  air__sse_cleanup(&p);
  return (t1 - t0) / EVENTS;
}

int main(void) {
  static const char *names[3] = {
      "one event per feed", "event split in two feeds", "16 events per feed"};
  size_t n = sizeof(chunk) - 1;
  char *batch = malloc(n * BATCH);
  if (!batch) return 1;
  for (int i = 0; i < BATCH; i++) memcpy(batch + (size_t)i * n, chunk, n);

  printf("event: %zu bytes, %d events per round, median of %d rounds\n", n,
         EVENTS, ROUNDS);
  for (int mode = 0; mode < 3; mode++) {
    double t[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) t[r] = round_ns(mode, batch, n * BATCH);
    qsort(t, ROUNDS, sizeof(t[0]), cmp_double);
    printf("%-26s %7.1f ns/event  (min %.1f, max %.1f)\n", names[mode],
           t[ROUNDS / 2], t[0], t[ROUNDS - 1]);
  }
  free(batch);
  return 0;
}
