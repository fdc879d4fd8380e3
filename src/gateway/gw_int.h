/* Internals shared by gateway.c (process, workers) and request.c. */
#ifndef AIR_GW_INT_H
#define AIR_GW_INT_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "airetry.h"
#include "config.h"
#include "exchange.h"
#include "gateway.h"
#include "metrics.h"
#include "server.h"
#include "transport.h"

/* A config snapshot: requests hold a reference, SIGHUP swaps in a new one. */
typedef struct air__gw_cfg {
  air_config *cfg;
  char **keys;  /* accepted client keys */
  size_t n_keys;
  bool auth;    /* client_keys_env is set: callers need one of keys (none
                   set in the environment: every caller is refused) */
  atomic_int refs;
} air__gw_cfg;

typedef struct air__gateway air__gateway;

typedef struct air__gw_worker {
  air__gateway *g;
  unsigned id;
  pthread_t thread;
  uv_loop_t loop;
  bool loop_ready;
  uv_async_t async;
  air__http_server *srv;
  air__transport *t;
  bool stop_sent;
  uint64_t seed;  /* request ids */
  uint64_t seq;
  uv_prepare_t log_flush; /* writes the lines of a loop turn before it waits */
  struct gw_req *pending; /* streamed requests with events to write this turn */
  bool log_ready;
  air__buf log;          /* log lines not yet written */
} air__gw_worker;

struct air__gateway {
  const char *config_path;
  pthread_mutex_t mu;  /* guards cur */
  air__gw_cfg *cur;
  air_state *state;
  air__metrics *metrics;
  air__gw_worker *w;
  unsigned n_workers;
  atomic_bool stopping;
  atomic_size_t inflight_body;  /* body bytes being read by every worker */
  uint64_t grace_ms;
  uv_signal_t sig_term, sig_int, sig_hup;
};

/* A new reference to the current config snapshot. */
air__gw_cfg *air__gw_cfg_get(air__gateway *g);
void air__gw_cfg_release(air__gw_cfg *c);

/* The HTTP handler of every worker (data: the air__gw_worker). */
void air__gw_handle(void *data, air__http_req *req, const air__http_request *msg);
/* The head hook of every worker: client auth before the body is read. */
void air__gw_head(void *data, air__http_head *h, const air__http_request *msg);
/* One log line (with its newline) to stderr: on a worker thread it is
 * written with the other lines of the same loop turn, before the loop
 * waits again; lines are never split or interleaved. */
void air__gw_log(const char *p, size_t n);
/* Writes the streamed events the worker's requests produced this loop turn. */
void air__gw_flush(air__gw_worker *w);

#endif
