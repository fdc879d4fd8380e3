/*
 * Requests of a caller that speaks Anthropic Messages: the same-dialect
 * upstream body (the byte fast path, or the caller's tree under an
 * override), and the decoding of the body into the canonical request for
 * a target of another dialect (canon.h).
 *
 * Decoding keeps, in canonical form:
 *   - system (a string, or text blocks; cache_control on them is a hint
 *     and is left out);
 *   - user messages: text and image blocks (base64 or url sources),
 *     tool_result blocks (content: a string, or text and image blocks;
 *     is_error); assistant messages: text, tool_use (input as JSON text),
 *     thinking and redacted_thinking (reasoning with their signature or
 *     data, bound to Anthropic);
 *   - tools (custom tools), tool_choice (+ disable_parallel_tool_use),
 *     stop_sequences, max_tokens, temperature, top_p, metadata.user_id;
 *   - as extras (a target of another dialect cannot say them: skipped, or
 *     dropped under drop_params): thinking other than {type: disabled},
 *     server tools (a type other than "custom"), blocks of other types
 *     (document, search_result, ...), image sources other than base64 and
 *     url, and every unknown top-level field;
 *   - nothing of: stream, top_k, service_tier, context_management,
 *     cache_control, metadata other than user_id, citations of blocks,
 *     thinking {type: disabled}, null values (only hints to a provider, or
 *     no effect: docs/design.md §5).
 * A null field counts as absent.
 */
#include <stdio.h>
#include <string.h>

#include "anthropic.h"
#include "codec_json.h"
#include "error.h"
#include "limits.h"

/* The request's tree missing (air__request_tree's rc): AIR_EINVAL "body:
 * expected a JSON object", or out of memory as it is. */
static int tree_error(air_error *err, int rc) {
  if (rc != AIR_EINVAL) return rc;
  return air__error_set(err, rc, "body: expected a JSON object");
}

/* ---- the same dialect ------------------------------------------------------
 */

int air__ant_build_same(const air__request *req, const air__build_opts *o,
                        air__buf *out, air_error *err) {
  /* The caller's text with model, stream and (when missing) max_tokens
   * set: what finish_body does to a copy of the tree. */
  char mt[24];
  snprintf(mt, sizeof(mt), "%u",
           (unsigned)(o->default_max_tokens ? o->default_max_tokens
                                            : DEFAULT_MAX_TOKENS));
  air__patch set[] = {{"model", NULL, AIR__PATCH_SET},
                      {"stream", "true", AIR__PATCH_SET},
                      {"max_tokens", mt, AIR__PATCH_DEFAULT}};
  const json_t *body;
  int rc = req->raw == NULL || o->override_json != NULL
               ? air__request_tree(req, &body)
               : 0;
  if (rc != 0) return tree_error(err, rc);
  rc = air__build_same(req, o, set, 3, air__ant_finish_body, out, err);
  return rc == AIR_ETOOBIG ? air__error_set(err, AIR_EINVAL, "body: too big")
                           : rc;
}

/* ---- decoding into the canonical request -----------------------------------
 */

/* The "type" of a block, or NULL (and an error) when the block is not an
 * object with a string type. */
static const char *block_type(air__cdec *d, const json_t *b, const char *path,
                              int *rc) {
  const char *t = json_string_value(json_object_get(b, "type"));
  if (!json_is_object(b) || t == NULL) {
    *rc =
        air__error_set(d->err, AIR_EINVAL, "%s.type: expected a string", path);
    return NULL;
  }
  return t;
}

/* A text block as a TEXT part. */
static int text_block(air__cdec *d, const json_t *b, const char *path,
                      air__cpart **parts, size_t *n, size_t *cap) {
  const json_t *t = json_object_get(b, "text");
  if (!json_is_string(t))
    return air__error_set(d->err, AIR_EINVAL, "%s.text: expected a string",
                          path);
  return air__canon_json_text_part(d->c, parts, n, cap, t);
}

/*
 * An image block as an IMAGE part: base64 sources keep media type and
 * data, url sources their URL. Another source type is an extra ("PATH.
 * source.type T"); strict: a base64 or url source without its strings is
 * invalid, else (inside a tool result) any undecodable source is an extra
 * naming the block.
 */
