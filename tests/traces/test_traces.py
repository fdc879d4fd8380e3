#!/usr/bin/env python3
"""OpenTelemetry traces from `airetry serve` (docs/design.md §5, Traces).

    python3 tests/traces/test_traces.py PATH/TO/airetry [NAME-SUBSTRING...]

A small OTLP/HTTP collector (standard library only) on 127.0.0.1 receives the
gateway's export; `airetry mock` is the upstream. Checked: a request retried
and switched from a 503 primary to a fallback, streamed and not, from an
OpenAI and an Anthropic caller, is one SERVER span and one CLIENT span per
attempt with the right parents, roles, reasons and GenAI attributes, encoded
as OTLP JSON wants (hex ids, 64-bit integers and times as strings, enums as
integers); the export carries the configured headers and service.name; an
incoming traceparent is continued (an unsampled one is not exported, a
malformed one starts a new trace); each upstream request carries its attempt
span's traceparent, and none does while tracing is off; a dead, failing or
stalled collector never delays a request, and its spans are counted as
dropped in /metrics.

Prints one "ok"/"FAIL" line per test and exits 1 when any failed.
"""

import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import airtest  # noqa: E402
from airtest import LOCAL, check  # noqa: E402

airtest.init("traces")
SERVERS = []
WAIT_S = 15  # the longest any event is waited for
HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")
DIGITS = re.compile(r"^[0-9]+$")


# ---- the collector --------------------------------------------------------------


