/*
 * The supervisor of `airetry serve` (docs/design.md §5, Supervision): a small
 * single-threaded process that holds the listening sockets, forks one
 * worker process that serves on them, and replaces the worker when it
 * dies. It never initialises libcurl, never starts a thread and never
 * touches a request: what it shares with the worker is the sockets, the
 * config snapshot as it was at fork (memory copied by fork) and one
 * shared-memory page where the worker keeps the ids of its requests in
 * flight, read here after a death.
 *
 * Signals arrive through a self-pipe (the handlers only write the signal
 * number), so the loop is one poll(2) on that pipe and the worker's ready
 * pipe. Its lines go through an air__errline, never waiting on stderr: a
 * stalled stderr pipe drops (and counts) them, and never holds a restart,
 * a reload or a stop.
 *
 * SIGHUP is validated here first (the reload callback) and forwarded only
 * when accepted. The first SIGTERM or SIGINT starts the stop: the worker is
 * sent SIGTERM (drain), whichever came, because a terminal's Ctrl-C reaches
 * the worker by itself too and a second SIGINT must mean "at once" to it;
 * the supervisor exits with 0 once the worker drained and exited 0. During
 * the stop a SIGTERM or a SIGHUP is logged and ignored (systemd's
 * control-group kill, a logrotate reload), and a SIGINT stops the worker at
 * once (it exits AIR__SUP_EXIT_NOW, the supervisor likewise). Signals for a
 * worker that is not ready yet are held and forwarded when it reports
 * ready; the worker starts with SIGHUP, SIGTERM and SIGINT blocked, so none
 * meets a default action before its handlers are in place.
 *
 * Restarts: a worker that dies (signal, abort, any exit while not
 * stopping) is logged in one line (signal or status, uptime, request ids
 * in flight) and replaced at once, unless it is the third or later death
 * within AIR__SUP_CRASH_WINDOW_MS: then the new worker waits
 * AIR__SUP_BACKOFF_MIN_MS, doubling per further death, at most
 * AIR__SUP_BACKOFF_MAX_MS. The first worker of the process that dies
 * before it was ready ends the supervisor with its exit status (a start
 * error is not retried).
 *
 * Orphans: a worker gets SIGTERM when the supervisor dies (even by
 * SIGKILL: PR_SET_PDEATHSIG), and looks at its parent on every tick of its
 * main loop, so it drains and exits rather than serve unsupervised.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gw_int.h"

/* glibc hides SO_REUSEPORT under strict _POSIX_C_SOURCE; Linux's value. */
#if !defined(SO_REUSEPORT) && defined(__linux__)
#define SO_REUSEPORT 15
#endif
/* The same for MAP_ANONYMOUS (Linux's value on every architecture). */
#if !defined(MAP_ANONYMOUS) && defined(__linux__)
#define MAP_ANONYMOUS 0x20
#endif

#define AIR__SUP_CRASH_WINDOW_MS 10000u
/* deaths in the window without delay */
#define AIR__SUP_CRASH_FREE 2u
#define AIR__SUP_BACKOFF_MIN_MS 250u
#define AIR__SUP_BACKOFF_MAX_MS 4000u
#define AIR__SUP_LOG_IDS 16u /* request ids named in a death line */

/* ---- sockets ------------------------------------------------------------- */

