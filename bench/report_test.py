#!/usr/bin/env python3
"""report_test.py — bench/report.py on a small fixture of recorded JSON: the
table's values, intervals and verdicts, pooling over two recordings, and the
order-statistics interval itself. Run by ctest (bench_report_test)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import report  # noqa: E402


def overhead_doc(samples):
    """An overhead recording: {app: (native samples, in-place samples)} in ms."""
    rows = []
    for app, (native, in_place) in samples.items():
        for variant, s in (("native", native), ("in-place", in_place)):
            rows.append({"profile": "dram", "threads": 1, "app": app, "variant": variant, "samples_ms": s})
    return {"benchmark": "overhead", "rows": rows}


def write(directory, name, doc):
    with open(os.path.join(directory, name), "w") as f:
        json.dump(doc, f)


def table_rows(results):
    out = subprocess.run(
        [sys.executable, os.path.join(HERE, "report.py"), "--table", "--results", results],
        check=True, capture_output=True, text=True,
    ).stdout
    rows = {}
    for line in out.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells
    return rows


class Statistics(unittest.TestCase):
    def test_median_interval_from_order_statistics(self):
        # n = 20: P(B <= 5) = 0.0207 <= 0.025 < P(B <= 6), so the 6th and the 15th values.
        self.assertEqual(report.median_interval(list(range(1, 21))), (6, 15))
        # n = 6: only the range reaches 95 % (1 - 2/64).
        self.assertEqual(report.median_interval([5, 1, 4, 2, 3, 6]), (1, 6))
        self.assertEqual(report.median([4, 1, 3, 2]), 2.5)

    def test_verdict_is_judged_on_the_interval(self):
        fig = {"value": 3, "lo": 2, "hi": 4}
        self.assertEqual(report.verdict(fig, "<=", 5), "met")
        self.assertEqual(report.verdict(fig, "<=", 1), "missed")
        self.assertEqual(report.verdict(fig, "<=", 3), "undecided at this noise")
        self.assertEqual(report.verdict(fig, ">=", 1), "met")
        self.assertEqual(report.verdict(fig, ">=", 5), "missed")
        self.assertEqual(report.verdict(fig, ">=", 3), "undecided at this noise")
        self.assertEqual(report.verdict(None, ">=", 3), "not recorded")


class Table(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        d = cls.dir.name
        # Two overhead recordings, pooled: jacobi 1,2,3 % and 1,0,4 %; npb-cg 6,7,8 and 9,10,6 %;
        # npb-mg 3,4,5 and 6,7,8 %; no sph.
        write(d, "overhead-2026-11-01-1000.json", overhead_doc({
            "jacobi": ([10, 10, 10], [10.1, 10.2, 10.3]),
            "npb-cg": ([10, 10, 10], [10.6, 10.7, 10.8]),
            "npb-mg": ([10, 10, 10], [10.3, 10.4, 10.5]),
        }))
        write(d, "overhead-2026-11-02-1000.json", overhead_doc({
            "jacobi": ([20, 20, 20], [20.2, 20.0, 20.8]),
            "npb-cg": ([10, 10, 10], [10.9, 11.0, 10.6]),
            "npb-mg": ([10, 10, 10], [10.6, 10.7, 10.8]),
        }))
        # A crash-harness recording (a JSON array of rows).
        write(d, "crashsim-2026-11-03-0900.json", [
            {"row": "inproc-1m", "rates": [150000, 160000, 170000, 120000, 130000, 140000, 155000]},
            {"row": "forked-16m", "rates": [900, 950, 980]},
        ])
        # Streams: file-tmpfs transfers take 4 s (2 + 2), pmem 2 s (1 + 1): exactly 2x.
        write(d, "streams-2026-11-03-0930.json", {"transfers": [
            {"mode": "file-tmpfs", "size": 1 << 20, "processes": 1, "ok": True,
             "write_samples_s": [2, 2, 2], "read_samples_s": [2, 2, 2]},
            {"mode": "pmem", "size": 1 << 20, "processes": 1, "ok": True,
             "write_samples_s": [1, 1, 1], "read_samples_s": [1, 1, 1]},
        ]})
        write(d, "not-a-recording.json", {"ignored": True})
        cls.rows = table_rows(d)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def row(self, name):
        self.assertIn(name, self.rows)
        return self.rows[name]

    def test_pooled_overhead_met(self):
        r = self.row("in-place overhead, jacobi (dram, 1 thread)")
        self.assertEqual(r[1], "≤ 5.00 %")
        # pooled 0, 1, 1, 2, 3, 4: median 1.5, six values: the range
        self.assertEqual(r[2], "**1.50 %** [0.000, 4.00], n = 6")
        self.assertEqual(r[3], "met")
        self.assertEqual(r[4], "2026-11-01, 2026-11-02 (2 runs)")
        self.assertEqual(r[5], "`cairn bench overhead --profiles dram --variants native,in-place -r 3`")

    def test_pooled_overhead_missed(self):
        r = self.row("in-place overhead, npb-cg (dram, 1 thread)")
        self.assertEqual(r[2], "**7.50 %** [6.00, 10.0], n = 6")
        self.assertEqual(r[3], "missed")

    def test_interval_across_the_goal_is_undecided(self):
        r = self.row("in-place overhead, npb-mg (dram, 1 thread)")
        self.assertEqual(r[2], "**5.50 %** [3.00, 8.00], n = 6")
        self.assertEqual(r[3], "undecided at this noise")

    def test_median_across_apps(self):
        # per-app medians 1.5, 7.5, 5.5
        r = self.row("in-place overhead, median across the apps")
        self.assertTrue(r[2].startswith("**5.50 %** ["), r[2])

    def test_app_without_rows_is_not_recorded(self):
        r = self.row("in-place overhead, sph (dram, 1 thread)")
        self.assertEqual(r[2], "-")
        self.assertEqual(r[3], "not recorded")

    def test_crash_rates(self):
        r = self.row("crash states per second, in-process checks (1 MiB)")
        self.assertEqual(r[2], "**150,000/s** [120,000, 170,000], n = 7")
        self.assertEqual(r[3], "met")
        r = self.row("crash states per second, forked full recovery (16 MiB)")
        self.assertEqual(r[2], "**950/s** [900, 980], n = 3")
        self.assertEqual(r[3], "missed")

    def test_ratio_of_medians(self):
        r = self.row("pmem: stream transfer vs file on tmpfs (1 process)")
        self.assertEqual(r[2], "**2.00x** [2.00, 2.00], n = 3")
        self.assertEqual(r[3], "met")
        r = self.row("pmem: stream transfer vs file with fsync (1 process)")
        self.assertEqual(r[3], "not recorded")

    def test_experiment_without_recordings(self):
        r = self.row("restart from in-place vs from a file checkpoint (sph)")
        self.assertEqual((r[2], r[3], r[4]), ("-", "not recorded", "-"))


if __name__ == "__main__":
    unittest.main()
