#!/usr/bin/env python3
"""Security tests of `airetry serve` (the claims are in docs/security.md).

    python3 tests/security/test_gateway.py PATH/TO/airetry [NAME-SUBSTRING...]

Starts `airetry mock`, gateways in front of it and small raw TCP listeners
(stand-ins for upstreams that record every request head), all on 127.0.0.1
ephemeral ports, and checks, one named test at a time:

  auth/*       client keys on every endpoint but /healthz, both header forms,
               both keys; wrong / prefix / longer / empty keys -> 401 in the
               endpoint's dialect; checked at the head: 401 and close before
               any body byte (never 100 Continue)
  secrets/*    upstream and client keys never in a log line, response (status
               line, headers, body) or /metrics, in any usual encoding; the
               upstream key reaches the upstream, the caller's key does not
  inject/*     CR/LF in forwarded or configured header values never reaches
               the upstream
  url/*        the upstream URL comes only from config
  smuggle/*    ambiguous framing -> 400 and close; the next connection works
  upstream/*   a hostile upstream: whole-JSON, endless or huge answers
  limits/*     408 slow requests, 413 bodies, 431 heads, 503 connections,
               503 for bodies over max_inflight_body_bytes (process-wide),
               charged as they arrive; bodies on bodiless endpoints refused
               at the head; a caller that stops reading closed after
               client_write_timeout_ms (499)
  listen/*     a non-loopback listen needs client keys or --insecure

Standard library only; every socket is a 127.0.0.1 one and every wait is
bounded. Prints one "ok"/"FAIL" line per test and exits 1 when any failed.
Tests that cannot pass yet because of a known gateway bug stay in and fail
(see docs/security.md, "Findings").
"""

import base64
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import urllib.parse

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import airtest  # noqa: E402
from airtest import LOCAL, PROCS, Proc, check  # noqa: E402


# ---- secrets -------------------------------------------------------------------
# Distinctive values with characters that change under URL- and
# JSON-encoding ('/', '+', '='), so every encoded form differs from the raw one.
OPENAI_KEY = "sk-UPSTREAMSECRET/openai+7f3a9c1e5b="
ANTHROPIC_KEY = "sk-ant-UPSTREAMSECRET/anth+2d8e4b6a0c="
CLIENT_K1 = "ck-CLIENTSECRET/one+91b2c3d4e5="
CLIENT_K2 = "ck-CLIENTSECRET/two+4d5e6f7788a="  # another length than K1
SECRETS = [OPENAI_KEY, ANTHROPIC_KEY, CLIENT_K1, CLIENT_K2]
# Substrings that no output may hold either (catch truncated or wrong-key echoes).
SECRET_CORES = ["UPSTREAMSECRET", "CLIENTSECRET"]

ENV_SECRETS = {
    "SECTEST_OPENAI_KEY": OPENAI_KEY,
    "SECTEST_ANTHROPIC_KEY": ANTHROPIC_KEY,
    "SECTEST_CLIENT_KEYS": CLIENT_K1 + "," + CLIENT_K2,
}

# Wrong keys that resemble the real ones.
WRONG_KEYS = {
    "same length, last byte changed": CLIENT_K1[:-1] + "X",
    "prefix of a valid key": CLIENT_K1[:-4],
    "valid key plus one byte": CLIENT_K1 + "0",
    "other key's prefix, K1's length": CLIENT_K2[: len(CLIENT_K1)],
    "both keys joined": CLIENT_K1 + "," + CLIENT_K2,
    "case changed": CLIENT_K1.upper(),
    "the upstream key": OPENAI_KEY,
}

# ---- bookkeeping -----------------------------------------------------------------

WORK = airtest.init("security")  # PROCS: every process started, stopped at the end
LISTENERS = []
CAPTURED = []  # (label, bytes): every byte a gateway or the CLI sent us
CAPTURED_LOCK = threading.Lock()
RESULTS = []
FWD_SENSITIVE = set()  # indexes of raw-upstream requests made by that test


def capture(label, data):
    if isinstance(data, str):
        data = data.encode("utf-8", "replace")
    with CAPTURED_LOCK:
        CAPTURED.append((label, data))


class Skip(Exception):
    pass


def short(b, n=300):
    if isinstance(b, bytes):
        b = b.decode("utf-8", "replace")
    return b if len(b) <= n else b[:n] + "..."


# ---- processes ------------------------------------------------------------------------


write_config = airtest.write_file


def start_gateway(name, cfg, env=None, workers=2, listen=LOCAL + ":0", extra=()):
    path = write_config(name + ".json", cfg)
    e = dict(ENV_SECRETS)
    e.update(env or {})
    args = [BIN, "serve", "--config", path, "--workers", str(workers)]
    if listen is not None:
        args += ["--listen", listen]
    args += list(extra)
    return Proc(name, args, env=e)


# ---- a raw upstream: records request heads, answers a minimal success ----------------


def parse_head(head):
    """(request line, [(lower name, value)], [raw lines]) of a head (bytes)."""
    lines = head.split(b"\r\n")
    fields = []
    for ln in lines[1:]:
        name, _, value = ln.partition(b":")
        fields.append((name.strip().lower().decode("latin-1"),
                       value.strip().decode("latin-1")))
    return lines[0].decode("latin-1"), fields, lines


OPENAI_OK = {
    "id": "raw-1", "object": "chat.completion", "created": 0, "model": "raw-model",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "raw ok"},
                 "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
}
ANTHROPIC_OK = {
    "id": "msg_raw", "type": "message", "role": "assistant", "model": "raw-model",
    "content": [{"type": "text", "text": "raw ok"}], "stop_reason": "end_turn",
    "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 2},
}


