/*
 * What the mock says (docs/mock.md "The answer"): the answer's tokens and
 * prefill, and the bytes of streams, whole bodies and error bodies in
 * either dialect. The regular events and bodies come from the provider
 * codecs (byte-exact dialect output); only the faults — error bodies, the
 * mid-stream error event, malformed events — and Anthropic's early
 * message_start are written here. Pure: no I/O.
 */
#include <stdlib.h>
#include <string.h>

#include "mock_int.h"
#include "dialect.h"

#define LIT(s) s, sizeof(s) - 1

/* The answer text's maximum: the longest canonical answer fits. */
#define ANSWER_MAX_BYTES                                        \
  (AIR__MOCK_MAX_MODEL_BYTES + 4u + AIR__MOCK_MAX_TOKENS * 9u + \
   AIR__MOCK_MAX_TEXT_BYTES)

void air__mock_answer_init(air__mock_answer *a) {
  memset(a, 0, sizeof(*a));
  air__buf_init(&a->text, ANSWER_MAX_BYTES);
}

void air__mock_answer_cleanup(air__mock_answer *a) {
  air__buf_cleanup(&a->text);
  free(a->ends);
  free(a->ev);
  memset(a, 0, sizeof(*a));
}

/* Token ends of text: a token starts at each space after a non-space. */
static size_t split(const char *s, size_t n, size_t *ends) {
  size_t k = 0;
  for (size_t i = 1; i < n; i++)
    if (s[i] == ' ' && s[i - 1] != ' ') {
      if (ends != NULL) ends[k] = i;
      k++;
    }
  if (n > 0) {
    if (ends != NULL) ends[k] = n;
    k++;
  }
  return k;
}

/* The canonical answer text "[M] w1 ... wN" into out. */
static int canonical(const char *model, size_t m_n, uint32_t tokens,
                     air__buf *out) {
  int rc = air__buf_addc(out, '[');
  if (rc == 0) rc = air__buf_add(out, model, m_n);
  if (rc == 0) rc = air__buf_addc(out, ']');
  for (uint32_t i = 1; rc == 0 && i <= tokens; i++) {
    rc = air__buf_add(out, LIT(" w"));
    if (rc == 0) rc = air__buf_addu(out, i);
  }
  return rc;
}

/* The schema a request asks the answer to follow, or NULL. */
static const json_t *requested_schema(const json_t *req) {
  const json_t *s = json_object_get(
      json_object_get(json_object_get(req, "response_format"), "json_schema"),
      "schema");
  if (json_is_object(s)) return s;
  s = json_object_get(
      json_object_get(json_object_get(req, "output_config"), "format"),
      "schema");
  if (json_is_object(s)) return s;
  /* Responses: text.format {type: json_schema, name, schema}. */
  s = json_object_get(json_object_get(json_object_get(req, "text"), "format"),
                      "schema");
  return json_is_object(s) ? s : NULL;
}

