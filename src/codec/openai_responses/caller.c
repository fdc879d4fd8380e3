/*
 * Parts encoded for a caller that speaks the OpenAI Responses API: the
 * event stream, its end, a failure after commit, whole responses and final
 * error bodies (docs/design.md §5).
 *
 * The stream is the sequence the official SDKs expect: response.created and
 * response.in_progress before the first item; per output item
 * response.output_item.added, its content events and
 * response.output_item.done carrying the whole item; response.completed
 * (response.incomplete after a length or content_filter finish) with every
 * output item and the usage. Every event has "type" and "sequence_number"
 * (from 0), item events "output_index" and "item_id". Items:
 *   TEXT / REFUSAL   a message item ("msg_..."), one output_text or refusal
 *                    content part per run (content_part.added, .delta
 *                    events, output_text.done / refusal.done,
 *                    content_part.done);
 *   REASONING        a reasoning item ("rs_...") with one summary part
 *                    (reasoning_summary_part.added,
 *                    reasoning_summary_text.delta / .done,
 *                    reasoning_summary_part.done);
 *   TOOL_START/DELTA a function_call item ("fc_...", call_id from the
 *                    part; function_call_arguments.delta / .done).
 * Items are numbered in the order they open. A message item holds the text
 * and refusal runs until a function call starts (text after it opens a new
 * message item); each function call is its own item, open until the end,
 * so arguments that come interleaved (as an OpenAI chat upstream may send
 * them) or after text go on in their items (written to by output_index and
 * item_id); a reasoning item ends when anything else comes. Every open item
 * closes, in output order, at the finish. The .done events and
 * response.completed repeat the whole text, so the encoder keeps every item
 * (bounded by AIR__MAX_ANSWER_BYTES and AIR__MAX_RESPONSES_ITEMS: over them,
 * encode_part fails and the responder cuts the stream). Arguments of a
 * call never started are AIR_EINVAL (the stream is cut rather than the
 * arguments lost).
 *
 * A failure after commit: the open item closed as incomplete,
 * response.failed with the error, then an "error" event (its "error"
 * member makes the openai SDK raise); never response.completed.
 * Ids: the response's is the upstream's with "resp_" in front (kept when it
 * has it), items' are "msg_" / "rs_" / "fc_", the response id's tail and
 * the output index. None can be fetched later (stateless).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "openai_responses.h"

enum { K_NONE, K_MSG, K_REASON, K_TOOL };
enum { P_NONE, P_TEXT, P_REFUSAL };

/* One output item. */
typedef struct rsp_item {
  int kind;        /* K_MSG, K_REASON, K_TOOL */
  bool open;       /* its .done events are still to come */
  bool incomplete; /* closed by a failure */
  int index;       /* its output_index */
  int part;        /* a message's open content part */
  int content_index;
  int tool;         /* a function call's tool index (the parts') */
  air__buf text;    /* the open part's text / summary / arguments */
  air__buf parts;   /* a message's closed content parts (JSON) */
  air__buf call_id; /* a function call's */
  air__buf name;
  char item_id[sizeof(((air__encoder *)0)->id) + 32];
} rsp_item;

typedef struct air__rsp_enc {
  uint64_t seq;
  rsp_item *items; /* every item, in output order (output_index = position) */
  size_t n_items;
  size_t cap_items;
} air__rsp_enc;

/* The response id: "resp_" + the upstream's (as is when it has "resp_"). */
static void set_ident(air__encoder *e, const char *id, size_t id_n,
                      const char *model, size_t model_n) {
  size_t pre = id_n >= 5 && memcmp(id, "resp_", 5) == 0 ? 0 : 5;
  size_t k = air__ident_fit(id, id_n, sizeof(e->id) - 1 - pre);
  if (k == 0 || id == NULL) {
    memcpy(e->id, RSP_DEFAULT_ID, sizeof(RSP_DEFAULT_ID));
  } else {
    memcpy(e->id, "resp_", pre);
    memcpy(e->id + pre, id, k);
    e->id[pre + k] = '\0';
  }
  k = air__ident_fit(model, model_n, sizeof(e->model) - 1);
  if (k > 0 && model != NULL) memcpy(e->model, model, k);
  e->model[k] = '\0';
}

static void item_init(rsp_item *it) {
  memset(it, 0, sizeof(*it));
  air__buf_init(&it->text, AIR__MAX_ANSWER_BYTES);
  air__buf_init(&it->parts, AIR__MAX_ANSWER_BYTES);
  air__buf_init(&it->call_id, AIR__MAX_IDENT_BYTES);
  air__buf_init(&it->name, AIR__MAX_TOOL_NAME_BYTES);
}

static void item_cleanup(rsp_item *it) {
  air__buf_cleanup(&it->text);
  air__buf_cleanup(&it->parts);
  air__buf_cleanup(&it->call_id);
  air__buf_cleanup(&it->name);
}

void air__rsp_encoder_init(air__encoder *e, const air__request *req,
                           uint64_t created_s) {
  (void)req;
  memset(e, 0, sizeof(*e));
  e->api = AIR_DIALECT_OPENAI_RESPONSES;
  e->created = created_s;
  e->open_block = -1;
  air__rsp_enc *s = calloc(1, sizeof(*s));
  if (s == NULL) return; /* encode_part then fails with AIR_ENOMEM */
  e->rsp = s;
}

