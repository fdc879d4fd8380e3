/*
 * The test library's files (tests/lib, linked into every unit test): whole
 * files read and written, a folder's files listed, the expected-file
 * convention of the transcript tests (tests/data/README.md) and byte
 * comparisons that print both sides. Every function fails the running
 * cmocka test on an error it cannot report otherwise.
 */
#ifndef AIR__TL_FILES_H
#define AIR__TL_FILES_H

#include <stdbool.h>
#include <stddef.h>

/* The whole file, NUL-terminated (*n, when not NULL: its length); NULL when
 * it cannot be opened. The caller frees it. */
char *tl_read_file(const char *path, size_t *n);

/* Writes n bytes as the whole file. */
void tl_write_file(const char *path, const char *p, size_t n);

bool tl_file_exists(const char *path);

/* AIR__TRANSCRIPT_WRITE=1 in the environment: the tests write the expected
 * files from what the code gives instead of comparing (review the diff). */
bool tl_write_mode(void);

/* The names of dir's files that end in ext, without ext, sorted; their
 * count (0 when dir cannot be opened). Free with tl_names_free. */
size_t tl_list(const char *dir, const char *ext, char ***names);
void tl_names_free(char **names, size_t n);

/* Fails the test, printing both sides, unless got equals want byte for
 * byte; what names the comparison. */
void tl_expect_bytes(const char *what, const char *got, size_t got_n,
                     const char *want, size_t want_n);

#endif