class Collector:
    """OTLP/HTTP receiver: mode "ok" (200), "fail" (500) or "stall" (reads the
    request, then answers nothing until released)."""

    def __init__(self, mode="ok"):
        self.mode = mode
        self.cv = threading.Condition()
        self.posts = []      # (path, headers dict, body object)
        self.stalled = 0     # requests being held
        self.release = threading.Event()
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(n)
                with outer.cv:
                    outer.posts.append((self.path, {k.lower(): v for k, v in self.headers.items()},
                                        json.loads(body)))
                    mode = outer.mode
                    if mode == "stall":
                        outer.stalled += 1
                    outer.cv.notify_all()
                if mode == "stall":
                    outer.release.wait(WAIT_S * 2)
                    with outer.cv:
                        outer.stalled -= 1
                        outer.cv.notify_all()
                    self.close_connection = True
                    return
                status = 200 if mode == "ok" else 500
                out = b"{}"
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.srv = ThreadingHTTPServer((LOCAL, 0), H)
        self.srv.daemon_threads = True
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        SERVERS.append(self)

    def close(self):
        self.release.set()
        self.srv.shutdown()
        self.srv.server_close()

    def spans(self):
        out = []
        for _, _, body in self.posts:
            for rs in body["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    out.extend(ss["spans"])
        return out

    def wait(self, pred, what):
        """Waits (bounded) until pred(self) holds under the lock."""
        deadline = time.monotonic() + WAIT_S
        with self.cv:
            while not pred(self):
                left = deadline - time.monotonic()
                check(left > 0, "timed out waiting for " + what)
                self.cv.wait(left)

    def trace(self, trace_id, n):
        """The n spans of trace_id, waited for."""
        self.wait(lambda c: len([s for s in c.spans() if s["traceId"] == trace_id]) >= n,
                  "%d spans of trace %s" % (n, trace_id))
        with self.cv:
            return [s for s in self.spans() if s["traceId"] == trace_id]


# ---- processes -------------------------------------------------------------------


def start(argv, env_extra=None, name="proc"):
    """A child with no OTEL_ variable but env_extra's."""
    return airtest.Proc(name, argv, env_extra, timeout=WAIT_S, drop_env=("OTEL_",))


class Mock:
    def __init__(self, binary):
        self.p = start([binary, "mock", "--listen", LOCAL + ":0"], name="mock")
        self.port = self.p.port

    def reset(self):
        airtest.mock_reset(self.port)

    def log(self):
        return airtest.mock_log(self.port)


def config(mock):
    return """providers:
  - {name: mo, api: openai, base_url: "http://127.0.0.1:%d/v1"}
defaults:
  breaker: {enabled: false}
  timeouts: {connect_ms: 1000, first_byte_ms: 3000, first_chunk_ms: 3000, total_ms: 10000}
routes:
  - {name: smart, targets: [mo/p@503, mo/f]}
  - name: switch
    targets: [mo/p@503, mo/f]
    rules: [{on: [overloaded], action: switch}]
  - {name: fast, targets: [mo/f]}
""" % mock.port


class Gateway:
    def __init__(self, binary, mock, env=None):
        path = airtest.write_file("gw-%d.yaml" % len(airtest.PROCS), config(mock))
        self.p = start([binary, "serve", "--config", path, "--listen", LOCAL + ":0"],
                       env, name="gw")
        self.port = self.p.port

    def stderr(self):
        return self.p.stderr().decode("utf-8", "replace")

    def metric(self, name):
        st, _, body = request(self.port, "GET", "/metrics", None)
        check(st == 200, "/metrics: %d" % st)
        for line in body.decode().splitlines():
            if line.startswith(name + " "):
                return int(line.split()[1])
        raise AssertionError("no %s in /metrics" % name)

    def wait_metric(self, name, at_least):
        deadline = time.monotonic() + WAIT_S
        while self.metric(name) < at_least:
            check(time.monotonic() < deadline, "%s never reached %d (%d)" %
                  (name, at_least, self.metric(name)))
            time.sleep(0.02)  # a bounded poll of /metrics

    def stop(self):
        self.p.terminate()
        self.p.p.wait(timeout=WAIT_S)
        text = self.stderr()
        for bad in ("runtime error", "AddressSanitizer", "LeakSanitizer"):
            check(bad not in text, "sanitizer report:\n" + text[-3000:])


def request(port, method, path, body, headers=None):
    """One request on a fresh connection; (status, headers, body bytes)."""
    return airtest.fetch(port, method, path, body, headers, timeout=WAIT_S)


def chat(gw, model, stream, dialect="openai", traceparent=None):
    h = {"traceparent": traceparent} if traceparent else {}
    if dialect == "openai":
        st, hs, body = request(gw.port, "POST", "/v1/chat/completions",
                               {"model": model, "stream": stream,
                                "messages": [{"role": "user", "content": "hi"}]}, h)
    else:
        h["anthropic-version"] = "2023-06-01"
        st, hs, body = request(gw.port, "POST", "/v1/messages",
                               {"model": model, "stream": stream, "max_tokens": 16,
                                "messages": [{"role": "user", "content": "hi"}]}, h)
    check(st == 200, "%s %s: status %d: %r" % (dialect, model, st, body[:300]))
    return hs


# ---- span checks -----------------------------------------------------------------


def attrs(span):
    """key -> the one typed value ("stringValue": s -> s, intValue stays a str)."""
    out = {}
    for kv in span["attributes"]:
        (kind, v), = kv["value"].items()
        out[kv["key"]] = (kind, v)
    return out


def s_attr(a, key):
    kind, v = a[key]
    check(kind == "stringValue", "%s is %s" % (key, kind))
    return v


def i_attr(a, key):
    kind, v = a[key]
    check(kind == "intValue" and isinstance(v, str) and re.match(r"^-?[0-9]+$", v),
          "%s is not an int64 string: %r" % (key, a[key]))
    return int(v)


def check_encoding(span):
    check(HEX32.match(span["traceId"]), "traceId %r" % span["traceId"])
    check(HEX16.match(span["spanId"]), "spanId %r" % span["spanId"])
    if "parentSpanId" in span:
        check(HEX16.match(span["parentSpanId"]), "parentSpanId %r" % span["parentSpanId"])
    for k in ("startTimeUnixNano", "endTimeUnixNano"):
        check(isinstance(span[k], str) and DIGITS.match(span[k]), "%s %r" % (k, span[k]))
    check(int(span["startTimeUnixNano"]) <= int(span["endTimeUnixNano"]), "start after end")
    check(type(span["kind"]) is int, "kind %r" % span["kind"])
    check(type(span["status"]["code"]) is int, "status %r" % span["status"])


def check_failover(col, mock, trace_id, roles, stream, parent=None):
    """The spans of one request through route smart/switch: attempts on
    p@503 (overloaded) then f (answered), with `roles`."""
    n = len(roles) + 1
    spans = col.trace(trace_id, n)
    check(len(spans) == n, "%d spans, want %d" % (len(spans), n))
    for s in spans:
        check_encoding(s)
    server = [s for s in spans if s["kind"] == 2]
    check(len(server) == 1, "SERVER spans: %r" % server)
    srv = server[0]
    if parent:
        check(srv.get("parentSpanId") == parent, "server parent %r" % srv.get("parentSpanId"))
    else:
        check("parentSpanId" not in srv, "a root span with a parent: %r" % srv)
    a = attrs(srv)
    check(s_attr(a, "gen_ai.operation.name") == "chat", "operation")
    check(s_attr(a, "gen_ai.response.model") == "f", "response model %r" % a)
    check(s_attr(a, "gen_ai.provider.name") == "openai", "provider")
    check(i_attr(a, "gen_ai.usage.output_tokens") == 9, "output tokens %r" % a)
    check(i_attr(a, "gen_ai.usage.input_tokens") > 0, "input tokens %r" % a)
    check(a["gen_ai.response.finish_reasons"] ==
          ("arrayValue", {"values": [{"stringValue": "stop"}]}), "finish %r" % a)
    check(s_attr(a, "airetry.outcome") == "ok", "outcome")
    check(i_attr(a, "airetry.attempts") == len(roles), "attempts")
    check(i_attr(a, "airetry.first_content_ms") >= 0, "first content")
    check(srv["status"]["code"] == 0, "server status %r" % srv["status"])
    att = sorted([s for s in spans if s["kind"] == 3],
                 key=lambda s: i_attr(attrs(s), "airetry.attempt"))
    check(len(att) == len(roles), "CLIENT spans: %d" % len(att))
    start, end = int(srv["startTimeUnixNano"]), int(srv["endTimeUnixNano"])
    for i, s in enumerate(att):
        a = attrs(s)
        check(s["parentSpanId"] == srv["spanId"], "attempt %d parent" % i)
        check(start <= int(s["startTimeUnixNano"]) and int(s["endTimeUnixNano"]) <= end,
              "attempt %d outside its request" % i)
        check(s_attr(a, "airetry.role") == roles[i], "role %d %r" % (i, a))
        last = i == len(roles) - 1
        check(s_attr(a, "gen_ai.request.model") == ("f" if last else "p@503"), "model %d" % i)
        check(s_attr(a, "airetry.target") == ("mo/f" if last else "mo/p@503"), "target")
        if last:
            check("error.type" not in a and s["status"]["code"] == 0, "answer errored: %r" % s)
            check(s_attr(a, "gen_ai.response.model") == "f", "attempt response model")
            check(i_attr(a, "airetry.first_content_ms") >= 0, "attempt first content")
        else:
            check(s_attr(a, "error.type") == "overloaded", "error.type %r" % a)
            check(i_attr(a, "http.response.status_code") == 503, "status")
            check(s["status"]["code"] == 2, "status %r" % s["status"])
        check(i_attr(a, "airetry.wait_ms") >= 0, "wait")
    # The mock saw each attempt's traceparent, in order.
    tps = [e.get("traceparent") for e in mock.log()]
    want = ["00-%s-%s-01" % (trace_id, s["spanId"]) for s in att]
    check(tps == want, "upstream traceparents %r, want %r" % (tps, want))


# ---- the cases -------------------------------------------------------------------

TESTS, test = airtest.registry()


def traced_env(col, **extra):
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://%s:%d" % (LOCAL, col.port),
           "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20t0ken,x-team=a%2Cb",
           "OTEL_SERVICE_NAME": "airetry-test", "OTEL_BSP_SCHEDULE_DELAY": "20"}
    env.update(extra)
    return env