void air__rsp_encoder_cleanup(air__encoder *e) {
  air__rsp_enc *s = e->rsp;
  if (s == NULL) return;
  for (size_t i = 0; i < s->n_items; i++) item_cleanup(&s->items[i]);
  free(s->items);
  free(s);
  e->rsp = NULL;
}

/* 'event: T\ndata: {"type":"T","sequence_number":N' */
static int ev_open(air__rsp_enc *s, const char *type, air__buf *out) {
  int rc;
  TRY(air__buf_add(out, LIT("event: ")));
  TRY(air__buf_adds(out, type));
  TRY(air__buf_add(out, LIT("\ndata: {\"type\":\"")));
  TRY(air__buf_adds(out, type));
  TRY(air__buf_add(out, LIT("\",\"sequence_number\":")));
  TRY(air__buf_addu(out, s->seq++));
out:
  return rc;
}

static int ev_close(air__buf *out) {
  return air__buf_add(out, LIT("}\n\n"));
}

/* ',"output_index":I,"item_id":ID' of the open item. */
static int item_ref(const rsp_item *it, air__buf *out) {
  int rc;
  TRY(air__buf_add(out, LIT(",\"output_index\":")));
  TRY(air__buf_addu(out, (unsigned long long)it->index));
  TRY(air__buf_add(out, LIT(",\"item_id\":")));
  TRY(air__buf_add_json_str(out, it->item_id, strlen(it->item_id)));
out:
  return rc;
}

static const char *incomplete_reason(air_finish f) {
  switch (f) {
    case AIR_FINISH_LENGTH:
    case AIR_FINISH_CONTEXT:
      return "max_output_tokens";
    case AIR_FINISH_CONTENT_FILTER:
    case AIR_FINISH_REFUSAL:
      return "content_filter";
    default:
      return NULL;
  }
}

/* An item as JSON (status completed or incomplete). */
static int item_obj(const rsp_item *it, air__buf *out) {
  const char *status = it->open         ? "in_progress"
                       : it->incomplete ? "incomplete"
                                        : "completed";
  int rc;
  TRY(air__buf_add(out, LIT("{\"id\":")));
  TRY(air__buf_add_json_str(out, it->item_id, strlen(it->item_id)));
  if (it->kind == K_MSG) {
    TRY(air__buf_add(out, LIT(",\"type\":\"message\",\"status\":\"")));
    TRY(air__buf_adds(out, status));
    TRY(air__buf_add(out, LIT("\",\"role\":\"assistant\",\"content\":[")));
    TRY(air__buf_add(out, it->parts.p, it->parts.n));
    TRY(air__buf_add(out, LIT("]}")));
  } else if (it->kind == K_REASON) {
    TRY(air__buf_add(out, LIT(",\"type\":\"reasoning\",\"summary\":[{\"type\":"
                              "\"summary_text\",\"text\":")));
    TRY(air__text_str(out, it->text.p, it->text.n));
    TRY(air__buf_add(out, LIT("}]}")));
  } else {
    TRY(air__buf_add(out, LIT(",\"type\":\"function_call\",\"status\":\"")));
    TRY(air__buf_adds(out, status));
    TRY(air__buf_add(out, LIT("\",\"call_id\":")));
    TRY(air__text_str(out, it->call_id.p, it->call_id.n));
    TRY(air__buf_add(out, LIT(",\"name\":")));
    TRY(air__text_str(out, it->name.p, it->name.n));
    TRY(air__buf_add(out, LIT(",\"arguments\":")));
    TRY(air__text_str(out, it->text.p, it->text.n));
    TRY(air__buf_addc(out, '}'));
  }
out:
  return rc;
}

/* The response object. status: "in_progress", "completed", "incomplete",
 * "failed"; output: the closed items (else []); err_*: the error of a
 * failed one. */
