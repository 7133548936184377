"""The quick start's adapter with Code Mode: mypipeline's own runner interprets the programs.

`my_adapter.py` (the README's quick start, which the test writes beside this file) gives the
dialect. Here the `run_code` tool's body hands the scenario's program, translated into
mypipeline's program language, to `mp.CodeRunner`, which numbers and runs its sub-calls itself
and reports them to the kit through `run.code_run`: the kit records what the runner reports.
"""

from __future__ import annotations

from typing import Any

import mypipeline as mp
from my_adapter import MyDialect  # type: ignore[import-not-found]  # (the README's block, written by the test)

import tep_adapter as tep
from tep_adapter import scenario as sc


class CodeModeDialect(MyDialect):  # type: ignore[misc]
    def identity(self, call: mp.Call) -> tep.Identity:
        parent = call.parent
        return tep.Identity(
            str(call.token),
            call.id,
            call.tool,
            call.args,
            parent_token=None if parent is None else str(parent.token),
            parent=None if parent is None else parent.id,
        )


def translate(steps: tuple[sc.ProgramStep, ...]) -> list[dict[str, Any]]:
    """A scenario's program in mypipeline's program language."""

    def bind(call: sc.BindingCall) -> dict[str, Any]:
        return {"call": call.tool, "args": call.arguments, "failOnReject": call.on_reject == "fail"}

    program: list[dict[str, Any]] = []
    for step in steps:
        match step:
            case sc.Call(call=call):
                program.append(bind(call))
            case sc.All(calls=calls):
                program.append({"all": [bind(c) for c in calls]})
            case sc.CallRunCode():
                program.append({"runCode": True})
            case sc.Log(text=text):
                program.append({"log": text})
            case sc.Return(value=value):
                program.append({"return": value})
            case sc.Throw(message=message):
                program.append({"throw": message})
    return program


async def setup(run: tep.Run) -> None:
    async def run_code(ctx: mp.ToolContext) -> str:
        async with run.code_run(ctx.call) as program:
            runner = mp.CodeRunner(pipeline, ctx.call, program.sub_call, program.resolved, program.rejected)
            return await runner.run(translate(program.steps))

    tools = [mp.Tool(t.name, run.body, t.timeout_ms, run.content_finalizer(t)) for t in run.scenario.tools]
    pipeline = mp.Pipeline(
        tools=[*tools, mp.Tool("run_code", run_code)],
        pre_execute=run.pre_listeners(),
        approval=run.approval(),
        guards=run.guards(sync=True),
        wrappers=run.wrappers(),
        post_execute=run.post_listeners(),
        observers=run.observers(),
    )
    rec = run.recorder
    pipeline.log.subscribe(lambda e: rec.on_event(e.type, e.data, e.call_id, seq=e.seq, source_seqs=e.source_seqs))
    rec.on_model((c.call_id, c.tool) for c in run.scenario.calls)
    await run.batch(pipeline.run([(c.call_id, c.tool, c.raw_arguments) for c in run.scenario.calls]))


if __name__ == "__main__":
    implementation = tep.Implementation("mypipeline", capabilities=("approval", "code-mode"))
    raise SystemExit(tep.serve(setup, CodeModeDialect(), implementation))
