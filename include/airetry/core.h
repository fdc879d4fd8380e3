/*
 * airetry/core.h: errors, reasons, config, shared state, cancellation, clock,
 * the attempt log and the sans-I/O engine run.
 * Part of the public API; include <airetry.h>, the umbrella over them all.
 */
#ifndef AIRETRY_CORE_H
#define AIRETRY_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks what libairetry.so exports (built with -fvisibility=hidden). */
#if defined(__GNUC__) || defined(__clang__)
#define AIR_EXTERN __attribute__((visibility("default")))
#else
#define AIR_EXTERN
#endif

/* The version of these headers, as a string and as the number 0xMMmmpp
 * (a byte each for major, minor and patch, as LIBCURL_VERSION_NUM) for
 * preprocessor tests: #if AIR_VERSION_NUM >= 0x000200. air_version() is the
 * library's. */
#define AIR_VERSION_MAJOR 0
#define AIR_VERSION_MINOR 1
#define AIR_VERSION_PATCH 0
#define AIR_VERSION "0.1.0"
#define AIR_VERSION_NUM 0x000100

/* The library's version ("0.1.0"), static; compare with AIR_VERSION. */
AIR_EXTERN const char *air_version(void);

/* ---- errors -------------------------------------------------------------- */

/* One error enum; every failing call returns one of these (negative). */
typedef enum air_errno {
  AIR_OK = 0,
  AIR_ENOMEM = -1,    /* allocation failed */
  AIR_EINVAL = -2,    /* bad argument */
  AIR_ECONFIG = -3,   /* config did not load (details in the diagnostics) */
  AIR_ETOOBIG = -4,   /* a named limit was crossed */
  AIR_ECANCELED = -5, /* the caller cancelled */
  AIR_EUPSTREAM = -6, /* every attempt failed; the attempt log says why */
  AIR_ENOTFOUND = -7, /* unknown route, target or provider */
  AIR_EIO = -8,       /* file or socket I/O failed */
  AIR_EPARSE = -9,    /* input could not be parsed */
  AIR_ESTATE = -10,   /* call not allowed in the object's current state */
  AIR_ENOTSUP = -11,  /* the target cannot express the request (skipped) */
} air_errno;

/* Static, never NULL; "unknown error" for a value outside the enum (as
 * air_reason_name: every name or message function returns a static string,
 * never NULL). */
AIR_EXTERN const char *air_strerror(int err);

/* Optional detail for a failing call (the last argument, NULL allowed, of
 * every call that can fail for more than one reason): code and message on
 * failure, code 0 and "" on success. Config errors: FILE:LINE:COL in the
 * diagnostics. */
typedef struct air_error {
  int code;          /* the air_errno returned */
  char message[512]; /* human-readable, NUL-terminated */
} air_error;

/* ---- reasons ------------------------------------------------------------- */

/* Failure classes of docs/design.md §2.1. AIR_REASON_NONE means "not a
 * failure". */
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

/* "rate_limit", "timeout.first_chunk", ...; "none" for NONE; static, never
 * NULL: "unknown" for a value outside the enum (as air_strerror). */
AIR_EXTERN const char *air_reason_name(air_reason r);
/* Parses a reason name of n bytes. Returns 0 or AIR_ENOTFOUND. */
AIR_EXTERN int air_reason_from_name(const char *name, size_t n,
                                    air_reason *out);

/* Transport-level failure kinds an attempt reports (air_failure). */
typedef enum air_transport_err {
  AIR_TRANSPORT_OK = 0,
  AIR_TRANSPORT_CONNECT, /* refused, reset, DNS, TLS failure */
  AIR_TRANSPORT_CLOSED,  /* connection closed before a complete response */
  AIR_TRANSPORT_BADBODY, /* response body could not be decoded */
} air_transport_err;

/* ---- dialects ------------------------------------------------------------ */

/* The wire APIs airetry speaks to callers and upstreams (a provider's
 * `api:`): OpenAI chat completions, Anthropic messages, OpenAI Responses. */
