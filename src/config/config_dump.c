/*
 * air_config_dump: the resolved config as YAML, walking the option table, so
 * every key prints under the name the loader reads. The output loads back
 * into the same config (tests check the round trip). Key values never
 * appear: for api_key_env and client_keys_env only whether the variable is
 * set is shown, as a comment.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"
#include "config_table.h"
#include "redis_url.h"
#include "telemetry.h"

static bool ieq(const char *a, const char *b) {
  for (; *a && *b; a++, b++)
    if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return false;
  return *a == *b;
}

typedef struct dumper {
  FILE *f;
  const air_config *cfg;
  const air__opt *opts;
  size_t n_opts;
} dumper;

/*
 * Whether s reads back as the same string when printed plain: starts with a
 * letter or '_', uses no YAML indicator, and is no word YAML 1.1 or airetry
 * gives a meaning (true, no, unlimited, ...).
 */
static bool plain_ok(const char *s) {
  static const char *const words[] = {
      "true", "false", "null", "yes", "no", "on", "off", "y", "n", "unlimited"};
  if (!s[0] || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
  for (const char *p = s; *p; p++)
    if (!isalnum((unsigned char)*p) && !strchr("_.-/+@", *p)) return false;
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
    if (ieq(s, words[i])) return false;
  return true;
}

/* A YAML scalar: plain when unambiguous, else double-quoted. */
static void d_str(FILE *f, const char *s) {
  if (plain_ok(s)) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
      case '"':
        fputs("\\\"", f);
        break;
      case '\\':
        fputs("\\\\", f);
        break;
      case '\n':
        fputs("\\n", f);
        break;
      case '\r':
        fputs("\\r", f);
        break;
      case '\t':
        fputs("\\t", f);
        break;
      default:
        if (*p < 0x20 || *p == 0x7f)
          fprintf(f, "\\x%02x", *p);
        else
          fputc(*p, f);
    }
  }
  fputc('"', f);
}

/* The shortest of %.15g / %.17g that reads back as v. */
static void d_double(FILE *f, double v) {
  char b[64];
  snprintf(b, sizeof b, "%.15g", v);
  if (strtod(b, NULL) != v) snprintf(b, sizeof b, "%.17g", v);
  fputs(b, f);
}

static void d_count(FILE *f, uint32_t v) {
  if (v == AIR__UNLIMITED)
    fputs("unlimited", f);
  else
    fprintf(f, "%u", v);
}

/* Whether option o of obj has something to print (optional values do not). */
static bool d_present(const air__opt *o, const void *field, const void *base) {
  switch (o->type) {
    case AIR__T_STR:
    case AIR__T_OVERRIDE:
      return *(char *const *)field != NULL;
    case AIR__T_REASONS:
      return *(const uint32_t *)field != 0;
    case AIR__T_STATUS:
      return *(const size_t *)(const void *)((const char *)base + o->noffset) !=
             0;
    default:
      return true;
  }
}

static void d_map(const dumper *d, unsigned scope, const void *obj,
                  const air__policy *pol, int indent, bool dash, bool flow);

/* A rule's backoff only matters for retry, its retry_after not for fail. */
static bool d_rule_skip(const air__opt *o, const air__rule *r) {
  if (o->type != AIR__T_SECTION) return false;
  if (o->sub == AIR__SC_BACKOFF) return r->action != AIR__RULE_RETRY;
  if (o->sub == AIR__SC_RETRY_AFTER) return r->action == AIR__RULE_FAIL;
  return false;
}

/* Whether a section object has any option to print. */
static bool d_any(const dumper *d, unsigned scope, const void *obj) {
  for (size_t i = 0; i < d->n_opts; i++) {
    const air__opt *o = &d->opts[i];
    if ((o->scopes & scope) && d_present(o, (const char *)obj + o->offset, obj))
      return true;
  }
  return false;
}

/* A list of n maps of `size` bytes each, as block items (or " []"). */
static void d_items(const dumper *d, unsigned scope, const void *arr,
                    size_t size, size_t n, int indent, bool pol_in_route) {
  if (n == 0) {
    fputs(" []\n", d->f);
    return;
  }
  fputc('\n', d->f);
  for (size_t i = 0; i < n; i++) {
    const void *item = (const char *)arr + i * size;
    const air__policy *pol =
        pol_in_route ? &((const air__route *)item)->policy : NULL;
    d_map(d, scope, item, pol, indent + 4, true, false);
  }
}

