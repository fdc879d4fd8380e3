/*
 * The integration harness: runs `airetry mock` as a child process, reads its
 * attempt log, and drives the client against it (docs/mock.md).
 *
 * Every wait here is bounded in count and in time; a mock that does not
 * start, answer or stop within its bound is a test failure, never a hang.
 * The helpers do not call cmocka asserts (some run on other threads): they
 * return 0 or -1 and print what went wrong to stderr.
 */
#ifndef AIR__IT_HARNESS_H
#define AIR__IT_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "airetry.h"

#ifndef AIRETRY_BIN
#error "AIRETRY_BIN (path of the airetry binary) must be defined"
#endif
#ifndef AIR_SOURCE_DIR
#error "AIR_SOURCE_DIR must be defined"
#endif

/* The directory of the mock scripts. */
#define IT_SCRIPTS AIR_SOURCE_DIR "/tests/integration/scripts/"

/* Bounds of the harness (milliseconds, counts). */
#define IT_START_MS 15000u   /* the mock prints its port within this */
#define IT_STOP_MS 5000u     /* SIGTERM, then SIGKILL after this */
#define IT_HTTP_MS 5000u     /* one request to /__mock/... */
#define IT_MAX_LOG 512u      /* log entries kept */
#define IT_MAX_TEXT 16384u   /* delivered text kept per call */
#define IT_MAX_CONFIG 16384u /* generated config text */

/* A running mock. */
typedef struct it_mock {
  pid_t pid;
  int port;
  char out_path[64]; /* the child's stdout (first line: the port) */
  char err_path[64]; /* the child's stderr */
  /* it_now_ms just before and after the last reset: the mock's clock read
   * 0 somewhere in between. */
  uint64_t reset_before, reset_after;
} it_mock;

/*
 * Starts `AIRETRY_BIN mock --listen 127.0.0.1:0 [--script script]` and waits
 * (at most IT_START_MS) for `listening on http://127.0.0.1:PORT` on its
 * stdout. script may be NULL. Returns 0 or -1 (the child is then stopped).
 */
int it_mock_start(it_mock *m, const char *script);

/*
 * The suite's one mock and the cmocka fixtures every suite uses around it:
 * it_group_setup (air_global_init, start the mock with the script given to
 * it_suite_use_script, if any), it_group_teardown (stop it), it_reset_mock
 * (POST /__mock/reset before a test) and it_release (it_release_all after a
 * test, so a failed assert leaves no leak for LeakSanitizer to report).
 */
it_mock *it_suite(void);
void it_suite_use_script(const char *script);
int it_group_setup(void **state);
int it_group_teardown(void **state);
int it_reset_mock(void **state);
int it_release(void **state);
/* A test of the suite: the mock reset before it, what it tracked released
 * after it. */
#define IT_TEST(f) cmocka_unit_test_setup_teardown(f, it_reset_mock, it_release)
/* IT_CASE=glob in the environment: only the matching tests run (call it
 * first in main). */
void it_case_filter(void);
/* SIGTERM, waitpid bounded by IT_STOP_MS, then SIGKILL. Returns the exit
 * status (0 for a clean exit) or -1. Safe on a mock that never started. */
int it_mock_stop(it_mock *m);
/* POST /__mock/reset (expects 204). Returns 0 or -1. */
int it_mock_reset(it_mock *m);
/* GET path into *out (NUL-terminated, malloc'd). Returns the HTTP status
 * or -1. */
int it_http_get(const it_mock *m, const char *path, char **out);

/* One entry of /__mock/log; -1 stands for null. */
typedef struct it_entry {
  int64_t t_ms;
  char model[256];
  int attempt;
  char api[16];
  bool stream;
  char fault[256];
  int status;
  bool hung_up;
  int64_t hung_up_ms;
  int64_t end_ms;
} it_entry;

typedef struct it_log {
  size_t n;
  it_entry e[IT_MAX_LOG];
} it_log;

/* GET /__mock/log, parsed. Returns 0 or -1 (bad status or JSON). */
int it_mock_log(const it_mock *m, it_log *log);
/*
 * Polls the log (every 10 ms, at most timeout_ms) until it has at least n
 * entries and every entry has end_ms set. Returns 0 when it settled, -1
 * otherwise (*log then holds the last fetch).
 */
int it_mock_log_settled(const it_mock *m, size_t n, unsigned timeout_ms,
                        it_log *log);
