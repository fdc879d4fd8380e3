/*
 * The soak driver (`make soak`, ctest soak/short): `airetry serve`
 * in front of `airetry mock` with a random fault mix, a bounded load of
 * requests in both dialects, streaming and not, some aborted by the client,
 * and every one of them verified. tests/soak/run.sh starts the processes:
 *
 *   soak script --profile P --seed S --out FILE       the mock's script
 *   soak config --mock-port PORT [--redis-port PORT] --out FILE
 *                                                     the gateway's config
 *   soak run    --profile P --seed S --gateway URL --mock URL --pid PID
 *               --log FILE [--rate R] [--concurrency C] [--ctl DIR]
 *
 * The profiles redis-short and redis run three gateways that
 * share their state through one Redis, which run.sh restarts (kill -9)
 * every few seconds during the load: --gateway, --pid and --log are then
 * given once per instance (in the same order), request i goes to instance
 * i % 3, and every check below is made per instance (its log lines, its
 * /metrics, its worker's RSS and fds). --ctl DIR is the handshake with
 * run.sh's restarter: the driver creates DIR/warm after the warm-up (the
 * restarts begin), DIR/stop when the last request has ended (they end);
 * run.sh then answers with DIR/final holding the number of restarts, once
 * Redis is up again. At the end every instance must show
 * airetry_state_redis_up 1 and at least that many reconnects.
 *
 * The routes (ROUTES below) each have three targets across both upstream
 * dialects and their own budget and policy. Every model of the mock has a
 * random list of behaviours by attempt number (healthy, slow tokens, 429
 * with a short Retry-After, 5xx, reset, silence, cut, stall, overload after
 * commit, refusal, malformed event, no terminator), so the faults land on
 * requests in whatever order they arrive. Aborted requests use routes of
 * their own (x0, x1) so their upstream attempts can be found in the mock's
 * log by model and time.
 *
 * Per request (libcurl multi, 127.0.0.1 only, at most --concurrency in
 * flight, at most --rate started per second):
 *   - 200: the exact canonical answer "[M] w1 .. wN" of the target named by
 *     x-airetry-target, finish "stop" and a clean terminator; or, for a
 *     stream that failed after commit, a non-empty prefix of that answer
 *     ended by one error event and no terminator. Never a stream without
 *     either, never an event after the end, never a malformed event;
 *   - 4xx/5xx: a JSON error body of the caller's dialect with an attempts
 *     array as long as x-airetry-attempts, x-should-retry: false, and a
 *     status the fault mix can produce;
 *   - x-airetry-attempts <= the route's max_total_attempts;
 *   - aborted: what arrived before the abort is a prefix of the answer.
 * At the end:
 *   - the gateway's stderr holds exactly one log line per request (matched
 *     by the x-request-id the driver sets; a request aborted before it had
 *     wholly left the driver may have none: the gateway never received
 *     it — every failure about an aborted request names the phase it was
 *     aborted in) whose route, dialect, stream
 *     flag, status, outcome and attempt count agree with what the driver
 *     saw, within the budget;
 *   - the mock's log has as many attempts per model (and per error status)
 *     as the gateway's log lines, all streamed in the provider's dialect,
 *     none still open; the attempt in flight when a request was aborted
 *     ended (hung up) within ABORT_GRACE_MS of the abort;
 *   - /metrics: requests by route and outcome, attempts by target and
 *     reason, retries and switches equal the counts of the log lines;
 *   - /healthz answers; VmRSS within 10% of the one after the warm-up; open
 *     fds at most FD_SLACK above the ones after the warm-up.
 * Exit 0 when every check passed, 1 otherwise (the first failures are
 * printed with what was expected and seen), 2 on usage errors.
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>

#include "buf.h"
#include "dialect.h"
#include "sse.h"

#define N_TARGETS 3
#define MAX_CONCURRENCY 256
#define MAX_REQUESTS 200000
#define MAX_BODY (1u << 20)      /* one response body kept */
#define MAX_TEXT (64u << 10)     /* one answer's text */
#define MAX_FETCH (64u << 20)    /* /__mock/log, /metrics, the log file */
#define CLIENT_TIMEOUT_MS 30000L /* no request may take longer */
#define SETTLE_MS 15000          /* bound of every settle wait */
#define ABORT_GRACE_MS 1000      /* upstream closed this soon after abort */
#define ABORT_LATE_MS 100        /* an attempt may start this late */
#define CLOCK_SLACK_MS 25        /* the mock stamps times with its loop clock */
#define FD_SLACK 4
#define RSS_SLACK_PCT 10
#define MAX_REPORTED 30 /* failures printed in full */
#define RSS_EVERY 1000  /* VmRSS sampled under load (printed) */
#define MAX_TREND 200

/* ---- the scenario -------------------------------------------------------- */

typedef struct target {
  const char *provider; /* "mo" (openai) or "ma" (anthropic) */
  const char *model;
  int tokens;
} target;

typedef struct route {
  const char *name;
  target t[N_TARGETS];
  int budget;         /* max_total_attempts */
  bool aborts;        /* the route of aborted requests */
  const char *policy; /* extra YAML of the route, indented 4 */
} route;

static const route ROUTES[] = {
    {"r0",
     {{"mo", "r0a", 8}, {"ma", "r0b", 10}, {"mo", "r0c", 6}},
     6,
     false,
     ""},
    {"r1",
     {{"ma", "r1a", 9}, {"mo", "r1b", 7}, {"ma", "r1c", 11}},
     4,
     false,
     "    budget: {max_total_attempts: 4, per_reason: {rate_limit: 2}}\n"},
    {"r2",
     {{"mo", "r2a", 12}, {"ma", "r2b", 5}, {"ma", "r2c", 8}},
     3,
     false,
     "    budget: {max_total_attempts: 3}\n"
     "    commit: complete\n"},
    {"r3",
     {{"ma", "r3a", 8}, {"mo", "r3b", 9}, {"mo", "r3c", 10}},
     5,
     false,
     "    budget: {max_total_attempts: 5}\n"
     "    rules:\n"
     "      - {on: [rate_limit, overloaded], action: retry, max: unlimited,\n"
     "         backoff: {base_ms: 5, factor: 2, max_ms: 40, jitter: full}}\n"
     "      - {on: [server_error, network, malformed, timeout.connect,\n"
     "              timeout.first_byte, timeout.first_chunk, timeout.chunk,\n"
     "              timeout.attempt, refusal], action: switch}\n"},
    {"x0",
     {{"mo", "x0a", 12}, {"ma", "x0b", 12}, {"mo", "x0c", 12}},
     6,
     true,
     ""},
    {"x1",
     {{"ma", "x1a", 12}, {"mo", "x1b", 12}, {"ma", "x1c", 12}},
     4,
     true,
     "    budget: {max_total_attempts: 4}\n"},
};
#define N_ROUTES (sizeof(ROUTES) / sizeof(ROUTES[0]))
#define N_PLAIN_ROUTES 4 /* r0..r3; x0, x1 follow */

static const char REFUSAL_PHRASE[] = "I'm sorry, but I cannot assist";

typedef struct profile {
  const char *name;
  int total;     /* requests, the warm-up included */
  int warm;      /* warm-up requests (RSS and fds measured after them) */
  double rate;   /* requests started per second at most */
  int list_len;  /* behaviours listed per primary model */
  int instances; /* gateways (3: sharing state through Redis) */
} profile;

static const profile PROFILES[] = {
    {"short", 1000, 200, 250, 700, 1},
    {"long", 11000, 1000, 200, 6500, 1},
    {"redis-short", 1500, 600, 250, 1000, 3},
    {"redis", 11000, 1000, 200, 6500, 3},
};
#define MAX_GW 3 /* gateways of one run */

/* ---- small helpers ------------------------------------------------------- */