/* The resolved state.redis as a comment: where state lives, the URL
 * without its password, where the password comes from. */
static void d_redis_note(const dumper *d, int indent) {
  const air__redis_cfg *r = &d->cfg->redis;
  air__redis_url u;
  char shown[AIR__MAX_REDIS_HOST_BYTES + AIR__MAX_REDIS_SECRET_BYTES + 64];
  if (!r->resolved_url ||
      air__redis_url_parse(r->resolved_url, strlen(r->resolved_url), &u, NULL,
                           0) != 0) {
    air__redis_url_wipe(&u);
    fprintf(d->f, "%*s# not in use: breaker and sticky state is per process\n",
            indent, "");
    return;
  }
  air__redis_url_redact(&u, shown, sizeof shown);
  bool url_pw = u.has_password;
  air__redis_url_wipe(&u);
  for (char *p = shown; *p; p++)
    if ((unsigned char)*p < 0x20) *p = '?';
  fprintf(d->f, "%*s# shared through %s, password %s\n", indent, "", shown,
          r->password ? "from password_env"
          : url_pw    ? "from the URL in url_env"
                      : "none");
}

/* Prints one value after "name:" (block mode ends the line). */
static void d_value(const dumper *d, const air__opt *o, const void *obj,
                    const air__policy *pol, int indent, bool flow,
                    bool child_flow) {
  FILE *f = d->f;
  const void *base = o->base == AIR__B_POLICY ? (const void *)pol : obj;
  const void *field = (const char *)base + o->offset;
  const size_t *count =
      (const size_t *)(const void *)((const char *)base + o->noffset);
  switch (o->type) {
    case AIR__T_U64:
      fprintf(f, " %llu", (unsigned long long)*(const uint64_t *)field);
      break;
    case AIR__T_U32:
      fprintf(f, " %u", *(const uint32_t *)field);
      break;
    case AIR__T_COUNT:
      fputc(' ', f);
      d_count(f, *(const uint32_t *)field);
      break;
    case AIR__T_DOUBLE:
      fputc(' ', f);
      d_double(f, *(const double *)field);
      break;
    case AIR__T_BOOL:
      fputs(*(const bool *)field ? " true" : " false", f);
      break;
    case AIR__T_STR:
      fputc(' ', f);
      d_str(f, *(char *const *)field);
      if (o->check == AIR__CK_ENV && !flow) {
        const char *v = getenv(*(char *const *)field);
        fputs(v && v[0] ? "  # set" : "  # NOT SET in the environment", f);
      }
      break;
    case AIR__T_ENUM: {
      int v = *(const int *)field, k = 0;
      while (k < v && o->enums[k]) k++;
      fprintf(f, " %s", o->enums[k] ? o->enums[k] : "?");
      break;
    }
    case AIR__T_SECTION:
      if (o->sub == AIR__SC_REDIS && !d->cfg->redis.url &&
          !d->cfg->redis.url_env) {
        fputs(" null  ", f);
        d_redis_note(d, 0);
        return;
      }
      if (o->sub == AIR__SC_REDIS && !child_flow) {
        fputc('\n', f);
        d_redis_note(d, indent + 2);
        d_map(d, o->sub, field, NULL, indent + 2, false, false);
        return;
      }
      if (child_flow || !d_any(d, o->sub, field)) {
        fputc(' ', f);
        d_map(d, o->sub, field, NULL, 0, false, true);
      } else {
        fputc('\n', f);
        d_map(d, o->sub, field, NULL, indent + 2, false, false);
        return;
      }
      break;
    case AIR__T_DEFAULTS:
      fputc('\n', f);
      d_map(d, AIR__SC_DEFAULTS, d->cfg, &d->cfg->defaults, indent + 2, false,
            false);
      return;
    case AIR__T_PROVIDERS:
      d_items(d, AIR__SC_PROVIDER, d->cfg->providers, sizeof(air__provider),
              d->cfg->n_providers, indent, false);
      return;
    case AIR__T_ROUTES:
      d_items(d, AIR__SC_ROUTE, d->cfg->routes, sizeof(air__route),
              d->cfg->n_routes, indent, true);
      return;
    case AIR__T_TARGETS: {
      const air__route *r = obj;
      d_items(d, AIR__SC_TARGET, r->targets, sizeof(air__target), r->n_targets,
              indent, false);
      return;
    }
    case AIR__T_RULES:
      /* pol is non-NULL: d_map skips AIR__B_POLICY options without one.
       * NOLINTNEXTLINE(clang-analyzer-core.NullDereference) */
      d_items(d, AIR__SC_RULE, pol->rules, sizeof(air__rule), pol->n_rules,
              indent, false);
      return;
    case AIR__T_REASONS: {
      uint32_t m = *(const uint32_t *)field;
      const char *sep = "";
      fputs(" [", f);
      for (int r = 1; r < AIR_REASON__COUNT; r++) {
        if (!(m & (1u << r))) continue;
        fprintf(f, "%s%s", sep, air_reason_name((air_reason)r));
        sep = ", ";
      }
      fputc(']', f);
      break;
    }
    case AIR__T_STATUS: {
      const air__rule *r = obj;
      fputs(" [", f);
      for (size_t i = 0; i < r->n_status; i++) {
        if (r->status[i].lo == r->status[i].hi)
          fprintf(f, "%s%u", i ? ", " : "", r->status[i].lo);
        else
          fprintf(f, "%s\"%uxx\"", i ? ", " : "", r->status[i].lo / 100u);
      }
      fputc(']', f);
      break;
    }
    case AIR__T_PER_REASON: {
      const uint32_t *per = field;
      const char *sep = "";
      fputs(" {", f);
      for (int r = 1; r < AIR_REASON__COUNT; r++) {
        if (per[r] == AIR__UNLIMITED) continue;
        fprintf(f, "%s%s: %u", sep, air_reason_name((air_reason)r), per[r]);
        sep = ", ";
      }
      fputc('}', f);
      break;
    }
    case AIR__T_PHRASES:
    case AIR__T_NAMES: {
      char *const *list = *(char **const *)field;
      fputs(" [", f);
      for (size_t i = 0; i < *count; i++) {
        if (i) fputs(", ", f);
        d_str(f, list[i]);
      }
      fputc(']', f);
      break;
    }
    case AIR__T_HEADERS: {
      const air__kv *kv = *(air__kv *const *)field;
      fputs(" {", f);
      for (size_t i = 0; i < *count; i++) {
        if (i) fputs(", ", f);
        d_str(f, kv[i].name);
        fputs(": ", f);
        d_str(f, kv[i].value);
      }
      fputc('}', f);
      break;
    }
    case AIR__T_OVERRIDE:
      fprintf(f, " %s", *(char *const *)field);
      break;
  }
  if (!flow) fputc('\n', f);
}

