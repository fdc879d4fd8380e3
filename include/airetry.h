/*
 * airetry: keeps LLM calls alive.
 *
 * The one public header of libairetry. Handles are opaque; plain records that
 * callers read (air_attempt, air_diag, air_error) are declared here. Every
 * exported function is marked AIR_EXTERN and listed in docs/api.md, with
 * the ABI policy (how the option structs with a leading `size` grow).
 *
 * Thread safety is stated per function. Unless said otherwise a handle may be
 * used by one thread at a time; air_config is immutable after loading and may
 * be shared freely; air_state and air_cancel are safe from any thread.
 */
#ifndef AIRETRY_H
#define AIRETRY_H

/* The public API in four parts (docs/design.md §7): */
#include "airetry/core.h"   /* errors, reasons, config, state, cancel, clock,
                               attempt log, engine run */
#include "airetry/drive.h"  /* parts, air_call, air_stream */
#include "airetry/client.h" /* air_client: real upstream calls */
#include "airetry/async.h"  /* air_async: the client on the caller's own
                               event loop */

#endif
