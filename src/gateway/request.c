/*
 * Routing and client auth (docs/design.md §5): each request goes, by path
 * and method, to its endpoint (endpoint.h) once the caller's key checks
 * out; a request no endpoint takes is answered here, in the dialect of the
 * path's endpoints, with its log line. The head hook checks the key and
 * refuses a body nothing would read before the body is read.
 */
#include <stdio.h>
#include <string.h>

#include <strings.h>

#include "endpoint.h"
#include "limits.h"

/* Constant-time comparison of a presented key with every accepted key. */
static bool key_ok(const air__gw_cfg *c, const char *k, size_t n) {
  bool ok = false;
  for (size_t i = 0; i < c->n_keys; i++) {
    const char *want = c->keys[i];
    size_t wn = strlen(want);
    unsigned char diff = (unsigned char)(wn != n);
    for (size_t j = 0; j < wn; j++)
      diff |= (unsigned char)(want[j] ^ (j < n ? k[j] : 0));
    ok |= diff == 0;
  }
  return ok;
}

static bool authorized(const air__gw_cfg *c, const air__http_request *msg) {
  if (!c->auth) return true;
  if (c->n_keys == 0) return false;
  const air__str *h = air__http_find_header(msg, "authorization");
  if (h != NULL && h->n > 7 && strncasecmp(h->p, "Bearer ", 7) == 0)
    return key_ok(c, h->p + 7, h->n - 7);
  h = air__http_find_header(msg, "x-api-key");
  return h != NULL && key_ok(c, h->p, h->n);
}

/* The request id: the caller's x-request-id when it is 1 to 39 letters,
 * digits, '-' or '_' (so headers and log lines take it as it is), else a
 * new one. */
static void make_rid(air__gw_worker *w, const air__http_request *msg, char *out,
                     size_t n) {
  const air__str *h = air__http_find_header(msg, "x-request-id");
  if (h != NULL && h->n > 0 && h->n < 40) {
    bool ok = true;
    for (size_t i = 0; i < h->n && ok; i++) {
      char c = h->p[i];
      ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '-' || c == '_';
    }
    if (ok) {
      memcpy(out, h->p, h->n);
      out[h->n] = '\0';
      return;
    }
  }
  uint64_t v = w->seed + 0x9e3779b97f4a7c15ull * ++w->seq;
  v ^= v >> 29;
  snprintf(out, n, "req_%016llx", (unsigned long long)v);
}

/* 405 with the Allow header RFC 9110 asks for. */
static void method_not_allowed(air__http_req *req, air_dialect dialect,
                               const char *allow, const char *rid) {
  char m[64];
  snprintf(m, sizeof(m), "method not allowed: use %s", allow);
  air__buf body;
  air__http_field f[2 + AIR__GW_ERROR_FIELDS] = {air__gw_json_ct,
                                                 air__gw_field("allow", allow)};
  size_t n =
      2 + air__gw_error_parts(air__http_req_msg(req), dialect, 405,
                              AIR_REASON_BAD_REQUEST, m, rid, &body, f + 2);
  air__http_respond(req, 405, f, n, body.p, body.n);
  air__buf_cleanup(&body);
}

#define AUTH_MESSAGE \
  "invalid or missing API key (Authorization: Bearer, x-api-key)"

static bool is_healthz(air__str p) {
  return p.n == 8 && memcmp(p.p, "/healthz", 8) == 0;
}

/* The dialect of an endpoint's error answers. */
static air_dialect path_dialect(air__str p) {
  bool is_msgs =
      (p.n == 12 && memcmp(p.p, "/v1/messages", 12) == 0) ||
      (p.n == 25 && memcmp(p.p, "/v1/messages/count_tokens", 25) == 0);
  bool is_rsp = p.n >= 13 && memcmp(p.p, "/v1/responses", 13) == 0 &&
                (p.n == 13 || p.p[13] == '/');
  return is_msgs  ? AIR_DIALECT_ANTHROPIC
         : is_rsp ? AIR_DIALECT_OPENAI_RESPONSES
                  : AIR_DIALECT_OPENAI;
}

/* The methods of an endpoint that takes no request body ("" for a path
 * that is no endpoint), or NULL for one that takes a body. */
