/*
 * airetry: keeps LLM calls alive.
 *
 * The one public header of libairetry. Handles are opaque; plain records that
 * callers read (air_attempt, air_diag, air_error) are declared here.
 *
 * Thread safety is stated per function. Unless said otherwise a handle may be
 * used by one thread at a time; air_config is immutable after loading and may
 * be shared freely; air_state and air_cancel are safe from any thread.
 */
#ifndef AIRETRY_H
#define AIRETRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AIR_VERSION "0.1.0"

/* ---- errors ------------------------------------------------------------ */

/* One error enum; every failing call returns one of these (negative). */
typedef enum air_errno {
  AIR_OK = 0,
  AIR_ENOMEM = -1,     /* allocation failed */
  AIR_EINVAL = -2,     /* bad argument */
  AIR_ECONFIG = -3,    /* config did not load (details in the diagnostics) */
  AIR_ETOOBIG = -4,    /* a named limit was crossed */
  AIR_ECANCELED = -5,  /* the caller cancelled */
  AIR_EUPSTREAM = -6,  /* every attempt failed; the attempt log says why */
  AIR_ENOTFOUND = -7,  /* unknown route, target or provider */
  AIR_EIO = -8,        /* file or socket I/O failed */
  AIR_EPARSE = -9,     /* input could not be parsed */
  AIR_ESTATE = -10,    /* call not allowed in the object's current state */
  AIR_ENOTSUP = -11,   /* the target cannot express the request (skipped) */
} air_errno;

/* Static, never NULL; "unknown error" for values outside the enum. */
const char *air_strerror(int err);

/* Optional caller-supplied detail for a failing call. */
typedef struct air_error {
  int code;           /* the air_errno returned */
  char message[512];  /* human-readable, NUL-terminated */
} air_error;

/* ---- reasons ----------------------------------------------------------- */

/* Failure classes of DESIGN.md 2.1. AIR_REASON_NONE means "not a failure". */
typedef enum air_reason {
  AIR_REASON_NONE = 0,
  AIR_REASON_RATE_LIMIT,
  AIR_REASON_OVERLOADED,
  AIR_REASON_SERVER_ERROR,
  AIR_REASON_NETWORK,
  AIR_REASON_TIMEOUT_CONNECT,
  AIR_REASON_TIMEOUT_FIRST_BYTE,
  AIR_REASON_TIMEOUT_FIRST_CHUNK,
  AIR_REASON_TIMEOUT_CHUNK,
  AIR_REASON_TIMEOUT_ATTEMPT,
  AIR_REASON_TIMEOUT_TOTAL,
  AIR_REASON_CONTEXT_OVERFLOW,
  AIR_REASON_CONTENT_FILTER,
  AIR_REASON_REFUSAL,
  AIR_REASON_LENGTH,
  AIR_REASON_AUTH,
  AIR_REASON_QUOTA,
  AIR_REASON_NOT_FOUND,
  AIR_REASON_BAD_REQUEST,
  AIR_REASON_MALFORMED,
  AIR_REASON_ABORTED,
  AIR_REASON__COUNT
} air_reason;

/* "rate_limit", "timeout.first_chunk", ...; "none" for NONE, NULL if out of range. */
const char *air_reason_name(air_reason r);
/* Parses a reason name of n bytes. Returns 0 or AIR_ENOTFOUND. */
int air_reason_from_name(const char *name, size_t n, air_reason *out);

/* Transport-level failure kinds fed to the classifier. */
typedef enum air_transport_err {
  AIR_TRANSPORT_OK = 0,
  AIR_TRANSPORT_CONNECT,  /* refused, reset, DNS, TLS failure */
  AIR_TRANSPORT_CLOSED,   /* connection closed before a complete response */
  AIR_TRANSPORT_BADBODY,  /* response body could not be decoded */
} air_transport_err;

/*
 * Classifies one failed attempt into a reason (DESIGN.md 2.1): the error type
 * and code from the body win over the HTTP status; a transport error wins over
 * both. Strings may be NULL; they are not retained. Pure, thread-safe.
 */
