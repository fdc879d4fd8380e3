/*
 * Every named maximum of airetry in one place (docs/style.md §5). Crossing one
 * is a typed error (AIR_ETOOBIG or a config diagnostic), never a crash.
 */
#ifndef AIR__LIMITS_H
#define AIR__LIMITS_H

#define AIR__MAX_CONFIG_BYTES (4u << 20) /* one config file */
#define AIR__MAX_NAME_BYTES 256          /* route, provider, target names */
/* "provider/model" + NUL */
#define AIR__MAX_TARGET_BYTES (2 * AIR__MAX_NAME_BYTES + 1)
#define AIR__MAX_PROVIDERS 256
#define AIR__MAX_ROUTES 4096
#define AIR__MAX_TARGETS 64         /* targets in one route */
#define AIR__MAX_RULES 64           /* rules in one route */
#define AIR__MAX_STATUS_MATCHERS 16 /* status: entries in one rule */
#define AIR__MAX_PHRASES 256        /* refusal phrases in one route */
#define AIR__MAX_PHRASE_BYTES 512   /* one refusal phrase */
#define AIR__MAX_HEADERS 64         /* extra/forwarded headers */
#define AIR__MAX_ATTEMPT_LOG 10000  /* attempts recorded per request */
#define AIR__MAX_HEDGES 3           /* hedge.max: hedges of one request */
#define AIR__MAX_RACERS (1 + AIR__MAX_HEDGES) /* attempts in flight at once */
#define AIR__MAX_CONTINUATIONS 16             /* continuation.max */
/* continuation.max_sent_bytes: 1 MiB */
#define AIR__DEFAULT_CONT_SENT_BYTES 1048576
#define AIR__MAX_CONT_SENT_BYTES (64u << 20) /* its largest value */
/* a learned continuation style lives 24 h */
#define AIR__CONT_LEARNED_MS 86400000ull
/* a failure message kept in the log */
#define AIR__MAX_MESSAGE_BYTES 1024
#define AIR__MAX_STATE_TARGETS 65536 /* records of names no route lists */
/* such a record untouched this long, with nothing open or leased, is evicted */
#define AIR__STATE_IDLE_MS 600000ull
/* a hint longer is clipped */
#define AIR__MAX_RETRY_AFTER_MS (86400000ull * 7)
#define AIR__MAX_SSE_LINE_BYTES (1u << 20)  /* one event-stream line */
#define AIR__MAX_SSE_EVENT_BYTES (4u << 20) /* one event's data */
#define AIR__MAX_SSE_RAW_BYTES (8u << 20)   /* one event's bytes as received */
/* held before commit (first_content) */
#define AIR__MAX_HOLD_BYTES (4u << 20)
/* one whole attempt (commit: complete) */
#define AIR__MAX_COMPLETE_BYTES (64u << 20)
/* a whole (non-stream) 200 body */
#define AIR__MAX_RESPONSE_BYTES (64u << 20)
#define AIR__MAX_HOLD_EVENTS 65536         /* events held before commit */
#define AIR__MAX_REQUEST_BYTES (64u << 20) /* one upstream request body */
/* one answer, aggregated or encoded */
#define AIR__MAX_ANSWER_BYTES (64u << 20)
/* air_chat_result.body (escaped) */
#define AIR__MAX_RESULT_BODY_BYTES (256u << 20)
#define AIR__MAX_MODEL_VALUE_BYTES (1u << 20) /* a request's "model" value */
/* an error body kept or written */
#define AIR__MAX_ERROR_BODY_BYTES (1u << 20)
/* an upstream response head */
#define AIR__MAX_RESPONSE_HEAD_BYTES (64u << 10)
/* our upstream header lines */
#define AIR__MAX_UPSTREAM_HEADER_BYTES (64u << 10)
/* our upstream header lines, counted: the provider's and the forwarded
 * ones (AIR__MAX_HEADERS) and ours */
#define AIR__MAX_UPSTREAM_HEADERS (AIR__MAX_HEADERS + 16)
#define AIR__MAX_URL_BYTES (8u << 10) /* an upstream URL */
/* GET /v1/responses/{id}: the id, and the query */
#define AIR__MAX_RESPONSE_ID_BYTES 256
#define AIR__MAX_KEPT_HEADER_BYTES (16u << 10) /* response headers kept */
#define AIR__MAX_KEPT_HEADERS 32               /* and their count */
/* an upstream's request id kept in a failure */
#define AIR__MAX_UPSTREAM_REQUEST_ID_BYTES 127
/* an attempt's failure strings */
#define AIR__MAX_FAILURE_TEXT_BYTES (8u << 10)
#define AIR__MAX_FORWARD_BYTES (64u << 10) /* forwarded caller header lines */
#define AIR__MAX_LOG_LINE_BYTES (1u << 20) /* one gateway log line */
#define AIR__MAX_MODELS_LIST_BYTES (16u << 20) /* GET /v1/models */
#define AIR__MAX_METRICS_BYTES (64u << 20)     /* GET /metrics */
/* a worker's lines of one loop turn */
#define AIR__MAX_LOG_TURN_BYTES (1u << 20)
/* the log thread gathers lines this long per write */
#define AIR__LOG_GATHER_MS 10
#define AIR__MAX_EVENT_PARTS 4096 /* parts decoded from one event */
/* The most bytes of a kept chunk shape (OpenAI chat fast path, its length
 * included): one chunk's bytes around its text, ~200 for OpenAI's own. */
