#!/usr/bin/env python3
"""Backpressure through the gateway: when the consumer is slow, the transfer
is paused and resumed, and memory per stream stays bounded.

    python3 tests/backpressure/test_backpressure.py PATH/TO/airetry

A mock model streams a long answer at full speed (tokens=100000, the mock's
maximum, no delay: about 15 MB of SSE). A raw client sends the streaming request through the
gateway and then does not read for two seconds. The gateway must pause the
upstream instead of buffering: its RSS grows by far less than the answer,
and the mock's log shows the response still unfinished. Then the client reads
everything: the answer arrives complete, exactly once, and ends cleanly.
Only 127.0.0.1; every wait is bounded.
"""

import json
import os
import socket
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import airtest  # noqa: E402
from airtest import LOCAL  # noqa: E402

TOKENS = 100000
MODEL = "big@tokens=%d" % TOKENS


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def http(port, method, path, body=None):
    return airtest.fetch(port, method, path, body, timeout=10)[2]


def mock_entry(mport):
    entries = [e for e in airtest.mock_log(mport) if e["model"] == MODEL]
    return entries[-1] if entries else None


def dechunk(raw):
    """The body of a chunked HTTP/1.1 response."""
    head, rest = raw.split(b"\r\n\r\n", 1)
    assert b"200 OK" in head.split(b"\r\n")[0], head[:200]
    return airtest.dechunk(rest)


def main():
    airetry = sys.argv[1]
    airtest.init("bp")
    failures = []
    try:
        mport = airtest.Proc("mock", [airetry, "mock", "--listen", LOCAL + ":0"]).port
        cfg = airtest.write_file(
            "gw.yaml", "providers:\n  - {name: m, api: openai, base_url: \"http://%s:%d/v1\"}\n"
            "defaults:\n  timeouts: {chunk_ms: 20000, first_chunk_ms: 20000}\n"
            "routes:\n  - {name: big, targets: [m/%s]}\n" % (LOCAL, mport, MODEL))
        gw = airtest.Proc("gateway", [airetry, "serve", "--config", cfg, "--listen",
                                      LOCAL + ":0", "--workers", "1"])
        gport = gw.port
        body = json.dumps({"model": "big", "stream": True,
                           "messages": [{"role": "user", "content": "go"}]}).encode()
        # Warm up (allocator, connection pool), then measure.
        http(gport, "POST", "/v1/chat/completions",
             {"model": "m/w@tokens=4", "stream": True,
              "messages": [{"role": "user", "content": "w"}]})
        before = rss_kib(gw.pid)
        s = socket.create_connection((LOCAL, gport), timeout=30)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        s.sendall(("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                   "Content-Type: application/json\r\nContent-Length: %d\r\n"
                   "Connection: close\r\n\r\n" % len(body)).encode() + body)
        time.sleep(2.0)  # the client reads nothing
        grown = rss_kib(gw.pid) - before
        entry = mock_entry(mport)
        print("gateway RSS growth while the client does not read: %d KiB" % grown)
        if entry is None:
            failures.append("the mock never saw the request")
        elif entry.get("end_ms") is not None:
            failures.append("the upstream answer finished while the client read nothing "
                            "(not paused): %r" % entry)
        if grown > 4096:
            failures.append("gateway RSS grew by %d KiB (the answer is ~15 MB of SSE): "
                            "not bounded" % grown)
        # Now read everything.
        raw = bytearray()
        deadline = time.time() + 60
        while time.time() < deadline:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            raw += chunk
        s.close()
        events = dechunk(bytes(raw)).split(b"\n\n")
        text = []
        done = False
        for ev in events:
            if not ev.startswith(b"data: "):
                continue
            data = ev[6:]
            if data == b"[DONE]":
                done = True
                continue
            obj = json.loads(data)
            if "error" in obj:
                failures.append("error event: %r" % obj)
            for ch in obj.get("choices", []):
                c = ch.get("delta", {}).get("content")
                if c:
                    text.append(c)
        want = "[%s]" % MODEL + "".join(" w%d" % i for i in range(1, TOKENS + 1))
        got = "".join(text)
        if got != want:
            failures.append("answer differs: %d chars, want %d" % (len(got), len(want)))
        if not done:
            failures.append("no [DONE]: not a clean end")
    finally:
        airtest.stop_all()
        airtest.remove_work()
    for f in failures:
        print("FAIL: " + f)
    print("backpressure: %s" % ("ok" if not failures else "FAILED"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
