/*
 * The jansson helpers of src/codec (codec_json.h): inserting, dumping and
 * reading values, the pieces of an upstream body the dialects build alike,
 * and the same-dialect body.
 */
#include <string.h>

#include "codec_decode.h"
#include "codec_json.h"
#include "codec_text.h"
#include "error.h"
#include "limits.h"

int air__json_put(json_t *obj, const char *key, json_t *v) {
  if (v == NULL) return AIR_ENOMEM;
  return json_object_set_new(obj, key, v) == 0 ? 0 : AIR_ENOMEM;
}

int air__json_push(json_t *arr, json_t *v) {
  if (v == NULL) return AIR_ENOMEM;
  return json_array_append_new(arr, v) == 0 ? 0 : AIR_ENOMEM;
}

typedef struct dump_ctx {
  air__buf *out;
  int rc;
} dump_ctx;

static int dump_cb(const char *p, size_t n, void *data) {
  dump_ctx *c = data;
  c->rc = air__buf_add(c->out, p, n);
  return c->rc == 0 ? 0 : -1;
}

int air__json_dump(const json_t *v, size_t flags, air__buf *out) {
  size_t start = out->n;
  dump_ctx c = {out, 0};
  if (json_dump_callback(v, dump_cb, &c, flags) != 0) {
    air__text_undo(out, start);
    return c.rc != 0 ? c.rc : AIR_ENOMEM;
  }
  return 0;
}

json_t *air__json_strn(air__str s) {
  return json_stringn(s.p ? s.p : "", s.n);
}

json_t *air__json_num(const air__cnum *n) {
  return n->is_int ? json_integer((json_int_t)n->i) : json_real(n->d);
}

json_t *air__json_clamped(const air__cnum *n, double max) {
  double t = n->d;
  return t >= 0 && t <= max ? air__json_num(n) : json_real(t > max ? max : 0.0);
}

const char *air__json_sv(const json_t *v, size_t *n) {
  if (!json_is_string(v)) {
    *n = 0;
    return "";
  }
  *n = json_string_length(v);
  return json_string_value(v);
}

bool air__json_over(const json_t *v, size_t max) {
  return json_is_string(v) && json_string_length(v) > max;
}

uint64_t air__json_count(const json_t *v) {
  return json_is_integer(v) && json_integer_value(v) > 0
             ? (uint64_t)json_integer_value(v)
             : 0;
}

/* The bytes of u as a string value into *out. */
static int string_of(air__buf *u, int rc, json_t **out) {
  *out = NULL;
  if (rc == 0) {
    *out = json_stringn(u->p != NULL ? u->p : "", u->n);
    if (*out == NULL) rc = AIR_ENOMEM;
  }
  air__buf_cleanup(u);
  return rc;
}

int air__json_image_url(const air__cpart *p, json_t **out) {
  if (p->url.p != NULL) {
    *out = air__json_strn(p->url);
    return *out != NULL ? 0 : AIR_ENOMEM;
  }
  air__buf u;
  air__buf_init(&u, AIR__MAX_REQUEST_BYTES);
  int rc = air__buf_add(&u, LIT("data:"));
  if (rc == 0) rc = air__buf_add(&u, p->media_type.p, p->media_type.n);
  if (rc == 0) rc = air__buf_add(&u, LIT(";base64,"));
  if (rc == 0) rc = air__buf_add(&u, p->data.p, p->data.n);
  return string_of(&u, rc, out);
}

int air__json_joined(const air__cpart *parts, size_t n, const char *sep,
                     json_t **out) {
  air__buf b;
  air__buf_init(&b, AIR__MAX_REQUEST_BYTES);
  int rc = 0;
  bool first = true;
  for (size_t i = 0; i < n && rc == 0; i++) {
    if (parts[i].kind != AIR__CP_TEXT) continue;
    if (!first) rc = air__buf_adds(&b, sep);
    if (rc == 0) rc = air__buf_add(&b, parts[i].text.p, parts[i].text.n);
    first = false;
  }
  return string_of(&b, rc, out);
}

json_t *air__json_tool_schema(const air__ctool *t) {
  if (t->schema.p != NULL) return json_loadb(t->schema.p, t->schema.n, 0, NULL);
  return json_pack("{s:s, s:{}}", "type", "object", "properties");
}

int air__json_tools(const air__canon *c, json_t *out, air__tool_head_fn head,
                    const char *schema_key, air__tool_wrap_fn wrap) {
  if (c->n_tools == 0) return 0;
  json_t *arr = json_array();
  if (arr == NULL) return AIR_ENOMEM;
  int rc = 0;
  for (size_t i = 0; i < c->n_tools && rc == 0; i++) {
    const air__ctool *t = &c->tools[i];
    json_t *def = head(t);
    rc = def != NULL ? 0 : AIR_ENOMEM;
    if (rc == 0 && t->description.p != NULL)
      rc = air__json_put(def, "description", air__json_strn(t->description));
    if (rc == 0) rc = air__json_put(def, schema_key, air__json_tool_schema(t));
    if (rc == 0)
      rc = air__json_push(arr, wrap != NULL ? wrap(def) : def);
    else
      json_decref(def);
  }
  if (rc == 0) return air__json_put(out, "tools", arr);
  json_decref(arr);
  return rc;
}

