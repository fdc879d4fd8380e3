/*
 * The model-name convention (docs/mock.md "Choosing a behaviour"): a
 * behaviour chosen by the model name itself, "NAME@tok@tok...", so that a
 * test needs no script. Each token sets one key of the fault (or of every
 * attempt: tokens=, delay=, noprefill, the continue_as ones) or limits the
 * fault (k=, flap=). Pure: no I/O, no clock.
 */
#include <stdio.h>
#include <string.h>

#include "mock_int.h"
#include "yaml.h"

typedef enum ctok {
  CT_RA,
  CT_RAM,
  CT_CODE,
  CT_RESET,
  CT_HANG,
  CT_NODONE,
  CT_REFUSE,
  CT_LENGTH,
  CT_FILTER,
  CT_SILENT,
  CT_SLOW,
  CT_CUT,
  CT_STALL,
  CT_BAD,
  CT_OVERLOAD,
  CT_TOKENS,
  CT_DELAY,
  CT_NOPREFILL,
  CT_K,
  CT_FLAP,
  CT_TOOLS,
  CT_JSON,
  CT_REASON,
  CT_NREFUSE,
  CT_RESTART,
  CT_REPEAT,
  CT_PREAMBLE,
  CT_DIVERGE,
  CT_TOOLTEXT,
} ctok;

typedef struct conv_desc {
  const char *name; /* "ra" for "ra=S", "reset" for "@reset" */
  bool value;       /* takes "=VALUE" */
  ctok tok;
} conv_desc;

static const conv_desc conv[] = {
    {"ra", true, CT_RA},
    {"ram", true, CT_RAM},
    {"code", true, CT_CODE},
    {"reset", false, CT_RESET},
    {"hang", false, CT_HANG},
    {"nodone", false, CT_NODONE},
    {"refuse", false, CT_REFUSE},
    {"length", false, CT_LENGTH},
    {"filter", false, CT_FILTER},
    {"silent", true, CT_SILENT},
    {"slow", true, CT_SLOW},
    {"cut", true, CT_CUT},
    {"stall", true, CT_STALL},
    {"bad", true, CT_BAD},
    {"overload", true, CT_OVERLOAD},
    {"tokens", true, CT_TOKENS},
    {"delay", true, CT_DELAY},
    {"noprefill", false, CT_NOPREFILL},
    {"tools", true, CT_TOOLS},
    {"json", false, CT_JSON},
    {"reason", true, CT_REASON},
    {"nrefuse", false, CT_NREFUSE},
    {"restart", false, CT_RESTART},
    {"repeat", false, CT_REPEAT},
    {"repeat", true, CT_REPEAT},
    {"preamble", false, CT_PREAMBLE},
    {"diverge", false, CT_DIVERGE},
    {"tooltext", false, CT_TOOLTEXT},
    {"k", true, CT_K},
    {"flap", true, CT_FLAP},
};

static int conv_fail(air__mock_diag *d, const char *name, size_t n,
                     const char *tok, const char *why) {
  d->line = d->column = 0;
  snprintf(d->message, sizeof(d->message),
           "model %.*s: %s '@%.40s' (see airetry mock --help)",
           (int)(n > 80 ? 80 : n), name, why, tok);
  return AIR_EINVAL;
}

