/*
 * Unit tests for src/stream/sse.c: the WHATWG event-stream parser.
 *
 * Most cases go through check(): the same bytes are parsed fed at once, fed
 * one byte at a time and (for short inputs) split in two at every offset,
 * and every run must give exactly the expected events, raw bytes included.
 * The web-platform-tests eventsource/format-*.htm cases are restated as byte
 * strings (wpt_*).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "airetry.h"
#include "limits.h"
#include "sse.h"

/* ---- recording events ---------------------------------------------------- */

#define MAX_EVS 64

/* One event as seen by the callback, every string copied (owned). */
typedef struct got_ev {
  air__str type, data, id, raw;
  int64_t retry;
  bool raw_in_feed; /* raw pointed into the buffer being fed */
} got_ev;

typedef struct rec {
  got_ev ev[MAX_EVS];
  size_t n;
  size_t stop_at; /* return stop_rc from the stop_at-th event (1-based) */
  int stop_rc;
  const char *feed; /* the buffer of the feed in progress */
  size_t feed_n;
} rec;

static air__str dup_str(air__str s) {
  assert_non_null(s.p);
  char *p = malloc(s.n + 1);
  assert_non_null(p);
  if (s.n) memcpy(p, s.p, s.n);
  p[s.n] = '\0';
  air__str d = {p, s.n};
  return d;
}

static void free_str(air__str *s) {
  free((char *)s->p);
  s->p = NULL;
}

static int on_event(void *data, const air__sse_event *ev) {
  rec *r = data;
  assert_true(r->n < MAX_EVS);
  got_ev *g = &r->ev[r->n++];
  g->type = dup_str(ev->type);
  g->data = dup_str(ev->data);
  g->id = dup_str(ev->id);
  g->raw = dup_str(ev->raw);
  g->retry = ev->retry;
  g->raw_in_feed = r->feed && ev->raw.p >= r->feed &&
                   ev->raw.p + ev->raw.n <= r->feed + r->feed_n;
  if (r->stop_at && r->n == r->stop_at) return r->stop_rc;
  return 0;
}

static void rec_free(rec *r) {
  for (size_t i = 0; i < r->n; i++) {
    free_str(&r->ev[i].type);
    free_str(&r->ev[i].data);
    free_str(&r->ev[i].id);
    free_str(&r->ev[i].raw);
  }
  r->n = 0;
}

static int feed(air__sse *p, rec *r, const char *buf, size_t n) {
  r->feed = buf;
  r->feed_n = n;
  int rc = air__sse_feed(p, buf, n);
  r->feed = NULL;
  return rc;
}

/* Feeds a string literal (embedded NULs included, final NUL excluded). */
#define FEEDS(p, r, lit) feed((p), (r), (lit), sizeof(lit) - 1)

/* ---- expectations -------------------------------------------------------- */

typedef struct want {
  air__str type, data, id;
  int64_t retry;
  air__str raw;
} want;

#define S(lit) \
  { (lit), sizeof(lit) - 1 }
#define W(type, data, id, retry, raw) \
  { S(type), S(data), S(id), (retry), S(raw) }
/* The common case: type "message", no id, no retry. */
#define M(data, raw) W("message", data, "", -1, raw)

static void print_str(const char *what, air__str s) {
  fprintf(stderr, "  %s (%zu): \"", what, s.n);
  for (size_t i = 0; i < s.n; i++) {
    unsigned char c = (unsigned char)s.p[i];
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"')
      fputc(c, stderr);
    else
      fprintf(stderr, "\\x%02x", c);
  }
  fputs("\"\n", stderr);
}

static void expect_str(const char *mode, size_t i, const char *what,
                       air__str got, air__str w) {
  if (got.n == w.n && memcmp(got.p, w.p, w.n) == 0) return;
  fprintf(stderr, "[%s] event %zu: %s differs\n", mode, i, what);
  print_str("got ", got);
  print_str("want", w);
  fail();
}

static void expect_events(const char *mode, const rec *r, const want *w,
                          size_t nw) {
  if (r->n != nw) {
    fprintf(stderr, "[%s] %zu events, want %zu\n", mode, r->n, nw);
    for (size_t i = 0; i < r->n; i++) print_str("data", r->ev[i].data);
    fail();
  }
  for (size_t i = 0; i < nw; i++) {
    expect_str(mode, i, "type", r->ev[i].type, w[i].type);
    expect_str(mode, i, "data", r->ev[i].data, w[i].data);
    expect_str(mode, i, "id", r->ev[i].id, w[i].id);
    expect_str(mode, i, "raw", r->ev[i].raw, w[i].raw);
    if (r->ev[i].retry != w[i].retry) {
      fprintf(stderr, "[%s] event %zu: retry %lld, want %lld\n", mode, i,
              (long long)r->ev[i].retry, (long long)w[i].retry);
      fail();
    }
  }
}

/*
 * Parses in[0..n) fed in pieces: cuts[] are the offsets where a new feed
 * starts (ascending, may be empty); step > 0 instead feeds step bytes at a
 * time. Returns the first non-zero value of a feed or of finish.
 */
static int parse(const char *in, size_t n, const size_t *cuts, size_t ncuts,
                 size_t step, rec *r) {
  air__sse p;
  air__sse_init(&p, on_event, r);
  int rc = 0;
  size_t at = 0;
  if (step) {
    for (; at < n && !rc; at += step)
      rc = feed(&p, r, in + at, n - at < step ? n - at : step);
  } else {
    for (size_t i = 0; i <= ncuts && !rc; i++) {
      size_t to = i < ncuts ? cuts[i] : n;
      rc = feed(&p, r, in + at, to - at);
      at = to;
    }
  }
  if (!rc) rc = air__sse_finish(&p);
  if (!rc) assert_int_equal(air__sse_pending(&p), 0);
  assert_int_equal(p.n_events, r->n);
  air__sse_cleanup(&p);
  return rc;
}

/*
 * The core check: every way of feeding `in` gives the events w[0..nw) and
 * ends with rc_want.
 */
