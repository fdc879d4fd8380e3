/*
 * The integration harness (see harness.h). The mock runs as a child process
 * whose stdout and stderr go to temp files: reading the port is a bounded
 * poll of a file, and the child can never block on a full pipe.
 */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <cmocka.h>
#include <curl/curl.h>
#include <jansson.h>

#define MAX_HTTP_BODY (4u << 20)

uint64_t it_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void it_sleep_ms(unsigned ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int it_wait_for(bool (*cond)(void *data), void *data, unsigned timeout_ms) {
  uint64_t until = it_now_ms() + timeout_ms;
  for (unsigned i = 0; i < timeout_ms / IT_POLL_MS + 2; i++) {
    if (cond(data)) return 0;
    if (it_now_ms() >= until) break;
    it_sleep_ms(IT_POLL_MS);
  }
  return cond(data) ? 0 : -1;
}

/* ---- tracked objects
 * ---------------------------------------------------------- */

#define MAX_TRACKED 256

typedef struct tracked {
  void *p;
  it_free_fn fn;
} tracked;

/* The test process's registry: a test-only global (the library has none). */
static pthread_mutex_t track_mu = PTHREAD_MUTEX_INITIALIZER;
static tracked track_list[MAX_TRACKED];
static size_t track_n;

void it_track(void *p, it_free_fn fn) {
  if (p == NULL) return;
  pthread_mutex_lock(&track_mu);
  if (track_n < MAX_TRACKED) track_list[track_n++] = (tracked){p, fn};
  pthread_mutex_unlock(&track_mu);
}

void it_untrack(void *p) {
  if (p == NULL) return;
  pthread_mutex_lock(&track_mu);
  for (size_t i = track_n; i-- > 0;) {
    if (track_list[i].p == p) {
      memmove(&track_list[i], &track_list[i + 1],
              (track_n - i - 1) * sizeof(track_list[0]));
      track_n--;
      break;
    }
  }
  pthread_mutex_unlock(&track_mu);
}

void it_release_all(void) {
  for (;;) {
    pthread_mutex_lock(&track_mu);
    tracked t = track_n ? track_list[--track_n] : (tracked){NULL, NULL};
    pthread_mutex_unlock(&track_mu);
    if (t.p == NULL) break;
    t.fn(t.p);
  }
}

static void free_result(void *p) {
  air_chat_result_free(p);
}
static void free_client(void *p) {
  air_client_free(p);
}
static void free_config(void *p) {
  air_config_free(p);
}

/* ---- the child process ------------------------------------------------------
 */

static int make_temp(char *path, size_t cap, const char *what) {
  const char *dir = getenv("TMPDIR");
  if (dir == NULL || dir[0] == '\0' || strlen(dir) > 40) dir = "/tmp";
  snprintf(path, cap, "%s/air-it-%s-XXXXXX", dir, what);
  int fd = mkstemp(path);
  if (fd < 0) {
    fprintf(stderr, "harness: mkstemp %s: %s\n", path, strerror(errno));
    path[0] = '\0';
  }
  return fd;
}

static void dump_file(const char *what, const char *path) {
  if (path[0] == '\0') return;
  FILE *f = fopen(path, "r");
  if (f == NULL) return;
  char line[512];
  fprintf(stderr, "harness: --- mock %s ---\n", what);
  for (int i = 0; i < 40 && fgets(line, sizeof(line), f) != NULL; i++)
    fputs(line, stderr);
  fclose(f);
}

/* Reads the first line of path if it is complete. 1 when found. */
static int first_line(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, cap - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  char *nl = strchr(buf, '\n');
  if (nl == NULL) return 0;
  *nl = '\0';
  return 1;
}

int it_mock_start(it_mock *m, const char *script) {
  memset(m, 0, sizeof(*m));
  m->pid = -1;
  int out = make_temp(m->out_path, sizeof(m->out_path), "out");
  int err = make_temp(m->err_path, sizeof(m->err_path), "err");
  if (out < 0 || err < 0) {
    if (out >= 0) close(out);
    if (err >= 0) close(err);
    return -1;
  }
  const char *argv[] = {AIRETRY_BIN,
                        "mock",
                        "--listen",
                        "127.0.0.1:0",
                        script ? "--script" : NULL,
                        script,
                        NULL};
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "harness: fork: %s\n", strerror(errno));
    close(out);
    close(err);
    return -1;
  }
  if (pid == 0) {
#ifdef __linux__
    /* The mock dies with the test, even when the test crashes. */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
#endif
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    execv(AIRETRY_BIN, (char *const *)argv);
    _exit(127);
  }
  close(out);
  close(err);
  m->pid = pid;
  char line[256];
  uint64_t until = it_now_ms() + IT_START_MS;
  for (unsigned i = 0; i < IT_START_MS / 5 + 1 && it_now_ms() < until; i++) {
    if (first_line(m->out_path, line, sizeof(line))) {
      const char *p = strstr(line, "http://127.0.0.1:");
      int port = p ? atoi(p + strlen("http://127.0.0.1:")) : 0;
      if (strncmp(line, "listening on ", 13) != 0 || port <= 0 ||
          port > 65535) {
        fprintf(stderr, "harness: unexpected first line from the mock: '%s'\n",
                line);
        break;
      }
      m->port = port;
      return 0;
    }
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) {
      m->pid = -1;
      fprintf(stderr, "harness: the mock exited early (status %d)\n",
              WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
      dump_file("stderr", m->err_path);
      it_mock_stop(m);
      return -1;
    }
    it_sleep_ms(5);
  }
  fprintf(stderr, "harness: the mock did not print its port\n");
  dump_file("stderr", m->err_path);
  it_mock_stop(m);
  return -1;
}