static int response_obj(const air__encoder *e, const char *status, bool output,
                        const char *err_code, const char *err_msg,
                        air__buf *out) {
  const air__rsp_enc *s = e->rsp;
  int rc;
  TRY(air__buf_add(out, LIT("{\"id\":")));
  TRY(air__buf_add_json_str(out, e->id, strlen(e->id)));
  TRY(air__buf_add(out, LIT(",\"object\":\"response\",\"created_at\":")));
  TRY(air__buf_addu(out, e->created));
  TRY(air__buf_add(out, LIT(",\"status\":\"")));
  TRY(air__buf_adds(out, status));
  TRY(air__buf_add(out, LIT("\",\"error\":")));
  if (err_msg != NULL) {
    TRY(air__buf_add(out, LIT("{\"code\":")));
    TRY(air__text_str(out, err_code, err_code ? strlen(err_code) : 0));
    TRY(air__buf_add(out, LIT(",\"message\":")));
    TRY(air__buf_add_json_str(out, err_msg, strlen(err_msg)));
    TRY(air__buf_addc(out, '}'));
  } else {
    TRY(air__buf_add(out, LIT("null")));
  }
  TRY(air__buf_add(out, LIT(",\"incomplete_details\":")));
  const char *why =
      strcmp(status, "incomplete") == 0 ? incomplete_reason(e->finish) : NULL;
  if (why != NULL) {
    TRY(air__buf_add(out, LIT("{\"reason\":\"")));
    TRY(air__buf_adds(out, why));
    TRY(air__buf_add(out, LIT("\"}")));
  } else {
    TRY(air__buf_add(out, LIT("null")));
  }
  TRY(air__buf_add(out, LIT(",\"instructions\":null,\"max_output_tokens\":"
                            "null,\"model\":")));
  TRY(air__buf_add_json_str(out, e->model, strlen(e->model)));
  TRY(air__buf_add(out, LIT(",\"output\":[")));
  bool first = true;
  for (size_t i = 0; output && s != NULL && i < s->n_items; i++) {
    if (s->items[i].kind == K_NONE) continue; /* an index not mirrored */
    if (!first) TRY(air__buf_addc(out, ','));
    TRY(item_obj(&s->items[i], out));
    first = false;
  }
  TRY(air__buf_add(out, LIT("],\"parallel_tool_calls\":true,"
                            "\"previous_response_id\":null,\"reasoning\":"
                            "{\"effort\":null,\"summary\":null},\"store\":"
                            "false,\"temperature\":null,\"text\":{\"format\":"
                            "{\"type\":\"text\"}},\"tool_choice\":\"auto\","
                            "\"tools\":[],\"top_p\":null,\"truncation\":"
                            "\"disabled\",\"usage\":")));
  if (e->has_usage || e->has_prior_usage) {
    /* A continued answer: the sum over its attempts. */
    uint64_t in = air__sat_add(e->input_tokens, e->prior_input_tokens);
    uint64_t outt = air__sat_add(e->output_tokens, e->prior_output_tokens);
    TRY(air__buf_add(out, LIT("{\"input_tokens\":")));
    TRY(air__buf_addu(out, in));
    TRY(air__buf_add(out, LIT(",\"input_tokens_details\":{\"cached_tokens\":0},"
                              "\"output_tokens\":")));
    TRY(air__buf_addu(out, outt));
    TRY(air__buf_add(out, LIT(",\"output_tokens_details\":{\"reasoning_tokens\""
                              ":0},\"total_tokens\":")));
    TRY(air__buf_addu(out, air__sat_add(in, outt)));
    TRY(air__buf_addc(out, '}'));
  } else {
    TRY(air__buf_add(out, LIT("null")));
  }
  TRY(air__buf_add(out, LIT(",\"user\":null,\"metadata\":{}")));
  /* The end of a continued answer carries the marker (docs/design.md §3.5). */
  if (output && strcmp(status, "failed") != 0)
    TRY(air__continued_member(&e->continued, out));
  TRY(air__buf_addc(out, '}'));
out:
  return rc;
}

/* response.created and response.in_progress. */
static int begin(air__encoder *e, air__buf *out) {
  int rc;
  static const char *const types[] = {"response.created",
                                      "response.in_progress"};
  for (int k = 0; k < 2; k++) {
    TRY(ev_open(e->rsp, types[k], out));
    TRY(air__buf_add(out, LIT(",\"response\":")));
    TRY(response_obj(e, "in_progress", false, NULL, NULL, out));
    TRY(ev_close(out));
  }
  e->started = true;
out:
  return rc;
}

/* A content part object of a message's open part (text: the whole). */
static int content_part_obj(const rsp_item *it, int part, air__buf *out) {
  int rc;
  if (part == P_TEXT) {
    TRY(air__buf_add(out, LIT("{\"type\":\"output_text\",\"text\":")));
    TRY(air__text_str(out, it->text.p, it->text.n));
    TRY(air__buf_add(out, LIT(",\"annotations\":[],\"logprobs\":[]}")));
  } else {
    TRY(air__buf_add(out, LIT("{\"type\":\"refusal\",\"refusal\":")));
    TRY(air__text_str(out, it->text.p, it->text.n));
    TRY(air__buf_addc(out, '}'));
  }
out:
  return rc;
}

/* ',"content_index":N' */
static int content_ref(const rsp_item *it, air__buf *out) {
  int rc = air__buf_add(out, LIT(",\"content_index\":"));
  return rc != 0 ? rc
                 : air__buf_addu(out, (unsigned long long)it->content_index);
}

/* Closes a message's open content part. */
static int close_part(air__rsp_enc *s, rsp_item *it, air__buf *out) {
  if (it->part == P_NONE) return 0;
  int rc;
  bool text = it->part == P_TEXT;
  TRY(ev_open(s, text ? "response.output_text.done" : "response.refusal.done",
              out));
  TRY(item_ref(it, out));
  TRY(content_ref(it, out));
  TRY(air__buf_add(out, text ? ",\"text\":" : ",\"refusal\":", text ? 8 : 11));
  TRY(air__text_str(out, it->text.p, it->text.n));
  if (text) TRY(air__buf_add(out, LIT(",\"logprobs\":[]")));
  TRY(ev_close(out));
  TRY(ev_open(s, "response.content_part.done", out));
  TRY(item_ref(it, out));
  TRY(content_ref(it, out));
  TRY(air__buf_add(out, LIT(",\"part\":")));
  TRY(content_part_obj(it, it->part, out));
  TRY(ev_close(out));
  if (it->parts.n > 0) TRY(air__buf_addc(&it->parts, ','));
  TRY(content_part_obj(it, it->part, &it->parts));
  it->part = P_NONE;
  it->content_index++;
  air__buf_reset(&it->text);
out:
  return rc;
}

