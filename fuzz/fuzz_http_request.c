/*
 * libFuzzer target for the HTTP/1.1 request reader (src/http/reader.c), fed
 * as a connection would feed it, without sockets.
 *
 * Input layout: a 4-byte header, then the bytes a client sends.
 *   h[0] bit 0   use the small limits below instead of the defaults
 *   h[1]         small max_header_bytes: 16 + 4 * h[1]
 *   h[2]         small max_headers: 1 + (h[2] & 31); max_body: 8 * (h[2] >> 5)
 *                + h[3]
 *   h[3]         seed of the piece sizes; h[3] & 7 picks the largest piece
 *
 * The bytes are read three ways: fed at once, fed in pseudo-random pieces,
 * fed one byte at a time (short inputs). Like a connection, each way keeps
 * the bytes a feed did not use, calls next() after every complete request
 * that keeps the connection, and stops at a failure or at the first request
 * that closes it. All three must see the same requests and end the same
 * way (a failure with the same status, except that an oversized head may be
 * noticed, as 431, before a malformed byte inside it). Every request must
 * respect the limits, and every string in it must point into the reader's own
 * buffers or static storage.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "airetry.h"
#include "reader.h"
#include "server.h"

#define CHECK(cond)       \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

#define MAX_SEEN 64

typedef struct limits {
  size_t max_header_bytes, max_headers, max_body;
} limits;

typedef struct outcome {
  uint64_t hashes[MAX_SEEN]; /* one per complete request */
  size_t n;
  int end;    /* 0: input used up, 1: closed after a request, 2: failed */
  int status; /* when failed */
  bool fail_in_head;
} outcome;

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 1099511628211ull;
  }
  return h;
}

static bool inside(const air__buf *b, air__str s) {
  if (s.n == 0) return true;
  return b->p != NULL && s.p >= b->p && s.p + s.n <= b->p + b->n;
}

static void check_head(const air__http_reader *r, const limits *lim,
                       bool done) {
  const air__http_request *m = air__http_reader_msg(r);
  CHECK(m->method.p != NULL && m->method.n > 0);
  CHECK(inside(&r->head, m->target));
  CHECK(m->path.n == 0 || (m->path.n == 1 && m->path.p[0] == '/') ||
        (m->path.p >= m->target.p &&
         m->path.p + m->path.n <= m->target.p + m->target.n));
  CHECK(m->query.n == 0 ||
        (m->query.p > m->target.p &&
         m->query.p + m->query.n == m->target.p + m->target.n &&
         m->query.p[-1] == '?'));
  CHECK(m->n_headers <= lim->max_headers);
  CHECK(r->head.n <= lim->max_header_bytes);
  for (size_t i = 0; i < m->n_headers; i++) {
    const air__http_header *h = &m->headers[i];
    CHECK(h->name.n > 0 && inside(&r->head, h->name));
    CHECK(inside(&r->head, h->value));
    for (size_t k = 0; k < h->value.n; k++)
      CHECK(h->value.p[k] != '\r' && h->value.p[k] != '\n');
    if (h->value.n > 0) {
      CHECK(h->value.p[0] != ' ' && h->value.p[0] != '\t');
      CHECK(h->value.p[h->value.n - 1] != ' ' &&
            h->value.p[h->value.n - 1] != '\t');
    }
  }
  CHECK(m->version_minor == 0 || m->version_minor == 1);
  CHECK(!m->has_content_length || m->content_length <= lim->max_body);
  CHECK(!(m->chunked && m->has_content_length));
  CHECK(!m->expect_continue || m->version_minor == 1);
  CHECK(done || m->body.n == 0);
}

static uint64_t digest(const air__http_reader *r, const limits *lim) {
  const air__http_request *m = air__http_reader_msg(r);
  CHECK(m->body.p != NULL && m->body.n <= lim->max_body);
  CHECK(inside(&r->body, m->body));
  CHECK(!m->has_content_length || m->body.n == m->content_length);
  uint64_t h = 1469598103934665603ull;
  h = fnv(h, m->method.p, m->method.n);
  h = fnv(h, m->target.p, m->target.n);
  h = fnv(h, m->path.p, m->path.n);
  h = fnv(h, m->query.p, m->query.n);
  for (size_t i = 0; i < m->n_headers; i++) {
    h = fnv(h, m->headers[i].name.p, m->headers[i].name.n);
    h = fnv(h, ":", 1);
    h = fnv(h, m->headers[i].value.p, m->headers[i].value.n);
  }
  h = fnv(h, m->body.p, m->body.n);
  unsigned char flags[6] = {
      (unsigned char)m->version_minor, m->keep_alive,      m->chunked,
      m->has_content_length,           m->expect_continue, m->upgrade};
  return fnv(h, flags, sizeof(flags));
}

