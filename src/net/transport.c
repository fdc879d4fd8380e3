/*
 * libcurl multi on libuv, after curl's multi-uv pattern: curl tells us which
 * sockets to watch (CURLMOPT_SOCKETFUNCTION -> uv_poll) and when to call it
 * back (CURLMOPT_TIMERFUNCTION -> uv_timer); we call
 * curl_multi_socket_action on every event and collect finished transfers.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>

#include "buf.h"
#include "limits.h"
#include "transport.h"

#define MAX_RESPONSE_HEAD AIR__MAX_RESPONSE_HEAD_BYTES
#define MAX_HEADERS 128
#define IDLE_HANDLES 64 /* easy handles kept for reuse, per transport */
#define URL_CACHE 16    /* parsed upstream URLs kept, per transport */
/* libcurl (7.88) asks for "Expect: 100-continue" only for request bodies
 * over 1 MiB (EXPECT_100_THRESHOLD); only those need "Expect:" to turn
 * it off. */
#define EXPECT_THRESHOLD (1024u * 1024u)

/* An easy handle kept for reuse, with the header list it was last given. */
typedef struct idle_handle {
  CURL *easy;
  struct curl_slist *headers;
} idle_handle;

typedef struct poll_ctx poll_ctx;

struct air__transport {
  uv_loop_t *loop;
  CURLM *multi;
  uv_timer_t timer;
  unsigned live; /* uv handles still to be closed (timer + polls) */
  bool closing;
  poll_ctx *polls; /* sockets with a uv_poll handle */
  poll_ctx **byfd; /* the poll_ctx of each socket curl uses, by fd */
  size_t nbyfd;
  air__xfer *xfers; /* transfers in flight */
  air__xfer *trims; /* transfers whose response head just arrived */
  idle_handle idle[IDLE_HANDLES]; /* easy handles kept for reuse */
  unsigned n_idle;
  char noproxy[512];
  /* POST URLs parsed once (CURLOPT_CURLU): one per target's endpoint;
   * URLs beyond URL_CACHE are given to libcurl as text, as before. */
  struct {
    char *url;
    CURLU *u;
  } urls[URL_CACHE];
  unsigned n_urls;
};

/*
 * One socket curl uses. Connection sockets are opened and closed through
 * our CURLOPT_OPENSOCKETFUNCTION / CLOSESOCKETFUNCTION (owned), so their
 * uv_poll handle outlives a transfer: a keep-alive connection handed to the
 * next transfer keeps its epoll registration instead of costing a handle
 * init, an epoll add and two deletes per request. Other sockets curl may
 * announce (a resolver's) get a handle per announcement, as before.
 */
struct poll_ctx {
  uv_poll_t poll;
  curl_socket_t fd;
  air__transport *t;
  poll_ctx *prev, *next;
  bool owned;    /* opened by open_socket: we close it */
  bool has_poll; /* poll is initialised (and counted in t->live) */
  int events;    /* UV_READABLE/UV_WRITABLE being watched */
  int want;      /* what curl asked for; 0: idle in curl's pool */
};

struct air__xfer {
  air__transport *t;
  air__xfer *prev, *next;
  const char *body; /* the request body (borrowed) */
  size_t body_len;
  CURL *easy;
  struct curl_slist *headers;
  air__xfer_cb cb;
  air__buf head; /* raw response header lines of the final response */
  bool head_done;
  bool paused;
  bool aborted;        /* on_body asked to stop */
  bool clean;          /* completed normally: the handle may be reused */
  bool requested;      /* its request was handed to a connection */
  bool resend_refused; /* libcurl's own re-send was refused (on_prereq) */
  bool trim_queued;    /* on t->trims */
  air__xfer *trim_next;
  int status;
};

static void check_done(air__transport *t);
static void on_handle_closed(uv_handle_t *h);
static void trim_uploads(air__transport *t);

static poll_ctx *fd_get(const air__transport *t, curl_socket_t s) {
  return s >= 0 && (size_t)s < t->nbyfd ? t->byfd[s] : NULL;
}

