/*
 * The client: real upstream calls with retries, deadlines and failover.
 * One synchronous call (the answer held whole) and one streamed call (parts
 * as they arrive, after commit), from a config file.
 *
 *   cc client.c $(pkg-config --cflags --libs airetry)
 *   ./a.out airetry.yaml smart "Say hello"
 *
 * Try it without keys against the fault-injecting mock:
 *   airetry mock --listen 127.0.0.1:8089 &
 *   (providers with base_url http://127.0.0.1:8089/v1 and model names such
 *    as primary@503@k=1: see docs/mock.md)
 */
#include <stdio.h>
#include <string.h>

#include <airetry.h>

static void print_diag(void *data, const air_diag *d) {
  (void)data;
  fprintf(stderr, "%s:%d:%d: %s\n", d->file, d->line, d->column, d->message);
}

static void on_failed(void *data, const air_attempt *a) {
  (void)data;
  fprintf(stderr, "  attempt %u on %s failed: %s (HTTP %d), next in %llu ms\n",
          a->n, a->target, air_reason_name(a->reason), a->status,
          (unsigned long long)a->wait_ms);
}

static int on_part(void *data, const air_part *p) {
  (void)data;
  if (p->kind == AIR_PART_TEXT) {
    printf("%.*s", (int)p->text_len, p->text);
    fflush(stdout);
  }
  return 0; /* non-zero would cancel the call */
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s CONFIG MODEL PROMPT\n", argv[0]);
    return 2;
  }
  air_config *cfg = NULL;
  if (air_config_load(argv[1], print_diag, NULL, &cfg) != 0) return 2;
  air_global_init();
  air_client *client = NULL;
  air_error err;
  if (air_client_new(cfg, 1, &client, &err) != 0) {
    fprintf(stderr, "air_client_new: %s\n", err.message);
    return 1;
  }

  /* A request body in the OpenAI dialect (AIR_DIALECT_ANTHROPIC works too). */
  char body[2048];
  snprintf(body, sizeof(body),
           "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"%"
           "s\"}]}",
           argv[2], argv[3]);

  /* One observer set for both calls; the answer held whole, then streamed. */
  air_observers obs = AIR_OBSERVERS_INIT;
  obs.on_failed = on_failed;
  air_chat_opts quiet = AIR_CHAT_OPTS_INIT;
  quiet.observers = &obs;
  air_chat_result *res = NULL;
  int rc = air_client_chat(client, AIR_DIALECT_OPENAI, body, strlen(body),
                           &quiet, &res, &err);
  if (rc == 0)
    printf("sync: %s -> %.*s\n", res->target, (int)res->text_len, res->text);
  else
    printf("sync: %s\n", err.message);
  air_chat_result_free(res);

  air_chat_opts streaming = quiet;
  streaming.on_part = on_part;
  printf("stream: ");
  rc = air_client_chat(client, AIR_DIALECT_OPENAI, body, strlen(body),
                       &streaming, &res, &err);
  printf("\n%s after %zu attempt(s), first content at %llu ms\n",
         rc == 0 ? "answered" : err.message, res ? res->n_log : 0,
         res ? (unsigned long long)res->first_content_ms : 0ull);
  air_chat_result_free(res);

  air_client_free(client);
  air_global_cleanup();
  air_config_free(cfg);
  return rc == 0 ? 0 : 1;
}
