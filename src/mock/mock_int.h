/*
 * `airetry mock` (docs/mock.md): an OpenAI- and Anthropic-compatible fake
 * provider that misbehaves on purpose.
 *
 *   behaviour.c  the behaviour model: script loading (YAML, diagnostics with
 *                line:column), the choice of a behaviour per attempt, the
 *                log's fault description. Pure.
 *   convention.c the model-name convention: a behaviour chosen by the
 *                model name ("NAME@tok@tok..."). Pure.
 *   answer.c     the answer's tokens, prefill, and the bytes of streamed and
 *                whole answers and error bodies in either dialect. Pure.
 *   log.c        the attempt log and the per-model attempt counters. Pure.
 *   mock.c       the server glue on src/http: routing, one state machine
 *                (one uv timer) per response, disconnects, shutdown.
 *
 * Everything runs on one uv loop; nothing here is thread-safe. mock.h is
 * what the CLI sees (script, server, stream reader); this file is the rest.
 */
#ifndef AIR__MOCK_INT_H
#define AIR__MOCK_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "airetry.h"
#include "arena.h"
#include "buf.h"
#include "mock.h"
#include "policy.h"
#include "trace.h"

/* ---- named maxima (docs/mock.md "Limits") -------------------------------- */

#define AIR__MOCK_MAX_LOG 100000u       /* log entries kept; oldest dropped */
#define AIR__MOCK_MAX_MODELS 100000u    /* model names counted since reset */
#define AIR__MOCK_MAX_MODEL_BYTES 1024u /* a request's model name */
#define AIR__MOCK_MAX_LOG_MODEL_BYTES                                        \
  256u                                    /* a model name as kept in the log \
                                           */
#define AIR__MOCK_MAX_SCRIPT_MODELS 4096u /* entries under models: */
#define AIR__MOCK_MAX_ATTEMPTS 10000u     /* behaviours in one attempts: list */
#define AIR__MOCK_MAX_HEADERS 32u         /* headers: of one behaviour */
#define AIR__MOCK_MAX_TOKENS 100000u      /* tokens: N */
#define AIR__MOCK_MAX_TEXT_BYTES 65536u   /* answer:, refusal:, body:, code: */
#define AIR__MOCK_MAX_MS 86400000u        /* every *_ms / delay (one day) */
#define AIR__MOCK_MAX_COUNT 1000000u      /* cut_after, stall_after, ... */
#define AIR__MOCK_MAX_FLAP_MS 1000000000000ull
#define AIR__MOCK_MAX_PREFILL_BYTES (1u << 20)
#define AIR__MOCK_QUEUE_HIGH (256u << 10) /* unsent bytes: pause the stream */
#define AIR__MOCK_DEFAULT_TOKENS 8u
#define AIR__MOCK_MAX_TOOL_CALLS 64u /* tool_calls: N (codecs track 128) */
#define AIR__MOCK_TOOL_NAME "get_weather"
#define AIR__MOCK_MAX_SCHEMA_DEPTH 32u /* nesting followed in a schema */
#define AIR__MOCK_EMBED_DIMS 16u       /* embedding length by default */
#define AIR__MOCK_MAX_EMBED_DIMS 4096  /* dimensions: N */
#define AIR__MOCK_MAX_EMBED_INPUTS          \
  2048u /* inputs of one embeddings request \
         */
#define AIR__MOCK_MAX_WHOLE_BYTES (32u << 20) /* an embeddings / count body */
#define AIR__MOCK_MAX_REPEAT_CHARS 65536u     /* repeat_chars: N */
#define AIR__MOCK_DEFAULT_REPEAT_CHARS 40u
/* instruct_message in the log */
#define AIR__MOCK_MAX_LOG_INSTRUCT_BYTES 256u
#define AIR__MOCK_PREAMBLE "Sure, continuing: "
#define AIR__MOCK_DIVERGED " (diverged)"
/* Anthropic's 400 for a trailing assistant message (newer models). */
#define AIR__MOCK_PREFILL_REJECTED                          \
  "This model does not support assistant message prefill. " \
  "The conversation must end with a user message."
#define AIR__MOCK_REFUSAL_TEXT \
  "I'm sorry, but I cannot assist with that request."

/* ---- the behaviour model (behaviour.c) ----------------------------------- */