static uint64_t mono_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static double mono_ms(void) {
  return (double)mono_us() / 1000.0;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* splitmix64: a small deterministic generator, seeded per use. */
static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [0, n). */
static unsigned rng_below(uint64_t *s, unsigned n) {
  return (unsigned)(rng_next(s) % n);
}

static const profile *find_profile(const char *name) {
  for (size_t i = 0; i < sizeof(PROFILES) / sizeof(PROFILES[0]); i++)
    if (strcmp(PROFILES[i].name, name) == 0) return &PROFILES[i];
  return NULL;
}

/* The canonical answer of a model with n tokens (docs/mock.md). */
static void canonical(const target *t, air__buf *out) {
  air__buf_reset(out);
  air__buf_putc(out, '[');
  air__buf_puts(out, t->model);
  air__buf_putc(out, ']');
  for (int i = 1; i <= t->tokens; i++) {
    air__buf_puts(out, " w");
    air__buf_putu(out, (unsigned long long)i);
  }
}

/* The index in route r of "provider/model", -1 if it is not one of its. */
static int target_index(const route *r, const char *pm) {
  for (int k = 0; k < N_TARGETS; k++) {
    size_t pn = strlen(r->t[k].provider);
    if (strncmp(pm, r->t[k].provider, pn) == 0 && pm[pn] == '/' &&
        strcmp(pm + pn + 1, r->t[k].model) == 0)
      return k;
  }
  return -1;
}

/* Finds the model (route, target) by its mock name. */
static bool find_model(const char *model, int *ri, int *ti) {
  for (size_t i = 0; i < N_ROUTES; i++)
    for (int k = 0; k < N_TARGETS; k++)
      if (strcmp(ROUTES[i].t[k].model, model) == 0) {
        *ri = (int)i;
        *ti = k;
        return true;
      }
  return false;
}

/* ---- failures ------------------------------------------------------------ */

static unsigned n_failures;

__attribute__((format(printf, 1, 2))) static void fail(const char *fmt, ...) {
  n_failures++;
  if (n_failures > MAX_REPORTED) {
    if (n_failures == MAX_REPORTED + 1)
      fprintf(stderr,
              "soak: FAIL: ... (further failures counted, not shown)\n");
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  fputs("soak: FAIL: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* ---- the mock's script and the gateway's config -------------------------- */

/* One random behaviour as a YAML flow map. pos: the target's position in
 * its route (later targets are healthier, so most requests succeed). */
static void behaviour(uint64_t *s, int pos, const target *t, bool slow_model,
                      char *out, size_t n) {
  static const struct {
    int w;
    const char *yaml; /* the whole map, or the key of a content event count */
    int arg;          /* 0: yaml is the map; 1: count 0..tokens; 2: 1..tokens */
  } mix[] = {
      {6, "{delay_ms: 3}", 0},
      {5, "{status: 429, retry_after_ms: 15}", 0},
      {2, "{status: 429, retry_after: 0.02}", 0},
      {4, "{status: 503}", 0},
      {2, "{status: 500}", 0},
      {2, "{status: 529}", 0},
      {4, "{reset: true}", 0},
      {4, "cut_after", 1},
      {3, "stall_after", 1},
      {4, "{refusal: true}", 0},
      {4, "malformed_at", 2},
      {2, "{no_done: true}", 0},
      {3, "overload_after", 1},
      {1, "{headers_delay_ms: 5000}", 0},
      {1, "{hang: true}", 0},
      {1, "{first_delay_ms: 5000}", 0},
  };
  static const int healthy_w[N_TARGETS] = {40, 80, 130};
  int total = healthy_w[pos];
  for (size_t i = 0; i < sizeof(mix) / sizeof(mix[0]); i++) total += mix[i].w;
  int x = (int)rng_below(s, (unsigned)total) - healthy_w[pos];
  for (size_t i = 0; x >= 0 && i < sizeof(mix) / sizeof(mix[0]); i++) {
    if (x >= mix[i].w) {
      x -= mix[i].w;
      continue;
    }
    if (slow_model && i == 0) break; /* the model is slow already */
    if (mix[i].arg == 0) {
      snprintf(out, n, "%s", mix[i].yaml);
    } else {
      int lo = mix[i].arg == 1 ? 0 : 1;
      int v = lo + (int)rng_below(s, (unsigned)(t->tokens + 1 - lo));
      snprintf(out, n, "{%s: %d}", mix[i].yaml, v);
    }
    return;
  }
  snprintf(out, n, "{}");
}

static int write_script(const profile *pr, uint64_t seed, const char *path) {
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    fprintf(stderr, "soak: %s: %s\n", path, strerror(errno));
    return 1;
  }
  uint64_t s = seed ^ 0x5eed5c21a7ull;
  fprintf(f, "# Generated by tests/soak/soak.c (profile %s, seed %llu).\n",
          pr->name, (unsigned long long)seed);
  fprintf(f, "defaults: {tokens: 8, delay_ms: 0}\nmodels:\n");
  for (size_t i = 0; i < N_ROUTES; i++) {
    const route *r = &ROUTES[i];
    for (int k = 0; k < N_TARGETS; k++) {
      const target *t = &r->t[k];
      fprintf(f, "  %s:\n    tokens: %d\n", t->model, t->tokens);
      /* Aborted requests need time to be aborted in: slow tokens. */
      if (r->aborts) fprintf(f, "    delay_ms: 6\n");
      int len = r->aborts ? 300 : pr->list_len * (3 - k) / 3 + 50;
      fprintf(f, "    attempts:\n");
      char b[96];
      for (int a = 0; a < len; a++) {
        behaviour(&s, k, t, r->aborts, b, sizeof(b));
        fprintf(f, "      - %s\n", b);
      }
      fprintf(f, "    then: {}\n");
    }
  }
  if (fclose(f) != 0) {
    fprintf(stderr, "soak: %s: %s\n", path, strerror(errno));
    return 1;
  }
  return 0;
}

static int write_config(int mock_port, int redis_port, const char *path) {
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    fprintf(stderr, "soak: %s: %s\n", path, strerror(errno));
    return 1;
  }
  fprintf(
      f,
      "# Generated by tests/soak/soak.c: the soak's gateway in front of\n"
      "# airetry mock (both dialects), small deadlines so faults are fast.\n"
      "providers:\n"
      "  - {name: mo, api: openai, base_url: \"http://127.0.0.1:%d/v1\"}\n"
      "  - {name: ma, api: anthropic, base_url: \"http://127.0.0.1:%d\"}\n"
      "defaults:\n"
      "  timeouts: {connect_ms: 1000, first_byte_ms: 300, first_chunk_ms: "
      "400,\n"
      "             chunk_ms: 250, attempt_ms: 1500, total_ms: 4000}\n"
      "  refusal: {phrases: [\"%s\"]}\n"
      "  breaker: {failures: 3, open_ms: 250}\n"
      "routes:\n",
      mock_port, mock_port, REFUSAL_PHRASE);
  for (size_t i = 0; i < N_ROUTES; i++) {
    const route *r = &ROUTES[i];
    fprintf(f, "  - name: %s\n    targets: [%s/%s, %s/%s, %s/%s]\n", r->name,
            r->t[0].provider, r->t[0].model, r->t[1].provider, r->t[1].model,
            r->t[2].provider, r->t[2].model);
    if (r->policy[0] != '\0')
      fputs(r->policy, f);
    else
      fprintf(f, "    budget: {max_total_attempts: %d}\n", r->budget);
  }
  /* The Redis profiles: breaker, probe, cooldown and sticky state shared by
   * the three instances; Redis on 127.0.0.1 without a password. */
  if (redis_port > 0)
    fprintf(f,
            "state:\n"
            "  redis: {url: \"redis://127.0.0.1:%d/0\", prefix: \"soak:\",\n"
            "          connect_timeout_ms: 200, command_timeout_ms: 200}\n",
            redis_port);
  if (fclose(f) != 0) {
    fprintf(stderr, "soak: %s: %s\n", path, strerror(errno));
    return 1;
  }
  return 0;
}

/* ---- the requests -------------------------------------------------------- */

enum { ABORT_NONE, ABORT_TIMED, ABORT_PARTS };
enum { K_NONE, K_OK, K_ERR_AFTER_COMMIT, K_ERROR, K_ABORTED, K_BAD };
/* Where an aborted request was, as the driver saw it when it let go. */
enum {
  P_CONNECTING, /* no connection to the gateway yet */
  P_SENDING,    /* connected, the request not wholly sent */
  P_WAITING,    /* request sent, no response head */
  P_HEAD,       /* head received, no text yet */
  P_STREAMING,  /* text received */
  P_COUNT
};
static const char *const PHASES[P_COUNT] = {
    "connecting", "sending the request", "waiting for the head",
    "after the head, before text", "streaming text"};

/* What request i is (drawn from the seed) and what became of it. */
typedef struct result {
  unsigned char route, api, stream, usage; /* usage: stream_options asked */
  unsigned char abort_mode, abort_parts;
  unsigned short abort_ms;
  unsigned char kind;     /* K_* */
  unsigned char phase;    /* P_*, of an aborted request */
  signed char target;     /* x-airetry-target's index in the route, -1 */
  short status;           /* HTTP status, 0 none */
  short attempts_hdr;     /* x-airetry-attempts, -1 none */
  unsigned char logged;   /* log lines seen */
  unsigned char gw;       /* the instance it is sent to */
  double t_send, t_abort; /* driver ms */
} result;

typedef struct inflight {
  int idx; /* -1: free slot */
  CURL *h;
  struct curl_slist *hdrs;
  char body[400];
  bool sse, json, no_retry;
  char target[160];
  int attempts_hdr;
  air__sse sse_p;
  air__decoder dec;
  const air__dialect_ops *ops;
  air__buf text;
  air__buf raw;
  bool error_seen, after_end, too_big;
  bool connected; /* a connection (new or reused) carries the request */
  unsigned text_parts, error_parts;
  air_finish fin;
} inflight;

typedef struct run {
  const profile *pr;
  uint64_t seed;
  double rate;
  int conc;
  const char *mock_url;
  const char *gw_url[MAX_GW], *log_path[MAX_GW];
  int pid[MAX_GW];
  int n_gw, n_pid, n_log;
  const char *ctl; /* run.sh's restarter handshake folder, or NULL */
  bool asan;
  CURLM *m;
  inflight *slots;
  int in_flight;
  result *res;
  double t_reset;     /* driver ms of the mock's clock 0 */
  double t_reset_err; /* how far off t_reset may be (half the reset's RTT) */
  air__buf want;      /* scratch: a canonical answer */
  /* figures */
  unsigned n_stream_ok, n_plain_ok, n_after_commit, n_aborted;
  unsigned by_status[600];
  long rss_warm[MAX_GW], rss_end[MAX_GW];
  /* VmRSS every RSS_EVERY requests (under load), per instance */
  long trend[MAX_GW][MAX_TREND];
  int n_trend;
  int fd_warm[MAX_GW], fd_end[MAX_GW];
} run;

static void draw_requests(run *R) {
  uint64_t s = R->seed ^ 0xa11ce5ull;
  for (int i = 0; i < R->pr->total; i++) {
    result *x = &R->res[i];
    memset(x, 0, sizeof(*x));
    x->target = -1;
    x->attempts_hdr = -1;
    x->gw = (unsigned char)(i % R->n_gw); /* draws nothing: seeds replay */
    x->api = (unsigned char)rng_below(&s, 2);
    x->stream = rng_below(&s, 100) < 60;
    x->usage =
        x->api == AIR_DIALECT_OPENAI && x->stream && rng_below(&s, 4) == 0;
    if (rng_below(&s, 100) < 3) {
      x->route = (unsigned char)(N_PLAIN_ROUTES + rng_below(&s, 2));
      if (x->stream && rng_below(&s, 2) == 0) {
        x->abort_mode = ABORT_PARTS;
        x->abort_parts = (unsigned char)(1 + rng_below(&s, 5));
      } else {
        x->abort_mode = ABORT_TIMED;
        x->abort_ms = (unsigned short)rng_below(&s, 120);
      }
    } else {
      x->route = (unsigned char)rng_below(&s, N_PLAIN_ROUTES);
    }
  }
}

/*
 * Whether the gateway must have logged request x. A request the driver
 * aborted before it had wholly left (no connection yet, or the request
 * still being written) may never have reached the gateway as a request:
 * the gateway then saw a connection close, or a partial request, and has
 * nothing to log. Every other request has exactly one line.
 */
static bool line_required(const result *x) {
  return x->kind != K_ABORTED || x->phase >= P_WAITING;
}

static void rid_of(const run *R, int i, char *out, size_t n) {
  snprintf(out, n, "soak-%llu-%d", (unsigned long long)(R->seed % 1000000007u),
           i);
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *data) {
  inflight *f = data;
  size_t n = size * nmemb;
  const char *colon = memchr(p, ':', n);
  if (n >= 5 && memcmp(p, "HTTP/", 5) == 0) {
    f->sse = f->json = f->no_retry = false;
    f->target[0] = '\0';
    f->attempts_hdr = -1;
    return n;
  }
  if (colon == NULL) return n;
  size_t kn = (size_t)(colon - p);
  const char *v = colon + 1;
  size_t vn = n - kn - 1;
  while (vn > 0 && (*v == ' ' || *v == '\t')) v++, vn--;
  while (vn > 0 && (v[vn - 1] == '\r' || v[vn - 1] == '\n' || v[vn - 1] == ' '))
    vn--;
  char val[160];
  size_t cn = vn < sizeof(val) - 1 ? vn : sizeof(val) - 1;
  memcpy(val, v, cn);
  val[cn] = '\0';
  if (kn == 12 && strncasecmp(p, "content-type", 12) == 0) {
    f->sse = strncmp(val, "text/event-stream", 17) == 0;
    f->json = strncmp(val, "application/json", 16) == 0;
  } else if (kn == 18 && strncasecmp(p, "x-airetry-attempts", 18) == 0) {
    f->attempts_hdr = atoi(val);
  } else if (kn == 16 && strncasecmp(p, "x-airetry-target", 16) == 0) {
    snprintf(f->target, sizeof(f->target), "%s", val);
  } else if (kn == 14 && strncasecmp(p, "x-should-retry", 14) == 0) {
    f->no_retry = strcmp(val, "false") == 0;
  }
  return n;
}

static int on_part(void *data, const air_part *p) {
  inflight *f = data;
  switch (p->kind) {
    case AIR_PART_TEXT:
      if (p->text_len > 0) {
        f->text_parts++;
        if (air__buf_add(&f->text, p->text, p->text_len) != 0)
          f->too_big = true;
      }
      break;
    case AIR_PART_ERROR:
      f->error_parts++;
      break;
    case AIR_PART_FINISH:
      f->fin = p->finish;
      break;
    default:
      break;
  }
  return 0;
}

static int on_sse(void *data, const air__sse_event *ev) {
  inflight *f = data;
  if (f->dec.done || f->error_seen) f->after_end = true;
  f->ops->decode_event(&f->dec, ev, on_part, f);
  if (f->dec.error_event) f->error_seen = true;
  return 0;
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *data) {
  inflight *f = data;
  size_t n = size * nmemb;
  if (f->sse) {
    air__sse_feed(&f->sse_p, p, n);
  } else if (air__buf_add(&f->raw, p, n) != 0) {
    f->too_big = true;
  }
  return n;
}

/* libcurl has a connection for the request and is about to send it. */
static int on_prereq(void *data, char *ip, char *local_ip, int port,
                     int local_port) {
  inflight *f = data;
  (void)ip, (void)local_ip, (void)port, (void)local_port;
  f->connected = true;
  return CURL_PREREQFUNC_OK;
}

static CURL *easy_new(void) {
  CURL *h = curl_easy_init();
  if (h == NULL) return NULL;
  curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, CLIENT_TIMEOUT_MS);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
  return h;
}

static void slot_release(run *R, inflight *f) {
  if (f->h != NULL) {
    curl_multi_remove_handle(R->m, f->h);
    curl_easy_cleanup(f->h);
  }
  curl_slist_free_all(f->hdrs);
  air__sse_cleanup(&f->sse_p);
  air__decoder_cleanup(&f->dec);
  air__buf_cleanup(&f->text);
  air__buf_cleanup(&f->raw);
  memset(f, 0, sizeof(*f));
  f->idx = -1;
  R->in_flight--;
}

static int start_request(run *R, int i) {
  inflight *f = NULL;
  for (int k = 0; k < R->conc; k++)
    if (R->slots[k].idx < 0) {
      f = &R->slots[k];
      break;
    }
  if (f == NULL) return -1;
  result *x = &R->res[i];
  const route *r = &ROUTES[x->route];
  memset(f, 0, sizeof(*f));
  f->idx = i;
  f->attempts_hdr = -1;
  f->ops = air__dialect_get((air_dialect)x->api);
  f->ops->decoder_init(&f->dec);
  air__sse_init(&f->sse_p, on_sse, f);
  air__buf_init(&f->text, MAX_TEXT);
  air__buf_init(&f->raw, MAX_BODY);
  char rid[64], h[96];
  rid_of(R, i, rid, sizeof(rid));
  if (x->api == AIR_DIALECT_OPENAI)
    snprintf(f->body, sizeof(f->body),
             "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":"
             "\"soak %d\"}],\"stream\":%s%s}",
             r->name, i, x->stream ? "true" : "false",
             x->usage ? ",\"stream_options\":{\"include_usage\":true}" : "");
  else
    snprintf(f->body, sizeof(f->body),
             "{\"model\":\"%s\",\"max_tokens\":256,\"messages\":[{\"role\":"
             "\"user\",\"content\":\"soak %d\"}],\"stream\":%s}",
             r->name, i, x->stream ? "true" : "false");
  f->hdrs = curl_slist_append(NULL, "content-type: application/json");
  snprintf(h, sizeof(h), "x-request-id: %s", rid);
  f->hdrs = curl_slist_append(f->hdrs, h);
  f->hdrs = curl_slist_append(f->hdrs, "Expect:");
  if (x->api == AIR_DIALECT_ANTHROPIC)
    f->hdrs = curl_slist_append(f->hdrs, "anthropic-version: 2023-06-01");
  char url[512];
  snprintf(
      url, sizeof(url), "%s%s", R->gw_url[x->gw],
      x->api == AIR_DIALECT_OPENAI ? "/v1/chat/completions" : "/v1/messages");
  f->h = easy_new();
  if (f->h == NULL || f->hdrs == NULL) {
    fprintf(stderr, "soak: out of memory\n");
    exit(1);
  }
  curl_easy_setopt(f->h, CURLOPT_URL, url);
  curl_easy_setopt(f->h, CURLOPT_POSTFIELDS, f->body);
  curl_easy_setopt(f->h, CURLOPT_POSTFIELDSIZE, (long)strlen(f->body));
  curl_easy_setopt(f->h, CURLOPT_HTTPHEADER, f->hdrs);
  curl_easy_setopt(f->h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(f->h, CURLOPT_HEADERDATA, f);
  curl_easy_setopt(f->h, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(f->h, CURLOPT_WRITEDATA, f);
  curl_easy_setopt(f->h, CURLOPT_PRIVATE, f);
  curl_easy_setopt(f->h, CURLOPT_PREREQFUNCTION, on_prereq);
  curl_easy_setopt(f->h, CURLOPT_PREREQDATA, f);
  x->t_send = mono_ms();
  if (curl_multi_add_handle(R->m, f->h) != CURLM_OK) {
    fprintf(stderr, "soak: curl_multi_add_handle failed\n");
    exit(1);
  }
  R->in_flight++;
  return 0;
}

/* The text received so far is a prefix of the answer of the target that
 * answered (its name from x-airetry-target): nothing lost in the middle,
 * nothing sent twice, nothing of another attempt. */
static bool text_is_prefix(run *R, const inflight *f, const result *x,
                           bool whole) {
  if (x->target < 0) return f->text.n == 0;
  canonical(&ROUTES[x->route].t[x->target], &R->want);
  if (whole)
    return f->text.n == R->want.n &&
           memcmp(f->text.p, R->want.p, R->want.n) == 0;
  if (f->text.n > R->want.n) return false;
  if (f->text.n > 0 && memcmp(f->text.p, R->want.p, f->text.n) != 0)
    return false;
  /* It ends on a token boundary. */
  return f->text.n == R->want.n || f->text.n == 0 ||
         R->want.p[f->text.n] == ' ';
}

static const char *api_name(int api) {
  return api == AIR_DIALECT_ANTHROPIC ? "anthropic" : "openai";
}

#define REQ_FAIL(fmt, ...)                                          \
  do {                                                              \
    char rid_[64];                                                  \
    rid_of(R, f->idx, rid_, sizeof(rid_));                          \
    fail("%s (%s %s %s, status %d, target '%s'): " fmt, rid_,       \
         ROUTES[x->route].name, api_name(x->api),                   \
         x->stream ? "stream" : "non-stream", x->status, f->target, \
         __VA_ARGS__);                                              \
    x->kind = K_BAD;                                                \
  } while (0)

/* The error body of a final failure, in the caller's dialect. */
static void judge_error(run *R, inflight *f, result *x) {
  static const int expected[] = {422, 429, 500, 502, 503, 504, 529};
  bool known = false;
  for (size_t k = 0; k < sizeof(expected) / sizeof(expected[0]); k++)
    known |= x->status == expected[k];
  if (!known) {
    REQ_FAIL("unexpected status; body %.300s", f->raw.p ? f->raw.p : "");
    return;
  }
  if (!f->json) {
    REQ_FAIL("%s", "error without content-type application/json");
    return;
  }
  if (!f->no_retry) {
    REQ_FAIL("%s", "final error without x-should-retry: false");
    return;
  }
  json_error_t je;
  json_t *b = json_loadb(f->raw.p ? f->raw.p : "", f->raw.n, 0, &je);
  json_t *e = json_object_get(b, "error");
  json_t *atts = NULL;
  bool ok = json_is_object(e) &&
            json_is_string(json_object_get(e, "message")) &&
            json_is_string(json_object_get(e, "type"));
  if (x->api == AIR_DIALECT_OPENAI) {
    atts = json_object_get(e, "attempts");
  } else {
    ok = ok && json_is_string(json_object_get(b, "type")) &&
         strcmp(json_string_value(json_object_get(b, "type")), "error") == 0;
    atts = json_object_get(b, "attempts");
  }
  if (!ok || !json_is_array(atts)) {
    REQ_FAIL("not a %s error body with attempts: %.300s", api_name(x->api),
             f->raw.p ? f->raw.p : "");
  } else if ((int)json_array_size(atts) != f->attempts_hdr) {
    REQ_FAIL("%zu attempts in the body, x-airetry-attempts %d",
             json_array_size(atts), f->attempts_hdr);
  } else {
    for (size_t k = 0; k < json_array_size(atts); k++) {
      const char *t =
          json_string_value(json_object_get(json_array_get(atts, k), "target"));
      if (t == NULL || target_index(&ROUTES[x->route], t) < 0) {
        REQ_FAIL("attempt %zu of the error body names target '%s'", k + 1,
                 t ? t : "(none)");
        break;
      }
    }
    if (x->kind != K_BAD) x->kind = K_ERROR;
  }
  json_decref(b);
}

/* Judges a transfer that ended (not aborted by the driver). */
static void judge(run *R, inflight *f, CURLcode cc) {
  result *x = &R->res[f->idx];
  long st = 0;
  curl_easy_getinfo(f->h, CURLINFO_RESPONSE_CODE, &st);
  x->status = (short)st;
  x->attempts_hdr = (short)f->attempts_hdr;
  x->target = f->target[0]
                  ? (signed char)target_index(&ROUTES[x->route], f->target)
                  : -1;
  if (st >= 0 && st < 600) R->by_status[st]++;
  const route *r = &ROUTES[x->route];
  if (cc != CURLE_OK) {
    REQ_FAIL("transfer failed: %s (after %.0f ms; %zu text bytes)",
             curl_easy_strerror(cc), mono_ms() - x->t_send, f->text.n);
    return;
  }
  if (f->too_big) {
    REQ_FAIL("%s", "response over the driver's bounds");
    return;
  }
  if (f->attempts_hdr < 1 || f->attempts_hdr > r->budget) {
    REQ_FAIL("x-airetry-attempts %d, the route's budget is %d", f->attempts_hdr,
             r->budget);
    return;
  }
  if (st >= 400) {
    judge_error(R, f, x);
    return;
  }
  if (st != 200) {
    REQ_FAIL("%s", "unexpected status");
    return;
  }
  if (x->target < 0) {
    REQ_FAIL("%s", "x-airetry-target is not a target of the route");
    return;
  }
  if (x->stream) {
    if (!f->sse) {
      REQ_FAIL("%s", "a stream without content-type text/event-stream");
      return;
    }
    air__sse_finish(&f->sse_p);
    if (air__sse_pending(&f->sse_p) > 0 || f->sse_p.err != 0) {
      REQ_FAIL("stream ends inside an event (sse state %d)", f->sse_p.err);
      return;
    }
    if (f->dec.malformed > 0) {
      REQ_FAIL("%u malformed events reached the client", f->dec.malformed);
      return;
    }
    if (f->after_end) {
      REQ_FAIL("%s", "an event after the terminator or the error event");
      return;
    }
    if (f->dec.done && !f->error_seen) {
      if (!text_is_prefix(R, f, x, true) || f->fin != AIR_FINISH_STOP) {
        canonical(&r->t[x->target], &R->want);
        REQ_FAIL(
            "clean stream with text '%.200s' finish %d, want '%s' finish stop",
            f->text.p ? f->text.p : "", (int)f->fin, R->want.p);
        return;
      }
      x->kind = K_OK;
      R->n_stream_ok++;
    } else if (f->error_seen && !f->dec.done) {
      if (f->error_parts != 1 || f->text.n == 0 ||
          !text_is_prefix(R, f, x, false)) {
        canonical(&r->t[x->target], &R->want);
        REQ_FAIL("failed stream: %u error events, text '%.200s' (answer '%s')",
                 f->error_parts, f->text.p ? f->text.p : "", R->want.p);
        return;
      }
      x->kind = K_ERR_AFTER_COMMIT;
      R->n_after_commit++;
    } else {
      canonical(&r->t[x->target], &R->want);
      REQ_FAIL(
          "truncated stream: terminator %d, error event %d, text '%.200s' "
          "(answer '%s')",
          f->dec.done, f->error_seen, f->text.p ? f->text.p : "", R->want.p);
    }
    return;
  }
  if (!f->json) {
    REQ_FAIL("%s", "a non-stream answer without content-type application/json");
    return;
  }
  int rc = f->ops->decode_body(&f->dec, f->raw.p ? f->raw.p : "", f->raw.n,
                               on_part, f);
  if (rc != 0 || !text_is_prefix(R, f, x, true) || f->fin != AIR_FINISH_STOP) {
    canonical(&r->t[x->target], &R->want);
    REQ_FAIL(
        "answer '%.300s' (decode %d, finish %d), want text '%s' finish stop",
        f->raw.p ? f->raw.p : "", rc, (int)f->fin, R->want.p);
    return;
  }
  x->kind = K_OK;
  R->n_plain_ok++;
}

/* The driver gives up on a request: the handle is removed, which closes
 * its connection to the gateway mid-request. */
static void abort_request(run *R, inflight *f) {
  result *x = &R->res[f->idx];
  x->t_abort = mono_ms();
  x->kind = K_ABORTED;
  curl_off_t sent = 0;
  long code = 0;
  curl_easy_getinfo(f->h, CURLINFO_SIZE_UPLOAD_T, &sent);
  curl_easy_getinfo(f->h, CURLINFO_RESPONSE_CODE, &code);
  if (f->text_parts > 0)
    x->phase = P_STREAMING;
  else if (code != 0)
    x->phase = P_HEAD;
  else if (sent >= (curl_off_t)strlen(f->body))
    x->phase = P_WAITING;
  else if (f->connected)
    x->phase = P_SENDING;
  else
    x->phase = P_CONNECTING;
  x->target = f->target[0]
                  ? (signed char)target_index(&ROUTES[x->route], f->target)
                  : -1;
  if (f->target[0] && x->target < 0)
    REQ_FAIL("%s", "x-airetry-target is not a target of the route");
  else if (!text_is_prefix(R, f, x, false))
    REQ_FAIL("aborted after text '%.200s', not a prefix of the answer",
             f->text.p ? f->text.p : "");
  if (x->kind == K_ABORTED) R->n_aborted++;
  slot_release(R, f);
}

static void process_done(run *R) {
  int left;
  CURLMsg *msg;
  while ((msg = curl_multi_info_read(R->m, &left)) != NULL) {
    if (msg->msg != CURLMSG_DONE) continue;
    inflight *f = NULL;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&f);
    CURLcode cc = msg->data.result;
    judge(R, f, cc);
    slot_release(R, f);
  }
}

static void check_aborts(run *R) {
  double now = mono_ms();
  for (int k = 0; k < R->conc; k++) {
    inflight *f = &R->slots[k];
    if (f->idx < 0) continue;
    result *x = &R->res[f->idx];
    if ((x->abort_mode == ABORT_TIMED && now >= x->t_send + x->abort_ms) ||
        (x->abort_mode == ABORT_PARTS && f->text_parts >= x->abort_parts))
      abort_request(R, f);
  }
}

static long proc_rss_kib(int pid);

/* Runs requests [from, to) at the bounded rate until all have ended. */
static void drive(run *R, int from, int to) {
  double t0 = mono_ms();
  int next = from;
  while (next < to || R->in_flight > 0) {
    double now = mono_ms();
    while (next < to && R->in_flight < R->conc &&
           now >= t0 + (double)(next - from) * 1000.0 / R->rate) {
      int i = next++;
      start_request(R, i);
      /* A timed abort at 0 ms lets go before libcurl ran at all: the
       * request never leaves the driver (phase connecting), which the
       * checks must accept as a request the gateway never saw. */
      if (R->res[i].abort_mode == ABORT_TIMED && R->res[i].abort_ms == 0)
        check_aborts(R);
      if (next % RSS_EVERY == 0 && R->n_trend < MAX_TREND) {
        for (int g = 0; g < R->n_gw; g++)
          R->trend[g][R->n_trend] = proc_rss_kib(R->pid[g]);
        R->n_trend++;
      }
    }
    int running;
    curl_multi_perform(R->m, &running);
    process_done(R);
    check_aborts(R);
    curl_multi_poll(R->m, NULL, 0, 2, NULL);
  }
}

/* ---- fetching ------------------------------------------------------------ */

static size_t on_fetch(char *p, size_t size, size_t nmemb, void *data) {
  return air__buf_add(data, p, size * nmemb) == 0 ? size * nmemb : 0;
}

/* GET (or POST with an empty body) url into out; returns the status, -1. */
static long fetch(const char *url, bool post, air__buf *out) {
  air__buf_reset(out);
  CURL *h = easy_new();
  if (h == NULL) return -1;
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_fetch);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
  if (post) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
  }
  long st = -1;
  if (curl_easy_perform(h) == CURLE_OK)
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
  curl_easy_cleanup(h);
  return st;
}

