/*
 * The endpoints without a stream (docs/design.md §2.3 and 5): POST
 * /v1/embeddings (OpenAI dialect) and POST /v1/messages/count_tokens
 * (Anthropic) through the plain exchange (net/plain.h).
 *
 * - The body must be a JSON object with a non-empty string "model" (and
 *   "input" for embeddings, an array "messages" for count_tokens), else 400
 *   in the endpoint's dialect. The model routes like chat.
 * - embeddings: targets must be OpenAI providers (others are skipped; a
 *   route with none answers 400 naming the reason and its targets); the
 *   breaker records verdicts as for chat.
 * - count_tokens: targets must be Anthropic providers; the breaker is read
 *   only (plain.h, `record`).
 * - A success passes the upstream's status and JSON body through unchanged,
 *   with x-airetry-attempts, x-airetry-target, x-request-id and, for
 *   count_tokens, request-id (the upstream's, else the request id). A
 *   failure is the responder's error body and headers, as for chat.
 * - GET /v1/responses/{id} (docs/design.md §5): forwarded, without a body, to
 *   the first openai_responses provider of the config (the only place a
 *   stored response can live; no retries across providers), its answer
 *   passed through; 404 when the config has none. The id is letters,
 *   digits, '_' and '-' (else 400); the query string is forwarded when it
 *   is URL-safe, and a streamed retrieval (a `stream` parameter, read
 *   percent-decoded, other than false or 0) is 400: this endpoint answers
 *   whole. The breaker is read only.
 * - One log line per request (with "endpoint") and the chat metrics.
 *
 * Lifetime: a gw_plain lives from the handler until on_end finished the
 * HTTP request (never inside air__plain_start: a failure at once is
 * delivered on a later loop turn).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <jansson.h>

#include "endpoint.h"
#include "limits.h"
#include "plain.h"
#include "responder.h"

typedef struct gw_plain {
  air__gw_worker *w;
  air__gw_cfg *cfg;
  air__http_req *req;
  air_dialect dialect;
  const char *path; /* the caller's endpoint, for the log */
  air__plain *x;
  air__request stub; /* what the responder reads: dialect, model */
  char *model;
  char *upath; /* GET: the upstream path (owned) */
  bool ended, gone;
  int inflight;
  char rid[40];
  air__gw_forward fwd;
} gw_plain;

static void finish(gw_plain *r) {
  air__gw_inflight_end(r->w, r->inflight);
  air__gw_forward_cleanup(&r->fwd);
  air__gw_cfg_release(r->cfg);
  free(r->model);
  free(r->upath);
  free(r);
}

static void log_line(const gw_plain *r, const air__exchange_result *res,
                     int status, const char *outcome) {
  air__gw_line l;
  air__gw_line_begin(&l, r->rid);
  air__buf_puts(&l.b, ",\"route\":");
  air__buf_put_json_str(&l.b, r->model, strlen(r->model));
  air__gw_line_api(&l, r->dialect);
  air__buf_puts(&l.b, ",\"endpoint\":");
  air__buf_put_json_str(&l.b, r->path, strlen(r->path));
  air__buf_puts(&l.b, ",\"stream\":false");
  air__gw_line_attempts(&l, res->log, res->n_log);
  air__gw_line_outcome(&l, outcome, status);
  air__buf_puts(&l.b, ",\"total_ms\":");
  air__buf_putu(&l.b, res->total_ms);
  air__gw_line_end(&l, res->n_log, outcome, status);
}

/* The upstream's request-id header (an Anthropic upstream's), or NULL. */
static const air_header *upstream_rid(const air__plain_result *res) {
  for (size_t i = 0; i < res->n_headers; i++) {
    const air_header *h = &res->headers[i];
    if (h->name_len == 10 && strncasecmp(h->name, "request-id", 10) == 0)
      return h;
  }
  return NULL;
}

