/*
 * libFuzzer target for the config loader (src/config/config.c, config_dump.c).
 *
 * The input is a config file (YAML or JSON). It is loaded with
 * air_config_parse; every diagnostic must be well formed, and the result
 * must agree with them: 0 and a config exactly when no error was reported.
 * A config that loads is dumped (air_config_dump, into memory) and the dump
 * must load again without errors and dump to the same text past its first
 * line (the file name): the round trip tests/unit/config/test_config.c checks
 * for the example config, here for every config the loader accepts. When the
 * dump does not load, the dump and the diagnostics go to stderr before the
 * abort, so a finding can be read without a debugger.
 *
 * libfyaml 0.7.12 (Debian) never returns on a directive line holding
 * invalid UTF-8 ("%\xff"); the loader rejects invalid UTF-8 before libfyaml
 * sees it (corpus: directive_invalid_utf8).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "airetry.h"

#define CHECK(cond)       \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

typedef struct diags {
  size_t errors, warnings;
  bool echo; /* print each diagnostic to stderr (the dump's reload) */
} diags;

static void on_diag(void *data, const air_diag *d) {
  diags *ds = data;
  CHECK(d->severity == AIR_DIAG_ERROR || d->severity == AIR_DIAG_WARNING);
  CHECK(d->file != NULL && d->message != NULL && d->message[0] != '\0');
  CHECK(d->line >= 0 && d->column >= 0);
  if (d->severity == AIR_DIAG_ERROR)
    ds->errors++;
  else
    ds->warnings++;
  if (ds->echo)
    fprintf(stderr, "%s:%d:%d: %s: %s\n", d->file, d->line, d->column,
            d->severity == AIR_DIAG_ERROR ? "error" : "warning", d->message);
}

/* Loads text; checks the result matches the diagnostics. */
static air_config *load(const char *name, const char *text, size_t n,
                        diags *ds) {
  air_config *cfg = NULL;
  int rc = air_config_parse(name, text, n, on_diag, ds, &cfg);
  CHECK(rc == 0 || rc == AIR_ECONFIG || rc == AIR_ETOOBIG);
  if (rc == 0) {
    CHECK(cfg != NULL && ds->errors == 0);
    CHECK(air_config_listen(cfg) != NULL);
  } else {
    CHECK(cfg == NULL && ds->errors > 0);
  }
  return cfg;
}

/* The dump of cfg as a malloc'd string; *n its length. */
static char *dump(const air_config *cfg, size_t *n) {
  char *text = NULL;
  *n = 0;
  FILE *f = open_memstream(&text, n);
  CHECK(f != NULL);
  CHECK(air_config_dump(cfg, f) == 0);
  CHECK(fclose(f) == 0);
  CHECK(text != NULL && *n > 0 && strlen(text) == *n);
  return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  diags ds = {0};
  air_config *cfg = load("fuzz.yaml", (const char *)data, size, &ds);
  if (cfg == NULL) return 0;

  size_t n1, n2;
  char *d1 = dump(cfg, &n1);
  diags ds2 = {0};
  air_config *again = load("dump.yaml", d1, n1, &ds2);
  if (again == NULL) {
    fprintf(stderr, "fuzz_config: the dump does not load again:\n%s\n", d1);
    diags echo = {.echo = true};
    air_config_free(load("dump.yaml", d1, n1, &echo));
    abort();
  }

  /* The same config: the dumps match past their first (file name) line. */
  char *d2 = dump(again, &n2);
  const char *b1 = memchr(d1, '\n', n1), *b2 = memchr(d2, '\n', n2);
  CHECK(b1 != NULL && b2 != NULL);
  if (strcmp(b1, b2) != 0) {
    fprintf(stderr, "fuzz_config: the dump changes on reload:\n%s\n--\n%s\n",
            d1, d2);
    abort();
  }

  free(d1);
  free(d2);
  air_config_free(again);
  air_config_free(cfg);
  return 0;
}
