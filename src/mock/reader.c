/*
 * A streamed answer as a client of the gateway reads it (mock.h): the SSE
 * parser and the dialect's own decoder, for `airetry demo`, which shows
 * what a caller receives without reaching into the codec layer itself.
 */
#include <stdlib.h>

#include "mock.h"
#include "dialect.h"
#include "sse.h"

struct air__stream_reader {
  air__sse sse;
  air__decoder dec;
  const air__dialect_ops *ops;
  int (*on_part)(void *data, const air_part *p);
  void *data;
};

static int on_event(void *data, const air__sse_event *ev) {
  air__stream_reader *r = data;
  return r->ops->decode_event(&r->dec, ev, r->on_part, r->data);
}

air__stream_reader *air__stream_reader_new(
    bool anthropic, int (*on_part)(void *data, const air_part *p), void *data) {
  air__stream_reader *r = calloc(1, sizeof(*r));
  if (r == NULL) return NULL;
  r->ops = anthropic ? &air__dialect_anthropic : &air__dialect_openai_chat;
  r->on_part = on_part;
  r->data = data;
  r->ops->decoder_init(&r->dec);
  air__sse_init(&r->sse, on_event, r);
  return r;
}

int air__stream_reader_feed(air__stream_reader *r, const char *p, size_t n) {
  int rc = air__sse_feed(&r->sse, p, n);
  return rc < 0 ? rc : 0;
}

void air__stream_reader_free(air__stream_reader *r) {
  if (r == NULL) return;
  air__sse_finish(&r->sse);
  air__sse_cleanup(&r->sse);
  air__decoder_cleanup(&r->dec);
  free(r);
}
