/*
 * The commit gate. Held events are stored as records into two flat arrays
 * (raw bytes and part strings in `bytes`, parts in `parts`, with string
 * pointers kept as offsets) so holding costs a few appends, and releasing
 * rebuilds the parts in a scratch array.
 */
#include <stdlib.h>
#include <string.h>

#include "classify.h"
#include "commit.h"
#include "json.h"
#include "limits.h"

/* Part string fields are stored as offsets into g->bytes, tagged here. */
#define NO_STR ((size_t)-1)
/* parts of a released event rebuilt on the stack */
#define RELEASE_STACK_PARTS 8
#define HOLD_FIRST 2           /* events and parts held: first arrays */
#define HOLD_FIRST_COMPLETE 16 /* the same under commit: complete */

air__gate_cfg air__gate_cfg_of(const air__policy *pol, air__commit commit,
                               bool json_response) {
  air__gate_cfg gc = {
      .commit = commit,
      .phrases = pol->phrases,
      .n_phrases = pol->n_phrases,
      .max_malformed = pol->max_malformed,
      .malformed = pol->malformed,
      .json_response = json_response,
      .first_chunk_ms = pol->timeouts.first_chunk_ms,
      .chunk_ms = pol->timeouts.chunk_ms,
  };
  return gc;
}

int air__gate_init(air__gate *g, const air__gate_cfg *cfg, air__gate_emit emit,
                   void *data) {
  memset(g, 0, sizeof(*g));
  g->cfg = *cfg;
  g->cfg.phrases = NULL;
  g->emit = emit;
  g->emit_data = data;
  size_t max = cfg->commit == AIR__COMMIT_COMPLETE ? AIR__MAX_COMPLETE_BYTES
                                                   : AIR__MAX_HOLD_BYTES;
  air__buf_init(&g->bytes, max);
  air__buf_init(&g->text, AIR__MAX_COMPLETE_BYTES);
  return air__refusal_init(&g->refusal, cfg->phrases, cfg->n_phrases);
}

void air__gate_cleanup(air__gate *g) {
  air__refusal_cleanup(&g->refusal);
  air__buf_cleanup(&g->bytes);
  air__buf_cleanup(&g->text);
  free(g->held);
  free(g->parts);
  free(g->scratch);
  memset(g, 0, sizeof(*g));
}

static void drop_held(air__gate *g) {
  g->n_held = 0;
  g->n_parts = 0;
  air__buf_reset(&g->bytes);
}

void air__gate_begin(air__gate *g, uint64_t now_ms) {
  drop_held(g);
  air__buf_reset(&g->text);
  air__refusal_reset(&g->refusal);
  g->state = AIR__GATE_HOLDING;
  g->reason = AIR_REASON_NONE;
  g->message = NULL;
  g->judged = false;
  g->committed = false;
  g->content = false;
  g->finished = false;
  g->finish = AIR_FINISH_NONE;
  g->early = AIR_FINISH_NONE;
  g->malformed = 0;
  g->started_ms = now_ms;
  g->last_ms = now_ms;
}

static int fail(air__gate *g, air_reason reason, const char *msg, bool judged) {
  g->state = AIR__GATE_FAILED;
  g->reason = reason;
  g->message = msg;
  g->judged = judged;
  if (!judged) drop_held(g);
  return 1;
}

static size_t keep(air__gate *g, const char *s, size_t n, int *rc) {
  if (s == NULL) return NO_STR;
  size_t off = g->bytes.n;
  int r = air__buf_add(&g->bytes, s, n);
  if (r != 0) *rc = r;
  return off;
}