air_reason air_classify(int status, const char *type, const char *code,
                        const char *message, air_transport_err transport);

/* ---- headers ----------------------------------------------------------- */

/* A response header as received; not NUL-terminated. */
typedef struct air_header {
  const char *name;
  size_t name_len;
  const char *value;
  size_t value_len;
} air_header;

/*
 * The wait a response asks for (DESIGN.md 2.2), in milliseconds, from its
 * headers. wall_ms is the current wall-clock time in ms since the Unix epoch
 * (for HTTP-dates and RFC 3339 times). Returns 1 and sets *wait_ms when a
 * usable hint is present, 0 when there is none (negative, past or unparseable
 * values are ignored). Pure, thread-safe.
 */
int air_retry_after(const air_header *h, size_t n, uint64_t wall_ms,
                    uint64_t *wait_ms);

/* ---- config ------------------------------------------------------------ */

typedef struct air_config air_config;

typedef enum air_severity { AIR_DIAG_ERROR, AIR_DIAG_WARNING } air_severity;

/* One config problem; valid only during the callback. */
typedef struct air_diag {
  air_severity severity;
  const char *file;  /* the name given to the loader */
  int line;          /* 1-based; 0 when not tied to a place */
  int column;        /* 1-based */
  const char *message;
} air_diag;

typedef void (*air_diag_cb)(void *data, const air_diag *d);

/*
 * Loads a YAML (or JSON) config of len bytes. Every problem found is reported
 * through cb (which may be NULL), not only the first. Returns 0 and sets *out
 * (free with air_config_free) when there was no error (warnings allowed);
 * AIR_ECONFIG when any error was reported; AIR_ETOOBIG over the config size
 * limit. name is used in diagnostics only.
 */
int air_config_parse(const char *name, const char *text, size_t len,
                     air_diag_cb cb, void *data, air_config **out);
/* Reads path and calls air_config_parse. AIR_EIO when it cannot be read. */
int air_config_load(const char *path, air_diag_cb cb, void *data,
                    air_config **out);
void air_config_free(air_config *cfg);
/* Prints the resolved config (every default filled in) as YAML to a FILE *. */
void air_config_dump(const air_config *cfg, void *file);
/* The listen address of the config ("127.0.0.1:8080" when unset). */
const char *air_config_listen(const air_config *cfg);

/* ---- shared state (breakers, sticky routes) ---------------------------- */

/*
 * Breaker and sticky state shared by every request of one process. Safe to
 * use from several threads at once. cfg must outlive the state.
 */
typedef struct air_state air_state;
int air_state_new(const air_config *cfg, air_state **out);
void air_state_free(air_state *st);

typedef enum air_breaker_mode {
  AIR_BREAKER_CLOSED,
  AIR_BREAKER_OPEN,
  AIR_BREAKER_HALF_OPEN
} air_breaker_mode;

/* The breaker of target ("provider/model") at monotonic time now_ms. */
air_breaker_mode air_state_breaker(air_state *st, const char *target,
                                   uint64_t now_ms);

/* ---- cancellation ------------------------------------------------------ */

/*
 * A cancel token. air_cancel_trigger may be called from any thread and at any
 * time; every wait on the token ends at once.
 */
typedef struct air_cancel air_cancel;
int air_cancel_new(air_cancel **out);
void air_cancel_free(air_cancel *c);
void air_cancel_trigger(air_cancel *c);
bool air_cancel_is_set(const air_cancel *c);
/*
 * Sleeps up to ms milliseconds of real time. Returns 1 if the token was
 * triggered (at once, whenever that happens), 0 when the time passed.
 */
int air_cancel_sleep(air_cancel *c, uint64_t ms);

/* ---- clock and randomness ---------------------------------------------- */

/*
 * Time as the engine sees it. now_ms is monotonic, wall_ms is ms since the
 * Unix epoch, sleep waits ms or until cancel fires (returns 1 when cancelled).
 * air_clock_system() gives the real clock; tests pass a fake one.
 */
