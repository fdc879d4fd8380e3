/*
 * The gateway: process setup, workers, signals and config reload. The
 * per-request work is routing and auth (request.c) and the endpoints
 * (endpoint.h: chat_ep.c, plain_ep.c, local_ep.c).
 */
#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "backoff.h"
#include "endpoint.h"
#include "gw_int.h"
#include "limits.h"
#include "redis.h"
#include "state.h"

/* ---- lines --------------------------------------------------------------- */

/* Where a line of this file goes: stderr as it is (a start, before any
 * worker: nothing to keep alive), the supervisor's writer (never waits on
 * stderr) or the worker's log thread (never on a loop). */
typedef enum { TO_STDERR, TO_SUP, TO_LOG } line_to;

static void put_line(air__gateway *g, line_to to, const char *p, size_t n);

__attribute__((format(printf, 3, 0))) static void vline(air__gateway *g,
                                                        line_to to,
                                                        const char *fmt,
                                                        va_list ap) {
  char buf[AIR__ERRLINE_BYTES];
  int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  if (n < 0) return;
  put_line(g, to, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

/* One line to `to`, printf-style, cut at AIR__ERRLINE_BYTES. */
__attribute__((format(printf, 3, 4))) static void line(air__gateway *g,
                                                       line_to to,
                                                       const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vline(g, to, fmt, ap);
  va_end(ap);
}

/* ---- config snapshots ---------------------------------------------------- */

typedef struct diag_out {
  air__gateway *g;
  line_to to;
  int errors; /* counted */
  bool quiet; /* errors only (the worker re-reads a file the supervisor
                 already reported on) */
} diag_out;

static void print_diag(void *data, const air_diag *d) {
  diag_out *o = data;
  if (d->severity == AIR_DIAG_ERROR)
    o->errors++;
  else if (o->quiet)
    return;
  line(o->g, o->to, "%s:%d:%d: %s%s", d->file, d->line, d->column,
       d->severity == AIR_DIAG_ERROR ? "" : "warning: ", d->message);
}

/* Splits the comma-separated keys of the client_keys_env variable. */
static int load_keys(air__gw_cfg *c) {
  const char *var = c->cfg->client_keys_env;
  if (var == NULL) return 0;
  c->auth = true; /* fail closed: an unset or empty variable accepts no one */
  const char *v = getenv(var);
  if (v == NULL || *v == '\0') return 0;
  size_t n = 1;
  for (const char *p = v; *p; p++) n += *p == ',';
  c->keys = calloc(n, sizeof(char *));
  if (c->keys == NULL) return AIR_ENOMEM;
  const char *p = v;
  while (*p) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    while (len > 0 && (*p == ' ' || *p == '\t')) p++, len--;
    while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
    if (len > 0) {
      char *k = malloc(len + 1);
      if (k == NULL) return AIR_ENOMEM;
      memcpy(k, p, len);
      k[len] = '\0';
      c->keys[c->n_keys++] = k;
    }
    if (e == NULL) break;
    p = e + 1;
  }
  return 0;
}

/* Loads path; its diagnostics go to `to` (errors only when quiet). */
static air__gw_cfg *cfg_load(air__gateway *g, line_to to, const char *path,
                             int *errors, bool quiet) {
  air_config *cfg = NULL;
  diag_out o = {g, to, 0, quiet};
  *errors = 0;
  int rc = air_config_load(path, print_diag, &o, &cfg);
  *errors = o.errors;
  if (rc != 0 || cfg == NULL) {
    if (*errors == 0) {
      line(g, to, "airetry serve: cannot read %s", path);
      *errors = 1;
    }
    return NULL;
  }
  air__gw_cfg *c = calloc(1, sizeof(*c));
  if (c == NULL) {
    air_config_free(cfg);
    *errors = 1;
    return NULL;
  }
  c->cfg = cfg;
  atomic_init(&c->refs, 1);
  if (load_keys(c) != 0) {
    air__gw_cfg_release(c);
    *errors = 1;
    return NULL;
  }
  return c;
}

void air__gw_cfg_release(air__gw_cfg *c) {
  if (c == NULL || atomic_fetch_sub(&c->refs, 1) != 1) return;
  for (size_t i = 0; i < c->n_keys; i++) free(c->keys[i]);
  free(c->keys);
  air_config_free(c->cfg);
  free(c);
}

air__gw_cfg *air__gw_cfg_get(air__gateway *g) {
  pthread_mutex_lock(&g->mu);
  air__gw_cfg *c = g->cur;
  atomic_fetch_add(&c->refs, 1);
  pthread_mutex_unlock(&g->mu);
  return c;
}

/* ---- the request log ----------------------------------------------------- */

#define LOG_FLUSH_BYTES (64u << 10) /* handed to the log thread past this */
/* the main loop's tick (Redis link, supervisor) */
#define TICK_MS 100u

static _Thread_local air__gw_worker *log_worker;
static _Thread_local air__log *log_ring; /* the worker process's main thread */

/* The turn's lines go to the log thread: never a write(2) on a loop. */
static void flush_log(air__gw_worker *w) {
  if (w->log.n == 0) return;
  air__log_put(w->g->log, w->log.p, w->log.n);
  air__buf_reset(&w->log);
}

/* Before the loop waits: the turn's streamed events, then its log lines. */
static void on_log_flush(uv_prepare_t *h) {
  air__gw_flush(h->data);
  flush_log(h->data);
}

void air__gw_log(const char *p, size_t n) {
  air__gw_worker *w = log_worker;
  if (w == NULL || !w->log_ready) {
    air__log_put(w ? w->g->log : log_ring, p, n);
    return;
  }
  if (air__buf_add(&w->log, p, n) != 0) {
    flush_log(w);
    if (air__buf_add(&w->log, p, n) != 0) air__log_put(w->g->log, p, n);
  }
  if (w->log.n >= LOG_FLUSH_BYTES) flush_log(w);
}

static void put_line(air__gateway *g, line_to to, const char *p, size_t n) {
  if (to == TO_SUP) {
    air__errline_put(&g->err, p, n);
  } else if (to == TO_LOG) {
    char buf[AIR__ERRLINE_BYTES + 1];
    if (n > AIR__ERRLINE_BYTES) n = AIR__ERRLINE_BYTES;
    memcpy(buf, p, n);
    buf[n++] = '\n';
    air__gw_log(buf, n);
  } else {
    fprintf(stderr, "%.*s\n", (int)n, p);
  }
}

/* One line of the worker process's own (signals, reloads) through the log
 * thread; printf-style, cut at AIR__ERRLINE_BYTES. */
__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vline(NULL, TO_LOG, fmt, ap);
  va_end(ap);
}

