/*
 * airetry/drive.h: parts (the normalized stream), the generic driver air_call
 * and the stream driver air_stream.
 * Part of the public API; include <airetry.h>, the umbrella over them all.
 */
#ifndef AIRETRY_DRIVE_H
#define AIRETRY_DRIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airetry/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- parts: the normalized stream ---------------------------------------- */

/* docs/design.md §2: the elements every upstream stream is decoded into. */
typedef enum air_part_kind {
  AIR_PART_START,      /* message start: id, model (name) */
  AIR_PART_TEXT,       /* text delta */
  AIR_PART_REASONING,  /* reasoning / thinking delta */
  AIR_PART_TOOL_START, /* tool call start: index, id, name */
  AIR_PART_TOOL_DELTA, /* tool call arguments fragment: index, text */
  AIR_PART_REFUSAL,    /* refusal text (OpenAI delta.refusal) */
  AIR_PART_FINISH,     /* finish with a reason */
  AIR_PART_USAGE,      /* token counts (cumulative, replaces earlier ones) */
  AIR_PART_ERROR, /* an error event inside the stream: name=type, text=message
                   */
} air_part_kind;

typedef enum air_finish {
  AIR_FINISH_NONE = 0,
  AIR_FINISH_STOP,           /* end_turn, stop_sequence, stop */
  AIR_FINISH_LENGTH,         /* length, max_tokens */
  AIR_FINISH_TOOL_CALLS,     /* tool_calls, tool_use */
  AIR_FINISH_CONTENT_FILTER, /* content_filter */
  AIR_FINISH_REFUSAL,        /* Anthropic refusal */
  AIR_FINISH_CONTEXT,        /* model_context_window_exceeded */
  AIR_FINISH_PAUSE,          /* Anthropic pause_turn */
} air_finish;

/*
 * One part. Strings are borrowed, not NUL-terminated, and valid only during
 * the callback that hands the part over. size is the sizeof(air_part) of
 * whoever fills it, so that fields can be appended (docs/api.md): every part
 * the library hands over has it set, and a reader checks it before reading
 * a field a later version appends (as for air_span); a part pushed to
 * air_stream_push sets it (AIR_PART_INIT) or leaves it 0, which stands for
 * this first version's fields. Another size below this version's is
 * AIR_EINVAL.
 */
typedef struct air_part {
  size_t size;
  air_part_kind kind;
  int index;        /* content block / tool call index */
  const char *text; /* TEXT, REASONING, REFUSAL, TOOL_DELTA, ERROR message */
  size_t text_len;
  const char *id; /* START message id, TOOL_START call id */
  size_t id_len;
  const char *name; /* START model, TOOL_START function name, ERROR type */
  size_t name_len;
  air_finish finish;      /* FINISH */
  const char *finish_raw; /* FINISH: the upstream's own reason string */
  size_t finish_raw_len;
  uint64_t input_tokens;  /* USAGE */
  uint64_t output_tokens; /* USAGE */
} air_part;
#define AIR_PART_INIT \
  { .size = sizeof(air_part) }

/* True for the parts that commit (docs/design.md §2): non-empty text, reasoning
 * or refusal text, and any tool call piece. */
AIR_EXTERN bool air_part_is_content(const air_part *p);
/* "stop", "length", "tool_calls", ... (OpenAI names), "" for NONE. */
AIR_EXTERN const char *air_finish_name(air_finish f);

/* ---- the generic driver -------------------------------------------------- */

/* What one attempt is given. Valid during the attempt call only. */
typedef struct air_attempt_info {
  const char *target;        /* "provider/model" */
  unsigned attempt;          /* 1-based */
  uint64_t deadline_ms;      /* on the driver's clock; commit by then */
  uint64_t timeout_ms;       /* deadline_ms minus the start time */
  air_cancel *cancel;        /* the caller's token, unchanged (may be NULL) */
  const char *override_json; /* request fields a rule overrides, or NULL */
  void *options;             /* caller options, as last set by on_retry */
} air_attempt_info;

/*
 * One attempt. Returns 0 on success; on failure fills *f (strings and headers
 * need stay valid only until the function is next called or air_call returns)
 * and returns non-zero.
 */
typedef int (*air_attempt_fn)(void *data, const air_attempt_info *info,
                              air_failure *f);

/* ---- spans (docs/design.md §5, Traces)
 * ------------------------------------------
 */

typedef enum air_span_kind {
  AIR_SPAN_REQUEST, /* the whole call: the parent of its attempts */
  AIR_SPAN_ATTEMPT  /* one upstream attempt */
} air_span_kind;

/* Why an attempt ran. HEDGE: a hedge racer (docs/design.md §3.6); CONTINUATION:
 * asked for the rest of an answer that failed after commit (3.5). */
typedef enum air_span_role {
  AIR_ROLE_NONE,   /* a request span */
  AIR_ROLE_FIRST,  /* the first attempt */
  AIR_ROLE_RETRY,  /* the same target again */
  AIR_ROLE_SWITCH, /* another target */
  AIR_ROLE_HEDGE,
  AIR_ROLE_CONTINUATION
} air_span_role;

