/*
 * The stream driver: commit on first content, failover before commit, final
 * after commit, judged complete answers, malformed accounting.
 */
#include "helpers.h"

#include <stdlib.h>

#define CFG(extra)                                                \
  "providers:\n"                                                  \
  "  - {name: p, api: openai, base_url: http://127.0.0.1:1/v1}\n" \
  "routes:\n"                                                     \
  "  - name: r\n"                                                 \
  "    targets: [p/a, p/b]\n"                                     \
  "    refusal: {phrases: [\"I'm sorry, but I cannot assist\"]}\n" extra

/* What each attempt streams: a list of steps per attempt. */
typedef enum step_kind {
  S_START,
  S_TEXT,
  S_TOOL,
  S_FINISH,
  S_ERROR,
  S_MALFORMED,
  S_END_OK,
  S_END_CUT
} step_kind;

typedef struct step {
  step_kind kind;
  const char *s;
  air_finish f;
} step;

#define K(k) \
  { k, NULL, AIR_FINISH_NONE }
#define TX(t) \
  { S_TEXT, t, AIR_FINISH_NONE }
#define TOOL(t) \
  { S_TOOL, t, AIR_FINISH_NONE }
#define FIN(f) \
  { S_FINISH, NULL, f }

typedef struct script {
  const step *att[4];
  unsigned calls;
  unsigned pushes_refused;
  char seen[1024]; /* what on_part delivered */
  unsigned commits;
  char commit_target[32];
  unsigned errors_delivered;
  int stop_after; /* on_part returns 1 after this many parts (0: never) */
  unsigned parts;
} script;

static int produce(void *data, const air_attempt_info *info,
                   air_stream_sink *sink, air_failure *f) {
  script *sc = data;
  (void)info;
  const step *st = sc->att[sc->calls++];
  for (;; st++) {
    air_part p;
    memset(&p, 0, sizeof(p));
    int rc = 0;
    switch (st->kind) {
      case S_START:
        p.kind = AIR_PART_START;
        p.name = "m";
        p.name_len = 1;
        rc = air_stream_push(sink, &p);
        break;
      case S_TEXT:
        p.kind = AIR_PART_TEXT;
        p.text = st->s;
        p.text_len = strlen(st->s);
        rc = air_stream_push(sink, &p);
        break;
      case S_TOOL:
        p.kind = AIR_PART_TOOL_START;
        p.name = st->s;
        p.name_len = strlen(st->s);
        rc = air_stream_push(sink, &p);
        break;
      case S_FINISH:
        p.kind = AIR_PART_FINISH;
        p.finish = st->f;
        rc = air_stream_push(sink, &p);
        break;
      case S_ERROR:
        p.kind = AIR_PART_ERROR;
        p.name = "overloaded_error";
        p.name_len = 16;
        p.text = "Overloaded";
        p.text_len = 10;
        rc = air_stream_push(sink, &p);
        break;
      case S_MALFORMED:
        rc = air_stream_malformed(sink);
        break;
      case S_END_OK:
        return 0;
      case S_END_CUT:
        f->reason = AIR_REASON_NETWORK;
        f->message = "connection closed";
        return 1;
    }
    if (rc != 0) {
      sc->pushes_refused++;
      /* What we report now is ignored by the driver. */
      f->reason = AIR_REASON_BAD_REQUEST;
      return 1;
    }
  }
}

static void append(script *sc, const char *s, size_t n) {
  size_t have = strlen(sc->seen);
  if (have + n + 1 < sizeof(sc->seen)) {
    memcpy(sc->seen + have, s, n);
    sc->seen[have + n] = '\0';
  }
}

static int on_part(void *data, const air_part *p) {
  script *sc = data;
  sc->parts++;
  switch (p->kind) {
    case AIR_PART_TEXT:
      append(sc, p->text, p->text_len);
      break;
    case AIR_PART_START:
      append(sc, "<", 1);
      break;
    case AIR_PART_FINISH:
      append(sc, ">", 1);
      break;
    case AIR_PART_TOOL_START:
      append(sc, "T", 1);
      break;
    case AIR_PART_ERROR:
      sc->errors_delivered++;
      append(sc, "!", 1);
      append(sc, p->name, p->name_len);
      break;
    default:
      break;
  }
  return sc->stop_after && (int)sc->parts >= sc->stop_after ? 1 : 0;
}

static void on_commit(void *data, const char *target, unsigned attempt) {
  script *sc = data;
  sc->commits++;
  snprintf(sc->commit_target, sizeof(sc->commit_target), "%s#%u", target,
           attempt);
}

static int run(const char *yaml, script *sc, air_attempt **log, size_t *n) {
  air_config *cfg = test_config(yaml);
  test_clock tc = {.now = 1000};
  air_clock clk = test_clock_iface(&tc);
  air_observers obs = AIR_OBSERVERS_INIT;
  obs.data = sc;
  obs.on_commit = on_commit;
  air_stream_opts o = AIR_STREAM_OPTS_INIT;
  o.fn = produce;
  o.data = sc;
  o.on_part = on_part;
  o.observers = &obs;
  o.clock = &clk;
  int rc = air_stream(cfg, NULL, "r", &o, log, n, NULL);
  air_config_free(cfg);
  return rc;
}