typedef struct air_clock {
  uint64_t (*now_ms)(void *data);
  uint64_t (*wall_ms)(void *data);
  int (*sleep)(void *data, uint64_t ms, air_cancel *cancel);
  void *data;
} air_clock;
const air_clock *air_clock_system(void);

/* Random source: returns 64 uniformly random bits. */
typedef struct air_rng {
  uint64_t (*next)(void *data);
  void *data;
} air_rng;

/* ---- attempts ---------------------------------------------------------- */

/* One entry of the attempt log. Strings are owned by the log. */
typedef struct air_attempt {
  unsigned n;              /* 1-based attempt number */
  const char *target;      /* "provider/model" */
  air_reason reason;       /* NONE for the attempt that succeeded */
  int status;              /* HTTP status, 0 when none */
  const char *message;     /* failure message, "" when none */
  const char *request_id;  /* upstream request id, "" when none */
  uint64_t start_ms;       /* monotonic time the attempt started */
  uint64_t ms;             /* duration of the attempt */
  uint64_t wait_ms;        /* wait before the next attempt (0 if none) */
  bool hint;               /* wait_ms came from a Retry-After hint */
  /* Outcome `skipped` (DESIGN.md 2.1): the target cannot express the
   * request, nothing was sent. Such an entry is not numbered (n is 0),
   * reason is NONE and message says why; field names the field. It counts
   * towards no budget, rule max or breaker, nor x-airetry-attempts. */
  bool skipped;
  const char *field;       /* skipped: the field; NULL otherwise */
} air_attempt;

/* A failure reported by one attempt. Strings may be NULL; not retained. */
typedef struct air_failure {
  air_reason reason;        /* NONE: classify from the fields below */
  int status;
  const char *type;         /* body error type ("overloaded_error") */
  const char *code;         /* body error code ("insufficient_quota") */
  const char *message;
  const char *request_id;
  air_transport_err transport;
  const air_header *headers;  /* response headers, for Retry-After */
  size_t n_headers;
} air_failure;

/* ---- the engine: a sans-I/O run state machine --------------------------- */

/*
 * One request's walk through its route. Feed it events with the current clock
 * values; each call returns the next action. The run never does I/O, never
 * reads a clock and never sleeps.
 */
typedef struct air_run air_run;

typedef enum air_action_kind {
  AIR_ACT_ATTEMPT,  /* start attempt `attempt` on `target` */
  AIR_ACT_WAIT,     /* wait wait_ms, then call air_run_wait_done */
  AIR_ACT_DONE,     /* success; the run is over */
  AIR_ACT_FAIL,     /* final failure with `reason`; the run is over */
} air_action_kind;

typedef struct air_action {
  air_action_kind kind;
  const char *target;        /* ATTEMPT: "provider/model"; valid as long as the run */
  unsigned target_index;     /* ATTEMPT: index into the route's targets */
  unsigned attempt;          /* ATTEMPT: 1-based number */
  uint64_t deadline_ms;      /* ATTEMPT: monotonic time the attempt must commit by */
  const char *override_json; /* ATTEMPT: request fields to override (JSON object) or NULL */
  uint64_t wait_ms;          /* WAIT */
  air_reason reason;         /* FAIL: the reason of the last failure */
  int status;                /* FAIL: the status of the last failure */
} air_action;

/*
 * Starts a run for the route or "provider/model" named model. state may be
 * NULL (no breaker, no sticky). rng may be NULL (jitter then uses a fixed
 * sequence). Returns AIR_ENOTFOUND for an unknown model. The config and state
 * must outlive the run. Sets *act to the first ATTEMPT (or FAIL when no target
 * is usable).
 */
int air_run_new(const air_config *cfg, air_state *state, const char *model,
                const air_rng *rng, uint64_t now_ms, air_run **out,
                air_action *act);
void air_run_free(air_run *run);

/* The current attempt failed. wall_ms is for HTTP-date Retry-After hints. */
int air_run_fail(air_run *run, const air_failure *f, uint64_t now_ms,
                 uint64_t wall_ms, air_action *act);