static json_t *mock_log(run *R, air__buf *b) {
  char url[512];
  snprintf(url, sizeof(url), "%s/__mock/log", R->mock_url);
  if (fetch(url, false, b) != 200) return NULL;
  return json_loadb(b->p, b->n, 0, NULL);
}

/* Entries of the mock's log still open (end_ms null), -1 on error. */
static long mock_open_entries(run *R, air__buf *b, size_t *n_entries) {
  json_t *j = mock_log(R, b);
  json_t *a = json_object_get(j, "attempts");
  if (!json_is_array(a)) {
    json_decref(j);
    return -1;
  }
  long open = 0;
  for (size_t i = 0; i < json_array_size(a); i++)
    open += json_is_null(json_object_get(json_array_get(a, i), "end_ms"));
  *n_entries = json_array_size(a);
  json_decref(j);
  return open;
}

static int read_file(const char *path, air__buf *out) {
  air__buf_reset(out);
  FILE *f = fopen(path, "r");
  if (f == NULL) return -1;
  char b[65536];
  size_t n;
  int rc = 0;
  while ((n = fread(b, 1, sizeof(b), f)) > 0)
    if (air__buf_add(out, b, n) != 0) {
      rc = -1;
      break;
    }
  fclose(f);
  return rc;
}

/* Complete JSON log lines in the gateways' stderr files. */
static size_t count_log_lines(run *R, air__buf *b) {
  size_t n = 0;
  for (int g = 0; g < R->n_gw; g++) {
    if (read_file(R->log_path[g], b) != 0 || b->p == NULL) continue;
    const char *p = b->p, *end = b->p + b->n;
    while (p < end) {
      const char *nl = memchr(p, '\n', (size_t)(end - p));
      if (nl == NULL) break;
      n += *p == '{';
      p = nl + 1;
    }
  }
  return n;
}

