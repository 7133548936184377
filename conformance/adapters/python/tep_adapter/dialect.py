"""The dialect: how the kit speaks to one harness.

The interpreters and the recorder know the scenario language and the trace; they do not know your
harness's types. A `Dialect` subclass, written once per harness, translates: it says what a call
is (its identity), builds your decisions and results from the scripts' actions, and reads your
decisions and results back for the trace. Every method is small; most are one line.

Methods that raise NotImplementedError here have no sensible default: override those your
scenarios reach (a harness without an fs gate never declares `fs-gate`, so `read`, `write` and
`edit` are never called).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any

from .cancel import Signal
from .records import Identity, ResultRecord, jsonable
from .scenario import Abstain, Accept, Allow, Ask, Block, Deny, Json, Rewrite, TodoItem


class Cancelled(Exception):
    """What a scripted body raises when it stops after its signal was cancelled."""

    def __init__(self, message: str = "tool call was cancelled") -> None:
        super().__init__(message)


@dataclass(frozen=True)
class ProgramOutput:
    """What a scripted Code Mode program leaves: its log lines and, if it returned one, a value."""

    logs: tuple[str, ...]
    value: Json = None
    returned: bool = False

    def text(self) -> str:
        """The `run_code` content the doc describes: the logs, then the value, by newlines."""
        parts = list(self.logs)
        if self.returned:
            parts.append(self.value if isinstance(self.value, str) else json.dumps(self.value, indent=2))
        return "\n".join(parts) if parts else "(run_code completed with no output)"


def _camel(name: str) -> str:
    return re.sub(r"_([a-z])", lambda m: m.group(1).upper(), name)


class Dialect:
    """Translations between the kit and a harness. Subclass it; see the module docs."""

    # -- identity --------------------------------------------------------------------------

    def identity(self, call: Any) -> Identity:
        """What a stage was handed, as a trace identity (token, call id, name, arguments)."""
        raise NotImplementedError("Dialect.identity")

    # -- tools/pre-execute -----------------------------------------------------------------

    def pre_decision(self, action: Allow | Deny | Ask | Rewrite) -> Any:
        """Your pre-execute decision for a scripted action. For Rewrite, return what your
        pipeline offers to allow with other arguments (e.g. an allow with an updated input)."""
        raise NotImplementedError("Dialect.pre_decision")

    def pre_outcome(self, decision: Any) -> tuple[str, str | None]:
        """The trace outcome of your decision: ("allow" | "deny" | "ask", reason or None)."""
        raise NotImplementedError("Dialect.pre_outcome")

    # -- ctx.approval ----------------------------------------------------------------------

    def approval_call_id(self, request: Any) -> str:
        """The call id an approval request is about."""
        raise NotImplementedError("Dialect.approval_call_id")

    def approval_answer(self, outcome: str) -> Any:
        """Your prompt's answer for "allowed-once", "rejected", "cancelled" or "unavailable"."""
        return outcome

    # -- guards ----------------------------------------------------------------------------

    def guard_verdict(self, action: Abstain | Deny | Allow) -> Any:
        """Your guard's verdict (Allow: whatever your guard API lets a guard try to allow with)."""
        raise NotImplementedError("Dialect.guard_verdict")

    # -- tools/execute ---------------------------------------------------------------------

    def execute_call(self, handed: Any) -> tuple[Any, Signal, int | None]:
        """What an execute wrapper was handed: (the call, the signal to pass to `next`, the
        tool's declared timeout in ms or None)."""
        raise NotImplementedError("Dialect.execute_call")

    def timeout_result(self, ms: int) -> Any:
        """Your TOOL_TIMEOUT error result: "tool call timed out after {ms}ms"."""
        raise NotImplementedError("Dialect.timeout_result")

    def with_wrapper_context(self, result: Any, text: str) -> Any:
        """`result` with a context added by a wrapper (origin `wrapper`)."""
        raise NotImplementedError("Dialect.with_wrapper_context")

    def is_error(self, result: Any) -> bool:
        return self.result(result)["isError"]

    # -- the body --------------------------------------------------------------------------

    def body_call(self, ctx: Any) -> tuple[Any, Signal]:
        """What a tool body was handed: (the call, its cancellation signal)."""
        raise NotImplementedError("Dialect.body_call")

    def cancelled(self) -> BaseException:
        """What a body raises when it stops after cancellation (your ABORTED error, ideally)."""
        return Cancelled()

    def read(self, ctx: Any, path: str) -> Awaitable[Any] | Any:
        """Read a file through your fs tools (they record `fs/observed`); raise if missing."""
        raise NotImplementedError("Dialect.read")

    def write(self, ctx: Any, path: str, content: str) -> Awaitable[Any] | Any:
        """Create or overwrite a file through your `fs/write-intent` gate."""
        raise NotImplementedError("Dialect.write")

    def edit(self, ctx: Any, path: str, old: str, new: str) -> Awaitable[Any] | Any:
        """Replace `old` with `new` through your `fs/edit-intent` gate."""
        raise NotImplementedError("Dialect.edit")

    def external_write(self, ctx: Any, path: str, content: str) -> Awaitable[Any] | Any:
        """Change a file as another process would: no gate, not observed by the agent."""
        raise NotImplementedError("Dialect.external_write")

    def todo(self, ctx: Any, todos: tuple[TodoItem, ...]) -> Awaitable[Any] | Any:
        """Record a `todo/write` snapshot through your tool-owned events."""
        raise NotImplementedError("Dialect.todo")

    def hook(self, ctx: Any, point: str, handler_id: str, decision: str) -> Awaitable[Any] | Any:
        """Record `hook/invoked` and `hook/result` through your tool-owned events."""
        raise NotImplementedError("Dialect.hook")

    def defer_context(self, ctx: Any, text: str) -> Awaitable[Any] | Any:
        """Defer a context to after the batch's results (origin `tool`)."""
        raise NotImplementedError("Dialect.defer_context")

    # -- tools/post-execute ----------------------------------------------------------------

    def post_decision(self, action: Accept | Block) -> Any:
        """Your post-execute decision for an accept (content or value replaced, context added)
        or a block (feedback, context)."""
        raise NotImplementedError("Dialect.post_decision")

    def add_post_context(self, decision: Any, text: str) -> Any:
        """`decision` (what `next()` returned) with a context added."""
        raise NotImplementedError("Dialect.add_post_context")

    def post_outcome(self, decision: Any) -> str:
        """The trace outcome of your decision: "accept" or "block"."""
        raise NotImplementedError("Dialect.post_outcome")

    # -- results ---------------------------------------------------------------------------

    def result(self, result: Any) -> ResultRecord:
        """Your result as a trace records it: isError, content blocks, error, additionalContexts."""
        raise NotImplementedError("Dialect.result")

    def content(self, texts: list[str]) -> Any:
        """Your content (what finalizeContent returns) from text blocks."""
        raise NotImplementedError("Dialect.content")

    # -- tools/result observers ------------------------------------------------------------

    def mutate(self, outcome: Any, text: str) -> None:
        """Try to replace an announced outcome's content (the kit ignores any error: the
        outcome should be frozen)."""
        outcome.content = self.content([text])

    # -- Code Mode -------------------------------------------------------------------------

    def call_binding(self, bindings: Any, tool: str, arguments: Json) -> Awaitable[Any]:
        """Call a tool from a program: your binding call, resolving or raising a rejection."""
        return bindings.call(tool, arguments)  # type: ignore[no-any-return]

    def rejection(self, error: BaseException) -> Mapping[str, Json] | None:
        """Every field of the rejection a program was handed (a conforming one: toolName and
        message), or None when `error` is not a binding rejection. The default reads the public
        attributes of an exception that has a `tool_name` (or `toolName`), camel-cased."""
        fields = {_camel(k): jsonable(v) for k, v in vars(error).items() if not k.startswith("_")}
        return fields if "toolName" in fields else None

    def program_output(self, output: ProgramOutput) -> Any:
        """What your Code Mode runner expects a program to return."""
        return output
