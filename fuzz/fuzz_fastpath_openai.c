/*
 * libFuzzer target: the fast path of the OpenAI chat stream decoder
 * against its full decoder (fuzz/fastpath_diff.h). The input is an SSE
 * stream; every event goes through decode_event with the fast path (one
 * decoder) and through the full decoder alone (another), and the parts,
 * return values and decoder states must be the same.
 */
#include <stddef.h>
#include <stdint.h>

#include "fastpath_diff.h"
#include "openai_chat/openai_chat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fp_fuzz_run(data, size, air__oai_decoder_init, air__oai_decode_event_full,
              air__oai_decode_event_fast);
  return 0;
}
