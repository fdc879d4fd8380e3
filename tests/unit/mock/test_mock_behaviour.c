/*
 * The mock's pure parts (src/mock/behaviour.c, answer.c, log.c): script
 * parsing and its diagnostics (line:column), the model-name convention, the
 * choice of a behaviour by attempt, `then`, flap window and k, the log's
 * fault string, the answer's tokens and prefill, and the bounded log.
 * No sockets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mock_int.h"

/* ---- helpers ---------------------------------------------------------------
 */

static air__mock_script *load(const char *yaml) {
  air__mock_script *s = NULL;
  air__mock_diag d;
  int rc = air__mock_script_parse(yaml, strlen(yaml), &s, &d);
  if (rc != 0)
    fprintf(stderr, "unexpected: %d:%d: %s\n", d.line, d.column, d.message);
  assert_int_equal(rc, 0);
  assert_non_null(s);
  return s;
}

static const air__mock_model *model(const air__mock_script *s,
                                    const char *name) {
  const air__mock_model *m = air__mock_script_find(s, name, strlen(name));
  assert_non_null(m);
  return m;
}

/* The fault string of model m at attempt a and time t. */
static void fault_is(const air__mock_model *m, unsigned a, uint64_t t,
                     const char *want) {
  air__mock_beh b;
  air__mock_select(m, a, t, &b);
  air__buf out;
  air__buf_init(&out, 1024);
  assert_int_equal(air__mock_describe(&b, &out), 0);
  if (strcmp(out.p, want) != 0)
    fprintf(stderr, "attempt %u at %llu: got '%s', want '%s'\n", a,
            (unsigned long long)t, out.p, want);
  assert_string_equal(out.p, want);
  air__buf_cleanup(&out);
}

/* ---- the script ------------------------------------------------------------
 */

static const char doc_script[] =
    "defaults: {tokens: 8, delay_ms: 0}   # merged under every model entry\n"
    "models:\n"
    "  primary:\n"
    "    tokens: 12\n"
    "    delay_ms: 5\n"
    "    attempts:                  # attempt 1, 2, 3, ...\n"
    "      - {status: 429, retry_after: 1}\n"
    "      - {status: 529}\n"
    "      - {first_delay_ms: 60000}  # silent: no content\n"
    "      - {refusal: true}\n"
    "    then: {}                   # every later attempt (default: healthy)\n"
    "  flaky:\n"
    "    flap: {from_ms: 1000, to_ms: 3000, fault: {status: 503}}\n"
    "  fallback: {}\n";

static void test_doc_script(void **state) {
  (void)state;
  air__mock_script *s = load(doc_script);
  assert_int_equal(s->n_models, 3);
  assert_null(air__mock_script_find(s, "nope", 4));
  assert_null(air__mock_script_find(s, "primar", 6));

  const air__mock_model *p = model(s, "primary");
  air__mock_beh b;
  air__mock_select(p, 1, 0, &b);
  assert_int_equal(b.status, 429);
  assert_string_equal(b.retry_after, "1");
  assert_int_equal(b.tokens, 12); /* the entry's over the defaults' */
  assert_int_equal(b.delay_ms, 5);
  fault_is(p, 1, 0, "status=429"); /* retry_after is no fault of its own */
  fault_is(p, 2, 0, "status=529");
  fault_is(p, 3, 0, "first_delay_ms=60000");
  fault_is(p, 4, 0, "refusal");
  fault_is(p, 5, 0, "ok");
  fault_is(p, 500, 0, "ok");
  air__mock_select(p, 4, 0, &b);
  assert_string_equal(b.refusal, AIR__MOCK_REFUSAL_TEXT);
  air__mock_select(p, 5, 0, &b);
  assert_int_equal(b.tokens, 12);

  const air__mock_model *f = model(s, "flaky");
  fault_is(f, 1, 0, "ok");
  fault_is(f, 2, 999, "ok");
  fault_is(f, 3, 1000, "status=503");
  fault_is(f, 4, 2999, "status=503");
  fault_is(f, 5, 3000, "ok");
  air__mock_select(f, 1, 0, &b);
  assert_int_equal(b.tokens, 8); /* from the defaults */

  fault_is(model(s, "fallback"), 1, 0, "ok");
  air__mock_script_free(s);
}