typedef enum air_dialect {
  AIR_DIALECT_OPENAI,
  AIR_DIALECT_ANTHROPIC,
  AIR_DIALECT_OPENAI_RESPONSES
} air_dialect;

/* ---- headers ------------------------------------------------------------- */

/* A response header as received; not NUL-terminated. An attempt hands its
 * response headers over in air_failure (the engine reads Retry-After). */
typedef struct air_header {
  const char *name;
  size_t name_len;
  const char *value;
  size_t value_len;
} air_header;

/* ---- config -------------------------------------------------------------- */

typedef struct air_config air_config;

typedef enum air_severity { AIR_DIAG_ERROR, AIR_DIAG_WARNING } air_severity;

/* One config problem; valid only during the callback. */
typedef struct air_diag {
  air_severity severity;
  const char *file; /* the name given to the loader */
  int line;         /* 1-based; 0 when not tied to a place */
  int column;       /* 1-based */
  const char *message;
} air_diag;

typedef void (*air_diag_cb)(void *data, const air_diag *d);

/* Loads a YAML (or JSON) config of len bytes, every problem reported
 * through cb (may be NULL). 0 and *out (air_config_free) when there was no
 * error (warnings allowed); AIR_ECONFIG when there was; AIR_ETOOBIG over the
 * config size limit. name is for diagnostics only. */
AIR_EXTERN int air_config_parse(const char *name, const char *text, size_t len,
                                air_diag_cb cb, void *data, air_config **out);
/* Reads path and calls air_config_parse. AIR_EIO when it cannot be read
 * (reported through cb too, with the system's reason). */
AIR_EXTERN int air_config_load(const char *path, air_diag_cb cb, void *data,
                               air_config **out);
AIR_EXTERN void air_config_free(air_config *cfg);
/* Prints the resolved config (every default filled in) as YAML to file.
 * Returns 0, AIR_EINVAL (a NULL argument) or AIR_EIO (a write failed). */
AIR_EXTERN int air_config_dump(const air_config *cfg, FILE *file);
/* The listen address of the config ("127.0.0.1:8080" when unset). */
AIR_EXTERN const char *air_config_listen(const air_config *cfg);

/* ---- shared state (breakers, sticky routes) ------------------------------ */

/* Breaker, sticky and learned-style state shared by every request of one
 * process, thread-safe. It does not keep cfg (may be NULL): each run reads
 * the policy of its own config, so one state outlives a reload. With
 * state.redis in cfg it is shared with every process on that Redis node and
 * prefix (docs/design.md §3.1, docs/scale-out.md) by a thread of its own; no
 * call waits for Redis (docs/decisions.md: records of direct names are evicted
 * when idle). AIR_EINVAL, AIR_ENOMEM, AIR_EIO (no Redis thread). */
typedef struct air_state air_state;
AIR_EXTERN int air_state_new(const air_config *cfg, air_state **out,
                             air_error *err);
AIR_EXTERN void air_state_free(air_state *st);

typedef enum air_breaker_mode {
  AIR_BREAKER_CLOSED,
  AIR_BREAKER_OPEN,
  AIR_BREAKER_HALF_OPEN
} air_breaker_mode;

/* The breaker of target ("provider/model") at monotonic time now_ms. */
AIR_EXTERN air_breaker_mode air_state_breaker(air_state *st, const char *target,
                                              uint64_t now_ms);

/* ---- cancellation -------------------------------------------------------- */

/* A cancel token. air_cancel_trigger may be called from any thread at any
 * time; every wait on the token ends at once (the system clock's too). */
typedef struct air_cancel air_cancel;
AIR_EXTERN int air_cancel_new(air_cancel **out);
AIR_EXTERN void air_cancel_free(air_cancel *c);
AIR_EXTERN void air_cancel_trigger(air_cancel *c);
AIR_EXTERN bool air_cancel_is_set(const air_cancel *c);

/* ---- clock and randomness ------------------------------------------------ */

