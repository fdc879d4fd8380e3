/*
 * The mock's server glue (docs/mock.md): routes requests, chooses each
 * attempt's behaviour (behaviour.c), and drives every response with one
 * small state machine and one uv timer:
 *
 *   HEAD_WAIT  headers_delay_ms before anything is sent (or reset/hang)
 *   BODY_WAIT  non-streaming: first_delay_ms before the whole body
 *   STREAM     one content event per delay_ms (all at once for 0)
 *   DRAIN      paused until the unsent bytes drain (backpressure)
 *   HOLD       hang / stall: nothing more is sent; held until the client
 *              leaves or the mock stops
 *
 * A client that leaves is seen at once (air__http_req_on_disconnect): the
 * timer stops, the request is released, and the log records hung_up.
 * Live exchanges are listed so that a stop cuts them all at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mock_int.h"
#include "dialect.h"
#include "server.h"

#define LIT(s) s, sizeof(s) - 1
#define FLUSH_BYTES 65536u        /* batch events up to this, then write */
#define LOG_JSON_MAX (256u << 20) /* GET /__mock/log body */
#define MAX_FIELDS (6 + AIR__MOCK_MAX_HEADERS)
#define SHUTDOWN_MS 2000u

typedef struct xchg xchg;

struct air__mock {
  uv_loop_t *loop;
  air__http_server *srv;
  const air__mock_script *script;
  air__mock_model healthy; /* script defaults, or nothing */
  air__mock_log log;
  uint64_t epoch_ns; /* the last reset (uv_hrtime) */
  uint64_t seq;      /* ids mock-<n>, since the last reset */
  xchg *live;
  bool stopping;
  void (*on_stopped)(void *data);
  void *stopped_data;
};

enum { P_HEAD_WAIT, P_BODY_WAIT, P_STREAM, P_DRAIN, P_HOLD };

/* One API request and its response. */
struct xchg {
  air__mock *m;
  air__http_req *req; /* NULL once finished */
  xchg *prev, *next;
  uv_timer_t timer;
  int phase;
  uint64_t log_id; /* 0: not in the log */
  air_dialect api;
  const air__dialect_ops *ops;
  bool stream, include_usage;
  char *model; /* the request's model, NUL-terminated */
  size_t model_n;
  char *storage; /* the convention's copy of the name */
  air__mock_model conv;
  air__mock_beh beh;
  air__mock_answer ans;
  air__encoder enc;
  air__buf out;
  uint64_t in_tokens;
  size_t sent;  /* content events sent */
  size_t total; /* content events of this response */
  bool malformed_sent;
  const char *endpoint; /* "embeddings", "count_tokens"; NULL: chat */
  air__buf whole;       /* their answer body, built at arrival */
  char id[32];
};

/* ---- time and the log ---------------------------------------------------- */

static uint64_t now_ms(const air__mock *m) {
  return (uv_hrtime() - m->epoch_ns) / 1000000u;
}

static air__mock_entry *entry(xchg *x) {
  return x->log_id ? air__mock_log_find(&x->m->log, x->log_id) : NULL;
}

static void log_status(xchg *x, int status) {
  air__mock_entry *e = entry(x);
  if (e != NULL) e->status = status;
}

static void log_end(xchg *x, bool hung_up) {
  air__mock_entry *e = entry(x);
  if (e == NULL || e->ended) return;
  uint64_t t = now_ms(x->m);
  e->ended = true;
  e->end_ms = t;
  if (hung_up) {
    e->hung_up = true;
    e->hung_up_ms = t;
  }
}

/* ---- exchange lifetime --------------------------------------------------- */

static void xchg_free(uv_handle_t *h) {
  xchg *x = h->data;
  air__encoder_cleanup(&x->enc);
  air__mock_answer_cleanup(&x->ans);
  air__buf_cleanup(&x->out);
  air__buf_cleanup(&x->whole);
  free(x->model);
  free(x->storage);
  free(x);
}

/* The exchange is over (its request already released): unlists it and
 * frees it once its timer is closed. */
static void done(xchg *x) {
  air__mock *m = x->m;
  if (x->prev != NULL)
    x->prev->next = x->next;
  else
    m->live = x->next;
  if (x->next != NULL) x->next->prev = x->prev;
  uv_timer_stop(&x->timer);
  uv_close((uv_handle_t *)&x->timer, xchg_free);
}

/* Cuts the response where it is (terminal). hung_up: the client left. */
static void cut(xchg *x, bool hung_up) {
  if (x->req != NULL) {
    hung_up = hung_up || air__http_req_disconnected(x->req);
    air__http_abort(x->req);
    x->req = NULL;
  }
  log_end(x, hung_up);
  done(x);
}

static void on_gone(void *data, air__http_req *req) {
  (void)req;
  cut(data, true);
}

/* Writes the batched bytes. On failure the response is cut and the
 * exchange is over: returns non-zero and x must not be used. */