/* One bit per behaviour key: which keys a layer sets (see air__mock_merge). */
enum {
  AIR__MOCK_K_STATUS = 1u << 0,
  AIR__MOCK_K_BODY = 1u << 1,
  AIR__MOCK_K_CODE = 1u << 2,
  AIR__MOCK_K_RETRY_AFTER = 1u << 3,
  AIR__MOCK_K_RETRY_AFTER_MS = 1u << 4,
  AIR__MOCK_K_HEADERS = 1u << 5,
  AIR__MOCK_K_RESET = 1u << 6,
  AIR__MOCK_K_HANG = 1u << 7,
  AIR__MOCK_K_HEADERS_DELAY = 1u << 8,
  AIR__MOCK_K_FIRST_DELAY = 1u << 9,
  AIR__MOCK_K_CUT = 1u << 10,
  AIR__MOCK_K_STALL = 1u << 11,
  AIR__MOCK_K_MALFORMED = 1u << 12,
  AIR__MOCK_K_NO_DONE = 1u << 13,
  AIR__MOCK_K_REFUSAL = 1u << 14,
  AIR__MOCK_K_FINISH = 1u << 15,
  AIR__MOCK_K_OVERLOAD = 1u << 16,
  AIR__MOCK_K_TOKENS = 1u << 17,
  AIR__MOCK_K_DELAY = 1u << 18,
  AIR__MOCK_K_ANSWER = 1u << 19,
  AIR__MOCK_K_REJECT_PREFILL = 1u << 20,
  AIR__MOCK_K_TOOL_CALLS = 1u << 21,
  AIR__MOCK_K_JSON = 1u << 22,
  AIR__MOCK_K_REASONING = 1u << 23,
  AIR__MOCK_K_CONTINUE_AS = 1u << 24,
  AIR__MOCK_K_REPEAT_CHARS = 1u << 25,
  AIR__MOCK_K_TOOL_TEXT = 1u << 26,
};

/* continue_as (docs/mock.md "Continuation"): how a recognised continuation
 * is answered. */
typedef enum air__mock_cont_as {
  AIR__MOCK_CONT_EXACT = 0, /* the remainder after the prefill */
  AIR__MOCK_CONT_RESTART,   /* the whole answer again */
  AIR__MOCK_CONT_REPEAT,    /* the prefill's last repeat_chars, remainder */
  AIR__MOCK_CONT_PREAMBLE,  /* AIR__MOCK_PREAMBLE, then the remainder */
  AIR__MOCK_CONT_DIVERGE    /* a restart that leaves the prefill halfway */
} air__mock_cont_as;

/* The name of a continue_as value ("exact", "restart", ...). */
const char *air__mock_cont_as_name(unsigned v);

typedef struct air__mock_header {
  const char *name;
  const char *value;
} air__mock_header;

/*
 * A behaviour: what one response does. `set` says which keys were given;
 * a key whose bit is clear is "not given" whatever its field holds. Strings
 * are borrowed (from the script's arena or a parsed model name) and
 * NUL-terminated. `{}` (set == 0) is healthy.
 */
typedef struct air__mock_beh {
  uint32_t set;
  int status;              /* 400..599 */
  const char *body;        /* replaces the error body */
  const char *code;        /* OpenAI error.code */
  const char *retry_after; /* header value as written: "1", "0.5" */
  const char *retry_after_ms;
  const air__mock_header *headers;
  size_t n_headers;
  bool reset, hang, no_done, reject_prefill;
  bool tool_text; /* tool calls: the answer's text before them */
  uint64_t headers_delay_ms, first_delay_ms, delay_ms;
  uint32_t cut_after, stall_after, malformed_at, overload_after;
  uint32_t tokens;
  const char *refusal;   /* the refusal text; NULL: no refusal */
  bool refusal_native;   /* refusal: native (delta.refusal / stop reason) */
  bool json;             /* the answer text is a JSON object */
  uint32_t tool_calls;   /* > 0: the answer is that many tool calls */
  uint32_t reasoning;    /* reasoning deltas before the answer */
  uint32_t continue_as;  /* an air__mock_cont_as */
  uint32_t repeat_chars; /* continue_as repeat: bytes sent again */
  air_finish finish;     /* STOP, LENGTH or CONTENT_FILTER */
  const char *answer;
} air__mock_beh;

/* Which of a model's selection parts were given (for the defaults merge). */
enum {
  AIR__MOCK_M_ATTEMPTS = 1u << 0,
  AIR__MOCK_M_THEN = 1u << 1,
  AIR__MOCK_M_FAULT = 1u << 2,
};

