/*
 * Unit tests for the fast path of src/codec/openai_chat/events.c: every
 * event goes through decode_event with its fast path and through the full
 * decoder alone, from the same state, and must give the same parts (their
 * strings compared by content and by where they point), return value and
 * decoder state (fuzz/fastpath_diff.h). The plain text chunk and its common
 * variants must be taken by the fast path; what it does not handle must
 * fall back. Every event is also cut at every length and has each byte
 * replaced by JSON's structural bytes, in a fresh and a started decoder.
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
#include "openai_chat/openai_chat.h"

#define PRE \
  "{\"id\":\"c-1\",\"object\":\"chat.completion.chunk\",\"created\":1,"
#define MODEL "\"model\":\"m\","
#define CH(x) \
  "\"choices\":[{\"index\":0,\"delta\":" x ",\"finish_reason\":null}]}"
#define ROLE PRE MODEL CH("{\"role\":\"assistant\",\"content\":\"\"}")

static void pair_init(fp_pair *x) {
  fp_init(x, air__oai_decoder_init, air__oai_decode_event_full,
          air__oai_decode_event_fast);
}

static void started(fp_pair *x) {
  pair_init(x);
  fp_check(x, NULL, ROLE, strlen(ROLE), 0, 1);
  assert_true(x->fast.d.started);
}

/* The fast path takes these (after the role event). */
static const char *const TAKEN[] = {
    PRE MODEL CH("{\"content\":\"Hello\"}"),
    PRE MODEL CH("{\"content\":\" w1\"}"),
    PRE MODEL CH("{\"content\":\"\"}"),
    PRE MODEL CH("{\"content\":null}"),
    PRE MODEL CH("{}"),
    PRE MODEL CH("{\"content\":\"a\\nb\\\"c\\\\d\\/e\\tf\\rg\\bh\\fi\"}"),
    PRE MODEL CH("{\"content\":\"caf\\u00e9 \\u00E9\"}"),
    PRE MODEL CH("{\"content\":\"\\ud83d\\ude00 pair\"}"),
    PRE MODEL CH("{\"content\":\"lone \\ud800 x \\udc00\"}"),
    PRE MODEL CH("{\"content\":\"\\u0000nul\"}"),
    PRE MODEL CH("{\"content\":\"utf-8 \xc3\xa9 \xf0\x9f\x98\x80\"}"),
    PRE MODEL CH("{\"role\":\"assistant\",\"content\":\"x\",\"refusal\":null}"),
    PRE MODEL CH("{\"content\":\"x\",\"reasoning_content\":null,"
                 "\"reasoning\":null,\"tool_calls\":null}"),
    PRE MODEL CH("{\"content\":\"x\",\"function_call\":null,\"x\":[],"
                 "\"y\":{},\"z\":true,\"w\":false,\"v\":-1.5e+3}"),
    "{\"choices\":[{\"delta\":{\"content\":\"no index\"}}]}",
    "{\"choices\":[{\"finish_reason\":null,\"delta\":{\"content\":\"late\"},"
    "\"index\":0,\"logprobs\":null}],\"id\":\"c\",\"usage\":null,"
    "\"error\":null}",
    "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":"
    "1694268190,\"model\":\"gpt-4o-mini\",\"service_tier\":\"default\","
    "\"system_fingerprint\":\"fp_44709d6fcb\",\"choices\":[{\"index\":0,"
    "\"delta\":{\"content\":\"Hi\"},\"logprobs\":null,\"finish_reason\":"
    "null}],\"usage\":null,\"obfuscation\":\"Lp8w\"}",
    " \t\r\n{ \"choices\" : [ { \"index\" : 0 , \"delta\" : { \"content\" :"
    " \"spaced\" } , \"finish_reason\" : null } ] } \n ",
    "{\n\"choices\":\n[\n{\"delta\":\n{\"content\":\"nl\"}\n}\n]\n}",
    PRE MODEL
    "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":"
    "\"stop\"}]}",
    PRE MODEL
    "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"end\"},"
    "\"finish_reason\":\"length\"}]}",
    PRE MODEL
    "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":"
    "\"\"}]}",
    PRE MODEL
    "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":"
    "\"tool_calls\"}]}",
    PRE MODEL
    "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":"
    "\"weird\"}]}",
    "{\"conte\\u006et\":1,\"choices\":[{\"delta\":{\"conte\\u006et\":\"k\","
    "\"content\":\"real\"}}]}",
};