static long proc_rss_kib(int pid) {
  char p[64], line[256];
  snprintf(p, sizeof(p), "/proc/%d/status", pid);
  FILE *f = fopen(p, "r");
  if (f == NULL) return -1;
  long kib = -1;
  while (fgets(line, sizeof(line), f) != NULL)
    if (strncmp(line, "VmRSS:", 6) == 0) kib = strtol(line + 6, NULL, 10);
  fclose(f);
  return kib;
}

static int proc_fds(int pid) {
  char p[64];
  snprintf(p, sizeof(p), "/proc/%d/fd", pid);
  DIR *d = opendir(p);
  if (d == NULL) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

/* Waits (bounded) until the gateway wrote a log line per request of the
 * first `sent` that must have one (line_required) and the mock has no open
 * upstream attempt; then closes the driver's own connections to the
 * gateway (a new multi handle) and lets it see that. Both conditions are
 * polled together under the one bound, and the mock's log counted only
 * when it was read. */
static void settle(run *R, int sent, air__buf *b) {
  double end = mono_ms() + SETTLE_MS;
  size_t required = 0;
  for (int i = 0; i < sent; i++) required += line_required(&R->res[i]);
  size_t lines = 0, entries = 0;
  long open = -1; /* -1: the mock's log could not be read */
  for (;;) {
    lines = count_log_lines(R, b);
    open = mock_open_entries(R, b, &entries);
    if ((lines >= required && open == 0) || mono_ms() >= end) break;
    sleep_ms(50);
  }
  if (lines < required)
    fail(
        "settle: %zu log lines for %d requests (%zu must have one) after "
        "%d ms",
        lines, sent, required, SETTLE_MS);
  if (open < 0)
    fail("settle: the mock's log could not be read");
  else if (open > 0)
    fail(
        "settle: %ld of %zu upstream attempts still open in the mock's log "
        "after %d ms",
        open, entries, SETTLE_MS);
  curl_multi_cleanup(R->m);
  R->m = curl_multi_init();
  curl_multi_setopt(R->m, CURLMOPT_MAX_HOST_CONNECTIONS, (long)R->conc);
  /* The gateways close their side as they see ours close: poll their
   * descriptor counts until two reads in a row agree (bounded by 1 s). */
  int before[MAX_GW];
  for (int g = 0; g < R->n_gw; g++) before[g] = proc_fds(R->pid[g]);
  for (double fd_end = mono_ms() + 1000; mono_ms() < fd_end;) {
    sleep_ms(20);
    bool same = true;
    for (int g = 0; g < R->n_gw; g++) {
      int now = proc_fds(R->pid[g]);
      same &= now == before[g];
      before[g] = now;
    }
    if (same) break;
  }
}

/* ---- the checks at the end ----------------------------------------------- */

typedef struct kv {
  char key[320];
  uint64_t log, metric;
} kv;

typedef struct kvs {
  kv *v;
  size_t n, cap;
} kvs;

static kv *kv_get(kvs *t, const char *a, const char *b2) {
  char key[320];
  snprintf(key, sizeof(key), "%s|%s", a, b2);
  for (size_t i = 0; i < t->n; i++)
    if (strcmp(t->v[i].key, key) == 0) return &t->v[i];
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 64;
    kv *v = realloc(t->v, cap * sizeof(*v));
    if (v == NULL) {
      fprintf(stderr, "soak: out of memory\n");
      exit(1);
    }
    t->v = v;
    t->cap = cap;
  }
  kv *e = &t->v[t->n++];
  memset(e, 0, sizeof(*e));
  snprintf(e->key, sizeof(e->key), "%s", key);
  return e;
}

