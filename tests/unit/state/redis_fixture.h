/*
 * A private redis-server for a test (docs/design.md §3.1 tests): started on a
 * free 127.0.0.1 port (a bounded retry when the port is taken meanwhile)
 * with no persistence (--save "" --appendonly no) in a temp directory,
 * waited for with PING (bounded), killed, paused (SIGSTOP), resumed,
 * restarted on the same port, and stopped. Never the packaged daemon.
 */
#ifndef AIR_TEST_REDIS_FIXTURE_H
#define AIR_TEST_REDIS_FIXTURE_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline void rf_nap_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

typedef struct redis_fixture {
  pid_t pid;
  int port;
  char dir[64];
} redis_fixture;

static inline int rf_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t n = sizeof a;
  int port = -1;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &n) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

/* PINGs until PONG (true) or about timeout_ms passed. */
static inline bool rf_ping(int port, int timeout_ms) {
  for (int waited = 0; waited <= timeout_ms; waited += 20) {
    struct timeval tv = {0, 200000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c && !c->err) {
      redisSetTimeout(c, tv);
      redisReply *r = redisCommand(c, "PING");
      bool ok =
          r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
      if (r) freeReplyObject(r);
      redisFree(c);
      if (ok) return true;
    } else if (c) {
      redisFree(c);
    }
    rf_nap_ms(20);
  }
  return false;
}

static inline pid_t rf_spawn(redis_fixture *f) {
  char port[16];
  snprintf(port, sizeof port, "%d", f->port);
  pid_t pid = fork();
  if (pid == 0) {
    /* A test that dies (a crash, ctest's timeout) takes its server along. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1) _exit(127);
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) {
      dup2(devnull, 1);
      dup2(devnull, 2);
    }
    execlp("redis-server", "redis-server", "--port", port, "--bind",
           "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", f->dir,
           "--daemonize", "no", "--protected-mode", "no", (char *)NULL);
    _exit(127);
  }
  return pid;
}

static inline void rf_kill(redis_fixture *f) {
  if (f->pid <= 0) return;
  kill(f->pid, SIGCONT);
  kill(f->pid, SIGKILL);
  waitpid(f->pid, NULL, 0);
  f->pid = 0;
}

/* Starts it on a port of its own (up to 5 ports tried). */
static inline bool rf_start(redis_fixture *f) {
  memset(f, 0, sizeof *f);
  snprintf(f->dir, sizeof f->dir, "/tmp/airetry-redis-XXXXXX");
  if (!mkdtemp(f->dir)) return false;
  for (int tries = 0; tries < 5; tries++) {
    f->port = rf_free_port();
    if (f->port <= 0) continue;
    f->pid = rf_spawn(f);
    if (f->pid > 0 && rf_ping(f->port, 5000)) return true;
    rf_kill(f);
  }
  return false;
}

/* Starts it again on the same port (after rf_kill); bounded retries. */
static inline bool rf_restart(redis_fixture *f) {
  for (int tries = 0; tries < 50; tries++) {
    f->pid = rf_spawn(f);
    if (f->pid > 0 && rf_ping(f->port, 2000)) return true;
    rf_kill(f);
    rf_nap_ms(50);
  }
  return false;
}

static inline void rf_stop(redis_fixture *f) {
  rf_kill(f);
  if (f->dir[0]) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", f->dir);
    f->dir[0] = 0;
  }
}

/* One command on a short-lived connection; the reply's integer, or -1. */
static inline long long rf_cmd(const redis_fixture *f, const char *cmd) {
  struct timeval tv = {1, 0};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", f->port, tv);
  long long v = -1;
  if (c && !c->err) {
    redisReply *r = redisCommand(c, cmd);
    if (r && r->type == REDIS_REPLY_INTEGER) v = r->integer;
    if (r && r->type == REDIS_REPLY_STATUS) v = 0;
    if (r) freeReplyObject(r);
  }
  if (c) redisFree(c);
  return v;
}

#endif
