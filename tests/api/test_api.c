/*
 * The public API as a program outside the tree sees it: built against
 * <airetry.h> only and linked with the shared library (so everything used
 * here is exported). Option struct sizes, air_error detail, the shared
 * observers, air_version and air_config_dump(FILE *).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <airetry.h>

static const char cfg_text[] =
    "providers:\n"
    "  - {name: p, api: openai, base_url: http://127.0.0.1:1/v1}\n"
    "routes:\n"
    "  - name: r\n"
    "    targets: [p/a, p/b]\n"
    "    rules:\n"
    "      - {on: [overloaded], action: switch}\n";

static air_config *load(void) {
  air_config *cfg = NULL;
  assert_int_equal(
      air_config_parse("api", cfg_text, sizeof(cfg_text) - 1, NULL, NULL, &cfg),
      0);
  return cfg;
}

typedef struct seen {
  unsigned calls, failed, commits, settled;
  char commit[32];
  int settled_rc;
  size_t settled_n;
} seen;

static void on_failed(void *data, const air_attempt *a) {
  seen *s = data;
  (void)a;
  s->failed++;
}

static void on_commit(void *data, const char *target, unsigned attempt) {
  seen *s = data;
  s->commits++;
  snprintf(s->commit, sizeof(s->commit), "%s#%u", target, attempt);
}

static void on_settled(void *data, int rc, const air_attempt *log, size_t n) {
  seen *s = data;
  (void)log;
  s->settled++;
  s->settled_rc = rc;
  s->settled_n = n;
}

/* p/a is overloaded, p/b answers. */
static int attempt(void *data, const air_attempt_info *info, air_failure *f) {
  seen *s = data;
  s->calls++;
  if (strcmp(info->target, "p/a") == 0) {
    f->status = 529;
    f->type = "overloaded_error";
    return 1;
  }
  return 0;
}

static air_observers observers(seen *s) {
  air_observers o = AIR_OBSERVERS_INIT;
  o.data = s;
  o.on_failed = on_failed;
  o.on_commit = on_commit;
  o.on_settled = on_settled;
  return o;
}

_Static_assert(AIR_VERSION_NUM ==
                   ((AIR_VERSION_MAJOR << 16) | (AIR_VERSION_MINOR << 8) |
                    AIR_VERSION_PATCH),
               "AIR_VERSION_NUM is 0xMMmmpp");

/* The header's version, as a string and as a number, is the project's
 * (CMakeLists.txt) and the library's. */
static void test_version(void **st) {
  (void)st;
  assert_string_equal(air_version(), AIR_VERSION);
  assert_string_equal(air_version(), AIR_PROJECT_VERSION);
  unsigned major = 0, minor = 0, patch = 0;
  assert_int_equal(
      sscanf(AIR_PROJECT_VERSION, "%u.%u.%u", &major, &minor, &patch), 3);
  assert_int_equal(AIR_VERSION_NUM, (major << 16) | (minor << 8) | patch);
  char s[32];
  snprintf(s, sizeof(s), "%d.%d.%d", AIR_VERSION_MAJOR, AIR_VERSION_MINOR,
           AIR_VERSION_PATCH);
  assert_string_equal(s, AIR_VERSION);
}

/* The name functions agree on values outside their enums: a fixed static
 * string, never NULL. */
static void test_names_out_of_range(void **st) {
  (void)st;
  assert_string_equal(air_strerror(1), "unknown error");
  assert_string_equal(air_strerror(-1000), "unknown error");
  assert_string_equal(air_reason_name(AIR_REASON__COUNT), "unknown");
  assert_string_equal(air_reason_name((air_reason)-1), "unknown");
  assert_string_equal(air_reason_name((air_reason)1000), "unknown");
  assert_string_equal(air_finish_name((air_finish)1000), "");
  assert_string_equal(air_span_role_name((air_span_role)1000), "");
  /* In range they name the value; "unknown" is no reason's name. */
  assert_string_equal(air_strerror(AIR_EINVAL), "invalid argument");
  assert_string_equal(air_reason_name(AIR_REASON_NONE), "none");
  assert_string_equal(air_reason_name(AIR_REASON_ABORTED), "aborted");
  air_reason r = AIR_REASON_ABORTED;
  assert_int_equal(air_reason_from_name("unknown", 7, &r), AIR_ENOTFOUND);
  assert_int_equal(r, AIR_REASON_ABORTED);
}

