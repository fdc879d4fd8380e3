#!/usr/bin/env python3
"""clang-tidy over C sources for scripts/lint.sh, JOBS at a time; a file
whose inputs are unchanged since it last passed is not checked again.

  scripts/tidy.py BUILD_DIR JOBS CACHE_DIR FILE...

Run from the source root; FILE is relative to it and must be in
BUILD_DIR/compile_commands.json (a file missing there is a failure, since
clang-tidy would skip it silently). The findings go to stdout; exit 1 on
any finding or failure, else 0.

A file's key hashes everything its result depends on: clang-tidy's version,
every .clang-tidy from the file's folder up to the root, the compile command
and the bytes of every file the translation unit reads (the source and each
header, as `clang -M` lists them under the same command), with the source
root's path replaced by a fixed name so that fresh clones share the cache.
Only passes are recorded (an empty file named by the key, touched when
used; unused for 30 days, removed), so a finding is always checked again.
An empty CACHE_DIR, or no clang to list the inputs, checks every file.
"""
import concurrent.futures
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

KEEP_DAYS = 30


def main():
    build, jobs, cache = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    files = sys.argv[4:]
    root = os.path.realpath(os.getcwd())
    db = {}
    with open(os.path.join(build, "compile_commands.json")) as f:
        for e in json.load(f):
            db[os.path.realpath(os.path.join(e["directory"], e["file"]))] = e
    missing = [f for f in files if os.path.realpath(f) not in db]
    for f in missing:
        print(f"lint: {f} is not in {build}/compile_commands.json (not built?)")
    files = [f for f in files if f not in missing]

    version = subprocess.run(["clang-tidy", "--version"], capture_output=True,
                             text=True, check=True).stdout
    major = re.search(r"version (\d+)", version)
    clang = (shutil.which(f"clang-{major.group(1)}") if major else None) or shutil.which("clang")
    if cache:
        try:
            os.makedirs(cache, exist_ok=True)
        except OSError as e:
            print(f"lint: no cache ({e})", file=sys.stderr)
            cache = ""
    digests = {}

    def digest(path):
        d = digests.get(path)
        if d is None:
            with open(path, "rb") as f:
                d = digests[path] = hashlib.sha256(f.read()).digest()
        return d

    def key(path):
        if not cache or clang is None:
            return None
        e = db[os.path.realpath(path)]
        args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
        pp, skip = [clang], False
        for a in args[1:]:
            if skip:
                skip = False
            elif a in ("-o", "-MF", "-MT", "-MQ"):
                skip = True
            elif a not in ("-c", "-MD", "-MMD"):
                pp.append(a)
        r = subprocess.run(pp + ["-M", "-w"], cwd=e["directory"],
                           capture_output=True, text=True)
        if r.returncode != 0 or "\\ " in r.stdout:
            return None
        deps = r.stdout.replace("\\\n", " ").split(":", 1)[1].split()
        h = hashlib.sha256()
        h.update(version.encode() + b"\0")
        h.update(" ".join(pp[1:]).replace(root, "@").encode() + b"\0")
        d = os.path.dirname(os.path.realpath(path))
        while d.startswith(root):
            cfg = os.path.join(d, ".clang-tidy")
            if os.path.exists(cfg):
                h.update(cfg.replace(root, "@").encode() + b"\0" + digest(cfg))
            d = os.path.dirname(d)
        for dep in deps:
            p = os.path.realpath(os.path.join(e["directory"], dep))
            h.update(p.replace(root, "@").encode() + b"\0" + digest(p))
        return h.hexdigest()

    def check(path):
        k = key(path)
        entry = os.path.join(cache, k) if k else None
        if entry and os.path.exists(entry):
            os.utime(entry)
            return path, 0, "", True
        r = subprocess.run(["clang-tidy", "-p", build, "--quiet", path],
                           capture_output=True, text=True)
        if r.returncode == 0 and entry:
            tmp = f"{entry}.{os.getpid()}.tmp"
            open(tmp, "w").close()
            os.replace(tmp, entry)
        return path, r.returncode, r.stdout + r.stderr, False

    with concurrent.futures.ThreadPoolExecutor(max(jobs, 1)) as ex:
        results = list(ex.map(check, files))
    failed = [(p, out) for p, rc, out, _ in results if rc != 0]
    for p, out in failed:
        print(out if out.strip() else f"{p}: clang-tidy failed")
    cached = sum(1 for *_, hit in results if hit)
    print(f"clang-tidy: {len(results)} files, {len(failed)} with findings, "
          f"{cached} unchanged since they passed"
          + (f" ({cache})" if cache else " (no cache)"))
    if cache:
        old = time.time() - KEEP_DAYS * 86400
        for name in os.listdir(cache):
            p = os.path.join(cache, name)
            if os.path.getmtime(p) < old:
                os.remove(p)
    return 1 if failed or missing else 0


if __name__ == "__main__":
    sys.exit(main())