static int fd_set_ctx(air__transport *t, curl_socket_t s, poll_ctx *pc) {
  if (s < 0) return -1;
  if ((size_t)s >= t->nbyfd) {
    if (pc == NULL) return 0;
    size_t n = ((size_t)s + 64) & ~(size_t)63;
    /* An array of pointers, sized as such. */
    poll_ctx **b = realloc(
        t->byfd, n * sizeof(*b)); /* NOLINT(bugprone-sizeof-expression) */
    if (b == NULL) return -1;
    for (size_t k = t->nbyfd; k < n; k++) b[k] = NULL;
    t->byfd = b;
    t->nbyfd = n;
  }
  t->byfd[s] = pc;
  return 0;
}

/* Forgets pc: closes its handle (freed by the close callback) or frees it. */
static void drop_ctx(air__transport *t, poll_ctx *pc) {
  if (fd_get(t, pc->fd) == pc) t->byfd[pc->fd] = NULL;
  if (!pc->has_poll) {
    free(pc);
    return;
  }
  if (pc->prev)
    pc->prev->next = pc->next;
  else
    t->polls = pc->next;
  if (pc->next) pc->next->prev = pc->prev;
  uv_poll_stop(&pc->poll);
  pc->poll.data = t;
  uv_close((uv_handle_t *)&pc->poll, on_handle_closed);
}

static void on_handle_closed(uv_handle_t *h) {
  air__transport *t = h->data;
  if (h != (uv_handle_t *)&t->timer) free(h);
  if (--t->live == 0 && t->closing) {
    free(t->byfd);
    free(t);
  }
}

static void watch(poll_ctx *pc, int events);

static void on_poll(uv_poll_t *p, int status, int events) {
  poll_ctx *pc = p->data;
  air__transport *t = pc->t;
  if (pc->want == 0) {
    /* An idle pooled connection became readable: closed by the peer (or
     * junk). Stop watching; curl finds it dead when it next looks. */
    watch(pc, 0);
    return;
  }
  int flags = 0;
  if (status < 0) flags = CURL_CSELECT_ERR;
  if (status == 0 && (events & UV_READABLE)) flags |= CURL_CSELECT_IN;
  if (status == 0 && (events & UV_WRITABLE)) flags |= CURL_CSELECT_OUT;
  int running = 0;
  curl_multi_socket_action(t->multi, pc->fd, flags, &running);
  check_done(t);
  trim_uploads(t); /* after: a transfer that just ended needs none */
}

/* Watches events on pc's socket, touching epoll only when they change. */
static void watch(poll_ctx *pc, int events) {
  if (events == pc->events) return;
  if (events == 0)
    uv_poll_stop(&pc->poll);
  else
    uv_poll_start(&pc->poll, events, on_poll);
  pc->events = events;
}

static int on_socket(CURL *easy, curl_socket_t s, int action, void *userp,
                     void *socketp) {
  (void)easy;
  (void)socketp;
  air__transport *t = userp;
  poll_ctx *pc = fd_get(t, s);
  if (action == CURL_POLL_REMOVE) {
    if (pc == NULL || !pc->has_poll) return 0;
    pc->want = 0;
    if (!pc->owned) {
      drop_ctx(t, pc);
      return 0;
    }
    /* Back in curl's pool: keep watching for a close by the peer (readable
     * costs nothing until it happens), but not for writable, which fires
     * at once; and do not keep the loop alive for it. */
    if (pc->events & UV_WRITABLE) watch(pc, 0);
    uv_unref((uv_handle_t *)&pc->poll);
    return 0;
  }
  if (pc == NULL) {
    pc = calloc(1, sizeof(*pc));
    if (pc == NULL) return -1;
    pc->fd = s;
    pc->t = t;
    if (fd_set_ctx(t, s, pc) != 0) {
      free(pc);
      return -1;
    }
  }
  if (!pc->has_poll) {
    if (uv_poll_init_socket(t->loop, &pc->poll, s) != 0) {
      drop_ctx(t, pc);
      return -1;
    }
    pc->has_poll = true;
    pc->poll.data = pc;
    pc->next = t->polls;
    if (t->polls) t->polls->prev = pc;
    t->polls = pc;
    t->live++;
  }
  int events = 0;
  if (action != CURL_POLL_OUT) events |= UV_READABLE;
  if (action != CURL_POLL_IN) events |= UV_WRITABLE;
  pc->want = events;
  uv_ref((uv_handle_t *)&pc->poll);
  watch(pc, events);
  return 0;
}