/* Copies one event into the hold. Returns 0, AIR_ETOOBIG or AIR_ENOMEM. */
static int hold(air__gate *g, const air__gate_event *ev) {
  if (g->n_held >= AIR__MAX_HOLD_EVENTS) return AIR_ETOOBIG;
  /* First arrays: under first_content a stream's first content usually
   * comes with its second event (a held stream keeps one: its role), so a
   * held stream costs little; under complete the whole answer is held. */
  size_t first =
      g->cfg.commit == AIR__COMMIT_COMPLETE ? HOLD_FIRST_COMPLETE : HOLD_FIRST;
  if (g->n_held == g->cap_held) {
    size_t cap = g->cap_held ? g->cap_held * 2 : first;
    air__held *h = realloc(g->held, cap * sizeof(*h));
    if (h == NULL) return AIR_ENOMEM;
    g->held = h;
    g->cap_held = cap;
  }
  if (g->n_parts + ev->n_parts > g->cap_parts) {
    size_t cap = g->cap_parts ? g->cap_parts : first;
    while (cap < g->n_parts + ev->n_parts) cap *= 2;
    air_part *p = realloc(g->parts, cap * sizeof(*p));
    if (p == NULL) return AIR_ENOMEM;
    g->parts = p;
    g->cap_parts = cap;
  }
  int rc = 0;
  air__held *h = &g->held[g->n_held];
  h->raw_off = keep(g, ev->raw, ev->raw_len, &rc);
  h->raw_len = ev->raw ? ev->raw_len : 0;
  h->first_part = g->n_parts;
  h->n_parts = ev->n_parts;
  h->flags = ev->flags;
  for (size_t i = 0; i < ev->n_parts && rc == 0; i++) {
    air_part p = ev->parts[i];
    p.text = (const char *)(uintptr_t)keep(g, p.text, p.text_len, &rc);
    p.id = (const char *)(uintptr_t)keep(g, p.id, p.id_len, &rc);
    p.name = (const char *)(uintptr_t)keep(g, p.name, p.name_len, &rc);
    p.finish_raw =
        (const char *)(uintptr_t)keep(g, p.finish_raw, p.finish_raw_len, &rc);
    g->parts[g->n_parts + i] = p;
  }
  if (rc != 0) return rc;
  g->n_parts += ev->n_parts;
  g->n_held++;
  return 0;
}

static const char *at(const air__gate *g, const char *off) {
  size_t o = (size_t)(uintptr_t)off;
  return o == NO_STR ? NULL : g->bytes.p + o;
}

/* Emits every held event in order, then forgets them. */
static int release(air__gate *g) {
  int rc = 0;
  /* An event's parts are rebuilt here; most events have a few, so the
   * heap scratch is for the rare larger one (no allocation per event). */
  air_part local[RELEASE_STACK_PARTS];
  for (size_t i = 0; i < g->n_held && rc == 0; i++) {
    const air__held *h = &g->held[i];
    air_part *sc = local;
    if (h->n_parts > RELEASE_STACK_PARTS) {
      if (h->n_parts > g->cap_scratch) {
        air_part *s = realloc(g->scratch, h->n_parts * sizeof(*s));
        if (s == NULL) return AIR_ENOMEM;
        g->scratch = s;
        g->cap_scratch = h->n_parts;
      }
      sc = g->scratch;
    }
    for (size_t k = 0; k < h->n_parts; k++) {
      air_part p = g->parts[h->first_part + k];
      p.text = at(g, p.text);
      p.id = at(g, p.id);
      p.name = at(g, p.name);
      p.finish_raw = at(g, p.finish_raw);
      sc[k] = p;
    }
    air__gate_event ev = {
        .raw = h->raw_off == NO_STR ? NULL : g->bytes.p + h->raw_off,
        .raw_len = h->raw_len,
        .parts = sc,
        .n_parts = h->n_parts,
        .flags = h->flags,
    };
    rc = g->emit(g->emit_data, &ev);
  }
  drop_held(g);
  return rc;
}

static int commit_now(air__gate *g) {
  g->state = AIR__GATE_COMMITTED;
  g->committed = true;
  return release(g);
}

/* The reason of an error event before commit, from its type. */
static air_reason error_reason(const air_part *p) {
  char type[64] = "";
  char msg[256] = "";
  if (p->name != NULL) {
    size_t n = p->name_len < sizeof(type) - 1 ? p->name_len : sizeof(type) - 1;
    memcpy(type, p->name, n);
    type[n] = '\0';
  }
  if (p->text != NULL) {
    size_t n = p->text_len < sizeof(msg) - 1 ? p->text_len : sizeof(msg) - 1;
    memcpy(msg, p->text, n);
    msg[n] = '\0';
  }
  return air__classify(200, type, NULL, msg, AIR_TRANSPORT_OK);
}

