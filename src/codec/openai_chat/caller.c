/*
 * Parts encoded for a caller that speaks OpenAI chat completions: stream
 * chunks, the end, errors after commit, whole responses and final error
 * bodies (docs/design.md §5).
 *
 * Choices where the API is silent: empty TEXT/REASONING/REFUSAL/TOOL_DELTA
 * parts write nothing; a second START or FINISH writes nothing. encode_end
 * after no FINISH writes a finish chunk ("stop") so a clean end always
 * carries a finish_reason; the usage chunk is written only when the caller
 * asked for it and a USAGE part was seen. ids and model names are cut at
 * a NUL byte; over AIR__MAX_IDENT_BYTES they are replaced (dialect.h,
 * "identifiers").
 * encode_response: "created" comes from air__aggregate.created; a tool call
 * without arguments gets "{}" (clients JSON.parse them); a finish of NONE
 * is "stop"; an empty id is "chatcmpl-airetry".
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "limits.h"
#include "openai_chat.h"

/* ---- encoding: the stream
 * ----------------------------------------------------------- */

static void set_ident(air__encoder *e, const char *id, size_t id_n,
                      const char *model, size_t model_n) {
  /* air__ident_fit() returns 0 for a NULL string, so id and model are non-NULL
   * wherever they are copied (the analyzer misses it). */
  size_t k = air__ident_fit(id, id_n, sizeof(e->id) - 1);
  if (k == 0) {
    memcpy(e->id, DEFAULT_ID, sizeof(DEFAULT_ID));
  } else {
    /* NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): see above */
    memcpy(e->id, id, k);
    e->id[k] = '\0';
  }
  k = air__ident_fit(model, model_n, sizeof(e->model) - 1);
  /* NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): see above */
  if (k > 0) memcpy(e->model, model, k);
  e->model[k] = '\0';
}

void air__oai_encoder_init(air__encoder *e, const air__request *req,
                           uint64_t created_s) {
  memset(e, 0, sizeof(*e));
  e->api = AIR_DIALECT_OPENAI;
  e->include_usage = req != NULL && req->include_usage;
  e->created = created_s;
  e->open_block = -1;
}

/* 'data: {"id":…,"object":"chat.completion.chunk","created":…,"model":…,' */
static int chunk_head(const air__encoder *e, air__buf *out) {
  int rc;
  TRY(air__buf_add(out, LIT("data: {\"id\":")));
  TRY(air__buf_add_json_str(out, e->id, strlen(e->id)));
  TRY(air__buf_add(out,
                   LIT(",\"object\":\"chat.completion.chunk\",\"created\":")));
  TRY(air__buf_addu(out, e->created));
  TRY(air__buf_add(out, LIT(",\"model\":")));
  TRY(air__buf_add_json_str(out, e->model, strlen(e->model)));
  TRY(air__buf_add(out, LIT(",\"choices\":[")));
out:
  return rc;
}

/* A whole chunk whose choice has the delta members in body (already JSON,
 * without braces) and the given finish_reason (NULL: null). The finish
 * chunk carries the "airetry" marker of a continued answer. */
static int delta_chunk(const air__encoder *e, const char *body, size_t n,
                       const char *finish, air__buf *out) {
  int rc;
  TRY(chunk_head(e, out));
  TRY(air__buf_add(out, LIT("{\"index\":0,\"delta\":{")));
  TRY(air__buf_add(out, body, n));
  TRY(air__buf_add(out, LIT("},\"finish_reason\":")));
  if (finish != NULL) {
    TRY(air__buf_addc(out, '"'));
    TRY(air__buf_adds(out, finish));
    TRY(air__buf_addc(out, '"'));
  } else {
    TRY(air__buf_add(out, LIT("null")));
  }
  TRY(air__buf_add(out, LIT("}]")));
  if (finish != NULL) TRY(air__continued_member(&e->continued, out));
  TRY(air__buf_add(out, LIT("}\n\n")));
out:
  return rc;
}

static int role_chunk(const air__encoder *e, air__buf *out) {
  return delta_chunk(e, LIT("\"role\":\"assistant\",\"content\":\"\""), NULL,
                     out);
}

/* A chunk whose delta holds one member: "key":<JSON string s>. Built in
 * place (no temporary buffer): head, then the member, then the tail. */
static int string_chunk(const air__encoder *e, const char *key, size_t key_n,
                        const char *s, size_t n, air__buf *out) {
  int rc;
  TRY(chunk_head(e, out));
  TRY(air__buf_add(out, LIT("{\"index\":0,\"delta\":{\"")));
  TRY(air__buf_add(out, key, key_n));
  TRY(air__buf_add(out, LIT("\":")));
  TRY(air__text_str(out, s, n));
  TRY(air__buf_add(out, LIT("},\"finish_reason\":null}]}\n\n")));
out:
  return rc;
}

