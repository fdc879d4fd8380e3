/*
 * The codec's face (docs/design.md §1, 2, 5): caller requests, the dialect ops
 * table and the hub that translates through the canonical request
 * (canon.h). One folder per dialect (openai_chat/, openai_responses/,
 * anthropic/) fills an air__dialect_ops: decode its caller requests into
 * canonical form, encode canonical form into its upstream request, decode
 * its upstream events and bodies into parts, encode parts for a caller of
 * its dialect. No file knows two dialects; what they share (JSON builders,
 * value helpers, decode wrappers) lives once beside this header
 * (codec_text.h, codec_json.h, codec_decode.h). Codecs know nothing about
 * retries. Adding a dialect is one folder and one line of the table in
 * dialects.c (docs/architecture.md). This header carries no JSON library
 * type.
 */
#ifndef AIR__DIALECT_H
#define AIR__DIALECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airetry.h"
#include "buf.h"
#include "limits.h"
#include "policy.h"
#include "sse.h"

/* ---- requests --------------------------------------------------------------
 */

struct air__canon;

/*
 * A caller's request, validated once. Its JSON object is either the text
 * (raw, from the fast validator of request_text.c) with the codec's tree
 * built on first use, or only the tree (the slow path). The canonical form
 * is built on the first translation and kept for the request's next
 * attempts (air__request_canon).
 */
typedef struct air__request {
  air_dialect dialect;      /* the dialect the caller spoke */
  void *tree;               /* the codec's parsed JSON object (owned, private to
                               src/codec), or NULL until needed */
  struct air__canon *canon; /* the canonical form (owned), NULL until
                          needed */
  char *raw; /* the body's text, NUL-terminated (owned), or NULL */
  size_t raw_n;
  const char *model;  /* the "model" (borrowed from raw or body) */
  bool stream;        /* the caller asked for a stream */
  bool include_usage; /* OpenAI: stream_options.include_usage was true */
  bool json_response; /* OpenAI response_format json_object / json_schema */
} air__request;

/*
 * Parses a caller body of the given dialect. Checks it is a JSON object with
 * a string "model" and an array "messages" of objects, and that the known
 * fields have the right types (stream bool, max_tokens positive integer,
 * temperature number, ...). On error returns AIR_EPARSE (not JSON) or
 * AIR_EINVAL and writes a message naming the field into err->message, e.g.
 * "messages: expected an array".
 */
int air__request_parse(air_dialect dialect, const char *body, size_t n,
                       air__request *out, air_error *err);
/* The same, always with jansson (the path every error message comes from). */
int air__request_parse_tree(air_dialect dialect, const char *body, size_t n,
                            air__request *out, air_error *err);
void air__request_cleanup(air__request *r);

/* Known top-level fields of a dialect and their types (null always passes). */
typedef enum air__field_type {
  AIR__F_BOOL,
  AIR__F_INT_POS,
  AIR__F_NUMBER,
  AIR__F_STRING,
  AIR__F_ARRAY,
  AIR__F_OBJECT,
  AIR__F_STR_OR_ARRAY,
  AIR__F_STR_OR_OBJ
} air__field_type;
typedef struct air__field_rule {
  const char *name;
  air__field_type type;
} air__field_rule;
const air__field_rule *air__field_rules(air_dialect dialect, size_t *n);

/*
 * request_text.c. air__request_fast validates body without jansson and
 * fills out (then true), or returns false when it cannot be sure the body
 * is valid; air__request_parse then decides with jansson.
 */
bool air__request_fast(air_dialect dialect, const char *body, size_t n,
                       air__request *out);

/* One member to set in a same-dialect upstream body. */
typedef enum air__patch_how {
  AIR__PATCH_SET,           /* value replaces the caller's, or is added */
  AIR__PATCH_DEFAULT,       /* only where the caller's is missing or null */
  AIR__PATCH_STREAM_OPTIONS /* the caller's object with include_usage: true */
} air__patch_how;
typedef struct air__patch {
  const char *key;
  const char *value; /* JSON text (not for STREAM_OPTIONS) */
  air__patch_how how;
} air__patch;
/* Appends req's text (it must have raw) with the members of set (at most
 * 8) replaced in place or appended in order. Returns 0 or a buf error
 * (then out is as it was). */
