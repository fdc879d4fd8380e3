/*
 * The mock's attempt log (docs/mock.md "The log") and per-model attempt
 * counters. Both are bounded: the log is a ring of AIR__MOCK_MAX_LOG
 * entries (the oldest is dropped and counted), the counters an
 * open-addressing table of at most AIR__MOCK_MAX_MODELS names. Pure.
 */
#include <stdlib.h>
#include <string.h>

#include "mock_int.h"

#define LIT(s) s, sizeof(s) - 1
#define RING_MIN 256u
#define COUNTS_MIN 64u

void air__mock_log_init(air__mock_log *l) {
  memset(l, 0, sizeof(*l));
  l->next_id = 1;
}

static void free_entries(air__mock_log *l) {
  for (size_t i = 0; i < l->n; i++) {
    air__mock_entry *e = &l->ring[(l->head + i) % l->cap];
    free(e->model);
    free(e->fault);
    free(e->instruct_message);
  }
  l->n = l->head = 0;
}

static void free_counts(air__mock_log *l) {
  for (size_t i = 0; i < l->counts_cap; i++) free(l->counts[i].name);
  free(l->counts);
  l->counts = NULL;
  l->counts_cap = l->counts_n = 0;
}

void air__mock_log_cleanup(air__mock_log *l) {
  free_entries(l);
  free(l->ring);
  free_counts(l);
  memset(l, 0, sizeof(*l));
}

void air__mock_log_reset(air__mock_log *l) {
  uint64_t next = l->next_id;
  air__mock_log_cleanup(l);
  l->next_id = next;
}

/* FNV-1a. */
static uint64_t hash(const char *s, size_t n) {
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 1099511628211ull;
  }
  return h;
}

static bool same(const char *name, const char *s, size_t n) {
  return strncmp(name, s, n) == 0 && name[n] == '\0';
}

/* Doubles the table (cap a power of two, load kept under one half). */
static int grow_counts(air__mock_log *l) {
  size_t cap = l->counts_cap ? l->counts_cap * 2 : COUNTS_MIN;
  air__mock_count *t = calloc(cap, sizeof(*t));
  if (t == NULL) return AIR_ENOMEM;
  for (size_t i = 0; i < l->counts_cap; i++) {
    air__mock_count *c = &l->counts[i];
    if (c->name == NULL) continue;
    size_t j = hash(c->name, strlen(c->name)) & (cap - 1);
    while (t[j].name != NULL) j = (j + 1) & (cap - 1);
    t[j] = *c;
  }
  free(l->counts);
  l->counts = t;
  l->counts_cap = cap;
  return 0;
}

int air__mock_log_count(air__mock_log *l, const char *model, size_t n,
                        unsigned *attempt) {
  if (l->counts_cap > 0) {
    size_t j = hash(model, n) & (l->counts_cap - 1);
    while (l->counts[j].name != NULL) {
      if (same(l->counts[j].name, model, n)) {
        if (l->counts[j].n < UINT32_MAX) l->counts[j].n++;
        *attempt = l->counts[j].n;
        return 0;
      }
      j = (j + 1) & (l->counts_cap - 1);
    }
  }
  if (l->counts_n >= AIR__MOCK_MAX_MODELS) return AIR_ETOOBIG;
  if ((l->counts_n + 1) * 2 > l->counts_cap && grow_counts(l) != 0)
    return AIR_ENOMEM;
  char *name = malloc(n + 1);
  if (name == NULL) return AIR_ENOMEM;
  memcpy(name, model, n);
  name[n] = '\0';
  size_t j = hash(model, n) & (l->counts_cap - 1);
  while (l->counts[j].name != NULL) j = (j + 1) & (l->counts_cap - 1);
  l->counts[j].name = name;
  l->counts[j].n = 1;
  l->counts_n++;
  *attempt = 1;
  return 0;
}

/* Makes room for one more entry: grows the ring up to AIR__MOCK_MAX_LOG,
 * then drops the oldest. */
