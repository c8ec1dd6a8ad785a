#!/usr/bin/env python3
"""Tests of bench/compare that build nothing: its arguments, the medians,
ratios and verdicts, the parsing of emu_bench's JSON and summary lines and
of wspipe explore's JSON, the tables, the source tree's synchronisation,
and its errors for an unknown revision (on a throw-away git repository).

    python3 bench/compare_test.py      (CTest: bench.compare)
"""
import contextlib
import importlib.machinery
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "compare")


def load_compare():
    loader = importlib.machinery.SourceFileLoader("wspipe_bench_compare", SCRIPT)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


compare = load_compare()


def bench_json(entries):
    return {"context": {"num_cpus": 2}, "benchmarks": entries}


def iteration(name, items=None, real_time=10.0, label="", **extra):
    b = {"name": name, "run_name": name, "run_type": "iteration", "iterations": 5,
         "real_time": real_time, "cpu_time": real_time, "time_unit": "ms", "label": label}
    if items is not None:
        b["items_per_second"] = items
    b.update(extra)
    return b


def aggregate(name, agg, items):
    return {"name": f"{name}_{agg}", "run_name": name, "run_type": "aggregate", "aggregate_name": agg,
            "real_time": 1.0, "cpu_time": 1.0, "time_unit": "ms", "items_per_second": items, "label": ""}


SUMMARY = """\
BM_FiberYield/real_time        43.2 ms  1.1 ms  16 items_per_second=9.26M/s
Load Average: 1.00, 0.50, 0.25

boost.fiber yields/s: 9.260e+06
emulator steps/s: 1.021e+07  ratio 1.102  (random no-trace)
schedules/s: 1.545e+04  (ring explore jobs 1)
exhaustive_jobs2_speedup tile-reduce rows 64 cluster 2=1.91
jobs2_speedup ring=1.90 gemm=1.85
gemm_ratio=0.0250 gemm_cta2_ratio=0.0234 blockwise_fp8_ratio=0.0052
gemm_1024_seconds_per_schedule=5.120
lane_divergence_cost ring=1.31 gemm=1.05
grid_step_cost 16/4=1.02 64/4=1.10
ratio=1.102
"""


class Arguments(unittest.TestCase):
    def test_defaults(self):
        a = compare.parse_args(["HEAD~1", "HEAD"])
        self.assertEqual((a.base, a.new), ("HEAD~1", "HEAD"))
        self.assertEqual(a.rounds, compare.DEFAULT_ROUNDS)
        self.assertEqual(a.bench, compare.DEFAULT_BENCH)
        self.assertEqual(a.explore, compare.DEFAULT_EXPLORES)
        self.assertEqual(a.seconds, compare.DEFAULT_SECONDS)
        self.assertEqual(a.build_type, "Release")
        self.assertFalse(a.markdown or a.keep or a.no_bench)
        self.assertEqual(compare.side_cmake_options(a, "BASE"), [])

    def test_cmake_options_per_side_with_or_without_equals(self):
        a = compare.parse_args(["HEAD", "HEAD", "--base-cmake-opt", "-DWSPIPE_INSTRUMENT_ACCESSES=OFF",
                                "--cmake-opt=-DA=1", "--new-cmake-opt=-DB=2", "--bench-arg",
                                "--benchmark_repetitions=3"])
        self.assertEqual(compare.side_cmake_options(a, "BASE"), ["-DA=1", "-DWSPIPE_INSTRUMENT_ACCESSES=OFF"])
        self.assertEqual(compare.side_cmake_options(a, "NEW"), ["-DA=1", "-DB=2"])
        self.assertEqual(a.bench_arg, ["--benchmark_repetitions=3"])

    def test_explores_replace_the_default_set(self):
        a = compare.parse_args(["A", "B", "--explore", "ring", "--explore", "gemm --cta-group 2", "--seconds", "1"])
        self.assertEqual(a.explore, ["ring", "gemm --cta-group 2"])
        self.assertEqual(compare.parse_args(["A", "B", "--no-explore"]).explore, [])

    def test_usage_errors(self):
        for argv in (["A"], ["A", "B", "--rounds", "0"], ["A", "B", "--seconds", "0"],
                     ["A", "B", "--no-bench", "--no-explore"], ["A", "B", "--explore", "--m 1"],
                     ["A", "B", "--jobs", "0"], ["A", "B", "--explore", "'unbalanced"]):
            with self.subTest(argv=argv), contextlib.redirect_stderr(io.StringIO()):
                with self.assertRaises(SystemExit) as e:
                    compare.parse_args(argv)
                self.assertEqual(e.exception.code, 2)

    def test_help_names_the_defaults(self):
        text = compare.build_parser().format_help()
        self.assertIn(compare.DEFAULT_BENCH, text)
        self.assertIn("WORKTREE", text)


