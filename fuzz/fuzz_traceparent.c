/*
 * libFuzzer target for the trace inputs a caller or an operator controls:
 * the W3C traceparent header (air__traceparent_parse) and the OTLP export
 * headers variable (air__otel_resolve's k=v,k=v decoding). The first byte
 * picks which; the rest is copied into an exact-size heap block so a read
 * past its length is caught by ASan. A parsed traceparent must format back
 * to a header that parses to the same context (and, for version 00, to the
 * same bytes); decoded headers must be tokens and hold no control byte.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "airetry.h"
#include "policy.h"
#include "telemetry.h"
#include "trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *env_of(void *data, const char *name) {
  const char *const *kv = data;
  for (; kv[0] != NULL; kv += 2)
    if (strcmp(kv[0], name) == 0) return kv[1];
  return NULL;
}

static void fuzz_traceparent(const uint8_t *p, size_t n) {
  char *copy = malloc(n ? n : 1);
  if (copy == NULL) return;
  if (n) memcpy(copy, p, n);
  air__span_ctx c;
  if (air__traceparent_parse(copy, n, &c) == 0) {
    if (air__id_zero(c.trace_id, 16) || air__id_zero(c.span_id, 8)) abort();
    char out[AIR__TRACEPARENT_LEN + 1];
    air__traceparent_format(&c, out);
    air__span_ctx again;
    if (air__traceparent_parse(out, AIR__TRACEPARENT_LEN, &again) != 0) abort();
    if (memcmp(&c, &again, sizeof(c)) != 0) abort();
    if (copy[0] == '0' && copy[1] == '0' && memcmp(out, copy, n) != 0) abort();
    air__sampler s = {true, 0.5};
    (void)air__sample(&s, &c, c.trace_id);
  }
  free(copy);
}

static void fuzz_headers(const uint8_t *p, size_t n) {
  char *value = malloc(n + 1);
  if (value == NULL) return;
  if (n) memcpy(value, p, n);
  value[n] = '\0';
  const char *env[] = {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318",
                       "OTEL_EXPORTER_OTLP_HEADERS", value, NULL};
  air__telemetry_file f;
  memset(&f, 0, sizeof(f));
  f.otlp.sample_ratio = 1;
  air__otel o;
  int rc =
      air__otel_resolve(&f, env_of, (void *)(uintptr_t)env, &o, NULL, NULL);
  if (rc == 0 || rc == AIR_ECONFIG) {
    for (size_t i = 0; i < o.n_headers; i++) {
      const char *k = o.headers[i].name, *v = o.headers[i].value;
      if (k[0] == '\0' || strpbrk(k, " :\r\n") != NULL) abort();
      for (const char *q = v; *q; q++)
        if ((unsigned char)*q < 0x20 || *q == 0x7f) abort();
    }
  }
  air__otel_cleanup(&o);
  free(value);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  if (data[0] & 1)
    fuzz_headers(data + 1, size - 1);
  else
    fuzz_traceparent(data + 1, size - 1);
  return 0;
}
