/*
 * The differential harness of the decoders' fast paths (docs/decisions.md,
 * "A fast path for the common text-delta event"): one event through a dialect's
 * decode_event with its fast path (decoder A) and through its full decoder
 * alone (decoder B), both started from the same state; the parts handed over,
 * the return value and the decoder state must be the same. A part's strings are
 * compared by content and by where they point: into the event's data (at which
 * offset), into the decoder's scratch buffers (at which offset), NULL, or
 * elsewhere (a literal such as ""). Shared by
 * tests/unit/codec/test_fastpath_*.c and fuzz/fuzz_fastpath_*.c; header-only,
 * no test framework.
 */
#ifndef AIR__FASTPATH_DIFF_H
#define AIR__FASTPATH_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "dialect.h"
#include "sse.h"

typedef void (*fp_init_fn)(air__decoder *d);
typedef int (*fp_full_fn)(air__decoder *d, const air__sse_event *ev,
                          air__part_cb cb, void *data);
typedef int (*fp_fast_fn)(air__decoder *d, const air__sse_event *ev,
                          air__part_cb cb, void *data, bool *took);

/* What a part callback returns to stop decoding (FP_STOP). */
#define FP_STOP 7

typedef struct fp_side {
  air__decoder d;
  air__buf trace;           /* a digest of every part of the event */
  const air__sse_event *ev; /* the event being decoded */
  size_t n_parts;           /* parts of the event so far */
  size_t stop_at;           /* return FP_STOP at this part (1-based) */
} fp_side;

typedef struct fp_pair {
  fp_side fast, full;
  fp_full_fn full_fn;
  fp_fast_fn fast_fn;
  char why[160]; /* the first difference found */
} fp_pair;

/* Where a part's string points, and what it holds. */
static inline void fp_str(fp_side *s, const char *p, size_t n) {
  const air__sse_event *ev = s->ev;
  if (p == NULL) {
    air__buf_put(&s->trace, "N", 1);
  } else if (p >= ev->data.p && p <= ev->data.p + ev->data.n) {
    air__buf_put(&s->trace, "E", 1);
    air__buf_putu(&s->trace, (unsigned long long)(p - ev->data.p));
  } else if (s->d.scratch.p != NULL && p >= s->d.scratch.p &&
             p <= s->d.scratch.p + s->d.scratch.cap) {
    air__buf_put(&s->trace, "S", 1);
    air__buf_putu(&s->trace, (unsigned long long)(p - s->d.scratch.p));
  } else if (s->d.scratch2.p != NULL && p >= s->d.scratch2.p &&
             p <= s->d.scratch2.p + s->d.scratch2.cap) {
    air__buf_put(&s->trace, "T", 1);
    air__buf_putu(&s->trace, (unsigned long long)(p - s->d.scratch2.p));
  } else {
    air__buf_put(&s->trace, "O", 1);
  }
  air__buf_putc(&s->trace, ':');
  air__buf_putu(&s->trace, n);
  air__buf_putc(&s->trace, ':');
  if (p != NULL && n > 0) air__buf_put(&s->trace, p, n);
  air__buf_putc(&s->trace, ';');
}

static inline int fp_on_part(void *data, const air_part *p) {
  fp_side *s = data;
  air__buf_putu(&s->trace, (unsigned)p->kind);
  air__buf_putc(&s->trace, '/');
  air__buf_putu(&s->trace, (unsigned long long)(long long)p->index);
  air__buf_putc(&s->trace, '/');
  air__buf_putu(&s->trace, (unsigned)p->finish);
  air__buf_putc(&s->trace, '/');
  air__buf_putu(&s->trace, p->input_tokens);
  air__buf_putc(&s->trace, '/');
  air__buf_putu(&s->trace, p->output_tokens);
  air__buf_putc(&s->trace, '/');
  fp_str(s, p->text, p->text_len);
  fp_str(s, p->id, p->id_len);
  fp_str(s, p->name, p->name_len);
  fp_str(s, p->finish_raw, p->finish_raw_len);
  air__buf_putc(&s->trace, '\n');
  return ++s->n_parts == s->stop_at ? FP_STOP : 0;
}

static inline void fp_init(fp_pair *x, fp_init_fn init, fp_full_fn full,
                           fp_fast_fn fast) {
  memset(x, 0, sizeof(*x));
  init(&x->fast.d);
  init(&x->full.d);
  air__buf_init(&x->fast.trace, 1u << 26);
  air__buf_init(&x->full.trace, 1u << 26);
  x->full_fn = full;
  x->fast_fn = fast;
}

static inline void fp_cleanup(fp_pair *x) {
  air__decoder_cleanup(&x->fast.d);
  air__decoder_cleanup(&x->full.d);
  air__buf_cleanup(&x->fast.trace);
  air__buf_cleanup(&x->full.trace);
}

