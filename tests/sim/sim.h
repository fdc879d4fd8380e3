/*
 * The request-path simulator (docs/design.md §9, docs/testing.md): the
 * exchange, the codecs, the commit gate, the engine and the gateway's responder
 * run against scripted upstreams on a virtual clock; every request of a
 * scenario is checked against the invariants.
 */
#ifndef AIR_SIM_H
#define AIR_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct sim_scenario sim_scenario;

/* What the generator draws besides upstream behaviour (docs/testing.md):
 * the caller's actions inside the exchange's callbacks, upstream fields at
 * and past their limits, an allocation that fails, the endpoints without a
 * stream. A family left out is still drawn (the seed's other draws stay
 * the same) and then dropped. Default: all. */
#define SIM_DRAW_CONSUMER 1u
#define SIM_DRAW_FIELDS 2u
#define SIM_DRAW_ALLOC 4u
#define SIM_DRAW_PLAIN 8u
#define SIM_DRAW_ALL 15u
void sim_set_draws(unsigned mask);

/* Draws a scenario from seed (splitmix64). NULL when out of memory. */
sim_scenario *sim_generate(uint64_t seed);
/* Draws a scenario from a fuzzer's bytes (read as the first draws). */
sim_scenario *sim_generate_bytes(const uint8_t *p, size_t n);
/* Reads a scenario file (the format sim_write writes). NULL and a message
 * in err when it is not one. */
sim_scenario *sim_parse(const char *text, size_t n, char *err, size_t cap);
void sim_write(const sim_scenario *s, FILE *f);
void sim_free(sim_scenario *s);

/* Runs s and checks every invariant. Returns 0, or 1 with the first
 * violation in why, or 2 when the scenario itself is not valid (its config
 * does not load, a request does not parse; why says which). */
int sim_run(const sim_scenario *s, char *why, size_t cap);

/* Whether the allocation being made fails (the failing-allocator mode:
 * tests/sim/sim_alloc.c wraps malloc, calloc, realloc, strdup and strndup
 * with it). False outside sim_run. */
bool sim_alloc_fails(void);

/* Prints what the requests checked so far ended as. */
void sim_stats(FILE *f);

#endif