static int flush(xchg *x) {
  if (x->out.n == 0) return 0;
  int rc = air__http_write(x->req, x->out.p, x->out.n);
  air__buf_reset(&x->out);
  if (rc != 0) cut(x, rc == AIR_ECANCELED);
  return rc;
}

/* ---- response heads ------------------------------------------------------ */

static size_t add_field(air__http_field *f, size_t n, const char *name,
                        const char *value) {
  f[n].name = name;
  f[n].name_n = strlen(name);
  f[n].value = value;
  f[n].value_n = strlen(value);
  return n + 1;
}

/* The response fields of x: content type, request id, the behaviour's
 * retry-after hints and extra headers. */
static size_t fields(const xchg *x, air__http_field *f, const char *ctype) {
  const air__mock_beh *b = &x->beh;
  size_t n = add_field(f, 0, "content-type", ctype);
  if (strcmp(ctype, "text/event-stream") == 0)
    n = add_field(f, n, "cache-control", "no-cache");
  n = add_field(f, n,
                x->api == AIR_DIALECT_ANTHROPIC ? "request-id" : "x-request-id",
                x->id);
  if ((b->set & AIR__MOCK_K_RETRY_AFTER) && b->retry_after != NULL)
    n = add_field(f, n, "retry-after", b->retry_after);
  if ((b->set & AIR__MOCK_K_RETRY_AFTER_MS) && b->retry_after_ms != NULL)
    n = add_field(f, n, "retry-after-ms", b->retry_after_ms);
  for (size_t i = 0; (b->set & AIR__MOCK_K_HEADERS) && i < b->n_headers; i++)
    n = add_field(f, n, b->headers[i].name, b->headers[i].value);
  return n;
}

/* Answers status with the behaviour's body or an error body (terminal). */
static void respond_error(xchg *x, int status, const char *message) {
  const air__mock_beh *b = &x->beh;
  air__buf_reset(&x->out);
  int rc = 0;
  if ((b->set & AIR__MOCK_K_BODY) && b->body != NULL && message == NULL)
    rc = air__buf_adds(&x->out, b->body);
  else
    rc = air__mock_error_body(x->api, status,
                              (b->set & AIR__MOCK_K_CODE) ? b->code : NULL,
                              message, &x->out);
  if (rc != 0) status = 500;
  air__http_field f[MAX_FIELDS];
  size_t n = fields(x, f, "application/json");
  rc =
      air__http_respond(x->req, status, f, n, x->out.p, rc == 0 ? x->out.n : 0);
  x->req = NULL;
  log_status(x, status);
  log_end(x, rc == AIR_ECANCELED);
  done(x);
}

/* ---- parts through the codecs -------------------------------------------- */

static int put_part(xchg *x, const air_part *p) {
  return x->ops->encode_part(&x->enc, p, &x->out);
}

/* Anthropic: the signature_delta that closes a thinking block, due before
 * content event i (i == total: before the finish) when event i - 1 was
 * reasoning and event i is not. */
static int put_signature(xchg *x, size_t i) {
  const air__mock_answer *a = &x->ans;
  if (x->api != AIR_DIALECT_ANTHROPIC || i == 0 || i > a->n_ev ||
      a->ev[i - 1].kind != AIR_PART_REASONING ||
      (i < a->n_ev && a->ev[i].kind == AIR_PART_REASONING))
    return 0;
  return air__mock_signature_event(x->enc.open_block, &x->out);
}

/* Content event i of the answer. */
static int put_ev(xchg *x, size_t i) {
  int rc = put_signature(x, i);
  air_part p = air__mock_answer_part(&x->ans, i);
  return rc == 0 ? put_part(x, &p) : rc;
}

/* The clean end of a stream: finish, usage and (unless no_done) the
 * terminator. */
static int put_end(xchg *x) {
  air_part fin = {.kind = AIR_PART_FINISH, .finish = x->ans.finish};
  air_part use = {.kind = AIR_PART_USAGE,
                  .input_tokens = x->in_tokens,
                  .output_tokens = x->total};
  int rc = put_signature(x, x->total);
  if (rc == 0) rc = put_part(x, &fin);
  if (rc == 0) rc = put_part(x, &use);
  size_t at = x->out.n;
  if (rc == 0) rc = x->ops->encode_end(&x->enc, &x->out);
  if (rc != 0 || !((x->beh.set & AIR__MOCK_K_NO_DONE) && x->beh.no_done))
    return rc;
  static const char done_oa[] = "data: [DONE]\n\n";
  static const char done_an[] =
      "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
  const char *t = x->api == AIR_DIALECT_ANTHROPIC ? done_an : done_oa;
  size_t tn = strlen(t);
  if (x->out.n - at >= tn && memcmp(x->out.p + x->out.n - tn, t, tn) == 0) {
    x->out.n -= tn;
    x->out.p[x->out.n] = '\0';
  }
  return 0;
}

/* Anthropic's message_start, at once (the codec writes it only with the
 * first content), in the codec's own format. */