/*
 * Prints the options of scope held by obj/pol: block style at indent (the
 * first line as a "- " list item when dash), or as one flow map.
 */
static void d_map(const dumper *d, unsigned scope, const void *obj,
                  const air__policy *pol, int indent, bool dash, bool flow) {
  bool first = true;
  bool child_flow = flow || scope == AIR__SC_RULE || scope == AIR__SC_TARGET;
  if (flow) fputc('{', d->f);
  for (size_t i = 0; i < d->n_opts; i++) {
    const air__opt *o = &d->opts[i];
    if (!(o->scopes & scope)) continue;
    const void *base = o->base == AIR__B_POLICY ? (const void *)pol : obj;
    if (!base) continue;
    if (!d_present(o, (const char *)base + o->offset, base)) continue;
    if (scope == AIR__SC_RULE && d_rule_skip(o, obj)) continue;
    if (flow) {
      fprintf(d->f, "%s%s:", first ? "" : ", ", o->name);
    } else if (first && dash) {
      fprintf(d->f, "%*s- %s:", indent - 2, "", o->name);
    } else {
      fprintf(d->f, "%*s%s:", indent, "", o->name);
    }
    first = false;
    d_value(d, o, obj, pol, indent, flow, child_flow);
  }
  if (flow) fputc('}', d->f);
}

int air_config_dump(const air_config *cfg, FILE *f) {
  if (!cfg || !f) return AIR_EINVAL;
  dumper d = {f, cfg, NULL, 0};
  d.opts = air__config_opts(&d.n_opts);
  fputs("# resolved config of ", f);
  for (const char *p = cfg->file ? cfg->file : "?"; *p; p++)
    fputc((unsigned char)*p < 0x20 ? '?' : *p, f);
  fputs(", every default filled in\n", f);
  d_map(&d, AIR__SC_TOP, cfg, NULL, 0, false, false);
  air__otel_dump(&cfg->otel, f);
  return ferror(f) || fflush(f) != 0 ? AIR_EIO : 0;
}
