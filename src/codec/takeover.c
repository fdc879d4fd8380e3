/*
 * Continuing a caller's stream after its first attempt died (docs/design.md
 * §3.5): the encoder's take-over from passthrough, the usage of earlier
 * attempts and the "airetry": {"continued": [...]} marker, for the stream
 * encoders and the aggregate alike. The dialects write the marker where
 * their end is (see each caller.c): OpenAI chat on the chunk carrying
 * finish_reason, Anthropic on message_delta, Responses in the response
 * object of response.completed / .incomplete; a non-streaming body as a
 * top-level member.
 */
#include <stdint.h>
#include <string.h>

#include "codec_text.h"
#include "dialect.h"

/* {"target":T,"at_char":N}, after a comma when b has members already. */
static int add_entry(air__buf *b, const char *target, uint64_t at_char) {
  size_t mark = b->n;
  const char *t = target != NULL ? target : "";
  int rc = 0;
  if (b->n > 0) rc = air__buf_addc(b, ',');
  if (rc == 0) rc = air__buf_adds(b, "{\"target\":");
  if (rc == 0) rc = air__buf_add_json_str(b, t, strlen(t));
  if (rc == 0) rc = air__buf_adds(b, ",\"at_char\":");
  if (rc == 0) rc = air__buf_addu(b, at_char);
  if (rc == 0) rc = air__buf_addc(b, '}');
  if (rc != 0) air__text_undo(b, mark);
  return rc;
}

int air__continued_member(const air__buf *continued, air__buf *out) {
  if (continued->n == 0) return 0;
  size_t mark = out->n;
  int rc = air__buf_adds(out, ",\"airetry\":{\"continued\":[");
  if (rc == 0) rc = air__buf_add(out, continued->p, continued->n);
  if (rc == 0) rc = air__buf_adds(out, "]}");
  if (rc != 0) air__text_undo(out, mark);
  return rc;
}

bool air__scan_uint(const char *d, size_t n, const char *key, uint64_t *v) {
  size_t kn = strlen(key);
  if (d == NULL || kn == 0 || n < kn + 3) return false;
  for (size_t i = 0; i + kn + 2 < n; i++) {
    if (d[i] != '"' || d[i + 1] != key[0] || d[i + 1 + kn] != '"' ||
        memcmp(d + i + 1, key, kn) != 0)
      continue;
    size_t k = i + kn + 2;
    while (k < n && (d[k] == ' ' || d[k] == '\t')) k++;
    if (k >= n || d[k] != ':') continue;
    k++;
    while (k < n && (d[k] == ' ' || d[k] == '\t')) k++;
    uint64_t x = 0;
    bool any = false;
    while (k < n && d[k] >= '0' && d[k] <= '9') {
      uint64_t digit = (uint64_t)(d[k++] - '0');
      if (x > (UINT64_MAX - digit) / 10) return false;
      x = x * 10 + digit;
      any = true;
    }
    if (!any) continue;
    *v = x;
    return true;
  }
  return false;
}

air__str air__event_type(const air__sse_event *ev) {
  if (!(ev->type.n == 7 && memcmp(ev->type.p, "message", 7) == 0))
    return ev->type;
  const char *d = ev->data.p;
  size_t n = d != NULL ? ev->data.n : 0;
  static const char key[] = "\"type\"";
  for (size_t i = 0; i + sizeof(key) - 1 < n; i++) {
    if (memcmp(d + i, key, sizeof(key) - 1) != 0) continue;
    size_t k = i + sizeof(key) - 1;
    while (k < n && (d[k] == ' ' || d[k] == ':')) k++;
    if (k >= n || d[k] != '"') continue;
    size_t b = ++k;
    while (k < n && d[k] != '"' && d[k] != '\\') k++;
    if (k >= n || d[k] != '"') break;
    return (air__str){d + b, k - b};
  }
  return ev->type;
}

void air__encoder_take_over(air__encoder *e) {
  e->passthrough = false;
  e->taken_over = true;
}

void air__encoder_add_usage(air__encoder *e, uint64_t input_tokens,
                            uint64_t output_tokens) {
  e->prior_input_tokens = air__sat_add(e->prior_input_tokens, input_tokens);
  e->prior_output_tokens = air__sat_add(e->prior_output_tokens, output_tokens);
  e->has_prior_usage = true;
  /* What USAGE parts said so far was that earlier attempt's. */
  e->input_tokens = e->output_tokens = 0;
  e->has_usage = false;
}

int air__encoder_add_continued(air__encoder *e, const char *target,
                               uint64_t at_char) {
  if (e->continued.max == 0)
    air__buf_init(&e->continued, AIR__CONTINUED_MAX_BYTES);
  return add_entry(&e->continued, target, at_char);
}

void air__aggregate_add_usage(air__aggregate *a, uint64_t input_tokens,
                              uint64_t output_tokens) {
  a->prior_input_tokens = air__sat_add(a->prior_input_tokens, input_tokens);
  a->prior_output_tokens = air__sat_add(a->prior_output_tokens, output_tokens);
  a->input_tokens = a->prior_input_tokens;
  a->output_tokens = a->prior_output_tokens;
  a->has_usage = true;
}

int air__aggregate_add_continued(air__aggregate *a, const char *target,
                                 uint64_t at_char) {
  int rc = add_entry(&a->continued, target, at_char);
  if (rc == 0) a->keep_ident = true;
  return rc;
}
