/*
 * `airetry demo`: no keys, no network. Starts `airetry mock` (a flaky
 * primary and a healthy fallback), starts `airetry serve` in front of it,
 * sends a few streaming requests through the gateway and prints a live
 * trace of each: the tokens as they arrive, then every upstream attempt
 * with its reason and wait (from the gateway's log line), the time to first
 * content and the target that answered; one request is hedged (docs/design.md
 * §3.6: a primary slow to its first token races the fallback), one is
 * continued (3.5: a stream cut after its first tokens is finished by the
 * fallback from where it broke, and the caller gets one answer). Exits 0
 * when every request was answered.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "airetry.h"
#include "cli.h"
#include "mock.h"

extern char **environ;

/* The answer of both targets of the route "long" (the mock continues an
 * assistant prefill of it from where the prefill ends). */
#define LONG_ANSWER                                                     \
  "Retries hide a provider that fails before it answers; continuation " \
  "rescues the answers it breaks halfway through."

static const char mock_script[] =
    "models:\n"
    "  gpt-4o:\n"
    "    tokens: 10\n"
    "    delay_ms: 25\n"
    "    attempts:\n"
    "      - {status: 429, retry_after: 1}\n"
    "      - {}\n"
    "      - {status: 529}\n"
    "      - {status: 529}\n"
    "      - {first_delay_ms: 60000}\n"
    "      - {refusal: true}\n"
    "  gpt-4o-mini: {tokens: 10, delay_ms: 25, first_delay_ms: 5000}\n"
    "  claude-sonnet-4-5: {tokens: 10, delay_ms: 25}\n"
    "  gpt-4.1:\n"
    "    answer: &long \"" LONG_ANSWER
    "\"\n"
    "    delay_ms: 25\n"
    "    attempts: [{cut_after: 6}]\n"
    "  claude-haiku-4-5: {answer: *long, delay_ms: 25}\n";

static const char gateway_config[] =
    "providers:\n"
    "  - {name: primary, api: openai, base_url: \"http://127.0.0.1:%d/v1\",\n"
    "     breaker: {failures: 5}}\n"
    "  - {name: fallback, api: anthropic, base_url: \"http://127.0.0.1:%d\"}\n"
    "routes:\n"
    "  - name: smart\n"
    "    targets: [primary/gpt-4o, fallback/claude-sonnet-4-5]\n"
    "    timeouts: {first_chunk_ms: 1500}\n"
    "    refusal: {phrases: [\"I'm sorry, but I cannot assist\"]}\n"
    "  - name: fast\n"
    "    targets: [primary/gpt-4o-mini, fallback/claude-sonnet-4-5]\n"
    "    hedge: {after_ms: 400}\n"
    "  - name: long\n"
    "    targets: [primary/gpt-4.1, fallback/claude-haiku-4-5]\n"
    "    continuation: {enabled: true, targets: any}\n"
    "    rules: [{on: [network, overloaded, server_error, timeout.chunk],\n"
    "             action: switch}]\n";

typedef struct request {
  const char *title;
  bool anthropic;    /* sent in the Anthropic dialect */
  const char *model; /* the route */
} request;

static const request requests[] = {
    {"primary rate-limits (429, Retry-After: 1)", false, "smart"},
    {"primary is overloaded twice (529)", false, "smart"},
    {"primary goes silent: no first content", true, "smart"},
    {"primary is slow to its first token: hedged after 400 ms", false, "fast"},
    {"primary answers with a canned refusal", false, "smart"},
    {"primary is healthy again", false, "smart"},
    {"primary's stream breaks after 6 tokens: the fallback continues it", false,
     "long"},
};