static void check_rc(air__str in, const want *w, size_t nw, int rc_want) {
  rec r = {0};
  char mode[64];

  assert_int_equal(parse(in.p, in.n, NULL, 0, 0, &r), rc_want);
  expect_events("whole", &r, w, nw);
  rec_free(&r);

  assert_int_equal(parse(in.p, in.n, NULL, 0, 1, &r), rc_want);
  expect_events("bytewise", &r, w, nw);
  rec_free(&r);

  if (in.n > 2048) return;
  for (size_t k = 1; k < in.n; k++) {
    snprintf(mode, sizeof(mode), "split@%zu", k);
    int rc = parse(in.p, in.n, &k, 1, 0, &r);
    if (rc != rc_want) {
      fprintf(stderr, "[%s] rc %d, want %d\n", mode, rc, rc_want);
      fail();
    }
    expect_events(mode, &r, w, nw);
    rec_free(&r);
  }
  for (size_t k = 1; k + 1 < in.n && in.n <= 256; k++) {
    size_t cuts[2] = {k, k + 1};
    snprintf(mode, sizeof(mode), "split@%zu,%zu", k, k + 1);
    assert_int_equal(parse(in.p, in.n, cuts, 2, 0, &r), rc_want);
    expect_events(mode, &r, w, nw);
    rec_free(&r);
  }
}

static void check(air__str in, const want *w, size_t nw) {
  check_rc(in, w, nw, 0);
}

#define IN(lit) ((air__str)S(lit))
#define CHECK(in, ...)                             \
  do {                                             \
    const want w_[] = {__VA_ARGS__};               \
    check(IN(in), w_, sizeof(w_) / sizeof(w_[0])); \
  } while (0)
#define CHECK_NONE(in) check(IN(in), NULL, 0)

/* ---- basics -------------------------------------------------------------- */

static void test_single_event(void **state) {
  (void)state;
  CHECK("data: hello\n\n", M("hello", "data: hello\n\n"));
  CHECK("data:hello\n\n", M("hello", "data:hello\n\n"));
}

#define OA_ROLE                                                               \
  "{\"id\":\"chatcmpl-9x\",\"object\":\"chat.completion.chunk\",\"created\":" \
  "1718000000,\"model\":\"gpt-4o-2024-08-06\",\"choices\":[{\"index\":0,"     \
  "\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":"    \
  "null}]}"
#define OA_TEXT                                                               \
  "{\"id\":\"chatcmpl-9x\",\"object\":\"chat.completion.chunk\",\"created\":" \
  "1718000000,\"model\":\"gpt-4o-2024-08-06\",\"choices\":[{\"index\":0,"     \
  "\"delta\":{\"content\":\"Hello\"},\"finish_reason\":null}]}"
#define OA_STOP                                                               \
  "{\"id\":\"chatcmpl-9x\",\"object\":\"chat.completion.chunk\",\"created\":" \
  "1718000000,\"model\":\"gpt-4o-2024-08-06\",\"choices\":[{\"index\":0,"     \
  "\"delta\":{},\"finish_reason\":\"stop\"}]}"

static void test_openai_stream(void **state) {
  (void)state;
  CHECK("data: " OA_ROLE
        "\n\n"
        "data: " OA_TEXT
        "\n\n"
        "data: " OA_STOP
        "\n\n"
        "data: [DONE]\n\n",
        M(OA_ROLE, "data: " OA_ROLE "\n\n"),
        M(OA_TEXT, "data: " OA_TEXT "\n\n"),
        M(OA_STOP, "data: " OA_STOP "\n\n"), M("[DONE]", "data: [DONE]\n\n"));
}

#define AN_START                                                            \
  "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":"     \
  "\"message\",\"role\":\"assistant\",\"content\":[],\"model\":"            \
  "\"claude-sonnet-4-5\",\"stop_reason\":null,\"usage\":{\"input_tokens\":" \
  "25,\"output_tokens\":1}}}"
#define AN_BSTART                                                     \
  "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{" \
  "\"type\":\"text\",\"text\":\"\"}}"
#define AN_PING "{\"type\": \"ping\"}"
#define AN_DELTA                                                       \
  "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":" \
  "\"text_delta\",\"text\":\"Hi there\"}}"
#define AN_BSTOP "{\"type\":\"content_block_stop\",\"index\":0}"
#define AN_MDELTA                                                         \
  "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"}," \
  "\"usage\":{\"output_tokens\":15}}"
#define AN_STOP "{\"type\":\"message_stop\"}"
#define AN(ev, json) "event: " ev "\ndata: " json "\n\n"

static void test_anthropic_stream(void **state) {
  (void)state;
  CHECK(AN("message_start", AN_START) AN("content_block_start", AN_BSTART)
            AN("ping", AN_PING) AN("content_block_delta", AN_DELTA)
                AN("content_block_stop", AN_BSTOP)
                    AN("message_delta", AN_MDELTA) AN("message_stop", AN_STOP),
        W("message_start", AN_START, "", -1, AN("message_start", AN_START)),
        W("content_block_start", AN_BSTART, "", -1,
          AN("content_block_start", AN_BSTART)),
        W("ping", AN_PING, "", -1, AN("ping", AN_PING)),
        W("content_block_delta", AN_DELTA, "", -1,
          AN("content_block_delta", AN_DELTA)),
        W("content_block_stop", AN_BSTOP, "", -1,
          AN("content_block_stop", AN_BSTOP)),
        W("message_delta", AN_MDELTA, "", -1, AN("message_delta", AN_MDELTA)),
        W("message_stop", AN_STOP, "", -1, AN("message_stop", AN_STOP)));
}

/* The same Anthropic stream with CRLF line ends. */
static void test_anthropic_crlf(void **state) {
  (void)state;
  CHECK("event: ping\r\ndata: " AN_PING
        "\r\n\r\n"
        "event: message_stop\r\ndata: " AN_STOP "\r\n\r\n",
        W("ping", AN_PING, "", -1, "event: ping\r\ndata: " AN_PING "\r\n\r\n"),
        W("message_stop", AN_STOP, "", -1,
          "event: message_stop\r\ndata: " AN_STOP "\r\n\r\n"));
}

static void test_event_type(void **state) {
  (void)state;
  /* Type applies to one event only; then back to "message". */
  CHECK("event: a\ndata: 1\n\ndata: 2\n\n",
        W("a", "1", "", -1, "event: a\ndata: 1\n\n"), M("2", "data: 2\n\n"));
  /* Reset also by an empty line that dispatches nothing. */
  CHECK("event: a\n\ndata: 2\n\n", M("2", "data: 2\n\n"));
  /* The last event field wins; order against data does not matter. */
  CHECK("event: a\ndata: 1\nevent: b\n\n",
        W("b", "1", "", -1, "event: a\ndata: 1\nevent: b\n\n"));
  /* Empty value: "message". */
  CHECK("event:\ndata: x\n\n", M("x", "event:\ndata: x\n\n"));
  CHECK("event\ndata: x\n\n", M("x", "event\ndata: x\n\n"));
  /* The value is taken verbatim after one space. */
  CHECK("event:  spaced \ndata: x\n\n",
        W(" spaced ", "x", "", -1, "event:  spaced \ndata: x\n\n"));
}

