/*
 * The spans of one exchange (docs/design.md §5, Traces): the trace a request
 * belongs to, the traceparent each attempt sends upstream, and the
 * air_span records built from the finished exchange — one per attempt,
 * then the request's — for the gateway's exporter and for air_client's
 * on_span observer alike. Builds records only; encoding is the gateway's.
 */
#ifndef AIR__SPANS_H
#define AIR__SPANS_H

#include <stdbool.h>
#include <stdint.h>

#include "airetry.h"
#include "exchange.h"
#include "limits.h"
#include "trace.h"

/* One request's trace. Filled by air__trace_begin; read-only afterwards. */
struct air__trace {
  air__span_ctx span;    /* trace id, the request span's id, flags */
  uint8_t parent_id[8];  /* the incoming parent span, zero for a root */
  uint64_t attempt_base; /* attempt span ids derive from it (trace.h) */
  bool sampled;
  uint64_t start_unix_nano; /* the wall clock when it began */
  uint64_t start_mono_ms;   /* air_clock_system()'s now_ms then */
};

/*
 * Begins the trace of a request: continued from the traceparent value tp
 * (n bytes; NULL or invalid: a new trace) and sampled by s, with ids from
 * getrandom(2). Returns 0, or AIR_EIO when the system has no randomness to
 * give (then the request runs untraced).
 */
int air__trace_begin(air__trace *t, const char *tp, size_t n,
                     const air__sampler *s);

/* The traceparent value attempt `attempt` (1-based) sends upstream. */
void air__trace_attempt_header(const air__trace *t, unsigned attempt,
                               char out[AIR__TRACEPARENT_LEN + 1]);

/* What the released answer said, gathered part by part. */
typedef struct air__trace_answer {
  char model[AIR__MAX_NAME_BYTES];         /* "" when no part named it */
  int64_t input_tokens, output_tokens;     /* -1 unknown */
  char finish[AIR__MAX_FINISH_NAME_BYTES]; /* "" none */
} air__trace_answer;

void air__trace_answer_init(air__trace_answer *a);
/* Notes the model, usage and finish a released part carries. */
void air__trace_answer_part(air__trace_answer *a, const air_part *p);

typedef struct air__trace_end {
  const air_config *cfg; /* the config the request ran under */
  const char *route;     /* the model the caller sent */
  air_dialect dialect;   /* the caller's */
  const char *outcome;   /* "ok", "error", "error_after_commit", "aborted" */
  uint64_t end_unix_nano;
} air__trace_end;

/*
 * Hands every span of the finished exchange res to emit: one per attempt
 * (skipped targets have none: nothing was sent), in order, then the
 * request's. Strings are valid during the call only.
 */
void air__trace_spans(const air__trace *t, const air__trace_end *e,
                      const air__exchange_result *res,
                      const air__trace_answer *ans,
                      void (*emit)(void *data, const air_span *s), void *data);

/* The wall clock in nanoseconds since the Unix epoch. */
uint64_t air__unix_nano(void);

#endif
