"""The table of bench/run.sh: every benchmark's figure, its reference, target, and the ceiling
measured in the same run with the daemon's share of it (docs/benchmarks.md).

Usage: python3 bench/table.py OUT_DIR IDLE_RSS_KIB DB_BEFORE DB_AFTER SECS WARMUP
Reads OUT_DIR/NAME.json (the `openphone bench … --json` reports and the fsync probes), prints
the Markdown table and what each ceiling allows, and writes OUT_DIR/ceilings.json.
Environment: BENCH_BINARY (named in the heading), BENCH_CONNECTIONS (8), BENCH_CONCURRENCY (64),
BENCH_IDLE (how the machine's idle CPUs wait, named in the heading when set: on a virtual machine
the reference servers' rates move with it more than the daemon's, docs/benchmarks.md).

Four kinds of ceiling:
- wire: a null server (bench/null-server) that answers the same requests with the daemon's
  captured answer and does nothing else, measured by the same client: what this machine's
  loopback, tokio and the protocol's framing allow.
- disk: with C callers each waiting for its answer and k durable commits on its path, no
  group commit can serve more than C / (k * commit time) calls/s. The commit time is the
  mean of the fsync probe (WAL-like commits on the data directory's disk), the lower of its
  two runs (idle; every core kept awake by threads waking every 20 us, as under load), so the
  bound is the most generous of the two.
- durable: the null server again, but answering a tool call only once a record of it is made
  durable by one group-commit thread: appended to a file and fsynced (`--durable-log`, with and
  without `--pipelined`), or inserted as a row into a SQLite database in WAL mode with
  synchronous = FULL (`--durable-sqlite`, the daemon's kind of store). The best of the runs
  counts (the most generous floor; the three are within the machine's noise of each other):
  what a server that keeps the promise of a private read (its record fsynced before its
  answer) and does nothing else reaches on this machine, measured rather than computed, so the
  hand-offs and the fsync's real cost under load are in it.
- client: the measuring client's own CPU per call (NAME.cpu.json, the `time` of the `openphone
  bench` process over the calls it issued), the lower of the daemon's and the null server's
  runs: with the client alone on every core, no server could be answered faster than
  cores / (client CPU per call).
"""

import json
import os
import sys

NAMES = ["ws-status-daemon", "ws-status-null", "ws-screen-daemon", "ws-screen-null",
         "mcp-2025-daemon", "mcp-2026-daemon", "mcp-2025-ts", "mcp-2025-ts-again",
         "mcp-2025-null", "mcp-2026-null",
         "ws-status-durable", "ws-status-durable-pipelined", "ws-status-store",
         "mcp-2025-durable", "mcp-2026-durable", "mcp-2025-store", "mcp-2026-store",
         "bridge-read", "bridge-mutation", "fsync", "fsync-awake"]