static void log_close(air__gw_worker *w) {
  if (!w->log_ready) return;
  flush_log(w);
  w->log_ready = false;
  uv_close((uv_handle_t *)&w->log_flush, NULL);
}

/* Host and port of "HOST:PORT" / "[V6]:PORT" into host (brackets dropped). */
static int split_listen(const char *s, char *host, size_t hn, int *port) {
  const char *colon = strrchr(s, ':');
  if (colon == NULL) return AIR_EINVAL;
  size_t len = (size_t)(colon - s);
  const char *h = s;
  if (len >= 2 && h[0] == '[' && h[len - 1] == ']') {
    h++;
    len -= 2;
  }
  if (len == 0 || len >= hn) return AIR_EINVAL;
  memcpy(host, h, len);
  host[len] = '\0';
  char *end = NULL;
  long p = strtol(colon + 1, &end, 10);
  if (end == colon + 1 || *end != '\0' || p < 0 || p > 65535) return AIR_EINVAL;
  *port = (int)p;
  return 0;
}

static bool is_loopback(const char *host) {
  return strcmp(host, "127.0.0.1") == 0 || strncmp(host, "127.", 4) == 0 ||
         strcmp(host, "::1") == 0 || strcmp(host, "localhost") == 0;
}

/* The check a start and a reload share (docs/design.md §5): without client keys
 * only a loopback address, unless --insecure. Logs the refusal to `to`. */
