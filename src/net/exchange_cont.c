/*
 * Continuation in the exchange (docs/design.md §3.5; exchange_int.h): the
 * text released kept and what forbids continuing told to the engine, a
 * continuation's request and its seam, its events joined to the answer,
 * and the rescue after a failure past commit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "exchange_int.h"

/* Tells the engine what forbids continuing; NEVER also drops the kept text. */
static void limit(air__exchange *x, unsigned flags) {
  air_run_limit_continuation(x->run, flags);
  if ((flags & AIR_CONTF_NEVER) && !x->c.never) {
    x->c.never = true;
    air__buf_cleanup(&x->c.sent);
  }
}

static uint64_t utf8_chars(const char *p, size_t n) {
  uint64_t k = 0;
  for (size_t i = 0; i < n; i++) k += ((unsigned char)p[i] & 0xc0) != 0x80;
  return k;
}

/*
 * A released event of the committed attempt while it may still be
 * continued: its text is kept, its usage noted, and what forbids a
 * continuation is told: any tool call or refusal text (only text is
 * continued), reasoning once the text began, the finish (the answer
 * ended; a cut after it is no missing text), more text than
 * continuation.max_sent_bytes.
 */
void air__cont_note(air__exchange *x, const air__gate_event *ev) {
  for (size_t i = 0; i < ev->n_parts && !x->c.never; i++) {
    const air_part *p = &ev->parts[i];
    switch (p->kind) {
      case AIR_PART_TEXT:
        if (p->text_len == 0) break;
        x->c.text_began = true;
        if (air__buf_add(&x->c.sent, p->text, p->text_len) != 0)
          limit(x, AIR_CONTF_NEVER);
        else
          x->c.sent_chars += utf8_chars(p->text, p->text_len);
        break;
      case AIR_PART_REASONING:
        if (x->c.text_began) limit(x, AIR_CONTF_NEVER);
        break;
      case AIR_PART_TOOL_START:
      case AIR_PART_TOOL_DELTA:
      case AIR_PART_REFUSAL:
      case AIR_PART_FINISH: /* the answer ended: nothing is left to continue */
        limit(x, AIR_CONTF_NEVER);
        break;
      case AIR_PART_USAGE:
        x->c.in_tok = p->input_tokens;
        x->c.out_tok = p->output_tokens;
        break;
      default:
        break;
    }
  }
}

/* Room for n parts in l->cparts (and their marks in l->coff). */
static int cparts_room(air__leg *l, size_t n) {
  if (n <= l->cap_cparts) return 0;
  size_t cap = n < 8 ? 8 : n;
  air_part *a = realloc(l->cparts, cap * sizeof(*a));
  if (a == NULL) return AIR_ENOMEM;
  l->cparts = a;
  bool *o = realloc(l->coff, cap * sizeof(*o));
  if (o == NULL) return AIR_ENOMEM;
  l->coff = o;
  for (size_t i = l->cap_cparts; i < cap; i++) o[i] = false;
  l->cap_cparts = cap;
  return 0;
}

/*
 * The seam opened for continuation leg l: the engine commits it, the
 * consumer hears where it joins (and the usage of the attempt it
 * continues), and the rescue is over (from now on only chunk_ms bounds it).
 */
static int open_seam(air__leg *l) {
  air__exchange *x = l->x;
  int rc = air__exchange_commit(l);
  if (rc != 0) return rc;
  if (x->c.n_list == x->c.cap_list) {
    size_t cap = x->c.cap_list ? 2 * x->c.cap_list : 4;
    air__continued *n = realloc(x->c.list, cap * sizeof(*n));
    if (n == NULL) return AIR_ENOMEM;
    x->c.list = n;
    x->c.cap_list = cap;
  }
  x->c.list[x->c.n_list++] =
      (air__continued){l->target, l->no, x->c.sent_chars};
  l->open = true;
  x->win = l;
  x->c.rescuing = false;
  x->c.keepalive_due = 0;
  air__leg_disarm(l, AIR__DUE_ATTEMPT);
  air__continue_info ci = {
      .target = l->target,
      .attempt = l->no,
      .at_char = x->c.sent_chars,
      .input_tokens = x->c.in_tok,
      .output_tokens = x->c.out_tok,
  };
  x->c.out_done += x->c.out_tok;
  x->c.in_tok = l->u_in;
  x->c.out_tok = l->u_out;
  air__tell_continue(x, &ci);
  return 0;
}

/* The seam failed continuation leg l: the attempt fails, final (never
 * stitched in, never continued again: docs/decisions.md). */
static int seam_fail(air__leg *l) {
  const char *m = l->x->c.seam != NULL ? l->x->c.seam->message : NULL;
  char msg[256];
  snprintf(msg, sizeof(msg), "the continuation from %s cannot be joined: %s",
           l->target, m != NULL ? m : "it does not fit the sent text");
  air__leg_fail(l, AIR_REASON_MALFORMED, l->up.status, msg, AIR_TRANSPORT_OK);
  l->seam_failed = true;
  return 1;
}

