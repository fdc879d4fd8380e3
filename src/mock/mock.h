/*
 * `airetry mock` (docs/mock.md) as the CLI sees it: load a script, run the
 * fake provider on a uv loop, and read a streamed answer in either dialect
 * (reader.c, for `airetry demo`). The rest of the mock is in mock_int.h.
 */
#ifndef AIR__MOCK_H
#define AIR__MOCK_H

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

#include "airetry.h"

#define AIR__MOCK_MAX_SCRIPT_BYTES (4u << 20)

typedef struct air__mock_script air__mock_script;

/* The first problem found in a script or model name. */
typedef struct air__mock_diag {
  int line;   /* 1-based; 0 when not tied to a place */
  int column; /* 1-based */
  char message[256];
} air__mock_diag;

/*
 * Parses a script (docs/mock.md "Script") of n bytes. Returns 0 and sets
 * *out (free with air__mock_script_free); AIR_ECONFIG with the first
 * problem in *diag (YAML syntax, unknown key, wrong type, out of range,
 * duplicate model); AIR_ETOOBIG over AIR__MOCK_MAX_SCRIPT_BYTES; AIR_ENOMEM.
 * Empty text is a script with no models.
 */
int air__mock_script_parse(const char *text, size_t n, air__mock_script **out,
                           air__mock_diag *diag);
void air__mock_script_free(air__mock_script *s);

/* ---- the server (mock.c) ---------------------------------------------------
 */

typedef struct air__mock air__mock;

typedef struct air__mock_config {
  const char *host;               /* IPv4/IPv6 literal */
  int port;                       /* 0: ephemeral */
  const air__mock_script *script; /* may be NULL; must outlive the mock */
} air__mock_config;

/*
 * Creates a mock on loop and listens. Returns 0; AIR_EINVAL (host or
 * port); AIR_EIO (bind/listen: *uv_err, when not NULL, gets the libuv
 * error); AIR_ENOMEM. On failure nothing is left open.
 */
int air__mock_start(uv_loop_t *loop, const air__mock_config *cfg,
                    air__mock **out, int *uv_err);

/* The bound port. */
int air__mock_port(const air__mock *m);

/*
 * Stops: every response in progress (held, delayed, stalled, streaming)
 * is cut at once, then the server stops. on_stopped fires once, from a loop
 * callback, when every handle is closed; then air__mock_free may be called.
 */
void air__mock_stop(air__mock *m, void (*on_stopped)(void *data), void *data);
void air__mock_free(air__mock *m);

/* ---- reading a streamed answer (reader.c) ----------------------------------
 * What a client of the gateway receives, decoded with the dialect's own
 * codec: every part of every event reaches on_part (text, finish, an error
 * event as AIR_PART_ERROR). */

typedef struct air__stream_reader air__stream_reader;

/* A reader of an Anthropic (anthropic true) or OpenAI event stream; NULL
 * when out of memory. */
air__stream_reader *air__stream_reader_new(
    bool anthropic, int (*on_part)(void *data, const air_part *p), void *data);
/* Feeds bytes as they arrive; 0, or a parser error (the stream is broken). */
int air__stream_reader_feed(air__stream_reader *r, const char *p, size_t n);
/* Ends the stream (a last event without its blank line) and frees r. */
void air__stream_reader_free(air__stream_reader *r);

#endif
