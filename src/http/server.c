/*
 * The listener and the server's lifecycle: new, listen, stop, free. The
 * connections themselves live in conn.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

#include "airetry.h"
#include "http_int.h"

/* glibc hides SO_REUSEPORT under strict _POSIX_C_SOURCE; Linux's value. */
#if !defined(SO_REUSEPORT) && defined(__linux__)
#define SO_REUSEPORT 15
#endif

void air__http_config_init(air__http_config *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->host = "127.0.0.1";
  cfg->port = 8080;
  cfg->backlog = 511;
  cfg->max_body_bytes = AIR__HTTP_DEFAULT_MAX_BODY_BYTES;
  cfg->max_header_bytes = AIR__HTTP_DEFAULT_MAX_HEADER_BYTES;
  cfg->max_headers = AIR__HTTP_DEFAULT_MAX_HEADERS;
  cfg->max_connections = AIR__HTTP_DEFAULT_MAX_CONNECTIONS;
  cfg->max_pending_bytes = AIR__HTTP_DEFAULT_MAX_PENDING_BYTES;
  cfg->max_queued_bytes = AIR__HTTP_DEFAULT_MAX_QUEUED_BYTES;
  cfg->idle_timeout_ms = AIR__HTTP_DEFAULT_IDLE_TIMEOUT_MS;
  cfg->request_timeout_ms = AIR__HTTP_DEFAULT_REQUEST_TIMEOUT_MS;
  cfg->linger_ms = AIR__HTTP_DEFAULT_LINGER_MS;
  cfg->shutdown_timeout_ms = AIR__HTTP_DEFAULT_SHUTDOWN_TIMEOUT_MS;
  cfg->max_inflight_body_bytes = AIR__HTTP_DEFAULT_MAX_INFLIGHT_BODY_BYTES;
  cfg->max_output_queue_bytes = AIR__HTTP_DEFAULT_MAX_OUTPUT_QUEUE_BYTES;
  cfg->write_timeout_ms = AIR__HTTP_DEFAULT_WRITE_TIMEOUT_MS;
}

/* Copies the host literal, without the brackets of "[::1]", and resolves
 * it (no name lookup: literals only). */
static int parse_host(air__http_server *s, const char *host, int port) {
  if (host == NULL || port < 0 || port > 65535) return AIR_EINVAL;
  size_t n = strlen(host);
  if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
    host++;
    n -= 2;
  }
  if (n == 0 || n > AIR__HTTP_MAX_HOST_BYTES) return AIR_EINVAL;
  memcpy(s->host, host, n);
  s->host[n] = '\0';
  memset(&s->addr, 0, sizeof(s->addr));
  if (uv_ip4_addr(s->host, port, (struct sockaddr_in *)&s->addr) == 0) return 0;
  if (uv_ip6_addr(s->host, port, (struct sockaddr_in6 *)&s->addr) == 0)
    return 0;
  return AIR_EINVAL;
}

int air__http_server_new(uv_loop_t *loop, const air__http_config *cfg,
                         air__http_handler on_request, void *data,
                         air__http_server **out) {
  *out = NULL;
  if (loop == NULL || cfg == NULL || on_request == NULL) return AIR_EINVAL;
  if (cfg->max_header_bytes == 0 || cfg->max_headers == 0 ||
      cfg->max_connections == 0 || cfg->backlog <= 0)
    return AIR_EINVAL;
  air__http_server *s = calloc(1, sizeof(*s));
  if (s == NULL) return AIR_ENOMEM;
  int rc = parse_host(s, cfg->host, cfg->port);
  if (rc != 0) {
    free(s);
    return rc;
  }
  s->slab = malloc(AIR__HTTP_READ_BYTES);
  if (s->slab == NULL) {
    free(s);
    return AIR_ENOMEM;
  }
  s->loop = loop;
  s->cfg = *cfg;
  s->cfg.host = s->host;
  atomic_init(&s->own_inflight, 0);
  s->inflight = cfg->inflight_body ? cfg->inflight_body : &s->own_inflight;
  air__http_stats_init(&s->own_stats);
  s->stats = cfg->stats ? cfg->stats : &s->own_stats;
  if (s->cfg.max_pending_bytes < AIR__HTTP_READ_BYTES)
    s->cfg.max_pending_bytes = AIR__HTTP_READ_BYTES;
  s->on_request = on_request;
  s->data = data;
  *out = s;
  return 0;
}

