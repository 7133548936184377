"""End to end: `tep run` drives the example adapter, and catches a pipeline broken on purpose.

Needs a `tep` binary: $TEP_BIN (CI sets it to target/debug/tep), else `tep` on PATH, else the
checkout's target/debug/tep. Without one these tests are skipped, saying so.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Any

from tep_adapter import find_tep

KIT = Path(__file__).resolve().parents[1]
CHECKOUT_TEP = next((str(p / "target/debug/tep") for p in KIT.parents if (p / "target/debug/tep").is_file()), None)
TEP = find_tep() or (None if os.environ.get("TEP_BIN") or CHECKOUT_TEP is None else shutil.which(CHECKOUT_TEP))
EXAMPLE = KIT / "example" / "adapter.py"
BROKEN = KIT / "tests" / "broken_adapter.py"
NO_TEP = "no tep binary: set TEP_BIN (cargo build -p tep-conformance makes target/debug/tep) or put tep on PATH"


class TepBinTest(unittest.TestCase):
    @unittest.skipUnless(os.environ.get("TEP_BIN"), "TEP_BIN is not set")
    def test_tep_bin_names_an_executable(self) -> None:
        # A TEP_BIN that names nothing is a broken setup, not a reason to skip the tests below.
        self.assertIsNotNone(find_tep(), f"TEP_BIN={os.environ.get('TEP_BIN')} is not an executable")


def command(*argv: str | Path) -> str:
    return shlex.join(str(a) for a in argv)


@unittest.skipIf(TEP is None, NO_TEP)
class EndToEndTest(unittest.TestCase):
    def tep_run(self, adapter: str, *scenarios: str) -> tuple[int, dict[str, Any]]:
        """Runs the scenarios; returns the exit code and the JSON report."""
        assert TEP is not None
        argv = [TEP, "run", "--adapter", adapter, "--strict", "--format", "json"]
        for scenario in scenarios:
            argv += ["--scenario", scenario]
        # Failing runs keep their traces under ./target/tep-runs: not in the source tree.
        with tempfile.TemporaryDirectory() as cwd:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False, cwd=cwd)
        try:
            report = json.loads(done.stdout)
        except json.JSONDecodeError as e:
            self.fail(f"no JSON report ({e}): {done.stdout}{done.stderr}")
        return done.returncode, report

    def test_the_example_passes_scenarios_of_every_kind(self) -> None:
        scenarios = [
            "allow-runs-body",
            "mixed-batch",
            "code-mode-every-path",
            "timeout-waits-for-a-slow-body",
            "fs-edit-after-an-outside-change-is-refused",
            "contexts-fifo-when-a-later-call-finishes-first",
            "post-block-drops-earlier-contexts",
            "owned-events-inside-the-body",
        ]
        code, report = self.tep_run(command(sys.executable, EXAMPLE), *scenarios)
        self.assertEqual(code, 0, report)
        self.assertEqual(report["summary"]["passed"], len(scenarios), report["summary"])

    def test_a_pipeline_broken_on_purpose_is_caught_by_the_invariant_it_breaks(self) -> None:
        breakages = {
            "throw-escapes": ("pre-throws", "throw-is-normalized"),
            "outcome-not-frozen": ("observers-cannot-change-the-outcome", "frozen-outcome"),
            "contexts-before-results": ("contexts-fifo-after-all-results", "contexts-after-all-results"),
            "sub-calls-overlap": ("code-mode-group-runs-one-at-a-time", "sub-calls-serialized"),
            "body-abandoned": ("timeout-cancels-a-hanging-body", "body-settles-before-commit"),
        }
        for breakage, (scenario, invariant) in breakages.items():
            with self.subTest(breakage):
                code, report = self.tep_run(command(sys.executable, BROKEN, breakage), scenario)
                self.assertEqual(code, 1, report)
                [row] = report["scenarios"]
                self.assertEqual((row["id"], row["status"]), (scenario, "failed"), row)
                broken = {(v["invariant"], v["level"]) for v in row["violations"]}
                self.assertIn((invariant, "MUST"), broken, row)

    def test_scenarios_found_by_fuzzing_stay_fixed(self) -> None:
        # Each was shrunk by tep's fuzzer from a failure of the example; `tep check` judges the
        # trace (the corpus runner only takes corpus ids).
        assert TEP is not None
        for path in sorted((KIT / "tests" / "scenarios").glob("*.json")):
            with self.subTest(path.stem):
                done = subprocess.run(
                    [sys.executable, str(EXAMPLE), "--scenario", str(path), "--tep", TEP],
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=False,
                )
                self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
                self.assertIn("0 violation(s): 0 MUST, 0 SHOULD", done.stdout)

    def test_the_timed_example_splits_each_case_into_work_and_scripted_waiting(self) -> None:
        # The README's command (fewer cases): fuzz through the timed example, the split written at stop.
        assert TEP is not None
        with tempfile.TemporaryDirectory() as cwd:
            split_file = Path(cwd) / "split.json"
            adapter = command(sys.executable, KIT / "example" / "timed_adapter.py")
            argv = [TEP, "fuzz", "--adapter", adapter, "--oracle", "none", "--cases", "12", "--seed", "5"]
            env = {**os.environ, "TEP_CASE_TIME": str(split_file)}
            done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False, cwd=cwd, env=env)
            self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
            split = json.loads(split_file.read_text(encoding="utf-8"))
        self.assertEqual(split["scenarios"], 12, split)
        self.assertGreater(split["start_s"], 0, split)
        self.assertGreater(split["cpu_s"], 0, split)
        # Seed 5's scenarios script sleeps: some of each case is waiting, never more than all of it.
        self.assertGreater(split["waiting_s"], 0, split)
        self.assertLessEqual(split["waiting_s"], split["wall_s"], split)

    def test_one_scenario_locally_prints_its_trace_and_the_verdict(self) -> None:
        assert TEP is not None
        done = subprocess.run(
            [sys.executable, str(EXAMPLE), "--scenario", "approval-refusals-deny", "--tep", TEP],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "PYTHONPATH": ""},
        )
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        self.assertTrue(done.stdout.startswith('{"kind":"header"'))
        self.assertIn("0 violation(s)", done.stdout)


if __name__ == "__main__":
    unittest.main()
