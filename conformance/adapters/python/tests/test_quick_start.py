"""The README's quick start, as it is written: run on mypipeline, and on mypipeline broken on purpose.

The README marks its quick-start block with `<!-- quick-start: FILE ... -->` right before the
fence. These tests write the block to FILE in a scratch directory, beside nothing but what the
README says it needs (the kit, and `tests/quickstart/mypipeline.py` on the path), and run it.

The `tep run` tests need `$TEP_BIN` (CI sets it); without it they are skipped, saying so.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import shlex
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Any, ClassVar

from tep_adapter import Adapter, Implementation

from .fakes import scenario

KIT = Path(__file__).resolve().parents[1]
README = KIT / "README.md"
QUICKSTART = KIT / "tests" / "quickstart"


def readme_counts() -> tuple[int, int]:
    """The passed and skipped counts the README quotes for the quick start."""
    text = README.read_text(encoding="utf-8")
    passed, skipped = (
        re.search(rf"<!-- count:quickstart-{name} -->(\d+)<!-- /count -->", text) for name in ("passed", "skipped")
    )
    assert passed is not None and skipped is not None, "README.md lost its quick-start count markers"
    return int(passed[1]), int(skipped[1])
MARKED = re.compile(r"<!-- quick-start: (?P<file>[\w.-]+)[^>]*-->\n```python\n(?P<code>.*?)```\n", re.S)
TEP_BIN = os.environ.get("TEP_BIN")
NO_TEP = "TEP_BIN is not set: set it to a tep binary (cargo build -p tep-conformance makes target/debug/tep)"


def quick_start() -> dict[str, str]:
    """The README's quick-start blocks, by the file each is to be saved as."""
    return {m["file"]: m["code"] for m in MARKED.finditer(README.read_text(encoding="utf-8"))}


def written(directory: Path) -> None:
    for name, code in quick_start().items():
        (directory / name).write_text(code, encoding="utf-8")


def environment(directory: Path) -> dict[str, str]:
    """The kit, mypipeline and the quick start importable, as the README says to set it up."""
    path = os.pathsep.join(str(p) for p in (KIT, QUICKSTART, directory))
    return {**os.environ, "PYTHONPATH": path}


class QuickStartBlockTest(unittest.TestCase):
    def test_the_readme_marks_one_quick_start_block(self) -> None:
        blocks = quick_start()
        self.assertEqual(list(blocks), ["my_adapter.py"])
        self.assertIn(".on_model(", blocks["my_adapter.py"], "every trace starts with the batch")
        compile(blocks["my_adapter.py"], "my_adapter.py", "exec")

    def test_it_answers_a_scenario_with_a_trace_that_starts_with_the_batch(self) -> None:
        # Without tep: the block's own setup and dialect, through the kit's protocol handler.
        with tempfile.TemporaryDirectory() as tmp:
            written(Path(tmp))
            sys.path[:0] = [str(QUICKSTART)]
            try:
                block = runpy.run_path(str(Path(tmp) / "my_adapter.py"), run_name="quick_start")
            finally:
                sys.path.remove(str(QUICKSTART))
        adapter = Adapter(
            block["setup"], block["MyDialect"](), Implementation("mypipeline", capabilities=("approval",))
        )
        denied = scenario(pre=[{"id": "policy", "decide": {"c1": {"deny": "no"}}}])
        answer = adapter.run(denied)
        self.assertIn("trace", answer, answer)
        header, model, *rest = answer["trace"]
        self.assertEqual((model["node"], model["calls"]), ("model", [{"callId": "c1", "name": "tool"}]))
        pre = next(r for r in rest if r.get("node") == "pre")
        self.assertEqual((pre["outcome"], pre["reason"], pre["listeners"]), ("deny", "no", ["policy"]))
        seqs = [r["event"]["seq"] for r in rest if r["kind"] == "event"]
        self.assertEqual(seqs, list(range(1, len(seqs) + 1)))


