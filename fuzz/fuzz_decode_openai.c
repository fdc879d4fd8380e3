/*
 * libFuzzer target for the OpenAI chat dialect (src/codec/openai_chat/),
 * through the harness of fuzz/decode_harness.h: an OpenAI chat caller's
 * every chunk must tokenize as one JSON object, or be [DONE]; a built
 * upstream body streams with include_usage and holds messages.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "decode_harness.h"

/* Each "data: ...\n\n" chunk of out is one JSON object or [DONE]. */
static void check_chunks(const air__buf *out) {
  size_t at = 0;
  while (at < out->n) {
    CHECK(out->n - at >= 8 && memcmp(out->p + at, "data: ", 6) == 0);
    const char *js = out->p + at + 6;
    const char *end = fz_event_end(out, js);
    CHECK(end != NULL);
    size_t n = (size_t)(end - js);
    if (!(n == 6 && memcmp(js, "[DONE]", 6) == 0)) fz_check_object(js, n);
    at = (size_t)(end + 2 - out->p);
  }
}

static void check_body(const json_t *v) {
  CHECK(json_is_true(
      json_object_get(json_object_get(v, "stream_options"), "include_usage")));
  CHECK(json_is_array(json_object_get(v, "messages")));
}

static const air_dialect CALLERS[] = {AIR_DIALECT_OPENAI,
                                      AIR_DIALECT_ANTHROPIC};

static const fz_dialect DIALECT = {
    .ops = &air__dialect_openai_chat,
    .caller = AIR_DIALECT_OPENAI,
    .check_out = check_chunks,
    .encode_may_refuse = false,
    .callers = CALLERS,
    .n_callers = sizeof(CALLERS) / sizeof(CALLERS[0]),
    .model = "gpt-4o",
    .check_body = check_body,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_decode_input(&DIALECT, data, size);
  return 0;
}