static int instance(const json_t *schema, unsigned depth, air__buf *out) {
  if (depth > AIR__MOCK_MAX_SCHEMA_DEPTH || !json_is_object(schema))
    return air__buf_add(out, LIT("\"x\""));
  const json_t *v = json_object_get(schema, "const");
  if (v == NULL) v = json_array_get(json_object_get(schema, "enum"), 0);
  if (v != NULL) {
    char *d = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    if (d == NULL) return AIR_ENOMEM;
    int rc = air__buf_adds(out, d);
    free(d);
    return rc;
  }
  for (const char *alt = "anyOf"; alt != NULL;
       alt = strcmp(alt, "anyOf") == 0 ? "oneOf" : NULL) {
    const json_t *first = json_array_get(json_object_get(schema, alt), 0);
    if (first != NULL) return instance(first, depth + 1, out);
  }
  const json_t *t = json_object_get(schema, "type");
  const char *type = json_string_value(t);
  if (json_is_array(t)) {
    size_t i;
    const json_t *e;
    json_array_foreach(t, i, e) {
      const char *s = json_string_value(e);
      if (s != NULL && (type == NULL || strcmp(type, "null") == 0)) type = s;
    }
  }
  if (type == NULL)
    type = json_object_get(schema, "properties") != NULL ? "object" : "string";
  if (strcmp(type, "number") == 0 || strcmp(type, "integer") == 0)
    return air__buf_addc(out, '1');
  if (strcmp(type, "boolean") == 0) return air__buf_add(out, LIT("true"));
  if (strcmp(type, "null") == 0) return air__buf_add(out, LIT("null"));
  if (strcmp(type, "array") == 0) {
    int rc = air__buf_addc(out, '[');
    if (rc == 0)
      rc = instance(json_object_get(schema, "items"), depth + 1, out);
    return rc == 0 ? air__buf_addc(out, ']') : rc;
  }
  if (strcmp(type, "object") != 0) return air__buf_add(out, LIT("\"x\""));
  const json_t *props = json_object_get(schema, "properties");
  const json_t *req = json_object_get(schema, "required");
  int rc = air__buf_addc(out, '{');
  size_t i;
  const json_t *name;
  json_array_foreach(req, i, name) {
    if (rc != 0) break;
    if (!json_is_string(name)) continue;
    if (i > 0) rc = air__buf_add(out, LIT(", "));
    if (rc == 0)
      rc = air__buf_add_json_str(out, json_string_value(name),
                                 json_string_length(name));
    if (rc == 0) rc = air__buf_add(out, LIT(": "));
    if (rc == 0)
      rc = instance(json_object_get(props, json_string_value(name)), depth + 1,
                    out);
  }
  return rc == 0 ? air__buf_addc(out, '}') : rc;
}

int air__mock_schema_instance(const json_t *schema, air__buf *out) {
  return instance(schema, 0, out);
}

/*
 * The tool a request forces (Anthropic tool_choice {"type": "tool", "name"},
 * OpenAI {"type": "function", "function": {"name"}}, Responses {"type":
 * "function", "name"}) when its tools list has it with an object schema
 * (input_schema / function.parameters / parameters): 1 with
 * *name and *schema set, else 0.
 */
static int forced_tool(const json_t *req, const json_t **name,
                       const json_t **schema) {
  const json_t *tc = json_object_get(req, "tool_choice");
  const char *type = json_string_value(json_object_get(tc, "type"));
  const json_t *n = NULL;
  if (type != NULL && strcmp(type, "tool") == 0)
    n = json_object_get(tc, "name");
  else if (type != NULL && strcmp(type, "function") == 0)
    n = json_object_get(tc, "function") != NULL
            ? json_object_get(json_object_get(tc, "function"), "name")
            : json_object_get(tc, "name"); /* Responses */
  if (!json_is_string(n)) return 0;
  size_t i;
  const json_t *t;
  json_array_foreach(json_object_get(req, "tools"), i, t) {
    const json_t *f = json_object_get(t, "function");
    const json_t *tn = json_object_get(f ? f : t, "name");
    const json_t *sc = f ? json_object_get(f, "parameters")
                         : json_object_get(t, "input_schema");
    if (f == NULL && sc == NULL) sc = json_object_get(t, "parameters");
    if (json_is_string(tn) && json_equal(tn, n) && json_is_object(sc)) {
      *name = n;
      *schema = sc;
      return 1;
    }
  }
  return 0;
}

/* The JSON answer text: the schema's instance, else {"answer": canonical}. */
static int json_text(const char *model, size_t m_n, const air__mock_beh *b,
                     const json_t *req, air__buf *out) {
  const json_t *schema = requested_schema(req);
  if (schema != NULL) return air__mock_schema_instance(schema, out);
  air__buf c;
  air__buf_init(&c, ANSWER_MAX_BYTES);
  int rc =
      (b->set & AIR__MOCK_K_ANSWER) && b->answer != NULL
          ? air__buf_adds(&c, b->answer)
          : canonical(model, m_n,
                      (b->set & AIR__MOCK_K_TOKENS) ? b->tokens
                                                    : AIR__MOCK_DEFAULT_TOKENS,
                      &c);
  if (rc == 0) rc = air__buf_add(out, LIT("{\"answer\": "));
  if (rc == 0) rc = air__buf_add_json_str(out, c.p, c.n);
  if (rc == 0) rc = air__buf_addc(out, '}');
  air__buf_cleanup(&c);
  return rc;
}

