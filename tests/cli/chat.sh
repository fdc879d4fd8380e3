#!/usr/bin/env bash
# `airetry chat` end to end against `airetry mock` on 127.0.0.1: the answer on
# stdout (streamed and whole), a line per failed attempt and a summary on
# stderr, and the exit codes of docs/design.md §6 (0 answered, 1 upstream failure after
# all attempts with the attempt log, 2 usage or config error). Every wait is
# bounded. Usage: bash chat.sh /path/to/airetry
set -u
bin=${1:?usage: chat.sh /path/to/airetry}
. "$(dirname "$0")/../lib/cli.bash"
start_mock
port=${mock##*:}

cat >"$tmp/c.yaml" <<EOF
providers:
  - {name: mo, api: openai, base_url: "http://127.0.0.1:$port/v1"}
  - {name: ma, api: anthropic, base_url: "http://127.0.0.1:$port"}
routes:
  - name: smart
    targets: [mo/primary@503, ma/fallback]
    rules:
      - {on: [overloaded], action: switch}
  - name: doomed
    targets: [mo/d1@503, mo/d2@500]
    rules:
      - {on: [overloaded, server_error], action: switch}
EOF

# chat ARGS...: runs airetry chat with a time bound; sets $rc, $out, $err.
chat() {
  timeout 30 "$bin" chat --config "$tmp/c.yaml" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  out=$(cat "$tmp/out")
  err=$(cat "$tmp/err")
}

# Failover, whole answer: exit 0, the fallback's canonical answer once.
chat --model smart "Say hello"
[ "$rc" = 0 ] || fail "smart: exit $rc, want 0 ($err)"
[ "$out" = "[fallback] w1 w2 w3 w4 w5 w6 w7 w8" ] || fail "smart: stdout '$out'"
grep -q "attempt 1 mo/primary@503: overloaded (HTTP 503)" "$tmp/err" ||
  fail "smart: no line for the failed attempt: $err"
grep -q "2 attempts, answered by ma/fallback" "$tmp/err" ||
  fail "smart: no summary: $err"

# Streamed, with a system prompt: same answer, streamed, commit line.
chat --model smart --stream --system "Be brief." "Say hello"
[ "$rc" = 0 ] || fail "stream: exit $rc"
[ "$out" = "[fallback] w1 w2 w3 w4 w5 w6 w7 w8" ] || fail "stream: stdout '$out'"
grep -q "answering: ma/fallback (attempt 2)" "$tmp/err" || fail "stream: no commit line: $err"

# Every attempt fails: exit 1, the attempt log on stderr, nothing on stdout.
chat --model doomed "Say hello"
[ "$rc" = 1 ] || fail "doomed: exit $rc, want 1"
[ -z "$out" ] || fail "doomed: stdout '$out'"
grep -q "failed after 2 attempts" "$tmp/err" || fail "doomed: no failure line: $err"
grep -q "mo/d1@503 .*overloaded .*503" "$tmp/err" || fail "doomed: no log line for d1: $err"
grep -q "mo/d2@500 .*server_error .*500" "$tmp/err" || fail "doomed: no log line for d2: $err"

# Usage and config errors: exit 2.
chat "no model"
[ "$rc" = 2 ] || fail "usage: exit $rc, want 2"
timeout 10 "$bin" chat --config "$tmp/missing.yaml" --model smart hi >/dev/null 2>&1
rc=$?
[ "$rc" = 2 ] || fail "missing config: exit $rc, want 2"
printf 'routes: [1, 2]\n' >"$tmp/bad.yaml"
timeout 10 "$bin" chat --config "$tmp/bad.yaml" --model smart hi >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" = 2 ] || fail "bad config: exit $rc, want 2"
grep -q "bad.yaml:1:" "$tmp/err" || fail "bad config: no FILE:LINE: diagnostic: $(cat "$tmp/err")"
chat --model nosuch hi
[ "$rc" = 2 ] || fail "unknown model: exit $rc, want 2"

# The mock saw exactly the attempts made: smart 2 + 2, doomed 2.
log=$(timeout 5 curl -s "http://127.0.0.1:$port/__mock/log")
n=$(printf '%s' "$log" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["attempts"]))')
[ "$n" = 6 ] || fail "mock log: $n attempts, want 6"

if [ "$failures" -gt 0 ]; then
  echo "chat.sh: $failures failed" >&2
  exit 1
fi
echo "chat.sh: ok"