static void test_multiline_data(void **state) {
  (void)state;
  CHECK("data: a\ndata: b\ndata: c\n\n",
        M("a\nb\nc", "data: a\ndata: b\ndata: c\n\n"));
  CHECK("data: a\n: note\ndata: b\n\n",
        M("a\nb", "data: a\n: note\ndata: b\n\n"));
  /* Two multi-line events in a row: the join buffer is reused cleanly. */
  CHECK("data: a\ndata: b\n\ndata: c\n\ndata: d\ndata:\n\n",
        M("a\nb", "data: a\ndata: b\n\n"), M("c", "data: c\n\n"),
        M("d\n", "data: d\ndata:\n\n"));
}

static void test_empty_data(void **state) {
  (void)state;
  /* A data field with an empty value still makes an event. */
  CHECK("data\n\n", M("", "data\n\n"));
  CHECK("data:\n\n", M("", "data:\n\n"));
  CHECK("data: \n\n", M("", "data: \n\n"));
  CHECK("data\ndata\n\n", M("\n", "data\ndata\n\n"));
  CHECK("data\ndata: x\n\n", M("\nx", "data\ndata: x\n\n"));
  /* No data field at all: nothing. */
  CHECK_NONE("event: x\n\n");
  CHECK_NONE("id: 1\nretry: 5\n\n");
  CHECK_NONE("\n\n\n");
  CHECK_NONE("");
}

static void test_leading_space(void **state) {
  (void)state;
  /* Exactly one space is dropped; a tab is not a space. */
  CHECK("data:a\n\n", M("a", "data:a\n\n"));
  CHECK("data: a\n\n", M("a", "data: a\n\n"));
  CHECK("data:  a\n\n", M(" a", "data:  a\n\n"));
  CHECK("data:\ta\n\n", M("\ta", "data:\ta\n\n"));
  CHECK("data: a \n\n", M("a ", "data: a \n\n"));
}

static void test_field_parsing(void **state) {
  (void)state;
  /* Only the first colon separates. */
  CHECK("data: a:b: c\n\n", M("a:b: c", "data: a:b: c\n\n"));
  CHECK("data::\n\n", M(":", "data::\n\n"));
  /* Names are case-sensitive and exact. */
  CHECK_NONE("Data: x\n\n");
  CHECK_NONE("DATA: x\n\n");
  CHECK_NONE("data : x\n\n");
  CHECK_NONE(" data: x\n\n");
  CHECK_NONE("datas: x\n\n");
  CHECK_NONE("dat: x\n\n");
  /* Unknown fields are ignored but stay in raw. */
  CHECK("foo: bar\ndata: x\nbaz\n\n", M("x", "foo: bar\ndata: x\nbaz\n\n"));
}

static void test_comments(void **state) {
  (void)state;
  CHECK(": hello\ndata: x\n:\n\n", M("x", ": hello\ndata: x\n:\n\n"));
  /* A comment-only block (a keep-alive) dispatches nothing and is not part
   * of the next event's raw. */
  CHECK(": ping\n\ndata: x\n\n", M("x", "data: x\n\n"));
  CHECK(":\n\n:\n\ndata: x\n\n:\n\n", M("x", "data: x\n\n"));
  /* A comment may hold anything, even "data:". */
  CHECK(":data: no\ndata: yes\n\n", M("yes", ":data: no\ndata: yes\n\n"));
}

static void test_id(void **state) {
  (void)state;
  /* The last event id persists across events. */
  CHECK("id: 1\ndata: a\n\ndata: b\n\n",
        W("message", "a", "1", -1, "id: 1\ndata: a\n\n"),
        W("message", "b", "1", -1, "data: b\n\n"));
  /* An empty id resets it. */
  CHECK("id: 1\ndata: a\n\nid\ndata: b\n\nid:\ndata: c\n\n",
        W("message", "a", "1", -1, "id: 1\ndata: a\n\n"),
        W("message", "b", "", -1, "id\ndata: b\n\n"),
        W("message", "c", "", -1, "id:\ndata: c\n\n"));
  /* An id containing NUL is ignored: the previous id stays. */
  CHECK("id: 1\ndata: a\n\nid: 2\0x\ndata: b\n\n",
        W("message", "a", "1", -1, "id: 1\ndata: a\n\n"),
        W("message", "b", "1", -1, "id: 2\0x\ndata: b\n\n"));
  /* An id in a block that dispatches nothing still sets it. */
  CHECK("id: 7\n\ndata: a\n\n", W("message", "a", "7", -1, "data: a\n\n"));
  /* The last id field of the event wins, wherever it is. */
  CHECK("id: 1\ndata: a\nid: 2\n\n",
        W("message", "a", "2", -1, "id: 1\ndata: a\nid: 2\n\n"));
  /* Spaces after the first are kept. */
  CHECK("id:  x \ndata: a\n\n",
        W("message", "a", " x ", -1, "id:  x \ndata: a\n\n"));
}

