/*
 * The config option table: every key of the config file, once. Parsing,
 * validation, the resolved dump of `airetry check` and the reference in
 * docs/config.md all walk this array (docs/style.md §8).
 */
#include "config_table.h"

#include <stddef.h>

#include "policy.h"
#include "limits.h"

#define DAY_MS 86400000ull
#define WEEK_MS (7ull * DAY_MS)
#define BIG_COUNT 1000000u
/* A limit's default as the table's default text. */
#define DEF_TEXT(x) DEF_TEXT_(x)
#define DEF_TEXT_(x) #x

static const char *const api_names[] = {"openai", "anthropic",
                                        "openai_responses", NULL};
static const char *const commit_names[] = {"first_content", "complete", NULL};
static const char *const malformed_names[] = {"skip", "fail", NULL};
static const char *const action_names[] = {"retry", "switch", "fail", NULL};
static const char *const jitter_names[] = {"full", "equal", "none", NULL};
static const char *const structured_names[] = {"tool", "native", NULL};
static const char *const cont_style_names[] = {
    "none", "prefill", "vllm", "prefix_flag", "instruct", NULL};
static const char *const cont_targets_names[] = {"same_model", "any", NULL};

/* The enums above are read and written as int (see config.c). */
_Static_assert(sizeof(air_dialect) == sizeof(int), "enum size");
_Static_assert(sizeof(air__commit) == sizeof(int), "enum size");
_Static_assert(sizeof(air__malformed) == sizeof(int), "enum size");
_Static_assert(sizeof(air__rule_action) == sizeof(int), "enum size");
_Static_assert(sizeof(air__jitter) == sizeof(int), "enum size");
_Static_assert(sizeof(air__structured) == sizeof(int), "enum size");
_Static_assert(sizeof(air_cont_style) == sizeof(int), "enum size");
_Static_assert(sizeof(air__cont_targets) == sizeof(int), "enum size");
_Static_assert(AIR_CONT_NONE == 0 && AIR_CONT_PREFILL == 1 &&
                   AIR_CONT_VLLM == 2 && AIR_CONT_PREFIX_FLAG == 3 &&
                   AIR_CONT_INSTRUCT == 4,
               "cont_style_names");
_Static_assert(AIR__CONT_SAME_MODEL == 0 && AIR__CONT_ANY == 1,
               "cont_targets_names");
_Static_assert(AIR__STRUCT_TOOL == 0 && AIR__STRUCT_NATIVE == 1,
               "structured_names");
_Static_assert(AIR_DIALECT_OPENAI == 0 && AIR_DIALECT_ANTHROPIC == 1 &&
                   AIR_DIALECT_OPENAI_RESPONSES == 2,
               "api_names");
_Static_assert(AIR__COMMIT_FIRST_CONTENT == 0 && AIR__COMMIT_COMPLETE == 1,
               "commit_names");
_Static_assert(AIR__MALFORMED_SKIP == 0 && AIR__MALFORMED_FAIL == 1,
               "malformed_names");
_Static_assert(AIR__RULE_RETRY == 0 && AIR__RULE_SWITCH == 1 &&
                   AIR__RULE_FAIL == 2,
               "action_names");
_Static_assert(AIR__JITTER_FULL == 0 && AIR__JITTER_EQUAL == 1 &&
                   AIR__JITTER_NONE == 2,
               "jitter_names");

#define POL (AIR__SC_DEFAULTS | AIR__SC_ROUTE)
#define TMO (AIR__SC_TIMEOUTS | AIR__SC_TARGET_TIMEOUTS)
#define MS(lo, hi) .min = (lo), .max = (hi)