static void test_defaults_and_layers(void **state) {
  (void)state;
  air__mock_script *s = load(
      "defaults:\n"
      "  attempts: [{status: 500}]\n"
      "  delay_ms: 7\n"
      "  reject_prefill: true\n"
      "models:\n"
      "  inherit: {}\n"
      "  own:\n"
      "    status: 502\n" /* every attempt ... */
      "    attempts: [{reset: true}, {}]\n"
      "    then: {status: 504}\n" /* ... unless a later layer sets it */
      "  windowed:\n"
      "    attempts: [{cut_after: 3}]\n"
      "    flap: {to_ms: 100, fault: {stall_after: 1, no_done: true}}\n"
      "  empty:\n"
      "  texts:\n"
      "    answer: 'a b'\n"
      "    refusal: \"No.\"\n"
      "    finish: content_filter\n"
      "    headers: {x-a: '1', X-B: two}\n"
      "    retry_after_ms: 1500.5\n"
      "    code: insufficient_quota\n"
      "    body: '{}'\n");
  fault_is(model(s, "inherit"), 1, 0, "status=500");
  fault_is(model(s, "inherit"), 2, 0, "ok");
  air__mock_beh b;
  air__mock_select(model(s, "inherit"), 2, 0, &b);
  assert_int_equal(b.delay_ms, 7);
  assert_true(b.reject_prefill);

  const air__mock_model *o = model(s, "own");
  fault_is(o, 1, 0, "status=502,reset");
  fault_is(o, 2, 0, "status=502");
  fault_is(o, 3, 0, "status=504");

  const air__mock_model *w = model(s, "windowed");
  fault_is(w, 1, 0, "cut_after=3,stall_after=1,no_done");
  fault_is(w, 1, 100, "cut_after=3");
  fault_is(w, 2, 99, "stall_after=1,no_done");
  fault_is(model(s, "empty"), 1, 0, "status=500"); /* the defaults' list */
  fault_is(model(s, "empty"), 2, 0, "ok");

  air__mock_select(model(s, "texts"), 2, 0, &b); /* after the defaults' list */
  assert_string_equal(b.answer, "a b");
  assert_string_equal(b.refusal, "No.");
  assert_int_equal(b.finish, AIR_FINISH_CONTENT_FILTER);
  assert_int_equal(b.n_headers, 2);
  assert_string_equal(b.headers[1].name, "X-B");
  assert_string_equal(b.headers[1].value, "two");
  assert_string_equal(b.retry_after_ms, "1500.5");
  assert_string_equal(b.code, "insufficient_quota");
  assert_string_equal(b.body, "{}");
  fault_is(model(s, "texts"), 2, 0, "refusal,finish=content_filter");
  air__mock_script_free(s);
}

static void test_empty_scripts(void **state) {
  (void)state;
  const char *ok[] = {"", "# nothing\n", "---\n", "models:\n",
                      "defaults: {}\n"};
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
    air__mock_script *s = load(ok[i]);
    assert_int_equal(s->n_models, 0);
    air__mock_script_free(s);
  }
}

typedef struct bad_case {
  const char *yaml;
  int line, col;
  const char *msg; /* a substring of the message */
} bad_case;

