/*
 * The log thread (src/gateway/log.c): lines handed over reach stderr whole
 * and in order; lines that do not fit while stderr is stalled are dropped
 * and counted, and every accepted one is written by air__log_stop; and the
 * process's memory does not grow with the lines that went through (the
 * buffers are touched only as far as the largest backlog: a ring walked
 * through its 4 MiB, ~300 bytes of RSS per request in `make soak`).
 *
 * stderr is a pipe the test reads (dup2 over fd 2, restored after).
 */
#include "helpers.h"

#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "gw_int.h"
#include "tl_proc.h"

#define LINE_BYTES 300    /* about one request's log line */
#define READ_WAIT_MS 5000 /* bound of one wait for a line */

typedef struct piped {
  int rd;       /* the test's end */
  int saved_fd; /* the original stderr */
} piped;

/* Setup: stderr becomes a pipe whose read end is the test's. */
static int pipe_stderr(void **state) {
  piped *s = calloc(1, sizeof(*s));
  int fds[2];
  if (s == NULL || pipe(fds) != 0) return -1;
  s->saved_fd = dup(STDERR_FILENO);
  if (s->saved_fd < 0 || dup2(fds[1], STDERR_FILENO) < 0) return -1;
  close(fds[1]);
  s->rd = fds[0];
  *state = s;
  return 0;
}

/* Teardown (also after a failed assertion): stderr is the original again,
 * which also closes the pipe's last write end. */
static int restore_stderr(void **state) {
  piped *s = *state;
  if (s == NULL) return 0;
  int rc = dup2(s->saved_fd, STDERR_FILENO) < 0 ? -1 : 0;
  close(s->saved_fd);
  close(s->rd);
  free(s);
  return rc;
}

/* Reads exactly n bytes (each wait bounded by READ_WAIT_MS). */
static void read_exact(int fd, char *p, size_t n) {
  size_t got = 0;
  while (got < n) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&pfd, 1, READ_WAIT_MS), 1);
    ssize_t r = read(fd, p + got, n - got);
    assert_true(r > 0);
    got += (size_t)r;
  }
}

/* Line i: LINE_BYTES bytes, its number first, '\n' last. */
static void make_line(char *p, unsigned i) {
  memset(p, 'x', LINE_BYTES);
  int k = snprintf(p, LINE_BYTES, "%08u ", i);
  p[k] = ' '; /* snprintf's NUL */
  p[LINE_BYTES - 1] = '\n';
}

/* 20,000 lines of 300 bytes (6 MB, more than the 4 MiB the buffers hold),
 * handed over 100 at a time, each batch read back before the next: every
 * line arrives whole and in order, none is dropped, the last line of a
 * batch arrives with no line after it to push it out (the writer's gather
 * wait ends by itself), and RSS grows by far less than a buffer (the ring
 * this replaced grew by its whole 4 MiB here). */
static void test_memory_follows_backlog_not_throughput(void **state) {
  enum { N = 20000, BATCH = 100 };
  piped *s = *state;
  air__log *l = NULL;
  assert_int_equal(air__log_start(AIR__LOG_RING_BYTES, &l), 0);
  long before = tl_rss_kib();
  static char lines[BATCH][LINE_BYTES];
  char got[LINE_BYTES];
  for (unsigned i = 0; i < N; i += BATCH) {
    for (unsigned k = 0; k < BATCH; k++) {
      make_line(lines[k], i + k);
      air__log_put(l, lines[k], LINE_BYTES);
    }
    for (unsigned k = 0; k < BATCH; k++) {
      read_exact(s->rd, got, sizeof(got));
      assert_memory_equal(got, lines[k], LINE_BYTES);
    }
  }
  long after = tl_rss_kib();
  assert_int_equal(atomic_load(air__log_dropped(l)), 0);
  air__log_stop(l);
  print_message("VmRSS %ld kB -> %ld kB over %d lines\n", before, after, N);
  assert_true(after - before < 1024);
}

typedef struct drain {
  int fd;
  size_t got;
  unsigned next; /* the number line `got` should carry next */
  bool in_order;
} drain;

/* Reads stderr's pipe to EOF, checking the line numbers follow each other. */
static void *drain_main(void *arg) {
  drain *d = arg;
  char line[LINE_BYTES];
  size_t have = 0;
  for (;;) {
    ssize_t r = read(d->fd, line + have, sizeof(line) - have);
    if (r <= 0) break;
    have += (size_t)r;
    d->got += (size_t)r;
    if (have == sizeof(line)) {
      if (strtoul(line, NULL, 10) != d->next || line[LINE_BYTES - 1] != '\n')
        d->in_order = false;
      d->next++;
      have = 0;
    }
  }
  return NULL;
}

/* stderr stalled (nobody reads the pipe): a small log takes what fits, drops
 * the rest and counts it; once stderr is read again, air__log_stop writes
 * every accepted line, whole and in order. */
static void test_stalled_stderr_drops_and_counts(void **state) {
  enum { CAP = 16 * LINE_BYTES, N = 2000 };
  piped *s = *state;
  /* The writer blocks on the full pipe (64 KiB) long before N lines. */
  air__log *l = NULL;
  assert_int_equal(air__log_start(CAP, &l), 0);
  char line[LINE_BYTES];
  unsigned accepted = 0;
  for (unsigned i = 0; i < N; i++) {
    uint64_t d0 = atomic_load(air__log_dropped(l));
    make_line(line, accepted);
    air__log_put(l, line, sizeof(line));
    if (atomic_load(air__log_dropped(l)) == d0) accepted++;
  }
  uint64_t dropped = atomic_load(air__log_dropped(l));
  assert_int_equal(dropped + accepted, N);
  assert_true(dropped > 0);
  /* At most the pipe, the line in the writer's hand and CAP wait. */
  assert_true(accepted < N / 2);

  drain d = {.fd = s->rd, .in_order = true};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, drain_main, &d), 0);
  air__log_stop(l);
  /* EOF for the reader: no write end left once stderr is the original. */
  assert_true(dup2(s->saved_fd, STDERR_FILENO) >= 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(d.got, (size_t)accepted * LINE_BYTES);
  assert_int_equal(d.next, accepted);
  assert_true(d.in_order);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_memory_follows_backlog_not_throughput, pipe_stderr,
          restore_stderr),
      cmocka_unit_test_setup_teardown(test_stalled_stderr_drops_and_counts,
                                      pipe_stderr, restore_stderr),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
