"""mypipeline: a tiny tool-execution pipeline, the harness the README's quick start is glue for.

Its shapes are its own, as a real harness's are: frozen calls with read-only arguments, frozen
results, synchronous guards that return a reason or None, a content-only
`finalize_content(content)` that finds its call in a context variable, and a session log that
numbers its own events and hands them out read-only. Calls run one at a time, in model order.
Its Code Mode runner (`CodeRunner`) interprets programs itself and numbers its own sub-calls.

`tests/test_quick_start.py` runs the README's quick start on it, and breaks it on purpose
(`tests/quickstart/broken.py`) to show each breakage reported under its own invariant.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal

Origin = Literal["tool", "wrapper", "post"]


def freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(freeze(v) for v in value)
    return value


def render(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)


@dataclass(frozen=True)
class Call:
    id: str
    tool: str
    args: Any
    token: int
    parent: Call | None = None
    """For a Code Mode sub-call: the run_code call whose program issued it."""


current_call: contextvars.ContextVar[Call] = contextvars.ContextVar("current_call")
"""The call being run (what a content-only finalize_content is about)."""


@dataclass(frozen=True)
class Result:
    content: tuple[str, ...]
    is_error: bool = False
    error: str | None = None
    code: str | None = None
    contexts: tuple[tuple[Origin, str], ...] = ()
    value: Any = field(default=None, compare=False)

    @classmethod
    def ok(cls, value: Any) -> Result:
        return cls((render(value),), value=value)

    @classmethod
    def fail(cls, message: str, code: str | None = None) -> Result:
        return cls((f"Error: {message}",), True, message, code)

    def with_context(self, origin: Origin, text: str) -> Result:
        return replace(self, contexts=(*self.contexts, (origin, text)))

    def to_json(self) -> dict[str, Any]:
        content = [{"type": "text", "text": t} for t in self.content]
        found: dict[str, Any] = {"isError": self.is_error, "content": content}
        if self.error is not None:
            found["error"] = {"message": self.error}
            if self.code is not None:
                found["error"]["info"] = {"name": "ToolError", "code": self.code}
        if self.contexts:
            found["additionalContexts"] = [{"origin": o, "text": t} for o, t in self.contexts]
        return found


def failure(error: BaseException) -> Result:
    return Result.fail(str(error) or type(error).__name__, getattr(error, "code", None))


@dataclass(frozen=True)
class Allow:
    pass


@dataclass(frozen=True)
class Deny:
    reason: str


@dataclass(frozen=True)
class Ask:
    reason: str | None = None


UNSET: Any = object()


@dataclass(frozen=True)
class Accept:
    content: str | None = None
    value: Any = UNSET
    contexts: tuple[str, ...] = ()


@dataclass(frozen=True)
class Block:
    feedback: str
    contexts: tuple[str, ...] = ()


@dataclass(frozen=True)
class ApprovalRequest:
    call: Call
    reason: str | None


@dataclass(frozen=True)
class Dispatch:
    """What a wrapper is handed; `next(signal)` runs the rest."""

    call: Call
    signal: asyncio.Event
    timeout_ms: int | None


@dataclass
class ToolContext:
    call: Call
    signal: asyncio.Event
    defer: Callable[[str], None]
    """Adds a context to inject after the batch's results."""


@dataclass(frozen=True)
class Tool:
    name: str
    run: Callable[[ToolContext], Awaitable[Any]]
    timeout_ms: int | None = None
    finalize_content: Callable[[tuple[str, ...]], Sequence[str] | None] | None = None


@dataclass(frozen=True)
class Event:
    seq: int
    type: str
    data: Mapping[str, Any]
    call_id: str | None = None
    source_seqs: tuple[int, ...] | None = None


class Log:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self._subscribers: list[Callable[[Event], object]] = []

    def subscribe(self, subscriber: Callable[[Event], object]) -> None:
        self._subscribers.append(subscriber)

    def append(self, type: str, data: dict[str, Any], call_id: str | None = None, **more: Any) -> int:
        event = Event(len(self.events) + 1, type, freeze(data), call_id, **more)
        self.events.append(event)
        for subscriber in self._subscribers:
            subscriber(event)
        return event.seq


PreListener = Callable[[Call, Callable[[], Awaitable[Any]]], Awaitable[Any]]
PostListener = Callable[[Call, Result, Callable[[], Awaitable[Any]]], Awaitable[Any]]
Wrapper = Callable[[Dispatch, Callable[[asyncio.Event], Awaitable[Result]]], Awaitable[Result]]


async def waterfall(listeners: Sequence[Callable[..., Awaitable[Any]]], handed: tuple[Any, ...], default: Any) -> Any:
    """Each listener gets `next()` for the rest; the last `next()` is the default."""

    async def step(i: int) -> Any:
        if i == len(listeners):
            return default
        return await listeners[i](*handed, lambda: step(i + 1))

    return await step(0)


