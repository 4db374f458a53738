#!/usr/bin/env python3
"""Read a `cargo test` log and print a short report of its failing tests, for the end of
scripts/test.sh, where a CI log that is cut to its head and tail still shows why.

    test-report.py failed LOG           the failing tests, one `binary<TAB>name` per line
    test-report.py why LOG NAME         why NAME failed in LOG, in at most ~16 lines

`binary` is the test target's name as cargo prints it (`integration`, `iapeer`, …).
"""
import re
import sys

RUNNING = re.compile(r"^\s+Running (?:unittests )?\S+ \(\S*/deps/([A-Za-z0-9_]+?)-[0-9a-f]+\)")
FAILED = re.compile(r"^test (\S+) \.\.\. FAILED$")
WIDTH = 220


def failed(log):
    binary = "?"
    for line in log:
        m = RUNNING.match(line)
        if m:
            binary = m.group(1)
            continue
        m = FAILED.match(line)
        if m:
            print(f"{binary}\t{m.group(1)}")


def cut(line):
    line = line.rstrip()
    return line if len(line) <= WIDTH else line[:WIDTH] + " …"


def why(log, name):
    start = None
    for i, line in enumerate(log):
        if line.startswith(f"---- {name} stdout ----"):
            start = i + 1
    if start is None:
        print(f"  (no output block for {name})")
        return
    block = []
    for line in log[start:]:
        if line.startswith("---- ") or line.startswith("failures:"):
            break
        block.append(line)
    panic = [i for i, l in enumerate(block) if " panicked at " in l]
    if not panic:
        for line in block[-6:]:
            print("  " + cut(line))
        return
    i = panic[0]
    print("  " + cut(block[i]))
    # The message: its first lines, then the last lines of the delivery and lifecycle logs
    # when the message carries the test environment's diagnostics.
    message = block[i + 1:]
    for line in message[:3]:
        if line.startswith("--- "):
            break
        print("  " + cut(line))
    for section in ("--- delivery.log ---", "--- lifecycle.log ---"):
        if section not in message:
            continue
        j = message.index(section) + 1
        k = j
        while k < len(message) and not message[k].startswith("--- "):
            k += 1
        print("  " + section)
        for line in message[max(j, k - 4):k]:
            print("    " + cut(line))


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("failed", "why"):
        sys.exit(__doc__)
    with open(sys.argv[2], encoding="utf-8", errors="replace") as f:
        log = f.read().splitlines()
    if sys.argv[1] == "failed":
        failed(log)
    else:
        why(log, sys.argv[3])


if __name__ == "__main__":
    main()