static int put_message_start(xchg *x) {
  air__buf *o = &x->out;
  int rc =
      air__buf_add(o, LIT("event: message_start\ndata: "
                          "{\"type\":\"message_start\",\"message\":{\"id\":"));
  if (rc == 0) rc = air__buf_add_json_str(o, x->enc.id, strlen(x->enc.id));
  if (rc == 0)
    rc = air__buf_add(
        o, LIT(",\"type\":\"message\",\"role\":\"assistant\",\"model\":"));
  if (rc == 0)
    rc = air__buf_add_json_str(o, x->enc.model, strlen(x->enc.model));
  if (rc == 0)
    rc = air__buf_add(o, LIT(",\"content\":[],\"stop_reason\":null,"
                             "\"stop_sequence\":null,\"usage\":{"
                             "\"input_tokens\":"));
  if (rc == 0) rc = air__buf_addu(o, x->in_tokens);
  if (rc == 0) rc = air__buf_add(o, LIT(",\"output_tokens\":0}}}\n\n"));
  if (rc == 0) x->enc.started = true;
  return rc;
}

/* ---- the state machine --------------------------------------------------- */

static void on_timer(uv_timer_t *t);

static void arm(xchg *x, int phase, uint64_t ms) {
  x->phase = phase;
  uv_timer_start(&x->timer, on_timer, ms, 0);
}

static bool has(const xchg *x, uint32_t bit) {
  return (x->beh.set & bit) != 0;
}

/* min(n, total): a fault past the last content event fires after it. */
static size_t at_most(const xchg *x, uint32_t n) {
  return n < x->total ? n : x->total;
}

/* Emits what is due now; arms the timer or waits for a drain when more
 * follows. Every path ends the exchange or leaves it waiting. */
static void step(xchg *x) {
  const air__mock_beh *b = &x->beh;
  x->phase = P_STREAM;
  for (;;) {
    if (has(x, AIR__MOCK_K_CUT) && x->sent == at_most(x, b->cut_after)) {
      if (flush(x) == 0) cut(x, false);
      return;
    }
    if (has(x, AIR__MOCK_K_OVERLOAD) &&
        x->sent == at_most(x, b->overload_after)) {
      /* The error event ends the response: its last chunk is sent, so the
       * client sees the event, not a transport error (as the real APIs). */
      if (air__mock_overload_event(x->api, &x->out) != 0) {
        cut(x, false);
      } else if (flush(x) == 0) {
        int rc = air__http_end(x->req);
        x->req = NULL;
        log_end(x, rc == AIR_ECANCELED);
        done(x);
      }
      return;
    }
    if (has(x, AIR__MOCK_K_STALL) && x->sent == at_most(x, b->stall_after)) {
      if (flush(x) == 0) x->phase = P_HOLD;
      return;
    }
    int rc = 0;
    if (has(x, AIR__MOCK_K_MALFORMED) && !x->malformed_sent &&
        (b->malformed_at == x->sent + 1 || x->sent == x->total)) {
      rc = air__mock_malformed_event(x->api, &x->out);
      x->malformed_sent = true;
    }
    if (rc == 0 && x->sent == x->total) {
      rc = put_end(x);
      if (rc != 0 || flush(x) != 0) {
        if (rc != 0) cut(x, false);
        return;
      }
      rc = air__http_end(x->req);
      x->req = NULL;
      log_end(x, rc == AIR_ECANCELED);
      done(x);
      return;
    }
    if (rc == 0) rc = put_ev(x, x->sent);
    if (rc != 0) {
      cut(x, false);
      return;
    }
    x->sent++;
    if (b->delay_ms > 0) {
      if (flush(x) == 0) arm(x, P_STREAM, b->delay_ms);
      return;
    }
    if (x->out.n >= FLUSH_BYTES) {
      if (flush(x) != 0) return;
      if (air__http_req_queued(x->req) > AIR__MOCK_QUEUE_HIGH) {
        x->phase = P_DRAIN;
        return;
      }
    }
  }
}

static void on_drain(void *data, air__http_req *req) {
  xchg *x = data;
  (void)req;
  if (x->phase == P_DRAIN) step(x);
}

/* A 200 stream: the head and the start event now, content after
 * first_delay_ms (or at once). */
static void stream_begin(xchg *x) {
  air__http_field f[MAX_FIELDS];
  size_t n = fields(x, f, "text/event-stream");
  int rc = air__http_begin(x->req, 200, f, n, -1);
  if (rc != 0) {
    cut(x, rc == AIR_ECANCELED);
    return;
  }
  log_status(x, 200);
  air__request stub = {.dialect = x->api,
                       .model = x->model,
                       .stream = true,
                       .include_usage = x->include_usage};
  x->ops->encoder_init(&x->enc, &stub, (uint64_t)time(NULL));
  air_part start = {.kind = AIR_PART_START,
                    .id = x->id,
                    .id_len = strlen(x->id),
                    .name = x->model,
                    .name_len = x->model_n};
  rc = put_part(x, &start);
  if (rc == 0 && x->api == AIR_DIALECT_ANTHROPIC) rc = put_message_start(x);
  if (rc != 0) {
    cut(x, false);
    return;
  }
  if (flush(x) != 0) return;
  x->total = x->ans.n_ev;
  if (has(x, AIR__MOCK_K_FIRST_DELAY) && x->beh.first_delay_ms > 0)
    arm(x, P_STREAM, x->beh.first_delay_ms);
  else
    step(x);
}