static int image_block(air__cdec *d, const json_t *b, const char *path,
                       bool strict, air__cpart **parts, size_t *n,
                       size_t *cap) {
  const json_t *src = json_object_get(b, "source");
  const char *st = json_string_value(json_object_get(src, "type"));
  const json_t *mt = json_object_get(src, "media_type");
  const json_t *dt = json_object_get(src, "data");
  const json_t *url = json_object_get(src, "url");
  bool b64 = st != NULL && strcmp(st, "base64") == 0;
  bool is_url = st != NULL && strcmp(st, "url") == 0;
  bool ok = (b64 && json_is_string(mt) && json_is_string(dt)) ||
            (is_url && json_is_string(url));
  if (!ok && !strict) {
    char f[AIR__MAX_CANON_FIELD_BYTES];
    snprintf(f, sizeof(f), "%s (type image)", path);
    return air__canon_json_opaque(d->c, parts, n, cap, b, f, "image");
  }
  if (b64 && !ok)
    return air__error_set(d->err, AIR_EINVAL,
                          "%s.source: expected media_type and data strings",
                          path);
  if (is_url && !ok)
    return air__error_set(d->err, AIR_EINVAL,
                          "%s.source.url: expected a string", path);
  if (!ok) {
    char f[AIR__MAX_CANON_FIELD_BYTES];
    snprintf(f, sizeof(f), "%s.source.type %s", path,
             st != NULL ? st : "(none)");
    return air__canon_json_opaque(d->c, parts, n, cap, b, f, "image");
  }
  int rc;
  air__cpart *p = air__canon_add_part(d->c, parts, n, cap, AIR__CP_IMAGE, &rc);
  if (p == NULL) return rc;
  p->field = air__canon_fmt(d->c, "%s", path);
  p->type = air__canon_str(d->c, "image", 5);
  if (b64) {
    p->media_type = air__canon_json_str(d->c, mt);
    p->data = air__canon_json_str(d->c, dt);
    return p->media_type.p != NULL && p->data.p != NULL ? 0 : AIR_ENOMEM;
  }
  p->url = air__canon_json_str(d->c, url);
  return p->url.p != NULL ? 0 : AIR_ENOMEM;
}

/* A tool_result block as a TOOL_RESULT part. */
static int tool_result(air__cdec *d, const json_t *b, const char *path,
                       air__cmsg *m) {
  const json_t *id = json_object_get(b, "tool_use_id");
  if (!json_is_string(id))
    return air__error_set(d->err, AIR_EINVAL,
                          "%s.tool_use_id: expected a string", path);
  const json_t *c = json_object_get(b, "content");
  if (c != NULL && !json_is_null(c) && !json_is_string(c) && !json_is_array(c))
    return air__error_set(d->err, AIR_EINVAL,
                          "%s.content: expected a string or an array", path);
  int rc;
  air__cpart *p = air__canon_json_result(d->c, m, id, path, &rc);
  if (p == NULL) return rc;
  p->is_error = json_is_true(json_object_get(b, "is_error"));
  if (!json_is_array(c)) return air__canon_json_result_text(d->c, p, c);
  size_t k;
  const json_t *blk;
  json_array_foreach(c, k, blk) {
    char pk[AIR__MAX_CANON_FIELD_BYTES];
    snprintf(pk, sizeof(pk), "%s.content[%zu]", path, k);
    const char *t = block_type(d, blk, pk, &rc);
    if (t == NULL) return rc;
    if (strcmp(t, "text") == 0) {
      rc = text_block(d, blk, pk, &p->parts, &p->n_parts, &p->cap_parts);
    } else if (strcmp(t, "image") == 0) {
      rc =
          image_block(d, blk, pk, false, &p->parts, &p->n_parts, &p->cap_parts);
    } else {
      char f[AIR__MAX_CANON_FIELD_BYTES + 64];
      snprintf(f, sizeof(f), "%s (type %s)", pk, t);
      rc = air__canon_json_opaque(d->c, &p->parts, &p->n_parts, &p->cap_parts,
                                  blk, f, t);
    }
    if (rc != 0) return rc;
  }
  return 0;
}

/* A tool_use block as a TOOL_CALL part (the input as compact JSON). */
static int tool_use(air__cdec *d, const json_t *b, const char *path,
                    air__cmsg *m) {
  const json_t *id = json_object_get(b, "id");
  const json_t *name = json_object_get(b, "name");
  if (!json_is_string(id) || !json_is_string(name))
    return air__error_set(d->err, AIR_EINVAL,
                          "%s: expected id and name strings", path);
  char f[AIR__MAX_CANON_FIELD_BYTES];
  snprintf(f, sizeof(f), "%s.input", path);
  return air__canon_json_call(d->c, m, id, name, json_object_get(b, "input"),
                              true, path, f);
}