@dataclass
class Pipeline:
    tools: Sequence[Tool] = ()
    pre_execute: Sequence[PreListener] = ()
    approval: Callable[[ApprovalRequest], Awaitable[str]] | None = None
    guards: Sequence[Callable[[Call], str | None]] = ()
    wrappers: Sequence[Wrapper] = ()
    post_execute: Sequence[PostListener] = ()
    observers: Sequence[Callable[[Call, Result], object]] = ()
    log: Log = field(default_factory=Log)

    def __post_init__(self) -> None:
        self._tools = {t.name: t for t in self.tools}
        self._tokens = itertools.count(1)

    async def run(self, calls: Sequence[tuple[str, str, str]]) -> list[Result]:
        """One assistant message's calls: (id, tool name, raw arguments) each."""
        done = [await self._run(call_id, name, raw) for call_id, name, raw in calls]
        for call_id, outcome in done:
            for n, (_, text) in enumerate(outcome.contexts, 1):
                message = {"id": f"context-{call_id}-{n}", "role": "user", "content": [{"type": "text", "text": text}]}
                self.log.append("user/message", {**message, "source": {"kind": "tool", "callId": call_id}}, call_id)
        return [outcome for _, outcome in done]

    async def _run(self, call_id: str, name: str, raw: str) -> tuple[str, Result]:
        call = Call(call_id, name, freeze(json.loads(raw) if raw.strip() else {}), next(self._tokens))
        current = current_call.set(call)
        logged = self.log.append("tool/call", {"turn": 1, "step": 1, "callId": call_id, "name": name, "arguments": raw})
        result = await self._outcome(call, self._tools.get(name))
        content = result.to_json()["content"]
        block = {"type": "tool-result", "toolCallId": call_id, "content": content, "isError": result.is_error}
        message: dict[str, Any] = {"id": f"result-{call_id}", "role": "user", "content": [block]}
        message["source"] = {"kind": "tool", "callId": call_id}
        data: dict[str, Any] = {"turn": 1, "step": 1, "message": message}
        if result.code is not None:
            data["error"] = {"name": "ToolError", "code": result.code}
        self.log.append("tool/result", data, call_id, source_seqs=(logged,))
        current_call.reset(current)
        return call_id, result

    async def run_sub_call(self, parent: Call, n: int, name: str, args: Any) -> Any:
        """A program's n-th binding call, through every stage to its notification: its value
        (else its content text), or ToolCallError. Its contexts are dropped."""
        call = Call(f"{parent.id}:code:{n}", name, freeze(args), next(self._tokens), parent)
        logged = {"rootCallId": parent.id, "parentCallId": parent.id, "subCallId": call.id, "name": name}
        self.log.append("tool/code-dispatch-start", {**logged, "arguments": args}, call.id)
        current = current_call.set(call)
        result = await self._outcome(call, self._tools.get(name))
        current_call.reset(current)
        content = result.to_json()["content"]
        self.log.append(
            "tool/code-dispatch", {**logged, "arguments": args, "isError": result.is_error, "content": content}
        )
        if result.is_error:
            raise ToolCallError(name, result.error or "\n".join(result.content))
        return result.value if result.value is not None else "\n".join(result.content)

    async def _outcome(self, call: Call, tool: Tool | None) -> Result:
        """Pre-execute to the tools/result notification."""
        try:
            refusal = await self._decide(call)
            if refusal is None:
                result = await self._post(call, await self._execute(call, tool))
            else:
                result = await self._denied(call, refusal)
        except Exception as error:  # a throw skips post-execute and is normalized
            result = failure(error)
        if tool is not None and tool.finalize_content is not None:
            try:
                content = tool.finalize_content(result.content)
                result = result if content is None else replace(result, content=tuple(content))
            except Exception as error:
                result = failure(error)
        for observer in self.observers:  # a synchronous notification: nothing is awaited
            try:
                observer(call, result)
            except Exception:
                pass
        return result

    async def _decide(self, call: Call) -> str | None:
        """None when the call may run, else why not."""
        decision = await waterfall(self.pre_execute, (call,), Allow())
        if isinstance(decision, Deny):
            return decision.reason
        if isinstance(decision, Ask):
            if self.approval is None:
                return decision.reason or f'tool "{call.tool}" requires approval (not yet supported)'
            asked = {"id": f"approval-{call.id}", "toolName": call.tool, "callId": call.id}
            self.log.append("approval/asked", {**asked, **({"reason": decision.reason} if decision.reason else {})})
            answer = await self.approval(ApprovalRequest(call, decision.reason))
            self.log.append("approval/decided", {"id": asked["id"], "outcome": answer}, call.id)
            if answer != "allowed-once":
                return f'approval {answer} for tool "{call.tool}"'
        return self._guard(call)

    def _guard(self, call: Call) -> str | None:
        """Monotonic guards: the first reason wins, and no later guard is consulted."""
        for guard in self.guards:
            reason = guard(call)
            if reason is not None:
                return reason
        return None

    async def _execute(self, call: Call, tool: Tool | None) -> Result:
        deferred: list[str] = []

        async def dispatch(signal: asyncio.Event) -> Result:
            if tool is None:
                return Result.fail(f"unknown tool: {call.tool}", "UNKNOWN_TOOL")
            try:
                return Result.ok(await tool.run(ToolContext(call, signal, deferred.append)))
            except Exception as error:  # a body's throw is a result
                return failure(error)

        def rest(i: int) -> Callable[[asyncio.Event], Awaitable[Result]]:
            if i == len(self.wrappers):
                return dispatch
            timeout = tool.timeout_ms if tool is not None else None
            return lambda signal: self.wrappers[i](Dispatch(call, signal, timeout), rest(i + 1))

        result = await rest(0)(asyncio.Event())
        return replace(result, contexts=tuple(("tool", t) for t in deferred) + result.contexts)

    async def _denied(self, call: Call, reason: str) -> Result:
        """A denied call skips its body; post-execute still sees the denial."""
        return await self._post(call, Result.fail(reason))

    async def _post(self, call: Call, result: Result) -> Result:
        return self._apply(await waterfall(self.post_execute, (call, result), Accept()), result)

    def _apply(self, decision: Accept | Block, result: Result) -> Result:
        if isinstance(decision, Block):
            contexts: tuple[tuple[Origin, str], ...] = tuple(("post", c) for c in decision.contexts)
            return Result((decision.feedback,), True, decision.feedback or "blocked", contexts=contexts)
        if decision.value is not UNSET:
            if result.is_error or decision.content is not None:
                raise ValueError("a post-execute accept cannot replace this value")
            result = replace(result, content=(render(decision.value),), value=decision.value)
        if decision.content is not None:
            result = replace(result, content=(decision.content,))
        return replace(result, contexts=result.contexts + tuple(("post", c) for c in decision.contexts))


