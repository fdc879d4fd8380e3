#!/usr/bin/env python3
"""Supervision, reload and log tests of `airetry serve` (docs/design.md §5).

    python3 tests/supervisor/test_supervisor.py PATH/TO/airetry [NAME-SUBSTRING...]

Starts `airetry mock` and gateways in front of it on 127.0.0.1 ephemeral
ports and checks, one named test at a time:

  crash/*    a worker killed by SIGSEGV under load: served again within 1 s,
             no in-flight answer completes, the supervisor logs the signal
             and the request ids, /metrics counts the restart; then SIGHUP
             and SIGTERM go through the supervisor
  backoff/*  repeated deaths are restarted after a logged, growing delay
  reload/*   a reload is validated as a start (non-loopback without keys
             refused), a listen change is reported, limits apply to the
             next request
  drain/*    signals during a drain: a repeated SIGTERM and a SIGHUP (to the
             supervisor, or to the worker as systemd's control-group kill
             sends them) never cut a stream in flight; a terminal's Ctrl-C
             drains, a second SIGINT stops at once
  orphan/*   a worker whose supervisor was SIGKILLed drains and exits
  double/*   a second `airetry serve` on the same address is refused
  log/*      a stalled stderr pipe never stalls requests, nor the supervisor
             (restarts, reloads, stop); lines flow again once it is read;
             ring overflow and the supervisor's dropped lines are counted

Standard library only; every wait is a bounded poll. Prints one "ok"/"FAIL"
line per test and exits 1 when any failed.
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import airtest  # noqa: E402
from airtest import LOCAL, Proc, check, children, wait_until  # noqa: E402

airtest.init("supervisor")
BIN = None
MOCK = None


def worker_of(gw, not_pid=None, timeout=5.0):
    """The supervisor's one live worker pid (other than not_pid)."""
    found = []

    def pred():
        ks = [k for k in children(gw.p.pid) if k != not_pid]
        found[:] = ks
        return len(ks) == 1
    check(wait_until(pred, timeout), "no worker under %d (saw %r)" % (gw.p.pid, found))
    return found[0]


write_config = airtest.write_file


def base_config(**extra):
    cfg = {"listen": LOCAL + ":0",
           "providers": [{"name": "mock", "api": "openai",
                          "base_url": "http://%s:%d/v1" % (LOCAL, MOCK.port)}],
           "routes": [{"name": "fast", "targets": ["mock/fast"]},
                      # 40 tokens 100 ms apart: a 4 s stream
                      {"name": "slowstream", "targets": ["mock/s@delay=100@tokens=40"]},
                      # 30 tokens 60 ms apart: a 1.8 s stream
                      {"name": "drainstream", "targets": ["mock/d@delay=60@tokens=30"]},
                      # no content for 20 s (non-streamed: the whole answer)
                      {"name": "slowwhole", "targets": ["mock/w@slow=20000"]}]}
    cfg.update(extra)
    return cfg


def start_gateway(name, cfg, args=(), env=None, workers=2, stall_stderr=False,
                  new_session=False):
    path = write_config(name + ".json", cfg)
    a = [BIN, "serve", "--config", path, "--workers", str(workers)] + list(args)
    return Proc(name, a, env=env, stall_stderr=stall_stderr,
                new_session=new_session), path


