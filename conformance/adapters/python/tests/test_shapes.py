"""Shapes of real harnesses: synchronous hooks, their own `next`, signals, contexts, results,
content-only finalizers, Code Mode runners that number their own sub-calls, their own event
numbering; and the answers the kit gives instead of a trace when the glue is wrong."""

from __future__ import annotations

import asyncio
import gc
import threading
import unittest
from collections.abc import Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from tep_adapter import (
    Adapter,
    BodyCancelledError,
    CancelSignal,
    Dialect,
    GlueError,
    Implementation,
    Run,
    ScriptedError,
    decode_scenario,
    texts_of,
)
from tep_adapter import scenario as sc

from .fakes import FakeCall, FakeCtx, FakeDialect, FakeDispatch, failed, ok, records, run_of, scenario, shape

C1 = FakeCall("c1")


def chain(listeners: list[Any], default: Any, *handed: Any) -> Any:
    """A synchronous waterfall: each listener gets next() for the rest."""

    def step(i: int) -> Any:
        return default if i == len(listeners) else listeners[i](*handed, lambda: step(i + 1))

    return step(0)


class SynchronousHooksTest(unittest.TestCase):
    def test_synchronous_listeners_guards_and_prompt(self) -> None:
        run = run_of(
            pre=[{"id": "asker", "decide": {"c1": {"ask": "sure?"}}}],
            approval={"answers": {"c1": "allowed-once"}},
            guards=[{"id": "quiet"}, {"id": "owner", "decide": {"c2": {"deny": "read-only"}}}],
            post=[{"id": "note", "decide": {"*": {"addContext": "seen"}}}],
        )
        decision = chain(run.pre_listeners(sync=True), ("allow", None), C1)
        self.assertEqual(decision, ("ask", "sure?"))
        prompt = run.approval(sync=True)
        assert prompt is not None
        self.assertEqual(prompt(C1), "answer:allowed-once")
        self.assertEqual([guard(C1) for guard in run.guards(sync=True)], ["abstain", "abstain", "abstain"])
        accepted: dict[str, Any] = {"outcome": "accept", "content": None, "value": None, "contexts": []}
        self.assertEqual(chain(run.post_listeners(sync=True), accepted, C1, ok())["contexts"], ["seen"])
        self.assertEqual(
            [r.get("node") for r in records(run)], ["pre", "approval", "guards", "post"], "every stage recorded"
        )
        self.assertEqual(run.problems, [])

    def test_a_synchronous_listener_handed_an_asynchronous_next_says_what_to_mount(self) -> None:
        run = run_of(pre=[{"id": "p"}])

        async def later() -> Any:
            return ("allow", None)

        probe, listener = run.pre_listeners(sync=True)
        with self.assertRaises(TypeError):
            probe(C1, lambda: listener(C1, later))
        self.assertIn("mount run.pre_listeners() instead", run.problems[0])


class AsynchronousHooksTest(unittest.IsolatedAsyncioTestCase):
    async def test_asynchronous_listeners_take_a_next_that_is_not_awaitable(self) -> None:
        run = run_of(pre=[{"id": "p"}])
        probe, listener = run.pre_listeners()
        self.assertEqual(await probe(C1, lambda: listener(C1, lambda: ("deny", "plain"))), ("deny", "plain"))
        self.assertEqual(records(run, node="pre")[0]["outcome"], "deny")