static bool keys_ok(air__gateway *g, line_to to, const air__gw_cfg *c,
                    const char *what) {
  if (is_loopback(g->host) || c->n_keys > 0 || g->insecure) return true;
  line(g, to,
       "airetry serve: %srefusing to listen on %s without client keys "
       "(set client_keys_env, or pass --insecure)%s",
       what, g->host, *what ? "; keeping the running config" : "");
  return false;
}

/* The HTTP limits of cfg for one of the n worker threads. */
static void http_limits(const air__gateway *g, const air_config *cfg,
                        air__http_config *hc) {
  hc->max_body_bytes = cfg->limits.max_body_bytes;
  hc->max_header_bytes = cfg->limits.max_header_bytes;
  hc->max_connections =
      (cfg->limits.max_connections + g->n_workers - 1) / g->n_workers;
  hc->idle_timeout_ms = cfg->limits.idle_timeout_ms;
  if (cfg->limits.request_timeout_ms)
    hc->request_timeout_ms = cfg->limits.request_timeout_ms;
  hc->max_inflight_body_bytes = cfg->limits.max_inflight_body_bytes;
  hc->max_output_queue_bytes = cfg->limits.max_output_queue_bytes;
  hc->write_timeout_ms = cfg->limits.client_write_timeout_ms;
}

int air__gw_inflight_begin(air__gw_worker *w, const char *rid) {
  return air__sup_inflight_add(w->g->page, rid);
}

void air__gw_inflight_end(air__gw_worker *w, int handle) {
  air__sup_inflight_remove(w->g->page, handle);
}

/* ---- worker threads ------------------------------------------------------ */

static void on_server_stopped(void *data) {
  air__gw_worker *w = data;
  log_close(w);
  air__transport_free(w->t);
  w->t = NULL;
  uv_close((uv_handle_t *)&w->async, NULL);
}

/* Applies the limits of a reloaded config to new connections; the last
 * thread to do so logs the reload, so the line means "in force". */
static void apply_reload(air__gw_worker *w) {
  air__gateway *g = w->g;
  pthread_mutex_lock(&g->mu);
  if (g->cfg_gen == w->cfg_gen) {
    pthread_mutex_unlock(&g->mu);
    return;
  }
  air__http_config hc;
  air__http_config_init(&hc);
  http_limits(g, g->cur->cfg, &hc);
  air__http_server_set_limits(w->srv, &hc);
  w->cfg_gen = g->cfg_gen;
  bool last = g->reload_left > 0 && --g->reload_left == 0;
  size_t routes = g->cur->cfg->n_routes;
  pthread_mutex_unlock(&g->mu);
  if (last)
    say("airetry serve: SIGHUP: reloaded %s (%zu routes)", g->config_path,
        routes);
}

static void on_worker_async(uv_async_t *a) {
  air__gw_worker *w = a->data;
  if (atomic_load(&w->g->stopping)) {
    if (!w->stop_sent) {
      w->stop_sent = true;
      if (air__http_server_stop(w->srv, on_server_stopped, w) != 0)
        on_server_stopped(w);
    }
    return;
  }
  apply_reload(w);
}

static void *worker_main(void *arg) {
  air__gw_worker *w = arg;
  log_worker = w;
  uv_run(&w->loop, UV_RUN_DEFAULT);
  flush_log(w);
  log_worker = NULL;
  /* The last thread to end lets the main loop close its signal handles. */
  if (atomic_fetch_sub(&w->g->threads_left, 1) == 1)
    uv_async_send(&w->g->drained);
  return NULL;
}

