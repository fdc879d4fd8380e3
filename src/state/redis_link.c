/*
 * The Redis state backend's link (redis_int.h, docs/design.md §3.1): the
 * Redis thread, which sends what the ops queued, applies the answers and
 * the changes other instances publish to the mirror, and keeps the link up.
 *
 * One Redis thread per state (one per process) with its own uv loop and
 * two hiredis 0.14 async connections on it: `cmd` (scripts, SCAN) and `sub`
 * (SUBSCRIBE to PREFIX "changes"). hiredis 0.14 has no timeouts and
 * resolves no names asynchronously, so the thread resolves with
 * uv_getaddrinfo, connects the address, and keeps its own timers: the
 * whole handshake (connect, AUTH, SELECT, SCRIPT LOAD, PING, SUBSCRIBE)
 * within connect_timeout_ms, each command answered within
 * command_timeout_ms; a miss drops both connections. A link that drops is
 * made again after a jittered backoff capped at 500 ms. On every link:
 * subscribe first, push what changed locally meanwhile through the merge
 * scripts (the stricter state wins), then SCAN the prefix and apply newer
 * versions.
 *
 * Applying: a change carries a version; the mirror takes only newer ones.
 * Our own script's answer replaces the record only when the decision
 * differs (redis.c says why); others' changes to a key with our commands in
 * flight wait, the newest kept, until the last answer.
 */
#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "redis_int.h"

#define BACKOFF_MAX_MS 500u /* docs/design.md §3.1: reconnect backoff cap */
#define BACKOFF_BASE_MS 25u
#define TICK_MS 20u /* command timeouts, dirty pushes */

/* Whether kind is one the backend keeps (AIR__REDIS_KIND_*). */
static bool known_kind(char kind) {
  return kind == AIR__REDIS_KIND_TARGET || kind == AIR__REDIS_KIND_ROUTE ||
         kind == AIR__REDIS_KIND_STYLE;
}

/* ---- applying changes (the Redis thread, under mu) ----------------------- */

/*
 * Parses a change message (redis_lua.h) into *ch; *key points at its key
 * within s. false on anything malformed (then nothing is applied).
 */
static bool parse_change(const char *s, size_t n, char *kind,
                         air__redis_change *ch, char inst[17], const char **key,
                         size_t *kn) {
  const char *f[8];
  size_t fl[8], k = 0;
  const char *p = s, *end = s + n;
  memset(ch, 0, sizeof(*ch));
  while (k < 8) {
    const char *nl = k < 7 ? memchr(p, '\n', (size_t)(end - p)) : NULL;
    f[k] = p;
    fl[k] = nl ? (size_t)(nl - p) : (size_t)(end - p);
    k++;
    if (!nl) break;
    p = nl + 1;
  }
  if (k < 7 || fl[0] != 1 || fl[1] != 16) return false;
  *kind = f[0][0];
  if (!known_kind(*kind)) return false;
  if ((*kind == AIR__REDIS_KIND_TARGET || *kind == AIR__REDIS_KIND_STYLE) &&
      k != 7)
    return false;
  if (*kind == AIR__REDIS_KIND_ROUTE && k != 8) return false;
  memcpy(inst, f[1], 16);
  inst[16] = 0;
  uint64_t v[4];
  for (int i = 0; i < 4; i++) {
    if (fl[i + 2] == 0 || fl[i + 2] > 19) return false;
    v[i] = 0;
    for (size_t j = 0; j < fl[i + 2]; j++) {
      char c = f[i + 2][j];
      if (c < '0' || c > '9') return false;
      v[i] = v[i] * 10 + (uint64_t)(c - '0');
    }
  }
  ch->have = true;
  ch->version = v[0];
  ch->n = v[1] > UINT32_MAX ? UINT32_MAX : (uint32_t)v[1];
  ch->on = v[2] != 0;
  ch->ms = v[3];
  if (*kind == AIR__REDIS_KIND_ROUTE) {
    if (fl[6] >= sizeof ch->target) return false;
    memcpy(ch->target, f[6], fl[6]);
    ch->target[fl[6]] = 0;
  }
  *key = f[k - 1];
  *kn = fl[k - 1];
  return *kn > 0 && *kn < AIR__MAX_REDIS_KEY_BYTES;
}

