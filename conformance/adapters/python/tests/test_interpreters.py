"""The interpreters: each script kind as a callable, and what each records."""

from __future__ import annotations

import asyncio
import json
import unittest
from typing import Any

from tep_adapter import (
    Cancelled,
    CancelSignal,
    ProgramOutput,
    ScriptedError,
    cancelled_within,
)
from tep_adapter import scenario as sc

from .fakes import (
    FakeCall,
    FakeCtx,
    FakeDispatch,
    FrozenOutcome,
    failed,
    ok,
    records,
    run_of,
    shape,
)

C1 = FakeCall("c1")


async def allow() -> tuple[str, None]:
    return ("allow", None)


class PreExecuteTest(unittest.IsolatedAsyncioTestCase):
    async def test_each_action(self) -> None:
        cases: dict[str, Any] = {
            "allow": ("allow", None),
            '{"deny": "no"}': ("deny", "no"),
            '{"ask": "sure?"}': ("ask", "sure?"),
            '{"rewrite": {"path": "/elsewhere"}}': ("allow", {"path": "/elsewhere"}),
        }
        for raw, expected in cases.items():
            action = raw if raw == "allow" else json.loads(raw)
            run = run_of(pre=[{"id": "p", "decide": {"c1": action}}])
            (listener,) = [run.pre_listener(spec) for spec in run.scenario.pre]
            self.assertEqual(await listener(C1, allow), expected, raw)

    async def test_pass_returns_what_next_decides_and_other_calls_get_the_default(self) -> None:
        run = run_of(pre=[{"id": "p", "decide": {"c2": {"deny": "only c2"}}}])
        listener = run.pre_listener(run.scenario.pre[0])

        async def deny() -> tuple[str, str]:
            return ("deny", "from next")

        self.assertEqual(await listener(C1, deny), ("deny", "from next"))

    async def test_throw_raises_the_message(self) -> None:
        run = run_of(pre=[{"id": "p", "decide": {"*": {"throw": "hook crashed"}}}])
        with self.assertRaisesRegex(ScriptedError, "^hook crashed$"):
            await run.pre_listener(run.scenario.pre[0])(C1, allow)

    async def test_the_probe_records_the_decision_and_who_was_entered(self) -> None:
        run = run_of(pre=[{"id": "first"}, {"id": "second", "decide": {"*": {"deny": "no"}}}, {"id": "never"}])
        probe, *listeners = run.pre_listeners()

        async def chain(i: int) -> Any:
            if i == len(listeners):
                return ("allow", None)
            return await listeners[i](C1, lambda: chain(i + 1))

        self.assertEqual(await probe(C1, lambda: chain(0)), ("deny", "no"))
        (pre,) = records(run, node="pre")
        self.assertEqual((pre["outcome"], pre["reason"], pre["listeners"]), ("deny", "no", ["first", "second"]))

    async def test_the_probe_records_a_throw_and_passes_it_on(self) -> None:
        run = run_of()

        async def crash() -> Any:
            raise RuntimeError("listener broke")

        with self.assertRaises(RuntimeError):
            await run.pre_probe()(C1, crash)
        (pre,) = records(run, node="pre")
        self.assertEqual((pre["outcome"], pre["reason"]), ("throw", "listener broke"))


class ApprovalTest(unittest.IsolatedAsyncioTestCase):
    async def test_no_approval_script_mounts_no_prompt(self) -> None:
        self.assertIsNone(run_of().approval())

    async def test_each_answer(self) -> None:
        answers = {"c1": "allowed-once", "c2": "cancelled", "c3": "unavailable", "c4": {"throw": "crashed"}}
        run = run_of(approval={"answers": answers})
        prompt = run.approval()
        assert prompt is not None
        self.assertEqual(await prompt(FakeCall("c1")), "answer:allowed-once")
        self.assertEqual(await prompt(FakeCall("c2")), "answer:cancelled")
        self.assertEqual(await prompt(FakeCall("c3")), "answer:unavailable")
        self.assertEqual(await prompt(FakeCall("c9")), "answer:rejected")
        with self.assertRaisesRegex(ScriptedError, "crashed"):
            await prompt(FakeCall("c4"))
        outcomes = [(r["call"], r["outcome"]) for r in records(run, node="approval")]
        expected = [("c1", "allowed-once"), ("c2", "cancelled"), ("c3", "unavailable"), ("c9", "rejected")]
        self.assertEqual(outcomes, [*expected, ("c4", "throw")])


