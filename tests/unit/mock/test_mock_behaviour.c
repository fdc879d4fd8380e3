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
#include "dialect.h"
#include "sse.h"

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
  assert_int_equal(air__mock_answer_build(&a, "m", 1, &b, NULL, 0, false, NULL),
                   0);
  const char *const canon[] = {"[m]", " w1", " w2", " w3", " w4",
                               " w5", " w6", " w7", " w8"};
  tokens_are(&a, canon, 9);
  assert_false(a.prefill);

  b.set = AIR__MOCK_K_TOKENS;
  b.tokens = 0;
  assert_int_equal(air__mock_answer_build(&a, "m", 1, &b, NULL, 0, false, NULL),
                   0);
  tokens_are(&a, canon, 1);

  b.set = AIR__MOCK_K_ANSWER;
  b.answer = " Hello big  world";
  assert_int_equal(air__mock_answer_build(&a, "m", 1, &b, NULL, 0, false, NULL),
                   0);
  const char *const words[] = {" Hello", " big", "  world"};
  tokens_are(&a, words, 3);

  b.set = AIR__MOCK_K_ANSWER | AIR__MOCK_K_FINISH;
  b.finish = AIR_FINISH_LENGTH;
  assert_int_equal(air__mock_answer_build(&a, "m", 1, &b, NULL, 0, false, NULL),
                   0);
  tokens_are(&a, words, 1); /* half, at least one */

  b.set = AIR__MOCK_K_REFUSAL | AIR__MOCK_K_ANSWER;
  b.refusal = "No way.";
  assert_int_equal(air__mock_answer_build(&a, "m", 1, &b, NULL, 0, false, NULL),
                   0);
  const char *const no[] = {"No", " way."};
  tokens_are(&a, no, 2);

  /* Prefill: from the byte after the prefix (tokens_are checks whole
   * tokens; test_continuation the cut one). */
  b.set = AIR__MOCK_K_TOKENS;
  b.tokens = 4;
  assert_int_equal(
      air__mock_answer_build(&a, "m", 1, &b, "[m] w1", 6, false, NULL), 0);
  assert_true(a.prefill);
  const char *const rest[] = {" w2", " w3", " w4"};
  tokens_are(&a, rest, 3);
  assert_int_equal(
      air__mock_answer_build(&a, "m", 1, &b, "[m] w1 w", 8, false, NULL), 0);
  assert_int_equal(a.first, 2); /* " w2" from its byte 2: "2" */
  assert_int_equal(a.from_off, 8);
  assert_int_equal(air__mock_answer_build(&a, "m", 1, &b, "[m] w1 w2 w3 w4", 15,
                                          false, NULL),
                   0);
  assert_true(a.prefill);
  tokens_are(&a, rest, 0);
  assert_int_equal(
      air__mock_answer_build(&a, "m", 1, &b, "other", 5, false, NULL), 0);
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
  assert_int_equal(air__mock_error_body(AIR_DIALECT_OPENAI, 429,
                                        "insufficient_quota", "q", &b),
                   0);
  assert_string_equal(
      b.p,
      "{\"error\":{\"message\":\"q\",\"type\":\"rate_limit_error\","
      "\"param\":null,\"code\":\"insufficient_quota\"}}");
  air__buf_reset(&b);
  assert_int_equal(
      air__mock_error_body(AIR_DIALECT_ANTHROPIC, 529, NULL, "o", &b), 0);
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
  air__mock_entry *e = air__mock_log_add(
      &l, 12, "primary", 7, 1, AIR_DIALECT_OPENAI, true, "status=429");
  assert_non_null(e);
  uint64_t id = e->id;
  e->status = 429;
  e->ended = true;
  e->end_ms = 13;
  e = air__mock_log_add(&l, 20, "q\"x", 3, 2, AIR_DIALECT_ANTHROPIC, false,
                        "hang");
  e->hung_up = true;
  e->hung_up_ms = 30;
  e->ended = true;
  e->end_ms = 30;
  air__buf msg;
  air__buf_init(&msg, 1024);
  assert_int_equal(air__buf_adds(&msg, "Continue \"exactly\"."), 0);
  air__mock_log_continuation(e, "instruct", false, 7, &msg, false, 0);
  e = air__mock_log_add(&l, 40, "open", 4, 1, AIR_DIALECT_OPENAI, true, "ok");
  air__mock_log_continuation(e, NULL, false, 0, NULL, false, 0);
  e = air__mock_log_find(&l, id);
  assert_non_null(e);
  air__mock_log_continuation(e, "prefill", true, 6, NULL, true, 100);
  air__buf out;
  air__buf_init(&out, 1 << 20);
  assert_int_equal(air__mock_log_json(&l, &out), 0);
  assert_string_equal(
      out.p,
      "{\"attempts\":[{\"t_ms\":12,\"model\":\"primary\",\"attempt\":1,"
      "\"api\":\"openai\",\"stream\":true,\"fault\":\"status=429\","
      "\"status\":429,\"hung_up\":false,\"hung_up_ms\":null,\"end_ms\":13,"
      "\"continuation\":\"prefill\",\"continued_at\":6,\"assistant_bytes\":6,"
      "\"instruct_message\":null,\"max_tokens\":100},"
      "{\"t_ms\":20,\"model\":\"q\\\"x\",\"attempt\":2,\"api\":\"anthropic\","
      "\"stream\":false,\"fault\":\"hang\",\"status\":0,\"hung_up\":true,"
      "\"hung_up_ms\":30,\"end_ms\":30,\"continuation\":\"instruct\","
      "\"continued_at\":null,\"assistant_bytes\":7,"
      "\"instruct_message\":\"Continue \\\"exactly\\\".\",\"max_tokens\":null},"
      "{\"t_ms\":40,\"model\":\"open\",\"attempt\":1,\"api\":\"openai\","
      "\"stream\":true,\"fault\":\"ok\",\"status\":0,\"hung_up\":false,"
      "\"hung_up_ms\":null,\"end_ms\":null,\"continuation\":null,"
      "\"continued_at\":null,\"assistant_bytes\":0,\"instruct_message\":null,"
      "\"max_tokens\":null}],\"dropped\":0}\n");
  /* The instruct message is kept to its first 256 bytes, whole UTF-8
   * characters only. */
  air__buf_reset(&msg);
  assert_int_equal(air__buf_adds(&msg, "x"), 0);
  for (int i = 0; i < 200; i++)
    assert_int_equal(air__buf_adds(&msg, "\xc3\xa9"), 0); /* é */
  air__mock_log_continuation(e, "instruct", true, 3, &msg, false, 0);
  assert_int_equal(strlen(e->instruct_message), 255);
  air__buf_cleanup(&msg);

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
  e = air__mock_log_add(&l, 0, longname, sizeof(longname), 1,
                        AIR_DIALECT_OPENAI, true, "ok");
  assert_int_equal(strlen(e->model), AIR__MOCK_MAX_LOG_MODEL_BYTES);
  air__buf_cleanup(&out);
  air__mock_log_cleanup(&l);
}

/* ---- answer shapes: tool calls, JSON, reasoning, native refusal ------------
 */

