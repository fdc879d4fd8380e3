/*
 * The HTTP/1.1 request reader: llhttp (strict mode, every lenient flag off)
 * behind a sans-I/O, push-driven interface (docs/style.md §7). The socket code
 * in conn.c feeds it the bytes it reads; the fuzz target feeds it byte strings.
 *
 * One reader reads the requests of one connection, one request at a time:
 * it stops right after the end of a request and leaves the bytes that
 * follow (a pipelined next request) to the caller, who feeds them again
 * after air__http_reader_next(). Every byte it keeps is bounded: the request
 * head (method, target, header names and values) by max_header_bytes, the
 * number of headers by max_headers, the body by max_body_bytes.
 */
#ifndef AIR__HTTP_READER_H
#define AIR__HTTP_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <llhttp.h>

#include "buf.h"
#include "str.h"

typedef struct air__http_header {
  air__str name;  /* as sent (compare case-insensitively) */
  air__str value; /* leading and trailing blanks removed */
} air__http_header;

/*
 * One parsed request. Every pointer is valid from the AIR__HTTP_HEAD event
 * until air__http_reader_next() or _cleanup(); `body` is set (complete) at
 * the AIR__HTTP_DONE event and empty before it.
 */
typedef struct air__http_request {
  air__str method; /* "GET", "POST", ... (static storage) */
  air__str target; /* the request-target as sent */
  air__str path;   /* target without query: "/v1/models", "*" */
  air__str query;  /* after the first '?', without it; n == 0: none */
  const air__http_header *headers;
  size_t n_headers;
  air__str body;
  int version_minor; /* HTTP/1.<version_minor>: 0 or 1 */
  bool keep_alive;   /* the connection may carry another request */
  bool chunked;      /* Transfer-Encoding: chunked */
  bool has_content_length;
  uint64_t content_length;
  bool expect_continue; /* HTTP/1.1 Expect: 100-continue, a body follows */
  bool upgrade;         /* Upgrade/CONNECT: answered, then closed */
} air__http_request;

/* What a feed stopped on. */
typedef enum air__http_event {
  AIR__HTTP_MORE = 0, /* every byte was used; feed more */
  AIR__HTTP_HEAD,     /* the head is complete (see the request); feed again,
                         also with n == 0, to read the body */
  AIR__HTTP_DONE,     /* the request is complete; bytes after it are unused */
  AIR__HTTP_FAIL,     /* bad or oversized request: answer status, close */
} air__http_event;

/*
 * Asked before the body grows to `total` bytes (optional, see
 * air__http_reader_set_admit): 0 keeps the bytes, anything else fails the
 * request with 503 (the process is reading too many bodies at once).
 */
typedef int (*air__http_admit_cb)(void *data, size_t total);

/* A request header stored with offsets into the head buffer. */
typedef struct air__http_hdr_off {
  size_t name, name_n, value, value_n;
} air__http_hdr_off;
_Static_assert(sizeof(air__http_hdr_off) == sizeof(air__http_header) &&
                   _Alignof(air__http_hdr_off) == _Alignof(air__http_header),
               "a header slot holds its offsets, then its pointers");

typedef struct air__http_reader {
  llhttp_t parser;
  size_t max_header_bytes, max_headers, max_body_bytes;
  air__buf head;           /* target, names, values: max_header_bytes */
  air__buf body;           /* max_body_bytes */
  air__http_hdr_off *offs; /* max_headers entries at most */
  air__http_header *hdrs;  /* the same array (offs), turned into pointers
                              at the head's end */
  size_t n_hdrs, cap_hdrs;
  size_t target, target_n; /* offsets of the request-target in head */
  size_t head_bytes;       /* raw bytes of the head read so far */
  unsigned char fold;      /* obs-fold scan: 4 before the request line,
                              0 in a line, 1 after LF, 3 after LF CR,
                              2 past the head */
  size_t trailer_bytes;    /* bytes of trailer fields read so far */
  int phase;               /* see reader.c */
  bool in_field;           /* inside a header name (pieces are appended) */
  bool started;            /* a byte of this request was fed */
  air__http_request msg;
  air__http_admit_cb admit; /* NULL: every body byte up to the max */
  void *admit_data;
  int status;        /* after AIR__HTTP_FAIL: 400, 413, 417, ... */
  const char *error; /* after AIR__HTTP_FAIL: a static message */
} air__http_reader;

/* Initializes r for a new connection with the given maxima (each >= 1). */
void air__http_reader_init(air__http_reader *r, size_t max_header_bytes,
                           size_t max_headers, size_t max_body_bytes);
void air__http_reader_cleanup(air__http_reader *r);

/* Sets the callback asked before every growth of a body (NULL: none). */
void air__http_reader_set_admit(air__http_reader *r, air__http_admit_cb cb,
                                void *data);

/* Frees the body of the current request (after its handler is done with
 * it): msg.body becomes empty. */
void air__http_reader_drop_body(air__http_reader *r);

/*
 * Parses up to n bytes of p and stops at the first event. *used receives
 * the bytes consumed (all of them for AIR__HTTP_MORE; for AIR__HTTP_DONE the
 * bytes after the request are left unused). After AIR__HTTP_FAIL every
 * further call returns AIR__HTTP_FAIL with *used == 0, and after
 * AIR__HTTP_DONE it returns AIR__HTTP_DONE with *used == 0 until
 * air__http_reader_next(). Failures (status, message):
 *   400 malformed (any llhttp error: smuggling patterns such as
 *       Content-Length with Transfer-Encoding, duplicate Content-Length,
 *       bad chunk sizes, bare LF, invalid tokens), 413 body over
 *       max_body_bytes (at the head already when Content-Length says so),
 *   503 refused by the admit callback,
 *   417 an Expect other than 100-continue, 431 head or trailers over
 *       max_header_bytes or more than max_headers headers, 500 out of
 *       memory, 505 an HTTP version other than 1.0 and 1.1.
 */
air__http_event air__http_reader_feed(air__http_reader *r, const char *p,
                                      size_t n, size_t *used);

/* After AIR__HTTP_DONE: forgets that request (its memory is reused or
 * freed when large) and gets ready for the next one. */
void air__http_reader_next(air__http_reader *r);

/* True once a byte of the current request was fed (starts its timeout). */
bool air__http_reader_started(const air__http_reader *r);

/* The current request; valid as described at air__http_request. */
const air__http_request *air__http_reader_msg(const air__http_reader *r);

/* The value of the first header named `name` (case-insensitive), or NULL. */
const air__str *air__http_find_header(const air__http_request *m,
                                      const char *name);

/* Case-insensitive comparison of s with the NUL-terminated lit. */
bool air__http_str_eq(air__str s, const char *lit);

#endif
