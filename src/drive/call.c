/*
 * The synchronous drivers' shared loop and the generic driver air_call
 * (docs/design.md §7). Each call owns its run, so concurrent calls share only
 * the config (read only) and the state (locked), never a model choice.
 */
#include <stdlib.h>
#include <string.h>

#include "backoff.h"
#include "driver.h"
#include "engine.h"

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (p != NULL) memcpy(p, s, n);
  return p;
}

void air_attempt_log_free(air_attempt *log, size_t n) {
  if (log == NULL) return;
  for (size_t i = 0; i < n; i++) {
    free((char *)log[i].target);
    free((char *)log[i].message);
    free((char *)log[i].request_id);
    free((char *)log[i].field);
  }
  free(log);
}

/* A deep copy of the run's log that outlives the run; NULL on ENOMEM. */
static air_attempt *copy_log(const air_run *run, size_t *n_out) {
  size_t n = air_run_attempt_count(run);
  *n_out = 0;
  air_attempt *log = calloc(n ? n : 1, sizeof(*log));
  if (log == NULL) return NULL;
  for (size_t i = 0; i < n; i++) {
    log[i] = *air_run_attempt(run, i);
    log[i].target = dup_str(log[i].target);
    log[i].message = dup_str(log[i].message);
    log[i].request_id = dup_str(log[i].request_id);
    log[i].field = log[i].field ? dup_str(log[i].field) : NULL;
    *n_out = i + 1;
    if (!log[i].target || !log[i].message || !log[i].request_id ||
        (log[i].skipped && !log[i].field)) {
      air_attempt_log_free(log, i + 1);
      *n_out = 0;
      return NULL;
    }
  }
  return log;
}

/* Performs one ATTEMPT action and feeds its outcome to the run. */
static int do_attempt(const air__drive *d, air_run *run, air_action *act,
                      void **options) {
  const air_clock *clock = d->clock;
  uint64_t start = clock->now_ms(clock->data);
  air_attempt_info info = {
      .target = act->target,
      .attempt = act->attempt,
      .deadline_ms = act->deadline_ms,
      .timeout_ms = act->deadline_ms > start ? act->deadline_ms - start : 0,
      .cancel = d->cancel,
      .override_json = act->override_json,
      .options = *options,
  };
  if (act->attempt > 1 && d->obs.on_retry) {
    d->obs.on_retry(d->obs.data, &info, options);
    info.options = *options;
  }
  air__outcome out;
  memset(&out, 0, sizeof(out));
  out.f.size = sizeof(out.f); /* the attempt function fills this version */
  unsigned id = act->attempt_id;
  d->attempt(d->ctx, &info, run, id, &out);
  uint64_t now = clock->now_ms(clock->data);
  /* The failed attempt's entry: a switch appends the next one at once. */
  size_t failed = air_run_attempt_count(run) - 1;
  if (out.kind == AIR__OUT_CANCEL || air_cancel_is_set(d->cancel) ||
      (out.kind != AIR__OUT_OK && out.f.reason == AIR_REASON_ABORTED))
    return air_run_cancel(run, now, act);
  if (out.kind == AIR__OUT_OK) return air_run_succeed(run, id, now, act);
  int rc = out.kind == AIR__OUT_FINAL
               ? air__run_fail_final(run, id, &out.f, now, act)
               : air_run_fail(run, id, &out.f, now, clock->wall_ms(clock->data),
                              act);
  if (rc == 0 && d->obs.on_failed)
    d->obs.on_failed(d->obs.data, air_run_attempt(run, failed));
  return rc;
}

int air__observers_copy(const air_observers *in, air_observers *out,
                        air_error *err) {
  if (in == NULL) {
    memset(out, 0, sizeof(*out));
    return 0;
  }
  return air__opts_copy(out, sizeof(*out), in, AIR__OBSERVERS_SIZE_V0,
                        "air_observers", err);
}

/* err for a run that ended with rc (0 clears it). */
static int settle_error(int rc, const air_action *act, const char *model,
                        air_error *err) {
  switch (rc) {
    case 0:
      return air__error_set(err, 0, NULL);
    case AIR_EUPSTREAM:
      if (act == NULL) /* no attempt ran */
        return air__error_set(err, rc, "%s", air_strerror(rc));
      return air__error_set(err, rc,
                            "every attempt failed; the last: %s (HTTP %d)",
                            air_reason_name(act->reason), act->status);
    case AIR_ECANCELED:
      return air__error_set(err, rc, "cancelled by the caller");
    case AIR_ENOTFOUND:
      return air__error_set(
          err, rc, "model '%.200s' is not a route or provider/model", model);
    default:
      return air__error_set(err, rc, "%s", air_strerror(rc));
  }
}