int it_mock_stop(it_mock *m) {
  int result = -1;
  if (m->pid > 0) {
    kill(m->pid, SIGTERM);
    uint64_t until = it_now_ms() + IT_STOP_MS;
    int st = 0;
    bool reaped = false;
    for (unsigned i = 0; i < IT_STOP_MS / 5 + 1 && it_now_ms() < until; i++) {
      pid_t r = waitpid(m->pid, &st, WNOHANG);
      if (r == m->pid || (r < 0 && errno != EINTR)) {
        reaped = r == m->pid;
        break;
      }
      it_sleep_ms(5);
    }
    if (!reaped) {
      fprintf(stderr, "harness: the mock ignored SIGTERM; SIGKILL\n");
      kill(m->pid, SIGKILL);
      waitpid(m->pid, &st, 0);
    } else if (WIFEXITED(st)) {
      result = WEXITSTATUS(st);
      if (result != 0) {
        fprintf(stderr, "harness: the mock exited with %d\n", result);
        dump_file("stderr", m->err_path);
      }
    } else {
      fprintf(stderr, "harness: the mock died of signal %d\n", WTERMSIG(st));
      dump_file("stderr", m->err_path);
    }
    m->pid = -1;
  }
  if (m->out_path[0]) unlink(m->out_path);
  if (m->err_path[0]) unlink(m->err_path);
  m->out_path[0] = m->err_path[0] = '\0';
  return result;
}

/* ---- HTTP to the mock (loopback only)
 * ------------------------------------------ */

typedef struct http_body {
  char *p;
  size_t n;
  bool over;
} http_body;

static size_t on_write(char *p, size_t size, size_t nmemb, void *data) {
  http_body *b = data;
  size_t n = size * nmemb;
  if (b->n + n > MAX_HTTP_BODY) {
    b->over = true;
    return 0;
  }
  char *q = realloc(b->p, b->n + n + 1);
  if (q == NULL) return 0;
  memcpy(q + b->n, p, n);
  b->p = q;
  b->n += n;
  b->p[b->n] = '\0';
  return n;
}

static int request(const it_mock *m, const char *method, const char *path,
                   char **out) {
  if (out) *out = NULL;
  if (m->port <= 0) return -1;
  char url[128];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", m->port, path);
  CURL *e = curl_easy_init();
  if (e == NULL) return -1;
  http_body b = {NULL, 0, false};
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)IT_HTTP_MS);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)IT_HTTP_MS);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http");
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
  if (strcmp(method, "POST") == 0) {
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, 0L);
  }
  CURLcode rc = curl_easy_perform(e);
  long status = -1;
  if (rc == CURLE_OK) {
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
  } else {
    fprintf(stderr, "harness: %s %s: %s\n", method, path,
            curl_easy_strerror(rc));
  }
  curl_easy_cleanup(e);
  if (out != NULL && rc == CURLE_OK) {
    *out = b.p ? b.p : calloc(1, 1);
  } else {
    free(b.p);
  }
  return (int)status;
}

int it_http_get(const it_mock *m, const char *path, char **out) {
  return request(m, "GET", path, out);
}

