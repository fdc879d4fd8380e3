/*
 * Decoding a caller's body into the canonical request: the pieces every
 * dialect's decode_request shares (codec_json.h). Each copies what it
 * keeps into the canon's arena and returns 0, AIR_ENOMEM, or AIR_EINVAL
 * with err naming the field.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "codec_json.h"
#include "codec_text.h"
#include "error.h"
#include "limits.h"

air__str air__canon_json_str(air__canon *c, const json_t *v) {
  return air__canon_str(c, json_string_value(v), json_string_length(v));
}

air__str air__canon_json_text(air__canon *c, const json_t *v) {
  air__str s = {NULL, 0};
  char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
  if (t != NULL) {
    s = air__canon_str(c, t, strlen(t));
    free(t);
  }
  return s;
}

int air__canon_json_extra(air__canon *c, const char *field, const char *key,
                          const json_t *v) {
  air__str raw = {NULL, 0};
  if (v != NULL && (raw = air__canon_json_text(c, v)).p == NULL)
    return AIR_ENOMEM;
  const char *k = key != NULL ? air__canon_fmt(c, "%s", key) : NULL;
  if (key != NULL && k == NULL) return AIR_ENOMEM;
  return air__canon_add_extra(c, air__canon_fmt(c, "%s", field), k, raw);
}

void air__canon_json_num(air__cnum *n, const json_t *v) {
  n->set = true;
  n->is_int = json_is_integer(v);
  n->i = n->is_int ? (int64_t)json_integer_value(v) : 0;
  n->d = json_number_value(v);
}

int air__canon_json_text_part(air__canon *c, air__cpart **parts, size_t *n,
                              size_t *cap, const json_t *v) {
  int rc;
  air__cpart *p = air__canon_add_part(c, parts, n, cap, AIR__CP_TEXT, &rc);
  if (p == NULL) return rc;
  p->text = air__canon_json_str(c, v);
  return p->text.p != NULL ? 0 : AIR_ENOMEM;
}

int air__canon_json_opaque(air__canon *c, air__cpart **parts, size_t *n,
                           size_t *cap, const json_t *v, const char *field,
                           const char *type) {
  int rc = air__canon_json_extra(c, field, NULL, NULL);
  if (rc != 0) return rc;
  air__cpart *p = air__canon_add_part(c, parts, n, cap, AIR__CP_OPAQUE, &rc);
  if (p == NULL) return rc;
  p->raw = air__canon_json_text(c, v);
  p->field = air__canon_fmt(c, "%s", field);
  p->type = air__canon_str(c, type, strlen(type));
  return p->raw.p != NULL && p->field != NULL ? 0 : AIR_ENOMEM;
}

/* The image at URL string u into p (air__canon_json_image). */
static int image_url(air__canon *c, const json_t *u, const char *field,
                     air__cpart *p, air_error *err) {
  if (!json_is_string(u))
    return air__error_set(err, AIR_EINVAL, "%s: expected a string", field);
  const char *url = json_string_value(u);
  size_t n = json_string_length(u);
  if (n >= 5 && strncasecmp(url, "data:", 5) == 0) {
    const char *comma = memchr(url, ',', n);
    const char *head = url + 5;
    size_t hn = comma ? (size_t)(comma - head) : 0;
    const char *semi = memchr(head, ';', hn);
    if (comma == NULL || hn < 7 || memcmp(comma - 7, ";base64", 7) != 0 ||
        semi == NULL || semi == head)
      return air__error_set(
          err, AIR_EINVAL,
          "%s: expected a base64 data URL (data:TYPE;base64,...)", field);
    p->media_type = air__canon_str(c, head, (size_t)(semi - head));
    p->data = air__canon_str(c, comma + 1, n - (size_t)(comma + 1 - url));
    return p->media_type.p != NULL && p->data.p != NULL ? 0 : AIR_ENOMEM;
  }
  if ((n >= 7 && strncasecmp(url, "http://", 7) == 0) ||
      (n >= 8 && strncasecmp(url, "https://", 8) == 0)) {
    p->url = air__canon_str(c, url, n);
    return p->url.p != NULL ? 0 : AIR_ENOMEM;
  }
  return air__error_set(err, AIR_EINVAL,
                        "%s: expected an http(s) or base64 data URL", field);
}

int air__canon_json_image(air__cdec *d, air__cpart **parts, size_t *n,
                          size_t *cap, const json_t *u, const char *field,
                          const char *type, const char *url_field) {
  int rc;
  air__cpart *p = air__canon_add_part(d->c, parts, n, cap, AIR__CP_IMAGE, &rc);
  if (p == NULL) return rc;
  p->field = air__canon_fmt(d->c, "%s", field);
  p->type = air__canon_str(d->c, type, strlen(type));
  return image_url(d->c, u, url_field, p, d->err);
}