class GuardsTest(unittest.IsolatedAsyncioTestCase):
    async def test_verdicts_and_the_guards_record(self) -> None:
        guards = [
            {"id": "quiet"},
            {"id": "lenient", "decide": {"*": "allow"}},
            {"id": "owner", "decide": {"c2": {"deny": "owner says no"}, "c3": {"throw": "db down"}}},
        ]
        run = run_of(guards=guards)
        *scripted, probe = run.guards()
        for call_id in ("c1", "c2", "c3"):
            call = FakeCall(call_id)
            verdicts = []
            try:
                for guard in scripted:
                    verdicts.append(await guard(call))
                    if verdicts[-1] != "abstain" and verdicts[-1] != "allow":
                        break
                else:
                    verdicts.append(await probe(call))
            except ScriptedError as error:
                verdicts.append(f"threw {error}")
            if call_id == "c1":
                self.assertEqual(verdicts, ["abstain", "allow", "abstain", "abstain"])
            elif call_id == "c2":
                self.assertEqual(verdicts, ["abstain", "allow", ("deny", "owner says no")])
            else:
                self.assertEqual(verdicts, ["abstain", "allow", "threw db down"])
        c1, c2, c3 = records(run, node="guards")
        self.assertEqual(c1["outcome"], "allow")
        self.assertEqual([v["verdict"] for v in c1["verdicts"]], ["abstain", "allow", "abstain"])
        self.assertEqual(
            (c2["outcome"], c2["reason"], c2["listeners"]), ("deny", "owner says no", ["quiet", "lenient", "owner"])
        )
        self.assertEqual(
            (c3["outcome"], c3["verdicts"][-1]), ("throw", {"guard": "owner", "verdict": "throw", "reason": "db down"})
        )