/* The fast path leaves these to the full decoder (after the role event). */
static const char *const DECLINED[] = {
    PRE MODEL
    "\"choices\":[],\"usage\":{\"prompt_tokens\":3,"
    "\"completion_tokens\":9,\"total_tokens\":12}}",
    PRE MODEL "\"choices\":[]}",
    PRE MODEL CH("{\"content\":\"x\",\"content\":\"y\"}"),
    PRE MODEL CH("{\"content\":1}"),
    PRE MODEL CH("{\"content\":[\"x\"]}"),
    PRE MODEL CH("{\"refusal\":\"no\"}"),
    PRE MODEL CH("{\"reasoning_content\":\"think\",\"content\":\"x\"}"),
    PRE MODEL CH("{\"reasoning\":\"think\"}"),
    PRE MODEL CH("{\"tool_calls\":[{\"index\":0,\"id\":\"t\",\"function\":"
                 "{\"name\":\"f\",\"arguments\":\"\"}}]}"),
    PRE MODEL CH("{\"tool_calls\":[]}"),
    PRE MODEL CH("{\"content\":\"x\",\"audio\":{\"id\":\"a\"}}"),
    PRE MODEL CH("null"),
    PRE MODEL CH("[]"),
    PRE MODEL "\"choices\":[{\"index\":1,\"delta\":{\"content\":\"x\"}}]}",
    PRE MODEL "\"choices\":[{\"index\":\"0\",\"delta\":{\"content\":\"x\"}}]}",
    PRE MODEL "\"choices\":[{\"index\":-0,\"delta\":{\"content\":\"x\"}}]}",
    PRE MODEL "\"choices\":[{\"index\":0.0,\"delta\":{\"content\":\"x\"}}]}",
    PRE MODEL "\"choices\":[{\"index\":0,\"index\":1,\"delta\":{}}]}",
    PRE MODEL
    "\"choices\":[{\"delta\":{\"content\":\"a\"}},{\"index\":1,"
    "\"delta\":{\"content\":\"b\"}}]}",
    PRE MODEL
    "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},"
    "\"delta\":{\"content\":\"b\"}}]}",
    PRE MODEL
    "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":"
    "\"st\\u006fp\"}]}",
    PRE MODEL "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":1}]}",
    PRE MODEL
    "\"choices\":[{\"index\":0,\"delta\":{},\"logprobs\":"
    "{\"content\":[]}}]}",
    PRE MODEL CH("{\"content\":\"x\"}") ",\"choices\":[]}",
    "{\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"choices\":[]}",
    PRE MODEL
    "\"usage\":{\"prompt_tokens\":1},"
    "\"choices\":[{\"delta\":{\"content\":\"x\"}}]}",
    PRE MODEL
    "\"error\":{\"message\":\"boom\",\"type\":\"server_error\"},"
    "\"choices\":[{\"delta\":{\"content\":\"x\"}}]}",
    "{\"error\":{\"message\":\"boom\"}}",
    "{\"error\":\"boom\"}",
    "{\"id\":\"\",\"choices\":[],\"prompt_filter_results\":[{\"x\":1}]}",
    "[DONE]",
    "  [DONE] \n",
    "",
    " \n\t",
    "[]",
    "\"str\"",
    "{\"choices\":[{\"delta\":{\"content\":\"x\"}}]} x",
    "{\"choices\":[{\"delta\":{\"content\":\"x\"}}]}}",
    "{\"choices\":[{\"delta\":{\"content\":\"bad \\x escape\"}}]}",
    "{\"choices\":[{\"delta\":{\"content\":\"bad \\u00g0\"}}]}",
    "{\"choices\":[{\"delta\":{\"content\":\"raw \x01 control\"}}]}",
    "{\"choices\":[{\"delta\":{\"content\":\"unterminated}}]}",
    "{\"n\":01,\"choices\":[{\"delta\":{\"content\":\"x\"}}]}",
    "{\"n\":1.,\"choices\":[{\"delta\":{\"content\":\"x\"}}]}",
    "{\"n\":-,\"choices\":[{\"delta\":{\"content\":\"x\"}}]}",
    "{\"n\":tru,\"choices\":[{\"delta\":{\"content\":\"x\"}}]}",
    "{\"n\":nul,\"choices\":[{\"delta\":{\"content\":\"x\"}}]}",
    "{\"choices\":[{\"delta\":{\"content\":\"x\"}},]}",
    "{\"choices\":[{\"delta\":{\"content\":\"x\",}}]}",
    "{,\"choices\":[{\"delta\":{\"content\":\"x\"}}]}",
    "{\"choices\" [{\"delta\":{\"content\":\"x\"}}]}",
    "{\"choices\":[{\"delta\":{\"content\":\"x\"}}]",
    "{\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\x0b",
    "{'choices':[]}",
};

static void takes_common_chunks(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof(TAKEN) / sizeof(TAKEN[0]); i++) {
    fp_pair x;
    started(&x);
    fp_check(&x, NULL, TAKEN[i], strlen(TAKEN[i]), 0, 1);
    fp_cleanup(&x);
  }
}

static void declines_the_rest(void **state) {
  (void)state;
  fp_all_declined(DECLINED, sizeof(DECLINED) / sizeof(DECLINED[0]), started,
                  NULL);
}

/* The first event: START from id and model, as the full decoder reads them
 * (a number or an absent one is ""; one with escapes falls back). */