#define MAX_GOT_TOOLS 4

/* What the codecs decode from the mock's bytes. */
typedef struct got {
  const air__dialect_ops *ops;
  air__decoder dec;
  air__buf text, reasoning, refusal;
  air__buf args[MAX_GOT_TOOLS];
  char ids[MAX_GOT_TOOLS][64];
  char names[MAX_GOT_TOOLS][64];
  int n_tools;
  air_finish finish;
  char order[256]; /* one letter per content part: r t f S D */
  size_t n_order;
} got;

static void got_init(got *g, air_dialect api) {
  memset(g, 0, sizeof(*g));
  g->ops = air__dialect_get(api);
  g->ops->decoder_init(&g->dec);
  air__buf_init(&g->text, 1u << 20);
  air__buf_init(&g->reasoning, 1u << 20);
  air__buf_init(&g->refusal, 1u << 20);
  for (int i = 0; i < MAX_GOT_TOOLS; i++) air__buf_init(&g->args[i], 1u << 20);
}

static void got_cleanup(got *g) {
  air__decoder_cleanup(&g->dec);
  air__buf_cleanup(&g->text);
  air__buf_cleanup(&g->reasoning);
  air__buf_cleanup(&g->refusal);
  for (int i = 0; i < MAX_GOT_TOOLS; i++) air__buf_cleanup(&g->args[i]);
}

static void got_letter(got *g, char c) {
  if (g->n_order + 1 < sizeof(g->order)) g->order[g->n_order++] = c;
}

static int got_part(void *data, const air_part *p) {
  got *g = data;
  switch (p->kind) {
    case AIR_PART_TEXT:
      got_letter(g, 't');
      return air__buf_add(&g->text, p->text, p->text_len);
    case AIR_PART_REASONING:
      got_letter(g, 'r');
      return air__buf_add(&g->reasoning, p->text, p->text_len);
    case AIR_PART_REFUSAL:
      got_letter(g, 'f');
      return air__buf_add(&g->refusal, p->text, p->text_len);
    case AIR_PART_TOOL_START:
      assert_true(p->index >= 0 && p->index < MAX_GOT_TOOLS);
      got_letter(g, 'S');
      snprintf(g->ids[p->index], sizeof(g->ids[0]), "%.*s", (int)p->id_len,
               p->id);
      snprintf(g->names[p->index], sizeof(g->names[0]), "%.*s",
               (int)p->name_len, p->name);
      if (p->index + 1 > g->n_tools) g->n_tools = p->index + 1;
      return 0;
    case AIR_PART_TOOL_DELTA:
      assert_true(p->index >= 0 && p->index < MAX_GOT_TOOLS);
      got_letter(g, 'D');
      return air__buf_add(&g->args[p->index], p->text, p->text_len);
    case AIR_PART_FINISH:
      g->finish = p->finish;
      return 0;
    default:
      return 0;
  }
}

static int got_event(void *data, const air__sse_event *ev) {
  got *g = data;
  return g->ops->decode_event(&g->dec, ev, got_part, g);
}

/* The answer of behaviour b for model "m" and request req (JSON text or
 * NULL), with its events for api. */
static void build(air__mock_answer *a, const air__mock_beh *b, air_dialect api,
                  const char *req) {
  json_t *r = req ? json_loads(req, 0, NULL) : NULL;
  if (req != NULL) assert_non_null(r);
  assert_int_equal(air__mock_answer_build(a, "m", 1, b, NULL, 0, false, r), 0);
  assert_int_equal(air__mock_answer_events(a, b, api), 0);
  json_decref(r);
}

/* The stream bytes of an answer as the mock writes them (mock.c stream_begin,
 * step, put_end, with the Anthropic signature_delta), into out. */
static void stream_bytes(const air__mock_answer *a, air_dialect api,
                         air__buf *out) {
  const air__dialect_ops *ops = air__dialect_get(api);
  air__request stub = {.dialect = api, .model = "m", .stream = true};
  air__encoder enc;
  ops->encoder_init(&enc, &stub, 1);
  air_part start = {.kind = AIR_PART_START,
                    .id = "mock-1",
                    .id_len = 6,
                    .name = "m",
                    .name_len = 1};
  assert_int_equal(ops->encode_part(&enc, &start, out), 0);
  for (size_t i = 0; i <= a->n_ev; i++) {
    if (api == AIR_DIALECT_ANTHROPIC && i > 0 &&
        a->ev[i - 1].kind == AIR_PART_REASONING &&
        (i == a->n_ev || a->ev[i].kind != AIR_PART_REASONING))
      assert_int_equal(air__mock_signature_event(enc.open_block, out), 0);
    if (i == a->n_ev) break;
    air_part p = air__mock_answer_part(a, i);
    assert_int_equal(ops->encode_part(&enc, &p, out), 0);
  }
  air_part fin = {.kind = AIR_PART_FINISH, .finish = a->finish};
  assert_int_equal(ops->encode_part(&enc, &fin, out), 0);
  assert_int_equal(ops->encode_end(&enc, out), 0);
  air__encoder_cleanup(&enc);
}

/* Decodes the stream bytes of a into g. */
static void decode_stream(const air__mock_answer *a, air_dialect api, got *g,
                          air__buf *bytes) {
  stream_bytes(a, api, bytes);
  got_init(g, api);
  air__sse sse;
  air__sse_init(&sse, got_event, g);
  assert_int_equal(air__sse_feed(&sse, bytes->p, bytes->n), 0);
  assert_int_equal(air__sse_finish(&sse), 0);
  air__sse_cleanup(&sse);
  assert_int_equal(g->dec.malformed, 0);
}

/* Decodes the whole (non-streaming) body of a into g. */
static void decode_whole(const air__mock_answer *a, air_dialect api, got *g) {
  const air__dialect_ops *ops = air__dialect_get(api);
  air__aggregate agg;
  air__aggregate_init(&agg);
  air_part start = {.kind = AIR_PART_START,
                    .id = "mock-1",
                    .id_len = 6,
                    .name = "m",
                    .name_len = 1};
  air_part fin = {.kind = AIR_PART_FINISH, .finish = a->finish};
  assert_int_equal(air__aggregate_add(&agg, &start), 0);
  for (size_t i = 0; i < a->n_ev; i++) {
    air_part p = air__mock_answer_part(a, i);
    assert_int_equal(air__aggregate_add(&agg, &p), 0);
  }
  assert_int_equal(air__aggregate_add(&agg, &fin), 0);
  air__buf body;
  air__buf_init(&body, 1u << 20);
  assert_int_equal(ops->encode_response(&agg, &body), 0);
  got_init(g, api);
  assert_int_equal(ops->decode_body(&g->dec, body.p, body.n, got_part, g), 0);
  air__buf_cleanup(&body);
  air__aggregate_cleanup(&agg);
}