/* A thinking or redacted_thinking block as a REASONING part. */
static int thinking(air__cdec *d, const json_t *b, bool redacted,
                    air__cmsg *m) {
  int rc;
  air__cpart *p = air__canon_add_part(d->c, &m->parts, &m->n_parts,
                                      &m->cap_parts, AIR__CP_REASONING, &rc);
  if (p == NULL) return rc;
  p->redacted = redacted;
  const json_t *t = json_object_get(b, "thinking");
  const json_t *o = json_object_get(b, redacted ? "data" : "signature");
  if (json_is_string(t) && (p->text = air__canon_json_str(d->c, t)).p == NULL)
    return AIR_ENOMEM;
  if (json_is_string(o) && (p->opaque = air__canon_json_str(d->c, o)).p == NULL)
    return AIR_ENOMEM;
  return 0;
}

static int message(air__cdec *d, size_t i, const json_t *jm) {
  const char *role = json_string_value(json_object_get(jm, "role"));
  const json_t *content = json_object_get(jm, "content");
  if (!json_is_string(content) && !json_is_array(content))
    return air__error_set(
        d->err, AIR_EINVAL,
        "messages[%zu].content: expected a string or an array", i);
  bool user = role != NULL && strcmp(role, "user") == 0;
  bool system = role != NULL && strcmp(role, "system") == 0;
  if (!user && !system && (role == NULL || strcmp(role, "assistant") != 0))
    return air__error_set(
        d->err, AIR_EINVAL,
        "messages[%zu].role: expected \"user\" or \"assistant\"", i);
  int rc;
  /* A system message among the turns (Claude Code sends one): a system
   * turn in its place; its text blocks only. */
  air__cmsg *m = air__canon_add_msg(d->c,
                                    system ? AIR__ROLE_SYSTEM
                                    : user ? AIR__ROLE_USER
                                           : AIR__ROLE_ASSISTANT,
                                    &rc);
  if (m == NULL) return rc;
  if (json_is_string(content))
    return air__canon_json_text_part(d->c, &m->parts, &m->n_parts,
                                     &m->cap_parts, content);
  size_t j;
  const json_t *blk;
  json_array_foreach(content, j, blk) {
    char path[64];
    snprintf(path, sizeof(path), "messages[%zu].content[%zu]", i, j);
    const char *t = block_type(d, blk, path, &rc);
    if (t == NULL) return rc;
    if (strcmp(t, "text") == 0) {
      rc = text_block(d, blk, path, &m->parts, &m->n_parts, &m->cap_parts);
    } else if (system) {
      char f[128];
      snprintf(f, sizeof(f), "%s (type %s)", path, t);
      rc = air__canon_json_opaque(d->c, &m->parts, &m->n_parts, &m->cap_parts,
                                  blk, f, t);
    } else if (user && strcmp(t, "image") == 0) {
      rc = image_block(d, blk, path, true, &m->parts, &m->n_parts,
                       &m->cap_parts);
    } else if (user && strcmp(t, "tool_result") == 0) {
      rc = tool_result(d, blk, path, m);
    } else if (!user && strcmp(t, "tool_use") == 0) {
      rc = tool_use(d, blk, path, m);
    } else if (!user && (strcmp(t, "thinking") == 0 ||
                         strcmp(t, "redacted_thinking") == 0)) {
      rc = thinking(d, blk, t[0] == 'r', m);
    } else {
      char f[128];
      snprintf(f, sizeof(f), "%s (type %s)", path, t);
      rc = air__canon_json_opaque(d->c, &m->parts, &m->n_parts, &m->cap_parts,
                                  blk, f, t);
    }
    if (rc != 0) return rc;
  }
  return 0;
}

static int system_prompt(air__cdec *d, const json_t *sys) {
  air__canon *c = d->c;
  int rc = 0;
  if (sys == NULL || json_is_null(sys)) return 0;
  c->has_system = true;
  if (json_is_string(sys)) {
    c->system_string = true;
    return air__canon_json_text_part(c, &c->system, &c->n_system,
                                     &c->cap_system, sys);
  }
  size_t i;
  const json_t *blk;
  json_array_foreach(sys, i, blk) {
    char p[64];
    snprintf(p, sizeof(p), "system[%zu]", i);
    const char *t = block_type(d, blk, p, &rc);
    if (t == NULL) return rc;
    if (strcmp(t, "text") == 0) {
      rc = text_block(d, blk, p, &c->system, &c->n_system, &c->cap_system);
    } else {
      char f[128];
      snprintf(f, sizeof(f), "%s (type %s)", p, t);
      rc = air__canon_json_opaque(c, &c->system, &c->n_system, &c->cap_system,
                                  blk, f, t);
    }
    if (rc != 0) return rc;
  }
  return 0;
}

