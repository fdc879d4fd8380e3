/*
 * libFuzzer target for the OpenAI Responses dialect
 * (src/codec/openai_responses/), through the harness of
 * fuzz/decode_harness.h: a Responses caller's every event must be
 * "event: T\ndata: " and one JSON object (the encoder may refuse arguments
 * for a call closed by text in between); a built upstream body holds its
 * input as an array or a string. Its caller requests are of all three
 * dialects.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "decode_harness.h"

/* Each "event: T\ndata: ...\n\n" of out is one JSON object. */
static void check_chunks(const air__buf *out) {
  size_t at = 0;
  while (at < out->n) {
    CHECK(out->n - at >= 8 && memcmp(out->p + at, "event: ", 7) == 0);
    const char *nl = memchr(out->p + at, '\n', out->n - at);
    CHECK(nl != NULL && out->p + out->n - nl > 7 &&
          memcmp(nl + 1, "data: ", 6) == 0);
    const char *js = nl + 7;
    const char *end = fz_event_end(out, js);
    CHECK(end != NULL);
    fz_check_object(js, (size_t)(end - js));
    at = (size_t)(end + 2 - out->p);
  }
}

static void check_body(const json_t *v) {
  const json_t *input = json_object_get(v, "input");
  CHECK(json_is_array(input) || json_is_string(input));
}

static const air_dialect CALLERS[] = {AIR_DIALECT_OPENAI, AIR_DIALECT_ANTHROPIC,
                                      AIR_DIALECT_OPENAI_RESPONSES};

static const fz_dialect DIALECT = {
    .ops = &air__dialect_openai_responses,
    .caller = AIR_DIALECT_OPENAI_RESPONSES,
    .check_out = check_chunks,
    .encode_may_refuse = true,
    .callers = CALLERS,
    .n_callers = sizeof(CALLERS) / sizeof(CALLERS[0]),
    .model = "gpt-5",
    .check_body = check_body,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz_decode_input(&DIALECT, data, size);
  return 0;
}