/* CURLOPT_OPENSOCKETFUNCTION: connection sockets are ours to track. */
static curl_socket_t open_socket(void *clientp, curlsocktype purpose,
                                 struct curl_sockaddr *a) {
  air__transport *t = clientp;
  if (purpose != CURLSOCKTYPE_IPCXN) return CURL_SOCKET_BAD;
  curl_socket_t s = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
  if (s < 0) return CURL_SOCKET_BAD;
  poll_ctx *pc = calloc(1, sizeof(*pc));
  if (pc == NULL || fd_set_ctx(t, s, pc) != 0) {
    free(pc);
    close(s);
    return CURL_SOCKET_BAD;
  }
  pc->fd = s;
  pc->t = t;
  pc->owned = true;
  return s;
}

/* CURLOPT_CLOSESOCKETFUNCTION: the handle goes (uv_close removes it from
 * epoll at once) before the descriptor can be reused. */
static int close_socket(void *clientp, curl_socket_t s) {
  air__transport *t = clientp;
  poll_ctx *pc = fd_get(t, s);
  if (pc != NULL) drop_ctx(t, pc);
  return close(s);
}

static void on_timer(uv_timer_t *h) {
  air__transport *t = h->data;
  int running = 0;
  curl_multi_socket_action(t->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  check_done(t);
  trim_uploads(t); /* after: a transfer that just ended needs none */
}

static int on_curl_timer(CURLM *multi, long ms, void *userp) {
  (void)multi;
  air__transport *t = userp;
  if (ms < 0)
    uv_timer_stop(&t->timer);
  else
    uv_timer_start(&t->timer, on_timer, (uint64_t)ms, 0); /* 0: next turn */
  return 0;
}

int air__transport_new(uv_loop_t *loop, const air__transport_opts *o,
                       air__transport **out) {
  air__transport *t = calloc(1, sizeof(*t));
  if (t == NULL) return AIR_ENOMEM;
  t->loop = loop;
  t->multi = curl_multi_init();
  if (t->multi == NULL) {
    free(t);
    return AIR_ENOMEM;
  }
  uv_timer_init(loop, &t->timer);
  t->timer.data = t;
  t->live = 1;
  /* Transfers per host in flight (HTTP/1.1: connections) and idle
   * connections kept for reuse are bounded separately. */
  long per_host =
      o && o->max_host_connections > 0 ? o->max_host_connections : 4096;
  curl_multi_setopt(t->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
  curl_multi_setopt(t->multi, CURLMOPT_SOCKETDATA, t);
  curl_multi_setopt(t->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
  curl_multi_setopt(t->multi, CURLMOPT_TIMERDATA, t);
  curl_multi_setopt(t->multi, CURLMOPT_MAX_HOST_CONNECTIONS, per_host);
  curl_multi_setopt(t->multi, CURLMOPT_MAXCONNECTS, 256L);
  if (o && o->max_total_connections > 0)
    curl_multi_setopt(t->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS,
                      o->max_total_connections);
  curl_multi_setopt(t->multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
  /* Loopback never goes through a proxy; other hosts follow the usual
   * environment (https_proxy, no_proxy). */
  const char *np = getenv("no_proxy");
  if (np == NULL) np = getenv("NO_PROXY");
  snprintf(t->noproxy, sizeof(t->noproxy), "127.0.0.1,localhost,::1%s%s",
           np && *np ? "," : "", np ? np : "");
  *out = t;
  return 0;
}

static void xfer_free(air__xfer *x) {
  air__transport *t = x->t;
  if (x->trim_queued) {
    air__xfer **pp = &t->trims;
    while (*pp != x) pp = &(*pp)->trim_next;
    *pp = x->trim_next;
  }
  if (x->prev)
    x->prev->next = x->next;
  else
    t->xfers = x->next;
  if (x->next) x->next->prev = x->prev;
  curl_multi_remove_handle(t->multi, x->easy);
  /* A handle keeps the options every transfer shares (setup_handle); the
   * next transfer sets the rest, so it needs no reset. Only handles of
   * transfers that completed normally are kept: no pause or abort state
   * can reach the next one. */
  if (x->clean && t->n_idle < IDLE_HANDLES && !t->closing) {
    /* The handle still points at its header list: both are kept, so the
     * next transfer with the same headers sets neither (most do: one
     * route's attempts send the same lines). */
    t->idle[t->n_idle].easy = x->easy;
    t->idle[t->n_idle++].headers = x->headers;
  } else {
    curl_easy_cleanup(x->easy);
    curl_slist_free_all(x->headers);
  }
  air__buf_cleanup(&x->head);
  free(x);
}

void air__transport_free(air__transport *t) {
  if (t == NULL) return;
  t->closing = true; /* xfer_free keeps no handle from now on */
  /* Abort transfers still running: their on_done does not fire. Each
   * transfer's x->t is t, so xfer_free unlinks it from t->xfers (the
   * analyzer does not know x->t == t).
   * NOLINTNEXTLINE(clang-analyzer-unix.Malloc) */
  while (t->xfers != NULL) xfer_free(t->xfers);
  while (t->n_idle > 0) {
    idle_handle *h = &t->idle[--t->n_idle];
    curl_easy_cleanup(h->easy);
    curl_slist_free_all(h->headers);
  }
  curl_multi_cleanup(t->multi);
  t->multi = NULL;
  for (unsigned i = 0; i < t->n_urls; i++) {
    free(t->urls[i].url);
    curl_url_cleanup(t->urls[i].u);
  }
  t->n_urls = 0;
  /* Every poll_ctx on the list has a handle, which drop_ctx unlinks and
   * closes (freed later by its close callback, not here).
   * NOLINTNEXTLINE(clang-analyzer-unix.Malloc) */
  while (t->polls != NULL) drop_ctx(t, t->polls);
  uv_timer_stop(&t->timer);
  uv_close((uv_handle_t *)&t->timer, on_handle_closed);
}

/* Splits the raw head into headers and reports it. */
static void deliver_head(air__xfer *x) {
  air_header h[MAX_HEADERS];
  size_t n = 0;
  const char *p = x->head.p ? x->head.p : "";
  const char *end = p + x->head.n;
  while (p < end && n < MAX_HEADERS) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (eol == NULL) eol = end;
    const char *line_end = eol;
    if (line_end > p && line_end[-1] == '\r') line_end--;
    const char *colon = memchr(p, ':', (size_t)(line_end - p));
    if (colon != NULL && colon > p) {
      const char *v = colon + 1;
      while (v < line_end && (*v == ' ' || *v == '\t')) v++;
      const char *ve = line_end;
      while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
      h[n].name = p;
      h[n].name_len = (size_t)(colon - p);
      h[n].value = v;
      h[n].value_len = (size_t)(ve - v);
      n++;
    }
    p = eol + 1;
  }
  x->head_done = true;
  if (x->cb.on_head) x->cb.on_head(x->cb.data, x->status, h, n);
  /* on_head copied what it keeps: a long stream does not hold the raw
   * head. */
  air__buf_cleanup(&x->head);
}

static size_t on_header(char *buf, size_t size, size_t nitems, void *userp) {
  air__xfer *x = userp;
  size_t n = size * nitems;
  if (n >= 5 && memcmp(buf, "HTTP/", 5) == 0) {
    /* A new response (after a 1xx, or a redirect we do not follow). */
    air__buf_reset(&x->head);
    long code = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
    x->status = (int)code;
    return n;
  }
  if (n <= 2 && (buf[0] == '\r' || buf[0] == '\n')) {
    long code = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &code);
    x->status = (int)code;
    if (code >= 200 && x->body_len > 0 && !x->trim_queued) {
      x->trim_queued = true;
      x->trim_next = x->t->trims;
      x->t->trims = x;
    }
    if (code >= 200) deliver_head(x);
    return n;
  }
  if (air__buf_add(&x->head, buf, n) != 0) return 0; /* head too big: abort */
  return n;
}

static size_t on_write(char *buf, size_t size, size_t nmemb, void *userp) {
  air__xfer *x = userp;
  size_t n = size * nmemb;
  if (!x->head_done) deliver_head(x);
  int rc = x->cb.on_body ? x->cb.on_body(x->cb.data, buf, n) : 0;
  if (rc == AIR__XFER_PAUSE) {
    x->paused = true;
    return CURL_WRITEFUNC_PAUSE;
  }
  if (rc != 0) {
    x->aborted = true;
    return 0;
  }
  return n;
}

/*
 * CURLOPT_PREREQFUNCTION: called when the transfer's connection is ready,
 * before its request is sent. The request body is given to libcurl as
 * CURLOPT_POSTFIELDS, which libcurl appends to the request head (bodies
 * under 64 KiB: one send instead of head and body apart). libcurl could
 * then rewind it on its own: it re-sends a request on a fresh connection
 * when a reused keep-alive connection dies before any response byte. A
 * second call is that re-send, refused here: one attempt is one upstream
 * request, and the engine decides what follows (the transfer ends
 * CURLE_ABORTED_BY_CALLBACK, reported as a connection closed before the
 * response).
 */
static int on_prereq(void *userp, char *ip, char *local_ip, int port,
                     int local_port) {
  (void)ip;
  (void)local_ip;
  (void)port;
  (void)local_port;
  air__xfer *x = userp;
  if (x->requested) {
    x->resend_refused = true;
    return CURL_PREREQFUNC_ABORT;
  }
  x->requested = true;
  return CURL_PREREQFUNC_OK;
}

/*
 * libcurl keeps a transfer's upload buffer (CURLOPT_UPLOAD_BUFFERSIZE, at
 * least 16 KiB, touched as far as the body went) until the transfer ends:
 * for a stream held open for minutes that is a page or more per stream
 * for a body sent long ago. Once the final response head has arrived and
 * every body byte is counted as sent, nothing can need it (libcurl re-sends
 * a request only when nothing was received), and setting the option frees
 * it (libcurl: "force a realloc next opportunity"). Done after
 * curl_multi_socket_action returns, never inside its callbacks, and after
 * check_done: a transfer that ended in the same call is gone from the list
 * (libcurl frees the buffer when a transfer is done).
 */
static void trim_uploads(air__transport *t) {
  while (t->trims != NULL) {
    air__xfer *x = t->trims;
    t->trims = x->trim_next;
    x->trim_queued = false;
    curl_off_t sent = 0;
    if (curl_easy_getinfo(x->easy, CURLINFO_SIZE_UPLOAD_T, &sent) == CURLE_OK &&
        sent == (curl_off_t)x->body_len)
      curl_easy_setopt(x->easy, CURLOPT_UPLOAD_BUFFERSIZE, 16384L);
  }
}

/* Hands finished transfers to their owners. */
static void check_done(air__transport *t) {
  CURLMsg *m;
  int left;
  while (t->multi && (m = curl_multi_info_read(t->multi, &left)) != NULL) {
    if (m->msg != CURLMSG_DONE) continue;
    air__xfer *x = NULL;
    curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
    CURLcode res = m->data.result;
    int rc = 0;
    air_transport_err kind = AIR_TRANSPORT_OK;
    bool connect_timeout = false;
    const char *msg = "";
    if (x->aborted) {
      rc = AIR_ECANCELED;
      msg = "aborted by the consumer";
    } else if (res != CURLE_OK) {
      rc = AIR_EIO;
      kind = AIR_TRANSPORT_CONNECT;
      /* Our own words: no libcurl string ever reaches a caller. */
      switch (res) {
        case CURLE_OPERATION_TIMEDOUT:
          connect_timeout = true;
          msg = "no connection within connect_ms";
          break;
        case CURLE_COULDNT_CONNECT:
          msg = "connection refused or host unreachable";
          break;
        case CURLE_COULDNT_RESOLVE_HOST:
          msg = "host name did not resolve";
          break;
        case CURLE_COULDNT_RESOLVE_PROXY:
          msg = "proxy name did not resolve";
          break;
        case CURLE_SSL_CONNECT_ERROR:
          msg = "TLS handshake failed";
          break;
        case CURLE_PEER_FAILED_VERIFICATION:
          msg = "TLS certificate not trusted";
          break;
        case CURLE_WRITE_ERROR:
          kind = AIR_TRANSPORT_BADBODY;
          msg = "response head over the limit";
          break;
        case CURLE_ABORTED_BY_CALLBACK:
          /* Only on_prereq aborts: libcurl's re-send, refused. */
          kind = AIR_TRANSPORT_CLOSED;
          msg = "connection closed before the response";
          break;
        case CURLE_GOT_NOTHING:
          kind = AIR_TRANSPORT_CLOSED;
          msg = "connection closed before any response";
          break;
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
          kind = AIR_TRANSPORT_CLOSED;
          msg = x->head_done ? "connection reset during the response"
                             : "connection reset before the response";
          break;
        default:
          kind = AIR_TRANSPORT_CLOSED;
          msg = x->head_done
                    ? "connection closed before the response was complete"
                    : "connection closed before the response";
      }
    } else {
      if (!x->head_done) deliver_head(x);
      x->clean = !x->paused;
    }
    air__xfer_cb cb = x->cb;
    xfer_free(x);
    if (cb.on_done) cb.on_done(cb.data, rc, kind, connect_timeout, msg);
  }
}

/* The options every transfer of t shares, set once per easy handle. */
static void setup_handle(air__transport *t, CURL *e) {
  curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, on_prereq);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_socket);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, t);
  curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, close_socket);
  curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, t);
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
  curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
  /* 2 KiB reads: events are small, and the buffer is per open stream. */
  curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 2048L);
  /* The upload buffer (64 KiB by default) only ever holds a request
   * body; the smallest curl allows keeps its address space per stream
   * down. */
  curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, 16384L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(e, CURLOPT_NOPROXY, t->noproxy);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
}