/* A finish before any content, judged in first_content mode. A judged
 * one (length, content_filter: the answer may be passed on as it is) is
 * only noted here (g->early) and judged by air__gate_end: what follows it
 * (the usage, the terminator) is then held and passed on with it. */
static int judge_early_finish(air__gate *g, air_finish f, bool at_end) {
  switch (f) {
    case AIR_FINISH_LENGTH:
      if (!at_end) {
        g->early = f;
        return 0;
      }
      return fail(g, AIR_REASON_LENGTH, "finish length before content", true);
    case AIR_FINISH_CONTENT_FILTER:
      if (!at_end) {
        g->early = f;
        return 0;
      }
      return fail(g, AIR_REASON_CONTENT_FILTER,
                  "finish content_filter before content", true);
    case AIR_FINISH_REFUSAL:
      return fail(g, AIR_REASON_REFUSAL, "stop reason refusal before content",
                  false);
    case AIR_FINISH_CONTEXT:
      return fail(g, AIR_REASON_CONTEXT_OVERFLOW,
                  "context window exceeded before content", false);
    default:
      return 0;
  }
}

/* Whether ev moves the answer on (air__gate_deadline). */
static bool progress(const air__gate_event *ev) {
  if (ev->flags & AIR__EV_SERVER_TOOL) return true;
  for (size_t i = 0; i < ev->n_parts; i++) {
    const air_part *p = &ev->parts[i];
    switch (p->kind) {
      case AIR_PART_TEXT:
      case AIR_PART_REASONING:
      case AIR_PART_REFUSAL:
      case AIR_PART_TOOL_DELTA:
        if (p->text_len > 0) return true;
        break;
      case AIR_PART_TOOL_START:
      case AIR_PART_FINISH:
        return true;
      default:
        break;
    }
  }
  return false;
}

int air__gate_feed(air__gate *g, const air__gate_event *ev, uint64_t now_ms) {
  if (g->state == AIR__GATE_FAILED || g->state == AIR__GATE_DONE) return 1;
  if (progress(ev)) g->last_ms = now_ms;
  bool complete = g->cfg.commit == AIR__COMMIT_COMPLETE;
  if (g->state == AIR__GATE_COMMITTED) {
    for (size_t i = 0; i < ev->n_parts; i++) {
      if (ev->parts[i].kind == AIR_PART_FINISH) {
        g->finished = true;
        g->finish = ev->parts[i].finish;
      }
    }
    return g->emit(g->emit_data, ev);
  }
  int rc = hold(g, ev);
  if (rc == AIR_ETOOBIG)
    return fail(g, AIR_REASON_MALFORMED, "response over the hold limit", false);
  if (rc != 0) return rc;

  bool go = false;
  for (size_t i = 0; i < ev->n_parts; i++) {
    const air_part *p = &ev->parts[i];
    switch (p->kind) {
      case AIR_PART_ERROR:
        return fail(g, error_reason(p), "error event before commit", false);
      case AIR_PART_FINISH:
        g->finished = true;
        g->finish = p->finish;
        if (!complete && !g->content) {
          rc = judge_early_finish(g, p->finish, false);
          if (rc != 0) return rc;
        }
        break;
      case AIR_PART_REFUSAL:
        if (p->text_len > 0)
          return fail(g, AIR_REASON_REFUSAL, "native refusal", false);
        break;
      case AIR_PART_TEXT:
        if (p->text_len == 0) break;
        g->content = true;
        if (complete) {
          if (air__buf_add(&g->text, p->text, p->text_len) != 0)
            return fail(g, AIR_REASON_MALFORMED, "answer over the hold limit",
                        false);
          break;
        }
        if (go) break;
        switch (air__refusal_feed(&g->refusal, p->text, p->text_len)) {
          case AIR__REFUSAL_MATCH:
            return fail(g, AIR_REASON_REFUSAL, "refusal phrase", false);
          case AIR__REFUSAL_CLEAR:
            go = true;
            break;
          case AIR__REFUSAL_UNDECIDED:
            break;
        }
        break;
      case AIR_PART_REASONING:
        if (p->text_len == 0) break;
        g->content = true;
        go = true;
        break;
      case AIR_PART_TOOL_START:
      case AIR_PART_TOOL_DELTA:
        g->content = true;
        go = true;
        break;
      default:
        break;
    }
  }
  if (go && !complete && g->early == AIR_FINISH_NONE) return commit_now(g);
  return 0;
}

