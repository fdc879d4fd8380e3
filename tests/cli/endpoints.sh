#!/usr/bin/env bash
# POST /v1/embeddings and /v1/messages/count_tokens through `airetry serve`
# in front of `airetry mock`, all on 127.0.0.1 (docs/design.md §2.3 and 5):
# failover and retries, the skipped dialect, first_byte_ms and attempt_ms,
# limits.max_response_bytes, the budget, the breaker (recorded for
# embeddings, read but never recorded for count_tokens), error shapes and
# headers. Every count is read from the mock's /__mock/log; every wait is
# bounded. Usage: bash endpoints.sh /path/to/airetry
set -u
bin=${1:?usage: endpoints.sh /path/to/airetry}
. "$(dirname "$0")/../lib/cli.bash"

start_mock

cat >"$tmp/gw.yaml" <<EOF
providers:
  - {name: oa, api: openai, base_url: "$mock/v1"}
  - {name: an, api: anthropic, base_url: "$mock"}
defaults:
  breaker: {failures: 1, open_ms: 600000}
limits: {max_response_bytes: 1024}
routes:
  - {name: emb, targets: [oa/e1@503, oa/e2]}
  - {name: mixed, targets: [an/x1, oa/m2]}
  - {name: anth, targets: [an/x1, an/x2]}
  - name: brk
    targets: [oa/b1@500, oa/b2]
    rules: [{on: [server_error], action: switch}]
  - name: cbrk
    targets: [an/k1@500, an/k2]
    rules: [{on: [server_error], action: switch}]
  - name: chatopen
    targets: [an/o1@500, an/o2]
    rules: [{on: [server_error], action: switch}]
  - name: copen
    targets: [an/o1@500, an/o2]
    rules: [{on: [server_error], action: switch}]
  - name: silent
    targets: [oa/s1@silent=20000, oa/s2]
    timeouts: {first_byte_ms: 300}
  - name: stall
    targets: [oa/t1@stall=1, oa/t2]
    timeouts: {first_byte_ms: 20000, attempt_ms: 400}
  - {name: big, targets: [oa/g1, oa/g2]}
  - {name: rst, targets: [oa/r1@reset, oa/r2]}
  - name: bud
    targets: [oa/u1@500, oa/u2@500, oa/u3]
    budget: {max_total_attempts: 2}
    rules: [{on: [server_error], action: switch}]
  - name: cfail
    targets: [an/f1@429@ra=3]
    rules: [{on: [rate_limit], action: switch}]
  - {name: cnt, targets: [oa/n1, an/n2@503@k=1]}
EOF
"$bin" serve --config "$tmp/gw.yaml" --listen 127.0.0.1:0 >"$tmp/gw.out" 2>"$tmp/gw.err" &
pids+=($!)
gw=$(wait_url "$tmp/gw.out") || { echo "FAIL: the gateway did not start: $(cat "$tmp/gw.err")" >&2; exit 1; }

# post NAME PATH JSON: the answer's head in $tmp/NAME.h, body in $tmp/NAME.b.
post() {
  curl -s -m 20 -D "$tmp/$1.h" -o "$tmp/$1.b" "$gw$2" -H 'content-type: application/json' -d "$3"
}
emb() { post "$1" /v1/embeddings "{\"model\":\"$2\",\"input\":\"hello\",\"dimensions\":${3:-2}}"; }
cnt() { post "$1" /v1/messages/count_tokens "{\"model\":\"$2\",\"messages\":[{\"role\":\"user\",\"content\":\"hello world\"}]}"; }
# check NAME PYTHON: runs the assertions with h (lower-cased head fields),
# status, b (the parsed body), log (the mock's attempts so far) and n(model)
# (the mock's attempt count of a model).
check() {
  curl -s -m 5 "$mock/__mock/log" >"$tmp/log.json"
  python3 - "$tmp/$1.h" "$tmp/$1.b" "$tmp/log.json" <<EOF || fail "$1: $(head -c 600 "$tmp/$1.h" "$tmp/$1.b")"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
status = int(lines[0].split()[1])
h = {}
for l in lines[1:]:
    if ":" in l:
        k, v = l.split(":", 1)
        h[k.strip().lower()] = v.strip()
b = json.load(open(sys.argv[2]))
log = json.load(open(sys.argv[3]))["attempts"]
def n(model): return len([e for e in log if e["model"] == model])
$2
EOF
}

# Failover: 503 retried once, then the fallback answers; its body passes through.
emb emb emb
check emb '
assert status == 200, status
assert h["x-airetry-attempts"] == "3" and h["x-airetry-target"] == "oa/e2", h
assert h["x-request-id"].startswith("req_") and h["content-type"] == "application/json", h
assert b["object"] == "list" and b["model"] == "e2" and len(b["data"][0]["embedding"]) == 2, b
assert n("e1@503") == 2 and n("e2") == 1, log
assert all(e["endpoint"] == "embeddings" for e in log), log'

