/* Retry-After hints (docs/design.md §2.2), an engine internal. Pure. */
#ifndef AIR__RETRY_AFTER_H
#define AIR__RETRY_AFTER_H

#include <stddef.h>
#include <stdint.h>

#include "airetry.h"

/*
 * The wait a response asks for (docs/design.md §2.2), in milliseconds, from its
 * headers. wall_ms is the current wall-clock time in ms since the Unix epoch
 * (for HTTP-dates and RFC 3339 times). Returns 1 and sets *wait_ms when a
 * usable hint is present, 0 when there is none (negative, past or unparseable
 * values are ignored). Pure, thread-safe.
 */
int air__retry_after(const air_header *h, size_t n, uint64_t wall_ms,
                     uint64_t *wait_ms);

#endif
