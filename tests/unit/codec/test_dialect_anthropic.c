/*
 * Unit tests for src/codec/anthropic/: the Anthropic Messages
 * dialect.
 *
 * test_transcripts replays tests/data (README.md there): every
 * anthropic/NAME.sse is decoded whole, byte by byte and in 7-byte pieces and
 * must give NAME.parts exactly; every NAME.parts (both folders) with a
 * NAME.anthropic.out is encoded and must give those bytes, which must also
 * be a well-formed Anthropic stream and decode back to the same content.
 * The other tests cover request building, decoder edge cases, bodies and
 * the encoder's corners.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "airetry.h"
#include "classify.h"
#include "dialect.h"
#include "sse.h"

#ifndef AIR_SOURCE_DIR
#error "AIR_SOURCE_DIR must name the source tree"
#endif

static const air__dialect_ops *const ops = &air__dialect_anthropic;

/* ---- small helpers --------------------------------------------------------
 */

static char *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  air__buf b;
  air__buf_init(&b, 64u << 20);
  char tmp[4096];
  size_t k;
  while ((k = fread(tmp, 1, sizeof(tmp), f)) > 0)
    assert_int_equal(air__buf_add(&b, tmp, k), 0);
  fclose(f);
  if (b.p == NULL) assert_int_equal(air__buf_add(&b, "", 0), 0);
  return air__buf_take(&b, n);
}

static void write_file(const char *path, const char *p, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(p, 1, n, f), n);
  fclose(f);
}

static bool file_exists(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f) fclose(f);
  return f != NULL;
}

static bool regen(void) {
  const char *w = getenv("AIR__TRANSCRIPT_WRITE");
  return w != NULL && w[0] == '1';
}

static void assert_bytes(const char *what, const char *got, size_t got_n,
                         const char *want, size_t want_n) {
  if (got_n == want_n && memcmp(got, want, got_n) == 0) return;
  fprintf(stderr, "%s differs.\n--- got ---\n%.*s\n--- want ---\n%.*s\n", what,
          (int)got_n, got, (int)want_n, want);
  fail();
}

/* ---- parts in the canonical text form ---------------------------------------
 */

static void add_jstr(air__buf *b, const char *s, size_t n) {
  assert_int_equal(air__buf_add_json_str(b, s, n), 0);
}

__attribute__((format(printf, 2, 3))) static void add_fmt(air__buf *b,
                                                          const char *fmt,
                                                          ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(tmp, sizeof(tmp), fmt, ap);
  va_end(ap);
  assert_true(k >= 0 && (size_t)k < sizeof(tmp));
  assert_int_equal(air__buf_add(b, tmp, (size_t)k), 0);
}

static void print_part(air__buf *b, const air_part *p) {
  switch (p->kind) {
    case AIR_PART_START:
      add_fmt(b, "START ");
      add_jstr(b, p->id, p->id_len);
      add_fmt(b, " ");
      add_jstr(b, p->name, p->name_len);
      break;
    case AIR_PART_TEXT:
    case AIR_PART_REASONING:
    case AIR_PART_REFUSAL:
    case AIR_PART_TOOL_DELTA:
      add_fmt(b, "%s %d ",
              p->kind == AIR_PART_TEXT        ? "TEXT"
              : p->kind == AIR_PART_REASONING ? "REASONING"
              : p->kind == AIR_PART_REFUSAL   ? "REFUSAL"
                                              : "TOOL_DELTA",
              p->index);
      add_jstr(b, p->text, p->text_len);
      break;
    case AIR_PART_TOOL_START:
      add_fmt(b, "TOOL_START %d ", p->index);
      add_jstr(b, p->id, p->id_len);
      add_fmt(b, " ");
      add_jstr(b, p->name, p->name_len);
      break;
    case AIR_PART_FINISH: {
      const char *f = air_finish_name(p->finish);
      add_fmt(b, "FINISH %s ", f[0] ? f : "none");
      add_jstr(b, p->finish_raw, p->finish_raw_len);
      break;
    }
    case AIR_PART_USAGE:
      add_fmt(b, "USAGE %llu %llu", (unsigned long long)p->input_tokens,
              (unsigned long long)p->output_tokens);
      break;
    case AIR_PART_ERROR:
      add_fmt(b, "ERROR ");
      add_jstr(b, p->name, p->name_len);
      add_fmt(b, " ");
      add_jstr(b, p->text, p->text_len);
      break;
  }
  add_fmt(b, "\n");
}

/* A part parsed back from its text form; strings owned. */
typedef struct tpart {
  air_part p;
  char *s[2];
  char *raw;
} tpart;

/* Reads one field at *s: a JSON string literal (decoded, owned, *n bytes)
 * or a bare word (owned). */
static char *read_field(const char **s, size_t *n) {
  const char *p = *s;
  while (*p == ' ') p++;
  const char *e = p;
  char *out;
  if (*p == '"') {
    e++;
    while (*e && *e != '"') e += (*e == '\\' && e[1]) ? 2 : 1;
    assert_int_equal(*e, '"');
    e++;
    json_error_t jerr;
    json_t *v =
        json_loadb(p, (size_t)(e - p), JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    assert_true(json_is_string(v));
    *n = json_string_length(v);
    out = malloc(*n + 1);
    assert_non_null(out);
    memcpy(out, json_string_value(v), *n + 1);
    json_decref(v);
  } else {
    while (*e && *e != ' ' && *e != '\n') e++;
    *n = (size_t)(e - p);
    out = malloc(*n + 1);
    assert_non_null(out);
    memcpy(out, p, *n);
    out[*n] = '\0';
  }
  *s = e;
  return out;
}

static air_finish finish_from_name(const char *s) {
  if (strcmp(s, "none") == 0) return AIR_FINISH_NONE;
  for (int f = AIR_FINISH_STOP; f <= AIR_FINISH_PAUSE; f++)
    if (strcmp(air_finish_name((air_finish)f), s) == 0) return (air_finish)f;
  fail_msg("unknown finish %s", s);
  return AIR_FINISH_NONE;
}

/* Parses a .parts text (comments, blank lines and STATE skipped). */
static size_t parse_parts(const char *text, tpart **out) {
  size_t n = 0, cap = 0;
  tpart *v = NULL;
  const char *line = text;
  while (*line) {
    const char *end = strchr(line, '\n');
    if (end == NULL) end = line + strlen(line);
    if (line[0] != '#' && line != end && strncmp(line, "STATE", 5) != 0) {
      if (n == cap) {
        cap = cap ? cap * 2 : 16;
        v = realloc(v, cap * sizeof(*v));
        assert_non_null(v);
      }
      tpart *t = &v[n++];
      memset(t, 0, sizeof(*t));
      const char *s = line;
      size_t kn, a, b;
      char *kind = read_field(&s, &kn);
      air_part *p = &t->p;
      p->id = p->name = p->text = p->finish_raw = "";
      if (strcmp(kind, "START") == 0 || strcmp(kind, "ERROR") == 0) {
        p->kind = kind[0] == 'S' ? AIR_PART_START : AIR_PART_ERROR;
        t->s[0] = read_field(&s, &a);
        t->s[1] = read_field(&s, &b);
        if (p->kind == AIR_PART_START) {
          p->id = t->s[0], p->id_len = a;
          p->name = t->s[1], p->name_len = b;
        } else {
          p->name = t->s[0], p->name_len = a;
          p->text = t->s[1], p->text_len = b;
        }
      } else if (strcmp(kind, "TOOL_START") == 0) {
        p->kind = AIR_PART_TOOL_START;
        char *idx = read_field(&s, &a);
        p->index = atoi(idx);
        free(idx);
        t->s[0] = read_field(&s, &a);
        t->s[1] = read_field(&s, &b);
        p->id = t->s[0], p->id_len = a;
        p->name = t->s[1], p->name_len = b;
      } else if (strcmp(kind, "FINISH") == 0) {
        p->kind = AIR_PART_FINISH;
        char *f = read_field(&s, &a);
        p->finish = finish_from_name(f);
        free(f);
        t->raw = read_field(&s, &a);
        p->finish_raw = t->raw, p->finish_raw_len = a;
      } else if (strcmp(kind, "USAGE") == 0) {
        p->kind = AIR_PART_USAGE;
        char *x = read_field(&s, &a), *y = read_field(&s, &b);
        p->input_tokens = strtoull(x, NULL, 10);
        p->output_tokens = strtoull(y, NULL, 10);
        free(x);
        free(y);
      } else {
        if (strcmp(kind, "TEXT") == 0)
          p->kind = AIR_PART_TEXT;
        else if (strcmp(kind, "REASONING") == 0)
          p->kind = AIR_PART_REASONING;
        else if (strcmp(kind, "REFUSAL") == 0)
          p->kind = AIR_PART_REFUSAL;
        else if (strcmp(kind, "TOOL_DELTA") == 0)
          p->kind = AIR_PART_TOOL_DELTA;
        else
          fail_msg("unknown part %s", kind);
        char *idx = read_field(&s, &a);
        p->index = atoi(idx);
        free(idx);
        t->s[0] = read_field(&s, &a);
        p->text = t->s[0], p->text_len = a;
      }
      free(kind);
    }
    line = *end ? end + 1 : end;
  }
  *out = v;
  return n;
}

static void free_parts(tpart *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(v[i].s[0]);
    free(v[i].s[1]);
    free(v[i].raw);
  }
  free(v);
}