class NextTest(unittest.IsolatedAsyncioTestCase):
    async def test_a_next_that_takes_the_call_is_called_through_the_dialect(self) -> None:
        class TakesTheCall(FakeDialect):
            def call_next(self, next: Callable[..., Any], *handed: Any) -> Any:
                return next(*handed)

        run = Run(decode_scenario(scenario(post=[{"id": "p"}])), TakesTheCall())
        probe, listener = run.post_listeners()
        seen: list[Any] = []

        async def default(call: Any, result: Any) -> Any:
            seen.append((call, result))
            return {"outcome": "accept", "contexts": []}

        def next_with_the_call(call: Any, result: Any) -> Any:
            return listener(call, result, default)  # type: ignore[arg-type]

        await probe(C1, ok(), next_with_the_call)  # type: ignore[arg-type]
        self.assertEqual(seen, [(C1, ok())])

    async def test_without_it_the_kit_says_which_method_to_override(self) -> None:
        run = run_of(pre=[{"id": "p"}])

        async def next_with_the_call(call: Any) -> Any:
            return ("allow", None)

        with self.assertRaises(GlueError):
            await run.pre_listener(run.scenario.pre[0])(C1, next_with_the_call)  # type: ignore[arg-type]
        self.assertIn("override Dialect.call_next", run.problems[0])

    async def test_a_wrapper_next_of_another_shape_is_called_through_the_dialect(self) -> None:
        class HandedNext(FakeDialect):
            def execute_next(self, next: Callable[..., Any], handed: Any, signal: Any) -> Any:
                return next(FakeDispatch(handed.call, signal, handed.timeout_ms))

        run = Run(decode_scenario(scenario(wrappers=[{"kind": "metrics"}])), HandedNext())
        got: list[Any] = []

        async def rest(handed: FakeDispatch) -> Any:
            got.append(handed)
            return ok()

        outer, metrics, inner = run.wrappers()
        signal = asyncio.Event()
        await outer(FakeDispatch(C1, signal), lambda h: metrics(h, lambda h2: inner(h2, rest)))
        self.assertIsInstance(got[0], FakeDispatch)
        self.assertIs(got[0].signal, signal)
        self.assertEqual(run.metrics["c1"], 1)


class HarnessSignal:
    """A signal of a harness's own type: an `aborted` flag, no asyncio in sight."""

    def __init__(self, parent: HarnessSignal | None = None) -> None:
        self._aborted = False
        self.parent = parent

    @property
    def aborted(self) -> bool:
        return self._aborted or (self.parent is not None and self.parent.aborted)

    def abort(self) -> None:
        self._aborted = True


class SignalsTest(unittest.IsolatedAsyncioTestCase):
    async def test_the_timeout_hands_next_a_signal_of_the_harnesss_own_type(self) -> None:
        class OwnSignals(FakeDialect):
            def child_signal(self, parent: Any) -> tuple[Any, Callable[[], None]]:
                child = HarnessSignal(parent)
                return child, child.abort

        run = Run(decode_scenario(scenario(calls=[{"callId": "c1", "tool": "tool", "body": ["hang"]}])), OwnSignals())
        timeout = run.wrapper(sc.TimeoutWrapper())
        handed: list[Any] = []

        async def dispatch(signal: Any) -> Any:
            handed.append(signal)
            try:
                return await run.body(FakeCtx(C1, signal))
            except Exception as error:
                return failed(str(error))

        outer = HarnessSignal()
        result = await timeout(FakeDispatch(C1, outer, 10), dispatch)
        self.assertEqual(result, failed("tool call timed out after 10ms"))
        self.assertIs(type(handed[0]), HarnessSignal, "never a kit signal")
        self.assertTrue(handed[0].aborted)
        self.assertFalse(outer.aborted)
        self.assertIn("body-settled@c1", shape(run), "the body polled its signal and stopped")

    async def test_a_threading_event_is_polled_not_blocked_on(self) -> None:
        run = run_of(calls=[{"callId": "c1", "tool": "tool", "body": [{"sleep": 60_000}]}])
        signal = threading.Event()
        task = asyncio.ensure_future(run.body(FakeCtx(C1, signal)))
        await asyncio.sleep(0.01)
        signal.set()
        with self.assertRaises(BodyCancelledError):
            await asyncio.wait_for(task, 1)

    async def test_the_default_child_signal_follows_its_parent(self) -> None:
        parent = asyncio.Event()
        child, cancel = Dialect().child_signal(parent)
        self.assertIsInstance(child, CancelSignal)
        parent.set()
        self.assertTrue(Dialect().is_cancelled(child))


@dataclass(frozen=True)
class Message:
    """A harness's own context object."""

    origin: str
    text: str