/* Time as the engine sees it: now_ms monotonic, wall_ms since the Unix
 * epoch; sleep waits ms or until cancel (may be NULL) fires: 1 when
 * cancelled (at once), 0 when the time passed. air_clock_system(): the real
 * clock (static, thread-safe; its sleep waits on a token); tests fake one. */
typedef struct air_clock {
  uint64_t (*now_ms)(void *data);
  uint64_t (*wall_ms)(void *data);
  int (*sleep)(void *data, uint64_t ms, air_cancel *cancel);
  void *data;
} air_clock;
AIR_EXTERN const air_clock *air_clock_system(void);

/* Random source: returns 64 uniformly random bits. */
typedef struct air_rng {
  uint64_t (*next)(void *data);
  void *data;
} air_rng;

/* ---- attempts ------------------------------------------------------------ */

/* One entry of the attempt log. Strings are owned by the log. */
typedef struct air_attempt {
  unsigned n;             /* 1-based attempt number */
  const char *target;     /* "provider/model" */
  air_reason reason;      /* NONE for the attempt that succeeded */
  int status;             /* HTTP status, 0 when none */
  const char *message;    /* failure message, "" when none */
  const char *request_id; /* upstream request id, "" when none */
  uint64_t start_ms;      /* monotonic time the attempt started */
  uint64_t ms;            /* duration of the attempt */
  uint64_t wait_ms;       /* wait before the next attempt (0 if none) */
  bool hint;              /* wait_ms came from a Retry-After hint */
  /* Outcome `skipped` (docs/design.md §2.1): the target cannot express the
   * request, nothing was sent. Such an entry is not numbered (n is 0),
   * reason is NONE and message says why; field names the field. It counts
   * towards no budget, rule max or breaker, nor x-airetry-attempts. */
  bool skipped;
  /* A hedge racer (docs/design.md §3.6): started beside an attempt still in
   * flight because that one had no content after hedge.after_ms. */
  bool hedge;
  bool hedge_lost;       /* outcome: another racer won (reason NONE, no breaker
                            verdict) */
  bool continuation;     /* asked for the rest of a committed answer (3.5) */
  bool prefill_rejected; /* its prefill got a 400: re-asked with instruct,
                            uncounted */
  const char *field;     /* skipped: the field; NULL otherwise */
  bool hedge_refill;     /* a hedge's retry or switch: a hedge not counted by
                            hedge.max */
} air_attempt;

/*
 * A failure reported by one attempt. Strings may be NULL; not retained.
 * size is the sizeof(air_failure) of whoever fills it, so that fields can be
 * appended (docs/api.md): the drivers set it on the record they hand an
 * attempt function; a caller of air_run_fail sets it (AIR_FAILURE_INIT) or
 * leaves it 0, which stands for this first version's fields. Another size
 * below this version's is AIR_EINVAL.
 */
typedef struct air_failure {
  size_t size;
  air_reason reason; /* NONE: classify from the fields below */
  int status;
  const char *type; /* body error type ("overloaded_error") */
  const char *code; /* body error code ("insufficient_quota") */
  const char *message;
  const char *request_id;
  air_transport_err transport;
  const air_header *headers; /* response headers, for Retry-After */
  size_t n_headers;
} air_failure;
#define AIR_FAILURE_INIT \
  { .size = sizeof(air_failure) }

/* How a target is asked for the rest of a cut answer (docs/design.md §3.5). */
typedef enum air_cont_style {
  AIR_CONT_NONE = 0, /* not continued on this target */
  AIR_CONT_PREFILL,  /* conversation ends with the assistant message (Anthropic)
                      */
  AIR_CONT_VLLM, /* continue_final_message: true, add_generation_prompt: false
                  */
  AIR_CONT_PREFIX_FLAG, /* prefix: true on the assistant message (DeepSeek,
                           Mistral) */
  AIR_CONT_INSTRUCT     /* a fixed user message after it asks to continue */
} air_cont_style;

/* ---- the engine: a sans-I/O run state machine ---------------------------- */

