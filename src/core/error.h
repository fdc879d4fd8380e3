/*
 * Filling the caller's optional air_error (airetry/core.h), and reading the
 * option structs callers fill: the helpers every public entry point uses.
 */
#ifndef AIR__ERROR_H
#define AIR__ERROR_H

#include <stdbool.h>
#include <stddef.h>

#include "airetry.h"

/*
 * Sets err (when not NULL) to code and the printf-style message, truncated
 * to fit; code 0 clears it (message ""). Returns code, so a failing path
 * reads `return air__error_set(err, rc, "...");`.
 */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 3, 4)))
#endif
int air__error_set(air_error *err, int code, const char *fmt, ...);

/*
 * Copies a caller's option struct (its first member is `size_t size`, set
 * by the caller to sizeof) into dst of dst_size bytes: the bytes the caller
 * has, zero for the fields its header did not know yet (a caller built
 * against an older minor version); fields past dst_size (a newer header)
 * are ignored. AIR_EINVAL when src is NULL or src->size is below min_size
 * (the size of the struct's first version). name is for the message.
 */
/* The bytes of type up to and including field: a version's minimum size (a
 * pointer field's size is meant, hence the NOLINT). */
#define AIR__SIZE_TO(type, field)                  \
  /* NOLINTNEXTLINE(bugprone-sizeof-expression) */ \
  (offsetof(type, field) + sizeof(((type *)0)->field))

int air__opts_copy(void *dst, size_t dst_size, const void *src, size_t min_size,
                   const char *name, air_error *err);

/*
 * The records filled per event (air_part, air_failure) carry a size too, but
 * 0 stands for their first version there, so that a record zeroed or built
 * with designated initializers needs no size: only a size between 1 and the
 * first version's is refused. The library reads a record's fields up to
 * its size, no further. The minimum sizes are the first versions'.
 */
#define AIR__PART_SIZE_V0 AIR__SIZE_TO(air_part, output_tokens)
#define AIR__FAILURE_SIZE_V0 AIR__SIZE_TO(air_failure, n_headers)
static inline bool air__record_size_ok(size_t size, size_t min_size) {
  return size == 0 || size >= min_size;
}

#endif