/* Tool call i's arguments parse to {"location": "city-i", "days": i+1}. */
static void args_are(const got *g, int i) {
  json_t *j = json_loadb(g->args[i].p, g->args[i].n, 0, NULL);
  assert_non_null(j);
  char want[64];
  snprintf(want, sizeof(want), "city-%d", i);
  assert_string_equal(json_string_value(json_object_get(j, "location")), want);
  assert_int_equal(json_integer_value(json_object_get(j, "days")), i + 1);
  assert_int_equal(json_object_size(j), 2);
  json_decref(j);
}

static void test_shape_keys(void **state) {
  (void)state;
  air__mock_script *s = load(
      "models:\n"
      "  a: {tool_calls: 2, json: true, reasoning: 3, refusal: native}\n"
      "  b: {refusal: true, tool_calls: 0}\n"
      "  c: {refusal: native, attempts: [{refusal: 'No.'}]}\n");
  fault_is(model(s, "a"), 1, 0, "refusal=native,tool_calls=2,json,reasoning=3");
  fault_is(model(s, "b"), 1, 0, "refusal,tool_calls=0");
  fault_is(model(s, "c"), 1, 0, "refusal"); /* a text replaces native */
  fault_is(model(s, "c"), 2, 0, "refusal=native");
  air__mock_script_free(s);

  static const char *const bad_keys[] = {
      "models: {a: {tool_calls: 65}}\n", "models: {a: {tool_calls: x}}\n",
      "models: {a: {json: maybe}}\n", "models: {a: {reasoning: -1}}\n"};
  for (size_t i = 0; i < sizeof(bad_keys) / sizeof(bad_keys[0]); i++) {
    air__mock_script *t = NULL;
    air__mock_diag d;
    assert_int_equal(
        air__mock_script_parse(bad_keys[i], strlen(bad_keys[i]), &t, &d),
        AIR_ECONFIG);
    assert_null(t);
  }

  char st[128];
  air__mock_model m;
  air__mock_diag d;
  const char *n1 = "m@tools=2@json@reason=3@nrefuse@k=1";
  assert_int_equal(air__mock_parse_name(n1, strlen(n1), st, &m, &d), 0);
  fault_is(&m, 1, 0, "refusal=native,tool_calls=2,json,reasoning=3");
  fault_is(&m, 2, 0, "ok");
  static const char *const bad_names[] = {
      "m@tools=65", "m@tools=",    "m@reason=x",
      "m@json=1",   "m@nrefuse=1", "m@tools"};
  for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++)
    assert_int_equal(
        air__mock_parse_name(bad_names[i], strlen(bad_names[i]), st, &m, &d),
        AIR_EINVAL);
}

static void test_tool_calls(void **state) {
  (void)state;
  static const air_dialect apis[] = {AIR_DIALECT_OPENAI, AIR_DIALECT_ANTHROPIC};
  for (size_t k = 0; k < 2; k++) {
    air__mock_answer a;
    air__mock_answer_init(&a);
    air__mock_beh b = {.set = AIR__MOCK_K_TOOL_CALLS, .tool_calls = 2};
    build(&a, &b, apis[k], NULL);
    assert_int_equal(a.n_ev, 8); /* per call: a start and three pieces */
    assert_int_equal(a.finish, AIR_FINISH_TOOL_CALLS);
    got g;
    air__buf bytes;
    air__buf_init(&bytes, 1u << 20);
    decode_stream(&a, apis[k], &g, &bytes);
    /* OpenAI: parallel calls, indices interleaved; Anthropic: one block
     * after the other. */
    assert_string_equal(
        g.order, apis[k] == AIR_DIALECT_OPENAI ? "SSDDDDDD" : "SDDDSDDD");
    assert_int_equal(g.n_tools, 2);
    for (int i = 0; i < 2; i++) {
      args_are(&g, i);
      assert_string_equal(g.names[i], "get_weather");
      char want[32];
      snprintf(want, sizeof(want), "%s_mock_%d",
               apis[k] == AIR_DIALECT_OPENAI ? "call" : "toolu", i);
      assert_string_equal(g.ids[i], want);
    }
    assert_int_equal(g.finish, AIR_FINISH_TOOL_CALLS);
    assert_int_equal(g.text.n, 0);
    if (apis[k] == AIR_DIALECT_OPENAI) {
      /* every piece is its own chunk: the arguments arrive split */
      assert_non_null(strstr(bytes.p, "\"arguments\":\"{\\\"location\\\"\""));
    } else {
      assert_non_null(strstr(bytes.p, "\"type\":\"input_json_delta\""));
      assert_non_null(strstr(bytes.p, "\"stop_reason\":\"tool_use\""));
    }
    got_cleanup(&g);
    air__buf_cleanup(&bytes);

    decode_whole(&a, apis[k], &g);
    assert_int_equal(g.n_tools, 2);
    args_are(&g, 0);
    args_are(&g, 1);
    assert_int_equal(g.finish, AIR_FINISH_TOOL_CALLS);
    got_cleanup(&g);

    /* Reasoning before the calls; a refusal replaces them. */
    b.set |= AIR__MOCK_K_REASONING;
    b.reasoning = 1;
    build(&a, &b, apis[k], NULL);
    assert_int_equal(a.n_ev, 9);
    assert_int_equal(a.ev[0].kind, AIR_PART_REASONING);
    b.set |= AIR__MOCK_K_REFUSAL;
    b.refusal = "No.";
    build(&a, &b, apis[k], NULL);
    assert_int_equal(a.n_ev, 2);
    assert_int_equal(a.ev[1].kind, AIR_PART_TEXT);
    air__mock_answer_cleanup(&a);
  }
}

static void test_reasoning(void **state) {
  (void)state;
  static const air_dialect apis[] = {AIR_DIALECT_OPENAI, AIR_DIALECT_ANTHROPIC};
  for (size_t k = 0; k < 2; k++) {
    air__mock_answer a;
    air__mock_answer_init(&a);
    air__mock_beh b = {.set = AIR__MOCK_K_REASONING | AIR__MOCK_K_TOKENS,
                       .reasoning = 3,
                       .tokens = 2};
    build(&a, &b, apis[k], NULL);
    assert_int_equal(a.n_ev, 6);
    got g;
    air__buf bytes;
    air__buf_init(&bytes, 1u << 20);
    decode_stream(&a, apis[k], &g, &bytes);
    assert_string_equal(g.order, "rrrttt");
    assert_int_equal(g.reasoning.n, strlen("Thinking 1. step 2. step 3."));
    assert_memory_equal(g.reasoning.p, "Thinking 1. step 2. step 3.",
                        g.reasoning.n);
    assert_int_equal(g.text.n, strlen("[m] w1 w2"));
    assert_memory_equal(g.text.p, "[m] w1 w2", g.text.n);
    assert_int_equal(g.finish, AIR_FINISH_STOP);
    if (apis[k] == AIR_DIALECT_OPENAI) {
      assert_non_null(strstr(bytes.p, "\"reasoning_content\":\"Thinking 1.\""));
    } else {
      /* thinking block 0: deltas, the signature, then its stop */
      const char *sig = strstr(bytes.p, "\"type\":\"signature_delta\"");
      const char *stop = strstr(bytes.p,
                                "{\"type\":\"content_block_stop\","
                                "\"index\":0}");
      const char *last = strstr(bytes.p, "step 3.");
      assert_non_null(strstr(bytes.p, "\"type\":\"thinking\""));
      assert_true(sig != NULL && stop != NULL && last != NULL);
      assert_true(last < sig && sig < stop);
    }
    got_cleanup(&g);
    air__buf_cleanup(&bytes);
    decode_whole(&a, apis[k], &g);
    assert_int_equal(g.reasoning.n, strlen("Thinking 1. step 2. step 3."));
    assert_int_equal(g.text.n, strlen("[m] w1 w2"));
    got_cleanup(&g);
    air__mock_answer_cleanup(&a);
  }
}

