/*
 * The test library's wire forms (tests/lib): what a caller of each dialect
 * may be sent, checked event by event on an encoder's whole output. Each
 * fails the running test at the first event that breaks its rules.
 */
#ifndef AIR__TL_WIRE_H
#define AIR__TL_WIRE_H

#include <stddef.h>

/* OpenAI chat: every event is "data: " and a JSON object, or [DONE]. */
void tl_check_openai_chat(const char *p, size_t n);

/* Anthropic: message_start first; content blocks started in index order,
 * one open at a time, deltas of the block's kind (a tool block may get
 * deltas after its stop: interleaved calls); message_delta then
 * message_stop, or an error event last. */
void tl_check_anthropic(const char *p, size_t n);

/* OpenAI Responses: every event's data a JSON object whose type is the
 * event's name and whose sequence_number counts the events from 0. */
void tl_check_responses(const char *p, size_t n);

#endif
