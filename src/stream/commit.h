/*
 * The commit gate of one response (docs/design.md §2, 3.2, 3.3): fed the
 * decoded events of an attempt, it holds them until the first content part may
 * be released, judges soft failures (refusal phrases, native refusals, finishes
 * before content, error events, malformed events), and then releases what it
 * held, in order, followed by everything after. Pure: no I/O, no clock reads;
 * times are passed in only for the deadline bookkeeping.
 *
 * One gate serves every attempt of a request: air__gate_begin starts the
 * next attempt and drops what a failed attempt held. Not thread-safe.
 */
#ifndef AIR__COMMIT_H
#define AIR__COMMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airetry.h"
#include "buf.h"
#include "policy.h"
#include "refusal.h"

/* Flags of an upstream event, from the decoder. */
enum {
  AIR__EV_USAGE_ONLY = 1u << 0,  /* carries usage only (OpenAI usage chunk) */
  AIR__EV_TERMINATOR = 1u << 1,  /* [DONE] / message_stop */
  AIR__EV_ERROR = 1u << 2,       /* an error event */
  AIR__EV_SERVER_TOOL = 1u << 3, /* a server-tool event (Anthropic server
                                    tools, Responses built-in tool calls):
                                    progress without parts */
};

/* One upstream event: its raw bytes and the parts decoded from it. */
typedef struct air__gate_event {
  const char *raw; /* may be NULL when there are no raw bytes */
  size_t raw_len;
  const air_part *parts;
  size_t n_parts;
  unsigned flags;
} air__gate_event;

/* Receives released events, in order; pointers valid during the call only.
 * A non-zero return stops the gate's call and is passed back. */
typedef int (*air__gate_emit)(void *data, const air__gate_event *ev);

typedef enum air__gate_state {
  AIR__GATE_HOLDING,   /* nothing released yet */
  AIR__GATE_COMMITTED, /* released; events now flow straight through */
  AIR__GATE_FAILED,    /* this attempt failed before commit: see reason */
  AIR__GATE_DONE,      /* the attempt ended cleanly and all was released */
} air__gate_state;

typedef struct air__gate_cfg {
  air__commit commit;   /* first_content or complete */
  char *const *phrases; /* refusal phrases (copied at init) */
  size_t n_phrases;
  uint32_t max_malformed; /* more in one attempt fail it */
  air__malformed malformed;
  bool json_response;      /* complete mode: the text must parse as JSON */
  uint64_t first_chunk_ms; /* attempt start -> first content part received */
  uint64_t chunk_ms;       /* gap between progress events */
} air__gate_cfg;

typedef struct air__held {
  size_t raw_off, raw_len;
  size_t first_part, n_parts;
  unsigned flags;
} air__held;

typedef struct air__gate {
  air__gate_cfg cfg;
  air__gate_emit emit;
  void *emit_data;
  air__refusal refusal;
  air__gate_state state;
  air_reason reason;   /* FAILED: why */
  const char *message; /* FAILED: a static description */
  bool judged;         /* FAILED by judging a complete answer still held */
  bool committed;      /* something was released this attempt (final) */
  bool content;        /* a content part was received this attempt */
  bool finished;       /* a FINISH part was received */
  air_finish finish;
  air_finish early;    /* first_content: a finish before any content that
                          is judged at the stream's end (length,
                          content_filter), so that what follows it (the
                          usage, the terminator) is held with it; NONE
                          otherwise */
  unsigned malformed;  /* malformed events this attempt */
  uint64_t started_ms; /* attempt start */
  uint64_t last_ms;    /* last progress event received (chunk_ms) */
  /* held events: raw bytes and part strings in bytes, parts in parts */
  air__held *held;
  size_t n_held, cap_held;
  air_part *parts;
  size_t n_parts, cap_parts;
  air__buf bytes;
  air__buf text;     /* complete mode: all text, for judging */
  air_part *scratch; /* parts rebuilt for release */
  size_t cap_scratch;
} air__gate;

/* A gate config from a route's policy: its refusal phrases and malformed
 * limits, with the given commit mode and JSON check. Deadlines are set per
 * attempt from the target's timeouts. */
air__gate_cfg air__gate_cfg_of(const air__policy *pol, air__commit commit,
                               bool json_response);

/* Returns 0 or AIR_ENOMEM. cfg strings are copied. */
int air__gate_init(air__gate *g, const air__gate_cfg *cfg, air__gate_emit emit,
                   void *data);
void air__gate_cleanup(air__gate *g);

/* Starts an attempt at now_ms: forgets what the last one held. */
void air__gate_begin(air__gate *g, uint64_t now_ms);

/*
 * One event of the current attempt. Returns 0 to go on, 1 when the attempt
 * must stop now (state FAILED: a soft failure before commit), or a negative
 * error (AIR_ENOMEM, or what emit returned). Crossing the hold limits fails
 * the attempt as `malformed`.
 */
int air__gate_feed(air__gate *g, const air__gate_event *ev, uint64_t now_ms);

/* One malformed event was skipped (counted; may fail the attempt: 1). */
int air__gate_malformed(air__gate *g);

/*
 * The upstream stream ended. clean: the terminator or a FINISH arrived.
 * Before commit a clean end releases everything (an answer with no content
 * is still an answer), an unclean one fails the attempt as `network` (after
 * commit too: state FAILED with `committed` set). In complete mode this is
 * where the answer is judged. Returns as feed.
 */
int air__gate_end(air__gate *g, bool clean, uint64_t now_ms);

/*
 * Releases an answer that failed only by judgement (g->judged), unchanged,
 * as the request's final answer (docs/design.md §3.3). Returns as feed.
 */
int air__gate_release_judged(air__gate *g);

/* The next deadline for the transport to arm, and which reason it is:
 * timeout.first_chunk (attempt start + first_chunk_ms) until the first
 * content part arrives, then timeout.chunk (last progress + chunk_ms).
 * Progress (docs/design.md §2.3): a content part (text, reasoning, refusal with
 * text; a tool call's start or arguments), a finish, a server-tool event;
 * pings, empty deltas and usage-only events are not progress. */
uint64_t air__gate_deadline(const air__gate *g, air_reason *which);

/* The consumer read again after a pause at now_ms: the gap between
 * progress events counts from now (a stop of the caller's is never the
 * upstream's silence). */
void air__gate_resumed(air__gate *g, uint64_t now_ms);

#endif