static void test_native_refusal(void **state) {
  (void)state;
  air__mock_answer a;
  air__mock_answer_init(&a);
  air__mock_beh b = {.set = AIR__MOCK_K_REFUSAL,
                     .refusal = AIR__MOCK_REFUSAL_TEXT,
                     .refusal_native = true};
  got g;
  air__buf bytes;
  air__buf_init(&bytes, 1u << 20);
  build(&a, &b, AIR_DIALECT_OPENAI, NULL);
  decode_stream(&a, AIR_DIALECT_OPENAI, &g, &bytes);
  assert_int_equal(g.refusal.n, strlen(AIR__MOCK_REFUSAL_TEXT));
  assert_memory_equal(g.refusal.p, AIR__MOCK_REFUSAL_TEXT, g.refusal.n);
  assert_int_equal(g.text.n, 0);
  assert_int_equal(g.finish, AIR_FINISH_STOP);
  assert_non_null(strstr(bytes.p, "\"delta\":{\"refusal\":\"I'm\"}"));
  got_cleanup(&g);
  decode_whole(&a, AIR_DIALECT_OPENAI, &g);
  assert_int_equal(g.refusal.n, strlen(AIR__MOCK_REFUSAL_TEXT));
  got_cleanup(&g);

  air__buf_reset(&bytes);
  build(&a, &b, AIR_DIALECT_ANTHROPIC, NULL);
  assert_int_equal(a.n_ev, 0);
  decode_stream(&a, AIR_DIALECT_ANTHROPIC, &g, &bytes);
  assert_int_equal(g.n_order, 0); /* no content at all */
  assert_int_equal(g.finish, AIR_FINISH_REFUSAL);
  assert_non_null(strstr(bytes.p, "\"stop_reason\":\"refusal\""));
  got_cleanup(&g);
  decode_whole(&a, AIR_DIALECT_ANTHROPIC, &g);
  assert_int_equal(g.n_order, 0);
  assert_int_equal(g.finish, AIR_FINISH_REFUSAL);
  got_cleanup(&g);
  air__buf_cleanup(&bytes);
  air__mock_answer_cleanup(&a);
}

static void test_json_answers(void **state) {
  (void)state;
  air__mock_answer a;
  air__mock_answer_init(&a);
  air__mock_beh b = {
      .set = AIR__MOCK_K_JSON | AIR__MOCK_K_TOKENS, .json = true, .tokens = 2};
  build(&a, &b, AIR_DIALECT_OPENAI, "{\"model\":\"m\",\"messages\":[]}");
  assert_string_equal(a.text.p, "{\"answer\": \"[m] w1 w2\"}");
  assert_true(a.n_ev > 1); /* streamed in several pieces */

  static const char schema[] =
      "{\"type\":\"object\",\"required\":[\"s\",\"n\",\"i\",\"b\",\"a\","
      "\"o\",\"e\",\"u\"],\"properties\":{"
      "\"s\":{\"type\":\"string\"},\"n\":{\"type\":\"number\"},"
      "\"i\":{\"type\":\"integer\"},\"b\":{\"type\":\"boolean\"},"
      "\"a\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
      "\"properties\":{\"x\":{\"type\":\"string\"},\"y\":{\"type\":"
      "\"string\"}},\"required\":[\"y\"]}},"
      "\"o\":{\"type\":\"object\",\"required\":[\"z\"],\"properties\":{"
      "\"z\":{\"type\":[\"null\",\"number\"]}}},"
      "\"e\":{\"enum\":[\"red\",\"blue\"]},"
      "\"u\":{\"anyOf\":[{\"type\":\"boolean\"},{\"type\":\"string\"}]},"
      "\"opt\":{\"type\":\"string\"}}}";
  static const char want[] =
      "{\"s\": \"x\", \"n\": 1, \"i\": 1, \"b\": true, \"a\": [{\"y\": "
      "\"x\"}], \"o\": {\"z\": 1}, \"e\": \"red\", \"u\": true}";
  char req[2048];
  snprintf(req, sizeof(req),
           "{\"model\":\"m\",\"messages\":[],\"response_format\":{\"type\":"
           "\"json_schema\",\"json_schema\":{\"name\":\"t\",\"schema\":%s}}}",
           schema);
  build(&a, &b, AIR_DIALECT_OPENAI, req);
  assert_string_equal(a.text.p, want);
  json_t *j = json_loads(a.text.p, 0, NULL);
  assert_non_null(j);
  json_decref(j);
  got g;
  air__buf bytes;
  air__buf_init(&bytes, 1u << 20);
  decode_stream(&a, AIR_DIALECT_OPENAI, &g, &bytes);
  assert_int_equal(g.text.n, strlen(want));
  assert_memory_equal(g.text.p, want, g.text.n);
  got_cleanup(&g);
  air__buf_cleanup(&bytes);

  snprintf(req, sizeof(req),
           "{\"model\":\"m\",\"max_tokens\":9,\"messages\":[],"
           "\"output_config\":{\"format\":{\"type\":\"json_schema\","
           "\"schema\":%s}}}",
           schema);
  build(&a, &b, AIR_DIALECT_ANTHROPIC, req);
  assert_string_equal(a.text.p, want);

  /* A schema nested past the depth limit ends in "x". */
  air__buf deep;
  air__buf_init(&deep, 1u << 16);
  for (int i = 0; i < 40; i++)
    assert_int_equal(air__buf_adds(&deep, "{\"type\":\"array\",\"items\":"), 0);
  assert_int_equal(air__buf_adds(&deep, "{\"type\":\"number\"}"), 0);
  for (int i = 0; i < 40; i++) assert_int_equal(air__buf_addc(&deep, '}'), 0);
  json_t *ds = json_loads(deep.p, 0, NULL);
  assert_non_null(ds);
  air__buf out;
  air__buf_init(&out, 1u << 16);
  assert_int_equal(air__mock_schema_instance(ds, &out), 0);
  j = json_loads(out.p, 0, NULL);
  assert_non_null(j);
  json_decref(j);
  assert_non_null(strstr(out.p, "\"x\""));
  json_decref(ds);
  air__buf_cleanup(&out);
  air__buf_cleanup(&deep);
  air__mock_answer_cleanup(&a);
}

/* json with a forced tool: one call of that tool whose arguments are the
 * schema's instance, in both dialects; tool_calls: N keeps get_weather. */