int air__request_patch(const air__request *req, const air__patch *set,
                       size_t n_set, air__buf *out);

typedef struct air__build_opts {
  const char *model;           /* the upstream model name */
  const char *override_json;   /* a JSON object of fields to set, or NULL */
  bool drop_params;            /* cross-dialect: drop fields the API lacks */
  uint32_t default_max_tokens; /* used where Anthropic needs max_tokens */
  air__structured structured_output; /* how a schema is asked (Anthropic) */
  bool other_provider; /* the target is not the provider that keeps the
                          caller's state (a Responses route's first
                          openai_responses target: docs/decisions.md) */
  bool *json_tool;     /* when not NULL: set true when the upstream
                          body forces the JSON tool, whose input the
                          decoder gives back as text (decoder's
                          json_tool) */
} air__build_opts;

/* The forced tool that carries a JSON schema to a target without native
 * structured output (structured_output: tool). */
#define AIR__JSON_TOOL "json_output"

/* ---- decoding
 * ---------------------------------------------------------------- */

typedef int (*air__part_cb)(void *data, const air_part *p);

/* ---- identifiers
 * ----------------------------------------------------------------
 *
 * An upstream's id, model name and tool call ids are cosmetic: kept whole
 * up to AIR__MAX_IDENT_BYTES, and past it replaced, never a failure: the
 * answer's id by the gateway's (the request id in the caller dialect's id
 * form), the model by the answering target's, a tool call id by
 * air__tool_id_sub (the same replacement for the same id, so every place
 * of the answer that names the call agrees). The aggregate and the
 * encoders replace them as parts come in (air__ident_fix); the upstream's
 * own bytes forwarded in passthrough are not rewritten. A finish reason
 * over AIR__MAX_FINISH_REASON_BYTES or a tool name over
 * AIR__MAX_TOOL_NAME_BYTES carries meaning: the decoders set
 * air__decoder.fatal and the attempt fails as malformed.
 */

#define AIR__IDENT_ID 1u      /* the answer's id was replaced */
#define AIR__IDENT_MODEL 2u   /* its model name */
#define AIR__IDENT_TOOL_ID 4u /* a tool call id */

/* What replaces identifiers over the limit, and what was replaced. */
typedef struct air__idents {
  const char *id;    /* the answer's id instead (NUL-terminated, borrowed);
                        NULL: the caller dialect's default id */
  const char *model; /* the model name instead (borrowed); NULL: "" */
  unsigned replaced; /* AIR__IDENT_* bits, accumulated */
} air__idents;

/* "call_airetry_" and 16 hex digits, and the NUL. */
#define AIR__TOOL_ID_SUB_BYTES 30
/* The replacement of tool call id (id, n): "call_airetry_" and 16 hex
 * digits of a 64-bit hash of it, NUL-terminated in out. */
void air__tool_id_sub(const char *id, size_t n,
                      char out[AIR__TOOL_ID_SUB_BYTES]);
/* p, or, when p is a START or TOOL_START with an identifier over
 * AIR__MAX_IDENT_BYTES, tmp: a copy of p with it replaced (see above; a
 * tool call id into buf), the replacement recorded in s->replaced. tmp and
 * buf must outlive the use of the result. */
const air_part *air__ident_fix(const air_part *p, air__idents *s, air_part *tmp,
                               char buf[AIR__TOOL_ID_SUB_BYTES]);
/* air__decoder.fatal's descriptions (the caller's error message). */
#define AIR__OVER_FINISH "a finish reason over the gateway's limit"
#define AIR__OVER_TOOL_NAME "a tool name over the gateway's limit"
/* The replaced identifiers' names ("id,model,tool_id"), or "" for none. */
const char *air__ident_names(unsigned replaced);

#define AIR__DECODER_MAX_TOOLS 128 /* tool calls tracked in one response */

/* Per-attempt decoder state. Init with the ops' decoder_init, free with
 * air__decoder_cleanup. */