/* Per mock model: attempts the gateway logged, by status (index 0: all). */
typedef struct model_count {
  uint64_t gw_all, mock_all;
  uint64_t gw_aborted; /* attempts the gateway logged as aborted */
  uint64_t gw_st[600], mock_st[600];
} model_count;

static const char *const OUTCOMES[] = {"ok", "error", "error_after_commit",
                                       "aborted"};

static const char *outcome_of(unsigned kind) {
  switch (kind) {
    case K_OK:
      return "ok";
    case K_ERROR:
      return "error";
    case K_ERR_AFTER_COMMIT:
      return "error_after_commit";
    default:
      return NULL;
  }
}

/* Parses "name{a=\"x\",b=\"y\"} v" lines of a counter into t (metric). */
static void parse_metrics(const char *text, const char *name, kvs *t,
                          bool two) {
  size_t nl = strlen(name);
  const char *p = text;
  while (p != NULL && *p) {
    const char *eol = strchr(p, '\n');
    size_t n = eol ? (size_t)(eol - p) : strlen(p);
    if (n > nl + 1 && strncmp(p, name, nl) == 0 && p[nl] == '{') {
      char line[1024];
      snprintf(line, sizeof(line), "%.*s", (int)n, p);
      char a[320] = "", b2[320] = "";
      const char *q1 = strchr(line, '"');
      const char *q2 = q1 ? strchr(q1 + 1, '"') : NULL;
      if (q1 && q2) snprintf(a, sizeof(a), "%.*s", (int)(q2 - q1 - 1), q1 + 1);
      if (two && q2) {
        const char *q3 = strchr(q2 + 1, '"');
        const char *q4 = q3 ? strchr(q3 + 1, '"') : NULL;
        if (q3 && q4)
          snprintf(b2, sizeof(b2), "%.*s", (int)(q4 - q3 - 1), q3 + 1);
      }
      const char *v = strrchr(line, ' ');
      if (v) kv_get(t, a, b2)->metric += strtoull(v + 1, NULL, 10);
    }
    p = eol ? eol + 1 : NULL;
  }
}

static uint64_t metric_scalar(const char *text, const char *name) {
  size_t nl = strlen(name);
  const char *p = text;
  while (p != NULL && *p) {
    if (strncmp(p, name, nl) == 0 && p[nl] == ' ')
      return strtoull(p + nl + 1, NULL, 10);
    p = strchr(p, '\n');
    if (p) p++;
  }
  return UINT64_MAX;
}

/* Keeps b in the folder of the (first) gateway's log (run.sh keeps that
 * folder when the soak fails), for the diagnosis. */
static void save_beside_log(const run *R, const char *name, const air__buf *b) {
  const char *slash = strrchr(R->log_path[0], '/');
  char path[4096];
  if (slash == NULL)
    snprintf(path, sizeof(path), "%s", name);
  else
    snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - R->log_path[0]),
             R->log_path[0], name);
  FILE *f = fopen(path, "w");
  if (f == NULL) return;
  if (b->p) fwrite(b->p, 1, b->n, f);
  fclose(f);
}

static uint64_t sum_over(const uint64_t *v) {
  uint64_t n = 0;
  for (int g = 0; g < MAX_GW; g++) n += v[g];
  return n;
}

