"""The example adapter over a minipipe broken on purpose: `broken_adapter.py BREAKAGE`.

The end-to-end tests run `tep` on it to show the kit records what a pipeline does, not what it
should do: each breakage must be caught by the invariant it breaks.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parent.parent / "example"
sys.path.insert(0, str(EXAMPLE))

import adapter  # noqa: E402  (the example's glue, which imports the kit and minipipe)
import minipipe as mp  # noqa: E402
from minipipe import pipeline as mpp  # noqa: E402

import tep_adapter as tep  # noqa: E402
from tep_adapter import scenario as sc  # noqa: E402


def throw_escapes() -> None:
    """A throw before dispatch escapes the pipeline instead of being normalized."""
    decide = mpp.Pipeline._decide

    async def broken(self: mpp.Pipeline, call: mp.ToolCall) -> Any:
        verdict = await decide(self, call)
        if isinstance(verdict, mpp.Threw):
            raise verdict.error
        return verdict

    mpp.Pipeline._decide = broken  # type: ignore[method-assign]


def outcome_not_frozen() -> None:
    """Observers can change the announced outcome, and the log records the changed one."""
    mp.ToolResult.__setattr__ = object.__setattr__  # type: ignore[method-assign]


def contexts_before_results() -> None:
    """Each call's contexts are injected as soon as it commits, before later results."""
    commit = mpp.Pipeline._commit

    async def broken(self: mpp.Pipeline, started: Any, step: int) -> tuple[str, mp.ToolResult]:
        call_id, outcome = await commit(self, started, step)
        for n, context in enumerate(outcome.contexts, 1):
            message = {
                "id": f"context-{call_id}-{n}",
                "role": "user",
                "content": [{"type": "text", "text": context.text}],
                "source": {"kind": "tool", "callId": call_id},
            }
            self.session.append("user/message", message, call_id=call_id, surface_op="append")
        return call_id, replace(outcome, contexts=())

    mpp.Pipeline._commit = broken  # type: ignore[method-assign]


def sub_calls_overlap() -> None:
    """Binding calls issued together run side by side."""

    async def broken(self: mp.Bindings, tool: str, arguments: Any = None) -> Any:
        self._issued += 1
        return await self._pipeline.run_sub_call(self._parent, self._issued, tool, arguments or {})

    mp.Bindings.call = broken  # type: ignore[method-assign]


def body_abandoned() -> None:
    """A timeout that gives up at the deadline: it cancels the body's task and moves on."""
    wrapper = tep.Run.wrapper

    def broken(self: tep.Run, spec: sc.WrapperSpec) -> Any:
        if not isinstance(spec, sc.TimeoutWrapper):
            return wrapper(self, spec)

        async def give_up(handed: mp.Dispatch, next: Any) -> mp.ToolResult:
            body: asyncio.Future[mp.ToolResult] = asyncio.ensure_future(next(handed.signal))
            done, _ = await asyncio.wait({body}, timeout=(handed.timeout_ms or 0) / 1000)
            if body in done:
                return body.result()
            body.cancel()
            return mp.ToolResult.from_exception(mp.ToolTimeoutError("gave up"))

        return give_up

    tep.Run.wrapper = broken  # type: ignore[method-assign]


BREAKAGES = {
    f.__name__.replace("_", "-"): f
    for f in (throw_escapes, outcome_not_frozen, contexts_before_results, sub_calls_overlap, body_abandoned)
}

if __name__ == "__main__":
    BREAKAGES[sys.argv.pop(1)]()
    raise SystemExit(tep.serve(adapter.setup, adapter.Minipipe(), adapter.MINIPIPE))
