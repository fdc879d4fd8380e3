/*
 * The transcript runner: the stream codecs of every dialect replayed from
 * tests/data (README.md there says what the files hold and how they are
 * replayed). For each dialect's folder, every NAME.sse is decoded (fed
 * whole and in pieces of 1 to 7 bytes) and must give NAME.parts. Every
 * NAME.parts of every folder that has a NAME.DIALECT.out is encoded for a
 * caller of that dialect: the bytes must equal the file, be well-formed for
 * that caller and, decoded back by the same dialect, give the same content.
 * Adding a case is adding files.
 *
 * AIR__TRANSCRIPT_WRITE=1 in the environment writes the expected files
 * from what the code gives instead of comparing (review the diff).
 * AIR__TRANSCRIPT_CASE=GLOB replays only the cases whose DIALECT/NAME
 * matches the fnmatch pattern GLOB ("anthropic/tool_use", "*refusal").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <fnmatch.h>
#include <jansson.h>

#include "airetry.h"
#include "classify.h"
#include "dialect.h"
#include "sse.h"
#include "tl_files.h"
#include "tl_parts.h"
#include "tl_wire.h"

#ifndef AIR_SOURCE_DIR
#error "AIR_SOURCE_DIR must name the source root"
#endif

#define DATA AIR_SOURCE_DIR "/tests/data/"

/* The finish a dialect's decoder reads back from what its encoder wrote
 * for finish f (tools: the parts held a tool call). */
static air_finish anthropic_finish_back(air_finish f, bool tools) {
  (void)tools;
  return f == AIR_FINISH_NONE             ? AIR_FINISH_STOP
         : f == AIR_FINISH_CONTENT_FILTER ? AIR_FINISH_REFUSAL
                                          : f;
}

static air_finish openai_finish_back(air_finish f, bool tools) {
  (void)tools;
  switch (f) {
    case AIR_FINISH_NONE:
    case AIR_FINISH_PAUSE:
      return AIR_FINISH_STOP;
    case AIR_FINISH_CONTEXT:
      return AIR_FINISH_LENGTH;
    case AIR_FINISH_REFUSAL:
      return AIR_FINISH_CONTENT_FILTER;
    default:
      return f;
  }
}

static air_finish responses_finish_back(air_finish f, bool tools) {
  switch (f) {
    case AIR_FINISH_LENGTH:
    case AIR_FINISH_CONTEXT:
      return AIR_FINISH_LENGTH;
    case AIR_FINISH_CONTENT_FILTER:
    case AIR_FINISH_REFUSAL:
      return AIR_FINISH_CONTENT_FILTER;
    default:
      return tools ? AIR_FINISH_TOOL_CALLS : AIR_FINISH_STOP;
  }
}

/* ---- the dialects ----------------------------------------------------------
 */

static const air__request openai_caller = {
    .dialect = AIR_DIALECT_OPENAI, .stream = true, .include_usage = true};

typedef struct dialect {
  const char *name; /* its folder under tests/data and its .out files */
  const air__dialect_ops *ops;
  const air__request *caller; /* encoder_init's request */
  void (*check_wire)(const char *p, size_t n);
  /* NULL: the encoder's bytes are not decoded back. */
  air_finish (*finish_back)(air_finish f, bool tools);
  bool refusal_as_text; /* REFUSAL is written as text */
  size_t min_decoded;   /* at least this many NAME.sse in its folder */
  size_t min_encoded;   /* at least this many NAME.name.out in all */
} dialect;

static const dialect DIALECTS[] = {
    {"openai", &air__dialect_openai_chat, &openai_caller, tl_check_openai_chat,
     openai_finish_back, false, 13, 38},
    {"anthropic", &air__dialect_anthropic, NULL, tl_check_anthropic,
     anthropic_finish_back, true, 13, 38},
    {"openai_responses", &air__dialect_openai_responses, NULL,
     tl_check_responses, responses_finish_back, false, 7, 37},
};
#define N_DIALECTS (sizeof(DIALECTS) / sizeof(DIALECTS[0]))

/* AIR__TRANSCRIPT_CASE, or NULL: every case. */
static const char *only(void) {
  const char *g = getenv("AIR__TRANSCRIPT_CASE");
  return g != NULL && g[0] != '\0' ? g : NULL;
}

/* The case dir_name/name is replayed. */
static bool wanted(const char *dir_name, const char *name) {
  if (only() == NULL) return true;
  char id[512];
  snprintf(id, sizeof(id), "%s/%s", dir_name, name);
  return fnmatch(only(), id, 0) == 0;
}

/* ---- decoding --------------------------------------------------------------
 */

/* dir/NAME.sse fed whole and in pieces of 1 to 7 bytes gives NAME.parts
 * (its comment and blank lines aside) every time. */