/*
 * One request's walk through its route. Feed it events with the current clock
 * values; each call returns the next action. The run never does I/O, never
 * reads a clock and never sleeps.
 *
 * Attempt ids: every attempt the run starts has an id (attempt_id, nonzero,
 * unique within the run; unlike the attempt number it is never reused, also
 * after a skipped target), and every event names the attempt it reports on,
 * because more than one attempt may be in flight (hedging) and a committed
 * answer may be followed by a continuation. An event for an unknown or
 * finished attempt id returns AIR_ESTATE and changes nothing.
 */
typedef struct air_run air_run;

typedef enum air_action_kind {
  AIR_ACT_ATTEMPT, /* start attempt attempt_id (number `attempt`) on `target` */
  AIR_ACT_WAIT,    /* wait wait_ms, then call air_run_wait_done */
  AIR_ACT_DONE,    /* success; the run is over */
  AIR_ACT_FAIL,    /* final failure with `reason`; the run is over */
  AIR_ACT_COMMIT,  /* release attempt attempt_id's content: it is the answer */
  AIR_ACT_CANCEL,  /* stop attempt attempt_id (a racer that lost, or the
                      WAIT that follows it); read with air_run_next */
  AIR_ACT_CONTINUE, /* continue the committed answer with attempt attempt_id
                       on `target`, asked in `style` (docs/design.md §3.5) */
  AIR_ACT_IDLE,     /* nothing to start: the other racers go on (a racer
                       dropped while others run; a hedge not possible) */
} air_action_kind;

/* air_action.flags */
#define AIR_ACTF_HEDGE 1u /* ATTEMPT: a hedge racer, beside the others */

typedef struct air_action {
  air_action_kind kind;
  unsigned attempt_id; /* every kind: the attempt it is about. ATTEMPT,
                          CONTINUE: the new one; WAIT: the failed one it
                          follows; COMMIT, CANCEL, DONE: that attempt;
                          FAIL: the last attempt (0 when none started) */
  const char *target;  /* ATTEMPT, CONTINUE, COMMIT: "provider/model"; valid as
                          long as the run */
  unsigned target_index; /* ATTEMPT, CONTINUE, COMMIT: index into the route's
                            targets */
  unsigned attempt;      /* ATTEMPT, CONTINUE, COMMIT: 1-based number */
  uint64_t
      deadline_ms; /* ATTEMPT: monotonic time the attempt must commit by;
                      CONTINUE: the rescue's end (its failure + max_gap_ms) */
  const char *override_json; /* ATTEMPT, CONTINUE: request fields to override
                                (JSON object) or NULL */
  uint64_t wait_ms;          /* WAIT */
  air_reason reason;         /* FAIL: the reason of the last failure */
  int status;                /* FAIL: the status of the last failure */
  uint64_t hedge_at_ms;      /* every kind: when to call air_run_hedge
                                (monotonic; 0: no hedge is due) */
  unsigned flags;            /* AIR_ACTF_* */
  air_cont_style style;      /* CONTINUE: how to ask; AIR_CONT_NONE otherwise */
} air_action;

/*
 * Starts a run for the route or "provider/model" named model. state may be
 * NULL (no breaker, no sticky). rng may be NULL (jitter then uses a
 * generator seeded from now_ms). Returns AIR_ENOTFOUND for an unknown model.
 * The config and state must outlive the run. Sets *act to the first ATTEMPT
 * (or FAIL when no target is usable).
 */
AIR_EXTERN int air_run_new(const air_config *cfg, air_state *state,
                           const char *model, const air_rng *rng,
                           uint64_t now_ms, air_run **out, air_action *act);
AIR_EXTERN void air_run_free(air_run *run);

/*
 * Attempt attempt_id failed. wall_ms is for HTTP-date Retry-After hints.
 * Before its commit the policy decides (ATTEMPT, WAIT or FAIL; IDLE when
 * other racers go on without it, docs/design.md §3.6); after it the failure is
 * final (FAIL), or continued (CONTINUE, or WAIT then CONTINUE) as 3.5 says.
 */
