/*
 * The one string span of the tree (docs/style.md §6, h2o's h2o_iovec_t): a
 * borrowed byte range with its length. Not NUL-terminated unless said so,
 * may contain NUL bytes; whoever hands one out says until when p is valid.
 * Wire paths carry these instead of C strings (no strlen on network data).
 */
#ifndef AIR__STR_H
#define AIR__STR_H

#include <stddef.h>

typedef struct air__str {
  const char *p;
  size_t n;
} air__str;

#endif
