/*
 * The backends' constructors, and air_state_new choosing between them
 * (new.c): Redis when the config has a resolved state.redis URL, the
 * in-process table otherwise.
 */
#ifndef AIR__STATE_NEW_H
#define AIR__STATE_NEW_H

#include "airetry.h"

/* The in-process backend (local.c). AIR_EINVAL, AIR_ENOMEM, AIR_EIO. */
int air__state_local_new(air_state **out, air_error *err);

#endif