static void test_retry(void **state) {
  (void)state;
  CHECK("retry: 1000\ndata: a\n\ndata: b\n\n",
        W("message", "a", "", 1000, "retry: 1000\ndata: a\n\n"),
        M("b", "data: b\n\n"));
  CHECK("retry:0\ndata: a\n\n",
        W("message", "a", "", 0, "retry:0\ndata: a\n\n"));
  CHECK("retry: 007\ndata: a\n\n",
        W("message", "a", "", 7, "retry: 007\ndata: a\n\n"));
  /* Not all digits: ignored. */
  CHECK("retry: 10a\ndata: a\n\n", M("a", "retry: 10a\ndata: a\n\n"));
  CHECK("retry: -1\ndata: a\n\n", M("a", "retry: -1\ndata: a\n\n"));
  CHECK("retry: +1\ndata: a\n\n", M("a", "retry: +1\ndata: a\n\n"));
  CHECK("retry: 1.5\ndata: a\n\n", M("a", "retry: 1.5\ndata: a\n\n"));
  CHECK("retry:  1\ndata: a\n\n", M("a", "retry:  1\ndata: a\n\n"));
  CHECK("retry: 1 \ndata: a\n\n", M("a", "retry: 1 \ndata: a\n\n"));
  CHECK("retry:\ndata: a\n\n", M("a", "retry:\ndata: a\n\n"));
  CHECK("retry\ndata: a\n\n", M("a", "retry\ndata: a\n\n"));
  /* An invalid retry does not undo an earlier valid one. */
  CHECK("retry: 5\nretry: x\ndata: a\n\n",
        W("message", "a", "", 5, "retry: 5\nretry: x\ndata: a\n\n"));
  /* Too large: saturates. */
  CHECK("retry: 99999999999999999999999\ndata: a\n\n",
        W("message", "a", "", INT64_MAX,
          "retry: 99999999999999999999999\ndata: a\n\n"));
  CHECK("retry: 9223372036854775807\ndata: a\n\n",
        W("message", "a", "", INT64_MAX,
          "retry: 9223372036854775807\ndata: a\n\n"));
  CHECK("retry: 9223372036854775806\ndata: a\n\n",
        W("message", "a", "", INT64_MAX - 1,
          "retry: 9223372036854775806\ndata: a\n\n"));
  /* A retry in a block that dispatches nothing does not leak into the next
   * event, but the parser remembers it. */
  CHECK("retry: 3\n\ndata: a\n\n", M("a", "data: a\n\n"));
}

static void test_retry_ms(void **state) {
  (void)state;
  rec r = {0};
  air__sse p;
  air__sse_init(&p, on_event, &r);
  assert_int_equal(p.retry_ms, -1);
  const char s[] = "retry: 3000\n\ndata: a\n\nretry: x\ndata: b\n\n";
  assert_int_equal(feed(&p, &r, s, sizeof(s) - 1), 0);
  assert_int_equal(r.n, 2);
  assert_int_equal(r.ev[0].retry, -1);
  assert_int_equal(p.retry_ms, 3000);
  air__sse_cleanup(&p);
  rec_free(&r);
}

static void test_line_endings(void **state) {
  (void)state;
  CHECK("data: a\rdata: b\r\r", M("a\nb", "data: a\rdata: b\r\r"));
  CHECK("data: a\r\ndata: b\r\n\r\n", M("a\nb", "data: a\r\ndata: b\r\n\r\n"));
  CHECK("data: a\ndata: b\n\n", M("a\nb", "data: a\ndata: b\n\n"));
  /* Mixed: CR, then CRLF, then LF, then CR as the empty line. */
  CHECK("data: a\rdata: b\r\ndata: c\n\r",
        M("a\nb\nc", "data: a\rdata: b\r\ndata: c\n\r"));
  /* LF CR is two line ends, not one: the CR is an empty line. */
  CHECK("data: a\n\rdata: b\n\n", M("a", "data: a\n\r"), M("b", "data: b\n\n"));
  /* CR CR LF: the CR ends the line, CRLF is the empty line. */
  CHECK("data: a\r\r\ndata: b\n\n", M("a", "data: a\r\r\n"),
        M("b", "data: b\n\n"));
  /* CR LF LF: one line end then an empty line. */
  CHECK("data: a\r\n\ndata: b\r\r", M("a", "data: a\r\n\n"),
        M("b", "data: b\r\r"));
  /* CR-only stream of several events. */
  CHECK("event: e\rdata: 1\r\rdata: 2\r\r",
        W("e", "1", "", -1, "event: e\rdata: 1\r\r"), M("2", "data: 2\r\r"));
}

/* Feeds pieces one by one and checks the event count after each feed. */
static void feed_steps(const char *const *pieces, const size_t *counts,
                       size_t n, rec *r) {
  air__sse p;
  air__sse_init(&p, on_event, r);
  for (size_t i = 0; i < n; i++) {
    size_t len = strlen(pieces[i]); /* test literals, not network data */
    assert_int_equal(feed(&p, r, pieces[i], len), 0);
    if (r->n != counts[i]) {
      fprintf(stderr, "after piece %zu: %zu events, want %zu\n", i, r->n,
              counts[i]);
      fail();
    }
  }
  assert_int_equal(air__sse_finish(&p), 0);
  air__sse_cleanup(&p);
}

static void test_crlf_split(void **state) {
  (void)state;
  rec r = {0};
  /* A CRLF split across feeds is one line end: one event, with the LF. */
  const char *a[] = {"data: a\r", "\n\r", "\ndata: b\r\n\r\n"};
  const size_t ac[] = {0, 0, 2};
  feed_steps(a, ac, 3, &r);
  assert_int_equal(r.n, 2);
  assert_string_equal(r.ev[0].data.p, "a");
  assert_string_equal(r.ev[0].raw.p, "data: a\r\n\r\n");
  assert_string_equal(r.ev[1].raw.p, "data: b\r\n\r\n");
  rec_free(&r);

  /* CR-only: the held empty line is dispatched by the next feed, whatever
   * byte it starts with. */
  const char *b[] = {"data: a\r\r", "data: b\r\r", "x"};
  const size_t bc[] = {0, 1, 2};
  feed_steps(b, bc, 3, &r);
  assert_string_equal(r.ev[0].raw.p, "data: a\r\r");
  assert_string_equal(r.ev[1].raw.p, "data: b\r\r");
  rec_free(&r);

  /* A lone LF after a held CR line is swallowed and nothing else. */
  const char *c[] = {"data: a\r", "\n", "\r", "\n", "data: b\n\n"};
  const size_t cc[] = {0, 0, 0, 1, 2};
  feed_steps(c, cc, 5, &r);
  assert_string_equal(r.ev[0].data.p, "a");
  assert_string_equal(r.ev[0].raw.p, "data: a\r\n\r\n");
  rec_free(&r);
}

static void test_held_cr_at_finish(void **state) {
  (void)state;
  rec r = {0};
  air__sse p;
  air__sse_init(&p, on_event, &r);
  assert_int_equal(FEEDS(&p, &r, "data: a\r\r"), 0);
  assert_int_equal(r.n, 0);
  assert_true(air__sse_pending(&p) > 0);
  assert_int_equal(air__sse_finish(&p), 0);
  assert_int_equal(r.n, 1);
  assert_string_equal(r.ev[0].raw.p, "data: a\r\r");
  assert_int_equal(air__sse_pending(&p), 0);
  air__sse_cleanup(&p);
  rec_free(&r);
}