static const bad_case bad[] = {
    {"models:\n  a: {statu: 429}\n", 2, 7, "models.a.statu: unknown key"},
    {"models:\n  a:\n    status: 200\n", 3, 13, "400..599"},
    {"models:\n  a:\n    status: abc\n", 3, 13, "400..599"},
    {"models:\n  a:\n    attempts: 5\n", 3, 15, "expected a list"},
    {"models:\n  a:\n    attempts:\n      - {reject_prefill: true}\n", 4, 10,
     "only allowed in a model entry"},
    {"models:\n  a:\n    then: {attempts: []}\n", 3, 12,
     "only allowed in a model entry"},
    {"model:\n  a: {}\n", 1, 1, "unknown key"},
    {"- a\n- b\n", 1, 3, "must be a map"},
    {"models: [a, b]\n", 1, 10, "expected a map"},
    {"models:\n  a: 5\n", 2, 6, "expected a map"},
    {"models:\n  a: {tokens: -1}\n", 2, 15, "0..100000"},
    {"models:\n  a: {tokens: 100001}\n", 2, 15, "0..100000"},
    {"models:\n  a: {delay_ms: 1.5}\n", 2, 17, "milliseconds"},
    {"models:\n  a: {malformed_at: 0}\n", 2, 21, "1..1000000"},
    {"models:\n  a: {retry_after: soon}\n", 2, 20, "non-negative number"},
    {"models:\n  a: {reset: yes}\n", 2, 14, "true or false"},
    {"models:\n  a: {finish: tool_calls}\n", 2, 15, "stop, length"},
    {"models:\n  a: {refusal: [1]}\n", 2, 17, "expected a scalar"},
    {"models:\n  a: {headers: {\"a b\": x}}\n", 2, 17, "HTTP token"},
    {"models:\n  a: {headers: [x]}\n", 2, 17, "map of header"},
    {"models:\n  a:\n    flap: {from_ms: 5, to_ms: 1, fault: {}}\n", 3, 21,
     "from_ms is after to_ms"},
    {"models:\n  a:\n    flap: {to_ms: 1}\n", 3, 5, "fault: required"},
    {"models:\n  a:\n    flap: {from_ms: 1, fault: {}}\n", 3, 5,
     "to_ms: required"},
    {"models:\n  a:\n    flap: {to_ms: 9, fault: {}, k: 2}\n", 3, 33,
     "unknown key"},
    {"models:\n  a:\n    flap: {to_ms: 9, fault: {hang: 1}}\n", 3, 36,
     "true or false"},
    {"models:\n  a:\n    attempts:\n      - {}\n      -\n", 3, 5,
     "expected a behaviour map"},
    {"models:\n  a: {status: 429\n", 3, 1, "YAML syntax error"},
    {"models:\n  a: {}\n  a: {}\n", 3, 3, "YAML syntax error"},
};

static void test_script_errors(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    air__mock_script *s = NULL;
    air__mock_diag d;
    int rc = air__mock_script_parse(bad[i].yaml, strlen(bad[i].yaml), &s, &d);
    if (rc != AIR_ECONFIG || d.line != bad[i].line || d.column != bad[i].col ||
        strstr(d.message, bad[i].msg) == NULL)
      fprintf(stderr, "case %zu: rc %d, %d:%d: %s\n", i, rc, d.line, d.column,
              d.message);
    assert_int_equal(rc, AIR_ECONFIG);
    assert_null(s);
    assert_int_equal(d.line, bad[i].line);
    assert_int_equal(d.column, bad[i].col);
    assert_non_null(strstr(d.message, bad[i].msg));
  }
}

static void test_script_limits(void **state) {
  (void)state;
  air__mock_script *s = NULL;
  air__mock_diag d;
  assert_int_equal(
      air__mock_script_parse("x", AIR__MOCK_MAX_SCRIPT_BYTES + 1, &s, &d),
      AIR_ETOOBIG);
  const char nul[] = "models:\n  a: {}\0\n";
  assert_int_equal(air__mock_script_parse(nul, sizeof(nul) - 1, &s, &d),
                   AIR_ECONFIG);
  assert_int_equal(d.line, 2);
  assert_int_equal(d.column, 8);
  /* Aliases that expand past the node budget end in an error, not in a
   * long walk and a large allocation. */
  air__buf y;
  air__buf_init(&y, 1 << 20);
  air__buf_puts(&y, "defaults: {attempts: &x [");
  for (int i = 0; i < 1000; i++) air__buf_puts(&y, i ? ", {}" : "{}");
  air__buf_puts(&y, "]}\nmodels:\n");
  for (int i = 0; i < 300; i++) {
    char line[64];
    snprintf(line, sizeof(line), "  m%d: {attempts: *x}\n", i);
    air__buf_puts(&y, line);
  }
  int rc = air__mock_script_parse(y.p, y.n, &s, &d);
  assert_int_equal(rc, AIR_ECONFIG);
  assert_non_null(strstr(d.message, "expands to more than"));
  air__buf_cleanup(&y);
}