static const char *bodiless_allow(air__str p) {
  if (is_healthz(p) || (p.n == 10 && memcmp(p.p, "/v1/models", 10) == 0) ||
      (p.n == 8 && memcmp(p.p, "/metrics", 8) == 0))
    return "GET, HEAD";
  if (p.n > 14 && memcmp(p.p, "/v1/responses/", 14) == 0) return "GET";
  if ((p.n == 20 && memcmp(p.p, "/v1/chat/completions", 20) == 0) ||
      (p.n == 12 && memcmp(p.p, "/v1/messages", 12) == 0) ||
      (p.n == 13 && memcmp(p.p, "/v1/responses", 13) == 0) ||
      (p.n == 14 && memcmp(p.p, "/v1/embeddings", 14) == 0) ||
      (p.n == 25 && memcmp(p.p, "/v1/messages/count_tokens", 25) == 0))
    return NULL;
  return "";
}

/* Answers the request from the head hook (connection: close, its body
 * never read), in the endpoint's dialect, with its log line. allow: the
 * Allow header of a 405, else NULL. */
static void head_refuse(air__gw_worker *w, air__http_head *h,
                        const air__http_request *msg, int status,
                        air_reason reason, const char *message,
                        const char *allow) {
  air_dialect dialect = path_dialect(msg->path);
  char rid[40];
  make_rid(w, msg, rid, sizeof(rid));
  air__buf body;
  air__http_field f[2 + AIR__GW_ERROR_FIELDS] = {air__gw_json_ct};
  size_t n = 1 + air__gw_error_parts(msg, dialect, status, reason, message, rid,
                                     &body, f + 1);
  if (allow != NULL) f[n++] = air__gw_field("allow", allow);
  air__http_head_reject(h, status, f, n, body.p ? body.p : "", body.n);
  air__buf_cleanup(&body);
}

/* The error-body hook of every worker's server (docs/design.md §8: a
 * limit's error in the caller's dialect). A target under /v1/messages,
 * the Anthropic endpoints, gets Anthropic's error shape; so does one that
 * only begins so (a query, a longer path, a head cut short), since the
 * server may answer before the target is whole. Any other target gets the
 * server's own shape, OpenAI's. */
bool air__gw_error_body(void *data, air__str target, int status,
                        const char *message, air__buf *out) {
  (void)data;
  if (target.n < 12 || memcmp(target.p, "/v1/messages", 12) != 0) return false;
  const char *type = status == 413   ? "request_too_large"
                     : status == 503 ? "overloaded_error"
                     : status >= 500 ? "api_error"
                                     : "invalid_request_error";
  air__buf_puts(out, "{\"type\":\"error\",\"error\":{\"type\":\"");
  air__buf_puts(out, type);
  air__buf_puts(out, "\",\"message\":");
  air__buf_put_json_str(out, message, strlen(message));
  air__buf_puts(out, "}}");
  return true;
}

/* A request with a body to an endpoint that takes none: refused before its
 * body is read or counted against max_inflight_body_bytes (404 for no
 * endpoint, 405 for a method it does not take, else 400). */
static void refuse_body(air__gw_worker *w, air__http_head *h,
                        const air__http_request *msg, const char *allow) {
  if (*allow == '\0') {
    head_refuse(w, h, msg, 404, AIR_REASON_NOT_FOUND, "no such endpoint", NULL);
    return;
  }
  bool get = air__http_str_eq(msg->method, "GET");
  bool head = air__http_str_eq(msg->method, "HEAD");
  if (get || (head && strchr(allow, 'H') != NULL)) {
    head_refuse(w, h, msg, 400, AIR_REASON_BAD_REQUEST,
                "this endpoint takes no request body", NULL);
    return;
  }
  char m[64];
  snprintf(m, sizeof(m), "method not allowed: use %s", allow);
  head_refuse(w, h, msg, 405, AIR_REASON_BAD_REQUEST, m, allow);
}

/*
 * The head hook (docs/design.md §5 "Auth before body"): the client key is
 * checked when the head arrives; an unauthorised caller gets 401 in the
 * endpoint's dialect with `connection: close`, before any body byte is read and
 * instead of `100 Continue`. A body sent to an endpoint that takes none
 * (/healthz needs no key) is refused here too, so no caller holds the body
 * budget with a body nothing reads. air__gw_handle checks the key again (a
 * SIGHUP may have changed the keys while the body was read).
 */