/* The whole chat answer into x->out. */
static int chat_body(xchg *x) {
  x->total = x->ans.n_ev;
  air__aggregate a;
  air__aggregate_init(&a);
  a.created = (uint64_t)time(NULL);
  air_part start = {.kind = AIR_PART_START,
                    .id = x->id,
                    .id_len = strlen(x->id),
                    .name = x->model,
                    .name_len = x->model_n};
  air_part fin = {.kind = AIR_PART_FINISH, .finish = x->ans.finish};
  air_part use = {.kind = AIR_PART_USAGE,
                  .input_tokens = x->in_tokens,
                  .output_tokens = x->total};
  int rc = air__aggregate_add(&a, &start);
  for (size_t i = 0; rc == 0 && i < x->ans.n_ev; i++) {
    air_part p = air__mock_answer_part(&x->ans, i);
    rc = air__aggregate_add(&a, &p);
  }
  if (rc == 0) rc = air__aggregate_add(&a, &fin);
  if (rc == 0) rc = air__aggregate_add(&a, &use);
  air__buf_reset(&x->out);
  if (rc == 0) rc = x->ops->encode_response(&a, &x->out);
  air__aggregate_cleanup(&a);
  return rc;
}

/* A whole (non-streaming) answer, or part of it for cut/stall: the chat
 * answer, or the embeddings / count_tokens body built at arrival. */
static void body(xchg *x) {
  int rc = 0;
  if (x->endpoint != NULL) {
    air__buf_reset(&x->out);
    rc = air__buf_add(&x->out, x->whole.p, x->whole.n);
  } else {
    rc = chat_body(x);
  }
  if (rc == 0 && has(x, AIR__MOCK_K_MALFORMED)) {
    x->out.n /= 2;
    rc = air__buf_add(&x->out, LIT("{\"broken"));
  }
  if (rc != 0) {
    respond_error(x, 500, "mock: cannot build the answer");
    return;
  }
  air__http_field f[MAX_FIELDS];
  size_t n = fields(x, f, "application/json");
  if (!has(x, AIR__MOCK_K_CUT) && !has(x, AIR__MOCK_K_STALL)) {
    rc = air__http_respond(x->req, 200, f, n, x->out.p, x->out.n);
    x->req = NULL;
    log_status(x, 200);
    log_end(x, rc == AIR_ECANCELED);
    done(x);
    return;
  }
  rc = air__http_begin(x->req, 200, f, n, (int64_t)x->out.n);
  if (rc != 0) {
    cut(x, rc == AIR_ECANCELED);
    return;
  }
  log_status(x, 200);
  x->out.n /= 2;
  if (flush(x) != 0) return;
  if (has(x, AIR__MOCK_K_CUT))
    cut(x, false);
  else
    x->phase = P_HOLD;
}

/* After headers_delay_ms: what the behaviour does first. */
static void head(xchg *x) {
  const air__mock_beh *b = &x->beh;
  if (has(x, AIR__MOCK_K_RESET) && b->reset) {
    air__http_reset(x->req);
    x->req = NULL;
    log_status(x, 0);
    log_end(x, false);
    done(x);
    return;
  }
  if (has(x, AIR__MOCK_K_HANG) && b->hang) {
    x->phase = P_HOLD;
    return;
  }
  if (has(x, AIR__MOCK_K_STATUS)) {
    respond_error(x, b->status, NULL);
    return;
  }
  if (!x->stream) {
    if (has(x, AIR__MOCK_K_OVERLOAD)) {
      respond_error(x, 529, NULL);
      return;
    }
    if (has(x, AIR__MOCK_K_FIRST_DELAY) && b->first_delay_ms > 0) {
      arm(x, P_BODY_WAIT, b->first_delay_ms);
      return;
    }
    body(x);
    return;
  }
  stream_begin(x);
}

static void on_timer(uv_timer_t *t) {
  xchg *x = t->data;
  switch (x->phase) {
    case P_HEAD_WAIT:
      head(x);
      break;
    case P_BODY_WAIT:
      body(x);
      break;
    case P_STREAM:
      step(x);
      break;
    default:
      break;
  }
}

/* ---- requests -------------------------------------------------------------
 */

/* A response of the mock itself (not an exchange). */
static void plain(air__http_req *req, int status, const char *ctype,
                  const char *extra_name, const char *extra_value,
                  const char *body, size_t n) {
  air__http_field f[2];
  size_t k = 0;
  if (ctype != NULL) k = add_field(f, k, "content-type", ctype);
  if (extra_name != NULL) k = add_field(f, k, extra_name, extra_value);
  air__http_respond(req, status, f, k, body, n);
}

