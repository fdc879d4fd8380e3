/*
 * Tracing settings (telemetry.h): the OTEL_* variables over telemetry.otlp.
 * Resolved once per config load, so a reload reads the environment again
 * (as for api_key_env).
 */
#include "telemetry.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "airetry.h"
#include "limits.h"

#define TRACES_PATH "/v1/traces"
#define MSG_BYTES 512 /* one diagnostic line */

typedef struct rctx {
  air__env_fn env;
  void *env_data;
  air__otel_diag_fn diag;
  void *diag_data;
  int rc;
} rctx;

__attribute__((format(printf, 3, 4))) static void report(rctx *c, bool error,
                                                         const char *fmt, ...) {
  char msg[MSG_BYTES];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (error && c->rc == 0) c->rc = AIR_ECONFIG;
  if (c->diag) c->diag(c->diag_data, error, msg);
}

/* The variable's value, NULL when unset or empty. */
static const char *var(rctx *c, const char *name) {
  const char *v = c->env(c->env_data, name);
  return v != NULL && v[0] != '\0' ? v : NULL;
}

const char *air__env_getenv(void *data, const char *name) {
  (void)data;
  return getenv(name);
}

static char *dup2(rctx *c, const char *a, size_t an, const char *b) {
  size_t bn = b ? strlen(b) : 0;
  char *s = malloc(an + bn + 1);
  if (s == NULL) {
    c->rc = AIR_ENOMEM;
    return NULL;
  }
  memcpy(s, a, an);
  if (bn) memcpy(s + an, b, bn);
  s[an + bn] = '\0';
  return s;
}

static bool is_http_url(const char *s) {
  return strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0;
}

static bool has_ctl(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return true;
  return false;
}

/* base + "/v1/traces", without a doubled '/' and without appending twice. */
static char *traces_url(rctx *c, const char *base) {
  size_t n = strlen(base);
  while (n > 0 && base[n - 1] == '/') n--;
  size_t pn = sizeof(TRACES_PATH) - 1;
  if (n >= pn && memcmp(base + n - pn, TRACES_PATH, pn) == 0)
    return dup2(c, base, n, NULL);
  return dup2(c, base, n, TRACES_PATH);
}