/*
 * A continuation's event, released by its gate (the refusal hold passed):
 * before the seam opens its text goes to the seam, which holds it or lets
 * the part after a repeat through; the first non-text part decides the
 * seam with what it has. Its message start is dropped (the caller's stream
 * began with the first attempt), as is reasoning (thinking is off for it).
 * What passes reaches the consumer as parts only.
 */
int air__cont_emit(air__leg *l, const air__gate_event *ev) {
  air__exchange *x = l->x;
  if (!air__live(x)) return 1;
  /* Room for every part, the text the seam let through and the usage. */
  if (cparts_room(l, ev->n_parts + 2) != 0) {
    air__leg_fail(l, AIR_REASON_MALFORMED, l->up.status,
                  "the continuation could not be joined", AIR_TRANSPORT_OK);
    l->seam_failed = true;
    return 1;
  }
  size_t n = 0;
  air__buf_reset(&x->c.joined);
  for (size_t i = 0; i < ev->n_parts; i++) {
    const air_part *p = &ev->parts[i];
    if (p->kind == AIR_PART_START || p->kind == AIR_PART_REASONING) continue;
    if (p->kind == AIR_PART_USAGE && !l->open) {
      l->u_in = p->input_tokens;
      l->u_out = p->output_tokens;
      continue;
    }
    if (p->kind != AIR_PART_TEXT && l->open) {
      l->cparts[n++] = *p;
      continue;
    }
    /* Text always passes the seam (it may still drop white space after
     * it opened); another part decides a seam still holding. */
    size_t before = x->c.joined.n;
    air__seam_state st =
        p->kind == AIR_PART_TEXT
            ? air__seam_feed(x->c.seam, p->text, p->text_len, &x->c.joined)
            : air__seam_end(x->c.seam, &x->c.joined);
    if (st == AIR__SEAM_FAILED) return seam_fail(l);
    if (st == AIR__SEAM_HOLD) continue;
    bool opening = !l->open;
    if (opening && open_seam(l) != 0) {
      /* Not joined (no memory, or the engine refused): final, as a seam
       * that failed. */
      air__leg_fail(l, AIR_REASON_MALFORMED, l->up.status,
                    "the continuation could not be joined", AIR_TRANSPORT_OK);
      l->seam_failed = true;
      return 1;
    }
    if (x->c.joined.n > before) {
      /* Its text points into joined once nothing more moves it. */
      air_part t;
      memset(&t, 0, sizeof(t));
      t.kind = AIR_PART_TEXT;
      t.index = p->index;
      t.text = (const char *)(uintptr_t)before;
      t.text_len = x->c.joined.n - before;
      l->coff[n] = true;
      l->cparts[n++] = t;
    }
    if (opening && (l->u_in || l->u_out)) { /* its usage from before the seam */
      air_part u;
      memset(&u, 0, sizeof(u));
      u.kind = AIR_PART_USAGE;
      u.input_tokens = l->u_in;
      u.output_tokens = l->u_out;
      l->cparts[n++] = u;
    }
    if (p->kind != AIR_PART_TEXT) l->cparts[n++] = *p;
  }
  for (size_t i = 0; i < n; i++)
    if (l->coff[i]) {
      l->coff[i] = false;
      l->cparts[i].text = x->c.joined.p + (uintptr_t)l->cparts[i].text;
    }
  if (!l->open || n == 0) return 0;
  air__gate_event out = {NULL, 0, l->cparts, n, ev->flags};
  if (!x->c.never) air__cont_note(x, &out);
  if (air__tell_event(x, &out) == 1) l->pause_pending = true;
  return air__live(x) ? 0 : 1;
}

/*
 * The body of continuation leg l (docs/design.md §3.5): the caller's request
 * plus the released text in the leg's style, max_tokens lowered by the output
 * released so far (the upstream's count when it gave one, else an
 * estimate of 4 bytes a token, whichever is larger); and its seam, which
 * compares what comes back with that text.
 */
int air__cont_build(air__leg *l, const air__build_opts *bo, air_error *err) {
  air__exchange *x = l->x;
  if (!x->c.on || x->c.never) {
    snprintf(err->message, sizeof(err->message), "nothing may be continued");
    return AIR_EINVAL;
  }
  if (x->c.seam_live) air__seam_cleanup(x->c.seam);
  x->c.seam_live = false;
  if (x->c.seam == NULL && (x->c.seam = malloc(sizeof(*x->c.seam))) == NULL)
    return AIR_ENOMEM;
  const char *sent = x->c.sent.p ? x->c.sent.p : "";
  int rc = air__seam_init(x->c.seam, sent, x->c.sent.n,
                          l->style == AIR_CONT_INSTRUCT);
  if (rc != 0) return rc;
  x->c.seam_live = true;
  uint64_t est = ((uint64_t)x->c.sent.n + 3) / 4;
  uint64_t released = x->c.out_done + x->c.out_tok;
  if (est > released) released = est;
  int64_t max = 0;
  if (x->c.caller_max > 0)
    max = (uint64_t)x->c.caller_max > released
              ? x->c.caller_max - (int64_t)released
              : 1;
  air__cont_ask ask = {
      .style = l->style,
      .sent = sent,
      .sent_n = x->c.sent.n,
      .max_tokens = max,
  };
  return air__request_build_continuation(l->ops, x->o.req, bo, &ask, &l->body,
                                         err);
}