int air__canon_json_call(air__canon *c, air__cmsg *m, const json_t *id,
                         const json_t *name, const json_t *args, bool args_json,
                         const char *field, const char *args_field) {
  int rc;
  air__cpart *p = air__canon_add_part(c, &m->parts, &m->n_parts, &m->cap_parts,
                                      AIR__CP_TOOL_CALL, &rc);
  if (p == NULL) return rc;
  bool has_args = args_json ? args != NULL : json_is_string(args);
  p->id = air__canon_json_str(c, id);
  p->name = air__canon_json_str(c, name);
  if (has_args)
    p->args = args_json ? air__canon_json_text(c, args)
                        : air__canon_json_str(c, args);
  p->field = air__canon_fmt(c, "%s", field);
  p->args_field = air__canon_fmt(c, "%s", args_field);
  return p->id.p == NULL || p->name.p == NULL || p->args_field == NULL ||
                 (has_args && p->args.p == NULL)
             ? AIR_ENOMEM
             : 0;
}

air__cpart *air__canon_json_result(air__canon *c, air__cmsg *m,
                                   const json_t *id, const char *field,
                                   int *rc) {
  air__cpart *p = air__canon_add_part(c, &m->parts, &m->n_parts, &m->cap_parts,
                                      AIR__CP_TOOL_RESULT, rc);
  if (p == NULL) return NULL;
  p->id = air__canon_json_str(c, id);
  p->field = air__canon_fmt(c, "%s", field);
  if (p->id.p != NULL) return p;
  *rc = AIR_ENOMEM;
  return NULL;
}

int air__canon_json_result_text(air__canon *c, air__cpart *p, const json_t *v) {
  p->content_string = true;
  p->text = air__canon_str(c, json_string_value(v),
                           json_is_string(v) ? json_string_length(v) : 0);
  return p->text.p != NULL ? 0 : AIR_ENOMEM;
}

int air__canon_json_tool(air__canon *c, const json_t *name, const json_t *desc,
                         const json_t *params) {
  air__ctool *ct;
  int rc = air__canon_add_tool(c, &ct);
  if (rc != 0) return rc;
  ct->name = air__canon_json_str(c, name);
  if (ct->name.p == NULL) return AIR_ENOMEM;
  if (json_is_string(desc) &&
      (ct->description = air__canon_json_str(c, desc)).p == NULL)
    return AIR_ENOMEM;
  if (json_is_object(params) &&
      (ct->schema = air__canon_json_text(c, params)).p == NULL)
    return AIR_ENOMEM;
  return 0;
}

int air__canon_json_schema(air__canon *c, const json_t *name,
                           const json_t *schema, const json_t *strict) {
  c->format = AIR__FMT_JSON_SCHEMA;
  if (json_is_string(name) &&
      (c->format_name = air__canon_json_str(c, name)).p == NULL)
    return AIR_ENOMEM;
  if (json_is_boolean(strict)) c->format_strict = json_is_true(strict);
  c->format_schema = json_is_object(schema) ? air__canon_json_text(c, schema)
                                            : air__canon_str(c, "{}", 2);
  return c->format_schema.p != NULL ? 0 : AIR_ENOMEM;
}

bool air__canon_effort_named(const char *s, air__ceffort *e) {
  static const char *const names[] = {"none",   "minimal", "low",
                                      "medium", "high",    "xhigh"};
  for (size_t i = 0; s != NULL && i < sizeof(names) / sizeof(names[0]); i++) {
    if (strcmp(s, names[i]) == 0) {
      *e = i == 5 ? AIR__EFFORT_MAX : (air__ceffort)(AIR__EFFORT_NONE + i);
      return true;
    }
  }
  return false;
}

int air__canon_json_tool_choice(air__cdec *d, const json_t *tc,
                                const json_t *name, const char *name_field) {
  air__canon *c = d->c;
  const char *s = json_string_value(tc);
  if (s != NULL) {
    air__ctool_choice v = strcmp(s, "auto") == 0       ? AIR__TC_AUTO
                          : strcmp(s, "required") == 0 ? AIR__TC_REQUIRED
                          : strcmp(s, "none") == 0     ? AIR__TC_NONE
                                                       : AIR__TC_UNSET;
    if (v == AIR__TC_UNSET)
      return air__canon_json_extra(c, "tool_choice", "tool_choice", tc);
    c->tool_choice = v;
    return 0;
  }
  const char *type = json_string_value(json_object_get(tc, "type"));
  if (type == NULL || strcmp(type, "function") != 0)
    return air__canon_json_extra(c, "tool_choice", "tool_choice", tc);
  if (!json_is_string(name))
    return air__error_set(d->err, AIR_EINVAL, "%s: expected a string",
                          name_field);
  c->tool_choice = AIR__TC_TOOL;
  c->tool_choice_name = air__canon_json_str(c, name);
  return c->tool_choice_name.p != NULL ? 0 : AIR_ENOMEM;
}

