/*
 * OpenTelemetry trace export (docs/design.md §5, Traces): air_span records as
 * OTLP/HTTP JSON (the pure encoder) and the exporter thread that POSTs
 * them in batches.
 *
 * Encoding rules of OTLP/HTTP JSON (opentelemetry-proto's JSON mapping):
 * trace and span ids are lowercase hex strings (not base64); 64-bit
 * integers — times in nanoseconds, intValue attributes — are decimal
 * strings; enums are integers (span kind SERVER 2, CLIENT 3; status code
 * UNSET 0, ERROR 2); field names are lowerCamelCase; a root span has no
 * parentSpanId. The resource carries service.name.
 *
 * The exporter is fed by a bounded ring of encoded spans: a worker hands a
 * span over under a mutex held for a memcpy, never waits on the network,
 * and a span that does not fit is dropped and counted. One thread takes
 * batches (AIR__MAX_TRACE_BATCH_SPANS spans or AIR__MAX_TRACE_BATCH_BYTES,
 * or whatever is there after the schedule delay) and POSTs each once with
 * libcurl under the export timeout; a batch the collector does not accept
 * with a 2xx (an error status, a refused connection, a timeout) is dropped
 * and counted. Nothing is retried, so a dead or stalled collector costs at
 * most one timeout per batch and a full ring, never a blocked request or
 * growing memory.
 */
#ifndef AIR__GW_OTLP_H
#define AIR__GW_OTLP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "airetry.h"
#include "buf.h"
#include "policy.h"

/*
 * Appends s as one OTLP JSON span object. request_id (may be NULL): the
 * gateway's request id, an attribute of the request span. Returns 0 or the
 * buffer's error (AIR_ETOOBIG, AIR_ENOMEM), out then as it was.
 */
int air__otlp_span(const air_span *s, const char *request_id, air__buf *out);

/*
 * Appends an ExportTraceServiceRequest for service holding the span
 * objects spans (n bytes: objects separated by '\n', the ring's form).
 * Returns 0 or the buffer's error.
 */
int air__otlp_request(const char *service, const char *spans, size_t n,
                      air__buf *out);

typedef struct air__exporter air__exporter;

/* Starts the export thread for the settings o (copied). Returns 0,
 * AIR_ENOMEM or AIR_EIO (a handle, lock or thread refused). */
int air__exporter_start(const air__otel *o, air__exporter **out);
/* The sampler the exporter's settings name. */
const air__sampler *air__exporter_sampler(const air__exporter *e);
/* Hands one encoded span over (any thread, never blocks on I/O); a span
 * that does not fit in the ring is dropped and counted. */
void air__exporter_put(air__exporter *e, const char *span, size_t n);
/* Spans the collector accepted, and spans dropped (ring full, or their
 * batch failed); they outlive nothing: read them while e lives. */
const _Atomic uint64_t *air__exporter_exported(const air__exporter *e);
const _Atomic uint64_t *air__exporter_dropped(const air__exporter *e);
/* Exports what is queued (one last try, under the export timeout), ends
 * the thread and frees e. NULL: nothing. */
void air__exporter_stop(air__exporter *e);

#endif
