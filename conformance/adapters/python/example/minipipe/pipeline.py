"""The pipeline: one assistant message's tool calls, through every stage, in asyncio.

A driver coroutine runs the *ordered* stages (the call's log entry, pre-execute, approval,
guards, then post-execute, finalizeContent, the `tools/result` notification and the recorded
result) one call at a time, in model order. Bodies run as tasks: consecutive concurrency-safe
calls share a pool (at most `max_parallel` bodies at once), any other call runs alone. Results
commit in model order however the bodies finish, and contexts are injected after the batch.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .fs import AgentFs, BoundFs, Workspace
from .results import (
    AbortedBeforeDispatch,
    Content,
    Context,
    Failure,
    ToolCallError,
    ToolResult,
    UnknownToolError,
    render,
)
from .session import SessionLog

if TYPE_CHECKING:
    from .code_mode import Runner

RUN_CODE = "run_code"


class Signal(Protocol):
    def is_set(self) -> bool: ...

    async def wait(self) -> Any: ...


# ---------------------------------------------------------------------------------------------
# What stages are handed


@dataclass(frozen=True)
class Token:
    serial: int

    def __str__(self) -> str:
        return f"exec-{self.serial}"


def freeze(value: Any) -> Any:
    """Read-only arguments: nothing a stage does can change what the model sent."""
    if isinstance(value, dict):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    return value


def parse_arguments(raw: str) -> Any:
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return raw


@dataclass(frozen=True)
class ModelCall:
    call_id: str
    name: str
    arguments: str
    """The raw argument string the model wrote."""


@dataclass(frozen=True)
class ToolCall:
    """One execution of a call, as every stage is handed it."""

    token: Token
    call_id: str
    name: str
    arguments: Any
    parent: ToolCall | None = None
    """For a Code Mode sub-call: the `run_code` execution it was issued from."""


@dataclass(frozen=True)
class Dispatch:
    """What a `tools/execute` wrapper is handed."""

    call: ToolCall
    signal: Signal
    timeout_ms: int | None


@dataclass
class ToolContext:
    """What a tool body is handed."""

    call: ToolCall
    signal: Signal
    fs: BoundFs
    workspace: Workspace
    _session: SessionLog
    _deferred: list[str]

    def defer_context(self, text: str) -> None:
        """Inject `text` after the batch's results (it survives the body failing)."""
        self._deferred.append(text)

    def write_todos(self, todos: list[dict[str, str]]) -> None:
        self._session.append("todo/write", {"todos": todos}, call_id=self.call.call_id)

    def record_hook(self, point: str, handler_id: str, decision: str, *, exit_code: int = 0) -> None:
        data = {"turn": 1, "point": point, "handlerId": handler_id}
        self._session.append("hook/invoked", {**data, "dialect": "claude-code"}, call_id=self.call.call_id)
        result = {**data, "decision": decision, "exitCode": exit_code, "durationMs": 0}
        self._session.append("hook/result", result, call_id=self.call.call_id)


# Decisions


@dataclass(frozen=True)
class Allow:
    updated_input: Any = None
    """Accepted for compatibility and ignored: a call's identity is protected."""


@dataclass(frozen=True)
class Deny:
    reason: str


@dataclass(frozen=True)
class Ask:
    reason: str | None = None


PreDecision = Allow | Deny | Ask
GuardVerdict = Deny | Allow | None
"""A guard denies or abstains (None). Guards are monotonic: an Allow counts as abstaining."""
ApprovalAnswer = Literal["allowed-once", "rejected", "cancelled", "unavailable"]


@dataclass(frozen=True)
class ApprovalRequest:
    call: ToolCall
    reason: str | None


_UNSET: Any = object()


@dataclass(frozen=True)
class Accept:
    content: Content | None = None
    value: Any = _UNSET
    contexts: tuple[str, ...] = ()


@dataclass(frozen=True)
class Block:
    feedback: Content
    contexts: tuple[str, ...] = ()


PostDecision = Accept | Block

Next = Callable[[], Awaitable[Any]]
PreListener = Callable[[ToolCall, Next], Awaitable[PreDecision]]
Guard = Callable[[ToolCall], Awaitable[GuardVerdict]]
Approval = Callable[[ApprovalRequest], Awaitable[ApprovalAnswer]]
ExecuteNext = Callable[[Signal], Awaitable[ToolResult]]
Wrapper = Callable[[Dispatch, ExecuteNext], Awaitable[ToolResult]]
PostListener = Callable[[ToolCall, ToolResult, Next], Awaitable[PostDecision]]
Observer = Callable[[ToolCall, ToolResult], "Awaitable[Any] | None"]
Finalizer = Callable[[ToolCall, ToolResult], "Content | None"]


