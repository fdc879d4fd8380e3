/*
 * The trace exporter thread (otlp.h). Modelled on the log thread (log.c):
 * workers hand encoded spans to a bounded ring under a mutex held only for
 * a memcpy; this thread takes whole spans out, never under the mutex while
 * it talks to the collector. The ring holds span objects each followed by
 * '\n' (the encoder never writes a raw newline), so a batch is a run of
 * whole lines.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "limits.h"
#include "otlp.h"

struct air__exporter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  char *ring;
  size_t cap, head, len; /* bytes [head, head+len) mod cap hold spans */
  size_t spans;          /* spans in the ring */
  bool stop;
  pthread_t thread;
  _Atomic uint64_t exported;
  _Atomic uint64_t dropped;
  /* The export thread's own. */
  CURL *curl;
  struct curl_slist *headers;
  char *url;
  char *service;
  air__sampler sampler;
  uint64_t delay_ms, timeout_ms;
  char *batch;   /* spans taken out of the ring */
  air__buf body; /* the request */
};

static size_t discard(char *p, size_t size, size_t n, void *data) {
  (void)p;
  (void)data;
  return size * n;
}

/* POSTs n spans (the bytes of batch, len bytes); counts them either way. */
static void post(air__exporter *e, size_t len, size_t n) {
  air__buf_reset(&e->body);
  long status = 0;
  if (air__otlp_request(e->service, e->batch, len, &e->body) == 0) {
    curl_easy_setopt(e->curl, CURLOPT_POSTFIELDS, e->body.p);
    curl_easy_setopt(e->curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     (curl_off_t)e->body.n);
    if (curl_easy_perform(e->curl) == CURLE_OK)
      curl_easy_getinfo(e->curl, CURLINFO_RESPONSE_CODE, &status);
  }
  if (status >= 200 && status < 300)
    atomic_fetch_add(&e->exported, n);
  else
    atomic_fetch_add(&e->dropped, n);
}

/* Takes up to a batch of whole spans out of the ring (under mu) into
 * e->batch; returns the bytes taken, *n the spans. Copies at most a batch
 * and one span (two memcpy at a wrap), then finds the spans' ends with
 * memchr: never a byte-by-byte walk of the ring. */
static size_t take(air__exporter *e, size_t *n) {
  size_t want = e->len;
  if (want > AIR__MAX_TRACE_BATCH_BYTES + AIR__MAX_SPAN_BYTES + 1)
    want = AIR__MAX_TRACE_BATCH_BYTES + AIR__MAX_SPAN_BYTES + 1;
  size_t first = e->cap - e->head < want ? e->cap - e->head : want;
  memcpy(e->batch, e->ring + e->head, first);
  memcpy(e->batch + first, e->ring, want - first);
  size_t got = 0, spans = 0;
  while (got < want && spans < AIR__MAX_TRACE_BATCH_SPANS) {
    const char *nl = memchr(e->batch + got, '\n', want - got);
    if (nl == NULL) break; /* cannot happen: the ring holds whole spans */
    size_t end = (size_t)(nl - e->batch) + 1;
    if (end > AIR__MAX_TRACE_BATCH_BYTES && spans > 0) break;
    got = end;
    spans++;
  }
  e->head = (e->head + got) % e->cap;
  e->len -= got;
  /* Emptied: the next span starts at the ring's first byte, so its pages
   * are touched only as far as the largest backlog (a head moving on by
   * every span faulted in all of the queue's 4 MiB as RSS). */
  if (e->len == 0) e->head = 0;
  e->spans -= spans;
  *n = spans;
  return got;
}

static void deadline_in(struct timespec *ts, uint64_t ms) {
  clock_gettime(CLOCK_MONOTONIC, ts);
  ts->tv_sec += (time_t)(ms / 1000);
  ts->tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  }
}

static void *export_main(void *arg) {
  air__exporter *e = arg;
  pthread_mutex_lock(&e->mu);
  for (;;) {
    while (e->spans == 0 && !e->stop) pthread_cond_wait(&e->cv, &e->mu);
    if (e->spans == 0) break; /* stopping, nothing left */
    /* A batch fills up or the delay ends (or a stop), whichever first. */
    struct timespec until;
    deadline_in(&until, e->delay_ms);
    while (!e->stop && e->spans < AIR__MAX_TRACE_BATCH_SPANS &&
           e->len < AIR__MAX_TRACE_BATCH_BYTES)
      if (pthread_cond_timedwait(&e->cv, &e->mu, &until) == ETIMEDOUT) break;
    bool last = e->stop;
    size_t n = 0;
    size_t len = take(e, &n);
    pthread_mutex_unlock(&e->mu);
    post(e, len, n); /* never under the mutex */
    pthread_mutex_lock(&e->mu);
    if (last && e->spans > 0) {
      /* Stopping: one batch was tried; the rest would hold the exit up by
       * a timeout each against a stalled collector. */
      atomic_fetch_add(&e->dropped, e->spans);
      e->spans = e->len = 0;
    }
  }
  pthread_mutex_unlock(&e->mu);
  return NULL;
}

const air__sampler *air__exporter_sampler(const air__exporter *e) {
  return &e->sampler;
}