static int bind_one(const struct sockaddr_storage *ss, socklen_t len) {
  int fd = socket(ss->ss_family, SOCK_STREAM, 0);
  if (fd < 0) return -errno;
  int one = 1;
  int rc = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
#ifdef SO_REUSEPORT
  if (rc == 0) rc = setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
#endif
  if (rc == 0 && ss->ss_family == AF_INET6)
    rc = setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  if (rc == 0) rc = bind(fd, (const struct sockaddr *)ss, len);
  if (rc == 0) rc = listen(fd, AIR__SUP_BACKLOG);
  if (rc == 0) rc = fcntl(fd, F_SETFD, FD_CLOEXEC);
  if (rc != 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

/* A second `airetry serve` on the same address must never join this one's
 * SO_REUSEPORT group: the kernel would split connections between the two
 * without a word. So, before the sockets are bound, two guards (port 0
 * needs neither: the kernel picks a port nobody holds):
 *   - a lock: an abstract unix socket named "airetry-serve/HOST:PORT"
 *     (HOST as inet_ntop writes it, an IPv6 one in brackets), held for
 *     the supervisor's life and released by the kernel when it ends; it
 *     orders two starts at the same moment;
 *   - a probe: a socket bound to the address without SO_REUSEPORT fails
 *     with EADDRINUSE while anything listens there (another airetry
 *     serve, or another program, with SO_REUSEPORT or not). It has
 *     SO_REUSEADDR: connections of an earlier run in TIME_WAIT are no
 *     reason to refuse. */
static int lock_address(const struct sockaddr_storage *ss, int port) {
  char host[INET6_ADDRSTRLEN];
  const void *a =
      ss->ss_family == AF_INET6
          ? (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr
          : (const void *)&((const struct sockaddr_in *)ss)->sin_addr;
  if (inet_ntop(ss->ss_family, a, host, sizeof(host)) == NULL) return -errno;
  struct sockaddr_un un;
  memset(&un, 0, sizeof(un));
  un.sun_family = AF_UNIX;
  /* sun_path[0] stays '\0': the abstract namespace (no file). */
  int k = snprintf(un.sun_path + 1, sizeof(un.sun_path) - 1,
                   ss->ss_family == AF_INET6 ? "airetry-serve/[%s]:%d"
                                             : "airetry-serve/%s:%d",
                   host, port);
  if (k < 0 || (size_t)k >= sizeof(un.sun_path) - 1) return -EINVAL;
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return -errno;
  socklen_t len =
      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)k);
  if (bind(fd, (const struct sockaddr *)&un, len) != 0 ||
      fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

static int probe_address(const struct sockaddr_storage *ss, socklen_t len) {
  int fd = socket(ss->ss_family, SOCK_STREAM, 0);
  if (fd < 0) return -errno;
  int one = 1;
  int rc = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (rc == 0 && ss->ss_family == AF_INET6)
    rc = setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  if (rc == 0) rc = bind(fd, (const struct sockaddr *)ss, len);
  int e = rc == 0 ? 0 : errno;
  close(fd);
  return -e;
}

int air__sup_bind(const char *host, int port, unsigned n, int *fds,
                  int *lock_fd, int *bound_port, int *err) {
  struct sockaddr_storage ss;
  socklen_t len;
  memset(&ss, 0, sizeof(ss));
  struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
  struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
  *err = 0;
  if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
    s4->sin_family = AF_INET;
    s4->sin_port = htons((uint16_t)port);
    len = sizeof(*s4);
  } else if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons((uint16_t)port);
    len = sizeof(*s6);
  } else {
    *err = EINVAL;
    return AIR_EINVAL;
  }
  for (unsigned i = 0; i < n; i++) fds[i] = -1;
  *lock_fd = -1;
  if (port != 0) {
    int fd = lock_address(&ss, port);
    if (fd < 0) {
      *err = -fd;
      return AIR_EIO;
    }
    int e = -probe_address(&ss, len);
    if (e != 0) {
      close(fd);
      *err = e;
      return AIR_EIO;
    }
    *lock_fd = fd;
  }
  for (unsigned i = 0; i < n; i++) {
    int fd = bind_one(&ss, len);
    if (fd < 0) {
      *err = -fd;
      for (unsigned j = 0; j < i; j++) close(fds[j]);
      for (unsigned j = 0; j < n; j++) fds[j] = -1;
      if (*lock_fd >= 0) close(*lock_fd);
      *lock_fd = -1;
      return AIR_EIO;
    }
    fds[i] = fd;
    if (i == 0) {
      /* Port 0: the others join the ephemeral port the first one got. */
      struct sockaddr_storage got;
      socklen_t gl = sizeof(got);
      if (getsockname(fd, (struct sockaddr *)&got, &gl) != 0) {
        *err = errno;
        close(fd);
        fds[0] = -1;
        if (*lock_fd >= 0) close(*lock_fd);
        *lock_fd = -1;
        return AIR_EIO;
      }
      uint16_t p = got.ss_family == AF_INET6
                       ? ((struct sockaddr_in6 *)&got)->sin6_port
                       : ((struct sockaddr_in *)&got)->sin_port;
      if (ss.ss_family == AF_INET6)
        s6->sin6_port = p;
      else
        s4->sin_port = p;
      *bound_port = ntohs(p);
    }
  }
  return 0;
}

/* ---- the in-flight page -------------------------------------------------- */

air__sup_page *air__sup_page_new(void) {
  void *p = mmap(NULL, sizeof(air__sup_page), PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

void air__sup_page_free(air__sup_page *p) {
  if (p != NULL) munmap(p, sizeof(*p));
}

int air__sup_inflight_add(air__sup_page *p, const char *rid) {
  if (p == NULL) return -1;
  size_t n = strlen(rid);
  if (n >= sizeof(p->slot[0].rid)) n = sizeof(p->slot[0].rid) - 1;
  /* Start where the id's bytes point, so threads rarely race for a slot. */
  unsigned h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)rid[i]) * 16777619u;
  for (unsigned k = 0; k < AIR__SUP_SLOTS; k++) {
    air__sup_slot *s = &p->slot[(h + k) % AIR__SUP_SLOTS];
    unsigned zero = 0;
    if (atomic_load_explicit(&s->state, memory_order_relaxed) != 0 ||
        !atomic_compare_exchange_strong(&s->state, &zero, 1))
      continue;
    memcpy(s->rid, rid, n);
    s->rid[n] = '\0';
    atomic_store_explicit(&s->state, 2, memory_order_release);
    return (int)((h + k) % AIR__SUP_SLOTS);
  }
  atomic_fetch_add(&p->untracked, 1);
  return -1;
}

void air__sup_inflight_remove(air__sup_page *p, int slot) {
  if (p == NULL) return;
  if (slot < 0) {
    atomic_fetch_sub(&p->untracked, 1);
    return;
  }
  atomic_store_explicit(&p->slot[slot].state, 0, memory_order_release);
}

/* ---- the loop ------------------------------------------------------------ */

static int sig_pipe[2] = {-1, -1}; /* the handlers' only way out */

static void on_signal(int signum) {
  int saved = errno;
  unsigned char b = (unsigned char)signum;
  ssize_t w = write(sig_pipe[1], &b, 1); /* full pipe: signals are coalesced */
  (void)w;
  errno = saved;
}

static const int handled[] = {SIGHUP, SIGTERM, SIGINT, SIGCHLD};

static int install(void (*h)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = h;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = h == SIG_DFL ? 0 : SA_RESTART;
  for (size_t i = 0; i < sizeof(handled) / sizeof(handled[0]); i++)
    if (sigaction(handled[i], &sa, NULL) != 0) return AIR_EIO;
  return 0;
}

static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static const char *sig_name(int s) {
  switch (s) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGKILL:
      return "SIGKILL";
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGSYS:
      return "SIGSYS";
    default:
      return "signal";
  }
}