typedef struct air__decoder {
  air_dialect api;
  unsigned malformed;    /* events that could not be decoded (skipped) */
  bool started;          /* START was emitted */
  bool done;             /* the terminator arrived ([DONE] / message_stop) */
  bool finished;         /* a FINISH part was emitted */
  bool usage_only;       /* the last event carried only usage (OpenAI) */
  bool terminator;       /* the last event was the terminator */
  bool error_event;      /* the last event was an error event */
  bool oom;              /* the last event could not be decoded for want of
                             memory: never a malformed event to skip (the
                             attempt fails), set by air__decoder_note_oom */
  bool server_tool;      /* the last event was a server-tool event (Anthropic
                            server tools, Responses built-in tool calls):
                            progress for chunk_ms, with no parts */
  bool json_tool;        /* set by the caller after init: the request forced
                            AIR__JSON_TOOL, whose input is the answer's text (and
                            its tool_use stop a plain stop) */
  bool json_seen;        /* such a tool block was seen */
  const char *fatal;     /* set when an event or body carried a field whose
                            meaning cannot be kept (a finish reason or tool
                            name over its limit: "identifiers" above): a
                            static description; the event yielded nothing
                            and the attempt fails as malformed */
  uint64_t input_tokens; /* running totals (Anthropic usage is cumulative) */
  uint64_t output_tokens;
  air__buf scratch; /* unescaped strings handed out in parts */
  air__buf scratch2;
  /* Anthropic: the kind of each open content block, by block index, and the
   * tool ordinal of tool_use blocks (OpenAI-style tool index).
   * OpenAI: block_kind[i] != 0 once TOOL_START was emitted for tool index i
   * (a repeated id/name for that index yields no second TOOL_START). */
  unsigned char block_kind[AIR__DECODER_MAX_TOOLS];
  int block_tool[AIR__DECODER_MAX_TOOLS];
  int n_tools;
} air__decoder;

void air__decoder_cleanup(air__decoder *d);
/* After an event: notes in d->oom whether an allocation failed while it was
 * decoded (rc: what parsing or an append returned, or 0; the scratch
 * buffers' sticky errors are read too). */
void air__decoder_note_oom(air__decoder *d, int rc);

/* ---- aggregation (non-streaming callers)
 * ------------------------------------- */

typedef struct air__tool_call {
  char *id;
  char *name;
  air__buf args;
} air__tool_call;

/* One attempt's parts gathered into a message. */
typedef struct air__aggregate {
  air__buf id;
  air__buf model;
  air__buf text;
  air__buf reasoning;
  air__buf refusal;
  air__tool_call *tools;
  size_t n_tools;
  air_finish finish;
  air__buf finish_raw;
  uint64_t input_tokens;
  uint64_t output_tokens;
  bool has_usage;
  uint64_t created; /* OpenAI "created" (seconds) for encode_response, set
                       by the caller (aggregate_init leaves 0) */
  /* A continued answer (docs/design.md §3.5): the members of the "continued"
   * array, JSON text ({"target":…,"at_char":N},…), empty when none;
   * encode_response writes "airetry": {"continued": [...]} when not empty.
   * Filled by air__aggregate_add_continued; earlier attempts' usage is
   * added with air__aggregate_add_usage. */
  air__buf continued;
  uint64_t prior_input_tokens;  /* earlier attempts' usage, added to every */
  uint64_t prior_output_tokens; /* USAGE part's (air__aggregate_add_usage) */
  bool keep_ident;    /* a continuation was recorded: later START parts do not
                         replace id and model (the first attempt's stay) */
  air__idents idents; /* replacements of identifiers over the limit, set
                         by the consumer ("identifiers" above) */
} air__aggregate;

void air__aggregate_init(air__aggregate *a);
void air__aggregate_cleanup(air__aggregate *a);
/* Adds one part. Returns 0, AIR_ENOMEM or AIR_ETOOBIG. */
AIR__WUR int air__aggregate_add(air__aggregate *a, const air_part *p);
/* Usage of an earlier attempt of this answer, given up for a continuation
 * (as air__encoder_add_usage): the aggregate's usage is the sum of the
 * added attempts and the last attempt's USAGE parts (saturating);
 * has_usage becomes true. */