/* Token of a containing byte off: the first whose end is past off (a->n
 * when off is at or past the end). */
static size_t token_at(const air__mock_answer *a, size_t off) {
  size_t i = 0;
  /* ends is NULL only with n == 0 (split() counts the same twice).
   * NOLINTNEXTLINE(clang-analyzer-core.NullDereference) */
  while (i < a->n && a->ends[i] <= off) i++;
  return i;
}

/*
 * A recognised continuation of prefix p_n bytes (docs/mock.md
 * "Continuation"): where sending starts and what is inserted, by
 * continue_as.
 */
static int continuation(air__mock_answer *a, const air__mock_beh *b,
                        size_t p_n) {
  unsigned as = (b->set & AIR__MOCK_K_CONTINUE_AS) ? b->continue_as
                                                   : AIR__MOCK_CONT_EXACT;
  a->prefill = true;
  a->cont_as = as;
  size_t from = p_n;
  int rc = 0;
  if (as == AIR__MOCK_CONT_RESTART || as == AIR__MOCK_CONT_DIVERGE) {
    from = 0;
  } else if (as == AIR__MOCK_CONT_REPEAT) {
    size_t r = (b->set & AIR__MOCK_K_REPEAT_CHARS)
                   ? b->repeat_chars
                   : AIR__MOCK_DEFAULT_REPEAT_CHARS;
    from = r < p_n ? p_n - r : 0;
    /* Back to a UTF-8 character's first byte. */
    while (from > 0 && ((unsigned char)a->text.p[from] & 0xC0) == 0x80) from--;
  }
  a->from_off = from;
  a->first = token_at(a, from);
  if (as == AIR__MOCK_CONT_PREAMBLE || as == AIR__MOCK_CONT_DIVERGE) {
    const char *t =
        as == AIR__MOCK_CONT_PREAMBLE ? AIR__MOCK_PREAMBLE : AIR__MOCK_DIVERGED;
    a->ins_off = a->text.n;
    rc = air__buf_adds(&a->text, t);
    a->ins_len = a->text.n - a->ins_off;
    a->ins_at = a->first;
    if (as == AIR__MOCK_CONT_DIVERGE) {
      /* After the last token that ends at or before half the prefix (at
       * least the first). */
      size_t k = 1;
      while (k < a->n && a->ends[k] <= p_n / 2) k++;
      a->ins_at = k;
    }
  }
  if (a->first > a->last) a->first = a->last;
  if (a->ins_at > a->last) a->ins_at = a->last;
  return rc;
}

