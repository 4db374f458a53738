#!/usr/bin/env bash
# Coverage-guided fuzzing of iapeer's readers of untrusted input (issue 12 item 5), on stable Rust
# with cargo-afl (AFL++). The targets and their invariants: tests/fuzz/src/lib.rs.
#
#   scripts/fuzz.sh [TARGET|all] [SECONDS]     (default: all 60)
#
# Installs what it needs into .cache/fuzz-tools (cargo-afl, and the AFL++ that cargo-afl builds),
# builds the targets with `cargo afl build --release` into target/fuzz, then runs each target
# alone for SECONDS of fuzzing (afl-fuzz -V, at nice 19; one instance at a time), starting from
# the seed corpus tests/fuzz/seeds/TARGET plus the regression inputs tests/fixtures/fuzz/TARGET.
# Findings go to target/fuzz/afl/TARGET/default/{crashes,hangs}.
#
# Prints one line per target from AFL++'s fuzzer_stats; exits 1 when any target found a crash or
# a hang (printing each input and how to reproduce it), 2 on a usage or setup error.
#
# Environment: FUZZ_NICE (default 19), FUZZ_TIMEOUT_MS (per-input hang limit, default 3000); AFL++'s
# own variables pass through, and so does cargo-afl's AFL_OPT_LEVEL (default 3; scripts/test.sh
# sets AFL_FAST_CAL and AFL_OPT_LEVEL=0 for its short runs, where the build is most of the time).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

TARGETS=(envelope control attach mcp screen files)
CARGO_AFL_VERSION=0.18.2

target=${1:-all}
seconds=${2:-60}
if [[ $target == -h || $target == --help ]]; then
    sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi
if [[ $target == all ]]; then
    run=("${TARGETS[@]}")
elif [[ " ${TARGETS[*]} " == *" $target "* ]]; then
    run=("$target")
else
    echo "fuzz.sh: unknown target '$target' — use one of: ${TARGETS[*]} all" >&2
    exit 2
fi
if ! [[ $seconds =~ ^[1-9][0-9]*$ ]]; then
    echo "fuzz.sh: SECONDS must be a whole number above 0, got '$seconds'" >&2
    exit 2
fi

tools=$repo/.cache/fuzz-tools
export PATH=$tools/bin:$PATH
# cargo-afl keeps the AFL++ it builds under $XDG_DATA_HOME/afl.rs.
export XDG_DATA_HOME=$tools/share
export CARGO_TARGET_DIR=$repo/target/fuzz
manifest=$repo/tests/fuzz/Cargo.toml
nice_level=${FUZZ_NICE:-19}

echo "== cargo-afl $CARGO_AFL_VERSION (cached in .cache/fuzz-tools)"
if ! cargo-afl afl --version 2>/dev/null | grep -q "$CARGO_AFL_VERSION"; then
    nice -n "$nice_level" cargo install --quiet --locked --root "$tools" cargo-afl --version "$CARGO_AFL_VERSION"
fi
# Installing cargo-afl also builds AFL++ under $XDG_DATA_HOME; this covers a cargo-afl that was
# already on PATH.
if ! compgen -G "$XDG_DATA_HOME/afl.rs/rustc-*/afl.rs-*/afl/bin/afl-fuzz" >/dev/null; then
    echo "== building AFL++ (once)"
    nice -n "$nice_level" cargo afl config --build
fi

echo "== cargo afl build --release (tests/fuzz)"
nice -n "$nice_level" cargo afl build --quiet --release --manifest-path "$manifest" --bins
bin_dir=$CARGO_TARGET_DIR/release

# afl-fuzz on a shared machine: no CPU pinning, no checks of the host's power or core settings
# (the crash still shows as a crash: the targets abort), plain-line output.
export AFL_NO_UI=1 AFL_NO_AFFINITY=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1
export AFL_QUIET=1

stat() { sed -n "s/^$1 *: *//p" "$2"; }

found=0
for t in "${run[@]}"; do
    out=$CARGO_TARGET_DIR/afl/$t
    rm -rf "$out"
    mkdir -p "$out/in" "$out/tmp"
    cp "$repo/tests/fuzz/seeds/$t"/* "$out/in/"
    if [[ -d $repo/tests/fixtures/fuzz/$t ]]; then
        cp "$repo/tests/fixtures/fuzz/$t"/* "$out/in/"
    fi
    dict=()
    [[ -f $repo/tests/fuzz/dict/$t.dict ]] && dict=(-x "$repo/tests/fuzz/dict/$t.dict")
    echo "== fuzzing $t for ${seconds}s"
    # TMPDIR: the scratch folders of the `files` target stay inside $out.
    TMPDIR=$out/tmp timeout --kill-after=30 $((seconds + 300)) \
        nice -n "$nice_level" cargo afl fuzz -V "$seconds" -t "${FUZZ_TIMEOUT_MS:-3000}" "${dict[@]}" \
        -i "$out/in" -o "$out" -- "$bin_dir/$t" >"$out/afl.log" 2>&1 || {
        echo "fuzz.sh: afl-fuzz stopped with an error on $t; its output ($out/afl.log):" >&2
        tail -20 "$out/afl.log" >&2
        exit 2
    }
    rm -rf "$out/tmp"
    stats=$out/default/fuzzer_stats
    crashes=$(stat saved_crashes "$stats")
    hangs=$(stat saved_hangs "$stats")
    printf '%-9s run_time=%ss execs=%s execs_per_sec=%s corpus=%s crashes=%s hangs=%s\n' "$t" \
        "$(stat run_time "$stats")" "$(stat execs_done "$stats")" "$(stat execs_per_sec "$stats")" \
        "$(stat corpus_count "$stats")" "$crashes" "$hangs"
    for kind in crashes hangs; do
        for f in "$out/default/$kind"/id:*; do
            [[ -e $f ]] || continue
            found=1
            echo "FOUND ($kind): $f"
            echo "  reproduce: $bin_dir/$t < '$f'"
            echo "  keep as a regression: cp '$f' tests/fixtures/fuzz/$t/<name>, then"
            echo "    cargo test --manifest-path tests/fuzz/Cargo.toml  (replays every seed and regression)"
        done
    done
done
exit "$found"