/* "first", "retry", "switch", "hedge", "continuation"; "" for NONE. */
AIR_EXTERN const char *air_span_role_name(air_span_role r);

/*
 * One finished span, in the shape of an OpenTelemetry span with the GenAI
 * semantic conventions: a C application hands it to its own tracer. Ids are
 * lowercase hex; times are nanoseconds since the Unix epoch. Strings are
 * borrowed for the callback; NULL means "not known" (an attribute to leave
 * out), as do the -1 of the signed counts.
 */
typedef struct air_span {
  size_t size; /* sizeof(air_span) of the library */
  air_span_kind kind;
  char trace_id[33];
  char span_id[17];
  char parent_span_id[17]; /* "" for a root span */
  bool sampled;            /* the trace's sampled flag */
  const char *name;        /* "chat ROUTE" / "chat MODEL" (GenAI naming) */
  uint64_t start_unix_nano;
  uint64_t end_unix_nano;
  bool error;                 /* the span's status is Error */
  const char *operation;      /* gen_ai.operation.name: "chat" */
  const char *provider;       /* gen_ai.provider.name ("openai", "anthropic"):
                                 the attempt's, or the answering one's */
  const char *request_model;  /* gen_ai.request.model: the route or
                                 "provider/model" asked for; an attempt's:
                                 its target's model */
  const char *response_model; /* gen_ai.response.model */
  int64_t input_tokens;       /* gen_ai.usage.input_tokens, -1 unknown */
  int64_t output_tokens;      /* gen_ai.usage.output_tokens, -1 unknown */
  const char *finish_reason;  /* gen_ai.response.finish_reasons[0] */
  const char *error_type;     /* error.type: the reason name, NULL on success */
  const char *message;        /* the failure message, NULL on success */
  int64_t first_content_ms;   /* since this span's start, -1 none */
  /* AIR_SPAN_REQUEST */
  const char *route;   /* the model the caller sent */
  air_dialect dialect; /* the caller's dialect */
  const char *outcome; /* "ok", "error", "error_after_commit", "aborted";
                          an attempt's: "hedge_lost" for a racer that lost
                          the race (docs/design.md §3.6), else NULL */
  unsigned attempts;   /* attempts made */
  /* AIR_SPAN_ATTEMPT */
  unsigned attempt; /* 1-based */
  air_span_role role;
  const char *target;              /* "provider/model" */
  const char *provider_name;       /* the provider's name in the config */
  air_reason reason;               /* NONE: the attempt answered */
  int status;                      /* HTTP status, 0 none */
  uint64_t wait_ms;                /* the backoff wait before it */
  const char *upstream_request_id; /* the upstream's, NULL none */
} air_span;

/*
 * The observers of one call, the same for air_call, air_stream and the
 * clients (air_client_chat, air_async_chat: "the client" below). Every
 * member may be NULL; each gets `data`. Set size to
 * sizeof(air_observers) (AIR_OBSERVERS_INIT does); see docs/api.md for how
 * option structs grow.
 */
typedef struct air_observers {
  size_t size;
  void *data;
  /* After each failed (or skipped) attempt, with its log entry; wait_ms is
   * the policy's decision. */
  void (*on_failed)(void *data, const air_attempt *failed);
  /* Before a retry or switch, with the next attempt; may replace *options
   * for it. The client has no per-attempt options: it never calls it. */
  void (*on_retry)(void *data, const air_attempt_info *next, void **options);
  /* Once, when the answer commits: air_stream and the streaming client
   * just before the first part is delivered; air_call and the whole-answer
   * client when the attempt that answers succeeds. attempt is 1-based. */
  void (*on_commit)(void *data, const char *target, unsigned attempt);
  /* Exactly once, at the end, with the result and the full attempt log,
   * unless the call failed before anything ran (AIR_EINVAL, AIR_ENOTFOUND,
   * a bad request to the client: then no observer fires). */
  void (*on_settled)(void *data, int rc, const air_attempt *log, size_t n);
  /* The client only: every span of the call (each attempt's, then the
   * request's) when it ends, before on_settled (on a worker thread of
   * air_client, inside air_async_perform for air_async).
   * Setting it turns tracing on for the call: each upstream request
   * carries its attempt span's `traceparent`. Every such call is sampled;
   * air_chat_opts.traceparent continues the application's own trace. */
  void (*on_span)(void *data, const air_span *span);
} air_observers;
#define AIR_OBSERVERS_INIT \
  { .size = sizeof(air_observers) }

/* Set size to sizeof(air_call_opts) (AIR_CALL_OPTS_INIT does). */
typedef struct air_call_opts {
  size_t size;
  air_attempt_fn fn;
  void *data;                     /* passed to fn */
  const air_observers *observers; /* may be NULL */
  void *options;                  /* initial options handed to fn */
  air_cancel *cancel;             /* may be NULL */
  const air_clock *clock;         /* NULL: air_clock_system() */
  const air_rng *rng;             /* NULL: seeded from the clock */
} air_call_opts;
#define AIR_CALL_OPTS_INIT \
  { .size = sizeof(air_call_opts) }

