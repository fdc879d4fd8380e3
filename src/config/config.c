/*
 * The config loader: YAML (or JSON) text -> a resolved, immutable air_config.
 *
 * The walk of the document against the option table is config_walk.c, the
 * reading of single values config_value.c; this file gives the lists that
 * make the config their meaning: providers (default base_url by api, the
 * API key from the environment), routes (a copy of defaults: under each),
 * their targets (provider/model resolved, continuation_style inherited)
 * and rules (switch targets checked, overrides merged per target once, so
 * the engine never parses JSON per attempt), then state.redis and the
 * environment. Resolution: built-in defaults <- `defaults:` <- the route,
 * each map merged key by key, each list replacing the one below.
 */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"
#include "limits.h"
#include "redis_url.h"
#include "telemetry.h"

#define DEFAULT_LISTEN "127.0.0.1:8080"

typedef air__yaml_loc loc;

/* ---- freeing and copying ------------------------------------------------- */

static void rule_cleanup(air__rule *r) {
  free(r->message);
  free(r->to);
  free(r->override_json);
  for (size_t i = 0; i < r->n_target_override; i++) free(r->target_override[i]);
  free(r->target_override);
}

void air__cfg_strlist_free(char **v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

static void policy_cleanup(air__policy *p) {
  for (size_t i = 0; i < p->n_rules; i++) rule_cleanup(&p->rules[i]);
  free(p->rules);
  air__cfg_strlist_free(p->phrases, p->n_phrases);
  p->rules = NULL;
  p->phrases = NULL;
  p->n_rules = p->n_phrases = 0;
}

static char *dup_or_null(air__cfg_ctx *c, const char *s) {
  return s ? air__cfg_strndup(c, s, strlen(s)) : NULL;
}

/* Deep copy of src into dst (dst uninitialised). On OOM sets c->oom. */
static void policy_copy(air__cfg_ctx *c, air__policy *dst,
                        const air__policy *src) {
  *dst = *src;
  dst->rules = NULL;
  dst->phrases = NULL;
  dst->n_rules = dst->n_phrases = 0;
  if (src->n_rules) {
    dst->rules = calloc(src->n_rules, sizeof *dst->rules);
    if (!dst->rules) {
      c->oom = true;
      return;
    }
    for (size_t i = 0; i < src->n_rules; i++) {
      air__rule *r = &dst->rules[i];
      *r = src->rules[i];
      r->message = dup_or_null(c, src->rules[i].message);
      r->to = dup_or_null(c, src->rules[i].to);
      r->override_json = dup_or_null(c, src->rules[i].override_json);
      r->target_override = NULL;
      r->n_target_override = 0;
      dst->n_rules = i + 1;
    }
  }
  if (src->n_phrases) {
    dst->phrases = calloc(src->n_phrases, sizeof *dst->phrases);
    if (!dst->phrases) {
      c->oom = true;
      return;
    }
    for (size_t i = 0; i < src->n_phrases; i++) {
      dst->phrases[i] = dup_or_null(c, src->phrases[i]);
      dst->n_phrases = i + 1;
    }
  }
}

/* Frees a secret after overwriting it, so it does not linger in the heap. */
static void free_secret(char *s) {
  if (!s) return;
  for (volatile char *p = s; *p; p++) *p = 0;
  free(s);
}

void air_config_free(air_config *cfg) {
  if (!cfg) return;
  free(cfg->file);
  free(cfg->listen);
  free(cfg->client_keys_env);
  for (size_t i = 0; i < cfg->n_providers; i++) {
    air__provider *p = &cfg->providers[i];
    free(p->name);
    free(p->base_url);
    free(p->api_key_env);
    free_secret(p->api_key);
    for (size_t j = 0; j < p->n_headers; j++) {
      free(p->headers[j].name);
      free(p->headers[j].value);
    }
    free(p->headers);
  }
  free(cfg->providers);
  for (size_t i = 0; i < cfg->n_routes; i++) {
    air__route *r = &cfg->routes[i];
    free(r->name);
    for (size_t j = 0; j < r->n_targets; j++) {
      free(r->targets[j].name);
      free(r->targets[j].model);
      free(r->targets[j].override_json);
    }
    free(r->targets);
    policy_cleanup(&r->policy);
  }
  free(cfg->routes);
  policy_cleanup(&cfg->defaults);
  free(cfg->redis.url);
  free(cfg->redis.url_env);
  free(cfg->redis.password_env);
  free(cfg->redis.prefix);
  free_secret(cfg->redis.resolved_url);
  free_secret(cfg->redis.password);
  air__cfg_strlist_free(cfg->forward_headers, cfg->n_forward_headers);
  free(cfg->telemetry.otlp.endpoint);
  free(cfg->telemetry.otlp.headers_env);
  air__otel_cleanup(&cfg->otel);
  free(cfg);
}

/* ---- rules, targets, providers, routes ---------------------------------- */

void air__cfg_read_rules(air__cfg_ctx *c, const air__opt *o, struct fy_node *v,
                         loc at, const char *path, void *obj,
                         air__policy *pol) {
  (void)obj;
  size_t n = air__cfg_list_count(c, v, at, path, o->max, "rules");
  if (!air__yaml_is_seq(v)) return;
  air__rule *rules = n ? calloc(n, sizeof *rules) : NULL;
  if (n && !rules) {
    c->oom = true;
    return;
  }
  const size_t i_action = air__cfg_opt_index(c, AIR__SC_RULE, "action");
  const size_t i_max = air__cfg_opt_index(c, AIR__SC_RULE, "max");
  const size_t i_to = air__cfg_opt_index(c, AIR__SC_RULE, "to");
  const size_t i_backoff = air__cfg_opt_index(c, AIR__SC_RULE, "backoff");
  const size_t i_override = air__cfg_opt_index(c, AIR__SC_RULE, "override");
  void *it = NULL;
  for (size_t i = 0; i < n; i++) {
    air__rule *r = &rules[i];
    struct fy_node *item = air__cfg_deref(c, air__yaml_seq_next(v, &it));
    loc il = air__yaml_node_loc(item, at);
    char ip[AIR__CFG_PATH_BYTES];
    air__cfg_seen sn;
    air__cfg_path_idx(ip, path, i);
    air__cfg_init_obj(c, AIR__SC_RULE, r, NULL);
    if (!air__yaml_is_map(item)) {
      air__cfg_error(c, il, "%s: expected a rule (a map), got %s", ip,
                     air__yaml_kind(item));
      continue;
    }
    air__cfg_apply_map(c, AIR__SC_RULE, item, il, r, NULL, ip, &sn);
    if (!sn.key[i_max])
      r->max = r->action == AIR__RULE_RETRY ? 1 : AIR__UNLIMITED;
    if (r->on_mask == 0 && r->n_status == 0 && r->message == NULL)
      air__cfg_error(
          c, il, "%s: a rule needs at least one of on, status, message", ip);
    if (!sn.key[i_action]) continue;
    if (sn.key[i_to] && r->action != AIR__RULE_SWITCH)
      air__cfg_error(c, air__yaml_node_loc(sn.key[i_to], il),
                     "%s.to: only a switch rule may name a target", ip);
    if (sn.key[i_backoff] && r->action != AIR__RULE_RETRY)
      air__cfg_warn(c, air__yaml_node_loc(sn.key[i_backoff], il),
                    "%s.backoff: used by retry rules only; ignored", ip);
    if (sn.key[i_override] && r->action == AIR__RULE_FAIL)
      air__cfg_warn(c, air__yaml_node_loc(sn.key[i_override], il),
                    "%s.override: a fail rule causes no attempt; ignored", ip);
  }
  /* pol is non-NULL: the rules option has base AIR__B_POLICY, and an option
   * of that base is skipped where no policy is given (air__cfg_field).
   * NOLINTNEXTLINE(clang-analyzer-core.NullDereference) */
  for (size_t i = 0; i < pol->n_rules; i++) rule_cleanup(&pol->rules[i]);
  free(pol->rules);
  pol->rules = rules;
  pol->n_rules = n;
}

void air__cfg_read_targets(air__cfg_ctx *c, const air__opt *o,
                           struct fy_node *v, loc at, const char *path,
                           void *obj, air__policy *pol) {
  air__route *route = obj;
  (void)pol;
  size_t n = air__cfg_list_count(c, v, at, path, o->max, "targets");
  if (!air__yaml_is_seq(v)) return;
  if (n == 0) {
    air__cfg_error(c, at, "%s: a route needs at least one target", path);
    return;
  }
  route->targets = calloc(n, sizeof *route->targets);
  if (!route->targets) {
    c->oom = true;
    return;
  }
  const air__opt *to = air__cfg_find_opt(c, AIR__SC_TARGET, "target", 6, NULL);
  const size_t i_style =
      air__cfg_opt_index(c, AIR__SC_TARGET, "continuation_style");
  char why[AIR__CFG_MSG_BYTES / 2];
  void *it = NULL;
  for (size_t i = 0; i < n; i++) {
    air__target *t = &route->targets[i];
    route->n_targets = i + 1;
    t->timeouts = route->policy.timeouts;
    t->hedge = route->policy.hedge;
    t->provider = SIZE_MAX;
    struct fy_node *item = air__cfg_deref(c, air__yaml_seq_next(v, &it));
    loc il = air__yaml_node_loc(item, at);
    char ip[AIR__CFG_PATH_BYTES];
    air__cfg_path_idx(ip, path, i);
    if (air__yaml_is_scalar(item)) {
      size_t len;
      const char *s = air__yaml_scalar(item, &len);
      if (air__cfg_convert(c, to, s, len, &t->name, why, sizeof why) != 0)
        air__cfg_error(c, il, "%s: %s", ip, why);
    } else if (air__yaml_is_map(item)) {
      air__cfg_seen sn;
      air__cfg_apply_map(c, AIR__SC_TARGET, item, il, t, NULL, ip, &sn);
      t->style_set = sn.key[i_style] != NULL;
    } else {
      air__cfg_error(c, il,
                     "%s: expected provider/model or a target map, got %s", ip,
                     air__yaml_kind(item));
    }
    if (!t->name) continue;
    const char *slash = strchr(t->name, '/');
    if (slash) {
      air__config_provider(c->cfg, t->name, (size_t)(slash - t->name),
                           &t->provider);
      t->model = air__cfg_strndup(c, slash + 1, strlen(slash + 1));
    }
    /* continuation_style: the target's, else its provider's (docs/design.md
     * §3.5), which air__cfg_read_providers resolved by api when not given. */
    if (!t->style_set && t->provider < c->cfg->n_providers) {
      t->style = c->cfg->providers[t->provider].continuation_style;
      t->style_set = c->cfg->providers[t->provider].continuation_style_set;
    }
    for (size_t j = 0; j < i; j++) {
      if (route->targets[j].name &&
          strcmp(route->targets[j].name, t->name) == 0) {
        air__cfg_error(c, il, "%s: duplicate target '%s' (also %s[%zu])", ip,
                       t->name, path, j);
        break;
      }
    }
  }
}

/*
 * For every rule of r with an override, its fields merged over each
 * target's own override (the rule's win), so the engine never parses JSON
 * per attempt. Both are JSON objects (air__cfg_read_override checked them).
 */
static void merge_rule_overrides(air__cfg_ctx *c, air__route *r) {
  for (size_t i = 0; i < r->policy.n_rules && !c->oom; i++) {
    air__rule *rule = &r->policy.rules[i];
    if (rule->override_json == NULL || r->n_targets == 0) continue;
    rule->target_override = calloc(r->n_targets, sizeof(char *));
    if (rule->target_override == NULL) {
      c->oom = true;
      return;
    }
    rule->n_target_override = r->n_targets;
    for (size_t j = 0; j < r->n_targets; j++) {
      const char *tj = r->targets[j].override_json;
      if (tj == NULL) continue;
      json_t *a = json_loads(tj, 0, NULL);
      json_t *b = json_loads(rule->override_json, 0, NULL);
      char *out = NULL;
      if (json_is_object(a) && json_is_object(b) &&
          json_object_update(a, b) == 0)
        out = json_dumps(a, JSON_COMPACT);
      json_decref(a);
      json_decref(b);
      if (out == NULL) {
        c->oom = true;
        return;
      }
      rule->target_override[j] = out;
    }
  }
}

/* Every switch rule's `to` must be one of the route's targets. */
static void check_rule_targets(air__cfg_ctx *c, const air__route *r, size_t ri,
                               struct fy_node *rules_node,
                               const char *rules_path) {
  void *it = NULL;
  for (size_t i = 0; i < r->policy.n_rules; i++) {
    struct fy_node *item =
        rules_node ? air__cfg_deref(c, air__yaml_seq_next(rules_node, &it))
                   : NULL;
    const char *to = r->policy.rules[i].to;
    if (!to) continue;
    bool found = false;
    for (size_t j = 0; j < r->n_targets && !found; j++)
      found = r->targets[j].name && strcmp(r->targets[j].name, to) == 0;
    if (found) continue;
    struct fy_node *tn = air__cfg_map_get(c, item, "to", NULL);
    air__cfg_error(
        c, air__yaml_node_loc(tn, air__yaml_node_loc(item, (loc){0, 0})),
        "%s[%zu].to: '%s' is not one of the targets of routes[%zu]%s%s%s",
        rules_path, i, to, ri, r->name ? " ('" : "", r->name ? r->name : "",
        r->name ? "')" : "");
  }
}

/* True when the path segment s[0..n) names an API version: "v" and a
 * digit, then letters or digits ("v1", "v1beta", "v4"). */
static bool version_segment(const char *s, size_t n) {
  if (n < 2 || (s[0] != 'v' && s[0] != 'V') || !isdigit((unsigned char)s[1]))
    return false;
  for (size_t i = 2; i < n; i++)
    if (!isalnum((unsigned char)s[i])) return false;
  return true;
}

/*
 * Where the version path of base_url stands: *any when one path segment
 * names a version, *last when the last non-empty one does. The gateway
 * appends "/chat/completions" (openai) and "/v1/messages" (anthropic), so an
 * openai base_url without a version path and an anthropic one ending in one
 * usually mean a wrong URL (docs/design.md §5; docs/config.md).
 */
static void version_path(const char *url, bool *any, bool *last) {
  *any = *last = false;
  const char *p = strstr(url, "://");
  p = p ? p + 3 : url;
  /* p is at a '/' that starts a segment, or NULL past the path. */
  for (p = strchr(p, '/'); p != NULL;) {
    const char *seg = p + 1;
    size_t n = strcspn(seg, "/?#");
    if (n > 0) {
      bool v = version_segment(seg, n);
      *any = *any || v;
      *last = v;
    }
    p = seg[n] == '/' ? seg + n : NULL;
  }
}

void air__cfg_read_providers(air__cfg_ctx *c, const air__opt *o,
                             struct fy_node *v, loc at, const char *path,
                             void *obj, air__policy *pol) {
  (void)obj;
  (void)pol;
  air_config *cfg = c->cfg;
  size_t n = air__cfg_list_count(c, v, at, path, o->max, "providers");
  if (!n) return;
  cfg->providers = calloc(n, sizeof *cfg->providers);
  if (!cfg->providers) {
    c->oom = true;
    return;
  }
  const size_t i_name = air__cfg_opt_index(c, AIR__SC_PROVIDER, "name");
  const size_t i_api = air__cfg_opt_index(c, AIR__SC_PROVIDER, "api");
  const size_t i_env = air__cfg_opt_index(c, AIR__SC_PROVIDER, "api_key_env");
  const size_t i_url = air__cfg_opt_index(c, AIR__SC_PROVIDER, "base_url");
  const size_t i_style =
      air__cfg_opt_index(c, AIR__SC_PROVIDER, "continuation_style");
  void *it = NULL;
  for (size_t i = 0; i < n; i++) {
    air__provider *p = &cfg->providers[i];
    cfg->n_providers = i + 1;
    p->breaker = cfg->breaker_defaults;
    struct fy_node *item = air__cfg_deref(c, air__yaml_seq_next(v, &it));
    loc il = air__yaml_node_loc(item, at);
    char ip[AIR__CFG_PATH_BYTES];
    air__cfg_seen sn;
    air__cfg_path_idx(ip, path, i);
    if (!air__yaml_is_map(item)) {
      air__cfg_error(c, il, "%s: expected a provider (a map), got %s", ip,
                     air__yaml_kind(item));
      continue;
    }
    air__cfg_apply_map(c, AIR__SC_PROVIDER, item, il, p, NULL, ip, &sn);
    p->continuation_style_set = sn.key[i_style] != NULL;
    if (!p->continuation_style_set)
      p->continuation_style = air__cont_style_by_api(p->api);
    if (p->name) {
      for (size_t j = 0; j < i; j++) {
        if (cfg->providers[j].name &&
            strcmp(cfg->providers[j].name, p->name) == 0) {
          air__cfg_error(
              c, air__yaml_node_loc(air__cfg_deref(c, sn.val[i_name]), il),
              "%s.name: duplicate provider name '%s' (also %s[%zu])", ip,
              p->name, path, j);
          break;
        }
      }
    }
    if (!p->base_url && sn.key[i_api]) {
      const char *def = p->api == AIR_DIALECT_ANTHROPIC
                            ? "https://api.anthropic.com"
                            : "https://api.openai.com/v1";
      p->base_url = air__cfg_strndup(c, def, strlen(def));
    } else if (p->base_url && sn.key[i_url]) {
      bool any, last;
      version_path(p->base_url, &any, &last);
      loc ul = air__yaml_node_loc(air__cfg_deref(c, sn.val[i_url]), il);
      if (p->api == AIR_DIALECT_OPENAI && !any)
        air__cfg_warn(
            c, ul,
            "%s.base_url: an openai base_url usually includes its version "
            "path (like https://api.openai.com/v1); the gateway appends "
            "/chat/completions to '%s'",
            ip, p->base_url);
      else if (p->api == AIR_DIALECT_ANTHROPIC && last)
        air__cfg_warn(
            c, ul,
            "%s.base_url: an anthropic base_url has no version path (like "
            "https://api.anthropic.com); the gateway appends /v1/messages "
            "to '%s'",
            ip, p->base_url);
    }
    if (p->api_key_env) {
      const char *val = getenv(p->api_key_env);
      if (val && val[0])
        p->api_key = air__cfg_strndup(c, val, strlen(val));
      else
        air__cfg_warn(
            c, air__yaml_node_loc(air__cfg_deref(c, sn.val[i_env]), il),
            "%s.api_key_env: %s is not set in the environment; attempts "
            "on provider '%s' will fail with reason auth",
            ip, p->api_key_env, p->name ? p->name : "?");
    }
  }
}

/* docs/design.md §3.6: a single-target route does not hedge unless
 * hedge.same_target is set; hedging turned on there is worth a warning. */
static void warn_lone_hedge(air__cfg_ctx *c, const air__route *r, loc at,
                            const char *path) {
  if (r->n_targets != 1) return;
  const air__hedge_cfg *h = &r->targets[0].hedge;
  if (h->enabled && !h->same_target)
    air__cfg_warn(
        c, at,
        "%s: hedge is on but the route has one target: it never hedges "
        "without hedge.same_target: true",
        path);
}

/* continuation (docs/design.md §3.5): what is resolved once the policy is read:
 * targets as a flag, max_gap_ms unset (0) as the route's chunk_ms. */
static void resolve_continuation(air__policy *pol) {
  air__continuation *k = &pol->continuation;
  k->any_target = k->targets == AIR__CONT_ANY;
  if (k->max_gap_ms == 0) k->max_gap_ms = pol->timeouts.chunk_ms;
}

/* Continuation turned on where no target can be continued (every
 * resolved style none) does nothing; say so, and how to change it. */
static void warn_no_continuation(air__cfg_ctx *c, const air__route *r, loc at,
                                 const char *path) {
  if (!r->policy.continuation.enabled) return;
  for (size_t i = 0; i < r->n_targets; i++)
    if (r->targets[i].style != AIR_CONT_NONE) return;
  air__cfg_warn(
      c, at,
      "%s: continuation is on but no target can continue: every "
      "target's continuation_style is none (openai and openai_responses "
      "providers default to none; set continuation_style: vllm, "
      "prefix_flag or instruct where the upstream supports it)",
      path);
}

void air__cfg_read_routes(air__cfg_ctx *c, const air__opt *o, struct fy_node *v,
                          loc at, const char *path, void *obj,
                          air__policy *pol) {
  (void)obj;
  (void)pol;
  air_config *cfg = c->cfg;
  size_t n = air__cfg_list_count(c, v, at, path, o->max, "routes");
  if (!n) return;
  cfg->routes = calloc(n, sizeof *cfg->routes);
  if (!cfg->routes) {
    c->oom = true;
    return;
  }
  const size_t i_name = air__cfg_opt_index(c, AIR__SC_ROUTE, "name");
  const size_t i_rules = air__cfg_opt_index(c, AIR__SC_ROUTE, "rules");
  void *it = NULL;
  for (size_t i = 0; i < n && !c->oom; i++) {
    air__route *r = &cfg->routes[i];
    cfg->n_routes = i + 1;
    policy_copy(c, &r->policy, &cfg->defaults);
    struct fy_node *item = air__cfg_deref(c, air__yaml_seq_next(v, &it));
    loc il = air__yaml_node_loc(item, at);
    char ip[AIR__CFG_PATH_BYTES], rp[AIR__CFG_PATH_BYTES];
    air__cfg_seen sn;
    air__cfg_path_idx(ip, path, i);
    if (!air__yaml_is_map(item)) {
      air__cfg_error(c, il, "%s: expected a route (a map), got %s", ip,
                     air__yaml_kind(item));
      continue;
    }
    air__cfg_apply_map(c, AIR__SC_ROUTE, item, il, r, &r->policy, ip, &sn);
    if (r->name) {
      for (size_t j = 0; j < i; j++) {
        if (cfg->routes[j].name && strcmp(cfg->routes[j].name, r->name) == 0) {
          air__cfg_error(
              c, air__yaml_node_loc(air__cfg_deref(c, sn.val[i_name]), il),
              "%s.name: duplicate route name '%s' (also %s[%zu])", ip, r->name,
              path, j);
          break;
        }
      }
    }
    if (sn.key[i_rules]) {
      air__cfg_path_key(rp, ip, "rules");
      check_rule_targets(c, r, i, air__cfg_deref(c, sn.val[i_rules]), rp);
    } else {
      check_rule_targets(c, r, i, c->defaults_rules, "defaults.rules");
    }
    merge_rule_overrides(c, r);
    warn_lone_hedge(c, r, il, ip);
    resolve_continuation(&r->policy);
    warn_no_continuation(c, r, il, ip);
  }
}

/* Tracing settings come from the environment too: no place in the file. */
static void otel_diag(void *data, bool error, const char *msg) {
  air__cfg_ctx *c = data;
  if (error)
    air__cfg_error(c, (loc){0, 0}, "%s", msg);
  else
    air__cfg_warn(c, (loc){0, 0}, "%s", msg);
}

/* ---- entry points -------------------------------------------------------- */

/* A libfyaml warning or error, in the config's words. */
static void yaml_problem(void *data, bool error, loc at, const char *msg) {
  if (error)
    air__cfg_error(data, at, "YAML syntax error: %s", msg);
  else
    air__cfg_warn(data, at, "YAML: %s", msg);
}

/*
 * state.redis after its keys were read: url or url_env (not both), the
 * URL resolved from the environment and checked like url, the password
 * read from password_env. What the environment holds is never quoted in a
 * message. An unset url_env or password_env is a warning, as api_key_env's
 * is: the instance then keeps its state to itself, or connects without
 * AUTH.
 */
static void resolve_redis(air__cfg_ctx *c, struct fy_node *root) {
  air__redis_cfg *r = &c->cfg->redis;
  struct fy_node *key = NULL;
  struct fy_node *state = air__cfg_map_get(c, root, "state", NULL);
  struct fy_node *node = air__cfg_map_get(c, state, "redis", &key);
  if (!key || air__yaml_is_null(node)) return;
  loc at = air__yaml_node_loc(node, air__yaml_node_loc(key, (loc){1, 1}));
  if (!r->url && !r->url_env) {
    air__cfg_error(c, at, "state.redis: needs url or url_env");
    return;
  }
  if (r->url && r->url_env) {
    air__cfg_error(c, at, "state.redis: give url or url_env, not both");
    return;
  }
  const char *url = r->url;
  if (r->url_env) {
    url = getenv(r->url_env);
    if (!url || !url[0]) {
      air__cfg_warn(
          c, at,
          "state.redis.url_env: %s is not set in the environment; state "
          "stays per process",
          r->url_env);
      return;
    }
    air__redis_url u;
    char why[AIR__CFG_MSG_BYTES / 4];
    size_t n = strlen(url);
    int bad = n > AIR__MAX_REDIS_URL_BYTES
                  ? (snprintf(why, sizeof why, "it is over %u bytes",
                              (unsigned)AIR__MAX_REDIS_URL_BYTES),
                     -1)
                  : air__redis_url_parse(url, n, &u, why, sizeof why);
    air__redis_url_wipe(&u);
    if (bad) {
      air__cfg_error(c, at,
                     "state.redis.url_env: the URL in %s is not usable: %s",
                     r->url_env, why);
      return;
    }
  }
  r->resolved_url = air__cfg_strndup(c, url, strlen(url));
  if (r->password_env) {
    const char *pw = getenv(r->password_env);
    if (pw && pw[0])
      r->password = air__cfg_strndup(c, pw, strlen(pw));
    else
      air__cfg_warn(
          c, at,
          "state.redis.password_env: %s is not set in the environment; "
          "connecting without a password",
          r->password_env);
  }
}

static void load_tree(air__cfg_ctx *c, const char *text, size_t len) {
  air__yaml_doc d;
  air__yaml_result r = air__yaml_load(&d, text, len, yaml_problem, c);
  struct fy_node *root = d.root;
  switch (r) {
    case AIR__YAML_BAD_TEXT:
      air__cfg_error(c, d.bad_at, "the config %s", d.why);
      break;
    case AIR__YAML_NOMEM:
      c->oom = true;
      break;
    case AIR__YAML_SYNTAX:
      break;
    case AIR__YAML_NOT_YAML:
      air__cfg_error(c, (loc){0, 0}, "cannot parse the config as YAML");
      break;
    case AIR__YAML_OK:
      if (root && !air__yaml_is_null(root) && !air__yaml_is_map(root)) {
        air__cfg_error(
            c, air__yaml_node_loc(root, (loc){1, 1}),
            "the config must be a map of keys at the top level, got %s",
            air__yaml_kind(root));
        break;
      }
      air__cfg_seen sn;
      air__cfg_apply_map(c, AIR__SC_TOP, root, (loc){1, 1}, c->cfg, NULL, "",
                         &sn);
      /* After the routes, which copied defaults' max_gap_ms unset. */
      resolve_continuation(&c->cfg->defaults);
      if (!c->n_errors && !c->oom) resolve_redis(c, root);
      size_t i_keys = air__cfg_opt_index(c, AIR__SC_TOP, "client_keys_env");
      const char *env = c->cfg->client_keys_env;
      const char *val = env ? getenv(env) : NULL;
      if (env && (!val || !val[0]))
        air__cfg_warn(
            c,
            air__yaml_node_loc(air__cfg_deref(c, sn.val[i_keys]), (loc){1, 1}),
            "client_keys_env: %s is not set in the environment; no client "
            "key will be accepted",
            env);
      if (air__otel_resolve(&c->cfg->telemetry, air__env_getenv, NULL,
                            &c->cfg->otel, otel_diag, c) == AIR_ENOMEM)
        c->oom = true;
      break;
  }
  air__yaml_doc_cleanup(&d);
}

int air_config_parse(const char *name, const char *text, size_t len,
                     air_diag_cb cb, void *data, air_config **out) {
  if (!out || (!text && len)) return AIR_EINVAL;
  air__cfg_ctx c;
  air__cfg_begin(&c, name ? name : "<config>");
  if (len > AIR__MAX_CONFIG_BYTES) {
    air__cfg_error(&c, (loc){0, 0},
                   "the config is %zu bytes, over the limit of %u", len,
                   (unsigned)AIR__MAX_CONFIG_BYTES);
    air__cfg_flush(&c, cb, data);
    return AIR_ETOOBIG;
  }
  c.cfg = calloc(1, sizeof *c.cfg);
  if (!c.cfg) return AIR_ENOMEM;
  c.cfg->file = air__cfg_strndup(&c, c.file, strlen(c.file));
  air__cfg_init_obj(&c, AIR__SC_TOP, c.cfg, NULL);
  if (!c.oom) load_tree(&c, text ? text : "", len);
  int rc = c.oom ? AIR_ENOMEM : c.n_errors ? AIR_ECONFIG : 0;
  if (!c.oom)
    air__cfg_flush(&c, cb, data);
  else
    air__cfg_flush(&c, NULL, NULL);
  if (rc == 0)
    *out = c.cfg;
  else
    air_config_free(c.cfg);
  return rc;
}

int air_config_load(const char *path, air_diag_cb cb, void *data,
                    air_config **out) {
  if (!path || !out) return AIR_EINVAL;
  air__cfg_ctx c;
  air__cfg_begin(&c, path);
  FILE *f = fopen(path, "rb");
  if (!f) {
    char why[128];
    if (strerror_r(errno, why, sizeof why) != 0)
      snprintf(why, sizeof why, "error %d", errno);
    air__cfg_error(&c, (loc){0, 0}, "cannot open: %s", why);
    air__cfg_flush(&c, cb, data);
    return AIR_EIO;
  }
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  int rc = buf ? 0 : AIR_ENOMEM;
  while (rc == 0) {
    if (len == cap) {
      if (cap > AIR__MAX_CONFIG_BYTES) {
        rc = AIR_ETOOBIG;
        break;
      }
      char *nb = realloc(buf, cap * 2);
      if (!nb) {
        rc = AIR_ENOMEM;
        break;
      }
      buf = nb;
      cap *= 2;
    }
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) {
      if (ferror(f)) {
        air__cfg_error(&c, (loc){0, 0}, "cannot read the file");
        rc = AIR_EIO;
      }
      break;
    }
  }
  fclose(f);
  if (rc == AIR_ETOOBIG)
    air__cfg_error(&c, (loc){0, 0}, "the config is over the limit of %u bytes",
                   (unsigned)AIR__MAX_CONFIG_BYTES);
  if (rc != 0) {
    air__cfg_flush(&c, cb, data);
    free(buf);
    return rc;
  }
  rc = air_config_parse(path, buf, len, cb, data, out);
  free(buf);
  return rc;
}

const char *air_config_listen(const air_config *cfg) {
  return cfg && cfg->listen ? cfg->listen : DEFAULT_LISTEN;
}
