#!/usr/bin/env bash
# The whole test suite (the README's test command; .ci/run calls exactly this):
# format check, clippy with warnings as errors, unit and integration tests — including the
# official MCP Python SDK as a real client and the demo — and a short coverage-guided run of
# every fuzz target (scripts/fuzz.sh). Installs what it needs itself.
set -euo pipefail
cd "$(dirname "$0")/.."

# What of the environment can change how an agent CLI draws its screen (stop 16 failed on
# NO_COLOR=1 or CI=true, set by CI runners): names and values, so a failure elsewhere can be matched.
echo "== environment that reaches the agents' terminals"
env | grep -E '^(TERM|COLORTERM|NO_COLOR|FORCE_COLOR|CLICOLOR|CLICOLOR_FORCE|CI|CONTINUOUS_INTEGRATION|LANG|LC_[A-Z]+|TZ|COLUMNS|LINES)=' | sort || true
echo "nproc=$(nproc) user=$(id -un)"

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy"
cargo clippy --all-targets --quiet -- -D warnings

echo "== cargo doc (our crate only; a broken or private link is an error) and the doc tests"
# `cargo test --all-targets` below leaves doc tests out, so they run here.
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet
cargo test --doc --quiet

echo "== a build without the test hooks (as a release build) ignores IAPEER_TEST_HOOK"
# The hooks are compiled in with debug assertions or the test-hooks feature; turning debug
# assertions off for our crate alone stands for a release build without rebuilding the
# dependencies (daemon::test_hooks::tests::a_build_without_the_hooks_ignores_the_variable).
cargo test --lib --quiet --config 'profile.dev.package.iapeer.debug-assertions=false' test_hooks::

echo "== python venv with the official MCP SDK (cached in .cache/venv)"
scripts/setup-python.sh
export IAPEER_TEST_PYTHON="$PWD/.cache/venv/bin/python"

echo "== the real agent CLIs from npm (cached in .cache/agents)"
scripts/setup-agents.sh
export IAPEER_TEST_CLAUDE_BIN="$PWD/.cache/agents/node_modules/.bin/claude"
export IAPEER_TEST_CODEX_BIN="$PWD/.cache/agents/node_modules/.bin/codex"
export IAPEER_TEST_BUN="$PWD/.cache/agents/node_modules/.bin/bun"
export IAPEER_TEST_GEMINI_BIN="$PWD/.cache/agents/node_modules/.bin/gemini"
export IAPEER_TEST_OPENCODE_BIN="$PWD/.cache/agents/node_modules/.bin/opencode"

echo "== man (man-db), zsh and fish, for the tests that \`man iapeer\` and each shell's completion work;"
echo "   chromium and chromium-driver, for the browser test of the operator's page (tests/ui.rs);"
echo "   curl, the other local user's client in tests/access.rs;"
echo "   redis-server, the real engine of the federation tests (tests/federation.rs), and openssl,"
echo "   whose CLI makes their TLS certificates (tests/common/tls.rs)"
missing=()
command -v redis-server >/dev/null 2>&1 || [[ -x /usr/bin/redis-server ]] || missing+=(redis-server)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v man >/dev/null 2>&1 || missing+=(man-db)
command -v zsh >/dev/null 2>&1 || missing+=(zsh)
command -v fish >/dev/null 2>&1 || missing+=(fish)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
if [[ ${#missing[@]} -gt 0 ]]; then
    if command -v apt-get >/dev/null 2>&1; then
        sudo_if_needed=""
        [[ "$(id -u)" -eq 0 ]] || sudo_if_needed="sudo"
        $sudo_if_needed apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo_if_needed apt-get install -y -qq --no-install-recommends "${missing[@]}"
    else
        echo "test.sh: ${missing[*]} missing and there is no apt-get here; install them by hand" >&2
        exit 1
    fi
fi

echo "== the fuzz package (tests/fuzz): fmt, clippy, seeds and regressions replayed"
# Same target folder as the main crate (the two lockfiles pin the same versions), so this reuses
# its compiled dependencies instead of building them again.
fuzz_manifest=tests/fuzz/Cargo.toml
cargo fmt --manifest-path "$fuzz_manifest" -- --check
CARGO_TARGET_DIR="$PWD/target" cargo clippy --manifest-path "$fuzz_manifest" --all-targets --quiet -- -D warnings
CARGO_TARGET_DIR="$PWD/target" cargo test --manifest-path "$fuzz_manifest" --lib --quiet

echo "== a short coverage-guided run of every fuzz target (AFL++; ${IAPEER_FUZZ_SECONDS:=5}s each)"
# Built without optimisation (cargo-afl's AFL_OPT_LEVEL): 1½ minutes instead of 6 on 2 cores,
# for the same instrumentation and invariants; a long run (scripts/fuzz.sh alone) keeps -O3.
AFL_FAST_CAL=1 AFL_OPT_LEVEL=0 scripts/fuzz.sh all "$IAPEER_FUZZ_SECONDS"

echo "== cargo test"
# Every target runs (--no-fail-fast), its output kept in target/test-output.log. The integration
# tests drive real agent CLIs and real daemons on a 2-core machine beside each other, and one
# can miss a timing there: when at most three integration tests fail, each is run once more,
# alone, and reported as flaky if it passes then; a test that fails twice fails the run. Every
# failure is summed up at the end (why, and the last delivery and lifecycle lines), where a
# log cut to its head and tail still shows it.
log=target/test-output.log
mkdir -p target
set +e
cargo test --all-targets --no-fail-fast 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
[[ $status -eq 0 ]] && exit 0
exec scripts/test-retry.sh "$log" "$status"