static void plain_error(air__http_req *req, air_dialect api, int status,
                        const char *message, const char *allow) {
  air__buf b;
  air__buf_init(&b, 4096);
  int rc = air__mock_error_body(api, status, NULL, message, &b);
  plain(req, rc == 0 ? status : 500, "application/json", allow ? "allow" : NULL,
        allow, b.p, rc == 0 ? b.n : 0);
  air__buf_cleanup(&b);
}

/* A request the mock cannot count or keep (rc: AIR_ETOOBIG, too many model
 * names since the last reset; else out of memory): 503. */
static void uncounted(air__http_req *req, air_dialect api, int rc) {
  plain_error(req, api, 503,
              rc == AIR_ETOOBIG ? "mock: too many model names since the last "
                                  "reset (POST /__mock/reset)"
                                : "mock: out of memory",
              NULL);
}

/* The behaviour model of a model name: the script's entry, else the
 * convention over the script's defaults, else the defaults. */
static int choose_model(xchg *x, const air__mock_model **mm,
                        air__mock_diag *diag) {
  air__mock *m = x->m;
  *mm = air__mock_script_find(m->script, x->model, x->model_n);
  if (*mm != NULL) return 0;
  if (memchr(x->model, '@', x->model_n) == NULL) {
    *mm = &m->healthy;
    return 0;
  }
  x->storage = malloc(x->model_n + 1);
  if (x->storage == NULL) return AIR_ENOMEM;
  air__mock_model conv;
  int rc = air__mock_parse_name(x->model, x->model_n, x->storage, &conv, diag);
  if (rc != 0) return rc;
  x->conv = air__mock_model_merge(&m->healthy, &conv);
  *mm = &x->conv;
  return 0;
}

/* A new exchange for request r whose model (n bytes, no NUL) is copied. */
static xchg *xchg_new(air__mock *m, air__http_req *req, air_dialect api,
                      const air__request *r, size_t n) {
  xchg *x = calloc(1, sizeof(*x));
  char *model = x ? malloc(n + 1) : NULL;
  if (model == NULL) {
    free(x);
    return NULL;
  }
  memcpy(model, r->model, n);
  model[n] = '\0';
  x->m = m;
  x->req = req;
  x->api = api;
  x->ops = air__dialect_get(api);
  x->stream = r->stream;
  x->include_usage = r->include_usage;
  x->model = model;
  x->model_n = n;
  air__mock_answer_init(&x->ans);
  air__buf_init(&x->out, AIR__HTTP_DEFAULT_MAX_QUEUED_BYTES / 2);
  air__buf_init(&x->whole, AIR__MOCK_MAX_WHOLE_BYTES);
  uv_timer_init(m->loop, &x->timer);
  x->timer.data = x;
  x->next = m->live;
  if (m->live != NULL) m->live->prev = x;
  m->live = x;
  air__http_req_on_disconnect(req, on_gone, x);
  air__http_req_on_drain(req, on_drain, x);
  return x;
}

