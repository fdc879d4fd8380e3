/*
 * Unit tests for the fast path of src/codec/anthropic/events.c (the text
 * and thinking deltas): every event goes through decode_event with its fast
 * path and through the full decoder alone, from the same state, and must
 * give the same parts, return value and decoder state
 * (fuzz/fastpath_diff.h). The common deltas must be taken; what the fast
 * path does not handle must fall back. Every event is also cut at every
 * length and has each byte replaced by JSON's structural bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "anthropic/anthropic.h"
#include "fastpath_diff.h"
#include "fastpath_cases.h"

#define DELTA(i, d) \
  "{\"type\":\"content_block_delta\",\"index\":" i ",\"delta\":" d "}"
#define START                                                               \
  "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":"     \
  "\"message\",\"role\":\"assistant\",\"model\":\"claude\",\"content\":[]," \
  "\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}"
#define BLOCK                                                        \
  "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":" \
  "{\"type\":\"text\",\"text\":\"\"}}"

static void pair_init(fp_pair *x) {
  fp_init(x, air__ant_decoder_init, air__ant_decode_event_full,
          air__ant_decode_event_fast);
}

static void started(fp_pair *x) {
  pair_init(x);
  fp_check(x, "message_start", START, strlen(START), 0, 0);
  fp_check(x, "content_block_start", BLOCK, strlen(BLOCK), 0, 0);
}

static const char *const TAKEN[] = {
    DELTA("0", "{\"type\":\"text_delta\",\"text\":\"Hello\"}"),
    DELTA("0", "{\"type\":\"text_delta\",\"text\":\"\"}"),
    DELTA("3", "{\"type\":\"text_delta\",\"text\":\"other block\"}"),
    DELTA("1000000", "{\"type\":\"text_delta\",\"text\":\"last index\"}"),
    DELTA("0", "{\"type\":\"text_delta\",\"text\":\"a\\nb\\\"c\\\\d\\/e\"}"),
    DELTA("0",
          "{\"type\":\"text_delta\",\"text\":\"\\u00e9\\ud83d\\ude00"
          "\\udfff\"}"),
    DELTA("0", "{\"text\":\"type last\",\"type\":\"text_delta\"}"),
    DELTA("0", "{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}"),
    DELTA("0",
          "{\"type\":\"thinking_delta\",\"thinking\":\"hmm\","
          "\"text\":{}}"),
    DELTA("0", "{\"type\":\"text_delta\",\"text\":\"x\",\"thinking\":1}"),
    "{\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"order\"},"
    "\"type\":\"content_block_delta\",\"extra\":[]}",
    " \r\n{ \"type\" : \"content_block_delta\" , \"index\" : 0 , \"delta\" :"
    " { \"type\" : \"text_delta\" , \"text\" : \"ws\" } }\t ",
};

static const char *const DECLINED[] = {
    DELTA("0", "{\"type\":\"input_json_delta\",\"partial_json\":\"{\"}"),
    DELTA("0", "{\"type\":\"signature_delta\",\"signature\":\"s\"}"),
    DELTA("0", "{\"type\":\"citations_delta\",\"citation\":{\"x\":1}}"),
    DELTA("0", "{\"type\":\"text_delta\"}"),
    DELTA("0", "{\"type\":\"text_delta\",\"text\":null}"),
    DELTA("0", "{\"type\":\"text_delta\",\"text\":5}"),
    DELTA("0", "{\"type\":\"thinking_delta\",\"text\":\"x\"}"),
    DELTA("0", "{\"type\":\"text_delta\",\"text\":\"a\",\"text\":\"b\"}"),
    DELTA("0",
          "{\"type\":\"text_delta\",\"type\":\"thinking_delta\","
          "\"text\":\"a\"}"),
    DELTA("0", "{\"type\":\"text_\\u0064elta\",\"text\":\"a\"}"),
    DELTA("0", "null"),
    DELTA("0", "{\"type\":\"text_delta\",\"text\":\"x\",\"o\":{\"a\":1}}"),
    DELTA("1000001", "{\"type\":\"text_delta\",\"text\":\"x\"}"),
    DELTA("-1", "{\"type\":\"text_delta\",\"text\":\"x\"}"),
    DELTA("-0", "{\"type\":\"text_delta\",\"text\":\"x\"}"),
    DELTA("1.0", "{\"type\":\"text_delta\",\"text\":\"x\"}"),
    DELTA("1e1", "{\"type\":\"text_delta\",\"text\":\"x\"}"),
    DELTA("\"0\"", "{\"type\":\"text_delta\",\"text\":\"x\"}"),
    DELTA("99999999999", "{\"type\":\"text_delta\",\"text\":\"x\"}"),
    "{\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\","
    "\"text\":\"no index\"}}",
    "{\"type\":\"content_block_delta\",\"index\":0,\"index\":1,\"delta\":"
    "{\"type\":\"text_delta\",\"text\":\"x\"}}",
    "{\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"no type\"}}",
    "{\"type\":\"content_block_delta\",\"type\":\"ping\",\"index\":0,"
    "\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}",
    START,
    BLOCK,
    "{\"type\":\"content_block_stop\",\"index\":0}",
    "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},"
    "\"usage\":{\"output_tokens\":7}}",
    "{\"type\":\"message_stop\"}",
    "{\"type\":\"ping\"}",
    "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
    "\"message\":\"Overloaded\"}}",
    DELTA("0", "{\"type\":\"text_delta\",\"text\":\"x\"}") " x",
    DELTA("0", "{\"type\":\"text_delta\",\"text\":\"bad \\q\"}"),
    DELTA("0", "{\"type\":\"text_delta\",\"text\":\"ctl \x1f\"}"),
    "",
    "[]",
};

static void takes_common_deltas(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof(TAKEN) / sizeof(TAKEN[0]); i++) {
    for (size_t stop = 0; stop < 2; stop++) {
      fp_pair x;
      started(&x);
      fp_check(&x, "content_block_delta", TAKEN[i], strlen(TAKEN[i]), stop, 1);
      /* The event field does not matter when the data has a type. */
      fp_check(&x, "message", TAKEN[i], strlen(TAKEN[i]), stop, 1);
      fp_cleanup(&x);
    }
  }
}

static void declines_the_rest(void **state) {
  (void)state;
  fp_all_declined(DECLINED, sizeof(DECLINED) / sizeof(DECLINED[0]), started,
                  "content_block_delta");
  /* A ping event is nothing, whatever its data. */
  fp_pair x;
  started(&x);
  const char *d = TAKEN[0];
  fp_check(&x, "ping", d, strlen(d), 0, 0);
  fp_cleanup(&x);
}

/* Every event cut at every length and with each byte replaced, in a fresh
 * and a started decoder: the two paths agree on all of them. */
static void cuts_and_replacements_agree(void **state) {
  (void)state;
  fp_cuts_and_replacements(TAKEN, sizeof(TAKEN) / sizeof(TAKEN[0]), DECLINED,
                           sizeof(DECLINED) / sizeof(DECLINED[0]), pair_init,
                           started, "content_block_delta");
}

static void huge_text(void **state) {
  (void)state;
  fp_huge_text(started, "content_block_delta",
               "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
               "{\"type\":\"text_delta\",\"text\":\"",
               "\\n", "\"}}");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(takes_common_deltas),
      cmocka_unit_test(declines_the_rest),
      cmocka_unit_test(cuts_and_replacements_agree),
      cmocka_unit_test(huge_text),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
