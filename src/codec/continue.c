/*
 * The continuation's upstream request (docs/design.md §3.5) and the 400 that
 * rejects a prefill.
 *
 * The body is always built through the canonical form, also for a target
 * of the caller's own dialect: a shallow copy of the request's canonical
 * form (the cached one is never changed) with
 *   - one assistant message appended holding exactly the sent text as one
 *     text part (the dialect writes it as it writes any assistant turn: a
 *     message with string content for chat and Anthropic, an output_text
 *     message item for Responses; an Anthropic target trims its trailing
 *     white space, which the API refuses);
 *   - INSTRUCT: one user message after it, AIR__CONT_INSTRUCT_TEXT, which
 *     never contains the text (the model sees the text only as its own
 *     earlier turn);
 *   - the style's flags (canon cont_style: VLLM's top-level
 *     continue_final_message / add_generation_prompt, PREFIX_FLAG's
 *     "prefix": true on that assistant message; PREFILL needs none);
 *   - thinking and reasoning off: no effort, no budget, no adaptive
 *     thinking, and the caller's extras about them (thinking, reasoning,
 *     reasoning_effort, output_config.effort) left out; earlier turns'
 *     reasoning parts stay;
 *   - stop sequences, tools and everything else as the caller asked;
 *     max_tokens = ask->max_tokens when it is positive, else the caller's
 *     (none: the target's default: nothing for OpenAI dialects,
 *     default_max_tokens for Anthropic);
 *   - for a target of the caller's dialect, the caller's top-level fields
 *     the canonical form only carries as extras (vLLM's top_k,
 *     chat_template_kwargs, ...) written back unchanged where the body
 *     does not set them (parts inside messages that only the dialect knows
 *     are not: the canonical encoders do not write them).
 * The model, "stream": true and o->override_json are set by the target's
 * encoder as for any attempt.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "canon.h"
#include "codec_json.h"
#include "dialect.h"
#include "error.h"

int air__json_cont_style(const air__canon *c, json_t *root, json_t *msgs) {
  int rc = 0;
  if (c->cont_style == AIR_CONT_VLLM) {
    rc = air__json_put(root, "continue_final_message", json_true());
    if (rc == 0)
      rc = air__json_put(root, "add_generation_prompt", json_false());
  } else if (c->cont_style == AIR_CONT_PREFIX_FLAG) {
    for (size_t i = json_array_size(msgs); i-- > 0;) {
      json_t *m = json_array_get(msgs, i);
      const char *role = json_string_value(json_object_get(m, "role"));
      if (role != NULL && strcmp(role, "assistant") == 0)
        return air__json_put(m, "prefix", json_true());
    }
  }
  return rc;
}

/* Extras about thinking / reasoning: turned off for a continuation. */
static bool reasoning_extra(const air__cextra *x) {
  static const char *const pre[] = {"thinking", "reasoning",
                                    "output_config.effort"};
  const char *f = x->field != NULL ? x->field : "";
  for (size_t i = 0; i < sizeof(pre) / sizeof(pre[0]); i++)
    if (strncmp(f, pre[i], strlen(pre[i])) == 0) return true;
  return false;
}

/* Writes the caller's own top-level extras back into body (text of a JSON
 * object) where it has no such member; appends the result to out. */
static int write_back(const air__canon *k, air_dialect api, const char *body,
                      size_t n, air__buf *out) {
  bool any = false;
  for (size_t i = 0; i < k->n_extras && !any; i++)
    any = k->extras[i].origin == api && k->extras[i].key != NULL &&
          k->extras[i].raw.p != NULL;
  if (!any) return air__buf_add(out, body, n);
  json_t *root = json_loadb(body, n, 0, NULL);
  if (!json_is_object(root)) {
    json_decref(root);
    return AIR_ENOMEM;
  }
  int rc = 0;
  for (size_t i = 0; i < k->n_extras && rc == 0; i++) {
    const air__cextra *x = &k->extras[i];
    if (x->origin != api || x->key == NULL || x->raw.p == NULL ||
        json_object_get(root, x->key) != NULL)
      continue;
    json_t *v = json_loadb(x->raw.p, x->raw.n, JSON_DECODE_ANY, NULL);
    if (v != NULL) rc = air__json_put(root, x->key, v);
  }
  if (rc == 0) rc = air__json_dump(root, JSON_COMPACT, out);
  json_decref(root);
  return rc;
}