void air__gw_head(void *data, air__http_head *h, const air__http_request *msg) {
  air__gw_worker *w = data;
  bool has_body = msg->chunked || msg->content_length > 0;
  if (!is_healthz(msg->path)) {
    air__gw_cfg *cfg = air__gw_cfg_get(w->g);
    bool ok = authorized(cfg, msg);
    air__gw_cfg_release(cfg);
    if (!ok) {
      head_refuse(w, h, msg, 401, AIR_REASON_AUTH, AUTH_MESSAGE, NULL);
      return;
    }
  }
  const char *allow = has_body ? bodiless_allow(msg->path) : NULL;
  if (allow != NULL) refuse_body(w, h, msg, allow);
}

void air__gw_handle(void *data, air__http_req *req,
                    const air__http_request *msg) {
  air__gw_worker *w = data;
  air__gw_cfg *cfg = air__gw_cfg_get(w->g);
  bool post = air__http_str_eq(msg->method, "POST");
  bool get = air__http_str_eq(msg->method, "GET") ||
             air__http_str_eq(msg->method, "HEAD");
  air__str p = msg->path;
  bool is_chat = p.n == 20 && memcmp(p.p, "/v1/chat/completions", 20) == 0;
  bool is_msgs = p.n == 12 && memcmp(p.p, "/v1/messages", 12) == 0;
  bool is_emb = p.n == 14 && memcmp(p.p, "/v1/embeddings", 14) == 0;
  bool is_count =
      p.n == 25 && memcmp(p.p, "/v1/messages/count_tokens", 25) == 0;
  bool is_rsp = p.n == 13 && memcmp(p.p, "/v1/responses", 13) == 0;
  bool is_rsp_id = p.n > 14 && memcmp(p.p, "/v1/responses/", 14) == 0;
  air_dialect dialect = is_msgs || is_count   ? AIR_DIALECT_ANTHROPIC
                        : is_rsp || is_rsp_id ? AIR_DIALECT_OPENAI_RESPONSES
                                              : AIR_DIALECT_OPENAI;
  char rid[40];
  make_rid(w, msg, rid, sizeof(rid));
  if (is_healthz(p)) {
    if (get)
      air__gw_respond_text(req, 200, "text/plain", "ok\n", 3);
    else
      method_not_allowed(req, AIR_DIALECT_OPENAI, "GET, HEAD", rid);
  } else if (!authorized(cfg, msg)) {
    /* Every endpoint but /healthz: the key comes before anything else. */
    air__gw_respond_error(req, dialect, 401, AIR_REASON_AUTH, AUTH_MESSAGE,
                          rid);
  } else if (is_chat || is_msgs || is_rsp) {
    if (!post) {
      method_not_allowed(req, dialect, "POST", rid);
    } else {
      air__gw_chat(w, req, msg, dialect, cfg, rid);
      return; /* chat owns the config reference now */
    }
  } else if (is_emb || is_count) {
    if (!post) {
      method_not_allowed(req, dialect, "POST", rid);
    } else {
      air__gw_plain(w, req, msg, dialect, cfg, rid);
      return; /* it owns the config reference now */
    }
  } else if (is_rsp_id) {
    /* docs/design.md §5: to the first openai_responses provider (plain_ep.c).
     */
    if (air__http_str_eq(msg->method, "GET")) {
      air__gw_plain_retrieve(w, req, msg, cfg, rid);
      return; /* it owns the config reference now */
    }
    method_not_allowed(req, dialect, "GET", rid);
  } else if (p.n == 10 && memcmp(p.p, "/v1/models", 10) == 0) {
    if (get)
      air__gw_models(req, msg, cfg->cfg);
    else
      method_not_allowed(req, AIR_DIALECT_OPENAI, "GET, HEAD", rid);
  } else if (p.n == 8 && memcmp(p.p, "/metrics", 8) == 0) {
    if (get)
      air__gw_metrics(w, req);
    else
      method_not_allowed(req, AIR_DIALECT_OPENAI, "GET, HEAD", rid);
  } else {
    air__gw_respond_error(req, AIR_DIALECT_OPENAI, 404, AIR_REASON_NOT_FOUND,
                          "no such endpoint", rid);
  }
  air__gw_cfg_release(cfg);
}
