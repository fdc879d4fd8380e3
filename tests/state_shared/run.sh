#!/usr/bin/env bash
# Several gateways sharing breaker, probe, cooldown and sticky state through
# one private redis-server (docs/design.md §3.1, docs/scale-out.md).
#
#   tests/state_shared/run.sh PATH/TO/airetry [TEST-NAME-SUBSTRING...]
#
# The work is done by test_state_shared.py, run by tests/lib/pysuite.sh.
here="$(cd "$(dirname "$0")" && pwd)"
exec bash "$here/../lib/pysuite.sh" "$here/test_state_shared.py" "$@"