void air__exporter_put(air__exporter *e, const char *span, size_t n) {
  if (e == NULL) return;
  bool ok = n > 0 && n <= AIR__MAX_SPAN_BYTES && memchr(span, '\n', n) == NULL;
  pthread_mutex_lock(&e->mu);
  bool fits = ok && !e->stop && n + 1 <= e->cap - e->len;
  if (fits) {
    size_t at = (e->head + e->len) % e->cap;
    size_t first = e->cap - at < n ? e->cap - at : n;
    memcpy(e->ring + at, span, first);
    memcpy(e->ring, span + first, n - first);
    e->ring[(at + n) % e->cap] = '\n';
    e->len += n + 1;
    e->spans++;
    /* Wake the thread for the first span and for a full batch. */
    if (e->spans == 1 || e->spans >= AIR__MAX_TRACE_BATCH_SPANS ||
        e->len >= AIR__MAX_TRACE_BATCH_BYTES)
      pthread_cond_signal(&e->cv);
  }
  pthread_mutex_unlock(&e->mu);
  if (!fits) atomic_fetch_add(&e->dropped, 1);
}

const _Atomic uint64_t *air__exporter_exported(const air__exporter *e) {
  return &e->exported;
}

const _Atomic uint64_t *air__exporter_dropped(const air__exporter *e) {
  return &e->dropped;
}

static char *dupz(const char *s) {
  size_t n = strlen(s);
  char *p = malloc(n + 1);
  if (p) memcpy(p, s, n + 1);
  return p;
}

static void free_parts(air__exporter *e) {
  if (e->curl) curl_easy_cleanup(e->curl);
  curl_slist_free_all(e->headers);
  air__buf_cleanup(&e->body);
  free(e->url);
  free(e->service);
  free(e->ring);
  free(e->batch);
  free(e);
}

/* The export headers: JSON, then the configured ones (values are secrets:
 * they live in the slist only and are never logged). */
static int make_headers(air__exporter *e, const air__otel *o) {
  struct curl_slist *l =
      curl_slist_append(NULL, "Content-Type: application/json");
  if (l == NULL) return AIR_ENOMEM;
  e->headers = l;
  air__buf line;
  air__buf_init(&line, AIR__MAX_OTLP_HEADERS_BYTES + 64);
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < o->n_headers; i++) {
    air__buf_reset(&line);
    air__buf_puts(&line, o->headers[i].name);
    air__buf_puts(&line, o->headers[i].value[0] ? ": " : ";");
    air__buf_puts(&line, o->headers[i].value);
    rc = air__buf_error(&line);
    if (rc == 0 && (l = curl_slist_append(e->headers, line.p)) == NULL)
      rc = AIR_ENOMEM;
    if (rc == 0) e->headers = l;
  }
  if (line.p) memset(line.p, 0, line.cap);
  air__buf_cleanup(&line);
  return rc;
}

int air__exporter_start(const air__otel *o, air__exporter **out) {
  *out = NULL;
  if (o == NULL || !o->enabled) return AIR_EINVAL;
  air__exporter *e = calloc(1, sizeof(*e));
  if (e == NULL) return AIR_ENOMEM;
  atomic_init(&e->exported, 0);
  atomic_init(&e->dropped, 0);
  e->cap = AIR__MAX_TRACE_QUEUE_BYTES;
  e->ring = malloc(e->cap);
  e->batch = malloc(AIR__MAX_TRACE_BATCH_BYTES + AIR__MAX_SPAN_BYTES + 1);
  e->url = dupz(o->endpoint);
  e->service = dupz(o->service_name ? o->service_name : "airetry");
  e->sampler = o->sampler;
  e->delay_ms = o->delay_ms ? o->delay_ms : AIR__OTLP_DELAY_MS;
  e->timeout_ms = o->timeout_ms ? o->timeout_ms : AIR__OTLP_TIMEOUT_MS;
  air__buf_init(&e->body,
                AIR__MAX_TRACE_BATCH_BYTES + AIR__MAX_SPAN_BYTES + 4096);
  e->curl = curl_easy_init();
  if (e->ring == NULL || e->batch == NULL || e->url == NULL ||
      e->service == NULL || e->curl == NULL || make_headers(e, o) != 0) {
    free_parts(e);
    return AIR_ENOMEM;
  }
  CURL *c = e->curl;
  curl_easy_setopt(c, CURLOPT_URL, e->url);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, e->headers);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)e->timeout_ms);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)e->timeout_ms);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "airetry/" AIR_VERSION);
  /* No "Expect: 100-continue" wait on a large batch. */
  curl_easy_setopt(c, CURLOPT_EXPECT_100_TIMEOUT_MS, 0L);
  pthread_condattr_t ca;
  int rc = AIR_EIO;
  if (pthread_condattr_init(&ca) != 0) goto fail;
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  if (pthread_mutex_init(&e->mu, NULL) != 0) {
    pthread_condattr_destroy(&ca);
    goto fail;
  }
  if (pthread_cond_init(&e->cv, &ca) != 0) {
    pthread_condattr_destroy(&ca);
    pthread_mutex_destroy(&e->mu);
    goto fail;
  }
  pthread_condattr_destroy(&ca);
  if (pthread_create(&e->thread, NULL, export_main, e) != 0) {
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    goto fail;
  }
  *out = e;
  return 0;
fail:
  free_parts(e);
  return rc;
}

void air__exporter_stop(air__exporter *e) {
  if (e == NULL) return;
  pthread_mutex_lock(&e->mu);
  e->stop = true;
  pthread_cond_signal(&e->cv);
  pthread_mutex_unlock(&e->mu);
  pthread_join(e->thread, NULL);
  pthread_cond_destroy(&e->cv);
  pthread_mutex_destroy(&e->mu);
  free_parts(e);
}