/* Request ids must differ between worker processes, even two forked in
 * the same second with a recycled pid: pid, restart count, the realtime
 * clock in ns and the thread index, mixed. */
static uint64_t worker_seed(unsigned id, uint64_t restarts) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t x = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_sec * 1000000000u ^
               (uint64_t)ts.tv_nsec ^ (restarts << 48) ^ ((uint64_t)id << 56);
  return air__splitmix64(&x);
}

static int worker_init(air__gateway *g, air__gw_worker *w, unsigned id,
                       uint64_t restarts) {
  const air_config *cfg = g->cur->cfg;
  w->g = g;
  w->id = id;
  w->seed = worker_seed(id, restarts);
  w->cfg_gen = g->cfg_gen;
  w->listen_fd = g->fds[id];
  if (uv_loop_init(&w->loop) != 0) return AIR_EIO;
  w->loop_ready = true;
  uv_async_init(&w->loop, &w->async, on_worker_async);
  w->async.data = w;
  air__buf_init(&w->log, AIR__MAX_LOG_TURN_BYTES);
  uv_prepare_init(&w->loop, &w->log_flush);
  w->log_flush.data = w;
  uv_prepare_start(&w->log_flush, on_log_flush);
  uv_unref((uv_handle_t *)&w->log_flush); /* never keeps the loop alive */
  w->log_ready = true;
  int rc = air__transport_new(&w->loop, NULL, &w->t);
  if (rc != 0) return rc;
  air__http_config hc;
  air__http_config_init(&hc);
  hc.host = g->host;
  hc.port = g->port;
  http_limits(g, cfg, &hc);
  hc.on_head = air__gw_head;
  hc.error_body = air__gw_error_body;
  hc.inflight_body = &g->inflight_body;
  hc.stats = &g->http_stats;
  rc = air__http_server_new(&w->loop, &hc, air__gw_handle, w, &w->srv);
  if (rc != 0) return rc;
  int uv_err = 0;
  /* The socket is the supervisor's; this process's copy is the server's. */
  rc = air__http_server_listen_fd(w->srv, w->listen_fd, &uv_err);
  w->listen_fd = -1;
  if (rc != 0) {
    fprintf(stderr, "airetry serve: cannot listen on %s:%d: %s\n", g->host,
            g->port, uv_strerror(uv_err));
    return rc;
  }
  return 0;
}

/* ---- signals (in the worker process) ------------------------------------- */

/* The worker's signals (docs/design.md §5). The first SIGTERM or SIGINT starts
 * the drain. During it the handles stay open, so no signal meets its
 * default action (which would cut every stream): a SIGTERM or SIGHUP is
 * logged and ignored (systemd's control-group kill, a logrotate reload,
 * the supervisor passing on a signal this process got too), and a SIGINT
 * stops at once (a terminal's second Ctrl-C). Only the main thread takes
 * them: every other thread keeps them blocked. */

/* Starts the drain (main thread, once): every loop thread stops its
 * server; the main loop ends once the last of them ended (on_drained). */
static void begin_stop(air__gateway *g, const char *why) {
  say("airetry serve: %s: stopping (grace %llu ms)", why,
      (unsigned long long)g->grace_ms);
  atomic_store(&g->stopping, true);
  for (unsigned i = 0; i < g->n_workers; i++) uv_async_send(&g->w[i].async);
  uv_close((uv_handle_t *)&g->tick, NULL);
}

static void on_stop_signal(uv_signal_t *s, int signum) {
  air__gateway *g = s->data;
  if (!atomic_load(&g->stopping)) {
    begin_stop(g, signum == SIGINT ? "SIGINT" : "SIGTERM");
  } else if (signum == SIGINT) {
    /* Through the supervisor's writer (never waits on stderr); the lines
     * still queued for the log thread are lost with the streams. */
    air__errline_say(&g->err,
                     "airetry serve: worker %ld: SIGINT during the "
                     "drain: stopping at once",
                     (long)getpid());
    _exit(AIR__SUP_EXIT_NOW);
  } else {
    say("airetry serve: SIGTERM: already stopping; ignored (SIGINT stops at "
        "once)");
  }
}

