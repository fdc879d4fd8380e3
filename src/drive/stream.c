/*
 * The stream driver air_stream (docs/design.md §7): the shared driver loop with
 * a commit gate between the attempt's parts and the caller's sink. Before
 * commit the gate holds everything and failures go to the policy; after
 * commit parts flow through and a failure is final, delivered as one ERROR
 * part.
 */
#include <string.h>

#include "classify.h"
#include "commit.h"
#include "driver.h"
#include "engine.h"

typedef struct stream_ctx stream_ctx;

struct air_stream_sink {
  stream_ctx *ctx;
};

struct stream_ctx {
  air_stream_opts o; /* the caller's, as its version has them */
  air_observers obs;
  const air_clock *clock;
  air__gate gate;
  air_stream_sink sink;
  air_attempt_info info; /* a copy: a judged answer is released after the
                            attempt's own info is gone (settle_fail) */
  air_run *run;          /* the run, while an attempt may report content */
  unsigned att_id;       /* that attempt's id */
  bool notified;         /* on_commit fired */
  bool stop;             /* on_part asked to stop */
  air_reason late;       /* an error event after commit */
  char late_msg[256];
};

static uint64_t now_of(const stream_ctx *c) {
  return c->clock->now_ms(c->clock->data);
}

/* Every part the caller is handed has its size set (the gate's are the
 * library's own, size 0). */
static int deliver(stream_ctx *c, const air_part *p) {
  air_part q = *p;
  q.size = sizeof(q);
  if (c->o.on_part != NULL && c->o.on_part(c->o.data, &q) != 0) {
    c->stop = true;
    return 1;
  }
  return 0;
}

/*
 * The gate releases events here: commit notice, then each part. The first
 * release of an attempt is reported to the engine as its first content and
 * goes on only when the engine answers COMMIT for that attempt. A judged
 * answer released after the run ended (stream_settle) is the run's own
 * final decision: there is no attempt in flight to report (c->run NULL).
 */
static int emit(void *data, const air__gate_event *ev) {
  stream_ctx *c = data;
  if (!c->notified) {
    if (c->run != NULL) {
      air_action act;
      int rc = air_run_ready_to_commit(c->run, c->att_id, now_of(c), &act);
      if (rc != 0) return rc;
      if (act.kind != AIR_ACT_COMMIT || act.attempt_id != c->att_id)
        return AIR_ESTATE;
    }
    c->notified = true;
    if (c->obs.on_commit)
      c->obs.on_commit(c->obs.data, c->info.target, c->info.attempt);
  }
  for (size_t i = 0; i < ev->n_parts; i++)
    if (deliver(c, &ev->parts[i]) != 0) return 1;
  return 0;
}

int air_stream_push(air_stream_sink *sink, const air_part *p) {
  if (sink == NULL || p == NULL ||
      !air__record_size_ok(p->size, AIR__PART_SIZE_V0))
    return AIR_EINVAL;
  stream_ctx *c = sink->ctx;
  if (c->stop || c->late != AIR_REASON_NONE || air_cancel_is_set(c->o.cancel))
    return 1;
  if (p->kind == AIR_PART_ERROR && c->gate.committed) {
    /* Final: the driver reports it once, as the failure of the attempt. */
    char type[64] = "";
    size_t n = p->name_len < sizeof(type) - 1 ? p->name_len : sizeof(type) - 1;
    if (p->name) memcpy(type, p->name, n);
    type[n] = '\0';
    n = p->text_len < sizeof(c->late_msg) - 1 ? p->text_len
                                              : sizeof(c->late_msg) - 1;
    if (p->text) memcpy(c->late_msg, p->text, n);
    c->late_msg[n] = '\0';
    c->late = air__classify(200, type, NULL, c->late_msg, AIR_TRANSPORT_OK);
    return 1;
  }
  air__gate_event ev = {
      .parts = p,
      .n_parts = 1,
      .flags = p->kind == AIR_PART_ERROR ? AIR__EV_ERROR : 0,
  };
  int rc = air__gate_feed(&c->gate, &ev, now_of(c));
  if (rc < 0 && c->stop) return 1;
  return rc;
}

int air_stream_malformed(air_stream_sink *sink) {
  if (sink == NULL) return AIR_EINVAL;
  return air__gate_malformed(&sink->ctx->gate);
}

uint64_t air_stream_deadline(const air_stream_sink *sink, air_reason *which) {
  return air__gate_deadline(&sink->ctx->gate, which);
}

static void failure_from_gate(const air__gate *g, air_failure *f) {
  memset(f, 0, sizeof(*f));
  f->reason = g->reason;
  f->message = g->message;
}

