/*
 * The HTTP load tool of bench/gateway.sh: what wrk cannot measure for an
 * LLM gateway. One thread, raw sockets on epoll, HTTP/1.1 keep-alive.
 *
 * Load mode (default): C connections each send a chat request, read the
 * whole response (content-length or chunked), and send the next one at
 * once (closed loop). After a warmup, for D seconds it records
 *   - completed requests per second,
 *   - latency: first byte written to the last byte of the response read,
 *   - for streams, time to first content: first byte written to the read
 *     that completed the first SSE content event (an OpenAI delta whose
 *     "content" is a non-empty string, or an Anthropic "text_delta"),
 *   - the CPU time every --pid process used in the window, per request
 *     (sum of /proc/PID/task/ * /schedstat run times, nanoseconds), and the
 *     tool's own (getrusage).
 * Any status other than 200, a malformed response or a closed connection
 * counts as an error (the connection is reopened).
 *
 * Hold mode (--hold N): the RSS of the first --pid (VmRSS of
 * /proc/PID/status) is read, N streaming requests are opened and held
 * until they are "open" (--ready-ttfc: each has received its first content;
 * --ready-url/--ready-match: a GET of the URL, e.g. the upstream mock's
 * log, contains the string N times, or its count has been the same for a
 * second: the gateway may queue what its upstream pool cannot take), then
 * after a short settle the RSS is read again; the difference / N is the
 * memory one idle open stream costs.
 *
 * One line of key=value pairs is printed per run (bench/gateway.sh parses
 * it). Run with no arguments (as scripts/bench.sh does with every bench_*
 * binary) it only prints its usage. Everything is bounded: connections,
 * duration, samples, response sizes.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 16384
#define MAX_PIDS 4
#define MAX_SECONDS 120
#define MAX_SAMPLES 4000000u      /* latency samples kept per run */
#define RBUF 65536                /* one connection's unparsed response bytes */
#define SCAN_BYTES 4096           /* body bytes scanned for the first content */
#define MAX_BODY_BYTES 65536      /* request body */
#define MAX_GET_BYTES (16u << 20) /* --ready-url response */

typedef enum {
  ST_HEAD,
  ST_CL,
  ST_CSIZE,
  ST_CDATA,
  ST_CCRLF,
  ST_TRAILER
} pstate;

typedef struct conn {
  int fd;
  bool connected;
  bool busy;   /* a request is in flight */
  size_t wpos; /* bytes of the request written */
  pstate st;
  int status;
  long long left; /* body or chunk bytes still to read */
  bool chunked, close_after;
  bool got_content;
  uint64_t t_send, t_content;
  char *rbuf;
  size_t rn; /* bytes in rbuf */
  char scan[SCAN_BYTES];
  size_t sn;
} conn;

typedef struct opts {
  struct sockaddr_in addr;
  char host[64];
  char path[512];
  const char *model;
  bool anthropic;
  bool stream;
  int conns;
  double warmup_s, duration_s;
  pid_t pids[MAX_PIDS];
  int n_pids;
  const char *label;
  int hold;
  bool ready_ttfc;
  const char *ready_url;
  const char *ready_match;
  long ready_min; /* with --ready-url: not ready on a stable count below it */
  double hold_timeout_s;
} opts;

typedef struct samples {
  uint64_t *v;
  size_t n, cap;
} samples;

typedef struct run {
  opts *o;
  int ep;
  conn *c;
  char req[MAX_BODY_BYTES + 1024];
  size_t req_n;
  bool measuring, stopping;
  uint64_t done, errors, reconnects;
  samples lat, ttfc;
} run;