/* Closes an open item (its .done events and output_item.done);
 * incomplete: a failure cut it. */
static int close_item(air__rsp_enc *s, rsp_item *it, bool incomplete,
                      air__buf *out) {
  int rc = 0;
  if (!it->open) return 0;
  if (it->kind == K_MSG) {
    TRY(close_part(s, it, out));
  } else if (it->kind == K_REASON) {
    TRY(ev_open(s, "response.reasoning_summary_text.done", out));
    TRY(item_ref(it, out));
    TRY(air__buf_add(out, LIT(",\"summary_index\":0,\"text\":")));
    TRY(air__text_str(out, it->text.p, it->text.n));
    TRY(ev_close(out));
    TRY(ev_open(s, "response.reasoning_summary_part.done", out));
    TRY(item_ref(it, out));
    TRY(air__buf_add(out, LIT(",\"summary_index\":0,\"part\":{\"type\":"
                              "\"summary_text\",\"text\":")));
    TRY(air__text_str(out, it->text.p, it->text.n));
    TRY(air__buf_addc(out, '}'));
    TRY(ev_close(out));
  } else {
    TRY(ev_open(s, "response.function_call_arguments.done", out));
    TRY(item_ref(it, out));
    TRY(air__buf_add(out, LIT(",\"name\":")));
    TRY(air__text_str(out, it->name.p, it->name.n));
    TRY(air__buf_add(out, LIT(",\"arguments\":")));
    TRY(air__text_str(out, it->text.p, it->text.n));
    TRY(ev_close(out));
  }
  it->open = false;
  it->incomplete = incomplete;
  TRY(ev_open(s, "response.output_item.done", out));
  TRY(air__buf_add(out, LIT(",\"output_index\":")));
  TRY(air__buf_addu(out, (unsigned long long)it->index));
  TRY(air__buf_add(out, LIT(",\"item\":")));
  TRY(item_obj(it, out));
  TRY(ev_close(out));
out:
  return rc;
}

/* Closes every open item, in output order. */
static int close_all(air__rsp_enc *s, bool incomplete, air__buf *out) {
  int rc = 0;
  for (size_t i = 0; i < s->n_items && rc == 0; i++)
    rc = close_item(s, &s->items[i], incomplete, out);
  return rc;
}

/* The open item of kind (and tool index, for a function call), or NULL. */
static rsp_item *find_open(air__rsp_enc *s, int kind, int tool) {
  for (size_t i = s->n_items; i-- > 0;) {
    rsp_item *it = &s->items[i];
    if (it->open && it->kind == kind && (kind != K_TOOL || it->tool == tool))
      return it;
  }
  return NULL;
}

/* A new item of kind at the next output index, announced; the item id from
 * prefix. NULL with *rc set when it cannot be made. */
static rsp_item *open_item(air__encoder *e, int kind, const char *prefix,
                           const air_part *p, air__buf *out, int *rc_out) {
  air__rsp_enc *s = e->rsp;
  int rc = 0;
  if (s->n_items >= AIR__MAX_RESPONSES_ITEMS) {
    *rc_out = AIR_ETOOBIG;
    return NULL;
  }
  if (s->n_items == s->cap_items) {
    size_t cap = s->cap_items ? 2 * s->cap_items : 4;
    rsp_item *t = realloc(s->items, cap * sizeof(*t));
    if (t == NULL) {
      *rc_out = AIR_ENOMEM;
      return NULL;
    }
    s->items = t;
    s->cap_items = cap;
  }
  rsp_item *it = &s->items[s->n_items];
  item_init(it);
  it->kind = kind;
  it->index = (int)s->n_items++;
  it->open = true;
  const char *tail = strncmp(e->id, "resp_", 5) == 0 ? e->id + 5 : e->id;
  air__buf idb;
  air__buf_init(&idb, sizeof(it->item_id) - 1);
  rc = air__buf_adds(&idb, prefix);
  if (rc == 0)
    rc = air__buf_add(&idb, tail,
                      air__ident_fit(tail, strlen(tail), sizeof(e->id)));
  if (rc == 0) rc = air__buf_addc(&idb, '_');
  if (rc == 0) rc = air__buf_addu(&idb, (unsigned long long)it->index);
  if (rc == 0) memcpy(it->item_id, idb.p, idb.n + 1);
  air__buf_cleanup(&idb);
  if (rc != 0) goto out;
  if (kind == K_TOOL) {
    it->tool = p->index;
    TRY(air__buf_add(&it->call_id, p->id,
                     air__ident_fit(p->id, p->id_len, AIR__MAX_IDENT_BYTES)));
    TRY(air__buf_add(
        &it->name, p->name,
        air__ident_fit(p->name, p->name_len, AIR__MAX_TOOL_NAME_BYTES)));
  }
  TRY(ev_open(s, "response.output_item.added", out));
  TRY(air__buf_add(out, LIT(",\"output_index\":")));
  TRY(air__buf_addu(out, (unsigned long long)it->index));
  TRY(air__buf_add(out, LIT(",\"item\":")));
  TRY(item_obj(it, out));
  TRY(ev_close(out));
  if (kind == K_REASON) {
    TRY(ev_open(s, "response.reasoning_summary_part.added", out));
    TRY(item_ref(it, out));
    TRY(air__buf_add(out, LIT(",\"summary_index\":0,\"part\":{\"type\":"
                              "\"summary_text\",\"text\":\"\"}")));
    TRY(ev_close(out));
  }
out:
  *rc_out = rc;
  return rc == 0 ? it : NULL;
}