/* Applies ch to e when newer; reply: it answers our own script. */
static void apply(air__redis *r, air__redis_entry *e,
                  const air__redis_change *ch, bool reply) {
  if (!ch->have || ch->version <= e->version) return;
  e->version = ch->version;
  if (!reply) r->applied++;
  if (e->node.kind == AIR__REDIS_KIND_TARGET) {
    if (reply && e->br.failures == ch->n && e->br.open == ch->on) return;
    e->br.failures = ch->n;
    e->br.open = ch->on;
    e->br.open_until = ch->on ? ch->base + ch->ms : 0;
    if (!ch->on && !e->own_lease) e->br.lease = 0;
    return;
  }
  if (e->node.kind == AIR__REDIS_KIND_STYLE) {
    uint64_t until = ch->base + ch->ms;
    if (reply && (uint32_t)e->style.style == ch->n) return;
    e->style.style =
        ch->n <= AIR_CONT_INSTRUCT ? (air_cont_style)ch->n : AIR_CONT_NONE;
    e->style.until = until < ch->base ? UINT64_MAX : until;
    return;
  }
  if (reply && e->st.on == ch->on && e->st.used == ch->n &&
      (!ch->on || strcmp(e->st.target, ch->target) == 0))
    return;
  e->st.on = ch->on;
  e->st.used = ch->n;
  snprintf(e->st.target, sizeof e->st.target, "%s", ch->target);
  e->st.since = ch->base >= ch->ms ? ch->base - ch->ms : 0;
}

/* Others' change: applied now, or kept until our commands on e are done. */
static void offer(air__redis *r, air__redis_entry *e,
                  const air__redis_change *ch) {
  if (e->pending > 0) {
    if (!e->wait.have || ch->version > e->wait.version) e->wait = *ch;
    return;
  }
  apply(r, e, ch, false);
}

/* A change message from pub/sub or a read: to the entry of its key. */
static void take_message(air__redis *r, const char *s, size_t n, bool read) {
  char kind, inst[17];
  air__redis_change ch;
  const char *key;
  size_t kn;
  if (!parse_change(s, n, &kind, &ch, inst, &key, &kn)) return;
  if (!read && strcmp(inst, r->instance) == 0) return; /* our reply has it */
  size_t pn = strlen(r->prefix);
  if (kn <= pn + 2 || memcmp(key, r->prefix, pn) != 0 || key[pn] != kind)
    return;
  ch.base = air__redis_mono_ms();
  air__redis_entry *e = air__redis_lookup_key(r, kind, key, kn, true, true);
  if (e != NULL) offer(r, e, &ch);
}

/* ---- the Redis thread ---------------------------------------------------- */

static void link_drop(air__redis *r);
static void pump(air__redis *r);

static void on_kick(uv_timer_t *t);

/* Drops the link from outside any hiredis callback (the kick timer). */
static void kick(air__redis *r) {
  uv_timer_start(&r->kick, on_kick, 0, 0);
}

static void request_drop(air__redis *r) {
  r->want_down = true;
  kick(r);
}

static void inflight_remove(air__redis *r, air__redis_cmd *c) {
  air__redis_cmd **pp = &r->inflight;
  air__redis_cmd *prev = NULL;
  while (*pp && *pp != c) {
    prev = *pp;
    pp = &(*pp)->next;
  }
  if (*pp == NULL) return;
  *pp = c->next;
  if (r->inflight_tail == c) r->inflight_tail = prev;
  c->next = NULL;
}

static int send_cmd(air__redis *r, air__redis_cmd *c);

/* The end of a command on an entry: pending down, a waiting change in. */
static void entry_done(air__redis *r, air__redis_cmd *c,
                       const air__redis_change *ch, bool ok) {
  air__redis_entry *e = c->e;
  if (e == NULL || !c->counts) return;
  if (e->pending > 0) e->pending--;
  if (!ok && c->op != AIR__REDIS_OP_LEASE) air__redis_mark_dirty(r, e);
  if (ch != NULL && ch->have) {
    if (e->pending > 0) {
      if (!e->wait.have || ch->version > e->wait.version) e->wait = *ch;
    } else {
      apply(r, e, ch, true);
    }
  }
  if (e->pending == 0 && e->wait.have) {
    air__redis_change w = e->wait;
    e->wait.have = false;
    apply(r, e, &w, false);
  }
}

static bool is_error(const redisReply *rep, const char *code) {
  size_t n = strlen(code);
  return rep->type == REDIS_REPLY_ERROR && rep->len >= n &&
         memcmp(rep->str, code, n) == 0;
}

static void scan_step(air__redis *r);
static void sync_finished(air__redis *r);