/*
 * A model's behaviours. For attempt A at time T (ms since reset) the
 * behaviour is, later layers overriding earlier ones key by key:
 *   base, then attempts[A-1] (A <= n_attempts) or `then`, then `fault`
 *   when has & FAULT, (fault_k == 0 or A <= fault_k) and (no window or
 *   from_ms <= T < to_ms).
 * A script's `flap:` is a fault with a window; the model-name convention's
 * faults are a fault with `k=` and `flap=` limits.
 */
typedef struct air__mock_model {
  const char *name;
  uint32_t has; /* AIR__MOCK_M_* */
  air__mock_beh base;
  const air__mock_beh *attempts;
  size_t n_attempts;
  air__mock_beh then;
  air__mock_beh fault;
  uint32_t fault_k; /* 0: every attempt */
  bool window;
  uint64_t from_ms, to_ms;
} air__mock_model;

/* A loaded script: models sorted by name; defaults already merged in. */
struct air__mock_script {
  air__arena arena;
  air__mock_model defaults;
  air__mock_model *models;
  size_t n_models;
};

/* The script's merged entry for exactly this model name, or NULL. */
const air__mock_model *air__mock_script_find(const air__mock_script *s,
                                             const char *name, size_t n);

/* A non-negative decimal number with an optional fraction (1, 0.5, 30), as
 * retry_after takes it in a script and in a model name. */
bool air__mock_is_number(const char *s, size_t n);

/*
 * The model-name convention (docs/mock.md, convention.c): "NAME@tok@tok...".
 * storage
 * receives a copy of the name (at least n + 1 bytes) that *out's strings
 * point into; it must outlive *out. A name without '@' gives a model with
 * nothing set. Returns 0, or AIR_EINVAL with a message naming the bad token
 * in diag->message (line and column 0).
 */
int air__mock_parse_name(const char *name, size_t n, char *storage,
                         air__mock_model *out, air__mock_diag *diag);

/* Layers `top` over `*b`: every key set in top replaces b's. */
void air__mock_merge(air__mock_beh *b, const air__mock_beh *top);

/* Returns `under` with `over` merged over it (see air__mock_model), for
 * script defaults under an entry or a convention model. */
air__mock_model air__mock_model_merge(const air__mock_model *under,
                                      const air__mock_model *over);

/* The behaviour of attempt (1-based) at t_ms since reset. */
void air__mock_select(const air__mock_model *m, unsigned attempt, uint64_t t_ms,
                      air__mock_beh *out);

/* The log's "fault" string for a behaviour as applied ("ok", "status=429",
 * "status=429,retry_after=1", "cut_after=3", ...). Returns 0 or a buf error. */
int air__mock_describe(const air__mock_beh *b, air__buf *out);

/* ---- the answer (answer.c) ----------------------------------------------- */

/*
 * The tokens of an answer: text holds them back to back, ends[i] is the
 * end offset of token i. Tokens [first, last) are the ones sent.
 */
/* One content event of an answer: a part whose strings live in the
 * answer's text (offsets, valid once the answer is built). */
typedef struct air__mock_ev {
  air_part_kind kind;    /* TEXT, REASONING, REFUSAL, TOOL_START, TOOL_DELTA */
  int index;             /* tool call index */
  size_t off, len;       /* text / tool arguments piece */
  size_t id_off, id_len; /* TOOL_START: the call id */
} air__mock_ev;

typedef struct air__mock_answer {
  air__buf text;
  size_t *ends;
  size_t n;
  size_t first; /* the first token sent (may be cut: from_off) */
  size_t last;
  size_t from_off;  /* the byte of text where sending starts */
  bool prefill;     /* a continuation of this answer was recognised */
  unsigned cont_as; /* how it is answered (air__mock_cont_as) */
  /* One inserted content event (preamble, diverged): ins_len bytes at
   * ins_off of text, sent before token ins_at; ins_len 0: none. */
  size_t ins_off, ins_len, ins_at;
  /* The content events, in order (air__mock_answer_events). */
  air__mock_ev *ev;
  size_t n_ev;
  air_finish finish; /* the finish of the whole answer */
  /* json with a forced tool (docs/mock.md): the answer is one call of that
   * tool, its name and arguments (the schema's instance) in text. */
  bool forced;
  size_t fname_off, fname_len, fargs_off, fargs_len;
} air__mock_answer;

void air__mock_answer_init(air__mock_answer *a);
void air__mock_answer_cleanup(air__mock_answer *a);