static const char usage[] =
    "usage: bench_loadgen --url http://127.0.0.1:PORT/v1/chat/completions\n"
    "         --model NAME [--api openai|anthropic] [--stream]\n"
    "         [-c CONNS] [-w WARMUP_S] [-d SECONDS] [--pid PID]... [--label "
    "L]\n"
    "       bench_loadgen --url URL --model NAME --hold N [--pid PID]\n"
    "         (--ready-ttfc | --ready-url URL --ready-match STRING)\n"
    "         [--ready-min N] [--hold-timeout SECONDS]\n"
    "Closed-loop keep-alive load; prints one key=value line: req/s, latency\n"
    "and time-to-first-content percentiles (us), CPU us per request of each\n"
    "--pid; or, with --hold, the VmRSS growth of the first --pid per open\n"
    "stream. Used by bench/gateway.sh (see docs/performance.md).\n";

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what) {
  fprintf(stderr, "bench_loadgen: %s: %s\n", what, strerror(errno));
  exit(1);
}

/* ---- /proc readings
 * ---------------------------------------------------------- */

/* CPU time in ns every thread of pid has run: the first field of each
 * /proc/PID/task/TID/schedstat. -1 if the process is gone. */
static long long proc_cpu_ns(pid_t pid) {
  char dir[64];
  snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
  DIR *d = opendir(dir);
  if (d == NULL) return -1;
  long long sum = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char p[128];
    snprintf(p, sizeof(p), "%s/%.32s/schedstat", dir, e->d_name);
    FILE *f = fopen(p, "r");
    if (f == NULL) continue;
    unsigned long long ns = 0;
    if (fscanf(f, "%llu", &ns) == 1) sum += (long long)ns;
    fclose(f);
  }
  closedir(d);
  return sum;
}

/* VmRSS of pid in KiB, -1 if unknown. */
static long proc_rss_kib(pid_t pid) {
  char p[64], line[256];
  snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
  FILE *f = fopen(p, "r");
  if (f == NULL) return -1;
  long kib = -1;
  while (fgets(line, sizeof(line), f) != NULL)
    if (strncmp(line, "VmRSS:", 6) == 0) kib = strtol(line + 6, NULL, 10);
  fclose(f);
  return kib;
}

static uint64_t self_cpu_ns(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) *
             1000000000u +
         ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) *
             1000u;
}

/* ---- samples
 * ------------------------------------------------------------------ */