static const air__opt opts[] = {
    /* ---- top level ------------------------------------------------------- */
    {.name = "listen",
     .scopes = AIR__SC_TOP,
     .type = AIR__T_STR,
     .offset = offsetof(air_config, listen),
     .max = 300,
     .check = AIR__CK_LISTEN,
     .def = "127.0.0.1:8080",
     .doc = "Address the gateway listens on: HOST:PORT, [IPv6]:PORT. "
            "`airetry serve --listen` overrides it."},
    {.name = "client_keys_env",
     .scopes = AIR__SC_TOP,
     .type = AIR__T_STR,
     .offset = offsetof(air_config, client_keys_env),
     .max = 256,
     .check = AIR__CK_ENV,
     .def_doc = "unset",
     .doc = "Environment variable holding the comma-separated keys clients "
            "must present (`Authorization: Bearer K` or `x-api-key: K`). "
            "Unset: no client auth, and `serve` refuses a non-loopback "
            "`listen` without `--insecure`. A variable that is not set is a "
            "warning."},
    {.name = "defaults",
     .scopes = AIR__SC_TOP,
     .type = AIR__T_DEFAULTS,
     .sub = AIR__SC_DEFAULTS,
     .phase = 0,
     .doc = "Policy for every route and for direct `provider/model` "
            "requests, merged key by key over the built-in defaults."},
    {.name = "providers",
     .scopes = AIR__SC_TOP,
     .type = AIR__T_PROVIDERS,
     .offset = offsetof(air_config, providers),
     .noffset = offsetof(air_config, n_providers),
     .sub = AIR__SC_PROVIDER,
     .phase = 1,
     .max = AIR__MAX_PROVIDERS,
     .def_doc = "none",
     .doc = "The upstream APIs: a list of provider maps."},
    {.name = "routes",
     .scopes = AIR__SC_TOP,
     .type = AIR__T_ROUTES,
     .offset = offsetof(air_config, routes),
     .noffset = offsetof(air_config, n_routes),
     .sub = AIR__SC_ROUTE,
     .phase = 2,
     .max = AIR__MAX_ROUTES,
     .def_doc = "none",
     .doc = "The model names clients may send: a list of route maps."},
    {.name = "state",
     .scopes = AIR__SC_TOP,
     .type = AIR__T_SECTION,
     .offset = 0,
     .sub = AIR__SC_STATE,
     .doc = "Where breaker and sticky state lives (per process by default)."},
    {.name = "forward_headers",
     .scopes = AIR__SC_TOP,
     .type = AIR__T_NAMES,
     .offset = offsetof(air_config, forward_headers),
     .noffset = offsetof(air_config, n_forward_headers),
     .max = AIR__MAX_HEADERS,
     .def = "[]",
     .doc = "Caller headers copied to same-dialect upstreams (stored "
            "lower-cased)."},
    {.name = "drop_params",
     .scopes = AIR__SC_TOP,
     .type = AIR__T_BOOL,
     .offset = offsetof(air_config, drop_params),
     .def = "false",
     .doc = "true: drop request fields a target's dialect cannot express "
            "and send it the rest; false: skip that target (400 only when "
            "no target can express the request)."},
    {.name = "default_max_tokens",
     .scopes = AIR__SC_TOP,
     .type = AIR__T_U32,
     .offset = offsetof(air_config, default_max_tokens),
     MS(1, 10000000),
     .def = "4096",
     .doc = "max_tokens sent to Anthropic upstreams when the caller gave "
            "none (Anthropic requires it)."},
    {.name = "limits",
     .scopes = AIR__SC_TOP,
     .type = AIR__T_SECTION,
     .offset = offsetof(air_config, limits),
     .sub = AIR__SC_LIMITS,
     .doc = "Gateway limits on client connections and requests."},

    {.name = "telemetry",
     .scopes = AIR__SC_TOP,
     .type = AIR__T_SECTION,
     .offset = offsetof(air_config, telemetry),
     .sub = AIR__SC_TELEMETRY,
     .doc = "OpenTelemetry trace export (docs/observability.md); the "
            "standard `OTEL_*` variables override it key by key."},

    /* ---- telemetry ------------------------------------------------------- */
    {.name = "otlp",
     .scopes = AIR__SC_TELEMETRY,
     .type = AIR__T_SECTION,
     .offset = offsetof(air__telemetry_file, otlp),
     .sub = AIR__SC_OTLP,
     .doc = "OTLP/HTTP JSON export of traces."},
    {.name = "endpoint",
     .scopes = AIR__SC_OTLP,
     .type = AIR__T_STR,
     .offset = offsetof(air__otlp_file, endpoint),
     .max = AIR__MAX_OTLP_ENDPOINT_BYTES,
     .check = AIR__CK_URL,
     .def_doc = "unset (no export)",
     .doc = "Collector base URL; `/v1/traces` is appended (unless the path "
            "already ends with it). `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or "
            "`OTEL_EXPORTER_OTLP_ENDPOINT` override it."},
    {.name = "headers_env",
     .scopes = AIR__SC_OTLP,
     .type = AIR__T_STR,
     .offset = offsetof(air__otlp_file, headers_env),
     .max = 256,
     .check = AIR__CK_ENV,
     .def_doc = "unset",
     .doc = "Environment variable holding export headers as `k=v,k=v` "
            "(URL-encoded, as `OTEL_EXPORTER_OTLP_HEADERS`, which overrides "
            "it); values are never printed."},
    {.name = "sample_ratio",
     .scopes = AIR__SC_OTLP,
     .type = AIR__T_DOUBLE,
     .offset = offsetof(air__otlp_file, sample_ratio),
     .dmin = 0,
     .dmax = 1,
     .def = "1",
     .doc = "Share of new traces sampled (parent-based: a request with a "
            "sampled `traceparent` is always kept, an unsampled one never). "
            "`OTEL_TRACES_SAMPLER` overrides it."},

    /* ---- limits ---------------------------------------------------------- */
    {.name = "max_body_bytes",
     .scopes = AIR__SC_LIMITS,
     .type = AIR__T_U64,
     .offset = offsetof(air__limits, max_body_bytes),
     MS(1024, AIR__MAX_BODY_BYTES_LIMIT),
     .def = DEF_TEXT(AIR__DEFAULT_MAX_BODY_BYTES),
     .doc = "Largest request body accepted (413 above)."},
    {.name = "max_header_bytes",
     .scopes = AIR__SC_LIMITS,
     .type = AIR__T_U64,
     .offset = offsetof(air__limits, max_header_bytes),
     MS(1024, AIR__MAX_HEADER_BYTES_LIMIT),
     .def = "65536",
     .doc = "Largest request head (request line + headers)."},
    {.name = "max_connections",
     .scopes = AIR__SC_LIMITS,
     .type = AIR__T_U64,
     .offset = offsetof(air__limits, max_connections),
     MS(1, BIG_COUNT),
     .def = "10000",
     .doc = "Client connections open at once."},
    {.name = "idle_timeout_ms",
     .scopes = AIR__SC_LIMITS,
     .type = AIR__T_U64,
     .offset = offsetof(air__limits, idle_timeout_ms),
     MS(1, DAY_MS),
     .def = "75000",
     .doc = "An idle keep-alive connection is closed after "
            "this long."},
    {.name = "request_timeout_ms",
     .scopes = AIR__SC_LIMITS,
     .type = AIR__T_U64,
     .offset = offsetof(air__limits, request_timeout_ms),
     MS(1, DAY_MS),
     .def = "30000",
     .doc = "Extension: the whole request (head and body) must arrive "
            "within this time of its first byte, else 408."},
    {.name = "max_inflight_body_bytes",
     .scopes = AIR__SC_LIMITS,
     .type = AIR__T_U64,
     .offset = offsetof(air__limits, max_inflight_body_bytes),
     MS(1024, AIR__MAX_INFLIGHT_BODY_BYTES_LIMIT),
     .def = DEF_TEXT(AIR__DEFAULT_MAX_INFLIGHT_BODY_BYTES),
     .doc = "Bytes of request bodies being read at once, summed over every "
            "connection of the process, counted as they arrive (a declared "
            "Content-Length reserves at most 64 KiB at the head); a request "
            "that would pass it gets 503 with retry-after: 1, the rest of "
            "its body unread."},
    {.name = "max_output_queue_bytes",
     .scopes = AIR__SC_LIMITS,
     .type = AIR__T_U64,
     .offset = offsetof(air__limits, max_output_queue_bytes),
     MS(1048576, AIR__MAX_OUTPUT_QUEUE_BYTES_LIMIT),
     .def = DEF_TEXT(AIR__DEFAULT_MAX_OUTPUT_QUEUE_BYTES),
     .doc = "Bytes of responses waiting for clients that read slower than "
            "they are written, summed over every connection of the process; "
            "past it a stream is cut and a whole answer's connection closed "
            "(airetry_http_output_refused_total)."},
    {.name = "client_write_timeout_ms",
     .scopes = AIR__SC_LIMITS,
     .type = AIR__T_U64,
     .offset = offsetof(air__limits, client_write_timeout_ms),
     MS(1, DAY_MS),
     .def = DEF_TEXT(AIR__DEFAULT_CLIENT_WRITE_TIMEOUT_MS),
     .doc = "A client that reads none of the queued response bytes for "
            "this long is gone: its connection is closed and its request "
            "ends as aborted (499 in the log), never as an upstream's "
            "timeout."},
    {.name = "max_response_bytes",
     .scopes = AIR__SC_LIMITS,
     .type = AIR__T_U64,
     .offset = offsetof(air__limits, max_response_bytes),
     MS(1024, AIR__MAX_RESPONSE_BYTES_LIMIT),
     .def = DEF_TEXT(AIR__DEFAULT_MAX_RESPONSE_BYTES),
     .doc = "Largest whole upstream response body read: an embeddings or "
            "count_tokens answer, or a JSON body sent for a streamed request. "
            "Past it the attempt fails with reason malformed and the route's "
            "rules decide."},

    /* ---- state ----------------------------------------------------------- */
    {.name = "redis",
     .scopes = AIR__SC_STATE,
     .type = AIR__T_SECTION,
     .offset = offsetof(air_config, redis),
     .sub = AIR__SC_REDIS,
     .doc = "Share breaker, probe, cooldown and sticky state between "
            "gateway instances through one Redis node (docs/scale-out.md); "
            "needs url or url_env."},
    {.name = "url",
     .scopes = AIR__SC_REDIS,
     .type = AIR__T_STR,
     .offset = offsetof(air__redis_cfg, url),
     .max = AIR__MAX_REDIS_URL_BYTES,
     .check = AIR__CK_REDIS,
     .def_doc = "unset",
     .doc = "redis://HOST[:PORT][/DB] (a user may be given; a password only "
            "through password_env or url_env). rediss:// is refused: no TLS "
            "in hiredis 0.14, use a sidecar."},
    {.name = "url_env",
     .scopes = AIR__SC_REDIS,
     .type = AIR__T_STR,
     .offset = offsetof(air__redis_cfg, url_env),
     .max = AIR__MAX_NAME_BYTES,
     .check = AIR__CK_ENV,
     .def_doc = "unset",
     .doc = "Environment variable holding the redis:// URL (it may carry "
            "the password); instead of url."},
    {.name = "password_env",
     .scopes = AIR__SC_REDIS,
     .type = AIR__T_STR,
     .offset = offsetof(air__redis_cfg, password_env),
     .max = AIR__MAX_NAME_BYTES,
     .check = AIR__CK_ENV,
     .def_doc = "unset",
     .doc = "Environment variable holding the password (AUTH); never "
            "logged or printed."},
    {.name = "prefix",
     .scopes = AIR__SC_REDIS,
     .type = AIR__T_STR,
     .offset = offsetof(air__redis_cfg, prefix),
     .max = AIR__MAX_REDIS_PREFIX_BYTES,
     .check = AIR__CK_TEXT,
     .def = "airetry:",
     .doc = "Prefix of every key and of the change channel."},
    {.name = "connect_timeout_ms",
     .scopes = AIR__SC_REDIS,
     .type = AIR__T_U64,
     .offset = offsetof(air__redis_cfg, connect_timeout_ms),
     .min = 1,
     .max = AIR__MAX_REDIS_TIMEOUT_MS,
     .def = "200",
     .doc = "Name lookup, connect and handshake must finish by then, or "
            "the instance runs on its own state and retries."},
    {.name = "command_timeout_ms",
     .scopes = AIR__SC_REDIS,
     .type = AIR__T_U64,
     .offset = offsetof(air__redis_cfg, command_timeout_ms),
     .min = 1,
     .max = AIR__MAX_REDIS_TIMEOUT_MS,
     .def = "200",
     .doc = "A command unanswered for this long drops the connection "
            "(requests never wait for Redis)."},

    /* ---- providers[] ----------------------------------------------------- */
    {.name = "name",
     .scopes = AIR__SC_PROVIDER,
     .type = AIR__T_STR,
     .offset = offsetof(air__provider, name),
     .max = AIR__MAX_NAME_BYTES,
     .check = AIR__CK_NAME,
     .flags = AIR__F_REQUIRED,
     .def_doc = "required",
     .doc = "Provider name, the part before '/' in targets; unique, no '/'."},
    {.name = "api",
     .scopes = AIR__SC_PROVIDER,
     .type = AIR__T_ENUM,
     .offset = offsetof(air__provider, api),
     .enums = api_names,
     .flags = AIR__F_REQUIRED,
     .def_doc = "required",
     .doc = "API dialect of the upstream."},
    {.name = "base_url",
     .scopes = AIR__SC_PROVIDER,
     .type = AIR__T_STR,
     .offset = offsetof(air__provider, base_url),
     .max = 2048,
     .check = AIR__CK_URL,
     .def_doc = "https://api.openai.com/v1 (openai), "
                "https://api.anthropic.com (anthropic)",
     .doc = "openai: includes the version (`.../v1`), the gateway appends "
            "`/chat/completions`; anthropic: the host root, the gateway "
            "appends `/v1/messages`."},
    {.name = "api_key_env",
     .scopes = AIR__SC_PROVIDER,
     .type = AIR__T_STR,
     .offset = offsetof(air__provider, api_key_env),
     .max = 256,
     .check = AIR__CK_ENV,
     .def_doc = "unset (no upstream auth)",
     .doc = "Environment variable holding the upstream key (never logged or "
            "printed). Not set: a warning, and attempts fail with `auth`."},
    {.name = "headers",
     .scopes = AIR__SC_PROVIDER,
     .type = AIR__T_HEADERS,
     .offset = offsetof(air__provider, headers),
     .noffset = offsetof(air__provider, n_headers),
     .max = AIR__MAX_HEADERS,
     .def = "{}",
     .doc = "Extra headers sent upstream (name: value)."},
    {.name = "breaker",
     .scopes = AIR__SC_PROVIDER,
     .type = AIR__T_SECTION,
     .offset = offsetof(air__provider, breaker),
     .sub = AIR__SC_BREAKER,
     .doc = "Breaker for this provider's targets, merged over "
            "`defaults.breaker`."},
    {.name = "continuation_style",
     .scopes = AIR__SC_PROVIDER,
     .type = AIR__T_ENUM,
     .offset = offsetof(air__provider, continuation_style),
     .enums = cont_style_names,
     .def_doc = "by api: `prefill` (anthropic), `none` (openai, "
                "openai_responses)",
     .doc = "How the rest of an answer cut after commit is asked for "
            "(docs/design.md "
            "§3.5): prefill ends the conversation with the released text as "
            "the assistant message (Anthropic); vllm adds "
            "`continue_final_message: true, add_generation_prompt: false`; "
            "prefix_flag sets `prefix: true` on it (DeepSeek, Mistral); "
            "instruct follows it with a user message asking to continue; "
            "none: never continued here."},

    /* ---- breaker --------------------------------------------------------- */
    {.name = "enabled",
     .scopes = AIR__SC_BREAKER,
     .type = AIR__T_BOOL,
     .offset = offsetof(air__breaker_cfg, enabled),
     .def = "true",
     .doc = "false: never skip a target of this provider."},
    {.name = "failures",
     .scopes = AIR__SC_BREAKER,
     .type = AIR__T_U32,
     .offset = offsetof(air__breaker_cfg, failures),
     MS(1, BIG_COUNT),
     .def = "3",
     .doc = "Consecutive counted failures that open the breaker."},
    {.name = "open_ms",
     .scopes = AIR__SC_BREAKER,
     .type = AIR__T_U64,
     .offset = offsetof(air__breaker_cfg, open_ms),
     MS(1, DAY_MS),
     .def = "10000",
     .doc = "How long an open breaker skips the target "
            "before one probe request."},
    {.name = "quota_open_ms",
     .scopes = AIR__SC_BREAKER,
     .type = AIR__T_U64,
     .offset = offsetof(air__breaker_cfg, quota_open_ms),
     MS(1, WEEK_MS),
     .def = "300000",
     .doc = "How long a `quota` failure opens it."},

    /* ---- defaults: and routes[] ------------------------------------------ */
    {.name = "breaker",
     .scopes = AIR__SC_DEFAULTS,
     .type = AIR__T_SECTION,
     .offset = offsetof(air_config, breaker_defaults),
     .sub = AIR__SC_BREAKER,
     .doc = "Breaker of every provider (per target state)."},
    {.name = "name",
     .scopes = AIR__SC_ROUTE,
     .type = AIR__T_STR,
     .offset = offsetof(air__route, name),
     .max = AIR__MAX_NAME_BYTES,
     .check = AIR__CK_NAME,
     .flags = AIR__F_REQUIRED,
     .def_doc = "required",
     .doc = "The model name clients send; unique, no '/'."},
    {.name = "targets",
     .scopes = AIR__SC_ROUTE,
     .type = AIR__T_TARGETS,
     .offset = offsetof(air__route, targets),
     .noffset = offsetof(air__route, n_targets),
     .sub = AIR__SC_TARGET,
     .phase = 1,
     MS(1, AIR__MAX_TARGETS),
     .flags = AIR__F_REQUIRED,
     .def_doc = "required",
     .doc = "Ordered list of `provider/model` strings or target maps."},
    {.name = "timeouts",
     .scopes = POL,
     .type = AIR__T_SECTION,
     .base = AIR__B_POLICY,
     .offset = offsetof(air__policy, timeouts),
     .sub = AIR__SC_TIMEOUTS,
     .doc = "Deadlines (docs/design.md §2.3)."},
    {.name = "budget",
     .scopes = POL,
     .type = AIR__T_SECTION,
     .base = AIR__B_POLICY,
     .offset = offsetof(air__policy, budget),
     .sub = AIR__SC_BUDGET,
     .doc = "Caps on the attempts of one request."},
    {.name = "sticky",
     .scopes = POL,
     .type = AIR__T_SECTION,
     .base = AIR__B_POLICY,
     .offset = offsetof(air__policy, sticky),
     .sub = AIR__SC_STICKY,
     .doc = "After a fallback answered, keep starting there for a while."},
    {.name = "hedge",
     .scopes = POL,
     .type = AIR__T_SECTION,
     .base = AIR__B_POLICY,
     .offset = offsetof(air__policy, hedge),
     .sub = AIR__SC_HEDGE,
     .doc =
         "Race the next target when the first content is late (docs/design.md "
         "§3.6); every hedge sends the prompt again."},
    {.name = "continuation",
     .scopes = POL,
     .type = AIR__T_SECTION,
     .base = AIR__B_POLICY,
     .offset = offsetof(air__policy, continuation),
     .sub = AIR__SC_CONTINUATION,
     .doc =
         "Continue a stream that failed after its first token (docs/design.md "
         "§3.5); every continuation sends the prompt again."},
    {.name = "refusal",
     .scopes = POL,
     .type = AIR__T_SECTION,
     .base = AIR__B_POLICY,
     .offset = 0,
     .sub = AIR__SC_REFUSAL,
     .doc = "Canned-refusal detection (docs/design.md §3.2)."},
    {.name = "commit",
     .scopes = POL,
     .type = AIR__T_ENUM,
     .base = AIR__B_POLICY,
     .offset = offsetof(air__policy, commit),
     .enums = commit_names,
     .def = "first_content",
     .doc = "When the answer is released: at the first content part, or "
            "once the whole attempt was judged."},
    {.name = "max_malformed",
     .scopes = POL,
     .type = AIR__T_U32,
     .base = AIR__B_POLICY,
     .offset = offsetof(air__policy, max_malformed),
     MS(0, BIG_COUNT),
     .def = "3",
     .doc = "More undecodable stream events than this in one attempt is a "
            "`malformed` failure."},
    {.name = "malformed",
     .scopes = POL,
     .type = AIR__T_ENUM,
     .base = AIR__B_POLICY,
     .offset = offsetof(air__policy, malformed),
     .enums = malformed_names,
     .def = "skip",
     .doc = "skip: drop and count an undecodable event; fail: the first one "
            "is a `malformed` failure."},
    {.name = "rules",
     .scopes = POL,
     .type = AIR__T_RULES,
     .base = AIR__B_POLICY,
     .offset = offsetof(air__policy, rules),
     .noffset = offsetof(air__policy, n_rules),
     .sub = AIR__SC_RULE,
     .max = AIR__MAX_RULES,
     .def_doc = "the built-in rules",
     .doc = "Ordered rules; a list given here replaces the one below it "
            "wholesale."},

    /* ---- routes[].targets[] in map form ---------------------------------- */
    {.name = "target",
     .scopes = AIR__SC_TARGET,
     .type = AIR__T_STR,
     .offset = offsetof(air__target, name),
     .max = 2 * AIR__MAX_NAME_BYTES,
     .check = AIR__CK_TARGET,
     .flags = AIR__F_REQUIRED,
     .def_doc = "required",
     .doc = "`provider/model`: a configured provider, then the upstream "
            "model name (which may itself contain '/')."},
    {.name = "timeouts",
     .scopes = AIR__SC_TARGET,
     .type = AIR__T_SECTION,
     .offset = offsetof(air__target, timeouts),
     .sub = AIR__SC_TARGET_TIMEOUTS,
     .doc = "Deadlines of this target, merged over the route's."},
    {.name = "override",
     .scopes = AIR__SC_TARGET,
     .type = AIR__T_OVERRIDE,
     .offset = offsetof(air__target, override_json),
     .def_doc = "none",
     .doc = "Request fields set on every attempt to this target "
            "(`max_tokens`, provider parameters); not `model`, `messages`, "
            "`stream`."},
    {.name = "structured_output",
     .scopes = AIR__SC_TARGET,
     .type = AIR__T_ENUM,
     .offset = offsetof(air__target, structured_output),
     .enums = structured_names,
     .def = "tool",
     .doc = "Anthropic targets: how a JSON schema from an OpenAI caller "
            "(`response_format`) is asked for. tool: one forced tool whose "
            "input is the schema, its input given back as the answer's "
            "text; native: `output_config.format`."},

    {.name = "hedge",
     .scopes = AIR__SC_TARGET,
     .type = AIR__T_SECTION,
     .offset = offsetof(air__target, hedge),
     .sub = AIR__SC_HEDGE,
     .doc = "Hedging while this target is the newest racer, merged over the "
            "route's."},
    {.name = "continuation_style",
     .scopes = AIR__SC_TARGET,
     .type = AIR__T_ENUM,
     .offset = offsetof(air__target, style),
     .enums = cont_style_names,
     .def_doc = "the provider's",
     .doc = "The provider's `continuation_style` for this target only."},

    /* ---- timeouts -------------------------------------------------------- */
    {.name = "connect_ms",
     .scopes = TMO,
     .type = AIR__T_U64,
     .offset = offsetof(air__timeouts, connect_ms),
     MS(1, DAY_MS),
     .def = "5000",
     .doc = "TCP + TLS connect."},
    {.name = "first_byte_ms",
     .scopes = TMO,
     .type = AIR__T_U64,
     .offset = offsetof(air__timeouts, first_byte_ms),
     MS(1, DAY_MS),
     .def = "15000",
     .doc = "Attempt start to upstream response headers."},
    {.name = "first_chunk_ms",
     .scopes = TMO,
     .type = AIR__T_U64,
     .offset = offsetof(air__timeouts, first_chunk_ms),
     MS(1, DAY_MS),
     .def = "30000",
     .doc = "Attempt start to the first content part received (raise it "
            "for reasoning models)."},
    {.name = "chunk_ms",
     .scopes = TMO,
     .type = AIR__T_U64,
     .offset = offsetof(air__timeouts, chunk_ms),
     MS(1, DAY_MS),
     .def = "30000",
     .doc = "Gap between progress events (content, a finish, server-tool "
            "events; not pings or usage-only chunks), before and after "
            "commit; paused while the caller does not read."},
    {.name = "attempt_ms",
     .scopes = TMO,
     .type = AIR__T_U64,
     .offset = offsetof(air__timeouts, attempt_ms),
     MS(1, DAY_MS),
     .def = "600000",
     .doc = "One attempt, until commit."},
    {.name = "total_ms",
     .scopes = AIR__SC_TIMEOUTS,
     .type = AIR__T_U64,
     .offset = offsetof(air__timeouts, total_ms),
     MS(1, DAY_MS),
     .def = "900000",
     .doc = "The whole request until commit, every attempt and wait "
            "included. Per request, so not allowed on a target."},

    /* ---- budget ---------------------------------------------------------- */
    {.name = "max_total_attempts",
     .scopes = AIR__SC_BUDGET,
     .type = AIR__T_COUNT,
     .offset = offsetof(air__budget, max_total_attempts),
     MS(1, BIG_COUNT),
     .def = "6",
     .doc = "Attempts one request may make, all reasons together."},
    {.name = "per_reason",
     .scopes = AIR__SC_BUDGET,
     .type = AIR__T_PER_REASON,
     .offset = offsetof(air__budget, per_reason),
     MS(1, BIG_COUNT),
     .def = "{}",
     .doc = "reason: count (or `unlimited`): an extra cap on the failures of "
            "one reason. Merged key by key."},

    /* ---- sticky ---------------------------------------------------------- */
    {.name = "enabled",
     .scopes = AIR__SC_STICKY,
     .type = AIR__T_BOOL,
     .offset = offsetof(air__sticky_cfg, enabled),
     .def = "false",
     .doc = "Extension: setting `after_ms` or `requests` turns sticky on; "
            "`enabled: false` turns off one inherited from `defaults`."},
    {.name = "after_ms",
     .scopes = AIR__SC_STICKY,
     .type = AIR__T_U64,
     .offset = offsetof(air__sticky_cfg, after_ms),
     MS(0, WEEK_MS),
     .def = "0",
     .doc = "Return to the first target this long after the "
            "switch (0: no time limit)."},
    {.name = "requests",
     .scopes = AIR__SC_STICKY,
     .type = AIR__T_U32,
     .offset = offsetof(air__sticky_cfg, requests),
     MS(0, 1000000000u),
     .def = "0",
     .doc = "Return to the first target after this many "
            "requests (0: no count limit)."},

    /* ---- hedge ----------------------------------------------------------- */
    {.name = "enabled",
     .scopes = AIR__SC_HEDGE,
     .type = AIR__T_BOOL,
     .offset = offsetof(air__hedge_cfg, enabled),
     .def = "false",
     .doc = "Giving `hedge` without `enabled` turns it on; `enabled: false` "
            "turns off one inherited from `defaults` or the route."},
    {.name = "after_ms",
     .scopes = AIR__SC_HEDGE,
     .type = AIR__T_U64,
     .offset = offsetof(air__hedge_cfg, after_ms),
     MS(1, DAY_MS),
     .def = "4000",
     .doc = "Start the next target when the newest racer has no content "
            "part this long after it started."},
    {.name = "max",
     .scopes = AIR__SC_HEDGE,
     .type = AIR__T_U32,
     .offset = offsetof(air__hedge_cfg, max),
     MS(1, AIR__MAX_HEDGES),
     .def = "1",
     .doc = "Hedges one request may start (each is an attempt: budget, "
            "breaker, total_ms)."},
    {.name = "same_target",
     .scopes = AIR__SC_HEDGE,
     .type = AIR__T_BOOL,
     .offset = offsetof(air__hedge_cfg, same_target),
     .def = "false",
     .doc = "With no untried target left, hedge on the newest racer's "
            "target again (what a single-target route needs)."},
    {.name = "max_prompt_bytes",
     .scopes = AIR__SC_HEDGE,
     .type = AIR__T_U64,
     .offset = offsetof(air__hedge_cfg, max_prompt_bytes),
     MS(0, AIR__MAX_REQUEST_BYTES),
     .def = "262144",
     .doc = "No hedge for a request body larger than this: every hedge "
            "pays the prompt again."},

    /* ---- continuation ---------------------------------------------------- */
    {.name = "enabled",
     .scopes = AIR__SC_CONTINUATION,
     .type = AIR__T_BOOL,
     .offset = offsetof(air__continuation, enabled),
     .def = "false",
     .doc = "Giving `continuation` without `enabled` turns it on; "
            "`enabled: false` turns off one inherited from `defaults`."},
    {.name = "targets",
     .scopes = AIR__SC_CONTINUATION,
     .type = AIR__T_ENUM,
     .offset = offsetof(air__continuation, targets),
     .enums = cont_targets_names,
     .def = "same_model",
     .doc = "Which targets may continue: only those with the committed "
            "target's model name, or any target of the route (the rules "
            "still choose: `retry` the same target, `switch` the next)."},
    {.name = "instruct",
     .scopes = AIR__SC_CONTINUATION,
     .type = AIR__T_BOOL,
     .offset = offsetof(air__continuation, instruct),
     .def = "false",
     .doc = "A target that rejects the prefill with a 400 is asked again at "
            "once with `instruct` (not counted), and `instruct` is "
            "remembered for it for 24 h (shared through Redis)."},
    {.name = "max",
     .scopes = AIR__SC_CONTINUATION,
     .type = AIR__T_U32,
     .offset = offsetof(air__continuation, max),
     MS(1, AIR__MAX_CONTINUATIONS),
     .def = "2",
     .doc = "Continuation attempts one request may make (each is also an "
            "attempt of `max_total_attempts`)."},
    {.name = "max_gap_ms",
     .scopes = AIR__SC_CONTINUATION,
     .type = AIR__T_U64,
     .offset = offsetof(air__continuation, max_gap_ms),
     MS(1, DAY_MS),
     .def_doc = "the route's `timeouts.chunk_ms`",
     .doc = "The whole rescue, from the failure to the continuation's "
            "first content, waits included; keep-alives are sent meanwhile."},
    {.name = "max_sent_bytes",
     .scopes = AIR__SC_CONTINUATION,
     .type = AIR__T_U64,
     .offset = offsetof(air__continuation, max_sent_bytes),
     MS(1, AIR__MAX_CONT_SENT_BYTES),
     .def = DEF_TEXT(AIR__DEFAULT_CONT_SENT_BYTES),
     .doc = "Released text kept per stream to continue it; an answer "
            "longer than this is not continued."},

    /* ---- refusal --------------------------------------------------------- */
    {.name = "phrases",
     .scopes = AIR__SC_REFUSAL,
     .type = AIR__T_PHRASES,
     .offset = offsetof(air__policy, phrases),
     .noffset = offsetof(air__policy, n_phrases),
     .max = AIR__MAX_PHRASES,
     .def = "[]",
     .doc = "Case-insensitive prefixes of canned refusals (at most 512 bytes "
            "each); the list replaces the inherited one."},

    /* ---- rules[] --------------------------------------------------------- */
    {.name = "on",
     .scopes = AIR__SC_RULE,
     .type = AIR__T_REASONS,
     .offset = offsetof(air__rule, on_mask),
     .def_doc = "none",
     .doc = "A reason or a list of reasons the rule matches."},
    {.name = "status",
     .scopes = AIR__SC_RULE,
     .type = AIR__T_STATUS,
     .offset = offsetof(air__rule, status),
     .noffset = offsetof(air__rule, n_status),
     .max = AIR__MAX_STATUS_MATCHERS,
     .def_doc = "none",
     .doc = "HTTP statuses: integers (429) or classes (\"5xx\")."},
    {.name = "message",
     .scopes = AIR__SC_RULE,
     .type = AIR__T_STR,
     .offset = offsetof(air__rule, message),
     .max = AIR__MAX_PHRASE_BYTES,
     .check = AIR__CK_TEXT,
     .def_doc = "none",
     .doc = "Case-insensitive substring of the failure message."},
    {.name = "action",
     .scopes = AIR__SC_RULE,
     .type = AIR__T_ENUM,
     .offset = offsetof(air__rule, action),
     .enums = action_names,
     .flags = AIR__F_REQUIRED,
     .def_doc = "required",
     .doc = "retry the same target, switch to the next one, or fail."},
    {.name = "max",
     .scopes = AIR__SC_RULE,
     .type = AIR__T_COUNT,
     .offset = offsetof(air__rule, max),
     MS(0, BIG_COUNT),
     .def_doc = "1 for retry, unlimited for switch and fail",
     .doc = "Attempts this rule may add in one request (0 disables it)."},
    {.name = "backoff",
     .scopes = AIR__SC_RULE,
     .type = AIR__T_SECTION,
     .offset = offsetof(air__rule, backoff),
     .sub = AIR__SC_BACKOFF,
     .doc = "Wait before a retry: min(max_ms, base_ms * factor^(n-1))."},
    {.name = "retry_after",
     .scopes = AIR__SC_RULE,
     .type = AIR__T_SECTION,
     .offset = 0,
     .sub = AIR__SC_RETRY_AFTER,
     .doc = "How long a Retry-After hint may make the engine wait."},
    {.name = "to",
     .scopes = AIR__SC_RULE,
     .type = AIR__T_STR,
     .offset = offsetof(air__rule, to),
     .max = 2 * AIR__MAX_NAME_BYTES,
     .check = AIR__CK_TEXT,
     .def_doc = "the next untried target",
     .doc = "switch only: the `provider/model` to switch to; must be one of "
            "the route's targets."},
    {.name = "override",
     .scopes = AIR__SC_RULE,
     .type = AIR__T_OVERRIDE,
     .offset = offsetof(air__rule, override_json),
     .def_doc = "none",
     .doc = "Request fields set on the attempts this rule causes (e.g. "
            "`{max_tokens: 8192}` on `length`)."},

    /* ---- rules[].backoff ------------------------------------------------- */
    {.name = "base_ms",
     .scopes = AIR__SC_BACKOFF,
     .type = AIR__T_U64,
     .offset = offsetof(air__backoff, base_ms),
     MS(0, DAY_MS),
     .def = "500",
     .doc = "The first wait."},
    {.name = "factor",
     .scopes = AIR__SC_BACKOFF,
     .type = AIR__T_DOUBLE,
     .offset = offsetof(air__backoff, factor),
     .dmin = 1.0,
     .dmax = 100.0,
     .def = "2",
     .doc = "Growth of each further wait."},
    {.name = "max_ms",
     .scopes = AIR__SC_BACKOFF,
     .type = AIR__T_U64,
     .offset = offsetof(air__backoff, max_ms),
     MS(0, DAY_MS),
     .def = "8000",
     .doc = "Cap on one wait."},
    {.name = "jitter",
     .scopes = AIR__SC_BACKOFF,
     .type = AIR__T_ENUM,
     .offset = offsetof(air__backoff, jitter),
     .enums = jitter_names,
     .def = "full",
     .doc = "full: uniform in [0, w]; equal: w/2 + uniform in [0, w/2]; "
            "none: w."},

    /* ---- rules[].retry_after --------------------------------------------- */
    {.name = "max_ms",
     .scopes = AIR__SC_RETRY_AFTER,
     .type = AIR__T_U64,
     .offset = offsetof(air__rule, retry_after_max_ms),
     MS(0, DAY_MS),
     .def = "10000",
     .doc = "Longest Retry-After hint the engine sleeps for; a longer one "
            "switches (cooling the target down until it expires)."},
};