/* The current attempt succeeded (committed and finished): DONE. */
int air_run_succeed(air_run *run, uint64_t now_ms, air_action *act);
/* A WAIT ended: the next ATTEMPT (or FAIL when total_ms has passed). */
int air_run_wait_done(air_run *run, uint64_t now_ms, air_action *act);
/* The caller cancelled: FAIL with AIR_REASON_ABORTED, in any phase. */
int air_run_cancel(air_run *run, uint64_t now_ms, air_action *act);

/* The attempt log so far; entries valid until the run is freed. */
size_t air_run_attempt_count(const air_run *run);
const air_attempt *air_run_attempt(const air_run *run, size_t i);

/* ---- parts: the normalized stream ---------------------------------------- */

/* DESIGN.md 2: the elements every upstream stream is decoded into. */
typedef enum air_part_kind {
  AIR_PART_START,       /* message start: id, model (name) */
  AIR_PART_TEXT,        /* text delta */
  AIR_PART_REASONING,   /* reasoning / thinking delta */
  AIR_PART_TOOL_START,  /* tool call start: index, id, name */
  AIR_PART_TOOL_DELTA,  /* tool call arguments fragment: index, text */
  AIR_PART_REFUSAL,     /* refusal text (OpenAI delta.refusal) */
  AIR_PART_FINISH,      /* finish with a reason */
  AIR_PART_USAGE,       /* token counts (cumulative, replaces earlier ones) */
  AIR_PART_ERROR,       /* an error event inside the stream: name=type, text=message */
} air_part_kind;

typedef enum air_finish {
  AIR_FINISH_NONE = 0,
  AIR_FINISH_STOP,            /* end_turn, stop_sequence, stop */
  AIR_FINISH_LENGTH,          /* length, max_tokens */
  AIR_FINISH_TOOL_CALLS,      /* tool_calls, tool_use */
  AIR_FINISH_CONTENT_FILTER,  /* content_filter */
  AIR_FINISH_REFUSAL,         /* Anthropic refusal */
  AIR_FINISH_CONTEXT,         /* model_context_window_exceeded */
  AIR_FINISH_PAUSE,           /* Anthropic pause_turn */
} air_finish;

/*
 * One part. Strings are borrowed, not NUL-terminated, and valid only during
 * the callback that hands the part over.
 */
typedef struct air_part {
  air_part_kind kind;
  int index;          /* content block / tool call index */
  const char *text;   /* TEXT, REASONING, REFUSAL, TOOL_DELTA, ERROR message */
  size_t text_len;
  const char *id;     /* START message id, TOOL_START call id */
  size_t id_len;
  const char *name;   /* START model, TOOL_START function name, ERROR type */
  size_t name_len;
  air_finish finish;  /* FINISH */
  const char *finish_raw;  /* FINISH: the upstream's own reason string */
  size_t finish_raw_len;
  uint64_t input_tokens;   /* USAGE */
  uint64_t output_tokens;  /* USAGE */
} air_part;

/* True for the parts that commit (DESIGN.md 2): non-empty text, reasoning
 * or refusal text, and any tool call piece. */
bool air_part_is_content(const air_part *p);
/* "stop", "length", "tool_calls", ... (OpenAI names), "" for NONE. */
const char *air_finish_name(air_finish f);

/* ---- the generic driver ------------------------------------------------- */

/* What one attempt is given. Valid during the attempt call only. */
typedef struct air_attempt_info {
  const char *target;         /* "provider/model" */
  unsigned attempt;           /* 1-based */
  uint64_t deadline_ms;       /* on the driver's clock; commit by then */
  uint64_t timeout_ms;        /* deadline_ms minus the start time */
  air_cancel *cancel;         /* the caller's token, unchanged (may be NULL) */
  const char *override_json;  /* request fields a rule overrides, or NULL */
  void *options;              /* caller options, as last set by on_retry */
} air_attempt_info;