/* Keeps the lines of a .parts file that are compared (no comments). */
static void strip_comments(const char *text, air__buf *out) {
  const char *line = text;
  while (*line) {
    const char *end = strchr(line, '\n');
    size_t n = end ? (size_t)(end - line) : strlen(line);
    if (n > 0 && line[0] != '#') {
      assert_int_equal(air__buf_add(out, line, n), 0);
      assert_int_equal(air__buf_addc(out, '\n'), 0);
    }
    line += n + (end != NULL);
  }
}

/* ---- decoding
 * ------------------------------------------------------------------ */

typedef struct dec_run {
  air__decoder d;
  air__buf text;      /* printed parts */
  air__aggregate agg; /* the same parts aggregated */
  unsigned n;
  unsigned stop_at; /* cb returns 42 at this part (1-based); 0 never */
} dec_run;

static int on_part(void *data, const air_part *p) {
  dec_run *r = data;
  /* Strings must be readable in full during the callback. */
  if (p->text_len)
    assert_non_null(memchr(p->text, p->text[p->text_len - 1], p->text_len));
  print_part(&r->text, p);
  assert_int_equal(air__aggregate_add(&r->agg, p), 0);
  r->n++;
  return r->stop_at && r->n == r->stop_at ? 42 : 0;
}

static int on_event(void *data, const air__sse_event *ev) {
  dec_run *r = data;
  return ops->decode_event(&r->d, ev, on_part, r);
}

static void run_init(dec_run *r) {
  memset(r, 0, sizeof(*r));
  ops->decoder_init(&r->d);
  air__buf_init(&r->text, 64u << 20);
  air__aggregate_init(&r->agg);
}

static void run_cleanup(dec_run *r) {
  air__decoder_cleanup(&r->d);
  air__buf_cleanup(&r->text);
  air__aggregate_cleanup(&r->agg);
}

/* Decodes a stream fed in pieces of `piece` bytes (0: whole) into r. */
static void decode_stream(dec_run *r, const char *in, size_t n, size_t piece) {
  air__sse p;
  air__sse_init(&p, on_event, r);
  if (piece == 0) piece = n ? n : 1;
  for (size_t at = 0; at < n; at += piece) {
    size_t k = n - at < piece ? n - at : piece;
    assert_int_equal(air__sse_feed(&p, in + at, k), 0);
  }
  assert_int_equal(air__sse_finish(&p), 0);
  air__sse_cleanup(&p);
  add_fmt(&r->text, "STATE malformed=%u done=%d finished=%d\n", r->d.malformed,
          r->d.done, r->d.finished);
}

/* Feeds one event (type, data) to a decoder. */
static int feed_one(dec_run *r, const char *type, const char *data) {
  air__sse_event ev = {
      {type, strlen(type)}, {data, strlen(data)}, {"", 0}, -1, {"", 0}};
  return ops->decode_event(&r->d, &ev, on_part, r);
}

/* ---- encoding
 * ------------------------------------------------------------------ */

/* Encodes parts the way the README says: stop at the first ERROR with
 * encode_error_event, else encode_end. */
static void encode_parts(const tpart *v, size_t n, air__buf *out) {
  air__encoder e;
  ops->encoder_init(&e, NULL, 1718000000);
  bool errored = false;
  for (size_t i = 0; i < n && !errored; i++) {
    const air_part *p = &v[i].p;
    if (p->kind == AIR_PART_ERROR) {
      air_reason r =
          air__classify(200, p->name, NULL, p->text, AIR_TRANSPORT_OK);
      assert_int_equal(ops->encode_error_event(&e, r, p->text, out), 0);
      errored = true;
    } else {
      assert_int_equal(ops->encode_part(&e, p, out), 0);
    }
  }
  if (!errored) assert_int_equal(ops->encode_end(&e, out), 0);
}

/* Checks bytes are a well-formed Anthropic stream, event by event. */
typedef struct vstate {
  int events;
  int open;       /* open block, -1 none */
  int next;       /* next block index */
  char kind[256]; /* 't'ext, 'k' thinking, 'u' tool_use, by block */
  bool delta_seen, stopped, errored;
} vstate;

static int on_validate(void *data, const air__sse_event *ev) {
  vstate *v = data;
  json_error_t jerr;
  json_t *d = json_loadb(ev->data.p, ev->data.n, JSON_REJECT_DUPLICATES, &jerr);
  assert_true(json_is_object(d));
  const char *type = json_string_value(json_object_get(d, "type"));
  assert_non_null(type);
  assert_true(strlen(type) == ev->type.n &&
              memcmp(type, ev->type.p, ev->type.n) == 0);
  assert_false(v->stopped || v->errored);
  int idx = (int)json_integer_value(json_object_get(d, "index"));
  if (strcmp(type, "error") == 0) {
    json_t *e = json_object_get(d, "error");
    assert_true(json_is_string(json_object_get(e, "type")));
    assert_true(json_is_string(json_object_get(e, "message")));
    v->errored = true;
  } else if (v->events == 0) {
    assert_string_equal(type, "message_start");
    json_t *m = json_object_get(d, "message");
    assert_true(json_is_string(json_object_get(m, "id")));
    assert_true(json_is_string(json_object_get(m, "model")));
    assert_string_equal(json_string_value(json_object_get(m, "role")),
                        "assistant");
    assert_int_equal(json_array_size(json_object_get(m, "content")), 0);
    assert_true(json_is_integer(
        json_object_get(json_object_get(m, "usage"), "input_tokens")));
  } else if (strcmp(type, "content_block_start") == 0) {
    assert_int_equal(v->open, -1);
    assert_int_equal(idx, v->next);
    assert_true(idx < 256);
    const char *bt = json_string_value(
        json_object_get(json_object_get(d, "content_block"), "type"));
    assert_non_null(bt);
    v->kind[idx] = strcmp(bt, "text") == 0       ? 't'
                   : strcmp(bt, "thinking") == 0 ? 'k'
                                                 : 'u';
    assert_true(strcmp(bt, "text") == 0 || strcmp(bt, "thinking") == 0 ||
                strcmp(bt, "tool_use") == 0);
    v->open = idx;
    v->next++;
  } else if (strcmp(type, "content_block_delta") == 0) {
    assert_true(idx >= 0 && idx < v->next);
    /* Only a tool block may get deltas after its stop (interleaved calls). */
    if (idx != v->open) assert_int_equal(v->kind[idx], 'u');
    const char *dt =
        json_string_value(json_object_get(json_object_get(d, "delta"), "type"));
    assert_non_null(dt);
    assert_string_equal(dt, v->kind[idx] == 't'   ? "text_delta"
                            : v->kind[idx] == 'k' ? "thinking_delta"
                                                  : "input_json_delta");
  } else if (strcmp(type, "content_block_stop") == 0) {
    assert_int_equal(idx, v->open);
    v->open = -1;
  } else if (strcmp(type, "message_delta") == 0) {
    assert_int_equal(v->open, -1);
    const char *sr = json_string_value(
        json_object_get(json_object_get(d, "delta"), "stop_reason"));
    assert_non_null(sr);
    assert_true(strcmp(sr, "end_turn") == 0 || strcmp(sr, "max_tokens") == 0 ||
                strcmp(sr, "tool_use") == 0 || strcmp(sr, "refusal") == 0 ||
                strcmp(sr, "stop_sequence") == 0 ||
                strcmp(sr, "pause_turn") == 0 ||
                strcmp(sr, "model_context_window_exceeded") == 0);
    assert_true(json_is_integer(
        json_object_get(json_object_get(d, "usage"), "output_tokens")));
    v->delta_seen = true;
  } else if (strcmp(type, "message_stop") == 0) {
    assert_true(v->delta_seen);
    v->stopped = true;
  } else {
    fail_msg("unexpected event %s", type);
  }
  v->events++;
  json_decref(d);
  return 0;
}

