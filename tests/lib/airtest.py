"""The harness every python suite of `airetry` shares (standard library only).

    import airtest                      # tests/lib on sys.path
    WORK = airtest.init("upstreams")    # a private temp dir for configs, stderr
    mock = airtest.Proc("mock", [binary, "mock", "--listen", airtest.LOCAL + ":0"])
    status, headers, body = airtest.fetch(mock.port, "GET", "/__mock/log")
    ...
    airtest.stop_all()                  # in the suite's finally

Children are started on 127.0.0.1 ephemeral ports and wait for their first
stdout line, `listening on http://HOST:PORT`, with a deadline; every process
started through Proc is in PROCS and stop_all stops them (SIGTERM, then
SIGKILL). Every wait here is bounded.
"""

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

LOCAL = "127.0.0.1"
LISTENING = "listening on http://"
PROCS = []  # every Proc started, in order
WORK = None  # the suite's temp dir (init)


def init(name):
    """Makes the suite's temp dir; SIGTERM (ctest's timeout, pysuite.sh)
    becomes SystemExit so the suite's finally still stops its children."""
    global WORK
    WORK = tempfile.mkdtemp(prefix="airetry-%s-" % name)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    return WORK


def remove_work():
    if WORK:
        shutil.rmtree(WORK, ignore_errors=True)


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def wait_until(pred, timeout, step=0.02):
    """Polls pred until it holds or timeout seconds pass; its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return pred()


def free_port():
    """A 127.0.0.1 port nothing listens on (bound, then closed)."""
    s = socket.socket()
    s.bind((LOCAL, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def children(pid):
    """Child pids of pid (a supervisor's workers)."""
    out = []
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                out += [int(x) for x in f.read().split()]
    except (FileNotFoundError, ProcessLookupError):
        pass
    return out


def write_file(name, obj):
    """Writes obj (a str as it is, anything else as JSON) to WORK/name."""
    path = os.path.join(WORK, name)
    with open(path, "w") as f:
        if isinstance(obj, str):
            f.write(obj)
        else:
            json.dump(obj, f, indent=1)
    return path


# ---- processes ------------------------------------------------------------------------


class Proc:
    """A child whose stdout's first line is `listening on http://H:P`
    (expect_listen). stderr goes to WORK/NAME-N.stderr, or to a pipe nobody
    reads (stall_stderr). env adds to this process's environment, less the
    variables whose names start with one of drop_env. new_session: the child
    leads its own session and process group (a group signal reaches it and
    its children, as a terminal's Ctrl-C does)."""

    def __init__(self, name, args, env=None, timeout=20.0, stall_stderr=False,
                 expect_listen=True, drop_env=(), new_session=False):
        self.name = name
        self.err_path = os.path.join(WORK, "%s-%d.stderr" % (name, len(PROCS)))
        self.err_file = None if stall_stderr else open(self.err_path, "wb")
        full = {k: v for k, v in os.environ.items()
                if not any(k.startswith(d) for d in drop_env)}
        full.update(env or {})
        self.p = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if stall_stderr else self.err_file, env=full,
            start_new_session=new_session)
        PROCS.append(self)
        self.port = None
        self.host = None
        self.first_line = ""
        if expect_listen:
            line = self.read_line(timeout)
            self.first_line = line
            if not line.startswith(LISTENING):
                self.stop()
                raise RuntimeError("%s did not start: stdout %r, stderr %r"
                                   % (name, line, self.stderr()[-800:]))
            host, _, port = line[len(LISTENING):].strip().rpartition(":")
            self.host = host.strip("[]")
            self.port = int(port)

    @property
    def pid(self):
        return self.p.pid

    def poll(self):
        return self.p.poll()

    def read_line(self, timeout):
        """The next stdout line, or what came of it within timeout seconds."""
        fd = self.p.stdout.fileno()
        buf = b""
        deadline = time.monotonic() + timeout
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            buf += chunk
        return buf.split(b"\n", 1)[0].decode("utf-8", "replace")

    def stderr(self):
        """Everything the child wrote to stderr so far (bytes)."""
        if self.err_file is None:
            return b""
        if not self.err_file.closed:
            self.err_file.flush()
        with open(self.err_path, "rb") as f:
            return f.read()

    def wait(self, timeout):
        """The exit status, or None while it still runs after timeout."""
        try:
            return self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def terminate(self):
        if self.p.poll() is None:
            try:
                self.p.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass

    def stop(self, timeout=15.0):
        """SIGTERM, then SIGKILL after timeout. Returns the exit status."""
        self.terminate()
        if self.wait(timeout) is None:
            self.p.kill()
            self.p.wait(timeout=5)
        for f in (self.p.stdout, self.p.stderr, self.err_file):
            try:
                if f is not None:
                    f.close()
            except Exception:  # noqa: BLE001 - closing what is left
                pass
        return self.p.returncode


