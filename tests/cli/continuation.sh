#!/usr/bin/env bash
# Continuing a stream after its first token (docs/design.md §3.5) with curl
# through `airetry serve` in front of `airetry mock`, all on 127.0.0.1:
# `airetry check` prints each target's resolved continuation_style; a chat
# stream cut after 3 tokens is continued on an Anthropic fallback with a
# prefill, an Anthropic stream broken by an overload error event on an
# OpenAI fallback asked with instruct; the caller gets the mock's uncut
# answer once, its last event carries airetry.continued, the mock's log
# shows the style each continuation was asked with (and that the instruct
# message never holds the released text), /metrics counts the
# continuations; a route without continuation ends with today's error
# event. Every wait is bounded. Usage: bash continuation.sh /path/to/airetry
set -u
bin=${1:?usage: continuation.sh /path/to/airetry}
. "$(dirname "$0")/../lib/cli.bash"
start_mock

cat >"$tmp/gw.yaml" <<EOF
providers:
  - {name: oa, api: openai, base_url: "$mock/v1"}
  - {name: an, api: anthropic, base_url: "$mock"}
  - {name: oi, api: openai, base_url: "$mock/v1", continuation_style: instruct}
defaults:
  breaker: {enabled: false}
  rules: [{on: [network, overloaded, server_error, malformed, timeout.chunk], action: switch}]
routes:
  - name: pf
    targets: [oa/c@cut=3@k=1, an/c@cut=3@k=1]
    continuation: {enabled: true}
  - name: in
    targets: [an/i@overload=3@k=1, oi/i@overload=3@k=1]
    continuation: {enabled: true}
  - name: off
    targets: [oa/o@cut=3@k=1, an/o@cut=3@k=1]
EOF
"$bin" check --config "$tmp/gw.yaml" >"$tmp/check.out" 2>"$tmp/check.err" ||
  fail "check: $(cat "$tmp/check.err")"
python3 - "$tmp/check.out" <<'EOF' || fail "check: the resolved styles: $(cat "$tmp/check.out")"
import sys
t = open(sys.argv[1]).read()
# every target's resolved style is printed: none (openai), prefill
# (anthropic), instruct (configured on the provider)
for s in ("continuation_style: none", "continuation_style: prefill", "continuation_style: instruct"):
    assert s in t, s
EOF

"$bin" serve --config "$tmp/gw.yaml" --listen 127.0.0.1:0 --workers 1 >"$tmp/gw.out" 2>"$tmp/gw.err" &
pids+=($!)
gw=$(wait_url "$tmp/gw.out") || { echo "FAIL: the gateway did not start: $(cat "$tmp/gw.err")" >&2; exit 1; }

# ask NAME PATH ROUTE: one streamed request; body in $tmp/NAME.b, the mock's
# log after it in $tmp/NAME.log, the gateway's log line in $tmp/NAME.line.
n=0
ask() {
  curl -s -m 5 -X POST "$mock/__mock/reset" >/dev/null
  curl -s -m 20 -N -o "$tmp/$1.b" "$gw$2" \
    -H 'content-type: application/json' -H 'anthropic-version: 2023-06-01' \
    -d "{\"model\":\"$3\",\"max_tokens\":50,\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"
  n=$((n + 1))
  wait_lines "$tmp/gw.err" "$n" || fail "$1: no log line"
  grep '^{' "$tmp/gw.err" | tail -n 1 >"$tmp/$1.line"
  curl -s -m 5 "$mock/__mock/log" >"$tmp/$1.log"
}

