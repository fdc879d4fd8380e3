/*
 * The differential proof of the canonical hub (src/codec/hub.c): every
 * request body under
 * tests/data/codec_diff/requests/ (NAME.DIALECT.json: the fuzz corpus of
 * fuzz_request, the unit tests' request shapes, the shapes agents send) is
 * parsed as its caller dialect and built into an upstream body for every
 * upstream dialect, with drop_params off and on and under each override of
 * OVERRIDES. What comes out (the return code, the error message, the body)
 * is compared with tests/data/codec_diff/expected/NAME.DIALECT.out, which
 * the pairwise translators of the code before the canonical hub wrote
 * (AIR__TRANSCRIPT_WRITE=1 writes them again). Bodies are compared as JSON
 * values (key order is not part of the contract; numbers keep their type:
 * 1 and 1.0 differ); codes and messages byte for byte. Every difference the
 * hub was allowed to make is listed in docs/decisions.md ("The canonical
 * request").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "dialect.h"
#include "tl_files.h"

#ifndef AIR_SOURCE_DIR
#error "AIR_SOURCE_DIR must name the source root"
#endif

#define DIR_IN AIR_SOURCE_DIR "/tests/data/codec_diff/requests"
#define DIR_OUT AIR_SOURCE_DIR "/tests/data/codec_diff/expected"

/* Overrides a route, target or rule may hold (index 0: none). */
static const char *const OVERRIDES[] = {
    NULL,
    "{\"max_tokens\":8192}",
    "{\"temperature\":1.5,\"top_p\":0.9,\"stop\":[\"\\n\\n\"]}",
    "{\"max_tokens\":null,\"temperature\":null}",
    "{\"seed\":1,\"x-unknown\":{\"nested\":[1,null]}}",
};
#define N_OVERRIDES (sizeof(OVERRIDES) / sizeof(OVERRIDES[0]))

static void addf(air__buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void addf(air__buf *b, const char *fmt, ...) {
  char tmp[1024];
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(tmp, sizeof(tmp), fmt, ap);
  va_end(ap);
  assert_true(k >= 0 && (size_t)k < sizeof(tmp));
  assert_int_equal(air__buf_add(b, tmp, (size_t)k), 0);
}

/* Every build of one caller body, as the lines of an expected file:
 *   "parse RC MESSAGE" then, when it parsed, for each (target, drop,
 *   override) "build TARGET DROP OV RC" and a line holding the body or the
 *   error message. */
static void run_one(air_dialect dialect, const char *body, size_t n,
                    air__buf *out) {
  air__request req;
  air_error err;
  memset(&err, 0, sizeof(err));
  int rc = air__request_parse(dialect, body, n, &req, &err);
  addf(out, "parse %d %s\n", rc, rc == 0 ? "" : err.message);
  if (rc != 0) return;
  static const air_dialect targets[] = {AIR_DIALECT_OPENAI,
                                        AIR_DIALECT_ANTHROPIC};
  for (size_t t = 0; t < 2; t++) {
    for (int drop = 0; drop < 2; drop++) {
      for (size_t ov = 0; ov < N_OVERRIDES; ov++) {
        air__build_opts o = {.model = "up-model",
                             .override_json = OVERRIDES[ov],
                             .drop_params = drop != 0,
                             .default_max_tokens = 4096};
        air__buf b;
        air__buf_init(&b, 1u << 24);
        memset(&err, 0, sizeof(err));
        rc = air__request_build(air__dialect_get(targets[t]), &req, &o, &b,
                                &err);
        addf(out, "build %s %d %zu %d\n",
             targets[t] == AIR_DIALECT_OPENAI ? "openai" : "anthropic", drop,
             ov, rc);
        if (rc == 0) {
          assert_int_equal(air__buf_add(out, b.p, b.n), 0);
          assert_int_equal(air__buf_addc(out, '\n'), 0);
        } else {
          assert_int_equal(b.n, 0);
          addf(out, "%s\n", err.message);
        }
        air__buf_cleanup(&b);
      }
    }
  }
  air__request_cleanup(&req);
}

/* The next line of *s (without its newline); false at the end. */
static bool next_line(const char **s, const char **line, size_t *len) {
  if (**s == '\0') return false;
  const char *nl = strchr(*s, '\n');
  *line = *s;
  *len = nl != NULL ? (size_t)(nl - *s) : strlen(*s);
  *s = nl != NULL ? nl + 1 : *s + *len;
  return true;
}

static bool is_body(const char *prev, size_t prev_n) {
  return prev_n > 6 && memcmp(prev, "build ", 6) == 0 &&
         prev[prev_n - 1] == '0' && prev[prev_n - 2] == ' ';
}

/* Compares got with want line by line; a body line (after a "build ... 0"
 * line) as JSON. Returns the number of differences (each printed). */
static int compare(const char *name, const char *want, const char *got) {
  const char *w = want, *g = got, *wl, *gl, *prev = "";
  size_t wn, gn, prev_n = 0;
  int diffs = 0;
  for (;;) {
    bool hw = next_line(&w, &wl, &wn), hg = next_line(&g, &gl, &gn);
    if (!hw && !hg) break;
    if (hw != hg) {
      fprintf(stderr, "%s: %s ends early\n", name, hw ? "output" : "expected");
      return diffs + 1;
    }
    bool same;
    if (is_body(prev, prev_n)) {
      json_t *a = json_loadb(wl, wn, 0, NULL), *b = json_loadb(gl, gn, 0, NULL);
      same = a != NULL && b != NULL && json_equal(a, b);
      json_decref(a);
      json_decref(b);
    } else {
      same = wn == gn && memcmp(wl, gl, wn) == 0;
    }
    if (!same) {
      fprintf(stderr, "%s: after \"%.*s\"\n  want %.*s\n  got  %.*s\n", name,
              (int)prev_n, prev, (int)wn, wl, (int)gn, gl);
      diffs++;
    }
    prev = wl;
    prev_n = wn;
  }
  return diffs;
}

static void test_hub_diff(void **state) {
  (void)state;
  char **names;
  size_t n = tl_list(DIR_IN, ".json", &names);
  assert_true(n >= 70);
  int diffs = 0;
  for (size_t i = 0; i < n; i++) {
    char path[4096];
    size_t len, k = strlen(names[i]);
    snprintf(path, sizeof(path), "%s/%s.json", DIR_IN, names[i]);
    char *body = tl_read_file(path, &len);
    assert_non_null(body);
    air_dialect dialect = k > 10 && strcmp(names[i] + k - 10, ".anthropic") == 0
                              ? AIR_DIALECT_ANTHROPIC
                              : AIR_DIALECT_OPENAI;
    air__buf got;
    air__buf_init(&got, 64u << 20);
    run_one(dialect, body, len, &got);
    assert_int_equal(air__buf_add(&got, "", 0), 0);
    free(body);
    snprintf(path, sizeof(path), "%s/%s.out", DIR_OUT, names[i]);
    if (tl_write_mode()) {
      tl_write_file(path, got.p, got.n);
    } else {
      char *want = tl_read_file(path, &len);
      if (want == NULL) fail_msg("%s: no expected file", path);
      diffs += compare(names[i], want, got.p);
      free(want);
    }
    air__buf_cleanup(&got);
  }
  tl_names_free(names, n);
  assert_int_equal(diffs, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_hub_diff)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
