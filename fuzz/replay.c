/*
 * Replays fuzz corpora without libFuzzer: a main() that feeds every file
 * named on the command line (or found in the directories named) once to
 * LLVMFuzzerTestOneInput. `make check` runs each target over its corpus
 * this way under ASan+UBSan, so every saved input stays a regression test.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_INPUT (16u << 20)

static int run_file(const char *path, unsigned *count) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    perror(path);
    return 1;
  }
  uint8_t *buf = malloc(MAX_INPUT);
  if (buf == NULL) {
    fclose(f);
    return 1;
  }
  size_t n = fread(buf, 1, MAX_INPUT, f);
  fclose(f);
  /* An exact-size copy, so reads past the end are caught by ASan. */
  uint8_t *exact = malloc(n ? n : 1);
  if (exact == NULL) {
    free(buf);
    return 1;
  }
  memcpy(exact, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  (*count)++;
  return 0;
}

int main(int argc, char **argv) {
  unsigned count = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      perror(argv[i]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (run_file(argv[i], &count) != 0) return 1;
      continue;
    }
    DIR *d = opendir(argv[i]);
    if (d == NULL) return 1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.') continue;
      char path[4096];
      snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
      if (run_file(path, &count) != 0) {
        closedir(d);
        return 1;
      }
    }
    closedir(d);
  }
  printf("replayed %u inputs\n", count);
  return count > 0 ? 0 : 1;
}