def openai_sse():
    def chunk(delta, finish=None):
        return "data: " + json.dumps({
            "id": "raw-1", "object": "chat.completion.chunk", "created": 0,
            "model": "raw-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + "\n\n"
    return (chunk({"role": "assistant", "content": ""}) + chunk({"content": "raw ok"}) +
            chunk({}, "stop") + "data: [DONE]\n\n").encode()


def anthropic_sse():
    evs = [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_raw", "type": "message", "role": "assistant", "model": "raw-model",
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 0}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "raw ok"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                           "usage": {"output_tokens": 2}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return "".join("event: %s\ndata: %s\n\n" % (n, json.dumps(d)) for n, d in evs).encode()


class RawListener:
    """A TCP listener on 127.0.0.1 that records every request (head, body).

    It answers like a healthy upstream: an event stream in the dialect of
    the path (the gateway always asks upstreams for a stream). A request
    whose model contains "jsonbody" gets a whole JSON response instead (some
    upstreams ignore `stream`), and one whose model contains "echokey" gets
    what a hostile upstream might send: a 401 whose message repeats the key
    it was given.
    """

    def __init__(self, name):
        self.name = name
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((LOCAL, 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.connections = 0
        self.requests = []  # dicts: line, fields, lines, head, body
        self.stopped = False
        self.t = threading.Thread(target=self._loop, daemon=True)
        self.t.start()
        LISTENERS.append(self)

    def _loop(self):
        while not self.stopped:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                self.connections += 1
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        buf = b""
        head = body = None
        try:
            c.settimeout(5)
            while b"\r\n\r\n" not in buf and len(buf) < (1 << 20):
                d = c.recv(65536)
                if not d:
                    break
                buf += d
            head, sep, body = buf.partition(b"\r\n\r\n")
            if not sep:
                return
            line, fields, lines = parse_head(head)
            hd = dict(fields)
            if hd.get("expect", "").lower() == "100-continue":
                c.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            if "chunked" in hd.get("transfer-encoding", "").lower():
                while not body.endswith(b"0\r\n\r\n"):
                    d = c.recv(65536)
                    if not d:
                        break
                    body += d
            else:
                # The smallest Content-Length wins: a second, forged one
                # must not make us wait.
                cls = [int(v) for n, v in fields if n == "content-length" and v.isdigit()]
                n = min(cls) if cls else 0
                while len(body) < n:
                    d = c.recv(65536)
                    if not d:
                        break
                    body += d
            self._record(head, body)
            head = None
            self._answer(c, line, hd, body)
        except OSError:
            pass
        finally:
            if head is not None:
                self._record(head, body or b"")
            c.close()

    def _record(self, head, body):
        line, fields, lines = parse_head(head)
        with self.lock:
            self.requests.append({"line": line, "fields": fields, "lines": lines,
                                  "head": head, "body": body})

    def _answer(self, c, line, hd, body):
        anthropic = " /v1/messages " in line
        try:
            model = json.loads(body).get("model", "")
        except (ValueError, AttributeError):
            model = ""
        ctype = b"application/json"
        if "hugeline" in model:
            # An event-stream line that never ends.
            c.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                      b"connection: close\r\n\r\ndata: ")
            for _ in range(64):  # up to 16 MiB, until the gateway hangs up
                c.sendall(b"a" * (256 << 10))
            return
        if "redirect" in model:
            loc = (NEVER_URL or "http://127.0.0.1:9/v1") + "/chat/completions"
            c.sendall(b"HTTP/1.1 307 Temporary Redirect\r\nlocation: " + loc.encode() +
                      b"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            return
        if "hugeerr" in model:
            n = 16 << 20
            c.sendall(b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: "
                      b"application/json\r\ncontent-length: %d\r\n\r\n" % n)
            for _ in range(n // (256 << 10)):
                c.sendall(b"x" * (256 << 10))
            return
        if "echokey" in model:
            key = hd.get("x-api-key") or hd.get("authorization", "")
            if anthropic:
                obj = {"type": "error", "error": {
                    "type": "authentication_error",
                    "message": "invalid x-api-key: " + key}}
            else:
                obj = {"error": {"message": "Incorrect API key provided: " + key,
                                 "type": "invalid_request_error",
                                 "code": "invalid_api_key"}}
            status, data = b"401 Unauthorized", json.dumps(obj).encode()
        elif "jsonbody" in model:
            obj = ANTHROPIC_OK if anthropic else OPENAI_OK
            status, data = b"200 OK", json.dumps(obj).encode()
        else:
            status, ctype = b"200 OK", b"text/event-stream"
            data = anthropic_sse() if anthropic else openai_sse()
        c.sendall(b"HTTP/1.1 " + status + b"\r\ncontent-type: " + ctype +
                  b"\r\ncontent-length: " + str(len(data)).encode() +
                  b"\r\nconnection: close\r\n\r\n" + data)

    def snapshot(self):
        with self.lock:
            return list(self.requests), self.connections

    def stop(self):
        self.stopped = True
        try:
            self.sock.close()
        except OSError:
            pass


# ---- an HTTP/1.1 client on raw sockets --------------------------------------------------


class Resp:
    def __init__(self, raw, eof):
        self.raw = raw
        self.eof = eof  # the server closed the connection (within the wait)
        self.status = 0
        self.reason = ""
        self.headers = []
        self.body = b""
        self.rest = b""  # bytes after this response (a second response?)
        head, sep, rest = raw.partition(b"\r\n\r\n")
        # Skip interim 1xx responses.
        while sep and head.startswith(b"HTTP/1.1 1"):
            head, sep, rest = rest.partition(b"\r\n\r\n")
        if not sep:
            return
        lines = head.split(b"\r\n")
        parts = lines[0].decode("latin-1").split(" ", 2)
        if len(parts) >= 2 and parts[1].isdigit():
            self.status = int(parts[1])
            self.reason = parts[2] if len(parts) > 2 else ""
        for ln in lines[1:]:
            n, _, v = ln.partition(b":")
            self.headers.append((n.strip().lower().decode("latin-1"),
                                 v.strip().decode("latin-1")))
        if "chunked" in self.header("transfer-encoding").lower():
            body = b""
            while True:
                size_line, sep2, rest = rest.partition(b"\r\n")
                if not sep2:
                    break
                try:
                    size = int(size_line.split(b";")[0], 16)
                except ValueError:
                    break
                if size == 0:
                    _, _, rest = rest.partition(b"\r\n")
                    break
                body += rest[:size]
                rest = rest[size + 2:]
            self.body, self.rest = body, rest
        elif self.header("content-length"):
            n = int(self.header("content-length"))
            self.body, self.rest = rest[:n], rest[n:]
        else:
            self.body = rest

    def header(self, name):
        for n, v in self.headers:
            if n == name:
                return v
        return ""

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            raise AssertionError("body is not JSON: %r" % short(self.body))

    def __repr__(self):
        return "<%d %s>" % (self.status, short(self.raw, 400))


def recv_until_close(s, timeout):
    """Reads until EOF or the deadline. Returns (bytes, eof)."""
    data = b""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return data, False
        s.settimeout(left)
        try:
            d = s.recv(65536)
        except socket.timeout:
            return data, False
        except (ConnectionResetError, BrokenPipeError):
            return data, True
        if not d:
            return data, True
        data += d


def connect(port, timeout=10):
    s = socket.create_connection((LOCAL, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def send_raw(port, data, timeout=20, label="raw"):
    """Sends bytes on a fresh connection, reads until close. Returns Resp."""
    s = connect(port)
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        raw, eof = recv_until_close(s, timeout)
    finally:
        s.close()
    capture(label, raw)
    return Resp(raw, eof)


def request(port, method, path, headers=None, body=None, timeout=30, label=None):
    """One request with `connection: close`; headers is a list of pairs."""
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    elif isinstance(body, str):
        body = body.encode()
    hs = [("Host", "%s:%d" % (LOCAL, port))]
    hs += list(headers or [])
    if body is not None:
        hs.append(("Content-Type", "application/json"))
        hs.append(("Content-Length", str(len(body))))
    hs.append(("Connection", "close"))
    head = "%s %s HTTP/1.1\r\n" % (method, path)
    head += "".join("%s: %s\r\n" % (n, v) for n, v in hs) + "\r\n"
    return send_raw(port, head.encode("latin-1") + (body or b""), timeout,
                    label or "%s %s" % (method, path))


def bearer(k):
    return [("Authorization", "Bearer " + k)]


def xkey(k):
    return [("x-api-key", k)]


def chat_body(model, stream=False, text="hello", **extra):
    b = {"model": model, "messages": [{"role": "user", "content": text}],
         "stream": stream}
    b.update(extra)
    return b


def msgs_body(model, stream=False, text="hello", **extra):
    b = {"model": model, "max_tokens": 64,
         "messages": [{"role": "user", "content": text}], "stream": stream}
    b.update(extra)
    return b


def mock_log(mock):
    return airtest.mock_log(mock.port)


def wait_until(pred, timeout, step=0.05):
    return airtest.wait_until(pred, timeout, step)


# ---- assertions shared by tests --------------------------------------------------------


def assert_openai_error(r, status, what):
    check(r.status == status, "%s: expected %d, got %r" % (what, status, r))
    check(r.header("content-type").startswith("application/json"),
          "%s: content-type %r" % (what, r.header("content-type")))
    b = r.json()
    check(isinstance(b.get("error"), dict) and isinstance(b["error"].get("message"), str)
          and isinstance(b["error"].get("type"), str),
          "%s: not an OpenAI error body: %r" % (what, short(r.body)))
    return b


def assert_anthropic_error(r, status, etype, what):
    check(r.status == status, "%s: expected %d, got %r" % (what, status, r))
    b = r.json()
    check(b.get("type") == "error" and isinstance(b.get("error"), dict),
          "%s: not an Anthropic error body: %r" % (what, short(r.body)))
    check(b["error"].get("type") == etype,
          "%s: error.type %r, expected %r" % (what, b["error"].get("type"), etype))
    check(isinstance(b["error"].get("message"), str), "%s: no error.message" % what)
    return b


def assert_closed_error(r, status, what):
    """A server-found error: the status, a JSON body, and the connection closed."""
    check(r.status == status, "%s: expected %d, got %r" % (what, status, r))
    b = r.json()
    check(isinstance(b.get("error"), dict), "%s: body %r" % (what, short(r.body)))
    check(r.header("connection").lower() == "close",
          "%s: no `connection: close` header: %r" % (what, r.headers))
    check(r.eof, "%s: the connection was not closed" % what)
    check(b"HTTP/1." not in r.rest,
          "%s: a second response followed: %r" % (what, short(r.rest)))


def forms(secret):
    """The secret and its encoded forms that must never appear in an output."""
    out = {secret, urllib.parse.quote(secret, safe=""),
           urllib.parse.quote_plus(secret), secret.replace("/", "\\/")}
    raw = secret.encode()
    for enc in (base64.b64encode, base64.urlsafe_b64encode):
        for pad in range(3):
            e = enc(b"\0" * pad + raw).decode().rstrip("=")
            # The part that depends only on the secret at this alignment.
            start = 4 if pad else 0
            out.add(e[start:-3])
        out.add(enc(raw).decode())
        out.add(enc(("Bearer " + secret).encode()).decode().rstrip("="))
    out.discard("")
    return out


def find_secrets(data):
    """Which secrets (or their forms / cores) occur in data (bytes)."""
    hits = []
    for s in SECRETS:
        for f in forms(s):
            if f.encode() in data:
                hits.append("%s (form %r)" % (s, f))
    for core in SECRET_CORES:
        for f in (core, base64.b64encode(core.encode()).decode()[:-4]):
            if f.encode() in data or f.lower().encode() in data.lower():
                hits.append("core %r" % f)
    return hits


# ---- the test registry ---------------------------------------------------------------

TESTS, test = airtest.registry()


class Fixture:
    mock = None
    g = None      # the main gateway: client keys, every provider kind
    raw = None    # the raw upstream the `raw*` providers point at
    never = None  # a raw listener no request may ever reach


F = Fixture()

SWITCH_ON = ["rate_limit", "overloaded", "server_error", "network", "malformed",
             "timeout.connect", "timeout.first_byte", "timeout.first_chunk",
             "timeout.chunk", "timeout.attempt", "context_overflow", "auth", "quota",
             "not_found", "refusal"]


closed_port = airtest.free_port


def main_config(mock_port, raw_port):
    mo = "http://%s:%d/v1" % (LOCAL, mock_port)
    ma = "http://%s:%d" % (LOCAL, mock_port)
    return {
        "listen": LOCAL + ":0",
        "client_keys_env": "SECTEST_CLIENT_KEYS",
        "forward_headers": ["anthropic-beta", "openai-organization"],
        "defaults": {
            "budget": {"max_total_attempts": 3},
            "timeouts": {"connect_ms": 2000, "first_byte_ms": 5000,
                         "first_chunk_ms": 5000, "chunk_ms": 5000},
            "breaker": {"enabled": False},
            "rules": [
                {"on": ["rate_limit", "overloaded", "server_error", "network",
                        "malformed"], "action": "retry", "max": 1,
                 "backoff": {"base_ms": 10, "factor": 2, "max_ms": 20,
                             "jitter": "none"},
                 "retry_after": {"max_ms": 100}},
                {"on": SWITCH_ON, "action": "switch"},
                {"on": ["content_filter", "bad_request", "length"], "action": "fail"},
            ],
        },
        "providers": [
            {"name": "mock", "api": "openai", "base_url": mo,
             "api_key_env": "SECTEST_OPENAI_KEY"},
            {"name": "mocka", "api": "anthropic", "base_url": ma,
             "api_key_env": "SECTEST_ANTHROPIC_KEY"},
            {"name": "raw", "api": "openai",
             "base_url": "http://%s:%d/v1" % (LOCAL, raw_port),
             "api_key_env": "SECTEST_OPENAI_KEY", "headers": {"x-static": "from-config"}},
            {"name": "rawa", "api": "anthropic",
             "base_url": "http://%s:%d" % (LOCAL, raw_port),
             "api_key_env": "SECTEST_ANTHROPIC_KEY"},
            {"name": "nokey", "api": "openai", "base_url": mo,
             "api_key_env": "SECTEST_NOT_SET_KEY"},
            {"name": "dead", "api": "openai",
             "base_url": "http://%s:%d/v1" % (LOCAL, closed_port()),
             "api_key_env": "SECTEST_OPENAI_KEY"},
            {"name": "rawr", "api": "openai_responses",
             "base_url": "http://%s:%d/v1" % (LOCAL, raw_port),
             "api_key_env": "SECTEST_OPENAI_KEY"},
        ],
        "routes": [
            {"name": "ok", "targets": ["mock/healthy"]},
            {"name": "ok-anth", "targets": ["mocka/healthy-a"]},
            {"name": "failover", "targets": ["mock/p@503", "mocka/fallback"]},
            {"name": "raw", "targets": ["raw/raw-model"]},
            {"name": "raw-anth", "targets": ["rawa/raw-model"]},
            {"name": "raw-json", "targets": ["raw/jsonbody"]},
            {"name": "raw-json-anth", "targets": ["rawa/jsonbody"]},
            {"name": "echo", "targets": ["raw/echokey"]},
            {"name": "huge-line", "targets": ["raw/hugeline"]},
            {"name": "redirect", "targets": ["raw/redirect"]},
            {"name": "huge-err", "targets": ["raw/hugeerr"]},
            {"name": "echo-anth", "targets": ["rawa/echokey"]},
            {"name": "refuse", "targets": ["mock/r@refuse"],
             "refusal": {"phrases": ["I'm sorry"]}},
            {"name": "silent", "targets": ["mock/s@silent=5000"],
             "timeouts": {"first_byte_ms": 150}},
            {"name": "no-key", "targets": ["nokey/m"]},
            {"name": "dead", "targets": ["dead/m"]},
        ],
    }


# ======================================================================================
# auth/*
# ======================================================================================

ENDPOINTS = [
    # (method, path, body, dialect, status with a valid key)
    ("POST", "/v1/chat/completions", chat_body("ok"), "openai", 200),
    ("POST", "/v1/messages", msgs_body("ok"), "anthropic", 200),
    ("GET", "/v1/models", None, "openai", 200),
    ("GET", "/metrics", None, "openai", 200),
    ("GET", "/v1/no-such-endpoint", None, "openai", 404),
    ("POST", "/v1/embeddings", {"model": "ok", "input": "x"}, "openai", 200),
    ("POST", "/v1/messages/count_tokens",
     {"model": "ok-anth", "messages": [{"role": "user", "content": "x"}]},
     "anthropic", 200),
]


def bad_auth_headers():
    cases = [("no key", [])]
    for what, k in WRONG_KEYS.items():
        cases.append(("Bearer " + what, bearer(k)))
        cases.append(("x-api-key " + what, xkey(k)))
    cases += [
        ("empty bearer", [("Authorization", "Bearer ")]),
        ("bare 'Bearer'", [("Authorization", "Bearer")]),
        ("empty x-api-key", [("x-api-key", "")]),
        ("Basic scheme with the key", [("Authorization", "Basic " + base64.b64encode(
            (":" + CLIENT_K1).encode()).decode())]),
        ("key without scheme", [("Authorization", CLIENT_K1)]),
        ("key in the query only", []),  # path gets ?key=K below
    ]
    return cases


@test("auth/rejected on every endpoint but /healthz, in the endpoint's dialect")
def t_auth_rejected():
    for method, path, body, dialect, _ in ENDPOINTS:
        for what, hs in bad_auth_headers():
            p = path
            if what == "key in the query only":
                p = path + "?key=" + urllib.parse.quote(CLIENT_K1, safe="") + \
                    "&api_key=" + urllib.parse.quote(CLIENT_K1, safe="")
            r = request(F.g.port, method, p, hs, body)
            label = "%s %s with %s" % (method, path, what)
            if dialect == "anthropic":
                assert_anthropic_error(r, 401, "authentication_error", label)
            else:
                b = assert_openai_error(r, 401, label)
                check(b["error"]["type"] in ("authentication_error",
                                             "invalid_request_error"),
                      "%s: error.type %r" % (label, b["error"]["type"]))
            check("x-airetry-target" not in dict(r.headers),
                  "%s: an upstream was tried: %r" % (label, r.headers))


@test("auth/no upstream attempt is made for a rejected caller")
def t_auth_no_upstream():
    before = len(mock_log(F.mock))
    reqs_before, _ = F.raw.snapshot()
    for what, hs in bad_auth_headers()[:6]:
        request(F.g.port, "POST", "/v1/chat/completions", hs, chat_body("ok"))
        request(F.g.port, "POST", "/v1/chat/completions", hs, chat_body("raw"))
        request(F.g.port, "POST", "/v1/messages", hs, msgs_body("ok-anth"))
    check(len(mock_log(F.mock)) == before, "the mock saw a request of a rejected caller")
    reqs_after, _ = F.raw.snapshot()
    check(len(reqs_after) == len(reqs_before),
          "the raw upstream saw a request of a rejected caller")


@test("auth/both keys accepted as Bearer and x-api-key on every endpoint")
def t_auth_accepted():
    for method, path, body, dialect, want in ENDPOINTS:
        for k in (CLIENT_K1, CLIENT_K2):
            for form, hs in (("Bearer", bearer(k)), ("x-api-key", xkey(k))):
                r = request(F.g.port, method, path, hs, body)
                label = "%s %s, %s key #%d" % (method, path, form,
                                               1 if k == CLIENT_K1 else 2)
                check(r.status == want, "%s: expected %d, got %r" % (label, want, r))


@test("auth/a wrong method on a chat path is also 401 without a key")
def t_auth_wrong_method():
    # decisions.md: "Client auth covers every endpoint but /healthz" -- a
    # request without a key learns nothing, not even which methods exist.
    for method, path in (("GET", "/v1/chat/completions"), ("GET", "/v1/messages"),
                         ("DELETE", "/v1/chat/completions")):
        r = request(F.g.port, method, path, [])
        check(r.status == 401,
              "%s %s without a key: expected 401, got %r" % (method, path, r))


@test("auth/healthz needs no key")
def t_auth_healthz():
    r = request(F.g.port, "GET", "/healthz", [])
    check(r.status == 200, "GET /healthz: %r" % r)
    r = request(F.g.port, "GET", "/healthz", bearer(WRONG_KEYS["prefix of a valid key"]))
    check(r.status == 200, "GET /healthz with a wrong key: %r" % r)


GIB = 1073741824


def big_head(path, key, extra=b""):
    """A POST head declaring a 1 GiB body (never sent)."""
    auth = b"Authorization: Bearer " + key.encode() + b"\r\n" if key else b""
    return (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n" + auth +
            b"Content-Type: application/json\r\n" + extra +
            b"Content-Length: %d\r\n\r\n" % GIB)


def head_only(port, data, label, timeout=10):
    """Sends a head, never its body; reads until the server closes."""
    s = connect(port)
    try:
        s.sendall(data)
        raw, eof = recv_until_close(s, timeout)
    finally:
        s.close()
    capture(label, raw)
    return Resp(raw, eof)


class BigBody:
    g = None  # a gateway whose max_body_bytes lets a 1 GiB head through


def big_body_gateway():
    if BigBody.g is None:
        cfg = main_config(F.mock.port, F.raw.port)
        cfg["limits"] = {"max_body_bytes": GIB}
        BigBody.g = start_gateway("gw-bigbody", cfg, workers=1)
    return BigBody.g


@test("auth/a 1 GiB head with a wrong key: 401 and close before any body byte")
def t_auth_before_body():
    # docs/design.md §5 "Auth before body": the key is checked at the head; the
    # caller gets 401 (never 100 Continue) and the close without sending
    # a body byte. Before the fix the gateway waited for the gigabyte.
    g = big_body_gateway()
    wrong = WRONG_KEYS["same length, last byte changed"]
    for what, path, key, extra, dialect in (
        ("wrong key", "/v1/chat/completions", wrong, b"", "openai"),
        ("no key", "/v1/chat/completions", None, b"", "openai"),
        ("wrong key, Anthropic", "/v1/messages", wrong, b"", "anthropic"),
        ("wrong key, Expect: 100-continue", "/v1/chat/completions", wrong,
         b"Expect: 100-continue\r\n", "openai"),
        ("no key, Expect: 100-continue, Anthropic", "/v1/messages", None,
         b"Expect: 100-continue\r\n", "anthropic"),
    ):
        r = head_only(g.port, big_head(path, key, extra), "auth before body " + what)
        label = "1 GiB head, " + what
        check(b"100 Continue" not in r.raw, "%s: got 100 Continue: %r" % (label, r))
        if dialect == "anthropic":
            assert_anthropic_error(r, 401, "authentication_error", label)
        else:
            assert_openai_error(r, 401, label)
        check(r.header("connection").lower() == "close",
              "%s: no `connection: close`: %r" % (label, r.headers))
        check(r.eof, "%s: the connection was not closed without the body" % label)
    ok = request(g.port, "GET", "/healthz", [])
    check(ok.status == 200, "the gateway after the 1 GiB heads: %r" % ok)


@test("auth/client_keys_env naming an unset variable fails closed")
def t_auth_unset_keys_var():
    # `airetry check` warns "no client key will be accepted"; the gateway
    # must then reject every caller rather than serve without auth.
    cfg = main_config(F.mock.port, F.raw.port)
    cfg["client_keys_env"] = "SECTEST_UNSET_CLIENT_KEYS"
    bad = []
    for what, env in (("unset", {}), ("empty", {"SECTEST_UNSET_CLIENT_KEYS": ""})):
        g = start_gateway("gw-keys-" + what, cfg, env=env)
        try:
            for method, path, body in (("GET", "/v1/models", None),
                                       ("POST", "/v1/chat/completions", chat_body("ok"))):
                r = request(g.port, method, path, [], body)
                if r.status != 401:
                    bad.append("variable %s: %s %s without a key -> %d" % (
                        what, method, path, r.status))
        finally:
            g.stop()
    check(not bad, "client_keys_env is set but serves without auth: " + "; ".join(bad))


# ======================================================================================
# secrets/*
# ======================================================================================


def scenario_requests():
    """(label, method, path, headers, body) of the whole secrets scenario."""
    K = bearer(CLIENT_K1)
    X = xkey(CLIENT_K2)
    out = []
    # Successes, every dialect pair, streaming and not.
    for stream in (False, True):
        out += [
            ("ok", "POST", "/v1/chat/completions", K, chat_body("ok", stream)),
            ("ok-anth", "POST", "/v1/messages", X, msgs_body("ok-anth", stream)),
            ("cross o->a", "POST", "/v1/chat/completions", X, chat_body("ok-anth", stream)),
            ("cross a->o", "POST", "/v1/messages", K, msgs_body("ok", stream)),
            ("failover", "POST", "/v1/chat/completions", K, chat_body("failover", stream)),
            ("raw", "POST", "/v1/chat/completions", K, chat_body("raw", stream)),
            ("raw-anth", "POST", "/v1/messages", X, msgs_body("raw-anth", stream)),
        ]
    # Failures of every kind.
    fails = ["mock/f@429", "mock/f@429@code=insufficient_quota", "mock/f@503",
             "mock/f@529", "mock/f@500", "mock/f@401", "mock/f@403", "mock/f@404",
             "mock/f@400", "mock/f@reset", "mock/f@bad=1", "mock/f@length",
             "mock/f@filter", "mock/f@cut=2", "mock/f@overload=2", "mock/f@nodone",
             "mock/f@429@ra=0.05", "refuse", "silent", "no-key", "dead"]
    for m in fails:
        for stream in (False, True):
            out.append(("fail " + m, "POST", "/v1/chat/completions", K,
                        chat_body(m, stream)))
            out.append(("fail " + m, "POST", "/v1/messages", X,
                        msgs_body(m.replace("mock/", "mocka/"), stream)))
    # Bad requests.
    out += [
        ("bad json", "POST", "/v1/chat/completions", K, b"{not json"),
        ("bad json a", "POST", "/v1/messages", X, b"{\"model\": "),
        ("no model", "POST", "/v1/chat/completions", K, {"messages": []}),
        ("messages not a list", "POST", "/v1/messages", X,
         {"model": "ok", "max_tokens": 5, "messages": "x"}),
        ("unknown model", "POST", "/v1/chat/completions", K, chat_body("no-such-route")),
        ("unknown provider", "POST", "/v1/messages", X, msgs_body("nope/m")),
        ("n>1 across dialects", "POST", "/v1/chat/completions", K,
         chat_body("ok-anth", n=3)),
        ("bad utf-8", "POST", "/v1/chat/completions", K,
         b'{"model":"ok","messages":[{"role":"user","content":"\xff\xfe"}]}'),
        ("wrong method", "PUT", "/v1/chat/completions", K, chat_body("ok")),
    ]
    # Auth failures with keys that resemble the real ones.
    for what, k in WRONG_KEYS.items():
        out.append(("wrong key " + what, "POST", "/v1/chat/completions", bearer(k),
                    chat_body("ok")))
        out.append(("wrong key " + what, "POST", "/v1/messages", xkey(k),
                    msgs_body("ok")))
        out.append(("wrong key " + what, "GET", "/metrics", bearer(k), None))
    return out


@test("secrets/whole scenario: statuses as expected")
def t_secrets_scenario():
    n_ok = n_err = 0
    for label, method, path, hs, body in scenario_requests():
        r = request(F.g.port, method, path, hs, body, label="scenario " + label)
        check(r.status != 0, "%s: no response: %r" % (label, r))
        check(r.status < 500 or r.status in (502, 503, 504) or label.startswith("fail"),
              "%s: unexpected %r" % (label, r))
        if label.startswith("wrong key"):
            check(r.status == 401, "%s: expected 401, got %r" % (label, r))
        if r.status == 200:
            n_ok += 1
        else:
            n_err += 1
    check(n_ok >= 14 and n_err >= 40, "scenario: %d ok, %d errors" % (n_ok, n_err))
    r = request(F.g.port, "GET", "/metrics", bearer(CLIENT_K2), label="metrics")
    check(r.status == 200 and b"airetry_requests_total" in r.body, "metrics: %r" % r)


@test("secrets/the upstream key reaches the upstream; the caller's key does not")
def t_secrets_upstream_headers():
    before, _ = F.raw.snapshot()
    # The caller presents both header forms; only Bearer K1 authenticates.
    both = bearer(CLIENT_K1) + xkey(CLIENT_K2)
    r1 = request(F.g.port, "POST", "/v1/chat/completions", both, chat_body("raw"))
    r2 = request(F.g.port, "POST", "/v1/messages", both, msgs_body("raw-anth"))
    r3 = request(F.g.port, "POST", "/v1/messages", xkey(CLIENT_K2), msgs_body("raw"))
    r4 = request(F.g.port, "POST", "/v1/chat/completions", bearer(CLIENT_K2),
                 chat_body("raw-anth", stream=True))
    for r in (r1, r2, r3, r4):
        check(r.status == 200 and b"raw ok" in r.body, "raw upstream answer: %r" % r)
    after, _ = F.raw.snapshot()
    new = after[len(before):]
    check(len(new) == 4, "raw upstream: %d requests, expected 4" % len(new))
    for req in new:
        fields = req["fields"]
        auth = [v for n, v in fields if n == "authorization"]
        xk = [v for n, v in fields if n == "x-api-key"]
        if " /v1/messages " in req["line"]:
            check(xk == [ANTHROPIC_KEY], "anthropic upstream x-api-key: %r" % xk)
            check(auth == [], "anthropic upstream got Authorization: %r" % auth)
            check(any(n == "anthropic-version" for n, _ in fields),
                  "no anthropic-version upstream")
        else:
            check(req["line"].startswith("POST /v1/chat/completions "),
                  "openai upstream request line %r" % req["line"])
            check(auth == ["Bearer " + OPENAI_KEY], "openai upstream Authorization: %r" % auth)
            check(xk == [], "openai upstream got x-api-key: %r" % xk)
        blob = req["head"] + b"\r\n\r\n" + req["body"]
        for k in (CLIENT_K1, CLIENT_K2, "CLIENTSECRET"):
            check(k.encode() not in blob,
                  "the caller's key %r reached the upstream: %r" % (k, short(req["head"], 800)))


@test("upstream/a whole-JSON 200 answer (no event stream) is relayed intact")
def t_upstream_json_body():
    # exchange.c finish_body: an upstream that ignores `stream: true`. On a
    # gateway of its own: a memory error here must not take the main one down.
    g = start_gateway("gw-json", main_config(F.mock.port, F.raw.port), workers=1)
    try:
        bad = upstream_json_body(g)
    finally:
        g.stop()
    check(not bad, "answer garbled (decoded strings used after json_decref?): "
          + "; ".join(bad))


def upstream_json_body(g):
    bad = []
    for path, body, want in (
            ("/v1/chat/completions", chat_body("raw-json"), "openai"),
            ("/v1/messages", msgs_body("raw-json-anth"), "anthropic"),
            ("/v1/messages", msgs_body("raw-json"), "anthropic"),
            ("/v1/chat/completions", chat_body("raw-json-anth"), "openai")):
        r = request(g.port, "POST", path, bearer(CLIENT_K1), body, label="json-body")
        if r.status != 200:
            bad.append("%s %s: %r" % (path, body["model"], r))
            continue
        try:
            b = json.loads(r.body)
        except ValueError:
            bad.append("%s %s: not JSON: %r" % (path, body["model"], short(r.body, 200)))
            continue
        if want == "openai":
            text = b["choices"][0]["message"].get("content")
        else:
            text = "".join(c.get("text", "") for c in b.get("content", []))
        hits = find_secrets(r.raw)
        if hits:
            bad.append("%s %s: heap bytes with %s" % (path, body["model"], hits[0]))
        if text != "raw ok" or b.get("model") != "raw-model":
            bad.append("%s %s: content %r, model %r" % (path, body["model"], text,
                                                        b.get("model")))
    return bad


@test("upstream/an endless event line or a huge error body is cut, bounded")
def t_upstream_oversized():
    for route, mk, path in (("huge-line", chat_body, "/v1/chat/completions"),
                            ("huge-err", msgs_body, "/v1/messages")):
        for stream in (False, True):
            t0 = time.monotonic()
            r = request(F.g.port, "POST", path, bearer(CLIENT_K1), mk(route, stream),
                        timeout=60, label="oversized")
            took = time.monotonic() - t0
            check(r.status in (500, 502), "%s stream=%s: expected 502 (or the "
                  "upstream's 500), got %r" % (route, stream, r))
            check(len(r.raw) < 64 << 10, "%s: %d bytes relayed" % (route, len(r.raw)))
            check(took < 30, "%s: took %.1f s" % (route, took))
    r = request(F.g.port, "GET", "/healthz", [])
    check(r.status == 200, "gateway unhealthy afterwards: %r" % r)


@test("secrets/an upstream error that repeats the key is not relayed to the caller")
def t_secrets_hostile_echo():
    # A misbehaving upstream puts the key it received into its 401 message;
    # the gateway relays upstream messages in its error body.
    leaks = []
    for path, body, hs in (("/v1/chat/completions", chat_body("echo"), bearer(CLIENT_K1)),
                           ("/v1/messages", msgs_body("echo-anth"), xkey(CLIENT_K2)),
                           ("/v1/messages", msgs_body("echo"), xkey(CLIENT_K2)),
                           ("/v1/chat/completions", chat_body("echo-anth", stream=True),
                            bearer(CLIENT_K1))):
        r = request(F.g.port, "POST", path, hs, body, label="hostile-echo")
        check(r.status == 401, "%s echo: expected the upstream's 401, got %r" % (path, r))
        hits = find_secrets(r.raw)
        if hits:
            leaks.append("%s -> %s in %s" % (path, hits[0], short(r.body, 400)))
    check(not leaks, "upstream key relayed to the caller: " + "; ".join(leaks))


@test("secrets/the CLI does not print keys (check, bad flags)")
def t_secrets_cli():
    path = write_config("cli.json", main_config(F.mock.port, F.raw.port))
    env = dict(os.environ)
    env.update(ENV_SECRETS)
    for args in (["check", "--config", path], ["serve", "--config", path, "--bogus"],
                 ["serve", "--config", path, "--listen", "bad"]):
        p = subprocess.run([BIN] + args, env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=20)
        capture("cli " + " ".join(args[:1]), p.stdout + p.stderr)
        hits = find_secrets(p.stdout + p.stderr)
        check(not hits, "airetry %s printed %s" % (args[0], hits))


# ======================================================================================
# inject/*
# ======================================================================================

INJECTIONS = [
    ("obs-fold", b"anthropic-beta: tools-1\r\n X-Injected: 1\r\n"),
    ("obs-fold tab", b"anthropic-beta: tools-1\r\n\tX-Injected: 1\r\n"),
    ("bare CR", b"anthropic-beta: tools-1\rX-Injected: 1\r\n"),
    ("bare LF", b"anthropic-beta: tools-1\nX-Injected: 1\r\n"),
    ("NUL", b"anthropic-beta: tools-1\0\r\nX-Injected: 1\r\n"),
    ("CRLF in openai-organization", b"openai-organization: org\r\n X-Injected: 1\r\n"),
]


def raw_chat(port, path, body, extra_head, key=CLIENT_K1):
    data = json.dumps(body).encode()
    head = (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Authorization: Bearer " + key.encode() + b"\r\n" + extra_head +
            b"Content-Type: application/json\r\nContent-Length: " +
            str(len(data)).encode() + b"\r\nConnection: close\r\n\r\n")
    return send_raw(port, head + data, label="inject")


def assert_no_injection(reqs, what):
    for req in reqs:
        for ln in req["lines"]:
            check(not ln.lower().startswith(b"x-injected"),
                  "%s: X-Injected reached the upstream: %r" % (what, short(req["head"], 800)))
            check(b"\r" not in ln and b"\n" not in ln and b"\0" not in ln,
                  "%s: a raw CR/LF/NUL inside an upstream header line: %r" % (what, ln))


@test("inject/forwarded headers reach same-dialect upstreams (control)")
def t_inject_control():
    before, _ = F.raw.snapshot()
    r = raw_chat(F.g.port, "/v1/messages", msgs_body("raw-anth"),
                 b"anthropic-beta: tools-2024\r\n")
    check(r.status == 200, "control: %r" % r)
    r = raw_chat(F.g.port, "/v1/chat/completions", chat_body("raw"),
                 b"openai-organization: org-42\r\nX-Not-Listed: 1\r\n")
    check(r.status == 200, "control: %r" % r)
    after, _ = F.raw.snapshot()
    new = after[len(before):]
    check(len(new) == 2, "control: %d upstream requests" % len(new))
    f0, f1 = dict(new[0]["fields"]), dict(new[1]["fields"])
    check(f0.get("anthropic-beta") == "tools-2024", "anthropic-beta not forwarded: %r" % f0)
    check(f1.get("openai-organization") == "org-42",
          "openai-organization not forwarded: %r" % f1)
    check("x-not-listed" not in f1, "a header not in forward_headers was forwarded")
    check(f1.get("x-static") == "from-config", "provider headers: not sent: %r" % f1)


@test("inject/CR/LF in a forwarded header value: 400 or never sent upstream")
def t_inject_forwarded():
    for what, head in INJECTIONS:
        before, _ = F.raw.snapshot()
        path, body = ("/v1/messages", msgs_body("raw-anth"))
        if b"openai" in head:
            path, body = ("/v1/chat/completions", chat_body("raw"))
        r = raw_chat(F.g.port, path, body, head)
        after, _ = F.raw.snapshot()
        new = after[len(before):]
        if r.status == 400:
            check(r.eof, "%s: 400 without closing the connection" % what)
            check(not new, "%s: 400 but the upstream was contacted" % what)
        else:
            check(r.status == 200, "%s: expected 400 or 200, got %r" % (what, r))
        assert_no_injection(new, what)


@test("inject/CR/LF in provider headers or forward_headers in the config is an error")
def t_inject_config():
    bad_values = {
        "value CRLF": {"x-static": "a\r\nX-Injected: 1"},
        "value LF": {"x-static": "a\nX-Injected: 1"},
        "value CR": {"x-static": "a\rX-Injected: 1"},
        "name CRLF": {"x-a\r\nX-Injected": "1"},
    }
    for what, headers in bad_values.items():
        cfg = main_config(F.mock.port, F.raw.port)
        cfg["providers"][2]["headers"] = headers
        path = write_config("inject-%s.json" % what.replace(" ", "-"), cfg)
        p = subprocess.run([BIN, "check", "--config", path], stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=20, env=dict(os.environ, **ENV_SECRETS))
        capture("check inject", p.stdout + p.stderr)
        check(p.returncode != 0, "check accepted provider headers with %s" % what)
        g = None
        try:
            g = start_gateway("gw-inject", cfg)
        except RuntimeError:
            g = None  # refused to start: the config error we want
        if g is not None:
            before, _ = F.raw.snapshot()
            r = request(g.port, "POST", "/v1/chat/completions", bearer(CLIENT_K1),
                        chat_body("raw"))
            after, _ = F.raw.snapshot()
            g.stop()
            assert_no_injection(after[len(before):], "config " + what)
            raise AssertionError("serve started with provider headers with %s (%r)"
                                 % (what, r))
    cfg = main_config(F.mock.port, F.raw.port)
    cfg["forward_headers"] = ["anthropic-beta\r\nX-Injected"]
    path = write_config("inject-fwd.json", cfg)
    p = subprocess.run([BIN, "check", "--config", path], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=20)
    check(p.returncode != 0, "check accepted a forward_headers name with CR/LF")


@test("inject/forward_headers cannot forward the caller's key or framing headers")
def t_inject_forward_sensitive():
    # docs/design.md §4: "The caller's own Authorization / x-api-key is never
    # forwarded upstream". A config that lists them (or Host, or framing
    # headers) must be refused, or the gateway must not forward them.
    cfg = main_config(F.mock.port, F.raw.port)
    cfg["forward_headers"] = ["anthropic-beta", "authorization", "x-api-key", "host",
                              "content-length", "transfer-encoding", "connection"]
    try:
        g = start_gateway("gw-fwd-sensitive", cfg)
    except RuntimeError:
        return  # refused: fine
    try:
        before, _ = F.raw.snapshot()
        data = json.dumps(chat_body("raw")).encode()
        head = ("POST /v1/chat/completions HTTP/1.1\r\nHost: evil.example:8443\r\n"
                "Authorization: Bearer %s\r\nx-api-key: %s\r\n"
                "Content-Type: application/json\r\nContent-Length: %d\r\n"
                "Connection: close\r\n\r\n" % (CLIENT_K1, CLIENT_K2, len(data)))
        r = send_raw(g.port, head.encode() + data, label="fwd-sensitive")
        data2 = json.dumps(msgs_body("raw-anth")).encode()
        head2 = ("POST /v1/messages HTTP/1.1\r\nHost: evil.example\r\n"
                 "x-api-key: %s\r\nContent-Type: application/json\r\n"
                 "Content-Length: %d\r\nConnection: close\r\n\r\n" % (CLIENT_K2, len(data2)))
        r2 = send_raw(g.port, head2.encode() + data2, label="fwd-sensitive")
        after, _ = F.raw.snapshot()
    finally:
        g.stop()
    new = after[len(before):]
    FWD_SENSITIVE.update(range(len(before), len(after)))
    problems = []
    for req in new:
        blob = req["head"]
        for k in (CLIENT_K1, CLIENT_K2):
            if k.encode() in blob:
                problems.append("caller key %s forwarded" % k[:16])
        fields = req["fields"]
        hosts = [v for n, v in fields if n == "host"]
        if hosts != ["%s:%d" % (LOCAL, F.raw.port)]:
            problems.append("Host %r" % hosts)
        cls = [v for n, v in fields if n == "content-length"]
        if cls != [str(len(req["body"]))]:
            problems.append("Content-Length %r for a %d-byte body" % (cls, len(req["body"])))
        if len([n for n, _ in fields if n in ("authorization", "x-api-key")]) != 1:
            problems.append("%d auth headers" % len(
                [n for n, _ in fields if n in ("authorization", "x-api-key")]))
    check(r.status != 0 and r2.status != 0, "fwd-sensitive: %r %r" % (r, r2))
    check(not problems, "forward_headers [authorization, x-api-key, host, "
          "content-length, ...] was accepted and: " + "; ".join(sorted(set(problems))))


# ======================================================================================
# url/*
# ======================================================================================

NEVER_URL = None  # set in main: http://127.0.0.1:<never>/v1


@test("url/unknown provider or a URL as the model -> 404 in the caller's dialect")
def t_url_unknown_provider():
    models = ["nosuch/gpt-4o", "never/m", NEVER_URL + "/chat/completions",
              "http://127.0.0.1:%d" % F.never.port, "//127.0.0.1:%d/x" % F.never.port,
              "127.0.0.1:%d/m" % F.never.port, "raw2/raw-model", "/raw-model"]
    for m in models:
        r = request(F.g.port, "POST", "/v1/chat/completions", bearer(CLIENT_K1),
                    chat_body(m))
        assert_openai_error(r, 404, "openai model %r" % m)
        r = request(F.g.port, "POST", "/v1/messages", xkey(CLIENT_K2), msgs_body(m))
        assert_anthropic_error(r, 404, "not_found_error", "anthropic model %r" % m)


def spoof_headers():
    nv = "127.0.0.1:%d" % F.never.port
    return [("X-Forwarded-Host", nv), ("X-Forwarded-Proto", "http"),
            ("X-Forwarded-Port", str(F.never.port)), ("Forwarded", "host=" + nv),
            ("X-Airetry-Upstream", NEVER_URL), ("X-Airetry-Base-Url", NEVER_URL),
            ("X-Original-URL", NEVER_URL + "/chat/completions"),
            ("X-Rewrite-URL", NEVER_URL), ("X-Host", nv), ("Base-Url", NEVER_URL),
            ("anthropic-beta", NEVER_URL)]


def spoof_fields():
    return {"base_url": NEVER_URL, "url": NEVER_URL, "api_base": NEVER_URL,
            "baseURL": NEVER_URL, "endpoint": NEVER_URL, "api_url": NEVER_URL,
            "upstream": NEVER_URL, "provider": {"base_url": NEVER_URL},
            "extra_headers": {"Host": "127.0.0.1:%d" % F.never.port}}


@test("url/body fields and headers do not move the upstream request")
def t_url_spoof():
    before, _ = F.raw.snapshot()
    mock_before = len(mock_log(F.mock))
    n = 0
    # Same dialect only: across dialects the unknown fields are a 400.
    for route, path, mk in (("raw", "/v1/chat/completions", chat_body),
                            ("raw-anth", "/v1/messages", msgs_body),
                            ("ok", "/v1/chat/completions", chat_body),
                            ("ok-anth", "/v1/messages", msgs_body)):
        for stream in (False, True):
            body = mk(route, stream, **spoof_fields())
            hs = [("Host", "127.0.0.1:%d" % F.never.port)] + spoof_headers()
            hs += bearer(CLIENT_K1)
            data = json.dumps(body).encode()
            head = "POST %s HTTP/1.1\r\n" % path
            head += "".join("%s: %s\r\n" % h for h in hs)
            head += ("Content-Type: application/json\r\nContent-Length: %d\r\n"
                     "Connection: close\r\n\r\n" % len(data))
            r = send_raw(F.g.port, head.encode() + data, label="spoof")
            check(r.status == 200, "%s %s stream=%s: %r" % (route, path, stream, r))
            n += 1
    after, _ = F.raw.snapshot()
    new = after[len(before):]
    check(len(new) == 4, "raw upstream saw %d requests, expected 4" % len(new))
    for req in new:
        host = dict(req["fields"]).get("host")
        check(host == "%s:%d" % (LOCAL, F.raw.port), "upstream Host %r" % host)
        check(req["line"].split(" ")[1] in ("/v1/chat/completions", "/v1/messages"),
              "upstream path %r" % req["line"])
    check(len(mock_log(F.mock)) - mock_before == 4, "the mock did not see 4 requests")
    _, nc = F.never.snapshot()
    check(nc == 0, "the never-listener was contacted %d times" % nc)


@test("url/an absolute-form request target does not pick the upstream")
def t_url_absolute_form():
    before, _ = F.raw.snapshot()
    data = json.dumps(chat_body("raw")).encode()
    head = ("POST %s/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
            "Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\nConnection: close\r\n\r\n"
            % (NEVER_URL, F.never.port, CLIENT_K1, len(data)))
    r = send_raw(F.g.port, head.encode() + data, label="absolute-form")
    check(r.status in (200, 400, 404), "absolute-form: %r" % r)
    after, _ = F.raw.snapshot()
    if r.status == 200:
        check(len(after) == len(before) + 1, "absolute-form: not sent to the raw upstream")
    _, nc = F.never.snapshot()
    check(nc == 0, "the never-listener was contacted")


@test("url/an upstream redirect is not followed")
def t_url_redirect():
    for stream in (False, True):
        r = request(F.g.port, "POST", "/v1/chat/completions", bearer(CLIENT_K1),
                    chat_body("redirect", stream))
        check(r.status >= 300 and r.status != 200, "redirect: %r" % r)
    time.sleep(0.2)
    _, nc = F.never.snapshot()
    check(nc == 0, "the gateway followed the upstream's redirect to the never-listener")


@test("url/a model with path characters stays in the body, not the URL")
def t_url_model_path():
    before, _ = F.raw.snapshot()
    for m in ("raw/../../never", "raw/x?y=1#z", "raw/%2e%2e/x", "raw/a b"):
        r = request(F.g.port, "POST", "/v1/chat/completions", bearer(CLIENT_K1),
                    chat_body(m))
        check(r.status in (200, 400), "model %r: %r" % (m, r))
    after, _ = F.raw.snapshot()
    for req in after[len(before):]:
        check(req["line"].split(" ")[1] == "/v1/chat/completions",
              "upstream request line %r" % req["line"])


def log_line_of(proc, rid, timeout=10):
    """The gateway's log line of request rid (bytes), b"" when none came."""
    got = []

    def seen():
        for line in proc.stderr().split(b"\n"):
            if rid.encode() in line:
                got.append(line)
                return True
        return False
    wait_until(seen, timeout)
    return got[0] if got else b""


# A body's text that looks like a secret a caller typed into a prompt.
PROMPT_SECRET = "PROMPTSECRET-sk-9f8e7d6c5b4a"


@test("leak/a malformed JSON body is not quoted in the 400 or the log line")
def t_leak_json_error():
    bodies = [
        # an invalid token right at the secret
        '{"model": "ok", "messages": [{"role": "user", "content": %s}]}' % PROMPT_SECRET,
        # a bad escape inside the prompt's string
        '{"model": "ok", "messages": [{"role": "user", "content": "%s\\q"}]}'
        % PROMPT_SECRET,
        # the body ends inside the prompt's string
        '{"model": "ok", "messages": [{"role": "user", "content": "%s' % PROMPT_SECRET,
        # a key given twice
        '{"model": "ok", "%s": 1, "%s": 2, "messages": []}' % (PROMPT_SECRET, PROMPT_SECRET),
    ]
    for path, key in (("/v1/chat/completions", "openai"), ("/v1/messages", "anthropic")):
        for i, body in enumerate(bodies):
            what = "%s body %d" % (path, i)
            r = request(F.g.port, "POST", path, bearer(CLIENT_K1), body.encode())
            check(r.status == 400, "%s: expected 400, got %r" % (what, r))
            check(b"PROMPTSECRET" not in r.raw,
                  "%s: the answer quotes the body: %r" % (what, short(r.body)))
            msg = r.json()["error"]["message"]
            check(re.search(r"(line|column|byte|offset) \d+", msg) is not None,
                  "%s: no position in %r" % (what, msg))
            rid = r.header("x-request-id")
            line = log_line_of(F.g, rid)
            check(line, "%s: no log line for %s" % (what, rid))
            check(b"PROMPTSECRET" not in line,
                  "%s: the log line quotes the body: %r" % (what, short(line)))


@test("inject/CR/LF in a direct model name: the answer still goes out, the header is dropped")
def t_inject_direct_name_crlf():
    names = ["raw/m\r\nX-Injected: yes", "raw/m\nX-Injected: yes", "raw/m\rX-Injected: yes"]
    for name in names:
        for stream in (False, True):
            for path, body in (("/v1/chat/completions", chat_body(name, stream)),
                               ("/v1/messages", msgs_body(name.replace("raw/", "rawa/"),
                                                          stream))):
                what = "%s stream=%s model %r" % (path, stream, name)
                r = request(F.g.port, "POST", path, bearer(CLIENT_K1), body)
                check(r.status == 200, "%s: expected 200, got %r" % (what, r))
                check(b"X-Injected" not in r.raw.split(b"\r\n\r\n", 1)[0],
                      "%s: the name reached the head: %r" % (what, short(r.raw)))
                check(r.header("x-airetry-attempts") != "",
                      "%s: the other headers are gone: %r" % (what, short(r.raw)))
    r = request(F.g.port, "POST", "/v1/embeddings", bearer(CLIENT_K1),
                {"model": "mock/e\r\nX-Injected: yes", "input": "x"})
    check(r.status != 500, "embeddings with CR/LF in a direct name: %r" % r)
    check(b"X-Injected" not in r.raw.split(b"\r\n\r\n", 1)[0],
          "embeddings: the name reached the head: %r" % short(r.raw))


@test("url/a streamed retrieval is refused however its query is encoded")
def t_url_retrieve_stream_encoded():
    before, _ = F.raw.snapshot()
    for q in ("stream=true", "stream=%74rue", "%73tream=true", "stream=%74%72%75%65",
              "include[]=x&stream=tru%65", "stream=True", "stream=1", "stream=%54RUE"):
        r = request(F.g.port, "GET", "/v1/responses/resp_1?" + q, bearer(CLIENT_K1))
        check(r.status == 400, "?%s: expected 400, got %r" % (q, r))
    for q in ("stream=%zz", "stream=%7"):
        r = request(F.g.port, "GET", "/v1/responses/resp_1?" + q, bearer(CLIENT_K1))
        check(r.status == 400, "?%s (bad percent-encoding): expected 400, got %r" % (q, r))
    after, _ = F.raw.snapshot()
    check(len(after) == len(before),
          "a streamed retrieval reached the upstream: %r" %
          [a["line"] for a in after[len(before):]])
    # Control: a retrieval that does not stream is forwarded.
    r = request(F.g.port, "GET", "/v1/responses/resp_1?stream=false&include[]=x",
                bearer(CLIENT_K1))
    check(r.status != 400, "?stream=false: %r" % r)
    after, _ = F.raw.snapshot()
    check(any("/v1/responses/resp_1?" in a["line"] for a in after[len(before):]),
          "the control retrieval did not reach the upstream")


# ======================================================================================
# smuggle/*
# ======================================================================================

SMUGGLED = b"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + \
    CLIENT_K1.encode() + b"\r\n\r\n"


def post_head(extra):
    return (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Authorization: Bearer " + CLIENT_K1.encode() + b"\r\n" + extra)


SMUGGLING = [
    ("Content-Length with Transfer-Encoding",
     post_head(b"Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n") + SMUGGLED),
    ("Transfer-Encoding with Content-Length",
     post_head(b"Transfer-Encoding: chunked\r\nContent-Length: 60\r\n\r\n0\r\n\r\n") + SMUGGLED),
    ("duplicate differing Content-Length",
     post_head(b"Content-Length: 2\r\nContent-Length: 40\r\n\r\n{}") + SMUGGLED),
    ("Content-Length list",
     post_head(b"Content-Length: 2, 40\r\n\r\n{}") + SMUGGLED),
    ("signed Content-Length", post_head(b"Content-Length: +2\r\n\r\n{}") + SMUGGLED),
    ("space before the colon", post_head(b"Content-Length : 2\r\n\r\n{}") + SMUGGLED),
    ("bad chunk size", post_head(b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n")
     + SMUGGLED),
    ("chunk size overflow",
     post_head(b"Transfer-Encoding: chunked\r\n\r\n1000000000000000002\r\n{}\r\n0\r\n\r\n")
     + SMUGGLED),
    ("chunked not last",
     post_head(b"Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n") + SMUGGLED),
    ("unknown transfer coding", post_head(b"Transfer-Encoding: gzip\r\n\r\n") + SMUGGLED),
    ("obs-fold header", post_head(b"X-Folded: a\r\n b\r\nContent-Length: 2\r\n\r\n{}")
     + SMUGGLED),
    ("obs-fold Transfer-Encoding",
     post_head(b"Content-Length: 2\r\nTransfer-Encoding:\r\n chunked\r\n\r\n{}") + SMUGGLED),
    ("bare LF line endings",
     b"POST /v1/chat/completions HTTP/1.1\nHost: x\nContent-Length: 2\n\n{}" + SMUGGLED),
    ("bare LF in one header line",
     post_head(b"X-A: 1\nContent-Length: 2\r\n\r\n{}") + SMUGGLED),
    ("bare CR in a header value", post_head(b"X-A: 1\rB: 2\r\nContent-Length: 2\r\n\r\n{}")
     + SMUGGLED),
    ("NUL in a header value", post_head(b"X-A: 1\0\r\nContent-Length: 2\r\n\r\n{}") + SMUGGLED),
    ("chunk without CRLF after data",
     post_head(b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n") + SMUGGLED),
    ("space in the header name",
     post_head(b"Transfer Encoding: chunked\r\nContent-Length: 2\r\n\r\n{}") + SMUGGLED),
]


@test("smuggle/ambiguous framing -> 400, connection closed, next connection served")
def t_smuggle():
    bad = []
    for what, data in SMUGGLING:
        # A rejected request is answered and closed at once; 5 s is slack.
        r = send_raw(F.g.port, data, timeout=5, label="smuggle " + what)
        try:
            assert_closed_error(r, 400, what)
            check(r.raw.count(b"HTTP/1.1 ") == 1,
                  "%s: more than one response: %r" % (what, short(r.raw, 800)))
        except AssertionError as e:
            n = r.raw.count(b"HTTP/1.1 ")
            bad.append("%s: %s [%d response(s): %s]" % (
                what, str(e).split(":", 1)[1].strip()[:120], n,
                ", ".join(m.decode("latin-1")
                          for m in re.findall(rb"HTTP/1\.1 \d{3}[^\r]*", r.raw))))
        ok = request(F.g.port, "GET", "/healthz", [])
        check(ok.status == 200, "%s: the next connection was not served: %r" % (what, ok))
    check(not bad, "accepted or not closed:\n    " + "\n    ".join(bad))


@test("smuggle/obs-fold after leading blank lines -> 400 and close")
def t_smuggle_fold_after_blank_lines():
    # llhttp skips empty lines before a request line; the obs-fold scan
    # must start at the request line, not take "\r\n\r\n" for a head's end.
    folded = post_head(b"X-Folded: a\r\n b\r\nContent-Length: 2\r\n\r\n{}")
    healthz = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    for what, data in (("first request", b"\r\n\r\n" + folded + SMUGGLED),
                       ("three blank lines", b"\r\n\r\n\r\n" + folded + SMUGGLED),
                       ("second request", healthz + b"\r\n\r\n" + folded + SMUGGLED)):
        r = send_raw(F.g.port, data, timeout=5, label="fold " + what)
        statuses = re.findall(rb"HTTP/1\.1 (\d{3})", r.raw)
        want = [b"400"] if what != "second request" else [b"200", b"400"]
        check(statuses == want, "%s: statuses %r, expected %r: %r" % (
            what, statuses, want, short(r.raw, 600)))
        check(r.eof, "%s: the connection was not closed" % what)


@test("smuggle/pipelined requests after a valid one are answered one by one")
def t_smuggle_pipeline_control():
    # Control: the parser is not simply rejecting everything pipelined.
    one = (b"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
           CLIENT_K1.encode() + b"\r\n\r\n")
    r = send_raw(F.g.port, one + one + one[:-2] + b"Connection: close\r\n\r\n",
                 label="pipeline")
    check(r.raw.count(b"HTTP/1.1 200 ") == 3, "pipeline: %r" % short(r.raw, 600))


# ======================================================================================
# limits/*
# ======================================================================================

LIM = {"max_body_bytes": 2048, "max_header_bytes": 2048, "max_connections": 3,
       "request_timeout_ms": 1000, "idle_timeout_ms": 60000}


def limits_gateway():
    cfg = main_config(F.mock.port, F.raw.port)
    cfg["limits"] = dict(LIM)
    return start_gateway("gw-limits", cfg, workers=1)


class Limits:
    g = None


@test("limits/slow head (slowloris) -> 408 and close")
def t_limits_slow_head():
    s = connect(Limits.g.port)
    t0 = time.monotonic()
    data = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200
    got = b""
    try:
        for i in range(len(data)):
            try:
                s.sendall(data[i:i + 1])
            except (BrokenPipeError, ConnectionResetError):
                break
            r, _, _ = select.select([s], [], [], 0.1)
            if r:
                break
            if time.monotonic() - t0 > 15:
                break
        got, eof = recv_until_close(s, 15)
    finally:
        s.close()
    elapsed = time.monotonic() - t0
    capture("slow head", got)
    r = Resp(got, eof)
    assert_closed_error(r, 408, "slow head")
    check(0.8 <= elapsed <= 12, "slow head: 408 after %.2f s (request_timeout_ms 1000)"
          % elapsed)


@test("limits/slow body -> 408 and close")
def t_limits_slow_body():
    s = connect(Limits.g.port)
    t0 = time.monotonic()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
              + CLIENT_K1.encode() + b"\r\nContent-Length: 1000\r\n\r\n{")
    try:
        for _ in range(200):
            r, _, _ = select.select([s], [], [], 0.1)
            if r:
                break
            try:
                s.sendall(b" ")
            except (BrokenPipeError, ConnectionResetError):
                break
        got, eof = recv_until_close(s, 15)
    finally:
        s.close()
    elapsed = time.monotonic() - t0
    capture("slow body", got)
    assert_closed_error(Resp(got, eof), 408, "slow body")
    check(0.8 <= elapsed <= 12, "slow body: 408 after %.2f s" % elapsed)


@test("limits/idle keep-alive connection is not a request timeout")
def t_limits_idle_not_408():
    # A connection that sent nothing is not cut by request_timeout_ms.
    s = connect(Limits.g.port)
    try:
        time.sleep(1.6)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        got, eof = recv_until_close(s, 10)
    finally:
        s.close()
    check(Resp(got, eof).status == 200, "idle then request: %r" % short(got))


@test("limits/body over max_body_bytes -> 413 and close")
def t_limits_body():
    big = json.dumps(chat_body("ok", text="x" * 4000)).encode()
    for what, data in (
        ("declared", post_head(b"Content-Length: %d\r\n\r\n" % len(big)) + big),
        ("declared, head only", post_head(b"Content-Length: 100000000\r\n\r\n")),
        ("chunked", post_head(b"Transfer-Encoding: chunked\r\n\r\n") +
         b"".join(b"%x\r\n%s\r\n" % (len(big[i:i + 500]), big[i:i + 500])
                  for i in range(0, len(big), 500)) + b"0\r\n\r\n"),
        ("without a key", b"POST /v1/messages HTTP/1.1\r\nHost: x\r\n"
         b"Content-Length: %d\r\n\r\n" % len(big) + big),
    ):
        r = send_raw(Limits.g.port, data, label="413 " + what)
        assert_closed_error(r, 413, "body " + what)
    ok = json.dumps(chat_body("ok", text="x" * 100)).encode()
    r = send_raw(Limits.g.port, post_head(b"Content-Length: %d\r\nConnection: close\r\n\r\n"
                                          % len(ok)) + ok)
    check(r.status == 200, "a body under the limit: %r" % r)


INFLIGHT = 100000  # limits.max_inflight_body_bytes of the gateway below
HELD = 60000       # what one request declares: two do not fit


def padded(obj, n):
    """obj as JSON, padded with spaces to exactly n bytes."""
    b = json.dumps(obj).encode()
    check(len(b) <= n, "padded: %d > %d" % (len(b), n))
    return b + b" " * (n - len(b))


@test("limits/request bodies being read are bounded process-wide -> 503, retry-after")
def t_limits_inflight_bodies():
    # docs/design.md §5: max_inflight_body_bytes counts the bodies of every
    # connection of every worker. A holds 60000 of 100000 (its 100 Continue
    # says the head was taken); every other request declaring 60000, on
    # whichever of the two workers, gets 503 without its body being read.
    cfg = main_config(F.mock.port, F.raw.port)
    cfg["limits"] = {"max_inflight_body_bytes": INFLIGHT}
    g = start_gateway("gw-inflight", cfg, workers=2)
    try:
        a = connect(g.port)
        a.sendall(post_head(b"Expect: 100-continue\r\nContent-Length: %d\r\n"
                            b"Connection: close\r\n\r\n" % HELD))
        a.settimeout(10)
        got = b""
        while b"\r\n\r\n" not in got:
            d = a.recv(4096)
            check(d, "A: closed before 100 Continue: %r" % short(got))
            got += d
        check(got.startswith(b"HTTP/1.1 100 Continue\r\n\r\n"), "A: %r" % short(got))
        body = padded(chat_body("ok"), HELD)
        for i in range(12):
            anth = i % 3 == 2
            if anth:
                data = (b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: " +
                        CLIENT_K1.encode() + b"\r\nContent-Length: %d\r\n\r\n" % HELD +
                        padded(msgs_body("ok-anth"), HELD))
            else:
                data = post_head(b"Content-Length: %d\r\n\r\n" % HELD) + body
            r = send_raw(g.port, data, label="inflight %d" % i)
            label = "B%d (%s) while A holds %d of %d" % (
                i, "anthropic" if anth else "openai", HELD, INFLIGHT)
            if anth:
                assert_anthropic_error(r, 503, "overloaded_error", label)
            else:
                assert_openai_error(r, 503, label)
            check(r.header("retry-after") == "1", "%s: retry-after %r" % (
                label, r.header("retry-after")))
            check(r.header("connection").lower() == "close" and r.eof,
                  "%s: not closed: %r" % (label, r.headers))
        a.sendall(body)
        raw, eof = recv_until_close(a, 20)
        a.close()
        check(Resp(raw, eof).status == 200, "A with its body: %r" % short(raw))
        # A's bytes came back: the same request is read again (the release
        # follows A's answer on the worker's loop: a bounded poll).
        statuses = []

        def accepted():
            r = send_raw(g.port, post_head(b"Content-Length: %d\r\nConnection: close"
                                           b"\r\n\r\n" % HELD) + body,
                         label="inflight after")
            statuses.append(r.status)
            return r.status == 200
        check(wait_until(accepted, 10, 0.05), "after A: %r" % statuses[-5:])
    finally:
        g.stop()


BUDGET = 64 << 20    # limits.max_inflight_body_bytes of the gateway below
DECLARED = 32 << 20  # what each trickler declares: two fill the budget


def trickler(port, head):
    """Sends head (with Expect: 100-continue) and one body byte once the head
    is taken. Returns (socket, the first response head) for the caller to
    close."""
    s = connect(port)
    s.sendall(head)
    s.settimeout(10)
    got = b""
    while b"\r\n\r\n" not in got:
        d = s.recv(4096)
        if not d:
            break
        got += d
    if got.startswith(b"HTTP/1.1 100 "):
        s.sendall(b"{")
    return s, got


@test("limits/trickling bodies cannot hold the body budget they declare")
def t_limits_trickled_budget():
    # Two posts declaring 32 MiB each against a 64 MiB budget, sending a
    # byte: unauthenticated ones to /healthz (no key needed, no body taken)
    # and authorised ones to a chat path. Neither pair makes an authorised
    # request fail: a body on /healthz is refused at its head, and a body is
    # charged as its bytes arrive, not as declared.
    cfg = main_config(F.mock.port, F.raw.port)
    cfg["limits"] = {"max_inflight_body_bytes": BUDGET}
    g = start_gateway("gw-trickle", cfg, workers=2)
    held = []
    try:
        heads = {
            "unauthenticated POST /healthz":
                b"POST /healthz HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                b"Content-Length: %d\r\n\r\n" % DECLARED,
            "authorised POST /v1/chat/completions":
                post_head(b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n"
                          % DECLARED),
        }
        for what, head in heads.items():
            firsts = []
            for i in range(2):
                s, got = trickler(g.port, head)
                held.append(s)
                firsts.append((s, got))
            for i in range(4):
                r = request(g.port, "POST", "/v1/chat/completions", bearer(CLIENT_K1),
                            chat_body("ok"), label="beside tricklers")
                check(r.status == 200, "%s x2 declaring %d of %d: an authorised "
                      "request got %r" % (what, DECLARED, BUDGET, r))
            for i, (s, got) in enumerate(firsts):
                if what.startswith("unauthenticated"):
                    check(re.match(rb"HTTP/1\.1 4\d\d ", got) is not None,
                          "%s %d: expected a 4xx at the head, got %r" % (
                              what, i, short(got)))
                    raw, eof = recv_until_close(s, 10)
                    check(eof, "%s %d: the connection was not closed" % (what, i))
                else:
                    check(got.startswith(b"HTTP/1.1 100 "), "%s %d: %r" % (
                        what, i, short(got)))
    finally:
        for s in held:
            s.close()
        g.stop()


@test("limits/a body on an endpoint that takes none -> refused at the head")
def t_limits_body_on_bodiless():
    # /healthz needs no key: a body there is refused before it is read, in
    # every form; with a key, so are bodies on the GET-only endpoints.
    for method, path, key, status in (
            ("POST", "/healthz", None, 405), ("PUT", "/healthz", None, 405),
            ("GET", "/healthz", None, 400), ("GET", "/v1/models", CLIENT_K1, 400),
            ("GET", "/metrics", CLIENT_K1, 400), ("POST", "/metrics", CLIENT_K1, 405)):
        for framing in (b"Content-Length: 1000\r\n", b"Transfer-Encoding: chunked\r\n"):
            head = (b"%s %s HTTP/1.1\r\nHost: x\r\n" % (method.encode(), path.encode()) +
                    (b"Authorization: Bearer " + key.encode() + b"\r\n" if key else b"") +
                    b"Expect: 100-continue\r\n" + framing + b"\r\n")
            r = send_raw(Limits.g.port, head, timeout=10, label="body on " + path)
            what = "%s %s with %s" % (method, path, framing.split(b":")[0].decode())
            check(b"100 Continue" not in r.raw, "%s: 100 Continue sent: %r" % (what, r))
            assert_closed_error(r, status, what)
            if status == 405:
                check(r.header("allow") == "GET, HEAD", "%s: allow %r" % (
                    what, r.header("allow")))
    # Without a body they are served as before.
    check(request(Limits.g.port, "GET", "/healthz", []).status == 200, "GET /healthz")
    r = request(Limits.g.port, "GET", "/healthz", [], body=b"")
    check(r.status == 200, "GET /healthz with Content-Length: 0: %r" % r)


WRITE_TIMEOUT_MS = 1500  # limits.client_write_timeout_ms of the gateways below


def log_entry(g, rid):
    """The gateway's log line of request rid, or None."""
    for ln in g.stderr().decode("utf-8", "replace").splitlines():
        if rid in ln and ln.startswith("{"):
            try:
                e = json.loads(ln)
            except ValueError:
                continue
            if e.get("request_id") == rid:
                return e
    return None


def stalled_reader(chunk_ms):
    """A stream of many tokens to a caller that reads its head and then
    nothing: the connection is closed after client_write_timeout_ms of no
    progress and the request ends as the caller's abort (499), never as the
    target's timeout.chunk (the transfer is paused by backpressure: the
    upstream is not silent) and without a continuation."""
    cfg = main_config(F.mock.port, F.raw.port)
    cfg["limits"] = {"client_write_timeout_ms": WRITE_TIMEOUT_MS}
    cfg["routes"].append({"name": "stall", "targets": ["mock/big@tokens=100000"],
                          "timeouts": {"chunk_ms": chunk_ms}})
    g = start_gateway("gw-stall-%d" % chunk_ms, cfg, workers=1)
    s = None
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(10)
        s.connect((LOCAL, g.port))
        body = json.dumps(chat_body("stall", stream=True)).encode()
        rid = "stall-reader-1"
        s.sendall(post_head(b"x-request-id: %s\r\nContent-Length: %d\r\n\r\n"
                            % (rid.encode(), len(body))) + body)
        got = b""
        while b"\r\n\r\n" not in got:
            d = s.recv(1024)
            check(d, "closed before the head: %r" % short(got))
            got += d
        check(got.startswith(b"HTTP/1.1 200 "), "head: %r" % short(got))
        t0 = time.monotonic()  # from here on the caller reads nothing
        entry = [None]

        def logged():
            entry[0] = log_entry(g, rid)
            return entry[0] is not None
        check(wait_until(logged, 30, 0.05), "no log line for %s within 30 s" % rid)
        elapsed = time.monotonic() - t0
        e = entry[0]
        reasons = [a.get("reason") for a in e.get("attempts", [])]
        check("timeout.chunk" not in reasons,
              "an attempt failed with timeout.chunk while the caller did not read: %r"
              % e)
        check(not any(a.get("continuation") for a in e.get("attempts", [])),
              "a continuation started for a caller that did not read: %r" % e)
        check(e.get("outcome") == "aborted" and e.get("status") == 499,
              "outcome %r status %r, expected the caller's abort (499): %r" % (
                  e.get("outcome"), e.get("status"), e))
        check(WRITE_TIMEOUT_MS / 1000.0 - 0.2 <= elapsed <= WRITE_TIMEOUT_MS / 1000.0 + 8,
              "ended %.2f s after the caller stopped reading (client_write_timeout_ms "
              "%d)" % (elapsed, WRITE_TIMEOUT_MS))
        m = request(g.port, "GET", "/metrics", bearer(CLIENT_K1))
        check(re.search(rb"^airetry_http_write_timeouts_total [1-9]", m.body, re.M),
              "airetry_http_write_timeouts_total not counted: %r" % short(m.body, 2000))
    finally:
        if s is not None:
            s.close()
        g.stop()


@test("limits/a caller that stops reading is closed after client_write_timeout_ms (499)")
def t_limits_stalled_reader():
    stalled_reader(20000)  # chunk_ms far above the write timeout


@test("limits/a caller that stops reading past chunk_ms: aborted, never timeout.chunk")
def t_limits_stalled_reader_chunk():
    stalled_reader(500)  # chunk_ms well under the write timeout


@test("limits/head over max_header_bytes -> 431 and close")
def t_limits_head():
    for what, extra in (("one big header", b"X-Big: " + b"a" * 3000 + b"\r\n"),
                        ("many headers", b"".join(b"X-H%d: v\r\n" % i for i in range(400))),
                        ("long target", None)):
        if extra is None:
            data = b"GET /v1/models?" + b"q" * 3000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
        else:
            data = post_head(extra + b"Content-Length: 2\r\n\r\n{}")
        r = send_raw(Limits.g.port, data, label="431 " + what)
        assert_closed_error(r, 431, "head " + what)


@test("limits/more connections than max_connections -> 503 and close")
def t_limits_connections():
    held = []
    try:
        for i in range(LIM["max_connections"]):
            s = connect(Limits.g.port)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            s.settimeout(10)
            got = b""
            while b"ok\n" not in got:
                d = s.recv(4096)
                if not d:
                    break
                got += d
            check(b" 200 " in got, "held connection %d: %r" % (i, short(got)))
            held.append(s)
        s = connect(Limits.g.port)
        held.append(s)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        got, eof = recv_until_close(s, 4)  # a 503 closes at once
        r = Resp(got, eof)
        if r.status != 503:
            extra = connect(Limits.g.port)
            held.append(extra)
            extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            g2, e2 = recv_until_close(extra, 4)
            raise AssertionError(
                "connection %d of max_connections %d: expected 503, got %r "
                "(connection %d got %r)" % (LIM["max_connections"] + 1,
                                           LIM["max_connections"], r,
                                           LIM["max_connections"] + 2,
                                           Resp(g2, e2)))
        assert_closed_error(r, 503, "over max_connections")
    finally:
        for s in held:
            s.close()

    def served():
        try:
            return request(Limits.g.port, "GET", "/healthz", [], timeout=5).status == 200
        except OSError:
            return False
    check(wait_until(served, 10, 0.2), "not served again after the connections closed")


# ======================================================================================
# listen/*
# ======================================================================================


def listen_config(with_keys):
    cfg = {"listen": LOCAL + ":0",
           "providers": [{"name": "mock", "api": "openai",
                          "base_url": "http://%s:%d/v1" % (LOCAL, F.mock.port)}],
           "routes": [{"name": "ok", "targets": ["mock/healthy"]}]}
    if with_keys:
        cfg["client_keys_env"] = "SECTEST_CLIENT_KEYS"
    return cfg


def run_serve(cfg_obj, args, env, timeout=10):
    """Starts serve; returns ('exited', code, stderr) or ('listening', line, stderr)."""
    path = write_config("listen.json", cfg_obj)
    full = dict(os.environ)
    for k in ENV_SECRETS:
        full.pop(k, None)
    full.update(env)
    p = subprocess.Popen([BIN, "serve", "--config", path, "--workers", "1"] + args,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=full)
    try:
        fd = p.stdout.fileno()
        r, _, _ = select.select([fd], [], [], timeout)
        line = os.read(fd, 4096).decode("utf-8", "replace") if r else ""
        if line.startswith("listening on "):
            p.send_signal(signal.SIGTERM)  # at once: no traffic is sent to it
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            err = p.stderr.read().decode("utf-8", "replace")
            capture("listen stderr", err)
            return "listening", line.strip(), err
        try:
            code = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            return "hung", None, ""
        err = p.stderr.read().decode("utf-8", "replace")
        capture("listen stderr", err)
        return "exited", code, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()
        p.stderr.close()


@test("listen/non-loopback without client keys is refused (exit 2, a message)")
def t_listen_refused():
    cases = [
        ("--listen 0.0.0.0:0", listen_config(False), ["--listen", "0.0.0.0:0"], {}),
        ("--listen [::]:0", listen_config(False), ["--listen", "[::]:0"], {}),
        ("listen: 0.0.0.0:0 in the file", dict(listen_config(False), listen="0.0.0.0:0"),
         [], {}),
        ("client_keys_env set, variable unset", listen_config(True),
         ["--listen", "0.0.0.0:0"], {}),
        ("client_keys_env set, variable empty", listen_config(True),
         ["--listen", "0.0.0.0:0"], {"SECTEST_CLIENT_KEYS": ""}),
        ("client_keys_env set, only commas", listen_config(True),
         ["--listen", "0.0.0.0:0"], {"SECTEST_CLIENT_KEYS": " , ,"}),
    ]
    for what, cfg, args, env in cases:
        kind, v, err = run_serve(cfg, args, env)
        check(kind == "exited" and v == 2,
              "%s: expected exit 2, got %s %r (stderr %r)" % (what, kind, v, short(err)))
        check("client key" in err.lower() or "insecure" in err.lower(),
              "%s: no message about client keys: %r" % (what, short(err)))


@test("listen/non-loopback starts with --insecure or with client keys")
def t_listen_allowed():
    kind, v, err = run_serve(listen_config(False), ["--listen", "0.0.0.0:0", "--insecure"], {})
    check(kind == "listening" and v.startswith("listening on http://0.0.0.0:"),
          "--insecure: %s %r %r" % (kind, v, short(err)))
    kind, v, err = run_serve(listen_config(True), ["--listen", "0.0.0.0:0"],
                             {"SECTEST_CLIENT_KEYS": CLIENT_K1})
    check(kind == "listening", "with client keys: %s %r %r" % (kind, v, short(err)))
    kind, v, err = run_serve(listen_config(False), ["--listen", "127.0.0.1:0"], {})
    check(kind == "listening", "loopback without keys: %s %r %r" % (kind, v, short(err)))


# ======================================================================================
# the final sweep: every captured byte, every log line
# ======================================================================================


@test("secrets/no key in any log line, response, header or metric")
def t_secrets_sweep():
    # Stop the main gateway first so its stderr is complete.
    for name, proc in (("main gateway", F.g), ("limits gateway", Limits.g)):
        if proc is not None:
            proc.stop()
    texts = list(CAPTURED)
    for p in PROCS:
        if p.name.startswith("gw"):
            texts.append((p.name + " stderr", p.stderr()))
    check(any(lbl.endswith("stderr") and b'"request_id"' in data for lbl, data in texts),
          "no gateway log line was captured")
    leaks = []
    for label, data in texts:
        if label in ("hostile-echo", "json-body"):
            continue  # their own tests report them
        for hit in find_secrets(data):
            i = data.find(hit.split(" ")[0].encode())
            leaks.append("%s: %s%s" % (label, hit,
                                       (" near %r" % short(data[max(0, i - 80):i + 80]))
                                       if i >= 0 else ""))
    check(not leaks, "secrets found:\n    " + "\n    ".join(leaks[:20]))
    check(F.never.snapshot()[1] == 0, "the never-listener was contacted")
    reqs, _ = F.raw.snapshot()
    for i, req in enumerate(reqs):
        if i in FWD_SENSITIVE:
            continue  # that test reports its own forwarding
        blob = req["head"] + b"\r\n\r\n" + req["body"]
        check(b"CLIENTSECRET" not in blob,
              "a client key reached the upstream: %r" % short(req["head"], 600))


# ======================================================================================


def main():
    global BIN, NEVER_URL
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    BIN = os.path.abspath(sys.argv[1])
    only = sys.argv[2:]
    failed = 0
    try:
        F.raw = RawListener("raw")
        F.never = RawListener("never")
        NEVER_URL = "http://%s:%d/v1" % (LOCAL, F.never.port)
        F.mock = Proc("mock", [BIN, "mock", "--listen", LOCAL + ":0"])
        F.g = start_gateway("gw-main", main_config(F.mock.port, F.raw.port))
        Limits.g = limits_gateway()
        for name, f in TESTS:
            if only and not any(o in name for o in only) and \
                    name != "secrets/no key in any log line, response, header or metric":
                continue
            t0 = time.monotonic()
            try:
                f()
                RESULTS.append((name, True, ""))
                print("ok      %-72s %.1fs" % (name, time.monotonic() - t0), flush=True)
            except Skip as e:
                print("skip    %s: %s" % (name, e), flush=True)
            except Exception as e:  # noqa: BLE001 - report and go on
                failed += 1
                msg = str(e) if isinstance(e, AssertionError) else traceback.format_exc()
                RESULTS.append((name, False, msg))
                print("FAIL    %s\n        %s" % (name, msg.replace("\n", "\n        ")),
                      flush=True)
    finally:
        airtest.stop_all()
        for lst in LISTENERS:
            lst.stop()
    n = len(RESULTS)
    keep = failed or os.environ.get("SECTEST_KEEP")
    print("security: %d of %d tests passed%s" % (
        n - failed, n, " (configs and stderr of every process in %s)" % WORK if keep else ""))
    if not keep:
        airtest.remove_work()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
