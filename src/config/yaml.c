#include <string.h>

#include "buf.h"
#include "yaml.h"

static void discard_output(struct fy_diag *diag, void *user, const char *buf,
                           size_t len) {
  (void)diag;
  (void)user;
  (void)buf;
  (void)len;
}

struct fy_diag *air__yaml_quiet_diag(void) {
  struct fy_diag_cfg dc;
  fy_diag_cfg_default(&dc);
  dc.fp = NULL;
  dc.output_fn = discard_output;
  dc.colorize = false;
  struct fy_diag *d = fy_diag_create(&dc);
  if (d != NULL) fy_diag_set_collect_errors(d, true);
  return d;
}

bool air__yaml_blank(const char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    size_t e = i;
    while (e < n && s[e] != '\n') e++;
    size_t j = i;
    while (j < e && (s[j] == ' ' || s[j] == '\t' || s[j] == '\r')) j++;
    bool marker = e - j >= 3 && (memcmp(s + j, "---", 3) == 0 ||
                                 memcmp(s + j, "...", 3) == 0);
    if (j < e && s[j] != '#' && !marker) return false;
    i = e + 1;
  }
  return true;
}

const char *air__yaml_check_text(const char *s, size_t n, size_t *off) {
  const char *nul = n ? memchr(s, '\0', n) : NULL;
  if (nul != NULL) {
    *off = (size_t)(nul - s);
    return "contains a NUL byte";
  }
  for (size_t i = 0; i < n;) {
    size_t k = air__utf8_seq((const unsigned char *)s + i, n - i);
    if (k == 0) {
      *off = i;
      return "is not valid UTF-8";
    }
    i += k;
  }
  return NULL;
}

void air__text_pos(const char *s, size_t off, int *line, int *col) {
  int l = 1, c = 1;
  for (size_t i = 0; i < off; i++) {
    if (s[i] == '\n') {
      l++;
      c = 1;
    } else {
      c++;
    }
  }
  *line = l;
  *col = c;
}