typedef struct sup_run {
  const air__sup *s;
  air__sup_page *page;
  pid_t pid;      /* 0: no worker */
  int ready_fd;   /* read end of the worker's ready pipe, or -1 */
  bool ready;     /* the worker reported ready */
  bool announced; /* some worker was ready once */
  bool stopping;  /* a SIGTERM or SIGINT came: no new worker */
  bool hurry;     /* a SIGINT during the stop: the worker stops at once */
  bool hup_held, term_held;
  uint64_t started_ms;
  uint64_t restarts;
  uint64_t next_start_ms;                   /* backoff: no worker before then */
  uint64_t backoff_ms;                      /* the last delay (0: none) */
  uint64_t deaths[AIR__SUP_CRASH_FREE + 1]; /* times of the latest deaths */
  unsigned n_deaths;
  int exit_code; /* when done */
  bool done;
} sup_run;

static void log_death(sup_run *r, int status, uint64_t uptime, uint64_t delay) {
  char line[AIR__ERRLINE_BYTES];
  size_t n = 0;
  int k;
  if (WIFSIGNALED(status))
    k = snprintf(line, sizeof(line),
                 "airetry serve: worker %ld died: %s (signal %d) after %llu ms",
                 (long)r->pid, sig_name(WTERMSIG(status)), WTERMSIG(status),
                 (unsigned long long)uptime);
  else
    k = snprintf(
        line, sizeof(line),
        "airetry serve: worker %ld exited with status %d after %llu ms",
        (long)r->pid, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
        (unsigned long long)uptime);
  n = k > 0 ? (size_t)k : 0;
  unsigned named = 0, more = 0;
  for (unsigned i = 0; i < AIR__SUP_SLOTS; i++) {
    air__sup_slot *s = &r->page->slot[i];
    if (atomic_load(&s->state) != 2) continue;
    if (named == AIR__SUP_LOG_IDS || n >= sizeof(line)) {
      more++;
      continue;
    }
    s->rid[sizeof(s->rid) - 1] = '\0';
    k = snprintf(line + n, sizeof(line) - n, "%s%s",
                 named == 0 ? "; requests in flight: " : ", ", s->rid);
    if (k > 0) n += (size_t)k;
    named++;
  }
  more += atomic_load(&r->page->untracked);
  if (n < sizeof(line) && more > 0) {
    k = snprintf(line + n, sizeof(line) - n, "%s%u more",
                 named ? " and " : "; requests in flight: ", more);
    if (k > 0) n += (size_t)k;
  }
  if (n < sizeof(line) && named == 0 && more == 0) {
    k = snprintf(line + n, sizeof(line) - n, "; no request in flight");
    if (k > 0) n += (size_t)k;
  }
  if (n < sizeof(line)) {
    if (r->stopping || !r->announced)
      k = snprintf(line + n, sizeof(line) - n, "; not restarted: %s",
                   r->stopping ? "stopping" : "it never became ready");
    else if (delay > 0)
      k = snprintf(line + n, sizeof(line) - n,
                   "; %u deaths within %u ms: restarting in %llu ms",
                   r->n_deaths, AIR__SUP_CRASH_WINDOW_MS,
                   (unsigned long long)delay);
    else
      k = snprintf(line + n, sizeof(line) - n, "; restarting now");
    if (k > 0) n += (size_t)k;
  }
  if (n >= sizeof(line)) n = sizeof(line) - 1;
  air__errline_put(r->s->err, line, n);
}

