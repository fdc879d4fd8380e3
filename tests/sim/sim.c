/*
 * The request-path simulator: see sim.h and docs/testing.md.
 *
 * A scenario is a config (YAML, loaded by air_config_parse), and 1-20
 * caller requests with the scripts their upstream attempts replay. The
 * requests share one air_state and one virtual clock; the loop jumps to the
 * next timer, script event or request arrival. Each request runs the real
 * exchange (air__exchange_start_on) with the simulator's loop and transport,
 * and the real responder (the gateway's response writing); what the
 * responder produced is decoded with the codecs' own decoders and checked.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "airetry.h"
#include "buf.h"
#include "exchange.h"
#include "limits.h"
#include "loop.h"
#include "dialect.h"
#include "plain.h"
#include "responder.h"
#include "seam.h"
#include "sim.h"
#include "sse.h"
#include "transport.h"

#define MAX_REQ 20
#define MAX_ATT 6
#define MAX_PIECES 12 /* pieces drawn for a script */
#define SCRIPT_PIECES                                            \
  40                  /* pieces a script holds (a continuation's \
                         are built from the answer's text) */
#define MAX_CONT 3    /* continuation behaviours per request */
#define TAIL_TEXT 160 /* the answer's text after its first script */
#define MAX_PROV 4
#define MAX_ROUTES 3
#define MAX_RULES 4
#define PIECE_TEXT 48
/* virtual ms: a scenario that runs longer hangs */
#define TIME_CAP 100000000ull
#define STEP_CAP 200000u /* loop steps */

/* ---- the scenario -------------------------------------------------------- */

enum { PK_TEXT, PK_TOOL, PK_GARBAGE, PK_ERROR, PK_PING };
enum { AK_STREAM, AK_BODY, AK_HTTP, AK_RESET, AK_STALL };
enum { END_CLEAN, END_CUT, END_STALL };
enum { FIN_NONE, FIN_STOP, FIN_LENGTH, FIN_TOOLS, FIN_FILTER };

static const char *const pk_names[] = {"text", "tool", "garbage", "error",
                                       "ping"};
static const char *const ak_names[] = {"stream", "body", "http", "reset",
                                       "stall"};
static const char *const end_names[] = {"clean", "cut", "stall"};
static const char *const fin_names[] = {"none", "stop", "length", "tool_calls",
                                        "content_filter"};

typedef struct piece {
  int kind;
  uint32_t gap; /* virtual ms before it is sent */
  char text[PIECE_TEXT];
} piece;

/* An upstream field drawn at, just past or far past its named limit
 * (limits.h): the answer's id, its model, a tool call's id or name, the
 * finish reason. */
enum { BF_NONE, BF_ID, BF_MODEL, BF_TOOL_ID, BF_TOOL_NAME, BF_FINISH, BF__N };
static const char *const bf_names[] = {"none",    "id",        "model",
                                       "tool_id", "tool_name", "finish"};

/* The limits those fields cross: an id, model or tool call id is kept
 * whole up to AIR__MAX_IDENT_BYTES and replaced past it (the answer still
 * succeeds); a finish reason or tool name past its limit is malformed. */
#ifndef AIR__MAX_IDENT_BYTES
#define AIR__MAX_IDENT_BYTES 4096
#endif
#ifndef AIR__MAX_FINISH_REASON_BYTES
#define AIR__MAX_FINISH_REASON_BYTES 64
#endif
#ifndef AIR__MAX_TOOL_NAME_BYTES
#define AIR__MAX_TOOL_NAME_BYTES 1024
#endif
#define BIG_FIELD_MAX 65536 /* the longest drawn (an SSE line holds it) */

typedef struct script {
  int kind;
  int status;           /* AK_HTTP */
  uint32_t retry_after; /* seconds, 0: no header */
  uint32_t head_gap;
  piece pieces[SCRIPT_PIECES];
  int n;
  int finish;
  bool usage;
  bool done; /* [DONE] / message_stop after the finish */
  int end;
  uint32_t end_gap;
  uint32_t split;      /* a seed for splitting events across reads */
  bool reject_prefill; /* AK_HTTP 400 with Anthropic's prefill wording */
  int big;             /* BF_*: one field drawn long */
  uint32_t big_len;    /* its length in bytes */
} script;

/* How an upstream answers a request to continue (docs/design.md §3.5): the
 * answer's rest, the whole answer again (restart), a repeated tail, a
 * preamble first, a restart that diverges; or it fails: Anthropic's
 * prefill 400, a 503, a reset, a stall before the head. */
enum {
  CM_EXACT,
  CM_RESTART,
  CM_REPEAT,
  CM_PREAMBLE,
  CM_DIVERGE,
  CM_REJECT,
  CM_HTTP,
  CM_RESET,
  CM_STALL,
  CM__N
};
/* What breaks the continuation's own stream after `after` pieces. */
enum { CF_NONE, CF_CUT, CF_STALL, CF_ERROR, CF__N };
static const char *const cm_names[] = {"exact",    "restart", "repeat",
                                       "preamble", "diverge", "reject",
                                       "http",     "reset",   "stall"};
static const char *const cf_names[] = {"none", "cut", "stall", "error"};

typedef struct cscript {
  int mode;
  int fault;
  uint32_t after; /* pieces before the fault */
  uint32_t gap;   /* between its pieces (virtual ms) */
  uint32_t head_gap;
  int finish;
  bool usage;
  uint32_t split;
} cscript;

#define PREAMBLE_TEXT "Sure, continuing: "
#define DIVERGED_TEXT " (diverged)"
/* Anthropic's answer to a prefill it does not support (docs/mock.md). */
#define PREFILL_400                                                            \
  "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","         \
  "\"message\":"                                                               \
  "\"This model does not support assistant message prefill. The conversation " \
  "must "                                                                      \
  "end with a user message.\"}}"

/* What the request is: a chat (the exchange), or one of the endpoints
 * without a stream (the plain exchange, net/plain.h). */
enum { RK_CHAT, RK_EMBED, RK_COUNT, RK_RETRIEVE, RK__N };
static const char *const rk_names[] = {"chat", "embeddings", "count_tokens",
                                       "retrieve"};

/* What the caller (the exchange's consumer, as the gateway's request.c is)
 * does, once: cancel from inside a callback (the client went away: the
 * gateway's on_disconnect, a failed write, air_client_chat's on_part
 * returning non-zero), a write that fails at a flush, a reader that stops
 * (on_event / on_flush return 1) for stop_ms, or a disconnect act_at ms
 * after the request started, from the loop. */
enum { CA_NONE, CA_CANCEL, CA_WRITE_FAIL, CA_STOP, CA_DISCONNECT, CA__N };
static const char *const ca_names[] = {"none", "cancel", "write_fail", "stop",
                                       "disconnect"};
/* The callbacks a caller acts in (its k-th call of it). */
enum {
  ON_COMMIT,
  ON_EVENT,
  ON_FLUSH,
  ON_FAILED,
  ON_CONTINUE,
  ON_KEEPALIVE,
  ON_END,
  ON__N
};
static const char *const on_names[] = {
    "commit", "event", "flush", "failed", "continue", "keepalive", "end"};
/* The gateway's limits.client_write_timeout_ms (its default): a reader
 * stopped longer is cut by the caller's own side, never by a target's
 * deadline. */
#define SIM_CLIENT_WRITE_TIMEOUT_MS 60000u
/* What the caller does next from the loop (outside every callback). */
enum { W_NONE, W_RESUME, W_CUT, W_DISCONNECT };

typedef struct sim_req {
  uint32_t at;         /* arrival, virtual ms */
  int rk;              /* RK_* */
  int act;             /* CA_*: what the caller does */
  int act_on;          /* ON_*: in which callback */
  uint32_t act_k;      /* at its k-th call (1-based) */
  uint32_t act_at;     /* CA_DISCONNECT: ms after the start */
  uint32_t stop_ms;    /* CA_STOP: how long the reader stays stopped */
  uint32_t alloc_fail; /* the N-th allocation of the request path,
                          counted from this request's start, fails
                          (0: none) */
  uint32_t alloc_at;   /* counted from the head of its alloc_at-th
                          transfer instead (0: from the start) */
  char model[32];      /* route name or provider/model */
  int dialect;         /* the caller's: AIR_DIALECT_OPENAI / _ANTHROPIC */
  bool stream;
  bool include_usage;
  int n_att;
  script att[MAX_ATT];
  int n_cont; /* how continuations answer, in order */
  cscript cont[MAX_CONT];
  char tail[TAIL_TEXT]; /* the answer's text past its script's pieces: what
                           a continuation has to add */
  int expect_att; /* a replay file's "expect": attempt expect_att (1-based,
                     0: none) failed with expect_reason */
  char expect_reason[32];
} sim_req;

/* What the checks need of a route's policy (as generated into the YAML). */
typedef struct route_meta {
  char name[16];
  int n_targets;
  uint32_t max_attempts;  /* budget */
  uint32_t retry_max_sum; /* sum of the retry rules' max */
  uint64_t first_byte_ms, total_ms;
  uint64_t max_wait_ms; /* the longest wait a rule may take */
  bool hedge;           /* hedge: on (docs/design.md §3.6) */
  uint64_t hedge_after_ms;
  uint32_t hedge_max;
  bool hedge_same; /* hedge.same_target */
  bool cont;       /* continuation on (docs/design.md §3.5) */
  uint32_t cont_max;
  uint64_t cont_gap_ms; /* continuation.max_gap_ms as resolved */
} route_meta;

struct sim_scenario {
  uint64_t seed;
  char *yaml;
  int n_req;
  sim_req req[MAX_REQ];
  int n_routes;
  route_meta routes[MAX_ROUTES];
};

/* ---- splitmix64 ---------------------------------------------------------- */

/* Draws come from splitmix64; a fuzzer's bytes, when given, are read first
 * (8 a draw), so its mutations steer the generator's choices. */
typedef struct rng {
  uint64_t s;
  const uint8_t *bytes;
  size_t n, off;
} rng;