static uint32_t next_rand(uint32_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

/*
 * Reads `in` as one connection. piece == 0: everything is available at
 * once; otherwise 1..piece more bytes become available before each feed.
 */
static void run(const uint8_t *in, size_t n, const limits *lim, size_t piece,
                uint32_t seed, outcome *o) {
  memset(o, 0, sizeof(*o));
  air__http_reader r;
  air__http_reader_init(&r, lim->max_header_bytes, lim->max_headers,
                        lim->max_body);
  size_t pos = 0;               /* first byte not yet used */
  size_t avail = piece ? 0 : n; /* bytes that have "arrived" */
  bool again = false;           /* feed after HEAD even with 0 bytes */
  size_t rounds = 0;
  for (;;) {
    CHECK(++rounds < 4 * n + 4 * MAX_SEEN + 16);
    if (pos == avail && !again) {
      if (avail == n) break;
      size_t k = 1 + next_rand(&seed) % piece;
      avail = k > n - avail ? n : avail + k;
    }
    again = false;
    size_t used = 99;
    air__http_event ev =
        air__http_reader_feed(&r, (const char *)in + pos, avail - pos, &used);
    CHECK(used <= avail - pos);
    pos += used;
    if (ev == AIR__HTTP_MORE) {
      CHECK(pos == avail);
      CHECK(r.head.n <= lim->max_header_bytes);
      CHECK(r.body.n <= lim->max_body);
      continue;
    }
    if (ev == AIR__HTTP_HEAD) {
      check_head(&r, lim, false);
      again = true;
      continue;
    }
    if (ev == AIR__HTTP_FAIL) {
      CHECK(r.status == 400 || r.status == 413 || r.status == 417 ||
            r.status == 431 || r.status == 500 || r.status == 505);
      CHECK(r.error != NULL && r.error[0] != '\0');
      /* a failed reader stays failed */
      CHECK(air__http_reader_feed(&r, "GET / HTTP/1.1\r\n\r\n", 18, &used) ==
                AIR__HTTP_FAIL &&
            used == 0);
      o->end = 2;
      o->status = r.status;
      break;
    }
    CHECK(ev == AIR__HTTP_DONE);
    CHECK(air__http_reader_feed(&r, "x", 1, &used) == AIR__HTTP_DONE &&
          used == 0);
    check_head(&r, lim, true); /* the head is still valid */
    if (o->n < MAX_SEEN) o->hashes[o->n] = digest(&r, lim);
    o->n++;
    if (!air__http_reader_msg(&r)->keep_alive || o->n >= MAX_SEEN) {
      o->end = 1;
      break;
    }
    air__http_reader_next(&r);
    CHECK(!air__http_reader_started(&r));
  }
  air__http_reader_cleanup(&r);
}

static void same(const outcome *a, const outcome *b) {
  CHECK(a->n == b->n);
  for (size_t i = 0; i < a->n && i < MAX_SEEN; i++)
    CHECK(a->hashes[i] == b->hashes[i]);
  CHECK(a->end == b->end);
  /* Where bytes arrive in pieces, the raw head size can cross
   * max_header_bytes (431) before llhttp reaches a bad byte that a single
   * feed finds first, and the reader's own obs-fold check (400) can see a
   * fold before llhttp reaches an earlier-started error: in a request that
   * is bad twice, either rejection is right. Every other failure is the
   * same. */
  CHECK(a->status == b->status || a->status == 431 || b->status == 431 ||
        (a->status >= 400 && b->status >= 400 &&
         (a->status == 400 || b->status == 400)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const size_t pieces[8] = {1, 2, 3, 5, 8, 16, 64, 4096};
  if (size < 4) return 0;
  const uint8_t *h = data;
  const uint8_t *in = data + 4;
  size_t n = size - 4;
  limits lim = {AIR__HTTP_DEFAULT_MAX_HEADER_BYTES,
                AIR__HTTP_DEFAULT_MAX_HEADERS,
                AIR__HTTP_DEFAULT_MAX_BODY_BYTES};
  if (h[0] & 1) {
    lim.max_header_bytes = 16 + 4 * (size_t)h[1];
    lim.max_headers = 1 + (h[2] & 31);
    lim.max_body = 8 * (size_t)(h[2] >> 5) + h[3];
  }
  uint32_t seed = ((uint32_t)h[3] << 8 | h[1]) * 2654435761u | 1u;

  outcome a, b, c;
  run(in, n, &lim, 0, 0, &a);
  run(in, n, &lim, pieces[h[3] & 7], seed, &b);
  same(&a, &b);
  if (n <= 4096) {
    run(in, n, &lim, 1, 1, &c);
    same(&a, &c);
  }
  return 0;
}