int it_mock_reset(it_mock *m) {
  m->reset_before = it_now_ms();
  int st = request(m, "POST", "/__mock/reset", NULL);
  m->reset_after = it_now_ms();
  if (st != 204 && st != 200) {
    fprintf(stderr, "harness: POST /__mock/reset answered %d\n", st);
    return -1;
  }
  if (st != 204)
    fprintf(stderr, "harness: mock deviation: reset gave %d, not 204\n", st);
  return 0;
}

static int64_t int_or_null(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  if (json_is_integer(v)) return (int64_t)json_integer_value(v);
  if (json_is_real(v)) return (int64_t)json_real_value(v);
  return -1;
}

static void copy_str(json_t *o, const char *key, char *dst, size_t cap) {
  const char *s = json_string_value(json_object_get(o, key));
  snprintf(dst, cap, "%s", s ? s : "");
}

int it_mock_log(const it_mock *m, it_log *log) {
  log->n = 0;
  char *text = NULL;
  int st = it_http_get(m, "/__mock/log", &text);
  if (st != 200 || text == NULL) {
    fprintf(stderr, "harness: GET /__mock/log answered %d\n", st);
    free(text);
    return -1;
  }
  json_error_t jerr;
  json_t *root = json_loads(text, 0, &jerr);
  json_t *arr = json_object_get(root, "attempts");
  if (!json_is_array(arr)) {
    fprintf(stderr,
            "harness: /__mock/log is not {\"attempts\": [...]}: %.200s\n",
            text);
    json_decref(root);
    free(text);
    return -1;
  }
  free(text);
  for (size_t i = 0; i < json_array_size(arr) && log->n < IT_MAX_LOG; i++) {
    json_t *a = json_array_get(arr, i);
    it_entry *e = &log->e[log->n++];
    memset(e, 0, sizeof(*e));
    e->t_ms = int_or_null(a, "t_ms");
    copy_str(a, "model", e->model, sizeof(e->model));
    e->attempt = (int)int_or_null(a, "attempt");
    copy_str(a, "api", e->api, sizeof(e->api));
    e->stream = json_is_true(json_object_get(a, "stream"));
    copy_str(a, "fault", e->fault, sizeof(e->fault));
    e->status = (int)int_or_null(a, "status");
    e->hung_up = json_is_true(json_object_get(a, "hung_up"));
    e->hung_up_ms = int_or_null(a, "hung_up_ms");
    e->end_ms = int_or_null(a, "end_ms");
  }
  json_decref(root);
  return 0;
}

int it_mock_log_settled(const it_mock *m, size_t n, unsigned timeout_ms,
                        it_log *log) {
  uint64_t until = it_now_ms() + timeout_ms;
  for (unsigned i = 0; i < timeout_ms / 10 + 2; i++) {
    if (it_mock_log(m, log) == 0 && log->n >= n) {
      bool open = false;
      for (size_t k = 0; k < log->n; k++) open = open || log->e[k].end_ms < 0;
      if (!open) return 0;
    }
    if (it_now_ms() >= until) break;
    it_sleep_ms(10);
  }
  return -1;
}

int it_mock_log_exactly(const it_mock *m, size_t n, unsigned timeout_ms,
                        it_log *log) {
  int rc = it_mock_log_settled(m, n, timeout_ms, log);
  if (rc == 0) rc = it_mock_log(m, log);
  bool open = false;
  for (size_t k = 0; k < log->n; k++) open = open || log->e[k].end_ms < 0;
  if (rc != 0 || log->n != n || open) {
    fprintf(stderr, "harness: expected exactly %zu ended attempts\n", n);
    it_log_print(log);
    return -1;
  }
  return 0;
}

int it_mock_open(const it_mock *m, const char *model) {
  it_log *log = malloc(sizeof(*log));
  if (log == NULL || it_mock_log(m, log) != 0) {
    free(log);
    return -1;
  }
  int open = 0;
  for (size_t k = 0; k < log->n; k++)
    open += log->e[k].end_ms < 0 &&
            (model == NULL || strcmp(log->e[k].model, model) == 0);
  free(log);
  return open;
}

void it_log_print(const it_log *log) {
  fprintf(stderr, "mock log (%zu):\n", log->n);
  for (size_t i = 0; i < log->n; i++) {
    const it_entry *e = &log->e[i];
    fprintf(stderr,
            "  t=%-6lld %-40s #%d %-9s stream=%d fault=%-20s status=%d "
            "hung_up=%d@%lld end=%lld\n",
            (long long)e->t_ms, e->model, e->attempt, e->api, e->stream,
            e->fault, e->status, e->hung_up, (long long)e->hung_up_ms,
            (long long)e->end_ms);
  }
}

