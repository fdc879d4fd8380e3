/*
 * The per-chunk cost of the streaming hot path, as the exchange runs it:
 * SSE parse + decode_event + commit gate (committed, so events flow through),
 * for a typical OpenAI chunk (~150 bytes) and an Anthropic text delta event:
 *   passthrough  same dialect: the raw event is what reaches the caller
 *   translate    cross dialect: + encode_part into the other dialect
 *   + observe    passthrough while a continuation is possible (docs/design.md
 *                §3.5): + the caller dialect's encoder_observe per event
 * Median ns per event over ROUNDS rounds of EVENTS events, fed in 16 KiB
 * reads like a socket. Build optimised, without sanitizers (make bench).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commit.h"
#include "dialect.h"
#include "sse.h"

#define EVENTS 200000
#define ROUNDS 9
#define READ 16384

static const char OPENAI_CHUNK[] =
    "data: {\"id\":\"chatcmpl-AbC123\",\"object\":\"chat.completion.chunk\","
    "\"created\":1718000000,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,"
    "\"delta\":{\"content\":\" world\"},\"finish_reason\":null}]}\n\n";

static const char RESPONSES_DELTA[] =
    "event: response.output_text.delta\n"
    "data: {\"type\":\"response.output_text.delta\",\"sequence_number\":"
    "12,\"item_id\":\"msg_abc\",\"output_index\":0,\"content_index\":0,"
    "\"delta\":\" world\",\"logprobs\":[]}\n\n";

/* What a Responses stream says before its deltas (observed once). */
static const char RESPONSES_HEAD[] =
    "event: response.created\n"
    "data: {\"type\":\"response.created\",\"sequence_number\":0,"
    "\"response\":{\"id\":\"resp_abc\",\"created_at\":1718000000,"
    "\"model\":\"gpt-4o\",\"output\":[]}}\n\n"
    "event: response.output_item.added\n"
    "data: {\"type\":\"response.output_item.added\",\"sequence_number\":1,"
    "\"output_index\":0,\"item\":{\"id\":\"msg_abc\",\"type\":\"message\","
    "\"role\":\"assistant\",\"content\":[]}}\n\n"
    "event: response.content_part.added\n"
    "data: {\"type\":\"response.content_part.added\",\"sequence_number\":2,"
    "\"item_id\":\"msg_abc\",\"output_index\":0,\"content_index\":0,"
    "\"part\":{\"type\":\"output_text\",\"text\":\"\"}}\n\n";

static const char ANTHROPIC_DELTA[] =
    "event: content_block_delta\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
    "{\"type\":\"text_delta\",\"text\":\" world\"}}\n\n";

typedef struct ctx {
  const air__dialect_ops *up;   /* upstream dialect */
  const air__dialect_ops *down; /* caller dialect, NULL: passthrough */
  bool observe;                 /* passthrough + encoder_observe */
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
  if (c->observe) c->up->encoder_observe(&c->enc, ev, c->parts, c->n_parts);
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

static double run_x(const char *name, const air__dialect_ops *up,
                    const air__dialect_ops *down, bool observe,
                    const char *head, const char *event) {
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
    c.observe = observe;
    if (down) down->encoder_init(&c.enc, &req, 1718000000);
    if (observe) {
      up->encoder_init(&c.enc, &req, 1718000000);
      c.enc.passthrough = true;
    }
    air__buf_init(&c.out, 1u << 20);
    air__gate_cfg gc = {.commit = AIR__COMMIT_FIRST_CONTENT,
                        .max_malformed = 3,
                        .first_chunk_ms = 30000,
                        .chunk_ms = 30000};
    air__gate_init(&c.gate, &gc, emit, &c);
    air__gate_begin(&c.gate, 0);
    air__sse sse;
    air__sse_init(&sse, on_event, &c);
    if (head != NULL) air__sse_feed(&sse, head, strlen(head));
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
    if (down || observe) air__encoder_cleanup(&c.enc);
    air__buf_cleanup(&c.out);
  }
  free(stream);
  qsort(med, ROUNDS, sizeof(med[0]), cmp);
  printf("%-44s median %7.1f ns/event  (%zu-byte event)\n", name,
         med[ROUNDS / 2], ev_len);
  return med[ROUNDS / 2];
}

