/*
 * The gateway: process setup, workers, signals and config reload. The
 * per-request work (endpoints, auth, the exchange and its translation to
 * the caller's dialect) is in request.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "gw_int.h"

/* ---- config snapshots ---------------------------------------------------------- */

static void print_diag(void *data, const air_diag *d) {
  int *errors = data;
  if (d->severity == AIR_DIAG_ERROR) (*errors)++;
  fprintf(stderr, "%s:%d:%d: %s%s\n", d->file, d->line, d->column,
          d->severity == AIR_DIAG_ERROR ? "" : "warning: ", d->message);
}

/* Splits the comma-separated keys of the client_keys_env variable. */
static int load_keys(air__gw_cfg *c) {
  const char *var = c->cfg->client_keys_env;
  if (var == NULL) return 0;
  c->auth = true;  /* fail closed: an unset or empty variable accepts no one */
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

static air__gw_cfg *cfg_load(const char *path, int *errors) {
  air_config *cfg = NULL;
  *errors = 0;
  if (air_config_load(path, print_diag, errors, &cfg) != 0 || cfg == NULL) {
    if (*errors == 0) {
      fprintf(stderr, "airetry serve: cannot read %s\n", path);
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

/* ---- the request log --------------------------------------------------------------- */

#define LOG_FLUSH_BYTES (64u << 10)  /* written at once past this */
#define LOG_WRITE_BYTES 4096         /* PIPE_BUF: one write is never interleaved */

static _Thread_local air__gw_worker *log_worker;

/* Writes whole lines to stderr, at most LOG_WRITE_BYTES per write (a line
 * longer than that alone), so lines of two workers never mix. */
static void write_lines(const char *p, size_t n) {
  while (n > 0) {
    size_t k = n;
    if (k > LOG_WRITE_BYTES) {
      k = LOG_WRITE_BYTES;
      while (k > 0 && p[k - 1] != '\n') k--;
      if (k == 0) {
        const char *nl = memchr(p, '\n', n);
        k = nl ? (size_t)(nl - p) + 1 : n;
      }
    }
    size_t done = 0;
    while (done < k) {
      ssize_t w = write(STDERR_FILENO, p + done, k - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return; /* stderr is gone: the lines are dropped */
      done += (size_t)w;
    }
    p += k;
    n -= k;
  }
}

static void flush_log(air__gw_worker *w) {
  if (w->log.n == 0) return;
  write_lines(w->log.p, w->log.n);
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
    write_lines(p, n);
    return;
  }
  if (air__buf_add(&w->log, p, n) != 0) {
    flush_log(w);
    if (air__buf_add(&w->log, p, n) != 0) write_lines(p, n);
  }
  if (w->log.n >= LOG_FLUSH_BYTES) flush_log(w);
}

static void log_close(air__gw_worker *w) {
  if (!w->log_ready) return;
  flush_log(w);
  w->log_ready = false;
  uv_close((uv_handle_t *)&w->log_flush, NULL);
}

/* ---- workers -------------------------------------------------------------------- */

static void on_server_stopped(void *data) {
  air__gw_worker *w = data;
  log_close(w);
  air__transport_free(w->t);
  w->t = NULL;
  uv_close((uv_handle_t *)&w->async, NULL);
}

static void on_worker_async(uv_async_t *a) {
  air__gw_worker *w = a->data;
  if (atomic_load(&w->g->stopping) && !w->stop_sent) {
    w->stop_sent = true;
    if (air__http_server_stop(w->srv, on_server_stopped, w) != 0)
      on_server_stopped(w);
  }
}

static void *worker_main(void *arg) {
  air__gw_worker *w = arg;
  log_worker = w;
  uv_run(&w->loop, UV_RUN_DEFAULT);
  flush_log(w);
  log_worker = NULL;
  return NULL;
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

static int worker_init(air__gateway *g, air__gw_worker *w, unsigned id,
                       const char *host, int port) {
  const air_config *cfg = g->cur->cfg;
  w->g = g;
  w->id = id;
  w->seed = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL) ^ ((uint64_t)id << 56);
  if (uv_loop_init(&w->loop) != 0) return AIR_ENOMEM;
  w->loop_ready = true;
  uv_async_init(&w->loop, &w->async, on_worker_async);
  w->async.data = w;
  air__buf_init(&w->log, 1u << 20);
  uv_prepare_init(&w->loop, &w->log_flush);
  w->log_flush.data = w;
  uv_prepare_start(&w->log_flush, on_log_flush);
  uv_unref((uv_handle_t *)&w->log_flush); /* never keeps the loop alive */
  w->log_ready = true;
  int rc = air__transport_new(&w->loop, NULL, &w->t);
  if (rc != 0) return rc;
  air__http_config hc;
  air__http_config_init(&hc);
  hc.host = host;
  hc.port = port;
  hc.reuseport = true;
  hc.max_body_bytes = cfg->limits.max_body_bytes;
  hc.max_header_bytes = cfg->limits.max_header_bytes;
  hc.max_connections =
      (cfg->limits.max_connections + g->n_workers - 1) / g->n_workers;
  hc.idle_timeout_ms = cfg->limits.idle_timeout_ms;
  if (cfg->limits.request_timeout_ms) hc.request_timeout_ms = cfg->limits.request_timeout_ms;
  hc.on_head = air__gw_head;
  hc.max_inflight_body_bytes = cfg->limits.max_inflight_body_bytes;
  hc.inflight_body = &g->inflight_body;
  rc = air__http_server_new(&w->loop, &hc, air__gw_handle, w, &w->srv);
  if (rc != 0) return rc;
  int uv_err = 0;
  rc = air__http_server_listen(w->srv, &uv_err);
  if (rc != 0) {
    fprintf(stderr, "airetry serve: cannot listen on %s:%d: %s\n", host, port,
            uv_strerror(uv_err));
    return rc;
  }
  return 0;
}

/* ---- signals -------------------------------------------------------------------- */

static void on_stop_signal(uv_signal_t *s, int signum) {
  air__gateway *g = s->data;
  fprintf(stderr, "airetry serve: %s: stopping (grace %llu ms)\n",
          signum == SIGINT ? "SIGINT" : "SIGTERM",
          (unsigned long long)g->grace_ms);
  atomic_store(&g->stopping, true);
  for (unsigned i = 0; i < g->n_workers; i++) uv_async_send(&g->w[i].async);
  uv_close((uv_handle_t *)&g->sig_term, NULL);
  uv_close((uv_handle_t *)&g->sig_int, NULL);
  uv_close((uv_handle_t *)&g->sig_hup, NULL);
}

static void on_hup(uv_signal_t *s, int signum) {
  (void)signum;
  air__gateway *g = s->data;
  int errors = 0;
  air__gw_cfg *c = cfg_load(g->config_path, &errors);
  if (c == NULL) {
    fprintf(stderr, "airetry serve: SIGHUP: %s has %d error%s; keeping the "
                    "running config\n",
            g->config_path, errors, errors == 1 ? "" : "s");
    return;
  }
  pthread_mutex_lock(&g->mu);
  air__gw_cfg *old = g->cur;
  g->cur = c;
  pthread_mutex_unlock(&g->mu);
  air__gw_cfg_release(old);
  fprintf(stderr, "airetry serve: SIGHUP: reloaded %s (%zu routes)\n",
          g->config_path, c->cfg->n_routes);
}

/* ---- run ------------------------------------------------------------------------ */

int air__gateway_run(const air__gateway_opts *o) {
  air__gateway g;
  memset(&g, 0, sizeof(g));
  g.config_path = o->config_path;
  int errors = 0;
  g.cur = cfg_load(o->config_path, &errors);
  if (g.cur == NULL) return 2;
  const char *listen = o->listen ? o->listen : air_config_listen(g.cur->cfg);
  char host[256];
  int port = 0;
  if (split_listen(listen, host, sizeof(host), &port) != 0) {
    fprintf(stderr, "airetry serve: bad listen address '%s' (HOST:PORT)\n", listen);
    air__gw_cfg_release(g.cur);
    return 2;
  }
  if (!is_loopback(host) && g.cur->n_keys == 0 && !o->insecure) {
    fprintf(stderr,
            "airetry serve: refusing to listen on %s without client keys "
            "(set client_keys_env, or pass --insecure)\n", host);
    air__gw_cfg_release(g.cur);
    return 2;
  }
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return 1;
  pthread_mutex_init(&g.mu, NULL);
  atomic_init(&g.stopping, false);
  atomic_init(&g.inflight_body, 0);
  g.grace_ms = AIR_HTTP_DEFAULT_SHUTDOWN_TIMEOUT_MS;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  g.n_workers = o->workers ? o->workers : (cores > 0 ? (unsigned)cores : 1);
  if (g.n_workers > 64) g.n_workers = 64;
  g.w = calloc(g.n_workers, sizeof(air__gw_worker));
  int rc = g.w ? air_state_new(g.cur->cfg, &g.state) : AIR_ENOMEM;
  if (rc == 0) rc = air__metrics_new(&g.metrics);
  int bound = port;
  for (unsigned i = 0; rc == 0 && i < g.n_workers; i++) {
    rc = worker_init(&g, &g.w[i], i, host, bound);
    if (rc == 0 && i == 0) bound = air__http_server_port(g.w[0].srv);
  }
  int exit_code = 0;
  if (rc != 0) {
    exit_code = 1;
  } else {
    uv_loop_t *main_loop = uv_default_loop();
    uv_signal_init(main_loop, &g.sig_term);
    uv_signal_init(main_loop, &g.sig_int);
    uv_signal_init(main_loop, &g.sig_hup);
    g.sig_term.data = g.sig_int.data = g.sig_hup.data = &g;
    uv_signal_start(&g.sig_term, on_stop_signal, SIGTERM);
    uv_signal_start(&g.sig_int, on_stop_signal, SIGINT);
    uv_signal_start(&g.sig_hup, on_hup, SIGHUP);
    signal(SIGPIPE, SIG_IGN);
    /* Only now, with every signal handled, is the gateway ready. */
    bool v6 = strchr(host, ':') != NULL;
    printf("listening on http://%s%s%s:%d\n", v6 ? "[" : "", host, v6 ? "]" : "",
           bound);
    fflush(stdout);
    for (unsigned i = 0; i < g.n_workers; i++)
      pthread_create(&g.w[i].thread, NULL, worker_main, &g.w[i]);
    uv_run(main_loop, UV_RUN_DEFAULT);
    for (unsigned i = 0; i < g.n_workers; i++) pthread_join(g.w[i].thread, NULL);
    uv_loop_close(main_loop);
    fprintf(stderr, "airetry serve: stopped\n");
  }
  for (unsigned i = 0; g.w && i < g.n_workers; i++) {
    air__gw_worker *w = &g.w[i];
    if (!w->loop_ready) continue;
    if (rc != 0) {
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
  }
  free(g.w);
  air__metrics_free(g.metrics);
  air_state_free(g.state);
  air__gw_cfg_release(g.cur);
  pthread_mutex_destroy(&g.mu);
  curl_global_cleanup();
  return exit_code;
}