/*
 * "Nothing more reached the mock": it_mock_log_settled for n entries, then
 * one more fetch of the log (a new connection to the mock, opened after
 * everything the client sent before the call: an attempt still on its way
 * shows up in it) which must still hold exactly n entries, all ended.
 * Returns 0, or -1 with the difference printed (*log holds the last fetch).
 */
int it_mock_log_exactly(const it_mock *m, size_t n, unsigned timeout_ms,
                        it_log *log);
/* Entries of the log still open (end_ms null) whose model is model (NULL:
 * any model); -1 when the log cannot be read. */
int it_mock_open(const it_mock *m, const char *model);
/*
 * Checks that the log's models are exactly the n names given, in order.
 * Prints the difference and returns false otherwise.
 */
bool it_log_models(const it_log *log, size_t n, const char *const *models);
/* Prints the log to stderr (for failing tests). */
void it_log_print(const it_log *log);

/*
 * Heap objects a test holds, released by it_release_all (call it from a
 * teardown) when an assert jumped out of the test before its own cleanup, so
 * LeakSanitizer reports only what the library leaks. Released last-in
 * first-out. Thread-safe. it_chat results, clients and their configs are
 * tracked by the helpers below; anything else with it_track.
 */
typedef void (*it_free_fn)(void *p);
void it_track(void *p, it_free_fn fn);
/* Forgets p (the caller frees it). */
void it_untrack(void *p);
void it_release_all(void);

/* Monotonic milliseconds, the clock the client's attempt log uses. */
uint64_t it_now_ms(void);
void it_sleep_ms(unsigned ms);
/*
 * The one way a test waits: polls cond(data) every IT_POLL_MS until it
 * returns true or timeout_ms passed. Returns 0 when it held, -1 otherwise.
 */
#define IT_POLL_MS 2u
int it_wait_for(bool (*cond)(void *data), void *data, unsigned timeout_ms);

/* The canonical answer of docs/mock.md: "[M] w1 w2 ... wN" into buf. */
void it_answer(const char *model, unsigned tokens, char *buf, size_t cap);

/*
 * A client on a config made of the mock's providers and tail (YAML: routes,
 * defaults...). Providers: "mo" (api openai, http://127.0.0.1:PORT/v1) and
 * "ma" (api anthropic, http://127.0.0.1:PORT). Returns 0 or -1.
 */
typedef struct it_client {
  air_config *cfg;
  air_client *client;
} it_client;
int it_client_new(const it_mock *m, const char *tail, unsigned workers,
                  it_client *out);
/* The same with the whole config text given (%d in it is not expanded). */
int it_client_new_text(const char *yaml, unsigned workers, it_client *out);
void it_client_free(it_client *c);

/* One chat call and everything the callbacks saw. */
typedef struct it_call {
  /* in */
  air_dialect dialect;
  const char *model;
  bool stream; /* with a callback (on_part) or not (cb NULL) */
  air_cancel *cancel;
  unsigned stop_after; /* on_part returns 1 after this many parts (0: never) */
  unsigned failed_sleep_ms; /* on_failed sleeps this long (a slow observer) */
  /* out */
  int rc;
  air_chat_result *res;
  char text[IT_MAX_TEXT]; /* TEXT parts delivered, concatenated */
  size_t text_n;
  bool text_overflow;
  unsigned n_parts;
  unsigned n_text;
  unsigned n_error;      /* AIR_PART_ERROR parts */
  bool part_after_error; /* something was delivered after an error part */
  char error_name[64];   /* the error part's name */
  unsigned n_finish;
  air_finish finish;
  unsigned n_commit;
  char commit_target[256];
  unsigned commit_attempt;
  unsigned n_failed;       /* on_failed calls */
  uint64_t t_start, t_end; /* it_now_ms around air_client_chat */
  uint64_t t_commit;       /* it_now_ms at on_commit */
  uint64_t t_last_part;    /* it_now_ms at the last part (on the worker) */
  /* n_text and n_failed as other threads may read them while the call
   * runs (it_call_texts, it_call_failures). */
  unsigned ev_text, ev_failed;
} it_call;

/* Runs c->model through the client. Sets every out field. Returns rc. */
int it_chat(air_client *client, it_call *c);
/* The atomic counts, for a thread that waits on the call's progress. */
unsigned it_call_texts(const it_call *c);
unsigned it_call_failures(const it_call *c);
/* Frees c->res. */
void it_call_cleanup(it_call *c);
/* Prints the client's attempt log of c (for failing tests). */
void it_call_print(const it_call *c);

#endif