@dataclass(frozen=True)
class Tool:
    name: str
    execute: Callable[[ToolContext], Awaitable[Any]]
    concurrency_safe: bool = False
    timeout_ms: int | None = None
    finalize_content: Finalizer | None = None

    def is_concurrency_safe(self, arguments: Any) -> bool:
        return self.concurrency_safe is True


class Presenter:
    """The UI cards. Override what you show."""

    def present_call(self, call: ToolCall) -> None: ...

    def present_result(self, call: ToolCall, outcome: ToolResult) -> None: ...


class Telemetry:
    """What only the pipeline knows. Override what you want to hear about."""

    def batch_planned(self, calls: Sequence[Planned]) -> None: ...

    def approval_unavailable(self, call: ToolCall, reason: str) -> None: ...

    def denied(self, call: ToolCall, reason: str) -> None: ...

    def normalized(self, call: ToolCall, error: BaseException) -> None: ...

    def batch_settled(self) -> None: ...


# ---------------------------------------------------------------------------------------------
# Internal states of a call


@dataclass(frozen=True)
class Planned:
    call: ModelCall
    arguments: Any
    tool: Tool | None
    concurrency_safe: bool


@dataclass(frozen=True)
class Denied:
    reason: str


@dataclass(frozen=True)
class Threw:
    error: Exception


ALLOWED = Allow()
Verdict = Allow | Denied | Threw
Settled = ToolResult | Denied | Threw


@dataclass
class _Started:
    planned: Planned
    call: ToolCall
    call_seq: int
    verdict: Verdict
    body: asyncio.Task[Settled] | None = None


def _onion(listeners: Sequence[Callable[..., Awaitable[Any]]], default: Any, *handed: Any) -> Awaitable[Any]:
    """Runs a waterfall: each listener gets `next` for the rest; the last `next` is `default`."""

    async def step(i: int) -> Any:
        if i == len(listeners):
            return default
        return await listeners[i](*handed, lambda: step(i + 1))

    return step(0)


def _pools(planned: Sequence[Planned]) -> list[list[Planned]]:
    """Consecutive concurrency-safe calls share a pool; any other call is a pool of its own."""
    pools: list[list[Planned]] = []
    for p in planned:
        if p.concurrency_safe and pools and pools[-1][-1].concurrency_safe:
            pools[-1].append(p)
        else:
            pools.append([p])
    return pools