static void sample_add(samples *s, uint64_t v) {
  if (s->n == s->cap) {
    if (s->cap >= MAX_SAMPLES) return;
    size_t cap = s->cap ? s->cap * 2 : 65536;
    uint64_t *p = realloc(s->v, cap * sizeof(*p));
    if (p == NULL) return;
    s->v = p;
    s->cap = cap;
  }
  s->v[s->n++] = v;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The q-quantile (nearest rank) in microseconds; samples must be sorted. */
static double pct_us(const samples *s, double q) {
  if (s->n == 0) return 0;
  size_t i = (size_t)(q * (double)s->n);
  if (i >= s->n) i = s->n - 1;
  return (double)s->v[i] / 1000.0;
}

/* ---- the request and the response parser
 * -------------------------------------- */

static void build_request(run *r) {
  const opts *o = r->o;
  char body[MAX_BODY_BYTES];
  int bn;
  if (o->anthropic)
    bn = snprintf(body, sizeof(body),
                  "{\"model\":\"%s\",\"max_tokens\":64,\"messages\":[{\"role\":"
                  "\"user\",\"content\":\"Say hello to the benchmark.\"}]%s}",
                  o->model, o->stream ? ",\"stream\":true" : "");
  else
    bn = snprintf(body, sizeof(body),
                  "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\","
                  "\"content\":\"Say hello to the benchmark.\"}]%s}",
                  o->model, o->stream ? ",\"stream\":true" : "");
  int n = snprintf(r->req, sizeof(r->req),
                   "POST %s HTTP/1.1\r\nHost: %s\r\n"
                   "Content-Type: application/json\r\n%s%s"
                   "Content-Length: %d\r\n\r\n%s",
                   o->path, o->host,
                   /* As SDKs do; nginx, as a fixed upstream in
                    * bench/vs_nginx.sh, answers by it. */
                   o->stream ? "Accept: text/event-stream\r\n" : "",
                   o->anthropic ? "x-api-key: bench\r\nanthropic-version: "
                                  "2023-06-01\r\n"
                                : "Authorization: Bearer bench\r\n",
                   bn, body);
  if (bn < 0 || n < 0 || (size_t)n >= sizeof(r->req)) {
    fprintf(stderr, "bench_loadgen: request too large\n");
    exit(2);
  }
  r->req_n = (size_t)n;
}

/* The value of header field `name` (case-insensitive) in the head [p, e),
 * leading blanks skipped; NULL when absent. */
static const char *header(const char *p, const char *e, const char *name) {
  size_t nl = strlen(name);
  while (p < e) {
    const char *eol = memchr(p, '\n', (size_t)(e - p));
    if (eol == NULL) eol = e;
    if ((size_t)(eol - p) > nl && p[nl] == ':' &&
        strncasecmp(p, name, nl) == 0) {
      const char *v = p + nl + 1;
      while (v < eol && (*v == ' ' || *v == '\t')) v++;
      return v;
    }
    p = eol + 1;
  }
  return NULL;
}

/* Body bytes of a stream, scanned until the first content event. */
static void scan_body(run *r, conn *c, const char *p, size_t n) {
  if (!r->o->stream || c->got_content) return;
  while (n > 0) {
    if (c->sn == SCAN_BYTES) { /* keep a tail for a pattern split here */
      memmove(c->scan, c->scan + SCAN_BYTES - 64, 64);
      c->sn = 64;
    }
    size_t k = SCAN_BYTES - c->sn < n ? SCAN_BYTES - c->sn : n;
    memcpy(c->scan + c->sn, p, k);
    c->sn += k;
    p += k;
    n -= k;
    const char *s = c->scan, *e = c->scan + c->sn;
    for (const char *q = s; q < e; q++) {
      if (*q != '"') continue;
      size_t rest = (size_t)(e - q);
      if (rest >= 12 && memcmp(q, "\"text_delta\"", 12) == 0) goto found;
      if (rest >= 10 && memcmp(q, "\"content\":", 10) == 0) {
        const char *v = q + 10;
        while (v < e && *v == ' ') v++;
        if (v + 1 < e && v[0] == '"' && v[1] != '"') goto found;
      }
    }
  }
  return;
found:
  c->got_content = true;
  c->t_content = now_ns();
}

static void conn_open(run *r, int i);

static void conn_close(run *r, int i) {
  conn *c = &r->c[i];
  if (c->fd >= 0) {
    epoll_ctl(r->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
  }
  c->fd = -1;
  c->connected = false;
  c->busy = false;
}

static void send_more(run *r, int i) {
  conn *c = &r->c[i];
  while (c->wpos < r->req_n) {
    ssize_t k = send(c->fd, r->req + c->wpos, r->req_n - c->wpos, MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT,
                                 .data.u32 = (uint32_t)i};
        epoll_ctl(r->ep, EPOLL_CTL_MOD, c->fd, &ev);
        return;
      }
      r->errors += r->measuring;
      conn_close(r, i);
      if (!r->stopping) conn_open(r, i);
      return;
    }
    c->wpos += (size_t)k;
  }
  struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
  epoll_ctl(r->ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void send_request(run *r, int i) {
  conn *c = &r->c[i];
  c->busy = true;
  c->wpos = 0;
  c->st = ST_HEAD;
  c->got_content = false;
  c->sn = 0;
  c->t_send = now_ns();
  send_more(r, i);
}

static void conn_open(run *r, int i) {
  conn *c = &r->c[i];
  c->fd = socket(AF_INET, SOCK_STREAM, 0);
  if (c->fd < 0) die("socket");
  fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  c->rn = 0;
  c->connected = false;
  if (connect(c->fd, (struct sockaddr *)&r->o->addr, sizeof(r->o->addr)) != 0 &&
      errno != EINPROGRESS)
    die("connect");
  struct epoll_event ev = {.events = EPOLLOUT, .data.u32 = (uint32_t)i};
  if (epoll_ctl(r->ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) die("epoll_ctl");
}

static void response_done(run *r, int i) {
  conn *c = &r->c[i];
  uint64_t t = now_ns();
  c->busy = false;
  bool ok = c->status == 200 && (!r->o->stream || c->got_content);
  if (r->measuring) {
    if (ok) {
      r->done++;
      sample_add(&r->lat, t - c->t_send);
      if (r->o->stream) sample_add(&r->ttfc, c->t_content - c->t_send);
    } else {
      r->errors++;
    }
  }
  if (c->close_after) {
    conn_close(r, i);
    r->reconnects++;
    if (!r->stopping) conn_open(r, i);
  } else if (!r->stopping && r->o->hold == 0) {
    send_request(r, i);
  }
}

/* Parses what is in c->rbuf; returns false when the connection was closed. */
static bool parse(run *r, int i) {
  conn *c = &r->c[i];
  size_t off = 0;
  for (;;) {
    char *p = c->rbuf + off;
    size_t n = c->rn - off;
    if (c->st == ST_HEAD) {
      char *e = NULL;
      for (size_t k = 3; k < n; k++)
        if (p[k] == '\n' && p[k - 1] == '\r' && p[k - 2] == '\n' &&
            p[k - 3] == '\r') {
          e = p + k + 1;
          break;
        }
      if (e == NULL) break;
      c->status = n > 12 && memcmp(p, "HTTP/1.", 7) == 0 ? atoi(p + 9) : 0;
      const char *v = header(p, e, "transfer-encoding");
      c->chunked = v != NULL && strncasecmp(v, "chunked", 7) == 0;
      v = header(p, e, "connection");
      c->close_after = v != NULL && strncasecmp(v, "close", 5) == 0;
      v = header(p, e, "content-length");
      c->left = v ? strtoll(v, NULL, 10) : 0;
      off += (size_t)(e - p);
      c->st = c->chunked ? ST_CSIZE : ST_CL;
      if (!c->chunked && c->left == 0) {
        c->st = ST_HEAD;
        response_done(r, i);
        if (c->fd < 0) return false;
      }
    } else if (c->st == ST_CL || c->st == ST_CDATA) {
      if (n == 0) break;
      size_t k = (long long)n < c->left ? n : (size_t)c->left;
      scan_body(r, c, p, k);
      off += k;
      c->left -= (long long)k;
      if (c->left > 0) break;
      if (c->st == ST_CDATA) {
        c->st = ST_CCRLF;
      } else {
        c->st = ST_HEAD;
        response_done(r, i);
        if (c->fd < 0) return false;
      }
    } else if (c->st == ST_CCRLF) {
      if (n < 2) break;
      off += 2;
      c->st = ST_CSIZE;
    } else { /* ST_CSIZE, ST_TRAILER: one line */
      char *eol = memchr(p, '\n', n);
      if (eol == NULL) break;
      off += (size_t)(eol - p) + 1;
      if (c->st == ST_CSIZE) {
        c->left = strtoll(p, NULL, 16);
        c->st = c->left > 0 ? ST_CDATA : ST_TRAILER;
      } else if (eol - p <= 1) { /* the empty line after the last chunk */
        c->st = ST_HEAD;
        response_done(r, i);
        if (c->fd < 0) return false;
      }
    }
  }
  if (off > 0) {
    memmove(c->rbuf, c->rbuf + off, c->rn - off);
    c->rn -= off;
  }
  return true;
}

static void on_event(run *r, int i, uint32_t events) {
  conn *c = &r->c[i];
  if (!c->connected) {
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0 || (events & (EPOLLERR | EPOLLHUP))) {
      r->errors++;
      conn_close(r, i);
      return;
    }
    c->connected = true;
    if (!r->stopping) send_request(r, i);
    return;
  }
  if (events & EPOLLOUT) send_more(r, i);
  if (c->fd < 0 || !(events & (EPOLLIN | EPOLLERR | EPOLLHUP))) return;
  for (int rounds = 0; rounds < 16; rounds++) {
    if (c->rn == RBUF) { /* a head larger than the buffer */
      r->errors++;
      conn_close(r, i);
      return;
    }
    ssize_t k = recv(c->fd, c->rbuf + c->rn, RBUF - c->rn, 0);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (k <= 0) {
      if (c->busy || r->o->hold) r->errors += r->measuring || r->o->hold;
      conn_close(r, i);
      r->reconnects++;
      if (!r->stopping && r->o->hold == 0) conn_open(r, i);
      return;
    }
    c->rn += (size_t)k;
    if (!parse(r, i)) return;
    if ((size_t)k < RBUF) return;
  }
}

/* Runs the loop until deadline_ns (or until done() says so). */
static void loop_until(run *r, uint64_t deadline_ns, bool (*done)(run *)) {
  struct epoll_event evs[256];
  for (;;) {
    uint64_t t = now_ns();
    if (t >= deadline_ns || (done && done(r))) return;
    uint64_t ms = (deadline_ns - t) / 1000000u;
    if (ms > 100) ms = 100;
    int n = epoll_wait(r->ep, evs, 256, (int)ms);
    if (n < 0 && errno != EINTR) die("epoll_wait");
    for (int k = 0; k < n; k++)
      on_event(r, (int)evs[k].data.u32, evs[k].events);
  }
}

/* ---- hold mode
 * ---------------------------------------------------------------- */

/* A blocking GET of url with Connection: close; returns how often match
 * occurs in the response (head and body), -1 on error. */
static long count_in_get(const char *url, const char *match) {
  char host[64], path[512];
  int port = 0;
  if (sscanf(url, "http://%63[^:/]:%d%511s", host, &port, path) != 3) return -1;
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, host, &a.sin_addr) != 1) return -1;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    fprintf(stderr, "bench_loadgen: GET %s: socket: %s\n", url,
            strerror(errno));
    return -1;
  }
  struct timeval tv = {2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char req[700];
  int n = snprintf(req, sizeof(req),
                   "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
                   path, host);
  if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
      send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
    fprintf(stderr, "bench_loadgen: GET %s: %s\n", url, strerror(errno));
    close(fd);
    return -1;
  }
  char *buf = malloc(MAX_GET_BYTES + 1);
  size_t len = 0;
  ssize_t k;
  while (buf && len < MAX_GET_BYTES &&
         (k = recv(fd, buf + len, MAX_GET_BYTES - len, 0)) > 0)
    len += (size_t)k;
  close(fd);
  if (buf == NULL) return -1;
  buf[len] = '\0';
  long count = 0;
  size_t ml = strlen(match);
  for (char *p = buf; ml && (p = strstr(p, match)) != NULL; p += ml) count++;
  free(buf);
  return count;
}