static void validate_stream(const char *p, size_t n) {
  vstate v = {.open = -1};
  air__sse s;
  air__sse_init(&s, on_validate, &v);
  assert_int_equal(air__sse_feed(&s, p, n), 0);
  assert_int_equal(air__sse_finish(&s), 0);
  assert_int_equal(air__sse_pending(&s), 0);
  air__sse_cleanup(&s);
  assert_true(v.stopped || v.errored);
}

/* The encoder's bytes decode back into the same content. */
static void check_round_trip(const tpart *v, size_t n, const char *out,
                             size_t out_n) {
  air__buf text, reasoning;
  air__buf_init(&text, 1u << 20);
  air__buf_init(&reasoning, 1u << 20);
  air__aggregate want;
  air__aggregate_init(&want);
  for (size_t i = 0; i < n; i++) {
    const air_part *p = &v[i].p;
    if (p->kind == AIR_PART_ERROR) goto done; /* not a clean end */
    if (p->kind == AIR_PART_TEXT || p->kind == AIR_PART_REFUSAL)
      assert_int_equal(air__buf_add(&text, p->text, p->text_len), 0);
    if (p->kind == AIR_PART_REASONING)
      assert_int_equal(air__buf_add(&reasoning, p->text, p->text_len), 0);
    if (p->kind == AIR_PART_TOOL_START || p->kind == AIR_PART_TOOL_DELTA ||
        p->kind == AIR_PART_FINISH || p->kind == AIR_PART_USAGE)
      assert_int_equal(air__aggregate_add(&want, p), 0);
  }
  dec_run r;
  run_init(&r);
  decode_stream(&r, out, out_n, 0);
  assert_int_equal(r.d.malformed, 0);
  assert_true(r.d.done && r.d.finished);
  assert_bytes("round-trip text", r.agg.text.p ? r.agg.text.p : "",
               r.agg.text.n, text.p ? text.p : "", text.n);
  assert_bytes("round-trip reasoning",
               r.agg.reasoning.p ? r.agg.reasoning.p : "", r.agg.reasoning.n,
               reasoning.p ? reasoning.p : "", reasoning.n);
  assert_int_equal(r.agg.n_tools, want.n_tools);
  for (size_t i = 0; i < want.n_tools; i++) {
    assert_string_equal(r.agg.tools[i].id ? r.agg.tools[i].id : "",
                        want.tools[i].id ? want.tools[i].id : "");
    assert_string_equal(r.agg.tools[i].name ? r.agg.tools[i].name : "",
                        want.tools[i].name ? want.tools[i].name : "");
    assert_bytes(
        "round-trip args", r.agg.tools[i].args.p ? r.agg.tools[i].args.p : "",
        r.agg.tools[i].args.n, want.tools[i].args.p ? want.tools[i].args.p : "",
        want.tools[i].args.n);
  }
  air_finish f = want.finish == AIR_FINISH_NONE             ? AIR_FINISH_STOP
                 : want.finish == AIR_FINISH_CONTENT_FILTER ? AIR_FINISH_REFUSAL
                                                            : want.finish;
  assert_int_equal(r.agg.finish, f);
  assert_int_equal(r.agg.output_tokens, want.output_tokens);
  if (want.has_usage) assert_int_equal(r.agg.input_tokens, want.input_tokens);
  run_cleanup(&r);
done:
  air__aggregate_cleanup(&want);
  air__buf_cleanup(&text);
  air__buf_cleanup(&reasoning);
}

/* ---- the transcript runner
 * ----------------------------------------------------- */

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The base names of dir's NAME.parts files, sorted; NULL-terminated. */
static char **list_parts(const char *dir, size_t *count) {
  DIR *d = opendir(dir);
  size_t n = 0;
  char **v = calloc(1, sizeof(char *));
  assert_non_null(v);
  if (d != NULL) {
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
      size_t k = strlen(de->d_name);
      if (k > 6 && strcmp(de->d_name + k - 6, ".parts") == 0) {
        v = realloc(v, (n + 2) * sizeof(char *));
        assert_non_null(v);
        v[n] = malloc(k - 5);
        assert_non_null(v[n]);
        memcpy(v[n], de->d_name, k - 6);
        v[n][k - 6] = '\0';
        v[++n] = NULL;
      }
    }
    closedir(d);
  }
  qsort(v, n, sizeof(char *), cmp_str);
  *count = n;
  return v;
}

static void replay_decode(const char *base, const char *name) {
  char path[2048];
  size_t sse_n, parts_n;
  snprintf(path, sizeof(path), "%s.sse", base);
  char *sse = read_file(path, &sse_n);
  if (sse == NULL) return;
  snprintf(path, sizeof(path), "%s.parts", base);
  char *parts = read_file(path, &parts_n);
  assert_non_null(parts);
  air__buf want;
  air__buf_init(&want, 64u << 20);
  strip_comments(parts, &want);
  static const size_t pieces[] = {0, 1, 7};
  for (size_t k = 0; k < 3; k++) {
    dec_run r;
    run_init(&r);
    decode_stream(&r, sse, sse_n, pieces[k]);
    if (regen() && k == 0 &&
        (r.text.n != want.n || memcmp(r.text.p, want.p, want.n))) {
      fprintf(stderr, "writing %s (comments dropped)\n", path);
      write_file(path, r.text.p, r.text.n);
    } else if (!regen()) {
      char what[256];
      snprintf(what, sizeof(what), "%s parts (piece %zu)", name, pieces[k]);
      assert_bytes(what, r.text.p, r.text.n, want.p, want.n);
    }
    run_cleanup(&r);
  }
  air__buf_cleanup(&want);
  free(sse);
  free(parts);
}

/* may_write: AIR__TRANSCRIPT_WRITE may create or replace the .out file (only
 * in the folder this test owns). */
static void replay_encode(const char *base, const char *name, bool may_write) {
  char path[2048];
  size_t parts_n, want_n = 0;
  snprintf(path, sizeof(path), "%s.anthropic.out", base);
  bool have = file_exists(path);
  bool write = regen() && may_write;
  if (!have && !write) return;
  char out_path[2048];
  memcpy(out_path, path, sizeof(path));
  snprintf(path, sizeof(path), "%s.parts", base);
  char *text = read_file(path, &parts_n);
  assert_non_null(text);
  tpart *v;
  size_t n = parse_parts(text, &v);
  air__buf out;
  air__buf_init(&out, 64u << 20);
  encode_parts(v, n, &out);
  char *want = have ? read_file(out_path, &want_n) : NULL;
  if (write && (!have || want_n != out.n || memcmp(want, out.p, out.n) != 0)) {
    fprintf(stderr, "writing %s\n", out_path);
    write_file(out_path, out.p ? out.p : "", out.n);
  } else {
    char what[256];
    snprintf(what, sizeof(what), "%s.anthropic.out", name);
    assert_bytes(what, out.p, out.n, want, want_n);
  }
  validate_stream(out.p, out.n);
  check_round_trip(v, n, out.p, out.n);
  air__buf_cleanup(&out);
  free(want);
  free_parts(v, n);
  free(text);
}

static void test_transcripts(void **state) {
  (void)state;
  static const char *const dirs[] = {"anthropic", "openai"};
  size_t decoded = 0;
  for (size_t d = 0; d < 2; d++) {
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/tests/data/%s", AIR_SOURCE_DIR, dirs[d]);
    size_t n;
    char **names = list_parts(dir, &n);
    for (size_t i = 0; i < n; i++) {
      char base[1024];
      snprintf(base, sizeof(base), "%s/%s", dir, names[i]);
      if (d == 0) {
        replay_decode(base, names[i]);
        decoded++;
      }
      replay_encode(base, names[i], d == 0);
      free(names[i]);
    }
    free(names);
  }
  assert_true(decoded >= 13);
}