/* c, counted in queued, could not be sent: answered as failed (its entry
 * marked dirty, air__state_redis_sync told), then freed. */
static void unsent(air__redis *r, air__redis_cmd *c) {
  pthread_mutex_lock(&r->mu);
  r->queued--;
  r->answered++;
  entry_done(r, c, NULL, false);
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
  air__redis_cmd_free(c);
}

/* The answer to a script on an entry. Caller holds mu. */
static void script_answer(air__redis *r, air__redis_cmd *c,
                          const redisReply *rep) {
  air__redis_change ch = {0};
  bool ok = rep->type != REDIS_REPLY_ERROR;
  if (!ok) r->command_errors++;
  if (c->op == AIR__REDIS_OP_LEASE && c->a[0][0] == 'a') {
    air__redis_entry *e = c->e;
    e->asking = false;
    if (ok && rep->type == REDIS_REPLY_INTEGER) {
      if (rep->integer == 0) {
        e->ready = c->token;
        e->ready_until = c->op_now + c->lease_ms;
      } else if (e->br.lease == 0 || !e->own_lease) {
        /* Another instance probes: not before its lease ends. */
        e->br.lease = UINT64_MAX;
        e->br.lease_until = c->op_now + (uint64_t)rep->integer;
        air__redis_drop_own(r, e);
      }
    }
  } else if (ok && rep->type == REDIS_REPLY_STRING &&
             c->op != AIR__REDIS_OP_LEASE) {
    char kind, inst[17];
    const char *key;
    size_t kn;
    if (parse_change(rep->str, rep->len, &kind, &ch, inst, &key, &kn))
      ch.base = c->op_now;
  }
  r->answered++;
  entry_done(r, c, &ch, ok);
}

