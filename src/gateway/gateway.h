/*
 * `airetry serve`: the OpenAI- and Anthropic-compatible gateway (docs/design.md
 * §5). A supervisor process binds one listening socket per worker thread
 * (SO_REUSEPORT on one port) and forks a worker process, replaced when it
 * dies (supervisor.c). In the worker, threads each run one uv loop with an
 * HTTP server on its socket and one upstream transport; they share the
 * config (reloaded on SIGHUP), the breaker/sticky state, the metrics and
 * the log thread (log.c). Every caller
 * request becomes an exchange (src/net/exchange.h); the gateway adds
 * routing, auth, limits, dialect translation, metrics and the log line.
 */
#ifndef AIR__GATEWAY_H
#define AIR__GATEWAY_H

#include <stdbool.h>

typedef struct air__gateway_opts {
  const char *config_path;
  const char *listen; /* overrides the config's listen; NULL: keep */
  bool insecure;      /* allow a non-loopback listen without client keys */
  unsigned workers;   /* 0: one per core */
} air__gateway_opts;

/*
 * Runs until SIGTERM or SIGINT, then stops accepting, lets requests in
 * flight finish (up to the grace period) and returns the exit code: 0 after
 * a clean stop, 2 for a config or usage error, 1 when it cannot listen or
 * the first worker cannot start. The first line on stdout is "listening on
 * http://HOST:PORT", printed once a worker can serve. Forks: call it from
 * a single-threaded process.
 */
int air__gateway_run(const air__gateway_opts *o);

#endif
