#!/usr/bin/env python3
"""Folds `perf script` output (stdin) into one line per distinct stack, `root;...;leaf COUNT`,
written to the file named by the first argument (the input of a flame-graph renderer), and
prints two tables: the functions with the most samples of their own (self) and the project's
functions (`openphone_*`) by the samples they are on the stack of (inclusive). Used by
bench/profile.sh."""

import collections
import re
import sys

# `perf script` frame lines: "\t    55d0c2a1b2c3 symbol+0x1f (/path/to/object)".
FRAME = re.compile(r"^\s+[0-9a-f]+\s+(.+?)(?:\+0x[0-9a-f]+)?\s+\((.*)\)\s*$")
GENERIC = re.compile(r"<[^<>]*>")


def tidy(symbol: str) -> str:
    """Shortens a Rust symbol for a table: drops the hash suffix and generic arguments."""
    symbol = re.sub(r"::h[0-9a-f]{16}$", "", symbol)
    previous = None
    while previous != symbol:
        previous = symbol
        symbol = GENERIC.sub("<…>", symbol) if len(symbol) > 90 else symbol
    return symbol.replace(";", ":")


def stacks(lines):
    frames = []
    for line in lines:
        if not line.strip():
            if frames:
                yield list(reversed(frames))
            frames = []
            continue
        match = FRAME.match(line)
        if match:
            symbol = match.group(1)
            if symbol == "[unknown]":
                symbol = "[unknown " + match.group(2).rsplit("/", 1)[-1] + "]"
            frames.append(tidy(symbol))
    if frames:
        yield list(reversed(frames))


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: perf script | fold_stacks.py OUT.folded", file=sys.stderr)
        return 2
    folded = collections.Counter()
    own = collections.Counter()
    inclusive = collections.Counter()
    total = 0
    for stack in stacks(sys.stdin):
        total += 1
        folded[";".join(stack)] += 1
        own[stack[-1]] += 1
        for name in set(stack):
            if name.startswith("openphone_") or name.startswith("<openphone_"):
                inclusive[name] += 1
    if total == 0:
        print("no samples (is perf allowed to read this process? see perf.log)", file=sys.stderr)
        return 1
    with open(sys.argv[1], "w", encoding="utf-8") as out:
        for stack, count in folded.most_common():
            out.write(f"{stack} {count}\n")
    print(f"{total} samples\n")
    print("| self | function |\n|---:|---|")
    for name, count in own.most_common(20):
        print(f"| {100.0 * count / total:.1f} % | `{name}` |")
    print("\n| inclusive | project function |\n|---:|---|")
    for name, count in inclusive.most_common(20):
        print(f"| {100.0 * count / total:.1f} % | `{name}` |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
