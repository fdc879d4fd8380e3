/*
 * libFuzzer target for the event-stream parser (src/stream/sse.c).
 *
 * Input layout: a 6-byte header, then the stream.
 *   h[0] bit 0   use the small limits below instead of the named maxima
 *   h[0] >> 1    stop (callback returns non-zero) at this event; 0: never
 *   h[1] h[2]    small max_line, max_data (1..256)
 *   h[3]         small max_raw (1..1021, step 4)
 *   h[4] h[5]    seed of the piece sizes; h[5] & 7 also picks the largest
 *                piece (1, 2, 3, 5, 8, 16, 64 or 512 bytes)
 *
 * The stream is parsed three ways: fed at once, fed in pseudo-random
 * pieces, fed one byte at a time. All three must give the same events and
 * the same result. Every event must respect the limits, be found verbatim
 * (raw) in the input after the previous one, and re-parse from its raw
 * bytes alone into the same event. Finally the first parser is reset and
 * must parse the stream again identically.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "airetry.h"
#include "sse.h"

#define CHECK(cond)       \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

typedef struct ev {
  char *type, *data, *id, *raw;
  size_t type_n, data_n, id_n, raw_n;
  int64_t retry;
} ev;

typedef struct run {
  ev *evs;
  size_t n, cap;
  size_t stop_at;
  size_t max_line, max_data, max_raw;
  const uint8_t *in; /* the whole stream, for the raw position check */
  size_t in_n;
  size_t in_at; /* where the previous event's raw ended in the stream */
  bool top;     /* false for the nested re-parse of one raw */
} run;

static char *dup(const char *p, size_t n) {
  char *d = malloc(n ? n : 1);
  CHECK(d);
  if (n) memcpy(d, p, n);
  return d;
}

static int on_event(void *data, const air__sse_event *e);

static void limits(air__sse *p, const run *r) {
  air__sse_set_limits(p, r->max_line, r->max_data, r->max_raw);
}

static bool same(const char *a, size_t an, const char *b, size_t bn) {
  return an == bn && (an == 0 || memcmp(a, b, an) == 0);
}

/* The raw of an event, parsed alone, gives the same event back. */
static void reparse(const run *outer, const air__sse_event *e) {
  if (e->raw.n >= 3 && memcmp(e->raw.p, "\xEF\xBB\xBF", 3) == 0) return;
  run r = {0};
  r.max_line = outer->max_line;
  r.max_data = outer->max_data;
  r.max_raw = outer->max_raw;
  air__sse p;
  air__sse_init(&p, on_event, &r);
  limits(&p, &r);
  CHECK(air__sse_feed(&p, e->raw.p, e->raw.n) == 0);
  CHECK(air__sse_finish(&p) == 0);
  CHECK(r.n == 1);
  CHECK(same(r.evs[0].type, r.evs[0].type_n, e->type.p, e->type.n));
  CHECK(same(r.evs[0].data, r.evs[0].data_n, e->data.p, e->data.n));
  CHECK(same(r.evs[0].raw, r.evs[0].raw_n, e->raw.p, e->raw.n));
  CHECK(r.evs[0].retry == e->retry);
  air__sse_cleanup(&p);
  for (size_t i = 0; i < r.n; i++) {
    free(r.evs[i].type);
    free(r.evs[i].data);
    free(r.evs[i].id);
    free(r.evs[i].raw);
  }
  free(r.evs);
}

static int on_event(void *data, const air__sse_event *e) {
  run *r = data;
  CHECK(e->type.p && e->data.p && e->id.p && e->raw.p);
  CHECK(e->type.n >= 1);
  CHECK(e->data.n <= r->max_data);
  CHECK(e->raw.n <= r->max_raw);
  CHECK(e->id.n <= r->max_line && !memchr(e->id.p, '\0', e->id.n));
  CHECK(e->retry >= -1);
  CHECK(e->raw.n >= 6 && e->data.n < e->raw.n);
  char last = e->raw.p[e->raw.n - 1];
  CHECK(last == '\n' || last == '\r');

  if (r->top) {
    /* raw is a slice of the stream, after the previous event. */
    size_t at = r->in_at;
    while (at + e->raw.n <= r->in_n &&
           memcmp(r->in + at, e->raw.p, e->raw.n) != 0)
      at++;
    CHECK(at + e->raw.n <= r->in_n);
    r->in_at = at + e->raw.n;
    reparse(r, e);
  }

  if (r->n == r->cap) {
    r->cap = r->cap ? r->cap * 2 : 16;
    r->evs = realloc(r->evs, r->cap * sizeof(*r->evs));
    CHECK(r->evs);
  }
  ev *v = &r->evs[r->n++];
  v->type = dup(e->type.p, v->type_n = e->type.n);
  v->data = dup(e->data.p, v->data_n = e->data.n);
  v->id = dup(e->id.p, v->id_n = e->id.n);
  v->raw = dup(e->raw.p, v->raw_n = e->raw.n);
  v->retry = e->retry;
  return r->stop_at && r->n == r->stop_at ? 99 : 0;
}

