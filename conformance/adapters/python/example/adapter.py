"""tep adapter for minipipe: the tep_adapter kit's scripted parts, mounted on the pipeline's hooks.

    tep run --adapter "python3 conformance/adapters/python/example/adapter.py"
    python3 conformance/adapters/python/example/adapter.py --scenario allow-runs-body --tep target/debug/tep

Works with the kit pip-installed, or straight from a checkout (the kit is then imported from the
directory above this one).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the example pipeline, minipipe
try:
    import tep_adapter as tep
except ImportError:  # not installed: use the kit next to this example
    sys.path.insert(0, str(HERE.parent))
    import tep_adapter as tep
import minipipe as mp  # noqa: E402

from tep_adapter import scenario as sc  # noqa: E402


class Minipipe(tep.Dialect):
    """How the kit's scripts speak minipipe's types."""

    def identity(self, call: mp.ToolCall) -> tep.Identity:
        parent = call.parent
        return tep.Identity(
            str(call.token),
            call.call_id,
            call.name,
            call.arguments,
            parent_token=str(parent.token) if parent else None,
            parent=parent.call_id if parent else None,
        )

    def pre_decision(self, action: sc.Allow | sc.Deny | sc.Ask | sc.Rewrite) -> mp.Allow | mp.Deny | mp.Ask:
        if isinstance(action, sc.Deny):
            return mp.Deny(action.reason)
        if isinstance(action, sc.Ask):
            return mp.Ask(action.reason)
        return mp.Allow(updated_input=action.arguments if isinstance(action, sc.Rewrite) else None)

    def pre_outcome(self, decision: mp.Allow | mp.Deny | mp.Ask) -> tuple[str, str | None]:
        return type(decision).__name__.lower(), getattr(decision, "reason", None)

    def approval_call_id(self, request: mp.ApprovalRequest) -> str:
        return request.call.call_id

    def guard_verdict(self, action: sc.Abstain | sc.Deny | sc.Allow) -> mp.Deny | mp.Allow | None:
        if isinstance(action, sc.Deny):
            return mp.Deny(action.reason)
        return mp.Allow() if isinstance(action, sc.Allow) else None

    def execute_call(self, handed: mp.Dispatch) -> tuple[mp.ToolCall, Any, int | None]:
        return handed.call, handed.signal, handed.timeout_ms

    def timeout_result(self, ms: int) -> mp.ToolResult:
        return mp.ToolResult.from_exception(mp.ToolTimeoutError(f"tool call timed out after {ms}ms"))

    def with_wrapper_context(self, result: mp.ToolResult, text: str) -> mp.ToolResult:
        return result.with_contexts("wrapper", text)

    def body_call(self, ctx: mp.ToolContext) -> tuple[mp.ToolCall, Any]:
        return ctx.call, ctx.signal

    def cancelled(self) -> BaseException:
        return mp.AbortError("tool call was cancelled")

    def read(self, ctx: mp.ToolContext, path: str) -> str:
        return ctx.fs.read(path)

    def write(self, ctx: mp.ToolContext, path: str, content: str) -> None:
        ctx.fs.write(path, content)

    def edit(self, ctx: mp.ToolContext, path: str, old: str, new: str) -> None:
        ctx.fs.edit(path, old, new)

    def external_write(self, ctx: mp.ToolContext, path: str, content: str) -> None:
        ctx.workspace.put(path, content)

    def todo(self, ctx: mp.ToolContext, todos: tuple[sc.TodoItem, ...]) -> None:
        ctx.write_todos([{"content": t.content, "status": t.status} for t in todos])

    def hook(self, ctx: mp.ToolContext, point: str, handler_id: str, decision: str) -> None:
        ctx.record_hook(point, handler_id, decision)

    def defer_context(self, ctx: mp.ToolContext, text: str) -> None:
        ctx.defer_context(text)

    def post_decision(self, action: sc.Accept | sc.Block) -> mp.Accept | mp.Block:
        contexts = () if action.context is None else (action.context,)
        if isinstance(action, sc.Block):
            return mp.Block(mp.text(action.feedback), contexts)
        accept = mp.Accept(None if action.content is None else mp.text(action.content), contexts=contexts)
        return replace(accept, value=action.value) if action.replaces_value else accept

    def add_post_context(self, decision: mp.Accept | mp.Block, text: str) -> mp.Accept | mp.Block:
        return replace(decision, contexts=(*decision.contexts, text))

    def post_outcome(self, decision: mp.Accept | mp.Block) -> str:
        return "block" if isinstance(decision, mp.Block) else "accept"

    def result(self, result: mp.ToolResult) -> tep.ResultRecord:
        return result.to_json()  # type: ignore[return-value]

    def content(self, texts: list[str]) -> tuple[mp.TextBlock, ...]:
        return mp.text(*texts)

    def program_output(self, output: tep.ProgramOutput) -> mp.ProgramOutput:
        return mp.ProgramOutput(output.logs, output.value, output.returned)


class Probe(mp.Telemetry, mp.Presenter):
    """What only the pipeline knows (level `full`) and its UI cards, recorded."""

    def __init__(self, rec: tep.Recorder) -> None:
        self.rec = rec

    def batch_planned(self, calls: Sequence[mp.Planned]) -> None:
        self.rec.on_model((p.call.call_id, p.call.name, p.concurrency_safe) for p in calls)

    def approval_unavailable(self, call: mp.ToolCall, reason: str) -> None:
        self.rec.on_approval(call, "unavailable", reason)

    def denied(self, call: mp.ToolCall, reason: str) -> None:
        self.rec.on_denied(call, reason)

    def normalized(self, call: mp.ToolCall, error: BaseException) -> None:
        self.rec.on_normalized(call, str(error))

    def batch_settled(self) -> None:
        self.rec.on_batch_settled()

    def present_call(self, call: mp.ToolCall) -> None:
        self.rec.on_present_call(call)

    def present_result(self, call: mp.ToolCall, outcome: mp.ToolResult) -> None:
        self.rec.on_present_result(call)


async def setup(run: tep.Run) -> None:
    """A fresh pipeline with the scenario's scripted parts in every hook; runs the batch."""
    scenario, rec, probe = run.scenario, run.recorder, Probe(run.recorder)
    pipeline = mp.Pipeline(
        tools=[mp.Tool(t.name, run.body, t.concurrency_safe, t.timeout_ms, run.finalizer(t)) for t in scenario.tools],
        pre_execute=run.pre_listeners(),
        approval=run.approval(),
        guards=run.guards(),
        execute=run.wrappers(),
        post_execute=run.post_listeners(),
        observers=run.observers(),
        workspace=mp.Workspace(scenario.files),
        max_parallel=scenario.max_parallel,
        presenter=probe,
        telemetry=probe,
        code_runner=run.program,
    )
    pipeline.session.subscribe(lambda event: rec.on_event(event.type, event.data, event.call_id))
    pipeline.fs.watch(lambda i, refusal: rec.on_fs_gate(i.call, i.kind, i.target, i.version, refusal is None, refusal))
    await run.batch(pipeline.run_batch([mp.ModelCall(c.call_id, c.tool, c.raw_arguments) for c in scenario.calls]))


MINIPIPE = tep.Implementation(
    "minipipe", version="0.1.0", capabilities=tep.ALL_CAPABILITIES, specs=("rev2",), observation="full"
)

if __name__ == "__main__":
    raise SystemExit(tep.serve(setup, Minipipe(), MINIPIPE))
