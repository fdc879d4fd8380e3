/*
 * The resolved config: what air_config_parse produces. Every default of
 * docs/design.md §3 and 4 is filled in, so readers never look anything up
 * twice. Immutable after loading; shared freely between threads.
 */
#ifndef AIR__POLICY_H
#define AIR__POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "airetry.h"
#include "limits.h"
#include "trace.h"

/* "unlimited" for counts (max, max_total_attempts, per_reason). */
#define AIR__UNLIMITED UINT32_MAX

typedef struct air__timeouts {
  uint64_t connect_ms;
  uint64_t first_byte_ms;
  uint64_t first_chunk_ms;
  uint64_t chunk_ms;
  uint64_t attempt_ms;
  uint64_t total_ms;
} air__timeouts;

typedef enum air__jitter {
  AIR__JITTER_FULL,
  AIR__JITTER_EQUAL,
  AIR__JITTER_NONE
} air__jitter;

typedef struct air__backoff {
  uint64_t base_ms;
  double factor;
  uint64_t max_ms;
  air__jitter jitter;
} air__backoff;

typedef enum air__rule_action {
  AIR__RULE_RETRY,
  AIR__RULE_SWITCH,
  AIR__RULE_FAIL
} air__rule_action;

/* An HTTP status range: 429 is {429,429}, "5xx" is {500,599}. */
typedef struct air__status_range {
  uint16_t lo;
  uint16_t hi;
} air__status_range;

/*
 * One rule. It matches a failure when every matcher it has matches: the
 * reason is in `on` (when on_mask != 0), the status is in one of `status`
 * (when n_status != 0) and the message contains `message` case-insensitively
 * (when message != NULL). A rule has at least one matcher.
 */
typedef struct air__rule {
  uint32_t on_mask; /* bit (1u << reason) per reason */
  air__status_range status[AIR__MAX_STATUS_MATCHERS];
  size_t n_status;
  char *message;
  air__rule_action action;
  uint32_t max;         /* attempts it may add per request; AIR__UNLIMITED */
  air__backoff backoff; /* retry only */
  uint64_t retry_after_max_ms;
  char *to;            /* switch only: "provider/model" or NULL */
  char *override_json; /* JSON object text or NULL */
  /* Per target of the route (n_targets entries, or NULL when the rule has
   * no override): override_json merged over that target's own override
   * (the rule's fields win), computed when the config loads; an entry is
   * NULL where the target has none (override_json applies as it is). */
  char **target_override;
  size_t n_target_override;
} air__rule;

typedef struct air__budget {
  uint32_t max_total_attempts;            /* AIR__UNLIMITED allowed */
  uint32_t per_reason[AIR_REASON__COUNT]; /* AIR__UNLIMITED when not set */
} air__budget;

typedef struct air__breaker_cfg {
  bool enabled;
  uint32_t failures;
  uint64_t open_ms;
  uint64_t quota_open_ms;
} air__breaker_cfg;

typedef struct air__sticky_cfg {
  bool enabled;      /* true when after_ms or requests is set */
  uint64_t after_ms; /* 0: no time limit */
  uint32_t requests; /* 0: no count limit */
} air__sticky_cfg;

/*
 * hedge: (docs/design.md §3.6): when the newest racer has no content part
 * after_ms after it started, the next eligible target starts beside it.
 * On a route (defaults, route) and merged over it per target.
 */
typedef struct air__hedge_cfg {
  bool enabled; /* giving the map without `enabled` turns it on */
  uint64_t after_ms;
  uint32_t max;              /* hedges per request, 1..AIR__MAX_HEDGES */
  bool same_target;          /* a hedge may go to a target already racing */
  uint64_t max_prompt_bytes; /* no hedge for a larger request body */
} air__hedge_cfg;

/*
 * continuation: (docs/design.md §3.5): after commit, a recoverable failure asks
 * another attempt for the rest of the answer. On routes and defaults.
 */
typedef enum air__cont_targets {
  AIR__CONT_SAME_MODEL = 0, /* only targets with the same model name */
  AIR__CONT_ANY             /* every target of the route */
} air__cont_targets;

typedef struct air__continuation {
  bool enabled;    /* default false; the map without `enabled` turns it on */
  bool any_target; /* targets: any (default same_model) */
  air__cont_targets targets; /* as read; any_target is resolved from it */
  bool instruct;           /* a rejected prefill is asked again with instruct */
  uint32_t max;            /* continuations per request (default 2) */
  uint64_t max_gap_ms;     /* the whole rescue, waits included; default the
                              route's chunk_ms (0 in the file: unset) */
  uint64_t max_sent_bytes; /* released text kept for it (default 1 MiB) */
} air__continuation;

typedef enum air__commit {
  AIR__COMMIT_FIRST_CONTENT,
  AIR__COMMIT_COMPLETE
} air__commit;
typedef enum air__malformed {
  AIR__MALFORMED_SKIP,
  AIR__MALFORMED_FAIL
} air__malformed;

typedef struct air__kv {
  char *name;
  char *value;
} air__kv;

typedef struct air__provider {
  char *name;
  air_dialect api;
  char *base_url;
  char *api_key_env; /* NULL when unset */
  /* api_key_env's value, read once when the config is loaded (so a reload
   * reads it again); NULL when the variable is unset or empty. A secret:
   * never logged, never printed (it is not in the option table). */
  char *api_key;
  air__kv *headers;
  size_t n_headers;
  air__breaker_cfg breaker; /* defaults.breaker merged with the provider's */
  /* continuation_style: as given, or by api when not (anthropic: prefill;
   * openai, openai_responses: none). style_set: it was given. */
  air_cont_style continuation_style;
  bool continuation_style_set;
} air__provider;

