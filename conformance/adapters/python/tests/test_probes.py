"""Probes record what happened, never what they expect next (whatever order the pipeline runs
the kit's callables in)."""

from __future__ import annotations

import asyncio
import unittest
from typing import Any

from tep_adapter import GUARD_PROBE, ScriptedError

from .fakes import FakeCall, FakeCtx, FakeDispatch, ok, records, run_of, shape

C1 = FakeCall("c1")


async def waterfall(listeners: list[Any], default: Any, *handed: Any) -> Any:
    async def step(i: int) -> Any:
        return default if i == len(listeners) else await listeners[i](*handed, lambda: step(i + 1))

    return await step(0)


class WaterfallTest(unittest.IsolatedAsyncioTestCase):
    async def test_listeners_run_in_reverse_record_the_decision_the_waterfall_made(self) -> None:
        run = run_of(pre=[{"id": "first", "decide": {"*": "allow"}}, {"id": "later", "decide": {"*": {"deny": "no"}}}])
        reversed_order = list(reversed(run.pre_listeners()))  # the probe is now innermost
        self.assertEqual(await waterfall(reversed_order, ("allow", None), C1), ("deny", "no"))
        (pre,) = records(run, node="pre")
        self.assertEqual((pre["outcome"], pre["reason"], pre["listeners"]), ("deny", "no", ["later"]))

    async def test_a_throw_is_recorded_by_the_outermost_listener_only(self) -> None:
        run = run_of(post=[{"id": "inner", "decide": {"*": {"throw": "post broke"}}}])
        with self.assertRaises(ScriptedError):
            await waterfall(run.post_listeners(), {"outcome": "accept", "contexts": []}, C1, ok())
        (post,) = records(run, node="post")
        self.assertEqual((post["outcome"], post["reason"], post["result"]), ("throw", "post broke", ok()))

    async def test_each_run_of_the_waterfall_is_a_record(self) -> None:
        run = run_of(pre=[{"id": "p"}])
        for _ in range(2):  # a pipeline that runs pre-execute twice: both are facts
            await waterfall(run.pre_listeners(), ("allow", None), C1)
        self.assertEqual([r["listeners"] for r in records(run, node="pre")], [["p"], ["p"]])


class GuardsTest(unittest.IsolatedAsyncioTestCase):
    async def test_guards_consulted_after_a_deny_join_its_stage(self) -> None:
        guards = [{"id": "owner", "decide": {"*": {"deny": "read-only"}}}, {"id": "lenient", "decide": {"*": "allow"}}]
        run = run_of(guards=guards)
        for guard in run.guards():  # a pipeline that goes on after the deny, probe included
            await guard(C1)
        (stage,) = records(run, node="guards")
        self.assertEqual((stage["outcome"], stage["reason"]), ("deny", "read-only"))
        self.assertEqual([v["guard"] for v in stage["verdicts"]], ["owner", "lenient", GUARD_PROBE])
        self.assertEqual(stage["listeners"], ["owner", "lenient", GUARD_PROBE])

    async def test_a_later_record_of_the_call_ends_the_chain(self) -> None:
        run = run_of(guards=[{"id": "owner", "decide": {"*": {"deny": "no"}}}])
        owner, probe = run.guards()
        await owner(C1)
        run.recorder.on_denied(C1, "no")
        await probe(C1)  # consulted again, after the denial: a stage of its own
        first, second = records(run, node="guards")
        self.assertEqual(len(first["verdicts"]), 1)
        self.assertEqual(second["outcome"], "allow")

    async def test_other_calls_records_do_not_end_the_chain(self) -> None:
        run = run_of(guards=[{"id": "owner", "decide": {"c1": {"deny": "no"}}}])
        owner, probe = run.guards()
        await owner(C1)
        run.recorder.on_body_start(FakeCall("c0"))  # an earlier call's body, running meanwhile
        await probe(C1)
        (stage,) = records(run, node="guards")
        self.assertEqual([v["guard"] for v in stage["verdicts"]], ["owner", GUARD_PROBE])


class ApprovalTest(unittest.IsolatedAsyncioTestCase):
    async def test_a_prompt_asked_twice_records_both_answers(self) -> None:
        run = run_of(approval={"answers": {"*": "allowed-once"}})
        prompt = run.approval()
        assert prompt is not None
        await prompt(C1)
        await prompt(C1)
        run.recorder.on_approval_decided("c1", "allowed-once")
        self.assertEqual(shape(run), ["approval@c1", "approval/decided@c1", "approval@c1"])