int air__gate_malformed(air__gate *g) {
  if (g->state == AIR__GATE_FAILED || g->state == AIR__GATE_DONE) return 1;
  g->malformed++;
  if (g->cfg.malformed == AIR__MALFORMED_FAIL ||
      g->malformed > g->cfg.max_malformed) {
    const char *why = g->cfg.malformed == AIR__MALFORMED_FAIL
                          ? "a malformed event (malformed: fail)"
                          : "more malformed events than max_malformed";
    if (g->state == AIR__GATE_COMMITTED) {
      g->state = AIR__GATE_FAILED;
      g->reason = AIR_REASON_MALFORMED;
      g->message = why;
      return 1;
    }
    return fail(g, AIR_REASON_MALFORMED, why, false);
  }
  return 0;
}

/* Linear and allocation-free (json.c): judged on the loop thread. */
static bool valid_json(const char *s, size_t n) {
  return air__json_validate(s, n) == 0;
}

/* Complete mode: the whole answer is here; judge it before release. */
static int judge_complete(air__gate *g) {
  switch (g->finish) {
    case AIR_FINISH_LENGTH:
      return fail(g, AIR_REASON_LENGTH, "finish length", true);
    case AIR_FINISH_CONTENT_FILTER:
      return fail(g, AIR_REASON_CONTENT_FILTER, "finish content_filter", true);
    case AIR_FINISH_REFUSAL:
      return fail(g, AIR_REASON_REFUSAL, "stop reason refusal", false);
    case AIR_FINISH_CONTEXT:
      return fail(g, AIR_REASON_CONTEXT_OVERFLOW, "context window exceeded",
                  false);
    default:
      break;
  }
  if (air__refusal_anywhere(&g->refusal, g->text.p, g->text.n))
    return fail(g, AIR_REASON_REFUSAL, "refusal phrase in the answer", false);
  if (g->cfg.json_response &&
      !valid_json(g->text.p ? g->text.p : "", g->text.n))
    return fail(g, AIR_REASON_MALFORMED, "the answer is not valid JSON", true);
  return 0;
}

int air__gate_end(air__gate *g, bool clean, uint64_t now_ms) {
  g->last_ms = now_ms;
  if (g->state == AIR__GATE_FAILED || g->state == AIR__GATE_DONE) return 1;
  if (g->state == AIR__GATE_COMMITTED) {
    if (!clean) {
      /* Cut after commit: final, and never presented as a success. */
      g->state = AIR__GATE_FAILED;
      g->reason = AIR_REASON_NETWORK;
      g->message = "stream ended before its finish";
      return 1;
    }
    g->state = AIR__GATE_DONE;
    return 0;
  }
  if (g->early != AIR_FINISH_NONE) return judge_early_finish(g, g->early, true);
  if (!clean)
    return fail(g, AIR_REASON_NETWORK,
                "stream ended before the answer was complete", false);
  if (g->cfg.commit == AIR__COMMIT_COMPLETE) {
    int rc = judge_complete(g);
    if (rc != 0) return rc;
  }
  g->committed = true;
  int rc = release(g);
  g->state = AIR__GATE_DONE;
  return rc;
}

int air__gate_release_judged(air__gate *g) {
  if (g->state != AIR__GATE_FAILED || !g->judged) return AIR_ESTATE;
  g->committed = true;
  int rc = release(g);
  g->state = AIR__GATE_DONE;
  g->judged = false;
  return rc;
}

void air__gate_resumed(air__gate *g, uint64_t now_ms) {
  if (now_ms > g->last_ms) g->last_ms = now_ms;
}

uint64_t air__gate_deadline(const air__gate *g, air_reason *which) {
  /* Until the first content part only first_chunk_ms counts (a reasoning
   * model may send its start event, then think for a long time); from then
   * on the gap between events. */
  if (!g->content) {
    if (which) *which = AIR_REASON_TIMEOUT_FIRST_CHUNK;
    return g->started_ms + g->cfg.first_chunk_ms;
  }
  if (which) *which = AIR_REASON_TIMEOUT_CHUNK;
  return g->last_ms + g->cfg.chunk_ms;
}