static void resolve_endpoint(rctx *c, const air__telemetry_file *f,
                             air__otel *o) {
  const char *v;
  if ((v = var(c, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) != NULL) {
    o->endpoint = dup2(c, v, strlen(v), NULL);
    o->endpoint_from = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
  } else if ((v = var(c, "OTEL_EXPORTER_OTLP_ENDPOINT")) != NULL) {
    o->endpoint = traces_url(c, v);
    o->endpoint_from = "OTEL_EXPORTER_OTLP_ENDPOINT";
  } else if (f->otlp.endpoint != NULL) {
    o->endpoint = traces_url(c, f->otlp.endpoint);
    o->endpoint_from = "telemetry.otlp.endpoint";
  }
  if (o->endpoint == NULL) return;
  size_t n = strlen(o->endpoint);
  if (!is_http_url(o->endpoint) || has_ctl(o->endpoint, n) ||
      strchr(o->endpoint, ' ') != NULL) {
    report(c, true,
           "%s: the traces endpoint must be an http:// or https:// URL",
           o->endpoint_from);
  } else if (n > AIR__MAX_OTLP_ENDPOINT_BYTES) {
    report(c, true, "%s: the traces endpoint is over %u bytes",
           o->endpoint_from, (unsigned)AIR__MAX_OTLP_ENDPOINT_BYTES);
  } else {
    o->enabled = true;
  }
}

static int hexv(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

/* Percent-decodes and trims [p, p+n) into a new string; NULL with *bad set
 * on a broken escape or a control byte after decoding. */
static char *decode(rctx *c, const char *p, size_t n, bool *bad) {
  while (n > 0 && (*p == ' ' || *p == '\t')) p++, n--;
  while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
  char *s = malloc(n + 1);
  if (s == NULL) {
    c->rc = AIR_ENOMEM;
    return NULL;
  }
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    char ch = p[i];
    if (ch == '%') {
      int hi = i + 2 < n ? hexv(p[i + 1]) : -1;
      int lo = i + 2 < n ? hexv(p[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        free(s);
        *bad = true;
        return NULL;
      }
      ch = (char)(hi << 4 | lo);
      i += 2;
    }
    if ((unsigned char)ch < 0x20 || ch == 0x7f) {
      free(s);
      *bad = true;
      return NULL;
    }
    s[k++] = ch;
  }
  s[k] = '\0';
  return s;
}

/* A header name as HTTP allows it (RFC 9110 token). */
static bool token_ok(const char *s) {
  if (s[0] == '\0') return false;
  for (const char *q = s; *q; q++) {
    unsigned char ch = (unsigned char)*q;
    if (ch <= 0x20 || ch >= 0x7f || strchr("\"(),/:;<=>?@[\\]{}", ch))
      return false;
  }
  return true;
}

static void parse_headers(rctx *c, const char *from, const char *v,
                          air__otel *o) {
  if (strlen(v) > AIR__MAX_OTLP_HEADERS_BYTES) {
    report(c, true, "%s: over %u bytes", from,
           (unsigned)AIR__MAX_OTLP_HEADERS_BYTES);
    return;
  }
  o->headers = calloc(AIR__MAX_OTLP_HEADERS, sizeof(air__kv));
  if (o->headers == NULL) {
    c->rc = AIR_ENOMEM;
    return;
  }
  o->headers_from = from;
  unsigned entry = 0;
  for (const char *p = v; *p && c->rc != AIR_ENOMEM;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    entry++;
    const char *eq = memchr(p, '=', len);
    bool blank = true;
    for (size_t i = 0; i < len; i++) blank &= p[i] == ' ' || p[i] == '\t';
    if (!blank) {
      bool bad = false;
      char *name = eq ? decode(c, p, (size_t)(eq - p), &bad) : NULL;
      char *value =
          name ? decode(c, eq + 1, len - (size_t)(eq - p) - 1, &bad) : NULL;
      /* The text is never quoted: it may hold a secret. */
      if (eq == NULL) {
        report(c, true, "%s: entry %u is not name=value", from, entry);
      } else if (bad || name == NULL || value == NULL || !token_ok(name)) {
        if (c->rc != AIR_ENOMEM)
          report(c, true, "%s: entry %u has a bad name or encoding", from,
                 entry);
      } else if (o->n_headers == AIR__MAX_OTLP_HEADERS) {
        report(c, true, "%s: more than %u headers", from,
               (unsigned)AIR__MAX_OTLP_HEADERS);
      } else {
        o->headers[o->n_headers].name = name;
        o->headers[o->n_headers].value = value;
        o->n_headers++;
        name = value = NULL;
      }
      free(name);
      if (value) {
        for (volatile char *q = value; *q; q++) *q = 0;
        free(value);
      }
    }
    if (comma == NULL) break;
    p = comma + 1;
  }
}

static void resolve_headers(rctx *c, const air__telemetry_file *f,
                            air__otel *o) {
  const char *v;
  if ((v = var(c, "OTEL_EXPORTER_OTLP_TRACES_HEADERS")) != NULL) {
    parse_headers(c, "OTEL_EXPORTER_OTLP_TRACES_HEADERS", v, o);
  } else if ((v = var(c, "OTEL_EXPORTER_OTLP_HEADERS")) != NULL) {
    parse_headers(c, "OTEL_EXPORTER_OTLP_HEADERS", v, o);
  } else if (f->otlp.headers_env != NULL) {
    if ((v = var(c, f->otlp.headers_env)) != NULL)
      parse_headers(c, "telemetry.otlp.headers_env", v, o);
    else
      report(c, false,
             "telemetry.otlp.headers_env: %s is not set in the environment; "
             "traces are exported without extra headers",
             f->otlp.headers_env);
  }
}

static void resolve_sampler(rctx *c, const air__telemetry_file *f,
                            air__otel *o) {
  static const struct {
    const char *name;
    bool parent_based;
    double ratio; /* < 0: from the argument */
  } samplers[] = {
      {"always_on", false, 1},
      {"always_off", false, 0},
      {"traceidratio", false, -1},
      {"parentbased_always_on", true, 1},
      {"parentbased_always_off", true, 0},
      {"parentbased_traceidratio", true, -1},
  };
  const char *v = var(c, "OTEL_TRACES_SAMPLER");
  if (v == NULL) {
    o->sampler.parent_based = true;
    o->sampler.ratio = f->otlp.sample_ratio;
    o->sampler_name = "parentbased_traceidratio";
    o->sampler_from = "telemetry.otlp.sample_ratio";
    return;
  }
  for (size_t i = 0; i < sizeof(samplers) / sizeof(samplers[0]); i++) {
    if (strcmp(v, samplers[i].name) != 0) continue;
    o->sampler.parent_based = samplers[i].parent_based;
    o->sampler.ratio = samplers[i].ratio;
    o->sampler_name = samplers[i].name;
    o->sampler_from = "OTEL_TRACES_SAMPLER";
    if (samplers[i].ratio >= 0) return;
    o->sampler.ratio = 1.0;
    const char *arg = var(c, "OTEL_TRACES_SAMPLER_ARG");
    if (arg == NULL) return;
    char *end = NULL;
    double r = strtod(arg, &end);
    if (end == arg || *end != '\0' || !(r >= 0.0 && r <= 1.0))
      report(c, true,
             "OTEL_TRACES_SAMPLER_ARG: '%.40s' is not a ratio from 0 to 1",
             arg);
    else
      o->sampler.ratio = r;
    return;
  }
  report(c, true,
         "OTEL_TRACES_SAMPLER: '%.60s' is not one of always_on, always_off, "
         "traceidratio, parentbased_always_on, parentbased_always_off, "
         "parentbased_traceidratio",
         v);
}

static void resolve_protocol(rctx *c, air__otel *o) {
  const char *from = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
  const char *v = var(c, from);
  if (v == NULL) v = var(c, from = "OTEL_EXPORTER_OTLP_PROTOCOL");
  if (v == NULL || strcmp(v, "http/json") == 0) return;
  if (strcmp(v, "http/protobuf") == 0) {
    o->protobuf_asked = true;
    if (o->enabled)
      report(c, false,
             "%s=http/protobuf: airetry sends OTLP/HTTP JSON; the "
             "collector must accept application/json",
             from);
  } else if (strcmp(v, "grpc") == 0) {
    report(c, true,
           "%s=grpc: airetry exports OTLP/HTTP JSON only; use http/json "
           "and the collector's HTTP port (4318)",
           from);
  } else {
    report(c, true, "%s: '%.40s' is not http/json, http/protobuf or grpc", from,
           v);
  }
}

/* A whole number of ms from 1 to AIR__MAX_OTLP_WAIT_MS in the first of
 * the variables set, or def. */
static uint64_t resolve_ms(rctx *c, const char *a, const char *b,
                           uint64_t def) {
  const char *from = a;
  const char *v = var(c, a);
  if (v == NULL && b != NULL) v = var(c, from = b);
  if (v == NULL) return def;
  char *end = NULL;
  unsigned long long ms = strtoull(v, &end, 10);
  if (end == v || *end != '\0' || v[0] == '-' || ms < 1 ||
      ms > AIR__MAX_OTLP_WAIT_MS) {
    report(c, true, "%s: '%.40s' is not a number of milliseconds from 1 to %u",
           from, v, (unsigned)AIR__MAX_OTLP_WAIT_MS);
    return def;
  }
  return ms;
}

int air__otel_resolve(const air__telemetry_file *f, air__env_fn env,
                      void *env_data, air__otel *out, air__otel_diag_fn diag,
                      void *diag_data) {
  memset(out, 0, sizeof(*out));
  rctx c = {env, env_data, diag, diag_data, 0};
  const char *off = var(&c, "OTEL_SDK_DISABLED");
  resolve_endpoint(&c, f, out);
  if (off != NULL && strcasecmp(off, "true") == 0) out->enabled = false;
  resolve_headers(&c, f, out);
  const char *svc = var(&c, "OTEL_SERVICE_NAME");
  if (svc != NULL && (strlen(svc) > AIR__MAX_SERVICE_NAME_BYTES ||
                      has_ctl(svc, strlen(svc)))) {
    report(&c, true, "OTEL_SERVICE_NAME: over %u bytes or holds control bytes",
           (unsigned)AIR__MAX_SERVICE_NAME_BYTES);
    svc = NULL;
  }
  out->service_name =
      dup2(&c, svc ? svc : "airetry", strlen(svc ? svc : "airetry"), NULL);
  resolve_sampler(&c, f, out);
  resolve_protocol(&c, out);
  out->delay_ms =
      resolve_ms(&c, "OTEL_BSP_SCHEDULE_DELAY", NULL, AIR__OTLP_DELAY_MS);
  out->timeout_ms =
      resolve_ms(&c, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
                 "OTEL_EXPORTER_OTLP_TIMEOUT", AIR__OTLP_TIMEOUT_MS);
  return c.rc;
}

void air__otel_cleanup(air__otel *o) {
  for (size_t i = 0; i < o->n_headers; i++) {
    free(o->headers[i].name);
    for (volatile char *q = o->headers[i].value; *q; q++) *q = 0;
    free(o->headers[i].value);
  }
  free(o->headers);
  free(o->endpoint);
  free(o->service_name);
  memset(o, 0, sizeof(*o));
}

/* The URL with any user:password@ part shown as "[redacted]@". */
static void put_url(FILE *f, const char *url) {
  const char *auth = strstr(url, "://");
  auth = auth ? auth + 3 : url;
  size_t an = strcspn(auth, "/?#");
  const char *at = memchr(auth, '@', an);
  if (at == NULL) {
    fputs(url, f);
    return;
  }
  fwrite(url, 1, (size_t)(auth - url), f);
  fputs("[redacted]", f);
  fputs(at, f);
}

void air__otel_dump(const air__otel *o, FILE *f) {
  if (!o->enabled) {
    fputs(
        "# tracing: off (no OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, "
        "OTEL_EXPORTER_OTLP_ENDPOINT or telemetry.otlp.endpoint)\n",
        f);
    return;
  }
  fputs("# tracing: on, OTLP/HTTP JSON\n#   endpoint: ", f);
  put_url(f, o->endpoint);
  fprintf(f, "  (%s)\n#   headers:", o->endpoint_from);
  if (o->n_headers == 0) fputs(" none", f);
  for (size_t i = 0; i < o->n_headers; i++)
    fprintf(f, "%s %s", i ? "," : "", o->headers[i].name);
  if (o->n_headers > 0) fprintf(f, "  (names only; %s)", o->headers_from);
  fprintf(f, "\n#   service.name: %s\n", o->service_name);
  fprintf(f, "#   sampler: %s, ratio %g  (%s)\n", o->sampler_name,
          o->sampler.ratio, o->sampler_from);
  fprintf(f, "#   batch delay: %llu ms, export timeout: %llu ms\n",
          (unsigned long long)o->delay_ms, (unsigned long long)o->timeout_ms);
  if (o->protobuf_asked)
    fputs("#   protocol: http/protobuf asked for; JSON is sent\n", f);
}
