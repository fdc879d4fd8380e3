#include <stdlib.h>
#include <string.h>

#include "pool.h"

#if defined(__SANITIZE_ADDRESS__)
#define AIR__POOL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AIR__POOL_ASAN 1
#endif
#endif

#ifdef AIR__POOL_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(m, n) ASAN_POISON_MEMORY_REGION(m, n)
#define UNPOISON(m, n) ASAN_UNPOISON_MEMORY_REGION(m, n)
#else
#define POISON(m, n) ((void)(m), (void)(n))
#define UNPOISON(m, n) ((void)(m), (void)(n))
#endif

void *air__pool_take(air__pool *p, size_t size) {
  if (p == NULL || p->n == 0) return calloc(1, size);
  void *m = p->free[--p->n];
  p->free[p->n] = NULL;
  UNPOISON(m, size);
  memset(m, 0, size);
  return m;
}

void air__pool_put(air__pool *p, void *m, size_t size) {
  if (m == NULL) return;
  if (p == NULL || p->n >= AIR__POOL_MAX) {
    free(m);
    return;
  }
  POISON(m, size);
  p->size = size;
  p->free[p->n++] = m;
}

void air__pool_cleanup(air__pool *p) {
  if (p == NULL) return;
  while (p->n > 0) {
    void *m = p->free[--p->n];
    p->free[p->n] = NULL;
    UNPOISON(m, p->size);
    free(m);
  }
}
