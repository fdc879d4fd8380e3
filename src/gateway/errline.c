/*
 * Lines to stderr from a process that must never wait on it: the
 * supervisor (docs/design.md §5), whose one loop also takes signals and reaps
 * and restarts workers. stderr's file description is shared with the worker and
 * the parent shell and is never made non-blocking (log.c); a line goes out
 * through a way of this writer's own that cannot block instead:
 *
 *   - a regular file or block device: write(2) on stderr as it is (a file
 *     never waits for a reader);
 *   - a socket (journald's stream): send(2) with MSG_DONTWAIT, a flag of
 *     the call, not of the shared description;
 *   - a pipe, FIFO, terminal or other device: a second file description of
 *     the same object, opened through /proc/self/fd/2 with O_NONBLOCK;
 *   - otherwise (no /proc): poll(2) with timeout zero, then one write. A
 *     pipe with room takes a line of at most PIPE_BUF whole, but another
 *     writer (the worker's log thread) may take that room in between, and
 *     the write then waits: the reason the private description comes first.
 *
 * A line that cannot go out at once is dropped and counted, and the next
 * line that does is preceded by "airetry serve: N lines dropped ...". Lines
 * are cut at AIR__ERRLINE_BYTES, so a line and that note go out in one
 * write of at most PIPE_BUF bytes, never interleaved with the worker's. A
 * socket or a terminal may take part of a line: the rest is dropped with it.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gw_int.h"

/* glibc hides these under strict _POSIX_C_SOURCE; Linux's values. */
#if !defined(MSG_DONTWAIT) && defined(__linux__)
#define MSG_DONTWAIT 0x40
#endif
#if !defined(O_CLOEXEC) && defined(__linux__)
#define O_CLOEXEC 02000000
#endif

enum { HOW_NONE, HOW_WRITE, HOW_SEND, HOW_POLL };

void air__errline_open(air__errline *e) {
  e->fd = -1;
  e->own = false;
  e->how = HOW_NONE;
  e->dropped = 0;
  struct stat st;
  if (fstat(STDERR_FILENO, &st) != 0) return; /* closed: lines go nowhere */
  e->fd = STDERR_FILENO;
  if (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)) {
    e->how = HOW_WRITE;
  } else if (S_ISSOCK(st.st_mode)) {
    e->how = HOW_SEND;
  } else {
    int fd =
        open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd >= 0) {
      e->fd = fd;
      e->own = true;
      e->how = HOW_WRITE;
    } else {
      e->how = HOW_POLL;
    }
  }
}

void air__errline_close(air__errline *e) {
  if (e->own) close(e->fd);
  e->fd = -1;
  e->own = false;
  e->how = HOW_NONE;
}

/* One attempt to write p[0..n) without waiting: the bytes written, or -1. */
static ssize_t try_write(const air__errline *e, const char *p, size_t n) {
  if (e->how == HOW_POLL) {
    struct pollfd pf = {e->fd, POLLOUT, 0};
    if (poll(&pf, 1, 0) != 1 || !(pf.revents & POLLOUT)) return -1;
  }
  for (;;) {
    ssize_t w = e->how == HOW_SEND
                    ? send(e->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL)
                    : write(e->fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    return w;
  }
}

void air__errline_put(air__errline *e, const char *p, size_t n) {
  if (e->how == HOW_NONE) return;
  char out[2 * AIR__ERRLINE_BYTES];
  size_t k = 0;
  if (e->dropped > 0) {
    int m =
        snprintf(out, AIR__ERRLINE_BYTES,
                 "airetry serve: %llu line%s dropped (stderr was not read)\n",
                 (unsigned long long)e->dropped, e->dropped == 1 ? "" : "s");
    if (m > 0)
      k = (size_t)m < AIR__ERRLINE_BYTES ? (size_t)m : AIR__ERRLINE_BYTES - 1;
  }
  size_t note = k;
  if (n > AIR__ERRLINE_BYTES - 1) n = AIR__ERRLINE_BYTES - 1;
  memcpy(out + k, p, n);
  k += n;
  out[k++] = '\n';
  size_t done = 0;
  /* A part taken (socket, terminal): one more try for the rest. */
  for (int tries = 0; tries < 2 && done < k; tries++) {
    ssize_t w = try_write(e, out + done, k - done);
    if (w <= 0) break;
    done += (size_t)w;
  }
  if (done == k)
    e->dropped = 0;
  else /* not written, or cut: dropped (and the note's count if it was cut) */
    e->dropped = (done > note ? 0 : e->dropped) + 1;
}

void air__errline_say(air__errline *e, const char *fmt, ...) {
  char line[AIR__ERRLINE_BYTES];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (n < 0) return;
  air__errline_put(e, line,
                   (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}
