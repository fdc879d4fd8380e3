/*
 * sim: runs simulated scenarios (docs/testing.md).
 *   sim [--seed S] [--n N] [--out DIR]   N scenarios drawn from seeds S, S+1, ...
 *   sim FILE.sim...                      replays scenario files
 * On a failure it writes the scenario as DIR/sim-SEED.sim (replayable), prints
 * it and the seed, and exits 1.
 */
#include <inttypes.h>
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
  if (rc != 0) fprintf(stderr, "sim: %s: FAILED: %s\n", path, why);
  else printf("sim: %s: ok\n", path);
  return rc;
}

int main(int argc, char **argv) {
  uint64_t seed = 1, n = 1000;
  const char *out = ".";
  int files = 0, failed = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      seed = strtoull(argv[++i], NULL, 0);
    } else if (strcmp(argv[i], "--n") == 0 && i + 1 < argc) {
      n = strtoull(argv[++i], NULL, 0);
    } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
      out = argv[++i];
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
        fprintf(f, "# FAILED: %s\n", why);
        sim_write(s, f);
        fclose(f);
      }
      fprintf(stderr, "sim: scenario %" PRIu64 " of %" PRIu64 " FAILED (seed %" PRIu64 "): %s\n",
              i + 1, n, seed + i, why);
      sim_write(s, stderr);
      fprintf(stderr, "sim: replay with: sim %s   (or: make sim SEED=%" PRIu64 " N=1)\n", path,
              seed + i);
      sim_free(s);
      return 1;
    }
    sim_free(s);
  }
  sim_stats(stdout);
  printf("sim: %" PRIu64 " scenarios from seed %" PRIu64 ": ok (%.1f s)\n", n, seed, secs() - t0);
  return 0;
}