def stop_all(timeout=10.0):
    """Stops every Proc started: SIGTERM to all first, then each waited for."""
    for p in PROCS:
        p.terminate()
    for p in reversed(PROCS):
        try:
            p.stop(timeout)
        except Exception:  # noqa: BLE001 - stop the others anyway
            pass


# ---- HTTP/1.1 on raw sockets ------------------------------------------------------------


def dechunk(body):
    """The payload of a chunked body (what came of it, when it is cut)."""
    out, rest = b"", body
    while rest:
        line, _, rest = rest.partition(b"\r\n")
        try:
            n = int(line.split(b";")[0], 16)
        except ValueError:
            break
        if n == 0:
            break
        out += rest[:n]
        rest = rest[n + 2:]
    return out


def parse_response(raw):
    """(status, {lower name: value}, body) of a whole response; the body is
    dechunked. status is None when no complete head came."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        return None, {}, b""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split()
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
    hs = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        hs[k.strip().lower()] = v.strip()
    if hs.get("transfer-encoding", "").lower() == "chunked":
        body = dechunk(body)
    return status, hs, body


def exchange(port, method, path, body=None, headers=None, timeout=30):
    """Sends one request with `connection: close` on a fresh connection and
    reads until the server closes; the raw response. A dict or list body is
    sent as JSON; headers is a dict or a list of pairs."""
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    elif isinstance(body, str):
        body = body.encode()
    data = body or b""
    h = {"host": "x", "content-length": str(len(data)), "connection": "close"}
    if body is not None:
        h["content-type"] = "application/json"
    h.update(dict(headers or {}))
    head = "%s %s HTTP/1.1\r\n" % (method, path)
    head += "".join("%s: %s\r\n" % kv for kv in h.items()) + "\r\n"
    with socket.create_connection((LOCAL, port), timeout=timeout) as s:
        s.sendall(head.encode("latin-1") + data)
        raw = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            raw += d
    return raw


def fetch(port, method, path, body=None, headers=None, timeout=30):
    """exchange, parsed: (status, headers dict, body bytes); fails the test
    when no complete response head came."""
    raw = exchange(port, method, path, body, headers, timeout)
    status, hs, rest = parse_response(raw)
    check(status is not None, "no complete response head: %r" % raw[:300])
    return status, hs, rest


def sse(body):
    """[(event name or None, data)] of an event stream."""
    out = []
    for block in body.decode().split("\n\n"):
        if not block.strip():
            continue
        name, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        out.append((name, "\n".join(data)))
    return out


def mock_log(port, timeout=10):
    """The attempts `airetry mock` on port has logged."""
    status, _, body = fetch(port, "GET", "/__mock/log", timeout=timeout)
    check(status == 200, "mock log: %r" % status)
    return json.loads(body)["attempts"]


def mock_reset(port):
    status, _, _ = fetch(port, "POST", "/__mock/reset")
    check(status == 204, "mock reset: %r" % status)


# ---- running the tests -----------------------------------------------------------------


def registry():
    """(TESTS, test): a list of (name, function) and its decorator."""
    tests = []

    def test(name):
        def deco(fn):
            tests.append((name, fn))
            return fn
        return deco
    return tests, test


def selected(tests, only):
    """The tests whose name holds one of only's substrings (all without)."""
    return [(n, f) for n, f in tests if not only or any(o in n for o in only)]


def run(tests, only, call=lambda fn: fn(), own_procs=False, on_fail=None):
    """Runs the selected tests, one "ok"/"FAIL" line each; the failures.
    own_procs: what a test started is stopped when it ends; on_fail(procs)
    is told what a failed test started."""
    failed = 0
    for name, fn in selected(tests, only):
        t0 = time.monotonic()
        before = len(PROCS)
        try:
            call(fn)
            print("ok   %s (%.1fs)" % (name, time.monotonic() - t0), flush=True)
        except Exception:  # noqa: BLE001 - report and go on
            failed += 1
            print("FAIL %s\n%s" % (name, traceback.format_exc()), flush=True)
            if on_fail is not None:
                on_fail(PROCS[before:])
        finally:
            if own_procs:
                for p in PROCS[before:]:
                    p.stop()
    return failed


def main(tests, setup, finish=None, cleanup=None, own_procs=False, on_fail=None,
         summary=True):
    """A suite's main: argv is `PATH/TO/airetry [NAME-SUBSTRING...]`.
    setup(binary) starts what every test shares and returns how a test is
    called (fn -> None); finish() checks after the last test; cleanup()
    stops what is not a Proc, before every Proc is stopped and WORK removed.
    Exits 1 when any test failed."""
    binary = os.path.abspath(sys.argv[1])
    only = sys.argv[2:]
    failed = 0
    try:
        call = setup(binary)
        failed = run(tests, only, call, own_procs, on_fail)
        if finish is not None:
            finish()
    finally:
        if cleanup is not None:
            cleanup()
        stop_all()
        remove_work()
    if summary:
        n = len(selected(tests, only))
        print("%d passed, %d failed" % (n - failed, failed))
    return 1 if failed else 0
