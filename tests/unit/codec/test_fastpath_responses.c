/*
 * Unit tests for the fast path of src/codec/openai_responses/events.c (the
 * text, refusal and reasoning deltas): every event goes through
 * decode_event with its fast path and through the full decoder alone, from
 * the same state, and must give the same parts, return value and decoder
 * state (fuzz/fastpath_diff.h). The common deltas must be taken; what the
 * fast path does not handle must fall back. Every event is also cut at
 * every length and has each byte replaced by JSON's structural bytes, in a
 * fresh and a started decoder.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fastpath_diff.h"
#include "fastpath_cases.h"
#include "openai_responses/openai_responses.h"

#define TD_TYPE "response.output_text.delta"
#define TD "{\"type\":\"" TD_TYPE "\","
#define CREATED                                                        \
  "{\"type\":\"response.created\",\"sequence_number\":0,\"response\":" \
  "{\"id\":\"resp_1\",\"object\":\"response\",\"model\":\"gpt-x\","    \
  "\"output\":[],\"status\":\"in_progress\"}}"

static void pair_init(fp_pair *x) {
  fp_init(x, air__rsp_decoder_init, air__rsp_decode_event_full,
          air__rsp_decode_event_fast);
}

static void started(fp_pair *x) {
  pair_init(x);
  fp_check(x, TD_TYPE, CREATED, strlen(CREATED), 0, 0);
  assert_true(x->fast.d.started);
}

static const char *const TAKEN[] = {
    TD
    "\"sequence_number\":5,\"item_id\":\"msg_1\",\"output_index\":0,"
    "\"content_index\":0,\"delta\":\"Hello\",\"logprobs\":[],"
    "\"obfuscation\":\"abc\"}",
    TD "\"delta\":\"\"}",
    TD "\"delta\":\"a\\nb\\\"c\\\\d\\u00e9\\ud83d\\ude00\\ud800\"}",
    "{\"delta\":\"type last\",\"type\":\"response.output_text.delta\"}",
    "{\"type\":\"response.refusal.delta\",\"delta\":\"no\"}",
    "{\"type\":\"response.reasoning_summary_text.delta\",\"delta\":\"r\","
    "\"summary_index\":0}",
    "{\"type\":\"response.reasoning_text.delta\",\"delta\":\"r\"}",
    TD "\"delta\":\"x\",\"x\":{},\"y\":null,\"z\":-0.5E-2,\"t\":true}",
    " \n{ \"type\" : \"response.output_text.delta\" , \"delta\" : \"ws\" } "
    "\r\n",
};

static const char *const DECLINED[] = {
    TD "\"delta\":1}",
    TD "\"delta\":null}",
    TD "\"seq\":1}",
    TD "\"delta\":\"a\",\"delta\":\"b\"}",
    TD "\"type\":\"response.refusal.delta\",\"delta\":\"b\"}",
    TD "\"delta\":\"x\",\"logprobs\":[{\"token\":\"x\"}]}",
    TD "\"delta\":\"x\",\"o\":{\"a\":1}}",
    "{\"type\":\"response.output_text.del\\u0074a\",\"delta\":\"x\"}",
    "{\"type\":\"response.function_call_arguments.delta\",\"output_index\":0,"
    "\"delta\":\"{\"}",
    "{\"type\":\"response.output_text.done\",\"text\":\"all\"}",
    "{\"type\":\"response.content_part.added\",\"part\":{\"type\":"
    "\"output_text\"}}",
    "{\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"usage\":"
    "{\"input_tokens\":1,\"output_tokens\":2}}}",
    "{\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\"}",
    "{\"delta\":\"no type\"}",
    CREATED,
    "[DONE]",
    "",
    TD "\"delta\":\"x\"} x",
    TD "\"delta\":\"bad \\u12\"}",
    TD "\"delta\":\"ctl \x02\"}",
};

static void takes_common_deltas(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof(TAKEN) / sizeof(TAKEN[0]); i++) {
    for (size_t stop = 0; stop < 3; stop++) {
      fp_pair x;
      started(&x);
      fp_check(&x, TD_TYPE, TAKEN[i], strlen(TAKEN[i]), stop, 1);
      fp_cleanup(&x);
      /* Before response.created: START ("" id and model) first. */
      pair_init(&x);
      fp_check(&x, TD_TYPE, TAKEN[i], strlen(TAKEN[i]), stop, 1);
      fp_cleanup(&x);
    }
  }
}

static void declines_the_rest(void **state) {
  (void)state;
  fp_all_declined(DECLINED, sizeof(DECLINED) / sizeof(DECLINED[0]), started,
                  TD_TYPE);
}

/* Every event cut at every length and with each byte replaced, in a fresh
 * and a started decoder: the two paths agree on all of them. */
static void cuts_and_replacements_agree(void **state) {
  (void)state;
  fp_cuts_and_replacements(TAKEN, sizeof(TAKEN) / sizeof(TAKEN[0]), DECLINED,
                           sizeof(DECLINED) / sizeof(DECLINED[0]), pair_init,
                           started, TD_TYPE);
}

static void huge_text(void **state) {
  (void)state;
  fp_huge_text(started, TD_TYPE, TD "\"delta\":\"", "\\t", "\"}");
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