static void free_handle(uv_handle_t *h) {
  free(h);
}

static void on_connection(uv_stream_t *server, int status) {
  air__http_server *s = server->data;
  if (status < 0) return; /* EMFILE and the like: libuv retries later */
  air__http_conn_accept(s);
}

/* Listens on t (bound or opened) and learns the port it listens on; a uv
 * error code. */
static int start_listening(air__http_server *s, uv_tcp_t *t) {
  int rc = uv_listen((uv_stream_t *)t, s->cfg.backlog, on_connection);
  if (rc != 0) return rc;
  struct sockaddr_storage bound;
  int len = (int)sizeof(bound);
  rc = uv_tcp_getsockname(t, (struct sockaddr *)&bound, &len);
  if (rc != 0) return rc;
  if (bound.ss_family == AF_INET6)
    s->port = ntohs(((struct sockaddr_in6 *)&bound)->sin6_port);
  else
    s->port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
  return 0;
}

int air__http_server_listen(air__http_server *s, int *uv_err) {
  int dummy;
  if (uv_err == NULL) uv_err = &dummy;
  *uv_err = 0;
  if (s->listener != NULL || s->stopping) return AIR_ESTATE;
  uv_tcp_t *t = calloc(1, sizeof(*t));
  if (t == NULL) return AIR_ENOMEM;
  const struct sockaddr *sa = (const struct sockaddr *)&s->addr;
  int rc = uv_tcp_init_ex(s->loop, t, sa->sa_family);
  if (rc != 0) {
    free(t);
    *uv_err = rc;
    return AIR_EIO;
  }
  if (s->cfg.reuseport) {
#ifdef SO_REUSEPORT
    uv_os_fd_t fd;
    int one = 1;
    rc = uv_fileno((uv_handle_t *)t, &fd);
    if (rc == 0 &&
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0)
      rc = uv_translate_sys_error(errno);
#else
    rc = UV_ENOTSUP;
#endif
  }
  if (rc == 0) rc = uv_tcp_bind(t, sa, 0);
  t->data = s;
  if (rc == 0) rc = start_listening(s, t);
  if (rc != 0) {
    t->data = NULL;
    uv_close((uv_handle_t *)t, free_handle);
    *uv_err = rc;
    return AIR_EIO;
  }
  s->listener = t;
  return 0;
}

int air__http_server_listen_fd(air__http_server *s, int fd, int *uv_err) {
  int dummy;
  if (uv_err == NULL) uv_err = &dummy;
  *uv_err = 0;
  if (s->listener != NULL || s->stopping) return AIR_ESTATE;
  uv_tcp_t *t = calloc(1, sizeof(*t));
  if (t == NULL) return AIR_ENOMEM;
  int rc = uv_tcp_init(s->loop, t);
  if (rc != 0) {
    free(t);
    *uv_err = rc;
    return AIR_EIO;
  }
  rc = uv_tcp_open(t, (uv_os_sock_t)fd);
  t->data = s;
  if (rc == 0) rc = start_listening(s, t);
  if (rc != 0) {
    uv_os_fd_t got;
    bool opened = uv_fileno((uv_handle_t *)t, &got) == 0;
    t->data = NULL;
    uv_close((uv_handle_t *)t, free_handle); /* closes fd when opened */
    if (!opened) close(fd);
    *uv_err = rc;
    return AIR_EIO;
  }
  s->listener = t;
  return 0;
}

void air__http_server_set_limits(air__http_server *s,
                                 const air__http_config *cfg) {
  if (cfg->max_body_bytes) s->cfg.max_body_bytes = cfg->max_body_bytes;
  if (cfg->max_header_bytes) s->cfg.max_header_bytes = cfg->max_header_bytes;
  if (cfg->max_headers) s->cfg.max_headers = cfg->max_headers;
  if (cfg->max_connections) s->cfg.max_connections = cfg->max_connections;
  if (cfg->idle_timeout_ms) s->cfg.idle_timeout_ms = cfg->idle_timeout_ms;
  if (cfg->request_timeout_ms)
    s->cfg.request_timeout_ms = cfg->request_timeout_ms;
  if (cfg->max_inflight_body_bytes)
    s->cfg.max_inflight_body_bytes = cfg->max_inflight_body_bytes;
  if (cfg->max_output_queue_bytes)
    s->cfg.max_output_queue_bytes = cfg->max_output_queue_bytes;
  if (cfg->write_timeout_ms) s->cfg.write_timeout_ms = cfg->write_timeout_ms;
}