static void test_call_observers(void **st) {
  (void)st;
  air_config *cfg = load();
  seen s = {0};
  air_observers obs = observers(&s);
  air_call_opts o = AIR_CALL_OPTS_INIT;
  o.fn = attempt;
  o.data = &s;
  o.observers = &obs;
  air_error err = {AIR_EINVAL, "stale"};
  assert_int_equal(air_call(cfg, NULL, "r", &o, NULL, NULL, &err), 0);
  assert_int_equal(err.code, 0);
  assert_string_equal(err.message, "");
  assert_int_equal(s.calls, 2);
  assert_int_equal(s.failed, 1);
  assert_int_equal(s.commits, 1);
  assert_string_equal(s.commit, "p/b#2");
  assert_int_equal(s.settled, 1);
  assert_int_equal(s.settled_n, 2);
  air_config_free(cfg);
}

/* A size below the struct's first version: AIR_EINVAL, nothing runs, no
 * observer fires, err says which struct. */
static void test_sizes_are_checked(void **st) {
  (void)st;
  air_config *cfg = load();
  seen s = {0};
  air_observers obs = observers(&s);
  air_call_opts o = AIR_CALL_OPTS_INIT;
  o.fn = attempt;
  o.data = &s;
  o.observers = &obs;
  air_error err;

  o.size = 0; /* memset-style init without the size */
  assert_int_equal(air_call(cfg, NULL, "r", &o, NULL, NULL, &err), AIR_EINVAL);
  assert_int_equal(err.code, AIR_EINVAL);
  assert_non_null(strstr(err.message, "air_call_opts"));
  o.size = offsetof(air_call_opts, rng); /* one field short */
  assert_int_equal(air_call(cfg, NULL, "r", &o, NULL, NULL, &err), AIR_EINVAL);
  o.size = sizeof(o);
  obs.size =
      offsetof(air_observers, on_settled); /* short of the first version */
  assert_int_equal(air_call(cfg, NULL, "r", &o, NULL, NULL, &err), AIR_EINVAL);
  assert_non_null(strstr(err.message, "air_observers"));
  /* The first version's observers (before on_span) are still accepted. */
  obs.size = offsetof(air_observers, on_span);
  assert_int_equal(air_call(cfg, NULL, "r", &o, NULL, NULL, &err), 0);
  assert_int_equal(s.settled, 1);
  s.settled = 0;
  s.calls = 0;
  assert_int_equal(air_call(cfg, NULL, "r", NULL, NULL, NULL, &err),
                   AIR_EINVAL);
  assert_int_equal(s.calls, 0);
  assert_int_equal(s.settled, 0);

  /* A caller built against a newer header (a bigger struct) is accepted;
   * the fields this library does not know are ignored. */
  struct {
    air_call_opts o;
    void *newer;
  } big;
  memset(&big, 0, sizeof(big));
  big.o = o;
  big.o.size = sizeof(big);
  big.newer = &big;
  obs.size = sizeof(obs);
  assert_int_equal(air_call(cfg, NULL, "r", &big.o, NULL, NULL, &err), 0);
  assert_int_equal(s.settled, 1);

  air_stream_opts so = AIR_STREAM_OPTS_INIT;
  so.size = sizeof(so) / 2;
  assert_int_equal(air_stream(cfg, NULL, "r", &so, NULL, NULL, &err),
                   AIR_EINVAL);
  assert_non_null(strstr(err.message, "air_stream_opts"));
  air_config_free(cfg);
}

