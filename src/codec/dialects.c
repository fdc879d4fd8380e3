/*
 * The table of dialects, in air_dialect order: adding a dialect is one
 * folder of src/codec (its ops) and one line here (docs/architecture.md,
 * "Adding a dialect").
 */
#include "dialect.h"

static const air__dialect_ops *const dialects[] = {
    [AIR_DIALECT_OPENAI] = &air__dialect_openai_chat,
    [AIR_DIALECT_ANTHROPIC] = &air__dialect_anthropic,
    [AIR_DIALECT_OPENAI_RESPONSES] = &air__dialect_openai_responses,
};

#define N_DIALECTS (sizeof(dialects) / sizeof(dialects[0]))

const air__dialect_ops *const *air__dialects(size_t *n) {
  *n = N_DIALECTS;
  return dialects;
}

const air__dialect_ops *air__dialect_get(air_dialect api) {
  return (size_t)api < N_DIALECTS && dialects[api] != NULL
             ? dialects[api]
             : &air__dialect_openai_chat;
}

void air__encoder_cleanup(air__encoder *e) {
  const air__dialect_ops *ops = air__dialect_get(e->api);
  if (ops->encoder_cleanup != NULL) ops->encoder_cleanup(e);
  air__buf_cleanup(&e->continued);
}
