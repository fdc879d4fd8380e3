/*
 * airetry mock [--listen HOST:PORT] [--script FILE]: the fault-injecting
 * fake provider (docs/mock.md). One uv loop on the main thread; SIGTERM and
 * SIGINT stop it (exit 0). Exit 2 on bad usage or a bad script (reported
 * as FILE:LINE:COL: message), 1 when it cannot listen.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "cli.h"
#include "mock.h"

#define DEFAULT_LISTEN "127.0.0.1:8089"

static const char mock_usage[] =
    "usage: airetry mock [--listen HOST:PORT] [--script FILE]\n"
    "\n"
    "An OpenAI- and Anthropic-compatible fake provider that misbehaves on\n"
    "purpose. Point a provider's base_url at http://HOST:PORT/v1 (openai) or\n"
    "http://HOST:PORT (anthropic). The first stdout line is\n"
    "'listening on http://HOST:PORT'. SIGTERM/SIGINT stop it.\n"
    "\n"
    "  -l, --listen HOST:PORT  default " DEFAULT_LISTEN
    "; port 0: ephemeral\n"
    "  -s, --script FILE       per-model behaviours (YAML, docs/mock.md)\n"
    "  -h, --help              this text\n"
    "\n"
    "endpoints:\n"
    "  POST /v1/chat/completions  POST /v1/messages  (stream true/false)\n"
    "  GET /__mock/log   every attempt since the last reset (JSON)\n"
    "  POST /__mock/reset  clears the log and attempt counters, restarts the "
    "clock\n"
    "  GET /healthz\n"
    "\n"
    "answer: for model M, '[M] w1 w2 ... wN' (tokens: N, default 8), one "
    "token\n"
    "per content event, delay_ms apart; finish stop.\n"
    "\n"
    "behaviours (script keys):\n"
    "  status: N              HTTP N with an error body in the request's "
    "dialect\n"
    "  body: TEXT, code: C    replace the error body / set OpenAI error.code\n"
    "  retry_after: S         header retry-after: S\n"
    "  retry_after_ms: MS     header retry-after-ms: MS\n"
    "  headers: {name: value} extra response headers\n"
    "  reset: true            TCP reset before any header\n"
    "  hang: true             accept and never answer\n"
    "  headers_delay_ms: MS   wait before the response head\n"
    "  first_delay_ms: MS     head at once, first content after MS\n"
    "  cut_after: N           close the connection after N content events\n"
    "  stall_after: N         send nothing more after N content events\n"
    "  malformed_at: N        a malformed event before content event N\n"
    "  no_done: true          no [DONE] / message_stop\n"
    "  refusal: true|TEXT|native  a refusal text, or the API's own refusal\n"
    "  tool_calls: N          N tool calls (parallel when N > 1)\n"
    "  tool_text: true        the answer text before the tool calls\n"
    "  json: true             a JSON answer (an instance of the requested "
    "schema)\n"
    "  reasoning: N           N reasoning / thinking deltas before the answer\n"
    "  finish: length|content_filter\n"
    "  overload_after: N      overloaded_error event after N content events\n"
    "  tokens: N, delay_ms: MS, answer: TEXT\n"
    "  continue_as: exact|restart|repeat|preamble|diverge, repeat_chars: N\n"
    "                         how a continuation (a trailing assistant "
    "message,\n"
    "                         or a user message after one) is answered\n"
    "model entries also take attempts: [behaviour, ...], then: behaviour,\n"
    "flap: {from_ms, to_ms, fault}, reject_prefill: true.\n"
    "\n"
    "model-name convention (no script needed): NAME@tok@tok...\n"
    "  @429 @503 (any status)  @ra=S @ram=MS @code=C\n"
    "  @reset @hang @nodone @refuse @length @filter\n"
    "  @silent=MS (headers_delay_ms)  @slow=MS (first_delay_ms)\n"
    "  @cut=N @stall=N @bad=N (malformed_at) @overload=N\n"
    "  @tools=N @json @reason=N @nrefuse @tooltext (answer shapes, "
    "docs/mock.md)\n"
    "  @tokens=N @delay=MS @noprefill (Anthropic's prefill 400)\n"
    "  @restart @repeat @repeat=N @preamble @diverge (continue_as, every "
    "attempt)\n"
    "  @k=K         the faults apply to the first K attempts only\n"
    "  @flap=A-B    the faults apply only while ms since reset is in [A, B)\n"
    "example: gpt-4o@429@ra=1@k=2 answers 429 twice, then succeeds.\n";

typedef struct mock_cli {
  air__mock *mock;
  uv_signal_t sig_term, sig_int;
} mock_cli;

static void on_stopped(void *data) {
  mock_cli *c = data;
  uv_close((uv_handle_t *)&c->sig_term, NULL);
  uv_close((uv_handle_t *)&c->sig_int, NULL);
}

static void on_signal(uv_signal_t *s, int signum) {
  mock_cli *c = s->data;
  (void)signum;
  uv_signal_stop(&c->sig_term);
  uv_signal_stop(&c->sig_int);
  air__mock_stop(c->mock, on_stopped, c);
}

/* Splits "HOST:PORT" ("[::1]:8089" for IPv6) into host (brackets
 * removed) and port 0..65535. */
