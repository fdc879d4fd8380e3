/*
 * The log thread of a gateway worker process (docs/design.md §5, Logs). Loop
 * threads hand whole lines over to a bounded buffer under a mutex held only
 * for a memcpy; one thread per process writes them to stderr. So a stalled
 * stderr (a pipe nobody reads) stalls only this thread: lines that do not
 * fit in the buffer are dropped and counted, requests go on. stderr's file
 * description is shared with the parent shell and is never made
 * non-blocking: the writes here simply block while the reader is away.
 *
 * Writes carry whole lines, at most AIR__LOG_WRITE_BYTES each (PIPE_BUF, so
 * a write is never interleaved with another process's; a longer line goes
 * alone). air__log_stop writes every line accepted before it returns.
 *
 * The writer gathers: woken by the first line after a quiet spell, it
 * waits AIR__LOG_GATHER_MS more (or until half the buffer is full, or the
 * stop) and writes what came in one go. A gateway answering one request
 * at a time otherwise pays a wake-up, a context switch and a write per
 * request (~3.5 futex calls and a write per request at one request in
 * flight); a line reaches stderr at most AIR__LOG_GATHER_MS later.
 *
 * Two buffers of cap bytes take turns: the loop threads append to `lines`
 * from its first byte; the writer swaps it with `spare` (emptied) and writes
 * the swapped one outside the mutex. Lines always start at offset 0, so a
 * buffer's pages are touched only up to the largest backlog. (A ring whose
 * head moved on by every line walked through all of its 4 MiB, faulting in
 * a fresh page every dozen lines: the worker's RSS grew ~300 bytes a
 * request until the ring wrapped, see docs/decisions.md.)
 */
#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gw_int.h"

struct air__log {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  char *lines;     /* bytes [0, len) hold lines not yet written */
  size_t cap, len; /* both buffers hold cap bytes */
  char *spare;     /* the writer's (the one it writes or last wrote) */
  bool stop;
  bool idle; /* the writer waits for a first line (no deadline) */
  pthread_t thread;
  _Atomic uint64_t dropped;
};

void air__log_write_lines(const char *p, size_t n) {
  while (n > 0) {
    size_t k = n;
    if (k > AIR__LOG_WRITE_BYTES) {
      k = AIR__LOG_WRITE_BYTES;
      while (k > 0 && p[k - 1] != '\n') k--;
      if (k == 0) {
        const char *nl = memchr(p, '\n', n);
        k = nl ? (size_t)(nl - p) + 1 : n;
      }
    }
    size_t done = 0;
    while (done < k) {
      ssize_t w = write(STDERR_FILENO, p + done, k - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return; /* stderr is gone: the lines are dropped */
      done += (size_t)w;
    }
    p += k;
    n -= k;
  }
}

/* Whether the writer must be woken now: it waits for a first line, or the
 * lines may soon not fit (it would otherwise go on gathering). */
static bool wake_writer(const air__log *l) {
  return l->idle || l->len >= l->cap / 2 || l->stop;
}

/* ts + ms on CLOCK_MONOTONIC (the condition variable's clock). */
static struct timespec deadline_in(unsigned ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

static void *log_main(void *arg) {
  air__log *l = arg;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    while (l->len == 0 && !l->stop) {
      l->idle = true;
      pthread_cond_wait(&l->cv, &l->mu);
    }
    l->idle = false;
    if (l->len == 0) break; /* stopping and nothing left */
    /* Gather what follows for a moment: one write for many lines. */
    struct timespec until = deadline_in(AIR__LOG_GATHER_MS);
    while (!wake_writer(l))
      if (pthread_cond_timedwait(&l->cv, &l->mu, &until) == ETIMEDOUT) break;
    char *out = l->lines;
    size_t n = l->len;
    l->lines = l->spare;
    l->spare = out;
    l->len = 0;
    pthread_mutex_unlock(&l->mu);
    air__log_write_lines(out, n); /* never under the mutex */
    pthread_mutex_lock(&l->mu);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

int air__log_start(size_t cap, air__log **out) {
  *out = NULL;
  air__log *l = calloc(1, sizeof(*l));
  if (l == NULL) return AIR_ENOMEM;
  l->cap = cap;
  l->lines = malloc(cap);
  l->spare = malloc(cap);
  atomic_init(&l->dropped, 0);
  int rc = AIR_ENOMEM;
  if (l->lines == NULL || l->spare == NULL) goto fail;
  /* Past memory, the system refusing a lock or a thread is AIR_EIO. */
  rc = AIR_EIO;
  if (pthread_mutex_init(&l->mu, NULL) != 0) goto fail;
  pthread_condattr_t ca;
  bool cv_ok = pthread_condattr_init(&ca) == 0;
  if (cv_ok) {
    cv_ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
            pthread_cond_init(&l->cv, &ca) == 0;
    pthread_condattr_destroy(&ca);
  }
  if (!cv_ok) {
    pthread_mutex_destroy(&l->mu);
    goto fail;
  }
  if (pthread_create(&l->thread, NULL, log_main, l) != 0) {
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    goto fail;
  }
  *out = l;
  return 0;
fail:
  free(l->lines);
  free(l->spare);
  free(l);
  return rc;
}

void air__log_put(air__log *l, const char *p, size_t n) {
  if (l == NULL) {
    air__log_write_lines(p, n);
    return;
  }
  uint64_t dropped = 0;
  pthread_mutex_lock(&l->mu);
  if (l->stop) {
    pthread_mutex_unlock(&l->mu);
    air__log_write_lines(p, n); /* after the thread: synchronously */
    return;
  }
  bool added = false;
  while (n > 0) {
    const char *nl = memchr(p, '\n', n);
    size_t k = nl ? (size_t)(nl - p) + 1 : n;
    if (k <= l->cap - l->len) {
      memcpy(l->lines + l->len, p, k);
      l->len += k;
      added = true;
    } else {
      dropped++;
    }
    p += k;
    n -= k;
  }
  if (added && wake_writer(l)) pthread_cond_signal(&l->cv);
  pthread_mutex_unlock(&l->mu);
  if (dropped) atomic_fetch_add(&l->dropped, dropped);
}

const _Atomic uint64_t *air__log_dropped(const air__log *l) {
  return &l->dropped;
}

void air__log_stop(air__log *l) {
  if (l == NULL) return;
  pthread_mutex_lock(&l->mu);
  l->stop = true;
  pthread_cond_signal(&l->cv);
  pthread_mutex_unlock(&l->mu);
  pthread_join(l->thread, NULL);
  pthread_cond_destroy(&l->cv);
  pthread_mutex_destroy(&l->mu);
  free(l->lines);
  free(l->spare);
  free(l);
}
