"""Tests of bench/threads.py: snapshots of /proc/PID/task and the per-thread table.

Run: python3 -m unittest discover -s bench -p 'test_threads.py'
"""

import os
import tempfile
import threading
import unittest

import threads


def write(lines):
    f = tempfile.NamedTemporaryFile("w", delete=False, suffix=".snap")
    f.write("\n".join(lines) + "\n")
    f.close()
    return f.name


class Table(unittest.TestCase):
    def test_threads_of_one_name_are_summed_and_divided_by_the_calls(self):
        before = write(["1 100 10 1 tokio-rt-worker", "2 50 5 0 tokio-rt-worker",
                        "3 20 2 0 op-store-writer"])
        after = write(["1 200 30 3 tokio-rt-worker", "2 150 25 1 tokio-rt-worker",
                       "3 120 42 0 op-store-writer"])
        try:
            rows = threads.table(threads.load(before), threads.load(after), 1000, "mcp", 100)
        finally:
            os.unlink(before)
            os.unlink(after)
        # 200 ticks of 10 ms over 1000 calls: 2,000 µs per call; 40 voluntary switches: 0.04.
        self.assertIn("| tokio-rt-worker | 2 | 2000.0 | 0.04 | 0.00 |", rows)
        self.assertIn("| op-store-writer | 1 | 1000.0 | 0.04 | 0.00 |", rows)
        self.assertEqual(rows[-1], "| all | | 3000.0 | 0.08 | 0.00 |")
        # The costlier thread comes first.
        self.assertLess(rows.index("| tokio-rt-worker | 2 | 2000.0 | 0.04 | 0.00 |"),
                        rows.index("| op-store-writer | 1 | 1000.0 | 0.04 | 0.00 |"))

    def test_a_thread_started_meanwhile_counts_from_zero_and_an_idle_one_is_left_out(self):
        before = write(["1 10 1 0 idle-one"])
        after = write(["1 10 1 0 idle-one", "9 5 3 1 op-store-syncer"])
        try:
            rows = threads.table(threads.load(before), threads.load(after), 10, "ws", 100)
        finally:
            os.unlink(before)
            os.unlink(after)
        self.assertIn("| op-store-syncer | 1 | 5000.0 | 0.30 | 0.10 |", rows)
        self.assertFalse(any("idle-one" in row for row in rows))

    def test_a_name_with_spaces_survives_the_round_trip(self):
        before = write(["4 0 0 0 a name with spaces"])
        after = write(["4 100 1 0 a name with spaces"])
        try:
            rows = threads.table(threads.load(before), threads.load(after), 1, "x", 100)
        finally:
            os.unlink(before)
            os.unlink(after)
        self.assertIn("| a name with spaces | 1 | 1000000.0 | 1.00 | 0.00 |", rows)


@unittest.skipUnless(os.path.isdir("/proc/self/task"), "needs Linux's /proc")
class Snapshot(unittest.TestCase):
    def test_a_snapshot_has_every_thread_of_the_process_with_its_name(self):
        stop = threading.Event()
        worker = threading.Thread(target=stop.wait)
        worker.start()
        try:
            rows = threads.snap(os.getpid())
        finally:
            stop.set()
            worker.join()
        by_tid = {row.split(" ", 4)[0]: row for row in rows}
        for tid in (threading.get_native_id(), worker.native_id):
            self.assertIn(str(tid), by_tid)
            with open(f"/proc/self/task/{tid}/comm") as f:
                self.assertTrue(by_tid[str(tid)].endswith(" " + f.read().strip()))
        for row in rows:
            tid, ticks, vol, invol, _ = row.split(" ", 4)
            self.assertTrue(tid.isdigit() and ticks.isdigit() and vol.isdigit() and invol.isdigit())

if __name__ == "__main__":
    unittest.main()