int air__canon_json_format(air__cdec *d, const json_t *fmt, const char *field,
                           const char *nest, const char *key, const json_t *v) {
  air__canon *c = d->c;
  const char *t = json_string_value(json_object_get(fmt, "type"));
  if (t != NULL && strcmp(t, "text") == 0) return 0;
  c->format_field = field;
  if (t != NULL && strcmp(t, "json_object") == 0) {
    c->format = AIR__FMT_JSON_OBJECT;
    return 0;
  }
  if (t == NULL || strcmp(t, "json_schema") != 0)
    return air__canon_json_extra(c, field, key, v);
  char f[96];
  const json_t *js = fmt;
  snprintf(f, sizeof(f), "%s%s%s", field, nest ? "." : "", nest ? nest : "");
  if (nest != NULL && !json_is_object(js = json_object_get(fmt, nest)))
    return air__error_set(d->err, AIR_EINVAL, "%s: expected an object", f);
  const json_t *schema = json_object_get(js, "schema");
  if (schema != NULL && !json_is_null(schema) && !json_is_object(schema))
    return air__error_set(d->err, AIR_EINVAL, "%s.schema: expected an object",
                          f);
  return air__canon_json_schema(c, json_object_get(js, "name"), schema,
                                json_object_get(js, "strict"));
}

int air__canon_json_openai_field(air__canon *c, const char *key,
                                 const json_t *v, air_error *err, bool *done) {
  *done = true;
  if (strcmp(key, "parallel_tool_calls") == 0) {
    if (json_is_false(v)) {
      c->parallel_tools = 0;
      return 0;
    }
    return json_is_true(v) ? 0 : air__canon_json_extra(c, key, key, v);
  }
  bool temperature = strcmp(key, "temperature") == 0;
  if (temperature || strcmp(key, "top_p") == 0) {
    if (!json_is_number(v))
      return air__error_set(err, AIR_EINVAL, "%s: expected a number", key);
    air__canon_json_num(temperature ? &c->temperature : &c->top_p, v);
    return 0;
  }
  if (strcmp(key, "user") == 0) {
    if (!json_is_string(v))
      return air__error_set(err, AIR_EINVAL, "%s: expected a string", key);
    c->user = air__canon_json_str(c, v);
    return c->user.p != NULL ? 0 : AIR_ENOMEM;
  }
  *done = false;
  return 0;
}

int air__canon_json_body(const air__request *req, air_error *err,
                         const json_t **body) {
  int rc = air__request_tree(req, body);
  if (rc != AIR_EINVAL) return rc;
  return air__error_set(err, rc, "request: expected a parsed request");
}

int air__canon_json_fields(air__cdec *d, const json_t *body,
                           const char *const *skip, size_t n_skip,
                           air__cfield_fn field) {
  const char *key;
  const json_t *v;
  json_object_foreach((json_t *)body, key, v) {
    if (json_is_null(v) || air__name_in(key, skip, n_skip)) continue;
    int rc = field(d, key, v);
    if (rc != 0) return rc;
  }
  return 0;
}

int air__canon_json_objects(air__cdec *d, const json_t *v, const char *key,
                            air__cobject_fn each) {
  char field[64];
  if (!json_is_array(v))
    return air__error_set(d->err, AIR_EINVAL, "%s: expected an array", key);
  size_t i;
  const json_t *el;
  json_array_foreach(v, i, el) {
    snprintf(field, sizeof(field), "%s[%zu]", key, i);
    if (!json_is_object(el))
      return air__error_set(d->err, AIR_EINVAL, "%s: expected an object",
                            field);
    int rc = each(d, el, field, i);
    if (rc != 0) return rc;
  }
  return 0;
}

int air__canon_json_content(air__cdec *d, const json_t *v, const char *base,
                            air__cpart **parts, size_t *n, size_t *cap,
                            bool system, air__cpart_fn part) {
  char field[AIR__MAX_CANON_FIELD_BYTES];
  if (v == NULL || json_is_null(v)) return 0;
  if (json_is_string(v))
    return air__canon_json_text_part(d->c, parts, n, cap, v);
  if (!json_is_array(v))
    return air__error_set(d->err, AIR_EINVAL,
                          "%s.content: expected a string or an array", base);
  size_t j;
  const json_t *jp;
  json_array_foreach(v, j, jp) {
    snprintf(field, sizeof(field), "%s.content[%zu]", base, j);
    const char *type = json_string_value(json_object_get(jp, "type"));
    if (!json_is_object(jp))
      return air__error_set(d->err, AIR_EINVAL, "%s: expected an object",
                            field);
    if (type == NULL)
      return air__error_set(d->err, AIR_EINVAL, "%s.type: expected a string",
                            field);
    int rc = part(d, jp, field, type, parts, n, cap, system);
    if (rc != 0) return rc;
  }
  return 0;
}