/* Forks a worker. Returns 0, or an error (the loop then ends). The
 * handled signals are blocked around fork(2): one arriving in between would
 * otherwise run this process's handler in the child and write to its
 * self-pipe. The child keeps SIGHUP, SIGTERM and SIGINT blocked (the
 * worker unblocks them once it handles them). */
static int spawn(sup_run *r) {
  int rp[2];
  if (pipe(rp) != 0) return AIR_EIO;
  memset(r->page->slot, 0, sizeof(r->page->slot));
  atomic_store(&r->page->untracked, 0);
  fflush(stdout);
  fflush(stderr);
  sigset_t block, old;
  sigemptyset(&block);
  for (size_t i = 0; i < sizeof(handled) / sizeof(handled[0]); i++)
    sigaddset(&block, handled[i]);
  sigprocmask(SIG_BLOCK, &block, &old);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    sigprocmask(SIG_SETMASK, &old, NULL);
    close(rp[0]);
    close(rp[1]);
    return AIR_EIO;
  }
  if (pid == 0) {
#ifdef __linux__
    /* An orphan must never serve unsupervised: this process's death sends
     * the worker SIGTERM (a drain; pending until it handles it). It may
     * have died before the prctl: then the parent is another process. */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) _exit(1);
#else
    if (getppid() != parent) _exit(1);