int air__request_build_continuation(const air__dialect_ops *target,
                                    const air__request *req,
                                    const air__build_opts *o,
                                    const air__cont_ask *ask, air__buf *out,
                                    air_error *err) {
  if (err != NULL) {
    err->code = 0;
    err->message[0] = '\0';
  }
  if (target == NULL || req == NULL || o == NULL || ask == NULL ||
      (ask->sent == NULL && ask->sent_n > 0))
    return air__error_set(err, AIR_EINVAL,
                          "continuation: expected a parsed request");
  if (ask->style != AIR_CONT_PREFILL && ask->style != AIR_CONT_VLLM &&
      ask->style != AIR_CONT_PREFIX_FLAG && ask->style != AIR_CONT_INSTRUCT)
    return air__error_set(err, AIR_EINVAL,
                          "continuation: no continuation style");
  /* State only the caller's provider keeps, and (across dialects) what the
   * target cannot say, as for any attempt. */
  int rc = air__request_stateful(target, req, o, err);
  if (rc != 0) return rc;
  const air__canon *c = air__request_canon(req, err, &rc);
  if (c == NULL) return rc != 0 ? rc : AIR_ENOMEM;

  air__canon k = *c; /* shallow: nothing is allocated from k's arena */
  size_t n_msgs = c->n_msgs + 2;
  air__cmsg *msgs = calloc(n_msgs, sizeof(*msgs));
  air__cpart *parts = calloc(2, sizeof(*parts));
  air__cextra *extras = calloc(c->n_extras + 1, sizeof(*extras));
  air__buf body;
  air__buf_init(&body, out->max > out->n ? out->max - out->n : 0);
  if (msgs == NULL || parts == NULL || extras == NULL) {
    rc = AIR_ENOMEM;
    goto done;
  }
  if (c->n_msgs > 0) memcpy(msgs, c->msgs, c->n_msgs * sizeof(*msgs));
  k.msgs = msgs;
  k.n_msgs = c->n_msgs;
  k.cap_msgs = n_msgs;
  parts[0].kind = AIR__CP_TEXT;
  parts[0].text = (air__str){ask->sent != NULL ? ask->sent : "", ask->sent_n};
  parts[0].type = (air__str){"text", 4};
  parts[0].field = "continuation";
  msgs[k.n_msgs++] = (air__cmsg){.role = AIR__ROLE_ASSISTANT,
                                 .parts = &parts[0],
                                 .n_parts = 1,
                                 .cap_parts = 1};
  if (ask->style == AIR_CONT_INSTRUCT) {
    parts[1].kind = AIR__CP_TEXT;
    parts[1].text = (air__str){AIR__CONT_INSTRUCT_TEXT,
                               sizeof(AIR__CONT_INSTRUCT_TEXT) - 1};
    parts[1].type = (air__str){"text", 4};
    parts[1].field = "continuation";
    msgs[k.n_msgs++] = (air__cmsg){.role = AIR__ROLE_USER,
                                   .parts = &parts[1],
                                   .n_parts = 1,
                                   .cap_parts = 1};
  }
  k.extras = extras;
  k.n_extras = 0;
  for (size_t i = 0; i < c->n_extras; i++)
    if (!reasoning_extra(&c->extras[i])) extras[k.n_extras++] = c->extras[i];
  k.cap_extras = c->n_extras + 1;
  k.effort = AIR__EFFORT_UNSET;
  k.thinking_adaptive = false;
  k.thinking_budget = 0;
  k.reasoning_field = NULL;
  if (ask->max_tokens > 0) k.max_tokens = ask->max_tokens;
  k.cont_style = ask->style;
  if (o->json_tool != NULL) *o->json_tool = false;

  if (!o->drop_params) rc = target->can_express(&k, o, err);
  if (rc == 0) rc = target->encode_request(&k, o, &body, err);
  if (rc == 0) rc = write_back(&k, target->api, body.p, body.n, out);
done:
  air__buf_cleanup(&body);
  free(msgs);
  free(parts);
  free(extras);
  if (rc != 0 && err != NULL && err->message[0] == '\0')
    air__error_set(
        err, rc, "%s",
        rc == AIR_ENOMEM ? "out of memory" : "continuation: cannot be built");
  return rc;
}

/* Case-insensitive: whether s contains needle. */
static bool has(const char *s, const char *needle) {
  size_t n = strlen(needle);
  for (; s != NULL && *s != '\0'; s++)
    if (strncasecmp(s, needle, n) == 0) return true;
  return false;
}

/*
 * Anthropic's wording (the Messages API and the platforms that serve it,
 * 2026): "This model does not support assistant message prefill. The
 * conversation must end with a user message." Either sentence is enough
 * (proxies quote one of them). A 400 about the final assistant message
 * for another reason (trailing white space: trimmed before sending;
 * thinking blocks: thinking is off) is not a rejected prefill: asking with
 * instruct would be remembered wrongly for the target.
 */
bool air__prefill_rejected(int status, const air_failure *f) {
  if (status != 400 || f == NULL || f->message == NULL) return false;
  return has(f->message, "assistant message prefill") ||
         has(f->message, "must end with a user message");
}