static void test_nul_in_data(void **state) {
  (void)state;
  CHECK("data: a\0b\n\n", M("a\0b", "data: a\0b\n\n"));
  CHECK("data:\0\ndata:\0\0\n\n", M("\0\n\0\0", "data:\0\ndata:\0\0\n\n"));
  CHECK("event: x\0y\ndata: 1\n\n",
        W("x\0y", "1", "", -1, "event: x\0y\ndata: 1\n\n"));
}

static void test_utf8(void **state) {
  (void)state;
  /* Bytes pass through untouched, valid UTF-8 or not. */
  CHECK("data: h\xc3\xa9llo \xe2\x9c\x93\n\n",
        M("h\xc3\xa9llo \xe2\x9c\x93", "data: h\xc3\xa9llo \xe2\x9c\x93\n\n"));
  CHECK("data: \xff\xfe\n\n", M("\xff\xfe", "data: \xff\xfe\n\n"));
}

#define BOM "\xEF\xBB\xBF"

static void test_bom(void **state) {
  (void)state;
  /* One leading BOM is dropped and is not part of raw. */
  CHECK(BOM "data: a\n\n", M("a", "data: a\n\n"));
  /* Only one: a second makes the first field name "\xEF\xBB\xBF" "data". */
  CHECK(BOM BOM "data: 1\n\ndata: 2\n\n", M("2", "data: 2\n\n"));
  /* Not at the start of the stream: line content. */
  CHECK("data: 1\n\n" BOM "data: 2\n\n", M("1", "data: 1\n\n"));
  CHECK_NONE("\n" BOM "data: 1\n\n");
  /* A partial BOM is line content too. */
  CHECK_NONE(
      "\xEF\xBB"
      "data: 1\n\n");
  CHECK_NONE(
      "\xEF"
      "data: 1\n\n");
  CHECK(
      "\xEF\n"
      "data: 1\n\n",
      M("1",
        "\xEF\n"
        "data: 1\n\n"));
  CHECK("\xEF\xBB\ndata: 1\n\n", M("1", "\xEF\xBB\ndata: 1\n\n"));
  CHECK("\xEF\xBB:c\ndata: 1\n\n", M("1", "\xEF\xBB:c\ndata: 1\n\n"));
  /* A BOM alone, a BOM then blank lines. */
  CHECK_NONE(BOM);
  CHECK_NONE("\xEF\xBB");
  CHECK(BOM "\n\ndata: x\r\n\r\n", M("x", "data: x\r\n\r\n"));
  /* A BOM as data content (not at the start) is kept. */
  CHECK("data: " BOM "\n\n", M(BOM, "data: " BOM "\n\n"));
}

static void test_bom_split(void **state) {
  (void)state;
  rec r = {0};
  const char *a[] = {"\xEF", "\xBB", "\xBF", "data: a\n\n"};
  const size_t ac[] = {0, 0, 0, 1};
  feed_steps(a, ac, 4, &r);
  assert_string_equal(r.ev[0].raw.p, "data: a\n\n");
  rec_free(&r);
  /* A split partial BOM followed by another byte: no BOM, the field name
   * carries the bytes. */
  const char *b[] = {"\xEF\xBB", "data: a\n\n", "data: b\n\n"};
  const size_t bc[] = {0, 0, 1};
  feed_steps(b, bc, 3, &r);
  assert_string_equal(r.ev[0].data.p, "b");
  rec_free(&r);
}

static void test_unterminated(void **state) {
  (void)state;
  /* The spec discards an event without its empty line ... */
  CHECK("data: a\n\ndata: b\n", M("a", "data: a\n\n"));
  /* ... and a final line without its line end. */
  CHECK("data: a\n\ndata: b", M("a", "data: a\n\n"));
  CHECK("data: a\n\ndata: b\n\n\n\nda", M("a", "data: a\n\n"),
        M("b", "data: b\n\n"));

  rec r = {0};
  air__sse p;
  air__sse_init(&p, on_event, &r);
  assert_int_equal(FEEDS(&p, &r, "data: a\n\ndata: b\n"), 0);
  assert_int_equal(air__sse_pending(&p), 8);
  assert_int_equal(air__sse_finish(&p), 0);
  assert_int_equal(air__sse_pending(&p), 0);
  assert_int_equal(r.n, 1);
  air__sse_cleanup(&p);
  rec_free(&r);
}

/* ---- web-platform-tests eventsource/format-*.htm, restated -----------------
 */

static void wpt_field_parsing(void **state) {
  (void)state;
  CHECK(
      "data:\0\ndata:  2\rData:1\ndata\0:2\ndata:1\r\0data:4\nda-ta:3\r"
      "data_5\ndata:3\rdata:\r\n data:32\ndata:4\n\n",
      M("\0\n 2\n1\n3\n\n4",
        "data:\0\ndata:  2\rData:1\ndata\0:2\ndata:1\r\0data:4\nda-ta:3\r"
        "data_5\ndata:3\rdata:\r\n data:32\ndata:4\n\n"));
}

static void wpt_comments(void **state) {
  (void)state;
  CHECK(
      "data:1\r:\0\n:\r\ndata:2\n:xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r"
      "data:3\n:data:fail\r:xxxxxxxxxxxxxxxxxxxxxxxxxxxx\ndata:4\n\n",
      M("1\n2\n3\n4",
        "data:1\r:\0\n:\r\ndata:2\n:xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r"
        "data:3\n:data:fail\r:xxxxxxxxxxxxxxxxxxxxxxxxxxxx\ndata:4\n\n"));
}

static void wpt_data_before_final_empty_line(void **state) {
  (void)state;
  CHECK("retry:1000\ndata:test1\n\nid:test\ndata:test2",
        W("message", "test1", "", 1000, "retry:1000\ndata:test1\n\n"));
}

static void wpt_field_data(void **state) {
  (void)state;
  CHECK("data:\n\ndata\ndata\n\ndata:test\n\n", M("", "data:\n\n"),
        M("\n", "data\ndata\n\n"), M("test", "data:test\n\n"));
}

static void wpt_field_event(void **state) {
  (void)state;
  CHECK("event:test\ndata:x\n\ndata:x\n\n",
        W("test", "x", "", -1, "event:test\ndata:x\n\n"), M("x", "data:x\n\n"));
  CHECK("event: \ndata:data\n\n", M("data", "event: \ndata:data\n\n"));
}