/*
 * The parsed form of url, parsed on first use and kept until t goes (a
 * handle may point at it: libcurl copies it when a transfer starts). Asking
 * libcurl for the text form makes it parse the URL, normalise it and print
 * it back for every transfer (~13k instructions, more than a tenth of a
 * proxied request). NULL: the caller gives the text (the cache is full, no
 * memory, or a URL this parser refuses without libcurl's scheme guessing:
 * the transfer then reports it as before).
 */
static CURLU *url_of(air__transport *t, const char *url) {
  for (unsigned i = 0; i < t->n_urls; i++)
    if (strcmp(t->urls[i].url, url) == 0) return t->urls[i].u;
  if (t->n_urls == URL_CACHE) return NULL;
  CURLU *u = curl_url();
  char *copy = strdup(url);
  if (u == NULL || copy == NULL ||
      curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK) {
    curl_url_cleanup(u);
    free(copy);
    return NULL;
  }
  t->urls[t->n_urls].url = copy;
  t->urls[t->n_urls++].u = u;
  return u;
}

/* Whether list holds exactly the lines of r (and "Expect:" when expect). */
static bool same_headers(const struct curl_slist *list, const air__xfer_req *r,
                         bool expect) {
  for (const char *const *h = r->headers; h && *h; h++, list = list->next)
    if (list == NULL || strcmp(list->data, *h) != 0) return false;
  if (expect) {
    if (list == NULL || strcmp(list->data, "Expect:") != 0) return false;
    list = list->next;
  }
  return list == NULL;
}