typedef struct child {
  pid_t pid;
  int out; /* its stdout */
  int err; /* its stderr (-1: inherited) */
} child;

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int spawn(const char *exe, char *const argv[], bool capture_err,
                 child *c) {
  int out[2], err[2] = {-1, -1};
  if (pipe(out) != 0) return -1;
  if (capture_err && pipe(err) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  if (capture_err) {
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    posix_spawn_file_actions_addclose(&fa, err[0]);
  }
  int rc = posix_spawn(&c->pid, exe, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  if (capture_err) close(err[1]);
  c->out = out[0];
  c->err = capture_err ? err[0] : -1;
  return rc == 0 ? 0 : -1;
}

/* Reads one line from fd within timeout_ms into buf. */
static int read_line(int fd, char *buf, size_t n, int timeout_ms) {
  size_t len = 0;
  uint64_t until = now_ms() + (uint64_t)timeout_ms;
  while (len + 1 < n) {
    int left = (int)(until > now_ms() ? until - now_ms() : 0);
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, left) <= 0) return -1;
    char ch;
    if (read(fd, &ch, 1) != 1) return -1;
    if (ch == '\n') break;
    buf[len++] = ch;
  }
  buf[len] = '\0';
  return 0;
}

static int port_of(const char *line) {
  const char *colon = strrchr(line, ':');
  return colon ? atoi(colon + 1) : 0;
}

static void stop(child *c) {
  if (c->pid <= 0) return;
  kill(c->pid, SIGTERM);
  for (int i = 0; i < 100; i++) {
    if (waitpid(c->pid, NULL, WNOHANG) == c->pid) goto closed;
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
  }
  kill(c->pid, SIGKILL);
  waitpid(c->pid, NULL, 0);
closed:
  close(c->out);
  if (c->err >= 0) close(c->err);
  c->pid = 0;
}

/* ---- one streaming request ----------------------------------------------- */

typedef struct stream_view {
  air__stream_reader *reader;
  uint64_t start;
  uint64_t first_ms;
  unsigned tokens;
  bool started_line;
  bool error;
  char target[128];
  char attempts[16];
  char marker[256]; /* the "airetry" object of the last event, if any */
} stream_view;

static int on_part(void *data, const air_part *p) {
  stream_view *v = data;
  if (p->kind == AIR_PART_TEXT && p->text_len > 0) {
    if (v->first_ms == 0) v->first_ms = now_ms() - v->start;
    if (!v->started_line) {
      fputs("    answer: ", stdout);
      v->started_line = true;
    }
    fwrite(p->text, 1, p->text_len, stdout);
    fflush(stdout);
    v->tokens++;
  } else if (p->kind == AIR_PART_ERROR) {
    v->error = true;
  }
  return 0;
}

/* Keeps the first "airetry": {...} object found in p (a continued answer's
 * marker, docs/design.md §3.5; the gateway writes each event in one piece). */
static void find_marker(stream_view *v, const char *p, size_t n) {
  static const char key[] = "\"airetry\":";
  size_t kn = sizeof(key) - 1;
  for (size_t i = 0; v->marker[0] == '\0' && i + kn < n; i++) {
    if (memcmp(p + i, key, kn) != 0) continue;
    size_t j = i + kn, depth = 0, k = 0;
    bool in_str = false;
    for (; j < n && k + 1 < sizeof(v->marker); j++) {
      char c = p[j];
      v->marker[k++] = c;
      if (in_str) {
        if (c == '\\' && j + 1 < n && k + 1 < sizeof(v->marker))
          v->marker[k++] = p[++j];
        else if (c == '"')
          in_str = false;
      } else if (c == '"') {
        in_str = true;
      } else if (c == '{' || c == '[') {
        depth++;
      } else if ((c == '}' || c == ']') && depth > 0 && --depth == 0) {
        break;
      }
    }
    v->marker[k < sizeof(v->marker) ? k : sizeof(v->marker) - 1] = '\0';
  }
}

static size_t on_body(char *p, size_t size, size_t n, void *data) {
  stream_view *v = data;
  find_marker(v, p, size * n);
  if (v->reader == NULL || air__stream_reader_feed(v->reader, p, size * n) != 0)
    return 0; /* no reader, or a broken stream: curl stops */
  return size * n;
}

