/*
 * What the two YAML readers (the config loader and the mock's script loader)
 * share around libfyaml: a diagnostics object that prints nothing, the
 * checks a text must pass before libfyaml may see it, and positions.
 */
#ifndef AIR__YAML_H
#define AIR__YAML_H

#include <stdbool.h>
#include <stddef.h>

#include <libfyaml.h>

/* A fy_diag that prints nothing and collects errors (fy_diag_destroy it), or
 * NULL when out of memory. */
struct fy_diag *air__yaml_quiet_diag(void);

/* True when s holds nothing but blanks, comments and document markers
 * (libfyaml builds no document for such a text). */
bool air__yaml_blank(const char *s, size_t n);

/*
 * Checks a text before parsing: no NUL byte, valid UTF-8 (libfyaml 0.7 can
 * loop forever on invalid UTF-8 in a directive line). Returns NULL when it
 * is fine, else a static description with *off the offset of the problem.
 */
const char *air__yaml_check_text(const char *s, size_t n, size_t *off);

/* The 1-based line and column of byte off of s. */
void air__text_pos(const char *s, size_t off, int *line, int *col);

#endif
