/*
 * `airetry chat --config FILE --model NAME [--stream] [--system TEXT] PROMPT`:
 * one call through the client. The answer goes to stdout (as it arrives
 * with --stream); a line per failed attempt and a summary go to stderr.
 * Exit codes: 0 answered, 1 upstream failure after all attempts, 2 usage or
 * config error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "airetry.h"
#include "cli.h"

static const char usage[] =
    "usage: airetry chat --config FILE --model NAME [--stream] [--system TEXT] "
    "PROMPT\n";

static void print_diag(void *data, const air_diag *d) {
  int *errors = data;
  if (d->severity == AIR_DIAG_ERROR) (*errors)++;
  fprintf(stderr, "%s:%d:%d: %s%s\n", d->file, d->line, d->column,
          d->severity == AIR_DIAG_ERROR ? "" : "warning: ", d->message);
}

static void on_failed(void *data, const air_attempt *a) {
  (void)data;
  if (a->skipped) {
    fprintf(stderr, "airetry: skipped %s: %s\n", a->target, a->message);
    return;
  }
  fprintf(stderr, "airetry: attempt %u %s: %s", a->n, a->target,
          air_reason_name(a->reason));
  if (a->status) fprintf(stderr, " (HTTP %d)", a->status);
  fprintf(stderr, " after %llu ms", (unsigned long long)a->ms);
  if (a->wait_ms)
    fprintf(stderr, "; waiting %llu ms%s", (unsigned long long)a->wait_ms,
            a->hint ? " (Retry-After)" : "");
  fputc('\n', stderr);
}

static void on_commit(void *data, const char *target, unsigned attempt) {
  (void)data;
  fprintf(stderr, "airetry: answering: %s (attempt %u)\n", target, attempt);
}

static int on_part(void *data, const air_part *p) {
  (void)data;
  if (p->kind == AIR_PART_TEXT || p->kind == AIR_PART_REFUSAL) {
    fwrite(p->text, 1, p->text_len, stdout);
    fflush(stdout);
  }
  return 0;
}

/* The request body: an OpenAI chat.completions request. */
static char *build_body(const char *model, const char *system,
                        const char *prompt) {
  json_t *msgs = json_array();
  if (system != NULL)
    json_array_append_new(
        msgs, json_pack("{s:s,s:s}", "role", "system", "content", system));
  json_array_append_new(
      msgs, json_pack("{s:s,s:s}", "role", "user", "content", prompt));
  json_t *body = json_pack("{s:s,s:o}", "model", model, "messages", msgs);
  char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;
  json_decref(body);
  return s;
}

int air__cmd_chat(int argc, char **argv) {
  const char *config = NULL, *model = NULL, *system = NULL, *prompt = NULL;
  bool stream = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(usage, stdout);
      return AIR__EXIT_OK;
    } else if (strcmp(a, "--stream") == 0) {
      stream = true;
    } else if ((strcmp(a, "--config") == 0 || strcmp(a, "-c") == 0) &&
               i + 1 < argc) {
      config = argv[++i];
    } else if (strcmp(a, "--model") == 0 && i + 1 < argc) {
      model = argv[++i];
    } else if (strcmp(a, "--system") == 0 && i + 1 < argc) {
      system = argv[++i];
    } else if (a[0] == '-' && a[1] != '\0') {
      fprintf(stderr, "airetry chat: unknown or incomplete option '%s'\n%s", a,
              usage);
      return AIR__EXIT_USAGE;
    } else if (prompt == NULL) {
      prompt = a;
    } else {
      fprintf(stderr, "airetry chat: one PROMPT only (quote it)\n%s", usage);
      return AIR__EXIT_USAGE;
    }
  }
  if (config == NULL || model == NULL || prompt == NULL) {
    fputs(usage, stderr);
    return AIR__EXIT_USAGE;
  }
  int errors = 0;
  air_config *cfg = NULL;
  if (air_config_load(config, print_diag, &errors, &cfg) != 0 || cfg == NULL) {
    if (errors == 0) fprintf(stderr, "airetry chat: cannot read %s\n", config);
    return AIR__EXIT_USAGE;
  }
  char *body = build_body(model, system, prompt);
  air_client *client = NULL;
  air_error err = {0, ""};
  int rc = body != NULL ? air_global_init() : AIR_ENOMEM;
  if (rc == 0) rc = air_client_new(cfg, 1, &client, &err);
  if (rc != 0) {
    fprintf(stderr, "airetry chat: %s\n",
            err.message[0] ? err.message : air_strerror(rc));
    free(body);
    air_config_free(cfg);
    return AIR__EXIT_FAIL;
  }
  /* --stream: parts as they come and a line at commit; else the answer
   * whole. A line per failed attempt either way. */
  air_observers obs = AIR_OBSERVERS_INIT;
  obs.on_failed = on_failed;
  if (stream) obs.on_commit = on_commit;
  air_chat_opts opts = AIR_CHAT_OPTS_INIT;
  opts.observers = &obs;
  if (stream) opts.on_part = on_part;
  air_chat_result *res = NULL;
  rc = air_client_chat(client, AIR_DIALECT_OPENAI, body, strlen(body), &opts,
                       &res, &err);
  /* Without --stream the answer is printed whole, once it is complete. */
  int exit_code = AIR__EXIT_OK;
  if (rc == 0) {
    if (!stream) fwrite(res->text, 1, res->text_len, stdout);
    fputc('\n', stdout);
    fprintf(stderr,
            "airetry: %zu attempt%s, answered by %s, first content %llu ms, "
            "total %llu ms\n",
            res->n_log, res->n_log == 1 ? "" : "s", res->target,
            (unsigned long long)res->first_content_ms,
            (unsigned long long)res->total_ms);
  } else if (rc == AIR_ENOTFOUND || rc == AIR_EINVAL || rc == AIR_EPARSE) {
    fprintf(stderr, "airetry chat: %.*s\n", res ? (int)res->body_len : 0,
            res ? res->body : "");
    exit_code = AIR__EXIT_USAGE;
  } else {
    unsigned made = 0;
    for (size_t i = 0; res && i < res->n_log; i++) made += !res->log[i].skipped;
    fprintf(stderr, "airetry: failed after %u attempt%s (%s, HTTP %d):\n", made,
            made == 1 ? "" : "s", res ? air_reason_name(res->reason) : "?",
            res ? res->status : 0);
    for (size_t i = 0; res && i < res->n_log; i++) {
      const air_attempt *a = &res->log[i];
      if (a->skipped) {
        fprintf(stderr, "  -  %-32s skipped: %s\n", a->target, a->message);
        continue;
      }
      fprintf(stderr, "  %u  %-32s %-20s %3d  %6llu ms  %s\n", a->n, a->target,
              air_reason_name(a->reason), a->status, (unsigned long long)a->ms,
              a->message);
    }
    exit_code = AIR__EXIT_FAIL;
  }
  air_chat_result_free(res);
  air_client_free(client);
  air_global_cleanup();
  free(body);
  air_config_free(cfg);
  return exit_code;
}