static int make_room(air__mock_log *l) {
  if (l->n < l->cap) return 0;
  if (l->cap < AIR__MOCK_MAX_LOG) {
    size_t cap = l->cap ? l->cap * 2 : RING_MIN;
    if (cap > AIR__MOCK_MAX_LOG) cap = AIR__MOCK_MAX_LOG;
    air__mock_entry *r = malloc(cap * sizeof(*r));
    if (r == NULL) return AIR_ENOMEM;
    /* n <= cap always, so cap > 0 whenever the loop runs.
     * NOLINTNEXTLINE(clang-analyzer-core.DivideZero) */
    for (size_t i = 0; i < l->n; i++) r[i] = l->ring[(l->head + i) % l->cap];
    free(l->ring);
    l->ring = r;
    l->cap = cap;
    l->head = 0;
    return 0;
  }
  air__mock_entry *old = &l->ring[l->head];
  free(old->model);
  free(old->fault);
  free(old->instruct_message);
  l->head = (l->head + 1) % l->cap;
  l->n--;
  l->dropped++;
  return 0;
}

/* The length of at most max bytes of s that does not split a UTF-8
 * sequence. */
static size_t fit(const char *s, size_t n, size_t max) {
  if (n <= max) return n;
  size_t k = max;
  while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
  return k;
}

air__mock_entry *air__mock_log_add(air__mock_log *l, uint64_t t_ms,
                                   const char *model, size_t model_n,
                                   unsigned attempt, air_dialect api,
                                   bool stream, const char *fault) {
  if (make_room(l) != 0) return NULL;
  size_t mn = fit(model, model_n, AIR__MOCK_MAX_LOG_MODEL_BYTES);
  size_t fn = strlen(fault);
  char *m = malloc(mn + 1);
  char *f = malloc(fn + 1);
  if (m == NULL || f == NULL) {
    free(m);
    free(f);
    return NULL;
  }
  memcpy(m, model, mn);
  m[mn] = '\0';
  memcpy(f, fault, fn + 1);
  air__mock_entry *e = &l->ring[(l->head + l->n) % l->cap];
  memset(e, 0, sizeof(*e));
  e->id = l->next_id++;
  e->t_ms = t_ms;
  e->model = m;
  e->attempt = attempt;
  e->api = api;
  e->stream = stream;
  e->fault = f;
  l->n++;
  return e;
}

void air__mock_log_continuation(air__mock_entry *e, const char *style,
                                bool continued, size_t assistant_bytes,
                                const air__buf *message, bool has_max_tokens,
                                uint64_t max_tokens) {
  e->continuation = style;
  e->continued = continued;
  e->continued_at = continued ? assistant_bytes : 0;
  e->assistant_bytes = assistant_bytes;
  e->has_max_tokens = has_max_tokens;
  e->max_tokens = max_tokens;
  free(e->instruct_message);
  e->instruct_message = NULL;
  if (message == NULL) return;
  const char *text = message->p != NULL ? message->p : "";
  size_t n = fit(text, message->p != NULL ? message->n : 0,
                 AIR__MOCK_MAX_LOG_INSTRUCT_BYTES);
  e->instruct_message = malloc(n + 1);
  if (e->instruct_message == NULL) return; /* logged as null */
  memcpy(e->instruct_message, text, n);
  e->instruct_message[n] = '\0';
}

air__mock_entry *air__mock_log_find(air__mock_log *l, uint64_t id) {
  if (l->n == 0) return NULL;
  uint64_t first = l->ring[l->head].id;
  /* Ids of the entries in the ring are consecutive. */
  if (id < first || id - first >= l->n) return NULL;
  return &l->ring[(l->head + (size_t)(id - first)) % l->cap];
}

static int add_ms_or_null(air__buf *out, bool has, uint64_t v) {
  return has ? air__buf_addu(out, v) : air__buf_add(out, LIT("null"));
}

