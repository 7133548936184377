"""A fake harness for the unit tests: plain tuples and dicts, and a dialect that speaks them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from tep_adapter import (
    Dialect,
    Identity,
    ResultRecord,
    Run,
    decode_scenario,
    text_block,
)
from tep_adapter import scenario as sc
from tep_adapter.records import AdditionalContext


@dataclass(frozen=True)
class FakeCall:
    call_id: str
    name: str = "tool"
    arguments: Any = field(default_factory=dict)
    token: str = "tok-1"
    parent: FakeCall | None = None


@dataclass
class FakeDispatch:
    call: FakeCall
    signal: Any
    timeout_ms: int | None = None


@dataclass
class FakeCtx:
    call: FakeCall
    signal: Any = field(default_factory=asyncio.Event)
    done: list[tuple[Any, ...]] = field(default_factory=list)


@dataclass(frozen=True)
class FrozenOutcome:
    content: tuple[str, ...]


def ok(text: str = "ok") -> ResultRecord:
    return {"isError": False, "content": [text_block(text)]}


def failed(message: str) -> ResultRecord:
    return {"isError": True, "content": [text_block(f"Error: {message}")], "error": {"message": message}}


class FakeDialect(Dialect):
    def identity(self, call: FakeCall) -> Identity:
        parent = call.parent
        return Identity(
            call.token,
            call.call_id,
            call.name,
            call.arguments,
            parent_token=parent.token if parent else None,
            parent=parent.call_id if parent else None,
        )

    def pre_decision(self, action: Any) -> tuple[Any, ...]:
        if isinstance(action, sc.Deny):
            return ("deny", action.reason)
        if isinstance(action, sc.Ask):
            return ("ask", action.reason)
        if isinstance(action, sc.Rewrite):
            return ("allow", action.arguments)
        return ("allow", None)

    def pre_outcome(self, decision: tuple[Any, ...]) -> tuple[str, str | None]:
        return decision[0], decision[1] if decision[0] != "allow" else None

    def approval_call_id(self, request: FakeCall) -> str:
        return request.call_id

    def approval_answer(self, outcome: str) -> str:
        return f"answer:{outcome}"

    def guard_verdict(self, action: Any) -> Any:
        if isinstance(action, sc.Deny):
            return ("deny", action.reason)
        return "allow" if isinstance(action, sc.Allow) else "abstain"

    def execute_call(self, handed: FakeDispatch) -> tuple[FakeCall, Any, int | None]:
        return handed.call, handed.signal, handed.timeout_ms

    def timeout_result(self, ms: int) -> ResultRecord:
        return failed(f"tool call timed out after {ms}ms")

    def with_wrapper_context(self, result: ResultRecord, text: str) -> ResultRecord:
        added: AdditionalContext = {"origin": "wrapper", "text": text}
        return {**result, "additionalContexts": [*result.get("additionalContexts", []), added]}

    def body_call(self, ctx: FakeCtx) -> tuple[FakeCall, Any]:
        return ctx.call, ctx.signal

    def read(self, ctx: FakeCtx, path: str) -> None:
        ctx.done.append(("read", path))

    async def write(self, ctx: FakeCtx, path: str, content: str) -> None:  # async on purpose: both work
        ctx.done.append(("write", path, content))

    def edit(self, ctx: FakeCtx, path: str, old: str, new: str) -> None:
        ctx.done.append(("edit", path, old, new))

    def external_write(self, ctx: FakeCtx, path: str, content: str) -> None:
        ctx.done.append(("externalWrite", path, content))

    def todo(self, ctx: FakeCtx, todos: tuple[sc.TodoItem, ...]) -> None:
        ctx.done.append(("todo", todos))

    def hook(self, ctx: FakeCtx, point: str, handler_id: str, decision: str) -> None:
        ctx.done.append(("hook", point, handler_id, decision))

    def defer_context(self, ctx: FakeCtx, text: str) -> None:
        ctx.done.append(("defer", text))

    def post_decision(self, action: Any) -> dict[str, Any]:
        contexts = [] if action.context is None else [action.context]
        if isinstance(action, sc.Block):
            return {"outcome": "block", "feedback": action.feedback, "contexts": contexts}
        return {"outcome": "accept", "content": action.content, "value": action.value, "contexts": contexts}

    def add_post_context(self, decision: dict[str, Any], text: str) -> dict[str, Any]:
        return {**decision, "contexts": [*decision["contexts"], text]}

    def post_outcome(self, decision: dict[str, Any]) -> str:
        return str(decision["outcome"])

    def result(self, result: Any) -> ResultRecord:
        if isinstance(result, FrozenOutcome):
            return {"isError": False, "content": [text_block(t) for t in result.content]}
        return result  # type: ignore[no-any-return]

    def content(self, texts: list[str]) -> tuple[str, ...]:
        return tuple(texts)


def scenario(**fields: Any) -> dict[str, Any]:
    """A scenario object: one tool `tool`, one call `c1`, plus `fields`."""
    base: dict[str, Any] = {
        "id": "test",
        "description": "a test",
        "spec": "test",
        "exercises": [],
        "tools": [{"name": "tool"}],
        "calls": [{"callId": "c1", "tool": "tool", "arguments": {"path": "a"}}],
        "expect": {"calls": {}},
    }
    base.update(fields)
    return base


def run_of(spec: str = "rev2", **fields: Any) -> Run:
    return Run(decode_scenario(scenario(**fields)), FakeDialect(), spec)  # type: ignore[arg-type]


def records(run: Run, kind: str | None = None, node: str | None = None) -> list[dict[str, Any]]:
    """The run's records, optionally only stages at `node` or records of `kind`."""
    found = run.recorder.trace()
    if node is not None:
        return [r for r in found if r.get("node") == node]
    if kind is not None:
        return [r for r in found if r["kind"] == kind]
    return found


def shape(run: Run) -> list[str]:
    """The trace as short labels: `node`, `event type` or `mark name`, with the call."""
    labels = []
    for r in run.recorder.trace():
        what = r.get("node") or r.get("mark") or r.get("event", {}).get("type")
        labels.append(f"{what}@{r['call']}" if "call" in r else str(what))
    return labels