class Arithmetic(unittest.TestCase):
    def test_median_and_ratio(self):
        self.assertEqual(compare.median([3.0, 1.0, 2.0]), 2.0)
        self.assertEqual(compare.median([4.0, None, 2.0]), 3.0)
        self.assertIsNone(compare.median([None, None]))
        self.assertAlmostEqual(compare.ratio(3.0, 2.0), 1.5)
        self.assertIsNone(compare.ratio(3.0, 0.0))
        self.assertIsNone(compare.ratio(None, 2.0))

    def test_verdict_follows_the_direction(self):
        self.assertEqual(compare.verdict([1, 2, 3], [4, 5, 6], "higher"), "better")
        self.assertEqual(compare.verdict([1, 2, 3], [4, 5, 6], "lower"), "worse")
        self.assertEqual(compare.verdict([4, 5, 6], [1, 2, 3], "lower"), "better")
        self.assertEqual(compare.verdict([1, 5], [2, 6], "higher"), "noise")
        self.assertEqual(compare.verdict([1], [2], "higher"), "better?")
        self.assertEqual(compare.verdict([2, 2], [2, 2], "higher"), "same")
        self.assertEqual(compare.verdict([None], [2], "higher"), "")

    def test_summary_directions(self):
        self.assertEqual(compare.summary_direction("ratio"), "higher")
        self.assertEqual(compare.summary_direction("jobs2_speedup ring"), "higher")
        self.assertEqual(compare.summary_direction("grid_step_cost 16/4"), "lower")
        self.assertEqual(compare.summary_direction("gemm_1024_seconds_per_schedule"), "lower")


class Parsing(unittest.TestCase):
    def test_summary_lines(self):
        got = {name: value for name, value, _ in compare.parse_summary_lines(SUMMARY)}
        self.assertEqual(got, {
            "exhaustive_jobs2_speedup tile-reduce rows 64 cluster 2": 1.91,
            "jobs2_speedup ring": 1.90, "jobs2_speedup gemm": 1.85,
            "gemm_ratio": 0.0250, "gemm_cta2_ratio": 0.0234, "blockwise_fp8_ratio": 0.0052,
            "gemm_1024_seconds_per_schedule": 5.120,
            "lane_divergence_cost ring": 1.31, "lane_divergence_cost gemm": 1.05,
            "grid_step_cost 16/4": 1.02, "grid_step_cost 64/4": 1.10,
            "ratio": 1.102})

    def test_colour_codes_do_not_hide_a_line(self):
        text = "\x1b[0;32mBM_X/real_time \x1b[m 1 ms\n\x1b[mratio=0.330\n\x1b[mjobs2_speedup ring=1.5 gemm=1.2\n"
        got = [(n, v) for n, v, _ in compare.parse_summary_lines(text)]
        self.assertEqual(got, [("ratio", 0.330), ("jobs2_speedup ring", 1.5), ("jobs2_speedup gemm", 1.2)])

    def test_unavailable_ratio_has_no_value(self):
        got = compare.parse_summary_lines("ratio=unavailable (BM_EmuRing random no-trace did not run)\n")
        self.assertEqual([(n, v) for n, v, _ in got], [("ratio", None)])

    def test_benchmark_json(self):
        data = bench_json([
            iteration("BM_FiberYield/real_time", items=9.2e6),
            iteration("BM_EmuRing/1/0/1/real_time", items=1.0e7, label="random no-trace"),
            iteration("BM_NoItems/real_time", real_time=12.5),
            iteration("BM_Broken/real_time", items=1.0, error_occurred=True, error_message="ring failed"),
        ])
        got = compare.parse_benchmark_json(data)
        self.assertEqual(got, [
            ("BM_FiberYield", "", 9.2e6, "items/s", "higher", None),
            ("BM_EmuRing/1/0/1", "random no-trace", 1.0e7, "items/s", "higher", None),
            ("BM_NoItems", "", 12.5, "ms", "lower", None),
            ("BM_Broken", "", None, "items/s", "higher", "ring failed"),
        ])

    def test_repetitions_count_by_their_median(self):
        name = "BM_FiberYield/real_time"
        data = bench_json([iteration(name, items=1.0), iteration(name, items=3.0), iteration(name, items=2.0),
                           aggregate(name, "mean", 2.0), aggregate(name, "median", 2.5),
                           aggregate(name, "stddev", 1.0)])
        got = compare.parse_benchmark_json(data)
        self.assertEqual([(n, v) for n, _l, v, *_ in got], [("BM_FiberYield", 2.5)])

    def test_explore_json(self):
        out = '{"scenario":"ring","command":"explore","runs":26937,"seconds":1.286,"status":"ok"}\n'
        rate, runs, seconds = compare.explore_rate(out)
        self.assertAlmostEqual(rate, 26937 / 1.286)
        self.assertEqual((runs, seconds), (26937, 1.286))
        self.assertAlmostEqual(compare.explore_rate("noise\n" + out)[0], 26937 / 1.286)
        for bad in ("", "not json", '{"runs": 3}', '{"runs": 3, "seconds": 0}'):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                compare.explore_rate(bad)