class WrappersTest(unittest.IsolatedAsyncioTestCase):
    def dispatcher(self, result: Any = None, *, hang: bool = False, stop_ms: int = 0) -> tuple[list[Any], Any]:
        """A fake innermost dispatch: records each signal it is handed."""
        seen: list[Any] = []

        async def dispatch(signal: Any) -> Any:
            seen.append(signal)
            if hang:
                await signal.wait()
                await asyncio.sleep(stop_ms / 1000)
                seen.append("stopped")
                return failed("tool call was cancelled")
            return result if result is not None else ok()

        return seen, dispatch

    async def test_timeout_cancels_the_body_waits_for_it_and_reports_the_timeout(self) -> None:
        run = run_of(wrappers=[{"kind": "timeout"}])
        seen, dispatch = self.dispatcher(hang=True, stop_ms=20)
        outer = asyncio.Event()
        result = await run.wrappers()[1](FakeDispatch(C1, outer, 5), dispatch)
        self.assertEqual(result, failed("tool call timed out after 5ms"))
        self.assertTrue(seen[0].is_set(), "the body's signal was cancelled")
        self.assertEqual(seen[-1], "stopped", "the wrapper waited for the body to stop")
        self.assertFalse(outer.is_set(), "the caller's signal was left alone")

    async def test_timeout_leaves_a_fast_body_and_a_tool_without_a_timeout_alone(self) -> None:
        run = run_of(wrappers=[{"kind": "timeout"}])
        timeout = run.wrapper(run.scenario.wrappers[0])
        seen, dispatch = self.dispatcher(ok("fast"))
        self.assertEqual(await timeout(FakeDispatch(C1, asyncio.Event(), 10_000), dispatch), ok("fast"))
        self.assertFalse(seen[0].is_set())
        signal = asyncio.Event()
        self.assertEqual(await timeout(FakeDispatch(C1, signal, None), dispatch), ok("fast"))
        self.assertIs(seen[1], signal)

    async def test_timeout_passes_on_the_result_when_the_caller_cancelled(self) -> None:
        run = run_of()
        timeout = run.wrapper(sc.TimeoutWrapper())
        outer = asyncio.Event()
        outer.set()
        _, dispatch = self.dispatcher(hang=True)
        self.assertEqual(await timeout(FakeDispatch(C1, outer, 5), dispatch), failed("tool call was cancelled"))

    async def test_retry_dispatches_again_while_the_result_is_an_error(self) -> None:
        run = run_of()
        results = [failed("1"), failed("2"), ok("third"), ok("never")]

        async def dispatch(signal: Any) -> Any:
            return results.pop(0)

        retry = run.wrapper(sc.RetryWrapper(3, 1))
        self.assertEqual(await retry(FakeDispatch(C1, asyncio.Event()), dispatch), ok("third"))
        self.assertEqual(results, [ok("never")])
        results[:] = [failed("a"), failed("b"), ok("c")]
        self.assertEqual(
            await run.wrapper(sc.RetryWrapper(2))(FakeDispatch(C1, asyncio.Event()), dispatch), failed("b")
        )
        results[:] = [ok("first"), ok("again")]
        self.assertEqual(await retry(FakeDispatch(C1, asyncio.Event()), dispatch), ok("first"))
        self.assertEqual(results, [ok("again")], "a success is not dispatched again")

    async def test_retry_stops_when_cancelled(self) -> None:
        run = run_of()
        signal = asyncio.Event()
        signal.set()
        seen, dispatch = self.dispatcher(failed("x"))
        await run.wrapper(sc.RetryWrapper(5))(FakeDispatch(C1, signal), dispatch)
        self.assertEqual(len(seen), 1)

    async def test_metrics_passes_everything_through_and_counts(self) -> None:
        run = run_of()
        signal = asyncio.Event()
        seen, dispatch = self.dispatcher(ok("x"))
        self.assertEqual(await run.wrapper(sc.MetricsWrapper())(FakeDispatch(C1, signal), dispatch), ok("x"))
        self.assertIs(seen[0], signal)
        self.assertEqual(run.metrics["c1"], 1)

    async def test_context_adds_a_wrapper_context_to_the_listed_calls(self) -> None:
        run = run_of()
        _, dispatch = self.dispatcher(ok())
        context = run.wrapper(sc.ContextWrapper("note", ("c1",)))
        added = await context(FakeDispatch(C1, asyncio.Event()), dispatch)
        self.assertEqual(added["additionalContexts"], [{"origin": "wrapper", "text": "note"}])
        self.assertEqual(await context(FakeDispatch(FakeCall("c2"), asyncio.Event()), dispatch), ok())

    async def test_throw_before_skips_the_dispatch_and_after_runs_it(self) -> None:
        run = run_of()
        seen, dispatch = self.dispatcher()
        with self.assertRaisesRegex(ScriptedError, "sandbox unavailable"):
            await run.wrapper(sc.ThrowWrapper("sandbox unavailable", "before"))(FakeDispatch(C1, None), dispatch)
        self.assertEqual(seen, [])
        with self.assertRaisesRegex(ScriptedError, "sink failed"):
            await run.wrapper(sc.ThrowWrapper("sink failed", "after"))(FakeDispatch(C1, None), dispatch)
        self.assertEqual(len(seen), 1)
        only_c2 = run.wrapper(sc.ThrowWrapper("x", "before", ("c2",)))
        self.assertEqual(await only_c2(FakeDispatch(C1, None), dispatch), ok())

    async def test_the_probes_record_the_three_around_moments(self) -> None:
        run = run_of()
        outer, *_, inner = run.wrappers()

        async def body(signal: Any) -> Any:
            run.recorder.on_body_start(C1)
            return ok("body")

        async def chain(signal: Any) -> Any:
            return await inner(FakeDispatch(C1, signal), body)

        await outer(FakeDispatch(C1, asyncio.Event()), chain)
        self.assertEqual(shape(run), ["around@c1", "toolBody@c1", "around@c1", "around@c1"])
        self.assertEqual(records(run, node="around")[1]["result"], ok("body"))

        async def broken(signal: Any) -> Any:
            raise ScriptedError("wrapper threw")

        with self.assertRaises(ScriptedError):
            await outer(FakeDispatch(C1, asyncio.Event()), broken)
        self.assertEqual((records(run)[-1]["outcome"], records(run)[-1]["reason"]), ("throw", "wrapper threw"))


