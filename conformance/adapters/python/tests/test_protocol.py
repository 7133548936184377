"""The protocol loop: handshake, seq, the four answers, and stdout discipline."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path
from typing import Any

from tep_adapter import Adapter, Implementation, Run, Skip, run_locally

from .fakes import FakeCall, FakeDialect, failed, ok, scenario

KIT = Path(__file__).resolve().parents[1]

IMPLEMENTATION = Implementation(
    "fake-harness", version="1.2.3", capabilities=("approval", "ui"), specs=("rev2",), observation="hooks"
)


async def records_one_call(run: Run) -> None:
    """A 'pipeline' that logs the call and its result."""

    async def batch() -> None:
        run.recorder.on_model([("c1", "tool")])
        run.recorder.on_tool_call("c1", "tool", run.scenario.calls[0].raw_arguments)
        run.recorder.on_tools_result(FakeCall("c1"), ok())
        run.recorder.on_tool_result("c1", ok())

    await run.batch(batch())


def adapter(setup: Any = records_one_call) -> Adapter:
    return Adapter(setup, FakeDialect(), IMPLEMENTATION)


class HandshakeTest(unittest.TestCase):
    def test_ready_says_who_and_what(self) -> None:
        ready = adapter().handle({"cmd": "start", "protocol": 3})
        self.assertEqual(
            ready,
            {
                "ready": True,
                "protocol": 3,
                "implementation": {"name": "fake-harness", "language": "Python", "version": "1.2.3"},
                "capabilities": ["approval", "ui"],
                "specs": ["rev2"],
                "observation": "hooks",
            },
        )

    def test_stop_ends_the_loop(self) -> None:
        self.assertIsNone(adapter().handle({"cmd": "stop"}))


class RunTest(unittest.TestCase):
    def test_a_trace_echoes_seq_and_starts_with_a_header(self) -> None:
        answer = adapter().handle({"cmd": "run", "seq": 7, "spec": "rev2", "scenario": scenario()})
        assert answer is not None
        self.assertEqual(answer["seq"], 7)
        header, model, call, final, result = answer["trace"]
        self.assertEqual(
            header,
            {
                "kind": "header",
                "spec": "rev2",
                "implementation": "fake-harness",
                "capabilities": ["approval", "ui"],
                "observation": "hooks",
            },
        )
        self.assertEqual(model, {"kind": "stage", "node": "model", "calls": [{"callId": "c1", "name": "tool"}]})
        self.assertEqual(call["event"]["data"]["arguments"], '{"path":"a"}')
        self.assertEqual(result["event"]["sourceEventSeqs"], [call["event"]["seq"]])

    def test_skip(self) -> None:
        async def cannot(run: Run) -> None:
            raise Skip("this harness has no tools/execute waterfall: wrappers cannot be installed")

        answer = adapter(cannot).run(scenario())
        self.assertEqual(
            answer, {"skipped": {"reason": "this harness has no tools/execute waterfall: wrappers cannot be installed"}}
        )

    def test_a_skip_the_pipeline_catches_is_still_skipped(self) -> None:
        # A conformant pipeline's catch-all turns every throw of a body into an error result; the
        # skip the adapter asked for from inside that body must survive it.
        reason = "this harness cannot defer a context"

        async def catches_everything(run: Run) -> None:
            def body() -> None:
                raise Skip(reason)

            async def batch() -> None:
                run.recorder.on_model([("c1", "tool")])
                run.recorder.on_tool_call("c1", "tool", run.scenario.calls[0].raw_arguments)
                try:
                    await asyncio.create_task(asyncio.to_thread(body))  # in another task and thread
                except Exception:  # the pipeline's catch-all
                    run.recorder.on_tool_result("c1", failed("Error: cannot run"))

            await run.batch(batch())

        self.assertEqual(adapter(catches_everything).run(scenario()), {"skipped": {"reason": reason}})

    def test_a_skip_made_outside_any_run_requests_nothing(self) -> None:
        Skip("made between scenarios")
        self.assertIn("trace", adapter().run(scenario()))

    def test_a_revision_the_adapter_does_not_implement_is_skipped(self) -> None:
        self.assertIn("skipped", adapter().run(scenario(), "rev1"))

    def test_an_exception_escaping_the_batch_is_escaped_with_the_trace_so_far(self) -> None:
        async def escapes(run: Run) -> None:
            async def batch() -> None:
                run.recorder.on_tool_call("c1", "tool", "{}")
                raise TypeError("x is undefined")

            await run.batch(batch())

        answer = adapter(escapes).run(scenario())
        self.assertEqual(answer["escaped"]["message"], "TypeError: x is undefined")
        self.assertEqual([r["kind"] for r in answer["escaped"]["trace"]], ["header", "event"])

    def test_an_adapter_failure_outside_the_batch_is_errored(self) -> None:
        async def boots_badly(run: Run) -> None:
            raise RuntimeError("the harness failed to boot")

        answer = adapter(boots_badly).run(scenario())
        self.assertEqual(answer["errored"]["message"], "RuntimeError: the harness failed to boot")
        self.assertIn("Traceback", answer["errored"]["context"])

    def test_a_scenario_the_kit_cannot_read_is_errored(self) -> None:
        answer = adapter().run(scenario(pre=[{"id": "p", "decide": {"*": "teleport"}}]))
        self.assertIn("cannot decode the scenario", answer["errored"]["message"])

    def test_each_run_gets_a_fresh_run_and_event_loop(self) -> None:
        seen: list[Any] = []

        async def remember(run: Run) -> None:
            import asyncio

            seen.append((run, asyncio.get_running_loop()))

        one = adapter(remember)
        one.run(scenario())
        one.run(scenario())
        self.assertIsNot(seen[0][0], seen[1][0])
        self.assertIsNot(seen[0][1], seen[1][1])


class LoopTest(unittest.TestCase):
    def test_one_answer_per_request_and_nothing_else(self) -> None:
        requests = [
            json.dumps({"cmd": "start", "protocol": 3}),
            "",
            "this is not json",
            json.dumps({"cmd": "run", "seq": 1, "spec": "rev2", "scenario": scenario()}),
            json.dumps({"cmd": "run", "seq": 2, "spec": "rev2", "scenario": scenario()}),
            json.dumps({"cmd": "stop"}),
            json.dumps({"cmd": "run", "seq": 3, "spec": "rev2", "scenario": scenario()}),
        ]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err):
            adapter().serve([line + "\n" for line in requests], out)
        self.assertIn("ignored a request: JSONDecodeError", err.getvalue())
        answers = [json.loads(line) for line in out.getvalue().splitlines()]
        self.assertTrue(answers[0]["ready"])
        self.assertEqual([a.get("seq") for a in answers[1:]], [1, 2])

    def test_stdout_carries_only_protocol_even_when_the_harness_writes_to_it(self) -> None:
        script = textwrap.dedent(
            f"""
            import os, sys
            sys.path[:0] = [{str(KIT)!r}]
            from tep_adapter import serve
            from tests.fakes import FakeDialect
            from tests.test_protocol import IMPLEMENTATION, records_one_call

            async def noisy(run):
                print("a stray print from the harness")
                os.write(1, b"raw bytes on fd 1, as a child process or a C library would\\n")
                await records_one_call(run)

            raise SystemExit(serve(noisy, FakeDialect(), IMPLEMENTATION, []))
            """
        )
        requests = [
            {"cmd": "start", "protocol": 3},
            {"cmd": "run", "seq": 1, "spec": "rev2", "scenario": scenario()},
            {"cmd": "stop"},
        ]
        done = subprocess.run(
            [sys.executable, "-c", script],
            input="".join(json.dumps(r) + "\n" for r in requests),
            capture_output=True,
            text=True,
            timeout=60,
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        answers = [json.loads(line) for line in done.stdout.splitlines()]
        self.assertEqual([a.get("ready", a.get("seq")) for a in answers], [True, 1])
        self.assertIn("trace", answers[1])
        self.assertIn("a stray print from the harness", done.stderr)
        self.assertIn("raw bytes on fd 1", done.stderr)


class LocalRunTest(unittest.TestCase):
    def test_prints_the_trace_and_says_when_it_cannot_check_it(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "scenario.json"
            path.write_text(json.dumps(scenario()), encoding="utf-8")
            out = io.StringIO()
            status = run_locally(adapter(), str(path), "rev2", None, out)
        lines = out.getvalue().splitlines()
        self.assertEqual(status, 0)
        self.assertEqual(json.loads(lines[0])["kind"], "header")
        self.assertIn("no tep binary found", lines[-1])


if __name__ == "__main__":
    unittest.main()