class ContextsAndResultsTest(unittest.IsolatedAsyncioTestCase):
    async def test_contexts_are_built_by_the_dialect(self) -> None:
        built: list[Any] = []

        class OwnMessages(FakeDialect):
            def context(self, text: str, origin: Any) -> Message:
                return Message(origin, text)

            def with_wrapper_context(self, result: Any, text: Any) -> Any:
                built.append(text)
                return result

            def add_post_context(self, decision: Any, text: Any) -> Any:
                built.append(text)
                return decision

            def defer_context(self, ctx: Any, text: Any) -> None:
                built.append(text)

        raw = scenario(
            calls=[{"callId": "c1", "tool": "tool", "body": [{"deferContext": "later"}]}],
            wrappers=[{"kind": "context", "text": "wrapped"}],
            post=[{"id": "p", "decide": {"*": {"addContext": "posted"}}}],
        )
        run = Run(decode_scenario(raw), OwnMessages())
        await run.body(FakeCtx(C1))

        async def dispatch(signal: Any) -> Any:
            return ok()

        await run.wrapper(run.scenario.wrappers[0])(FakeDispatch(C1, asyncio.Event()), dispatch)

        async def accept() -> Any:
            return {"outcome": "accept", "contexts": []}

        await run.post_listener(run.scenario.post[0])(C1, ok(), accept)
        self.assertEqual(built, [Message("tool", "later"), Message("wrapper", "wrapped"), Message("post", "posted")])

    async def test_the_body_returns_what_the_dialect_builds_from_the_value(self) -> None:
        class OwnResults(FakeDialect):
            def body_result(self, value: Any, call: Any) -> Any:
                return ("result-of", call.call_id, value)

        raw = scenario(calls=[{"callId": "c1", "tool": "tool", "body": [{"return": {"n": 1}}]}])
        run = Run(decode_scenario(raw), OwnResults())
        self.assertEqual(await run.body(FakeCtx(C1)), ("result-of", "c1", {"n": 1}))
        self.assertEqual(await run_of().body(FakeCtx(C1)), "ok", "by default, the JSON value itself")

    async def test_the_decision_hooks_are_handed_the_call_and_the_result(self) -> None:
        seen: list[Any] = []

        class Named(FakeDialect):
            def pre_decision_for(self, call: Any, action: Any) -> Any:
                seen.append(("pre", call, action))
                return ("deny", call.call_id)

            def post_decision_for(self, call: Any, result: Any, action: Any) -> Any:
                seen.append(("post", call, result, action))
                return {"outcome": "block", "contexts": []}

        raw = scenario(
            pre=[{"id": "p", "decide": {"*": {"deny": "no"}}}],
            post=[{"id": "q", "decide": {"*": {"block": {"feedback": "f"}}}}],
        )
        run = Run(decode_scenario(raw), Named())
        self.assertEqual(await run.pre_listener(run.scenario.pre[0])(C1, lambda: None), ("deny", "c1"))
        await run.post_listener(run.scenario.post[0])(C1, failed("x"), lambda: None)
        self.assertEqual(seen, [("pre", C1, sc.Deny("no")), ("post", C1, failed("x"), sc.Block("f"))])

    def test_results_go_through_the_dialect_even_when_they_look_like_records(self) -> None:
        class Wrapped(FakeDialect):
            def result(self, result: Any) -> Any:
                # The harness's own results are frozen mappings whose content is plain strings.
                return {
                    "isError": result["isError"],
                    "content": [{"type": "text", "text": t} for t in result["content"]],
                }

        run = Run(decode_scenario(scenario()), Wrapped())
        frozen = MappingProxyType({"isError": False, "content": ("a", "b")})
        run.recorder.on_tools_result(C1, frozen)
        self.assertEqual(records(run, node="final")[0]["result"]["content"][1], {"type": "text", "text": "b"})

    def test_a_frozen_record_becomes_plain_json(self) -> None:
        run = run_of()
        frozen = MappingProxyType({"isError": False, "content": (MappingProxyType({"type": "text", "text": "x"}),)})
        run.recorder.on_tools_result(C1, frozen)
        self.assertEqual(
            records(run, node="final")[0]["result"], {"isError": False, "content": [{"type": "text", "text": "x"}]}
        )

    def test_a_result_the_dialect_gets_wrong_is_a_problem(self) -> None:
        class Wrong(FakeDialect):
            def result(self, result: Any) -> Any:
                return {"isError": "no", "content": []}

        run = Run(decode_scenario(scenario()), Wrong())
        run.recorder.on_tools_result(C1, object())
        self.assertIn("Dialect.result returned isError 'no'", run.problems[0])

    def test_a_block_of_another_type_than_text_is_recorded_whole(self) -> None:
        # A harness whose tool answers with an image (deepseek-harness's read_image does): tep
        # keeps such a block whole, and the kit reads no text from it.
        image = {"type": "image", "attachment": {"id": "att-1", "mediaType": "image/png"}}

        class WithImage(FakeDialect):
            def result(self, result: Any) -> Any:
                return {"isError": False, "content": [{"type": "text", "text": "a"}, image]}

        run = Run(decode_scenario(scenario()), WithImage())
        run.recorder.on_tools_result(C1, object())
        self.assertEqual(run.problems, [])
        final = records(run, node="final")[0]["result"]
        self.assertEqual(final["content"][1], image)
        self.assertEqual(texts_of(final), ["a"])

        class Typeless(FakeDialect):
            def result(self, result: Any) -> Any:
                return {"isError": False, "content": [{"attachment": {}}]}

        run = Run(decode_scenario(scenario()), Typeless())
        run.recorder.on_tools_result(C1, object())
        self.assertIn("a block of another type is a mapping with a string type", run.problems[0])

    def test_additional_contexts_of_the_wrong_shape_are_a_problem(self) -> None:
        # Strings instead of {origin, text} items: tep would refuse the whole trace with a serde
        # error; the kit names the field and the shape.
        class Strings(FakeDialect):
            def result(self, result: Any) -> Any:
                return {"isError": False, "content": [], "additionalContexts": ["inner"]}

        run = Run(decode_scenario(scenario()), Strings())
        run.recorder.on_tools_result(C1, object())
        self.assertIn("Dialect.result returned additionalContexts ['inner']", run.problems[0])
        self.assertIn('{"origin": "tool" | "wrapper" | "post", "text": ...}', run.problems[0])

        class Items(FakeDialect):
            def result(self, result: Any) -> Any:
                return {"isError": False, "content": [], "additionalContexts": [{"origin": "post", "text": "x"}]}

        run = Run(decode_scenario(scenario()), Items())
        run.recorder.on_tools_result(C1, object())
        self.assertEqual(run.problems, [])