/* ---- the model-name convention ----------------------------------------------
 */

static void test_name_convention(void **state) {
  (void)state;
  char st[256];
  air__mock_model m;
  air__mock_diag d;
  const char *n1 = "gpt-4o@429@ra=1@k=2";
  assert_int_equal(air__mock_parse_name(n1, strlen(n1), st, &m, &d), 0);
  assert_string_equal(m.name, "gpt-4o");
  fault_is(&m, 1, 0, "status=429");
  fault_is(&m, 2, 99999, "status=429");
  fault_is(&m, 3, 0, "ok");
  air__mock_beh b;
  air__mock_select(&m, 2, 0, &b);
  assert_string_equal(b.retry_after, "1");
  air__mock_select(&m, 3, 0, &b);
  assert_false(b.set & AIR__MOCK_K_RETRY_AFTER);

  const char *n2 = "m@tokens=3@delay=5@noprefill@503@flap=100-200";
  assert_int_equal(air__mock_parse_name(n2, strlen(n2), st, &m, &d), 0);
  fault_is(&m, 1, 99, "ok");
  fault_is(&m, 2, 100, "status=503");
  fault_is(&m, 3, 199, "status=503");
  fault_is(&m, 4, 200, "ok");
  air__mock_select(&m, 4, 200, &b); /* answer settings apply always */
  assert_int_equal(b.tokens, 3);
  assert_int_equal(b.delay_ms, 5);
  assert_true(b.reject_prefill);

  const char *n3 =
      "x@reset@hang@nodone@refuse@length@silent=10@slow=20@cut=1@stall=2"
      "@bad=3@overload=4@ram=250@code=insufficient_quota";
  assert_int_equal(air__mock_parse_name(n3, strlen(n3), st, &m, &d), 0);
  fault_is(&m, 1, 0,
           "reset,hang,headers_delay_ms=10,first_delay_ms=20,cut_after=1,"
           "stall_after=2,malformed_at=3,no_done,refusal,finish=length,"
           "overload_after=4");
  air__mock_select(&m, 1, 0, &b);
  assert_string_equal(b.retry_after_ms, "250");
  assert_string_equal(b.code, "insufficient_quota");

  const char *n4 = "x@filter@k=1@flap=0-10";
  assert_int_equal(air__mock_parse_name(n4, strlen(n4), st, &m, &d), 0);
  fault_is(&m, 1, 5, "finish=content_filter");
  fault_is(&m, 2, 5, "ok");  /* k */
  fault_is(&m, 1, 10, "ok"); /* window */

  const char *plain = "gpt-4o";
  assert_int_equal(air__mock_parse_name(plain, 6, st, &m, &d), 0);
  assert_string_equal(m.name, "gpt-4o");
  fault_is(&m, 1, 0, "ok");

  const char *bad_names[] = {
      "m@foo",   "m@",        "m@@429",     "m@200",
      "m@ra=x",  "m@k=0",     "m@flap=5-1", "m@bad=0",
      "m@cut=",  "m@reset=1", "m@1000",     "m@tokens=100001",
      "m@flap=5"};
  for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
    int rc =
        air__mock_parse_name(bad_names[i], strlen(bad_names[i]), st, &m, &d);
    if (rc != AIR_EINVAL) fprintf(stderr, "accepted %s\n", bad_names[i]);
    assert_int_equal(rc, AIR_EINVAL);
    assert_non_null(strstr(d.message, "model m@"));
  }
  assert_int_equal(air__mock_parse_name("m@foo", 5, st, &m, &d), AIR_EINVAL);
  assert_non_null(strstr(d.message, "'@foo'"));
}

