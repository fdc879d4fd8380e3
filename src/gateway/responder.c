/* The responder: see responder.h. It decides what to send; the sends are
 * the caller's (chat_ep.c, plain_ep.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "canon.h"
#include "limits.h"
#include "responder.h"

/* A value holding CR or LF (a direct model name a caller chose) is left
 * out, so the answer still goes with its other fields (build_head would
 * refuse the whole head). */
static void put(air__responder *rs, const char *name, const char *value) {
  if (rs->n_head >= AIR__RESP_MAX_HEADERS) return;
  if (value != NULL && strpbrk(value, "\r\n") != NULL) return;
  rs->head[rs->n_head].name = name;
  rs->head[rs->n_head].value = value ? value : "";
  rs->n_head++;
}

/* The ids of the answer: x-request-id always; for Anthropic callers also
 * request-id (the SDK reads it), the Anthropic upstream's own when one
 * answered, else the gateway's request id. */
static void put_ids(air__responder *rs) {
  put(rs, "x-request-id", rs->rid);
  if (rs->dialect == AIR_DIALECT_ANTHROPIC)
    put(rs, "request-id", rs->upstream_rid[0] ? rs->upstream_rid : rs->rid);
}

void air__responder_init(air__responder *rs, air_dialect dialect,
                         const air__request *req, const char *rid) {
  memset(rs, 0, sizeof(*rs));
  rs->dialect = dialect;
  rs->req = req;
  rs->rid = rid ? rid : "";
  rs->stream = req->stream;
  rs->outcome = "ok";
  snprintf(rs->sub_id, sizeof(rs->sub_id), "%s%s",
           air__dialect_get(dialect)->id_prefix, rs->rid);
  air__buf_init(&rs->out, AIR__MAX_ANSWER_BYTES);
  air__buf_init(&rs->held, AIR__MAX_ANSWER_BYTES);
}

void air__responder_cleanup(air__responder *rs) {
  if (rs->enc != NULL) {
    air__encoder_cleanup(rs->enc);
    free(rs->enc);
  }
  if (rs->observe) air__sse_cleanup(&rs->obs);
  if (rs->agg != NULL) {
    air__aggregate_cleanup(rs->agg);
    free(rs->agg);
  }
  air__buf_cleanup(&rs->out);
  air__buf_cleanup(&rs->held);
}

/* The aggregate of a whole answer, made when first needed (a streamed
 * caller needs none once it is committed, so it allocates none); NULL
 * when out of memory. */
static air__aggregate *aggregate(air__responder *rs) {
  if (rs->agg == NULL) {
    rs->agg = malloc(sizeof(*rs->agg));
    if (rs->agg != NULL) {
      air__aggregate_init(rs->agg);
      rs->agg->idents.id = rs->sub_id;
      rs->agg->idents.model = rs->sub_model;
    }
  }
  return rs->agg;
}

/* A forwarded event, read again as SSE, shown to the encoder so that a
 * continuation can take the stream over where it stands. */
static int observe_event(void *data, const air__sse_event *ev) {
  air__responder *rs = data;
  air__dialect_get(rs->dialect)
      ->encoder_observe(rs->enc, ev, rs->obs_parts, rs->obs_n);
  return 0;
}

int air__responder_commit(air__responder *rs, const air__commit_info *ci,
                          uint64_t created_s) {
  rs->passthrough = ci->upstream == rs->dialect;
  /* Tools left out of a translated request (docs/design.md §5). */
  rs->dropped = !rs->passthrough && rs->req->canon != NULL
                    ? rs->req->canon->dropped
                    : NULL;
  rs->upstream_rid[0] = '\0';
  if (rs->sub_model[0] == '\0' && ci->target != NULL) {
    const char *slash = strchr(ci->target, '/');
    snprintf(rs->sub_model, sizeof(rs->sub_model), "%s",
             slash ? slash + 1 : ci->target);
  }
  for (size_t i = 0; ci->upstream == AIR_DIALECT_ANTHROPIC && i < ci->n_headers;
       i++) {
    const air_header *h = &ci->headers[i];
    if (h->name_len == 10 && strncasecmp(h->name, "request-id", 10) == 0 &&
        h->value_len < sizeof(rs->upstream_rid)) {
      memcpy(rs->upstream_rid, h->value, h->value_len);
      rs->upstream_rid[h->value_len] = '\0';
    }
  }
  if (!rs->stream || rs->gone) return 0;
  snprintf(rs->attempts, sizeof(rs->attempts), "%u", ci->made);
  rs->status = 200;
  rs->n_head = 0;
  put(rs, "content-type", "text/event-stream");
  put(rs, "cache-control", "no-cache");
  put(rs, "x-airetry-attempts", rs->attempts);
  put(rs, "x-airetry-target", ci->target);
  put_ids(rs);
  if (rs->dropped != NULL) put(rs, "x-airetry-dropped", rs->dropped);
  /* The encoder is allocated here, not with the responder: a stream
   * waiting for its first token holds 1 KB less. */
  if (rs->enc == NULL) rs->enc = calloc(1, sizeof(*rs->enc));
  if (rs->enc == NULL) {
    rs->lost = true; /* answered as an error, whole (air__responder_end) */
    return 0;
  }
  rs->began = true;
  air__dialect_get(rs->dialect)->encoder_init(rs->enc, rs->req, created_s);
  rs->enc->idents.id = rs->sub_id;
  rs->enc->idents.model = rs->sub_model;
  if (ci->continuable && rs->passthrough &&
      air__dialect_get(rs->dialect)->encoder_observe != NULL) {
    rs->observe = true;
    air__sse_init(&rs->obs, observe_event, rs);
  }
  return 1;
}

