/* Internals shared by the gateway's files: the process and its workers
 * (gateway.c), the log thread, supervision, and what routing and the
 * endpoints (request.c, endpoint.h) read of them. */
#ifndef AIR__GW_INT_H
#define AIR__GW_INT_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "airetry.h"
#include "policy.h"
#include "exchange.h"
#include "gateway.h"
#include "metrics.h"
#include "otlp.h"
#include "server.h"
#include "transport.h"

/* ---- the log thread (log.c) ---------------------------------------------- */

#define AIR__LOG_RING_BYTES (4u << 20) /* lines waiting for stderr */
/* PIPE_BUF: one write is never interleaved */
#define AIR__LOG_WRITE_BYTES 4096

typedef struct air__log air__log;

/* Starts the process's log thread with room for cap bytes of lines waiting
 * for stderr (two buffers of cap bytes, each touched only as far as the
 * largest backlog). Returns 0, AIR_ENOMEM or AIR_EIO (a lock or the thread
 * refused; no thread then). */
int air__log_start(size_t cap, air__log **out);
/* Hands whole lines over without waiting on stderr (a mutex for a memcpy);
 * a line that does not fit is dropped and counted. Any thread. l NULL or
 * stopped: written at once. */
void air__log_put(air__log *l, const char *p, size_t n);
/* Lines dropped so far (for /metrics). */
const _Atomic uint64_t *air__log_dropped(const air__log *l);
/* Writes every line accepted so far, then ends the thread and frees l. */
void air__log_stop(air__log *l);
/* Writes lines to stderr now, whole, at most AIR__LOG_WRITE_BYTES a write. */
void air__log_write_lines(const char *p, size_t n);

/* ---- lines that never wait on stderr (errline.c) ------------------------- */

/* one line (twice this is at most PIPE_BUF) */
#define AIR__ERRLINE_BYTES 2048

/* A writer of whole lines to stderr that never blocks and never changes
 * stderr's shared file description (errline.c says how); the supervisor's. */
typedef struct air__errline {
  int fd;           /* where lines go: stderr, or a description of its own */
  bool own;         /* fd is this writer's (closed by _close) */
  int how;          /* the way it writes (errline.c) */
  uint64_t dropped; /* lines not written since the last one that was */
} air__errline;

/* Picks the way for the stderr of now; never fails (lines may go nowhere). */
void air__errline_open(air__errline *e);
void air__errline_close(air__errline *e);
/* One line (no newline in p; cut at AIR__ERRLINE_BYTES), or dropped and
 * counted when stderr cannot take it at once. */
void air__errline_put(air__errline *e, const char *p, size_t n);
__attribute__((format(printf, 2, 3))) void air__errline_say(air__errline *e,
                                                            const char *fmt,
                                                            ...);

/* A config snapshot: requests hold a reference, SIGHUP swaps in a new one. */
typedef struct air__gw_cfg {
  air_config *cfg;
  char **keys; /* accepted client keys */
  size_t n_keys;
  bool auth; /* client_keys_env is set: callers need one of keys (none
                set in the environment: every caller is refused) */
  atomic_int refs;
} air__gw_cfg;

typedef struct air__gateway air__gateway;

/* ---- supervision (supervisor.c) ------------------------------------------ */

#define AIR__SUP_BACKLOG 511 /* listen(2) backlog of each socket */
#define AIR__SUP_SLOTS 320   /* request ids tracked in flight */
/* The exit status of a worker (and then its supervisor) stopped at once by
 * a SIGINT during the drain: 128 + SIGINT, as a shell reports Ctrl-C. */
#define AIR__SUP_EXIT_NOW 130

/* One request id in flight: state 0 free, 1 being written, 2 set. */
typedef struct air__sup_slot {
  atomic_uint state;
  char rid[44];
} air__sup_slot;

/* The page the worker writes and the supervisor reads after its death
 * (mmap MAP_SHARED before fork). */
typedef struct air__sup_page {
  atomic_uint untracked; /* in flight but no slot was free */
  air__sup_slot slot[AIR__SUP_SLOTS];
} air__sup_page;

typedef struct air__sup {
  /* In the forked worker: serves on the inherited sockets, writes one
   * byte to ready_fd once it can serve, returns its exit code. It starts
   * with SIGHUP, SIGTERM and SIGINT blocked and unblocks them once it
   * handles them (docs/design.md §5: a repeated SIGTERM and a SIGHUP during the
   * drain are ignored, a SIGINT then stops at once, exit
   * AIR__SUP_EXIT_NOW). */
  int (*worker)(void *data, int ready_fd, uint64_t restarts,
                air__sup_page *page);
  /* In the supervisor, on SIGHUP: validates and keeps the new config (the
   * one later workers start with); true: forward SIGHUP to the worker. */
  bool (*reload)(void *data);
  /* In the supervisor, once, when the first worker is ready. */
  void (*announce)(void *data);
  void *data;
  air__errline *err; /* the supervisor's lines */
  int lock_fd;       /* the address's lock (air__sup_bind), or -1 */
} air__sup;