/* The continuation fields of a chat / messages / responses entry. */
static int continuation_json(const air__mock_entry *e, air__buf *out) {
  int rc = air__buf_add(out, LIT(",\"continuation\":"));
  if (rc == 0)
    rc = e->continuation != NULL
             ? air__buf_add_json_str(out, e->continuation,
                                     strlen(e->continuation))
             : air__buf_add(out, LIT("null"));
  if (rc == 0) rc = air__buf_add(out, LIT(",\"continued_at\":"));
  if (rc == 0) rc = add_ms_or_null(out, e->continued, e->continued_at);
  if (rc == 0) rc = air__buf_add(out, LIT(",\"assistant_bytes\":"));
  if (rc == 0) rc = air__buf_addu(out, e->assistant_bytes);
  if (rc == 0) rc = air__buf_add(out, LIT(",\"instruct_message\":"));
  if (rc == 0)
    rc = e->instruct_message != NULL
             ? air__buf_add_json_str(out, e->instruct_message,
                                     strlen(e->instruct_message))
             : air__buf_add(out, LIT("null"));
  if (rc == 0) rc = air__buf_add(out, LIT(",\"max_tokens\":"));
  if (rc == 0) rc = add_ms_or_null(out, e->has_max_tokens, e->max_tokens);
  return rc;
}

int air__mock_log_json(const air__mock_log *l, air__buf *out) {
  int rc = air__buf_add(out, LIT("{\"attempts\":["));
  for (size_t i = 0; rc == 0 && i < l->n; i++) {
    const air__mock_entry *e = &l->ring[(l->head + i) % l->cap];
    if (i > 0) rc = air__buf_addc(out, ',');
    if (rc == 0) rc = air__buf_add(out, LIT("{\"t_ms\":"));
    if (rc == 0) rc = air__buf_addu(out, e->t_ms);
    if (rc == 0) rc = air__buf_add(out, LIT(",\"model\":"));
    if (rc == 0) rc = air__buf_add_json_str(out, e->model, strlen(e->model));
    if (rc == 0) rc = air__buf_add(out, LIT(",\"attempt\":"));
    if (rc == 0) rc = air__buf_addu(out, e->attempt);
    if (rc == 0)
      rc = air__buf_adds(out, e->api == AIR_DIALECT_ANTHROPIC
                                  ? ",\"api\":\"anthropic\""
                                  : ",\"api\":\"openai\"");
    if (rc == 0)
      rc = air__buf_adds(out,
                         e->stream ? ",\"stream\":true" : ",\"stream\":false");
    if (rc == 0 && e->endpoint != NULL) {
      rc = air__buf_add(out, LIT(",\"endpoint\":"));
      if (rc == 0)
        rc = air__buf_add_json_str(out, e->endpoint, strlen(e->endpoint));
    }
    if (rc == 0) rc = air__buf_add(out, LIT(",\"fault\":"));
    if (rc == 0) rc = air__buf_add_json_str(out, e->fault, strlen(e->fault));
    if (rc == 0) rc = air__buf_add(out, LIT(",\"status\":"));
    if (rc == 0) rc = air__buf_addu(out, (unsigned)e->status);
    if (rc == 0)
      rc = air__buf_adds(
          out, e->hung_up ? ",\"hung_up\":true" : ",\"hung_up\":false");
    if (rc == 0) rc = air__buf_add(out, LIT(",\"hung_up_ms\":"));
    if (rc == 0) rc = add_ms_or_null(out, e->hung_up, e->hung_up_ms);
    if (rc == 0) rc = air__buf_add(out, LIT(",\"end_ms\":"));
    if (rc == 0) rc = add_ms_or_null(out, e->ended, e->end_ms);
    if (rc == 0 && e->endpoint == NULL) rc = continuation_json(e, out);
    if (rc == 0 && e->traceparent[0] != '\0') {
      rc = air__buf_add(out, LIT(",\"traceparent\":"));
      if (rc == 0)
        rc = air__buf_add_json_str(out, e->traceparent, strlen(e->traceparent));
    }
    if (rc == 0) rc = air__buf_addc(out, '}');
  }
  if (rc == 0) rc = air__buf_add(out, LIT("],\"dropped\":"));
  if (rc == 0) rc = air__buf_addu(out, l->dropped);
  if (rc == 0) rc = air__buf_adds(out, "}\n");
  return rc;
}