/* The header list of r; NULL when it has none, or on ENOMEM (*rc). */
static struct curl_slist *header_list(const air__xfer_req *r, bool expect,
                                      int *rc) {
  struct curl_slist *list = NULL;
  *rc = 0;
  for (const char *const *h = r->headers; h && *h; h++) {
    struct curl_slist *l = curl_slist_append(list, *h);
    if (l == NULL) goto fail;
    list = l;
  }
  /* Never "Expect: 100-continue": it costs a round trip per request. */
  if (expect) {
    struct curl_slist *l = curl_slist_append(list, "Expect:");
    if (l == NULL) goto fail;
    list = l;
  }
  return list;
fail:
  curl_slist_free_all(list);
  *rc = AIR_ENOMEM;
  return NULL;
}

int air__xfer_start(air__transport *t, const air__xfer_req *r,
                    const air__xfer_cb *cb, air__xfer **out) {
  if (t == NULL || t->multi == NULL || r == NULL || r->url == NULL)
    return AIR_EINVAL;
  air__xfer *x = calloc(1, sizeof(*x));
  if (x == NULL) return AIR_ENOMEM;
  x->t = t;
  x->cb = *cb;
  air__buf_init(&x->head, MAX_RESPONSE_HEAD);
  x->body = r->body ? r->body : "";
  x->body_len = r->body ? r->body_len : 0;
  bool expect = x->body_len > EXPECT_THRESHOLD;
  bool fresh = t->n_idle == 0;
  struct curl_slist *old = NULL;
  if (fresh) {
    x->easy = curl_easy_init();
  } else {
    x->easy = t->idle[--t->n_idle].easy;
    old = t->idle[t->n_idle].headers;
  }
  if (x->easy == NULL) {
    free(x);
    return AIR_ENOMEM;
  }
  CURL *e = x->easy;
  bool set_headers = fresh || !same_headers(old, r, expect);
  if (set_headers) {
    int rc = 0;
    x->headers = header_list(r, expect, &rc);
    if (rc != 0) {
      curl_easy_cleanup(e);
      curl_slist_free_all(old);
      free(x);
      return rc;
    }
    /* Set before the old list goes: the handle never points at freed
     * lines. */
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers);
    curl_slist_free_all(old);
  } else {
    x->headers = old; /* the handle points at it already */
  }
  if (fresh) setup_handle(t, e);
  /* GET URLs (a stored response by id) are one-offs: never kept. */
  CURLU *u = r->get ? NULL : url_of(t, r->url);
  if (u != NULL) {
    curl_easy_setopt(e, CURLOPT_CURLU, u);
  } else {
    curl_easy_setopt(e, CURLOPT_CURLU, NULL);
    curl_easy_setopt(e, CURLOPT_URL, r->url);
  }
  /* Per transfer: an idle handle may have served the other method.
   * CURLOPT_POSTFIELDS makes the transfer a POST; HTTPGET after it makes
   * it a GET again (the body is then not used). */
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->body_len);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->body);
  if (r->get) curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(e, CURLOPT_PRIVATE, x);
  curl_easy_setopt(e, CURLOPT_PREREQDATA, x);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                   (long)(r->connect_ms ? r->connect_ms : 5000));
  if (curl_multi_add_handle(t->multi, e) != CURLM_OK) {
    curl_easy_cleanup(e);
    curl_slist_free_all(x->headers);
    air__buf_cleanup(&x->head);
    free(x);
    return AIR_ENOMEM;
  }
  x->next = t->xfers;
  if (t->xfers) t->xfers->prev = x;
  t->xfers = x;
  *out = x;
  return 0;
}

