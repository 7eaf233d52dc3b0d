"""Tests of bench/threads.py: snapshots of /proc/PID/task and the per-thread table.

Run: python3 -m unittest discover -s bench -p 'test_threads.py'
"""

import os
import tempfile
import threading
import unittest

import threads


def table(before_lines, after_lines, calls, title, hz=100):
    """The table of two snapshots given as lines, read back from files as the script does."""
    paths = []
    try:
        for lines in (before_lines, after_lines):
            with tempfile.NamedTemporaryFile("w", delete=False, suffix=".snap") as f:
                f.write("\n".join(lines) + "\n")
            paths.append(f.name)
        return threads.table(threads.load(paths[0]), threads.load(paths[1]), calls, title, hz)
    finally:
        for path in paths:
            os.unlink(path)


class Table(unittest.TestCase):
    def test_threads_of_one_name_are_summed_and_divided_by_the_calls(self):
        rows = table(["1 100 10 1 tokio-rt-worker", "2 50 5 0 tokio-rt-worker",
                      "3 20 2 0 op-store-writer"],
                     ["1 200 30 3 tokio-rt-worker", "2 150 25 1 tokio-rt-worker",
                      "3 120 42 0 op-store-writer"], 1000, "mcp")
        # 200 ticks of 10 ms over 1000 calls: 2,000 µs per call; 40 voluntary switches: 0.04.
        self.assertIn("| tokio-rt-worker | 2 | 2000.0 | 0.04 | 0.00 |", rows)
        self.assertIn("| op-store-writer | 1 | 1000.0 | 0.04 | 0.00 |", rows)
        self.assertEqual(rows[-1], "| all | | 3000.0 | 0.08 | 0.00 |")
        # The costlier thread comes first.
        self.assertLess(rows.index("| tokio-rt-worker | 2 | 2000.0 | 0.04 | 0.00 |"),
                        rows.index("| op-store-writer | 1 | 1000.0 | 0.04 | 0.00 |"))

    def test_a_thread_started_meanwhile_counts_from_zero_and_an_idle_one_is_left_out(self):
        rows = table(["1 10 1 0 idle-one"], ["1 10 1 0 idle-one", "9 5 3 1 op-store-syncer"],
                     10, "ws")
        self.assertIn("| op-store-syncer | 1 | 5000.0 | 0.30 | 0.10 |", rows)
        self.assertFalse(any("idle-one" in row for row in rows))

    def test_a_name_with_spaces_survives_the_round_trip(self):
        rows = table(["4 0 0 0 a name with spaces"], ["4 100 1 0 a name with spaces"], 1, "x")
        self.assertIn("| a name with spaces | 1 | 1000000.0 | 1.00 | 0.00 |", rows)


@unittest.skipUnless(os.path.isdir("/proc/self/task"), "needs Linux's /proc")
class Snapshot(unittest.TestCase):
    def test_a_snapshot_has_every_thread_of_the_process_with_its_name(self):
        stop = threading.Event()
        worker = threading.Thread(target=stop.wait)
        worker.start()
        try:
            rows = threads.snap(os.getpid())
            tids = (threading.get_native_id(), worker.native_id)
            names = {}
            for tid in tids:  # read while the worker still runs
                with open(f"/proc/self/task/{tid}/comm") as f:
                    names[str(tid)] = f.read().strip()
        finally:
            stop.set()
            worker.join()
        by_tid = {row.split(" ", 4)[0]: row for row in rows}
        for tid, name in names.items():
            self.assertIn(tid, by_tid)
            self.assertTrue(by_tid[tid].endswith(" " + name))
        for row in rows:
            tid, ticks, vol, invol, _ = row.split(" ", 4)
            self.assertTrue(tid.isdigit() and ticks.isdigit() and vol.isdigit() and invol.isdigit())

if __name__ == "__main__":
    unittest.main()
