/*
 * Incremental parser for the WHATWG event-stream format ("server-sent
 * events", HTML Living Standard, section "Event stream interpretation").
 *
 * Sans-I/O and push-driven: the caller feeds bytes as they arrive, in pieces
 * of any size, and the parser calls back once per dispatched event. It knows
 * nothing about providers; the codecs in provider_*.c sit on top of it.
 *
 * Behaviour, per the spec:
 *   - lines end in CR, LF or CRLF; a CRLF split across two feeds is one line
 *     end;
 *   - one leading UTF-8 BOM (EF BB BF) is dropped, only at the very start of
 *     the stream (a second BOM is line content);
 *   - a line starting with ':' is a comment; "name:value" sets field name,
 *     one leading space of the value is dropped; a line without ':' is a
 *     field with an empty value; fields are data, event, id, retry, others
 *     are ignored; names are case-sensitive;
 *   - an empty line dispatches the event when at least one data field was
 *     seen since the last empty line (a bare "data" line counts and adds an
 *     empty line to the data); otherwise nothing is dispatched; either way
 *     the event type and the per-event retry are reset;
 *   - the last event id persists across events until an id field changes
 *     it; an id value containing NUL is ignored;
 *   - at the end of the stream an event without its terminating empty line
 *     is discarded, and so is a final line without a line terminator.
 *
 * Choices where the spec is silent (or is about a browser, not a proxy):
 *   - raw: every dispatched event also carries its bytes exactly as
 *     received, from the first line after the previous empty line (the BOM
 *     excluded) through its own terminating empty line, line terminator
 *     included. Comment lines of the block are part of raw; blocks that
 *     dispatch nothing (comment-only keep-alives, retry-only blocks) are not
 *     reported.
 *   - So that raw ends with the whole terminator, an empty line ending in a
 *     CR that is the last byte of a feed is held until the next byte is
 *     known: the event is dispatched by the next air__sse_feed (with the LF,
 *     if that is what comes) or by air__sse_finish. Only a feed boundary
 *     exactly there delays an event (a CR-only stream: until the next feed).
 *   - retry: an empty value, a sign or any non-digit makes the field
 *     ignored; values above INT64_MAX saturate. Leading zeros are fine.
 *   - Data, type and id bytes are passed through untouched: no UTF-8
 *     validation or decoding (invalid UTF-8 is the consumer's business).
 *
 * Limits (limits.h), each crossing a sticky AIR_ETOOBIG:
 *   AIR__MAX_SSE_LINE_BYTES   one line, terminator excluded (also a partial
 *                            line still waiting for its terminator);
 *   AIR__MAX_SSE_EVENT_BYTES  one event's data, LF separators included;
 *   AIR__MAX_SSE_RAW_BYTES    one event's raw bytes (comments included).
 * air__sse_set_limits may lower them per parser.
 *
 * Memory: the parser owns three growable buffers (bounded by the limits,
 * doubling growth, nothing allocated per byte). When a whole event arrives
 * inside one feed, nothing is copied: raw, data and type point into the
 * caller's buffer. Only bytes of an event still incomplete at the end of a
 * feed (and a multi-line data field, and the id) are copied.
 *
 * Not thread-safe; one parser per stream. The callback must not call
 * air__sse_feed, air__sse_finish, air__sse_reset or air__sse_cleanup on the
 * parser that called it.
 */
#ifndef AIR__SSE_H
#define AIR__SSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "str.h"

/* Spans (air__str) handed out by the parser: p is never NULL (it points to
 * a valid, possibly empty, range). */

/*
 * One dispatched event. Every pointer is borrowed and valid only during the
 * callback: it may point into the buffer given to air__sse_feed or into the
 * parser's own buffers, which the next feed overwrites. Copy what you keep.
 */
typedef struct air__sse_event {
  air__str type; /* the event field, or "message" when absent/empty */
  air__str data; /* data lines joined with LF, no trailing LF */
  air__str id;   /* the last event id of the stream ("" if none) */
  int64_t retry; /* a valid retry field of this event (ms), else -1 */
  air__str raw;  /* the event's bytes exactly as received */
} air__sse_event;