static void run_free(run *r) {
  for (size_t i = 0; i < r->n; i++) {
    free(r->evs[i].type);
    free(r->evs[i].data);
    free(r->evs[i].id);
    free(r->evs[i].raw);
  }
  free(r->evs);
  r->evs = NULL;
  r->n = r->cap = 0;
}

static uint32_t next_rand(uint32_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

/*
 * Feeds the stream with p: piece == 0 at once, otherwise pieces of
 * 1..piece bytes drawn from seed. Returns the first non-zero result.
 */
static int parse(air__sse *p, const uint8_t *in, size_t n, size_t piece,
                 uint32_t seed) {
  int rc = 0;
  size_t at = 0;
  if (piece == 0) {
    rc = air__sse_feed(p, (const char *)in, n);
  } else {
    while (at < n && !rc) {
      size_t k = 1 + next_rand(&seed) % piece;
      if (k > n - at) k = n - at;
      rc = air__sse_feed(p, (const char *)in + at, k);
      at += k;
    }
  }
  if (!rc) {
    rc = air__sse_finish(p);
    if (!rc) CHECK(air__sse_pending(p) == 0);
  }
  if (rc) CHECK(rc == 99 || rc == AIR_ETOOBIG);
  CHECK(air__sse_feed(p, "data\n\n", 6) == (rc ? rc : AIR_ESTATE));
  return rc;
}

static void same_runs(const run *a, int rca, const run *b, int rcb) {
  CHECK(rca == rcb);
  CHECK(a->n == b->n);
  for (size_t i = 0; i < a->n; i++) {
    const ev *x = &a->evs[i], *y = &b->evs[i];
    CHECK(same(x->type, x->type_n, y->type, y->type_n));
    CHECK(same(x->data, x->data_n, y->data, y->data_n));
    CHECK(same(x->id, x->id_n, y->id, y->id_n));
    CHECK(same(x->raw, x->raw_n, y->raw, y->raw_n));
    CHECK(x->retry == y->retry);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const size_t pieces[8] = {1, 2, 3, 5, 8, 16, 64, 512};
  if (size < 6) return 0;
  const uint8_t *h = data;
  const uint8_t *in = data + 6;
  size_t n = size - 6;

  run proto = {0};
  proto.stop_at = h[0] >> 1;
  proto.in = in;
  proto.in_n = n;
  proto.top = true;
  if (h[0] & 1) {
    proto.max_line = 1 + (size_t)h[1];
    proto.max_data = 1 + (size_t)h[2];
    proto.max_raw = 1 + 4 * (size_t)h[3];
  } else {
    air__sse tmp;
    air__sse_init(&tmp, on_event, NULL);
    proto.max_line = tmp.max_line;
    proto.max_data = tmp.max_data;
    proto.max_raw = tmp.max_raw;
    air__sse_cleanup(&tmp);
  }
  uint32_t seed = ((uint32_t)h[4] << 8 | h[5]) * 2654435761u | 1u;
  size_t piece = pieces[h[5] & 7];

  run a = proto, b = proto, c = proto;
  air__sse pa, pb, pc;
  air__sse_init(&pa, on_event, &a);
  air__sse_init(&pb, on_event, &b);
  air__sse_init(&pc, on_event, &c);
  limits(&pa, &a);
  limits(&pb, &b);
  limits(&pc, &c);

  int rca = parse(&pa, in, n, 0, 0);
  int rcb = parse(&pb, in, n, piece, seed);
  same_runs(&a, rca, &b, rcb);
  if (n <= 4096) {
    int rcc = parse(&pc, in, n, 1, 1);
    same_runs(&a, rca, &c, rcc);
  }
  CHECK(pa.n_events == a.n && pa.n_bytes <= n);

  /* Reset and reuse: the same stream parses the same again. */
  run first = a;
  a = proto;
  air__sse_reset(&pa);
  int rcd = parse(&pa, in, n, piece, seed ^ 0x5bd1e995u);
  same_runs(&first, rca, &a, rcd);
  run_free(&first);

  air__sse_cleanup(&pa);
  air__sse_cleanup(&pb);
  air__sse_cleanup(&pc);
  run_free(&a);
  run_free(&b);
  run_free(&c);
  return 0;
}
