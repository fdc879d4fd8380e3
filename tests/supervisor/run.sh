#!/usr/bin/env bash
# Supervision, reload and log tests of `airetry serve` (docs/design.md §5): a worker
# crash under load, the restart backoff, validated reloads and logs that never
# block a worker on a stalled stderr.
#
#   tests/supervisor/run.sh PATH/TO/airetry [TEST-NAME-SUBSTRING...]
#
# The work is done by test_supervisor.py, run by tests/lib/pysuite.sh.
here="$(cd "$(dirname "$0")" && pwd)"
exec bash "$here/../lib/pysuite.sh" "$here/test_supervisor.py" "$@"
