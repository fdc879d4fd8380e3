/*
 * The Lua scripts of the Redis backend (docs/design.md §3.1): every transition
 * of a shared key is one script, so it is atomic on the server. Time inside a
 * script is only Redis' own TIME; what a script returns and publishes holds
 * durations (the milliseconds left open, a sticky choice's age), never a
 * clock value. Loaded with SCRIPT LOAD on every connect and run with
 * EVALSHA, falling back to EVAL on NOSCRIPT.
 *
 * A change message (returned, and published on PREFIX "changes" by the
 * writing scripts) is fields joined by '\n', the key last:
 *   breaker: b INSTANCE VERSION FAILURES OPEN(0|1) LEFT_MS KEY
 *   sticky:  s INSTANCE VERSION USED STICKY(0|1) AGE_MS TARGET KEY
 *   style:   c INSTANCE VERSION STYLE 1 LEFT_MS KEY   (a learned
 *            continuation style, docs/design.md §3.5: air_cont_style's value
 * and the milliseconds it is still valid)
 */
#ifndef AIR__STATE_REDIS_LUA_H
#define AIR__STATE_REDIS_LUA_H

enum {
  AIR__LUA_BREAKER, /* KEYS: breaker, lease; ARGV: op, n1, n2, lease value,
                       channel, instance */
  AIR__LUA_LEASE,   /* KEYS: lease; ARGV: op, value, px, instance */
  AIR__LUA_STICKY,  /* KEYS: sticky; ARGV: op, target, channel, instance,
                       ttl_ms, used, age_ms */
  AIR__LUA_STYLE,   /* KEYS: style; ARGV: op, style, ttl_ms, channel,
                       instance */
  AIR__LUA_COUNT
};

/* The script text of AIR__LUA_*; static. */
const char *air__redis_lua(int which);

#endif