static void final_checks(run *R, air__buf *b) {
  int total = R->pr->total;
  json_t *lines = json_array();
  json_t **by_req = calloc((size_t)total, sizeof(*by_req));
  model_count *mc = calloc(N_ROUTES * N_TARGETS, sizeof(*mc));
  /* Per instance: its log lines' counts against its /metrics. att_all sums
   * the instances for the summary. */
  kvs req_t[MAX_GW] = {{0}}, att_t[MAX_GW] = {{0}}, att_all = {0};
  uint64_t retries[MAX_GW] = {0}, switches[MAX_GW] = {0};
  uint64_t gw_attempts = 0, other_lines = 0;
  unsigned log_outcomes[K_BAD + 1][4];
  memset(log_outcomes, 0, sizeof(log_outcomes));
  char prefix[64];
  rid_of(R, 0, prefix, sizeof(prefix));
  prefix[strlen(prefix) - 1] = '\0'; /* "soak-S-" */
  size_t pl = strlen(prefix);
  /* ---- the gateways' log lines ------------------------------------------- */
  for (int g = 0; g < R->n_gw; g++) {
    if (read_file(R->log_path[g], b) != 0 || b->p == NULL) {
      fail("cannot read the gateway log %s", R->log_path[g]);
      continue;
    }
    const char *p = b->p, *end = b->p + b->n;
    uint64_t other_here = 0; /* this instance's; five of each are shown */
    while (p < end) {
      const char *nl = memchr(p, '\n', (size_t)(end - p));
      size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
      if (n > 0 && *p == '{') {
        json_t *l = json_loadb(p, n, 0, NULL);
        const char *rid = json_string_value(json_object_get(l, "request_id"));
        if (l == NULL || rid == NULL) {
          fail("gateway log: a line that is not a request log line: %.200s", p);
          json_decref(l);
        } else if (strncmp(rid, prefix, pl) != 0) {
          fail(
              "gateway log: a line for a request the driver did not send: "
              "%.300s",
              p);
          json_decref(l);
        } else {
          char *e = NULL;
          long i = strtol(rid + pl, &e, 10);
          if (e == rid + pl || *e || i < 0 || i >= total) {
            fail("gateway log: unknown request id %s", rid);
          } else if (R->res[i].logged++) {
            fail("gateway log: a second line for %s", rid);
          } else if (R->res[i].gw != g) {
            fail("gateway log: %s was sent to instance %d, logged by %d", rid,
                 R->res[i].gw, g);
          } else {
            by_req[i] = l;
          }
          json_array_append_new(lines, l);
        }
      } else if (n > 0) {
        other_lines++;
        if (++other_here <= 5) {
          if (R->n_gw > 1)
            fprintf(stderr, "soak: gateway %d stderr: %.*s\n", g, (int)n, p);
          else
            fprintf(stderr, "soak: gateway stderr: %.*s\n", (int)n, p);
        }
      }
      p = nl ? nl + 1 : end;
    }
  }
  unsigned n_missing = 0, n_unsent = 0;
  for (int i = 0; i < total; i++) {
    result *x = &R->res[i];
    char rid[64];
    rid_of(R, i, rid, sizeof(rid));
    json_t *l = by_req[i];
    if (l == NULL && !line_required(x)) {
      n_unsent++; /* never reached the gateway as a request */
      continue;
    }
    if (l == NULL) {
      n_missing++;
      if (x->kind == K_ABORTED)
        fail(
            "gateway log: no line for %s (%s, aborted by the client %.0f ms "
            "after sending, %s; %s)",
            rid, ROUTES[x->route].name, x->t_abort - x->t_send,
            PHASES[x->phase],
            x->abort_mode == ABORT_PARTS ? "abort after parts" : "timed abort");
      else
        fail("gateway log: no line for %s (%s, kind %d)", rid,
             ROUTES[x->route].name, x->kind);
      continue;
    }
    const route *r = &ROUTES[x->route];
    const char *lroute = json_string_value(json_object_get(l, "route"));
    const char *lapi = json_string_value(json_object_get(l, "api"));
    const char *outc = json_string_value(json_object_get(l, "outcome"));
    json_t *atts = json_object_get(l, "attempts");
    int lstatus = (int)json_integer_value(json_object_get(l, "status"));
    size_t na = json_array_size(atts);
    if (!lroute || strcmp(lroute, r->name) || !lapi ||
        strcmp(lapi, api_name(x->api)) ||
        json_is_true(json_object_get(l, "stream")) != (x->stream != 0) ||
        !outc || !json_is_array(atts)) {
      fail(
          "gateway log: %s: route/api/stream/outcome do not match the request "
          "(%s %s %s)",
          rid, r->name, api_name(x->api), x->stream ? "stream" : "non-stream");
      continue;
    }
    int oi = -1;
    for (int k = 0; k < 4; k++)
      if (strcmp(outc, OUTCOMES[k]) == 0) oi = k;
    if (oi < 0) {
      fail("gateway log: %s: outcome '%s'", rid, outc);
      continue;
    }
    log_outcomes[x->kind][oi]++;
    if ((int)na > r->budget)
      fail("gateway log: %s: %zu attempts, the route's budget is %d", rid, na,
           r->budget);
    if (x->kind == K_ABORTED) {
      if (strcmp(outc, "aborted") == 0 && lstatus != 499)
        fail("gateway log: %s: aborted with status %d, want 499", rid, lstatus);
    } else if (x->kind != K_BAD) {
      const char *want = outcome_of(x->kind);
      if (strcmp(outc, want) != 0 || lstatus != x->status ||
          (int)na != x->attempts_hdr)
        fail(
            "gateway log: %s: outcome %s status %d attempts %zu; the client "
            "saw %s "
            "status %d x-airetry-attempts %d",
            rid, outc, lstatus, na, want, x->status, x->attempts_hdr);
      if (x->kind == K_OK && na > 0) {
        const char *last = json_string_value(
            json_object_get(json_array_get(atts, na - 1), "target"));
        const char *reason = json_string_value(
            json_object_get(json_array_get(atts, na - 1), "reason"));
        int ti = last ? target_index(r, last) : -1;
        if (ti != x->target || !reason || strcmp(reason, "ok") != 0)
          fail(
              "gateway log: %s: answered by target %d, last attempt %s reason "
              "%s",
              rid, x->target, last ? last : "?", reason ? reason : "?");
      }
    }
    kv_get(&req_t[x->gw], r->name, outc)->log++;
    const char *prev = NULL;
    for (size_t k = 0; k < na; k++) {
      json_t *a = json_array_get(atts, k);
      const char *t = json_string_value(json_object_get(a, "target"));
      const char *reason = json_string_value(json_object_get(a, "reason"));
      int st = (int)json_integer_value(json_object_get(a, "status"));
      int ti = t ? target_index(r, t) : -1;
      if (ti < 0 || reason == NULL) {
        fail("gateway log: %s: attempt %zu has target '%s'", rid, k + 1,
             t ? t : "?");
        continue;
      }
      gw_attempts++;
      model_count *m = &mc[x->route * N_TARGETS + (size_t)ti];
      m->gw_all++;
      if (strcmp(reason, "aborted") == 0)
        m->gw_aborted++;
      else if (st >= 0 && st < 600)
        m->gw_st[st]++;
      kv_get(&att_t[x->gw], t, reason)->log++;
      kv_get(&att_all, t, reason)->log++;
      if (prev != NULL) {
        if (strcmp(prev, t) == 0)
          retries[x->gw]++;
        else
          switches[x->gw]++;
      }
      prev = t;
    }
  }

  /* ---- /metrics, per instance -------------------------------------------- */
  air__buf mb;
  air__buf_init(&mb, MAX_FETCH);
  for (int g = 0; g < R->n_gw; g++) {
    char url[512], name[32];
    snprintf(url, sizeof(url), "%s/metrics", R->gw_url[g]);
    if (fetch(url, false, &mb) != 200 || mb.p == NULL) {
      fail("GET %s did not answer 200", url);
      continue;
    }
    if (R->n_gw == 1)
      snprintf(name, sizeof(name), "metrics.txt");
    else
      snprintf(name, sizeof(name), "metrics-%d.txt", g);
    save_beside_log(R, name, &mb);
    kvs *rq = &req_t[g], *at = &att_t[g];
    parse_metrics(mb.p, "airetry_requests_total", rq, true);
    parse_metrics(mb.p, "airetry_attempts_total", at, true);
    for (size_t i = 0; i < rq->n; i++)
      if (rq->v[i].log != rq->v[i].metric)
        fail(
            "metrics of instance %d: airetry_requests_total{route|outcome=%s} "
            "= %llu, log lines %llu",
            g, rq->v[i].key, (unsigned long long)rq->v[i].metric,
            (unsigned long long)rq->v[i].log);
    for (size_t i = 0; i < at->n; i++)
      if (at->v[i].log != at->v[i].metric)
        fail(
            "metrics of instance %d: airetry_attempts_total{target|reason=%s} "
            "= %llu, log lines %llu",
            g, at->v[i].key, (unsigned long long)at->v[i].metric,
            (unsigned long long)at->v[i].log);
    uint64_t mr = metric_scalar(mb.p, "airetry_retries_total");
    uint64_t ms = metric_scalar(mb.p, "airetry_switches_total");
    if (mr != retries[g] || ms != switches[g])
      fail(
          "metrics of instance %d: retries %llu switches %llu, log lines %llu "
          "and %llu",
          g, (unsigned long long)mr, (unsigned long long)ms,
          (unsigned long long)retries[g], (unsigned long long)switches[g]);
  }
  air__buf_cleanup(&mb);

  /* ---- the mock's log ---------------------------------------------------- */
  air__buf lb;
  air__buf_init(&lb, MAX_FETCH);
  json_t *j = mock_log(R, &lb);
  json_t *ents = json_object_get(j, "attempts");
  save_beside_log(R, "mock-log.json", &lb);
  uint64_t mock_attempts = 0, hung_up = 0;
  if (!json_is_array(ents)) {
    fail("GET /__mock/log did not answer a log");
  } else {
    if (json_integer_value(json_object_get(j, "dropped")) != 0)
      fail("mock log: %lld entries dropped",
           (long long)json_integer_value(json_object_get(j, "dropped")));
    size_t ne = json_array_size(ents);
    mock_attempts = ne;
    unsigned char *claimed = calloc(ne ? ne : 1, 1);
    for (size_t i = 0; i < ne; i++) {
      json_t *e = json_array_get(ents, i);
      const char *model = json_string_value(json_object_get(e, "model"));
      int ri, ti;
      if (model == NULL || !find_model(model, &ri, &ti)) {
        fail("mock log: an attempt for model '%s'", model ? model : "?");
        continue;
      }
      const target *t = &ROUTES[ri].t[ti];
      const char *api = json_string_value(json_object_get(e, "api"));
      const char *want_api =
          strcmp(t->provider, "ma") == 0 ? "anthropic" : "openai";
      if (!api || strcmp(api, want_api) != 0 ||
          !json_is_true(json_object_get(e, "stream")))
        fail("mock log: attempt %zu on %s came as %s stream %d, want %s stream",
             i, model, api ? api : "?",
             json_is_true(json_object_get(e, "stream")), want_api);
      if (json_is_null(json_object_get(e, "end_ms")))
        fail("mock log: attempt %zu on %s (fault %s) is still open", i, model,
             json_string_value(json_object_get(e, "fault")));
      hung_up += json_is_true(json_object_get(e, "hung_up"));
      int st = (int)json_integer_value(json_object_get(e, "status"));
      model_count *m = &mc[(size_t)ri * N_TARGETS + (size_t)ti];
      m->mock_all++;
      if (st >= 0 && st < 600) m->mock_st[st]++;
    }
    for (size_t i = 0; i < N_ROUTES * N_TARGETS; i++) {
      const target *t = &ROUTES[i / N_TARGETS].t[i % N_TARGETS];
      /* An error status the mock sent is the attempt's status in the
       * gateway's log, unless the caller's abort won the race with it (the
       * attempt is then logged as aborted, whatever arrived). */
      static const int sts[] = {429, 500, 503, 529};
      for (size_t k = 0; k < sizeof(sts) / sizeof(sts[0]); k++) {
        uint64_t g = mc[i].gw_st[sts[k]], mk = mc[i].mock_st[sts[k]];
        if (g > mk || mk > g + mc[i].gw_aborted)
          fail(
              "attempts on %s/%s with status %d: mock %llu, gateway log %llu "
              "(and %llu "
              "aborted)",
              t->provider, t->model, sts[k], (unsigned long long)mk,
              (unsigned long long)g, (unsigned long long)mc[i].gw_aborted);
      }
    }
    /* The attempt in flight when a request was aborted (or its last one,
     * ended before) was closed upstream within ABORT_GRACE_MS. An attempt
     * the caller aborted before its request left the gateway is logged
     * (reason aborted) but never reached the mock: counted as unsent. */
    uint64_t unsent_total = 0;
    uint64_t unsent[N_ROUTES * N_TARGETS] = {0};
    for (int i = 0; i < total; i++) {
      result *x = &R->res[i];
      json_t *l = by_req[i];
      if (x->kind != K_ABORTED || l == NULL) continue;
      json_t *atts = json_object_get(l, "attempts");
      size_t na = json_array_size(atts);
      if (na == 0) continue;
      const char *t = json_string_value(
          json_object_get(json_array_get(atts, na - 1), "target"));
      int ti = t ? target_index(&ROUTES[x->route], t) : -1;
      if (ti < 0) continue;
      const char *model = ROUTES[x->route].t[ti].model;
      /* Its start on the mock's clock, from the attempts before it. */
      double est = x->t_send - R->t_reset;
      for (size_t k = 0; k + 1 < na; k++) {
        json_t *a = json_array_get(atts, k);
        est += (double)json_integer_value(json_object_get(a, "ms")) +
               (double)json_integer_value(json_object_get(a, "wait_ms"));
      }
      double slack = R->t_reset_err + CLOCK_SLACK_MS;
      double lo = x->t_send - R->t_reset - slack;
      double hi = x->t_abort - R->t_reset + slack + ABORT_LATE_MS;
      long best = -1;
      double best_t = -1, best_d = 1e18;
      for (size_t k = 0; k < ne; k++) {
        json_t *e = json_array_get(ents, k);
        const char *em = json_string_value(json_object_get(e, "model"));
        if (claimed[k] || em == NULL || strcmp(em, model) != 0) continue;
        double tm = (double)json_integer_value(json_object_get(e, "t_ms"));
        double d = tm > est ? tm - est : est - tm;
        if (tm >= lo && tm <= hi && d < best_d) {
          best = (long)k;
          best_t = tm;
          best_d = d;
        }
      }
      char rid[64];
      rid_of(R, i, rid, sizeof(rid));
      const char *outc = json_string_value(json_object_get(l, "outcome"));
      const char *last_reason = json_string_value(
          json_object_get(json_array_get(atts, na - 1), "reason"));
      if (best < 0 && last_reason != NULL &&
          strcmp(last_reason, "aborted") == 0) {
        unsent[(size_t)x->route * N_TARGETS + (size_t)ti]++;
        unsent_total++;
        continue;
      }
      if (best < 0) {
        fail(
            "abort: %s (outcome %s, %zu attempts, last on %s; aborted %s): "
            "no upstream attempt on %s started between its send (%.0f ms) "
            "and %d ms after its abort (%.0f ms, mock clock)",
            rid, outc, na, t, PHASES[x->phase], model, x->t_send - R->t_reset,
            ABORT_LATE_MS, x->t_abort - R->t_reset);
        continue;
      }
      claimed[best] = 1;
      json_t *e = json_array_get(ents, (size_t)best);
      json_t *em = json_object_get(e, "end_ms");
      double abort_m = x->t_abort - R->t_reset;
      if (json_is_null(em) ||
          (double)json_integer_value(em) > abort_m + slack + ABORT_GRACE_MS)
        fail(
            "abort: %s (outcome %s) aborted %s at %.0f ms (mock clock); its "
            "upstream attempt on %s (t_ms %.0f, fault %s) ended at %lld ms "
            "(-1: never), hung_up %d",
            rid, outc, PHASES[x->phase], abort_m, model, best_t,
            json_string_value(json_object_get(e, "fault")),
            json_is_null(em) ? -1LL : (long long)json_integer_value(em),
            json_is_true(json_object_get(e, "hung_up")));
    }
    free(claimed);
    if (mock_attempts + unsent_total != gw_attempts)
      fail(
          "attempts: the mock logged %llu (+%llu aborted before they were "
          "sent), the gateway's log lines %llu",
          (unsigned long long)mock_attempts, (unsigned long long)unsent_total,
          (unsigned long long)gw_attempts);
    for (size_t i = 0; i < N_ROUTES * N_TARGETS; i++) {
      const target *t = &ROUTES[i / N_TARGETS].t[i % N_TARGETS];
      if (mc[i].gw_all != mc[i].mock_all + unsent[i])
        fail("attempts on %s/%s: mock %llu (+%llu unsent), gateway log %llu",
             t->provider, t->model, (unsigned long long)mc[i].mock_all,
             (unsigned long long)unsent[i], (unsigned long long)mc[i].gw_all);
    }
  }
  json_decref(j);
  air__buf_cleanup(&lb);

  /* ---- the summary ------------------------------------------------------- */
  fprintf(
      stderr,
      "soak: answers: %u streams ok, %u non-streams ok, %u failed after commit "
      "(error event); aborted by the client: %u\n",
      R->n_stream_ok, R->n_plain_ok, R->n_after_commit, R->n_aborted);
  fprintf(stderr, "soak: statuses:");
  for (int s = 0; s < 600; s++)
    if (R->by_status[s]) fprintf(stderr, " %d=%u", s, R->by_status[s]);
  fprintf(stderr,
          "\nsoak: aborted requests by logged outcome: ok %u, error %u, "
          "error_after_commit %u, aborted %u\n",
          log_outcomes[K_ABORTED][0], log_outcomes[K_ABORTED][1],
          log_outcomes[K_ABORTED][2], log_outcomes[K_ABORTED][3]);
  unsigned by_phase[P_COUNT] = {0};
  for (int i = 0; i < total; i++)
    if (R->res[i].kind == K_ABORTED) by_phase[R->res[i].phase]++;
  fprintf(stderr, "soak: aborted requests by phase:");
  for (int k = 0; k < P_COUNT; k++)
    fprintf(stderr, "%s %s %u", k ? "," : "", PHASES[k], by_phase[k]);
  fputc('\n', stderr);
  fprintf(
      stderr,
      "soak: upstream attempts: gateway log %llu, mock %llu (%llu hung up); "
      "retries "
      "%llu, switches %llu; log lines missing %u; aborted before the request "
      "left the driver (no line) %u; other stderr lines %llu\n",
      (unsigned long long)gw_attempts, (unsigned long long)mock_attempts,
      (unsigned long long)hung_up, (unsigned long long)sum_over(retries),
      (unsigned long long)sum_over(switches), n_missing, n_unsent,
      (unsigned long long)other_lines);
  fprintf(stderr, "soak: attempts by reason:");
  for (size_t i = 0; i < att_all.n; i++) {
    /* Sums over targets per reason, printed once per reason. */
    const char *reason = strchr(att_all.v[i].key, '|') + 1;
    bool seen = false;
    for (size_t k = 0; k < i && !seen; k++)
      seen = strcmp(strchr(att_all.v[k].key, '|') + 1, reason) == 0;
    if (seen) continue;
    uint64_t sum = 0;
    for (size_t k = i; k < att_all.n; k++)
      if (strcmp(strchr(att_all.v[k].key, '|') + 1, reason) == 0)
        sum += att_all.v[k].log;
    fprintf(stderr, " %s=%llu", reason, (unsigned long long)sum);
  }
  fputc('\n', stderr);
  for (int g = 0; g < MAX_GW; g++) {
    free(req_t[g].v);
    free(att_t[g].v);
  }
  free(att_all.v);
  free(mc);
  free(by_req);
  json_decref(lines);
}