/* ---- the records' sizes: air_part and air_failure ---------------------- */

typedef struct sized {
  size_t failure_size; /* f->size an attempt function was handed */
  int push_rc[4];      /* air_stream_push with sizes 0, INIT, 1, larger */
  unsigned parts;      /* parts delivered to on_part */
  size_t part_size;    /* their size, when all agree; 1 otherwise */
} sized;

static int sized_attempt(void *data, const air_attempt_info *info,
                         air_failure *f) {
  sized *s = data;
  (void)info;
  s->failure_size = f->size;
  return 0;
}

/* Pushes TEXT parts with each kind of size, then a FINISH. */
static int sized_produce(void *data, const air_attempt_info *info,
                         air_stream_sink *sink, air_failure *f) {
  sized *s = data;
  (void)info;
  (void)f;
  air_part zero = {.kind = AIR_PART_TEXT, .text = "a", .text_len = 1};
  air_part init = AIR_PART_INIT;
  init.kind = AIR_PART_TEXT;
  init.text = "b";
  init.text_len = 1;
  air_part bad = zero;
  bad.size = 1;
  /* A newer header's part: bigger, its extra field ignored. */
  struct {
    air_part p;
    uint64_t newer;
  } big;
  memset(&big, 0, sizeof(big));
  big.p = init;
  big.p.size = sizeof(big);
  big.p.text = "c";
  s->push_rc[0] = air_stream_push(sink, &zero);
  s->push_rc[1] = air_stream_push(sink, &init);
  s->push_rc[2] = air_stream_push(sink, &bad);
  s->push_rc[3] = air_stream_push(sink, &big.p);
  air_part fin = {.kind = AIR_PART_FINISH, .finish = AIR_FINISH_STOP};
  return air_stream_push(sink, &fin) != 0;
}

static int sized_part(void *data, const air_part *p) {
  sized *s = data;
  if (s->parts++ == 0)
    s->part_size = p->size;
  else if (p->size != s->part_size)
    s->part_size = 1;
  return 0;
}

/* The library sets size on every record it hands over; a record with size
 * 0 (zeroed, designated initializers) is the first version; a size below
 * the first version's is AIR_EINVAL. */
static void test_record_sizes(void **st) {
  (void)st;
  air_config *cfg = load();
  sized s;
  memset(&s, 0, sizeof(s));
  air_call_opts co = AIR_CALL_OPTS_INIT;
  co.fn = sized_attempt;
  co.data = &s;
  assert_int_equal(air_call(cfg, NULL, "p/b", &co, NULL, NULL, NULL), 0);
  assert_int_equal(s.failure_size, sizeof(air_failure));

  air_stream_opts so = AIR_STREAM_OPTS_INIT;
  so.fn = sized_produce;
  so.on_part = sized_part;
  so.data = &s;
  assert_int_equal(air_stream(cfg, NULL, "p/b", &so, NULL, NULL, NULL), 0);
  assert_int_equal(s.push_rc[0], 0);
  assert_int_equal(s.push_rc[1], 0);
  assert_int_equal(s.push_rc[2], AIR_EINVAL);
  assert_int_equal(s.push_rc[3], 0);
  assert_int_equal(s.parts, 4); /* a, b, c and the finish */
  assert_int_equal(s.part_size, sizeof(air_part));

  /* air_run_fail: size 0 and AIR_FAILURE_INIT are accepted, a size below
   * the first version's is not, and *act is then untouched. */
  air_run *run = NULL;
  air_action act;
  assert_int_equal(air_run_new(cfg, NULL, "r", NULL, 1000, &run, &act), 0);
  assert_int_equal(act.kind, AIR_ACT_ATTEMPT);
  unsigned id = act.attempt_id;
  air_failure f = AIR_FAILURE_INIT;
  f.size = sizeof(size_t);
  f.status = 529;
  f.type = "overloaded_error";
  air_action before;
  memset(&before, 0x5a, sizeof(before));
  air_action after = before;
  assert_int_equal(air_run_fail(run, id, &f, 1001, 0, &after), AIR_EINVAL);
  assert_memory_equal(&after, &before, sizeof(before));
  f.size = 0;
  assert_int_equal(air_run_fail(run, id, &f, 1001, 0, &act), 0);
  assert_int_equal(act.kind, AIR_ACT_ATTEMPT); /* the switch to p/b */
  assert_string_equal(act.target, "p/b");
  air_failure g = AIR_FAILURE_INIT;
  g.status = 500;
  assert_int_equal(air_run_fail(run, act.attempt_id, &g, 1002, 0, &act), 0);
  assert_int_equal(act.kind, AIR_ACT_FAIL);
  air_run_free(run);
  air_config_free(cfg);
}