void air__http_stats_init(air__http_stats *st) {
  atomic_init(&st->read_ahead, 0);
  atomic_init(&st->output_queued, 0);
  atomic_init(&st->output_refused, 0);
  atomic_init(&st->write_timeouts, 0);
}

int air__http_server_port(const air__http_server *s) {
  return s->port;
}

size_t air__http_server_connections(const air__http_server *s) {
  return s->n_conns;
}

static void stop_timer_closed(uv_handle_t *h) {
  air__http_server *s = h->data;
  s->stop_timer_open = false;
  if (s->on_stopped) s->on_stopped(s->stopped_data);
}

/* Completes the stop once nothing is left open. */
static void maybe_stopped(air__http_server *s) {
  if (!s->stopping || s->listener != NULL || s->n_conns > 0) return;
  if (!s->stop_timer_open || uv_is_closing((uv_handle_t *)&s->stop_timer))
    return;
  uv_close((uv_handle_t *)&s->stop_timer, stop_timer_closed);
}

static void listener_closed(uv_handle_t *h) {
  air__http_server *s = h->data;
  free(h);
  s->listener = NULL;
  maybe_stopped(s);
}

/* Fires shutdown_timeout_ms after stop (or at once to finish a stop). */
static void on_stop_timer(uv_timer_t *t) {
  air__http_server *s = t->data;
  air__http_conn *c = s->conns;
  while (c != NULL) {
    air__http_conn *next = c->next;
    air__http_conn_force(c);
    c = next;
  }
  maybe_stopped(s);
}

int air__http_server_stop(air__http_server *s, void (*on_stopped)(void *data),
                          void *data) {
  if (s->stopping) return AIR_ESTATE;
  s->stopping = true;
  s->on_stopped = on_stopped;
  s->stopped_data = data;
  uv_timer_init(s->loop, &s->stop_timer);
  s->stop_timer.data = s;
  s->stop_timer_open = true;
  if (s->listener != NULL)
    uv_close((uv_handle_t *)s->listener, listener_closed);
  air__http_conn *c = s->conns;
  while (c != NULL) {
    air__http_conn *next = c->next;
    air__http_conn_stop(c);
    c = next;
  }
  if (s->cfg.shutdown_timeout_ms > 0)
    uv_timer_start(&s->stop_timer, on_stop_timer, s->cfg.shutdown_timeout_ms,
                   0);
  /* Nothing open: finish from a loop callback, never from inside stop. */
  if (s->listener == NULL && s->n_conns == 0)
    uv_timer_start(&s->stop_timer, on_stop_timer, 0, 0);
  return 0;
}

void air__http_server_free(air__http_server *s) {
  if (s == NULL) return;
  free(s->slab);
  free(s);
}

void air__http_server_conn_freed(air__http_server *s, air__http_conn *c) {
  if (c->prev)
    c->prev->next = c->next;
  else
    s->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  s->n_conns--;
  if (c->rejecting) s->n_rejecting--;
  if (s->accept_pending && s->listener != NULL && !s->stopping) {
    s->accept_pending = false;
    air__http_conn_accept(s);
  }
  maybe_stopped(s);
}

const char *air__http_server_date(air__http_server *s) {
  static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed",
                                  "Thu", "Fri", "Sat"};
  static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  time_t now = time(NULL);
  if (now != s->date_at || s->date[0] == '\0') {
    struct tm tm;
    s->date[0] = '\0';
    if (gmtime_r(&now, &tm) != NULL && tm.tm_wday >= 0 && tm.tm_wday < 7 &&
        tm.tm_mon >= 0 && tm.tm_mon < 12)
      snprintf(s->date, sizeof(s->date), "%s, %02d %s %04d %02d:%02d:%02d GMT",
               days[tm.tm_wday], tm.tm_mday, months[tm.tm_mon],
               tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    s->date_at = now;
  }
  return s->date;
}