/* The open reasoning item ends when anything else comes. */
static int end_reasoning(air__rsp_enc *s, air__buf *out) {
  rsp_item *it = find_open(s, K_REASON, 0);
  return it != NULL ? close_item(s, it, false, out) : 0;
}

/* A text or refusal delta into the open message (opening what is needed;
 * text after a function call opens a new message item). */
static int msg_delta(air__encoder *e, const air_part *p, air__buf *out) {
  air__rsp_enc *s = e->rsp;
  int part = p->kind == AIR_PART_TEXT ? P_TEXT : P_REFUSAL;
  int rc = 0;
  TRY(end_reasoning(s, out));
  rsp_item *it = find_open(s, K_MSG, 0);
  if (it == NULL && (it = open_item(e, K_MSG, "msg_", p, out, &rc)) == NULL)
    goto out;
  if (it->part != part) {
    TRY(close_part(s, it, out));
    it->part = part;
    TRY(ev_open(s, "response.content_part.added", out));
    TRY(item_ref(it, out));
    TRY(content_ref(it, out));
    TRY(air__buf_add(out, LIT(",\"part\":")));
    TRY(content_part_obj(it, part, out));
    TRY(ev_close(out));
  }
  TRY(ev_open(
      s,
      part == P_TEXT ? "response.output_text.delta" : "response.refusal.delta",
      out));
  TRY(item_ref(it, out));
  TRY(content_ref(it, out));
  TRY(air__buf_add(out, LIT(",\"delta\":")));
  TRY(air__text_str(out, p->text, p->text_len));
  if (part == P_TEXT) TRY(air__buf_add(out, LIT(",\"logprobs\":[]")));
  TRY(ev_close(out));
  TRY(air__buf_add(&it->text, p->text, p->text_len));
out:
  return rc;
}

static int reasoning_delta(air__encoder *e, const air_part *p, air__buf *out) {
  air__rsp_enc *s = e->rsp;
  int rc = 0;
  rsp_item *it = find_open(s, K_REASON, 0);
  if (it == NULL && (it = open_item(e, K_REASON, "rs_", p, out, &rc)) == NULL)
    goto out;
  TRY(ev_open(s, "response.reasoning_summary_text.delta", out));
  TRY(item_ref(it, out));
  TRY(air__buf_add(out, LIT(",\"summary_index\":0,\"delta\":")));
  TRY(air__text_str(out, p->text, p->text_len));
  TRY(ev_close(out));
  TRY(air__buf_add(&it->text, p->text, p->text_len));
out:
  return rc;
}

/* A function call item (the open message or reasoning item ends); calls
 * stay open until the end, so arguments that come interleaved go to their
 * own items. A second start for an open call writes nothing. */
static int tool_start(air__encoder *e, const air_part *p, air__buf *out) {
  air__rsp_enc *s = e->rsp;
  if (find_open(s, K_TOOL, p->index) != NULL) return 0;
  rsp_item *msg = find_open(s, K_MSG, 0);
  int rc = end_reasoning(s, out);
  if (rc == 0 && msg != NULL) rc = close_item(s, msg, false, out);
  if (rc != 0) return rc;
  return open_item(e, K_TOOL, "fc_", p, out, &rc) != NULL ? 0 : rc;
}

static int args_delta(air__encoder *e, const air_part *p, air__buf *out) {
  air__rsp_enc *s = e->rsp;
  int rc = end_reasoning(s, out);
  if (rc != 0) return rc;
  rsp_item *it = find_open(s, K_TOOL, p->index);
  /* Arguments of a call never started: there is no item to put them in.
   * An error (the responder cuts the stream) rather than lost arguments. */
  if (it == NULL) return AIR_EINVAL;
  TRY(ev_open(s, "response.function_call_arguments.delta", out));
  TRY(item_ref(it, out));
  TRY(air__buf_add(out, LIT(",\"delta\":")));
  TRY(air__text_str(out, p->text, p->text_len));
  TRY(ev_close(out));
  TRY(air__buf_add(&it->text, p->text, p->text_len));
out:
  return rc;
}