/*
 * Builds the answer of behaviour b for model (m_n bytes): the refusal text,
 * else `answer`, else the canonical "[M] w1 ... wN", split into tokens at
 * spaces (each space kept in front of its word); a `length` finish keeps
 * half the tokens (at least one). prefill (p_n bytes, may be NULL): the
 * assistant text a request asks to continue; when non-empty and a prefix of
 * the whole answer (a proper prefix when instruct), a->prefill is set and
 * sending follows b's continue_as (docs/mock.md "Continuation"): exact
 * starts at the byte after the prefix. Returns 0, AIR_ENOMEM or
 * AIR_ETOOBIG.
 */
int air__mock_answer_build(air__mock_answer *a, const char *model, size_t m_n,
                           const air__mock_beh *b, const char *prefill,
                           size_t p_n, bool instruct, const json_t *req);

/*
 * The content events of a built answer for dialect api (docs/mock.md "Answer
 * shapes"): `reasoning` REASONING parts, then either the tool calls (OpenAI:
 * every TOOL_START, then the arguments' pieces interleaved by index;
 * Anthropic: each call's start and pieces together), or a native refusal
 * (OpenAI: REFUSAL parts; Anthropic: nothing), or the TEXT tokens
 * [first, last). Sets a->finish. Returns 0, AIR_ENOMEM or AIR_ETOOBIG.
 */
int air__mock_answer_events(air__mock_answer *a, const air__mock_beh *b,
                            air_dialect api);

/* Event i of a as a part (strings point into a->text; tool name
 * AIR__MOCK_TOOL_NAME). */
air_part air__mock_answer_part(const air__mock_answer *a, size_t i);

/* The Anthropic signature_delta closing thinking block `block`. */
int air__mock_signature_event(int block, air__buf *out);

/*
 * A minimal instance of a JSON schema (required properties with values by
 * type: string "x" or the first enum value, number 1, boolean true, arrays
 * of one item, nested objects), with ", " and ": " separators, into out.
 */
int air__mock_schema_instance(const json_t *schema, air__buf *out);

/*
 * The text of a trailing assistant message of a parsed request body (its
 * string content, or its text parts / blocks joined) into out. Returns 1
 * when there is one, 0 when the last message is not an assistant message
 * with text, or a buf error.
 */
int air__mock_prefill_text(const json_t *body, air__buf *out);

/* The continuation styles a request may carry (docs/mock.md). */
typedef enum air__mock_style {
  AIR__MOCK_STYLE_NONE = 0,
  AIR__MOCK_STYLE_PREFILL,
  AIR__MOCK_STYLE_VLLM,
  AIR__MOCK_STYLE_PREFIX_FLAG,
  AIR__MOCK_STYLE_INSTRUCT
} air__mock_style;

/* "prefill", "vllm", "prefix_flag", "instruct"; NULL for NONE. */
const char *air__mock_style_name(air__mock_style s);

/* What a request asks to continue. */
typedef struct air__mock_cont {
  air__mock_style style;
  air__buf text; /* P: the assistant text (max AIR__MOCK_MAX_PREFILL_BYTES) */
  air__buf message; /* INSTRUCT: the user message's text (first
                       AIR__MOCK_MAX_LOG_INSTRUCT_BYTES bytes) */
  bool has_max_tokens;
  uint64_t max_tokens;
} air__mock_cont;

void air__mock_cont_init(air__mock_cont *c);
void air__mock_cont_cleanup(air__mock_cont *c);

/*
 * Reads a parsed request body of dialect api (chat / Anthropic `messages`,
 * Responses `input`) into c: the style of its last messages (a trailing
 * assistant message with text: PREFILL, or for chat VLLM with
 * continue_final_message: true, PREFIX_FLAG with "prefix": true on it; a
 * user message after an assistant message with text: INSTRUCT, which the
 * caller confirms only when that text fits the answer), the assistant
 * text and max_tokens. Returns 0 or a buf error (AIR_ETOOBIG: the
 * assistant text is too long; the style is then NONE).
 */
int air__mock_read_continuation(const json_t *body, air_dialect api,
                                air__mock_cont *c);

/* The error "type" of an HTTP status (docs/mock.md table). */
const char *air__mock_error_type(int status);

/* An error body in the dialect for status (code: OpenAI error.code or
 * NULL; message NULL: the status's default message). */
int air__mock_error_body(air_dialect api, int status, const char *code,
                         const char *message, air__buf *out);

/* A mid-stream overloaded_error event in the dialect. */
int air__mock_overload_event(air_dialect api, air__buf *out);

/* A malformed event in the dialect (bytes that do not decode). */
int air__mock_malformed_event(air_dialect api, air__buf *out);