static void on_end(void *data, const air__plain_result *res) {
  gw_plain *r = data;
  r->ended = true;
  int status;
  const char *outcome;
  if (r->gone || res->x.rc == AIR_ECANCELED) {
    status = 499;
    outcome = "aborted";
    air__http_abort(r->req);
  } else if (res->x.rc == 0) {
    status = res->status;
    outcome = "ok";
    char attempts[16], urid[128];
    snprintf(attempts, sizeof(attempts), "%u", res->x.n_attempts);
    air__http_field f[6];
    size_t n = 0;
    f[n++] = air__gw_field("content-type", "application/json");
    f[n++] = air__gw_field("x-airetry-attempts", attempts);
    /* Left out when the name holds CR or LF (a direct name a caller chose):
     * the answer still goes. */
    if (res->x.answered == NULL || strpbrk(res->x.answered, "\r\n") == NULL)
      f[n++] = air__gw_field("x-airetry-target", res->x.answered);
    f[n++] = air__gw_field("x-request-id", r->rid);
    if (r->dialect == AIR_DIALECT_ANTHROPIC) {
      const air_header *h = upstream_rid(res);
      if (h != NULL && h->value_len < sizeof(urid)) {
        memcpy(urid, h->value, h->value_len);
        urid[h->value_len] = '\0';
        f[n++] = air__gw_field("request-id", urid);
      } else {
        f[n++] = air__gw_field("request-id", r->rid);
      }
    }
    air__http_respond(r->req, status, f, n, res->body, res->body_len);
  } else {
    air__responder rs;
    air__responder_init(&rs, r->dialect, &r->stub, r->rid);
    air__responder_end(&rs, &res->x, (uint64_t)time(NULL));
    status = rs.status;
    outcome = rs.outcome;
    air__http_field f[AIR__RESP_MAX_HEADERS];
    for (size_t i = 0; i < rs.n_head; i++)
      f[i] = air__gw_field(rs.head[i].name, rs.head[i].value);
    air__http_respond(r->req, rs.status, f, rs.n_head, rs.out.p ? rs.out.p : "",
                      rs.out.n);
    air__responder_cleanup(&rs);
  }
  uint64_t self = res->x.total_ms > res->x.upstream_wait_ms
                      ? res->x.total_ms - res->x.upstream_wait_ms
                      : 0;
  air__metrics_request(r->w->g->metrics, r->cfg->cfg, r->model, outcome,
                       res->x.log, res->x.n_log, res->x.first_content_ms,
                       res->x.total_ms, self, 0);
  log_line(r, &res->x, status, outcome);
  air__plain_free(r->x);
  r->x = NULL;
  finish(r);
}

static void on_disconnect(void *data, air__http_req *req) {
  gw_plain *r = data;
  (void)req;
  r->gone = true;
  if (r->x != NULL && !r->ended) air__plain_cancel(r->x);
}

/* The 400 message for a body the endpoint cannot take, or NULL. *model is
 * set (a copy) when the body is good. */
static const char *check_body(const air__http_request *msg, bool emb,
                              char **model) {
  json_error_t je;
  json_t *d = json_loadb(msg->body.p ? msg->body.p : "", msg->body.n, 0, &je);
  const json_t *m = json_object_get(d, "model");
  const char *bad = NULL;
  if (!json_is_object(d))
    bad = "the body is not a JSON object";
  else if (!json_is_string(m) || json_string_length(m) == 0)
    bad = "model: expected a non-empty string";
  else if (json_string_length(m) > AIR__MAX_MODEL_VALUE_BYTES ||
           memchr(json_string_value(m), '\0', json_string_length(m)))
    bad = "model: too long, or holds NUL";
  else if (emb && !json_is_string(json_object_get(d, "input")) &&
           !json_is_array(json_object_get(d, "input")))
    bad = "input: expected a string or an array";
  else if (!emb && !json_is_array(json_object_get(d, "messages")))
    bad = "messages: expected an array";
  if (bad == NULL) {
    *model = strdup(json_string_value(m));
    if (*model == NULL) bad = "out of memory";
  }
  json_decref(d);
  return bad;
}