int air__mock_answer_build(air__mock_answer *a, const char *model, size_t m_n,
                           const air__mock_beh *b, const char *prefill,
                           size_t p_n, bool instruct, const json_t *req) {
  air__buf_reset(&a->text);
  free(a->ends);
  a->ends = NULL;
  free(a->ev);
  a->ev = NULL;
  a->n = a->first = a->last = a->n_ev = 0;
  a->from_off = a->ins_off = a->ins_len = a->ins_at = 0;
  a->cont_as = AIR__MOCK_CONT_EXACT;
  a->prefill = false;
  a->forced = false;
  int rc = 0;
  air__buf jtext;
  air__buf_init(&jtext, ANSWER_MAX_BYTES);
  const char *src = NULL;
  const json_t *fname = NULL, *fschema = NULL;
  if ((b->set & AIR__MOCK_K_REFUSAL) && b->refusal != NULL) {
    src = b->refusal;
  } else if ((b->set & AIR__MOCK_K_JSON) && b->json &&
             !((b->set & AIR__MOCK_K_TOOL_CALLS) && b->tool_calls > 0) &&
             forced_tool(req, &fname, &fschema)) {
    /* The call's arguments; the text stays the canonical answer. */
    rc = air__mock_schema_instance(fschema, &jtext);
    a->forced = rc == 0;
  } else if ((b->set & AIR__MOCK_K_JSON) && b->json) {
    rc = json_text(model, m_n, b, req, &jtext);
    src = rc == 0 ? jtext.p : NULL;
  } else if ((b->set & AIR__MOCK_K_ANSWER) && b->answer != NULL) {
    src = b->answer;
  }
  if (rc != 0) {
    air__buf_cleanup(&jtext);
    return rc;
  }
  if (src != NULL) {
    size_t n = strlen(src);
    rc = air__buf_add(&a->text, src, n);
    size_t k = split(src, n, NULL);
    a->ends = k ? malloc(k * sizeof(*a->ends)) : NULL;
    if (rc == 0 && k && a->ends == NULL) rc = AIR_ENOMEM;
    if (rc == 0) a->n = split(src, n, a->ends);
  } else {
    uint32_t tokens =
        (b->set & AIR__MOCK_K_TOKENS) ? b->tokens : AIR__MOCK_DEFAULT_TOKENS;
    a->ends = malloc(((size_t)tokens + 1) * sizeof(*a->ends));
    if (a->ends == NULL) rc = AIR_ENOMEM;
    if (rc == 0) rc = air__buf_addc(&a->text, '[');
    if (rc == 0) rc = air__buf_add(&a->text, model, m_n);
    if (rc == 0) rc = air__buf_addc(&a->text, ']');
    if (rc == 0) a->ends[a->n++] = a->text.n;
    for (uint32_t i = 1; rc == 0 && i <= tokens; i++) {
      rc = air__buf_add(&a->text, LIT(" w"));
      if (rc == 0) rc = air__buf_addu(&a->text, i);
      if (rc == 0) a->ends[a->n++] = a->text.n;
    }
  }
  if (rc == 0 && a->forced) {
    a->fname_off = a->text.n;
    rc = air__buf_add(&a->text, json_string_value(fname),
                      json_string_length(fname));
    a->fname_len = a->text.n - a->fname_off;
    a->fargs_off = a->text.n;
    if (rc == 0) rc = air__buf_add(&a->text, jtext.p, jtext.n);
    a->fargs_len = a->text.n - a->fargs_off;
  }
  air__buf_cleanup(&jtext);
  if (rc != 0) return rc;
  a->last = a->n;
  if ((b->set & AIR__MOCK_K_FINISH) && b->finish == AIR_FINISH_LENGTH &&
      a->n > 0)
    a->last = a->n / 2 > 0 ? a->n / 2 : 1;
  /* The answer's own text: a forced tool's name and arguments follow it. */
  size_t text_n = a->n > 0 ? a->ends[a->n - 1] : 0;
  if (prefill != NULL && p_n > 0 && p_n <= text_n &&
      (!instruct || p_n < text_n) && memcmp(a->text.p, prefill, p_n) == 0)
    return continuation(a, b, p_n);
  return 0;
}

/* ---- answer shapes: the content events ----------------------------------- */

/* Pieces a tool call's arguments are streamed in. */
#define TOOL_PIECES 3u

/* Appends an event (ev has room: air__mock_answer_events sizes it). */
static void add_ev(air__mock_ev *ev, size_t *n, air_part_kind kind, int index,
                   size_t off, size_t len) {
  ev[*n] = (air__mock_ev){.kind = kind, .index = index, .off = off, .len = len};
  (*n)++;
}

/* The text tokens [first, last) as events of kind (and the inserted
 * event before token ins_at). */
