"""Allocations per call, by where they are made, read off a callgrind file.

`bench/allocs.sh` runs the daemon under callgrind with `--separate-callers<N>` on Rust's
allocation entry points, so every call of `__rust_alloc` (and `__rust_realloc`) is counted
under the chain of its N callers: `__rustc::__rust_alloc'caller'caller's caller'…`. This
script sums those calls, attributes each chain to its nearest project frames (the first
`openphone` functions above the allocation; the nearest frames of any crate when none is),
and prints the total per call and the chains that allocate most.

Usage: python3 bench/alloc_chains.py CALLGRIND_FILE CALLS [TOP]
"""

import collections
import re
import sys

# The allocation entry points counted (an allocation's realloc counts as one more).
ENTRY_POINTS = ("__rust_alloc'", "__rust_realloc'")
# Frames that say nothing of who allocates (the allocation machinery itself).
PLUMBING = ("alloc::", "core::", "<alloc::", "<core::")


def counts(lines):
    """Calls into each separated allocation chain: {chain name: calls}.

    Callgrind names a function once (`cfn=(id) name`) and by its id alone afterwards
    (`cfn=(id)`); each `calls=N …` line that follows a `cfn=` counts N calls into it.
    """
    names = {}
    calls = collections.Counter()
    callee = None
    for line in lines:
        if line.startswith(("fn=", "cfn=")):
            m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line.rstrip("\n"))
            if m is None:
                continue
            if m.group(2):
                names[m.group(1)] = m.group(2)
            if line.startswith("cfn="):
                callee = names.get(m.group(1))
            continue
        if line.startswith("calls=") and callee and callee.startswith(_prefixed(ENTRY_POINTS), 0):
            calls[callee] += int(line.split()[0][len("calls="):])
    return calls


def _prefixed(entry_points):
    """The chain names start with the entry point's full name, e.g. `__rustc::__rust_alloc'`."""
    return tuple(p for e in entry_points for p in (e, "__rustc::" + e))


def where(chain, depth=3):
    """Who made the allocations of `chain`: its first `depth` project frames above the
    allocation, joined with ` < `; the first frames that are not allocation plumbing when no
    project frame is in the chain."""
    frames = chain.split("'")[1:]
    own = [f for f in frames if "openphone" in f]
    if own:
        return " < ".join(own[:depth])
    useful = [f for f in frames if not f.startswith(PLUMBING)] or frames
    return " < ".join(useful[:depth])


def report(calls_by_chain, calls, top=25):
    """Lines: the allocations per call in all, then the `top` places that make most."""
    by_place = collections.Counter()
    for chain, n in calls_by_chain.items():
        by_place[where(chain)] += n
    total = sum(calls_by_chain.values())
    lines = [f"allocations per call: {total / calls:.1f} ({total} over {calls} calls)", "",
             "| per call | where (nearest project frames, innermost first) |", "|---:|---|"]
    for place, n in by_place.most_common(top):
        lines.append(f"| {n / calls:.2f} | `{place}` |")
    return lines


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    try:
        calls = int(argv[2])
    except ValueError:
        print(f"CALLS must be a whole number, not {argv[2]!r}", file=sys.stderr)
        return 2
    if calls <= 0:
        print("CALLS must be positive", file=sys.stderr)
        return 2
    top = int(argv[3]) if len(argv) > 3 else 25
    with open(argv[1], errors="replace") as f:
        found = counts(f)
    if not found:
        print(f"{argv[1]}: no separated allocation chains (was callgrind run with "
              "--separate-callers on __rust_alloc?)", file=sys.stderr)
        return 1
    print("\n".join(report(found, calls, top)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
