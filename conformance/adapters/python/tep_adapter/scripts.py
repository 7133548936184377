"""Interpreters: each script of a scenario as a callable in asyncio's idiom, ready to mount.

`Run` is what your adapter is handed for one scenario. It has the scenario, the recorder, and a
factory for every extension point. Mount the callables on your pipeline's hooks:

    pre-execute listener   async (call, next) -> decision           run.pre_listeners()
    approval prompt        async (request) -> answer                 run.approval()
    guard                  async (call) -> verdict                   run.guards()
    execute wrapper        async (handed, next) -> result,           run.wrappers()
                           where next(signal) runs the rest
    tool body              async (ctx) -> value                      run.body
    finalizeContent        (call, candidate) -> content | None       run.finalizer(tool)
    post-execute listener  async (call, result, next) -> decision    run.post_listeners()
    tools/result observer  (call, outcome) -> awaitable | None       run.observers()
    Code Mode program      async (call, bindings) -> output          run.program

The list factories include the recording probes at the right ends (a pre-execute listener and a
post-execute listener outermost, a guard last, a wrapper outermost and one innermost, an
observer first), so mounting them in the order given records every hook-level stage. Bodies,
finalizers, observers and programs record their own moments (`toolBody`, `body-settled` in a
`finally`, `finalize`, `observer-settled`, binding marks).

A script that throws raises `ScriptedError(message)`: your pipeline catches it like any throw.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from .cancel import CancelSignal, cancelled_within
from .dialect import Dialect, ProgramOutput
from .recorder import Recorder, Spec
from .records import Record, texts_of
from .scenario import (
    Abstain,
    AddContext,
    All,
    Allow,
    BindingCall,
    BodyStep,
    Call,
    CallRunCode,
    ContextWrapper,
    DeferContext,
    Deny,
    Edit,
    ExternalWrite,
    FailUntilAttempt,
    GuardAction,
    Hang,
    Hook,
    Json,
    Keep,
    Listener,
    Log,
    MetricsWrapper,
    ObserverSpec,
    Pass,
    PostAction,
    PreAction,
    Prefix,
    ProgramStep,
    Read,
    Replace,
    RetryWrapper,
    Return,
    Scenario,
    Sleep,
    SlowStop,
    Throw,
    ThrowWrapper,
    TimeoutWrapper,
    Todo,
    ToolSpec,
    WrapperSpec,
    Write,
    compact_json,
)

Next = Callable[[], Awaitable[Any]]
ExecuteNext = Callable[[Any], Awaitable[Any]]
PreListener = Callable[[Any, Next], Awaitable[Any]]
Guard = Callable[[Any], Awaitable[Any]]
Approver = Callable[[Any], Awaitable[Any]]
Wrapper = Callable[[Any, ExecuteNext], Awaitable[Any]]
PostListener = Callable[[Any, Any, Next], Awaitable[Any]]
Observer = Callable[[Any, Any], "Awaitable[None] | None"]
Finalizer = Callable[[Any, Any], Any]


class ScriptedError(Exception):
    """A script's `{"throw": message}`; `str()` is the message."""


class Skip(Exception):
    """Raise from your adapter when your pipeline cannot express a scenario: it is answered as
    skipped with this reason (say what is missing, so a reader can act on it)."""