class DispatchTest(unittest.IsolatedAsyncioTestCase):
    async def test_a_retry_below_the_innermost_probe_records_its_dispatch(self) -> None:
        run = run_of(calls=[{"callId": "c1", "tool": "tool", "body": [{"failUntilAttempt": 2}]}])
        outer, inner = run.wrappers()

        async def body(signal: Any) -> Any:
            try:
                return await run.body(FakeCtx(C1, signal))
            except ScriptedError:
                return {"isError": True, "content": []}

        async def harness_retry(signal: Any) -> Any:  # the harness's own, below the kit's probe
            result = await body(signal)
            return await body(signal) if result["isError"] else result

        await outer(FakeDispatch(C1, asyncio.Event()), lambda signal: inner(FakeDispatch(C1, signal), harness_retry))
        self.assertEqual(
            shape(run),
            ["around@c1", "toolBody@c1", "body-settled@c1", "around@c1", "toolBody@c1", "body-settled@c1"]
            + ["around@c1", "around@c1"],
        )

    async def test_a_stateful_waterfalls_second_dispatch_records_its_return_claiming_nothing(self) -> None:
        # A waterfall keeping one index per run (the original harness's): the retry's second
        # next() reaches the dispatch directly, past the dispatch probe. A wrapper outside the
        # retry then throws: its throw is the waterfall's, never read as the body's.
        body = [{"throw": "the body failed"}]
        run = run_of(
            wrappers=[{"kind": "throw", "message": "the wrapper crashed", "phase": "after"}, {"kind": "retry", "attempts": 2}],
            calls=[{"callId": "c1", "tool": "tool", "body": body}],
        )
        wrappers = run.wrappers()

        async def dispatch(signal: Any) -> Any:
            try:
                return await run.body(FakeCtx(C1, signal))
            except ScriptedError:
                return {"isError": True, "content": [{"type": "text", "text": "Error: the body failed"}]}

        index = 0

        async def next_(signal: Any) -> Any:
            nonlocal index
            if index == len(wrappers):
                return await dispatch(signal)
            index += 1
            return await wrappers[index - 1](FakeDispatch(C1, signal), next_)

        with self.assertRaises(ScriptedError):
            await next_(asyncio.Event())
        self.assertEqual(
            shape(run),
            ["around@c1", "toolBody@c1", "body-settled@c1", "around@c1"]
            + ["around@c1", "toolBody@c1", "body-settled@c1", "around@c1", "around@c1"],
        )
        arounds = records(run, node="around")
        probed, unprobed, end = arounds[1], arounds[3], arounds[4]
        self.assertTrue(probed["result"]["isError"], "the probe saw the normalized result")
        self.assertEqual((unprobed.get("outcome"), unprobed.get("result")), (None, None))
        self.assertEqual((end["outcome"], end["reason"]), ("throw", "the wrapper crashed"))

    async def test_wrappers_run_in_reverse_still_record_one_visit(self) -> None:
        body = [{"failUntilAttempt": 2}]
        run = run_of(
            wrappers=[{"kind": "retry", "attempts": 2}], calls=[{"callId": "c1", "tool": "tool", "body": body}]
        )
        wrappers = list(reversed(run.wrappers()))  # dispatch probe outermost, execute probe innermost

        async def dispatch(signal: Any) -> Any:
            try:
                return await run.body(FakeCtx(C1, signal))
            except ScriptedError:
                return {"isError": True, "content": []}

        async def chain(i: int, handed: Any) -> Any:
            if i == len(wrappers):
                return await dispatch(handed.signal)
            return await wrappers[i](handed, lambda signal: chain(i + 1, FakeDispatch(C1, signal)))

        await chain(0, FakeDispatch(C1, asyncio.Event()))
        labels = shape(run)
        self.assertEqual(labels.count("toolBody@c1"), 2)
        self.assertEqual(labels[-1], "around@c1", "the outermost kit wrapper ends the visit")
        self.assertEqual(labels[0], "around@c1")
        second = labels.index("toolBody@c1", labels.index("toolBody@c1") + 1)
        self.assertEqual(labels[second - 1], "around@c1", "the second body's dispatch is recorded")

    async def test_a_body_outside_tools_execute_records_no_dispatch(self) -> None:
        run = run_of()
        await run.body(FakeCtx(C1))
        self.assertEqual(shape(run), ["toolBody@c1", "body-settled@c1"], "body-inside-execute can see it")


if __name__ == "__main__":
    unittest.main()
