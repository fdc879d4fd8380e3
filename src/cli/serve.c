/* `airetry serve --config FILE [--listen HOST:PORT] [--insecure] [--workers N]`
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gateway.h"

static const char usage[] =
    "usage: airetry serve --config FILE [--listen HOST:PORT] [--insecure] "
    "[--workers N]\n"
    "  --listen HOST:PORT  overrides `listen` of the config (port 0: any free "
    "port)\n"
    "  --insecure          allow a non-loopback address without client keys\n"
    "  --workers N         event-loop threads (default: one per core)\n"
    "Signals: SIGTERM/SIGINT stop gracefully (streams in flight finish), "
    "SIGHUP\n"
    "reloads the config. While stopping, SIGTERM and SIGHUP are ignored and a\n"
    "second SIGINT stops at once.\n";

int air__cmd_serve(int argc, char **argv) {
  air__gateway_opts o;
  memset(&o, 0, sizeof(o));
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(usage, stdout);
      return AIR__EXIT_OK;
    } else if ((strcmp(a, "--config") == 0 || strcmp(a, "-c") == 0) &&
               i + 1 < argc) {
      o.config_path = argv[++i];
    } else if (strcmp(a, "--listen") == 0 && i + 1 < argc) {
      o.listen = argv[++i];
    } else if (strcmp(a, "--insecure") == 0) {
      o.insecure = true;
    } else if (strcmp(a, "--workers") == 0 && i + 1 < argc) {
      char *end = NULL;
      long n = strtol(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0' || n < 1 || n > 64) {
        fprintf(stderr, "airetry serve: --workers takes 1 to 64\n");
        return AIR__EXIT_USAGE;
      }
      o.workers = (unsigned)n;
    } else {
      fprintf(stderr, "airetry serve: unknown or incomplete option '%s'\n%s", a,
              usage);
      return AIR__EXIT_USAGE;
    }
  }
  if (o.config_path == NULL) {
    fputs(usage, stderr);
    return AIR__EXIT_USAGE;
  }
  return air__gateway_run(&o);
}