static bool all_have_content(run *r) {
  for (int i = 0; i < r->o->hold; i++)
    if (r->c[i].fd < 0 || !r->c[i].got_content) return false;
  return true;
}

static int do_hold(run *r) {
  opts *o = r->o;
  long before = proc_rss_kib(o->pids[0]);
  uint64_t t0 = now_ns();
  uint64_t end = t0 + (uint64_t)(o->hold_timeout_s * 1e9);
  for (int i = 0; i < o->hold; i++) conn_open(r, i);
  bool ready = false;
  long seen = 0, last = -1;
  int stable = 0;
  while (!ready && now_ns() < end) {
    uint64_t slice = now_ns() + 200000000u;
    loop_until(r, slice < end ? slice : end,
               o->ready_ttfc ? all_have_content : NULL);
    if (o->ready_ttfc) {
      ready = all_have_content(r);
    } else {
      /* All N upstream, or as many as the gateway lets through (its
       * upstream connection pool may queue the rest): the count has not
       * moved for a second. */
      seen = count_in_get(o->ready_url, o->ready_match);
      stable = seen > 0 && seen == last ? stable + 1 : 0;
      last = seen;
      ready = seen >= o->hold || (stable >= 5 && seen >= o->ready_min);
    }
  }
  uint64_t t_ready = now_ns();
  loop_until(r, t_ready + 500000000u, NULL); /* settle */
  long after = proc_rss_kib(o->pids[0]);
  int open = 0, content = 0;
  for (int i = 0; i < o->hold; i++) {
    open += r->c[i].fd >= 0;
    content += r->c[i].fd >= 0 && r->c[i].got_content;
  }
  if (!o->ready_ttfc) seen = count_in_get(o->ready_url, o->ready_match);
  printf(
      "%s hold=%d ready=%d open=%d with_content=%d upstream_seen=%ld "
      "errors=%llu ready_s=%.2f rss_before_kib=%ld "
      "rss_after_kib=%ld kib_per_stream=%.2f",
      o->label, o->hold, ready, open, content, seen,
      (unsigned long long)r->errors, (double)(t_ready - t0) / 1e9, before,
      after, (double)(after - before) / o->hold);
  for (int k = 1; k < o->n_pids; k++)
    printf(" rss_kib_pid%d=%ld", k, proc_rss_kib(o->pids[k]));
  printf("\n");
  r->stopping = true;
  for (int i = 0; i < o->hold; i++) conn_close(r, i);
  return ready ? 0 : 1;
}

