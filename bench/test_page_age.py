"""Tests of bench/page_age.py: its arguments and the shape of what it reports."""

import contextlib
import io
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import page_age  # noqa: E402


class Arguments(unittest.TestCase):
    def refused(self, argv):
        with contextlib.redirect_stderr(io.StringIO()) as err:
            with self.assertRaises(SystemExit) as exit:
                page_age.parse(argv)
        self.assertEqual(exit.exception.code, 2)
        return err.getvalue()

    def test_defaults_are_the_store_ring_and_sqlite_mark(self):
        args = page_age.parse([])
        self.assertEqual(args.probe, "both")
        self.assertEqual(args.ring, [16000, 1000])
        self.assertEqual(args.ages, [0.0, 0.01, 0.1, 0.5, 1.0])

    def test_bad_lists_and_sizes_are_refused_with_a_reason(self):
        self.assertIn("not a list of seconds", self.refused(["--ages", "a,b"]))
        self.assertIn("need seconds >= 0", self.refused(["--ages", "-1"]))
        self.assertIn("need whole numbers >= 4", self.refused(["--ring", "2"]))
        self.assertIn("not a list of whole numbers", self.refused(["--ring", "1.5"]))
        self.assertIn("--size must be at least 1", self.refused(["--size", "0"]))
        self.assertIn("--cycles must be at least 1", self.refused(["--cycles", "0"]))
        self.assertIn("invalid choice", self.refused(["disk"]))


class Report(unittest.TestCase):
    def test_a_small_run_reports_every_pass_and_ring(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = page_age.main(
                ["--size", "1", "--ages", "0,0.001", "--ring", "8,16", "--cycles", "5", "--json"]
            )
        self.assertEqual(code, 0)
        report = json.loads(out.getvalue())
        passes = report["memory"]["passes"]
        self.assertEqual([p["idle_s"] for p in passes], [None, 0.0, 0.001])
        self.assertTrue(all(p["write_us"] > 0 for p in passes))
        self.assertEqual([f["ring_frames"] for f in report["file"]], [8, 16])
        self.assertEqual([f["laps"] for f in report["file"]], [2.5, 1.25])
        self.assertTrue(all(f["pwrite_us"] > 0 for f in report["file"]))

    def test_the_text_report_names_each_probe(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            page_age.main(["memory", "--size", "1", "--ages", "0"])
        text = out.getvalue()
        self.assertIn("first touch", text)
        self.assertIn("after 0.0 s idle", text)
        self.assertNotIn("file ring", text)


if __name__ == "__main__":
    unittest.main()