static int split_listen(const char *s, char *host, size_t host_n, int *port) {
  const char *colon = strrchr(s, ':');
  if (colon == NULL || colon == s) return -1;
  const char *h = s;
  size_t hn = (size_t)(colon - s);
  if (h[0] == '[') {
    if (hn < 3 || h[hn - 1] != ']') return -1;
    h++;
    hn -= 2;
  }
  if (hn == 0 || hn >= host_n) return -1;
  memcpy(host, h, hn);
  host[hn] = '\0';
  char *end = NULL;
  errno = 0;
  long p = strtol(colon + 1, &end, 10);
  if (errno != 0 || end == colon + 1 || *end != '\0' || p < 0 || p > 65535)
    return -1;
  *port = (int)p;
  return 0;
}

/* Reads a whole file of at most max bytes. Returns 0 (caller frees *out),
 * AIR_EIO or AIR_ETOOBIG. */
static int read_file(const char *path, size_t max, char **out, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return AIR_EIO;
  char *buf = malloc(max + 1);
  if (buf == NULL) {
    fclose(f);
    return AIR_ENOMEM;
  }
  size_t got = fread(buf, 1, max + 1, f);
  int err = ferror(f);
  fclose(f);
  if (err) {
    free(buf);
    return AIR_EIO;
  }
  if (got > max) {
    free(buf);
    return AIR_ETOOBIG;
  }
  buf[got] = '\0';
  *out = buf;
  *n = got;
  return 0;
}

static int load_script(const char *path, air__mock_script **out) {
  char *text = NULL;
  size_t n = 0;
  int rc = read_file(path, AIR__MOCK_MAX_SCRIPT_BYTES, &text, &n);
  if (rc != 0) {
    fprintf(stderr, "%s: %s\n", path,
            rc == AIR_ETOOBIG
                ? "the script is too large"
                : (rc == AIR_EIO ? strerror(errno) : air_strerror(rc)));
    return rc;
  }
  air__mock_diag d;
  rc = air__mock_script_parse(text, n, out, &d);
  free(text);
  if (rc != 0) {
    if (d.line > 0)
      fprintf(stderr, "%s:%d:%d: %s\n", path, d.line, d.column, d.message);
    else
      fprintf(stderr, "%s: %s\n", path,
              d.message[0] ? d.message : air_strerror(rc));
  }
  return rc;
}

int air__cmd_mock(int argc, char **argv) {
  const char *listen = DEFAULT_LISTEN;
  const char *script_path = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(mock_usage, stdout);
      return AIR__EXIT_OK;
    }
    const char **dst = NULL;
    if (strcmp(a, "-l") == 0 || strcmp(a, "--listen") == 0) {
      dst = &listen;
    } else if (strcmp(a, "-s") == 0 || strcmp(a, "--script") == 0) {
      dst = &script_path;
    } else if (strncmp(a, "--listen=", 9) == 0) {
      listen = a + 9;
      continue;
    } else if (strncmp(a, "--script=", 9) == 0) {
      script_path = a + 9;
      continue;
    } else {
      fprintf(stderr, "airetry mock: unexpected argument '%s'\n\n%s", a,
              mock_usage);
      return AIR__EXIT_USAGE;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "airetry mock: %s needs a value\n\n%s", a, mock_usage);
      return AIR__EXIT_USAGE;
    }
    *dst = argv[++i];
  }
  char host[256];
  int port = 0;
  if (split_listen(listen, host, sizeof(host), &port) != 0) {
    fprintf(stderr, "airetry mock: --listen: expected HOST:PORT, got '%s'\n",
            listen);
    return AIR__EXIT_USAGE;
  }
  air__mock_script *script = NULL;
  if (script_path != NULL && load_script(script_path, &script) != 0)
    return AIR__EXIT_USAGE;

  signal(SIGPIPE, SIG_IGN);
  uv_loop_t *loop = uv_default_loop();
  mock_cli c = {0};
  air__mock_config mc = {.host = host, .port = port, .script = script};
  int uv_err = 0;
  int rc = air__mock_start(loop, &mc, &c.mock, &uv_err);
  if (rc != 0) {
    fprintf(
        stderr, "airetry mock: cannot listen on %s: %s\n", listen,
        rc == AIR_EIO && uv_err != 0 ? uv_strerror(uv_err) : air_strerror(rc));
    air__mock_script_free(script);
    uv_loop_close(loop);
    return rc == AIR_EINVAL ? AIR__EXIT_USAGE : AIR__EXIT_FAIL;
  }
  bool v6 = strchr(host, ':') != NULL;
  printf("listening on http://%s%s%s:%d\n", v6 ? "[" : "", host, v6 ? "]" : "",
         air__mock_port(c.mock));
  fflush(stdout);
  uv_signal_init(loop, &c.sig_term);
  uv_signal_init(loop, &c.sig_int);
  c.sig_term.data = c.sig_int.data = &c;
  uv_signal_start(&c.sig_term, on_signal, SIGTERM);
  uv_signal_start(&c.sig_int, on_signal, SIGINT);
  uv_run(loop, UV_RUN_DEFAULT);
  air__mock_free(c.mock);
  air__mock_script_free(script);
  int close_rc = uv_loop_close(loop);
  if (close_rc != 0)
    fprintf(stderr, "airetry mock: handles left open at exit\n");
  return AIR__EXIT_OK;
}
