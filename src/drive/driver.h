/*
 * The loop shared by the synchronous drivers (air_call, air_stream): start a
 * run, perform each ATTEMPT through a runner, sleep each WAIT on the caller's
 * clock, honour the cancel token, fire the observers, copy the log out.
 */
#ifndef AIR__DRIVER_H
#define AIR__DRIVER_H

#include "airetry.h"

typedef enum air__outcome_kind {
  AIR__OUT_OK,      /* the attempt succeeded */
  AIR__OUT_FAIL,    /* failed before commit: the policy decides */
  AIR__OUT_FINAL,   /* failed after commit: final */
  AIR__OUT_CANCEL,  /* the caller cancelled */
} air__outcome_kind;

typedef struct air__outcome {
  air__outcome_kind kind;
  air_failure f;  /* FAIL, FINAL */
} air__outcome;

typedef struct air__drive {
  /* Performs attempt attempt_id; run tells its target (air__run_target).
   * A runner that releases content reports it first with
   * air_run_first_content(run, attempt_id, ...) and releases on COMMIT. */
  void (*attempt)(void *ctx, const air_attempt_info *info, air_run *run,
                  unsigned attempt_id, air__outcome *out);
  /* The run failed for good with reason: may turn that into an answer
   * (returns 1) — a judged complete answer, DESIGN.md 3.3. May be NULL. */
  int (*settle_fail)(void *ctx, air_reason reason);
  void *ctx;
  /* The caller's observers and data, as in air_call_opts. */
  void *data;
  void (*on_error)(void *data, const air_attempt *failed);
  void (*on_retry)(void *data, const air_attempt_info *next, void **options);
  void (*on_settled)(void *data, int rc, const air_attempt *log, size_t n);
  void *options;
  air_cancel *cancel;
  const air_clock *clock;
  const air_rng *rng;
} air__drive;

int air__drive_run(const air_config *cfg, air_state *state, const char *model,
                   const air__drive *d, air_attempt **log, size_t *n_log);

#endif