static void test_convention_over_defaults(void **state) {
  (void)state;
  air__mock_script *s = load("defaults: {tokens: 2, status: 500}\n");
  char st[64];
  air__mock_model conv;
  assert_int_equal(air__mock_parse_name("n@503@k=1", 9, st, &conv, NULL), 0);
  air__mock_model m = air__mock_model_merge(&s->defaults, &conv);
  fault_is(&m, 1, 0, "status=503");
  fault_is(&m, 2, 0, "status=500");
  air__mock_beh b;
  air__mock_select(&m, 2, 0, &b);
  assert_int_equal(b.tokens, 2);
  air__mock_script_free(s);
}

/* ---- the answer
 * --------------------------------------------------------------- */

static void tokens_are(const air__mock_answer *a, const char *const *want,
                       size_t n) {
  assert_int_equal(a->last - a->first, n);
  for (size_t i = 0; i < n; i++) {
    size_t t = a->first + i;
    size_t from = t == 0 ? 0 : a->ends[t - 1];
    size_t len = a->ends[t] - from;
    if (len != strlen(want[i]) || memcmp(a->text.p + from, want[i], len) != 0)
      fprintf(stderr, "token %zu: '%.*s', want '%s'\n", i, (int)len,
              a->text.p + from, want[i]);
    assert_int_equal(len, strlen(want[i]));
    assert_memory_equal(a->text.p + from, want[i], len);
  }
}

static void test_answer(void **state) {
  (void)state;
  air__mock_answer a;
  air__mock_answer_init(&a);
  air__mock_beh b = {0};
  assert_int_equal(air__mock_answer_build(&a, "m", 1, &b, NULL, 0, NULL), 0);
  const char *const canon[] = {"[m]", " w1", " w2", " w3", " w4",
                               " w5", " w6", " w7", " w8"};
  tokens_are(&a, canon, 9);
  assert_false(a.prefill);

  b.set = AIR__MOCK_K_TOKENS;
  b.tokens = 0;
  assert_int_equal(air__mock_answer_build(&a, "m", 1, &b, NULL, 0, NULL), 0);
  tokens_are(&a, canon, 1);

  b.set = AIR__MOCK_K_ANSWER;
  b.answer = " Hello big  world";
  assert_int_equal(air__mock_answer_build(&a, "m", 1, &b, NULL, 0, NULL), 0);
  const char *const words[] = {" Hello", " big", "  world"};
  tokens_are(&a, words, 3);

  b.set = AIR__MOCK_K_ANSWER | AIR__MOCK_K_FINISH;
  b.finish = AIR_FINISH_LENGTH;
  assert_int_equal(air__mock_answer_build(&a, "m", 1, &b, NULL, 0, NULL), 0);
  tokens_are(&a, words, 1); /* half, at least one */

  b.set = AIR__MOCK_K_REFUSAL | AIR__MOCK_K_ANSWER;
  b.refusal = "No way.";
  assert_int_equal(air__mock_answer_build(&a, "m", 1, &b, NULL, 0, NULL), 0);
  const char *const no[] = {"No", " way."};
  tokens_are(&a, no, 2);

  /* Prefill: from the token boundary at or after the prefix's end. */
  b.set = AIR__MOCK_K_TOKENS;
  b.tokens = 4;
  assert_int_equal(air__mock_answer_build(&a, "m", 1, &b, "[m] w1", 6, NULL), 0);
  assert_true(a.prefill);
  const char *const rest[] = {" w2", " w3", " w4"};
  tokens_are(&a, rest, 3);
  assert_int_equal(air__mock_answer_build(&a, "m", 1, &b, "[m] w1 w", 8, NULL), 0);
  tokens_are(&a, rest + 1, 2);
  assert_int_equal(
      air__mock_answer_build(&a, "m", 1, &b, "[m] w1 w2 w3 w4", 15, NULL), 0);
  assert_true(a.prefill);
  tokens_are(&a, rest, 0);
  assert_int_equal(air__mock_answer_build(&a, "m", 1, &b, "other", 5, NULL), 0);
  assert_false(a.prefill);
  assert_int_equal(a.first, 0);
  assert_int_equal(a.last, 5);
  air__mock_answer_cleanup(&a);
}

