"""The dialect: how the kit speaks to one harness.

The interpreters and the recorder know the scenario language and the trace; they do not know your
harness's types. A `Dialect` subclass, written once per harness, translates: it says what a call
is (its identity), builds your decisions and results from the scripts' actions, and reads your
decisions and results back for the trace. Every method is small; most are one line.

Methods that raise NotImplementedError here have no sensible default: override those your
scenarios reach (a harness without an fs gate never declares `fs-gate`, so `read`, `write` and
`edit` are never called). When a scenario reaches one you did not override, the kit answers the
scenario `errored`, naming the method.

The other methods have defaults that fit the kit's own shapes; override them where your harness
differs: how your waterfalls' `next` is called (`call_next`, `execute_next`), your cancellation
signal (`is_cancelled`, `wait_cancelled`, `child_signal`), your context objects (`context`), what
your tool bodies return (`body_result`), and the call a hook that is handed none is about
(`current_call`).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .cancel import CancelSignal, Signal
from .records import Identity, ResultRecord, jsonable
from .scenario import Abstain, Accept, Allow, Ask, Block, Deny, Json, Rewrite, TodoItem

ContextOrigin = Literal["tool", "wrapper", "post"]


class BodyCancelledError(Exception):
    """What a scripted body raises when it stops after its signal was cancelled (the default of
    `Dialect.cancelled`)."""

    def __init__(self, message: str = "tool call was cancelled") -> None:
        super().__init__(message)


Cancelled = BodyCancelledError
"""The former name of `BodyCancelledError`."""


class GlueError(TypeError):
    """A mistake in the adapter's glue that the kit detected (e.g. a `next` called in a way
    your pipeline does not take). The scenario is answered `errored` with its message."""


def _missing(method: str, what: str) -> NotImplementedError:
    return NotImplementedError(f"this scenario needs Dialect.{method}, which your dialect does not override: {what}")


def _takes(function: Callable[..., Any], count: int) -> bool:
    """Whether `function` can be called with `count` positional arguments (True when unknown)."""
    try:
        inspect.signature(function).bind(*range(count))
    except TypeError:
        return False
    except ValueError:  # no signature (a builtin): assume it can
        return True
    return True


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
        raise _missing("identity", "return tep.Identity(token, call_id, name, arguments) of what a stage was handed")

    def current_call(self) -> Any:
        """The call your pipeline is working on, for a hook it hands no call: a content-only
        `finalizeContent(content)` (`run.content_finalizer`). Read it from your harness's own
        state, e.g. a context variable it sets per call."""
        raise _missing(
            "current_call",
            "return the call your pipeline is finalizing (a content-only finalizeContent is handed no call), "
            "or mount run.content_finalizer(tool, call) per call",
        )

    # -- waterfalls ------------------------------------------------------------------------

    def call_next(self, next: Callable[..., Any], *handed: Any) -> Any:
        """Calls a waterfall's `next` from one of the kit's listeners: `handed` is what the
        listener was handed, `(call,)` in pre-execute and `(call, result)` in post-execute. The
        default calls `next()` with no arguments; if your pipeline's `next` takes the call,
        return `next(*handed)` (or `next(handed[0])`). May return the decision or an awaitable."""
        if not _takes(next, 0):
            raise GlueError(
                "the kit calls next() with no arguments, and your pipeline's next takes some: "
                "override Dialect.call_next(next, *handed) to call it as your pipeline expects, "
                "e.g. `return next(*handed)`"
            )
        return next()

    # -- tools/pre-execute -----------------------------------------------------------------

    def pre_decision(self, action: Allow | Deny | Ask | Rewrite) -> Any:
        """Your pre-execute decision for a scripted action. For Rewrite, return what your
        pipeline offers to allow with other arguments (e.g. an allow with an updated input)."""
        raise _missing("pre_decision", "return your pre-execute decision for a scripted allow, deny, ask or rewrite")

    def pre_decision_for(self, call: Any, action: Allow | Deny | Ask | Rewrite) -> Any:
        """`pre_decision` with the call the listener was handed (a harness whose decisions
        name their call). The default is `pre_decision(action)`."""
        return self.pre_decision(action)

    def pre_outcome(self, decision: Any) -> tuple[str, str | None]:
        """The trace outcome of your decision: ("allow" | "deny" | "ask", reason or None)."""
        raise _missing("pre_outcome", 'return ("allow" | "deny" | "ask", reason) for your decision')

    # -- ctx.approval ----------------------------------------------------------------------

    def approval_call_id(self, request: Any) -> str:
        """The call id an approval request is about."""
        raise _missing("approval_call_id", "return the call id your approval request is about")

    def approval_answer(self, outcome: str) -> Any:
        """Your prompt's answer for "allowed-once", "rejected", "cancelled" or "unavailable"."""
        return outcome

    # -- guards ----------------------------------------------------------------------------

    def guard_verdict(self, action: Abstain | Deny | Allow) -> Any:
        """Your guard's verdict (Allow: whatever your guard API lets a guard try to allow with)."""
        raise _missing("guard_verdict", "return your guard's verdict for a scripted abstain, deny or allow")

    # -- tools/execute ---------------------------------------------------------------------

    def execute_call(self, handed: Any) -> tuple[Any, Any, int | None]:
        """What an execute wrapper was handed: (the call, its cancellation signal, the tool's
        declared timeout in ms or None)."""
        raise _missing("execute_call", "return (call, signal, timeout ms or None) from what a wrapper was handed")

    def execute_next(self, next: Callable[..., Any], handed: Any, signal: Any) -> Awaitable[Any]:
        """Calls a wrapper's `next` to run the rest of `tools/execute` with `signal` (the one the
        wrapper was handed, or the timeout's child of it). The default is `next(signal)`; if your
        `next` takes the handed object, or nothing, return e.g. `next(replace(handed, signal=signal))`."""
        if not _takes(next, 1):
            raise GlueError(
                "the kit calls a wrapper's next(signal), and your pipeline's next takes other arguments: "
                "override Dialect.execute_next(next, handed, signal) to call it as your pipeline expects"
            )
        return next(signal)  # type: ignore[no-any-return]

    def timeout_result(self, ms: int) -> Any:
        """Your TOOL_TIMEOUT error result: "tool call timed out after {ms}ms"."""
        raise _missing("timeout_result", "return your TOOL_TIMEOUT error result")

    def with_wrapper_context(self, result: Any, text: Any) -> Any:
        """`result` with a context added by a wrapper (origin `wrapper`): `text` is what
        `context(text, "wrapper")` built (the text itself by default)."""
        raise _missing("with_wrapper_context", "return the result with a wrapper context added")

    def is_error(self, result: Any) -> bool:
        return self.result(result)["isError"]

    # -- cancellation ----------------------------------------------------------------------

    def is_cancelled(self, signal: Any) -> bool:
        """Whether your cancellation signal is set. The default reads `is_set()` (asyncio.Event,
        threading.Event, tep.CancelSignal), else an `aborted` or `cancelled` attribute."""
        for name in ("is_set", "is_cancelled"):
            method = getattr(signal, name, None)
            if callable(method):
                return bool(method())
        for name in ("aborted", "cancelled"):
            if hasattr(signal, name):
                value = getattr(signal, name)
                return bool(value() if callable(value) else value)
        raise _missing("is_cancelled", f"say whether your signal ({type(signal).__name__}) is set")

    async def wait_cancelled(self, signal: Any) -> None:
        """Waits until your signal is set. The default awaits an async `wait()` (asyncio.Event,
        tep.CancelSignal), else polls `is_cancelled` every 5 ms."""
        wait = getattr(signal, "wait", None)
        if callable(wait) and inspect.iscoroutinefunction(wait):
            await wait()
            return
        while not self.is_cancelled(signal):
            await asyncio.sleep(0.005)

    def child_signal(self, parent: Any) -> tuple[Any, Callable[[], None]]:
        """A signal of your type, set when `parent` is and cancellable on its own, and the
        function that cancels it: what the kit's timeout wrapper hands `next`. The default is a
        `tep.CancelSignal`, which fits a harness whose signals are anything with `is_set()` and
        `wait()`; override it if your `next` expects your own signal type."""
        child = CancelSignal(self.as_signal(parent))
        return child, child.set

    def as_signal(self, signal: Any) -> Signal:
        """Your signal as the kit's `tep.Signal` (`is_set()` and an async `wait()`), through
        `is_cancelled` and `wait_cancelled`; a signal that already is one is returned as it is."""
        wait = getattr(signal, "wait", None)
        if isinstance(signal, Signal) and inspect.iscoroutinefunction(wait):
            return signal
        return _Polled(self, signal)

    # -- the body --------------------------------------------------------------------------

    def body_call(self, ctx: Any) -> tuple[Any, Any]:
        """What a tool body was handed: (the call, its cancellation signal). If your pipeline
        hands a body several arguments, they all come here (override with that many)."""
        raise _missing("body_call", "return (call, signal) from what a tool body was handed")

    def body_result(self, value: Json, ctx: Any) -> Any:
        """What `run.body` returns for the scripted body's value: the value itself (a JSON value,
        which your tool definition renders: a string as is, other JSON pretty-printed). If your
        bodies return your own result type, build it here."""
        return value

    def cancelled(self) -> BaseException:
        """What a body raises when it stops after cancellation (your ABORTED error, ideally)."""
        return BodyCancelledError()

    def read(self, ctx: Any, path: str) -> Awaitable[Any] | Any:
        """Read a file through your fs tools (they record `fs/observed`); raise if missing."""
        raise _missing("read", "read the file through your fs tools")

    def write(self, ctx: Any, path: str, content: str) -> Awaitable[Any] | Any:
        """Create or overwrite a file through your `fs/write-intent` gate."""
        raise _missing("write", "write the file through your fs/write-intent gate")

    def edit(self, ctx: Any, path: str, old: str, new: str) -> Awaitable[Any] | Any:
        """Replace `old` with `new` through your `fs/edit-intent` gate."""
        raise _missing("edit", "edit the file through your fs/edit-intent gate")

    def external_write(self, ctx: Any, path: str, content: str) -> Awaitable[Any] | Any:
        """Change a file as another process would: no gate, not observed by the agent."""
        raise _missing("external_write", "change the file as another process would")

    def todo(self, ctx: Any, todos: tuple[TodoItem, ...]) -> Awaitable[Any] | Any:
        """Record a `todo/write` snapshot through your tool-owned events."""
        raise _missing("todo", "record todo/write through your tool-owned events")

    def hook(self, ctx: Any, point: str, handler_id: str, decision: str) -> Awaitable[Any] | Any:
        """Record `hook/invoked` and `hook/result` through your tool-owned events."""
        raise _missing("hook", "record hook/invoked and hook/result through your tool-owned events")

    def defer_context(self, ctx: Any, text: Any) -> Awaitable[Any] | Any:
        """Defer a context to after the batch's results (origin `tool`): `text` is what
        `context(text, "tool")` built."""
        raise _missing("defer_context", "defer a context to after the batch's results")

    # -- contexts --------------------------------------------------------------------------

    def context(self, text: str, origin: ContextOrigin) -> Any:
        """Your context (or message) object for a scripted context text: what the kit hands
        `with_wrapper_context` ("wrapper"), `add_post_context` ("post") and `defer_context`
        ("tool"). The default is the text itself."""
        return text

    # -- tools/post-execute ----------------------------------------------------------------

    def post_decision(self, action: Accept | Block) -> Any:
        """Your post-execute decision for an accept (content or value replaced, context added)
        or a block (feedback, context)."""
        raise _missing("post_decision", "return your post-execute decision for a scripted accept or block")

    def post_decision_for(self, call: Any, result: Any, action: Accept | Block) -> Any:
        """`post_decision` with the call and the result the listener was handed. The default is
        `post_decision(action)`."""
        return self.post_decision(action)

    def add_post_context(self, decision: Any, text: Any) -> Any:
        """`decision` (what `next()` returned) with a context added: `text` is what
        `context(text, "post")` built."""
        raise _missing("add_post_context", "return the decision next() returned with a context added")

    def post_outcome(self, decision: Any) -> str:
        """The trace outcome of your decision: "accept" or "block"."""
        raise _missing("post_outcome", 'return "accept" or "block" for your decision')

    # -- results ---------------------------------------------------------------------------

    def result(self, result: Any) -> ResultRecord:
        """Your result as a trace records it: isError, content blocks, error, additionalContexts.
        The default reads a mapping already in that shape; override it for your result type."""
        if isinstance(result, Mapping) and "isError" in result and "content" in result:
            return jsonable(result)  # type: ignore[no-any-return]
        raise _missing(
            "result",
            f"return {{isError, content, error?, additionalContexts?}} for your result ({type(result).__name__})",
        )

    def content(self, texts: list[str]) -> Any:
        """Your content (what finalizeContent returns) from text blocks."""
        raise _missing("content", "return your content (what finalizeContent returns) from text blocks")

    def content_texts(self, content: Any) -> list[str]:
        """The texts of your content, as a content-only finalizeContent is handed it. The default
        reads a string, or a sequence of strings, of `{"text": ...}` mappings or of objects with
        a `text` attribute."""
        if isinstance(content, str):
            return [content]
        if isinstance(content, Sequence):
            texts = []
            for block in content:
                text = block if isinstance(block, str) else block.get("text") if isinstance(block, Mapping) else None
                text = getattr(block, "text", None) if text is None else text
                if not isinstance(text, str):
                    break
                texts.append(text)
            else:
                return texts
        raise _missing("content_texts", f"return the texts of your content ({type(content).__name__})")

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


class _Polled:
    """A harness signal seen through `Dialect.is_cancelled`, as a `tep.Signal`."""

    def __init__(self, dialect: Dialect, signal: Any) -> None:
        self._dialect = dialect
        self._signal = signal

    def is_set(self) -> bool:
        return self._dialect.is_cancelled(self._signal)

    async def wait(self) -> None:
        await self._dialect.wait_cancelled(self._signal)