/* Part of the answer could not be kept: the request ends without a success
 * (a non-streamed caller gets an error, a streamed one a cut connection:
 * never a clean end of a shortened answer). */
static int lose(air__responder *rs) {
  rs->lost = true;
  return 1;
}

/* Whether ev's START carries an id or model over AIR__MAX_IDENT_BYTES. */
static bool over_ident(const air__gate_event *ev) {
  for (size_t i = 0; i < ev->n_parts; i++)
    if (ev->parts[i].kind == AIR_PART_START &&
        (ev->parts[i].id_len > AIR__MAX_IDENT_BYTES ||
         ev->parts[i].name_len > AIR__MAX_IDENT_BYTES))
      return true;
  return false;
}

int air__responder_event(air__responder *rs, const air__gate_event *ev) {
  if (rs->lost) return 0;
  if (!rs->stream) {
    air__aggregate *a = aggregate(rs);
    if (a == NULL) return lose(rs);
    for (size_t i = 0; i < ev->n_parts; i++)
      if (air__aggregate_add(a, &ev->parts[i]) != 0) return lose(rs);
    return 0;
  }
  if (!rs->began || rs->gone) return 0;
  if (!rs->decided && (ev->n_parts > 0 || ev->raw == NULL)) {
    /* Decided on the first event with parts (its START): an upstream id or
     * model over the limit turns passthrough off, so that the encoder
     * writes the replacements (dialect.h, "identifiers"). */
    rs->decided = true;
    rs->passthrough = rs->passthrough && ev->raw != NULL && !over_ident(ev);
    rs->enc->passthrough = rs->passthrough;
  }
  if (rs->passthrough && ev->raw != NULL) {
    if (ev->flags & (AIR__EV_TERMINATOR | AIR__EV_ERROR)) {
      /* A Responses stream's end (response.completed) carries the output
       * and usage: held, and sent only when the answer ends well. */
      if ((ev->flags & AIR__EV_TERMINATOR) &&
          rs->dialect == AIR_DIALECT_OPENAI_RESPONSES &&
          air__buf_add(&rs->held, ev->raw, ev->raw_len) != 0)
        return lose(rs);
      return 0;
    }
    if (rs->observe) {
      /* One forwarded event is exactly one SSE event's bytes. */
      rs->obs_parts = ev->parts;
      rs->obs_n = ev->n_parts;
      air__sse_reset(&rs->obs);
      if (air__sse_feed(&rs->obs, ev->raw, ev->raw_len) == 0)
        air__sse_finish(&rs->obs);
    }
    if ((ev->flags & AIR__EV_USAGE_ONLY) && !rs->req->include_usage) return 0;
    if (air__buf_add(&rs->out, ev->raw, ev->raw_len) != 0) return lose(rs);
  } else {
    const air__dialect_ops *ops = air__dialect_get(rs->dialect);
    for (size_t i = 0; i < ev->n_parts; i++)
      if (ev->parts[i].kind != AIR_PART_ERROR &&
          ops->encode_part(rs->enc, &ev->parts[i], &rs->out) != 0)
        return lose(rs);
  }
  return 0;
}

