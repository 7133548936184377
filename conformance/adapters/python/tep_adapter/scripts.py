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
                           (content) -> content | None               run.content_finalizer(tool)
    post-execute listener  async (call, result, next) -> decision    run.post_listeners()
    tools/result observer  (call, outcome) -> awaitable | None       run.observers()
    Code Mode program      async (call, bindings) -> output          run.program
                           (or your own runner, reporting to)        run.code_run(call)

Listeners, the prompt and guards also come synchronous (`sync=True`): `next()` then returns the
decision itself. The asynchronous ones await what `next()` returns only when it is awaitable.

The list factories include the recording probes at the right ends (a pre-execute listener and a
post-execute listener outermost, a guard last, a wrapper outermost and one innermost, an
observer first), so mounting them in the order given records every hook-level stage. Every
probe records what happened, never what it expects next:

- a waterfall's stage (`pre`, `post`) is recorded when the outermost of the kit's listeners
  returns (or throws), whichever listener that is in the order your pipeline runs them;
- the `guards` stage is recorded by the guard that denies or throws, or by the last guard when
  every guard before it abstained; a guard your pipeline consults after a deny is added to that
  stage (the evidence that a guard ran after a deny);
- the end of `tools/execute` is recorded when the outermost of the kit's wrappers returns; a body
  dispatched again below the innermost probe (by a wrapper of your own) records its dispatch.

Bodies, finalizers, observers and programs record their own moments (`toolBody`,
`body-settled` in a `finally`, `finalize`, `observer-settled`, binding marks).

A script that throws raises `ScriptedError(message)`: your pipeline catches it like any throw.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import warnings
from collections import Counter
from collections.abc import Awaitable, Callable, Generator, Mapping
from types import TracebackType
from typing import Any, Literal, cast

from .dialect import Dialect, GlueError, ProgramOutput
from .recorder import Recorder, Spec
from .records import Record, texts_of
from .scenario import (
    Abstain,
    Accept,
    AddContext,
    All,
    Allow,
    Ask,
    BindingCall,
    Block,
    BodyStep,
    Call,
    CallRunCode,
    ContextWrapper,
    DeferContext,
    Deny,
    Edit,
    ExternalWrite,
    FailUntilAttempt,
    FinalizeAction,
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
    Rewrite,
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

Next = Callable[[], Any]
"""A waterfall's `next`: returns the decision, or an awaitable of it."""
ExecuteNext = Callable[..., Awaitable[Any]]
PreListener = Callable[[Any, Next], Any]
Guard = Callable[[Any], Any]
Approver = Callable[[Any], Any]
Wrapper = Callable[[Any, ExecuteNext], Awaitable[Any]]
PostListener = Callable[[Any, Any, Next], Any]
Observer = Callable[[Any, Any], "Awaitable[None] | None"]
Finalizer = Callable[[Any, Any], Any]
ContentFinalizer = Callable[[Any], Any]

GUARD_PROBE = "tep-adapter:last-guard"
"""The id the last-guard probe records under when your pipeline consults it after a deny."""

_Steps = Generator[Any, Any, Any]
"""A script's steps: it yields what `next()` returned and is sent its value."""


class ScriptedError(Exception):
    """A script's `{"throw": message}`; `str()` is the message."""


class Skip(Exception):
    """Raise from your adapter when your pipeline cannot express a scenario: it is answered as
    skipped with this reason (say what is missing, so a reader can act on it).

    The request holds whatever your pipeline does with the exception: raised inside a body, a
    hook or a `Dialect` method, where your pipeline's catch-all turns it into an error result
    (as the spec asks), the scenario is still answered skipped. The kit notes the request when
    the exception is made during a run."""

    def __init__(self, reason: str = "") -> None:
        super().__init__(reason)
        run = _RUNNING.get()
        if run is not None and run.skip_requested is None:
            run.skip_requested = reason or "the adapter skipped it"


class Escaped(Exception):
    """An exception escaped the pipeline (see `Run.batch`)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error


async def _maybe(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _shown(value: Json) -> str:
    return value if isinstance(value, str) else compact_json(value)


def _message(error: BaseException) -> str:
    return str(error) or type(error).__name__


def _named(function: Any, form: str) -> Any:
    """Names a kit callable after the factory that made it: a coroutine of it that your pipeline
    never awaits is then reported with the factory to use instead."""
    function.__qualname__ = f"tep_adapter:{form}"
    return function


class _NotingDialect:
    """The adapter's dialect, noting every method it lacks that a scenario reached."""

    def __init__(self, dialect: Dialect, note: Callable[[str], None]) -> None:
        self._dialect = dialect
        self._note = note

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._dialect, name)
        if not callable(found):
            return found

        def noting(*args: Any, **kwargs: Any) -> Any:
            try:
                value = found(*args, **kwargs)
            except (NotImplementedError, GlueError) as error:
                self._note(str(error))
                raise
            return self._awaited(value) if inspect.iscoroutine(value) else value

        return noting

    async def _awaited(self, value: Awaitable[Any]) -> Any:
        try:
            return await value
        except (NotImplementedError, GlueError) as error:
            self._note(str(error))
            raise


