/*
 * tl_files.h: files for the tests.
 */
#include "tl_files.h"

#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"

char *tl_read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  air__buf b;
  air__buf_init(&b, 64u << 20);
  char tmp[4096];
  size_t k;
  while ((k = fread(tmp, 1, sizeof(tmp), f)) > 0)
    assert_int_equal(air__buf_add(&b, tmp, k), 0);
  fclose(f);
  if (b.p == NULL) assert_int_equal(air__buf_add(&b, "", 0), 0);
  return air__buf_take(&b, n);
}

void tl_write_file(const char *path, const char *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (f == NULL) fail_msg("cannot write %s", path);
  assert_int_equal(fwrite(n > 0 ? p : "", 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

bool tl_file_exists(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f != NULL) fclose(f);
  return f != NULL;
}

bool tl_write_mode(void) {
  const char *w = getenv("AIR__TRANSCRIPT_WRITE");
  return w != NULL && strcmp(w, "1") == 0;
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

size_t tl_list(const char *dir, const char *ext, char ***names) {
  *names = NULL;
  DIR *d = opendir(dir);
  if (d == NULL) return 0;
  size_t n = 0, el = strlen(ext);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    size_t l = strlen(de->d_name);
    if (l <= el || strcmp(de->d_name + l - el, ext) != 0) continue;
    char **v = realloc(*names, (n + 1) * sizeof(char *));
    assert_non_null(v);
    *names = v;
    v[n] = strndup(de->d_name, l - el);
    assert_non_null(v[n]);
    n++;
  }
  closedir(d);
  if (n > 0) qsort(*names, n, sizeof(char *), cmp_names);
  return n;
}

void tl_names_free(char **names, size_t n) {
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
}

void tl_expect_bytes(const char *what, const char *got, size_t got_n,
                     const char *want, size_t want_n) {
  if (got_n == want_n && (got_n == 0 || memcmp(got, want, got_n) == 0)) return;
  fprintf(stderr, "--- %s: expected\n%.*s\n--- got\n%.*s\n", what, (int)want_n,
          want_n > 0 ? want : "", (int)got_n, got_n > 0 ? got : "");
  fail_msg("%s differs", what);
}