/*
 * One attempt. Returns 0 on success; on failure fills *f (strings and headers
 * need stay valid only until the function is next called or air_call returns)
 * and returns non-zero.
 */
typedef int (*air_attempt_fn)(void *data, const air_attempt_info *info,
                              air_failure *f);

typedef struct air_call_opts {
  air_attempt_fn fn;
  void *data;  /* passed to fn and to every observer */
  /* After each failed attempt, with its log entry. */
  void (*on_error)(void *data, const air_attempt *failed);
  /* Before a retry or switch; may replace *options for the next attempt. */
  void (*on_retry)(void *data, const air_attempt_info *next, void **options);
  /* Exactly once, at the end, with the result and the full attempt log. */
  void (*on_settled)(void *data, int rc, const air_attempt *log, size_t n);
  void *options;             /* initial options handed to fn */
  air_cancel *cancel;        /* may be NULL */
  const air_clock *clock;    /* NULL: air_clock_system() */
  const air_rng *rng;        /* NULL: seeded from the clock */
} air_call_opts;

/*
 * Runs opts->fn per attempt under the policy of route `model` until success,
 * a final failure or a cancel. Returns 0, AIR_EUPSTREAM (every attempt failed),
 * AIR_ECANCELED, AIR_ENOTFOUND or AIR_EINVAL. If it returns AIR_EINVAL or
 * AIR_ENOTFOUND no callback fires. When `log` is not NULL, *log receives a
 * copy of the attempt log (free with air_attempt_log_free) and *n_log its
 * length. Safe to call from many threads at once on one config and state.
 */
int air_call(const air_config *cfg, air_state *state, const char *model,
             const air_call_opts *opts, air_attempt **log, size_t *n_log);
void air_attempt_log_free(air_attempt *log, size_t n);

/* ---- the stream driver ---------------------------------------------------- */

/*
 * Where one streamed attempt delivers its parts. Valid during the attempt
 * function call only.
 */
typedef struct air_stream_sink air_stream_sink;

/*
 * Hands one part of the current attempt to the driver, which holds it until
 * commit (DESIGN.md 2, 3.2, 3.3) and delivers it to on_part afterwards.
 * Strings are copied when held. Returns 0 to go on, or 1 when the attempt
 * must stop now (the driver judged it failed before commit — a refusal, an
 * error event, a finish before content —, or on_part asked to stop, or the
 * caller cancelled): the attempt function should then return at once; what
 * it reports after that is ignored. Negative: AIR_ENOMEM.
 */
int air_stream_push(air_stream_sink *sink, const air_part *p);
/* Reports one malformed event the producer skipped. Returns as push. */
int air_stream_malformed(air_stream_sink *sink);
/* The next per-part deadline on the driver's clock (first content part,
 * then the gap between parts) and which timeout reason it is. */
uint64_t air_stream_deadline(const air_stream_sink *sink, air_reason *which);

/*
 * One streamed attempt: push parts to sink as they arrive. Return 0 when the
 * stream ended cleanly (a finish or the terminator arrived); otherwise fill
 * *f and return non-zero (a stream cut short is reason network).
 */
typedef int (*air_stream_fn)(void *data, const air_attempt_info *info,
                             air_stream_sink *sink, air_failure *f);

typedef struct air_stream_opts {
  air_stream_fn fn;
  void *data;  /* passed to fn and every callback */
  /*
   * Every part after commit, in order. A failure after commit arrives as one
   * AIR_PART_ERROR part (name: the reason name, text: the message) and
   * nothing follows it. A non-zero return cancels the request.
   */
  int (*on_part)(void *data, const air_part *p);
  /* Once, just before the first part is delivered. */
  void (*on_commit)(void *data, const air_attempt_info *info);
  void (*on_error)(void *data, const air_attempt *failed);
  void (*on_retry)(void *data, const air_attempt_info *next, void **options);
  void (*on_settled)(void *data, int rc, const air_attempt *log, size_t n);
  void *options;
  air_cancel *cancel;
  const air_clock *clock;
  const air_rng *rng;
  bool json_response;  /* commit: complete also checks the text is JSON */
} air_stream_opts;