/* The decoder state the callers read (exchange.c, commit.c, the
 * responder): equal on both sides, or the first difference in why. */
static inline bool fp_same_state(fp_pair *x) {
  const air__decoder *a = &x->fast.d, *b = &x->full.d;
#define FP_FIELD(f)                                                          \
  if (a->f != b->f) {                                                        \
    snprintf(x->why, sizeof(x->why), "decoder." #f ": fast %llu, full %llu", \
             (unsigned long long)a->f, (unsigned long long)b->f);            \
    return false;                                                            \
  }
  FP_FIELD(malformed)
  FP_FIELD(started)
  FP_FIELD(done)
  FP_FIELD(finished)
  FP_FIELD(usage_only)
  FP_FIELD(terminator)
  FP_FIELD(error_event)
  FP_FIELD(json_tool)
  FP_FIELD(json_seen)
  FP_FIELD(input_tokens)
  FP_FIELD(output_tokens)
  FP_FIELD(n_tools)
#undef FP_FIELD
  if (memcmp(a->block_kind, b->block_kind, sizeof(a->block_kind)) != 0 ||
      memcmp(a->block_tool, b->block_tool, sizeof(a->block_tool)) != 0) {
    snprintf(x->why, sizeof(x->why), "decoder.block_kind/block_tool differ");
    return false;
  }
  return true;
}

/*
 * One event through both decoders; the part callbacks return FP_STOP at
 * part stop_at (0: never). True when both gave the same; else false with
 * the difference in x->why. *took: the fast path decoded the event.
 */
static inline bool fp_feed(fp_pair *x, const air__sse_event *ev, size_t stop_at,
                           bool *took) {
  fp_side *sides[2] = {&x->fast, &x->full};
  for (int i = 0; i < 2; i++) {
    air__buf_reset(&sides[i]->trace);
    sides[i]->ev = ev;
    sides[i]->n_parts = 0;
    sides[i]->stop_at = stop_at;
  }
  int ra = x->fast_fn(&x->fast.d, ev, fp_on_part, &x->fast, took);
  int rb = x->full_fn(&x->full.d, ev, fp_on_part, &x->full);
  x->why[0] = '\0';
  if (ra != rb) {
    snprintf(x->why, sizeof(x->why), "returned: fast %d, full %d", ra, rb);
    return false;
  }
  const air__buf *ta = &x->fast.trace, *tb = &x->full.trace;
  if (ta->n != tb->n || (ta->n > 0 && memcmp(ta->p, tb->p, ta->n) != 0)) {
    snprintf(x->why, sizeof(x->why), "parts: fast [%.60s] full [%.60s]",
             ta->n ? ta->p : "", tb->n ? tb->p : "");
    return false;
  }
  return fp_same_state(x);
}

/* fp_feed for an event of SSE type type (NULL: "message") and data of n
 * bytes. */
static inline bool fp_event(fp_pair *x, const char *type, const char *data,
                            size_t n, size_t stop_at, bool *took) {
  air__sse_event ev;
  memset(&ev, 0, sizeof(ev));
  ev.type.p = type != NULL ? type : "message";
  ev.type.n = strlen(ev.type.p);
  ev.data.p = data;
  ev.data.n = n;
  ev.id.p = "";
  ev.retry = -1;
  ev.raw.p = data;
  ev.raw.n = n;
  return fp_feed(x, &ev, stop_at, took);
}

/* The fuzz targets: data as an SSE stream, each event through fp_feed; the
 * first byte picks the part at which the callbacks stop (0: never). Aborts
 * on the first difference. */
typedef struct fp_fuzz {
  fp_pair x;
  size_t stop_at;
} fp_fuzz;

static inline int fp_fuzz_event(void *data, const air__sse_event *ev) {
  fp_fuzz *f = data;
  bool took;
  if (!fp_feed(&f->x, ev, f->stop_at, &took)) {
    fprintf(stderr, "fast path differs: %s\n  event: %.*s\n", f->x.why,
            (int)(ev->data.n > 400 ? 400 : ev->data.n), ev->data.p);
    abort();
  }
  return 0;
}

static inline void fp_fuzz_run(const uint8_t *in, size_t n, fp_init_fn init,
                               fp_full_fn full, fp_fast_fn fast) {
  fp_fuzz f;
  fp_init(&f.x, init, full, fast);
  f.stop_at = n > 0 ? in[0] % 4 : 0;
  air__sse p;
  air__sse_init(&p, fp_fuzz_event, &f);
  if (air__sse_feed(&p, (const char *)in, n) == 0) air__sse_finish(&p);
  air__sse_cleanup(&p);
  fp_cleanup(&f.x);
}

#endif