static void test_refusal_fails_over_with_nothing_sent(void **s) {
  (void)s;
  const step a[] = {K(S_START), TX("I'm sorry, but "), TX("I cannot assist."),
                    K(S_END_OK)};
  const step b[] = {K(S_START), TX("Paris"), TX(" is the capital."),
                    FIN(AIR_FINISH_STOP), K(S_END_OK)};
  script sc = {.att = {a, b}};
  air_attempt *log = NULL;
  size_t n = 0;
  assert_int_equal(run(CFG(""), &sc, &log, &n), 0);
  assert_string_equal(sc.seen, "<Paris is the capital.>");
  assert_int_equal(sc.commits, 1);
  assert_string_equal(sc.commit_target, "p/b#2");
  assert_int_equal(sc.pushes_refused, 1);
  assert_int_equal(n, 2);
  assert_int_equal(log[0].reason, AIR_REASON_REFUSAL);
  assert_string_equal(log[1].target, "p/b");
  air_attempt_log_free(log, n);
}

static void test_failure_after_commit_is_final(void **s) {
  (void)s;
  const step a[] = {K(S_START), TX("Hel"), K(S_END_CUT)};
  const step b[] = {TX("never"), K(S_END_OK)};
  script sc = {.att = {a, b}};
  air_attempt *log = NULL;
  size_t n = 0;
  assert_int_equal(run(CFG(""), &sc, &log, &n), AIR_EUPSTREAM);
  /* The committed text, then one error; no second attempt. */
  assert_string_equal(sc.seen, "<Hel!network");
  assert_int_equal(sc.calls, 1);
  assert_int_equal(sc.errors_delivered, 1);
  assert_int_equal(n, 1);
  assert_int_equal(log[0].reason, AIR_REASON_NETWORK);
  air_attempt_log_free(log, n);
}

static void test_error_event_before_and_after_commit(void **s) {
  (void)s;
  /* Before commit: overloaded, the policy retries the same target once. */
  const step a[] = {K(S_START), K(S_ERROR), K(S_END_OK)};
  const step b[] = {TX("ok"), K(S_ERROR), TX("x"), K(S_END_OK)};
  script sc = {.att = {a, b}};
  air_attempt *log = NULL;
  size_t n = 0;
  assert_int_equal(run(CFG(""), &sc, &log, &n), AIR_EUPSTREAM);
  assert_int_equal(n, 2);
  assert_int_equal(log[0].reason, AIR_REASON_OVERLOADED);
  assert_string_equal(log[1].target, "p/a");
  assert_int_equal(log[1].reason, AIR_REASON_OVERLOADED);
  /* After commit: delivered once as the final error, the stream stops. */
  assert_string_equal(sc.seen, "ok!overloaded");
  assert_int_equal(sc.errors_delivered, 1);
  air_attempt_log_free(log, n);
}

static void test_complete_mode_returns_judged_answer(void **s) {
  (void)s;
  const step a[] = {TX("first cut"), FIN(AIR_FINISH_LENGTH), K(S_END_OK)};
  const step b[] = {TX("second cut"), FIN(AIR_FINISH_LENGTH), K(S_END_OK)};
  script sc = {.att = {a, b}};
  air_attempt *log = NULL;
  size_t n = 0;
  int rc = run(CFG("    commit: complete\n"
                   "    rules: [{on: [length], action: switch}]\n"),
               &sc, &log, &n);
  /* Both judged `length`; the last one is the answer, unchanged, once. */
  assert_int_equal(rc, 0);
  assert_string_equal(sc.seen, "second cut>");
  assert_int_equal(sc.commits, 1);
  assert_int_equal(n, 2);
  assert_int_equal(log[0].reason, AIR_REASON_LENGTH);
  assert_int_equal(log[1].reason, AIR_REASON_LENGTH);
  air_attempt_log_free(log, n);
}

static void test_malformed_limit_and_caller_stop(void **s) {
  (void)s;
  const step a[] = {K(S_START),     K(S_MALFORMED), K(S_MALFORMED),
                    K(S_MALFORMED), K(S_MALFORMED), TX("late"),
                    K(S_END_OK)};
  const step b[] = {TOOL("lookup"), TX("a"), TX("b"), K(S_END_OK)};
  script sc = {.att = {a, b}, .stop_after = 2};
  air_attempt *log = NULL;
  size_t n = 0;
  /* The fourth malformed event (max 3) fails attempt 1; attempt 2 commits on
   * a tool call; the caller stops after two parts: a cancel. */
  assert_int_equal(run(CFG(""), &sc, &log, &n), AIR_ECANCELED);
  assert_int_equal(log[0].reason, AIR_REASON_MALFORMED);
  assert_int_equal(sc.parts, 2);
  assert_string_equal(sc.seen, "Ta");
  air_attempt_log_free(log, n);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_refusal_fails_over_with_nothing_sent),
      cmocka_unit_test(test_failure_after_commit_is_final),
      cmocka_unit_test(test_error_event_before_and_after_commit),
      cmocka_unit_test(test_complete_mode_returns_judged_answer),
      cmocka_unit_test(test_malformed_limit_and_caller_stop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