static void api_request(air__mock *m, air__http_req *req,
                        const air__http_request *msg, air_dialect api) {
  air__request r;
  air_error err = {0};
  if (air__request_parse(api, msg->body.p, msg->body.n, &r, &err) != 0) {
    plain_error(req, api, 400, err.message, NULL);
    return;
  }
  size_t model_n = strlen(r.model);
  if (model_n > AIR__MOCK_MAX_MODEL_BYTES ||
      memchr(r.model, '\0', model_n) != NULL) {
    air__request_cleanup(&r);
    plain_error(req, api, 400, "model: too long for the mock (or holds NUL)",
                NULL);
    return;
  }
  unsigned attempt = 0;
  int rc = air__mock_log_count(&m->log, r.model, model_n, &attempt);
  if (rc != 0) {
    air__request_cleanup(&r);
    uncounted(req, api, rc);
    return;
  }
  uint64_t t_ms = now_ms(m);
  xchg *x = xchg_new(m, req, api, &r, model_n);
  if (x == NULL) {
    air__request_cleanup(&r);
    plain_error(req, api, 500, "mock: out of memory", NULL);
    return;
  }
  x->in_tokens = msg->body.n / 4;
  snprintf(x->id, sizeof(x->id), "mock-%llu", (unsigned long long)++m->seq);

  air__mock_diag diag = {0};
  const air__mock_model *mm = NULL;
  int bad = choose_model(x, &mm, &diag);
  const char *fault_word = NULL;
  const char *message = NULL;
  int status = 400;
  air__mock_cont cont;
  air__mock_cont_init(&cont);
  air__buf fault;
  air__buf_init(&fault, 1024);
  if (bad != 0) {
    fault_word = "bad_model_name";
    message = bad == AIR_EINVAL ? diag.message : "mock: out of memory";
    status = bad == AIR_EINVAL ? 400 : 500;
  } else {
    air__mock_select(mm, attempt, t_ms, &x->beh);
    /* The codec validated the body; the mock reads it with its own parser
     * (the codec's interface carries no JSON library type). */
    json_t *body = json_loadb(msg->body.p, msg->body.n, 0, NULL);
    /* An unreadable or too long assistant text is no continuation. */
    if (air__mock_read_continuation(body, api, &cont) != 0)
      cont.style = AIR__MOCK_STYLE_NONE;
    bool instruct = cont.style == AIR__MOCK_STYLE_INSTRUCT;
    bool asked = cont.style != AIR__MOCK_STYLE_NONE;
    rc = air__mock_answer_build(&x->ans, x->model, x->model_n, &x->beh,
                                asked ? cont.text.p : NULL,
                                asked ? cont.text.n : 0, instruct, body);
    /* instruct is only a continuation when the text fits the answer. */
    if (instruct && !x->ans.prefill) cont.style = AIR__MOCK_STYLE_NONE;
    if (rc == 0) rc = air__mock_answer_events(&x->ans, &x->beh, api);
    json_decref(body);
    if (rc != 0) {
      fault_word = "error";
      message = "mock: cannot build the answer";
      status = 500;
    } else if (asked && !instruct &&
               (x->beh.set & AIR__MOCK_K_REJECT_PREFILL) &&
               x->beh.reject_prefill) {
      fault_word = "reject_prefill";
      message = AIR__MOCK_PREFILL_REJECTED;
    }
  }
  rc = fault_word ? air__buf_adds(&fault, fault_word)
                  : air__mock_describe(&x->beh, &fault);
  if (rc == 0 && fault_word == NULL && x->ans.prefill &&
      x->ans.cont_as != AIR__MOCK_CONT_EXACT) {
    if (strcmp(fault.p, "ok") == 0)
      air__buf_reset(&fault);
    else
      rc = air__buf_addc(&fault, ',');
    if (rc == 0) rc = air__buf_adds(&fault, "continue_as=");
    if (rc == 0)
      rc = air__buf_adds(&fault, air__mock_cont_as_name(x->ans.cont_as));
  }
  air__mock_entry *e =
      air__mock_log_add(&m->log, t_ms, x->model, x->model_n, attempt, api,
                        x->stream, rc == 0 ? fault.p : "?");
  x->log_id = e ? e->id : 0;
  const air__str *tp = air__http_find_header(msg, "traceparent");
  if (e != NULL && tp != NULL && tp->n < sizeof(e->traceparent)) {
    memcpy(e->traceparent, tp->p, tp->n);
    e->traceparent[tp->n] = '\0';
  }
  if (e != NULL)
    air__mock_log_continuation(
        e, air__mock_style_name(cont.style),
        x->ans.prefill && fault_word == NULL, cont.text.n,
        cont.style == AIR__MOCK_STYLE_INSTRUCT ? &cont.message : NULL,
        cont.has_max_tokens, cont.max_tokens);
  air__mock_cont_cleanup(&cont);
  air__buf_cleanup(&fault);
  air__request_cleanup(&r);
  if (message != NULL) {
    air__mock_beh none = {0};
    x->beh = none;
    respond_error(x, status, message);
    return;
  }
  if (has(x, AIR__MOCK_K_HEADERS_DELAY) && x->beh.headers_delay_ms > 0)
    arm(x, P_HEAD_WAIT, x->beh.headers_delay_ms);
  else
    head(x);
}

/*
 * POST /v1/embeddings (OpenAI) and /v1/messages/count_tokens (Anthropic):
 * the answer body is built from the request at once (a bad request is 400
 * in the dialect, neither counted nor logged), then the attempt's behaviour
 * chooses what is sent, as for a non-streaming chat request.
 */