void air__xfer_cancel(air__xfer *x) {
  if (x == NULL) return;
  /* Removing a transfer that is still running closes its connection. */
  xfer_free(x);
}

void air__xfer_pause(air__xfer *x) {
  if (x == NULL || x->paused) return;
  x->paused = true;
  curl_easy_pause(x->easy, CURLPAUSE_RECV);
}

void air__xfer_resume(air__xfer *x) {
  if (x == NULL || !x->paused) return;
  x->paused = false;
  curl_easy_pause(x->easy, CURLPAUSE_CONT);
}

/* ---- the transport interface --------------------------------------------- */

static int if_start(void *impl, const air__xfer_req *r, const air__xfer_cb *cb,
                    void **xfer) {
  air__xfer *x = NULL;
  int rc = air__xfer_start(impl, r, cb, &x);
  if (rc == 0) *xfer = x;
  return rc;
}

static void if_cancel(void *impl, void *xfer) {
  (void)impl;
  air__xfer_cancel(xfer);
}

static void if_pause(void *impl, void *xfer) {
  (void)impl;
  air__xfer_pause(xfer);
}

static void if_resume(void *impl, void *xfer) {
  (void)impl;
  air__xfer_resume(xfer);
}

static const air__transport_ops curl_ops = {if_start, if_cancel, if_pause,
                                            if_resume};

air__transport_if air__transport_curl(air__transport *t) {
  air__transport_if tr = {&curl_ops, t};
  return tr;
}