static void replay_decode(const dialect *dl, const char *dir,
                          const char *name) {
  char path[1024];
  size_t sse_n;
  snprintf(path, sizeof(path), "%s/%s.sse", dir, name);
  char *sse = tl_read_file(path, &sse_n);
  assert_non_null(sse);
  snprintf(path, sizeof(path), "%s/%s.parts", dir, name);
  char *text = tl_read_file(path, NULL);
  air__buf want;
  air__buf_init(&want, 64u << 20);
  if (text != NULL) tl_parts_strip(text, &want);
  for (size_t piece = 0; piece <= 7; piece++) {
    tl_run r;
    tl_run_init(&r, dl->ops);
    tl_run_sse(&r, sse, sse_n, piece);
    if (tl_write_mode() && piece == 0) {
      if (text == NULL || r.lines.n != want.n ||
          memcmp(r.lines.p, want.p, want.n) != 0) {
        fprintf(stderr, "writing %s (comments dropped)\n", path);
        tl_write_file(path, r.lines.p, r.lines.n);
        air__buf_reset(&want);
        assert_int_equal(air__buf_add(&want, r.lines.p, r.lines.n), 0);
      }
    } else {
      if (text == NULL && !tl_write_mode()) fail_msg("missing %s", path);
      char what[1200];
      snprintf(what, sizeof(what), "%s/%s.parts (fed in pieces of %zu)",
               dl->name, name, piece);
      tl_expect_bytes(what, r.lines.p, r.lines.n, want.p, want.n);
    }
    tl_run_cleanup(&r);
  }
  air__buf_cleanup(&want);
  free(text);
  free(sse);
}

/* ---- encoding --------------------------------------------------------------
 */

/* The parts for a caller of dl: encode_part for each; at the first ERROR,
 * encode_error_event with the reason air__classify gives its type and
 * message, and nothing after; else encode_end after the last. */
static void encode_parts(const dialect *dl, const tl_parts *ps, air__buf *out,
                         const char *what) {
  air__encoder e;
  dl->ops->encoder_init(&e, dl->caller, 1718000000);
  bool errored = false;
  int rc = 0;
  size_t i;
  for (i = 0; i < ps->n && !errored && rc == 0; i++) {
    const air_part *p = &ps->p[i];
    if (p->kind == AIR_PART_ERROR) {
      air_reason r =
          air__classify(200, p->name, NULL, p->text, AIR_TRANSPORT_OK);
      rc = dl->ops->encode_error_event(&e, r, p->text, out);
      errored = true;
    } else {
      rc = dl->ops->encode_part(&e, p, out);
    }
  }
  if (rc == 0 && !errored) rc = dl->ops->encode_end(&e, out);
  air__encoder_cleanup(&e);
  if (rc != 0)
    fail_msg("%s: the %s encoder returned %d at part %zu", what, dl->name, rc,
             i);
}

static void expect_buf(const char *what, const air__buf *got,
                       const air__buf *want) {
  tl_expect_bytes(what, got->p != NULL ? got->p : "", got->n,
                  want->p != NULL ? want->p : "", want->n);
}

/* The encoder's bytes decoded by the same dialect give the parts' text,
 * reasoning, refusal, tool calls, finish and usage (when the parts end
 * cleanly, without an ERROR). */
static void check_round_trip(const dialect *dl, const tl_parts *ps,
                             const air__buf *out) {
  air__buf text, reasoning, refusal;
  air__buf_init(&text, 1u << 20);
  air__buf_init(&reasoning, 1u << 20);
  air__buf_init(&refusal, 1u << 20);
  air__aggregate want;
  air__aggregate_init(&want);
  bool clean = true;
  for (size_t i = 0; i < ps->n && clean; i++) {
    const air_part *p = &ps->p[i];
    clean = p->kind != AIR_PART_ERROR;
    if (p->kind == AIR_PART_TEXT ||
        (p->kind == AIR_PART_REFUSAL && dl->refusal_as_text))
      assert_int_equal(air__buf_add(&text, p->text, p->text_len), 0);
    else if (p->kind == AIR_PART_REFUSAL)
      assert_int_equal(air__buf_add(&refusal, p->text, p->text_len), 0);
    if (p->kind == AIR_PART_REASONING)
      assert_int_equal(air__buf_add(&reasoning, p->text, p->text_len), 0);
    if (p->kind == AIR_PART_TOOL_START || p->kind == AIR_PART_TOOL_DELTA ||
        p->kind == AIR_PART_FINISH || p->kind == AIR_PART_USAGE)
      assert_int_equal(air__aggregate_add(&want, p), 0);
  }
  if (clean) {
    tl_run r;
    tl_run_init(&r, dl->ops);
    tl_run_sse(&r, out->p, out->n, 0);
    assert_int_equal(r.d.malformed, 0);
    assert_true(r.d.done && r.d.finished);
    expect_buf("round-trip text", &r.agg.text, &text);
    expect_buf("round-trip reasoning", &r.agg.reasoning, &reasoning);
    expect_buf("round-trip refusal", &r.agg.refusal, &refusal);
    assert_int_equal(r.agg.n_tools, want.n_tools);
    for (size_t i = 0; i < want.n_tools; i++) {
      assert_string_equal(r.agg.tools[i].id ? r.agg.tools[i].id : "",
                          want.tools[i].id ? want.tools[i].id : "");
      assert_string_equal(r.agg.tools[i].name ? r.agg.tools[i].name : "",
                          want.tools[i].name ? want.tools[i].name : "");
      expect_buf("round-trip arguments", &r.agg.tools[i].args,
                 &want.tools[i].args);
    }
    assert_int_equal(r.agg.finish,
                     dl->finish_back(want.finish, want.n_tools > 0));
    assert_int_equal(r.agg.output_tokens, want.output_tokens);
    if (want.has_usage) assert_int_equal(r.agg.input_tokens, want.input_tokens);
    tl_run_cleanup(&r);
  }
  air__aggregate_cleanup(&want);
  air__buf_cleanup(&text);
  air__buf_cleanup(&reasoning);
  air__buf_cleanup(&refusal);
}