static uint64_t next(rng *r) {
  if (r->off < r->n) {
    uint64_t v = 0;
    for (int i = 0; i < 8 && r->off < r->n; i++)
      v = v << 8 | r->bytes[r->off++];
    return v;
  }
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint32_t upto(rng *r, uint32_t n) {
  return n ? (uint32_t)(next(r) % n) : 0;
}
static bool chance(rng *r, unsigned pct) {
  return upto(r, 100) < pct;
}

/* ---- the generator ------------------------------------------------------- */

static const char *const reasons[] = {"rate_limit",
                                      "overloaded",
                                      "server_error",
                                      "network",
                                      "malformed",
                                      "timeout.connect",
                                      "timeout.first_byte",
                                      "timeout.first_chunk",
                                      "timeout.chunk",
                                      "timeout.attempt",
                                      "context_overflow",
                                      "auth",
                                      "quota",
                                      "not_found",
                                      "refusal",
                                      "content_filter",
                                      "bad_request",
                                      "length"};
#define N_REASONS (sizeof(reasons) / sizeof(reasons[0]))

static const char *const words[] = {
    "the",         "quick",       "brown",        "fox",   "\"quoted\"",
    "caf\xc3\xa9", "back\\slash", "line\nbreak",  "tab\t", "I cannot help",
    "{json}",      "42",          "\xe2\x9c\x93", " "};
#define N_WORDS (sizeof(words) / sizeof(words[0]))

#define REFUSAL_PHRASE "I cannot help"

static void draw_text(rng *r, char *out, size_t cap) {
  size_t n = 0;
  unsigned k = 1 + upto(r, 3);
  out[0] = '\0';
  for (unsigned i = 0; i < k; i++) {
    const char *w = words[upto(r, N_WORDS)];
    size_t wn = strlen(w);
    if (n + wn + 2 >= cap) break;
    if (i) out[n++] = ' ';
    memcpy(out + n, w, wn);
    n += wn;
  }
  out[n] = '\0';
}

static void draw_args(rng *r, char *out, size_t cap) {
  static const char *const bits[] = {"{\"a\":", "1", ",\"b\":\"x\"", "}", "[",
                                     "]",       " "};
  size_t n = 0;
  unsigned k = 1 + upto(r, 3);
  for (unsigned i = 0; i < k; i++) {
    const char *b = bits[upto(r, 7)];
    size_t bn = strlen(b);
    if (n + bn + 1 >= cap) break;
    memcpy(out + n, b, bn);
    n += bn;
  }
  out[n] = '\0';
}

static uint32_t draw_gap(rng *r) {
  switch (upto(r, 6)) {
    case 0:
      return 0;
    case 1:
      return 1 + upto(r, 10);
    case 2:
      return 10 + upto(r, 200);
    case 3:
      return upto(r, 1000);
    case 4:
      return upto(r, 3000);
    default:
      return upto(r, 50);
  }
}

/* What the generator draws beyond upstream behaviour (sim_set_draws). */
static unsigned g_draws = SIM_DRAW_ALL;

void sim_set_draws(unsigned mask) {
  g_draws = mask;
}

/* One field at, just past or far past its limit (6 % of the answers that
 * carry fields). Always drawn, kept only when SIM_DRAW_FIELDS is on, so a
 * seed draws the same scenario either way. */
static void draw_big(rng *r, script *s) {
  static const uint32_t ident[] = {127,
                                   128,
                                   129,
                                   255,
                                   256,
                                   257,
                                   400,
                                   AIR__MAX_IDENT_BYTES,
                                   AIR__MAX_IDENT_BYTES + 1,
                                   4 * AIR__MAX_IDENT_BYTES,
                                   BIG_FIELD_MAX};
  static const uint32_t fin[] = {AIR__MAX_FINISH_REASON_BYTES,
                                 AIR__MAX_FINISH_REASON_BYTES + 1, 400,
                                 BIG_FIELD_MAX};
  static const uint32_t name[] = {AIR__MAX_TOOL_NAME_BYTES,
                                  AIR__MAX_TOOL_NAME_BYTES + 1,
                                  4 * AIR__MAX_TOOL_NAME_BYTES, BIG_FIELD_MAX};
  bool on = chance(r, 6);
  int f = 1 + (int)upto(r, BF__N - 1);
  uint32_t k = upto(r, 1000);
  uint32_t len = f == BF_FINISH ? fin[k % 4]
                 : f == BF_TOOL_NAME
                     ? name[k % 4]
                     : ident[k % (sizeof(ident) / sizeof(ident[0]))];
  if (!on || !(g_draws & SIM_DRAW_FIELDS) ||
      (s->kind != AK_STREAM && s->kind != AK_BODY))
    return;
  s->big = f;
  s->big_len = len;
}

static void draw_script(rng *r, script *s) {
  memset(s, 0, sizeof(*s));
  unsigned k = upto(r, 100);
  s->kind = k < 55   ? AK_STREAM
            : k < 63 ? AK_BODY
            : k < 85 ? AK_HTTP
            : k < 93 ? AK_RESET
                     : AK_STALL;
  static const int statuses[] = {400, 401, 403, 404, 408, 413,
                                 429, 429, 500, 502, 503, 529};
  s->status = s->kind == AK_HTTP ? statuses[upto(r, 12)] : 200;
  if (s->kind == AK_HTTP && chance(r, 40)) s->retry_after = upto(r, 4);
  s->head_gap = draw_gap(r);
  s->split = (uint32_t)next(r);
  if (s->kind != AK_STREAM && s->kind != AK_BODY) return;
  int n = (int)upto(r, MAX_PIECES + 1);
  bool tool = false;
  for (int i = 0; i < n; i++) {
    piece *p = &s->pieces[s->n];
    p->gap = draw_gap(r);
    unsigned pk = upto(r, 100);
    if (s->kind == AK_BODY) pk = pk % 70; /* a body: text and tool only */
    if (pk < 55 && !tool) {
      p->kind = PK_TEXT;
      draw_text(r, p->text, sizeof(p->text));
    } else if (pk < 70) {
      p->kind = PK_TOOL;
      tool = true;
      draw_args(r, p->text, sizeof(p->text));
    } else if (pk < 82) {
      p->kind = PK_GARBAGE;
    } else if (pk < 90) {
      p->kind = PK_PING;
    } else {
      p->kind = PK_ERROR;
      s->n++;
      break; /* nothing sensible follows an error event */
    }
    s->n++;
  }
  /* The tool's arguments: one JSON object (as models send), cut across the
   * tool pieces at random places. */
  int tools[MAX_PIECES], nt = 0;
  for (int i = 0; i < s->n; i++)
    if (s->pieces[i].kind == PK_TOOL) tools[nt++] = i;
  if (nt > 0) {
    char all[MAX_PIECES * (PIECE_TEXT - 1) + 1];
    const size_t L =
        PIECE_TEXT - 1; /* a piece's bytes; 3 of slack each for the */
    size_t n_all = 0,
           room = (size_t)nt * (L - 3); /* cuts moved to a UTF-8 start */
    unsigned keys = 1 + upto(r, 3);
    all[n_all++] = '{';
    for (unsigned key = 0; key < keys; key++) {
      char word[PIECE_TEXT];
      draw_text(r, word, 12);
      air__buf tmp;
      air__buf_init(&tmp, 256);
      air__buf_puts(&tmp, key ? ",\"k" : "\"k");
      air__buf_putu(&tmp, key);
      air__buf_puts(&tmp, "\":");
      if (chance(r, 50))
        air__buf_putu(&tmp, upto(r, 1000));
      else
        air__buf_put_json_str(&tmp, word, strlen(word));
      if (air__buf_error(&tmp) == 0 && n_all + tmp.n + 2 <= room) {
        memcpy(all + n_all, tmp.p, tmp.n);
        n_all += tmp.n;
      }
      air__buf_cleanup(&tmp);
    }
    all[n_all++] = '}';
    size_t off = 0;
    for (int t = 0; t < nt; t++) {
      size_t left = n_all - off, later = (size_t)(nt - 1 - t) * (L - 3);
      size_t lo = left > later ? left - later : 0;
      size_t hi = left < L ? left : L;
      size_t take = t == nt - 1 ? left : lo + upto(r, (uint32_t)(hi - lo + 1));
      /* never inside a UTF-8 sequence: each delta is a valid JSON string */
      while (take > 0 && take < left &&
             ((unsigned char)all[off + take] & 0xc0) == 0x80)
        take--;
      memcpy(s->pieces[tools[t]].text, all + off, take);
      s->pieces[tools[t]].text[take] = '\0';
      off += take;
    }
  }
  bool errored = s->n > 0 && s->pieces[s->n - 1].kind == PK_ERROR;
  unsigned f = upto(r, 100);
  s->finish = errored  ? FIN_NONE
              : f < 45 ? (tool ? FIN_TOOLS : FIN_STOP)
              : f < 58 ? FIN_LENGTH
              : f < 72 ? FIN_FILTER
              : f < 80 ? FIN_STOP
                       : FIN_NONE;
  if (s->kind == AK_BODY && s->finish == FIN_NONE) s->finish = FIN_STOP;
  s->usage = chance(r, 60);
  s->done = s->finish != FIN_NONE ? chance(r, 85) : chance(r, 20);
  unsigned e = upto(r, 100);
  s->end = e < 75 ? END_CLEAN : e < 90 ? END_CUT : END_STALL;
  if (s->kind == AK_BODY && s->end == END_STALL) s->end = END_CLEAN;
  s->end_gap = draw_gap(r);
  draw_big(r, s);
}

typedef struct yb {
  char *p;
  size_t n, cap;
} yb;

static void yadd(yb *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void yadd(yb *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
  va_end(ap);
  if (k > 0 && (size_t)k < b->cap - b->n) b->n += (size_t)k;
}

static uint64_t pick_ms(rng *r, uint64_t lo, uint64_t hi) {
  return lo + upto(r, (uint32_t)(hi - lo));
}

/* A dialect: OpenAI chat and Anthropic 40 % each, OpenAI Responses 20 %. */
static int draw_dialect(rng *r) {
  uint32_t k = upto(r, 5);
  return k < 2   ? AIR_DIALECT_OPENAI
         : k < 4 ? AIR_DIALECT_ANTHROPIC
                 : AIR_DIALECT_OPENAI_RESPONSES;
}

static const char *dialect_name(int d) {
  return d == AIR_DIALECT_ANTHROPIC          ? "anthropic"
         : d == AIR_DIALECT_OPENAI_RESPONSES ? "openai_responses"
                                             : "openai";
}

static void draw_config(rng *r, sim_scenario *s, int *dialects, int *n_prov) {
  yb b = {s->yaml, 0, 16384};
  *n_prov = 1 + (int)upto(r, MAX_PROV);
  yadd(&b, "providers:\n");
  for (int i = 0; i < *n_prov; i++) {
    dialects[i] = draw_dialect(r);
    bool oa = dialects[i] != AIR_DIALECT_ANTHROPIC;
    yadd(&b, "  - name: p%d\n    api: %s\n    base_url: http://p%d.sim%s\n", i,
         dialect_name(dialects[i]), i, oa ? "/v1" : "");
    if (chance(r, 30))
      yadd(&b, "    breaker: {failures: %u, open_ms: %u}\n", 1 + upto(r, 3),
           100 + upto(r, 5000));
    if (chance(r, 70)) { /* docs/design.md §3.5; else by api */
      static const char *const styles[] = {"prefill",  "vllm",    "prefix_flag",
                                           "instruct", "prefill", "instruct",
                                           "none"};
      yadd(&b, "    continuation_style: %s\n", styles[upto(r, 7)]);
    }
  }
  yadd(&b, "defaults:\n  breaker: {failures: %u, open_ms: %u}\n",
       1 + upto(r, 4), 100 + upto(r, 8000));
  if (chance(r, 30)) yadd(&b, "  continuation: {max: 2}\n");
  s->n_routes = 1 + (int)upto(r, MAX_ROUTES);
  yadd(&b, "routes:\n");
  for (int i = 0; i < s->n_routes; i++) {
    route_meta *m = &s->routes[i];
    snprintf(m->name, sizeof(m->name), "r%d", i);
    m->n_targets = 1 + (int)upto(r, 4);
    yadd(&b, "  - name: r%d\n    targets: [", i);
    for (int t = 0; t < m->n_targets; t++)
      yadd(&b, "%sp%u/m%d", t ? ", " : "", upto(r, (uint32_t)*n_prov), t);
    yadd(&b, "]\n");
    m->first_byte_ms = pick_ms(r, 50, 2000);
    m->total_ms = pick_ms(r, 500, 20000);
    yadd(&b,
         "    timeouts: {connect_ms: 100, first_byte_ms: %" PRIu64
         ", first_chunk_ms: %" PRIu64 ", chunk_ms: %" PRIu64
         ", attempt_ms: %" PRIu64 ", total_ms: %" PRIu64 "}\n",
         m->first_byte_ms, pick_ms(r, 50, 3000), pick_ms(r, 50, 3000),
         pick_ms(r, 200, 10000), m->total_ms);
    m->max_attempts = 1 + upto(r, 6);
    yadd(&b, "    budget: {max_total_attempts: %u}\n", m->max_attempts);
    yadd(&b, "    commit: %s\n", chance(r, 70) ? "first_content" : "complete");
    yadd(&b, "    max_malformed: %u\n    malformed: %s\n", upto(r, 4),
         chance(r, 50) ? "skip" : "fail");
    if (chance(r, 40))
      yadd(&b, "    refusal: {phrases: [\"" REFUSAL_PHRASE "\"]}\n");
    if (chance(r, 35)) /* hedging (docs/design.md §3.6) */
      yadd(&b, "    hedge: {after_ms: %" PRIu64 ", max: %u%s}\n",
           pick_ms(r, 1, 1500), 1 + upto(r, AIR__MAX_HEDGES),
           chance(r, 30) ? ", same_target: true" : "");
    if (chance(r, 65)) { /* continuation (docs/design.md §3.5) */
      yadd(&b,
           "    continuation: {enabled: true, targets: %s, instruct: %s, max: "
           "%u",
           chance(r, 60) ? "any" : "same_model",
           chance(r, 60) ? "true" : "false", 1 + upto(r, 3));
      if (chance(r, 70))
        yadd(&b, ", max_gap_ms: %" PRIu64,
             chance(r, 70) ? pick_ms(r, 100, 8000) : pick_ms(r, 10000, 40000));
      if (chance(r, 15)) yadd(&b, ", max_sent_bytes: %u", 8 + upto(r, 200));
      yadd(&b, "}\n");
    }
    if (chance(r, 40)) {
      /* the built-in rules: retry max 2 + 1, waits up to 10 s */
      m->retry_max_sum = 3;
      m->max_wait_ms = 10000;
      continue;
    }
    int nr = 1 + (int)upto(r, MAX_RULES);
    yadd(&b, "    rules:\n");
    for (int k = 0; k < nr; k++) {
      yadd(&b, "      - on: [");
      unsigned picked = 0;
      for (size_t q = 0; q < N_REASONS; q++)
        if (chance(r, 30)) yadd(&b, "%s%s", picked++ ? ", " : "", reasons[q]);
      if (picked == 0) yadd(&b, "server_error");
      yadd(&b, "]\n");
      unsigned a = upto(r, 3);
      if (a == 0) {
        uint32_t max = 1 + upto(r, 3);
        uint64_t bmax = pick_ms(r, 10, 2000), ramax = pick_ms(r, 0, 3000);
        m->retry_max_sum += max;
        if (bmax > m->max_wait_ms) m->max_wait_ms = bmax;
        if (ramax > m->max_wait_ms) m->max_wait_ms = ramax;
        yadd(&b,
             "        action: retry\n        max: %u\n        backoff: "
             "{base_ms: %u, "
             "factor: 2, max_ms: %" PRIu64
             ", jitter: none}\n        retry_after: "
             "{max_ms: %" PRIu64 "}\n",
             max, 1 + upto(r, 300), bmax, ramax);
      } else {
        yadd(&b, "        action: %s\n", a == 1 ? "switch" : "fail");
      }
    }
  }
}

/*
 * What the request is and what its caller does (always drawn; kept as the
 * draw mask says). The endpoints without a stream (7 %): embeddings (an
 * OpenAI caller), count_tokens (Anthropic), a retrieval from the first
 * openai_responses provider (none: embeddings). The caller acts in 30 %
 * of the requests: it cancels inside a callback (12 %), a write fails
 * (4 %), its reader stops (9 %: up to 2 s, longer than every deadline but
 * under the write timeout, or past it), or it disconnects from the loop.
 */
static void draw_caller(rng *r, const sim_scenario *s, const int *dialects,
                        int n_prov, sim_req *q) {
  (void)s;
  unsigned k = upto(r, 100);
  int rk = k < 93   ? RK_CHAT
           : k < 96 ? RK_EMBED
           : k < 98 ? RK_COUNT
                    : RK_RETRIEVE;
  unsigned a = upto(r, 100);
  int act = a < 70   ? CA_NONE
            : a < 82 ? CA_CANCEL
            : a < 86 ? CA_WRITE_FAIL
            : a < 95 ? CA_STOP
                     : CA_DISCONNECT;
  static const unsigned ow[ON__N] = {15, 30, 20, 15, 5, 5, 10};
  unsigned o = upto(r, 100), acc = 0;
  int on = ON_EVENT;
  for (int i = 0; i < ON__N; i++) {
    acc += ow[i];
    if (o < acc) {
      on = i;
      break;
    }
  }
  uint32_t kk = 1 + upto(r, on == ON_EVENT ? 8 : 3);
  uint32_t at = upto(r, 6000);
  unsigned sm = upto(r, 100);
  uint32_t stop = sm < 30   ? upto(r, 2000)
                  : sm < 70 ? 10000 + upto(r, 40000)
                            : SIM_CLIENT_WRITE_TIMEOUT_MS + 1 + upto(r, 30000);
  bool stop_on_event = chance(r, 40);
  if (g_draws & SIM_DRAW_PLAIN && rk != RK_CHAT) {
    int resp = -1;
    for (int i = 0; i < n_prov && resp < 0; i++)
      if (dialects[i] == AIR_DIALECT_OPENAI_RESPONSES) resp = i;
    if (rk == RK_RETRIEVE && resp < 0) rk = RK_EMBED;
    q->rk = rk;
    q->stream = false;
    q->include_usage = false;
    q->dialect = rk == RK_EMBED   ? AIR_DIALECT_OPENAI
                 : rk == RK_COUNT ? AIR_DIALECT_ANTHROPIC
                                  : AIR_DIALECT_OPENAI_RESPONSES;
    if (rk == RK_RETRIEVE)
      snprintf(q->model, sizeof(q->model), "p%d/retrieve", resp);
    /* no events, flushes or continuations: a cancel on a failure or at
     * the end, else a disconnect */
    if (act != CA_NONE &&
        !(act == CA_CANCEL && (on == ON_FAILED || on == ON_END)))
      act = CA_DISCONNECT;
  }
  if (!(g_draws & SIM_DRAW_CONSUMER)) return;
  q->act = act;
  q->act_on = act == CA_CANCEL       ? on
              : act == CA_WRITE_FAIL ? ON_FLUSH
              : act == CA_STOP       ? (stop_on_event ? ON_EVENT : ON_FLUSH)
                                     : ON_COMMIT;
  q->act_k = act == CA_NONE || act == CA_DISCONNECT ? 0 : kk;
  q->act_at = act == CA_DISCONNECT ? at : 0;
  q->stop_ms = act == CA_STOP ? stop : 0;
}

static void draw_request(rng *r, const sim_scenario *s, const int *dialects,
                         int n_prov, uint32_t at, sim_req *q) {
  memset(q, 0, sizeof(*q));
  q->at = at;
  if (chance(r, 85))
    snprintf(q->model, sizeof(q->model), "r%u", upto(r, (uint32_t)s->n_routes));
  else
    snprintf(q->model, sizeof(q->model), "p%u/m9", upto(r, (uint32_t)n_prov));
  (void)dialects;
  q->dialect = draw_dialect(r);
  q->stream = chance(r, 65);
  q->include_usage =
      q->dialect == AIR_DIALECT_OPENAI && q->stream && chance(r, 50);
  draw_caller(r, s, dialects, n_prov, q);
  q->n_att = 1 + (int)upto(r, MAX_ATT);
  for (int i = 0; i < q->n_att; i++) draw_script(r, &q->att[i]);
  /* How continuations answer (used only where the route continues), and
   * what the answer has past the committed script's pieces. */
  q->n_cont = (int)upto(r, MAX_CONT + 1);
  for (int i = 0; i < q->n_cont; i++) {
    cscript *c = &q->cont[i];
    static const unsigned mw[CM__N] = {30, 12, 12, 8, 8, 10, 8, 6, 6};
    unsigned k = upto(r, 100), acc = 0;
    c->mode = 0;
    for (int m = 0; m < CM__N; m++) {
      acc += mw[m];
      if (k < acc) {
        c->mode = m;
        break;
      }
    }
    unsigned f = upto(r, 100);
    c->fault = f < 55   ? CF_NONE
               : f < 70 ? CF_CUT
               : f < 80 ? CF_STALL
                        : CF_ERROR;
    c->after = upto(r, 5);
    c->gap = draw_gap(r) % 400;
    c->head_gap = draw_gap(r) % 400;
    c->finish = chance(r, 80) ? FIN_STOP : FIN_LENGTH;
    c->usage = chance(r, 60);
    c->split = (uint32_t)next(r);
  }
  size_t tn = 0;
  unsigned n_words = upto(r, 4);
  for (unsigned i = 0; i < n_words; i++) {
    char w[PIECE_TEXT];
    draw_text(r, w, sizeof(w));
    size_t wn = strlen(w);
    if (tn + wn + 2 >= sizeof(q->tail)) break;
    if (tn) q->tail[tn++] = ' ';
    memcpy(q->tail + tn, w, wn);
    tn += wn;
  }
  q->tail[tn] = '\0';
}

static sim_scenario *generate(rng *r0, uint64_t seed);

sim_scenario *sim_generate(uint64_t seed) {
  rng r = {seed, NULL, 0, 0};
  return generate(&r, seed);
}

sim_scenario *sim_generate_bytes(const uint8_t *p, size_t n) {
  uint64_t seed =
      0xcbf29ce484222325ull; /* FNV-1a of the input: the draws after it */
  for (size_t i = 0; i < n; i++) seed = (seed ^ p[i]) * 0x100000001b3ull;
  rng r = {seed, p, n, 0};
  return generate(&r, seed);
}

static sim_scenario *generate(rng *r0, uint64_t seed) {
  sim_scenario *s = calloc(1, sizeof(*s));
  if (s == NULL) return NULL;
  s->yaml = calloc(1, 16384);
  if (s->yaml == NULL) {
    free(s);
    return NULL;
  }
  s->seed = seed;
  rng r = *r0;
  int dialects[MAX_PROV], n_prov = 0;
  draw_config(&r, s, dialects, &n_prov);
  s->n_req = 1 + (int)upto(&r, chance(&r, 50) ? 3 : MAX_REQ);
  uint32_t at = 0;
  for (int i = 0; i < s->n_req; i++) {
    if (chance(&r, 50))
      at += upto(&r, 4000); /* else: concurrent with the last */
    draw_request(&r, s, dialects, n_prov, at, &s->req[i]);
  }
  /* Allocation failure (10 % of the scenarios): the N-th allocation of the
   * request path counted from one request's start fails. */
  bool af = chance(&r, 10);
  int ai = (int)upto(&r, (uint32_t)s->n_req);
  uint32_t an = chance(&r, 50) ? 1 + upto(&r, 40) : 1 + upto(&r, 600);
  /* half of them count from a response's head: what reading an answer
   * allocates (a kept error body, the hold, the aggregate) */
  uint32_t aat = chance(&r, 50) ? 1 + upto(&r, 3) : 0;
  if (aat) an = 1 + upto(&r, 12);
  if (af && (g_draws & SIM_DRAW_ALLOC)) {
    s->req[ai].alloc_fail = an;
    s->req[ai].alloc_at = aat;
  }
  return s;
}

void sim_free(sim_scenario *s) {
  if (s == NULL) return;
  free(s->yaml);
  free(s);
}

/* ---- the scenario file --------------------------------------------------- */

static void write_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p == '\n')
      fputs("\\n", f);
    else if (*p == '\t')
      fputs("\\t", f);
    else if (*p < 0x20)
      fprintf(f, "\\x%02x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

void sim_write(const sim_scenario *s, FILE *f) {
  fprintf(f,
          "# airetry simulation scenario (docs/testing.md)\nseed %" PRIu64 "\n",
          s->seed);
  for (int i = 0; i < s->n_routes; i++) {
    const route_meta *m = &s->routes[i];
    fprintf(f,
            "route %s targets=%d max_attempts=%u retry_max_sum=%u "
            "first_byte_ms=%" PRIu64 " total_ms=%" PRIu64
            " max_wait_ms=%" PRIu64 "\n",
            m->name, m->n_targets, m->max_attempts, m->retry_max_sum,
            m->first_byte_ms, m->total_ms, m->max_wait_ms);
  }
  fprintf(f, "config\n");
  const char *y = s->yaml;
  while (*y) {
    const char *nl = strchr(y, '\n');
    size_t n = nl ? (size_t)(nl - y) : strlen(y);
    fprintf(f, "| %.*s\n", (int)n, y);
    y += n + (nl ? 1 : 0);
  }
  for (int i = 0; i < s->n_req; i++) {
    const sim_req *q = &s->req[i];
    fprintf(f, "request at=%u model=%s dialect=%s stream=%d include_usage=%d",
            q->at, q->model, dialect_name(q->dialect), q->stream,
            q->include_usage);
    if (q->rk != RK_CHAT) fprintf(f, " kind=%s", rk_names[q->rk]);
    if (q->act != CA_NONE) fprintf(f, " act=%s", ca_names[q->act]);
    if (q->act != CA_NONE && q->act != CA_DISCONNECT)
      fprintf(f, " on=%s k=%u", on_names[q->act_on], q->act_k);
    if (q->act == CA_DISCONNECT) fprintf(f, " act_at=%u", q->act_at);
    if (q->act == CA_STOP) fprintf(f, " stop_ms=%u", q->stop_ms);
    if (q->alloc_fail) fprintf(f, " alloc_fail=%u", q->alloc_fail);
    if (q->alloc_fail && q->alloc_at) fprintf(f, " alloc_at=%u", q->alloc_at);
    fputc('\n', f);
    for (int a = 0; a < q->n_att; a++) {
      const script *sc = &q->att[a];
      fprintf(f,
              "  attempt kind=%s status=%d retry_after=%u head_gap=%u "
              "finish=%s usage=%d "
              "done=%d end=%s end_gap=%u split=%u\n",
              ak_names[sc->kind], sc->status, sc->retry_after, sc->head_gap,
              fin_names[sc->finish], sc->usage, sc->done, end_names[sc->end],
              sc->end_gap, sc->split);
      if (sc->big != BF_NONE)
        fprintf(f, "    big field=%s len=%u\n", bf_names[sc->big], sc->big_len);
      for (int p = 0; p < sc->n; p++) {
        fprintf(f,
                "    piece kind=%s gap=%u text=", pk_names[sc->pieces[p].kind],
                sc->pieces[p].gap);
        write_str(f, sc->pieces[p].text);
        fputc('\n', f);
      }
    }
    for (int c = 0; c < q->n_cont; c++) {
      const cscript *cs = &q->cont[c];
      fprintf(f,
              "  cont mode=%s fault=%s after=%u gap=%u head_gap=%u finish=%s "
              "usage=%d "
              "split=%u\n",
              cm_names[cs->mode], cf_names[cs->fault], cs->after, cs->gap,
              cs->head_gap, fin_names[cs->finish], cs->usage, cs->split);
    }
    if (q->tail[0]) {
      fprintf(f, "  tail text=");
      write_str(f, q->tail);
      fputc('\n', f);
    }
    if (q->expect_att > 0)
      fprintf(f, "  expect attempt=%d reason=%s\n", q->expect_att,
              q->expect_reason);
  }
}

/* key=value lookup in one line; value up to the next space (or a quoted
 * string). */
static bool kv(const char *line, const char *key, char *out, size_t cap) {
  size_t kn = strlen(key);
  for (const char *p = line; (p = strstr(p, key)) != NULL; p++) {
    if ((p != line && p[-1] != ' ') || p[kn] != '=') continue;
    const char *v = p + kn + 1;
    size_t n = 0;
    if (*v == '"') {
      for (v++; *v && *v != '"' && n + 1 < cap; v++) {
        char c = *v;
        if (c == '\\' && v[1]) {
          v++;
          c = *v == 'n' ? '\n' : *v == 't' ? '\t' : *v;
          if (*v == 'x' && v[1] && v[2]) {
            char h[3] = {v[1], v[2], 0};
            c = (char)strtoul(h, NULL, 16);
            v += 2;
          }
        }
        out[n++] = c;
      }
    } else {
      while (v[n] && v[n] != ' ' && v[n] != '\n' && n + 1 < cap) {
        out[n] = v[n];
        n++;
      }
    }
    out[n] = '\0';
    return true;
  }
  return false;
}

static long kvn(const char *line, const char *key) {
  char v[32];
  return kv(line, key, v, sizeof(v)) ? strtol(v, NULL, 10) : 0;
}

static int name_of(const char *const *names, int n, const char *line,
                   const char *key) {
  char v[32];
  if (!kv(line, key, v, sizeof(v))) return -1;
  for (int i = 0; i < n; i++)
    if (strcmp(names[i], v) == 0) return i;
  return -1;
}

sim_scenario *sim_parse(const char *text, size_t n, char *err, size_t cap) {
  sim_scenario *s = calloc(1, sizeof(*s));
  char *copy = malloc(n + 1);
  if (s == NULL || copy == NULL || (s->yaml = calloc(1, 16384)) == NULL) {
    if (s) free(s->yaml);
    free(s);
    free(copy);
    snprintf(err, cap, "out of memory");
    return NULL;
  }
  memcpy(copy, text, n);
  copy[n] = '\0';
  yb y = {s->yaml, 0, 16384};
  sim_req *q = NULL;
  script *sc = NULL;
  int lineno = 0;
  char *save = NULL;
  const char *bad = NULL;
  for (char *line = strtok_r(copy, "\n", &save); line && !bad;
       line = strtok_r(NULL, "\n", &save)) {
    lineno++;
    while (*line == ' ') line++;
    if (*line == '#' || *line == '\0') continue;
    if (strncmp(line, "seed ", 5) == 0) {
      s->seed = strtoull(line + 5, NULL, 10);
    } else if (strncmp(line, "route ", 6) == 0) {
      if (s->n_routes >= MAX_ROUTES) {
        bad = "too many routes";
        break;
      }
      route_meta *m = &s->routes[s->n_routes++];
      snprintf(m->name, sizeof(m->name), "%.*s", (int)strcspn(line + 6, " "),
               line + 6);
      m->n_targets = (int)kvn(line, "targets");
      m->max_attempts = (uint32_t)kvn(line, "max_attempts");
      m->retry_max_sum = (uint32_t)kvn(line, "retry_max_sum");
      m->first_byte_ms = (uint64_t)kvn(line, "first_byte_ms");
      m->total_ms = (uint64_t)kvn(line, "total_ms");
      m->max_wait_ms = (uint64_t)kvn(line, "max_wait_ms");
    } else if (strcmp(line, "config") == 0) {
      /* the "| " lines follow */
    } else if (line[0] == '|') {
      /* strtok_r skipped the indentation: the YAML keeps it after "| " */
      const char *raw = line + (line[1] == ' ' ? 2 : 1);
      yadd(&y, "%s\n", raw);
    } else if (strncmp(line, "request ", 8) == 0) {
      if (s->n_req >= MAX_REQ) {
        bad = "too many requests";
        break;
      }
      q = &s->req[s->n_req++];
      sc = NULL;
      q->at = (uint32_t)kvn(line, "at");
      kv(line, "model", q->model, sizeof(q->model));
      char d[24] = "";
      kv(line, "dialect", d, sizeof(d));
      q->dialect = strcmp(d, "anthropic") == 0 ? AIR_DIALECT_ANTHROPIC
                   : strcmp(d, "openai_responses") == 0
                       ? AIR_DIALECT_OPENAI_RESPONSES
                       : AIR_DIALECT_OPENAI;
      q->stream = kvn(line, "stream") != 0;
      q->include_usage = kvn(line, "include_usage") != 0;
      int rk = name_of(rk_names, RK__N, line, "kind");
      q->rk = rk < 0 ? RK_CHAT : rk;
      int act = name_of(ca_names, CA__N, line, "act");
      q->act = act < 0 ? CA_NONE : act;
      int on = name_of(on_names, ON__N, line, "on");
      q->act_on = on < 0 ? ON_COMMIT : on;
      q->act_k = (uint32_t)kvn(line, "k");
      q->act_at = (uint32_t)kvn(line, "act_at");
      q->stop_ms = (uint32_t)kvn(line, "stop_ms");
      q->alloc_fail = (uint32_t)kvn(line, "alloc_fail");
      q->alloc_at = (uint32_t)kvn(line, "alloc_at");
    } else if (strncmp(line, "attempt ", 8) == 0) {
      if (q == NULL || q->n_att >= MAX_ATT) {
        bad = "attempt outside a request";
        break;
      }
      sc = &q->att[q->n_att++];
      sc->kind = name_of(ak_names, 5, line, "kind");
      sc->status = (int)kvn(line, "status");
      sc->retry_after = (uint32_t)kvn(line, "retry_after");
      sc->head_gap = (uint32_t)kvn(line, "head_gap");
      sc->finish = name_of(fin_names, 5, line, "finish");
      sc->usage = kvn(line, "usage") != 0;
      sc->done = kvn(line, "done") != 0;
      sc->end = name_of(end_names, 3, line, "end");
      sc->end_gap = (uint32_t)kvn(line, "end_gap");
      sc->split = (uint32_t)strtoul(
          strstr(line, "split=") ? strstr(line, "split=") + 6 : "0", NULL, 10);
      if (sc->kind < 0 || sc->finish < 0 || sc->end < 0) bad = "bad attempt";
    } else if (strncmp(line, "cont ", 5) == 0) {
      if (q == NULL || q->n_cont >= MAX_CONT) {
        bad = "cont outside a request";
        break;
      }
      cscript *cs = &q->cont[q->n_cont++];
      cs->mode = name_of(cm_names, CM__N, line, "mode");
      cs->fault = name_of(cf_names, CF__N, line, "fault");
      cs->after = (uint32_t)kvn(line, "after");
      cs->gap = (uint32_t)kvn(line, "gap");
      cs->head_gap = (uint32_t)kvn(line, "head_gap");
      cs->finish = name_of(fin_names, 5, line, "finish");
      cs->usage = kvn(line, "usage") != 0;
      cs->split = (uint32_t)strtoul(
          strstr(line, "split=") ? strstr(line, "split=") + 6 : "0", NULL, 10);
      if (cs->mode < 0 || cs->fault < 0 || cs->finish < 0) bad = "bad cont";
    } else if (strncmp(line, "tail ", 5) == 0) {
      if (q == NULL) {
        bad = "tail outside a request";
        break;
      }
      kv(line, "text", q->tail, sizeof(q->tail));
    } else if (strncmp(line, "expect ", 7) == 0) {
      /* written by hand: the reason an attempt must fail with */
      if (q == NULL) {
        bad = "expect outside a request";
        break;
      }
      q->expect_att = (int)kvn(line, "attempt");
      kv(line, "reason", q->expect_reason, sizeof(q->expect_reason));
      if (q->expect_att <= 0 || q->expect_reason[0] == '\0') bad = "bad expect";
    } else if (strncmp(line, "big ", 4) == 0) {
      if (sc == NULL) {
        bad = "big outside an attempt";
        break;
      }
      sc->big = name_of(bf_names, BF__N, line, "field");
      sc->big_len = (uint32_t)kvn(line, "len");
      if (sc->big < 0 || sc->big_len > BIG_FIELD_MAX) bad = "bad big";
    } else if (strncmp(line, "piece ", 6) == 0) {
      if (sc == NULL || sc->n >= MAX_PIECES) {
        bad = "piece outside an attempt";
        break;
      }
      piece *p = &sc->pieces[sc->n++];
      p->kind = name_of(pk_names, 5, line, "kind");
      p->gap = (uint32_t)kvn(line, "gap");
      kv(line, "text", p->text, sizeof(p->text));
      if (p->kind < 0) bad = "bad piece";
    } else {
      bad = "unknown line";
    }
  }
  free(copy);
  if (bad == NULL && (s->n_req == 0 || y.n == 0))
    bad = "no config or no request";
  if (bad) {
    snprintf(err, cap, "line %d: %s", lineno, bad);
    sim_free(s);
    return NULL;
  }
  return s;
}

/* ---- rendering a script in a dialect ------------------------------------- */

static int jstr(air__buf *b, const char *s) {
  return air__buf_put_json_str(b, s, strlen(s)), air__buf_error(b);
}

static const char *finish_raw(int dialect, int fin) {
  bool oa = dialect != AIR_DIALECT_ANTHROPIC;
  switch (fin) {
    case FIN_STOP:
      return oa ? "stop" : "end_turn";
    case FIN_LENGTH:
      return oa ? "length" : "max_tokens";
    case FIN_TOOLS:
      return oa ? "tool_calls" : "tool_use";
    case FIN_FILTER:
      return oa ? "content_filter" : "refusal";
    default:
      return NULL;
  }
}

/* Field f of script s as a JSON string: normal, or the drawn long value
 * (letters and digits) when s draws f long. */
static void put_field(air__buf *b, const script *s, int f, const char *normal) {
  if (s == NULL || s->big != f) {
    jstr(b, normal);
    return;
  }
  static const char abc[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  air__buf_putc(b, '"');
  for (uint32_t i = 0; i < s->big_len; i++)
    air__buf_putc(b, abc[i % (sizeof(abc) - 1)]);
  air__buf_putc(b, '"');
}

/* One event of an OpenAI stream. */
static void oa_chunk(air__buf *b, const script *s, const char *delta_json,
                     const char *finish) {
  air__buf_puts(b, "data: {\"id\":");
  put_field(b, s, BF_ID, "chatcmpl-sim");
  air__buf_puts(
      b, ",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":");
  put_field(b, s, BF_MODEL, "m");
  air__buf_puts(b, ",\"choices\":[{\"index\":0,\"delta\":");
  air__buf_puts(b, delta_json);
  air__buf_puts(b, ",\"finish_reason\":");
  if (finish)
    put_field(b, s, BF_FINISH, finish);
  else
    air__buf_puts(b, "null");
  air__buf_puts(b, "}]}\n\n");
}

/* The event boundaries are recorded in ends[] (offsets after each event). */
typedef struct rendered {
  air__buf b;
  size_t ends[SCRIPT_PIECES + 16];
  uint32_t gaps[SCRIPT_PIECES + 16];
  int n;
} rendered;

static void mark(rendered *r, uint32_t gap) {
  if (r->n < (int)(sizeof(r->ends) / sizeof(r->ends[0]))) {
    r->ends[r->n] = r->b.n;
    r->gaps[r->n] = gap;
    r->n++;
  }
}

static void render_openai(const script *s, rendered *r) {
  air__buf *b = &r->b;
  air__buf tmp;
  air__buf_init(&tmp, 1u << 20);
  oa_chunk(b, s, "{\"role\":\"assistant\",\"content\":\"\"}", NULL);
  mark(r, 0);
  bool tool_started = false;
  for (int i = 0; i < s->n; i++) {
    const piece *p = &s->pieces[i];
    air__buf_reset(&tmp);
    switch (p->kind) {
      case PK_TEXT:
        air__buf_puts(&tmp, "{\"content\":");
        jstr(&tmp, p->text);
        air__buf_putc(&tmp, '}');
        oa_chunk(b, s, tmp.p, NULL);
        break;
      case PK_TOOL:
        air__buf_puts(&tmp, "{\"tool_calls\":[{\"index\":0,");
        if (!tool_started) {
          air__buf_puts(&tmp, "\"id\":");
          put_field(&tmp, s, BF_TOOL_ID, "call_sim");
          air__buf_puts(&tmp, ",\"type\":\"function\",\"function\":{\"name\":");
          put_field(&tmp, s, BF_TOOL_NAME, "f");
          air__buf_puts(&tmp, ",\"arguments\":");
        } else {
          air__buf_puts(&tmp, "\"function\":{\"arguments\":");
        }
        tool_started = true;
        jstr(&tmp, p->text);
        air__buf_puts(&tmp, "}}]}");
        oa_chunk(b, s, tmp.p, NULL);
        break;
      case PK_GARBAGE:
        air__buf_puts(b, "data: {\"choices\":[{\"delta\":{\"content\":\n\n");
        break;
      case PK_PING:
        air__buf_puts(b, ": keep-alive\n\n");
        break;
      case PK_ERROR:
        air__buf_puts(
            b,
            "data: {\"error\":{\"message\":\"sim error event\",\"type\":"
            "\"server_error\"}}\n\n");
        break;
    }
    mark(r, p->gap);
  }
  if (s->finish != FIN_NONE) {
    oa_chunk(b, s, "{}", finish_raw(AIR_DIALECT_OPENAI, s->finish));
    mark(r, 0);
  }
  if (s->usage) {
    air__buf_puts(b, "data: {\"id\":");
    put_field(b, s, BF_ID, "chatcmpl-sim");
    air__buf_puts(
        b, ",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":");
    put_field(b, s, BF_MODEL, "m");
    air__buf_puts(
        b,
        ",\"choices\":[],\"usage\":{"
        "\"prompt_tokens\":3,\"completion_tokens\":5,\"total_tokens\":8}}\n\n");
    mark(r, 0);
  }
  if (s->done) {
    air__buf_puts(b, "data: [DONE]\n\n");
    mark(r, 0);
  }
  air__buf_cleanup(&tmp);
}

static void an_event(air__buf *b, const char *type, const char *data) {
  air__buf_puts(b, "event: ");
  air__buf_puts(b, type);
  air__buf_puts(b, "\ndata: ");
  air__buf_puts(b, data);
  air__buf_puts(b, "\n\n");
}

static void render_anthropic(const script *s, rendered *r) {
  air__buf *b = &r->b;
  air__buf tmp;
  air__buf_init(&tmp, 1u << 20);
  air__buf_puts(&tmp, "{\"type\":\"message_start\",\"message\":{\"id\":");
  put_field(&tmp, s, BF_ID, "msg_sim");
  air__buf_puts(&tmp,
                ",\"type\":\"message\",\"role\":\"assistant\",\"model\":");
  put_field(&tmp, s, BF_MODEL, "m");
  air__buf_puts(&tmp,
                ",\"content\":[],\"stop_reason\":null,"
                "\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}");
  an_event(b, "message_start", tmp.p);
  mark(r, 0);
  int open = -1, kind = -1, next_block = 0;
  for (int i = 0; i < s->n; i++) {
    const piece *p = &s->pieces[i];
    if ((p->kind == PK_TEXT || p->kind == PK_TOOL) && kind != p->kind) {
      if (open >= 0) {
        air__buf_reset(&tmp);
        air__buf_puts(&tmp, "{\"type\":\"content_block_stop\",\"index\":");
        air__buf_putu(&tmp, (unsigned long long)open);
        air__buf_putc(&tmp, '}');
        an_event(b, "content_block_stop", tmp.p);
      }
      open = next_block++;
      kind = p->kind;
      air__buf_reset(&tmp);
      air__buf_puts(&tmp, "{\"type\":\"content_block_start\",\"index\":");
      air__buf_putu(&tmp, (unsigned long long)open);
      if (kind == PK_TEXT) {
        air__buf_puts(&tmp,
                      ",\"content_block\":{\"type\":\"text\",\"text\":\"\"}}");
      } else {
        air__buf_puts(&tmp,
                      ",\"content_block\":{\"type\":\"tool_use\",\"id\":");
        put_field(&tmp, s, BF_TOOL_ID, "toolu_sim");
        air__buf_puts(&tmp, ",\"name\":");
        put_field(&tmp, s, BF_TOOL_NAME, "f");
        air__buf_puts(&tmp, ",\"input\":{}}}");
      }
      an_event(b, "content_block_start", tmp.p);
    }
    air__buf_reset(&tmp);
    switch (p->kind) {
      case PK_TEXT:
      case PK_TOOL:
        air__buf_puts(&tmp, "{\"type\":\"content_block_delta\",\"index\":");
        air__buf_putu(&tmp, (unsigned long long)open);
        air__buf_puts(&tmp,
                      p->kind == PK_TEXT
                          ? ",\"delta\":{\"type\":\"text_delta\",\"text\":"
                          : ",\"delta\":{\"type\":\"input_json_delta\","
                            "\"partial_json\":");
        jstr(&tmp, p->text);
        air__buf_puts(&tmp, "}}");
        an_event(b, "content_block_delta", tmp.p);
        break;
      case PK_GARBAGE:
        air__buf_puts(b,
                      "event: content_block_delta\ndata: "
                      "{\"type\":\"content_block_delta\","
                      "\"index\":\n\n");
        break;
      case PK_PING:
        an_event(b, "ping", "{\"type\":\"ping\"}");
        break;
      case PK_ERROR:
        an_event(b, "error",
                 "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
                 "\"message\":\"sim error event\"}}");
        break;
    }
    mark(r, p->gap);
  }
  if (open >= 0 && (s->finish != FIN_NONE || s->done)) {
    air__buf_reset(&tmp);
    air__buf_puts(&tmp, "{\"type\":\"content_block_stop\",\"index\":");
    air__buf_putu(&tmp, (unsigned long long)open);
    air__buf_putc(&tmp, '}');
    an_event(b, "content_block_stop", tmp.p);
    mark(r, 0);
  }
  if (s->finish != FIN_NONE || s->usage) {
    air__buf_reset(&tmp);
    air__buf_puts(&tmp,
                  "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":");
    const char *f = finish_raw(AIR_DIALECT_ANTHROPIC, s->finish);
    if (f) {
      put_field(&tmp, s, BF_FINISH, f);
    } else {
      air__buf_puts(&tmp, "null");
    }
    air__buf_puts(&tmp, "}");
    if (s->usage) air__buf_puts(&tmp, ",\"usage\":{\"output_tokens\":5}");
    air__buf_puts(&tmp, "}");
    an_event(b, "message_delta", tmp.p);
    mark(r, 0);
  }
  if (s->done) {
    an_event(b, "message_stop", "{\"type\":\"message_stop\"}");
    mark(r, 0);
  }
  air__buf_cleanup(&tmp);
}

/* A whole (non-stream) 200 body. */
/* One Responses event (its type in the event line and the data). */
static void rs_event(air__buf *b, const char *type, const char *rest) {
  air__buf_puts(b, "event: ");
  air__buf_puts(b, type);
  air__buf_puts(b, "\ndata: {\"type\":\"");
  air__buf_puts(b, type);
  air__buf_puts(b, "\"");
  air__buf_puts(b, rest);
  air__buf_puts(b, "}\n\n");
}

/* A Responses stream: the finish is response.completed (stop, tool calls)
 * or response.incomplete (length, content_filter), which is also the
 * terminator: a script without a finish has none; usage rides on it. */
static void render_responses(const script *s, rendered *r) {
  air__buf *b = &r->b;
  air__buf tmp;
  air__buf_init(&tmp, 1u << 20);
  air__buf_puts(&tmp, ",\"response\":{\"id\":");
  put_field(&tmp, s, BF_ID, "resp_sim");
  air__buf_puts(&tmp, ",\"model\":");
  put_field(&tmp, s, BF_MODEL, "m");
  air__buf_puts(&tmp, ",\"status\":\"in_progress\",\"output\":[]}");
  rs_event(b, "response.created", tmp.p);
  mark(r, 0);
  bool tool_started = false;
  for (int i = 0; i < s->n; i++) {
    const piece *p = &s->pieces[i];
    air__buf_reset(&tmp);
    switch (p->kind) {
      case PK_TEXT:
        air__buf_puts(&tmp,
                      ",\"item_id\":\"msg_sim\",\"output_index\":0,"
                      "\"content_index\":0,\"delta\":");
        jstr(&tmp, p->text);
        rs_event(b, "response.output_text.delta", tmp.p);
        break;
      case PK_TOOL:
        if (!tool_started) {
          air__buf_puts(
              &tmp,
              ",\"output_index\":1,\"item\":{\"type\":\"function_call\","
              "\"id\":\"fc_sim\",\"call_id\":");
          put_field(&tmp, s, BF_TOOL_ID, "call_sim");
          air__buf_puts(&tmp, ",\"name\":");
          put_field(&tmp, s, BF_TOOL_NAME, "f");
          air__buf_puts(&tmp, ",\"arguments\":\"\"}");
          rs_event(b, "response.output_item.added", tmp.p);
          air__buf_reset(&tmp);
        }
        tool_started = true;
        air__buf_puts(&tmp,
                      ",\"item_id\":\"fc_sim\",\"output_index\":1,\"delta\":");
        jstr(&tmp, p->text);
        rs_event(b, "response.function_call_arguments.delta", tmp.p);
        break;
      case PK_GARBAGE:
        air__buf_puts(
            b, "event: response.output_text.delta\ndata: {\"delta\":\n\n");
        break;
      case PK_PING:
        air__buf_puts(b, ": keep-alive\n\n");
        break;
      case PK_ERROR:
        rs_event(b, "error",
                 ",\"code\":\"server_error\",\"message\":\"sim error event\"");
        break;
    }
    mark(r, p->gap);
  }
  if (s->finish != FIN_NONE) {
    /* a long finish reason is an incomplete one's reason */
    bool inc = s->finish == FIN_LENGTH || s->finish == FIN_FILTER ||
               s->big == BF_FINISH;
    air__buf_reset(&tmp);
    air__buf_puts(&tmp, ",\"response\":{\"id\":");
    put_field(&tmp, s, BF_ID, "resp_sim");
    air__buf_puts(&tmp, ",\"model\":");
    put_field(&tmp, s, BF_MODEL, "m");
    air__buf_puts(&tmp, ",\"status\":");
    air__buf_puts(&tmp,
                  inc ? "\"incomplete\",\"incomplete_details\":{\"reason\":"
                      : "\"completed\"");
    if (inc) {
      put_field(
          &tmp, s, BF_FINISH,
          s->finish == FIN_LENGTH ? "max_output_tokens" : "content_filter");
      air__buf_putc(&tmp, '}');
    }
    if (s->usage)
      air__buf_puts(&tmp,
                    ",\"usage\":{\"input_tokens\":3,\"output_tokens\":5}");
    air__buf_puts(&tmp, "}");
    rs_event(b, inc ? "response.incomplete" : "response.completed", tmp.p);
    mark(r, 0);
  }
  air__buf_cleanup(&tmp);
}

static void render_body(int dialect, const script *s, rendered *r) {
  air__buf *b = &r->b;
  char text[SCRIPT_PIECES * PIECE_TEXT + 1] = "",
                                         args[SCRIPT_PIECES * PIECE_TEXT + 1] =
                                             "";
  size_t nt = 0, na = 0;
  bool tool = false;
  for (int i = 0; i < s->n; i++) {
    const piece *p = &s->pieces[i];
    size_t pn =
        strlen(p->text); /* < PIECE_TEXT: both arrays hold every piece */
    if (p->kind == PK_TEXT) {
      memcpy(text + nt, p->text, pn + 1);
      nt += pn;
    }
    if (p->kind == PK_TOOL) {
      tool = true;
      memcpy(args + na, p->text, pn + 1);
      na += pn;
    }
  }
  const char *f = finish_raw(dialect, s->finish);
  if (dialect == AIR_DIALECT_OPENAI_RESPONSES) {
    bool inc = s->finish == FIN_LENGTH || s->finish == FIN_FILTER ||
               s->big == BF_FINISH;
    air__buf_puts(b, "{\"id\":");
    put_field(b, s, BF_ID, "resp_sim");
    air__buf_puts(b, ",\"object\":\"response\",\"model\":");
    put_field(b, s, BF_MODEL, "m");
    air__buf_puts(b, ",\"status\":");
    air__buf_puts(b, inc ? "\"incomplete\",\"incomplete_details\":{\"reason\":"
                         : "\"completed\"");
    if (inc) {
      put_field(
          b, s, BF_FINISH,
          s->finish == FIN_LENGTH ? "max_output_tokens" : "content_filter");
      air__buf_putc(b, '}');
    }
    air__buf_puts(b, ",\"output\":[");
    if (text[0]) {
      air__buf_puts(
          b,
          "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{"
          "\"type\":\"output_text\",\"text\":");
      jstr(b, text);
      air__buf_puts(b, "}]}");
    }
    if (tool) {
      if (text[0]) air__buf_putc(b, ',');
      air__buf_puts(b, "{\"type\":\"function_call\",\"call_id\":");
      put_field(b, s, BF_TOOL_ID, "call_sim");
      air__buf_puts(b, ",\"name\":");
      put_field(b, s, BF_TOOL_NAME, "f");
      air__buf_puts(b, ",\"arguments\":");
      jstr(b, args);
      air__buf_puts(b, "}");
    }
    air__buf_puts(b, "]");
    if (s->usage)
      air__buf_puts(b, ",\"usage\":{\"input_tokens\":3,\"output_tokens\":5}");
    air__buf_puts(b, "}");
  } else if (dialect == AIR_DIALECT_OPENAI) {
    air__buf_puts(b, "{\"id\":");
    put_field(b, s, BF_ID, "chatcmpl-sim");
    air__buf_puts(b,
                  ",\"object\":\"chat.completion\",\"created\":1,\"model\":");
    put_field(b, s, BF_MODEL, "m");
    air__buf_puts(b,
                  ",\"choices\":[{\"index\":0,\"message\":{\"role\":"
                  "\"assistant\",\"content\":");
    jstr(b, text);
    if (tool) {
      air__buf_puts(b, ",\"tool_calls\":[{\"id\":");
      put_field(b, s, BF_TOOL_ID, "call_sim");
      air__buf_puts(b, ",\"type\":\"function\",\"function\":{\"name\":");
      put_field(b, s, BF_TOOL_NAME, "f");
      air__buf_puts(b, ",\"arguments\":");
      jstr(b, args);
      air__buf_puts(b, "}}]");
    }
    air__buf_puts(b, "},\"finish_reason\":");
    put_field(b, s, BF_FINISH, f ? f : "stop");
    air__buf_puts(b, "}]");
    if (s->usage)
      air__buf_puts(b,
                    ",\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":5,"
                    "\"total_tokens\":8}");
    air__buf_puts(b, "}");
  } else {
    air__buf_puts(b, "{\"id\":");
    put_field(b, s, BF_ID, "msg_sim");
    air__buf_puts(b, ",\"type\":\"message\",\"role\":\"assistant\",\"model\":");
    put_field(b, s, BF_MODEL, "m");
    air__buf_puts(b, ",\"content\":[");
    bool first = true;
    if (text[0]) {
      air__buf_puts(b, "{\"type\":\"text\",\"text\":");
      jstr(b, text);
      air__buf_puts(b, "}");
      first = false;
    }
    if (tool) {
      /* input must be an object: the whole args only when they parse as one */
      json_t *j = json_loads(args, 0, NULL);
      if (!first) air__buf_putc(b, ',');
      air__buf_puts(b, "{\"type\":\"tool_use\",\"id\":");
      put_field(b, s, BF_TOOL_ID, "toolu_sim");
      air__buf_puts(b, ",\"name\":");
      put_field(b, s, BF_TOOL_NAME, "f");
      air__buf_puts(b, ",\"input\":");
      air__buf_puts(b, json_is_object(j) ? args : "{}");
      air__buf_puts(b, "}");
      json_decref(j);
    }
    air__buf_puts(b, "],\"stop_reason\":");
    put_field(b, s, BF_FINISH, f ? f : "end_turn");
    air__buf_puts(b, ",\"usage\":{\"input_tokens\":3,\"output_tokens\":5}}");
  }
  mark(r, 0);
}

/* A 200 body of an endpoint without a stream (the upstream's answer,
 * passed to the caller unchanged): an embedding list, a token count, a
 * stored response. */
static void render_plain(int rk, const script *s, rendered *r) {
  air__buf *b = &r->b;
  if (rk == RK_COUNT) {
    air__buf_puts(b, "{\"input_tokens\":");
    air__buf_putu(b, 3u + (unsigned)s->n);
    air__buf_puts(b, "}");
  } else if (rk == RK_RETRIEVE) {
    air__buf_puts(b, "{\"id\":");
    put_field(b, s, BF_ID, "resp_sim");
    air__buf_puts(
        b, ",\"object\":\"response\",\"status\":\"completed\",\"model\":");
    put_field(b, s, BF_MODEL, "m");
    air__buf_puts(b, ",\"output\":[]}");
  } else {
    air__buf_puts(
        b,
        "{\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"index\":0,"
        "\"embedding\":[0.25,-0.5]}],\"model\":");
    put_field(b, s, BF_MODEL, "m");
    air__buf_puts(b, ",\"usage\":{\"prompt_tokens\":2,\"total_tokens\":2}}");
  }
  mark(r, 0);
}

/* ---- the virtual loop ---------------------------------------------------- */

typedef struct world world;
typedef struct sim_run_req sim_run_req;

struct air__timer {
  world *w;
  sim_run_req *q; /* the request whose work made it (allocation
                     failures are laid to it) */
  air__timer_fn fire, closed;
  void *arg, *closed_arg;
  bool armed, closing;
  uint64_t due, seq;
  air__timer *next;
};

typedef struct xfer {
  world *w;
  sim_run_req *q;
  const script *sc;
  int dialect; /* the upstream's */
  air__xfer_cb cb;
  rendered out;
  size_t off;     /* bytes delivered */
  int next_event; /* ends[] index of the next read */
  int phase;      /* 0 head, 1 body, 2 end, 3 done (dead) */
  bool paused, stalled, dead, abort_pending;
  int k; /* its attempt's index in the request */
  uint64_t due, seq;
  rng split;
  struct xfer *next;
} xfer;

struct sim_run_req {
  world *w;
  int idx;
  const sim_req *q;
  route_meta route; /* the policy's bounds, from the loaded config */
  air__request areq;
  air__exchange *x;
  air__plain *px;    /* the plain exchange (an endpoint without a
                        stream) instead of x */
  air__request stub; /* what the responder reads of a plain request */
  char path[64];     /* the plain exchange's upstream path: it is borrowed
                        until the end (read by every attempt) */
  air__responder rs;
  air__buf got; /* every byte the caller received */
  bool started, ended, committed;
  /* The caller (sim_req.act) and what it saw. */
  bool in_start;         /* inside air__exchange_start_on / plain_start_on */
  bool acted;            /* its action was taken */
  bool cancelled;        /* it cancelled before on_end */
  bool gone;             /* it went away (the responder's gone) */
  bool lost;             /* the responder lost part of the answer */
  bool alloc_hit;        /* an injected allocation failure hit its work */
  unsigned calls[ON__N]; /* callbacks so far, by ON_* */
  bool stopped;          /* its reader is stopped */
  bool stop_paused;      /* a transfer was paused while it was */
  uint64_t stop_from, stop_to; /* from the pause until resume or cut
                                  (excluded), or until the end (included) */
  int wake; /* W_*: what the caller does next from the loop */
  uint64_t wake_at, wake_seq;
  int plain_status; /* a plain answer's status */
  int ends;
  unsigned commit_attempt;
  char commit_target[AIR__MAX_TARGET_BYTES];
  char head_target[AIR__MAX_TARGET_BYTES]; /* x-airetry-target of the head that
                                              was sent */
  int end_kind;
  int xfers; /* transfers started */
  uint64_t start_ms, end_ms;
  const script *att_script[64];
  bool att_over[64];        /* attempt k+1's transfer ended or was cancelled */
  bool att_nostart[64];     /* its transfer could not start (no memory) */
  uint64_t att_over_ms[64]; /* when */
  char att_target[64][AIR__MAX_TARGET_BYTES];
  int att_dialect[64];
  air__exchange_result res; /* the scalar fields of the result */
  air_attempt log[64];
  size_t n_log;
  char msgs[64][160];
  /* Continuation (docs/design.md §3.5). A transfer started after commit is a
   * continuation: its script is built then (dyn) from what the caller has
   * (released) and the model's whole answer as the simulator sees it
   * (base), with the text the caller should have if it joins (join) and
   * whether that is known exactly or only as "released + a suffix of its
   * text" (exact), or whether it must fail (must_fail: a preamble asked
   * with instruct, a diverging restart). */
  air__buf released;
  air__buf base;
  bool have_base;
  int n_dyn;
  script dyn[16];
  int att_cont[64]; /* 1 + its continuation behaviour, 0: not one */
  size_t att_plen[64];
  air__buf att_join[64]; /* (initialised for continuations only) */
  air__buf att_ctext[64];
  bool att_exact[64], att_must_fail[64], att_instruct[64];
  unsigned joined; /* the number of the last continuation that joined */
  uint64_t ka[16]; /* when keep-alives were sent (the first 16) */
  unsigned n_ka;
  bool att_joined[64];
  int n_joined;
};

struct world {
  uint64_t now, seq;
  air__timer *timers;
  xfer *xfers;
  air_state *state;
  air_config *cfg;
  sim_run_req *reqs;
  int n;
  char *why;
  size_t why_cap;
  bool failed;
  unsigned n_failed;
  bool invalid; /* the scenario itself is not valid (sim_run returns 2) */
  air__exchange_pools pools; /* as a gateway worker's: a later request
                                reuses the legs and exchange of an earlier
                                one */
};

/* The first violation goes into why; later ones (up to 3 in all) are
 * appended after "; then: ", so a report shows what followed it. */
static void fail(world *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void fail(world *w, const char *fmt, ...) {
  if (w->n_failed++ >= 3) return;
  size_t at = w->failed ? strlen(w->why) : 0;
  if (w->failed && at + 8 < w->why_cap) {
    memcpy(w->why + at, "; then: ", 9);
    at += 8;
  }
  w->failed = true;
  if (at >= w->why_cap) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(w->why + at, w->why_cap - at, fmt, ap);
  va_end(ap);
}

/* ---- allocation failure
 * ------------------------------------------------------------
 *
 * The sim executable is linked with -Wl,--wrap=malloc,calloc,realloc,strdup,
 * strndup (tests/sim/sim_alloc.c), and the loop's timer_new and the
 * transport's start allocate with them too: the project's allocations on
 * the request path all pass sim_alloc_fails. jansson's own do not (routed
 * with json_set_alloc_funcs, a failing one crashes libjansson 2.14 inside
 * json_loadb's lexer: a SEGV, not a NULL). It fails one, the N-th counted from
 * the start of the request that drew alloc_fail N, and only while the request
 * path runs (armed): the simulator's own work never fails. The request whose
 * work was running takes the failure (alloc_hit).
 */
static struct {
  bool armed;
  uint32_t countdown; /* 0: none */
  sim_run_req *cur;
  unsigned long long hits; /* failures injected (sim_stats) */
} g_alloc;

bool sim_alloc_fails(void) {
  if (!g_alloc.armed || g_alloc.countdown == 0 || --g_alloc.countdown > 0)
    return false;
  if (g_alloc.cur != NULL) g_alloc.cur->alloc_hit = true;
  g_alloc.hits++;
  return true;
}

/* Arms (the request path runs) or disarms (the simulator's own work);
 * returns what it was. */
static unsigned long long st_plain, st_plain_ok, st_acts, st_big;

static bool arm(bool on) {
  bool was = g_alloc.armed;
  g_alloc.armed = on;
  return was;
}

/* stmt runs the request path (from inside one of the simulator's
 * callbacks). */
#define SUT(stmt)              \
  do {                         \
    bool sut_was_ = arm(true); \
    stmt;                      \
    arm(sut_was_);             \
  } while (0)

static uint64_t clk_now(void *d) {
  return ((world *)d)->now;
}
static uint64_t clk_wall(void *d) {
  return 1700000000000ull + ((world *)d)->now;
}
static int clk_sleep(void *d, uint64_t ms, air_cancel *c) {
  (void)c;
  ((world *)d)->now += ms;
  return 0;
}

/* Its calloc stands for the libuv loop's (armed: it may fail). */
static air__timer *t_new(void *impl, air__timer_fn fire, void *arg) {
  world *w = impl;
  air__timer *t = calloc(1, sizeof(*t));
  if (t == NULL) return NULL;
  t->w = w;
  t->q = g_alloc.cur;
  t->fire = fire;
  t->arg = arg;
  t->next = w->timers;
  w->timers = t;
  return t;
}

static void t_start(void *impl, air__timer *t, uint64_t after) {
  world *w = impl;
  t->armed = true;
  t->due = w->now + after;
  t->seq = ++w->seq;
}

static void t_stop(void *impl, air__timer *t) {
  (void)impl;
  t->armed = false;
}

static void t_close(void *impl, air__timer *t, air__timer_fn closed,
                    void *arg) {
  (void)impl;
  t->armed = false;
  t->closing = true;
  t->closed = closed;
  t->closed_arg = arg;
}

static uint64_t t_now(void *impl) {
  return ((world *)impl)->now;
}

static const air__loop_ops sim_loop_ops = {t_new, t_start, t_stop, t_close,
                                           t_now};

/* ---- the scripted transport ---------------------------------------------- */

static void schedule(xfer *x, uint32_t gap) {
  x->due = x->w->now + gap;
  x->seq = ++x->w->seq;
}

/* ---- continuations (docs/design.md §3.5) --------------------------------- */

static void keep(int rc);

static bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v';
}

/* The seam's normal form (seam.h): leading white space skipped, every run
 * of white space one space. */
static void normalise(const char *p, size_t n, air__buf *out) {
  bool lead = true, ws = false;
  for (size_t i = 0; i < n; i++) {
    if (is_ws(p[i])) {
      ws = !lead;
      continue;
    }
    if (ws) keep(air__buf_addc(out, ' '));
    ws = lead = false;
    keep(air__buf_addc(out, p[i]));
  }
  if (ws) keep(air__buf_addc(out, ' '));
}

static size_t chars_of(const char *p, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += ((unsigned char)p[i] & 0xc0) != 0x80;
  return k;
}

/*
 * Whether the seam might drop a prefix of continuation c (n bytes) after
 * sent p: c repeats all of p (a restart), or a tail of p of at least
 * AIR__SEAM_MIN_OVERLAP characters (compared normalised), or agrees with
 * p's beginning for AIR__SEAM_RESTART_MIN characters (a diverging restart
 * fails). Then what the caller gets is not known exactly.
 */
static bool seam_may_act(const char *p, size_t pn, const char *c, size_t cn) {
  air__buf np, nc;
  air__buf_init(&np, 1u << 20);
  air__buf_init(&nc, 1u << 20);
  normalise(p, pn, &np);
  normalise(c, cn, &nc);
  if (np.n > 0 && np.p[np.n - 1] == ' ')
    np.n--; /* sent's trailing run may be
               met by any text */
  bool act = false;
  size_t same = 0;
  while (same < np.n && same < nc.n && np.p[same] == nc.p[same]) same++;
  if (np.n > 0 &&
      (same == np.n || chars_of(np.p, same) >= AIR__SEAM_RESTART_MIN))
    act = true;
  for (size_t t = 1; !act && t < np.n; t++) {
    size_t len = np.n - t;
    if (chars_of(np.p + t, len) < AIR__SEAM_MIN_OVERLAP) break;
    act = len <= nc.n && memcmp(np.p + t, nc.p, len) == 0;
  }
  air__buf_cleanup(&np);
  air__buf_cleanup(&nc);
  return act;
}

/* Back from i to the start of a UTF-8 character. */
static size_t utf8_start(const char *p, size_t i) {
  while (i > 0 && ((unsigned char)p[i] & 0xc0) == 0x80) i--;
  return i;
}

/* The text pieces of t (n bytes) into s, each at most PIECE_TEXT - 1
 * bytes and never split inside a UTF-8 character. */
static void text_pieces(script *s, const char *t, size_t n, uint32_t gap) {
  size_t off = 0;
  while (off < n && s->n < SCRIPT_PIECES - 2) {
    size_t take = n - off < PIECE_TEXT - 1 ? n - off : PIECE_TEXT - 1;
    if (off + take < n) take = utf8_start(t + off, take);
    if (take == 0) take = 1;
    piece *pc = &s->pieces[s->n++];
    pc->kind = PK_TEXT;
    pc->gap = gap;
    memcpy(pc->text, t + off, take);
    pc->text[take] = '\0';
    off += take;
  }
}

static void script_text(const script *s, air__buf *out) {
  for (int i = 0; i < s->n; i++)
    if (s->pieces[i].kind == PK_TEXT)
      keep(air__buf_adds(out, s->pieces[i].text));
}

/*
 * Attempt k (0-based) started after commit: a continuation. Its script is
 * built from the request's next continuation behaviour (past the list: the
 * answer's rest, whole), what the caller has (P) and the answer (base):
 * the rest is base after P (P is a prefix of base unless a preamble was
 * joined: then the rest is the request's tail). Returns the script.
 */
static const script *continuation_script(sim_run_req *q, int k,
                                         const char *body) {
  static const script overflow = {.kind = AK_HTTP, .status = 503};
  if (q->n_dyn >= (int)(sizeof(q->dyn) / sizeof(q->dyn[0])) || k >= 64)
    return &overflow;
  int ci = q->n_dyn;
  script *s = &q->dyn[q->n_dyn++];
  memset(s, 0, sizeof(*s));
  cscript dflt = {
      .mode = CM_EXACT, .fault = CF_NONE, .finish = FIN_STOP, .usage = true};
  const cscript *c = ci < q->q->n_cont ? &q->q->cont[ci] : &dflt;
  q->att_cont[k] = ci + 1;
  q->att_instruct[k] =
      body != NULL && strstr(body, "Your previous reply was cut off") != NULL;
  air__buf_init(&q->att_join[k], 1u << 20);
  air__buf_init(&q->att_ctext[k], 1u << 20);
  const air__buf *P = &q->released;
  size_t pn = P->n;
  q->att_plen[k] = pn;
  if (!q->have_base) { /* the committed script's text and the tail */
    q->have_base = true;
    int ck = (int)q->commit_attempt - 1;
    if (ck >= 0 && ck < 64 && q->att_script[ck] != NULL)
      script_text(q->att_script[ck], &q->base);
    keep(air__buf_adds(&q->base, q->q->tail));
  }
  bool fits = pn <= q->base.n && (pn == 0 || memcmp(q->base.p, P->p, pn) == 0);
  if (!fits) { /* the answer is what was joined, then the tail */
    air__buf_reset(&q->base);
    if (pn) keep(air__buf_add(&q->base, P->p, pn));
    keep(air__buf_adds(&q->base, q->q->tail));
  }
  const char *rest = q->base.p ? q->base.p + pn : "";
  size_t rn = q->base.n - pn;
  air__buf *ct = &q->att_ctext[k];
  bool exact = true, must_fail = false;
  switch (c->mode) {
    case CM_EXACT:
      keep(air__buf_add(ct, rest, rn));
      exact = !seam_may_act(P->p, pn, rest, rn);
      break;
    case CM_RESTART:
      keep(air__buf_add(ct, q->base.p ? q->base.p : "", q->base.n));
      break;
    case CM_REPEAT: {
      size_t from = pn > 40 ? utf8_start(P->p, pn - 40) : 0;
      keep(air__buf_add(ct, P->p + from, pn - from));
      keep(air__buf_add(ct, rest, rn));
      air__buf nt;
      air__buf_init(&nt, 1u << 20);
      normalise(P->p + from, pn - from, &nt);
      exact = from == 0 || chars_of(nt.p, nt.n) > AIR__SEAM_MIN_OVERLAP;
      air__buf_cleanup(&nt);
      break;
    }
    case CM_PREAMBLE:
      keep(air__buf_adds(ct, PREAMBLE_TEXT));
      keep(air__buf_add(ct, rest, rn));
      must_fail = q->att_instruct[k];
      exact = !seam_may_act(P->p, pn, ct->p, ct->n);
      break;
    case CM_DIVERGE: {
      size_t b = utf8_start(P->p, pn / 2);
      if (b == 0 && pn > 0) b = pn; /* one character: it repeats it whole */
      keep(air__buf_add(ct, P->p, b));
      keep(air__buf_adds(ct, DIVERGED_TEXT));
      keep(air__buf_add(ct, q->base.p + b, q->base.n - b));
      air__buf nb;
      air__buf_init(&nb, 1u << 20);
      normalise(P->p, b, &nb);
      must_fail = b < pn && chars_of(nb.p, nb.n) >= AIR__SEAM_RESTART_MIN;
      air__buf_cleanup(&nb);
      exact = false;
      break;
    }
    default:
      break;
  }
  /* The seam collapses a white space run across it: then the bytes differ. */
  if (pn > 0 && is_ws(P->p[pn - 1]) &&
      ((ct->n > 0 && is_ws(ct->p[0])) || (rn > 0 && is_ws(rest[0]))))
    exact = false;
  /* What the caller has if it joins: P and the answer's rest. */
  if (pn) keep(air__buf_add(&q->att_join[k], P->p, pn));
  if (c->mode == CM_PREAMBLE)
    keep(air__buf_adds(&q->att_join[k], PREAMBLE_TEXT));
  if (c->mode == CM_EXACT || c->mode == CM_PREAMBLE || exact)
    keep(air__buf_add(&q->att_join[k], rest, rn));
  q->att_exact[k] = exact && c->mode != CM_DIVERGE;
  q->att_must_fail[k] = must_fail;
  s->head_gap = c->head_gap;
  s->split = c->split;
  s->status = 200;
  switch (c->mode) {
    case CM_REJECT:
      s->kind = AK_HTTP;
      s->status = 400;
      s->reject_prefill = true;
      return s;
    case CM_HTTP:
      s->kind = AK_HTTP;
      s->status = 503;
      return s;
    case CM_RESET:
      s->kind = AK_RESET;
      return s;
    case CM_STALL:
      s->kind = AK_STALL;
      return s;
    default:
      break;
  }
  s->kind = AK_STREAM;
  text_pieces(s, ct->p ? ct->p : "", ct->n, c->gap);
  s->finish = c->finish;
  s->usage = c->usage;
  s->done = true;
  s->end = END_CLEAN;
  if (c->fault != CF_NONE) {
    if ((uint32_t)s->n > c->after) s->n = (int)c->after;
    s->finish = FIN_NONE;
    s->done = false;
    if (c->fault == CF_ERROR) {
      s->pieces[s->n].kind = PK_ERROR;
      s->pieces[s->n].gap = c->gap;
      s->pieces[s->n].text[0] = '\0';
      s->n++;
    }
    s->end = c->fault == CF_CUT     ? END_CUT
             : c->fault == CF_STALL ? END_STALL
                                    : END_CLEAN;
  }
  return s;
}

static void render_plain(int rk, const script *s, rendered *r);
static int x_start_on(sim_run_req *q, xfer *x, const air__xfer_req *r,
                      const air__xfer_cb *cb, void **out);

/* The target the exchange asked for (a base_url's host need not name its
 * provider). */
static void target_of(const air__xfer_req *r, char *target, size_t cap) {
  snprintf(target, cap, "%s", r->target != NULL ? r->target : "?");
}

/* Its calloc stands for the transport's (armed: it may fail); the rest is
 * the simulator's. */
static int x_start(void *impl, const air__xfer_req *r, const air__xfer_cb *cb,
                   void **out) {
  sim_run_req *q = impl;
  xfer *x = calloc(1, sizeof(*x));
  if (x == NULL) { /* the attempt has its number, and no transfer */
    int k = q->xfers++;
    if (k < 64) {
      q->att_over[k] = true;
      q->att_over_ms[k] = q->w->now;
      q->att_nostart[k] = true;
      target_of(r, q->att_target[k], sizeof(q->att_target[k]));
    }
    return AIR_ENOMEM;
  }
  bool was = arm(false);
  int rc = x_start_on(q, x, r, cb, out);
  arm(was);
  return rc;
}

static int x_start_on(sim_run_req *q, xfer *x, const air__xfer_req *r,
                      const air__xfer_cb *cb, void **out) {
  world *w = q->w;
  x->w = w;
  x->q = q;
  x->cb = *cb;
  /* the attempt's script: the request's next one; past its list, a 503 */
  static const script overflow = {.kind = AK_HTTP, .status = 503};
  int k = q->xfers++;
  x->k = 64;
  x->sc = k < q->q->n_att ? &q->q->att[k] : &overflow;
  /* After commit every attempt is a continuation (docs/design.md §3.5). */
  if (q->committed) x->sc = continuation_script(q, k, r->body);
  x->dialect = strstr(r->url, "/v1/messages") ? AIR_DIALECT_ANTHROPIC
               : strstr(r->url, "/responses") ? AIR_DIALECT_OPENAI_RESPONSES
                                              : AIR_DIALECT_OPENAI;
  char target[AIR__MAX_TARGET_BYTES];
  target_of(r, target, sizeof(target));
  if (k < 64) {
    q->att_script[k] = x->sc;
    x->k = k;
    snprintf(q->att_target[k], sizeof(q->att_target[k]), "%s", target);
    q->att_dialect[k] = x->dialect;
  }
  /* The breaker (docs/design.md §3.1): an open target is tried only when every
   * target of the route not tried yet is open too. A retry rule's attempt
   * on the same target is the rule's decision (the engine does not ask the
   * breaker; see docs/testing.md). */
  bool retry = k > 0 && k < 64 && strcmp(q->att_target[k - 1], target) == 0;
  /* With racers (docs/design.md §3.6) a retry follows its own racer's attempt,
   * not the transfer before it: any earlier one on the target. */
  const air__route *hr =
      air__config_route(w->cfg, q->q->model, strlen(q->q->model));
  for (int j = 0; hr && hr->policy.hedge.enabled && j < k && j < 64 && !retry;
       j++)
    retry = strcmp(q->att_target[j], target) == 0;
  /* A read-only breaker (count_tokens, a retrieval: plain.h) passes over
   * every target that is not closed. */
  bool ro = q->q->rk == RK_COUNT || q->q->rk == RK_RETRIEVE;
  air_breaker_mode mode = air_state_breaker(w->state, target, w->now);
  if (!retry && !q->committed &&
      (mode == AIR_BREAKER_OPEN || (ro && mode != AIR_BREAKER_CLOSED))) {
    const air__route *rt =
        air__config_route(w->cfg, q->q->model, strlen(q->q->model));
    for (size_t t = 0; rt && t < rt->n_targets; t++) {
      const char *name = rt->targets[t].name;
      bool tried = strcmp(name, target) == 0;
      for (int j = 0; j < k && j < 64 && !tried; j++)
        tried = strcmp(q->att_target[j], name) == 0;
      /* a plain request skips a target of another dialect: never sent */
      size_t pv = rt->targets[t].provider;
      if (q->q->rk != RK_CHAT && pv < w->cfg->n_providers &&
          (int)w->cfg->providers[pv].api != q->q->dialect)
        tried = true;
      air_breaker_mode other = air_state_breaker(w->state, name, w->now);
      if (!tried &&
          (ro ? other == AIR_BREAKER_CLOSED : other != AIR_BREAKER_OPEN))
        fail(w,
             "request %d: attempt %d started on %s while its breaker is open "
             "and %s's is not",
             q->idx, k + 1, target, name);
    }
  }
  air__buf_init(&x->out.b, 4u << 20);
  if (x->sc->kind == AK_BODY && q->q->rk != RK_CHAT) {
    render_plain(q->q->rk, x->sc, &x->out);
  } else if (x->sc->kind == AK_STREAM) {
    if (x->dialect == AIR_DIALECT_OPENAI)
      render_openai(x->sc, &x->out);
    else if (x->dialect == AIR_DIALECT_OPENAI_RESPONSES)
      render_responses(x->sc, &x->out);
    else
      render_anthropic(x->sc, &x->out);
  } else if (x->sc->kind == AK_BODY) {
    render_body(x->dialect, x->sc, &x->out);
  } else if (x->sc->kind == AK_HTTP && x->sc->reject_prefill) {
    air__buf_puts(&x->out.b, PREFILL_400);
    mark(&x->out, 0);
  } else if (x->sc->kind == AK_HTTP) {
    air__buf_puts(
        &x->out.b,
        x->dialect != AIR_DIALECT_ANTHROPIC
            ? "{\"error\":{\"message\":\"sim says no\",\"type\":\"sim\"}}"
            : "{\"type\":\"error\",\"error\":{\"type\":\"sim\",\"message\":"
              "\"sim says no\"}}");
    mark(&x->out, 0);
  }
  x->split.s = x->sc->split;
  if (x->sc->big != BF_NONE) st_big++;
  schedule(x, x->sc->head_gap);
  x->next = w->xfers;
  w->xfers = x;
  *out = x;
  return 0;
}

static void x_cancel(void *impl, void *p) {
  (void)impl;
  xfer *x = p;
  if (x->dead)
    fail(x->w, "request %d: a transfer cancelled after it ended", x->q->idx);
  if (x->k < 64 && !x->dead) {
    x->q->att_over[x->k] = true;
    x->q->att_over_ms[x->k] = x->w->now;
  }
  x->dead = true;
}

static void x_pause(void *impl, void *p) {
  (void)impl;
  xfer *x = p;
  x->paused = true;
  sim_run_req *q = x->q;
  if (q->stopped && !q->stop_paused) { /* the stop's window opens */
    q->stop_paused = true;
    q->stop_from = x->w->now;
  }
}

static void x_resume(void *impl, void *p) {
  (void)impl;
  xfer *x = p;
  if (!x->paused) return;
  x->paused = false;
  if (x->due < x->w->now) x->due = x->w->now;
}

static const air__transport_ops sim_transport_ops = {x_start, x_cancel, x_pause,
                                                     x_resume};

static void x_done(xfer *x, int rc, air_transport_err kind, const char *msg) {
  x->dead = true;
  if (x->k < 64) {
    x->q->att_over[x->k] = true;
    x->q->att_over_ms[x->k] = x->w->now;
  }
  x->cb.on_done(x->cb.data, rc, kind, false, msg);
}

/* The transfer's next step is due. */
static void x_step(xfer *x) {
  const script *s = x->sc;
  if (x->abort_pending) {
    x_done(x, AIR_ECANCELED, AIR_TRANSPORT_OK, "aborted");
    return;
  }
  if (x->phase == 0) {
    if (s->kind == AK_STALL) {
      x->stalled = true;
      return;
    }
    if (s->kind == AK_RESET) {
      x_done(x, AIR_EIO, AIR_TRANSPORT_CONNECT, "connection reset by peer");
      return;
    }
    air_header h[2];
    size_t nh = 0;
    static const char ct_sse[] = "text/event-stream",
                      ct_json[] = "application/json";
    bool sse = s->kind == AK_STREAM;
    h[nh++] = (air_header){"content-type", 12, sse ? ct_sse : ct_json,
                           sse ? sizeof(ct_sse) - 1 : sizeof(ct_json) - 1};
    char ra[16];
    if (s->retry_after) {
      snprintf(ra, sizeof(ra), "%u", s->retry_after);
      h[nh++] = (air_header){"retry-after", 11, ra, strlen(ra)};
    }
    x->phase = 1;
    schedule(x, x->out.n > 0 ? x->out.gaps[0] : s->end_gap);
    if (x->q->q->alloc_fail && x->k + 1 == (int)x->q->q->alloc_at)
      g_alloc.countdown = x->q->q->alloc_fail;
    x->cb.on_head(x->cb.data, s->status, h, nh);
    return;
  }
  if (x->phase == 1 && x->next_event < x->out.n) {
    /* one read: the rest of this event, or a random part of it */
    size_t end = x->out.ends[x->next_event];
    size_t n = end - x->off;
    if (n > 1 && upto(&x->split, 4) == 0)
      n = 1 + upto(&x->split, (uint32_t)(n - 1));
    const char *p = x->out.b.p + x->off;
    x->off += n;
    if (x->off == end) x->next_event++;
    /* the gap before the next event (or the end) */
    uint32_t gap = x->off < end               ? 0
                   : x->next_event < x->out.n ? x->out.gaps[x->next_event]
                                              : s->end_gap;
    schedule(x, gap);
    if (x->next_event >= x->out.n && x->off == end) x->phase = 2;
    int rc = x->cb.on_body(x->cb.data, p, n);
    if (x->dead) return;
    if (rc == AIR__XFER_PAUSE)
      x->paused = true;
    else if (rc != 0) {
      x->abort_pending = true; /* on_done follows, never from inside on_body */
      schedule(x, 0);
    }
    return;
  }
  if (x->phase == 1) x->phase = 2;
  if (s->kind == AK_STREAM && s->end == END_STALL) {
    x->stalled = true;
    return;
  }
  if (s->kind == AK_STREAM && s->end == END_CUT) {
    x_done(x, AIR_EIO, AIR_TRANSPORT_CLOSED,
           "connection closed before the end");
    return;
  }
  x_done(x, 0, AIR_TRANSPORT_OK, "");
}

/* ---- decoding what the caller received ----------------------------------- */

typedef struct decoded {
  air__buf text, args;
  int finish; /* FIN_* (FIN_FILTER for content_filter and refusal) */
  bool terminator, error, tool;
  unsigned malformed, events;
  air__decoder dec;
  const air__dialect_ops *ops;
  /* Framing (docs/design.md §3.5, 9): one id per OpenAI stream; Anthropic one
   * message_start, block indexes new at each start and deltas to the open
   * block; Responses sequence numbers increasing. frame says what broke. */
  char id[64];
  int starts, open_block, next_block;
  int64_t seq;
  const char *frame;
} decoded;

/* The caller's framing, per event (what the decoders let pass). */
static void check_frame(decoded *d, const air__sse_event *ev) {
  if (d->frame != NULL || ev->data.n == 0 || ev->data.p[0] != '{') return;
  json_t *j = json_loadb(ev->data.p, ev->data.n, 0, NULL);
  if (j == NULL) return;
  const char *type = json_string_value(json_object_get(j, "type"));
  json_t *seq = json_object_get(j, "sequence_number");
  if (d->ops->api == AIR_DIALECT_OPENAI) {
    const char *id = json_string_value(json_object_get(j, "id"));
    if (id != NULL && d->id[0] == '\0')
      snprintf(d->id, sizeof(d->id), "%s", id);
    else if (id != NULL && strncmp(id, d->id, sizeof(d->id) - 1) != 0)
      d->frame = "an OpenAI chunk with another id";
  } else if (d->ops->api == AIR_DIALECT_ANTHROPIC && type != NULL) {
    json_t *ix = json_object_get(j, "index");
    int i = json_is_integer(ix) ? (int)json_integer_value(ix) : -1;
    if (strcmp(type, "message_start") == 0 && d->starts++ > 0)
      d->frame = "a second message_start";
    else if (strcmp(type, "content_block_start") == 0) {
      if (d->open_block >= 0)
        d->frame = "a block started while another is open";
      else if (i != d->next_block)
        d->frame = "a block index out of order";
      d->open_block = i;
      d->next_block = i + 1;
    } else if (strcmp(type, "content_block_delta") == 0 && i != d->open_block) {
      d->frame = "a delta to a block that is not open";
    } else if (strcmp(type, "content_block_stop") == 0) {
      if (i != d->open_block) d->frame = "a stop of a block that is not open";
      d->open_block = -1;
    }
  } else if (d->ops->api == AIR_DIALECT_OPENAI_RESPONSES &&
             json_is_integer(seq)) {
    if (json_integer_value(seq) <= d->seq)
      d->frame = "a sequence_number that does not grow";
    d->seq = json_integer_value(seq);
  }
  json_decref(j);
}

static int fin_class(air_finish f) {
  switch (f) {
    case AIR_FINISH_STOP:
      return FIN_STOP;
    case AIR_FINISH_LENGTH:
      return FIN_LENGTH;
    case AIR_FINISH_TOOL_CALLS:
      return FIN_TOOLS;
    case AIR_FINISH_CONTENT_FILTER:
    case AIR_FINISH_REFUSAL:
      return FIN_FILTER;
    default:
      return FIN_NONE;
  }
}

static int on_part(void *data, const air_part *p) {
  decoded *d = data;
  int rc = 0;
  switch (p->kind) {
    case AIR_PART_TEXT:
      rc = air__buf_add(&d->text, p->text, p->text_len);
      break;
    case AIR_PART_TOOL_START:
      d->tool = true;
      break;
    case AIR_PART_TOOL_DELTA:
      d->tool = true;
      rc = air__buf_add(&d->args, p->text, p->text_len);
      break;
    case AIR_PART_FINISH:
      d->finish = fin_class(p->finish);
      break;
    case AIR_PART_ERROR:
      d->error = true;
      break;
    default:
      break;
  }
  return rc;
}

static int on_caller_event(void *data, const air__sse_event *ev) {
  decoded *d = data;
  unsigned before = d->dec.malformed;
  d->events++;
  check_frame(d, ev);
  d->ops->decode_event(&d->dec, ev, on_part, d);
  if (d->dec.malformed > before) d->malformed++;
  if (d->dec.terminator) d->terminator = true;
  if (d->dec.error_event) d->error = true;
  return 0;
}

static void decoded_init(decoded *d, int dialect) {
  memset(d, 0, sizeof(*d));
  air__buf_init(&d->text, 1u << 20);
  air__buf_init(&d->args, 1u << 20);
  d->ops = air__dialect_get((air_dialect)dialect);
  d->ops->decoder_init(&d->dec);
  d->open_block = -1;
  d->seq = -1;
}

static void decoded_cleanup(decoded *d) {
  air__buf_cleanup(&d->text);
  air__buf_cleanup(&d->args);
  air__decoder_cleanup(&d->dec);
}

/* A failed add sticks in the buffer (buf.h): the comparison then fails. */
static void keep(int rc) {
  (void)rc;
}

static bool contains(const air__buf *b, const char *s) {
  size_t n = strlen(s);
  for (size_t i = 0; b->p && i + n <= b->n; i++)
    if (memcmp(b->p + i, s, n) == 0) return true;
  return false;
}

/* The script's own parts, as a caller should see them. */
static void expected(const script *s, int upstream, air__buf *text,
                     air__buf *args, bool *tool) {
  *tool = false;
  for (int i = 0; i < s->n; i++) {
    const piece *p = &s->pieces[i];
    if (p->kind == PK_TEXT) keep(air__buf_adds(text, p->text));
    if (p->kind == PK_TOOL) {
      *tool = true;
      keep(air__buf_adds(args, p->text));
    }
  }
  if (s->kind == AK_BODY && upstream == AIR_DIALECT_ANTHROPIC && *tool) {
    /* an Anthropic body carries the input as an object (or {}) */
    keep(air__buf_addc(args, '\0'));
    json_t *j = json_loads(args->p, 0, NULL);
    if (!json_is_object(j)) {
      air__buf_reset(args);
      keep(air__buf_adds(args, "{}"));
    } else {
      args->n--;
    }
    json_decref(j);
  }
}

/* The finish class a caller should see for script s of attempt k: the
 * script's, except where the Responses dialect (upstream or caller) says
 * stop and tool calls by whether a call was made. */
static int want_finish(const script *s, const sim_run_req *q, int k,
                       bool tool) {
  bool rsp = q->att_dialect[k] == AIR_DIALECT_OPENAI_RESPONSES ||
             q->q->dialect == AIR_DIALECT_OPENAI_RESPONSES;
  if (rsp && (s->finish == FIN_STOP || s->finish == FIN_TOOLS))
    return tool ? FIN_TOOLS : FIN_STOP;
  return s->finish;
}

/* JSON texts compared as values when both parse, else as bytes. */
static bool same_json(const air__buf *a, const air__buf *b) {
  if (a->n == b->n && (a->n == 0 || memcmp(a->p, b->p, a->n) == 0)) return true;
  json_t *ja = json_loadb(a->p ? a->p : "", a->n, JSON_DECODE_ANY, NULL);
  json_t *jb = json_loadb(b->p ? b->p : "", b->n, JSON_DECODE_ANY, NULL);
  bool eq = ja && jb && json_equal(ja, jb);
  json_decref(ja);
  json_decref(jb);
  return eq;
}

static bool is_prefix(const air__buf *p, const air__buf *of) {
  return p->n <= of->n && (p->n == 0 || memcmp(p->p, of->p, p->n) == 0);
}

/* ---- the request's callbacks --------------------------------------------- */

/*
 * The caller's side (docs/design.md §9, docs/testing.md): every callback first
 * checks that it may run at all: never after on_end, never after the
 * caller's cancel (then only on_end may follow). Each runs as the
 * simulator (disarmed); what it calls of the request path (the responder,
 * the exchange) runs armed.
 */
static bool may_run(sim_run_req *q, const char *cb) {
  if (q->ended) {
    fail(q->w, "request %d: %s after on_end", q->idx, cb);
    return false;
  }
  if (q->cancelled) {
    fail(q->w, "request %d: %s after the caller's air__exchange_cancel", q->idx,
         cb);
    return false;
  }
  return true;
}

/* Whether the caller acts now: this is its k-th call of callback on. */
static bool act_now(sim_run_req *q, int on) {
  q->calls[on]++;
  const sim_req *r = q->q;
  if (q->acted || r->act == CA_NONE || r->act == CA_DISCONNECT ||
      r->act_on != on || q->calls[on] != r->act_k)
    return false;
  q->acted = true;
  st_acts++;
  return true;
}

/* The caller cancels (gone: its client went away, as the gateway's
 * on_disconnect and failed writes do; else the responder lost part of the
 * answer). From then on only on_end may reach it, with rc AIR_ECANCELED. */
static void cancel_by_caller(sim_run_req *q, bool gone) {
  if (q->ended || q->cancelled) return;
  q->cancelled = true;
  if (gone) q->gone = q->rs.gone = true;
  if (q->px != NULL)
    SUT(air__plain_cancel(q->px));
  else if (q->x != NULL)
    SUT(air__exchange_cancel(q->x));
}

/* The reader stops (on_event / on_flush return 1): it resumes after
 * stop_ms, or its own write timeout cuts it first (the caller cancels). */
static void stop_reader(sim_run_req *q) {
  q->stopped = true;
  q->wake = q->q->stop_ms < SIM_CLIENT_WRITE_TIMEOUT_MS ? W_RESUME : W_CUT;
  q->wake_at = q->w->now + (q->wake == W_RESUME ? q->q->stop_ms
                                                : SIM_CLIENT_WRITE_TIMEOUT_MS);
  q->wake_seq = ++q->w->seq;
}

/* The responder's bytes go to the caller (the simulator's own move). */
static void move_out(sim_run_req *q) {
  if (q->rs.out.n && !q->gone &&
      air__buf_add(&q->got, q->rs.out.p, q->rs.out.n) != 0)
    fail(q->w, "request %d: output over the simulator's limit", q->idx);
  air__buf_reset(&q->rs.out);
}

/* The responder lost part of the answer: the caller cancels, as the
 * gateway does. */
static void lost(sim_run_req *q) {
  q->lost = true;
  cancel_by_caller(q, false);
}

static void q_commit_(sim_run_req *q, const air__commit_info *ci) {
  world *w = q->w;
  if (!may_run(q, "on_commit")) return;
  if (q->committed) fail(w, "request %d: committed twice", q->idx);
  q->committed = true;
  if (ci->target == NULL || ci->attempts == 0) {
    fail(w, "request %d: commit names no attempt (target %s, attempt %u)",
         q->idx, ci->target ? ci->target : "NULL", ci->attempts);
  } else {
    q->commit_attempt = ci->attempts;
    snprintf(q->commit_target, sizeof(q->commit_target), "%s", ci->target);
  }
  int rc;
  SUT(rc = air__responder_commit(&q->rs, ci, 1));
  if (q->rs.lost) { /* no encoder: an error, whole; the caller cancels, as
                       the gateway does */
    lost(q);
    return;
  }
  if (rc == 1) {
    for (size_t i = 0; i < q->rs.n_head; i++)
      if (strcmp(q->rs.head[i].name, "x-airetry-target") == 0)
        snprintf(q->head_target, sizeof(q->head_target), "%s",
                 q->rs.head[i].value);
  }
  if (act_now(q, ON_COMMIT)) cancel_by_caller(q, true);
}

static void q_commit(void *data, const air__commit_info *ci) {
  bool was = arm(false);
  q_commit_(data, ci);
  arm(was);
}

static int q_event_(sim_run_req *q, const air__gate_event *ev) {
  if (!may_run(q, "on_event")) return 0;
  for (size_t i = 0; i < ev->n_parts; i++)
    if (ev->parts[i].kind == AIR_PART_TEXT)
      keep(
          air__buf_add(&q->released, ev->parts[i].text, ev->parts[i].text_len));
  int rc;
  SUT(rc = air__responder_event(&q->rs, ev));
  if (rc == 1) {
    lost(q);
    return 0;
  }
  if (act_now(q, ON_EVENT)) {
    if (q->q->act == CA_STOP) {
      stop_reader(q);
      return 1;
    }
    cancel_by_caller(q, true);
  }
  return 0;
}

static int q_event(void *data, const air__gate_event *ev) {
  bool was = arm(false);
  int rc = q_event_(data, ev);
  arm(was);
  return rc;
}

static int q_flush_(sim_run_req *q) {
  if (!may_run(q, "on_flush")) return 0;
  if (act_now(q, ON_FLUSH)) {
    if (q->q->act == CA_WRITE_FAIL) { /* the bytes cannot be written */
      air__buf_reset(&q->rs.out);
      cancel_by_caller(q, true);
      return 0;
    }
    if (q->q->act == CA_STOP) {
      move_out(q);
      stop_reader(q);
      return 1;
    }
    cancel_by_caller(q, true);
    return 0;
  }
  move_out(q);
  return q->stopped ? 1 : 0;
}

static int q_flush(void *data) {
  bool was = arm(false);
  int rc = q_flush_(data);
  arm(was);
  return rc;
}

static void q_failed(void *data, const air_attempt *a) {
  sim_run_req *q = data;
  bool was = arm(false);
  /* An attempt that failed before its transfer started (its request could
   * not be built for want of memory) has its number, no transfer. */
  while (!a->skipped && a->n > (unsigned)q->xfers && q->xfers < 64) {
    int k = q->xfers++;
    q->att_over[k] = true;
    q->att_over_ms[k] = q->w->now;
    q->att_nostart[k] = true;
    snprintf(q->att_target[k], sizeof(q->att_target[k]), "%s",
             a->target ? a->target : "?");
  }
  if (may_run(q, "on_failed") && act_now(q, ON_FAILED))
    cancel_by_caller(q, true);
  arm(was);
}

static void q_continue_(sim_run_req *q, const air__continue_info *ci) {
  if (!may_run(q, "on_continue")) return;
  int k = (int)ci->attempt - 1;
  if (k < 0 || k >= q->xfers || k >= 64 || q->att_cont[k] == 0)
    fail(q->w, "request %d: attempt %u joined, but it was no continuation",
         q->idx, ci->attempt);
  else if (q->att_must_fail[k])
    fail(q->w, "request %d: continuation %u (%s) was stitched in; it must fail",
         q->idx, ci->attempt,
         q->att_instruct[k] ? "a preamble asked with instruct"
                            : "a diverging restart");
  else if (ci->at_char !=
           chars_of(q->released.p ? q->released.p : "", q->released.n))
    fail(q->w,
         "request %d: continuation %u joins at_char %" PRIu64
         ", the caller has %zu",
         q->idx, ci->attempt, ci->at_char,
         chars_of(q->released.p ? q->released.p : "", q->released.n));
  q->joined = ci->attempt;
  q->n_joined++;
  if (k >= 0 && k < 64) q->att_joined[k] = true;
  int rc;
  SUT(rc = air__responder_continue(&q->rs, ci));
  if (rc == 1) {
    lost(q);
    return;
  }
  if (act_now(q, ON_CONTINUE)) cancel_by_caller(q, true);
}

static void q_continue(void *data, const air__continue_info *ci) {
  bool was = arm(false);
  q_continue_(data, ci);
  arm(was);
}

static void q_keepalive_(sim_run_req *q) {
  if (!may_run(q, "on_keepalive")) return;
  if (!q->committed)
    fail(q->w, "request %d: a keep-alive before commit", q->idx);
  if (q->n_ka < 16) q->ka[q->n_ka] = q->w->now;
  q->n_ka++;
  SUT(air__responder_keepalive(&q->rs));
  if (q->rs.lost) {
    lost(q);
    return;
  }
  move_out(q);
  if (act_now(q, ON_KEEPALIVE)) cancel_by_caller(q, true);
}

static void q_keepalive(void *data) {
  bool was = arm(false);
  q_keepalive_(data);
  arm(was);
}

static void check_request(sim_run_req *q);
static void check_plain(sim_run_req *q);

/* What every end checks and keeps: once, never inside the start, rc
 * AIR_ECANCELED after the caller's cancel; the result's scalars and log. */
static bool end_begin(sim_run_req *q, const air__exchange_result *res) {
  world *w = q->w;
  q->ends++;
  if (q->ended) {
    fail(w, "request %d: on_end fired twice", q->idx);
    return false;
  }
  q->ended = true;
  q->end_ms = w->now;
  if (q->in_start)
    fail(w, "request %d: on_end inside the call that started it (rc %d)",
         q->idx, res->rc);
  if (q->cancelled && res->rc != AIR_ECANCELED)
    fail(w,
         "request %d: cancelled by its caller, it ended with rc %d (%s), not "
         "AIR_ECANCELED",
         q->idx, res->rc, res->rc == 0 ? "a success" : air_strerror(res->rc));
  if (q->stopped) { /* stopped until the end: the end is inside */
    q->stop_to = w->now + 1;
    q->stopped = false;
  }
  q->res = *res;
  q->n_log = res->n_log < 64 ? res->n_log : 64;
  for (size_t i = 0; i < q->n_log; i++) {
    q->log[i] = res->log[i];
    snprintf(q->msgs[i], sizeof(q->msgs[i]), "%s",
             res->log[i].message ? res->log[i].message : "");
    q->log[i].message = q->msgs[i];
  }
  q->res.log = NULL;
  q->res.message = NULL;
  q->res.target = NULL;
  q->res.answered = NULL;
  return true;
}

static void q_end_(sim_run_req *q, const air__exchange_result *res) {
  if (!end_begin(q, res)) return;
  /* A cancel inside on_end changes nothing (drawn: act on=end). */
  if (q->q->act == CA_CANCEL && act_now(q, ON_END))
    SUT(air__exchange_cancel(q->x));
  move_out(q);
  SUT(air__responder_end(&q->rs, res, 1));
  q->end_kind = q->rs.end;
  if (q->rs.end == AIR__RESP_WHOLE) {
    for (size_t i = 0; i < q->rs.n_head; i++)
      if (strcmp(q->rs.head[i].name, "x-airetry-target") == 0)
        snprintf(q->head_target, sizeof(q->head_target), "%s",
                 q->rs.head[i].value);
  }
  if (q->rs.end != AIR__RESP_ABORT) move_out(q);
  check_request(q);
  SUT(air__exchange_free(q->x));
  q->x = NULL;
}

static void q_end(void *data, const air__exchange_result *res) {
  bool was = arm(false);
  q_end_(data, res);
  arm(was);
}

/* The plain exchange's end, answered as the gateway's plain_ep.c does: a
 * cut when the caller went or cancelled, the upstream's status and body
 * unchanged on a success, else the responder's error body. */
static void p_end_(sim_run_req *q, const air__plain_result *res) {
  if (!end_begin(q, &res->x)) return;
  if (q->q->act == CA_CANCEL && act_now(q, ON_END))
    SUT(air__plain_cancel(q->px));
  if (q->gone || res->x.rc == AIR_ECANCELED) {
    q->end_kind = AIR__RESP_ABORT;
  } else if (res->x.rc == 0) {
    q->end_kind = AIR__RESP_WHOLE;
    q->plain_status = res->status;
    if (air__buf_add(&q->got, res->body ? res->body : "", res->body_len) != 0)
      fail(q->w, "request %d: output over the simulator's limit", q->idx);
    snprintf(q->head_target, sizeof(q->head_target), "%s",
             res->x.answered ? res->x.answered : "");
  } else {
    SUT(air__responder_end(&q->rs, &res->x, 1));
    q->end_kind = q->rs.end;
    q->plain_status = q->rs.status;
    move_out(q);
  }
  check_plain(q);
  SUT(air__plain_free(q->px));
  q->px = NULL;
}

static void p_end(void *data, const air__plain_result *res) {
  bool was = arm(false);
  p_end_(data, res);
  arm(was);
}

/* ---- the invariants ------------------------------------------------------ */

/* What the checked requests ended as, over the process (sim_stats). */
static unsigned long long st_req, st_stream_ok, st_stream_err, st_whole_ok,
    st_whole_err, st_attempts, st_committed, st_hedges, st_lost, st_conts,
    st_joined, st_rejected, st_ka;

void sim_stats(FILE *f) {
  fprintf(f,
          "sim: %llu requests: %llu streamed answers, %llu errors after "
          "commit, %llu whole "
          "answers, %llu error bodies; %llu committed; %llu attempts (%llu "
          "hedges, %llu "
          "racers lost; %llu continuations, %llu joined, %llu prefills "
          "rejected, %llu "
          "keep-alives)\n",
          st_req, st_stream_ok, st_stream_err, st_whole_ok, st_whole_err,
          st_committed, st_attempts, st_hedges, st_lost, st_conts, st_joined,
          st_rejected, st_ka);
  fprintf(f,
          "sim: %llu plain requests (%llu answered); %llu caller actions "
          "taken; %llu long "
          "fields sent; %llu allocations failed\n",
          st_plain, st_plain_ok, st_acts, st_big, g_alloc.hits);
}

static bool same_text(const air__buf *a, const air__buf *b) {
  return a->n == b->n && (a->n == 0 || memcmp(a->p, b->p, a->n) == 0);
}

/* Whether t (n bytes) occurs in b. */
static bool occurs(const air__buf *b, const char *t, size_t n) {
  if (n == 0) return true;
  for (size_t i = 0; b->p && i + n <= b->n; i++)
    if (memcmp(b->p + i, t, n) == 0) return true;
  return false;
}

/* The oracle for an answer continued by attempt k + 1 (docs/design.md §9). */
static void check_joined(sim_run_req *q, const decoded *d, int k,
                         bool success) {
  world *w = q->w;
  int i = q->idx;
  const script *s = q->att_script[k];
  size_t pn = q->att_plen[k];
  const air__buf *join = &q->att_join[k], *ct = &q->att_ctext[k];
  if (d->args.n != 0 || d->tool)
    fail(w, "request %d: a continued answer with a tool call", i);
  const char *after = d->text.p ? d->text.p + pn : "";
  size_t an = d->text.n >= pn ? d->text.n - pn : 0;
  if (d->text.n < pn) {
    fail(w,
         "request %d: the caller has %zu bytes, continuation %d joined at %zu",
         i, d->text.n, k + 1, pn);
  } else if (success) {
    if (q->att_exact[k] && !same_text(&d->text, join))
      fail(w, "request %d: continued text '%.*s', the answer is '%.*s'", i,
           (int)d->text.n, d->text.p ? d->text.p : "", (int)join->n,
           join->p ? join->p : "");
    else if (an > ct->n || (an && memcmp(after, ct->p + ct->n - an, an) != 0))
      fail(w,
           "request %d: after the seam '%.*s' is no suffix of continuation "
           "%d's '%.*s'",
           i, (int)an, after, k + 1, (int)ct->n, ct->p ? ct->p : "");
    else if (s->finish == FIN_NONE)
      fail(w,
           "request %d: a success from continuation %d, whose script has no "
           "finish",
           i, k + 1);
    else if (d->finish != want_finish(s, q, k, false))
      fail(w, "request %d: finish %s, continuation %d's script says %s", i,
           fin_names[d->finish], k + 1, fin_names[want_finish(s, q, k, false)]);
  } else if (q->end_kind == AIR__RESP_STREAM_END) {
    if (q->att_exact[k] ? !is_prefix(&d->text, join) : !occurs(ct, after, an))
      fail(w,
           "request %d: text released after continuation %d's seam is not its "
           "own",
           i, k + 1);
  }
}

/*
 * What every request is checked for whatever its exchange: the attempts
 * (counted, bounded, timed), the caller's stop (while its reader is
 * stopped and the transfer paused, no attempt fails and none starts: the
 * stop is the caller's, never a target's timeout nor a reason to
 * continue), and that the responder lost nothing (only an allocation
 * failure may lose part of an answer).
 */
static void check_attempts(sim_run_req *q) {
  world *w = q->w;
  int i = q->idx;
  const air__exchange_result *res = &q->res;
  if (getenv("SIM_LOG") != NULL) {
    fprintf(stderr, "request %d: rc %d, stop %s %" PRIu64 "-%" PRIu64 " ms\n",
            i, res->rc, q->stop_paused ? "paused" : "-", q->stop_from,
            q->stop_to);
    for (size_t k = 0; k < q->n_log; k++)
      fprintf(stderr, "  attempt %u %s: %s at %" PRIu64 " +%" PRIu64 " ms%s\n",
              q->log[k].n, q->log[k].target, air_reason_name(q->log[k].reason),
              q->log[k].start_ms, q->log[k].ms,
              q->log[k].continuation ? " (continuation)" : "");
  }
  if (q->rs.lost && !q->alloc_hit)
    fail(w, "request %d: the responder lost part of the answer (outcome %s)", i,
         q->rs.outcome);
  if (q->stop_paused) {
    uint64_t from = q->stop_from, to = q->stop_to ? q->stop_to : q->end_ms;
    for (size_t k = 0; k < q->n_log; k++) {
      const air_attempt *e = &q->log[k];
      uint64_t at = e->start_ms + e->ms;
      if (e->skipped) continue;
      if (e->reason != AIR_REASON_NONE && e->reason != AIR_REASON_ABORTED &&
          at > from && at < to)
        fail(w,
             "request %d: attempt %u failed (%s) at %" PRIu64
             " ms while the caller's reader "
             "was stopped (%" PRIu64 "-%" PRIu64 " ms)",
             i, e->n, air_reason_name(e->reason), at, from, to);
      if (e->start_ms > from && e->start_ms < to)
        fail(w,
             "request %d: attempt %u%s started at %" PRIu64
             " ms while the caller's reader "
             "was stopped (%" PRIu64 "-%" PRIu64 " ms)",
             i, e->n, e->continuation ? " (a continuation)" : "", e->start_ms,
             from, to);
    }
  }
  /* attempts: every one was sent; the budget and the rules bound them. A
   * continuation whose prefill was rejected counts toward neither the
   * budget nor continuation.max (docs/design.md §3.5). */
  unsigned rejected = 0, conts = 0;
  for (size_t k = 0; k < q->n_log; k++) {
    rejected += q->log[k].prefill_rejected;
    conts += q->log[k].continuation && !q->log[k].prefill_rejected;
  }
  /* A transfer that could not start for want of memory is counted, not
   * sent; so is the attempt the policy had decided when the caller
   * cancelled (logged as aborted, never started). */
  bool decided = q->cancelled && q->n_log > 0 &&
                 q->log[q->n_log - 1].reason == AIR_REASON_ABORTED &&
                 res->n_attempts == (unsigned)q->xfers + 1;
  if (res->n_attempts != (unsigned)q->xfers &&
      res->n_attempts + rejected != (unsigned)q->xfers &&
      !(q->alloc_hit && res->n_attempts > (unsigned)q->xfers) && !decided)
    fail(w, "request %d: %u attempts counted, %d sent", i, res->n_attempts,
         q->xfers);
  unsigned counted = res->n_attempts == (unsigned)q->xfers || decided
                         ? res->n_attempts - rejected
                         : res->n_attempts;
  uint32_t budget = q->route.max_attempts;
  if (counted > budget)
    fail(w, "request %d: %u attempts over the budget %u", i, counted, budget);
  if (conts > 0 && !(q->route.cont && q->q->stream))
    fail(w, "request %d: %u continuations where none may run", i, conts);
  /* A rescue (from the failure of the answering attempt to a continuation's
   * start) stays within continuation.max_gap_ms. */
  const air_attempt *answering = NULL;
  for (size_t k = 0; k < q->n_log; k++) {
    const air_attempt *e = &q->log[k];
    if (e->skipped || e->n == 0 || e->n > 64) continue;
    /* A rescue (the answering attempt failed, a continuation followed)
     * that lasted 10 s or more: the caller got a keep-alive 10 s after the
     * failure (docs/design.md §3.5). It lasted at least until the start of the
     * continuation that joined, or else until the request ended. */
    if (e->n == q->commit_attempt || q->att_joined[e->n - 1]) {
      uint64_t failed_at = e->start_ms + e->ms, until = 0;
      bool rescue = false;
      for (size_t j = k + 1; j < q->n_log; j++) {
        const air_attempt *c = &q->log[j];
        if (!c->continuation || c->n == 0 || c->n > 64) continue;
        rescue = true;
        if (q->att_joined[c->n - 1]) {
          until = c->start_ms;
          break;
        }
      }
      if (rescue && until == 0) until = q->end_ms;
      bool seen = q->n_ka > 16;
      for (unsigned j = 0; j < q->n_ka && j < 16 && !seen; j++)
        seen = q->ka[j] == failed_at + AIR__CONT_KEEPALIVE_MS;
      if (rescue && e->reason != AIR_REASON_NONE &&
          until >= failed_at + AIR__CONT_KEEPALIVE_MS && !seen)
        fail(w,
             "request %d: a rescue of %" PRIu64
             " ms after attempt %u failed, no "
             "keep-alive 10 s after the failure",
             i, until - failed_at, e->n);
    }
    if (e->continuation && answering != NULL &&
        e->start_ms >
            answering->start_ms + answering->ms + q->route.cont_gap_ms)
      fail(w,
           "request %d: continuation %u started %" PRIu64
           " ms after attempt %u failed, "
           "max_gap_ms is %" PRIu64,
           i, e->n, e->start_ms - (answering->start_ms + answering->ms),
           answering->n, q->route.cont_gap_ms);
    if (e->n == q->commit_attempt || q->att_joined[e->n - 1]) answering = e;
  }
  st_conts += conts;
  st_ka += q->n_ka;
  st_rejected += rejected;
  st_joined += (unsigned)q->n_joined;
  if (conts > q->route.cont_max)
    fail(w, "request %d: %u continuations, continuation.max is %u", i, conts,
         q->route.cont_max);
  for (size_t k = 0; k < q->n_log; k++) {
    const air_attempt *e = &q->log[k];
    if (e->skipped || e->n == 0 || e->n > (unsigned)q->xfers || e->n > 64 ||
        q->att_nostart[e->n - 1])
      continue;
    if ((q->att_cont[e->n - 1] != 0) != e->continuation)
      fail(w,
           "request %d: attempt %u was%s sent after commit, its log entry "
           "says%s a "
           "continuation",
           i, e->n, q->att_cont[e->n - 1] ? "" : " not",
           e->continuation ? "" : " not");
  }
  /* hedges (docs/design.md §3.6): at most max, each after_ms after a racer that
   * still ran; a racer that lost was cancelled by the exchange, and no
   * transfer of the request outlives it */
  unsigned hedges = 0;
  for (size_t k = 0; k < q->n_log; k++) {
    const air_attempt *h = &q->log[k];
    /* at once: the transfer is over at the virtual time it lost (the
     * exchange cancels it then, or on the loop's next turn at the same
     * time when it lost inside another transfer's callback) */
    if (h->hedge_lost && (h->n == 0 || h->n > 64 || !q->att_over[h->n - 1] ||
                          q->att_over_ms[h->n - 1] > h->start_ms + h->ms))
      fail(w, "request %d: attempt %u lost the race but its transfer went on",
           i, h->n);
    if (h->hedge_lost && q->committed && h->n == q->commit_attempt)
      fail(w, "request %d: attempt %u committed and lost the race", i, h->n);
    st_lost += h->hedge_lost;
    if (!h->hedge || h->hedge_refill) continue; /* a refill is no new hedge */
    hedges++;
    st_hedges++;
    if (!q->route.hedge)
      fail(w, "request %d: attempt %u hedged on a route without hedge", i,
           h->n);
    bool after = false;
    for (size_t j = 0; j < k && !after; j++) {
      const air_attempt *e = &q->log[j];
      after = !e->skipped &&
              e->start_ms + q->route.hedge_after_ms <= h->start_ms &&
              e->start_ms + e->ms >= h->start_ms;
    }
    if (!after)
      fail(w,
           "request %d: hedge %u started at %" PRIu64
           " ms with no racer running for after_ms %" PRIu64,
           i, h->n, h->start_ms, q->route.hedge_after_ms);
  }
  if (hedges > q->route.hedge_max)
    fail(w, "request %d: %u hedges, max %u", i, hedges, q->route.hedge_max);
  for (int k = 0; k < q->xfers && k < 64; k++)
    if (!q->att_over[k])
      fail(w,
           "request %d: attempt %d's transfer still runs after the end (rc %d, "
           "%zu log entries)",
           i, k + 1, res->rc, q->n_log);
  if (q->route.retry_max_sum != AIR__UNLIMITED) {
    uint32_t bound =
        1 + q->route.retry_max_sum + (uint32_t)(q->route.n_targets - 1) +
        (q->route.hedge_same ? q->route.hedge_max : 0) + conts + rejected;
    if (res->n_attempts > bound)
      fail(w, "request %d: %u attempts, the rules allow %u", i, res->n_attempts,
           bound);
  }
  /* a switch never revisits a target; waits are bounded and exact in
   * virtual time (with racers the log interleaves them: checked above) */
  const air_attempt *prev = NULL;
  for (size_t k = 0; k < q->n_log; k++) {
    const air_attempt *a = &q->log[k];
    if (a->skipped) continue;
    for (size_t j = 0; prev && hedges == 0 && !a->continuation && j + 1 < k;
         j++) {
      const air_attempt *b = &q->log[j];
      if (!b->skipped && strcmp(b->target, a->target) == 0 &&
          strcmp(prev->target, a->target) != 0)
        fail(w, "request %d: attempt %u revisits %s", i, a->n, a->target);
    }
    if (prev && hedges == 0) {
      uint64_t gap = a->start_ms - (prev->start_ms + prev->ms);
      if (gap != prev->wait_ms)
        fail(w,
             "request %d: attempt %u started %" PRIu64
             " ms after attempt %u, its wait was %" PRIu64,
             i, a->n, gap, prev->n, prev->wait_ms);
    }
    if (a->wait_ms > q->route.max_wait_ms)
      fail(w, "request %d: attempt %u waited %" PRIu64 " ms, over %" PRIu64, i,
           a->n, a->wait_ms, q->route.max_wait_ms);
    if (a->reason == AIR_REASON_TIMEOUT_FIRST_BYTE &&
        a->ms > q->route.first_byte_ms)
      fail(w,
           "request %d: attempt %u timed out on first byte after %" PRIu64
           " ms (first_byte_ms %" PRIu64 ")",
           i, a->n, a->ms, q->route.first_byte_ms);
    prev = a;
  }
  if (!res->committed && q->end_ms - q->start_ms > q->route.total_ms)
    fail(w, "request %d: failed after %" PRIu64 " ms, total_ms is %" PRIu64, i,
         q->end_ms - q->start_ms, q->route.total_ms);
}

static void check_fields(sim_run_req *q, const decoded *d, bool success);

static void check_request(sim_run_req *q) {
  world *w = q->w;
  int i = q->idx;
  const air__exchange_result *res = &q->res;
  check_attempts(q);
  if (q->q->expect_att > 0) { /* a replay file's "expect" */
    const air_attempt *e = NULL;
    for (size_t k = 0; k < q->n_log && e == NULL; k++)
      if (q->log[k].n == (unsigned)q->q->expect_att) e = &q->log[k];
    const char *got = e ? air_reason_name(e->reason) : "no such attempt";
    if (got == NULL || strcmp(got, q->q->expect_reason) != 0)
      fail(w, "request %d: attempt %d failed with %s, expected %s", i,
           q->q->expect_att, got ? got : "?", q->q->expect_reason);
  }
  /* exactly one well-formed response in the caller's dialect */
  decoded d;
  decoded_init(&d, q->q->dialect);
  bool success = false;
  /* A cut connection: only when the caller went away, or an allocation
   * failed (an answer that cannot be kept whole is cut, never ended
   * cleanly short). */
  bool cut_ok = q->gone || q->alloc_hit;
  if (q->end_kind == AIR__RESP_ABORT) {
    if (!cut_ok)
      fail(w, "request %d: the connection was cut (outcome %s)", i,
           q->rs.outcome);
  } else if (q->gone) {
    fail(w,
         "request %d: its caller went away, the response was not cut (outcome "
         "%s)",
         i, q->rs.outcome);
  } else if (q->end_kind == AIR__RESP_STREAM_END) {
    if (!q->q->stream)
      fail(w, "request %d: a stream for a non-streaming caller", i);
    air__sse sse;
    air__sse_init(&sse, on_caller_event, &d);
    int rc = air__sse_feed(&sse, q->got.p ? q->got.p : "", q->got.n);
    if (rc == 0) rc = air__sse_finish(&sse);
    air__sse_cleanup(&sse);
    if (rc != 0) fail(w, "request %d: the stream is not valid SSE", i);
    if (d.malformed)
      fail(w, "request %d: %u caller events do not decode", i, d.malformed);
    if (d.frame) fail(w, "request %d: the caller's stream has %s", i, d.frame);
    if (getenv("SIM_DUMP") != NULL && atoi(getenv("SIM_DUMP")) == i)
      fprintf(stderr, "request %d got:\n%.*s\n", i, (int)q->got.n,
              q->got.p ? q->got.p : "");
    if (res->rc == 0 && (!d.terminator || d.error))
      fail(w, "request %d: a success without its terminator", i);
    if (res->rc != 0 && (d.terminator || !d.error))
      fail(w,
           "request %d: a failure after commit must end with an error event, "
           "no terminator",
           i);
    success = res->rc == 0;
  } else if (q->end_kind == AIR__RESP_WHOLE) {
    json_t *j = json_loadb(q->got.p ? q->got.p : "", q->got.n, 0, NULL);
    if (!json_is_object(j) && !(q->alloc_hit && q->rs.status != 200))
      fail(w, "request %d: the body is not a JSON object", i);
    json_decref(j);
    if (q->rs.status == 200) {
      if (d.ops->decode_body(&d.dec, q->got.p ? q->got.p : "", q->got.n,
                             on_part, &d) != 0)
        fail(w,
             "request %d: the 200 body does not decode in the caller's dialect",
             i);
      success = true;
      d.terminator = true;
    } else {
      if (q->rs.status < 400)
        fail(w, "request %d: error status %d", i, q->rs.status);
      if (res->rc == 0 && !q->alloc_hit)
        fail(w, "request %d: a success answered %d", i, q->rs.status);
      if (q->n_log > 0 && !q->alloc_hit && !contains(&q->got, "attempts"))
        fail(w, "request %d: the error body has no attempt log", i);
    }
  } else {
    fail(w, "request %d: no response", i);
  }

  st_req++;
  st_attempts += res->n_attempts;
  st_committed += q->committed;
  if (q->end_kind == AIR__RESP_STREAM_END)
    (*(success ? &st_stream_ok : &st_stream_err))++;
  if (q->end_kind == AIR__RESP_WHOLE)
    (*(success ? &st_whole_ok : &st_whole_err))++;
  /* the oracle: what the caller got is the committed attempt's script */
  if (q->committed && !w->failed && q->end_kind != AIR__RESP_ABORT) {
    if (q->commit_attempt == 0 || q->commit_attempt > (unsigned)q->xfers ||
        q->commit_attempt > 64) {
      fail(w, "request %d: committed attempt %u was never sent", i,
           q->commit_attempt);
    } else if (q->att_nostart[q->commit_attempt - 1]) {
      fail(w, "request %d: committed attempt %u, whose transfer never started",
           i, q->commit_attempt);
    } else {
      int k = (int)q->commit_attempt - 1;
      const script *s = q->att_script[k];
      if (strcmp(q->commit_target, q->att_target[k]) != 0)
        fail(w, "request %d: commit names %s, attempt %u went to %s", i,
             q->commit_target, q->commit_attempt, q->att_target[k]);
      if ((q->q->stream || success) && (q->rs.began || !q->alloc_hit) &&
          strcmp(q->head_target, q->att_target[k]) != 0)
        fail(w, "request %d: x-airetry-target is '%s', the answer came from %s",
             i, q->head_target, q->att_target[k]);
      air__buf et, ea;
      air__buf_init(&et, 1u << 20);
      air__buf_init(&ea, 1u << 20);
      bool etool;
      expected(s, q->att_dialect[k], &et, &ea, &etool);
      if (q->q->stream && !same_text(&d.text, &q->released) &&
          (success || !q->alloc_hit))
        fail(w,
             "request %d: the caller decoded '%.*s', the exchange released "
             "'%.*s'",
             i, (int)d.text.n, d.text.p ? d.text.p : "", (int)q->released.n,
             q->released.p ? q->released.p : "");
      if (q->n_joined > 0) {
        /* Continued (docs/design.md §3.5): the text is the released prefix
         * joined with the last continuation's text from the seam on; where the
         * simulator knows the seam's cut exactly, the whole answer. */
        k = (int)q->joined - 1;
        s = q->att_script[k];
        check_joined(q, &d, k, success);
      } else if (success) {
        if (et.n != d.text.n || (et.n && memcmp(et.p, d.text.p, et.n) != 0))
          fail(w, "request %d: text '%.*s' differs from attempt %u's '%.*s'", i,
               (int)d.text.n, d.text.p ? d.text.p : "", q->commit_attempt,
               (int)et.n, et.p ? et.p : "");
        else if (etool && !same_json(&ea, &d.args))
          fail(w,
               "request %d: tool arguments '%.*s' differ from attempt %u's "
               "'%.*s'",
               i, (int)d.args.n, d.args.p ? d.args.p : "", q->commit_attempt,
               (int)ea.n, ea.p ? ea.p : "");
        else if (s->finish == FIN_NONE)
          fail(w,
               "request %d: a success from attempt %u, whose script has no "
               "finish",
               i, q->commit_attempt);
        else if (s->finish != FIN_NONE &&
                 d.finish != want_finish(s, q, k, etool) &&
                 !(s->kind == AK_BODY && d.finish == FIN_NONE) &&
                 s->big != BF_FINISH) /* a long finish reason: no class (checked
                                         below) */
          fail(w, "request %d: finish %s, attempt %u's script says %s", i,
               fin_names[d.finish], q->commit_attempt,
               fin_names[want_finish(s, q, k, etool)]);
      } else if (q->end_kind == AIR__RESP_STREAM_END &&
                 !is_prefix(&d.text, &et)) {
        fail(w, "request %d: released text is not a prefix of attempt %u's", i,
             q->commit_attempt);
      }
      air__buf_cleanup(&et);
      air__buf_cleanup(&ea);
    }
  } else if (success && !w->failed) {
    fail(w, "request %d: a success that never committed", i);
  }
  check_fields(q, &d, success);
  decoded_cleanup(&d);
}

/* Tool call ids in a caller's JSON: the "id" of a tool call object (OpenAI
 * "function", Anthropic "tool_use"), the "call_id" of a Responses
 * "function_call". The first distinct one goes to first; *other is set
 * when another differs; *longest is the longest seen. */
static void tool_ids(const json_t *j, char *first, size_t cap, bool *other,
                     size_t *longest) {
  if (json_is_array(j)) {
    for (size_t i = 0; i < json_array_size(j); i++)
      tool_ids(json_array_get(j, i), first, cap, other, longest);
    return;
  }
  if (!json_is_object(j)) return;
  const char *type = json_string_value(json_object_get(j, "type"));
  const json_t *id = NULL;
  if (type && strcmp(type, "function_call") == 0)
    id = json_object_get(j, "call_id");
  else if (type &&
           (strcmp(type, "function") == 0 || strcmp(type, "tool_use") == 0))
    id = json_object_get(j, "id");
  if (json_is_string(id)) {
    const char *v = json_string_value(id);
    size_t n = strlen(v);
    if (n > *longest) *longest = n;
    if (first[0] == '\0')
      snprintf(first, cap, "%s", v);
    else if (strncmp(first, v, cap - 1) != 0)
      *other = true;
  }
  const char *key;
  json_t *v;
  json_object_foreach((json_t *)(uintptr_t)j, key, v)
      tool_ids(v, first, cap, other, longest);
}

/*
 * Fields at and past their limits (sim_req: big): an id, model or tool
 * call id past AIR__MAX_IDENT_BYTES never fails the answer (check_attempts:
 * nothing lost) and a whole answer carries none longer than the limit; a
 * tool call id is the same wherever the answer repeats it; a finish reason
 * past AIR__MAX_FINISH_REASON_BYTES or a tool name past
 * AIR__MAX_TOOL_NAME_BYTES is malformed: never a success.
 */
static void check_fields(sim_run_req *q, const decoded *d, bool success) {
  world *w = q->w;
  int i = q->idx;
  (void)d;
  if (!success || !q->committed || q->commit_attempt == 0 ||
      q->commit_attempt > 64)
    return;
  const script *s = q->att_script[q->commit_attempt - 1];
  if (s == NULL) return;
  bool tool = false;
  for (int k = 0; k < s->n; k++) tool |= s->pieces[k].kind == PK_TOOL;
  if (s->big == BF_FINISH && s->big_len > AIR__MAX_FINISH_REASON_BYTES &&
      q->n_joined == 0)
    fail(w,
         "request %d: a success from attempt %u, whose finish reason is %u "
         "bytes (over "
         "%u: malformed)",
         i, q->commit_attempt, s->big_len, AIR__MAX_FINISH_REASON_BYTES);
  if (s->big == BF_TOOL_NAME && tool && s->big_len > AIR__MAX_TOOL_NAME_BYTES &&
      q->n_joined == 0)
    fail(w,
         "request %d: a success from attempt %u, whose tool name is %u bytes "
         "(over %u: "
         "malformed)",
         i, q->commit_attempt, s->big_len, AIR__MAX_TOOL_NAME_BYTES);
  /* the caller's JSON: each streamed event, or the whole body */
  char first[128] = "";
  bool other = false;
  size_t longest = 0;
  const char *p = q->got.p ? q->got.p : "", *end = p + q->got.n;
  if (!q->q->stream) {
    json_t *j = json_loadb(p, q->got.n, 0, NULL);
    tool_ids(j, first, sizeof(first), &other, &longest);
    const char *id = json_string_value(json_object_get(j, "id"));
    const char *model = json_string_value(json_object_get(j, "model"));
    /* An id may carry its dialect's prefix ("resp_") on top of the
     * upstream's (dialect.h: AIR__MAX_IDENT_BYTES + 16). */
    if ((id && strlen(id) > AIR__MAX_IDENT_BYTES + 16) ||
        (model && strlen(model) > AIR__MAX_IDENT_BYTES))
      fail(w, "request %d: the whole answer's id or model is over %u bytes", i,
           AIR__MAX_IDENT_BYTES);
    if (longest > AIR__MAX_IDENT_BYTES)
      fail(w,
           "request %d: the whole answer's tool call id is %zu bytes, over %u",
           i, longest, AIR__MAX_IDENT_BYTES);
    json_decref(j);
  } else {
    while (p < end) {
      const char *data = strstr(p, "data: ");
      if (data == NULL || data >= end) break;
      data += 6;
      const char *eol = memchr(data, '\n', (size_t)(end - data));
      if (eol == NULL) eol = end;
      json_t *j = json_loadb(data, (size_t)(eol - data), 0, NULL);
      tool_ids(j, first, sizeof(first), &other, &longest);
      json_decref(j);
      p = eol;
    }
  }
  if (other)
    fail(w, "request %d: the answer names its tool call by two ids", i);
}

/* The plain exchange's answer: the upstream's body unchanged (a 2xx of
 * the target that answered, which speaks the endpoint's dialect), or an
 * error body in the endpoint's dialect, or a cut when the caller went. */
static void check_plain(sim_run_req *q) {
  world *w = q->w;
  int i = q->idx;
  const air__exchange_result *res = &q->res;
  check_attempts(q);
  st_plain++;
  if (q->end_kind == AIR__RESP_ABORT) {
    if (!q->gone && res->rc != AIR_ECANCELED)
      fail(w, "request %d: a plain request was cut (rc %d)", i, res->rc);
    return;
  }
  if (q->end_kind != AIR__RESP_WHOLE) {
    fail(w, "request %d: a plain request answered with a stream", i);
    return;
  }
  if (res->rc != 0) {
    json_t *j = json_loadb(q->got.p ? q->got.p : "", q->got.n, 0, NULL);
    if (!json_is_object(j) && !q->alloc_hit)
      fail(w, "request %d: the error body is not a JSON object", i);
    json_decref(j);
    if (q->plain_status < 400)
      fail(w, "request %d: error status %d", i, q->plain_status);
    if (q->n_log > 0 && !q->alloc_hit && !contains(&q->got, "attempts"))
      fail(w, "request %d: the error body has no attempt log", i);
    return;
  }
  st_plain_ok++;
  int k = q->xfers - 1;
  if (k < 0 || k >= 64 || q->att_script[k] == NULL || q->att_nostart[k]) {
    fail(w, "request %d: a plain success with no transfer", i);
    return;
  }
  const script *s = q->att_script[k];
  if (q->plain_status < 200 || q->plain_status > 299 || s->kind != AK_BODY)
    fail(w,
         "request %d: a plain success (status %d) from attempt %d, whose "
         "script is a %s",
         i, q->plain_status, k + 1, ak_names[s->kind]);
  if (strcmp(q->head_target, q->att_target[k]) != 0)
    fail(w, "request %d: x-airetry-target is '%s', the answer came from %s", i,
         q->head_target, q->att_target[k]);
  rendered want;
  memset(&want, 0, sizeof(want));
  air__buf_init(&want.b, 4u << 20);
  render_plain(q->q->rk, s, &want);
  if (!same_text(&want.b, &q->got))
    fail(w,
         "request %d: the plain answer '%.*s' is not attempt %d's body '%.*s'",
         i, (int)(q->got.n < 200 ? q->got.n : 200), q->got.p ? q->got.p : "",
         k + 1, (int)(want.b.n < 200 ? want.b.n : 200),
         want.b.p ? want.b.p : "");
  air__buf_cleanup(&want.b);
}

/* ---- running a scenario -------------------------------------------------- */

/* What the checks bound, read from the loaded policy (so a scenario file's
 * route lines are only notes for its reader). */
static route_meta meta_of(const air__policy *pol, const air__route *rt) {
  route_meta m;
  memset(&m, 0, sizeof(m));
  m.n_targets = rt ? (int)rt->n_targets : 1;
  m.max_attempts = pol->budget.max_total_attempts;
  m.first_byte_ms = pol->timeouts.first_byte_ms;
  for (size_t t = 0; rt && t < rt->n_targets; t++)
    if (rt->targets[t].timeouts.first_byte_ms > m.first_byte_ms)
      m.first_byte_ms = rt->targets[t].timeouts.first_byte_ms;
  m.total_ms = pol->timeouts.total_ms;
  m.hedge = pol->hedge.enabled;
  m.hedge_after_ms = pol->hedge.after_ms;
  m.hedge_max = pol->hedge.max;
  m.hedge_same = pol->hedge.same_target;
  m.cont = pol->continuation.enabled;
  m.cont_max = pol->continuation.max;
  m.cont_gap_ms = pol->continuation.max_gap_ms ? pol->continuation.max_gap_ms
                                               : pol->timeouts.chunk_ms;
  for (size_t k = 0; k < pol->n_rules; k++) {
    const air__rule *r = &pol->rules[k];
    if (r->action != AIR__RULE_RETRY) continue;
    if (r->max == AIR__UNLIMITED || m.retry_max_sum == AIR__UNLIMITED)
      m.retry_max_sum = AIR__UNLIMITED;
    else
      m.retry_max_sum += r->max;
    if (r->backoff.max_ms > m.max_wait_ms) m.max_wait_ms = r->backoff.max_ms;
    if (r->retry_after_max_ms > m.max_wait_ms)
      m.max_wait_ms = r->retry_after_max_ms;
  }
  return m;
}

static void diag(void *data, const air_diag *dg) {
  char *buf = data;
  if (buf[0] == '\0' && dg->severity == AIR_DIAG_ERROR)
    snprintf(buf, 512, "line %d: %s", dg->line,
             dg->message ? dg->message : "?");
}

/* A request to an endpoint without a stream, through the plain exchange
 * (as the gateway's plain_ep.c starts it). */
static void start_plain(world *w, sim_run_req *q, const air__loop *lp,
                        const air_clock *clock) {
  const sim_req *r = q->q;
  char body[512], *path = q->path;
  const char *endpoint;
  if (r->rk == RK_COUNT) {
    snprintf(body, sizeof(body),
             "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":"
             "\"hi\"}]}",
             r->model);
    snprintf(path, sizeof(q->path), "/v1/messages/count_tokens");
    endpoint = "/v1/messages/count_tokens";
  } else if (r->rk == RK_RETRIEVE) {
    body[0] = '\0';
    snprintf(path, sizeof(q->path), "/responses/resp_sim%d", q->idx);
    endpoint = "/v1/responses/{id}";
  } else {
    snprintf(body, sizeof(body), "{\"model\":\"%s\",\"input\":\"hi\"}",
             r->model);
    snprintf(path, sizeof(q->path), "/embeddings");
    endpoint = "/v1/embeddings";
  }
  q->stub.dialect = (air_dialect)r->dialect;
  q->stub.model = (char *)(uintptr_t)r->model;
  air__responder_init(&q->rs, (air_dialect)r->dialect, &q->stub, "req_sim");
  air__plain_opts o = {.cfg = w->cfg,
                       .state = w->state,
                       .model = r->model,
                       .api = (air_dialect)r->dialect,
                       .endpoint = endpoint,
                       .path = path,
                       .body = r->rk == RK_RETRIEVE ? NULL : body,
                       .body_len = r->rk == RK_RETRIEVE ? 0 : strlen(body),
                       .get = r->rk == RK_RETRIEVE,
                       .record = r->rk == RK_EMBED,
                       .clock = clock};
  air__plain_cb cb = {q_failed, p_end, q};
  air__transport_if tr = {&sim_transport_ops, q};
  int rc;
  q->in_start = true;
  SUT(rc = air__plain_start_on(lp, &tr, &o, &cb, &q->px));
  q->in_start = false;
  if (rc != 0 && q->alloc_hit) { /* did not start: nothing to check (a body
                                     that could not be parsed for want of
                                     memory is AIR_EINVAL) */
    q->ended = true;
    q->px = NULL;
    return;
  }
  if (rc != 0) {
    fail(w, "request %d: the plain exchange did not start: %s", q->idx,
         air_strerror(rc));
    w->invalid = rc == AIR_ENOTFOUND;
    q->ended = true;
    q->px = NULL;
  }
}

static void start_request(world *w, sim_run_req *q, const air__loop *lp,
                          const air_clock *clock) {
  const sim_req *r = q->q;
  q->started = true;
  q->start_ms = w->now;
  if (r->alloc_fail && r->alloc_at == 0) g_alloc.countdown = r->alloc_fail;
  if (r->act == CA_DISCONNECT) {
    q->wake = W_DISCONNECT;
    q->wake_at = w->now + r->act_at;
    q->wake_seq = ++w->seq;
  }
  if (r->rk != RK_CHAT) {
    start_plain(w, q, lp, clock);
    return;
  }
  char body[512];
  if (r->dialect == AIR_DIALECT_OPENAI_RESPONSES)
    snprintf(body, sizeof(body),
             "{\"model\":\"%s\",\"input\":\"hi\",\"stream\":%s}", r->model,
             r->stream ? "true" : "false");
  else if (r->dialect == AIR_DIALECT_OPENAI)
    snprintf(
        body, sizeof(body),
        "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}"
        "],"
        "\"stream\":%s%s}",
        r->model, r->stream ? "true" : "false",
        r->include_usage ? ",\"stream_options\":{\"include_usage\":true}" : "");
  else
    snprintf(
        body, sizeof(body),
        "{\"model\":\"%s\",\"max_tokens\":100,\"messages\":[{\"role\":\"user\","
        "\"content\":\"hi\"}],\"stream\":%s}",
        r->model, r->stream ? "true" : "false");
  air_error err;
  memset(&err, 0, sizeof(err));
  if (air__request_parse((air_dialect)r->dialect, body, strlen(body), &q->areq,
                         &err) != 0) {
    fail(w, "request %d: the simulator's request does not parse: %s", q->idx,
         err.message);
    w->invalid = true;
    q->ended = true;
    return;
  }
  air__responder_init(&q->rs, (air_dialect)r->dialect, &q->areq, "req_sim");
  air__exchange_opts o = {.cfg = w->cfg,
                          .state = w->state,
                          .req = &q->areq,
                          .model = q->areq.model,
                          .clock = clock,
                          .pools = &w->pools};
  air__exchange_cb cb = {.on_commit = q_commit,
                         .on_event = q_event,
                         .on_flush = q_flush,
                         .on_failed = q_failed,
                         .on_end = q_end,
                         .data = q,
                         .on_continue = q_continue,
                         .on_keepalive = q_keepalive};
  air__transport_if tr = {&sim_transport_ops, q};
  /* As the gateway does: the handle is the consumer's own field, set
   * before any callback can run. */
  int rc;
  q->in_start = true;
  SUT(rc = air__exchange_start_on(lp, &tr, &o, &cb, &q->x));
  q->in_start = false;
  if (rc == AIR_ENOMEM &&
      q->alloc_hit) { /* it did not start: nothing to check */
    q->ended = true;
    q->x = NULL;
    return;
  }
  if (rc != 0) {
    fail(w, "request %d: the exchange did not start: %s", q->idx,
         air_strerror(rc));
    w->invalid =
        rc == AIR_ENOTFOUND; /* a model that is no route: not a scenario */
    q->ended = true;
    q->x = NULL;
  }
}

/* The caller acts from the loop: its stopped reader resumes, or its write
 * timeout cuts it, or it disconnects. */
static void caller_wakes(sim_run_req *q) {
  int what = q->wake;
  q->wake = W_NONE;
  g_alloc.cur = q;
  if (what == W_RESUME) {
    q->stopped = false;
    q->stop_to = q->w->now;
    if (q->x != NULL) SUT(air__exchange_resume(q->x));
  } else {
    if (what == W_CUT) {
      q->stopped = false;
      q->stop_to = q->w->now;
    }
    st_acts += what == W_DISCONNECT;
    cancel_by_caller(q, true);
  }
}

int sim_run(const sim_scenario *s, char *why, size_t cap) {
  g_alloc.armed = false;
  g_alloc.countdown = 0;
  g_alloc.cur = NULL;
  world w;
  memset(&w, 0, sizeof(w));
  w.why = why;
  w.why_cap = cap;
  why[0] = '\0';
  char dbuf[512] = "";
  if (air_config_parse("sim.yaml", s->yaml, strlen(s->yaml), diag, dbuf,
                       &w.cfg) != 0) {
    snprintf(why, cap, "the scenario's config does not load: %s", dbuf);
    return 2;
  }
  if (air_state_new(w.cfg, &w.state, NULL) != 0) {
    air_config_free(w.cfg);
    snprintf(why, cap, "no state");
    return 1;
  }
  air_clock clock = {clk_now, clk_wall, clk_sleep, &w};
  air__loop lp = {&sim_loop_ops, &w};
  w.n = s->n_req;
  w.reqs = calloc((size_t)s->n_req, sizeof(*w.reqs));
  if (w.reqs == NULL) {
    air_state_free(w.state);
    air_config_free(w.cfg);
    snprintf(why, cap, "out of memory");
    return 1;
  }
  for (int i = 0; i < s->n_req; i++) {
    sim_run_req *q = &w.reqs[i];
    q->w = &w;
    q->idx = i;
    q->q = &s->req[i];
    const air__route *rt =
        air__config_route(w.cfg, s->req[i].model, strlen(s->req[i].model));
    q->route = meta_of(rt ? &rt->policy : &w.cfg->defaults, rt);
    air__buf_init(&q->got, 8u << 20);
    air__buf_init(&q->released, 8u << 20);
    air__buf_init(&q->base, 1u << 20);
  }
  unsigned steps = 0;
  for (;;) {
    /* closed timers go first (never inside timer_close), dead transfers too */
    for (air__timer **pt = &w.timers; *pt;) {
      air__timer *t = *pt;
      if (t->closing) {
        *pt = t->next;
        air__timer_fn closed = t->closed;
        void *arg = t->closed_arg;
        free(t);
        if (closed) closed(arg);
      } else {
        pt = &t->next;
      }
    }
    for (xfer **px = &w.xfers; *px;) {
      xfer *x = *px;
      if (x->dead) {
        *px = x->next;
        air__buf_cleanup(&x->out.b);
        free(x);
      } else {
        px = &x->next;
      }
    }
    /* the next thing due: a request arrival, a timer, a transfer step */
    uint64_t best = UINT64_MAX, best_seq = UINT64_MAX;
    int what = 0;
    void *which = NULL;
    for (int i = 0; i < w.n; i++)
      if (!w.reqs[i].started && (s->req[i].at < best)) {
        best = s->req[i].at;
        best_seq = 0;
        what = 1;
        which = &w.reqs[i];
      }
    for (air__timer *t = w.timers; t; t = t->next)
      if (t->armed &&
          (t->due < best || (t->due == best && t->seq < best_seq))) {
        best = t->due;
        best_seq = t->seq;
        what = 2;
        which = t;
      }
    for (xfer *x = w.xfers; x; x = x->next)
      if (!x->dead && !x->paused && !x->stalled &&
          (x->due < best || (x->due == best && x->seq < best_seq))) {
        best = x->due;
        best_seq = x->seq;
        what = 3;
        which = x;
      }
    for (int i = 0; i < w.n; i++) {
      sim_run_req *q = &w.reqs[i];
      if (q->wake != W_NONE && !q->ended &&
          (q->wake_at < best ||
           (q->wake_at == best && q->wake_seq < best_seq))) {
        best = q->wake_at;
        best_seq = q->wake_seq;
        what = 4;
        which = q;
      }
    }
    if (what == 0) break;
    if (++steps > STEP_CAP || best > TIME_CAP) {
      fail(&w,
           "the scenario does not end (virtual time %" PRIu64 " ms, %u steps)",
           best, steps);
      break;
    }
    if (best > w.now) w.now = best;
    if (what == 1) {
      g_alloc.cur = which;
      start_request(&w, which, &lp, &clock);
    } else if (what == 2) {
      air__timer *t = which;
      t->armed = false;
      g_alloc.cur = t->q;
      SUT(t->fire(t->arg));
    } else if (what == 3) {
      xfer *x = which;
      g_alloc.cur = x->q;
      SUT(x_step(x));
    } else {
      caller_wakes(which);
    }
    g_alloc.cur = NULL;
  }
  g_alloc.countdown = 0;
  for (int i = 0; i < w.n; i++)
    if (!w.reqs[i].ended) fail(&w, "request %d never ended (a hang)", i);
  /* tear down: exchanges left over (only after a failure), then everything */
  for (int i = 0; i < w.n; i++) {
    sim_run_req *q = &w.reqs[i];
    if (q->x) {
      air__exchange_cancel(q->x);
      if (q->x) air__exchange_free(q->x);
      q->x = NULL;
    }
    if (q->px) {
      air__plain_cancel(q->px);
      if (q->px) air__plain_free(q->px);
      q->px = NULL;
    }
  }
  while (w.timers) {
    air__timer *t = w.timers;
    w.timers = t->next;
    if (t->closing && t->closed) t->closed(t->closed_arg);
    free(t);
  }
  while (w.xfers) {
    xfer *x = w.xfers;
    w.xfers = x->next;
    air__buf_cleanup(&x->out.b);
    free(x);
  }
  air__exchange_pools_cleanup(&w.pools); /* every exchange is freed */
  for (int i = 0; i < w.n; i++) {
    sim_run_req *q = &w.reqs[i];
    if (q->started) {
      air__responder_cleanup(&q->rs);
      air__request_cleanup(&q->areq);
    }
    air__buf_cleanup(&q->got);
    air__buf_cleanup(&q->released);
    air__buf_cleanup(&q->base);
    for (int k = 0; k < 64; k++)
      if (q->att_cont[k]) {
        air__buf_cleanup(&q->att_join[k]);
        air__buf_cleanup(&q->att_ctext[k]);
      }
  }
  free(w.reqs);
  air_state_free(w.state);
  air_config_free(w.cfg);
  return w.invalid ? 2 : w.failed ? 1 : 0;
}