/* Every loop thread has ended: the main loop closes its handles and ends. */
static void on_drained(uv_async_t *a) {
  air__gateway *g = a->data;
  uv_close((uv_handle_t *)&g->sig_term, NULL);
  uv_close((uv_handle_t *)&g->sig_int, NULL);
  uv_close((uv_handle_t *)&g->sig_hup, NULL);
  if (!uv_is_closing((uv_handle_t *)&g->tick))
    uv_close((uv_handle_t *)&g->tick, NULL);
  uv_close((uv_handle_t *)&g->drained, NULL);
}

/* Every TICK_MS until the drain: the supervisor is still this process's
 * parent (else the drain starts: an orphan never serves unsupervised; the
 * supervisor's death also sends SIGTERM, PR_SET_PDEATHSIG, and this is
 * the check behind it), and a line when the shared state's Redis link
 * comes up or goes down (once per transition, never per request). */
static void on_tick(uv_timer_t *t) {
  air__gateway *g = t->data;
  if (getppid() != g->sup_pid) {
    begin_stop(g, "the supervisor is gone");
    return;
  }
  air__redis_stats s;
  if (air__state_redis_stats(g->state, &s) != 0) return;
  int up = s.up ? 1 : 0;
  if (up == g->state_up) return;
  if (up || g->state_up == 1)
    say("airetry serve: state: redis link %s%s", up ? "up" : "down",
        up ? "" : "; running on this instance's state until it is back");
  g->state_up = up;
}

/* Swaps in c (a validated snapshot) and asks every thread to apply its
 * limits. */
static void swap_cfg(air__gateway *g, air__gw_cfg *c) {
  pthread_mutex_lock(&g->mu);
  air__gw_cfg *old = g->cur;
  g->cur = c;
  g->cfg_gen++;
  air__state_configure(g->state, c->cfg);
  g->reload_left = g->n_workers;
  pthread_mutex_unlock(&g->mu);
  air__gw_cfg_release(old);
}

/* Whether two resolved tracing settings are the same (header values
 * included, compared, never printed). */
static bool otel_same(const air__otel *a, const air__otel *b) {
  if (a->enabled != b->enabled) return false;
  if (!a->enabled) return true;
  if (strcmp(a->endpoint, b->endpoint) != 0 ||
      strcmp(a->service_name, b->service_name) != 0 ||
      a->sampler.parent_based != b->sampler.parent_based ||
      a->sampler.ratio != b->sampler.ratio || a->delay_ms != b->delay_ms ||
      a->timeout_ms != b->timeout_ms || a->n_headers != b->n_headers)
    return false;
  for (size_t i = 0; i < a->n_headers; i++)
    if (strcmp(a->headers[i].name, b->headers[i].name) != 0 ||
        strcmp(a->headers[i].value, b->headers[i].value) != 0)
      return false;
  return true;
}

/* The worker's reload: the supervisor validated the file and reported on
 * it already; this re-reads it (errors only are printed, as the file may
 * have changed in between) and applies it. */
static void on_hup(uv_signal_t *s, int signum) {
  (void)signum;
  air__gateway *g = s->data;
  if (atomic_load(&g->stopping)) {
    say("airetry serve: SIGHUP: stopping; ignored");
    return;
  }
  int errors = 0;
  air__gw_cfg *c = cfg_load(g, TO_LOG, g->config_path, &errors, true);
  if (c == NULL) {
    say("airetry serve: SIGHUP: %s has %d error%s; keeping the running config",
        g->config_path, errors, errors == 1 ? "" : "s");
    return;
  }
  if (!keys_ok(g, TO_LOG, c, "SIGHUP: ")) {
    air__gw_cfg_release(c);
    return;
  }
  if (!otel_same(&g->cur->cfg->otel, &c->cfg->otel))
    say("airetry serve: SIGHUP: tracing settings changed: they need a restart; "
        "the running ones stay in force");
  swap_cfg(g, c);
  for (unsigned i = 0; i < g->n_workers; i++) uv_async_send(&g->w[i].async);
}