static void wpt_field_id(void **state) {
  (void)state;
  CHECK("id:1\ndata:1\n\nid:\ndata:2\n\n",
        W("message", "1", "1", -1, "id:1\ndata:1\n\n"),
        W("message", "2", "", -1, "id:\ndata:2\n\n"));
  CHECK("id:1\0\ndata:x\n\n", M("x", "id:1\0\ndata:x\n\n"));
  CHECK("id:\0\ndata:x\n\n", M("x", "id:\0\ndata:x\n\n"));
}

static void wpt_field_retry(void **state) {
  (void)state;
  CHECK("retry:3000\nretry:1000x\ndata:x\n\n",
        W("message", "x", "", 3000, "retry:3000\nretry:1000x\ndata:x\n\n"));
  CHECK("retry\ndata:test\n\n", M("test", "retry\ndata:test\n\n"));
  CHECK("retry:03000\ndata:x\n\n",
        W("message", "x", "", 3000, "retry:03000\ndata:x\n\n"));
}

static void wpt_field_unknown(void **state) {
  (void)state;
  CHECK(
      "data:test\n data\ndata\nfoobar:xxx\njustsometext\n:thisisacommentyay\n"
      "data:test\n\n",
      M("test\n\ntest",
        "data:test\n data\ndata\nfoobar:xxx\njustsometext\n"
        ":thisisacommentyay\ndata:test\n\n"));
}

static void wpt_leading_space(void **state) {
  (void)state;
  CHECK("data:\ttest\rdata: \ndata:test\n\n",
        M("\ttest\n\ntest", "data:\ttest\rdata: \ndata:test\n\n"));
}

static void wpt_newlines(void **state) {
  (void)state;
  CHECK("data:test\r\ndata\ndata:test\r\n\r",
        M("test\n\ntest", "data:test\r\ndata\ndata:test\r\n\r"));
}

static void wpt_null_character(void **state) {
  (void)state;
  CHECK("data:\0\n\n\n\n", M("\0", "data:\0\n\n"));
}

static void wpt_bom(void **state) {
  (void)state;
  CHECK(BOM "data:1\n\n" BOM "data:2\n\ndata:3\n\n", M("1", "data:1\n\n"),
        M("3", "data:3\n\n"));
}

static void wpt_bom_2(void **state) {
  (void)state;
  CHECK(BOM BOM "data:1\n\ndata:2\n\ndata:3\n\n", M("2", "data:2\n\n"),
        M("3", "data:3\n\n"));
}

static void wpt_utf8(void **state) {
  (void)state;
  CHECK("data: ok\xe2\x80\xa6\n\n",
        M("ok\xe2\x80\xa6", "data: ok\xe2\x80\xa6\n\n"));
}

/* ---- raw ------------------------------------------------------------------
 */

/* An event wholly inside one feed is delivered in place (no copy). */
static void test_raw_zero_copy(void **state) {
  (void)state;
  rec r = {0};
  air__sse p;
  air__sse_init(&p, on_event, &r);
  const char s[] = "data: a\n\nevent: e\ndata: b\n\ndata: c\n";
  assert_int_equal(feed(&p, &r, s, sizeof(s) - 1), 0);
  assert_int_equal(r.n, 2);
  assert_true(r.ev[0].raw_in_feed);
  assert_true(r.ev[1].raw_in_feed);
  /* The third event straddles two feeds: copied. */
  assert_int_equal(FEEDS(&p, &r, "\n"), 0);
  assert_int_equal(r.n, 3);
  assert_false(r.ev[2].raw_in_feed);
  assert_string_equal(r.ev[2].raw.p, "data: c\n\n");
  air__sse_cleanup(&p);
  rec_free(&r);
}

/* Concatenated raws rebuild the input when no block is event-less. */
static void test_raw_concatenation(void **state) {
  (void)state;
  const char s[] = "data: " OA_ROLE "\r\n\r\n" AN("ping", AN_PING)
      ": c\rid: 9\rdata: x\r\r" "data: " OA_TEXT "\n\n" AN("message_stop", AN_STOP);
  size_t n = sizeof(s) - 1;
  for (size_t step = 1; step <= 64; step = step * 2 + 1) {
    rec r = {0};
    assert_int_equal(parse(s, n, NULL, 0, step, &r), 0);
    assert_int_equal(r.n, 5);
    size_t at = 0;
    for (size_t i = 0; i < r.n; i++) {
      assert_true(at + r.ev[i].raw.n <= n);
      assert_memory_equal(r.ev[i].raw.p, s + at, r.ev[i].raw.n);
      at += r.ev[i].raw.n;
    }
    assert_int_equal(at, n);
    rec_free(&r);
  }
}

/* ---- limits and errors ----------------------------------------------------
 */

/* A buffer of n bytes: prefix, then fill up to n - strlen(suffix), suffix. */
static char *make(const char *prefix, char fill, size_t n, const char *suffix) {
  size_t a = strlen(prefix), b = strlen(suffix);
  assert_true(a + b <= n);
  char *s = malloc(n);
  assert_non_null(s);
  memcpy(s, prefix, a);
  memset(s + a, fill, n - a - b);
  memcpy(s + n - b, suffix, b);
  return s;
}

static void test_limit_line(void **state) {
  (void)state;
  const size_t max = AIR__MAX_SSE_LINE_BYTES;
  /* A line of exactly max bytes is fine. */
  char *s = make("data: ", 'x', max + 2, "\n\n");
  air__str in = {s, max + 2};
  rec r = {0};
  assert_int_equal(parse(s, max + 2, NULL, 0, 0, &r), 0);
  assert_int_equal(r.n, 1);
  assert_int_equal(r.ev[0].data.n, max - 6);
  rec_free(&r);
  free(s);
  /* One more byte is too big, fed at once or in pieces. */
  s = make("data: ", 'x', max + 3, "\n\n");
  in.p = s;
  in.n = max + 3;
  check_rc(in, NULL, 0, AIR_ETOOBIG);
  free(s);
  /* A partial line over the limit fails before its line end arrives. */
  s = make("", ':', max + 1, "");
  air__sse p;
  air__sse_init(&p, on_event, &r);
  assert_int_equal(FEEDS(&p, &r, "data: a\n\n"), 0);
  assert_int_equal(feed(&p, &r, s, max), 0);
  assert_int_equal(feed(&p, &r, s, 1), AIR_ETOOBIG);
  assert_int_equal(r.n, 1);
  air__sse_cleanup(&p);
  rec_free(&r);
  free(s);
}

/*
 * Five data lines whose data joins to max + extra bytes, each line within
 * the line limit. Returns the stream; *n receives its length.
 */
