/*
 * Trace context, pure (docs/design.md §5, Traces): W3C `traceparent` parsing
 * and formatting, span ids, and the parent-based ratio sampler. No I/O, no
 * clock, no randomness of its own: callers hand in random bits (the net
 * layer reads them from getrandom). The span model itself is air_span
 * (include/airetry/drive.h); turning one into OTLP JSON is the gateway's.
 */
#ifndef AIR__TRACE_H
#define AIR__TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "00-" 32 hex "-" 16 hex "-" 2 hex: the length of a version-00 header. */
#define AIR__TRACEPARENT_LEN 55

/* One span's place in a trace: the ids as bytes and the sampled flag. */
typedef struct air__span_ctx {
  uint8_t trace_id[16]; /* never all zero once valid */
  uint8_t span_id[8];   /* never all zero once valid */
  uint8_t flags;        /* W3C trace-flags; bit 0: sampled */
} air__span_ctx;

/*
 * Parses a traceparent header value of n bytes (W3C Trace Context level 1,
 * section 3.2), strictly: lowercase hex only; version 00 must be exactly 55
 * bytes; a later version (not ff) may carry more after a '-' at byte 55,
 * which is ignored; an all-zero trace id or parent id is invalid. Returns 0
 * and fills *out, or AIR_EPARSE (then the caller starts a new trace).
 */
int air__traceparent_parse(const char *p, size_t n, air__span_ctx *out);

/* Writes the version-00 header of c into out (AIR__TRACEPARENT_LEN + 1
 * bytes, NUL-terminated). */
void air__traceparent_format(const air__span_ctx *c, char *out);

/* Lowercase hex of n bytes into out (2n + 1 bytes, NUL-terminated). */
void air__hex(const uint8_t *p, size_t n, char *out);

/* Whether n bytes are all zero (an invalid id). */
bool air__id_zero(const uint8_t *p, size_t n);

/*
 * The span id of attempt `attempt` (1-based) of a request whose attempt ids
 * derive from the 64-bit random `base`: a splitmix64 step of base + attempt,
 * never zero. The exchange sends it upstream in traceparent while the
 * attempt runs and the span builder names the attempt's span with it
 * afterwards, so neither keeps a table of ids.
 */
void air__span_id_derive(uint64_t base, unsigned attempt, uint8_t out[8]);

/* The sampler of OTEL_TRACES_SAMPLER: `ratio` of new traces (0 to 1), and
 * with parent_based a continued trace follows its parent's sampled flag. */
typedef struct air__sampler {
  bool parent_based;
  double ratio;
} air__sampler;

/*
 * Whether a span of trace_id is recorded and exported. parent: the incoming
 * context, or NULL for a new trace. Deterministic (OpenTelemetry's
 * TraceIdRatioBased): the last 8 bytes of the trace id, read big-endian and
 * shifted right by one, below ratio * 2^63 — so every service with the
 * same ratio keeps the same traces.
 */
bool air__sample(const air__sampler *s, const air__span_ctx *parent,
                 const uint8_t trace_id[16]);

#endif