static int tool_chunk(const air__encoder *e, const air_part *p, air__buf *out) {
  int rc;
  TRY(chunk_head(e, out));
  TRY(air__buf_add(out,
                   LIT("{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":")));
  TRY(air__text_int(out, p->index));
  if (p->kind == AIR_PART_TOOL_START) {
    TRY(air__buf_add(out, LIT(",\"id\":")));
    TRY(air__text_str(out, p->id, p->id_len));
    TRY(air__buf_add(out,
                     LIT(",\"type\":\"function\",\"function\":{\"name\":")));
    TRY(air__text_str(out, p->name, p->name_len));
    TRY(air__buf_add(
        out, LIT(",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n")));
  } else {
    TRY(air__buf_add(out, LIT(",\"function\":{\"arguments\":")));
    TRY(air__text_str(out, p->text, p->text_len));
    TRY(air__buf_add(out, LIT("}}]},\"finish_reason\":null}]}\n\n")));
  }
out:
  return rc;
}

/* The usage chunk: this attempt's usage plus earlier attempts' of a
 * continued answer (air__encoder_add_usage). */
static int usage_chunk(const air__encoder *e, air__buf *out) {
  int rc;
  uint64_t in = air__sat_add(e->input_tokens, e->prior_input_tokens);
  uint64_t outt = air__sat_add(e->output_tokens, e->prior_output_tokens);
  TRY(chunk_head(e, out));
  TRY(air__buf_add(out, LIT("],\"usage\":{\"prompt_tokens\":")));
  TRY(air__buf_addu(out, in));
  TRY(air__buf_add(out, LIT(",\"completion_tokens\":")));
  TRY(air__buf_addu(out, outt));
  TRY(air__buf_add(out, LIT(",\"total_tokens\":")));
  TRY(air__buf_addu(out, air__sat_add(in, outt)));
  TRY(air__buf_add(out, LIT("}}\n\n")));
out:
  return rc;
}

/* encode_part: see dialect.h and the notes at the top of this file. */
int air__oai_encode_part(air__encoder *e, const air_part *in, air__buf *out) {
  if (e->ended) return AIR_ESTATE;
  air_part tmp;
  char sub[AIR__TOOL_ID_SUB_BYTES];
  const air_part *p = air__ident_fix(in, &e->idents, &tmp, sub);
  if (air__encoder_accept(e, p, set_ident) == 0) return 0;
  size_t mark = out->n;
  int rc = 0;
  if (!e->started) TRY(role_chunk(e, out));
  switch (p->kind) {
    case AIR_PART_TEXT:
      TRY(string_chunk(e, LIT("content"), p->text, p->text_len, out));
      break;
    case AIR_PART_REASONING:
      TRY(string_chunk(e, LIT("reasoning_content"), p->text, p->text_len, out));
      break;
    case AIR_PART_REFUSAL:
      TRY(string_chunk(e, LIT("refusal"), p->text, p->text_len, out));
      break;
    case AIR_PART_TOOL_START:
    case AIR_PART_TOOL_DELTA:
      TRY(tool_chunk(e, p, out));
      break;
    case AIR_PART_FINISH:
      TRY(delta_chunk(e, "", 0, finish_str(p->finish), out));
      e->finished = true;
      e->finish = p->finish;
      break;
    default:
      break;
  }
  e->started = true;
out:
  if (rc != 0) air__text_undo(out, mark);
  return rc;
}

/* encoder_observe: a passthrough stream's identity for a take-over: the
 * id and model of its START part, "created" of the event that carried it
 * (a scan for the member, once); a FINISH part. Nothing else is looked
 * at: the other events cost one pass over their parts. */
void air__oai_encoder_observe(air__encoder *e, const air__sse_event *ev,
                              const air_part *parts, size_t n) {
  if (!air__encoder_observe_parts(e, parts, n, set_ident)) return;
  e->started = true;
  uint64_t v;
  if (ev != NULL && air__scan_uint(ev->data.p, ev->data.n, "created", &v))
    e->created = v;
}

/* encode_end: [finish chunk if none was seen,] [usage chunk,] [DONE]. */
int air__oai_encode_end(air__encoder *e, air__buf *out) {
  if (e->ended) return AIR_ESTATE;
  size_t mark = out->n;
  int rc = 0;
  if (!e->passthrough) {
    if (!e->started) {
      set_ident(e, NULL, 0, NULL, 0);
      TRY(role_chunk(e, out));
    }
    if (!e->finished) TRY(delta_chunk(e, "", 0, finish_str(e->finish), out));
    if (e->include_usage && (e->has_usage || e->has_prior_usage))
      TRY(usage_chunk(e, out));
  }
  TRY(air__buf_add(out, LIT("data: [DONE]\n\n")));
  e->started = e->finished = e->ended = true;
out:
  if (rc != 0) air__text_undo(out, mark);
  return rc;
}

/* encode_error_event: 'data: {"error":{…}}' and never [DONE]. */
int air__oai_encode_error_event(air__encoder *e, air_reason reason,
                                const char *message, air__buf *out) {
  if (e->ended) return AIR_ESTATE;
  size_t mark = out->n;
  int rc;
  TRY(air__buf_add(out, LIT("data: {\"error\":")));
  TRY(air__text_openai_error(out, reason, message));
  TRY(air__buf_add(out, LIT("}}\n\n")));
  e->ended = true;
out:
  if (rc != 0) air__text_undo(out, mark);
  return rc;
}

/* ---- encoding: whole bodies
 * ----------------------------------------------------------- */

/* A buffer's bytes as a JSON string, or null when empty. */
static int str_or_null(air__buf *out, const air__buf *b) {
  if (b->n == 0) return air__buf_add(out, LIT("null"));
  return air__buf_add_json_str(out, b->p, b->n);
}

static int tool_calls_member(const air__aggregate *a, air__buf *out) {
  int rc = 0;
  bool first = true;
  for (size_t i = 0; i < a->n_tools; i++) {
    const air__tool_call *t = &a->tools[i];
    if (t->id == NULL && t->name == NULL && t->args.n == 0) continue;
    if (first)
      TRY(air__buf_add(out, LIT(",\"tool_calls\":[")));
    else
      TRY(air__buf_addc(out, ','));
    TRY(air__buf_add(out, LIT("{\"id\":")));
    if (t->id != NULL && t->id[0] != '\0') {
      TRY(air__buf_add_json_str(out, t->id, strlen(t->id)));
    } else {
      TRY(air__buf_add(out, LIT("\"call_")));
      TRY(air__buf_addu(out, i));
      TRY(air__buf_addc(out, '"'));
    }
    TRY(air__buf_add(out,
                     LIT(",\"type\":\"function\",\"function\":{\"name\":")));
    const char *name = t->name != NULL ? t->name : "";
    TRY(air__buf_add_json_str(out, name, strlen(name)));
    TRY(air__buf_add(out, LIT(",\"arguments\":")));
    if (t->args.n > 0)
      TRY(air__buf_add_json_str(out, t->args.p, t->args.n));
    else
      TRY(air__buf_add(out, LIT("\"{}\"")));
    TRY(air__buf_add(out, LIT("}}")));
    first = false;
  }
  if (!first) TRY(air__buf_addc(out, ']'));
out:
  return rc;
}

/* encode_response: a chat.completion body (notes at the top of the file). */
int air__oai_encode_response(const air__aggregate *a, air__buf *out) {
  size_t mark = out->n;
  int rc;
  TRY(air__buf_add(out, LIT("{\"id\":")));
  if (a->id.n > 0)
    TRY(air__buf_add_json_str(out, a->id.p, a->id.n));
  else
    TRY(air__buf_add(out, LIT("\"" DEFAULT_ID "\"")));
  TRY(air__buf_add(out, LIT(",\"object\":\"chat.completion\",\"created\":")));
  TRY(air__buf_addu(out, a->created));
  TRY(air__buf_add(out, LIT(",\"model\":")));
  TRY(air__text_str(out, a->model.p, a->model.n));
  TRY(air__buf_add(out, LIT(",\"choices\":[{\"index\":0,\"message\":"
                            "{\"role\":\"assistant\",\"content\":")));
  TRY(str_or_null(out, &a->text));
  TRY(air__buf_add(out, LIT(",\"refusal\":")));
  TRY(str_or_null(out, &a->refusal));
  if (a->reasoning.n > 0) {
    TRY(air__buf_add(out, LIT(",\"reasoning_content\":")));
    TRY(air__buf_add_json_str(out, a->reasoning.p, a->reasoning.n));
  }
  TRY(tool_calls_member(a, out));
  TRY(air__buf_add(out, LIT("},\"finish_reason\":\"")));
  TRY(air__buf_adds(out, finish_str(a->finish)));
  TRY(air__buf_add(out, LIT("\"}]")));
  if (a->has_usage) {
    TRY(air__buf_add(out, LIT(",\"usage\":{\"prompt_tokens\":")));
    TRY(air__buf_addu(out, a->input_tokens));
    TRY(air__buf_add(out, LIT(",\"completion_tokens\":")));
    TRY(air__buf_addu(out, a->output_tokens));
    TRY(air__buf_add(out, LIT(",\"total_tokens\":")));
    TRY(air__buf_addu(out, air__sat_add(a->input_tokens, a->output_tokens)));
    TRY(air__buf_addc(out, '}'));
  }
  TRY(air__continued_member(&a->continued, out));
  TRY(air__buf_addc(out, '}'));
out:
  if (rc != 0) air__text_undo(out, mark);
  return rc;
}