/* ---- the worker process -------------------------------------------------- */

static void worker_cleanup(air__gateway *g, bool ran) {
  for (unsigned i = 0; g->w && i < g->n_workers; i++) {
    air__gw_worker *w = &g->w[i];
    if (!w->loop_ready) continue;
    if (!ran) {
      /* Never ran: close what was opened on this loop. */
      if (w->srv) {
        air__http_server_stop(w->srv, NULL, NULL);
        uv_run(&w->loop, UV_RUN_NOWAIT);
      }
      if (w->t) air__transport_free(w->t);
      log_close(w);
      uv_close((uv_handle_t *)&w->async, NULL);
      uv_run(&w->loop, UV_RUN_DEFAULT);
    }
    if (w->srv) air__http_server_free(w->srv);
    uv_loop_close(&w->loop);
    air__buf_cleanup(&w->log);
    air__exchange_pools_cleanup(&w->pools); /* every request has ended */
    air__pool_cleanup(&w->reqs);
  }
  free(g->w);
  g->w = NULL;
  air__metrics_free(g->metrics);
  air_state_free(g->state);
}

static int worker_process(void *data, int ready_fd, uint64_t restarts,
                          air__sup_page *page) {
  air__gateway *g = data;
  g->page = page;
  g->sup_pid = getppid(); /* the supervisor checked it is its own (spawn) */
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return 1;
  g->w = calloc(g->n_workers, sizeof(air__gw_worker));
  int rc = g->w ? air__log_start(AIR__LOG_RING_BYTES, &g->log) : AIR_ENOMEM;
  log_ring = g->log;
  air_error serr = {0};
  if (rc == 0) {
    rc = air_state_new(g->cur->cfg, &g->state, &serr);
    if (rc != 0) say("airetry serve: %s", serr.message);
  }
  if (rc == 0) rc = air__metrics_new(&g->metrics);
  if (rc == 0) {
    air__metrics_set_worker_restarts(g->metrics, restarts);
    air__metrics_watch_log_drops(g->metrics, air__log_dropped(g->log));
    air__metrics_watch_http(g->metrics, &g->http_stats);
  }
  if (rc == 0 && g->cur->cfg->otel.enabled) {
    rc = air__exporter_start(&g->cur->cfg->otel, &g->traces);
    if (rc == 0)
      air__metrics_watch_traces(g->metrics, air__exporter_exported(g->traces),
                                air__exporter_dropped(g->traces));
    else
      fprintf(stderr, "airetry serve: cannot start the trace exporter: %s\n",
              air_strerror(rc));
  }
  for (unsigned i = 0; rc == 0 && i < g->n_workers; i++)
    rc = worker_init(g, &g->w[i], i, restarts);
  int exit_code = 0;
  bool ran = false;
  if (rc != 0) {
    exit_code = 1;
  } else {
    uv_loop_t *main_loop = uv_default_loop();
    uv_signal_init(main_loop, &g->sig_term);
    uv_signal_init(main_loop, &g->sig_int);
    uv_signal_init(main_loop, &g->sig_hup);
    g->sig_term.data = g->sig_int.data = g->sig_hup.data = g;
    uv_signal_start(&g->sig_term, on_stop_signal, SIGTERM);
    uv_signal_start(&g->sig_int, on_stop_signal, SIGINT);
    uv_signal_start(&g->sig_hup, on_hup, SIGHUP);
    uv_async_init(main_loop, &g->drained, on_drained);
    g->drained.data = g;
    uv_timer_init(main_loop, &g->tick);
    g->tick.data = g;
    g->state_up = -1;
    uv_timer_start(&g->tick, on_tick, TICK_MS, TICK_MS);
    signal(SIGPIPE, SIG_IGN);
    atomic_store(&g->threads_left, g->n_workers);
    unsigned started = 0;
    for (; started < g->n_workers; started++) {
      int e = pthread_create(&g->w[started].thread, NULL, worker_main,
                             &g->w[started]);
      if (e != 0) {
        fprintf(stderr, "airetry serve: cannot start worker thread %u: %s\n",
                started, strerror(e));
        break;
      }
    }
    ran = true;
    /* Every thread started with the stop signals blocked (the supervisor
     * forks with them blocked): from here they come to this thread only,
     * one at a time, in the order they were sent. */
    sigset_t stop_set;
    sigemptyset(&stop_set);
    sigaddset(&stop_set, SIGHUP);
    sigaddset(&stop_set, SIGTERM);
    sigaddset(&stop_set, SIGINT);
    pthread_sigmask(SIG_UNBLOCK, &stop_set, NULL);
    if (started == g->n_workers) {
      /* Every signal is handled and every thread runs: ready to serve. */
      unsigned char b = 1;
      ssize_t w = write(ready_fd, &b, 1);
      (void)w;
      uv_run(main_loop, UV_RUN_DEFAULT);
    } else {
      /* Stop the threads that started; the ones that did not never ran
       * their loop, which worker_cleanup closes. */
      exit_code = 1;
      atomic_store(&g->stopping, true);
      for (unsigned i = 0; i < started; i++) uv_async_send(&g->w[i].async);
      uv_close((uv_handle_t *)&g->tick, NULL);
      if (atomic_fetch_sub(&g->threads_left, g->n_workers - started) ==
          g->n_workers - started)
        uv_async_send(&g->drained); /* none started */
      uv_run(main_loop, UV_RUN_DEFAULT);
      for (unsigned i = started; i < g->n_workers; i++) {
        air__gw_worker *w = &g->w[i];
        air__http_server_stop(w->srv, NULL, NULL);
        uv_run(&w->loop, UV_RUN_NOWAIT);
        if (w->t) air__transport_free(w->t);
        w->t = NULL;
        log_close(w);
        uv_close((uv_handle_t *)&w->async, NULL);
        uv_run(&w->loop, UV_RUN_DEFAULT);
      }
    }
    for (unsigned i = 0; i < started; i++) pthread_join(g->w[i].thread, NULL);
    uv_loop_close(main_loop);
    if (exit_code == 0) say("airetry serve: stopped");
  }
  close(ready_fd);
  /* Every request has ended: their spans are queued; one last export. */
  air__exporter_stop(g->traces);
  g->traces = NULL;
  worker_cleanup(g, ran);
  /* Last: every line accepted so far reaches stderr before the exit. */
  log_ring = NULL;
  air__log_stop(g->log);
  g->log = NULL;
  curl_global_cleanup();
  return exit_code;
}