/* Binds n listening sockets to host (an IP literal) and port with
 * SO_REUSEPORT (port 0: one ephemeral port, shared by all), after taking
 * the address's lock (*lock_fd, -1 for port 0; close it after the
 * sockets). Returns 0 (*bound_port set), AIR_EINVAL (not an IP literal) or
 * AIR_EIO; *err holds the errno, EADDRINUSE when another process (another
 * `airetry serve` or not) listens on the address or holds its lock. On
 * failure no socket is left open. */
int air__sup_bind(const char *host, int port, unsigned n, int *fds,
                  int *lock_fd, int *bound_port, int *err);
/* Runs the supervisor until the worker drained after SIGTERM/SIGINT (0) or
 * the first worker failed to start (its exit status). */
int air__sup_run(air__sup *s);
air__sup_page *air__sup_page_new(void);
void air__sup_page_free(air__sup_page *p);
/* Records a request id in flight; returns the slot for _remove (-1: counted
 * only). Thread-safe, lock-free. */
int air__sup_inflight_add(air__sup_page *p, const char *rid);
void air__sup_inflight_remove(air__sup_page *p, int slot);

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
  uint64_t seed; /* request ids */
  uint64_t seq;
  uv_prepare_t log_flush; /* writes the lines of a loop turn before it waits */
  struct gw_req *pending; /* streamed requests with events to write this turn */
  bool log_ready;
  air__buf log;              /* log lines not yet written */
  uint64_t cfg_gen;          /* the config generation whose limits srv has */
  int listen_fd;             /* the supervisor's socket for this thread */
  air__exchange_pools pools; /* exchanges and legs of ended requests, kept
                                for the next ones: no allocation per
                                request once warm */
  air__pool reqs;            /* the same for chat_ep.c's requests */
} air__gw_worker;

struct air__gateway {
  const char *config_path;
  const char *listen_opt; /* --listen, or NULL */
  bool insecure;
  char host[256]; /* the bound address (supervisor and worker) */
  int port;
  int *fds;              /* n_workers listening sockets */
  air__sup_page *page;   /* worker: its requests in flight */
  air__errline err;      /* the supervisor's lines (the worker inherits it) */
  air__log *log;         /* worker: the log thread */
  air__exporter *traces; /* worker: the trace exporter, NULL when off;
                            its settings are the start's (a reload that
                            changes them is reported, not applied) */
  pthread_mutex_t mu;    /* guards cur, cfg_gen, reload_left */
  air__gw_cfg *cur;
  uint64_t cfg_gen;     /* incremented by each accepted reload */
  unsigned reload_left; /* worker threads yet to apply cfg_gen's limits */
  air_state *state;
  air__metrics *metrics;
  air__gw_worker *w;
  unsigned n_workers;
  atomic_bool stopping;
  atomic_size_t inflight_body; /* body bytes being read by every worker */
  air__http_stats http_stats;  /* every worker's connections (/metrics) */
  uint64_t grace_ms;
  uv_signal_t sig_term, sig_int, sig_hup; /* open until every thread drained */
  uv_async_t drained;       /* the last loop thread ended (main loop) */
  atomic_uint threads_left; /* loop threads not ended yet */
  uv_timer_t tick;          /* the main loop's: the supervisor's liveness, the
                               Redis link's transitions (once each) */
  pid_t sup_pid;            /* worker: its supervisor */
  int state_up;             /* -1 unknown, 0 down, 1 up */
};

/* A new reference to the current config snapshot. */
air__gw_cfg *air__gw_cfg_get(air__gateway *g);
void air__gw_cfg_release(air__gw_cfg *c);

/* The HTTP handler of every worker (data: the air__gw_worker). */
void air__gw_handle(void *data, air__http_req *req,
                    const air__http_request *msg);
/* The head hook of every worker: client auth before the body is read. */
void air__gw_head(void *data, air__http_head *h, const air__http_request *msg);
/* The error-body hook of every worker (air__http_error_body_cb): the
 * errors the HTTP server answers itself in the dialect of the endpoint the
 * request targets. */
bool air__gw_error_body(void *data, air__str target, int status,
                        const char *message, air__buf *out);
/* One log line (with its newline) to stderr: on a worker thread it is
 * written with the other lines of the same loop turn, before the loop
 * waits again; lines are never split or interleaved. */
void air__gw_log(const char *p, size_t n);
/* Tracks a request id in flight for the supervisor's death report;
 * returns the handle for air__gw_inflight_end. */
int air__gw_inflight_begin(air__gw_worker *w, const char *rid);
void air__gw_inflight_end(air__gw_worker *w, int handle);

#endif
