/*
 * The test library's JSON (tests/lib): a value compared with the JSON
 * text expected, key order aside.
 */
#ifndef AIR__TL_JSON_H
#define AIR__TL_JSON_H

#include <jansson.h>

/* Fails the test, printing both sides sorted and compact, unless got is
 * the value want_text holds (json_equal). got stays the caller's. */
void tl_expect_json(const json_t *got, const char *want_text);

#endif