static void test_json_forced_tool(void **state) {
  (void)state;
#define FORCED_SCHEMA                                             \
  "{\"type\":\"object\",\"required\":[\"city\"],\"properties\":{" \
  "\"city\":{\"type\":\"string\"}}}"
  static const struct {
    air_dialect api;
    const char *req;
  } cases[] = {
      {AIR_DIALECT_ANTHROPIC,
       "{\"model\":\"m\",\"max_tokens\":9,\"messages\":[],\"tools\":[{"
       "\"name\":\"other\",\"input_schema\":{}},{\"name\":\"out\","
       "\"input_schema\":" FORCED_SCHEMA
       "}],\"tool_choice\":{\"type\":\"tool\",\"name\":\"out\"}}"},
      {AIR_DIALECT_OPENAI,
       "{\"model\":\"m\",\"messages\":[],\"tools\":[{\"type\":"
       "\"function\",\"function\":{\"name\":\"out\","
       "\"parameters\":" FORCED_SCHEMA
       "}}],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":"
       "\"out\"}}}"},
  };
#undef FORCED_SCHEMA
  for (size_t c = 0; c < 2; c++) {
    const char *req = cases[c].req;
    air__mock_answer a;
    air__mock_answer_init(&a);
    air__mock_beh b = {.set = AIR__MOCK_K_JSON, .json = true};
    build(&a, &b, cases[c].api, req);
    assert_true(a.forced);
    assert_int_equal(a.finish, AIR_FINISH_TOOL_CALLS);
    got g;
    air__buf bytes;
    air__buf_init(&bytes, 1u << 20);
    decode_stream(&a, cases[c].api, &g, &bytes);
    assert_int_equal(g.n_tools, 1);
    assert_string_equal(g.names[0], "out");
    assert_int_equal(g.args[0].n, strlen("{\"city\": \"x\"}"));
    assert_memory_equal(g.args[0].p, "{\"city\": \"x\"}", g.args[0].n);
    assert_int_equal(g.text.n, 0);
    got_cleanup(&g);
    air__buf_cleanup(&bytes);

    /* tool_calls: N wins: get_weather, not the forced tool. */
    air__mock_beh t = {.set = AIR__MOCK_K_JSON | AIR__MOCK_K_TOOL_CALLS,
                       .json = true,
                       .tool_calls = 1};
    build(&a, &t, cases[c].api, req);
    assert_false(a.forced);
    air_part p = air__mock_answer_part(&a, 0);
    assert_int_equal(p.kind, AIR_PART_TOOL_START);
    assert_memory_equal(p.name, AIR__MOCK_TOOL_NAME, p.name_len);
    air__mock_answer_cleanup(&a);
  }
}

/* ---- answers without a stream (embed.c) ---------------------------------- */

static json_t *doc(const char *text) {
  json_error_t e;
  json_t *d = json_loads(text, 0, &e);
  assert_non_null(d);
  return d;
}

/* The body of an embeddings request, parsed; NULL when it is refused
 * (*err then set). */
static json_t *embed(const char *req, const char *model, const char **err) {
  json_t *r = doc(req);
  air__buf b;
  air__buf_init(&b, AIR__MOCK_MAX_WHOLE_BYTES);
  int rc = air__mock_embeddings(r, model, strlen(model), &b, err);
  json_decref(r);
  json_t *out = rc == 0 ? doc(b.p) : NULL;
  air__buf_cleanup(&b);
  return out;
}

static double norm_of(const json_t *v) {
  double s = 0;
  size_t i;
  const json_t *x;
  json_array_foreach(v, i, x) s += json_real_value(x) * json_real_value(x);
  return s;
}

static void test_embeddings(void **state) {
  (void)state;
  const char *err = NULL;
  json_t *a = embed("{\"input\":\"hello\"}", "m", &err);
  json_t *b = embed("{\"input\":[\"hello\",\"world\"]}", "m", &err);
  json_t *c = embed("{\"input\":\"hello\"}", "other", &err);
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(c);
  /* The OpenAI shape; one unit vector per input, AIR__MOCK_EMBED_DIMS long. */
  assert_string_equal(json_string_value(json_object_get(a, "object")), "list");
  assert_string_equal(json_string_value(json_object_get(a, "model")), "m");
  json_t *d0 = json_array_get(json_object_get(a, "data"), 0);
  assert_string_equal(json_string_value(json_object_get(d0, "object")),
                      "embedding");
  assert_int_equal(json_integer_value(json_object_get(d0, "index")), 0);
  json_t *v0 = json_object_get(d0, "embedding");
  assert_int_equal(json_array_size(v0), AIR__MOCK_EMBED_DIMS);
  assert_true(norm_of(v0) > 0.999 && norm_of(v0) < 1.001);
  json_t *u = json_object_get(a, "usage");
  assert_int_equal(json_integer_value(json_object_get(u, "prompt_tokens")), 2);
  assert_int_equal(json_integer_value(json_object_get(u, "total_tokens")), 2);
  /* Deterministic by input (and model): "hello" gives the same vector alone
   * or first in a list, another input or model another one. */
  json_t *bd = json_object_get(b, "data");
  assert_int_equal(json_array_size(bd), 2);
  assert_true(
      json_equal(v0, json_object_get(json_array_get(bd, 0), "embedding")));
  assert_int_equal(
      json_integer_value(json_object_get(json_array_get(bd, 1), "index")), 1);
  assert_false(
      json_equal(v0, json_object_get(json_array_get(bd, 1), "embedding")));
  assert_false(json_equal(
      v0, json_object_get(json_array_get(json_object_get(c, "data"), 0),
                          "embedding")));
  json_decref(a);
  json_decref(b);
  json_decref(c);

  /* dimensions, and base64: the float32 values' little-endian bytes. */
  json_t *f = embed("{\"input\":[1,2,3],\"dimensions\":3}", "m", &err);
  json_t *g = embed(
      "{\"input\":[[1,2,3]],\"dimensions\":3,"
      "\"encoding_format\":\"base64\"}",
      "m", &err);
  assert_non_null(f);
  assert_non_null(g);
  json_t *fv = json_object_get(json_array_get(json_object_get(f, "data"), 0),
                               "embedding");
  assert_int_equal(json_array_size(fv), 3);
  assert_int_equal(json_integer_value(json_object_get(
                       json_object_get(f, "usage"), "prompt_tokens")),
                   3);
  const char *s = json_string_value(json_object_get(
      json_array_get(json_object_get(g, "data"), 0), "embedding"));
  assert_non_null(s);
  assert_int_equal(strlen(s), 16); /* 12 bytes */
  static const char al[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  unsigned char bytes[12];
  for (size_t i = 0; i < 4; i++) {
    uint32_t q = 0;
    for (size_t j = 0; j < 4; j++)
      q = q << 6 | (uint32_t)(strchr(al, s[4 * i + j]) - al);
    bytes[3 * i] = (unsigned char)(q >> 16);
    bytes[3 * i + 1] = (unsigned char)(q >> 8);
    bytes[3 * i + 2] = (unsigned char)q;
  }
  for (size_t i = 0; i < 3; i++) {
    uint32_t w = (uint32_t)bytes[4 * i] | (uint32_t)bytes[4 * i + 1] << 8 |
                 (uint32_t)bytes[4 * i + 2] << 16 |
                 (uint32_t)bytes[4 * i + 3] << 24;
    float x;
    memcpy(&x, &w, 4);
    assert_true((double)x ==
                (double)(float)json_real_value(json_array_get(fv, i)));
  }
  json_decref(f);
  json_decref(g);

  /* Refused: each names its field. */
  static const char *const refused[][2] = {
      {"{}", "input"},
      {"{\"input\":\"\"}", "input"},
      {"{\"input\":[]}", "input"},
      {"{\"input\":[\"a\",3]}", "input"},
      {"{\"input\":\"a\",\"dimensions\":0}", "dimensions"},
      {"{\"input\":\"a\",\"dimensions\":4097}", "dimensions"},
      {"{\"input\":\"a\",\"encoding_format\":\"hex\"}", "encoding_format"},
  };
  for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
    err = NULL;
    assert_null(embed(refused[i][0], "m", &err));
    assert_non_null(err);
    assert_non_null(strstr(err, refused[i][1]));
  }
}