/* ---- load mode
 * ---------------------------------------------------------------- */

static int do_load(run *r) {
  opts *o = r->o;
  for (int i = 0; i < o->conns; i++) conn_open(r, i);
  uint64_t t0 = now_ns();
  loop_until(r, t0 + (uint64_t)(o->warmup_s * 1e9), NULL);
  long long cpu0[MAX_PIDS];
  for (int k = 0; k < o->n_pids; k++) cpu0[k] = proc_cpu_ns(o->pids[k]);
  uint64_t self0 = self_cpu_ns();
  r->errors = 0;
  r->measuring = true;
  uint64_t t1 = now_ns();
  loop_until(r, t1 + (uint64_t)(o->duration_s * 1e9), NULL);
  uint64_t t2 = now_ns();
  r->measuring = false;
  r->stopping = true;
  long long cpu1[MAX_PIDS];
  for (int k = 0; k < o->n_pids; k++) cpu1[k] = proc_cpu_ns(o->pids[k]);
  uint64_t self1 = self_cpu_ns();
  for (int i = 0; i < o->conns; i++) conn_close(r, i);

  double secs = (double)(t2 - t1) / 1e9;
  double n = r->done ? (double)r->done : 1;
  qsort(r->lat.v, r->lat.n, sizeof(uint64_t), cmp_u64);
  qsort(r->ttfc.v, r->ttfc.n, sizeof(uint64_t), cmp_u64);
  printf(
      "%s c=%d stream=%d secs=%.2f n=%llu errors=%llu reconnects=%llu "
      "rps=%.0f p50_us=%.1f p90_us=%.1f p99_us=%.1f p999_us=%.1f max_us=%.1f",
      o->label, o->conns, o->stream, secs, (unsigned long long)r->done,
      (unsigned long long)r->errors, (unsigned long long)r->reconnects,
      (double)r->done / secs, pct_us(&r->lat, 0.50), pct_us(&r->lat, 0.90),
      pct_us(&r->lat, 0.99), pct_us(&r->lat, 0.999), pct_us(&r->lat, 1.0));
  if (o->stream)
    printf(" ttfc_p50_us=%.1f ttfc_p99_us=%.1f", pct_us(&r->ttfc, 0.50),
           pct_us(&r->ttfc, 0.99));
  for (int k = 0; k < o->n_pids; k++)
    printf(" cpu_us_per_req_pid%d=%.1f", k,
           cpu0[k] < 0 || cpu1[k] < 0 ? -1.0
                                      : (double)(cpu1[k] - cpu0[k]) / 1e3 / n);
  printf(" cpu_us_per_req_self=%.1f\n", (double)(self1 - self0) / 1e3 / n);
  return r->errors ? 1 : 0;
}

