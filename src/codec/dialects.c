/*
 * The table of dialects, in air_dialect order: adding a dialect is one
 * folder of src/codec (its ops) and one line here (docs/architecture.md,
 * "Adding a dialect").
 */
#include "provider.h"

static const air__provider_ops *const dialects[] = {
    [AIR_DIALECT_OPENAI] = &air__provider_openai,
    [AIR_DIALECT_ANTHROPIC] = &air__provider_anthropic,
    [AIR_DIALECT_OPENAI_RESPONSES] = &air__provider_openai_responses,
};

#define N_DIALECTS (sizeof(dialects) / sizeof(dialects[0]))

const air__provider_ops *const *air__dialects(size_t *n) {
  *n = N_DIALECTS;
  return dialects;
}

const air__provider_ops *air__provider_get(air_dialect api) {
  return (size_t)api < N_DIALECTS && dialects[api] != NULL
             ? dialects[api]
             : &air__provider_openai;
}

void air__encoder_cleanup(air__encoder *e) {
  const air__provider_ops *ops = air__provider_get(e->api);
  if (ops->encoder_cleanup != NULL) ops->encoder_cleanup(e);
  air__buf_cleanup(&e->continued);
}
