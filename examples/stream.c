/*
 * The stream driver: parts are held until the first content part, so a
 * canned refusal from the first target never reaches the caller; the second
 * target's answer streams through, and on_commit fires once.
 *
 *   cc stream.c $(pkg-config --cflags --libs airetry)
 */
#include <stdio.h>
#include <string.h>

#include <airetry.h>

static const char config[] =
    "providers:\n"
    "  - {name: main, api: openai, base_url: http://127.0.0.1:9/v1}\n"
    "  - {name: backup, api: anthropic, base_url: http://127.0.0.1:9}\n"
    "routes:\n"
    "  - name: smart\n"
    "    targets: [main/gpt-4o, backup/claude-sonnet-4-5]\n"
    "    refusal: {phrases: [\"I'm sorry, but I cannot\"]}\n";

static int push_text(air_stream_sink *sink, const char *s) {
  air_part p;
  memset(&p, 0, sizeof(p));
  p.kind = AIR_PART_TEXT;
  p.text = s;
  p.text_len = strlen(s);
  return air_stream_push(sink, &p);
}

/* One streamed attempt: in real code, parts decoded from an upstream stream. */
static int attempt(void *data, const air_attempt_info *info,
                   air_stream_sink *sink, air_failure *f) {
  (void)data;
  (void)f;
  const char *const refusal[] = {"I'm sorry, ", "but I cannot ", "help.", NULL};
  const char *const answer[] = {"The capital ", "of France ", "is Paris.",
                                NULL};
  const char *const *words = info->attempt == 1 ? refusal : answer;
  for (int i = 0; words[i] != NULL; i++)
    if (push_text(sink, words[i]) != 0) return 1; /* judged: stop now */
  air_part fin;
  memset(&fin, 0, sizeof(fin));
  fin.kind = AIR_PART_FINISH;
  fin.finish = AIR_FINISH_STOP;
  return air_stream_push(sink, &fin) != 0;
}

static int on_part(void *data, const air_part *p) {
  (void)data;
  if (p->kind == AIR_PART_TEXT) printf("%.*s", (int)p->text_len, p->text);
  if (p->kind == AIR_PART_FINISH)
    printf("  [finish: %s]\n", air_finish_name(p->finish));
  fflush(stdout);
  return 0;
}

static void on_commit(void *data, const char *target, unsigned attempt) {
  (void)data;
  printf("[committed to %s on attempt %u] ", target, attempt);
}

int main(void) {
  air_config *cfg = NULL;
  if (air_config_parse("inline", config, sizeof(config) - 1, NULL, NULL,
                       &cfg) != 0)
    return 1;
  air_observers obs = AIR_OBSERVERS_INIT;
  obs.on_commit = on_commit;
  air_stream_opts opts = AIR_STREAM_OPTS_INIT;
  opts.fn = attempt;
  opts.on_part = on_part;
  opts.observers = &obs;
  air_attempt *log = NULL;
  size_t n = 0;
  air_error err;
  int rc = air_stream(cfg, NULL, "smart", &opts, &log, &n, &err);
  if (rc != 0) fprintf(stderr, "air_stream: %s\n", err.message);
  for (size_t i = 0; i < n; i++)
    printf("attempt %u %s: %s\n", log[i].n, log[i].target,
           log[i].reason ? air_reason_name(log[i].reason) : "answered");
  air_attempt_log_free(log, n);
  air_config_free(cfg);
  return rc == 0 ? 0 : 1;
}
