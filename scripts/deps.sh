#!/usr/bin/env bash
# Installs the Debian packages airetry needs to build and test, if any are missing.
# Idempotent: does nothing when everything is present. As root it runs apt-get;
# otherwise it prints the exact command to run and exits 1.
#   scripts/deps.sh          what `make check` needs
#   scripts/deps.sh bench    that plus what only `make bench` needs (nginx-light:
#                            the reference upstream and plain proxy of bench/vs_nginx.sh;
#                            strace: the system calls of bench/syscalls.sh)
set -eu

pkgs=(
  build-essential cmake ninja-build pkg-config clang
  libcurl4-openssl-dev libuv1-dev libjansson-dev libfyaml-dev
  libcmocka-dev libhiredis-dev redis-server node-llhttp wrk valgrind cppcheck clang-tidy clang-format
  python3 curl libclang-rt-14-dev
)
# tests/e2e needs node (20+) and npm: Debian's only where none is installed
# (a NodeSource nodejs bundles npm and conflicts with Debian's npm package).
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || pkgs+=(nodejs npm)
[ "${1:-}" = bench ] && pkgs+=(nginx-light strace)

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "airetry: missing packages: ${missing[*]}" >&2
  echo "run: sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi

echo "airetry: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
# Packages are installed, never started: the bench starts its own nginx on
# ephemeral ports, so policy-rc.d (honoured by invoke-rc.d in maintainer
# scripts) refuses service starts for the install when none is in place.
prc=/usr/sbin/policy-rc.d
if [ ! -e "$prc" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$prc" && chmod 755 "$prc"
  trap 'rm -f "$prc"' EXIT
fi
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
