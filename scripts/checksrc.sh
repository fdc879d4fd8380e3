#!/usr/bin/env bash
# Rejects the functions docs/style.md §6 bans from the tree (as curl's checksrc does)
# and includes that climb out of a layer with '..'.
# snprintf/vsnprintf are fine: the pattern needs the banned name whole.
set -u
cd "$(dirname "$0")/.."
existing=()
for d in include src tests examples bench fuzz; do [ -d "$d" ] && existing+=("$d"); done
bad=$(grep -rnE --include='*.c' --include='*.h' \
  '(^|[^_[:alnum:]])(sprintf|vsprintf|strcat|strncat|strtok|gets)[[:space:]]*\(' \
  "${existing[@]}")
if [ -n "$bad" ]; then
  echo "checksrc: banned functions (docs/style.md §6):" >&2
  echo "$bad" >&2
  exit 1
fi
# Layers (docs/design.md §1): a header is found through the including layer's own
# include directories, never by a relative path around them.
rel=$(grep -rnE --include='*.c' --include='*.h' '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*\.\.' \
  "${existing[@]}")
if [ -n "$rel" ]; then
  echo "checksrc: '..' in an #include (each layer sees only the headers it may use):" >&2
  echo "$rel" >&2
  exit 1
fi
echo "checksrc: ok"