def server_span_of(col, rid):
    """The server span whose airetry.request_id is rid, waited for."""
    def find(c):
        for s in c.spans():
            a = attrs(s)
            if "airetry.request_id" in a and a["airetry.request_id"][1] == rid:
                return s
        return None
    col.wait(lambda c: find(c) is not None, "the server span of " + rid)
    with col.cv:
        return find(col)


@test("spans/retry and switch: one server span, an attempt span per attempt, both dialects")
def t_failover(binary, mock):
    col = Collector()
    gw = Gateway(binary, mock, traced_env(col))
    for dialect in ("openai", "anthropic"):
        for stream in (False, True):
            mock.reset()
            hs = chat(gw, "smart", stream, dialect)
            check(hs.get("x-airetry-attempts") == "3", "attempts %r" % hs)
            srv = server_span_of(col, hs["x-request-id"])
            check_failover(col, mock, srv["traceId"], ["first", "retry", "switch"], stream)
            check(s_attr(attrs(srv), "airetry.caller.dialect") == dialect, "dialect")
            check(s_attr(attrs(srv), "gen_ai.request.model") == "smart", "request model")
    mock.reset()
    hs = chat(gw, "switch", True)
    srv = server_span_of(col, hs["x-request-id"])
    check_failover(col, mock, srv["traceId"], ["first", "switch"], True)
    # The export request itself.
    with col.cv:
        path, headers, body = col.posts[0]
    check(path == "/v1/traces", "path %r" % path)
    check(headers.get("content-type") == "application/json", "content-type %r" % headers)
    check(headers.get("authorization") == "Bearer t0ken", "authorization header")
    check(headers.get("x-team") == "a,b", "x-team header")
    res = attrs(body["resourceSpans"][0]["resource"])
    check(s_attr(res, "service.name") == "airetry-test", "service.name %r" % res)
    check("t0ken" not in gw.stderr(), "a header value in the log")
    # Counted once the collector's answer is read (after it holds the spans).
    gw.wait_metric("airetry_trace_spans_exported_total", 4 * 4 + 3)
    check(gw.metric("airetry_trace_spans_dropped_total") == 0, "dropped spans")
    gw.stop()
    col.close()