/* ---- decoder edge cases
 * -------------------------------------------------------- */

static void test_decode_block_bounds(void **state) {
  (void)state;
  dec_run r;
  run_init(&r);
  /* A tool_use block past the tracked range is malformed, not a crash. */
  feed_one(&r, "content_block_start",
           "{\"type\":\"content_block_start\",\"index\":128,\"content_block\":"
           "{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"n\",\"input\":{}}}");
  assert_int_equal(r.d.malformed, 1);
  assert_int_equal(r.n, 0);
  /* Negative and huge indices are malformed. */
  feed_one(&r, "content_block_delta",
           "{\"type\":\"content_block_delta\",\"index\":-1,\"delta\":"
           "{\"type\":\"text_delta\",\"text\":\"x\"}}");
  feed_one(&r, "content_block_delta",
           "{\"type\":\"content_block_delta\",\"index\":99999999999,\"delta\":"
           "{\"type\":\"text_delta\",\"text\":\"x\"}}");
  assert_int_equal(r.d.malformed, 3);
  /* Text on a block past the table still decodes (by the delta's type). */
  feed_one(&r, "content_block_delta",
           "{\"type\":\"content_block_delta\",\"index\":5000,\"delta\":"
           "{\"type\":\"text_delta\",\"text\":\"far\"}}");
  /* input_json_delta on a block never started: malformed; on a block past
   * the table: malformed. */
  feed_one(&r, "content_block_delta",
           "{\"type\":\"content_block_delta\",\"index\":7,\"delta\":"
           "{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}");
  feed_one(&r, "content_block_delta",
           "{\"type\":\"content_block_delta\",\"index\":500,\"delta\":"
           "{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}");
  assert_int_equal(r.d.malformed, 5);
  assert_string_equal(r.text.p, "TEXT 5000 \"far\"\n");
  /* More tool blocks than AIR__DECODER_MAX_TOOLS: the extra ones are
   * malformed, every ordinal handed out is in range. */
  air__buf_reset(&r.text);
  for (int i = 0; i < AIR__DECODER_MAX_TOOLS + 3; i++)
    feed_one(
        &r, "content_block_start",
        "{\"type\":\"content_block_start\",\"index\":3,\"content_block\":"
        "{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"n\",\"input\":{}}}");
  assert_int_equal(r.d.n_tools, AIR__DECODER_MAX_TOOLS);
  assert_int_equal(r.d.malformed, 5 + 3);
  assert_int_equal(r.agg.n_tools, AIR__DECODER_MAX_TOOLS);
  feed_one(
      &r, "content_block_delta",
      "{\"type\":\"content_block_delta\",\"index\":3,\"delta\":"
      "{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":1}\"}}");
  assert_string_equal(r.agg.tools[AIR__DECODER_MAX_TOOLS - 1].args.p,
                      "{\"a\":1}");
  run_cleanup(&r);
}

static void test_decode_flags_and_stop(void **state) {
  (void)state;
  dec_run r;
  run_init(&r);
  feed_one(&r, "message_delta",
           "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":null},"
           "\"usage\":{\"output_tokens\":4}}");
  assert_true(r.d.usage_only);
  assert_false(r.d.finished);
  assert_string_equal(r.text.p, "USAGE 0 4\n");
  feed_one(&r, "message_stop", "{\"type\":\"message_stop\"}");
  assert_false(r.d.usage_only);
  assert_true(r.d.terminator && r.d.done);
  feed_one(&r, "error",
           "{\"type\":\"error\",\"error\":{\"type\":\"api_error\","
           "\"message\":\"Internal \\\"server\\\" error\"}}");
  assert_false(r.d.terminator);
  assert_true(r.d.error_event);
  assert_true(r.d.done); /* sticky */
  /* Data that is not a JSON object: malformed, flags cleared. */
  feed_one(&r, "message_delta", "");
  assert_false(r.d.error_event);
  assert_int_equal(r.d.malformed, 1);
  /* ping: nothing, whatever its data; an unknown type: nothing. */
  feed_one(&r, "ping", "");
  feed_one(&r, "message", "{\"type\":\"brand_new\"}");
  feed_one(&r, "content_block_stop",
           "{\"type\":\"content_block_stop\",\"index\":0}");
  assert_int_equal(r.d.malformed, 1);
  /* The data's type wins over the event field. */
  feed_one(&r, "message", "{\"type\":\"message_stop\"}");
  assert_true(r.d.terminator);
  assert_string_equal(
      r.text.p,
      "USAGE 0 4\nERROR \"api_error\" \"Internal \\\"server\\\" error\"\n");
  run_cleanup(&r);

  /* The callback's non-zero value stops at once and is returned. */
  run_init(&r);
  r.stop_at = 1;
  int rc = feed_one(
      &r, "message_start",
      "{\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"x\","
      "\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}");
  assert_int_equal(rc, 42);
  assert_int_equal(r.n, 1);
  assert_true(r.d.started);
  run_cleanup(&r);

  /* A bad usage count makes message_start malformed: no START. */
  run_init(&r);
  feed_one(
      &r, "message_start",
      "{\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"x\","
      "\"usage\":{\"input_tokens\":-3,\"output_tokens\":1}}}");
  feed_one(&r, "message_start", "{\"type\":\"message_start\"}");
  assert_int_equal(r.d.malformed, 2);
  assert_int_equal(r.n, 0);
  assert_false(r.d.started);
  /* A tool_use start with its input given at once passes it as a delta. */
  feed_one(&r, "content_block_start",
           "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":"
           "{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"n\",\"input\":{"
           "\"k\": [1, 2]}}}");
  /* A text block opening with text yields it. */
  feed_one(&r, "content_block_start",
           "{\"type\":\"content_block_start\",\"index\":1,\"content_block\":"
           "{\"type\":\"text\",\"text\":\"Hi\"}}");
  assert_string_equal(
      r.text.p,
      "TOOL_START 0 \"t\" \"n\"\nTOOL_DELTA 0 \"{\\\"k\\\": [1, 2]}\"\n"
      "TEXT 1 \"Hi\"\n");
  run_cleanup(&r);
}

/* ---- decode_body
 * ------------------------------------------------------------------ */

static void test_decode_body(void **state) {
  (void)state;
  static const char body[] =
      "{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\","
      "\"model\":\"claude-x\",\"content\":["
      "{\"type\":\"thinking\",\"thinking\":\"Hmm\",\"signature\":\"s\"},"
      "{\"type\":\"text\",\"text\":\"Caf\\u00e9\"},"
      "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"f\","
      "\"input\":{\"a\":1,\"b\":[true,null]}},"
      "{\"type\":\"tool_use\",\"id\":\"toolu_2\",\"name\":\"g\",\"input\":{}}],"
      "\"stop_reason\":\"tool_use\",\"stop_sequence\":null,"
      "\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":5,"
      "\"output_tokens\":7}}";
  dec_run r;
  run_init(&r);
  assert_int_equal(ops->decode_body(&r.d, body, sizeof(body) - 1, on_part, &r),
                   0);
  assert_string_equal(r.text.p,
                      "START \"msg_1\" \"claude-x\"\n"
                      "REASONING 0 \"Hmm\"\n"
                      "TEXT 1 \"Café\"\n"
                      "TOOL_START 0 \"toolu_1\" \"f\"\n"
                      "TOOL_DELTA 0 \"{\\\"a\\\":1,\\\"b\\\":[true,null]}\"\n"
                      "TOOL_START 1 \"toolu_2\" \"g\"\n"
                      "TOOL_DELTA 1 \"{}\"\n"
                      "FINISH tool_calls \"tool_use\"\n"
                      "USAGE 15 7\n");
  assert_true(r.d.started && r.d.finished);
  run_cleanup(&r);

  static const char *const bad[] = {
      "",
      "not json",
      "[]",
      "{\"type\":\"error\",\"error\":{\"type\":\"api_error\"}}",
      "{\"id\":\"x\"}",
      "{\"type\":\"message\",\"content\":\"text\"}"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    run_init(&r);
    assert_int_equal(
        ops->decode_body(&r.d, bad[i], strlen(bad[i]), on_part, &r),
        AIR_EPARSE);
    assert_int_equal(r.n, 0);
    run_cleanup(&r);
  }
}