/* ---- the Redis restarter (run.sh) ---------------------------------------- */

/* Creates the empty file DIR/name: a step of the handshake with run.sh. */
static void ctl_say(const run *R, const char *name) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", R->ctl, name);
  FILE *f = fopen(path, "w");
  if (f == NULL || fclose(f) != 0)
    fail("cannot create %s: %s", path, strerror(errno));
}

/* Ends the restarts and waits (bounded) for run.sh's DIR/final, written
 * once Redis is up again: the number of restarts, -1 on failure. */
static long ctl_end(const run *R, air__buf *b) {
  char path[4096];
  ctl_say(R, "stop");
  snprintf(path, sizeof(path), "%s/final", R->ctl);
  double end = mono_ms() + SETTLE_MS;
  while (read_file(path, b) != 0) {
    if (mono_ms() >= end) {
      fail("redis: no %s within %d ms of the stop", path, SETTLE_MS);
      return -1;
    }
    sleep_ms(20);
  }
  return b->p ? strtol(b->p, NULL, 10) : -1;
}

/* Every instance linked to Redis again (polled, bounded) and counted at
 * least one reconnect per restart; the restarts happened at all. */
static void redis_checks(run *R, long restarts, air__buf *b) {
  if (restarts < 1) {
    fail("redis: %ld restarts during the load (want at least 1)", restarts);
    return;
  }
  for (int g = 0; g < R->n_gw; g++) {
    char url[512];
    snprintf(url, sizeof(url), "%s/metrics", R->gw_url[g]);
    uint64_t up = UINT64_MAX, rec = UINT64_MAX;
    double end = mono_ms() + SETTLE_MS;
    for (;;) {
      if (fetch(url, false, b) == 200 && b->p != NULL) {
        up = metric_scalar(b->p, "airetry_state_redis_up");
        rec = metric_scalar(b->p, "airetry_state_redis_reconnects_total");
      }
      if (up == 1 || mono_ms() >= end) break;
      sleep_ms(20);
    }
    fprintf(stderr,
            "soak: instance %d: airetry_state_redis_up %lld, reconnects %lld "
            "(%ld restarts)\n",
            g, up == UINT64_MAX ? -1LL : (long long)up,
            rec == UINT64_MAX ? -1LL : (long long)rec, restarts);
    if (up != 1)
      fail(
          "redis: instance %d: airetry_state_redis_up %lld %d ms after Redis "
          "was up again, want 1",
          g, up == UINT64_MAX ? -1LL : (long long)up, SETTLE_MS);
    if (rec == UINT64_MAX || rec < (uint64_t)restarts)
      fail("redis: instance %d: %lld reconnects for %ld restarts", g,
           rec == UINT64_MAX ? -1LL : (long long)rec, restarts);
  }
}

