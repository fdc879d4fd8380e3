/*
 * The config loader's inside, shared by its three files:
 *
 *   config_walk.c   the walk of the YAML document against the option table
 *                   (config_table.h): every map's keys found in the table
 *                   ("did you mean" when not), defaults from the table, each
 *                   value handed to the reader of its type; the problems
 *                   collected with FILE:LINE:COL and handed over sorted.
 *   config_value.c  one value into its typed field: scalars with their
 *                   ranges and string checks, lists of reasons, statuses,
 *                   phrases and header names, header maps, override maps
 *                   (as JSON text).
 *   config.c        what the values mean together: providers, routes, their
 *                   targets and rules resolved into the air_config, rule
 *                   overrides merged per target, the environment read, the
 *                   entry points.
 *
 * Nothing here is thread-safe: one load, one context.
 */
#ifndef AIR__CONFIG_INT_H
#define AIR__CONFIG_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "config_table.h"
#include "policy.h"
#include "yaml.h"

#define AIR__CFG_PATH_BYTES 320 /* a config path in a message */
#define AIR__CFG_MSG_BYTES 1024 /* one message */

/* One problem, kept until the load ends. */
typedef struct air__cfg_diag {
  air_severity sev;
  air__yaml_loc at; /* {0, 0}: not tied to a place */
  size_t seq;
  char *msg;
} air__cfg_diag;

/* One load. */
typedef struct air__cfg_ctx {
  const char *file;
  air_config *cfg;
  const air__opt *opts;
  size_t n_opts;
  air__cfg_diag *diags;
  size_t n_diags;
  size_t cap_diags;
  size_t n_errors;
  size_t n_dropped;
  bool oom;
  bool in_builtin;     /* reading the built-in rules: no file positions */
  air__yaml_walk walk; /* stop: an alias bomb ended the walk */
  struct fy_node *defaults_rules; /* rules: of defaults:, NULL if none */
} air__cfg_ctx;

/* Keys seen in one map, by option index: key node and value node. */
typedef struct air__cfg_seen {
  struct fy_node *key[AIR__MAX_OPTS];
  struct fy_node *val[AIR__MAX_OPTS];
} air__cfg_seen;

/*
 * A reader of one option type that is not a scalar: v (aliases followed)
 * at `at`, named path, into obj (the object of the map being read) or pol
 * (the policy of the defaults or route being read, NULL elsewhere).
 */
typedef void air__cfg_read_fn(air__cfg_ctx *c, const air__opt *o,
                              struct fy_node *v, air__yaml_loc at,
                              const char *path, void *obj, air__policy *pol);

/* ---- config_walk.c ------------------------------------------------------- */

/* A load of the config named file begins (cfg not made yet). */
void air__cfg_begin(air__cfg_ctx *c, const char *file);

