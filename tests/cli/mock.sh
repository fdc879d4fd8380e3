#!/usr/bin/env bash
# `airetry mock` (docs/mock.md) end to end with curl, on 127.0.0.1 only:
# healthy OpenAI and Anthropic answers (stream and not), faults by model
# name and by script, the log and /__mock/reset, script diagnostics, and a
# clean, prompt stop on SIGTERM. Every wait is bounded.
# Usage: bash mock.sh /path/to/airetry
set -u
bin=${1:?usage: mock.sh /path/to/airetry}
. "$(dirname "$0")/../lib/cli.bash"

# start NAME ARGS...: starts a mock on an ephemeral port; sets $url, $mock_pid.
start() {
  local name=$1
  shift
  "$bin" mock --listen 127.0.0.1:0 "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  mock_pid=$!
  pids+=("$mock_pid")
  url=
  for _ in $(seq 1 100); do
    local line
    line=$(head -n 1 "$tmp/$name.out" 2>/dev/null)
    if [[ $line =~ ^listening\ on\ (http://127\.0\.0\.1:[0-9]+)$ ]]; then
      url=${BASH_REMATCH[1]}
      return 0
    fi
    kill -0 "$mock_pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "FAIL: $name: the mock did not start: $(cat "$tmp/$name.err")" >&2
  exit 1
}

# stop: SIGTERM, and the mock must exit 0 within 3 s.
stop() {
  kill -TERM "$mock_pid"
  for _ in $(seq 1 60); do
    kill -0 "$mock_pid" 2>/dev/null || break
    sleep 0.05
  done
  if kill -0 "$mock_pid" 2>/dev/null; then
    fail "the mock did not stop within 3 s of SIGTERM"
    kill -KILL "$mock_pid"
  fi
  wait "$mock_pid"
  local rc=$?
  [ "$rc" -eq 0 ] || fail "the mock exited $rc after SIGTERM, want 0"
}

body() { # body MODEL STREAM [EXTRA_MESSAGES_JSON]
  printf '{"model":"%s","max_tokens":64,"stream":%s,"messages":[{"role":"user","content":"hi"}%s]}' \
    "$1" "$2" "${3:-}"
}
oa() { curl -s -m 5 "$url/v1/chat/completions" -H 'content-type: application/json' -d "$(body "$@")"; }
an() { curl -s -m 5 "$url/v1/messages" -H 'content-type: application/json' -d "$(body "$@")"; }

# py CODE: runs python3 with stdin; prints what the code prints.
py() { python3 -c "$1"; }

# ---- usage ----------------------------------------------------------------
"$bin" mock --help >"$tmp/help.out" 2>&1 || fail "--help: non-zero exit"
for w in '@k=K' 'cut_after' '@flap=A-B' 'retry_after'; do
  grep -q -- "$w" "$tmp/help.out" || fail "--help lacks '$w'"
done
"$bin" mock --listen nonsense >/dev/null 2>&1
[ $? -eq 2 ] || fail "--listen nonsense: want exit 2"
"$bin" mock --bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "--bogus: want exit 2"

# ---- a bad script: FILE:LINE:COL: message, exit 2 --------------------------
printf 'models:\n  primary:\n    attempts:\n      - {status: 429, retyr_after: 1}\n' >"$tmp/bad.yaml"
timeout 5 "$bin" mock --listen 127.0.0.1:0 --script "$tmp/bad.yaml" >"$tmp/bad.out" 2>"$tmp/bad.err"
rc=$?
[ "$rc" -eq 2 ] || fail "bad script: exit $rc, want 2"
grep -q "^$tmp/bad.yaml:4:23: models.primary.attempts\[0\].retyr_after: unknown key$" "$tmp/bad.err" ||
  fail "bad script: diagnostic: $(cat "$tmp/bad.err")"
[ -s "$tmp/bad.out" ] && fail "bad script: something on stdout"

# ---- no script: healthy answers and the model-name convention -------------
start plain

[ "$(curl -s -m 5 "$url/healthz")" = ok ] || fail "healthz"

oa gpt-4o true >"$tmp/s.txt"
py '
import json, sys
text, events, done, usage = "", 0, False, None
for line in sys.stdin:
    line = line.rstrip("\n")
    if not line.startswith("data: "): continue
    d = line[6:]
    if d == "[DONE]": done = True; continue
    j = json.loads(d)
    assert j["object"] == "chat.completion.chunk" and j["model"] == "gpt-4o", j
    assert j["id"].startswith("mock-"), j
    for c in j["choices"]:
        if c["delta"].get("content"): text += c["delta"]["content"]; events += 1
        if c["finish_reason"]: finish = c["finish_reason"]
assert text == "[gpt-4o] w1 w2 w3 w4 w5 w6 w7 w8", text
assert events == 9 and finish == "stop" and done, (events, finish, done)
' <"$tmp/s.txt" || fail "openai stream: $(head -c 400 "$tmp/s.txt")"

oa gpt-4o false | py '
import json, sys
j = json.load(sys.stdin)
m = j["choices"][0]
assert j["object"] == "chat.completion" and j["model"] == "gpt-4o", j
assert m["message"]["content"] == "[gpt-4o] w1 w2 w3 w4 w5 w6 w7 w8", m
assert m["finish_reason"] == "stop" and j["usage"]["completion_tokens"] == 9, j
' || fail "openai non-stream"

an claude-x@tokens=2 true | py '
import json, sys
ev, text = [], ""
for line in sys.stdin:
    if line.startswith("event: "): ev.append(line[7:].strip())
    elif line.startswith("data: "):
        j = json.loads(line[6:])
        assert j["type"] == ev[-1], (j, ev)
        if j["type"] == "content_block_delta": text += j["delta"]["text"]
        if j["type"] == "message_delta": stop = j["delta"]["stop_reason"]
assert ev[0] == "message_start" and ev[-1] == "message_stop", ev
assert text == "[claude-x@tokens=2] w1 w2" and stop == "end_turn", (text, stop)
' || fail "anthropic stream"

# 429 with retry-after twice (k=2), then an answer.
for i in 1 2; do
  curl -s -m 5 -D "$tmp/h$i" -o "$tmp/b$i" "$url/v1/chat/completions" -d "$(body 'gpt-4o@429@ra=1@k=2' false)"
  grep -qi '^HTTP/1.1 429' "$tmp/h$i" || fail "429 #$i: $(head -1 "$tmp/h$i")"
  grep -qi '^retry-after: 1' "$tmp/h$i" || fail "429 #$i: no retry-after"
  py 'import json,sys; assert json.load(sys.stdin)["error"]["type"] == "rate_limit_error"' <"$tmp/b$i" ||
    fail "429 #$i: body $(cat "$tmp/b$i")"
done
oa 'gpt-4o@429@ra=1@k=2' false | grep -q '"finish_reason":"stop"' || fail "429 k=2: third attempt not answered"

# Reset before any header: curl 56 (connection reset by peer).
oa 'm@reset' true >/dev/null
rc=$?
[ "$rc" -eq 56 ] || fail "reset: curl exit $rc, want 56"

# Cut after 2 content events: curl 18 (transfer closed), 2 contents seen.
oa 'm@cut=2' true >"$tmp/cut.txt"
rc=$?
[ "$rc" -eq 18 ] || fail "cut: curl exit $rc, want 18"
[ "$(grep -c '"content":"[^"]' "$tmp/cut.txt")" -eq 2 ] || fail "cut: $(cat "$tmp/cut.txt")"
grep -q 'DONE' "$tmp/cut.txt" && fail "cut: [DONE] sent"

# Slow first content: the head and role chunk at once, content after 300 ms.
t0=$(date +%s%N)
oa 'm@slow=300@tokens=1' true | grep -q '"content":"\[m@slow' || fail "slow: no content"
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$ms" -ge 290 ] || fail "slow: answered in $ms ms, want >= 300"

# A hanging request the client gives up on: hung_up in the log.
curl -s -m 0.5 "$url/v1/messages" -d "$(body 'h@hang' true)" >/dev/null
rc=$?
[ "$rc" -eq 28 ] || fail "hang: curl exit $rc, want 28 (timeout)"
sleep 0.2

curl -s -m 5 "$url/__mock/log" | py '
import json, sys
a = json.load(sys.stdin)["attempts"]
by = {}
for e in a: by.setdefault(e["model"], []).append(e)
for e in a:
    for k in ("t_ms","model","attempt","api","stream","fault","status","hung_up","hung_up_ms","end_ms"):
        assert k in e, (k, e)
g = by["gpt-4o"]
assert [e["attempt"] for e in g] == [1, 2] and g[0]["stream"] and not g[1]["stream"], g
assert g[0]["fault"] == "ok" and g[0]["status"] == 200 and g[0]["end_ms"] >= g[0]["t_ms"], g
r = by["gpt-4o@429@ra=1@k=2"]
assert [(e["attempt"], e["fault"], e["status"]) for e in r] == [(1, "status=429", 429), (2, "status=429", 429), (3, "ok", 200)], r
assert by["claude-x@tokens=2"][0]["api"] == "anthropic", by
x = by["m@reset"][0]
assert x["fault"] == "reset" and x["status"] == 0 and not x["hung_up"], x
x = by["m@cut=2"][0]
assert x["fault"] == "cut_after=2" and x["status"] == 200 and x["end_ms"] is not None, x
x = by["h@hang"][0]
assert x["fault"] == "hang" and x["status"] == 0 and x["hung_up"], x
assert x["hung_up_ms"] - x["t_ms"] >= 400 and x["end_ms"] == x["hung_up_ms"], x
ts = [e["t_ms"] for e in a]
assert ts == sorted(ts), ts
' || fail "log: $(curl -s -m 5 "$url/__mock/log" | head -c 1500)"

# Reset: 204, an empty log, attempt numbers start again.
[ "$(curl -s -m 5 -o /dev/null -w '%{http_code}' -X POST "$url/__mock/reset")" = 204 ] || fail "reset: not 204"
[ "$(curl -s -m 5 "$url/__mock/log" | py 'import json,sys; print(len(json.load(sys.stdin)["attempts"]))')" = 0 ] ||
  fail "reset: log not empty"
oa 'gpt-4o@429@ra=1@k=2' false | grep -q rate_limit_error || fail "reset: attempt counter not reset"

# Bad requests: 400 in the dialect, not logged; unknown paths 404.
[ "$(curl -s -m 5 -o /dev/null -w '%{http_code}' "$url/v1/messages" -d '{"model":1}')" = 400 ] || fail "bad body: not 400"
[ "$(curl -s -m 5 -o /dev/null -w '%{http_code}' "$url/v2/nothing")" = 404 ] || fail "unknown path: not 404"
[ "$(curl -s -m 5 -o /dev/null -w '%{http_code}' "$url/v1/chat/completions")" = 405 ] || fail "GET completions: not 405"
oa 'm@nonsense' false | grep -q "unknown token '@nonsense'" || fail "bad model token: no 400 naming it"

# SIGTERM with a stalled stream held open: exit 0 promptly.
oa 'm@stall=1' true >"$tmp/stall.txt" &
cpid=$!
sleep 0.3
stop
wait "$cpid"
rc=$?
[ "$rc" -eq 18 ] || fail "stall + stop: curl exit $rc, want 18"
grep -q '"content":"\[m@stall' "$tmp/stall.txt" || fail "stall: first content missing"
[ -s "$tmp/plain.err" ] && fail "stderr not empty: $(head -c 500 "$tmp/plain.err")"

# ---- a script ----------------------------------------------------------------
cat >"$tmp/s.yaml" <<'EOF'
defaults: {tokens: 3}
models:
  primary:
    attempts:
      - {status: 529}
      - {status: 429, retry_after_ms: 250, headers: {x-mock: yes}}
      - {refusal: true}
    then: {answer: "all good"}
  quota: {status: 429, code: insufficient_quota}
  flaky:
    flap: {from_ms: 0, to_ms: 60000, fault: {overload_after: 1}}
  nopre: {reject_prefill: true}
EOF
start script --script "$tmp/s.yaml"
an primary false | grep -q '"type":"overloaded_error"' || fail "script: attempt 1 not 529"
curl -s -m 5 -D "$tmp/h" -o /dev/null "$url/v1/messages" -d "$(body primary false)"
grep -qi '^retry-after-ms: 250' "$tmp/h" || fail "script: no retry-after-ms"
grep -qi '^x-mock: yes' "$tmp/h" || fail "script: no extra header"
an primary false | grep -q "I'm sorry, but I cannot assist" || fail "script: no refusal"
an primary false | grep -q '"text":"all good"' || fail "script: then answer"
oa quota false | grep -q '"code":"insufficient_quota"' || fail "script: code"
an flaky true >"$tmp/flaky.txt"
rc=$?
[ "$rc" -eq 0 ] || fail "flap overload: curl exit $rc, want 0 (the response ends after the event)"
grep -q '^event: error$' "$tmp/flaky.txt" && grep -q 'overloaded_error' "$tmp/flaky.txt" ||
  fail "flap overload: no error event: $(cat "$tmp/flaky.txt")"
grep -q 'message_stop\|message_delta' "$tmp/flaky.txt" && fail "flap overload: finished after the error"
# Prefill: the remainder only; refused where reject_prefill.
oa fallback false ',{"role":"assistant","content":"[fallback] w1"}' |
  grep -q '"content":" w2 w3"' || fail "prefill: not the remainder"
[ "$(curl -s -m 5 -o "$tmp/np" -w '%{http_code}' "$url/v1/chat/completions" \
  -d "$(body nopre false ',{"role":"assistant","content":"[nopre]"}')")" = 400 ] ||
  fail "reject_prefill: not 400"
grep -q 'This model does not support assistant message prefill. The conversation must end with a user message.' "$tmp/np" ||
  fail "reject_prefill: message: $(cat "$tmp/np")"
stop

# ---- answer shapes: tool calls, JSON, reasoning, native refusals -------------
cat >"$tmp/shapes.yaml" <<'EOF'
models:
  tooly: {tool_calls: 1, reasoning: 1}
  jsonly: {json: true, tokens: 2}
  refuser: {refusal: native}
EOF
start shapes --script "$tmp/shapes.yaml"

# OpenAI, two parallel calls streamed: interleaved indices, arguments in
# pieces that join into JSON, finish tool_calls; the whole answer too.
oa 'm@tools=2' true | py '
import json, sys
order, args, ids, names, finish, done = [], {}, {}, {}, None, False
for line in sys.stdin:
    if not line.startswith("data: "): continue
    d = line[6:].strip()
    if d == "[DONE]": done = True; continue
    c = json.loads(d)["choices"][0]
    for t in c["delta"].get("tool_calls", []):
        i = t["index"]; order.append(i)
        if "id" in t: ids[i] = t["id"]; names[i] = t["function"]["name"]
        args[i] = args.get(i, "") + t["function"].get("arguments", "")
    if c["finish_reason"]: finish = c["finish_reason"]
assert order == [0, 1, 0, 1, 0, 1, 0, 1], order
assert ids == {0: "call_mock_0", 1: "call_mock_1"} and set(names.values()) == {"get_weather"}, (ids, names)
for i in (0, 1):
    assert json.loads(args[i]) == {"location": "city-%d" % i, "days": i + 1}, args
assert finish == "tool_calls" and done, (finish, done)
' || fail "openai tool calls stream"
oa 'm@tools=2' false | py '
import json, sys
m = json.load(sys.stdin)["choices"][0]
tc = m["message"]["tool_calls"]
assert m["finish_reason"] == "tool_calls" and len(tc) == 2, m
assert json.loads(tc[1]["function"]["arguments"]) == {"location": "city-1", "days": 2}, tc
' || fail "openai tool calls whole"

# Anthropic: consecutive tool_use blocks with input_json_delta, stop tool_use.
an 'm@tools=2' true | py '
import json, sys
blocks, stop = {}, None
for line in sys.stdin:
    if not line.startswith("data: "): continue
    j = json.loads(line[6:])
    if j["type"] == "content_block_start":
        assert j["content_block"]["type"] == "tool_use", j
        blocks[j["index"]] = [j["content_block"]["id"], j["content_block"]["name"], "", False]
    elif j["type"] == "content_block_delta":
        b = blocks[j["index"]]
        assert not b[3] and j["delta"]["type"] == "input_json_delta", j
        b[2] += j["delta"]["partial_json"]
    elif j["type"] == "content_block_stop":
        blocks[j["index"]][3] = True
        assert all(b[3] for b in blocks.values()), blocks
    elif j["type"] == "message_delta": stop = j["delta"]["stop_reason"]
assert sorted(blocks) == [0, 1] and stop == "tool_use", (blocks, stop)
for i in (0, 1):
    assert blocks[i][:2] == ["toolu_mock_%d" % i, "get_weather"], blocks
    assert json.loads(blocks[i][2]) == {"location": "city-%d" % i, "days": i + 1}, blocks
' || fail "anthropic tool calls stream"
an 'm@tools=1' false | py '
import json, sys
j = json.load(sys.stdin)
assert j["stop_reason"] == "tool_use" and j["content"][0]["type"] == "tool_use", j
assert j["content"][0]["input"] == {"location": "city-0", "days": 1}, j
' || fail "anthropic tool calls whole"

# A cut inside the arguments: the start and one piece, then the connection ends.
oa 'm@tools=1@cut=2' true >"$tmp/tcut.txt"
rc=$?
[ "$rc" -eq 18 ] || fail "tool cut: curl exit $rc, want 18"
py '
import json, sys
a = ""
for line in sys.stdin:
    if line.startswith("data: {"):
        for t in json.loads(line[6:])["choices"][0]["delta"].get("tool_calls", []):
            a += t["function"].get("arguments", "")
assert a == "{\"location\"", a
' <"$tmp/tcut.txt" || fail "tool cut: $(cat "$tmp/tcut.txt")"

# Reasoning before text. Anthropic: a thinking block (deltas, signature), then text.
an 'm@reason=2@tokens=1' true | py '
import json, sys
seq = []
for line in sys.stdin:
    if not line.startswith("data: "): continue
    j = json.loads(line[6:])
    if j["type"] == "content_block_start": seq.append("start:" + j["content_block"]["type"])
    if j["type"] == "content_block_delta": seq.append(j["delta"]["type"])
assert seq == ["start:thinking", "thinking_delta", "thinking_delta", "signature_delta",
               "start:text", "text_delta", "text_delta"], seq
' || fail "anthropic reasoning"
oa 'm@reason=2@tokens=1' true | py '
import json, sys
seq = []
for line in sys.stdin:
    if line.startswith("data: {"):
        d = json.loads(line[6:])["choices"][0]["delta"]
        seq += [k for k in ("reasoning_content", "content") if d.get(k)]
assert seq == ["reasoning_content"] * 2 + ["content"] * 2, seq
' || fail "openai reasoning"
oa 'm@reason=2' false | grep -q '"reasoning_content":"Thinking 1. step 2."' || fail "openai reasoning whole"
# A stall during reasoning: one reasoning delta, then nothing.
curl -s -m 1 "$url/v1/chat/completions" -d "$(body 'm@reason=3@stall=1' true)" >"$tmp/rstall.txt"
rc=$?
[ "$rc" -eq 28 ] || fail "reasoning stall: curl exit $rc, want 28"
[ "$(grep -c reasoning_content "$tmp/rstall.txt")" -eq 1 ] || fail "reasoning stall: $(cat "$tmp/rstall.txt")"

# Native refusals.
oa 'm@nrefuse' true | py '
import json, sys
r, c = "", ""
for line in sys.stdin:
    if line.startswith("data: {"):
        d = json.loads(line[6:])["choices"][0]["delta"]
        r += d.get("refusal") or ""; c += d.get("content") or ""
assert r == "I\x27m sorry, but I cannot assist with that request." and c == "", (r, c)
' || fail "openai native refusal"
an refuser true >"$tmp/nref.txt"
grep -q '"stop_reason":"refusal"' "$tmp/nref.txt" || fail "anthropic native refusal: $(cat "$tmp/nref.txt")"
grep -q content_block "$tmp/nref.txt" && fail "anthropic native refusal: has content"
an refuser false | grep -q '"content":\[\],"stop_reason":"refusal"' || fail "anthropic native refusal whole"

# JSON answers: an instance of the requested schema, in either dialect.
schema='{"type":"object","required":["city","temp","tags","ok","at"],"properties":{"city":{"type":"string"},"temp":{"type":"number"},"tags":{"type":"array","items":{"type":"string"}},"ok":{"type":"boolean"},"at":{"type":"object","required":["lat"],"properties":{"lat":{"type":"number"}}}}}'
want='{"city": "x", "temp": 1, "tags": ["x"], "ok": true, "at": {"lat": 1}}'
curl -s -m 5 "$url/v1/chat/completions" -d '{"model":"m@json","stream":true,"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"w","schema":'"$schema"'}}}' | py '
import json, sys
t = ""
for line in sys.stdin:
    if line.startswith("data: {"):
        t += json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
print(t)
' >"$tmp/js.txt"
[ "$(cat "$tmp/js.txt")" = "$want" ] || fail "openai json schema: $(cat "$tmp/js.txt")"
curl -s -m 5 "$url/v1/messages" -d '{"model":"m@json","max_tokens":9,"messages":[{"role":"user","content":"hi"}],"output_config":{"format":{"type":"json_schema","schema":'"$schema"'}}}' |
  py 'import json,sys; print(json.load(sys.stdin)["content"][0]["text"])' >"$tmp/js2.txt"
[ "$(cat "$tmp/js2.txt")" = "$want" ] || fail "anthropic json schema: $(cat "$tmp/js2.txt")"
oa jsonly false | py '
import json, sys
t = json.load(sys.stdin)["choices"][0]["message"]["content"]
assert json.loads(t) == {"answer": "[jsonly] w1 w2"}, t
' || fail "json without a schema"

# By script, and the log names the shapes.
an tooly true | grep -q '"type":"thinking_delta"' || fail "script: reasoning"
curl -s -m 5 "$url/__mock/log" | py '
import json, sys
f = {e["model"]: e["fault"] for e in json.load(sys.stdin)["attempts"]}
assert f["m@tools=2"] == "tool_calls=2" and f["m@tools=1@cut=2"] == "cut_after=2,tool_calls=1", f
assert f["m@reason=3@stall=1"] == "stall_after=1,reasoning=3" and f["m@nrefuse"] == "refusal=native", f
assert f["refuser"] == "refusal=native" and f["jsonly"] == "json" and f["tooly"] == "tool_calls=1,reasoning=1", f
' || fail "shapes log: $(curl -s -m 5 "$url/__mock/log" | head -c 1500)"
stop
[ -s "$tmp/shapes.err" ] && fail "shapes: stderr not empty: $(head -c 500 "$tmp/shapes.err")"

# ---- embeddings and count_tokens: answers and faults without a stream -----
start whole
emb() { curl -s -m 5 "$@" "$url/v1/embeddings" -H 'content-type: application/json'; }
cnt() { curl -s -m 5 "$@" "$url/v1/messages/count_tokens" -H 'content-type: application/json'; }
emb -d '{"model":"e","input":["hello","world"],"dimensions":4}' >"$tmp/e1"
emb -d '{"model":"e","input":"hello","dimensions":4,"encoding_format":"base64"}' >"$tmp/e2"
python3 -c '
import base64, json, struct, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
assert a["object"] == "list" and a["model"] == "e", a
assert [d["index"] for d in a["data"]] == [0, 1] and a["data"][0]["object"] == "embedding", a
v = a["data"][0]["embedding"]
assert len(v) == 4 and abs(sum(x * x for x in v) - 1) < 1e-3, v
assert a["data"][1]["embedding"] != v
assert a["usage"] == {"prompt_tokens": 4, "total_tokens": 4}, a["usage"]
w = struct.unpack("<4f", base64.b64decode(b["data"][0]["embedding"]))
assert all(abs(x - y) < 1e-6 for x, y in zip(v, w)), (v, w)
' "$tmp/e1" "$tmp/e2" 2>&1 || fail "embeddings: $(head -c 400 "$tmp/e1") $(head -c 200 "$tmp/e2")"
emb -d '{"model":"e","input":[]}' -o /dev/null -w '%{http_code}' | grep -q '^400$' || fail "embeddings: empty input not 400"
cnt -d '{"model":"c","system":"be brief","messages":[{"role":"user","content":"hello world"}]}' -D "$tmp/ch" >"$tmp/c1"
[ "$(cat "$tmp/c1")" = '{"input_tokens":8}' ] || fail "count_tokens: $(cat "$tmp/c1")"
grep -qi '^request-id: mock-' "$tmp/ch" || fail "count_tokens: no request-id"
# Faults by model name: 503 with retry-after for the first attempt only.
emb -d '{"model":"e@503@ra=2@k=1","input":"a"}' -D "$tmp/eh" -o "$tmp/eb"
grep -q '^HTTP/1.1 503' "$tmp/eh" && grep -qi '^retry-after: 2' "$tmp/eh" &&
  grep -q '"type":"overloaded_error"' "$tmp/eb" || fail "embeddings 503: $(cat "$tmp/eh" "$tmp/eb")"
emb -d '{"model":"e@503@ra=2@k=1","input":"a"}' -o /dev/null -w '%{http_code}' | grep -q '^200$' || fail "embeddings k=1: second not 200"
cnt -d '{"model":"c@429","messages":[{"role":"user","content":"x"}]}' | grep -q '"type":"rate_limit_error"' || fail "count_tokens 429"
emb -d '{"model":"e@reset","input":"a"}' -o /dev/null; rc=$?
[ "$rc" -eq 56 ] || [ "$rc" -eq 52 ] || fail "embeddings reset: curl exit $rc, want 52/56"
emb -d '{"model":"e@cut=1","input":"a"}' -o /dev/null; rc=$?
[ "$rc" -eq 18 ] || fail "embeddings cut: curl exit $rc, want 18 (partial body)"
emb -d '{"model":"e@bad=1","input":"a"}' | py 'import json,sys; json.load(sys.stdin)' 2>/dev/null && fail "embeddings bad=1: the body parsed"
t0=$(date +%s%N)
emb -d '{"model":"e@slow=300","input":"a"}' -o /dev/null -w '%{http_code}' | grep -q '^200$' || fail "embeddings slow: not 200"
[ $(( ($(date +%s%N) - t0) / 1000000 )) -ge 290 ] || fail "embeddings slow=300 answered in under 290 ms"
emb -m 1 -d '{"model":"e@hang","input":"a"}' -o /dev/null; rc=$?
[ "$rc" -eq 28 ] || fail "embeddings hang: curl exit $rc, want 28 (timeout)"
curl -s -m 5 "$url/__mock/log" | py '
import json, sys
es = json.load(sys.stdin)["attempts"]
f = [(e["model"], e["endpoint"], e["attempt"], e["fault"], e["status"]) for e in es]
assert ("e@503@ra=2@k=1", "embeddings", 1, "status=503", 503) in f, f
assert ("e@503@ra=2@k=1", "embeddings", 2, "ok", 200) in f, f
assert ("c@429", "count_tokens", 1, "status=429", 429) in f, f
assert ("e@reset", "embeddings", 1, "reset", 0) in f, f
assert all(e["api"] == ("anthropic" if e["endpoint"] == "count_tokens" else "openai") for e in es), es
assert len([e for e in es if e["model"] == "e"]) == 2, es  # the 400 is not logged
' || fail "embeddings log: $(curl -s -m 5 "$url/__mock/log" | head -c 1500)"
stop

# ---- continuation (docs/mock.md "Continuation") ------------------------------
start cont
# sse_text: the text of a stream of any dialect on stdin.
sse_text() {
  py '
import json, sys
out = []
for line in sys.stdin:
    if not line.startswith("data: ") or line.startswith("data: [DONE]"):
        continue
    try:
        d = json.loads(line[6:])
    except ValueError:
        continue
    if "choices" in d:
        for c in d["choices"]:
            out.append((c.get("delta") or {}).get("content") or "")
    elif d.get("type") == "content_block_delta" and d["delta"].get("type") == "text_delta":
        out.append(d["delta"]["text"])
    elif d.get("type") == "response.output_text.delta":
        out.append(d["delta"])
sys.stdout.write("".join(out))
'
}
post() { # post PATH JSON: a streamed answer
  curl -s -m 5 "$url$1" -H 'content-type: application/json' -d "$2"
}
msgs() { # msgs MODEL EXTRA_TOP_LEVEL MESSAGES_JSON
  printf '{"model":"%s","max_tokens":64,"stream":true%s,"messages":[{"role":"user","content":"hi"}%s]}' "$1" "$2" "$3"
}
A='[c] w1 w2 w3 w4 w5 w6 w7 w8'
want() { # want NAME GOT EXPECTED
  [ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
}
want "chat prefill (cut token)" \
  "$(post /v1/chat/completions "$(msgs c '' ',{"role":"assistant","content":"[c] w1 w"}')" | sse_text)" \
  "2 w3 w4 w5 w6 w7 w8"
want "chat vllm" \
  "$(post /v1/chat/completions "$(msgs c ',"continue_final_message":true,"add_generation_prompt":false' ',{"role":"assistant","content":"[c] w1 w2"}')" | sse_text)" \
  " w3 w4 w5 w6 w7 w8"
want "chat prefix flag" \
  "$(post /v1/chat/completions "$(msgs c '' ',{"role":"assistant","content":"[c] w1 w2","prefix":true}')" | sse_text)" \
  " w3 w4 w5 w6 w7 w8"
want "chat instruct" \
  "$(post /v1/chat/completions "$(msgs c '' ',{"role":"assistant","content":"[c] w1 w2 w3"},{"role":"user","content":"Continue exactly where the text stops."}')" | sse_text)" \
  " w4 w5 w6 w7 w8"
want "chat: not this answer" \
  "$(post /v1/chat/completions "$(msgs c '' ',{"role":"assistant","content":"[d] w1"}')" | sse_text)" "$A"
want "anthropic prefill" \
  "$(post /v1/messages "$(msgs c '' ',{"role":"assistant","content":[{"type":"text","text":"[c] w1 w2 w3 w4"}]}')" | sse_text)" \
  " w5 w6 w7 w8"
want "responses prefill" \
  "$(post /v1/responses '{"model":"c","stream":true,"max_output_tokens":30,"input":[{"role":"user","content":"hi"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"[c] w1"}]}]}' | sse_text)" \
  " w2 w3 w4 w5 w6 w7 w8"
want "responses instruct" \
  "$(post /v1/responses '{"model":"c","stream":true,"input":[{"role":"user","content":"hi"},{"role":"assistant","content":"[c] w1 w2 w3 w4 w5 w6"},{"role":"user","content":"go on"}]}' | sse_text)" \
  " w7 w8"
want "restart" \
  "$(post /v1/chat/completions "$(msgs 'r@restart' '' ',{"role":"assistant","content":"[r@restart] w1"}')" | sse_text)" \
  "[r@restart] w1 w2 w3 w4 w5 w6 w7 w8"
want "repeat=6" \
  "$(post /v1/messages "$(msgs 'p@repeat=6' '' ',{"role":"assistant","content":"[p@repeat=6] w1 w2 w3"}')" | sse_text)" \
  " w2 w3 w4 w5 w6 w7 w8"
want "preamble (instruct)" \
  "$(post /v1/responses '{"model":"s@preamble","stream":true,"input":[{"role":"user","content":"hi"},{"role":"assistant","content":"[s@preamble] w1 w2 w3 w4 w5 w6 w7"},{"role":"user","content":"go on"}]}' | sse_text)" \
  "Sure, continuing:  w8"
want "diverge" \
  "$(post /v1/chat/completions "$(msgs 'd@diverge@tokens=3' '' ',{"role":"assistant","content":"[d@diverge@tokens=3] w1 w2"}')" | sse_text)" \
  "[d@diverge@tokens=3] (diverged) w1 w2 w3"
# A model that rejects prefill: Anthropic's 400 for every trailing assistant
# message, in the request's dialect; an instruct request is answered.
[ "$(curl -s -m 5 -o "$tmp/np2" -w '%{http_code}' "$url/v1/messages" \
  -d "$(msgs 'n@noprefill' '' ',{"role":"assistant","content":"[n@noprefill] w1"}')")" = 400 ] ||
  fail "noprefill anthropic: not 400"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["type"]=="error" and d["error"]=={"type":"invalid_request_error","message":"This model does not support assistant message prefill. The conversation must end with a user message."}, d' "$tmp/np2" ||
  fail "noprefill anthropic body: $(cat "$tmp/np2")"
[ "$(curl -s -m 5 -o /dev/null -w '%{http_code}' "$url/v1/chat/completions" \
  -d "$(msgs 'n@noprefill' ',"continue_final_message":true' ',{"role":"assistant","content":"anything"}')")" = 400 ] ||
  fail "noprefill vllm: not 400"
want "noprefill instruct" \
  "$(post /v1/messages "$(msgs 'n@noprefill' '' ',{"role":"assistant","content":"[n@noprefill] w1 w2 w3 w4 w5 w6 w7"},{"role":"user","content":"continue"}')" | sse_text)" \
  " w8"
# Breaking faults after N tokens on the Responses stream (chat and messages
# are covered above).
post /v1/responses '{"model":"x@cut=2","stream":true,"input":"hi"}' >"$tmp/rc.txt"; rc=$?
[ "$rc" -eq 18 ] || fail "responses cut=2: curl exit $rc, want 18"
want "responses cut=2 text" "$(sse_text <"$tmp/rc.txt")" "[x@cut=2] w1"
post /v1/responses '{"model":"x@overload=3","stream":true,"input":"hi"}' >"$tmp/ro.txt"
grep -q '^event: error$' "$tmp/ro.txt" && grep -q 'overloaded_error' "$tmp/ro.txt" ||
  fail "responses overload=3: no error event"
grep -q 'response.completed' "$tmp/ro.txt" && fail "responses overload=3: completed after the error"
want "responses overload=3 text" "$(sse_text <"$tmp/ro.txt")" "[x@overload=3] w1 w2"
curl -s -m 1 "$url/v1/responses" -d '{"model":"x@stall=1","stream":true,"input":"hi"}' >"$tmp/rs.txt"; rc=$?
[ "$rc" -eq 28 ] || fail "responses stall=1: curl exit $rc, want 28 (timeout)"
want "responses stall=1 text" "$(sse_text <"$tmp/rs.txt")" "[x@stall=1]"
curl -s -m 5 "$url/__mock/log" | py '
import json, sys
es = json.load(sys.stdin)["attempts"]
got = [(e["model"], e["continuation"], e["continued_at"], e["assistant_bytes"], e["fault"], e["status"]) for e in es]
def has(*t):
    assert t in got, (t, got)
has("c", "prefill", 8, 8, "ok", 200)
has("c", "vllm", 9, 9, "ok", 200)
has("c", "prefix_flag", 9, 9, "ok", 200)
has("c", "instruct", 12, 12, "ok", 200)
has("c", "prefill", None, 6, "ok", 200)           # [d] w1: not its answer
has("c", "prefill", 15, 15, "ok", 200)            # anthropic
has("r@restart", "prefill", 14, 14, "continue_as=restart", 200)
has("p@repeat=6", "prefill", 21, 21, "continue_as=repeat", 200)
has("s@preamble", "instruct", 33, 33, "continue_as=preamble", 200)
has("d@diverge@tokens=3", "prefill", 26, 26, "continue_as=diverge", 200)
has("n@noprefill", "prefill", None, 16, "reject_prefill", 400)
has("n@noprefill", "vllm", None, 8, "reject_prefill", 400)
has("n@noprefill", "instruct", 34, 34, "ok", 200)
has("x@cut=2", None, None, 0, "cut_after=2", 200)
ins = [e for e in es if e["continuation"] == "instruct" and e["model"] == "c"][0]
assert ins["instruct_message"] == "Continue exactly where the text stops.", ins
assert ins["max_tokens"] == 64, ins
resp = [e for e in es if e["model"] == "c" and e["continued_at"] == 6][0]
assert resp["max_tokens"] == 30 and resp["instruct_message"] is None, resp
assert all(e["max_tokens"] == 64 for e in es if e["model"] == "r@restart"), es
' || fail "continuation log: $(curl -s -m 5 "$url/__mock/log" | head -c 3000)"
stop

if [ "$failures" -ne 0 ]; then
  echo "mock.sh: $failures failure(s)" >&2
  exit 1
fi
echo "mock.sh: ok"
