/*
 * The config option table (docs/style.md §8, redis' static_configs[]): one
 * array of descriptors -- name, where it is accepted, type, bounds, default,
 * doc -- that drives parsing, validation, the `airetry check` dump and the
 * reference in docs/config.md. Adding a key is adding one row here (plus a
 * field in config.h); nothing else repeats the key's name or its default.
 */
#ifndef AIR__CONFIG_TABLE_H
#define AIR__CONFIG_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Where a key is accepted: one bit per map kind of the config file. */
enum {
  AIR__SC_TOP = 1u << 0,             /* the top level */
  AIR__SC_LIMITS = 1u << 1,          /* limits: */
  AIR__SC_STATE = 1u << 2,           /* state: */
  AIR__SC_PROVIDER = 1u << 3,        /* providers[] */
  AIR__SC_BREAKER = 1u << 4,         /* defaults.breaker, providers[].breaker */
  AIR__SC_DEFAULTS = 1u << 5,        /* defaults: */
  AIR__SC_ROUTE = 1u << 6,           /* routes[] */
  AIR__SC_TARGET = 1u << 7,          /* routes[].targets[] in map form */
  AIR__SC_TIMEOUTS = 1u << 8,        /* defaults/route timeouts: */
  AIR__SC_TARGET_TIMEOUTS = 1u << 9, /* routes[].targets[].timeouts: */
  AIR__SC_BUDGET = 1u << 10,         /* budget: */
  AIR__SC_STICKY = 1u << 11,         /* sticky: */
  AIR__SC_REFUSAL = 1u << 12,        /* refusal: */
  AIR__SC_RULE = 1u << 13,           /* rules[] */
  AIR__SC_BACKOFF = 1u << 14,        /* rules[].backoff */
  AIR__SC_RETRY_AFTER = 1u << 15,    /* rules[].retry_after */
  AIR__SC_REDIS = 1u << 16,          /* state.redis */
  AIR__SC_CONTINUATION = 1u << 17,   /* continuation: (route, defaults) */
  AIR__SC_HEDGE = 1u << 19,          /* hedge: (route, defaults, target) */
  /* Bits 20 and up: telemetry's sections, apart from the bits other
   * sections may take next. */
  AIR__SC_TELEMETRY = 1u << 20, /* telemetry: */
  AIR__SC_OTLP = 1u << 21,      /* telemetry.otlp */
};

/* How a value is read. Scalars are stored at `offset` in the current object. */
typedef enum air__opt_type {
  AIR__T_U64,        /* non-negative integer (uint64_t) */
  AIR__T_U32,        /* non-negative integer (uint32_t) */
  AIR__T_COUNT,      /* integer or "unlimited" (uint32_t, AIR__UNLIMITED) */
  AIR__T_DOUBLE,     /* number (double), bounds in dmin/dmax */
  AIR__T_BOOL,       /* true | false */
  AIR__T_STR,        /* string (char *), length <= max, checked by `check` */
  AIR__T_ENUM,       /* one of `enums` (stored as an int-sized enum) */
  AIR__T_SECTION,    /* a map whose keys are in scope `sub`; its object is
                        the current object + offset */
  AIR__T_DEFAULTS,   /* the defaults: map (policy + breaker) */
  AIR__T_PROVIDERS,  /* list of provider maps */
  AIR__T_ROUTES,     /* list of route maps */
  AIR__T_TARGETS,    /* list of "provider/model" or target maps */
  AIR__T_RULES,      /* list of rule maps */
  AIR__T_REASONS,    /* a reason or a list of reasons (uint32_t mask) */
  AIR__T_STATUS,     /* list of 429 / "5xx" (air__rule.status) */
  AIR__T_PER_REASON, /* map reason -> count (air__budget.per_reason) */
  AIR__T_PHRASES,    /* list of strings (char **, count at noffset) */
  AIR__T_NAMES,      /* list of header names (char **, count at noffset) */
  AIR__T_HEADERS,    /* map header -> value (air__kv *, count at noffset) */
  AIR__T_OVERRIDE,   /* map of request fields, stored as JSON text */
} air__opt_type;

/* Which object `offset` is relative to. */
typedef enum air__opt_base {
  AIR__B_OBJ,    /* the object of the map being read */
  AIR__B_POLICY, /* the air__policy of the defaults or route being read */
} air__opt_base;

/* Extra checks on AIR__T_STR values. */
typedef enum air__str_check {
  AIR__CK_NONE,
  AIR__CK_NAME,   /* route/provider name: no '/', no blanks or controls */
  AIR__CK_TARGET, /* "provider/model" naming a configured provider */
  AIR__CK_ENV,    /* environment variable name [A-Za-z_][A-Za-z0-9_]* */
  AIR__CK_URL,    /* http:// or https:// URL */
  AIR__CK_REDIS,  /* a redis:// URL without a password (redis_url.h) */
  AIR__CK_LISTEN, /* HOST:PORT */
  AIR__CK_TEXT,   /* non-empty, no NUL */
} air__str_check;

enum {
  AIR__F_REQUIRED = 1u << 0, /* the map must have this key */
};

/* Fields in the order the table reads best; the 8 padding bytes an entry
 * could save are nothing for one static table of ~100 entries.
 * NOLINTNEXTLINE(clang-analyzer-optin.performance.Padding) */
typedef struct air__opt {
  const char *name;
  unsigned scopes; /* AIR__SC_* bits where the key is accepted */
  air__opt_type type;
  air__opt_base base;
  size_t offset;
  size_t noffset;    /* lists: where the size_t element count lives */
  unsigned sub;      /* SECTION: scope of the keys inside */
  unsigned phase;    /* keys of a map are read in phase order (0 first) */
  uint64_t min, max; /* integers: bounds; STR: max is the length limit */
  double dmin, dmax; /* DOUBLE bounds */
  const char *const *enums; /* ENUM: names by value, NULL-terminated */
  air__str_check check;
  const char *def;     /* the default as YAML text; NULL: none */
  const char *def_doc; /* how the default reads in the docs when def is NULL */
  unsigned flags;
  const char *doc;
} air__opt;

/* The table and its length. Static, immutable. */
const air__opt *air__config_opts(size_t *n);

/* An upper bound on the table length (for per-map "seen" arrays). */
#define AIR__MAX_OPTS 128

/* The YAML text of the built-in rules of docs/design.md §3. */
const char *air__config_builtin_rules(void);

/* The name of a scope bit as a config path ("routes[].timeouts"). */
const char *air__config_scope_path(unsigned scope);

/*
 * Writes the Markdown reference of every key (one table per map kind),
 * generated from the table; docs/config.md embeds it verbatim between
 * "<!-- BEGIN GENERATED -->" and "<!-- END GENERATED -->".
 */
void air__config_reference(FILE *f);

#endif
