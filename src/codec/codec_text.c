/*
 * The JSON text builders the encoders share (codec_text.h).
 */
#include "codec_text.h"

#include "dialect.h"

int air__text_int(air__buf *b, long long v) {
  if (v >= 0) return air__buf_addu(b, (unsigned long long)v);
  int rc = air__buf_addc(b, '-');
  return rc != 0 ? rc : air__buf_addu(b, 0ull - (unsigned long long)v);
}

size_t air__ident_fit(const char *s, size_t n, size_t max) {
  if (s == NULL) return 0;
  const char *z = memchr(s, '\0', n);
  if (z != NULL) n = (size_t)(z - s);
  if (n <= max) return n;
  size_t k = max;
  while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
  return k;
}

int air__text_attempts(air__buf *out, const air_attempt *log, size_t n,
                       const air__attempts_style *style) {
  int rc = 0;
  for (size_t i = 0; log != NULL && i < n; i++) {
    const air_attempt *at = &log[i];
    const char *rn = air_reason_name(at->reason);
    if (i > 0) TRY(air__buf_addc(out, ','));
    TRY(air__buf_add(out, LIT("{\"target\":")));
    TRY(air__text_cstr(out, at->target));
    if (at->skipped) {
      TRY(air__buf_add(out, LIT(",\"outcome\":\"skipped\",\"field\":")));
      TRY(air__text_cstr(out, at->field));
      TRY(air__buf_addc(out, '}'));
      continue;
    }
    TRY(air__buf_add(out, LIT(",\"reason\":")));
    TRY(air__text_cstr(out, rn != NULL ? rn : style->no_reason));
    TRY(air__buf_add(out, LIT(",\"status\":")));
    TRY(air__text_int(out, at->status));
    TRY(air__buf_add(out, LIT(",\"ms\":")));
    TRY(air__buf_addu(out, at->ms));
    TRY(air__buf_add(out, LIT(",\"request_id\":")));
    if (style->null_request_id &&
        (at->request_id == NULL || at->request_id[0] == '\0'))
      TRY(air__buf_add(out, LIT("null")));
    else
      TRY(air__text_cstr(out, at->request_id));
    TRY(air__buf_addc(out, '}'));
  }
out:
  return rc;
}

int air__text_openai_error(air__buf *out, air_reason reason,
                           const char *message) {
  const char *code = air_reason_name(reason);
  int rc;
  TRY(air__buf_add(out, LIT("{\"message\":")));
  TRY(air__text_cstr(out, message));
  TRY(air__buf_add(out, LIT(",\"type\":\"")));
  TRY(air__buf_adds(out, air__error_type(AIR_DIALECT_OPENAI, reason)));
  TRY(air__buf_add(out, LIT("\",\"code\":")));
  TRY(air__text_cstr(out, code != NULL ? code : "unknown"));
out:
  return rc;
}

int air__openai_error_body(int status, air_reason reason, const char *message,
                           const air_attempt *log, size_t n, air__buf *out) {
  static const air__attempts_style style = {"unknown", false};
  (void)status;
  size_t mark = out->n;
  int rc;
  TRY(air__buf_add(out, LIT("{\"error\":")));
  TRY(air__text_openai_error(out, reason, message));
  TRY(air__buf_add(out, LIT(",\"param\":null,\"attempts\":[")));
  TRY(air__text_attempts(out, log, n, &style));
  TRY(air__buf_add(out, LIT("]}}")));
out:
  if (rc != 0) air__text_undo(out, mark);
  return rc;
}

int air__openai_keepalive(air__encoder *e, air__buf *out) {
  (void)e;
  return air__buf_add(out, LIT(": keep-alive\n\n"));
}
