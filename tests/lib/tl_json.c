/*
 * tl_json.h: JSON values compared.
 */
#include "tl_json.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

void tl_expect_json(const json_t *got, const char *want_text) {
  json_error_t jerr;
  json_t *want = json_loads(want_text, 0, &jerr);
  if (want == NULL) fail_msg("bad expected JSON: %s", jerr.text);
  if (!json_equal(got, want)) {
    char *g =
        got != NULL ? json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    char *w = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);
    fprintf(stderr, "JSON differs\n--- want\n%s\n--- got\n%s\n", w,
            g != NULL ? g : "(none)");
    free(g);
    free(w);
    json_decref(want);
    fail_msg("JSON differs");
  }
  json_decref(want);
}