class Escaped(Exception):
    """An exception escaped the pipeline (see `Run.batch`)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error


async def _maybe(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _shown(value: Json) -> str:
    return value if isinstance(value, str) else compact_json(value)


class Run:
    """One scenario's run: its scripts as callables, and the recorder they record into."""

    def __init__(self, scenario: Scenario, dialect: Dialect, spec: Spec = "rev2") -> None:
        self.scenario = scenario
        self.spec: Spec = spec
        self.dialect = dialect
        self.recorder = Recorder(spec, dialect)
        self._rec = self.recorder  # short for the scripts below
        self.attempts: Counter[str] = Counter()
        """How many times each call's body was dispatched."""
        self.metrics: Counter[str] = Counter()
        """How many dispatches each `metrics` wrapper saw, by call id."""
        self._bodies = scenario.bodies()
        self._programs = scenario.programs()
        self._background: set[asyncio.Future[Any]] = set()

    # -- the batch -------------------------------------------------------------------------

    async def batch(self, batch: Awaitable[Any]) -> Any:
        """Awaits your pipeline's batch. Anything it raises escaped the pipeline: the run is
        answered `escaped`, with the trace so far, and judged as a breach of
        throw-is-normalized. (Anything your adapter raises outside this is `errored`.)"""
        try:
            return await batch
        except Exception as error:
            raise Escaped(error) from error

    async def settle(self) -> None:
        """Waits for the observers' asynchronous work (the kit calls this before answering)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    def trace(self) -> list[Record]:
        return self.recorder.trace()

    def _spawn(self, work: Awaitable[Any]) -> asyncio.Future[Any]:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # -- tools/pre-execute -----------------------------------------------------------------

    def pre_listeners(self) -> list[PreListener]:
        """The probe (mount first: outermost), then every scripted listener in order."""
        return [self.pre_probe(), *(self.pre_listener(spec) for spec in self.scenario.pre)]

    def pre_probe(self) -> PreListener:
        async def probe(call: Any, next: Next) -> Any:
            try:
                decision = await next()
            except Exception as error:
                self._rec.on_pre_execute(call, "throw", str(error))
                raise
            self._rec.on_pre_execute(call, *self.dialect.pre_outcome(decision))
            return decision

        return probe

    def pre_listener(self, spec: Listener[PreAction]) -> PreListener:
        async def listener(call: Any, next: Next) -> Any:
            self._rec.entered("pre", call, spec.id)
            action = spec.action(self._rec.call_id(call))
            if isinstance(action, Pass):
                return await next()
            if isinstance(action, Throw):
                raise ScriptedError(action.message)
            return self.dialect.pre_decision(action)

        listener.__name__ = f"pre_{spec.id}"
        return listener

    # -- ctx.approval ----------------------------------------------------------------------

    def approval(self) -> Approver | None:
        """The prompt to mount as ctx.approval, or None: the scenario mounts none."""
        spec = self.scenario.approval
        if spec is None:
            return None

        async def prompt(request: Any) -> Any:
            call_id = self.dialect.approval_call_id(request)
            answer = spec.answer(call_id)
            if isinstance(answer, Throw):
                self._rec.on_approval(call_id, "throw", answer.message)
                raise ScriptedError(answer.message)
            self._rec.on_approval(call_id, answer)
            return self.dialect.approval_answer(answer)

        return prompt

    # -- guards ----------------------------------------------------------------------------

    def guards(self) -> list[Guard]:
        """Every scripted guard in order, then the probe (mount last: it sees the allow)."""
        return [*(self.guard(spec) for spec in self.scenario.guards), self.guard_probe()]

    def guard_probe(self) -> Guard:
        async def probe(call: Any) -> Any:
            self._rec.on_guards(call, "allow")
            return self.dialect.guard_verdict(Abstain())

        return probe

    def guard(self, spec: Listener[GuardAction]) -> Guard:
        async def guard(call: Any) -> Any:
            action = spec.action(self._rec.call_id(call))
            if isinstance(action, Throw):
                self._rec.guard_verdict(call, spec.id, "throw", action.message)
                self._rec.on_guards(call, "throw", action.message)
                raise ScriptedError(action.message)
            if isinstance(action, Deny):
                self._rec.guard_verdict(call, spec.id, "deny", action.reason)
                self._rec.on_guards(call, "deny", action.reason)
            else:
                self._rec.guard_verdict(call, spec.id, "allow" if isinstance(action, Allow) else "abstain")
            return self.dialect.guard_verdict(action)

        guard.__name__ = f"guard_{spec.id}"
        return guard

    # -- tools/execute ---------------------------------------------------------------------

    def wrappers(self) -> list[Wrapper]:
        """Outermost first: the execute probe, the scripted wrappers, the dispatch probe."""
        return [self.execute_probe(), *(self.wrapper(spec) for spec in self.scenario.wrappers), self.dispatch_probe()]

    def execute_probe(self) -> Wrapper:
        """Outermost wrapper: records the end of the `tools/execute` waterfall."""

        async def probe(handed: Any, next: ExecuteNext) -> Any:
            call, signal, _ = self.dialect.execute_call(handed)
            try:
                result = await next(signal)
            except Exception as error:
                self._rec.on_execute_end(call, error=error)
                raise
            self._rec.on_execute_end(call)
            return result

        return probe

    def dispatch_probe(self) -> Wrapper:
        """Innermost wrapper: records control entering the dispatch and returning from it."""

        async def probe(handed: Any, next: ExecuteNext) -> Any:
            call, signal, _ = self.dialect.execute_call(handed)
            self._rec.on_dispatch(call)
            try:
                result = await next(signal)
            except Exception as error:
                self._rec.on_body_return(call, error=error)
                raise
            self._rec.on_body_return(call, result)
            return result

        return probe

    def wrapper(self, spec: WrapperSpec) -> Wrapper:
        d = self.dialect

        async def timeout(handed: Any, next: ExecuteNext) -> Any:
            _, signal, limit = d.execute_call(handed)
            if limit is None:
                return await next(signal)
            deadline = CancelSignal(parent=signal)
            dispatch = asyncio.ensure_future(next(deadline))
            try:
                done, _ = await asyncio.wait({dispatch}, timeout=limit / 1000)
                if dispatch in done:
                    return dispatch.result()
                deadline.set()
                # Cooperative: the body is told to stop and waited for, never abandoned.
                result = await asyncio.shield(dispatch)
            except asyncio.CancelledError:
                dispatch.cancel()
                raise
            return result if signal.is_set() else d.timeout_result(limit)

        async def retry(handed: Any, next: ExecuteNext) -> Any:
            assert isinstance(spec, RetryWrapper)
            _, signal, _ = d.execute_call(handed)
            result = await next(signal)
            for _ in range(1, spec.attempts):
                if not d.is_error(result) or signal.is_set():
                    break
                await asyncio.sleep(spec.delay_ms / 1000)
                result = await next(signal)
            return result

        async def metrics(handed: Any, next: ExecuteNext) -> Any:
            call, signal, _ = d.execute_call(handed)
            self.metrics[self._rec.call_id(call)] += 1
            return await next(signal)

        async def context(handed: Any, next: ExecuteNext) -> Any:
            assert isinstance(spec, ContextWrapper)
            call, signal, _ = d.execute_call(handed)
            result = await next(signal)
            return d.with_wrapper_context(result, spec.text) if spec.applies_to(self._rec.call_id(call)) else result

        async def throw(handed: Any, next: ExecuteNext) -> Any:
            assert isinstance(spec, ThrowWrapper)
            call, signal, _ = d.execute_call(handed)
            if not spec.applies_to(self._rec.call_id(call)):
                return await next(signal)
            if spec.phase == "after":
                await next(signal)
            raise ScriptedError(spec.message)

        kinds: dict[type, Wrapper] = {
            TimeoutWrapper: timeout,
            RetryWrapper: retry,
            MetricsWrapper: metrics,
            ContextWrapper: context,
            ThrowWrapper: throw,
        }
        return kinds[type(spec)]

    # -- the body --------------------------------------------------------------------------

    async def body(self, ctx: Any) -> Json:
        """Every scripted tool's body: runs the steps of the call it was dispatched for. Records
        `toolBody` when it starts and `body-settled` when its steps end, unless the pipeline
        abandons it (cancels its task)."""
        call, signal = self.dialect.body_call(ctx)
        call_id = self._rec.call_id(call)
        self.attempts[call_id] += 1
        attempt = self.attempts[call_id]
        self._rec.on_body_start(call)
        abandoned = False
        try:
            for step in self._bodies.get(call_id, ()):
                done, value = await self._step(step, ctx, signal, attempt)
                if done:
                    return value
            return "ok"
        except asyncio.CancelledError:
            abandoned = True
            raise
        finally:
            if not abandoned:
                self._rec.on_body_settled(call)

    async def _step(self, step: BodyStep, ctx: Any, signal: Any, attempt: int) -> tuple[bool, Json]:
        d = self.dialect
        if isinstance(step, Sleep):
            if await cancelled_within(signal, step.ms):
                raise d.cancelled()
        elif isinstance(step, Hang):
            await signal.wait()
            raise d.cancelled()
        elif isinstance(step, SlowStop):
            await signal.wait()
            await asyncio.sleep(step.ms / 1000)
            raise d.cancelled()
        elif isinstance(step, Read):
            await _maybe(d.read(ctx, step.path))
        elif isinstance(step, Write):
            await _maybe(d.write(ctx, step.path, step.content))
        elif isinstance(step, Edit):
            await _maybe(d.edit(ctx, step.path, step.old, step.new))
        elif isinstance(step, ExternalWrite):
            await _maybe(d.external_write(ctx, step.path, step.content))
        elif isinstance(step, Todo):
            await _maybe(d.todo(ctx, step.todos))
        elif isinstance(step, Hook):
            await _maybe(d.hook(ctx, step.point, step.handler_id, step.decision))
        elif isinstance(step, DeferContext):
            await _maybe(d.defer_context(ctx, step.text))
        elif isinstance(step, FailUntilAttempt):
            if attempt < step.attempt:
                raise ScriptedError(f"attempt {attempt} fails")
        elif isinstance(step, Return):
            return True, step.value
        elif isinstance(step, Throw):
            raise ScriptedError(step.message)
        return False, None

    # -- finalizeContent -------------------------------------------------------------------

    def finalizer(self, tool: ToolSpec | str) -> Finalizer | None:
        """The definition's finalizeContent for a tool, or None: the definition has none."""
        spec = self.scenario.tool(tool) if isinstance(tool, str) else tool
        action = spec.finalize if spec is not None else None
        if action is None:
            return None

        def finalize(call: Any, candidate: Any) -> Any:
            try:
                if isinstance(action, Throw):
                    raise ScriptedError(action.message)
                content = None
                if isinstance(action, Prefix):
                    texts = texts_of(self.dialect.result(candidate))
                    content = self.dialect.content([action.text + t for t in texts])
                elif isinstance(action, Replace):
                    content = self.dialect.content([action.text])
                else:
                    assert isinstance(action, Keep)
            except Exception as error:
                self._rec.on_finalize(call, candidate, error=error)
                raise
            self._rec.on_finalize(call, candidate)
            return content

        return finalize

    # -- tools/post-execute ----------------------------------------------------------------

    def post_listeners(self) -> list[PostListener]:
        """The probe (mount first: outermost), then every scripted listener in order."""
        return [self.post_probe(), *(self.post_listener(spec) for spec in self.scenario.post)]

    def post_probe(self) -> PostListener:
        async def probe(call: Any, result: Any, next: Next) -> Any:
            try:
                decision = await next()
            except Exception as error:
                self._rec.on_post_execute(call, result, "throw", str(error))
                raise
            self._rec.on_post_execute(call, result, self.dialect.post_outcome(decision))
            return decision

        return probe

    def post_listener(self, spec: Listener[PostAction]) -> PostListener:
        async def listener(call: Any, result: Any, next: Next) -> Any:
            self._rec.entered("post", call, spec.id)
            action = spec.action(self._rec.call_id(call))
            if isinstance(action, Pass):
                return await next()
            if isinstance(action, AddContext):
                return self.dialect.add_post_context(await next(), action.text)
            if isinstance(action, Throw):
                raise ScriptedError(action.message)
            return self.dialect.post_decision(action)

        listener.__name__ = f"post_{spec.id}"
        return listener

    # -- tools/result observers ------------------------------------------------------------

    def observers(self) -> list[Observer]:
        """The probe (mount first: it records the announced outcome), then the scripted ones."""
        return [self.result_probe(), *(self.observer(spec) for spec in self.scenario.observers)]

    def result_probe(self) -> Observer:
        def probe(call: Any, outcome: Any) -> None:
            self._rec.on_tools_result(call, outcome)

        return probe

    def observer(self, spec: ObserverSpec) -> Observer:
        def observer(call: Any, outcome: Any) -> Awaitable[None]:
            if spec.mutate is not None:
                try:
                    self.dialect.mutate(outcome, spec.mutate)
                except Exception:
                    pass  # the outcome is frozen: that is the point
            call_id = self._rec.call_id(call)

            async def work() -> None:
                await asyncio.sleep(spec.async_ms / 1000)
                self._rec.on_observer_settled(call_id, spec.id, spec.async_ms)

            return self._spawn(work())

        return observer

    # -- Code Mode -------------------------------------------------------------------------

    async def program(self, call: Any, bindings: Any) -> Any:
        """Runs the `run_code` call's scripted program through your bindings. Records the body
        starting, each binding's settlement (marks), and `body-settled` by "program" at its end."""
        call_id = self._rec.call_id(call)
        steps = self._programs.get(call_id)
        if steps is None:
            raise ScriptedError(f"no program for {call_id}")
        self._rec.on_body_start(call)
        abandoned = False
        try:
            return self.dialect.program_output(await self._run_program(call_id, steps, bindings))
        except asyncio.CancelledError:
            abandoned = True
            raise
        finally:
            if not abandoned:
                self._rec.on_body_settled(call, by="program")

    async def _bind(self, bindings: Any, tool: str, arguments: Json) -> tuple[bool, Any]:
        """(True, value) when the binding resolves, (False, rejection fields) when it rejects."""
        try:
            return True, await self.dialect.call_binding(bindings, tool, arguments)
        except Exception as error:
            rejection = self.dialect.rejection(error)
            if rejection is None:
                raise
            return False, rejection

    def _settle(
        self, sub_id: str, call: BindingCall, outcome: tuple[bool, Any], logs: list[str]
    ) -> ScriptedError | None:
        resolved, value = outcome
        if resolved:
            self._rec.on_binding(sub_id)
            logs.append(f"{call.tool} -> {_shown(value)}")
            return None
        self._rec.on_binding(sub_id, value)
        reason = f"{value.get('toolName')}: {value.get('message')}"
        logs.append(f"{call.tool} rejected: {reason}")
        return ScriptedError(reason) if call.on_reject == "fail" else None

    async def _run_program(self, call_id: str, steps: tuple[ProgramStep, ...], bindings: Any) -> ProgramOutput:
        logs: list[str] = []
        issued = 0
        for step in steps:
            if isinstance(step, (Call, All)):
                group = (step.call,) if isinstance(step, Call) else step.calls
                first = issued + 1
                issued += len(group)
                outcomes = await asyncio.gather(*(self._bind(bindings, c.tool, c.arguments) for c in group))
                # Every binding of a group settles before the program reacts to a rejection.
                failures = [
                    self._settle(f"{call_id}:code:{first + k}", c, outcome, logs)
                    for k, (c, outcome) in enumerate(zip(group, outcomes, strict=True))
                ]
                failure = next((f for f in failures if f is not None), None)
                if failure is not None:
                    raise failure
            elif isinstance(step, CallRunCode):
                resolved, value = await self._bind(bindings, "run_code", {})
                logs.append(
                    f"run_code -> {_shown(value)}"
                    if resolved
                    else f"run_code rejected: {value.get('toolName')}: {value.get('message')}"
                )
            elif isinstance(step, Log):
                logs.append(step.text)
            elif isinstance(step, Return):
                return ProgramOutput(tuple(logs), step.value, True)
            elif isinstance(step, Throw):
                raise ScriptedError(step.message)
        return ProgramOutput(tuple(logs))
