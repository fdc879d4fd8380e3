/*
 * The simulation's failing allocator (docs/testing.md): the sim executable
 * is linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,
 * --wrap=strdup,--wrap=strndup, so every call the project's code (linked
 * into it from the static libraries) makes to them comes here, and fails
 * when sim_alloc_fails() says so (the N-th allocation of a request's path
 * that a scenario drew). Shared libraries (libc, jansson) are not
 * affected.
 */
#include <stdbool.h>
#include <stddef.h>

#include "sim.h"

/* NOLINTBEGIN(bugprone-reserved-identifier): the linker's names */
void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t k, size_t n);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);

void *__wrap_malloc(size_t n) {
  return sim_alloc_fails() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t k, size_t n) {
  return sim_alloc_fails() ? NULL : __real_calloc(k, n);
}

/* A realloc to 0 frees: never failed. */
void *__wrap_realloc(void *p, size_t n) {
  return n != 0 && sim_alloc_fails() ? NULL : __real_realloc(p, n);
}

char *__wrap_strdup(const char *s) {
  return sim_alloc_fails() ? NULL : __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n) {
  return sim_alloc_fails() ? NULL : __real_strndup(s, n);
}
/* NOLINTEND(bugprone-reserved-identifier) */