#endif
    close(rp[0]);
    close(sig_pipe[0]);
    close(sig_pipe[1]);
    /* The address's lock is the supervisor's: a worker draining on after
     * its death must not refuse the next start. */
    if (r->s->lock_fd >= 0) close(r->s->lock_fd);
    install(SIG_DFL);
    sigset_t child = old;
    sigaddset(&child, SIGHUP);
    sigaddset(&child, SIGTERM);
    sigaddset(&child, SIGINT);
    sigprocmask(SIG_SETMASK, &child, NULL);
    int code = r->s->worker(r->s->data, rp[1], r->restarts, r->page);
    fflush(stdout);
    fflush(stderr);
    exit(code); /* not _exit: LeakSanitizer checks the worker too */
  }
  sigprocmask(SIG_SETMASK, &old, NULL);
  close(rp[1]);
  fcntl(rp[0], F_SETFD, FD_CLOEXEC);
  r->pid = pid;
  r->ready_fd = rp[0];
  r->ready = false;
  r->started_ms = mono_ms();
  return 0;
}

static void forward(sup_run *r, int signum) {
  if (r->pid > 0) kill(r->pid, signum);
}

static void on_ready(sup_run *r) {
  unsigned char b;
  ssize_t n = read(r->ready_fd, &b, 1);
  if (n < 0 && errno == EINTR) return;
  close(r->ready_fd);
  r->ready_fd = -1;
  if (n != 1) return; /* closed unready: its death follows (SIGCHLD) */
  r->ready = true;
  if (!r->announced) {
    r->announced = true;
    r->s->announce(r->s->data);
  }
  if (r->hup_held) forward(r, SIGHUP);
  if (r->term_held) forward(r, SIGTERM);
  r->hup_held = r->term_held = false;
}

static void on_death(sup_run *r, int status) {
  uint64_t now = mono_ms();
  uint64_t uptime = now - r->started_ms;
  bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (r->ready_fd >= 0) {
    close(r->ready_fd);
    r->ready_fd = -1;
  }
  if (r->stopping && clean) {
    r->pid = 0;
    r->done = true;
    r->exit_code = 0;
    return;
  }
  if (!r->announced || r->stopping) {
    /* A start that failed, or a death while draining: no new worker. */
    if (!clean && (WIFSIGNALED(status) || r->stopping))
      log_death(r, status, uptime, 0);
    r->pid = 0;
    r->done = true;
    r->exit_code =
        WIFEXITED(status) && WEXITSTATUS(status) != 0 ? WEXITSTATUS(status) : 1;
    if (r->hurry) r->exit_code = AIR__SUP_EXIT_NOW;
    return;
  }
  /* The times of the latest deaths, oldest first. */
  unsigned cap = AIR__SUP_CRASH_FREE + 1;
  if (r->n_deaths == cap) {
    memmove(r->deaths, r->deaths + 1, (cap - 1) * sizeof(r->deaths[0]));
    r->n_deaths--;
  }
  r->deaths[r->n_deaths++] = now;
  uint64_t delay = 0;
  if (r->n_deaths == cap && now - r->deaths[0] < AIR__SUP_CRASH_WINDOW_MS) {
    /* The window is full: wait, doubling per further death. */
    delay = r->backoff_ms ? r->backoff_ms * 2 : AIR__SUP_BACKOFF_MIN_MS;
    if (delay > AIR__SUP_BACKOFF_MAX_MS) delay = AIR__SUP_BACKOFF_MAX_MS;
  }
  r->backoff_ms = delay;
  log_death(r, status, uptime, delay);
  r->pid = 0;
  r->restarts++;
  r->next_start_ms = now + delay;
}

