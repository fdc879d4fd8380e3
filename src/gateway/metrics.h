/*
 * Gateway metrics in the Prometheus text format (DESIGN.md 5): requests by
 * route and outcome, attempts by target and reason, retries, switches,
 * breaker state per target, and histograms of time to first content, total
 * time and gateway self-time. One object shared by every worker thread; each
 * call takes its mutex briefly (one update per finished request).
 */
#ifndef AIR_GW_METRICS_H
#define AIR_GW_METRICS_H

#include <stdatomic.h>
#include <stdint.h>

#include "airetry.h"
#include "buf.h"

typedef struct air__metrics air__metrics;

int air__metrics_new(air__metrics **out);
void air__metrics_free(air__metrics *m);

/* One finished request. outcome: "ok", "error", "aborted", "rejected". */
void air__metrics_request(air__metrics *m, const char *route,
                          const char *outcome, const air_attempt *log,
                          size_t n, uint64_t first_content_ms,
                          uint64_t total_ms, uint64_t self_ms,
                          unsigned malformed);

/* The number of times the supervisor replaced a dead worker process before
 * this one started (DESIGN.md 5, Supervision); rendered as
 * airetry_worker_restarts_total. Set once, at worker start. */
void air__metrics_set_worker_restarts(air__metrics *m, uint64_t n);

/* Renders *dropped (log lines the log thread's ring had no room for) as
 * airetry_log_lines_dropped_total; the counter outlives m. */
void air__metrics_watch_log_drops(air__metrics *m,
                                  const _Atomic uint64_t *dropped);

/* Appends the exposition text; breaker states are read from st at now_ms for
 * the targets seen so far. Returns 0 or a buf error. */
int air__metrics_render(air__metrics *m, air_state *st, uint64_t now_ms,
                        air__buf *out);

#endif