static void text_events(air__mock_answer *a, air_part_kind kind) {
  for (size_t t = a->first; t <= a->last; t++) {
    if (a->ins_len > 0 && t == a->ins_at)
      add_ev(a->ev, &a->n_ev, kind, 0, a->ins_off, a->ins_len);
    if (t == a->last) break;
    size_t from = t == 0 ? 0 : a->ends[t - 1];
    if (t == a->first && a->from_off > from) from = a->from_off;
    add_ev(a->ev, &a->n_ev, kind, 0, from, a->ends[t] - from);
  }
}

int air__mock_answer_events(air__mock_answer *a, const air__mock_beh *b,
                            air_dialect api) {
  uint32_t reasoning = (b->set & AIR__MOCK_K_REASONING) ? b->reasoning : 0;
  uint32_t tools = (b->set & AIR__MOCK_K_TOOL_CALLS) ? b->tool_calls : 0;
  bool refusal = (b->set & AIR__MOCK_K_REFUSAL) && b->refusal != NULL;
  bool native = refusal && b->refusal_native;
  if (tools == 0 && a->forced) tools = 1; /* the forced tool's one call */
  if (refusal) tools = 0;                 /* a refusal answers nothing else */
  size_t text_n = a->last - a->first + (a->ins_len > 0 ? 1 : 0);
  size_t cap = (size_t)reasoning + (size_t)tools * (1 + TOOL_PIECES) + text_n;
  free(a->ev);
  /* One spare slot: never a NULL array, even for an answer without events. */
  a->ev = malloc((cap + 1) * sizeof(*a->ev));
  a->n_ev = 0;
  if (a->ev == NULL) return AIR_ENOMEM;
  int rc = 0;
  for (uint32_t i = 1; rc == 0 && i <= reasoning; i++) {
    size_t off = a->text.n;
    rc = air__buf_adds(&a->text, i == 1 ? "Thinking " : " step ");
    if (rc == 0) rc = air__buf_addu(&a->text, i);
    if (rc == 0) rc = air__buf_addc(&a->text, '.');
    if (rc == 0)
      add_ev(a->ev, &a->n_ev, AIR_PART_REASONING, 0, off, a->text.n - off);
  }
  a->finish = (b->set & AIR__MOCK_K_FINISH) ? b->finish : AIR_FINISH_STOP;
  if (rc != 0) return rc;
  if (tools > 0) {
    /* tool_text: the answer's text first, as a model that says what it
     * is about to do. */
    if ((b->set & AIR__MOCK_K_TOOL_TEXT) && b->tool_text)
      text_events(a, AIR_PART_TEXT);
    /* Call i: id call_mock_i / toolu_mock_i, arguments
     * {"location": "city-i", "days": i+1}, in TOOL_PIECES pieces. */
    size_t id_off[AIR__MOCK_MAX_TOOL_CALLS], id_len[AIR__MOCK_MAX_TOOL_CALLS];
    size_t arg_off[AIR__MOCK_MAX_TOOL_CALLS], arg_len[AIR__MOCK_MAX_TOOL_CALLS];
    for (uint32_t i = 0; rc == 0 && i < tools; i++) {
      id_off[i] = a->text.n;
      rc = api == AIR_DIALECT_ANTHROPIC
               ? air__buf_add(&a->text, LIT("toolu_mock_"))
               : air__buf_add(&a->text, LIT("call_mock_"));
      if (rc == 0) rc = air__buf_addu(&a->text, i);
      id_len[i] = a->text.n - id_off[i];
      if (rc == 0 && a->forced) {
        arg_off[i] = a->fargs_off;
        arg_len[i] = a->fargs_len;
        continue;
      }
      arg_off[i] = a->text.n;
      if (rc == 0) rc = air__buf_add(&a->text, LIT("{\"location\": \"city-"));
      if (rc == 0) rc = air__buf_addu(&a->text, i);
      if (rc == 0) rc = air__buf_add(&a->text, LIT("\", \"days\": "));
      if (rc == 0) rc = air__buf_addu(&a->text, (unsigned long long)i + 1);
      if (rc == 0) rc = air__buf_addc(&a->text, '}');
      arg_len[i] = a->text.n - arg_off[i];
    }
    if (rc != 0) return rc;
    /* OpenAI chat: round 0 starts every call, round r the r-th pieces;
     * Anthropic and Responses: one call after the other. */
    bool anthropic = api != AIR_DIALECT_OPENAI;
    uint32_t rounds = anthropic ? tools : 1 + TOOL_PIECES;
    uint32_t per = anthropic ? 1 + TOOL_PIECES : tools;
    for (uint32_t r = 0; r < rounds; r++)
      for (uint32_t k = 0; k < per; k++) {
        uint32_t i = anthropic ? r : k;
        uint32_t piece = anthropic ? k : r;
        if (piece == 0) {
          add_ev(a->ev, &a->n_ev, AIR_PART_TOOL_START, (int)i, 0, 0);
          a->ev[a->n_ev - 1].id_off = id_off[i];
          a->ev[a->n_ev - 1].id_len = id_len[i];
          continue;
        }
        size_t from = arg_len[i] * (piece - 1) / TOOL_PIECES;
        size_t to = arg_len[i] * piece / TOOL_PIECES;
        add_ev(a->ev, &a->n_ev, AIR_PART_TOOL_DELTA, (int)i, arg_off[i] + from,
               to - from);
      }
    a->finish = AIR_FINISH_TOOL_CALLS;
    return 0;
  }
  if (native && api == AIR_DIALECT_ANTHROPIC) {
    a->finish = AIR_FINISH_REFUSAL;
    return 0;
  }
  text_events(a, native ? AIR_PART_REFUSAL : AIR_PART_TEXT);
  return 0;
}