void air__aggregate_add_usage(air__aggregate *a, uint64_t input_tokens,
                              uint64_t output_tokens);
/* One continuation of the answer: target ("provider/model") took over at
 * character at_char of the text (from then on a START part keeps the
 * first attempt's id and model). Returns 0, AIR_ENOMEM or AIR_ETOOBIG. */
AIR__WUR int air__aggregate_add_continued(air__aggregate *a, const char *target,
                                          uint64_t at_char);
/* The most bytes of the "continued" list (aggregate and encoder). */
#define AIR__CONTINUED_MAX_BYTES (64u * 1024u)
/* The first "key": <unsigned integer> member in JSON text d (a byte scan,
 * no parse: for a member whose name appears nowhere else in the text, as
 * a stream event's "created" or "sequence_number"); false when absent. */
bool air__scan_uint(const char *d, size_t n, const char *key, uint64_t *v);
/* The event's type: the SSE event field, or else (an upstream that sends
 * only data lines) the first "type" string member of its data, raw. */
air__str air__event_type(const air__sse_event *ev);
/* Appends ,"airetry":{"continued":[...]} when continued (the members'
 * JSON text) is not empty; nothing otherwise. Returns 0 or a buf error. */
AIR__WUR int air__continued_member(const air__buf *continued, air__buf *out);

/* ---- encoding for the caller
 * ------------------------------------------------- */

/* Per-response encoder state, in the caller's dialect. */
typedef struct air__encoder {
  air_dialect api;
  bool passthrough; /* raw upstream events are forwarded; encode only the end */
  bool include_usage; /* OpenAI caller asked for the usage chunk */
  bool started;       /* the first chunk / message_start was written */
  bool finished;      /* FINISH seen */
  bool ended;         /* the terminator was written */
  int open_block;     /* Anthropic: index of the open content block, -1 none */
  int open_kind;      /* Anthropic: what that block is (text/thinking/tool) */
  int next_block;     /* Anthropic: the next content block index */
  /* Anthropic: the content block index of each tool call (by the parts'
   * tool index), -1 while the tool has no block. */
  int tool_block[AIR__DECODER_MAX_TOOLS];
  air_finish finish;
  uint64_t created; /* OpenAI "created" (seconds), from the caller's clock */
  uint64_t input_tokens;
  uint64_t output_tokens;
  bool has_usage;
  char id[AIR__MAX_IDENT_BYTES + 16]; /* with a dialect's prefix ("resp_") */
  char model[AIR__MAX_IDENT_BYTES + 1];
  air__idents idents;       /* replacements of identifiers over the limit, set
                               by the consumer after encoder_init */
  struct air__rsp_enc *rsp; /* Responses: the items being written (owned;
                               freed by air__encoder_cleanup) */
  /* Continuation (docs/design.md §3.5). */
  bool observed;   /* encoder_observe recorded the stream's identity */
  bool taken_over; /* air__encoder_take_over: parts are encoded now */
  uint64_t prior_input_tokens; /* earlier attempts (air__encoder_add_usage) */
  uint64_t prior_output_tokens;
  bool has_prior_usage;
  air__buf continued; /* the "continued" members (JSON text), as in the
                         aggregate; freed by air__encoder_cleanup */
} air__encoder;

/*
 * From now on parts are encoded (passthrough ends at the seam), continuing
 * the caller's stream: same id, created, model; an Anthropic caller's open
 * text block keeps its index (a new one is opened only if none is open);
 * Responses sequence numbers go on. What the stream had is what
 * encoder_observe recorded (or, when the encoder was not in passthrough,
 * what it encoded itself).
 */
void air__encoder_take_over(air__encoder *e);
/* Usage of an earlier attempt of this answer, added to what the end
 * reports (saturating). Called when that attempt is given up for a
 * continuation, with its usage: what USAGE parts told the encoder so far
 * (that attempt's) is forgotten, and the end reports the sum of every
 * added attempt and the last attempt's USAGE parts. encoder_observe never
 * records usage. */
