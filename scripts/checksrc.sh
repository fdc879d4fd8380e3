#!/usr/bin/env bash
# Rejects the functions STYLE.md 6 bans from the tree (as curl's checksrc does).
# snprintf/vsnprintf are fine: the pattern needs the banned name whole.
set -u
cd "$(dirname "$0")/.."
existing=()
for d in include src tests examples bench fuzz; do [ -d "$d" ] && existing+=("$d"); done
bad=$(grep -rnE --include='*.c' --include='*.h' \
  '(^|[^_[:alnum:]])(sprintf|vsprintf|strcat|strncat|strtok|gets)[[:space:]]*\(' \
  "${existing[@]}")
if [ -n "$bad" ]; then
  echo "checksrc: banned functions (STYLE.md 6):" >&2
  echo "$bad" >&2
  exit 1
fi
echo "checksrc: ok"
