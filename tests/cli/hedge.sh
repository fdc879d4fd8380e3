#!/usr/bin/env bash
# Hedged first content (docs/design.md §3.6) through `airetry serve` in front of
# `airetry mock`, all on 127.0.0.1: a primary slow to its first token
# (slow=5000) is hedged after 300 ms; the fallback's answer reaches the
# caller (streamed and whole, both dialects), the primary's connection is
# closed within 100 ms of the fallback's arrival (the mock's log), the log
# line marks the racers and /metrics counts the hedges. `airetry check`
# warns about a one-target route without same_target. Every wait is
# bounded. Usage: bash hedge.sh /path/to/airetry
set -u
bin=${1:?usage: hedge.sh /path/to/airetry}
. "$(dirname "$0")/../lib/cli.bash"
start_mock

cat >"$tmp/gw.yaml" <<EOF
providers:
  - {name: oa, api: openai, base_url: "$mock/v1"}
  - {name: an, api: anthropic, base_url: "$mock"}
routes:
  - name: hedged
    targets: [oa/h@slow=5000, an/f]
    hedge: {after_ms: 300}
  - name: lone
    targets: [oa/l]
    hedge: {after_ms: 300}
EOF
"$bin" check --config "$tmp/gw.yaml" >"$tmp/check.out" 2>"$tmp/check.err" ||
  fail "check: $(cat "$tmp/check.err")"
grep -q 'routes\[1\]: hedge is on but the route has one target' "$tmp/check.err" ||
  fail "check: no warning for the one-target route: $(cat "$tmp/check.err")"
grep -q 'max_prompt_bytes: 262144' "$tmp/check.out" || fail "check: hedge: not printed"

"$bin" serve --config "$tmp/gw.yaml" --listen 127.0.0.1:0 >"$tmp/gw.out" 2>"$tmp/gw.err" &
pids+=($!)
gw=$(wait_url "$tmp/gw.out") || { echo "FAIL: the gateway did not start: $(cat "$tmp/gw.err")" >&2; exit 1; }

# ask NAME PATH STREAM: one request; head in $tmp/NAME.h, body in $tmp/NAME.b,
# the time to the last byte in $tmp/NAME.t.
ask() {
  curl -s -m 20 -N -D "$tmp/$1.h" -o "$tmp/$1.b" -w '%{time_total}' "$gw$2" \
    -H 'content-type: application/json' -H 'anthropic-version: 2023-06-01' \
    -d "{\"model\":\"hedged\",\"max_tokens\":50,\"stream\":$3,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}" \
    >"$tmp/$1.t"
}

n=0
for c in "oa_stream /v1/chat/completions true" "oa_whole /v1/chat/completions false" \
         "an_stream /v1/messages true" "an_whole /v1/messages false"; do
  set -- $c
  curl -s -m 5 -X POST "$mock/__mock/reset" >/dev/null
  ask "$1" "$2" "$3"
  n=$((n + 1))
  wait_lines "$tmp/gw.err" "$n" || fail "$1: no log line"
  # The mock's log: both ended (the loser hung up) within 3 s.
  for _ in $(seq 1 60); do
    curl -s -m 5 "$mock/__mock/log" >"$tmp/$1.log"
    python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["attempts"]; sys.exit(0 if len(a)==2 and all(e["end_ms"] is not None for e in a) else 1)' "$tmp/$1.log" && break
    sleep 0.05
  done
  grep '^{' "$tmp/gw.err" | tail -n 1 >"$tmp/$1.line"
  python3 - "$tmp/$1.h" "$tmp/$1.b" "$tmp/$1.log" "$tmp/$1.line" "$tmp/$1.t" "$3" <<'EOF' || fail "$1: $(cat "$tmp/$1.h" "$tmp/$1.b" "$tmp/$1.log" "$tmp/$1.line")"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
status = int(lines[0].split()[1])
h = {}
for l in lines[1:]:
    if ":" in l:
        k, v = l.split(":", 1)
        h[k.strip().lower()] = v.strip()
body = open(sys.argv[2]).read()
log = json.load(open(sys.argv[3]))["attempts"]
line = json.loads(open(sys.argv[4]).read())
took = float(open(sys.argv[5]).read())
assert status == 200, status
assert h["x-airetry-target"] == "an/f" and h["x-airetry-attempts"] == "2", h
# the fallback's answer, after about after_ms, long before the primary's 5 s
assert "[f]" in body and "h@slow" not in body, body
assert took < 3.0, took
# the mock: the hedge came 300 ms after the primary; the primary's
# connection closed within 100 ms of the hedge's arrival (it sends its
# first content at once)
p, f = log
assert p["model"] == "h@slow=5000" and f["model"] == "f", log
assert 240 <= f["t_ms"] - p["t_ms"] <= 700, log
assert p["hung_up"] and 0 <= p["hung_up_ms"] - f["t_ms"] <= 100, log
assert not f["hung_up"], log
# the log line marks the racers
a = line["attempts"]
assert line["route"] == "hedged" and line["outcome"] == "ok", line
assert a[0]["target"] == "oa/h@slow=5000" and a[0]["outcome"] == "hedge_lost" and "reason" not in a[0], a
assert a[1]["target"] == "an/f" and a[1]["hedge"] is True and a[1]["reason"] == "ok", a
EOF
done

curl -s -m 5 "$gw/metrics" >"$tmp/metrics"
grep -q '^airetry_hedges_total{route="hedged",outcome="won"} 4$' "$tmp/metrics" ||
  fail "metrics: $(grep hedges "$tmp/metrics")"
grep -q 'airetry_attempts_total{target="oa/h@slow=5000",reason="ok"}' "$tmp/metrics" &&
  fail "metrics: a lost racer counted as an answer"

[ "$failures" -eq 0 ] || { echo "hedge.sh: $failures failure(s)" >&2; exit 1; }
echo "hedge.sh: ok"