@unittest.skipUnless(TEP_BIN, NO_TEP)
class QuickStartRunTest(unittest.TestCase):
    tmp: ClassVar[tempfile.TemporaryDirectory[str]]

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.TemporaryDirectory()
        written(Path(cls.tmp.name))

    @classmethod
    def tearDownClass(cls) -> None:
        cls.tmp.cleanup()

    def tep_run(self, *adapter: str | Path, options: tuple[str, ...] = ()) -> tuple[int, dict[str, Any]]:
        """`tep run --adapter ADAPTER --strict --format json OPTIONS` in the scratch directory."""
        assert TEP_BIN is not None
        command = shlex.join([sys.executable, *(str(a) for a in adapter)])
        argv = [TEP_BIN, "run", "--adapter", command, "--strict", "--format", "json", *options]
        directory = Path(self.tmp.name)
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=300, check=False, cwd=directory, env=environment(directory)
        )
        try:
            report = json.loads(done.stdout)
        except json.JSONDecodeError as error:
            self.fail(f"no JSON report ({error}): {done.stdout}{done.stderr}")
        return done.returncode, report

    def test_the_quick_start_passes_every_scenario_its_capabilities_allow(self) -> None:
        code, report = self.tep_run("my_adapter.py")
        summary = report["summary"]
        self.assertEqual(code, 0, summary)
        self.assertEqual((summary["failed"], summary["errored"], summary["warned"]), (0, 0, 0), summary)
        skipped = [s for s in report["scenarios"] if s["status"] == "skipped"]
        for row in skipped:  # only what the declared capabilities and revision rule out
            self.assertTrue(row["reason"].startswith("N/A: "), row)
        self.assertEqual(summary["passed"] + len(skipped), summary["scenarios"])
        # What the README says this run prints (counts kept by `cargo xtask docs`).
        self.assertEqual((summary["passed"], len(skipped)), readme_counts(), summary)

    def test_a_harness_that_runs_its_programs_itself_passes_code_mode(self) -> None:
        adapter = QUICKSTART / "code_mode_adapter.py"
        code, report = self.tep_run(adapter, options=("--capability", "code-mode"))
        summary = report["summary"]
        self.assertEqual(code, 0, summary)
        self.assertEqual((summary["passed"], summary["failed"], summary["errored"]), (6, 0, 0), summary)

    def test_a_broken_pipeline_is_reported_under_the_invariant_it_breaks(self) -> None:
        # (breakage, scenario): the MUST invariants the report names, and no others: a probe that
        # recorded what it expected instead of what happened would add (or hide) some.
        cases = {
            ("guards-after-a-deny", "guard-allow-cannot-undo-a-deny"): {"guard-deny-binds"},
            ("guards-after-a-deny", "guard-denies-a-forced-allow"): {"guard-deny-binds"},
            ("listeners-reversed", "pre-listeners-run-in-order"): {"expected-outcome"},
            ("listeners-reversed", "post-waterfall-is-an-onion"): {"expected-outcome"},
            ("approval-asked-twice", "ask-allowed-once"): {"approval-once"},
            ("denial-skips-post", "pre-deny-skips-body"): {"denial-reaches-post", "expected-outcome"},
        }
        for (breakage, scenario_id), invariants in cases.items():
            with self.subTest(breakage=breakage, scenario=scenario_id):
                broken = QUICKSTART / "broken.py"
                code, report = self.tep_run(broken, breakage, "my_adapter.py", options=("--scenario", scenario_id))
                self.assertEqual(code, 1, report["summary"])
                [row] = report["scenarios"]
                self.assertEqual((row["id"], row["status"]), (scenario_id, "failed"), row)
                broken_invariants = {v["invariant"] for v in row["violations"] if v["level"] == "MUST"}
                self.assertEqual(broken_invariants, invariants, row["violations"])


if __name__ == "__main__":
    unittest.main()
