/*
 * The endpoints the gateway answers itself, without an upstream
 * (docs/design.md §5): GET /v1/models and GET /metrics.
 */
#include <string.h>

#include "endpoint.h"
#include "limits.h"

/* The route list in the caller's dialect (docs/design.md §5): Anthropic's shape
 * (one page: has_more false, first_id and last_id) when the request carries
 * anthropic-version, OpenAI's list otherwise. */
void air__gw_models(air__http_req *req, const air__http_request *msg,
                    const air_config *cfg) {
  bool anth = air__http_find_header(msg, "anthropic-version") != NULL;
  air__buf b;
  air__buf_init(&b, AIR__MAX_MODELS_LIST_BYTES);
  air__buf_puts(&b, anth ? "{\"data\":[" : "{\"object\":\"list\",\"data\":[");
  for (size_t i = 0; i < cfg->n_routes; i++) {
    const char *name = cfg->routes[i].name;
    if (i) air__buf_putc(&b, ',');
    if (anth) {
      air__buf_puts(&b, "{\"type\":\"model\",\"id\":");
      air__buf_put_json_str(&b, name, strlen(name));
      air__buf_puts(&b, ",\"display_name\":");
      air__buf_put_json_str(&b, name, strlen(name));
      air__buf_puts(&b, ",\"created_at\":\"1970-01-01T00:00:00Z\"}");
    } else {
      air__buf_puts(&b, "{\"id\":");
      air__buf_put_json_str(&b, name, strlen(name));
      air__buf_puts(
          &b, ",\"object\":\"model\",\"created\":0,\"owned_by\":\"airetry\"}");
    }
  }
  air__buf_putc(&b, ']');
  if (anth) {
    air__buf_puts(&b, ",\"has_more\":false,\"first_id\":");
    if (cfg->n_routes == 0) {
      air__buf_puts(&b, "null,\"last_id\":null");
    } else {
      const char *f = cfg->routes[0].name,
                 *l = cfg->routes[cfg->n_routes - 1].name;
      air__buf_put_json_str(&b, f, strlen(f));
      air__buf_puts(&b, ",\"last_id\":");
      air__buf_put_json_str(&b, l, strlen(l));
    }
  }
  air__buf_putc(&b, '}');
  air_dialect dialect = anth ? AIR_DIALECT_ANTHROPIC : AIR_DIALECT_OPENAI;
  if (air__buf_error(&b) != 0) {
    air__buf_cleanup(&b);
    air__gw_respond_error(req, dialect, 503, AIR_REASON_OVERLOADED,
                          "the model list is over the gateway's limits", NULL);
    return;
  }
  air__http_field f[1] = {air__gw_json_ct};
  air__http_respond(req, 200, f, 1, b.p, b.n);
  air__buf_cleanup(&b);
}

void air__gw_metrics(air__gw_worker *w, air__http_req *req) {
  air__buf b;
  air__buf_init(&b, AIR__MAX_METRICS_BYTES);
  if (air__metrics_render(w->g->metrics, w->g->state, air__gw_mono_ms(), &b) !=
      0) {
    air__buf_cleanup(&b);
    air__gw_respond_text(req, 503, "text/plain", "metrics over the limits\n",
                         24);
    return;
  }
  air__gw_respond_text(req, 200, "text/plain; version=0.0.4", b.p ? b.p : "",
                       b.n);
  air__buf_cleanup(&b);
}