air_part air__mock_answer_part(const air__mock_answer *a, size_t i) {
  const air__mock_ev *e = &a->ev[i];
  air_part p = {.kind = e->kind,
                .index = e->index,
                .text = a->text.p + e->off,
                .text_len = e->len};
  if (e->kind == AIR_PART_TOOL_START) {
    p.text = NULL;
    p.text_len = 0;
    p.id = a->text.p + e->id_off;
    p.id_len = e->id_len;
    p.name = AIR__MOCK_TOOL_NAME;
    p.name_len = sizeof(AIR__MOCK_TOOL_NAME) - 1;
    if (a->forced) {
      p.name = a->text.p + a->fname_off;
      p.name_len = a->fname_len;
    }
  }
  return p;
}

int air__mock_signature_event(int block, air__buf *out) {
  int rc = air__buf_add(out, LIT("event: content_block_delta\ndata: "
                                 "{\"type\":\"content_block_delta\","
                                 "\"index\":"));
  if (rc == 0)
    rc = air__buf_addu(out, (unsigned long long)(block < 0 ? 0 : block));
  if (rc == 0)
    rc = air__buf_add(out, LIT(",\"delta\":{\"type\":\"signature_delta\","
                               "\"signature\":\"bW9jay1zaWduYXR1cmU=\"}}\n\n"));
  return rc;
}

/* Appends a content value's text: a string, or the text of its text
 * parts / blocks (chat and Anthropic "text", Responses "input_text" /
 * "output_text"). */
static int add_content_text(const json_t *c, air__buf *out) {
  if (json_is_string(c))
    return air__buf_add(out, json_string_value(c), json_string_length(c));
  if (!json_is_array(c)) return 0;
  size_t i;
  const json_t *part;
  json_array_foreach(c, i, part) {
    const char *type = json_string_value(json_object_get(part, "type"));
    const json_t *t = json_object_get(part, "text");
    if (type != NULL &&
        (strcmp(type, "text") == 0 || strcmp(type, "input_text") == 0 ||
         strcmp(type, "output_text") == 0) &&
        json_is_string(t)) {
      int rc = air__buf_add(out, json_string_value(t), json_string_length(t));
      if (rc != 0) return rc;
    }
  }
  return 0;
}

/* The conversation of a request: chat / Anthropic messages, or Responses
 * input items (a string input is one user message: NULL here). */
