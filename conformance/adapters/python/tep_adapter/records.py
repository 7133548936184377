"""The shapes of trace records (docs/events.md, docs/schemas/trace-record.schema.json)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from .scenario import Json

ObservationLevel = Literal["events", "hooks", "full"]
Capability = Literal["approval", "fs-gate", "parallel", "owned-events", "ui", "code-mode"]
ALL_CAPABILITIES: tuple[Capability, ...] = ("approval", "fs-gate", "parallel", "owned-events", "ui", "code-mode")

Record = dict[str, Any]
"""One trace record: a `stage`, an `event`, a `mark` or the `header`."""


class ContentBlock(TypedDict):
    """A text block. A block of another type a harness writes (an `image`, a plugin's own) is
    a mapping with a string `type`; the kit records it whole and reads no text from it."""

    type: Literal["text"]
    text: str


class ErrorInfo(TypedDict):
    name: str
    code: str


class _ResultErrorBase(TypedDict):
    message: str


class ResultError(_ResultErrorBase, total=False):
    info: ErrorInfo


class AdditionalContext(TypedDict):
    origin: Literal["tool", "wrapper", "post"]
    text: str


class _ResultBase(TypedDict):
    isError: bool
    content: list[ContentBlock]


class ResultRecord(_ResultBase, total=False):
    """A result as stages record it (`post`, `finalize`, `final`, `around`)."""

    error: ResultError
    meta: Json
    additionalContexts: list[AdditionalContext]


def text_block(text: str) -> ContentBlock:
    return {"type": "text", "text": text}


def texts_of(result: ResultRecord) -> list[str]:
    """The texts of a result's text blocks (blocks of other types have none)."""
    return [block["text"] for block in result["content"] if block.get("type") == "text"]


def jsonable(value: Any) -> Json:
    """A JSON value from mappings and sequences (a harness may hand frozen arguments)."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (str, bytes)) or value is None:
        return value
    if isinstance(value, Sequence):
        return [jsonable(v) for v in value]
    return value


@dataclass(frozen=True)
class Identity:
    """What a stage was handed of a call: its execution token, id, tool name and arguments.

    `parent` and `parent_token` are set for a Code Mode sub-call: the `run_code` call it was issued
    from and that execution's token.
    """

    token: str
    call_id: str
    name: str
    arguments: Json
    parent_token: str | None = None
    parent: str | None = None

    def record(self) -> dict[str, Json]:
        found: dict[str, Json] = {
            "token": self.token,
            "callId": self.call_id,
            "name": self.name,
            "arguments": jsonable(self.arguments),
        }
        if self.parent_token is not None:
            found["parentToken"] = self.parent_token
        return found