/* One token (NUL-terminated, inside storage) into m. */
static int conv_token(air__mock_model *m, char *tok, const char *name,
                      size_t name_n, air__mock_diag *d) {
  size_t tn = strlen(tok);
  uint64_t u = 0;
  air__mock_beh *f = &m->fault;
  if (tn == 3 && air__yaml_u64(tok, 3, 999, &u)) {
    if (u < 400 || u > 599)
      return conv_fail(d, name, name_n, tok, "status out of 400..599 in");
    f->status = (int)u;
    f->set |= AIR__MOCK_K_STATUS;
    m->has |= AIR__MOCK_M_FAULT;
    return 0;
  }
  char *eq = strchr(tok, '=');
  size_t kn = eq ? (size_t)(eq - tok) : tn;
  const conv_desc *cd = NULL;
  for (size_t i = 0; i < sizeof(conv) / sizeof(conv[0]); i++)
    if (conv[i].value == (eq != NULL) && strlen(conv[i].name) == kn &&
        memcmp(tok, conv[i].name, kn) == 0)
      cd = &conv[i];
  if (cd == NULL) return conv_fail(d, name, name_n, tok, "unknown token");
  const char *v = eq ? eq + 1 : "";
  size_t vn = strlen(v);
  bool bad = false;
  bool fault = true;
  switch (cd->tok) {
    case CT_RA:
    case CT_RAM:
      bad = !air__mock_is_number(v, vn);
      if (cd->tok == CT_RA) {
        f->retry_after = v;
        f->set |= AIR__MOCK_K_RETRY_AFTER;
      } else {
        f->retry_after_ms = v;
        f->set |= AIR__MOCK_K_RETRY_AFTER_MS;
      }
      break;
    case CT_CODE:
      bad = vn == 0;
      f->code = v;
      f->set |= AIR__MOCK_K_CODE;
      break;
    case CT_RESET:
      f->reset = true;
      f->set |= AIR__MOCK_K_RESET;
      break;
    case CT_HANG:
      f->hang = true;
      f->set |= AIR__MOCK_K_HANG;
      break;
    case CT_NODONE:
      f->no_done = true;
      f->set |= AIR__MOCK_K_NO_DONE;
      break;
    case CT_REFUSE:
    case CT_NREFUSE:
      f->refusal = AIR__MOCK_REFUSAL_TEXT;
      f->refusal_native = cd->tok == CT_NREFUSE;
      f->set |= AIR__MOCK_K_REFUSAL;
      break;
    case CT_TOOLS:
      bad = !air__yaml_u64(v, vn, AIR__MOCK_MAX_TOOL_CALLS, &u);
      f->tool_calls = (uint32_t)u;
      f->set |= AIR__MOCK_K_TOOL_CALLS;
      break;
    case CT_REASON:
      bad = !air__yaml_u64(v, vn, AIR__MOCK_MAX_TOKENS, &u);
      f->reasoning = (uint32_t)u;
      f->set |= AIR__MOCK_K_REASONING;
      break;
    case CT_JSON:
      f->json = true;
      f->set |= AIR__MOCK_K_JSON;
      break;
    case CT_TOOLTEXT:
      f->tool_text = true;
      f->set |= AIR__MOCK_K_TOOL_TEXT;
      break;
    case CT_LENGTH:
    case CT_FILTER:
      f->finish =
          cd->tok == CT_LENGTH ? AIR_FINISH_LENGTH : AIR_FINISH_CONTENT_FILTER;
      f->set |= AIR__MOCK_K_FINISH;
      break;
    case CT_SILENT:
    case CT_SLOW:
    case CT_DELAY:
      bad = !air__yaml_u64(v, vn, AIR__MOCK_MAX_MS, &u);
      if (cd->tok == CT_SILENT) {
        f->headers_delay_ms = u;
        f->set |= AIR__MOCK_K_HEADERS_DELAY;
      } else if (cd->tok == CT_SLOW) {
        f->first_delay_ms = u;
        f->set |= AIR__MOCK_K_FIRST_DELAY;
      } else {
        m->base.delay_ms = u;
        m->base.set |= AIR__MOCK_K_DELAY;
        fault = false;
      }
      break;
    case CT_CUT:
    case CT_STALL:
    case CT_OVERLOAD:
    case CT_BAD:
      bad = !air__yaml_u64(v, vn, AIR__MOCK_MAX_COUNT, &u) ||
            (cd->tok == CT_BAD && u < 1);
      if (cd->tok == CT_CUT) {
        f->cut_after = (uint32_t)u;
        f->set |= AIR__MOCK_K_CUT;
      } else if (cd->tok == CT_STALL) {
        f->stall_after = (uint32_t)u;
        f->set |= AIR__MOCK_K_STALL;
      } else if (cd->tok == CT_OVERLOAD) {
        f->overload_after = (uint32_t)u;
        f->set |= AIR__MOCK_K_OVERLOAD;
      } else {
        f->malformed_at = (uint32_t)u;
        f->set |= AIR__MOCK_K_MALFORMED;
      }
      break;
    case CT_TOKENS:
      bad = !air__yaml_u64(v, vn, AIR__MOCK_MAX_TOKENS, &u);
      m->base.tokens = (uint32_t)u;
      m->base.set |= AIR__MOCK_K_TOKENS;
      fault = false;
      break;
    case CT_NOPREFILL:
      m->base.reject_prefill = true;
      m->base.set |= AIR__MOCK_K_REJECT_PREFILL;
      fault = false;
      break;
    case CT_RESTART:
    case CT_REPEAT:
    case CT_PREAMBLE:
    case CT_DIVERGE:
      /* How the model continues: every attempt, like tokens=. */
      m->base.continue_as = cd->tok == CT_RESTART    ? AIR__MOCK_CONT_RESTART
                            : cd->tok == CT_REPEAT   ? AIR__MOCK_CONT_REPEAT
                            : cd->tok == CT_PREAMBLE ? AIR__MOCK_CONT_PREAMBLE
                                                     : AIR__MOCK_CONT_DIVERGE;
      m->base.set |= AIR__MOCK_K_CONTINUE_AS;
      if (eq != NULL) {
        bad = !air__yaml_u64(v, vn, AIR__MOCK_MAX_REPEAT_CHARS, &u);
        m->base.repeat_chars = (uint32_t)u;
        m->base.set |= AIR__MOCK_K_REPEAT_CHARS;
      }
      fault = false;
      break;
    case CT_K:
      bad = !air__yaml_u64(v, vn, UINT32_MAX, &u) || u < 1;
      m->fault_k = (uint32_t)u;
      fault = false;
      break;
    case CT_FLAP: {
      const char *dash = strchr(v, '-');
      uint64_t from = 0, to = 0;
      bad =
          dash == NULL ||
          !air__yaml_u64(v, (size_t)(dash - v), AIR__MOCK_MAX_FLAP_MS, &from) ||
          !air__yaml_u64(dash + 1, strlen(dash + 1), AIR__MOCK_MAX_FLAP_MS,
                         &to) ||
          from > to;
      m->window = true;
      m->from_ms = from;
      m->to_ms = to;
      fault = false;
      break;
    }
  }
  if (bad) return conv_fail(d, name, name_n, tok, "bad value in");
  if (fault) m->has |= AIR__MOCK_M_FAULT;
  return 0;
}

int air__mock_parse_name(const char *name, size_t n, char *storage,
                         air__mock_model *out, air__mock_diag *diag) {
  air__mock_diag scratch;
  if (diag == NULL) diag = &scratch;
  memset(out, 0, sizeof(*out));
  out->base.finish = out->then.finish = out->fault.finish = AIR_FINISH_STOP;
  if (n > 0) memcpy(storage, name, n);
  storage[n] = '\0';
  out->name = storage;
  char *at = memchr(storage, '@', n);
  if (at == NULL) return 0;
  if (memchr(storage, '\0', n) != NULL)
    return conv_fail(diag, name, n, "", "a NUL byte in");
  *at = '\0';
  char *tok = at + 1;
  for (;;) {
    char *next = strchr(tok, '@');
    if (next != NULL) *next = '\0';
    if (*tok == '\0') return conv_fail(diag, name, n, "", "an empty token");
    int rc = conv_token(out, tok, name, n, diag);
    if (rc != 0) return rc;
    if (next == NULL) break;
    tok = next + 1;
  }
  return 0;
}