static const json_t *conversation(const json_t *body) {
  const json_t *msgs = json_object_get(body, "messages");
  if (json_is_array(msgs)) return msgs;
  msgs = json_object_get(body, "input");
  return json_is_array(msgs) ? msgs : NULL;
}

/* The role of a message (Responses: items without a role, such as
 * function calls, have none). */
static const char *role_of(const json_t *m) {
  return json_string_value(json_object_get(m, "role"));
}

static bool is_role(const json_t *m, const char *role) {
  const char *r = role_of(m);
  return r != NULL && strcmp(r, role) == 0;
}

int air__mock_prefill_text(const json_t *body, air__buf *out) {
  const json_t *msgs = conversation(body);
  size_t n = json_array_size(msgs);
  if (n == 0) return 0;
  const json_t *last = json_array_get(msgs, n - 1);
  if (!is_role(last, "assistant")) return 0;
  air__buf_reset(out);
  int rc = add_content_text(json_object_get(last, "content"), out);
  if (rc != 0) return rc;
  return out->n > 0 ? 1 : 0;
}

const char *air__mock_style_name(air__mock_style s) {
  switch (s) {
    case AIR__MOCK_STYLE_PREFILL:
      return "prefill";
    case AIR__MOCK_STYLE_VLLM:
      return "vllm";
    case AIR__MOCK_STYLE_PREFIX_FLAG:
      return "prefix_flag";
    case AIR__MOCK_STYLE_INSTRUCT:
      return "instruct";
    case AIR__MOCK_STYLE_NONE:
      break;
  }
  return NULL;
}

void air__mock_cont_init(air__mock_cont *c) {
  memset(c, 0, sizeof(*c));
  air__buf_init(&c->text, AIR__MOCK_MAX_PREFILL_BYTES);
  air__buf_init(&c->message, AIR__MOCK_MAX_PREFILL_BYTES);
}

void air__mock_cont_cleanup(air__mock_cont *c) {
  air__buf_cleanup(&c->text);
  air__buf_cleanup(&c->message);
}

int air__mock_read_continuation(const json_t *body, air_dialect api,
                                air__mock_cont *c) {
  c->style = AIR__MOCK_STYLE_NONE;
  c->has_max_tokens = false;
  air__buf_reset(&c->text);
  air__buf_reset(&c->message);
  static const char *const limits[] = {"max_tokens", "max_completion_tokens",
                                       "max_output_tokens"};
  for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
    const json_t *v = json_object_get(body, limits[i]);
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
      c->has_max_tokens = true;
      c->max_tokens = (uint64_t)json_integer_value(v);
      break;
    }
  }
  const json_t *msgs = conversation(body);
  size_t n = json_array_size(msgs);
  if (n == 0) return 0;
  const json_t *last = json_array_get(msgs, n - 1);
  int rc = 0;
  if (is_role(last, "assistant")) {
    rc = add_content_text(json_object_get(last, "content"), &c->text);
    if (rc != 0 || c->text.n == 0) return rc;
    c->style = AIR__MOCK_STYLE_PREFILL;
    if (api == AIR_DIALECT_OPENAI) {
      if (json_is_true(json_object_get(body, "continue_final_message")))
        c->style = AIR__MOCK_STYLE_VLLM;
      else if (json_is_true(json_object_get(last, "prefix")))
        c->style = AIR__MOCK_STYLE_PREFIX_FLAG;
    }
    return 0;
  }
  if (n < 2 || !is_role(last, "user") ||
      !is_role(json_array_get(msgs, n - 2), "assistant"))
    return 0;
  rc = add_content_text(json_object_get(json_array_get(msgs, n - 2), "content"),
                        &c->text);
  if (rc != 0 || c->text.n == 0) return rc;
  rc = add_content_text(json_object_get(last, "content"), &c->message);
  if (rc != 0) return rc;
  c->style = AIR__MOCK_STYLE_INSTRUCT;
  return 0;
}