/* How a JSON schema from another dialect is asked of an Anthropic target
 * (docs/design.md §4, `structured_output`). */
typedef enum air__structured {
  AIR__STRUCT_TOOL = 0, /* one forced tool whose input is the schema */
  AIR__STRUCT_NATIVE    /* output_config.format */
} air__structured;

typedef struct air__target {
  char *name;             /* "provider/model" */
  char *model;            /* the part after the first '/' */
  size_t provider;        /* index into air_config.providers */
  air__timeouts timeouts; /* route timeouts with the target's merged over */
  char *override_json;    /* JSON object text or NULL */
  air__hedge_cfg hedge;   /* route hedge with the target's merged over */
  air__structured structured_output;
  /* continuation_style resolved: the target's, else its provider's, else
   * by api (docs/design.md §3.5). style_set: the target or its provider gave
   * one (a configured style wins over a learned one). */
  air_cont_style style;
  bool style_set;
} air__target;

/* Everything that decides how a request behaves. */
typedef struct air__policy {
  air__timeouts timeouts;
  air__budget budget;
  air__rule *rules;
  size_t n_rules;
  char **phrases; /* refusal phrases */
  size_t n_phrases;
  air__sticky_cfg sticky;
  air__hedge_cfg hedge;
  air__continuation continuation;
  air__commit commit;
  uint32_t max_malformed;
  air__malformed malformed;
} air__policy;

typedef struct air__route {
  char *name;
  air__target *targets;
  size_t n_targets;
  air__policy policy;
} air__route;

typedef struct air__limits {
  uint64_t max_body_bytes;
  uint64_t max_header_bytes;
  uint64_t max_connections;
  uint64_t idle_timeout_ms;
  uint64_t request_timeout_ms; /* whole request head+body must arrive by then */
  uint64_t max_inflight_body_bytes; /* body bytes being read, process-wide */
  uint64_t max_output_queue_bytes;  /* response bytes queued, process-wide */
  uint64_t client_write_timeout_ms; /* queued output without progress */
  uint64_t max_response_bytes;      /* a whole (non-stream) upstream body */
} air__limits;

/* state.redis (docs/design.md §3.1): where breaker, probe, cooldown and sticky
 * state is shared. Given when url or url_env is. */
typedef struct air__redis_cfg {
  char *url;          /* state.redis.url: never holds a password */
  char *url_env;      /* or the variable holding the URL (may hold one) */
  char *password_env; /* the variable holding the password alone */
  char *prefix;       /* key and channel prefix, default "airetry:" */
  uint64_t connect_timeout_ms;
  uint64_t command_timeout_ms;
  /* Resolved at load (secrets: wiped when freed; never logged, never in
   * `airetry check`): the URL to connect to and the password, when any. */
  char *resolved_url;
  char *password;
} air__redis_cfg;
/* telemetry.otlp of the file (docs/design.md §4). */
typedef struct air__otlp_file {
  char *endpoint;    /* base URL ("/v1/traces" appended), NULL unset */
  char *headers_env; /* variable holding k=v,k=v headers, NULL unset */
  double sample_ratio;
} air__otlp_file;

typedef struct air__telemetry_file {
  air__otlp_file otlp;
} air__telemetry_file;

/*
 * Tracing as resolved from the environment (OTEL_*) and telemetry.otlp
 * when the config is loaded (config/telemetry.c, docs/observability.md).
 * The header values are secrets: never logged, never printed.
 */
typedef struct air__otel {
  bool enabled;              /* an endpoint is set */
  char *endpoint;            /* the traces URL POSTed to */
  const char *endpoint_from; /* where it came from (static text) */
  air__kv *headers;          /* extra request headers, decoded */
  size_t n_headers;
  const char *headers_from;
  char *service_name; /* resource service.name */
  air__sampler sampler;
  const char *sampler_name; /* OTEL_TRACES_SAMPLER's spelling (static) */
  const char *sampler_from;
  bool protobuf_asked; /* http/protobuf was asked for; JSON is sent */
  uint64_t delay_ms;   /* OTEL_BSP_SCHEDULE_DELAY: the longest a span
                          waits for its batch */
  uint64_t timeout_ms; /* OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT: one export */
} air__otel;

struct air_config {
  char *file;
  char *listen;
  char *client_keys_env;
  air__provider *providers;
  size_t n_providers;
  air__route *routes;
  size_t n_routes;
  air__policy defaults; /* built-ins <- defaults: ; used for "provider/model" */
  air__breaker_cfg breaker_defaults;
  air__redis_cfg redis; /* state.redis; resolved_url NULL: per process */
  char **forward_headers;
  size_t n_forward_headers;
  bool drop_params;
  uint32_t default_max_tokens;
  air__limits limits;
  air__telemetry_file telemetry;
  air__otel otel;
};

/* The continuation style an API gets when none is configured (docs/design.md
 * §3.5): anthropic PREFILL, openai and openai_responses NONE. Pure. */
air_cont_style air__cont_style_by_api(air_dialect api);

/* The route named name (n bytes), or NULL. */
const air__route *air__config_route(const air_config *cfg, const char *name,
                                    size_t n);
/* The provider named name (n bytes), or NULL; *index set when found. */
const air__provider *air__config_provider(const air_config *cfg,
                                          const char *name, size_t n,
                                          size_t *index);
/*
 * The policy a request for model runs under: the route named model, or for
 * "provider/model" (a known provider, a non-empty model) the config's
 * defaults (the engine turns sticky off for such a one-target walk). NULL
 * when model is neither. Points into cfg: valid as long as cfg. Pure.
 */
const air__policy *air__config_policy(const air_config *cfg, const char *model);

#endif