/*
 * The streaming counterpart of air_call: runs opts->fn per attempt under the
 * route's policy (commit mode, refusal phrases, malformed limits, deadlines).
 * Before commit every failure goes through the policy and nothing reaches
 * on_part; after commit the attempt is final. Returns 0 when an answer was
 * delivered (also a judged complete answer that was the last failure,
 * DESIGN.md 3.3), AIR_EUPSTREAM, AIR_ECANCELED, AIR_ENOTFOUND, AIR_EINVAL;
 * log as for air_call. Thread-safe as air_call.
 */
int air_stream(const air_config *cfg, air_state *state, const char *model,
               const air_stream_opts *opts, air_attempt **log, size_t *n_log);

/* ---- the client: real upstream calls ------------------------------------------ */

/*
 * Process-wide setup of the HTTP stack (libcurl). Call once before the first
 * air_client_new, from one thread; air_global_cleanup at exit. The only
 * global state of the library.
 */
int air_global_init(void);
void air_global_cleanup(void);

typedef enum air_dialect { AIR_DIALECT_OPENAI, AIR_DIALECT_ANTHROPIC } air_dialect;

/*
 * A client: providers and routes from a config, breaker/sticky state, and
 * `workers` threads each with one event loop and one connection pool
 * (libcurl multi on libuv). Every air_client_* call is thread-safe.
 */
typedef struct air_client air_client;
int air_client_new(const air_config *cfg, unsigned workers, air_client **out);
/*
 * Waits for the calls in flight to end, each as it would have (its own
 * deadlines bound it; trigger its cancel token to end it at once), then
 * frees the client. No call may start during or after it.
 */
void air_client_free(air_client *c);

/* The outcome of one chat call. Free with air_chat_result_free. */
typedef struct air_chat_result {
  int status;            /* 200, or the final HTTP status (504 timeouts, 502 network) */
  air_reason reason;     /* NONE on success */
  char *body;            /* the response (or error) body in the caller's dialect */
  size_t body_len;
  char *text;            /* the answer's text ("" on failure) */
  size_t text_len;
  air_finish finish;
  char *target;          /* the target of the last attempt */
  air_attempt *log;      /* every attempt */
  size_t n_log;
  uint64_t first_content_ms;  /* 0 when nothing was released */
  uint64_t total_ms;
} air_chat_result;
void air_chat_result_free(air_chat_result *r);

typedef struct air_chat_cb {
  /* Once, when the answer commits (first content released). */
  void (*on_commit)(void *data, const char *target, unsigned attempt);
  /* Each part after commit, in order. A failure after commit arrives as one
   * AIR_PART_ERROR part (name: the reason name, text: the message) and
   * nothing follows. Runs on a client worker thread; a non-zero return
   * cancels the call. */
  int (*on_part)(void *data, const air_part *p);
  /* After each failed attempt, with the policy's decision in wait_ms. */
  void (*on_failed)(void *data, const air_attempt *a);
  void *data;
} air_chat_cb;

/*
 * One chat call. body is a request in `dialect` (an OpenAI chat.completions
 * or Anthropic messages JSON body) whose "model" names a route or a
 * "provider/model". Without cb->on_part (or cb) the answer is held whole
 * (commit: complete); with it, parts stream to cb->on_part under the
 * route's commit mode. cancel may be triggered from any thread. Returns 0 (answered),
 * AIR_EUPSTREAM (every attempt failed: *out has the error body and log),
 * AIR_ECANCELED, AIR_ENOTFOUND (unknown model), AIR_EINVAL / AIR_EPARSE (bad
 * request: *out->body holds the dialect error). *out is set in every case
 * but AIR_ENOMEM and invalid arguments.
 */
int air_client_chat(air_client *c, air_dialect dialect, const char *body,
                    size_t len, air_cancel *cancel, const air_chat_cb *cb,
                    air_chat_result **out);

#ifdef __cplusplus
}
#endif
#endif