static uint64_t count(const char *req, int *rc) {
  json_t *r = doc(req);
  air__buf b;
  air__buf_init(&b, 1024);
  const char *err = NULL;
  *rc = air__mock_count_tokens(r, &b, &err);
  json_decref(r);
  uint64_t n = 0;
  if (*rc == 0) {
    json_t *d = doc(b.p);
    assert_int_equal(json_object_size(d), 1);
    n = (uint64_t)json_integer_value(json_object_get(d, "input_tokens"));
    json_decref(d);
  } else {
    assert_non_null(strstr(err, "messages"));
  }
  air__buf_cleanup(&b);
  return n;
}

static void test_count_tokens(void **state) {
  (void)state;
  int rc;
  /* 11 bytes of text: 3 tokens, plus 3 for the message. */
  assert_int_equal(
      count("{\"messages\":[{\"role\":\"user\",\"content\":\"hello world\"}]}",
            &rc),
      6);
  assert_int_equal(rc, 0);
  /* Blocks count their text; system and tools add theirs. */
  assert_int_equal(count("{\"messages\":[{\"role\":\"user\",\"content\":"
                         "[{\"type\":\"text\",\"text\":\"hello world\"}]}]}",
                         &rc),
                   6);
  assert_int_equal(
      count("{\"system\":\"12345678\",\"messages\":[{\"role\":\"user\","
            "\"content\":\"hello world\"}]}",
            &rc),
      8);
  assert_true(
      count("{\"messages\":[{\"role\":\"user\",\"content\":\"hello world\"}],"
            "\"tools\":[{\"name\":\"t\",\"input_schema\":{}}]}",
            &rc) > 6);
  count("{\"messages\":[]}", &rc);
  assert_int_equal(rc, AIR_EINVAL);
  count("{\"messages\":[3]}", &rc);
  assert_int_equal(rc, AIR_EINVAL);
}

/* tool_text: the answer's text, then the tool calls, in every dialect. */
static void test_tool_text(void **state) {
  (void)state;
  const air_dialect apis[] = {AIR_DIALECT_OPENAI, AIR_DIALECT_ANTHROPIC,
                              AIR_DIALECT_OPENAI_RESPONSES};
  for (size_t k = 0; k < 3; k++) {
    air__mock_answer a;
    air__mock_answer_init(&a);
    air__mock_beh b = {.set = AIR__MOCK_K_TOOL_CALLS | AIR__MOCK_K_TOOL_TEXT |
                              AIR__MOCK_K_TOKENS,
                       .tool_calls = 1,
                       .tool_text = true,
                       .tokens = 2};
    build(&a, &b, apis[k], NULL);
    assert_int_equal(a.n_ev, 3 + 4);
    assert_int_equal(a.finish, AIR_FINISH_TOOL_CALLS);
    got g;
    air__buf bytes;
    air__buf_init(&bytes, 1u << 20);
    decode_stream(&a, apis[k], &g, &bytes);
    assert_string_equal(g.order, "tttSDDD");
    assert_int_equal(g.text.n, strlen("[m] w1 w2"));
    assert_memory_equal(g.text.p, "[m] w1 w2", g.text.n);
    assert_int_equal(g.n_tools, 1);
    args_are(&g, 0);
    got_cleanup(&g);
    air__buf_cleanup(&bytes);
    decode_whole(&a, apis[k], &g);
    assert_memory_equal(g.text.p, "[m] w1 w2", g.text.n);
    assert_int_equal(g.n_tools, 1);
    got_cleanup(&g);
    air__mock_answer_cleanup(&a);
  }
  air__mock_script *s =
      load("models:\n  t: {tool_calls: 1, tool_text: true}\n");
  fault_is(model(s, "t"), 1, 0, "tool_calls=1,tool_text");
  air__mock_script_free(s);
  char st[64];
  air__mock_model m;
  air__mock_diag d;
  assert_int_equal(
      air__mock_parse_name("t@tools=1@tooltext@k=1", 22, st, &m, &d), 0);
  fault_is(&m, 1, 0, "tool_calls=1,tool_text");
  fault_is(&m, 2, 0, "ok");
}

/* ---- continuation (docs/mock.md "Continuation") -------------------------- */

static const char *const style_cases[][3] = {
    /* body, dialect ("c" chat, "a" anthropic, "r" responses), style/P */
    {"{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":"
     "\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"[m] w1\"}]}],"
     "\"max_tokens\":50}",
     "a", "prefill|[m] w1|50"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":"
     "\"assistant\",\"content\":\"[m] w1\"}]}",
     "c", "prefill|[m] w1|-"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":"
     "\"assistant\",\"content\":\"[m] w1\"}],\"continue_final_message\":true,"
     "\"add_generation_prompt\":false,\"max_completion_tokens\":7}",
     "c", "vllm|[m] w1|7"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":"
     "\"assistant\",\"content\":\"[m] w1\",\"prefix\":true}]}",
     "c", "prefix_flag|[m] w1|-"},
    /* The flags are chat's: an Anthropic body with them is a prefill. */
    {"{\"messages\":[{\"role\":\"assistant\",\"content\":\"[m]\","
     "\"prefix\":true}]}",
     "a", "prefill|[m]|-"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":"
     "\"assistant\",\"content\":\"[m] w1\"},{\"role\":\"user\",\"content\":"
     "[{\"type\":\"text\",\"text\":\"Continue.\"}]}]}",
     "c", "instruct|[m] w1|-|Continue."},
    {"{\"input\":[{\"role\":\"user\",\"content\":\"q\"},{\"type\":\"message\","
     "\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":"
     "\"[m] w1\"}]}],\"max_output_tokens\":9}",
     "r", "prefill|[m] w1|9"},
    {"{\"input\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":"
     "\"assistant\","
     "\"content\":\"[m]\"},{\"role\":\"user\",\"content\":[{\"type\":"
     "\"input_text\",\"text\":\"go on\"}]}]}",
     "r", "instruct|[m]|-|go on"},
    {"{\"input\":\"q\"}", "r", "-"},
    {"{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}", "c", "-"},
    {"{\"messages\":[{\"role\":\"assistant\",\"content\":\"\"}]}", "a", "-"},
    /* A function call item between: no assistant text before the user. */
    {"{\"input\":[{\"role\":\"assistant\",\"content\":\"x\"},{\"type\":"
     "\"function_call_output\",\"call_id\":\"c\",\"output\":\"o\"},{\"role\":"
     "\"user\",\"content\":\"q\"}]}",
     "r", "-"},
};