class ToolCallError(Exception):
    """What a program sees when a binding call is denied or fails: the tool's name and a message."""

    def __init__(self, tool_name: str, message: str) -> None:
        super().__init__(f"{tool_name}: {message}")
        self.tool_name = tool_name
        self.message = message


class CodeRunFailedError(Exception):
    code = "CODE_RUN_FAILED"


class CodeRunner:
    """Runs a `run_code` call's program: a list of steps, `{"call": tool, "args": ...,
    "failOnReject": bool}`, `{"all": [calls]}`, `{"log": text}`, `{"return": value}`,
    `{"throw": message}`, `{"runCode": true}`. Binding calls are numbered as issued and run one at
    a time, in that order; the runner tells its hooks as they are issued and as they settle."""

    def __init__(
        self,
        pipeline: Pipeline,
        call: Call,
        on_issue: Callable[[int, str], object] = lambda n, sub: None,
        on_resolve: Callable[[str], object] = lambda sub: None,
        on_reject: Callable[[str, ToolCallError], object] = lambda sub, error: None,
    ) -> None:
        self._pipeline, self._call = pipeline, call
        self._on_issue, self._on_resolve, self._on_reject = on_issue, on_resolve, on_reject
        self._issued = 0
        self._lane = asyncio.Lock()

    async def _bind(self, step: Mapping[str, Any]) -> tuple[str, Any, ToolCallError | None]:
        self._issued += 1
        n, sub_id = self._issued, f"{self._call.id}:code:{self._issued}"
        self._on_issue(n, sub_id)
        async with self._lane:
            try:
                value = await self._pipeline.run_sub_call(self._call, n, step["call"], step.get("args", {}))
            except ToolCallError as error:
                self._on_reject(sub_id, error)
                return step["call"], None, error
        self._on_resolve(sub_id)
        return step["call"], value, None

    async def run(self, program: Sequence[Mapping[str, Any]]) -> str:
        try:
            return await self._run(program)
        except Exception as error:
            raise CodeRunFailedError(str(error)) from error

    async def _run(self, program: Sequence[Mapping[str, Any]]) -> str:
        logs: list[str] = []
        for step in program:
            if "call" in step or "all" in step:
                group = [step] if "call" in step else step["all"]
                settled = await asyncio.gather(*(self._bind(s) for s in group))
                for tool, value, error in settled:
                    shown = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
                    logs.append(f"{tool} -> {shown}" if error is None else f"{tool} rejected: {error}")
                failing = (error for s, (_, _, error) in zip(group, settled, strict=True) if s.get("failOnReject"))
                failed = next((error for error in failing if error is not None), None)
                if failed is not None:
                    raise failed
            elif "runCode" in step:
                logs.append("run_code rejected: run_code: run_code is not available to programs")
            elif "log" in step:
                logs.append(step["log"])
            elif "return" in step:
                logs.append(render(step["return"]))
                break
            elif "throw" in step:
                raise RuntimeError(step["throw"])
        return "\n".join(logs) if logs else "(run_code completed with no output)"