/*
 * Called once per dispatched event, in stream order. Return 0 to go on; any
 * other value stops parsing at once: the feed (or finish) that made the call
 * returns that value, and the parser stays stopped (sticky) until reset.
 */
typedef int (*air__sse_cb)(void *data, const air__sse_event *ev);

/* A growable byte buffer owned by the parser. */
typedef struct air__sse_buf {
  char *p;
  size_t n;
  size_t cap;
} air__sse_buf;

/*
 * Caller-owned parser state (air__sse_init / air__sse_cleanup). The first
 * three fields may be read by the caller; the rest is private.
 */
typedef struct air__sse {
  uint64_t n_events; /* events dispatched since init or reset */
  uint64_t n_bytes;  /* bytes fed since init or reset */
  int64_t retry_ms;  /* the stream's last valid retry value (ms), else -1;
                        set also by blocks that dispatch nothing */

  air__sse_cb cb;
  void *cb_data;
  size_t max_line, max_data, max_raw;

  air__sse_buf raw;  /* bytes of the incomplete event, when spilled */
  air__sse_buf data; /* joined data, once an event has two data lines */
  air__sse_buf id;   /* the last event id */

  /* The event being built. Offsets are relative to the start of its raw
   * bytes, wherever those live (caller's buffer or raw). */
  size_t line_off; /* start of the current partial or held line */
  size_t held_len; /* length of the held line (held) */
  size_t type_off, type_len;
  size_t data_off, data_len; /* the single data line (data_lines == 1) */
  int64_t ev_retry;
  unsigned data_lines; /* 0, 1 or 2 (two or more: joined in data) */

  int err;             /* sticky: error or callback stop value */
  unsigned char bom_n; /* leading BOM bytes matched so far */
  bool bom_done;       /* past the point where a BOM may appear */
  bool spilled;        /* the event's bytes so far live in raw */
  bool held;           /* raw ends in a CR-terminated line not yet
                          processed: the next byte may be its LF */
  bool finished;       /* air__sse_finish was called */
} air__sse;

/* Prepares p for a new stream. cb must not be NULL; data is passed to it.
 * Allocates nothing; never fails. */
void air__sse_init(air__sse *p, air__sse_cb cb, void *data);

/* Frees the parser's buffers. p may be initialised again afterwards. */
void air__sse_cleanup(air__sse *p);

/*
 * Readies p for a new stream with the same callback and limits: clears the
 * event in progress, the last event id, the error state, the counters and
 * the BOM state. Keeps small buffers for reuse; frees large ones.
 */
void air__sse_reset(air__sse *p);

/*
 * Lowers the limits of this parser (0 keeps a limit as it is; values above
 * the named maxima of limits.h are clipped to them). For callers with a
 * tighter budget, and for tests and fuzzing. Call it before the first feed
 * (or right after a reset).
 */
void air__sse_set_limits(air__sse *p, size_t max_line, size_t max_data,
                         size_t max_raw);

/*
 * Parses n more bytes of the stream (buf may be NULL when n is 0). Events
 * complete in these bytes are dispatched before it returns. The bytes are
 * not retained: the parser copies what it still needs.
 * Returns 0; AIR_ETOOBIG (a limit was crossed), AIR_ENOMEM, AIR_ESTATE
 * (called after air__sse_finish) or the callback's non-zero value. Any
 * failure is sticky: later calls return it again, without parsing, until
 * air__sse_reset.
 */
int air__sse_feed(air__sse *p, const char *buf, size_t n);

/*
 * Ends the stream: dispatches an event whose terminating empty line ended
 * in a held CR, then discards whatever is incomplete (an event without its
 * empty line, a final line without a terminator). Returns 0, the sticky
 * error, or the callback's non-zero value. Further feeds return AIR_ESTATE
 * until reset.
 */
int air__sse_finish(air__sse *p);

/*
 * Bytes of an incomplete event held by the parser (0 between events). After
 * the last feed, non-zero means the stream was cut inside an event.
 */
size_t air__sse_pending(const air__sse *p);

#endif