int air__json_openai_sampling(const air__canon *c, json_t *out,
                              const char *max_key) {
  int rc = 0;
  if (c->max_tokens > 0)
    rc = air__json_put(out, max_key, json_integer((json_int_t)c->max_tokens));
  if (rc == 0 && c->temperature.set)
    rc = air__json_put(out, "temperature",
                       air__json_clamped(&c->temperature, 2.0));
  if (rc == 0 && c->top_p.set)
    rc = air__json_put(out, "top_p", air__json_num(&c->top_p));
  return rc;
}

int air__json_openai_choice(const air__canon *c, json_t *out, bool nested) {
  static const char *const words[] = {
      [AIR__TC_AUTO] = "auto",
      [AIR__TC_REQUIRED] = "required",
      [AIR__TC_NONE] = "none",
  };
  int rc = 0;
  json_t *name = NULL;
  switch (c->tool_choice) {
    case AIR__TC_UNSET:
      break;
    case AIR__TC_AUTO:
    case AIR__TC_REQUIRED:
    case AIR__TC_NONE:
      rc =
          air__json_put(out, "tool_choice", json_string(words[c->tool_choice]));
      break;
    default:
      name = air__json_strn(c->tool_choice_name);
      rc = air__json_put(
          out, "tool_choice",
          nested ? json_pack("{s:s, s:{s:o}}", "type", "function", "function",
                             "name", name)
                 : json_pack("{s:s, s:o}", "type", "function", "name", name));
      break;
  }
  if (rc == 0 && c->parallel_tools == 0)
    rc = air__json_put(out, "parallel_tool_calls", json_false());
  if (rc == 0 && c->user.p != NULL)
    rc = air__json_put(out, "user", air__json_strn(c->user));
  return rc;
}

int air__json_result_text(const air__cpart *p, json_t **out) {
  if (!p->content_string)
    return air__json_joined(p->parts, p->n_parts, "\n", out);
  *out = air__json_strn(p->text);
  return *out != NULL ? 0 : AIR_ENOMEM;
}

int air__json_decode_body(air__decoder *d, const char *body, size_t n,
                          size_t flags, air__body_is_fn is,
                          air__body_walk_fn walk, bool done, air__part_cb cb,
                          void *data) {
  json_t *root = json_loadb(body, n, flags, NULL);
  int rc = root != NULL && is(root) ? walk(d, root, cb, data) : AIR_EPARSE;
  if (rc == 0 && done) d->done = true;
  json_decref(root);
  return rc;
}

int air__json_body_start(air__decoder *d, const json_t *root, air__part_cb cb,
                         void *data) {
  size_t id_n, model_n;
  const char *id = air__json_sv(json_object_get(root, "id"), &id_n);
  const char *model = air__json_sv(json_object_get(root, "model"), &model_n);
  d->started = false;
  return air__emit_start(d, id, id_n, model, model_n, cb, data);
}

int air__json_body_usage(air__decoder *d, const json_t *u, const char *in_key,
                         const char *out_key, air__part_cb cb, void *data) {
  if (!json_is_object(u)) return 0;
  return air__emit_usage(d, air__json_count(json_object_get(u, in_key)),
                         air__json_count(json_object_get(u, out_key)), cb,
                         data);
}

int air__json_override(json_t *root, const char *override_json, unsigned how,
                       air_error *err) {
  if (override_json == NULL) return 0;
  json_t *ov = json_loads(override_json, 0, NULL);
  if (!json_is_object(ov)) {
    json_decref(ov);
    return air__error_set(err, AIR_EINVAL, "override: expected a JSON object");
  }
  /* max_tokens is what rules say (docs/design.md §3): the Responses
   * dialect calls it max_output_tokens. */
  json_t *mt = json_object_get(ov, "max_tokens");
  if ((how & AIR__OVERRIDE_OUTPUT_TOKENS) && mt != NULL &&
      json_object_get(ov, "max_output_tokens") == NULL) {
    json_object_set(ov, "max_output_tokens", mt);
    json_object_del(ov, "max_tokens");
  }
  int rc = 0;
  if (how & AIR__OVERRIDE_NULL_REMOVES) {
    const char *key;
    json_t *v;
    json_object_foreach(ov, key, v) {
      if (json_is_null(v))
        json_object_del(root, key);
      else if (json_object_set(root, key, v) != 0)
        rc = AIR_ENOMEM;
    }
  } else if (json_object_update(root, ov) != 0) {
    rc = AIR_ENOMEM;
  }
  json_decref(ov);
  return rc;
}

int air__json_target(json_t *root, const char *req_model,
                     const air__build_opts *o) {
  const char *model = o->model != NULL ? o->model : req_model;
  int rc = air__json_put(root, "model", json_string(model ? model : ""));
  return rc != 0 ? rc : air__json_put(root, "stream", json_true());
}

int air__build_same(const air__request *req, const air__build_opts *o,
                    air__patch *set, size_t n_set, air__finish_fn finish,
                    air__buf *out, air_error *err) {
  if (req->raw != NULL && o->override_json == NULL) {
    const char *model = o->model != NULL ? o->model : req->model;
    air__buf mv;
    air__buf_init(&mv, AIR__MAX_MODEL_VALUE_BYTES);
    int rc = air__text_cstr(&mv, model);
    set[0].value = mv.p;
    if (rc == 0) rc = air__request_patch(req, set, n_set, out);
    air__buf_cleanup(&mv);
    return rc;
  }
  const json_t *body;
  int rc = air__canon_json_body(req, err, &body);
  if (rc != 0) return rc;
  json_t *root = json_deep_copy(body);
  if (root == NULL) return AIR_ENOMEM;
  rc = finish(root, req->model, o, out, err);
  json_decref(root);
  return rc;
}
