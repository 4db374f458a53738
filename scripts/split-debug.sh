#!/usr/bin/env bash
# Move a Linux binary's debug info into a file beside it (README "Release binary"; the second
# step of scripts/release.sh): <binary> keeps its code and names <folder>/iapeer-<id>.debug in
# its .gnu_debuglink section, which a panic's backtrace reads (Rust's std follows the link to a
# file beside the binary) for function names, file and line. The symbol table goes into the
# debug file too (1 MB: it kept the binary over 10 MB), so without the file a backtrace gives
# addresses only.
#
# <id> is the first 16 hex digits of the unsplit binary's SHA-256, so every build names its own
# file and an older binary (iapeer.prev) never reads a newer build's lines (std does not check
# the link's CRC). Other iapeer-*.debug files in the folder (older builds') are removed. A
# binary split already is left as it is. Prints the debug file's path. Needs binutils
# (objcopy, readelf), which a C linker for cargo comes with.
#
#   scripts/split-debug.sh target/release/iapeer
set -euo pipefail

bin="${1:?usage: scripts/split-debug.sh <binary>}"
dir="$(dirname "$bin")"
for tool in objcopy readelf sha256sum; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "split-debug.sh: $tool is missing; install binutils (Debian/Ubuntu: sudo apt install binutils) and run again" >&2
        exit 1
    }
done

if readelf -S "$bin" | grep -q ' \.debug_line '; then
    id="$(sha256sum "$bin" | cut -c1-16)"
    debug="$dir/iapeer-$id.debug"
    objcopy --only-keep-debug "$bin" "$debug"
    chmod 644 "$debug"
    # --add-gnu-debuglink records the file's name (not its folder) and its CRC; a binary that
    # names a debug file already (a distribution's build) has that name replaced.
    objcopy --strip-all --remove-section=.gnu_debuglink --add-gnu-debuglink="$debug" \
        "$bin" "$bin.split-$$"
    mv -f "$bin.split-$$" "$bin"
fi
name="$(readelf -p .gnu_debuglink "$bin" 2>/dev/null | sed -n 's/^ *\[ *0\] *//p' || true)"
if [[ -z "$name" || ! -f "$dir/$name" ]]; then
    echo "split-debug.sh: $bin has neither debug info nor its debug file beside it; build it again" >&2
    exit 1
fi
for f in "$dir"/iapeer-*.debug; do
    [[ "$(basename "$f")" == "$name" ]] || rm -f "$f"
done
echo "$dir/$name"