static void reap(sup_run *r) {
  for (;;) {
    int status = 0;
    pid_t p = waitpid(-1, &status, WNOHANG);
    if (p < 0 && errno == EINTR) continue;
    if (p <= 0) return;
    if (p == r->pid) on_death(r, status);
  }
}

static void on_signals(sup_run *r) {
  unsigned char b[64];
  ssize_t n;
  while ((n = read(sig_pipe[0], b, sizeof(b))) > 0) {
    for (ssize_t i = 0; i < n; i++) {
      int sig = b[i];
      if (sig == SIGCHLD) {
        reap(r);
      } else if (sig == SIGHUP) {
        if (r->stopping) {
          air__errline_say(r->s->err,
                           "airetry serve: SIGHUP: stopping; ignored");
          continue;
        }
        if (!r->s->reload(r->s->data)) continue;
        if (r->pid > 0 && r->ready)
          forward(r, SIGHUP);
        else
          r->hup_held = r->pid > 0; /* a worker forked later has it already */
      } else if ((sig == SIGTERM || sig == SIGINT) && !r->stopping) {
        r->stopping = true;
        if (r->pid > 0 && r->ready)
          forward(r, SIGTERM);
        else if (r->pid > 0)
          r->term_held = true;
        else
          r->done = true; /* waiting out a backoff: nothing to drain */
      } else if (sig == SIGINT) {
        air__errline_say(r->s->err,
                         "airetry serve: SIGINT again: stopping at once");
        r->hurry = true;
        /* A worker not ready yet has nothing in flight and maybe no handler. */
        if (r->pid > 0) kill(r->pid, r->ready ? SIGINT : SIGKILL);
      } else if (sig == SIGTERM) {
        air__errline_say(r->s->err,
                         "airetry serve: SIGTERM: already stopping; "
                         "ignored (SIGINT stops at once)");
      }
    }
  }
}

int air__sup_run(air__sup *s) {
  sup_run r;
  memset(&r, 0, sizeof(r));
  r.s = s;
  r.ready_fd = -1;
  r.page = air__sup_page_new();
  if (r.page == NULL) return 1;
  if (pipe(sig_pipe) != 0) {
    air__sup_page_free(r.page);
    return 1;
  }
  for (int i = 0; i < 2; i++) {
    fcntl(sig_pipe[i], F_SETFL, fcntl(sig_pipe[i], F_GETFL) | O_NONBLOCK);
    fcntl(sig_pipe[i], F_SETFD, FD_CLOEXEC);
  }
  signal(SIGPIPE, SIG_IGN);
  int rc = install(on_signal);
  if (rc == 0) rc = spawn(&r);
  if (rc != 0) {
    air__errline_say(s->err, "airetry serve: cannot start a worker: %s",
                     strerror(errno));
    r.done = true;
    r.exit_code = 1;
  }
  while (!r.done) {
    uint64_t now = mono_ms();
    if (r.pid == 0) {
      if (r.stopping) break;
      if (now >= r.next_start_ms) {
        if (spawn(&r) != 0) {
          /* fork failed (EAGAIN, ENOMEM): try again after a backoff. */
          air__errline_say(s->err, "airetry serve: cannot fork a worker: %s",
                           strerror(errno));
          r.next_start_ms = now + AIR__SUP_BACKOFF_MAX_MS;
        }
        continue;
      }
    }
    struct pollfd pf[2] = {{sig_pipe[0], POLLIN, 0}, {r.ready_fd, POLLIN, 0}};
    int timeout = -1;
    if (r.pid == 0) timeout = (int)(r.next_start_ms - now);
    int n = poll(pf, r.ready_fd >= 0 ? 2 : 1, timeout);
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    if (pf[0].revents) on_signals(&r);
    if (r.ready_fd >= 0 && pf[1].revents) on_ready(&r);
  }
  install(SIG_DFL);
  close(sig_pipe[0]);
  close(sig_pipe[1]);
  sig_pipe[0] = sig_pipe[1] = -1;
  air__sup_page_free(r.page);
  return r.exit_code;
}