/* ---- main
 * --------------------------------------------------------------------- */

static int parse_url(opts *o, const char *url) {
  int port = 0;
  if (sscanf(url, "http://%63[^:/]:%d%511s", o->host, &port, o->path) != 3 ||
      port <= 0 || port > 65535)
    return -1;
  memset(&o->addr, 0, sizeof(o->addr));
  o->addr.sin_family = AF_INET;
  o->addr.sin_port = htons((uint16_t)port);
  return inet_pton(AF_INET, o->host, &o->addr.sin_addr) == 1 ? 0 : -1;
}

int main(int argc, char **argv) {
  if (argc < 2) { /* run by scripts/bench.sh: bench/gateway.sh drives it */
    printf(
        "bench_loadgen: the load tool of bench/gateway.sh; --help for usage\n");
    return 0;
  }
  opts o;
  memset(&o, 0, sizeof(o));
  o.conns = 1;
  o.warmup_s = 1;
  o.duration_s = 5;
  o.label = "run";
  o.hold_timeout_s = 30;
  bool have_url = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(usage, stdout);
      return 0;
    } else if (strcmp(a, "--stream") == 0) {
      o.stream = true;
    } else if (strcmp(a, "--ready-ttfc") == 0) {
      o.ready_ttfc = true;
    } else if (v == NULL) {
      fprintf(stderr, "bench_loadgen: unknown or incomplete option '%s'\n%s", a,
              usage);
      return 2;
    } else {
      i++;
      if (strcmp(a, "--url") == 0) {
        if (parse_url(&o, v) != 0) {
          fprintf(stderr,
                  "bench_loadgen: --url must be http://IPV4:PORT/PATH\n");
          return 2;
        }
        have_url = true;
      } else if (strcmp(a, "--model") == 0) {
        o.model = v;
      } else if (strcmp(a, "--api") == 0) {
        o.anthropic = strcmp(v, "anthropic") == 0;
      } else if (strcmp(a, "-c") == 0) {
        o.conns = atoi(v);
      } else if (strcmp(a, "-w") == 0) {
        o.warmup_s = atof(v);
      } else if (strcmp(a, "-d") == 0) {
        o.duration_s = atof(v);
      } else if (strcmp(a, "--pid") == 0 && o.n_pids < MAX_PIDS) {
        o.pids[o.n_pids++] = (pid_t)atoi(v);
      } else if (strcmp(a, "--label") == 0) {
        o.label = v;
      } else if (strcmp(a, "--hold") == 0) {
        o.hold = atoi(v);
      } else if (strcmp(a, "--ready-url") == 0) {
        o.ready_url = v;
      } else if (strcmp(a, "--ready-match") == 0) {
        o.ready_match = v;
      } else if (strcmp(a, "--ready-min") == 0) {
        o.ready_min = atol(v);
      } else if (strcmp(a, "--hold-timeout") == 0) {
        o.hold_timeout_s = atof(v);
      } else {
        fprintf(stderr, "bench_loadgen: unknown option '%s'\n%s", a, usage);
        return 2;
      }
    }
  }
  if (!have_url || o.model == NULL || strlen(o.model) > 1024 || o.conns < 1 ||
      o.conns > MAX_CONNS || o.hold < 0 || o.hold > MAX_CONNS ||
      o.warmup_s < 0 || o.warmup_s > MAX_SECONDS || o.duration_s <= 0 ||
      o.duration_s > MAX_SECONDS || o.hold_timeout_s <= 0 ||
      o.hold_timeout_s > MAX_SECONDS ||
      (o.hold &&
       (o.n_pids == 0 ||
        (!o.ready_ttfc && (o.ready_url == NULL || o.ready_match == NULL))))) {
    fputs(usage, stderr);
    return 2;
  }
  if (o.hold) o.stream = true;
  int n = o.hold ? o.hold : o.conns;
  run r;
  memset(&r, 0, sizeof(r));
  r.o = &o;
  r.c = calloc((size_t)n, sizeof(conn));
  if (r.c == NULL) die("calloc");
  for (int i = 0; i < n; i++) {
    r.c[i].fd = -1;
    r.c[i].rbuf = malloc(RBUF);
    if (r.c[i].rbuf == NULL) die("malloc");
  }
  r.ep = epoll_create1(0);
  if (r.ep < 0) die("epoll_create1");
  build_request(&r);
  int rc = o.hold ? do_hold(&r) : do_load(&r);
  for (int i = 0; i < n; i++) free(r.c[i].rbuf);
  free(r.c);
  free(r.lat.v);
  free(r.ttfc.v);
  close(r.ep);
  return rc;
}