/* ---- answers without a stream (embed.c) ---------------------------------- */

/*
 * The body of an OpenAI embeddings answer for a parsed request (docs/mock.md
 * "Embeddings"): one deterministic unit vector per input, `dimensions` long
 * (default AIR__MOCK_EMBED_DIMS), as numbers or base64 (`encoding_format`).
 * Returns 0, AIR_EINVAL with *err naming the bad field (a 400), or a buf
 * error with *err set.
 */
int air__mock_embeddings(const json_t *req, const char *model, size_t m_n,
                         air__buf *out, const char **err);

/* The body of an Anthropic count_tokens answer, {"input_tokens": N}, N
 * from the bytes of system, messages and tools (docs/mock.md). Returns as
 * air__mock_embeddings. */
int air__mock_count_tokens(const json_t *req, air__buf *out, const char **err);

/* ---- the log (log.c) ------------------------------------------------------
 */

typedef struct air__mock_entry {
  uint64_t id; /* unique for the process: finds it again */
  uint64_t t_ms;
  char *model; /* owned, at most AIR__MOCK_MAX_LOG_MODEL_BYTES */
  unsigned attempt;
  air_dialect api;
  bool stream;
  char *fault; /* owned */
  int status;
  bool hung_up;
  uint64_t hung_up_ms;
  bool ended;
  uint64_t end_ms;
  const char *endpoint; /* static: "embeddings", "count_tokens"; NULL: chat */
  /* what the request asked to continue (docs/mock.md "Continuation") */
  const char *continuation; /* static style name; NULL: none */
  bool continued;           /* the mock continued its answer */
  uint64_t continued_at;    /* where (bytes of the answer) */
  uint64_t assistant_bytes;
  char *instruct_message; /* owned; NULL: none */
  bool has_max_tokens;
  uint64_t max_tokens;
  /* the request's W3C traceparent, "" when none (or longer than a
   * version-00 one) */
  char traceparent[AIR__TRACEPARENT_LEN + 1];
} air__mock_entry;

typedef struct air__mock_count {
  char *name; /* owned; NULL: empty slot */
  unsigned n;
} air__mock_count;

/*
 * Every attempt since the last reset, oldest first, in a ring of at most
 * AIR__MOCK_MAX_LOG entries (past it the oldest is dropped and counted), and
 * the attempt counter of each model name.
 */
typedef struct air__mock_log {
  air__mock_entry *ring;
  size_t cap, head, n;
  uint64_t next_id;
  uint64_t dropped;
  air__mock_count *counts;
  size_t counts_cap, counts_n;
} air__mock_log;

void air__mock_log_init(air__mock_log *l);
void air__mock_log_cleanup(air__mock_log *l);
/* Forgets every entry and counter (entry ids are never reused). */
void air__mock_log_reset(air__mock_log *l);

/*
 * Counts one more attempt of model (n bytes) and returns its number
 * (1-based) in *attempt. AIR_ETOOBIG when AIR__MOCK_MAX_MODELS names are
 * already counted; AIR_ENOMEM.
 */
int air__mock_log_count(air__mock_log *l, const char *model, size_t n,
                        unsigned *attempt);

/* Appends an entry (model and fault are copied, the model cut to
 * AIR__MOCK_MAX_LOG_MODEL_BYTES) and returns it; NULL when out of memory.
 * The pointer is valid until the next add or reset; keep e->id. */
air__mock_entry *air__mock_log_add(air__mock_log *l, uint64_t t_ms,
                                   const char *model, size_t model_n,
                                   unsigned attempt, air_dialect api,
                                   bool stream, const char *fault);

/* Records what the request of e asked to continue (docs/mock.md
 * "Continuation"): style (static, NULL: none), whether the mock continued
 * (then continued_at = assistant_bytes), the instruct message (copied, cut
 * to AIR__MOCK_MAX_LOG_INSTRUCT_BYTES; NULL: none) and max_tokens. Out of
 * memory leaves the message null. */
void air__mock_log_continuation(air__mock_entry *e, const char *style,
                                bool continued, size_t assistant_bytes,
                                const air__buf *message, bool has_max_tokens,
                                uint64_t max_tokens);

/* The entry with id, or NULL when it was reset or dropped. */
air__mock_entry *air__mock_log_find(air__mock_log *l, uint64_t id);

/* The log as docs/mock.md's JSON into out. */
int air__mock_log_json(const air__mock_log *l, air__buf *out);

#endif