int air__rsp_encode_part(air__encoder *e, const air_part *in, air__buf *out) {
  if (e->ended) return AIR_ESTATE;
  air_part tmp;
  char sub[AIR__TOOL_ID_SUB_BYTES];
  const air_part *p = air__ident_fix(in, &e->idents, &tmp, sub);
  if (e->rsp == NULL) return AIR_ENOMEM;
  if (air__encoder_accept(e, p, set_ident) == 0) return 0;
  size_t mark = out->n;
  int rc = 0;
  if (!e->started) TRY(begin(e, out));
  switch (p->kind) {
    case AIR_PART_TEXT:
    case AIR_PART_REFUSAL:
      TRY(msg_delta(e, p, out));
      break;
    case AIR_PART_REASONING:
      TRY(reasoning_delta(e, p, out));
      break;
    case AIR_PART_TOOL_START:
      TRY(tool_start(e, p, out));
      break;
    case AIR_PART_TOOL_DELTA:
      TRY(args_delta(e, p, out));
      break;
    case AIR_PART_FINISH:
      TRY(close_all(e->rsp, false, out));
      e->finished = true;
      e->finish = p->finish;
      break;
    default:
      break;
  }
out:
  /* A failed write leaves the stream cut by the responder: the encoder's
   * items may be ahead of what was written, which no one reads again. */
  if (rc != 0) air__text_undo(out, mark);
  return rc;
}

/* ---- take-over from passthrough (docs/design.md §3.5)
 * ----------------------------------------------- */

/* The mirrored item at output index ix (NULL: none). */
static rsp_item *item_at(air__rsp_enc *s, int64_t ix) {
  if (ix < 0 || (uint64_t)ix >= s->n_items) return NULL;
  rsp_item *it = &s->items[ix];
  return it->kind != K_NONE ? it : NULL;
}

/* output_item.added of the upstream: the item mirrored at its output
 * index with the upstream's id (the caller saw it), open. */
static void mirror_item(air__encoder *e, const json_t *v) {
  air__rsp_enc *s = e->rsp;
  json_t *ix = json_object_get(v, "output_index");
  json_t *item = json_object_get(v, "item");
  const char *type = json_string_value(json_object_get(item, "type"));
  const char *id = json_string_value(json_object_get(item, "id"));
  if (!json_is_integer(ix) || type == NULL) return;
  json_int_t k = json_integer_value(ix);
  if (k < 0 || k >= AIR__MAX_RESPONSES_ITEMS) return;
  size_t need = (size_t)k + 1;
  if (need > s->cap_items) {
    size_t cap = s->cap_items ? s->cap_items : 4;
    while (cap < need) cap *= 2;
    rsp_item *t = realloc(s->items, cap * sizeof(*t));
    if (t == NULL) return;
    s->items = t;
    s->cap_items = cap;
  }
  while (s->n_items < need) {
    item_init(&s->items[s->n_items]);
    s->items[s->n_items].index = (int)s->n_items;
    s->n_items++;
  }
  rsp_item *it = &s->items[k];
  it->kind = strcmp(type, "message") == 0     ? K_MSG
             : strcmp(type, "reasoning") == 0 ? K_REASON
                                              : K_TOOL;
  it->open = true;
  it->tool = -1;
  size_t n = id != NULL ? strlen(id) : 0;
  if (n >= sizeof(it->item_id)) n = sizeof(it->item_id) - 1;
  if (n > 0) memcpy(it->item_id, id, n);
  it->item_id[n] = '\0';
  if (it->kind == K_TOOL) {
    const char *cid = json_string_value(json_object_get(item, "call_id"));
    const char *name = json_string_value(json_object_get(item, "name"));
    air__buf_reset(&it->call_id);
    air__buf_reset(&it->name);
    if (cid != NULL && air__buf_add(&it->call_id, cid,
                                    air__ident_fit(cid, strlen(cid),
                                                   AIR__MAX_IDENT_BYTES)) != 0)
      return;
    if (name != NULL &&
        air__buf_add(
            &it->name, name,
            air__ident_fit(name, strlen(name), AIR__MAX_TOOL_NAME_BYTES)) != 0)
      return;
  }
}

/* The upstream event's JSON, for the few event types read whole. */
static json_t *parse(const air__sse_event *ev) {
  return json_loadb(ev->data.p, ev->data.n, 0, NULL);
}

/*
 * encoder_observe: mirrors a passthrough Responses stream so a take-over
 * goes on with it: the response id, created_at and model
 * (response.created), every item at its output index with the upstream's
 * item id (output_item.added, .done), the open content part and its index
 * (content_part.added, .done), each item's text from the parts (for the
 * .done events and response.completed a take-over writes), and the next
 * sequence_number. Only response.created, output_item.added / .done and
 * content_part.added are parsed; a delta costs a scan for its
 * sequence_number and an append of its text.
 */
