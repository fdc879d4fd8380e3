/*
 * Gateway metrics in the Prometheus text format (docs/design.md §5): requests
 * by route and outcome, attempts by target and reason, retries, switches,
 * breaker state per target, and histograms of time to first content, total
 * time and gateway self-time. One object shared by every worker thread for
 * the life of the process (across reloads, so counters never go back).
 *
 * Labels are only names the request's config defines: a model that is not
 * a route, and a "provider/model" that no route lists, count as "other".
 * The request path takes no lock: series are found in a hash table read
 * without locks and counted with relaxed atomics; a lock is taken only the
 * first time a configured name is counted, and by air__metrics_render.
 */
#ifndef AIR__GW_METRICS_H
#define AIR__GW_METRICS_H

#include <stdatomic.h>
#include <stdint.h>

#include "airetry.h"
#include "buf.h"
#include "policy.h"

typedef struct air__http_stats air__http_stats; /* src/http/server.h */

typedef struct air__metrics air__metrics;

int air__metrics_new(air__metrics **out);
void air__metrics_free(air__metrics *m);

/*
 * One finished request. cfg: the config snapshot the request ran under
 * (borrowed for the call; nothing of it is kept), which decides whether
 * model and the log's targets are labelled by name or as "other". outcome:
 * "ok", "error", "error_after_commit", "aborted", "rejected" (anything else
 * is counted as "other"). Thread-safe, lock-free once each name was seen.
 */
void air__metrics_request(air__metrics *m, const air_config *cfg,
                          const char *model, const char *outcome,
                          const air_attempt *log, size_t n,
                          uint64_t first_content_ms, uint64_t total_ms,
                          uint64_t self_ms, unsigned malformed);

/* One continuation attempt (docs/design.md §3.5) of a request to route, on
 * target, with outcome "joined", "failed" or "prefill_rejected" (anything
 * else is not counted): airetry_continuations_total. Names cfg does not
 * define count as "other". Thread-safe as air__metrics_request. */
void air__metrics_continuation(air__metrics *m, const air_config *cfg,
                               const char *route, const char *target,
                               const char *outcome);

/* The number of times the supervisor replaced a dead worker process before
 * this one started (docs/design.md §5, Supervision); rendered as
 * airetry_worker_restarts_total. Set once, at worker start. */
void air__metrics_set_worker_restarts(air__metrics *m, uint64_t n);

/* Renders *dropped (log lines the log thread's ring had no room for) as
 * airetry_log_lines_dropped_total; the counter outlives m. */
void air__metrics_watch_log_drops(air__metrics *m,
                                  const _Atomic uint64_t *dropped);

/* Renders *exported and *dropped (trace spans, otlp.h) as
 * airetry_trace_spans_exported_total and airetry_trace_spans_dropped_total
 * (0 while tracing is off); the counters must outlive m's renders. */
void air__metrics_watch_traces(air__metrics *m,
                               const _Atomic uint64_t *exported,
                               const _Atomic uint64_t *dropped);

/* Renders the HTTP servers' shared counters (server.h) as
 * airetry_http_read_ahead_bytes, airetry_http_output_queued_bytes,
 * airetry_http_output_refused_total and airetry_http_write_timeouts_total;
 * st must outlive m's renders. */
void air__metrics_watch_http(air__metrics *m, const air__http_stats *st);

/* Appends the exposition text; breaker states are read from st at now_ms for
 * the targets counted so far. Returns 0 or the first append error as it is
 * (AIR_ETOOBIG, AIR_ENOMEM; then out is as it was, its error kept); a
 * buffer that already holds an error returns that error, untouched. */
int air__metrics_render(air__metrics *m, air_state *st, uint64_t now_ms,
                        air__buf *out);

#endif