_RUNNING: contextvars.ContextVar[Run | None] = contextvars.ContextVar("tep_adapter.running", default=None)
"""The run of the scenario in progress (set by the protocol around each scenario's event loop):
where a `Skip` made anywhere inside it notes its request."""


class Run:
    """One scenario's run: its scripts as callables, and the recorder they record into."""

    def __init__(self, scenario: Scenario, dialect: Dialect, spec: Spec = "rev2") -> None:
        self.scenario = scenario
        self.spec: Spec = spec
        self.dialect = dialect
        self.recorder = Recorder(spec, dialect)
        self._d = cast(Dialect, _NotingDialect(dialect, self.recorder.problem))
        self.recorder.dialect = self._d
        self._rec = self.recorder  # short for the scripts below
        self.attempts: Counter[str] = Counter()
        """How many times each call's body was dispatched."""
        self.metrics: Counter[str] = Counter()
        """How many dispatches each `metrics` wrapper saw, by call id."""
        self._bodies = scenario.bodies()
        self._programs = scenario.programs()
        self._background: set[asyncio.Future[Any]] = set()
        self._depth: Counter[tuple[str, str]] = Counter()
        """How many of the kit's listeners (or wrappers) of a call are running, by waterfall."""
        self._script_ids: dict[str, str] = {}
        self._trace_ids: dict[str, str] = {}
        self.batched = False
        """Whether the adapter awaited its batch through `batch`."""
        self.skip_requested: str | None = None
        """The reason of the first `Skip` made during this run: it is answered skipped with it."""

    # -- the batch -------------------------------------------------------------------------

    async def batch(self, batch: Awaitable[Any]) -> Any:
        """Awaits your pipeline's batch. Anything it raises escaped the pipeline: the run is
        answered `escaped`, with the trace so far, and judged as a breach of
        throw-is-normalized. (Anything your adapter raises outside this is `errored`.)"""
        self.batched = True
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

    @property
    def problems(self) -> list[str]:
        """Mistakes of the adapter's glue the kit noticed: the scenario is answered `errored`."""
        return list(self.recorder.problems)

    def fail(self, message: str) -> None:
        """Notes a mistake of the adapter's glue: the scenario is answered `errored` with it."""
        self.recorder.problem(message)

    def _spawn(self, work: Awaitable[Any]) -> asyncio.Future[Any]:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # -- call names ------------------------------------------------------------------------

    def script_id(self, call: Any) -> str:
        """The name the scenario's scripts give a call (what `decide`, `answers` and wrapper
        `calls` use): its id, or for a sub-call your harness named otherwise, the
        `<parent>:code:<n>` reported with `name_sub_call`."""
        call_id = call if isinstance(call, str) else self._rec.call_id(call)
        return self._script_ids.get(call_id, call_id)

    def name_sub_call(self, sub_call: Any, parent: Any, n: int) -> str:
        """Reports that `sub_call` (an id, or what a stage is handed) is the `n`-th binding call
        (from 1, in the order the program issued them) of `parent`'s program. The trace records
        your harness's id; the scripts' `<parent>:code:<n>` finds the sub-call's scripts. Returns
        the script name."""
        sub_id = sub_call if isinstance(sub_call, str) else self._rec.call_id(sub_call)
        parent_id = parent if isinstance(parent, str) else self._rec.call_id(parent)
        script = f"{self.script_id(parent_id)}:code:{n}"
        self._script_ids[sub_id] = script
        self._trace_ids[script] = sub_id
        return script

    def _trace_id(self, script: str) -> str:
        return self._trace_ids.get(script, script)

    # -- driving a script's steps, synchronously or not ------------------------------------

    async def _drive(self, steps: _Steps) -> Any:
        try:
            request = steps.send(None)
            while True:
                try:
                    value = await _maybe(request)
                except Exception as error:
                    request = steps.throw(error)
                else:
                    request = steps.send(value)
        except StopIteration as stop:
            return stop.value

    def _drive_sync(self, steps: _Steps, form: str) -> Any:
        try:
            request = steps.send(None)
            while True:
                if inspect.isawaitable(request):
                    if inspect.iscoroutine(request):
                        with warnings.catch_warnings():  # (it is reported below, by name)
                            warnings.simplefilter("ignore", RuntimeWarning)
                            request.close()
                    message = (
                        f"{form}(sync=True) is synchronous, and your pipeline's next() returned an awaitable: "
                        f"your waterfall is asynchronous, so mount {form}() instead"
                    )
                    self.fail(message)
                    request = steps.throw(TypeError(message))
                else:
                    request = steps.send(request)
        except StopIteration as stop:
            return stop.value

    def _waterfall(
        self,
        waterfall: Literal["pre", "post"],
        steps: Callable[..., _Steps],
        sync: bool,
        name: str,
    ) -> Callable[..., Any]:
        """A listener of the kit: runs `steps` and, when it is the outermost of the kit's
        listeners of the call, records the waterfall's stage with what it returned or threw."""
        form = f"run.{waterfall}_listeners"

        def enter(call: Any) -> tuple[str, str]:
            key = (waterfall, self._rec.call_id(call))
            self._depth[key] += 1
            return key

        def leave(key: tuple[str, str], handed: tuple[Any, ...], decision: Any, error: BaseException | None) -> None:
            self._depth[key] -= 1
            if self._depth[key] > 0 or (error is not None and not isinstance(error, Exception)):
                return
            call = handed[0]
            if waterfall == "pre":
                if error is not None:
                    self._rec.on_pre_execute(call, "throw", _message(error))
                else:
                    self._rec.on_pre_execute(call, *self._d.pre_outcome(decision))
            elif error is not None:
                self._rec.on_post_execute(call, handed[1], "throw", _message(error))
            else:
                self._rec.on_post_execute(call, handed[1], self._d.post_outcome(decision))

        if sync:

            def listener_sync(*handed: Any) -> Any:
                key = enter(handed[0])
                try:
                    decision = self._drive_sync(steps(*handed), form)
                except BaseException as error:
                    leave(key, handed[:-1], None, error)
                    raise
                leave(key, handed[:-1], decision, None)
                return decision

            listener_sync.__name__ = name
            return cast(Callable[..., Any], _named(listener_sync, f"{form}(sync=True)"))

        async def listener(*handed: Any) -> Any:
            key = enter(handed[0])
            try:
                decision = await self._drive(steps(*handed))
            except BaseException as error:
                leave(key, handed[:-1], None, error)
                raise
            leave(key, handed[:-1], decision, None)
            return decision

        listener.__name__ = name
        return cast(Callable[..., Any], _named(listener, f"{form}()"))

    # -- tools/pre-execute -----------------------------------------------------------------

    def pre_listeners(self, *, sync: bool = False) -> list[PreListener]:
        """The probe (mount first: outermost), then every scripted listener in order."""
        return [self.pre_probe(sync=sync), *(self.pre_listener(spec, sync=sync) for spec in self.scenario.pre)]

    def pre_probe(self, *, sync: bool = False) -> PreListener:
        def steps(call: Any, next: Next) -> _Steps:
            return (yield self._d.call_next(next, call))

        return self._waterfall("pre", steps, sync, "pre_probe")

    def pre_listener(self, spec: Listener[PreAction], *, sync: bool = False) -> PreListener:
        def steps(call: Any, next: Next) -> _Steps:
            self._rec.entered("pre", call, spec.id)
            match spec.action(self.script_id(call)):
                case Pass():
                    return (yield self._d.call_next(next, call))
                case Throw(message=message):
                    raise ScriptedError(message)
                case Allow() | Deny() | Ask() | Rewrite() as action:
                    return self._d.pre_decision_for(call, action)

        return self._waterfall("pre", steps, sync, f"pre_{spec.id}")

    # -- ctx.approval ----------------------------------------------------------------------

    def approval(self, *, sync: bool = False) -> Approver | None:
        """The prompt to mount as ctx.approval, or None: the scenario mounts none."""
        spec = self.scenario.approval
        if spec is None:
            return None

        def answer(request: Any) -> Any:
            call_id = self._d.approval_call_id(request)
            match spec.answer(self.script_id(call_id)):
                case Throw(message=message):
                    self._rec.on_approval(call_id, "throw", message)
                    raise ScriptedError(message)
                case outcome:
                    self._rec.on_approval(call_id, outcome)
                    return self._d.approval_answer(outcome)

        if sync:
            return cast(Approver, _named(answer, "run.approval(sync=True)"))

        async def prompt(request: Any) -> Any:
            return answer(request)

        return cast(Approver, _named(prompt, "run.approval()"))

    # -- guards ----------------------------------------------------------------------------

    def guards(self, *, sync: bool = False) -> list[Guard]:
        """Every scripted guard in order, then the probe (mount last: it sees the allow)."""
        return [*(self.guard(spec, sync=sync) for spec in self.scenario.guards), self.guard_probe(sync=sync)]

    def _guard_form(self, verdict: Callable[[Any], Any], sync: bool) -> Guard:
        if sync:
            return cast(Guard, _named(verdict, "run.guards(sync=True)"))

        async def guard(call: Any) -> Any:
            return verdict(call)

        guard.__name__ = verdict.__name__
        return cast(Guard, _named(guard, "run.guards()"))

    def guard_probe(self, *, sync: bool = False) -> Guard:
        """The last guard: records `guards` allow when every guard before it abstained. Consulted
        after a guard denied (or threw), it is added to that stage as one more guard consulted."""

        def probe(call: Any) -> Any:
            if self._rec.guards_ended(call):
                self._rec.guard_verdict(call, GUARD_PROBE, "abstain")
            else:
                self._rec.on_guards(call, "allow")
            return self._d.guard_verdict(Abstain())

        return self._guard_form(probe, sync)

    def guard(self, spec: Listener[GuardAction], *, sync: bool = False) -> Guard:
        def verdict(call: Any) -> Any:
            ended = self._rec.guards_ended(call)
            match spec.action(self.script_id(call)):
                case Throw(message=message):
                    self._rec.guard_verdict(call, spec.id, "throw", message)
                    if not ended:
                        self._rec.on_guards(call, "throw", message)
                    raise ScriptedError(message)
                case Deny(reason=reason) as action:
                    self._rec.guard_verdict(call, spec.id, "deny", reason)
                    if not ended:
                        self._rec.on_guards(call, "deny", reason)
                    return self._d.guard_verdict(action)
                case Allow() | Abstain() as action:
                    self._rec.guard_verdict(call, spec.id, "allow" if isinstance(action, Allow) else "abstain")
                    return self._d.guard_verdict(action)

        verdict.__name__ = f"guard_{spec.id}"
        return self._guard_form(verdict, sync)

    # -- tools/execute ---------------------------------------------------------------------

    def wrappers(self) -> list[Wrapper]:
        """Outermost first: the execute probe, the scripted wrappers, the dispatch probe."""
        return [self.execute_probe(), *(self.wrapper(spec) for spec in self.scenario.wrappers), self.dispatch_probe()]

    def _next(self, next: ExecuteNext, handed: Any, signal: Any) -> Awaitable[Any]:
        return _maybe(self._d.execute_next(next, handed, signal))

    def _execute(self, inner: Callable[[Any, ExecuteNext, Any, Any, int | None], Awaitable[Any]], name: str) -> Wrapper:
        """A wrapper of the kit: runs `inner(handed, next, call, signal, timeout)` and, when it
        is the outermost of the kit's wrappers of the call, records the end of `tools/execute`."""

        async def wrapper(handed: Any, next: ExecuteNext) -> Any:
            call, signal, limit = self._d.execute_call(handed)
            key = ("execute", self._rec.call_id(call))
            self._depth[key] += 1
            try:
                result = await inner(handed, next, call, signal, limit)
            except BaseException as error:
                self._depth[key] -= 1
                if self._depth[key] == 0 and isinstance(error, Exception):
                    self._rec.on_execute_end(call, error=error)
                raise
            self._depth[key] -= 1
            if self._depth[key] == 0:
                self._rec.on_execute_end(call)
            return result

        wrapper.__name__ = name
        return cast(Wrapper, _named(wrapper, "run.wrappers()"))

    def execute_probe(self) -> Wrapper:
        """Outermost wrapper: records the end of the `tools/execute` waterfall."""

        async def probe(handed: Any, next: ExecuteNext, call: Any, signal: Any, limit: int | None) -> Any:
            return await self._next(next, handed, signal)

        return self._execute(probe, "execute_probe")

    def dispatch_probe(self) -> Wrapper:
        """Innermost wrapper: records control entering the dispatch and returning from it."""

        async def probe(handed: Any, next: ExecuteNext, call: Any, signal: Any, limit: int | None) -> Any:
            self._rec.on_dispatch(call)
            try:
                result = await self._next(next, handed, signal)
            except Exception as error:
                self._rec.on_body_return(call, error=error)
                raise
            self._rec.on_body_return(call, result)
            return result

        return self._execute(probe, "dispatch_probe")

    def wrapper(self, spec: WrapperSpec) -> Wrapper:
        d = self._d

        async def timeout(handed: Any, next: ExecuteNext, call: Any, signal: Any, limit: int | None) -> Any:
            if limit is None:
                return await self._next(next, handed, signal)
            deadline, cancel = d.child_signal(signal)
            dispatch = asyncio.ensure_future(self._next(next, handed, deadline))
            try:
                done, _ = await asyncio.wait({dispatch}, timeout=limit / 1000)
                if dispatch in done:
                    return dispatch.result()
                cancel()
                # Cooperative: the body is told to stop and waited for, never abandoned.
                result = await asyncio.shield(dispatch)
            except asyncio.CancelledError:
                dispatch.cancel()
                raise
            return result if d.is_cancelled(signal) else d.timeout_result(limit)

        async def retry(handed: Any, next: ExecuteNext, call: Any, signal: Any, limit: int | None) -> Any:
            assert isinstance(spec, RetryWrapper)
            result = await self._next(next, handed, signal)
            for _ in range(1, spec.attempts):
                if not d.is_error(result) or d.is_cancelled(signal):
                    break
                await asyncio.sleep(spec.delay_ms / 1000)
                result = await self._next(next, handed, signal)
            return result

        async def metrics(handed: Any, next: ExecuteNext, call: Any, signal: Any, limit: int | None) -> Any:
            self.metrics[self._rec.call_id(call)] += 1
            return await self._next(next, handed, signal)

        async def context(handed: Any, next: ExecuteNext, call: Any, signal: Any, limit: int | None) -> Any:
            assert isinstance(spec, ContextWrapper)
            result = await self._next(next, handed, signal)
            if not spec.applies_to(self.script_id(call)):
                return result
            return d.with_wrapper_context(result, d.context(spec.text, "wrapper"))

        async def throw(handed: Any, next: ExecuteNext, call: Any, signal: Any, limit: int | None) -> Any:
            assert isinstance(spec, ThrowWrapper)
            if not spec.applies_to(self.script_id(call)):
                return await self._next(next, handed, signal)
            if spec.phase == "after":
                await self._next(next, handed, signal)
            raise ScriptedError(spec.message)

        match spec:
            case TimeoutWrapper():
                return self._execute(timeout, "timeout")
            case RetryWrapper():
                return self._execute(retry, "retry")
            case MetricsWrapper():
                return self._execute(metrics, "metrics")
            case ContextWrapper():
                return self._execute(context, "context")
            case ThrowWrapper():
                return self._execute(throw, "throw")

    # -- the body --------------------------------------------------------------------------

    def _body_starts(self, call: Any) -> None:
        """Records a body starting. Inside `tools/execute` (one of the kit's wrappers of the call
        is running), a body dispatched again without passing the dispatch probe (a wrapper below
        it re-dispatched) first records that dispatch."""
        if self._depth[("execute", self._rec.call_id(call))] > 0 and not self._rec.dispatch_pending(call):
            self._rec.on_dispatch(call)
        self._rec.on_body_start(call)

    async def body(self, ctx: Any) -> Any:
        """Every scripted tool's body: runs the steps of the call it was dispatched for and
        returns `Dialect.body_result` of its value (by default the JSON value itself, which your
        tool definition renders). Records `toolBody` when it starts and `body-settled` when its
        steps end, unless the pipeline abandons it (cancels its task)."""
        call, signal = self._d.body_call(ctx)
        call_id = self._rec.call_id(call)
        self.attempts[call_id] += 1
        attempt = self.attempts[call_id]
        self._body_starts(call)
        abandoned = False
        try:
            for step in self._bodies.get(self.script_id(call_id), ()):
                done, value = await self._step(step, ctx, signal, attempt)
                if done:
                    return self._d.body_result(value, call)
            return self._d.body_result("ok", call)
        except asyncio.CancelledError:
            abandoned = True
            raise
        finally:
            if not abandoned:
                self._rec.on_body_settled(call)

    async def _cancelled_within(self, signal: Any, ms: float) -> bool:
        """Waits `ms` milliseconds or until `signal` is set, whichever comes first: True if it was."""
        if self._d.is_cancelled(signal):
            return True
        try:
            await asyncio.wait_for(self._d.wait_cancelled(signal), ms / 1000)
        except asyncio.TimeoutError:
            pass
        return self._d.is_cancelled(signal)

    async def _step(self, step: BodyStep, ctx: Any, signal: Any, attempt: int) -> tuple[bool, Json]:
        d = self._d
        match step:
            case Sleep(ms=ms):
                if await self._cancelled_within(signal, ms):
                    raise d.cancelled()
            case Hang():
                await d.wait_cancelled(signal)
                raise d.cancelled()
            case SlowStop(ms=ms):
                await d.wait_cancelled(signal)
                await asyncio.sleep(ms / 1000)
                raise d.cancelled()
            case Read(path=path):
                await _maybe(d.read(ctx, path))
            case Write(path=path, content=content):
                await _maybe(d.write(ctx, path, content))
            case Edit(path=path, old=old, new=new):
                await _maybe(d.edit(ctx, path, old, new))
            case ExternalWrite(path=path, content=content):
                await _maybe(d.external_write(ctx, path, content))
            case Todo(todos=todos):
                await _maybe(d.todo(ctx, todos))
            case Hook(point=point, handler_id=handler_id, decision=decision):
                await _maybe(d.hook(ctx, point, handler_id, decision))
            case DeferContext(text=text):
                await _maybe(d.defer_context(ctx, d.context(text, "tool")))
            case FailUntilAttempt(attempt=needed):
                if attempt < needed:
                    raise ScriptedError(f"attempt {attempt} fails")
            case Return(value=value):
                return True, value
            case Throw(message=message):
                raise ScriptedError(message)
        return False, None

    # -- finalizeContent -------------------------------------------------------------------

    def _finalize_action(self, tool: ToolSpec | str) -> FinalizeAction | None:
        spec = self.scenario.tool(tool) if isinstance(tool, str) else tool
        return spec.finalize if spec is not None else None

    def _finalized(self, action: FinalizeAction, texts: Callable[[], list[str]]) -> Any:
        match action:
            case Throw(message=message):
                raise ScriptedError(message)
            case Prefix(text=text):
                return self._d.content([text + t for t in texts()])
            case Replace(text=text):
                return self._d.content([text])
            case Keep():
                return None

    def finalizer(self, tool: ToolSpec | str) -> Finalizer | None:
        """The definition's finalizeContent for a tool, as `(call, candidate) -> content or
        None` (None: keep the content), or None: the definition has none."""
        action = self._finalize_action(tool)
        if action is None:
            return None

        def finalize(call: Any, candidate: Any) -> Any:
            try:
                content = self._finalized(action, lambda: texts_of(self._d.result(candidate)))
            except Exception as error:
                self._rec.on_finalize(call, candidate, error=error)
                raise
            self._rec.on_finalize(call, candidate)
            return content

        return finalize

    def content_finalizer(self, tool: ToolSpec | str, call: Any = None) -> ContentFinalizer | None:
        """The definition's finalizeContent in the doc's content-only form, `(content) ->
        content or None`, or None: the definition has none. Its `finalize` record names `call`
        (for a finalizer your pipeline captures per call), else `Dialect.current_call()`; it
        carries no candidate result (the callback is handed content only), so the rule that
        finalizeContent changes content only is then not checked."""
        action = self._finalize_action(tool)
        if action is None:
            return None

        def finalize_content(content: Any) -> Any:
            finalizing = call if call is not None else self._d.current_call()
            try:
                finalized = self._finalized(action, lambda: self._d.content_texts(content))
            except Exception as error:
                self._rec.on_finalize(finalizing, error=error)
                raise
            self._rec.on_finalize(finalizing)
            return finalized

        return finalize_content

    # -- tools/post-execute ----------------------------------------------------------------

    def post_listeners(self, *, sync: bool = False) -> list[PostListener]:
        """The probe (mount first: outermost), then every scripted listener in order."""
        return [self.post_probe(sync=sync), *(self.post_listener(spec, sync=sync) for spec in self.scenario.post)]

    def post_probe(self, *, sync: bool = False) -> PostListener:
        def steps(call: Any, result: Any, next: Next) -> _Steps:
            return (yield self._d.call_next(next, call, result))

        return self._waterfall("post", steps, sync, "post_probe")

    def post_listener(self, spec: Listener[PostAction], *, sync: bool = False) -> PostListener:
        def steps(call: Any, result: Any, next: Next) -> _Steps:
            self._rec.entered("post", call, spec.id)
            match spec.action(self.script_id(call)):
                case Pass():
                    return (yield self._d.call_next(next, call, result))
                case AddContext(text=text):
                    decision = yield self._d.call_next(next, call, result)
                    return self._d.add_post_context(decision, self._d.context(text, "post"))
                case Throw(message=message):
                    raise ScriptedError(message)
                case Accept() | Block() as action:
                    return self._d.post_decision_for(call, result, action)

        return self._waterfall("post", steps, sync, f"post_{spec.id}")

    # -- tools/result observers ------------------------------------------------------------

    def observers(self) -> list[Observer]:
        """The probe (mount first: it records the announced outcome), then the scripted ones.
        Each is synchronous and returns its asynchronous work (or None): await it, or not."""
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

    def code_run(self, call: Any) -> CodeRun:
        """For a harness whose Code Mode runner interprets programs itself (and numbers its own
        sub-calls): the `run_code` body's records, made from what your runner reports. Use it
        as `async with run.code_run(call) as program:` (or `with`) around your runner."""
        return CodeRun(self, call)

    async def program(self, call: Any, bindings: Any) -> Any:
        """Runs the `run_code` call's scripted program through your bindings. Records the body
        starting, each binding's settlement (marks), and `body-settled` by "program" at its end.
        The n-th binding call is the sub-call `<call>:code:<n>`, or the one your harness
        reported with `name_sub_call`."""
        call_id = self._rec.call_id(call)
        steps = self._programs.get(self.script_id(call_id))
        if steps is None:
            raise ScriptedError(f"no program for {call_id}")
        async with self.code_run(call):
            return self._d.program_output(await self._run_program(self.script_id(call_id), steps, bindings))

    async def _bind(self, bindings: Any, tool: str, arguments: Json) -> tuple[bool, Any]:
        """(True, value) when the binding resolves, (False, rejection fields) when it rejects."""
        try:
            return True, await self._d.call_binding(bindings, tool, arguments)
        except Exception as error:
            rejection = self._d.rejection(error)
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

    async def _run_program(self, script: str, steps: tuple[ProgramStep, ...], bindings: Any) -> ProgramOutput:
        logs: list[str] = []
        issued = 0
        for step in steps:
            match step:
                case Call() | All():
                    group = (step.call,) if isinstance(step, Call) else step.calls
                    first = issued + 1
                    issued += len(group)
                    outcomes = await asyncio.gather(*(self._bind(bindings, c.tool, c.arguments) for c in group))
                    # Every binding of a group settles before the program reacts to a rejection.
                    failures = [
                        self._settle(self._trace_id(f"{script}:code:{first + k}"), c, outcome, logs)
                        for k, (c, outcome) in enumerate(zip(group, outcomes, strict=True))
                    ]
                    failure = next((f for f in failures if f is not None), None)
                    if failure is not None:
                        raise failure
                case CallRunCode():
                    resolved, value = await self._bind(bindings, "run_code", {})
                    logs.append(
                        f"run_code -> {_shown(value)}"
                        if resolved
                        else f"run_code rejected: {value.get('toolName')}: {value.get('message')}"
                    )
                case Log(text=text):
                    logs.append(text)
                case Return(value=value):
                    return ProgramOutput(tuple(logs), value, True)
                case Throw(message=message):
                    raise ScriptedError(message)
        return ProgramOutput(tuple(logs))