static char *data_stream(size_t extra, size_t *n) {
  const size_t max = AIR__MAX_SSE_EVENT_BYTES, k = 5;
  size_t each = (max - (k - 1)) / k, last = max - (k - 1) - each * (k - 1);
  last += extra;
  assert_true(last + 6 <= AIR__MAX_SSE_LINE_BYTES);
  char *s = malloc(k * (6 + 1) + each * (k - 1) + last + 1);
  assert_non_null(s);
  char *w = s;
  for (size_t i = 0; i < k; i++) {
    size_t len = i + 1 == k ? last : each;
    memcpy(w, "data: ", 6);
    memset(w + 6, (int)('a' + i), len);
    w[6 + len] = '\n';
    w += 6 + len + 1;
  }
  *w++ = '\n';
  *n = (size_t)(w - s);
  return s;
}

static void test_limit_data(void **state) {
  (void)state;
  size_t n;
  char *s = data_stream(0, &n);
  rec r = {0};
  assert_int_equal(parse(s, n, NULL, 0, 0, &r), 0);
  assert_int_equal(r.n, 1);
  assert_int_equal(r.ev[0].data.n, AIR__MAX_SSE_EVENT_BYTES);
  rec_free(&r);
  assert_int_equal(parse(s, n, NULL, 0, 1, &r), 0);
  assert_int_equal(r.n, 1);
  rec_free(&r);
  free(s);
  s = data_stream(1, &n);
  air__str in = {s, n};
  check_rc(in, NULL, 0, AIR_ETOOBIG);
  free(s);
  /* A single data line over the data limit (lowered below the line one). */
  air__sse p;
  air__sse_init(&p, on_event, &r);
  air__sse_set_limits(&p, 0, 3, 0);
  assert_int_equal(FEEDS(&p, &r, "data: 123\n\n"), 0);
  assert_int_equal(FEEDS(&p, &r, "data: 1234\n"), AIR_ETOOBIG);
  assert_int_equal(r.n, 1);
  air__sse_cleanup(&p);
  rec_free(&r);
}

static void test_limit_raw(void **state) {
  (void)state;
  /* Comment lines add to raw but not to data: 1000-byte comment lines up
   * to just past the raw limit, then a data line that is never reached. */
  const size_t line = 1000, n = (AIR__MAX_SSE_RAW_BYTES / line + 1) * line;
  char *s = malloc(n + 10);
  assert_non_null(s);
  for (size_t at = 0; at < n; at += line) {
    memset(s + at, 'c', line - 1);
    s[at] = ':';
    s[at + line - 1] = '\n';
  }
  memcpy(s + n, "data: x\n\n", 9);
  air__str in = {s, n + 9};
  check_rc(in, NULL, 0, AIR_ETOOBIG);
  /* Just below the limit the event goes through. */
  size_t fit = (AIR__MAX_SSE_RAW_BYTES - 9) / line * line;
  memcpy(s + fit, "data: x\n\n", 9);
  rec r = {0};
  assert_int_equal(parse(s, fit + 9, NULL, 0, 4096, &r), 0);
  assert_int_equal(r.n, 1);
  assert_int_equal(r.ev[0].raw.n, fit + 9);
  rec_free(&r);
  free(s);
}

/* Exact edges with lowered limits: line, data and raw. */
static void test_limits_lowered(void **state) {
  (void)state;
  rec r = {0};
  air__sse p;
  air__sse_init(&p, on_event, &r);
  air__sse_set_limits(&p, 8, 5, 20);
  /* line "data: 12" is 8 bytes: ok; raw "data: 12\n\n" is 10. */
  assert_int_equal(FEEDS(&p, &r, "data: 12\n\n"), 0);
  /* data "12\n45" is 5 bytes: ok; raw is 19 bytes: ok. */
  assert_int_equal(FEEDS(&p, &r, "data: 12\ndata: 45\n\n"), 0);
  assert_int_equal(FEEDS(&p, &r, ":\n"), 0); /* raw so far 2 */
  assert_int_equal(FEEDS(&p, &r, "data: 12\ndata: 45\n\n"), AIR_ETOOBIG);
  assert_int_equal(r.n, 2);
  air__sse_reset(&p);
  assert_int_equal(FEEDS(&p, &r, "data: 123\n"), AIR_ETOOBIG);
  air__sse_reset(&p);
  assert_int_equal(FEEDS(&p, &r, "data: 12\ndata: 456\n"), AIR_ETOOBIG);
  air__sse_reset(&p);
  assert_int_equal(FEEDS(&p, &r, "data: 123"), AIR_ETOOBIG);
  /* Limits above the named maxima are clipped to them. */
  air__sse_set_limits(&p, SIZE_MAX, SIZE_MAX, SIZE_MAX);
  assert_int_equal(p.max_line, AIR__MAX_SSE_LINE_BYTES);
  assert_int_equal(p.max_data, AIR__MAX_SSE_EVENT_BYTES);
  assert_int_equal(p.max_raw, AIR__MAX_SSE_RAW_BYTES);
  air__sse_cleanup(&p);
  rec_free(&r);
}

static void test_error_sticky(void **state) {
  (void)state;
  rec r = {0};
  air__sse p;
  air__sse_init(&p, on_event, &r);
  air__sse_set_limits(&p, 4, 0, 0);
  assert_int_equal(FEEDS(&p, &r, "data: toolong\n\n"), AIR_ETOOBIG);
  assert_int_equal(FEEDS(&p, &r, "data\n\n"), AIR_ETOOBIG);
  assert_int_equal(air__sse_finish(&p), AIR_ETOOBIG);
  assert_int_equal(r.n, 0);
  /* reset clears the error; limits are kept. */
  air__sse_reset(&p);
  assert_int_equal(FEEDS(&p, &r, "data\n\n"), 0);
  assert_int_equal(r.n, 1);
  assert_int_equal(FEEDS(&p, &r, "data: x\n"), AIR_ETOOBIG);
  air__sse_cleanup(&p);
  rec_free(&r);
}