def load(out, name):
    try:
        with open(os.path.join(out, name + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def both_runs(first, again):
    """The TS SDK reference, measured twice (before the daemon's MCP rows and after the MCP
    ceilings): one report whose rate is the mean of the two, its p50 the mean and its p99 the
    worse, both rates kept (`runs`) for the table. A missing run leaves the other as it is."""
    if not first or not again:
        return first or again
    merged = dict(first)
    merged["calls_per_sec"] = (first["calls_per_sec"] + again["calls_per_sec"]) / 2
    merged["p50_ms"] = (first["p50_ms"] + again["p50_ms"]) / 2
    merged["p99_ms"] = max(first["p99_ms"], again["p99_ms"])
    errors = dict(first.get("errors") or {})
    for kind, n in (again.get("errors") or {}).items():
        errors[kind] = errors.get(kind, 0) + n
    merged["errors"] = errors
    merged["runs"] = [first["calls_per_sec"], again["calls_per_sec"]]
    return merged


def cpu_per_call(r, cpu, name):
    """(client µs, server µs) per call issued in run `name`, or Nones."""
    x, c = r.get(name), cpu.get(name)
    if not x or not c or not x.get("calls_issued"):
        return None, None
    n = x["calls_issued"]
    client = c["client_cpu_s"] * 1e6 / n if c.get("client_cpu_s") is not None else None
    server = c["server_cpu_s"] * 1e6 / n if c.get("server_cpu_s") is not None else None
    return client, server


def heading(secs, warmup):
    """The line above the table: what was run, on what."""
    line = (f"openphone benchmarks: {secs} s measured after {warmup} s of warm-up each, "
            f"{os.cpu_count()} cores, client and servers on one machine, "
            f"binary {os.environ.get('BENCH_BINARY', '?')}")
    idle = os.environ.get("BENCH_IDLE", "").strip()
    if idle:
        line += f", idle CPUs: {idle}"
    return line


def main(argv):
    out, idle_rss, db_before, db_after, secs, warmup = argv[1:7]
    connections = int(os.environ.get("BENCH_CONNECTIONS", "8"))
    concurrency = int(os.environ.get("BENCH_CONCURRENCY", "64"))
    r = {n: load(out, n) for n in NAMES}
    # The TS SDK server is CPU-bound and the noisiest reference: its two runs' mean counts.
    r["mcp-2025-ts"] = both_runs(r["mcp-2025-ts"], r["mcp-2025-ts-again"])
    cpu = {n: load(out, n + ".cpu") for n in NAMES}
    cores = os.cpu_count() or 1

    def fig(name):
        x = r[name]
        if x is None:
            return f"failed (see {name}.err)"
        errs = sum(x["errors"].values())
        text = f"{x['calls_per_sec']:,.0f} calls/s, p50 {x['p50_ms']:.2f} ms, p99 {x['p99_ms']:.2f} ms"
        if x.get("runs"):
            a, b = x["runs"]
            text = (f"{x['calls_per_sec']:,.0f} calls/s (the mean of two runs, {a:,.0f} and "
                    f"{b:,.0f}), p50 {x['p50_ms']:.2f} ms, p99 {x['p99_ms']:.2f} ms (the worse)")
        if errs:
            text += f", {errs} errors {x['errors']}"
        return text

    def rate(name):
        x = r[name]
        return x["calls_per_sec"] if x else None

    def ratio(a, b):
        ra, rb = rate(a), rate(b)
        if not ra or not rb:
            return None
        return ra / rb

    def verdict(ok):
        return "—" if ok is None else ("met" if ok else "NOT met")

    def p99(name):
        return r[name]["p99_ms"] if r[name] else None

    # The disk: the commit time of the fsync probe (the lower mean of its two runs).
    probes = [(n, r[n]) for n in ["fsync", "fsync-awake"] if r[n] and r[n].get("commits")]
    commit = min(probes, key=lambda p: p[1]["mean_ms"]) if probes else None
    commit_ms = commit[1]["mean_ms"] if commit else None

    def disk(callers, waits):
        """The disk bound in calls/s and its formula, or (None, text)."""
        if not commit_ms:
            return None, "disk: fsync probe failed (see fsync.err)"
        bound = callers / (waits * commit_ms / 1000.0)
        k = "" if waits == 1 else f"{waits} × "
        return bound, f"disk: {callers} ÷ ({k}{commit_ms:.2f} ms mean fsync) = {bound:,.0f}/s"

    def wire(name, label, over=None):
        """The wire ceiling: the null server's rate (and its ratio to run `over`)."""
        s = rate(name)
        if s is None:
            return None, f"wire: {label} failed (see {name}.err)"
        q = ratio(name, over) if over else None
        times = f" = {q:.2f}× TS" if q else ""
        return s, f"wire: {label} {s:,.0f}/s{times}"

    def durable(names, label, over=None):
        """The durable ceiling: the best of the durable null server's runs `names`."""
        got = [(rate(n), n) for n in names if rate(n)]
        if not got:
            errs = ", ".join(n + ".err" for n in names)
            return None, f"durable: {label} failed (see {errs})"
        s, best = max(got)
        q = ratio(best, over) if over else None
        times = f" = {q:.2f}× TS" if q else ""
        return s, f"durable: {label} {s:,.0f}/s{times}"

    def client(*names):
        """The client ceiling: cores over the lowest client CPU per call of `names`."""
        per = [c for c in (cpu_per_call(r, cpu, n)[0] for n in names) if c]
        if not per:
            return None, "client: CPU not measured"
        us = min(per)
        bound = cores * 1e6 / us
        return bound, f"client: {cores} cores ÷ {us:,.0f} µs = {bound:,.0f}/s"

    ceilings = {}

    def ceiling(row, own, parts):
        """The ceiling cell and the % cell: every ceiling named, the share of the lowest."""
        known = [(v, t) for v, t in parts if v]
        cell = "; ".join(t for _, t in parts) if parts else "—"
        s = rate(own) if own else None
        if not known or s is None:
            ceilings[row] = {"ceilings": [t for _, t in parts], "binding": None, "share": None}
            return cell, "—"
        low, text = min(known, key=lambda p: p[0])
        share = s / low
        ceilings[row] = {"calls_per_sec": s, "ceilings": [t for _, t in parts],
                         "binding": text, "binding_calls_per_sec": low, "share": share}
        kind = text.split(":")[0]
        return cell, f"{share:.0%} of {kind}"

    rows = []
    q = ratio("ws-status-daemon", "ws-status-null")
    ok = None if q is None else (q >= 0.25 and p99("ws-status-daemon") <= 2.0)
    cell, share = ceiling("ws-status", "ws-status-daemon",
                          [wire("ws-status-null", "null server"), disk(connections, 1),
                           durable(["ws-status-durable", "ws-status-durable-pipelined",
                                    "ws-status-store"],
                                   "null server + a fsynced record per call"),
                           client("ws-status-daemon", "ws-status-null")])
    rows.append(("WS tools.invoke device.status", fig("ws-status-daemon"),
                 "null server: " + fig("ws-status-null"),
                 "—" if q is None else f"{q:.1%} of null", "≥ 25 % of null, p99 ≤ 2 ms",
                 verdict(ok), cell, share))
    s = rate("ws-screen-daemon")
    q = ratio("ws-screen-daemon", "ws-screen-null")
    cell, share = ceiling("ws-screen", "ws-screen-daemon",
                          [wire("ws-screen-null", "null server (screen.get)"),
                           client("ws-screen-daemon", "ws-screen-null")])
    rows.append(("WS tools.invoke screen.get", fig("ws-screen-daemon"),
                 "null server answering screen.get: " + fig("ws-screen-null"),
                 "—" if q is None else f"{q:.1%} of null", "≥ 10,000 calls/s",
                 verdict(None if s is None else s >= 10000), cell, share))
    for era, label in [("2025", "2025-11-25"), ("2026", "2026-07-28")]:
        name = f"mcp-{era}-daemon"
        q = ratio(name, "mcp-2025-ts")
        ok = None if q is None else (q >= 3.0 and p99(name) <= 5.0)
        ref = "TS SDK 2025-11-25: " + fig("mcp-2025-ts") if era == "2025" else \
              "TS SDK 2025-11-25 (the SDK has no 2026-07-28 era)"
        cell, share = ceiling(f"mcp-{era}", name,
                              [wire(f"mcp-{era}-null", f"null MCP {label}", "mcp-2025-ts"),
                               disk(connections, 1),
                               durable([f"mcp-{era}-durable", f"mcp-{era}-store"],
                                       "null MCP + a fsynced record per call", "mcp-2025-ts"),
                               client(name, f"mcp-{era}-null")])
        rows.append((f"MCP tools/call {label}", fig(name), ref,
                     "—" if q is None else f"{q:.2f}× TS", "≥ 3× TS, p99 ≤ 5 ms", verdict(ok),
                     cell, share))
    for name, label, target, waits in [
            ("bridge-read", "bridge reads (device.status)", 30000, 1),
            ("bridge-mutation", "bridge mutations (clipboard.set)", 5000, 2)]:
        s = rate(name)
        cell, share = ceiling(name, name, [disk(concurrency, waits)])
        rows.append((label, fig(name), "—", "—", f"≥ {target:,} calls/s",
                     verdict(None if s is None else s >= target), cell, share))

    served = sum(r[n]["calls_issued"] for n in ["ws-status-daemon", "ws-screen-daemon",
                                                 "mcp-2025-daemon", "mcp-2026-daemon"] if r[n])
    try:
        grown = int(db_after) - int(db_before)
        per_call = grown / served if served else None
    except ValueError:
        per_call = None
    rows.append(("storage per endpoint call (mixed reads)",
                 "—" if per_call is None else f"{per_call:,.0f} bytes ({served:,} calls)", "—",
                 "—", "≤ 300 bytes per keyless read",
                 verdict(None if per_call is None else per_call <= 300), "—", "—"))
    try:
        rss = int(idle_rss)
        rows.append(("daemon idle RSS", f"{rss / 1024:.1f} MB", "—", "—", "≤ 15 MB",
                     verdict(rss / 1024 <= 15), "—", "—"))
    except ValueError:
        pass

    print()
    print(heading(secs, warmup))
    print()
    print("| path | openphone | reference (same run) | ratio | target | | ceiling (same run) | % of ceiling |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")

    # What the ceilings allow: can each target be met on this machine?
    print()
    print("Ceilings (same run):")
    for name, label in [("fsync", "idle"), ("fsync-awake", "cores kept awake")]:
        x = r[name]
        if x and x.get("commits"):
            print(f"- fsync probe ({label}): {x['commits_per_sec']:,.0f} commits/s, "
                  f"p50 {x['p50_ms']:.2f} ms, p99 {x['p99_ms']:.2f} ms, mean {x['mean_ms']:.2f} ms "
                  f"({x['frames_per_commit']} WAL frames + fsync per commit)")
        else:
            print(f"- fsync probe ({label}): failed (see {name}.err)")
    print("- CPU per call issued (µs, client / server; server = the process named by --pid):")
    for name in NAMES:
        c, sv = cpu_per_call(r, cpu, name)
        if c is None and sv is None:
            continue
        sv_text = "—" if sv is None else f"{sv:,.0f}"
        print(f"  - {name}: {'—' if c is None else f'{c:,.0f}'} / {sv_text}")
    reach = {}

    def can(key, text, most, target):
        if most is None:
            print(f"- {text}: unknown (a reference failed)")
            return
        ok = most >= target
        reach[key] = {"most": most, "target": target, "reachable": ok}
        print(f"- {text}: {'reachable' if ok else 'NOT reachable on this machine'}")

    null_ws = rate("ws-status-null")
    disk_ws, _ = disk(connections, 1)
    client_ws, _ = client("ws-status-daemon", "ws-status-null")
    floor_ws, _ = durable(["ws-status-durable", "ws-status-durable-pipelined"], "")
    store_ws, _ = durable(["ws-status-store"], "")
    best_ws = max((v for v in [floor_ws, store_ws] if v), default=None)
    if null_ws and disk_ws:
        most = min(v for v in [null_ws, disk_ws, client_ws, best_ws] if v) / null_ws
        fl = f", a server that only fsyncs a record per call {floor_ws / null_ws:.1%}" \
            if floor_ws else ""
        st = f", one that only commits a SQLite row per call {store_ws / null_ws:.1%}" \
            if store_ws else ""
        can("ws-status", f"WS device.status ≥ 25 % of null: the most is min(null, disk, durable, "
            f"client) = {most:.1%} of null{fl}{st}", most, 0.25)
    else:
        can("ws-status", "WS device.status ≥ 25 % of null", None, 0.25)
    s = rate("ws-screen-null")
    cb, ct = client("ws-screen-daemon", "ws-screen-null")
    most = min(v for v in [s, cb] if v) if (s or cb) else None
    can("ws-screen", "WS screen.get ≥ 10,000/s: the null server answering screen.get does "
        + (f"{s:,.0f}/s" if s else "?") + f"; {ct}", most, 10000)
    ts = rate("mcp-2025-ts")
    for era, label in [("2025", "2025-11-25"), ("2026", "2026-07-28")]:
        n = rate(f"mcp-{era}-null")
        cb, _ = client(f"mcp-{era}-daemon", f"mcp-{era}-null")
        fm, _ = durable([f"mcp-{era}-durable"], "")
        sm, _ = durable([f"mcp-{era}-store"], "")
        if n and ts and disk_ws:
            best = max((v for v in [fm, sm] if v), default=None)
            most = min(v for v in [n, disk_ws, cb, best] if v) / ts
            cl = f", the client {cb / ts:.2f}×" if cb else ""
            fl = f", a server that only fsyncs a record per call {fm / ts:.2f}×" if fm else ""
            fl += f", one that only commits a SQLite row per call {sm / ts:.2f}×" if sm else ""
            can(f"mcp-{era}", f"MCP {label} ≥ 3× TS: the null MCP server does {n / ts:.2f}× TS, "
                f"the disk allows {disk_ws / ts:.2f}×{fl}{cl}; the most is {most:.2f}×",
                most, 3.0)
        else:
            can(f"mcp-{era}", f"MCP {label} ≥ 3× TS", None, 3.0)
    for name, label, target, waits in [("bridge-read", "bridge reads ≥ 30,000/s", 30000, 1),
                                       ("bridge-mutation", "bridge mutations ≥ 5,000/s", 5000, 2)]:
        b, text = disk(concurrency, waits)
        can(name, f"{label}: {text}", b, target)

    with open(os.path.join(out, "ceilings.json"), "w") as f:
        json.dump({"commit_ms": commit_ms, "commit_probe": commit[0] if commit else None,
                   "connections": connections, "concurrency": concurrency,
                   "rows": ceilings, "targets": reach,
                   "cpu_us_per_call": {n: dict(zip(["client", "server"], cpu_per_call(r, cpu, n)))
                                       for n in NAMES if cpu.get(n)}}, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv)
