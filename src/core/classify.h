/* Failure classification (docs/design.md §2.1), an engine internal. Pure. */
#ifndef AIR__CLASSIFY_H
#define AIR__CLASSIFY_H

#include "airetry.h"

/*
 * Classifies one failed attempt into a reason (docs/design.md §2.1): the error
 * type and code from the body win over the HTTP status; a transport error wins
 * over both. Strings may be NULL; they are not retained. Pure, thread-safe.
 */
air_reason air__classify(int status, const char *type, const char *code,
                         const char *message, air_transport_err transport);

#endif
