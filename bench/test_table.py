"""Tests of bench/table.py: the ceilings and shares it computes from a run's reports.

Run: python3 -m unittest discover -s bench -p 'test_table.py'
"""

import contextlib
import io
import json
import os
import tempfile
import unittest

import table


def report(calls_per_sec, issued, p99=1.0):
    return {"calls_per_sec": calls_per_sec, "calls_issued": issued, "p50_ms": 0.5,
            "p99_ms": p99, "errors": {}}


def probe(mean_ms, p50_ms=0.2):
    return {"commits": 100, "commits_per_sec": 1000 / mean_ms, "p50_ms": p50_ms,
            "p99_ms": 8.0, "mean_ms": mean_ms, "frames_per_commit": 3}


class TableTest(unittest.TestCase):
    def run_table(self, files):
        with tempfile.TemporaryDirectory() as out:
            for name, body in files.items():
                with open(os.path.join(out, name + ".json"), "w") as f:
                    json.dump(body, f)
            env = {"BENCH_CONNECTIONS": "8", "BENCH_CONCURRENCY": "64"}
            old = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            text = io.StringIO()
            try:
                with contextlib.redirect_stdout(text):
                    table.main(["table.py", out, "20480", "1000", "2000", "3", "2"])
            finally:
                for k, v in old.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            with open(os.path.join(out, "ceilings.json")) as f:
                return text.getvalue(), json.load(f)

    def test_the_lowest_ceiling_binds_and_the_share_is_of_it(self):
        cores = os.cpu_count() or 1
        text, ceilings = self.run_table({
            "ws-status-daemon": report(4000, 20000),
            "ws-status-null": report(40000, 200000),
            # 8 callers, 1 durable commit, 2 ms mean: 4,000/s, below the null server.
            "fsync": probe(4.0),
            "fsync-awake": probe(2.0),
            "ws-status-daemon.cpu": {"client_cpu_s": 1.0, "server_cpu_s": 3.0},
            "ws-status-null.cpu": {"client_cpu_s": 2.0, "server_cpu_s": 0.4},
        })
        row = ceilings["rows"]["ws-status"]
        self.assertAlmostEqual(row["binding_calls_per_sec"], 4000)
        self.assertTrue(row["binding"].startswith("disk: 8 ÷ (2.00 ms"), row["binding"])
        self.assertAlmostEqual(row["share"], 1.0)
        self.assertEqual(ceilings["commit_probe"], "fsync-awake")
        # The lower client CPU per call of its two runs: 2 s / 200,000 calls = 10 µs.
        self.assertIn(f"client: {cores} cores ÷ 10 µs", " ".join(row["ceilings"]))
        self.assertIn("| 100% of disk |", text)
        # 4,000 / 40,000 = 10 % of null at most: the 25 % target cannot be met here.
        self.assertFalse(ceilings["targets"]["ws-status"]["reachable"])
        self.assertIn("NOT reachable on this machine", text)

    def test_mutations_wait_for_two_commits(self):
        _, ceilings = self.run_table({
            "bridge-mutation": report(1000, 5000),
            "fsync": probe(1.0),
        })
        # 64 callers ÷ (2 × 1 ms) = 32,000/s.
        self.assertAlmostEqual(ceilings["rows"]["bridge-mutation"]["binding_calls_per_sec"],
                               32000)
        self.assertTrue(ceilings["targets"]["bridge-mutation"]["reachable"])

    def test_the_mcp_ceiling_is_the_null_server_over_the_ts_sdk(self):
        text, ceilings = self.run_table({
            "mcp-2025-daemon": report(3000, 10000),
            "mcp-2025-ts": report(5000, 20000),
            "mcp-2025-null": report(12000, 50000),
            "fsync-awake": probe(0.1),
        })
        self.assertIn("the null MCP server does 2.40× TS", text)
        self.assertIn("wire: null MCP 2025-11-25 12,000/s = 2.40× TS", text)
        self.assertAlmostEqual(ceilings["targets"]["mcp-2025"]["most"], 2.4)
        self.assertFalse(ceilings["targets"]["mcp-2025"]["reachable"])

    def test_the_ts_reference_is_the_mean_of_its_two_runs(self):
        text, ceilings = self.run_table({
            "mcp-2025-daemon": report(6000, 30000, p99=2.0),
            "mcp-2025-ts": report(4000, 20000, p99=8.0),
            "mcp-2025-ts-again": report(6000, 30000, p99=11.0),
            "mcp-2025-null": report(50000, 250000),
            "fsync-awake": probe(0.1),
        })
        # (4,000 + 6,000) / 2 = 5,000/s: the daemon is 1.20× TS, the null server 10×.
        self.assertIn("| 1.20× TS |", text)
        self.assertIn("the null MCP server does 10.00× TS", text)
        self.assertIn("5,000 calls/s (the mean of two runs, 4,000 and 6,000)", text)
        self.assertIn("p99 11.00 ms (the worse)", text)
        self.assertAlmostEqual(ceilings["targets"]["mcp-2025"]["most"], 10.0)

    def test_one_ts_run_alone_is_the_reference(self):
        text, _ = self.run_table({
            "mcp-2025-daemon": report(6000, 30000),
            "mcp-2025-ts-again": report(3000, 15000),
        })
        self.assertIn("| 2.00× TS |", text)
        self.assertNotIn("the mean of two runs", text)

    def test_the_durable_floor_binds_when_it_is_the_lowest(self):
        text, ceilings = self.run_table({
            "ws-status-daemon": report(12000, 60000),
            "ws-status-null": report(90000, 400000),
            # The best of the durable runs counts — the pipelined one here: 20,000/s = 22.2 %.
            "ws-status-durable": report(18000, 90000),
            "ws-status-durable-pipelined": report(20000, 100000),
            "fsync-awake": probe(0.15),
            "mcp-2025-daemon": report(6000, 30000),
            "mcp-2025-ts": report(5000, 25000),
            "mcp-2025-null": report(50000, 250000),
            "mcp-2025-durable": report(14000, 70000),
        })
        row = ceilings["rows"]["ws-status"]
        self.assertAlmostEqual(row["binding_calls_per_sec"], 20000)
        self.assertTrue(row["binding"].startswith("durable: null server + a fsynced record"),
                        row["binding"])
        self.assertAlmostEqual(row["share"], 0.6)
        self.assertIn("| 60% of durable |", text)
        self.assertAlmostEqual(ceilings["targets"]["ws-status"]["most"], 20000 / 90000)
        self.assertFalse(ceilings["targets"]["ws-status"]["reachable"])
        self.assertIn("a server that only fsyncs a record per call 22.2%", text)
        # MCP: 14,000 / 5,000 = 2.8× TS at most, below the 3× target.
        self.assertAlmostEqual(ceilings["targets"]["mcp-2025"]["most"], 2.8)
        self.assertFalse(ceilings["targets"]["mcp-2025"]["reachable"])
        self.assertIn("durable: null MCP + a fsynced record per call 14,000/s = 2.80× TS", text)

    def test_the_durable_floor_is_the_best_of_the_file_and_the_sqlite_runs(self):
        text, ceilings = self.run_table({
            "ws-status-daemon": report(12000, 60000),
            "ws-status-null": report(80000, 400000),
            "ws-status-durable": report(16000, 80000),
            "ws-status-store": report(17000, 85000),
            "fsync": probe(0.15),
            "mcp-2026-daemon": report(5000, 25000),
            "mcp-2025-ts": report(5000, 25000),
            "mcp-2026-null": report(50000, 250000),
            "mcp-2026-durable": report(14000, 70000),
            "mcp-2026-store": report(16000, 80000),
        })
        row = ceilings["rows"]["ws-status"]
        # The SQLite run was the better one here: it is the floor.
        self.assertAlmostEqual(row["binding_calls_per_sec"], 17000)
        self.assertTrue(row["binding"].startswith("durable: null server + a fsynced record"),
                        row["binding"])
        self.assertAlmostEqual(ceilings["targets"]["ws-status"]["most"], 17000 / 80000)
        self.assertIn("a server that only fsyncs a record per call 20.0%", text)
        self.assertIn("one that only commits a SQLite row per call 21.2%", text)
        self.assertFalse(ceilings["targets"]["ws-status"]["reachable"])
        # 16,000 / 5,000 = 3.2× TS: within reach of a server that does nothing else.
        self.assertAlmostEqual(ceilings["targets"]["mcp-2026"]["most"], 3.2)
        self.assertTrue(ceilings["targets"]["mcp-2026"]["reachable"])
        self.assertIn("durable: null MCP + a fsynced record per call 16,000/s = 3.20× TS", text)

    def test_the_heading_names_the_idle_cpus_only_when_told(self):
        old = os.environ.pop("BENCH_IDLE", None)
        try:
            self.assertNotIn("idle CPUs", table.heading(5, 2))
            os.environ["BENCH_IDLE"] = "  "
            self.assertNotIn("idle CPUs", table.heading(5, 2))
            os.environ["BENCH_IDLE"] = "haltpoll, guest_halt_poll_ns 0"
            line = table.heading(5, 2)
            self.assertTrue(line.startswith("openphone benchmarks: 5 s measured after 2 s"), line)
            self.assertTrue(line.endswith(", idle CPUs: haltpoll, guest_halt_poll_ns 0"), line)
        finally:
            os.environ.pop("BENCH_IDLE", None)
            if old is not None:
                os.environ["BENCH_IDLE"] = old

    def test_missing_reports_are_named_not_fatal(self):
        text, ceilings = self.run_table({})
        self.assertIn("durable: null server + a fsynced record per call failed (see "
                      "ws-status-durable.err, ws-status-durable-pipelined.err, "
                      "ws-status-store.err)", text)
        self.assertIn("failed (see ws-status-daemon.err)", text)
        self.assertIn("fsync probe (idle): failed (see fsync.err)", text)
        self.assertIsNone(ceilings["commit_ms"])


if __name__ == "__main__":
    unittest.main()