static int tools(air__cdec *d, const json_t *v) {
  size_t i;
  const json_t *t;
  json_array_foreach(v, i, t) {
    const char *type = json_string_value(json_object_get(t, "type"));
    const json_t *name = json_object_get(t, "name");
    if (!json_is_object(t))
      return air__error_set(d->err, AIR_EINVAL,
                            "tools[%zu]: expected an object", i);
    int rc;
    if (type != NULL && strcmp(type, "custom") != 0) {
      char f[128];
      snprintf(f, sizeof(f), "tools[%zu] (type %s)", i, type);
      if ((rc = air__canon_json_extra(d->c, f, NULL, t)) != 0) return rc;
      continue;
    }
    if (!json_is_string(name))
      return air__error_set(d->err, AIR_EINVAL,
                            "tools[%zu].name: expected a string", i);
    rc = air__canon_json_tool(d->c, name, json_object_get(t, "description"),
                              json_object_get(t, "input_schema"));
    if (rc != 0) return rc;
  }
  return 0;
}

static int tool_choice(air__cdec *d, const json_t *tc) {
  const char *t = json_string_value(json_object_get(tc, "type"));
  air__canon *c = d->c;
  if (t != NULL && strcmp(t, "auto") == 0) {
    c->tool_choice = AIR__TC_AUTO;
  } else if (t != NULL && strcmp(t, "any") == 0) {
    c->tool_choice = AIR__TC_REQUIRED;
  } else if (t != NULL && strcmp(t, "none") == 0) {
    c->tool_choice = AIR__TC_NONE;
  } else if (t != NULL && strcmp(t, "tool") == 0) {
    const json_t *name = json_object_get(tc, "name");
    if (!json_is_string(name))
      return air__error_set(d->err, AIR_EINVAL,
                            "tool_choice.name: expected a string");
    c->tool_choice = AIR__TC_TOOL;
    if ((c->tool_choice_name = air__canon_json_str(c, name)).p == NULL)
      return AIR_ENOMEM;
  } else {
    return air__error_set(d->err, AIR_EINVAL,
                          "tool_choice.type: expected auto, any, tool or none");
  }
  if (json_is_true(json_object_get(tc, "disable_parallel_tool_use")))
    c->parallel_tools = 0;
  return 0;
}

/* thinking {type: enabled, budget_tokens} | {type: adaptive} | {type:
 * disabled} (nothing); another form is an extra. */
static int thinking_field(air__cdec *d, const json_t *v) {
  const char *t = json_string_value(json_object_get(v, "type"));
  air__canon *c = d->c;
  if (t != NULL && strcmp(t, "disabled") == 0) return 0;
  if (t != NULL && strcmp(t, "adaptive") == 0) {
    c->thinking_adaptive = true;
    c->reasoning_field = "thinking";
    return 0;
  }
  if (t != NULL && strcmp(t, "enabled") == 0) {
    const json_t *b = json_object_get(v, "budget_tokens");
    if (!json_is_integer(b) || json_integer_value(b) <= 0)
      return air__error_set(
          d->err, AIR_EINVAL,
          "thinking.budget_tokens: expected a positive integer");
    c->thinking_budget = (int64_t)json_integer_value(b);
    c->reasoning_field = "thinking";
    return 0;
  }
  return air__canon_json_extra(c, "thinking", "thinking", v);
}

/* A format {type: json_schema, schema} (output_config.format, or the
 * older top-level output_format); field names it. */
static int output_format(air__cdec *d, const json_t *v, const char *field) {
  const char *t = json_string_value(json_object_get(v, "type"));
  const json_t *schema = json_object_get(v, "schema");
  if (t == NULL || strcmp(t, "json_schema") != 0 || !json_is_object(schema))
    return air__canon_json_extra(d->c, field, NULL, v);
  d->c->format_field =
      strcmp(field, "output_format") == 0 ? "output_format" : "output_config";
  return air__canon_json_schema(d->c, NULL, schema, NULL);
}