def alive(pid):
    """Whether pid runs (a zombie nobody reaped does not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def threads(pid):
    try:
        return len(os.listdir("/proc/%d/task" % pid))
    except FileNotFoundError:
        return 0


def fill_stderr(pid):
    """Fills pid's stderr pipe to its last byte with newlines (whole lines
    of 3 kB leave room in each page for a short line)."""
    fd = os.open("/proc/%d/fd/2" % pid, os.O_WRONLY | os.O_NONBLOCK)
    try:
        for block in (4096, 1):
            for _ in range(1 << 17):
                try:
                    os.write(fd, b"\n" * block)
                except BlockingIOError:
                    break
    finally:
        os.close(fd)


def refused(port):
    """Whether a connection to port is refused (nothing listens)."""
    try:
        socket.create_connection((LOCAL, port), timeout=1).close()
        return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


# ---- HTTP over raw sockets -----------------------------------------------------------


class Exchange:
    """One request with `connection: close`, read to EOF on a thread."""

    def __init__(self, port, method, path, body=None, headers=(), timeout=30):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        hs = [("Host", "x")] + list(headers)
        if body is not None:
            hs += [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        hs.append(("Connection", "close"))
        head = "%s %s HTTP/1.1\r\n" % (method, path)
        head += "".join("%s: %s\r\n" % h for h in hs) + "\r\n"
        self.data = b""
        self.eof = False
        self.error = None
        self.sock = socket.create_connection((LOCAL, port), timeout=timeout)
        self.sock.sendall(head.encode("latin-1") + (body or b""))
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        try:
            while True:
                d = self.sock.recv(65536)
                if not d:
                    break
                self.data += d
            self.eof = True
        except OSError as e:  # a reset is a close too
            self.error = e
            self.eof = True
        finally:
            self.sock.close()

    def wait(self, timeout):
        self.t.join(timeout)
        return self.eof

    def status(self):
        m = re.match(rb"HTTP/1\.[01] (\d{3})", self.data)
        return int(m.group(1)) if m else None

    def body(self):
        head, _, body = self.data.partition(b"\r\n\r\n")
        if b"transfer-encoding: chunked" in head.lower():
            return airtest.dechunk(body)
        return body


def request(port, method, path, body=None, headers=(), timeout=30):
    x = Exchange(port, method, path, body, headers, timeout)
    check(x.wait(timeout), "%s %s: no answer in %ss" % (method, path, timeout))
    return x


def chat(model, stream=False, size=0):
    b = {"model": model, "messages": [{"role": "user", "content": "hi" + "x" * size}],
         "stream": stream}
    return b


def metric(port, name):
    r = request(port, "GET", "/metrics", timeout=10)
    m = re.search(rb"^" + re.escape(name.encode()) + rb" (\d+)$", r.body(), re.M)
    return int(m.group(1)) if m else None


def assert_served(port, what):
    r = request(port, "POST", "/v1/chat/completions", chat("fast"), timeout=10)
    check(r.status() == 200 and b'"choices"' in r.body(),
          "%s: %r" % (what, r.data[:300]))


# ---- tests ---------------------------------------------------------------------------

TESTS, test = airtest.registry()


@test("crash/SIGSEGV under load: served again within 1 s, nothing truncated, logged, counted; then HUP and TERM")
def t_crash():
    cfg = base_config()
    # Under ASan the worker must die by the signal, not by ASan's report.
    asan = os.environ.get("ASAN_OPTIONS", "")
    gw, path = start_gateway("crash", cfg, env={
        "ASAN_OPTIONS": (asan + ":" if asan else "") + "handle_segv=0"})
    check(metric(gw.port, "airetry_worker_restarts_total") == 0, "restarts not 0 at start")
    inflight = []
    for i in range(6):
        inflight.append(("stream", Exchange(gw.port, "POST", "/v1/chat/completions",
                                            chat("slowstream", stream=True),
                                            [("x-request-id", "inflight-s%d" % i)])))
    for i in range(4):
        inflight.append(("whole", Exchange(gw.port, "POST", "/v1/chat/completions",
                                           chat("slowwhole"),
                                           [("x-request-id", "inflight-w%d" % i)])))
    # Every streamed one committed (content flowing), every whole one reached the mock.
    check(wait_until(lambda: all(b"w1" in x.data for k, x in inflight if k == "stream"), 10),
          "streams did not start")
    check(wait_until(lambda: sum(1 for a in mock_log() if a["model"].startswith("w@")) >= 4, 10),
          "whole requests did not reach the mock")
    worker = worker_of(gw)
    os.kill(worker, signal.SIGSEGV)
    t0 = time.monotonic()

    def healthy():
        try:
            r = request(gw.port, "GET", "/healthz", timeout=1)
            return r.status() == 200
        except OSError:
            return False
    check(wait_until(healthy, 1.0, 0.01), "/healthz not answered within 1 s of the kill")
    assert_served(gw.port, "chat after the crash")
    took = time.monotonic() - t0
    check(took <= 1.0, "served again only after %.2f s" % took)
    for kind, x in inflight:
        check(x.wait(5), "%s request not closed after the crash" % kind)
        if kind == "stream":
            check(b"[DONE]" not in x.data, "a cut stream ended with [DONE]: %r" % x.data[-200:])
        else:
            ok = False
            if x.status() == 200:
                try:
                    json.loads(x.body())
                    ok = True
                except ValueError:
                    pass
            check(not ok, "a whole answer completed across the crash: %r" % x.data[:200])
    check(metric(gw.port, "airetry_worker_restarts_total") == 1, "restarts not 1")
    err = gw.stderr().decode("utf-8", "replace")
    line = [ln for ln in err.splitlines() if "died" in ln]
    check(len(line) == 1 and "SIGSEGV" in line[0] and "signal 11" in line[0],
          "death line: %r" % err[-1500:])
    for i in range(6):
        check("inflight-s%d" % i in line[0], "id inflight-s%d not logged: %r" % (i, line[0]))
    for i in range(4):
        check("inflight-w%d" % i in line[0], "id inflight-w%d not logged: %r" % (i, line[0]))
    # SIGHUP through the supervisor: a new route becomes routable.
    r = request(gw.port, "POST", "/v1/chat/completions", chat("added"))
    check(r.status() == 404, "route 'added' before reload: %r" % r.data[:200])
    cfg["routes"].append({"name": "added", "targets": ["mock/added"]})
    write_config("crash.json", cfg)
    gw.p.send_signal(signal.SIGHUP)
    check(wait_until(lambda: b"SIGHUP: reloaded" in gw.stderr(), 5), "no reload line")
    r = request(gw.port, "POST", "/v1/chat/completions", chat("added"))
    check(r.status() == 200, "route 'added' after reload: %r" % r.data[:200])
    # SIGTERM: a stream in flight finishes, then the supervisor exits 0.
    x = Exchange(gw.port, "POST", "/v1/chat/completions", chat("slowstream", stream=True))
    check(wait_until(lambda: b"w1" in x.data, 10), "stream did not start")
    gw.p.send_signal(signal.SIGTERM)
    try:
        code = gw.p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        code = None
    check(x.wait(5) and b"[DONE]" in x.data, "stream in flight not drained: %r" % x.data[-200:])
    check(code == 0, "supervisor exit %r after SIGTERM" % code)
    check(children(gw.p.pid) == [], "worker left behind")


@test("crash/request ids differ between worker incarnations")
def t_ids():
    gw, _ = start_gateway("ids", base_config(), workers=1)
    ids = set()
    for _ in range(3):
        r = request(gw.port, "POST", "/v1/chat/completions", chat("fast"))
        m = re.search(rb"x-request-id: (\S+)", r.data, re.I)
        check(m, "no x-request-id")
        check(m.group(1) not in ids, "request id %r repeated" % m.group(1))
        ids.add(m.group(1))
        w = worker_of(gw)
        os.kill(w, signal.SIGKILL)
        worker_of(gw, not_pid=w)
        check(wait_until(lambda: b"died" in gw.stderr(), 5), "no death line")
    check(gw.stop() == 0, "exit status")


@test("backoff/a worker killed 4 times quickly is restarted after a logged delay")
def t_backoff():
    gw, _ = start_gateway("backoff", base_config(), workers=1)
    pid = None
    for i in range(4):
        w = worker_of(gw, not_pid=pid, timeout=10)
        # Killing the same worker twice would count one death.
        os.kill(w, signal.SIGKILL)
        pid = w
        check(wait_until(lambda: gw.stderr().count(b"died") >= i + 1, 10),
              "death %d not logged" % (i + 1))
    err = gw.stderr().decode()
    delays = [int(m) for m in re.findall(r"restarting in (\d+) ms", err)]
    check(len(delays) >= 2 and delays[-1] > delays[0],
          "no growing logged delay: %r" % err[-1500:])
    # It still comes back.
    worker_of(gw, not_pid=pid, timeout=10)
    assert_served(gw.port, "after the backoff")
    check(gw.stop() == 0, "exit status")


@test("reload/non-loopback without client keys is refused and the old config kept")
def t_reload_keys():
    env = {"SUPTEST_KEYS": "ck-supervisor-1"}
    cfg = base_config(client_keys_env="SUPTEST_KEYS")
    gw, path = start_gateway("keys", cfg, ["--listen", "0.0.0.0:0"], env=env)
    auth = [("Authorization", "Bearer ck-supervisor-1")]
    r = request(gw.port, "POST", "/v1/chat/completions", chat("fast"), auth)
    check(r.status() == 200, "with key: %r" % r.data[:200])
    del cfg["client_keys_env"]
    cfg["routes"].append({"name": "added", "targets": ["mock/added"]})
    write_config("keys.json", cfg)
    gw.p.send_signal(signal.SIGHUP)
    check(wait_until(lambda: b"refusing" in gw.stderr(), 5),
          "no refusal logged: %r" % gw.stderr()[-800:])
    check(b"keeping the running config" in gw.stderr(), "not said: keeping")
    r = request(gw.port, "POST", "/v1/chat/completions", chat("fast"))
    check(r.status() == 401, "without key after refused reload: %r" % r.data[:200])
    r = request(gw.port, "POST", "/v1/chat/completions", chat("added"), auth)
    check(r.status() == 404, "route of the refused config is served: %r" % r.data[:200])
    check(gw.stop() == 0, "exit status")


@test("reload/a listen change is reported as needing a restart; limits apply to the next request")
def t_reload_listen_limits():
    cfg = base_config()
    gw, path = start_gateway("limits", cfg)
    big = chat("fast", size=4000)
    r = request(gw.port, "POST", "/v1/chat/completions", big)
    check(r.status() == 200, "4 kB body before reload: %r" % r.data[:200])
    cfg["listen"] = LOCAL + ":1"
    cfg["limits"] = {"max_body_bytes": 2048}
    write_config("limits.json", cfg)
    gw.p.send_signal(signal.SIGHUP)
    check(wait_until(lambda: b"SIGHUP: reloaded" in gw.stderr(), 5), "no reload line")
    err = gw.stderr().decode()
    check("listen changed" in err and "needs a restart" in err, "listen: %r" % err[-800:])
    r = request(gw.port, "POST", "/v1/chat/completions", big)
    check(r.status() == 413, "4 kB body after max_body_bytes 2048: %r" % r.data[:200])
    assert_served(gw.port, "small body after reload")
    check(gw.stop() == 0, "exit status")


def start_stream(gw, rid=None):
    """A 1.8 s stream (30 tokens) through gw, once its first token came."""
    hs = [("x-request-id", rid)] if rid else []
    x = Exchange(gw.port, "POST", "/v1/chat/completions",
                 chat("drainstream", stream=True), hs)
    check(wait_until(lambda: b" w1" in x.data, 10), "stream did not start: %r" % x.data[-300:])
    return x


def whole(x):
    """Whether a stream of start_stream came whole: every token and [DONE]."""
    body = x.body()
    return b" w30" in body and b"[DONE]" in body


@test("drain/SIGTERM, then SIGHUP and SIGTERM to the supervisor: the stream in flight completes whole")
def t_drain_supervisor():
    gw, _ = start_gateway("drain-sup", base_config())
    x = start_stream(gw)
    gw.p.send_signal(signal.SIGTERM)
    check(wait_until(lambda: b"SIGTERM: stopping" in gw.stderr(), 5), "no stopping line")
    gw.p.send_signal(signal.SIGHUP)  # logrotate's postrotate
    gw.p.send_signal(signal.SIGTERM)
    code = gw.wait(20)
    check(x.wait(5) and whole(x), "stream in flight not whole: %r" % x.data[-300:])
    check(code == 0, "supervisor exit %r" % code)
    err = gw.stderr().decode("utf-8", "replace")
    check("SIGHUP: stopping; ignored" in err and "SIGTERM: already stopping; ignored" in err,
          "ignored signals not logged: %r" % err[-1500:])
    check("died" not in err and "reloaded" not in err, "log: %r" % err[-1500:])


@test("drain/SIGTERM to supervisor and worker, then SIGHUP and SIGTERM to the worker (systemd's control-group kill): the stream completes whole")
def t_drain_worker():
    gw, _ = start_gateway("drain-worker", base_config())
    worker = worker_of(gw)
    x = start_stream(gw)
    gw.p.send_signal(signal.SIGTERM)
    os.kill(worker, signal.SIGTERM)
    check(wait_until(lambda: b"SIGTERM: stopping" in gw.stderr(), 5), "no stopping line")
    os.kill(worker, signal.SIGHUP)
    os.kill(worker, signal.SIGTERM)
    code = gw.wait(20)
    check(x.wait(5) and whole(x), "stream in flight not whole: %r" % x.data[-300:])
    check(code == 0, "supervisor exit %r" % code)
    err = gw.stderr().decode("utf-8", "replace")
    # Two SIGTERMs pending at once are one; the one after the drain began
    # is logged.
    check("SIGTERM: already stopping; ignored" in err and
          "SIGHUP: stopping; ignored" in err, "ignored signals not logged: %r" % err[-1500:])


@test("drain/Ctrl-C (SIGINT to the process group) drains the stream; a second one stops at once")
def t_drain_ctrl_c():
    gw, _ = start_gateway("drain-int", base_config(), new_session=True)
    worker = worker_of(gw)
    x = start_stream(gw, "cut-by-ctrl-c")
    os.killpg(gw.pid, signal.SIGINT)
    check(wait_until(lambda: b"SIGINT: stopping" in gw.stderr(), 5), "no stopping line")
    check(wait_until(lambda: b" w6" in x.data or x.eof, 10) and not x.eof,
          "the stream did not go on after one Ctrl-C: %r" % x.data[-300:])
    check(alive(worker), "the worker is gone after one Ctrl-C")
    os.killpg(gw.pid, signal.SIGINT)
    check(x.wait(2), "the stream was not cut at once by a second Ctrl-C")
    check(b"[DONE]" not in x.data, "a second Ctrl-C let the stream finish")
    code = gw.wait(5)
    check(code == 130, "supervisor exit %r after a second Ctrl-C" % code)
    err = gw.stderr().decode("utf-8", "replace")
    check("SIGINT again: stopping at once" in err, "no 'at once' line: %r" % err[-1500:])
    check(not alive(worker), "the worker still runs")


@test("drain/SIGINT to the supervisor drains; a second SIGINT stops at once (exit 130, the cut request named)")
def t_drain_int_twice():
    gw, _ = start_gateway("drain-int2", base_config())
    x = start_stream(gw, "cut-by-sigint")
    gw.p.send_signal(signal.SIGINT)
    check(wait_until(lambda: b"stopping" in gw.stderr(), 5), "no stopping line")
    check(wait_until(lambda: b" w6" in x.data or x.eof, 10) and not x.eof,
          "the stream did not go on after one SIGINT: %r" % x.data[-300:])
    gw.p.send_signal(signal.SIGINT)
    check(x.wait(2), "the stream was not cut at once by a second SIGINT")
    check(b"[DONE]" not in x.data, "a second SIGINT let the stream finish")
    code = gw.wait(5)
    check(code == 130, "supervisor exit %r after a second SIGINT" % code)
    err = gw.stderr().decode("utf-8", "replace")
    line = [ln for ln in err.splitlines() if "exited" in ln or "died" in ln]
    check(len(line) == 1 and "cut-by-sigint" in line[0] and "restarting" not in line[0],
          "the cut request not named: %r" % err[-1500:])


@test("orphan/a SIGKILLed supervisor's worker drains its stream, stops listening and exits")
def t_orphan():
    gw, _ = start_gateway("orphan", base_config())
    worker = worker_of(gw)
    try:
        x = start_stream(gw)
        gw.p.kill()
        gw.p.wait(5)
        check(wait_until(lambda: refused(gw.port), 5), "the orphan worker still listens")
        check(x.wait(10) and whole(x), "stream in flight not whole: %r" % x.data[-300:])
        check(wait_until(lambda: not alive(worker), 10), "the orphan worker still runs")
    finally:
        if alive(worker):
            os.kill(worker, signal.SIGKILL)


@test("double/a second airetry serve on the same address is refused, naming it; a start after a stop binds")
def t_double():
    port = airtest.free_port()
    addr = "%s:%d" % (LOCAL, port)
    first, path = start_gateway("first", base_config(), ["--listen", addr])
    assert_served(port, "the first gateway")
    args = [BIN, "serve", "--config", path, "--listen", addr, "--workers", "2"]
    second = Proc("second", args, expect_listen=False)
    code = second.wait(10)
    check(code not in (None, 0), "the second gateway was not refused (exit %r)" % code)
    err = second.stderr().decode("utf-8", "replace")
    check(addr in err and "in use" in err, "the refusal does not name %s: %r" % (addr, err))
    for _ in range(20):  # every connection goes to the first one still
        assert_served(port, "the first gateway after the refused start")
    check(first.stop() == 0, "first: exit status")
    # Another start that holds the address's lock (the same moment) wins.
    lock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        lock.bind("\0airetry-serve/" + addr)
        third = Proc("third", args, expect_listen=False)
        code = third.wait(10)
        check(code not in (None, 0), "a start while the lock is held (exit %r)" % code)
        check(addr in third.stderr().decode("utf-8", "replace"), "the refusal does not name it")
    finally:
        lock.close()
    again, _ = start_gateway("again", base_config(), ["--listen", addr])
    assert_served(port, "a start after a stop")
    check(again.stop() == 0, "again: exit status")


LONG_MODEL = "mock/" + "f" * 1000


@test("log/a stalled stderr pipe never stalls requests nor the supervisor; lines flow once read; drops counted")
def t_log_stall():
    cfg = base_config()
    gw, path = start_gateway("stall", cfg, stall_stderr=True)
    # Fill the pipe (64 KiB) and the ring: every request logs a line.
    t0 = time.monotonic()
    n = 0
    while n < 200 or (metric(gw.port, "airetry_log_lines_dropped_total") or 0) == 0:
        check(n < 60000, "the log ring never overflowed")
        # A direct provider/model with a long name: a ~3 kB log line each.
        xs = [Exchange(gw.port, "POST", "/v1/chat/completions", chat(LONG_MODEL),
                       [("x-request-id", "stall-%d" % (n + k))])
              for k in range(50)]
        for x in xs:
            check(x.wait(10), "request stalled behind stderr")
            check(x.status() == 200, "request failed: %r" % x.data[:200])
        n += 50
        if n == 200:
            took = time.monotonic() - t0
            check(took < 20, "200 requests took %.1f s" % took)
    # The supervisor goes on while stderr is stalled: a worker's death line
    # does not stop the restart, a refused reload's errors do not stop the
    # next reload.
    fill_stderr(gw.pid)
    worker = worker_of(gw)
    os.kill(worker, signal.SIGKILL)
    worker = worker_of(gw, not_pid=worker)
    assert_served(gw.port, "after a restart with stderr stalled")
    write_config("stall.json", "{not json")
    gw.p.send_signal(signal.SIGHUP)
    cfg["routes"].append({"name": "added", "targets": ["mock/added"]})
    write_config("stall.json", cfg)
    gw.p.send_signal(signal.SIGHUP)

    def added():
        r = request(gw.port, "POST", "/v1/chat/completions", chat("added"), timeout=5)
        return r.status() == 200
    check(wait_until(added, 10, 0.1), "a reload with stderr stalled was not applied")
    fd = gw.p.stderr.fileno()
    os.set_blocking(fd, False)
    got = b""

    def drain():
        nonlocal got
        while True:
            try:
                d = os.read(fd, 1 << 16)
            except BlockingIOError:
                return
            if not d:
                return
            got += d
    check(wait_until(lambda: (drain(), b"stall-" in got)[1], 10), "no line after reading")
    request(gw.port, "POST", "/v1/chat/completions", chat("fast"),
            [("x-request-id", "after-the-stall")])
    check(wait_until(lambda: (drain(), b"after-the-stall" in got)[1], 10),
          "the line of a request after the stall never came")
    check(b"stall-" in got and b"\"request_id\"" in got, "lines: %r" % got[:300])
    for ln in got.split(b"\n")[1:-1]:
        check(ln == b"" or ln.startswith(b"{") or ln.startswith(b"airetry") or
              b"stall.json:" in ln,
              "mixed line: %r" % ln[:200])
    # The supervisor's next line says how many of its lines were dropped.
    write_config("stall.json", "{not json")
    gw.p.send_signal(signal.SIGHUP)
    check(wait_until(lambda: (drain(), b"keeping the running config" in got)[1], 10),
          "no refused-reload line after the stall")
    check(re.search(rb"airetry serve: \d+ lines? dropped", got), "no drop count: %r" % got[-1500:])
    # Stall the pipe again, then stop: the supervisor forwards SIGTERM and
    # logs a second one as ignored without waiting on stderr; the worker
    # drains (its loop threads end) and waits to write its last lines until
    # the pipe is read.
    fill_stderr(gw.pid)
    threads_before = threads(worker)
    gw.p.send_signal(signal.SIGTERM)
    gw.p.send_signal(signal.SIGTERM)
    check(wait_until(lambda: threads(worker) <= threads_before - 2, 10),
          "the worker did not stop its loop threads after SIGTERM")
    got = b""
    check(wait_until(lambda: (drain(), gw.poll() is not None)[1], 15), "the supervisor did not exit")
    check(gw.poll() == 0, "exit status %r" % gw.poll())


# ---- main ------------------------------------------------------------------------------


def mock_log():
    return airtest.mock_log(MOCK.port)


def main():
    def setup(binary):
        global BIN, MOCK
        BIN = binary
        MOCK = Proc("mock", [BIN, "mock", "--listen", LOCAL + ":0"])
        return lambda fn: fn()
    return airtest.main(TESTS, setup, own_procs=True, summary=False)


if __name__ == "__main__":
    sys.exit(main())
