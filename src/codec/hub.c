/*
 * The hub (docs/design.md §1, 5): every translation is the caller
 * dialect's decode_request into the canonical request (canon.h), then the
 * target's can_express and encode_request. A caller of the target's own
 * dialect takes the target's build_same (the byte fast path) and never
 * builds the canonical form. The canonical form is built once per request,
 * on the first translation, and kept on the request for its next attempts
 * (and for can_express before them).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "canon.h"
#include "dialect.h"

/* A message for a build that failed without one (out of memory, over a
 * limit), as the pairwise builders gave it. */
static int plain_error(air_error *err, int rc) {
  if (err != NULL && err->message[0] == '\0') {
    err->code = rc;
    snprintf(err->message, sizeof(err->message), "%s",
             rc == AIR_ENOMEM    ? "out of memory"
             : rc == AIR_ETOOBIG ? "request too large to translate"
                                 : "request: cannot be translated");
  }
  return rc;
}

/*
 * req's canonical form, built on first use by the caller dialect's
 * decode_request; NULL with *rc (and err) when it cannot be built (a
 * request that cannot be decoded is decoded again by the next attempt,
 * which gives the same message; cold).
 */
const air__canon *air__request_canon(const air__request *req, air_error *err,
                                     int *rc) {
  /* A cache on a request the callers hold as const (air__request_body
   * does the same). NOLINTNEXTLINE(clang-diagnostic-cast-qual) */
  air__request *w = (air__request *)(uintptr_t)req;
  if (w->canon != NULL) {
    *rc = 0;
    return w->canon;
  }
  air__canon *c = malloc(sizeof(*c));
  if (c == NULL) {
    *rc = AIR_ENOMEM;
    return NULL;
  }
  air__canon_init(c, req->dialect);
  c->model = air__arena_strndup(&c->arena, req->model,
                                req->model != NULL ? strlen(req->model) : 0);
  *rc = c->model != NULL ? 0 : AIR_ENOMEM;
  if (*rc == 0)
    *rc = air__dialect_get(req->dialect)->decode_request(req, c, err);
  if (*rc != 0) {
    air__canon_cleanup(c);
    free(c);
    return NULL;
  }
  w->canon = c;
  return c;
}

/*
 * State kept upstream (Responses previous_response_id, ...) is only at the
 * caller's provider: a target of another dialect, or of the same dialect
 * and another provider (o->other_provider), cannot serve a request that
 * refers to it; drop_params does not drop it. 0, AIR_ENOTSUP naming the
 * field, or an error of building the canonical form.
 */
int air__request_stateful(const air__dialect_ops *target,
                          const air__request *req, const air__build_opts *o,
                          air_error *err) {
  const air__dialect_ops *caller = air__dialect_get(req->dialect);
  if (caller == NULL || caller->stateful_field == NULL) return 0;
  bool same = req->dialect == target->api;
  if (same && !o->other_provider) return 0;
  int rc;
  const air__canon *c = air__request_canon(req, err, &rc);
  if (c == NULL) return rc;
  char name[96];
  snprintf(name, sizeof(name), "%s%s", same ? "another provider's " : "",
           target->name);
  return caller->stateful_field(c, name, err);
}

int air__request_can_express(const air__dialect_ops *target,
                             const air__request *req, const air__build_opts *o,
                             air_error *err) {
  if (err != NULL) {
    err->code = 0;
    err->message[0] = '\0';
  }
  if (req == NULL || target == NULL || o == NULL) return AIR_EINVAL;
  int rc = air__request_stateful(target, req, o, err);
  if (rc != 0) return rc;
  if (req->dialect == target->api || o->drop_params) return 0;
  const air__canon *c = air__request_canon(req, err, &rc);
  if (c == NULL) return rc;
  return target->can_express(c, o, err);
}

int air__request_build(const air__dialect_ops *target, const air__request *req,
                       const air__build_opts *o, air__buf *out,
                       air_error *err) {
  if (err != NULL) {
    err->code = 0;
    err->message[0] = '\0';
  }
  if (req == NULL || o == NULL || target == NULL) {
    if (err != NULL) {
      err->code = AIR_EINVAL;
      snprintf(err->message, sizeof(err->message),
               "request: expected a parsed request");
    }
    return AIR_EINVAL;
  }
  size_t mark = out->n;
  if (o->json_tool != NULL) *o->json_tool = false;
  int rc = air__request_stateful(target, req, o, err);
  if (rc == 0 && req->dialect == target->api) {
    rc = target->build_same(req, o, out, err);
  } else if (rc == 0) {
    const air__canon *c = air__request_canon(req, err, &rc);
    if (c != NULL && !o->drop_params) rc = target->can_express(c, o, err);
    if (rc == 0) rc = target->encode_request(c, o, out, err);
  }
  if (rc != 0) {
    out->n = mark;
    if (out->p != NULL) out->p[mark] = '\0';
    plain_error(err, rc);
  }
  return rc;
}