void air__encoder_add_usage(air__encoder *e, uint64_t input_tokens,
                            uint64_t output_tokens);
/* The continuations so far: the end (final chunk / message_delta /
 * response.completed) carries "airetry": {"continued": [{"target": T,
 * "at_char": N}, ...]}. Returns 0, AIR_ENOMEM or AIR_ETOOBIG. */
int air__encoder_add_continued(air__encoder *e, const char *target,
                               uint64_t at_char);

/* A USAGE part: the current attempt's usage, which the end reports (with
 * earlier attempts': air__encoder_add_usage). */
void air__encoder_usage(air__encoder *e, const air_part *p);
/* Sets an encoder's id and model (NULL, 0: the dialect's defaults). */
typedef void (*air__set_ident_fn)(air__encoder *e, const char *id, size_t id_n,
                                  const char *model, size_t model_n);
/*
 * What the OpenAI encoders do with a part (identifiers fixed) before
 * writing it: USAGE is recorded, ERROR and empty text pieces, a second
 * START or a second FINISH write nothing; the first START sets the
 * identity (set_ident), any other first part the default one; in
 * passthrough only the state moves (started, a FINISH). 1 when the part
 * is to be written, else 0.
 */
int air__encoder_accept(air__encoder *e, const air_part *p,
                        air__set_ident_fn set_ident);
/* What encoder_observe records from a released event's parts: every
 * FINISH, and the first START's identity (set_ident, e->observed): true
 * when this call recorded it. */
bool air__encoder_observe_parts(air__encoder *e, const air_part *parts,
                                size_t n, air__set_ident_fn set_ident);

/* Frees what a dialect's encoder_init allocated (the Responses encoder
 * keeps every output item for its .done events and response.completed);
 * safe on any initialised encoder, and twice. */
void air__encoder_cleanup(air__encoder *e);

/* ---- the ops table
 * -------------------------------------------------------------- */

/* Between the field and the API in an AIR_ENOTSUP message. */
#define AIR__NOT_SUPPORTED ": not supported by "

/* The field named by an AIR_ENOTSUP message into out (NUL-terminated,
 * truncated to cap); the whole message when it has no such form. */
void air__unsupported_field(const char *message, char *out, size_t cap);