/* ---- run ----------------------------------------------------------------- */

static int do_run(run *R) {
  air__buf b;
  air__buf_init(&b, MAX_FETCH);
  air__buf_init(&R->want, MAX_TEXT);
  R->res = calloc((size_t)R->pr->total, sizeof(*R->res));
  R->slots = calloc((size_t)R->conc, sizeof(*R->slots));
  if (R->res == NULL || R->slots == NULL) return 1;
  for (int k = 0; k < R->conc; k++) R->slots[k].idx = -1;
  draw_requests(R);
  R->m = curl_multi_init();
  curl_multi_setopt(R->m, CURLMOPT_MAX_HOST_CONNECTIONS, (long)R->conc);

  char url[512];
  snprintf(url, sizeof(url), "%s/__mock/reset", R->mock_url);
  double a = mono_ms();
  long st = fetch(url, true, &b);
  double z = mono_ms();
  if (st != 204 && st != 200) {
    fprintf(stderr, "soak: POST %s: %ld\n", url, st);
    return 1;
  }
  R->t_reset = (a + z) / 2;
  R->t_reset_err = (z - a) / 2;

  fprintf(stderr,
          "soak: profile %s, seed %llu: %d requests (warm-up %d), at most "
          "%.0f/s, %d in flight, %d gateway%s (worker pid",
          R->pr->name, (unsigned long long)R->seed, R->pr->total, R->pr->warm,
          R->rate, R->conc, R->n_gw, R->n_gw > 1 ? "s" : "");
  for (int g = 0; g < R->n_gw; g++) fprintf(stderr, " %d", R->pid[g]);
  fprintf(stderr, ")%s%s\n", R->ctl ? ", Redis restarted during the load" : "",
          R->asan ? " (ASan build)" : "");
  double t0 = mono_ms();
  drive(R, 0, R->pr->warm);
  settle(R, R->pr->warm, &b);
  for (int g = 0; g < R->n_gw; g++) {
    R->rss_warm[g] = proc_rss_kib(R->pid[g]);
    R->fd_warm[g] = proc_fds(R->pid[g]);
  }
  double t1 = mono_ms();
  fprintf(stderr, "soak: warm-up done in %.1f s: VmRSS", (t1 - t0) / 1000);
  for (int g = 0; g < R->n_gw; g++)
    fprintf(stderr, "%s %ld kB, %d fds", g ? ";" : "", R->rss_warm[g],
            R->fd_warm[g]);
  fputc('\n', stderr);
  /* The restarts run while the rest of the requests do, and end with them:
   * RSS and fds are compared with Redis linked at both ends. */
  if (R->ctl) ctl_say(R, "warm");
  drive(R, R->pr->warm, R->pr->total);
  double t2 = mono_ms();
  long restarts = R->ctl ? ctl_end(R, &b) : 0;
  settle(R, R->pr->total, &b);
  fprintf(stderr, "soak: %d requests in %.1f s (%.0f/s after the warm-up)\n",
          R->pr->total - R->pr->warm, (t2 - t1) / 1000,
          (R->pr->total - R->pr->warm) * 1000.0 / (t2 - t1));

  final_checks(R, &b);
  if (R->ctl) redis_checks(R, restarts, &b);

  /* Every gateway still answers; memory and descriptors came back. */
  for (int g = 0; g < R->n_gw; g++) {
    const char *who = R->n_gw > 1 ? "gateway instance" : "gateway";
    char gs[16] = "";
    if (R->n_gw > 1) snprintf(gs, sizeof(gs), " %d", g);
    snprintf(url, sizeof(url), "%s/healthz", R->gw_url[g]);
    if ((st = fetch(url, false, &b)) != 200)
      fail("GET %s: %ld after the run", url, st);
    double end = mono_ms() + 3000;
    do {
      R->fd_end[g] = proc_fds(R->pid[g]);
      if (R->fd_end[g] >= 0 && R->fd_end[g] <= R->fd_warm[g] + FD_SLACK) break;
      sleep_ms(100);
    } while (mono_ms() < end);
    R->rss_end[g] = proc_rss_kib(R->pid[g]);
    long rw = R->rss_warm[g], re = R->rss_end[g];
    double pct = rw > 0 ? 100.0 * (double)(re - rw) / (double)rw : 0;
    fprintf(stderr,
            "soak: %s%s VmRSS %ld kB after warm-up, %ld kB at the end "
            "(%+.1f%%); fds %d -> %d\n",
            who, gs, rw, re, pct, R->fd_warm[g], R->fd_end[g]);
    fprintf(stderr, "soak: %s%s VmRSS under load every %d requests (kB):", who,
            gs, RSS_EVERY);
    for (int i = 0; i < R->n_trend; i++)
      fprintf(stderr, " %ld", R->trend[g][i]);
    fputc('\n', stderr);
    if (rw <= 0 || re <= 0)
      fail("cannot read the %s%s's VmRSS (pid %d)", who, gs, R->pid[g]);
    else if (pct > RSS_SLACK_PCT)
      fail(
          "%s%s VmRSS grew %.1f%% after the warm-up (%ld -> %ld kB), limit "
          "%d%%",
          who, gs, pct, rw, re, RSS_SLACK_PCT);
    if (R->fd_warm[g] < 0 || R->fd_end[g] < 0)
      fail("cannot count the %s%s's fds (pid %d)", who, gs, R->pid[g]);
    else if (R->fd_end[g] > R->fd_warm[g] + FD_SLACK)
      fail("%s%s fds: %d after the warm-up, %d at the end (limit +%d)", who, gs,
           R->fd_warm[g], R->fd_end[g], FD_SLACK);
  }
  fprintf(stderr, "soak: %s in %.1f s\n", n_failures ? "FAILED" : "ok",
          (mono_ms() - t0) / 1000);
  if (n_failures) fprintf(stderr, "soak: %u failed checks\n", n_failures);

  curl_multi_cleanup(R->m);
  free(R->slots);
  free(R->res);
  air__buf_cleanup(&R->want);
  air__buf_cleanup(&b);
  return n_failures ? 1 : 0;
}

static const char usage[] =
    "usage: soak script --profile P --seed S --out FILE\n"
    "       soak config --mock-port PORT [--redis-port PORT] --out FILE\n"
    "       soak run --profile P --seed S --gateway URL --mock URL\n"
    "                --pid PID --log FILE [--rate R] [--concurrency C] "
    "[--asan]\n"
    "                [--ctl DIR]\n"
    "P: short, long, redis-short or redis; the redis profiles take "
    "--gateway,\n"
    "--pid and --log once per instance (3) and --ctl.\n";

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage, stderr);
    return 2;
  }
  const char *cmd = argv[1];
  const char *profile_name = "short", *out = NULL;
  run R;
  memset(&R, 0, sizeof(R));
  R.conc = 32;
  int mock_port = 0, redis_port = 0;
  for (int i = 2; i < argc; i++) {
    const char *k = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(k, "--asan") == 0) {
      R.asan = true;
      continue;
    }
    if (v == NULL) {
      fputs(usage, stderr);
      return 2;
    }
    i++;
    if (strcmp(k, "--profile") == 0)
      profile_name = v;
    else if (strcmp(k, "--seed") == 0)
      R.seed = strtoull(v, NULL, 10);
    else if (strcmp(k, "--out") == 0)
      out = v;
    else if (strcmp(k, "--mock-port") == 0)
      mock_port = atoi(v);
    else if (strcmp(k, "--redis-port") == 0)
      redis_port = atoi(v);
    else if (strcmp(k, "--gateway") == 0 && R.n_gw < MAX_GW)
      R.gw_url[R.n_gw++] = v;
    else if (strcmp(k, "--mock") == 0)
      R.mock_url = v;
    else if (strcmp(k, "--pid") == 0 && R.n_pid < MAX_GW)
      R.pid[R.n_pid++] = atoi(v);
    else if (strcmp(k, "--log") == 0 && R.n_log < MAX_GW)
      R.log_path[R.n_log++] = v;
    else if (strcmp(k, "--ctl") == 0)
      R.ctl = v;
    else if (strcmp(k, "--rate") == 0)
      R.rate = atof(v);
    else if (strcmp(k, "--concurrency") == 0)
      R.conc = atoi(v);
    else {
      fputs(usage, stderr);
      return 2;
    }
  }
  R.pr = find_profile(profile_name);
  if (R.pr == NULL) {
    fputs(usage, stderr);
    return 2;
  }
  if (strcmp(cmd, "script") == 0 && out != NULL)
    return write_script(R.pr, R.seed, out);
  if (strcmp(cmd, "config") == 0 && out != NULL && mock_port > 0)
    return write_config(mock_port, redis_port, out);
  bool args_ok = strcmp(cmd, "run") == 0 && R.mock_url &&
                 R.n_gw == R.pr->instances && R.n_pid == R.n_gw &&
                 R.n_log == R.n_gw && (R.ctl != NULL) == (R.n_gw > 1) &&
                 R.conc >= 1 && R.conc <= MAX_CONCURRENCY &&
                 R.pr->total <= MAX_REQUESTS;
  for (int g = 0; args_ok && g < R.n_gw; g++) args_ok = R.pid[g] > 0;
  if (!args_ok) {
    fputs(usage, stderr);
    return 2;
  }
  bool local = strncmp(R.mock_url, "http://127.0.0.1:", 17) == 0;
  for (int g = 0; g < R.n_gw; g++)
    local &= strncmp(R.gw_url[g], "http://127.0.0.1:", 17) == 0;
  if (!local) {
    fprintf(stderr,
            "soak: the gateways and the mock must be on http://127.0.0.1\n");
    return 2;
  }
  if (R.rate <= 0) R.rate = R.pr->rate;
  curl_global_init(CURL_GLOBAL_DEFAULT);
  int rc = do_run(&R);
  curl_global_cleanup();
  return rc;
}