class CodeRun:
    """One `run_code` body whose program your harness's runner interprets itself: the kit records
    what your runner reports, in your harness's names. `start()` (or entering the `with`)
    records the body starting; `end()` (leaving it, unless the task is cancelled) records
    `body-settled` by "program". In between, report each binding call your runner issues
    (`sub_call`) and how it settled (`resolved`, `rejected`)."""

    def __init__(self, run: Run, call: Any) -> None:
        self._run = run
        self.call = call
        self.call_id = run.recorder.call_id(call)
        self.steps: tuple[ProgramStep, ...] = run._programs.get(run.script_id(self.call_id), ())
        """The scenario's program for this call: what your runner is to run (translate it into
        your runner's language, or interpret it)."""

    def start(self) -> None:
        self._run._body_starts(self.call)

    def sub_call(self, n: int, sub_call: Any) -> str:
        """Your runner's `n`-th binding call (from 1, in the order the program issued them) is
        `sub_call` (its id, or what a stage is handed). Returns the name the scripts use."""
        return self._run.name_sub_call(sub_call, self.call_id, n)

    def resolved(self, sub_call: Any) -> None:
        """A binding call resolved (mark `binding-resolved`)."""
        self._run.recorder.on_binding(sub_call)

    def rejected(self, sub_call: Any, rejection: BaseException | Mapping[str, Json]) -> None:
        """A binding call rejected: with every field of what the program was handed (a mapping,
        or an exception read by `Dialect.rejection`)."""
        if isinstance(rejection, BaseException):
            fields = self._run._d.rejection(rejection)
            found: Mapping[str, Json] = fields if fields is not None else {"message": _message(rejection)}
        else:
            found = rejection
        self._run.recorder.on_binding(sub_call, found)

    def end(self) -> None:
        self._run.recorder.on_body_settled(self.call, by="program")

    def __enter__(self) -> CodeRun:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if kind is None or not issubclass(kind, asyncio.CancelledError):
            self.end()

    async def __aenter__(self) -> CodeRun:
        return self.__enter__()

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.__exit__(kind, error, traceback)
