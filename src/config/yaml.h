/*
 * The one YAML walker, shared by the config loader (config.c) and the mock's
 * script loader (src/mock/behaviour.c): loading a document from text,
 * positions, following aliases under a node budget, iterating maps and
 * lists, and reading scalars. Every libfyaml call of the tree is in yaml.c;
 * its users see `struct fy_node` as an opaque handle and write their own
 * messages (the walker reports where and what, never in whose words).
 *
 * Positions are 1-based line and column; {0, 0} means "not tied to a place".
 * A node handle is valid until air__yaml_doc_cleanup of its document.
 */
#ifndef AIR__YAML_H
#define AIR__YAML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fy_node;
struct fy_document;

typedef struct air__yaml_loc {
  int line; /* 1-based; 0: not tied to a place */
  int col;
} air__yaml_loc;

/* ---- loading ---------------------------------------------------------------
 */

typedef enum air__yaml_result {
  AIR__YAML_OK,       /* root is the document's root (null: blank text) */
  AIR__YAML_BAD_TEXT, /* refused before parsing: why at bad_at */
  AIR__YAML_SYNTAX,   /* libfyaml reported n_errors errors (through cb) */
  AIR__YAML_NOT_YAML, /* no document, no error, and the text is not blank */
  AIR__YAML_NOMEM,
} air__yaml_result;

typedef struct air__yaml_doc {
  struct fy_document *doc;
  struct fy_node *root; /* AIR__YAML_OK only; air__yaml_is_null for a blank
                           text (NULL, or a null node after a bare ---) */
  size_t n_errors;      /* libfyaml errors (not warnings) reported */
  const char *why;      /* AIR__YAML_BAD_TEXT: "contains a NUL byte", ... */
  air__yaml_loc bad_at; /* AIR__YAML_BAD_TEXT: the offending byte */
} air__yaml_doc;

/*
 * One libfyaml problem, in libfyaml's order: error is false for a warning.
 * msg is libfyaml's text, valid during the call.
 */
typedef void (*air__yaml_problem_cb)(void *data, bool error, air__yaml_loc at,
                                     const char *msg);

/*
 * Parses text (n bytes, not NUL-terminated) into d. The text is checked
 * first: no NUL byte, valid UTF-8 (libfyaml 0.7 can loop forever on invalid
 * UTF-8 in a directive line). An empty text, or one of blanks, comments
 * and document markers only, is AIR__YAML_OK with a null root. cb (may be
 * NULL) hears every libfyaml warning and error; libfyaml itself prints
 * nothing. d must be cleaned up whatever the result.
 */
air__yaml_result air__yaml_load(air__yaml_doc *d, const char *text, size_t n,
                                air__yaml_problem_cb cb, void *data);

/* Frees d's document (every node handle of it); d may be zeroed. */
void air__yaml_doc_cleanup(air__yaml_doc *d);

/* The position of byte off of text. */
air__yaml_loc air__yaml_offset_loc(const char *text, size_t off);

/* ---- walking ----------------------------------------------------------------
 */

/*
 * A walk over one document: every node reached through air__yaml_deref
 * counts against max_visits, so aliases that expand a small text into a huge
 * tree end early. Once the budget is crossed, over(data, max_visits) is
 * called once and stop is set; a caller may set stop itself (its first
 * error ends the walk). While stop is set every dereference yields NULL.
 */
typedef struct air__yaml_walk {
  unsigned long visits;
  unsigned long max_visits;
  bool stop;
  void (*over)(void *data, unsigned long max_visits);
  void *data;
} air__yaml_walk;

/* n with an alias followed, counted as one visit; NULL for NULL, a stopped
 * walk, or the visit that crosses the budget. */
struct fy_node *air__yaml_deref(air__yaml_walk *w, struct fy_node *n);

/*
 * The next pair of map (*it NULL before the first call): true with *key
 * dereferenced (NULL when the walk stopped) and *val as written (an alias
 * is left for the caller to dereference when, and if, it reads the value);
 * false at the end. map must be a map.
 */
bool air__yaml_map_next(air__yaml_walk *w, struct fy_node *map, void **it,
                        struct fy_node **key, struct fy_node **val);

/* The next item of list seq as written (not dereferenced), NULL at the end;
 * *it NULL before the first call. */
struct fy_node *air__yaml_seq_next(struct fy_node *seq, void **it);

/* The number of pairs of a map or items of a list; 0 for anything else. */
size_t air__yaml_count(struct fy_node *n);

/*
 * A node's position: its own token (a quoted scalar's opening quote), or
 * that of its first key or item; fb when it has none (NULL, an empty map or
 * list, or deeper than 64 levels).
 */
air__yaml_loc air__yaml_node_loc(struct fy_node *n, air__yaml_loc fb);

/* ---- kinds and scalars
 * -------------------------------------------------------
 */

/* NULL, or a plain scalar that is empty, ~, null, Null or NULL. */
bool air__yaml_is_null(struct fy_node *n);
bool air__yaml_is_map(struct fy_node *n);
bool air__yaml_is_seq(struct fy_node *n);
/* A scalar that is not null (a quoted "" is a scalar). */
bool air__yaml_is_scalar(struct fy_node *n);
/* A scalar written without quotes or block style. */
bool air__yaml_is_plain(struct fy_node *n);

/* "null", "a map", "a list" or "a scalar", for messages. */
const char *air__yaml_kind(struct fy_node *n);

/* A scalar's bytes (not NUL-terminated, may hold a NUL from an escape) and
 * their count; "" and 0 for a node without text. */
const char *air__yaml_scalar(struct fy_node *n, size_t *len);

/*
 * YAML 1.2 core schema booleans: a plain true, True, TRUE, false, False or
 * FALSE. *ok is false (and false returned) for anything else.
 */
bool air__yaml_bool(struct fy_node *n, bool *ok);

/*
 * Plain decimal digits only (no sign, blank or exponent), at most 20 of
 * them, no overflow, and at most max: then *out and true; else false and
 * *out untouched.
 */
bool air__yaml_u64(const char *s, size_t n, uint64_t max, uint64_t *out);

#endif
