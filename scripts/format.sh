#!/usr/bin/env bash
# The tree's C format is .clang-format's (docs/style.md §12): `--check` fails
# listing every file clang-format would change (make check); without it the
# files are rewritten in place (make format). The list is derived from the
# tree, never written by hand.
set -u
cd "$(dirname "$0")/.."
mode=${1:-}
mapfile -t files < <(find include src tests fuzz bench examples \
  -path tests/data -prune -o -type f \( -name '*.c' -o -name '*.h' \) -print | sort)
if [ "$mode" = "--check" ]; then
  # One clang-format for every file (a process per file is seconds more);
  # each difference is reported as FILE:LINE:COL: warning.
  report=$(clang-format --dry-run --Werror "${files[@]}" 2>&1) && rc=0 || rc=$?
  if [ $rc -ne 0 ]; then
    mapfile -t bad < <(printf '%s\n' "$report" | grep -oE '^[^: ]+:[0-9]+:[0-9]+: (warning|error)' | cut -d: -f1 | sort -u)
    echo "format: ${#bad[@]} file(s) differ from .clang-format (make format rewrites them):" >&2
    printf '%s\n' "$report" | head -40 >&2
    exit 1
  fi
  echo "format: ok (${#files[@]} files)"
else
  clang-format -i "${files[@]}"
fi