_Static_assert(sizeof(opts) / sizeof(opts[0]) <= AIR__MAX_OPTS,
               "raise AIR__MAX_OPTS");

const air__opt *air__config_opts(size_t *n) {
  *n = sizeof(opts) / sizeof(opts[0]);
  return opts;
}

/* docs/design.md §3, verbatim in meaning; parsed by the same code as user
 * rules. */
static const char builtin_rules[] =
    "- on: [rate_limit]\n"
    "  action: retry\n"
    "  max: 2\n"
    "  backoff: {base_ms: 500, factor: 2, max_ms: 8000, jitter: full}\n"
    "  retry_after: {max_ms: 10000}\n"
    "- on: [overloaded, server_error, network, malformed]\n"
    "  action: retry\n"
    "  max: 1\n"
    "  backoff: {base_ms: 250, factor: 2, max_ms: 4000, jitter: full}\n"
    "- on: [rate_limit, overloaded, server_error, network, malformed,\n"
    "       timeout.connect, timeout.first_byte, timeout.first_chunk,\n"
    "       timeout.chunk, timeout.attempt, context_overflow, auth, quota,\n"
    "       not_found, refusal]\n"
    "  action: switch\n"
    "- on: [content_filter, bad_request, length]\n"
    "  action: fail\n";