/* ---- air__request_build
 * --------------------------------------------------------------- */

static const air__build_opts base_opts = {.model = "claude-target",
                                          .default_max_tokens = 4096};

/* Builds from a caller body; returns the parsed upstream body (or NULL with
 * *rc set). *raw (optional) receives the bytes. */
static json_t *build(air_dialect dialect, const char *body,
                     const air__build_opts *o, int *rc, air_error *err,
                     char **raw) {
  air__request req;
  air_error perr;
  int prc = air__request_parse(dialect, body, strlen(body), &req, &perr);
  if (prc != 0) fail_msg("request_parse: %s", perr.message);
  air__buf out;
  air__buf_init(&out, 1u << 20);
  *rc = air__request_build(ops, &req, o, &out, err);
  air__request_cleanup(&req);
  json_t *v = NULL;
  if (*rc == 0) {
    v = json_loadb(out.p, out.n, JSON_REJECT_DUPLICATES, NULL);
    assert_non_null(v);
  } else {
    assert_int_equal(out.n, 0);
  }
  if (raw) {
    *raw = air__buf_take(&out, NULL);
  } else {
    air__buf_cleanup(&out);
  }
  return v;
}

static void assert_json(json_t *got, const char *want_text) {
  json_error_t jerr;
  json_t *want = json_loads(want_text, 0, &jerr);
  if (want == NULL) fail_msg("bad expected JSON: %s", jerr.text);
  if (!json_equal(got, want)) {
    char *g = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);
    char *w = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);
    fprintf(stderr, "JSON differs\n--- got ---\n%s\n--- want ---\n%s\n", g, w);
    free(g);
    free(w);
    fail();
  }
  json_decref(want);
}

static void test_build_same_dialect(void **state) {
  (void)state;
  int rc;
  air_error err;
  char *raw;
  /* Unknown fields pass through; model replaced; stream forced; default
   * max_tokens added at the end. */
  json_t *v = build(AIR_DIALECT_ANTHROPIC,
                    "{\"model\":\"smart\",\"messages\":[{\"role\":\"user\","
                    "\"content\":\"Hi\"}],\"stream\":false,\"temperature\":0.7,"
                    "\"x_future\":{\"deep\":[1,2.5,\"s\"]},\"top_k\":5}",
                    &base_opts, &rc, &err, &raw);
  assert_int_equal(rc, 0);
  assert_string_equal(
      raw,
      "{\"model\":\"claude-target\",\"messages\":[{\"role\":\"user\","
      "\"content\":\"Hi\"}],\"stream\":true,\"temperature\":0.7,"
      "\"x_future\":{\"deep\":[1,2.5,\"s\"]},\"top_k\":5,"
      "\"max_tokens\":4096}");
  free(raw);
  json_decref(v);

  /* The caller's max_tokens stays; an override wins over the caller's
   * fields, null removes one, and cannot change model or stream. */
  air__build_opts o = base_opts;
  o.override_json =
      "{\"max_tokens\":8192,\"top_k\":null,\"model\":\"evil\","
      "\"stream\":false,\"metadata\":{\"user_id\":\"u\"}}";
  o.default_max_tokens = 1000;
  v = build(AIR_DIALECT_ANTHROPIC,
            "{\"model\":\"smart\",\"messages\":[{\"role\":\"user\",\"content\":"
            "\"Hi\"}],\"max_tokens\":100,\"top_k\":5}",
            &o, &rc, &err, NULL);
  assert_int_equal(rc, 0);
  assert_json(v,
              "{\"model\":\"claude-target\",\"messages\":[{\"role\":\"user\","
              "\"content\":\"Hi\"}],\"max_tokens\":8192,\"stream\":true,"
              "\"metadata\":{\"user_id\":\"u\"}}");
  json_decref(v);

  /* A default of 0 means 4096; a bad override is an error. */
  o = base_opts;
  o.default_max_tokens = 0;
  v = build(
      AIR_DIALECT_ANTHROPIC,
      "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
      &o, &rc, &err, NULL);
  assert_int_equal(json_integer_value(json_object_get(v, "max_tokens")), 4096);
  json_decref(v);
  o.override_json = "[1]";
  v = build(
      AIR_DIALECT_ANTHROPIC,
      "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
      &o, &rc, &err, NULL);
  assert_null(v);
  assert_int_equal(rc, AIR_EINVAL);
  assert_string_equal(err.message, "override: expected a JSON object");

  /* An output buffer too small: an error and nothing written. */
  air__request req;
  static const char tiny[] =
      "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}";
  assert_int_equal(air__request_parse(AIR_DIALECT_ANTHROPIC, tiny,
                                      sizeof(tiny) - 1, &req, &err),
                   0);
  air__buf small;
  air__buf_init(&small, 20);
  assert_int_equal(air__request_build(ops, &req, &base_opts, &small, &err),
                   AIR_EINVAL);
  assert_int_equal(small.n, 0);
  assert_string_equal(err.message, "body: too big");
  air__buf_cleanup(&small);
  air__request_cleanup(&req);
}

