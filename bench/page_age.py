#!/usr/bin/env python3
"""What touching a page costs after it sat untouched for a while, on this machine.

The store's write-ahead log is a file whose pages the writer rewrites in a ring: how often a
given page comes round again is the ring's size over the rate of writes. On some machines a
page left alone for a fraction of a second is slow to touch again (a virtual machine's host
reclaiming or re-mapping guest memory it saw idle, proactive reclaim in the guest); this
measures it, so a run of the benchmarks can be read with it (docs/benchmarks.md, "Thirteenth
round").

Two probes, each printing microseconds per 4 KiB page:

- `memory`: a buffer of SIZE MiB is written page by page in one pass, then again after
  sleeping each of AGES seconds (every page then sat idle that long), then read after the
  longest sleep;
- `file`: a file of RING frames of 4,120 bytes (a WAL frame: a 24-byte header and a page) in
  DIR is written the way SQLite appends a commit — four frames, then `fdatasync` — round and
  round for CYCLES commits, after a first pass that fills it; printed per `pwrite`.

Usage: bench/page_age.py [memory|file|both] [--size MIB] [--ages S,S,...] [--ring FRAMES,...]
                         [--cycles N] [--dir DIR] [--json]
"""

import argparse
import json
import os
import sys
import tempfile
import time

PAGE = 4096
FRAME = 4120
FRAMES_PER_COMMIT = 4


def positive_floats(text):
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of seconds: {text!r}")
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"need seconds >= 0, comma-separated: {text!r}")
    return values


def positive_ints(text):
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of whole numbers: {text!r}")
    if not values or any(v < FRAMES_PER_COMMIT for v in values):
        raise argparse.ArgumentTypeError(
            f"need whole numbers >= {FRAMES_PER_COMMIT}, comma-separated: {text!r}"
        )
    return values


def parse(argv):
    parser = argparse.ArgumentParser(
        prog="bench/page_age.py",
        description="What touching a 4 KiB page costs after it sat idle (memory and a file ring).",
    )
    parser.add_argument("probe", nargs="?", default="both", choices=["memory", "file", "both"])
    parser.add_argument("--size", type=int, default=16, help="memory probe: MiB (default 16)")
    parser.add_argument(
        "--ages",
        type=positive_floats,
        default=[0.0, 0.01, 0.1, 0.5, 1.0],
        help="memory probe: idle seconds before each pass (default 0,0.01,0.1,0.5,1)",
    )
    parser.add_argument(
        "--ring",
        type=positive_ints,
        default=[16000, 1000],
        help="file probe: ring sizes in frames (default 16000,1000: the store's backstop, SQLite's mark)",
    )
    parser.add_argument("--cycles", type=int, default=6000, help="file probe: commits per ring")
    parser.add_argument("--dir", default=None, help="file probe: where the file goes")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    args = parser.parse_args(argv)
    if args.size < 1:
        parser.error("--size must be at least 1 MiB")
    if args.cycles < 1:
        parser.error("--cycles must be at least 1")
    return args


def memory_probe(size_mib, ages):
    pages = size_mib * 1024 * 1024 // PAGE
    buf = bytearray(os.urandom(pages * PAGE))
    view = memoryview(buf)
    sources = [os.urandom(PAGE) for _ in range(8)]

    def write_pass(turn):
        start = time.perf_counter()
        for i in range(pages):
            view[i * PAGE : (i + 1) * PAGE] = sources[(i + turn) % 8]
        return (time.perf_counter() - start) / pages * 1e6

    results = [{"idle_s": None, "write_us": round(write_pass(0), 3)}]
    for turn, age in enumerate(ages, start=1):
        time.sleep(age)
        results.append({"idle_s": age, "write_us": round(write_pass(turn), 3)})
    time.sleep(max(ages))
    start = time.perf_counter()
    checksum = 0
    for i in range(pages):
        checksum ^= view[i * PAGE]
    read_us = (time.perf_counter() - start) / pages * 1e6
    return {"mib": size_mib, "passes": results, "read_after_s": max(ages), "read_us": round(read_us, 3)}


def file_probe(ring, cycles, directory):
    frame = os.urandom(FRAME)
    with tempfile.TemporaryDirectory(dir=directory, prefix="page-age-") as tmp:
        path = os.path.join(tmp, "ring")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            for n in range(ring):
                os.pwrite(fd, frame, 32 + n * FRAME)
            os.fdatasync(fd)
            written = synced = 0.0
            at = 0
            for _ in range(cycles):
                for _ in range(FRAMES_PER_COMMIT):
                    start = time.perf_counter()
                    os.pwrite(fd, frame, 32 + at * FRAME)
                    written += time.perf_counter() - start
                    at = (at + 1) % ring
                start = time.perf_counter()
                os.fdatasync(fd)
                synced += time.perf_counter() - start
        finally:
            os.close(fd)
    frames = cycles * FRAMES_PER_COMMIT
    return {
        "ring_frames": ring,
        "commits": cycles,
        "pwrite_us": round(written / frames * 1e6, 2),
        "fdatasync_us": round(synced / cycles * 1e6, 1),
        "laps": round(frames / ring, 2),
    }


def main(argv):
    args = parse(argv)
    report = {}
    if args.probe in ("memory", "both"):
        report["memory"] = memory_probe(args.size, args.ages)
    if args.probe in ("file", "both"):
        report["file"] = [file_probe(r, args.cycles, args.dir) for r in args.ring]
    if args.json:
        print(json.dumps(report))
        return 0
    if "memory" in report:
        m = report["memory"]
        print(f"memory, {m['mib']} MiB, µs per 4 KiB page written:")
        for p in m["passes"]:
            label = "first touch" if p["idle_s"] is None else f"after {p['idle_s']} s idle"
            print(f"  {label:>20}: {p['write_us']}")
        print(f"  {'read after ' + str(m['read_after_s']) + ' s':>20}: {m['read_us']}")
    for f in report.get("file", []):
        print(
            f"file ring of {f['ring_frames']} frames, {f['commits']} commits of "
            f"{FRAMES_PER_COMMIT} frames ({f['laps']} laps): pwrite {f['pwrite_us']} µs, "
            f"fdatasync {f['fdatasync_us']} µs"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
