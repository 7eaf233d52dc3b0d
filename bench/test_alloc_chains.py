"""Tests of bench/alloc_chains.py: the chains read off a callgrind file and where they go.

Run: python3 -m unittest discover -s bench -p 'test_alloc_chains.py'
"""

import os
import tempfile
import unittest

import alloc_chains

ALLOC = "__rustc::__rust_alloc"
REALLOC = "__rustc::__rust_realloc"

# A callgrind file as `--separate-callers` writes it: a function named once with its id, then
# by the id alone; `calls=` lines count the calls into the `cfn=` before them.
SAMPLE = f"""\
fn=(1) openphone_mcp::direct::respond
cfn=(2) {ALLOC}'alloc::raw_vec::finish_grow'openphone_mcp::direct::respond'openphone_mcp::direct::Direct::answer
calls=300 0
0 40
cfn=(2)
calls=100 0
0 40
fn=(3) hyper::proto::h1::conn::Conn::poll_read_head
cfn=(4) {ALLOC}'alloc::vec::Vec::with_capacity'hyper::proto::h1::role::parse'hyper::proto::h1::conn::Conn::poll_read_head
calls=200 0
0 40
cfn=(5) {REALLOC}'alloc::raw_vec::finish_grow'openphone_store::writer::serve
calls=40 0
0 10
cfn=(6) mi_free
calls=999 0
0 10
"""


class Counts(unittest.TestCase):
    def test_calls_are_summed_per_chain_also_under_a_repeated_id(self):
        found = alloc_chains.counts(SAMPLE.splitlines(keepends=True))
        self.assertEqual(sum(found.values()), 640)
        respond = [n for chain, n in found.items() if "direct::respond" in chain]
        self.assertEqual(respond, [400])

    def test_calls_into_anything_else_are_not_allocations(self):
        found = alloc_chains.counts(SAMPLE.splitlines(keepends=True))
        self.assertFalse(any("mi_free" in chain for chain in found))


class Where(unittest.TestCase):
    def test_the_nearest_project_frames_name_the_place(self):
        chain = (f"{ALLOC}'alloc::raw_vec::finish_grow'openphone_mcp::a'openphone_mcp::b"
                 "'tokio::x'openphone_mcp::c'openphone_mcp::d")
        self.assertEqual(alloc_chains.where(chain),
                         "openphone_mcp::a < openphone_mcp::b < openphone_mcp::c")

    def test_without_a_project_frame_the_first_frames_past_the_plumbing(self):
        chain = f"{ALLOC}'alloc::vec::Vec::with_capacity'core::x'hyper::a'hyper::b"
        self.assertEqual(alloc_chains.where(chain, depth=2), "hyper::a < hyper::b")


class Report(unittest.TestCase):
    def test_per_call_figures_and_the_largest_place_first(self):
        found = alloc_chains.counts(SAMPLE.splitlines(keepends=True))
        lines = alloc_chains.report(found, calls=100, top=10)
        self.assertEqual(lines[0], "allocations per call: 6.4 (640 over 100 calls)")
        rows = [line for line in lines if line.startswith("| ") and "`" in line]
        self.assertEqual(rows[0], "| 4.00 | `openphone_mcp::direct::respond < "
                                  "openphone_mcp::direct::Direct::answer` |")
        self.assertIn("| 2.00 | `hyper::proto::h1::role::parse < "
                      "hyper::proto::h1::conn::Conn::poll_read_head` |", rows)
        self.assertIn("| 0.40 | `openphone_store::writer::serve` |", rows)


class Main(unittest.TestCase):
    def test_bad_arguments_and_a_file_without_chains_are_refused(self):
        with tempfile.NamedTemporaryFile("w", delete=False, suffix=".cg") as f:
            f.write("fn=(1) main\ncfn=(2) mi_free\ncalls=1 0\n0 1\n")
        try:
            self.assertEqual(alloc_chains.main(["x", f.name]), 2)
            self.assertEqual(alloc_chains.main(["x", f.name, "many"]), 2)
            self.assertEqual(alloc_chains.main(["x", f.name, "0"]), 2)
            self.assertEqual(alloc_chains.main(["x", f.name, "10"]), 1)
        finally:
            os.unlink(f.name)


if __name__ == "__main__":
    unittest.main()