const char *air__config_builtin_rules(void) {
  return builtin_rules;
}

static const struct {
  unsigned scope;
  const char *path;
  const char *intro;
} scopes[] = {
    {AIR__SC_TOP, "top level", "The keys of the file itself."},
    {AIR__SC_LIMITS, "limits", NULL},
    {AIR__SC_STATE, "state", NULL},
    {AIR__SC_REDIS, "state.redis",
     "Shared state (docs/design.md §3.1, docs/scale-out.md). Without it, state "
     "is per process."},
    {AIR__SC_PROVIDER, "providers[]", "Each provider is one upstream API."},
    {AIR__SC_BREAKER, "breaker",
     "In `defaults.breaker` and `providers[].breaker` (merged over "
     "`defaults.breaker`)."},
    {AIR__SC_DEFAULTS, "defaults",
     "Besides `breaker`, `defaults` holds every policy key of a route "
     "(timeouts, budget, sticky, hedge, continuation, refusal, commit, "
     "max_malformed, "
     "malformed, "
     "rules), listed under routes[]."},
    {AIR__SC_ROUTE, "routes[]",
     "The policy keys are also accepted in `defaults`; every map merges key "
     "by key over `defaults`, lists replace."},
    {AIR__SC_TARGET, "routes[].targets[] (map form)",
     "A target is `provider/model`, or this map when it needs its own "
     "deadlines or request fields."},
    {AIR__SC_TIMEOUTS, "timeouts", "In `defaults` and `routes[]`."},
    {AIR__SC_TARGET_TIMEOUTS, "routes[].targets[].timeouts",
     "Merged over the route's timeouts."},
    {AIR__SC_BUDGET, "budget", NULL},
    {AIR__SC_STICKY, "sticky", "Off by default."},
    {AIR__SC_HEDGE, "hedge",
     "Off by default. In `defaults`, `routes[]` and `routes[].targets[]` "
     "(merged over the route's)."},
    {AIR__SC_CONTINUATION, "continuation",
     "Off by default. In `defaults` and `routes[]` (docs/design.md §3.5)."},
    {AIR__SC_REFUSAL, "refusal", NULL},
    {AIR__SC_RULE, "rules[]",
     "A rule needs at least one matcher (`on`, `status`, `message`); all "
     "the matchers it has must match."},
    {AIR__SC_BACKOFF, "rules[].backoff", "Used by `retry` rules only."},
    {AIR__SC_RETRY_AFTER, "rules[].retry_after", NULL},
    {AIR__SC_TELEMETRY, "telemetry", NULL},
    {AIR__SC_OTLP, "telemetry.otlp",
     "Off unless an endpoint is set here or in the environment."},
};