static void test_build_from_openai(void **state) {
  (void)state;
  int rc;
  air_error err;
  char *raw;
  static const char body[] =
      "{\"model\":\"smart\",\"stream\":true,"
      "\"stream_options\":{\"include_usage\":true},"
      "\"messages\":["
      "{\"role\":\"system\",\"content\":\"You are terse.\"},"
      "{\"role\":\"developer\",\"content\":[{\"type\":\"text\",\"text\":\"Use "
      "metric.\"}]},"
      "{\"role\":\"user\",\"content\":\"What is the weather?\"},"
      "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Here:\"},"
      "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/"
      "png;base64,iVBORw0KGgo=\",\"detail\":\"low\"}},"
      "{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://example.com/"
      "a.jpg\"}}]},"
      "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":["
      "{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_"
      "weather\","
      "\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}},"
      "{\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"now\","
      "\"arguments\":\"\"}}]},"
      "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"18C\"},"
      "{\"role\":\"tool\",\"tool_call_id\":\"call_2\",\"content\":[{\"type\":"
      "\"text\",\"text\":\"noon\"}]},"
      "{\"role\":\"user\",\"content\":\"Thanks\"},"
      "{\"role\":\"assistant\",\"content\":\"You're "
      "welcome.\",\"name\":\"bot\"},"
      "{\"role\":\"user\",\"content\":\"\"},"
      "{\"role\":\"system\",\"content\":\"Late rule.\"}],"
      "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_"
      "weather\","
      "\"description\":\"Weather\",\"parameters\":{\"type\":\"object\","
      "\"properties\":{\"city\":{\"type\":\"string\"}}},\"strict\":true}},"
      "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}],"
      "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get_"
      "weather\"}},"
      "\"parallel_tool_calls\":false,"
      "\"stop\":\"END\",\"max_completion_tokens\":300,\"max_tokens\":50,"
      "\"temperature\":1.5,\"top_p\":0.9,\"user\":\"user-42\","
      "\"n\":1,\"presence_penalty\":0,\"logprobs\":false,\"store\":true,"
      "\"response_format\":{\"type\":\"text\"},\"seed\":null}";
  json_t *v = build(AIR_DIALECT_OPENAI, body, &base_opts, &rc, &err, &raw);
  if (rc != 0) fail_msg("build: %s", err.message);
  assert_json(
      v,
      "{\"model\":\"claude-target\",\"max_tokens\":300,"
      "\"system\":\"You are terse.\\n\\nUse metric.\\n\\nLate rule.\","
      "\"messages\":["
      "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"What is "
      "the weather?\"},"
      "{\"type\":\"text\",\"text\":\"Here:\"},"
      "{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":"
      "\"image/png\",\"data\":\"iVBORw0KGgo=\"}},"
      "{\"type\":\"image\",\"source\":{\"type\":\"url\",\"url\":\"https://"
      "example.com/a.jpg\"}}]},"
      "{\"role\":\"assistant\",\"content\":["
      "{\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":\"get_weather\","
      "\"input\":{\"city\":\"Paris\"}},"
      "{\"type\":\"tool_use\",\"id\":\"call_2\",\"name\":\"now\",\"input\":{}}]"
      "},"
      "{\"role\":\"user\",\"content\":["
      "{\"type\":\"tool_result\",\"tool_use_id\":\"call_1\",\"content\":"
      "\"18C\"},"
      "{\"type\":\"tool_result\",\"tool_use_id\":\"call_2\",\"content\":[{"
      "\"type\":\"text\",\"text\":\"noon\"}]},"
      "{\"type\":\"text\",\"text\":\"Thanks\"}]},"
      "{\"role\":\"assistant\",\"content\":\"You're welcome.\"}],"
      "\"tools\":[{\"name\":\"get_weather\",\"description\":\"Weather\","
      "\"input_schema\":{\"type\":\"object\",\"properties\":{\"city\":{"
      "\"type\":\"string\"}}}},"
      "{\"name\":\"now\",\"input_schema\":{\"type\":\"object\",\"properties\":{"
      "}}}],"
      "\"tool_choice\":{\"type\":\"tool\",\"name\":\"get_weather\",\"disable_"
      "parallel_tool_use\":true},"
      "\"stop_sequences\":[\"END\"],\"temperature\":1.0,\"top_p\":0.9,"
      "\"metadata\":{\"user_id\":\"user-42\"},\"stream\":true}");
  /* Key order: model, max_tokens, system, messages first, stream last. */
  static const char head[] =
      "{\"model\":\"claude-target\",\"max_tokens\":300,\"system\":";
  assert_memory_equal(raw, head, sizeof(head) - 1);
  assert_non_null(
      strstr(raw, "\"metadata\":{\"user_id\":\"user-42\"},\"stream\":true}"));
  free(raw);
  json_decref(v);
  v = build(
      AIR_DIALECT_OPENAI,
      "{\"temperature\":0.5,\"model\":\"m\",\"messages\":[{\"role\":\"system\","
      "\"content\":\"S\"},{\"role\":\"user\",\"content\":\"Hi\"}],\"max_"
      "tokens\":5}",
      &base_opts, &rc, &err, &raw);
  assert_int_equal(rc, 0);
  assert_string_equal(
      raw,
      "{\"model\":\"claude-target\",\"max_tokens\":5,\"system\":\"S\","
      "\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
      "\"temperature\":0.5,\"stream\":true}");
  free(raw);
  json_decref(v);

  /* Simple cases: a lone user string stays a string; stop arrays; the
   * temperature is clamped, not scaled; max_tokens alone is used; the
   * default fills in; tool_choice strings. */
  static const struct {
    const char *in, *want;
  } cases[] = {
      {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
       "\"temperature\":0.3,\"stop\":[\"a\",\"b\"],\"max_tokens\":20,\"tool_"
       "choice\":\"auto\"}",
       "{\"model\":\"claude-target\",\"max_tokens\":20,\"messages\":[{\"role\":"
       "\"user\","
       "\"content\":\"Hi\"}],\"temperature\":0.3,\"stop_sequences\":[\"a\","
       "\"b\"],"
       "\"tool_choice\":{\"type\":\"auto\"},\"stream\":true}"},
      {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
       "\"temperature\":2,\"tool_choice\":\"required\"}",
       "{\"model\":\"claude-target\",\"messages\":[{\"role\":\"user\","
       "\"content\":\"Hi\"}],"
       "\"temperature\":1.0,\"tool_choice\":{\"type\":\"any\"},\"stream\":true,"
       "\"max_tokens\":4096}"},
      {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
       "\"temperature\":0,\"tool_choice\":\"none\",\"parallel_tool_calls\":"
       "false}",
       "{\"model\":\"claude-target\",\"messages\":[{\"role\":\"user\","
       "\"content\":\"Hi\"}],"
       "\"temperature\":0.0,\"tool_choice\":{\"type\":\"none\"},\"stream\":"
       "true,\"max_tokens\":4096}"},
      /* parallel_tool_calls false without a tool_choice: auto, no parallel. */
      {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
       "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
       "\"parameters\":{\"type\":\"object\"}}}],\"parallel_tool_calls\":false}",
       "{\"model\":\"claude-target\",\"messages\":[{\"role\":\"user\","
       "\"content\":\"Hi\"}],"
       "\"tools\":[{\"name\":\"f\",\"input_schema\":{\"type\":\"object\"}}],"
       "\"tool_choice\":{\"type\":\"auto\",\"disable_parallel_tool_use\":true},"
       "\"stream\":true,\"max_tokens\":4096}"},
      /* A refusal part of an assistant is text; assistant messages merge. */
      {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"},"
       "{\"role\":\"assistant\",\"content\":[{\"type\":\"refusal\",\"refusal\":"
       "\"No.\"}]},"
       "{\"role\":\"assistant\",\"content\":\"Sorry.\"}]}",
       "{\"model\":\"claude-target\",\"messages\":[{\"role\":\"user\","
       "\"content\":\"Hi\"},"
       "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"No."
       "\"},"
       "{\"type\":\"text\",\"text\":\"Sorry.\"}]}],\"stream\":true,\"max_"
       "tokens\":4096}"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    v = build(AIR_DIALECT_OPENAI, cases[i].in, &base_opts, &rc, &err, NULL);
    if (rc != 0) fail_msg("case %zu: %s", i, err.message);
    assert_json(v, cases[i].want);
    json_decref(v);
  }
}

/* Fields that are only hints to a provider (docs/design.md §5) are dropped for
 * an Anthropic target, never a reason to skip it (no drop_params needed). */
static void test_build_hints_dropped(void **state) {
  (void)state;
  static const char *const hints[] = {"\"logprobs\":true",
                                      "\"top_logprobs\":3",
                                      "\"presence_penalty\":0.5",
                                      "\"frequency_penalty\":-1",
                                      "\"logit_bias\":{\"50256\":-100}",
                                      "\"seed\":7",
                                      "\"service_tier\":\"flex\"",
                                      "\"prompt_cache_key\":\"k\"",
                                      "\"safety_identifier\":\"s\""};
  for (size_t i = 0; i < sizeof(hints) / sizeof(hints[0]); i++) {
    char body[512];
    snprintf(body, sizeof(body),
             "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
             "\"Hi\"}],%s}",
             hints[i]);
    int rc;
    air_error err;
    json_t *v = build(AIR_DIALECT_OPENAI, body, &base_opts, &rc, &err, NULL);
    if (rc != 0) fail_msg("hint %s: %s", hints[i], err.message);
    assert_json(v,
                "{\"model\":\"claude-target\",\"messages\":[{\"role\":\"user\","
                "\"content\":\"Hi\"}],\"stream\":true,\"max_tokens\":4096}");
    json_decref(v);
  }
}

static void test_build_unsupported(void **state) {
  (void)state;
  static const struct {
    const char *extra; /* a field added to a minimal body */
    const char *field; /* the name the error must give */
  } cases[] = {
      {"\"n\":2", "n"},
      {"\"response_format\":{\"type\":\"grammar\"}", "response_format"},
      {"\"reasoning_effort\":\"extreme\"", "reasoning_effort"},
      {"\"x_unknown\":1", "x_unknown"},
      {"\"tool_choice\":{\"type\":\"allowed_tools\"}", "tool_choice"},
      {"\"tools\":[{\"type\":\"custom\",\"custom\":{\"name\":\"x\"}}]",
       "tools[0].type"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char body[512], want[128];
    snprintf(body, sizeof(body),
             "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
             "\"Hi\"}],%s}",
             cases[i].extra);
    int rc;
    air_error err;
    json_t *v = build(AIR_DIALECT_OPENAI, body, &base_opts, &rc, &err, NULL);
    assert_null(v);
    assert_int_equal(rc, AIR_ENOTSUP);
    assert_int_equal(err.code, AIR_ENOTSUP);
    snprintf(want, sizeof(want), "%s: not supported by anthropic upstreams",
             cases[i].field);
    assert_string_equal(err.message, want);
    /* drop_params: dropped, the rest translated. */
    air__build_opts o = base_opts;
    o.drop_params = true;
    v = build(AIR_DIALECT_OPENAI, body, &o, &rc, &err, NULL);
    if (rc != 0) fail_msg("drop %s: %s", cases[i].field, err.message);
    assert_json(v,
                "{\"model\":\"claude-target\",\"messages\":[{\"role\":\"user\","
                "\"content\":\"Hi\"}],\"stream\":true,\"max_tokens\":4096}");
    json_decref(v);
  }

  /* Unsupported message pieces, named by path; dropped with drop_params. */
  static const struct {
    const char *messages, *field, *dropped;
  } msg_cases[] = {
      {"[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
       "{\"type\":\"input_audio\",\"input_audio\":{\"data\":\"x\",\"format\":"
       "\"wav\"}}]}]",
       "messages[0].content[1].input_audio",
       "[{\"role\":\"user\",\"content\":\"a\"}]"},
      {"[{\"role\":\"function\",\"name\":\"f\",\"content\":\"1\"},"
       "{\"role\":\"user\",\"content\":\"b\"}]",
       "messages[0].role", "[{\"role\":\"user\",\"content\":\"b\"}]"},
      {"[{\"role\":\"system\",\"content\":[{\"type\":\"image_url\",\"image_"
       "url\":"
       "{\"url\":\"https://x/"
       "y.png\"}}]},{\"role\":\"user\",\"content\":\"c\"}]",
       "messages[0].content[0].image_url",
       "[{\"role\":\"user\",\"content\":\"c\"}]"},
  };
  for (size_t i = 0; i < sizeof(msg_cases) / sizeof(msg_cases[0]); i++) {
    char body[512], want[160];
    snprintf(body, sizeof(body), "{\"model\":\"m\",\"messages\":%s}",
             msg_cases[i].messages);
    int rc;
    air_error err;
    assert_null(build(AIR_DIALECT_OPENAI, body, &base_opts, &rc, &err, NULL));
    snprintf(want, sizeof(want), "%s: not supported by anthropic upstreams",
             msg_cases[i].field);
    assert_string_equal(err.message, want);
    air__build_opts o = base_opts;
    o.drop_params = true;
    json_t *v = build(AIR_DIALECT_OPENAI, body, &o, &rc, &err, NULL);
    assert_int_equal(rc, 0);
    json_t *want_msgs = json_loads(msg_cases[i].dropped, 0, NULL);
    assert_true(json_equal(json_object_get(v, "messages"), want_msgs));
    json_decref(want_msgs);
    json_decref(v);
  }
}

static void test_build_invalid(void **state) {
  (void)state;
  static const struct {
    const char *messages, *message;
  } cases[] = {
      {"[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"type\":"
       "\"function\","
       "\"function\":{\"name\":\"f\",\"arguments\":\"{bad\"}}]}]",
       "messages[0].tool_calls[0].function.arguments: invalid JSON"},
      {"[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"type\":"
       "\"function\","
       "\"function\":{\"name\":\"f\",\"arguments\":\"[1]\"}}]}]",
       "messages[0].tool_calls[0].function.arguments: expected a JSON object"},
      {"[{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"function\","
       "\"function\":{\"name\":\"f\"}}]}]",
       "messages[0].tool_calls[0].id: expected a string"},
      {"[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":"
       "{\"url\":\"data:image/png,rawbytes\"}}]}]",
       "messages[0].content[0].image_url.url: expected a base64 data URL "
       "(data:TYPE;base64,...)"},
      {"[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":"
       "{\"url\":\"ftp://x/y.png\"}}]}]",
       "messages[0].content[0].image_url.url: expected an http(s) or base64 "
       "data URL"},
      {"[{\"role\":\"tool\",\"content\":\"x\"}]",
       "messages[0].tool_call_id: expected a string"},
      {"[{\"role\":\"user\",\"content\":7}]",
       "messages[0].content: expected a string or an array"},
      {"[{\"role\":\"system\",\"content\":\"only a system prompt\"}]",
       "messages: no user or assistant message"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char body[512];
    snprintf(body, sizeof(body), "{\"model\":\"m\",\"messages\":%s}",
             cases[i].messages);
    int rc;
    air_error err;
    air__build_opts o = base_opts;
    o.drop_params = true; /* invalid input is not a field to drop */
    assert_null(build(AIR_DIALECT_OPENAI, body, &o, &rc, &err, NULL));
    assert_int_equal(rc, AIR_EINVAL);
    assert_string_equal(err.message, cases[i].message);
  }
}

/* ---- encoder corners
 * --------------------------------------------------------------- */

static void encode_all(air__encoder *e, const air_part *p, size_t n,
                       air__buf *out) {
  for (size_t i = 0; i < n; i++)
    assert_int_equal(ops->encode_part(e, &p[i], out), 0);
}

static void test_encoder_corners(void **state) {
  (void)state;
  air__encoder e;
  air__buf out;
  air__buf_init(&out, 1u << 20);

  /* Passthrough: only the terminator, once. */
  ops->encoder_init(&e, NULL, 1);
  e.passthrough = true;
  assert_int_equal(ops->encode_end(&e, &out), 0);
  assert_int_equal(ops->encode_end(&e, &out), 0);
  assert_string_equal(
      out.p, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");

  /* The error event after content: no block stop, no message_stop, and
   * encode_end writes nothing after it. Model from the caller's request. */
  air__buf_reset(&out);
  air__request req = {.dialect = AIR_DIALECT_ANTHROPIC, .model = "smart"};
  ops->encoder_init(&e, &req, 1);
  air_part text = {.kind = AIR_PART_TEXT, .text = "Hi \"you\"", .text_len = 8};
  encode_all(&e, &text, 1, &out);
  assert_int_equal(ops->encode_error_event(&e, AIR_REASON_TIMEOUT_CHUNK,
                                           "no data for 30000 ms", &out),
                   0);
  assert_int_equal(ops->encode_end(&e, &out), 0);
  assert_string_equal(
      out.p,
      "event: message_start\ndata: "
      "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_airetry\","
      "\"type\":\"message\",\"role\":\"assistant\",\"model\":\"smart\","
      "\"content\":[],"
      "\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":"
      "0,\"output_tokens\":0}}}\n\n"
      "event: content_block_start\ndata: "
      "{\"type\":\"content_block_start\",\"index\":0,"
      "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
      "event: content_block_delta\ndata: "
      "{\"type\":\"content_block_delta\",\"index\":0,"
      "\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi \\\"you\\\"\"}}\n\n"
      "event: error\ndata: "
      "{\"type\":\"error\",\"error\":{\"type\":\"timeout_error\","
      "\"message\":\"no data for 30000 ms\"}}\n\n");

  /* Parts with no wire form write nothing; an empty stream still ends as a
   * whole message. */
  air__buf_reset(&out);
  ops->encoder_init(&e, NULL, 1);
  air_part quiet[] = {
      {.kind = AIR_PART_START,
       .id = "m1",
       .id_len = 2,
       .name = "x",
       .name_len = 1},
      {.kind = AIR_PART_USAGE, .input_tokens = 5, .output_tokens = 0},
      {.kind = AIR_PART_TEXT, .text = "", .text_len = 0},
      {.kind = AIR_PART_ERROR,
       .name = "api_error",
       .name_len = 9,
       .text = "x",
       .text_len = 1},
      {.kind = AIR_PART_FINISH,
       .finish = AIR_FINISH_PAUSE,
       .finish_raw = "pause_turn",
       .finish_raw_len = 10},
  };
  encode_all(&e, quiet, 5, &out);
  assert_int_equal(out.n, 0);
  assert_int_equal(ops->encode_end(&e, &out), 0);
  assert_string_equal(
      out.p,
      "event: message_start\ndata: "
      "{\"type\":\"message_start\",\"message\":{\"id\":\"m1\","
      "\"type\":\"message\",\"role\":\"assistant\",\"model\":\"x\",\"content\":"
      "[],"
      "\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":"
      "5,\"output_tokens\":0}}}\n\n"
      "event: message_delta\ndata: "
      "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"pause_turn\","
      "\"stop_sequence\":null},\"usage\":{\"input_tokens\":5,\"output_tokens\":"
      "0}}\n\n"
      "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");

  /* A tool index out of range is refused; a full buffer leaves out as it
   * was. */
  air_part bad_tool = {.kind = AIR_PART_TOOL_START,
                       .index = AIR__DECODER_MAX_TOOLS};
  assert_int_equal(ops->encode_part(&e, &bad_tool, &out), AIR_EINVAL);
  air__buf small;
  air__buf_init(&small, 40);
  ops->encoder_init(&e, NULL, 1);
  assert_int_equal(ops->encode_part(&e, &text, &small), AIR_ETOOBIG);
  assert_int_equal(small.n, 0);
  air__buf_cleanup(&small);
  air__buf_cleanup(&out);
}

/* ---- non-streaming bodies
 * ---------------------------------------------------------- */

static void test_encode_response(void **state) {
  (void)state;
  air__aggregate a;
  air__aggregate_init(&a);
  air_part parts[] = {
      {.kind = AIR_PART_START,
       .id = "chatcmpl-9",
       .id_len = 10,
       .name = "gpt-4o",
       .name_len = 6},
      {.kind = AIR_PART_REASONING, .text = "Think", .text_len = 5},
      {.kind = AIR_PART_TEXT, .text = "Line\n\"q\"", .text_len = 8},
      {.kind = AIR_PART_REFUSAL, .text = " no", .text_len = 3},
      {.kind = AIR_PART_TOOL_START,
       .index = 0,
       .id = "call_1",
       .id_len = 6,
       .name = "f",
       .name_len = 1},
      {.kind = AIR_PART_TOOL_DELTA,
       .index = 0,
       .text = "{\"a\": [1, 2]}",
       .text_len = 13},
      {.kind = AIR_PART_TOOL_START,
       .index = 1,
       .id = "call_2",
       .id_len = 6,
       .name = "g",
       .name_len = 1},
      {.kind = AIR_PART_TOOL_DELTA,
       .index = 1,
       .text = "{\"cut",
       .text_len = 5},
      {.kind = AIR_PART_TOOL_START,
       .index = 2,
       .id = "call_3",
       .id_len = 6,
       .name = "h",
       .name_len = 1},
      {.kind = AIR_PART_FINISH,
       .finish = AIR_FINISH_TOOL_CALLS,
       .finish_raw = "tool_calls",
       .finish_raw_len = 10},
      {.kind = AIR_PART_USAGE, .input_tokens = 12, .output_tokens = 34},
  };
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
    assert_int_equal(air__aggregate_add(&a, &parts[i]), 0);
  air__buf out;
  air__buf_init(&out, 1u << 20);
  assert_int_equal(ops->encode_response(&a, &out), 0);
  json_t *v = json_loadb(out.p, out.n, JSON_REJECT_DUPLICATES, NULL);
  assert_non_null(v);
  assert_json(
      v,
      "{\"id\":\"chatcmpl-9\",\"type\":\"message\",\"role\":\"assistant\","
      "\"model\":\"gpt-4o\","
      "\"content\":[{\"type\":\"thinking\",\"thinking\":\"Think\","
      "\"signature\":\"\"},"
      "{\"type\":\"text\",\"text\":\"Line\\n\\\"q\\\" no\"},"
      "{\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":\"f\",\"input\":{"
      "\"a\":[1,2]}},"
      "{\"type\":\"tool_use\",\"id\":\"call_2\",\"name\":\"g\",\"input\":{}},"
      "{\"type\":\"tool_use\",\"id\":\"call_3\",\"name\":\"h\",\"input\":{}}],"
      "\"stop_reason\":\"tool_use\",\"stop_sequence\":null,"
      "\"usage\":{\"input_tokens\":12,\"output_tokens\":34}}");
  json_decref(v);
  air__aggregate_cleanup(&a);

  /* Empty: default id, end_turn, zero usage, empty content; stop_sequence
   * is kept from the raw reason. */
  air__aggregate_init(&a);
  air_part fin = {.kind = AIR_PART_FINISH,
                  .finish = AIR_FINISH_STOP,
                  .finish_raw = "stop_sequence",
                  .finish_raw_len = 13};
  assert_int_equal(air__aggregate_add(&a, &fin), 0);
  air__buf_reset(&out);
  assert_int_equal(ops->encode_response(&a, &out), 0);
  assert_string_equal(
      out.p,
      "{\"id\":\"msg_airetry\",\"type\":\"message\",\"role\":\"assistant\","
      "\"model\":\"\","
      "\"content\":[],\"stop_reason\":\"stop_sequence\",\"stop_sequence\":null,"
      "\"usage\":{\"input_tokens\":0,\"output_tokens\":0}}");
  air__aggregate_cleanup(&a);
  /* Finish mapping. */
  static const struct {
    air_finish f;
    const char *want;
  } m[] = {{AIR_FINISH_NONE, "end_turn"},
           {AIR_FINISH_STOP, "end_turn"},
           {AIR_FINISH_LENGTH, "max_tokens"},
           {AIR_FINISH_TOOL_CALLS, "tool_use"},
           {AIR_FINISH_CONTENT_FILTER, "refusal"},
           {AIR_FINISH_REFUSAL, "refusal"},
           {AIR_FINISH_CONTEXT, "model_context_window_exceeded"},
           {AIR_FINISH_PAUSE, "pause_turn"}};
  for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
    air__aggregate_init(&a);
    a.finish = m[i].f;
    air__buf_reset(&out);
    assert_int_equal(ops->encode_response(&a, &out), 0);
    v = json_loadb(out.p, out.n, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(v, "stop_reason")),
                        m[i].want);
    json_decref(v);
    air__aggregate_cleanup(&a);
  }
  air__buf_cleanup(&out);
}

static void test_encode_error_body(void **state) {
  (void)state;
  air_attempt log[2] = {
      {.n = 1,
       .target = "anthropic/claude-x",
       .reason = AIR_REASON_OVERLOADED,
       .status = 529,
       .message = "Overloaded",
       .request_id = "req_011",
       .ms = 120},
      {.n = 2,
       .target = "openai/gpt-4o",
       .reason = AIR_REASON_RATE_LIMIT,
       .status = 429,
       .message = "",
       .request_id = "",
       .ms = 35},
  };
  air__buf out;
  air__buf_init(&out, 1u << 20);
  assert_int_equal(
      ops->encode_error_body(429, AIR_REASON_RATE_LIMIT,
                             "every target \"failed\"", log, 2, &out),
      0);
  json_t *v = json_loadb(out.p, out.n, JSON_REJECT_DUPLICATES, NULL);
  assert_non_null(v);
  assert_json(
      v,
      "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\","
      "\"message\":\"every target \\\"failed\\\"\"},\"attempts\":["
      "{\"target\":\"anthropic/"
      "claude-x\",\"reason\":\"overloaded\",\"status\":529,"
      "\"ms\":120,\"request_id\":\"req_011\"},"
      "{\"target\":\"openai/gpt-4o\",\"reason\":\"rate_limit\",\"status\":429,"
      "\"ms\":35,\"request_id\":null}]}");
  json_decref(v);
  air__buf_reset(&out);
  assert_int_equal(ops->encode_error_body(504, AIR_REASON_TIMEOUT_TOTAL, NULL,
                                          NULL, 0, &out),
                   0);
  assert_string_equal(
      out.p,
      "{\"type\":\"error\",\"error\":{\"type\":\"timeout_error\","
      "\"message\":\"\"},\"attempts\":[]}");
  air__buf_cleanup(&out);
}

static void test_ops_table(void **state) {
  (void)state;
  assert_int_equal(ops->api, AIR_DIALECT_ANTHROPIC);
  assert_string_equal(ops->name, "anthropic");
  assert_string_equal(ops->path, "/v1/messages");
  assert_ptr_equal(air__dialect_get(AIR_DIALECT_ANTHROPIC), ops);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ops_table),
      cmocka_unit_test(test_transcripts),
      cmocka_unit_test(test_decode_block_bounds),
      cmocka_unit_test(test_decode_flags_and_stop),
      cmocka_unit_test(test_decode_body),
      cmocka_unit_test(test_build_same_dialect),
      cmocka_unit_test(test_build_from_openai),
      cmocka_unit_test(test_build_unsupported),
      cmocka_unit_test(test_build_hints_dropped),
      cmocka_unit_test(test_build_invalid),
      cmocka_unit_test(test_encoder_corners),
      cmocka_unit_test(test_encode_response),
      cmocka_unit_test(test_encode_error_body),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