static size_t on_header(char *p, size_t size, size_t n, void *data) {
  stream_view *v = data;
  size_t len = size * n;
  const char *names[2] = {"x-airetry-target:", "x-airetry-attempts:"};
  char *dst[2] = {v->target, v->attempts};
  size_t cap[2] = {sizeof(v->target), sizeof(v->attempts)};
  for (int i = 0; i < 2; i++) {
    size_t nl = strlen(names[i]);
    if (len > nl && strncasecmp(p, names[i], nl) == 0) {
      const char *s = p + nl;
      size_t k = len - nl;
      while (k > 0 && (*s == ' ')) s++, k--;
      while (k > 0 && (s[k - 1] == '\r' || s[k - 1] == '\n')) k--;
      if (k >= cap[i]) k = cap[i] - 1;
      memcpy(dst[i], s, k);
      dst[i][k] = '\0';
    }
  }
  return len;
}

static long send_request(int port, const request *rq, stream_view *v) {
  char url[128], body[512];
  const char *path = rq->anthropic ? "/v1/messages" : "/v1/chat/completions";
  snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
  snprintf(body, sizeof(body),
           "{\"model\":\"%s\",\"stream\":true,\"max_tokens\":200,"
           "\"messages\":[{\"role\":\"user\",\"content\":\"Say hello.\"}]}",
           rq->model);
  v->reader = air__stream_reader_new(rq->anthropic, on_part, v);
  CURL *e = curl_easy_init();
  struct curl_slist *h =
      curl_slist_append(NULL, "content-type: application/json");
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, v);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, v);
  curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(e, CURLOPT_TIMEOUT, 30L);
  v->start = now_ms();
  CURLcode rc = curl_easy_perform(e);
  long status = 0;
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
  air__stream_reader_free(v->reader);
  v->reader = NULL;
  curl_slist_free_all(h);
  curl_easy_cleanup(e);
  return rc == CURLE_OK ? status : -1;
}

/* Prints the attempts of the gateway's log line for the last request;
 * the target of the last continuation attempt into cont (n bytes; "" when
 * none). */
static void print_attempts(int log_fd, char *cont_target, size_t n_cont) {
  cont_target[0] = '\0';
  char line[16384];
  do {
    if (read_line(log_fd, line, sizeof(line), 3000) != 0) {
      printf("    (no log line from the gateway)\n");
      return;
    }
  } while (line[0] != '{');
  json_t *j = json_loads(line, 0, NULL);
  json_t *atts = json_object_get(j, "attempts");
  size_t i;
  json_t *a;
  const char *prev = NULL;
  json_array_foreach(atts, i, a) {
    const char *target = json_string_value(json_object_get(a, "target"));
    const char *reason = json_string_value(json_object_get(a, "reason"));
    const char *outcome = json_string_value(json_object_get(a, "outcome"));
    bool hedge = json_is_true(json_object_get(a, "hedge"));
    const char *role = json_string_value(json_object_get(a, "role"));
    bool cont = json_is_true(json_object_get(a, "continuation")) ||
                (role != NULL && strcmp(role, "continuation") == 0);
    json_int_t status = json_integer_value(json_object_get(a, "status"));
    json_int_t ms = json_integer_value(json_object_get(a, "ms"));
    json_int_t wait = json_integer_value(json_object_get(a, "wait_ms"));
    if (reason == NULL) reason = outcome; /* hedge_lost: lost the race */
    if (hedge)
      printf("      -> hedge: %s races beside it (no first content yet)\n",
             target ? target : "?");
    else if (cont)
      printf(
          "      -> the stream broke after commit: %s continues it "
          "from the text already sent\n",
          target ? target : "?");
    if (cont)
      snprintf(cont_target, n_cont, "%s", target ? target : "?");
    else if (prev != NULL && target && strcmp(prev, target) != 0)
      printf("      -> failover to %s\n", target);
    printf("      attempt %zu  %-28s %-20s %3lld %6lld ms", i + 1,
           target ? target : "?", reason ? reason : "?", (long long)status,
           (long long)ms);
    if (wait > 0) printf("  -> wait %lld ms", (long long)wait);
    printf("\n");
    prev = target;
  }
  json_decref(j);
}