@dataclass
class Pipeline:
    tools: Sequence[Tool] = ()
    pre_execute: Sequence[PreListener] = ()
    approval: Approval | None = None
    guards: Sequence[Guard] = ()
    execute: Sequence[Wrapper] = ()
    """`tools/execute` wrappers, outermost first."""
    post_execute: Sequence[PostListener] = ()
    observers: Sequence[Observer] = ()
    workspace: Workspace = field(default_factory=Workspace)
    max_parallel: int = 10
    presenter: Presenter = field(default_factory=Presenter)
    telemetry: Telemetry = field(default_factory=Telemetry)
    code_runner: Runner | None = None
    """Turns Code Mode on: async (call, bindings) -> ProgramOutput runs a `run_code` call."""
    session: SessionLog = field(default_factory=SessionLog)

    def __post_init__(self) -> None:
        from .code_mode import run_code_tool

        self._registry = {tool.name: tool for tool in self.tools}
        if RUN_CODE in self._registry or len(self._registry) != len(self.tools):
            raise ValueError("run_code is reserved, and tool names must be unique")
        if self.code_runner is not None:
            self._registry[RUN_CODE] = run_code_tool(self, self.code_runner)
        self.fs = AgentFs(self.workspace, self.session)
        self._tokens = itertools.count(1)
        self._steps = itertools.count(1)
        self._background: set[asyncio.Future[Any]] = set()

    def tool_names(self) -> list[str]:
        return [name for name in self._registry if name != RUN_CODE]

    def _plan(self, call: ModelCall) -> Planned:
        arguments = parse_arguments(call.arguments)
        tool = self._registry.get(call.name)
        try:
            safe = tool is not None and tool.is_concurrency_safe(arguments) is True
        except Exception:
            safe = False
        return Planned(call, arguments, tool, safe)

    async def run_batch(self, calls: Sequence[ModelCall]) -> list[ToolResult]:
        step = next(self._steps)
        planned = [self._plan(c) for c in calls]
        self.telemetry.batch_planned(planned)
        committed: list[tuple[str, ToolResult]] = []
        for pool in _pools(planned):
            committed.extend(await self._run_pool(pool, step))
        self.telemetry.batch_settled()
        for call_id, outcome in committed:
            for n, context in enumerate(outcome.contexts, 1):
                message = {
                    "id": f"context-{call_id}-{n}",
                    "role": "user",
                    "content": [{"type": "text", "text": context.text}],
                    "source": {"kind": "tool", "callId": call_id},
                }
                self.session.append("user/message", message, call_id=call_id, surface_op="append")
        return [outcome for _, outcome in committed]

    async def _run_pool(self, pool: list[Planned], step: int) -> list[tuple[str, ToolResult]]:
        started: list[_Started] = []
        committed: list[tuple[str, ToolResult]] = []
        while len(committed) < len(pool):
            running = [s.body for s in started if s.body is not None and not s.body.done()]
            head = started[len(committed)] if len(committed) < len(started) else None
            if head is not None and (head.body is None or head.body.done()):
                committed.append(await self._commit(head, step))
            elif len(started) < len(pool) and len(running) < self.max_parallel:
                call = await self._prepare(pool[len(started)], step)
                started.append(call)
                if call.verdict is ALLOWED:
                    call.body = asyncio.create_task(self._execute(call.call, call.planned.tool))
                    await asyncio.sleep(0)  # the body starts before the next ordered stage
            else:
                await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
        return committed

    # -- prepare: the log entry, pre-execute, approval, guards ----------------------------------

    def _mint(self, call_id: str, name: str, arguments: Any, parent: ToolCall | None = None) -> ToolCall:
        return ToolCall(Token(next(self._tokens)), call_id, name, freeze(arguments), parent)

    async def _prepare(self, planned: Planned, step: int) -> _Started:
        call = self._mint(planned.call.call_id, planned.call.name, planned.arguments)
        data = {"turn": 1, "step": step, "callId": call.call_id, "name": call.name, "arguments": planned.call.arguments}
        logged = self.session.append("tool/call", data, call_id=call.call_id)
        try:
            self.presenter.present_call(call)
        except Exception:
            pass  # a failing card falls back to the generic one
        verdict = await self._decide(call)
        if isinstance(verdict, Denied):
            self.telemetry.denied(call, verdict.reason)
        return _Started(planned, call, logged.seq, verdict)

    async def _decide(self, call: ToolCall) -> Verdict:
        try:
            decision = await _onion(self.pre_execute, ALLOWED, call)
            if isinstance(decision, Deny):
                return Denied(decision.reason)
            if isinstance(decision, Ask):
                refusal = await self._ask(call, decision.reason)
                if refusal is not None:
                    return Denied(refusal)
            for guard in self.guards:
                verdict = await guard(call)
                if isinstance(verdict, Deny):
                    return Denied(verdict.reason)
            return ALLOWED
        except Exception as error:
            return Threw(error)

    async def _ask(self, call: ToolCall, reason: str | None) -> str | None:
        """Puts an ask to ctx.approval: None when allowed once, else the refusal."""
        if self.approval is None:
            refusal = reason or f'tool "{call.name}" requires approval (not yet supported)'
            self.telemetry.approval_unavailable(call, refusal)
            return refusal
        asked = {"id": f"approval-{call.call_id}", "toolName": call.name, "callId": call.call_id}
        self.session.append("approval/asked", {**asked, **({"reason": reason} if reason else {})}, call_id=call.call_id)
        answer = await self.approval(ApprovalRequest(call, reason))
        self.session.append("approval/decided", {"id": asked["id"], "outcome": answer}, call_id=call.call_id)
        return None if answer == "allowed-once" else f'approval {answer} for tool "{call.name}"'

    # -- execute: the wrappers around the body ---------------------------------------------------

    async def _execute(self, call: ToolCall, tool: Tool | None) -> Settled:
        deferred: list[str] = []

        async def dispatch(signal: Signal) -> ToolResult:
            if tool is None:
                return ToolResult.from_exception(UnknownToolError(f"unknown tool: {call.name}"))
            if signal.is_set():
                return ToolResult.from_exception(AbortedBeforeDispatch("tool call was cancelled before dispatch"))
            ctx = ToolContext(call, signal, BoundFs(self.fs, call), self.workspace, self.session, deferred)
            try:
                value = await tool.execute(ctx)
                return ToolResult.success(value, render(value))
            except Exception as error:  # the body's throw is a result, never a wrapper's throw
                return ToolResult.from_exception(error)

        def chain(i: int) -> ExecuteNext:
            if i == len(self.execute):
                return dispatch
            timeout = tool.timeout_ms if tool is not None else None
            return lambda signal: self.execute[i](Dispatch(call, signal, timeout), chain(i + 1))

        try:
            result = await chain(0)(asyncio.Event())
        except Exception as error:
            return Threw(error)
        # The body's deferred contexts come first, then the wrappers'.
        return replace(result, contexts=tuple(Context("tool", t) for t in deferred) + result.contexts)

    # -- commit: post-execute, normalization, finalizeContent, tools/result, tool/result --------

    async def _commit(self, started: _Started, step: int) -> tuple[str, ToolResult]:
        call = started.call
        if started.body is not None:
            settled = started.body.result()
        else:
            assert not isinstance(started.verdict, Allow), "an allowed call always has a body task"
            settled = started.verdict
        outcome = await self._settle(call, started.planned.tool, settled)
        self._announce(call, outcome)
        message = {
            "id": f"result-{call.call_id}",
            "role": "user",
            "source": {"kind": "tool", "callId": call.call_id},
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": call.call_id,
                    "content": [b.to_json() for b in outcome.content],
                    "isError": outcome.is_error,
                }
            ],
        }
        data: dict[str, Any] = {"turn": 1, "step": step, "message": message}
        if outcome.error is not None and outcome.error.code is not None:
            data["error"] = {"name": outcome.error.name, "code": outcome.error.code}
        self.session.append(
            "tool/result", data, call_id=call.call_id, surface_op="append", source_seqs=(started.call_seq,)
        )
        try:
            self.presenter.present_result(call, outcome)
        except Exception:
            pass
        return call.call_id, outcome

    async def _settle(self, call: ToolCall, tool: Tool | None, settled: Settled) -> ToolResult:
        """The candidate becomes the frozen outcome (shared by calls and Code Mode sub-calls)."""
        error: Exception | None = None
        if isinstance(settled, Threw):
            error, result = settled.error, ToolResult.from_exception(settled.error)
        elif isinstance(settled, Denied):
            result = ToolResult.failure(Failure(settled.reason))
        else:
            result = settled
        if error is None:
            try:
                decision = await _onion(self.post_execute, Accept(), call, result)
                result = _apply(decision, result, tool)
            except Exception as thrown:
                error = thrown
        if error is not None:
            self.telemetry.normalized(call, error)
            result = ToolResult.from_exception(error)
        if tool is not None and tool.finalize_content is not None:
            try:
                content = tool.finalize_content(call, result)
                if content is not None:
                    result = replace(result, content=tuple(content))
            except Exception as thrown:
                result = ToolResult.from_exception(thrown)
        return result

    # -- Code Mode ---------------------------------------------------------------------------

    async def run_sub_call(self, parent: ToolCall, n: int, name: str, arguments: Any) -> Any:
        """The n-th binding call of `parent`'s program, through every stage from pre-execute to
        `tools/result`. Resolves with its value (its text when it has none); a denial or a
        failure raises ToolCallError with the tool's name and a message only."""
        tool = self._registry.get(name) if name != RUN_CODE else None
        call = self._mint(f"{parent.call_id}:code:{n}", name, arguments, parent)
        logged = {"parentCallId": parent.call_id, "subCallId": call.call_id, "name": name, "arguments": arguments}
        self.session.append("tool/code-dispatch-start", {"rootCallId": parent.call_id, **logged}, call_id=call.call_id)
        verdict = await self._decide(call)
        if isinstance(verdict, Denied):
            self.telemetry.denied(call, verdict.reason)
        settled = await self._execute(call, tool) if isinstance(verdict, Allow) else verdict
        outcome = await self._settle(call, tool, settled)
        self._announce(call, outcome)
        # Its contexts are dropped: nothing may come between the run_code call and its result.
        content = [b.to_json() for b in outcome.content]
        committed = {"rootCallId": parent.call_id, **logged, "isError": outcome.is_error, "content": content}
        self.session.append("tool/code-dispatch", committed, call_id=call.call_id)
        if outcome.is_error:
            raise ToolCallError(name, outcome.error.message if outcome.error is not None else outcome.text)
        return outcome.value if outcome.value is not None else outcome.text

    def _announce(self, call: ToolCall, outcome: ToolResult) -> None:
        """The synchronous `tools/result` notification: observers' async work is not awaited."""
        for observer in self.observers:
            try:
                work = observer(call, outcome)
            except Exception:
                continue
            if work is not None:
                task = asyncio.ensure_future(work)
                self._background.add(task)
                task.add_done_callback(self._background.discard)

    async def drain(self) -> None:
        """Waits for the observers' asynchronous work."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)


def _apply(decision: PostDecision, result: ToolResult, tool: Tool | None) -> ToolResult:
    if isinstance(decision, Block):
        message = "\n".join(b.text for b in decision.feedback) or "tool result blocked by post-execute policy"
        return ToolResult(decision.feedback, is_error=True, error=Failure(message)).with_contexts(
            "post", *decision.contexts
        )
    if decision.content is not None and decision.value is not _UNSET:
        raise ValueError("a post-execute accept cannot replace both content and value")
    if decision.value is not _UNSET:
        if result.is_error:
            raise ValueError("a post-execute accept cannot replace the value of a failed result")
        result = replace(result, value=decision.value, content=render(decision.value))
    if decision.content is not None:
        result = replace(result, content=tuple(decision.content))
    return result.with_contexts("post", *decision.contexts)