/* ---- outputs untouched on failure -------------------------------------- */

/* A pointer no function returns: what an out parameter holds before a call
 * that must leave it alone. */
static char sentinel_obj;
#define SENTINEL ((void *)&sentinel_obj)

/* Every public function with an out parameter leaves it as it was when it
 * fails (docs/api.md, "Conventions"). */
static void test_outputs_untouched_on_failure(void **st) {
  (void)st;
  air_config *cfg = SENTINEL;
  assert_int_equal(air_config_parse("x", "routes: [", 9, NULL, NULL, &cfg),
                   AIR_ECONFIG);
  assert_ptr_equal(cfg, SENTINEL);
  assert_int_equal(air_config_parse("x", NULL, 3, NULL, NULL, &cfg),
                   AIR_EINVAL);
  assert_ptr_equal(cfg, SENTINEL);
  assert_int_equal(air_config_load("/nonexistent/a.yaml", NULL, NULL, &cfg),
                   AIR_EIO);
  assert_ptr_equal(cfg, SENTINEL);

  air_reason r = AIR_REASON_QUOTA;
  assert_int_equal(air_reason_from_name("nope", 4, &r), AIR_ENOTFOUND);
  assert_int_equal(r, AIR_REASON_QUOTA);

  cfg = load();
  /* The engine: a failing event leaves *act (and air_run_new's *out) as
   * they were; air_run_next with nothing pending too. */
  air_action before;
  memset(&before, 0x5a, sizeof(before));
  air_action act = before;
  air_run *run = SENTINEL;
  assert_int_equal(air_run_new(cfg, NULL, "nope", NULL, 1000, &run, &act),
                   AIR_ENOTFOUND);
  assert_ptr_equal(run, SENTINEL);
  assert_memory_equal(&act, &before, sizeof(act));
  run = NULL;
  air_action first;
  assert_int_equal(air_run_new(cfg, NULL, "r", NULL, 1000, &run, &first), 0);
  unsigned bad = first.attempt_id + 100; /* an attempt the run never made */
  air_failure f = {.status = 500};
  assert_int_equal(air_run_fail(run, bad, &f, 1001, 0, &act), AIR_ESTATE);
  assert_int_equal(air_run_first_part(run, bad, 1001, &act), AIR_ESTATE);
  assert_int_equal(air_run_ready_to_commit(run, bad, 1001, &act), AIR_ESTATE);
  assert_int_equal(air_run_succeed(run, bad, 1001, &act), AIR_ESTATE);
  assert_int_equal(air_run_wait_done(run, bad, 1001, &act), AIR_ESTATE);
  assert_int_equal(air_run_prefill_rejected(run, bad, 1001, &act), AIR_ESTATE);
  assert_int_equal(air_run_next(run, &act), 0);
  assert_memory_equal(&act, &before, sizeof(act));
  air_action done;
  assert_int_equal(air_run_succeed(run, first.attempt_id, 1002, &done), 0);
  assert_int_equal(done.kind, AIR_ACT_DONE);
  assert_int_equal(air_run_cancel(run, 1003, &act), AIR_ESTATE);
  assert_int_equal(air_run_hedge(run, 1003, &act), AIR_ESTATE);
  assert_memory_equal(&act, &before, sizeof(act));
  air_run_free(run);

  /* The drivers: *log and *n_log are set only when the call ran. */
  air_attempt *log = SENTINEL;
  size_t n = 12345;
  air_call_opts co = AIR_CALL_OPTS_INIT; /* no fn: AIR_EINVAL */
  assert_int_equal(air_call(cfg, NULL, "r", &co, &log, &n, NULL), AIR_EINVAL);
  co.fn = attempt;
  seen s = {0};
  co.data = &s;
  assert_int_equal(air_call(cfg, NULL, "nope", &co, &log, &n, NULL),
                   AIR_ENOTFOUND);
  air_stream_opts so = AIR_STREAM_OPTS_INIT;
  assert_int_equal(air_stream(cfg, NULL, "r", &so, &log, &n, NULL), AIR_EINVAL);
  assert_ptr_equal(log, SENTINEL);
  assert_int_equal(n, 12345);
  assert_int_equal(s.calls, 0);
  /* A call that ran sets them (p/a overloaded, p/b answers). */
  assert_int_equal(air_call(cfg, NULL, "r", &co, &log, &n, NULL), 0);
  assert_int_equal(n, 2);
  assert_string_equal(log[1].target, "p/b");
  air_attempt_log_free(log, n);

  /* The client. */
  air_client *c = SENTINEL;
  assert_int_equal(air_client_new(NULL, 1, &c, NULL), AIR_EINVAL);
  assert_ptr_equal(c, SENTINEL);
  assert_int_equal(air_global_init(), 0);
  c = NULL;
  assert_int_equal(air_client_new(cfg, 1, &c, NULL), 0);
  const char body[] =
      "{\"model\":\"r\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
  air_chat_result *res = SENTINEL;
  assert_int_equal(
      air_client_chat(c, (air_dialect)99, body, strlen(body), NULL, &res, NULL),
      AIR_EINVAL);
  assert_ptr_equal(res, SENTINEL);
  air_chat_opts o = AIR_CHAT_OPTS_INIT;
  o.size = 1;
  assert_int_equal(air_client_chat(c, AIR_DIALECT_OPENAI, body, strlen(body),
                                   &o, &res, NULL),
                   AIR_EINVAL);
  assert_ptr_equal(res, SENTINEL);
  air_client_free(c);

  /* The async handle. */
  air_async *a = SENTINEL;
  assert_int_equal(air_async_new(NULL, &a, NULL), AIR_EINVAL);
  assert_ptr_equal(a, SENTINEL);
  a = NULL;
  assert_int_equal(air_async_new(cfg, &a, NULL), 0);
  air_async_call *call = SENTINEL;
  const char nope[] =
      "{\"model\":\"nope\",\"messages\":[{\"role\":\"user\",\"content\":"
      "\"hi\"}]}";
  assert_int_equal(air_async_chat(a, AIR_DIALECT_OPENAI, nope, strlen(nope),
                                  NULL, &call, NULL),
                   AIR_ENOTFOUND);
  assert_int_equal(
      air_async_chat(a, AIR_DIALECT_OPENAI, "{", 1, NULL, &call, NULL) < 0, 1);
  assert_ptr_equal(call, SENTINEL);
  unsigned running = 7;
  assert_int_equal(air_async_perform(NULL, &running), AIR_EINVAL);
  assert_int_equal(running, 7);
  assert_int_equal(air_async_perform(a, &running), 0);
  assert_int_equal(running, 0);
  assert_true(air_async_fd(a) >= 0);
  assert_int_equal(air_async_timeout(a), -1); /* nothing in flight */
  air_async_free(a);
  air_global_cleanup();
  air_config_free(cfg);
}