typedef struct air__dialect_ops {
  air_dialect api;
  const char *name; /* "openai", "anthropic" */
  const char
      *path; /* appended to base_url: "/chat/completions", "/v1/messages" */
  const char *id_prefix; /* the form of an answer id the gateway makes:
                            "chatcmpl-", "msg_", "resp_" + the request id */

  /*
   * Requests. The hub (air__request_build) calls build_same for a caller
   * of this dialect: the caller's text with model and stream set (the byte
   * fast path), or under an override the caller's tree with the override
   * merged. Across dialects it calls the caller dialect's decode_request
   * once per request, then the target's can_express and encode_request.
   */
  int (*build_same)(const air__request *req, const air__build_opts *o,
                    air__buf *out, air_error *err);
  /* The caller's body (of this dialect) into c (initialised by the hub).
   * A body invalid in itself is AIR_EINVAL with err naming the field;
   * what only this dialect can say is kept as c's extras (canon.h). */
  int (*decode_request)(const air__request *req, struct air__canon *c,
                        air_error *err);
  /* 0 when this dialect can say everything c asks for; else AIR_ENOTSUP
   * naming the first field in the caller's order ("FIELD"
   * AIR__NOT_SUPPORTED "NAME upstreams"). Sends nothing; cheap. */
  int (*can_express)(const struct air__canon *c, const air__build_opts *o,
                     air_error *err);
  /* For a caller of this dialect (NULL: it has no state upstream): 0, or
   * AIR_ENOTSUP naming the first field that refers to state only the
   * caller's provider keeps (Responses previous_response_id, ...), as
   * "FIELD" AIR__NOT_SUPPORTED "api_name upstreams". The hub asks it for a
   * target of another dialect or of another provider (o->other_provider),
   * under drop_params too: such a target is always skipped. */
  int (*stateful_field)(const struct air__canon *c, const char *api_name,
                        air_error *err);
  /* c as this dialect's upstream body: the model replaced by o->model,
   * "stream": true (and this dialect's stream flags), o->override_json
   * merged over the top-level fields. Fields c has that this dialect
   * cannot say are dropped (the hub checked can_express first unless
   * o->drop_params). A request this dialect finds invalid is AIR_EINVAL. */
  int (*encode_request)(const struct air__canon *c, const air__build_opts *o,
                        air__buf *out, air_error *err);

  void (*decoder_init)(air__decoder *d);
  /*
   * One SSE event of this API's stream into parts, in order. An event that
   * cannot be decoded increments d->malformed and yields nothing. Unknown
   * event types and pings yield nothing (not malformed). Returns 0 or the
   * first non-zero value returned by cb.
   */
  int (*decode_event)(air__decoder *d, const air__sse_event *ev,
                      air__part_cb cb, void *data);
  /* A complete non-streaming response body into parts (START, content,
   * FINISH, USAGE). AIR_EPARSE when it is not a response of this API. */
  int (*decode_body)(air__decoder *d, const char *body, size_t n,
                     air__part_cb cb, void *data);

  /* Encoding for a caller of this dialect. created_s: the response time.
   * encoder_cleanup (NULL: nothing to free) is called by
   * air__encoder_cleanup. */
  void (*encoder_init)(air__encoder *e, const air__request *req,
                       uint64_t created_s);
  void (*encoder_cleanup)(air__encoder *e);
  /* One part as stream bytes ("data: ...\n\n" / "event: ...\ndata: ...\n\n"),
   * appended to out. Parts that have no wire form append nothing. */
  int (*encode_part)(air__encoder *e, const air_part *p, air__buf *out);
  /* The clean end of a stream: OpenAI the usage chunk (if asked) and
   * "data: [DONE]"; Anthropic the closing content_block_stop, message_delta
   * (stop_reason, usage) and message_stop. Passthrough: only the terminator. */
  int (*encode_end)(air__encoder *e, air__buf *out);
  /* Called for every event released in passthrough while a continuation
   * is still possible (ev: the upstream event, of this dialect; parts: what
   * it decoded to): records what a take-over needs (id, created, model,
   * open block index and kind, Responses sequence_number / item ids /
   * indexes and the items' text). Cheap: events that change nothing are
   * recognised by their type without parsing JSON. NULL: nothing needed. */
  void (*encoder_observe)(air__encoder *e, const air__sse_event *ev,
                          const air_part *parts, size_t n);
  /* A keep-alive while a rescue runs (docs/design.md §3.5): OpenAI and
   * Responses an SSE comment ": keep-alive\n\n", Anthropic "event: ping".
   * Returns 0 or a buf error. */
  int (*encode_keepalive)(air__encoder *e, air__buf *out);
  /* A failure after commit: an error event and no clean terminator. */
  int (*encode_error_event)(air__encoder *e, air_reason reason,
                            const char *message, air__buf *out);
  /* A non-streaming response body from an aggregate. */
  int (*encode_response)(const air__aggregate *a, air__buf *out);
  /*
   * A final error body (failure before commit): OpenAI {"error": {"message",
   * "type", "code": reason, "attempts": [...]}}; Anthropic {"type": "error",
   * "error": {"type", "message"}, "attempts": [...]}. Each attempt is
   * {"target", "reason", "status", "ms", "request_id"}.
   */
  int (*encode_error_body)(int status, air_reason reason, const char *message,
                           const air_attempt *log, size_t n, air__buf *out);
} air__dialect_ops;

/*
 * The upstream request body for target's dialect from a caller request of
 * any dialect: the model replaced by o->model, "stream": true (OpenAI also
 * stream_options.include_usage: true), o->override_json merged over the
 * top-level fields, and — across dialects — a translation through the
 * canonical request of system prompt, messages (text, images, tool calls
 * and tool results), tools and tool_choice, stop sequences, max tokens
 * (o->default_max_tokens where Anthropic needs one), temperature (clamped
 * to the API's range), top_p. Within one dialect unknown fields pass
 * through unchanged; across dialects a field that is only a hint to a
 * provider (seed, logprobs, service_tier, metadata, top_k, ...: docs/design.md
 * §5, docs/config.md) is dropped, and one that changes the answer and that
 * the API cannot express is AIR_ENOTSUP with err->message "FIELD"
 * AIR__NOT_SUPPORTED "API upstreams" (the target is then skipped), unless
 * o->drop_params drops it too. A request that is invalid in itself is
 * AIR_EINVAL. On failure nothing is appended to out.
 */
