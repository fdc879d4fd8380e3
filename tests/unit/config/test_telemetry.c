/*
 * Unit tests for src/config/telemetry.c: the OTEL_* variables resolved over
 * telemetry.otlp (precedence key by key, decoding, errors and warnings),
 * the loader's use of them, and the `check` summary that never shows a
 * header value.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "airetry.h"
#include "policy.h"
#include "telemetry.h"

/* A fake environment: NULL-terminated name, value pairs. */
static const char *fake_env(void *data, const char *name) {
  const char *const *kv = data;
  for (; kv[0] != NULL; kv += 2)
    if (strcmp(kv[0], name) == 0) return kv[1];
  return NULL;
}

typedef struct diags {
  int errors, warnings;
  char last[512];
} diags;

static void on_diag(void *data, bool error, const char *msg) {
  diags *d = data;
  if (error)
    d->errors++;
  else
    d->warnings++;
  snprintf(d->last, sizeof(d->last), "%s", msg);
}

static air__telemetry_file file_of(const char *endpoint,
                                   const char *headers_env, double ratio) {
  air__telemetry_file f;
  memset(&f, 0, sizeof(f));
  f.otlp.endpoint = (char *)(uintptr_t)endpoint;
  f.otlp.headers_env = (char *)(uintptr_t)headers_env;
  f.otlp.sample_ratio = ratio;
  return f;
}

static int resolve(const air__telemetry_file *f, const char *const *env,
                   air__otel *o, diags *d) {
  memset(d, 0, sizeof(*d));
  return air__otel_resolve(f, fake_env, (void *)(uintptr_t)env, o, on_diag, d);
}

static void off_without_an_endpoint(void **state) {
  (void)state;
  const char *env[] = {NULL};
  air__telemetry_file f = file_of(NULL, NULL, 1);
  air__otel o;
  diags d;
  assert_int_equal(resolve(&f, env, &o, &d), 0);
  assert_false(o.enabled);
  assert_int_equal(d.errors + d.warnings, 0);
  /* Empty variables count as unset. */
  const char *empty[] = {"OTEL_EXPORTER_OTLP_ENDPOINT", "", NULL};
  air__otel_cleanup(&o);
  assert_int_equal(resolve(&f, empty, &o, &d), 0);
  assert_false(o.enabled);
  air__otel_cleanup(&o);
}