static void test_read_continuation(void **state) {
  (void)state;
  air__mock_cont c;
  air__mock_cont_init(&c);
  for (size_t i = 0; i < sizeof(style_cases) / sizeof(style_cases[0]); i++) {
    json_t *j = json_loads(style_cases[i][0], 0, NULL);
    assert_non_null(j);
    air_dialect api = style_cases[i][1][0] == 'a' ? AIR_DIALECT_ANTHROPIC
                      : style_cases[i][1][0] == 'r'
                          ? AIR_DIALECT_OPENAI_RESPONSES
                          : AIR_DIALECT_OPENAI;
    assert_int_equal(air__mock_read_continuation(j, api, &c), 0);
    char seen[512];
    const char *name = air__mock_style_name(c.style);
    if (name == NULL)
      snprintf(seen, sizeof(seen), "-");
    else if (c.style == AIR__MOCK_STYLE_INSTRUCT)
      snprintf(seen, sizeof(seen), "%s|%.*s|%s|%.*s", name, (int)c.text.n,
               c.text.p, "-", (int)c.message.n, c.message.p);
    else if (c.has_max_tokens)
      snprintf(seen, sizeof(seen), "%s|%.*s|%llu", name, (int)c.text.n,
               c.text.p, (unsigned long long)c.max_tokens);
    else
      snprintf(seen, sizeof(seen), "%s|%.*s|-", name, (int)c.text.n, c.text.p);
    if (strcmp(seen, style_cases[i][2]) != 0)
      fprintf(stderr, "case %zu: %s\n", i, seen);
    assert_string_equal(seen, style_cases[i][2]);
    json_decref(j);
  }
  air__mock_cont_cleanup(&c);
}

/* The text of a's content events, joined, into out (reset first). */
static void events_text(const air__mock_answer *a, air__buf *out) {
  air__buf_reset(out);
  for (size_t i = 0; i < a->n_ev; i++) {
    air_part p = air__mock_answer_part(a, i);
    assert_int_equal(air__buf_add(out, p.text, p.text_len), 0);
  }
}

/* The answer of b for model "m" continuing prefill P (instruct or not),
 * its events for api; checks the events' text is want. */
static void continues(air__mock_answer *a, const air__mock_beh *b,
                      const char *p, bool instruct, air_dialect api,
                      const char *want) {
  assert_int_equal(air__mock_answer_build(a, "m", 1, b, p, p ? strlen(p) : 0,
                                          instruct, NULL),
                   0);
  assert_int_equal(air__mock_answer_events(a, b, api), 0);
  air__buf t;
  air__buf_init(&t, 1u << 20);
  events_text(a, &t);
  if (t.n != strlen(want) || (t.n > 0 && memcmp(t.p, want, t.n) != 0))
    fprintf(stderr, "continuing '%s': got '%.*s', want '%s'\n", p ? p : "",
            (int)t.n, t.n > 0 ? t.p : "", want);
  assert_int_equal(t.n, strlen(want));
  if (t.n > 0) assert_memory_equal(t.p, want, t.n);
  air__buf_cleanup(&t);
}

#define A8 "[m] w1 w2 w3 w4 w5 w6 w7 w8"

static void test_continue_as(void **state) {
  (void)state;
  air__mock_answer a;
  air__mock_answer_init(&a);
  air__mock_beh b = {0};
  /* exact: P + events == A wherever P stops, even inside a token. */
  for (size_t k = 1; k <= strlen(A8); k++) {
    char p[64];
    snprintf(p, sizeof(p), "%.*s", (int)k, A8);
    continues(&a, &b, p, false, AIR_DIALECT_OPENAI, A8 + k);
    assert_true(a.prefill);
    if (k < strlen(A8)) continues(&a, &b, p, true, AIR_DIALECT_OPENAI, A8 + k);
  }
  /* The cut token's rest is one event, then whole tokens. */
  continues(&a, &b, "[m] w1 w", false, AIR_DIALECT_ANTHROPIC,
            "2 w3 w4 w5 w6 w7 w8");
  assert_int_equal(a.n_ev, 7);
  assert_int_equal(a.ev[0].len, 1);
  /* instruct needs a proper prefix: the whole answer is a conversation. */
  continues(&a, &b, A8, true, AIR_DIALECT_OPENAI, A8);
  assert_false(a.prefill);
  /* Not a prefix: not this model's answer, the whole answer. */
  continues(&a, &b, "[m] w1 w3", false, AIR_DIALECT_OPENAI, A8);
  assert_false(a.prefill);
  continues(&a, &b, "[x] w1", true, AIR_DIALECT_OPENAI, A8);
  assert_false(a.prefill);

  b.set = AIR__MOCK_K_CONTINUE_AS;
  b.continue_as = AIR__MOCK_CONT_RESTART;
  continues(&a, &b, "[m] w1 w2", false, AIR_DIALECT_OPENAI, A8);
  assert_true(a.prefill);
  assert_int_equal(a.cont_as, AIR__MOCK_CONT_RESTART);
  assert_int_equal(a.n_ev, 9);

  b.continue_as = AIR__MOCK_CONT_REPEAT; /* 40 bytes by default */
  const char *p40 = "[m] w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 w13";
  air__mock_beh b20 = b;
  b20.set |= AIR__MOCK_K_TOKENS;
  b20.tokens = 20;
  const char *a20 =
      "[m] w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 w13 w14 w15 w16 w17 w18 "
      "w19 w20";
  continues(&a, &b20, p40, false, AIR_DIALECT_OPENAI, a20 + strlen(p40) - 40);
  b20.set |= AIR__MOCK_K_REPEAT_CHARS;
  b20.repeat_chars = 5;
  continues(&a, &b20, p40, false, AIR_DIALECT_OPENAI, a20 + strlen(p40) - 5);
  b20.repeat_chars = 0; /* nothing again: exact */
  continues(&a, &b20, p40, false, AIR_DIALECT_OPENAI, a20 + strlen(p40));
  /* Longer than the prefill: the whole answer (a restart). */
  continues(&a, &b, "[m] w1", false, AIR_DIALECT_OPENAI, A8);

  b.continue_as = AIR__MOCK_CONT_PREAMBLE;
  continues(&a, &b, "[m] w1 w2", true, AIR_DIALECT_OPENAI,
            "Sure, continuing:  w3 w4 w5 w6 w7 w8");
  air_part first = air__mock_answer_part(&a, 0);
  assert_int_equal(first.text_len, strlen(AIR__MOCK_PREAMBLE));
  /* Even when nothing is left, the preamble comes. */
  continues(&a, &b, A8, false, AIR_DIALECT_OPENAI, AIR__MOCK_PREAMBLE);

  b.continue_as = AIR__MOCK_CONT_DIVERGE;
  /* Half of 15 bytes is 7: after " w1" (ends at 6). */
  continues(&a, &b, "[m] w1 w2 w3 w4", false, AIR_DIALECT_OPENAI,
            "[m] w1 (diverged) w2 w3 w4 w5 w6 w7 w8");
  /* At least the first token. */
  continues(&a, &b, "[m] w", false, AIR_DIALECT_OPENAI,
            "[m] (diverged) w1 w2 w3 w4 w5 w6 w7 w8");

  /* A refusal is not the answer: it is sent whole. */
  b.set = AIR__MOCK_K_REFUSAL;
  b.refusal = "No way.";
  continues(&a, &b, "[m] w1", false, AIR_DIALECT_OPENAI, "No way.");
  assert_false(a.prefill);
  /* finish: length stops at half the tokens, also for a continuation. */
  b.set = AIR__MOCK_K_FINISH;
  b.finish = AIR_FINISH_LENGTH;
  continues(&a, &b, "[m] w1", false, AIR_DIALECT_OPENAI, " w2 w3");
  air__mock_answer_cleanup(&a);
}

