#!/usr/bin/env bash
# After a failed `cargo test --all-targets --no-fail-fast` (scripts/test.sh): sum up each
# failing test, and run a failed integration test once more, alone, when at most three
# integration tests (and nothing else) failed. Exits 0 only when every failed test passed then.
#     scripts/test-retry.sh LOG STATUS     LOG: the run's output; STATUS: its exit status
set -euo pipefail
cd "$(dirname "$0")/.."
log="$1"
status="$2"
mapfile -t failures < <(python3 scripts/test-report.py failed "$log")
echo
echo "== test report"
if [[ ${#failures[@]} -eq 0 ]]; then
    echo "cargo test failed (exit $status) before any test did: see the output above"
    exit "$status"
fi
retry=1
[[ ${#failures[@]} -le 3 ]] || retry=0
for f in "${failures[@]}"; do
    [[ "${f%%$'\t'*}" == integration ]] || retry=0
done
final=0
for f in "${failures[@]}"; do
    binary="${f%%$'\t'*}"
    name="${f#*$'\t'}"
    if [[ $retry -eq 1 ]]; then
        again="target/test-retry-${name//[^A-Za-z0-9_]/_}.log"
        if cargo test --quiet --test integration -- --exact "$name" >"$again" 2>&1; then
            echo "FLAKY $name: failed, then passed run again alone. The first failure:"
            python3 scripts/test-report.py why "$log" "$name"
            continue
        fi
        echo "FAILED $name, and again run alone:"
        python3 scripts/test-report.py why "$again" "$name"
    else
        echo "FAILED $binary: $name"
        python3 scripts/test-report.py why "$log" "$name"
    fi
    final=1
done
[[ $retry -eq 1 ]] || echo "(${#failures[@]} failures, not all integration tests or more than three: none run again)"
exit $final
