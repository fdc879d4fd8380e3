/*
 * The test library's parts (tests/lib): the one-line text form of a part
 * (tests/data/README.md, "`.parts` line format"), parsed back into parts,
 * and a decoding run that prints and aggregates what a dialect's decoder
 * gives. Shared by the transcript runner and the dialects' unit tests.
 */
#ifndef AIR__TL_PARTS_H
#define AIR__TL_PARTS_H

#include <stdbool.h>
#include <stddef.h>

#include "airetry.h"
#include "buf.h"
#include "dialect.h"
#include "sse.h"

/* Appends p as one line: kind, fields, '\n'. */
void tl_part_line(air__buf *b, const air_part *p);

/* The parts of a .parts text, their strings owned (comment, blank and
 * STATE lines skipped); absent strings are "". */
typedef struct tl_parts {
  air_part *p;
  size_t n;
  char **own; /* the strings to free */
  size_t n_own;
} tl_parts;

void tl_parts_parse(const char *text, tl_parts *out);
void tl_parts_free(tl_parts *ps);

/* Appends the lines of a .parts text that are compared: all but comment
 * and blank lines. */
void tl_parts_strip(const char *text, air__buf *out);

/* A decoding run: the parts a decoder gives, as lines and aggregated. */
typedef struct tl_run {
  const air__dialect_ops *ops;
  air__decoder d;
  air__buf lines;     /* every part, tl_part_line */
  air__aggregate agg; /* every part, air__aggregate_add */
  unsigned n;         /* parts so far */
  unsigned stop_at;   /* tl_run_part returns TL_STOP at this part (1-based;
                         0: never) */
} tl_run;

/* What tl_run_part returns to stop the decoder (stop_at). */
#define TL_STOP 42

void tl_run_init(tl_run *r, const air__dialect_ops *ops);
void tl_run_cleanup(tl_run *r);

/* The part callback (data: the tl_run): every string readable in full,
 * the line printed, the part aggregated. */
int tl_run_part(void *data, const air_part *p);

/* One event of SSE type type (data as its raw form too) through the
 * decoder; what decode_event returns. */
int tl_run_event(tl_run *r, const char *type, const char *data);

/* A stream through air__sse fed in pieces of piece bytes (0: at once),
 * then finished; appends the STATE line (README.md). */
void tl_run_sse(tl_run *r, const char *in, size_t n, size_t piece);

#endif