int air__request_build(const air__dialect_ops *target, const air__request *req,
                       const air__build_opts *o, air__buf *out, air_error *err);

/* req's canonical form, built on first use by the caller dialect's
 * decode_request and kept on the request; NULL with *rc (and err) when it
 * cannot be built. */
const struct air__canon *air__request_canon(const air__request *req,
                                            air_error *err, int *rc);
/* 0, or AIR_ENOTSUP naming the first field of req that refers to state
 * only the caller's provider keeps, when target is of another dialect or
 * another provider (o->other_provider); drop_params does not drop it. */
int air__request_stateful(const air__dialect_ops *target,
                          const air__request *req, const air__build_opts *o,
                          air_error *err);

/*
 * Whether target's dialect can express req, before anything is sent: 0,
 * or AIR_ENOTSUP with the message air__request_build would give (the
 * target is skipped), or another error of building the canonical form
 * (AIR_EINVAL: the request is invalid; it is reported by the build).
 * Always 0 for a caller of target's own dialect or under drop_params.
 */
int air__request_can_express(const air__dialect_ops *target,
                             const air__request *req, const air__build_opts *o,
                             air_error *err);

/* ---- continuation (docs/design.md §3.5; continue.c)
 * ------------------------------------------------ */

/* How the continuation is asked for. */
typedef struct air__cont_ask {
  air_cont_style style; /* PREFILL, VLLM, PREFIX_FLAG or INSTRUCT */
  const char *sent;     /* the released text */
  size_t sent_n;
  int64_t
      max_tokens; /* the caller's limit minus released output tokens; 0: keep */
} air__cont_ask;

/* The fixed user message of the INSTRUCT style (never contains the text). */
#define AIR__CONT_INSTRUCT_TEXT                                           \
  "Your previous reply was cut off. Continue it exactly where it stops, " \
  "from the next character: do not repeat any of it, do not start over, " \
  "and do not add any introduction, comment or quotation marks."

/*
 * The continuation's upstream body for target, from a caller request of
 * any dialect (built through the canonical form, also for the same
 * dialect): the original plus one assistant message with exactly sent, in
 * the ask's style (PREFILL: the conversation ends with it; VLLM: top-level
 * continue_final_message: true, add_generation_prompt: false; PREFIX_FLAG:
 * prefix: true on it; INSTRUCT: followed by one user message,
 * AIR__CONT_INSTRUCT_TEXT); thinking / reasoning off, stop kept,
 * max_tokens as asked (ask->max_tokens 0: the caller's, else the target's
 * default). For a Responses target the assistant message is an output-text
 * message item. AIR_EINVAL for a style NONE or an unknown one; otherwise as
 * air__request_build. On failure nothing is appended to out.
 */
int air__request_build_continuation(const air__dialect_ops *target,
                                    const air__request *req,
                                    const air__build_opts *o,
                                    const air__cont_ask *ask, air__buf *out,
                                    air_error *err);

/* Whether an upstream error (status + error body read by
 * air__parse_error_body) is the 400 that rejects an assistant prefill /
 * final assistant message (Anthropic's wording). */
bool air__prefill_rejected(int status, const air_failure *f);

/* The dialects, in air_dialect order (dialects.c); *n set to the count. */
const air__dialect_ops *const *air__dialects(size_t *n);

/*
 * The functions a dialect folder defines for its line of the table, named
 * by its prefix (air__oai, air__ant, air__rsp): AIR__DIALECT_FUNCS declares
 * them (in the folder's header), AIR__DIALECT_OPS fills the members of
 * air__dialect_ops they implement (in its dialect.c), each documented at
 * that member. decode_event_full and decode_event_fast are decode_event
 * without its fast path, and telling whether the fast path decoded the
 * event (*took), for the differential tests.
 */