class ContentFinalizerTest(unittest.TestCase):
    def test_content_only_with_the_call_from_the_dialect(self) -> None:
        current: list[Any] = [C1]

        class Current(FakeDialect):
            def current_call(self) -> Any:
                return current[0]

        run = Run(decode_scenario(scenario(tools=[{"name": "tool", "finalize": {"prefix": "> "}}])), Current())
        finalize = run.content_finalizer("tool")
        assert finalize is not None
        self.assertEqual(finalize(("a", "b")), ("> a", "> b"))
        current[0] = FakeCall("c2")
        self.assertEqual(finalize([{"type": "text", "text": "c"}]), ("> c",))
        first, second = records(run, node="finalize")
        self.assertEqual((first["call"], second["call"]), ("c1", "c2"))
        self.assertNotIn("result", first, "the callback is handed no candidate")
        self.assertIsNone(run.content_finalizer("other"))

    def test_content_only_bound_to_a_call_and_its_throw(self) -> None:
        run = run_of(tools=[{"name": "tool", "finalize": {"throw": "broke"}}])
        finalize = run.content_finalizer("tool", C1)
        assert finalize is not None
        with self.assertRaisesRegex(ScriptedError, "broke"):
            finalize(("a",))
        (stage,) = records(run, node="finalize")
        self.assertEqual((stage["call"], stage["outcome"]), ("c1", "throw"))

    def test_without_a_call_it_says_what_to_override(self) -> None:
        run = run_of(tools=[{"name": "tool", "finalize": "keep"}])
        finalize = run.content_finalizer("tool")
        assert finalize is not None
        with self.assertRaises(NotImplementedError):
            finalize(("a",))
        self.assertIn("Dialect.current_call", run.problems[0])


@dataclass
class Runner:
    """A Code Mode runner of a harness's own: numbers its sub-calls `<parent>#<n>`."""

    run: Run
    parent: FakeCall
    issued: list[str] = field(default_factory=list)

    async def call(self, n: int, tool: str) -> Any:
        sub = FakeCall(f"{self.parent.call_id}#{n}", tool, parent=self.parent)
        self.issued.append(sub.call_id)
        return sub


