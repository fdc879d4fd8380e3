/*
 * The loop shared by the synchronous drivers (air_call, air_stream): start a
 * run, perform each ATTEMPT through a runner, sleep each WAIT on the caller's
 * clock, honour the cancel token, fire the observers, copy the log out.
 */
#ifndef AIR__DRIVER_H
#define AIR__DRIVER_H

#include "airetry.h"
#include "error.h"

typedef enum air__outcome_kind {
  AIR__OUT_OK,     /* the attempt succeeded */
  AIR__OUT_FAIL,   /* failed before commit: the policy decides */
  AIR__OUT_FINAL,  /* failed after commit: final */
  AIR__OUT_CANCEL, /* the caller cancelled */
} air__outcome_kind;

typedef struct air__outcome {
  air__outcome_kind kind;
  air_failure f; /* FAIL, FINAL */
} air__outcome;

typedef struct air__drive {
  /* Performs attempt attempt_id; run tells its target (air__run_target).
   * A runner that releases content reports it first with
   * air_run_ready_to_commit(run, attempt_id, ...) and releases on COMMIT. */
  void (*attempt)(void *ctx, const air_attempt_info *info, air_run *run,
                  unsigned attempt_id, air__outcome *out);
  /* The run failed for good with reason: may turn that into an answer
   * (returns 1) — a judged complete answer, docs/design.md §3.3. May be NULL.
   */
  int (*settle_fail)(void *ctx, air_reason reason);
  void *ctx;
  air_observers obs; /* the caller's (air__observers_copy); zero: none */
  void *options;
  air_cancel *cancel;
  const air_clock *clock;
  const air_rng *rng;
} air__drive;

/* Runs the loop; err (may be NULL) gets the detail of a failure. */
int air__drive_run(const air_config *cfg, air_state *state, const char *model,
                   const air__drive *d, air_attempt **log, size_t *n_log,
                   air_error *err);

/*
 * The caller's observers (NULL: none) into *out, a zeroed copy of the
 * version the caller was built with. AIR_EINVAL when in->size is too small.
 */
int air__observers_copy(const air_observers *in, air_observers *out,
                        air_error *err);

/* The minimum sizes of the caller-filled structs: up to the last field of
 * their first version (0.1). A later minor version adds fields at their
 * ends and leaves these as they are. */
#define AIR__OBSERVERS_SIZE_V0 AIR__SIZE_TO(air_observers, on_settled)
#define AIR__CALL_OPTS_SIZE_V0 AIR__SIZE_TO(air_call_opts, rng)
#define AIR__STREAM_OPTS_SIZE_V0 AIR__SIZE_TO(air_stream_opts, json_response)

#endif