def canned_results():
    r = compare.Results(2)
    for rnd, (yb, yn, eb, en) in enumerate([(9.0e6, 9.2e6, 1.0e4, 1.2e4), (9.4e6, 9.1e6, 1.1e4, 1.3e4)]):
        for role, y, e in (("BASE", yb, eb), ("NEW", yn, en)):
            data = bench_json([iteration("BM_FiberYield/real_time", items=y),
                               iteration("BM_EmuRing/1/0/1/real_time", items=y * 1.1, label="random no-trace")])
            r.add_bench(role, rnd, data, f"ratio={1.1 + (0.1 if role == 'NEW' else 0):.3f}\n"
                                         "grid_step_cost 16/4=1.05 64/4=1.20\n")
            r.add_explore(role, rnd, "ring", e)
    return r


def canned_sides():
    base = dict(role="BASE", rev="HEAD~1", sha="a" * 40, subject="the base", worktree=False, build_type="Release",
                cmake_options=[])
    new = dict(role="NEW", rev="WORKTREE", sha="b" * 40, subject="the new", worktree=True, changes=3,
               build_type="Release", cmake_options=["-DWSPIPE_INSTRUMENT_ACCESSES=OFF"])
    return {"BASE": base, "NEW": new}


META = dict(command="bench/compare HEAD~1 WORKTREE --rounds 2", machine="2 cores (nproc), Test CPU",
            compiler="g++ 12.2.0", measured="emu_bench --benchmark_filter='X'", notes=["a note"])