/* Starts the plain exchange for a checked request (model and upath are
 * taken over; upath NULL: the endpoint's fixed path). */
static void start(air__gw_worker *w, air__http_req *req,
                  const air__http_request *msg, air_dialect dialect,
                  air__gw_cfg *cfg, const char *rid, char *model,
                  const char *endpoint, const char *path, char *upath) {
  gw_plain *r = calloc(1, sizeof(*r));
  if (r == NULL) {
    free(model);
    free(upath);
    air__gw_cfg_release(cfg);
    air__gw_respond_error(req, dialect, 503, AIR_REASON_OVERLOADED,
                          "out of memory", rid);
    return;
  }
  bool get = upath != NULL;
  r->w = w;
  r->cfg = cfg;
  r->req = req;
  r->dialect = dialect;
  r->model = model;
  r->upath = upath;
  r->path = endpoint;
  r->stub.dialect = dialect;
  r->stub.model = model;
  snprintf(r->rid, sizeof(r->rid), "%s", rid);
  r->inflight = air__gw_inflight_begin(w, r->rid);
  air__gw_forward_init(&r->fwd);
  air__gw_forward_collect(&r->fwd, cfg->cfg, msg);
  air__plain_opts o = {
      .cfg = cfg->cfg,
      .state = w->g->state,
      .model = model,
      .api = dialect,
      .endpoint = r->path,
      .path = get ? upath : path,
      .body = get ? NULL : msg->body.p,
      .body_len = get ? 0 : msg->body.n,
      .get = get,
      .forward = r->fwd.lines,
      .record = dialect == AIR_DIALECT_OPENAI,
  };
  air__plain_cb cb = {NULL, on_end, r};
  air__http_req_on_disconnect(req, on_disconnect, r);
  int rc = air__plain_start(&w->loop, w->t, &o, &cb, &r->x);
  if (rc != 0) {
    air__gw_respond_start_error(req, dialect, rc, model, r->rid);
    finish(r);
  }
}

void air__gw_plain(air__gw_worker *w, air__http_req *req,
                   const air__http_request *msg, air_dialect dialect,
                   air__gw_cfg *cfg, const char *rid) {
  bool emb = dialect == AIR_DIALECT_OPENAI;
  char *model = NULL;
  const char *bad = check_body(msg, emb, &model);
  if (bad != NULL) {
    air__gw_respond_error(req, dialect, 400, AIR_REASON_BAD_REQUEST, bad, rid);
    air__gw_cfg_release(cfg);
    return;
  }
  start(w, req, msg, dialect, cfg, rid, model,
        emb ? "/v1/embeddings" : "/v1/messages/count_tokens",
        emb ? "/embeddings" : "/v1/messages/count_tokens", NULL);
}

static bool id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '-';
}

static bool query_char(char c) {
  return id_char(c) || strchr(".~%&=[]+", c) != NULL;
}

