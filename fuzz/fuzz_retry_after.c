/*
 * libFuzzer target for air__retry_after: the input is a header block, one
 * "name: value" per line ('\n' or "\r\n"); a line without ':' is a name with
 * an empty value. Every name and value is copied into its own exact-size
 * heap block, so reading past a length is caught by ASan. The hint is
 * computed at three wall clocks; a hint must never exceed the clip, and the
 * function must answer the same for the same input.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "airetry.h"
#include "limits.h"
#include "retry_after.h"

#define MAX_FUZZ_HEADERS 64

static char *dup_exact(const uint8_t *p, size_t n) {
  char *d = malloc(n ? n : 1);
  if (d != NULL && n > 0) memcpy(d, p, n);
  return d;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  air_header h[MAX_FUZZ_HEADERS];
  size_t n = 0, i = 0;
  while (i < size && n < MAX_FUZZ_HEADERS) {
    size_t end = i;
    while (end < size && data[end] != '\n') end++;
    size_t line_end = end;
    if (line_end > i && data[line_end - 1] == '\r') line_end--;
    size_t colon = i;
    while (colon < line_end && data[colon] != ':') colon++;
    size_t value_at = colon < line_end ? colon + 1 : line_end;
    h[n].name_len = colon - i;
    h[n].value_len = line_end - value_at;
    h[n].name = dup_exact(data + i, h[n].name_len);
    h[n].value = dup_exact(data + value_at, h[n].value_len);
    if (h[n].name == NULL || h[n].value == NULL) abort();
    n++;
    i = end + 1;
  }

  static const uint64_t walls[] = {0, 1796040000000ull, UINT64_MAX};
  for (size_t k = 0; k < sizeof walls / sizeof walls[0]; k++) {
    uint64_t w1 = 0, w2 = 0;
    int r1 = air__retry_after(h, n, walls[k], &w1);
    int r2 = air__retry_after(h, n, walls[k], &w2);
    if (r1 != 0 && r1 != 1) abort();
    if (r1 != r2 || (r1 == 1 && w1 != w2)) abort();
    if (r1 == 1 && w1 > AIR__MAX_RETRY_AFTER_MS) abort();
  }

  for (size_t k = 0; k < n; k++) {
    free((void *)h[k].name);
    free((void *)h[k].value);
  }
  return 0;
}
