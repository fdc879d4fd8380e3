/*
 * airetry check --config FILE: validates a config and prints it resolved.
 *
 * Exit 0 with the resolved config on stdout (warnings on stderr as
 * "FILE:LINE:COL: warning: message"); exit 2 with every error on stderr as
 * "FILE:LINE:COL: error: message", or on a usage error.
 */
#include <stdio.h>
#include <string.h>

#include "airetry.h"
#include "cli.h"

static const char check_usage[] =
    "usage: airetry check --config FILE\n"
    "\n"
    "Validates FILE (YAML or JSON) and prints the resolved config, every\n"
    "default filled in. Problems go to stderr as FILE:LINE:COL: message.\n"
    "Exit status: 0 valid (warnings allowed), 2 errors or bad usage.\n"
    "\n"
    "  -c, --config FILE   the config file to check\n"
    "  -h, --help          this text\n";

typedef struct check_counts {
  unsigned errors;
  unsigned warnings;
} check_counts;

static void print_diag(void *data, const air_diag *d) {
  check_counts *n = data;
  const char *sev = d->severity == AIR_DIAG_WARNING ? "warning" : "error";
  if (d->severity == AIR_DIAG_WARNING)
    n->warnings++;
  else
    n->errors++;
  if (d->line > 0)
    fprintf(stderr, "%s:%d:%d: %s: %s\n", d->file, d->line, d->column, sev,
            d->message);
  else
    fprintf(stderr, "%s: %s: %s\n", d->file, sev, d->message);
}

int air__cmd_check(int argc, char **argv) {
  const char *path = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(check_usage, stdout);
      return AIR__EXIT_OK;
    }
    if (strcmp(a, "-c") == 0 || strcmp(a, "--config") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "airetry check: %s needs a FILE\n\n%s", a, check_usage);
        return AIR__EXIT_USAGE;
      }
      path = argv[++i];
    } else if (strncmp(a, "--config=", 9) == 0) {
      path = a + 9;
    } else {
      fprintf(stderr, "airetry check: unexpected argument '%s'\n\n%s", a,
              check_usage);
      return AIR__EXIT_USAGE;
    }
  }
  if (!path || !path[0]) {
    fprintf(stderr, "airetry check: --config FILE is required\n\n%s",
            check_usage);
    return AIR__EXIT_USAGE;
  }
  check_counts n = {0, 0};
  air_config *cfg = NULL;
  int rc = air_config_load(path, print_diag, &n, &cfg);
  if (rc != 0) {
    fprintf(stderr, "airetry check: %s: %s (%u error%s)\n", path,
            air_strerror(rc), n.errors, n.errors == 1 ? "" : "s");
    return AIR__EXIT_USAGE;
  }
  rc = air_config_dump(cfg, stdout);
  air_config_free(cfg);
  if (rc != 0) {
    perror("airetry check: stdout");
    return AIR__EXIT_FAIL;
  }
  return AIR__EXIT_OK;
}