static void start_from_the_first_event(void **state) {
  (void)state;
  static const struct {
    const char *data;
    int took;
  } cases[] = {
      {ROLE, 1},
      {PRE MODEL CH("{\"content\":\"first\"}"), 1},
      {"{\"choices\":[{\"delta\":{\"content\":\"no id\"}}]}", 1},
      {"{\"id\":7,\"model\":null,\"choices\":[{\"delta\":{}}]}", 1},
      {"{\"model\":\"mo\",\"id\":\"i\",\"choices\":[{\"delta\":{},"
       "\"finish_reason\":\"stop\"}]}",
       1},
      {"{\"id\":\"i\\n\",\"choices\":[{\"delta\":{}}]}", 0},
      {"{\"model\":\"m\\u0041\",\"choices\":[{\"delta\":{}}]}", 0},
      {"{\"id\":\"a\",\"id\":\"b\",\"choices\":[{\"delta\":{}}]}", 0},
      {"{\"id\":\"a\",\"choices\":[]}", 0},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    for (size_t stop = 0; stop < 4; stop++) {
      fp_pair x;
      pair_init(&x);
      fp_check(&x, NULL, cases[i].data, strlen(cases[i].data), stop,
               stop == 0 ? cases[i].took : -1);
      /* And the next event sees the same state. */
      const char *next = PRE MODEL CH("{\"content\":\"next\"}");
      fp_check(&x, NULL, next, strlen(next), 0, -1);
      fp_cleanup(&x);
    }
  }
}

/* Every event cut at every length and with each byte replaced, in a fresh
 * and a started decoder: the two paths agree on all of them. */
static void cuts_and_replacements_agree(void **state) {
  (void)state;
  fp_cuts_and_replacements(TAKEN, sizeof(TAKEN) / sizeof(TAKEN[0]), DECLINED,
                           sizeof(DECLINED) / sizeof(DECLINED[0]), pair_init,
                           started, NULL);
}

/* A chunk taken after START is kept as a shape (the bytes around its
 * text); later chunks of that shape are decoded from it, and chunks that
 * only look like it (the same first and last bytes, a quote inside) are
 * not mistaken for it. */
static void same_shape_reuse(void **state) {
  (void)state;
#define P "{\"choices\":[{\"delta\":{\"content\":\""
#define S "\"}}]}"
  static const struct {
    const char *data;
    int took;
  } seq[] = {
      {P "first" S, 1},
      {P "second" S, 1},
      {P "" S, 1},
      {P "esc \\n \\\" \\\\ \\u00e9 \\ud83d\\ude00" S, 1},
      {P "\\" S, 0},    /* an escaped quote: no string ends there */
      {P "a\\\\" S, 1}, /* a backslash, then the closing quote */
      {P "a\"}}],\"x\":{\"y\":[{\"z\":{\"w\":\"b" S, 0},
      {P "a\"},\"refusal\":\"r\"}}],\"q\":{\"w\":[{\"e\":{\"t\":\"b" S, 0},
      {P "a\"}}]},{\"choices\":[{\"delta\":{\"content\":\"b" S, 0},
      {P "ctl \x01" S, 0},
      {P "bad \\x" S, 0},
      {P "no end", 0},
      {P, 0},
      {S, 0},
      {"{\"choices\":[{\"delta\":{\"content\":\"x\"},\"finish_reason\":"
       "\"stop\"}]}",
       1},
      {P "after finish" S, 1},
      {"{\"choices\":[{\"delta\":{\"content\":\"other\"}}],\"u\":1}", 1},
      {"{\"choices\":[{\"delta\":{\"content\":\"other 2\"}}],\"u\":1}", 1},
      {P "back to the first" S, 1},
  };
#undef P
#undef S
  for (size_t stop = 0; stop < 2; stop++) {
    fp_pair x;
    started(&x);
    for (size_t i = 0; i < sizeof(seq) / sizeof(seq[0]); i++) {
      fp_check(&x, NULL, seq[i].data, strlen(seq[i].data), stop, seq[i].took);
      if (i == 0) assert_true(x.fast.d.scratch2.n > 0); /* kept */
    }
    fp_cleanup(&x);
  }
  /* Nothing is kept before START: the first chunk's shape holds id and
   * model, which a later one must not skip when they differ. */
  fp_pair x;
  pair_init(&x);
  fp_check(&x, NULL, ROLE, strlen(ROLE), 0, 1);
  assert_int_equal(x.fast.d.scratch2.n, 0);
  fp_cleanup(&x);
}

/* A text of 1 MiB, plain and escaped: taken, the same parts. */
static void huge_text(void **state) {
  (void)state;
  fp_huge_text(started, NULL, "{\"choices\":[{\"delta\":{\"content\":\"",
               "\\u00e9", "\"}}]}");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(takes_common_chunks),
      cmocka_unit_test(declines_the_rest),
      cmocka_unit_test(start_from_the_first_event),
      cmocka_unit_test(cuts_and_replacements_agree),
      cmocka_unit_test(same_shape_reuse),
      cmocka_unit_test(huge_text),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