static void on_reply(redisAsyncContext *ac, void *reply, void *data) {
  (void)ac;
  air__redis *r = ac->data;
  air__redis_cmd *c = data;
  const redisReply *rep = reply;
  inflight_remove(r, c);
  pthread_mutex_lock(&r->mu);
  r->queued = r->queued > 0 ? r->queued - 1 : 0;
  if (rep == NULL || c->gen != r->gen) {
    /* The link went away: the write may not have landed. */
    if (c->op == AIR__REDIS_OP_BREAKER || c->op == AIR__REDIS_OP_STICKY ||
        c->op == AIR__REDIS_OP_STYLE || c->op == AIR__REDIS_OP_LEASE) {
      if (c->op == AIR__REDIS_OP_LEASE && c->e) c->e->asking = false;
      r->answered++;
      entry_done(r, c, NULL, c->op == AIR__REDIS_OP_LEASE);
    }
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    air__redis_cmd_free(c);
    return;
  }
  if (c->op >= AIR__REDIS_OP_BREAKER && c->op <= AIR__REDIS_OP_READ &&
      is_error(rep, "NOSCRIPT") && !c->eval) {
    c->eval = true;
    r->queued++;
    pthread_mutex_unlock(&r->mu);
    if (send_cmd(r, c) != 0) unsent(r, c);
    return;
  }
  bool down = is_error(rep, "LOADING") || is_error(rep, "READONLY") ||
              is_error(rep, "BUSY") || is_error(rep, "MASTERDOWN");
  switch (c->op) {
    case AIR__REDIS_OP_AUTH:
    case AIR__REDIS_OP_SELECT:
    case AIR__REDIS_OP_PING:
      if (rep->type == REDIS_REPLY_ERROR) {
        r->command_errors++;
        down = true;
      } else if (c->op == AIR__REDIS_OP_PING) {
        r->cmd.ready = true;
      }
      break;
    case AIR__REDIS_OP_LOAD:
      if (rep->type == REDIS_REPLY_STRING && rep->len == 40) {
        memcpy(r->sha[c->script], rep->str, 40);
        r->sha[c->script][40] = 0;
      } else {
        r->command_errors++;
        down = down || rep->type == REDIS_REPLY_ERROR;
      }
      break;
    case AIR__REDIS_OP_BREAKER:
    case AIR__REDIS_OP_LEASE:
    case AIR__REDIS_OP_STICKY:
    case AIR__REDIS_OP_STYLE:
      script_answer(r, c, rep);
      break;
    case AIR__REDIS_OP_SCAN:
      if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
          rep->element[0]->type == REDIS_REPLY_STRING &&
          rep->element[1]->type == REDIS_REPLY_ARRAY) {
        snprintf(r->cursor, sizeof r->cursor, "%.*s", (int)rep->element[0]->len,
                 rep->element[0]->str);
        r->scan_more = strcmp(r->cursor, "0") != 0;
        const redisReply *ks = rep->element[1];
        size_t pn = strlen(r->prefix);
        for (size_t i = 0; i < ks->elements; i++) {
          const redisReply *k = ks->element[i];
          if (k->type != REDIS_REPLY_STRING || k->len <= pn + 2 ||
              k->len >= AIR__MAX_REDIS_KEY_BYTES)
            continue;
          char kind = k->str[pn];
          if (!known_kind(kind) || k->str[pn + 1] != ':') continue;
          air__redis_cmd *rd = air__redis_cmd_new(
              AIR__REDIS_OP_READ,
              kind == AIR__REDIS_KIND_TARGET  ? AIR__LUA_BREAKER
              : kind == AIR__REDIS_KIND_STYLE ? AIR__LUA_STYLE
                                              : AIR__LUA_STICKY,
              NULL, 0);
          if (rd == NULL) continue;
          snprintf(rd->keys[0], sizeof rd->keys[0], "%.*s", (int)k->len,
                   k->str);
          rd->nkeys = 1;
          if (kind == AIR__REDIS_KIND_TARGET) {
            snprintf(rd->keys[1], sizeof rd->keys[1], "%sl:", r->prefix);
            rd->nkeys = 2;
            air__redis_cmd_str(rd, "r");
            for (int j = 0; j < 4; j++) air__redis_cmd_str(rd, "");
            air__redis_cmd_str(rd, r->instance);
          } else if (kind == AIR__REDIS_KIND_STYLE) {
            air__redis_cmd_str(rd, "r");
            air__redis_cmd_str(rd, "0");
            air__redis_cmd_str(rd, "0");
            air__redis_cmd_str(rd, r->channel);
            air__redis_cmd_str(rd, r->instance);
          } else {
            air__redis_cmd_str(rd, "r");
            air__redis_cmd_str(rd, "");
            air__redis_cmd_str(rd, r->channel);
            air__redis_cmd_str(rd, r->instance);
            air__redis_cmd_str(rd, "1");
          }
          r->scan_reads++;
          r->queued++;
          pthread_mutex_unlock(&r->mu);
          int rc = send_cmd(r, rd);
          pthread_mutex_lock(&r->mu);
          if (rc != 0) {
            r->scan_reads--;
            r->queued--;
            air__redis_cmd_free(rd);
          }
        }
      } else {
        r->command_errors++;
        down = true;
      }
      break;
    case AIR__REDIS_OP_READ:
      if (r->scan_reads) r->scan_reads--;
      if (rep->type == REDIS_REPLY_STRING)
        take_message(r, rep->str, rep->len, true);
      else if (rep->type == REDIS_REPLY_ERROR)
        r->command_errors++;
      break;
  }
  if (down) request_drop(r);
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
  air__redis_op o = c->op;
  air__redis_cmd_free(c);
  if (down) {
    kick(r);
    return;
  }
  if (o == AIR__REDIS_OP_PING) scan_step(r);
  if ((o == AIR__REDIS_OP_SCAN || o == AIR__REDIS_OP_READ) && r->scanning)
    scan_step(r);
}

/* Sends c on the cmd connection (the Redis thread). 0 or -1. */
static int send_cmd(air__redis *r, air__redis_cmd *c) {
  if (r->cmd.ac == NULL) return -1;
  const char *argv[AIR__REDIS_MAX_ARGS + 8];
  size_t lens[AIR__REDIS_MAX_ARGS + 8];
  int n = 0;
  char nk[4];
  switch (c->op) {
    case AIR__REDIS_OP_AUTH:
      argv[n++] = "AUTH";
      for (int i = 0; i < c->argc; i++) argv[n++] = c->a[i];
      break;
    case AIR__REDIS_OP_SELECT:
      argv[n++] = "SELECT";
      argv[n++] = c->a[0];
      break;
    case AIR__REDIS_OP_PING:
      argv[n++] = "PING";
      break;
    case AIR__REDIS_OP_LOAD:
      argv[n++] = "SCRIPT";
      argv[n++] = "LOAD";
      argv[n++] = air__redis_lua(c->script);
      break;
    case AIR__REDIS_OP_SCAN:
      argv[n++] = "SCAN";
      argv[n++] = r->cursor;
      argv[n++] = "MATCH";
      argv[n++] = c->a[0];
      argv[n++] = "COUNT";
      argv[n++] = c->a[1];
      break;
    default:
      if (c->eval || r->sha[c->script][0] == 0) {
        c->eval = true;
        argv[n++] = "EVAL";
        argv[n++] = air__redis_lua(c->script);
      } else {
        argv[n++] = "EVALSHA";
        argv[n++] = r->sha[c->script];
      }
      snprintf(nk, sizeof nk, "%d", c->nkeys);
      argv[n++] = nk;
      for (int i = 0; i < c->nkeys; i++) argv[n++] = c->keys[i];
      for (int i = 0; i < c->argc; i++) argv[n++] = c->a[i];
      break;
  }
  for (int i = 0; i < n; i++) lens[i] = strlen(argv[i]);
  c->gen = r->gen;
  c->sent_at = air__redis_mono_ms();
  c->next = NULL;
  if (redisAsyncCommandArgv(r->cmd.ac, on_reply, c, n, argv, lens) != REDIS_OK)
    return -1;
  if (r->inflight_tail)
    r->inflight_tail->next = c;
  else
    r->inflight = c;
  r->inflight_tail = c;
  return 0;
}