#define AIR__DIALECT_FUNCS(P)                                                  \
  int P##_build_same(const air__request *req, const air__build_opts *o,        \
                     air__buf *out, air_error *err);                           \
  int P##_decode_request(const air__request *req, struct air__canon *c,        \
                         air_error *err);                                      \
  int P##_can_express(const struct air__canon *c, const air__build_opts *o,    \
                      air_error *err);                                         \
  int P##_encode_request(const struct air__canon *c, const air__build_opts *o, \
                         air__buf *out, air_error *err);                       \
  void P##_decoder_init(air__decoder *d);                                      \
  int P##_decode_event(air__decoder *d, const air__sse_event *ev,              \
                       air__part_cb cb, void *data);                           \
  int P##_decode_event_full(air__decoder *d, const air__sse_event *ev,         \
                            air__part_cb cb, void *data);                      \
  int P##_decode_event_fast(air__decoder *d, const air__sse_event *ev,         \
                            air__part_cb cb, void *data, bool *took);          \
  int P##_decode_body(air__decoder *d, const char *body, size_t n,             \
                      air__part_cb cb, void *data);                            \
  void P##_encoder_init(air__encoder *e, const air__request *req,              \
                        uint64_t created_s);                                   \
  int P##_encode_part(air__encoder *e, const air_part *p, air__buf *out);      \
  int P##_encode_end(air__encoder *e, air__buf *out);                          \
  void P##_encoder_observe(air__encoder *e, const air__sse_event *ev,          \
                           const air_part *parts, size_t n);                   \
  int P##_encode_error_event(air__encoder *e, air_reason reason,               \
                             const char *message, air__buf *out);              \
  int P##_encode_response(const air__aggregate *a, air__buf *out)

#define AIR__DIALECT_OPS(P, api_, name_, path_, id_prefix_)                   \
  .api = (api_), .name = (name_), .path = (path_), .id_prefix = (id_prefix_), \
  .build_same = P##_build_same, .decode_request = P##_decode_request,         \
  .can_express = P##_can_express, .encode_request = P##_encode_request,       \
  .decoder_init = P##_decoder_init, .decode_event = P##_decode_event,         \
  .decode_body = P##_decode_body, .encoder_init = P##_encoder_init,           \
  .encode_part = P##_encode_part, .encode_end = P##_encode_end,               \
  .encoder_observe = P##_encoder_observe,                                     \
  .encode_error_event = P##_encode_error_event,                               \
  .encode_response = P##_encode_response

/* What both OpenAI dialects write alike (codec_text.c): the keep-alive
 * comment ": keep-alive" and the final error body in the OpenAI shape. */
int air__openai_keepalive(air__encoder *e, air__buf *out);
int air__openai_error_body(int status, air_reason reason, const char *message,
                           const air_attempt *log, size_t n, air__buf *out);

extern const air__dialect_ops air__dialect_openai_chat;
extern const air__dialect_ops air__dialect_anthropic;
extern const air__dialect_ops air__dialect_openai_responses;

const air__dialect_ops *air__dialect_get(air_dialect api);

/*
 * Reads an upstream error body of either dialect ({"error": {"type", "code",
 * "message"}} or {"type": "error", "error": {...}}) into f->type, f->code and
 * f->message, copied into buf (which must outlive f's use). Missing fields
 * stay NULL; a body that is not JSON leaves them NULL and sets f->message to
 * a bounded, printable prefix of the body.
 */
void air__parse_error_body(const char *body, size_t n, air__buf *buf,
                           air_failure *f);

/*
 * The HTTP status of a final failure (docs/design.md §5): the upstream's own
 * when it was an error status, else one that fits the reason (504 for timeouts,
 * 502 for network and malformed, 429 rate_limit, 503 overloaded, ...).
 */
int air__final_status(air_reason reason, int status);

/* The error "type" string a dialect uses for a reason, for error bodies and
 * events ("rate_limit_error", "overloaded_error", "api_error", ...). */
const char *air__error_type(air_dialect api, air_reason reason);

#endif
