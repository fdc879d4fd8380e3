/*
 * The canonical request (docs/design.md §1, 5): what a caller asked
 * for, in no dialect. Every translation is a decode of the caller's dialect
 * into this form (the dialect's decode_request) and an encode of this form
 * into the target's (encode_request); no file knows two dialects. The
 * same-dialect byte fast path (request_text.c, air__request_patch) does not
 * build it: it is built only for a target of another dialect (and, later,
 * for continuation).
 *
 * Memory: everything hangs off one arena owned by the canon (strings are
 * copied, never borrowed from the caller's tree) and is freed by
 * air__canon_cleanup. Counts are bounded by AIR__MAX_CANON_* (limits.h);
 * crossing one is AIR_ETOOBIG.
 *
 * What no other dialect can say is kept, not lost: a top-level field or a
 * content part the canonical form has no member for is an "extra" (or an
 * OPAQUE part) tagged with the dialect it came from and carrying its JSON
 * text, so a same-dialect encoder could write it back and any other says
 * "FIELD: not supported by ..." (the target is skipped) or drops it under
 * drop_params. Provider-bound opaque fields (Anthropic thinking signatures,
 * OpenAI encrypted_content and item ids) are tagged the same way and are
 * dropped for a target of another provider. docs/architecture.md lists
 * which field survives which hop.
 */
#ifndef AIR__CANON_H
#define AIR__CANON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airetry.h"
#include "arena.h"
#include "str.h"

typedef enum air__cpart_kind {
  AIR__CP_TEXT,        /* text (refusal text of an earlier turn too) */
  AIR__CP_IMAGE,       /* url, or media_type + data (base64) */
  AIR__CP_TOOL_CALL,   /* id, name, args (JSON text) */
  AIR__CP_TOOL_RESULT, /* id; text (content_string) or parts */
  AIR__CP_REASONING,   /* text, opaque (signature / encrypted data), origin */
  AIR__CP_OPAQUE       /* a part of the origin dialect only: raw JSON */
} air__cpart_kind;

typedef struct air__cpart air__cpart;
struct air__cpart {
  air__cpart_kind kind;
  air__str text;       /* TEXT, REASONING; TOOL_RESULT when content_string */
  air__str id;         /* TOOL_CALL, TOOL_RESULT (the call it answers) */
  air__str name;       /* TOOL_CALL */
  air__str args;       /* TOOL_CALL: the arguments as JSON text (p NULL:
                          none given) */
  air__str url;        /* IMAGE from a URL */
  air__str media_type; /* IMAGE inline: media type and base64 data */
  air__str data;
  air__str opaque;        /* REASONING: the provider-bound field (Anthropic
                             signature, or redacted_thinking's data) */
  air__str raw;           /* OPAQUE: the part as JSON text */
  air__str type;          /* the part's type as the caller wrote it */
  air_dialect origin;     /* REASONING, OPAQUE: whose field it is */
  bool redacted;          /* REASONING: Anthropic redacted_thinking */
  bool is_error;          /* TOOL_RESULT */
  bool content_string;    /* TOOL_RESULT: the content was one string */
  const char *field;      /* where the part was in the caller's body
                             ("messages[2].content[1]"), for messages */
  const char *args_field; /* TOOL_CALL: where the arguments were */
  air__cpart *parts;      /* TOOL_RESULT: content parts */
  size_t n_parts;
  size_t cap_parts;
  unsigned seq; /* decoding order (with the extras'): the first
                   problem in the caller's order is the one named */
};

typedef enum air__crole {
  AIR__ROLE_SYSTEM, /* system or developer instructions in the turns */
  AIR__ROLE_USER,   /* user turns; tool results are parts of these */
  AIR__ROLE_ASSISTANT
} air__crole;

typedef struct air__cmsg {
  air__crole role;
  bool developer; /* OpenAI "developer" rather than "system" */
  air__cpart *parts;
  size_t n_parts;
  size_t cap_parts;
} air__cmsg;

typedef struct air__ctool {
  air__str name;
  air__str description; /* p NULL: none */
  air__str schema;      /* the JSON schema of the input (JSON text of an
                           object); p NULL: none given */
} air__ctool;

typedef enum air__ctool_choice {
  AIR__TC_UNSET = 0,
  AIR__TC_AUTO,
  AIR__TC_REQUIRED, /* OpenAI "required", Anthropic "any" */
  AIR__TC_NONE,
  AIR__TC_TOOL /* the named tool */
} air__ctool_choice;

/* The answer's format (OpenAI response_format, Anthropic
 * output_config.format). */
typedef enum air__cformat {
  AIR__FMT_TEXT = 0,
  AIR__FMT_JSON_OBJECT, /* any JSON object */
  AIR__FMT_JSON_SCHEMA  /* JSON matching format_schema */
} air__cformat;

/* How hard to reason (OpenAI reasoning_effort, Anthropic
 * output_config.effort); the budgets are in docs/config.md. */
typedef enum air__ceffort {
  AIR__EFFORT_UNSET = 0,
  AIR__EFFORT_NONE,
  AIR__EFFORT_MINIMAL,
  AIR__EFFORT_LOW,
  AIR__EFFORT_MEDIUM,
  AIR__EFFORT_HIGH,
  AIR__EFFORT_MAX
} air__ceffort;

/* A number as the caller wrote it: an integer stays one. */
typedef struct air__cnum {
  bool set;
  bool is_int;
  int64_t i;
  double d; /* the value (also for integers) */
} air__cnum;

