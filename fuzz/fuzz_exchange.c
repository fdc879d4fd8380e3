/*
 * libFuzzer target for the whole request path under simulation
 * (tests/sim, docs/testing.md): the input is either a scenario file (it
 * starts with '#' or "seed ") or bytes that steer the scenario generator
 * (read as its first draws). Every invariant violation aborts, after the
 * scenario is printed to stderr as a replayable file.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1u << 16)) return 0;
  char err[256], why[1024];
  sim_scenario *s = NULL;
  if (size > 0 &&
      (data[0] == '#' || (size > 5 && memcmp(data, "seed ", 5) == 0))) {
    s = sim_parse((const char *)data, size, err, sizeof(err));
    if (s == NULL) return 0; /* not a scenario file: nothing to run */
  } else {
    s = sim_generate_bytes(data, size);
    if (s == NULL) return 0;
  }
  /* 2: a mutated scenario file that is not a scenario (no config, no
   * request): nothing was checked. */
  if (sim_run(s, why, sizeof(why)) == 1) {
    fprintf(stderr, "fuzz_exchange: %s\n", why);
    sim_write(s, stderr);
    abort();
  }
  sim_free(s);
  return 0;
}