void air__rsp_encoder_observe(air__encoder *e, const air__sse_event *ev,
                              const air_part *parts, size_t n) {
  air__rsp_enc *s = e->rsp;
  if (s == NULL || ev == NULL) return;
  uint64_t seq;
  if (air__scan_uint(ev->data.p, ev->data.n, "sequence_number", &seq) &&
      seq + 1 > s->seq)
    s->seq = seq + 1;
  air__str ty = air__event_type(ev);
  /* Deltas (nearly every event): only their text below. */
  bool delta = ty.n > 6 && memcmp(ty.p + ty.n - 6, ".delta", 6) == 0;
  if (delta) {
  } else if (air__str_is(ty, "response.created")) {
    json_t *v = parse(ev);
    json_t *r = json_object_get(v, "response");
    const char *id = json_string_value(json_object_get(r, "id"));
    const char *model = json_string_value(json_object_get(r, "model"));
    json_t *ca = json_object_get(r, "created_at");
    if (id != NULL) {
      size_t k = air__ident_fit(id, strlen(id), sizeof(e->id) - 1);
      memcpy(e->id, id, k);
      e->id[k] = '\0';
    }
    if (model != NULL) {
      size_t k = air__ident_fit(model, strlen(model), sizeof(e->model) - 1);
      memcpy(e->model, model, k);
      e->model[k] = '\0';
    }
    if (json_is_integer(ca) && json_integer_value(ca) >= 0)
      e->created = (uint64_t)json_integer_value(ca);
    json_decref(v);
    e->started = e->observed = true;
  } else if (air__str_is(ty, "response.output_item.added")) {
    json_t *v = parse(ev);
    mirror_item(e, v);
    json_decref(v);
  } else if (air__str_is(ty, "response.output_item.done")) {
    json_t *v = parse(ev);
    json_t *ix = json_object_get(v, "output_index");
    rsp_item *it =
        json_is_integer(ix) ? item_at(s, json_integer_value(ix)) : NULL;
    if (it != NULL) it->open = false;
    json_decref(v);
  } else if (air__str_is(ty, "response.content_part.added")) {
    json_t *v = parse(ev);
    rsp_item *it =
        item_at(s, json_integer_value(json_object_get(v, "output_index")));
    const char *t =
        json_string_value(json_object_get(json_object_get(v, "part"), "type"));
    json_t *ci = json_object_get(v, "content_index");
    if (it != NULL && it->kind == K_MSG && t != NULL) {
      it->part = strcmp(t, "refusal") == 0 ? P_REFUSAL : P_TEXT;
      if (json_is_integer(ci) && json_integer_value(ci) >= 0 &&
          json_integer_value(ci) < 1000000)
        it->content_index = (int)json_integer_value(ci);
      air__buf_reset(&it->text);
    }
    json_decref(v);
  } else if (air__str_is(ty, "response.content_part.done")) {
    rsp_item *it = find_open(s, K_MSG, 0);
    if (it != NULL && it->part != P_NONE) {
      if ((it->parts.n == 0 || air__buf_addc(&it->parts, ',') == 0) &&
          content_part_obj(it, it->part, &it->parts) == 0) {
        it->part = P_NONE;
        it->content_index++;
        air__buf_reset(&it->text);
      }
    }
  }
  for (size_t i = 0; i < n; i++) {
    const air_part *p = &parts[i];
    rsp_item *it = NULL;
    if (p->kind == AIR_PART_TEXT || p->kind == AIR_PART_REFUSAL)
      it = find_open(s, K_MSG, 0);
    else if (p->kind == AIR_PART_REASONING)
      it = find_open(s, K_REASON, 0);
    else if (p->kind == AIR_PART_TOOL_DELTA)
      it = find_open(s, K_TOOL, p->index);
    else if (p->kind == AIR_PART_TOOL_START && p->index >= 0) {
      rsp_item *t = find_open(s, K_TOOL, -1);
      if (t != NULL) t->tool = p->index;
    } else if (p->kind == AIR_PART_FINISH) {
      e->finished = true;
      e->finish = p->finish;
    }
    if (it != NULL && p->text_len > 0 &&
        air__buf_add(&it->text, p->text, p->text_len) != 0)
      return; /* over the answer limit: encode_part will fail the same */
  }
}

/* encode_end: the open items closed, response.completed (or
 * response.incomplete after a length or content_filter finish).
 * Passthrough: nothing (the upstream's own end was forwarded). */
int air__rsp_encode_end(air__encoder *e, air__buf *out) {
  if (e->ended) return AIR_ESTATE;
  if (e->passthrough) {
    e->ended = true;
    return 0;
  }
  if (e->rsp == NULL) return AIR_ENOMEM;
  size_t mark = out->n;
  int rc = 0;
  if (!e->started) {
    set_ident(e, NULL, 0, NULL, 0);
    TRY(begin(e, out));
  }
  TRY(close_all(e->rsp, false, out));
  bool incomplete = incomplete_reason(e->finish) != NULL;
  TRY(ev_open(e->rsp, incomplete ? "response.incomplete" : "response.completed",
              out));
  TRY(air__buf_add(out, LIT(",\"response\":")));
  TRY(response_obj(e, incomplete ? "incomplete" : "completed", true, NULL, NULL,
                   out));
  TRY(ev_close(out));
  e->started = e->finished = e->ended = true;
out:
  if (rc != 0) air__text_undo(out, mark);
  return rc;
}