class BodyTest(unittest.IsolatedAsyncioTestCase):
    async def run_body(self, steps: list[Any], ctx: FakeCtx | None = None, **fields: Any) -> tuple[Any, Any, FakeCtx]:
        run = run_of(calls=[{"callId": "c1", "tool": "tool", "body": steps}], **fields)
        ctx = ctx or FakeCtx(C1)
        try:
            return run, await run.body(ctx), ctx
        except Exception as error:
            return run, error, ctx

    async def test_returns_ok_by_default_and_records_start_and_settlement(self) -> None:
        run, value, _ = await self.run_body([])
        self.assertEqual(value, "ok")
        self.assertEqual(shape(run), ["toolBody@c1", "body-settled@c1"])

    async def test_return_and_throw(self) -> None:
        _, value, _ = await self.run_body([{"return": {"size": 1}}, {"throw": "unreached"}])
        self.assertEqual(value, {"size": 1})
        run, error, _ = await self.run_body([{"throw": "disk full"}, {"return": "unreached"}])
        self.assertIsInstance(error, ScriptedError)
        self.assertEqual(str(error), "disk full")
        self.assertEqual(shape(run)[-1], "body-settled@c1", "settled in finally, even when it throws")

    async def test_the_side_effects_go_through_the_dialect_in_order(self) -> None:
        steps = [
            {"read": "a"},
            {"write": {"path": "b", "content": "x"}},
            {"edit": {"path": "b", "old": "x", "new": "y"}},
            {"externalWrite": {"path": "a", "content": "z"}},
            {"todo": [{"content": "t", "status": "in_progress"}]},
            {"hook": {"point": "P", "handlerId": "h", "decision": "pass"}},
            {"deferContext": "later"},
        ]
        _, value, ctx = await self.run_body(steps)
        self.assertEqual(value, "ok")
        self.assertEqual(
            ctx.done,
            [
                ("read", "a"),
                ("write", "b", "x"),
                ("edit", "b", "x", "y"),
                ("externalWrite", "a", "z"),
                ("todo", (sc.TodoItem("t", "in_progress"),)),
                ("hook", "P", "h", "pass"),
                ("defer", "later"),
            ],
        )

    async def test_sleep_ends_early_when_cancelled(self) -> None:
        ctx = FakeCtx(C1)
        ctx.signal.set()
        run, error, _ = await self.run_body([{"sleep": 60_000}, {"return": "unreached"}], ctx)
        self.assertIsInstance(error, Cancelled)
        _, value, _ = await self.run_body([{"sleep": 1}, {"return": "slept"}])
        self.assertEqual(value, "slept")

    async def test_hang_and_slow_stop_wait_for_the_signal(self) -> None:
        for steps, extra in ([["hang"], 0], [[{"slowStop": 30}], 30]):
            run = run_of(calls=[{"callId": "c1", "tool": "tool", "body": steps}])
            ctx = FakeCtx(C1)
            task = asyncio.ensure_future(run.body(ctx))
            await asyncio.sleep(0.01)
            self.assertFalse(task.done(), "it waits for its signal")
            ctx.signal.set()
            if extra:
                await asyncio.sleep(0)
                self.assertFalse(task.done(), "slowStop keeps running after the signal")
            with self.assertRaises(Cancelled):
                await task
            self.assertEqual(shape(run)[-1], "body-settled@c1")

    async def test_fail_until_attempt_counts_dispatches_per_call(self) -> None:
        run = run_of(calls=[{"callId": "c1", "tool": "tool", "body": [{"failUntilAttempt": 3}, {"return": "lucky"}]}])
        outcomes = []
        for _ in range(3):
            try:
                outcomes.append(await run.body(FakeCtx(C1)))
            except ScriptedError as error:
                outcomes.append(str(error))
        self.assertEqual(outcomes, ["attempt 1 fails", "attempt 2 fails", "lucky"])
        self.assertEqual(run.attempts["c1"], 3)

    async def test_an_abandoned_body_never_records_its_settlement(self) -> None:
        run = run_of(calls=[{"callId": "c1", "tool": "tool", "body": ["hang"]}])
        task = asyncio.ensure_future(run.body(FakeCtx(C1)))
        await asyncio.sleep(0)
        task.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await task
        self.assertEqual(shape(run), ["toolBody@c1"])

    async def test_a_sub_calls_body_is_its_binding_calls(self) -> None:
        program = [{"call": {"tool": "tool", "body": [{"return": "from the sub-call"}]}}]
        run = run_of(calls=[{"callId": "c1", "tool": "run_code", "program": program}])
        sub = FakeCall("c1:code:1", parent=C1)
        self.assertEqual(await run.body(FakeCtx(sub)), "from the sub-call")