/* A field or part only the origin dialect can express. */
typedef struct air__cextra {
  const char *field; /* the name an AIR_ENOTSUP message gives it */
  const char *key;   /* top-level key (NULL: inside messages or tools) */
  air__str raw;      /* its value as JSON text (p NULL: not kept) */
  air_dialect origin;
  unsigned seq; /* decoding order, shared with the parts */
} air__cextra;

typedef struct air__canon {
  air_dialect origin; /* the caller's dialect */
  /* System instructions given apart from the turns (Anthropic "system"):
   * TEXT parts, or OPAQUE ones. system_string: given as one string. (The
   * small members sit in pairs: the struct keeps little padding.) */
  bool has_system;
  bool system_string;
  air__arena arena;
  const char *model; /* the caller's "model" (NUL-terminated) */

  air__cpart *system;
  size_t n_system;
  size_t cap_system;

  air__cmsg *msgs;
  size_t n_msgs;

  air__ctool *tools;
  size_t n_tools;
  air__ctool_choice tool_choice;
  int parallel_tools; /* -1 unset, 0 one call at a time, 1 parallel */
  air__str tool_choice_name;

  int64_t max_tokens; /* 0: unset */
  air__cnum temperature;
  air__cnum top_p;
  air__str *stop; /* stop sequences */
  size_t n_stop;
  air__str user;       /* end-user id (OpenAI user, Anthropic
                          metadata.user_id); p NULL: none */
  const char *dropped; /* tools only the origin dialect's provider can run
                          (Responses web_search, ...), left out for a target
                          of another dialect: their types, comma-separated
                          (x-airetry-dropped); NULL: none */

  air__cformat format;
  int format_strict;        /* -1 unset, 0, 1 */
  air__str format_name;     /* the schema's name (p NULL: none) */
  air__str format_schema;   /* JSON_SCHEMA: the schema (JSON text) */
  const char *format_field; /* the caller's field ("response_format") */

  air__ceffort effort;         /* reasoning effort asked, or UNSET */
  bool thinking_adaptive;      /* Anthropic thinking {type: adaptive} */
  int64_t thinking_budget;     /* Anthropic thinking enabled: budget_tokens */
  const char *reasoning_field; /* the caller's field ("reasoning_effort",
                                  "thinking") */

  air__cextra *extras; /* in the caller's order */
  size_t n_extras;
  size_t cap_extras;
  size_t cap_msgs;
  size_t cap_tools;
  size_t cap_stop;
  unsigned next_seq;
  /* A continuation's body (continue.c, docs/design.md §3.5): how the final
   * assistant message asks to be continued; the encoders write VLLM's
   * top-level flags and PREFIX_FLAG's "prefix": true through
   * air__json_cont_style, Anthropic trims the final assistant text's
   * trailing white space (the API refuses it). NONE otherwise. */
  air_cont_style cont_style;
} air__canon;

void air__canon_init(air__canon *c, air_dialect origin);
void air__canon_cleanup(air__canon *c);

/* Arena helpers for decoders: a copy of (p, n) (NULL p: an empty string);
 * a NUL-terminated printf-formatted string; zeroed arrays. NULL (or a
 * NULL .p) when out of memory. */
air__str air__canon_str(air__canon *c, const char *p, size_t n);
const char *air__canon_fmt(air__canon *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void *air__canon_zalloc(air__canon *c, size_t count, size_t size);

/* Appends a zeroed message / part / extra and returns it (NULL: out of
 * memory or over AIR__MAX_CANON_*: *rc says which). Arrays grow by
 * doubling in the arena. */
air__cmsg *air__canon_add_msg(air__canon *c, air__crole role, int *rc);
air__cpart *air__canon_add_part(air__canon *c, air__cpart **parts, size_t *n,
                                size_t *cap, air__cpart_kind kind, int *rc);
int air__canon_add_extra(air__canon *c, const char *field, const char *key,
                         air__str raw);
int air__canon_add_tool(air__canon *c, air__ctool **out);
int air__canon_add_stop(air__canon *c, const char *p, size_t n);

/*
 * The first extra (in the caller's order) that a target of dialect api
 * cannot express, or NULL: an encoder's can_express compares its seq with
 * that of the first part it cannot express itself and names the earlier.
 */
const air__cextra *air__canon_first_extra(const air__canon *c, air_dialect api);

/* Fills err (when given) with "FIELD: not supported by NAME upstreams" and
 * returns AIR_ENOTSUP. */
int air__canon_unsupported(air_error *err, const char *field,
                           const char *api_name);

/* For a target of dialect api (api_name upstreams) whose tool results hold
 * only text (the OpenAI dialects): 0, or AIR_ENOTSUP naming the first, in
 * the caller's order, of the extras of another dialect and the images
 * inside tool results ("FIELD (type T)"). */
int air__canon_text_results(const air__canon *c, air_dialect api,
                            const char *api_name, air_error *err);

/* The effort c asks for: the one given, else the one of its thinking
 * budget (docs/config.md: under 4096 low, under 16384 medium, else high);
 * UNSET for neither (adaptive thinking alone included). */
air__ceffort air__canon_effort(const air__canon *c);
/* The OpenAI name of effort e ("none" ... "high"; MAX is "high"); NULL for
 * UNSET. */
const char *air__canon_effort_name(air__ceffort e);

#endif