/*
 * Runs opts->fn per attempt under the policy of route `model` until success,
 * a final failure or a cancel. Returns 0, AIR_EUPSTREAM (every attempt failed),
 * AIR_ECANCELED, AIR_ENOTFOUND, AIR_EINVAL (also opts->size too small) or
 * AIR_ENOMEM; err (may be NULL) says why. If it returns AIR_EINVAL or
 * AIR_ENOTFOUND no callback fires. When the call ran (0, AIR_EUPSTREAM,
 * AIR_ECANCELED) and `log` is not NULL, *log receives a copy of the attempt
 * log (free with air_attempt_log_free) and *n_log its length (NULL and 0:
 * cancelled before any attempt, or no memory for the copy); otherwise both
 * are left untouched. Safe to call from many threads at once on one config
 * and state.
 * A route's `hedge` and `continuation` are ignored (docs/design.md §3.5, 3.6):
 * one attempt runs at a time, and none continues a committed one.
 */
AIR_EXTERN int air_call(const air_config *cfg, air_state *state,
                        const char *model, const air_call_opts *opts,
                        air_attempt **log, size_t *n_log, air_error *err);
AIR_EXTERN void air_attempt_log_free(air_attempt *log, size_t n);

/* ---- the stream driver --------------------------------------------------- */

/*
 * Where one streamed attempt delivers its parts. Valid during the attempt
 * function call only.
 */
typedef struct air_stream_sink air_stream_sink;

/*
 * Hands one part of the current attempt to the driver, which holds it until
 * commit (docs/design.md §2, 3.2, 3.3) and delivers it to on_part afterwards.
 * Strings are copied when held. Returns 0 to go on, or 1 when the attempt
 * must stop now (the driver judged it failed before commit — a refusal, an
 * error event, a finish before content —, or on_part asked to stop, or the
 * caller cancelled): the attempt function should then return at once; what
 * it reports after that is ignored. Negative: AIR_ENOMEM, or AIR_EINVAL (a
 * NULL argument, or a part's size neither 0 nor at least the first
 * version's).
 */
AIR_EXTERN int air_stream_push(air_stream_sink *sink, const air_part *p);
/* Reports one malformed event the producer skipped. Returns as push. */
AIR_EXTERN int air_stream_malformed(air_stream_sink *sink);
/* The next per-part deadline on the driver's clock (first content part,
 * then the gap between parts) and which timeout reason it is. */
AIR_EXTERN uint64_t air_stream_deadline(const air_stream_sink *sink,
                                        air_reason *which);

/*
 * One streamed attempt: push parts to sink as they arrive. Return 0 when the
 * stream ended cleanly (a finish or the terminator arrived); otherwise fill
 * *f and return non-zero (a stream cut short is reason network).
 */
typedef int (*air_stream_fn)(void *data, const air_attempt_info *info,
                             air_stream_sink *sink, air_failure *f);

/* Set size to sizeof(air_stream_opts) (AIR_STREAM_OPTS_INIT does). */
typedef struct air_stream_opts {
  size_t size;
  air_stream_fn fn;
  void *data; /* passed to fn and on_part */
  /*
   * Every part after commit, in order. A failure after commit arrives as one
   * AIR_PART_ERROR part (name: the reason name, text: the message) and
   * nothing follows it. A non-zero return cancels the request.
   */
  int (*on_part)(void *data, const air_part *p);
  const air_observers *observers; /* may be NULL */
  void *options;
  air_cancel *cancel;
  const air_clock *clock;
  const air_rng *rng;
  bool json_response; /* commit: complete also checks the text is JSON */
} air_stream_opts;
#define AIR_STREAM_OPTS_INIT \
  { .size = sizeof(air_stream_opts) }

/*
 * The streaming counterpart of air_call: runs opts->fn per attempt under the
 * route's policy (commit mode, refusal phrases, malformed limits, deadlines).
 * Before commit every failure goes through the policy and nothing reaches
 * on_part; after commit the attempt is final. Returns 0 when an answer was
 * delivered (also a judged complete answer that was the last failure,
 * docs/design.md §3.3), AIR_EUPSTREAM, AIR_ECANCELED, AIR_ENOTFOUND,
 * AIR_EINVAL, AIR_ENOMEM; log and err as for air_call. Thread-safe as air_call.
 * Like air_call it ignores `hedge` and `continuation` (it cannot build a
 * continuation request or run racers): a failure after commit is final;
 * air_client honours both.
 */
AIR_EXTERN int air_stream(const air_config *cfg, air_state *state,
                          const char *model, const air_stream_opts *opts,
                          air_attempt **log, size_t *n_log, air_error *err);

#ifdef __cplusplus
}
#endif
#endif