class FinalizeTest(unittest.IsolatedAsyncioTestCase):
    def finalizer(self, action: Any) -> Any:
        run = run_of(tools=[{"name": "tool", "finalize": action}])
        return run, run.finalizer("tool")

    async def test_a_tool_without_finalize_content_has_none(self) -> None:
        self.assertIsNone(run_of().finalizer("tool"))
        self.assertIsNone(run_of().finalizer("not-a-tool"))

    async def test_each_action_and_its_record(self) -> None:
        candidate = {"isError": False, "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
        run, keep = self.finalizer("keep")
        self.assertIsNone(keep(C1, candidate))
        self.assertEqual(records(run, node="finalize")[0]["result"], candidate)
        _, prefix = self.finalizer({"prefix": "> "})
        self.assertEqual(prefix(C1, candidate), ("> a", "> b"))
        _, replace = self.finalizer({"replace": "new"})
        self.assertEqual(replace(C1, candidate), ("new",))
        run, throw = self.finalizer({"throw": "finalizer broke"})
        with self.assertRaisesRegex(ScriptedError, "finalizer broke"):
            throw(C1, candidate)
        (stage,) = records(run, node="finalize")
        self.assertEqual((stage["outcome"], stage["reason"]), ("throw", "finalizer broke"))


class PostExecuteTest(unittest.IsolatedAsyncioTestCase):
    async def decide(self, action: Any) -> Any:
        run = run_of(post=[{"id": "p", "decide": {"*": action}}])
        listener = run.post_listener(run.scenario.post[0])

        async def default() -> dict[str, Any]:
            return {"outcome": "accept", "content": None, "value": None, "contexts": ["inner"]}

        return await listener(C1, ok(), default)

    async def test_each_action(self) -> None:
        self.assertEqual((await self.decide("pass"))["contexts"], ["inner"])
        self.assertEqual((await self.decide({"addContext": "outer"}))["contexts"], ["inner", "outer"])
        accepted = await self.decide({"accept": {"content": "[redacted]", "context": "why"}})
        self.assertEqual(accepted, {"outcome": "accept", "content": "[redacted]", "value": None, "contexts": ["why"]})
        self.assertEqual((await self.decide({"accept": {"value": {"size": 2}}}))["value"], {"size": 2})
        blocked = await self.decide({"block": {"feedback": "not allowed"}})
        self.assertEqual(blocked, {"outcome": "block", "feedback": "not allowed", "contexts": []})
        with self.assertRaisesRegex(ScriptedError, "post hook crashed"):
            await self.decide({"throw": "post hook crashed"})

    async def test_the_probe_records_the_result_it_was_handed(self) -> None:
        run = run_of(post=[{"id": "audit"}])
        probe, listener = run.post_listeners()

        async def default() -> dict[str, Any]:
            return {"outcome": "block", "feedback": "f", "contexts": []}

        await probe(C1, failed("denied"), lambda: listener(C1, failed("denied"), default))
        (post,) = records(run, node="post")
        self.assertEqual((post["outcome"], post["listeners"], post["result"]), ("block", ["audit"], failed("denied")))


class ObserversTest(unittest.IsolatedAsyncioTestCase):
    async def test_the_probe_records_the_announced_outcome(self) -> None:
        run = run_of(observers=[{"id": "o"}])
        probe, _ = run.observers()
        self.assertIsNone(probe(C1, ok("final")))
        self.assertEqual(records(run, node="final")[0]["result"], ok("final"))

    async def test_async_work_settles_later_and_a_mutation_is_only_tried(self) -> None:
        run = run_of(observers=[{"id": "telemetry", "asyncMs": 5, "mutate": "rewritten"}])
        outcome = FrozenOutcome(("hi",))
        work = run.observers()[1](C1, outcome)
        self.assertIsNotNone(work)
        self.assertEqual(outcome.content, ("hi",), "a frozen outcome stays as it was")
        self.assertEqual(records(run, kind="mark"), [], "the observer returned before its work ended")
        await run.settle()
        (mark,) = records(run, kind="mark")
        self.assertEqual((mark["mark"], mark["by"], mark["afterMs"]), ("observer-settled", "telemetry", 5))

    async def test_a_mutable_outcome_is_mutated(self) -> None:
        class Loose:
            content: tuple[str, ...] = ("hi",)

        run = run_of(observers=[{"id": "meddler", "mutate": "rewritten"}])
        outcome = Loose()
        run.observers()[1](C1, outcome)
        self.assertEqual(outcome.content, ("rewritten",))
        await run.settle()


class Rejected(Exception):
    def __init__(self, tool_name: str, message: str) -> None:
        super().__init__(f"{tool_name}: {message}")
        self.tool_name = tool_name
        self.message = message


class FakeBindings:
    """Resolves a tool called "ok*", rejects anything else; records what was called and when."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.in_flight = 0
        self.most_in_flight = 0

    async def call(self, tool: str, arguments: Any) -> Any:
        self.calls.append((tool, arguments))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(0)
        self.in_flight -= 1
        if tool == "run_code":
            raise Rejected(tool, "run_code is not available to programs")
        if not tool.startswith("ok"):
            raise Rejected(tool, f"{tool} is denied")
        return {"tool": tool} if tool == "ok-json" else f"{tool} result"


class ProgramTest(unittest.IsolatedAsyncioTestCase):
    async def run_program(self, program: list[Any]) -> tuple[Any, Any, FakeBindings]:
        run = run_of(calls=[{"callId": "c1", "tool": "run_code", "program": program}])
        bindings = FakeBindings()
        try:
            return run, await run.program(C1, bindings), bindings
        except Exception as error:
            return run, error, bindings

    async def test_calls_logs_and_a_return(self) -> None:
        program = [
            {"call": {"tool": "ok", "arguments": {"a": 1}}},
            {"call": {"tool": "ok-json"}},
            {"call": {"tool": "rm"}},
            {"log": "done"},
            {"return": {"n": 1}},
            {"log": "unreached"},
        ]
        run, output, bindings = await self.run_program(program)
        logs = ("ok -> ok result", 'ok-json -> {"tool":"ok-json"}', "rm rejected: rm: rm is denied", "done")
        self.assertEqual(output, ProgramOutput(logs, {"n": 1}, True))
        self.assertEqual(output.text(), "\n".join(logs) + '\n{\n  "n": 1\n}')
        self.assertEqual(bindings.calls[0], ("ok", {"a": 1}))
        marks = [(r["call"], r["mark"]) for r in records(run, kind="mark")]
        expected = [("c1:code:1", "binding-resolved"), ("c1:code:2", "binding-resolved")]
        self.assertEqual(marks, [*expected, ("c1:code:3", "binding-rejected"), ("c1", "body-settled")])
        self.assertEqual(records(run, kind="mark")[2]["rejection"], {"toolName": "rm", "message": "rm is denied"})
        self.assertEqual(records(run)[0]["node"], "toolBody")
        self.assertEqual(records(run)[-1]["by"], "program")

    async def test_a_group_is_issued_at_once_and_settles_whole_before_failing(self) -> None:
        program = [{"all": [{"tool": "ok-a"}, {"tool": "rm", "onReject": "fail"}, {"tool": "ok-b"}]}, {"log": "x"}]
        run, error, bindings = await self.run_program(program)
        self.assertEqual(str(error), "rm: rm is denied")
        self.assertEqual(bindings.most_in_flight, 3, "issued together (the pipeline serializes them)")
        marks = [r["call"] for r in records(run, kind="mark")]
        self.assertEqual(marks, ["c1:code:1", "c1:code:2", "c1:code:3", "c1"])

    async def test_call_run_code_is_a_rejection_without_a_sub_call(self) -> None:
        run, output, _ = await self.run_program(["callRunCode", {"call": {"tool": "ok"}}])
        self.assertEqual(
            output.logs, ("run_code rejected: run_code: run_code is not available to programs", "ok -> ok result")
        )
        self.assertEqual([r["call"] for r in records(run, kind="mark")], ["c1:code:1", "c1"])

    async def test_throw_and_no_output(self) -> None:
        run, error, _ = await self.run_program([{"log": "before"}, {"throw": "program failed"}])
        self.assertEqual(str(error), "program failed")
        self.assertEqual(records(run)[-1]["mark"], "body-settled")
        _, output, _ = await self.run_program([])
        self.assertEqual(output.text(), "(run_code completed with no output)")

    async def test_a_binding_error_that_is_no_rejection_fails_the_program(self) -> None:
        run = run_of(calls=[{"callId": "c1", "tool": "run_code", "program": [{"call": {"tool": "x"}}]}])

        class Broken:
            async def call(self, tool: str, arguments: Any) -> Any:
                raise KeyError("not a rejection")

        with self.assertRaises(KeyError):
            await run.program(C1, Broken())


class CancelSignalTest(unittest.IsolatedAsyncioTestCase):
    async def test_a_child_follows_its_parent_never_the_reverse(self) -> None:
        parent = asyncio.Event()
        child = CancelSignal(parent)
        self.assertFalse(child.is_set())
        child.set()
        self.assertTrue(child.is_set())
        self.assertFalse(parent.is_set())
        other = CancelSignal(parent)
        waiting = asyncio.ensure_future(other.wait())
        await asyncio.sleep(0)
        parent.set()
        self.assertTrue(await waiting)
        self.assertTrue(other.is_set())

    async def test_cancelled_within(self) -> None:
        signal = CancelSignal()
        self.assertFalse(await cancelled_within(signal, 1))
        asyncio.get_running_loop().call_soon(signal.set)
        self.assertTrue(await cancelled_within(signal, 60_000))


if __name__ == "__main__":
    unittest.main()