/* A continuation reaches a client of each dialect as the remainder: the
 * events decode, streamed and whole, to exactly A's rest. */
static void test_continuation_dialects(void **state) {
  (void)state;
  const air_dialect apis[] = {AIR_DIALECT_OPENAI, AIR_DIALECT_ANTHROPIC,
                              AIR_DIALECT_OPENAI_RESPONSES};
  for (size_t i = 0; i < 3; i++) {
    air__mock_answer a;
    air__mock_answer_init(&a);
    air__mock_beh b = {0};
    continues(&a, &b, "[m] w1 w2 w", false, apis[i], "3 w4 w5 w6 w7 w8");
    got g;
    air__buf bytes;
    air__buf_init(&bytes, 1u << 20);
    decode_stream(&a, apis[i], &g, &bytes);
    assert_int_equal(g.text.n, strlen("3 w4 w5 w6 w7 w8"));
    assert_memory_equal(g.text.p, "3 w4 w5 w6 w7 w8", g.text.n);
    got_cleanup(&g);
    decode_whole(&a, apis[i], &g);
    assert_memory_equal(g.text.p, "3 w4 w5 w6 w7 w8", g.text.n);
    got_cleanup(&g);
    air__buf_cleanup(&bytes);
    air__mock_answer_cleanup(&a);
  }
}

static void test_continue_keys(void **state) {
  (void)state;
  air__mock_script *s = load(
      "models:\n"
      "  r: {continue_as: restart, attempts: [{cut_after: 2}]}\n"
      "  p: {continue_as: repeat, repeat_chars: 12}\n"
      "  d: {attempts: [{continue_as: diverge}, {}]}\n");
  air__mock_beh b;
  air__mock_select(model(s, "r"), 2, 0, &b);
  assert_true(b.set & AIR__MOCK_K_CONTINUE_AS);
  assert_int_equal(b.continue_as, AIR__MOCK_CONT_RESTART);
  fault_is(model(s, "r"), 1, 0, "cut_after=2"); /* not a fault by itself */
  air__mock_select(model(s, "p"), 1, 0, &b);
  assert_int_equal(b.continue_as, AIR__MOCK_CONT_REPEAT);
  assert_int_equal(b.repeat_chars, 12);
  air__mock_select(model(s, "d"), 1, 0, &b);
  assert_int_equal(b.continue_as, AIR__MOCK_CONT_DIVERGE);
  air__mock_select(model(s, "d"), 2, 0, &b);
  assert_false(b.set & AIR__MOCK_K_CONTINUE_AS);
  air__mock_script_free(s);

  static const struct {
    const char *yaml, *msg;
  } bad_keys[] = {
      {"models:\n  a: {continue_as: again}\n", "expected exact, restart"},
      {"models:\n  a: {repeat_chars: 65537}\n", "expected an integer 0..65536"},
      {"models:\n  a: {repeat_chars: -1}\n", "expected an integer"},
  };
  for (size_t i = 0; i < sizeof(bad_keys) / sizeof(bad_keys[0]); i++) {
    air__mock_script *x = NULL;
    air__mock_diag d;
    assert_int_equal(air__mock_script_parse(bad_keys[i].yaml,
                                            strlen(bad_keys[i].yaml), &x, &d),
                     AIR_ECONFIG);
    if (strstr(d.message, bad_keys[i].msg) == NULL)
      fprintf(stderr, "case %zu: %s\n", i, d.message);
    assert_non_null(strstr(d.message, bad_keys[i].msg));
  }

  /* The convention: every attempt, whatever k= says. */
  static const struct {
    const char *name;
    unsigned as, chars;
  } names[] = {
      {"m@cut=3@k=1@restart", AIR__MOCK_CONT_RESTART, 0},
      {"m@repeat@k=1@overload=2", AIR__MOCK_CONT_REPEAT, 0},
      {"m@repeat=7@stall=1@k=1", AIR__MOCK_CONT_REPEAT, 7},
      {"m@preamble@cut=1@k=1", AIR__MOCK_CONT_PREAMBLE, 0},
      {"m@diverge@cut=1@k=1", AIR__MOCK_CONT_DIVERGE, 0},
  };
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    char st[128];
    air__mock_model m;
    air__mock_diag d;
    assert_int_equal(
        air__mock_parse_name(names[i].name, strlen(names[i].name), st, &m, &d),
        0);
    air__mock_select(&m, 2, 0, &b);
    assert_true(b.set & AIR__MOCK_K_CONTINUE_AS);
    assert_int_equal(b.continue_as, names[i].as);
    assert_int_equal(!!(b.set & AIR__MOCK_K_REPEAT_CHARS), names[i].chars != 0);
    if (names[i].chars) assert_int_equal(b.repeat_chars, names[i].chars);
    fault_is(&m, 2, 0, "ok"); /* k=1: the fault is gone, the manner stays */
  }
  char st[64];
  air__mock_model m;
  air__mock_diag d;
  assert_int_equal(air__mock_parse_name("m@repeat=x", 10, st, &m, &d),
                   AIR_EINVAL);
  assert_int_equal(air__mock_parse_name("m@restart=1", 11, st, &m, &d),
                   AIR_EINVAL);
  assert_string_equal(air__mock_cont_as_name(AIR__MOCK_CONT_PREAMBLE),
                      "preamble");
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
      cmocka_unit_test(test_shape_keys),
      cmocka_unit_test(test_tool_calls),
      cmocka_unit_test(test_reasoning),
      cmocka_unit_test(test_native_refusal),
      cmocka_unit_test(test_json_answers),
      cmocka_unit_test(test_json_forced_tool),
      cmocka_unit_test(test_embeddings),
      cmocka_unit_test(test_count_tokens),
      cmocka_unit_test(test_read_continuation),
      cmocka_unit_test(test_continue_as),
      cmocka_unit_test(test_continuation_dialects),
      cmocka_unit_test(test_continue_keys),
      cmocka_unit_test(test_tool_text),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
