/*
 * Incremental WHATWG event-stream parser (contract in sse.h).
 *
 * How bytes flow: air__sse_feed scans the caller's buffer line by line with
 * memchr. While an event lies wholly inside that buffer it is parsed in
 * place: field values are kept as offsets from the event's first byte and
 * the event is dispatched with pointers into the buffer. When a feed ends
 * inside an event, the event's bytes so far are copied ("spilled") into
 * p->raw and the rest of that event is appended there line by line; the
 * same offsets stay valid because raw holds the event from its first byte.
 */
#include "sse.h"

#include <stdlib.h>
#include <string.h>

#include "airetry.h"
#include "limits.h"

/* Buffers above this capacity are freed by air__sse_reset rather than kept
 * for the next stream (a tuning constant, not a limit). */
#define SSE_KEEP_BYTES (64u << 10)
#define SSE_MIN_CAP 256u

static const unsigned char sse_bom[3] = {0xEF, 0xBB, 0xBF};

/* Grows b to hold need bytes; never beyond max (AIR_ETOOBIG then). */
static int buf_reserve(air__sse_buf *b, size_t need, size_t max) {
  if (need > max) return AIR_ETOOBIG;
  if (need <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : SSE_MIN_CAP;
  while (cap < need) cap = cap > max / 2 ? max : cap * 2;
  if (cap > max) cap = max;
  char *np = realloc(b->p, cap);
  if (!np) return AIR_ENOMEM;
  b->p = np;
  b->cap = cap;
  return 0;
}

static int buf_append(air__sse_buf *b, const char *s, size_t n, size_t max) {
  if (n == 0) return 0;
  if (b->n > max || n > max - b->n) return AIR_ETOOBIG;
  int rc = buf_reserve(b, b->n + n, max);
  if (rc) return rc;
  memcpy(b->p + b->n, s, n);
  b->n += n;
  return 0;
}

static void buf_free(air__sse_buf *b) {
  free(b->p);
  b->p = NULL;
  b->n = b->cap = 0;
}

/* Position of the first c in [s, end), or end. */
static const char *find(const char *s, const char *end, int c) {
  const char *r = memchr(s, c, (size_t)(end - s));
  return r ? r : end;
}

static int fail(air__sse *p, int rc) {
  p->err = rc;
  return rc;
}

/* Forgets the fields of the event being built (not the last event id). */
static void reset_event(air__sse *p) {
  p->type_len = 0;
  p->data_lines = 0;
  p->data.n = 0;
  p->ev_retry = -1;
}

/* The event's bytes are done with: the next line starts a new event. */
static void reset_raw(air__sse *p) {
  p->raw.n = 0;
  p->spilled = false;
  p->held = false;
  p->line_off = 0;
}

/*
 * An empty line: dispatches the event built since the last one, if it has
 * data. base is the event's first byte, raw_n its length so far (the empty
 * line's terminator included). Returns the callback's value.
 */
static int dispatch(air__sse *p, const char *base, size_t raw_n) {
  if (p->data_lines == 0) {
    reset_event(p);
    return 0;
  }
  air__sse_event ev;
  if (p->type_len) {
    ev.type.p = base + p->type_off;
    ev.type.n = p->type_len;
  } else {
    ev.type.p = "message";
    ev.type.n = 7;
  }
  if (p->data_lines == 1) {
    ev.data.p = base + p->data_off;
    ev.data.n = p->data_len;
  } else {
    ev.data.p = p->data.p;
    ev.data.n = p->data.n;
  }
  ev.id.p = p->id.n ? p->id.p : "";
  ev.id.n = p->id.n;
  ev.retry = p->ev_retry;
  ev.raw.p = base;
  ev.raw.n = raw_n;
  p->n_events++;
  reset_event(p);
  return p->cb(p->cb_data, &ev);
}

/* A data field: the first line stays in place; from the second on, lines
 * are joined in p->data. */
static int field_data(air__sse *p, const char *base, size_t voff, size_t vn) {
  if (p->data_lines == 0) {
    if (vn > p->max_data) return AIR_ETOOBIG;
    p->data_off = voff;
    p->data_len = vn;
    p->data_lines = 1;
    return 0;
  }
  size_t have = p->data_lines == 1 ? p->data_len : p->data.n;
  if (have >= p->max_data || vn >= p->max_data - have)
    return AIR_ETOOBIG; /* have + 1 + vn > max */
  int rc = buf_reserve(&p->data, have + 1 + vn, p->max_data);
  if (rc) return rc;
  if (p->data_lines == 1) {
    if (have) memcpy(p->data.p, base + p->data_off, have);
    p->data.n = have;
    p->data_lines = 2;
  }
  p->data.p[p->data.n++] = '\n';
  if (vn) memcpy(p->data.p + p->data.n, base + voff, vn);
  p->data.n += vn;
  return 0;
}

/* An id field: replaces the last event id unless the value holds a NUL. */
static int field_id(air__sse *p, const char *v, size_t vn) {
  if (memchr(v, '\0', vn)) return 0;
  p->id.n = 0;
  return buf_append(&p->id, v, vn, p->max_line);
}

/* A retry field: ASCII digits only (at least one), else ignored. */
static void field_retry(air__sse *p, const char *v, size_t vn) {
  if (vn == 0) return;
  int64_t ms = 0;
  for (size_t i = 0; i < vn; i++) {
    unsigned d = (unsigned)(unsigned char)v[i] - '0';
    if (d > 9) return;
    ms = ms > (INT64_MAX - (int64_t)d) / 10 ? INT64_MAX : ms * 10 + (int64_t)d;
  }
  p->ev_retry = ms;
  p->retry_ms = ms;
}

/*
 * One complete line of len bytes at base + off (terminator excluded); base
 * is the event's first byte and raw_n the event's length through this
 * line's terminator. Returns 0, an error or the callback's value.
 */
static int line(air__sse *p, const char *base, size_t off, size_t len,
                size_t raw_n) {
  const char *s = base + off;
  if (len == 0) return dispatch(p, base, raw_n);
  if (s[0] == ':') return 0;
  const char *colon = memchr(s, ':', len);
  size_t name_n = colon ? (size_t)(colon - s) : len;
  size_t voff = off + name_n;
  if (colon) {
    voff++;
    if (voff < off + len && base[voff] == ' ') voff++;
  }
  size_t vn = off + len - voff;
  switch (name_n) {
    case 4:
      if (memcmp(s, "data", 4) == 0) return field_data(p, base, voff, vn);
      break;
    case 5:
      if (memcmp(s, "event", 5) == 0) {
        p->type_off = voff;
        p->type_len = vn;
      } else if (memcmp(s, "retry", 5) == 0) {
        field_retry(p, base + voff, vn);
      }
      break;
    case 2:
      if (memcmp(s, "id", 2) == 0) return field_id(p, base + voff, vn);
      break;
    default:
      break;
  }
  return 0;
}

/*
 * Parses the lines of [buf, buf + n). Where an event starts in buf and is
 * still open at the end, its bytes are spilled into p->raw.
 */
static int scan(air__sse *p, const char *buf, size_t n) {
  const char *cur = buf, *end = buf + n;
  const char *blk = buf; /* the event's first byte, while not spilled */
  const char *lf = find(cur, end, '\n'), *cr = find(cur, end, '\r');
  int rc;

  for (;;) {
    if (lf < cur) lf = find(cur, end, '\n');
    if (cr < cur) cr = find(cur, end, '\r');
    const char *le = lf < cr ? lf : cr;
    if (le == end) break;

    const char *next = le + 1;
    bool hold = false;
    if (*le == '\r') {
      if (next == end)
        hold = true; /* an LF may follow in the next feed */
      else if (*next == '\n')
        next++;
    }
    size_t len = (size_t)(le - cur), off, raw_n;
    const char *base;
    if (p->spilled) {
      size_t have = p->raw.n - p->line_off;
      if (have > p->max_line || len > p->max_line - have)
        return fail(p, AIR_ETOOBIG);
      rc = buf_append(&p->raw, cur, (size_t)(next - cur), p->max_raw);
      if (rc) return fail(p, rc);
      base = p->raw.p;
      off = p->line_off;
      len += have;
      raw_n = p->raw.n;
    } else {
      if (len > p->max_line) return fail(p, AIR_ETOOBIG);
      raw_n = (size_t)(next - blk);
      if (raw_n > p->max_raw) return fail(p, AIR_ETOOBIG);
      base = blk;
      off = (size_t)(cur - blk);
    }
    cur = next;

    if (hold) {
      if (!p->spilled) {
        rc = buf_append(&p->raw, blk, raw_n, p->max_raw);
        if (rc) return fail(p, rc);
        p->spilled = true;
      }
      p->line_off = off;
      p->held_len = len;
      p->held = true;
      return 0;
    }

    rc = line(p, base, off, len, raw_n);
    if (rc) return fail(p, rc);
    if (len == 0) {
      reset_raw(p);
      blk = cur;
    } else if (p->spilled) {
      p->line_off = p->raw.n;
    }
  }

  /* [cur, end) is a partial line; keep it with the rest of its event. */
  if (p->spilled) {
    size_t have = p->raw.n - p->line_off;
    if (have > p->max_line || (size_t)(end - cur) > p->max_line - have)
      return fail(p, AIR_ETOOBIG);
    rc = buf_append(&p->raw, cur, (size_t)(end - cur), p->max_raw);
    if (rc) return fail(p, rc);
  } else if (blk < end) {
    if ((size_t)(end - cur) > p->max_line) return fail(p, AIR_ETOOBIG);
    rc = buf_append(&p->raw, blk, (size_t)(end - blk), p->max_raw);
    if (rc) return fail(p, rc);
    p->spilled = true;
    p->line_off = (size_t)(cur - blk);
  }
  return 0;
}

void air__sse_init(air__sse *p, air__sse_cb cb, void *data) {
  memset(p, 0, sizeof(*p));
  p->cb = cb;
  p->cb_data = data;
  p->max_line = AIR__MAX_SSE_LINE_BYTES;
  p->max_data = AIR__MAX_SSE_EVENT_BYTES;
  p->max_raw = AIR__MAX_SSE_RAW_BYTES;
  p->retry_ms = -1;
  p->ev_retry = -1;
}

void air__sse_cleanup(air__sse *p) {
  buf_free(&p->raw);
  buf_free(&p->data);
  buf_free(&p->id);
}

void air__sse_reset(air__sse *p) {
  air__sse_buf *bufs[3] = {&p->raw, &p->data, &p->id};
  for (size_t i = 0; i < 3; i++) {
    if (bufs[i]->cap > SSE_KEEP_BYTES) buf_free(bufs[i]);
    bufs[i]->n = 0;
  }
  reset_raw(p);
  reset_event(p);
  p->n_events = 0;
  p->n_bytes = 0;
  p->retry_ms = -1;
  p->err = 0;
  p->bom_n = 0;
  p->bom_done = false;
  p->finished = false;
}

static size_t clip(size_t want, size_t have, size_t max) {
  if (want == 0) return have;
  return want < max ? want : max;
}

void air__sse_set_limits(air__sse *p, size_t max_line, size_t max_data,
                         size_t max_raw) {
  p->max_line = clip(max_line, p->max_line, AIR__MAX_SSE_LINE_BYTES);
  p->max_data = clip(max_data, p->max_data, AIR__MAX_SSE_EVENT_BYTES);
  p->max_raw = clip(max_raw, p->max_raw, AIR__MAX_SSE_RAW_BYTES);
}

int air__sse_feed(air__sse *p, const char *buf, size_t n) {
  int rc;
  if (p->err) return p->err;
  if (p->finished) return AIR_ESTATE;
  if (n == 0) return 0;
  p->n_bytes += n;

  if (!p->bom_done) {
    while (n > 0 && p->bom_n < 3 &&
           (unsigned char)buf[0] == sse_bom[p->bom_n]) {
      buf++;
      n--;
      p->bom_n++;
    }
    if (p->bom_n < 3 && n == 0) return 0; /* a BOM so far: wait for more */
    p->bom_done = true;
    if (p->bom_n < 3 && p->bom_n > 0) {
      /* Not a BOM after all: the bytes matched begin the first line. */
      rc = buf_append(&p->raw, (const char *)sse_bom, p->bom_n, p->max_raw);
      if (rc) return fail(p, rc);
      p->spilled = true;
      p->line_off = 0;
    }
    if (n == 0) return 0;
  }

  if (p->held) {
    /* The previous feed ended on a CR: an LF here belongs to that line. */
    p->held = false;
    if (buf[0] == '\n') {
      rc = buf_append(&p->raw, buf, 1, p->max_raw);
      if (rc) return fail(p, rc);
      buf++;
      n--;
    }
    rc = line(p, p->raw.p, p->line_off, p->held_len, p->raw.n);
    if (rc) return fail(p, rc);
    if (p->held_len == 0)
      reset_raw(p);
    else
      p->line_off = p->raw.n;
    if (n == 0) return 0;
  }

  return scan(p, buf, n);
}

int air__sse_finish(air__sse *p) {
  if (p->err) return p->err;
  if (p->finished) return 0;
  p->finished = true;
  int rc = 0;
  if (p->held) {
    p->held = false;
    rc = line(p, p->raw.p, p->line_off, p->held_len, p->raw.n);
  }
  reset_raw(p);
  reset_event(p);
  p->bom_done = true;
  return rc ? fail(p, rc) : 0;
}

size_t air__sse_pending(const air__sse *p) {
  return p->raw.n + (p->bom_done ? 0 : p->bom_n);
}
