/*
 * Spans of one exchange (spans.h). An attempt span's id derives from the
 * trace's attempt_base and the attempt number (trace.h), so the id sent
 * upstream while the attempt ran and the id of the span built at the end
 * agree without a table. Times: the request span runs from the wall clock
 * at air__trace_begin to e->end_unix_nano; an attempt's offsets come from
 * the attempt log's monotonic milliseconds, clamped inside the request.
 */
#include "spans.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "buf.h"
#include "limits.h"
#include "policy.h"

const char *air_span_role_name(air_span_role r) {
  static const char *const names[] = {"",       "first", "retry",
                                      "switch", "hedge", "continuation"};
  return (unsigned)r < sizeof(names) / sizeof(names[0]) ? names[r] : "";
}

uint64_t air__unix_nano(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* n random bytes; false when the kernel has none to give. */
static bool random_bytes(void *p, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom((char *)p + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += (size_t)r;
  }
  return true;
}

int air__trace_begin(air__trace *t, const char *tp, size_t n,
                     const air__sampler *s) {
  memset(t, 0, sizeof(*t));
  air__span_ctx parent;
  bool continued = tp != NULL && air__traceparent_parse(tp, n, &parent) == 0;
  uint8_t rnd[16 + 8 + 8];
  do {
    if (!random_bytes(rnd, sizeof(rnd))) return AIR_EIO;
  } while (air__id_zero(rnd, 16) || air__id_zero(rnd + 16, 8));
  if (continued) {
    memcpy(t->span.trace_id, parent.trace_id, 16);
    memcpy(t->parent_id, parent.span_id, 8);
  } else {
    memcpy(t->span.trace_id, rnd, 16);
  }
  memcpy(t->span.span_id, rnd + 16, 8);
  for (int i = 0; i < 8; i++)
    t->attempt_base = t->attempt_base << 8 | rnd[24 + i];
  t->sampled = air__sample(s, continued ? &parent : NULL, t->span.trace_id);
  t->span.flags = t->sampled ? 1 : 0;
  const air_clock *c = air_clock_system();
  t->start_mono_ms = c->now_ms(c->data);
  t->start_unix_nano = air__unix_nano();
  return 0;
}

void air__trace_attempt_header(const air__trace *t, unsigned attempt,
                               char out[AIR__TRACEPARENT_LEN + 1]) {
  air__span_ctx c = t->span;
  air__span_id_derive(t->attempt_base, attempt, c.span_id);
  air__traceparent_format(&c, out);
}

void air__trace_answer_init(air__trace_answer *a) {
  memset(a, 0, sizeof(*a));
  a->input_tokens = a->output_tokens = -1;
}

static void copy_str(char *dst, size_t cap, const char *s, size_t n) {
  if (s == NULL) n = 0;
  if (n >= cap) n = cap - 1;
  if (n) memcpy(dst, s, n);
  dst[n] = '\0';
}

void air__trace_answer_part(air__trace_answer *a, const air_part *p) {
  switch (p->kind) {
    case AIR_PART_START:
      if (p->name_len > 0)
        copy_str(a->model, sizeof(a->model), p->name, p->name_len);
      break;
    case AIR_PART_USAGE:
      a->input_tokens =
          p->input_tokens > INT64_MAX ? INT64_MAX : (int64_t)p->input_tokens;
      a->output_tokens =
          p->output_tokens > INT64_MAX ? INT64_MAX : (int64_t)p->output_tokens;
      break;
    case AIR_PART_FINISH: {
      /* The OpenAI name (GenAI's finish_reasons use them), else the raw. */
      const char *f = air_finish_name(p->finish);
      if (f != NULL && f[0] != '\0')
        copy_str(a->finish, sizeof(a->finish), f, strlen(f));
      else
        copy_str(a->finish, sizeof(a->finish), p->finish_raw,
                 p->finish_raw_len);
      break;
    }
    default:
      break;
  }
}

static const char *api_name(air_dialect d) {
  return d == AIR_DIALECT_ANTHROPIC ? "anthropic" : "openai";
}

/* Time t_ms (monotonic) as Unix nanoseconds within [lo, hi]. */
static uint64_t at_ns(const air__trace *t, uint64_t t_ms, uint64_t lo,
                      uint64_t hi) {
  uint64_t off = t_ms > t->start_mono_ms ? t_ms - t->start_mono_ms : 0;
  uint64_t ns = t->start_unix_nano + off * 1000000ull;
  if (ns < lo) ns = lo;
  if (ns > hi) ns = hi;
  return ns;
}

/* The role of attempt a, given the real attempt before it (NULL: none). */
static air_span_role role_of(const air_attempt *prev, const air_attempt *a) {
  if (a->continuation) return AIR_ROLE_CONTINUATION; /* docs/design.md §3.5 */
  if (a->hedge) return AIR_ROLE_HEDGE;
  if (prev == NULL) return AIR_ROLE_FIRST;
  return strcmp(prev->target, a->target) == 0 ? AIR_ROLE_RETRY
                                              : AIR_ROLE_SWITCH;
}

static void with_answer(air_span *s, const air__trace_answer *ans) {
  s->response_model = ans->model[0] ? ans->model : NULL;
  s->input_tokens = ans->input_tokens;
  s->output_tokens = ans->output_tokens;
  s->finish_reason = ans->finish[0] ? ans->finish : NULL;
}

/*
 * A span's status message: m whole up to AIR__MAX_SPAN_MESSAGE_BYTES, else
 * cut between characters into buf with "..." after it (an upstream's error
 * text has no bound of its own here). NULL for NULL or "".
 */
static const char *span_message(const char *m,
                                char buf[AIR__MAX_SPAN_MESSAGE_BYTES + 1]) {
  if (m == NULL || m[0] == '\0') return NULL;
  size_t n = strnlen(m, AIR__MAX_SPAN_MESSAGE_BYTES + 1);
  if (n <= AIR__MAX_SPAN_MESSAGE_BYTES) return m;
  size_t k = air__utf8_cut(m, n, AIR__MAX_SPAN_MESSAGE_BYTES - 3);
  memcpy(buf, m, k);
  memcpy(buf + k, "...", 4);
  return buf;
}

/* What every span of trace t starts with: its kind, the trace id (hex),
 * the sampled flag, the "chat" operation, and no usage nor first content
 * known yet. */
static void span_begin(air_span *s, air_span_kind kind, const air__trace *t,
                       const char trace_id[33]) {
  memset(s, 0, sizeof(*s));
  s->size = sizeof(*s);
  s->kind = kind;
  memcpy(s->trace_id, trace_id, sizeof(s->trace_id));
  s->sampled = t->sampled;
  s->operation = "chat";
  s->input_tokens = s->output_tokens = -1;
  s->first_content_ms = -1;
}

void air__trace_spans(const air__trace *t, const air__trace_end *e,
                      const air__exchange_result *res,
                      const air__trace_answer *ans,
                      void (*emit)(void *data, const air_span *s), void *data) {
  uint64_t end = e->end_unix_nano > t->start_unix_nano ? e->end_unix_nano
                                                       : t->start_unix_nano;
  char trace_id[33], req_id[17], name[AIR__MAX_TARGET_BYTES + 8];
  char msg[AIR__MAX_SPAN_MESSAGE_BYTES + 1];
  air__hex(t->span.trace_id, 16, trace_id);
  air__hex(t->span.span_id, 8, req_id);
  const air_attempt *prev = NULL, *answered = NULL;
  const air__provider *answered_p = NULL;
  /* The committed attempt is the last one that did not lose a race. */
  size_t last_racer = res->n_log;
  for (size_t i = res->n_log; i > 0 && last_racer == res->n_log; i--)
    if (!res->log[i - 1].hedge_lost && !res->log[i - 1].skipped)
      last_racer = i - 1;
  for (size_t i = 0; i < res->n_log; i++) {
    const air_attempt *a = &res->log[i];
    if (a->skipped) continue;
    air_span s;
    span_begin(&s, AIR_SPAN_ATTEMPT, t, trace_id);
    memcpy(s.parent_span_id, req_id, sizeof(req_id));
    uint8_t sid[8];
    air__span_id_derive(t->attempt_base, a->n, sid);
    air__hex(sid, 8, s.span_id);
    s.start_unix_nano = at_ns(t, a->start_ms, t->start_unix_nano, end);
    s.end_unix_nano = at_ns(t, a->start_ms + a->ms, s.start_unix_nano, end);
    const char *slash = strchr(a->target, '/');
    size_t pn = slash ? (size_t)(slash - a->target) : strlen(a->target);
    const air__provider *p = air__config_provider(e->cfg, a->target, pn, NULL);
    const char *model = slash ? slash + 1 : a->target;
    snprintf(name, sizeof(name), "chat %s", model);
    s.name = name;
    s.provider = p ? api_name(p->api) : NULL;
    s.provider_name = p ? p->name : NULL;
    s.request_model = model;
    s.target = a->target;
    s.attempt = a->n;
    s.role = role_of(prev, a);
    s.reason = a->reason;
    s.status = a->status;
    s.wait_ms = prev ? prev->wait_ms : 0;
    s.upstream_request_id =
        a->request_id && a->request_id[0] ? a->request_id : NULL;
    /* A racer that lost (outcome hedge_lost, docs/design.md §3.6) did not
     * answer: its span says so in airetry.outcome. */
    if (a->hedge_lost) s.outcome = "hedge_lost";
    bool answers = !a->hedge_lost && (a->reason == AIR_REASON_NONE ||
                                      (res->committed && i == last_racer));
    if (a->reason != AIR_REASON_NONE) {
      s.error = true;
      s.error_type = air_reason_name(a->reason);
      s.message = span_message(a->message, msg);
    }
    if (answers && res->answered != NULL) {
      with_answer(&s, ans);
      uint64_t fc = t->start_mono_ms + res->first_content_ms;
      s.first_content_ms = fc > a->start_ms ? (int64_t)(fc - a->start_ms) : 0;
      answered = a;
      answered_p = p;
    }
    emit(data, &s);
    prev = a;
  }
  air_span s;
  span_begin(&s, AIR_SPAN_REQUEST, t, trace_id);
  memcpy(s.span_id, req_id, sizeof(req_id));
  if (!air__id_zero(t->parent_id, 8))
    air__hex(t->parent_id, 8, s.parent_span_id);
  s.start_unix_nano = t->start_unix_nano;
  s.end_unix_nano = end;
  snprintf(name, sizeof(name), "chat %s", e->route ? e->route : "");
  s.name = name;
  s.request_model = e->route;
  s.route = e->route;
  s.dialect = e->dialect;
  s.outcome = e->outcome;
  s.attempts = res->n_attempts;
  if (answered != NULL) {
    with_answer(&s, ans);
    s.provider = answered_p ? api_name(answered_p->api) : NULL;
    s.provider_name = answered_p ? answered_p->name : NULL;
    s.target = answered->target;
    s.first_content_ms = (int64_t)res->first_content_ms;
  }
  if (res->rc != 0) {
    s.error = true;
    s.reason = res->reason;
    s.error_type = air_reason_name(res->reason);
    s.message = span_message(res->message, msg);
    s.status = res->status;
  }
  emit(data, &s);
}