static void whole_request(air__mock *m, air__http_req *req,
                          const air__http_request *msg, air_dialect api,
                          const char *endpoint) {
  json_error_t jerr;
  json_t *doc =
      json_loadb(msg->body.p ? msg->body.p : "", msg->body.n, 0, &jerr);
  const json_t *model = json_object_get(doc, "model");
  const char *bad = NULL;
  if (!json_is_object(doc))
    bad = "the body is not a JSON object";
  else if (!json_is_string(model) || json_string_length(model) == 0)
    bad = "model: expected a non-empty string";
  else if (json_string_length(model) > AIR__MOCK_MAX_MODEL_BYTES ||
           memchr(json_string_value(model), '\0', json_string_length(model)))
    bad = "model: too long for the mock (or holds NUL)";
  if (bad != NULL) {
    json_decref(doc);
    plain_error(req, api, 400, bad, NULL);
    return;
  }
  const char *name = json_string_value(model);
  size_t model_n = json_string_length(model);
  air__buf whole;
  air__buf_init(&whole, AIR__MOCK_MAX_WHOLE_BYTES);
  const char *err = NULL;
  int rc = api == AIR_DIALECT_OPENAI
               ? air__mock_embeddings(doc, name, model_n, &whole, &err)
               : air__mock_count_tokens(doc, &whole, &err);
  if (rc != 0) {
    json_decref(doc);
    air__buf_cleanup(&whole);
    plain_error(req, api, 400, err ? err : "mock: bad request", NULL);
    return;
  }
  unsigned attempt = 0;
  rc = air__mock_log_count(&m->log, name, model_n, &attempt);
  air__request stub = {.dialect = api, .model = name};
  xchg *x = rc == 0 ? xchg_new(m, req, api, &stub, model_n) : NULL;
  json_decref(doc);
  if (x == NULL) {
    air__buf_cleanup(&whole);
    uncounted(req, api, rc);
    return;
  }
  air__buf_cleanup(&x->whole);
  x->whole = whole;
  x->endpoint = endpoint;
  snprintf(x->id, sizeof(x->id), "mock-%llu", (unsigned long long)++m->seq);
  uint64_t t_ms = now_ms(m);
  air__mock_diag diag = {0};
  const air__mock_model *mm = NULL;
  int badname = choose_model(x, &mm, &diag);
  air__buf fault;
  air__buf_init(&fault, 1024);
  if (badname == 0) {
    air__mock_select(mm, attempt, t_ms, &x->beh);
    rc = air__mock_describe(&x->beh, &fault);
  } else {
    rc = air__buf_adds(&fault, "bad_model_name");
  }
  air__mock_entry *e =
      air__mock_log_add(&m->log, t_ms, x->model, x->model_n, attempt, api,
                        false, rc == 0 ? fault.p : "?");
  if (e != NULL) e->endpoint = endpoint;
  x->log_id = e ? e->id : 0;
  air__buf_cleanup(&fault);
  if (badname != 0) {
    air__mock_beh none = {0};
    x->beh = none;
    respond_error(x, badname == AIR_EINVAL ? 400 : 500,
                  badname == AIR_EINVAL ? diag.message : "mock: out of memory");
    return;
  }
  if (has(x, AIR__MOCK_K_HEADERS_DELAY) && x->beh.headers_delay_ms > 0)
    arm(x, P_HEAD_WAIT, x->beh.headers_delay_ms);
  else
    head(x);
}

static bool path_is(const air__http_request *msg, const char *p) {
  return msg->path.n == strlen(p) && memcmp(msg->path.p, p, msg->path.n) == 0;
}

static bool method_is(const air__http_request *msg, const char *m) {
  return air__http_str_eq(msg->method, m);
}

/*
 * GET /v1/responses/{id}: the mock stores nothing, but a retrieval of an
 * id that starts with "resp_" answers a completed response with that id,
 * one output_text "[retrieved {id}]" and the query string as metadata.q
 * (what the gateway forwarded); any other id is 404.
 */
static void retrieve(air__http_req *req, const air__http_request *msg,
                     bool get) {
  const air_dialect api = AIR_DIALECT_OPENAI_RESPONSES;
  if (!get) {
    plain_error(req, api, 405, "use GET", "GET, HEAD");
    return;
  }
  const char *id = msg->path.p + 14;
  int id_n = (int)(msg->path.n - 14);
  if (id_n < 5 || memcmp(id, "resp_", 5) != 0) {
    plain_error(req, api, 404, "mock: no such response", NULL);
    return;
  }
  char text[320];
  snprintf(text, sizeof(text), "[retrieved %.*s]", id_n > 256 ? 256 : id_n, id);
  json_t *body = json_pack(
      "{s:s#, s:s, s:i, s:s, s:s, s:[{s:s, s:s, s:s, s:s, s:[{s:s, s:s, "
      "s:[]}]}], s:{s:s#}, s:{s:i, s:i, s:i}}",
      "id", id, (size_t)id_n, "object", "response", "created_at", 0, "status",
      "completed", "model", "mock", "output", "type", "message", "id",
      "msg_retrieved", "role", "assistant", "status", "completed", "content",
      "type", "output_text", "text", text, "annotations", "metadata", "q",
      msg->query.p ? msg->query.p : "", msg->query.n, "usage", "input_tokens",
      1, "output_tokens", 1, "total_tokens", 2);
  char *t = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
  json_decref(body);
  if (t == NULL) {
    plain_error(req, api, 500, "mock: out of memory", NULL);
    return;
  }
  plain(req, 200, "application/json", NULL, NULL, t, strlen(t));
  free(t);
}