int air__cmd_demo(int argc, char **argv) {
  (void)argv;
  if (argc > 1) {
    fprintf(stderr, "usage: airetry demo\n");
    return AIR__EXIT_USAGE;
  }
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return AIR__EXIT_FAIL;
  exe[n] = '\0';
  char dir[] = "/tmp/airetry-demo-XXXXXX";
  if (mkdtemp(dir) == NULL) return AIR__EXIT_FAIL;
  char script[256], config[256];
  snprintf(script, sizeof(script), "%s/mock.yaml", dir);
  snprintf(config, sizeof(config), "%s/airetry.yaml", dir);
  FILE *f = fopen(script, "w");
  if (f == NULL) return AIR__EXIT_FAIL;
  fputs(mock_script, f);
  fclose(f);

  signal(SIGPIPE, SIG_IGN);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  child mock = {0}, gw = {0};
  int exit_code = AIR__EXIT_FAIL;
  char line[512];
  char *margv[] = {exe,        "mock", "--listen", "127.0.0.1:0",
                   "--script", script, NULL};
  if (spawn(exe, margv, false, &mock) != 0 ||
      read_line(mock.out, line, sizeof(line), 5000) != 0) {
    fprintf(stderr, "airetry demo: the mock did not start\n");
    goto out;
  }
  int mport = port_of(line);
  f = fopen(config, "w");
  if (f == NULL) goto out;
  fprintf(f, gateway_config, mport, mport);
  fclose(f);
  char *gargv[] = {exe,           "serve",     "--config", config, "--listen",
                   "127.0.0.1:0", "--workers", "1",        NULL};
  if (spawn(exe, gargv, true, &gw) != 0 ||
      read_line(gw.out, line, sizeof(line), 5000) != 0) {
    fprintf(stderr, "airetry demo: the gateway did not start\n");
    goto out;
  }
  int gport = port_of(line);
  printf(
      "airetry demo — no keys, no network\n"
      "  mock upstream  http://127.0.0.1:%d  (primary: flaky gpt-4o, "
      "fallback: claude-sonnet-4-5)\n"
      "  gateway        http://127.0.0.1:%d  route \"smart\" = "
      "primary/gpt-4o -> fallback/claude-sonnet-4-5\n\n",
      mport, gport);
  size_t n_req = sizeof(requests) / sizeof(requests[0]);
  unsigned answered = 0;
  uint64_t t_all = now_ms();
  for (size_t i = 0; i < n_req; i++) {
    printf("request %zu: %s  [%s, streaming]\n", i + 1, requests[i].title,
           requests[i].anthropic ? "Anthropic API" : "OpenAI API");
    fflush(stdout);
    stream_view v;
    memset(&v, 0, sizeof(v));
    long status = send_request(gport, &requests[i], &v);
    if (v.started_line) printf("\n");
    char cont[128];
    print_attempts(gw.err, cont, sizeof(cont));
    if (v.marker[0] != '\0')
      printf("    the last event says so: \"airetry\": %s\n", v.marker);
    bool ok = status == 200 && !v.error && v.tokens > 0;
    if (ok && cont[0] != '\0') {
      answered++;
      printf(
          "    = one answer: started by %s, finished by %s after the break:"
          " first content %llu ms, %u tokens, %llu ms total\n\n",
          v.target, cont, (unsigned long long)v.first_ms, v.tokens,
          (unsigned long long)(now_ms() - v.start));
    } else if (ok) {
      answered++;
      printf(
          "    = answered by %s after %s attempt(s): first content %llu ms, "
          "%u tokens, %llu ms total\n\n",
          v.target, v.attempts, (unsigned long long)v.first_ms, v.tokens,
          (unsigned long long)(now_ms() - v.start));
    } else {
      printf("    = FAILED (HTTP %ld)\n\n", status);
    }
    fflush(stdout);
  }
  printf("summary: %u/%zu requests answered through the gateway in %llu ms\n",
         answered, n_req, (unsigned long long)(now_ms() - t_all));
  exit_code = answered == n_req ? AIR__EXIT_OK : AIR__EXIT_FAIL;
out:
  stop(&gw);
  stop(&mock);
  unlink(script);
  unlink(config);
  rmdir(dir);
  curl_global_cleanup();
  return exit_code;
}