static int hex_val(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Percent-decodes s ('+' is a space, as forms encode it) into out (room
 * for s.n bytes); its length, or -1 for a '%' without two hex digits. */
static long url_decode(air__str s, char *out) {
  size_t o = 0;
  for (size_t i = 0; i < s.n; i++) {
    char c = s.p[i];
    if (c == '%') {
      if (i + 2 >= s.n || hex_val(s.p[i + 1]) < 0 || hex_val(s.p[i + 2]) < 0)
        return -1;
      c = (char)(hex_val(s.p[i + 1]) * 16 + hex_val(s.p[i + 2]));
      i += 2;
    } else if (c == '+') {
      c = ' ';
    }
    out[o++] = c;
  }
  return (long)o;
}

/*
 * Whether the query asks for a stream, read as the upstream reads it:
 * each name and value percent-decoded first, so "stream=%74rue" is
 * "stream=true". Any stream value but false, 0 or empty counts (the
 * upstream may read more spellings as true than these). -1: a bad
 * percent-encoding.
 */
static int query_streams(air__str q) {
  char name[AIR__MAX_RESPONSE_ID_BYTES], value[AIR__MAX_RESPONSE_ID_BYTES];
  size_t i = 0;
  while (i < q.n) {
    size_t end = i;
    while (end < q.n && q.p[end] != '&') end++;
    size_t eq = i;
    while (eq < end && q.p[eq] != '=') eq++;
    air__str n = {q.p + i, eq - i};
    air__str v = {q.p + (eq < end ? eq + 1 : end), eq < end ? end - eq - 1 : 0};
    long nn = url_decode(n, name), vn = url_decode(v, value);
    if (nn < 0 || vn < 0) return -1;
    if (nn == 6 && memcmp(name, "stream", 6) == 0 && vn > 0 &&
        !(vn == 5 && strncasecmp(value, "false", 5) == 0) &&
        !(vn == 1 && value[0] == '0'))
      return 1;
    i = end + 1;
  }
  return 0;
}

/* The 400 message for a retrieval the gateway cannot forward, or NULL. */
static const char *check_retrieve(air__str id, air__str q) {
  if (id.n == 0 || id.n > AIR__MAX_RESPONSE_ID_BYTES)
    return "id: empty, or longer than the gateway takes";
  for (size_t i = 0; i < id.n; i++)
    if (!id_char(id.p[i])) return "id: expected letters, digits, _ and -";
  if (q.n > AIR__MAX_RESPONSE_ID_BYTES) return "query: too long";
  for (size_t i = 0; i < q.n; i++)
    if (!query_char(q.p[i])) return "query: unexpected characters";
  int streams = query_streams(q);
  if (streams < 0) return "query: a '%' without two hex digits";
  if (streams > 0)
    return "stream: a retrieval is answered whole by this gateway";
  return NULL;
}

void air__gw_plain_retrieve(air__gw_worker *w, air__http_req *req,
                            const air__http_request *msg, air__gw_cfg *cfg,
                            const char *rid) {
  const air_dialect d = AIR_DIALECT_OPENAI_RESPONSES;
  const air_config *c = cfg->cfg;
  const air__provider *pv = NULL;
  for (size_t i = 0; i < c->n_providers && pv == NULL; i++)
    if (c->providers[i].api == d) pv = &c->providers[i];
  if (pv == NULL) {
    air__gw_respond_error(req, d, 404, AIR_REASON_NOT_FOUND,
                          "no openai_responses provider to ask: this "
                          "gateway stores no responses (it serves the "
                          "Responses API statelessly)",
                          rid);
    air__gw_cfg_release(cfg);
    return;
  }
  static const char prefix[] = "/v1/responses/";
  air__str id = {msg->path.p + sizeof(prefix) - 1,
                 msg->path.n - (sizeof(prefix) - 1)};
  const char *bad = check_retrieve(id, msg->query);
  char *model = NULL;
  char *upath = NULL;
  if (bad == NULL) {
    size_t mn = strlen(pv->name) + sizeof("/retrieve");
    size_t un = sizeof("/responses/") + id.n + 1 + msg->query.n;
    model = malloc(mn);
    upath = malloc(un);
    if (model == NULL || upath == NULL) {
      free(model);
      free(upath);
      air__gw_respond_error(req, d, 503, AIR_REASON_OVERLOADED, "out of memory",
                            rid);
      air__gw_cfg_release(cfg);
      return;
    } else {
      snprintf(model, mn, "%s/retrieve", pv->name);
      snprintf(upath, un, "/responses/%.*s%s%.*s", (int)id.n, id.p,
               msg->query.n > 0 ? "?" : "", (int)msg->query.n,
               msg->query.n > 0 ? msg->query.p : "");
    }
  }
  if (bad != NULL) {
    free(model);
    free(upath);
    air__gw_respond_error(req, d, 400, AIR_REASON_BAD_REQUEST, bad, rid);
    air__gw_cfg_release(cfg);
    return;
  }
  start(w, req, msg, d, cfg, rid, model, "/v1/responses/{id}", NULL, upath);
}