const char *air__config_scope_path(unsigned scope) {
  for (size_t i = 0; i < sizeof(scopes) / sizeof(scopes[0]); i++)
    if (scopes[i].scope == scope) return scopes[i].path;
  return "?";
}

static void ref_type(FILE *f, const air__opt *o) {
  switch (o->type) {
    case AIR__T_U64:
    case AIR__T_U32:
      fputs("integer", f);
      break;
    case AIR__T_COUNT:
      fputs("integer or `unlimited`", f);
      break;
    case AIR__T_DOUBLE:
      fputs("number", f);
      break;
    case AIR__T_BOOL:
      fputs("boolean", f);
      break;
    case AIR__T_STR:
      fputs("string", f);
      break;
    case AIR__T_ENUM:
      for (size_t i = 0; o->enums[i]; i++)
        fprintf(f, "%s`%s`", i ? ", " : "", o->enums[i]);
      break;
    case AIR__T_SECTION:
    case AIR__T_DEFAULTS:
      fprintf(f, "map (`%s`)", air__config_scope_path(o->sub));
      break;
    case AIR__T_PROVIDERS:
      fputs("list of maps (`providers[]`)", f);
      break;
    case AIR__T_ROUTES:
      fputs("list of maps (`routes[]`)", f);
      break;
    case AIR__T_TARGETS:
      fputs("list of strings or maps", f);
      break;
    case AIR__T_RULES:
      fputs("list of maps (`rules[]`)", f);
      break;
    case AIR__T_REASONS:
      fputs("reason or list of reasons", f);
      break;
    case AIR__T_STATUS:
      fputs("list of statuses", f);
      break;
    case AIR__T_PER_REASON:
      fputs("map reason: count", f);
      break;
    case AIR__T_PHRASES:
      fputs("list of strings", f);
      break;
    case AIR__T_NAMES:
      fputs("list of header names", f);
      break;
    case AIR__T_HEADERS:
      fputs("map name: value", f);
      break;
    case AIR__T_OVERRIDE:
      fputs("map", f);
      break;
  }
}

