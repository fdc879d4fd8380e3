/*
 * The scripts (redis_lua.h). Breaker ops: 's' success, 'f' failure (n1 the
 * threshold, n2 open_ms), 'c' cool (n2 cool_ms), 'm' merge a record kept
 * through an outage (n1 failures, n2 ms left open or -1 closed: stricter
 * wins, the later open-until wins), 'r' read. A record lives its open-until
 * plus max(open_ms, 60 s): its expiry never reads as closed while it
 * should be half-open. A failure or success that carries the probe lease
 * value deletes the lease when it is still that value. Lease ops: 'a' SET
 * NX PX (0: got it, else the PTTL of the holder's; a lease this instance
 * holds is taken over: the instance's mirror decided its owner vanished),
 * 'x' renew (PEXPIRE) and 'd' delete, each only while still ours. Sticky ops:
 * 'set' (a new target starts a new window; the same one keeps it), 'clr', 'use'
 * (counts a request when still sticky to target), 'm' merge (taken only when
 * Redis has no choice), 'r' read. Style ops (a learned continuation style,
 * the key expiring with it): 'set' (style for ttl_ms), 'm' merge (taken when
 * Redis has none, or the same style for longer), 'r' read.
 */
#include "redis_lua.h"

#define LUA_NOW                    \
  "local t = redis.call('TIME')\n" \
  "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"

static const char breaker_lua[] = LUA_NOW
    "local h = redis.call('HMGET', KEYS[1], 'f', 'o', 'u', 'v')\n"
    "local op = ARGV[1]\n"
    "if op == 'r' and not h[4] then return false end\n"
    "local f = tonumber(h[1]) or 0\n"
    "local o = tonumber(h[2]) or 0\n"
    "local u = tonumber(h[3]) or 0\n"
    "local v = tonumber(h[4]) or 0\n"
    "local n1 = tonumber(ARGV[2]) or 0\n"
    "local n2 = tonumber(ARGV[3]) or 0\n"
    "local life = 60000\n"
    "local changed = true\n"
    "local probe = false\n"
    "if ARGV[4] ~= '' and redis.call('GET', KEYS[2]) == ARGV[4] then\n"
    "  redis.call('DEL', KEYS[2])\n"
    "  probe = true\n"
    "end\n"
    "local function open_for(ms)\n"
    "  local nu = now + ms\n"
    "  if o == 0 or nu > u then u = nu end\n"
    "  o = 1\n"
    "  if ms > life then life = ms end\n"
    "end\n"
    "if op == 's' then\n"
    "  changed = f ~= 0 or probe or (o == 1 and now >= u)\n"
    "  f = 0\n"
    "  if probe or (o == 1 and now >= u) then o = 0 end\n"
    "elseif op == 'f' then\n"
    "  f = f + 1\n"
    "  if f >= n1 then open_for(n2) end\n"
    "elseif op == 'c' then\n"
    "  open_for(n2)\n"
    "elseif op == 'm' then\n"
    "  changed = false\n"
    "  if n1 > f then f = n1 changed = true end\n"
    "  if n2 >= 0 and (o == 0 or now + n2 > u) then\n"
    "    open_for(n2)\n"
    "    changed = true\n"
    "  end\n"
    "elseif op ~= 'r' then\n"
    "  return redis.error_reply('ERR airetry: unknown breaker op')\n"
    "end\n"
    "if op == 'r' then changed = false end\n"
    "if changed or v == 0 then\n"
    "  v = v + 1\n"
    "  redis.call('HSET', KEYS[1], 'f', f, 'o', o, 'u', u, 'v', v)\n"
    "  local left = 0\n"
    "  if o == 1 and u > now then left = u - now end\n"
    "  redis.call('PEXPIRE', KEYS[1], left + life)\n"
    "end\n"
    "local left = 0\n"
    "if o == 1 and u > now then left = u - now end\n"
    "local msg = table.concat({'b', ARGV[6], v, f, o, left, KEYS[1]}, '\\n')\n"
    "if changed then redis.call('PUBLISH', ARGV[5], msg) end\n"
    "return msg\n";