static int produce(void *data, const air_attempt_info *info,
                   air_stream_sink *sink, air_failure *f) {
  (void)data;
  (void)info;
  (void)sink;
  (void)f;
  return 0;
}

static void test_unknown_model_detail(void **st) {
  (void)st;
  air_config *cfg = load();
  seen s = {0};
  air_observers obs = observers(&s);
  air_stream_opts so = AIR_STREAM_OPTS_INIT;
  so.fn = produce;
  so.observers = &obs;
  air_error err;
  assert_int_equal(air_stream(cfg, NULL, "nope/", &so, NULL, NULL, &err),
                   AIR_ENOTFOUND);
  assert_int_equal(err.code, AIR_ENOTFOUND);
  assert_non_null(strstr(err.message, "'nope/'"));
  assert_int_equal(air_stream(cfg, NULL, "q/a", &so, NULL, NULL, NULL),
                   AIR_ENOTFOUND);
  assert_int_equal(s.settled, 0);
  air_config_free(cfg);
}

static void test_client_opts_and_errors(void **st) {
  (void)st;
  air_config *cfg = load();
  air_error err;
  air_client *c = NULL;
  assert_int_equal(air_client_new(NULL, 1, &c, &err), AIR_EINVAL);
  assert_int_equal(err.code, AIR_EINVAL);
  assert_int_equal(air_global_init(), 0);
  assert_int_equal(air_client_new(cfg, 1, &c, &err), 0);
  seen s = {0};
  air_observers obs = observers(&s);
  air_chat_opts o = AIR_CHAT_OPTS_INIT;
  o.observers = &obs;
  air_chat_result *res = NULL;
  const char body[] =
      "{\"model\":\"nope\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}"
      "]}";
  /* Unknown model: the dialect's 404 body, err says which model. */
  assert_int_equal(air_client_chat(c, AIR_DIALECT_OPENAI, body, strlen(body),
                                   &o, &res, &err),
                   AIR_ENOTFOUND);
  assert_non_null(res);
  assert_int_equal(res->status, 404);
  assert_non_null(strstr(err.message, "'nope'"));
  air_chat_result_free(res);
  /* A bad body: AIR_EPARSE or AIR_EINVAL, detail in err. */
  res = NULL;
  int rc = air_client_chat(c, AIR_DIALECT_OPENAI, "{", 1, &o, &res, &err);
  assert_true(rc == AIR_EPARSE || rc == AIR_EINVAL);
  assert_int_equal(err.code, rc);
  assert_true(strlen(err.message) > 0);
  air_chat_result_free(res);
  /* A size too small: nothing is set, nothing fires. */
  o.size = sizeof(size_t);
  res = NULL;
  assert_int_equal(air_client_chat(c, AIR_DIALECT_OPENAI, body, strlen(body),
                                   &o, &res, &err),
                   AIR_EINVAL);
  assert_null(res);
  assert_non_null(strstr(err.message, "air_chat_opts"));
  assert_int_equal(s.settled, 0);
  assert_int_equal(s.commits + s.failed, 0);
  air_client_free(c);
  air_global_cleanup();
  air_config_free(cfg);
}

static void test_config_dump_file(void **st) {
  (void)st;
  air_config *cfg = load();
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  assert_non_null(f);
  assert_int_equal(air_config_dump(cfg, f), 0);
  assert_int_equal(fclose(f), 0);
  assert_non_null(strstr(buf, "targets"));
  free(buf);
  assert_int_equal(air_config_dump(cfg, NULL), AIR_EINVAL);
  /* A stream that cannot be written: AIR_EIO, not silence. */
  f = fopen("/dev/full", "w");
  if (f != NULL) {
    assert_int_equal(air_config_dump(cfg, f), AIR_EIO);
    fclose(f);
  }
  air_config_free(cfg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_version),
      cmocka_unit_test(test_names_out_of_range),
      cmocka_unit_test(test_call_observers),
      cmocka_unit_test(test_sizes_are_checked),
      cmocka_unit_test(test_record_sizes),
      cmocka_unit_test(test_outputs_untouched_on_failure),
      cmocka_unit_test(test_unknown_model_detail),
      cmocka_unit_test(test_client_opts_and_errors),
      cmocka_unit_test(test_config_dump_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