/* Sends a handshake or sync command made here (counted in queued). */
static void send_own(air__redis *r, air__redis_cmd *c) {
  if (c == NULL) {
    request_drop(r);
    return;
  }
  pthread_mutex_lock(&r->mu);
  r->queued++;
  pthread_mutex_unlock(&r->mu);
  if (send_cmd(r, c) != 0) {
    pthread_mutex_lock(&r->mu);
    r->queued--;
    pthread_mutex_unlock(&r->mu);
    air__redis_cmd_free(c);
    request_drop(r);
  }
}

/*
 * After the handshake: push what changed while the link was down (the
 * merge scripts), then SCAN; the link counts as up (ops queue again) once
 * the subscriber is ready too, before the scan ends (changes published
 * meanwhile reach the mirror through the subscription).
 */
static void scan_step(air__redis *r) {
  if (!r->cmd.ready || !r->sub.ready) return;
  if (!r->scanning) {
    r->scanning = true;
    r->scan_more = true;
    snprintf(r->cursor, sizeof r->cursor, "0");
    pthread_mutex_lock(&r->mu);
    r->up = true;
    r->attempt = 0;
    uv_timer_stop(&r->deadline);
    /* Merge what this instance holds (changed meanwhile, or lost by a
     * restarted Redis); versions start over, the scan reads them anew.
     * Only shared entries (pinned) have a key: the walk is over them,
     * never over the local names callers chose. */
    uint64_t now = air__redis_mono_ms();
    while (air__redis_take_dirty(r) != NULL) continue;
    for (air__redis_entry *e = air__table_next_pinned(&r->table, NULL);
         e != NULL; e = air__table_next_pinned(&r->table, e)) {
      e->version = 0;
      e->wait.have = false;
      if (e->shared && (e->node.kind != AIR__REDIS_KIND_TARGET ||
                        e->br.failures || e->br.open))
        air__redis_push_merge(r, e, now);
    }
    pthread_mutex_unlock(&r->mu);
    pump(r);
  }
  if (r->scan_reads > 0) return;
  if (!r->scan_more) {
    sync_finished(r);
    return;
  }
  r->scan_more = false;
  air__redis_cmd *c = air__redis_cmd_new(AIR__REDIS_OP_SCAN, 0, NULL, 0);
  if (c) {
    snprintf(c->a[0], sizeof c->a[0], "%s*", r->prefix);
    snprintf(c->a[1], sizeof c->a[1], "%u", (unsigned)AIR__MAX_REDIS_SCAN_KEYS);
  }
  send_own(r, c);
}

