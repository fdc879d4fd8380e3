#!/usr/bin/env python3
"""Ordinary upstream answers that nobody here wrote, through `airetry serve`.

    python3 tests/upstreams/test_upstreams.py PATH/TO/airetry [NAME-SUBSTRING...]

A raw upstream (a small HTTP/1.1 server on 127.0.0.1, standard library only)
answers every request with the exact bytes of a script chosen by the request's
"model"; gateways sit in front of it. Each case is sent by an OpenAI and an
Anthropic caller, streamed and not, and checked: the caller gets one
well-formed answer in its dialect (a judged answer returned as it is, or a
clean error), `x-airetry-target` names only a target that answered, and the
gateway is still alive and never printed a sanitizer report (an answer
whose only events end with `finish_reason: content_filter`, judged and
released after the run stopped, is the kind that can kill it).

Prints one "ok"/"FAIL" line per test and exits 1 when any failed.
"""

import json
import os
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import airtest  # noqa: E402
from airtest import LOCAL, check  # noqa: E402

airtest.init("upstreams")


# ---- the scripted upstream -------------------------------------------------------


def oa_chunk(delta, finish=None, usage=None, choices=True):
    obj = {"id": "chatcmpl-x1", "object": "chat.completion.chunk",
           "created": 1, "model": "up-model"}
    obj["choices"] = ([{"index": 0, "delta": delta, "finish_reason": finish}]
                      if choices else [])
    if usage is not None:
        obj["usage"] = usage
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def an_event(name, obj):
    return (b"event: " + name.encode() + b"\ndata: " + json.dumps(obj).encode()
            + b"\n\n")


USAGE = {"prompt_tokens": 3, "completion_tokens": 0, "total_tokens": 3}


def oa_finish_only(finish):
    """Role chunk, then the finish, usage and [DONE]: no content at all."""
    return (oa_chunk({"role": "assistant", "content": ""})
            + oa_chunk({}, finish)
            + oa_chunk(None, usage=USAGE, choices=False)
            + b"data: [DONE]\n\n")


def an_finish_only(stop_reason):
    """message_start, message_delta with the stop reason, message_stop."""
    return (an_event("message_start", {"type": "message_start", "message": {
        "id": "msg_x1", "type": "message", "role": "assistant",
        "model": "up-model", "content": [], "stop_reason": None,
        "usage": {"input_tokens": 3, "output_tokens": 0}}})
        + an_event("message_delta", {"type": "message_delta", "delta": {
            "stop_reason": stop_reason}, "usage": {"output_tokens": 0}})
        + an_event("message_stop", {"type": "message_stop"}))


def oa_answer(text):
    return (oa_chunk({"role": "assistant", "content": ""})
            + oa_chunk({"content": text}) + oa_chunk({}, "stop")
            + b"data: [DONE]\n\n")


def an_answer(text):
    return (an_event("message_start", {"type": "message_start", "message": {
        "id": "msg_x2", "type": "message", "role": "assistant",
        "model": "up-model", "content": [], "stop_reason": None,
        "usage": {"input_tokens": 3, "output_tokens": 0}}})
        + an_event("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "text", "text": ""}})
        + an_event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": {"type": "text_delta", "text": text}})
        + an_event("content_block_stop", {"type": "content_block_stop", "index": 0})
        + an_event("message_delta", {"type": "message_delta", "delta": {
            "stop_reason": "end_turn"}, "usage": {"output_tokens": 2}})
        + an_event("message_stop", {"type": "message_stop"}))


def oa_ident_chunk(delta, finish=None, id="chatcmpl-x1", model="up-model"):
    return b"data: " + json.dumps({
        "id": id, "object": "chat.completion.chunk", "created": 1, "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}).encode() + b"\n\n"


def oa_idents(id="chatcmpl-x1", model="up-model", finish="stop"):
    """An answer "hi" whose every chunk carries id and model."""
    return (oa_ident_chunk({"role": "assistant", "content": ""}, id=id, model=model)
            + oa_ident_chunk({"content": "hi"}, id=id, model=model)
            + oa_ident_chunk({}, finish, id=id, model=model) + b"data: [DONE]\n\n")


def oa_tool(call_id="call_1", name="get_weather"):
    """One tool call, its arguments in a second chunk."""
    return (oa_chunk({"role": "assistant", "content": None})
            + oa_chunk({"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                        "function": {"name": name, "arguments": ""}}]})
            + oa_chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{\"a\":1}"}}]})
            + oa_chunk({}, "tool_calls") + b"data: [DONE]\n\n")


def an_tool(tool_id="toolu_1", name="get_weather", msg_id="msg_x3"):
    return (an_event("message_start", {"type": "message_start", "message": {
        "id": msg_id, "type": "message", "role": "assistant", "model": "up-model",
        "content": [], "stop_reason": None, "usage": {"input_tokens": 3, "output_tokens": 0}}})
        + an_event("content_block_start", {"type": "content_block_start", "index": 0,
                                           "content_block": {"type": "tool_use", "id": tool_id,
                                                             "name": name, "input": {}}})
        + an_event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                           "delta": {"type": "input_json_delta",
                                                     "partial_json": "{\"a\":1}"}})
        + an_event("content_block_stop", {"type": "content_block_stop", "index": 0})
        + an_event("message_delta", {"type": "message_delta", "delta": {
            "stop_reason": "tool_use"}, "usage": {"output_tokens": 2}})
        + an_event("message_stop", {"type": "message_stop"}))