static void on_request(void *data, air__http_req *req,
                       const air__http_request *msg) {
  air__mock *m = data;
  bool get = method_is(msg, "GET") || method_is(msg, "HEAD");
  bool post = method_is(msg, "POST");
  if (m->stopping) {
    plain_error(req, AIR_DIALECT_OPENAI, 503, "mock: stopping", NULL);
  } else if (path_is(msg, "/v1/chat/completions") ||
             path_is(msg, "/v1/messages") || path_is(msg, "/v1/responses")) {
    air_dialect api = path_is(msg, "/v1/messages") ? AIR_DIALECT_ANTHROPIC
                      : path_is(msg, "/v1/responses")
                          ? AIR_DIALECT_OPENAI_RESPONSES
                          : AIR_DIALECT_OPENAI;
    if (post)
      api_request(m, req, msg, api);
    else
      plain_error(req, api, 405, "use POST", "POST");
  } else if (path_is(msg, "/v1/embeddings") ||
             path_is(msg, "/v1/messages/count_tokens")) {
    bool emb = path_is(msg, "/v1/embeddings");
    air_dialect api = emb ? AIR_DIALECT_OPENAI : AIR_DIALECT_ANTHROPIC;
    if (post)
      whole_request(m, req, msg, api, emb ? "embeddings" : "count_tokens");
    else
      plain_error(req, api, 405, "use POST", "POST");
  } else if (msg->path.n > 14 &&
             memcmp(msg->path.p, "/v1/responses/", 14) == 0) {
    retrieve(req, msg, get);
  } else if (path_is(msg, "/__mock/log")) {
    if (!get) {
      plain_error(req, AIR_DIALECT_OPENAI, 405, "use GET", "GET, HEAD");
      return;
    }
    air__buf b;
    air__buf_init(&b, LOG_JSON_MAX);
    if (air__mock_log_json(&m->log, &b) == 0)
      plain(req, 200, "application/json", NULL, NULL, b.p, b.n);
    else
      plain_error(req, AIR_DIALECT_OPENAI, 500, "mock: the log is too large",
                  NULL);
    air__buf_cleanup(&b);
  } else if (path_is(msg, "/__mock/reset")) {
    if (!post) {
      plain_error(req, AIR_DIALECT_OPENAI, 405, "use POST", "POST");
      return;
    }
    air__mock_log_reset(&m->log);
    m->epoch_ns = uv_hrtime();
    m->seq = 0;
    plain(req, 204, NULL, NULL, NULL, NULL, 0);
  } else if (path_is(msg, "/healthz")) {
    if (get)
      plain(req, 200, "text/plain", NULL, NULL, "ok", 2);
    else
      plain_error(req, AIR_DIALECT_OPENAI, 405, "use GET", "GET, HEAD");
  } else {
    plain_error(req, AIR_DIALECT_OPENAI, 404, "mock: no such endpoint", NULL);
  }
}

/* ---- lifecycle ----------------------------------------------------------- */

/* The HTTP server's own errors (a malformed request, a limit): in the
 * Anthropic shape for a target under /v1/messages, as a real Anthropic
 * upstream answers (air__http_error_body_cb). */
static bool error_body(void *data, air__str target, int status,
                       const char *message, air__buf *out) {
  (void)data;
  if (target.n < 12 || memcmp(target.p, "/v1/messages", 12) != 0) return false;
  (void)air__mock_error_body(AIR_DIALECT_ANTHROPIC, status, NULL, message, out);
  return true;
}

int air__mock_start(uv_loop_t *loop, const air__mock_config *cfg,
                    air__mock **out, int *uv_err) {
  *out = NULL;
  air__mock *m = calloc(1, sizeof(*m));
  if (m == NULL) return AIR_ENOMEM;
  m->loop = loop;
  m->script = cfg->script;
  m->healthy.base.finish = m->healthy.then.finish = m->healthy.fault.finish =
      AIR_FINISH_STOP;
  if (cfg->script != NULL) m->healthy = cfg->script->defaults;
  air__mock_log_init(&m->log);
  m->epoch_ns = uv_hrtime();
  air__http_config hc;
  air__http_config_init(&hc);
  hc.host = cfg->host;
  hc.port = cfg->port;
  hc.shutdown_timeout_ms = SHUTDOWN_MS;
  hc.error_body = error_body;
  int rc = air__http_server_new(loop, &hc, on_request, m, &m->srv);
  if (rc == 0) rc = air__http_server_listen(m->srv, uv_err);
  if (rc != 0) {
    air__http_server_free(m->srv);
    air__mock_log_cleanup(&m->log);
    free(m);
    return rc;
  }
  *out = m;
  return 0;
}

int air__mock_port(const air__mock *m) {
  return air__http_server_port(m->srv);
}

static void server_stopped(void *data) {
  air__mock *m = data;
  if (m->on_stopped != NULL) m->on_stopped(m->stopped_data);
}

void air__mock_stop(air__mock *m, void (*on_stopped)(void *data), void *data) {
  if (m->stopping) return;
  m->stopping = true;
  m->on_stopped = on_stopped;
  m->stopped_data = data;
  while (m->live != NULL) cut(m->live, false);
  air__http_server_stop(m->srv, server_stopped, m);
}

void air__mock_free(air__mock *m) {
  if (m == NULL) return;
  air__http_server_free(m->srv);
  air__mock_log_cleanup(&m->log);
  free(m);
}