static void test_prefill_text(void **state) {
  (void)state;
  air__buf out;
  air__buf_init(&out, 1 << 16);
  struct {
    const char *json;
    int want;
    const char *text;
  } cases[] = {
      {"{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},"
       "{\"role\":\"assistant\",\"content\":\"[m] w1\"}]}",
       1, "[m] w1"},
      {"{\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":\"text\","
       "\"text\":\"[m]\"},{\"type\":\"image\"},{\"type\":\"text\",\"text\":\" "
       "w1\"}]}]}",
       1, "[m] w1"},
      {"{\"messages\":[{\"role\":\"assistant\",\"content\":\"x\"},"
       "{\"role\":\"user\",\"content\":\"q\"}]}",
       0, NULL},
      {"{\"messages\":[{\"role\":\"assistant\",\"content\":\"\"}]}", 0, NULL},
      {"{\"messages\":[{\"role\":\"assistant\",\"content\":null}]}", 0, NULL},
      {"{\"messages\":[]}", 0, NULL},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    json_t *j = json_loads(cases[i].json, 0, NULL);
    assert_non_null(j);
    assert_int_equal(air__mock_prefill_text(j, &out), cases[i].want);
    if (cases[i].text != NULL) assert_string_equal(out.p, cases[i].text);
    json_decref(j);
  }
  air__buf_cleanup(&out);
}

static void test_error_bodies(void **state) {
  (void)state;
  air__buf b;
  air__buf_init(&b, 4096);
  assert_int_equal(
      air__mock_error_body(AIR_DIALECT_OPENAI, 429, "insufficient_quota", "q", &b),
      0);
  assert_string_equal(
      b.p,
      "{\"error\":{\"message\":\"q\",\"type\":\"rate_limit_error\","
      "\"param\":null,\"code\":\"insufficient_quota\"}}");
  air__buf_reset(&b);
  assert_int_equal(air__mock_error_body(AIR_DIALECT_ANTHROPIC, 529, NULL, "o", &b),
                   0);
  assert_string_equal(
      b.p,
      "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
      "\"message\":\"o\"}}");
  struct {
    int status;
    const char *type;
  } t[] = {{400, "invalid_request_error"},
           {401, "authentication_error"},
           {403, "permission_error"},
           {404, "not_found_error"},
           {409, "invalid_request_error"},
           {429, "rate_limit_error"},
           {500, "api_error"},
           {502, "api_error"},
           {503, "overloaded_error"},
           {529, "overloaded_error"}};
  for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
    assert_string_equal(air__mock_error_type(t[i].status), t[i].type);
  air__buf_reset(&b);
  assert_int_equal(air__mock_overload_event(AIR_DIALECT_ANTHROPIC, &b), 0);
  assert_non_null(strstr(b.p,
                         "event: error\ndata: {\"type\":\"error\","
                         "\"error\":{\"type\":\"overloaded_error\""));
  air__buf_reset(&b);
  assert_int_equal(air__mock_malformed_event(AIR_DIALECT_OPENAI, &b), 0);
  assert_null(json_loads(b.p + 6, 0, NULL));
  air__buf_cleanup(&b);
}

/* ---- the log
 * ------------------------------------------------------------------- */

