/*
 * The jansson helpers of src/codec (codec_json.h): inserting, dumping and
 * reading values, the pieces of an upstream body the dialects build alike,
 * and the same-dialect body.
 */
#include <string.h>

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
  const json_t *body = air__request_body(req);
  if (!json_is_object(body))
    return air__error_set(err, AIR_EINVAL,
                          "request: expected a parsed request");
  json_t *root = json_deep_copy(body);
  if (root == NULL) return AIR_ENOMEM;
  int rc = finish(root, req->model, o, out, err);
  json_decref(root);
  return rc;
}