/* ---- the supervisor's side ----------------------------------------------- */

/* SIGHUP in the supervisor: the new config must pass every check a start
 * would (docs/design.md §5, Reload); a changed listen is reported, not applied.
 */
static bool sup_reload(void *data) {
  air__gateway *g = data;
  int errors = 0;
  air__gw_cfg *c = cfg_load(g, TO_SUP, g->config_path, &errors, false);
  if (c == NULL) {
    line(g, TO_SUP,
         "airetry serve: SIGHUP: %s has %d error%s; keeping the "
         "running config",
         g->config_path, errors, errors == 1 ? "" : "s");
    return false;
  }
  if (!keys_ok(g, TO_SUP, c, "SIGHUP: ")) {
    air__gw_cfg_release(c);
    return false;
  }
  const char *was = air_config_listen(g->cur->cfg);
  const char *now = air_config_listen(c->cfg);
  if (strcmp(was, now) != 0) {
    if (g->listen_opt != NULL)
      line(g, TO_SUP,
           "airetry serve: SIGHUP: listen changed (%s -> %s), but "
           "--listen %s is in force; not applied",
           was, now, g->listen_opt);
    else
      line(g, TO_SUP,
           "airetry serve: SIGHUP: listen changed (%s -> %s): "
           "needs a restart; still listening on %s:%d",
           was, now, g->host, g->port);
  }
  swap_cfg(g, c);
  return true;
}