# A mixed route skips its Anthropic target; an Anthropic-only one is a 400.
emb mixed mixed
check mixed '
assert status == 200 and h["x-airetry-attempts"] == "1" and h["x-airetry-target"] == "oa/m2", (status, h)
assert n("x1") == 0, log'
emb anth anth
check anth '
assert status == 400 and h["x-should-retry"] == "false", (status, h)
e = b["error"]
assert e["type"] == "invalid_request_error" and e["code"] == "bad_request", b
assert "/v1/embeddings" in e["message"] and "openai" in e["message"] and "an/x1" in e["message"] and "an/x2" in e["message"], e
assert [a["outcome"] for a in e["attempts"]] == ["skipped", "skipped"], e
assert n("x1") == 0 and n("x2") == 0, log'

# The breaker records embeddings verdicts: the second request skips b1.
emb brk1 brk
emb brk2 brk
check brk2 '
assert status == 200 and h["x-airetry-attempts"] == "1" and h["x-airetry-target"] == "oa/b2", (status, h)
assert n("b1@500") == 1 and n("b2") == 2, log'

# count_tokens: never recorded (k1 is tried every time) ...
cnt cbrk1 cbrk
cnt cbrk2 cbrk
check cbrk2 '
assert status == 200 and b == {"input_tokens": 6}, (status, b)
assert h["x-airetry-attempts"] == "2" and h["x-airetry-target"] == "an/k2", h
assert h["request-id"].startswith("mock-"), h
assert n("k1@500") == 2 and n("k2") == 2, log
assert all(e["endpoint"] == "count_tokens" and e["api"] == "anthropic" for e in log if e["model"].startswith("k")), log'
# ... but read: after a chat failure opened o1, count_tokens goes to o2 first.
post chat /v1/messages '{"model":"chatopen","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}'
cnt copen copen
check copen '
assert status == 200 and h["x-airetry-attempts"] == "1" and h["x-airetry-target"] == "an/o2", (status, h)
assert n("o1@500") == 1, log'

# Deadlines: first_byte_ms on a silent upstream, attempt_ms on a stalled body.
start=$(date +%s%N)
emb silent silent
emb stall stall
elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$elapsed" -lt 10000 ] || fail "deadlines: the two requests took $elapsed ms"
check silent '
assert status == 200 and h["x-airetry-target"] == "oa/s2", (status, h)'
check stall '
assert status == 200 and h["x-airetry-target"] == "oa/t2" and h["x-airetry-attempts"] == "2", (status, h)
assert n("t1@stall=1") == 1, log'
grep '"route":"silent"' "$tmp/gw.err" | grep -q '"reason":"timeout.first_byte"' || fail "silent: no timeout.first_byte in the log line"
grep '"route":"stall"' "$tmp/gw.err" | grep -q '"reason":"timeout.attempt"' || fail "stall: no timeout.attempt in the log line"

# limits.max_response_bytes (1024 here): a bigger body is malformed.
emb big big 300
check big '
assert status == 502 and b["error"]["code"] == "malformed", (status, b)
assert "max_response_bytes" in b["error"]["message"], b
assert n("g1") == 2 and n("g2") == 1, log'

# A reset is a network failure: retried, then the fallback.
emb rst rst
check rst '
assert status == 200 and h["x-airetry-target"] == "oa/r2", (status, h)
assert n("r1@reset") == 2, log'

# The budget bounds the attempts.
emb bud bud
check bud '
assert status == 500 and b["error"]["code"] == "server_error" and len(b["error"]["attempts"]) == 2, (status, b)
assert n("u1@500") == 1 and n("u2@500") == 1 and n("u3") == 0, log'

# count_tokens errors are Anthropic-shaped, with request-id and retry-after.
cnt cfail cfail
check cfail '
assert status == 429 and b["type"] == "error" and b["error"]["type"] == "rate_limit_error", (status, b)
assert h["request-id"] == h["x-request-id"] and h["x-should-retry"] == "false", h
assert h["retry-after"] == "3" and b["attempts"][0]["target"] == "an/f1@429@ra=3", (h, b)'
cnt cnt cnt
check cnt '
assert status == 200 and b == {"input_tokens": 6} and h["x-airetry-attempts"] == "2", (status, b, h)
assert n("n1") == 0 and n("n2@503@k=1") == 2, log'
cnt cemb emb
check cemb '
assert status == 400 and b["type"] == "error" and "anthropic" in b["error"]["message"], (status, b)'

# Bad requests and unknown models, in each endpoint's dialect; nothing sent.
post bad1 /v1/embeddings '{"model":"emb"}'
check bad1 'assert status == 400 and "input" in b["error"]["message"], b'
post bad2 /v1/messages/count_tokens '[1]'
check bad2 'assert status == 400 and b["type"] == "error", b'
post nf1 /v1/embeddings '{"model":"nope","input":"x"}'
check nf1 'assert status == 404 and b["error"]["code"] == "not_found", b'
curl -s -m 5 -o /dev/null -w '%{http_code}' "$gw/v1/embeddings" | grep -q '^405$' || fail "GET /v1/embeddings: want 405"

grep -q '"endpoint":"/v1/embeddings"' "$tmp/gw.err" || fail "no log line names /v1/embeddings"
grep -q '"endpoint":"/v1/messages/count_tokens"' "$tmp/gw.err" || fail "no log line names count_tokens"

if [ "$failures" -ne 0 ]; then
  echo "endpoints.sh: $failures failure(s)" >&2
  exit 1
fi
echo "endpoints.sh: ok"