/* encoder_observe alone on one decoded event, repeated (after head). */
typedef struct one {
  const air__dialect_ops *up;
  air__decoder dec;
  air__encoder enc;
  air_part parts[16];
  size_t n_parts;
  air__sse_event ev;
  char raw[512];
  bool take; /* keep the next event */
} one;

static int one_collect(void *data, const air_part *p) {
  one *o = data;
  if (o->n_parts < 16) o->parts[o->n_parts++] = *p;
  return 0;
}

static int one_event(void *data, const air__sse_event *ev) {
  one *o = data;
  o->n_parts = 0;
  o->up->decode_event(&o->dec, ev, one_collect, o);
  o->up->encoder_observe(&o->enc, ev, o->parts, o->n_parts);
  if (o->take && ev->raw.n < sizeof(o->raw)) {
    /* keep the event (its spans re-pointed into raw) */
    memcpy(o->raw, ev->raw.p, ev->raw.n);
    o->ev = *ev;
    o->ev.type.p = o->raw + (ev->type.p - ev->raw.p);
    o->ev.data.p = o->raw + (ev->data.p - ev->raw.p);
  }
  return 0;
}

static void observe_only(const char *name, const air__dialect_ops *up,
                         const char *head, const char *event) {
  double med[ROUNDS];
  air__request req;
  memset(&req, 0, sizeof(req));
  req.dialect = up->api;
  req.stream = true;
  for (int r = 0; r < ROUNDS; r++) {
    one o;
    memset(&o, 0, sizeof(o));
    o.up = up;
    up->decoder_init(&o.dec);
    up->encoder_init(&o.enc, &req, 1718000000);
    o.enc.passthrough = true;
    air__sse sse;
    air__sse_init(&sse, one_event, &o);
    if (head != NULL) air__sse_feed(&sse, head, strlen(head));
    o.take = true;
    air__sse_feed(&sse, event, strlen(event));
    /* The decoded parts point into the decoder or the event: re-decode
     * from the kept copy so they point into o.raw. */
    o.take = false;
    o.n_parts = 0;
    up->decode_event(&o.dec, &o.ev, one_collect, &o);
    uint64_t t0 = ns_now();
    for (size_t i = 0; i < EVENTS; i++)
      up->encoder_observe(&o.enc, &o.ev, o.parts, o.n_parts);
    med[r] = (double)(ns_now() - t0) / (double)EVENTS;
    air__sse_cleanup(&sse);
    air__decoder_cleanup(&o.dec);
    air__encoder_cleanup(&o.enc);
  }
  qsort(med, ROUNDS, sizeof(med[0]), cmp);
  printf("%-44s median %7.1f ns/event\n", name, med[ROUNDS / 2]);
}

static double run(const char *name, const air__dialect_ops *up,
                  const air__dialect_ops *down, const char *event) {
  return run_x(name, up, down, false, NULL, event);
}

int main(void) {
  run("openai chunk, passthrough (parse+decode+gate)",
      &air__dialect_openai_chat, NULL, OPENAI_CHUNK);
  run("openai chunk -> anthropic caller (translate)", &air__dialect_openai_chat,
      &air__dialect_anthropic, OPENAI_CHUNK);
  run("anthropic delta, passthrough", &air__dialect_anthropic, NULL,
      ANTHROPIC_DELTA);
  run("anthropic delta -> openai caller (translate)", &air__dialect_anthropic,
      &air__dialect_openai_chat, ANTHROPIC_DELTA);
  run_x("openai chunk, passthrough + observe", &air__dialect_openai_chat, NULL,
        true, NULL, OPENAI_CHUNK);
  run_x("anthropic delta, passthrough + observe", &air__dialect_anthropic, NULL,
        true, NULL, ANTHROPIC_DELTA);
  run_x("responses delta, passthrough", &air__dialect_openai_responses, NULL,
        false, RESPONSES_HEAD, RESPONSES_DELTA);
  run_x("responses delta, passthrough + observe",
        &air__dialect_openai_responses, NULL, true, RESPONSES_HEAD,
        RESPONSES_DELTA);
  observe_only("openai chunk, observe alone", &air__dialect_openai_chat,
               OPENAI_CHUNK, OPENAI_CHUNK);
  observe_only("anthropic delta, observe alone", &air__dialect_anthropic, NULL,
               ANTHROPIC_DELTA);
  observe_only("responses delta, observe alone", &air__dialect_openai_responses,
               RESPONSES_HEAD, RESPONSES_DELTA);
  return 0;
}