/* ---- errors
 * ------------------------------------------------------------------- */

const char *air__mock_error_type(int status) {
  switch (status) {
    case 400:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 402:
      return "billing_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

static const char *default_message(int status) {
  switch (status) {
    case 400:
      return "Invalid request (airetry mock)";
    case 401:
      return "Invalid API key (airetry mock)";
    case 402:
      return "Your credit balance is too low (airetry mock)";
    case 403:
      return "Permission denied (airetry mock)";
    case 404:
      return "The model does not exist (airetry mock)";
    case 413:
      return "Request too large (airetry mock)";
    case 429:
      return "Rate limit exceeded (airetry mock)";
    case 503:
    case 529:
      return "Overloaded (airetry mock)";
    default:
      return status >= 500 ? "Internal server error (airetry mock)"
                           : "Request failed (airetry mock)";
  }
}

static int add_cstr(air__buf *out, const char *s) {
  return air__buf_add_json_str(out, s, strlen(s));
}

/* The error object's JSON (OpenAI: the value of "error"; Anthropic: the
 * whole body). */
static int error_json(air_dialect api, const char *type, const char *code,
                      const char *message, air__buf *out) {
  int rc;
  if (api == AIR_DIALECT_ANTHROPIC) {
    rc = air__buf_add(out, LIT("{\"type\":\"error\",\"error\":{\"type\":"));
    if (rc == 0) rc = add_cstr(out, type);
    if (rc == 0) rc = air__buf_add(out, LIT(",\"message\":"));
    if (rc == 0) rc = add_cstr(out, message);
    if (rc == 0) rc = air__buf_add(out, LIT("}}"));
    return rc;
  }
  rc = air__buf_add(out, LIT("{\"error\":{\"message\":"));
  if (rc == 0) rc = add_cstr(out, message);
  if (rc == 0) rc = air__buf_add(out, LIT(",\"type\":"));
  if (rc == 0) rc = add_cstr(out, type);
  if (rc == 0) rc = air__buf_add(out, LIT(",\"param\":null,\"code\":"));
  if (rc == 0)
    rc = code != NULL ? add_cstr(out, code) : air__buf_add(out, LIT("null"));
  if (rc == 0) rc = air__buf_add(out, LIT("}}"));
  return rc;
}

int air__mock_error_body(air_dialect api, int status, const char *code,
                         const char *message, air__buf *out) {
  return error_json(api, air__mock_error_type(status), code,
                    message != NULL ? message : default_message(status), out);
}

int air__mock_overload_event(air_dialect api, air__buf *out) {
  if (api == AIR_DIALECT_OPENAI_RESPONSES) {
    /* A Responses "error" event with the error object inside. */
    int rc = air__buf_add(out, LIT("event: error\ndata: {\"type\":\"error\","
                                   "\"error\":{\"type\":\"overloaded_error\","
                                   "\"code\":null,\"message\":"));
    if (rc == 0) rc = add_cstr(out, default_message(529));
    if (rc == 0) rc = air__buf_add(out, LIT("}}\n\n"));
    return rc;
  }
  int rc = api == AIR_DIALECT_ANTHROPIC
               ? air__buf_add(out, LIT("event: error\ndata: "))
               : air__buf_add(out, LIT("data: "));
  if (rc == 0)
    rc = error_json(api, "overloaded_error", NULL, default_message(529), out);
  if (rc == 0) rc = air__buf_add(out, LIT("\n\n"));
  return rc;
}

int air__mock_malformed_event(air_dialect api, air__buf *out) {
  if (api == AIR_DIALECT_OPENAI_RESPONSES)
    return air__buf_add(
        out, LIT("event: response.output_text.delta\ndata: {\"broken\n\n"));
  if (api == AIR_DIALECT_ANTHROPIC)
    return air__buf_add(out,
                        LIT("event: content_block_delta\ndata: {\"broken\n\n"));
  return air__buf_add(out, LIT("data: {\"broken\n\n"));
}