static const char lease_lua[] =
    "if ARGV[1] == 'a' then\n"
    "  if redis.call('SET', KEYS[1], ARGV[2], 'NX', 'PX', ARGV[3]) then\n"
    "    return 0\n"
    "  end\n"
    "  local held = redis.call('GET', KEYS[1])\n"
    "  if held and string.sub(held, 1, #ARGV[4] + 1) == ARGV[4] .. ':' then\n"
    "    redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])\n"
    "    return 0\n"
    "  end\n"
    "  local p = redis.call('PTTL', KEYS[1])\n"
    "  if p < 1 then p = 1 end\n"
    "  return p\n"
    "end\n"
    "if redis.call('GET', KEYS[1]) == ARGV[2] then\n"
    "  if ARGV[1] == 'x' then\n"
    "    redis.call('PEXPIRE', KEYS[1], ARGV[3])\n"
    "  else\n"
    "    redis.call('DEL', KEYS[1])\n"
    "  end\n"
    "end\n"
    "return 0\n";

static const char sticky_lua[] = LUA_NOW
    "local h = redis.call('HMGET', KEYS[1], 't', 's', 'n', 'v')\n"
    "local op = ARGV[1]\n"
    "if op == 'r' and not h[4] then return false end\n"
    "local tg = h[1] or ''\n"
    "local s = tonumber(h[2]) or now\n"
    "local n = tonumber(h[3]) or 0\n"
    "local v = tonumber(h[4]) or 0\n"
    "local changed = false\n"
    "if op == 'set' then\n"
    "  if tg ~= ARGV[2] then tg = ARGV[2] s = now n = 0 changed = true end\n"
    "elseif op == 'clr' then\n"
    "  if tg ~= '' then tg = '' n = 0 changed = true end\n"
    "elseif op == 'use' then\n"
    "  if tg == ARGV[2] then n = n + 1 changed = true end\n"
    "elseif op == 'm' then\n"
    "  if tg == '' and ARGV[2] ~= '' then\n"
    "    tg = ARGV[2]\n"
    "    n = tonumber(ARGV[6]) or 0\n"
    "    s = now - (tonumber(ARGV[7]) or 0)\n"
    "    changed = true\n"
    "  end\n"
    "elseif op ~= 'r' then\n"
    "  return redis.error_reply('ERR airetry: unknown sticky op')\n"
    "end\n"
    "if changed or v == 0 then\n"
    "  v = v + 1\n"
    "  redis.call('HSET', KEYS[1], 't', tg, 's', s, 'n', n, 'v', v)\n"
    "  redis.call('PEXPIRE', KEYS[1], ARGV[5])\n"
    "end\n"
    "local on = 0\n"
    "if tg ~= '' then on = 1 end\n"
    "local age = now - s\n"
    "if age < 0 then age = 0 end\n"
    "local msg = table.concat({'s', ARGV[4], v, n, on, age, tg, KEYS[1]}, "
    "'\\n')\n"
    "if changed then redis.call('PUBLISH', ARGV[3], msg) end\n"
    "return msg\n";

static const char style_lua[] =
    "local h = redis.call('HMGET', KEYS[1], 'y', 'v')\n"
    "local op = ARGV[1]\n"
    "local y = tonumber(h[1]) or 0\n"
    "local v = tonumber(h[2]) or 0\n"
    "local left = redis.call('PTTL', KEYS[1])\n"
    "if left < 0 then left = 0 end\n"
    "if op == 'r' and not h[2] then return false end\n"
    "local ny = tonumber(ARGV[2]) or 0\n"
    "local ttl = tonumber(ARGV[3]) or 0\n"
    "local changed = false\n"
    "if op == 'set' then\n"
    "  changed = true\n"
    "elseif op == 'm' then\n"
    "  changed = ttl > 0 and (not h[2] or y == 0 or (ny == y and ttl > left))\n"
    "elseif op ~= 'r' then\n"
    "  return redis.error_reply('ERR airetry: unknown style op')\n"
    "end\n"
    "if changed then\n"
    "  v = v + 1\n"
    "  y = ny\n"
    "  left = ttl\n"
    "  if left < 1 then left = 1 end\n"
    "  redis.call('HSET', KEYS[1], 'y', y, 'v', v)\n"
    "  redis.call('PEXPIRE', KEYS[1], left)\n"
    "end\n"
    "local msg = table.concat({'c', ARGV[5], v, y, 1, left, KEYS[1]}, '\\n')\n"
    "if changed then redis.call('PUBLISH', ARGV[4], msg) end\n"
    "return msg\n";

const char *air__redis_lua(int which) {
  switch (which) {
    case AIR__LUA_BREAKER:
      return breaker_lua;
    case AIR__LUA_LEASE:
      return lease_lua;
    case AIR__LUA_STICKY:
      return sticky_lua;
    case AIR__LUA_STYLE:
      return style_lua;
    default:
      return "";
  }
}