static void sync_finished(air__redis *r) {
  r->scanning = false;
  pthread_mutex_lock(&r->mu);
  r->synced = true;
  r->sync_done_at = air__redis_mono_ms();
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

/* Sends what the ops queued (the Redis thread). */
static void pump(air__redis *r) {
  for (;;) {
    pthread_mutex_lock(&r->mu);
    air__redis_cmd *c = r->cmd.ready ? r->queue : NULL;
    if (c) {
      r->queue = c->next;
      if (!r->queue) r->queue_tail = NULL;
      c->next = NULL;
    }
    pthread_mutex_unlock(&r->mu);
    if (!c) return;
    if (send_cmd(r, c) != 0) {
      unsent(r, c);
      request_drop(r);
      return;
    }
  }
}

/* ---- the subscriber ------------------------------------------------------ */

static void on_sub(redisAsyncContext *ac, void *reply, void *data) {
  air__redis *r = data;
  const redisReply *rep = reply;
  (void)ac;
  if (rep == NULL) return;
  if (rep->type == REDIS_REPLY_ERROR) {
    pthread_mutex_lock(&r->mu);
    r->command_errors++;
    pthread_mutex_unlock(&r->mu);
    request_drop(r);
    return;
  }
  if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 3 ||
      rep->element[0]->type != REDIS_REPLY_STRING)
    return;
  const redisReply *kind = rep->element[0];
  if (kind->len == 9 && memcmp(kind->str, "subscribe", 9) == 0) {
    r->sub.ready = true;
    scan_step(r);
    return;
  }
  if (kind->len == 7 && memcmp(kind->str, "message", 7) == 0 &&
      rep->element[2]->type == REDIS_REPLY_STRING &&
      rep->element[2]->len < AIR__MAX_REDIS_MESSAGE_BYTES) {
    pthread_mutex_lock(&r->mu);
    take_message(r, rep->element[2]->str, rep->element[2]->len, false);
    pthread_mutex_unlock(&r->mu);
  }
}

static void on_sub_auth(redisAsyncContext *ac, void *reply, void *data) {
  air__redis *r = data;
  const redisReply *rep = reply;
  (void)ac;
  if (rep == NULL) return;
  if (rep->type == REDIS_REPLY_ERROR) request_drop(r);
}

/* ---- connecting ---------------------------------------------------------- */

static void on_connected(const redisAsyncContext *ac, int status) {
  air__redis *r = ac->data;
  air__redis_conn *cn = ac == r->cmd.ac   ? &r->cmd
                        : ac == r->sub.ac ? &r->sub
                                          : NULL;
  if (cn == NULL) return;
  if (status != REDIS_OK) {
    cn->ac = NULL; /* hiredis frees it */
    request_drop(r);
    return;
  }
  redisAsyncContext *c = cn->ac;
  if (cn == &r->sub) {
    const char *argv[3];
    size_t lens[3];
    int n = 0;
    if (r->password || r->url.has_password) {
      argv[n++] = "AUTH";
      if (r->url.user[0]) argv[n++] = r->url.user;
      argv[n++] = r->password ? r->password : r->url.password;
      for (int i = 0; i < n; i++) lens[i] = strlen(argv[i]);
      redisAsyncCommandArgv(c, on_sub_auth, r, n, argv, lens);
    }
    argv[0] = "SUBSCRIBE";
    argv[1] = r->channel;
    lens[0] = strlen(argv[0]);
    lens[1] = strlen(argv[1]);
    if (redisAsyncCommandArgv(c, on_sub, r, 2, argv, lens) != REDIS_OK)
      request_drop(r);
    return;
  }
  if (r->password || r->url.has_password) {
    air__redis_cmd *a = air__redis_cmd_new(AIR__REDIS_OP_AUTH, 0, NULL, 0);
    if (a && r->url.user[0]) air__redis_cmd_str(a, r->url.user);
    if (a) {
      const char *pw = r->password ? r->password : r->url.password;
      if (strlen(pw) >= sizeof a->a[0]) {
        air__redis_cmd_free(a);
        a = NULL;
      } else {
        air__redis_cmd_str(a, pw);
      }
    }
    send_own(r, a);
  }
  if (r->url.db != 0) {
    air__redis_cmd *s = air__redis_cmd_new(AIR__REDIS_OP_SELECT, 0, NULL, 0);
    if (s) air__redis_cmd_num(s, (long long)(r->url.db));
    send_own(r, s);
  }
  for (int i = 0; i < AIR__LUA_COUNT; i++)
    send_own(r, air__redis_cmd_new(AIR__REDIS_OP_LOAD, i, NULL, 0));
  send_own(r, air__redis_cmd_new(AIR__REDIS_OP_PING, 0, NULL, 0));
}

/* Redis closed a connection (not our redisAsyncFree: that one is no
 * longer ours when this runs); hiredis frees it after this. */
static void on_disconnected(const redisAsyncContext *ac, int status) {
  air__redis *r = ac->data;
  (void)status;
  bool ours = ac == r->cmd.ac || ac == r->sub.ac;
  if (ac == r->cmd.ac) r->cmd.ac = NULL;
  if (ac == r->sub.ac) r->sub.ac = NULL;
  if (ours) request_drop(r);
}