class CodeRunTest(unittest.IsolatedAsyncioTestCase):
    async def test_the_kit_records_what_the_runner_reports_in_its_own_names(self) -> None:
        program = [{"call": {"tool": "tool", "body": [{"return": "first"}]}}, {"call": {"tool": "rm"}}]
        raw = scenario(
            calls=[{"callId": "c1", "tool": "run_code", "program": program}],
            pre=[{"id": "policy", "decide": {"c1:code:2": {"deny": "no rm"}}}],
        )
        run = Run(decode_scenario(raw), FakeDialect())
        listener = run.pre_listener(run.scenario.pre[0])
        async with run.code_run(C1) as code:
            self.assertEqual([type(s) for s in code.steps], [sc.Call, sc.Call])
            first, second = FakeCall("c1#1", parent=C1), FakeCall("c1#2", "rm", parent=C1)
            self.assertEqual(code.sub_call(1, first), "c1:code:1")
            code.sub_call(2, "c1#2")
            self.assertEqual(await run.body(FakeCtx(first)), "first", "the scripts' body of c1:code:1")
            code.resolved(first)
            self.assertEqual(await listener(second, lambda: ("allow", None)), ("deny", "no rm"))
            code.rejected(second, {"toolName": "rm", "message": "no rm"})
        marks = [(r["call"], r["mark"]) for r in records(run, kind="mark")]
        self.assertEqual(
            marks,
            [
                ("c1#1", "body-settled"),
                ("c1#1", "binding-resolved"),
                ("c1#2", "binding-rejected"),
                ("c1", "body-settled"),
            ],
        )
        self.assertEqual(records(run)[0]["node"], "toolBody")
        self.assertEqual(records(run)[-1]["by"], "program")

    async def test_the_kits_own_interpreter_names_bindings_as_reported(self) -> None:
        program = [{"call": {"tool": "ok"}}]
        run = run_of(calls=[{"callId": "c1", "tool": "run_code", "program": program}])
        run.name_sub_call("c1/1", C1, 1)

        class Bindings:
            async def call(self, tool: str, arguments: Any) -> Any:
                return "done"

        await run.program(C1, Bindings())
        self.assertEqual([r["call"] for r in records(run, kind="mark")], ["c1/1", "c1"])

    async def test_a_cancelled_program_never_settles(self) -> None:
        run = run_of(calls=[{"callId": "c1", "tool": "run_code", "program": []}])

        async def runner() -> None:
            async with run.code_run(C1):
                await asyncio.sleep(60)

        task = asyncio.ensure_future(runner())
        await asyncio.sleep(0)
        task.cancel()
        with self.assertRaises(asyncio.CancelledError):
            await task
        self.assertEqual(shape(run), ["toolBody@c1"])


class NumberingTest(unittest.TestCase):
    def test_the_harnesss_events_and_the_helpers_share_one_numbering(self) -> None:
        run = run_of()
        rec = run.recorder
        rec.on_event("tool/call", {"callId": "c1", "name": "t", "arguments": "{}"}, "c1", seq=1)
        rec.on_context("c0", "from a helper")  # an event the harness's log does not have
        rec.on_event("todo/write", {"todos": []}, "c1", seq=2)
        rec.on_event("tool/result", {"message": {}}, "c1", seq=3, source_seqs=[1])
        events = [r["event"] for r in records(run, kind="event")]
        self.assertEqual([e["seq"] for e in events], [1, 2, 3, 4])
        self.assertEqual(events[-1]["sourceEventSeqs"], [1])
        rec.on_event("tool/call", {"callId": "c2", "name": "t", "arguments": "{}"}, "c2", seq=4)
        rec.on_event("tool/result", {"message": {}}, "c2", seq=5, source_seqs=[4])
        self.assertEqual(records(run, kind="event")[-1]["event"]["sourceEventSeqs"], [5], "translated, not copied")

    def test_a_tool_call_needs_the_raw_string(self) -> None:
        run = run_of()
        run.recorder.on_tool_call("c1", "tool", {"path": "a"})  # type: ignore[arg-type]
        self.assertIn("raw string", run.problems[0])


IMPLEMENTATION = Implementation("fake-harness", capabilities=("approval",))