static void test_callback_stop(void **state) {
  (void)state;
  const char s[] = "data: 1\n\ndata: 2\n\ndata: 3\n\n";
  for (size_t step = 1; step <= sizeof(s); step++) {
    rec r = {0};
    r.stop_at = 2;
    r.stop_rc = 42;
    assert_int_equal(parse(s, sizeof(s) - 1, NULL, 0, step, &r), 42);
    assert_int_equal(r.n, 2);
    rec_free(&r);
  }
  /* Sticky: later feeds return the value again without parsing. */
  rec r = {0};
  r.stop_at = 1;
  r.stop_rc = -77;
  air__sse p;
  air__sse_init(&p, on_event, &r);
  assert_int_equal(feed(&p, &r, s, sizeof(s) - 1), -77);
  assert_int_equal(FEEDS(&p, &r, "data: 4\n\n"), -77);
  assert_int_equal(air__sse_finish(&p), -77);
  assert_int_equal(r.n, 1);
  air__sse_cleanup(&p);
  rec_free(&r);
  /* A stop from the event dispatched by finish is returned by finish. */
  r.stop_at = 1;
  r.stop_rc = 5;
  air__sse_init(&p, on_event, &r);
  assert_int_equal(FEEDS(&p, &r, "data: 1\r\r"), 0);
  assert_int_equal(air__sse_finish(&p), 5);
  assert_int_equal(air__sse_finish(&p), 5);
  air__sse_cleanup(&p);
  rec_free(&r);
}

static void test_finish_state(void **state) {
  (void)state;
  rec r = {0};
  air__sse p;
  air__sse_init(&p, on_event, &r);
  assert_int_equal(feed(&p, &r, NULL, 0), 0);
  assert_int_equal(air__sse_finish(&p), 0);
  assert_int_equal(air__sse_finish(&p), 0);
  assert_int_equal(FEEDS(&p, &r, "data: x\n\n"), AIR_ESTATE);
  air__sse_reset(&p);
  assert_int_equal(FEEDS(&p, &r, "data: x\n\n"), 0);
  assert_int_equal(r.n, 1);
  air__sse_cleanup(&p);
  rec_free(&r);
}

static void test_reset_reuse(void **state) {
  (void)state;
  rec r = {0};
  air__sse p;
  air__sse_init(&p, on_event, &r);
  const char a[] = BOM "id: 5\nretry: 9\nevent: e\ndata: partial";
  assert_int_equal(feed(&p, &r, a, sizeof(a) - 1), 0);
  assert_true(air__sse_pending(&p) > 0);
  assert_int_equal(p.retry_ms, 9);
  air__sse_reset(&p);
  assert_int_equal(air__sse_pending(&p), 0);
  assert_int_equal(p.n_bytes, 0);
  assert_int_equal(p.retry_ms, -1);
  /* New stream: BOM stripped again, no id, no type, no leftover data. */
  const char b[] = BOM "data: fresh\n\n";
  assert_int_equal(feed(&p, &r, b, sizeof(b) - 1), 0);
  assert_int_equal(r.n, 1);
  assert_string_equal(r.ev[0].data.p, "fresh");
  assert_string_equal(r.ev[0].type.p, "message");
  assert_int_equal(r.ev[0].id.n, 0);
  assert_string_equal(r.ev[0].raw.p, "data: fresh\n\n");
  /* Reuse after a big event frees the big buffer but still works. */
  char *big = make("data: ", 'z', 200000, "\n");
  assert_int_equal(feed(&p, &r, big, 200000), 0);
  assert_true(p.raw.cap >= 200000);
  air__sse_reset(&p);
  assert_int_equal(p.raw.cap, 0);
  assert_int_equal(FEEDS(&p, &r, "data: y\n"), 0);
  assert_int_equal(FEEDS(&p, &r, "\n"), 0);
  assert_int_equal(r.n, 2);
  assert_string_equal(r.ev[1].data.p, "y");
  free(big);
  air__sse_cleanup(&p);
  rec_free(&r);
}

static void test_counters(void **state) {
  (void)state;
  rec r = {0};
  air__sse p;
  air__sse_init(&p, on_event, &r);
  const char s[] = BOM ": c\n\ndata: 1\n\ndata: 2\n\nevent: x\n\ndata: 3";
  assert_int_equal(feed(&p, &r, s, 20), 0);
  assert_int_equal(feed(&p, &r, s + 20, sizeof(s) - 21), 0);
  assert_int_equal(p.n_events, 2);
  assert_int_equal(p.n_bytes, sizeof(s) - 1);
  air__sse_cleanup(&p);
  rec_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_single_event),
      cmocka_unit_test(test_openai_stream),
      cmocka_unit_test(test_anthropic_stream),
      cmocka_unit_test(test_anthropic_crlf),
      cmocka_unit_test(test_event_type),
      cmocka_unit_test(test_multiline_data),
      cmocka_unit_test(test_empty_data),
      cmocka_unit_test(test_leading_space),
      cmocka_unit_test(test_field_parsing),
      cmocka_unit_test(test_comments),
      cmocka_unit_test(test_id),
      cmocka_unit_test(test_retry),
      cmocka_unit_test(test_retry_ms),
      cmocka_unit_test(test_line_endings),
      cmocka_unit_test(test_crlf_split),
      cmocka_unit_test(test_held_cr_at_finish),
      cmocka_unit_test(test_nul_in_data),
      cmocka_unit_test(test_utf8),
      cmocka_unit_test(test_bom),
      cmocka_unit_test(test_bom_split),
      cmocka_unit_test(test_unterminated),
      cmocka_unit_test(wpt_field_parsing),
      cmocka_unit_test(wpt_comments),
      cmocka_unit_test(wpt_data_before_final_empty_line),
      cmocka_unit_test(wpt_field_data),
      cmocka_unit_test(wpt_field_event),
      cmocka_unit_test(wpt_field_id),
      cmocka_unit_test(wpt_field_retry),
      cmocka_unit_test(wpt_field_unknown),
      cmocka_unit_test(wpt_leading_space),
      cmocka_unit_test(wpt_newlines),
      cmocka_unit_test(wpt_null_character),
      cmocka_unit_test(wpt_bom),
      cmocka_unit_test(wpt_bom_2),
      cmocka_unit_test(wpt_utf8),
      cmocka_unit_test(test_raw_zero_copy),
      cmocka_unit_test(test_raw_concatenation),
      cmocka_unit_test(test_limit_line),
      cmocka_unit_test(test_limit_data),
      cmocka_unit_test(test_limit_raw),
      cmocka_unit_test(test_limits_lowered),
      cmocka_unit_test(test_error_sticky),
      cmocka_unit_test(test_callback_stop),
      cmocka_unit_test(test_finish_state),
      cmocka_unit_test(test_reset_reuse),
      cmocka_unit_test(test_counters),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