def an_stop(stop_reason):
    """Text "hi", then a message_delta with stop_reason."""
    return an_answer("hi").replace(b'"end_turn"', json.dumps(stop_reason).encode())


def oa_body(id="chatcmpl-b1", model="up-model", call_id=None, name="get_weather",
            finish="stop"):
    msg = {"role": "assistant", "content": None if call_id else "hi"}
    if call_id:
        msg["tool_calls"] = [{"id": call_id, "type": "function",
                              "function": {"name": name, "arguments": "{\"a\":1}"}}]
    return json.dumps({"id": id, "object": "chat.completion", "created": 1, "model": model,
                       "choices": [{"index": 0, "finish_reason": finish, "message": msg}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()


ID400 = "chatcmpl-" + "a" * 391
ID5000 = "chatcmpl-" + "b" * 4991
MODEL5000 = "m" * 5000
TOOL5000 = "call_" + "c" * 4995
ANTOOL5000 = "toolu_" + "d" * 4994
LONG_FINISH = "f" * 100
LONG_NAME = "t" * 2000

SSE = [("content-type", "text/event-stream")]
JSONH = [("content-type", "application/json")]
BIG_TEXT = "0123456789abcdef" * (3 * 65536)
SCRIPTS = {
    # model -> (status, headers, body)
    "oa-filter-only": (200, SSE, oa_finish_only("content_filter")),
    "oa-length-only": (200, SSE, oa_finish_only("length")),
    "an-length-only": (200, SSE, an_finish_only("max_tokens")),
    "an-refusal-only": (200, SSE, an_finish_only("refusal")),
    "oa-ok": (200, SSE, oa_answer("hello from openai")),
    "an-ok": (200, SSE, an_answer("hello from anthropic")),
    # usage only in the last chunk, as OpenAI reports it (include_usage)
    "oa-usage": (200, SSE, oa_chunk({"role": "assistant", "content": ""})
                 + oa_chunk({"content": "hi"}) + oa_chunk({}, "stop")
                 + oa_chunk(None, usage={"prompt_tokens": 11, "completion_tokens": 2,
                                         "total_tokens": 13}, choices=False)
                 + b"data: [DONE]\n\n"),
    # the head promises more bytes than come: the connection then closes
    "oa-cut": (200, SSE, oa_chunk({"role": "assistant", "content": ""})
               + oa_chunk({"content": "partial"})),
    # text, then [DONE] with no finish: cut short, not an answer
    "oa-done-no-finish": (200, SSE, oa_chunk({"role": "assistant", "content": ""})
                          + oa_chunk({"content": "half an answ"}) + b"data: [DONE]\n\n"),
    "oa-bad-event": (200, SSE, oa_chunk({"role": "assistant", "content": ""})
                     + b"data: {not json\n\n" + oa_answer("after the bad one")),
    # a whole JSON answer of 3 MiB (over the old 1 MiB cap, under 64 MiB)
    "oa-big-json": (200, [("content-type", "application/json")], json.dumps({
        "id": "chatcmpl-big", "object": "chat.completion", "created": 1,
        "model": "up-model", "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant",
                                                      "content": BIG_TEXT}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()),
    # identifiers over the gateway's limits: kept whole, or replaced
    "oa-id400": (200, SSE, oa_idents(id=ID400)),
    "oa-id5000": (200, SSE, oa_idents(id=ID5000)),
    "oa-model5000": (200, SSE, oa_idents(model=MODEL5000)),
    "oa-tool5000": (200, SSE, oa_tool(call_id=TOOL5000)),
    "an-id5000": (200, SSE, an_tool(msg_id="msg_" + "e" * 4996)),
    "an-tool5000": (200, SSE, an_tool(tool_id=ANTOOL5000)),
    "oa-body-id5000": (200, JSONH, oa_body(id=ID5000, model=MODEL5000)),
    "oa-body-tool5000": (200, JSONH, oa_body(call_id=TOOL5000)),
    # what carries meaning over its limit: malformed, never a stop
    "oa-finish-long": (200, SSE, oa_idents(finish=LONG_FINISH)),
    "oa-toolname-long": (200, SSE, oa_tool(name=LONG_NAME)),
    "an-finish-long": (200, SSE, an_stop(LONG_FINISH)),
    "an-toolname-long": (200, SSE, an_tool(name=LONG_NAME)),
    "oa-body-finish-long": (200, JSONH, oa_body(finish=LONG_FINISH)),
    "oa-body-toolname-long": (200, JSONH, oa_body(call_id="call_1", name=LONG_NAME)),
    # an overload whose (non-JSON) body is 2 MiB: still an overload
    "oa-big-503": (503, [("content-type", "text/html")], b"<p>busy</p>" * 200000),
}
CUT = {"oa-cut"}
# The hedge case, on events: "oa-slow-win" answers once the hedge's request
# ("oa-slower") has arrived; "oa-slower" never answers (the gateway cancels
# the racer that lost, which closes its connection).
SCRIPTS["oa-slow-win"] = (200, SSE, oa_answer("the first attempt wins"))
SCRIPTS["oa-slower"] = (200, SSE, oa_answer("the hedge, too late"))


class Upstream:
    """Answers each request with SCRIPTS[model] (404 for an unknown one)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind((LOCAL, 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.stop = False
        self.seen = {}  # model -> requests received
        self.lock = threading.Lock()
        self.hedged = threading.Event()  # the hedge's request arrived
        threading.Thread(target=self.loop, daemon=True).start()

    def loop(self):
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        c.settimeout(10)
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    d = c.recv(65536)
                    if not d:
                        return
                    buf += d
                head, buf = buf.split(b"\r\n\r\n", 1)
                n = 0
                for line in head.split(b"\r\n")[1:]:
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"content-length":
                        n = int(v.strip())
                while len(buf) < n:
                    d = c.recv(65536)
                    if not d:
                        return
                    buf += d
                body, buf = buf[:n], buf[n:]
                model = json.loads(body or b"{}").get("model", "")
                with self.lock:
                    self.seen[model] = self.seen.get(model, 0) + 1
                status, headers, out = SCRIPTS.get(
                    model, (404, [("content-type", "application/json")],
                            b'{"error":{"message":"no such model","type":"not_found"}}'))
                if model == "oa-slower":
                    self.hedged.set()
                    c.recv(1)  # until the gateway drops the racer that lost (10 s at most)
                    return
                if model == "oa-slow-win":
                    self.hedged.wait(10)
                    self.hedged.clear()
                declared = len(out) + (100 if model in CUT else 0)
                resp = "HTTP/1.1 %d X\r\ncontent-length: %d\r\n" % (status, declared)
                resp += "".join("%s: %s\r\n" % h for h in headers) + "\r\n"
                c.sendall(resp.encode() + out)
                if model in CUT:
                    return
        except (OSError, ValueError):
            pass
        finally:
            c.close()


# ---- the gateway ----------------------------------------------------------------------


class Gateway:
    def __init__(self, binary, config):
        path = airtest.write_file("gw-%d.yaml" % len(airtest.PROCS), config)
        self.p = airtest.Proc("gateway", [binary, "serve", "--config", path, "--listen",
                                          LOCAL + ":0"])
        self.port = self.p.port

    def stderr(self):
        return self.p.stderr().decode("utf-8", "replace")

    def alive(self):
        check(self.p.poll() is None,
              "the gateway died (exit %r): %s" % (self.p.p.returncode, self.stderr()[-2000:]))
        status, _, body = request(self.port, "GET", "/healthz", None)
        check(status == 200, "/healthz answered %d" % status)
        text = self.stderr()
        for bad in ("runtime error", "AddressSanitizer", "LeakSanitizer"):
            check(bad not in text, "sanitizer report in the gateway's stderr:\n" + text[-3000:])


def request(port, method, path, body, headers=None):
    """One request on a fresh connection; (status, headers dict, body bytes).
    The response is read until the server closes."""
    return airtest.fetch(port, method, path, body, headers, timeout=10)


sse_events = airtest.sse


# ---- the cases ------------------------------------------------------------------------

TESTS, test = airtest.registry()
closed_port = airtest.free_port


def config(up, commit="first_content"):
    return """providers:
  - {name: nobody, api: openai, base_url: http://127.0.0.1:%d/v1}
  - {name: oa, api: openai, base_url: http://%s:%d/v1}
  - {name: an, api: anthropic, base_url: http://%s:%d}
defaults: {commit: %s}
routes:
  - {name: filter, targets: [oa/oa-filter-only]}
  - {name: length, targets: [oa/oa-length-only]}
  - {name: an-length, targets: [an/an-length-only]}
  - {name: an-refusal, targets: [an/an-refusal-only]}
  - {name: skip-first, targets: [an/an-ok, oa/oa-ok]}
  - {name: skip-all, targets: [an/an-ok]}
  - {name: cut, targets: [oa/oa-cut]}
  - {name: done-no-finish, targets: [oa/oa-done-no-finish]}
  - {name: bad-event, targets: [oa/oa-bad-event], malformed: fail}
  - {name: refused, targets: [nobody/x]}
  - {name: big, targets: [oa/oa-big-json]}
  - {name: usage, targets: [oa/oa-usage]}
  - {name: oa-id400, targets: [oa/oa-id400]}
  - {name: oa-id5000, targets: [oa/oa-id5000]}
  - {name: oa-model5000, targets: [oa/oa-model5000]}
  - {name: oa-tool5000, targets: [oa/oa-tool5000]}
  - {name: an-id5000, targets: [an/an-id5000]}
  - {name: an-tool5000, targets: [an/an-tool5000]}
  - {name: oa-body-id5000, targets: [oa/oa-body-id5000]}
  - {name: oa-body-tool5000, targets: [oa/oa-body-tool5000]}
  - {name: oa-finish-long, targets: [oa/oa-finish-long]}
  - {name: oa-toolname-long, targets: [oa/oa-toolname-long]}
  - {name: an-finish-long, targets: [an/an-finish-long]}
  - {name: an-toolname-long, targets: [an/an-toolname-long]}
  - {name: oa-body-finish-long, targets: [oa/oa-body-finish-long]}
  - {name: oa-body-toolname-long, targets: [oa/oa-body-toolname-long]}
  - {name: hedged, targets: [oa/oa-slow-win, oa/oa-slower], hedge: {after_ms: 100}}
  - name: big-503
    targets: [oa/oa-big-503]
    rules: [{on: [overloaded], action: fail}]
""" % (closed_port(), LOCAL, up.port, LOCAL, up.port, commit)


def openai_call(gw, model, stream):
    return request(gw.port, "POST", "/v1/chat/completions",
                   {"model": model, "stream": stream,
                    "messages": [{"role": "user", "content": "hi"}]})


def anthropic_call(gw, model, stream):
    return request(gw.port, "POST", "/v1/messages",
                   {"model": model, "stream": stream, "max_tokens": 16,
                    "messages": [{"role": "user", "content": "hi"}]},
                   {"anthropic-version": "2023-06-01"})


def check_judged_openai(status, hs, body, stream, target, finish):
    """A judged answer (content-free, with finish `finish`) returned as it is."""
    check(status == 200, "status %d: %r" % (status, body[:500]))
    check(hs.get("x-airetry-target") == target, "x-airetry-target %r" % hs.get("x-airetry-target"))
    if stream:
        ev = sse_events(body)
        check(ev and ev[-1][1] == "[DONE]", "no [DONE] at the end: %r" % body[-300:])
        finishes = [json.loads(d)["choices"][0].get("finish_reason") for _, d in ev[:-1]
                    if d.startswith("{") and json.loads(d).get("choices")]
        check(finish in finishes, "finish %s not in %r" % (finish, finishes))
        check(not any(json.loads(d).get("error") for _, d in ev[:-1]), "an error event: %r" % body)
    else:
        b = json.loads(body)
        check(b["choices"][0]["finish_reason"] == finish, "finish: %r" % b)
        check(not b["choices"][0]["message"].get("content"), "content: %r" % b)


def check_judged_anthropic(status, hs, body, stream, target, stop):
    check(status == 200, "status %d: %r" % (status, body[:500]))
    check(hs.get("x-airetry-target") == target, "x-airetry-target %r" % hs.get("x-airetry-target"))
    if stream:
        ev = sse_events(body)
        names = [n for n, _ in ev]
        check(names and names[-1] == "message_stop", "no message_stop at the end: %r" % names)
        check("error" not in names, "an error event: %r" % body)
        deltas = [json.loads(d)["delta"].get("stop_reason") for n, d in ev if n == "message_delta"]
        check(stop in deltas, "stop_reason %s not in %r" % (stop, deltas))
    else:
        b = json.loads(body)
        check(b["stop_reason"] == stop, "stop_reason: %r" % b)


@test("judged/content_filter-only stream returned as it is (both commit modes)")
def t_filter_only(binary, up):
    for commit in ("first_content", "complete"):
        gw = Gateway(binary, config(up, commit))
        for stream in (True, False):
            st, hs, body = openai_call(gw, "filter", stream)
            check_judged_openai(st, hs, body, stream, "oa/oa-filter-only", "content_filter")
            gw.alive()
            st, hs, body = anthropic_call(gw, "filter", stream)
            check_judged_anthropic(st, hs, body, stream, "oa/oa-filter-only", "refusal")
            gw.alive()


@test("judged/length-only stream returned as it is, OpenAI and Anthropic upstreams")
def t_length_only(binary, up):
    gw = Gateway(binary, config(up))
    for stream in (True, False):
        st, hs, body = openai_call(gw, "length", stream)
        check_judged_openai(st, hs, body, stream, "oa/oa-length-only", "length")
        st, hs, body = openai_call(gw, "an-length", stream)
        check_judged_openai(st, hs, body, stream, "an/an-length-only", "length")
        st, hs, body = anthropic_call(gw, "an-length", stream)
        check_judged_anthropic(st, hs, body, stream, "an/an-length-only", "max_tokens")
        gw.alive()


@test("error/a refusal stop before content is a clean error naming no target")
def t_refusal_only(binary, up):
    gw = Gateway(binary, config(up))
    for stream in (True, False):
        st, hs, body = openai_call(gw, "an-refusal", stream)
        check(400 <= st < 600, "status %d" % st)
        b = json.loads(body)
        check("error" in b and b["error"]["message"], "error body: %r" % b)
        check("x-airetry-target" not in hs, "x-airetry-target on an error: %r" % hs)
        check(hs.get("x-should-retry") == "false", "x-should-retry: %r" % hs)
        st, hs, body = anthropic_call(gw, "an-refusal", stream)
        b = json.loads(body)
        check(b.get("type") == "error", "error body: %r" % b)
        check("x-airetry-target" not in hs, "x-airetry-target on an error: %r" % hs)
        gw.alive()


def log_lines(gw):
    out = []
    for line in gw.stderr().splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def log_line(gw, rid):
    """The request's log line; it is written after the response, so this
    polls the gateway's stderr (bounded: 10 s)."""
    deadline = time.monotonic() + 10
    while True:
        hit = [l for l in log_lines(gw) if l.get("request_id") == rid]
        if hit:
            return hit[0]
        check(time.monotonic() < deadline, "no log line for %s" % rid)
        time.sleep(0.02)


@test("skipped/a target that cannot express the request is skipped, not counted, never sent to")
def t_skipped(binary, up):
    gw = Gateway(binary, config(up))
    before = dict(up.seen)
    body = {"model": "skip-first", "n": 2, "stream": False,
            "messages": [{"role": "user", "content": "hi"}]}
    st, hs, out = request(gw.port, "POST", "/v1/chat/completions", body)
    check(st == 200, "status %d: %r" % (st, out[:300]))
    check(hs.get("x-airetry-target") == "oa/oa-ok", "target %r" % hs.get("x-airetry-target"))
    check(hs.get("x-airetry-attempts") == "1", "attempts %r" % hs.get("x-airetry-attempts"))
    check(up.seen.get("an-ok", 0) == before.get("an-ok", 0), "the skipped target was called")
    line = log_line(gw, hs.get("x-request-id"))
    atts = line["attempts"]
    check(atts[0] == {"target": "an/an-ok", "outcome": "skipped", "field": "n"},
          "log attempts %r" % atts)
    check(atts[1]["target"] == "oa/oa-ok" and atts[1]["reason"] == "ok", "log %r" % atts)
    # Every target skipped: 400 naming the field and the target.
    body["model"] = "skip-all"
    for stream in (False, True):
        body["stream"] = stream
        st, hs, out = request(gw.port, "POST", "/v1/chat/completions", body)
        check(st == 400, "status %d: %r" % (st, out[:300]))
        b = json.loads(out)
        check(b["error"]["attempts"] == [{"target": "an/an-ok", "outcome": "skipped",
                                          "field": "n"}], "attempts %r" % b)
        check("n" in b["error"]["message"] and "an/an-ok" in b["error"]["message"],
              "message %r" % b["error"]["message"])
        check("x-airetry-target" not in hs, "x-airetry-target: %r" % hs)
        check(hs.get("x-airetry-attempts") == "0", "attempts %r" % hs.get("x-airetry-attempts"))
    check(up.seen.get("an-ok", 0) == before.get("an-ok", 0), "the skipped target was called")
    gw.alive()


@test("hints/seed, logprobs, service_tier are dropped for an Anthropic target, not skipped")
def t_hints(binary, up):
    gw = Gateway(binary, config(up))
    body = {"model": "skip-all", "seed": 7, "logprobs": True, "top_logprobs": 2,
            "service_tier": "auto", "stream": False,
            "messages": [{"role": "user", "content": "hi"}]}
    st, hs, out = request(gw.port, "POST", "/v1/chat/completions", body)
    check(st == 200, "status %d: %r" % (st, out[:300]))
    check(json.loads(out)["choices"][0]["message"]["content"] == "hello from anthropic",
          "answer %r" % out)
    gw.alive()


LIBCURL_WORDS = ("Transferred a partial file", "Couldn't connect", "Failure when receiving",
                 "Server returned nothing", "curl", "Recv failure", "partial file")


def check_plain(message, target, reason):
    for w in LIBCURL_WORDS:
        check(w.lower() not in message.lower(), "library text in %r" % message)
    check(target in message and "(%s)" % reason in message,
          "message %r names neither %s nor (%s)" % (message, target, reason))


@test("messages/callers are told the reason and the upstream in plain words, never libcurl's")
def t_messages(binary, up):
    gw = Gateway(binary, config(up))
    # Nothing listens: before any response.
    st, hs, out = openai_call(gw, "refused", False)
    check(st == 502, "status %d" % st)
    check_plain(json.loads(out)["error"]["message"], "nobody/x", "network")
    st, hs, out = anthropic_call(gw, "refused", False)
    check_plain(json.loads(out)["error"]["message"], "nobody/x", "network")
    # Cut after commit: the error event names the upstream and the reason.
    st, hs, out = openai_call(gw, "cut", True)
    check(st == 200, "status %d" % st)
    ev = sse_events(out)
    check(ev[-1][1] != "[DONE]", "a cut stream ended cleanly: %r" % out)
    err = json.loads(ev[-1][1])["error"]
    check_plain(err["message"], "oa/oa-cut", "network")
    st, hs, out = anthropic_call(gw, "cut", True)
    ev = sse_events(out)
    check(ev[-1][0] == "error", "no error event: %r" % out)
    check_plain(json.loads(ev[-1][1])["error"]["message"], "oa/oa-cut", "network")
    # Not streamed: the answer never completed.
    st, hs, out = openai_call(gw, "cut", False)
    check(st == 502, "status %d: %r" % (st, out))
    check_plain(json.loads(out)["error"]["message"], "oa/oa-cut", "network")
    # A terminator without a finish is no answer either (docs/design.md §9).
    st, hs, out = openai_call(gw, "done-no-finish", True)
    ev = sse_events(out)
    check(ev[-1][1] != "[DONE]", "a stream without a finish ended cleanly: %r" % out)
    check_plain(json.loads(ev[-1][1])["error"]["message"], "oa/oa-done-no-finish", "network")
    st, hs, out = openai_call(gw, "done-no-finish", False)
    check(st == 502, "status %d: %r" % (st, out))
    # malformed: fail after one bad event says so, not "too many".
    st, hs, out = openai_call(gw, "bad-event", False)
    m = json.loads(out)["error"]["message"]
    check_plain(m, "oa/oa-bad-event", "malformed")
    check("too many" not in m and "malformed: fail" in m, "message %r" % m)
    gw.alive()


@test("caps/a whole 3 MiB JSON answer is returned whole; a 2 MiB 503 body is still an overload")
def t_caps(binary, up):
    gw = Gateway(binary, config(up))
    for stream in (False, True):
        st, hs, out = openai_call(gw, "big", stream)
        check(st == 200, "status %d: %r" % (st, out[:300]))
        if stream:
            text = "".join(json.loads(d)["choices"][0]["delta"].get("content") or ""
                           for _, d in sse_events(out)[:-1]
                           if json.loads(d).get("choices"))
        else:
            text = json.loads(out)["choices"][0]["message"]["content"]
        check(text == BIG_TEXT, "answer of %d bytes, want %d" % (len(text), len(BIG_TEXT)))
    st, hs, out = openai_call(gw, "big-503", False)
    check(st == 503, "status %d: %r" % (st, out[:300]))
    check(json.loads(out)["error"]["attempts"][0]["reason"] == "overloaded", "body %r" % out[:300])
    gw.alive()


@test("usage/an Anthropic caller gets the OpenAI upstream's last-chunk input_tokens")
def t_usage_last_chunk(binary, up):
    gw = Gateway(binary, config(up))
    st, hs, body = anthropic_call(gw, "usage", True)
    check(st == 200, "status %d: %r" % (st, body[:500]))
    deltas = [json.loads(d) for n, d in sse_events(body) if n == "message_delta"]
    check(deltas, "no message_delta: %r" % body)
    u = deltas[-1].get("usage") or {}
    check(u.get("input_tokens") == 11 and u.get("output_tokens") == 2,
          "last message_delta usage %r" % u)
    st, hs, body = anthropic_call(gw, "usage", False)
    check(st == 200, "status %d: %r" % (st, body[:500]))
    u = json.loads(body).get("usage") or {}
    check(u.get("input_tokens") == 11 and u.get("output_tokens") == 2, "usage %r" % u)
    gw.alive()


def usage_call(gw, dialect, model, stream):
    """A caller of dialect asking for usage (OpenAI chat: include_usage)."""
    if dialect == "openai":
        return request(gw.port, "POST", "/v1/chat/completions",
                       {"model": model, "stream": stream,
                        "stream_options": {"include_usage": True} if stream else None,
                        "messages": [{"role": "user", "content": "hi"}]})
    if dialect == "anthropic":
        return anthropic_call(gw, model, stream)
    return request(gw.port, "POST", "/v1/responses",
                   {"model": model, "stream": stream, "input": "hi"})


def caller_usage(dialect, stream, body):
    """(input, output) tokens the caller was told, or None."""
    if not stream:
        u = json.loads(body).get("usage") or {}
        if dialect == "openai":
            return (u.get("prompt_tokens"), u.get("completion_tokens")) if u else None
        return (u.get("input_tokens"), u.get("output_tokens")) if u else None
    got = None
    for name, d in sse_events(body):
        if not d.startswith("{"):
            continue
        o = json.loads(d)
        if dialect == "openai" and o.get("usage"):
            got = (o["usage"].get("prompt_tokens"), o["usage"].get("completion_tokens"))
        elif dialect == "anthropic" and name == "message_delta" and o.get("usage"):
            got = (o["usage"].get("input_tokens"), o["usage"].get("output_tokens"))
        elif dialect == "responses" and (o.get("response") or {}).get("usage"):
            u = o["response"]["usage"]
            got = (u.get("input_tokens"), u.get("output_tokens"))
    return got


@test("judged/a passed-on content_filter answer carries the usage the caller asked for")
def t_judged_usage(binary, up):
    for commit in ("first_content", "complete"):
        gw = Gateway(binary, config(up, commit))
        for dialect in ("openai", "anthropic", "responses"):
            for stream in (True, False):
                st, hs, body = usage_call(gw, dialect, "filter", stream)
                check(st == 200, "%s %s stream=%s: status %d: %r"
                      % (commit, dialect, stream, st, body[:300]))
                got = caller_usage(dialect, stream, body)
                check(got is not None and got[0] == 3,
                      "%s %s stream=%s: usage %r in %r" % (commit, dialect, stream, got,
                                                          body[-600:]))
        gw.alive()


def answer_of(dialect, stream, body):
    """(ids, models, text, tool call ids) the caller was told, every place
    each appears."""
    ids, models, text, tools = [], [], "", []
    if not stream:
        b = json.loads(body)
        ids.append(b.get("id"))
        models.append(b.get("model"))
        if dialect == "openai":
            m = b["choices"][0]["message"]
            text = m.get("content") or ""
            tools = [t["id"] for t in m.get("tool_calls") or []]
        elif dialect == "anthropic":
            text = "".join(c.get("text", "") for c in b["content"] if c["type"] == "text")
            tools = [c["id"] for c in b["content"] if c["type"] == "tool_use"]
        else:
            for it in b["output"]:
                if it["type"] == "message":
                    text += "".join(c.get("text", "") for c in it["content"])
                elif it["type"] == "function_call":
                    tools.append(it["call_id"])
        return ids, models, text, tools
    for name, d in sse_events(body):
        if not d.startswith("{"):
            continue
        o = json.loads(d)
        if dialect == "openai":
            ids.append(o.get("id"))
            models.append(o.get("model"))
            for c in o.get("choices") or []:
                text += (c.get("delta") or {}).get("content") or ""
                tools += [t["id"] for t in (c.get("delta") or {}).get("tool_calls") or []
                          if "id" in t]
        elif dialect == "anthropic":
            if name == "message_start":
                ids.append(o["message"]["id"])
                models.append(o["message"]["model"])
            elif name == "content_block_start" and o["content_block"]["type"] == "tool_use":
                tools.append(o["content_block"]["id"])
            elif name == "content_block_delta":
                text += o["delta"].get("text", "")
        else:
            r = o.get("response")
            if r:
                ids.append(r.get("id"))
                models.append(r.get("model"))
                for it in r.get("output") or []:
                    if it.get("type") == "function_call":
                        tools.append(it["call_id"])
            it = o.get("item")
            if it and it.get("type") == "function_call":
                tools.append(it["call_id"])
            if o.get("type") == "response.output_text.delta":
                text += o["delta"]
    return ids, models, text, tools


def ident_call(gw, dialect, model, stream):
    if dialect == "openai":
        return openai_call(gw, model, stream)
    if dialect == "anthropic":
        return anthropic_call(gw, model, stream)
    return request(gw.port, "POST", "/v1/responses",
                   {"model": model, "stream": stream, "input": "hi"})


DIALECTS = ("openai", "anthropic", "responses")


@test("idents/an upstream id or model over the limit is replaced, never a failure; 400 bytes kept")
def t_long_idents(binary, up):
    gw = Gateway(binary, config(up))
    for route, upstream in (("oa-id400", "openai"), ("oa-id5000", "openai"),
                            ("oa-model5000", "openai"), ("an-id5000", "anthropic"),
                            ("oa-body-id5000", "openai")):
        for dialect in DIALECTS:
            for stream in (False, True):
                what = "%s %s stream=%s" % (route, dialect, stream)
                st, hs, body = ident_call(gw, dialect, route, stream)
                check(st == 200, "%s: status %d: %r" % (what, st, body[:300]))
                ids, models, text, tools = answer_of(dialect, stream, body)
                check(ids and len(set(ids)) == 1, "%s: ids %r" % (what, [i[:40] for i in ids]))
                if route != "an-id5000":
                    check(text == "hi", "%s: text %r" % (what, text))
                rid = hs.get("x-request-id")
                if route == "oa-id400":
                    check(ID400 in ids[0], "%s: the 400-byte id was not kept: %r" % (what, ids[0]))
                elif route in ("oa-id5000", "an-id5000", "oa-body-id5000"):
                    check(len(ids[0]) < 200 and rid in ids[0],
                          "%s: id %r, request id %s" % (what, ids[0][:60], rid))
                if route in ("oa-model5000", "oa-body-id5000"):
                    check(set(models) == {route}, "%s: models %r" % (what, [m[:40] for m in models]))
                    line = log_line(gw, rid)
                    check("model" in line.get("replaced", ""), "%s: log %r" % (what, line))
                if route in ("oa-id5000", "an-id5000"):
                    line = log_line(gw, rid)
                    check("id" in line.get("replaced", "").split(","), "%s: log %r" % (what, line))
    gw.alive()


@test("idents/a tool call id over the limit is replaced the same way everywhere in the answer")
def t_long_tool_ids(binary, up):
    gw = Gateway(binary, config(up))
    for route, original in (("oa-tool5000", TOOL5000), ("an-tool5000", ANTOOL5000),
                            ("oa-body-tool5000", TOOL5000)):
        for dialect in DIALECTS:
            for stream in (False, True):
                what = "%s %s stream=%s" % (route, dialect, stream)
                st, hs, body = ident_call(gw, dialect, route, stream)
                check(st == 200, "%s: status %d: %r" % (what, st, body[:300]))
                ids, models, text, tools = answer_of(dialect, stream, body)
                check(tools and len(set(tools)) == 1, "%s: tool ids %r" % (what, tools))
                passthrough = stream and ((dialect == "openai" and route.startswith("oa-tool"))
                                          or (dialect == "anthropic" and route.startswith("an-")))
                if passthrough:
                    # The upstream's own bytes go out as they are.
                    check(tools[0] == original, "%s: %r" % (what, tools[0][:60]))
                else:
                    check(0 < len(tools[0]) < 64, "%s: tool id %r" % (what, tools[0][:60]))
                    line = log_line(gw, hs.get("x-request-id"))
                    check(line.get("replaced") == "tool_id", "%s: log %r" % (what, line))
    # The same original, the same replacement: non-streamed twice.
    a = answer_of("openai", False, ident_call(gw, "openai", "oa-tool5000", False)[2])[3]
    b = answer_of("openai", False, ident_call(gw, "openai", "oa-tool5000", False)[2])[3]
    check(a == b, "replacements differ: %r %r" % (a, b))
    gw.alive()


@test("idents/a finish_reason or tool name over the limit is malformed, never a stop")
def t_long_meaning(binary, up):
    gw = Gateway(binary, config(up))
    for route in ("oa-finish-long", "oa-toolname-long", "an-finish-long", "an-toolname-long",
                  "oa-body-finish-long", "oa-body-toolname-long"):
        for dialect in DIALECTS:
            for stream in (False, True):
                what = "%s %s stream=%s" % (route, dialect, stream)
                st, hs, body = ident_call(gw, dialect, route, stream)
                if st != 200:
                    check(st == 502, "%s: status %d: %r" % (what, st, body[:300]))
                    err = json.loads(body).get("error") or {}
                    msg = err.get("message") if isinstance(err, dict) else None
                    check(msg and "(malformed)" in msg, "%s: %r" % (what, body[:300]))
                    continue
                # Committed before the bad event: the stream ends in an error.
                check(stream, "%s: a 200 answer: %r" % (what, body[:300]))
                ev = sse_events(body)
                last = ev[-1]
                check(last[1] != "[DONE]" and last[0] not in ("message_stop",)
                      and '"response.completed"' not in last[1],
                      "%s: ended cleanly: %r" % (what, body[-300:]))
                check("malformed" in body.decode(), "%s: %r" % (what, body[-300:]))
    gw.alive()


@test("hedge/x-airetry-attempts counts every attempt made, not the winner's number")
def t_hedge_attempts(binary, up):
    gw = Gateway(binary, config(up))
    for stream in (True, False):
        st, hs, body = openai_call(gw, "hedged", stream)
        check(st == 200, "status %d: %r" % (st, body[:300]))
        check(hs.get("x-airetry-target") == "oa/oa-slow-win", "target %r" % hs)
        check(hs.get("x-airetry-attempts") == "2",
              "stream=%s: x-airetry-attempts %r (attempt 1 won, a hedge was made)"
              % (stream, hs.get("x-airetry-attempts")))
    gw.alive()


def main():
    up = Upstream()

    def cleanup():
        up.stop = True
        up.sock.close()
    return airtest.main(TESTS, lambda binary: lambda fn: fn(binary, up), cleanup=cleanup)


if __name__ == "__main__":
    sys.exit(main())