AIR_EXTERN int air_run_fail(air_run *run, unsigned attempt_id,
                            const air_failure *f, uint64_t now_ms,
                            uint64_t wall_ms, air_action *act);
/*
 * Content, in two events of different names so that they cannot be swapped:
 * air_run_first_part when an attempt's first content part arrives (it wins
 * a hedge race), air_run_ready_to_commit when that content may be released
 * (after holding and judging). A driver without racers may call only the
 * second.
 *
 * Attempt attempt_id received its first content part (before any holding
 * or judging): it wins the race. Returns CANCEL for a racer that lost (more
 * through air_run_next), or IDLE when no other racer is in flight.
 */
AIR_EXTERN int air_run_first_part(air_run *run, unsigned attempt_id,
                                  uint64_t now_ms, air_action *act);
/*
 * Attempt attempt_id has content ready for the caller (its first content
 * part, or in complete mode its judged answer). The engine decides: COMMIT
 * attempt_id (release it; from now on its failure is final), and with
 * hedging CANCEL for a racer. Release nothing before COMMIT. A half-open
 * probe's breaker verdict (success) is given here. A continuation's too.
 */
AIR_EXTERN int air_run_ready_to_commit(air_run *run, unsigned attempt_id,
                                       uint64_t now_ms, air_action *act);
/*
 * Hedging (docs/design.md §3.6). Every action carries hedge_at_ms: the time the
 * newest racer, still without content, reaches hedge.after_ms. Call
 * air_run_hedge then: ATTEMPT (flag AIR_ACTF_HEDGE) on the next eligible
 * target beside the racers in flight, or IDLE when none may start (hedge
 * max, budget, total_ms, breakers, max_prompt_bytes). Before, IDLE too.
 */
AIR_EXTERN int air_run_hedge(air_run *run, uint64_t now_ms, air_action *act);
/*
 * The actions that follow the one an event returned: CANCEL for each racer
 * that lost, after a COMMIT, DONE, FAIL or a CANCEL of air_run_first_part.
 * Returns 1 and sets *act while one is pending, 0 when none is (the next
 * event drops the ones not read).
 */
AIR_EXTERN int air_run_next(air_run *run, air_action *act);
/* Attempt attempt_id succeeded (finished; committed or not): DONE. */
AIR_EXTERN int air_run_succeed(air_run *run, unsigned attempt_id,
                               uint64_t now_ms, air_action *act);
/* The WAIT that followed attempt attempt_id ended: the next ATTEMPT or
 * CONTINUE (or FAIL when total_ms, or after commit max_gap_ms, has passed). */
AIR_EXTERN int air_run_wait_done(air_run *run, unsigned attempt_id,
                                 uint64_t now_ms, air_action *act);
/* Continuation limits found in the request or the released answer, ORed in
 * for good (3.5). AIR_EINVAL for run NULL. */
#define AIR_CONTF_NEVER 1u /* nothing may be continued any more */
/* a JSON schema was asked: no INSTRUCT target */
#define AIR_CONTF_NO_INSTRUCT 2u
AIR_EXTERN int air_run_limit_continuation(air_run *run, unsigned flags);
/* Continuation attempt_id (PREFILL) got the 400 that rejects a prefill:
 * with continuation.instruct, once per target and request, CONTINUE there
 * with INSTRUCT (uncounted, learned for 24 h); else as air_run_fail with
 * bad_request. */
AIR_EXTERN int air_run_prefill_rejected(air_run *run, unsigned attempt_id,
                                        uint64_t now_ms, air_action *act);
/* The caller cancelled the request (every attempt of it): FAIL with
 * AIR_REASON_ABORTED, in any phase; AIR_ESTATE once the run is over. */
AIR_EXTERN int air_run_cancel(air_run *run, uint64_t now_ms, air_action *act);

/* The attempt log so far; entries valid until the run is freed. */
AIR_EXTERN size_t air_run_attempt_count(const air_run *run);
AIR_EXTERN const air_attempt *air_run_attempt(const air_run *run, size_t i);

#ifdef __cplusplus
}
#endif
#endif