/* A failure after commit: final, and the sink hears of it once. */
static void fail_after_commit(stream_ctx *c, air__outcome *out) {
  air_reason r = out->f.reason;
  if (c->gate.state == AIR__GATE_FAILED) {
    failure_from_gate(&c->gate, &out->f);
    r = c->gate.reason;
  } else if (c->late != AIR_REASON_NONE) {
    memset(&out->f, 0, sizeof(out->f));
    out->f.reason = r = c->late;
    out->f.message = c->late_msg;
  } else if (r == AIR_REASON_NONE) {
    r = air__classify(out->f.status, out->f.type, out->f.code, out->f.message,
                      out->f.transport);
    out->f.reason = r;
  }
  out->kind = AIR__OUT_FINAL;
  air_part err;
  memset(&err, 0, sizeof(err));
  err.kind = AIR_PART_ERROR;
  err.name = air_reason_name(r);
  err.name_len = strlen(err.name);
  err.text = out->f.message ? out->f.message : "";
  err.text_len = strlen(err.text);
  deliver(c, &err);
}

static void stream_attempt(void *ctx, const air_attempt_info *info,
                           air_run *run, unsigned attempt_id,
                           air__outcome *out) {
  stream_ctx *c = ctx;
  c->info = *info;
  c->run = run;
  c->att_id = attempt_id;
  /* Per-part deadlines are the target's own (a slow reasoning model may
   * have a longer first_chunk_ms). */
  const air__target *t = air__run_target(run);
  c->gate.cfg.first_chunk_ms = t->timeouts.first_chunk_ms;
  c->gate.cfg.chunk_ms = t->timeouts.chunk_ms;
  c->late = AIR_REASON_NONE;
  air__gate_begin(&c->gate, now_of(c));
  int rc = c->o.fn(c->o.data, info, &c->sink, &out->f);
  air__gate *g = &c->gate;
  if (c->stop || air_cancel_is_set(c->o.cancel)) {
    out->kind = AIR__OUT_CANCEL;
    return;
  }
  if (g->committed) {
    if (rc == 0 && g->state != AIR__GATE_FAILED && c->late == AIR_REASON_NONE) {
      air__gate_end(g, true, now_of(c));
      out->kind = AIR__OUT_OK;
      return;
    }
    fail_after_commit(c, out);
    return;
  }
  if (g->state == AIR__GATE_FAILED) {
    failure_from_gate(g, &out->f);
    out->kind = AIR__OUT_FAIL;
    return;
  }
  if (rc == 0) {
    air__gate_end(g, true, now_of(c));
    if (c->stop) {
      out->kind = AIR__OUT_CANCEL;
    } else if (g->state == AIR__GATE_DONE) {
      out->kind = AIR__OUT_OK;
    } else {
      failure_from_gate(g, &out->f);
      out->kind = AIR__OUT_FAIL;
    }
    return;
  }
  out->kind = AIR__OUT_FAIL;
}

/* The last failure was a judged complete answer: deliver it unchanged. */
static int stream_settle(void *ctx, air_reason reason) {
  stream_ctx *c = ctx;
  (void)reason;
  c->run = NULL; /* the run is over: this release is its decision */
  if (c->gate.state != AIR__GATE_FAILED || !c->gate.judged) return 0;
  return air__gate_release_judged(&c->gate) == 0 && !c->stop ? 1 : 0;
}

int air_stream(const air_config *cfg, air_state *state, const char *model,
               const air_stream_opts *opts, air_attempt **log, size_t *n_log,
               air_error *err) {
  stream_ctx c;
  memset(&c, 0, sizeof(c));
  int rc = air__opts_copy(&c.o, sizeof(c.o), opts, AIR__STREAM_OPTS_SIZE_V0,
                          "air_stream_opts", err);
  if (rc == 0) rc = air__observers_copy(c.o.observers, &c.obs, err);
  if (rc != 0) return rc;
  if (cfg == NULL || model == NULL || c.o.fn == NULL)
    return air__error_set(err, AIR_EINVAL,
                          "cfg, model and air_stream_opts.fn are required");
  /* The route's policy decides commit mode, phrases and limits. */
  const air__policy *pol = air__config_policy(cfg, model);
  if (pol == NULL)
    return air__error_set(err, AIR_ENOTFOUND,
                          "model '%.200s' is not a route or provider/model",
                          model);
  c.clock = c.o.clock ? c.o.clock : air_clock_system();
  c.sink.ctx = &c;
  air__gate_cfg gc = air__gate_cfg_of(pol, pol->commit, c.o.json_response);
  rc = air__gate_init(&c.gate, &gc, emit, &c);
  if (rc != 0) {
    air__gate_cleanup(&c.gate);
    return air__error_set(err, rc, "%s", air_strerror(rc));
  }
  air__drive d = {
      .attempt = stream_attempt,
      .settle_fail = stream_settle,
      .ctx = &c,
      .obs = c.obs,
      .options = c.o.options,
      .cancel = c.o.cancel,
      .clock = c.clock,
      .rng = c.o.rng,
  };
  rc = air__drive_run(cfg, state, model, &d, log, n_log, err);
  air__gate_cleanup(&c.gate);
  return rc;
}