bool it_log_models(const it_log *log, size_t n, const char *const *models) {
  bool ok = log->n == n;
  for (size_t i = 0; ok && i < n; i++)
    ok = strcmp(log->e[i].model, models[i]) == 0;
  if (!ok) {
    fprintf(stderr, "expected mock attempts:");
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %s", models[i]);
    fputc('\n', stderr);
    it_log_print(log);
  }
  return ok;
}

/* ---- answers, configs, clients
 * -------------------------------------------------- */

void it_answer(const char *model, unsigned tokens, char *buf, size_t cap) {
  size_t n = (size_t)snprintf(buf, cap, "[%s]", model);
  for (unsigned i = 1; i <= tokens && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, " w%u", i);
}

static void print_diag(void *data, const air_diag *d) {
  (void)data;
  fprintf(stderr, "%s:%d:%d: %s: %s\n", d->file, d->line, d->column,
          d->severity == AIR_DIAG_ERROR ? "error" : "warning", d->message);
}

int it_client_new_text(const char *yaml, unsigned workers, it_client *out) {
  memset(out, 0, sizeof(*out));
  int rc = air_config_parse("it.yaml", yaml, strlen(yaml), print_diag, NULL,
                            &out->cfg);
  if (rc != 0) {
    fprintf(stderr, "harness: config:\n%s\n", yaml);
    return -1;
  }
  air_error err;
  rc = air_client_new(out->cfg, workers, &out->client, &err);
  if (rc != 0) {
    fprintf(stderr, "harness: air_client_new: %s\n", err.message);
    air_config_free(out->cfg);
    out->cfg = NULL;
    return -1;
  }
  it_track(out->cfg, free_config);
  it_track(out->client, free_client);
  return 0;
}

int it_client_new(const it_mock *m, const char *tail, unsigned workers,
                  it_client *out) {
  char *yaml = malloc(IT_MAX_CONFIG);
  if (yaml == NULL) return -1;
  int n = snprintf(yaml, IT_MAX_CONFIG,
                   "providers:\n"
                   "  - {name: mo, api: openai, base_url: "
                   "\"http://127.0.0.1:%d/v1\"}\n"
                   "  - {name: ma, api: anthropic, base_url: "
                   "\"http://127.0.0.1:%d\"}\n"
                   "%s",
                   m->port, m->port, tail);
  int rc = n > 0 && (size_t)n < IT_MAX_CONFIG
               ? it_client_new_text(yaml, workers, out)
               : -1;
  free(yaml);
  return rc;
}

void it_client_free(it_client *c) {
  it_untrack(c->client);
  it_untrack(c->cfg);
  air_client_free(c->client);
  air_config_free(c->cfg);
  memset(c, 0, sizeof(*c));
}

/* ---- one call
 * ------------------------------------------------------------------- */

static void cb_commit(void *data, const char *target, unsigned attempt) {
  it_call *c = data;
  c->n_commit++;
  c->t_commit = it_now_ms();
  snprintf(c->commit_target, sizeof(c->commit_target), "%s", target);
  c->commit_attempt = attempt;
}

static int cb_part(void *data, const air_part *p) {
  it_call *c = data;
  if (c->n_error > 0) c->part_after_error = true;
  c->n_parts++;
  c->t_last_part = it_now_ms();
  switch (p->kind) {
    case AIR_PART_TEXT:
      c->n_text++;
      __atomic_fetch_add(&c->ev_text, 1u, __ATOMIC_SEQ_CST);
      if (c->text_n + p->text_len < sizeof(c->text)) {
        memcpy(c->text + c->text_n, p->text, p->text_len);
        c->text_n += p->text_len;
        c->text[c->text_n] = '\0';
      } else {
        c->text_overflow = true;
      }
      break;
    case AIR_PART_ERROR: {
      c->n_error++;
      size_t n = p->name_len < sizeof(c->error_name) - 1
                     ? p->name_len
                     : sizeof(c->error_name) - 1;
      if (p->name != NULL) memcpy(c->error_name, p->name, n);
      c->error_name[n] = '\0';
      break;
    }
    case AIR_PART_FINISH:
      c->n_finish++;
      c->finish = p->finish;
      break;
    default:
      break;
  }
  return c->stop_after != 0 && c->n_parts >= c->stop_after ? 1 : 0;
}