/* Records an error or a warning at `at`. */
void air__cfg_error(air__cfg_ctx *c, air__yaml_loc at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void air__cfg_warn(air__cfg_ctx *c, air__yaml_loc at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Hands every collected diagnostic to cb (may be NULL), sorted by position,
 * then frees them. */
void air__cfg_flush(air__cfg_ctx *c, air_diag_cb cb, void *data);

/* A copy of s[0..n) and a NUL; NULL (c->oom set) when memory is short. */
char *air__cfg_strndup(air__cfg_ctx *c, const char *s, size_t n);

/* 'value' for messages into out[sz]: quoted, truncated, control bytes
 * shown as '?'. Returns out. */
const char *air__cfg_shown(char *out, size_t sz, const char *s, size_t n);

/* s[0..n) equals lit (ieq: ignoring ASCII case). */
bool air__cfg_eq(const char *s, size_t n, const char *lit);
bool air__cfg_ieq(const char *s, size_t n, const char *lit);

/* Config paths in out[AIR__CFG_PATH_BYTES]; a long one ends in "...":
 * "path.key" (key alone at the top level), "path[i]". */
void air__cfg_path_fmt(char *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void air__cfg_path_key(char *out, const char *path, const char *key);
void air__cfg_path_idx(char *out, const char *path, size_t i);

/* Whether cand is a likely misspelling of s[0..n) and closer than *best
 * (then *best is its distance): for "did you mean". */
bool air__cfg_close_to(const char *s, size_t n, const char *cand, size_t *best);

/* Follows an alias; visits are counted, so alias bombs end in an error. */
struct fy_node *air__cfg_deref(air__cfg_ctx *c, struct fy_node *n);

/* The value of key in mapping n (aliases followed), or NULL; *keyp (when
 * not NULL) receives the key node. */
struct fy_node *air__cfg_map_get(air__cfg_ctx *c, struct fy_node *n,
                                 const char *key, struct fy_node **keyp);

/* The option name[0..n) of scope, or NULL; *idx its index (idx may be
 * NULL). opt_index: the index of an option the table has. */
const air__opt *air__cfg_find_opt(const air__cfg_ctx *c, unsigned scope,
                                  const char *name, size_t n, size_t *idx);
size_t air__cfg_opt_index(const air__cfg_ctx *c, unsigned scope,
                          const char *name);

/* Where option o of obj/pol is stored; NULL for a policy option where no
 * policy is read. */
void *air__cfg_field(const air__opt *o, void *obj, air__policy *pol);

/*
 * Applies the keys of map (a mapping, or null meaning empty) to obj/pol per
 * the options of scope, in phase order. `at` locates the map for "missing
 * key" errors. seen (optional) receives the key and value nodes by index.
 */
void air__cfg_apply_map(air__cfg_ctx *c, unsigned scope, struct fy_node *map,
                        air__yaml_loc at, void *obj, air__policy *pol,
                        const char *path, air__cfg_seen *seen);

/* Fills obj/pol with the defaults of every option of scope (recursively). */
void air__cfg_init_obj(air__cfg_ctx *c, unsigned scope, void *obj,
                       air__policy *pol);

/* ---- config_value.c ------------------------------------------------------ */

/*
 * Converts scalar text s (n bytes) per o and stores it in field. Returns 0,
 * or -1 with why set (field untouched). Used for file values and for the
 * table's own defaults.
 */
int air__cfg_convert(air__cfg_ctx *c, const air__opt *o, const char *s,
                     size_t n, void *field, char *why, size_t wsz);

/* Reads a scalar value node into field, reporting type and range errors. */
void air__cfg_read_scalar(air__cfg_ctx *c, const air__opt *o, struct fy_node *v,
                          air__yaml_loc at, const char *path, void *field);

/* Checks v is a list of at most max entries (what: "rules", ...); returns
 * the count to read. */
size_t air__cfg_list_count(air__cfg_ctx *c, struct fy_node *v, air__yaml_loc at,
                           const char *path, uint64_t max, const char *what);

/* The readers of the value types (AIR__T_REASONS, STATUS, PER_REASON,
 * PHRASES and NAMES, HEADERS, OVERRIDE). */
air__cfg_read_fn air__cfg_read_reasons;
air__cfg_read_fn air__cfg_read_status;
air__cfg_read_fn air__cfg_read_per_reason;
air__cfg_read_fn air__cfg_read_strlist;
air__cfg_read_fn air__cfg_read_headers;
air__cfg_read_fn air__cfg_read_override;

/* ---- config.c ------------------------------------------------------------ */

/* The readers of the lists that make the config (AIR__T_PROVIDERS, ROUTES,
 * TARGETS, RULES). */
air__cfg_read_fn air__cfg_read_providers;
air__cfg_read_fn air__cfg_read_routes;
air__cfg_read_fn air__cfg_read_targets;
air__cfg_read_fn air__cfg_read_rules;

/* Frees n strings and the array. */
void air__cfg_strlist_free(char **v, size_t n);

#endif
