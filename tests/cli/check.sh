#!/usr/bin/env bash
# `airetry check`: exit codes, the resolved dump on stdout, and every error of
# tests/data/config/bad.yaml on stderr at the position its "expect" comments
# name. Usage: bash check.sh /path/to/airetry (AIR_SOURCE_DIR = source tree).
set -u
bin=${1:?usage: check.sh /path/to/airetry}
src=${AIR_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
data=$src/tests/data/config
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# run NAME EXPECTED_RC ARGS...: runs the binary, keeps stdout/stderr in $tmp.
run() {
  local name=$1 want=$2
  shift 2
  "$bin" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
  local rc=$?
  [ "$rc" -eq "$want" ] || fail "$name: exit $rc, want $want ($(head -c 300 "$tmp/$name.err"))"
}

# The example config: valid, warnings only, resolved routes printed.
unset OPENAI_API_KEY ANTHROPIC_API_KEY
run example 0 check --config "$src/examples/airetry.yaml"
grep -q ': error: ' "$tmp/example.err" && fail "example: errors: $(cat "$tmp/example.err")"
grep -q 'airetry.yaml:[0-9]*:[0-9]*: warning: providers\[0\].api_key_env: OPENAI_API_KEY is not set' \
  "$tmp/example.err" || fail "example: no warning for the unset OPENAI_API_KEY"
for want in '^routes:$' '^  - name: smart$' '^  - name: fast$' \
            'first_chunk_ms: 60000' 'max_total_attempts: 6' \
            'api_key_env: OPENAI_API_KEY  # NOT SET' \
            'backoff: {base_ms: 500, factor: 2, max_ms: 8000, jitter: full}' \
            'request_timeout_ms: 30000'; do
  grep -q -- "$want" "$tmp/example.out" || fail "example: stdout lacks '$want'"
done

# A key value is never printed, only whether it is set.
OPENAI_API_KEY=sk-test-secret-1234 run secret 0 check -c "$src/examples/airetry.yaml"
grep -q 'sk-test-secret-1234' "$tmp/secret.out" "$tmp/secret.err" && fail "secret: key value printed"
grep -q 'api_key_env: OPENAI_API_KEY  # set' "$tmp/secret.out" || fail "secret: not shown as set"

# The dump is a valid config that resolves to the same thing.
run reload 0 check --config "$tmp/example.out"
diff <(tail -n +2 "$tmp/example.out") <(tail -n +2 "$tmp/reload.out") >/dev/null ||
  fail "reload: the dump does not load back to the same config"

# JSON input.
run json 0 check --config="$data/good.json"
grep -q '^listen: "127.0.0.1:9090"$' "$tmp/json.out" || fail "json: listen not resolved"
grep -q 'first_chunk_ms: 2000' "$tmp/json.out" || fail "json: target timeouts not merged"

# Every expected error of bad.yaml, at its line and column, and no other.
run bad 2 check --config "$data/bad.yaml"
expected=0
while IFS=$'\t' read -r line col sub; do
  expected=$((expected + 1))
  grep -F -- "bad.yaml:$line:$col: error: " "$tmp/bad.err" | grep -q -F -- "$sub" ||
    fail "bad: missing bad.yaml:$line:$col: error: ...$sub"
done < <(awk '{
  n = split($0, parts, "# expect: ")
  for (i = 2; i <= n; i++) {
    p = parts[i]; sub(/ +$/, "", p)
    c = index(p, ": ")
    printf "%d\t%s\t%s\n", NR, substr(p, 1, c - 1), substr(p, c + 2)
  }
}' "$data/bad.yaml")
got=$(grep -c ': error: ' "$tmp/bad.err")
[ "$expected" -ge 35 ] || fail "bad: only $expected expectations parsed"
[ "$got" -eq "$expected" ] || fail "bad: $got errors, want $expected: $(cat "$tmp/bad.err")"
[ -s "$tmp/bad.out" ] && fail "bad: printed a config despite errors"

# YAML syntax errors carry a position too.
run syntax 2 check --config "$data/syntax.yaml"
grep -q 'syntax.yaml:4:[0-9]*: error: YAML syntax error' "$tmp/syntax.err" ||
  fail "syntax: no positioned YAML error: $(cat "$tmp/syntax.err")"

# base_url and the version path (a warning, never an error): an openai one
# without it, an anthropic one ending in it; the usual forms stay quiet.
cat >"$tmp/urls.yaml" <<'EOF'
providers:
  - {name: a, api: openai, base_url: "http://127.0.0.1:9/"}
  - {name: b, api: openai, base_url: "http://127.0.0.1:9/v1"}
  - {name: c, api: anthropic, base_url: "http://127.0.0.1:9/v1/"}
  - {name: d, api: anthropic, base_url: "http://127.0.0.1:9"}
  - {name: e, api: openai, base_url: "https://example.com/v1beta/openai"}
  - {name: f, api: openai, base_url: "http://127.0.0.1:9/openai"}
routes:
  - {name: r, targets: [a/x, b/x, c/x, d/x, e/x, f/x]}
EOF
run urls 0 check --config "$tmp/urls.yaml"
grep -q ': error: ' "$tmp/urls.err" && fail "urls: errors: $(cat "$tmp/urls.err")"
[ -s "$tmp/urls.out" ] || fail "urls: no config printed"
for want in 'urls.yaml:2:38: warning: providers\[0\]\.base_url: an openai base_url' \
            'urls.yaml:4:41: warning: providers\[2\]\.base_url: an anthropic base_url' \
            'urls.yaml:7:38: warning: providers\[5\]\.base_url: an openai base_url'; do
  grep -q -- "$want" "$tmp/urls.err" || fail "urls: no '$want' in: $(cat "$tmp/urls.err")"
done
n=$(grep -c 'base_url: an' "$tmp/urls.err")
[ "$n" -eq 3 ] || fail "urls: $n base_url warnings, want 3: $(cat "$tmp/urls.err")"

# Usage errors and help.
run noargs 2 check
run badflag 2 check --frobnicate
run noval 2 check --config
run missing 2 check --config "$tmp/does-not-exist.yaml"
grep -q 'does-not-exist.yaml: error: cannot open' "$tmp/missing.err" || fail "missing: no message"
run help 0 check --help
grep -q 'usage: airetry check --config FILE' "$tmp/help.out" || fail "help: no usage on stdout"

# Oversized files are refused.
head -c $((4 * 1024 * 1024 + 1)) /dev/zero | tr '\0' '#' >"$tmp/big.yaml"
run big 2 check --config "$tmp/big.yaml"
grep -q 'over the limit' "$tmp/big.err" || fail "big: no size error"

# Tracing (docs/design.md §5, Traces): the resolved settings, header names but never values;
# the environment overrides telemetry.otlp; grpc is an error.
cat >"$tmp/otel.yaml" <<'YAML'
telemetry: {otlp: {endpoint: "http://127.0.0.1:4318", headers_env: MY_OTEL_HEADERS, sample_ratio: 0.25}}
YAML
run otel_off 0 check --config "$src/examples/airetry.yaml"
grep -q '^# tracing: off' "$tmp/otel_off.out" || fail "otel_off: tracing not shown off"
MY_OTEL_HEADERS='authorization=Bearer%20sekrit-77,x-team=blue' \
  run otel_file 0 check --config "$tmp/otel.yaml"
grep -q '^#   endpoint: http://127.0.0.1:4318/v1/traces  (telemetry.otlp.endpoint)' \
  "$tmp/otel_file.out" || fail "otel_file: endpoint not resolved"
grep -q '^#   headers: authorization, x-team' "$tmp/otel_file.out" || fail "otel_file: header names"
grep -q 'parentbased_traceidratio, ratio 0.25' "$tmp/otel_file.out" || fail "otel_file: sampler"
grep -q 'sekrit-77\|blue' "$tmp/otel_file.out" "$tmp/otel_file.err" && fail "otel_file: a header value printed"
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT='http://u:pw@127.0.0.1:9/t' OTEL_SERVICE_NAME=gw-eu \
  OTEL_TRACES_SAMPLER=always_off run otel_env 0 check --config "$tmp/otel.yaml"
grep -q '^#   endpoint: http://\[redacted\]@127.0.0.1:9/t  (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)' \
  "$tmp/otel_env.out" || fail "otel_env: endpoint override (or its password shown)"
grep -q 'service.name: gw-eu' "$tmp/otel_env.out" || fail "otel_env: service name"
grep -q 'sampler: always_off' "$tmp/otel_env.out" || fail "otel_env: sampler override"
grep -q 'warning: telemetry.otlp.headers_env: MY_OTEL_HEADERS is not set' "$tmp/otel_env.err" ||
  fail "otel_env: no warning for the unset headers variable"
OTEL_EXPORTER_OTLP_PROTOCOL=grpc run otel_grpc 2 check --config "$tmp/otel.yaml"
grep -q 'error: OTEL_EXPORTER_OTLP_PROTOCOL=grpc' "$tmp/otel_grpc.err" || fail "otel_grpc: no error"
OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf run otel_pb 0 check --config "$tmp/otel.yaml"
grep -q 'warning: OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf' "$tmp/otel_pb.err" ||
  fail "otel_pb: no warning"
MY_OTEL_HEADERS='authorization=Bearer%20sekrit-77,x-team=blue' \
  run otel_reload 0 check --config "$tmp/otel_file.out"
diff <(tail -n +2 "$tmp/otel_file.out") <(tail -n +2 "$tmp/otel_reload.out") >/dev/null ||
  fail "otel_reload: the dump does not load back to the same config"

if [ "$failures" -ne 0 ]; then
  echo "check.sh: $failures failure(s)" >&2
  exit 1
fi
echo "check.sh: ok"