/*
 * The committed attempt (or a continuation before or after its seam)
 * failed while the route continues: the engine decides (CONTINUE, WAIT or
 * FAIL, docs/design.md §3.5); a rescue begins, and with it the keep-alives.
 * Nothing continues an answer that released no text.
 */
void air__cont_failed(air__leg *l) {
  air__exchange *x = l->x;
  uint64_t now = air__now(x);
  if (!x->c.text_began) limit(x, AIR_CONTF_NEVER);
  if (!l->cont || l->open) {
    /* The answer the caller reads broke: if no continuation joins, this
     * is the caller's error, not a continuation's (docs/design.md §3.5). */
    x->c.broke = true;
    x->c.brk_log = l->log;
    x->c.brk_hint = x->has_hint;
    x->c.brk_hint_ms = x->hint_ms;
  }
  l->state = AIR__LEG_FREE;
  x->last = l;
  if (l->seam_failed) {
    air__run_fail_final(x->run, l->id, &l->up.fail, now, &x->act);
  } else if (l->cont && !l->open && l->style == AIR_CONT_PREFILL &&
             air__prefill_rejected(l->up.fail.status, &l->up.fail)) {
    /* Never the caller's: asked again with instruct, or a failure. */
    air_run_prefill_rejected(x->run, l->id, now, &x->act);
  } else {
    air_run_fail(x->run, l->id, &l->up.fail, now,
                 x->clock->wall_ms(x->clock->data), &x->act);
  }
  air__exchange_engine_did(x, &x->act);
  air__tell_failed(x, air_run_attempt(x->run, l->log));
  if ((x->act.kind == AIR_ACT_CONTINUE || x->act.kind == AIR_ACT_WAIT) &&
      !x->c.rescuing) {
    x->c.rescuing = true;
    x->c.keepalive_due = now + AIR__CONT_KEEPALIVE_MS;
    air__exchange_rearm(x);
  }
  air__exchange_step(x);
}

/* A member of the caller's JSON object, or NULL. */
static const json_t *member(const json_t *o, const char *key) {
  return json_is_object(o) ? json_object_get(o, key) : NULL;
}

/*
 * Continuation for this request (docs/design.md §3.5): only for a streamed
 * caller under commit first_content (a non-streamed caller's commit is the end
 * of its answer: nothing is left to continue). What the request itself forbids
 * is told to the engine at once: n > 1 or logprobs (a continuation could not
 * give them back: NEVER), a JSON response (json_object or json_schema: no
 * instruct target, docs/decisions.md). The caller's max_tokens is kept for the
 * continuation's.
 */
void air__cont_begin(air__exchange *x, const air__policy *pol) {
  const air__continuation *cc = &pol->continuation;
  const air__request *req = x->o.req;
  x->c.on =
      cc->enabled && req->stream && x->gcfg.commit == AIR__COMMIT_FIRST_CONTENT;
  if (!x->c.on) return;
  uint64_t max =
      cc->max_sent_bytes ? cc->max_sent_bytes : AIR__DEFAULT_CONT_SENT_BYTES;
  air__buf_init(&x->c.sent, max);
  air__buf_init(&x->c.joined, max + AIR__MAX_ANSWER_BYTES);
  if (req->json_response) limit(x, AIR_CONTF_NO_INSTRUCT);
  /* The caller's object: its text when there is one (parsed here, once),
   * else the tree the parser kept. */
  json_t *own = req->tree == NULL && req->raw != NULL
                    ? json_loadb(req->raw, req->raw_n, 0, NULL)
                    : NULL;
  const json_t *o = own ? own : (const json_t *)req->tree;
  const json_t *n = member(o, "n"), *lp = member(o, "logprobs"),
               *tlp = member(o, "top_logprobs"), *inc = member(o, "include");
  bool never = (json_is_integer(n) && json_integer_value(n) > 1) ||
               json_is_true(lp) ||
               (json_is_integer(tlp) && json_integer_value(tlp) > 0);
  for (size_t i = 0; json_is_array(inc) && i < json_array_size(inc); i++) {
    const char *v = json_string_value(json_array_get(inc, i));
    if (v != NULL && strstr(v, "logprobs") != NULL) never = true;
  }
  static const char *const max_keys[] = {"max_tokens", "max_completion_tokens",
                                         "max_output_tokens"};
  for (size_t i = 0; i < sizeof(max_keys) / sizeof(max_keys[0]); i++) {
    const json_t *v = member(o, max_keys[i]);
    if (json_is_integer(v) && json_integer_value(v) > 0)
      x->c.caller_max = (int64_t)json_integer_value(v);
  }
  json_decref(own);
  if (never) limit(x, AIR_CONTF_NEVER);
}

void air__cont_cleanup(air__cont *c) {
  air__buf_cleanup(&c->sent);
  air__buf_cleanup(&c->joined);
  if (c->seam_live) air__seam_cleanup(c->seam);
  free(c->seam);
  free(c->list);
}
