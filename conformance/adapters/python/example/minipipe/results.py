"""Results and failures: what a call produces, and how any throw becomes an error result."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal


@dataclass(frozen=True)
class TextBlock:
    text: str

    def to_json(self) -> dict[str, str]:
        return {"type": "text", "text": self.text}


Content = tuple[TextBlock, ...]


def text(*texts: str) -> Content:
    return tuple(TextBlock(t) for t in texts)


def render(value: Any) -> Content:
    """A body's value as model-facing content: a string as is, other JSON pretty-printed."""
    return text(value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False))


class ToolError(Exception):
    """A failure with an error code; its class name is the error's name."""

    code: ClassVar[str | None] = None
    error_name: ClassVar[str | None] = None

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class AbortError(ToolError):
    code = "ABORTED"


class AbortedBeforeDispatch(AbortError):
    code = "ABORTED_BEFORE_DISPATCH"
    error_name = "AbortError"


class ToolTimeoutError(ToolError):
    code = "TOOL_TIMEOUT"


class UnknownToolError(ToolError):
    code = "UNKNOWN_TOOL"


class CodeRunFailedError(ToolError):
    code = "CODE_RUN_FAILED"


@dataclass(frozen=True)
class Failure:
    message: str
    code: str | None = None
    name: str | None = None

    @classmethod
    def of(cls, error: BaseException) -> Failure:
        message = str(error) or type(error).__name__
        if isinstance(error, ToolError) and error.code is not None:
            return cls(message, error.code, error.error_name or type(error).__name__)
        return cls(message)

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {"message": self.message}
        if self.code is not None:
            found["info"] = {"name": self.name, "code": self.code}
        return found


Origin = Literal["tool", "wrapper", "post"]


@dataclass(frozen=True)
class Context:
    """Model-visible text a call asks to inject after the batch's results."""

    origin: Origin
    text: str


@dataclass(frozen=True)
class ToolResult:
    """A call's outcome. Frozen: once announced, nobody can change it."""

    content: Content
    is_error: bool = False
    error: Failure | None = None
    contexts: tuple[Context, ...] = ()
    value: Any = field(default=None, compare=False)
    """Execution-local: never serialized."""

    @classmethod
    def success(cls, value: Any, content: Content) -> ToolResult:
        return cls(content, value=value)

    @classmethod
    def failure(cls, failure: Failure) -> ToolResult:
        return cls(text(f"Error: {failure.message}"), is_error=True, error=failure)

    @classmethod
    def from_exception(cls, error: BaseException) -> ToolResult:
        """Outer normalization: a throw becomes an error result (its contexts are lost)."""
        return cls.failure(Failure.of(error))

    def with_contexts(self, origin: Origin, *texts: str) -> ToolResult:
        return replace(self, contexts=self.contexts + tuple(Context(origin, t) for t in texts))

    @property
    def text(self) -> str:
        return "\n".join(block.text for block in self.content)

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {"isError": self.is_error, "content": [b.to_json() for b in self.content]}
        if self.error is not None:
            found["error"] = self.error.to_json()
        if self.contexts:
            found["additionalContexts"] = [{"origin": c.origin, "text": c.text} for c in self.contexts]
        return found


class ToolCallError(Exception):
    """What a Code Mode program sees when a binding call is denied or fails: the tool's name and
    a message, nothing else."""

    def __init__(self, tool_name: str, message: str) -> None:
        super().__init__(f"{tool_name}: {message}")
        self.tool_name = tool_name
        self.message = message