static int connect_one(air__redis *r, air__redis_conn *cn, const char *ip) {
  redisAsyncContext *ac = redisAsyncConnect(ip, (int)r->url.port);
  if (ac == NULL) return -1;
  if (ac->err) {
    redisAsyncFree(ac);
    return -1;
  }
  ac->data = r;
  if (redisLibuvAttach(ac, &r->loop) != REDIS_OK) {
    redisAsyncFree(ac);
    return -1;
  }
  cn->ac = ac;
  cn->ready = false;
  redisAsyncSetConnectCallback(ac, on_connected);
  redisAsyncSetDisconnectCallback(ac, on_disconnected);
  return 0;
}

static void on_resolved(uv_getaddrinfo_t *req, int status,
                        struct addrinfo *res) {
  air__redis *r = req->data;
  r->gai_busy = false;
  char ip[64] = "";
  for (struct addrinfo *a = res; status == 0 && a && !ip[0]; a = a->ai_next) {
    if (a->ai_family == AF_INET)
      uv_ip4_name((const struct sockaddr_in *)(const void *)a->ai_addr, ip,
                  sizeof ip);
    else if (a->ai_family == AF_INET6)
      uv_ip6_name((const struct sockaddr_in6 *)(const void *)a->ai_addr, ip,
                  sizeof ip);
  }
  uv_freeaddrinfo(res);
  if (r->stopping || !r->linking) return;
  if (!ip[0] || connect_one(r, &r->cmd, ip) != 0 ||
      connect_one(r, &r->sub, ip) != 0)
    request_drop(r);
}

static void on_deadline(uv_timer_t *t) {
  air__redis *r = t->data;
  if (!r->up && r->linking) {
    pthread_mutex_lock(&r->mu);
    r->command_errors++;
    pthread_mutex_unlock(&r->mu);
    request_drop(r);
  }
}

static void on_retry(uv_timer_t *t);

static void link_start(air__redis *r) {
  if (r->stopping || r->linking) return;
  if (r->gai_busy) {
    /* The cancelled lookup has not called back yet. */
    uv_timer_start(&r->retry, on_retry, BACKOFF_BASE_MS, 0);
    return;
  }
  r->linking = true;
  r->want_down = false;
  pthread_mutex_lock(&r->mu);
  if (r->links++ > 0) r->reconnects++;
  pthread_mutex_unlock(&r->mu);
  uv_timer_start(&r->deadline, on_deadline, r->connect_timeout_ms, 0);
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
  r->gai.data = r;
  if (uv_getaddrinfo(&r->loop, &r->gai, on_resolved, r->url.host, NULL,
                     &hints) == 0)
    r->gai_busy = true;
  else
    request_drop(r);
}

static void on_retry(uv_timer_t *t) {
  link_start(t->data);
}

/* Tears the link down (never inside a hiredis callback) and, unless
 * stopping, makes it again after a jittered backoff. */
static void link_drop(air__redis *r) {
  r->want_down = false;
  bool was = r->linking;
  r->linking = false;
  r->gen++;
  uv_timer_stop(&r->deadline);
  if (r->gai_busy) uv_cancel((uv_req_t *)&r->gai);
  pthread_mutex_lock(&r->mu);
  r->up = false;
  /* What waits unsent is merged after the next link. */
  while (r->queue) {
    air__redis_cmd *c = r->queue;
    r->queue = c->next;
    r->queued--;
    r->answered++;
    r->dropped++;
    entry_done(r, c, NULL, c->op == AIR__REDIS_OP_LEASE);
    if (c->op == AIR__REDIS_OP_LEASE && c->e) c->e->asking = false;
    air__redis_cmd_free(c);
  }
  r->queue_tail = NULL;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
  r->cmd.ready = r->sub.ready = false;
  r->scanning = false;
  r->scan_reads = 0;
  redisAsyncContext *a = r->cmd.ac, *b = r->sub.ac;
  r->cmd.ac = r->sub.ac = NULL;
  if (a) redisAsyncFree(a); /* answers every callback with NULL */
  if (b) redisAsyncFree(b);
  if (r->stopping || !was) return;
  uint64_t base = BACKOFF_BASE_MS << (r->attempt < 5 ? r->attempt : 5);
  if (base > BACKOFF_MAX_MS) base = BACKOFF_MAX_MS;
  if (r->attempt < 16) r->attempt++;
  uint64_t wait = base / 2 + air__redis_rand(r) % (base / 2 + 1);
  uv_timer_start(&r->retry, on_retry, wait, 0);
}