static void test_log(void **state) {
  (void)state;
  air__mock_log l;
  air__mock_log_init(&l);
  unsigned a = 0;
  assert_int_equal(air__mock_log_count(&l, "a", 1, &a), 0);
  assert_int_equal(a, 1);
  assert_int_equal(air__mock_log_count(&l, "ab", 1, &a), 0); /* "a" again */
  assert_int_equal(a, 2);
  assert_int_equal(air__mock_log_count(&l, "ab", 2, &a), 0);
  assert_int_equal(a, 1);
  /* Many names: the table grows and keeps counting. */
  for (int i = 0; i < 1000; i++) {
    char n[16];
    snprintf(n, sizeof(n), "m%d", i);
    assert_int_equal(air__mock_log_count(&l, n, strlen(n), &a), 0);
    assert_int_equal(air__mock_log_count(&l, n, strlen(n), &a), 0);
    assert_int_equal(a, 2);
  }
  air__mock_entry *e = air__mock_log_add(&l, 12, "primary", 7, 1,
                                         AIR_DIALECT_OPENAI, true, "status=429");
  assert_non_null(e);
  uint64_t id = e->id;
  e->status = 429;
  e->ended = true;
  e->end_ms = 13;
  e = air__mock_log_add(&l, 20, "q\"x", 3, 2, AIR_DIALECT_ANTHROPIC, false, "hang");
  e->hung_up = true;
  e->hung_up_ms = 30;
  e->ended = true;
  e->end_ms = 30;
  air__mock_log_add(&l, 40, "open", 4, 1, AIR_DIALECT_OPENAI, true, "ok");
  assert_non_null(air__mock_log_find(&l, id));
  air__buf out;
  air__buf_init(&out, 1 << 20);
  assert_int_equal(air__mock_log_json(&l, &out), 0);
  assert_string_equal(
      out.p,
      "{\"attempts\":[{\"t_ms\":12,\"model\":\"primary\",\"attempt\":1,"
      "\"api\":\"openai\",\"stream\":true,\"fault\":\"status=429\","
      "\"status\":429,\"hung_up\":false,\"hung_up_ms\":null,\"end_ms\":13},"
      "{\"t_ms\":20,\"model\":\"q\\\"x\",\"attempt\":2,\"api\":\"anthropic\","
      "\"stream\":false,\"fault\":\"hang\",\"status\":0,\"hung_up\":true,"
      "\"hung_up_ms\":30,\"end_ms\":30},"
      "{\"t_ms\":40,\"model\":\"open\",\"attempt\":1,\"api\":\"openai\","
      "\"stream\":true,\"fault\":\"ok\",\"status\":0,\"hung_up\":false,"
      "\"hung_up_ms\":null,\"end_ms\":null}],\"dropped\":0}\n");

  /* Reset forgets entries (old ids are not found again) and counters. */
  air__mock_log_reset(&l);
  assert_null(air__mock_log_find(&l, id));
  assert_int_equal(air__mock_log_count(&l, "a", 1, &a), 0);
  assert_int_equal(a, 1);
  air__buf_reset(&out);
  assert_int_equal(air__mock_log_json(&l, &out), 0);
  assert_string_equal(out.p, "{\"attempts\":[],\"dropped\":0}\n");

  /* Bounded: past AIR__MOCK_MAX_LOG the oldest entries go. */
  uint64_t first = 0;
  for (unsigned i = 0; i < AIR__MOCK_MAX_LOG + 5; i++) {
    e = air__mock_log_add(&l, i, "m", 1, i + 1, AIR_DIALECT_OPENAI, true, "ok");
    assert_non_null(e);
    if (i == 0) first = e->id;
  }
  assert_int_equal(l.n, AIR__MOCK_MAX_LOG);
  assert_int_equal(l.dropped, 5);
  assert_null(air__mock_log_find(&l, first + 4));
  e = air__mock_log_find(&l, first + 5);
  assert_non_null(e);
  assert_int_equal(e->t_ms, 5);
  /* A long model name is cut in the log. */
  char longname[AIR__MOCK_MAX_MODEL_BYTES];
  memset(longname, 'x', sizeof(longname));
  e = air__mock_log_add(&l, 0, longname, sizeof(longname), 1, AIR_DIALECT_OPENAI,
                        true, "ok");
  assert_int_equal(strlen(e->model), AIR__MOCK_MAX_LOG_MODEL_BYTES);
  air__buf_cleanup(&out);
  air__mock_log_cleanup(&l);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_doc_script),
      cmocka_unit_test(test_defaults_and_layers),
      cmocka_unit_test(test_empty_scripts),
      cmocka_unit_test(test_script_errors),
      cmocka_unit_test(test_script_limits),
      cmocka_unit_test(test_name_convention),
      cmocka_unit_test(test_convention_over_defaults),
      cmocka_unit_test(test_answer),
      cmocka_unit_test(test_prefill_text),
      cmocka_unit_test(test_error_bodies),
      cmocka_unit_test(test_log),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
