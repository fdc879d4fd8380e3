#!/usr/bin/env bash
# Security tests of `airetry serve` (docs/security.md): client auth, secrets
# never echoed, header injection, upstream URL only from config, request
# smuggling, slow and oversized inputs, the non-loopback listen guard.
#
#   tests/security/run.sh PATH/TO/airetry [TEST-NAME-SUBSTRING...]
#
# The work is done by test_gateway.py, run by tests/lib/pysuite.sh.
here="$(cd "$(dirname "$0")" && pwd)"
exec bash "$here/../lib/pysuite.sh" "$here/test_gateway.py" "$@"