int air__rsp_encode_error_event(air__encoder *e, air_reason reason,
                                const char *message, air__buf *out) {
  if (e->ended) return AIR_ESTATE;
  if (e->rsp == NULL) return AIR_ENOMEM;
  size_t mark = out->n;
  const char *code = air_reason_name(reason);
  const char *msg = message != NULL ? message : "";
  int rc = 0;
  /* Passthrough: the upstream's own events went out, response.created
   * among them; the sequence numbers here start again from 0. */
  if (e->id[0] == '\0') set_ident(e, NULL, 0, NULL, 0);
  if (!e->started && !e->passthrough) TRY(begin(e, out));
  if (!e->passthrough) TRY(close_all(e->rsp, true, out));
  TRY(ev_open(e->rsp, "response.failed", out));
  TRY(air__buf_add(out, LIT(",\"response\":")));
  TRY(response_obj(e, "failed", true, code, msg, out));
  TRY(ev_close(out));
  TRY(ev_open(e->rsp, "error", out));
  TRY(air__buf_add(out, LIT(",\"code\":")));
  TRY(air__text_str(out, code, code ? strlen(code) : 0));
  TRY(air__buf_add(out, LIT(",\"message\":")));
  TRY(air__buf_add_json_str(out, msg, strlen(msg)));
  TRY(air__buf_add(out, LIT(",\"param\":null,\"error\":{\"type\":\"")));
  TRY(air__buf_adds(out, air__error_type(AIR_DIALECT_OPENAI, reason)));
  TRY(air__buf_add(out, LIT("\",\"code\":")));
  TRY(air__text_str(out, code, code ? strlen(code) : 0));
  TRY(air__buf_add(out, LIT(",\"message\":")));
  TRY(air__buf_add_json_str(out, msg, strlen(msg)));
  TRY(air__buf_addc(out, '}'));
  TRY(ev_close(out));
  e->ended = true;
out:
  if (rc != 0) air__text_undo(out, mark);
  return rc;
}

/* ---- whole bodies ----------------------------------------------------------
 */

/* encode_response: a response object from an aggregate, built by the
 * stream encoder (the same items, the same ids) into a scratch stream that
 * is thrown away. */
int air__rsp_encode_response(const air__aggregate *a, air__buf *out) {
  air__encoder e;
  air__rsp_encoder_init(&e, NULL, a->created);
  if (e.rsp == NULL) return AIR_ENOMEM;
  air__buf sink;
  air__buf_init(&sink, AIR__MAX_ANSWER_BYTES);
  size_t mark = out->n;
  int rc = 0;
  air_part st = {.kind = AIR_PART_START,
                 .id = a->id.p,
                 .id_len = a->id.n,
                 .name = a->model.p,
                 .name_len = a->model.n};
  TRY(air__rsp_encode_part(&e, &st, &sink));
  if (a->reasoning.n > 0) {
    air_part p = {.kind = AIR_PART_REASONING,
                  .text = a->reasoning.p,
                  .text_len = a->reasoning.n};
    TRY(air__rsp_encode_part(&e, &p, &sink));
  }
  if (a->text.n > 0) {
    air_part p = {
        .kind = AIR_PART_TEXT, .text = a->text.p, .text_len = a->text.n};
    TRY(air__rsp_encode_part(&e, &p, &sink));
  }
  if (a->refusal.n > 0) {
    air_part p = {.kind = AIR_PART_REFUSAL,
                  .text = a->refusal.p,
                  .text_len = a->refusal.n};
    TRY(air__rsp_encode_part(&e, &p, &sink));
  }
  for (size_t i = 0; i < a->n_tools; i++) {
    const air__tool_call *t = &a->tools[i];
    if (t->id == NULL && t->name == NULL && t->args.n == 0) continue;
    air_part p = {.kind = AIR_PART_TOOL_START,
                  .index = (int)i,
                  .id = t->id ? t->id : "",
                  .id_len = t->id ? strlen(t->id) : 0,
                  .name = t->name ? t->name : "",
                  .name_len = t->name ? strlen(t->name) : 0};
    TRY(air__rsp_encode_part(&e, &p, &sink));
    air_part d = {.kind = AIR_PART_TOOL_DELTA,
                  .index = (int)i,
                  .text = t->args.n > 0 ? t->args.p : "{}",
                  .text_len = t->args.n > 0 ? t->args.n : 2};
    TRY(air__rsp_encode_part(&e, &d, &sink));
  }
  air_part f = {.kind = AIR_PART_FINISH, .finish = a->finish};
  TRY(air__rsp_encode_part(&e, &f, &sink));
  e.has_usage = a->has_usage;
  e.input_tokens = a->input_tokens;
  e.output_tokens = a->output_tokens;
  e.continued = a->continued; /* borrowed: the scratch encoder's cleanup
                                 below does not free it */
  bool incomplete = incomplete_reason(a->finish) != NULL;
  TRY(response_obj(&e, incomplete ? "incomplete" : "completed", true, NULL,
                   NULL, out));
out:
  if (rc != 0) air__text_undo(out, mark);
  air__buf_cleanup(&sink);
  air__rsp_encoder_cleanup(&e);
  return rc;
}