/* dir/NAME.parts encoded for a caller of dl, when dir/NAME.<dl>.out is
 * present: the bytes must equal it (in write mode they replace it). True
 * when it was present. */
static bool replay_encode(const dialect *dl, const char *dir,
                          const char *name) {
  char out_path[1024], path[1024];
  snprintf(out_path, sizeof(out_path), "%s/%s.%s.out", dir, name, dl->name);
  size_t want_n = 0;
  char *want = tl_read_file(out_path, &want_n);
  if (want == NULL) return false;
  snprintf(path, sizeof(path), "%s/%s.parts", dir, name);
  char *text = tl_read_file(path, NULL);
  assert_non_null(text);
  tl_parts ps;
  tl_parts_parse(text, &ps);
  free(text);
  air__buf out;
  air__buf_init(&out, 64u << 20);
  encode_parts(dl, &ps, &out, out_path);
  const char *got = out.p != NULL ? out.p : "";
  if (!tl_write_mode()) {
    tl_expect_bytes(out_path, got, out.n, want, want_n);
  } else if (want_n != out.n || memcmp(want, got, out.n) != 0) {
    fprintf(stderr, "writing %s\n", out_path);
    tl_write_file(out_path, got, out.n);
  }
  dl->check_wire(got, out.n);
  if (dl->finish_back != NULL) check_round_trip(dl, &ps, &out);
  free(want);
  air__buf_cleanup(&out);
  tl_parts_free(&ps);
  return true;
}

/* ---- the runs --------------------------------------------------------------
 */

static void test_decode(void **state) {
  (void)state;
  size_t total = 0;
  for (size_t d = 0; d < N_DIALECTS; d++) {
    const dialect *dl = &DIALECTS[d];
    char dir[512];
    snprintf(dir, sizeof(dir), DATA "%s", dl->name);
    char **names;
    size_t n = tl_list(dir, ".sse", &names);
    size_t done = 0;
    for (size_t i = 0; i < n; i++) {
      if (!wanted(dl->name, names[i])) continue;
      replay_decode(dl, dir, names[i]);
      done++;
    }
    tl_names_free(names, n);
    if (only() == NULL && done < dl->min_decoded)
      fail_msg("%s: %zu transcripts decoded, expected at least %zu", dl->name,
               done, dl->min_decoded);
    total += done;
  }
  fprintf(stderr, "transcripts: %zu decoded\n", total);
}

static void test_encode(void **state) {
  (void)state;
  size_t compared[N_DIALECTS] = {0}, total = 0;
  for (size_t f = 0; f < N_DIALECTS; f++) {
    char dir[512];
    snprintf(dir, sizeof(dir), DATA "%s", DIALECTS[f].name);
    char **names;
    size_t n = tl_list(dir, ".parts", &names);
    for (size_t i = 0; i < n; i++)
      for (size_t d = 0; d < N_DIALECTS && wanted(DIALECTS[f].name, names[i]);
           d++)
        compared[d] += replay_encode(&DIALECTS[d], dir, names[i]);
    tl_names_free(names, n);
  }
  for (size_t d = 0; d < N_DIALECTS; d++) {
    if (only() == NULL && compared[d] < DIALECTS[d].min_encoded)
      fail_msg("%s: %zu encodings compared, expected at least %zu",
               DIALECTS[d].name, compared[d], DIALECTS[d].min_encoded);
    total += compared[d];
  }
  fprintf(stderr, "transcripts: %zu encodings compared\n", total);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decode),
      cmocka_unit_test(test_encode),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