class Tables(unittest.TestCase):
    def test_rows(self):
        rows = {row["name"]: row for row in canned_results().rows()}
        y = rows["BM_FiberYield"]
        self.assertEqual(y["BASE"], [9.0e6, 9.4e6])
        self.assertAlmostEqual(y["base_median"], 9.2e6)
        self.assertAlmostEqual(y["new_median"], 9.15e6)
        self.assertAlmostEqual(y["ratio"], 9.15 / 9.2)
        self.assertEqual(y["verdict"], "noise")
        e = rows["explore ring"]
        self.assertEqual((e["unit"], e["better"], e["verdict"]), ("schedules/s", "higher", "better"))
        self.assertAlmostEqual(e["ratio"], 1.25e4 / 1.05e4)
        self.assertEqual(rows["ratio"]["verdict"], "better")
        self.assertEqual(rows["grid_step_cost 16/4"]["better"], "lower")
        self.assertEqual(rows["grid_step_cost 16/4"]["verdict"], "same")
        # emu_bench's figures, then the explorations, then the summary lines.
        self.assertEqual([r["group"] for r in canned_results().rows()],
                         ["emu_bench", "emu_bench", "explore", "summary", "summary", "summary"])

    def test_text_report(self):
        text = compare.format_report(canned_results(), canned_sides(), META, markdown=False)
        lines = text.splitlines()
        self.assertTrue(lines[0].startswith("command:  bench/compare HEAD~1 WORKTREE"))
        self.assertIn("HEAD~1 = " + "a" * 40 + " (the base); Release, cmake: no extra options", text)
        self.assertIn("WORKTREE = bbbbbbbbbbbb + uncommitted changes (3 files differ)", text)
        self.assertIn("-DWSPIPE_INSTRUMENT_ACCESSES=OFF", text)
        header = next(line for line in lines if line.startswith("figure"))
        self.assertEqual(header.split()[:5], ["figure", "unit", "better", "BASE", "1"])
        self.assertIn("NEW/BASE", header)
        row = next(line for line in lines if line.startswith("BM_FiberYield"))
        self.assertEqual(row.split(), ["BM_FiberYield", "items/s", "higher", "9M", "9.2M", "9.4M", "9.1M",
                                       "9.2M", "9.15M", "0.995", "noise"])
        row = next(line for line in lines if line.startswith("explore ring"))
        self.assertTrue(row.endswith("1.190  better"), row)
        self.assertIn("note: a note", text)
        self.assertIn("emu_bench's summary lines as printed, round 2:", text)
        self.assertIn("  BASE  ratio=1.100", lines)
        self.assertIn("  NEW   ratio=1.200", lines)
        self.assertIn("  NEW   grid_step_cost 16/4=1.05 64/4=1.20", lines)

    def test_markdown_report(self):
        text = compare.format_report(canned_results(), canned_sides(), META, markdown=True)
        table = [line for line in text.splitlines() if line.startswith("|")]
        self.assertEqual(table[0], "| figure | unit | better | BASE 1 | NEW 1 | BASE 2 | NEW 2 | BASE median "
                                   "| NEW median | NEW/BASE | verdict |")
        self.assertEqual(table[1], "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
        self.assertIn("| `BM_EmuRing/1/0/1` random no-trace | items/s | higher |", text)
        self.assertIn("| `wspipe explore ring` | schedules/s | higher |", text)
        self.assertIn("| `grid_step_cost 16/4` |  | lower |", text)
        self.assertTrue(all(line.count("|") == 12 for line in table))
        self.assertTrue(text.startswith("`bench/compare HEAD~1 WORKTREE --rounds 2`"))
        self.assertIn("```\nBASE  ratio=1.100\n", text)

    def test_errors_and_missing_figures(self):
        r = compare.Results(1)
        r.add_bench("BASE", 0, bench_json([iteration("BM_Old/real_time", items=5.0)]), "")
        r.add_bench("NEW", 0, bench_json([iteration("BM_New/real_time", items=1.0, error_occurred=True,
                                                     error_message="boom")]), "")
        text = compare.format_report(r, canned_sides(), dict(META, notes=[]), markdown=False)
        old = next(line for line in text.splitlines() if line.startswith("BM_Old"))
        self.assertEqual(old.split()[-3:], ["5", "-", "-"])  # BASE median, NEW median, NEW/BASE
        self.assertIn("BM_New: NEW round 1: boom", text)

    def test_a_figure_without_any_value_is_left_out_of_the_table(self):
        r = compare.Results(1)
        for role in compare.SIDES:
            r.add_bench(role, 0, bench_json([iteration("BM_FiberYield/real_time", items=5.0)]),
                        "ratio=unavailable (BM_EmuRing random no-trace did not run)\n")
        self.assertEqual([row["name"] for row in r.rows()], ["BM_FiberYield"])
        text = compare.format_report(r, canned_sides(), dict(META, notes=[]), markdown=False)
        self.assertIn("  NEW   ratio=unavailable (BM_EmuRing random no-trace did not run)", text.splitlines())

    def test_number_formats(self):
        self.assertEqual(compare.fmt_value(1.5e7, "items/s"), "15M")
        self.assertEqual(compare.fmt_value(1785.0, "items/s"), "1.785k")
        self.assertEqual(compare.fmt_value(12.5, "items/s"), "12.5")
        self.assertEqual(compare.fmt_value(1500.0, "ms"), "1500")
        self.assertEqual(compare.fmt_value(1.10234, ""), "1.102")
        self.assertEqual(compare.fmt_value(0.0068, ""), "0.0068")
        self.assertEqual(compare.fmt_value(None, ""), "-")


@unittest.skipUnless(shutil.which("git"), "needs git")
class Trees(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="compare-test-")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def git(self, *args):
        subprocess.run(["git", "-C", self.repo, "-c", "user.name=t", "-c", "user.email=t@t", *args],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def make_repo(self):
        self.repo = os.path.join(self.tmp, "repo")
        os.makedirs(os.path.join(self.repo, "sub"))
        self.git("init", "-q")
        for rel, text in (("a.txt", "a\n"), ("sub/b.txt", "b\n"), (".gitignore", "/build/\n")):
            with open(os.path.join(self.repo, rel), "w") as f:
                f.write(text)
        os.chmod(os.path.join(self.repo, "a.txt"), 0o755)
        self.git("add", ".")
        self.git("commit", "-q", "-m", "first")

    def test_sync_writes_only_what_differs_and_removes_the_rest(self):
        dest = os.path.join(self.tmp, "src")
        first = {"a": ("file", b"1", False), "d/b": ("file", b"2", True), "d/e/c": ("file", b"3", False),
                 "l": ("link", "a", False)}
        self.assertEqual(compare.sync_tree(first, dest), 4)
        self.assertTrue(os.access(os.path.join(dest, "d/b"), os.X_OK))
        self.assertEqual(os.readlink(os.path.join(dest, "l")), "a")
        os.utime(os.path.join(dest, "a"), (1, 1))
        second = {"a": ("file", b"1", False), "d/b": ("file", b"22", True), "d/e": ("file", b"now a file", False),
                  "l": ("link", "d/b", False)}
        self.assertEqual(compare.sync_tree(second, dest), 4)  # d/b, d/e/c removed, d/e written, l
        self.assertEqual(os.path.getmtime(os.path.join(dest, "a")), 1)  # unchanged: not rewritten
        with open(os.path.join(dest, "d/e"), "rb") as f:
            self.assertEqual(f.read(), b"now a file")
        got = {os.path.relpath(os.path.join(d, f), dest) for d, _, fs in os.walk(dest) for f in fs}
        self.assertEqual(got, {"a", "d/b", "d/e", "l"})
        self.assertEqual(compare.sync_tree(second, dest), 0)

    def test_revisions_and_the_working_tree(self):
        self.make_repo()
        with self.assertRaises(compare.CompareError) as e:
            compare.resolve_side(self.repo, "BASE", "no-such-branch", [], "Release")
        self.assertIn("unknown revision 'no-such-branch'", str(e.exception))
        base = compare.resolve_side(self.repo, "BASE", "HEAD", ["-DX=1"], "Release")
        self.assertEqual(base["subject"], "first")
        self.assertTrue(base["key"].startswith(base["sha"][:16]))
        files = compare.files_of_commit(self.repo, base["sha"])
        self.assertEqual(sorted(files), [".gitignore", "a.txt", "sub/b.txt"])
        self.assertTrue(files["a.txt"][2])
        # The working tree: a change, an untracked file, an ignored one, a deletion.
        with open(os.path.join(self.repo, "a.txt"), "w") as f:
            f.write("changed\n")
        with open(os.path.join(self.repo, "new.txt"), "w") as f:
            f.write("new\n")
        os.makedirs(os.path.join(self.repo, "build"))
        with open(os.path.join(self.repo, "build", "ignored.txt"), "w") as f:
            f.write("x\n")
        os.unlink(os.path.join(self.repo, "sub", "b.txt"))
        new = compare.resolve_side(self.repo, "NEW", "WORKTREE", [], "Release")
        self.assertEqual(sorted(new["files"]), [".gitignore", "a.txt", "new.txt"])
        self.assertEqual(new["files"]["a.txt"][1], b"changed\n")
        self.assertEqual(new["changes"], 3)
        self.assertTrue(new["key"].startswith("worktree-"))
        again = compare.resolve_side(self.repo, "NEW", "WORKTREE", [], "Release")
        self.assertEqual(again["key"], new["key"])
        other = compare.resolve_side(self.repo, "NEW", "WORKTREE", ["-DY=1"], "Release")
        self.assertNotEqual(other["key"], new["key"])

    def test_the_script_reports_an_unknown_revision(self):
        self.make_repo()
        p = subprocess.run([sys.executable, SCRIPT, "HEAD", "no-such-branch", "--repo", self.repo,
                            "--build-dir", os.path.join(self.tmp, "root")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(p.returncode, 1)
        self.assertIn("compare: error: unknown revision 'no-such-branch'", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "root")))  # nothing made before the check


if __name__ == "__main__":
    unittest.main()