# check NAME KIND MODEL STYLE TARGET: the stream, the mock's log and the log
# line of one request (KIND: chat or messages; STYLE: the continuation's, or
# "-" for none).
check() {
  python3 - "$tmp/$1.b" "$tmp/$1.log" "$tmp/$1.line" "$2" "$3" "$4" "$5" <<'EOF'
import json, sys
body, log, line, kind, model, style, target = sys.argv[1:]
events = []
for block in open(body).read().split("\n\n"):
    for l in block.split("\n"):
        if l.startswith("data: ") and l != "data: [DONE]":
            events.append(json.loads(l[6:]))
text = ""
for e in events:
    if kind == "chat":
        for c in e.get("choices", []):
            text += (c.get("delta") or {}).get("content") or ""
    elif e.get("type") == "content_block_delta" and e["delta"].get("type") == "text_delta":
        text += e["delta"]["text"]
full = "[%s] w1 w2 w3 w4 w5 w6 w7 w8" % model
sent = " ".join(full.split(" ")[:3])
log = json.load(open(log))["attempts"]
line = json.loads(open(line).read())
if style == "-":
    # today's error event: only the released text, nothing after commit
    assert text == sent, (text, sent)
    last = events[-1]
    assert "error" in last, last
    assert len(log) == 1, log
    sys.exit(0)
assert text == full, (text, full)
marks = [e["airetry"] for e in events if "airetry" in e]
assert marks == [{"continued": [{"target": target, "at_char": len(sent)}]}], marks
assert not any("error" in e for e in events), events
assert "[DONE]" in open(body).read() if kind == "chat" else events[-1]["type"] == "message_stop", events[-1]
assert len(log) == 2, log
assert log[0]["continuation"] is None and log[1]["continuation"] == style, log
assert log[1]["continued_at"] == len(sent), log
assert log[1]["max_tokens"] is not None and log[1]["max_tokens"] <= 50, log
if style == "instruct":
    m = log[1]["instruct_message"]
    assert m and sent not in m, m
# the log line: two attempts, the second the continuation on target
atts = line["attempts"]
assert len(atts) == 2 and atts[1]["target"] == target, atts
assert atts[1].get("continuation") is True or atts[1].get("role") == "continuation", atts
assert not (atts[0].get("continuation") is True or atts[0].get("role") == "continuation"), atts
EOF
}

ask pf_chat /v1/chat/completions pf
check pf_chat chat 'c@cut=3@k=1' prefill 'an/c@cut=3@k=1' ||
  fail "pf (chat caller, prefill on Anthropic): $(cat "$tmp/pf_chat.b" "$tmp/pf_chat.log" "$tmp/pf_chat.line")"
ask in_msgs /v1/messages in
check in_msgs messages 'i@overload=3@k=1' instruct 'oi/i@overload=3@k=1' ||
  fail "in (Anthropic caller, instruct on OpenAI): $(cat "$tmp/in_msgs.b" "$tmp/in_msgs.log" "$tmp/in_msgs.line")"
ask off_chat /v1/chat/completions off
check off_chat chat 'o@cut=3@k=1' - - ||
  fail "off (no continuation): $(cat "$tmp/off_chat.b" "$tmp/off_chat.log")"

curl -s -m 5 "$gw/metrics" >"$tmp/metrics"
python3 - "$tmp/metrics" <<'EOF' || fail "metrics: $(grep continuation "$tmp/metrics")"
import re, sys
m = {}
for l in open(sys.argv[1]):
    if l.startswith("airetry_continuations_total{"):
        k, v = l.rsplit(" ", 1)
        m[k] = float(v)
def count(route):
    return sum(v for k, v in m.items() if 'route="%s"' % route in k)
assert count("pf") == 1 and count("in") == 1 and count("off") == 0, m
# each continuation joined its text to the answer, on the fallback
assert any('route="pf"' in k and 'target="an/c@cut=3@k=1"' in k and 'outcome="joined"' in k
           for k, v in m.items() if v == 1), m
assert any('route="in"' in k and 'target="oi/i@overload=3@k=1"' in k and 'outcome="joined"' in k
           for k, v in m.items() if v == 1), m
EOF

if [ "$failures" -ne 0 ]; then
  echo "continuation.sh: $failures failure(s)" >&2
  exit 1
fi
echo "continuation.sh: ok"