class AnswersTest(unittest.TestCase):
    def answer(self, setup: Any, dialect: Dialect | None = None, **fields: Any) -> dict[str, Any]:
        return Adapter(setup, dialect or FakeDialect(), IMPLEMENTATION).run(scenario(**fields))

    def test_a_trace_without_the_batch_names_on_model(self) -> None:
        async def forgets_the_model(run: Run) -> None:
            run.recorder.on_tool_call("c1", "tool", "{}")

        message = self.answer(forgets_the_model)["errored"]["message"]
        self.assertTrue(message.startswith("a record before the first model observation (event tool/call, call c1)"))
        self.assertIn("call run.recorder.on_model(calls) when the batch starts", message)

        async def records_nothing(run: Run) -> None:
            pass

        self.assertIn("run.recorder.on_model(calls)", self.answer(records_nothing)["errored"]["message"])

    def test_a_dialect_method_a_scenario_needs_is_named_even_when_the_pipeline_swallows_it(self) -> None:
        async def pipeline_catches_everything(run: Run) -> None:
            run.recorder.on_model([("c1", "tool")])
            try:
                await run.body(FakeCtx(C1))
            except Exception:
                pass  # normalized, as a pipeline does

        answer = self.answer(
            pipeline_catches_everything,
            calls=[{"callId": "c1", "tool": "tool", "body": [{"read": "a"}]}],
            dialect=NoFs(),
        )
        self.assertTrue(answer["errored"]["message"].startswith("this scenario needs Dialect.read"), answer)

    def test_an_unawaited_kit_coroutine_names_the_synchronous_form(self) -> None:
        async def sync_guards(run: Run) -> None:
            run.recorder.on_model([("c1", "tool")])
            for guard in run.guards():
                guard(C1)  # a synchronous pipeline: the verdicts are coroutines, never awaited

        message = self.answer(sync_guards)["errored"]["message"]
        self.assertIn("mount run.guards(sync=True) instead", message)

    def test_an_unawaited_kit_coroutine_in_a_reference_cycle_is_found_when_asked(self) -> None:
        async def sync_guards_in_a_cycle(run: Run) -> None:
            run.recorder.on_model([("c1", "tool")])
            for guard in run.guards():
                holder: dict[str, Any] = {"verdict": guard(C1)}  # never awaited
                holder["self"] = holder  # and kept alive by a cycle after the scenario

        gc.disable()  # the collector running on its own would find it either way
        try:
            adapter = Adapter(sync_guards_in_a_cycle, FakeDialect(), IMPLEMENTATION, collect_garbage=True)
            message = adapter.run(scenario())["errored"]["message"]
        finally:
            gc.enable()
        self.assertIn("mount run.guards(sync=True) instead", message)

    def test_a_value_that_is_not_json_is_named_by_its_record_and_field(self) -> None:
        class Opaque:
            pass

        async def records_an_object(run: Run) -> None:
            run.recorder.on_model([("c1", "tool")])
            run.recorder.on_pre_execute(C1, "deny", Opaque())  # type: ignore[arg-type]
            run.recorder.on_event("todo/write", {"todos": [{"content": MappingProxyType({}), "status": Opaque()}]})

        message = self.answer(records_an_object)["errored"]["message"]
        self.assertIn(
            "the answer cannot be sent: trace[2] (stage pre, call c1): reason is not JSON (a 'Opaque' value", message
        )

    def test_the_loop_answers_even_what_it_cannot_encode(self) -> None:
        import io

        class Unsendable(Adapter):
            def run(self, raw: Any, spec: Any = "rev2") -> dict[str, Any]:
                return {"trace": [float("nan")]}

        async def nothing(run: Run) -> None:
            pass

        out = io.StringIO()
        Unsendable(nothing, FakeDialect(), IMPLEMENTATION).serve(
            ['{"cmd":"run","seq":3,"scenario":{}}\n', '{"cmd":"stop"}\n'], out
        )
        self.assertIn('"seq": 3, "errored"', out.getvalue())

    def test_one_problem_is_said_once(self) -> None:
        # tep prints `message (context)`: a context that repeats the message printed it twice.
        async def one_problem(run: Run) -> None:
            run.recorder.on_model([("c1", "tool")])
            run.fail("my glue knows it is wrong")

        self.assertEqual(self.answer(one_problem), {"errored": {"message": "my glue knows it is wrong"}})

        async def two_problems(run: Run) -> None:
            run.recorder.on_model([("c1", "tool")])
            run.fail("first")
            run.fail("second")

        errored = self.answer(two_problems)["errored"]
        self.assertEqual(errored["message"], "first (and 1 more, below)")
        self.assertEqual(errored["context"], "first\nsecond")

    def test_glue_problems_win_over_an_escape(self) -> None:
        async def escapes(run: Run) -> None:
            run.fail("my glue knows it is wrong")
            await run.batch(asyncio.sleep(0, result=None))
            raise_in_batch = run.batch(_raises())
            await raise_in_batch

        answer = self.answer(escapes)
        self.assertEqual(answer["errored"]["message"], "my glue knows it is wrong")


async def _raises() -> None:
    raise RuntimeError("escaped")


class NoFs(FakeDialect):
    read = Dialect.read  # type: ignore[assignment]


if __name__ == "__main__":
    unittest.main()