void air__responder_end(air__responder *rs, const air__exchange_result *res,
                        uint64_t created_s) {
  const air__dialect_ops *ops = air__dialect_get(rs->dialect);
  rs->status = 200;
  rs->n_head = 0;
  rs->outcome = res->rc == 0               ? "ok"
                : res->rc == AIR_ECANCELED ? "aborted"
                                           : "error";
  snprintf(rs->attempts, sizeof(rs->attempts), "%u", res->n_attempts);
  rs->replaced = (rs->agg != NULL ? rs->agg->idents.replaced : 0) |
                 (rs->enc != NULL ? rs->enc->idents.replaced : 0);
  bool answer = false; /* a whole answer for a non-streamed caller is ready */
  if (!rs->gone && !rs->began && res->rc == 0 && !rs->lost) {
    air__buf_reset(&rs->out);
    air__aggregate *a = aggregate(rs);
    if (a != NULL) {
      a->created = created_s;
      answer = ops->encode_response(a, &rs->out) == 0;
    }
  }
  if (rs->gone || (res->rc == AIR_ECANCELED && !rs->lost)) {
    rs->status = 499;
    rs->end = AIR__RESP_ABORT;
  } else if (rs->began) {
    int erc = AIR_ETOOBIG;
    if (rs->lost)
      ;
    else if (res->rc == 0 && rs->held.n > 0 &&
             (erc = air__buf_add(&rs->out, rs->held.p, rs->held.n)) != 0)
      ;
    else if (res->rc == 0)
      erc = ops->encode_end(rs->enc, &rs->out);
    else
      erc = ops->encode_error_event(rs->enc, res->reason,
                                    res->message && *res->message
                                        ? res->message
                                        : air_reason_name(res->reason),
                                    &rs->out);
    if (erc != 0) {
      /* The end cannot be written: the connection is cut, so the caller
       * never sees a clean end of a shortened answer. */
      rs->end = AIR__RESP_ABORT;
      rs->outcome = "error_after_commit";
    } else {
      rs->end = AIR__RESP_STREAM_END;
      if (res->rc != 0) rs->outcome = "error_after_commit";
    }
  } else if (answer) {
    put(rs, "content-type", "application/json");
    put(rs, "x-airetry-attempts", rs->attempts);
    put_ids(rs);
    if (res->answered) put(rs, "x-airetry-target", res->answered);
    if (rs->dropped != NULL) put(rs, "x-airetry-dropped", rs->dropped);
    rs->end = AIR__RESP_WHOLE;
  } else {
    air_reason reason = res->reason;
    const char *message = res->message;
    char m[AIR__MAX_NAME_BYTES + 64];
    if (res->rc == 0 || rs->lost) {
      /* The answer came but cannot be passed on whole. */
      reason = AIR_REASON_MALFORMED;
      snprintf(m, sizeof(m),
               "%s: the answer is over the gateway's limits (malformed)",
               res->answered ? res->answered : res->target);
      message = m;
      rs->outcome = "error";
    }
    rs->status =
        air__final_status(reason, res->rc == 0 || rs->lost ? 0 : res->status);
    air__buf_reset(&rs->out);
    if (ops->encode_error_body(rs->status, reason, message, res->log,
                               res->n_log, &rs->out) != 0) {
      /* Over the limits itself (a huge attempt log): the error alone. */
      air__buf_reset(&rs->out);
      if (ops->encode_error_body(rs->status, reason, message, NULL, 0,
                                 &rs->out) != 0)
        air__buf_reset(&rs->out);
    }
    snprintf(rs->retry_after, sizeof(rs->retry_after), "%llu",
             (unsigned long long)((res->retry_after_ms + 999) / 1000));
    /* x-airetry-target names only a target that answered: none did. */
    put(rs, "content-type", "application/json");
    put(rs, "x-should-retry", "false");
    put(rs, "x-airetry-attempts", rs->attempts);
    put_ids(rs);
    if (res->has_retry_after && (rs->status == 429 || rs->status == 503))
      put(rs, "retry-after", rs->retry_after);
    rs->end = AIR__RESP_WHOLE;
  }
}

int air__responder_continue(air__responder *rs, const air__continue_info *ci) {
  if (rs->lost) return 0;
  rs->continued = true;
  if (!rs->stream) {
    air__aggregate *a = aggregate(rs);
    if (a == NULL) return lose(rs);
    air__aggregate_add_usage(a, ci->input_tokens, ci->output_tokens);
    if (air__aggregate_add_continued(a, ci->target, ci->at_char) != 0)
      return lose(rs);
    return 0;
  }
  if (!rs->began) return 0;
  /* Passthrough ends at the seam: the raw events were the first
   * attempt's; the continuation's parts are encoded from here on. */
  rs->passthrough = false;
  rs->decided = true;
  air__buf_reset(&rs->held);
  air__encoder_take_over(rs->enc);
  air__encoder_add_usage(rs->enc, ci->input_tokens, ci->output_tokens);
  if (air__encoder_add_continued(rs->enc, ci->target, ci->at_char) != 0)
    return lose(rs);
  return 0;
}

void air__responder_keepalive(air__responder *rs) {
  const air__dialect_ops *ops = air__dialect_get(rs->dialect);
  if (!rs->stream || !rs->began || rs->gone || rs->lost ||
      ops->encode_keepalive == NULL)
    return;
  if (ops->encode_keepalive(rs->enc, &rs->out) != 0) lose(rs);
}