static void ref_bounds(FILE *f, const air__opt *o) {
  switch (o->type) {
    case AIR__T_U64:
    case AIR__T_U32:
    case AIR__T_COUNT:
    case AIR__T_PER_REASON:
      fprintf(f, "%llu to %llu", (unsigned long long)o->min,
              (unsigned long long)o->max);
      break;
    case AIR__T_DOUBLE:
      fprintf(f, "%g to %g", o->dmin, o->dmax);
      break;
    case AIR__T_STR:
      fprintf(f, "%llu bytes", (unsigned long long)o->max);
      break;
    case AIR__T_PROVIDERS:
    case AIR__T_ROUTES:
    case AIR__T_RULES:
    case AIR__T_PHRASES:
    case AIR__T_NAMES:
    case AIR__T_HEADERS:
    case AIR__T_STATUS:
      fprintf(f, "%llu entries", (unsigned long long)o->max);
      break;
    case AIR__T_TARGETS:
      fprintf(f, "%llu to %llu entries", (unsigned long long)o->min,
              (unsigned long long)o->max);
      break;
    default:
      fputs("", f);
      break;
  }
}

void air__config_reference(FILE *f) {
  size_t n;
  const air__opt *o = air__config_opts(&n);
  for (size_t s = 0; s < sizeof(scopes) / sizeof(scopes[0]); s++) {
    fprintf(f, "### `%s`\n\n", scopes[s].path);
    if (scopes[s].intro) fprintf(f, "%s\n\n", scopes[s].intro);
    fputs(
        "| key | type | default | bounds | meaning |\n"
        "|---|---|---|---|---|\n",
        f);
    for (size_t i = 0; i < n; i++) {
      if (!(o[i].scopes & scopes[s].scope)) continue;
      fprintf(f, "| `%s` | ", o[i].name);
      ref_type(f, &o[i]);
      fputs(" | ", f);
      if (o[i].def)
        fprintf(f, "`%s`", o[i].def);
      else if (o[i].def_doc)
        fputs(o[i].def_doc, f);
      fputs(" | ", f);
      ref_bounds(f, &o[i]);
      fprintf(f, " | %s |\n", o[i].doc);
    }
    fputs("\n", f);
  }
  fputs("### built-in rules\n\n```yaml\n", f);
  fputs(builtin_rules, f);
  fputs("```\n", f);
}
