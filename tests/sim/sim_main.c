/*
 * sim: runs simulated scenarios (docs/testing.md).
 *   sim [--seed S] [--n N] [--out DIR] [--draw LIST]
 *                                        N scenarios drawn from seeds S, S+1,
 * ... sim FILE.sim...                      replays scenario files
 * --draw: what is drawn besides upstream behaviour, a comma list of
 * consumer, fields, alloc, plain, or all (the default) or none.
 * --keep-going: a failure is written and reported in one line, and the run
 * goes on (exit 1 at the end when any failed).
 * On a failure it writes the scenario as DIR/sim-SEED.sim (replayable), prints
 * it and the seed, and exits 1.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim.h"

static double secs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int replay(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "sim: cannot read %s\n", path);
    return 1;
  }
  static char text[1u << 20];
  size_t n = fread(text, 1, sizeof(text) - 1, f);
  fclose(f);
  char err[256], why[1024];
  sim_scenario *s = sim_parse(text, n, err, sizeof(err));
  if (s == NULL) {
    fprintf(stderr, "sim: %s: %s\n", path, err);
    return 1;
  }
  int rc = sim_run(s, why, sizeof(why));
  sim_free(s);
  if (rc != 0)
    fprintf(stderr, "sim: %s: FAILED: %s\n", path, why);
  else
    printf("sim: %s: ok\n", path);
  return rc;
}

int main(int argc, char **argv) {
  uint64_t seed = 1, n = 1000;
  const char *out = ".";
  int files = 0, failed = 0;
  bool keep_going = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      seed = strtoull(argv[++i], NULL, 0);
    } else if (strcmp(argv[i], "--n") == 0 && i + 1 < argc) {
      n = strtoull(argv[++i], NULL, 0);
    } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
      out = argv[++i];
    } else if (strcmp(argv[i], "--keep-going") == 0) {
      keep_going = true;
    } else if (strcmp(argv[i], "--draw") == 0 && i + 1 < argc) {
      static const struct {
        const char *name;
        unsigned bit;
      } fam[] = {{"consumer", SIM_DRAW_CONSUMER}, {"fields", SIM_DRAW_FIELDS},
                 {"alloc", SIM_DRAW_ALLOC},       {"plain", SIM_DRAW_PLAIN},
                 {"all", SIM_DRAW_ALL},           {"none", 0}};
      unsigned mask = 0;
      const char *p = argv[++i];
      while (*p) {
        size_t len = strcspn(p, ","), k = 0;
        while (
            k < sizeof(fam) / sizeof(fam[0]) &&
            (strlen(fam[k].name) != len || strncmp(fam[k].name, p, len) != 0))
          k++;
        if (k == sizeof(fam) / sizeof(fam[0])) {
          fprintf(stderr, "sim: --draw: unknown family '%.*s'\n", (int)len, p);
          return 2;
        }
        mask |= fam[k].bit;
        p += len + (p[len] == ',');
      }
      sim_set_draws(mask);
    } else {
      files++;
      failed |= replay(argv[i]);
    }
  }
  if (files) {
    sim_stats(stdout);
    return failed;
  }
  double t0 = secs();
  char why[1024];
  for (uint64_t i = 0; i < n; i++) {
    sim_scenario *s = sim_generate(seed + i);
    if (s == NULL) {
      fprintf(stderr, "sim: out of memory\n");
      return 1;
    }
    if (sim_run(s, why, sizeof(why)) != 0) {
      char path[4096];
      snprintf(path, sizeof(path), "%s/sim-%" PRIu64 ".sim", out, seed + i);
      FILE *f = fopen(path, "w");
      if (f) {
        /* One comment line: a message quoting upstream text may hold
         * line breaks, which would end the comment. */
        char one[sizeof(why)];
        size_t k = 0;
        for (; why[k] != '\0' && k + 1 < sizeof(one); k++)
          one[k] = why[k] == '\n' || why[k] == '\r' ? ' ' : why[k];
        one[k] = '\0';
        fprintf(f, "# FAILED: %s\n", one);
        sim_write(s, f);
        fclose(f);
      }
      fprintf(stderr,
              "sim: scenario %" PRIu64 " of %" PRIu64 " FAILED (seed %" PRIu64
              "): %s\n",
              i + 1, n, seed + i, why);
      if (keep_going) {
        failed++;
        sim_free(s);
        continue;
      }
      sim_write(s, stderr);
      fprintf(stderr,
              "sim: replay with: sim %s   (or: make sim SEED=%" PRIu64
              " N=1)\n",
              path, seed + i);
      sim_free(s);
      return 1;
    }
    sim_free(s);
  }
  sim_stats(stdout);
  if (failed) {
    printf("sim: %" PRIu64 " scenarios from seed %" PRIu64
           ": %d FAILED (%.1f s)\n",
           n, seed, failed, secs() - t0);
    return 1;
  }
  printf("sim: %" PRIu64 " scenarios from seed %" PRIu64 ": ok (%.1f s)\n", n,
         seed, secs() - t0);
  return 0;
}
