/*
 * The client on the caller's own event loop: two calls at once on one async
 * handle, one streamed and one held whole, driven by a plain poll(2) loop.
 * Any loop that can wait on a descriptor with a timeout drives it the same
 * way (a libuv program: a uv_poll_t on air_async_fd and a uv_timer_t).
 *
 *   cc async.c $(pkg-config --cflags --libs airetry)
 *   ./a.out airetry.yaml smart "Say hello"
 *
 * Try it without keys against the fault-injecting mock (docs/mock.md), as
 * examples/client.c says.
 */
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include <airetry.h>

static void print_diag(void *data, const air_diag *d) {
  (void)data;
  fprintf(stderr, "%s:%d:%d: %s\n", d->file, d->line, d->column, d->message);
}

/* The streamed call's parts, as they arrive (inside air_async_perform). */
static int on_part(void *data, const air_part *p) {
  (void)data;
  if (p->kind == AIR_PART_TEXT) {
    printf("%.*s", (int)p->text_len, p->text);
    fflush(stdout);
  }
  return 0; /* non-zero would cancel the call */
}

/* Each call's end: the result is ours to free. */
static void on_done(void *data, int rc, air_chat_result *res) {
  const char *name = data;
  if (res == NULL) {
    printf("\n%s: %s\n", name, air_strerror(rc));
    return;
  }
  if (rc == 0)
    printf("\n%s: %s answered: %.*s\n", name, res->target, (int)res->text_len,
           res->text);
  else
    printf("\n%s: failed after %zu attempt(s): %s (HTTP %d)\n", name,
           res->n_log, air_reason_name(res->reason), res->status);
  air_chat_result_free(res);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s CONFIG MODEL PROMPT\n", argv[0]);
    return 2;
  }
  air_config *cfg = NULL;
  if (air_config_load(argv[1], print_diag, NULL, &cfg) != 0) return 2;
  air_global_init();
  air_async *a = NULL;
  air_error err;
  if (air_async_new(cfg, &a, &err) != 0) {
    fprintf(stderr, "air_async_new: %s\n", err.message);
    return 1;
  }

  char body[2048];
  snprintf(body, sizeof(body),
           "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"%"
           "s\"}]}",
           argv[2], argv[3]);
  air_async_opts streamed = AIR_ASYNC_OPTS_INIT;
  streamed.on_part = on_part;
  streamed.on_done = on_done;
  streamed.data = "streamed";
  air_async_opts whole = AIR_ASYNC_OPTS_INIT;
  whole.on_done = on_done;
  whole.data = "whole";
  int rc = air_async_chat(a, AIR_DIALECT_OPENAI, body, strlen(body), &streamed,
                          NULL, &err);
  if (rc == 0)
    rc = air_async_chat(a, AIR_DIALECT_OPENAI, body, strlen(body), &whole, NULL,
                        &err);
  if (rc != 0) fprintf(stderr, "air_async_chat: %s\n", err.message);

  /* The event loop: wait on the descriptor until the timeout, perform. */
  struct pollfd p = {.fd = air_async_fd(a), .events = POLLIN};
  unsigned running = 1;
  while (running > 0 && air_async_perform(a, &running) == 0 && running > 0)
    poll(&p, 1, air_async_timeout(a));

  air_async_free(a);
  air_global_cleanup();
  air_config_free(cfg);
  return rc == 0 ? 0 : 1;
}