static void endpoint_precedence(void **state) {
  (void)state;
  air__telemetry_file f = file_of("http://file:4318/", NULL, 1);
  air__otel o;
  diags d;
  const char *none[] = {NULL};
  assert_int_equal(resolve(&f, none, &o, &d), 0);
  assert_true(o.enabled);
  assert_string_equal(o.endpoint, "http://file:4318/v1/traces");
  assert_string_equal(o.endpoint_from, "telemetry.otlp.endpoint");
  air__otel_cleanup(&o);

  const char *base[] = {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318", NULL};
  assert_int_equal(resolve(&f, base, &o, &d), 0);
  assert_string_equal(o.endpoint, "http://env:4318/v1/traces");
  air__otel_cleanup(&o);

  /* The traces endpoint is used as given and wins over both. */
  const char *both[] = {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318",
                        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                        "https://t.example/x", NULL};
  assert_int_equal(resolve(&f, both, &o, &d), 0);
  assert_string_equal(o.endpoint, "https://t.example/x");
  assert_string_equal(o.endpoint_from, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  air__otel_cleanup(&o);

  /* A path that already ends in /v1/traces gets no second one. */
  air__telemetry_file g = file_of("http://c:4318/v1/traces", NULL, 1);
  assert_int_equal(resolve(&g, none, &o, &d), 0);
  assert_string_equal(o.endpoint, "http://c:4318/v1/traces");
  air__otel_cleanup(&o);

  const char *bad[] = {"OTEL_EXPORTER_OTLP_ENDPOINT", "grpc://c:4317", NULL};
  assert_int_equal(resolve(&f, bad, &o, &d), AIR_ECONFIG);
  assert_false(o.enabled);
  assert_non_null(strstr(d.last, "OTEL_EXPORTER_OTLP_ENDPOINT"));
  air__otel_cleanup(&o);

  const char *disabled[] = {"OTEL_SDK_DISABLED", "true", NULL};
  assert_int_equal(resolve(&f, disabled, &o, &d), 0);
  assert_false(o.enabled);
  air__otel_cleanup(&o);
}

static void headers_decode_and_hide(void **state) {
  (void)state;
  air__telemetry_file f = file_of("http://c:4318", "MY_HEADERS", 1);
  air__otel o;
  diags d;
  const char *env[] = {
      "MY_HEADERS", " authorization = Bearer%20s3cret , x-team=a%2Cb,", NULL};
  assert_int_equal(resolve(&f, env, &o, &d), 0);
  assert_int_equal(o.n_headers, 2);
  assert_string_equal(o.headers[0].name, "authorization");
  assert_string_equal(o.headers[0].value, "Bearer s3cret");
  assert_string_equal(o.headers[1].name, "x-team");
  assert_string_equal(o.headers[1].value, "a,b");
  assert_string_equal(o.headers_from, "telemetry.otlp.headers_env");
  /* The check summary names the headers, never their values. */
  char *text = NULL;
  size_t n = 0;
  FILE *mf = open_memstream(&text, &n);
  assert_non_null(mf);
  air__otel_dump(&o, mf);
  fclose(mf);
  assert_non_null(strstr(text, "authorization, x-team"));
  assert_null(strstr(text, "s3cret"));
  assert_null(strstr(text, "a,b"));
  free(text);
  air__otel_cleanup(&o);

  /* The standard variable overrides headers_env. */
  const char *std[] = {"MY_HEADERS", "a=1", "OTEL_EXPORTER_OTLP_HEADERS", "b=2",
                       NULL};
  assert_int_equal(resolve(&f, std, &o, &d), 0);
  assert_int_equal(o.n_headers, 1);
  assert_string_equal(o.headers[0].name, "b");
  air__otel_cleanup(&o);

  /* headers_env naming an unset variable: a warning. */
  const char *unset[] = {NULL};
  assert_int_equal(resolve(&f, unset, &o, &d), 0);
  assert_int_equal(d.warnings, 1);
  assert_non_null(strstr(d.last, "MY_HEADERS"));
  air__otel_cleanup(&o);

  /* Broken entries are errors that never quote the text. */
  static const char *const broken[] = {"novalue", "a=%zz", "bad name=1",
                                       "a=%0d%0a", "=v"};
  for (size_t i = 0; i < sizeof(broken) / sizeof(broken[0]); i++) {
    const char *e[] = {"OTEL_EXPORTER_OTLP_HEADERS", broken[i], NULL};
    assert_int_equal(resolve(&f, e, &o, &d), AIR_ECONFIG);
    assert_int_equal(o.n_headers, 0);
    assert_null(strstr(d.last, broken[i]));
    air__otel_cleanup(&o);
  }
}

static void sampler_and_protocol(void **state) {
  (void)state;
  air__telemetry_file f = file_of("http://c:4318", NULL, 0.25);
  air__otel o;
  diags d;
  const char *none[] = {NULL};
  assert_int_equal(resolve(&f, none, &o, &d), 0);
  assert_true(o.sampler.parent_based);
  assert_true(o.sampler.ratio == 0.25);
  assert_string_equal(o.service_name, "airetry");
  assert_int_equal(o.delay_ms, 1000);
  assert_int_equal(o.timeout_ms, 2000);
  air__otel_cleanup(&o);

  const char *ratio[] = {"OTEL_TRACES_SAMPLER",
                         "traceidratio",
                         "OTEL_TRACES_SAMPLER_ARG",
                         "0.1",
                         "OTEL_SERVICE_NAME",
                         "gw-eu",
                         "OTEL_BSP_SCHEDULE_DELAY",
                         "50",
                         "OTEL_EXPORTER_OTLP_TIMEOUT",
                         "300",
                         NULL};
  assert_int_equal(resolve(&f, ratio, &o, &d), 0);
  assert_false(o.sampler.parent_based);
  assert_true(o.sampler.ratio == 0.1);
  assert_string_equal(o.service_name, "gw-eu");
  assert_int_equal(o.delay_ms, 50);
  assert_int_equal(o.timeout_ms, 300);
  air__otel_cleanup(&o);

  const char *off[] = {"OTEL_TRACES_SAMPLER", "parentbased_always_off", NULL};
  assert_int_equal(resolve(&f, off, &o, &d), 0);
  assert_true(o.sampler.parent_based);
  assert_true(o.sampler.ratio == 0.0);
  air__otel_cleanup(&o);

  static const char *const errors[][2] = {
      {"OTEL_TRACES_SAMPLER", "sometimes"},
      {"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"},
      {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"},
      {"OTEL_EXPORTER_OTLP_PROTOCOL", "thrift"},
      {"OTEL_BSP_SCHEDULE_DELAY", "0"},
      {"OTEL_EXPORTER_OTLP_TIMEOUT", "10s"},
  };
  for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
    const char *e[] = {errors[i][0], errors[i][1], NULL};
    assert_int_equal(resolve(&f, e, &o, &d), AIR_ECONFIG);
    assert_non_null(strstr(d.last, errors[i][0]));
    air__otel_cleanup(&o);
  }
  const char *arg[] = {"OTEL_TRACES_SAMPLER", "traceidratio",
                       "OTEL_TRACES_SAMPLER_ARG", "1.5", NULL};
  assert_int_equal(resolve(&f, arg, &o, &d), AIR_ECONFIG);
  air__otel_cleanup(&o);

  /* http/protobuf: a warning, JSON is sent. */
  const char *pb[] = {"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf", NULL};
  assert_int_equal(resolve(&f, pb, &o, &d), 0);
  assert_int_equal(d.warnings, 1);
  assert_true(o.protobuf_asked);
  assert_true(o.enabled);
  air__otel_cleanup(&o);
}

/* The loader reads telemetry.otlp and reports env errors as config errors. */
static void loader_resolves(void **state) {
  (void)state;
  static const char yaml[] =
      "telemetry:\n"
      "  otlp: {endpoint: \"http://127.0.0.1:4318\", sample_ratio: 0.5}\n";
  air_config *cfg = NULL;
  unsetenv("OTEL_EXPORTER_OTLP_ENDPOINT");
  unsetenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  unsetenv("OTEL_EXPORTER_OTLP_PROTOCOL");
  unsetenv("OTEL_TRACES_SAMPLER");
  assert_int_equal(
      air_config_parse("t.yaml", yaml, sizeof(yaml) - 1, NULL, NULL, &cfg), 0);
  assert_true(cfg->otel.enabled);
  assert_string_equal(cfg->otel.endpoint, "http://127.0.0.1:4318/v1/traces");
  assert_true(cfg->otel.sampler.ratio == 0.5);
  air_config_free(cfg);
  static const char bad[] = "telemetry: {otlp: {sample_ratio: 2}}\n";
  assert_int_equal(
      air_config_parse("t.yaml", bad, sizeof(bad) - 1, NULL, NULL, &cfg),
      AIR_ECONFIG);
  setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", 1);
  assert_int_equal(
      air_config_parse("t.yaml", yaml, sizeof(yaml) - 1, NULL, NULL, &cfg),
      AIR_ECONFIG);
  unsetenv("OTEL_EXPORTER_OTLP_PROTOCOL");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(off_without_an_endpoint),
      cmocka_unit_test(endpoint_precedence),
      cmocka_unit_test(headers_decode_and_hide),
      cmocka_unit_test(sampler_and_protocol),
      cmocka_unit_test(loader_resolves),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