int air__drive_run(const air_config *cfg, air_state *state, const char *model,
                   const air__drive *d, air_attempt **log, size_t *n_log,
                   air_error *err) {
  if (cfg == NULL || model == NULL || d->attempt == NULL)
    return air__error_set(err, AIR_EINVAL,
                          "cfg, model and the attempt function are required");
  air__drive dd = *d;
  if (dd.clock == NULL) dd.clock = air_clock_system();
  const air_clock *clock = dd.clock;
  uint64_t now = clock->now_ms(clock->data);
  uint64_t seed = now ^ (uint64_t)(uintptr_t)&seed;
  air_rng own = {air__splitmix64, &seed};
  if (dd.rng == NULL) dd.rng = &own;

  if (air_cancel_is_set(dd.cancel)) {
    /* Cancelled before anything started: no attempt, an empty log. */
    if (dd.obs.on_settled)
      dd.obs.on_settled(dd.obs.data, AIR_ECANCELED, NULL, 0);
    if (log) *log = NULL;
    if (n_log) *n_log = 0;
    return settle_error(AIR_ECANCELED, NULL, model, err);
  }
  air_run *run = NULL;
  air_action act;
  int rc = air_run_new(cfg, state, model, dd.rng, now, &run, &act);
  if (rc != 0) return settle_error(rc, NULL, model, err);
  /* air_call and air_stream cannot build a continuation request: a route's
   * continuation is ignored (docs/design.md §3.5), as hedging is (no racers:
   * the run is never asked for a hedge). */
  air_run_limit_continuation(run, AIR_CONTF_NEVER);

  void *options = dd.options;
  int final = AIR_EUPSTREAM;
  for (;;) {
    if (act.kind == AIR_ACT_DONE) {
      final = 0;
      break;
    }
    if (act.kind == AIR_ACT_FAIL) {
      if (act.reason == AIR_REASON_ABORTED)
        final = AIR_ECANCELED;
      else if (dd.settle_fail && dd.settle_fail(dd.ctx, act.reason) == 1)
        final = 0;
      else
        final = AIR_EUPSTREAM;
      break;
    }
    if (air_cancel_is_set(dd.cancel)) {
      rc = air_run_cancel(run, clock->now_ms(clock->data), &act);
    } else if (act.kind == AIR_ACT_WAIT) {
      int cancelled = clock->sleep(clock->data, act.wait_ms, dd.cancel);
      now = clock->now_ms(clock->data);
      rc = cancelled ? air_run_cancel(run, now, &act)
                     : air_run_wait_done(run, act.attempt_id, now, &act);
    } else {
      rc = do_attempt(&dd, run, &act, &options);
    }
    if (rc != 0) break;
  }
  if (rc != 0) final = rc;

  size_t n = air_run_attempt_count(run);
  /* The log entries are contiguous: entry 0's address is the array. */
  if (dd.obs.on_settled)
    dd.obs.on_settled(dd.obs.data, final, n ? air_run_attempt(run, 0) : NULL,
                      n);
  if (log != NULL || n_log != NULL) {
    size_t copied = 0;
    air_attempt *copy = log != NULL ? copy_log(run, &copied) : NULL;
    if (log) *log = copy;
    if (n_log) *n_log = copied;
  }
  settle_error(final, &act, model, err);
  air_run_free(run);
  return final;
}

/* ---- air_call
 * ---------------------------------------------------------------- */

typedef struct call_ctx {
  air_call_opts o;
  air_observers obs;
} call_ctx;

/* One attempt; the attempt that succeeds is the one that commits. */
static void call_attempt(void *ctx, const air_attempt_info *info, air_run *run,
                         unsigned attempt_id, air__outcome *out) {
  const call_ctx *c = ctx;
  (void)run;
  (void)attempt_id;
  out->kind =
      c->o.fn(c->o.data, info, &out->f) == 0 ? AIR__OUT_OK : AIR__OUT_FAIL;
  if (out->kind == AIR__OUT_OK && c->obs.on_commit &&
      !air_cancel_is_set(c->o.cancel))
    c->obs.on_commit(c->obs.data, info->target, info->attempt);
}

int air_call(const air_config *cfg, air_state *state, const char *model,
             const air_call_opts *opts, air_attempt **log, size_t *n_log,
             air_error *err) {
  call_ctx c;
  int rc = air__opts_copy(&c.o, sizeof(c.o), opts, AIR__CALL_OPTS_SIZE_V0,
                          "air_call_opts", err);
  if (rc == 0) rc = air__observers_copy(c.o.observers, &c.obs, err);
  if (rc != 0) return rc;
  if (c.o.fn == NULL)
    return air__error_set(err, AIR_EINVAL, "air_call_opts.fn is NULL");
  air__drive d = {
      .attempt = call_attempt,
      .ctx = &c,
      .obs = c.obs,
      .options = c.o.options,
      .cancel = c.o.cancel,
      .clock = c.o.clock,
      .rng = c.o.rng,
  };
  return air__drive_run(cfg, state, model, &d, log, n_log, err);
}
