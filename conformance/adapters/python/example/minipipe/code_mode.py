"""Code Mode: the reserved `run_code` tool runs a program whose tool calls are sub-calls.

Each binding call re-enters the pipeline (`Pipeline.run_sub_call`: pre-execute to `tools/result`)
as `<parent>:code:<n>`, carrying the parent's token, one at a time in the order the program
issued them. A denied or failed sub-call rejects with ToolCallError (the tool's name and a
message); its contexts are dropped.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .pipeline import RUN_CODE, Tool, ToolCall, ToolContext
from .results import CodeRunFailedError, ToolCallError

if TYPE_CHECKING:
    from .pipeline import Pipeline


@dataclass(frozen=True)
class ProgramOutput:
    """What a program leaves: its log lines and, if it returned one, its value."""

    logs: tuple[str, ...] = ()
    value: Any = None
    returned: bool = False

    def text(self) -> str:
        """The `run_code` content: the logs, then the value (JSON pretty-printed), by lines."""
        parts = list(self.logs)
        if self.returned:
            parts.append(self.value if isinstance(self.value, str) else json.dumps(self.value, indent=2))
        return "\n".join(parts) if parts else "(run_code completed with no output)"


class Bindings:
    """The tools a program can call (never `run_code`). Calls issued together, like
    `asyncio.gather(tools.call(...), ...)`, still run one at a time, in the order issued."""

    def __init__(self, pipeline: Pipeline, parent: ToolCall) -> None:
        self._pipeline = pipeline
        self._parent = parent
        self._issued = 0
        self._lane = asyncio.Lock()

    @property
    def tools(self) -> list[str]:
        return self._pipeline.tool_names()

    async def call(self, tool: str, arguments: Any = None) -> Any:
        if tool == RUN_CODE:
            raise ToolCallError(tool, "run_code is not available to programs")
        self._issued += 1
        n = self._issued
        async with self._lane:
            return await self._pipeline.run_sub_call(self._parent, n, tool, {} if arguments is None else arguments)


Runner = Callable[[ToolCall, Bindings], Awaitable[ProgramOutput]]
"""Runs a `run_code` call's program with its bindings (a real harness evaluates the source the
call's arguments carry)."""


def run_code_tool(pipeline: Pipeline, runner: Runner) -> Tool:
    async def execute(ctx: ToolContext) -> str:
        try:
            output = await runner(ctx.call, Bindings(pipeline, ctx.call))
        except Exception as error:
            raise CodeRunFailedError(str(error)) from error
        return output.text()

    return Tool(RUN_CODE, execute)