static void cb_failed(void *data, const air_attempt *a) {
  it_call *c = data;
  (void)a;
  c->n_failed++;
  __atomic_fetch_add(&c->ev_failed, 1u, __ATOMIC_SEQ_CST);
  if (c->failed_sleep_ms) it_sleep_ms(c->failed_sleep_ms);
}

int it_chat(air_client *client, it_call *c) {
  char body[1024];
  if (c->dialect == AIR_DIALECT_ANTHROPIC) {
    snprintf(body, sizeof(body),
             "{\"model\":\"%s\",\"max_tokens\":256,\"messages\":"
             "[{\"role\":\"user\",\"content\":\"hello\"}]}",
             c->model);
  } else {
    snprintf(body, sizeof(body),
             "{\"model\":\"%s\",\"messages\":"
             "[{\"role\":\"user\",\"content\":\"hello\"}]}",
             c->model);
  }
  c->text_n = 0;
  c->text[0] = '\0';
  air_observers obs = AIR_OBSERVERS_INIT;
  obs.data = c;
  obs.on_commit = cb_commit;
  obs.on_failed = cb_failed;
  air_chat_opts opts = AIR_CHAT_OPTS_INIT;
  opts.cancel = c->cancel;
  if (c->stream) {
    opts.on_part = cb_part;
    opts.data = c;
    opts.observers = &obs;
  }
  c->t_start = it_now_ms();
  /* Non-streaming callers set no callback at all (only the cancel token). */
  c->rc = air_client_chat(client, c->dialect, body, strlen(body), &opts,
                          &c->res, NULL);
  c->t_end = it_now_ms();
  it_track(c->res, free_result);
  return c->rc;
}

unsigned it_call_texts(const it_call *c) {
  return __atomic_load_n(&c->ev_text, __ATOMIC_SEQ_CST);
}

unsigned it_call_failures(const it_call *c) {
  return __atomic_load_n(&c->ev_failed, __ATOMIC_SEQ_CST);
}

void it_call_cleanup(it_call *c) {
  it_untrack(c->res);
  air_chat_result_free(c->res);
  c->res = NULL;
}

void it_call_print(const it_call *c) {
  fprintf(stderr, "call %s (%s, %s): rc %d (%s), %llu ms\n", c->model,
          c->dialect == AIR_DIALECT_ANTHROPIC ? "anthropic" : "openai",
          c->stream ? "stream" : "whole", c->rc, air_strerror(c->rc),
          (unsigned long long)(c->t_end - c->t_start));
  if (c->res == NULL) return;
  const air_chat_result *r = c->res;
  fprintf(stderr, "  status %d reason %s finish %s target %s text '%.*s'\n",
          r->status, air_reason_name(r->reason), air_finish_name(r->finish),
          r->target ? r->target : "", (int)r->text_len, r->text ? r->text : "");
  fprintf(stderr, "  delivered '%s' parts %u errors %u (%s)\n", c->text,
          c->n_parts, c->n_error, c->error_name);
  for (size_t i = 0; i < r->n_log; i++) {
    const air_attempt *a = &r->log[i];
    fprintf(stderr, "  %u %-36s %-20s %3d %5llu ms wait %llu%s  %s\n", a->n,
            a->target, air_reason_name(a->reason), a->status,
            (unsigned long long)a->ms, (unsigned long long)a->wait_ms,
            a->hint ? " (hint)" : "", a->message);
  }
  fprintf(stderr, "  body: %.300s\n", r->body ? r->body : "");
}

/* ---- the suite's mock and fixtures --------------------------------------- */

static it_mock suite_mock;
static const char *suite_script;

it_mock *it_suite(void) {
  return &suite_mock;
}

void it_suite_use_script(const char *script) {
  suite_script = script;
}

void it_case_filter(void) {
  if (getenv("IT_CASE") != NULL) cmocka_set_test_filter(getenv("IT_CASE"));
}

int it_group_setup(void **state) {
  (void)state;
  if (air_global_init() != 0) return -1;
  return it_mock_start(&suite_mock, suite_script);
}

int it_group_teardown(void **state) {
  (void)state;
  int rc = it_mock_stop(&suite_mock);
  air_global_cleanup();
  return rc == 0 ? 0 : -1;
}

int it_reset_mock(void **state) {
  (void)state;
  return it_mock_reset(&suite_mock);
}

int it_release(void **state) {
  (void)state;
  it_release_all();
  return 0;
}