/* output_config {effort, format}; other members are extras. */
static int output_config(air__cdec *d, const json_t *v) {
  const char *k;
  const json_t *m;
  json_object_foreach((json_t *)v, k, m) {
    int rc = 0;
    if (json_is_null(m)) continue;
    if (strcmp(k, "effort") == 0) {
      static const char *const names[] = {"low", "medium", "high", "max"};
      static const air__ceffort efforts[] = {AIR__EFFORT_LOW,
                                             AIR__EFFORT_MEDIUM,
                                             AIR__EFFORT_HIGH, AIR__EFFORT_MAX};
      const char *s = json_string_value(m);
      for (size_t i = 0; s != NULL && i < 4; i++)
        if (strcmp(s, names[i]) == 0) d->c->effort = efforts[i];
      if (d->c->effort == AIR__EFFORT_UNSET)
        rc = air__canon_json_extra(d->c, "output_config.effort", NULL, m);
      else if (d->c->reasoning_field == NULL)
        d->c->reasoning_field = "output_config.effort";
    } else if (strcmp(k, "format") == 0) {
      rc = output_format(d, m, "output_config.format");
    } else {
      char f[160];
      snprintf(f, sizeof(f), "output_config.%.100s", k);
      rc = air__canon_json_extra(d->c, f, NULL, m);
    }
    if (rc != 0) return rc;
  }
  return 0;
}

/* One top-level field other than model, messages, system and stream. */
static int field(air__cdec *d, const char *k, const json_t *v) {
  air__canon *c = d->c;
  if (strcmp(k, "max_tokens") == 0) {
    if (json_is_integer(v) && json_integer_value(v) > 0)
      c->max_tokens = (int64_t)json_integer_value(v);
    return 0;
  }
  if (strcmp(k, "top_p") == 0 || strcmp(k, "temperature") == 0) {
    if (!json_is_number(v))
      return air__error_set(d->err, AIR_EINVAL, "%s: expected a number", k);
    air__canon_json_num(
        k[0] == 't' && k[1] == 'o' ? &c->top_p : &c->temperature, v);
    return 0;
  }
  if (strcmp(k, "stop_sequences") == 0) {
    size_t i;
    const json_t *s;
    json_array_foreach(v, i, s) {
      if (!json_is_string(s))
        return air__error_set(d->err, AIR_EINVAL,
                              "stop_sequences[%zu]: expected a string", i);
      int rc =
          air__canon_add_stop(c, json_string_value(s), json_string_length(s));
      if (rc != 0) return rc;
    }
    return 0;
  }
  if (strcmp(k, "tools") == 0) return tools(d, v);
  if (strcmp(k, "tool_choice") == 0) return tool_choice(d, v);
  if (strcmp(k, "metadata") == 0) {
    const json_t *u = json_object_get(v, "user_id");
    if (json_is_string(u) && (c->user = air__canon_json_str(c, u)).p == NULL)
      return AIR_ENOMEM;
    return 0;
  }
  if (strcmp(k, "thinking") == 0) return thinking_field(d, v);
  if (strcmp(k, "output_config") == 0) return output_config(d, v);
  if (strcmp(k, "output_format") == 0) return output_format(d, v, k);
  /* Only hints to a provider (docs/design.md §5): dropped, never skipped. */
  static const char *const hints[] = {"top_k", "service_tier",
                                      "context_management", "cache_control"};
  if (air__name_in(k, hints, sizeof(hints) / sizeof(hints[0]))) return 0;
  char f[160];
  snprintf(f, sizeof(f), "%.150s", k);
  return air__canon_json_extra(c, f, k, v);
}

int air__ant_decode_request(const air__request *req, air__canon *c,
                            air_error *err) {
  static const char *const own[] = {"model", "messages", "system", "stream"};
  const json_t *in;
  int rc = air__request_tree(req, &in);
  if (rc != 0) return tree_error(err, rc);
  air__cdec d = {c, err};
  rc = system_prompt(&d, json_object_get(in, "system"));
  const json_t *msgs = json_object_get(in, "messages");
  for (size_t i = 0; rc == 0 && i < json_array_size(msgs); i++)
    rc = message(&d, i, json_array_get(msgs, i));
  if (rc != 0) return rc;
  return air__canon_json_fields(&d, in, own, sizeof(own) / sizeof(own[0]),
                                field);
}