static void announce(void *data) {
  air__gateway *g = data;
  bool v6 = strchr(g->host, ':') != NULL;
  printf("listening on http://%s%s%s:%d\n", v6 ? "[" : "", g->host,
         v6 ? "]" : "", g->port);
  fflush(stdout);
}

int air__gateway_run(const air__gateway_opts *o) {
  air__gateway g;
  memset(&g, 0, sizeof(g));
  g.config_path = o->config_path;
  g.listen_opt = o->listen;
  g.insecure = o->insecure;
  int errors = 0;
  g.cur = cfg_load(&g, TO_STDERR, o->config_path, &errors, false);
  if (g.cur == NULL) return 2;
  const char *listen = o->listen ? o->listen : air_config_listen(g.cur->cfg);
  if (split_listen(listen, g.host, sizeof(g.host), &g.port) != 0) {
    fprintf(stderr, "airetry serve: bad listen address '%s' (HOST:PORT)\n",
            listen);
    air__gw_cfg_release(g.cur);
    return 2;
  }
  if (!keys_ok(&g, TO_STDERR, g.cur, "")) {
    air__gw_cfg_release(g.cur);
    return 2;
  }
  pthread_mutex_init(&g.mu, NULL);
  atomic_init(&g.stopping, false);
  atomic_init(&g.inflight_body, 0);
  air__http_stats_init(&g.http_stats);
  g.grace_ms = AIR__HTTP_DEFAULT_SHUTDOWN_TIMEOUT_MS;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  g.n_workers = o->workers ? o->workers : (cores > 0 ? (unsigned)cores : 1);
  if (g.n_workers > 64) g.n_workers = 64;
  int exit_code = 1;
  g.fds = calloc(g.n_workers, sizeof(int));
  int err = 0;
  int lock_fd = -1;
  int rc = g.fds ? air__sup_bind(g.host, g.port, g.n_workers, g.fds, &lock_fd,
                                 &g.port, &err)
                 : AIR_ENOMEM;
  bool v6 = strchr(g.host, ':') != NULL;
  if (rc == AIR_EINVAL) {
    fprintf(stderr, "airetry serve: bad listen address '%s' (an IP address)\n",
            listen);
    exit_code = 2;
  } else if (rc != 0 && err == EADDRINUSE) {
    fprintf(stderr,
            "airetry serve: %s%s%s:%d is in use (another airetry serve, or "
            "another program, listens there): refusing to share it\n",
            v6 ? "[" : "", g.host, v6 ? "]" : "", g.port);
  } else if (rc != 0) {
    fprintf(stderr, "airetry serve: cannot listen on %s:%d: %s\n", g.host,
            g.port, strerror(err));
  } else {
    air__errline_open(&g.err);
    air__sup sup = {worker_process, sup_reload, announce, &g, &g.err, lock_fd};
    exit_code = air__sup_run(&sup);
    air__errline_close(&g.err);
    for (unsigned i = 0; i < g.n_workers; i++) close(g.fds[i]);
    if (lock_fd >= 0) close(lock_fd);
  }
  free(g.fds);
  air__gw_cfg_release(g.cur);
  pthread_mutex_destroy(&g.mu);
  return exit_code;
}