@test("spans/an incoming traceparent is continued; unsampled not exported; malformed restarts")
def t_traceparent_in(binary, mock):
    col = Collector()
    gw = Gateway(binary, mock, traced_env(col))
    tid, parent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    mock.reset()
    chat(gw, "smart", True, traceparent="00-%s-%s-01" % (tid, parent))
    check_failover(col, mock, tid, ["first", "retry", "switch"], True, parent=parent)
    # Unsampled (flags 00): propagated upstream unsampled, nothing exported.
    quiet = "1111111111111111111111111111111a"
    mock.reset()
    chat(gw, "fast", False, traceparent="00-%s-%s-00" % (quiet, parent))
    tps = [e.get("traceparent") for e in mock.log()]
    check(len(tps) == 1 and tps[0].startswith("00-%s-" % quiet) and tps[0].endswith("-00")
          and tps[0][36:52] != parent, "unsampled upstream traceparent %r" % tps)
    # Malformed (uppercase hex): a new trace, a root server span.
    mock.reset()
    hs = chat(gw, "fast", False, traceparent="00-%s-%s-01" % (tid.upper(), parent))
    srv = server_span_of(col, hs["x-request-id"])
    check(srv["traceId"] != tid and "parentSpanId" not in srv, "bad traceparent continued")
    # Spans leave in order: the later request's arrived, so the unsampled
    # one's would have too.
    with col.cv:
        check(not [s for s in col.spans() if s["traceId"] == quiet], "unsampled trace exported")
    gw.stop()
    col.close()


@test("spans/tracing off: no traceparent upstream, nothing exported")
def t_off(binary, mock):
    col = Collector()
    gw = Gateway(binary, mock)
    mock.reset()
    chat(gw, "smart", True, traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    tps = [e.get("traceparent") for e in mock.log()]
    check(tps == [None, None, None], "traceparent sent while off: %r" % tps)
    check(gw.metric("airetry_trace_spans_exported_total") == 0, "exported while off")
    gw.stop()
    with col.cv:
        check(not col.posts, "export while off")
    col.close()


def quick_requests(gw, n):
    """n requests to route fast, each must answer; returns the slowest (s)."""
    worst = 0.0
    for _ in range(n):
        t0 = time.monotonic()
        chat(gw, "fast", True)
        worst = max(worst, time.monotonic() - t0)
    return worst


@test("drops/a dead or failing collector: requests succeed, spans dropped and counted")
def t_dead(binary, mock):
    port = airtest.free_port()
    gw = Gateway(binary, mock, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT":
                                "http://%s:%d/v1/traces" % (LOCAL, port),
                                "OTEL_BSP_SCHEDULE_DELAY": "20"})
    mock.reset()
    quick_requests(gw, 20)
    gw.wait_metric("airetry_trace_spans_dropped_total", 40)
    check(gw.metric("airetry_trace_spans_exported_total") == 0, "exported to a dead port")
    gw.stop()
    col = Collector("fail")
    gw = Gateway(binary, mock, traced_env(col))
    quick_requests(gw, 10)
    gw.wait_metric("airetry_trace_spans_dropped_total", 20)
    check(gw.metric("airetry_trace_spans_exported_total") == 0, "exported on 500")
    gw.stop()
    col.close()


@test("drops/a stalled collector never delays requests; its batch is dropped")
def t_stalled(binary, mock):
    col = Collector("stall")
    gw = Gateway(binary, mock, traced_env(col, OTEL_EXPORTER_OTLP_TIMEOUT="3000"))
    mock.reset()
    chat(gw, "fast", True)
    # The exporter is now inside a POST the collector holds.
    col.wait(lambda c: c.stalled == 1, "the collector to hold a batch")
    worst = quick_requests(gw, 30)
    with col.cv:
        held = col.stalled
    # Every request finished while the export was still held (the event),
    # each far below the export timeout.
    check(held == 1, "the collector let go before the requests ended")
    check(worst < 1.5, "a request took %.2fs while the collector stalled" % worst)
    # The held batch times out and is counted as dropped.
    gw.wait_metric("airetry_trace_spans_dropped_total", 2)
    check(gw.metric("airetry_trace_spans_exported_total") == 0, "exported while stalled")
    col.mode = "ok"
    col.release.set()
    gw.stop()
    col.close()


def main():
    def setup(binary):
        mock = Mock(binary)
        return lambda fn: fn(binary, mock)

    def cleanup():
        for c in SERVERS:
            c.release.set()
    return airtest.main(TESTS, setup, cleanup=cleanup)


if __name__ == "__main__":
    sys.exit(main())