static void on_kick(uv_timer_t *t) {
  air__redis *r = t->data;
  if (r->want_down) link_drop(r);
  if (!r->linking && !r->stopping && !uv_is_active((uv_handle_t *)&r->retry))
    link_start(r);
  pump(r);
}

/* Every TICK_MS: a command unanswered past command_timeout_ms drops the
 * link; what was marked dirty while up (a full queue) is merged. */
static void on_tick(uv_timer_t *t) {
  air__redis *r = t->data;
  uint64_t now = air__redis_mono_ms();
  if (r->inflight && now - r->inflight->sent_at >= r->command_timeout_ms) {
    pthread_mutex_lock(&r->mu);
    r->command_errors++;
    pthread_mutex_unlock(&r->mu);
    link_drop(r);
    return;
  }
  pthread_mutex_lock(&r->mu);
  /* Renew the leases of the probes running here (their own list: the
   * tick never walks the table). */
  for (air__redis_entry *e = r->up ? r->leases : NULL; e != NULL;
       e = e->lease_next) {
    if (now - e->renewed < AIR__REDIS_LEASE_PX_MS / 3) continue;
    if (now >= e->renew_until) continue; /* its owner vanished: expire */
    e->renewed = now;
    air__redis_enqueue(r, air__redis_lease_cmd(r, e, 'x', e->br.lease,
                                               AIR__REDIS_LEASE_PX_MS, now));
  }
  bool flush = r->up && !r->scanning && r->n_dirty > 0 &&
               r->queued < AIR__MAX_REDIS_QUEUE / 2;
  /* Each dirty entry once at most: one that stays dirty (the queue filled
   * up) is back on the list for the next tick. */
  for (size_t left = flush ? r->n_dirty : 0;
       left > 0 && r->queued < AIR__MAX_REDIS_QUEUE; left--) {
    air__redis_entry *e = air__redis_take_dirty(r);
    if (e == NULL) break;
    if (e->shared) air__redis_push_merge(r, e, now);
  }
  pthread_mutex_unlock(&r->mu);
}

/* Closes the thread's handles: its loop then runs out. */
static void close_handles(air__redis *r) {
  uv_close((uv_handle_t *)&r->wake, NULL);
  uv_close((uv_handle_t *)&r->tick, NULL);
  uv_close((uv_handle_t *)&r->retry, NULL);
  uv_close((uv_handle_t *)&r->deadline, NULL);
  uv_close((uv_handle_t *)&r->kick, NULL);
}

static void on_wake(uv_async_t *a) {
  air__redis *r = a->data;
  pthread_mutex_lock(&r->mu);
  bool stop = r->stopping;
  pthread_mutex_unlock(&r->mu);
  if (!stop) {
    pump(r);
    return;
  }
  link_drop(r);
  close_handles(r);
}

static void *redis_thread(void *data) {
  air__redis *r = data;
  link_start(r);
  uv_run(&r->loop, UV_RUN_DEFAULT);
  return NULL;
}

int air__redis_link_start(air__redis *r) {
  if (uv_loop_init(&r->loop) != 0) return AIR_EIO;
  uv_async_init(&r->loop, &r->wake, on_wake);
  uv_timer_init(&r->loop, &r->tick);
  uv_timer_init(&r->loop, &r->retry);
  uv_timer_init(&r->loop, &r->deadline);
  uv_timer_init(&r->loop, &r->kick);
  r->wake.data = r->tick.data = r->retry.data = r->deadline.data =
      r->kick.data = r;
  uv_timer_start(&r->tick, on_tick, TICK_MS, TICK_MS);
  /* hiredis sends with write(2): a Redis that went away must be EPIPE on
   * this thread, never a SIGPIPE that kills the application. The thread
   * inherits a mask with SIGPIPE blocked (it never unblocks it, so one
   * left pending is never delivered). */
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  int rc = pthread_create(&r->thread, NULL, redis_thread, r) ? AIR_EIO : 0;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    r->thread = 0; /* none: air__redis_link_stop has nothing to stop */
    close_handles(r);
    uv_run(&r->loop, UV_RUN_DEFAULT);
    uv_loop_close(&r->loop);
  }
  return rc;
}

void air__redis_link_stop(air__redis *r) {
  if (!r->thread) return;
  pthread_mutex_lock(&r->mu);
  r->stopping = true;
  pthread_mutex_unlock(&r->mu);
  uv_async_send(&r->wake);
  pthread_join(r->thread, NULL);
  uv_loop_close(&r->loop);
}
