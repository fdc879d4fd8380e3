/*
 * Tracing settings (docs/design.md §5, Traces): the standard OpenTelemetry
 * variables resolved over telemetry.otlp of the config file into
 * air__otel (policy.h) when a config is loaded, and their `airetry check`
 * summary. The rules, key by key (an empty variable counts as unset):
 *
 * - endpoint: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given, else
 *   OTEL_EXPORTER_OTLP_ENDPOINT + "/v1/traces", else telemetry.otlp.endpoint
 *   + "/v1/traces" (unless its path ends so already); none: tracing off.
 *   OTEL_SDK_DISABLED=true turns it off whatever is set.
 * - headers: OTEL_EXPORTER_OTLP_TRACES_HEADERS, else
 *   OTEL_EXPORTER_OTLP_HEADERS, else the variable telemetry.otlp.headers_env
 *   names: "k=v,k=v", each key and value percent-decoded and trimmed.
 * - service.name: OTEL_SERVICE_NAME, else "airetry".
 * - sampler: OTEL_TRACES_SAMPLER (always_on, always_off, traceidratio,
 *   parentbased_always_on, parentbased_always_off, parentbased_traceidratio)
 *   with OTEL_TRACES_SAMPLER_ARG (the ratio, default 1), else
 *   parentbased_traceidratio with telemetry.otlp.sample_ratio.
 * - protocol: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
 *   OTEL_EXPORTER_OTLP_PROTOCOL: http/json (sent), http/protobuf (a
 *   warning; JSON is sent), grpc or anything else: an error.
 * - batching: OTEL_BSP_SCHEDULE_DELAY (default 1000 ms, not the SDKs'
 *   5000: a gateway's spans should show up soon) and
 *   OTEL_EXPORTER_OTLP_TRACES_TIMEOUT / OTEL_EXPORTER_OTLP_TIMEOUT (default
 *   2000 ms, short: the exporter never retries).
 */
#ifndef AIR__CONFIG_TELEMETRY_H
#define AIR__CONFIG_TELEMETRY_H

#include <stdio.h>

#include "policy.h"

/* The environment as the resolver sees it (tests pass a table). */
typedef const char *(*air__env_fn)(void *data, const char *name);
/* One problem: error (the config does not load) or warning. */
typedef void (*air__otel_diag_fn)(void *data, bool error, const char *msg);

/*
 * Resolves f and the environment into *out (zeroed first). Every problem is
 * reported through diag; returns 0, AIR_ECONFIG (an error was reported) or
 * AIR_ENOMEM. *out holds what was resolved in every case; free it with
 * air__otel_cleanup.
 */
int air__otel_resolve(const air__telemetry_file *f, air__env_fn env,
                      void *env_data, air__otel *out, air__otel_diag_fn diag,
                      void *diag_data);
void air__otel_cleanup(air__otel *o);

/* getenv(3) as an air__env_fn. */
const char *air__env_getenv(void *data, const char *name);

/* The resolved settings as YAML comment lines for `airetry check`: header
 * names only, never their values; a URL's user:password part hidden. */
void air__otel_dump(const air__otel *o, FILE *f);

#endif