#define AIR__FAST_SHAPE_MAX_BYTES 511
#define AIR__MAX_OTLP_ENDPOINT_BYTES 2048 /* the traces URL */
#define AIR__MAX_OTLP_HEADERS 32          /* export headers (OTEL_*_HEADERS) */
#define AIR__MAX_OTLP_HEADERS_BYTES (8u << 10) /* their text, encoded */
#define AIR__MAX_SERVICE_NAME_BYTES 256        /* OTEL_SERVICE_NAME */
#define AIR__MAX_FINISH_NAME_BYTES 32 /* a finish reason kept for a span */
/* An upstream answer's identifiers (dialect.h, "identifiers"): its id,
 * model name and tool call ids are kept whole up to this; a longer one is
 * replaced, never a failure. */
#define AIR__MAX_IDENT_BYTES 4096
/* A finish reason and a tool name carry meaning: a longer one makes the
 * event (or body) malformed and the attempt fails. */
#define AIR__MAX_FINISH_REASON_BYTES 64
#define AIR__MAX_TOOL_NAME_BYTES 1024
#define AIR__MAX_SPAN_BYTES (16u << 10) /* one span encoded as OTLP JSON */
/* a span's status message (upstream text) */
#define AIR__MAX_SPAN_MESSAGE_BYTES 512
#define AIR__MAX_TRACE_QUEUE_BYTES \
  (4u << 20)                           /* encoded spans waiting for export */
#define AIR__MAX_TRACE_BATCH_SPANS 512 /* spans in one export request */
#define AIR__MAX_TRACE_BATCH_BYTES (1u << 20) /* one export request's spans */
#define AIR__MAX_OTLP_WAIT_MS 60000 /* OTEL_BSP_SCHEDULE_DELAY, *_TIMEOUT */
#define AIR__OTLP_DELAY_MS 1000     /* default batch delay */
#define AIR__OTLP_TIMEOUT_MS 2000   /* default export timeout */
#define AIR__POOL_MAX                        \
  32 /* per-request structures kept per loop \
        thread for the next requests (pool.h) */

/* The shared state in Redis (docs/design.md §3.1, src/state/redis.c). */
/* state.redis.url and url_env's value */
#define AIR__MAX_REDIS_URL_BYTES 2048
#define AIR__MAX_REDIS_HOST_BYTES 256   /* the host part of that URL */
#define AIR__MAX_REDIS_SECRET_BYTES 512 /* its user or password, decoded */
#define AIR__MAX_REDIS_PREFIX_BYTES 64  /* state.redis.prefix */
/* one key (prefix + kind + name + hash) */
#define AIR__MAX_REDIS_KEY_BYTES 1024
/* commands outstanding; past it dropped */
#define AIR__MAX_REDIS_QUEUE 4096
/* connect / command timeout option */
#define AIR__MAX_REDIS_TIMEOUT_MS 60000
#define AIR__MAX_REDIS_MESSAGE_BYTES 2048 /* one published change */
#define AIR__MAX_REDIS_SCAN_KEYS 256      /* keys read per SCAN batch */

/* messages of one canonical request */
#define AIR__MAX_CANON_MSGS (1u << 20)
#define AIR__MAX_CANON_PARTS (1u << 16) /* parts of one canonical message */
#define AIR__MAX_CANON_TOOLS 4096       /* tools of one canonical request */
/* output items of one Responses answer */
#define AIR__MAX_RESPONSES_ITEMS 4096
#define AIR__MAX_CANON_STOP 1024 /* stop sequences of one request */
/* fields only the caller's dialect has */
#define AIR__MAX_CANON_EXTRAS 4096
/* a field name in an error message */
#define AIR__MAX_CANON_FIELD_BYTES 256

/* The gateway's request limits (`limits:`, docs/design.md §4): defaults (plain
 * decimals: the option table writes them as its default text) and the
 * largest value each option accepts. */
#define AIR__DEFAULT_MAX_BODY_BYTES 33554432           /* 32 MiB */
#define AIR__DEFAULT_MAX_QUEUED_BYTES 67108864         /* 64 MiB unsent */
#define AIR__DEFAULT_MAX_INFLIGHT_BODY_BYTES 268435456 /* 256 MiB */
/* 256 MiB unsent, process */
#define AIR__DEFAULT_MAX_OUTPUT_QUEUE_BYTES 268435456
/* a client reads nothing */
#define AIR__DEFAULT_CLIENT_WRITE_TIMEOUT_MS 60000
/* 64 MiB whole upstream body */
#define AIR__DEFAULT_MAX_RESPONSE_BYTES 67108864
#define AIR__MAX_BODY_BYTES_LIMIT (1ull << 30)          /* 1 GiB */
#define AIR__MAX_HEADER_BYTES_LIMIT (1ull << 24)        /* 16 MiB */
#define AIR__MAX_INFLIGHT_BODY_BYTES_LIMIT (1ull << 40) /* 1 TiB */
#define AIR__MAX_OUTPUT_QUEUE_BYTES_LIMIT (1ull << 40)  /* 1 TiB */
#define AIR__MAX_RESPONSE_BYTES_LIMIT (1ull << 30)      /* 1 GiB */

#endif
