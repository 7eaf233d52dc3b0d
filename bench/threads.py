#!/usr/bin/env python3
"""Per-thread CPU and context switches per call, from two snapshots of /proc/PID/task.

`bench/writes.sh` takes a snapshot before and after each path's calls:

    python3 bench/threads.py snap PID > before
    python3 bench/threads.py table before after CALLS NAME

A snapshot has one line per thread: its id, CPU ticks (user + system), voluntary and
involuntary context switches, and its name (`comm`: Linux keeps 15 bytes of it). The table
sums the threads of each name (the tokio workers share one), so a call's cost shows by who
pays it: the async workers, the store's writer, its syncer, its checkpointer.
"""

import os
import sys


def snap(pid):
    rows = []
    base = f"/proc/{pid}/task"
    for tid in sorted(os.listdir(base), key=int):
        try:
            with open(f"{base}/{tid}/stat") as f:
                stat = f.read()
            with open(f"{base}/{tid}/status") as f:
                status = f.read()
            with open(f"{base}/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue  # the thread ended meanwhile
        # The name in stat is in parentheses and may hold spaces: split after its last ')'.
        fields = stat[stat.rindex(")") + 2 :].split()
        ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
        switches = {}
        for line in status.splitlines():
            key, _, value = line.partition(":")
            if key in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
                switches[key] = int(value)
        rows.append(
            f"{tid} {ticks} {switches.get('voluntary_ctxt_switches', 0)} "
            f"{switches.get('nonvoluntary_ctxt_switches', 0)} {name}"
        )
    return rows


def load(path):
    threads = {}
    with open(path) as f:
        for line in f:
            tid, ticks, vol, invol, name = line.rstrip("\n").split(" ", 4)
            threads[tid] = (name, int(ticks), int(vol), int(invol))
    return threads


def table(before, after, calls, title, hz):
    sums = {}
    for tid, (name, ticks, vol, invol) in after.items():
        _, t0, v0, i0 = before.get(tid, (name, 0, 0, 0))
        row = sums.setdefault(name, [0, 0, 0, 0])
        row[0] += ticks - t0
        row[1] += vol - v0
        row[2] += invol - i0
        row[3] += 1
    lines = [
        f"| {title}: thread | threads | CPU µs per call | voluntary switches per call | involuntary per call |",
        "|---|---|---|---|---|",
    ]
    total = [0, 0, 0]
    for name, (ticks, vol, invol, count) in sorted(sums.items(), key=lambda kv: -kv[1][0]):
        if ticks == 0 and vol == 0 and invol == 0:
            continue
        total[0] += ticks
        total[1] += vol
        total[2] += invol
        lines.append(
            f"| {name} | {count} | {ticks * 1e6 / hz / calls:.1f} | {vol / calls:.2f} | {invol / calls:.2f} |"
        )
    lines.append(
        f"| all | | {total[0] * 1e6 / hz / calls:.1f} | {total[1] / calls:.2f} | {total[2] / calls:.2f} |"
    )
    return lines


def main(argv):
    if len(argv) == 3 and argv[1] == "snap":
        print("\n".join(snap(argv[2])))
        return 0
    if len(argv) == 6 and argv[1] == "table":
        calls = int(argv[4])
        if calls <= 0:
            print(f"threads.py: no calls answered for {argv[5]}", file=sys.stderr)
            return 1
        hz = os.sysconf("SC_CLK_TCK")
        print("\n".join(table(load(argv[2]), load(argv[3]), calls, argv[5], hz)))
        return 0
    print("usage: threads.py snap PID | threads.py table BEFORE AFTER CALLS NAME", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
