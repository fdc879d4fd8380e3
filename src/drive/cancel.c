/*
 * Cancel tokens and the system clock. A token is a flag under a mutex with a
 * condition variable, so a trigger from any thread ends every sleep at once.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "airetry.h"
#include "cancel.h"

struct air_cancel {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  atomic_bool set;
  air__cancel_watcher *watchers; /* under mu; a doubly linked list */
};

int air_cancel_new(air_cancel **out) {
  if (out == NULL) return AIR_EINVAL;
  air_cancel *c = calloc(1, sizeof(*c));
  if (c == NULL) return AIR_ENOMEM;
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  int rc = pthread_cond_init(&c->cv, &attr);
  pthread_condattr_destroy(&attr);
  if (rc != 0 || pthread_mutex_init(&c->mu, NULL) != 0) {
    /* The system refused a lock: not an allocation failure. */
    if (rc == 0) pthread_cond_destroy(&c->cv);
    free(c);
    return AIR_EIO;
  }
  atomic_init(&c->set, false);
  *out = c;
  return 0;
}

void air_cancel_free(air_cancel *c) {
  if (c == NULL) return;
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

void air_cancel_trigger(air_cancel *c) {
  if (c == NULL) return;
  pthread_mutex_lock(&c->mu);
  atomic_store(&c->set, true);
  pthread_cond_broadcast(&c->cv);
  for (air__cancel_watcher *w = c->watchers; w != NULL; w = w->next)
    w->fn(w->data);
  pthread_mutex_unlock(&c->mu);
}

void air__cancel_watch(air_cancel *c, air__cancel_watcher *w) {
  if (c == NULL || w == NULL) return;
  pthread_mutex_lock(&c->mu);
  w->prev = NULL;
  w->next = c->watchers;
  if (c->watchers != NULL) c->watchers->prev = w;
  c->watchers = w;
  w->linked = true;
  if (atomic_load(&c->set)) w->fn(w->data);
  pthread_mutex_unlock(&c->mu);
}

void air__cancel_unwatch(air_cancel *c, air__cancel_watcher *w) {
  if (c == NULL || w == NULL) return;
  pthread_mutex_lock(&c->mu);
  if (w->linked) {
    if (w->prev != NULL)
      w->prev->next = w->next;
    else
      c->watchers = w->next;
    if (w->next != NULL) w->next->prev = w->prev;
    w->prev = w->next = NULL;
    w->linked = false;
  }
  pthread_mutex_unlock(&c->mu);
}

bool air_cancel_is_set(const air_cancel *c) {
  return c != NULL && atomic_load(&((air_cancel *)c)->set);
}

static struct timespec deadline_after(uint64_t ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += (time_t)(ms / 1000);
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

/* The system clock's sleep: up to ms of real time, 1 at once when c (may
 * be NULL) is triggered, 0 when the time passed. */
static int sys_sleep(void *data, uint64_t ms, air_cancel *c) {
  (void)data;
  if (c == NULL) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    return 0;
  }
  struct timespec until = deadline_after(ms);
  int cancelled;
  pthread_mutex_lock(&c->mu);
  for (;;) {
    if (atomic_load(&c->set)) break;
    if (pthread_cond_timedwait(&c->cv, &c->mu, &until) == ETIMEDOUT) break;
  }
  cancelled = atomic_load(&c->set) ? 1 : 0;
  pthread_mutex_unlock(&c->mu);
  return cancelled;
}

static uint64_t sys_now(void *data) {
  (void)data;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t sys_wall(void *data) {
  (void)data;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static const air_clock system_clock = {sys_now, sys_wall, sys_sleep, NULL};

const air_clock *air_clock_system(void) {
  return &system_clock;
}
